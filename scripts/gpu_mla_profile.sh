#!/usr/bin/env bash
# Nsight Compute look at the sparse MLA kernels behind issue 6's missed targets (session 5): where the time of
# one kernel goes (tensor / shared-memory pipe use, warp stall reasons, the instructions the stalls sit on), from
# binaries built on the development machine (scripts/pack_prebuilt.sh).
#
#   bash scripts/pack_prebuilt.sh build-gpu90 .carry/final/prebuilt && rm -rf .carry/final/prebuilt   (here)
#   [SET=v7] OUT=$OUT bash scripts/gpu_mla_profile.sh                              (device, carry .carry/final)
#
# SET=s5 (default): bf16 T=128 H=64 (the 250 TFLOP/s target; kernel_variant 5), FP8 (variant 7) and bf16 at
# T=128 H=8 (the 1.6x target), bf16 T=1 H=128 (the 10 us target). SET=v7: variant 7 at T=128 H=8 with four and
# with three CTAs per SM (GLM5RT_MLA_REG4 = 1 / 0). SET=s9: variant 7 at FP8 T=128 H=8 and variant 10 at bf16 T=1
# H=128 (session 9). SET=v10: variant 10 at bf16 T=128 H=64 and prefill 4096 x 64 (session 6). SET=v11: variants 11 and 10 at bf16 T=128 H=64 (session 7).
# SET=v14: variant 14 at bf16 T=128 H=64 (session 11). SET=v16: variant 16 at FP8 T=128 H=8, DRAM and L2 (session 27). SET=v14pre: variant 14's persistent form at prefill 4096 x 64 (session 20). SET=s16: variant 10 at bf16 T=1 H=128 and 64, planned (session 16). SET=v14fp8: variant 14 at FP8 and bf16 T=128 H=64 (session 12). SET=v14p: variant 14's one-CTA and persistent forms at bf16 T=128 H=64 (session 18). SET=v14raw: variant 14 at FP8 T=128 H=64, raw and converting in place (session 29).
# Per kernel: the details page, the per-instruction SASS page
# (CSV) and its stall summary (bench/sparse_mla/sass_stalls.py), packed into $OUT/profile.tgz; a short summary is
# printed.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/device_prebuilt.sh
NCU=$(find_ncu)
D=$OUT/profile
mkdir -p "$D"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$D/device.txt" 2>&1

# profile NAME KERNEL_REGEX ENV_ASSIGNMENT BENCH_ARGS...   (ENV_ASSIGNMENT: e.g. GLM5RT_MLA_REG4=1, or - for none)
profile() {
  local name=$1 re=$2 envs=()
  [ "$3" != - ] && envs=("$3")
  shift 3
  stamp "profile $name (${envs[*]:-defaults})"
  # shellcheck disable=SC2086  # NCU_SECTIONS: options
  env ${envs[@]+"${envs[@]}"} timeout "${NCU_TIMEOUT:-200}" "$NCU" --clock-control none ${NCU_SECTIONS:---set full} \
    --import-source no -k "regex:$re" \
    --launch-count 1 -f -o "$D/$name" "$B/glm5rt_bench_sparse_mla" --no-sweep --quick --reps 1 "$@" \
    > "$D/$name-run.txt" 2>&1
  "$NCU" -i "$D/$name.ncu-rep" --page details > "$D/$name-details.txt" 2>&1
  "$NCU" -i "$D/$name.ncu-rep" --page source --csv --print-source sass > "$D/$name-sass.csv" 2>&1
  rm -f "$D/$name.ncu-rep"
  python3 bench/sparse_mla/sass_stalls.py "$D/$name-sass.csv" --top 25 > "$D/$name-stalls.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Issue Slots Busy|Eligible Warps|Active Warps Per|Registers Per" "$D/$name-details.txt" | head -8
  head -8 "$D/$name-stalls.txt"
}
{
  case "${SET:-s5}" in
    v16)
      # Session 27: variant 16 (FP8, 8 heads per CTA, a consumer warp per step) at T=128 H=8 as the launcher runs it
      # (2 splits), from DRAM and over one L2-resident pool (the prefill row).
      profile v16-t128-h8 "sparse_mla_wsf_kernel" - --T 128 --H 8 --variants 0 --formats fp8
      profile v16-l2-t128-h8 "sparse_mla_wsf_kernel" - --T "" --prefill-T 128 --prefill-H 8 --variants 0 --formats fp8
      ;;
    v14raw)
      # Session 29: variant 14 at FP8 T=128 H=64 reading the records raw (kernel_variant 17's form) and converting them
      # in place (the shipped form), as the launcher runs them (one split). Binaries of 1c1546e: the raw form was
      # measured slower and removed.
      profile v14raw-t128-h64 "sparse_mla_wsp_kernel" GLM5RT_MLA_V14_RAW=1 --T 128 --H 64 --variants 0 --formats fp8
      profile v14conv-t128-h64 "sparse_mla_wsp_kernel" GLM5RT_MLA_V14_RAW=0 --T 128 --H 64 --variants 0 --formats fp8
      ;;
    v7)
      profile v7-reg4-1 "sparse_mla_reg_kernel" GLM5RT_MLA_REG4=1 --T 128 --H 8 --variants 7
      profile v7-reg4-0 "sparse_mla_reg_kernel" GLM5RT_MLA_REG4=0 --T 128 --H 8 --variants 7
      ;;
    v14)
      profile v14-t128-h64 "sparse_mla_wsp_kernel" - --T 128 --H 64 --variants 14 --formats bf16
      ;;
    v14pre)
      # Session 20: the persistent step at prefill 4096 x 64 (2048 entries), as the launcher runs it (the first
      # variant-14 launch: no decode shapes). NCU_SECTIONS may narrow the sections (fewer replays).
      profile v14p-prefill "sparse_mla_wsp_kernel" - --T "" --prefill-T 4096 --prefill-H 64 --variants 0 --formats bf16
      ;;
    v14p)
      # Session 18: the persistent form's step loop against the one-CTA form's on the same grid (one item per CTA).
      profile v14-t128-h64 "sparse_mla_wsp_kernel" - --T 128 --H 64 --variants 14 --formats bf16
      profile v14p-t128-h64 "sparse_mla_wsp_kernel" GLM5RT_MLA_PERSIST=2 --T 128 --H 64 --variants 14 --formats bf16
      ;;
    v14fp8)
      profile v14-fp8-t128-h64 "sparse_mla_wsp_kernel" - --T 128 --H 64 --variants 14 --formats fp8
      profile v14-t128-h64 "sparse_mla_wsp_kernel" - --T 128 --H 64 --variants 14 --formats bf16
      ;;
    v11)
      profile v11-t128-h64 "sparse_mla_wsg_kernel" - --T 128 --H 64 --variants 11 --formats bf16
      profile v10-t128-h64 "sparse_mla_wsr_kernel" - --T 128 --H 64 --variants 10 --formats bf16
      ;;
    s9)
      profile v7-fp8-t128-h8 "sparse_mla_reg_kernel" - --T 128 --H 8 --variants 7 --formats fp8
      profile v10-t1-h128 "sparse_mla_wsr_kernel" - --T 1 --H 128 --variants 10 --formats bf16
      ;;
    s16)
      # Session 16: variant 10's 16-head CTA at T=1 as the planner runs it (16 x 16 at H=128, 16 x 32 at H=64)
      profile v10-t1-h128 "sparse_mla_wsr_kernel" - --T 1 --H 128 --variants 0 --formats bf16
      profile v10-t1-h64 "sparse_mla_wsr_kernel" - --T 1 --H 64 --variants 0 --formats bf16
      ;;
    v10)
      profile v10-t128-h64 "sparse_mla_wsr_kernel" - --T 128 --H 64 --variants 10
      profile v10-prefill-4096-h64 "sparse_mla_wsr_kernel" - --T 1 --H 64 --variants 10 --prefill-T 4096 --prefill-H 64 --formats bf16
      ;;
    *)
      profile h64_bf16 "sparse_mla_ws_kernel" - --T 128 --H 64 --variants 5
      profile h8_fp8 "sparse_mla_reg_kernel" - --T 128 --H 8 --variants 7
      profile h8_bf16 "sparse_mla_(ws|pipe)_kernel" - --T 128 --H 8 --variants 5
      profile t1_h128 "sparse_mla_(ws|pipe|kernel)" - --T 1 --H 128 --variants 2
      ;;
  esac
  stamp end
} 2>&1 | tee "$D/profile.txt"
tar -czf "$OUT/profile.tgz" -C "$OUT" profile && rm -rf "$D"

#!/usr/bin/env bash
# Session 16: a list of T=1 timeline probes (bench/sparse_mla/mla_timeline.cu) in one device call, each with its
# own environment and flags, to tell apart what bounds variant 10's step cadence (the gather's latency, the
# aggregate L2 -> SM bandwidth, or the consumer warps' chain). PROBES: entries separated by ';', each
# "label|VAR=value ...|flags", e.g. "hot|| --H 128 --pool 4096;cw1|GLM5RT_MLA_WS_COPY_WARPS=1| --H 64".
#   P=.carry/s16/prebuilt COMMIT=<sha> OUT=$OUT PROBES="..." bash scripts/gpu_mla_probe.sh   (device, carry .carry/s16)
# Each probe's table goes to $OUT/probe-<label>.txt / .json and the log; everything is packed into $OUT/probe.tgz.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
source scripts/lib/device_prebuilt.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  IFS=';' read -ra entries <<< "${PROBES:?set PROBES}"
  for e in "${entries[@]}"; do
    IFS='|' read -r label envs flags <<< "$e"
    label=$(echo "$label" | tr -d ' ')
    stamp "probe $label: ${envs:-(default)} $flags"
    # shellcheck disable=SC2086  # envs and flags: words split on purpose
    env $envs timeout "${PROBE_TIMEOUT:-60}" "$B/glm5rt_bench_mla_timeline" $flags --json "$OUT/probe-$label.json" \
      > "$OUT/probe-$label.txt" 2>&1
    echo "rc $?"; cat "$OUT/probe-$label.txt"
  done
  stamp done
} 2>&1 | tee "$OUT/log.txt"
tar -czf "$OUT/probe.tgz" -C "$OUT" --exclude=probe.tgz . 2>/dev/null
find "$OUT" -mindepth 1 -not -name probe.tgz -delete

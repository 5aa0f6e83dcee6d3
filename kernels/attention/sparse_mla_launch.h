// Internal: per-format launch entry points (one translation unit each, so they compile in parallel).
#pragma once

#include <cuda_runtime.h>

#include "kernels/attention/sparse_mla_kernel.cuh"
#include "kernels/attention/sparse_mla_pipe_kernel.cuh"
#include "kernels/attention/sparse_mla_reg_kernel.cuh"
#include "kernels/attention/sparse_mla_ws_kernel.cuh"
#include "kernels/attention/sparse_mla_wsg_kernel.cuh"
#include "kernels/attention/sparse_mla_wsp_kernel.cuh"
#include "kernels/attention/sparse_mla_wsf16_kernel.cuh"
#include "kernels/attention/sparse_mla_wsf_kernel.cuh"
#include "kernels/attention/sparse_mla_wsr_kernel.cuh"
#include "kernels/gemm/launch.cuh"

namespace glm5rt::kernels::sparse_mla_detail {

// Launch the main kernel with `heads_per_cta` in {8, 16, 32} (64: variant 14 only); grid = T * nsplit * (H /
// heads_per_cta).
cudaError_t launch_bf16(int heads_per_cta, const KernelArgs& a, cudaStream_t stream);
cudaError_t launch_fp8(int heads_per_cta, const KernelArgs& a, cudaStream_t stream);
// The pipelined kernel (16-token ring of cp.async slots), same grid and arguments. two_per_sm: the 32-head
// kernel compiled for two CTAs per SM (128 registers per thread); fewer heads per CTA fit two anyway.
cudaError_t launch_pipe_bf16(int heads_per_cta, bool two_per_sm, const KernelArgs& a, cudaStream_t stream);
cudaError_t launch_pipe_fp8(int heads_per_cta, bool two_per_sm, const KernelArgs& a, cudaStream_t stream);
// The warp-specialized kernel (producer warp + 16-head consumer groups on mbarriers), same grid and arguments.
cudaError_t launch_ws_bf16(int heads_per_cta, const KernelArgs& a, cudaStream_t stream);
cudaError_t launch_ws_fp8(int heads_per_cta, const KernelArgs& a, cudaStream_t stream);
// kernel_variant 10: variant 5 with the softmax in registers (sparse_mla_wsr_kernel.cuh); bf16 records, 16 or
// 32 heads per CTA (the caller runs variant 5 elsewhere).
cudaError_t launch_wsr_bf16(int heads_per_cta, const KernelArgs& a, cudaStream_t stream);
// kernel_variant 11: one 8-warp consumer group for the CTA's 32 heads (sparse_mla_wsg_kernel.cuh); bf16 records,
// 32 heads per CTA only (the caller runs variant 10 / 5 elsewhere).
cudaError_t launch_wsg_bf16(int heads_per_cta, const KernelArgs& a, cudaStream_t stream);
// kernel_variant 14: four warp pairs for the CTA's 64 heads (sparse_mla_wsp_kernel.cuh); 64 heads per CTA only (the
// only kernel with 64 heads per CTA). FP8 records (session 12) are converted to bf16 rows in shared memory.
cudaError_t launch_wsp_bf16(int heads_per_cta, const KernelArgs& a, cudaStream_t stream);
cudaError_t launch_wsp_fp8(int heads_per_cta, const KernelArgs& a, cudaStream_t stream);
// kernel_variant 7: FP8 records converted in registers by each warp (sparse_mla_reg_kernel.cuh); FP8 only.
// dense: the 8-head kernel four CTAs per SM or the 16-head kernel three (RegCfg<hc, true>; the caller, reg_dense,
// checks that they fit).
cudaError_t launch_reg_fp8(int heads_per_cta, bool dense, const KernelArgs& a, cudaStream_t stream);
// kernel_variant 16: FP8 records, 8 heads per CTA, a consumer warp per 16-token step (sparse_mla_wsf_kernel.cuh;
// sm_90+: the caller runs variant 7 elsewhere).
// self_gathering: four consumer warps copying their own steps (WsfCfg<4, true>: 101 KB of shared memory per block, so
// H100 / H200 only), else three and a producer warp (WsfCfg<3>: <= 99 KB).
cudaError_t launch_wsf_fp8(bool self_gathering, const KernelArgs& a, cudaStream_t stream);
// Its 16-head form: two warp pairs, each pair's warps splitting a step's latent dims (sparse_mla_wsf16_kernel.cuh;
// Wsf16Cfg: <= 99 KB, every sm_90+ device).
cudaError_t launch_wsf16_fp8(const KernelArgs& a, cudaStream_t stream);

// Dynamic shared memory of the kernel that runs for (variant, heads per CTA, format): the split planner
// uses it to count how many CTAs share an SM.
template <template <int, bool> class Config>
int smem_of(int hc, bool fp8) {
  switch (hc) {
    case 8: return fp8 ? Config<8, true>::kSmemBytes : Config<8, false>::kSmemBytes;
    case 16: return fp8 ? Config<16, true>::kSmemBytes : Config<16, false>::kSmemBytes;
    default: return fp8 ? Config<32, true>::kSmemBytes : Config<32, false>::kSmemBytes;
  }
}
inline int reg_smem_bytes(int hc, bool dense = false) {
  if (hc == 8) return dense ? RegCfg<8, true>::kSmemBytes : RegCfg<8>::kSmemBytes;
  if (hc == 16) return dense ? RegCfg<16, true>::kSmemBytes : RegCfg<16>::kSmemBytes;
  return RegCfg<32>::kSmemBytes;
}
// Variant 10 with 16 / 32 heads per CTA and bf16 records: its own layout; elsewhere it runs variant 5.
inline bool runs_wsr(int variant, int hc, bool fp8) { return variant == 10 && hc >= 16 && !fp8; }
// Variant 11 with 32 heads per CTA and bf16 records: its own layout; elsewhere it runs variant 10's choice.
inline bool runs_wsg(int variant, int hc, bool fp8) { return variant == 11 && hc == 32 && !fp8; }
// Variant 14: 64 heads per CTA, either record format (the launcher runs it wherever a CTA holds 64 heads).
inline bool runs_wsp(int variant, int hc) { return variant == 14 && hc == 64; }
// Variant 16 with 8 or 16 heads per CTA and FP8 records (sm_90+; the launcher checks the architecture); elsewhere
// variant 7.
inline bool runs_wsf(int variant, int hc, bool fp8) { return variant == 16 && (hc == 8 || hc == 16) && fp8; }
inline int kernel_smem_bytes(int variant, int hc, bool fp8) {
  // (At 8 heads the producer form's size: both forms fit two CTAs on an H100 / H200 SM, and SM120 runs this one.)
  if (runs_wsf(variant, hc, fp8)) return hc == 16 ? Wsf16Cfg::kSmemBytes : WsfCfg<3>::kSmemBytes;
  if (variant == 16) variant = 7;
  if (runs_wsp(variant, hc)) return fp8 ? WspCfg<true>::kSmemBytes : WspCfg<false>::kSmemBytes;
  if (variant == 1) return smem_of<Cfg>(hc, fp8);
  if (runs_wsg(variant, hc, fp8)) return WsgCfg::kSmemBytes;
  if (runs_wsr(variant == 11 ? 10 : variant, hc, fp8))
    return hc == 16 ? WsrCfg<16>::kSmemBytes : WsrCfg<32>::kSmemBytes;
  if (variant == 7) return fp8 ? reg_smem_bytes(hc) : smem_of<PipeCfg>(hc, false);  // bf16 records: variant 2
  return variant >= 5 ? smem_of<WsCfg>(hc, fp8) : smem_of<PipeCfg>(hc, fp8);
}

// One launch of `kernel` (its config C: kThreads, kSmemBytes) over the grid T * nsplit * (H / HC).
// carveout: the shared memory carveout preference in percent (a hint: the driver still gives a block what it
// needs), or kCarveoutAny to leave it unset. kCarveoutShared (all of it shared) for the ring kernels whose two CTAs
// (2 x <= 99 KB) share an SM where it has 227 KB (their gathers bypass L1 with cp.async.cg / bulk copies);
// cudaSharedmemCarveoutMaxL1 for variant 14 (one CTA per SM: what its block does not need stays L1, where its
// Q and index rows are prefetched). Both attributes are host-side, not stream operations, so this is allowed during
// graph capture; above 48 KB a block needs the opt-in.
inline constexpr int kCarveoutAny = -1;
inline constexpr int kCarveoutShared = cudaSharedmemCarveoutMaxShared;
template <class C, int HC>
cudaError_t launch_grid(void (*kernel)(KernelArgs), int carveout, const KernelArgs& a, cudaStream_t stream) {
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmemBytes);
  if (err != cudaSuccess) return err;
  if (carveout != kCarveoutAny) {
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, carveout);
    if (err != cudaSuccess) return err;
  }
  int64_t blocks = static_cast<int64_t>(a.num_tokens) * a.nsplit * (a.num_heads / HC);
  if (blocks <= 0) return cudaSuccess;
  if (a.grid_ctas > 0 && blocks > a.grid_ctas) blocks = a.grid_ctas;  // variant 14's persistent grid
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  // a.pdl (sm_90+): a programmatic dependent of the previous kernel in the stream; the kernel waits for it in
  // wait_for_predecessor().
  return kernels::detail::launch(kernel, dim3(static_cast<unsigned>(blocks)), dim3(C::kThreads), C::kSmemBytes,
                                 stream, a.pdl != 0, a);
}

template <int HC, bool FP8>
cudaError_t launch_one(const KernelArgs& a, cudaStream_t stream) {
  return launch_grid<Cfg<HC, FP8>, HC>(sparse_mla_kernel<HC, FP8>, kCarveoutAny, a, stream);
}
template <int HC, bool FP8, int MINB>
cudaError_t launch_pipe_one(const KernelArgs& a, cudaStream_t stream) {
  return launch_grid<PipeCfg<HC, FP8>, HC>(sparse_mla_pipe_kernel<HC, FP8, MINB>, kCarveoutShared, a, stream);
}
template <int HC, bool FP8>
cudaError_t launch_ws_one(const KernelArgs& a, cudaStream_t stream) {
  return launch_grid<WsCfg<HC, FP8>, HC>(sparse_mla_ws_kernel<HC, FP8>, kCarveoutShared, a, stream);
}
template <int HC>
cudaError_t launch_wsr_one(const KernelArgs& a, cudaStream_t stream) {
  // (Four chains only at 16 heads: the 32-head kernel, the automatic one at 32 heads since session 30, would spill.)
  return a.wsr_chains4 && HC == 16
             ? launch_grid<WsrCfg<HC>, HC>(sparse_mla_wsr_kernel<HC, HC == 16>, kCarveoutShared, a, stream)
             : launch_grid<WsrCfg<HC>, HC>(sparse_mla_wsr_kernel<HC, false>, kCarveoutShared, a, stream);
}
template <int HC, bool DENSE = false>
cudaError_t launch_reg_one(const KernelArgs& a, cudaStream_t stream) {
  return launch_grid<RegCfg<HC, DENSE>, HC>(sparse_mla_reg_kernel<HC, DENSE>, kCarveoutShared, a, stream);
}

}  // namespace glm5rt::kernels::sparse_mla_detail

// Launcher of the FP8 block-scaled GEMM: parameter checks, path choice, grid shapes. Only the
// instantiations GLM-5 needs (token tiles of 8, 16 and 32 for decode) are compiled.
#include "kernels/gemm/fp8_gemm.h"
#include "kernels/gemm/fp8_gemm_decode.cuh"
#include "kernels/gemm/fp8_gemm_prefill.cuh"

namespace glm5rt::kernels {
namespace {

constexpr int kDecodeDepth = 4;  // K blocks in flight per lane: 4 x 64 B per lane, ~8 KB per warp

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

cudaError_t check_fp8_mma_support() {
  int dev = 0, major = 0, minor = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  if ((e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev)) != cudaSuccess) return e;
  if ((e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev)) != cudaSuccess) return e;
  return (major * 10 + minor >= 89) ? cudaSuccess : cudaErrorNotSupported;
}

template <int NT>
cudaError_t launch_decode(const Fp8GemmParams& p, cudaStream_t stream) {
  const dim3 grid((p.n + kFp8Block - 1) / kFp8Block, p.group_offsets ? p.max_active : 1);
  detail::fp8_gemm_decode_kernel<NT, kDecodeDepth><<<grid, detail::kDecodeThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace

cudaError_t fp8_gemm(const Fp8GemmParams& in, cudaStream_t stream) {
  Fp8GemmParams p = in;
  if (p.num_parts < 1) return cudaErrorInvalidValue;
  if (p.part_rows == 0 && p.num_parts == 1) p.part_rows = p.n;
  if (p.n < 2 || p.n % 2 != 0 || p.k <= 0 || p.k % kFp8Block != 0 || p.max_rows < 0 || p.num_groups < 1)
    return cudaErrorInvalidValue;
  if (p.num_parts > 1 && (p.part_rows % kFp8Block != 0 || static_cast<long long>(p.part_rows) * p.num_parts < p.n))
    return cudaErrorInvalidValue;
  if (p.part_rows <= 0) return cudaErrorInvalidValue;
  if (p.lda < p.k || p.lda % 16 != 0 || p.ld_scale < p.k / kFp8Block || p.ldc < p.n || p.ldc % 2 != 0)
    return cudaErrorInvalidValue;
  if (p.max_rows == 0) return cudaSuccess;
  if (!p.a || !p.a_scale || !p.w || !p.w_scale || !p.c || !aligned16(p.a) || !aligned16(p.c))
    return cudaErrorInvalidValue;
  if (p.group_offsets) {
    if (!p.active_groups || !p.num_active || !p.tile_prefix || p.max_active < 1) return cudaErrorInvalidValue;
  } else if (p.num_groups != 1) {
    return cudaErrorInvalidValue;
  }
  if (cudaError_t e = check_fp8_mma_support(); e != cudaSuccess) return e;

  const int expected = p.expected_rows_per_group > 0 ? p.expected_rows_per_group
                                                     : (p.max_rows + p.num_groups - 1) / p.num_groups;
  Fp8GemmPath path = p.path;
  if (path == Fp8GemmPath::automatic) path = expected <= 40 ? Fp8GemmPath::decode : Fp8GemmPath::prefill;

  if (path == Fp8GemmPath::decode) {
    if (p.group_offsets && p.max_active > 65535) return cudaErrorInvalidValue;
    // Token tiles per pass sized for the busier groups (counts scatter around the mean), since every
    // extra pass streams the group's weights again.
    if (expected <= 4) return launch_decode<1>(p, stream);
    if (expected <= 10) return launch_decode<2>(p, stream);
    return launch_decode<4>(p, stream);
  }
  const long long tiles_y = (p.max_rows + kFp8PrefillTileRows - 1) / kFp8PrefillTileRows +
                            (p.group_offsets ? p.num_groups : 0);
  if (tiles_y > 65535) return cudaErrorInvalidValue;
  const dim3 grid((p.n + detail::kPfBN - 1) / detail::kPfBN, static_cast<unsigned>(tiles_y));
  cudaError_t e = cudaFuncSetAttribute(detail::fp8_gemm_prefill_kernel,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, detail::kPfSmemBytes);
  if (e != cudaSuccess) return e;
  detail::fp8_gemm_prefill_kernel<<<grid, detail::kPfThreads, detail::kPfSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace glm5rt::kernels

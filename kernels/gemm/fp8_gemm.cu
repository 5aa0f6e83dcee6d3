// Launcher of the FP8 block-scaled GEMM: parameter checks, path choice, grid shapes. Only the
// instantiations GLM-5 needs (token tiles of 8, 16 and 32 for decode) are compiled.
#include "kernels/gemm/fp8_gemm.h"
#include "kernels/gemm/fp8_gemm_decode.cuh"
#include "kernels/gemm/fp8_gemm_decode_async.cuh"
#include "kernels/gemm/fp8_gemm_prefill.cuh"

#include <mutex>
#include <tuple>
#include <vector>

namespace glm5rt::kernels {
namespace {



bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

// Compute capability of the current device as major * 10 + minor (0 on error).
cudaError_t device_cc(int& cc) {
  int dev = 0, major = 0, minor = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  if ((e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev)) != cudaSuccess) return e;
  if ((e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev)) != cudaSuccess) return e;
  cc = major * 10 + minor;
  return cudaSuccess;
}

// DEPTH: K blocks (64 B per lane each) of weights in the register ring of the decode kernel.
// Unequal parts or strided weights: the GENERAL instantiations of the decode kernels.
bool general_form(const Fp8GemmParams& p) { return p.varied_parts || p.ldw != 0 || p.ld_wscale != 0; }

template <int NT, int DEPTH = 2>
cudaError_t launch_decode(const Fp8GemmParams& p, cudaStream_t stream) {
  const dim3 grid((p.n + detail::kDecodeRows - 1) / detail::kDecodeRows, p.group_offsets ? p.max_active : 1);
  auto kernel = general_form(p) ? detail::fp8_gemm_decode_kernel<NT, DEPTH, true> : detail::fp8_gemm_decode_kernel<NT, DEPTH>;
  return detail::launch(kernel, grid, dim3(detail::kDecodeThreads), 0, stream, p.pdl, p);
}

// Blocks of `kernel` resident at once on the whole current device (blocks per SM x SMs) for the given
// block size and dynamic shared memory, cached per (kernel, device, shared memory): the occupancy query
// costs host microseconds, which every stream-mode decode launch would otherwise pay.
cudaError_t resident_blocks(void (*kernel)(Fp8GemmParams), int threads, size_t smem, long long& blocks) {
  int dev = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  static std::mutex mu;
  static std::vector<std::tuple<const void*, int, size_t, long long>> cache;
  const void* key = reinterpret_cast<const void*>(kernel);
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& [k, d, sm, b] : cache)
      if (k == key && d == dev && sm == smem) {
        blocks = b;
        return cudaSuccess;
      }
  }
  int sms = 0, per_sm = 0;
  if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev); e != cudaSuccess) return e;
  if (cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem); e != cudaSuccess)
    return e;
  blocks = static_cast<long long>(per_sm) * sms;
  std::lock_guard<std::mutex> lock(mu);
  cache.emplace_back(key, dev, smem, blocks);
  return cudaSuccess;
}

long long decode_blocks(const Fp8GemmParams& p, int rows_per_block = detail::kDecodeRows) {
  return static_cast<long long>((p.n + rows_per_block - 1) / rows_per_block) * (p.group_offsets ? p.max_active : 1);
}

// Whether the 1-token-tile decode grid with DEPTH K blocks in flight fits in one wave on this GPU. A
// deeper register ring keeps more bytes in flight per lane (T=1 gate_up on the H200: 79 us at depth 3
// against 87 us at depth 2) but costs registers, i.e. resident blocks; once the grid needs a second
// wave the tail costs more than the depth gains (T=1 down: 45 us at depth 3, 39 us at depth 2).
template <int DEPTH>
cudaError_t decode_fits_one_wave(const Fp8GemmParams& p, bool& fits) {
  long long slots = 0;
  if (cudaError_t e = resident_blocks(detail::fp8_gemm_decode_kernel<1, DEPTH>, detail::kDecodeThreads, 0, slots);
      e != cudaSuccess)
    return e;
  fits = decode_blocks(p) + p.concurrent_blocks <= slots;
  return cudaSuccess;
}

// The cp.async decode kernel's form for p: plain, with the fused combine, or with the fused SwiGLU
// prologue and the combine (separate instantiations, so that the plain kernel's code is unchanged), and
// its dynamic shared memory.
template <int DEPTH, bool LINES>
void (*decode_async_kernel_for_lines(const Fp8GemmParams& p))(Fp8GemmParams) {
  using namespace detail;
  if (p.swiglu_gate_up) return fp8_gemm_decode_async_kernel<DEPTH, true, true, false, LINES>;
  if (p.combine_counters) return fp8_gemm_decode_async_kernel<DEPTH, true, false, false, LINES>;
  return fp8_gemm_decode_async_kernel<DEPTH, false, false, false, LINES>;
}
template <int DEPTH>
void (*decode_async_kernel_for(const Fp8GemmParams& p))(Fp8GemmParams) {
  if (general_form(p)) return detail::fp8_gemm_decode_async_kernel<DEPTH, false, false, true>;
  return p.decode_line_copies ? decode_async_kernel_for_lines<DEPTH, true>(p) : decode_async_kernel_for_lines<DEPTH, false>(p);
}
template <int DEPTH>
size_t decode_async_smem(const Fp8GemmParams& p) {
  return static_cast<size_t>(detail::kDecodeWarps) * DEPTH * detail::kDecodeAsyncStageBytes +
         (p.swiglu_gate_up ? detail::decode_swiglu_smem_bytes(p.swiglu_rows, p.k) : 0);
}
// Above 48 KB of dynamic shared memory a kernel must opt in (before launches and occupancy queries).
template <typename Kernel>
cudaError_t allow_smem(Kernel* kernel, size_t smem) {
  if (smem <= 48 * 1024) return cudaSuccess;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
}

template <int DEPTH>
cudaError_t launch_decode_async(const Fp8GemmParams& p, cudaStream_t stream) {
  const dim3 grid((p.n + detail::kDecodeRows - 1) / detail::kDecodeRows, p.group_offsets ? p.max_active : 1);
  auto kernel = decode_async_kernel_for<DEPTH>(p);
  const size_t smem = decode_async_smem<DEPTH>(p);
  if (cudaError_t e = allow_smem(kernel, smem); e != cudaSuccess) return e;
  return detail::launch(kernel, grid, dim3(detail::kDecodeThreads), smem, stream, p.pdl, p);
}

// Whether the cp.async decode grid with a DEPTH-deep ring fits in one wave of resident blocks.
template <int DEPTH>
cudaError_t decode_async_fits(const Fp8GemmParams& p, bool& fits) {
  long long slots = 0;
  auto kernel = decode_async_kernel_for<DEPTH>(p);
  const size_t smem = decode_async_smem<DEPTH>(p);
  if (cudaError_t e = allow_smem(kernel, smem); e != cudaSuccess) return e;
  if (cudaError_t e = resident_blocks(kernel, detail::kDecodeThreads, smem, slots); e != cudaSuccess) return e;
  fits = decode_blocks(p) + p.concurrent_blocks <= slots;
  return cudaSuccess;
}

// The cp.async ring at the deepest depth (6 .. 3) whose grid fits in one wave; launched = false when
// none fits (the caller then launches depth 3).
cudaError_t try_decode_async(const Fp8GemmParams& p, cudaStream_t stream, bool& launched) {
  launched = false;
  bool fits = false;
  if (cudaError_t e = decode_async_fits<6>(p, fits); e != cudaSuccess || fits) {
    launched = e == cudaSuccess;
    return e == cudaSuccess ? launch_decode_async<6>(p, stream) : e;
  }
  if (cudaError_t e = decode_async_fits<5>(p, fits); e != cudaSuccess || fits) {
    launched = e == cudaSuccess;
    return e == cudaSuccess ? launch_decode_async<5>(p, stream) : e;
  }
  if (cudaError_t e = decode_async_fits<4>(p, fits); e != cudaSuccess || fits) {
    launched = e == cudaSuccess;
    return e == cudaSuccess ? launch_decode_async<4>(p, stream) : e;
  }
  if (cudaError_t e = decode_async_fits<3>(p, fits); e != cudaSuccess || fits) {
    launched = e == cudaSuccess;
    return e == cudaSuccess ? launch_decode_async<3>(p, stream) : e;
  }
  return cudaSuccess;
}

template <int BM, bool F16>
cudaError_t launch_prefill(const Fp8GemmParams& p, cudaStream_t stream) {
  const long long tiles_y = (p.max_rows + BM - 1) / BM + (p.group_offsets ? p.num_groups : 0);
  if (tiles_y > 65535) return cudaErrorInvalidValue;
  const dim3 grid((p.n + detail::kPfBN - 1) / detail::kPfBN, static_cast<unsigned>(tiles_y));
  constexpr int smem = detail::PfShape<BM>::kSmemBytes;
  cudaError_t e = cudaFuncSetAttribute(detail::fp8_gemm_prefill_kernel<BM, F16>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (e != cudaSuccess) return e;
  return detail::launch(detail::fp8_gemm_prefill_kernel<BM, F16>, grid, dim3(detail::kPfThreads), smem, stream, p.pdl,
                        p);
}

}  // namespace

cudaError_t fp8_gemm(const Fp8GemmParams& in, cudaStream_t stream) {
  Fp8GemmParams p = in;
  if (p.num_parts < 1) return cudaErrorInvalidValue;
  if (p.varied_parts) {
    // Unequal parts: boundaries inside n on 64-row decode blocks, the last one n (part_rows unused).
    if (p.num_parts > kFp8MaxVariedParts || p.part_begin[0] != 0 || p.part_begin[p.num_parts] != p.n)
      return cudaErrorInvalidValue;
    for (int i = 1; i <= p.num_parts; ++i)
      if (p.part_begin[i] <= p.part_begin[i - 1] || (i < p.num_parts && p.part_begin[i] % detail::kDecodeRows != 0))
        return cudaErrorInvalidValue;
    p.part_rows = p.n;
  }
  if (p.part_rows == 0 && p.num_parts == 1) p.part_rows = p.n;
  if (p.n < 2 || p.n % 2 != 0 || p.k <= 0 || p.k % kFp8Block != 0 || p.max_rows < 0 || p.num_groups < 1)
    return cudaErrorInvalidValue;
  if (p.num_parts > 1 && !p.varied_parts &&
      (p.part_rows % kFp8Block != 0 || static_cast<long long>(p.part_rows) * p.num_parts < p.n))
    return cudaErrorInvalidValue;
  // Strided weights (a K slice of a wider tensor): 16-byte aligned rows at least k wide.
  if (p.ldw != 0 && (p.ldw < p.k || p.ldw % 16 != 0)) return cudaErrorInvalidValue;
  if (p.ld_wscale != 0 && p.ld_wscale < p.k / kFp8Block) return cudaErrorInvalidValue;
  const bool decode_only = p.varied_parts || p.ldw != 0 || p.ld_wscale != 0;
  if (decode_only && (p.combine_counters || p.swiglu_gate_up || p.path == Fp8GemmPath::prefill))
    return cudaErrorInvalidValue;
  if (p.part_rows <= 0) return cudaErrorInvalidValue;
  if (p.lda < p.k || p.lda % 16 != 0 || p.ld_scale < p.k / kFp8Block || p.ldc < p.n || p.ldc % 2 != 0)
    return cudaErrorInvalidValue;
  if (p.concurrent_blocks < 0 || p.decode_l2_prefetch < 0) return cudaErrorInvalidValue;
  if (p.max_rows == 0) return cudaSuccess;
  if (!p.a || !p.a_scale || !p.w || !p.w_scale || !p.c || !aligned16(p.a) || !aligned16(p.c))
    return cudaErrorInvalidValue;
  if (p.group_offsets) {
    if (!p.active_groups || !p.num_active || !p.tile_prefix || p.max_active < 1) return cudaErrorInvalidValue;
  } else if (p.num_groups != 1) {
    return cudaErrorInvalidValue;
  }
  if (p.combine_counters &&
      (!p.group_offsets || !p.combine_out || !p.combine_slot_row || !p.combine_weights || p.combine_tokens < 1 ||
       p.combine_top_k < 1 || p.part_rows % 16 != 0 || (reinterpret_cast<uintptr_t>(p.combine_out) & 3u) != 0))
    return cudaErrorInvalidValue;
  // The fused SwiGLU prologue: only with the fused combine (the instantiation that exists), identity row
  // map, whole 64-row blocks (block barriers), 1..8 rows per pass, 8-byte aligned bf16 rows of 2k values.
  if (p.swiglu_gate_up &&
      (!p.combine_counters || p.a_row_map || p.n % detail::kDecodeRows != 0 ||
       p.part_rows % detail::kDecodeRows != 0 || p.swiglu_rows < 1 || p.swiglu_rows > 8 || p.swiglu_ld < 2 * p.k ||
       p.swiglu_ld % 4 != 0 || (reinterpret_cast<uintptr_t>(p.swiglu_gate_up) & 7u) != 0))
    return cudaErrorInvalidValue;
  int cc = 0;
  if (cudaError_t e = device_cc(cc); e != cudaSuccess) return e;
  if (cc < 89) return cudaErrorNotSupported;

  const int expected = p.expected_rows_per_group > 0 ? p.expected_rows_per_group
                                                     : (p.max_rows + p.num_groups - 1) / p.num_groups;
  Fp8GemmPath path = p.path;
  // Decode streams each group's weights once per pass of up to 32 rows; prefill pays for padding rows
  // in 64-row tiles but runs the tensor cores from shared memory. The crossover is a measured guess.
  if (path == Fp8GemmPath::automatic) path = expected <= 8 ? Fp8GemmPath::decode : Fp8GemmPath::prefill;
  if (decode_only && path != Fp8GemmPath::decode) return cudaErrorInvalidValue;  // the prefill kernel has neither

  if (path == Fp8GemmPath::decode) {
    if (p.group_offsets && p.max_active > 65535) return cudaErrorInvalidValue;
    // Token tiles per pass sized for the busier groups (counts scatter around the mean), since every
    // extra pass streams the group's weights again.
    if (p.decode_depth != 0 && p.decode_depth != 2 && p.decode_depth != 3) return cudaErrorInvalidValue;
    if (p.decode_kernel < 0 || p.decode_kernel > 2) return cudaErrorInvalidValue;
    // A forced register-ring depth (decode_depth) implies the register ring unless decode_kernel says 2.
    const bool async_ring = expected <= 4 && (p.decode_kernel == 2 || (p.decode_kernel == 0 && p.decode_depth == 0));
    // The fused combine exists only in the cp.async kernel.
    if ((p.combine_counters || p.swiglu_gate_up) && !async_ring) return cudaErrorInvalidValue;
    if (async_ring) {
      bool launched = false;
      if (cudaError_t e = try_decode_async(p, stream, launched); e != cudaSuccess || launched) return e;
      // Several waves at every depth (e.g. T=8 and T=64 in the MoE layer): the cp.async ring at depth 3
      // (smallest ring, most resident blocks). Measured on the H200 at T=8: down 191 -> 169 us against
      // the register ring, layer 0.5957 -> 0.5715 ms; T=64 not yet measured this way (the bench's
      // "reg-ring" rows keep the register ring for comparison).
      return launch_decode_async<3>(p, stream);
    }
    if (expected <= 4) {
      bool deep = p.decode_depth == 3;
      if (p.decode_depth == 0)
        if (cudaError_t e = decode_fits_one_wave<3>(p, deep); e != cudaSuccess) return e;
      return deep ? launch_decode<1, 3>(p, stream) : launch_decode<1, 2>(p, stream);
    }
    if (expected <= 10) return launch_decode<2>(p, stream);
    return launch_decode<4>(p, stream);
  }
  if (p.combine_counters || p.swiglu_gate_up) return cudaErrorInvalidValue;  // decode path only
  const int bm = p.prefill_tile_rows ? p.prefill_tile_rows : kFp8PrefillTileRows;
  if (p.prefill_mma < 0 || p.prefill_mma > 2) return cudaErrorInvalidValue;
  const bool f16 = p.prefill_mma == 2 || (p.prefill_mma == 0 && cc == 90);
  if (bm == 64) return f16 ? launch_prefill<64, true>(p, stream) : launch_prefill<64, false>(p, stream);
  if (bm == 128) return f16 ? launch_prefill<128, true>(p, stream) : launch_prefill<128, false>(p, stream);
  return cudaErrorInvalidValue;
}

}  // namespace glm5rt::kernels

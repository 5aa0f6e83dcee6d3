// Row-wise kernels of the simple forward: norms, embedding, RoPE tables, the MLA and indexer per-row
// preparation (cache-record writes), SwiGLU, FP8 dequantisation, argmax and random fills.
#include <algorithm>
#include <cmath>

#include "kernels/common/simple_device.cuh"
#include "kernels/gemm/launch.cuh"

namespace glm5k {
namespace {

using detail::block_max;
using detail::block_sum;

constexpr int32_t kIndexerPrepThreads = 128;  // indexer_prep_kernel's block (its LayerNorm sums' order)

__global__ void residual_rms_norm_kernel(float* x, const float* delta, const int32_t* gather, int32_t n,
                                         const float* w, float eps, __nv_bfloat16* out_b, float* out_f) {
  __shared__ float scratch[32];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Launched as a programmatic dependent (launch_residual_rms_norm's pdl): wait for the previous kernel
  // before any read. Returns at once for an ordinary launch.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
  const int64_t r = blockIdx.x;
  float* xr = x + (gather ? static_cast<int64_t>(gather[r]) : r) * n;
  float ss = 0.f;
  for (int32_t i = threadIdx.x; i < n; i += blockDim.x) {
    float v = xr[i];
    if (delta) {
      v += delta[r * n + i];
      xr[i] = v;
    }
    ss += v * v;
  }
  ss = block_sum(ss, scratch);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
  for (int32_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = w[i] * (xr[i] * inv);
    if (out_b) out_b[r * n + i] = __float2bfloat16(v);
    if (out_f) out_f[r * n + i] = v;
  }
}

__global__ void embed_kernel(const __nv_bfloat16* table, int32_t n, const int32_t* tokens, float* out) {
  const int64_t r = blockIdx.x;
  const __nv_bfloat16* row = table + static_cast<int64_t>(tokens[r]) * n;
  for (int32_t i = threadIdx.x; i < n; i += blockDim.x) out[r * n + i] = __bfloat162float(row[i]);
}

__global__ void rope_tables_kernel(const float* inv_freq, int32_t half, float factor, const int32_t* pos,
                                   int32_t rows, float* cos_out, float* sin_out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(rows) * half) return;
  const int64_t r = i / half;
  const int32_t j = static_cast<int32_t>(i % half);
  const float a = inv_freq[j] * static_cast<float>(pos[r]);  // float32 angle, as torch and the CPU
  double s, c;
  sincos(static_cast<double>(a), &s, &c);
  cos_out[i] = static_cast<float>(c) * factor;
  sin_out[i] = static_cast<float>(s) * factor;
}

// Interleaved pairs (2i, 2i+1) rotate by angle i (docs/GLM5.md step 4).
__device__ inline void rope_pair(float& x0, float& x1, float c, float s) {
  const float a = x0, b = x1;
  x0 = a * c - b * s;
  x1 = b * c + a * s;
}

// Writes v[0 .. n) into a bf16 record, or as e4m3 with one float32 scale per `group` values (scales
// stored at scale_at). Called by the whole block; v is in shared memory.
__device__ void write_quantized(const float* v, int32_t n, bool fp8, int32_t group, char* rec, char* scale_at) {
  if (!fp8) {
    auto* out = reinterpret_cast<__nv_bfloat16*>(rec);
    for (int32_t i = threadIdx.x; i < n; i += blockDim.x) out[i] = __float2bfloat16(v[i]);
    return;
  }
  __shared__ float scales[64];
  const int32_t groups = (n + group - 1) / group;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  for (int32_t g = warp; g < groups; g += nw) {
    float amax = 0.f;
    for (int32_t i = g * group + lane; i < min(n, (g + 1) * group); i += 32) amax = fmaxf(amax, fabsf(v[i]));
    amax = detail::warp_max(amax);
    if (lane == 0) {
      scales[g] = detail::fp8_scale_of(amax);
      reinterpret_cast<float*>(scale_at)[g] = scales[g];
    }
  }
  __syncthreads();
  for (int32_t i = threadIdx.x; i < n; i += blockDim.x)
    rec[i] = static_cast<char>(detail::float_to_e4m3(v[i] / scales[i / group]));
}

// One row of mla_prep, by the whole block (sh: kv_lora + rope floats of shared memory).
__device__ void mla_prep_row(const MlaPrepParams& p, int32_t r, float* sh, float* scratch) {
  const int32_t kvr = p.fmt.kv_lora, rope = p.fmt.rope, half = rope / 2, lat = kvr + rope;
  const float* ckv = p.ckv + static_cast<int64_t>(r) * lat;
  float ss = 0.f;
  for (int32_t i = threadIdx.x; i < lat; i += blockDim.x) {
    sh[i] = ckv[i];
    if (i < kvr) ss += sh[i] * sh[i];
  }
  ss = block_sum(ss, scratch);  // also orders the shared-memory writes above
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(kvr) + 1e-6f);
  const float* cs = p.cos + static_cast<int64_t>(r) * half;
  const float* sn = p.sin + static_cast<int64_t>(r) * half;
  for (int32_t i = threadIdx.x; i < kvr; i += blockDim.x) sh[i] = p.kv_norm[i] * (sh[i] * inv);
  for (int32_t i = threadIdx.x; i < half; i += blockDim.x) rope_pair(sh[kvr + 2 * i], sh[kvr + 2 * i + 1], cs[i], sn[i]);
  __syncthreads();
  const int32_t seq = p.batch.seq[r];
  char* rec = detail::latent_record(p.batch, p.fmt, p.layer, seq, p.batch.slot[r]);
  if (p.fmt.latent_dtype == kRecFp8) {
    write_quantized(sh, kvr, true, 128, rec, rec + kvr);
    auto* rp = reinterpret_cast<__nv_bfloat16*>(rec + kvr + 4 * ((kvr + 127) / 128));
    for (int32_t i = threadIdx.x; i < rope; i += blockDim.x) rp[i] = __float2bfloat16(sh[kvr + i]);
  } else {
    write_quantized(sh, lat, false, 0, rec, nullptr);
  }
  // Queries: q_nope to bf16, RoPE on q_rot.
  if (!p.q_nope_out) return;
  const int32_t qkd = p.nope + rope;
  const float* q = p.q + static_cast<int64_t>(r) * p.heads * qkd;
  for (int32_t i = threadIdx.x; i < p.heads * p.nope; i += blockDim.x) {
    const int32_t h = i / p.nope, j = i % p.nope;
    p.q_nope_out[static_cast<int64_t>(r) * p.heads * p.nope + i] = __float2bfloat16(q[h * qkd + j]);
  }
  for (int32_t i = threadIdx.x; i < p.heads * half; i += blockDim.x) {
    const int32_t h = i / half, j = i % half;
    float x0 = q[h * qkd + p.nope + 2 * j], x1 = q[h * qkd + p.nope + 2 * j + 1];
    rope_pair(x0, x1, cs[j], sn[j]);
    float* o = p.q_rot_out + (static_cast<int64_t>(r) * p.heads + h) * rope;
    o[2 * j] = x0;
    o[2 * j + 1] = x1;
  }
}

__global__ void mla_prep_kernel(MlaPrepParams p) {
  extern __shared__ float sh[];  // kv_lora + rope
  __shared__ float scratch[32];
  mla_prep_row(p, blockIdx.x, sh, scratch);
}

// One row of indexer_prep, by the whole block (key: index_dim floats of shared memory). The LayerNorm's
// two sums are taken over the first sum_threads threads only (the others add nothing), so that a
// 256-thread block sums in exactly the order of indexer_prep_kernel's 128 threads.
__device__ void indexer_prep_row(const IndexerPrepParams& p, int32_t r, float* key, float* scratch,
                                 int32_t sum_threads) {
  const int32_t d = p.fmt.index_dim, rope = p.fmt.rope, half = rope / 2;
  const int32_t first = static_cast<int32_t>(threadIdx.x) < sum_threads ? static_cast<int32_t>(threadIdx.x) : d;
  const float* cs = p.cos + static_cast<int64_t>(r) * half;
  const float* sn = p.sin + static_cast<int64_t>(r) * half;
  if (p.kraw) {
    const float* kr = p.kraw + static_cast<int64_t>(r) * d;
    float s = 0.f;
    for (int32_t i = first; i < d; i += sum_threads) s += kr[i];
    const float mean = block_sum(s, scratch) / static_cast<float>(d);
    float v = 0.f;
    for (int32_t i = first; i < d; i += sum_threads) v += (kr[i] - mean) * (kr[i] - mean);
    const float var = block_sum(v, scratch) / static_cast<float>(d);
    const float inv = 1.0f / sqrtf(var + 1e-6f);
    for (int32_t i = threadIdx.x; i < d; i += blockDim.x) key[i] = (kr[i] - mean) * inv * p.k_norm_w[i] + p.k_norm_b[i];
    __syncthreads();
    for (int32_t i = threadIdx.x; i < half; i += blockDim.x) rope_pair(key[2 * i], key[2 * i + 1], cs[i], sn[i]);
  } else {
    for (int32_t i = threadIdx.x; i < d; i += blockDim.x) key[i] = 0.f;
  }
  __syncthreads();
  const int32_t seq = p.batch.seq[r];
  const bool fp8 = p.fmt.index_dtype == kRecFp8;
  char* rec = detail::index_vector(p.batch, p.fmt, p.layer, seq, p.batch.slot[r]);
  write_quantized(key, d, fp8, d, rec,
                  fp8 ? reinterpret_cast<char*>(detail::index_scale(p.batch, p.fmt, p.layer, seq, p.batch.slot[r])) : nullptr);
  if (!p.qi) return;
  float* qi = p.qi + static_cast<int64_t>(r) * p.heads * d;
  for (int32_t i = threadIdx.x; i < p.heads * half; i += blockDim.x) {
    const int32_t h = i / half, j = i % half;
    rope_pair(qi[h * d + 2 * j], qi[h * d + 2 * j + 1], cs[j], sn[j]);
  }
  for (int32_t h = threadIdx.x; h < p.heads; h += blockDim.x) p.wts[static_cast<int64_t>(r) * p.heads + h] *= p.head_scale;
}

__global__ void indexer_prep_kernel(IndexerPrepParams p) {
  extern __shared__ float key[];  // index_dim
  __shared__ float scratch[32];
  indexer_prep_row(p, blockIdx.x, key, scratch, blockDim.x);
}

// mla_prep (blocks [0, rows)) and indexer_prep + the fast indexer's query conversion (blocks [rows,
// 2 rows)) in one launch of 256 threads: the same per-row code as the separate kernels.
__global__ void __launch_bounds__(256) attention_prep_kernel(AttentionPrepParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (p.pdl) asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
  extern __shared__ float sh[];  // max(kv_lora + rope, index_dim)
  __shared__ float scratch[32];
  const int32_t rows = p.mla.batch.rows;
  if (static_cast<int32_t>(blockIdx.x) < rows) {
    mla_prep_row(p.mla, blockIdx.x, sh, scratch);
    return;
  }
  const int32_t r = blockIdx.x - rows;
  indexer_prep_row(p.idx, r, sh, scratch, kIndexerPrepThreads);
  if (!p.q_out || !p.idx.qi) return;
  __syncthreads();  // this block's RoPE on qi (global memory) is visible to the whole block
  const int32_t d = p.idx.fmt.index_dim;
  for (int32_t h = threadIdx.x >> 5; h < p.idx.heads; h += blockDim.x >> 5) {
    const int64_t rh = static_cast<int64_t>(r) * p.idx.heads + h;
    detail::indexer_query_head(p.idx.qi + rh * d, d, p.q_fp8, p.q_out, p.q_scale, rh);
  }
}

__global__ void silu_mul_kernel(const float* g, const float* u, int64_t total, __nv_bfloat16* out) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float x = g[i];
    out[i] = __float2bfloat16(x / (1.0f + expf(-x)) * u[i]);
  }
}

__global__ void fp8_dequant_kernel(const uint8_t* q, const float* scale, int64_t rows, int64_t cols, int32_t br,
                                   int32_t bc, __nv_bfloat16* out) {
  const int64_t sc = (cols + bc - 1) / bc, total = rows * cols;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t rr = i / cols, cc = i % cols;
    out[i] = __float2bfloat16(detail::e4m3_to_float(q[i]) * scale[(rr / br) * sc + cc / bc]);
  }
}

__global__ void moe_combine_kernel(const float* y, const int32_t* pair_of, const float* weights, const float* shared,
                                   int32_t top_k, int32_t n, float* out) {
  const int64_t r = blockIdx.x;
  for (int32_t j = threadIdx.x; j < n; j += blockDim.x) {
    float acc = 0.f;
    for (int32_t k = 0; k < top_k; ++k)
      acc += y[static_cast<int64_t>(pair_of[r * top_k + k]) * n + j] * weights[r * top_k + k];
    if (shared) acc += shared[r * n + j];
    out[r * n + j] = acc;
  }
}

__global__ void argmax_kernel(const float* logits, int32_t n, int32_t* out) {
  __shared__ float sv[32];
  __shared__ int32_t si[32];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * n;
  float best = -INFINITY;
  int32_t bi = n;  // n = none yet
  for (int32_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = row[i];
    if (v > best || (bi == n && v == best)) {  // NaN compares false: never taken
      best = v;
      bi = i;
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, best, o);
    const int32_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (ov > best || (ov == best && oi < bi)) {
      best = ov;
      bi = oi;
    }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    sv[warp] = best;
    si[warp] = bi;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w)
      if (sv[w] > best || (sv[w] == best && si[w] < bi)) {
        best = sv[w];
        bi = si[w];
      }
    out[blockIdx.x] = bi < n ? bi : 0;
  }
}

__device__ inline float hash_uniform(uint64_t seed, int64_t i) {  // splitmix64 -> [0, 1)
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
}

__global__ void fill_kernel(void* out, int32_t kind, int64_t n, uint64_t seed, float lo, float hi) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = lo + (hi - lo) * hash_uniform(seed, i);
    if (kind == 0) static_cast<float*>(out)[i] = v;
    else if (kind == 1) static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16(v);
    else static_cast<uint8_t*>(out)[i] = detail::float_to_e4m3(v);
  }
}

// Random FP8 cache records, one 32-bit word per thread: each period of period_bytes starts with fp8_bytes
// of e4m3 values (uniform in +-448), then f32_bytes of float32 scales (uniform in [0.5, 1.5] / 448, so a
// dequantized value lies in +-1.5), then bf16 values in +-1 up to the period's end (all multiples of 4).
__global__ void fill_records_kernel(uint32_t* out, int64_t words, int32_t period_bytes, int32_t fp8_bytes,
                                    int32_t f32_bytes, uint64_t seed) {
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < words;
       w += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t o = static_cast<int32_t>((w * 4) % period_bytes);
    uint32_t v = 0;
    if (o < fp8_bytes) {
      for (int b = 0; b < 4; ++b)
        v |= static_cast<uint32_t>(detail::float_to_e4m3(-448.0f + 896.0f * hash_uniform(seed, 4 * w + b))) << (8 * b);
    } else if (o < fp8_bytes + f32_bytes) {
      v = __float_as_uint((0.5f + hash_uniform(seed, 4 * w)) / 448.0f);
    } else {
      for (int b = 0; b < 2; ++b) {
        const __nv_bfloat16 h = __float2bfloat16(-1.0f + 2.0f * hash_uniform(seed, 4 * w + b));
        v |= static_cast<uint32_t>(__bfloat16_as_ushort(h)) << (16 * b);
      }
    }
    out[w] = v;
  }
}

int grid_for(int64_t total, int threads) {
  const int64_t b = (total + threads - 1) / threads;
  return static_cast<int>(b < 65536 ? (b > 0 ? b : 1) : 65536);
}

int threads_for(int32_t n) { return n >= 1024 ? 1024 : n >= 256 ? 256 : 128; }

}  // namespace

cudaError_t launch_residual_rms_norm(float* x, const float* delta, const int32_t* gather, int32_t rows, int32_t n,
                                     const float* w, float eps, __nv_bfloat16* out_b, float* out_f,
                                     cudaStream_t stream, bool pdl) {
  if (rows <= 0) return cudaSuccess;
  if (!pdl) {
    residual_rms_norm_kernel<<<rows, threads_for(n), 0, stream>>>(x, delta, gather, n, w, eps, out_b, out_f);
    return cudaGetLastError();
  }
  return glm5rt::kernels::detail::launch(residual_rms_norm_kernel, dim3(rows), dim3(threads_for(n)), 0, stream, true, x,
                                        delta, gather, n, w, eps, out_b, out_f);
}

cudaError_t launch_embed(const __nv_bfloat16* table, int32_t n, const int32_t* tokens, int32_t rows, float* out,
                         cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  embed_kernel<<<rows, 256, 0, stream>>>(table, n, tokens, out);
  return cudaGetLastError();
}

cudaError_t launch_rope_tables(const float* inv_freq, int32_t half, float attention_factor, const int32_t* pos,
                               int32_t rows, float* cos_out, float* sin_out, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(rows) * half;
  if (total <= 0) return cudaSuccess;
  rope_tables_kernel<<<grid_for(total, 256), 256, 0, stream>>>(inv_freq, half, attention_factor, pos, rows, cos_out,
                                                                sin_out);
  return cudaGetLastError();
}

cudaError_t launch_mla_prep(const MlaPrepParams& p, cudaStream_t stream) {
  if (p.batch.rows <= 0) return cudaSuccess;
  if (p.fmt.rope % 2 != 0 || (p.fmt.latent_dtype == kRecFp8 && p.fmt.kv_lora % 4 != 0)) return cudaErrorInvalidValue;
  const size_t smem = sizeof(float) * (p.fmt.kv_lora + p.fmt.rope);
  mla_prep_kernel<<<p.batch.rows, 256, smem, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t launch_indexer_prep(const IndexerPrepParams& p, cudaStream_t stream) {
  if (p.batch.rows <= 0) return cudaSuccess;
  if (p.fmt.index_dim < p.fmt.rope || p.fmt.index_dim > 64 * 128) return cudaErrorInvalidValue;
  indexer_prep_kernel<<<p.batch.rows, kIndexerPrepThreads, sizeof(float) * p.fmt.index_dim, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t launch_attention_prep(const AttentionPrepParams& p, cudaStream_t stream) {
  const int32_t rows = p.mla.batch.rows;
  if (rows <= 0) return cudaSuccess;
  if (p.idx.batch.rows != rows || p.mla.fmt.rope % 2 != 0 ||
      (p.mla.fmt.latent_dtype == kRecFp8 && p.mla.fmt.kv_lora % 4 != 0) || p.idx.fmt.index_dim < p.idx.fmt.rope ||
      p.idx.fmt.index_dim > 64 * 128 || (p.q_out && p.q_fp8 && !p.q_scale) || rows > 0x3fffffff)
    return cudaErrorInvalidValue;
  const size_t smem = sizeof(float) * std::max(p.mla.fmt.kv_lora + p.mla.fmt.rope, p.idx.fmt.index_dim);
  return glm5rt::kernels::detail::launch(attention_prep_kernel, dim3(2 * rows), dim3(256), smem, stream, p.pdl, p);
}

cudaError_t launch_silu_mul(const float* g, const float* u, int32_t rows, int32_t n, __nv_bfloat16* out,
                            cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(rows) * n;
  if (total <= 0) return cudaSuccess;
  silu_mul_kernel<<<grid_for(total, 256), 256, 0, stream>>>(g, u, total, out);
  return cudaGetLastError();
}

cudaError_t launch_fp8_dequant(const uint8_t* q, const float* scale, int64_t rows, int64_t cols, int32_t block_rows,
                               int32_t block_cols, __nv_bfloat16* out, cudaStream_t stream) {
  if (rows * cols <= 0) return cudaSuccess;
  if (block_rows <= 0 || block_cols <= 0) return cudaErrorInvalidValue;
  fp8_dequant_kernel<<<grid_for(rows * cols, 256), 256, 0, stream>>>(q, scale, rows, cols, block_rows, block_cols, out);
  return cudaGetLastError();
}

cudaError_t launch_moe_combine(const float* y, const int32_t* pair_of, const float* weights, const float* shared,
                               int32_t rows, int32_t top_k, int32_t n, float* out, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  moe_combine_kernel<<<rows, threads_for(n), 0, stream>>>(y, pair_of, weights, shared, top_k, n, out);
  return cudaGetLastError();
}

cudaError_t launch_argmax_rows(const float* logits, int32_t rows, int32_t n, int32_t* out, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  argmax_kernel<<<rows, 1024, 0, stream>>>(logits, n, out);
  return cudaGetLastError();
}

cudaError_t launch_fill_random_bf16(__nv_bfloat16* out, int64_t n, uint64_t seed, float amplitude, cudaStream_t stream) {
  fill_kernel<<<grid_for(n, 256), 256, 0, stream>>>(out, 1, n, seed, -amplitude, amplitude);
  return cudaGetLastError();
}
cudaError_t launch_fill_random_f32(float* out, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t stream) {
  fill_kernel<<<grid_for(n, 256), 256, 0, stream>>>(out, 0, n, seed, lo, hi);
  return cudaGetLastError();
}
cudaError_t launch_fill_random_records(void* out, int64_t bytes, int32_t period_bytes, int32_t fp8_bytes,
                                       int32_t f32_bytes, uint64_t seed, cudaStream_t stream) {
  if (bytes <= 0) return cudaSuccess;
  if (period_bytes <= 0 || period_bytes % 4 || fp8_bytes % 4 || f32_bytes % 4 || bytes % period_bytes ||
      fp8_bytes + f32_bytes > period_bytes || (reinterpret_cast<uintptr_t>(out) & 3u))
    return cudaErrorInvalidValue;
  const int64_t words = bytes / 4;
  fill_records_kernel<<<grid_for(words, 256), 256, 0, stream>>>(static_cast<uint32_t*>(out), words, period_bytes,
                                                                fp8_bytes, f32_bytes, seed);
  return cudaGetLastError();
}
cudaError_t launch_fill_random_fp8(uint8_t* out, int64_t n, uint64_t seed, float amplitude, cudaStream_t stream) {
  fill_kernel<<<grid_for(n, 256), 256, 0, stream>>>(out, 3, n, seed, -amplitude, amplitude);
  return cudaGetLastError();
}

}  // namespace glm5k

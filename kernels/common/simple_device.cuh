// Device-side helpers shared by the simple forward kernels (simple_forward.cuh): block reductions,
// cache-record addressing and the bf16 / FP8 record encodings.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "kernels/common/simple_forward.cuh"

namespace glm5k::detail {

__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Sum over the block; every thread gets the result. scratch: 32 floats of shared memory.
__device__ inline float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float t = lane < nw ? scratch[lane] : 0.f;
  return warp_sum(t);
}
__device__ inline float block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float t = lane < nw ? scratch[lane] : -INFINITY;
  return warp_max(t);
}

__device__ inline int64_t slot_of(const BatchRows& b, int32_t seq, int32_t pos) {
  const SeqCache& s = b.seqs[seq];
  return static_cast<int64_t>(b.block_tables[s.bt_offset + pos / s.page_size]) * s.page_size + pos % s.page_size;
}
__device__ inline char* latent_record(const BatchRows& b, const RecordFormat& f, int32_t layer, int32_t seq,
                                      int64_t slot) {
  const SeqCache& s = b.seqs[seq];
  return s.latent + layer * s.latent_layer_bytes + slot * f.latent_bytes();
}
// Indexer keys. bf16: index_dim bf16 per slot at slot * index_bytes. FP8: the per-page layout of
// kernels/indexer (DeepGEMM/vLLM): a page of page_size slots is page_size * index_bytes bytes, first the
// page_size index_dim-byte e4m3 vectors (slot-major), then page_size float32 scales. One layout for the
// simple and the fast indexer, so a cache written by either is read by both.
__device__ inline char* index_vector(const BatchRows& b, const RecordFormat& f, int32_t layer, int32_t seq,
                                     int64_t slot) {
  const SeqCache& s = b.seqs[seq];
  char* base = s.index + layer * s.index_layer_bytes;
  if (f.index_dtype != kRecFp8) return base + slot * f.index_bytes();
  const int64_t page = slot / s.page_size, off = slot % s.page_size;
  return base + page * s.page_size * f.index_bytes() + off * f.index_dim;
}
// FP8 only: the float32 scale of a slot's indexer key.
__device__ inline float* index_scale(const BatchRows& b, const RecordFormat& f, int32_t layer, int32_t seq,
                                     int64_t slot) {
  const SeqCache& s = b.seqs[seq];
  const int64_t page = slot / s.page_size, off = slot % s.page_size;
  char* page_base = s.index + layer * s.index_layer_bytes + page * s.page_size * f.index_bytes();
  return reinterpret_cast<float*>(page_base + static_cast<int64_t>(s.page_size) * f.index_dim) + off;
}

__device__ inline float e4m3_to_float(uint8_t v) {
  __nv_fp8_e4m3 x;
  x.__x = v;
  return static_cast<float>(x);
}
__device__ inline uint8_t float_to_e4m3(float f) { return __nv_fp8_e4m3(f).__x; }  // saturating

// Value c of a latent record (c < kv_lora: latent; else rope value c - kv_lora).
__device__ inline float latent_value(const char* rec, const RecordFormat& f, int32_t c) {
  if (f.latent_dtype == kRecFp8) {
    if (c < f.kv_lora) {
      const float* scales = reinterpret_cast<const float*>(rec + f.kv_lora);
      return e4m3_to_float(static_cast<uint8_t>(rec[c])) * scales[c >> 7];
    }
    const int32_t groups = (f.kv_lora + 127) / 128;
    return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(rec + f.kv_lora + 4 * groups)[c - f.kv_lora]);
  }
  return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(rec)[c]);
}
// Values c and c + 1 of a latent record (c even; a pair never straddles kv_lora, which is even).
__device__ inline float2 latent_pair(const char* rec, const RecordFormat& f, int32_t c) {
  if (f.latent_dtype == kRecFp8) {
    if (c < f.kv_lora) {
      const float s = reinterpret_cast<const float*>(rec + f.kv_lora)[c >> 7];
      const uint16_t q2 = *reinterpret_cast<const uint16_t*>(rec + c);
      return make_float2(e4m3_to_float(q2 & 0xffu) * s, e4m3_to_float(q2 >> 8) * s);
    }
    const int32_t groups = (f.kv_lora + 127) / 128;
    return __bfloat1622float2(
        reinterpret_cast<const __nv_bfloat162*>(rec + f.kv_lora + 4 * groups)[(c - f.kv_lora) >> 1]);
  }
  return __bfloat1622float2(reinterpret_cast<const __nv_bfloat162*>(rec)[c >> 1]);
}
// Value j of an indexer key (vector from index_vector; scale from index_scale, FP8 only).
__device__ inline float index_value(const char* vec, const RecordFormat& f, int32_t j, float scale) {
  if (f.index_dtype == kRecFp8) return e4m3_to_float(static_cast<uint8_t>(vec[j])) * scale;
  const char* rec = vec;
  return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(rec)[j]);
}

// FP8 scale of a group whose largest magnitude is amax: values map onto e4m3's +-448.
__device__ inline float fp8_scale_of(float amax) { return amax > 0.f ? amax / 448.f : 1.f; }

// The fast indexer's query input for one (row, head), called by one whole warp: dim float32 values ->
// bf16 (fp8 false), or e4m3 of q / scale with scale = amax / 448 (1 for an all-zero head) into q_scale.
// Shared by launch_indexer_query and the fused attention prep (launch_attention_prep).
__device__ inline void indexer_query_head(const float* q, int32_t dim, bool fp8, void* q_out, float* q_scale,
                                          int64_t rh) {
  const int lane = threadIdx.x & 31;
  if (!fp8) {
    auto* o = static_cast<__nv_bfloat16*>(q_out) + rh * dim;
    for (int32_t i = lane; i < dim; i += 32) o[i] = __float2bfloat16(q[i]);
    return;
  }
  float amax = 0.f;
  for (int32_t i = lane; i < dim; i += 32) amax = fmaxf(amax, fabsf(q[i]));
  amax = warp_max(amax);
  const float s = fp8_scale_of(amax);
  auto* o = static_cast<uint8_t*>(q_out) + rh * dim;
  for (int32_t i = lane; i < dim; i += 32) o[i] = float_to_e4m3(q[i] / s);
  if (lane == 0) q_scale[rh] = s;
}

}  // namespace glm5k::detail

// CPU references and synthetic paged caches for the indexer kernel tests and benchmark (host code).
// Scores are computed in double from the dequantized values; top-k uses the same total order as the
// kernels (score, -0.0 == +0.0, then lower position), by a full sort, so it is exact by construction.
#pragma once

#include "kernels/indexer/indexer_common.cuh"
#include "kernels/indexer/indexer_params.hpp"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

namespace glm5rt::indexer_test {

using kernels::indexer::KeyFormat;
namespace ki = kernels::indexer;

inline uint16_t to_bf16(float f) {  // round to nearest even (finite inputs)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float from_bf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint8_t to_e4m3(float f) { return __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3); }
inline float from_e4m3(uint8_t b) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(b, __NV_E4M3);
  return __half2float(__half(h));
}

// int8 round to nearest even, saturating at +-127 (the kInt8 format's rule; -128 is never produced).
inline int8_t to_int8(float v) {
  const float r = std::nearbyint(std::min(std::max(v, -127.f), 127.f));  // default rounding mode: to even
  return static_cast<int8_t>(r);
}

// Quantizes one 128-vector; returns the dequantized values (what the kernel sees) and the bytes.
// FP8 uses one scale per vector, amax / 448, int8 amax / 127 (1 when the vector is zero).
inline float quantize_vec(const float* x, KeyFormat fmt, uint8_t* bytes, float* deq) {
  if (fmt == KeyFormat::kBf16) {
    for (int i = 0; i < ki::kHeadDim; ++i) {
      const uint16_t b = to_bf16(x[i]);
      std::memcpy(bytes + 2 * i, &b, 2);
      deq[i] = from_bf16(b);
    }
    return 1.f;
  }
  float amax = 0.f;
  for (int i = 0; i < ki::kHeadDim; ++i) amax = std::max(amax, std::fabs(x[i]));
  if (fmt == KeyFormat::kInt8) {
    const float scale = amax > 0.f ? amax / 127.f : 1.f;
    for (int i = 0; i < ki::kHeadDim; ++i) {
      const int8_t v = to_int8(x[i] / scale);
      std::memcpy(bytes + i, &v, 1);
      deq[i] = static_cast<float>(v) * scale;
    }
    return scale;
  }
  const float scale = amax > 0.f ? amax / 448.f : 1.f;
  for (int i = 0; i < ki::kHeadDim; ++i) {
    bytes[i] = to_e4m3(x[i] / scale);
    deq[i] = from_e4m3(bytes[i]) * scale;
  }
  return scale;
}

inline int64_t page_bytes(KeyFormat fmt, int page_size) {
  return static_cast<int64_t>(page_size) * (fmt == KeyFormat::kBf16 ? ki::kBf16RecordBytes : ki::kFp8RecordBytes);
}

// Writes one 128-value key into its record at (page, offset) of a paged key cache (`cache` = the bytes of
// all pages) in the format's layout (indexer_params.hpp): bf16 256-byte records, or the FP8 page layout
// (page_size 128-byte e4m3 or int8 vectors, then page_size float32 scales). deq receives what the kernel
// reads.
inline void store_key(uint8_t* cache, KeyFormat fmt, int page_size, int64_t page, int offset, const float* key,
                      float* deq) {
  uint8_t bytes[ki::kBf16RecordBytes];
  const float scale = quantize_vec(key, fmt, bytes, deq);
  uint8_t* base = cache + page * page_bytes(fmt, page_size);
  if (fmt == KeyFormat::kBf16) {
    std::memcpy(base + static_cast<int64_t>(offset) * ki::kBf16RecordBytes, bytes, ki::kBf16RecordBytes);
  } else {
    std::memcpy(base + static_cast<int64_t>(offset) * ki::kHeadDim, bytes, ki::kHeadDim);
    std::memcpy(base + static_cast<int64_t>(page_size) * ki::kHeadDim + offset * 4, &scale, 4);
  }
}

// A synthetic batch: sequences of keys in a paged cache with shuffled pages, and query rows.
struct Problem {
  KeyFormat fmt = KeyFormat::kFp8;
  int page_size = 64;
  std::vector<int> seq_keys;          // keys cached per sequence
  std::vector<int32_t> row_seq, row_len;
  int table_stride = 0;
  std::vector<int32_t> block_tables;  // [num_seqs][table_stride]
  std::vector<uint8_t> cache;         // bytes of all pages
  std::vector<uint8_t> q;             // [T][32][128] bf16, e4m3 or int8
  std::vector<float> q_scale;         // [T][32] (fp8, int8)
  std::vector<float> w;               // [T][32]
  // exact float values the kernel sees (dequantized) and the unquantized originals
  std::vector<std::vector<float>> key_deq, key_orig;  // per seq [n][128]
  std::vector<float> q_deq, q_orig;                   // [T][32][128]
  int max_row_len() const { return row_len.empty() ? 0 : *std::max_element(row_len.begin(), row_len.end()); }
  int rows() const { return static_cast<int>(row_seq.size()); }
};

// Builds keys for each sequence (normal random, or `key_gen` when given) and query rows for the given
// (seq, len) pairs.
inline Problem make_problem(KeyFormat fmt, const std::vector<int>& seq_keys, const std::vector<int32_t>& row_seq,
                            const std::vector<int32_t>& row_len, std::mt19937_64& rng, int page_size = 64) {
  Problem p;
  p.fmt = fmt;
  p.page_size = page_size;
  p.seq_keys = seq_keys;
  p.row_seq = row_seq;
  p.row_len = row_len;
  std::normal_distribution<float> normal(0.f, 1.f);
  int total_pages = 0, max_pages = 1;
  for (int n : seq_keys) {
    const int pages = (n + page_size - 1) / page_size;
    total_pages += pages;
    max_pages = std::max(max_pages, pages);
  }
  total_pages += 3;  // a few pages nobody uses
  std::vector<int32_t> perm(total_pages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  p.table_stride = max_pages;
  p.block_tables.assign(seq_keys.size() * max_pages, 0);
  const int64_t pb = page_bytes(fmt, page_size);
  p.cache.assign(total_pages * pb, 0xEE);  // poison: unused bytes are never read
  int next = 0;
  for (size_t s = 0; s < seq_keys.size(); ++s) {
    const int n = seq_keys[s];
    std::vector<float> orig(static_cast<size_t>(n) * ki::kHeadDim), deq(orig.size());
    for (auto& v : orig) v = normal(rng);
    for (int pg = 0; pg < (n + page_size - 1) / page_size; ++pg) p.block_tables[s * max_pages + pg] = perm[next++];
    for (int j = 0; j < n; ++j) {
      store_key(p.cache.data(), fmt, page_size, p.block_tables[s * max_pages + j / page_size], j % page_size,
                &orig[j * ki::kHeadDim], &deq[j * ki::kHeadDim]);
    }
    p.key_orig.push_back(std::move(orig));
    p.key_deq.push_back(std::move(deq));
  }
  const int T = static_cast<int>(row_seq.size());
  std::vector<uint8_t> bytes(256);
  const int qbytes = fmt == KeyFormat::kBf16 ? 2 : 1;
  p.q.assign(static_cast<size_t>(T) * ki::kHeads * ki::kHeadDim * qbytes, 0);
  p.q_scale.assign(static_cast<size_t>(T) * ki::kHeads, 1.f);
  p.q_orig.resize(static_cast<size_t>(T) * ki::kHeads * ki::kHeadDim);
  p.q_deq.resize(p.q_orig.size());
  p.w.resize(static_cast<size_t>(T) * ki::kHeads);
  for (auto& v : p.q_orig) v = normal(rng);
  for (auto& v : p.w) v = normal(rng) * 0.17677669529663687f;  // 32^-0.5
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < ki::kHeads; ++h) {
      const size_t e = (static_cast<size_t>(t) * ki::kHeads + h) * ki::kHeadDim;
      p.q_scale[t * ki::kHeads + h] = quantize_vec(&p.q_orig[e], fmt, bytes.data(), &p.q_deq[e]);
      std::memcpy(p.q.data() + e * qbytes, bytes.data(), ki::kHeadDim * qbytes);
    }
  return p;
}

// score of row t against key j of its sequence, from the given q and key values (double accumulation)
inline double ref_score(const Problem& p, int t, int j, bool use_orig) {
  const auto& keys = use_orig ? p.key_orig[p.row_seq[t]] : p.key_deq[p.row_seq[t]];
  const auto& q = use_orig ? p.q_orig : p.q_deq;
  const float* k = &keys[static_cast<size_t>(j) * ki::kHeadDim];
  double s = 0.0;
  for (int h = 0; h < ki::kHeads; ++h) {
    const float* qh = &q[(static_cast<size_t>(t) * ki::kHeads + h) * ki::kHeadDim];
    double dot = 0.0;
    for (int d = 0; d < ki::kHeadDim; ++d) dot += static_cast<double>(qh[d]) * k[d];
    dot *= 0.08838834764831845;  // 128^-0.5
    s += static_cast<double>(p.w[t * ki::kHeads + h]) * std::max(dot, 0.0);
  }
  return s;
}

// Exact top-k positions of a score row under the kernels' total order.
inline std::vector<int> ref_topk_positions(const float* scores, int len, int k) {
  std::vector<int> idx(len);
  std::iota(idx.begin(), idx.end(), 0);
  const int n = std::min(k, len);
  std::partial_sort(idx.begin(), idx.begin() + n, idx.end(), [&](int a, int b) {
    const uint32_t ka = ki::detail::order_key(scores[a]), kb = ki::detail::order_key(scores[b]);
    return ka != kb ? ka > kb : a < b;
  });
  idx.resize(n);
  return idx;
}

inline int32_t slot_of(const Problem& p, int seq, int pos) {
  return p.block_tables[static_cast<size_t>(seq) * p.table_stride + pos / p.page_size] * p.page_size + pos % p.page_size;
}

}  // namespace glm5rt::indexer_test

// Indexer scores on the tensor cores, mma.sync only (SM120 has no wgmma): bf16 m16n8k16, and FP8 e4m3
// m16n8k32 on sm_89+ (sm_80 converts the same e4m3 fragments to f16 and runs m16n8k16 twice), and int8
// m16n8k32 s8 with int32 accumulators (every arch; same 8-bit fragment layout as e4m3, so the same loads).
//
// The product is computed transposed: keys are the MMA's M (rows of A), heads its N (B), the 128 dims
// its K. Then each thread's accumulators hold 2 keys x 8 heads, the weighted relu sum over heads is a
// register loop plus two shuffles, and a warp writes 32 consecutive scores with one coalesced store.
//
// Because a dot product does not care in which order its K terms are summed, A and B fragments use the
// same *permutation* of the 128 dims, chosen so that each thread reads 16 contiguous bytes of a key
// record straight from global memory into MMA registers (no shared-memory staging for keys): thread c of
// a quad owns 16-byte chunks 4p + c of a key, and chunk dims [0,4) feed k-step 2p's low half, [4,8) its
// high half, [8,16) k-step 2p + 1 (bytes, scaled by element size). Q is staged in shared memory with
// the same chunk order, XOR-swizzled so that neighbouring heads hit different banks.
#include "kernels/indexer/indexer_common.cuh"
#include "kernels/indexer/indexer_internal.hpp"
#include "kernels/indexer/indexer_params.hpp"
#include "kernels/indexer/indexer_select.cuh"

#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace glm5rt::kernels::indexer {
namespace {

template <KeyFormat F>
struct Format;
template <>
struct Format<KeyFormat::kBf16> {
  static constexpr int kHeadBytes = kHeadDim * 2;  // one q head, also one key record
  static constexpr int kChunksPerThread = 4;       // 16-byte chunks per key per quad thread
};
template <>
struct Format<KeyFormat::kFp8> {
  static constexpr int kHeadBytes = kHeadDim;
  static constexpr int kChunksPerThread = 2;
};
template <>
struct Format<KeyFormat::kInt8> : Format<KeyFormat::kFp8> {};  // same bytes, same 132-byte page layout

// Formats whose q carries one float scale per (token, head) and whose keys use the 132-byte page layout.
template <KeyFormat F>
inline constexpr bool kScaled = F != KeyFormat::kBf16;
// int8 accumulates exactly in int32 (|sum| <= 128 * 127^2 < 2^24, so the conversion to float is exact too).
template <KeyFormat F>
using Acc = std::conditional_t<F == KeyFormat::kInt8, int, float>;

__device__ __forceinline__ void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

#if !(defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890)
__device__ __forceinline__ void mma_f16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                        uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// Two e4m3 values (low or high 16 bits of x) as an f16x2 register, exactly: moving sign, exponent and
// mantissa into f16 positions gives value * 2^-8 (subnormals included), then one multiply by 256.
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t x, int high) {
  const uint32_t pair = high ? x >> 16 : x & 0xffffu;
  const uint32_t u = (pair & 0xffu) | ((pair & 0xff00u) << 8);  // bytes at bits 0 and 16
  const uint32_t bits = ((u & 0x00800080u) << 8) | ((u & 0x007f007fu) << 7);
  __half2 h = *reinterpret_cast<const __half2*>(&bits);
  h = __hmul2(h, __floats2half2_rn(256.f, 256.f));
  return *reinterpret_cast<const uint32_t*>(&h);
}
#endif

// One m16n8k32 e4m3 step. Before sm_89 the same registers run as two f16 m16n8k16 steps whose K slots
// are a consistent permutation of the e4m3 step's (A and B permuted alike, so the sum is unchanged).
__device__ __forceinline__ void mma_e4m3(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
  mma_f16(d, e4m3x2_to_f16x2(a0, 0), e4m3x2_to_f16x2(a1, 0), e4m3x2_to_f16x2(a0, 1), e4m3x2_to_f16x2(a1, 1),
          e4m3x2_to_f16x2(b0, 0), e4m3x2_to_f16x2(b0, 1));
  mma_f16(d, e4m3x2_to_f16x2(a2, 0), e4m3x2_to_f16x2(a3, 0), e4m3x2_to_f16x2(a2, 1), e4m3x2_to_f16x2(a3, 1),
          e4m3x2_to_f16x2(b1, 0), e4m3x2_to_f16x2(b1, 1));
#endif
}

// One m16n8k32 s8 step (native from sm_80 on, sm_90 included, where ptxas emulates the e4m3 one).
__device__ __forceinline__ void mma_s8(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                       uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

template <KeyFormat F>
__device__ __forceinline__ void mma_step(Acc<F> (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  if constexpr (F == KeyFormat::kBf16)
    mma_bf16(d, a0, a1, a2, a3, b0, b1);
  else if constexpr (F == KeyFormat::kInt8)
    mma_s8(d, a0, a1, a2, a3, b0, b1);
  else
    mma_e4m3(d, a0, a1, a2, a3, b0, b1);
}

// Swizzled byte offset of chunk j of head h inside one staged q row.
template <KeyFormat F>
__device__ __forceinline__ int q_chunk_offset(int h, int j) {
  return h * Format<F>::kHeadBytes + ((j ^ ((h & 1) << 2)) * 16);
}

// What a scores kernel does besides writing scores.
enum Mode : int {
  kPlain = 0,      // scores only
  kHistogram = 1,  // + the split top-k's first histogram (rows longer than k), merged per block
  kFused = 2,      // one chunk per block; the row's last block to finish selects its top-k (decode)
};

struct TailArgs {
  int k = 0;
  int32_t* out_slots = nullptr;  // [T][k] (kFused)
  float* out_scores = nullptr;   // optional [T][k] (kFused)
  void* workspace = nullptr;     // top-k workspace (kHistogram, kFused)
};

// kFused, after the block's scores are written: rows of at most k keys were emitted by the stores
// (block 0 pads); otherwise the last block of the row to finish stages the row's scores (L2) in shared
// memory and runs block_select. The per-row block counter wraps to zero (atomicInc), ready for the
// next call without a memset.
template <int kT>
__device__ void fused_tail(const ScoreParams& p, const TailArgs& tx, int row, int len, int seq, int keys_per_block) {
  __shared__ detail::SelectShared<kT> s;
  __shared__ int32_t table_s[detail::kTableCap];
  __shared__ int is_last;
  extern __shared__ __align__(16) float4 row_smem[];
  const int k = tx.k;
  if (len <= k) {
    if (blockIdx.x == 0)
      for (int i = len + threadIdx.x; i < k; i += kT) {
        tx.out_slots[static_cast<int64_t>(row) * k + i] = -1;
        if (tx.out_scores) tx.out_scores[static_cast<int64_t>(row) * k + i] = -__int_as_float(0x7f800000);
      }
    return;
  }
  const int blocks = (len + keys_per_block - 1) / keys_per_block;
  if (static_cast<int>(blockIdx.x) >= blocks) return;  // no key of this row here; not counted
  __threadfence();  // this block's scores are visible device-wide before it is counted
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t* counter = detail::row_workspace(tx.workspace, p.rows.num_rows, row).fused_count;
    is_last = atomicInc(counter, static_cast<unsigned>(blocks - 1)) == static_cast<unsigned>(blocks - 1);
  }
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  const float4* row4 = reinterpret_cast<const float4*>(p.scores + static_cast<int64_t>(row) * p.score_stride);
  const int n4 = (len + 3) / 4;
  constexpr int kUnroll = 8;  // 8 float4 loads in flight per thread: a 16K row in two L2 round trips
  for (int base = threadIdx.x; base < n4; base += kT * kUnroll) {
    float4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (base + u * kT < n4) v[u] = __ldcg(row4 + base + u * kT);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (base + u * kT < n4) row_smem[base + u * kT] = v[u];
  }
  const int32_t* table = p.rows.block_tables + static_cast<int64_t>(seq) * p.rows.block_table_stride;
  const int pages = (len + p.rows.page_size - 1) / p.rows.page_size;
  if (pages <= detail::kTableCap) {
    for (int i = threadIdx.x; i < pages; i += kT) table_s[i] = __ldg(table + i);
    table = table_s;
  }
  __syncthreads();
  detail::block_select<kT>(s, detail::SmemSource{row_smem}, len, k,
                           detail::SelectOut{tx.out_slots + static_cast<int64_t>(row) * k,
                                             tx.out_scores ? tx.out_scores + static_cast<int64_t>(row) * k : nullptr, k,
                                             table, p.rows.page_size});
}

// The key pool of sequence seq at the launch's layer: key_cache without a pool table; null for a
// sequence outside the table or a base that is null or not 16-byte aligned.
__device__ __forceinline__ const uint8_t* key_pool_of(const ScoreParams& p, int seq) {
  if (p.seq_pools == nullptr) return static_cast<const uint8_t*>(p.key_cache);
  if (seq < 0 || seq >= p.num_pools) return nullptr;
  const KeyPool* pool = p.seq_pools + seq;
  const uint8_t* b = static_cast<const uint8_t*>(pool->base);
  if (b == nullptr) return nullptr;
  b += static_cast<int64_t>(p.pool_layer) * pool->layer_bytes;
  return (reinterpret_cast<uintptr_t>(b) & 15u) == 0 ? b : nullptr;
}

// kWarps warps, each owning kSub * 32 consecutive keys (kSub tiles of 32 = two 16-key MMA tiles) of a
// chunk; all of a warp's key loads are issued before its first MMA, so kSub sets the bytes in flight.
// kRows consecutive query rows per block share the key fragments (kRows > 1 for prefill chunks).
template <KeyFormat F, int kWarps, int kRows, int kSub, int kMode>
__global__ void __launch_bounds__(kWarps * 32)
    indexer_scores_kernel(const ScoreParams p, const int num_chunks, const TailArgs tx) {
  static_assert(kMode == kPlain || kRows == 1, "histogram and fused modes are decode (one row per block) only");
  using Fmt = Format<F>;
  constexpr int kRowQBytes = kHeads * Fmt::kHeadBytes;
  constexpr int kChunks = Fmt::kHeadBytes / 16;
  constexpr int kKeysPerChunk = kWarps * 32 * kSub;
  __shared__ __align__(16) uint8_t q_smem[kRows * kRowQBytes];
  __shared__ float w_smem[kRows][kHeads];
  __shared__ int row_len_s[kRows], row_seq_s[kRows], row_bound_s[kRows];
  __shared__ const uint8_t* row_cache_s[kRows];  // the row's key pool at this layer (null: score 0)
  __shared__ uint32_t hist_s[kMode == kHistogram ? detail::kBins : 1];
  if constexpr (kMode == kHistogram)
    for (int i = threadIdx.x; i < detail::kBins; i += kWarps * 32) hist_s[i] = 0;
  static_assert(sizeof(q_smem) + sizeof(w_smem) + 3 * sizeof(row_len_s) <= 48 * 1024,
                "static shared memory must stay within 48 KB (and SM120's 99 KB per block)");

  // A top-k kernel launched behind this one with programmatic dependent launch may start its prologue
  // now (it reads no scores before griddepcontrol.wait, which waits for this whole grid and its writes).
  // Kernels launched without the attribute are unaffected.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
  const RowLayout& rows = p.rows;
  const int row0 = blockIdx.y * kRows;
  const float inv_sqrt_d = 0.08838834764831845f;  // 128^-0.5
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const int page_size = rows.page_size;

  // Decode blocks walk many chunks of one row: the page ids of the next chunk are fetched while the
  // current chunk's keys are in flight, so each chunk waits on one memory latency, not two.
  int next_page[kSub][2][2];
  bool have_next_page = false;
  constexpr bool kPrefetch = kRows == 1 && kMode != kFused;  // fused blocks own exactly one chunk

  constexpr int kQChunks = kRows * kHeads * kChunks, kThreads = kWarps * 32;
  auto q_src = [&](int idx) -> uint4 {
    const int row = row0 + idx / (kHeads * kChunks), h = (idx / kChunks) % kHeads, j = idx % kChunks;
    if (row >= rows.num_rows) return make_uint4(0, 0, 0, 0);
    return __ldg(reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(p.q) + static_cast<int64_t>(row) * kRowQBytes +
                                                h * Fmt::kHeadBytes + j * 16));
  };
  auto q_dst = [&](int idx) -> uint4* {
    const int r = idx / (kHeads * kChunks), h = (idx / kChunks) % kHeads, j = idx % kChunks;
    return reinterpret_cast<uint4*>(q_smem + r * kRowQBytes + q_chunk_offset<F>(h, j));
  };
  auto stage_rows = [&] {
    if (threadIdx.x < kRows) {
      const int row = row0 + threadIdx.x;
      row_len_s[threadIdx.x] = row < rows.num_rows ? rows.row_len[row] : 0;
      const int seq = row < rows.num_rows ? rows.row_seq[row] : -1;
      row_seq_s[threadIdx.x] = seq;
      row_cache_s[threadIdx.x] = key_pool_of(p, seq);
    }
  };
  if (p.early_pages == 1) {
    // Round 4. Warps issue in order, so a load whose address waits on another load (page id <- row_seq)
    // or a store that waits on its data stalls every later instruction of the warp. Hence: first every
    // independent load (all of this thread's q chunks, its weight and q scale), then the dependent chain
    // of decode blocks with one key pool (row length and sequence -> the first chunk's page ids, which
    // round 3 read only after staging and two barriers), then the row bookkeeping, then the stores.
    // The chain per block becomes row_seq -> page id -> key (three latencies) with q, w beside it; round 3
    // had q, q (FP8; four q loads for bf16, each waiting for the one before), w, barriers, page id, key.
    constexpr int kQIters = (kQChunks + kThreads - 1) / kThreads;
    constexpr int kWIters = (kRows * kHeads + kThreads - 1) / kThreads;
    uint4 qv[kQIters];
    float wv[kWIters], sv[kWIters];
    int my_len = 0, my_seq = -1;  // threads < kRows: their row's length and sequence (stored below)
    if (threadIdx.x < kRows && row0 + static_cast<int>(threadIdx.x) < rows.num_rows) {
      my_len = __ldg(rows.row_len + row0 + threadIdx.x);
      my_seq = __ldg(rows.row_seq + row0 + threadIdx.x);
    }
#pragma unroll
    for (int i = 0; i < kQIters; ++i) {
      const int idx = threadIdx.x + i * kThreads;
      qv[i] = idx < kQChunks ? q_src(idx) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int i = 0; i < kWIters; ++i) {
      const int idx = threadIdx.x + i * kThreads, row = row0 + idx / kHeads, h = idx % kHeads;
      const bool ok = idx < kRows * kHeads && row < rows.num_rows;
      wv[i] = ok ? __ldg(p.weights + static_cast<int64_t>(row) * kHeads + h) : 0.f;
      sv[i] = (ok && kScaled<F>) ? __ldg(p.q_scale + static_cast<int64_t>(row) * kHeads + h) : 1.f;
    }
    if constexpr (kPrefetch && kMode == kPlain) {  // the split path's histogram scores (32K+) keep round 3's order
      if (p.seq_pools == nullptr && row0 < rows.num_rows) {
        const int len = __ldg(rows.row_len + row0);
        const int32_t* table = rows.block_tables + static_cast<int64_t>(__ldg(rows.row_seq + row0)) * rows.block_table_stride;
        const int key0 = blockIdx.x * kKeysPerChunk + warp * 32 * kSub;
#pragma unroll
        for (int st = 0; st < kSub; ++st)
#pragma unroll
          for (int m = 0; m < 2; ++m)
#pragma unroll
            for (int half = 0; half < 2; ++half) {
              const int key = key0 + st * 32 + m * 16 + half * 8 + g;
              next_page[st][m][half] = key < len ? __ldg(table + key / page_size) : 0;
            }
        have_next_page = true;
      }
    }
    if (threadIdx.x < kRows) {  // stage_rows() with the loads issued above
      row_len_s[threadIdx.x] = my_len;
      row_seq_s[threadIdx.x] = my_seq;
      row_cache_s[threadIdx.x] = key_pool_of(p, my_seq);
    }
#pragma unroll
    for (int i = 0; i < kQIters; ++i) {
      const int idx = threadIdx.x + i * kThreads;
      if (idx < kQChunks) *q_dst(idx) = qv[i];
    }
#pragma unroll
    for (int i = 0; i < kWIters; ++i) {
      const int idx = threadIdx.x + i * kThreads;
      if (idx < kRows * kHeads) {
        float w = wv[i] * inv_sqrt_d;  // the same operations in the same order as below: identical scores
        if constexpr (kScaled<F>) w *= sv[i];
        w_smem[idx / kHeads][idx % kHeads] = w;
      }
    }
  } else {  // round 3's order
    stage_rows();
    for (int idx = threadIdx.x; idx < kQChunks; idx += blockDim.x) *q_dst(idx) = q_src(idx);
    for (int idx = threadIdx.x; idx < kRows * kHeads; idx += blockDim.x) {
      const int r = idx / kHeads, h = idx % kHeads, row = row0 + r;
      float w = 0.f;
      if (row < rows.num_rows) {
        w = p.weights[static_cast<int64_t>(row) * kHeads + h] * inv_sqrt_d;
        if constexpr (kScaled<F>) w *= p.q_scale[static_cast<int64_t>(row) * kHeads + h];
      }
      w_smem[r][h] = w;
    }
  }
  __syncthreads();
  // Keys are loaded once per sequence for all rows of the group: bound = longest such row.
  if (threadIdx.x < kRows) {
    int bound = 0;
    for (int r = 0; r < kRows; ++r)
      if (row_seq_s[r] == row_seq_s[threadIdx.x]) bound = max(bound, row_len_s[r]);
    row_bound_s[threadIdx.x] = bound;
  }
  __syncthreads();
  int group_max_len = 0;
  for (int r = 0; r < kRows; ++r) group_max_len = max(group_max_len, row_len_s[r]);

  for (int chunk = blockIdx.x; chunk < num_chunks; chunk += gridDim.x) {
    if (chunk * kKeysPerChunk >= group_max_len) break;  // chunks only grow: nothing left for this block
    const int warp_key0 = chunk * kKeysPerChunk + warp * 32 * kSub;
    int loaded_seq = -1;
    uint4 a[kSub][2][Fmt::kChunksPerThread][2];
    float ks[kSub][2][2];
    for (int r = 0; r < kRows; ++r) {
      const int len = row_len_s[r];
      if (warp_key0 >= len) continue;  // warp-uniform: causal rows that see none of this warp's keys
      const int seq = row_seq_s[r];
      if (seq != loaded_seq) {
        loaded_seq = seq;
        // Keys of a pool the table does not give count as zero vectors (score 0).
        const uint8_t* cache = row_cache_s[r];
        const int bound = cache != nullptr ? row_bound_s[r] : 0;
        const int32_t* table = rows.block_tables + static_cast<int64_t>(seq) * rows.block_table_stride;
#pragma unroll
        for (int st = 0; st < kSub; ++st)
#pragma unroll
          for (int m = 0; m < 2; ++m)
#pragma unroll
            for (int half = 0; half < 2; ++half) {
            const int key = warp_key0 + st * 32 + m * 16 + half * 8 + g;
            if (key < bound) {
              const int page = (kPrefetch && have_next_page) ? next_page[st][m][half] : __ldg(table + key / page_size);
              const int off = key % page_size;
              const uint8_t* rec;
              if constexpr (F == KeyFormat::kBf16) {
                rec = cache + (static_cast<int64_t>(page) * page_size + off) * kBf16RecordBytes;
                ks[st][m][half] = 1.f;
              } else {
                const uint8_t* page_base = cache + static_cast<int64_t>(page) * page_size * kFp8RecordBytes;
                rec = page_base + off * kHeadDim;
                ks[st][m][half] = __ldg(reinterpret_cast<const float*>(page_base + page_size * kHeadDim) + off);
              }
#pragma unroll
              for (int pp = 0; pp < Fmt::kChunksPerThread; ++pp)
                a[st][m][pp][half] = __ldg(reinterpret_cast<const uint4*>(rec) + 4 * pp + c);
            } else {
              ks[st][m][half] = 0.f;
#pragma unroll
              for (int pp = 0; pp < Fmt::kChunksPerThread; ++pp) a[st][m][pp][half] = make_uint4(0, 0, 0, 0);
            }
          }
        if (kPrefetch) {
          const int next_key0 = warp_key0 + gridDim.x * kKeysPerChunk;
#pragma unroll
          for (int st = 0; st < kSub; ++st)
#pragma unroll
            for (int m = 0; m < 2; ++m)
#pragma unroll
              for (int half = 0; half < 2; ++half) {
                const int key = next_key0 + st * 32 + m * 16 + half * 8 + g;
                next_page[st][m][half] = key < bound ? __ldg(table + key / page_size) : 0;
              }
          have_next_page = true;
        }
      }

#pragma unroll
      for (int st = 0; st < kSub; ++st) {
        const int key0 = warp_key0 + st * 32;
        if (key0 >= len) break;  // warp-uniform
        Acc<F> acc[2][4][4];
#pragma unroll
        for (int m = 0; m < 2; ++m)
#pragma unroll
          for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[m][nt][i] = 0;
        const uint8_t* qrow = q_smem + r * kRowQBytes;
#pragma unroll
        for (int pp = 0; pp < Fmt::kChunksPerThread; ++pp)
#pragma unroll
          for (int nt = 0; nt < 4; ++nt) {
            const uint4 b = *reinterpret_cast<const uint4*>(qrow + q_chunk_offset<F>(nt * 8 + g, 4 * pp + c));
#pragma unroll
            for (int m = 0; m < 2; ++m) {
              const uint4& lo = a[st][m][pp][0];  // key g of tile m
              const uint4& hi = a[st][m][pp][1];  // key g + 8
              mma_step<F>(acc[m][nt], lo.x, hi.x, lo.y, hi.y, b.x, b.y);
              mma_step<F>(acc[m][nt], lo.z, hi.z, lo.w, hi.w, b.z, b.w);
            }
          }

        // acc[m][nt] = {key g: heads 2c, 2c+1 ; key g+8: heads 2c, 2c+1} of head block nt.
        float res[2][2];
#pragma unroll
        for (int m = 0; m < 2; ++m)
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            float s = 0.f;
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) {
              const int h = nt * 8 + 2 * c;
              s += w_smem[r][h] * fmaxf(static_cast<float>(acc[m][nt][2 * half]) * ks[st][m][half], 0.f);
              s += w_smem[r][h + 1] * fmaxf(static_cast<float>(acc[m][nt][2 * half + 1]) * ks[st][m][half], 0.f);
            }
            s += __shfl_xor_sync(0xffffffffu, s, 1);
            s += __shfl_xor_sync(0xffffffffu, s, 2);
            res[m][half] = s;
          }
        // Lane (g, c) stores key 16 (c >> 1) + 8 (c & 1) + g: the warp's 32 stores are one 128-byte line.
        const float out = c == 0 ? res[0][0] : c == 1 ? res[0][1] : c == 2 ? res[1][0] : res[1][1];
        const int key = key0 + 16 * (c >> 1) + 8 * (c & 1) + g;
        // kHistogram counts into shared memory here and merges once per block at the end (per-key
        // global atomics were measured on the H200: 39 us instead of 29 at 128K, hot bins of one row).
        if (key < len) {
          if constexpr (kMode == kFused) {
            if (len <= tx.k) {  // the whole row is the selection: emit it in position order
              const int64_t o = static_cast<int64_t>(row0) * tx.k + key;
              tx.out_slots[o] = detail::slot_of(rows, row_seq_s[0], key);
              if (tx.out_scores) tx.out_scores[o] = out;
            } else {
              p.scores[static_cast<int64_t>(row0) * p.score_stride + key] = out;
            }
          } else {
            p.scores[static_cast<int64_t>(row0 + r) * p.score_stride + key] = out;
          }
          if constexpr (kMode == kHistogram)
            if (len > tx.k) atomicAdd(&hist_s[detail::order_key(out) >> (32 - detail::kDigitBits)], 1u);
        }
      }  // sub-tiles
    }
  }
  if constexpr (kMode == kHistogram) {
    // One global atomic per non-empty bin and block (per-key global atomics were measured on the H200:
    // every one lands on a few hot bins of the row, 39 us instead of 29 at 128K).
    __syncthreads();
    if (row0 < rows.num_rows && row_len_s[0] > tx.k) {
      uint32_t* hist = detail::row_workspace(tx.workspace, rows.num_rows, row0).hist;
      for (int i = threadIdx.x; i < detail::kBins; i += kWarps * 32)
        if (hist_s[i]) atomicAdd(hist + i, hist_s[i]);
    }
  }
  if constexpr (kMode == kFused)
    if (row0 < rows.num_rows) fused_tail<kWarps * 32>(p, tx, row0, row_len_s[0], row_seq_s[0], kKeysPerChunk);
}

template <KeyFormat F, int kWarps, int kRows, int kSub, int kMode = kPlain>
cudaError_t launch_scores(const ScoreParams& p, cudaStream_t stream, const TailArgs& tx = {}) {
  constexpr int kKeysPerChunk = kWarps * 32 * kSub;
  const int num_chunks = (p.rows.max_row_len + kKeysPerChunk - 1) / kKeysPerChunk;
  const int grid_y = (p.rows.num_rows + kRows - 1) / kRows;
  if (num_chunks == 0 || grid_y == 0) return cudaSuccess;
  int grid_x = num_chunks;
  if (kRows == 1) {
    // Decode: two waves of resident blocks; a block then walks several chunks with its q staged once.
    int device = 0, sms = 0, resident = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (err == cudaSuccess)
      err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, indexer_scores_kernel<F, kWarps, kRows, kSub, kMode>,
                                                          kWarps * 32, 0);
    if (err != cudaSuccess) return err;
    const int target = 2 * max(resident, 1) * sms;
    grid_x = min(num_chunks, max(1, (target + grid_y - 1) / grid_y));
  }
  if (grid_y > 65535) return cudaErrorInvalidValue;
  ScoreParams pk = p;
  pk.early_pages = detail::scores_early_pages(p) ? 1 : 0;
  indexer_scores_kernel<F, kWarps, kRows, kSub, kMode><<<dim3(grid_x, grid_y), kWarps * 32, 0, stream>>>(pk, num_chunks, tx);
  return cudaGetLastError();
}

// Fused decode: 8 warps x 32 keys per block, one chunk per block (all of a short row's keys in flight at
// once), the row's scores staged in dynamic shared memory by the last block (64 KB at 16K keys; with the
// static part under SM120's 99 KB per block).
template <KeyFormat F>
cudaError_t launch_fused(const ScoreParams& p, const TailArgs& tx, cudaStream_t stream) {
  constexpr int kWarps = 8, kKeys = kWarps * 32;
  const int num_chunks = (p.rows.max_row_len + kKeys - 1) / kKeys;
  const size_t dyn = p.rows.max_row_len > tx.k ? static_cast<size_t>(indexer_score_stride(p.rows.max_row_len)) * 4 : 0;
  auto kernel = indexer_scores_kernel<F, kWarps, 1, 1, kFused>;
  ScoreParams pk = p;
  pk.early_pages = detail::scores_early_pages(p) ? 1 : 0;
  if (dyn > 0) {
    const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(dyn));
    if (err != cudaSuccess) return err;
  }
  kernel<<<dim3(max(num_chunks, 1), p.rows.num_rows), kWarps * 32, dyn, stream>>>(pk, num_chunks, tx);
  return cudaGetLastError();
}

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

}  // namespace

namespace detail {

cudaError_t check_scores(const ScoreParams& p) {
  const RowLayout& rows = p.rows;
  if (rows.num_rows < 0 || rows.max_row_len < 0 || rows.page_size <= 0 || p.early_pages < -1 || p.early_pages > 1)
    return cudaErrorInvalidValue;
  if (rows.num_rows == 0 || rows.max_row_len == 0) return cudaSuccess;
  const bool multi = p.seq_pools != nullptr;  // per-sequence pools: key_cache unused, the table checked on the device
  if (multi && (p.num_pools < 1 || p.pool_layer < 0)) return cudaErrorInvalidValue;
  if (!rows.row_seq || !rows.row_len || !rows.block_tables || !p.q || !p.weights || (!multi && !p.key_cache) ||
      !p.scores)
    return cudaErrorInvalidValue;
  if (!aligned16(p.q) || (!multi && !aligned16(p.key_cache)) || p.score_stride < rows.max_row_len) return cudaErrorInvalidValue;
  if (p.format == KeyFormat::kFp8 || p.format == KeyFormat::kInt8) {
    // Page bases must stay 16-byte aligned for the vector loads: page_size * 132 % 16 == 0.
    if (!p.q_scale || (static_cast<int64_t>(rows.page_size) * kFp8RecordBytes) % 16 != 0) return cudaErrorInvalidValue;
  } else if (p.format != KeyFormat::kBf16) {
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

cudaError_t launch_scores_with_histogram(const ScoreParams& p, int k, void* workspace, cudaStream_t stream) {
  TailArgs tx;
  tx.k = k;
  tx.workspace = workspace;
  return p.format == KeyFormat::kFp8    ? launch_scores<KeyFormat::kFp8, 4, 1, 1, kHistogram>(p, stream, tx)
         : p.format == KeyFormat::kInt8 ? launch_scores<KeyFormat::kInt8, 4, 1, 1, kHistogram>(p, stream, tx)
                                        : launch_scores<KeyFormat::kBf16, 4, 1, 1, kHistogram>(p, stream, tx);
}

cudaError_t launch_scores_fused(const ScoreParams& p, int k, int32_t* out_slots, float* out_scores, void* workspace,
                                cudaStream_t stream) {
  TailArgs tx;
  tx.k = k;
  tx.out_slots = out_slots;
  tx.out_scores = out_scores;
  tx.workspace = workspace;
  return p.format == KeyFormat::kFp8    ? launch_fused<KeyFormat::kFp8>(p, tx, stream)
         : p.format == KeyFormat::kInt8 ? launch_fused<KeyFormat::kInt8>(p, tx, stream)
                                        : launch_fused<KeyFormat::kBf16>(p, tx, stream);
}

}  // namespace detail

cudaError_t launch_indexer_scores(const ScoreParams& p, cudaStream_t stream) {
  const cudaError_t err = detail::check_scores(p);
  if (err != cudaSuccess || p.rows.num_rows == 0 || p.rows.max_row_len == 0) return err;
  const RowLayout& rows = p.rows;
  if (p.format == KeyFormat::kFp8) {
    // Prefill chunks stage 8 rows of e4m3 q per block (32 KB); decode one row.
    // kSub = 2 (64 keys in flight per warp) needs 255 registers and spills on sm_90, where ptxas
    // emulates the e4m3 MMA; one 32-key tile per warp plus the page-id prefetch is used everywhere.
    return rows.num_rows >= 256 ? launch_scores<KeyFormat::kFp8, 8, 8, 1>(p, stream)
                                : launch_scores<KeyFormat::kFp8, 4, 1, 1>(p, stream);
  }
  if (p.format == KeyFormat::kInt8)  // the FP8 configuration: same bytes per key and per q row
    return rows.num_rows >= 256 ? launch_scores<KeyFormat::kInt8, 8, 8, 1>(p, stream)
                                : launch_scores<KeyFormat::kInt8, 4, 1, 1>(p, stream);
  return rows.num_rows >= 256 ? launch_scores<KeyFormat::kBf16, 8, 4, 1>(p, stream)
                              : launch_scores<KeyFormat::kBf16, 4, 1, 1>(p, stream);
}

}  // namespace glm5rt::kernels::indexer

#include "backend/cuda/cuda_backend.hpp"

#include <cuda_fp8.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "backend/cpu/rope.hpp"
#include "kernels/attention/sparse_mla.h"
#include "kernels/common/absorbed_heads.cuh"
#include "kernels/common/fast_bridge.cuh"
#include "kernels/common/moe_bridge.cuh"
#include "kernels/gemm/fp8_gemm.h"
#include "kernels/moe/moe.h"
#include "kernels/common/simple_forward.cuh"
#include "kernels/indexer/indexer_params.hpp"
#include "model/dtype_decode.hpp"
#include "runtime/error.hpp"
#include "runtime/log.hpp"

namespace glm5rt {

bool cuda_device_usable(int32_t device_index, std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    if (why) *why = std::string("no usable CUDA device: ") + cudaGetErrorString(e);
    return false;
  }
  if (device_index >= n) {
    if (why) *why = "CUDA device " + std::to_string(device_index) + " requested, " + std::to_string(n) + " present";
    return false;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device_index) != cudaSuccess) {
    (void)cudaGetLastError();
    if (why) *why = "cannot query CUDA device " + std::to_string(device_index);
    return false;
  }
  if (prop.major < 8) {
    if (why) *why = std::string("CUDA device ") + prop.name + " has compute capability " + std::to_string(prop.major) +
                    "." + std::to_string(prop.minor) + "; libglm5rt needs 8.0 or newer";
    return false;
  }
  return true;
}

namespace cuda {

namespace {

using bf16 = __nv_bfloat16;

constexpr int64_t kAlign = 256;
// Decode-sized batches give the fast indexer its top-k workspace (fused kernel for short rows, split
// top-k for long ones; about 45 KB per row); larger ones get its one-block-per-row top-k.
constexpr int64_t kFastTopkSplitRows = 64;
int64_t align_up(int64_t v, int64_t a = kAlign) { return (v + a - 1) / a * a; }

// Sub-allocations of one device buffer, laid out in a fixed order so that equal capacities give equal
// addresses (graphs stay valid).
class Carver {
 public:
  explicit Carver(char* base) : base_(base) {}
  template <typename T>
  T* take(int64_t count) {
    T* p = reinterpret_cast<T*>(base_ ? base_ + used_ : nullptr);
    used_ += align_up(count * static_cast<int64_t>(sizeof(T)));
    return p;
  }
  int64_t used() const { return used_; }

 private:
  char* base_;
  int64_t used_ = 0;
};

uint16_t f32_to_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// Host encoding of n values into a record part: bf16, or e4m3 with one scale per `group` (same rule as
// the device: scale = amax / 448).
void encode_values(const float* v, int64_t n, bool fp8, int64_t group, char* out, char* scales) {
  if (!fp8) {
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t b = f32_to_bf16_bits(v[i]);
      std::memcpy(out + 2 * i, &b, 2);
    }
    return;
  }
  for (int64_t g = 0; g * group < n; ++g) {
    float amax = 0.f;
    for (int64_t i = g * group; i < std::min(n, (g + 1) * group); ++i) amax = std::max(amax, std::fabs(v[i]));
    const float s = amax > 0.f ? amax / 448.f : 1.f;
    std::memcpy(scales + 4 * g, &s, 4);
    for (int64_t i = g * group; i < std::min(n, (g + 1) * group); ++i)
      out[i] = static_cast<char>(__nv_cvt_float_to_fp8(v[i] / s, __NV_SATFINITE, __NV_E4M3));
  }
}

void decode_values(const char* in, int64_t n, bool fp8, int64_t group, const char* scales, float* v) {
  for (int64_t i = 0; i < n; ++i) {
    if (fp8) {
      float s;
      std::memcpy(&s, scales + 4 * (i / group), 4);
      v[i] = e4m3_to_f32(static_cast<uint8_t>(in[i])) * s;
    } else {
      uint16_t b;
      std::memcpy(&b, in + 2 * i, 2);
      v[i] = bf16_to_f32(b);
    }
  }
}

// Byte offsets inside one layer's indexer-key pool of a slot's key vector and (FP8) its scale: bf16 keys
// sit at slot * index_bytes; FP8 keys use the per-page layout (a page's vectors, then its scales) of
// simple_device.cuh index_vector / index_scale and kernels/indexer.
int64_t index_vector_offset(const glm5k::RecordFormat& f, int64_t page_size, int64_t slot) {
  if (f.index_dtype != glm5k::kRecFp8) return slot * f.index_bytes();
  return (slot / page_size) * page_size * f.index_bytes() + (slot % page_size) * f.index_dim;
}
int64_t index_scale_offset(const glm5k::RecordFormat& f, int64_t page_size, int64_t slot) {
  return (slot / page_size) * page_size * f.index_bytes() + page_size * f.index_dim + (slot % page_size) * 4;
}

int32_t record_dtype(int32_t requested, const char* what) {
  if (requested == GLM5RT_DTYPE_AUTO || requested == GLM5RT_DTYPE_BF16) return glm5k::kRecBf16;
  if (requested == GLM5RT_DTYPE_FP8_E4M3) return glm5k::kRecFp8;
  fail(Status::unsupported, "the CUDA backend keeps ", what, " records as bf16 or FP8 e4m3 (dtype AUTO, BF16 or ",
       "FP8_E4M3), got dtype ", requested);
}

// The names the setters accept and the getters return, indexed by the backend's numeric choice: one table
// each, so that a new choice is spelled in one place.
constexpr const char* kFp8PathNames[] = {"auto", "direct", "dequant", "gemm"};
constexpr const char* kKernelNames[] = {"simple", "fast-mla", "fast-attn", "fast"};

// The index of `name` in `names`; otherwise fails with the list of accepted names.
template <size_t N>
int named_choice(const char* const (&names)[N], const std::string& name, const char* what) {
  std::string accepted;
  for (size_t i = 0; i < N; ++i) {
    if (name == names[i]) return static_cast<int>(i);
    accepted += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + std::string(names[i]);
  }
  fail(Status::invalid_argument, what, " must be ", accepted, ", got ", name);
}

}  // namespace

// ---- cache ----

CudaCache::CudaCache(int64_t n_pages, int32_t page_size, int64_t n_layers, const glm5k::RecordFormat& fmt)
    : n_pages_(n_pages), page_size_(page_size), fmt_(fmt) {
  const size_t lb = static_cast<size_t>(n_layers * n_slots() * fmt.latent_bytes());
  const size_t ib = static_cast<size_t>(n_layers * n_slots() * fmt.index_bytes());
  latent_.allocate(lb, "the latent cache records");
  index_.allocate(ib, "the indexer key cache records");
  // Defined contents: a record is only read after it was written, but zeros keep stray reads harmless.
  if (lb) check(cudaMemset(latent_.get(), 0, lb), "clearing the cache");
  if (ib) check(cudaMemset(index_.get(), 0, ib), "clearing the cache");
}

// ---- per-forward work buffers ----

struct CudaBackend::Work {
  int64_t rows = 0, ctx = 0, n_out = 0;
  DeviceBuffer mem;
  float *x, *delta, *delta2, *h2f, *cos, *sin, *qa, *ckv, *q, *q_rot, *q_lat, *qi, *kraw, *iw, *scores;
  bf16 *hb, *h2b, *qrb, *q_nope, *o_lat, *ob;
  int32_t *sel, *n_sel;
  int32_t* sel_slots;  // the selection as physical slots, -1 padded (fast MLA input; fast indexer output)
  bf16* q_pack;        // [rows, heads, kv_lora + rope] bf16 absorbed query (fast MLA)
  float* lse;          // [rows, heads] (fast MLA writes it; unused)
  uint8_t* qi_q;       // [rows, index heads, index dim] bf16 or e4m3 indexer query (fast indexer)
  float* qi_scale;     // [rows, index heads] e4m3 query scales
  float *g, *u;
  bf16* act;
  float *rlog, *rw, *eg, *eu, *ey, *sh;
  int32_t *ids, *pair_rows, *pair_of, *tiles, *n_tiles;
  int32_t max_tiles;
  bf16* eact;
  bf16* xn;
  float* logits;
  int32_t* argmax;
  // fp8_gemm / moe_forward: e4m3 activations [rows, max k] + scales, bf16 GEMM outputs [rows, max n],
  // the MoE block's bf16 output and its workspace.
  uint8_t* fq;
  float* fs;
  bf16* fy;
  bf16* moe_out;
  void* moe_ws;
  int64_t moe_ws_bytes;
  bf16* fsplit;          // split-K partials [slices * rows, n] (rows <= CudaBackend::kSplitMaxRows)
  int64_t split_sn = 0;  // largest slices x n of the split weights (set by the backend)

  int64_t layout(const ModelConfig& c, char* base) {
    const int64_t R = rows, D = c.hidden_size, H = c.num_attention_heads, half = c.qk_rope_head_dim / 2;
    const int64_t qkd = c.qk_head_dim(), lat = c.kv_lora_rank + c.qk_rope_head_dim;
    const int64_t I = std::max(c.intermediate_size, c.moe_intermediate_size * std::max<int64_t>(1, c.n_shared_experts));
    const int64_t K = std::max<int64_t>(1, c.num_experts_per_tok), P = R * K, E = std::max<int64_t>(1, c.n_routed_experts);
    Carver cv(base);
    x = cv.take<float>(R * D);
    delta = cv.take<float>(R * D);
    delta2 = cv.take<float>(R * D);
    h2f = cv.take<float>(R * D);
    hb = cv.take<bf16>(R * D);
    h2b = cv.take<bf16>(R * D);
    cos = cv.take<float>(R * half);
    sin = cv.take<float>(R * half);
    qa = cv.take<float>(R * c.q_lora_rank);
    qrb = cv.take<bf16>(R * c.q_lora_rank);
    ckv = cv.take<float>(R * lat);
    q = cv.take<float>(R * H * qkd);
    q_nope = cv.take<bf16>(R * H * c.qk_nope_head_dim);
    q_rot = cv.take<float>(R * H * c.qk_rope_head_dim);
    q_lat = cv.take<float>(R * H * c.kv_lora_rank);
    o_lat = cv.take<bf16>(R * H * c.kv_lora_rank);
    ob = cv.take<bf16>(R * H * c.v_head_dim);
    qi = cv.take<float>(R * c.index_n_heads * c.index_head_dim);
    kraw = cv.take<float>(R * c.index_head_dim);
    iw = cv.take<float>(R * c.index_n_heads);
    scores = cv.take<float>(R * ctx);
    sel = cv.take<int32_t>(R * c.index_topk);
    n_sel = cv.take<int32_t>(R);
    sel_slots = cv.take<int32_t>(R * c.index_topk);
    q_pack = cv.take<bf16>(R * H * lat);
    lse = cv.take<float>(R * H);
    qi_q = cv.take<uint8_t>(R * c.index_n_heads * c.index_head_dim * 2);
    qi_scale = cv.take<float>(R * c.index_n_heads);
    g = cv.take<float>(R * I);
    u = cv.take<float>(R * I);
    act = cv.take<bf16>(R * I);
    const int64_t Im = std::max<int64_t>(1, c.moe_intermediate_size);
    rlog = cv.take<float>(R * E);
    ids = cv.take<int32_t>(P);
    rw = cv.take<float>(P);
    pair_rows = cv.take<int32_t>(P);
    pair_of = cv.take<int32_t>(P);
    max_tiles = glm5k::moe_max_tiles(static_cast<int32_t>(R), static_cast<int32_t>(K), static_cast<int32_t>(E));
    tiles = cv.take<int32_t>(3 * static_cast<int64_t>(max_tiles));
    n_tiles = cv.take<int32_t>(1);
    eg = cv.take<float>(P * Im);
    eu = cv.take<float>(P * Im);
    eact = cv.take<bf16>(P * Im);
    ey = cv.take<float>(P * D);
    sh = cv.take<float>(R * D);
    xn = cv.take<bf16>(n_out * D);
    logits = cv.take<float>(n_out * c.vocab_size);
    argmax = cv.take<int32_t>(n_out);
    const int64_t Is = c.moe_intermediate_size * std::max<int64_t>(1, c.n_shared_experts);
    const int64_t max_k = std::max({D, c.q_lora_rank, H * c.v_head_dim, c.intermediate_size, Is});
    const int64_t max_n = std::max({D, c.q_lora_rank, H * qkd, lat, c.index_n_heads * c.index_head_dim,
                                    c.index_head_dim, 2 * c.intermediate_size, 2 * Is});
    fq = cv.take<uint8_t>(R * max_k);
    fs = cv.take<float>(R * ((max_k + 127) / 128));
    fy = cv.take<bf16>(R * max_n);
    moe_out = cv.take<bf16>(c.n_routed_experts > 0 ? R * D : 0);
    moe_ws_bytes = c.n_routed_experts > 0 && c.moe_intermediate_size > 0
                       ? static_cast<int64_t>(kernels::moe_workspace_size(
                             static_cast<int>(R), static_cast<int>(D), static_cast<int>(c.moe_intermediate_size),
                             static_cast<int>(E), static_cast<int>(K)))
                       : 0;
    moe_ws = cv.take<char>(moe_ws_bytes);
    fsplit = cv.take<bf16>(std::min<int64_t>(R, CudaBackend::kSplitMaxRows) * split_sn);
    return cv.used();
  }
};

// ---- backend ----

CudaBackend::CudaBackend(const ModelConfig& c, DevWeights weights, int32_t device)
    : config_(c), device_(device), w_(std::move(weights)) {
  require(c.qk_rope_head_dim % 2 == 0 && c.index_head_dim >= c.qk_rope_head_dim, Status::format,
          "unsupported rope / indexer head dims");
  require(c.n_group >= 1 && c.n_routed_experts % c.n_group == 0, Status::format,
          "n_routed_experts must be a multiple of n_group");
  require(c.index_head_dim <= 256 && c.n_routed_experts <= 256 && c.num_experts_per_tok <= 32, Status::unsupported,
          "the CUDA backend supports index_head_dim <= 256, n_routed_experts <= 256, num_experts_per_tok <= 32");
  require(c.kv_lora_rank % 4 == 0, Status::unsupported, "the CUDA backend needs kv_lora_rank % 4 == 0");
  check(cudaSetDevice(device_), "cudaSetDevice");
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  lt_ = std::make_unique<LtGemm>();
  const cpu::Rope rope = cpu::Rope::from_config(c);
  rope_factor_ = rope.attention_factor;
  softmax_scale_ = cpu::attention_softmax_scale(c, true);
  inv_freq_.allocate(rope.inv_freq.size() * 4, "rope frequencies");
  check(cudaMemcpy(inv_freq_.get(), rope.inv_freq.data(), rope.inv_freq.size() * 4, cudaMemcpyHostToDevice),
        "uploading rope frequencies");
  if (w_.max_fp8_dense > 0) dequant_.allocate(static_cast<size_t>(w_.max_fp8_dense) * 2, "the FP8 dequantisation workspace");
  work_ = std::make_unique<Work>();
  if (const char* p = std::getenv("GLM5RT_CUDA_FP8_PATH")) set_fp8_path(p);
  const int64_t H = c.num_attention_heads;
  mla_dims_ok_ = c.kv_lora_rank == kernels::kMlaLatentDim && c.qk_rope_head_dim == kernels::kMlaRopeDim &&
                 (H == 8 || H == 16 || H == 32 || H == 64 || H == 128) && c.index_topk >= 1;
  idx_dims_ok_ = c.index_n_heads == kernels::indexer::kHeads && c.index_head_dim == kernels::indexer::kHeadDim &&
                 c.index_topk >= 1 && c.index_topk <= kernels::indexer::kMaxTopK;
  if (const char* p = std::getenv("GLM5RT_CUDA_KERNELS")) set_kernels(p);
  if (const char* p = std::getenv("GLM5RT_CUDA_BATCH_ATTN")) batch_attn_ = std::string(p) != "0";
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device_), "cudaGetDeviceProperties");
  num_sms_ = prop.multiProcessorCount;
  // kernels/gemm needs FP8 conversions (compute capability 8.9+); PDL needs 9.0+.
  const bool fp8_kernels = prop.major > 8 || (prop.major == 8 && prop.minor >= 9);
  pdl_ = prop.major >= 9;
  if (const char* p = std::getenv("GLM5RT_CUDA_FP8_SPLITK")) split_k_ = std::string(p) != "0";
  if (const char* p = std::getenv("GLM5RT_CUDA_PROJ_GROUP")) proj_group_ = std::string(p) != "0";
  if (const char* p = std::getenv("GLM5RT_CUDA_PROJ_GROUP_EARLY")) proj_group_early_ = std::string(p) != "0";
  if (const char* p = std::getenv("GLM5RT_CUDA_ATTN_FUSE")) attn_fuse_ = std::string(p) != "0";
  if (fp8_kernels) build_fast_tables();
  const char* side = std::getenv("GLM5RT_CUDA_MOE_SIDE_STREAM");
  if (fp8_kernels && !(side && std::string(side) == "0")) {
    check(cudaStreamCreateWithFlags(&side_stream_, cudaStreamNonBlocking), "cudaStreamCreate (MoE shared expert)");
    for (cudaEvent_t& e : side_ev_) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  }
  log(LogLevel::info, "cuda backend on device ", device_, " (", prop.name, "): weights ", w_.bytes >> 20, " MiB");
}

CudaBackend::~CudaBackend() {
  (void)cudaSetDevice(device_);
  if (stream_) (void)cudaStreamSynchronize(stream_);
  clear_graphs();
  for (cudaEvent_t e : stage_ev_) (void)cudaEventDestroy(e);
  if (plan_host_) (void)cudaFreeHost(plan_host_);
  for (cudaEvent_t e : side_ev_)
    if (e) (void)cudaEventDestroy(e);
  if (side_stream_) (void)cudaStreamDestroy(side_stream_);
  if (stream_) (void)cudaStreamDestroy(stream_);
}

void CudaBackend::clear_graphs() {
  for (auto& [k, g] : graphs_) (void)cudaGraphExecDestroy(g);
  graphs_.clear();
}

void CudaBackend::set_fp8_path(const std::string& path) {
  fp8_path_ = named_choice(kFp8PathNames, path, "FP8 path");
  clear_graphs();
}

void CudaBackend::set_fp8_split_k(bool on) {
  split_k_ = on;
  clear_graphs();
}

void CudaBackend::set_proj_grouping(bool on) {
  proj_group_ = on;
  clear_graphs();
}

void CudaBackend::set_attention_fusion(bool on) {
  attn_fuse_ = on;
  clear_graphs();
}

void CudaBackend::set_proj_group_early(bool on) {
  proj_group_early_ = on;
  clear_graphs();
}

// Slices for a dense weight's split-K: the largest divisor S of its k / 128 blocks with >= 2 blocks per
// slice and about 4 decode blocks (64 output rows x one slice) per SM at most; 1 when it fills the GPU.
int32_t CudaBackend::split_slices(const DevLinear& L) const { return split_slices(L.n, L.k); }

int32_t CudaBackend::split_slices(int64_t n, int64_t k) const {
  const int64_t blocks = (n + 63) / 64, kb = k / kernels::kFp8Block;
  const int64_t target = (4 * static_cast<int64_t>(num_sms_) + blocks - 1) / blocks;
  int32_t best = 1;
  for (int64_t d = 2; d <= target && kb / d >= 2; ++d)
    if (kb % d == 0) best = static_cast<int32_t>(d);
  return best;
}

std::string CudaBackend::fp8_path() const {
  return kFp8PathNames[fp8_path_];
}

void CudaBackend::set_kernels(const std::string& which) {
  kernels_ = named_choice(kKernelNames, which, "CUDA kernels");
  clear_graphs();
}

void CudaBackend::set_batch_attention(bool on) {
  batch_attn_ = on;
  clear_graphs();
}

std::string CudaBackend::kernels() const {
  return kKernelNames[kernels_];
}

int64_t CudaBackend::fast_moe_layers() const {
  int64_t n = 0;
  for (const MoeTable& t : moe_tables_) n += t.ok;
  return n;
}

bool CudaBackend::fp8_gemm_fits(const DevLinear& L) const {
  return L.dtype == glm5k::kWFp8 && L.block_n == kernels::kFp8Block && L.block_k == kernels::kFp8Block &&
         L.k % kernels::kFp8Block == 0 && L.n % 2 == 0 && L.n > 0;
}

const CudaBackend::Fp8Table* CudaBackend::fp8_table(const DevLinear& L) const {
  const auto it = fp8_tables_.find(L.w);
  return it == fp8_tables_.end() ? nullptr : &it->second;
}

// The device pointer arrays fp8_gemm and moe_forward read their weights through: one entry per dense FP8
// weight that fits fp8_gemm, a [gate, up] pair per dense SwiGLU MLP (one fused gate|up GEMM), and per MoE
// layer whose experts fit moe_forward the (E + 1) x {gate, up} and (E + 1) x down arrays (entry E: the
// shared expert), plus a bf16 copy of the router weight (moe_forward's router reads bf16, as transformers
// computes the router on the bf16 hidden state and weight). Built once; the weights never move.
void CudaBackend::build_fast_tables() {
  const ModelConfig& c = config_;
  std::vector<const void*> ptrs;  // weight pointers, then scale pointers, interleaved per table
  struct Pending {
    size_t at, count;
  };
  std::vector<std::pair<const void*, Pending>> dense, pairs;
  auto add = [&](std::initializer_list<const DevLinear*> ls, int64_t groups) {
    const size_t at = ptrs.size(), count = ls.size() * static_cast<size_t>(groups);
    std::vector<const void*> ws, ss;
    for (int64_t g = 0; g < groups; ++g)
      for (const DevLinear* L : ls) {
        ws.push_back(static_cast<const uint8_t*>(L->w) + g * L->group_stride);
        ss.push_back(L->scale + g * L->scale_group_stride);
      }
    ptrs.insert(ptrs.end(), ws.begin(), ws.end());
    ptrs.insert(ptrs.end(), ss.begin(), ss.end());
    return Pending{at, count};
  };
  moe_tables_.assign(w_.layers.size(), {});
  std::vector<std::array<Pending, 2>> moe_pending(w_.layers.size());
  const int64_t E = c.n_routed_experts, D = c.hidden_size, I = c.moe_intermediate_size;
  int64_t router_elems = 0;
  for (size_t li = 0; li < w_.layers.size(); ++li) {
    const DevLayer& l = w_.layers[li];
    for (const DevLinear* L : {&l.q_a, &l.q_b, &l.kv_a, &l.o_proj, &l.idx_wq_b, &l.idx_wk, &l.idx_wp, &l.dense.gate,
                               &l.dense.up, &l.dense.down, &l.shared.gate, &l.shared.up, &l.shared.down})
      if (!L->empty() && fp8_gemm_fits(*L) && !fp8_tables_.count(L->w)) {
        dense.emplace_back(L->w, add({L}, 1));
        fp8_tables_[L->w] = {};
      }
    for (const DevMlp* m : {&l.dense, &l.shared})
      if (!m->gate.empty() && fp8_gemm_fits(m->gate) && fp8_gemm_fits(m->up) && fp8_gemm_fits(m->down) &&
          m->gate.n == m->up.n && m->gate.n % kernels::kFp8Block == 0)
        pairs.emplace_back(m->gate.w, add({&m->gate, &m->up}, 1));
    if (!l.is_moe) continue;
    const DevMlp& x = l.experts;
    const bool shared_ok = !l.has_shared || (c.n_shared_experts == 1 && fp8_gemm_fits(l.shared.gate) &&
                                             fp8_gemm_fits(l.shared.up) && fp8_gemm_fits(l.shared.down) &&
                                             l.shared.gate.n == I && l.shared.down.k == I);
    const bool ok = fp8_gemm_fits(x.gate) && fp8_gemm_fits(x.up) && fp8_gemm_fits(x.down) && shared_ok &&
                    D % kernels::kFp8Block == 0 && I % kernels::kFp8Block == 0 && E >= 1 &&
                    E <= kernels::kRouterMaxExperts && c.num_experts_per_tok <= kernels::kRouterMaxTopK &&
                    c.num_experts_per_tok <= E && c.n_group <= kernels::kRouterMaxGroups &&
                    (c.n_group == 1 || E / c.n_group >= 2) && c.topk_group <= c.n_group && l.router.dtype == glm5k::kWF32;
    if (!ok) continue;
    moe_tables_[li].ok = true;
    // Experts 0..E-1 from the grouped weights, entry E from the shared expert (or the last routed expert
    // as a placeholder when there is none: with_shared is false then and the entry is never read).
    const size_t at_gu = ptrs.size();
    std::vector<const void*> gw, gs, dw, ds;
    for (int64_t e = 0; e <= E; ++e) {
      const bool sh = e == E;
      const DevLinear& g = sh && l.has_shared ? l.shared.gate : x.gate;
      const DevLinear& u = sh && l.has_shared ? l.shared.up : x.up;
      const DevLinear& d = sh && l.has_shared ? l.shared.down : x.down;
      const int64_t ge = sh ? (l.has_shared ? 0 : E - 1) : e;
      gw.push_back(static_cast<const uint8_t*>(g.w) + ge * g.group_stride);
      gw.push_back(static_cast<const uint8_t*>(u.w) + ge * u.group_stride);
      gs.push_back(g.scale + ge * g.scale_group_stride);
      gs.push_back(u.scale + ge * u.scale_group_stride);
      dw.push_back(static_cast<const uint8_t*>(d.w) + ge * d.group_stride);
      ds.push_back(d.scale + ge * d.scale_group_stride);
    }
    for (auto* v : {&gw, &gs, &dw, &ds}) ptrs.insert(ptrs.end(), v->begin(), v->end());
    moe_pending[li] = {Pending{at_gu, gw.size()}, Pending{at_gu + 2 * gw.size(), dw.size()}};
    router_elems += E * D;
  }
  // Split-K of the decode projections that leave SMs idle (not the gate / up halves of a fused SwiGLU
  // pair, which run as one wide GEMM, nor the shared experts, which run inside moe_forward): S pointer
  // pairs into the checkpoint tensor itself, slice s = the weight's columns [s * k / S, (s + 1) * k / S)
  // and the matching scale columns, read with the full tensor's row strides (Fp8GemmParams::ldw /
  // ld_wscale). No copies: the weights stay where the loader put them.
  std::vector<std::pair<const void*, Pending>> splits;
  for (const DevLayer& l : w_.layers)
    for (const DevLinear* L : {&l.q_a, &l.q_b, &l.kv_a, &l.o_proj, &l.idx_wq_b, &l.idx_wk, &l.dense.down}) {
      if (L->empty() || !fp8_gemm_fits(*L) || fp8_split_.count(L->w)) continue;
      const int32_t S = split_slices(*L);
      if (S < 2) continue;
      const int64_t ks = L->k / S, kbs = ks / kernels::kFp8Block;
      DevLinear sliced = *L;  // S groups: slice s at (w + s * ks, scale + s * kbs), strides of the whole tensor
      sliced.k = ks;
      sliced.group_stride = ks;
      sliced.scale_group_stride = kbs;
      splits.emplace_back(L->w, add({&sliced}, S));
      fp8_split_[L->w] = SplitWeight{S, static_cast<int32_t>(L->k), static_cast<int32_t>(L->ld_scale()), {}};
      split_max_sn_ = std::max<int64_t>(split_max_sn_, S * L->n);
    }
  // Grouped projections (set_proj_grouping): no copies, only slice-major pointer tables into the weights.
  static_assert(kProjGroupMaxParts == kernels::kFp8MaxVariedParts, "ProjGroup::part_begin size");
  proj_groups_.assign(w_.layers.size(), {});
  std::vector<std::pair<ProjGroup*, Pending>> group_pending;
  // GLM5RT_CUDA_PROJ_GROUP_SLICES="x,q,o" overrides the slice counts of the three groups (0 or a count
  // that does not divide the group's K blocks: the split_slices rule), so that a count the benchmark
  // (glm5rt_bench_proj's "grouped sweep") found better can be tried without a rebuild.
  int32_t slice_override[3] = {0, 0, 0};
  if (const char* e = std::getenv("GLM5RT_CUDA_PROJ_GROUP_SLICES")) {
    const char* c = e;
    for (int i = 0; i < 3 && *c; ++i) {
      slice_override[i] = static_cast<int32_t>(std::strtol(c, nullptr, 10));
      while (*c && *c != ',') ++c;
      if (*c == ',') ++c;
    }
  }
  for (size_t li = 0; li < w_.layers.size(); ++li) {
    const DevLayer& l = w_.layers[li];
    LayerProj& lp = proj_groups_[li];
    const std::vector<const DevLinear*> members[3] = {{&l.q_a, &l.kv_a, &l.idx_wk}, {&l.q_b, &l.idx_wq_b}, {&l.o_proj}};
    ProjGroup* groups[3] = {&lp.x, &lp.q, &lp.o};
    for (int gi = 0; gi < 3; ++gi) {
      std::vector<const DevLinear*> parts;
      for (const DevLinear* L : members[gi])
        if (!L->empty()) parts.push_back(L);
      ProjGroup& g = *groups[gi];
      // Every part an fp8_gemm weight of the same k; boundaries on 64-row decode blocks (the last part
      // may end anywhere), widths multiples of 8 (fp8_split_reduce).
      bool ok = !parts.empty() && static_cast<int>(parts.size()) <= kProjGroupMaxParts;
      int64_t n = 0;
      for (size_t p = 0; ok && p < parts.size(); ++p) {
        const DevLinear& L = *parts[p];
        ok = fp8_gemm_fits(L) && L.k == parts[0]->k && L.n % 8 == 0 && (n % 64 == 0);
        g.part_begin[p] = static_cast<int32_t>(n);
        n += L.n;
      }
      if (!ok || n > (int64_t{1} << 30)) continue;
      g.ok = true;
      g.parts = static_cast<int32_t>(parts.size());
      g.part_begin[g.parts] = static_cast<int32_t>(n);
      g.n = static_cast<int32_t>(n);
      g.k = static_cast<int32_t>(parts[0]->k);
      g.ld_wscale = static_cast<int32_t>(parts[0]->ld_scale());
      g.slices = split_slices(n, g.k);
      const int32_t kb = g.k / kernels::kFp8Block, want = slice_override[gi];
      if (want >= 1 && want <= kb && kb % want == 0) g.slices = want;
      const int64_t ks = g.k / g.slices, kbs = ks / kernels::kFp8Block;
      const size_t at = ptrs.size(), count = static_cast<size_t>(g.slices) * parts.size();
      for (int32_t sl = 0; sl < g.slices; ++sl)
        for (const DevLinear* L : parts) ptrs.push_back(static_cast<const uint8_t*>(L->w) + sl * ks);
      for (int32_t sl = 0; sl < g.slices; ++sl)
        for (const DevLinear* L : parts) ptrs.push_back(L->scale + sl * kbs);
      group_pending.emplace_back(&g, Pending{at, count});
      split_max_sn_ = std::max<int64_t>(split_max_sn_, g.slices * n);
    }
  }
  if (!ptrs.empty()) {
    fast_tables_.allocate(ptrs.size() * sizeof(void*), "the FP8 GEMM weight tables");
    check(cudaMemcpy(fast_tables_.get(), ptrs.data(), ptrs.size() * sizeof(void*), cudaMemcpyHostToDevice),
          "uploading the FP8 GEMM weight tables");
  }
  const void* const* base = fast_tables_.as<const void*>();
  auto table = [&](const Pending& p) {
    return Fp8Table{reinterpret_cast<const uint8_t* const*>(base + p.at),
                    reinterpret_cast<const float* const*>(base + p.at + p.count)};
  };
  for (const auto& [w, p] : dense) fp8_tables_[w] = table(p);
  for (const auto& [w, p] : pairs) fp8_pair_tables_[w] = table(p);
  for (const auto& [w, p] : splits) fp8_split_.at(w).table = table(p);
  for (const auto& [g, p] : group_pending) g->table = table(p);
  if (router_elems > 0) router_bf16_.allocate(static_cast<size_t>(router_elems) * 2, "the bf16 router weights");
  int64_t r_at = 0;
  for (size_t li = 0; li < w_.layers.size(); ++li) {
    MoeTable& t = moe_tables_[li];
    if (!t.ok) continue;
    t.gate_up = table(moe_pending[li][0]);
    t.down = table(moe_pending[li][1]);
    bf16* r = router_bf16_.as<bf16>() + r_at;
    check(glm5k::launch_f32_to_bf16(static_cast<const float*>(w_.layers[li].router.w), E * D, r, stream_),
          "router weight to bf16");
    t.router = r;
    r_at += E * D;
  }
  check(cudaStreamSynchronize(stream_), "router weight to bf16");
}

// The fast families' workspaces for a forward of `rows` rows (grown outside any graph capture: a
// captured graph keeps the addresses it saw).
void CudaBackend::ensure_fast_workspace(const glm5k::RecordFormat& fmt) {
  size_t mla = 0, topk = 0;
  // The groups run one after the other: the largest need suffices. Batched over several pools: one launch
  // over all rows.
  std::vector<int64_t> launch_rows;
  if (multi_pool_ && !groups_.empty()) launch_rows.push_back(groups_.back().r1);  // rows [0, R)
  else
    for (const FastGroup& g : groups_) launch_rows.push_back(g.r1 - g.r0);
  for (const int64_t rows : launch_rows) {
    if (use_fast_mla_) {
      kernels::SparseMlaParams p;
      p.num_tokens = static_cast<int>(rows);
      p.num_heads = static_cast<int>(config_.num_attention_heads);
      p.topk = static_cast<int>(config_.index_topk);
      p.format = fmt.latent_dtype == glm5k::kRecFp8 ? kernels::MlaCacheFormat::kFp8 : kernels::MlaCacheFormat::kBf16;
      p.num_sms = num_sms_;
      mla = std::max(mla, kernels::sparse_mla_workspace_size(p));
    }
    if (use_fast_idx_ && rows <= kFastTopkSplitRows)
      topk = std::max(topk, kernels::indexer::indexer_topk_workspace_bytes(static_cast<int>(rows)));
  }
  if (mla <= mla_ws_.bytes() && topk <= topk_ws_.bytes()) return;
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  clear_graphs();
  if (mla > mla_ws_.bytes()) {
    mla_ws_.allocate(mla, "the sparse MLA split workspace");
    // Zeroed once: the fused combine's counters (its first kMlaCombineCounterBytes) must start at zero, and
    // every sparse_mla_forward call leaves them zero.
    check(cudaMemsetAsync(mla_ws_.get(), 0, mla_ws_.bytes(), stream_), "clearing the sparse MLA workspace");
  }
  if (topk > topk_ws_.bytes()) {
    topk_ws_.allocate(topk, "the indexer top-k workspace");
    // Zeroed once: the indexer's kernels leave it zero after every call (no clearing node per call).
    check(kernels::indexer::clear_indexer_topk_workspace(topk_ws_.get(), topk_ws_.bytes(), stream_),
          "clearing the indexer top-k workspace");
  }
}

MemoryReport CudaBackend::memory() const {
  MemoryReport m;
  m.weights = w_.bytes;  // split-K reads K slices of these in place: no copies
  m.workspace = static_cast<int64_t>(work_->mem.bytes());
  m.plan = static_cast<int64_t>(plan_dev_.bytes());
  m.dequant = static_cast<int64_t>(dequant_.bytes());
  m.cublas = static_cast<int64_t>(lt_->workspace_bytes());
  m.workspace += static_cast<int64_t>(mla_ws_.bytes() + topk_ws_.bytes() + fast_tables_.bytes() + router_bf16_.bytes());
  return m;
}

glm5k::RecordFormat CudaBackend::record_format(const CacheDtypes& d) const {
  glm5k::RecordFormat f;
  f.latent_dtype = record_dtype(d.latent, "latent");
  f.index_dtype = record_dtype(d.index, "indexer key");
  f.kv_lora = static_cast<int32_t>(config_.kv_lora_rank);
  f.rope = static_cast<int32_t>(config_.qk_rope_head_dim);
  f.index_dim = static_cast<int32_t>(config_.index_head_dim);
  return f;
}

int64_t CudaBackend::cache_bytes_per_token(const CacheDtypes& dtypes) const {
  const glm5k::RecordFormat f = record_format(dtypes);
  return config_.num_hidden_layers * (f.latent_bytes() + f.index_bytes());
}

std::unique_ptr<CacheStorage> CudaBackend::create_cache(int64_t n_pages, int32_t page_size, const CacheDtypes& dtypes) {
  check(cudaSetDevice(device_), "cudaSetDevice");
  require(n_pages >= 0 && page_size > 0, Status::invalid_argument, "bad cache shape");
  return std::make_unique<CudaCache>(n_pages, page_size, config_.num_hidden_layers, record_format(dtypes));
}

int64_t CudaBackend::default_cache_budget() const {
  size_t free_b = 0, total_b = 0;
  if (cudaSetDevice(device_) != cudaSuccess || cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  // Keep room for the forward's work buffers (they grow with the batch) and other sessions.
  const int64_t reserve = std::max<int64_t>(int64_t{1} << 30, static_cast<int64_t>(free_b) / 10);
  return std::max<int64_t>(static_cast<int64_t>(free_b) - reserve, static_cast<int64_t>(free_b) / 4) / 2;
}

void CudaBackend::ensure_work(int64_t rows, int64_t ctx_cap, int64_t n_out) {
  Work& w = *work_;
  if (rows <= w.rows && ctx_cap <= w.ctx && n_out <= w.n_out && w.mem.get()) return;
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  clear_graphs();
  w.rows = std::max(rows, w.rows);
  w.ctx = std::max(ctx_cap, w.ctx);
  w.n_out = std::max<int64_t>(std::max<int64_t>(1, n_out), w.n_out);
  w.mem.release();
  w.split_sn = split_max_sn_;
  const int64_t bytes = w.layout(config_, nullptr);
  w.mem.allocate(static_cast<size_t>(bytes), "the forward's work buffers");
  w.layout(config_, w.mem.as<char>());
}

void CudaBackend::ensure_plan_capacity(size_t bytes) {
  if (bytes <= plan_capacity_) return;
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  clear_graphs();
  const size_t cap = std::max(bytes, plan_capacity_ * 2);
  if (plan_host_) (void)cudaFreeHost(plan_host_);
  plan_host_ = nullptr;
  plan_capacity_ = 0;
  const cudaError_t e = cudaMallocHost(&plan_host_, cap);
  if (e != cudaSuccess) {
    plan_host_ = nullptr;
    check(e, "pinned host memory for the batch description");
  }
  plan_dev_.allocate(cap, "the batch description");
  plan_capacity_ = cap;
}

namespace {
// The row GEMM against one stored weight (bf16, or FP8 with its block scales): bf16 rows of `a` times
// L^T into float32 `c`. Callers add the row count (dense) or the expert grouping (MoE).
glm5k::RowGemmParams weight_gemm(const DevLinear& L, const void* a, float* c) {
  glm5k::RowGemmParams p;
  p.a = a;
  p.a_bf16 = true;
  p.lda = L.k;
  p.w = L.w;
  p.w_dtype = L.dtype;
  p.ldw = L.k;
  p.scale = L.scale;
  p.block_n = L.block_n;
  p.block_k = L.block_k;
  p.ld_scale = L.ld_scale();
  p.n = static_cast<int32_t>(L.n);
  p.k = static_cast<int32_t>(L.k);
  p.c = c;
  p.ldc = L.n;
  return p;
}
}  // namespace

namespace {
// Dense GEMMs of up to 32 rows (a decode batch) take fp8_gemm's decode kernel, which streams the weight
// once per 32 rows over n / 64 blocks; its automatic choice (made for MoE groups) would send 9..32 rows to
// the prefill kernel, whose n / 128 blocks read the weight with fewer bytes in flight (a guess from the
// kernels' shapes, not measured for dense shapes).
kernels::Fp8GemmPath decode_path(int32_t rows) {
  return rows <= 32 ? kernels::Fp8GemmPath::decode : kernels::Fp8GemmPath::automatic;
}
}  // namespace

// fp8_gemm on the FP8 weight itself: x quantised per 128-group to e4m3 (fq / fs), then fp8_gemm_f32.
void CudaBackend::linear_fp8(const bf16* x, int64_t m, const DevLinear& L, const Fp8Table& t, float* y) {
  Work& k = *work_;
  const int32_t M = static_cast<int32_t>(m), K = static_cast<int32_t>(L.k);
  check(kernels::fp8_quantize_groups(x, K, M, K, k.fq, K, k.fs, K / kernels::kFp8Block, stream_, pdl_),
        "fp8 activation quantisation");
  fp8_gemm_f32(k.fq, k.fs, M, L, t, y);
}

// The GEMM into bf16 (fy), widened to float32 for the backend's float32 consumers; or, split-K, the S
// slices as S groups into bf16 partials (fsplit) that the reduction sums into float32.
void CudaBackend::fp8_gemm_f32(const uint8_t* aq, const float* as, int32_t M, const DevLinear& L, const Fp8Table& t,
                               float* y) {
  Work& k = *work_;
  const int32_t N = static_cast<int32_t>(L.n), K = static_cast<int32_t>(L.k);
  auto sp = split_k_ && M <= kSplitMaxRows ? fp8_split_.find(L.w) : fp8_split_.end();
  // The plan for (M, S) exists when the forward's row count is M (ensure_split_plans); a GEMM over
  // another row count (none today) runs unsplit.
  const auto plan_it = sp != fp8_split_.end() ? split_plans_.find({M, sp->second.slices}) : split_plans_.end();
  if (plan_it == split_plans_.end()) sp = fp8_split_.end();
  kernels::Fp8GemmParams g;
  g.n = N;
  g.a = aq;
  g.a_scale = as;
  g.ldc = N;
  g.pdl = pdl_;
  if (sp != fp8_split_.end()) {
    const int32_t S = sp->second.slices, ks = K / S;
    const SplitPlan& plan = plan_it->second;
    // Row s * M + t of the partials = token t's slice s: row t * S + s of the activations read as
    // [M * S, K / S] (the same bytes, 128-groups included).
    g.k = ks;
    g.lda = ks;
    g.ld_scale = ks / kernels::kFp8Block;
    g.a_row_map = plan.row_map;
    g.w = sp->second.table.w;
    g.w_scale = sp->second.table.s;
    g.ldw = sp->second.ldw;  // the slices are K ranges of the whole tensor, read in place
    g.ld_wscale = sp->second.ld_wscale;
    g.c = k.fsplit;
    g.num_groups = S;
    g.max_rows = S * M;
    g.group_offsets = plan.offsets;
    g.active_groups = plan.active;
    g.num_active = plan.num_active;
    g.tile_prefix = plan.tile_prefix;
    g.max_active = S;
    g.expected_rows_per_group = M;
    g.path = kernels::Fp8GemmPath::decode;
    check(kernels::fp8_gemm(g, stream_), "fp8 gemm (split-K)");
    check(glm5k::launch_sum_slices_bf16_to_f32(k.fsplit, S, static_cast<int64_t>(M) * N, y, stream_), "split-K sum");
    ++fp8_split_runs_;
  } else {
    g.k = K;
    g.lda = K;
    g.ld_scale = K / kernels::kFp8Block;
    g.w = t.w;
    g.w_scale = t.s;
    g.c = k.fy;
    g.max_rows = M;
    g.path = decode_path(M);
    check(kernels::fp8_gemm(g, stream_), "fp8 gemm");
    check(glm5k::launch_bf16_to_f32(k.fy, static_cast<int64_t>(M) * N, y, stream_), "fp8 gemm output");
  }
  ++fp8_gemm_runs_;
}

bool CudaBackend::proj_group(const ProjGroup& pg, const bf16* x, int64_t m, float* const* outs) {
  if (!pg.ok || m <= 0 || m > kSplitMaxRows) return false;
  const int32_t M = static_cast<int32_t>(m), K = pg.k;
  int32_t S = split_k_ ? pg.slices : 1;
  const auto plan_it = S > 1 ? split_plans_.find({M, S}) : split_plans_.end();
  if (S > 1 && plan_it == split_plans_.end()) return false;  // no plan for this row count (none today)
  const int32_t begin_mark = in_attention_ ? stage_mark() : -1;
  Work& k = *work_;
  check(kernels::fp8_quantize_groups(x, K, M, K, k.fq, K, k.fs, K / kernels::kFp8Block, stream_, pdl_),
        "fp8 activation quantisation (grouped projections)");
  const int32_t ks = K / S;
  kernels::Fp8GemmParams g;
  g.n = pg.n;
  g.k = ks;
  g.a = k.fq;
  g.a_scale = k.fs;
  g.lda = ks;  // row t * S + s of [M * S, K / S] = token t's slice s
  g.ld_scale = ks / kernels::kFp8Block;
  g.w = pg.table.w;  // slice-major: entry s * parts + p
  g.w_scale = pg.table.s;
  g.num_parts = pg.parts;
  g.varied_parts = true;
  for (int32_t p = 0; p <= pg.parts; ++p) g.part_begin[p] = pg.part_begin[p];
  g.ldw = K;
  g.ld_wscale = pg.ld_wscale;
  g.c = k.fsplit;
  g.ldc = pg.n;
  g.max_rows = S * M;
  g.expected_rows_per_group = M;
  g.path = kernels::Fp8GemmPath::decode;
  g.pdl = pdl_;
  // Weights, tables and plans are static: the cp.async decode kernel may stream weights before its wait.
  g.group_info_ready = proj_group_early_ && pdl_;
  if (S > 1) {
    const SplitPlan& plan = plan_it->second;
    g.a_row_map = plan.row_map;
    g.num_groups = S;
    g.group_offsets = plan.offsets;
    g.active_groups = plan.active;
    g.num_active = plan.num_active;
    g.tile_prefix = plan.tile_prefix;
    g.max_active = S;
  }
  check(kernels::fp8_gemm(g, stream_), "fp8 gemm (grouped projections)");
  kernels::Fp8SplitReduceParams r;
  r.in = k.fsplit;
  r.ld_in = pg.n;
  r.slices = S;
  r.rows = M;
  r.n = pg.n;
  r.num_parts = pg.parts;
  for (int32_t p = 0; p <= pg.parts; ++p) r.part_begin[p] = pg.part_begin[p];
  for (int32_t p = 0; p < pg.parts; ++p) r.out[p] = outs[p];
  r.pdl = pdl_;
  check(kernels::fp8_split_reduce(r, stream_), "split-K sum (grouped projections)");
  fp8_gemm_runs_ += pg.parts;  // counted per projection, as the separate path counts them
  if (S > 1) fp8_split_runs_ += pg.parts;
  ++proj_group_runs_;
  if (begin_mark >= 0) stage_spans_.emplace_back(begin_mark, stage_mark());
  return true;
}

// The (rows, slices) groupings split-K GEMMs of a forward with `rows` rows read (built before any graph
// capture; kept, so that every captured graph's addresses stay valid).
void CudaBackend::ensure_split_plans(int64_t rows) {
  if (!split_k_ || rows > kSplitMaxRows) return;
  std::vector<int32_t> slice_counts;
  for (const auto& [w, sw] : fp8_split_) slice_counts.push_back(sw.slices);
  if (proj_group_)
    for (const LayerProj& lp : proj_groups_)
      for (const ProjGroup* g : {&lp.x, &lp.q, &lp.o})
        if (g->ok && g->slices > 1) slice_counts.push_back(g->slices);
  for (const int32_t S : slice_counts) {
    const auto key = std::make_pair(rows, S);
    if (split_plans_.count(key)) continue;
    const int64_t M = rows, tiles = (M + kernels::kFp8PrefillTileRows - 1) / kernels::kFp8PrefillTileRows;
    std::vector<int32_t> h;
    for (int32_t s = 0; s <= S; ++s) h.push_back(static_cast<int32_t>(s * M));  // offsets
    for (int32_t s = 0; s < S; ++s) h.push_back(s);                             // active groups
    h.push_back(S);                                                             // count
    for (int32_t s = 0; s <= S; ++s) h.push_back(static_cast<int32_t>(s * tiles));  // tile prefix
    for (int32_t s = 0; s < S; ++s)
      for (int64_t t = 0; t < M; ++t) h.push_back(static_cast<int32_t>(t * S + s));  // row map
    SplitPlan p;
    p.mem.allocate(h.size() * 4, "a split-K plan");
    check(cudaMemcpy(p.mem.get(), h.data(), h.size() * 4, cudaMemcpyHostToDevice), "uploading a split-K plan");
    const int32_t* d = p.mem.as<int32_t>();
    p.offsets = d;
    p.active = d + S + 1;
    p.num_active = d + 2 * S + 1;
    p.tile_prefix = d + 2 * S + 2;
    p.row_map = d + 3 * S + 3;
    split_plans_.emplace(key, std::move(p));
  }
}

// Stage timing: events recorded as external event nodes when the stream is being captured, so that
// they time the replays (a plain cudaEventRecord under capture only orders work inside the graph).
int32_t CudaBackend::stage_mark() {
  if (!stage_timing_ || stage_next_ >= stage_ev_.size()) return -1;
  check(cudaEventRecordWithFlags(stage_ev_[stage_next_], stream_, cudaEventRecordExternal), "stage event");
  return static_cast<int32_t>(stage_next_++);
}

void CudaBackend::linear(const bf16* x, int64_t m, const DevLinear& L, float* y) {
  const int32_t begin = in_attention_ ? stage_mark() : -1;
  linear_any(x, m, L, y);
  if (begin >= 0) stage_spans_.emplace_back(begin, stage_mark());
}

void CudaBackend::linear_any(const bf16* x, int64_t m, const DevLinear& L, float* y) {
  if (m <= 0) return;
  if (L.dtype == glm5k::kWFp8 && use_fp8_gemm(m)) {
    if (const Fp8Table* t = fp8_table(L)) {
      linear_fp8(x, m, L, *t, y);
      return;
    }
  }
  if (L.dtype == glm5k::kWBf16) {
    if (lt_->run(x, L.k, static_cast<const bf16*>(L.w), L.k, y, L.n, m, L.n, L.k, stream_)) return;
  } else if (L.dtype == glm5k::kWFp8) {
    // "auto" dequantises: measured on the H200 (docs/PERFORMANCE.md), the simple row GEMM reading FP8
    // directly was 3x slower than dequantise + cuBLASLt even for one row.
    const bool direct = fp8_path_ == 1;
    if (!direct) {
      check(glm5k::launch_fp8_dequant(static_cast<const uint8_t*>(L.w), L.scale, L.n, L.k, L.block_n, L.block_k,
                                      dequant_.as<bf16>(), stream_),
            "fp8 dequantisation");
      if (lt_->run(x, L.k, dequant_.as<bf16>(), L.k, y, L.n, m, L.n, L.k, stream_)) return;
    }
  }
  glm5k::RowGemmParams p = weight_gemm(L, x, y);
  p.m = static_cast<int32_t>(m);
  check(glm5k::launch_row_gemm(p, stream_), "row gemm");
}

namespace {
// One small GEMM per attention head (the absorbed W_UK and W_UV products): each row of `a` holds `heads`
// slices of k bf16 values, `w` holds `heads` bf16 [n, k] matrices, and each row of `c` receives `heads`
// slices of n values (float32, or bf16 when c_bf16).
glm5k::RowGemmParams per_head_gemm(const void* a, int64_t k, const void* w, int64_t n, int64_t rows, int64_t heads,
                                   void* c, bool c_bf16) {
  glm5k::RowGemmParams p;
  p.a = a;
  p.lda = heads * k;
  p.a_batch_stride = k;
  p.w = w;
  p.w_dtype = glm5k::kWBf16;
  p.ldw = k;
  p.w_batch_stride = n * k;
  p.m = static_cast<int32_t>(rows);
  p.n = static_cast<int32_t>(n);
  p.k = static_cast<int32_t>(k);
  p.batch = static_cast<int32_t>(heads);
  p.c = c;
  p.c_bf16 = c_bf16;
  p.ldc = heads * n;
  p.c_batch_stride = n;
  return p;
}

// The same per-head products through absorbed_heads (set_attention_fusion): head h of row r reads k values
// a_head_stride apart from head h - 1 and writes n bf16 values c_head_stride apart. The caller sets the
// input (a, or a_f32) and the optional tail.
glm5k::AbsorbedHeadsParams absorbed_heads_params(int64_t a_head_stride, const __nv_bfloat16* w, int64_t n, int64_t k,
                                                 int64_t rows, int64_t heads, __nv_bfloat16* c, int64_t c_head_stride,
                                                 bool pdl) {
  glm5k::AbsorbedHeadsParams p;
  p.lda = heads * a_head_stride;
  p.a_head_stride = a_head_stride;
  p.w = w;
  p.rows = static_cast<int32_t>(rows);
  p.heads = static_cast<int32_t>(heads);
  p.n = static_cast<int32_t>(n);
  p.k = static_cast<int32_t>(k);
  p.c = c;
  p.ldc = heads * c_head_stride;
  p.c_head_stride = c_head_stride;
  p.pdl = pdl;
  return p;
}
}  // namespace

// The dense SwiGLU MLP through fp8_gemm: one quantisation of x, one gate|up GEMM (the two weights as the
// two parts of one output), SwiGLU + e4m3 quantisation in one kernel (kernels/moe), the down GEMM, and the
// widening of its bf16 output. false when the weights do not fit (the caller takes the general path).
bool CudaBackend::swiglu_fp8(const bf16* x, int64_t m, const DevMlp& w, float* out) {
  if (!use_fp8_gemm(m)) return false;
  const auto pair = fp8_pair_tables_.find(w.gate.w);
  const Fp8Table* down = fp8_table(w.down);
  if (pair == fp8_pair_tables_.end() || !down) return false;
  Work& k = *work_;
  const int32_t M = static_cast<int32_t>(m), D = static_cast<int32_t>(w.gate.k), I = static_cast<int32_t>(w.gate.n);
  check(kernels::fp8_quantize_groups(x, D, M, D, k.fq, D, k.fs, D / kernels::kFp8Block, stream_, pdl_),
        "fp8 activation quantisation");
  kernels::Fp8GemmParams g;
  g.n = 2 * I;
  g.k = D;
  g.a = k.fq;
  g.a_scale = k.fs;
  g.lda = D;
  g.ld_scale = D / kernels::kFp8Block;
  g.w = pair->second.w;
  g.w_scale = pair->second.s;
  g.num_parts = 2;
  g.part_rows = I;
  g.c = k.fy;
  g.ldc = 2 * I;
  g.max_rows = M;
  g.path = decode_path(M);
  g.pdl = pdl_;
  check(kernels::fp8_gemm(g, stream_), "fp8 gate_up gemm");
  // The quantised SwiGLU output reuses fq / fs: the gate_up GEMM has consumed x's quantisation.
  check(kernels::moe_swiglu_quantize(k.fy, M, I, k.fq, k.fs, stream_, pdl_), "swiglu quantisation");
  // The down GEMM overwrites fy (or writes the split-K partials): it starts after the SwiGLU kernel has
  // finished reading gate_up.
  fp8_gemm_f32(k.fq, k.fs, M, w.down, *down, out);
  ++fp8_gemm_runs_;  // the gate_up GEMM (fp8_gemm_f32 counted the down GEMM)
  return true;
}

void CudaBackend::swiglu(const bf16* x, int64_t m, const DevMlp& w, float* out) {
  if (swiglu_fp8(x, m, w, out)) return;
  Work& k = *work_;
  linear(x, m, w.gate, k.g);
  linear(x, m, w.up, k.u);
  check(glm5k::launch_silu_mul(k.g, k.u, static_cast<int32_t>(m), static_cast<int32_t>(w.gate.n), k.act, stream_),
        "silu_mul");
  linear(k.act, m, w.down, out);
}

void CudaBackend::enqueue_attention(int64_t li, bool run_indexer, const glm5k::RecordFormat& fmt, int64_t ctx_cap) {
  const ModelConfig& c = config_;
  const DevLayer& w = w_.layers[li];
  Work& k = *work_;
  const int64_t R = rows_.rows, H = c.num_attention_heads, nope = c.qk_nope_head_dim, kvr = c.kv_lora_rank;
  const int64_t vh = c.v_head_dim;
  // Grouped projections (set_proj_grouping): one launch per input; the members a group covers are
  // skipped below. Groups hold only the weights present (idx_wk / idx_wq_b where the layer has them).
  const LayerProj* pj = proj_group_ && use_fp8_gemm(R) && R <= kSplitMaxRows && li < static_cast<int64_t>(proj_groups_.size())
                            ? &proj_groups_[li]
                            : nullptr;
  float* const x_outs[3] = {k.qa, k.ckv, k.kraw};
  const bool x_done = pj && proj_group(pj->x, k.hb, R, x_outs);
  const bool wk_done = x_done && pj->x.parts == 3;
  if (!x_done) {
    linear(k.hb, R, w.q_a, k.qa);
    linear(k.hb, R, w.kv_a, k.ckv);
  }
  // Attention fusion: the q_a norm waits for the x group programmatically (its launch overlaps the tail).
  const bool fuse = attn_fuse_ && R <= kSplitMaxRows;
  check(glm5k::launch_residual_rms_norm(k.qa, nullptr, nullptr, static_cast<int32_t>(R), static_cast<int32_t>(c.q_lora_rank),
                                        w.q_a_norm, 1e-6f, k.qrb, nullptr, stream_, fuse && pdl_),
        "q_a norm");
  float* const q_outs[2] = {k.q, k.qi};
  const bool q_done = pj && proj_group(pj->q, k.qrb, R, q_outs);
  const bool wq_b_done = q_done && pj->q.parts == 2;
  if (!q_done) linear(k.qrb, R, w.q_b, k.q);
  // Decode-sized fusion (set_attention_fusion) with the fast MLA: the absorbed query kernel reads q_b's
  // float32 output itself (q_nope rounded to bf16 and the rope part rotated there), so mla_prep writes
  // only the latent record (one block per row no longer converts the 64 heads' queries).
  const bool fuse_query = fuse && use_fast_mla_ && glm5k::absorbed_heads_supported(static_cast<int32_t>(nope));
  glm5k::MlaPrepParams mp{k.ckv, w.kv_a_norm, k.q, k.cos, k.sin, rows_, fmt, static_cast<int32_t>(li),
                          static_cast<int32_t>(H), static_cast<int32_t>(nope), fuse_query ? nullptr : k.q_nope,
                          k.q_rot};
  // Fused, mla_prep runs below with indexer_prep and the indexer query conversion as one launch.
  if (!fuse) check(glm5k::launch_mla_prep(mp, stream_), "mla prep");

  glm5k::IndexerPrepParams ip{};
  ip.cos = k.cos;
  ip.sin = k.sin;
  ip.batch = rows_;
  ip.fmt = fmt;
  ip.layer = static_cast<int32_t>(li);
  ip.heads = static_cast<int32_t>(c.index_n_heads);
  ip.head_scale = static_cast<float>(std::pow(static_cast<double>(c.index_n_heads), -0.5));
  if (run_indexer) {
    if (!wq_b_done) linear(k.qrb, R, w.idx_wq_b, k.qi);
    if (!wk_done) linear(k.hb, R, w.idx_wk, k.kraw);
    linear(k.hb, R, w.idx_wp, k.iw);
    ip.kraw = k.kraw;
    ip.k_norm_w = w.idx_k_norm_w;
    ip.k_norm_b = w.idx_k_norm_b;
    ip.qi = k.qi;
    ip.wts = k.iw;
  }
  const bool idx_fp8 = fmt.index_dtype == glm5k::kRecFp8;
  if (fuse) {
    // mla_prep | indexer_prep (+ the fast indexer's query conversion) in one launch, waiting on the
    // previous kernel programmatically: the same per-row code as the three launches below.
    glm5k::AttentionPrepParams ap;
    ap.mla = mp;
    ap.idx = ip;
    if (run_indexer && use_fast_idx_) {
      ap.q_out = k.qi_q;
      ap.q_scale = k.qi_scale;
      ap.q_fp8 = idx_fp8;
    }
    ap.pdl = pdl_;
    check(glm5k::launch_attention_prep(ap, stream_), "attention prep (mla + indexer, fused)");
    ++attn_fused_runs_;
  } else {
    check(glm5k::launch_indexer_prep(ip, stream_), "indexer prep");
  }
  const int32_t topk = static_cast<int32_t>(c.index_topk);
  if (run_indexer && use_fast_idx_) {
    // kernels/indexer: scores of every visible key (page-table walk), then the exact top-k as slots.
    const bool fp8 = idx_fp8;
    const int64_t IH = c.index_n_heads, ID = c.index_head_dim;
    if (!fuse)
      check(glm5k::launch_indexer_query(k.qi, static_cast<int32_t>(R), static_cast<int32_t>(IH),
                                        static_cast<int32_t>(ID), fp8, k.qi_q, k.qi_scale, stream_),
            "indexer query conversion");
    namespace ki = kernels::indexer;
    const int64_t stride = ki::indexer_score_stride(static_cast<int>(ctx_cap));
    // Batched over several caches: one launch over all rows (a group spanning [0, R)), each row's keys
    // in its sequence's pool (key_pools_dev_, indexed by the row's sequence like the block tables).
    std::vector<FastGroup> launches = groups_;
    if (multi_pool_) launches.assign(1, FastGroup{groups_.front().cache, 0, static_cast<int32_t>(R)});
    for (const FastGroup& g : launches) {
      const int64_t r0 = g.r0, T = g.r1 - g.r0;
      ki::ScoreParams sp;
      sp.rows.num_rows = static_cast<int>(T);
      sp.rows.row_seq = rows_.seq + r0;  // sequence indices of the whole batch: rows of bt_padded_dev_
      sp.rows.row_len = row_len_dev_ + r0;
      sp.rows.block_tables = bt_padded_dev_;
      sp.rows.block_table_stride = bt_stride_;
      sp.rows.page_size = g.cache->page_size();
      sp.rows.max_row_len = static_cast<int>(ctx_cap);
      sp.format = fp8 ? ki::KeyFormat::kFp8 : ki::KeyFormat::kBf16;
      sp.q = k.qi_q + r0 * IH * ID * (fp8 ? 1 : 2);
      sp.q_scale = fp8 ? k.qi_scale + r0 * IH : nullptr;
      sp.weights = k.iw + r0 * IH;  // already times index_n_heads^-0.5 (indexer prep)
      if (multi_pool_) {
        sp.seq_pools = static_cast<const ki::KeyPool*>(key_pools_dev_);
        sp.num_pools = static_cast<int>(plan_seqs_);
        sp.pool_layer = static_cast<int>(li);
      } else {
        sp.key_cache = g.cache->index() + li * g.cache->index_layer_bytes();
      }
      sp.scores = k.scores + r0 * stride;
      sp.score_stride = stride;
      const bool split = T <= kFastTopkSplitRows && topk_ws_.get();
      check(ki::launch_indexer(sp, topk, k.sel_slots + r0 * topk, nullptr, split ? topk_ws_.get() : nullptr,
                               split ? topk_ws_.bytes() : 0, stream_),
            "fast indexer (scores + top-k)");
    }
  } else if (run_indexer) {
    glm5k::IndexerScoreParams sp{k.qi, k.iw, rows_, fmt, static_cast<int32_t>(li), static_cast<int32_t>(c.index_n_heads),
                                 static_cast<float>(std::pow(static_cast<double>(c.index_head_dim), -0.5)),
                                 static_cast<int32_t>(ctx_cap), k.scores};
    check(glm5k::launch_indexer_scores(sp, stream_), "indexer scores");
    check(glm5k::launch_topk_select(k.scores, static_cast<int32_t>(ctx_cap), rows_.pos, static_cast<int32_t>(R), topk,
                                    k.sel, k.n_sel, stream_),
          "indexer top-k");
    if (use_fast_mla_)
      check(glm5k::launch_positions_to_slots(k.sel, rows_, topk, k.sel_slots, stream_), "selection to slots");
  }
  if (forced_sel_ && !forced_sel_->empty()) {
    // Tests: attend to a given selection (ForwardProbe::force_topk); the indexer's own is reported first.
    require(static_cast<int64_t>(forced_sel_->size()) == R * c.index_topk, Status::invalid_argument,
            "force_topk of layer ", li, " must hold rows x index_topk entries");
    if (own_sel_) report_selection(*own_sel_);
    std::vector<int32_t> counts(R, 0);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t i = 0; i < c.index_topk; ++i) counts[r] += (*forced_sel_)[r * c.index_topk + i] >= 0;
    check(cudaMemcpyAsync(k.sel, forced_sel_->data(), forced_sel_->size() * 4, cudaMemcpyHostToDevice, stream_),
          "forced selection");
    check(cudaMemcpyAsync(k.n_sel, counts.data(), R * 4, cudaMemcpyHostToDevice, stream_), "forced selection");
    if (use_fast_mla_)
      check(glm5k::launch_positions_to_slots(k.sel, rows_, topk, k.sel_slots, stream_), "selection to slots");
    check(cudaStreamSynchronize(stream_), "forced selection");  // counts is a local
  }
  // Decode-sized fusion (set_attention_fusion): the per-head products through absorbed_heads.
  const int64_t qw = kvr + c.qk_rope_head_dim, qkd = nope + c.qk_rope_head_dim;
  if (fuse_query) {
    // q_pack[r][h] = [bf16(W_UK_h^T bf16(q_nope[r][h])) | bf16(RoPE(q_rot[r][h]))] in one launch, read
    // from q_b's float32 output [R, H, nope + rope] (mla_prep skipped its query part).
    glm5k::AbsorbedHeadsParams ap = absorbed_heads_params(qkd, w.w_uk_t, kvr, nope, R, H, k.q_pack, qw, pdl_);
    ap.a_f32 = k.q;
    ap.tail = k.q + nope;
    ap.tail_ld = H * qkd;
    ap.tail_head_stride = qkd;
    ap.tail_cos = k.cos;
    ap.tail_sin = k.sin;
    ap.tail_n = static_cast<int32_t>(c.qk_rope_head_dim);
    check(glm5k::launch_absorbed_heads(ap, stream_), "absorbed query (fused with the MLA query packing)");
    ++attn_fused_runs_;
  } else {
    // Absorbed query per head: q_lat[r][h] = W_UK_h^T q_nope[r][h].
    check(glm5k::launch_row_gemm(per_head_gemm(k.q_nope, nope, w.w_uk_t, kvr, R, H, k.q_lat, false), stream_),
          "absorbed query");
    if (use_fast_mla_)
      check(glm5k::launch_pack_mla_query(k.q_lat, k.q_rot, static_cast<int32_t>(R), static_cast<int32_t>(H),
                                         static_cast<int32_t>(kvr), static_cast<int32_t>(c.qk_rope_head_dim), k.q_pack,
                                         stream_),
            "packing the MLA query");
  }
  if (use_fast_mla_) {
    // kernels/attention: bf16 query [R, H, 576], records addressed by physical slot (-1 = unused).
    // Batched over several caches: one launch over all rows, row r reading the pool of its sequence
    // (rows_.seq[r] indexes mla_pools_dev_).
    std::vector<FastGroup> launches = groups_;
    if (multi_pool_) launches.assign(1, FastGroup{groups_.front().cache, 0, static_cast<int32_t>(R)});
    for (const FastGroup& g : launches) {
      const int64_t r0 = g.r0;
      kernels::SparseMlaParams p;
      p.q = k.q_pack + r0 * H * qw;
      if (multi_pool_) {
        p.pools = static_cast<const kernels::MlaPool*>(mla_pools_dev_);
        p.row_pool = rows_.seq;
        p.num_pools = static_cast<int>(plan_seqs_);
        p.pool_layer = static_cast<int>(li);
      } else {
        p.cache = g.cache->latent() + li * g.cache->latent_layer_bytes();
        p.num_slots = g.cache->n_slots();
      }
      p.format = fmt.latent_dtype == glm5k::kRecFp8 ? kernels::MlaCacheFormat::kFp8 : kernels::MlaCacheFormat::kBf16;
      p.indices = k.sel_slots + r0 * topk;
      p.out = k.o_lat + r0 * H * kvr;
      p.lse = k.lse + r0 * H;
      p.num_tokens = static_cast<int>(g.r1 - g.r0);
      p.num_heads = static_cast<int>(H);
      p.topk = topk;
      p.softmax_scale = softmax_scale_;  // includes YaRN's mscale^2 (cpu::attention_softmax_scale)
      p.num_sms = num_sms_;
      check(kernels::sparse_mla_forward(p, mla_ws_.get(), mla_ws_.bytes(), stream_), "fast sparse mla");
    }
  } else {
    glm5k::SparseMlaParams sm{k.q_lat, k.q_rot, k.sel, k.n_sel, topk, rows_, fmt,
                              static_cast<int32_t>(li), static_cast<int32_t>(H), softmax_scale_, k.o_lat};
    check(glm5k::launch_sparse_mla(sm, stream_), "sparse mla");
  }
  if (fuse && glm5k::absorbed_heads_supported(static_cast<int32_t>(kvr))) {
    glm5k::AbsorbedHeadsParams ap = absorbed_heads_params(kvr, w.w_uv, vh, kvr, R, H, k.ob, vh, pdl_);
    ap.a = k.o_lat;
    check(glm5k::launch_absorbed_heads(ap, stream_), "value up-projection (absorbed_heads)");
    ++attn_fused_runs_;
  } else {
    check(glm5k::launch_row_gemm(per_head_gemm(k.o_lat, kvr, w.w_uv, vh, R, H, k.ob, true), stream_),
          "value up-projection");
  }
  float* const o_outs[1] = {k.delta};
  if (!(pj && proj_group(pj->o, k.ob, R, o_outs))) linear(k.ob, R, w.o_proj, k.delta);
}

// Probe report of the selection the indexer just made: positions, ascending, -1 padded (the CPU
// backend's format). The fast indexer returns physical slots in no particular order: they are mapped
// back to positions through the plan's block tables.
void CudaBackend::report_selection(std::vector<int32_t>& out) {
  const Work& k = *work_;
  const int64_t R = rows_.rows, K = config_.index_topk;
  out.resize(static_cast<size_t>(R * K));
  if (!use_fast_idx_) {
    check(cudaMemcpyAsync(out.data(), k.sel, out.size() * 4, cudaMemcpyDeviceToHost, stream_), "probe copy");
    check(cudaStreamSynchronize(stream_), "probe copy");
    return;
  }
  require(plan_ != nullptr, Status::internal, "selection report without a batch plan");
  check(cudaMemcpyAsync(out.data(), k.sel_slots, out.size() * 4, cudaMemcpyDeviceToHost, stream_), "probe copy");
  check(cudaStreamSynchronize(stream_), "probe copy");
  std::map<int32_t, std::vector<int32_t>> page_index;  // sequence -> page -> block-table index
  for (int64_t r = 0; r < R; ++r) {
    const int32_t s = plan_->seq_of_row[r];
    const auto* cc = static_cast<const CudaCache*>(plan_->seqs[s].cache);
    const int64_t ps = cc->page_size();
    auto it = page_index.find(s);
    if (it == page_index.end()) {
      std::vector<int32_t> idx(static_cast<size_t>(cc->n_pages()), -1);
      const auto& bt = plan_->seqs[s].block_table;
      for (size_t b = 0; b < bt.size(); ++b)
        if (idx[bt[b]] < 0) idx[bt[b]] = static_cast<int32_t>(b);
      it = page_index.emplace(s, std::move(idx)).first;
    }
    int32_t* row = out.data() + r * K;
    for (int64_t i = 0; i < K; ++i) {
      if (row[i] < 0) continue;
      const int32_t b = it->second.at(static_cast<size_t>(row[i] / ps));
      require(b >= 0, Status::internal, "the fast indexer selected slot ", row[i], ", outside row ", r, "'s pages");
      row[i] = static_cast<int32_t>(b * ps + row[i] % ps);
    }
    // Ascending positions, then the -1 padding.
    std::sort(row, row + K, [](int32_t a, int32_t b) { return a >= 0 && (b < 0 || a < b); });
  }
}

void CudaBackend::probe_routing(int64_t li) {
  const int64_t K = config_.num_experts_per_tok, P = rows_.rows * K;
  Work& k = *work_;
  auto& ids = probe_->experts[li];
  auto& wts = probe_->expert_weights[li];
  ids.resize(static_cast<size_t>(P));
  wts.resize(static_cast<size_t>(P));
  check(cudaMemcpyAsync(ids.data(), k.ids, P * 4, cudaMemcpyDeviceToHost, stream_), "probe copy");
  check(cudaMemcpyAsync(wts.data(), k.rw, P * 4, cudaMemcpyDeviceToHost, stream_), "probe copy");
  check(cudaStreamSynchronize(stream_), "probe copy");
  const bool forced = static_cast<int64_t>(probe_->force_experts.size()) > li && !probe_->force_experts[li].empty();
  if (!forced) return;
  // Tests: route to the given experts (ForwardProbe::force_experts); -1 entries (fewer eligible
  // experts) repeat the row's previous expert with weight 0, as the routing kernel does.
  std::vector<int32_t> fid = probe_->force_experts[li];
  std::vector<float> fw = probe_->force_expert_weights.at(li);
  require(static_cast<int64_t>(fid.size()) == P && static_cast<int64_t>(fw.size()) == P, Status::invalid_argument,
          "force_experts of layer ", li, " must hold rows x num_experts_per_tok entries");
  for (int64_t i = 0; i < P; ++i)
    if (fid[i] < 0) {
      fid[i] = i % K ? fid[i - 1] : 0;
      fw[i] = 0.f;
    }
  check(cudaMemcpyAsync(k.ids, fid.data(), P * 4, cudaMemcpyHostToDevice, stream_), "forced routing");
  check(cudaMemcpyAsync(k.rw, fw.data(), P * 4, cudaMemcpyHostToDevice, stream_), "forced routing");
  check(cudaStreamSynchronize(stream_), "forced routing");  // the vectors are locals
}

// The MoE block through kernels/moe's moe_forward (bf16 in, bf16 out, widened into delta). With a probe
// the router runs alone first so that its choice can be reported (and replaced by a forced one); the
// block then takes that routing (MoeParams::topk_ids_in) instead of routing again.
void CudaBackend::enqueue_fast_moe(int64_t li) {
  const ModelConfig& c = config_;
  const DevLayer& w = w_.layers[li];
  const MoeTable& t = moe_tables_[li];
  Work& k = *work_;
  const int64_t R = rows_.rows, D = c.hidden_size;
  kernels::MoeParams mp;
  mp.tokens = static_cast<int>(R);
  mp.hidden = static_cast<int>(D);
  mp.inter = static_cast<int>(c.moe_intermediate_size);
  mp.num_experts = static_cast<int>(c.n_routed_experts);
  mp.top_k = static_cast<int>(c.num_experts_per_tok);
  mp.n_group = static_cast<int>(c.n_group);
  mp.topk_group = static_cast<int>(c.topk_group);
  mp.norm_topk_prob = c.norm_topk_prob;
  mp.routed_scaling_factor = static_cast<float>(c.routed_scaling_factor);
  mp.with_shared = w.has_shared;
  mp.x = k.h2b;
  mp.router_weight = t.router;
  mp.router_bias = w.router_bias;
  mp.gate_up_w = t.gate_up.w;
  mp.gate_up_s = t.gate_up.s;
  mp.down_w = t.down.w;
  mp.down_s = t.down.s;
  mp.out = k.moe_out;
  mp.pdl = pdl_;
  // The shared expert beside the router on its own stream (decode sizes; same bits as one stream). Inside
  // a graph capture the fork / join become parallel branches of the captured graph.
  mp.shared_stream = side_stream_;
  // MoeParams::decode_fusion (combine, and at T <= 2 SwiGLU, inside the down GEMM; applies only without
  // the side stream, i.e. with GLM5RT_CUDA_MOE_SIDE_STREAM=0): the library default unless
  // GLM5RT_CUDA_MOE_DECODE_FUSION is 0 (separate kernels), 1 (combine only) or 2.
  static const int decode_fusion = [] {
    const char* v = std::getenv("GLM5RT_CUDA_MOE_DECODE_FUSION");
    if (v && (std::string(v) == "0" || std::string(v) == "1" || std::string(v) == "2")) return v[0] - '0';
    return kernels::MoeParams{}.decode_fusion;
  }();
  mp.decode_fusion = decode_fusion;
  mp.shared_events[0] = side_ev_[0];
  mp.shared_events[1] = side_ev_[1];
  if (probe_) {
    kernels::RouterParams rp;
    rp.tokens = mp.tokens;
    rp.hidden = mp.hidden;
    rp.num_experts = mp.num_experts;
    rp.top_k = mp.top_k;
    rp.n_group = mp.n_group;
    rp.topk_group = mp.topk_group;
    rp.norm_topk_prob = mp.norm_topk_prob;
    rp.routed_scaling_factor = mp.routed_scaling_factor;
    rp.x = k.h2b;
    rp.ldx = mp.hidden;
    rp.weight = t.router;
    rp.bias = w.router_bias;
    rp.logits = k.rlog;
    rp.topk_ids = k.ids;
    rp.topk_weights = k.rw;
    check(kernels::moe_route(rp, stream_), "moe router");
    probe_routing(li);
    mp.topk_ids_in = k.ids;
    mp.topk_weights_in = k.rw;
  }
  check(kernels::moe_forward(mp, k.moe_ws, static_cast<size_t>(k.moe_ws_bytes), stream_), "moe_forward");
  check(glm5k::launch_bf16_to_f32(k.moe_out, R * D, k.delta, stream_), "moe output");
  ++fast_moe_runs_;
}

void CudaBackend::enqueue_mlp(int64_t li) {
  const ModelConfig& c = config_;
  const DevLayer& w = w_.layers[li];
  Work& k = *work_;
  const int64_t R = rows_.rows, D = c.hidden_size;
  if (!w.is_moe) {
    swiglu(k.h2b, R, w.dense, k.delta);
    return;
  }
  if (kernels_ == 3 && li < static_cast<int64_t>(moe_tables_.size()) && moe_tables_[li].ok) {
    enqueue_fast_moe(li);
    return;
  }
  const int32_t E = static_cast<int32_t>(c.n_routed_experts), K = static_cast<int32_t>(c.num_experts_per_tok);
  const int32_t I = static_cast<int32_t>(c.moe_intermediate_size), P = static_cast<int32_t>(R) * K;
  glm5k::RowGemmParams rp;  // router in float32
  rp.a = k.h2f;
  rp.a_bf16 = false;
  rp.lda = D;
  rp.w = w.router.w;
  rp.w_dtype = glm5k::kWF32;
  rp.ldw = D;
  rp.m = static_cast<int32_t>(R);
  rp.n = E;
  rp.k = static_cast<int32_t>(D);
  rp.c = k.rlog;
  rp.ldc = E;
  check(glm5k::launch_row_gemm(rp, stream_), "router");
  glm5k::MoeRouteParams mr{k.rlog, w.router_bias, static_cast<int32_t>(R), E, K, static_cast<int32_t>(c.n_group),
                           static_cast<int32_t>(c.topk_group), c.norm_topk_prob,
                           static_cast<float>(c.routed_scaling_factor), k.ids, k.rw};
  check(glm5k::launch_moe_route(mr, stream_), "moe routing");
  if (probe_) probe_routing(li);
  check(glm5k::launch_moe_plan(k.ids, static_cast<int32_t>(R), K, E, k.pair_rows, k.pair_of, k.tiles, k.n_tiles,
                               k.max_tiles, stream_),
        "moe plan");
  auto grouped = [&](const DevLinear& L, const void* a, const int32_t* a_rows, float* out) {
    glm5k::RowGemmParams p = weight_gemm(L, a, out);
    p.a_rows = a_rows;
    p.w_group_stride = L.group_stride;
    p.scale_group_stride = L.scale_group_stride;
    p.tiles = k.tiles;
    p.n_tiles = k.n_tiles;
    p.max_tiles = k.max_tiles;
    check(glm5k::launch_row_gemm(p, stream_), "grouped expert gemm");
  };
  grouped(w.experts.gate, k.h2b, k.pair_rows, k.eg);
  grouped(w.experts.up, k.h2b, k.pair_rows, k.eu);
  check(glm5k::launch_silu_mul(k.eg, k.eu, P, I, k.eact, stream_), "expert silu_mul");
  grouped(w.experts.down, k.eact, nullptr, k.ey);
  const float* shared = nullptr;
  if (w.has_shared) {
    swiglu(k.h2b, R, w.shared, k.sh);
    shared = k.sh;
  }
  check(glm5k::launch_moe_combine(k.ey, k.pair_of, k.rw, shared, static_cast<int32_t>(R), K, static_cast<int32_t>(D),
                                  k.delta, stream_),
        "moe combine");
}

void CudaBackend::enqueue_forward(int64_t R, int64_t S, int64_t n_out, int64_t ctx_cap, const glm5k::RecordFormat& fmt,
                                  const std::function<bool()>& should_stop, ForwardProbe* probe, const BatchPlan* plan) {
  const ModelConfig& c = config_;
  Work& k = *work_;
  const int64_t D = c.hidden_size, L = c.num_hidden_layers;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const int32_t Ri = static_cast<int32_t>(R), Di = static_cast<int32_t>(D);
  fast_moe_runs_ = 0;
  fp8_gemm_runs_ = 0;
  fp8_split_runs_ = 0;
  proj_group_runs_ = 0;
  attn_fused_runs_ = 0;
  auto mark = [&](size_t i) {  // stage timing (benchmarks): recorded in the stream, or as graph nodes
    if (stage_timing_)
      check(cudaEventRecordWithFlags(stage_ev_.at(i), stream_, cudaEventRecordExternal), "stage event");
  };
  stage_spans_.clear();
  stage_next_ = static_cast<size_t>(2 * L + 2);
  in_attention_ = false;
  mark(0);
  check(glm5k::launch_embed(w_.embed, Di, tokens_dev_, Ri, k.x, stream_), "embedding");
  check(glm5k::launch_rope_tables(inv_freq_.as<float>(), static_cast<int32_t>(c.qk_rope_head_dim / 2), rope_factor_,
                                  rows_.pos, Ri, k.cos, k.sin, stream_),
        "rope tables");
  // Pace the host for long eager forwards so that a cancel takes effect within a layer.
  const bool pace = should_stop && R >= 64;
  bool have_selection = false;
  for (int64_t li = 0; li < L; ++li) {
    if (should_stop && should_stop()) fail(Status::cancelled, "cancelled");
    const DevLayer& w = w_.layers[li];
    // Attention fusion (decode sizes): launched as a programmatic dependent of the MLP's last kernel.
    check(glm5k::launch_residual_rms_norm(k.x, li == 0 ? nullptr : k.delta2, nullptr, Ri, Di, w.input_norm, eps, k.hb,
                                          nullptr, stream_, attn_fuse_ && R <= kSplitMaxRows && pdl_),
          "input norm");
    if (probe && li > 0) {
      auto& hcur = probe->hidden[li - 1];
      hcur.resize(R * D);
      check(cudaMemcpyAsync(hcur.data(), k.x, R * D * 4, cudaMemcpyDeviceToHost, stream_), "probe copy");
    }
    const bool run_indexer = c.indexer_types.at(li) == IndexerType::full || !have_selection;
    const bool forced = probe && static_cast<int64_t>(probe->force_topk.size()) > li && !probe->force_topk[li].empty();
    forced_sel_ = forced ? &probe->force_topk[li] : nullptr;
    own_sel_ = forced && run_indexer ? &probe->topk[li] : nullptr;
    in_attention_ = true;
    enqueue_attention(li, run_indexer, fmt, ctx_cap);
    in_attention_ = false;
    mark(1 + 2 * li);
    forced_sel_ = nullptr;
    own_sel_ = nullptr;
    have_selection = true;
    if (probe && run_indexer && !forced) report_selection(probe->topk[li]);
    check(glm5k::launch_residual_rms_norm(k.x, k.delta, nullptr, Ri, Di, w.post_norm, eps, k.h2b,
                                          w.is_moe ? k.h2f : nullptr, stream_),
          "post-attention norm");
    // The MLP writes delta (the attention's delta is consumed above); the next layer adds it.
    std::swap(k.delta, k.delta2);
    probe_ = probe;
    enqueue_mlp(li);
    mark(2 + 2 * li);
    probe_ = nullptr;
    std::swap(k.delta, k.delta2);
    if (pace || probe) check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }
  // Last residual add on every row (probe: the final-normed hidden state of every row), then the final
  // norm of the logit rows only and lm_head.
  check(glm5k::launch_residual_rms_norm(k.x, k.delta2, nullptr, Ri, Di, w_.final_norm, eps, nullptr,
                                        probe ? k.h2f : nullptr, stream_),
        "final residual");
  if (probe) {
    auto& last = probe->hidden[L - 1];
    last.resize(R * D);
    check(cudaMemcpyAsync(last.data(), k.h2f, R * D * 4, cudaMemcpyDeviceToHost, stream_), "probe copy");
  }
  if (n_out > 0) {
    check(glm5k::launch_residual_rms_norm(k.x, nullptr, logit_rows_dev_, static_cast<int32_t>(n_out), Di, w_.final_norm,
                                          eps, k.xn, nullptr, stream_),
          "final norm");
    linear(k.xn, n_out, w_.lm_head, k.logits);
  }
  mark(2 * L + 1);
  (void)plan;
}

void CudaBackend::set_stage_timing(bool on) {
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  clear_graphs();
  stage_timing_ = false;
  for (cudaEvent_t e : stage_ev_) (void)cudaEventDestroy(e);
  stage_ev_.clear();
  if (!on) return;
  // 2 L + 2 stage boundaries, then 8 projection (begin, end) pairs per layer.
  stage_ev_.resize(static_cast<size_t>(18 * config_.num_hidden_layers + 2), nullptr);
  for (cudaEvent_t& e : stage_ev_) check(cudaEventCreate(&e), "cudaEventCreate");
  stage_timing_ = true;
}

StageTimes CudaBackend::last_stage_times() {
  require(stage_timing_, Status::invalid_argument, "stage timing is off (set_stage_timing)");
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  auto ms = [&](size_t a, size_t b) {
    float t = 0;
    check(cudaEventElapsedTime(&t, stage_ev_.at(a), stage_ev_.at(b)), "cudaEventElapsedTime");
    return static_cast<double>(t);
  };
  StageTimes t;
  const int64_t L = config_.num_hidden_layers;
  for (int64_t li = 0; li < L; ++li) {
    t.attention_ms += ms(2 * li, 1 + 2 * li);
    (w_.layers[li].is_moe ? t.moe_ms : t.dense_mlp_ms) += ms(1 + 2 * li, 2 + 2 * li);
  }
  for (const auto& [a, b] : stage_spans_)
    if (a >= 0 && b >= 0) t.attention_proj_ms += ms(static_cast<size_t>(a), static_cast<size_t>(b));
  t.head_ms = ms(2 * L, 2 * L + 1);
  t.total_ms = ms(0, 2 * L + 1);
  return t;
}

const float* CudaBackend::forward_device(const BatchPlan& plan, const std::function<bool()>& should_stop,
                                         ForwardProbe* probe) {
  const ModelConfig& c = config_;
  const int64_t R = plan.n_rows(), S = static_cast<int64_t>(plan.seqs.size()), n_out = plan.logit_rows.size();
  require(R > 0, Status::invalid_argument, "empty batch");
  require(R <= (int64_t{1} << 20), Status::invalid_argument, "batch of ", R, " rows is too large");
  for (int64_t r = 0; r < R; ++r)
    require(plan.tokens[r] >= 0 && plan.tokens[r] < c.vocab_size, Status::invalid_argument, "token id ",
            plan.tokens[r], " is outside the vocabulary [0, ", c.vocab_size, ")");
  for (int64_t r : plan.logit_rows)
    require(r >= 0 && r < R, Status::invalid_argument, "logit row ", r, " is outside the batch");
  const CudaCache* first = nullptr;
  int64_t bt_total = 0;
  bool decode = true, slots_fit = true, fp8_keys_fit = true;
  for (const auto& s : plan.seqs) {
    const auto* cc = dynamic_cast<const CudaCache*>(s.cache);
    require(cc != nullptr, Status::invalid_argument, "the batch refers to a cache of another backend");
    if (!first) first = cc;
    slots_fit = slots_fit && cc->n_slots() <= INT32_MAX;
    fp8_keys_fit = fp8_keys_fit && (int64_t{cc->page_size()} * cc->format().index_bytes()) % 16 == 0;
    require(cc->format().latent_dtype == first->format().latent_dtype &&
                cc->format().index_dtype == first->format().index_dtype,
            Status::unsupported, "one batch mixes cache record formats");
    bt_total += static_cast<int64_t>(s.block_table.size());
    decode = decode && s.n_new == 1;
  }
  const glm5k::RecordFormat fmt = first->format();
  int64_t max_pos = 0;
  for (int64_t p : plan.positions) max_pos = std::max(max_pos, p);
  require(max_pos < (int64_t{1} << 30), Status::invalid_argument, "position out of range");
  const bool use_graph = decode && !probe && !(std::getenv("GLM5RT_CUDA_GRAPHS") && std::string(std::getenv("GLM5RT_CUDA_GRAPHS")) == "0");
  int64_t ctx_cap = align_up(max_pos + 1, 64);
  if (use_graph) {  // a power of two so that a growing context re-captures rarely
    ctx_cap = 256;
    while (ctx_cap < max_pos + 1) ctx_cap *= 2;
  }
  check(cudaSetDevice(device_), "cudaSetDevice");
  ensure_work(R, ctx_cap, n_out);
  ensure_split_plans(R);
  // The fast kernels take one cache pool per launch and int32 slots; the fast FP8 indexer wants 16-byte
  // page bases.
  use_fast_mla_ = kernels_ >= 1 && mla_dims_ok_ && slots_fit;
  use_fast_idx_ = use_fast_mla_ && kernels_ >= 2 && idx_dims_ok_ && (fmt.index_dtype != glm5k::kRecFp8 || fp8_keys_fit);
  groups_.clear();
  bt_stride_ = 0;
  if (use_fast_mla_) {
    for (const auto& sp : plan.seqs) {
      const auto* cc = static_cast<const CudaCache*>(sp.cache);
      const int32_t r0 = static_cast<int32_t>(sp.first_row), r1 = static_cast<int32_t>(sp.first_row + sp.n_new);
      if (!groups_.empty() && groups_.back().cache == cc && groups_.back().r1 == r0) groups_.back().r1 = r1;
      else if (r1 > r0) groups_.push_back({cc, r0, r1});
      // Block tables padded to one stride for the fast indexer: entries for positions < ctx_cap (the
      // stride stays fixed for a graph key).
      bt_stride_ = std::max(bt_stride_, static_cast<int32_t>((ctx_cap + cc->page_size() - 1) / cc->page_size()));
    }
  }
  if (!use_fast_idx_) bt_stride_ = 0;
  // One launch per fast kernel over all rows when they span several caches (the kernels read each row's
  // pool from a per-sequence table); the indexer's row layout has one page size, so the caches must agree.
  multi_pool_ = false;
  if (use_fast_mla_ && batch_attn_ && groups_.size() > 1) {
    multi_pool_ = groups_.front().r0 == 0 && groups_.back().r1 == R;
    for (const FastGroup& g : groups_) multi_pool_ = multi_pool_ && g.cache->page_size() == groups_.front().cache->page_size();
  }
  ensure_fast_workspace(fmt);

  // Batch description: one upload.
  Carver lay(nullptr);
  const int64_t o_tok = lay.used();
  lay.take<int32_t>(R);
  const int64_t o_pos = lay.used();
  lay.take<int32_t>(R);
  const int64_t o_seq = lay.used();
  lay.take<int32_t>(R);
  const int64_t o_slot = lay.used();
  lay.take<int64_t>(R);
  const int64_t o_lr = lay.used();
  lay.take<int32_t>(std::max<int64_t>(1, n_out));
  const int64_t o_sc = lay.used();
  lay.take<glm5k::SeqCache>(S);
  const int64_t o_len = lay.used();
  lay.take<int32_t>(use_fast_idx_ ? R : 1);
  const int64_t o_btp = lay.used();
  lay.take<int32_t>(std::max<int64_t>(1, S * bt_stride_));
  const int64_t o_mp = lay.used();
  lay.take<kernels::MlaPool>(multi_pool_ ? S : 1);
  const int64_t o_kp = lay.used();
  lay.take<kernels::indexer::KeyPool>(multi_pool_ ? S : 1);
  const int64_t o_bt = lay.used();  // last: its size changes as sequences grow (graph keys do not see it)
  lay.take<int32_t>(std::max<int64_t>(1, bt_total));
  ensure_plan_capacity(static_cast<size_t>(lay.used()));
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");  // the pinned buffer may still be in flight
  char* h = static_cast<char*>(plan_host_);
  char* d = plan_dev_.as<char>();
  auto* tok = reinterpret_cast<int32_t*>(h + o_tok);
  auto* pos = reinterpret_cast<int32_t*>(h + o_pos);
  auto* seq = reinterpret_cast<int32_t*>(h + o_seq);
  auto* slot = reinterpret_cast<int64_t*>(h + o_slot);
  auto* lr = reinterpret_cast<int32_t*>(h + o_lr);
  auto* sc = reinterpret_cast<glm5k::SeqCache*>(h + o_sc);
  auto* bt = reinterpret_cast<int32_t*>(h + o_bt);
  auto* row_len = reinterpret_cast<int32_t*>(h + o_len);
  auto* btp = reinterpret_cast<int32_t*>(h + o_btp);
  for (int64_t r = 0; r < R; ++r) {
    if (use_fast_idx_) row_len[r] = static_cast<int32_t>(plan.positions[r] + 1);
    tok[r] = plan.tokens[r];
    pos[r] = static_cast<int32_t>(plan.positions[r]);
    seq[r] = plan.seq_of_row[r];
    slot[r] = plan.slots[r];
  }
  for (int64_t i = 0; i < n_out; ++i) lr[i] = static_cast<int32_t>(plan.logit_rows[i]);
  int64_t bt_at = 0;
  for (int64_t s = 0; s < S; ++s) {
    const auto& sp = plan.seqs[s];
    const auto* cc = static_cast<const CudaCache*>(sp.cache);
    require(static_cast<int64_t>(sp.block_table.size()) * cc->page_size() >= sp.n_past + sp.n_new,
            Status::internal, "block table too short");
    for (int32_t p : sp.block_table)
      require(p >= 0 && p < cc->n_pages(), Status::internal, "page ", p, " is outside the cache");
    sc[s].latent = cc->latent();
    sc[s].index = cc->index();
    sc[s].latent_layer_bytes = cc->latent_layer_bytes();
    sc[s].index_layer_bytes = cc->index_layer_bytes();
    sc[s].bt_offset = static_cast<int32_t>(bt_at);
    sc[s].page_size = cc->page_size();
    if (multi_pool_) {
      kernels::MlaPool mp;
      mp.base = cc->latent();
      mp.num_slots = cc->n_slots();
      mp.layer_bytes = cc->latent_layer_bytes();
      std::memcpy(h + o_mp + s * static_cast<int64_t>(sizeof(mp)), &mp, sizeof(mp));
      kernels::indexer::KeyPool kp;
      kp.base = cc->index();
      kp.layer_bytes = cc->index_layer_bytes();
      std::memcpy(h + o_kp + s * static_cast<int64_t>(sizeof(kp)), &kp, sizeof(kp));
    }
    std::copy(sp.block_table.begin(), sp.block_table.end(), bt + bt_at);
    bt_at += static_cast<int64_t>(sp.block_table.size());
    if (use_fast_idx_) {  // page 0 pads: never read (row_len bounds the walk), but a valid page
      const int64_t n = std::min<int64_t>(bt_stride_, static_cast<int64_t>(sp.block_table.size()));
      std::fill(btp + s * bt_stride_, btp + (s + 1) * bt_stride_, 0);
      std::copy(sp.block_table.begin(), sp.block_table.begin() + n, btp + s * bt_stride_);
    }
  }
  check(cudaMemcpyAsync(d, h, static_cast<size_t>(lay.used()), cudaMemcpyHostToDevice, stream_), "uploading the batch");
  tokens_dev_ = reinterpret_cast<const int32_t*>(d + o_tok);
  rows_.seq = reinterpret_cast<const int32_t*>(d + o_seq);
  rows_.pos = reinterpret_cast<const int32_t*>(d + o_pos);
  rows_.slot = reinterpret_cast<const int64_t*>(d + o_slot);
  rows_.seqs = reinterpret_cast<const glm5k::SeqCache*>(d + o_sc);
  rows_.block_tables = reinterpret_cast<const int32_t*>(d + o_bt);
  rows_.rows = static_cast<int32_t>(R);
  row_len_dev_ = reinterpret_cast<const int32_t*>(d + o_len);
  bt_padded_dev_ = reinterpret_cast<const int32_t*>(d + o_btp);
  mla_pools_dev_ = multi_pool_ ? d + o_mp : nullptr;
  key_pools_dev_ = multi_pool_ ? d + o_kp : nullptr;
  plan_seqs_ = static_cast<int32_t>(S);
  logit_rows_dev_ = reinterpret_cast<const int32_t*>(d + o_lr);
  last_n_out_ = n_out;
  if (probe) {
    probe->hidden.assign(c.num_hidden_layers, {});
    probe->topk.assign(c.num_hidden_layers, {});
    probe->experts.assign(c.num_hidden_layers, {});
    probe->expert_weights.assign(c.num_hidden_layers, {});
  }

  if (!use_graph) {
    plan_ = &plan;
    try {
      enqueue_forward(R, S, n_out, ctx_cap, fmt, should_stop, probe, &plan);
    } catch (...) {
      plan_ = nullptr;
      throw;
    }
    plan_ = nullptr;
    return work_->logits;
  }
  if (should_stop && should_stop()) fail(Status::cancelled, "cancelled");
  const int64_t choice = (use_fast_mla_ ? 1 : 0) + (use_fast_idx_ ? 2 : 0);
  GraphKey key{R, S, n_out, ctx_cap,
               fmt.latent_dtype * 16 + fmt.index_dtype + 256 * choice + 1024 * kernels_ + 8192 * stage_timing_};
  key.push_back(multi_pool_ ? 1 : 0);  // one launch over the pool tables, or one per group
  for (const FastGroup& g : groups_) {
    // The fast launches bake the cache's pool addresses and per-layer strides (n_slots) into the graph; a
    // cache freed and another allocated at the same address with another size must not replay it.
    key.push_back(static_cast<int64_t>(reinterpret_cast<intptr_t>(g.cache->latent())));
    key.push_back(static_cast<int64_t>(reinterpret_cast<intptr_t>(g.cache->index())));
    key.push_back(g.cache->n_slots());
    key.push_back(g.cache->page_size());
    key.push_back(g.r0);
    key.push_back(g.r1);
  }
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    try {
      enqueue_forward(R, S, n_out, ctx_cap, fmt, {}, nullptr, &plan);
    } catch (...) {
      cudaGraph_t g = nullptr;
      (void)cudaStreamEndCapture(stream_, &g);
      if (g) (void)cudaGraphDestroy(g);
      (void)cudaGetLastError();
      throw;
    }
    cudaGraph_t graph = nullptr;
    check(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture");
    cudaGraphExec_t exec = nullptr;
    const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
    (void)cudaGraphDestroy(graph);
    check(e, "cudaGraphInstantiate");
    it = graphs_.emplace(key, exec).first;
    ++graphs_captured_;
  } else {
    ++graph_replays_;
  }
  check(cudaGraphLaunch(it->second, stream_), "cudaGraphLaunch");
  return work_->logits;
}

void CudaBackend::forward(const BatchPlan& plan, float* logits, const std::function<bool()>& should_stop,
                          ForwardProbe* probe) {
  std::lock_guard<std::mutex> lock(device_mutex_);
  const float* dev = forward_device(plan, should_stop, probe);
  deliver_logits(plan, dev, logits);  // cuda_sampling.cpp
  check(cudaStreamSynchronize(stream_), "the forward");
}

std::vector<int32_t> CudaBackend::argmax_last() {
  std::vector<int32_t> out(static_cast<size_t>(last_n_out_));
  if (out.empty()) return out;
  check(glm5k::launch_argmax_rows(work_->logits, static_cast<int32_t>(last_n_out_), static_cast<int32_t>(config_.vocab_size),
                                  work_->argmax, stream_),
        "argmax");
  check(cudaMemcpyAsync(out.data(), work_->argmax, out.size() * 4, cudaMemcpyDeviceToHost, stream_), "copying tokens");
  check(cudaStreamSynchronize(stream_), "argmax");
  return out;
}

void CudaBackend::synchronize() { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

void CudaBackend::fill_cache_random(CacheStorage& cache, uint64_t seed) {
  auto& cc = dynamic_cast<CudaCache&>(cache);
  const glm5k::RecordFormat& f = cc.format();
  const int64_t L = config_.num_hidden_layers;
  if (f.latent_dtype == glm5k::kRecBf16)
    check(glm5k::launch_fill_random_bf16(reinterpret_cast<bf16*>(cc.latent()), L * cc.latent_layer_bytes() / 2, seed,
                                         1.0f, stream_),
          "random cache fill");
  else  // [kv_lora e4m3][one float32 scale per 128][rope bf16] per record
    check(glm5k::launch_fill_random_records(cc.latent(), L * cc.latent_layer_bytes(), f.latent_bytes(), f.kv_lora,
                                            4 * ((f.kv_lora + 127) / 128), seed, stream_),
          "random cache fill");
  if (f.index_dtype == glm5k::kRecBf16)
    check(glm5k::launch_fill_random_bf16(reinterpret_cast<bf16*>(cc.index()), L * cc.index_layer_bytes() / 2, seed + 1,
                                         1.0f, stream_),
          "random cache fill");
  else  // per page: the page's e4m3 vectors, then their float32 scales
    check(glm5k::launch_fill_random_records(cc.index(), L * cc.index_layer_bytes(), cc.page_size() * f.index_bytes(),
                                            cc.page_size() * f.index_dim, cc.page_size() * 4, seed + 1, stream_),
          "random cache fill");
  synchronize();
}

// Copy-on-write for Session::fork: a page's records are page_size consecutive slots in every layer's
// pool (for FP8 indexer keys too: the page's vectors then its scales fill the same page_size * 132
// bytes), so one strided device copy per pool moves the page for all layers.
void CudaBackend::copy_page(CacheStorage& cache, int32_t src, int32_t dst) const {
  std::lock_guard<std::mutex> lock(device_mutex_);
  auto& cc = dynamic_cast<CudaCache&>(cache);
  const int64_t L = config_.num_hidden_layers, ps = cc.page_size();
  const int64_t lb = cc.format().latent_bytes() * ps, ib = cc.format().index_bytes() * ps;
  check(cudaSetDevice(device_), "cudaSetDevice");
  check(cudaMemcpy2DAsync(cc.latent() + dst * lb, cc.latent_layer_bytes(), cc.latent() + src * lb,
                          cc.latent_layer_bytes(), lb, L, cudaMemcpyDeviceToDevice, stream_),
        "copying a cache page");
  check(cudaMemcpy2DAsync(cc.index() + dst * ib, cc.index_layer_bytes(), cc.index() + src * ib,
                          cc.index_layer_bytes(), ib, L, cudaMemcpyDeviceToDevice, stream_),
        "copying a cache page");
}

void CudaBackend::export_records(const CacheStorage& cache, const std::vector<int32_t>& bt, int64_t n, float* out) const {
  std::lock_guard<std::mutex> lock(device_mutex_);
  const auto& cc = dynamic_cast<const CudaCache&>(cache);
  const glm5k::RecordFormat f = cc.format();
  const int64_t L = config_.num_hidden_layers, lb = f.latent_bytes(), ib = f.index_bytes();
  const int64_t kvr = f.kv_lora, rope = f.rope, d = f.index_dim, rec = kvr + rope + d;
  const bool lf = f.latent_dtype == glm5k::kRecFp8, xf = f.index_dtype == glm5k::kRecFp8;
  check(cudaSetDevice(device_), "cudaSetDevice");
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  std::vector<char> lat(L * lb), idx(L * ib);
  for (int64_t t = 0; t < n; ++t) {
    const int64_t slot = static_cast<int64_t>(bt[t / cc.page_size()]) * cc.page_size() + t % cc.page_size();
    check(cudaMemcpy2D(lat.data(), lb, cc.latent() + slot * lb, cc.latent_layer_bytes(), lb, L, cudaMemcpyDeviceToHost),
          "reading cache records");
    // Host copy per layer: [key vector | scale], ib bytes.
    check(cudaMemcpy2D(idx.data(), ib, cc.index() + index_vector_offset(f, cc.page_size(), slot), cc.index_layer_bytes(),
                       xf ? d : ib, L, cudaMemcpyDeviceToHost),
          "reading cache records");
    if (xf)
      check(cudaMemcpy2D(idx.data() + d, ib, cc.index() + index_scale_offset(f, cc.page_size(), slot),
                         cc.index_layer_bytes(), 4, L, cudaMemcpyDeviceToHost),
            "reading cache records");
    for (int64_t l = 0; l < L; ++l) {
      float* o = out + (t * L + l) * rec;
      const char* lr = lat.data() + l * lb;
      const int64_t groups = (kvr + 127) / 128;
      decode_values(lr, kvr, lf, 128, lr + kvr, o);
      decode_values(lf ? lr + kvr + 4 * groups : lr + 2 * kvr, rope, false, 1, nullptr, o + kvr);
      const char* ir = idx.data() + l * ib;
      decode_values(ir, d, xf, d, ir + d, o + kvr + rope);
    }
  }
}

void CudaBackend::import_records(CacheStorage& cache, const std::vector<int32_t>& bt, int64_t n, const float* in) const {
  std::lock_guard<std::mutex> lock(device_mutex_);
  auto& cc = dynamic_cast<CudaCache&>(cache);
  const glm5k::RecordFormat f = cc.format();
  const int64_t L = config_.num_hidden_layers, lb = f.latent_bytes(), ib = f.index_bytes();
  const int64_t kvr = f.kv_lora, rope = f.rope, d = f.index_dim, rec = kvr + rope + d;
  const bool lf = f.latent_dtype == glm5k::kRecFp8, xf = f.index_dtype == glm5k::kRecFp8;
  check(cudaSetDevice(device_), "cudaSetDevice");
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  std::vector<char> lat(L * lb), idx(L * ib);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t l = 0; l < L; ++l) {
      const float* v = in + (t * L + l) * rec;
      char* lr = lat.data() + l * lb;
      const int64_t groups = (kvr + 127) / 128;
      encode_values(v, kvr, lf, 128, lr, lr + kvr);
      encode_values(v + kvr, rope, false, 1, lf ? lr + kvr + 4 * groups : lr + 2 * kvr, nullptr);
      char* ir = idx.data() + l * ib;
      encode_values(v + kvr + rope, d, xf, d, ir, ir + d);
    }
    const int64_t slot = static_cast<int64_t>(bt[t / cc.page_size()]) * cc.page_size() + t % cc.page_size();
    check(cudaMemcpy2D(cc.latent() + slot * lb, cc.latent_layer_bytes(), lat.data(), lb, lb, L, cudaMemcpyHostToDevice),
          "writing cache records");
    check(cudaMemcpy2D(cc.index() + index_vector_offset(f, cc.page_size(), slot), cc.index_layer_bytes(), idx.data(), ib,
                       xf ? d : ib, L, cudaMemcpyHostToDevice),
          "writing cache records");
    if (xf)
      check(cudaMemcpy2D(cc.index() + index_scale_offset(f, cc.page_size(), slot), cc.index_layer_bytes(), idx.data() + d,
                         ib, 4, L, cudaMemcpyHostToDevice),
            "writing cache records");
  }
}

}  // namespace cuda

std::unique_ptr<Backend> make_cuda_backend(const ModelConfig& config, const ModelWeights& weights, int32_t device_index,
                                           const std::function<bool(float)>& progress) {
  std::string why;
  require(cuda_device_usable(device_index, &why), Status::no_device, why);
  cuda::check(cudaSetDevice(device_index), "cudaSetDevice");
  cuda::DevWeights w = cuda::upload_weights(config, weights, progress);
  return std::make_unique<cuda::CudaBackend>(config, std::move(w), device_index);
}

}  // namespace glm5rt

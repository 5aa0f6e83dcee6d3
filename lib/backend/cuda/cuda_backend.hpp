// The CUDA backend: the whole GLM-5 forward of docs/GLM5.md on one GPU, bf16 activations with float32
// accumulation (float32 residual stream, norms, softmax and router), weights as uploaded by
// cuda_weights.hpp, cache records bf16 or FP8 (kernels/common/simple_forward.cuh RecordFormat).
//
// One forward = one upload of the batch description, then only device work on one stream (no host round
// trip inside a step), then the logits. Decode steps (every sequence adds one token) are captured in a
// CUDA graph keyed on the batch shape and replayed. Dense projections: bf16 weights through cuBLASLt;
// FP8 block-scaled weights through kernels/gemm's fp8_gemm on the FP8 weights themselves (activations
// quantised per 128-group to e4m3), or dequantised into a bf16 workspace then cuBLASLt (set_fp8_path).
// MoE: kernels/moe's moe_forward (router, permutation, grouped FP8 GEMMs, SwiGLU, combine, shared
// expert) where the experts are FP8 with 128 x 128 blocks and the dims fit it; the simple grouped row
// GEMM with a device-side routing plan otherwise, and as the reference it is tested against.
//
// Attention kernels: the fast families (kernels/attention sparse MLA, kernels/indexer scores + top-k)
// where the model has GLM-5's attention shapes (kv_lora 512, rope 64, heads 8..128; indexer 32 x 128),
// the simple kernels of kernels/common otherwise and as the reference they are tested against
// (set_kernels / GLM5RT_CUDA_KERNELS). Both read and write the same cache records.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cuda/cublaslt_gemm.hpp"
#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_weights.hpp"
#include "model/weights.hpp"

namespace glm5rt {

// true when device_index names a usable CUDA device; otherwise why says what is missing.
bool cuda_device_usable(int32_t device_index, std::string* why);

std::unique_ptr<Backend> make_cuda_backend(const ModelConfig& config, const ModelWeights& weights, int32_t device_index,
                                           const std::function<bool(float)>& progress = {});

namespace cuda {

class CudaCache final : public CacheStorage {
 public:
  CudaCache(int64_t n_pages, int32_t page_size, int64_t n_layers, const glm5k::RecordFormat& fmt);
  int64_t n_pages() const override { return n_pages_; }
  int32_t page_size() const override { return page_size_; }
  const glm5k::RecordFormat& format() const { return fmt_; }
  int64_t n_slots() const { return n_pages_ * page_size_; }
  char* latent() const { return latent_.as<char>(); }
  char* index() const { return index_.as<char>(); }
  int64_t latent_layer_bytes() const { return n_slots() * fmt_.latent_bytes(); }
  int64_t index_layer_bytes() const { return n_slots() * fmt_.index_bytes(); }

 private:
  int64_t n_pages_;
  int32_t page_size_;
  glm5k::RecordFormat fmt_;
  DeviceBuffer latent_, index_;
};

// Device time of one forward's stages, summed over layers (CudaBackend::set_stage_timing).
struct StageTimes {
  double attention_ms = 0;  // input norm .. o_proj, indexer included (the first also embedding + rope)
  double attention_proj_ms = 0;  // of which the projections (q_a, kv_a, q_b, indexer wq_b / wk / weights_proj, o_proj)
  double dense_mlp_ms = 0;  // post-attention norm .. dense MLP output
  double moe_ms = 0;        // post-attention norm .. MoE output
  double head_ms = 0;       // final norm + lm_head
  double total_ms = 0;
};

struct MemoryReport {
  int64_t weights = 0, workspace = 0, plan = 0, dequant = 0, cublas = 0;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(const ModelConfig& c, DevWeights weights, int32_t device);
  ~CudaBackend() override;

  const char* name() const override { return "cuda"; }
  int32_t kind() const override { return GLM5RT_BACKEND_CUDA; }
  const ModelConfig& config() const override { return config_; }
  void copy_page(CacheStorage& cache, int32_t src, int32_t dst) const override;
  int64_t cache_bytes_per_token(const CacheDtypes& dtypes) const override;
  std::unique_ptr<CacheStorage> create_cache(int64_t n_pages, int32_t page_size, const CacheDtypes& dtypes) override;
  int64_t default_cache_budget() const override;

  void forward(const BatchPlan& plan, float* logits, const std::function<bool()>& should_stop,
               ForwardProbe* probe) override;
  void export_records(const CacheStorage& cache, const std::vector<int32_t>& block_table, int64_t n,
                      float* out) const override;
  void import_records(CacheStorage& cache, const std::vector<int32_t>& block_table, int64_t n,
                      const float* in) const override;

  // Device-resident logits and the device sampler (cuda_sampling.cpp, kernels/sampling): a forward's
  // rows with a BatchPlan::logit_dest are copied device-to-device into the session's row; sampling
  // returns only token ids.
  bool device_logits() const override { return true; }
  std::unique_ptr<LogitsRow> create_logits_row() override;
  void read_logits(const LogitsRow& row, float* out) const override;
  void copy_logits(const LogitsRow& src, LogitsRow& dst) const override;
  void sample_logits(const std::vector<const LogitsRow*>& rows, const SamplerParams& p,
                     const std::vector<std::vector<int32_t>>& windows, const std::vector<double>& uniforms,
                     int32_t* out) const override;

  // Runs the forward and leaves the logits of plan.logit_rows on the device (float32, rows x vocab,
  // valid until the next forward); nothing is copied back. Asynchronous: synchronize() before timing.
  const float* forward_device(const BatchPlan& plan, const std::function<bool()>& should_stop, ForwardProbe* probe);
  // Greedy sampling on the device: argmax of each logit row of the last forward_device (lowest id wins ties).
  std::vector<int32_t> argmax_last();
  // The device sampler (what sample_logits runs on session rows) on `rows` contiguous rows of vocab_size
  // floats in device memory, e.g. forward_device's result: one token per row; windows and uniforms as
  // sample_logits takes them.
  std::vector<int32_t> sample_device_rows(const float* logits, int64_t rows, const SamplerParams& p,
                                          const std::vector<std::vector<int32_t>>& windows,
                                          const std::vector<double>& uniforms);
  void synchronize();
  cudaStream_t stream() const { return stream_; }
  // Fills every record of a cache with random values (benchmarks that need a long context).
  void fill_cache_random(CacheStorage& cache, uint64_t seed);
  // FP8 dense projections: "gemm" (kernels/gemm fp8_gemm on the FP8 weights, activations quantised per
  // 128-group), "dequant" (dequantise into a bf16 workspace, then cuBLASLt), "direct" (the simple row
  // GEMM reads FP8) or "auto" (with the "fast" kernels: "gemm" for up to kFp8GemmAutoRows rows, decode,
  // "dequant" above, prefill; "dequant" with the other kernel choices). A weight whose
  // shape fp8_gemm cannot take (k % 128, odd n, blocks other than 128 x 128) is dequantised. Also
  // settable through GLM5RT_CUDA_FP8_PATH.
  void set_fp8_path(const std::string& path);
  std::string fp8_path() const;
  // Split-K of decode-sized fp8_gemm projections (see SplitWeight; on by default; GLM5RT_CUDA_FP8_SPLITK=0
  // turns it off), for A/B measurements.
  void set_fp8_split_k(bool on);
  bool fp8_split_k() const { return split_k_; }
  // Grouped attention projections at decode sizes (<= kSplitMaxRows rows, fp8_gemm path): the FP8
  // projections that read one input run as ONE fp8_gemm launch with unequal parts (x -> q_a | kv_a |
  // indexer wk; q_a's normed output -> q_b | indexer wq_b; o_proj alone), one quantisation of that input,
  // split-K over K slices read in place (no weight copies; slices by the split_slices rule on the group's
  // width, 1 with set_fp8_split_k(false)) and one fp8_split_reduce into the float32 outputs: 9 launches a
  // layer instead of 18. Off by default until measured (docs/PERFORMANCE.md "Grouped attention
  // projections"); GLM5RT_CUDA_PROJ_GROUP=1 / 0 at construction, or this setter. The three groups' slice
  // counts can be overridden at construction: GLM5RT_CUDA_PROJ_GROUP_SLICES=x,q,o (e.g. 12,2,4).
  void set_proj_grouping(bool on);
  bool proj_grouping() const { return proj_group_; }
  // With the grouped projections: each group's GEMM starts streaming its weights before its
  // programmatic-dependent-launch wait, overlapping the quantisation kernel before it
  // (Fp8GemmParams::group_info_ready: the weights and the split plans are static). Off by default until
  // measured; GLM5RT_CUDA_PROJ_GROUP_EARLY=1 / 0 at construction, or this setter.
  void set_proj_group_early(bool on);
  bool proj_group_early() const { return proj_group_early_; }
  // "auto" with the fast kernels uses fp8_gemm for GEMMs of at most this many rows: prefill-sized GEMMs
  // go to cuBLASLt's bf16 tensor-core rate, which our FP8 kernel does not reach on sm_90 (no FP8
  // mma.sync there; docs/PERFORMANCE.md "MoE and FP8 GEMM").
  static constexpr int64_t kFp8GemmAutoRows = 128;
  // fp8_gemm GEMMs of at most this many rows run split-K where the weight's slice count is >= 2.
  static constexpr int64_t kSplitMaxRows = 32;
  // Kernel families: "simple" (kernels/common only, everything), "fast-mla" (fast sparse MLA, simple
  // indexer and MoE), "fast-attn" (fast sparse MLA and fast indexer, simple MoE) or "fast" (fast
  // attention and kernels/moe's moe_forward for the MoE layers, the default). Also settable through
  // GLM5RT_CUDA_KERNELS. A fast family runs only where the model has its shapes and the batch's
  // cache shapes fit (int32 slots; FP8 indexer keys: page_size % 4 == 0), else that forward uses the
  // simple kernels: see fast_*_supported and last_forward_used_fast_*. A batch over several caches runs
  // each fast attention kernel once for all rows, every row reading its own cache's pool through a
  // per-sequence pool table uploaded with the batch (set_batch_attention; needs one page size across the
  // caches), else once per run of consecutive sequences sharing a cache.
  void set_kernels(const std::string& which);
  // One fast sparse MLA / indexer launch for a batch over several caches (default on; off = one launch per
  // run of rows sharing a cache, the earlier behaviour). Also GLM5RT_CUDA_BATCH_ATTN=0 / 1.
  void set_batch_attention(bool on);
  bool batch_attention() const { return batch_attn_; }
  // Whether the last forward ran the fast attention kernels once over several caches' pools.
  bool last_forward_batched_attention() const { return multi_pool_; }
  std::string kernels() const;
  bool fast_mla_supported() const { return mla_dims_ok_; }
  bool fast_indexer_supported() const { return idx_dims_ok_; }
  // Number of MoE layers moe_forward can run (FP8 experts with 128 x 128 blocks, hidden and
  // moe_intermediate multiples of 128, <= 256 experts, top_k <= 16, at most one shared expert).
  int64_t fast_moe_layers() const;
  bool last_forward_used_fast_mla() const { return use_fast_mla_; }
  bool last_forward_used_fast_indexer() const { return use_fast_idx_; }
  // MoE layers / dense FP8 projections the last enqueued forward ran through moe_forward / fp8_gemm (a
  // graph replay enqueues nothing: the figures stay those of the capture or eager forward before it).
  int64_t last_forward_fast_moe_layers() const { return fast_moe_runs_; }
  int64_t last_forward_fp8_gemms() const { return fp8_gemm_runs_; }
  int64_t last_forward_fp8_split_gemms() const { return fp8_split_runs_; }
  // Grouped projection launches (set_proj_grouping) of the last enqueued forward.
  int64_t last_forward_proj_groups() const { return proj_group_runs_; }
  // Attention-stage fusion at decode sizes (<= kSplitMaxRows rows; docs/PERFORMANCE.md "CUDA forward: the
  // attention stage's small kernels"): the absorbed per-head products q_nope x W_UK and o_lat x W_UV run
  // through kernels/common/absorbed_heads (8 / 16 lanes per output feature, weights loaded before a
  // programmatic-dependent-launch wait) instead of the CUDA-core row GEMM, the first one reading q_b's
  // float32 output and writing the fast MLA's packed bf16 query directly (mla_prep's query half and
  // pack_mla_query dropped); mla_prep, indexer_prep and the fast indexer's query conversion run as one
  // launch (glm5k::launch_attention_prep). On by default since the H200 run at 595abea (decode batch 1 8K:
  // 1.771 -> 1.521 ms over 4 GLM-5 layers; batch 32: 7.321 -> 7.251); GLM5RT_CUDA_ATTN_FUSE=0 / 1 at
  // construction, or this setter.
  void set_attention_fusion(bool on);
  bool attention_fusion() const { return attn_fuse_; }
  // Fused attention launches of the last enqueued forward (per layer: absorbed query, absorbed value,
  // attention prep; 3 with the fast MLA).
  int64_t last_forward_attn_fused() const { return attn_fused_runs_; }
  MemoryReport memory() const;
  // Benchmarks: record events between the stages of every forward (also inside captured graphs, as
  // event nodes) and read the last forward's stage times (synchronises). Off by default.
  void set_stage_timing(bool on);
  StageTimes last_stage_times();
  int64_t graphs_captured() const { return graphs_captured_; }
  int64_t graph_replays() const { return graph_replays_; }

 private:
  struct Work;  // per-forward device buffers, sized for (rows, context capacity, logit rows)
  // rows, seqs, logit rows, ctx, fmt + kernel choice, batched attention over several caches (0 / 1), then
  // per fast row group (the per-group fast launches bake cache addresses and row ranges into the graph):
  // cache address, page size, first row, end row.
  using GraphKey = std::vector<int64_t>;
  // Consecutive rows whose sequences share one cache: the fast kernels run once per group.
  struct FastGroup {
    const CudaCache* cache;
    int32_t r0, r1;
  };

  glm5k::RecordFormat record_format(const CacheDtypes& d) const;
  void ensure_work(int64_t rows, int64_t ctx_cap, int64_t n_out);
  void ensure_plan_capacity(size_t bytes);
  void enqueue_forward(int64_t R, int64_t S, int64_t n_out, int64_t ctx_cap, const glm5k::RecordFormat& fmt,
                       const std::function<bool()>& should_stop, ForwardProbe* probe, const BatchPlan* plan);
  void enqueue_attention(int64_t li, bool run_indexer, const glm5k::RecordFormat& fmt, int64_t ctx_cap);
  void enqueue_mlp(int64_t li);
  void enqueue_fast_moe(int64_t li);
  // Routing of MoE layer li in k.ids / k.rw: reported to the probe, replaced by its forced choice.
  void probe_routing(int64_t li);
  void linear(const __nv_bfloat16* x, int64_t m, const DevLinear& L, float* y);
  void linear_any(const __nv_bfloat16* x, int64_t m, const DevLinear& L, float* y);
  int32_t stage_mark();  // records the next event of the stage pool: its index, or -1
  void swiglu(const __nv_bfloat16* x, int64_t m, const DevMlp& w, float* out);
  // Device arrays of weight / scale pointers for fp8_gemm, built once per weight (see build_fast_tables).
  struct Fp8Table {
    const uint8_t* const* w = nullptr;
    const float* const* s = nullptr;
  };
  struct MoeTable {
    bool ok = false;
    Fp8Table gate_up, down;  // [(E + 1) * 2] and [E + 1]; entry E is the shared expert
    const __nv_bfloat16* router = nullptr;  // bf16 copy of the float32 router weight
  };
  void build_fast_tables();
  bool fp8_gemm_fits(const DevLinear& L) const;
  bool use_fp8_gemm(int64_t m) const {
    return fp8_path_ == 3 || (fp8_path_ == 0 && kernels_ == 3 && m <= kFp8GemmAutoRows);
  }
  const Fp8Table* fp8_table(const DevLinear& L) const;
  void linear_fp8(const __nv_bfloat16* x, int64_t m, const DevLinear& L, const Fp8Table& t, float* y);
  // y [m, n] float32 = (e4m3 rows aq [m, k] with scales as) x L^T through fp8_gemm, split-K where planned.
  void fp8_gemm_f32(const uint8_t* aq, const float* as, int32_t m, const DevLinear& L, const Fp8Table& t, float* y);
  // Split-K for decode-sized dense FP8 GEMMs (<= kSplitMaxRows rows) whose output blocks cannot fill the
  // GPU (n / 64 decode blocks, e.g. o_proj's 96 on 132 SMs): the weight [n, k] is read as S K-slices [n,
  // k / S] in place (slice s at column s * k / S with the whole tensor's row stride: Fp8GemmParams::ldw /
  // ld_wscale; no copies), the quantised activation rows [m, k] are read as [m * S, k / S] (the same
  // bytes) through a row map, fp8_gemm runs the S slices as S groups, and a reduction sums the S bf16
  // partials into float32 (kSplitMaxRows: public, above).
  struct SplitWeight {
    int32_t slices = 1;
    int32_t ldw = 0, ld_wscale = 0;  // the whole tensor's row strides (bytes, floats)
    Fp8Table table;                  // S slice pointers and S scale-slice pointers into the tensor
  };
  struct SplitPlan {  // per (rows, slices): fp8_gemm's grouping of the m * S partial rows
    DeviceBuffer mem;
    const int32_t *offsets = nullptr, *active = nullptr, *num_active = nullptr, *tile_prefix = nullptr,
                  *row_map = nullptr;
  };
  int32_t split_slices(const DevLinear& L) const;
  int32_t split_slices(int64_t n, int64_t k) const;
  // One grouped projection launch (set_proj_grouping): parts' tables slice-major (entry s * parts + p =
  // part p's K slice s), part p's output columns [part_begin[p], part_begin[p + 1]).
  static constexpr int kProjGroupMaxParts = 8;  // kernels::kFp8MaxVariedParts (checked in the .cpp)
  struct ProjGroup {
    bool ok = false;
    int32_t slices = 1, n = 0, k = 0, parts = 0, ld_wscale = 0;
    int32_t part_begin[kProjGroupMaxParts + 1] = {};
    Fp8Table table;
  };
  struct LayerProj {
    ProjGroup x, q, o;  // x: q_a | kv_a [| idx_wk]; q: q_b [| idx_wq_b]; o: o_proj
  };
  // Quantises x [m, g.k] once, runs the group's GEMM and the reduction into outs[0 .. g.parts); false
  // (nothing enqueued) when the group is not usable.
  bool proj_group(const ProjGroup& g, const __nv_bfloat16* x, int64_t m, float* const* outs);
  void ensure_split_plans(int64_t rows);
  bool swiglu_fp8(const __nv_bfloat16* x, int64_t m, const DevMlp& w, float* out);
  void clear_graphs();
  void ensure_fast_workspace(const glm5k::RecordFormat& fmt);
  void report_selection(std::vector<int32_t>& out);
  // After forward_device: rows with a logit_dest go device-to-device into their LogitsRow, the others to
  // the host buffer (cuda_sampling.cpp).
  void deliver_logits(const BatchPlan& plan, const float* dev, float* host);
  // The sampler launch on device rows (caller holds device_mutex_), tokens copied to out.
  void sample_rows_locked(const std::vector<const float*>& rows, const SamplerParams& p,
                          const std::vector<std::vector<int32_t>>& windows, const std::vector<double>& uniforms,
                          int32_t* out) const;

  ModelConfig config_;
  int32_t device_;
  DevWeights w_;
  cudaStream_t stream_ = nullptr;
  // The MoE shared expert's stream (MoeParams::shared_stream: it runs beside the router at decode sizes)
  // and its fork / join events; null when off (GLM5RT_CUDA_MOE_SIDE_STREAM=0) or without the FP8 kernels.
  cudaStream_t side_stream_ = nullptr;
  cudaEvent_t side_ev_[2] = {nullptr, nullptr};
  // Sessions on one model may step from different threads (glm5rt.h's thread rules), but the backend has
  // one stream, one set of work buffers and one graph cache: every engine entry point that touches them
  // holds this lock, so concurrent sessions are serialised instead of racing.
  mutable std::mutex device_mutex_;
  std::unique_ptr<LtGemm> lt_;
  float softmax_scale_ = 1.f, rope_factor_ = 1.f;
  DeviceBuffer inv_freq_, dequant_;
  std::unique_ptr<Work> work_;
  DeviceBuffer plan_dev_;
  void* plan_host_ = nullptr;  // pinned
  size_t plan_capacity_ = 0;
  std::map<GraphKey, cudaGraphExec_t> graphs_;
  int64_t graphs_captured_ = 0, graph_replays_ = 0;
  int32_t fp8_path_ = 0;  // 0 auto, 1 direct, 2 dequant, 3 gemm
  int32_t kernels_ = 3;   // 0 simple, 1 fast MLA, 2 fast MLA + fast indexer, 3 + moe_forward
  // fp8_gemm / moe_forward pointer tables: weight address -> table (dense weights), gate weight address
  // -> [gate, up] table (fused dense gate|up), per layer (MoE).
  DeviceBuffer fast_tables_, router_bf16_;
  std::map<const void*, Fp8Table> fp8_tables_, fp8_pair_tables_;
  std::vector<MoeTable> moe_tables_;
  bool pdl_ = false;  // programmatic dependent launch between kernels/gemm and kernels/moe kernels
  int64_t fast_moe_runs_ = 0, fp8_gemm_runs_ = 0, fp8_split_runs_ = 0, proj_group_runs_ = 0, attn_fused_runs_ = 0;
  bool attn_fuse_ = true;  // set_attention_fusion
  bool split_k_ = true;
  // Grouped attention projections on by default since the H200 run at df4b719 (decode batch 1 8K: 1.895 ->
  // 1.738 ms over 4 layers, batch 32: 7.448 -> 7.295 ms); GLM5RT_CUDA_PROJ_GROUP=0 turns them off.
  bool proj_group_ = true, proj_group_early_ = false;
  std::vector<LayerProj> proj_groups_;  // per layer (built with the fast tables)
  std::map<const void*, SplitWeight> fp8_split_;
  int64_t split_max_sn_ = 0;  // largest slices x n (partials buffer)
  std::map<std::pair<int64_t, int32_t>, SplitPlan> split_plans_;
  bool stage_timing_ = false, in_attention_ = false;
  // [2 L + 2]: start, then after each layer's attention and MLP, end; then a pool for the attention
  // projections' (begin, end) pairs of the last enqueued forward (kept for the graph it was captured in).
  std::vector<cudaEvent_t> stage_ev_;
  std::vector<std::pair<int32_t, int32_t>> stage_spans_;
  size_t stage_next_ = 0;
  bool mla_dims_ok_ = false, idx_dims_ok_ = false;
  int32_t num_sms_ = 0;
  // Decided per forward (part of the graph key): which fast families run, and on which cache.
  bool use_fast_mla_ = false, use_fast_idx_ = false;
  std::vector<FastGroup> groups_;
  // Batched attention over several caches (set_batch_attention): groups_ still lists the runs (graph key,
  // workspace), but each fast kernel runs once over all rows with the per-sequence pool tables below.
  bool batch_attn_ = true, multi_pool_ = false;
  const void* mla_pools_dev_ = nullptr;  // [seqs] kernels::MlaPool (latent records of each sequence's cache)
  const void* key_pools_dev_ = nullptr;  // [seqs] kernels::indexer::KeyPool (indexer keys)
  int32_t plan_seqs_ = 0;                // entries of the two tables
  DeviceBuffer mla_ws_, topk_ws_;
  const int32_t* row_len_dev_ = nullptr;    // [rows] pos + 1 (fast indexer)
  const int32_t* bt_padded_dev_ = nullptr;  // [seqs, bt_stride_] block tables (fast indexer)
  int32_t bt_stride_ = 0;
  const BatchPlan* plan_ = nullptr;         // during an eager forward (probe reports)
  int64_t last_n_out_ = 0;
  glm5k::BatchRows rows_{};
  const int32_t* logit_rows_dev_ = nullptr;
  const int32_t* tokens_dev_ = nullptr;
  const std::vector<int32_t>* forced_sel_ = nullptr;  // ForwardProbe::force_topk of the layer being enqueued
  std::vector<int32_t>* own_sel_ = nullptr;
  ForwardProbe* probe_ = nullptr;  // during enqueue_mlp of an eager forward with a probe
  // Device sampler buffers (grown on demand; never part of a captured graph).
  mutable DeviceBuffer sample_ws_, sample_io_;
};

}  // namespace cuda
}  // namespace glm5rt

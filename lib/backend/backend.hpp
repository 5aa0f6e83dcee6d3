// The Backend interface: what the backend-neutral engine (lib/engine/) asks of a compute backend. The
// CPU reference backend (backend/cpu/) and the CUDA backend implement it.
//
// Design rules, so that a GPU backend can keep weights and cache records in device memory and capture
// decode steps in graphs:
// - one forward() call per batch: the engine never calls per-op virtual functions;
// - the batch is described up front by a plain BatchPlan (tokens, positions, per-sequence block tables,
//   the physical slot every new row writes, which rows need logits), so a backend can upload it once;
// - cache records live in backend memory (CacheStorage), created by the backend, addressed by slots
//   (slot = page * page_size + offset, see cache/page_pool.hpp); the engine only manages pages.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/sampler_params.hpp"
#include "model/config.hpp"

namespace glm5rt {

// Backend memory holding the cache records of one session, for every layer: the MLA latent record
// (kv_lora_rank + qk_rope_head_dim values) and the indexer key (index_head_dim values) per slot.
class CacheStorage {
 public:
  virtual ~CacheStorage() = default;
  virtual int64_t n_pages() const = 0;
  virtual int32_t page_size() const = 0;
};

// One row of vocab_size float32 logits in backend memory (Backend::create_logits_row), owned by one
// session (forks get their own copy), so that no other session's forward overwrites it.
class LogitsRow {
 public:
  virtual ~LogitsRow() = default;
};

// One sequence's part of a batch: rows first_row .. first_row + n_new - 1 of the plan, at positions
// n_past .. n_past + n_new - 1 of the sequence.
struct SequencePlan {
  CacheStorage* cache = nullptr;
  std::vector<int32_t> block_table;  // pages covering at least positions [0, n_past + n_new)
  int64_t n_past = 0;                // tokens whose records are already in the cache
  int64_t n_new = 0;
  int64_t first_row = 0;
};

struct BatchPlan {
  std::vector<SequencePlan> seqs;
  // One entry per row; rows of one sequence are consecutive and in position order.
  std::vector<int32_t> tokens;
  std::vector<int64_t> positions;
  std::vector<int32_t> seq_of_row;
  std::vector<int64_t> slots;       // physical slot where the row's records are written
  std::vector<int64_t> logit_rows;  // rows whose logits forward() returns, in this order (repeats allowed)
  // Empty, or one entry per logit_rows entry: where non-null, that row's logits go to this LogitsRow in
  // backend memory instead of the host buffer (its part of the host buffer is left as it was). Only for
  // backends with device_logits().
  std::vector<LogitsRow*> logit_dest;

  int64_t n_rows() const { return static_cast<int64_t>(tokens.size()); }
  // Appends a sequence's rows (positions n_past..) and fills their slots from the block table.
  void add_sequence(CacheStorage* cache, std::vector<int32_t> block_table, int32_t page_size, int64_t n_past,
                    const int32_t* tokens, int64_t n_new);
};

// Optional internals for tests (the CPU backend fills it; others may leave it empty).
struct ForwardProbe {
  // [layer] rows x hidden_size: output of decoder layer L (the last one after the final norm)
  std::vector<std::vector<float>> hidden;
  // [layer] rows x index_topk: selected positions, ascending, -1 padded; empty for layers that reuse
  // the previous layer's selection
  std::vector<std::vector<int32_t>> topk;
  // Input, for tests of lower-precision backends: when force_topk[L] is not empty (rows x index_topk,
  // ascending, -1 padded), layer L attends to these positions instead of its own indexer's selection
  // (the indexer still runs and writes its keys; topk[L] still reports its own choice). This separates
  // arithmetic precision from near-tie flips of the discrete top-k. The CPU backend ignores it.
  std::vector<std::vector<int32_t>> force_topk;
  // [layer] rows x num_experts_per_tok: the experts each row chose (ascending) and their weights; empty
  // for dense layers (-1 / 0 where fewer experts were eligible).
  std::vector<std::vector<int32_t>> experts;
  std::vector<std::vector<float>> expert_weights;
  // Input, like force_topk: MoE layers use these experts and weights instead of their own routing
  // (near-ties of the router flip under bf16 upstream). The CPU backend ignores it.
  std::vector<std::vector<int32_t>> force_experts;
  std::vector<std::vector<float>> force_expert_weights;
  // Opt-in (tests of the indexer kernels on a real model's indexer): when report_indexer_inputs is true,
  // for every layer that runs its own indexer (where topk[L] is filled; empty for the others), the
  // indexer's inputs:
  //   indexer_q[L] rows x index_n_heads x index_head_dim: the query after its rope, as the score uses it;
  //   indexer_k[L] rows x index_head_dim: the key each row wrote to the cache (after LayerNorm and rope);
  //   indexer_w[L] rows x index_n_heads: the head weights with every scale folded in (weights_proj(h) *
  //   index_n_heads^-0.5 * index_head_dim^-0.5), so that the score of row t against position s is
  //   sum_h indexer_w[t][h] * relu(indexer_q[t][h] . indexer_k[s]) (equal to the CPU's own score up to
  //   float32 rounding of the reassociated scale).
  // Left untouched when the flag is false. The CPU backend fills them; the CUDA backend ignores the flag.
  bool report_indexer_inputs = false;
  std::vector<std::vector<float>> indexer_q, indexer_k, indexer_w;
};

// Record formats of a cache, GLM5RT_DTYPE_* codes (AUTO: the backend's default: float32 on the CPU,
// bf16 on CUDA). Chosen per session (glm5rt_session_params cache_dtype / index_cache_dtype).
struct CacheDtypes {
  int32_t latent = -1;  // GLM5RT_DTYPE_AUTO
  int32_t index = -1;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const char* name() const = 0;
  virtual int32_t kind() const = 0;  // GLM5RT_BACKEND_CPU or GLM5RT_BACKEND_CUDA
  virtual const ModelConfig& config() const = 0;

  // Bytes of one token's records over all layers, and a whole page of them. Error(unsupported) for
  // record formats the backend does not have.
  virtual int64_t cache_bytes_per_token(const CacheDtypes& dtypes = {}) const = 0;
  int64_t cache_page_bytes(int32_t page_size, const CacheDtypes& dtypes = {}) const {
    return cache_bytes_per_token(dtypes) * page_size;
  }
  // Error(unsupported) for unsupported formats, Error(out_of_memory) when the pool does not fit.
  virtual std::unique_ptr<CacheStorage> create_cache(int64_t n_pages, int32_t page_size,
                                                     const CacheDtypes& dtypes = {}) = 0;
  // Bytes a new session's cache may take when its params set no budget (0: no limit). The CUDA backend
  // answers a fraction of the device's free memory, so that a default session (max_tokens = the model's
  // context) does not ask for more than the card has.
  virtual int64_t default_cache_budget() const { return 0; }

  // One forward over the batch: writes every row's records at its slot in every layer (records are
  // written once, never recomputed), runs the decoder over all rows, and stores the logits of
  // plan.logit_rows into logits (logit_rows.size() x vocab_size floats). should_stop (may be empty) is
  // polled between layers; when it returns true forward throws Error(cancelled). On any throw the
  // records of this batch may be partly written: they lie beyond the sequences' committed lengths.
  virtual void forward(const BatchPlan& plan, float* logits, const std::function<bool()>& should_stop,
                       ForwardProbe* probe) = 0;

  // Copy-on-write of a shared page (Session::fork): every layer's records of page src into page dst.
  virtual void copy_page(CacheStorage& cache, int32_t src, int32_t dst) const = 0;

  // Snapshot support: the records of positions [0, n) of one sequence as float32, per token all
  // layers, per layer [latent (kv_lora_rank + qk_rope_head_dim) | indexer key (index_head_dim)].
  int64_t record_floats_per_token() const;
  virtual void export_records(const CacheStorage& cache, const std::vector<int32_t>& block_table, int64_t n,
                              float* out) const = 0;
  virtual void import_records(CacheStorage& cache, const std::vector<int32_t>& block_table, int64_t n,
                              const float* in) const = 0;

  // Device-resident logits. Backends that answer false (the CPU backend) return every logit row to the
  // host, and the engine samples with engine/sampler.cpp; the functions below then throw
  // Error(internal).
  virtual bool device_logits() const { return false; }
  // A row of vocab_size floats (Error(out_of_memory) when it does not fit).
  virtual std::unique_ptr<LogitsRow> create_logits_row();
  // Copies a row to the host (vocab_size floats), waiting for the forward that wrote it.
  virtual void read_logits(const LogitsRow& row, float* out) const;
  virtual void copy_logits(const LogitsRow& src, LogitsRow& dst) const;
  // One token per row with engine/sampler.cpp's semantics (p already validated): windows[i] holds row
  // i's penalty window (penalty_window()), uniforms[i] the value sample_token would draw from that
  // session's RNG (read only when p.temperature > 0). Rows may belong to different sessions.
  virtual void sample_logits(const std::vector<const LogitsRow*>& rows, const SamplerParams& p,
                             const std::vector<std::vector<int32_t>>& windows, const std::vector<double>& uniforms,
                             int32_t* out) const;
};

}  // namespace glm5rt

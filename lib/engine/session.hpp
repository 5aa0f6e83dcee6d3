// A session: one sequence on a model: its tokens, its pages of the paged cache (block table over a page
// pool sized from the session's budget), the logits of its last position and its sampling RNG.
//
// Every call either succeeds or leaves the session exactly as it was: pages are allocated before any
// computation (a full cache is Status::cache_full), and on an error or a cancel the new pages are given
// back and tokens/logits/RNG are not touched. Cache records are written once per token and never
// recomputed (truncate recomputes only the new last position to get its logits).
//
// fork() makes a second session that shares the pages of the first (the page pool and the backend cache
// are shared by the family, and so is the budget); a shared page that one of them must write into (the
// partly filled last page) is copied first (copy-on-write).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "cache/page_pool.hpp"
#include "engine/rng.hpp"
#include "engine/sampler.hpp"

namespace glm5rt {

class Model;

struct SessionParams {
  int64_t max_tokens = 0;   // 0: the model's context length
  int64_t cache_bytes = 0;  // 0: enough for max_tokens
  int32_t page_size = 64;
  int32_t cache_dtype = -1;        // GLM5RT_DTYPE_*: CPU float32 only; CUDA bf16 (AUTO) or FP8_E4M3
  int32_t index_cache_dtype = -1;
  int32_t prefill_chunk = 512;
  uint64_t seed = 0x5eed;
};

class Session {
 public:
  static std::shared_ptr<Session> create(std::shared_ptr<const Model> model, const SessionParams& params);

  const Model& model() const { return *model_; }
  const SessionParams& params() const { return params_; }
  int64_t max_tokens() const { return max_tokens_; }
  int64_t n_pages_budget() const { return state_.pool->n_pages(); }
  const std::vector<int32_t>& block_table() const { return state_.table.pages; }
  int32_t page_refcount(int32_t page) const { return state_.pool->refcount(page); }

  // A new session with the same tokens, logits and RNG state, sharing this session's pages (no copy).
  std::shared_ptr<Session> fork() const;

  // Appends tokens (in forwards of at most prefill_chunk tokens) and computes the logits of the last
  // position; all_logits (may be null) receives n x vocab floats, written only on success.
  void append(const int32_t* tokens, size_t n, float* all_logits);
  // Several sessions in one forward per chunk; results equal appending to each alone. all_logits may be
  // empty or hold a (possibly null) pointer per session. On error no session changes.
  static void append_batch(const std::vector<Session*>& sessions, const std::vector<const int32_t*>& tokens,
                           const std::vector<size_t>& n_tokens, const std::vector<float*>& all_logits);

  // The logits of the last position (Status::state when the session holds no tokens). On a backend that
  // keeps logits on its device they are copied to the host on the first call after a forward.
  const std::vector<float>& logits() const;
  // Whether the last position's logits sit in the backend's memory (then sample/step sample there).
  bool logits_on_device() const { return state_.device_valid; }
  const std::vector<int32_t>& tokens() const { return state_.tokens; }
  int64_t n_tokens() const { return static_cast<int64_t>(state_.tokens.size()); }

  // Samples with the session's RNG: on the backend's device when the logits are there (one uniform drawn
  // from the RNG exactly as sample_token draws it; see kernels/sampling/sampling.h for where a device
  // token can differ from sampler.cpp's), else on the host with sample_token.
  int32_t sample(const SamplerParams& p);
  int32_t step(const SamplerParams& p);
  // Samples one token for each session with its own RNG (device rows in one call) and appends them in one
  // forward.
  static std::vector<int32_t> step_batch(const std::vector<Session*>& sessions, const SamplerParams& p);
  static std::vector<int32_t> sample_batch(const std::vector<Session*>& sessions, const SamplerParams& p);

  void reset();
  void truncate(int64_t n_keep);
  void set_seed(uint64_t seed) { state_.rng.reseed(seed); }
  const Rng& rng() const { return state_.rng; }

  // Async-signal-safe: stores a flag that the running (or next) compute call polls between layers and
  // chunks; it is cleared when a compute call returns.
  void cancel() { cancel_.store(true, std::memory_order_relaxed); }
  bool cancel_requested() const { return cancel_.load(std::memory_order_relaxed); }
  void clear_cancel() { cancel_.store(false, std::memory_order_relaxed); }

  // Snapshots (engine/snapshot.cpp): tokens, cache records, logits and RNG, zstd-compressed.
  void save_file(const std::string& path) const;
  void load_file(const std::string& path);

  ~Session();

 private:
  // The logits of the last position live on the host (logits_on_host), in the backend's memory
  // (device_logits: backends with Backend::device_logits(), after a forward), or both (a device row that
  // was read). With tokens, at least one of the two is valid.
  struct State {
    std::shared_ptr<PagePool> pool;       // shared with forks
    std::shared_ptr<CacheStorage> cache;  // shared with forks
    BlockTable table;
    std::vector<int32_t> tokens;
    mutable std::vector<float> logits;  // host copy, filled lazily from the device row by logits()
    mutable bool logits_on_host = false;
    std::unique_ptr<LogitsRow> device_logits;  // this session's own row (never shared with forks)
    bool device_valid = false;
    std::unique_ptr<LogitsRow> device_spare;  // the next forward writes here; swapped in on commit
    Rng rng;
  };

  Session() = default;
  State fresh_state() const;  // an empty cache with this session's budget
  static void release_pages(State& st);
  Backend& backend() const;
  // A spare device row for the next forward's logits (backends with device logits only).
  LogitsRow* spare_row();
  // Commit of a forward's last-position logits: the device row written to spare_row(), or a host row.
  void commit_device_logits();
  void commit_host_logits(std::vector<float>&& row);
  void clear_logits();
  // Samples on the host from logits() (sampler.cpp).
  int32_t sample_on_host(const SamplerParams& p);
  // The argument checks of sample_batch / step_batch (sessions given, none NULL, sampler valid), then the
  // sessions' RNG states, to restore when the call fails.
  static std::vector<Rng> checked_rng_states(const std::vector<Session*>& sessions, const SamplerParams& p);

  std::shared_ptr<const Model> model_;
  SessionParams params_;
  int64_t max_tokens_ = 0;
  State state_;
  std::atomic<bool> cancel_{false};

  friend struct SnapshotIo;
};

}  // namespace glm5rt

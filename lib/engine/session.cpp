#include "engine/session.hpp"

#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "engine/model.hpp"
#include "runtime/error.hpp"

namespace glm5rt {

namespace {
// Clears the cancel flags of the sessions of a compute call when it returns, however it returns.
struct ClearCancelOnExit {
  const std::vector<Session*>& sessions;
  ~ClearCancelOnExit() {
    for (auto* s : sessions) s->clear_cancel();
  }
};
}  // namespace

std::shared_ptr<Session> Session::create(std::shared_ptr<const Model> model, const SessionParams& p) {
  require(model != nullptr, Status::invalid_argument, "model must not be NULL");
  const ModelConfig& c = model->config();
  require(p.page_size > 0 && p.page_size <= 65536, Status::invalid_argument, "page_size must be in [1, 65536], got ",
          p.page_size);
  require(p.prefill_chunk > 0, Status::invalid_argument, "prefill_chunk must be > 0, got ", p.prefill_chunk);
  require(p.max_tokens >= 0, Status::invalid_argument, "max_tokens must be >= 0, got ", p.max_tokens);
  require(p.cache_bytes >= 0, Status::invalid_argument, "cache_bytes must be >= 0, got ", p.cache_bytes);
  require(p.max_tokens <= c.max_position_embeddings, Status::invalid_argument, "max_tokens ", p.max_tokens,
          " exceeds the model's context length ", c.max_position_embeddings);
  // The record formats are the backend's to accept (Error(unsupported) otherwise), checked before anything
  // is allocated.
  model->backend()->cache_bytes_per_token({p.cache_dtype, p.index_cache_dtype});
  std::shared_ptr<Session> s(new Session());
  s->model_ = std::move(model);
  s->params_ = p;
  s->max_tokens_ = p.max_tokens > 0 ? p.max_tokens : c.max_position_embeddings;
  s->state_ = s->fresh_state();
  s->state_.rng.reseed(p.seed);
  return s;
}

Session::~Session() { release_pages(state_); }

void Session::release_pages(State& st) {
  if (st.pool)
    for (int32_t p : st.table.pages) st.pool->release(p);
  st.table.pages.clear();
}

std::shared_ptr<Session> Session::fork() const {
  std::shared_ptr<Session> f(new Session());
  if (state_.device_valid) {  // the fork gets its own device row, so that their forwards stay apart
    f->state_.device_logits = backend().create_logits_row();
    backend().copy_logits(*state_.device_logits, *f->state_.device_logits);
    f->state_.device_valid = true;
  }
  f->model_ = model_;
  f->params_ = params_;
  f->max_tokens_ = max_tokens_;
  f->state_.pool = state_.pool;
  f->state_.cache = state_.cache;
  for (int32_t p : state_.table.pages) state_.pool->retain(p);
  f->state_.table = state_.table;
  f->state_.tokens = state_.tokens;
  if (state_.logits_on_host) {
    f->state_.logits = state_.logits;
    f->state_.logits_on_host = true;
  }
  f->state_.rng = state_.rng;
  return f;
}

Backend& Session::backend() const { return *model_->backend(); }

Session::State Session::fresh_state() const {
  const int32_t ps = params_.page_size;
  int64_t n_pages = (max_tokens_ + ps - 1) / ps;
  const CacheDtypes dtypes{params_.cache_dtype, params_.index_cache_dtype};
  const int64_t page_bytes = backend().cache_page_bytes(ps, dtypes);
  int64_t budget = params_.cache_bytes;
  if (budget == 0) budget = backend().default_cache_budget();  // 0: no limit
  if (budget > 0) n_pages = std::min(n_pages, budget / page_bytes);
  State st;
  st.pool = std::make_shared<PagePool>(n_pages);
  st.cache = backend().create_cache(n_pages, ps, dtypes);
  st.rng = state_.rng;
  return st;
}

const std::vector<float>& Session::logits() const {
  require(!state_.tokens.empty(), Status::state, "the session holds no tokens, so there are no logits yet");
  if (!state_.logits_on_host) {  // lazily from the device row the last forward wrote
    require(state_.device_valid, Status::internal, "the session's logits are nowhere");
    state_.logits.resize(static_cast<size_t>(backend().config().vocab_size));
    backend().read_logits(*state_.device_logits, state_.logits.data());
    state_.logits_on_host = true;
  }
  return state_.logits;
}

LogitsRow* Session::spare_row() {
  if (!state_.device_spare) state_.device_spare = backend().create_logits_row();
  return state_.device_spare.get();
}

void Session::commit_device_logits() {
  std::swap(state_.device_logits, state_.device_spare);
  state_.device_valid = true;
  state_.logits_on_host = false;  // the host vector keeps its capacity for the next read
}

void Session::commit_host_logits(std::vector<float>&& row) {
  state_.logits = std::move(row);
  state_.logits_on_host = true;
  state_.device_valid = false;
}

void Session::clear_logits() {
  state_.logits.clear();
  state_.logits_on_host = false;
  state_.device_valid = false;
}

void Session::append(const int32_t* tokens, size_t n, float* all_logits) {
  append_batch({this}, {tokens}, {n}, {all_logits});
}

void Session::append_batch(const std::vector<Session*>& sessions, const std::vector<const int32_t*>& tokens,
                           const std::vector<size_t>& n_tokens, const std::vector<float*>& all_logits) {
  ClearCancelOnExit clear{sessions};
  const size_t S = sessions.size();
  require(S > 0, Status::invalid_argument, "no sessions given");
  require(tokens.size() == S && n_tokens.size() == S && (all_logits.empty() || all_logits.size() == S),
          Status::invalid_argument, "one token list per session is needed");
  std::unordered_set<const Session*> distinct;
  for (size_t i = 0; i < S; ++i) {
    require(sessions[i] != nullptr, Status::invalid_argument, "session ", i, " is NULL");
    require(distinct.insert(sessions[i]).second, Status::invalid_argument, "session ", i,
            " appears twice in one batch");
    require(&sessions[i]->backend() == &sessions[0]->backend(), Status::invalid_argument, "session ", i,
            " belongs to another model than session 0");
    require(n_tokens[i] == 0 || tokens[i] != nullptr, Status::invalid_argument, "the tokens of session ", i,
            " are NULL");
  }
  Backend& be = sessions[0]->backend();
  const int64_t V = be.config().vocab_size;
  // Backends with device logits keep each session's last-position row on the device (in a spare row of
  // the session, swapped in on commit); rows asked for through all_logits still come to the host.
  const bool on_device = be.device_logits();
  for (size_t i = 0; i < S; ++i)
    for (size_t j = 0; j < n_tokens[i]; ++j)
      require(tokens[i][j] >= 0 && tokens[i][j] < V, Status::invalid_argument, "token ", tokens[i][j],
              " (session ", i, ", index ", j, ") is outside the vocabulary [0, ", V, ")");

  // 1. Pages first: a full cache fails here, before anything is computed or changed.
  std::vector<std::vector<int32_t>> new_pages(S), tables(S);
  std::vector<int32_t> unshared(S, -1);  // a shared page replaced by its private copy (copy-on-write)
  auto give_back = [&] {
    for (size_t i = 0; i < S; ++i)
      for (int32_t p : new_pages[i]) sessions[i]->state_.pool->release(p);
  };
  try {
    for (size_t i = 0; i < S; ++i) {
      Session& s = *sessions[i];
      if (n_tokens[i] == 0) continue;
      require(n_tokens[i] <= static_cast<size_t>(s.max_tokens_), Status::cache_full, "appending ", n_tokens[i],
              " tokens exceeds the session's max_tokens ", s.max_tokens_);
      const int64_t total = s.n_tokens() + static_cast<int64_t>(n_tokens[i]);
      require(total <= s.max_tokens_, Status::cache_full, "the session would hold ", total,
              " tokens, its max_tokens is ", s.max_tokens_);
      const int32_t ps = s.params_.page_size;
      PagePool& pool = *s.state_.pool;
      tables[i] = s.state_.table.pages;
      const int64_t n0 = s.n_tokens();
      if (n0 % ps != 0 && pool.refcount(tables[i][n0 / ps]) > 1) {
        // The partly filled last page is shared with a fork: write into a private copy of it.
        const int32_t copy = pool.allocate(1)[0];
        new_pages[i].push_back(copy);
        be.copy_page(*s.state_.cache, tables[i][n0 / ps], copy);
        unshared[i] = tables[i][n0 / ps];
        tables[i][n0 / ps] = copy;
      }
      const int64_t need = (total + ps - 1) / ps - static_cast<int64_t>(tables[i].size());
      if (need > 0) {
        auto more = pool.allocate(need);
        new_pages[i].insert(new_pages[i].end(), more.begin(), more.end());
        tables[i].insert(tables[i].end(), more.begin(), more.end());
      }
      if (on_device) s.spare_row();
    }

    // 2. Forwards of at most prefill_chunk tokens per session; rows are independent, so chunking and
    // batching do not change any result.
    std::vector<std::vector<float>> staged(S), last(S);
    std::vector<size_t> done(S, 0);
    for (size_t i = 0; i < S; ++i)
      if (!all_logits.empty() && all_logits[i]) staged[i].resize(n_tokens[i] * V);
    auto stop = [&] {
      for (auto* s : sessions)
        if (s->cancel_requested()) return true;
      return false;
    };
    std::vector<float> buf;
    for (;;) {
      BatchPlan plan;
      // per logit row: (session, index in its tokens; -1: the last position for the host; -2: the last
      // position into the session's spare device row)
      std::vector<std::pair<size_t, int64_t>> out_of;
      auto to_device = [&](size_t i, int64_t row) {
        plan.logit_rows.push_back(row);
        plan.logit_dest.resize(plan.logit_rows.size() - 1, nullptr);
        plan.logit_dest.push_back(sessions[i]->state_.device_spare.get());
        out_of.push_back({i, -2});
      };
      std::vector<size_t> take(S, 0);
      for (size_t i = 0; i < S; ++i) {
        Session& s = *sessions[i];
        take[i] = std::min(n_tokens[i] - done[i], static_cast<size_t>(s.params_.prefill_chunk));
        if (take[i] == 0) continue;
        const int64_t first_row = plan.n_rows();
        plan.add_sequence(s.state_.cache.get(), tables[i], s.params_.page_size, s.n_tokens() + static_cast<int64_t>(done[i]),
                          tokens[i] + done[i], static_cast<int64_t>(take[i]));
        const bool finishes = done[i] + take[i] == n_tokens[i];
        const int64_t last_row = first_row + static_cast<int64_t>(take[i]) - 1;
        if (!staged[i].empty()) {
          for (size_t j = 0; j < take[i]; ++j) {
            plan.logit_rows.push_back(first_row + static_cast<int64_t>(j));
            out_of.push_back({i, static_cast<int64_t>(done[i] + j)});
          }
          if (finishes && on_device) to_device(i, last_row);  // the last row once more, kept on the device
        } else if (finishes) {
          if (on_device) {
            to_device(i, last_row);
          } else {
            plan.logit_rows.push_back(last_row);
            out_of.push_back({i, -1});
          }
        }
      }
      if (!plan.logit_dest.empty()) plan.logit_dest.resize(plan.logit_rows.size(), nullptr);
      if (plan.n_rows() == 0) break;
      if (stop()) fail(Status::cancelled, "cancelled");
      // Host room only when some row comes to the host (device rows leave their part untouched).
      const bool any_host = std::any_of(out_of.begin(), out_of.end(), [](const auto& o) { return o.second != -2; });
      if (any_host) buf.assign(plan.logit_rows.size() * V, 0.0f);
      else buf.clear();
      be.forward(plan, any_host ? buf.data() : nullptr, stop, nullptr);
      for (size_t k = 0; k < out_of.size(); ++k) {
        const auto [i, idx] = out_of[k];
        if (idx == -2) continue;  // stayed on the device
        const float* row = &buf[k * V];
        if (idx >= 0) std::memcpy(&staged[i][idx * V], row, V * sizeof(float));
        if (!on_device && (idx < 0 || static_cast<size_t>(idx) + 1 == n_tokens[i])) last[i].assign(row, row + V);
      }
      for (size_t i = 0; i < S; ++i) done[i] += take[i];
    }

    // 3. Commit (nothing below throws).
    for (size_t i = 0; i < S; ++i) {
      if (n_tokens[i] == 0) continue;
      State& st = sessions[i]->state_;
      if (unshared[i] >= 0) st.pool->release(unshared[i]);
      st.table.pages = std::move(tables[i]);
      st.tokens.insert(st.tokens.end(), tokens[i], tokens[i] + n_tokens[i]);
      if (on_device) sessions[i]->commit_device_logits();
      else sessions[i]->commit_host_logits(std::move(last[i]));
      if (!staged[i].empty()) std::memcpy(all_logits[i], staged[i].data(), staged[i].size() * sizeof(float));
    }
  } catch (...) {
    give_back();
    throw;
  }
}

int32_t Session::sample_on_host(const SamplerParams& p) {
  const auto& l = logits();
  return sample_token(l.data(), static_cast<int64_t>(l.size()), p, state_.tokens, state_.rng);
}

int32_t Session::sample(const SamplerParams& p) { return sample_batch({this}, p)[0]; }

std::vector<Rng> Session::checked_rng_states(const std::vector<Session*>& sessions, const SamplerParams& p) {
  require(!sessions.empty(), Status::invalid_argument, "no sessions given");
  for (size_t i = 0; i < sessions.size(); ++i) require(sessions[i] != nullptr, Status::invalid_argument, "session ", i, " is NULL");
  validate(p);
  std::vector<Rng> saved;
  for (auto* s : sessions) saved.push_back(s->state_.rng);
  return saved;
}

std::vector<int32_t> Session::sample_batch(const std::vector<Session*>& sessions, const SamplerParams& p) {
  const std::vector<Rng> saved = checked_rng_states(sessions, p);
  try {
    std::vector<int32_t> next(sessions.size());
    std::vector<size_t> on_device;
    for (size_t i = 0; i < sessions.size(); ++i) {
      if (sessions[i]->state_.device_valid) on_device.push_back(i);
      else next[i] = sessions[i]->sample_on_host(p);
    }
    if (!on_device.empty()) {
      Backend& be = sessions[on_device[0]]->backend();
      std::vector<const LogitsRow*> rows;
      std::vector<std::vector<int32_t>> windows;
      std::vector<double> uniforms;
      for (size_t i : on_device) {
        Session& s = *sessions[i];
        require(&s.backend() == &be, Status::invalid_argument, "session ", i, " belongs to another model than session ",
                on_device[0]);
        rows.push_back(s.state_.device_logits.get());
        windows.push_back(penalty_window(p, s.state_.tokens));
        // sample_token draws one uniform, and only when it samples (temperature > 0).
        uniforms.push_back(p.temperature > 0.0f ? s.state_.rng.uniform() : 0.0);
      }
      std::vector<int32_t> toks(on_device.size());
      be.sample_logits(rows, p, windows, uniforms, toks.data());
      for (size_t k = 0; k < on_device.size(); ++k) next[on_device[k]] = toks[k];
    }
    return next;
  } catch (...) {
    for (size_t i = 0; i < sessions.size(); ++i) sessions[i]->state_.rng = saved[i];
    throw;
  }
}

int32_t Session::step(const SamplerParams& p) { return step_batch({this}, p)[0]; }

std::vector<int32_t> Session::step_batch(const std::vector<Session*>& sessions, const SamplerParams& p) {
  const std::vector<Rng> saved = checked_rng_states(sessions, p);
  try {
    std::vector<int32_t> next = sample_batch(sessions, p);
    std::vector<const int32_t*> toks;
    for (auto& t : next) toks.push_back(&t);
    append_batch(sessions, toks, std::vector<size_t>(sessions.size(), 1), {});
    return next;
  } catch (...) {
    for (size_t i = 0; i < sessions.size(); ++i) sessions[i]->state_.rng = saved[i];
    throw;
  }
}

void Session::reset() {
  release_pages(state_);
  state_.tokens.clear();
  clear_logits();
}

void Session::truncate(int64_t n_keep) {
  const int64_t n = n_tokens();
  require(n_keep >= 0 && n_keep <= n, Status::invalid_argument, "n_keep must be in [0, ", n, "], got ", n_keep);
  if (n_keep == n) return;
  if (n_keep == 0) {
    reset();
    return;
  }
  // The logits of the new last position: run that one token again. Its records are rewritten with the
  // very same values (a deterministic function of the token and the records before it).
  std::vector<Session*> self{this};
  ClearCancelOnExit clear{self};
  const int32_t ps = params_.page_size;
  PagePool& pool = *state_.pool;
  std::vector<int32_t> table = state_.table.pages;
  const size_t last = static_cast<size_t>((n_keep - 1) / ps);
  int32_t copy = -1;
  if (pool.refcount(table[last]) > 1) {  // copy-on-write: the page is shared with a fork
    copy = pool.allocate(1)[0];
    backend().copy_page(*state_.cache, table[last], copy);
    table[last] = copy;
  }
  const bool on_device = backend().device_logits();
  std::vector<float> l(on_device ? 0 : backend().config().vocab_size);
  try {
    BatchPlan plan;
    const int32_t tok = state_.tokens[n_keep - 1];
    plan.add_sequence(state_.cache.get(), table, ps, n_keep - 1, &tok, 1);
    plan.logit_rows = {0};
    if (on_device) plan.logit_dest = {spare_row()};
    backend().forward(plan, l.data(), [this] { return cancel_requested(); }, nullptr);
  } catch (...) {
    if (copy >= 0) pool.release(copy);
    throw;
  }
  if (copy >= 0) pool.release(state_.table.pages[last]);
  const size_t keep_pages = last + 1;
  for (size_t i = keep_pages; i < table.size(); ++i) pool.release(table[i]);
  table.resize(keep_pages);
  state_.table.pages = std::move(table);
  state_.tokens.resize(static_cast<size_t>(n_keep));
  if (on_device) commit_device_logits();
  else commit_host_logits(std::move(l));
}

}  // namespace glm5rt

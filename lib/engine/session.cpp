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
  f->model_ = model_;
  f->params_ = params_;
  f->max_tokens_ = max_tokens_;
  f->state_.pool = state_.pool;
  f->state_.cache = state_.cache;
  for (int32_t p : state_.table.pages) state_.pool->retain(p);
  f->state_.table = state_.table;
  f->state_.tokens = state_.tokens;
  f->state_.logits = state_.logits;
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
  return state_.logits;
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
      std::vector<std::pair<size_t, int64_t>> out_of;  // per logit row: (session, index in its tokens or -1)
      std::vector<size_t> take(S, 0);
      for (size_t i = 0; i < S; ++i) {
        Session& s = *sessions[i];
        take[i] = std::min(n_tokens[i] - done[i], static_cast<size_t>(s.params_.prefill_chunk));
        if (take[i] == 0) continue;
        const int64_t first_row = plan.n_rows();
        plan.add_sequence(s.state_.cache.get(), tables[i], s.params_.page_size, s.n_tokens() + static_cast<int64_t>(done[i]),
                          tokens[i] + done[i], static_cast<int64_t>(take[i]));
        const bool finishes = done[i] + take[i] == n_tokens[i];
        if (!staged[i].empty()) {
          for (size_t j = 0; j < take[i]; ++j) {
            plan.logit_rows.push_back(first_row + static_cast<int64_t>(j));
            out_of.push_back({i, static_cast<int64_t>(done[i] + j)});
          }
        } else if (finishes) {
          plan.logit_rows.push_back(first_row + static_cast<int64_t>(take[i]) - 1);
          out_of.push_back({i, -1});
        }
      }
      if (plan.n_rows() == 0) break;
      if (stop()) fail(Status::cancelled, "cancelled");
      buf.assign(plan.logit_rows.size() * V, 0.0f);
      be.forward(plan, buf.data(), stop, nullptr);
      for (size_t k = 0; k < out_of.size(); ++k) {
        const auto [i, idx] = out_of[k];
        const float* row = &buf[k * V];
        if (idx >= 0) std::memcpy(&staged[i][idx * V], row, V * sizeof(float));
        if (idx < 0 || static_cast<size_t>(idx) + 1 == n_tokens[i]) last[i].assign(row, row + V);
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
      st.logits = std::move(last[i]);
      if (!staged[i].empty()) std::memcpy(all_logits[i], staged[i].data(), staged[i].size() * sizeof(float));
    }
  } catch (...) {
    give_back();
    throw;
  }
}

int32_t Session::sample(const SamplerParams& p) {
  const auto& l = logits();
  return sample_token(l.data(), static_cast<int64_t>(l.size()), p, state_.tokens, state_.rng);
}

int32_t Session::step(const SamplerParams& p) { return step_batch({this}, p)[0]; }

std::vector<int32_t> Session::step_batch(const std::vector<Session*>& sessions, const SamplerParams& p) {
  require(!sessions.empty(), Status::invalid_argument, "no sessions given");
  for (size_t i = 0; i < sessions.size(); ++i) require(sessions[i] != nullptr, Status::invalid_argument, "session ", i, " is NULL");
  validate(p);
  std::vector<Rng> saved;
  for (auto* s : sessions) saved.push_back(s->state_.rng);
  try {
    std::vector<int32_t> next(sessions.size());
    for (size_t i = 0; i < sessions.size(); ++i) next[i] = sessions[i]->sample(p);
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
  state_.logits.clear();
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
  std::vector<float> l(backend().config().vocab_size);
  try {
    BatchPlan plan;
    const int32_t tok = state_.tokens[n_keep - 1];
    plan.add_sequence(state_.cache.get(), table, ps, n_keep - 1, &tok, 1);
    plan.logit_rows = {0};
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
  state_.logits = std::move(l);
}

}  // namespace glm5rt

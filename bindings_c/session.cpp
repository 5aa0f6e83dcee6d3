// C ABI: sessions, sampling, batches and snapshots over glm5rt::Session. Every entry point checks its
// pointers, reads params structs through read_params (struct_size aware), and writes out-params only on
// success.
#include <vector>

#include "bindings_c/handles.hpp"
#include "bindings_c/shim.hpp"
#include "engine/model.hpp"
#include "engine/session.hpp"

using glm5rt::fail;
using glm5rt::require;
using glm5rt::Status;
using glm5rt::abi::guard;
using glm5rt::abi::require_arg;

namespace {

glm5rt::Session& session_of(const glm5rt_session* s) {
  require_arg(s, "session");
  require(s->impl != nullptr, Status::invalid_argument, "session is not a live session");
  return *s->impl;
}

glm5rt::SamplerParams sampler_of(const glm5rt_sampler_params* params) {
  const glm5rt_sampler_params p = glm5rt::abi::read_params(params, glm5rt_sampler_default_params, "params");
  glm5rt::SamplerParams out;
  out.temperature = p.temperature;
  out.top_k = p.top_k;
  out.top_p = p.top_p;
  out.min_p = p.min_p;
  out.repetition_penalty = p.repetition_penalty;
  out.penalty_last_n = p.penalty_last_n;
  return out;
}

std::vector<glm5rt::Session*> sessions_of(glm5rt_session* const* sessions, size_t n) {
  require_arg(sessions, "sessions");
  require(n > 0, Status::invalid_argument, "n_sessions must be > 0");
  std::vector<glm5rt::Session*> out;
  for (size_t i = 0; i < n; ++i) {
    require(sessions[i] != nullptr && sessions[i]->impl != nullptr, Status::invalid_argument, "sessions[", i,
            "] is NULL");
    out.push_back(sessions[i]->impl.get());
  }
  return out;
}

}  // namespace

extern "C" {

GLM5RT_API glm5rt_status glm5rt_session_create(glm5rt_model* model, const glm5rt_session_params* params,
                                               glm5rt_session** out_session) {
  return guard(__func__, [&] {
    require_arg(model, "model");
    require_arg(out_session, "out_session");
    require(model->impl != nullptr, Status::invalid_argument, "model is not a loaded model");
    const glm5rt_session_params p = glm5rt::abi::read_params(params, glm5rt_session_default_params, "params");
    glm5rt::SessionParams sp;
    sp.max_tokens = p.max_tokens;
    sp.cache_bytes = p.cache_bytes;
    sp.page_size = p.page_size;
    sp.cache_dtype = p.cache_dtype;
    sp.index_cache_dtype = p.index_cache_dtype;
    sp.prefill_chunk = p.prefill_chunk;
    sp.seed = p.seed;
    auto handle = std::make_unique<glm5rt_session>();
    handle->impl = glm5rt::Session::create(model->impl, sp);
    *out_session = handle.release();
  });
}

GLM5RT_API void glm5rt_session_free(glm5rt_session* session) { delete session; }

GLM5RT_API glm5rt_status glm5rt_session_append(glm5rt_session* session, const int32_t* tokens, size_t n_tokens,
                                               float* all_logits) {
  return guard(__func__, [&] {
    auto& s = session_of(session);
    require(n_tokens == 0 || tokens != nullptr, Status::invalid_argument, "tokens must not be NULL");
    s.append(tokens, n_tokens, all_logits);
  });
}

GLM5RT_API glm5rt_status glm5rt_session_logits(glm5rt_session* session, const float** out_logits,
                                               int32_t* out_n_vocab) {
  return guard(__func__, [&] {
    auto& s = session_of(session);
    require_arg(out_logits, "out_logits");
    const auto& l = s.logits();
    *out_logits = l.data();
    if (out_n_vocab) *out_n_vocab = static_cast<int32_t>(l.size());
  });
}

GLM5RT_API int64_t glm5rt_session_n_tokens(const glm5rt_session* session) {
  if (session == nullptr || session->impl == nullptr) return 0;
  return session->impl->n_tokens();
}

GLM5RT_API glm5rt_status glm5rt_session_tokens(const glm5rt_session* session, int32_t* tokens, size_t capacity,
                                               size_t* out_n_tokens) {
  return guard(__func__, [&] {
    const auto& t = session_of(session).tokens();
    glm5rt::abi::write_sized(t.data(), t.size(), tokens, capacity, out_n_tokens, "the session's tokens");
  });
}

GLM5RT_API glm5rt_status glm5rt_session_reset(glm5rt_session* session) {
  return guard(__func__, [&] { session_of(session).reset(); });
}

GLM5RT_API glm5rt_status glm5rt_session_truncate(glm5rt_session* session, int64_t n_keep) {
  return guard(__func__, [&] { session_of(session).truncate(n_keep); });
}

GLM5RT_API glm5rt_status glm5rt_session_set_seed(glm5rt_session* session, uint64_t seed) {
  return guard(__func__, [&] { session_of(session).set_seed(seed); });
}

GLM5RT_API void glm5rt_session_cancel(glm5rt_session* session) {
  // Only an atomic store: safe from any thread and from signal handlers.
  if (session != nullptr && session->impl != nullptr) session->impl->cancel();
}

GLM5RT_API glm5rt_status glm5rt_session_sample(glm5rt_session* session, const glm5rt_sampler_params* params,
                                               int32_t* out_token) {
  return guard(__func__, [&] {
    auto& s = session_of(session);
    require_arg(out_token, "out_token");
    const auto sp = sampler_of(params);
    *out_token = s.sample(sp);
  });
}

GLM5RT_API glm5rt_status glm5rt_session_step(glm5rt_session* session, const glm5rt_sampler_params* params,
                                             int32_t* out_token) {
  return guard(__func__, [&] {
    auto& s = session_of(session);
    require_arg(out_token, "out_token");
    const auto sp = sampler_of(params);
    *out_token = s.step(sp);
  });
}

GLM5RT_API glm5rt_status glm5rt_batch_step(glm5rt_session* const* sessions, size_t n_sessions,
                                           const glm5rt_sampler_params* params, int32_t* out_tokens) {
  return guard(__func__, [&] {
    auto ss = sessions_of(sessions, n_sessions);
    require_arg(out_tokens, "out_tokens");
    const auto sp = sampler_of(params);
    const auto next = glm5rt::Session::step_batch(ss, sp);
    std::copy(next.begin(), next.end(), out_tokens);
  });
}

GLM5RT_API glm5rt_status glm5rt_batch_append(glm5rt_session* const* sessions, size_t n_sessions,
                                             const int32_t* const* tokens, const size_t* n_tokens) {
  return guard(__func__, [&] {
    auto ss = sessions_of(sessions, n_sessions);
    require_arg(tokens, "tokens");
    require_arg(n_tokens, "n_tokens");
    std::vector<const int32_t*> t(tokens, tokens + n_sessions);
    std::vector<size_t> n(n_tokens, n_tokens + n_sessions);
    glm5rt::Session::append_batch(ss, t, n, {});
  });
}

GLM5RT_API glm5rt_status glm5rt_session_save_file(const glm5rt_session* session, const char* path) {
  return guard(__func__, [&] {
    const auto& s = session_of(session);
    require_arg(path, "path");
    s.save_file(path);
  });
}

GLM5RT_API glm5rt_status glm5rt_session_load_file(glm5rt_session* session, const char* path) {
  return guard(__func__, [&] {
    auto& s = session_of(session);
    require_arg(path, "path");
    s.load_file(path);
  });
}

}  // extern "C"

// Sessions on the CUDA backend keep the last position's logits on the device and sample there
// (Session::sample / step / step_batch through Backend::sample_logits). On the demo model:
// - every device-sampled step gives the token sample_token gives on the logits fetched to the host
//   (Session::logits, what glm5rt_session_logits returns) with the same RNG state, and consumes the RNG
//   the same way; greedy, temperature + top-k/top-p/min-p and a repetition penalty;
// - step_batch over several sessions equals the same per session;
// - a fork gets its own device row (equal logits, equal next tokens, untouched by the parent's steps);
// - a snapshot of a device-resident session restores the same logits and the next token;
// - truncate recomputes the new last row on the device.
#ifdef GLM5RT_GPU_TESTS_WITH_CORE
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include "engine/model.hpp"
#include "engine/session.hpp"
#include "fixture/fixture_support.hpp"

using namespace glm5rt;

namespace {

std::shared_ptr<Model> cuda_demo() {
  ModelOptions opt;
  opt.backend = GLM5RT_BACKEND_CUDA;
  auto model = Model::load(fixture::data_dir("glm5-demo"), opt);
  REQUIRE(model->backend_kind() == GLM5RT_BACKEND_CUDA);
  return model;
}

std::vector<SamplerParams> param_sets() {
  std::vector<SamplerParams> v(4);
  v[1].temperature = 0.9f;
  v[1].top_k = 40;
  v[1].top_p = 0.95f;
  v[2].temperature = 1.3f;
  v[2].min_p = 0.02f;
  v[2].repetition_penalty = 1.3f;
  v[2].penalty_last_n = 16;
  v[3].temperature = 1.0f;  // the whole vocabulary
  return v;
}

// The token sample_token gives on the session's (host-fetched) logits with a copy of its RNG.
int32_t host_expectation(const Session& s, const SamplerParams& p, Rng& rng) {
  const auto& l = s.logits();
  return sample_token(l.data(), static_cast<int64_t>(l.size()), p, s.tokens(), rng);
}

SessionParams small_params(uint64_t seed) {
  SessionParams sp;
  sp.max_tokens = 256;
  sp.page_size = 16;
  sp.seed = seed;
  return sp;
}

}  // namespace

TEST_CASE("cuda device sampling: steps equal sample_token on the fetched logits") {
  auto model = cuda_demo();
  auto ref = fixture::load_reference("glm5-demo", model->config().num_hidden_layers);
  const auto sets = param_sets();
  for (size_t k = 0; k < sets.size(); ++k) {
    CAPTURE(k);
    auto s = Session::create(model, small_params(1234 + k));
    s->append(ref.prompt.data(), ref.prompt.size(), nullptr);
    int equal = 0;
    const int steps = 16;
    for (int i = 0; i < steps; ++i) {
      REQUIRE(s->logits_on_device());
      Rng rng = s->rng();
      const int32_t expect = host_expectation(*s, sets[k], rng);  // fetches the row (stays on the device too)
      REQUIRE(s->logits_on_device());
      const int32_t got = s->step(sets[k]);
      CHECK(got == expect);
      CHECK(s->rng().state() == rng.state());
      equal += got == expect;
    }
    std::printf("[device-sampling] set %zu: %d/%d steps equal to sample_token on the fetched logits\n", k, equal, steps);
    if (k == 0) {  // greedy on the device still gives the reference's first generated tokens
      const size_t m = std::min<size_t>(8, ref.generated.size());
      const auto first = s->tokens().begin() + static_cast<std::ptrdiff_t>(ref.prompt.size());
      CHECK(std::vector<int32_t>(first, first + m) == std::vector<int32_t>(ref.generated.begin(), ref.generated.begin() + m));
    }
  }
}

TEST_CASE("cuda device sampling: step_batch equals each session sampled on the host") {
  auto model = cuda_demo();
  auto ref = fixture::load_reference("glm5-demo", model->config().num_hidden_layers);
  SamplerParams p;
  p.temperature = 0.8f;
  p.top_k = 100;
  p.repetition_penalty = 1.1f;
  std::vector<std::shared_ptr<Session>> owned;
  std::vector<Session*> ss;
  for (int i = 0; i < 3; ++i) {
    owned.push_back(Session::create(model, small_params(77 + i)));
    owned.back()->append(ref.prompt.data(), ref.prompt.size() - 2 * i, nullptr);
    ss.push_back(owned.back().get());
  }
  for (int step = 0; step < 8; ++step) {
    std::vector<int32_t> expect;
    std::vector<Rng> rngs;
    for (auto* s : ss) {
      rngs.push_back(s->rng());
      expect.push_back(host_expectation(*s, p, rngs.back()));
    }
    const auto got = Session::step_batch(ss, p);
    CHECK(got == expect);
    for (size_t i = 0; i < ss.size(); ++i) CHECK(ss[i]->rng().state() == rngs[i].state());
  }
}

TEST_CASE("cuda device sampling: logits after a device-sampled step, fork, snapshot, truncate") {
  auto model = cuda_demo();
  auto ref = fixture::load_reference("glm5-demo", model->config().num_hidden_layers);
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_p = 0.9f;
  auto a = Session::create(model, small_params(5));
  a->append(ref.prompt.data(), ref.prompt.size(), nullptr);
  for (int i = 0; i < 4; ++i) a->step(p);
  REQUIRE(a->logits_on_device());

  // The row logits() returns after a device-sampled step is the last position's: equal (within the
  // prefill-vs-decode kernel differences) to a fresh session's prefill over the same tokens.
  auto fresh = Session::create(model, small_params(5));
  fresh->append(a->tokens().data(), a->tokens().size(), nullptr);
  const double rel = fixture::relative_error(a->logits(), fresh->logits());
  std::printf("[device-sampling] logits after device steps vs a fresh prefill: rel %.3e\n", rel);
  CHECK(rel <= 2e-2);

  // Fork: its own device row, equal to the parent's; the same RNG gives the same next token.
  const std::vector<float> before = a->logits();
  auto f = a->fork();
  CHECK(f->logits_on_device());
  CHECK(f->logits() == before);
  const int32_t ta = a->sample(p), tf = f->sample(p);
  CHECK(ta == tf);
  for (int i = 0; i < 3; ++i) a->step(p);  // the parent's forwards must not touch the fork's row
  CHECK(f->logits() == before);
  Rng rf = f->rng();
  const int32_t expect_f = host_expectation(*f, p, rf);
  CHECK(f->step(p) == expect_f);

  // Snapshot: the device row is saved; the restored session (logits on the host until its next forward)
  // samples the same token as the original with the same RNG.
  const std::string path = (std::filesystem::temp_directory_path() / "glm5rt_device_sampling.snap").string();
  a->save_file(path);
  auto b = Session::create(model, small_params(99));
  b->load_file(path);
  std::filesystem::remove(path);
  CHECK(b->logits() == a->logits());
  CHECK(!b->logits_on_device());
  CHECK(b->rng().state() == a->rng().state());
  const int32_t t1 = a->step(p), t2 = b->step(p);
  CHECK(t1 == t2);
  CHECK(b->logits_on_device());
  CHECK(a->tokens() == b->tokens());

  // Truncate: the new last row is recomputed on the device and equals the row seen at that length.
  const int64_t n = a->n_tokens();
  auto c = Session::create(model, small_params(5));
  c->append(a->tokens().data(), static_cast<size_t>(n - 3), nullptr);
  a->truncate(n - 3);
  CHECK(a->logits_on_device());
  const double rel_t = fixture::relative_error(a->logits(), c->logits());
  std::printf("[device-sampling] truncate: rel %.3e against a prefill of the kept tokens\n", rel_t);
  CHECK(rel_t <= 2e-2);
  a->reset();
  CHECK(!a->logits_on_device());
  CHECK_THROWS(a->logits());
}
#endif

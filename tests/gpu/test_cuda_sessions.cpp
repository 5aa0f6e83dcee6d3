// Sessions on the CUDA backend as the C ABI promises them: several sessions of one model stepped from
// several threads at once give what the same sessions give stepped one after another (the backend has one
// stream, one set of work buffers and one graph cache, so it must serialise, not race), and a fork shares
// its parent's pages with copy-on-write on the device (CudaBackend::copy_page).
#ifdef GLM5RT_GPU_TESTS_WITH_CORE
#include <doctest/doctest.h>

#include <thread>

#include "engine/model.hpp"
#include "engine/session.hpp"
#include "fixture/fixture_support.hpp"

using namespace glm5rt;

namespace {

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<float> logits;
};

// Prompt i: a different prefix of the demo's reference prompt, then 12 greedy steps.
Outcome run_session(const std::shared_ptr<Model>& model, const std::vector<int32_t>& prompt, size_t len) {
  SessionParams sp;
  sp.max_tokens = 256;
  sp.page_size = 16;
  auto s = Session::create(model, sp);
  s->append(prompt.data(), len, nullptr);
  Outcome o;
  SamplerParams greedy;
  for (int i = 0; i < 12; ++i) o.tokens.push_back(s->step(greedy));
  o.logits = s->logits();
  return o;
}

std::shared_ptr<Model> cuda_demo() {
  ModelOptions opt;
  opt.backend = GLM5RT_BACKEND_CUDA;
  auto model = Model::load(fixture::data_dir("glm5-demo"), opt);
  REQUIRE(model->backend_kind() == GLM5RT_BACKEND_CUDA);
  return model;
}

}  // namespace

TEST_CASE("cuda sessions: four threads stepping their own sessions equal the sessions run one by one") {
  auto model = cuda_demo();
  auto ref = fixture::load_reference("glm5-demo", model->config().num_hidden_layers);
  const size_t lens[4] = {ref.prompt.size(), ref.prompt.size() - 2, ref.prompt.size() - 4, 5};
  Outcome sequential[4], concurrent[4];
  for (int i = 0; i < 4; ++i) sequential[i] = run_session(model, ref.prompt, lens[i]);
  std::vector<std::thread> threads;
  std::string errors[4];
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      try {
        concurrent[i] = run_session(model, ref.prompt, lens[i]);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 4; ++i) {
    CAPTURE(i);
    CHECK(errors[i] == "");
    CHECK(concurrent[i].tokens == sequential[i].tokens);
    REQUIRE(concurrent[i].logits.size() == sequential[i].logits.size());
    const double rel = fixture::relative_error(concurrent[i].logits, sequential[i].logits);
    std::printf("[threads] session %d: %zu tokens equal: %s, last logits rel %.3e\n", i,
                concurrent[i].tokens.size(), concurrent[i].tokens == sequential[i].tokens ? "yes" : "no", rel);
    CHECK(rel <= 1e-3);
  }
}

TEST_CASE("cuda sessions: a fork shares pages and copies the shared last page before writing it") {
  auto model = cuda_demo();
  auto ref = fixture::load_reference("glm5-demo", model->config().num_hidden_layers);
  SessionParams sp;
  sp.max_tokens = 256;
  sp.page_size = 16;
  auto a = Session::create(model, sp);
  const size_t head = 11;  // the first page stays partly filled, so the fork must copy it on write
  a->append(ref.prompt.data(), head, nullptr);
  auto f = a->fork();
  CHECK(f->block_table() == a->block_table());
  const std::vector<int32_t> other = {100, 200, 300};
  f->append(other.data(), other.size(), nullptr);
  CHECK(f->block_table()[0] != a->block_table()[0]);

  // The fork equals a fresh session over the same tokens; the parent, continued with the prompt, still
  // equals a fresh session over the prompt (its page was not written by the fork).
  std::vector<int32_t> f_tokens(ref.prompt.begin(), ref.prompt.begin() + head);
  f_tokens.insert(f_tokens.end(), other.begin(), other.end());
  auto fresh_f = Session::create(model, sp);
  fresh_f->append(f_tokens.data(), f_tokens.size(), nullptr);
  a->append(ref.prompt.data() + head, ref.prompt.size() - head, nullptr);
  auto fresh_a = Session::create(model, sp);
  fresh_a->append(ref.prompt.data(), ref.prompt.size(), nullptr);
  const double rel_f = fixture::relative_error(f->logits(), fresh_f->logits());
  const double rel_a = fixture::relative_error(a->logits(), fresh_a->logits());
  std::printf("[fork] fork vs fresh rel %.3e, parent vs fresh rel %.3e\n", rel_f, rel_a);
  CHECK(rel_f <= 2e-2);
  CHECK(rel_a <= 2e-2);
  SamplerParams greedy;
  std::vector<int32_t> got;
  for (int i = 0; i < 8; ++i) got.push_back(a->step(greedy));
  CHECK(got == std::vector<int32_t>(ref.generated.begin(), ref.generated.begin() + 8));
}
#endif

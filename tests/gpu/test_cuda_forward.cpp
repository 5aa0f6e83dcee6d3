// The CUDA backend against the float32 CPU backend on every fixture and the demo model, teacher-forced:
// prompt + generated_ids in one forward, logits at every position. bf16 activations and weights on the
// GPU, so the bar is max |diff| / max |ref| <= 2e-2 and equal argmax wherever the CPU's top-2 gap is
// larger than 5% of its logit range. Indexer top-k agreement per layer is reported (bf16 flips near-ties).
// Also: greedy generation through the engine (CUDA graphs on decode steps) against generated_ids,
// FP8 cache records, snapshot records round trip, backend selection errors.
#ifdef GLM5RT_GPU_TESTS_WITH_CORE
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "backend/backend.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cuda/cuda_backend.hpp"
#include "engine/model.hpp"
#include "engine/session.hpp"
#include "fixture/fixture_support.hpp"
#include "model/checkpoint.hpp"
#include "runtime/error.hpp"

using namespace glm5rt;

namespace {

struct Run {
  std::vector<float> logits;
  ForwardProbe probe;
};

// force: a CPU run whose top-k selections and MoE routing the GPU run adopts (nullptr: free run).
Run teacher_forced(Backend& be, const std::vector<int32_t>& tokens, const CacheDtypes& dt = {},
                   const ForwardProbe* force = nullptr) {
  const int64_t N = static_cast<int64_t>(tokens.size()), V = be.config().vocab_size;
  const int32_t ps = 16;
  const int64_t n_pages = (N + ps - 1) / ps + 1;
  auto cache = be.create_cache(n_pages, ps, dt);
  std::vector<int32_t> bt;
  for (int64_t p = n_pages - 1; p >= 1; --p) bt.push_back(static_cast<int32_t>(p));  // scrambled pages
  BatchPlan plan;
  plan.add_sequence(cache.get(), bt, ps, 0, tokens.data(), N);
  for (int64_t r = 0; r < N; ++r) plan.logit_rows.push_back(r);
  Run run;
  if (force) {
    run.probe.force_topk = force->topk;
    run.probe.force_experts = force->experts;
    run.probe.force_expert_weights = force->expert_weights;
  }
  run.logits.assign(N * V, NAN);  // poisoned: every value must be written
  be.forward(plan, run.logits.data(), {}, &run.probe);
  return run;
}

struct Agreement {
  double rel = 0;          // max |diff| / max |ref|
  int64_t nan = 0;
  int64_t argmax_checked = 0, argmax_mismatch = 0;
};

Agreement compare_logits(const std::vector<float>& gpu, const std::vector<float>& cpu, int64_t V) {
  Agreement a;
  double diff = 0, ref = 0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    if (!std::isfinite(gpu[i])) ++a.nan;
    diff = std::max(diff, std::fabs(static_cast<double>(gpu[i]) - cpu[i]));
    ref = std::max(ref, std::fabs(static_cast<double>(cpu[i])));
  }
  a.rel = a.nan ? INFINITY : diff / ref;
  const int64_t N = static_cast<int64_t>(cpu.size()) / V;
  for (int64_t r = 0; r < N; ++r) {
    const float* c = &cpu[r * V];
    const float* g = &gpu[r * V];
    const int64_t ca = std::max_element(c, c + V) - c, ga = std::max_element(g, g + V) - g;
    float second = -INFINITY;
    for (int64_t i = 0; i < V; ++i)
      if (i != ca) second = std::max(second, c[i]);
    const float range = c[ca] - *std::min_element(c, c + V);
    if (c[ca] - second > 0.05f * range) {
      ++a.argmax_checked;
      if (ca != ga) ++a.argmax_mismatch;
    }
  }
  return a;
}

// Per layer: fraction of rows whose selected sets are identical, and the mean overlap |A n B| / |A|.
void report_topk(const std::string& name, const ForwardProbe& gpu, const ForwardProbe& cpu, int64_t N, int64_t k) {
  for (size_t l = 0; l < cpu.topk.size(); ++l) {
    if (cpu.topk[l].empty()) {
      CHECK(gpu.topk[l].empty());
      continue;
    }
    REQUIRE(gpu.topk[l].size() == cpu.topk[l].size());
    int64_t same = 0;
    double overlap = 0;
    for (int64_t r = 0; r < N; ++r) {
      std::set<int32_t> a, b;
      for (int64_t i = 0; i < k; ++i) {
        if (cpu.topk[l][r * k + i] >= 0) a.insert(cpu.topk[l][r * k + i]);
        if (gpu.topk[l][r * k + i] >= 0) b.insert(gpu.topk[l][r * k + i]);
      }
      CHECK(a.size() == b.size());
      int64_t both = 0;
      for (int32_t t : a) both += b.count(t);
      overlap += a.empty() ? 1.0 : static_cast<double>(both) / a.size();
      same += a == b;
      // ascending, -1 padded, like the CPU
      for (int64_t i = 1; i < k; ++i) {
        const int32_t p = gpu.topk[l][r * k + i - 1], q = gpu.topk[l][r * k + i];
        if (q >= 0) CHECK(p < q);
      }
    }
    std::printf("[topk] %-20s layer %zu: identical sets %lld/%lld rows, mean overlap %.4f\n", name.c_str(), l,
                static_cast<long long>(same), static_cast<long long>(N), overlap / N);
    CHECK(overlap / N > 0.5);  // a sanity floor: bf16 scores flip near-ties, the numbers above are the report
  }
}

// Per MoE layer: rows whose expert sets are identical.
void report_routing(const std::string& name, const ForwardProbe& gpu, const ForwardProbe& cpu, int64_t N, int64_t K) {
  for (size_t l = 0; l < cpu.experts.size(); ++l) {
    if (cpu.experts[l].empty()) continue;
    REQUIRE(gpu.experts[l].size() == cpu.experts[l].size());
    int64_t same = 0;
    for (int64_t r = 0; r < N; ++r)
      same += std::equal(cpu.experts[l].begin() + r * K, cpu.experts[l].begin() + (r + 1) * K, gpu.experts[l].begin() + r * K);
    std::printf("[route] %-20s layer %zu: identical expert sets %lld/%lld rows\n", name.c_str(), l,
                static_cast<long long>(same), static_cast<long long>(N));
  }
}

}  // namespace

// Free-running, the GPU's bf16 arithmetic flips near-ties of two discrete choices: the indexer's top-k
// (the fixtures' smallest gaps are ~1e-5 relative: README; one flipped token of a top-8 changes a row's
// attention entirely) and the router's top-k experts. So the free run is reported (logits, top-k and
// routing agreement per layer), and the 2e-2 / argmax bar is checked with the CPU's selections and
// expert choices forced into the GPU run (ForwardProbe::force_*): that isolates the arithmetic.
TEST_CASE("cuda forward: teacher-forced logits agree with the CPU backend on every fixture") {
  for (const auto& name : fixture::all_fixtures()) {
    CAPTURE(name);
    auto ck = Checkpoint::open(fixture::data_dir(name));
    const ModelConfig& c = ck->config();
    auto ref = fixture::load_reference(name, c.num_hidden_layers);
    std::vector<int32_t> tokens = ref.prompt;
    tokens.insert(tokens.end(), ref.generated.begin(), ref.generated.end());
    const int64_t N = static_cast<int64_t>(tokens.size()), V = c.vocab_size;
    auto cpu = make_cpu_backend(c, ck->weights(), 2);
    auto gpu = make_cuda_backend(c, ck->weights(), 0);
    const Run rc = teacher_forced(*cpu, tokens);
    auto print = [&](const char* what, const Agreement& a) {
      std::printf("[logits] %-20s %-22s rel %.3e, argmax differs on %lld of %lld decisive rows, %lld non-finite\n",
                  name.c_str(), what, a.rel, static_cast<long long>(a.argmax_mismatch),
                  static_cast<long long>(a.argmax_checked), static_cast<long long>(a.nan));
    };
    // 1. Free run: reported.
    const Run rg = teacher_forced(*gpu, tokens);
    const Agreement a = compare_logits(rg.logits, rc.logits, V);
    print("free, bf16 cache:", a);
    CHECK(a.nan == 0);
    report_topk(name, rg.probe, rc.probe, N, c.index_topk);
    report_routing(name, rg.probe, rc.probe, N, c.num_experts_per_tok);
    // 2. The CPU's top-k selections and expert choices forced: the bar.
    const Run rf = teacher_forced(*gpu, tokens, {}, &rc.probe);
    const Agreement af = compare_logits(rf.logits, rc.logits, V);
    print("forced, bf16:", af);
    CHECK(af.nan == 0);
    CHECK(af.rel <= 2e-2);
    CHECK(af.argmax_mismatch == 0);
    for (size_t l = 0; l < rc.probe.hidden.size(); ++l)
      std::printf("[hidden] %-20s forced, layer %zu: rel %.3e (free run %.3e)\n", name.c_str(), l,
                  fixture::relative_error(rf.probe.hidden[l], rc.probe.hidden[l]),
                  fixture::relative_error(rg.probe.hidden[l], rc.probe.hidden[l]));
    // 3. FP8 records (the 656-byte latent layout, 132-byte keys at GLM-5 sizes), CPU selection forced.
    const Run r8 = teacher_forced(*gpu, tokens, {GLM5RT_DTYPE_FP8_E4M3, GLM5RT_DTYPE_FP8_E4M3}, &rc.probe);
    const Agreement a8 = compare_logits(r8.logits, rc.logits, V);
    print("forced, FP8 cache:", a8);
    CHECK(a8.nan == 0);
    CHECK(a8.rel <= 1e-1);
  }
}

TEST_CASE("cuda forward: greedy generation through the engine equals generated_ids") {
  for (const std::string name : {"tiny-f32", "tiny-fp8", "tiny-bf16", "small-long", "glm5-demo"}) {
    CAPTURE(name);
    ModelOptions opt;
    opt.backend = GLM5RT_BACKEND_CUDA;
    auto model = Model::load(fixture::data_dir(name), opt);
    REQUIRE(model->backend_kind() == GLM5RT_BACKEND_CUDA);
    auto ref = fixture::load_reference(name, model->config().num_hidden_layers);
    SessionParams sp;
    sp.max_tokens = static_cast<int64_t>(ref.prompt.size() + ref.generated.size() + 8);
    auto s = Session::create(model, sp);
    s->append(ref.prompt.data(), ref.prompt.size(), nullptr);
    SamplerParams greedy;
    std::vector<int32_t> got;
    for (size_t i = 0; i < ref.generated.size(); ++i) got.push_back(s->step(greedy));
    size_t first_diff = got.size();
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i] != ref.generated[i]) {
        first_diff = i;
        break;
      }
    if (first_diff < got.size()) {
      const int64_t V = model->config().vocab_size;
      const float* row = &ref.decode_logits[first_diff * V];
      std::vector<float> sorted(row, row + V);
      std::sort(sorted.rbegin(), sorted.rend());
      std::printf("[greedy] %-12s diverges at step %zu of %zu: gpu %d, reference %d; reference top-2 gap %.4g "
                  "(logit range %.4g)\n",
                  name.c_str(), first_diff, got.size(), got[first_diff], ref.generated[first_diff],
                  sorted[0] - sorted[1], sorted[0] - sorted[V - 1]);
    } else {
      std::printf("[greedy] %-12s all %zu tokens equal\n", name.c_str(), got.size());
    }
    auto* cb = dynamic_cast<cuda::CudaBackend*>(model->backend().get());
    REQUIRE(cb != nullptr);
    std::printf("[greedy] %-12s graphs captured %lld, replayed %lld\n", name.c_str(),
                static_cast<long long>(cb->graphs_captured()), static_cast<long long>(cb->graph_replays()));
    CHECK(cb->graph_replays() > 0);
    // Divergence on the tiny fixtures comes from top-k near-tie flips (see above) and is reported; the
    // demo model (bf16 weights, top-k 64) must follow the reference all the way.
    if (name == "glm5-demo") CHECK(first_diff == got.size());
  }
}

TEST_CASE("cuda forward: graph replay equals an eager forward, and batched rows equal single rows") {
  auto ck = Checkpoint::open(fixture::data_dir("small-long"));
  const ModelConfig& c = ck->config();
  auto be = make_cuda_backend(c, ck->weights(), 0);
  auto ref = fixture::load_reference("small-long", c.num_hidden_layers);
  const int64_t N = static_cast<int64_t>(ref.prompt.size()), V = c.vocab_size;
  const int32_t ps = 64;
  const int64_t n_pages = (N + 8) / ps + 1;
  auto ca = be->create_cache(n_pages, ps), cb = be->create_cache(n_pages, ps);
  std::vector<int32_t> bt;
  for (int64_t p = 0; p < n_pages; ++p) bt.push_back(static_cast<int32_t>(p));
  for (auto* cache : {ca.get(), cb.get()}) {
    BatchPlan plan;
    plan.add_sequence(cache, bt, ps, 0, ref.prompt.data(), N);
    plan.logit_rows.push_back(N - 1);
    std::vector<float> l(V);
    be->forward(plan, l.data(), {}, nullptr);
  }
  // Two decode steps, each as one batch of both sequences (graph) and as eager single-sequence forwards
  // (a probe forces the eager path) on the same inputs.
  for (int step = 0; step < 3; ++step) {
    const int32_t t1 = ref.generated[step], t2 = ref.generated[step + 1];
    BatchPlan both;
    both.add_sequence(ca.get(), bt, ps, N + step, &t1, 1);
    both.add_sequence(cb.get(), bt, ps, N + step, &t2, 1);
    both.logit_rows = {0, 1};
    std::vector<float> lb(2 * V, NAN);
    be->forward(both, lb.data(), {}, nullptr);
    // Recompute row 1 eagerly: its record is rewritten with the same values.
    BatchPlan one;
    one.add_sequence(cb.get(), bt, ps, N + step, &t2, 1);
    one.logit_rows = {0};
    std::vector<float> l1(V, NAN);
    ForwardProbe probe;
    be->forward(one, l1.data(), {}, &probe);
    // cuBLASLt may pick another algorithm for 1 row than for 2 (another summation order): close, not
    // necessarily bitwise.
    const double e = fixture::relative_error(l1.data(), lb.data() + V, V);
    CAPTURE(step);
    CHECK(e < 2e-3);
    for (int64_t i = 0; i < 2 * V; ++i) REQUIRE(std::isfinite(lb[i]));
  }
  auto* cbk = dynamic_cast<cuda::CudaBackend*>(be.get());
  CHECK(cbk->graphs_captured() >= 1);
  CHECK(cbk->graph_replays() >= 1);
}

TEST_CASE("cuda forward: snapshot records round trip (bf16 and FP8 records)") {
  auto ck = Checkpoint::open(fixture::data_dir("tiny-f32"));
  const ModelConfig& c = ck->config();
  auto be = make_cuda_backend(c, ck->weights(), 0);
  auto ref = fixture::load_reference("tiny-f32", c.num_hidden_layers);
  const int64_t N = static_cast<int64_t>(ref.prompt.size());
  for (CacheDtypes dt : {CacheDtypes{}, CacheDtypes{GLM5RT_DTYPE_FP8_E4M3, GLM5RT_DTYPE_FP8_E4M3}}) {
    const int32_t ps = 8;
    const int64_t n_pages = (N + ps - 1) / ps;
    auto a = be->create_cache(n_pages, ps, dt), b = be->create_cache(n_pages, ps, dt);
    std::vector<int32_t> bt;
    for (int64_t p = n_pages - 1; p >= 0; --p) bt.push_back(static_cast<int32_t>(p));
    BatchPlan plan;
    plan.add_sequence(a.get(), bt, ps, 0, ref.prompt.data(), N);
    plan.logit_rows.push_back(N - 1);
    std::vector<float> l(c.vocab_size);
    be->forward(plan, l.data(), {}, nullptr);
    const int64_t rec = be->record_floats_per_token();
    std::vector<float> r1(N * rec, NAN), r2(N * rec, NAN);
    be->export_records(*a, bt, N, r1.data());
    be->import_records(*b, bt, N, r1.data());
    be->export_records(*b, bt, N, r2.data());
    // FP8: re-encoding decoded values may move a group's scale by an ulp ((448 s) / 448), hence 1e-6.
    int64_t bad = 0;
    for (int64_t i = 0; i < N * rec; ++i)
      bad += !(std::isfinite(r1[i]) && std::fabs(r1[i] - r2[i]) <= 1e-6f * std::fabs(r1[i]));
    CHECK(bad == 0);
  }
}

TEST_CASE("cuda backend: selection and errors") {
  ModelOptions opt;
  opt.backend = GLM5RT_BACKEND_CUDA;
  opt.device_index = 1000;
  CHECK_THROWS_AS(Model::load(fixture::data_dir("tiny-f32"), opt), Error);
  try {
    Model::load(fixture::data_dir("tiny-f32"), opt);
  } catch (const Error& e) {
    CHECK(e.status() == Status::no_device);
  }
  opt.device_index = 0;
  opt.backend = GLM5RT_BACKEND_AUTO;
  auto m = Model::load(fixture::data_dir("tiny-f32"), opt);
  CHECK(m->backend_kind() == GLM5RT_BACKEND_CUDA);
  // The CUDA backend keeps bf16 or FP8 records; float32 records are the CPU's.
  SessionParams sp;
  sp.cache_dtype = GLM5RT_DTYPE_F32;
  CHECK_THROWS_AS(Session::create(m, sp), Error);
  // A cache larger than the card is out_of_memory, not a crash.
  try {
    m->backend()->create_cache(int64_t{1} << 34, 64);
    CHECK(false);
  } catch (const Error& e) {
    CHECK(e.status() == Status::out_of_memory);
  }
}
#endif

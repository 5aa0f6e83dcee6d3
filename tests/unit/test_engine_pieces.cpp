// Engine pieces on their own: the page pool, the thread pool's determinism, the sampler.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "backend/cpu/ops.hpp"
#include "cache/page_pool.hpp"
#include "engine/rng.hpp"
#include "engine/sampler.hpp"
#include "runtime/error.hpp"
#include "runtime/thread_pool.hpp"

using namespace glm5rt;

TEST_CASE("page pool: allocation, cache_full without side effects, refcounts, reuse") {
  PagePool pool(4);
  auto a = pool.allocate(3);
  CHECK(a == std::vector<int32_t>{0, 1, 2});
  CHECK(pool.n_free() == 1);
  try {
    pool.allocate(2);
    FAIL("expected cache_full");
  } catch (const Error& e) {
    CHECK(e.status() == Status::cache_full);
  }
  CHECK(pool.n_free() == 1);
  pool.retain(1);
  pool.release(1);
  CHECK(pool.n_free() == 1);  // still referenced once
  pool.release(1);
  CHECK(pool.n_free() == 2);
  CHECK(pool.allocate(2) == std::vector<int32_t>{1, 3});
  BlockTable bt{{3, 0}};
  CHECK(bt.slot(0, 16) == 48);
  CHECK(bt.slot(17, 16) == 1);
}

TEST_CASE("matmul results do not depend on the thread count or on the other rows") {
  std::mt19937 gen(1234);
  std::normal_distribution<float> nd;
  const int64_t rows = 5, in = 203, out = 301;
  std::vector<float> X(rows * in), W(out * in);
  for (auto& v : X) v = nd(gen);
  for (auto& v : W) v = nd(gen);
  std::vector<float> y1(rows * out, NAN), y3(rows * out, NAN), single(out, NAN);
  ThreadPool p1(1), p3(3);
  cpu::matmul(p1, X.data(), rows, W.data(), out, in, y1.data());
  cpu::matmul(p3, X.data(), rows, W.data(), out, in, y3.data());
  CHECK(y1 == y3);
  cpu::matmul(p3, X.data() + 2 * in, 1, W.data(), out, in, single.data());
  CHECK(std::equal(single.begin(), single.end(), y1.begin() + 2 * out));
  // and they are right
  double worst = 0;
  for (int64_t o = 0; o < out; ++o) {
    double ref = 0;
    for (int64_t i = 0; i < in; ++i) ref += static_cast<double>(X[in + i]) * W[o * in + i];
    worst = std::max(worst, std::fabs(ref - y1[out + o]));
  }
  CHECK(worst < 1e-4);
}

TEST_CASE("thread pool propagates exceptions") {
  ThreadPool pool(3);
  CHECK_THROWS_AS(pool.parallel_for(100, [](int64_t b, int64_t) {
    if (b > 40) throw Error(Status::internal, "boom");
  }), Error);
  int64_t sum = 0;
  std::vector<int64_t> parts(100, 0);
  pool.parallel_for(100, [&](int64_t b, int64_t e) { for (int64_t i = b; i < e; ++i) parts[i] = i; });
  for (auto v : parts) sum += v;
  CHECK(sum == 4950);
}

TEST_CASE("sampler: greedy ties, seeded reproducibility, top-k / top-p / min-p / penalty") {
  std::vector<float> l = {1.0f, 3.0f, 3.0f, -2.0f, 0.5f};
  Rng rng(7);
  SamplerParams greedy;
  CHECK(sample_token(l.data(), 5, greedy, {}, rng) == 1);  // lowest id wins the tie
  SamplerParams pen;
  pen.repetition_penalty = 2.0f;
  CHECK(sample_token(l.data(), 5, pen, {1}, rng) == 2);    // 3/2 < 3
  pen.penalty_last_n = 1;
  CHECK(sample_token(l.data(), 5, pen, {2, 4, 1}, rng) == 2);  // only the last token is penalised

  SamplerParams t;
  t.temperature = 1.0f;
  t.top_k = 2;
  Rng a(42), b(42);
  std::vector<int32_t> da, db;
  for (int i = 0; i < 200; ++i) {
    da.push_back(sample_token(l.data(), 5, t, {}, a));
    db.push_back(sample_token(l.data(), 5, t, {}, b));
  }
  CHECK(da == db);
  std::map<int32_t, int> counts;
  for (auto x : da) counts[x]++;
  CHECK(counts.size() == 2);  // top-k 2: only ids 1 and 2
  CHECK(counts[1] > 50);
  CHECK(counts[2] > 50);

  std::vector<float> peaked = {0.0f, 5.0f, 4.0f, 0.0f};
  SamplerParams tp;
  tp.temperature = 1.0f;
  tp.top_p = 0.5f;  // p(1) ~ 0.72 > 0.5: only id 1 survives
  for (int i = 0; i < 50; ++i) CHECK(sample_token(peaked.data(), 4, tp, {}, a) == 1);
  SamplerParams mp;
  mp.temperature = 1.0f;
  mp.min_p = 0.5f;  // p(2)/p(1) = e^-1 < 0.5: dropped
  for (int i = 0; i < 50; ++i) CHECK(sample_token(peaked.data(), 4, mp, {}, a) == 1);
  mp.min_p = 0.3f;  // e^-1 = 0.37 >= 0.3: kept
  std::map<int32_t, int> c2;
  for (int i = 0; i < 400; ++i) c2[sample_token(peaked.data(), 4, mp, {}, a)]++;
  CHECK(c2.size() == 2);
  CHECK(c2[2] > 50);

  SamplerParams bad;
  bad.top_p = 0.0f;
  CHECK_THROWS_AS(sample_token(l.data(), 5, bad, {}, rng), Error);
  bad = SamplerParams{};
  bad.repetition_penalty = -1.0f;
  CHECK_THROWS_AS(sample_token(l.data(), 5, bad, {}, rng), Error);
}

TEST_CASE("rng: reseed repeats the stream, uniform stays below 1") {
  Rng r(99);
  const uint64_t first = r.next();
  r.reseed(99);
  CHECK(r.next() == first);
  for (int i = 0; i < 1000; ++i) {
    const double u = r.uniform();
    CHECK((u >= 0.0 && u < 1.0));
  }
}

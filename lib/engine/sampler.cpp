#include "engine/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "runtime/error.hpp"

namespace glm5rt {

void validate(const SamplerParams& p) {
  require(std::isfinite(p.temperature), Status::invalid_argument, "temperature must be finite");
  require(p.top_p > 0.0f && !std::isnan(p.top_p), Status::invalid_argument, "top_p must be > 0 (>= 1 = off), got ",
          p.top_p);
  require(p.min_p <= 1.0f && !std::isnan(p.min_p), Status::invalid_argument, "min_p must be <= 1, got ", p.min_p);
  require(p.repetition_penalty > 0.0f && std::isfinite(p.repetition_penalty), Status::invalid_argument,
          "repetition_penalty must be > 0 (1 = off), got ", p.repetition_penalty);
  require(p.penalty_last_n >= -1, Status::invalid_argument, "penalty_last_n must be >= -1, got ", p.penalty_last_n);
}

std::vector<int32_t> penalty_window(const SamplerParams& p, const std::vector<int32_t>& history) {
  if (p.repetition_penalty == 1.0f || p.penalty_last_n == 0) return {};
  const size_t n = history.size();
  const size_t window = p.penalty_last_n < 0 ? n : std::min<size_t>(n, static_cast<size_t>(p.penalty_last_n));
  return std::vector<int32_t>(history.end() - static_cast<std::ptrdiff_t>(window), history.end());
}

namespace {

// uniform() is called once, after the candidates are known, and only when sampling (temperature > 0).
template <class Uniform>
int32_t sample_impl(const float* logits, int64_t V, const SamplerParams& p, const std::vector<int32_t>& history,
                    Uniform&& uniform) {
  validate(p);
  std::vector<float> l(logits, logits + V);
  if (p.repetition_penalty != 1.0f && p.penalty_last_n != 0) {
    const size_t n = history.size();
    const size_t window = p.penalty_last_n < 0 ? n : std::min<size_t>(n, static_cast<size_t>(p.penalty_last_n));
    std::unordered_set<int32_t> seen(history.end() - static_cast<std::ptrdiff_t>(window), history.end());
    for (int32_t t : seen) {  // CTRL: shrink positive logits, push negative ones further down
      if (t < 0 || t >= V) continue;
      l[t] = l[t] > 0 ? l[t] / p.repetition_penalty : l[t] * p.repetition_penalty;
    }
  }
  if (p.temperature <= 0.0f) {
    int64_t best = 0;
    for (int64_t i = 1; i < V; ++i)
      if (l[i] > l[best]) best = i;  // strict: the lowest id wins ties
    return static_cast<int32_t>(best);
  }
  // Candidates by descending scaled logit, ties by ascending id: a total order, so draws repeat.
  std::vector<std::pair<float, int32_t>> cand(V);
  for (int64_t i = 0; i < V; ++i) cand[i] = {l[i] / p.temperature, static_cast<int32_t>(i)};
  const auto order = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t keep = static_cast<size_t>(V);
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < keep) keep = static_cast<size_t>(p.top_k);
  std::partial_sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(keep), cand.end(), order);
  cand.resize(keep);
  const float mx = cand[0].first;
  std::vector<double> prob(keep);
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) sum += prob[i] = std::exp(static_cast<double>(cand[i].first - mx));
  for (auto& q : prob) q /= sum;
  if (p.top_p < 1.0f) {
    double cum = 0;
    size_t n = 0;
    while (n < keep) {
      cum += prob[n++];
      if (cum >= p.top_p) break;
    }
    keep = std::max<size_t>(1, n);
  }
  if (p.min_p > 0.0f) {
    const double floor = p.min_p * prob[0];
    size_t n = 1;
    while (n < keep && prob[n] >= floor) ++n;
    keep = n;
  }
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += prob[i];
  const double u = uniform() * total;
  double cum = 0;
  for (size_t i = 0; i < keep; ++i) {
    cum += prob[i];
    if (u < cum) return cand[i].second;
  }
  return cand[keep - 1].second;
}

}  // namespace

int32_t sample_token(const float* logits, int64_t V, const SamplerParams& p, const std::vector<int32_t>& history,
                     Rng& rng) {
  return sample_impl(logits, V, p, history, [&] { return rng.uniform(); });
}

int32_t sample_token_with_uniform(const float* logits, int64_t V, const SamplerParams& p,
                                  const std::vector<int32_t>& history, double uniform) {
  return sample_impl(logits, V, p, history, [uniform] { return uniform; });
}

}  // namespace glm5rt

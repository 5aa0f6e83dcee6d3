#include "backend/cpu/rope.hpp"

#include <algorithm>
#include <cmath>

namespace glm5rt::cpu {

namespace {
double yarn_mscale(double scale, double m) { return scale <= 1.0 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; }

double yarn_factor(const ModelConfig& c) {
  const RopeParameters& r = c.rope;
  if (r.factor > 0) return r.factor;
  return r.original_max_position_embeddings > 0
             ? static_cast<double>(c.max_position_embeddings) / r.original_max_position_embeddings
             : 1.0;
}
}  // namespace

Rope Rope::from_config(const ModelConfig& c) {
  Rope rope;
  rope.dim = c.qk_rope_head_dim;
  const int64_t half = rope.dim / 2;
  const float base = static_cast<float>(c.rope.theta);
  // torch: base ** (arange(0, dim, 2).float() / dim), all float32
  std::vector<float> pos_freq(half);
  for (int64_t i = 0; i < half; ++i)
    pos_freq[i] = std::pow(base, static_cast<float>(2 * i) / static_cast<float>(rope.dim));
  rope.inv_freq.resize(half);
  if (c.rope.type == RopeType::default_) {
    for (int64_t i = 0; i < half; ++i) rope.inv_freq[i] = 1.0f / pos_freq[i];
    return rope;
  }
  // YaRN
  const RopeParameters& r = c.rope;
  const double factor = yarn_factor(c);
  double attention = r.attention_factor;
  if (attention <= 0) {
    attention = (r.mscale != 0 && r.mscale_all_dim != 0)
                    ? yarn_mscale(factor, r.mscale) / yarn_mscale(factor, r.mscale_all_dim)
                    : yarn_mscale(factor, 1.0);
  }
  rope.attention_factor = static_cast<float>(attention);
  const double beta_fast = r.beta_fast != 0 ? r.beta_fast : 32.0;
  const double beta_slow = r.beta_slow != 0 ? r.beta_slow : 1.0;
  const double orig = static_cast<double>(r.original_max_position_embeddings > 0 ? r.original_max_position_embeddings
                                                                                  : c.max_position_embeddings);
  const double dim = static_cast<double>(rope.dim);
  auto correction_dim = [&](double rotations) {
    return (dim * std::log(orig / (rotations * 2.0 * M_PI))) / (2.0 * std::log(c.rope.theta));
  };
  double low = correction_dim(beta_fast), high = correction_dim(beta_slow);
  if (r.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1);
  if (low == high) high += 0.001;
  const float lowf = static_cast<float>(low), span = static_cast<float>(high - low);
  const float factorf = static_cast<float>(factor);
  for (int64_t i = 0; i < half; ++i) {
    const float extrap = 1.0f / pos_freq[i];
    const float interp = 1.0f / (factorf * pos_freq[i]);
    const float ramp = std::clamp((static_cast<float>(i) - lowf) / span, 0.0f, 1.0f);
    const float e = 1.0f - ramp;  // extrapolation weight
    rope.inv_freq[i] = interp * (1.0f - e) + extrap * e;
  }
  return rope;
}

void Rope::angles(int64_t position, float* cos_out, float* sin_out) const {
  const float p = static_cast<float>(position);
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const float a = inv_freq[i] * p;  // float32 product, as torch's inv_freq @ positions
    cos_out[i] = static_cast<float>(std::cos(static_cast<double>(a))) * attention_factor;
    sin_out[i] = static_cast<float>(std::sin(static_cast<double>(a))) * attention_factor;
  }
}

void Rope::apply(float* x, int64_t dim, const float* cos, const float* sin, RopeLayout layout) {
  const int64_t half = dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const int64_t a = layout == RopeLayout::interleaved ? 2 * i : i;
    const int64_t b = layout == RopeLayout::interleaved ? 2 * i + 1 : i + half;
    const float x0 = x[a], x1 = x[b];
    x[a] = x0 * cos[i] - x1 * sin[i];
    x[b] = x1 * cos[i] + x0 * sin[i];
  }
}

float attention_softmax_scale(const ModelConfig& c, bool yarn_mscale_on) {
  double s = 1.0 / std::sqrt(static_cast<double>(c.qk_head_dim()));
  if (yarn_mscale_on && c.rope.type == RopeType::yarn && c.rope.mscale_all_dim != 0) {
    const double m = yarn_mscale(yarn_factor(c), c.rope.mscale_all_dim);
    s *= m * m;
  }
  return static_cast<float>(s);
}

}  // namespace glm5rt::cpu

// Rotary position embedding of GLM-5 (docs/GLM5.md step 4): inverse frequencies for the default and the
// YaRN rope types (transformers 5.17 _compute_yarn_parameters, computed in float32 like torch does so
// that angles match bit for bit), the attention factor that scales cos/sin, and the softmax scale.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.hpp"

namespace glm5rt::cpu {

enum class RopeLayout {
  interleaved,  // pairs (x[2i], x[2i+1]) rotate by angle i
  split_half,   // pairs (x[i], x[i + d/2]) rotate by angle i (NeoX / Llama)
};

struct Rope {
  int64_t dim = 0;             // qk_rope_head_dim
  std::vector<float> inv_freq; // dim / 2
  float attention_factor = 1;  // multiplies cos and sin

  static Rope from_config(const ModelConfig& c);
  // cos / sin of every pair at `position` (dim / 2 each), already scaled by attention_factor.
  void angles(int64_t position, float* cos_out, float* sin_out) const;
  // Rotates x (dim values) in place.
  static void apply(float* x, int64_t dim, const float* cos, const float* sin, RopeLayout layout);
};

// The attention softmax scale: qk_head_dim^-0.5, times mscale^2 for YaRN with mscale_all_dim.
float attention_softmax_scale(const ModelConfig& c, bool yarn_mscale);

}  // namespace glm5rt::cpu

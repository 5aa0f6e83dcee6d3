// Token sampling from a row of logits: repetition penalty, temperature, top-k, top-p, min-p, then one
// draw from the session's RNG (in that order, as glm5rt.h documents). temperature <= 0 is greedy:
// argmax of the (penalised) logits, the lowest id winning ties.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/rng.hpp"

namespace glm5rt {

struct SamplerParams {
  float temperature = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  int32_t penalty_last_n = 64;  // -1: the whole history
};

// Throws Error(invalid_argument) naming the field for values that make no sense.
void validate(const SamplerParams& p);

// history: the session's tokens (the penalty looks at its last penalty_last_n).
int32_t sample_token(const float* logits, int64_t n_vocab, const SamplerParams& p,
                     const std::vector<int32_t>& history, Rng& rng);

}  // namespace glm5rt

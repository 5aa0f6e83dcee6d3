// Token sampling from a row of logits: repetition penalty, temperature, top-k, top-p, min-p, then one
// draw from the session's RNG (in that order, as glm5rt.h documents). temperature <= 0 is greedy:
// argmax of the (penalised) logits, the lowest id winning ties.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/sampler_params.hpp"
#include "engine/rng.hpp"

namespace glm5rt {

// Throws Error(invalid_argument) naming the field for values that make no sense.
void validate(const SamplerParams& p);

// history: the session's tokens (the penalty looks at its last penalty_last_n).
int32_t sample_token(const float* logits, int64_t n_vocab, const SamplerParams& p,
                     const std::vector<int32_t>& history, Rng& rng);

// The same with the uniform given instead of drawn (what sample_token would draw from its RNG; read only
// when p.temperature > 0): the reference a device sampler is held to.
int32_t sample_token_with_uniform(const float* logits, int64_t n_vocab, const SamplerParams& p,
                                  const std::vector<int32_t>& history, double uniform);

// The tokens the repetition penalty looks at: the last penalty_last_n of history (all of it for -1; none
// when the penalty is off), in history order, duplicates kept.
std::vector<int32_t> penalty_window(const SamplerParams& p, const std::vector<int32_t>& history);

}  // namespace glm5rt

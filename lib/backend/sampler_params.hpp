// Sampling parameters, shared by the CPU sampler (engine/sampler.hpp) and backends that sample on their
// own device (Backend::sample_logits): repetition penalty, temperature, top-k, top-p, min-p, applied in
// that order as glm5rt.h documents.
#pragma once

#include <cstdint>

namespace glm5rt {

struct SamplerParams {
  float temperature = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  int32_t penalty_last_n = 64;  // -1: the whole history
};

}  // namespace glm5rt

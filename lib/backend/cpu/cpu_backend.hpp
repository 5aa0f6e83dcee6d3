// The float32 CPU reference backend: the whole GLM-5 forward of docs/GLM5.md over a BatchPlan, with the
// paged cache records in host memory. Exact (within float32 rounding) against transformers' fixtures.
#pragma once

#include <functional>
#include <memory>

#include "backend/backend.hpp"
#include "model/weights.hpp"

namespace glm5rt {

// Decodes the weights to float32 once (progress may return false to cancel the load).
std::unique_ptr<Backend> make_cpu_backend(const ModelConfig& config, const ModelWeights& weights, int n_threads,
                                          const std::function<bool(float)>& progress = {});

}  // namespace glm5rt

// A loaded model: the checkpoint (config + mapped weights) and, as the engine grows, the backend that
// runs it and the tokenizer. Immutable after load(), so any number of threads may share it; sessions and
// tokenizers hold a shared_ptr to it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "glm5rt/glm5rt.h"
#include "model/checkpoint.hpp"
#include "model/config.hpp"

#include "backend/backend.hpp"

namespace glm5rt {

class Tokenizer;

struct ModelOptions {
  int32_t backend = GLM5RT_BACKEND_AUTO;  // GLM5RT_BACKEND_*
  int32_t device_index = 0;               // CUDA ordinal
  int32_t n_threads = 0;                  // CPU threads, 0 = all
  std::function<bool(float)> progress;    // fraction in [0, 1]; false cancels (Status::cancelled)
  // For tests: wraps the backend load() created (e.g. to emulate a backend with device logits on the CPU).
  std::function<std::shared_ptr<Backend>(std::shared_ptr<Backend>)> wrap_backend;
};

class Model {
 public:
  // Loads the checkpoint in `dir` and picks the backend. Errors: io, format, cancelled, out_of_memory,
  // no_device (CUDA requested but this build has no CUDA or no usable device is present), device,
  // invalid_argument. AUTO takes CUDA when a usable device exists, else the CPU (with an info log line).
  static std::shared_ptr<Model> load(const std::string& dir, const ModelOptions& options);

  const ModelConfig& config() const { return checkpoint_->config(); }
  const Checkpoint& checkpoint() const { return *checkpoint_; }
  const std::string& dir() const { return dir_; }
  int32_t backend_kind() const { return backend_kind_; }  // GLM5RT_BACKEND_CPU or _CUDA: the one in use
  const ModelOptions& options() const { return options_; }
  // The compute backend (created in load(); shared so that sessions keep it alive).
  const std::shared_ptr<Backend>& backend() const { return backend_; }
  // The tokenizer of <dir>/tokenizer.json, or null when the directory has none.
  const std::shared_ptr<const Tokenizer>& tokenizer() const { return tokenizer_; }

 private:
  Model() = default;
  std::string dir_;
  ModelOptions options_;
  int32_t backend_kind_ = GLM5RT_BACKEND_CPU;
  std::unique_ptr<Checkpoint> checkpoint_;
  std::shared_ptr<Backend> backend_;  // created in load() after the checkpoint
  std::shared_ptr<const Tokenizer> tokenizer_;  // null without tokenizer.json
};

}  // namespace glm5rt

// Model loading: checkpoint first (the long part, with progress), then the backend choice.
#include "engine/model.hpp"

#include <filesystem>

#include "backend/cpu/cpu_backend.hpp"
#include "runtime/error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace glm5rt {

std::shared_ptr<Model> Model::load(const std::string& dir, const ModelOptions& options) {
  require(!dir.empty(), Status::invalid_argument, "the model directory is empty");
  require(options.n_threads >= 0, Status::invalid_argument, "n_threads must be >= 0, got ", options.n_threads);
  require(options.device_index >= 0, Status::invalid_argument, "device_index must be >= 0, got ",
          options.device_index);
  int32_t backend = GLM5RT_BACKEND_CPU;
  switch (options.backend) {
    case GLM5RT_BACKEND_AUTO:  // no CUDA backend in this build yet: AUTO means the CPU
    case GLM5RT_BACKEND_CPU:
      backend = GLM5RT_BACKEND_CPU;
      break;
    case GLM5RT_BACKEND_CUDA:
      // Checked before reading any weights: a request we cannot serve should fail fast.
      fail(Status::no_device, "this build has no CUDA backend yet (the CPU is the only backend)");
    default:
      fail(Status::invalid_argument, "unknown backend ", options.backend,
           " (GLM5RT_BACKEND_AUTO, GLM5RT_BACKEND_CPU or GLM5RT_BACKEND_CUDA)");
  }
  std::shared_ptr<Model> m(new Model());
  m->dir_ = dir;
  m->options_ = options;
  m->backend_kind_ = backend;
  // The checkpoint takes the first half of the progress range, decoding weights for the backend the rest.
  auto half = [&](float lo) -> std::function<bool(float)> {
    if (!options.progress) return {};
    return [lo, &options](float f) { return options.progress(lo + 0.5f * f); };
  };
  m->checkpoint_ = Checkpoint::open(dir, half(0.0f));
  // The tokenizer is optional (a checkpoint may ship without one); when present it must load: a broken
  // or unsupported tokenizer.json fails the model load (before the long weight decoding) rather than
  // surfacing later.
  if (std::filesystem::exists(std::filesystem::path(dir) / "tokenizer.json")) m->tokenizer_ = Tokenizer::load_dir(dir);
  m->backend_ = make_cpu_backend(m->checkpoint_->config(), m->checkpoint_->weights(), options.n_threads, half(0.5f));
  return m;
}

}  // namespace glm5rt

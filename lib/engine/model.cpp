// Model loading: checkpoint first (the long part, with progress), then the backend choice.
#include "engine/model.hpp"

#include <filesystem>

#include "backend/cpu/cpu_backend.hpp"
#include "runtime/error.hpp"
#include "runtime/log.hpp"
#include "tokenizer/tokenizer.hpp"
#ifdef GLM5RT_WITH_CUDA
#include "backend/cuda/cuda_backend.hpp"
#endif

namespace glm5rt {

std::shared_ptr<Model> Model::load(const std::string& dir, const ModelOptions& options) {
  require(!dir.empty(), Status::invalid_argument, "the model directory is empty");
  require(options.n_threads >= 0, Status::invalid_argument, "n_threads must be >= 0, got ", options.n_threads);
  require(options.device_index >= 0, Status::invalid_argument, "device_index must be >= 0, got ",
          options.device_index);
  // Checked before reading any weights: a request we cannot serve should fail fast.
  std::string why_no_cuda;
#ifdef GLM5RT_WITH_CUDA
  const bool cuda_ok = (options.backend == GLM5RT_BACKEND_AUTO || options.backend == GLM5RT_BACKEND_CUDA) &&
                       cuda_device_usable(options.device_index, &why_no_cuda);
#else
  const bool cuda_ok = false;
  why_no_cuda = "this build of libglm5rt has no CUDA backend (built without CUDA)";
#endif
  int32_t backend = GLM5RT_BACKEND_CPU;
  switch (options.backend) {
    case GLM5RT_BACKEND_AUTO:
      backend = cuda_ok ? GLM5RT_BACKEND_CUDA : GLM5RT_BACKEND_CPU;
      if (!cuda_ok) log(LogLevel::info, "backend AUTO: ", why_no_cuda, "; using the CPU backend");
      break;
    case GLM5RT_BACKEND_CPU:
      backend = GLM5RT_BACKEND_CPU;
      break;
    case GLM5RT_BACKEND_CUDA:
      require(cuda_ok, Status::no_device, "the CUDA backend was requested but ", why_no_cuda);
      backend = GLM5RT_BACKEND_CUDA;
      break;
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
#ifdef GLM5RT_WITH_CUDA
  if (backend == GLM5RT_BACKEND_CUDA)
    m->backend_ = make_cuda_backend(m->checkpoint_->config(), m->checkpoint_->weights(), options.device_index, half(0.5f));
#endif
  if (!m->backend_)
    m->backend_ = make_cpu_backend(m->checkpoint_->config(), m->checkpoint_->weights(), options.n_threads, half(0.5f));
  if (options.wrap_backend) {
    m->backend_ = options.wrap_backend(m->backend_);
    require(m->backend_ != nullptr, Status::internal, "wrap_backend returned no backend");
  }
  return m;
}

}  // namespace glm5rt

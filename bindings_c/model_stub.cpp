// Model entry points until the checkpoint loader lands ([Checkpoints]): honest UNSUPPORTED, no fake success.
#include "bindings_c/shim.hpp"

using glm5rt::fail;
using glm5rt::Status;

extern "C" {

GLM5RT_API glm5rt_status glm5rt_model_load(const char* dir, const glm5rt_model_params* params, glm5rt_model** out_model) {
  return glm5rt::abi::guard(__func__, [&] {
    glm5rt::abi::require_arg(dir, "dir");
    glm5rt::abi::require_arg(out_model, "out_model");
    glm5rt::abi::read_params(params, glm5rt_model_default_params, "params");
    fail(Status::unsupported, "checkpoint loading is not implemented yet");
  });
}

GLM5RT_API void glm5rt_model_free(glm5rt_model*) {}

GLM5RT_API glm5rt_status glm5rt_model_get_info(const glm5rt_model* model, glm5rt_model_info* info) {
  return glm5rt::abi::guard(__func__, [&] {
    glm5rt::abi::require_arg(model, "model");
    glm5rt::abi::require_arg(info, "info");
    fail(Status::unsupported, "model info is not implemented yet");
  });
}

}  // extern "C"

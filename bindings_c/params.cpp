// *_default_params(): the one place where defaults of the public params structs live.
#include <cstring>

#include "glm5rt/glm5rt.h"

extern "C" {

GLM5RT_API void glm5rt_model_default_params(glm5rt_model_params* p) {
  if (!p) return;
  std::memset(p, 0, sizeof *p);
  p->struct_size = sizeof *p;
  p->backend = GLM5RT_BACKEND_AUTO;
  p->device_index = 0;
  p->n_threads = 0;
}

GLM5RT_API void glm5rt_session_default_params(glm5rt_session_params* p) {
  if (!p) return;
  std::memset(p, 0, sizeof *p);
  p->struct_size = sizeof *p;
  p->max_tokens = 0;
  p->cache_bytes = 0;
  p->page_size = 64;
  p->cache_dtype = GLM5RT_DTYPE_AUTO;
  p->index_cache_dtype = GLM5RT_DTYPE_AUTO;
  p->prefill_chunk = 512;
  p->seed = 0x5eed;
}

GLM5RT_API void glm5rt_sampler_default_params(glm5rt_sampler_params* p) {
  if (!p) return;
  std::memset(p, 0, sizeof *p);
  p->struct_size = sizeof *p;
  p->temperature = 0.0f;
  p->top_k = 0;
  p->top_p = 1.0f;
  p->min_p = 0.0f;
  p->repetition_penalty = 1.0f;
  p->penalty_last_n = 64;
}

}  // extern "C"

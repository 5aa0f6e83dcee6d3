// C trampolines from the library's callbacks to the Go functions exported in callbacks.go. The Go
// side passes a runtime/cgo.Handle as an integer; it becomes the callbacks' void* user_data here, in
// C, so that no Go memory ever holds a pointer-typed non-pointer.
#include <stdint.h>

#include <glm5rt/glm5rt.h>

#include "_cgo_export.h"

static int32_t progress_trampoline(float fraction, void* user_data) {
    return goProgress(fraction, (uintptr_t)user_data);
}

glm5rt_status glm5rtgo_model_load(const char* dir, int32_t backend, int32_t device_index, int32_t n_threads,
                                  uintptr_t progress_handle, glm5rt_model** out_model) {
    glm5rt_model_params params;
    glm5rt_model_default_params(&params);
    params.backend = backend;
    params.device_index = device_index;
    params.n_threads = n_threads;
    if (progress_handle) {
        params.progress = progress_trampoline;
        params.progress_user_data = (void*)progress_handle;
    }
    return glm5rt_model_load(dir, &params, out_model);
}

static void log_trampoline(int32_t level, const char* line, void* user_data) {
    goLog(level, (char*)line, (uintptr_t)user_data);
}

void glm5rtgo_set_log_callback(uintptr_t handle) {
    if (handle)
        glm5rt_set_log_callback(log_trampoline, (void*)handle);
    else
        glm5rt_set_log_callback(NULL, NULL);
}

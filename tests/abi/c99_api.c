/* Compiled with -std=c99 -pedantic -Wall -Wextra -Werror: the header is plain C99. Checks the ABI's
 * promises that hold whatever engine is behind it: versions, pinned status codes, NULL handling,
 * struct_size defaults, untouched out-parameters on error. argv[1]: a directory that is not a model. */
#include <glm5rt/glm5rt.h>

#include <stdio.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond)                                                     \
    do {                                                                \
        if (!(cond)) {                                                  \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
            ++failures;                                                 \
        }                                                               \
    } while (0)

static int lines_seen = 0;
static void on_log(int32_t level, const char* line, void* user_data) {
    (void)level;
    (void)user_data;
    CHECK(line != NULL && strchr(line, '\n') == NULL);
    ++lines_seen;
}

int main(int argc, char** argv) {
    glm5rt_model_params mp;
    glm5rt_session_params sp;
    glm5rt_sampler_params smp;
    glm5rt_model* model = (glm5rt_model*)0x1; /* poisoned: must stay untouched on error */
    glm5rt_status st;
    (void)argc;
    (void)argv;

    CHECK(strcmp(glm5rt_version(), GLM5RT_VERSION_STRING) == 0);
    CHECK(glm5rt_abi_version() == GLM5RT_ABI_VERSION);

    /* pinned values */
    CHECK(GLM5RT_OK == 0 && GLM5RT_ERR_INVALID_ARGUMENT == 1 && GLM5RT_ERR_UNSUPPORTED == 2);
    CHECK(GLM5RT_ERR_CACHE_FULL == 6 && GLM5RT_ERR_CANCELLED == 7 && GLM5RT_ERR_INTERNAL == 14);
    CHECK(strcmp(glm5rt_status_string(GLM5RT_OK), "ok") == 0);
    CHECK(strcmp(glm5rt_status_string(12345), "unknown status") == 0);

    glm5rt_model_default_params(&mp);
    CHECK(mp.struct_size == sizeof mp && mp.backend == GLM5RT_BACKEND_AUTO);
    glm5rt_session_default_params(&sp);
    CHECK(sp.struct_size == sizeof sp && sp.page_size == 64);
    glm5rt_sampler_default_params(&smp);
    CHECK(smp.struct_size == sizeof smp && smp.temperature == 0.0f && smp.top_p == 1.0f);

    /* NULL arguments: a status and a message, never a crash */
    st = glm5rt_model_load(NULL, NULL, &model);
    CHECK(st == GLM5RT_ERR_INVALID_ARGUMENT);
    CHECK(strlen(glm5rt_last_error()) > 0);
    CHECK(model == (glm5rt_model*)0x1);
    CHECK(glm5rt_model_load("/nonexistent/dir", NULL, NULL) == GLM5RT_ERR_INVALID_ARGUMENT);

    /* a params struct that was not initialised (struct_size 0) is rejected */
    memset(&mp, 0, sizeof mp);
    st = glm5rt_model_load("/nonexistent/dir", &mp, &model);
    CHECK(st == GLM5RT_ERR_INVALID_ARGUMENT);
    CHECK(model == (glm5rt_model*)0x1);

    /* frees accept NULL */
    glm5rt_model_free(NULL);
    glm5rt_session_free(NULL);
    glm5rt_tokenizer_free(NULL);
    glm5rt_detok_stream_free(NULL);
    glm5rt_session_cancel(NULL);

    /* logging: whole lines through the callback */
    glm5rt_set_log_callback(on_log, NULL);
    glm5rt_set_log_level(GLM5RT_LOG_DEBUG);
    glm5rt_set_log_callback(NULL, NULL);
    glm5rt_set_log_level(GLM5RT_LOG_WARN);

    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("c99 ABI checks passed\n");
    return 0;
}

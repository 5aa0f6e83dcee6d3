/* glm5rt-chat: talk to a GLM-5 model directory through the C ABI.
 * v0: loads the model and prints what the library knows about it; the conversation loop arrives with
 * the engine ([CPU engine]) and the tokenizer ([Tokenizer]). */
#include <glm5rt/glm5rt.h>

#include <stdio.h>

static int32_t on_progress(float fraction, void* user_data) {
    (void)user_data;
    fprintf(stderr, "\rloading %3.0f%%", fraction * 100.0f);
    if (fraction >= 1.0f) fprintf(stderr, "\n");
    return 1;
}

int main(int argc, char** argv) {
    const char* dir = argc > 1 ? argv[1] : "models/glm5-demo";
    glm5rt_model_params mp;
    glm5rt_model* model = NULL;
    glm5rt_model_info info;
    glm5rt_status st;

    printf("libglm5rt %s (ABI %d)\n", glm5rt_version(), (int)glm5rt_abi_version());
    glm5rt_model_default_params(&mp);
    mp.progress = on_progress;
    st = glm5rt_model_load(dir, &mp, &model);
    if (st == GLM5RT_ERR_UNSUPPORTED) {
        printf("model loading is not available in this build yet: %s\n", glm5rt_last_error());
        return 0;
    }
    if (st != GLM5RT_OK) {
        fprintf(stderr, "cannot load %s: %s (%s)\n", dir, glm5rt_last_error(), glm5rt_status_string(st));
        return 1;
    }
    info.struct_size = sizeof info;
    if (glm5rt_model_get_info(model, &info) == GLM5RT_OK) {
        printf("%s: %d layers (%d dense), hidden %d, %d heads, %d experts (top %d), vocab %d, context %lld\n",
               dir, info.n_layers, info.n_dense_layers, info.hidden_size, info.n_heads,
               info.n_routed_experts, info.n_experts_per_token, info.n_vocab, (long long)info.context_length);
        printf("%lld parameters, %lld bytes of weights\n", (long long)info.n_params, (long long)info.weight_bytes);
    }
    glm5rt_model_free(model);
    return 0;
}

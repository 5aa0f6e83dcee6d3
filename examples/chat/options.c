#include "options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void print_usage(const char* program) {
    printf("usage: %s [options] MODEL_DIR\n"
           "\n"
           "Chat with a GLM-5 model directory (config.json, *.safetensors, tokenizer.json).\n"
           "Reads one message per line from stdin (a line ending in '\\' continues on the next line);\n"
           "the reply streams to stdout, statistics go to stderr.\n"
           "\n"
           "  --system TEXT        system prompt\n"
           "  --think / --no-think reasoning before the answer on / off (default off: the answer comes\n"
           "                       directly, as the bundled demo model was trained)\n"
           "  --prompt TEXT        one-shot: send TEXT as a user turn instead of reading stdin\n"
           "                       (repeat for a multi-turn conversation)\n"
           "  --temp T             temperature; 0 = greedy (default 0: reproducible answers)\n"
           "  --top-k K            keep the K most likely tokens (0 = off)\n"
           "  --top-p P            nucleus sampling (1 = off)\n"
           "  --min-p P            drop tokens below P * p_max (0 = off)\n"
           "  --repeat-penalty R   penalty on recent tokens (1 = off)\n"
           "  --repeat-last-n N    window of that penalty (default 64, -1 = whole session)\n"
           "  --seed N             sampling seed (default 0x5eed)\n"
           "  --max-new N          most tokens per reply (default 512)\n"
           "  --ctx N              session capacity in tokens (default: the model's context length)\n"
           "  --backend auto|cpu|cuda   (default auto: CUDA when a usable GPU exists)\n"
           "  --threads N          CPU threads (default: all)\n"
           "  --quiet              no banner and no per-reply statistics\n"
           "  --verbose            library log lines down to INFO\n"
           "  -h, --help           this text\n"
           "\n"
           "Commands at the prompt: /help, /reset, /save FILE, /load FILE, /think on|off, /quit.\n"
           "Ctrl-C cancels the reply being generated; Ctrl-D or /quit leaves.\n",
           program);
}

static int parse_double(const char* flag, const char* s, double lo, double hi, double* out) {
    char* end = NULL;
    double v;
    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "glm5rt-chat: %s expects a number in [%g, %g], got '%s'\n", flag, lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_int(const char* flag, const char* s, long long lo, long long hi, long long* out) {
    char* end = NULL;
    long long v;
    errno = 0;
    v = strtoll(s, &end, 0);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "glm5rt-chat: %s expects an integer in [%lld, %lld], got '%s'\n", flag, lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

int parse_options(int argc, char** argv, chat_options* opts) {
    int i;
    memset(opts, 0, sizeof *opts);
    glm5rt_sampler_default_params(&opts->sampler);
    opts->seed = 0x5eed;
    opts->max_new = 512;
    opts->backend = GLM5RT_BACKEND_AUTO;
    opts->prompts = (const char**)calloc((size_t)argc + 1, sizeof *opts->prompts);
    if (!opts->prompts) {
        fprintf(stderr, "glm5rt-chat: out of memory\n");
        return -1;
    }
    for (i = 1; i < argc; ++i) {
        const char* a = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : NULL;
        double d = 0;
        long long n = 0;
        int takes_value = 1;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            print_usage(argv[0]);
            return 1;
        } else if (strcmp(a, "--think") == 0) {
            opts->thinking = 1, takes_value = 0;
        } else if (strcmp(a, "--no-think") == 0) {
            opts->thinking = 0, takes_value = 0;
        } else if (strcmp(a, "--quiet") == 0) {
            opts->quiet = 1, takes_value = 0;
        } else if (strcmp(a, "--verbose") == 0) {
            opts->verbose = 1, takes_value = 0;
        } else if (a[0] == '-' && a[1] == '-' && v == NULL) {
            fprintf(stderr, "glm5rt-chat: %s needs a value (or is unknown; see --help)\n", a);
            return -1;
        } else if (strcmp(a, "--system") == 0) {
            opts->system_prompt = v;
        } else if (strcmp(a, "--prompt") == 0) {
            opts->prompts[opts->n_prompts++] = v;
        } else if (strcmp(a, "--temp") == 0) {
            if (parse_double(a, v, 0.0, 100.0, &d)) return -1;
            opts->sampler.temperature = (float)d;
        } else if (strcmp(a, "--top-k") == 0) {
            if (parse_int(a, v, 0, 1 << 30, &n)) return -1;
            opts->sampler.top_k = (int32_t)n;
        } else if (strcmp(a, "--top-p") == 0) {
            if (parse_double(a, v, 0.0, 1.0, &d)) return -1;
            opts->sampler.top_p = (float)d;
        } else if (strcmp(a, "--min-p") == 0) {
            if (parse_double(a, v, 0.0, 1.0, &d)) return -1;
            opts->sampler.min_p = (float)d;
        } else if (strcmp(a, "--repeat-penalty") == 0) {
            if (parse_double(a, v, 0.0, 100.0, &d)) return -1;
            opts->sampler.repetition_penalty = (float)d;
        } else if (strcmp(a, "--repeat-last-n") == 0) {
            if (parse_int(a, v, -1, 1 << 30, &n)) return -1;
            opts->sampler.penalty_last_n = (int32_t)n;
        } else if (strcmp(a, "--seed") == 0) {
            char* end = NULL;
            errno = 0;
            opts->seed = (uint64_t)strtoull(v, &end, 0);
            if (errno != 0 || end == v || *end != '\0' || v[0] == '-') {
                fprintf(stderr, "glm5rt-chat: --seed expects an unsigned integer, got '%s'\n", v);
                return -1;
            }
        } else if (strcmp(a, "--max-new") == 0) {
            if (parse_int(a, v, 1, 1 << 30, &n)) return -1;
            opts->max_new = (int)n;
        } else if (strcmp(a, "--ctx") == 0) {
            if (parse_int(a, v, 0, (long long)1 << 40, &n)) return -1;
            opts->context = (int64_t)n;
        } else if (strcmp(a, "--threads") == 0) {
            if (parse_int(a, v, 0, 4096, &n)) return -1;
            opts->threads = (int)n;
        } else if (strcmp(a, "--backend") == 0) {
            if (strcmp(v, "auto") == 0) opts->backend = GLM5RT_BACKEND_AUTO;
            else if (strcmp(v, "cpu") == 0) opts->backend = GLM5RT_BACKEND_CPU;
            else if (strcmp(v, "cuda") == 0) opts->backend = GLM5RT_BACKEND_CUDA;
            else {
                fprintf(stderr, "glm5rt-chat: --backend expects auto, cpu or cuda, got '%s'\n", v);
                return -1;
            }
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "glm5rt-chat: unknown option %s (see --help)\n", a);
            return -1;
        } else {
            takes_value = 0;
            if (opts->model_dir) {
                fprintf(stderr, "glm5rt-chat: one model directory expected, got '%s' and '%s'\n",
                        opts->model_dir, a);
                return -1;
            }
            opts->model_dir = a;
        }
        if (takes_value) ++i;
    }
    if (!opts->model_dir) {
        fprintf(stderr, "glm5rt-chat: no model directory given (try models/glm5-demo; see --help)\n");
        return -1;
    }
    return 0;
}

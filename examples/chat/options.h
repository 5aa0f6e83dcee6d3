/* Command-line options of glm5rt-chat. */
#ifndef GLM5RT_CHAT_OPTIONS_H
#define GLM5RT_CHAT_OPTIONS_H

#include <glm5rt/glm5rt.h>

#include <stddef.h>
#include <stdint.h>

typedef struct chat_options {
    const char* model_dir;
    const char* system_prompt;   /* NULL = none */
    int thinking;                /* 1: the reply starts with <think>; 0: with </think> */
    glm5rt_sampler_params sampler;
    uint64_t seed;
    int max_new;                 /* most tokens per reply */
    int backend;                 /* GLM5RT_BACKEND_* */
    int threads;                 /* 0 = all */
    int64_t context;             /* session capacity in tokens; 0 = the model's context length */
    int quiet;                   /* no banner, no per-reply statistics */
    int verbose;                 /* library log level INFO */
    const char** prompts;        /* --prompt TEXT, in order: one-shot turns instead of reading stdin */
    size_t n_prompts;
} chat_options;

/* Fills *opts from argv. Returns 0 to run, 1 when --help was printed (exit 0), -1 on a bad option
 * (a message is already on stderr). opts->prompts is malloc'ed: free it. */
int parse_options(int argc, char** argv, chat_options* opts);

void print_usage(const char* program);

#endif

/* CPU engine throughput through the public C ABI: prefill tokens/s (one append of the whole prompt),
 * single-session decode tokens/s (greedy steps) and batched decode tokens/s (glm5rt_batch_step over B
 * sessions). Best of --repeat runs. Prints a table and writes JSON (--json FILE).
 *
 * glm5rt-bench-cpu-engine --model DIR [--threads N] [--prompt-len N] [--decode M] [--batch B]
 *                         [--repeat R] [--json FILE] */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "glm5rt/glm5rt.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define CHECK(call)                                                                                   \
  do {                                                                                                \
    glm5rt_status st_ = (call);                                                                       \
    if (st_ != GLM5RT_OK) {                                                                           \
      fprintf(stderr, "%s: %s: %s\n", #call, glm5rt_status_string(st_), glm5rt_last_error());        \
      exit(1);                                                                                        \
    }                                                                                                 \
  } while (0)

int main(int argc, char** argv) {
  const char *model_dir = NULL, *json = NULL;
  int threads = 0, batch = 4, repeat = 3;
  long prompt_len = 300, n_decode = 32;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--model")) model_dir = argv[i + 1];
    else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--prompt-len")) prompt_len = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--decode")) n_decode = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--batch")) batch = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--repeat")) repeat = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--json")) json = argv[i + 1];
    else { fprintf(stderr, "unknown argument %s\n", argv[i]); return 2; }
  }
  if (!model_dir || prompt_len < 1 || n_decode < 1 || batch < 1 || repeat < 1) {
    fprintf(stderr, "usage: glm5rt-bench-cpu-engine --model DIR [--threads N] [--prompt-len N] [--decode M] "
                    "[--batch B] [--repeat R] [--json FILE]\n");
    return 2;
  }
  glm5rt_model_params mp;
  glm5rt_model_default_params(&mp);
  mp.backend = GLM5RT_BACKEND_CPU;
  mp.n_threads = threads;
  glm5rt_model* model = NULL;
  CHECK(glm5rt_model_load(model_dir, &mp, &model));
  glm5rt_model_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  CHECK(glm5rt_model_get_info(model, &info));
  int32_t* prompt = malloc((size_t)prompt_len * sizeof *prompt);
  for (long i = 0; i < prompt_len; ++i) prompt[i] = (int32_t)(4 + (i * 7919) % (info.n_vocab - 8));

  double best_prefill = 0, best_decode = 0, best_batch = 0;
  glm5rt_session_params sp;
  glm5rt_session_default_params(&sp);
  sp.max_tokens = prompt_len + n_decode + 1;
  glm5rt_session** ss = calloc((size_t)batch, sizeof *ss);
  int32_t* out = malloc((size_t)batch * sizeof *out);
  for (int b = 0; b < batch; ++b) CHECK(glm5rt_session_create(model, &sp, &ss[b]));
  for (int r = 0; r < repeat; ++r) {
    glm5rt_session* s = ss[0];
    CHECK(glm5rt_session_reset(s));
    double t0 = now_s();
    CHECK(glm5rt_session_append(s, prompt, (size_t)prompt_len, NULL));
    double tp = (double)prompt_len / (now_s() - t0);
    t0 = now_s();
    for (long i = 0; i < n_decode; ++i) CHECK(glm5rt_session_step(s, NULL, &out[0]));
    double td = (double)n_decode / (now_s() - t0);
    /* batched decode: B sessions holding the prompt, one forward per step for all of them */
    for (int b = 0; b < batch; ++b) {
      CHECK(glm5rt_session_reset(ss[b]));
      CHECK(glm5rt_session_append(ss[b], prompt + b % prompt_len, (size_t)(prompt_len - b % prompt_len), NULL));
    }
    t0 = now_s();
    for (long i = 0; i < n_decode; ++i) CHECK(glm5rt_batch_step(ss, (size_t)batch, NULL, out));
    double tb = (double)(n_decode * batch) / (now_s() - t0);
    if (tp > best_prefill) best_prefill = tp;
    if (td > best_decode) best_decode = td;
    if (tb > best_batch) best_batch = tb;
  }
  printf("| model | threads | prompt | prefill tok/s | decode tok/s (1 session) | decode tok/s (batch %d) |\n", batch);
  printf("|---|---|---|---|---|---|\n");
  printf("| %s | %d | %ld | %.1f | %.1f | %.1f |\n", model_dir, threads, prompt_len, best_prefill, best_decode, best_batch);
  if (json) {
    FILE* f = fopen(json, "w");
    if (!f) { fprintf(stderr, "cannot write %s\n", json); return 1; }
    fprintf(f, "{\"model\": \"%s\", \"threads\": %d, \"prompt_len\": %ld, \"decode_tokens\": %ld, \"batch\": %d, "
               "\"repeat\": %d, \"prefill_tok_s\": %.3f, \"decode_tok_s\": %.3f, \"batch_decode_tok_s\": %.3f}\n",
            model_dir, threads, prompt_len, n_decode, batch, repeat, best_prefill, best_decode, best_batch);
    fclose(f);
  }
  for (int b = 0; b < batch; ++b) glm5rt_session_free(ss[b]);
  free(ss);
  free(out);
  free(prompt);
  glm5rt_model_free(model);
  return 0;
}

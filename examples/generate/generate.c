/* glm5rt-generate: load a model, feed a prompt, generate tokens, print their ids. Checks an install and
 * the engine (the fixtures' references were made with greedy decoding and eos disabled: --ignore-eos).
 * Uses only the public C header. Timings go to stderr, generated ids to stdout. */
#define _POSIX_C_SOURCE 199309L
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "glm5rt/glm5rt.h"

static void usage(FILE* f) {
  fprintf(f,
          "usage: glm5rt-generate --model DIR (--prompt-ids 5,6,7 | --prompt TEXT) [options]\n"
          "  --max-new N               tokens to generate (default 32)\n"
          "  --ignore-eos              do not stop at an end-of-sequence token (generate exactly N)\n"
          "  --temp T --top-k K --top-p P --min-p P --repeat-penalty R --seed S   sampling (default greedy)\n"
          "  --threads N               CPU threads (default: all)\n"
          "  --backend auto|cpu|cuda    compute backend (default: auto = CUDA when a usable GPU exists)\n"
          "  --device N                CUDA device ordinal (default: 0)\n"
          "  --dump-prefill-logits F   write [N, V] float32 .npy: logits of every prompt position\n"
          "  --dump-decode-logits F    write [M, V] float32 .npy: logits that chose each generated token\n");
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int fail_status(const char* what, glm5rt_status st) {
  fprintf(stderr, "glm5rt-generate: %s: %s: %s\n", what, glm5rt_status_string(st), glm5rt_last_error());
  return 1;
}

/* A float32 array in NumPy's .npy format, version 1.0. */
static int write_npy(const char* path, const float* data, size_t rows, size_t cols) {
  char header[128];
  int n = snprintf(header, sizeof header, "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu, %zu), }", rows, cols);
  size_t total = 10 + (size_t)n + 1;
  size_t pad = (64 - total % 64) % 64;
  FILE* f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "glm5rt-generate: cannot write %s: %s\n", path, strerror(errno));
    return 1;
  }
  uint16_t hlen = (uint16_t)((size_t)n + pad + 1);
  fwrite("\x93NUMPY\x01\x00", 1, 8, f);
  unsigned char le[2] = {(unsigned char)(hlen & 0xff), (unsigned char)(hlen >> 8)};
  fwrite(le, 1, 2, f);
  fwrite(header, 1, (size_t)n, f);
  for (size_t i = 0; i < pad; ++i) fputc(' ', f);
  fputc('\n', f);
  size_t w = rows * cols > 0 ? fwrite(data, sizeof(float), rows * cols, f) : 0;
  int bad = (w != rows * cols) | (fclose(f) != 0);
  if (bad) fprintf(stderr, "glm5rt-generate: writing %s failed\n", path);
  return bad;
}

static int parse_ids(const char* s, int32_t** out, size_t* n) {
  size_t cap = 16, len = 0;
  int32_t* ids = malloc(cap * sizeof *ids);
  if (!ids) return 1;
  while (*s) {
    char* end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || errno || v < 0 || v > INT32_MAX) {
      fprintf(stderr, "glm5rt-generate: --prompt-ids: bad id near \"%s\"\n", s);
      free(ids);
      return 1;
    }
    if (len == cap) {
      int32_t* grown = realloc(ids, (cap *= 2) * sizeof *ids);
      if (!grown) { free(ids); return 1; }
      ids = grown;
    }
    ids[len++] = (int32_t)v;
    s = end;
    if (*s == ',') ++s;
  }
  *out = ids;
  *n = len;
  return 0;
}

int main(int argc, char** argv) {
  int32_t backend = GLM5RT_BACKEND_AUTO, device = 0;
  const char *model_dir = NULL, *prompt_ids = NULL, *prompt_text = NULL, *dump_prefill = NULL, *dump_decode = NULL;
  long max_new = 32;
  int ignore_eos = 0, threads = 0;
  unsigned long long seed = 0x5eed;
  int have_seed = 0;
  glm5rt_sampler_params sampler;
  glm5rt_sampler_default_params(&sampler);
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE() do { if (!v) { fprintf(stderr, "glm5rt-generate: %s needs a value\n", a); return 2; } ++i; } while (0)
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
    else if (!strcmp(a, "--ignore-eos")) ignore_eos = 1;
    else if (!strcmp(a, "--model")) { NEED_VALUE(); model_dir = v; }
    else if (!strcmp(a, "--prompt-ids")) { NEED_VALUE(); prompt_ids = v; }
    else if (!strcmp(a, "--prompt")) { NEED_VALUE(); prompt_text = v; }
    else if (!strcmp(a, "--max-new")) { NEED_VALUE(); max_new = strtol(v, NULL, 10); }
    else if (!strcmp(a, "--temp")) { NEED_VALUE(); sampler.temperature = strtof(v, NULL); }
    else if (!strcmp(a, "--top-k")) { NEED_VALUE(); sampler.top_k = (int32_t)strtol(v, NULL, 10); }
    else if (!strcmp(a, "--top-p")) { NEED_VALUE(); sampler.top_p = strtof(v, NULL); }
    else if (!strcmp(a, "--min-p")) { NEED_VALUE(); sampler.min_p = strtof(v, NULL); }
    else if (!strcmp(a, "--repeat-penalty")) { NEED_VALUE(); sampler.repetition_penalty = strtof(v, NULL); }
    else if (!strcmp(a, "--seed")) { NEED_VALUE(); seed = strtoull(v, NULL, 0); have_seed = 1; }
    else if (!strcmp(a, "--threads")) { NEED_VALUE(); threads = (int)strtol(v, NULL, 10); }
    else if (!strcmp(a, "--backend")) {
      NEED_VALUE();
      if (!strcmp(v, "auto")) backend = GLM5RT_BACKEND_AUTO;
      else if (!strcmp(v, "cpu")) backend = GLM5RT_BACKEND_CPU;
      else if (!strcmp(v, "cuda")) backend = GLM5RT_BACKEND_CUDA;
      else { fprintf(stderr, "glm5rt-generate: --backend must be auto, cpu or cuda\n"); return 2; }
    }
    else if (!strcmp(a, "--device")) { NEED_VALUE(); device = (int32_t)strtol(v, NULL, 10); }
    else if (!strcmp(a, "--dump-prefill-logits")) { NEED_VALUE(); dump_prefill = v; }
    else if (!strcmp(a, "--dump-decode-logits")) { NEED_VALUE(); dump_decode = v; }
    else { fprintf(stderr, "glm5rt-generate: unknown argument %s\n", a); usage(stderr); return 2; }
#undef NEED_VALUE
  }
  if (!model_dir || (!prompt_ids == !prompt_text) || max_new < 0) {
    fprintf(stderr, "glm5rt-generate: need --model and exactly one of --prompt-ids / --prompt (and --max-new >= 0)\n");
    usage(stderr);
    return 2;
  }

  glm5rt_model_params mp;
  glm5rt_model_default_params(&mp);
  mp.n_threads = threads;
  mp.backend = backend;
  mp.device_index = device;
  glm5rt_model* model = NULL;
  double t0 = now_s();
  glm5rt_status st = glm5rt_model_load(model_dir, &mp, &model);
  if (st != GLM5RT_OK) return fail_status("loading the model", st);
  double t_load = now_s() - t0;
  glm5rt_model_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  if ((st = glm5rt_model_get_info(model, &info)) != GLM5RT_OK) return fail_status("model info", st);
  const size_t V = (size_t)info.n_vocab;

  int32_t* prompt = NULL;
  size_t n_prompt = 0;
  if (prompt_ids) {
    if (parse_ids(prompt_ids, &prompt, &n_prompt)) return 2;
  } else {
    glm5rt_tokenizer* tok = NULL;
    st = glm5rt_tokenizer_from_model(model, &tok);
    if (st != GLM5RT_OK) {
      fprintf(stderr, "glm5rt-generate: --prompt needs the model's tokenizer, which is not available: %s: %s\n"
                      "  (use --prompt-ids instead)\n", glm5rt_status_string(st), glm5rt_last_error());
      return 1;
    }
    size_t n = 0;
    st = glm5rt_tokenize(tok, prompt_text, strlen(prompt_text), GLM5RT_TOKENIZE_PARSE_SPECIAL, NULL, 0, &n);
    if (st == GLM5RT_OK) {
      prompt = malloc((n ? n : 1) * sizeof *prompt);
      st = glm5rt_tokenize(tok, prompt_text, strlen(prompt_text), GLM5RT_TOKENIZE_PARSE_SPECIAL, prompt, n, &n_prompt);
    }
    glm5rt_tokenizer_free(tok);
    if (st != GLM5RT_OK) return fail_status("tokenizing the prompt", st);
  }
  if (n_prompt == 0) {
    fprintf(stderr, "glm5rt-generate: the prompt is empty\n");
    return 2;
  }

  glm5rt_session_params sp;
  glm5rt_session_default_params(&sp);
  if (have_seed) sp.seed = seed;
  glm5rt_session* s = NULL;
  if ((st = glm5rt_session_create(model, &sp, &s)) != GLM5RT_OK) return fail_status("creating a session", st);

  float* prefill = NULL;
  if (dump_prefill) {
    prefill = malloc(n_prompt * V * sizeof *prefill);
    if (!prefill) { fprintf(stderr, "glm5rt-generate: out of memory\n"); return 1; }
  }
  t0 = now_s();
  st = glm5rt_session_append(s, prompt, n_prompt, prefill);
  double t_prefill = now_s() - t0;
  if (st != GLM5RT_OK) return fail_status("prefill", st);
  if (dump_prefill && write_npy(dump_prefill, prefill, n_prompt, V)) return 1;

  float* decode = dump_decode ? malloc(((size_t)max_new ? (size_t)max_new : 1) * V * sizeof *decode) : NULL;
  if (dump_decode && !decode) { fprintf(stderr, "glm5rt-generate: out of memory\n"); return 1; }
  int32_t* out = malloc(((size_t)max_new ? (size_t)max_new : 1) * sizeof *out);
  size_t n_out = 0;
  t0 = now_s();
  for (long i = 0; i < max_new; ++i) {
    if (decode) {
      const float* l = NULL;
      if ((st = glm5rt_session_logits(s, &l, NULL)) != GLM5RT_OK) return fail_status("logits", st);
      memcpy(decode + n_out * V, l, V * sizeof *l);
    }
    int32_t t = -1;
    int is_eos = 0;
    if (!ignore_eos) {
      /* sample first to check eos without appending it (the reference stops before eos) */
      if ((st = glm5rt_session_sample(s, &sampler, &t)) != GLM5RT_OK) return fail_status("sampling", st);
      for (int e = 0; e < info.n_eos && e < 8; ++e) is_eos |= (t == info.eos_ids[e]);
      if (is_eos) { out[n_out++] = t; break; }
      if ((st = glm5rt_session_append(s, &t, 1, NULL)) != GLM5RT_OK) return fail_status("decode", st);
    } else if ((st = glm5rt_session_step(s, &sampler, &t)) != GLM5RT_OK) {
      return fail_status("decode", st);
    }
    out[n_out++] = t;
  }
  double t_decode = now_s() - t0;
  if (dump_decode && write_npy(dump_decode, decode, n_out, V)) return 1;

  for (size_t i = 0; i < n_out; ++i) printf("%s%d", i ? "," : "", out[i]);
  printf("\n");
  fprintf(stderr, "load %.3f s | prefill %zu tokens in %.3f s (%.1f tok/s) | decode %zu tokens in %.3f s (%.1f tok/s)\n",
          t_load, n_prompt, t_prefill, (double)n_prompt / t_prefill, n_out, t_decode,
          t_decode > 0 ? (double)n_out / t_decode : 0.0);

  free(out);
  free(decode);
  free(prefill);
  free(prompt);
  glm5rt_session_free(s);
  glm5rt_model_free(model);
  return 0;
}

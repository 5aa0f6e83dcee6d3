/* glm5rt-bench-load: times glm5rt_model_load (config parse, mmap of every shard, header and tensor
 * validation, FP8 scale checks) through the public C ABI, repeated, and prints a table plus JSON.
 *
 * Usage: glm5rt-bench-load [--repeat N] [--json FILE] DIR...
 * Default DIRs: models/glm5-demo and tests/data/fixtures/small-long (run from the repo root). For the
 * 750 GB estimate, pass a synthetic GLM-5-FP8-shaped checkpoint made by bench/load/make_synthetic.py.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "glm5rt/glm5rt.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

typedef struct {
    const char* dir;
    glm5rt_model_info info;
    double min_s, median_s, max_s;
    int ok;
} result;

int main(int argc, char** argv) {
    int repeat = 10;
    const char* json_path = NULL;
    const char* dirs[64];
    int n_dirs = 0;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--repeat") && i + 1 < argc) {
            repeat = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--json") && i + 1 < argc) {
            json_path = argv[++i];
        } else if (n_dirs < 64) {
            dirs[n_dirs++] = argv[i];
        }
    }
    if (repeat < 1) repeat = 1;
    if (n_dirs == 0) {
        dirs[n_dirs++] = "models/glm5-demo";
        dirs[n_dirs++] = "tests/data/fixtures/small-long";
    }
    result* res = calloc((size_t)n_dirs, sizeof *res);
    double* t = calloc((size_t)repeat, sizeof *t);
    if (!res || !t) return 1;
    int failed = 0;
    for (int d = 0; d < n_dirs; ++d) {
        res[d].dir = dirs[d];
        for (int r = 0; r < repeat; ++r) {
            glm5rt_model* m = NULL;
            double t0 = now_s();
            glm5rt_status st = glm5rt_model_load(dirs[d], NULL, &m);
            t[r] = now_s() - t0;
            if (st != GLM5RT_OK) {
                fprintf(stderr, "%s: %s\n", dirs[d], glm5rt_last_error());
                failed = 1;
                break;
            }
            if (r == 0) {
                res[d].info.struct_size = sizeof res[d].info;
                glm5rt_model_get_info(m, &res[d].info);
            }
            glm5rt_model_free(m);
            if (r == repeat - 1) res[d].ok = 1;
        }
        if (!res[d].ok) continue;
        qsort(t, (size_t)repeat, sizeof *t, cmp_double);
        res[d].min_s = t[0];
        res[d].median_s = t[repeat / 2];
        res[d].max_s = t[repeat - 1];
    }

    printf("%-40s %8s %12s %14s %10s %10s %10s\n", "checkpoint", "layers", "params", "bytes", "min ms",
           "median ms", "max ms");
    for (int d = 0; d < n_dirs; ++d) {
        if (!res[d].ok) continue;
        printf("%-40s %8d %12lld %14lld %10.3f %10.3f %10.3f\n", res[d].dir, res[d].info.n_layers,
               (long long)res[d].info.n_params, (long long)res[d].info.weight_bytes, 1e3 * res[d].min_s,
               1e3 * res[d].median_s, 1e3 * res[d].max_s);
    }
    FILE* out = json_path ? fopen(json_path, "w") : NULL;
    if (json_path && !out) {
        fprintf(stderr, "cannot write %s\n", json_path);
        return 1;
    }
    FILE* j = out ? out : stdout;
    fprintf(j, "{\"benchmark\": \"model_load\", \"library\": \"%s\", \"repeat\": %d, \"results\": [", glm5rt_version(),
            repeat);
    int first = 1;
    for (int d = 0; d < n_dirs; ++d) {
        if (!res[d].ok) continue;
        fprintf(j,
                "%s\n  {\"dir\": \"%s\", \"n_layers\": %d, \"n_params\": %lld, \"weight_bytes\": %lld, "
                "\"min_s\": %.6f, \"median_s\": %.6f, \"max_s\": %.6f}",
                first ? "" : ",", res[d].dir, res[d].info.n_layers, (long long)res[d].info.n_params,
                (long long)res[d].info.weight_bytes, res[d].min_s, res[d].median_s, res[d].max_s);
        first = 0;
    }
    fprintf(j, "\n]}\n");
    if (out) fclose(out);
    free(res);
    free(t);
    return failed;
}

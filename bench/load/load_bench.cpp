// glm5rt-bench-load: load time of checkpoints, repeated; prints a table and JSON.
//   checkpoint open : Checkpoint::open = config.json, mmap of every shard, header parsing, tensor table,
//                     FP8 scale checks, expected-tensor validation (what a 750 GB load costs before weights
//                     are read; O(tensors) + O(scale bytes))
//   model load      : glm5rt_model_load through the C ABI = the above + the backend's weight preparation
//                     (the CPU backend decodes every weight to float32 once)
//
// Usage: glm5rt-bench-load [--repeat N] [--json FILE] [--no-model] DIR...
// Default DIRs (run from the repo root): models/glm5-demo, tests/data/fixtures/small-long. For the
// 750 GB estimate pass a GLM-5-FP8-shaped synthetic checkpoint from bench/load/make_synthetic.py with
// --no-model (its shapes are valid but the point is the tensor count, not the decode).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "glm5rt/glm5rt.h"
#include "model/checkpoint.hpp"

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Stats {
  double min = 0, median = 0, max = 0;
};
Stats stats(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return t.empty() ? Stats{} : Stats{t.front(), t[t.size() / 2], t.back()};
}

struct Row {
  std::string dir;
  size_t tensors = 0, files = 0;
  int64_t params = 0, bytes = 0;
  Stats open, load;
  bool model = false;
};

}  // namespace

int main(int argc, char** argv) {
  int repeat = 10;
  const char* json_path = nullptr;
  bool model = true;
  std::vector<std::string> dirs;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) {
      json_path = argv[++i];
    } else if (!std::strcmp(argv[i], "--no-model")) {
      model = false;
    } else {
      dirs.push_back(argv[i]);
    }
  }
  if (dirs.empty()) dirs = {"models/glm5-demo", "tests/data/fixtures/small-long"};

  std::vector<Row> rows;
  for (const auto& d : dirs) {
    Row r;
    r.dir = d;
    r.model = model;
    std::vector<double> t_open, t_load;
    try {
      for (int i = 0; i < repeat; ++i) {
        const double t0 = now_s();
        auto ck = glm5rt::Checkpoint::open(d);
        t_open.push_back(now_s() - t0);
        r.tensors = ck->tensors().size();
        r.params = ck->n_params();
        r.bytes = ck->weight_bytes();
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", d.c_str(), e.what());
      return 1;
    }
    for (int i = 0; model && i < repeat; ++i) {
      glm5rt_model* m = nullptr;
      const double t0 = now_s();
      if (glm5rt_model_load(d.c_str(), nullptr, &m) != GLM5RT_OK) {
        std::fprintf(stderr, "%s: %s\n", d.c_str(), glm5rt_last_error());
        return 1;
      }
      t_load.push_back(now_s() - t0);
      glm5rt_model_free(m);
    }
    r.open = stats(t_open);
    r.load = stats(t_load);
    rows.push_back(r);
  }

  std::printf("%-36s %8s %10s %12s | %22s | %22s\n", "checkpoint", "tensors", "params", "bytes",
              "checkpoint open ms", "model load (C ABI) ms");
  std::printf("%-36s %8s %10s %12s | %6s %7s %7s | %6s %7s %7s\n", "", "", "", "", "min", "median", "max", "min",
              "median", "max");
  for (const auto& r : rows) {
    std::printf("%-36s %8zu %10lld %12lld | %6.1f %7.1f %7.1f |", r.dir.c_str(), r.tensors, (long long)r.params,
                (long long)r.bytes, 1e3 * r.open.min, 1e3 * r.open.median, 1e3 * r.open.max);
    if (r.model)
      std::printf(" %6.1f %7.1f %7.1f\n", 1e3 * r.load.min, 1e3 * r.load.median, 1e3 * r.load.max);
    else
      std::printf(" %22s\n", "(skipped)");
  }
  FILE* out = json_path ? std::fopen(json_path, "w") : stdout;
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", json_path);
    return 1;
  }
  std::fprintf(out, "{\"benchmark\": \"model_load\", \"library\": \"%s\", \"repeat\": %d, \"results\": [",
               glm5rt_version(), repeat);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::fprintf(out,
                 "%s\n  {\"dir\": \"%s\", \"tensors\": %zu, \"n_params\": %lld, \"weight_bytes\": %lld, "
                 "\"checkpoint_open_s\": {\"min\": %.6f, \"median\": %.6f, \"max\": %.6f}",
                 i ? "," : "", r.dir.c_str(), r.tensors, (long long)r.params, (long long)r.bytes, r.open.min,
                 r.open.median, r.open.max);
    if (r.model)
      std::fprintf(out, ", \"model_load_s\": {\"min\": %.6f, \"median\": %.6f, \"max\": %.6f}", r.load.min,
                   r.load.median, r.load.max);
    std::fprintf(out, "}");
  }
  std::fprintf(out, "\n]}\n");
  if (json_path) std::fclose(out);
  return 0;
}

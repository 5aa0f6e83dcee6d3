// Tokenizer throughput on one core: encode about 1 MiB of text (the repository's own sources and docs,
// sorted by path and repeated up to the size: deterministic for a given checkout) with a model
// directory's tokenizer.json, then decode the ids. Prints a table and writes JSON.
//
//   bench_tokenizer [--dir MODEL_DIR] [--bytes N] [--runs R] [--json OUT.json] [--dump PREFIX]
//
// --dump writes PREFIX.txt (the text) and PREFIX.ids.json (our ids), to compare with HF tokenizers
// (bench/tokenizer/compare_hf.py does, and times HF on the same text).
//
// "cold" = a freshly loaded tokenizer (empty word cache), "warm" = the median of the next runs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.hpp"
#include "tokenizer/utf8.hpp"

namespace fs = std::filesystem;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string corpus(const fs::path& root, size_t target) {
  std::vector<fs::path> files;
  for (const char* sub : {"include", "lib", "bindings_c", "examples", "tests/unit", "docs"}) {
    if (!fs::exists(root / sub)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / sub)) {
      const auto ext = e.path().extension().string();
      if (e.is_regular_file() && (ext == ".hpp" || ext == ".cpp" || ext == ".h" || ext == ".c" || ext == ".md"))
        files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  std::string all;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    const std::string s = ss.str();
    if (glm5rt::utf8::is_valid(s)) all += s;
  }
  if (all.empty()) all = "empty corpus ";
  std::string text;
  while (text.size() < target) text += all;
  text.resize(target);
  while (!glm5rt::utf8::is_valid(text)) text.pop_back();  // do not cut a character in half
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = std::string(GLM5RT_SOURCE_DIR) + "/models/glm5-demo";
  std::string json_out, dump;
  size_t bytes = 1 << 20;
  int runs = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc) dir = argv[++i];
    else if (a == "--bytes" && i + 1 < argc) bytes = std::stoul(argv[++i]);
    else if (a == "--runs" && i + 1 < argc) runs = std::max(1, std::stoi(argv[++i]));
    else if (a == "--json" && i + 1 < argc) json_out = argv[++i];
    else if (a == "--dump" && i + 1 < argc) dump = argv[++i];
    else {
      std::fprintf(stderr, "usage: bench_tokenizer [--dir MODEL_DIR] [--bytes N] [--runs R] [--json OUT.json] [--dump PREFIX]\n");
      return 2;
    }
  }
  try {
    const std::string text = corpus(GLM5RT_SOURCE_DIR, bytes);
    auto t0 = std::chrono::steady_clock::now();
    auto tok = glm5rt::Tokenizer::load_dir(dir);
    const double load_s = seconds_since(t0);

    t0 = std::chrono::steady_clock::now();
    std::vector<int32_t> ids = tok->encode(text, true);
    const double cold_s = seconds_since(t0);
    std::vector<double> warm;
    for (int r = 0; r < runs; ++r) {
      t0 = std::chrono::steady_clock::now();
      ids = tok->encode(text, true);
      warm.push_back(seconds_since(t0));
    }
    std::sort(warm.begin(), warm.end());
    const double warm_s = warm[warm.size() / 2];

    t0 = std::chrono::steady_clock::now();
    const std::string back = tok->decode(ids, false);
    const double decode_s = seconds_since(t0);
    const bool round_trip = back == text;

    const double mb = static_cast<double>(text.size()) / 1e6;
    const double n = static_cast<double>(ids.size());
    std::printf("tokenizer: %s\n", dir.c_str());
    std::printf("text: %zu bytes -> %zu tokens (%.2f bytes/token), round trip %s\n", text.size(), ids.size(),
                static_cast<double>(text.size()) / n, round_trip ? "exact" : "differs (a lossy tokenizer: normalizer, unk or added specials)");
    std::printf("%-22s %10s %10s %14s\n", "phase", "seconds", "MB/s", "tokens/s");
    std::printf("%-22s %10.4f %10s %14s\n", "load tokenizer.json", load_s, "-", "-");
    std::printf("%-22s %10.4f %10.2f %14.0f\n", "encode (cold cache)", cold_s, mb / cold_s, n / cold_s);
    std::printf("%-22s %10.4f %10.2f %14.0f\n", "encode (warm, median)", warm_s, mb / warm_s, n / warm_s);
    std::printf("%-22s %10.4f %10.2f %14.0f\n", "decode", decode_s, mb / decode_s, n / decode_s);
    if (!dump.empty()) {
      std::ofstream(dump + ".txt", std::ios::binary) << text;
      std::ofstream ids_out(dump + ".ids.json");
      ids_out << '[';
      for (size_t i = 0; i < ids.size(); ++i) ids_out << (i ? "," : "") << ids[i];
      ids_out << "]\n";
    }
    if (!json_out.empty()) {
      std::ofstream out(json_out);
      out << "{\n  \"benchmark\": \"tokenizer\",\n  \"tokenizer_dir\": \"" << dir << "\",\n  \"text_bytes\": " << text.size()
          << ",\n  \"tokens\": " << ids.size() << ",\n  \"round_trip_exact\": " << (round_trip ? "true" : "false")
          << ",\n  \"threads\": 1,\n  \"load_s\": " << load_s << ",\n  \"encode_cold_s\": " << cold_s
          << ",\n  \"encode_cold_mb_per_s\": " << mb / cold_s << ",\n  \"encode_cold_tokens_per_s\": " << n / cold_s
          << ",\n  \"encode_warm_s\": " << warm_s << ",\n  \"encode_warm_mb_per_s\": " << mb / warm_s
          << ",\n  \"encode_warm_tokens_per_s\": " << n / warm_s << ",\n  \"decode_s\": " << decode_s
          << ",\n  \"decode_mb_per_s\": " << mb / decode_s << "\n}\n";
      std::printf("wrote %s\n", json_out.c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_tokenizer: %s\n", e.what());
    return 1;
  }
}

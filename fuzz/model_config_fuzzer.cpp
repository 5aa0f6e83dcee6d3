// libFuzzer target: config.json parsing. The input is config.json text, optionally followed by a NUL byte
// and generation_config.json text. Anything other than a glm5rt::Error escaping, or any sanitizer
// report, is a bug. Build and run: scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <string>

#include "model/config.hpp"
#include "runtime/error.hpp"
#include "runtime/log.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  glm5rt::set_log_level(GLM5RT_LOG_ERROR);  // unknown rope keys log warnings: keep the output readable
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  const std::string config = all.substr(0, nul);
  const std::string generation = nul == std::string::npos ? std::string() : all.substr(nul + 1);
  try {
    const glm5rt::ModelConfig c = glm5rt::parse_model_config(config, generation);
    // Invariants the loader and engine rely on after a successful parse.
    if (static_cast<int64_t>(c.indexer_types.size()) != c.num_hidden_layers ||
        static_cast<int64_t>(c.mlp_types.size()) != c.num_hidden_layers || c.indexer_types.front() != glm5rt::IndexerType::full)
      __builtin_trap();
    if (c.num_experts_per_tok > c.n_routed_experts || c.topk_group > c.n_group) __builtin_trap();
  } catch (const glm5rt::Error&) {
  }
  return 0;
}

// libFuzzer target: the safetensors header parser on arbitrary bytes (the whole input is the "file"),
// then an exact decode of every tensor the parser accepted. Anything other than a glm5rt::Error escaping,
// or any sanitizer report, is a bug. Build and run: scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/safetensors.hpp"
#include "model/weights.hpp"
#include "runtime/error.hpp"
#include "runtime/log.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  glm5rt::set_log_level(GLM5RT_LOG_ERROR);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto h = glm5rt::parse_safetensors_header(data, size, "fuzz");
    for (const auto& e : h.tensors) {
      if (e.shape.size() > 2) continue;
      glm5rt::TensorView v;
      v.name = e.name;
      v.dtype = e.dtype;
      v.shape = e.shape;
      v.data = data + h.data_offset + e.begin;
      if (v.numel() == 0 || v.numel() > (1 << 16)) continue;
      std::vector<float> out = glm5rt::decode_f32(v);
      (void)out;
    }
  } catch (const glm5rt::Error&) {
    // Rejected with a status and a message: the expected outcome for malformed input.
  }
  return 0;
}

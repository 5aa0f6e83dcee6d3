// Dtype helpers and the exact float32 decode of stored weights (bf16, f16, f32, FP8 e4m3 with block
// scales). Every decode here is exact: each of these formats is a subset of float32, so no rounding
// happens; FP8 is q * scale_inv computed in float32, which is what transformers' dequantization does.
#include "model/weights.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "model/dtype_decode.hpp"
#include "runtime/error.hpp"

namespace glm5rt {

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string r = "[";
  for (size_t i = 0; i < shape.size(); ++i) r += (i ? ", " : "") + std::to_string(shape[i]);
  return r + "]";
}

void require_shape(const TensorView& t, const std::vector<int64_t>& shape) {
  require(!t.empty(), Status::format, "tensor ", t.name.empty() ? std::string("(missing)") : t.name, " is missing");
  require(t.shape == shape, Status::format, "tensor ", t.name, " has shape ", shape_str(t.shape), ", expected ",
          shape_str(shape));
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::bf16: return 2;
    case DType::f16: return 2;
    case DType::fp8_e4m3: return 1;
    case DType::i32: return 4;
    case DType::i64: return 8;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
    case DType::fp8_e4m3: return "F8_E4M3";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
  }
  return "?";
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

// Unaligned-safe loads: safetensors data offsets need not be aligned to the element size.
template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void decode_plain(const TensorView& t, const uint8_t* src, int64_t n, float* out) {
  switch (t.dtype) {
    case DType::f32:
      std::memcpy(out, src, static_cast<size_t>(n) * 4);
      return;
    case DType::bf16:
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(load<uint16_t>(src + 2 * i));
      return;
    case DType::f16:
      for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(load<uint16_t>(src + 2 * i));
      return;
    case DType::fp8_e4m3:  // without scales (not a checkpoint weight, but well defined)
      for (int64_t i = 0; i < n; ++i) out[i] = e4m3_to_f32(src[i]);
      return;
    case DType::i32:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(load<int32_t>(src + 4 * i));
      return;
    case DType::i64:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(load<int64_t>(src + 8 * i));
      return;
  }
}

}  // namespace

void decode_rows_f32(const TensorView& t, int64_t row_begin, int64_t row_end, float* out) {
  require(!t.empty(), Status::invalid_argument, "decode of an empty tensor view '", t.name, "'");
  require(t.shape.size() <= 2, Status::invalid_argument, "decode_rows_f32: tensor '", t.name, "' has ",
          t.shape.size(), " dimensions (at most 2)");
  const int64_t rows = t.shape.empty() ? 1 : t.shape[0];
  const int64_t cols = t.cols();
  require(row_begin >= 0 && row_begin <= row_end && row_end <= rows, Status::invalid_argument,
          "decode_rows_f32: rows [", row_begin, ", ", row_end, ") outside tensor '", t.name, "' with ", rows,
          " rows");
  const auto* base = static_cast<const uint8_t*>(t.data);
  const size_t esize = dtype_size(t.dtype);
  if (t.dtype != DType::fp8_e4m3 || t.scale_inv == nullptr) {
    decode_plain(t, base + static_cast<size_t>(row_begin * cols) * esize, (row_end - row_begin) * cols, out);
    return;
  }
  // FP8 block-scaled: weight[i][j] = q[i][j] * scale_inv[i / block_rows][j / block_cols]; the last block
  // row/column may be partial (ceil-div scale grid).
  require(t.block_rows > 0 && t.block_cols > 0, Status::invalid_argument, "FP8 tensor '", t.name,
          "' has no block size");
  const int64_t scale_cols = (cols + t.block_cols - 1) / t.block_cols;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* q = base + r * cols;
    const float* srow = t.scale_inv + (r / t.block_rows) * scale_cols;
    float* o = out + (r - row_begin) * cols;
    for (int64_t c = 0; c < cols; ++c) o[c] = e4m3_to_f32(q[c]) * srow[c / t.block_cols];
  }
}

std::vector<float> decode_f32(const TensorView& t) {
  const int64_t rows = t.shape.empty() ? 1 : t.shape[0];
  std::vector<float> out(static_cast<size_t>(t.numel()));
  if (!out.empty()) decode_rows_f32(t, 0, rows, out.data());
  return out;
}

}  // namespace glm5rt

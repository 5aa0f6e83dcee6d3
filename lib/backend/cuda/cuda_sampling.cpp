// The CUDA backend's device-resident logits and device sampler: a session's last-position row stays in a
// LogitsRow on the device, tokens are drawn there by kernels/sampling (engine/sampler.cpp's semantics,
// one uniform per row drawn on the host from the session's RNG), and only token ids come back; a row is
// copied to the host only when someone asks for it (Session::logits, snapshots).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cuda/cuda_backend.hpp"
#include "kernels/sampling/sampling.h"
#include "runtime/error.hpp"

namespace glm5rt::cuda {

namespace {

class CudaLogitsRow final : public LogitsRow {
 public:
  CudaLogitsRow(int64_t vocab, std::mutex& device_mutex)
      : device_mutex_(device_mutex), buf_(static_cast<size_t>(vocab) * 4, "a session's logits row") {}
  // cudaFree under the backend's lock: never in the middle of another thread's graph capture.
  ~CudaLogitsRow() override {
    std::lock_guard<std::mutex> lock(device_mutex_);
    buf_.release();
  }
  float* data() const { return buf_.as<float>(); }

 private:
  std::mutex& device_mutex_;
  DeviceBuffer buf_;
};

const CudaLogitsRow& row_of(const LogitsRow& r) {
  const auto* c = dynamic_cast<const CudaLogitsRow*>(&r);
  require(c != nullptr, Status::invalid_argument, "the logits row belongs to another backend");
  return *c;
}

size_t align_up(size_t v) { return (v + 255) / 256 * 256; }

}  // namespace

std::unique_ptr<LogitsRow> CudaBackend::create_logits_row() {
  std::lock_guard<std::mutex> lock(device_mutex_);
  check(cudaSetDevice(device_), "cudaSetDevice");
  return std::make_unique<CudaLogitsRow>(config_.vocab_size, device_mutex_);
}

void CudaBackend::read_logits(const LogitsRow& row, float* out) const {
  std::lock_guard<std::mutex> lock(device_mutex_);
  check(cudaSetDevice(device_), "cudaSetDevice");
  check(cudaMemcpyAsync(out, row_of(row).data(), static_cast<size_t>(config_.vocab_size) * 4, cudaMemcpyDeviceToHost,
                        stream_),
        "copying logits to the host");
  check(cudaStreamSynchronize(stream_), "copying logits to the host");
}

void CudaBackend::copy_logits(const LogitsRow& src, LogitsRow& dst) const {
  std::lock_guard<std::mutex> lock(device_mutex_);
  check(cudaSetDevice(device_), "cudaSetDevice");
  check(cudaMemcpyAsync(row_of(dst).data(), row_of(src).data(), static_cast<size_t>(config_.vocab_size) * 4,
                        cudaMemcpyDeviceToDevice, stream_),
        "copying a logits row");
  check(cudaStreamSynchronize(stream_), "copying a logits row");
}

void CudaBackend::deliver_logits(const BatchPlan& plan, const float* dev, float* host) {
  const size_t n = plan.logit_rows.size(), row_bytes = static_cast<size_t>(config_.vocab_size) * 4;
  if (n == 0) return;
  require(plan.logit_dest.empty() || plan.logit_dest.size() == n, Status::internal,
          "logit_dest needs one entry per logit row");
  const char* src = reinterpret_cast<const char*>(dev);
  for (size_t k = 0; k < n;) {
    if (!plan.logit_dest.empty() && plan.logit_dest[k]) {
      check(cudaMemcpyAsync(row_of(*plan.logit_dest[k]).data(), src + k * row_bytes, row_bytes, cudaMemcpyDeviceToDevice,
                            stream_),
            "keeping logits on the device");
      ++k;
      continue;
    }
    size_t e = k + 1;  // a run of rows for the host: one copy
    while (e < n && (plan.logit_dest.empty() || !plan.logit_dest[e])) ++e;
    require(host != nullptr, Status::internal, "no host buffer for the logits");
    check(cudaMemcpyAsync(reinterpret_cast<char*>(host) + k * row_bytes, src + k * row_bytes, (e - k) * row_bytes,
                          cudaMemcpyDeviceToHost, stream_),
          "copying logits");
    k = e;
  }
}

void CudaBackend::sample_logits(const std::vector<const LogitsRow*>& rows, const SamplerParams& p,
                                const std::vector<std::vector<int32_t>>& windows, const std::vector<double>& uniforms,
                                int32_t* out) const {
  std::vector<const float*> ptrs;
  for (const LogitsRow* r : rows) {
    require(r != nullptr, Status::invalid_argument, "a logits row is NULL");
    ptrs.push_back(row_of(*r).data());
  }
  std::lock_guard<std::mutex> lock(device_mutex_);
  sample_rows_locked(ptrs, p, windows, uniforms, out);
}

std::vector<int32_t> CudaBackend::sample_device_rows(const float* logits, int64_t rows, const SamplerParams& p,
                                                     const std::vector<std::vector<int32_t>>& windows,
                                                     const std::vector<double>& uniforms) {
  require(rows >= 0 && (rows == 0 || logits != nullptr), Status::invalid_argument, "no logits rows");
  std::vector<const float*> ptrs;
  for (int64_t r = 0; r < rows; ++r) ptrs.push_back(logits + r * config_.vocab_size);
  std::vector<int32_t> out(static_cast<size_t>(rows));
  std::lock_guard<std::mutex> lock(device_mutex_);
  sample_rows_locked(ptrs, p, windows, uniforms, out.data());
  return out;
}

void CudaBackend::sample_rows_locked(const std::vector<const float*>& rows, const SamplerParams& p,
                                     const std::vector<std::vector<int32_t>>& windows,
                                     const std::vector<double>& uniforms, int32_t* out) const {
  const size_t R = rows.size();
  if (R == 0) return;
  require(R <= (size_t{1} << 20), Status::invalid_argument, "too many rows to sample: ", R);
  require(windows.size() == R && uniforms.size() == R, Status::invalid_argument,
          "one penalty window and one uniform per row are needed");
  require(std::isfinite(p.temperature) && p.top_p > 0.0f && !std::isnan(p.min_p) && p.repetition_penalty > 0.0f &&
              std::isfinite(p.repetition_penalty),
          Status::invalid_argument, "invalid sampler parameters");
  const bool sampling = p.temperature > 0.0f;
  if (sampling)
    for (double u : uniforms) require(u >= 0.0 && u < 1.0, Status::invalid_argument, "uniform ", u, " is outside [0, 1)");
  size_t n_window = 0;
  for (const auto& w : windows) n_window += w.size();
  const bool penalise = p.repetition_penalty != 1.0f && n_window > 0;
  require(n_window < (size_t{1} << 31), Status::invalid_argument, "penalty windows too long");

  // One upload: row pointers, uniforms, window offsets and tokens; then the tokens come back.
  const size_t o_ptr = 0, o_u = align_up(R * 8), o_off = o_u + align_up(R * 8), o_win = o_off + align_up((R + 1) * 4),
               o_out = o_win + align_up(std::max<size_t>(1, n_window) * 4), total = o_out + align_up(R * 4);
  std::vector<char> h(o_out);
  std::memcpy(h.data() + o_ptr, rows.data(), R * 8);
  std::memcpy(h.data() + o_u, uniforms.data(), R * 8);
  auto* off = reinterpret_cast<int32_t*>(h.data() + o_off);
  auto* win = reinterpret_cast<int32_t*>(h.data() + o_win);
  int32_t at = 0;
  for (size_t r = 0; r < R; ++r) {
    off[r] = at;
    std::copy(windows[r].begin(), windows[r].end(), win + at);
    at += static_cast<int32_t>(windows[r].size());
  }
  off[R] = at;

  check(cudaSetDevice(device_), "cudaSetDevice");
  if (sample_io_.bytes() < total) sample_io_.allocate(total, "the sampler's batch description");
  const size_t ws = sampling || penalise ? kernels::sampling::sample_workspace_bytes(static_cast<int>(R),
                                                                                     static_cast<int>(config_.vocab_size))
                                         : 0;
  if (sample_ws_.bytes() < ws) sample_ws_.allocate(ws, "the sampler's workspace");
  char* d = sample_io_.as<char>();
  check(cudaMemcpyAsync(d, h.data(), o_out, cudaMemcpyHostToDevice, stream_), "uploading the sampler's rows");

  kernels::sampling::SampleParams k;
  k.num_rows = static_cast<int>(R);
  k.vocab = static_cast<int>(config_.vocab_size);
  k.logits = reinterpret_cast<const float* const*>(d + o_ptr);
  if (penalise) {
    k.window = reinterpret_cast<const int32_t*>(d + o_win);
    k.window_offsets = reinterpret_cast<const int32_t*>(d + o_off);
  }
  k.repetition_penalty = p.repetition_penalty;
  k.temperature = p.temperature;
  k.top_k = p.top_k;
  k.top_p = p.top_p;
  k.min_p = p.min_p;
  k.uniforms = reinterpret_cast<const double*>(d + o_u);
  k.out_tokens = reinterpret_cast<int32_t*>(d + o_out);
  k.workspace = sample_ws_.get();
  k.workspace_bytes = sample_ws_.bytes();
  check(kernels::sampling::launch_sample_rows(k, stream_), "the device sampler");
  check(cudaMemcpyAsync(out, d + o_out, R * 4, cudaMemcpyDeviceToHost, stream_), "copying sampled tokens");
  check(cudaStreamSynchronize(stream_), "the device sampler");
}

}  // namespace glm5rt::cuda

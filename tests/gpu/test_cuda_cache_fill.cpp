// CudaBackend::fill_cache_random, which the forward benchmark uses to stand in for a long context: every
// record of a bf16 or FP8 cache must decode (export_records, the layout the kernels read) to finite values
// in the ranges the fill promises, with no slot left unwritten, so that benchmark numbers come from
// well-formed records (an e4m3 NaN byte or a zero scale would make the kernels' work unrepresentative).
#ifdef GLM5RT_GPU_TESTS_WITH_CORE
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "backend/cuda/cuda_backend.hpp"
#include "tests/gpu/random_glm5_model.hpp"

using namespace glm5rt;
using namespace glm5rt_test;

TEST_CASE("cuda backend: random cache fill gives well-formed bf16 and FP8 records") {
  RandomGlm5Model m(5);
  set_glm5_attention_config(m.c);
  m.c.moe_intermediate_size = 96;
  m.c.n_routed_experts = 8;
  m.c.num_experts_per_tok = 2;
  m.c.n_group = 1;
  m.c.topk_group = 1;
  m.c.q_lora_rank = 192;
  m.c.torch_dtype = "float32";
  draw_random_weights(m);
  auto be = make_cuda_backend(m.c, m.w, 0);
  auto& gpu = dynamic_cast<cuda::CudaBackend&>(*be);
  const ModelConfig& c = m.c;
  const int32_t ps = 64, pages = 3;
  const int64_t n = int64_t{ps} * pages, per = be->record_floats_per_token();
  const int64_t per_layer = per / c.num_hidden_layers, lat = c.kv_lora_rank, rope = c.qk_rope_head_dim;
  const std::vector<int32_t> bt = {2, 0, 1};
  for (int32_t dtype : {GLM5RT_DTYPE_BF16, GLM5RT_DTYPE_FP8_E4M3}) {
    const bool fp8 = dtype == GLM5RT_DTYPE_FP8_E4M3;
    CAPTURE(fp8);
    CacheDtypes dt;
    dt.latent = dt.index = dtype;
    auto cache = be->create_cache(pages, ps, dt);
    gpu.fill_cache_random(*cache, 42);
    std::vector<float> rec(static_cast<size_t>(n * per), NAN);
    be->export_records(*cache, bt, n, rec.data());
    // e4m3 values in +-448 times scales in [0.5, 1.5] / 448: |v| <= 1.5; bf16 parts in +-1.
    const double quant_max = fp8 ? 1.5 : 1.0;
    int64_t bad = 0, zero_rows = 0;
    double sum_abs = 0;
    for (int64_t t = 0; t < n; ++t)
      for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        const float* r = rec.data() + t * per + l * per_layer;
        double row_abs = 0;
        for (int64_t i = 0; i < per_layer; ++i) {
          const bool rope_part = i >= lat && i < lat + rope;
          const double limit = (rope_part ? 1.0 : quant_max) * (1 + 1e-6);
          if (!std::isfinite(r[i]) || std::fabs(r[i]) > limit) ++bad;
          row_abs += std::fabs(r[i]);
        }
        zero_rows += row_abs == 0;
        sum_abs += row_abs;
      }
    CHECK(bad == 0);
    CHECK(zero_rows == 0);
    // Uniform values: mean |v| about 0.5 for bf16 (U(-1, 1)), ~0.5 for FP8 as well (U(-1, 1) x [0.5, 1.5]).
    const double mean_abs = sum_abs / static_cast<double>(n * per);
    MESSAGE("mean |value| ", mean_abs);
    CHECK(mean_abs > 0.35);
    CHECK(mean_abs < 0.65);
  }
}
#endif

// The indexer kernels (kernels/indexer launch_indexer) on a real model's indexer inputs: the small-long
// fixture (300-token prompt, 32 indexer heads x 64 dims, top-k 64, 3 full-indexer layers), whose q / k /
// weights come from the float32 CPU backend (ForwardProbe::report_indexer_inputs) and whose ground truth is
// transformers' own selection (topk.L of reference.safetensors). Closes issue 7's "recall of the true
// top-k on scores taken from a fixture model" (the random-data half is tests/gpu/test_indexer.cu).
//
// How the fixture is fed to kernels that instantiate GLM-5's 32 x 128 only: q and k are zero-padded from 64
// to 128 dims (zeros change no dot product, and with one scale per vector (amax / 448) no FP8 value
// either); the kernel multiplies each dot by 128^-0.5 where the fixture's indexer uses 64^-0.5, and the
// probe's weights already carry 32^-0.5 * 64^-0.5, so the kernel gets weights * sqrt(128): same scores.
// q is converted by the CUDA backend's own conversion (glm5k::launch_indexer_query: bf16, or e4m3 with a
// scale per (row, head)); keys go through tests/gpu/indexer_reference.hpp's record writer (store_key: the
// rule of the backend's cache writer, amax / 448 per key) into both record formats, page size 64, pages
// scrambled. Calls as the CUDA backend makes them: a causal prefill over the 300 rows without a top-k
// workspace (more than 64 rows), and decode rows one at a time with the workspace, max_row_len = the
// cache's capacity (320).
//
// Checked per layer and format: the output format (exactly min(k, t+1) distinct slots of positions <= t,
// then -1 padding; the kernel leaves the order of a row's entries unspecified (indexer_params.hpp), so
// the ascending layout of topk.L is the test's sorting of the mapped positions, not a kernel property),
// agreement with the exact top-k of the same quantized values computed in double (the kernel's own error),
// and recall of transformers' top-k. Deterministic: fixed page permutation, no random inputs.
//
// Expected (the exact top-k of the same quantized values computed in double on the CPU, which the kernel
// should reproduce; recall of transformers' top-k, mean over the 300 prefill rows, layers 0 / 1 / 2):
// bf16 0.9990 / 0.9992 / 0.9988, FP8 0.9860 / 0.9850 / 0.9854 (worst rows 0.984 and 0.9375). Measured on
// an H200 (2026-11-30): exactly these, the kernel's top-k equal to the quantized values' exact top-k on
// every row (docs/PERFORMANCE.md "Indexer"; the [indexer-fixture] lines of the log). int8 (KeyFormat::kInt8,
// added in session 3 round 6, q quantized on the host by the reference's rule): predicted 0.9961 / 0.9965 /
// 0.9959 (bench/indexer/fp8_recall_experiment.py), held to the 0.99.
#ifdef GLM5RT_GPU_TESTS_WITH_CORE
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "fixture/indexer_probe_support.hpp"
#include "kernels/common/fast_bridge.cuh"
#include "tests/gpu/indexer_reference.hpp"

namespace {

using namespace glm5rt::indexer_test;
namespace ki = glm5rt::kernels::indexer;

#define FIX_CUDA_OK(expr)                                                              \
  do {                                                                                 \
    const cudaError_t err_ = (expr);                                                   \
    REQUIRE_MESSAGE(err_ == cudaSuccess, #expr << ": " << cudaGetErrorString(err_)); \
  } while (0)

template <class T>
struct Dev {
  T* ptr = nullptr;
  size_t count = 0;
  explicit Dev(size_t n) : count(n) { FIX_CUDA_OK(cudaMalloc(&ptr, std::max<size_t>(n, 1) * sizeof(T))); }
  explicit Dev(const std::vector<T>& h) : Dev(h.size()) {
    FIX_CUDA_OK(cudaMemcpy(ptr, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~Dev() { cudaFree(ptr); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  std::vector<T> download() const {
    std::vector<T> h(count);
    FIX_CUDA_OK(cudaMemcpy(h.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
};

constexpr int kPageSize = 64;
constexpr int kPages = 5;          // 320 slots: the cache's capacity for the 300-token prompt
constexpr int kPoolPages = 8;      // 3 pages nobody uses
// Mean recall of transformers' top-k over a path's rows. bf16: the 0.99 (the exact top-k of the
// bf16 values, computed in double on the CPU, reaches 0.9988-0.9992 per layer). FP8: the same CPU
// computation on the e4m3 values reaches 0.9850-0.9860 per layer (worst row 0.9375: 4 of 64 positions),
// so the 0.99 is NOT met by the format on this model's data; the floor is 0.98, and each row is
// held to the exact quantized top-k by the agreement checks (the kernel adds at most a near-tie flip).
constexpr double kBf16MinMeanRecall = 0.99;
constexpr double kFp8MinMeanRecall = 0.98;
// int8 (KeyFormat::kInt8, same 132 bytes, amax / 127): the same CPU computation on the int8 values reaches
// 0.9959-0.9965 per layer (bench/indexer/fp8_recall_experiment.py), so the 0.99 holds.
constexpr double kInt8MinMeanRecall = 0.99;

struct RowStats {
  double recall = 1, quant_recall = 1, agreement = 1;
};

}  // namespace

TEST_CASE("indexer kernels on the small-long fixture's indexer: recall of transformers' top-k, bf16, FP8 and int8") {
  const auto run = fixture::run_cpu_prefill("small-long", true);
  const glm5rt::ModelConfig& c = run.config;
  const int N = static_cast<int>(run.rows), nh = static_cast<int>(c.index_n_heads);
  const int d = static_cast<int>(c.index_head_dim), k = static_cast<int>(c.index_topk);
  REQUIRE(nh == ki::kHeads);
  REQUIRE(d <= ki::kHeadDim);
  REQUIRE(N <= kPages * kPageSize);
  REQUIRE(k <= ki::kMaxTopK);

  // The page permutation: deterministic, and scrambled.
  std::vector<int32_t> perm(kPoolPages);
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937_64 rng(20261130);
  std::shuffle(perm.begin(), perm.end(), rng);
  const std::vector<int32_t> table(perm.begin(), perm.begin() + kPages);
  std::vector<int> pos_of_slot(kPoolPages * kPageSize, -1);
  for (int j = 0; j < N; ++j) pos_of_slot[table[j / kPageSize] * kPageSize + j % kPageSize] = j;

  const std::vector<int> decode_rows = {0, 40, 63, 64, 65, 150, 250, 299};
  const float w_factor = std::sqrt(static_cast<float>(ki::kHeadDim));  // undoes the kernel's 128^-0.5
  int layers = 0;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    if (run.ref.topk[l].empty()) continue;
    CAPTURE(l);
    REQUIRE(run.ref.topk_k[l] == k);
    const auto& q = run.probe.indexer_q.at(l);
    const auto& kk = run.probe.indexer_k.at(l);
    const auto& pw = run.probe.indexer_w.at(l);
    REQUIRE(q.size() == static_cast<size_t>(N) * nh * d);
    REQUIRE(kk.size() == static_cast<size_t>(N) * d);
    REQUIRE(pw.size() == static_cast<size_t>(N) * nh);
    ++layers;

    // 1. On the CPU: the probe's inputs reproduce transformers' selection exactly (spot rows; every row of
    //    every fixture is checked in tests/fixture/test_indexer_probe.cpp).
    for (int t : {0, 63, 64, 100, 200, 299}) {
      const auto sel = fixture::probe_topk_row(run, l, t);
      CHECK_MESSAGE(std::equal(sel.begin(), sel.end(), run.ref.topk[l].begin() + static_cast<size_t>(t) * k),
                    "row " << t << ": the probe's q/k/w do not give transformers' top-k");
    }

    // Zero-padded float32 inputs.
    std::vector<float> q_pad(static_cast<size_t>(N) * nh * ki::kHeadDim, 0.f), k_pad(static_cast<size_t>(N) * ki::kHeadDim, 0.f);
    for (int t = 0; t < N; ++t) {
      for (int h = 0; h < nh; ++h)
        std::copy_n(&q[(static_cast<size_t>(t) * nh + h) * d], d, &q_pad[(static_cast<size_t>(t) * nh + h) * ki::kHeadDim]);
      std::copy_n(&kk[static_cast<size_t>(t) * d], d, &k_pad[static_cast<size_t>(t) * ki::kHeadDim]);
    }
    std::vector<float> w(pw.size());
    for (size_t i = 0; i < w.size(); ++i) w[i] = pw[i] * w_factor;

    for (KeyFormat fmt : {KeyFormat::kBf16, KeyFormat::kFp8, KeyFormat::kInt8}) {
      const bool fp8 = fmt == KeyFormat::kFp8, int8 = fmt == KeyFormat::kInt8, scaled = fp8 || int8;
      const char* fname = int8 ? "int8" : fp8 ? "fp8" : "bf16";
      const double min_mean_recall = int8 ? kInt8MinMeanRecall : fp8 ? kFp8MinMeanRecall : kBf16MinMeanRecall;
      CAPTURE(fname);

      // Keys into the paged cache (poisoned elsewhere), q through the backend's conversion.
      std::vector<uint8_t> cache(static_cast<size_t>(kPoolPages) * page_bytes(fmt, kPageSize), 0xEE);
      std::vector<float> key_deq(k_pad.size());
      for (int j = 0; j < N; ++j)
        store_key(cache.data(), fmt, kPageSize, table[j / kPageSize], j % kPageSize, &k_pad[static_cast<size_t>(j) * ki::kHeadDim],
                  &key_deq[static_cast<size_t>(j) * ki::kHeadDim]);
      Dev<float> q_f32(q_pad);
      Dev<uint8_t> q_dev(q_pad.size() * (scaled ? 1 : 2));
      Dev<float> q_scale(static_cast<size_t>(N) * nh);
      std::vector<float> q_deq(q_pad.size());
      if (int8) {
        // The backend has no int8 query conversion (yet): the reference's rule, amax / 127 per (row, head).
        std::vector<uint8_t> qb(q_pad.size());
        std::vector<float> qs(static_cast<size_t>(N) * nh);
        for (size_t v = 0; v < qs.size(); ++v)
          qs[v] = quantize_vec(&q_pad[v * ki::kHeadDim], fmt, &qb[v * ki::kHeadDim], &q_deq[v * ki::kHeadDim]);
        FIX_CUDA_OK(cudaMemcpy(q_dev.ptr, qb.data(), qb.size(), cudaMemcpyHostToDevice));
        FIX_CUDA_OK(cudaMemcpy(q_scale.ptr, qs.data(), qs.size() * sizeof(float), cudaMemcpyHostToDevice));
      } else {
        FIX_CUDA_OK(glm5k::launch_indexer_query(q_f32.ptr, N, nh, ki::kHeadDim, fp8, q_dev.ptr, q_scale.ptr, nullptr));
      }
      FIX_CUDA_OK(cudaDeviceSynchronize());
      const auto q_bytes = q_dev.download();
      const auto q_scales = fp8 ? q_scale.download() : std::vector<float>();
      for (size_t i = 0; i < q_deq.size() && !int8; ++i) {
        if (fp8) {
          q_deq[i] = from_e4m3(q_bytes[i]) * q_scales[i / ki::kHeadDim];
        } else {
          uint16_t b;
          std::memcpy(&b, &q_bytes[2 * i], 2);
          q_deq[i] = from_bf16(b);
        }
      }
      // The padding stays exactly zero through both conversions (what lets the reference skip it).
      bool pad_zero = true;
      for (size_t i = 0; i < q_deq.size(); ++i) pad_zero &= i % ki::kHeadDim < static_cast<size_t>(d) || q_deq[i] == 0.f;
      for (size_t i = 0; i < key_deq.size(); ++i) pad_zero &= i % ki::kHeadDim < static_cast<size_t>(d) || key_deq[i] == 0.f;
      CHECK(pad_zero);
      Dev<uint8_t> cache_dev(cache);
      Dev<int32_t> table_dev(table);
      Dev<float> w_dev(w);

      // The exact top-k of the quantized values (double), row t: what the kernel should reproduce.
      auto quant_topk = [&](int t) {
        std::vector<float> s(t + 1);
        for (int j = 0; j <= t; ++j) {
          double acc = 0;
          for (int h = 0; h < nh; ++h) {
            const float* qh = &q_deq[(static_cast<size_t>(t) * nh + h) * ki::kHeadDim];
            const float* kj = &key_deq[static_cast<size_t>(j) * ki::kHeadDim];
            double dot = 0;
            for (int i = 0; i < d; ++i) dot += static_cast<double>(qh[i]) * kj[i];  // dims >= d are zeros
            acc += static_cast<double>(w[static_cast<size_t>(t) * nh + h]) * std::max(dot * 0.08838834764831845, 0.0);
          }
          s[j] = static_cast<float>(acc);
        }
        return ref_topk_positions(s.data(), t + 1, k);
      };

      // Checks one output row (slots as the kernel wrote them) for row t; returns its statistics.
      auto check_row = [&](const int32_t* slots, int t, const char* path) {
        INFO(path << " row " << t);
        const int want = std::min(k, t + 1);
        std::set<int> got;
        int padding = 0;
        bool valid = true;
        for (int i = 0; i < k; ++i) {
          const int32_t s = slots[i];
          if (s == -1) {
            ++padding;
            continue;
          }
          const int pos = s >= 0 && s < static_cast<int32_t>(pos_of_slot.size()) ? pos_of_slot[s] : -1;
          valid &= pos >= 0 && pos <= t;  // a slot of this sequence, causal
          got.insert(pos);
        }
        CHECK(valid);
        CHECK(padding == k - want);
        CHECK(got.size() == static_cast<size_t>(want));  // no duplicates
        // In topk.L's layout: ascending positions, then -1.
        std::vector<int32_t> row(got.begin(), got.end());
        row.resize(k, -1);
        const int32_t* truth = &run.ref.topk[l][static_cast<size_t>(t) * k];
        CHECK(std::count(truth, truth + k, -1) == k - want);
        const std::set<int> truth_set(truth, truth + want);
        const auto qt = quant_topk(t);
        const std::set<int> quant_set(qt.begin(), qt.end());
        RowStats st;
        int hit = 0, qhit = 0, agree = 0;
        for (int p : truth_set) {
          hit += got.count(p) ? 1 : 0;
          qhit += quant_set.count(p) ? 1 : 0;
        }
        for (int p : quant_set) agree += got.count(p) ? 1 : 0;
        st.recall = static_cast<double>(hit) / want;
        st.quant_recall = static_cast<double>(qhit) / want;
        st.agreement = static_cast<double>(agree) / want;
        // The kernel's float32 sums against double on the same values: at most a near-tie flip or two.
        CHECK(agree >= want - 2);
        CHECK(hit >= qhit - 2);
        return st;
      };

      auto summarize = [&](const char* path, const std::vector<int>& rows, const std::vector<RowStats>& stats) {
        double rec = 0, qrec = 0, agr = 0, worst = 2, worst_agr = 2;
        int worst_row = -1, exact_rows = 0;
        for (size_t i = 0; i < stats.size(); ++i) {
          rec += stats[i].recall;
          qrec += stats[i].quant_recall;
          agr += stats[i].agreement;
          exact_rows += stats[i].recall == 1.0 ? 1 : 0;
          worst_agr = std::min(worst_agr, stats[i].agreement);
          if (stats[i].recall < worst) {
            worst = stats[i].recall;
            worst_row = rows[i];
          }
        }
        const double n = static_cast<double>(stats.size());
        std::printf("[indexer-fixture] layer %d %s %s: %zu rows, mean recall %.4f (CPU double on the same quantized "
                    "values %.4f), worst row %d recall %.4f, rows with recall 1: %d, agreement with the quantized "
                    "top-k mean %.4f worst %.4f\n",
                    l, fname, path, stats.size(), rec / n, qrec / n, worst_row, worst, exact_rows, agr / n, worst_agr);
        return std::pair<double, double>(rec / n, agr / n);
      };

      // 2. Causal prefill over all rows, as the backend calls it for more than 64 rows (no workspace).
      {
        std::vector<int32_t> row_seq(N, 0), row_len(N);
        for (int t = 0; t < N; ++t) row_len[t] = t + 1;
        Dev<int32_t> seq_dev(row_seq), len_dev(row_len);
        const int max_len = kPages * kPageSize;
        const int64_t stride = ki::indexer_score_stride(max_len);
        Dev<float> scores(static_cast<size_t>(N) * stride);
        Dev<int32_t> out(static_cast<size_t>(N) * k);
        FIX_CUDA_OK(cudaMemset(out.ptr, 0x7B, out.count * sizeof(int32_t)));
        ki::ScoreParams sp;
        sp.rows.num_rows = N;
        sp.rows.row_seq = seq_dev.ptr;
        sp.rows.row_len = len_dev.ptr;
        sp.rows.block_tables = table_dev.ptr;
        sp.rows.block_table_stride = kPages;
        sp.rows.page_size = kPageSize;
        sp.rows.max_row_len = max_len;
        sp.format = fmt;
        sp.q = q_dev.ptr;
        sp.q_scale = scaled ? q_scale.ptr : nullptr;
        sp.weights = w_dev.ptr;
        sp.key_cache = cache_dev.ptr;
        sp.scores = scores.ptr;
        sp.score_stride = stride;
        FIX_CUDA_OK(ki::launch_indexer(sp, k, out.ptr, nullptr, nullptr, 0, nullptr));
        FIX_CUDA_OK(cudaDeviceSynchronize());
        const auto slots = out.download();
        std::vector<int> rows(N);
        std::iota(rows.begin(), rows.end(), 0);
        std::vector<RowStats> stats;
        for (int t = 0; t < N; ++t) stats.push_back(check_row(&slots[static_cast<size_t>(t) * k], t, "prefill"));
        const auto [mean_recall, mean_agreement] = summarize("prefill", rows, stats);
        CHECK(mean_agreement >= 0.99);  // the kernel adds (almost) nothing to the quantization's own loss
        CHECK(mean_recall >= min_mean_recall);
      }

      // 3. Decode: one row per call with the top-k workspace (fused kernel for rows of at most k keys,
      //    scores + the one-block / cluster select for longer ones), as the backend calls it.
      {
        Dev<int32_t> seq_dev(std::vector<int32_t>{0});
        const int max_len = kPages * kPageSize;
        const int64_t stride = ki::indexer_score_stride(max_len);
        Dev<float> scores(static_cast<size_t>(stride));
        Dev<uint8_t> ws(ki::indexer_topk_workspace_bytes(1));
        FIX_CUDA_OK(ki::clear_indexer_topk_workspace(ws.ptr, ws.count, nullptr));
        std::vector<RowStats> stats;
        for (int t : decode_rows) {
          Dev<int32_t> len_dev(std::vector<int32_t>{t + 1});
          Dev<int32_t> out(static_cast<size_t>(k));
          FIX_CUDA_OK(cudaMemset(out.ptr, 0x7B, out.count * sizeof(int32_t)));
          ki::ScoreParams sp;
          sp.rows.num_rows = 1;
          sp.rows.row_seq = seq_dev.ptr;
          sp.rows.row_len = len_dev.ptr;
          sp.rows.block_tables = table_dev.ptr;
          sp.rows.block_table_stride = kPages;
          sp.rows.page_size = kPageSize;
          sp.rows.max_row_len = max_len;
          sp.format = fmt;
          sp.q = q_dev.ptr + static_cast<size_t>(t) * nh * ki::kHeadDim * (scaled ? 1 : 2);
          sp.q_scale = scaled ? q_scale.ptr + static_cast<size_t>(t) * nh : nullptr;
          sp.weights = w_dev.ptr + static_cast<size_t>(t) * nh;
          sp.key_cache = cache_dev.ptr;
          sp.scores = scores.ptr;
          sp.score_stride = stride;
          FIX_CUDA_OK(ki::launch_indexer(sp, k, out.ptr, nullptr, ws.ptr, ws.count, nullptr));
          FIX_CUDA_OK(cudaDeviceSynchronize());
          const auto slots = out.download();
          stats.push_back(check_row(slots.data(), t, "decode"));
        }
        const auto [mean_recall, mean_agreement] = summarize("decode", decode_rows, stats);
        CHECK(mean_agreement >= 0.99);
        // The rows of at most k + 1 keys are trivial; the others predicted (CPU double, quantized values)
        // at 0.9688-1 per row: the same floors hold for the mean.
        CHECK(mean_recall >= min_mean_recall);
      }
    }
  }
  CHECK(layers == 3);
}

#endif  // GLM5RT_GPU_TESTS_WITH_CORE

// glm5rt-bench --glm5-dims --layers N: times CUDA forward steps of a model with GLM-5's dimensions
// (docs/GLM5.md) and N decoder layers whose weights are random FP8 (128 x 128 block scales) made on the
// device, so no checkpoint is needed. Decode steps at batch 1 and 32 over a synthesized context (random
// bf16 cache records), greedy sampling on the device, and prefill tokens/s for a long prompt. Prints a
// table with the bytes-or-flops floor beside each figure and writes JSON.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.hpp"
#include "runtime/error.hpp"

using namespace glm5rt;

namespace {

struct Options {
  bool glm5_dims = false;
  int layers = 4, dense_layers = 1, steps = 20, device = 0;
  std::vector<int> batches = {1, 32}, contexts;
  int context = 8192, prefill = 4096, chunk = 4096;
  bool stages = false;
  std::vector<std::pair<std::string, std::string>> variants;  // (kernels, fp8 path) runs on one model
  std::string json = "forward-bench.json", fp8_path = "auto", commit = "unknown", kernels;
  bool fp8_cache = false;  // --cache-dtype fp8: FP8 e4m3 latent records (656 bytes) and indexer keys (132)
  double bw = 4.3e12, flops = 7.9e14;  // measured ceilings on the H200 (docs/device KINDS.md): copy, bf16 GEMM
};

ModelConfig glm5_config(int layers, int dense_layers) {
  ModelConfig c;
  c.vocab_size = 154880;
  c.hidden_size = 6144;
  c.num_hidden_layers = layers;
  c.intermediate_size = 12288;
  c.moe_intermediate_size = 2048;
  c.n_routed_experts = 256;
  c.num_experts_per_tok = 8;
  c.n_shared_experts = 1;
  c.routed_scaling_factor = 2.5;
  c.num_attention_heads = 64;
  c.q_lora_rank = 2048;
  c.kv_lora_rank = 512;
  c.qk_nope_head_dim = 192;
  c.qk_rope_head_dim = 64;
  c.v_head_dim = 256;
  c.index_n_heads = 32;
  c.index_head_dim = 128;
  c.index_topk = 2048;
  c.rms_norm_eps = 1e-5;
  c.rope.theta = 1e6;
  c.max_position_embeddings = 202752;
  c.quant.fp8 = true;
  for (int l = 0; l < layers; ++l) {
    c.indexer_types.push_back(IndexerType::full);
    c.mlp_types.push_back(l < dense_layers ? MlpType::dense : MlpType::moe);
  }
  return c;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Bytes one decode step must read at batch B and context C: weights once (experts: the expected number
// of distinct experts hit by B * 8 uniform choices), each row's indexer keys and selected latent records,
// lm_head once.
struct Floor {
  double bytes = 0, flops = 0;
};
Floor decode_floor(const ModelConfig& c, int B, int C, bool fp8_cache) {
  const double D = c.hidden_size, H = c.num_attention_heads, qlr = c.q_lora_rank, kvr = c.kv_lora_rank;
  const double rope = c.qk_rope_head_dim, nope = c.qk_nope_head_dim, vh = c.v_head_dim;
  const double attn_fp8 = qlr * D + H * (nope + rope) * qlr + (kvr + rope) * D + D * H * vh +
                          c.index_n_heads * c.index_head_dim * qlr + c.index_head_dim * D;
  const double attn_bf16 = 2.0 * (H * kvr * nope + H * vh * kvr + c.index_n_heads * D);
  const double expert = 3.0 * D * c.moe_intermediate_size;
  const double distinct = c.n_routed_experts * (1.0 - std::pow(1.0 - double(c.num_experts_per_tok) / c.n_routed_experts, B));
  Floor f;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    f.bytes += attn_fp8 + attn_bf16;
    f.flops += 2.0 * B * (attn_fp8 + attn_bf16 / 2);
    if (c.mlp_types[l] == MlpType::moe) {
      f.bytes += (distinct + c.n_shared_experts) * expert + 4.0 * c.n_routed_experts * D;
      f.flops += 2.0 * B * (c.num_experts_per_tok + c.n_shared_experts) * expert;
    } else {
      f.bytes += 3.0 * D * c.intermediate_size;
      f.flops += 2.0 * B * 3.0 * D * c.intermediate_size;
    }
    const double sel = std::min<double>(c.index_topk, C);
    const double index_record = fp8_cache ? c.index_head_dim + 4.0 : 2.0 * c.index_head_dim;
    const double latent_record = fp8_cache ? kvr + 4.0 * std::ceil(kvr / 128) + 2.0 * rope : 2.0 * (kvr + rope);
    f.bytes += B * (C * index_record + sel * latent_record);
    f.flops += B * (2.0 * C * c.index_n_heads * c.index_head_dim + 2.0 * H * sel * (2 * kvr + rope));
  }
  f.bytes += 2.0 * c.vocab_size * D;
  f.flops += 2.0 * B * c.vocab_size * D;
  return f;
}

Floor prefill_floor(const ModelConfig& c, int P) {
  // Weights once (P rows hit every expert), flops of P rows, attention and indexer over growing contexts.
  const double D = c.hidden_size, H = c.num_attention_heads, kvr = c.kv_lora_rank, rope = c.qk_rope_head_dim;
  const double expert = 3.0 * D * c.moe_intermediate_size;
  Floor f;
  const Floor w1 = decode_floor(c, 1, 1, false);
  f.flops = P * (w1.flops - 2.0 * c.vocab_size * D) + 2.0 * c.vocab_size * D;
  f.bytes = w1.bytes;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    if (c.mlp_types[l] == MlpType::moe) f.bytes += (c.n_routed_experts - 1) * expert;
    for (int p = 0; p < P; ++p) {
      const double sel = std::min<double>(c.index_topk, p + 1);
      f.flops += 2.0 * (p + 1) * c.index_n_heads * c.index_head_dim + 2.0 * H * sel * (2 * kvr + rope) -
                 (2.0 * c.index_n_heads * c.index_head_dim + 2.0 * H * 1 * (2 * kvr + rope));
    }
  }
  return f;
}

std::string now_utc() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string cmdline;
  for (int i = 0; i < argc; ++i) cmdline += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--glm5-dims") o.glm5_dims = true;
    else if (a == "--layers") o.layers = std::atoi(next().c_str());
    else if (a == "--dense-layers") o.dense_layers = std::atoi(next().c_str());
    else if (a == "--steps") o.steps = std::atoi(next().c_str());
    else if (a == "--context") o.context = std::atoi(next().c_str());
    else if (a == "--prefill") o.prefill = std::atoi(next().c_str());
    else if (a == "--chunk") o.chunk = std::atoi(next().c_str());
    else if (a == "--device") o.device = std::atoi(next().c_str());
    else if (a == "--json") o.json = next();
    else if (a == "--fp8-path") o.fp8_path = next();
    else if (a == "--kernels") o.kernels = next();
    else if (a == "--stages") o.stages = true;
    else if (a == "--cache-dtype") {
      const std::string d = next();
      if (d != "bf16" && d != "fp8") {
        std::fprintf(stderr, "--cache-dtype must be bf16 or fp8, got %s\n", d.c_str());
        return 2;
      }
      o.fp8_cache = d == "fp8";
    }
    else if (a == "--variants") {
      std::stringstream ss(next());
      for (std::string t; std::getline(ss, t, ',');) {
        const size_t colon = t.find(':');
        o.variants.emplace_back(t.substr(0, colon), colon == std::string::npos ? "auto" : t.substr(colon + 1));
      }
    }
    else if (a == "--contexts") {
      std::stringstream ss(next());
      std::string item;
      while (std::getline(ss, item, ',')) o.contexts.push_back(std::atoi(item.c_str()));
    }
    else if (a == "--commit") o.commit = next();
    else if (a == "--bw") o.bw = std::atof(next().c_str());
    else if (a == "--peak-flops") o.flops = std::atof(next().c_str());
    else if (a == "--batches") {
      o.batches.clear();
      std::stringstream ss(next());
      for (std::string t; std::getline(ss, t, ',');) o.batches.push_back(std::atoi(t.c_str()));
    } else {
      std::fprintf(stderr,
                   "usage: glm5rt-bench --glm5-dims [--layers N] [--dense-layers N] [--batches 1,32] [--context 8192]\n"
                   "       [--contexts 8192,32768] [--prefill 4096] [--chunk 4096] [--steps 20]\n"
                   "       [--kernels simple|fast-mla|fast-attn|fast] [--fp8-path auto|gemm|dequant|direct] [--stages]\n"
                   "       [--cache-dtype bf16|fp8]\n"
                   "       [--variants KERNELS:FP8PATH[:nosplit][:perseq][:group|:groupearly|:nogroup][:fuse|:nofuse],...] [--json FILE]\n"
                   "--variants runs the decode and prefill cases once per (kernels, FP8 path) on the same model;\n"
                   "the first variant's results are also the JSON's top-level decode / prefill.\n");
      return 2;
    }
  }
  if (!o.glm5_dims) {
    std::fprintf(stderr, "only --glm5-dims is implemented (a GLM-5-dimension model with random FP8 weights)\n");
    return 2;
  }
  try {
    std::string why;
    if (!cuda_device_usable(o.device, &why)) {
      std::fprintf(stderr, "%s\n", why.c_str());
      return 77;
    }
    cudaDeviceProp prop{};
    cuda::check(cudaGetDeviceProperties(&prop, o.device), "cudaGetDeviceProperties");
    cuda::check(cudaSetDevice(o.device), "cudaSetDevice");
    const ModelConfig c = glm5_config(o.layers, std::min(o.dense_layers, o.layers));
    auto t0 = std::chrono::steady_clock::now();
    cuda::CudaBackend be(c, cuda::random_weights(c, 1234), o.device);
    be.set_fp8_path(o.fp8_path);
    if (!o.kernels.empty()) be.set_kernels(o.kernels);
    if (o.contexts.empty()) o.contexts.push_back(o.context);
    CacheDtypes cache_dtypes;  // AUTO = bf16 records on CUDA
    if (o.fp8_cache) cache_dtypes.latent = cache_dtypes.index = GLM5RT_DTYPE_FP8_E4M3;
    const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto mem = be.memory();
    std::printf(
        "glm5rt-bench: %s, GLM-5 dims, %d layers (%d dense), random FP8 weights %.2f GiB (made in %.1f s), "
        "fp8 path %s, %s cache records\n",
        prop.name, o.layers, std::min(o.dense_layers, o.layers), mem.weights / 1073741824.0, load_s,
        o.fp8_path.c_str(), o.fp8_cache ? "FP8" : "bf16");
    if (o.variants.empty()) o.variants.emplace_back(be.kernels(), o.fp8_path);
    std::mt19937 rng(7);
    std::ostringstream js;
    js << "{\n  \"command\": \"" << cmdline << "\",\n  \"date\": \"" << now_utc() << "\",\n  \"card\": \"" << prop.name
       << "\",\n  \"commit\": \"" << o.commit << "\",\n  \"layers\": " << o.layers
       << ",\n  \"dense_layers\": " << std::min(o.dense_layers, o.layers) << ",\n  \"cache_dtype\": \""
       << (o.fp8_cache ? "fp8" : "bf16") << "\",\n  \"fp8_path\": \""
       << o.variants[0].second << "\",\n  \"kernels\": \"" << o.variants[0].first
       << "\",\n  \"fast_moe_layers\": " << be.fast_moe_layers() << ",\n  \"bandwidth_ceiling\": " << o.bw
       << ",\n  \"flops_ceiling\": " << o.flops << ",\n  \"weights_bytes\": " << mem.weights << ",\n  \"variants\": [";
    std::string decode0, prefill0;
    const bool group_default = be.proj_grouping();  // GLM5RT_CUDA_PROJ_GROUP at construction
    const bool early_default = be.proj_group_early();  // GLM5RT_CUDA_PROJ_GROUP_EARLY
    const bool fuse_default = be.attention_fusion();  // GLM5RT_CUDA_ATTN_FUSE
    for (size_t vi = 0; vi < o.variants.size(); ++vi) {
      // KERNELS:FP8PATH[:nosplit][:perseq] (nosplit: fp8_gemm without split-K; perseq: the fast attention
      // kernels launched once per cache, not once over all caches' pools)
      std::string path = o.variants[vi].second;
      bool split = true, batched = true;
      int group = -1, early = -1;  // grouped attention projections: -1 the backend's defaults (environment)
      int fuse = -1;  // attention-stage fusion (set_attention_fusion): -1 the backend's default
      for (size_t colon = path.find(':'); colon != std::string::npos; colon = path.find(':')) {
        std::string rest = path.substr(colon + 1);
        path = path.substr(0, colon);
        for (std::stringstream flags(rest); std::getline(flags, rest, ':');) {
          if (rest == "nosplit") split = false;
          else if (rest == "perseq") batched = false;
          else if (rest == "group") group = 1, early = 0;
          else if (rest == "groupearly") group = 1, early = 1;
          else if (rest == "nogroup") group = 0;
          else if (rest == "fuse") fuse = 1;
          else if (rest == "nofuse") fuse = 0;
          else
            fail(Status::invalid_argument, "unknown variant flag ", rest,
                 " (nosplit, perseq, group, groupearly, nogroup, fuse, nofuse)");
        }
      }
      be.set_kernels(o.variants[vi].first);
      be.set_fp8_path(path);
      be.set_fp8_split_k(split);
      be.set_batch_attention(batched);
      be.set_proj_grouping(group < 0 ? group_default : group == 1);
      be.set_proj_group_early(early < 0 ? early_default : early == 1);
      be.set_attention_fusion(fuse < 0 ? fuse_default : fuse == 1);
      std::ostringstream jd, jp;  // this variant's decode and prefill entries
      std::printf(
          "\nkernels: %s (GLM5RT_CUDA_KERNELS / --kernels), MoE layers through moe_forward: %lld of %d, fp8 path %s, "
          "split-K %s, attention over several caches %s, grouped attention projections %s, attention fusion %s\n",
          be.kernels().c_str(), static_cast<long long>(be.fast_moe_layers()),
          o.layers - std::min(o.dense_layers, o.layers), be.fp8_path().c_str(), be.fp8_split_k() ? "on" : "off",
          be.batch_attention() ? "one launch (batched)" : "one launch per cache",
          be.proj_grouping() ? (be.proj_group_early() ? "on, early weights" : "on") : "off",
          be.attention_fusion() ? "on" : "off");
      std::printf("\n%-28s %12s %12s %12s %10s\n", "case", "measured", "per layer", "floor", "floor/meas");
      const int ps = 64;
      bool first = true;
      for (int C : o.contexts)
        for (int B : o.batches) {
          const int pages = (C + ps - 1) / ps;
          std::vector<std::unique_ptr<CacheStorage>> caches;
          std::vector<std::vector<int32_t>> tables;
          for (int b = 0; b < B; ++b) {
            caches.push_back(be.create_cache(pages, ps, cache_dtypes));
            be.fill_cache_random(*caches.back(), 100 + b);
            std::vector<int32_t> bt(pages);
            for (int p = 0; p < pages; ++p) bt[p] = p;
            tables.push_back(bt);
          }
          std::vector<double> times;
          const int warm = 3;
          std::vector<int32_t> next(B);
          for (auto& t : next) t = static_cast<int32_t>(rng() % c.vocab_size);
          for (int s = 0; s < warm + o.steps; ++s) {
            BatchPlan plan;
            const int64_t pos = C - 1 - (warm + o.steps) + s;
            for (int b = 0; b < B; ++b) plan.add_sequence(caches[b].get(), tables[b], ps, pos, &next[b], 1);
            for (int b = 0; b < B; ++b) plan.logit_rows.push_back(b);
            const auto a = std::chrono::steady_clock::now();
            be.forward_device(plan, {}, nullptr);
            next = be.argmax_last();  // greedy sampling on the device; synchronizes
            const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
            if (s >= warm) times.push_back(dt);
          }
          // Stage times (--stages): the same step replayed with events between the stages (graph nodes),
          // median over 5 steps of each stage.
          cuda::StageTimes st;
          if (o.stages) try {
            be.set_stage_timing(true);
            std::vector<double> at, ap, dm, mo, hd, tot;
            for (int s = 0; s < 7; ++s) {
              BatchPlan plan;
              const int64_t pos = C - 1 - 7 + s;
              for (int b = 0; b < B; ++b) plan.add_sequence(caches[b].get(), tables[b], ps, pos, &next[b], 1);
              for (int b = 0; b < B; ++b) plan.logit_rows.push_back(b);
              be.forward_device(plan, {}, nullptr);
              const cuda::StageTimes x = be.last_stage_times();
              next = be.argmax_last();
              if (s < 2) continue;
              at.push_back(x.attention_ms);
              ap.push_back(x.attention_proj_ms);
              dm.push_back(x.dense_mlp_ms);
              mo.push_back(x.moe_ms);
              hd.push_back(x.head_ms);
              tot.push_back(x.total_ms);
            }
            be.set_stage_timing(false);
            st.attention_ms = median(at);
            st.attention_proj_ms = median(ap);
            st.dense_mlp_ms = median(dm);
            st.moe_ms = median(mo);
            st.head_ms = median(hd);
            st.total_ms = median(tot);
          } catch (const Error& e) {  // stage timing is an extra: keep the run's main figures
            std::fprintf(stderr, "stage timing failed (%s); continuing without it\n", e.what());
            o.stages = false;
            be.set_stage_timing(false);
          }
          const double t = median(times);
          const Floor f = decode_floor(c, B, C, o.fp8_cache);
          const double floor_t = std::max(f.bytes / o.bw, f.flops / o.flops);
          char label[64];
          std::snprintf(label, sizeof label, "decode batch %d ctx %d", B, C);
          std::printf("%-28s %9.3f ms %9.3f ms %9.3f ms %10.3f\n", label, t * 1e3, t * 1e3 / o.layers, floor_t * 1e3,
                      floor_t / t);
          jd << (first ? "" : ",") << "\n    {\"batch\": " << B << ", \"context\": " << C
             << ", \"step_ms\": " << t * 1e3 << ", \"per_layer_ms\": " << t * 1e3 / o.layers
             << ", \"tokens_per_s\": " << B / t << ", \"floor_ms\": " << floor_t * 1e3
             << ", \"floor_bytes\": " << f.bytes << ", \"floor_flops\": " << f.flops
             << ", \"graphs_captured\": " << be.graphs_captured() << ", \"graph_replays\": " << be.graph_replays()
             << ", \"batched_attention\": " << (be.last_forward_batched_attention() ? "true" : "false")
             << ", \"attn_fused_launches\": " << be.last_forward_attn_fused();
          if (o.stages) {
            const int moe_layers = o.layers - std::min(o.dense_layers, o.layers);
            std::printf(
                "%-28s stages (graph, device time): attention %.3f ms (%.3f / layer, of which projections %.3f), "
                "dense MLP %.3f ms, MoE %.3f ms (%.3f / MoE layer), lm_head %.3f ms, total %.3f ms\n",
                "", st.attention_ms, st.attention_ms / o.layers, st.attention_proj_ms / o.layers, st.dense_mlp_ms,
                st.moe_ms, moe_layers ? st.moe_ms / moe_layers : 0.0, st.head_ms, st.total_ms);
            jd << ", \"stages_ms\": {\"attention\": " << st.attention_ms
               << ", \"attention_projections\": " << st.attention_proj_ms << ", \"dense_mlp\": " << st.dense_mlp_ms
               << ", \"moe\": " << st.moe_ms << ", \"lm_head\": " << st.head_ms << ", \"total\": " << st.total_ms
               << "}";
          }
          jd << "}";
          first = false;
        }
      if (o.prefill > 0) {
        const int P = o.prefill, pages = (P + ps - 1) / ps;
        auto cache = be.create_cache(pages, ps, cache_dtypes);
        std::vector<int32_t> bt(pages);
        for (int p = 0; p < pages; ++p) bt[p] = p;
        std::vector<int32_t> prompt(P);
        for (auto& t : prompt) t = static_cast<int32_t>(rng() % c.vocab_size);
        std::vector<double> times;
        for (int rep = 0; rep < 3; ++rep) {
          const auto a = std::chrono::steady_clock::now();
          for (int at = 0; at < P; at += o.chunk) {
            const int n = std::min(o.chunk, P - at);
            BatchPlan plan;
            plan.add_sequence(cache.get(), bt, ps, at, prompt.data() + at, n);
            if (at + n == P) plan.logit_rows.push_back(n - 1);
            be.forward_device(plan, {}, nullptr);
          }
          be.argmax_last();
          const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
          if (rep > 0) times.push_back(dt);
        }
        const double t = median(times);
        const Floor f = prefill_floor(c, P);
        const double floor_t = std::max(f.bytes / o.bw, f.flops / o.flops);
        char label[64];
        std::snprintf(label, sizeof label, "prefill %d (chunk %d)", P, o.chunk);
        std::printf("%-28s %9.3f ms %9.3f ms %9.3f ms %10.3f   %.0f tokens/s (floor %.0f)\n", label, t * 1e3,
                    t * 1e3 / o.layers, floor_t * 1e3, floor_t / t, P / t, P / floor_t);
        jp << "\n    {\"tokens\": " << P << ", \"chunk\": " << o.chunk << ", \"ms\": " << t * 1e3
           << ", \"per_layer_ms\": " << t * 1e3 / o.layers << ", \"tokens_per_s\": " << P / t
           << ", \"floor_ms\": " << floor_t * 1e3 << ", \"floor_bytes\": " << f.bytes
           << ", \"floor_flops\": " << f.flops << "}";
      }
      js << (vi ? "," : "") << "\n    {\"kernels\": \"" << be.kernels() << "\", \"fp8_path\": \"" << be.fp8_path()
         << "\", \"split_k\": \"" << (be.fp8_split_k() ? "on" : "off")
         << "\", \"proj_grouping\": \"" << (be.proj_grouping() ? (be.proj_group_early() ? "early" : "on") : "off")
         << "\", \"attention_fusion\": \"" << (be.attention_fusion() ? "on" : "off")
         << "\", \"decode\": [" << jd.str() << "\n    ], \"prefill\": [" << jp.str() << "\n    ]}";
      if (vi == 0) {
        decode0 = jd.str();
        prefill0 = jp.str();
      }
    }  // variants
    js << "\n  ],\n  \"decode\": [" << decode0 << "\n  ],\n  \"prefill\": [" << prefill0;
    const auto m2 = be.memory();
    js << "\n  ],\n  \"memory\": {\"weights\": " << m2.weights << ", \"workspace\": " << m2.workspace
       << ", \"dequant\": " << m2.dequant << ", \"cublas\": " << m2.cublas << "}\n}\n";
    std::ofstream(o.json) << js.str();
    std::printf(
        "\nfloors: bytes / %.2f TB/s or flops / %.0f TFLOP/s, whichever is larger (bf16 rate; FP8 MMA would "
        "halve the flops term). JSON: %s\n",
        o.bw / 1e12, o.flops / 1e12, o.json.c_str());
    std::printf("memory: weights %.2f GiB, work buffers %.2f GiB, FP8 dequant workspace %.0f MiB\n",
                m2.weights / 1073741824.0, m2.workspace / 1073741824.0, m2.dequant / 1048576.0);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "glm5rt-bench: error %d: %s\n", static_cast<int>(e.status()), e.what());
    return 1;
  }
}

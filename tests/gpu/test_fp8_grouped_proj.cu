// fp8_gemm's grouped-projection form against a CPU reference: several dense projections that read the same
// activations as unequal parts of ONE launch (Fp8GemmParams::varied_parts; GLM-5's q_a | kv_a | indexer wk),
// optionally split-K over S K-slices read in place from the original tensors (ldw / ld_wscale: no weight
// copies), then fp8_split_reduce summing the bf16 partials into each part's float32 output. The reference
// decodes the FP8 weights and activations exactly, sums each slice in float64 and rounds it to bf16 as the
// GEMM's partial output is, then adds the slices in float32 in slice order. Outputs poisoned (NaN) first.
#include <doctest/doctest.h>

#include <string>

#include "kernels/gemm/fp8_gemm.h"
#include "tests/gpu/fp8_reference.hpp"

using namespace fp8ref;
namespace k = glm5rt::kernels;

namespace {

struct PartWeights {
  std::vector<HostFp8Weight> host;
  std::vector<std::vector<float>> deq;
  std::vector<DeviceBuffer<uint8_t>*> w;
  std::vector<DeviceBuffer<float>*> s;
  ~PartWeights() {
    for (auto* b : w) delete b;
    for (auto* b : s) delete b;
  }
};

void make_parts(PartWeights& pw, const std::vector<int>& rows, int kdim, std::mt19937& rng) {
  for (int n : rows) {
    pw.host.push_back(random_weight(n, kdim, rng));
    pw.deq.push_back(dequant(pw.host.back()));
    pw.w.push_back(new DeviceBuffer<uint8_t>(pw.host.back().q.size()));
    pw.s.push_back(new DeviceBuffer<float>(pw.host.back().scale.size()));
    pw.w.back()->upload(pw.host.back().q);
    pw.s.back()->upload(pw.host.back().scale);
  }
}

// One grouped launch of the parts for M rows, S slices, then the reduction; compared with the reference.
void run_grouped(const PartWeights& pw, int kdim, int M, int S, int decode_kernel, std::mt19937& rng) {
  const int P = static_cast<int>(pw.host.size()), ks = kdim / S, kbs = ks / 128;
  REQUIRE(kdim % (S * 128) == 0);
  const auto x = random_bf16(static_cast<size_t>(M) * kdim, rng);
  DeviceBuffer<uint16_t> dx(x.size());
  dx.upload(x);
  DeviceBuffer<uint8_t> dq(x.size());
  DeviceBuffer<float> ds(static_cast<size_t>(M) * (kdim / 128));
  CUDA_OK(k::fp8_quantize_groups(reinterpret_cast<const __nv_bfloat16*>(dx.ptr), kdim, M, kdim, dq.ptr, kdim, ds.ptr,
                                 kdim / 128, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  const auto xa = dequant_act(dq.download(), ds.download(), M, kdim);

  k::Fp8GemmParams g;
  k::Fp8SplitReduceParams r;
  std::vector<int> begin(P + 1, 0);
  for (int p = 0; p < P; ++p) begin[p + 1] = begin[p] + pw.host[p].n;
  const int n = begin[P];
  std::vector<const uint8_t*> tw;
  std::vector<const float*> ts;
  for (int sl = 0; sl < S; ++sl)
    for (int p = 0; p < P; ++p) {
      tw.push_back(pw.w[p]->ptr + static_cast<size_t>(sl) * ks);
      ts.push_back(pw.s[p]->ptr + static_cast<size_t>(sl) * kbs);
    }
  DeviceBuffer<const uint8_t*> dtw(tw.size());
  DeviceBuffer<const float*> dts(ts.size());
  dtw.upload(tw);
  dts.upload(ts);
  // The split-K grouping (the CUDA backend's plan): group s = rows [s M, (s + 1) M), partial row s M + t
  // reads activation row t S + s of the [M S, K / S] view.
  std::vector<int> offsets, active, tiles, map;
  for (int s = 0; s <= S; ++s) offsets.push_back(s * M);
  for (int s = 0; s < S; ++s) active.push_back(s);
  for (int s = 0; s <= S; ++s) tiles.push_back(s * ((M + 63) / 64));
  for (int s = 0; s < S; ++s)
    for (int t = 0; t < M; ++t) map.push_back(t * S + s);
  DeviceBuffer<int> doff(offsets.size()), dact(active.size()), dnact(1), dtiles(tiles.size()), dmap(map.size());
  doff.upload(offsets);
  dact.upload(active);
  dnact.upload({S});
  dtiles.upload(tiles);
  dmap.upload(map);
  DeviceBuffer<uint16_t> part(static_cast<size_t>(S) * M * n);
  part.poison();
  std::vector<DeviceBuffer<float>*> outs;
  for (int p = 0; p < P; ++p) {
    outs.push_back(new DeviceBuffer<float>(static_cast<size_t>(M) * pw.host[p].n));
    outs.back()->poison();
  }

  g.n = n;
  g.k = ks;
  g.a = dq.ptr;
  g.a_scale = ds.ptr;
  g.lda = ks;
  g.ld_scale = kbs;
  g.w = dtw.ptr;
  g.w_scale = dts.ptr;
  g.num_parts = P;
  g.varied_parts = true;
  for (int p = 0; p <= P; ++p) g.part_begin[p] = begin[p];
  g.ldw = kdim;
  g.ld_wscale = kdim / 128;
  g.c = reinterpret_cast<__nv_bfloat16*>(part.ptr);
  g.ldc = n;
  g.max_rows = S * M;
  g.path = k::Fp8GemmPath::decode;
  g.decode_kernel = decode_kernel;
  g.expected_rows_per_group = M;
  g.pdl = true;  // as the backend launches it (ignored below sm_90)
  if (S > 1) {
    g.a_row_map = dmap.ptr;
    g.num_groups = S;
    g.group_offsets = doff.ptr;
    g.active_groups = dact.ptr;
    g.num_active = dnact.ptr;
    g.tile_prefix = dtiles.ptr;
    g.max_active = S;
  }
  CUDA_OK(k::fp8_gemm(g, nullptr));
  r.in = reinterpret_cast<const __nv_bfloat16*>(part.ptr);
  r.ld_in = n;
  r.slices = S;
  r.rows = M;
  r.n = n;
  r.num_parts = P;
  for (int p = 0; p <= P; ++p) r.part_begin[p] = begin[p];
  for (int p = 0; p < P; ++p) r.out[p] = outs[p]->ptr;
  r.pdl = true;
  CUDA_OK(k::fp8_split_reduce(r, nullptr));
  CUDA_OK(cudaDeviceSynchronize());

  // ref: the slices' exact sums rounded to bf16, added in float32 in slice order (what the GEMM and the
  // reduction compute, up to float accumulation inside a slice). A slice's float sum may round to the
  // other bf16 neighbour than its exact sum does (at most one bf16 ulp, <= 2^-7 of the slice's value),
  // so each element is bounded against the exact total by sum_s 2^-7 |slice_s| (+ a float32 margin),
  // and the rounding model is checked in the aggregate (rel_l2).
  std::vector<float> out;
  std::vector<double> ref, exact, bound;
  for (int p = 0; p < P; ++p) {
    const int np = pw.host[p].n;
    const auto o = outs[p]->download();
    const size_t at = ref.size();
    ref.resize(at + static_cast<size_t>(M) * np);
    exact.resize(ref.size());
    bound.resize(ref.size());
    parallel_for(M * np, [&](int i) {
      const int t = i / np, row = i % np;
      float acc = 0.f;
      double tot = 0, b = 0;
      for (int sl = 0; sl < S; ++sl) {
        const double part_sum = dot(&xa[static_cast<size_t>(t) * kdim + sl * ks],
                                    &pw.deq[p][static_cast<size_t>(row) * kdim + sl * ks], ks);
        acc += round_bf16(static_cast<float>(part_sum));
        tot += part_sum;
        b += std::fabs(part_sum) / 128.0;
      }
      ref[at + i] = acc;
      exact[at + i] = tot;
      bound[at + i] = b;
    });
    out.insert(out.end(), o.begin(), o.end());
  }
  for (auto* b : outs) delete b;
  double ss = 0;
  for (double e : exact) ss += e * e;
  const double rms = std::sqrt(ss / std::max<size_t>(1, exact.size()));
  long long outside = 0;
  for (size_t i = 0; i < out.size(); ++i)
    if (!(std::fabs(out[i] - exact[i]) <= bound[i] + 1e-4 * rms)) ++outside;  // NaN counts
  const auto cmp = compare(out, ref, 8e-3, 2e-3);
  std::string shape;
  for (int p = 0; p < P; ++p) shape += (p ? "|" : "") + std::to_string(pw.host[p].n);
  MESSAGE("parts " << shape << " k=" << kdim << " M=" << M << " S=" << S << " decode_kernel=" << decode_kernel
                   << " rel_l2 (vs rounded slices)=" << cmp.rel_l2 << " outside the rounding bound=" << outside
                   << " non-finite=" << cmp.non_finite);
  CHECK(cmp.non_finite == 0);
  CHECK(outside == 0);
  CHECK(cmp.rel_l2 < 2e-3);
}

}  // namespace

TEST_CASE("fp8 gemm grouped projections: GLM-5 q_a | kv_a | indexer wk in one launch, split-K in place") {
  std::mt19937 rng(std::random_device{}());
  PartWeights pw;
  make_parts(pw, {2048, 576, 128}, 6144, rng);  // kv_a's last scale block is partial (576 = 4.5 x 128)
  run_grouped(pw, 6144, 1, 1, 0, rng);   // no split: one dense launch over the three parts
  run_grouped(pw, 6144, 1, 12, 0, rng);  // the backend's rule for n = 2752: 12 slices (cp.async ring)
  run_grouped(pw, 6144, 1, 12, 1, rng);  // register ring
  run_grouped(pw, 6144, 5, 16, 0, rng);  // 2-token-tile kernel
  run_grouped(pw, 6144, 32, 4, 0, rng);  // 4-token-tile kernel (32 rows)
}

TEST_CASE("fp8 gemm grouped projections: a last part narrower than a block, k = 2048") {
  std::mt19937 rng(std::random_device{}());
  PartWeights pw;
  make_parts(pw, {256, 576, 32}, 2048, rng);  // boundaries 0, 256, 832 (13 x 64), n = 864
  for (int S : {1, 2, 4}) run_grouped(pw, 2048, 3, S, 0, rng);
  run_grouped(pw, 2048, 1, 8, 2, rng);  // cp.async ring forced
}

TEST_CASE("fp8 gemm grouped projections: bad parameters are rejected") {
  k::Fp8GemmParams p;
  p.n = 192;
  p.k = 256;
  p.lda = 256;
  p.ld_scale = 2;
  p.ldc = 192;
  p.max_rows = 1;
  p.varied_parts = true;
  p.num_parts = 2;
  p.part_begin[0] = 0;
  p.part_begin[1] = 100;  // not on a 64-row block
  p.part_begin[2] = 192;
  CHECK(k::fp8_gemm(p, nullptr) == cudaErrorInvalidValue);
  p.part_begin[1] = 128;
  p.part_begin[2] = 190;  // does not end at n
  CHECK(k::fp8_gemm(p, nullptr) == cudaErrorInvalidValue);
  p.part_begin[2] = 192;
  p.num_parts = 9;  // more than kFp8MaxVariedParts
  CHECK(k::fp8_gemm(p, nullptr) == cudaErrorInvalidValue);
  p.num_parts = 2;
  p.path = k::Fp8GemmPath::prefill;  // the prefill kernel has no unequal parts
  CHECK(k::fp8_gemm(p, nullptr) == cudaErrorInvalidValue);
  p.varied_parts = false;
  p.num_parts = 1;
  p.ldw = 128;  // narrower than k
  CHECK(k::fp8_gemm(p, nullptr) == cudaErrorInvalidValue);
  p.ldw = 264;  // not a multiple of 16
  CHECK(k::fp8_gemm(p, nullptr) == cudaErrorInvalidValue);

  k::Fp8SplitReduceParams r;
  r.rows = 1;
  r.n = 64;
  r.ld_in = 64;
  r.num_parts = 2;
  r.part_begin[1] = 12;  // not a multiple of 8
  r.part_begin[2] = 64;
  CHECK(k::fp8_split_reduce(r, nullptr) == cudaErrorInvalidValue);
  r.part_begin[1] = 16;
  CHECK(k::fp8_split_reduce(r, nullptr) == cudaErrorInvalidValue);  // null pointers
  r.slices = 0;
  CHECK(k::fp8_split_reduce(r, nullptr) == cudaErrorInvalidValue);
}

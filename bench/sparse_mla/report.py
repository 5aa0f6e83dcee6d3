#!/usr/bin/env python3
"""Merge the sparse MLA benchmark JSON with the Triton baseline and the ceilings; print the summary table.

roofline_us = max(bytes / copy bandwidth, FLOPs / cuBLAS bf16 GEMM rate), both ceilings measured in the
same run (triton_baseline.py). 'of roofline' = roofline_us / measured_us (1.0 = at the ceiling).
'vs Triton' = Triton (best split, bf16 records) time / ours, for both of our record formats.
"""
import argparse
import datetime
import json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--triton", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--command", default="")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--triton-source", default="measured in this run",
                    help="where the Triton numbers and the ceilings come from (recorded in the JSON)")
    args = ap.parse_args()
    ours = json.load(open(args.ours))
    try:
        tri = json.load(open(args.triton))
    except (OSError, ValueError) as e:
        print(f"no Triton results ({e}); ceilings fall back to the C++ copy measurement only")
        tri = {"results": []}
    copy = tri.get("copy_tbps") or ours["copy_tbps"]
    gemm = tri.get("gemm_bf16_tflops")
    tmap = {(r["phase"], r["T"], r["H"]): r for r in tri.get("results", [])}
    rows = []
    for r in ours["results"]:
        t_bytes = r["bytes"] / (copy * 1e12) * 1e6
        t_flops = r["flops"] / (gemm * 1e12) * 1e6 if gemm else 0.0
        roof = max(t_bytes, t_flops)
        tr = tmap.get((r["phase"], r["T"], r["H"]))
        row = dict(r)
        row["roofline_us"] = roof
        row["bound"] = "memory" if t_bytes >= t_flops else "compute"
        row["of_roofline"] = roof / r["graph_us"]
        # Session 8: the records alone, gathered on the same indices (gather_ceiling.cuh; T >= 32 decode rows).
        if r.get("gather_us"):
            row["of_gather_ceiling"] = r["gather_us"] / r["graph_us"]
        row["triton_us"] = tr["graph_us"] if tr else None
        row["speedup_vs_triton"] = tr["graph_us"] / r["graph_us"] if tr else None
        v1 = r.get("v1_graph_us")
        row["speedup_vs_round1_kernel"] = v1 / r["graph_us"] if v1 else None
        # Fastest kernel of this run for the shape: the automatic choice at run time (graph_us, "auto") or a
        # forced variant (1, 2, 3, 5, 7, 10, 11, 14; 6 was removed in session 4, its field stays 0).
        cands = {v: r.get(f"v{v}_graph_us") for v in (1, 2, 3, 5, 7, 10, 11, 14)}
        cands["auto"] = r["graph_us"]
        cands = {v: us for v, us in cands.items() if us}
        if cands:
            bv = min(cands, key=cands.get)
            row["best_variant"], row["best_us"] = bv, cands[bv]
            row["best_tflops"] = r["flops"] / (cands[bv] * 1e-6) / 1e12
            row["best_tbps"] = r["bytes"] / (cands[bv] * 1e-6) / 1e12
        if r.get("v5_graph_us"):
            row["v5_speedup_vs_auto"] = r["graph_us"] / r["v5_graph_us"]
        r3 = [us for us in (r.get("v5_graph_us"), r.get("v6_graph_us")) if us]
        r2 = [us for us in (r.get("v1_graph_us"), r.get("v2_graph_us"), r.get("v3_graph_us")) if us]
        if r3 and r2:  # best round-3 kernel against the best of the earlier rounds, same run
            row["round3_speedup_vs_best_earlier"] = min(r2) / min(r3)
        rows.append(row)
    fp8_vs_bf16 = {}
    for r in rows:
        if r["format"] == "fp8":
            b = next((x for x in rows if x["format"] == "bf16" and x["phase"] == r["phase"] and x["T"] == r["T"]
                      and x["H"] == r["H"]), None)
            if b:
                r["fp8_speedup_over_bf16"] = b["graph_us"] / r["graph_us"]
                if b.get("best_us") and r.get("best_us"):
                    r["fp8_speedup_over_bf16_best"] = b["best_us"] / r["best_us"]
    merged = {
        "benchmark": "sparse_mla",
        "command": args.command,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "card": ours.get("device"),
        "git_commit": args.commit,
        "ceilings": {"copy_tbps": copy, "copy_tbps_cudaMemcpy": ours["copy_tbps"], "gemm_bf16_tflops": gemm},
        "topk": ours["topk"],
        "pool_tokens_per_sequence": ours["pool_tokens_per_sequence"],
        "triton_self_check": tri.get("self_check"),
        "triton_and_ceilings_source": args.triton_source,
        "results": rows,
        "split_sweep": ours.get("split_sweep", []),
        "triton": tri.get("results", []),
    }
    json.dump(merged, open(args.out, "w"), indent=1)
    print()
    print(f"Sparse MLA on {merged['card']}  (topk {ours['topk']}; ceilings: copy {copy:.2f} TB/s, "
          f"bf16 GEMM {gemm or float('nan'):.0f} TFLOP/s; commit {args.commit[:12]})")
    hdr = (f"{'phase':7s} {'fmt':4s} {'T':>5s} {'H':>4s} {'spl':>3s} {'auto us':>9s} {'v1 us':>9s} {'v2 us':>9s} "
           f"{'v3 us':>9s} {'v5 us':>9s} {'v7 us':>9s} {'v10 us':>9s} {'v11 us':>9s} {'v14 us':>9s} {'v5/auto':>7s} {'best':>4s} {'TFLOP/s':>8s} {'TB/s':>6s} {'of roof':>7s} "
           f"{'triton':>8s} {'vs Tri':>6s} {'fp8/bf16':>8s} {'gather':>8s} {'of gth':>6s}")
    print(hdr)
    print("-" * len(hdr))

    def us(v):
        return f"{v:9.1f}" if v else f"{'-':>9s}"

    def best_name(r):
        b = r.get("best_variant", "?")
        return b if b == "auto" else f"v{b}"

    for r in rows:
        best = r.get("best_us") or r["graph_us"]
        tri_us = f"{r['triton_us']:8.1f}" if r["triton_us"] else f"{'-':>8s}"
        sp = f"{r['triton_us'] / best:6.2f}" if r["triton_us"] else f"{'-':>6s}"
        f8 = f"{r['fp8_speedup_over_bf16_best']:8.2f}" if "fp8_speedup_over_bf16_best" in r else f"{'':8s}"
        v5s = f"{r['v5_speedup_vs_auto']:7.2f}" if r.get("v5_speedup_vs_auto") else f"{'-':>7s}"
        gth = (f"{r['gather_us']:8.1f} {r['gather_us'] / best:6.2f}" if r.get("gather_us") else f"{'-':>8s} {'-':>6s}")
        print(f"{r['phase']:7s} {r['format']:4s} {r['T']:5d} {r['H']:4d} {r['splits']:3d} {us(r['graph_us'])} "
              f"{us(r.get('v1_graph_us'))} {us(r.get('v2_graph_us'))} {us(r.get('v3_graph_us'))} {us(r.get('v5_graph_us'))} {us(r.get('v7_graph_us'))} {us(r.get('v10_graph_us'))} {us(r.get('v11_graph_us'))} {us(r.get('v14_graph_us'))} "
              f"{v5s} {best_name(r):>4s} {r.get('best_tflops', r['tflops']):8.1f} "
              f"{r.get('best_tbps', r['tbps']):6.2f} {r['roofline_us'] / best:7.2f} {tri_us} {sp} {f8} {gth}")
    print(f"Triton and ceilings: {args.triton_source}; auto = the launcher's choice at run time (planner + kernel choice); "
          f"v1 = round 1, v2 / v3 = round 2's ring (v3: two 32-head CTAs per SM), v5 = round 3's warp-specialized "
          f"kernel (one bulk copy per record on sm_90+), v7 = round 6's FP8 kernel converting in registers (FP8 records only; "
          f"the automatic FP8 kernel), v10 = session 6's variant 5 with the softmax in registers (bf16 records, 32 / 16 heads per "
          f"CTA; the automatic bf16 kernel at 32), v11 = session 7's one 8-warp group for a CTA's 32 heads (bf16), v14 = session 11's four warp pairs for a CTA's 64 heads (H a multiple of 64; FP8 records converted to bf16 rows in shared memory since session 12, f16 rows since session 29; the automatic kernel there above T=8, and since session 13 at T <= 8 where its grid fills the SMs); v5/auto = v5's speedup over the run-time choice; TFLOP/s, TB/s, of roof, vs Triton "
          f"and fp8/bf16 are for the fastest (best) kernel, the automatic choice included; gather = the same records "
          f"read alone (decode T >= 32), of gth = gather us / best us (1.0 = at this access pattern's ceiling)")
    # Session 24: the SM clock after each prefill row's timings (the H200's 700 W cap lowers it under sustained prefill).
    clk = [r for r in rows if r["phase"] == "prefill" and r.get("sm_mhz_after_graph")]
    if clk:
        print("SM clock after the single calls / after the graph replays (MHz; boost 1,980 on the H200): " +
              ", ".join(f"{r['format']} {r['T']}x{r['H']} {r['sm_mhz_after_event']:.0f} / {r['sm_mhz_after_graph']:.0f}"
                        for r in clk))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

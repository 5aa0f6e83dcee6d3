#!/usr/bin/env python3
"""Markdown tables for docs/PERFORMANCE.md from the merged JSON that report.py writes.

  python3 bench/sparse_mla/markdown_table.py bench/results/sparse_mla-h200.json
Prints the results table (every kernel variant of the same run and the fastest) and, per swept
shape, the split counts and heads-per-CTA timings of the sweep.
"""
import json
import sys
from collections import defaultdict


def fmt(v, spec):
    return format(v, spec) if v else "-"


def main():
    d = json.load(open(sys.argv[1]))
    print("| phase | records | T | H | round 1 v1 (us) | round 2 v2 (us) | round 2 v3 (us) | round 3 v5 (us) | "
          "round 3 v6 (us) | round 3 vs best earlier | best | TFLOP/s | TB/s | of roofline | Triton (us) | vs Triton | FP8 / bf16 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in d["results"]:
        best = r.get("best_us") or r["graph_us"]
        bound = "mem" if r["bound"] == "memory" else "compute"
        tri = r.get("triton_us")
        print(f"| {r['phase']} | {r['format']} | {r['T']} | {r['H']} | {fmt(r.get('v1_graph_us'), '.1f')} | "
              f"{fmt(r.get('v2_graph_us'), '.1f')} | {fmt(r.get('v3_graph_us'), '.1f')} | "
              f"{fmt(r.get('v5_graph_us'), '.1f')} | {fmt(r.get('v6_graph_us'), '.1f')} | "
              f"{fmt(r.get('round3_speedup_vs_best_earlier'), '.2f')}x | "
              f"v{r.get('best_variant', '?')} | {r.get('best_tflops', r['tflops']):.1f} | "
              f"{r.get('best_tbps', r['tbps']):.2f} | {r['roofline_us'] / best:.2f} ({bound}) | "
              f"{fmt(tri, '.1f')} | {fmt(tri / best if tri else None, '.2f')}x | "
              f"{fmt(r.get('fp8_speedup_over_bf16_best'), '.2f')} |")
    sweeps = defaultdict(list)
    for s in d.get("split_sweep", []):
        sweeps[(s["T"], s["H"], s["format"])].append(s)
    if sweeps:
        print()
        print("| T | H | records | sweep (splits: us; hc = heads per CTA) | best |")
        print("|---|---|---|---|---|")
        for (t, h, f), ss in sweeps.items():
            parts = []
            for s in ss:
                key = f"{s['splits']}" + (f" hc{s['heads_per_cta']}" if s["heads_per_cta"] else "")
                parts.append(f"{key}: {s['graph_us']:.1f}")
            best = min(ss, key=lambda s: s["graph_us"])
            bk = f"{best['splits']}" + (f" hc{best['heads_per_cta']}" if best["heads_per_cta"] else "")
            print(f"| {t} | {h} | {f} | {'; '.join(parts)} | {bk} ({best['graph_us']:.1f}) |")


if __name__ == "__main__":
    main()

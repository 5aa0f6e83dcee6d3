#!/usr/bin/env python3
"""Markdown tables for docs/PERFORMANCE.md from the merged JSON that report.py writes.

  python3 bench/sparse_mla/markdown_table.py bench/results/sparse_mla-h200.json
Prints the results table (automatic kernel, the round-1 kernel and variant 3 of the same run) and, per swept
shape, the split counts and heads-per-CTA timings of the sweep.
"""
import json
import sys
from collections import defaultdict


def fmt(v, spec):
    return format(v, spec) if v else "-"


def main():
    d = json.load(open(sys.argv[1]))
    print("| phase | records | T | H | splits | time (us) | TFLOP/s | TB/s | roofline (us) | of roofline | "
          "Triton (us) | vs Triton | FP8 / bf16 | round-1 kernel (us) | vs round 1 | variant 3 (us) | "
          "variant 4 (us) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in d["results"]:
        bound = "mem" if r["bound"] == "memory" else "compute"
        print(f"| {r['phase']} | {r['format']} | {r['T']} | {r['H']} | {r['splits']} | {r['graph_us']:.1f} | "
              f"{r['tflops']:.1f} | {r['tbps']:.2f} | {r['roofline_us']:.1f} ({bound}) | {r['of_roofline']:.2f} | "
              f"{fmt(r.get('triton_us'), '.1f')} | {fmt(r.get('speedup_vs_triton'), '.2f')}x | "
              f"{fmt(r.get('fp8_speedup_over_bf16'), '.2f')} | {fmt(r.get('v1_graph_us'), '.1f')} | "
              f"{fmt(r.get('speedup_vs_round1_kernel'), '.2f')}x | {fmt(r.get('v3_graph_us'), '.1f')} | "
              f"{fmt(r.get('v4_graph_us'), '.1f')} |")
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

#!/usr/bin/env python3
"""Round 4's split choice above T=8 (sparse_mla.cu, plan_splits_r4, planner 2's rule there until session 10),
rewritten in Python for the H200 (132 SMs, top-k 2048), and how far its pick is from the best forced split count in
benchmark JSONs with forced counts (scripts/gpu_mla_s10.sh PARTS=midt). Checked against the C++: it reproduces the
automatic splits of bench/results/s10/call3 (run with that planner) at every row. Picks outside the forced counts
(FP8's 3 x 2^k) are reported as not measured.

    python3 bench/sparse_mla/old_split_model_r4.py holdout2-bf16-run1.json ...
"""
import collections
import json
import math
import sys

SMS = 132


def ctas_per_sm(fmt, hc, T):
    if fmt == "bf16":
        return 2 if hc == 8 or (hc == 16 and T > 128) else 1
    return {8: 4, 16: 2, 32: 1}[hc]


def old_pick(fmt, T, H):
    hc = min(H, 32)
    slots = SMS * ctas_per_sm(fmt, hc, T)
    base = T * (H // hc)
    ntiles = 64
    if fmt == "bf16" and base <= slots and ntiles + 2.0 <= T * 2048 * 1152 / 3.6e6:
        return 1  # session 9's one-split rule
    cands = [1, 2, 4, 8, 16, 32, 64] + ([3, 6, 12, 24, 48] if fmt == "fp8" and hc == 8 else [])
    best = None
    for s in cands:
        tps = math.ceil(ntiles / s)
        waves = math.ceil(base * s / slots)
        c = waves * (tps + 2.0) + ((2.0 + 0.03 * s + 2.0 * s * T * H * 512 * 4 / 3e6) if s > 1 else 0)
        if best is None or c < best[0] - 1e-9:
            best = (c, s)
    return best[1]


def main(paths):
    forced = collections.defaultdict(lambda: collections.defaultdict(list))
    for path in paths:
        with open(path) as f:
            for s in json.load(f)["split_sweep"]:
                if s["splits"] > 0:
                    forced[(s["format"], s["T"], s["H"])][s["splits"]].append(s["graph_us"])
    ratios = collections.defaultdict(list)
    for key, f in sorted(forced.items()):
        f = {s: sum(v) / len(v) for s, v in f.items()}
        pick = old_pick(*key)
        if pick not in f:
            print(f"{key}: round 4 picks {pick}, not measured")
            continue
        ratios[key[0]].append(f[pick] / min(f.values()))
    for fmt, r in ratios.items():
        print(f"{fmt}: {len(r)} shapes, pick / best mean {sum(r) / len(r):.4f}, worst {max(r):.3f}, "
              f"> 1.03 at {sum(x > 1.03 for x in r)}")


if __name__ == "__main__":
    main(sys.argv[1:])

#!/usr/bin/env python3
"""Fits the constants of the split model above T=8 (kernels/attention/sparse_mla.cu, plan_splits_s10) to benchmark
JSONs with forced split counts (scripts/gpu_mla_s10.sh PARTS=midt: --force-splits 1,2,4,8,16 --force-variants 0),
by a grid search that minimises the shapes whose modelled pick is more than 3% slower than their best forced count
(then the mean of pick / best). Prints the constants per record format and the shapes the fit still misses.
Candidates are the powers of two the planner tries; the H200 has 132 SMs.

    python3 bench/sparse_mla/fit_splits_s10.py call3/midt/*.json call4/holdout/*.json call5/holdout2/*.json
"""
import collections
import itertools
import json
import math
import sys

SMS = 132
TILES = 64  # top-k 2048 / 32-token tiles
CANDIDATES = (1, 2, 4, 8, 16)


def ctas_per_sm(fmt, hc, T):
    # The launcher's count at T > 8 on the H200 (sparse_mla.cu, ctas_per_sm): bf16 8-head variant 5 two, 16-head
    # variant 10 one up to T=128 (variant 5 two above), 32-head one; FP8 variant 7 four / two / one.
    if fmt == "bf16":
        return 2 if hc == 8 or (hc == 16 and T > 128) else 1
    return {8: 4, 16: 2, 32: 1}[hc]


def cost(fmt, T, H, hc, s, c):
    a, b, w, m0, m_mb = c
    tps = math.ceil(TILES / s)
    ctas = T * (H // hc) * s
    t = max(math.ceil(ctas / (SMS * ctas_per_sm(fmt, hc, T))) * (tps * a + w), math.ceil(ctas / SMS) * (tps * b + w))
    return t + (m0 + m_mb * ctas * hc * 1024 / 1e6 if s > 1 else 0)


def load(paths):
    forced = collections.defaultdict(lambda: collections.defaultdict(list))
    hcs = {}
    for path in paths:
        with open(path) as f:
            d = json.load(f)
        for r in d["results"]:
            hcs[(r["format"], r["T"], r["H"])] = r["heads_per_cta"]
        for s in d["split_sweep"]:
            if s["splits"] in CANDIDATES and s.get("variant", 0) == 0:
                forced[(s["format"], s["T"], s["H"])][s["splits"]].append(s["graph_us"])
    return {k: {s: sum(v) / len(v) for s, v in f.items()} for k, f in forced.items()}, hcs


def score(meas, hcs, fmt, c, misses=None):
    ratios = []
    for key, m in meas.items():
        if key[0] != fmt:
            continue
        pick = min(m, key=lambda s: cost(fmt, key[1], key[2], hcs[key], s, c))
        best = min(m.values())
        ratios.append(m[pick] / best)
        if misses is not None and m[pick] / best > 1.03:
            misses.append((key, pick, m[pick], min(m, key=m.get), best))
    return sum(r > 1.03 for r in ratios), sum(ratios) / len(ratios), len(ratios)


def main(paths):
    meas, hcs = load(paths)
    grid = itertools.product([0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0, 1.2], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8],
                             [0, 1, 2, 3, 4, 6], [0, 1, 2, 4, 6], [0, 0.25, 0.5, 1, 2])
    grid = list(grid)
    for fmt in ("bf16", "fp8"):
        best = min(grid, key=lambda c: score(meas, hcs, fmt, c)[:2])
        misses = []
        bad, mean, n = score(meas, hcs, fmt, best, misses)
        print(f"{fmt}: a, b, w, m0, m_mb = {best}: {bad} of {n} shapes > 3% off their best, "
              f"mean pick / best {mean:.4f}")
        for key, pick, us, best_s, best_us in misses:
            print(f"  T={key[1]} H={key[2]}: picks {pick} ({us:.1f} us), best {best_s} ({best_us:.1f} us)")


if __name__ == "__main__":
    main(sys.argv[1:])

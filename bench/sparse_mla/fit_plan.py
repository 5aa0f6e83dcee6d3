#!/usr/bin/env python3
"""Round 5's sparse MLA planner model: predictions, and a fit of its constants to a measured sweep.

The model (kernels/attention/sparse_mla.cu, plan_cost_r5), in microseconds, for hc heads per CTA and s
splits of a launch with T query tokens, H heads, top-k K:
    waves * (cta_us[hc] + step_us[hc] * steps) + (s > 1 ? merge_us + merge_us_per_mb * MB : 0)
    (session 4: MB counts 2 bytes per value where the merge is the bf16-partials chunked one, combine 5:
    the automatic choice where the fused merge cannot run)
    steps = 2 * ceil(ceil(K / 32) / s)      (16-token steps per split)
    waves = ceil(T * H / hc * s / (SMs * CTAs per SM))
    MB    = T * H * s * 2048 / 1e6          (fp32 partials, written by the main kernel, read by the merge)
CTAs per SM are the H200's (132 SMs, 227 KB of shared memory per SM): 2 for 8 / 16 heads per CTA, 1 for
32 (registers), as ctas_per_sm() computes them there for the kernels the small-T plans run.

The C++ planner also holds kMeasuredPlans, the measured best plan of the sweep for its exact shapes (top-k
2048, 132 SMs, T = 1 and 8), which wins over the model there; this script shows the model alone.

    fit_plan.py --predict                 # the model's picks with the constants now in sparse_mla.cu
    fit_plan.py --fit sweep.json          # least-squares fit (relative error) of the constants to the
                                          # JSON "split_sweep" of glm5rt_bench_sparse_mla --plan-sweep;
                                          # prints the C++ initializer and picks vs measured best
"""
import argparse
import json
import math
import os
import re
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMS = 132
HCS = (8, 16, 32)


def read_constants():
    src = open(os.path.join(ROOT, "kernels/attention/sparse_mla.cu")).read()
    m = re.search(r"kPlanModel\[2\] = \{(.*?)\n\};", src, re.S)
    rows = re.findall(r"\{\{([^}]*)\}, \{([^}]*)\}, ([0-9.eE+-]+), ([0-9.eE+-]+)\}", m.group(1))
    out = []
    for cta, step, mu, mmb in rows:
        out.append({"cta": [float(x) for x in cta.split(",")], "step": [float(x) for x in step.split(",")],
                    "merge": float(mu), "mb": float(mmb)})
    return {"bf16": out[0], "fp8": out[1]}


NF = 8  # cta_us x 3, step_us x 3, merge_us, merge_us_per_mb


def features(T, H, hc, s, topk=2048, half=False):
    ntiles = math.ceil(topk / 32)
    tps = math.ceil(ntiles / s)
    steps = 2.0 * tps
    slots = SMS * (1 if hc == 32 else 2)
    waves = math.ceil(T * (H // hc) * s / slots)
    mb = T * H * s * (1024 if half else 2048) / 1e6  # half: bf16 partials (combine 5)
    f = np.zeros(NF)
    i = HCS.index(hc)
    f[i] = waves
    f[3 + i] = waves * steps
    if s > 1:
        f[6] = 1.0
        f[7] = mb
    return f


def vec(c):
    return np.array(c["cta"] + c["step"] + [c["merge"], c["mb"]])


def auto_kind(T, H, hc, s):
    """The merge the automatic choice runs (combine_mode): 3 fused, 5 bf16 chunked, 0 none."""
    if s <= 1:
        return 0
    return 3 if s * hc <= 32 and T * H // hc <= 4096 else 5


def candidates(T, H, topk=2048):
    ntiles = math.ceil(topk / 32)
    for hc in (32, 16, 8):  # the planner's order: a tie keeps the larger group
        if hc > H or H % hc:
            continue
        s = 1
        while s <= min(ntiles, 128):
            yield hc, s, auto_kind(T, H, hc, s)
            s *= 2


def cost_kind(c, T, H, hc, s, kind):
    return float(features(T, H, hc, s, half=kind == 5) @ vec(c))


def pick(c, T, H):
    best, bc = None, 1e300
    for hc, s, kind in candidates(T, H):
        v = cost_kind(c, T, H, hc, s, kind)
        if v < bc - 1e-9:
            best, bc = (hc, s, kind), v
    return best, bc


def predict(consts):
    for fmt in ("bf16", "fp8"):
        for T in (1, 2, 4, 8):
            for H in (8, 16, 32, 64, 128):
                (hc, s, kind), v = pick(consts[fmt], T, H)
                print(f"{fmt:4} T={T} H={H:3}: {hc:2} heads/CTA x {s:2} splits, merge {kind}, model {v:6.2f} us")


def fit(path, consts):
    d = json.load(open(path))
    # Session 4's first call also timed a cluster merge (combine 4, since removed): not part of the model.
    rows = [r for r in d["split_sweep"] if r.get("heads_per_cta", 0) in HCS and r.get("combine", 0) != 4]
    new = {}
    for fmt in ("bf16", "fp8"):
        rs = [r for r in rows if r["format"] == fmt]
        if not rs:
            new[fmt] = consts[fmt]
            continue
        X = np.array([features(r["T"], r["H"], r["heads_per_cta"], r["splits"], half=r.get("combine", 0) == 5)
                      for r in rs])
        y = np.array([r["graph_us"] for r in rs])
        w = 1.0 / y  # relative error
        active = [j for j in range(NF) if X[:, j].any()]
        # Non-negative least squares by dropping negative coefficients until none is left.
        while True:
            sol, *_ = np.linalg.lstsq(X[:, active] * w[:, None], y * w, rcond=None)
            neg = [a for a, v in zip(active, sol) if v < 0]
            if not neg:
                break
            active = [a for a in active if a not in neg]
        coef = vec(consts[fmt]).copy()  # unmeasured head groups keep their old constants
        coef[active] = sol
        for j in range(NF):
            if j not in active and X[:, j].any():
                coef[j] = 0.0
        new[fmt] = {"cta": list(coef[0:3]), "step": list(coef[3:6]), "merge": coef[6], "mb": coef[7]}
        pred = X @ coef
        rel = np.abs(pred - y) / y
        print(f"{fmt}: {len(rs)} points, model error median {np.median(rel):.3f}, max {rel.max():.3f}")
    print("C++ (kPlanModel):")
    for fmt in ("bf16", "fp8"):
        c = new[fmt]
        f = lambda v: ", ".join(f"{x:.3g}" for x in v)
        print(f"    /* {fmt:4} */ {{{{{f(c['cta'])}}}, {{{f(c['step'])}}}, {c['merge']:.3g}, {c['mb']:.3g}}},")
    print("picks (measured us of the pick / of the measured best; 'r5 now' = the constants in sparse_mla.cu):")
    meas = {}
    for r in rows:
        meas[(r["format"], r["T"], r["H"], r["heads_per_cta"], r["splits"], r.get("combine", 0))] = r["graph_us"]
    shapes = sorted({(r["format"], r["T"], r["H"]) for r in rows})
    tag = lambda hc, s, k: f"{hc:2}x{s:2} m{k}"
    for fmt, T, H in shapes:
        grid = {(hc, s, cl): v for (f_, t_, h_, hc, s, cl), v in meas.items() if (f_, t_, h_) == (fmt, T, H)}
        (bh, bs, bc), bv = min(grid.items(), key=lambda kv: kv[1])
        (nh, ns, nc), _ = pick(new[fmt], T, H)
        (oh, os_, oc), _ = pick(consts[fmt], T, H)
        nv = grid.get((nh, ns, nc), float("nan"))
        ov = grid.get((oh, os_, oc), float("nan"))
        print(f"  {fmt:4} T={T} H={H:3}: best {tag(bh, bs, bc)} {bv:6.2f} | fitted pick {tag(nh, ns, nc)} {nv:6.2f}"
              f" ({nv / bv:.3f}) | now {tag(oh, os_, oc)} {ov:6.2f} ({ov / bv:.3f})  (m = merge kind)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--predict", action="store_true")
    ap.add_argument("--fit")
    a = ap.parse_args()
    consts = read_constants()
    if a.predict:
        predict(consts)
    if a.fit:
        fit(a.fit, consts)
    if not a.predict and not a.fit:
        ap.print_help()
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

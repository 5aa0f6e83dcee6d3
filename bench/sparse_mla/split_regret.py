#!/usr/bin/env python3
"""How far the automatic split count is from the best forced one, per shape, in benchmark JSONs made with
--force-splits ... --force-variants 0 (scripts/gpu_mla_s10.sh PARTS=midt): the automatic row's time over the best
forced time (mean over the files given, e.g. two processes), and the summary per record format.

    python3 bench/sparse_mla/split_regret.py midt-bf16-run1.json midt-bf16-run2.json ...
"""
import collections
import json
import sys


def load(paths):
    auto = collections.defaultdict(list)     # (fmt, T, H) -> [(us, splits, heads per CTA)]
    forced = collections.defaultdict(lambda: collections.defaultdict(list))  # (fmt, T, H) -> splits -> [us]
    for path in paths:
        with open(path) as f:
            d = json.load(f)
        for r in d["results"]:
            auto[(r["format"], r["T"], r["H"])].append((r["graph_us"], r["splits"], r["heads_per_cta"]))
        for s in d["split_sweep"]:
            if s["splits"] > 0 and s.get("variant", 0) == 0:
                forced[(s["format"], s["T"], s["H"])][s["splits"]].append(s["graph_us"])
    return auto, forced


def main(paths):
    auto, forced = load(paths)
    summary = collections.defaultdict(list)
    for key in sorted(auto):
        runs = auto[key]
        a_us = sum(r[0] for r in runs) / len(runs)
        f = {s: sum(v) / len(v) for s, v in forced[key].items()}
        if not f:
            print(f"{key[0]:4} T={key[1]:4} H={key[2]:3} auto {runs[0][1]:2} splits {a_us:8.2f} us (no forced timings)")
            continue
        best_s = min(f, key=f.get)
        ratio = a_us / f[best_s]
        summary[key[0]].append(ratio)
        row = " ".join(f"{s}:{u:.1f}" for s, u in sorted(f.items()))
        flag = " ***" if ratio > 1.03 else ""
        print(f"{key[0]:4} T={key[1]:4} H={key[2]:3} auto {runs[0][1]:2} x {runs[0][2]:2} heads {a_us:8.2f} us | best "
              f"{best_s:2} splits {f[best_s]:8.2f} | auto / best {ratio:.3f}{flag} | {row}")
    for fmt, r in summary.items():
        print(f"{fmt}: {len(r)} shapes, auto / best mean {sum(r) / len(r):.4f}, worst {max(r):.3f}, "
              f"> 1.03 at {sum(x > 1.03 for x in r)}")


if __name__ == "__main__":
    main(sys.argv[1:])

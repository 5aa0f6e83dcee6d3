#!/usr/bin/env python3
"""Warp-stall summary of one kernel from Nsight Compute's per-instruction SASS page.

    ncu -i REPORT --page source --csv --print-source sass > k.csv
    python3 bench/sparse_mla/sass_stalls.py k.csv [--top N]

Prints the stall reasons over all samples, the samples per opcode with their top reasons, and the N
instructions with the most samples (index, executions, samples, SASS): where a kernel's warps wait.
"""
import collections
import csv
import sys


def main():
    path = sys.argv[1]
    top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 15
    rows = list(csv.reader(open(path)))
    hdr = rows[1]
    ix = {h: i for i, h in enumerate(hdr)}
    data = [r for r in rows[2:] if len(r) >= len(hdr)]
    reasons = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    samples = lambda r: int(r[ix["Warp Stall Sampling (All Samples)"]] or 0)
    total = sum(samples(r) for r in data) or 1
    by_reason, by_op = collections.Counter(), collections.defaultdict(collections.Counter)
    for r in data:
        words = r[ix["Source"]].split()
        op = (words[1] if words and words[0].startswith("@") and len(words) > 1 else words[0] if words else "?")
        op = op.split(".")[0]
        for c in reasons:
            v = int(r[ix[c]] or 0)
            by_reason[c] += v
            by_op[op][c] += v
        by_op[op]["_all"] += samples(r)
        by_op[op]["_exec"] += int(r[ix["Instructions Executed"]] or 0)
    print(f"samples {total}")
    for c, v in by_reason.most_common(10):
        print(f"  {c:26s} {v:8d} {100 * v / total:5.1f}%")
    print("by opcode: samples, executions, top reasons")
    for op, c in sorted(by_op.items(), key=lambda kv: -kv[1]["_all"])[:15]:
        tops = " ".join([f"{k[6:]}={v}" for k, v in c.most_common() if not k.startswith("_")][:3])
        print(f"  {op:8s} {c['_all']:7d} {100 * c['_all'] / total:5.1f}%  exec {c['_exec']:10d}  {tops}")
    print(f"top {top} instructions: index, executions, samples")
    for k, r in sorted(enumerate(data), key=lambda kr: -samples(kr[1]))[:top]:
        print(f"  {k:5d} {int(r[ix['Instructions Executed']] or 0):9d} {samples(r):6d} "
              f"{100 * samples(r) / total:4.1f}%  {r[ix['Source']].strip()[:80]}")


if __name__ == "__main__":
    main()

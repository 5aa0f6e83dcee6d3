#!/usr/bin/env python3
"""Summarise Nsight Compute's source page (`ncu --import R --page source --csv --print-source sass`): the SASS
lines with the most warp-stall samples, the samples per opcode, and the totals of every per-reason column.
Column names differ between Nsight Compute versions, so columns are found by substrings."""
import collections
import csv
import sys


def num(v):
    try:
        return float(str(v).replace(",", ""))
    except ValueError:
        return 0.0


def main(path, top=40):
    with open(path, newline="") as f:
        lines = f.readlines()
    # The table starts at its header row ("Address","Source",...); lines before it name the kernel.
    start = next((i for i, l in enumerate(lines) if l.startswith('"Address"')), 0)
    lines = lines[start:]
    rows = list(csv.DictReader(lines))
    if not rows:
        print("no rows in", path)
        return
    cols = list(rows[0].keys())
    src = next((c for c in cols if c.lower() in ("source", "sass")), cols[1] if len(cols) > 1 else cols[0])
    allc = next((c for c in cols if "Sampling" in c and "All" in c), None)
    if allc is None:
        allc = next((c for c in cols if "Sampling" in c), None)
    if allc is None:
        print("no stall-sampling column; columns:", cols)
        return
    total = sum(num(r[allc]) for r in rows) or 1.0
    print(f"{path}: {len(rows)} SASS lines, {total:.0f} samples ({allc})")
    reasons = [c for c in cols if c != allc and ("stall" in c.lower() or "Sampling" in c)]
    sums = {c: sum(num(r[c]) for r in rows) for c in reasons}
    for c, v in sorted(sums.items(), key=lambda kv: -kv[1])[:16]:
        if v > 0:
            print(f"  {v / total:6.1%}  {c}")
    by_op = collections.Counter()
    for r in rows:
        text = r[src].strip()
        op = text.split()[1] if text.startswith("@") and len(text.split()) > 1 else (text.split() or ["?"])[0]
        by_op[op.split(".")[0]] += num(r[allc])
    print("  by opcode:", ", ".join(f"{k} {v / total:.1%}" for k, v in by_op.most_common(12)))
    print("  top lines:")
    addr = next((c for c in cols if "Address" in c), None)
    for r in sorted(rows, key=lambda r: -num(r[allc]))[:top]:
        print(f"  {num(r[allc]) / total:6.2%}  {r[addr] if addr else '':>8}  {r[src].strip()[:90]}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40)

#!/usr/bin/env python3
"""Compare the automatic small-T plans with the best plan of several plan sweeps (session 30).

Reads every plans-r*.txt in a folder or a .tar.xz archive (the text output of `glm5rt_bench_sparse_mla --plan-sweep`,
one file per process, as scripts/gpu_mla_s30.sh writes them) and prints, per (format, T, H), the automatic plan (heads per CTA,
splits, merge) with its median time, the plan timed in every sweep with the lowest median, and the ratio automatic /
best in each sweep. "***" marks a shape whose automatic plan was >= 3% slower than that plan in every sweep (the rule
by which kMeasuredPlans in kernels/attention/sparse_mla.cu takes a swept plan), "*" one where only the median was.

    python3 bench/sparse_mla/plan_sweeps.py bench/results/s30/c3/plan-sweeps.tar.xz
"""
import collections
import glob
import re
import statistics
import sys
import tarfile

CONFIG = re.compile(r"\s+T=(\d+) H=(\d+) (\w+) splits=(\d+) heads/cta=(\d+) variant=0 combine=(\d+): ([\d.]+) us")
AUTO = re.compile(r"plan\s+(\w+)\s+T=\s*(\d+) H=\s*(\d+)\s+auto:\s*(\d+) heads/CTA x\s*(\d+) splits merge (\d+)"
                  r"\s+([\d.]+) us")


def sweep_texts(path):
    """The plans-r*.txt texts of a folder or a .tar.xz archive, in name order."""
    if path.endswith(".tar.xz"):
        with tarfile.open(path) as tar:
            members = sorted((m for m in tar.getmembers() if re.search(r"plans-r\d+\.txt$", m.name)),
                             key=lambda m: m.name)
            return [tar.extractfile(m).read().decode() for m in members]
    return [open(f).read() for f in sorted(glob.glob(path + "/plans-r*.txt"))]


def main(path):
    texts = sweep_texts(path)
    if not texts:
        sys.exit(f"no plans-r*.txt in {path}")
    timed = collections.defaultdict(lambda: collections.defaultdict(list))  # shape -> (hc, splits, merge) -> [us]
    auto_us = collections.defaultdict(list)
    auto_plan = {}
    for text in texts:
        for line in text.splitlines():
            m = CONFIG.match(line)
            if m:
                t, h, fmt, s, hc, cb, us = m.groups()
                timed[(fmt, int(t), int(h))][(int(hc), int(s), int(cb))].append(float(us))
                continue
            m = AUTO.match(line)
            if m:
                fmt, t, h, hc, s, mg, us = m.groups()
                key = (fmt, int(t), int(h))
                auto_us[key].append(float(us))
                auto_plan[key] = (int(hc), int(s), int(mg))
    n = len(texts)
    print(f"{n} sweeps")
    for key in sorted(auto_us):
        a = auto_us[key]
        if len(a) < n:
            continue
        best = None
        for plan, us in timed[key].items():
            if len(us) < n:
                continue
            if best is None or statistics.median(us) < statistics.median(best[1]):
                best = (plan, us)
        if best is None:
            continue
        plan, us = best
        ratios = [a[i] / us[i] for i in range(n)]
        mark = "***" if min(ratios) >= 1.03 else ("*" if statistics.median(ratios) >= 1.03 else "")
        print("%-4s T=%d H=%3d auto %-13s %6.2f us | best %-13s %6.2f us | auto / best %s %s" %
              (key[0], key[1], key[2], auto_plan[key], statistics.median(a), plan, statistics.median(us),
               " ".join("%.3f" % r for r in ratios), mark))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")

#!/usr/bin/env python3
"""Instruction counts of each loop in glm5rt_bench_fp8_convert's kernels (reads `cuobjdump -sass BINARY`
from stdin). A loop = the instructions from a backward branch's target to the branch. Prints one line per
loop: kernel, loop address range, instructions per loop iteration by opcode (full SASS name)."""
import collections
import re
import sys

func = None
insts = {}  # func -> list of (addr, opcode, text)
for line in sys.stdin:
    m = re.search(r"Function : (\S+)", line)
    if m:
        func = m.group(1)
        insts[func] = []
        continue
    m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
    if m and func:
        text = m.group(2).strip()
        op = re.sub(r"^@!?U?P\w+\s+", "", text).split()[0]
        insts[func].append((int(m.group(1), 16), op, text))

for f, lst in insts.items():
    short = re.search(r"convert_kernelINS_\d+(\w+?)EEEv", f)
    name = short.group(1) if short else f[:60]
    for addr, op, text in lst:
        if op.split(".")[0] != "BRA":  # BRA, BRA.U (sm_120: BRA.U UP0, target)
            continue
        t = re.search(r"BRA(?:\.\w+)?\s+(?:!?U?P\w+,\s*)?0x([0-9a-f]+)", text)
        if not t:
            continue
        target = int(t.group(1), 16)
        if target >= addr:
            continue
        body = [o for a, o, _ in lst if target <= a <= addr]
        c = collections.Counter(body)
        print(f"{name:10s} loop 0x{target:04x}-0x{addr:04x}: {len(body)} instructions: "
              + ", ".join(f"{o} {n}" for o, n in sorted(c.items(), key=lambda x: -x[1])))

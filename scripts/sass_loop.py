#!/usr/bin/env python3
"""Prints the main loop of a kernel in a cubin: its instruction count and mix, and one character per instruction
(L ldmatrix, H HMMA, B bar.sync, Y mbarrier, s / l st / ld.shared, G ld.global, m FMUL, e MUFU, f SHFL, c bulk copy,
g cp.async, x / X local store / load, | branch), so that the ldmatrix prefetch depth before each GEMM and where the
rare paths sit can be read off (session 17).

    nvcc ... -cubin kernels/attention/sparse_mla_wsp_bf16.cu -o x.cubin
    FILTER=Lb0ELb0E python3 scripts/sass_loop.py x.cubin [...]   (FILTER: part of the function's name, default wsp_kernel)

cuobjdump: $CUOBJDUMP, else on the PATH, else the CUDA toolkit's. This machine's toolkit has none:
`pip download --no-deps nvidia-cuda-cuobjdump-cu13` gives one (PyPI); it is in that package's nvidia/cu13/bin.
"""
import collections
import os
import re
import shutil
import subprocess
import sys

CUOBJ = os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump") or "/usr/local/cuda/bin/cuobjdump"
CODES = {"HMMA": "H", "LDSM": "L", "LDG": "G", "BRA": "|", "SYNCS": "Y", "BAR": "B", "STS": "s", "LDS": "l",
         "SHFL": "f", "MUFU": "e", "FMUL": "m", "LDGSTS": "g", "UBLKCP": "c", "LDL": "X", "STL": "x"}


def opcode(text):
    """The instruction's opcode without its predicate and modifiers."""
    return re.sub(r"^@!?U?P\w+\s+", "", text).split()[0].split(".")[0]


def load(cubin, name_filter):
    """(address, instruction) of every instruction of the functions whose name contains name_filter."""
    out = subprocess.run([CUOBJ, "-sass", cubin], capture_output=True, text=True, check=True).stdout
    ins, on = [], False
    for line in out.splitlines():
        if "Function :" in line:
            on = name_filter in line
        m = re.match(r"\s+/\*([0-9a-f]{4,5})\*/\s+(.*?);", line) if on else None
        if m:
            ins.append((int(m.group(1), 16), m.group(2).strip()))
    return ins


def main_loop(ins):
    """The smallest backward branch's range that holds every HMMA: the kernel's step loop."""
    hmma = [a for a, t in ins if "HMMA" in t]
    best = None
    for a, t in ins:
        m = re.search(r"BRA.*?0x([0-9a-f]+)", t)
        if m:
            target = int(m.group(1), 16)
            if target < a and target <= hmma[0] and hmma[-1] <= a and (best is None or a - target < best[1] - best[0]):
                best = (target, a)
    return [(a, t) for a, t in ins if best[0] <= a <= best[1]]


def main():
    name_filter = os.environ.get("FILTER", "wsp_kernel")
    for cubin in sys.argv[1:]:
        ins = load(cubin, name_filter)
        if not any("HMMA" in t for _, t in ins):
            print(cubin, "no HMMA in the functions matching", name_filter)
            continue
        loop = main_loop(ins)
        mix = collections.Counter(opcode(t) for _, t in loop)
        print(cubin, "total", len(ins), "loop", len(loop), "instructions", dict(mix.most_common(12)))
        line = "".join(CODES.get(opcode(t), ".") for _, t in loop)
        for i in range(0, len(line), 150):
            print("  ", line[i:i + 150])


if __name__ == "__main__":
    main()

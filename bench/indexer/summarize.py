#!/usr/bin/env python3
"""Merges bench_indexer's JSON with torch_baseline.py's into one file and prints the summary table.
Usage: summarize.py BENCH.json TORCH.json OUT.json (TORCH.json may be missing)."""
import json
import os
import sys

bench = json.load(open(sys.argv[1]))
torch_cases = {}
if os.path.exists(sys.argv[2]):
    base = json.load(open(sys.argv[2]))
    bench["torch_baseline"] = {k: v for k, v in base.items() if k != "cases"}
    torch_cases = {c["name"]: c["torch_us"] for c in base["cases"]}
for c in bench["cases"]:
    # the baseline uses bf16 keys; FP8 cases are compared against the same bf16 baseline
    key = c["name"].replace("fp8", "bf16")
    if key in torch_cases:
        c["torch_bf16_us"] = torch_cases[key]
json.dump(bench, open(sys.argv[3], "w"), indent=1)

print(f"\nIndexer, {bench['card']}, copy {bench['copy_bandwidth_GBps']:.0f} GB/s, k=2048, commit {bench['git_commit'][:12]}")
hdr = (f"{'case':30s} {'total us':>9s} {'fused':>8s} {'unfused':>8s} {'+reg':>8s} {'+r1':>8s} {'scores':>8s} {'topk':>8s} {'row':>8s} {'reg':>8s} {'split':>8s} {'floor':>7s} {'x floor':>7s}"
       f" {'torch bf16':>10s} {'speedup':>7s}")
print("total = scores + top-k in one call (launch_indexer); fused / unfused = the same call with the fused kernel\n"
      "forced / refused (where it can run); topk = top-k alone (automatic path), row / split = each\n"
      "top-k path forced (row = round-1 row kernel, reg = register select); +reg / +r1 = scores + register\n"
      "select (PDL) / scores + round-1 row kernel as one launch_indexer_ex call; floor = bytes that must move / copy bandwidth; torch = bmm+relu+sum+topk, bf16 keys")
print(hdr)
print("-" * len(hdr))
for c in bench["cases"]:
    t = c.get("torch_bf16_us")
    f, u = c.get("total_fused_us", 0), c.get("total_unfused_us", 0)
    opt = lambda x: ('%8.2f' % x) if x else '%8s' % '-'
    print(f"{c['name']:30s} {c['total_us']:9.2f} {opt(f)} {opt(u)} {opt(c.get('total_reg_us', 0))} {opt(c.get('total_r1_us', 0))} {c['scores_us']:8.2f} {c['topk_us']:8.2f} {c.get('topk_row_us', 0):8.2f} {opt(c.get('topk_reg_us', 0))} "
          f"{c.get('topk_split_us', 0):8.2f} {c['floor_us']:7.2f} "
          f"{c['ratio_to_floor']:7.2f} {('%10.1f' % t) if t else '%10s' % '-'} {('%7.1f' % (t / c['total_us'])) if t else '%7s' % '-'}")
targets = {"decode_fp8_b1_ctx8192": 12, "decode_fp8_b1_ctx32768": 20, "decode_fp8_b1_ctx131072": 40}
for c in bench["cases"]:
    if c["name"] in targets:
        ok = c["total_us"] <= targets[c["name"]]
        print(f"target {c['name']}: {c['total_us']:.2f} us vs <= {targets[c['name']]} us: {'MET' if ok else 'MISSED'}")
for c in bench["cases"]:
    if c["name"] in targets and c.get("total_reg_us"):
        ok = c["total_reg_us"] <= targets[c["name"]]
        print(f"target {c['name']} with the register select (scores + reg, PDL): {c['total_reg_us']:.2f} us vs <= {targets[c['name']]} us: {'MET' if ok else 'MISSED'}")

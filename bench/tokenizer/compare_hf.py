#!/usr/bin/env python3
"""Compares bench_tokenizer's ids with Hugging Face tokenizers on the same text and times HF's single
encode call on it (one thread: TOKENIZERS_PARALLELISM is irrelevant for one text).

usage: bench_tokenizer --dump /tmp/tokbench && python3 compare_hf.py MODEL_DIR /tmp/tokbench
(needs `pip install tokenizers`)."""
import json
import sys
import time

from tokenizers import Tokenizer

model_dir, prefix = sys.argv[1:3]
tok = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
text = open(f"{prefix}.txt", encoding="utf-8").read()
ours = json.load(open(f"{prefix}.ids.json"))
times = []
for _ in range(5):
    t0 = time.perf_counter()
    ids = tok.encode(text).ids
    times.append(time.perf_counter() - t0)
times.sort()
mb = len(text.encode()) / 1e6
print(f"HF tokenizers: {len(ids)} tokens, median {times[2]:.4f} s = {mb / times[2]:.2f} MB/s")
first_diff = next((i for i, (a, b) in enumerate(zip(ids, ours)) if a != b), None)
if ids == ours:
    print(f"ids identical to ours ({len(ours)} tokens)")
    sys.exit(0)
print(f"ids DIFFER: HF {len(ids)} vs ours {len(ours)}, first difference at {first_diff}")
sys.exit(1)

#!/usr/bin/env python3
"""Checks the glm5rt-tokenize binary end to end: fixture texts piped in give HF's ids as JSON, ids piped
to --decode give HF's text, and bad input gives a clear error and a non-zero status.

usage: check_tokenize_cli.py BINARY FIXTURE_DIR DEMO_MODEL_DIR"""
import json
import subprocess
import sys


def run(binary, args, data):
    return subprocess.run([binary, *args], input=data, capture_output=True, timeout=60)


def main():
    binary, fixture_dir, demo_dir = sys.argv[1:4]
    failures = 0
    with open(f"{fixture_dir}/cases.jsonl", encoding="utf-8") as f:
        cases = [json.loads(line) for line in f if line.strip()]
    # A spread of cases (every 7th) keeps the process count small.
    for case in cases[::7]:
        p = run(binary, [fixture_dir], case["text"].encode("utf-8"))
        if p.returncode != 0 or json.loads(p.stdout) != case["ids"]:
            print(f"encode mismatch for {case['text']!r}: rc={p.returncode} out={p.stdout[:200]!r} err={p.stderr!r}")
            failures += 1
        p = run(binary, ["--decode", fixture_dir], json.dumps(case["ids"]).encode())
        if p.returncode != 0 or p.stdout.decode("utf-8") != case["decoded"]:
            print(f"decode mismatch for {case['ids']}: rc={p.returncode} out={p.stdout[:200]!r} err={p.stderr!r}")
            failures += 1

    # The demo model's reference prompt (special tokens parsed by default, not with --no-special).
    prompt = json.load(open(f"{demo_dir}/reference.json", encoding="utf-8"))["prompt"]
    p = run(binary, [demo_dir], prompt.encode())
    ids = json.loads(p.stdout)
    if ids != [8194, 8196, 8199, 3719, 2457, 374, 516, 1555, 63, 863, 30, 8200, 8215]:
        print(f"demo prompt gave {ids}")
        failures += 1
    p = run(binary, ["--no-special", demo_dir], prompt.encode())
    if p.returncode != 0 or 8194 in json.loads(p.stdout):
        print(f"--no-special still parsed special tokens: {p.stdout!r}")
        failures += 1
    p = run(binary, ["--decode", "--skip-special", demo_dir], json.dumps(ids).encode())
    if p.stdout.decode() != "What does `from_pretrained` do?":
        print(f"--skip-special decode gave {p.stdout!r}")
        failures += 1

    # Errors: message on stderr, non-zero exit, nothing on stdout.
    for args, data, needle in [
        ([fixture_dir], b"ok \xff bad", b"UTF-8"),
        (["--decode", fixture_dir], b"[1, two]", b"JSON array"),
        (["--decode", fixture_dir], b"[99999999]", b"outside the vocabulary"),
        (["/nonexistent-dir"], b"x", b"tokenizer.json"),
        ([], b"", b"usage"),
        (["--bogus", fixture_dir], b"", b"unknown option"),
    ]:
        p = run(binary, args, data)
        if p.returncode == 0 or needle not in p.stderr or p.stdout:
            print(f"{args} with {data!r}: rc={p.returncode} stdout={p.stdout!r} stderr={p.stderr!r} (wanted {needle!r})")
            failures += 1

    print(f"{len(cases[::7])} fixture cases through the CLI, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# The consumers of the *installed* library, run the way users run them (CTest: abi:consumers):
#   1. glm5rt-chat from the install prefix, scripted through stdin: a two-turn conversation on the demo
#      model (the first reply is reference.json's greedy answer; the second prompt contains the first
#      turn), /save, /reset, /load and a third turn that reuses the loaded conversation; --prompt; and
#      Ctrl-C at the prompt (no exit) and during a reply (cancelled, the next turn answers normally);
#   2. Rust: the hand-written bindings' struct layouts against the C compiler's, `cargo test --offline`,
#      and the `generate` example (its greedy output is the reference answer);
#   3. Go: `go vet`, `go test` and the cmd/stream example (the same answer).
# Each toolchain finds libglm5rt through PKG_CONFIG_PATH=PREFIX/lib/pkgconfig.
# Exit 77 (skipped) only when cargo or go is absent and everything that could run passed.
# Usage: run.sh BUILD_DIR SOURCE_DIR [C_COMPILER]
set -euo pipefail
build=$(cd "$1" && pwd); src=$(cd "$2" && pwd); cc=${3:-cc}
work=$(mktemp -d)
pid=
cleanup() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi; rm -rf "$work"; }
trap cleanup EXIT
# A fixed prefix inside the build tree, emptied first: go caches the flags pkg-config gave for a
# package without noticing that they point into a directory that no longer exists.
prefix=$build/consumers/prefix
rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(ls -d "$prefix"/lib*/ | head -n1); libdir=${libdir%/}
export PKG_CONFIG_PATH=$libdir/pkgconfig
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
model=$src/models/glm5-demo
export GLM5RT_DEMO_MODEL=$model
skipped=()

fail() { echo "FAIL: $*" >&2; exit 1; }

# reference.json's greedy answer up to the first eos ("<|user|>": it was generated with eos disabled)
answer=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["greedy_text"].split("<|user|>")[0])' \
  "$model/reference.json")
question=$(python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["prompt"]; print(p.split("<|user|>")[1].split("<|assistant|>")[0])' \
  "$model/reference.json")
printf '%s\n' "$answer" >"$work/answer.txt"

echo "== glm5rt-chat (installed), two turns through stdin"
chat=$prefix/bin/glm5rt-chat
deps=$(ldd "$chat")   # (not piped into grep -q: an early exit would fail the pipeline)
grep -q "libglm5rt.so.0 => $libdir" <<<"$deps" || fail "glm5rt-chat does not use the installed library: $deps"
printf '%s\n' "$question" 'What is `forward` for?' "/save $work/chat.snap" /reset "/load $work/chat.snap" \
  'And `save_pretrained`?' /quit | "$chat" "$model" >"$work/chat.out" 2>"$work/chat.err" \
  || { rc=$?; cat "$work/chat.err"; fail "glm5rt-chat exited with $rc"; }
cat "$work/chat.out"; cat "$work/chat.err"
head -c "$(wc -c <"$work/answer.txt")" "$work/chat.out" | cmp -s - "$work/answer.txt" \
  || fail "the first reply is not reference.json's greedy answer"
python3 - "$work/chat.err" <<'PY' || fail "the conversation's turns do not build on each other (see above)"
import re, sys
err = open(sys.argv[1]).read()
stats = [tuple(map(int, m)) for m in re.findall(r"\[prompt (\d+) tokens \((\d+) new\).*?\| reply (\d+) tokens.*?\| session (\d+) tokens", err)]
assert len(stats) == 3, f"want 3 replies, got {len(stats)}: {stats}"
(p1, n1, r1, s1), (p2, n2, r2, s2), (p3, n3, r3, s3) = stats
assert r1 > 5 and r2 > 0 and r3 > 0, "replies must produce tokens"
assert s1 == p1 + r1, f"turn 1: session {s1} != prompt {p1} + reply {r1}"
assert p2 > s1 - 1, f"turn 2's prompt ({p2} tokens) must contain turn 1 ({s1} tokens)"
assert p2 - n2 >= p1, f"turn 2 recomputed the first turn: only {p2 - n2} tokens reused"
loaded = re.search(r"\[loaded (\d+) tokens, (\d+) messages", err)
assert loaded, "no /load confirmation"
assert int(loaded.group(1)) == s2, f"/load restored {loaded.group(1)} tokens, /save had {s2}"
assert int(loaded.group(2)) == 4, f"/load rebuilt {loaded.group(2)} messages, want 4"
assert p3 - n3 >= p2, f"turn 3 did not reuse the loaded conversation: {p3 - n3} of {p3} tokens reused"
print(f"turns: prompt/new/reply/session = {stats}")
PY

echo "== glm5rt-chat --prompt (one-shot)"
"$chat" --quiet --prompt "$question" "$model" >"$work/oneshot.out" </dev/null
cmp -s "$work/oneshot.out" "$work/answer.txt" || { cat "$work/oneshot.out"; fail "one-shot reply differs"; }

echo "== glm5rt-chat and Ctrl-C: at the prompt (a hint), during a long reply (cancelled), then a normal turn"
# A ~6000-token message: its prefill takes seconds on the CPU backend, so the signal lands inside it.
long=$(python3 -c "print(' '.join('the quick brown fox jumps over the lazy dog %d;' % i for i in range(460)))")
mkfifo "$work/in"
"$chat" --backend cpu "$model" <"$work/in" >"$work/sig.out" 2>"$work/sig.err" &
pid=$!
exec 3>"$work/in"
for _ in $(seq 600); do grep -q greedy "$work/sig.err" && break; sleep 0.1; done   # loaded: banner printed
grep -q greedy "$work/sig.err" || fail "glm5rt-chat did not start: $(cat "$work/sig.err")"
sleep 0.3; kill -INT "$pid"; sleep 0.5     # waiting at the prompt: a hint, no exit
kill -0 "$pid" 2>/dev/null || fail "Ctrl-C at the prompt ended glm5rt-chat"
printf '%s\n' "$long" >&3
sleep 0.5; kill -INT "$pid"; sleep 0.5     # inside the long reply's prefill (or generation)
kill -0 "$pid" 2>/dev/null || fail "Ctrl-C during a reply ended glm5rt-chat"
printf '%s\n' /reset "$question" >&3
exec 3>&-
wait "$pid" || { cat "$work/sig.err"; fail "glm5rt-chat failed after Ctrl-C"; }
cat "$work/sig.err"
grep -q "Ctrl-C cancels a reply" "$work/sig.err" || fail "no hint after Ctrl-C at the prompt"
grep -q "^\[cancelled\]" "$work/sig.err" || fail "Ctrl-C did not cancel the long reply"
tail -c "$(wc -c <"$work/answer.txt")" "$work/sig.out" | cmp -s - "$work/answer.txt" \
  || { cat "$work/sig.out"; fail "the reply after a cancelled one differs from the reference"; }
echo "chat checks passed"

if ! command -v cargo >/dev/null && [ -x "$HOME/.cargo/bin/cargo" ]; then export PATH=$HOME/.cargo/bin:$PATH; fi
if command -v cargo >/dev/null; then
  echo "== Rust ($(cargo --version))"
  export CARGO_TARGET_DIR=$build/consumers/cargo-target
  cd "$src/examples/rust"
  "$cc" -std=c99 "$src/tests/consumers/layout.c" -o "$work/layout" $(pkg-config --cflags glm5rt)
  "$work/layout" >"$work/layout.c.txt"
  cargo run --offline --quiet -p glm5rt-sys --example layout >"$work/layout.rs.txt"
  diff "$work/layout.c.txt" "$work/layout.rs.txt" || fail "glm5rt-sys struct layouts differ from the C header's"
  echo "glm5rt-sys layouts match the C compiler ($(wc -l <"$work/layout.c.txt") sizes and offsets)"
  cargo test --offline --quiet 2>&1
  cargo run --offline --quiet -p glm5rt --example generate -- "$model" "$question" >"$work/rust.out"
  cat "$work/rust.out"
  cmp -s "$work/rust.out" "$work/answer.txt" || fail "the Rust example's greedy reply differs from the reference"
else
  echo "== Rust: SKIPPED (cargo not found)"; skipped+=(rust)
fi

if command -v go >/dev/null; then
  echo "== Go ($(go version))"
  export GOFLAGS=-mod=mod GOPROXY=off
  export CGO_LDFLAGS="-Wl,-rpath,$libdir"   # also part of go's cache key
  cd "$src/examples/go"
  go vet ./...
  go test -count=1 ./...
  go run ./cmd/stream -model "$model" -prompt "$question" >"$work/go.out"
  cat "$work/go.out"
  cmp -s "$work/go.out" "$work/answer.txt" || fail "the Go stream example's greedy reply differs from the reference"
else
  echo "== Go: SKIPPED (go not found)"; skipped+=(go)
fi

if [ ${#skipped[@]} -gt 0 ]; then echo "skipped: ${skipped[*]}"; exit 77; fi
echo "consumer checks passed"

#!/usr/bin/env bash
# Installs every system dependency of libglm5rt from Debian's packages. Idempotent: packages already
# present are not touched, and nothing is fetched when all are there. Run as root or with sudo.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config   # toolchain
  libmimalloc-dev libzstd-dev libpcre2-dev       # core: host heap, snapshots, Unicode regex
  libicu-dev                                     # tokenizer: Unicode normalization (NFC/NFKC)
  nlohmann-json3-dev doctest-dev                 # JSON parsing, tests
  python3 python3-numpy                          # test helpers that read .npy dumps
  golang-go                                      # the Go binding and its tests
  clang libclang-rt-14-dev                       # libFuzzer targets of the parsers (scripts/fuzz.sh)
)
# The Rust binding's tests need cargo: Debian's (rustc 1.63 suffices) unless a toolchain is there already.
if ! command -v cargo >/dev/null && [ ! -x "${HOME:-/root}/.cargo/bin/cargo" ]; then packages+=(cargo); fi
missing=()
for p in "${packages[@]}"; do
  [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" = "install ok installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all dependencies present"
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"

#!/usr/bin/env bash
# Installs the built library into a fresh prefix and consumes it the way users do:
#  1. a C99 program through `pkg-config --cflags --libs glm5rt` (shared), run with the installed .so;
#  2. the same program linked statically through `pkg-config --static` (every private dependency listed);
#  3. a tiny CMake project through find_package(glm5rt) -> glm5rt::glm5rt;
#  4. `nm -D --defined-only` on the installed shared library shows only glm5rt_* symbols;
#  5. the SONAME carries the ABI major version.
# Usage: installed_package.sh BUILD_DIR SOURCE_DIR C_COMPILER
set -euo pipefail
build=$1; here=$2; cc=${3:-cc}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(ls -d "$prefix"/lib*/ | head -n1); libdir=${libdir%/}
export PKG_CONFIG_PATH=$libdir/pkgconfig

cat >"$work/hello.c" <<'C'
#include <glm5rt/glm5rt.h>
#include <stdio.h>
#include <string.h>
int main(void) {
    printf("glm5rt %s abi %d\n", glm5rt_version(), (int)glm5rt_abi_version());
    return strcmp(glm5rt_version(), GLM5RT_VERSION_STRING) != 0;
}
C

echo "== pkg-config, shared"
pkg-config --exists glm5rt
"$cc" -std=c99 -pedantic -Wall -Werror "$work/hello.c" -o "$work/hello_shared" $(pkg-config --cflags --libs glm5rt)
LD_LIBRARY_PATH=$libdir "$work/hello_shared"
# Tool output is captured before grep reads it: under pipefail, `tool | grep -q` fails at random when grep exits at its
# first match and the tool's later writes find the pipe closed (ldd then exits 1) -- this check failed CI that way once.
deps=$(LD_LIBRARY_PATH=$libdir ldd "$work/hello_shared")
if grep -qF "libglm5rt.so.0 => $libdir/" <<<"$deps"; then echo "links the installed libglm5rt.so.0"; else
  echo "hello_shared does not use the installed library ($libdir):"; echo "$deps"; exit 1; fi

echo "== pkg-config --static"
static_libs=$(pkg-config --static --libs glm5rt | sed 's/-lglm5rt\b/-l:libglm5rt.a/')
"$cc" -std=c99 "$work/hello.c" -o "$work/hello_static" $(pkg-config --cflags glm5rt) $static_libs
deps=$(ldd "$work/hello_static" || true)
if grep -q libglm5rt <<<"$deps"; then echo "static binary still needs libglm5rt.so"; exit 1; fi
"$work/hello_static"

echo "== find_package(glm5rt)"
mkdir -p "$work/cmake_consumer"
cp "$work/hello.c" "$work/cmake_consumer/hello.c"
cat >"$work/cmake_consumer/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.16)
project(consumer C CXX)
find_package(glm5rt 0.1 REQUIRED)
add_executable(hello hello.c)
target_link_libraries(hello PRIVATE glm5rt::glm5rt)
add_executable(hello_static hello.c)
target_link_libraries(hello_static PRIVATE glm5rt::glm5rt_static)
CM
cmake -S "$work/cmake_consumer" -B "$work/cmake_consumer/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cmake_consumer/build" >/dev/null
LD_LIBRARY_PATH=$libdir "$work/cmake_consumer/build/hello"
"$work/cmake_consumer/build/hello_static"

echo "== exported symbols"
so=$(ls "$libdir"/libglm5rt.so.*.*.* | head -n1)
others=$(nm -D --defined-only "$so" | awk '{print $3}' | grep -v '^glm5rt_' | grep -v '^GLM5RT_0$' || true)
count=$(nm -D --defined-only "$so" | awk '{print $3}' | grep -c '^glm5rt_')
echo "$count glm5rt_* symbols exported"
if [ -n "$others" ]; then echo "symbols other than glm5rt_* exported:"; echo "$others" | head -20; exit 1; fi
[ "$count" -gt 10 ]

echo "== soname"
dyn=$(readelf -d "$so")
grep -q 'SONAME.*libglm5rt\.so\.0' <<<"$dyn" && echo "SONAME libglm5rt.so.0"
echo "installed package checks passed"

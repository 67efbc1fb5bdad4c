#!/usr/bin/env bash
# Cross-compiles weft and its tests for aarch64 and runs the tests that need
# no child process (qemu-user cannot exec a foreign binary without binfmt)
# under qemu-aarch64, at 1 vcore and at all vcores.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v aarch64-linux-gnu-gcc >/dev/null || ! command -v qemu-aarch64 >/dev/null; then
  echo "cross-aarch64: aarch64-linux-gnu-gcc or qemu-aarch64 missing (scripts/deps.sh test installs them)" >&2
  exit 1
fi
# The yield pass's runtime test compiles its sources for aarch64 with the
# host's clang-19 and the host's plugin: build the plugin in a host tree
# (nothing else), when LLVM 19 is there.
plugin=""
cmake -S . -B build-aarch64-host -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_BUILD_BENCH=OFF \
  -DWEFT_BUILD_TESTS=OFF >/dev/null
if cmake --build build-aarch64-host --target help | grep -q '^weft_yield_plugin:'; then
  cmake --build build-aarch64-host -j "$(nproc)" --target weft_yield_plugin
  plugin="$PWD/build-aarch64-host/plugin/weft-yield.so"
else
  echo "cross-aarch64: no LLVM 19: the yield pass's runtime test is not built for aarch64" >&2
fi
cmake -S . -B build-aarch64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_BUILD_BENCH=OFF -DWEFT_YIELD_PLUGIN_FILE="$plugin" >/dev/null
cmake --build build-aarch64 -j "$(nproc)"
ctest --test-dir build-aarch64 --output-on-failure -j 2 -L cross

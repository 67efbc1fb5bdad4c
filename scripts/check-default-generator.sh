#!/usr/bin/env bash
# Configures and builds the whole tree (library, tests, examples, benchmarks,
# the yield pass and its benchmark objects) with CMake's default generator,
# Unix Makefiles, as a user who types "cmake -S . -B build && cmake --build
# build" does: Ninja, which make test uses elsewhere, creates the directories
# of custom commands' outputs by itself and so hides a missing one.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-$(nproc)}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cmake -S . -B "$dir" -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$dir" -j "$jobs" >/dev/null
test -x "$dir/bench/weft_ring"
if grep -q '^WEFT_HAVE_PLUGIN:INTERNAL=ON' "$dir/CMakeCache.txt" 2>/dev/null ||
   [ -d "$dir/bench/yieldwork-objs" ]; then
  test -n "$(ls "$dir/bench/yieldwork-objs"/*.o 2>/dev/null)" ||
    { echo "check-default-generator: no yield-pass benchmark objects built" >&2; exit 1; }
fi
echo "check-default-generator: the tree builds with Unix Makefiles"

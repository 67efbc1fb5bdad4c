#!/usr/bin/env bash
# Installs the release build into a scratch prefix and builds examples/hello.c
# against it: with pkg-config (plain, under the preload shim, with the --wrap
# shim) and with CMake's find_package(weft).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name weft.pc)")/..
export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc examples/hello.c $(pkg-config --cflags --libs weft) -o "$prefix/hello-pc"
LD_LIBRARY_PATH="$libdir" "$prefix/hello-pc"
# The shim, both ways: the preload library by its pkg-config path, and a link
# with the --wrap flags and libweft-wrap.
LD_LIBRARY_PATH="$libdir" LD_PRELOAD="$(pkg-config --variable=preload weft)" "$prefix/hello-pc"
cc examples/hello.c $(pkg-config --cflags weft) $(pkg-config --variable=wrap_ldflags weft) \
  $(pkg-config --libs weft) -o "$prefix/hello-wrap"
LD_LIBRARY_PATH="$libdir" "$prefix/hello-wrap"
mkdir -p "$prefix/fp"
cat > "$prefix/fp/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.22)
project(hello C)
find_package(weft REQUIRED)
add_executable(hello $PWD/examples/hello.c)
target_link_libraries(hello weft::weft)
CM
cmake -S "$prefix/fp" -B "$prefix/fp/b" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/fp/b" >/dev/null
"$prefix/fp/b/hello"
echo "check-install: pkg-config and find_package(weft) both work"

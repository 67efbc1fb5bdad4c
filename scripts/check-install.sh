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
# The pthread layer: a plain pthread program through <weft/pthread.h> and
# pthread_libs, and unmodified under pthread_preload; both must run their
# threads as uthreads (the program checks weft_self() in the first case).
cat > "$prefix/pt.c" <<'C'
#include <pthread.h>
#include <stdio.h>
#ifdef WITH_HEADER
#include <weft/pthread.h>
#endif
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int n;
static void *f(void *a) {
#ifdef WITH_HEADER
    if (!weft_self()) return NULL;
#endif
    pthread_mutex_lock(&m); n++; pthread_mutex_unlock(&m); return a; }
int main(void) {
    pthread_t t[10];
    for (int i = 0; i < 10; i++) pthread_create(&t[i], NULL, f, NULL);
    for (int i = 0; i < 10; i++) pthread_join(t[i], NULL);
    if (n != 10) { fprintf(stderr, "pthread check: %d of 10\n", n); return 1; }
    return 0;
}
C
cc -DWITH_HEADER "$prefix/pt.c" $(pkg-config --cflags weft) $(pkg-config --variable=pthread_libs weft) \
  -lpthread -o "$prefix/pt-header"
LD_LIBRARY_PATH="$libdir" "$prefix/pt-header"
cc "$prefix/pt.c" -lpthread -o "$prefix/pt-plain"
LD_LIBRARY_PATH="$libdir" LD_PRELOAD="$(pkg-config --variable=pthread_preload weft)" "$prefix/pt-plain"
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
echo "check-install: pkg-config (with the shim and the pthread layer) and find_package(weft) work"

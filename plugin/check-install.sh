#!/usr/bin/env bash
# plugin/check-install.sh BUILD [--link]: installs BUILD into a scratch prefix,
# moves the prefix (the install must be relocatable), and compiles a loop
# through the installed weft-cc and through weft-yield.pc's flags with the
# clang it names; both objects must call the slow paths. --link also links
# that program and examples/hello.c against the installed libweft and runs
# them (make install-check; ctest's plugin-install compiles only, since a
# sanitizer build's libweft needs the sanitizer runtime to link).
set -euo pipefail
build=$(readlink -f "$1")
link=${2:-}
cd "$(dirname "$0")/.."
if [ ! -f "$build/plugin/weft-yield.so" ]; then
  echo "plugin/check-install.sh: $build has no yield plugin (no LLVM 19): skipped"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/staged" >/dev/null
mv "$tmp/staged" "$tmp/prefix"
prefix=$tmp/prefix

weftcc=$(find "$prefix" -name weft-cc -type f)
pc=$(find "$prefix" -name weft-yield.pc)
[ -x "$weftcc" ] || { echo "check-install: no executable weft-cc installed" >&2; exit 1; }
[ -n "$pc" ] || { echo "check-install: no weft-yield.pc installed" >&2; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc")
plugin=$(pkg-config --variable=plugin weft-yield)
[ -f "$plugin" ] || { echo "check-install: weft-yield.pc names a missing plugin: $plugin" >&2; exit 1; }
[ "$(readlink -f "$(pkg-config --variable=weftcc weft-yield)")" = "$(readlink -f "$weftcc")" ] \
  || { echo "check-install: weft-yield.pc's weftcc is not the installed weft-cc" >&2; exit 1; }

cat >"$tmp/loop.c" <<'C'
#include <weft/yield.h>
volatile unsigned long sink;
WEFT_NOYIELD static void quiet(unsigned long n) { for (unsigned long i = 0; i < n; i++) sink += i; }
int main(int argc, char **argv)
{
    (void)argv;
    for (unsigned long i = 0; i < 1000000ul * (unsigned long)argc; i++)
        sink += i;
    quiet(1000);
    return 0;
}
C
# The installed wrapper (it finds ../<libdir>/weft/weft-yield.so itself).
"$weftcc" -O2 -I"$(pkg-config --variable=includedir weft-yield)" -c "$tmp/loop.c" -o "$tmp/loop-cc.o"
nm "$tmp/loop-cc.o" | grep -q ' U weft__yield_slow$' \
  || { echo "check-install: weft-cc did not instrument the loop" >&2; exit 1; }
# pkg-config's flags with its clang, -mllvm options included.
clang=$(pkg-config --variable=clang weft-yield)
# shellcheck disable=SC2046
"$clang" -O2 $(pkg-config --cflags weft-yield) -mllvm -weft-yield-mode=counter \
  -c "$tmp/loop.c" -o "$tmp/loop-pc.o"
nm "$tmp/loop-pc.o" | grep -q ' U weft__yield_count_slow$' \
  || { echo "check-install: pkg-config flags did not instrument the loop" >&2; exit 1; }

if [ "$link" = --link ]; then
  libdir=$(pkg-config --variable=libdir weft-yield)
  # shellcheck disable=SC2046
  "$weftcc" -O2 $(pkg-config --cflags weft-yield) "$tmp/loop.c" $(pkg-config --libs weft-yield) -o "$tmp/loop"
  LD_LIBRARY_PATH="$libdir" "$tmp/loop"
  # shellcheck disable=SC2046
  "$weftcc" -O2 $(pkg-config --cflags weft-yield) examples/hello.c $(pkg-config --libs weft-yield) -o "$tmp/hello"
  LD_LIBRARY_PATH="$libdir" "$tmp/hello"
  echo "plugin/check-install.sh: weft-cc and weft-yield.pc build, link and run"
else
  echo "plugin/check-install.sh: weft-cc and weft-yield.pc compile instrumented code"
fi

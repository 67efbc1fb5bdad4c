#!/bin/sh
# check-weft-text.sh OBJDUMP LIBRARY — asserts that weft's code (the
# weft_text section, see weft-text.sh) never calls a local function that
# lives outside it. Such a helper (aarch64's outline atomics from libgcc,
# a compiler-rt builtin) would run with weft's locks held yet look like
# application code to the preemption handler, which could then switch the
# uthread out with a spinlock held: a hang. Calls through the PLT are fine
# (they land in libc and friends, whose ranges the handler knows).
set -eu
objdump=$1
lib=$2
inside=$("$objdump" -t "$lib" | awk -F'\t' '$1 ~ / weft_text$/ { n = split($2, a, " "); print a[n] }' | sort -u)
[ -n "$inside" ] || { echo "check-weft-text: $lib has no weft_text symbols" >&2; exit 1; }
bad=$("$objdump" -d -j weft_text "$lib" |
  grep -E '[[:space:]](bl|b|call|callq|jmp|jmpq)[[:space:]]+[0-9a-f]+ <' |
  sed -E 's/.*<([^>+]+)(\+0x[0-9a-f]+)?>.*/\1/' | grep -v '@plt$' | sort -u |
  while read -r sym; do
    printf '%s\n' "$inside" | grep -qxF "$sym" || echo "$sym"
  done)
if [ -n "$bad" ]; then
  echo "check-weft-text: weft_text in $lib calls local code outside it:" >&2
  echo "$bad" | sed 's/^/  /' >&2
  exit 1
fi
echo "check-weft-text: every call from weft_text in $lib stays inside it or goes through the PLT"

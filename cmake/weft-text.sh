#!/bin/sh
# weft-text.sh OBJCOPY COMPILER ARGS... — the compiler launcher of libweft's
# objects: compiles, then renames the object's code sections to weft_text.
# The linker keeps that section whole and defines __start_weft_text and
# __stop_weft_text around it, so the preemption handler (src/preempt.c) can
# tell weft's own code from the application's whether libweft is linked
# statically or shared.
set -e
objcopy=$1
shift
"$@"
out=
prev=
for a in "$@"; do
  if [ "$prev" = "-o" ]; then out=$a; fi
  prev=$a
done
[ -n "$out" ] || exit 0
exec "$objcopy" \
  --rename-section .text=weft_text \
  --rename-section .text.unlikely=weft_text \
  --rename-section .text.hot=weft_text \
  --rename-section .text.startup=weft_text \
  --rename-section .text.exit=weft_text \
  "$out"

#!/bin/sh
# check_exports.sh NM LIBRARY LIST — asserts that the weft names LIBRARY
# exports are exactly those in LIST (tests/exports.txt): the public API of
# include/weft/ plus the few internal names the pthread layer and the I/O
# shim call (marked WEFT__EXPORT in src/). libweft is built with hidden
# symbols; a name that leaks, or an API function that lost its export,
# shows here. Sanitizer runtimes' names are not weft's and are ignored.
# After a deliberate change to the API:
#   nm -D --defined-only build/src/libweft.so | awk '{print $3}' |
#     grep -E '^(weft|__start_weft|__stop_weft)' | sort > tests/exports.txt
set -eu
nm=$1
lib=$2
list=$3
got=$("$nm" -D --defined-only "$lib" | awk '{print $3}' |
  grep -E '^(weft|__start_weft|__stop_weft)' | sort)
want=$(grep -v '^#' "$list" | sort)
if [ "$got" != "$want" ]; then
  echo "check_exports: $lib does not export what $list says" >&2
  printf '%s\n' "$got" > "${TMPDIR:-/tmp}/check_exports.$$"
  printf '%s\n' "$want" | diff - "${TMPDIR:-/tmp}/check_exports.$$" |
    sed -n 's/^> /  exported, not listed: /p; s/^< /  listed, not exported: /p' >&2
  rm -f "${TMPDIR:-/tmp}/check_exports.$$"
  exit 1
fi
echo "check_exports: $lib exports the $(printf '%s\n' "$got" | wc -l) names of $list"

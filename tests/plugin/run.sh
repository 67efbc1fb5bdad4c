#!/usr/bin/env bash
# run.sh TEST [%name=value ...]: runs the "RUN:" lines of TEST the way lit
# would, with the given substitutions (longest name first) plus %s (TEST)
# and %t (a path prefix in a scratch directory). A line ending in "\"
# continues on the next RUN: line. Each line runs under bash -o pipefail;
# the first that fails fails the test. tests/plugin/CMakeLists.txt passes
# %clang %weftcc %plugin %plugin18 %opt %FileCheck %not %llvm-dis
# %llvm-objdump %include.
set -uo pipefail
test=$(readlink -f "$1")
shift
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-plugin-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

names=() values=()
for kv in "$@" "%s=$test" "%t=$tmp/t"; do
  names+=("${kv%%=*}") values+=("${kv#*=}")
done
# Longest name first, so %plugin18 is not taken for %plugin + "18".
order=$(for i in "${!names[@]}"; do echo "${#names[$i]} $i"; done | sort -rn | cut -d' ' -f2)

substitute() {
  local line=$1 i
  for i in $order; do
    line=${line//"${names[$i]}"/"${values[$i]}"}
  done
  printf '%s' "$line"
}

n=0 cmd=
while IFS= read -r raw; do
  case $raw in *RUN:*) ;; *) continue ;; esac
  part=${raw#*RUN:}
  part=${part# }
  if [ "${part%\\}" != "$part" ]; then
    cmd+="${part%\\} "
    continue
  fi
  cmd+=$part
  n=$((n + 1))
  line=$(substitute "$cmd")
  cmd=
  echo "RUN $n: $line"
  if ! (cd "$tmp" && bash -o pipefail -c "$line"); then
    echo "FAILED at RUN line $n of $test" >&2
    exit 1
  fi
done <"$test"
if [ "$n" -eq 0 ]; then
  echo "$test: no RUN: lines" >&2
  exit 1
fi
echo "$test: $n RUN lines passed"

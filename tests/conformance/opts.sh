#!/usr/bin/env bash
# opts.sh — the Open POSIX Test Suite's pthread_* and sem_* conformance tests,
# on glibc and on weft, side by side. `make conformance` runs it.
#
#   tests/conformance/opts.sh [--lib DIR] [--work DIR] [--jobs N] [--timeout S] [--filter RE]
#
# --lib      the directory holding libweft-pthread.so (default build/src)
# --work     where the suite is unpacked and the tests are built (default build-opts)
# --jobs     tests run at once (default 2)
# --timeout  seconds per test run (default 30; a timeout counts as a failure)
# --filter   only interface directories matching this extended regex
#
# The suite comes from Debian's source package `posixtestsuite`, fetched with
# `apt-get source` when it is missing: through a private apt state (a copy
# of this machine's Debian sources with deb-src instead of deb, its own list
# directory), so the system's apt configuration is left as it is. Each test
# (conformance/interfaces/{pthread_*,sem_*}/N-M.c) is built twice: plainly
# against glibc, and linked with libweft-pthread (first, so its pthread_ and
# sem_ names are the ones the test calls). Both are run; exit status 0 is
# PASS, 1 FAIL, 2 UNRESOLVED, 4 UNSUPPORTED, 5 UNTESTED (the suite's
# posixtest.h), a timeout or a signal FAIL. *-buildonly.c tests only build.
#
# Result: counts for both, every test that passes on glibc and not on weft,
# and those of them listed in exclusions.txt (with the reason) set apart.
# Exits 1 if a test passes on glibc and not on weft without an exclusion.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
lib=$root/build/src
work=$root/build-opts
jobs=2
timeout_s=30
filter='.'
while [ $# -gt 0 ]; do
  case $1 in
    --lib) lib=$(cd "$2" && pwd); shift 2 ;;
    --work) work=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --filter) filter=$2; shift 2 ;;
    *) echo "opts.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -f "$lib/libweft-pthread.so" ] || { echo "opts.sh: no libweft-pthread.so in $lib (make build first)" >&2; exit 2; }
mkdir -p "$work"
work=$(cd "$work" && pwd)

# ---- the suite ----------------------------------------------------------------------
src=$(ls -d "$work"/posixtestsuite-*/ 2>/dev/null | head -1)
if [ -z "$src" ]; then
  echo "opts.sh: fetching Debian's posixtestsuite source package" >&2
  apt=$work/apt
  mkdir -p "$apt/parts" "$apt/lists/partial"
  : > "$apt/empty.list"
  found=0
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    sed -e 's/^Types:.*\bdeb\b.*$/Types: deb-src/' "$f" > "$apt/parts/$(basename "$f")"
    found=1
  done
  if [ -f /etc/apt/sources.list ]; then
    grep -E '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' > "$apt/parts/list.list" || true
    [ -s "$apt/parts/list.list" ] && found=1
  fi
  [ $found = 1 ] || { echo "opts.sh: no Debian sources configured" >&2; exit 2; }
  opts=(-q -o Dir::Etc::SourceList="$apt/empty.list" -o Dir::Etc::SourceParts="$apt/parts"
        -o Dir::State::Lists="$apt/lists")
  command -v dpkg-source >/dev/null || "$root/scripts/deps.sh" conformance
  (cd "$work" && apt-get "${opts[@]}" update >/dev/null && apt-get "${opts[@]}" source posixtestsuite >/dev/null) ||
    { echo "opts.sh: apt-get source posixtestsuite failed" >&2; exit 2; }
  src=$(ls -d "$work"/posixtestsuite-*/ | head -1)
fi
src=${src%/}
echo "opts.sh: suite in $src" >&2

# ---- build and run ---------------------------------------------------------------------
out=$work/out
rm -rf "$out"
mkdir -p "$out"
cc=${CC:-cc}
list=$out/tests.txt
(cd "$src/conformance/interfaces" &&
  ls -d pthread_* sem_* 2>/dev/null | grep -E "$filter" | while read -r d; do
    ls "$d" | grep -E '^[0-9]+-[0-9]+(-buildonly)?\.c$' | sed "s|^|$d/|"
  done) > "$list"
echo "opts.sh: $(wc -l < "$list") tests" >&2

one() { # one test: build both ways, run both, print "name glibc-result weft-result"
  t=$1
  name=${t%.c}
  id=${name//\//__}
  dir=$src/conformance/interfaces/$(dirname "$t")
  flags=(-std=gnu99 -w -D_GNU_SOURCE -D_XOPEN_SOURCE=600 -I "$src/include" -I "$dir")
  res=()
  for side in glibc weft; do
    exe=$out/$id.$side
    if [ $side = weft ]; then
      link=(-L "$lib" -Wl,--no-as-needed,-rpath,"$lib" -lweft-pthread -lweft)
    else
      link=()
    fi
    if ! (cd "$dir" && $cc "${flags[@]}" "$src/conformance/interfaces/$t" "${link[@]}" -lpthread -lrt -lm \
          -o "$exe") >"$out/$id.$side.build" 2>&1; then
      res+=(BUILD-FAILED)
      continue
    fi
    case $t in *-buildonly.c) res+=(PASS); continue ;; esac
    (cd "$out" && timeout -k 5 "$timeout_s" "$exe" </dev/null >"$out/$id.$side.log" 2>&1)
    rc=$?
    case $rc in
      0) res+=(PASS) ;; 1) res+=(FAIL) ;; 2) res+=(UNRESOLVED) ;; 4) res+=(UNSUPPORTED) ;;
      5) res+=(UNTESTED) ;; 124|137) res+=(TIMEOUT) ;; *) res+=("FAIL-$rc") ;;
    esac
  done
  echo "$name ${res[0]} ${res[1]}"
}
export -f one
export src out lib cc timeout_s
xargs -a "$list" -P "$jobs" -I{} bash -c 'one "$@"' _ {} | sort > "$out/results.txt"

# ---- report ------------------------------------------------------------------------------
excl=$here/exclusions.txt
awk -v excl="$excl" '
  BEGIN { while ((getline line < excl) > 0) { if (line ~ /^#/ || line == "") continue;
            split(line, f, /[ \t]+/); why = line; sub(/^[^ \t]+[ \t]+/, "", why); ex[f[1]] = why } }
  { g[$2]++; w[$3]++; n++; res[$1] = $3
    if ($2 == "PASS" && $3 != "PASS") { if ($1 in ex) exl[$1] = $3; else reg[$1] = $3 }
    if ($2 != "PASS" && $3 == "PASS") better[$1] = $2 }
  END {
    printf "Open POSIX Test Suite, pthread_* and sem_*: %d tests\n\n", n
    printf "| result | glibc | weft |\n| --- | --- | --- |\n"
    split("PASS FAIL UNRESOLVED UNSUPPORTED UNTESTED TIMEOUT BUILD-FAILED", order, " ")
    for (i = 1; i <= 7; i++) { k = order[i]; printf "| %s | %d | %d |\n", k, g[k], w[k]; seen[k] = 1 }
    for (k in g) if (!(k in seen)) { printf "| %s | %d | %d |\n", k, g[k], w[k]; seen[k] = 1 }
    for (k in w) if (!(k in seen)) printf "| %s | %d | %d |\n", k, g[k], w[k]
    nr = 0; for (k in reg) nr++
    ne = 0; for (k in exl) ne++
    nb = 0; for (k in better) nb++
    printf "\npass on glibc, not on weft: %d (%d of them excluded, listed with the reason)\n", nr + ne, ne
    for (k in reg) printf "  REGRESSION %s: %s\n", k, reg[k]
    for (k in exl) printf "  excluded   %s: %s (%s)\n", k, exl[k], ex[k]
    printf "pass on weft, not on glibc: %d\n", nb
    for (k in better) printf "  %s (glibc: %s)\n", k, better[k]
    for (k in ex) if (!(k in exl) && (k in res) && res[k] == "PASS")
      printf "  stale exclusion: %s passes on weft now (remove it from exclusions.txt)\n", k
    exit nr > 0
  }' "$out/results.txt" | tee "$out/summary.md"
status=${PIPESTATUS[0]}
echo "opts.sh: results in $out/results.txt, logs in $out/*.log" >&2
exit "$status"

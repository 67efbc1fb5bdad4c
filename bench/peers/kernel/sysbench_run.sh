#!/usr/bin/env bash
# sysbench_run.sh — runs Debian's sysbench (a program nobody here wrote,
# unmodified) and prints its throughput as the benchmark driver's RESULT
# lines (bench/sections.py: the "sysbench" section). LD_PRELOAD from the
# environment decides whether its threads are NPTL's or weft's.
#
#   sysbench_run.sh threads|mutex   (impl from BENCH_IMPL, default nptl)
#
# threads: 8 threads, each taking a mutex and yielding (--thread-yields=100
# --thread-locks=4), for 2 s: events/s as sysbench counts them. mutex: 8
# threads, each one event of 1 000 000 locks of a random one of 4096
# mutexes, nothing between: locks/s over sysbench's own time of the run.
# sysbench's exit status and its event count are checked (mutex: exactly
# one event per thread): a run that did not do its work fails.
# WEFT_PTHREAD_PRELOAD (set by bench/'s weft_pthread_preload) is preloaded
# into sysbench alone.
set -euo pipefail
impl=${BENCH_IMPL:-nptl}
test=$1
sb=$(command -v sysbench) || { echo "sysbench not found (scripts/deps.sh bench installs it)" >&2; exit 77; }
pre=()
[ -n "${WEFT_PTHREAD_PRELOAD:-}" ] && pre=(env LD_PRELOAD="$WEFT_PTHREAD_PRELOAD")
case $test in
  threads) out=$("${pre[@]}" "$sb" threads --threads=8 --thread-yields=100 --thread-locks=4 --time=2 run) ;;
  mutex) out=$("${pre[@]}" "$sb" mutex --threads=8 --mutex-num=4096 --mutex-locks=1000000 \
                 --mutex-loops=0 run) ;;
  *) echo "usage: sysbench_run.sh threads|mutex" >&2; exit 2 ;;
esac
events=$(printf '%s\n' "$out" | awk '/total number of events:/ {print $5}')
secs=$(printf '%s\n' "$out" | awk '/total time:/ {gsub("s", "", $3); print $3}')
if [ -z "$events" ] || [ -z "$secs" ] || [ "$events" -le 0 ]; then
  echo "FAIL sysbench $test printed no event count:" >&2
  printf '%s\n' "$out" >&2
  exit 1
fi
if [ "$test" = mutex ]; then
  if [ "$events" -ne 8 ]; then
    echo "FAIL sysbench mutex ran $events events, want one per thread (8)" >&2
    exit 1
  fi
  rate=$(awk -v s="$secs" 'BEGIN { printf "%.3f", 8 * 1000000 / s }')
  echo "RESULT bench=sysbench impl=$impl param=mutex value=$rate unit=locks/s"
else
  rate=$(awk -v e="$events" -v s="$secs" 'BEGIN { printf "%.3f", e / s }')
  echo "RESULT bench=sysbench impl=$impl param=threads value=$rate unit=events/s"
fi

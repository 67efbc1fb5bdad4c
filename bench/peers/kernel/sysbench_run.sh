#!/usr/bin/env bash
# sysbench_run.sh — runs Debian's sysbench (a program nobody here wrote,
# unmodified) and prints its throughput as the benchmark driver's RESULT
# lines (bench/sections.py: the "sysbench" section). LD_PRELOAD from the
# environment decides whether its threads are NPTL's or weft's.
#
#   sysbench_run.sh threads|mutex   (impl from BENCH_IMPL, default nptl)
#
# threads: 8 threads, each taking a mutex and yielding (--thread-yields=100
# --thread-locks=4), for 2 s: events/s. mutex: 8 threads, 20 000 mutex
# locks per event and 20 000 events: sysbench's own time for the run, in
# events/s. sysbench's exit status and its event count are checked: a run
# that did not do its work fails.
set -euo pipefail
impl=${BENCH_IMPL:-nptl}
test=$1
sb=$(command -v sysbench) || { echo "sysbench not found (scripts/deps.sh bench installs it)" >&2; exit 77; }
case $test in
  threads) out=$("$sb" threads --threads=8 --thread-yields=100 --thread-locks=4 --time=2 run) ;;
  mutex) out=$("$sb" mutex --threads=8 --mutex-num=4096 --mutex-locks=20000 --mutex-loops=0 \
                 --events=20000 --time=0 run) ;;
  *) echo "usage: sysbench_run.sh threads|mutex" >&2; exit 2 ;;
esac
events=$(printf '%s\n' "$out" | awk '/total number of events:/ {print $5}')
secs=$(printf '%s\n' "$out" | awk '/total time:/ {gsub("s", "", $3); print $3}')
if [ -z "$events" ] || [ -z "$secs" ] || [ "$events" -le 0 ]; then
  echo "FAIL sysbench $test printed no event count:" >&2
  printf '%s\n' "$out" >&2
  exit 1
fi
if [ "$test" = mutex ] && [ "$events" -ne 20000 ]; then
  echo "FAIL sysbench mutex ran $events events, asked 20000" >&2
  exit 1
fi
rate=$(awk -v e="$events" -v s="$secs" 'BEGIN { printf "%.3f", e / s }')
echo "RESULT bench=sysbench impl=$impl param=$test value=$rate unit=events/s"

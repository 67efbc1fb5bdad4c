#!/usr/bin/env python3
"""switch_counts.py — instructions per hand-off (park + unpark, semaphore) and per yield.

Runs build/bench/weft_switchcount (bench/weft/switchcount.c: one vcore, two
uthreads) under valgrind's callgrind at N and 2N hand-offs (or yields) and
divides the difference by the extra ones, so start-up and shutdown cancel
out; the same for each function's own instructions (self cost), so the
figure shows where a hand-off's instructions go. Callgrind counts are
repeatable: this is how a change to the switch paths is judged (issue 21's
target: a hand-off in at most 90 instructions), not by wall time.

    python3 bench/switch_counts.py [--build-dir build] [--n 100000] [--top 16]

The harness's own loop (switchcount.c's functions) is in the total; it is
listed so it can be told apart. Needs valgrind (scripts/deps.sh bench).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

TOTAL_RE = re.compile(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?PROGRAM TOTALS")
FUNC_RE = re.compile(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(?:[^:\s]*):(\S+)")
HARNESS = {"park_a", "park_b", "sem_a_fn", "sem_b_fn", "yielder", "parent", "main"}   # switchcount.c's own


def counts(prog: str, mode: str, n: int, tmp: str) -> tuple[int, dict[str, int]]:
    """Instructions of one run (total, and each function's own)."""
    out = os.path.join(tmp, f"cg.{mode}.{n}")
    run = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                          prog, mode, str(n)], capture_output=True, text=True)
    if run.returncode != 0 or f"switchcount {mode} {n}: ok" not in run.stdout:
        sys.exit(f"switch_counts: {prog} {mode} {n} failed (rc {run.returncode}):\n"
                 f"{run.stdout}{run.stderr[-2000:]}")
    ann = subprocess.run(["callgrind_annotate", "--threshold=100", out],
                         capture_output=True, text=True, check=True).stdout
    total, funcs = 0, {}
    for line in ann.splitlines():
        if m := TOTAL_RE.match(line):
            total = int(m.group(1).replace(",", ""))
        elif m := FUNC_RE.match(line):
            name = m.group(2).split("'")[0]   # callgrind marks recursion levels: f'2
            funcs[name] = funcs.get(name, 0) + int(m.group(1).replace(",", ""))
    if not total:
        sys.exit(f"switch_counts: no total in callgrind_annotate's output for {mode} {n}")
    return total, funcs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--n", type=int, default=100000, help="round trips (park) or yields per "
                    "uthread (yield) of the smaller run; the larger runs twice as many")
    ap.add_argument("--top", type=int, default=16, help="functions listed per figure")
    args = ap.parse_args()
    prog = os.path.join(args.build_dir, "bench", "weft_switchcount")
    if not os.access(prog, os.X_OK):
        sys.exit(f"switch_counts: {prog} not built (cmake --build {args.build_dir})")
    if not shutil.which("valgrind"):
        sys.exit("switch_counts: valgrind not installed (scripts/deps.sh bench)")
    with tempfile.TemporaryDirectory() as tmp:
        for mode, what in (("park", "park + unpark hand-off"),
                           ("sem", "semaphore post + wait hand-off"), ("yield", "yield"),
                           ("park-timer", "park + unpark hand-off, an alarm pending"),
                           ("sem-timer", "semaphore hand-off, an alarm pending"),
                           ("yield-timer", "yield, an alarm pending")):
            t1, f1 = counts(prog, mode, args.n, tmp)
            t2, f2 = counts(prog, mode, 2 * args.n, tmp)
            extra = 2 * args.n          # 2 hand-offs per round trip; 2 yielders
            per = sorted(((f2[k] - f1.get(k, 0)) / extra, k) for k in f2)
            harness = sum(v for v, k in per if k in HARNESS)
            print(f"{what}: {(t2 - t1) / extra - harness:.1f} instructions in weft "
                  f"({(t2 - t1) / extra:.1f} with the harness's loop; callgrind, one vcore, "
                  f"{extra} more in the second run)")
            for v, k in reversed(per[-args.top:]):
                if v >= 0.05:
                    print(f"  {v:7.1f}  {k}{'  (harness)' if k in HARNESS else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

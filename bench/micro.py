#!/usr/bin/env python3
"""micro.py — build weft and its peers, run the micro-benchmarks side by side,
and report medians, spreads and weft's ratio to every peer.

    python3 bench/micro.py              # what `make report` runs
    python3 bench/micro.py --help       # rounds, target length, subsets

Steps:
 1. Build the release tree (cmake -S . -B build -G Ninja
    -DCMAKE_BUILD_TYPE=Release -DWEFT_BUILD_BENCH=ON -DWEFT_SANITIZE=;
    cmake --build build, keeping going past failures) and the Go peers (go build into build/bench/peers). If the whole
    tree does not configure, bench/ is configured on its own so that the peers
    can still be measured. A program that could not be built is reported as
    "missing" with the reason, never dropped.
 2. Run every program ROUNDS + 1 times, the implementations of a benchmark
    interleaved (A B C A B C ...), discarding the first round as a warm-up.
    Each program sizes its own timed run (BENCH_TARGET_MS) after its own
    warm-up, checks its own work, and prints
        RESULT bench=<b> impl=<i> param=<p> value=<v> unit=<u>
    lines (and NOTE lines); see bench/common/bench.h.
 3. Print a Markdown table per benchmark (median, spread = (max-min)/median,
    flagged above 20%, weft ÷ peer), the targets from issue 2 as met / not
    met, and write the raw samples plus machine information to
    bench/results/micro-<host>-<timestamp>.json (and the report beside it as
    .md).

Only the Python standard library is used.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchlib import first_line, machine_base, save_results

ROOT = Path(__file__).resolve().parent.parent
SPREAD_FLAG = 0.20          # spreads above this are flagged
RUN_TIMEOUT_S = 60          # one program run (normally 1-3 s); beyond this it is reported as hung
SKIP_EXIT = 77              # a program's "cannot run here" exit status


# ---------------------------------------------------------------------------
# What to run
# ---------------------------------------------------------------------------

@dataclass
class Job:
    """One program invocation; it prints one RESULT line per (impl, param) in rows."""
    name: str                         # label in logs
    kind: str                         # "weft" | "peer" | "go": where the binary lives
    program: str                      # binary name
    rows: list[tuple[str, str]]       # (impl, param) it is expected to print
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cpus: set[int] | None = None      # process affinity set by the driver, if any


@dataclass
class Bench:
    name: str
    title: str
    unit_note: str
    pinning: str
    jobs: list[Job]


def benches(ncpu_note: str) -> list[Bench]:
    return [
        Bench(
            "yield", "yield: ns per yield, all threads on one core",
            "ns per yield (lower is better)",
            "weft: one vcore (weft_config.vcores=1; a vcore is pinned to its CPU). "
            "Boost.Fiber and Boost.Context: the one thread pinned to CPU 0. "
            "Go: GOMAXPROCS=1 and the process pinned to CPU 0 by the driver (as `taskset -c 0`). "
            "sched_yield: every pthread pinned to CPU 0 (pthread_setaffinity_np).",
            [
                Job("weft_yield", "weft", "weft_yield",
                    [("weft", "threads=2"), ("weft", "threads=100")]),
                Job("boost_fiber_yield", "peer", "boost_fiber_yield",
                    [("boost.fiber", "threads=2"), ("boost.fiber", "threads=100")]),
                Job("boost_context_yield", "peer", "boost_context_yield",
                    [("boost.context", "threads=2"), ("boost.context", "threads=100")]),
                Job("go_yield", "go", "gobench", [("go", "threads=2"), ("go", "threads=100")],
                    args=["yield"], env={"GOMAXPROCS": "1"}, cpus={0}),
                Job("kernel_yield", "peer", "kernel_yield",
                    [("kernel-sched_yield", "threads=2"), ("kernel-sched_yield", "threads=100")]),
            ]),
        Bench(
            "spawn", "spawn: ns per spawn + join of an empty thread",
            "ns per spawn+join (lower is better)",
            f"No pinning. weft: all vcores ({ncpu_note}), spawner is a uthread except "
            "from=main (main, an ordinary kernel thread). pthread: default attributes. "
            "Go: default GOMAXPROCS, go func + WaitGroup.Wait per spawn (join=each) or per 1000 "
            "(join=batch1000). Boost.Fiber: one thread, round_robin, from the main fiber.",
            [
                Job("weft_spawn", "weft", "weft_spawn",
                    [("weft", "join=each"), ("weft", "join=batch1000"),
                     ("weft", "join=each,from=main")]),
                Job("kernel_spawn", "peer", "kernel_spawn", [("pthread", "join=each")]),
                Job("go_spawn", "go", "gobench", [("go", "join=each"), ("go", "join=batch1000")],
                    args=["spawn"]),
                Job("boost_fiber_spawn", "peer", "boost_fiber_spawn",
                    [("boost.fiber", "join=each")]),
            ]),
        Bench(
            "pingpong", "pingpong: round-trip ns between two threads",
            "ns per round trip (lower is better); one round trip is two hand-offs",
            "weft: A WEFT_PINNED to vcore 0, B to vcore 1 (vcore i runs on the i-th CPU of the "
            "affinity mask). kernel: A pinned to CPU 0, B to CPU 1 (cpus=0,1) or also to CPU 0 "
            "(cpus=0). The futex variant makes a FUTEX_WAKE and, while the word is unchanged, a "
            "FUTEX_WAIT on every hand-off; nobody spins. kernel-futex-spin (an extra) spins up to 4000 "
            "pauses before FUTEX_WAIT and wakes only a sleeper: weft's idle vcores also spin before "
            "they park, so it shows how much of a lead is spinning rather than user-level switching.",
            [
                Job("weft_pingpong", "weft", "weft_pingpong",
                    [("weft-park", "cpus=0,1"), ("weft-condvar", "cpus=0,1")]),
                Job("kernel_pingpong", "peer", "kernel_pingpong",
                    [("kernel-futex", "cpus=0,1"), ("kernel-pipe", "cpus=0,1"),
                     ("kernel-futex-spin", "cpus=0,1"),
                     ("kernel-futex", "cpus=0"), ("kernel-pipe", "cpus=0")]),
            ]),
        Bench(
            "mutex", "mutex: contended lock/unlock, 4 threads, short critical section",
            "ns per acquisition = wall time / total acquisitions (lower is better)",
            "weft: 4 uthreads started on vcore i % vcores (WEFT_ON_VCORE) on all vcores, run "
            "with the library's default spin and with WEFT_MUTEX_SPIN=0. pthread: 4 unpinned "
            "pthreads, PTHREAD_MUTEX_NORMAL and PTHREAD_MUTEX_ADAPTIVE_NP.",
            [
                Job("weft_mutex", "weft", "weft_mutex", [("weft", "threads=4,spin=default")]),
                Job("weft_mutex_nospin", "weft", "weft_mutex", [("weft", "threads=4,spin=0")],
                    env={"WEFT_MUTEX_SPIN": "0"}),
                Job("kernel_mutex", "peer", "kernel_mutex",
                    [("pthread", "threads=4,kind=normal"), ("pthread", "threads=4,kind=adaptive")]),
            ]),
        Bench(
            "netpingpong", "netpingpong: wake-up through the netpoller, 1-byte pipe ping-pong",
            "ns per round trip (lower is better); one round trip is two one-byte messages, each "
            "a wake-up of a reader parked on an empty pipe",
            "weft: two uthreads in weft_read/weft_write on two pipes, run with WEFT_VCORES=1 "
            "(both on vcore 0, CPU 0: cpus=0) and WEFT_VCORES=2 (A WEFT_PINNED to vcore 0, B to "
            "vcore 1: cpus=0,1), under WEFT_POLLER=epoll and WEFT_POLLER=uring (impl named after "
            "the poller weft reports in use). kernel-pipe: the same ping-pong between two kernel "
            "threads in blocking read(2)/write(2), both pinned to CPU 0 (cpus=0), pinned to CPUs "
            "0 and 1 (cpus=0,1), and unpinned (the kernel places them). weft at cpus=0 is compared "
            "with the kernel at cpus=0, weft at cpus=0,1 with the kernel pinned apart and unpinned.",
            [
                Job("weft_netpingpong_epoll_1", "weft", "weft_netpingpong",
                    [("weft-epoll", "cpus=0")], env={"WEFT_POLLER": "epoll", "WEFT_VCORES": "1"}),
                Job("weft_netpingpong_epoll_2", "weft", "weft_netpingpong",
                    [("weft-epoll", "cpus=0,1")], env={"WEFT_POLLER": "epoll", "WEFT_VCORES": "2"}),
                Job("weft_netpingpong_uring_1", "weft", "weft_netpingpong",
                    [("weft-io_uring", "cpus=0")], env={"WEFT_POLLER": "uring", "WEFT_VCORES": "1"}),
                Job("weft_netpingpong_uring_2", "weft", "weft_netpingpong",
                    [("weft-io_uring", "cpus=0,1")],
                    env={"WEFT_POLLER": "uring", "WEFT_VCORES": "2"}),
                Job("kernel_pipe_pingpong", "peer", "kernel_pingpong",
                    [("kernel-pipe", "cpus=0"), ("kernel-pipe", "cpus=0,1"),
                     ("kernel-pipe", "unpinned")],
                    args=["--bench=netpingpong", "--layout=cpus=0", "--layout=cpus=0,1",
                          "--layout=unpinned", "pipe"]),
            ]),
    ]


def weft_rows_for(bench: str, peer_impl: str, peer_param: str,
                  weft_rows: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The weft rows a peer row is compared with."""
    if bench == "yield":
        return [r for r in weft_rows if r[1] == peer_param]
    if bench == "spawn":
        # Like with like; pthread (spawned from a kernel thread) also against
        # weft spawning from main, a kernel thread too.
        same = [peer_param] + ([peer_param + ",from=main"] if peer_impl == "pthread" else [])
        return [r for r in weft_rows if r[1] in same]
    if bench == "netpingpong":
        # Same CPUs: one CPU against one vcore, two (pinned apart or unpinned) against two.
        want = "cpus=0" if peer_param == "cpus=0" else "cpus=0,1"
        return [r for r in weft_rows if r[1] == want]
    return list(weft_rows)    # pingpong, mutex: every weft variant against every peer


# Targets from issue 2 ("Figures to reach"). Each: text, weft row, peer row, and
# the largest allowed weft/peer ratio.
TARGETS = [
    ("weft yield ≤ 1.0× Boost.Fiber, 2 threads",
     ("yield", "weft", "threads=2"), ("yield", "boost.fiber", "threads=2"), 1.0),
    ("weft yield ≤ 1.0× Boost.Fiber, 100 threads",
     ("yield", "weft", "threads=100"), ("yield", "boost.fiber", "threads=100"), 1.0),
    ("weft yield ≥ 15× faster than pinned sched_yield, 2 threads",
     ("yield", "weft", "threads=2"), ("yield", "kernel-sched_yield", "threads=2"), 1 / 15),
    ("weft yield ≥ 15× faster than pinned sched_yield, 100 threads",
     ("yield", "weft", "threads=100"), ("yield", "kernel-sched_yield", "threads=100"), 1 / 15),
    ("weft spawn+join (from a uthread) ≥ 20× faster than pthread_create+pthread_join",
     ("spawn", "weft", "join=each"), ("spawn", "pthread", "join=each"), 1 / 20),
    ("weft park/unpark ping-pong (2 vcores) no slower than a futex ping-pong on 2 CPUs",
     ("pingpong", "weft-park", "cpus=0,1"), ("pingpong", "kernel-futex", "cpus=0,1"), 1.0),
    ("weft mutex+condvar ping-pong (2 vcores) no slower than a futex ping-pong on 2 CPUs",
     ("pingpong", "weft-condvar", "cpus=0,1"), ("pingpong", "kernel-futex", "cpus=0,1"), 1.0),
]

# Figures reported beside the targets, without a bound.
REPORTED = [
    ("weft spawn+join (from a uthread) vs Go goroutine + WaitGroup, one at a time",
     ("spawn", "weft", "join=each"), ("spawn", "go", "join=each")),
    ("weft spawn+join vs Go, batches of 1000",
     ("spawn", "weft", "join=batch1000"), ("spawn", "go", "join=batch1000")),
    ("weft mutex with the default spin vs WEFT_MUTEX_SPIN=0",
     ("mutex", "weft", "threads=4,spin=default"), ("mutex", "weft", "threads=4,spin=0")),
    ("weft pipe ping-pong through epoll, one vcore, vs kernel threads in read/write on one CPU",
     ("netpingpong", "weft-epoll", "cpus=0"), ("netpingpong", "kernel-pipe", "cpus=0")),
    ("weft pipe ping-pong through epoll, two vcores, vs kernel threads pinned to two CPUs",
     ("netpingpong", "weft-epoll", "cpus=0,1"), ("netpingpong", "kernel-pipe", "cpus=0,1")),
    ("weft pipe ping-pong through io_uring, one vcore, vs kernel threads on one CPU",
     ("netpingpong", "weft-io_uring", "cpus=0"), ("netpingpong", "kernel-pipe", "cpus=0")),
    ("weft pipe ping-pong through io_uring, two vcores, vs kernel threads pinned to two CPUs",
     ("netpingpong", "weft-io_uring", "cpus=0,1"), ("netpingpong", "kernel-pipe", "cpus=0,1")),
    ("weft pipe ping-pong, io_uring vs epoll, one vcore",
     ("netpingpong", "weft-io_uring", "cpus=0"), ("netpingpong", "weft-epoll", "cpus=0")),
    ("weft pipe ping-pong, io_uring vs epoll, two vcores",
     ("netpingpong", "weft-io_uring", "cpus=0,1"), ("netpingpong", "weft-epoll", "cpus=0,1")),
]


# ---------------------------------------------------------------------------
# Building
# ---------------------------------------------------------------------------

def tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def first_errors(text: str, limit: int = 3) -> str:
    """The first error lines of a build log (CMake Error, compiler error:, FAILED:), joined."""
    lines = text.splitlines()
    picked = []
    for i, line in enumerate(lines):
        if line.startswith("CMake Error"):
            nxt = " ".join(x.strip() for x in lines[i + 1:i + 5] if x.strip())
            picked.append(f"{line.strip()} {nxt}")
        elif "error:" in line or line.startswith("FAILED:"):
            picked.append(line.strip())
        if len(picked) >= limit:
            break
    return " | ".join(picked) if picked else tail(text, 3).replace("\n", " | ")


def run_logged(cmd: list[str], log: Path, cwd: Path = ROOT, env: dict | None = None) -> tuple[int, str]:
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    with log.open("a") as f:
        f.write(f"\n$ {' '.join(cmd)}\n{p.stdout}\n[exit {p.returncode}]\n")
    return p.returncode, p.stdout


class Binaries:
    """Where each program is, or why it is missing."""

    def __init__(self) -> None:
        self.paths: dict[tuple[str, str], Path] = {}
        self.missing: dict[tuple[str, str], str] = {}

    def lookup(self, job: Job) -> tuple[Path | None, str]:
        key = (job.kind, job.program)
        if key in self.paths:
            return self.paths[key], ""
        return None, self.missing.get(key, "not built")


def build(build_dir: Path, skip_build: bool, all_jobs: list[Job]) -> tuple[Binaries, dict]:
    bins = Binaries()
    info: dict = {"build_dir": str(build_dir), "steps": []}
    build_dir.mkdir(parents=True, exist_ok=True)
    log = build_dir / "micro-build.log"
    if not skip_build:
        log.write_text("")
    bench_bin = build_dir / "bench"
    weft_reason = ""

    if not skip_build:
        # The bench options are passed explicitly: a cache left by an earlier
        # configure (WEFT_BUILD_BENCH=OFF, a sanitizer) would otherwise win.
        rc, out = run_logged(["cmake", "-S", str(ROOT), "-B", str(build_dir), "-G", "Ninja",
                              "-DCMAKE_BUILD_TYPE=Release", "-DWEFT_BUILD_BENCH=ON",
                              "-DWEFT_SANITIZE="], log)
        info["steps"].append({"step": "configure", "rc": rc})
        if rc == 0:
            rc, out = run_logged(["cmake", "--build", str(build_dir), "--", "-k", "0"], log)
            info["steps"].append({"step": "build", "rc": rc})
            if rc != 0:
                weft_reason = f"build failed (see {log}): " + first_errors(out)
        else:
            weft_reason = f"configure failed (see {log}): " + first_errors(out)
            # Measure the peers anyway: configure bench/ on its own.
            bench_bin = build_dir / "bench-standalone"
            rc2, _ = run_logged(["cmake", "-S", str(ROOT / "bench"), "-B", str(bench_bin), "-G",
                                 "Ninja", "-DCMAKE_BUILD_TYPE=Release"], log)
            if rc2 == 0:
                rc2, _ = run_logged(["cmake", "--build", str(bench_bin), "--", "-k", "0"], log)
            info["steps"].append({"step": "standalone bench build", "rc": rc2})
    elif not (bench_bin / "peers").is_dir() and (build_dir / "bench-standalone").is_dir():
        bench_bin = build_dir / "bench-standalone"

    skipped: dict[str, str] = {}
    skipped_file = bench_bin / "skipped.txt"
    if skipped_file.exists():
        for line in skipped_file.read_text().splitlines():
            if ": " in line:
                prog, why = line.split(": ", 1)
                skipped[prog] = "not configured: " + why

    # Go peers
    go_reason = ""
    go_out = bench_bin / "peers" / "gobench"
    if not skip_build:
        go = shutil.which("go")
        if go is None:
            go_reason = "go not found on PATH (scripts/deps.sh bench installs golang-go)"
        else:
            go_out.parent.mkdir(parents=True, exist_ok=True)
            env = dict(os.environ, GOTOOLCHAIN="local", CGO_ENABLED="0", GOFLAGS="-mod=mod")
            rc, out = run_logged([go, "build", "-o", str(go_out), "."], log,
                                 cwd=ROOT / "bench" / "peers" / "go", env=env)
            info["steps"].append({"step": "go build", "rc": rc})
            if rc != 0:
                go_reason = f"go build failed (see {log}): " + first_errors(out)

    for job in all_jobs:
        key = (job.kind, job.program)
        if job.kind == "weft":
            path = bench_bin / job.program
        else:
            path = bench_bin / "peers" / job.program
        if path.is_file() and os.access(path, os.X_OK) and not (job.kind == "go" and go_reason):
            bins.paths[key] = path
        elif job.kind == "go":
            bins.missing[key] = go_reason or "not built (run without --no-build)"
        elif job.kind == "weft" and weft_reason:
            bins.missing[key] = weft_reason
        elif job.program in skipped:
            bins.missing[key] = skipped[job.program]
        elif not skipped_file.exists():
            bins.missing[key] = f"bench/ was not configured in {bench_bin.parent} (see {log})"
        else:
            bins.missing[key] = f"not built (no {path}; see {log})"
    info["bench_bin"] = str(bench_bin)
    return bins, info


# ---------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------

RESULT_RE = re.compile(r"^RESULT (.*)$")
NOTE_RE = re.compile(r"^NOTE impl=(\S+) (.*)$")


def clean_env(target_ms: int, extra: dict[str, str]) -> dict[str, str]:
    """The inherited environment without knobs that would silently change results."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("WEFT_") or k.startswith("BENCH_") or k in ("GOMAXPROCS", "GOGC"))}
    env["BENCH_TARGET_MS"] = str(target_ms)
    env.update(extra)
    return env


def run_job(job: Job, path: Path, target_ms: int) -> dict:
    env = clean_env(target_ms, job.env)

    def pin():
        if job.cpus is not None:
            os.sched_setaffinity(0, job.cpus)

    cmd = [str(path)] + job.args
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=RUN_TIMEOUT_S, preexec_fn=pin)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc = "timeout"
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
    wall = time.monotonic() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU time and context switches of the child (and its threads): involuntary
    # switches count how often something else took the CPU from it.
    usage = {"cpu_s": round((ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime), 3),
             "involuntary_switches": ru1.ru_nivcsw - ru0.ru_nivcsw,
             "voluntary_switches": ru1.ru_nvcsw - ru0.ru_nvcsw}
    results, notes = [], []
    for line in out.splitlines():
        m = RESULT_RE.match(line)
        if m:
            kv = dict(tok.split("=", 1) for tok in m.group(1).split() if "=" in tok)
            try:
                kv["value"] = float(kv["value"])
            except (KeyError, ValueError):
                continue
            results.append(kv)
            continue
        m = NOTE_RE.match(line)
        if m:
            notes.append((m.group(1), m.group(2)))
    return {"job": job.name, "cmd": cmd, "env": {k: env[k] for k in sorted(env)
                                                  if k in job.env or k == "BENCH_TARGET_MS"},
            "cpus": sorted(job.cpus) if job.cpus else None,
            "rc": rc, "wall_s": round(wall, 3), **usage, "results": results, "notes": notes,
            "stderr_tail": tail(err, 10)}


def describe_failure(run: dict) -> str:
    if run["rc"] == "timeout":
        what = f"timed out after {RUN_TIMEOUT_S} s (hang?), not run again"
    elif run["rc"] == SKIP_EXIT:
        what = "skipped"
    elif isinstance(run["rc"], int) and run["rc"] < 0:
        what = f"killed by signal {-run['rc']}"
    else:
        what = f"exit {run['rc']}"
    err = run["stderr_tail"].replace("\n", " | ")
    return f"{what}: {err}" if err else what


# ---------------------------------------------------------------------------
# Statistics and report
# ---------------------------------------------------------------------------

@dataclass
class Row:
    bench: str
    impl: str
    param: str
    unit: str = ""
    values: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)   # per failed round
    missing: str = ""                                   # never ran

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None

    @property
    def spread(self) -> float | None:
        if len(self.values) < 2 or not self.median:
            return None
        return (max(self.values) - min(self.values)) / self.median


def fmt_value(v: float) -> str:
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def fmt_ratio(r: float) -> str:
    return f"{r:.3g}×"


def is_weft(impl: str) -> bool:
    return impl == "weft" or impl.startswith("weft-")


def render(bench: Bench, rows: list[Row], notes: dict[str, list[str]], rounds: int,
           preempt: dict[str, int]) -> str:
    out = [f"### {bench.title}", "",
           "| impl | param | median | spread | runs | weft ÷ peer |",
           "| --- | --- | ---: | ---: | ---: | --- |"]
    by_key = {(r.impl, r.param): r for r in rows}
    weft_rows = [(r.impl, r.param) for r in rows if is_weft(r.impl) and r.values]
    for r in rows:
        if r.missing:
            out.append(f"| {r.impl} | {r.param} | missing | | 0/{rounds} | {r.missing} |")
            continue
        if not r.values:
            out.append(f"| {r.impl} | {r.param} | failed | | 0/{rounds} | "
                       f"{len(r.problems)} failed run(s); first: {r.problems[0]} |")
            continue
        med = f"{fmt_value(r.median)} {r.unit}"
        sp = r.spread
        sp_txt = "" if sp is None else f"{sp * 100:.1f}%" + (" ⚠" if sp > SPREAD_FLAG else "")
        runs = f"{len(r.values)}/{rounds}"
        if is_weft(r.impl):
            ratio = "—"
        else:
            matches = weft_rows_for(bench.name, r.impl, r.param, weft_rows)
            parts = []
            impls = {m[0] for m in matches}
            for m in matches:
                label = m[1] if len(impls) == 1 else (m[0] if len({x[1] for x in matches}) == 1
                                                       else f"{m[0]} {m[1]}")
                ratio_v = by_key[m].median / r.median
                parts.append(fmt_ratio(ratio_v) if len(matches) == 1 else f"{label}: {fmt_ratio(ratio_v)}")
            ratio = "; ".join(parts) if parts else "(no weft row)"
        if r.problems:
            ratio += f" — {len(r.problems)} failed run(s): {r.problems[0]}"
        out.append(f"| {r.impl} | {r.param} | {med} | {sp_txt} | {runs} | {ratio} |")
    out += ["", f"Unit: {bench.unit_note}. Spread = (max − min) / median over the kept runs; "
                f"⚠ marks spreads above {SPREAD_FLAG:.0%}. weft ÷ peer below 1 means weft is faster.",
            "", f"Pinning: {bench.pinning}"]
    if preempt:
        out += ["", "Involuntary context switches per run, median over kept runs (other work "
                    "taking the CPUs shows up here; a kernel peer's own sched_yield() switches "
                    "count too): " + ", ".join(f"{k} {v}" for k, v in preempt.items()) + "."]
    if notes:
        out.append("")
        out.append("Notes printed by the programs (last round):")
        for impl, texts in notes.items():
            for t in texts:
                out.append(f"- {impl}: {t}")
    return "\n".join(out)


def lookup(all_rows: dict, key: tuple[str, str, str]) -> Row | None:
    r = all_rows.get(key)
    return r if r is not None and r.values else None


def render_targets(all_rows: dict) -> tuple[str, list[dict]]:
    out = ["### Targets (issue 2, \"Figures to reach\")", ""]
    recs = []
    for text, wk, pk, bound in TARGETS:
        w, p = lookup(all_rows, wk), lookup(all_rows, pk)
        if w is None or p is None:
            absent = "weft row" if w is None else "peer row"
            why = all_rows.get(wk if w is None else pk)
            detail = (why.missing or (why.problems[0] if why.problems else "")) if why else "not run"
            out.append(f"- {text}: **cannot tell** ({absent} has no result: {detail})")
            recs.append({"target": text, "status": "unknown"})
            continue
        ratio = w.median / p.median
        met = ratio <= bound
        noisy = any(x.spread is not None and x.spread > SPREAD_FLAG for x in (w, p))
        faster = p.median / w.median
        detail = (f"weft {fmt_value(w.median)} {w.unit} vs {fmt_value(p.median)} {p.unit}: "
                  f"weft ÷ peer = {fmt_ratio(ratio)} (weft {faster:.3g}× faster)"
                  if faster >= 1 else
                  f"weft {fmt_value(w.median)} {w.unit} vs {fmt_value(p.median)} {p.unit}: "
                  f"weft ÷ peer = {fmt_ratio(ratio)} (weft {1 / faster:.3g}× slower)")
        out.append(f"- {text}: **{'met' if met else 'not met'}** — {detail}"
                   + (" — spread above 20% on one side, read with care" if noisy else ""))
        recs.append({"target": text, "status": "met" if met else "not met", "ratio": ratio,
                     "bound": bound, "noisy": noisy})
    out += ["", "Reported beside them:"]
    for text, wk, pk in REPORTED:
        w, p = lookup(all_rows, wk), lookup(all_rows, pk)
        if w is None or p is None:
            out.append(f"- {text}: cannot tell (a row has no result)")
            continue
        out.append(f"- {text}: {fmt_value(w.median)} vs {fmt_value(p.median)} {w.unit}, "
                   f"ratio {fmt_ratio(w.median / p.median)}")
    return "\n".join(out), recs


# ---------------------------------------------------------------------------
# Machine information
# ---------------------------------------------------------------------------

def machine_info(build_dir: Path) -> dict:
    cache = {}
    try:
        for line in (build_dir / "CMakeCache.txt").read_text().splitlines():
            m = re.match(r"^(CMAKE_C_COMPILER|CMAKE_CXX_COMPILER):\w+=(.*)$", line)
            if m:
                cache[m.group(1)] = m.group(2)
    except OSError:
        pass
    boost = ""
    try:
        m = re.search(r'#define BOOST_LIB_VERSION "([^"]+)"',
                      Path("/usr/include/boost/version.hpp").read_text())
        boost = m.group(1).replace("_", ".") if m else ""
    except OSError:
        pass
    info = machine_base()
    info.update({
        "cc": first_line([cache.get("CMAKE_C_COMPILER", "cc"), "--version"]),
        "cxx": first_line([cache.get("CMAKE_CXX_COMPILER", "c++"), "--version"]),
        "go": first_line(["go", "version"]),
        "cmake": first_line(["cmake", "--version"]),
        "boost": boost,
    })
    return info


# ---------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="kept rounds per program (default 5)")
    ap.add_argument("--warmup-rounds", type=int, default=1, help="discarded rounds (default 1)")
    ap.add_argument("--target-ms", type=int, default=400,
                    help="length of each timed run inside a program (default 400)")
    ap.add_argument("--only", default="", help="comma-separated benchmarks: yield,spawn,pingpong,mutex,netpingpong")
    ap.add_argument("--build-dir", default=str(ROOT / "build"))
    ap.add_argument("--no-build", action="store_true", help="use the binaries already built")
    ap.add_argument("--no-save", action="store_true", help="do not write bench/results/")
    args = ap.parse_args()

    started = time.monotonic()
    build_dir = Path(args.build_dir).resolve()
    ncpu = len(os.sched_getaffinity(0))
    all_benches = benches(f"{ncpu} on this machine")
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {b.name for b in all_benches}
        if unknown:
            ap.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
        all_benches = [b for b in all_benches if b.name in wanted]
    jobs = [j for b in all_benches for j in b.jobs]

    bins, build_info = build(build_dir, args.no_build, jobs)
    machine = machine_info(build_dir)
    total_rounds = args.warmup_rounds + args.rounds

    runs: list[dict] = []
    sections: list[str] = []
    all_rows: dict[tuple[str, str, str], Row] = {}
    for bench in all_benches:
        rows: dict[tuple[str, str], Row] = {}
        for job in bench.jobs:
            for impl, param in job.rows:
                rows[(impl, param)] = Row(bench.name, impl, param)
            path, why = bins.lookup(job)
            if path is None:
                for impl, param in job.rows:
                    rows[(impl, param)].missing = why
        notes: dict[str, list[str]] = {}
        hung: set[str] = set()           # jobs that timed out once are not run again
        for rnd in range(total_rounds):
            kept = rnd >= args.warmup_rounds
            for job in bench.jobs:       # interleaved: A B C, A B C, ...
                path, _ = bins.lookup(job)
                if path is None or job.name in hung:
                    continue
                print(f"[{time.monotonic() - started:6.1f}s] {bench.name} round {rnd}"
                      f"{'' if kept else ' (warm-up)'}: {job.name}", file=sys.stderr, flush=True)
                run = run_job(job, path, args.target_ms)
                run.update(bench=bench.name, round=rnd, warmup=not kept)
                runs.append(run)
                if run["rc"] == SKIP_EXIT:   # cannot run on this machine: missing, not failed
                    for impl, param in job.rows:
                        if not rows[(impl, param)].values:
                            rows[(impl, param)].missing = describe_failure(run)
                    continue
                failed = run["rc"] != 0
                if run["rc"] == "timeout":
                    hung.add(job.name)
                seen = set()
                for res in run["results"]:
                    key = (res.get("impl", "?"), res.get("param", "?"))
                    if res.get("bench") != bench.name:
                        continue
                    row = rows.setdefault(key, Row(bench.name, *key))   # unexpected rows shown too
                    seen.add(key)
                    if row.unit and row.unit != res.get("unit"):
                        row.problems.append(f"unit changed from {row.unit} to {res.get('unit')}")
                        continue
                    row.unit = res.get("unit", "")
                    if kept and not failed:
                        row.values.append(res["value"])
                for impl, param in job.rows:
                    if failed or (impl, param) not in seen:
                        problem = (describe_failure(run) if failed
                                   else "the program printed no result for this row")
                        rows[(impl, param)].problems.append(f"round {rnd}: {problem}")
                if rnd == total_rounds - 1:
                    for impl, text in run["notes"]:
                        notes.setdefault(impl, [])
                        if text not in notes[impl]:
                            notes[impl].append(text)
        for row in rows.values():
            all_rows[(bench.name, row.impl, row.param)] = row
        preempt = {}
        for job in bench.jobs:
            counts = [r["involuntary_switches"] for r in runs
                      if r["job"] == job.name and not r["warmup"]]
            if counts:
                preempt[job.name] = int(statistics.median(counts))
        sections.append(render(bench, list(rows.values()), notes, args.rounds, preempt))

    machine["loadavg_at_end"] = list(os.getloadavg())
    targets_md, target_recs = render_targets(all_rows)
    elapsed = time.monotonic() - started
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    header = [
        "## weft micro-benchmarks", "",
        f"Machine: {machine['cpu_model']}, {machine['nproc']} CPUs "
        f"(affinity {machine['affinity_cpus']}), Linux {machine['kernel']}; "
        f"{machine['cc']}; {machine['cxx']}; {machine['go'] or 'go: none'}; "
        f"Boost {machine['boost'] or 'none'}. git {machine['git_rev'][:12] if re.fullmatch('[0-9a-f]{40}', machine['git_rev']) else machine['git_rev']}"
        f"{' (dirty)' if machine['git_dirty'] else ''}.",
        f"Method: every program run {total_rounds} times with the implementations interleaved, "
        f"the first {args.warmup_rounds} discarded; medians of the {args.rounds} kept runs; each run "
        f"warms up, then times one run of about {args.target_ms} ms. Driver time {elapsed:.0f} s.",
        f"Load average (1 min) {machine['loadavg_at_start'][0]:.2f} at the start, "
        f"{machine['loadavg_at_end'][0]:.2f} at the end (the driver itself keeps about 1 CPU busy)"
        f"{'; the machine had other work: read ratios, not absolute numbers' if machine['loadavg_at_start'][0] > 0.5 else ''}.",
        f"Commands: `python3 bench/micro.py` (= `make report`): cmake -S . -B build -G Ninja "
        f"-DCMAKE_BUILD_TYPE=Release -DWEFT_BUILD_BENCH=ON -DWEFT_SANITIZE=; cmake --build build; "
        f"go build in bench/peers/go.",
    ]
    report = "\n\n".join(["\n".join(header)] + sections + [targets_md]) + "\n"
    print(report)

    if not args.no_save:
        data = {
            "schema": "weft-micro-1",
            "timestamp_utc": stamp,
            "machine": machine,
            "build": build_info,
            "config": {"rounds": args.rounds, "warmup_rounds": args.warmup_rounds,
                       "target_ms": args.target_ms, "spread_flag": SPREAD_FLAG,
                       "driver_seconds": round(elapsed, 1)},
            "pinning": {b.name: b.pinning for b in all_benches},
            "missing": {f"{k[0]}:{k[1]}": v for k, v in bins.missing.items()},
            "runs": runs,
            "summary": [{"bench": r.bench, "impl": r.impl, "param": r.param, "unit": r.unit,
                         "median": r.median, "spread": r.spread, "samples": r.values,
                         "missing": r.missing or None, "problems": r.problems}
                        for r in all_rows.values()],
            "targets": target_recs,
        }
        save_results("micro", machine, stamp, data, report)

    # Failing runs are in the report; the exit status says whether any happened.
    bad = any(r.problems for r in all_rows.values() if not r.missing)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

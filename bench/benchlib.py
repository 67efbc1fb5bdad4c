"""benchlib.py — what the pieces of the benchmark driver share: running a
program and reading its RESULT lines, the statistics of a row of samples, the
machine record every result file carries, and small formatting helpers.

The programs' output contract (bench/common/bench.h):

    RESULT bench=<bench> impl=<impl> param=<param> value=<number> unit=<unit>
    NOTE impl=<impl> <free text>

and "FAIL ..." on stderr with exit status 1 when a program finds its own work
wrong, 75 when a resource limit stopped it (LIMIT ... on stderr), 77 when it
cannot run on this machine at all.
"""

from __future__ import annotations

import os
import platform
import re
import socket
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPREAD_FLAG = 0.20      # a spread (max - min) / median above this is flagged
SKIP_EXIT = 77          # "cannot run here"
LIMIT_EXIT = 75         # "a resource limit stopped me" (threads, memory)


def first_line(cmd: list[str], any_status: bool = False) -> str:
    """The first line cmd prints (stdout and stderr), '' if it fails (unless
    any_status) or prints nothing."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=20, cwd=ROOT)
        lines = p.stdout.strip().splitlines()
        return lines[0] if (p.returncode == 0 or any_status) and lines else ""
    except (OSError, subprocess.TimeoutExpired):
        return ""


def tail(text: str, lines: int = 10) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


# ---------------------------------------------------------------------------
# Running one program
# ---------------------------------------------------------------------------

RESULT_RE = re.compile(r"^RESULT (.*)$")
NOTE_RE = re.compile(r"^NOTE impl=(\S+) (.*)$")


def clean_env(extra: dict[str, str]) -> dict[str, str]:
    """The inherited environment without knobs that would silently change
    results (WEFT_*, BENCH_*, GOMAXPROCS, GOGC), plus extra."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith(("WEFT_", "BENCH_")) or k in ("GOMAXPROCS", "GOGC"))}
    env.update(extra)
    return env


def run_program(cmd: list[str], env: dict[str, str], cpus: set[int] | None,
                timeout_s: float) -> dict:
    """Runs cmd (pinned to cpus if given) and returns a record: rc (int, or
    "timeout"), wall_s, cpu_s, max_rss_kib (the program's peak resident set),
    voluntary and involuntary context switches, the parsed RESULT and NOTE
    lines, and the tail of stderr."""

    def pin():
        os.setpgrp()                       # so a timeout kills the whole group
        if cpus is not None:
            os.sched_setaffinity(0, cpus)

    # The peak RSS comes from GNU time when it is there: a process's ru_maxrss
    # starts from the memory of whoever forked it, so a program started
    # straight from this Python process could not report less than ~14 MiB.
    gnu_time = Path("/usr/bin/time")
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err, \
            tempfile.NamedTemporaryFile("r") as rss:
        argv = ([str(gnu_time), "-q", "-f", "%M", "-o", rss.name] + cmd
                if gnu_time.exists() else cmd)
        t0 = time.monotonic()
        p = subprocess.Popen(argv, env=env, stdout=out, stderr=err, text=True, preexec_fn=pin,
                             cwd=ROOT)
        rc: int | str = "timeout"
        ru = None
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid == p.pid:
                rc = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() - t0 > timeout_s:
                try:
                    os.killpg(p.pid, 9)
                except ProcessLookupError:
                    pass
                _, _, ru = os.wait4(p.pid, 0)
                break
            time.sleep(0.005)
        p.returncode = rc if isinstance(rc, int) else -9    # reaped by hand above
        wall = time.monotonic() - t0
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
        max_rss = ru.ru_maxrss if ru else None
        if gnu_time.exists():
            text = rss.read().strip().splitlines()
            max_rss = int(text[-1]) if text and text[-1].isdigit() else None
            if isinstance(rc, int) and rc > 128:
                rc = 128 - rc       # GNU time exits 128+sig for a killed child: report -sig
    results, notes = [], []
    for line in stdout.splitlines():
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
            notes.append([m.group(1), m.group(2)])
    return {"cmd": cmd, "cpus": sorted(cpus) if cpus else None, "rc": rc,
            "wall_s": round(wall, 3),
            "cpu_s": round(ru.ru_utime + ru.ru_stime, 3) if ru else None,
            "max_rss_kib": max_rss,
            "voluntary_switches": ru.ru_nvcsw if ru else None,
            "involuntary_switches": ru.ru_nivcsw if ru else None,
            "results": results, "notes": notes, "stderr_tail": tail(stderr, 10)}


def describe_failure(run: dict, timeout_s: float) -> str:
    rc = run["rc"]
    if rc == "timeout":
        what = f"timed out after {timeout_s:.0f} s (hang?)"
    elif rc == SKIP_EXIT:
        what = "cannot run here"
    elif rc == LIMIT_EXIT:
        what = "resource limit"
    elif isinstance(rc, int) and rc < 0:
        what = f"killed by signal {-rc}"
    else:
        what = f"exit {rc}"
    err = run["stderr_tail"].replace("\n", " | ")
    return f"{what}: {err}" if err else what


# ---------------------------------------------------------------------------
# Rows of samples
# ---------------------------------------------------------------------------

@dataclass
class Row:
    """One measured quantity of one implementation: its kept samples, or why
    there are none."""
    section: str
    impl: str
    param: str
    unit: str = ""
    better: str = "lower"            # "lower" (time) or "higher" (throughput)
    group: str = ""                  # rows in one group are compared with each other
    samples: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)   # failed runs, one line each
    missing: str = ""                # never ran: not built, cannot run here, limit reached
    extra: dict = field(default_factory=dict)           # per-section details (rss, p99...)

    @property
    def median(self) -> float | None:
        return statistics.median(self.samples) if self.samples else None

    @property
    def spread(self) -> float | None:
        return spread(self.samples)

    def to_json(self) -> dict:
        return {"section": self.section, "impl": self.impl, "param": self.param,
                "unit": self.unit, "better": self.better, "group": self.group,
                "samples": self.samples, "median": self.median, "spread": self.spread,
                "problems": self.problems, "missing": self.missing or None, **self.extra}


def spread(xs: list[float]) -> float | None:
    """(max - min) / median, None for fewer than two samples."""
    if len(xs) < 2 or not statistics.median(xs):
        return None
    return (max(xs) - min(xs)) / statistics.median(xs)


def median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def is_weft(impl: str) -> bool:
    return impl == "weft" or impl.startswith("weft-")


# ---------------------------------------------------------------------------
# The machine
# ---------------------------------------------------------------------------

def machine_base() -> dict:
    """CPU, kernel, load and git revision: the machine part of every result file."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    total = meminfo_bytes("MemTotal")
    mem = f"{total / (1 << 30):.1f} GiB" if total else ""
    return {
        "host": socket.gethostname(),
        "cpu_model": cpu,
        "nproc": os.cpu_count(),
        "affinity_cpus": sorted(os.sched_getaffinity(0)),
        "memory": mem,
        "kernel": platform.release(),
        "uname": " ".join(platform.uname()),
        "loadavg_at_start": list(os.getloadavg()),
        "python": platform.python_version(),
        "git_rev": first_line(["git", "rev-parse", "HEAD"]) or "no commit yet",
        "git_dirty": bool(first_line(["git", "status", "--porcelain"])),
    }


def meminfo_bytes(key: str) -> int | None:
    """A /proc/meminfo field (MemTotal, MemAvailable, ...) in bytes, None if unreadable."""
    try:
        m = re.search(rf"^{key}:\s+(\d+) kB", Path("/proc/meminfo").read_text(), re.M)
    except OSError:
        return None
    return int(m.group(1)) * 1024 if m else None


def host_slug(host: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", host)


# ---------------------------------------------------------------------------
# Formatting
# ---------------------------------------------------------------------------

def fmt_spread(s: float | None) -> str:
    if s is None:
        return ""
    return f"{s * 100:.1f}%" + (" ⚠" if s > SPREAD_FLAG else "")

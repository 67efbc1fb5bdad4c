"""benchlib.py — what the benchmark drivers (micro.py, http_bench.py) share:
running a command for its first line, the machine description every result
file carries, and writing a result file pair (JSON + Markdown).

Only the Python standard library is used.
"""

from __future__ import annotations

import json
import os
import platform
import re
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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


def machine_base() -> dict:
    """CPU, kernel, load and git revision: the part of the machine record
    every driver writes (each adds its own tool versions)."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "host": socket.gethostname(),
        "cpu_model": cpu,
        "nproc": os.cpu_count(),
        "affinity_cpus": sorted(os.sched_getaffinity(0)),
        "kernel": platform.release(),
        "uname": " ".join(platform.uname()),
        "loadavg_at_start": list(os.getloadavg()),
        "python": platform.python_version(),
        "git_rev": first_line(["git", "rev-parse", "HEAD"]) or "no commit yet",
        "git_dirty": bool(first_line(["git", "status", "--porcelain"])),
    }


def save_results(kind: str, machine: dict, stamp: str, data: dict, report: str) -> None:
    """Writes bench/results/<kind>-<host>-<stamp>.json (data) and .md (report)."""
    out_dir = ROOT / "bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    host = re.sub(r"[^A-Za-z0-9_.-]", "_", machine["host"])
    base = out_dir / f"{kind}-{host}-{stamp}"
    base.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")
    base.with_suffix(".md").write_text(report)
    print(f"raw samples: {base.with_suffix('.json').relative_to(ROOT)}; "
          f"report: {base.with_suffix('.md').relative_to(ROOT)}", file=sys.stderr)

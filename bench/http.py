#!/usr/bin/env python3
"""http.py — static-file HTTP throughput: weft's httpd against a thread-per-
connection server and nginx, on the same machine in the same run.

    python3 bench/http.py                 # what `make report` runs after micro.py
    python3 bench/http.py --quick         # 5 s runs instead of 10 s
    python3 bench/http.py --help

What it does:
 1. Writes a 612-byte index.html into a temporary document root and, for
    nginx, a generated configuration beside it (one worker process, master
    process on, daemon off, sendfile on, access_log off, keep-alive with
    keepalive_requests 1000000, listening on 127.0.0.1 on a port found by
    binding port 0 first; error log, pid file and temp paths in the temporary
    directory).
 2. Servers, each pinned to CPU 0 (`taskset -c 0`):
      weft           <build>/examples/httpd/httpd -p 0 -r ROOT -v 1
      pthread        <build>/examples/httpd/httpd-pthread -p 0 -r ROOT
      nginx          nginx -p TMP -c TMP/nginx.conf -e TMP/error.log
    httpd and httpd-pthread print "listening on 127.0.0.1:<port>" when ready.
    Each server is started afresh for every run and checked first with two
    GET requests on one connection (status 200, the exact body).
 3. Load: `taskset -c 1 wrk -t1 -c100 -d10s --latency URL`, one warm-up
    round discarded, then 3 rounds, the servers interleaved (A B C A B C ...).
    A run with non-2xx/3xx responses, or socket errors above 0.01% of the
    requests, fails loudly (it is reported and the exit status is 1).
 4. Prints a Markdown table (requests/s median, spread = (max-min)/median
    flagged above 20%, p50 and p99 latency medians, the server's CPU use, the
    ratios weft/nginx and weft/pthread against the targets: weft >= 0.9x
    nginx, >= 2x pthread) and writes the raw samples to
    bench/results/http-<host>-<timestamp>.json (the report beside it as .md).

A server or tool that is not there (nginx or wrk not installed, httpd not
built) is reported as missing and does not fail the run. Every server started
is killed on the way out (its whole process group), even on failure; every
subprocess has a timeout. Only the Python standard library is used.
"""

from __future__ import annotations

import os
import sys

# This file is named http.py and Python puts its directory first on sys.path:
# drop it there, or `import http.client` would find this script, not the package.
sys.path[:] = [p for p in sys.path
               if os.path.realpath(p or os.curdir) != os.path.dirname(os.path.realpath(__file__))]

import argparse  # noqa: E402  (after the sys.path fix above)
import datetime as dt  # noqa: E402
import http.client  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SPREAD_FLAG = 0.20           # spreads above this are flagged
SOCKET_ERROR_TOLERANCE = 1e-4  # socket errors allowed, as a fraction of the requests
START_TIMEOUT_S = 15         # a server must be listening within this
STOP_TIMEOUT_S = 5           # SIGTERM, then SIGKILL after this
WRK_SLACK_S = 30             # wrk may take this much longer than -d before it is killed
SERVER_CPU, CLIENT_CPU = 0, 1
FILE_SIZE = 612              # the size of nginx's classic welcome page

TARGETS = [
    # text, numerator, denominator, the smallest allowed requests/s ratio
    ("weft ≥ 0.9× nginx (requests/s)", "weft", "nginx", 0.9),
    ("weft ≥ 2× thread-per-connection (requests/s)", "weft", "pthread", 2.0),
]


# ---------------------------------------------------------------------------
# Servers
# ---------------------------------------------------------------------------

@dataclass
class Server:
    name: str                    # row label: weft | pthread | nginx
    describe: str                # what it is, for the report
    cmd: list[str] = field(default_factory=list)
    missing: str = ""            # why it cannot run, if it cannot
    port: int = 0                # fixed port (nginx); 0 = read from "listening on"


def free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago (bind port 0, read it, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def index_html() -> bytes:
    head = (b"<!DOCTYPE html>\n<html>\n<head>\n<title>Welcome to weft!</title>\n</head>\n"
            b"<body>\n<h1>Welcome to weft!</h1>\n<p>")
    tail = b"</p>\n</body>\n</html>\n"
    filler = (b"This page is the benchmark file of bench/http.py: the same small static "
              b"file is served by weft's httpd, a thread-per-connection server and nginx. ")
    body = (filler * 8)[:FILE_SIZE - len(head) - len(tail)]
    data = head + body + tail
    assert len(data) == FILE_SIZE
    return data


def nginx_conf(tmp: Path, docroot: Path, port: int) -> str:
    user = "user root root;\n" if os.geteuid() == 0 else ""   # read the 0700 temp dir as root
    temps = "\n".join(f"    {k}_temp_path {tmp / (k + '_temp')};"
                      for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return f"""# generated by bench/http.py
{user}worker_processes 1;
master_process on;
daemon off;
pid {tmp / 'nginx.pid'};
error_log {tmp / 'error.log'} warn;

events {{
    worker_connections 1024;
}}

http {{
    types {{ text/html html; }}
    default_type application/octet-stream;
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 65;
    keepalive_requests 1000000;
{temps}

    server {{
        listen 127.0.0.1:{port};
        root {docroot};
        location / {{ }}
    }}
}}
"""


def servers(build_dir: Path, tmp: Path, docroot: Path) -> list[Server]:
    httpd_dir = build_dir / "examples" / "httpd"
    out = []
    for name, prog, extra, describe in (
            ("weft", "httpd", ["-v", "1"], "examples/httpd on weft, 1 vcore (`httpd -v 1`)"),
            ("pthread", "httpd-pthread", [], "examples/httpd, one kernel thread per connection "
                                             "(`httpd-pthread`)")):
        path = httpd_dir / prog
        s = Server(name, describe)
        if path.is_file() and os.access(path, os.X_OK):
            s.cmd = [str(path), "-p", "0", "-r", str(docroot)] + extra
        else:
            s.missing = f"{path} not built (build the tree: cmake --build {build_dir})"
        out.append(s)
    nginx = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)),
                                          None)
    s = Server("nginx", "nginx from Debian, 1 worker process, sendfile, keep-alive")
    if nginx is None:
        s.missing = "nginx not installed (scripts/deps.sh bench installs it)"
    else:
        s.port = free_port()
        conf = tmp / "nginx.conf"
        conf.write_text(nginx_conf(tmp, docroot, s.port))
        s.cmd = [nginx, "-p", str(tmp), "-c", str(conf), "-e", str(tmp / "error.log")]
        version = first_line([nginx, "-v"]).replace("nginx version: ", "") or "nginx"
        s.describe = f"{version} from Debian, 1 worker process (master process on), sendfile, " \
                     f"keep-alive (keepalive_requests 1000000), access_log off"
    out.append(s)
    return out


def die_with_parent() -> None:
    """In the child before exec: SIGKILL it if this driver dies without cleaning up
    (prctl PR_SET_PDEATHSIG; survives exec of taskset and of the server)."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)   # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


class Running:
    """A started server: its process group, port and log."""

    def __init__(self, server: Server, tmp: Path, run_id: str, pin: list[str]) -> None:
        self.server = server
        self.log = tmp / f"{server.name}-{run_id}.log"
        self.port = server.port
        self.proc: subprocess.Popen | None = None
        self.pin = pin
        self.exit_note = ""

    def start(self) -> None:
        with self.log.open("wb") as logf:
            self.proc = subprocess.Popen(self.pin + self.server.cmd, stdin=subprocess.DEVNULL,
                                         stdout=logf, stderr=subprocess.STDOUT,
                                         start_new_session=True, cwd=self.log.parent,
                                         preexec_fn=die_with_parent)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.server.name} exited with status {self.proc.returncode} "
                                   f"before listening: {self.log_tail()}")
            if not self.port:
                m = re.search(rb"listening on 127\.0\.0\.1:(\d+)", self.log.read_bytes())
                if m:
                    self.port = int(m.group(1))
            if self.port and self.can_connect():
                return
            time.sleep(0.02)
        raise RuntimeError(f"{self.server.name} not listening after {START_TIMEOUT_S} s: "
                           f"{self.log_tail()}")

    def can_connect(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, n: int = 5) -> str:
        try:
            lines = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(lines[-n:])

    def cpu_seconds(self) -> float:
        """User + system CPU time of every process in the server's process group (all threads,
        exited ones included)."""
        if self.proc is None:
            return 0.0
        tick = os.sysconf("SC_CLK_TCK")
        total = 0
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            # fields[0] is field 3 (state): pgrp is field 5, utime 14, stime 15
            if int(fields[2]) == self.proc.pid:
                total += int(fields[11]) + int(fields[12])
        return total / tick

    def stop(self) -> None:
        """SIGTERM to the whole process group, SIGKILL after STOP_TIMEOUT_S."""
        if self.proc is None:
            return
        if self.proc.poll() is not None:
            self.exit_note = f"had exited with status {self.proc.returncode}"
        for sig, wait in ((signal.SIGTERM, STOP_TIMEOUT_S), (signal.SIGKILL, STOP_TIMEOUT_S)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=wait)
                # the leader is gone; make sure nothing else in its group lingers
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                return
            except subprocess.TimeoutExpired:
                continue
        print(f"http.py: {self.server.name} (pid {self.proc.pid}) survived SIGKILL?",
              file=sys.stderr)


def precheck(port: int, body: bytes) -> dict:
    """Two GETs on one connection: both 200 with the exact body. Returns what was seen."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    seen: dict = {}
    try:
        for i in range(2):
            conn.request("GET", "/index.html")
            r = conn.getresponse()
            data = r.read()
            if r.status != 200:
                raise RuntimeError(f"GET /index.html returned {r.status} {r.reason}")
            if data != body:
                raise RuntimeError(f"GET /index.html returned {len(data)} bytes, not the "
                                   f"{len(body)}-byte file")
            if i == 0:
                seen["header_bytes"] = sum(len(f"{k}: {v}\r\n") for k, v in r.getheaders()) \
                    + len(f"HTTP/1.1 {r.status} {r.reason}\r\n\r\n")
                seen["headers"] = [f"{k}: {v}" for k, v in r.getheaders()]
                seen["keep_alive"] = not r.will_close
    finally:
        conn.close()
    return seen


# ---------------------------------------------------------------------------
# wrk
# ---------------------------------------------------------------------------

UNIT_MS = {"us": 1e-3, "ms": 1.0, "s": 1000.0, "m": 60000.0, "h": 3600000.0}


def parse_duration_ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", text)
    if not m:
        raise ValueError(f"cannot read latency '{text}'")
    return float(m.group(1)) * UNIT_MS[m.group(2)]


def parse_wrk(out: str) -> dict:
    r: dict = {}
    m = re.search(r"^Requests/sec:\s+([\d.]+)", out, re.M)
    if not m:
        raise ValueError("no Requests/sec line in wrk's output")
    r["rps"] = float(m.group(1))
    m = re.search(r"^\s*(\d+) requests in ([\d.]+\w+), ([\d.]+\w+) read", out, re.M)
    if not m:
        raise ValueError("no 'N requests in' line in wrk's output")
    r["requests"] = int(m.group(1))
    r["elapsed_ms"] = parse_duration_ms(m.group(2))
    r["read"] = m.group(3)
    for pct in ("50", "75", "90", "99"):
        m = re.search(rf"^\s+{pct}%\s+(\S+)", out, re.M)
        if not m:
            raise ValueError(f"no {pct}% latency line (was --latency given?)")
        r[f"p{pct}_ms"] = parse_duration_ms(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    r["socket_errors"] = dict(zip(("connect", "read", "write", "timeout"),
                                  map(int, m.groups()))) if m else \
        {"connect": 0, "read": 0, "write": 0, "timeout": 0}
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    r["non_2xx_3xx"] = int(m.group(1)) if m else 0
    return r


def check_wrk(r: dict) -> str:
    """'' if the run is clean, else what is wrong."""
    problems = []
    if r["requests"] == 0:
        problems.append("no request completed")
    if r["non_2xx_3xx"]:
        problems.append(f"{r['non_2xx_3xx']} non-2xx/3xx responses")
    errs = sum(r["socket_errors"].values())
    if errs > SOCKET_ERROR_TOLERANCE * max(r["requests"], 1):
        problems.append("socket errors " + ", ".join(f"{k} {v}" for k, v in
                                                    r["socket_errors"].items() if v)
                        + f" (tolerance {SOCKET_ERROR_TOLERANCE:.2%} of requests)")
    return "; ".join(problems)


def cpu_times() -> dict[int, tuple[int, int, int]]:
    """Per CPU from /proc/stat: (busy, total, steal) in ticks; busy excludes idle, iowait
    and steal."""
    out = {}
    for line in Path("/proc/stat").read_text().splitlines():
        m = re.match(r"^cpu(\d+)\s+(.*)$", line)
        if not m:
            continue
        v = [int(x) for x in m.group(2).split()]
        # user nice system idle iowait irq softirq steal (guest times are inside user)
        total = sum(v[:8])
        steal = v[7] if len(v) > 7 else 0
        out[int(m.group(1))] = (total - v[3] - v[4] - steal, total, steal)
    return out


def busy_share(before: dict, after: dict, cpu: int) -> tuple[float | None, float | None]:
    """(busy, steal) shares of cpu between two cpu_times() readings."""
    if cpu not in before or cpu not in after:
        return None, None
    total = after[cpu][1] - before[cpu][1]
    if total <= 0:
        return None, None
    return ((after[cpu][0] - before[cpu][0]) / total, (after[cpu][2] - before[cpu][2]) / total)


def pin_cmd(cpu: int) -> list[str]:
    """The prefix that pins a command to one CPU."""
    return ["taskset", "-c", str(cpu)]


# ---------------------------------------------------------------------------
# Report helpers
# ---------------------------------------------------------------------------

def first_line(cmd: list[str], any_status: bool = False) -> str:
    """The first line cmd prints (stdout and stderr), '' if it fails (or prints nothing)."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=20, cwd=ROOT)
        lines = p.stdout.strip().splitlines()
        return lines[0] if (p.returncode == 0 or any_status) and lines else ""
    except (OSError, subprocess.TimeoutExpired):
        return ""


def machine_info() -> dict:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    rev = first_line(["git", "rev-parse", "HEAD"]) or "no commit yet"
    return {
        "host": socket.gethostname(),
        "cpu_model": cpu,
        "nproc": os.cpu_count(),
        "affinity_cpus": sorted(os.sched_getaffinity(0)),
        "kernel": platform.release(),
        "loadavg_at_start": list(os.getloadavg()),
        "nginx": first_line(["nginx", "-v"]).replace("nginx version: ", ""),
        # wrk --version prints its version and usage, then exits 1
        "wrk": first_line(["wrk", "--version"], any_status=True).split("Copyright")[0].strip()
        if shutil.which("wrk") else "",
        "python": platform.python_version(),
        "git_rev": rev,
        "git_dirty": bool(first_line(["git", "status", "--porcelain"])),
    }


def med(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def spread(xs: list[float]) -> float | None:
    if len(xs) < 2 or not statistics.median(xs):
        return None
    return (max(xs) - min(xs)) / statistics.median(xs)


def fmt_ms(v: float | None) -> str:
    if v is None:
        return ""
    return f"{v * 1000:.0f} µs" if v < 1 else f"{v:.2f} ms"


# ---------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default=str(ROOT / "build"),
                    help="tree holding examples/httpd/httpd and httpd-pthread (default: build)")
    ap.add_argument("--duration", type=int,
                    default=int(os.environ.get("BENCH_HTTP_DURATION", "10")),
                    help="seconds per wrk run (default 10, or $BENCH_HTTP_DURATION)")
    ap.add_argument("--quick", action="store_true", help="5 s runs (same as --duration 5)")
    ap.add_argument("--rounds", type=int, default=3, help="kept rounds per server (default 3)")
    ap.add_argument("--warmup-rounds", type=int, default=1, help="discarded rounds (default 1)")
    ap.add_argument("--connections", type=int, default=100, help="wrk -c (default 100)")
    ap.add_argument("--only", default="", help="comma-separated servers: weft,pthread,nginx")
    ap.add_argument("--no-save", action="store_true", help="do not write bench/results/")
    args = ap.parse_args()
    if args.quick:
        args.duration = 5
    started = time.monotonic()
    build_dir = Path(args.build_dir).resolve()
    machine = machine_info()
    body = index_html()

    # SIGTERM (a timeout around `make report`) unwinds through the finally blocks
    # that stop the servers, as Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    tmp = Path(tempfile.mkdtemp(prefix="weft-http-"))
    try:
        return run(args, started, build_dir, machine, body, tmp, ap)
    finally:
        if KEEP_TMP:
            print(f"http.py: server logs and nginx.conf kept in {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


KEEP_TMP = False    # set when a run failed: its logs stay for a look


def run(args, started: float, build_dir: Path, machine: dict, body: bytes, tmp: Path,
        ap: argparse.ArgumentParser) -> int:
    global KEEP_TMP
    docroot = tmp / "root"
    docroot.mkdir()
    (docroot / "index.html").write_bytes(body)
    all_servers = servers(build_dir, tmp, docroot)
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {s.name for s in all_servers}
        if unknown:
            ap.error(f"unknown server(s): {', '.join(sorted(unknown))}")
        all_servers = [s for s in all_servers if s.name in wanted]

    # Anything that stops every run: wrk, taskset, two CPUs.
    global_missing = ""
    if shutil.which("wrk") is None:
        global_missing = "wrk not installed (scripts/deps.sh bench installs it)"
    elif shutil.which("taskset") is None:
        global_missing = "taskset not found (util-linux)"
    elif not {SERVER_CPU, CLIENT_CPU} <= os.sched_getaffinity(0):
        global_missing = f"needs CPUs {SERVER_CPU} and {CLIENT_CPU} in the affinity mask"
    for s in all_servers:
        if global_missing and not s.missing:
            s.missing = global_missing

    runs: list[dict] = []
    failures: list[str] = []
    checks: dict[str, dict] = {}
    live: list[Running] = []
    total_rounds = args.warmup_rounds + args.rounds
    try:
        for rnd in range(total_rounds):
            kept = rnd >= args.warmup_rounds
            for s in all_servers:            # interleaved: A B C, A B C, ...
                if s.missing:
                    continue
                run_id = f"r{rnd}"
                print(f"[{time.monotonic() - started:6.1f}s] http round {rnd}"
                      f"{'' if kept else ' (warm-up)'}: {s.name}", file=sys.stderr, flush=True)
                rec: dict = {"server": s.name, "round": rnd, "warmup": not kept,
                             "server_cmd": pin_cmd(SERVER_CPU) + s.cmd}
                srv = Running(s, tmp, run_id, pin_cmd(SERVER_CPU))
                live.append(srv)
                try:
                    srv.start()
                    rec["port"] = srv.port
                    seen = precheck(srv.port, body)
                    checks.setdefault(s.name, seen)
                    url = f"http://127.0.0.1:{srv.port}/index.html"
                    cmd = pin_cmd(CLIENT_CPU) + ["wrk", "-t1", f"-c{args.connections}",
                                                 f"-d{args.duration}s", "--latency", url]
                    rec["wrk_cmd"] = cmd
                    cpu0 = srv.cpu_seconds()
                    ct0 = cpu_times()
                    t0 = time.monotonic()
                    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True, timeout=args.duration + WRK_SLACK_S)
                    wall = time.monotonic() - t0
                    ct1 = cpu_times()
                    rec["server_cpu_s"] = round(srv.cpu_seconds() - cpu0, 3)
                    rec["server_cpu_share"] = round(rec["server_cpu_s"] / wall, 3) if wall else None
                    for name, cpu in (("server", SERVER_CPU), ("client", CLIENT_CPU)):
                        busy, steal = busy_share(ct0, ct1, cpu)
                        rec[f"{name}_cpu{cpu}_busy_share"] = None if busy is None else round(busy, 3)
                        rec[f"{name}_cpu{cpu}_steal_share"] = None if steal is None else round(steal, 3)
                    rec["wrk_output"] = p.stdout
                    if p.returncode != 0:
                        raise RuntimeError(f"wrk exited with status {p.returncode}: "
                                           + " | ".join(p.stdout.strip().splitlines()[-3:]))
                    rec.update(parse_wrk(p.stdout))
                    if not srv.alive():
                        raise RuntimeError(f"the server died during the run (status "
                                           f"{srv.proc.returncode}): {srv.log_tail()}")
                    bad = check_wrk(rec)
                    if bad:
                        raise RuntimeError(bad)
                    rec["ok"] = True
                    busy0 = rec[f"server_cpu{SERVER_CPU}_busy_share"]
                    busy1 = rec[f"client_cpu{CLIENT_CPU}_busy_share"]
                    print(f"          {rec['rps']:,.0f} requests/s, p50 {fmt_ms(rec['p50_ms'])}, "
                          f"p99 {fmt_ms(rec['p99_ms'])}, server CPU "
                          f"{rec['server_cpu_share'] * 100:.0f}%"
                          + ("" if busy0 is None else f", CPU {SERVER_CPU} busy {busy0 * 100:.0f}%")
                          + ("" if busy1 is None else f", CPU {CLIENT_CPU} busy {busy1 * 100:.0f}%"),
                          file=sys.stderr, flush=True)
                except (RuntimeError, ValueError, OSError, http.client.HTTPException,
                        subprocess.TimeoutExpired) as e:
                    rec["ok"] = False
                    rec["error"] = f"{type(e).__name__}: {e}" if not isinstance(e, RuntimeError) \
                        else str(e)
                    msg = f"{s.name} round {rnd}: {rec['error']}"
                    failures.append(msg)
                    print(f"http.py: FAIL {msg}", file=sys.stderr, flush=True)
                finally:
                    srv.stop()
                    live.remove(srv)
                    rec["server_log_tail"] = srv.log_tail(10)
                    if srv.exit_note:
                        rec["server_exit"] = srv.exit_note
                runs.append(rec)
    finally:
        for srv in live:                      # interrupted (Ctrl-C): no server left behind
            srv.stop()

    # ---- summary ----
    rows = {}
    for s in all_servers:
        kept = [r for r in runs if r["server"] == s.name and not r["warmup"] and r.get("ok")]
        rps = [r["rps"] for r in kept]
        rows[s.name] = {
            "server": s.name, "describe": s.describe, "missing": s.missing or None,
            "rps": rps, "rps_median": med(rps), "rps_spread": spread(rps),
            "p50_ms": [r["p50_ms"] for r in kept], "p99_ms": [r["p99_ms"] for r in kept],
            "p50_ms_median": med([r["p50_ms"] for r in kept]),
            "p99_ms_median": med([r["p99_ms"] for r in kept]),
            "server_cpu_share_median": med([r["server_cpu_share"] for r in kept
                                            if r.get("server_cpu_share") is not None]),
            "server_cpu_busy_median": med([r[f"server_cpu{SERVER_CPU}_busy_share"] for r in kept
                                           if r.get(f"server_cpu{SERVER_CPU}_busy_share")
                                           is not None]),
            "client_cpu_busy_median": med([r[f"client_cpu{CLIENT_CPU}_busy_share"] for r in kept
                                           if r.get(f"client_cpu{CLIENT_CPU}_busy_share")
                                           is not None]),
            "failed_runs": [r["error"] for r in runs if r["server"] == s.name and not r.get("ok")],
            "check": checks.get(s.name),
        }

    def ratio(a: str, b: str) -> float | None:
        ra, rb = rows.get(a), rows.get(b)
        if ra and rb and ra["rps_median"] and rb["rps_median"]:
            return ra["rps_median"] / rb["rps_median"]
        return None

    machine["loadavg_at_end"] = list(os.getloadavg())
    elapsed = time.monotonic() - started
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    rev = machine["git_rev"]
    md = ["## HTTP: static file, keep-alive, one server CPU", "",
          f"Machine: {machine['cpu_model']}, {machine['nproc']} CPUs, Linux {machine['kernel']}; "
          f"{machine['nginx'] or 'nginx: none'}; {machine['wrk'] or 'wrk: none'}. git "
          f"{rev[:12] if re.fullmatch('[0-9a-f]{40}', rev) else rev}"
          f"{' (dirty)' if machine['git_dirty'] else ''}.",
          f"Method: GET /index.html ({FILE_SIZE} bytes) with `taskset -c {CLIENT_CPU} wrk -t1 "
          f"-c{args.connections} -d{args.duration}s --latency`; server pinned with `taskset -c "
          f"{SERVER_CPU}` and started afresh for every run; {total_rounds} rounds with the servers "
          f"interleaved, the first {args.warmup_rounds} discarded; medians of {args.rounds} "
          f"kept runs. Driver time {elapsed:.0f} s. Load average (1 min) "
          f"{machine['loadavg_at_start'][0]:.2f} at the start, "
          f"{machine['loadavg_at_end'][0]:.2f} at the end"
          f"{' (the machine had other work: read ratios, not absolute numbers)' if machine['loadavg_at_start'][0] > 0.5 else ''}.",
          "",
          "| server | requests/s (median) | spread | p50 | p99 | server CPU | "
          f"CPU {SERVER_CPU} / {CLIENT_CPU} busy | runs | weft ÷ this |",
          "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for s in all_servers:
        r = rows[s.name]
        if r["missing"]:
            md.append(f"| {s.name} | missing | | | | | | 0/{args.rounds} | {r['missing']} |")
            continue
        if not r["rps"]:
            md.append(f"| {s.name} | failed | | | | | | 0/{args.rounds} | "
                      f"{len(r['failed_runs'])} failed run(s); first: {r['failed_runs'][0]} |")
            continue
        sp = r["rps_spread"]
        sp_txt = "" if sp is None else f"{sp * 100:.1f}%" + (" ⚠" if sp > SPREAD_FLAG else "")
        rt = ratio("weft", s.name)
        rt_txt = "—" if s.name == "weft" else (f"{rt:.3g}×" if rt is not None else "")
        if r["failed_runs"]:
            rt_txt += f" — {len(r['failed_runs'])} failed run(s): {r['failed_runs'][0]}"
        pct = (lambda v: "?" if v is None else f"{v * 100:.0f}%")
        md.append(f"| {s.name} | {r['rps_median']:,.0f} | {sp_txt} | {fmt_ms(r['p50_ms_median'])} "
                  f"| {fmt_ms(r['p99_ms_median'])} | {pct(r['server_cpu_share_median'])} | "
                  f"{pct(r['server_cpu_busy_median'])} / {pct(r['client_cpu_busy_median'])} | "
                  f"{len(r['rps'])}/{args.rounds} | {rt_txt} |")
    md += ["", "weft ÷ this: weft's requests/s over this server's (above 1: weft serves more). "
               f"Spread = (max − min) / median of requests/s; ⚠ above {SPREAD_FLAG:.0%}. "
               "p50/p99: medians over the kept runs of wrk's latency percentiles. Server CPU: "
               "CPU time of the server's processes during the run ÷ wall time. CPU "
               f"{SERVER_CPU} / {CLIENT_CPU} busy: the share of each CPU not idle (from "
               f"/proc/stat, anyone's work). Server CPU near 100%: the server is the bottleneck; "
               f"CPU {SERVER_CPU} busy well above server CPU: something else ran there; both "
               f"low: the server waits (on the client, CPU {CLIENT_CPU}, or on itself).", "",
           "Servers:"]
    for s in all_servers:
        chk = checks.get(s.name)
        extra = ""
        if chk:
            extra = (f"; response header {chk['header_bytes']} bytes, keep-alive "
                     f"{'yes' if chk['keep_alive'] else 'NO (the server closes each connection)'}")
        md.append(f"- {s.name}: {s.describe}{extra}.")
    md += ["", "### Targets (HTTP)", ""]
    target_recs = []
    for text, a, b, bound in TARGETS:
        rt = ratio(a, b)
        if rt is None:
            why = next((rows[x]["missing"] or (rows[x]["failed_runs"][0] if rows[x]["failed_runs"]
                                               else "no result")
                        for x in (a, b) if x in rows and not rows[x]["rps_median"]),
                       "not run")
            md.append(f"- {text}: **cannot tell** ({why})")
            target_recs.append({"target": text, "status": "unknown"})
            continue
        met = rt >= bound
        noisy = any((rows[x]["rps_spread"] or 0) > SPREAD_FLAG for x in (a, b))
        md.append(f"- {text}: **{'met' if met else 'not met'}** — {rows[a]['rps_median']:,.0f} vs "
                  f"{rows[b]['rps_median']:,.0f} requests/s, ratio {rt:.3g}×"
                  + (" — spread above 20% on one side, read with care" if noisy else ""))
        target_recs.append({"target": text, "status": "met" if met else "not met",
                            "ratio": rt, "bound": bound, "noisy": noisy})
    if failures:
        md += ["", f"**{len(failures)} failed run(s):**"] + [f"- {f}" for f in failures]
    report = "\n".join(md) + "\n"
    print(report)

    if not args.no_save:
        out_dir = ROOT / "bench" / "results"
        out_dir.mkdir(parents=True, exist_ok=True)
        host = re.sub(r"[^A-Za-z0-9_.-]", "_", machine["host"])
        base = out_dir / f"http-{host}-{stamp}"
        data = {
            "schema": "weft-http-1",
            "timestamp_utc": stamp,
            "machine": machine,
            "config": {"duration_s": args.duration, "rounds": args.rounds,
                       "warmup_rounds": args.warmup_rounds, "connections": args.connections,
                       "threads": 1, "file_bytes": FILE_SIZE, "server_cpu": SERVER_CPU,
                       "client_cpu": CLIENT_CPU, "build_dir": str(build_dir),
                       "spread_flag": SPREAD_FLAG,
                       "socket_error_tolerance": SOCKET_ERROR_TOLERANCE,
                       "driver_seconds": round(elapsed, 1)},
            "nginx_conf": (tmp / "nginx.conf").read_text() if (tmp / "nginx.conf").exists()
            else None,
            "runs": runs,
            "summary": list(rows.values()),
            "targets": target_recs,
        }
        base.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")
        base.with_suffix(".md").write_text(report)
        print(f"raw samples: {base.with_suffix('.json').relative_to(ROOT)}; "
              f"report: {base.with_suffix('.md').relative_to(ROOT)}", file=sys.stderr)

    # Missing servers or tools are reported, not failures; a run that went wrong is.
    KEEP_TMP = bool(failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

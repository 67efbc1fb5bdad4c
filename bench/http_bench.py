#!/usr/bin/env python3
"""
http_bench.py — the HTTP section of the report: static-file throughput and
latency of weft's httpd against a thread-per-connection server, nginx, Go's
net/http and Rust's hyper, on the same machine in the same run, under three
load shapes. bench/run.py calls run_http().

What it does:
 1. Writes a 612-byte index.html into a temporary document root and, for
    nginx, a generated configuration beside it (one worker process, master
    process on, daemon off, sendfile on, access_log off, keep-alive with
    keepalive_requests 1000000, worker_connections and worker_rlimit_nofile
    from nofile_wanted(), listening on 127.0.0.1 on a port found by binding
    port 0 first; error log, pid file and temp paths in the temporary
    directory).
 2. Servers, each pinned to CPU 0 (`taskset -c 0`), all serving that root:
      weft     <build>/examples/httpd/httpd -p 0 -r ROOT -v 1
      pthread  <build>/examples/httpd/httpd-pthread -p 0 -r ROOT
      nginx    nginx -p TMP -c TMP/nginx.conf -e TMP/error.log
      go       GOMAXPROCS=1 <build>/bench/peers/gobench httpd --root ROOT --port 0
               (net/http; bench/peers/go/httpd.go)
      hyper    <build>/bench/peers/ringbench httpd --root ROOT --port 0
               (hyper 1.x on tokio's current-thread runtime; bench/peers/rust/src/httpd.rs)
    All but nginx print "listening on 127.0.0.1:<port>" when ready. Every
    server and wrk get RLIMIT_NOFILE raised to nofile_wanted() (soft limit,
    up to the hard one). A server is started afresh for every run and probed
    first (probe()): the request wrk sends, on a raw socket: status 200, the
    exact body, the response's exact size on the wire (header sizes differ per
    server), and keep-alive held, or with Connection: close, the header in the
    response and the connection closed by the server.
 3. Load shapes (SHAPES; the row param): conns=100 and conns=1000 keep-alive
    connections, and conns=100,close (`-H "Connection: close"`: every
    request on a new connection). Load: `taskset -c 1 wrk -t1 -c<C>
    -d<D>s --latency --timeout 10s -s check.lua [-H "Connection: close"] URL
    -- 612`;
    warm-up rounds (shorter: warmup_duration()) discarded; for each shape the
    servers interleaved (A B C A B C ...).
 4. Every response is checked (LUA: wrk's response() in each thread's Lua
    state, totals gathered in done() with setup()/thread:get): status 200,
    a 612-byte body, Connection: close on every response without keep-alive
    and on none with it, and the bytes: see check_run(). Without keep-alive
    the machine's count of TCP connections opened (/proc/net/snmp
    ActiveOpens) must be at least the requests. A run with any other status,
    a byte mismatch, or socket errors above 0.01% of the requests fails
    loudly. p50/p90/p99/max latency come from done()'s latency object.

A server or tool that is not there (nginx or wrk not installed, httpd not
built, go or cargo absent, a peer not built with --no-build) is reported as
missing, for every shape. Every server started is killed on the way out (its
whole process group), even on failure; every subprocess has a timeout.

The idle keep-alive connections (section httpidle, run_idle() at the end of
this file): the same servers, and weft's httpd with -c (connections as
stack-copy uthreads), each holding 10 000 answered, idle connections opened by
a client written here (open_idle: non-blocking sockets, loopback); the value is
the growth of the server's resident set per connection.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import resource
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchlib import Row, first_line, median

ROOT = Path(__file__).resolve().parent.parent
SOCKET_ERROR_TOLERANCE = 1e-4  # socket errors allowed, as a fraction of the requests
PROBE_TIMEOUT_S = 5         # the probe's socket timeout; a server must close by then
START_TIMEOUT_S = 15         # a server must be listening within this
STOP_TIMEOUT_S = 5           # SIGTERM, then SIGKILL after this
WRK_TIMEOUT_S = 10           # wrk --timeout: slower responses are errors, and out of the latency
                             # histogram (wrk's default, 2 s, dropped pthread's tail at 1000 conns)
WRK_SLACK_S = 30             # wrk may take this much longer than -d before it is killed
SERVER_CPU, CLIENT_CPU = 0, 1


@dataclass
class Place:
    """Where a run's processes go: the server's K (vcores, worker processes,
    GOMAXPROCS, tokio workers) on server_cpus, wrk with one thread per
    client CPU on client_cpus. The section's own runs: K = 1 on CPU 0, wrk
    on CPU 1; the scaling section's: K on CPUs 0..K-1, wrk on the upper half."""
    k: int = 1
    server_cpus: tuple[int, ...] = (SERVER_CPU,)
    client_cpus: tuple[int, ...] = (CLIENT_CPU,)
FILE_SIZE = 612              # the size of nginx's classic welcome page

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
    env: dict = field(default_factory=dict)   # added to the driver's environment


def free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago (bind port 0, read it, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def index_html() -> bytes:
    head = (b"<!DOCTYPE html>\n<html>\n<head>\n<title>Welcome to weft!</title>\n</head>\n"
            b"<body>\n<h1>Welcome to weft!</h1>\n<p>")
    tail = b"</p>\n</body>\n</html>\n"
    filler = (b"This page is the benchmark file of bench/http_bench.py: the same small static "
              b"file is served by weft's httpd, a thread-per-connection server and nginx. ")
    body = (filler * 8)[:FILE_SIZE - len(head) - len(tail)]
    data = head + body + tail
    assert len(data) == FILE_SIZE
    return data


def nginx_conf(tmp: Path, docroot: Path, port: int, workers: int = 1,
               nofile: int | None = None) -> str:
    """nginx's configuration; nofile: its descriptors and connections per worker
    (default nofile_wanted())."""
    nofile = nofile or nofile_wanted()
    user = "user root root;\n" if os.geteuid() == 0 else ""   # read the 0700 temp dir as root
    temps = "\n".join(f"    {k}_temp_path {tmp / (k + '_temp')};"
                      for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return f"""# generated by bench/http_bench.py
{user}worker_processes {workers};
worker_rlimit_nofile {nofile};
master_process on;
daemon off;
pid {tmp / 'nginx.pid'};
error_log {tmp / 'error.log'} warn;

events {{
    worker_connections {nofile};
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


# (kind, program) of the peers that build.py builds and locates (bench/run.py asks for them)
PROGRAMS = [("go", "gobench"), ("rust", "ringbench")]


def servers(build_dir: Path, tmp: Path, docroot: Path, bins=None, k: int = 1,
            nofile: int | None = None) -> list[Server]:
    """Every server of the section, in the order they are run, each with k vcores, worker
    processes, GOMAXPROCS or tokio workers; bins (build.Binaries) says where the Go and Rust
    peers are or why they are missing; nofile: nginx's descriptors (default
    nofile_wanted())."""
    httpd_dir = build_dir / "examples" / "httpd"
    out = []
    for name, prog, extra, describe in (
            ("weft", "httpd", ["-v", str(k)],
             f"examples/httpd on weft, {k} vcore{'s' if k > 1 else ''} (`httpd -v {k}`)"),
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
        conf.write_text(nginx_conf(tmp, docroot, s.port, k, nofile))
        s.cmd = [nginx, "-p", str(tmp), "-c", str(conf), "-e", str(tmp / "error.log")]
        version = first_line([nginx, "-v"]).replace("nginx version: ", "") or "nginx"
        s.describe = f"{version} from Debian, {k} worker process{'es' if k > 1 else ''} " \
                     f"(master process on), sendfile, " \
                     f"keep-alive (keepalive_requests 1000000), access_log off"
    out.append(s)

    go = Server("go", "Go net/http (`gobench httpd`, bench/peers/go/httpd.go): http.ServeContent "
                      "on an http.Dir (what http.FileServer does, without its /index.html "
                      f"redirect), GOMAXPROCS={k}", env={"GOMAXPROCS": str(k)})
    path, why = lookup(bins, "go", "gobench", build_dir)
    if path is None:
        go.missing = why
    elif "gobench httpd" not in usage_of([str(path)]):
        go.missing = f"{path} has no httpd subcommand (built from an older tree: run without " \
                     f"--no-build)"
    else:
        go.cmd = [str(path), "httpd", "--root", str(docroot), "--port", "0"]
        version = first_line(["go", "version"]).replace("go version ", "")
        if version:
            go.describe += f"; {version}"
    out.append(go)

    rs = Server("hyper", "Rust hyper 1.x HTTP/1 server on tokio's current-thread runtime "
                         "(`ringbench httpd`, bench/peers/rust/src/httpd.rs): the file read per "
                         "request, Content-Type and Content-Length set")
    path, why = lookup(bins, "rust", "ringbench", build_dir)
    if path is None:
        rs.missing = why
    else:
        rs.cmd = [str(path), "httpd", "--root", str(docroot), "--port", "0"] + \
            (["--workers", str(k)] if k > 1 else [])
        if k > 1:
            rs.describe = rs.describe.replace("current-thread runtime",
                                              f"multi-thread runtime ({k} workers)")
        lock = ROOT / "bench" / "peers" / "rust" / "Cargo.lock"
        try:
            vers = dict(re.findall(r'name = "(hyper|tokio)"\nversion = "([^"]+)"',
                                   lock.read_text()))
            rs.describe += f"; hyper {vers.get('hyper', '?')}, tokio {vers.get('tokio', '?')}"
        except OSError:
            pass
    out.append(rs)
    return out


def lookup(bins, kind: str, program: str, build_dir: Path) -> tuple[Path | None, str]:
    """Where build.py put a peer (or why it is missing); without bins, the usual place."""
    if bins is not None:
        return bins.lookup(kind, program)
    path = build_dir / "bench" / "peers" / program
    if path.is_file() and os.access(path, os.X_OK):
        return path, ""
    return None, f"{path} not built (bench/run.py builds it)"


def usage_of(cmd: list[str]) -> str:
    """What a program prints when run with no arguments (its usage), '' if it cannot run."""
    try:
        return subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def nofile_wanted() -> int:
    """The descriptor limit every server and wrk get: enough for the largest load shape
    (each connection is one descriptor at each end, plus listeners, files and slack)."""
    # the scaling section runs 100 connections per server CPU
    return max([c for _, c, _ in SHAPES] + [100 * (os.cpu_count() or 1)]) * 2 + 1024


def raise_nofile(want: int | None = None) -> int:
    """RLIMIT_NOFILE's soft limit up to want (default nofile_wanted()), at most the hard
    limit; returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = want or nofile_wanted()
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    if soft == resource.RLIM_INFINITY or soft >= want:
        return soft
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return want


def child_setup(nofile: int | None = None) -> None:
    """In the child before exec: the descriptor limit raised (to nofile, default
    nofile_wanted()), and SIGKILL if this driver dies without cleaning up (prctl
    PR_SET_PDEATHSIG; survives exec of taskset and of the server)."""
    try:
        raise_nofile(nofile)
    except (OSError, ValueError):
        pass                     # the run then fails loudly (EMFILE) rather than silently
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)   # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


class Running:
    """A started server: its process group, port and log."""

    def __init__(self, server: Server, tmp: Path, run_id: str, pin: list[str],
                 nofile: int | None = None) -> None:
        self.server = server
        self.log = tmp / f"{server.name}-{run_id}.log"
        self.port = server.port
        self.proc: subprocess.Popen | None = None
        self.pin = pin
        self.nofile = nofile             # its RLIMIT_NOFILE (default nofile_wanted())
        self.exit_note = ""

    def start(self) -> None:
        with self.log.open("wb") as logf:
            self.proc = subprocess.Popen(self.pin + self.server.cmd, stdin=subprocess.DEVNULL,
                                         stdout=logf, stderr=subprocess.STDOUT,
                                         start_new_session=True, cwd=self.log.parent,
                                         env={**os.environ, **self.server.env},
                                         preexec_fn=functools.partial(child_setup, self.nofile))
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

    def group(self) -> list[tuple[int, list[str]]]:
        """(pid, the fields of /proc/<pid>/stat from field 3 on) of every process in the
        server's process group (nginx: master and worker)."""
        if self.proc is None:
            return []
        out = []
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            # fields[0] is field 3 (state): pgrp is field 5
            if int(fields[2]) == self.proc.pid:
                out.append((int(d), fields))
        return out

    def cpu_seconds(self) -> float:
        """User + system CPU time of every process in the server's process group (all threads,
        exited ones included)."""
        # utime is field 14, stime 15
        return sum(int(f[11]) + int(f[12]) for _, f in self.group()) / os.sysconf("SC_CLK_TCK")

    def memory(self) -> dict:
        """The resident set of the server's whole process group (/proc/<pid>/statm, bytes),
        its processes and their threads (field 20 of stat)."""
        page = os.sysconf("SC_PAGE_SIZE")
        rss, procs, threads = 0, 0, 0
        for pid, fields in self.group():
            try:
                rss += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page
            except (OSError, IndexError, ValueError):
                continue
            procs += 1
            threads += int(fields[17])
        return {"rss": rss, "processes": procs, "threads": threads}

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
        print(f"http_bench.py: {self.server.name} (pid {self.proc.pid}) survived SIGKILL?",
              file=sys.stderr)


def split_response(buf: bytes) -> tuple[int, dict, bytes, int, bytes] | None:
    """One response with a Content-Length body at the start of buf: (status, headers with
    lower-case names, body, its size on the wire, the bytes beyond it), or None while buf
    holds only part of it; raises RuntimeError if it is not such a response."""
    if b"\r\n\r\n" not in buf:
        return None
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    m = re.match(r"HTTP/1\.[01] (\d{3})", lines[0])
    if not m:
        raise RuntimeError(f"not an HTTP response: {lines[0]!r}")
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    if "content-length" not in headers:
        raise RuntimeError(f"response without Content-Length: {lines}")
    n = int(headers["content-length"])
    if len(rest) < n:
        return None
    return int(m.group(1)), headers, rest[:n], len(head) + 4 + n, rest[n:]


def read_response(sock: socket.socket, buf: bytes) -> tuple[int, dict, bytes, int, bytes]:
    """Reads one response with a Content-Length body (split_response's tuple)."""
    while (r := split_response(buf)) is None:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError(f"connection closed inside a response ({len(buf)} bytes read)")
        buf += chunk
    return r


def request(port: int, close: bool) -> bytes:
    """The GET of the file that wrk, the probe and the idle connections send."""
    return (f"GET /index.html HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            + ("Connection: close\r\n" if close else "") + "\r\n").encode()


def check_response(status: int, headers: dict, data: bytes, body: bytes, close: bool) -> None:
    """Raises RuntimeError unless a response to request() is 200 with exactly the file's
    bytes, with 'Connection: close' if and only if it was asked for."""
    if status != 200:
        raise RuntimeError(f"GET /index.html returned {status}")
    if data != body:
        raise RuntimeError(f"GET /index.html returned {len(data)} bytes, not the "
                           f"{len(body)}-byte file")
    conn_close = headers.get("connection", "").lower() == "close"
    if conn_close != close:
        raise RuntimeError("the response " + ("lacks" if close else "has")
                           + " 'Connection: close'" + (" (asked for)" if close else
                                                        " (keep-alive asked for)"))


def probe(port: int, body: bytes, close: bool) -> dict:
    """The request wrk sends, on a raw socket, to learn the exact response size: with
    keep-alive, two requests on one connection (both 200 with the exact body and the same
    size, the connection kept open); with Connection: close, one request, then the server
    must close the connection (EOF within PROBE_TIMEOUT_S) having sent nothing more.
    Returns {"response_bytes", "headers", "keep_alive"}; raises RuntimeError if wrong."""
    req = request(port, close)
    seen: dict = {}
    with socket.create_connection(("127.0.0.1", port), timeout=PROBE_TIMEOUT_S) as sock:
        buf = b""
        for i in range(1 if close else 2):
            sock.sendall(req)
            status, headers, data, size, buf = read_response(sock, buf)
            check_response(status, headers, data, body, close)
            if i == 0:
                seen = {"response_bytes": size, "headers": [f"{k}: {v}" for k, v in
                                                            headers.items()]}
            elif size != seen["response_bytes"]:
                raise RuntimeError(f"two responses of {seen['response_bytes']} and {size} bytes")
        if close:
            t0 = time.monotonic()
            try:
                more = buf + sock.recv(65536)
            except socket.timeout:
                raise RuntimeError(f"the server did not close the connection within "
                                   f"{PROBE_TIMEOUT_S} s after a 'Connection: close' response")
            except ConnectionResetError:
                more = b""     # closed, with a reset: still closed
            if more:
                raise RuntimeError(f"{len(more)} bytes after the 'Connection: close' response")
            seen["closed_after_s"] = round(time.monotonic() - t0, 4)
        seen["keep_alive"] = not close
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


LUA = r"""-- generated by bench/http_bench.py: every response checked, totals over wrk's threads
local threads = {}
function setup(thread)
   table.insert(threads, thread)
end
function init(args)
   body_size = tonumber(args[1])
   responses, non200, badbody, closehdr, wire = 0, 0, 0, 0, 0
end
-- wire: the response's size rebuilt from what wrk parsed, "HTTP/1.1 200 OK\r\n", each
-- header as "Name: value\r\n", "\r\n", the body
function response(status, headers, body)
   responses = responses + 1
   if status ~= 200 then non200 = non200 + 1 end
   if #body ~= body_size then badbody = badbody + 1 end
   local n = 17 + 2 + #body
   for k, v in pairs(headers) do
      n = n + #k + #v + 4
      if string.lower(k) == "connection" and string.lower(v) == "close" then
         closehdr = closehdr + 1
      end
   end
   wire = wire + n
end
function done(summary, latency, requests)
   local t = {responses = 0, non200 = 0, badbody = 0, closehdr = 0, wire = 0}
   for _, th in ipairs(threads) do
      for k, _ in pairs(t) do t[k] = t[k] + th:get(k) end
   end
   io.write(string.format("WRKCHECK requests=%d bytes=%d responses=%d non200=%d badbody=%d "
                          .. "closehdr=%d wire=%d p50_us=%d p90_us=%d p99_us=%d max_us=%d\n",
                          summary.requests, summary.bytes, t.responses, t.non200, t.badbody,
                          t.closehdr, t.wire, latency:percentile(50), latency:percentile(90),
                          latency:percentile(99), latency.max))
end
"""


def parse_check(out: str) -> dict:
    m = re.search(r"^WRKCHECK (.*)$", out, re.M)
    if not m:
        raise ValueError("no WRKCHECK line: the Lua script's done() did not run")
    return {k: int(v) for k, v in (kv.split("=", 1) for kv in m.group(1).split())}


def check_run(r: dict, c: dict, response_bytes: int, close: bool, conns: int) -> tuple[dict, str]:
    """Every response's check, from wrk's output (r: parse_wrk) and the Lua totals (c:
    parse_check), against the response size measured by probe(). Returns (the check's
    numbers for the row's details, '' if the run is clean, else what is wrong).

    Bytes, two ways: (1) the script rebuilds each completed response's size from what wrk
    parsed (status line, every header, the body): their sum must be exactly requests x
    response_bytes; (2) wrk's own count of the bytes it read must be the same, or more by
    less than one response per connection: wrk counts bytes as it reads them and requests
    as they complete, so a response cut off by the end of the run is in the bytes and not
    in the requests (recorded as bytes_unfinished)."""
    expected = c["requests"] * response_bytes
    unfinished = c["bytes"] - expected
    chk = {"requests": c["requests"], "responses_checked": c["responses"],
           "non_200": c["non200"], "bad_body": c["badbody"],
           "connection_close": c["closehdr"], "response_bytes": response_bytes,
           "bytes_expected": expected, "bytes_rebuilt": c["wire"], "bytes_read": c["bytes"],
           "bytes_unfinished": unfinished,
           "bytes_ok": c["wire"] == expected and 0 <= unfinished < conns * response_bytes,
           "non_2xx_3xx": r["non_2xx_3xx"], "socket_errors": r["socket_errors"]}
    problems = []
    if c["requests"] == 0:
        problems.append("no request completed")
    if c["responses"] != c["requests"]:
        problems.append(f"the script saw {c['responses']} responses of {c['requests']}")
    if c["non200"]:
        problems.append(f"{c['non200']} responses with a status other than 200")
    if r["non_2xx_3xx"]:
        problems.append(f"{r['non_2xx_3xx']} non-2xx/3xx responses")
    if c["badbody"]:
        problems.append(f"{c['badbody']} responses whose body is not {FILE_SIZE} bytes")
    if c["wire"] != expected:
        problems.append(f"the responses add up to {c['wire']} bytes, not {c['requests']} "
                        f"requests x {response_bytes} = {expected} (off by "
                        f"{c['wire'] - expected})")
    if not 0 <= unfinished < conns * response_bytes:
        problems.append(f"wrk read {c['bytes']} bytes, not {c['requests']} requests x "
                        f"{response_bytes} = {expected} (off by {unfinished}; at most one "
                        f"unfinished response per connection may be cut off by the end)")
    want_close = c["requests"] if close else 0
    if c["closehdr"] != want_close:
        problems.append(f"{c['closehdr']} responses with 'Connection: close', not {want_close}")
    errs = sum(r["socket_errors"].values())
    if errs > SOCKET_ERROR_TOLERANCE * max(c["requests"], 1):
        problems.append("socket errors " + ", ".join(f"{k} {v}" for k, v in
                                                    r["socket_errors"].items() if v)
                        + f" (tolerance {SOCKET_ERROR_TOLERANCE:.2%} of requests)")
    return chk, "; ".join(problems)


def tcp_active_opens() -> int | None:
    """The machine's count of TCP connections opened (connect) so far, /proc/net/snmp."""
    try:
        lines = [l.split() for l in Path("/proc/net/snmp").read_text().splitlines()
                 if l.startswith("Tcp:")]
        return int(lines[1][lines[0].index("ActiveOpens")])
    except (OSError, ValueError, IndexError):
        return None

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


def pin_cmd(cpus: tuple[int, ...]) -> list[str]:
    """The prefix that pins a command to CPUs."""
    return ["taskset", "-c", ",".join(map(str, cpus))]


# ---------------------------------------------------------------------------
# The section
# ---------------------------------------------------------------------------

TITLE = "HTTP: static file, one server CPU, keep-alive and not"

# The load shapes: (param, connections, a new connection per request)
SHAPES = [("conns=100", 100, False), ("conns=1000", 1000, False), ("conns=100,close", 100, True)]


def warmup_duration(duration: int) -> int:
    """A warm-up run's length: the server is started afresh for every run, so a warm-up
    only warms the machine (page cache, CPU frequency, the allocator of the kernel)."""
    return max(1, duration // 5)


def run_http(build_dir: Path, duration: int, rounds: int, warmup_rounds: int,
             shapes: list | None, log, bins=None, place: Place | None = None) -> dict:
    """Runs the HTTP section; returns {"rows": [Row...], "runs": [...], "meta": {...},
    "failures": [...]}. Rows, per server and load shape (param = the shape's name):
    requests/s (section "http", details: p50/p99 and every check per kept run) and p99
    latency in ms (section "http-p99"). bins: build.Binaries, for the Go and Rust peers.
    log(text) reports progress."""
    shapes = shapes or SHAPES
    place = place or Place()
    tmp = Path(tempfile.mkdtemp(prefix="weft-http-"))
    keep = False
    try:
        docroot = tmp / "root"
        docroot.mkdir()
        body = index_html()
        (docroot / "index.html").write_bytes(body)
        (tmp / "check.lua").write_text(LUA)
        all_servers = servers(build_dir, tmp, docroot, bins, place.k)
        t0 = time.monotonic()
        result = _run(all_servers, tmp, body, duration, rounds, warmup_rounds, shapes, log,
                      place)
        result["meta"]["seconds"] = round(time.monotonic() - t0, 1)
        keep = bool(result["failures"])
        result["meta"]["nginx_conf"] = ((tmp / "nginx.conf").read_text()
                                        if (tmp / "nginx.conf").exists() else None)
        result["meta"]["wrk_script"] = LUA
        if keep:
            result["meta"]["logs_kept_in"] = str(tmp)
        return result
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


def _one_run(s: Server, tmp: Path, body: bytes, rec: dict, conns: int, close: bool,
             seconds: int, live: list, place: Place) -> None:
    """One wrk run against a freshly started server; fills rec, raises on any failure."""
    srv = Running(s, tmp, f"r{rec['round']}-c{conns}{'-close' if close else ''}",
                  pin_cmd(place.server_cpus))
    live.append(srv)
    try:
        srv.start()
        rec["port"] = srv.port
        seen = probe(srv.port, body, close)
        rec["probe"] = seen
        url = f"http://127.0.0.1:{srv.port}/index.html"
        cmd = pin_cmd(place.client_cpus) + ["wrk", f"-t{len(place.client_cpus)}", f"-c{conns}", f"-d{seconds}s", "--latency",
                                     "--timeout", f"{WRK_TIMEOUT_S}s",
                                     "-s", str(tmp / "check.lua")] \
            + (["-H", "Connection: close"] if close else []) + [url, "--", str(len(body))]
        rec["wrk_cmd"] = cmd
        cpu0 = srv.cpu_seconds()
        ct0 = cpu_times()
        opens0 = tcp_active_opens()
        t0 = time.monotonic()
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=seconds + WRK_SLACK_S, preexec_fn=child_setup)
        wall = time.monotonic() - t0
        opens1 = tcp_active_opens()
        ct1 = cpu_times()
        rec["server_cpu_s"] = round(srv.cpu_seconds() - cpu0, 3)
        rec["server_cpu_share"] = round(rec["server_cpu_s"] / wall, 3) if wall else None
        for name, cpu in (("server", place.server_cpus[0]), ("client", place.client_cpus[0])):
            busy, steal = busy_share(ct0, ct1, cpu)
            rec[f"{name}_cpu_busy_share"] = None if busy is None else round(busy, 3)
            rec[f"{name}_cpu_steal_share"] = None if steal is None else round(steal, 3)
        rec["wrk_output"] = p.stdout
        if p.returncode != 0:
            raise RuntimeError(f"wrk exited with status {p.returncode}: "
                               + " | ".join(p.stdout.strip().splitlines()[-3:]))
        rec.update(parse_wrk(p.stdout))
        c = parse_check(p.stdout)
        rec["p50_ms"], rec["p90_ms"], rec["p99_ms"] = (c["p50_us"] / 1000, c["p90_us"] / 1000,
                                                       c["p99_us"] / 1000)
        rec["max_ms"] = c["max_us"] / 1000
        chk, bad = check_run(rec, c, seen["response_bytes"], close, conns)
        # Connections opened on the machine during the run (other programs' included):
        # without keep-alive, every request needs its own.
        chk["tcp_connections_opened"] = (opens1 - opens0) if None not in (opens0, opens1) \
            else None
        if close and chk["tcp_connections_opened"] is not None \
                and chk["tcp_connections_opened"] < c["requests"]:
            bad = "; ".join(x for x in (bad, f"only {chk['tcp_connections_opened']} connections "
                                             f"opened for {c['requests']} requests") if x)
        rec["check"] = chk
        if not srv.alive():
            raise RuntimeError(f"the server died during the run (status "
                               f"{srv.proc.returncode}): {srv.log_tail()}")
        if bad:
            raise RuntimeError(bad)
    finally:
        srv.stop()
        live.remove(srv)
        rec["server_log_tail"] = srv.log_tail(10)
        if srv.exit_note:
            rec["server_exit"] = srv.exit_note


def _run(all_servers: list[Server], tmp: Path, body: bytes, duration: int, rounds: int,
         warmup_rounds: int, shapes: list, log, place: Place) -> dict:
    # Anything that stops every run: wrk, taskset, two CPUs.
    global_missing = ""
    if shutil.which("wrk") is None:
        global_missing = "wrk not installed (scripts/deps.sh bench installs it)"
    elif shutil.which("taskset") is None:
        global_missing = "taskset not found (util-linux)"
    elif not set(place.server_cpus + place.client_cpus) <= os.sched_getaffinity(0):
        global_missing = (f"needs CPUs {place.server_cpus + place.client_cpus} in the affinity "
                          "mask")
    for s in all_servers:
        if global_missing and not s.missing:
            s.missing = global_missing
    # A shape whose connections cannot have descriptors: missing for every server.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    shape_missing = {}
    for param, conns, _ in shapes:
        if hard != resource.RLIM_INFINITY and hard < conns + 64:
            shape_missing[param] = f"RLIMIT_NOFILE hard limit {hard} < {conns} connections + 64"

    runs: list[dict] = []
    failures: list[str] = []
    live: list[Running] = []
    try:
        for param, conns, close in shapes:
            if param in shape_missing:
                continue
            for rnd in range(warmup_rounds + rounds):
                kept = rnd >= warmup_rounds
                seconds = duration if kept else warmup_duration(duration)
                for s in all_servers:            # interleaved: A B C, A B C, ...
                    if s.missing:
                        continue
                    log(f"http {param} round {rnd}{'' if kept else ' (warm-up)'}: {s.name}")
                    rec: dict = {"server": s.name, "param": param, "connections": conns,
                                 "close": close, "round": rnd, "warmup": not kept,
                                 "seconds": seconds, "server_env": s.env,
                                 "server_cmd": pin_cmd(place.server_cpus) + s.cmd}
                    try:
                        _one_run(s, tmp, body, rec, conns, close, seconds, live, place)
                        rec["ok"] = True
                        log(f"  {rec['rps']:,.0f} requests/s, p50 {rec['p50_ms']:.2f} ms, "
                            f"p99 {rec['p99_ms']:.2f} ms, {rec['check']['requests']} x "
                            f"{rec['check']['response_bytes']} bytes checked, server CPU "
                            f"{rec['server_cpu_share'] * 100:.0f}%, client CPU "
                            f"{(rec['client_cpu_busy_share'] or 0) * 100:.0f}%")
                    except (RuntimeError, ValueError, OSError, subprocess.TimeoutExpired) as e:
                        rec["ok"] = False
                        rec["error"] = str(e) if isinstance(e, RuntimeError) \
                            else f"{type(e).__name__}: {e}"
                        failures.append(f"{s.name} {param} round {rnd}: {rec['error']}")
                        log(f"FAIL http {s.name} {param} round {rnd}: {rec['error']}")
                    runs.append(rec)
    finally:
        for srv in list(live):                # interrupted (Ctrl-C): no server left behind
            srv.stop()

    rows = []
    for param, conns, close in shapes:
        for s in all_servers:
            mine = [r for r in runs if r["server"] == s.name and r["param"] == param]
            kept = [r for r in mine if not r["warmup"] and r.get("ok")]
            failed = [f"round {r['round']}: {r['error']}" for r in mine if not r.get("ok")]
            missing = s.missing or shape_missing.get(param, "")
            details = [{"p50_ms": r["p50_ms"], "p90_ms": r["p90_ms"], "p99_ms": r["p99_ms"],
                        "max_ms": r["max_ms"], "server_cpu_share": r["server_cpu_share"],
                        "client_cpu_busy_share": r["client_cpu_busy_share"],
                        "server_cpu_steal_share": r["server_cpu_steal_share"],
                        **r["check"]} for r in kept]
            probe_seen = next((r["probe"] for r in mine if r.get("probe")), None)
            extra = {"describe": s.describe, "connections": conns, "keep_alive": not close,
                     "server_cpu_share": median([d["server_cpu_share"] for d in details
                                                 if d["server_cpu_share"] is not None]),
                     "client_cpu_busy_share": median([d["client_cpu_busy_share"]
                                                      for d in details
                                                      if d["client_cpu_busy_share"] is not None]),
                     "p50_ms": median([d["p50_ms"] for d in details]),
                     "p99_ms": median([d["p99_ms"] for d in details]),
                     "response_bytes": probe_seen["response_bytes"] if probe_seen else None,
                     "response_headers": probe_seen["headers"] if probe_seen else None,
                     "requests_checked": sum(d["requests"] for d in details),
                     "checks_ok": bool(details) and all(d["bytes_ok"] and d["non_200"] == 0
                                                        for d in details),
                     "details": details}
            rows.append(Row("http", s.name, param, "requests/s", "higher", param,
                            [r["rps"] for r in kept], failed, missing, extra))
            rows.append(Row("http-p99", s.name, param, "ms", "lower", param,
                            [r["p99_ms"] for r in kept], list(failed), missing,
                            {"p50_ms": extra["p50_ms"]}))
    meta = {"duration_s": duration, "warmup_duration_s": warmup_duration(duration),
            "shapes": [{"param": p, "connections": c, "close": cl} for p, c, cl in shapes],
            "file_bytes": FILE_SIZE, "server_cpus": list(place.server_cpus),
            "client_cpus": list(place.client_cpus), "k": place.k,
            "socket_error_tolerance": SOCKET_ERROR_TOLERANCE, "nofile": nofile_wanted(),
            "servers": {s.name: {"describe": s.describe, "cmd": s.cmd, "env": s.env,
                                 "missing": s.missing or None} for s in all_servers},
            "wrk_timeout_s": WRK_TIMEOUT_S, "title": TITLE,
            "how": f"GET /index.html, a {FILE_SIZE}-byte file, from one `wrk -t1` under three "
                   f"load shapes: 100 and 1 000 keep-alive connections, and 100 connections "
                   f"with `Connection: close` (a new connection per request); {duration} s "
                   f"per kept run, every server started afresh per run. Every response is "
                   f"checked (a wrk Lua script): status 200, the {FILE_SIZE}-byte body, the "
                   f"exact bytes (requests x the server's response size, measured from one "
                   f"real response), `Connection: close` on every response without keep-alive "
                   f"and on none with it; any failure or socket errors above "
                   f"{SOCKET_ERROR_TOLERANCE:.2%} of the requests fail the run. p50/p99: wrk's "
                   f"latency from request sent to response read (without keep-alive the "
                   f"connect is not in it).",
            "pinning": f"every server pinned to CPU {SERVER_CPU} (`taskset -c {SERVER_CPU}`; one "
                       f"vcore, one worker process, GOMAXPROCS=1, a current-thread runtime), wrk "
                       f"to CPU {CLIENT_CPU}; loopback",
            "command": f"taskset -c {CLIENT_CPU} wrk -t1 -c<conns> -d{duration}s --latency "
                       f"--timeout {WRK_TIMEOUT_S}s -s check.lua [-H 'Connection: close'] URL "
                       f"-- {FILE_SIZE}; servers under taskset -c {SERVER_CPU}"}
    return {"rows": rows, "runs": runs, "meta": meta, "failures": failures}


# ---------------------------------------------------------------------------
# Idle keep-alive connections: the servers' memory per connection
# ---------------------------------------------------------------------------

IDLE_CONNS = 10_000          # connections held open and idle
IDLE_PARAM = f"conns={IDLE_CONNS},idle"
IDLE_BATCH = 500             # connections being opened at once (the listen backlogs are larger)
IDLE_OPEN_TIMEOUT_S = 60     # all of them opened and answered by then, or the run fails
IDLE_SETTLE_S = 0.5          # idle time before the server's memory is read
IDLE_TITLE = f"HTTP: {IDLE_CONNS:,} idle keep-alive connections, one server CPU"


class IdleStop(Exception):
    """The server stopped taking or answering connections: `answered` of them were
    answered (status 200, the file) before, `why` is what the first failed one saw."""

    def __init__(self, answered: int, why: str) -> None:
        super().__init__(f"stops at {answered:,} connections answered: {why}")
        self.answered = answered


def close_abortive(sock: socket.socket) -> None:
    """Closes with a reset (SO_LINGER 0): no TIME_WAIT, whose ports 10 000 connections a
    run would otherwise hold for a minute."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    except OSError:
        pass
    sock.close()


def open_idle(port: int, n: int, body: bytes, response_bytes: int) -> list[socket.socket]:
    """Opens n connections to 127.0.0.1:port, IDLE_BATCH at a time (non-blocking sockets,
    one selector), sends request() on each and reads its whole response: status 200, the
    file's exact bytes, keep-alive, response_bytes on the wire and nothing after it.
    Returns the n open sockets, idle. Raises IdleStop when connections are refused, reset
    or closed before their response (no more are opened then; those under way finish),
    RuntimeError on a wrong response or after IDLE_OPEN_TIMEOUT_S; either way every socket
    is closed first."""
    req = request(port, close=False)
    sel = selectors.DefaultSelector()
    held: list[socket.socket] = []
    pending: dict[int, list] = {}             # fd -> [socket, request sent, bytes read]
    failed = ""                               # the first failure: open no more
    deadline = time.monotonic() + IDLE_OPEN_TIMEOUT_S
    opened = 0

    def fail(fd: int, why: str) -> None:
        nonlocal failed
        failed = failed or why
        sock = pending.pop(fd)[0]
        sel.unregister(sock)
        close_abortive(sock)

    try:
        while pending or (opened < n and not failed):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(held):,} of {n:,} connections answered after "
                                   f"{IDLE_OPEN_TIMEOUT_S} s")
            while opened < n and not failed and len(pending) < IDLE_BATCH:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sock.setblocking(False)
                rc = sock.connect_ex(("127.0.0.1", port))
                opened += 1
                if rc not in (0, errno.EINPROGRESS):
                    sock.close()
                    failed = f"connect: {os.strerror(rc)}"
                    break
                pending[sock.fileno()] = [sock, False, b""]
                sel.register(sock, selectors.EVENT_WRITE)
            for key, _ in sel.select(timeout=0.5):
                st = pending[key.fd]
                sock = st[0]
                if not st[1]:                 # connected (or not): send the request
                    err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        fail(key.fd, f"connect: {os.strerror(err)}")
                        continue
                    if sock.send(req) != len(req):
                        raise RuntimeError("a 60-byte request did not fit a new socket's buffer")
                    st[1] = True
                    sel.modify(sock, selectors.EVENT_READ)
                    continue
                try:
                    chunk = sock.recv(65536)
                except BlockingIOError:
                    continue
                except ConnectionError as e:
                    fail(key.fd, f"{e.strerror or type(e).__name__} before the response")
                    continue
                if not chunk:
                    fail(key.fd, "closed by the server before the response")
                    continue
                st[2] += chunk
                r = split_response(st[2])
                if r is None:
                    continue
                status, headers, data, size, rest = r
                check_response(status, headers, data, body, close=False)
                if size != response_bytes or rest:
                    raise RuntimeError(f"a response of {size} bytes and {len(rest)} more, not "
                                       f"the probe's {response_bytes}")
                sel.unregister(sock)
                del pending[key.fd]
                held.append(sock)
        if failed:
            raise IdleStop(len(held), failed)
        return held
    except BaseException:
        for sock in held + [st[0] for st in pending.values()]:
            close_abortive(sock)
        raise
    finally:
        sel.close()


def not_idle(socks: list[socket.socket]) -> int:
    """How many of the idle sockets the server has closed (EOF or reset) or sent bytes on
    since their response; 0 when all are still open and idle."""
    gone = 0
    for sock in socks:
        try:
            sock.recv(1, socket.MSG_PEEK)     # returns bytes or EOF: either way not idle
            gone += 1
        except BlockingIOError:
            pass
        except ConnectionError:
            gone += 1
    return gone


def idle_servers(build_dir: Path, tmp: Path, docroot: Path, bins, nofile: int) -> list[Server]:
    """The HTTP section's servers at one server CPU, and weft's httpd once more with -c
    (its connections stack-copy uthreads) right after the plain one."""
    out = []
    for s in servers(build_dir, tmp, docroot, bins, 1, nofile):
        out.append(s)
        if s.name == "weft":
            out.append(Server("weft-stackcopy", "examples/httpd on weft, 1 vcore, connections "
                                                "as stack-copy uthreads (`httpd -v 1 -c`)",
                              s.cmd + ["-c"] if s.cmd else [], s.missing))
    return out


def _idle_run(s: Server, tmp: Path, body: bytes, rec: dict, nofile: int, live: list) -> None:
    """One run: start s, probe it, read its memory, hold IDLE_CONNS idle connections,
    read it again; fills rec, raises IdleStop or RuntimeError."""
    srv = Running(s, tmp, f"idle-r{rec['round']}", pin_cmd((SERVER_CPU,)), nofile)
    live.append(srv)
    socks: list[socket.socket] = []
    try:
        srv.start()
        rec["port"] = srv.port
        seen = probe(srv.port, body, close=False)
        before = srv.memory()
        t0 = time.monotonic()
        socks = open_idle(srv.port, IDLE_CONNS, body, seen["response_bytes"])
        rec["open_s"] = round(time.monotonic() - t0, 3)
        time.sleep(IDLE_SETTLE_S)
        after = srv.memory()
        gone = not_idle(socks)
        if gone:
            raise RuntimeError(f"{gone:,} of {IDLE_CONNS:,} connections were closed (or sent "
                               "bytes) before the memory reading was confirmed")
        if not srv.alive():
            raise RuntimeError(f"the server died (status {srv.proc.returncode}): "
                               f"{srv.log_tail()}")
        rec.update(rss_before=before["rss"], rss_after=after["rss"],
                   processes=after["processes"], threads=after["threads"],
                   response_bytes=seen["response_bytes"],
                   value=(after["rss"] - before["rss"]) / IDLE_CONNS)
    finally:
        for sock in socks:
            close_abortive(sock)
        srv.stop()
        live.remove(srv)
        rec["server_log_tail"] = srv.log_tail(5)


def run_idle(build_dir: Path, rounds: int, log, bins=None) -> dict:
    """The idle-connections section: for each kept round, every server in turn (started
    afresh, pinned to CPU 0) holds IDLE_CONNS idle keep-alive connections opened by
    open_idle(); a row per server (section "httpidle", param IDLE_PARAM): resident bytes
    per connection, its details rss_before/rss_after (bytes), processes, threads, open_s.
    A server that stops taking connections (IdleStop) is not run again; its row says where
    it stopped. No warm-up round: a fresh server per run has nothing to warm. RLIMIT_NOFILE:
    the servers get IDLE_CONNS + 1024, this process IDLE_CONNS + 256 while the section runs
    (each within the hard limit). Returns {"rows", "runs", "meta"}."""
    nofile = IDLE_CONNS + 1024
    tmp = Path(tempfile.mkdtemp(prefix="weft-httpidle-"))
    old_limit = resource.getrlimit(resource.RLIMIT_NOFILE)
    runs: list[dict] = []
    live: list[Running] = []
    t0 = time.monotonic()
    try:
        docroot = tmp / "root"
        docroot.mkdir()
        body = index_html()
        (docroot / "index.html").write_bytes(body)
        all_servers = idle_servers(build_dir, tmp, docroot, bins, nofile)
        client_fds = raise_nofile(IDLE_CONNS + 256)
        short = ""
        if shutil.which("taskset") is None:
            short = "taskset not found (util-linux)"
        elif SERVER_CPU not in os.sched_getaffinity(0):
            short = f"needs CPU {SERVER_CPU} in the affinity mask"
        elif client_fds < IDLE_CONNS + 64:
            short = (f"RLIMIT_NOFILE: {client_fds} descriptors for {IDLE_CONNS:,} connections "
                     "(the hard limit)")
        for s in all_servers:
            s.missing = s.missing or short
        stopped: dict[str, str] = {}
        for rnd in range(rounds):
            for s in all_servers:                # interleaved: A B C, A B C, ...
                if s.missing or s.name in stopped:
                    continue
                log(f"httpidle round {rnd}: {s.name}")
                rec: dict = {"server": s.name, "round": rnd, "server_env": s.env,
                             "server_cmd": pin_cmd((SERVER_CPU,)) + s.cmd}
                try:
                    _idle_run(s, tmp, body, rec, nofile, live)
                    rec["ok"] = True
                    log(f"  {rec['value']:,.0f} B/connection (server RSS "
                        f"{rec['rss_before'] / 2**20:.1f} -> {rec['rss_after'] / 2**20:.1f} MiB, "
                        f"{rec['threads']} threads), opened in {rec['open_s']:.1f} s")
                except IdleStop as e:
                    rec["ok"], rec["stopped"] = False, str(e)
                    stopped[s.name] = str(e)
                    log(f"  {s.name}: {e}")
                except (RuntimeError, ValueError, OSError) as e:
                    rec["ok"] = False
                    rec["error"] = str(e) if isinstance(e, RuntimeError) \
                        else f"{type(e).__name__}: {e}"
                    log(f"FAIL httpidle {s.name} round {rnd}: {rec['error']}")
                runs.append(rec)
    finally:
        for srv in list(live):
            srv.stop()
        resource.setrlimit(resource.RLIMIT_NOFILE, old_limit)
        shutil.rmtree(tmp, ignore_errors=True)

    rows = []
    for s in all_servers:
        mine = [r for r in runs if r["server"] == s.name]
        ok = [r for r in mine if r["ok"]]
        problems = [f"round {r['round']}: {r['error']}" for r in mine if r.get("error")]
        missing = s.missing
        if s.name in stopped:
            if ok:                              # held them before: a stop now is a failure
                problems.append(stopped[s.name])
            else:
                missing = stopped[s.name]
        details = [{k: r[k] for k in ("rss_before", "rss_after", "processes", "threads",
                                      "open_s")} for r in ok]
        rows.append(Row("httpidle", s.name, IDLE_PARAM, "B/conn", "lower", IDLE_PARAM,
                        [r["value"] for r in ok], problems, missing,
                        {"describe": s.describe, "details": details}))
    meta = {"title": IDLE_TITLE, "rounds": rounds, "conns": IDLE_CONNS, "nofile": nofile,
            "seconds": round(time.monotonic() - t0, 1), "file_bytes": FILE_SIZE,
            "unit_note": "bytes of resident memory per connection = (the server's resident set "
                         f"with the {IDLE_CONNS:,} connections open and idle − its resident set "
                         "before the first) ÷ connections, every process of the server "
                         "(nginx: master and worker) counted (lower is better)",
            "how": f"Every server is started afresh for every run, probed (two GETs of the "
                   f"{FILE_SIZE}-byte file on one keep-alive connection), and its resident set "
                   f"read from /proc/<pid>/statm. The driver then opens {IDLE_CONNS:,} "
                   f"connections ({IDLE_BATCH} at a time, non-blocking sockets, loopback), "
                   "sends one GET of the file on each and reads its whole response (status 200, "
                   "the exact bytes, the probe's size on the wire, keep-alive), leaves them "
                   f"open and idle, waits {IDLE_SETTLE_S} s, and reads the resident set again; "
                   "then it checks that the server closed none of them (weft's httpd closes a "
                   "connection idle for 10 s) and closes them all. A server that refuses, "
                   "resets or closes connections before answering stops there (reported, not "
                   f"a failure). {rounds} kept runs per server, interleaved, no warm-up (a "
                   "fresh server per run has nothing to warm). RLIMIT_NOFILE: each server "
                   f"gets {nofile:,} (nginx: worker_connections and worker_rlimit_nofile "
                   f"{nofile:,}), the driver {IDLE_CONNS + 256:,} while the section runs, "
                   "each within the hard limit.",
            "pinning": f"every server pinned to CPU {SERVER_CPU} (`taskset -c {SERVER_CPU}`: one "
                       "vcore, one worker process, GOMAXPROCS=1, a current-thread runtime) as "
                       "in the HTTP section; the driver's client unpinned; loopback.",
            "servers": {s.name: {"describe": s.describe, "cmd": s.cmd, "env": s.env,
                                 "missing": s.missing or None} for s in all_servers}}
    return {"rows": rows, "runs": runs, "meta": meta}

#!/usr/bin/env python3
"""
prio_bench.py — the priority-classes section of the report (after
SharedScheduler's figures 6 and 7): request latency per priority class of
weft's httpd under the prio scheduler, under ws (no priorities), and nginx,
with and without a background load that keeps the server's CPU busy.
bench/run.py calls run_priohttp().

What it does:
 1. A temporary document root with what nginx serves in place of the
    computing paths: /class/<c>/p.txt (32 bytes) for the probes and
    /bulk.bin (8 MiB) for the background load; nginx's configuration is
    http_bench's (1 worker process), on a free port.
 2. Servers, each pinned to CPU 0 (`taskset -c 0`), started afresh for every
    run:
      weft-prio  httpd -p 0 -r ROOT -v 1 -s prio -C, WEFT_PREEMPT_US=500
      weft-ws    httpd -p 0 -r ROOT -v 1 -s ws -C, WEFT_PREEMPT_US=500
      nginx      nginx -p TMP -c TMP/nginx.conf (no priorities, no computing)
 3. The load, bench/client/prio_client.c pinned to CPU 1: 64 keep-alive
    probe connections in C classes (C = 8 and 4; connection i in class
    i % C), each sending one request every 50 ms for the run's seconds
    after 0.5 s of warm-up, and timing it from the send to the response's
    last byte. The connections go in 64/C groups of one per class, the
    groups' sends spread evenly over the 50 ms, a group's requests sent
    least urgent class first: in every group each class competes with
    every other, and a server that serves in arrival order serves the most
    urgent last. weft servers: GET /class/<c>/compute/100 (100 000 rounds of a
    mixing function, about half a millisecond here; the client checks the
    result); nginx: GET /class/<c>/p.txt. Load "full": 4 more connections
    requesting back to back at the least urgent class, /class/7/compute/1000
    (ten times the work; nginx: /bulk.bin); load "idle": none.
 4. Rows: impl weft-prio | weft-ws | nginx under full load, the same with
    "-idle" for the idle server; param classes=C,class=c (the p99 of a run
    is the value; p50, p90, max, the number of responses, the late sends
    and 21 quantiles of the distribution are its details), and
    classes=C,class=bulk (the background load's requests/s).
 5. Rounds: warm-up + kept; within a round every (load, classes) cell runs
    its servers back to back (A B C, A B C, ...).

A missing server (nginx not installed, httpd or the client not built) is
reported as missing. Every server is stopped on the way out.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import http_bench as H
from benchlib import Row

CONNS, PERIOD_MS, WARMUP_MS = 64, 50, 500
SECONDS = {"quick": 3, "full": 5}
CLASSES = (8, 4)
PROBE_K, BULK_K, BULK_CONNS = 100, 1000, 4
PREEMPT_US = 500
CLIENT_SLACK_S = 30


def servers(build_dir: Path, tmp: Path, docroot: Path) -> list[tuple[H.Server, bool]]:
    """(server, computes) in run order."""
    httpd = build_dir / "examples" / "httpd" / "httpd"
    out = []
    for sched in ("prio", "ws"):
        s = H.Server(f"weft-{sched}", f"examples/httpd on weft, 1 vcore, `-s {sched} -C`, "
                                      f"WEFT_PREEMPT_US={PREEMPT_US}",
                     env={"WEFT_PREEMPT_US": str(PREEMPT_US)})
        if httpd.is_file():
            s.cmd = [str(httpd), "-p", "0", "-r", str(docroot), "-v", "1", "-s", sched, "-C"]
        else:
            s.missing = f"{httpd} not built"
        out.append((s, True))
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    s = H.Server("nginx", "nginx, 1 worker process (no priorities; it serves files in place "
                          "of the computing paths)")
    if nginx is None:
        s.missing = "nginx not installed (scripts/deps.sh bench installs it)"
    else:
        s.port = H.free_port()
        conf = tmp / "nginx.conf"
        conf.write_text(H.nginx_conf(tmp, docroot, s.port, 1))
        s.cmd = [nginx, "-p", str(tmp), "-c", str(conf), "-e", str(tmp / "error.log")]
    out.append((s, False))
    return out


def make_root(root: Path) -> None:
    for c in range(8):
        d = root / "class" / str(c)
        d.mkdir(parents=True, exist_ok=True)
        (d / "p.txt").write_bytes(b"priority class probe, 32 bytes\n\n"[:32])
    (root / "bulk.bin").write_bytes(bytes(range(256)) * (8 * 4096))


def client_cmd(client: Path, port: int, impl: str, classes: int, full: bool, computes: bool,
               seconds: int) -> list[str]:
    cmd = ["taskset", "-c", str(H.CLIENT_CPU), str(client), "--port", str(port), "--impl", impl,
           "--conns", str(CONNS), "--classes", str(classes), "--period-ms", str(PERIOD_MS),
           "--seconds", str(seconds), "--warmup-ms", str(WARMUP_MS)]
    if computes:
        cmd += ["--compute", "--probe", f"/class/%d/compute/{PROBE_K}"]
        bulk = f"/class/7/compute/{BULK_K}"
    else:
        cmd += ["--probe", "/class/%d/p.txt"]
        bulk = "/bulk.bin"
    if full:
        cmd += ["--bulk", str(BULK_CONNS), "--bulk-path", bulk]
    return cmd


def parse(out: str) -> list[dict]:
    res = []
    for line in out.splitlines():
        if not line.startswith("RESULT "):
            continue
        d = dict(tok.split("=", 1) for tok in line.split()[1:] if "=" in tok)
        for k, v in list(d.items()):
            if k not in ("bench", "impl", "param", "unit", "cdf"):
                try:
                    d[k] = float(v)
                except ValueError:
                    pass
        if "cdf" in d:
            d["cdf"] = [float(x) for x in d["cdf"].split(":")]
        res.append(d)
    return res


def run_priohttp(build_dir: Path, bins, rounds: int, warmup: int, log, full: bool) -> dict:
    seconds = SECONDS["full" if full else "quick"]
    client, why_client = bins.lookup("peer", "prio_client")
    rows: dict[tuple[str, str], Row] = {}
    runs: list[dict] = []
    tmp = Path(tempfile.mkdtemp(prefix="weft-priohttp-"))
    docroot = tmp / "www"
    docroot.mkdir()
    make_root(docroot)
    srv = servers(build_dir, tmp, docroot)

    def row(impl: str, param: str, unit: str, better: str) -> Row:
        key = (impl, param)
        if key not in rows:
            rows[key] = Row("priohttp", impl, param, unit, better, group=param)
        return rows[key]

    try:
        cells = [(load, c) for load in ("full", "idle") for c in CLASSES]
        for s, _ in srv:
            for load, c in cells:
                impl = s.name + ("" if load == "full" else "-idle")
                for k in range(c):
                    r = row(impl, f"classes={c},class={k}", "ms", "lower")
                    r.missing = s.missing or ("" if client else why_client)
                if load == "full":
                    r = row(impl, f"classes={c},class=bulk", "requests/s", "higher")
                    r.missing = s.missing or ("" if client else why_client)
        for rnd in range(warmup + rounds):
            kept = rnd >= warmup
            for load, c in cells:
                for s, computes in srv:
                    if s.missing or not client:
                        continue
                    impl = s.name + ("" if load == "full" else "-idle")
                    log(f"priohttp round {rnd}{'' if kept else ' (warm-up)'}: {impl} classes={c}")
                    pin = ["taskset", "-c", str(H.SERVER_CPU)]
                    running = H.Running(s, tmp, f"{rnd}-{load}-{c}", pin)
                    run = {"section": "priohttp", "job": f"{impl},classes={c}", "round": rnd,
                           "warmup": not kept}
                    try:
                        running.start()
                        cmd = client_cmd(client, running.port, impl, c, load == "full",
                                         computes, seconds)
                        t0 = time.monotonic()
                        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                           text=True, timeout=seconds + WARMUP_MS / 1000
                                           + CLIENT_SLACK_S)
                        run.update(rc=p.returncode, wall_s=round(time.monotonic() - t0, 2),
                                   stderr=p.stderr[-2000:], server_alive=running.alive())
                        results = parse(p.stdout) if p.returncode == 0 else []
                        if p.returncode != 0 or not running.alive():
                            why = (p.stderr.strip().splitlines() or ["no output"])[-1] \
                                if p.returncode != 0 else f"the server died: {running.log_tail()}"
                            for k in range(c):
                                row(impl, f"classes={c},class={k}", "ms", "lower").problems.append(
                                    f"round {rnd}: {why}")
                            continue
                    except (RuntimeError, subprocess.TimeoutExpired) as e:
                        run.update(rc="error", error=str(e))
                        for k in range(c):
                            row(impl, f"classes={c},class={k}", "ms", "lower").problems.append(
                                f"round {rnd}: {e}")
                        continue
                    finally:
                        running.stop()
                        runs.append(run)
                    run["results"] = results
                    for res in results:
                        r = rows.get((impl, res["param"]))
                        if r is None or not kept:
                            continue
                        r.samples.append(res["value"])
                        r.extra.setdefault("details", []).append(
                            {k: v for k, v in res.items()
                             if k not in ("bench", "impl", "param", "value", "unit")})
                    p99 = {res["param"].rsplit("=", 1)[1]: res["value"] for res in results}
                    log("  p99 ms by class: " + ", ".join(f"{k} {v:.2f}" for k, v in p99.items()
                                                          if k != "bulk"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    meta = {"title": "Priority classes over HTTP: latency per class under load",
            "how": __doc__.split("What it does:", 1)[1].split("A missing server", 1)[0].strip(),
            "servers": {s.name: s.describe for s, _ in srv}, "seconds": seconds,
            "conns": CONNS, "period_ms": PERIOD_MS, "classes": list(CLASSES),
            "probe_k": PROBE_K, "bulk_k": BULK_K, "bulk_conns": BULK_CONNS,
            "preempt_us": PREEMPT_US, "rounds": rounds}
    return {"rows": list(rows.values()), "runs": runs, "meta": meta}

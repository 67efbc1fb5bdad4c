#!/usr/bin/env python3
"""run.py — the benchmark driver: builds weft and every peer, runs the
benchmarks side by side, writes every raw sample to
bench/results/<host>-<timestamp>.json and renders bench/report/README.md
with its plots (bench/report.py).

    python3 bench/run.py               # the quick set (what `make report` runs)
    python3 bench/run.py --full        # the full set (`make report FULL=1`)
    python3 bench/run.py --only ring,yield --no-build
    python3 bench/report.py bench/results/<file>.json   # re-render a report

Method, for every section but the ring and HTTP: each program runs
warm-up + kept rounds times with the implementations interleaved (A B C, A B C,
...), the warm-up discarded; a program sizes its own timed run after its own
warm-up (BENCH_TARGET_MS) and checks its own work (fairness and wakelat are
sized by the set instead: sections.preempt_sections; the yield pass's by
sections.yw_work, with at least 5 kept rounds and its --intervals runs in the
last round only). Tokens of a RESULT line
beyond bench/impl/param/value/unit (a completion curve, percentiles, the
runtime's counters) are kept per sample in the row's "details". The ring:
for each (N, threads) the implementations are interleaved the same way; the
warm-up run also sizes the round count M so that a run lasts about
RING_TARGET_S; an implementation that hits a resource limit (or times out)
at some size is recorded as stopping there and not run at larger sizes. The
quick set's 10^6 threads: sections.ring_not_run / ring_rounds.
HTTP: see bench/http_bench.py (run_http; the idle keep-alive connections,
section httpidle: run_idle); priority classes over HTTP: bench/prio_bench.py.
Memory per idle thread: run_idlemem(), the ring's "stops at T" rule over the
section's jobs.

The exit status is 1 when a run failed (a wrong result, a crash, a hang);
missing peers and resource limits are reported, not failures.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import build as builder
import http_bench
import prio_bench
import sections as S
from benchlib import (LIMIT_EXIT, ROOT, SKIP_EXIT, Row, clean_env, describe_failure,
                     host_slug, machine_base, meminfo_bytes, run_program)

RUN_TIMEOUT_S = 60            # one micro-benchmark run (normally 1-3 s)
RING_TIMEOUT_S = 150          # one ring run, creation of up to a million threads included
RING_SIZING_MSGS = 100_000    # messages in the warm-up run that sizes M

STARTED = time.monotonic()


def log(text: str) -> None:
    print(f"[{time.monotonic() - STARTED:6.1f}s] {text}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# Fixed sections: interleaved rounds of a list of jobs
# ---------------------------------------------------------------------------

def run_section(sec: S.Section, bins: builder.Binaries, rounds: int, warmup: int,
                target_ms: int) -> tuple[list[Row], list[dict]]:
    rows: dict[tuple[str, str], Row] = {}

    def row(impl: str, param: str, better: str = "") -> Row:
        key = (impl, param)
        if key not in rows:
            rows[key] = Row(sec.name, impl, param, better=better or sec.better,
                            group=sec.group(impl, param))
        return rows[key]

    for job in sec.jobs:
        path, why = bins.lookup(job.kind, job.program)
        for impl, param in job.rows:
            row(impl, param, job.better).missing = "" if path else why
    runs: list[dict] = []
    hung: set[str] = set()
    for rnd in range(warmup + rounds):
        kept = rnd >= warmup
        for job in sec.jobs:                          # interleaved: A B C, A B C, ...
            path, _ = bins.lookup(job.kind, job.program)
            if path is None or job.name in hung:
                continue
            if job.last_round_only and rnd != warmup + rounds - 1:
                continue
            log(f"{sec.name} round {rnd}{'' if kept else ' (warm-up)'}: {job.name}")
            env = clean_env({"BENCH_TARGET_MS": str(target_ms), **job.env})
            timeout_s = job.timeout_s or RUN_TIMEOUT_S
            run = run_program([str(path)] + job.args, env, job.cpus, timeout_s)
            run.update(section=sec.name, job=job.name, round=rnd, warmup=not kept,
                       env={k: env[k] for k in sorted(env) if k in job.env or k == "BENCH_TARGET_MS"})
            runs.append(run)
            if run["rc"] == SKIP_EXIT:               # cannot run on this machine: missing
                for impl, param in job.rows:
                    if not row(impl, param).samples:
                        row(impl, param).missing = describe_failure(run, timeout_s)
                continue
            failed = run["rc"] != 0
            if run["rc"] == "timeout":
                hung.add(job.name)
            seen = set()
            for res in run["results"]:
                if res.get("bench") != (job.bench or sec.name):
                    continue
                key = (job.label or res.get("impl", "?"),
                       job.param_prefix + res.get("param", "?") + job.param_suffix)
                if (job.param_suffix or job.param_prefix) and key not in job.rows:
                    continue                         # a row this job does not stand for
                r = row(*key)                        # unexpected rows shown too
                seen.add((r.impl, r.param))
                if r.unit and r.unit != res.get("unit"):
                    r.problems.append(f"round {rnd}: unit changed from {r.unit} to {res.get('unit')}")
                    continue
                r.unit = res.get("unit", "")
                if kept and not failed:
                    r.samples.append(res["value"])
                    details = {k: v for k, v in res.items() if k not in RESULT_KEYS}
                    if details:                      # extra tokens: one dict per kept sample
                        r.extra.setdefault("details", []).append(details)
            for impl, param in job.rows:
                if failed or (impl, param) not in seen:
                    problem = (describe_failure(run, timeout_s) if failed
                               else "the program printed no result for this row")
                    row(impl, param).problems.append(f"round {rnd}: {problem}")
            if rnd == warmup + rounds - 1:
                sec_notes = NOTES.setdefault(sec.name, {})
                for impl, text in run["notes"]:
                    if text not in sec_notes.setdefault(impl, []):
                        sec_notes[impl].append(text)
    return list(rows.values()), runs


NOTES: dict[str, dict[str, list[str]]] = {}     # section -> impl -> notes printed by programs
RESULT_KEYS = {"bench", "impl", "param", "value", "unit"}   # the rest of a RESULT line: details


# ---------------------------------------------------------------------------
# The ring
# ---------------------------------------------------------------------------

def why_not_run(bins: builder.Binaries, kind: str, program: str, label: str,
                stopped: dict[str, str]) -> str:
    """Why an implementation is not run at this size: its program is missing, or it
    stopped at a smaller size (stopped: label -> why); "" if it runs."""
    path, why = bins.lookup(kind, program)
    return why if path is None else stopped.get(label, "")


def stops_here(run: dict, r: Row, label: str, threads: int, stopped: dict[str, str],
               timeout_s: float) -> bool:
    """Whether run ends implementation label's climb to larger sizes (a resource limit,
    exit 75; a hang; "cannot run here"; a kill before any good sample); if so, row r
    and stopped[label] say why."""
    rc = run["rc"]
    if not (rc in (LIMIT_EXIT, "timeout", SKIP_EXIT) or
            (isinstance(rc, int) and rc < 0 and not r.samples)):
        return False
    why = describe_failure(run, timeout_s)
    r.missing = f"stops at {threads} threads: {why}"
    stopped[label] = f"stopped at {threads} threads ({why})"
    return True


def ring_rate(run: dict) -> float | None:
    for res in run["results"]:
        if res.get("bench") == "ring":
            return res["value"]
    return None


def note_tokens(notes: list[list[str]]) -> dict[str, float]:
    """The numeric key=value tokens of a run's NOTE lines (the ring's
    shared_rmw_per_msg, stack_copies_per_msg, ...)."""
    out = {}
    for _, text in notes:
        for tok in text.split():
            k, eq, v = tok.partition("=")
            if eq:
                try:
                    out[k] = float(v)
                except ValueError:
                    pass
    return out


def run_ring(impls: list[S.RingImpl], sizes: list[int], bins: builder.Binaries, rounds: int,
             warmup: int, target_s: float, full: bool, section: str = "ring",
             ns: tuple[int, ...] = S.RING_NS, tag: str = "") -> tuple[list[Row], list[dict]]:
    """The ring's runs for every N and size (the scaling section's too: its
    rows get section "scaling", param and group "ring-nN,k=K" from tag
    "k=K"). full: the full set's rules, else the quick set's for its largest
    size (sections.ring_not_run, ring_rounds). A kept run's NOTE tokens are
    its sample's details."""
    rows: list[Row] = []
    runs: list[dict] = []
    for n in ns:
        stopped: dict[str, str] = {}                  # impl -> why it stopped at a smaller size
        for threads in sizes:
            param = f"n={n},threads={threads}"
            cur: dict[str, Row] = {}
            alive: list[S.RingImpl] = []
            for im in impls:
                label = f"ring-n{n},{tag}" if tag else param
                group = label if tag else f"{param},{im.cls}"
                r = Row(section, im.label, label, "msg/s", "higher", group,
                        extra={"class": im.cls, "rss_mib": [], "rounds": None})
                cur[im.label] = r
                rows.append(r)
                left_out = S.ring_not_run(im, threads, full)
                if left_out:
                    r.extra["not_run"] = True
                r.missing = left_out or why_not_run(bins, im.kind, im.program, im.label, stopped)
                if not r.missing:
                    alive.append(im)
            m_for: dict[str, int] = {}
            size_warmup, size_rounds = S.ring_rounds(threads, full, warmup, rounds)
            for r in cur.values():
                r.extra["kept_rounds"] = size_rounds
            for rnd in range(size_warmup + size_rounds):
                kept = rnd >= size_warmup
                for im in list(alive):
                    r = cur[im.label]
                    path, _ = bins.lookup(im.kind, im.program)
                    m = m_for.get(im.label) or max(1, math.ceil(RING_SIZING_MSGS / threads))
                    cmd = [str(path)] + im.args + ["--n", str(n), "--threads", str(threads),
                                                   "--rounds", str(m)]
                    log(f"{section} {param}{',' + tag if tag else ''} round {rnd}"
                        f"{'' if kept else ' (warm-up)'}: {im.label} M={m}")
                    run = run_program(cmd, clean_env(im.env), im.cpus, RING_TIMEOUT_S)
                    run.update(section=section, job=im.label, round=rnd, warmup=not kept,
                               env=dict(im.env), n=n, threads=threads, rounds=m)
                    runs.append(run)
                    rate = ring_rate(run)
                    if stops_here(run, r, im.label, threads, stopped, RING_TIMEOUT_S):
                        alive.remove(im)
                        continue
                    if run["rc"] != 0 or rate is None:
                        r.problems.append(f"round {rnd}: " + (describe_failure(run, RING_TIMEOUT_S)
                                                              if run["rc"] != 0 else
                                                              "no RESULT line"))
                        continue
                    if im.label not in m_for:       # the first good run sizes M
                        m_for[im.label] = max(1, min(10 ** 8, round(target_s * rate / threads)))
                        r.extra["rounds"] = m_for[im.label]
                    if kept:
                        r.samples.append(rate)
                        r.extra["rss_mib"].append(round(run["max_rss_kib"] / 1024, 1))
                        r.extra.setdefault("details", []).append(note_tokens(run["notes"]))
                    log(f"  {rate / 1e6:.2f} M msg/s, max RSS {run['max_rss_kib'] / 1024:.0f} MiB")
    for r in rows:
        rss = r.extra["rss_mib"]
        r.extra["rss_mib_median"] = statistics.median(rss) if rss else None
    return rows, runs


# ---------------------------------------------------------------------------

def run_idlemem(sec: S.Section, bins: builder.Binaries, rounds: int, warmup: int,
                target_ms: int) -> tuple[list[Row], list[dict]]:
    """Memory per idle thread (sections.idlemem_section): the thread counts in
    order, the implementations interleaved per count (warm-up + kept rounds;
    from sec.meta["big_threads"] on, no warm-up and at most "big_rounds"
    kept); as in the ring, an implementation (job.label) that hits a limit
    (exit 75), hangs or is killed at some count stops there. A count that
    needs more memory than the machine has available (sec.meta["mem_needed"])
    is not run, and its rows say why. A sample's details are its RESULT
    line's extra tokens plus the driver's max RSS."""
    del target_ms                                     # the programs do not size themselves
    rows: dict[tuple[str, str], Row] = {}
    for job in sec.jobs:
        for impl, param in job.rows:
            rows[(impl, param)] = Row(sec.name, impl, param, "B/thread", sec.better,
                                      group=sec.group(impl, param))
    levels: list[str] = []
    for job in sec.jobs:
        if job.rows[0][1] not in levels:
            levels.append(job.rows[0][1])
    stopped: dict[str, str] = {}                      # label -> why it stopped at a smaller count
    runs: list[dict] = []
    notes = NOTES.setdefault(sec.name, {})
    for level in levels:
        jobs = [j for j in sec.jobs if j.rows[0][1] == level]
        threads = int(level.split("=")[1])
        big = threads >= sec.meta.get("big_threads", 1 << 62)
        lvl_warmup, lvl_rounds = (0, min(rounds, sec.meta["big_rounds"])) if big else (warmup, rounds)
        need = sec.meta.get("mem_needed", {}).get(str(threads))
        free = meminfo_bytes("MemAvailable") if need else None
        short = (f"not run: needs {need / (1 << 30):.0f} GiB of free memory, the machine had "
                 f"{free / (1 << 30):.1f} GiB (MemAvailable)") if free and free < need else ""
        alive = []
        for job in jobs:
            r = rows[job.rows[0]]
            r.missing = short or why_not_run(bins, job.kind, job.program, job.label, stopped)
            if not r.missing:
                alive.append(job)
        for rnd in range(lvl_warmup + lvl_rounds):
            kept = rnd >= lvl_warmup
            for job in list(alive):
                r = rows[job.rows[0]]
                path, _ = bins.lookup(job.kind, job.program)
                timeout_s = job.timeout_s or RUN_TIMEOUT_S
                log(f"{sec.name} {level} round {rnd}{'' if kept else ' (warm-up)'}: {job.label}")
                run = run_program([str(path)] + job.args, clean_env(job.env), job.cpus, timeout_s)
                run.update(section=sec.name, job=job.name, round=rnd, warmup=not kept,
                           env=dict(job.env), threads=threads)
                runs.append(run)
                for impl, text in run["notes"]:
                    if text not in notes.setdefault(impl, []):
                        notes[impl].append(text)
                rc = run["rc"]
                if stops_here(run, r, job.label, threads, stopped, timeout_s):
                    alive.remove(job)
                    continue
                res = next((x for x in run["results"] if x.get("bench") == sec.name
                            and (x.get("impl"), x.get("param")) == job.rows[0]), None)
                if rc != 0 or res is None:
                    r.problems.append(f"round {rnd}: " + (describe_failure(run, timeout_s)
                                                          if rc != 0 else "no RESULT line"))
                    continue
                if kept:
                    r.samples.append(res["value"])
                    details = {k: v for k, v in res.items() if k not in RESULT_KEYS}
                    details["max_rss_kib"] = run["max_rss_kib"]
                    r.extra.setdefault("details", []).append(details)
                log(f"  {res['value']:,.0f} B/thread, {res.get('create_ns', '?')} ns/thread "
                    f"to create, max RSS {(run['max_rss_kib'] or 0) / 1024:.0f} MiB")
    return list(rows.values()), runs


def section_meta(sec: S.Section, rounds: int, t0: float, **extra) -> dict:
    """What the report needs of a section that ran: its texts, floors, the notes the
    programs printed, its kept rounds and how long it took (since t0)."""
    return {"title": sec.title, "unit_note": sec.unit_note, "how": sec.how,
            "pinning": sec.pinning, "better": sec.better, "floors": list(sec.floors),
            "notes": NOTES.get(sec.name, {}), "rounds": rounds,
            "seconds": round(time.monotonic() - t0, 1), **sec.meta, **extra}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--full", action="store_true",
                    help="the full set: 5 kept rounds, rings up to 1 000 000 threads, 10 s HTTP runs "
                         "(quick: 2 s)")
    ap.add_argument("--only", default="",
                    help="comma-separated sections: baseline,yield,spawn,pingpong,mutex,"
                         "netpingpong,pthread,tls,sysbench,fairness,wakelat,yieldpass,idlemem,ring,"
                         "scaling,http,httpidle,priocost,board,priohttp")
    ap.add_argument("--rounds", type=int, help="kept rounds per program (quick 3, full 5)")
    ap.add_argument("--warmup-rounds", type=int, default=1, help="discarded rounds (default 1)")
    ap.add_argument("--build-dir", default=str(ROOT / "build"))
    ap.add_argument("--no-build", action="store_true", help="use the binaries already built")
    ap.add_argument("--no-report", action="store_true",
                    help="write the JSON only, leave bench/report/ alone")
    args = ap.parse_args()

    full = args.full or os.environ.get("FULL", "") not in ("", "0")
    rounds = args.rounds or (5 if full else 3)
    target_ms = 400 if full else 250
    ring_target_s = 0.5 if full else 0.25
    http_duration = 10 if full else 2     # per kept run; 3 load shapes x 5 servers
    ncpu = len(os.sched_getaffinity(0))

    micro = S.micro_sections(ncpu) + S.pthread_sections() + S.preempt_sections(ncpu, full) + \
        [S.yieldpass_section(full)]
    micro.append(S.idlemem_section(full))          # run by run_idlemem()
    micro += S.prio_sections(ncpu, full)
    scaling = S.scaling_section(ncpu)
    names = [s.name for s in micro] + ["ring", "scaling", "http", "httpidle", "priohttp"]
    wanted = set(args.only.split(",")) if args.only else set(names)
    unknown = wanted - set(names)
    if unknown:
        ap.error(f"unknown section(s): {', '.join(sorted(unknown))}; known: {', '.join(names)}")
    micro = [s for s in micro if s.name in wanted]
    impls = S.ring_impls(ncpu)
    programs = {(j.kind, j.program) for s in micro for j in s.jobs}
    if "ring" in wanted:
        programs |= {(im.kind, im.program) for im in impls}
    if "http" in wanted or "httpidle" in wanted:
        programs |= set(http_bench.PROGRAMS)
    if "priohttp" in wanted:
        programs.add(("peer", "prio_client"))
    if "scaling" in wanted:
        programs |= {(j.kind, j.program) for j in scaling.jobs}
        programs |= {(im.kind, im.program) for im in S.scaling_ring_impls(1)}
        programs |= set(http_bench.PROGRAMS)

    build_dir = Path(args.build_dir).resolve()
    bins = builder.build(build_dir, args.no_build, programs)
    machine = machine_base()
    machine.update(builder.toolchain(build_dir))

    rows: list[Row] = []
    runs: list[dict] = []
    meta: dict = {}
    for sec in micro:
        sec_rounds = args.rounds or max(rounds, sec.min_rounds)   # --rounds wins
        t0 = time.monotonic()
        runner = run_idlemem if sec.name == "idlemem" else run_section
        r, x = runner(sec, bins, sec_rounds, args.warmup_rounds, target_ms)
        rows += r
        runs += x
        meta[sec.name] = section_meta(sec, sec_rounds, t0)
        log(f"{sec.name}: {meta[sec.name]['seconds']:.0f} s")
    if "ring" in wanted:
        sizes = S.ring_sizes(full)
        t0 = time.monotonic()
        r, x = run_ring(impls, sizes, bins, rounds, args.warmup_rounds, ring_target_s, full)
        rows += r
        runs += x
        meta["ring"] = {"sizes": sizes, "ns": list(S.RING_NS), "target_s": ring_target_s,
                        "impls": [{"label": im.label, "class": im.cls, "idiom": im.idiom,
                                   "cpus": sorted(im.cpus) if im.cpus else None,
                                   "env": im.env, "args": im.args, "quick_big": im.quick_big}
                                  for im in impls],
                        "quick_big": None if full else {"threads": S.RING_QUICK_BIG,
                                                        "rounds": S.RING_QUICK_BIG_ROUNDS},
                        "seconds": round(time.monotonic() - t0, 1)}
        log(f"ring: {meta['ring']['seconds']:.0f} s")
    if "scaling" in wanted:
        t0 = time.monotonic()
        r, x = run_section(scaling, bins, rounds, args.warmup_rounds, target_ms)
        rows += r
        runs += x
        for k in S.scaling_ks(ncpu):
            r, x = run_ring(S.scaling_ring_impls(k), [S.SCALING_RING_THREADS], bins, rounds,
                            args.warmup_rounds, ring_target_s, full, section="scaling",
                            ns=S.SCALING_RING_NS, tag=f"k={k}")
            rows += r
            runs += x
        http_ks = [k for k in S.scaling_ks(ncpu) if k <= ncpu // 2]
        half = tuple(range(ncpu // 2, ncpu))
        for k in http_ks:           # server on CPUs 0..K-1, wrk on the upper half
            res = http_bench.run_http(build_dir, http_duration, rounds, args.warmup_rounds,
                                      [(f"conns={100 * k}", 100 * k, False)], log, bins,
                                      http_bench.Place(k, tuple(range(k)), half))
            for row in res["rows"]:
                if row.section == "http":
                    row.section, row.param = "scaling", f"http,k={k}"
                    row.group = row.param
                    rows.append(row)
            runs += [{**x, "section": "scaling"} for x in res["runs"]]
        meta["scaling"] = section_meta(scaling, rounds, t0, http_ks=http_ks)
        log(f"scaling: {meta['scaling']['seconds']:.0f} s")
    if "http" in wanted:
        res = http_bench.run_http(build_dir, http_duration, rounds, args.warmup_rounds, None,
                                  log, bins)
        rows += res["rows"]
        runs += res["runs"]
        meta["http"] = res["meta"]
    if "httpidle" in wanted:
        res = http_bench.run_idle(build_dir, rounds, log, bins)
        rows += res["rows"]
        runs += res["runs"]
        meta["httpidle"] = res["meta"]
        log(f"httpidle: {res['meta']['seconds']:.0f} s")
    if "priohttp" in wanted:
        t0 = time.monotonic()
        res = prio_bench.run_priohttp(build_dir, bins, rounds, args.warmup_rounds, log, full)
        rows += res["rows"]
        runs += res["runs"]
        meta["priohttp"] = {**res["meta"], "seconds_total": round(time.monotonic() - t0, 1)}
        log(f"priohttp: {meta['priohttp']['seconds_total']:.0f} s")

    machine["loadavg_at_end"] = list(os.getloadavg())
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    data = {
        "schema": "weft-report-1",
        "timestamp_utc": stamp,
        "machine": machine,
        "config": {"set": "full" if full else "quick", "rounds": rounds,
                   "warmup_rounds": args.warmup_rounds, "target_ms": target_ms,
                   "sections": [n for n in names if n in wanted],
                   "driver_seconds": round(time.monotonic() - STARTED, 1)},
        "build": bins.info,
        "missing": {f"{k[0]}:{k[1]}": v for k, v in bins.missing.items()},
        "sections": meta,
        "rows": [r.to_json() for r in rows],
        "runs": runs,
    }
    out_dir = ROOT / "bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{host_slug(machine['host'])}-{stamp}.json"
    out.write_text(json.dumps(data, indent=1) + "\n")
    log(f"raw samples: {out.relative_to(ROOT)}")
    if not args.no_report:
        import report
        report.render(data, out)
    bad = [f"{r.section} {r.impl} {r.param}: {p}" for r in rows if not r.missing
           for p in r.problems]
    for b in bad:
        print(f"run.py: FAILED {b}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

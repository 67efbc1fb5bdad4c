#!/usr/bin/env python3
"""test_report.py — renders a synthetic results file and checks what the
report promises its reader: the floors are never "the best peer", a noisy
ratio is marked and not bolded, every number of a column has one format,
missing peers are reported as missing, targets are evaluated from
bench/targets.toml (their metrics too: a ring's max RSS, the creation of all
threads), the scaling section shows every K, stack-copy rows stay out of
weft's default summary rows but have their own, implementations a set leaves
out say so, and the report never refers to the project's tracker. Run by
ctest (bench_report) and by hand:

    python3 bench/test_report.py
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # noqa: E402
from benchlib import spread  # noqa: E402
from render import summary, targets  # noqa: E402
from render.common import fmt_qty  # noqa: E402


def row(section: str, impl: str, param: str, samples: list[float], unit: str, better: str,
        group: str, **extra) -> dict:
    med = sorted(samples)[len(samples) // 2] if samples else None
    return {"section": section, "impl": impl, "param": param, "unit": unit, "better": better,
            "group": group, "samples": samples, "median": med, "spread": spread(samples),
            "problems": [], "missing": extra.pop("missing", None), **extra}


def meta(title: str, **more) -> dict:
    return {"title": title, "how": f"How {title} was measured.", "unit_note": "units",
            "pinning": "pinned", "floors": [], "notes": {}, **more}


def synthetic() -> dict:
    rows = [
        # yield: the floors are far faster than anything, and must not be the best peer
        row("yield", "weft", "threads=2", [13.0, 13.5, 14.0], "ns/yield", "lower", "threads=2"),
        row("yield", "boost.fiber", "threads=2", [70.0, 75.0, 80.0], "ns/yield", "lower",
            "threads=2"),
        row("yield", "boost.context", "threads=2", [5.0, 5.1, 5.2], "ns/yield", "lower",
            "threads=2"),
        row("yield", "c++20-coro", "threads=2", [2.0, 2.1, 2.2], "ns/yield", "lower",
            "threads=2"),
        # spawn: a noisy peer (spread > 20 %)
        row("spawn", "weft", "join=each", [100.0, 101.0, 102.0], "ns/spawn", "lower",
            "join=each"),
        row("spawn", "go", "join=each", [200.0, 300.0, 400.0], "ns/spawn", "lower", "join=each"),
        # pingpong: a missing peer
        row("pingpong", "weft-park-free", "vcores=1", [80.0, 81.0, 82.0], "ns/roundtrip",
            "lower", "one CPU"),
        row("pingpong", "kernel-futex", "cpus=0", [], "ns/roundtrip", "lower", "one CPU",
            missing="not built: kernel_pingpong"),
        # ring: rates in the millions, one CPU and all CPUs, a placed row left out
        row("ring", "weft-1vcore", "n=8,threads=10000", [7.2e6, 7.5e6, 7.4e6], "msg/s",
            "higher", "n=8,threads=10000,one CPU", **{"class": "one CPU", "rss_mib_median": 100,
                                                       "rounds": 30}),
        row("ring", "go-gomaxprocs1", "n=8,threads=10000", [5.6e6, 5.5e6, 5.7e6], "msg/s",
            "higher", "n=8,threads=10000,one CPU", **{"class": "one CPU", "rss_mib_median": 90,
                                                       "rounds": 25}),
        row("ring", "c++20-coro", "n=8,threads=10000", [4.0e7, 4.1e7, 4.2e7], "msg/s",
            "higher", "n=8,threads=10000,one CPU", **{"class": "one CPU", "rss_mib_median": 10,
                                                       "rounds": 200}),
        row("ring", "weft-2vcores", "n=8,threads=10000", [1.9e7, 2.0e7, 2.1e7], "msg/s",
            "higher", "n=8,threads=10000,all CPUs", **{"class": "all CPUs",
                                                        "rss_mib_median": 100, "rounds": 50}),
        row("ring", "weft-2vcores-placed", "n=8,threads=10000", [9.0e7, 9.0e7, 9.0e7], "msg/s",
            "higher", "n=8,threads=10000,all CPUs", **{"class": "all CPUs",
                                                        "rss_mib_median": 100, "rounds": 50}),
        row("ring", "tokio-multi-thread", "n=8,threads=10000", [8.0e6, 8.1e6, 8.2e6], "msg/s",
            "higher", "n=8,threads=10000,all CPUs", **{"class": "all CPUs",
                                                        "rss_mib_median": 60, "rounds": 20}),
        # HTTP: the summary shows latency beside requests/s
        row("http", "weft", "conns=100", [1.3e5, 1.31e5, 1.32e5], "requests/s", "higher",
            "conns=100", details=[{"p50_ms": 0.7, "p99_ms": 0.9}] * 3),
        row("http", "nginx", "conns=100", [1.2e5, 1.21e5, 1.22e5], "requests/s", "higher",
            "conns=100", details=[{"p50_ms": 0.8, "p99_ms": 1.1}] * 3),
    ]
    rows += stack_copy_rows()
    # the prio scheduler: its cost (a paired ratio per round), the classes, the board
    rows += [row("priocost", "weft-ws", "yield,threads=2", [10.0, 20.0, 10.0], "ns/yield",
                 "lower", "yield,threads=2"),
             row("priocost", "weft-prio", "yield,threads=2", [10.5, 21.0, 10.5], "ns/yield",
                 "lower", "yield,threads=2"),
             row("priocost", "weft-ws", "ring,n=8,threads=10000,vcores=1", [1e7, 1e7, 1e7],
                 "msg/s", "higher", "ring"),
             row("priocost", "weft-prio", "ring,n=8,threads=10000,vcores=1", [8e6, 8e6, 8e6],
                 "msg/s", "higher", "ring")]
    p99 = {8: [1.0 + k for k in range(8)], 4: [1.0, 2.0, 5.0, 4.0]}   # 4 classes: out of order
    for c in (8, 4):
        for k in range(c):
            cdf = [0.5 + k * 0.1 * j / 20 for j in range(21)]
            rows.append(row("priohttp", "weft-prio", f"classes={c},class={k}", [p99[c][k]] * 3,
                            "ms", "lower", f"classes={c},class={k}",
                            details=[{"p50_ms": 0.5, "cdf": cdf}] * 3))
            rows.append(row("priohttp", "weft-prio-idle", f"classes={c},class={k}", [0.9] * 3,
                            "ms", "lower", f"classes={c},class={k}"))
        rows.append(row("priohttp", "weft-prio", f"classes={c},class=bulk", [80.0] * 3,
                        "requests/s", "higher", f"classes={c},class=bulk"))
    rows += [row("board", "weft-probe-alone", "period=20ms,work=1000k", [5.0] * 3, "ms", "lower",
                 "b", details=[{"p50_ms": 4.7, "max_ms": 6.0, "b_units_per_s": 0}] * 3),
             row("board", "weft-probe-board", "period=20ms,work=1000k", [6.0] * 3, "ms", "lower",
                 "b", details=[{"p50_ms": 4.9, "max_ms": 9.0, "b_units_per_s": 10000}] * 3)]
    for k, (w, g) in {1: (7.4e6, 5.6e6), 2: (2.0e7, 1.0e7)}.items():
        rows += [row("scaling", "weft", f"ring-n8,k={k}", [w, w, w], "msg/s", "higher",
                     f"ring-n8,k={k}", **{"class": f"{k} CPUs"}),
                 row("scaling", "go", f"ring-n8,k={k}", [g, g * 1.01, g * 0.99], "msg/s",
                     "higher", f"ring-n8,k={k}", **{"class": f"{k} CPUs"}),
                 row("scaling", "weft", f"join=batch1000,k={k}", [50.0 / k] * 3, "ns/spawn",
                     "lower", f"spawn-batch1000,k={k}")]
    machine = {"cpu_model": "Test CPU", "nproc": 2, "memory": "1 GiB", "kernel": "6.1",
               "cc": "cc", "cxx": "c++", "go": "go1.22", "rustc": "rustc 1.80", "boost": "1.83",
               "nginx": "nginx/1.22", "wrk": "wrk 4.2", "git_rev": "0" * 40, "git_dirty": False,
               "loadavg_at_start": [0.1], "loadavg_at_end": [0.2], "affinity_cpus": [0, 1],
               "host": "test"}
    sections = {
        "yield": meta("Yield", floors=["boost.context"]),
        "spawn": meta("Spawn"), "pingpong": meta("Ping-pong"),
        "ring": {"ns": [8], "target_s": 0.25, "impls": [
            {"label": "weft-1vcore", "class": "one CPU", "idiom": "park/unpark", "cpus": [0],
             "env": {"WEFT_VCORES": "1"}, "args": []}]},
        "scaling": meta("Scaling: throughput against cores", ks=[1, 2], ring_threads=10000),
        "http": meta("HTTP"),
        "idlemem": meta("Memory per idle thread", only={"10000000": ["weft-stackcopy"]}),
        "httpidle": meta("HTTP: 10,000 idle keep-alive connections", rounds=3),
        "priocost": meta("The prio scheduler's cost"), "board": meta("The board"),
        "priohttp": meta("Priority classes", servers={"weft-prio": "httpd -s prio"}, seconds=3),
    }
    sections["ring"]["quick_big"] = {"threads": 1000000, "rounds": 1}
    sections["ring"]["impls"].append({"label": "weft-stackcopy-2vcores", "class": "all CPUs",
                                      "idiom": "stack copy", "cpus": None, "env": {},
                                      "args": [], "quick_big": True})
    return {"schema": "weft-report-1", "timestamp_utc": "20260101T000000Z", "machine": machine,
            "config": {"set": "quick", "rounds": 3, "warmup_rounds": 1, "driver_seconds": 1.0},
            "missing": {"peer:kernel_pingpong": "not built"}, "sections": sections,
            "rows": rows}


def stack_copy_rows() -> list[dict]:
    """Stack-copy uthreads: spawn (paired rounds), the ring at 10 000 threads (faster
    than weft's default: must not take its summary rows) and at 1 000 000 (max RSS and
    rate against Go; an ordinary row the quick set leaves out), idle memory to 10^7
    (only weft-stackcopy there) and the idle HTTP connections."""
    one, allc = "n=8,threads=10000,one CPU", "n=8,threads=1000000,all CPUs"
    copies = [{"stack_copies_per_msg": 1.125, "bytes_per_copy": 272}] * 3
    idle = {t: (b, c) for t, b, c in ((10 ** 6, 640.3, 566.0), (10 ** 7, 640.0, 1143.8))}
    return [
        row("spawn", "weft-stackcopy", "join=each", [80.0, 60.0, 150.0], "ns/spawn", "lower",
            "join=each"),
        row("ring", "weft-stackcopy-1vcore", "n=8,threads=10000", [9.0e7] * 3, "msg/s",
            "higher", one, details=copies, **{"class": "one CPU", "rss_mib_median": 20,
                                              "rss_mib": [20] * 3, "rounds": 300}),
        row("ring", "weft-stackcopy-2vcores", "n=8,threads=1000000", [3.5e6], "msg/s",
            "higher", allc, details=copies[:1], **{"class": "all CPUs", "rss_mib_median": 772,
                                                   "rss_mib": [772.0], "rounds": 1,
                                                   "kept_rounds": 1}),
        row("ring", "go-gomaxprocs2", "n=8,threads=1000000", [0.79e6], "msg/s", "higher",
            allc, **{"class": "all CPUs", "rss_mib_median": 2771, "rss_mib": [2771.0],
                     "rounds": 1}),
        row("ring", "weft-2vcores", "n=8,threads=1000000", [], "msg/s", "higher", allc,
            missing="not run at 1,000,000 threads in the quick set, only in the full set",
            **{"class": "all CPUs", "rss_mib": [], "not_run": True}),
        row("idlemem", "weft", "threads=1000000", [4096.2], "B/thread", "lower",
            "threads=1000000", details=[{"create_ns": 6367.7}]),
        row("idlemem", "go", "threads=1000000", [2808.0], "B/thread", "lower",
            "threads=1000000", details=[{"create_ns": 4380.8}]),
        row("idlemem", "tokio-current-thread", "threads=1000000", [456.0], "B/thread", "lower",
            "threads=1000000", details=[{"create_ns": 919.9}])] + [
        row("idlemem", "weft-stackcopy", f"threads={t}", [b], "B/thread", "lower",
            f"threads={t}", details=[{"create_ns": c, "max_rss_kib": 6316 * 1024}])
        for t, (b, c) in idle.items()] + [
        row("httpidle", impl, "conns=10000,idle", samples, "B/conn", "lower",
            "conns=10000,idle", details=[{"rss_before": 2e6, "rss_after": 2e6 + v * 1e4,
                                          "threads": th, "open_s": 0.7} for v in samples],
            missing=why)
        for impl, samples, th, why in (
            ("weft", [18209.0, 18300.0, 18250.0], 3, None),
            ("weft-stackcopy", [12281.0, 12300.0, 12290.0], 3, None),
            ("nginx", [527.0, 530.0, 529.0], 2, None),
            ("pthread", [], 0, "stops at 9,000 connections answered: closed by the server "
                               "before the response"))]


def check(cond: bool, what: str) -> None:
    if not cond:
        print(f"FAIL {what}", file=sys.stderr)
        sys.exit(1)


def check_stack_copy(data: dict, ls: dict, tg: dict, text: str) -> None:
    """What stack_copy_rows() must give: summary rows, targets and tables."""
    one = ls["ring N=8, 10 000 threads, one CPU"]
    check(one["weft"]["impl"] == "weft-1vcore",
          f"a stack-copy row took weft's default summary row: {one['weft']['impl']}")
    mem = ls["memory per idle thread, 1 000 000 stack-copy uthreads"]
    check(mem["weft"]["impl"] == "weft-stackcopy" and mem["peer"]["impl"] ==
          "tokio-current-thread", f"stack-copy idle memory row: {mem['weft']['impl']} against "
                                  f"{mem['peer']['impl']}")
    check(abs(mem["ratio"] - 456.0 / 640.3) < 1e-9, f"stack-copy idle memory ratio {mem['ratio']}")
    t = tg["ring N=8, 1 000 000 threads, all CPUs: weft stack-copy uthreads' max RSS ≤ 0.5× "
           "Go's (GOMAXPROCS=2)"]
    check(t["status"] == "met" and abs(t["ratio"] - 2771 / 772) < 1e-9 and t["unit"] == "B",
          f"ring RSS target: {t}")
    t = tg["ring N=8, 1 000 000 threads, all CPUs: weft stack-copy uthreads ≥ 1.0× Go "
           "(GOMAXPROCS=2)"]
    check(t["status"] == "met" and t["one_run"], f"ring rate target at 10^6: {t}")
    t = tg["spawn + join one at a time, a child that returns without blocking: a stack-copy "
           "child ≤ 0.5× an ordinary uthread's time"]
    # weft's rounds 100, 101, 102 (synthetic()): per round 1.25, 1.68, 0.68; of medians 1.26
    check(abs(t["ratio"] - 1.25) < 1e-9 and t["status"] == "not met",
          f"spawn target is not the median of the paired rounds: {t}")
    t = tg["10 000 000 stack-copy uthreads parked on one machine: all created in < 10 s"]
    check(t["status"] == "not met" and abs(t["weft_median"] - 11.438) < 1e-9,
          f"creation of 10^7 (create_ns x 10^7): {t}")
    t = tg["memory per idle thread, 1 000 000 ordinary uthreads parked: ≤ 4 KiB each"]
    check(t["status"] == "not met", f"4096.2 B within 4 KiB: {t}")
    tline = next(line for line in text.splitlines() if line.startswith(f"| {t['target']}"))
    check("4,096.2 B/thread (needs ≤ 4.00 KiB/thread)" in tline and "**" not in tline,
          f"a miss three digits cannot show, or one run bolded: {tline}")
    idle = text.split("## Memory per idle thread", 1)[1].split("\n## ", 1)[0]
    go = next(line for line in idle.splitlines() if line.startswith("| go |"))
    check(go.rstrip(" |").endswith("not run") and "failed" not in go,
          f"go's cell at 10^7 should say 'not run': {go}")
    check("all 10,000,000 created and parked in 11.4 s" in idle, "10^7's creation not shown")
    ring = text.split("## Ring", 1)[1].split("\n## ", 1)[0]
    check("1.12, 272 B" in ring, "the stack copies per message are not in the ring table")
    check("| **weft-2vcores** | n=8,threads=1000000 |" not in ring and
          "Not run at 1,000,000 threads in the quick set, only in the full set: weft-2vcores."
          in ring, "a row the quick set leaves out is in the table, or not listed under it")
    check("only weft-stackcopy-2vcores run" in ring, "the quick set's 10^6 rule is not stated")
    check("| 3.50 M msg/s |  | 1/1 | 772 MiB |" in ring,
          "a size with one kept run shows its runs out of the set's rounds")
    http = text.split("## HTTP: 10,000 idle", 1)[1]
    check("| **weft-stackcopy** | conns=10000,idle | 12.0 KiB/conn |" in http,
          "httpd -c's bytes per connection missing")
    check("stops at 9,000 connections answered" in http, "where a server stops is not said")


def main() -> int:
    data = synthetic()
    ls = {x["label"]: x for x in summary.lines(data)}
    y = ls["yield, 2 threads, one core"]
    check(y["peer"]["impl"] == "boost.fiber", f"yield's best peer is {y['peer']['impl']}, "
                                              "not Boost.Fiber (a floor was taken as a peer)")
    check(y["floor"]["impl"] == "c++20-coro", "the yield floor column is not the coroutines")
    ring = ls["ring N=8, 10 000 threads, 2 CPUs"]
    check(ring["weft"]["impl"] == "weft-2vcores", "the summary used the placed ring row")
    check(abs(ring["ratio"] - 2.0e7 / 8.1e6) < 1e-9, f"ring ratio {ring['ratio']}")
    one = ls["ring N=8, 10 000 threads, one CPU"]
    check(one["peer"]["impl"] == "go-gomaxprocs1", "the coroutine ring was taken as a peer")
    check(fmt_qty(14.8e6, "msg/s") == "14.8 M msg/s", fmt_qty(14.8e6, "msg/s"))
    check(fmt_qty(8127380, "msg/s") == "8.13 M msg/s", fmt_qty(8127380, "msg/s"))
    check(fmt_qty(2048, "B/thread") == "2.00 KiB/thread", fmt_qty(2048, "B/thread"))
    tg = {t["target"]: t for t in targets.evaluate(data)}
    t = tg["yield, 2 threads on one core: weft ≤ 1.0× Boost.Fiber's time"]
    check(t["status"] == "met" and t["peer"] == "boost.fiber", f"yield target: {t}")
    t = tg["ring N=8, 10 000 threads, one CPU: weft ≥ 1.5× Go (GOMAXPROCS=1)"]
    check(t["status"] == "not met", f"ring target at 1.32x should be short: {t}")
    t = tg["prio's cost, yield with 2 threads on one core: ≤ 1.1× ws's time"]
    check(t["status"] == "met" and abs(t["ratio"] - 1 / 1.05) < 1e-9,
          f"prio's yield cost (paired, 1.05x) should be met: {t}")
    t = tg["prio's cost, ring N=8, 10 000 threads, one vcore: ≥ ws's rate ÷ 1.1"]
    check(t["status"] == "not met" and abs(t["ratio"] - 0.8) < 1e-9,
          f"prio's ring at 0.8x ws's rate should fall short: {t}")
    t = tg["priority classes, 8 classes: p99 ordered by class (weft prio, full load)"]
    check(t["status"] == "met", f"8 classes in order: {t}")
    t = tg["priority classes, 4 classes: p99 ordered by class (weft prio, full load)"]
    check(t["status"] == "not met" and t["out_of_order"] == [3], f"4 classes out of order: {t}")
    t = tg["priority classes, 8 classes: the most urgent class's p99 under full load ≤ 2× its p99 on an idle server"]
    check(t["status"] == "met", f"class 0 at 1.0 ms against 0.9 ms idle: {t}")
    with tempfile.TemporaryDirectory() as d:
        out = Path(d)
        text = report.render(data, Path("test.json"), out).read_text()
        check((out / "history.json").exists(), "no history written")
    summ = text.split("## Summary", 1)[1].split("## Targets", 1)[0]
    spawn = next(line for line in summ.splitlines() if line.startswith("| spawn + join, one"))
    check("⚠" in spawn and "**" not in spawn.split("|")[4], f"noisy ratio bolded: {spawn}")
    ylin = next(line for line in summ.splitlines() if line.startswith("| yield, 2 threads"))
    check("**" in ylin.split("|")[4], f"a steady ratio is not bolded: {ylin}")
    check("missing" in summ, "a missing peer is not reported as missing")
    http = next(line for line in summ.splitlines() if line.startswith("| HTTP, 100 keep-alive"))
    check("p50 0.700 ms, p99 0.900 ms" in http and "p99 1.10 ms" in http,
          f"HTTP latency missing beside requests/s: {http}")
    check(not re.search(r"\bissue\b", text, re.I), "the report mentions the tracker ('issue')")
    check("8,127,380" not in text and not re.search(r"\d,\d{3},\d{3} msg/s", text),
          "a rate printed without its prefix")
    check("K = 1" in text and "K = 2" in text and "speed-up 1 → 2" in text,
          "the scaling table lacks a K column")
    check_stack_copy(data, ls, tg, text)
    check("| 0 (most urgent) |" in text and "| 1.05×" in text,
          "the priority sections' tables (classes, cost) are missing")
    print("test_report: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

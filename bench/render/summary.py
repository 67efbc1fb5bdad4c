"""summary.py — the one-screen summary a newcomer reads first (one row per
benchmark: weft, the best stackful or OS-thread peer, their ratio, and the
stackless or bare-switch floor in a column of its own), and the history of
its ratios across runs (bench/report/history.json)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from benchlib import is_weft

from render.common import (OUT, Ctx, best, better_ratio, detail_median, fmt_qty, fmt_ratio,
                           noisy, sig3)

HISTORY_KEEP = 50

# Never "the best peer": the stackless C++20 coroutines (no stack to switch)
# and Boost.Context (a stack switch without any scheduler) are floors.
FLOORS = ("c++20-coro", "boost.context")

# weft rows the summary leaves out of its weft column: a placement no peer can
# express, and stack-copy uthreads (a spawn flag; their rows are named where
# the summary shows them, so that every other row compares weft's default).
NOT_SUMMARISED = re.compile(r".*-placed$|^weft-stackcopy")


def summary_rows(ncpu: int) -> list[tuple[str, ...]]:
    """(benchmark as the summary names it, section, comparison group[, weft's
    row]): without the fourth, weft's best row of the group that
    NOT_SUMMARISED leaves in."""
    all_cpus = f"{ncpu} CPUs"
    return [
        ("yield, 2 threads, one core", "yield", "threads=2"),
        ("yield, 100 threads, one core", "yield", "threads=100"),
        ("yield, 10 000 threads, one core", "yield", "threads=10000"),
        ("spawn + join, one at a time", "spawn", "join=each"),
        ("spawn + join, batches of 1000", "spawn", "join=batch1000"),
        ("ping-pong, one CPU", "pingpong", "one CPU"),
        ("ping-pong, one core in effect (two CPUs, the runtime keeps the pair together)",
         "pingpong", "one core in effect"),
        ("ping-pong, two CPUs, one thread each, spinning", "pingpong",
         "two CPUs, one thread each, waiters spin"),
        ("mutex, 4 threads, contended", "mutex", "threads=4"),
        ("netpoller pipe ping-pong, one CPU", "netpingpong", "one CPU"),
        ("ring N=8, 10 000 threads, one CPU", "ring", "n=8,threads=10000,one CPU"),
        (f"ring N=8, 10 000 threads, {all_cpus}", "ring", "n=8,threads=10000,all CPUs"),
        ("ring N=2, 10 000 threads, one CPU", "ring", "n=2,threads=10000,one CPU"),
        (f"ring N=2, 10 000 threads, {all_cpus}", "ring", "n=2,threads=10000,all CPUs"),
        ("ring N=8, 100 000 threads, one CPU", "ring", "n=8,threads=100000,one CPU"),
        (f"scaling: ring N=8, 10 000 threads, {all_cpus}", "scaling",
         f"ring-n8,k={ncpu}"),
        ("HTTP, 100 keep-alive connections, one CPU", "http", "conns=100"),
        ("HTTP, 1 000 keep-alive connections, one CPU", "http", "conns=1000"),
        ("HTTP, a connection per request, one CPU", "http", "conns=100,close"),
        ("memory per idle thread, 100 000 threads", "idlemem", "threads=100000"),
        ("memory per idle thread, 1 000 000 stack-copy uthreads", "idlemem", "threads=1000000",
         "weft-stackcopy"),
        ("fairness, 1024 threads of fixed work", "fairness", "threads=1024"),
    ]


def lines(data: dict) -> list[dict]:
    """One line per summary row that the run measured."""
    ncpu = len(data["machine"]["affinity_cpus"])
    out = []
    for label, section, group, *weft in summary_rows(ncpu):
        rows = [r for r in data["rows"] if r["section"] == section and r["group"] == group]
        if not rows:
            continue
        w = best([r for r in rows if r["impl"] == weft[0]] if weft else
                 [r for r in rows if is_weft(r["impl"]) and not NOT_SUMMARISED.match(r["impl"])])
        peers = [r for r in rows if not is_weft(r["impl"]) and r["impl"] not in FLOORS]
        floor = best([r for r in rows if r["impl"] in FLOORS])
        p = best(peers)
        out.append({"label": label, "section": section, "group": group, "weft": w, "peer": p,
                    "floor": floor, "ratio": better_ratio(w, p) if w and p else None,
                    "floor_ratio": better_ratio(w, floor) if w and floor else None,
                    "missing_peers": [r["impl"] for r in peers if not r["median"]]})
    return out


def latency(r: dict) -> str:
    """An HTTP row's p50/p99 (medians of the kept runs), to print beside requests/s."""
    p50, p99 = detail_median(r, "p50_ms"), detail_median(r, "p99_ms")
    return "" if p50 is None or p99 is None else f"; p50 {sig3(p50)} ms, p99 {sig3(p99)} ms"


def markdown(ls: list[dict]) -> list[str]:
    md = ["| benchmark | weft | best stackful or OS-thread peer | weft vs that peer | "
          "floor (stackless / bare switch) |",
          "| --- | ---: | ---: | ---: | ---: |"]
    for x in ls:
        w, p, f = x["weft"], x["peer"], x["floor"]
        lat = latency if x["section"] == "http" else (lambda r: "")
        wtxt = f"{fmt_qty(w['median'], w['unit'])}" + (f" ({w['impl']})" if w["impl"] != "weft"
                                                        else "") + lat(w) if w else "no result"
        if p:
            ptxt = f"{fmt_qty(p['median'], p['unit'])} ({p['impl']}{lat(p)})"
        else:
            ptxt = "no peer result" + (f" ({', '.join(x['missing_peers'])} missing)"
                                       if x["missing_peers"] else "")
        if x["ratio"] is None:
            rtxt = ""
        elif noisy(w, p):
            rtxt = f"{fmt_ratio(x['ratio'])} ⚠"        # spread over 20 %: not bolded
        else:
            rtxt = f"**{fmt_ratio(x['ratio'])}**"
        ftxt = (f"{fmt_qty(f['median'], f['unit'])} ({f['impl']}; weft "
                f"{fmt_ratio(x['floor_ratio'])})" if f else "")
        md.append(f"| {x['label']} | {wtxt} | {ptxt} | {rtxt} | {ftxt} |")
    md += ["", "Ratios above 1× mean weft is better. ⚠: a row's spread (max − min of the kept "
               "runs ÷ median) is over 20 %, so the ratio is not bolded: read it as rough. The "
               "floors are not competitors: C++20 coroutines have no stack to switch and "
               "Boost.Context switches stacks without any scheduler; they show how far below "
               "a stackful scheduler one can go."]
    return md


# ---------------------------------------------------------------------------
# History
# ---------------------------------------------------------------------------

def load_history(path: Path) -> list[dict]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return []


def update_history(data: dict, ls: list[dict], out: Path = OUT) -> list[dict]:
    """Appends this run's summary ratios to out/history.json; returns the history."""
    path = out / "history.json"
    hist = [h for h in load_history(path) if h["timestamp_utc"] != data["timestamp_utc"]]
    m = data["machine"]
    hist.append({"timestamp_utc": data["timestamp_utc"], "git_rev": m["git_rev"][:12],
                 "dirty": m["git_dirty"], "set": data["config"]["set"], "host": m["host"],
                 "cpu_model": m["cpu_model"],
                 "summary": {x["label"]: round(x["ratio"], 4) for x in ls if x["ratio"]}})
    hist = hist[-HISTORY_KEEP:]
    path.write_text(json.dumps(hist, indent=1) + "\n")
    return hist


def history_md(ctx: Ctx, hist: list[dict], ls: list[dict]) -> list[str]:
    md = ["", "## History", "",
          f"The summary ratios of the last {min(len(hist), 10)} runs recorded in "
          "`bench/report/history.json` (one entry per `make report`; 50 kept). Earlier runs "
          "named their rows differently; a ratio shows under the name its run used.", ""]
    if ctx.plt is not None and len(hist) >= 2:
        plt = ctx.plt
        fig, ax = plt.subplots(figsize=(10, 4.5))
        keys = [x["label"] for x in ls if x["ratio"]]
        for k in keys:
            pts = [(i, h["summary"][k]) for i, h in enumerate(hist) if h["summary"].get(k)]
            if len(pts) >= 2:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", label=k)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_xticks(range(len(hist)), [h["timestamp_utc"][:13] for h in hist], rotation=45,
                      fontsize=7)
        ax.set_ylabel("weft ÷ best peer (above 1: weft better)")
        ax.set_title("Summary ratios over time (one run each: no error bars)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6, ncol=2)
        md.append(ctx.save(fig, "history.png", "history"))
    keys = [x["label"] for x in ls if x["ratio"]]
    recent = hist[-10:]
    md.append("| benchmark | " + " | ".join(
        f"{h['timestamp_utc'][:13]} {h['set']} {h['git_rev'][:7]}{'+' if h['dirty'] else ''}"
        for h in recent) + " |")
    md.append("| --- | " + " | ".join("---:" for _ in recent) + " |")
    for k in keys:
        md.append(f"| {k} | " + " | ".join(fmt_ratio(h["summary"].get(k)) for h in recent) + " |")
    return md

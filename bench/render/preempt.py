"""preempt.py — the preemption sections: fixed-work fairness (threads
completed against time) and wake-up latency under load."""

from __future__ import annotations

import statistics

from benchlib import is_weft

from render import micro
from render.common import (VARIANT_COLOURS, Ctx, colour, detail_median, details, fmt_detail,
                           minmax_err, why_no_result)

def fairness_curve(r: dict) -> tuple[list[float], list[int]] | None:
    """Threads completed against time: the pointwise median of the kept runs'
    curves, from (0, 0) through the first finish; None without curves."""
    curves = [[float(x) for x in c.split(",")] for c in details(r, "curve")]
    points = {int(float(p)) for p in details(r, "points")}
    if not curves or len(points) != 1 or any(len(c) != len(curves[0]) for c in curves):
        return None
    threads, npts = int(r["param"].split("threads=")[1]), points.pop()
    times = [statistics.median(c[j] for c in curves) for j in range(npts)]
    counts = [(j + 1) * threads // npts for j in range(npts)]
    return [0.0, detail_median(r, "first") or 0.0] + times, [0, 1] + counts



FAIR_TICK = "kernel-tick"     # the machine's price of a timer signal (not a variant)


def fair_tick(rows: list[dict]) -> dict | None:
    """The kernel_tickcost row of the fairness section (any outcome), if it ran."""
    return next((r for r in rows if r["section"] == "fairness" and r["impl"] == FAIR_TICK), None)


def fair_tick_md(rows: list[dict], tick: dict | None) -> list[str]:
    """What a 1 ms timer signal costs here, beside weft's 1 ms preemption."""
    if tick is None:
        return []
    if tick["median"] is None:
        why = why_no_result(tick)
        return ["", f"This machine's price of a timer signal (kernel-tick): not measured ({why})."]
    by = {r["impl"]: r for r in rows if r["median"]}
    base, pre, pth = by.get("weft-nopreempt"), by.get("weft-preempt-1ms"), by.get("pthread")
    cmp = ""
    if base and pre:
        cmp = (f" In the same run weft-preempt-1ms (a signal every 1 ms, plus the switch and "
               f"the requeue it causes) took {(pre['median'] / base['median'] - 1) * 100:+.1f} % "
               "over weft-nopreempt")
        if pth:
            gap = (pre["median"] / pth["median"] - 1) * 100
            cmp += f" and {gap:+.1f} % over pthread"
            if 0 < gap <= tick["median"]:
                cmp += (", within the signal's own price: the pthread run's time slices "
                        "cost it no signal, and nothing in user space interrupts a running "
                        "thread more cheaply than a signal does")
            elif gap > tick["median"]:
                cmp += ", more than the signal's own price: weft's own part of it is the rest"
        cmp += "."
    return ["", f"This machine's price of a timer signal, measured in the same run "
                f"(kernel-tick, peers/kernel_tickcost, last round): one kernel thread pinned per "
                f"CPU runs fixed mixing work, in {fmt_detail(tick, 'pairs')} pairs of runs "
                "without and with its own CLOCK_MONOTONIC timer (SIGEV_THREAD_ID) raising an "
                "empty handler every 1 ms; the ticked runs were slower by "
                f"**{tick['median']:.2f} %** (median of the pairs), "
                f"{fmt_detail(tick, 'per_tick_us', ' µs')} a tick.{cmp}"]




def fairness_curves(r: dict) -> list[list[float]]:
    """Every kept run's finish times (the curve points), equal lengths only."""
    curves = [[float(x) for x in c.split(",")] for c in details(r, "curve")]
    return curves if curves and all(len(c) == len(curves[0]) for c in curves) else []


def fairness_plot(ctx: Ctx, rows: list[dict]) -> str:
    rs = [r for r in rows if r["median"] and r["impl"] != FAIR_TICK]
    curves = [(r, fairness_curve(r)) for r in rs]
    curves = [(r, c) for r, c in curves if c]
    if ctx.plt is None or not curves:
        return ""
    fig, ax = ctx.plt.subplots(figsize=(10, 5.5))
    for k, (r, (times, counts)) in enumerate(curves):
        weft = is_weft(r["impl"])
        col = VARIANT_COLOURS[k % len(VARIANT_COLOURS)] if weft else colour(r["impl"])
        ax.plot(times, counts, color=col, linestyle="-" if weft else "--",
                linewidth=max(1.0, 4.0 - 0.6 * k) if weft else 2.5,   # later ones drawn over
                label=f"{r['impl']} (total {r['median']:.2f} s)")
        runs = fairness_curves(r)
        if len(runs) >= 2:            # min-max of the kept runs at each point
            lo = [min(c[j] for c in runs) for j in range(len(runs[0]))]
            hi = [max(c[j] for c in runs) for j in range(len(runs[0]))]
            ax.fill_betweenx(counts[2:], lo, hi, color=col, alpha=0.15, linewidth=0)
    ax.set_xlabel("seconds since the start gate opened (bands: min-max of the kept runs)")
    ax.set_ylabel("threads completed")
    ax.set_title(f"Fairness: threads completed against time ({curves[0][0]['param']}, "
                 "pointwise median of the kept runs)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return ctx.save(fig, "fairness.png", "fairness: threads completed against time")


def wakelat_plot(ctx: Ctx, rows: list[dict]) -> str:
    rs = [r for r in rows if r["median"] is not None]
    if ctx.plt is None or not rs:
        return ""
    fig, ax = ctx.plt.subplots(figsize=(9, 0.9 * len(rs) + 1.4))
    marks = [("p50", "p50", "#9edae5"), ("p99", None, "#d62728"), ("max", "max", "#7f7f7f")]
    h = 0.27
    for k, (label, key, col) in enumerate(marks):
        vals = [(detail_median(r, key) if key else r["median"]) or 1e-3 for r in rs]
        err = None
        if key is None:
            err = minmax_err(vals, rs)
        else:
            runs = [[float(x) for x in details(r, key)] or [v] for r, v in zip(rs, vals)]
            err = [[max(0.0, v - min(xs)) for v, xs in zip(vals, runs)],
                   [max(0.0, max(xs) - v) for v, xs in zip(vals, runs)]]
        ax.barh([i + (k - 1) * h for i in range(len(rs))], vals, height=h, color=col,
                label=label, xerr=err, error_kw={"elinewidth": 0.8, "capsize": 2})
    ax.set_yticks(range(len(rs)), [r["impl"] for r in rs], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.axvline(3.0, color="black", linewidth=0.8, linestyle=":")
    ax.set_xlabel("ms late after a 1 ms sleep, log scale (median of the runs, bars: min-max; "
                  "dotted: 3 ms)")
    ax.set_title(f"Wake-up latency under load ({rs[0]['param']})")
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return ctx.save(fig, "wakelat.png", "wake-up latency")


def render_fairness(ctx: Ctx, rows: list[dict]) -> list[str]:
    tick = fair_tick(rows)
    rows = [r for r in rows if r["impl"] != FAIR_TICK]
    base = next((r for r in rows if r["impl"] == "weft-nopreempt" and r["median"]), None)

    def half(r: dict) -> str:
        c = fairness_curve(r)
        if not c:
            return ""
        times, counts = c
        return f"{next(t for t, n in zip(times, counts) if 2 * n >= counts[-1]):.3g} s"

    def vs_base(r: dict) -> str:
        if not (base and r["median"]) or r is base:
            return ""
        return f"{(r['median'] / base['median'] - 1) * 100:+.1f} %"

    cols = [("first done", lambda r: fmt_detail(r, "first", " s")),
            ("half done", half), ("vs weft-nopreempt", vs_base),
            ("preemptions", lambda r: fmt_detail(r, "preempt_taken"))]
    return micro.render(ctx, "fairness", rows, fairness_plot(ctx, rows), cols) + \
        fair_tick_md(rows, tick)


def render_wakelat(ctx: Ctx, rows: list[dict]) -> list[str]:
    cols = [("p50", lambda r: fmt_detail(r, "p50", " ms")),
            ("max", lambda r: fmt_detail(r, "max", " ms")),
            ("wake-ups", lambda r: fmt_detail(r, "wakeups")),
            ("preemptions", lambda r: fmt_detail(r, "preempt_taken")),
            ("longest stretch", lambda r: fmt_detail(r, "longest_stretch_ms", " ms"))]
    return micro.render(ctx, "wakelat", rows, wakelat_plot(ctx, rows), cols)

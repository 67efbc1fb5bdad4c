"""idlemem.py — memory per idle thread: resident memory and creation time
per thread with 10^4 to 10^7 threads each blocked, one curve per
implementation, where an implementation stops, and which ran at a count
only some run (the section's meta "only": 10^7, stack-copy uthreads)."""

from __future__ import annotations

from benchlib import is_weft

from render import micro
from render.common import Ctx, cell, colour, detail_median, fmt_qty, minmax_err, noisy, sig3


def threads_of(r: dict) -> int:
    return int(r["param"].split("threads=")[1])


def plot(ctx: Ctx, rows: list[dict]) -> str:
    if ctx.plt is None:
        return ""
    fig, (ax1, ax2) = ctx.plt.subplots(1, 2, figsize=(13, 5))
    for impl in dict.fromkeys(r["impl"] for r in rows):
        rs = sorted((r for r in rows if r["impl"] == impl and r["median"]), key=threads_of)
        if not rs:
            continue
        style = dict(color=colour(impl), marker="o", linewidth=2.5 if is_weft(impl) else 1.5,
                     linestyle=":" if impl == "c++20-coro" or impl.endswith("pooled") else "-",
                     label=impl)
        xs = [threads_of(r) for r in rs]
        ys = [r["median"] for r in rs]
        ax1.errorbar(xs, ys, yerr=minmax_err(ys, rs), capsize=2, elinewidth=0.8, **style)
        cs = [(x, detail_median(r, "create_ns")) for x, r in zip(xs, rs)]
        cs = [(x, c) for x, c in cs if c]
        if cs:
            ax2.plot([x for x, _ in cs], [c for _, c in cs], **style)
    for ax, what in ((ax1, "resident bytes per idle thread (bars: min-max)"),
                     (ax2, "ns to create a thread until it blocks (median)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("threads, log scale")
        ax.set_ylabel(what)
        ax.grid(True, which="both", alpha=0.3)
    ax1.set_title("Memory per idle thread")
    ax2.set_title("Creation time per thread")
    ax1.legend(fontsize=8)
    return ctx.save(fig, "idlemem.png", "memory per idle thread")


def render(ctx: Ctx, rows: list[dict]) -> list[str]:
    s = ctx.data["sections"]["idlemem"]
    counts = sorted({threads_of(r) for r in rows})
    md = ["", f"## {s['title']}", "", s["how"], "", plot(ctx, rows),
          "| implementation | " + " | ".join(f"{t:,} threads" for t in counts) + " |",
          "| --- | " + " | ".join("---:" for _ in counts) + " |"]
    for impl in dict.fromkeys(r["impl"] for r in rows):
        def measured(r: dict) -> str:
            c = detail_median(r, "create_ns")
            return (fmt_qty(r["median"], r["unit"]) + (f", {sig3(c / 1000)} µs to create" if c
                                                      else "") + (" ⚠" if noisy(r) else ""))

        def stopped(r: dict) -> str:
            return ("stops here" if "stops at" in r["missing"]
                    else "stopped before" if "stopped at" in r["missing"]
                    else "not run" if r["missing"].startswith("not run") else "missing")

        cells = []
        for t in counts:
            r = next((x for x in rows if x["impl"] == impl and threads_of(x) == t), None)
            cells.append(cell(r, measured, stopped) if r else "not run")
        name = f"**{impl}**" if is_weft(impl) else impl
        md.append(f"| {name} | " + " | ".join(cells) + " |")
    stops = {r["impl"]: r["missing"] for r in rows if r["missing"] and "stops at" in r["missing"]}
    if stops:
        md += ["", "Where implementations stop:"] + [f"- {k}: {v}" for k, v in stops.items()]
    md += only_counts(s, rows)
    return md + micro.footer(s)


def only_counts(s: dict, rows: list[dict]) -> list[str]:
    """A line per count that only some implementations run: which, and what they
    took in all (creation of every thread, the peak resident set), or why they
    did not run."""
    md = []
    for t, only in sorted((int(k), v) for k, v in (s.get("only") or {}).items()):
        rs = [r for r in rows if threads_of(r) == t]
        if not rs:
            continue
        what = []
        for r in rs:
            c, peak = detail_median(r, "create_ns"), detail_median(r, "max_rss_kib")
            if r["missing"] or not r["median"]:
                what.append(f"{r['impl']}: {r['missing'] or 'failed'}")
                continue
            what.append(f"{r['impl']}: {fmt_qty(r['median'], r['unit'])}"
                        + (f", all {t:,} created and parked in {sig3(c * t / 1e9)} s" if c
                           else "") + (f", peak resident set {fmt_qty(peak * 1024, 'B')}"
                                       if peak else ""))
        verb = "runs" if len(only) == 1 else "run"
        md += ["", f"At {t:,} threads only {', '.join(only)} {verb} (the others' cells say "
                   "\"not run\"): " + "; ".join(what) + "."]
    return md

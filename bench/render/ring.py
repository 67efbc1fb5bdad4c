"""ring.py — the ring section: R rings of N threads pass a token (the usched
project's benchmark); throughput and memory against thread count, one curve
per implementation, and the table per N (max RSS, rounds, and for stack-copy
rows the stack copies per message), the implementations a set leaves out at
a size listed under it."""

from __future__ import annotations

from benchlib import is_weft

from render.common import Ctx, colour, detail_median, minmax_err, row_table, sig3


def threads_of(r: dict) -> int:
    return int(r["param"].split("threads=")[1].split(",")[0])


def plots(ctx: Ctx, rows: list[dict]) -> str:
    if ctx.plt is None:
        return ""
    images = ""
    for n in ctx.data["sections"]["ring"].get("ns", []):
        fig, (ax1, ax2) = ctx.plt.subplots(1, 2, figsize=(13, 5))
        impls = list(dict.fromkeys(r["impl"] for r in rows))
        for impl in impls:
            rs = sorted((r for r in rows if r["impl"] == impl and r["param"].startswith(f"n={n},")
                         and r["median"]), key=threads_of)
            if not rs:
                continue
            one = rs[0].get("class") == "one CPU"
            style = dict(color=colour(impl), marker="s" if one else "o",
                         linestyle="--" if one else "-", capsize=2, elinewidth=0.8,
                         linewidth=2.5 if is_weft(impl) else 1.5, label=impl)
            xs = [threads_of(r) for r in rs]
            ys = [r["median"] / 1e6 for r in rs]
            ax1.errorbar(xs, ys, yerr=minmax_err(ys, rs, 1e-6), **style)
            ax2.plot(xs, [r["rss_mib_median"] for r in rs],
                     **{k: v for k, v in style.items() if k not in ("capsize", "elinewidth")})
        ax1.set_xscale("log")
        ax1.set_yscale("log")        # C++20 coroutines are 10x above the rest
        ax1.set_xlabel("threads (N × R), log scale")
        ax1.set_ylabel("million messages per second (log scale)")
        ax1.set_title(f"Ring, N = {n}: throughput (dashed: one CPU; bars: min-max)")
        ax1.grid(True, which="both", alpha=0.3)
        ax2.set_xscale("log")
        ax2.set_yscale("log")
        ax2.set_xlabel("threads (N × R), log scale")
        ax2.set_ylabel("max RSS, MiB (log scale)")
        ax2.set_title(f"Ring, N = {n}: memory (median)")
        ax2.grid(True, which="both", alpha=0.3)
        if ax1.get_legend_handles_labels()[0]:
            ax1.legend(fontsize=8)
        images += ctx.save(fig, f"ring-n{n}.png", f"ring N={n}")
    return images


def render(ctx: Ctx, rows: list[dict]) -> list[str]:
    meta = ctx.data["sections"]["ring"]
    md = ["", "## Ring: R rings of N threads pass a token, M rounds", "",
          "From the usched project (stack-copying coroutines): in each round one thread of every ring (chosen by the round "
          "number) sends a token to its right neighbour, every other thread relays what it got "
          "from its left, the round ends when the token is back. The rings run independently. "
          "Throughput = N×R×M messages ÷ the time from opening the start gate (every thread "
          "created and waiting) to the last thread's finish (joins and teardown not timed); "
          "memory = the process's max RSS (wait4). Each program checks that every token made "
          "exactly N hops and every thread sent M times. "
          f"M is sized per implementation by the warm-up run for runs of about "
          f"{meta['target_s']} s." + big_rule(meta), "", plots(ctx, rows)]
    md += ["| implementation | CPUs | relay idiom | pinning |", "| --- | --- | --- | --- |"]
    for im in meta["impls"]:
        pin = (f"process pinned to CPU {','.join(map(str, im['cpus']))}" if im["cpus"]
               else "unpinned") + (f"; {' '.join(f'{k}={v}' for k, v in im['env'].items())}"
                                   if im["env"] else "")
        md.append(f"| {im['label']} | {im['class']} | {im['idiom']} | {pin} |")
    for n in meta["ns"]:
        md += ["", f"### N = {n}", ""]
        rs = [r for r in rows if r["param"].startswith(f"n={n},")]
        rs.sort(key=lambda r: (threads_of(r), r["class"], -(r["median"] or 0)))
        cols = [("max RSS", lambda r: f"{r['rss_mib_median']:,.0f} MiB"
                 if r.get("rss_mib_median") else ""),
                ("rounds M", lambda r: str(r.get("rounds") or ""))]
        if any(detail_median(r, "stack_copies_per_msg") for r in rs):
            cols.append(("stack copies/msg, B/copy", copies))
        md += row_table([r for r in rs if not r.get("not_run")], ctx.rounds, cols)
        left_out: dict[str, list[str]] = {}
        for r in rows:                          # in the implementations' order
            if r.get("not_run") and r["param"].startswith(f"n={n},"):
                left_out.setdefault(r["missing"], []).append(r["impl"])
        md += [f"\n{why[0].upper() + why[1:]}: {', '.join(impls)}."
               for why, impls in left_out.items()]
    stops = sorted({(r["impl"], r["missing"]) for r in rows if r["missing"] and "stop" in r["missing"]})
    if stops:
        md += ["", "Where implementations stop:"]
        seen = set()
        for impl, why in stops:
            if impl not in seen:
                seen.add(impl)
                md.append(f"- {impl}: {why}")
    return md


def copies(r: dict) -> str:
    """A stack-copy row's stack copies per message and bytes per copy (medians of
    the runs' NOTEs)."""
    per, size = detail_median(r, "stack_copies_per_msg"), detail_median(r, "bytes_per_copy")
    return f"{sig3(per)}, {size:,.0f} B" if per is not None and size is not None else ""


def big_rule(meta: dict) -> str:
    """The quick set's rule for its largest size, '' in the full set."""
    big = meta.get("quick_big")
    if not big:
        return ""
    who = [im["label"] for im in meta["impls"] if im.get("quick_big")]
    return (f" At {big['threads']:,} threads (quick set) only {', '.join(who)} run, without a "
            f"warm-up and with {big['rounds']} kept run{'s' if big['rounds'] > 1 else ''} "
            "(M = 1 round, what a warm-up run there uses).")

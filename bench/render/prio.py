"""prio.py — the prio scheduler's sections: its cost against ws (priocost),
the cross-process board (board), and latency per priority class over HTTP
(priohttp: a table per class count, p99 by class, the latency
distributions)."""

from __future__ import annotations

from render import micro
from render.common import (Ctx, colour, detail_median, details, fmt_qty, fmt_ratio, noisy,
                           paired_ratio, sig3, why_no_result)

PRIOHTTP_IMPLS = ("weft-prio", "weft-ws", "nginx")
# weft's two schedulers side by side: two colours (the family colour would be one)
IMPL_COLOURS = {"weft-prio": "#d62728", "weft-ws": "#ff7f0e"}


def cost_ratio(prio: dict, ws: dict) -> float:
    """prio's cost over ws's, above 1 = prio slower: time ratio, or rate ratio inverted."""
    r = paired_ratio(prio, ws)
    return r if prio["better"] == "lower" else 1 / r


def render_cost(ctx: Ctx, rows: list[dict]) -> list[str]:
    s = ctx.data["sections"]["priocost"]
    md = ["", f"## {s['title']}", "", s["how"], ""]
    by = {(r["impl"], r["param"]): r for r in rows}
    params = sorted({r["param"] for r in rows}, key=lambda p: [r["param"] for r in rows].index(p))
    md += ["| benchmark | ws | prio | prio's cost (÷ ws) |", "| --- | ---: | ---: | ---: |"]
    for p in params:
        ws, pr = by.get(("weft-ws", p)), by.get(("weft-prio", p))
        if not (ws and pr and ws["median"] and pr["median"]):
            why = why_no_result(pr or ws) if (pr or ws) else "not run"
            md.append(f"| {p} | {fmt_qty(ws and ws['median'], ws['unit'] if ws else '')} | "
                      f"{fmt_qty(pr and pr['median'], pr['unit'] if pr else '')} | {why} |")
            continue
        c = cost_ratio(pr, ws)
        mark = " ⚠" if noisy(pr, ws) else ""
        md.append(f"| {p} | {fmt_qty(ws['median'], ws['unit'])} | "
                  f"{fmt_qty(pr['median'], pr['unit'])} | {fmt_ratio(c)}{mark} |")
    return md + micro.footer(s)


def render_board(ctx: Ctx, rows: list[dict]) -> list[str]:
    extra = [("p50", lambda r: fmt_qty(detail_median(r, "p50_ms"), "ms")),
             ("max", lambda r: fmt_qty(detail_median(r, "max_ms"), "ms")),
             ("B's work/s", lambda r: f"{detail_median(r, 'b_units_per_s') or 0:,.0f}")]
    return micro.render(ctx, "board", rows, extra_cols=extra)


def _cls(param: str) -> str:
    return param.rsplit("class=", 1)[1]


def _classes(param: str) -> int:
    return int(param.split("classes=", 1)[1].split(",", 1)[0])


def cdf_median(r: dict) -> list[float] | None:
    """The pointwise median of the kept runs' 21 quantiles."""
    cs = [c for c in details(r, "cdf") if isinstance(c, list) and len(c) == 21]
    if not cs:
        return None
    return [sorted(c[i] for c in cs)[len(cs) // 2] for i in range(21)]


def priohttp_table(rows: list[dict], c: int) -> list[str]:
    """Per class: p50 and p99 of each server under full load, and p99 idle."""
    by = {(r["impl"], r["param"]): r for r in rows}
    impls = [i for i in PRIOHTTP_IMPLS if any(r["impl"] == i for r in rows)]
    head = "| class | " + " | ".join(f"{i} p50 | {i} p99 | {i} p99 idle" for i in impls) + " |"
    md = [head, "| ---: |" + " ---: |" * (3 * len(impls))]
    for k in range(c):
        cells = []
        for i in impls:
            full, idle = by.get((i, f"classes={c},class={k}")), by.get((f"{i}-idle",
                                                                        f"classes={c},class={k}"))

            def show(r, v):
                if r is None:
                    return ""
                if r["missing"]:
                    return "missing"
                if v is None:
                    return "**failed**"
                return fmt_qty(v, "ms") + (" ⚠" if noisy(r) else "")
            cells += [show(full, full and detail_median(full, "p50_ms")),
                      show(full, full and full["median"]), show(idle, idle and idle["median"])]
        md.append(f"| {k}{' (most urgent)' if k == 0 else ''} | " + " | ".join(cells) + " |")
    bulk = [f"{i}: {fmt_qty(by[(i, f'classes={c},class=bulk')]['median'], 'requests/s')}"
            for i in impls if by.get((i, f"classes={c},class=bulk"))
            and by[(i, f"classes={c},class=bulk")]["median"]]
    if bulk:
        md += ["", "Background load served (least urgent class): " + "; ".join(bulk) + "."]
    return md


def priohttp_plots(ctx: Ctx, rows: list[dict], c: int) -> str:
    if ctx.plt is None:
        return ""
    plt = ctx.plt
    by = {(r["impl"], r["param"]): r for r in rows if r["median"]}
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ax = axes[0]
    for i in PRIOHTTP_IMPLS:
        for suffix, style in (("", "-"), ("-idle", ":")):
            pts = [(k, by[(i + suffix, f"classes={c},class={k}")]) for k in range(c)
                   if (i + suffix, f"classes={c},class={k}") in by]
            if not pts:
                continue
            ks, rs = [k for k, _ in pts], [r for _, r in pts]
            vals = [r["median"] for r in rs]
            lo = [v - min(r["samples"]) for v, r in zip(vals, rs)]
            hi = [max(r["samples"]) - v for v, r in zip(vals, rs)]
            ax.errorbar(ks, vals, yerr=[lo, hi], fmt=style + "o", color=IMPL_COLOURS.get(i, colour(i)),
                        capsize=2,
                        label=f"{i}{' (idle server)' if suffix else ''}", markersize=4)
    ax.set_yscale("log")
    ax.set_xlabel("priority class (0 most urgent)")
    ax.set_ylabel("p99 latency, ms (median of the runs; bars: min-max)")
    ax.set_title(f"p99 by class, {c} classes")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    for ax, impl in zip(axes[1:], ("weft-prio", "weft-ws")):
        for k in range(c):
            r = by.get((impl, f"classes={c},class={k}"))
            q = r and cdf_median(r)
            if not q:
                continue
            ax.plot(q, [j * 5 for j in range(21)], label=f"class {k}",
                    color=plt.cm.viridis(k / max(c - 1, 1)))
        ax.set_xscale("log")
        ax.set_xlabel("latency, ms")
        ax.set_ylabel("% of requests at or below")
        ax.set_title(f"{impl} under load: distribution per class")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
    return ctx.save(fig, f"priohttp-{c}.png", f"Priority classes, {c} classes")


def render_priohttp(ctx: Ctx, rows: list[dict]) -> list[str]:
    s = ctx.data["sections"]["priohttp"]
    md = ["", f"## {s['title']}", "", s["how"], ""]
    md += [f"- {name}: {d}" for name, d in s.get("servers", {}).items()]
    for c in sorted({_classes(r["param"]) for r in rows}, reverse=True):
        cr = [r for r in rows if _classes(r["param"]) == c]
        md += ["", f"### {c} classes", "", priohttp_plots(ctx, cr, c)]
        md += priohttp_table(cr, c)
        first = {(r["impl"], _cls(r["param"])): r for r in cr}
        full, idle = first.get(("weft-prio", "0")), first.get(("weft-prio-idle", "0"))
        if full and idle and full["median"] and idle["median"]:
            md += ["", f"weft-prio, most urgent class: p99 {fmt_qty(full['median'], 'ms')} under "
                       f"load against {fmt_qty(idle['median'], 'ms')} idle "
                       f"({sig3(full['median'] / idle['median'])}×)."]
    md += ["", "Unit: ms from a request's send to its response's last byte, p99 of a run "
               "(columns p99: the median of the runs' p99; p50: the median of their p50; ⚠: the "
               "runs' p99 spread over 20 %).",
           "", f"Pinning: every server on CPU 0 (`taskset -c 0`, one vcore, one nginx worker), "
               f"the client on CPU 1. {s.get('rounds', ctx.rounds)} kept runs of "
               f"{s.get('seconds')} s each."]
    return md

"""scaling.py — throughput against cores: for each benchmark, one curve per
implementation of its rate at K CPUs and of its speed-up over K = 1, the
table behind them, and weft at all CPUs against the best peer at all CPUs."""

from __future__ import annotations

import re

from benchlib import is_weft

from render.common import Ctx, cell, colour, fmt_qty, fmt_ratio, noisy, sig3

# Benchmarks of the section: param prefix -> title.
BENCHES = [("ring-n8", "ring, N = 8, {threads} threads"),
           ("ring-n2", "ring, N = 2, {threads} threads"),
           ("join=batch1000", "spawn + join in batches of 1000"),
           ("threads=4", "contended mutex, 4 threads"),
           ("http", "HTTP, a static file, 100 keep-alive connections per server CPU")]


def split(r: dict) -> tuple[str, str, int]:
    """(benchmark, series, K) of a row: series is the impl plus any variant
    the param names (the pthread mutex's kind)."""
    base, k = r["param"].rsplit(",k=", 1)
    bench = next((b for b, _ in BENCHES if base.startswith(b)), base)
    m = re.search(r"kind=(\w+)", base)
    return bench, r["impl"] + (f" ({m.group(1)})" if m else ""), int(k)


def rate(r: dict, v: float) -> float:
    """A value as a rate: times (ns per operation) become operations/s."""
    return v if r["better"] == "higher" else 1e9 / v


def rate_unit(r: dict) -> str:
    return r["unit"] if r["better"] == "higher" else "op/s"


def series(rows: list[dict], bench: str) -> dict[str, dict[int, dict]]:
    out: dict[str, dict[int, dict]] = {}
    for r in rows:
        b, s, k = split(r)
        if b == bench:
            out.setdefault(s, {})[k] = r
    return out


def plot(ctx: Ctx, rows: list[dict], ks: list[int]) -> str:
    if ctx.plt is None:
        return ""
    threads = ctx.data["sections"]["scaling"].get("ring_threads", 10000)
    benches = [(b, t.format(threads=f"{threads:,}")) for b, t in BENCHES if series(rows, b)]
    if not benches:
        return ""
    fig, axes = ctx.plt.subplots(len(benches), 2, figsize=(12, 4 * len(benches)), squeeze=False)
    for (bench, title), (ax1, ax2) in zip(benches, axes):
        for name, by_k in series(rows, bench).items():
            pts = [(k, by_k[k]) for k in ks if k in by_k and by_k[k]["median"]]
            if not pts:
                continue
            xs = [k for k, _ in pts]
            ys = [rate(r, r["median"]) for _, r in pts]
            lo = [y - min(rate(r, v) for v in r["samples"]) for y, (_, r) in zip(ys, pts)]
            hi = [max(rate(r, v) for v in r["samples"]) - y for y, (_, r) in zip(ys, pts)]
            style = dict(color=colour(name), marker="o", linewidth=2.5 if is_weft(name) else 1.5,
                         linestyle="-" if "adaptive" not in name else ":", label=name)
            ax1.errorbar(xs, ys, yerr=[lo, hi], capsize=2, elinewidth=0.8, **style)
            if 1 in by_k and by_k[1]["median"]:
                one = rate(by_k[1], by_k[1]["median"])
                ax2.errorbar(xs, [y / one for y in ys], yerr=[[x / one for x in lo],
                                                              [x / one for x in hi]],
                             capsize=2, elinewidth=0.8, **style)
        unit = rate_unit(next(r for by_k in series(rows, bench).values() for r in by_k.values()))
        ax1.set_xscale("log", base=2)
        ax1.set_xticks(ks, [str(k) for k in ks])
        ax1.set_xlabel("CPUs (K)")
        ax1.set_ylabel(f"{unit} (bars: min-max)")
        ax1.set_title(f"{title}: throughput")
        ax1.grid(True, which="both", alpha=0.3)
        ax2.plot(ks, ks, color="black", linewidth=0.8, linestyle="--", label="linear")
        ax2.set_xscale("log", base=2)
        ax2.set_xticks(ks, [str(k) for k in ks])
        ax2.set_xlabel("CPUs (K)")
        ax2.set_ylabel("speed-up over K = 1")
        ax2.set_title(f"{title}: speed-up")
        ax2.grid(True, which="both", alpha=0.3)
        ax1.legend(fontsize=8)
    return ctx.save(fig, "scaling.png", "scaling: throughput and speed-up against CPUs")


def render(ctx: Ctx, rows: list[dict]) -> list[str]:
    s = ctx.data["sections"]["scaling"]
    ks = s["ks"]
    md = ["", f"## {s['title']}", "", s["how"], "", plot(ctx, rows, ks)]
    kmax = ks[-1]
    threads = s.get("ring_threads", 10000)
    for bench, title in BENCHES:
        by = series(rows, bench)
        if not by:
            continue
        md += ["", f"### {title.format(threads=f'{threads:,}')}", "",
               "| implementation | " + " | ".join(f"K = {k}" for k in ks)
               + f" | speed-up 1 → {kmax} |",
               "| --- | " + " | ".join("---:" for _ in ks) + " | ---: |"]
        for name, by_k in by.items():
            cells = [cell(by_k.get(k), lambda r: fmt_qty(rate(r, r["median"]), rate_unit(r))
                          + (" ⚠" if noisy(r) else "")) for k in ks]
            one, top = by_k.get(1), by_k.get(kmax)
            up = (rate(top, top["median"]) / rate(one, one["median"])
                  if one and top and one["median"] and top["median"] else None)
            nm = f"**{name}**" if is_weft(name) else name
            md.append(f"| {nm} | " + " | ".join(cells) + f" | {fmt_ratio(up)} |")
        tops = {n: b[kmax] for n, b in by.items() if kmax in b and b[kmax]["median"]}
        w = {n: r for n, r in tops.items() if is_weft(n)}
        p = {n: r for n, r in tops.items() if not is_weft(n)}
        if w and p:
            wn, wr = max(w.items(), key=lambda x: rate(x[1], x[1]["median"]))
            pn, pr = max(p.items(), key=lambda x: rate(x[1], x[1]["median"]))
            ratio = rate(wr, wr["median"]) / rate(pr, pr["median"])
            md += ["", f"At {kmax} CPUs: weft {sig3(ratio)}× the best peer ({pn})"
                       + (" — noisy ⚠" if noisy(wr, pr) else "") + "."]
    md += ["", f"Unit: {s['unit_note']}.", "", f"Pinning: {s['pinning']}"]
    if len(s.get("http_ks", ks)) < len(ks):
        md += ["", "HTTP runs only at K ≤ half the CPUs: wrk needs the other half (its K = "
                   f"{', '.join(map(str, s.get('http_ks') or [])) or 'none'} here)."]
    if len(ks) < 3:
        md += ["", f"This machine has {kmax} CPUs, so the section shows K = "
                   f"{', '.join(map(str, ks))}; on a bigger machine it shows every power of "
                   "two up to its CPU count with no change to the code."]
    return md

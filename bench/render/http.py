"""http.py — the HTTP section: requests/s of weft's httpd against nginx,
the thread-per-connection build and the Go and tokio+hyper servers, one
server CPU, with latency percentiles and the response checks; and the
servers' memory per idle keep-alive connection (section httpidle)."""

from __future__ import annotations

from render import micro
from render.common import (Ctx, bar_plot, detail_median, details, fmt_detail, fmt_qty,
                           row_table, sig3)


def ms(r: dict, key: str) -> str:
    v = detail_median(r, key)
    return "" if v is None else f"{sig3(v)} ms"


def checked(r: dict) -> str:
    """Responses whose status (200) and bytes were checked in the kept runs."""
    n = sum(int(float(x)) for x in details(r, "responses_checked"))
    return f"{n:,}" + ("" if r.get("checks_ok", True) else " (**failed**)") if n else ""


def render(ctx: Ctx, rows: list[dict]) -> list[str]:
    meta = ctx.data["sections"]["http"]
    rps = [r for r in rows if r["section"] == "http"]
    md = ["", "## HTTP: a static file, one server CPU", "", meta.get("how", ""), "",
          bar_plot(ctx, rps, "http.png", "HTTP requests/s")]
    md += row_table(rps, meta.get("rounds") or ctx.rounds, [
        ("p50", lambda r: ms(r, "p50_ms")),
        ("p99", lambda r: ms(r, "p99_ms")),
        ("responses checked", checked),
        ("server CPU", lambda r: f"{(r.get('server_cpu_share') or 0) * 100:.0f}%")])
    if meta.get("pinning"):
        md += ["", f"Pinning: {meta['pinning']}"]
    servers = {r["impl"]: r.get("describe", "") for r in rps if r.get("describe")}
    if servers:
        md += ["", "Servers:"] + [f"- {k}: {v}" for k, v in servers.items()]
    return md


def render_idle(ctx: Ctx, rows: list[dict]) -> list[str]:
    """The idle keep-alive connections: bytes per connection of every server, its
    resident set before and with them, its threads, how long opening them took."""
    meta = ctx.data["sections"]["httpidle"]
    md = ["", f"## {meta['title']}", "", meta["how"], "",
          bar_plot(ctx, rows, "httpidle.png", "resident bytes per idle connection")]
    md += row_table(rows, meta.get("rounds") or ctx.rounds, [
        ("server RSS before", lambda r: fmt_qty(detail_median(r, "rss_before"), "B")),
        ("with the connections", lambda r: fmt_qty(detail_median(r, "rss_after"), "B")),
        ("threads", lambda r: fmt_detail(r, "threads")),
        ("opened in", lambda r: fmt_detail(r, "open_s", " s"))])
    md += micro.footer(meta)
    servers = {r["impl"]: r.get("describe", "") for r in rows if r.get("describe")}
    if servers:
        md += ["", "Servers:"] + [f"- {k}: {v}" for k, v in servers.items()]
    return md

"""micro.py — a section of fixed jobs (bench/sections.py's micro_sections):
its title and method, a bar plot, the table, unit, pinning, floors and what
the programs printed. The other renderers reuse it for sections of the same
shape (fairness, wake-up latency) with plots and columns of their own."""

from __future__ import annotations

from typing import Callable

from render.common import Ctx, bar_plot, row_table

SECTIONS = ("baseline", "yield", "spawn", "pingpong", "mutex", "netpingpong", "pthread", "tls",
            "sysbench")


def render(ctx: Ctx, name: str, rows: list[dict], image: str | None = None,
           extra_cols: list[tuple[str, Callable[[dict], str]]] = ()) -> list[str]:
    """The section's markdown; image None: the default bar plot."""
    s = ctx.data["sections"][name]
    if image is None:
        image = bar_plot(ctx, rows, f"{name}.png", s["title"])
    md = ["", f"## {s['title']}", "", s["how"], "", image]
    md += row_table(rows, s.get("rounds") or ctx.rounds, extra_cols)
    return md + footer(s)


# What each floor is (render/summary.py: never "the best peer").
FLOOR_WHY = {"boost.context": "a bare stack switch, no scheduler",
             "c++20-coro": "a stackless coroutine keeps only its frame"}


def footer(s: dict) -> list[str]:
    """A section's closing lines: unit, pinning, its floors, what the programs printed."""
    md = ["", f"Unit: {s['unit_note']}.", "", f"Pinning: {s['pinning']}"]
    for f in s.get("floors") or []:
        md += ["", f"{f}: the floor ({FLOOR_WHY.get(f, 'not a competitor')}), shown but never "
                   "counted as the best peer."]
    notes = s.get("notes") or {}
    if notes:
        md += ["", "Printed by the programs:"]
        md += [f"- {impl}: {t}" for impl, ts in notes.items() for t in ts]
    return md

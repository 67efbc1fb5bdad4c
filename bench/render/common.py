"""common.py — what the renderers share: comparisons between rows, one
number format for every column, the row table, and the plot context (every
plot has error bars: the min-max of the kept runs)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from benchlib import ROOT, SPREAD_FLAG, fmt_spread, is_weft

OUT = ROOT / "bench" / "report"

# Colours per family, so a peer has the same colour in every plot.
FAMILY_COLOURS = [("weft", "#d62728"), ("go", "#17becf"), ("boost.fiber", "#2ca02c"),
                  ("boost.context", "#98df8a"), ("c++20", "#9467bd"), ("tokio", "#8c564b"),
                  ("hyper", "#8c564b"), ("pthread", "#7f7f7f"), ("kernel", "#7f7f7f"),
                  ("nginx", "#1f77b4")]
# Variants of one implementation (weft's preemption settings...), in row order.
VARIANT_COLOURS = ["#d62728", "#ff7f0e", "#9467bd", "#1f77b4", "#e377c2", "#2ca02c", "#bcbd22"]


def colour(impl: str) -> str:
    for prefix, c in FAMILY_COLOURS:
        if impl.startswith(prefix):
            return c
    return "#bcbd22"


# ---------------------------------------------------------------------------
# Comparisons
# ---------------------------------------------------------------------------

def better_ratio(weft: dict, peer: dict) -> float:
    """Above 1: weft is better (faster, or more throughput)."""
    if weft["better"] == "lower":
        return peer["median"] / weft["median"]
    return weft["median"] / peer["median"]


def paired_ratio(a: dict, b: dict) -> float:
    """a's value ÷ b's: the median of the per-round ratios when both rows have
    one kept sample per round (no failed run), else the ratio of medians."""
    if a["samples"] and len(a["samples"]) == len(b["samples"]) and not a["problems"] \
            and not b["problems"]:
        return statistics.median(x / y for x, y in zip(a["samples"], b["samples"]))
    return a["median"] / b["median"]


def best(rows: list[dict]) -> dict | None:
    """The best row by median (lowest time, highest rate), None if none has one."""
    rows = [r for r in rows if r["median"]]
    if not rows:
        return None
    key = (lambda r: r["median"]) if rows[0]["better"] == "lower" else (lambda r: -r["median"])
    return min(rows, key=key)


def noisy(*rows: dict | None) -> bool:
    """Any row's spread over SPREAD_FLAG: a ratio from it is marked, not bolded."""
    return any(r and (r.get("spread") or 0) > SPREAD_FLAG for r in rows)


def find(data: dict, section: str, impl: str, param: str | None) -> dict | None:
    """The row of impl (a trailing * matches any suffix) and param (None: any)."""
    for r in data["rows"]:
        name_ok = (r["impl"].startswith(impl[:-1]) if impl.endswith("*") else r["impl"] == impl)
        if r["section"] == section and name_ok and param in (None, r["param"]):
            return r
    return None


def details(r: dict, key: str) -> list:
    """The values of one extra token of a row's RESULT lines, one per kept run."""
    return [d[key] for d in r.get("details") or [] if key in d]


def detail_median(r: dict, key: str) -> float | None:
    xs = [float(x) for x in details(r, key)]
    return statistics.median(xs) if xs else None


def why_no_result(r: dict) -> str:
    """Why a row has no result: the program was missing, or its first problem."""
    return r["missing"] or (r["problems"][0] if r["problems"] else "no result")


# ---------------------------------------------------------------------------
# Numbers: one format everywhere (three significant digits, SI prefixes)
# ---------------------------------------------------------------------------

def sig3(v: float) -> str:
    a = abs(v)
    if a >= 100:
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:#.3g}"                 # 0.800, 0.0926: three digits, trailing zeros kept


def fmt_qty(v: float | None, unit: str) -> str:
    """A value with its unit, the same way in every column: rates with k/M/G
    (14.8 M msg/s), bytes in KiB/MiB, the rest with three significant digits."""
    if v is None:
        return ""
    if unit.endswith("/s"):
        for scale, p in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if abs(v) >= scale:
                return f"{sig3(v / scale)} {p} {unit}"
        return f"{sig3(v)} {unit}"
    if unit.startswith("B"):
        rest = unit[1:]
        for scale, p in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
            if abs(v) >= scale:
                return f"{sig3(v / scale)} {p}{rest}"
        return f"{sig3(v)} B{rest}"
    return f"{sig3(v)} {unit}".rstrip()


def fmt_ratio(r: float | None) -> str:
    return "" if r is None else f"{sig3(r)}×"


def fmt_detail(r: dict, key: str, unit: str = "") -> str:
    """The median of a detail: a count without unit as an integer."""
    v = detail_median(r, key)
    if v is None:
        return ""
    return f"{v:,.0f}" if not unit else f"{sig3(v)}{unit}"


def cell(r: dict | None, fmt: Callable[[dict], str],
         missing: Callable[[dict], str] = lambda r: "missing") -> str:
    """One table cell for a row that may be absent (""), missing, failed
    (no kept run) or measured (fmt(r))."""
    if r is None:
        return ""
    if r["missing"]:
        return missing(r)
    if not r["median"]:
        return "**failed**"
    return fmt(r)


def row_table(rows: list[dict], rounds: int,
              extra_cols: list[tuple[str, Callable[[dict], str]]] = ()) -> list[str]:
    """Markdown: one line per row, its median, spread and kept runs (of
    rounds, or of the row's own kept_rounds), the extra columns, and why it
    has no result if it has none."""
    head = "| impl | param | median | spread | runs | " + \
        "".join(f"{c} | " for c, _ in extra_cols) + "notes |"
    out = [head, "| --- | --- | ---: | ---: | ---: | " + "---: | " * len(extra_cols) + "--- |"]
    for r in rows:
        of = r.get("kept_rounds") or rounds
        if r["missing"]:
            out.append(f"| {r['impl']} | {r['param']} | missing | | 0/{of} | "
                       + "| " * len(extra_cols) + f"{r['missing']} |")
            continue
        if not r["median"]:
            out.append(f"| {r['impl']} | {r['param']} | **failed** | | 0/{of} | "
                       + "| " * len(extra_cols)
                       + f"{len(r['problems'])} failed run(s); first: {r['problems'][0]} |")
            continue
        notes = (f"**{len(r['problems'])} failed run(s)**: {r['problems'][0]}"
                 if r["problems"] else "")
        name = f"**{r['impl']}**" if is_weft(r["impl"]) else r["impl"]
        out.append(f"| {name} | {r['param']} | {fmt_qty(r['median'], r['unit'])} | "
                   f"{fmt_spread(r['spread'])} | {len(r['samples'])}/{of} | "
                   + "".join(f"{f(r)} | " for _, f in extra_cols) + f"{notes} |")
    return out


# ---------------------------------------------------------------------------
# Plots
# ---------------------------------------------------------------------------

def minmax_err(values: list[float], rows: list[dict], scale: float = 1.0) -> list[list[float]]:
    """matplotlib's asymmetric error bars: from each plotted value to the
    min and max of its row's kept runs (scaled as the values are)."""
    lo, hi = [], []
    for v, r in zip(values, rows):
        xs = r["samples"] or [v / scale]
        lo.append(max(0.0, v - min(xs) * scale))
        hi.append(max(0.0, max(xs) * scale - v))
    return [lo, hi]


@dataclass
class Ctx:
    """What a section renderer gets besides its rows: the whole run, the
    kept-round count, and pyplot (None without matplotlib)."""
    data: dict
    rounds: int
    plt: Any = None
    out: Path = OUT
    written: list[str] = field(default_factory=list)

    def save(self, fig: Any, name: str, alt: str) -> str:
        """Writes the figure; returns its markdown image line."""
        fig.tight_layout()
        fig.savefig(self.out / name, dpi=110)
        self.plt.close(fig)
        self.written.append(name)
        return f"![{alt}]({name})\n"

    @property
    def ncpu(self) -> int:
        return len(self.data["machine"]["affinity_cpus"])


def bar_plot(ctx: Ctx, rows: list[dict], name: str, title: str) -> str:
    """Horizontal bars per row (median), grouped by param, with min-max error
    bars; '' without matplotlib or rows."""
    rs = [r for r in rows if r["median"]]
    if ctx.plt is None or not rs:
        return ""
    plt = ctx.plt
    rs.sort(key=lambda r: (r["param"], r["median"]))
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(rs) + 1.2))
    vals = [r["median"] for r in rs]
    ax.barh(range(len(rs)), vals, color=[colour(r["impl"]) for r in rs],
            xerr=minmax_err(vals, rs), error_kw={"elinewidth": 0.8, "capsize": 2})
    ax.set_yticks(range(len(rs)), [f"{r['impl']}  {r['param']}" for r in rs], fontsize=8)
    ax.invert_yaxis()
    if max(vals) / max(min(vals), 1e-9) > 50:
        ax.set_xscale("log")
    ax.set_xlabel(f"{rs[0]['unit']} ({'lower' if rs[0]['better'] == 'lower' else 'higher'} is "
                  "better); bars: min-max of the kept runs")
    ax.set_title(title)
    ax.grid(True, axis="x", which="both", alpha=0.3)
    return ctx.save(fig, name, title)

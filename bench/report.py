#!/usr/bin/env python3
"""report.py — renders a results file of bench/run.py into bench/report/:
README.md (the one-screen summary, the targets of bench/targets.toml, then
one section per benchmark with its table, plot and how it was produced) and
the PNG plots beside it, and appends the run's summary to
bench/report/history.json so the report shows change over time. The
renderers live in bench/render/ (one module per section, the shared helpers
in render/common.py).

    python3 bench/report.py bench/results/<host>-<timestamp>.json [--out DIR]

Needs matplotlib (Debian: python3-matplotlib); without it the report is
written without plots and says so.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from benchlib import SPREAD_FLAG

from render import http, micro, preempt, prio, ring, scaling, summary, targets, yieldpass, idlemem
from render.common import OUT, Ctx

# Sections in the report's order, each with its renderer.
RENDERERS = [(name, lambda ctx, rows, name=name: micro.render(ctx, name, rows))
             for name in micro.SECTIONS] + [
    ("ring", ring.render),
    ("scaling", scaling.render),
    ("idlemem", idlemem.render),
    ("http", http.render),
    ("httpidle", http.render_idle),
    ("fairness", preempt.render_fairness),
    ("wakelat", preempt.render_wakelat),
    ("yieldpass", yieldpass.render),
    ("priocost", prio.render_cost),
    ("priohttp", prio.render_priohttp),
    ("board", prio.render_board),
]


def short_rev(rev: str) -> str:
    return rev[:12] if re.fullmatch("[0-9a-f]{40}", rev) else rev


def header(data: dict, json_path: Path) -> list[str]:
    m, cfg = data["machine"], data["config"]
    busy = m["loadavg_at_start"][0] > 0.7
    return [
        "# weft benchmark report", "",
        f"Produced by `make report{' FULL=1' if cfg['set'] == 'full' else ''}` "
        f"(`bench/run.py{' --full' if cfg['set'] == 'full' else ''}`) on "
        f"{data['timestamp_utc']}: {cfg['set']} set, {cfg['driver_seconds']:.0f} s. "
        f"Raw samples: `bench/results/{json_path.name}` (kept on the machine that ran it).", "",
        f"Machine: {m['cpu_model']}, {m['nproc']} CPUs, {m.get('memory', '')} memory, Linux "
        f"{m['kernel']}. {m.get('cc', '')}; {m.get('cxx', '')}; {m.get('go') or 'go: none'}; "
        f"{m.get('rustc') or 'rustc: none'}; Boost {m.get('boost') or 'none'}; "
        f"{m.get('nginx') or 'nginx: none'}; {m.get('wrk') or 'wrk: none'}. weft at git "
        f"{short_rev(m['git_rev'])}{' (with local changes)' if m['git_dirty'] else ''}. Load "
        f"average {m['loadavg_at_start'][0]:.2f} at the start, {m['loadavg_at_end'][0]:.2f} at "
        f"the end{' — the machine had other work: read ratios, not absolute numbers' if busy else ''}.",
        "",
        f"Method: {cfg['warmup_rounds']} warm-up + {cfg['rounds']} kept runs of every program, "
        f"the implementations interleaved (A B C, A B C, ...); medians of the kept runs; spread "
        f"= (max − min) ÷ median, ⚠ above {SPREAD_FLAG:.0%}; error bars on the plots: min-max "
        "of the kept runs. Every program checks its own result and a wrong one fails the run."]


def render(data: dict, json_path: Path, out: Path = OUT) -> Path:
    """Writes out/README.md, its plots and out/history.json; returns the README's path."""
    out.mkdir(parents=True, exist_ok=True)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        plt = None
    ctx = Ctx(data, data["config"]["rounds"], plt, out)
    spec = targets.load()
    lines = summary.lines(data)
    tgts = targets.evaluate(data, spec)
    hist = summary.update_history(data, lines, out)
    md = header(data, json_path)
    if plt is None:
        md += ["", "(matplotlib is not installed: no plots; Debian: python3-matplotlib)"]
    md += ["", "## Summary", "",
           "weft against the best stackful or OS-thread peer measured in the same run, like "
           "with like (same CPUs, same timing boundary); one row per benchmark.", ""]
    md += summary.markdown(lines)
    md += ["", "## Targets", "", "Each target, its source and whether this run meets it "
           "(`bench/targets.toml`).", ""]
    md += targets.markdown(tgts, spec)
    for name, fn in RENDERERS:
        rows = [r for r in data["rows"] if r["section"] == name]
        if rows:
            md += fn(ctx, rows)
    missing = data.get("missing") or {}
    if missing:
        md += ["", "## Missing programs", ""]
        md += [f"- `{k}`: {v}" for k, v in missing.items()]
    md += summary.history_md(ctx, hist, lines)
    (out / "README.md").write_text("\n".join(md) + "\n")
    print(f"report: {out / 'README.md'}", file=sys.stderr)
    return out / "README.md"


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description="Renders a results file of bench/run.py.")
    ap.add_argument("results", type=Path, help="bench/results/<host>-<timestamp>.json")
    ap.add_argument("--out", type=Path, default=OUT,
                    help="the report's folder (default bench/report; another machine's run, "
                         "such as the 16-core one, goes to a folder of its own)")
    args = ap.parse_args()
    render(json.loads(args.results.read_text()), args.results, args.out)

"""yieldpass.py — the yield pass section: time per iteration of every
instrumented variant against the uninstrumented build and pthreads, the
counter-mode curve, flag mode's intervals between yields, and this
machine's timer lateness beside them."""

from __future__ import annotations

import re

from benchlib import is_weft

from render import targets
from render.common import (VARIANT_COLOURS, Ctx, cell, detail_median, find, fmt_detail,
                           minmax_err, noisy, paired_ratio, sig3, why_no_result)

YP_BASE = "weft-uninstrumented"
YP_PROGS = ("count", "chase", "sort")      # the seed's two, then the small real program
YP_TIMER = "kernel-timer"                  # the machine's timer lateness (not a variant)


def yp_threshold(impl: str) -> int | None:
    m = re.fullmatch(r"weft-counter-(\d+)", impl)
    return int(m.group(1)) if m else None


def yp_quantum_us(impl: str) -> float | None:
    m = re.fullmatch(r"weft-flag-(\d+)(us|ms)", impl)
    return None if not m else float(m.group(1)) * (1000 if m.group(2) == "ms" else 1)


def yp_order(impl: str) -> tuple:
    """Variants in the tables' order: the baselines, flag mode, counter
    mode by threshold, the pthreads last."""
    if impl == YP_BASE:
        return (0, 0)
    if impl.startswith("weft-yield-"):
        return (1, 0)
    if impl.startswith("weft-signal-"):
        return (2, 0)
    if yp_quantum_us(impl) is not None:
        return (3, yp_quantum_us(impl))
    if yp_threshold(impl) is not None:
        return (4, yp_threshold(impl))
    return (9 if impl == "pthread" else 5, 0)


def yp_us(v: float | None) -> str:
    return "" if v is None else sig3(v) if v >= 1 else f"{v:.3g}"


def yp_param_key(param: str) -> tuple:
    prog, threads, opt = param.split(",")[:3]
    return (opt != "O2", YP_PROGS.index(prog) if prog in YP_PROGS else len(YP_PROGS),
            int(threads.split("=")[1]))


def yp_timer(rows: list[dict]) -> dict | None:
    """The timer-lateness row (kernel_timerlat), if it has a result."""
    return next((r for r in rows if r["section"] == "yieldpass" and r["impl"] == YP_TIMER
                 and r["median"] is not None), None)


def yieldpass_plots(ctx: Ctx, rows: list[dict]) -> str:
    if ctx.plt is None:
        return ""
    plt, images = ctx.plt, ""
    rs = [r for r in rows if r["median"] and r["impl"] != YP_TIMER]
    timed = [r for r in rs if not r["param"].endswith(",intervals")]
    counter = [r for r in timed if yp_threshold(r["impl"]) is not None]
    if counter:
        progs = [p for p in ("count", "chase") if any(r["param"].startswith(p + ",") for r in counter)]
        fig, axes = plt.subplots(1, len(progs), figsize=(6.5 * len(progs), 4.8), squeeze=False)
        for ax, prog in zip(axes[0], progs):
            params = sorted({r["param"] for r in counter if r["param"].startswith(prog + ",")},
                            key=yp_param_key)
            for k, param in enumerate(params):
                col = VARIANT_COLOURS[k % len(VARIANT_COLOURS)]
                pts = sorted(((yp_threshold(r["impl"]), r["median"], r) for r in counter
                              if r["param"] == param), key=lambda p: p[0])
                label = param.split(",", 1)[1].replace(",", ", ")
                ys = [p[1] for p in pts]
                ax.errorbar([p[0] for p in pts], ys, yerr=minmax_err(ys, [p[2] for p in pts]),
                            marker="o", color=col, capsize=2, elinewidth=0.8,
                            label=f"counter mode, {label}")
                for impl, style, what in ((YP_BASE, "--", "uninstrumented"),
                                          ("pthread", ":", "pthreads")):
                    ref = find({"rows": rs}, "yieldpass", impl, param)
                    if ref:
                        ax.axhline(ref["median"], color=col, linestyle=style, linewidth=1,
                                   label=f"{what}, {label}")
            ax.set_xscale("log")
            ys = [r["median"] for r in timed if r["param"].startswith(prog + ",")]
            if max(ys) / min(ys) > 4:
                ax.set_yscale("log")
            ax.set_xlabel("counter threshold N: a yield every N checks (log scale)")
            ax.set_ylabel("ns per iteration (total time ÷ iterations)")
            ax.set_title(f"{prog}: total time against the counter threshold")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        images += ctx.save(fig, "yieldpass-counter.png",
                           "yield pass: counter mode, time against threshold")
    flag = [r for r in rs if r["param"].endswith(",intervals") and yp_quantum_us(r["impl"])]
    if flag:
        fig, ax = plt.subplots(figsize=(8, 5))
        params = sorted({r["param"] for r in flag}, key=yp_param_key)
        cols = (VARIANT_COLOURS if len(params) <= len(VARIANT_COLOURS)
                else [plt.get_cmap("tab20")(k % 20) for k in range(len(params))])
        for k, param in enumerate(params):
            col = cols[k]
            pts = sorted((yp_quantum_us(r["impl"]), detail_median(r, "p50"),
                          detail_median(r, "p99"), max(r["samples"]))
                         for r in flag if r["param"] == param)
            xs = [p[0] * (1 + 0.04 * (k - len(params) / 2)) for p in pts]   # side by side
            label = param.rsplit(",", 1)[0].replace(",", ", ")
            ax.plot(xs, [p[1] for p in pts], marker="o", linestyle="", color=col,
                    label=f"{label}: p50 (o), p99 (^), max (x)")
            ax.plot(xs, [p[2] for p in pts], marker="^", linestyle="", color=col)
            ax.plot(xs, [p[3] for p in pts], marker="x", linestyle="", color=col)
        qs = sorted({yp_quantum_us(r["impl"]) for r in flag})
        ax.plot(qs, qs, color="black", linewidth=0.8, label="the quantum")
        ax.plot(qs, [2 * q for q in qs], color="black", linewidth=0.8, linestyle="--",
                label="2 × the quantum")
        timer = yp_timer(rows)
        if timer:
            late = max(timer["samples"])
            ax.plot(qs, [2 * q + late for q in qs], color="grey", linewidth=0.8, linestyle=":",
                    label=f"2 × the quantum + this machine's timer lateness (max {late:.0f} µs)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("quantum (preemption period), µs")
        ax.set_ylabel("time between two yields of a uthread, µs")
        ax.set_title("Flag mode: intervals between yields (wall clock; one recorded run "
                     "each: no error bars)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        images += ctx.save(fig, "yieldpass-intervals.png",
                           "yield pass: flag mode, intervals between yields")
    return images


def yp_table(by: dict, params: list[str], impls: list[str], with_opt: bool = False) -> list[str]:
    """A variants × params table of ns per iteration, each cell with its
    paired overhead over weft-uninstrumented of the same param; the columns
    name the -O level too if with_opt."""
    heads = [p.replace(",", ", ").replace(", O", ", -O") if with_opt
             else p.rsplit(",", 1)[0].replace(",", ", ") for p in params]
    md = ["| variant | " + " | ".join(heads) + " |", "| --- |" + " ---: |" * len(params)]
    for impl in impls:
        def measured(r: dict) -> str:
            base = by.get((YP_BASE, r["param"]))
            c = sig3(r["median"])
            if base and base["median"] and r is not base:
                c += f" ({(paired_ratio(r, base) - 1) * 100:+.1f} %)"
            if noisy(r):
                c += " ⚠"
            if r["problems"]:
                c += f" ({len(r['problems'])} failed)"
            return c

        cells = [cell(by.get((impl, param)), measured) for param in params]
        name = f"**{impl}**" if is_weft(impl) else impl
        md.append(f"| {name} | " + " | ".join(cells) + " |")
    return md


def render(ctx: Ctx, rows: list[dict]) -> list[str]:
    data = ctx.data
    images = yieldpass_plots(ctx, rows)
    s = data["sections"]["yieldpass"]
    warmup = data["config"]["warmup_rounds"]
    md = ["", f"## {s['title']}", "", s["how"], "",
          f"Method: {warmup} warm-up + {s['rounds']} kept runs of every timed variant (the "
          "section keeps at least 5 in either set, for the 2 % target), interleaved; within "
          "a round the variants "
          "of one program, thread count and -O level run back to back, uninstrumented then "
          "flag 100 µs first, so the overheads below are the median of the per-round ratios "
          "to weft-uninstrumented (paired: this VM's speed drifts by tens of per cent over "
          "seconds). Runs last ~0.3-0.4 s: count does "
          f"{s['work']['count']:,} iterations in all, chase {s['work']['chase']:,}, sort "
          f"{s['work']['sort']:,}, less where an iteration costs more (counter mode on count "
          "and sort, thresholds ≤ 10, count and sort at -O0; the `work` of each run is in the "
          "results file). The intervals between yields "
          "come from one more run of each instrumented variant in the last round with "
          "`--intervals 1` (sort: flag 100 µs only): wrappers of the slow paths "
          "(`-Wl,--wrap`) record, per uthread, "
          "the time from getting the CPU back (its start, or the return from a slow path "
          "across which weft_stats()'s preempt_taken grew: the runtime yielded) to its next "
          "slow-path entry; slow paths that did not yield (a stale flag) are `ignored`. "
          f"This section took {s.get('seconds', 0):.0f} s.", "", images]
    timed = [r for r in rows if not r["param"].endswith(",intervals") and r["impl"] != YP_TIMER]
    by = {(r["impl"], r["param"]): r for r in timed}
    for opt in ("O2", "O0"):
        params = sorted({r["param"] for r in timed if r["param"].endswith("," + opt)
                         and not r["param"].startswith("sort,")}, key=yp_param_key)
        if not params:
            continue
        impls = sorted({r["impl"] for r in timed if r["param"] in params}, key=yp_order)
        md += ["", f"### -{opt}: ns per iteration (vs weft-uninstrumented, paired)", ""]
        md += yp_table(by, params, impls)
    sort_params = sorted({r["param"] for r in timed if r["param"].startswith("sort,")},
                         key=yp_param_key)
    if sort_params:
        ovs = targets.overheads(data)
        md += ["", "### A small real program: sort", "",
               "The overhead on a small real program compiled with the pass has no number to "
               "meet, so it is reported here and not among the targets. "
               "Flag mode at a 100 µs quantum over weft-uninstrumented (paired median of the "
               "per-round ratios):", "",
               "| sort | weft-flag-100us | weft-uninstrumented | overhead |",
               "| --- | ---: | ---: | ---: |"]
        for o in ovs:
            if "why" in o:
                md.append(f"| {o['text']} | {o['why']} | | |")
                continue
            md.append(f"| {o['text']} | {sig3(o['median'])} {o['unit']} | "
                      f"{sig3(o['base_median'])} {o['unit']} | "
                      f"**{(o['ratio'] - 1) * 100:+.1f} %**{' (noisy)' if o['noisy'] else ''} |")
        impls = sorted({r["impl"] for r in timed if r["param"] in sort_params}, key=yp_order)
        md += ["", "Every sort variant, ns per element (vs weft-uninstrumented, paired):", ""]
        md += yp_table(by, sort_params, impls, with_opt=True)
    ivs = sorted([r for r in rows if r["param"].endswith(",intervals")],
                 key=lambda r: (yp_param_key(r["param"]), yp_order(r["impl"])))
    timer = yp_timer(rows)
    late = max(timer["samples"]) if timer else None
    if ivs:
        md += ["", "### Intervals between yields (µs, wall clock; one recorded run each)", "",
               "| variant | param | p50 | p99 | max | max, CPU time | yields | ignored |",
               "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for r in ivs:
            param = r["param"].rsplit(",", 1)[0]
            if r["missing"] or not r["median"]:
                why = why_no_result(r)
                md.append(f"| {r['impl']} | {param} | {'missing' if r['missing'] else '**failed**'}"
                          f" | | | | | {why} |")
                continue
            q = yp_quantum_us(r["impl"])
            mx = max(r["samples"])
            mx_txt = yp_us(mx) + (f" ({mx / q:.{1 if mx < 10 * q else 0}f} Q)" if q else "")
            cpu = detail_median(r, "max_cpu")
            if q and late is not None and 2 * q < mx <= 2 * q + late and cpu and cpu >= 0.9 * mx:
                mx_txt += " †"
            md.append(f"| **{r['impl']}** | {param} | {yp_us(detail_median(r, 'p50'))} | "
                      f"{yp_us(detail_median(r, 'p99'))} | {mx_txt} | {yp_us(cpu)} | "
                      f"{fmt_detail(r, 'yields')} | {fmt_detail(r, 'ignored')} |")
        md += ["", "Q = the quantum. Wall clock includes any time the kernel or the "
                   "hypervisor took the vcore's CPU; “max, CPU time” (flag mode) counts "
                   "the vcore thread's CPU time instead (CLOCK_THREAD_CPUTIME_ID), so a "
                   "long wall-clock max with a short CPU-time one was the machine, not weft. "
                   "Percentiles from a log-linear histogram (3 % resolution); below 0.1 µs "
                   "they are the clock reads' own granularity."]
        if timer:
            md += ["", f"This machine's timer, measured in the same run (kernel-timer, last "
                       f"round): {fmt_detail(timer, 'sleeps')} sleeps of "
                       f"{s.get('timer_sleep_us', 50)} µs, the ticker's sleep at a 100 µs "
                       "quantum, made as the ticker makes it (an absolute FUTEX_WAIT_BITSET "
                       "deadline, 1 ns of timer slack) on one CPU while a thread spins on "
                       "another, woke late by "
                       f"{yp_us(detail_median(timer, 'p50'))} µs at the median, "
                       f"{yp_us(detail_median(timer, 'p99'))} µs at p99, "
                       f"{yp_us(detail_median(timer, 'p999'))} µs at p99.9 and "
                       f"**{yp_us(late)} µs at most**. The ticker looks twice a quantum and flags a run 1 to 1.5 Q "
                       "after it began, so a look that wakes late flags the run that much "
                       "later. † marks a flag-mode max above 2 Q but within 2 Q + the timer's "
                       "max lateness, with a CPU-time max within 10 % of it (the guest kernel left the "
                       "vcore its CPU): its excess over 2 Q is the ticker woken late, as this machine's "
                       "timer wakes a sleeper late, not weft. The target stays 2 Q."]
            spin = detail_median(timer, "spin_max")
            if spin is not None:
                md += ["", f"Meanwhile the spinner, which never sleeps and reads the clock in "
                           f"a loop, saw its clock jump by up to **{yp_us(spin)} µs** between "
                           f"two reads ({fmt_detail(timer, 'spin_over200')} jumps over 200 µs "
                           f"in {detail_median(timer, 'spin_s') or 0:.1f} s)"
                           + (": this VM's CPUs themselves stop for that long now and then, "
                              "unseen by the guest's CPU-time clocks, so no mechanism in the "
                              "guest, a spinning dispatcher included, can hold every interval "
                              "under 2 Q of 100 µs here." if spin > 200 else
                              ": in this run the VM stopped a busy CPU for no longer than that "
                              "(such stops come and go: they reached milliseconds in other "
                              "runs).")]
        elif any(r["impl"] == YP_TIMER for r in rows):
            t = next(r for r in rows if r["impl"] == YP_TIMER)
            why = why_no_result(t)
            md += ["", f"This machine's timer lateness (kernel-timer): not measured ({why})."]
    bad = [r for r in rows if r["problems"]]
    if bad:
        md += ["", "Failed runs:"] + [
            f"- {r['impl']} {r['param']}: {len(r['problems'])} of {len(r['problems']) + len(r['samples'])}"
            f" failed; first: {r['problems'][0]}" for r in bad]
    missing = sorted({r["missing"] for r in rows if r["missing"]})
    if missing:
        md += ["", "Missing variants: " + "; ".join(missing)]
    md += ["", f"Unit: {s['unit_note']}.", "", f"Pinning: {s['pinning']}"]
    return md



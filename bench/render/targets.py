"""targets.py — the targets of bench/targets.toml evaluated against a run,
and their markdown (the table, then what is known about the ones not met).
A target or limit may compare another quantity of its rows than their
value (`metric`, see METRICS)."""

from __future__ import annotations

import statistics
import tomllib

from benchlib import ROOT, spread

from render.common import best, better_ratio, fmt_qty, fmt_ratio, noisy, paired_ratio, sig3

TARGETS_FILE = ROOT / "bench" / "targets.toml"


def load() -> dict:
    with TARGETS_FILE.open("rb") as f:
        return tomllib.load(f)


def _as_row(r: dict, samples: list[float], unit: str, better: str) -> dict:
    """r with other samples in place of its values (median, spread, unit, better)."""
    return {**r, "samples": samples, "median": statistics.median(samples) if samples else None,
            "spread": spread(samples), "unit": unit, "better": better}


def _rss(r: dict) -> dict:
    """A ring row's max RSS per kept run, in bytes (lower is better)."""
    return _as_row(r, [m * (1 << 20) for m in r.get("rss_mib") or []], "B", "lower")


def _create_total(r: dict) -> dict:
    """A memory-per-idle-thread row's time to create all its threads, per kept run
    (create_ns × threads), in seconds (lower is better)."""
    t = int(r["param"].split("threads=")[1])
    return _as_row(r, [float(d["create_ns"]) * t / 1e9 for d in r.get("details") or []
                       if "create_ns" in d], "s", "lower")


# metric name -> the row as that quantity (no metric: the row's own values)
METRICS = {"rss": _rss, "create_total": _create_total}


def matching(data: dict, section: str, impl: str, param: str | None,
             metric: str | None = None) -> list[dict]:
    """Every row of impl (a trailing * matches any suffix) and param (None: any),
    as the metric's quantity if one is named."""
    rows = [r for r in data["rows"] if r["section"] == section and param in (None, r["param"])
            and (r["impl"].startswith(impl[:-1]) if impl.endswith("*") else r["impl"] == impl)]
    return [METRICS[metric](r) for r in rows] if metric else rows


def one_run(*rows: dict) -> bool:
    """A row with a single kept run: its spread is unknown."""
    return any(len(r["samples"]) == 1 for r in rows)


def evaluate(data: dict, spec: dict | None = None) -> list[dict]:
    spec = spec or load()
    ncpu = str(len(data["machine"]["affinity_cpus"]))
    out = []
    for t in spec.get("target", []):
        text = t["text"].replace("{NCPU}", ncpu)
        section, param, metric = t["section"], t.get("param"), t.get("metric")
        if param is not None:
            param = param.replace("{NCPU}", ncpu)
        w = best(matching(data, section, t["weft"].replace("{NCPU}", ncpu), param, metric))
        peers = [r for p in t["peers"]
                 for r in matching(data, section, p.replace("{NCPU}", ncpu), param, metric)]
        p = best(peers)
        if not (w and p):
            why = "no weft result" if not w else "no peer result"
            out.append({"target": text, "status": "cannot tell", "why": why})
            continue
        if t.get("paired"):   # the median of per-round ratios, turned "weft better above 1"
            pr = paired_ratio(w, p)
            ratio = 1 / pr if w["better"] == "lower" else pr
        else:
            ratio = better_ratio(w, p)
        out.append({"target": text, "status": "met" if ratio >= t["at_least"] else "not met",
                    "ratio": ratio, "bound": t["at_least"], "noisy": noisy(w, p),
                    "one_run": one_run(w, p),
                    "peer": p["impl"], "weft_median": w["median"], "peer_median": p["median"],
                    "unit": w["unit"], "source": t.get("source", "")})
    for mono in spec.get("monotone", []):
        rows = [next(iter(matching(data, mono["section"], mono["weft"],
                                   f"{mono['param_prefix']}{k}")), None)
                for k in range(mono["classes"])]
        if not all(r and r["median"] for r in rows):
            out.append({"target": mono["text"], "status": "cannot tell",
                        "why": "a class has no weft result"})
            continue
        meds = [r["median"] for r in rows]
        bad = [k for k in range(1, len(meds)) if meds[k] < meds[k - 1]]
        out.append({"target": mono["text"], "status": "not met" if bad else "met",
                    "order": meds, "out_of_order": bad, "noisy": noisy(*rows),
                    "unit": rows[0]["unit"], "source": mono.get("source", "")})
    for lim in spec.get("limit", []):
        rows = matching(data, lim["section"], lim["weft"], lim.get("param"), lim.get("metric"))
        w = next((r for r in rows if r["median"] is not None), None)
        if not w:
            out.append({"target": lim["text"], "status": "cannot tell", "why": "no weft result"})
            continue
        v = max(w["samples"]) if lim.get("of") == "max" else w["median"]
        out.append({"target": lim["text"], "status": "met" if v <= lim["at_most"] else "not met",
                    "limit": lim["at_most"], "noisy": noisy(w), "one_run": one_run(w),
                    "weft_median": v, "unit": w["unit"], "source": lim.get("source", "")})
    return out


def overheads(data: dict, spec: dict | None = None) -> list[dict]:
    """The [[overhead]] entries measured: the paired ratio of impl to its base, or why not."""
    spec = spec or load()
    out = []
    for o in spec.get("overhead", []):
        r = next(iter(matching(data, o["section"], o["impl"], o["param"])), None)
        base = next(iter(matching(data, o["section"], o["base"], o["param"])), None)
        if not (r and r["median"] and base and base["median"]):
            out.append({"text": o["text"], "why": "not run" if not (r and base) else "no result"})
            continue
        out.append({"text": o["text"], "ratio": paired_ratio(r, base), "median": r["median"],
                    "base_median": base["median"], "unit": r["unit"], "noisy": noisy(r, base)})
    return out


def limit_value(t: dict) -> str:
    """A limit's weft value in the one number format, or to a tenth when that
    format cannot tell it from the limit (4,096.2 B against 4.00 KiB)."""
    v = fmt_qty(t["weft_median"], t["unit"])
    return f"{t['weft_median']:,.1f} {t['unit']}" if v == fmt_qty(t["limit"], t["unit"]) else v


def markdown(tgts: list[dict], spec: dict | None = None) -> list[str]:
    spec = spec or load()
    md = ["| target | status | ratio (weft better above 1) | weft | peer | why this target |",
          "| --- | --- | ---: | ---: | ---: | --- |"]
    for t in tgts:
        if t["status"] == "cannot tell":
            md.append(f"| {t['target']} | cannot tell ({t['why']}) | | | | |")
            continue
        status = (f"{t['status']} (noisy ⚠)" if t["noisy"] else
                  f"{t['status']} (one run)" if t.get("one_run") else f"**{t['status']}**")
        if "order" in t:
            order = ", ".join(fmt_qty(v, t["unit"]) for v in t["order"])
            md.append(f"| {t['target']} | {status} | by class: {order} | | — | {t['source']} |")
            continue
        weft = limit_value(t) if "limit" in t else fmt_qty(t["weft_median"], t["unit"])
        if "limit" in t:
            md.append(f"| {t['target']} | {status} | {weft} (needs ≤ "
                      f"{fmt_qty(t['limit'], t['unit'])}) | {weft} | — | {t['source']} |")
            continue
        md.append(f"| {t['target']} | {status} | {fmt_ratio(t['ratio'])} (needs ≥ "
                  f"{fmt_ratio(t['bound'])}) | {weft} | {t['peer']} "
                  f"{fmt_qty(t['peer_median'], t['unit'])} | {t['source']} |")
    short = [t for t in tgts if t["status"] == "not met"]
    if short:
        md += ["", "Where weft falls short: " + "; ".join(
            f"{t['target']} ({limit_value(t)})" if "limit" in t
            else f"{t['target']} (classes out of order: {t['out_of_order']})" if "order" in t
            else f"{t['target']} ({sig3(t['ratio'])}×)" for t in short) + "."]
        whys = [w["text"] for w in spec.get("why_short", [])
                if any(t["target"].startswith(w["prefix"]) for t in short)]
        if whys:
            md += ["", "Why, as far as it is understood:"] + [f"- {w}" for w in whys]
    return md

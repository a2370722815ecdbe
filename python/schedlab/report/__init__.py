"""`schedlab report DIR`: PNG and SVG figures in DIR/report/ and one self-contained HTML file
(inline SVG and CSS, no script, no external file) that opens offline."""

from __future__ import annotations

import html as _html
import io
import math
import re
import time
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pandas as pd

from schedlab.command import callable_module
from schedlab.files import atomic_file
from schedlab.report.plots import (
    METRICS,
    PLOTTERS,
    STYLE,
    Context,
    Plot,
    confidence_of,
    keys_sharing_runs,
    percent_of,
    tag_figure,
)
from schedlab.stats import t_interval
from schedlab.store import load_results
from schedlab.summary_rows import ONE_SHOT_METHOD, ONE_SHOT_TEXT, UNTRUSTED_MARK, significant
from schedlab.vocabulary import SUMMARY_UNITS, quoted, spec_error
from schedlab.worlds import SIMULATED

__all__ = ["make_report", "report_context", "world_gap", "share_gap", "class_shares",
           "unprecise_runs"]

OPTIONAL_PLOTS = ("load_series", "balance")


def _config(manifest: dict[str, Any]) -> Any:
    from schedlab.experiment import ReportFields

    return ReportFields.model_validate(manifest.get("experiment", {}).get("report", {}))


def report_context(res: Any) -> Context:
    """What every plot of a results directory's report is drawn from: the results, the
    file's [report] table, the sweep key on the x axis and the point of per-point plots."""
    cfg = _config(res.manifest)
    keys = res.sweep_keys
    x = cfg.x if cfg.x in keys else (keys[0] if keys else None)
    npoints = max(len(res.manifest.get("points") or [{}]), 1)
    point = cfg.point if cfg.point is not None and 0 <= cfg.point < npoints else npoints - 1
    return Context(res=res, cfg=cfg, x=x, point=point)


def make_report(directory: str | Path, html: str | Path | None = None,
                text: bool = False) -> Path | str:
    """Draws every plot the experiment asks for; returns the HTML file's path. With
    `text=True` draws nothing and writes nothing: returns the report's tables as text."""
    if not isinstance(text, bool):
        raise spec_error("text", quoted(text), "true or false")
    if text:
        if html is not None:
            raise spec_error("html", quoted(html), "nothing beside text = true (the text "
                             "report writes no file)")
        return report_text(directory)
    res = load_results(directory)
    if html is not None:  # refused before any figure is drawn; its directory is made with it
        from schedlab.files import check_writable

        check_writable("html", html, (".html", ".htm"))
    fig_dir = Path(directory) / "report"
    out = Path(html) if html else Path(directory) / "report.html"
    # Refused before any figure is drawn: a file where the figures go, a directory where
    # the page goes.
    if fig_dir.exists() and not fig_dir.is_dir():
        raise spec_error("directory", quoted(str(directory)), f"a results directory whose "
                         f"report/ holds the figures ({fig_dir} is a file: move it away)")
    if out.is_dir():
        raise spec_error("html", quoted(str(out)), "a file to write the report's page to "
                         "(a directory is there)")
    ctx = report_context(res)
    cfg = ctx.cfg
    fig_dir.mkdir(exist_ok=True)
    plots: list[Plot] = []
    # Plots of data only some experiments have: left out quietly unless the file asks for them.
    explicit = "plots" in (res.manifest.get("experiment", {}).get("report") or {})
    for name in cfg.plots:
        with matplotlib.rc_context(STYLE):  # the report's look, the user's settings after it
            plot = _draw(name, ctx, fig_dir)
        if plot.figure is None and name in OPTIONAL_PLOTS and not explicit:
            continue
        plots.append(plot)
    traces = write_traces(res, ctx, fig_dir / "traces")
    text = _html_page(res, cfg, ctx, plots, traces)
    with atomic_file(out) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return out


def _draw(name: str, ctx: Context, fig_dir: Path) -> Plot:
    """Plot `name`, written as DIR/report/NAME.png and .svg and kept inline for the page."""
    try:
        plot = PLOTTERS[name](ctx)
    except Exception as e:  # a plot that fails is a note, never a failed report
        return Plot(name, name, "", note=f"{name}: not drawn ({type(e).__name__}: {e})")
    if plot.figure is not None:
        tag_figure(plot.figure, name)  # ids for legends, swatches, marks, axis labels
        plot.figure.savefig(fig_dir / f"{name}.png")
        buf = io.StringIO()
        plot.figure.savefig(buf, format="svg")  # rendered once: the file and the page
        (fig_dir / f"{name}.svg").write_text(buf.getvalue(), encoding="utf-8")
        plot.svg = _inline_svg(buf.getvalue())  # type: ignore[attr-defined]
    return plot


# At most this many runs' schedules are written as Perfetto traces beside the report, each of
# at most TRACE_SLICES run segments (about 25 MB of JSON): a larger one is left to
# `schedlab.trace.write_trace(res.run_result(run), path)`, and the report says so.
TRACE_RUNS = 12
TRACE_SLICES = 100_000


@dataclass
class TraceFile:
    """A run's schedule written as a Chrome/Perfetto trace beside the report (`path` None:
    too large to write here)."""

    path: Path | None
    label: str
    slices: int


def write_traces(res: Any, ctx: Context, directory: Path) -> list[TraceFile]:
    """The stored schedules (experiment.keep_schedule) as Perfetto trace files: the runs of
    the report's point first, then the others, at most TRACE_RUNS."""
    from schedlab.trace import write_trace

    s = res.summaries
    if s.empty:
        return []
    ordered = pd.concat([s[s["point"] == ctx.point], s[s["point"] != ctx.point]])
    out: list[TraceFile] = []
    for _, row in ordered.drop_duplicates("run").iterrows():
        if len(out) >= TRACE_RUNS:
            break
        if not (res.dir / "runs" / f"{row['run']}.schedule.parquet").exists():
            continue
        result = res.run_result(row["run"])
        if result.schedule.empty:
            continue
        coords = ", ".join(f"{k}={row[k]}" for k in res.sweep_keys)
        label = (f"{row['label']} [{row['world']}]" + (f" ({coords})" if coords else "")
                 + f", replication {row['replication']}")
        if len(result.schedule) > TRACE_SLICES:
            out.append(TraceFile(None, f"{label} (run {row['run']})", len(result.schedule)))
            continue
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{row['run']}.json"
        meta = write_trace(result, path)
        out.append(TraceFile(path, label, int(meta["slices"])))
    return out


def _inline_svg(svg: str) -> str:
    """An SVG document as an element: no XML prolog, scales with the page."""
    svg = re.sub(r"^.*?(<svg\b)", r"\1", svg, count=1, flags=re.S)
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, count=1, flags=re.S)
    return re.sub(r"<svg\b", '<svg class="plot" role="img" preserveAspectRatio="xMidYMid meet"',
                  svg, count=1)


CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto;
       max-width: 1100px; padding: 1.5em; color: #222; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; }
th { background: #f4f4f4; } td.l, th.l { text-align: left; }
figure { margin: 1.5em 0; } figcaption { color: #555; font-size: 13px; max-width: 900px; }
svg.plot { max-width: 100%; height: auto; display: block; }
.notes li { color: #8a5300; } .meta td { text-align: left; }
.off { color: #b00; } .ok { color: #070; }
p.flat { color: #444; background: #f6f6f6; border-left: 4px solid #bbb; padding: 0.6em 0.9em;
         max-width: 900px; }
.warning { color: #7a2e00; background: #fff4e5; border-left: 4px solid #d9480f;
           padding: 0.6em 0.9em; }
"""


def _num(v: Any, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    if isinstance(v, float):
        return significant(v, digits)
    return str(v)


def _e(v: Any) -> str:
    return _html.escape(str(v))


PERCENTILES = ("response_p50", "response_p95", "response_p99")


def _inside(r: Any) -> bool:
    """Whether the theory lies in the row's interval (which may be asymmetric)."""
    return bool(pd.notna(r["ci_low"]) and pd.notna(r["ci_high"])
                and r["ci_low"] <= r["theory"] <= r["ci_high"])


def _untrusted(r: Any, prefix: str = "") -> bool:
    """Whether a stats row's interval is one run's own from a run too short to find
    uncorrelated batches (docs/statistics.md: not to be trusted)."""
    flag = r.get(prefix + "uncorrelated") if hasattr(r, "get") else None
    return isinstance(flag, bool | np.bool_) and not flag


UNTRUSTED_NOTE = (f"<p class=\"untrusted\"><small>{UNTRUSTED_MARK} An interval from one run too "
                  "short to find uncorrelated batches (<code>ci_uncorrelated = false</code>): "
                  "not to be trusted; a longer run or replications give one that is "
                  "(docs/statistics.md).</small></p>")


ONE_SHOT_NOTE = (f'<p class="one-shot"><small>{_html.escape(ONE_SHOT_METHOD)}: '
                 f"{_html.escape(ONE_SHOT_TEXT)}.</small></p>")


def _bounds(low: Any, high: Any) -> str:
    """An interval as every table of the report writes it: `[low, high]`; "–" without one."""
    if pd.isna(low) or pd.isna(high) or not math.isfinite(low + high):
        return "–"
    return f"[{_num(low)}, {_num(high)}]"


def _interval(r: Any) -> str:
    bounds = _bounds(r["ci_low"], r["ci_high"])
    return bounds + (UNTRUSTED_MARK if bounds != "–" and _untrusted(r) else "")


def _vs_theory(r: Any) -> str:
    theory = r["theory"]
    if not (pd.notna(theory) and theory):
        return ""
    rel = (r["mean"] - theory) / theory
    inside = _inside(r)
    return (f'<span class="{"ok" if inside else "off"}">{100 * rel:+.1f}%'
            f'{" (theory inside CI)" if inside else ""}</span>')


def _percentile_cell(r: Any | None) -> str:
    """A percentile, its interval and its theory in one cell."""
    if r is None or pd.isna(r["mean"]):
        return "–"
    cell = _num(r["mean"])
    if pd.notna(r["ci_low"]) and pd.notna(r["ci_high"]):
        cell += f" {_interval(r)}"
    if pd.notna(r["theory"]):
        inside = _inside(r)
        cell += (f'<br><small class="{"ok" if inside else "off"}">theory {_num(r["theory"])}'
                 f'{" inside" if inside else ""}</small>')
    return cell


def _response_table(res: Any) -> str:
    st = res.metric("response_mean")
    if st.empty:
        return "<p>No response times in the results.</p>"
    keys = res.sweep_keys
    multi_world = st["world"].nunique() > 1
    conf = percent_of(res)  # 99.5%, not 100%
    # Percentile columns once the stats table has their intervals (one run's sectioning, or
    # replications).
    tails = {m: res.metric(m).set_index(["world", "point", "label"]) for m in PERCENTILES}
    tails = {m: t for m, t in tails.items() if not t.empty and t["ci_low"].notna().any()}
    unit = res.time_unit  # ms, or the file's unit (xv6's ticks)
    head = ((["world"] if multi_world else []) + keys
            + ["policy", f"mean ({unit})", f"{conf} CI ({unit})", "n", "method",
               f"theory ({unit})", "vs theory"]
            + [f"{m.removeprefix('response_')} [{conf} CI] ({unit})" for m in tails])
    rows = []
    shared = _keys_not_changing_runs(res)
    shown: set[tuple] = set()
    for _, r in st.iterrows():
        # A policy the sweep key does not touch (FCFS beside RR's swept quantum) runs once for
        # all its values: one row, "all" in that key's column, instead of one copy per value.
        same = shared.get((r["world"], r["label"]), set())
        row_key = (r["world"], r["label"], *(None if k in same else r[k] for k in keys))
        if row_key in shown:
            continue
        shown.add(row_key)
        left = (([r["world"]] if multi_world else [])
                + ["all" if k in same else _num(r[k]) for k in keys] + [r["label"]])
        right = [_num(r["mean"]), _interval(r), str(r["n"]), _e(r["method"]),
                 _num(r["theory"]), _vs_theory(r)]
        at = (r["world"], r["point"], r["label"])
        right += [_percentile_cell(t.loc[at] if at in t.index else None) for t in tails.values()]
        rows.append("<tr>" + "".join(f'<td class="l">{_e(c)}</td>' for c in left)
                    + "".join(f"<td>{c}</td>" for c in right) + "</tr>")
    marked = any(_untrusted(r) for _, r in st.iterrows()) or any(
        _untrusted(r) for t in tails.values() for _, r in t.iterrows())
    one_shot = bool((st["method"] == ONE_SHOT_METHOD).any()) if "method" in st else False
    return ('<table class="response"><tr>' + "".join(f"<th>{_e(h)}</th>" for h in head)
            + "</tr>" + "".join(rows) + "</table>" + (UNTRUSTED_NOTE if marked else "")
            + (ONE_SHOT_NOTE if one_shot else ""))


def _keys_not_changing_runs(res: Any) -> dict[tuple[str, str], set[str]]:
    """Per (world, policy label), the sweep keys whose values all share its runs (the runner
    runs a spec once, and FCFS's spec has no RR quantum)."""
    s = res.summaries
    keys = [k for k in res.sweep_keys if k in s]
    if "run" not in s or not keys:
        return {}
    fixed = ["replication"] if "replication" in s else []
    return {(world, label): keys_sharing_runs(g, keys, fixed)
            for (world, label), g in s.groupby(["world", "label"], sort=False)}


def unprecise_runs(res: Any) -> pd.DataFrame:
    """Runs until precise (`precision` set) that stopped at their cap before the mean
    response's interval was as narrow as asked: world, point, label, replication, run, the
    target `precision` and the `response_mean_precision` obtained."""
    cols = ["world", "point", "label", "replication", "run", "precision",
            "response_mean_precision"]
    s = res.summaries
    if s.empty or not {"precision_reached", "precision"} <= set(s.columns):
        return pd.DataFrame(columns=cols)
    # None where no precision was asked: only an explicit False is a miss.
    missed = s["precision_reached"].map(lambda v: v is not None and not pd.isna(v)
                                        and not bool(v))
    target = pd.to_numeric(s["precision"], errors="coerce")
    out = s[missed & target.notna()]
    if "response_mean_precision" not in out:
        out = out.assign(response_mean_precision=math.nan)
    return out[cols].reset_index(drop=True)


MAX_NAMED = 20  # runs named in the warning; the rest are counted


def _precision_html(res: Any) -> str:
    bad = unprecise_runs(res)
    if bad.empty:
        return ""
    points = res.manifest.get("points") or [{}]
    several = (res.summaries["replication"].nunique() > 1) if "replication" in res.summaries \
        else False
    named = []
    for _, r in bad.head(MAX_NAMED).iterrows():
        pi = int(r["point"])
        coords = ", ".join(f"{k} = {_fmt_v(v)}" for k, v in
                           (points[pi] if pi < len(points) else {}).items())
        where = f"{r['world']}, {r['label']}, point {pi}" + (f" ({coords})" if coords else "")
        if several:
            where += f", replication {int(r['replication'])}"
        got = r["response_mean_precision"]
        got_text = f"{100 * got:.3g}%" if pd.notna(got) else "unknown"
        named.append(f"{where}: {got_text} obtained, {100 * float(r['precision']):.3g}% asked")
    more = len(bad) - len(named)
    return ('<p class="warning" id="precision-warning"><b>Not as precise as asked:</b> '
            f"{len(bad)} run{'s' if len(bad) > 1 else ''} reached its cap "
            "(<code>max_jobs</code>; <code>max_time</code> in the server world) before "
            "the mean response's interval was as narrow as <code>precision</code> asks "
            "(half-width over mean); their intervals are wider than the target. "
            + _e("; ".join(named)) + (f"; and {more} more" if more > 0 else "") + ".</p>")


def noisy_runs(res: Any) -> pd.DataFrame:
    """Real runs the noise gate flagged (`noisy`: others used more of the run's CPUs than
    `noise_threshold`, the hypervisor stole them, or the machine stalled under a job) and
    kept: world, point, label, replication, run, `foreign_fraction`, `steal_fraction` and the
    reasons."""
    cols = ["world", "point", "label", "replication", "run", "foreign_fraction",
            "steal_fraction", "noise_reasons"]
    s = res.summaries
    if s.empty or "noisy" not in s.columns:
        return pd.DataFrame(columns=cols)
    flagged = s[s["noisy"].map(lambda v: isinstance(v, bool | np.bool_) and bool(v))]
    for c in cols:
        if c not in flagged:
            flagged = flagged.assign(**{c: math.nan})
    return flagged[cols].reset_index(drop=True)


def _not_success_html(res: Any) -> str:
    """Server runs some of whose requests were answered with an error (503 from a full
    server, 403, 404): those are counted, not measured (`schedlab.server.served`)."""
    from schedlab.summary_rows import not_success

    s = res.summaries
    if s.empty or "status" not in s.columns:
        return ""
    named = [f"{r['world']}, {r['label']}, point {int(r['point'])}, replication "
             f"{int(r['replication'])}: {failed}"
             for _, r in s.iterrows() if r.get("world") == "server"
             and (failed := not_success(r.to_dict()))]
    if not named:
        return ""
    more = len(named) - MAX_NAMED
    return ('<p class="warning" id="not-success-warning"><b>Requests not served:</b> '
            f"{len(named)} server run{'' if len(named) == 1 else 's'} had answers that were "
            "not success; those requests are "
            "counted in <code>status</code>, not measured, and the numbers are of the files "
            "served. " + _e("; ".join(named[:MAX_NAMED]))
            + (f"; and {more} more" if more > 0 else "") + ".</p>")


def _noisy_html(res: Any) -> str:
    bad = noisy_runs(res)
    if bad.empty:
        return ""
    total = int((res.summaries["world"].isin(set(bad["world"]))).sum())
    named = []
    for _, r in bad.head(MAX_NAMED).iterrows():
        share, reasons = r["foreign_fraction"], r["noise_reasons"]
        why = ("; ".join(reasons) if isinstance(reasons, list | np.ndarray) and len(reasons)
               else "others used " + (f"{100 * share:.1f}%" if pd.notna(share)
                                      else "an unknown share") + " of its CPUs")
        named.append(f"{r['world']}, {r['label']}, point {int(r['point'])}, replication "
                     f"{int(r['replication'])}: {why}")
    more = len(bad) - len(named)
    return ('<p class="warning" id="noisy-warning"><b>Measured on a busy machine:</b> '
            f"{len(bad)} of {total} real runs were flagged noisy (others' CPU time above "
            "<code>noise_threshold</code> of the run's CPUs, steal, or a stall of the machine "
            "under a job) and kept; their numbers include other work's interference. "
            "<code>retry_noisy</code> reruns such a run (os and server worlds) and, in the os "
            "world, <code>quiet_wait</code> waits for a quiet machine first (docs/os.md). "
            + _e("; ".join(named))
            + (f"; and {more} more" if more > 0 else "") + ".</p>")


# ---------------------------------------------------------------------------------------------
# Worlds side by side
# ---------------------------------------------------------------------------------------------


def _reference(worlds: list[str]) -> str:
    return "sim" if "sim" in worlds else worlds[0]


def _pairs(worlds: list[str]) -> list[tuple[str, str]]:
    """(reference, world) pairs of the gap table: each real world against each model (the
    ideal and the calibrated), or the models against the first when no real world ran."""
    models = [w for w in worlds if w in SIMULATED]
    reals = [w for w in worlds if w not in SIMULATED]
    if not models or not reals:
        return [(worlds[0], w) for w in worlds[1:]]
    return [(m, r) for r in reals for m in models]


def _worlds(res: Any) -> list[str]:
    return list(res.manifest.get("worlds") or dict.fromkeys(res.summaries.get("world", [])))


def _skip_reasons(res: Any) -> dict[tuple[str, int, str], str]:
    """(world, point, label) -> the reason its runs were not made."""
    out: dict[tuple[str, int, str], str] = {}
    sk = res.skipped
    if sk is None or sk.empty:
        return out
    for (world, point, label), g in sk.groupby(["world", "point", "label"], sort=False):
        reasons = list(dict.fromkeys(f"{w}: {r}" if w != "no model" else r
                                     for w, r in zip(g["what"], g["reason"], strict=True)))
        out[(world, int(point), label)] = "; ".join(reasons)
    return out


def world_gap(res: Any, metric: str = "response_mean") -> pd.DataFrame:
    """The gap between each world and the reference world (sim when it ran) for one metric:
    one row per world x point x policy, with both means, their intervals (half-widths, and
    the bounds as the stats table has them: stopped at 0 for a summary's number), the absolute
    and relative difference, whether the intervals overlap, and why a side is missing."""
    worlds = _worlds(res)
    cols = ["world", "reference", "point", *res.sweep_keys, "label", "ref_mean", "ref_half_width",
            "ref_ci_low", "ref_ci_high", "ref_n", "mean", "half_width", "ci_low", "ci_high", "n",
            "diff", "rel_diff", "overlap", "ref_skipped",
            "skipped", "paired", "diff_half_width", "ref_uncorrelated", "uncorrelated"]
    if len(worlds) < 2:
        return pd.DataFrame(columns=cols)
    st = res.metric(metric).set_index(["world", "point", "label"])
    skips = _skip_reasons(res)
    points = res.manifest.get("points") or [{}]
    replays = res.manifest.get("replays") or {}
    confidence = confidence_of(res)
    rows = []
    for ref, world in _pairs(worlds):
        # A model that replays this world's runs ran on the same requests: the gap's interval
        # comes from the per-replication differences, not from two independent intervals.
        paired = _paired_differences(res, metric, ref, world) \
            if replays.get(ref) == world or replays.get(world) == ref else None
        for pi, coords in enumerate(points):
            for label in res.labels:
                a = st.loc[(ref, pi, label)] if (ref, pi, label) in st.index else None
                b = st.loc[(world, pi, label)] if (world, pi, label) in st.index else None
                ra, rb = skips.get((ref, pi, label)), skips.get((world, pi, label))
                if a is None and b is None and ra is None and rb is None:
                    continue
                row: dict[str, Any] = {"world": world, "reference": ref, "point": pi,
                                       **{k: coords.get(k) for k in res.sweep_keys},
                                       "label": label, "ref_skipped": ra, "skipped": rb}
                for prefix, s in (("ref_", a), ("", b)):
                    row[prefix + "mean"] = float(s["mean"]) if s is not None else math.nan
                    for k in ("half_width", "ci_low", "ci_high"):
                        row[prefix + k] = float(s[k]) if s is not None else math.nan
                    row[prefix + "n"] = int(s["n"]) if s is not None else 0
                    row[prefix + "uncorrelated"] = not (s is not None and _untrusted(s))
                diff = row["mean"] - row["ref_mean"]
                row["diff"] = diff
                row["rel_diff"] = diff / row["ref_mean"] if row["ref_mean"] else math.nan
                # Do the intervals printed share a point? By their bounds: one run's may be
                # uneven about its mean (skewness) or cut at 0, where half-widths mislead.
                # Without finite bounds on both sides overlap is unknown: None.
                bounds = (row["ref_ci_low"], row["ref_ci_high"], row["ci_low"], row["ci_high"])
                row["overlap"] = (bool(row["ci_low"] <= row["ref_ci_high"]
                                       and row["ref_ci_low"] <= row["ci_high"])
                                  if all(math.isfinite(x) for x in bounds) else None)
                row["paired"] = paired is not None
                row["diff_half_width"] = math.nan
                d = paired.get((pi, label)) if paired is not None else None
                if d is not None and len(d):
                    iv = t_interval(d, confidence)
                    row["diff_half_width"] = iv.half_width
                    # Paired: does the gap's interval hold 0 (unknown from one pair)?
                    row["overlap"] = bool(abs(iv.mean) <= iv.half_width) \
                        if math.isfinite(iv.half_width) else None
                rows.append(row)
    return pd.DataFrame(rows, columns=cols)


def _paired_differences(res: Any, metric: str, ref: str,
                        world: str) -> dict[tuple[int, str], list[float]]:
    """(point, label) -> world minus ref, replication by replication (a replay and the run
    it replays share point, policy and replication)."""
    s = res.summaries
    if s.empty or metric not in s:
        return {}
    wide = s[s["world"].isin([ref, world])].pivot_table(
        index=["point", "label", "replication"], columns="world", values=metric,
        aggfunc="first")
    if ref not in wide or world not in wide:
        return {}
    d = (wide[world] - wide[ref]).dropna()
    return {(int(p), str(lab)): g.tolist() for (p, lab), g in d.groupby(level=[0, 1])}


def class_shares(res: Any) -> pd.DataFrame:
    """CPU share of each task class over the contended interval (the sum over its tasks) and
    its entitlement, per world, point and policy: the mean over replications. Indexed by
    (world, point, label, class); empty without per-task shares."""
    tasks = res.tasks
    if tasks.empty or not {"share", "entitled", "class"} <= set(tasks.columns):
        return pd.DataFrame(columns=["share", "entitled"])
    tasks = tasks.assign(**{"class": tasks["class"].astype(str)})
    per_run = tasks.groupby(["world", "point", "label", "replication", "class"], sort=False) \
        .agg(share=("share", "sum"), entitled=("entitled", lambda x: x.sum(min_count=1)))
    return per_run.groupby(level=["world", "point", "label", "class"], sort=False).mean()


def share_gap(res: Any) -> pd.DataFrame:
    """CPU share of each task class in each world beside the reference world's, over the
    contended interval (mean over replications), with the entitlement."""
    worlds = _worlds(res)
    cols = ["world", "reference", "point", "label", "class", "ref_share", "share", "entitled",
            "diff"]
    per = class_shares(res)
    if len(worlds) < 2 or per.empty:
        return pd.DataFrame(columns=cols)
    nclasses = per.groupby(level=["world", "point", "label"]).size()
    ref = _reference(worlds)
    rows = []
    for (world, point, label, cls), r in per.iterrows():
        if world == ref or (ref, point, label, cls) not in per.index \
                or nclasses.get((world, point, label), 0) < 2:  # one class: its share is 1
            continue
        a = per.loc[(ref, point, label, cls)]
        if not (math.isfinite(r["share"]) and math.isfinite(a["share"])):
            continue
        ent = r["entitled"] if math.isfinite(r["entitled"]) else a["entitled"]
        rows.append({"world": world, "reference": ref, "point": int(point), "label": label,
                     "class": cls, "ref_share": float(a["share"]), "share": float(r["share"]),
                     "entitled": float(ent), "diff": float(r["share"] - a["share"])})
    return pd.DataFrame(rows, columns=cols)


def _class_shares_html(res: Any) -> str:
    """Each class's CPU share against its entitlement at every point, policy and world (the
    `share` plot shows one point, task by task): where two classes or more share the CPUs."""
    per = class_shares(res)
    if per.empty:
        return ""
    per = per[per["share"].groupby(level=["world", "point", "label"]).transform("size") >= 2]
    if per.empty:
        return ""
    points = res.manifest.get("points") or [{}]
    keys = res.sweep_keys
    rows = []
    for (world, point, label), g in per.groupby(level=["world", "point", "label"], sort=False):
        coords = points[int(point)] if int(point) < len(points) else {}
        cells = " · ".join(
            f"{_e(cls)} {100 * r['share']:.1f}"
            + (f" ({100 * r['entitled']:.1f})" if math.isfinite(r["entitled"]) else "")
            for (_, _, _, cls), r in g.iterrows())
        rows.append("<tr>" + "".join(f'<td class="l">{_e(_num(coords.get(k)))}</td>'
                                     for k in keys)
                    + f'<td class="l">{_e(label)}</td><td class="l">{_e(world)}</td>'
                    + f'<td class="l">{cells}</td></tr>')
    head = [*keys, "policy", "world", "CPU share by class, % (entitled %)"]
    return ('<h2 id="shares">CPU share by class</h2>'
            "<p>The CPU time each class of tasks received over the contended interval (while "
            "every task is present and keeps its behaviour), as a share of what all received, "
            "summed over the class's tasks, mean over replications; in brackets the share it "
            "is entitled to by its tickets or weights, a task capped at one CPU and entitled "
            "to nothing while it sleeps.</p>"
            '<table class="class-shares"><tr>' + "".join(f"<th>{_e(h)}</th>" for h in head)
            + "</tr>" + "".join(rows) + "</table>")


def _mean_ci(mean: float, low: float, high: float, skipped: str | None) -> str:
    """A mean and its interval `[low, high]` (a summary's number stops at 0, so its interval
    need not be symmetric); "–" where there is no mean, the reason where it was skipped."""
    if skipped and not math.isfinite(mean):
        return f'<span class="off">skipped: {_e(skipped)}</span>'
    if not math.isfinite(mean):
        return "–"
    bounds = _bounds(low, high)
    return _num(mean) + (f" {bounds}" if bounds != "–" else "")


def _diff_ci(diff: float, hw: float) -> str:
    """A paired difference and its t-interval's half-width (a difference may be negative)."""
    if not math.isfinite(diff):
        return "–"
    return _num(diff) + (f" ± {_num(hw, 3)}" if math.isfinite(hw) else "")


def _gap_html(res: Any, metrics: list[str]) -> str:
    """The "Worlds side by side" section: a gap table per metric of `[report] gap_metrics`,
    then the classes' CPU shares."""
    parts = []
    for metric in metrics:
        parts.extend(_metric_gap_html(res, metric))
    if not parts:
        return ""
    parts.insert(0, '<h2 id="worlds">Worlds side by side</h2>')
    parts.extend(_share_gap_html(res))
    return "\n".join(parts)


def _metric_gap_html(res: Any, metric: str) -> list[str]:
    gap = world_gap(res, metric)
    if gap.empty:
        return []
    keys = res.sweep_keys
    name = METRICS.get(metric, (metric.replace("_", " "), ""))[0]
    # The experiment's time unit (ms or tick) for times; a count or a ratio as it is.
    unit = re.sub(r"\bms\b", res.time_unit, SUMMARY_UNITS.get(metric, "ratio"))
    parts = [f'<p data-metric="{_e(metric)}">{_e(name[:1].upper() + name[1:])} of the same '
             "sweep point and policy in each world, with "
             "the confidence interval of each (in brackets; one run has none), the "
             "difference to the reference world and whether the intervals overlap. Where a "
             "model replays a real world's runs (<code>[worlds.W] replay</code>), both ran on "
             "the same requests, sent until the real run stopped sending: the difference has "
             "its own interval, from the replications' "
             "differences, and the last column says whether it holds 0.</p>"]
    marked = False
    conf = percent_of(res)  # 99.5%, not 100%
    for (ref, world), g in gap.groupby(["reference", "world"], sort=False):
        paired = bool(g["paired"].any())
        head = keys + ["policy", f"{ref}: mean [{conf} CI] ({unit})",
                       f"{world}: mean [{conf} CI] ({unit})",
                       f"{world} − {ref}" + (" ± CI (paired)" if paired else "") + f" ({unit})",
                       "relative", "CI of the gap holds 0" if paired else "CIs overlap"]
        rows = []
        for _, r in g.iterrows():
            doubtful = _untrusted(r, "ref_") or _untrusted(r)
            marked = marked or doubtful
            overlap = "–" if r["overlap"] is None or pd.isna(r["overlap"]) else (
                ("yes" if r["overlap"] else '<span class="off">no</span>')
                + (UNTRUSTED_MARK if doubtful and not r["paired"] else ""))
            rel = f"{100 * r['rel_diff']:+.1f}%" if math.isfinite(r["rel_diff"]) else "–"
            cells = [_mean_ci(r["ref_mean"], r["ref_ci_low"], r["ref_ci_high"],
                              r["ref_skipped"]) + (UNTRUSTED_MARK if _untrusted(r, "ref_") else ""),
                     _mean_ci(r["mean"], r["ci_low"], r["ci_high"], r["skipped"])
                     + (UNTRUSTED_MARK if _untrusted(r) else ""),
                     _diff_ci(r["diff"], r["diff_half_width"]), rel, overlap]
            rows.append("<tr>" + "".join(f'<td class="l">{_e(_num(r[k]))}</td>' for k in keys)
                        + f'<td class="l">{_e(r["label"])}</td>'
                        + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        parts.append(f'<table class="gap" data-metric="{_e(metric)}" data-world="{_e(world)}" '
                     f'data-reference="{_e(ref)}">'
                     "<tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>"
                     + "".join(rows) + "</table>")
        summary = _gap_summary(g, keys, ref, world)
        if summary:
            parts.append(f'<p class="gap-summary" data-metric="{_e(metric)}" '
                         f'data-world="{_e(world)}" data-reference="{_e(ref)}">'
                         f"{_e(summary)}</p>")
    if marked:
        parts.append(UNTRUSTED_NOTE)
    return parts


def _gap_summary(g: pd.DataFrame, keys: list[str], ref: str, world: str) -> str:
    """The relative gaps of one table in a sentence: median, largest (where), and how many
    rows lie within 5% and 10% ("" when no row has one)."""
    rel = g["rel_diff"].astype(float)
    ok = rel[rel.map(math.isfinite)].abs()
    if ok.empty:
        return ""
    worst = g.loc[ok.idxmax()]
    where = ", ".join([*(f"{k} = {_num(worst[k])}" for k in keys), str(worst["label"])])
    n = len(ok)
    return (f"|{world} − {ref}| / {ref}: median {100 * ok.median():.1f}%, largest "
            f"{100 * ok.max():.1f}% ({where}); within 5%: {int((ok <= 0.05).sum())} of {n}, "
            f"within 10%: {int((ok <= 0.10).sum())} of {n}.")


def _share_gap_html(res: Any) -> list[str]:
    parts: list[str] = []
    sg = share_gap(res)
    if not sg.empty:
        parts.append("<p>CPU share of each class over the contended interval (sum over its "
                     "tasks, mean of replications), against its entitlement.</p>")
        for world, g in sg.groupby("world", sort=False):
            ref = g["reference"].iloc[0]
            head = ["point", "policy", "class", "entitled", ref, world, f"{world} − {ref}"]
            rows = []
            for _, r in g.iterrows():
                pc = res.manifest.get("points") or [{}]
                coords = ", ".join(f"{k} = {_fmt_v(v)}" for k, v in pc[r["point"]].items())
                rows.append("<tr>" + "".join(f'<td class="l">{_e(c)}</td>' for c in
                                             (coords or "–", r["label"], r["class"]))
                            + "".join(f"<td>{_num(v, 3)}</td>" for v in
                                      (r["entitled"], r["ref_share"], r["share"], r["diff"]))
                            + "</tr>")
            parts.append(f'<table class="share-gap" data-world="{_e(world)}"><tr>'
                         + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>"
                         + "".join(rows) + "</table>")
    return parts


def _fmt_v(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _skipped_html(res: Any) -> str:
    sk = res.skipped
    if sk is None or sk.empty:
        return ""
    keys = [k for k in res.sweep_keys if k in sk.columns]
    rows = []
    for (world, what, reason), g in sk.groupby(["world", "what", "reason"], sort=False):
        pts = g.drop_duplicates(["point", "label"])
        where = "; ".join(", ".join([*(f"{k} = {_fmt_v(r[k])}" for k in keys), str(r["label"])])
                          for _, r in pts.iterrows())
        rows.append(f'<tr><td class="l">{_e(world)}</td><td>{len(g)}</td>'
                    f'<td class="l">{_e(where)}</td><td class="l">{_e(what)}</td>'
                    f'<td class="l">{_e(reason)}</td></tr>')
    return ('<h2 id="skipped">Runs not made</h2><p class="off">These runs were skipped, not '
            "measured: the world has no model of what they ask, or the machine forbids it. "
            "Their rows are missing from every table and plot.</p>"
            '<table class="skipped"><tr><th class="l">world</th><th>runs</th>'
            '<th class="l">points and policies</th><th class="l">what</th>'
            '<th class="l">reason</th></tr>' + "".join(rows) + "</table>")


def _notes_html(res: Any) -> str:
    notes = res.manifest.get("notes") or {}
    if not notes:
        return ""
    parts = ['<h2 id="translation">How each world read the file</h2><p>Keys a world has no '
             "key of are translated so that the file means the same workload, or dropped "
             "(see docs/experiments.md, several worlds):</p>"]
    for world, lines in notes.items():
        parts.append(f"<h3>{_e(world)}</h3><ul>" + "".join(f"<li>{_e(n)}</li>" for n in lines)
                     + "</ul>")
    return "\n".join(parts)


def _reps(m: dict[str, Any]) -> str:
    by = m.get("replications_by_world") or {}
    if len(set(by.values())) > 1:
        return "(" + ", ".join(f"{w} {n}" for w, n in by.items()) + ")"
    return str(m.get("replications"))


def _html_page(res: Any, cfg: Any, ctx: Context, plots: list[Plot],
               traces: list[TraceFile] | None = None) -> str:
    m = res.manifest
    exp = m.get("experiment", {}).get("experiment", {})
    title = cfg.title or m.get("name", "schedlab report")
    unique = len({r["id"] for r in m.get("runs", [])})
    meta = [
        ("world", ", ".join(ctx.worlds)),
        ("policies", ", ".join(res.labels)),
        ("sweep", ", ".join(f"{k} ({len(set(map(str, res.summaries[k])))} values)"
                            for k in res.sweep_keys) or "none"),
        ("points × policies × replications", f"{len(m.get('points') or [{}])} × "
         f"{len(res.labels)} × {_reps(m)} = {len(m.get('runs', []))} "
         f"({unique} distinct runs)"),
        ("seed", exp.get("seed", 1)),
        ("quick", "yes: scaled down with --quick" if m.get("quick") else "no"),
        ("source", m.get("source") or "(a dict)"),
        ("schedlab", m.get("environment", {}).get("schedlab", "?")),
        ("machine", m.get("environment", {}).get("platform", "?")),
        ("written", time.strftime("%Y-%m-%d %H:%M", time.localtime(m.get("updated", 0)))),
    ]
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title)}</title>", f"<style>{CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
    ]
    if exp.get("description"):
        parts.append(f"<p>{_e(exp['description'])}</p>")
    parts.append('<table class="meta">' + "".join(
        f'<tr><th class="l">{_e(k)}</th><td>{_e(v)}</td></tr>' for k, v in meta) + "</table>")
    if res.skipped is not None and not res.skipped.empty:
        counts = res.skipped.groupby("world", sort=False).size()
        parts.append('<p class="off"><b>Skipped:</b> ' + ", ".join(
            f"{n} {w} runs" for w, n in counts.items()) + ' (<a href="#skipped">why</a>).</p>')
    parts += _table_sections(res, cfg)
    notes = [p.note for p in plots if p.note]
    for p in plots:
        if p.text:  # left out on purpose (a near-flat measure): why, with its numbers
            parts.append(f'<h2 id="{_e(p.name)}">{_e(p.title)}</h2>'
                         f'<p class="flat" data-plot="{_e(p.name)}">{_e(p.text)}</p>')
            continue
        if p.figure is None and not hasattr(p, "svg"):
            continue
        parts.append(f'<h2 id="{_e(p.name)}">{_e(p.title)}</h2>')
        parts.append(f'<figure class="figure" data-plot="{_e(p.name)}">{p.svg}'  # type: ignore
                     f"<figcaption>{_e(p.caption)}</figcaption></figure>")
    if notes:
        parts.append("<h2>Not drawn</h2><ul class=\"notes\">"
                     + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>")
    if traces:
        # Paths, not links: the page stays self-contained; Perfetto opens a file from disk.
        parts.append('<h2 id="traces">Schedules in Perfetto</h2><p>Each file is a run\'s '
                     "schedule as a Chrome/Perfetto trace (a track per CPU, preemptions and "
                     "migrations as events): open it with <b>Open trace file</b> at "
                     "ui.perfetto.dev or in chrome://tracing (docs/trace.md).</p>"
                     '<ul class="traces">' + "".join(
                         f"<li><code>{_e(str(t.path.relative_to(res.dir)))}</code>: "
                         f"{_e(t.label)}, {t.slices:,} slices</li>" if t.path is not None
                         else f"<li>{_e(t.label)}: {t.slices:,} segments, more than "
                         f"{TRACE_SLICES:,}: not written here (schedlab.trace.write_trace("
                         "results.run_result(run), path) writes it)</li>"
                         for t in traces) + "</ul>")
    translation = _notes_html(res)
    if translation:
        parts.append(translation)
    parts.append("<p><small>Figures also in report/ beside this file (PNG and SVG); data in "
                  "summaries.parquet and stats.parquet (<code>schedlab.load_results</code>)."
                  "</small></p></body></html>")
    return "\n".join(parts)


def _table_sections(res: Any, cfg: Any) -> list[str]:
    """The page's warnings and tables, in order, before its figures: what the HTML page
    shows and `--text` prints."""
    shares = _class_shares_html(res) if "share" in cfg.plots else ""
    sections = [_precision_html(res), _noisy_html(res), _not_success_html(res),
                "<h2>Response time</h2>", _response_table(res), shares,
                _gap_html(res, cfg.gap_metrics), _skipped_html(res)]
    return [s for s in sections if s]


def report_text(directory: str | Path) -> str:
    """The report's tables and warnings as text (`schedlab report DIR --text`): the page's
    own sections (`_table_sections`), read back from their HTML, so that a number has one
    way to be written; no figure is drawn."""
    res = load_results(directory)
    ctx = report_context(res)
    title = ctx.cfg.title or res.manifest.get("name", "schedlab report")
    blocks = _TextBlocks()
    blocks.feed("\n".join(_table_sections(res, ctx.cfg)))
    return _render_blocks(title, blocks.blocks)


class _TextBlocks(HTMLParser):
    """The page's headings, paragraphs, list items and tables (rows of cells), in order."""

    BLOCKS = ("h1", "h2", "p", "li")

    def __init__(self) -> None:
        super().__init__()
        self.blocks: list[tuple[str, Any]] = []
        self._text: list[str] | None = None
        self._table: list[list[str]] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag == "table":
            self._table = []
        elif tag == "tr" and self._table is not None:
            self._table.append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell = []
        elif tag == "br":
            self.handle_data(" ")
        elif tag in self.BLOCKS and self._table is None:
            self._text = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._table:
            self._table[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "table" and self._table is not None:
            self.blocks.append(("table", [r for r in self._table if r]))
            self._table = None
        elif tag in self.BLOCKS and self._text is not None:
            text = " ".join("".join(self._text).split())
            if text:
                self.blocks.append(("h" if tag.startswith("h") else tag, text))
            self._text = None

    def handle_data(self, data: str) -> None:
        for part in (self._cell, self._text):
            if part is not None:
                part.append(data)
                return


def _render_blocks(title: str, blocks: list[tuple[str, Any]]) -> str:
    import shutil
    import sys

    from rich.console import Console
    from rich.table import Column, Table

    out = io.StringIO()
    # A terminal's width; a file or a pipe (a CI log) gets the table's own.
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else 240
    console = Console(file=out, width=width, highlight=False, markup=False)
    console.print(title, style="bold")
    for kind, value in blocks:
        if kind == "table":
            table = Table(*(Column(h, overflow="fold") for h in value[0]))
            for row in value[1:]:
                table.add_row(*row)
            console.print(table)
        elif kind == "h":
            console.print()
            console.print(value, style="bold")
        else:
            console.print(("- " if kind == "li" else "") + value)
    return out.getvalue()


# `schedlab.report(DIR, html=None, text=False)`, as the command line names it.
callable_module(__name__, make_report)

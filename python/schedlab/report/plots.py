"""The report's figures. Each plotter takes the report context and returns a figure, or a note
saying why there is nothing to draw; none of them may stop the report.

Rules every figure keeps (tests/test_report.py checks them in Chromium, by geometry):
- legends stand outside the axes (right, or below when long), so they never cover data, and
  every entry has a swatch of its own colour on the white page;
- every axis label ends with its unit in parentheses: `mean response time (ms)`;
- a measure that hardly varies is not magnified into noise: it is drawn as a difference, on an
  axis from zero, or left out with the reason and its numbers written in its place;
- `tag_figure` names what the SVG draws (`legend-*`, `swatch-*`, `data-*`, `axislabel-*`), so
  that the page can be checked by geometry.
"""

from __future__ import annotations

import json
import math
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from itertools import combinations
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from schedlab import sweep
from schedlab.jsonio import json_safe
from schedlab.stats import t_interval
from schedlab.vocabulary import SUMMARY_UNITS

# The report's look, in force while it draws (`matplotlib.rc_context(STYLE)`, make_report).
# Its figures are matplotlib Figures of their own, not pyplot's: drawing a report chooses no
# backend and changes no setting of the user's (a notebook's inline plots go on as they were).
STYLE = {
    "figure.dpi": 100, "savefig.dpi": 110, "axes.grid": True, "grid.alpha": 0.3,
    "axes.spines.top": False, "axes.spines.right": False, "font.size": 9,
    "svg.fonttype": "none", "legend.fontsize": 8, "legend.frameon": False,
}

CDF_POINTS = 600  # points per CDF line: the shape, not every job
# Points per theory CDF: a numerically inverted transform costs milliseconds per point.
THEORY_CDF_POINTS = 150
CDF_PANELS = 9  # at most this many sweep points get a CDF panel, spread over the sweep
# A sweep of several keys: a row of CDF panels per combination of the keys other than x, a
# column per value of x, at most this many of each.
CDF_ROWS, CDF_COLUMNS = 4, 3
# A legend with more entries than this goes below the axes, in columns, instead of beside.
LEGEND_BESIDE = 12
# Near-flat: every mean of a measure within FLAT of the others (relative to their size). Two
# means closer than SAME are the same whatever their intervals say.
FLAT = 0.01
SAME = 1e-4

# (label, unit) of each summary key drawn against the sweep. The units are the vocabulary's
# (vocabulary.SUMMARY_UNITS, the sim table's; a test holds them equal); ms stands for the
# experiment's time unit, which is ms unless the file says otherwise.
METRICS: dict[str, tuple[str, str]] = {
    "response_mean": ("mean response time", "ms"),
    "response_p50": ("median response time", "ms"),
    "response_p95": ("p95 response time", "ms"),
    "response_p99": ("p99 response time", "ms"),
    "wait_mean": ("mean wait", "ms"),
    "slowdown_mean": ("mean slowdown", "ratio"),
    "throughput": ("throughput", "jobs/ms"),
    "makespan": ("makespan", "ms"),
    "utilization": ("utilisation", "ratio"),
    "utilization_per_cpu": ("utilisation", "ratio"),
    "runnable_mean_per_cpu": ("runnable jobs", "jobs"),
    "context_switches": ("context switches", "count"),
    "migrations": ("migrations", "count"),
    "jain_slowdown": ("Jain's index over slowdowns", "ratio"),
    "jain_share": ("Jain's index over share / entitlement", "ratio"),
    "time_to_balance": ("time to balance", "ms"),
}
# How an axis names the vocabulary's units of keys (schedlab.vocabulary.Key.unit): "time" and
# "work" are the experiment's time unit (work is milliseconds of CPU in the simulator).
VOCABULARY_UNITS = {"time": "ms", "work": "ms", "rate": "per ms", "count": "count",
                    "ratio": "ratio", "cpus": "count", "bytes": "bytes", "text": "name",
                    "bool": "true/false", "table": "name"}


@dataclass
class Plot:
    name: str
    title: str
    caption: str
    figure: Figure | None = None
    note: str | None = None
    # Written in the figure's place when a measure is left out on purpose (near-flat): why,
    # with its numbers.
    text: str | None = None


@dataclass
class Context:
    res: Any  # schedlab.sweep.Results
    cfg: Any  # experiment.ReportFields
    x: str | None  # sweep key on the x axis
    point: int  # the point shown by per-point plots
    notes: list[str] = field(default_factory=list)

    @property
    def worlds(self) -> list[str]:
        return list(dict.fromkeys(self.res.summaries["world"]))

    @property
    def others(self) -> list[str]:
        """Sweep keys other than x: each combination of them is its own line."""
        return [k for k in self.res.sweep_keys if k != self.x]

    @property
    def time_unit(self) -> str:
        return self.res.time_unit

    def unit(self, unit: str) -> str:
        """A unit as drawn: ms becomes the experiment's time unit."""
        return re.sub(r"\bms\b", self.time_unit, unit)

    def label(self, metric: str) -> str:
        """An axis label with its unit: `mean response time (ms)`; the unit is the summary
        key's own (`SUMMARY_UNITS`) wherever it declares one."""
        name, unit = METRICS.get(metric, (metric.replace("_", " "), "ratio"))
        return f"{name} ({self.unit(SUMMARY_UNITS.get(metric, unit))})"

    def x_label(self) -> str:
        """The x axis: the file's `x_label`, or the sweep key, with the key's unit."""
        label = self.cfg.x_label or self.x or ""
        if re.search(r"\([^()]+\)", label):  # the file gave its unit
            return label
        return f"{label} ({self.unit(sweep_key_unit(self.x))})" if self.x else label

    @cached_property
    def _ignored(self) -> dict[str, set[str]]:
        """Per world, the other sweep keys its runs do not depend on: the runner shares one
        run between their values (a sim-only balancer case beside the os world), so the world
        draws one line there, not one copy per value."""
        s = self.res.summaries
        if "run" not in s:
            return {}
        out: dict[str, set[str]] = {}
        for world in self.worlds:
            w = s[s["world"] == world]
            fixed = [c for c in ("label", self.x, "replication") if c is not None and c in w]
            out[world] = keys_sharing_runs(w, self.others, fixed)
        return out

    def kept(self, world: str) -> list[str]:
        """The other sweep keys that make a world's lines differ."""
        return [k for k in self.others if k not in self._ignored.get(world, set())]

    def series_name(self, world: str, label: str, row: Any) -> str:
        name = label
        if len(self.worlds) > 1:
            name += f" [{world}]"
        for k in self.kept(world):
            name += f", {_short_key(k)}={_short(row[k])}"
        return name

    def coords(self, point: int) -> dict[str, Any]:
        points = self.res.manifest.get("points") or []
        return points[point] if 0 <= point < len(points) else {}

    def point_desc(self, point: int | None = None) -> str:
        coords = self.coords(self.point if point is None else point)
        if not coords:
            return ""
        return " at " + ", ".join(f"{k} = {_fmt(v)}" for k, v in coords.items())

    def short_coords(self, point: int) -> str:
        return ", ".join(f"{_short_key(k)} = {_short(v)}" for k, v in self.coords(point).items())

    def colors(self) -> dict[str, Any]:
        cmap = matplotlib.colormaps["tab10"]
        return {lab: cmap(i % 10) for i, lab in enumerate(self.res.labels)}

    def markers(self) -> dict[str, str]:
        """A marker per policy, so lines that coincide stay told apart (and in print)."""
        return {lab: MARKERS[i % len(MARKERS)] for i, lab in enumerate(self.res.labels)}

    def series_styles(self, series: list[tuple[Any, ...]]) -> dict[tuple[Any, ...], tuple]:
        """The colour and marker of each line, keyed (label, other sweep keys' values...): the
        policy's own where each policy draws one line; where other sweep keys split a policy
        into several (linux and windows balancers on 2 and 4 CPUs), a colour and marker per
        line, or four lines of one policy would share one swatch."""
        series = list(dict.fromkeys(series))
        colors, markers = self.colors(), self.markers()
        if len({k[0] for k in series}) == len(series):
            return {k: (colors.get(k[0]), markers.get(k[0], "o")) for k in series}
        cmap = matplotlib.colormaps["tab10" if len(series) <= 10 else "tab20"]
        return {k: (cmap(i % cmap.N), MARKERS[i % len(MARKERS)]) for i, k in enumerate(series)}

    def at_point(self, df: pd.DataFrame, point: int | None = None) -> pd.DataFrame:
        p = self.point if point is None else point
        return df[df["point"] == p] if "point" in df else df

    @cached_property
    def theory_specs(self) -> dict[tuple[int, str], dict[str, Any] | None]:
        return theory_specs(self.res.manifest)

    @cached_property
    def run_specs(self) -> dict[str, dict[str, Any]]:
        return {r["id"]: r.get("spec") or {} for r in self.res.manifest.get("runs", [])}


MARKERS = "osD^vPX<>*"


def keys_sharing_runs(s: pd.DataFrame, keys: list[str], fixed: list[str]) -> set[str]:
    """The sweep keys among `keys` whose values all share one run (the runner runs a spec once:
    FCFS's has no RR quantum), for each value of the `fixed` columns and of the other keys."""
    return {k for k in keys
            if s[k].nunique(dropna=False) > 1
            and (s.groupby([*fixed, *(o for o in keys if o != k)], sort=False,
                           dropna=False)["run"].nunique() == 1).all()}


def sweep_key_unit(key: str | None) -> str:
    """The vocabulary's unit of a sweep key (`workload.load`, `policy.RR.quantum`,
    `workload.classes[1].tickets`, `case`), as an axis names it."""
    from schedlab.vocabulary import CLASS_KEYS, KEYS, param_units

    if not key:
        return "name"
    name = key.rsplit(".", 1)[-1]
    if "classes[" in key and name in CLASS_KEYS:
        unit = CLASS_KEYS[name].unit
    elif key.startswith("policy.") and name in param_units():
        unit = param_units()[name]
    elif name in KEYS:
        unit = KEYS[name].unit
    else:
        unit = "text"
    return VOCABULARY_UNITS.get(unit, unit)


def theory_specs(manifest: dict[str, Any]) -> dict[tuple[int, str], dict[str, Any] | None]:
    """The simulator's reading of each (point, label), the spec the closed forms take (as in
    `sweep.statistics`): the experiment in the manifest expanded again. The file itself is
    read instead when it is still there and unchanged, so relative size files resolve as
    they did. Empty when neither loads: a report without theory, not a failed report."""
    from schedlab import experiment as ex

    raw = manifest.get("experiment")
    if not raw:
        return {}

    def text(v: Any) -> str:
        return json.dumps(json_safe(v), sort_keys=True, default=str)

    try:
        exp = None
        src = manifest.get("source")
        if src and Path(src).is_file():
            exp = ex.load(src, quick=bool(manifest.get("quick")), check_world=False)
            if text(exp.raw) != text(raw):  # edited since the run
                exp = None
        if exp is None:
            exp = ex.load(raw, check_world=False)
    except Exception:
        return {}
    return exp.theory_specs


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _short(v: Any) -> str:
    """A value as a legend or panel names it: a file by its name without directory and
    suffix (traces/priority-4-mixed.csv: priority-4-mixed)."""
    if isinstance(v, str) and re.fullmatch(r"[\w./-]+\.(csv|json|toml|txt)", v):
        return Path(v).stem
    return _fmt(v)


def _short_key(key: str) -> str:
    """A sweep key as a legend or panel names it: policy.RR.quantum: RR quantum."""
    parts = key.split(".")
    if parts[0] == "policy" and len(parts) == 3:
        return f"{parts[1]} {parts[2]}"
    return parts[-1]


def _numeric(values: pd.Series) -> bool:
    return bool(pd.api.types.is_numeric_dtype(values)) and not pd.api.types.is_bool_dtype(values)


def _names(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


# ---------------------------------------------------------------------------------------------
# Legends and the names the SVG gives to what it draws
# ---------------------------------------------------------------------------------------------


def _suptitle(fig: Figure, text: str) -> None:
    """The figure's title, beside its legend and not under it: centred over the room the
    legend leaves at the top (a legend beside the axes reaches the figure's top edge) and
    wrapped to it. Call it once the legend is placed."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    title = fig.suptitle(text)
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw_without_rendering()
    box, pad = title.get_window_extent(renderer), 8.0
    right = fig.bbox.x1
    for legend in fig.legends:
        lb = legend.get_window_extent(renderer)
        if lb.y1 > box.y0 and lb.x0 > fig.bbox.x0 + fig.bbox.width / 3:
            right = min(right, lb.x0 - pad)
    room = right - fig.bbox.x0 - 2 * pad
    title.set_x((fig.bbox.x0 + right) / 2 / fig.bbox.width)
    if box.width > room:
        chars = max(20, int(len(text) * room / box.width))
        title.set_text(textwrap.fill(text, chars))


def _figure(*args: Any, figsize: tuple[float, float], **kwargs: Any) -> tuple[Figure, Any]:
    """A figure and its axes (`Figure.subplots`' arguments) with the constrained layout, which
    makes room for legends outside."""
    fig = Figure(figsize=figsize, layout="constrained")
    return fig, fig.subplots(*args, **kwargs)


def figure_legend(fig: Figure, axes: Any) -> Any:
    """One legend for the figure, outside every axes: beside them on the right, or below in
    columns when it is long. Entries of the same name in several axes appear once."""
    entries: dict[str, Any] = {}
    for ax in np.ravel(axes):
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label and not label.startswith("_"):
                entries.setdefault(label, handle)
    if not entries:
        return None
    n = len(entries)
    if n <= LEGEND_BESIDE:
        return fig.legend(list(entries.values()), list(entries), loc="outside right upper")
    ncols = min(4, math.ceil(n / 4))
    w, h = fig.get_size_inches()
    fig.set_size_inches(w, h + 0.19 * math.ceil(n / ncols) + 0.2)  # room below the axes
    return fig.legend(list(entries.values()), list(entries), loc="outside lower center",
                      ncols=ncols)


DATA_PREFIXES = ("data-", "theory-", "warmup-end")


def tag_figure(fig: Figure, name: str) -> None:
    """Names what the figure draws, as element ids of the SVG: every data mark (lines,
    markers, bars, bands; marks already named, theory-* and warmup-end, keep their name)
    `data-NAME-AXES-K`, every legend `legend-NAME-L` with its swatches `swatch-NAME-L-E` and
    entries `legendtext-NAME-L-E`, every axis label `axislabel-NAME-AXES-x|y`."""
    legends = list(fig.legends)
    for i, ax in enumerate(fig.axes):
        marks = [*ax.lines, *ax.collections, *ax.patches, *ax.images]
        k = 0
        for art in marks:
            if art.get_gid() is None:
                art.set_gid(f"data-{name}-{i}-{k}")
                k += 1
        for axis, which in ((ax.xaxis, "x"), (ax.yaxis, "y")):
            if axis.label.get_text():
                axis.label.set_gid(f"axislabel-{name}-{i}-{which}")
        if ax.get_legend() is not None:
            legends.append(ax.get_legend())
    for j, leg in enumerate(legends):
        leg.set_gid(f"legend-{name}-{j}")
        for e, (handle, text) in enumerate(zip(leg.legend_handles, leg.texts, strict=True)):
            if handle is not None:
                handle.set_gid(f"swatch-{name}-{j}-{e}")
            text.set_gid(f"legendtext-{name}-{j}-{e}")


# ---------------------------------------------------------------------------------------------
# Near-flat measures
# ---------------------------------------------------------------------------------------------


@dataclass
class Flat:
    """A measure whose means hardly move over every point and policy."""

    lo: float
    hi: float
    spread: float  # (hi - lo) / the mean size of the values
    half: float  # the widest interval's half-width relative to its mean (nan: no interval)
    apart: int  # pairs of policies at one point whose intervals do not overlap


def flatness(st: pd.DataFrame) -> Flat | None:
    """The Flat of a metric's stats rows, or None when its means move by more than FLAT."""
    ok = st[st["mean"].notna()]
    if ok.empty:
        return None
    means = ok["mean"].to_numpy(float)
    size = float(np.abs(means).mean())
    lo, hi = float(means.min()), float(means.max())
    if not size or hi - lo > FLAT * size:
        return None
    rel = (ok["half_width"] / ok["mean"].abs()).to_numpy(float)
    half = float(np.nanmax(rel)) if np.isfinite(rel).any() else math.nan
    apart = 0
    for _, g in ok.groupby(["world", "point"], sort=False):
        for (_, a), (_, b) in combinations(g.iterrows(), 2):
            if abs(a["mean"] - b["mean"]) <= SAME * size:
                continue
            known = all(pd.notna(r[c]) for r in (a, b) for c in ("ci_low", "ci_high"))
            if not (known and a["ci_low"] <= b["ci_high"] and b["ci_low"] <= a["ci_high"]):
                apart += 1
    return Flat(lo, hi, (hi - lo) / size, half, apart)


def _pct(v: float) -> str:
    return f"{100 * v:.2g}%"


def _span(lo: float, hi: float) -> str:
    """`lo to hi` with enough digits to tell them apart."""
    for digits in range(4, 10):
        a, b = f"{lo:.{digits}g}", f"{hi:.{digits}g}"
        if a != b:
            return f"{a} to {b}"
    return f"{lo:.4g}"


def flat_text(ctx: Context, metric: str, f: Flat) -> str:
    """Why a near-flat measure is not drawn, with its numbers."""
    name, unit = METRICS.get(metric, (metric, "ratio"))
    unit = ctx.unit(unit)
    several = len(ctx.res.labels) > 1
    text = (f"{name[0].upper() + name[1:]}: not drawn, because "
            + ("every policy is within its confidence interval of the others at every sweep "
               "point, and " if several else "")
            + f"all values lie within {_pct(f.spread)} of each other: "
            f"{_span(f.lo, f.hi)} {unit}"
            + (f" (intervals up to ±{_pct(f.half)})" if math.isfinite(f.half) else "")
            + ". A plot at this scale would show only noise; the values are in "
            "summaries.parquet and stats.parquet.")
    s = ctx.res.summaries
    if metric == "throughput" and "arrival_rate" in s and s["arrival_rate"].notna().any():
        rate = float(s["arrival_rate"].mean())
        if rate and abs(float(s["throughput"].mean()) / rate - 1) <= FLAT:
            text += (f" The measured arrival rate is {rate:.4g} {unit}: every policy completes "
                     "jobs as fast as they arrive.")
    return text


def _coincide_text(ctx: Context, st: pd.DataFrame) -> str:
    """Policies whose means are the same at every point: their lines lie on each other."""
    if ctx.x is None or st.empty:
        return ""
    series: dict[str, list[str]] = {}
    for world, w in st.groupby("world", sort=False):
        for (_, label, *_), g in w.groupby(["world", "label", *ctx.kept(world)], sort=False):
            g = g.drop_duplicates(subset=[ctx.x])  # the copies of a run shared by ignored keys
            key = json.dumps([world, *[None if not math.isfinite(v) else float(f"{v:.9g}")
                                       for v in g.sort_values(ctx.x)["mean"]]])
            # Named as the legend names the line: a policy split by other sweep keys (linux
            # and windows on 2 CPUs) has lines that lie on each other too.
            series.setdefault(key, []).append(ctx.series_name(world, label, g.iloc[0]))
    groups = [list(dict.fromkeys(v)) for v in series.values() if len(set(v)) > 1]
    return "".join(f" {_names(g)} have the same values at every point: their lines lie on "
                   "each other (told apart by their markers)." for g in groups)


# ---------------------------------------------------------------------------------------------
# Metric against the swept parameter (or bars when nothing is swept)
# ---------------------------------------------------------------------------------------------


@dataclass
class Drawn:
    """What _metric_axes did: "empty" (no values), "flat" (left out, nothing drawn), "zero"
    (near-flat, drawn on an axis from zero), "relative" (near-flat, drawn as differences from
    the policies' mean) or "drawn"."""

    how: str
    flat: Flat | None = None
    coincide: str = ""


def _metric_axes(ctx: Context, ax: Any, metric: str, theory: bool = False,
                 flat: str = "omit") -> Drawn:
    """Draws a metric against the sweep. `flat` says what becomes of a near-flat metric whose
    policies are all within their intervals of each other: "omit" (nothing drawn), "zero"
    (an axis from zero) or "keep" (the caller fixes the axis). Near-flat but apart: drawn as
    each policy's difference from the mean of the policies, in % of it."""
    st = ctx.res.metric(metric)
    if st.empty or st["mean"].isna().all():
        return Drawn("empty")
    colors = ctx.colors()
    if ctx.x is None:
        return _metric_bars(ctx, ax, st, metric, theory, colors)
    f = flatness(st) if flat != "keep" else None
    how = "drawn"
    ylabel = ctx.label(metric)
    if f is not None and not f.apart:
        if flat == "omit":
            return Drawn("flat", f)
        how = "zero"
    elif f is not None:
        how = "relative"
        ref = st.groupby(["world", "point"])["mean"].transform("mean")
        st = st.assign(**{c: 100 * (st[c] - ref) / ref for c in ("mean", "ci_low", "ci_high",
                                                                  "theory")})
        st = st.assign(half_width=100 * st["half_width"] / ref.abs())
        ylabel = f"{METRICS.get(metric, (metric, ''))[0]} − mean of the policies (% of it)"
    xs = st[ctx.x]
    numeric = _numeric(xs)
    cats = list(dict.fromkeys(xs.astype(str))) if not numeric else []
    groups = [(keys, g) for world, w in st.groupby("world", sort=False)
              for keys, g in w.groupby(["world", "label", *ctx.kept(world)], sort=False)]
    styles = ["-", "--", ":", "-."]
    # A line is its keys less the world (which its line style tells).
    looks = ctx.series_styles([tuple(keys[1:]) for keys, _ in groups])
    for i, (keys, g) in enumerate(groups):
        world = keys[0]
        g = g.drop_duplicates(subset=[ctx.x])  # the copies of a run shared by ignored keys
        g = g.sort_values(ctx.x) if numeric else g
        x = g[ctx.x].to_numpy(float) if numeric else np.array([cats.index(str(v))
                                                                for v in g[ctx.x]])
        color, marker = looks[tuple(keys[1:])]
        ls = styles[ctx.worlds.index(world) % len(styles)]
        name = ctx.series_name(world, keys[1], g.iloc[0])
        ax.plot(x, g["mean"], ls, marker=marker, ms=4, mfc="none", mew=1.1,
                color=color, label=name)
        ok = g["half_width"].notna().to_numpy()
        if ok.any():
            ax.fill_between(x[ok], g["ci_low"][ok], g["ci_high"][ok], color=color, alpha=0.18,
                            lw=0)
        if theory and ctx.cfg.theory and g["theory"].notna().any():
            t = g["theory"].to_numpy(float)
            ax.plot(x, t, ":", color=color, lw=1.5, label=f"{name}: theory" if i < 12 else None)
    if how == "relative":
        ax.axhline(0, color="grey", lw=0.8)
    if how == "zero":
        top = float(np.nanmax(st[["mean", "ci_high"]].to_numpy(float)))
        if f is not None and f.lo >= 0 and top > 0:
            ax.set_ylim(0, top * 1.15)
    if not numeric:
        ax.set_xticks(range(len(cats)), cats, rotation=20)
    else:
        if ctx.cfg.log_x:
            ax.set_xscale("log")
        ticks = sorted(set(xs.astype(float)))
        if len(ticks) <= 12:  # the swept values themselves, not 10^0, 10^1
            ax.set_xticks(ticks, [_fmt(t) for t in ticks])
            ax.minorticks_off()
    ax.set_xlabel(ctx.x_label())
    ax.set_ylabel(ylabel)
    return Drawn(how, f, _coincide_text(ctx, ctx.res.metric(metric)))


def _metric_bars(ctx: Context, ax: Any, st: pd.DataFrame, metric: str, theory: bool,
                 colors: dict[str, Any]) -> Drawn:
    """Bars start at zero: a near-flat measure is drawn as it is, equal bars."""
    names, means, below, above, cols, theo = [], [], [], [], [], []
    for (world, label), g in st.groupby(["world", "label"], sort=False):
        row = g.iloc[0]
        names.append(ctx.series_name(world, label, row))
        means.append(row["mean"])
        # One run's own interval may be asymmetric about its value: the bar shows both ends.
        below.append(max(row["mean"] - row["ci_low"], 0.0) if pd.notna(row["ci_low"]) else 0.0)
        above.append(max(row["ci_high"] - row["mean"], 0.0) if pd.notna(row["ci_high"])
                     else 0.0)
        cols.append(colors.get(label))
        theo.append(row["theory"])
    pos = np.arange(len(names))
    ax.bar(pos, means, yerr=[below, above], color=cols, alpha=0.85, capsize=4)
    if theory and ctx.cfg.theory:
        t = np.array(theo, dtype=float)
        if np.isfinite(t).any():
            ax.scatter(pos, t, marker="_", s=900, color="black", zorder=3, lw=2,
                       label="theory")
    ax.set_xticks(pos, names, rotation=15)
    ax.set_ylabel(ctx.label(metric))
    return Drawn("drawn")


def _flat_caption(ctx: Context, metric: str, d: Drawn) -> str:
    if d.flat is None or d.how not in ("zero", "relative"):
        return ""
    name, unit = METRICS.get(metric, (metric, "ratio"))
    span = (f"{name} lies within {_pct(d.flat.spread)} over every point and policy "
            f"({_span(d.flat.lo, d.flat.hi)} {ctx.unit(unit)})")
    if d.how == "zero":
        return (f" The {span}, every policy within its interval of the others: its axis "
                "starts at zero so that noise is not magnified.")
    return (f" The {span}, so it is drawn as each policy's difference from the mean of the "
            "policies at the same point, in % of that mean, with its interval.")


def _single(ctx: Context, name: str, title: str, caption: str, metric: str,
            theory: bool = False) -> Plot:
    fig, ax = _figure(figsize=(8.5, 4.2))
    d = _metric_axes(ctx, ax, metric, theory)
    if d.how in ("empty", "flat"):
        if d.how == "flat" and d.flat is not None:
            return Plot(name, title, caption, text=flat_text(ctx, metric, d.flat))
        return Plot(name, title, caption, note=f"{title}: no values of {metric} in the results")
    ax.set_title(title)
    figure_legend(fig, ax)
    return Plot(name, title, caption + _flat_caption(ctx, metric, d) + d.coincide, fig)


def confidence_of(res: Any) -> float:
    """The experiment's confidence level for intervals (`[experiment] confidence`)."""
    return float(res.manifest.get("experiment", {}).get("experiment", {})
                 .get("confidence", 0.95))


def percent_of(res: Any) -> str:
    """The confidence level as a caption says it (95%, 99.5%)."""
    return f"{100 * confidence_of(res):.3g}%"


def _confidence(ctx: Context) -> float:
    return confidence_of(ctx.res)


def _percent(ctx: Context) -> str:
    return percent_of(ctx.res)


def response(ctx: Context) -> Plot:
    return _single(ctx, "response", "Mean response time",
                   f"Mean response time with {_percent(ctx)} confidence bands (Student t across "
                   f"replications, or the batch-means interval of one run); {_theory_marks(ctx)}"
                   " are the closed forms of queueing theory where one exists.",
                   "response_mean", theory=True)


def _theory_marks(ctx: Context) -> str:
    """How a metric figure draws theory: dotted lines along a sweep, black marks on bars."""
    return "dotted lines" if ctx.x is not None else "black marks on the bars"


# How the report marks a traced kernel run by the path of its first move (trace_migrations).
FIRST_MOVE_MARKERS = {"idle balance": "o", "newly-idle balance": "x", "busy balance": "s",
                      "active balance": "D", "wake-up": "^"}


def balance(ctx: Context) -> Plot:
    title, metric = "Time to balance", "time_to_balance"
    caption = ("Time from the release of a pinned start to the first sample whose runnable "
               "tasks per CPU are the balanced split (⌈n/m⌉ on n mod m CPUs, ⌊n/m⌋ on the "
               "others: study 002's Linux.1.a), from runnable tasks sampled every "
               "load_sample ms: the simulator's series and the os world's placement "
               "samples, by one code. Its resolution is the sampling period.")
    fig, ax = _figure(figsize=(8.5, 4.2))
    d = _metric_axes(ctx, ax, metric)
    if d.how in ("empty", "flat"):
        if d.how == "flat" and d.flat is not None:
            return Plot("balance", title, caption, text=flat_text(ctx, metric, d.flat))
        return Plot("balance", title, caption, note=f"{title}: no values of {metric} in the "
                    "results")
    caption += _traced_kernel_runs(ctx, ax)
    ax.set_title(title)
    figure_legend(fig, ax)
    return Plot("balance", title, caption + _flat_caption(ctx, metric, d) + d.coincide, fig)


def _traced_kernel_runs(ctx: Context, ax: Axes) -> str:
    """Each kernel run whose moves were traced, as a point marked by the path of its first
    move after the release; the caption's sentence about them ("" when there are none)."""
    s = ctx.res.summaries
    if ctx.x is None or "first_move_path" not in s or ctx.x not in s:
        return ""
    traced = s[(s["world"] == "os") & s["moves"].notna()].drop_duplicates("run") \
        if "moves" in s else s.iloc[:0]
    runs = traced[traced["first_move_path"].notna()]
    if runs.empty:
        return ""
    # A run whose trace lacks a move the kernel counted has no known first move (docs/os.md).
    unknown = len(traced) - len(runs)
    counts = []
    for path, g in runs.groupby("first_move_path", sort=False):
        ax.scatter(g[ctx.x].astype(float), g["time_to_balance"], color="black", s=22,
                   marker=FIRST_MOVE_MARKERS.get(path, "*"), zorder=5, linewidths=1.2,
                   facecolors="none" if path == "idle balance" else None,
                   label=f"one kernel run, first move by {path}")
        counts.append(f"{len(g)} by {path}")
    return (" Points: each kernel run traced (trace_migrations), marked by the path of the "
            "kernel that made its first move after the release (" + ", ".join(counts) +
            " of " + str(len(runs)) + " runs" + (
                f"; {unknown} more whose trace lacks a move the kernel counted, so its first "
                "move is unknown" if unknown else "")
            + "): an idle CPU's periodic balance, which the simulator's linux balancer "
            "models, or a newly-idle balance, which pulls one task when a CPU is about to go "
            "idle (docs/os.md).")


def percentiles(ctx: Context) -> Plot:
    title = "Tail latency: p95 and p99 of response time"
    caption = (f"Per-run percentiles, averaged over replications, with {_percent(ctx)} "
               "confidence bands (Student t across replications, or sectioning of one run); "
               f"{_theory_marks(ctx)}"
               " are the quantiles of queueing theory's response-time distribution where it "
               "is known.")
    metrics = ("response_p95", "response_p99")
    flats = [flatness(ctx.res.metric(m)) if ctx.x is not None and not ctx.res.metric(m).empty
             else None for m in metrics]
    if all(f is not None and not f.apart for f in flats):
        texts = [flat_text(ctx, m, f) for m, f in zip(metrics, flats, strict=True) if f]
        return Plot("percentiles", title, caption, text=" ".join(texts))
    fig, axes = _figure(1, 2, figsize=(11, 4), sharey=False)
    # A panel that is flat while the other is not keeps its place, on an axis from zero.
    drawn = [_metric_axes(ctx, ax, m, theory=True, flat="zero")
             for ax, m in zip(axes, metrics, strict=True)]
    if all(d.how == "empty" for d in drawn):
        return Plot("percentiles", "Tail latency", "", note="no p95/p99 in the results")
    axes[0].set_title("95th percentile")
    axes[1].set_title("99th percentile")
    figure_legend(fig, axes)
    extra = "".join(_flat_caption(ctx, m, d) for m, d in zip(metrics, drawn, strict=True))
    return Plot("percentiles", title, caption + extra + drawn[0].coincide, fig)


def throughput(ctx: Context) -> Plot:
    return _single(ctx, "throughput", "Throughput", "Completed jobs per unit of time over the "
                   "measured interval.", "throughput")


def makespan(ctx: Context) -> Plot:
    return _single(ctx, "makespan", "Makespan", "The measured interval's length "
                   "(measure_end − measure_start): from the first measured arrival to the "
                   "last completion, or to the stop time. For a batch, the test's completion "
                   "time: study 004's first fork to last exit.", "makespan")


def context_switches(ctx: Context) -> Plot:
    return _single(ctx, "context_switches", "Context switches", "Summed over the measured "
                   "jobs of a run, as each world counts them: in the simulator the times a "
                   "job was taken off its CPU unfinished and another job ran there, in the "
                   "server the times a request resumed after another ran on its worker, in "
                   "the os world the kernel's voluntary and involuntary switches of each "
                   "process (getrusage). Compare worlds with that in mind.",
                   "context_switches")


def fairness(ctx: Context) -> Plot:
    metrics = [(m, t) for m, t in (("jain_slowdown", "Jain's index over slowdowns"),
                                   ("jain_share", "Jain's index over share / entitlement"))
               if not ctx.res.metric(m).empty and ctx.res.metric(m)["mean"].notna().any()]
    if not metrics:
        return Plot("fairness", "Fairness", "", note="Jain's fairness: no values in the results")
    fig, axes = _figure(1, len(metrics), figsize=(5 * len(metrics) + 2, 4), squeeze=False)
    coincide = ""
    for ax, (m, t) in zip(axes[0], metrics, strict=True):
        # Its axis is fixed, 0 to 1: a flat index is drawn as what it is.
        d = _metric_axes(ctx, ax, m, flat="keep")
        coincide = coincide or d.coincide
        ax.set_ylabel("Jain's index (ratio; 1 = fair)")
        ax.set_title(t)
        ax.set_ylim(0, 1.05)
    figure_legend(fig, axes)
    unsettled = _infinite_slowdown(ctx) if any(m == "jain_slowdown" for m, _ in metrics) else ""
    return Plot("fairness", "Jain's fairness", "Jain's index J = (sum x)^2 / (n sum x^2): over "
                "per-job slowdowns, and over per-task CPU share divided by entitlement (closed "
                "workloads and classes with tickets or weights)." + coincide + unsettled, fig)


def _infinite_slowdown(ctx: Context) -> str:
    """A caption's WARNING, as `schedlab sim` and a Result's notes give it, naming the
    policies whose simulated runs have a mean slowdown infinite in theory: their index over
    slowdowns does not settle as the runs grow."""
    from schedlab.summary_rows import slowdown_warning

    labels: list[str] = []
    for run in ctx.res.manifest.get("runs", []):
        if (run.get("world") in ("sim", "calibrated") and run["label"] not in labels
                and not run.get("skip") and slowdown_warning(run.get("spec") or {})):
            labels.append(run["label"])
    if not labels:
        return ""
    return (f" WARNING: the mean slowdown of {', '.join(labels)} is infinite in theory (sizes "
            "with E[1/S] = inf, and a policy or machine that makes a short job wait): their "
            "index over slowdowns does not settle as the runs grow.")


# ---------------------------------------------------------------------------------------------
# Per-point plots
# ---------------------------------------------------------------------------------------------


def share(ctx: Context) -> Plot:
    tasks = ctx.at_point(ctx.res.tasks)
    title = "CPU share against entitlement"
    if tasks.empty or not {"share", "entitled"} <= set(tasks.columns):
        return Plot("share", title, "", note=f"{title}: no per-task shares in these results "
                    "(they come from closed workloads: clients, or tasks in a trace)")
    fig, ax = _figure(figsize=(7.5, 5))
    colors, markers = ctx.colors(), ctx.markers()
    for (world, label), g in tasks.groupby(["world", "label"], sort=False):
        ax.scatter(g["entitled"], g["share"], s=18, alpha=0.7, color=colors.get(label),
                   marker=markers.get(label, "o"),
                   label=ctx.series_name(world, label, g.iloc[0]) if not ctx.others else label)
    hi = float(np.nanmax([tasks["entitled"].max(), tasks["share"].max(), 0.01])) * 1.08
    ax.plot([0, hi], [0, hi], "k--", lw=1, label="share = entitlement")
    ax.set_xlim(0, hi)
    ax.set_ylim(0, hi)
    ax.set_xlabel("entitled CPU share (ratio; tickets or weight, over the contended interval)")
    ax.set_ylabel("measured CPU share (ratio)")
    ax.set_title(title + ctx.point_desc())
    figure_legend(fig, ax)
    return Plot("share", title, "Each dot is one task in one replication; on the dashed line a "
                "task received exactly what its tickets or weight entitle it to.", fig)


def _jobs_at_point(ctx: Context, replication: int | None = 0,
                   point: int | None = None) -> dict[tuple[str, str], Any]:
    """Stored per-job tables at a point (default the chosen one), by (world, label)."""
    s = ctx.at_point(ctx.res.summaries, point)
    if replication is not None:
        s = s[s["replication"] == replication]
    tables: dict[tuple[str, str], list[Any]] = {}
    for _, row in s.iterrows():
        df = ctx.res.run_table(row["run"], "jobs")
        if df is not None and len(df):
            tables.setdefault((row["world"], row["label"]), []).append(df)
    # Every replication's rows when asked for all (each replication replaced the last).
    return {key: dfs[0] if len(dfs) == 1 else pd.concat(dfs, ignore_index=True)
            for key, dfs in tables.items()}


def classes(ctx: Context) -> Plot:
    title = "Small against large jobs"
    cl = ctx.at_point(ctx.res.classes)
    colors = ctx.colors()
    if not cl.empty and cl["class"].nunique() > 1:
        rows = []
        for (world, label, cls), g in cl.groupby(["world", "label", "class"], sort=False):
            iv = t_interval(g["response_mean"].tolist(), _confidence(ctx), floor=0.0)
            rows.append((world, label, str(cls), iv.mean, _error_bar(iv)))
        caption = ("Mean response time per job class, averaged over replications with "
                   f"{_percent(ctx)} confidence intervals.")
        groups = list(dict.fromkeys(r[2] for r in rows))
    else:
        jobs = _jobs_at_point(ctx, replication=None)
        if not jobs:
            return Plot("classes", title, "", note=f"{title}: no classes and no stored per-job "
                        "tables at this point (experiment.keep_jobs)")
        # Each world's own split of its own jobs (sizes are ms of service in every world,
        # but the jobs differ: a real server's requests are its catalogue's files through
        # the cost model, and a server without an emulated cost has no sizes).
        bounds = {}
        for world in dict.fromkeys(w for w, _ in jobs):
            sizes = pd.concat([df["size"] for (w, _), df in jobs.items() if w == world])
            sizes = sizes[np.isfinite(sizes.to_numpy(dtype=float))]
            lo, hi = (float(sizes.quantile(q)) for q in (0.5, 0.9)) if len(sizes) else (0, 0)
            if hi > lo:
                bounds[world] = (lo, hi)
        if not bounds:
            return Plot("classes", title, "", note=f"{title}: every job has the same size "
                        "(or none), so there are no small and large jobs to compare")
        rows = []
        for (world, label), df in jobs.items():
            if world not in bounds:
                continue
            lo, hi = bounds[world]
            for name, mask in (("small (half of jobs)", df["size"] <= lo),
                               ("large (top 10% by size)", df["size"] >= hi)):
                iv = t_interval(df.loc[mask, "response"].tolist(), _confidence(ctx),
                                floor=0.0)
                rows.append((world, label, name, iv.mean, _error_bar(iv)))
        splits = "; ".join(
            f"{world}: small up to {lo:.3g}, large from {hi:.3g} {ctx.unit('ms')}"
            for world, (lo, hi) in bounds.items())
        same = [w for w in dict.fromkeys(w for w, _ in jobs) if w not in bounds]
        caption = ("Mean response time of the smallest half and the largest tenth of jobs "
                   f"by size (service), each world's split of its own jobs ({splits}); stored "
                   f"per-job rows of every replication; {_percent(ctx)} intervals treat jobs "
                   "as independent, so they are optimistic."
                   + (f" Not shown: {', '.join(same)}, whose jobs are all of one size "
                      "or have none (a server without an emulated cost)." if same else ""))
        groups = list(dict.fromkeys(r[2] for r in rows))
    fig, axes = _figure(1, len(groups), figsize=(min(4.5 * len(groups), 12), 4),
                        squeeze=False)
    for ax, grp in zip(axes[0], groups, strict=True):
        sub = [r for r in rows if r[2] == grp]
        pos = np.arange(len(sub))
        ax.bar(pos, [r[3] for r in sub], yerr=np.array([r[4] for r in sub]).T, capsize=3,
               color=[colors.get(r[1]) for r in sub], alpha=0.85)
        ax.set_xticks(pos, [r[1] + (f" [{r[0]}]" if len(ctx.worlds) > 1 else "") for r in sub],
                      rotation=20)
        ax.set_title(f"class {grp}" if len(grp) < 20 else grp)
        ax.set_ylabel(ctx.label("response_mean"))
    _suptitle(fig, title + ctx.point_desc())
    return Plot("classes", title, caption, fig)


def _error_bar(iv: Any) -> tuple[float, float]:
    """An interval as a bar's error below and above its mean (none without an interval)."""
    if math.isnan(iv.half_width):
        return 0.0, 0.0
    return iv.mean - iv.low, iv.high - iv.mean


def cdf_points(n: int, keep: int | None = None, most: int = CDF_PANELS) -> list[int]:
    """The sweep points that get a CDF panel: all of them, or `most` spread evenly over the
    sweep (first and last included), `keep` (the file's report.point) always among them."""
    if n <= most:
        return list(range(n))
    points = sorted({int(round(v)) for v in np.linspace(0, n - 1, most)})
    if keep is not None and 0 <= keep < n and keep not in points:
        # It takes the place of the nearest point between the first and the last.
        nearest = min(points[1:-1] or points, key=lambda p: (abs(p - keep), p))
        points = sorted([p for p in points if p != nearest] + [keep])
    return points


@dataclass
class CdfGrid:
    """The sweep points that get a CDF panel, in the order drawn (row by row), the grid's
    columns (0: as many as suit the number of panels), and, for a grid laid out by the sweep,
    the keys of its rows and the key and values of its columns."""

    points: list[int]
    columns: int = 0
    row_keys: list[str] = field(default_factory=list)
    column_key: str | None = None
    column_values: list[Any] = field(default_factory=list)


def cdf_grid(coords: list[dict[str, Any]], x: str | None, keep: int | None = None) -> CdfGrid:
    """Which points get a CDF panel. A sweep of several keys over every combination of their
    values: a row per combination of the keys other than x (at most CDF_ROWS) and a column per
    value of x (at most CDF_COLUMNS: the first, report.point's and the last), so that a column
    compares the other keys (linux and windows balancers) at one x. Any other sweep: at most
    CDF_PANELS points spread evenly over it (`cdf_points`)."""
    n = max(len(coords), 1)
    others = [k for k in coords[0] if k != x] if coords else []
    if x is None or not others or any(set(c) != set(coords[0]) for c in coords):
        return CdfGrid(cdf_points(n, keep))

    def key(c: dict[str, Any], names: list[str]) -> str:
        return json.dumps([c[k] for k in names], sort_keys=True, default=str)

    rows = list(dict.fromkeys(key(c, others) for c in coords))
    columns = list(dict.fromkeys(key(c, [x]) for c in coords))
    at = {(key(c, others), key(c, [x])): i for i, c in enumerate(coords)}
    if len(rows) < 2 or len(at) != n or len(rows) * len(columns) != n:
        return CdfGrid(cdf_points(n, keep))
    kept = coords[keep] if keep is not None and 0 <= keep < n else None
    pick_rows = cdf_points(len(rows), rows.index(key(kept, others)) if kept else None,
                           CDF_ROWS)
    pick_columns = cdf_points(len(columns), columns.index(key(kept, [x])) if kept else None,
                              CDF_COLUMNS)
    points = [at[(rows[r], columns[c])] for r in pick_rows for c in pick_columns]
    return CdfGrid(points, len(pick_columns), others, x,
                   [coords[at[(rows[0], columns[c])]][x] for c in pick_columns])


def cdf(ctx: Context) -> Plot:
    """Small multiples: one panel per sweep point (`cdf_grid`: laid out by the sweep's keys, or
    at most CDF_PANELS spread over it), shared axes, one legend."""
    title = "Response-time distribution"
    coords = ctx.res.manifest.get("points") or [{}]
    npoints = max(len(coords), 1)
    keep = ctx.cfg.point if ctx.cfg.point is not None else None
    grid = cdf_grid(coords, ctx.x, keep)
    chosen = grid.points
    panels = [(p, j) for p in chosen if (j := _jobs_at_point(ctx, point=p))]
    if not panels:
        return Plot("cdf", title, "", note=f"{title}: no stored per-job tables at these points "
                    "(experiment.keep_jobs = \"first\" or true stores them)")
    by_sweep = grid.columns > 0 and len(panels) == len(chosen)
    if grid.columns and not by_sweep:  # points without per-job tables: no grid to keep
        panels = [(p, j) for p in cdf_points(npoints, keep)
                  if (j := _jobs_at_point(ctx, point=p))]
        chosen = [p for p, _ in panels]
    n = len(panels)
    ncols = grid.columns if by_sweep else 1 if n == 1 else 2 if n in (2, 4) else 3
    nrows = math.ceil(n / ncols)
    size = (8.5, 4.2) if n == 1 else (3.5 * ncols + 1.8, 2.6 * nrows + (1.4 if nrows == 1
                                                                        else 0.8))
    fig, axes = _figure(nrows, ncols, figsize=size, sharex=True, sharey=True, squeeze=False)
    colors = ctx.colors()
    styles = ["-", "--", ":", "-."]
    lines = []  # (ax, point, xs, q, style, colour, name), drawn once the scale is known
    lo, hi = math.inf, 0.0
    for (p, jobs), ax in zip(panels, axes.flat, strict=False):
        for (world, label), df in jobs.items():
            r = np.sort(df["response"].to_numpy(float))
            r = r[np.isfinite(r)]
            if not len(r):
                continue
            q = np.linspace(0, 1, min(CDF_POINTS, len(r)))
            lines.append((ax, p, label, np.quantile(r, q), q,
                          styles[ctx.worlds.index(world) % 4], colors.get(label),
                          label + (f" [{world}]" if len(ctx.worlds) > 1 else "")))
            pos = r[r > 0]
            if len(pos):
                lo, hi = min(lo, float(pos.min())), max(hi, float(pos.max()))
    log = math.isfinite(lo) and hi / lo > 100
    theory: list[str] = []
    unit = ctx.time_unit
    for (p, _), ax in zip(panels, axes.flat, strict=False):
        here = [ln for ln in lines if ln[0] is ax]
        for _, _, _, xs, q, ls, color, name in here:
            ax.plot(xs, q, ls, color=color, label=name)
        if ctx.cfg.theory and hi > 0:
            suffix = f"-p{p}" if n > 1 else ""
            labels = list(dict.fromkeys(ln[2] for ln in here))
            theory += _theory_cdfs(ctx, ax, labels, lo, hi, log, p, suffix)
        for level in (0.95, 0.99):
            ax.axhline(level, color="grey", lw=0.6, ls=":")
        if n > 1:
            ax.set_title(ctx.short_coords(p), fontsize=9, loc="left")
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    for i, ax in enumerate(axes.flat[:n]):
        if log:
            ax.set_xscale("log")
        if i % ncols == 0:
            ax.set_ylabel("fraction of jobs (ratio)")
        if i + ncols >= n:  # the lowest panel of its column
            ax.set_xlabel(f"response time ({unit})")
            ax.xaxis.set_tick_params(labelbottom=True)
    if n == 1:
        axes[0][0].set_title(title + ctx.point_desc(panels[0][0]))
    else:
        fig.suptitle(title)
    figure_legend(fig, axes.flat[:n])
    caption = ("Empirical CDF of response time (replication 0, stored per-job rows); dotted "
               "grey lines mark p95 and p99.")
    if by_sweep:
        caption += (f" One panel per sweep point, with shared axes: a row per "
                    f"{_names([_short_key(k) for k in grid.row_keys])}, a column per "
                    f"{_short_key(str(grid.column_key))} ("
                    f"{_names([_short(v) for v in grid.column_values])})"
                    + (f"; {n} of the {npoints} points (every point's numbers are in the "
                       "tables)" if npoints > n else "") + ".")
    elif n > 1:
        caption += (" One panel per sweep point, with shared axes"
                    + (f": {n} of the {npoints} points, spread evenly over the sweep (points "
                       f"{_names([str(p) for p, _ in panels])}, counted from 0; every point's "
                       "numbers are in the tables)" if npoints > n else "") + ".")
    missing = [p for p in chosen if p not in {q for q, _ in panels}]
    if missing:
        caption += (f" No stored per-job tables at point{'s' if len(missing) > 1 else ''} "
                    f"{_names([str(p) for p in missing])}.")
    theory = list(dict.fromkeys(theory))
    if theory:
        caption += (" Thin dotted lines of the same colour are queueing theory's response-time "
                    "distribution, open diamonds its p95 and p99, for " + _names(theory) + ".")
    return Plot("cdf", title, caption, fig)


def _theory_cdfs(ctx: Context, ax: Any, labels: list[str], lo: float, hi: float,
                 log: bool, point: int, suffix: str = "") -> list[str]:
    """Draws the theory CDF and its p95 and p99 for each policy whose point has one (once per
    policy: theory describes the workload, whatever world ran it); returns those policies."""
    colors = ctx.colors()
    drawn = []
    for label in labels:
        spec = ctx.theory_specs.get((point, label))
        tails = sweep.theory_quantile(spec, [0.95, 0.99]) if spec is not None else None
        if tails is None:
            continue
        top = max(hi, float(tails[-1]))  # a short run may not reach the theory's p99
        xs = np.geomspace(lo, top, THEORY_CDF_POINTS) if log else \
            np.linspace(0.0, top, THEORY_CDF_POINTS)
        ys = sweep.theory_cdf(spec, xs)
        if ys is None:
            continue
        slug = "".join(c if c.isalnum() else "-" for c in label)
        (line,) = ax.plot(xs, ys, ":", lw=1.0, color=colors.get(label),
                          label=f"{label}: theory")
        line.set_gid(f"theory-cdf-{slug}{suffix}")  # an element id in the SVG
        (marks,) = ax.plot(tails, [0.95, 0.99], "D", ms=5, mfc="none", mew=1.2,
                           color=colors.get(label))
        marks.set_gid(f"theory-tail-{slug}{suffix}")
        drawn.append(label)
    return drawn


def _per_cpu_means(s: pd.DataFrame, column: str) -> list[tuple[str, str, np.ndarray]]:
    """(world, label, mean over replications) of a per-CPU list column."""
    rows = []
    if column not in s:
        return rows
    for (world, label), g in s.groupby(["world", "label"], sort=False):
        per = [np.asarray(v, dtype=float) for v in g[column]
               if isinstance(v, list | tuple | np.ndarray) and len(v)]
        if per and all(len(p) == len(per[0]) for p in per) and np.isfinite(per).any():
            rows.append((world, label, np.nanmean(per, axis=0)))
    return rows


def load(ctx: Context) -> Plot:
    title = "Load distribution across CPUs"
    s = ctx.at_point(ctx.res.summaries)
    panels = [(rows, ylabel) for rows, ylabel in (
        (_per_cpu_means(s, "utilization_per_cpu"), ctx.label("utilization_per_cpu")),
        (_per_cpu_means(s, "runnable_mean_per_cpu"),
         "runnable jobs (jobs; time-weighted mean)")) if rows]
    if not panels:
        return Plot("load", title, "", note=f"{title}: no per-CPU utilisation or runqueue "
                    "lengths in the results")
    ncpu = max(len(r[2]) for rows, _ in panels for r in rows)
    nrows = max(len(rows) for rows, _ in panels)
    width_in = min(12, max(6, 0.25 * ncpu * nrows + 4) * (1 + 0.6 * (len(panels) - 1)) + 1.5)
    fig, axes = _figure(1, len(panels), figsize=(width_in, 4), squeeze=False)
    colors = ctx.colors()
    shared_queue = False
    for ax, (rows, ylabel) in zip(axes[0], panels, strict=True):
        width = 0.8 / len(rows)
        # A global runqueue is one queue that every CPU serves: one bar of its own, not CPU
        # 0's beside empty CPUs (the other CPUs were as busy as CPU 0).
        shared = ncpu > 1 and any(len(u) == 1 for _, _, u in rows)
        n = max((len(u) for _, _, u in rows if len(u) > 1 or ncpu == 1), default=0)
        ticks = [f"CPU {i}" for i in range(n)] + (["global runqueue"] if shared else [])
        shared_queue |= shared
        for i, (world, label, u) in enumerate(rows):
            at = np.array([n]) if shared and len(u) == 1 else np.arange(len(u))
            ax.bar(at + i * width - 0.4 + width / 2, u, width,
                   color=colors.get(label), label=label + (f" [{world}]" if len(ctx.worlds) > 1
                                                           else ""))
        ax.set_xticks(range(len(ticks)), ticks)
        if ylabel.startswith("utilisation"):
            ax.set_ylim(0, 1.05)
        ax.set_ylabel(ylabel)
    figure_legend(fig, axes[0])
    _suptitle(fig, title + ctx.point_desc())
    # One word for three windows would mislead: the real worlds count CPU time per process
    # (docs/os.md, docs/server.md), not per interval.
    caption = ("Busy fraction of each CPU, mean of replications: over the measured interval "
               "in the simulator, over the whole run (warm-up included) in the server and os "
               "worlds, whose CPU time is counted per worker, not per interval.")
    if len(panels) > 1 or not panels[0][1].startswith("utilisation"):
        caption += (" Runnable tasks (running or waiting) on each CPU's runqueue, time-weighted "
                    "mean over the measured interval (os: sampled at a fixed period).")
        if shared_queue:
            caption += (" With a global runqueue (machine.runqueues = global) the CPUs share "
                        "one queue: its bar is all the runnable tasks.")
    else:
        caption += (" The distribution of runnable tasks per CPU is not in these results "
                    "(it comes with per-CPU runqueues).")
    return Plot("load", title, caption, fig)


def load_series(ctx: Context) -> Plot:
    """Runnable tasks per CPU over time: the simulator's `load_series` (key load_sample) and
    the os world's placement samples, in one table shape (time, cpu, runnable)."""
    title = "Runnable tasks per CPU over time"
    s = ctx.at_point(ctx.res.summaries)
    s = s[s["replication"] == s["replication"].min()] if len(s) else s
    panels = []
    for _, row in s.iterrows():
        df = ctx.res.run_table(row["run"], "load_series")
        if df is not None and len(df):
            panels.append((row["world"], row["label"], df, _warmup_end(ctx, row)))
    if not panels:
        return Plot("load_series", title, "", note=f"{title}: no load time series at this "
                    "point (experiment.load_sample in the simulator; the os world samples "
                    "placement by itself)")
    labels = list(dict.fromkeys(p[1] for p in panels))
    worlds = list(dict.fromkeys(p[0] for p in panels))
    warmups = False
    fig, axes = _figure(len(labels), len(worlds), figsize=(min(5.5 * len(worlds) + 1.5, 13),
                                                          0.6 + 2.4 * len(labels)),
                        squeeze=False, sharex=True, sharey=True)
    cmap = matplotlib.colormaps["tab10"]
    for world, label, df, warmup_end in panels:
        ax = axes[labels.index(label)][worlds.index(world)]
        for cpu, g in df.groupby("cpu", sort=True):
            g = g.sort_values("time")
            ax.step(g["time"], g["runnable"], where="post", lw=1.1, color=cmap(int(cpu) % 10),
                    label=f"CPU {int(cpu)}" if int(cpu) >= 0 else "global queue")
        if warmup_end is not None:
            ax.axvline(warmup_end, color="black", ls="--", lw=1.0,
                       label="end of the warm-up").set_gid("warmup-end")
            warmups = True
        ax.set_title(label + (f" [{world}]" if len(ctx.worlds) > 1 else ""), fontsize=9,
                     loc="left")
        ax.set_ylabel("runnable jobs (jobs)")
    for ax in axes[-1]:
        ax.set_xlabel(f"time ({ctx.time_unit})")
    figure_legend(fig, axes)
    _suptitle(fig, title + ctx.point_desc())
    caption = ("Tasks runnable (running or waiting) on each CPU at each sample, replication 0: "
               "the simulator samples its runqueues every experiment.load_sample ms; the os "
               "world reads where every worker is (state R) at its own sampling period.")
    if warmups:
        caption += (" The dashed vertical line is the end of the warm-up: jobs arriving before "
                    "it are not measured.")
    return Plot("load_series", title, caption, fig)


def _warmup_end(ctx: Context, row: Any) -> float | None:
    """When the run's measured interval began (`warmup_time`, ms), if it discarded a warm-up:
    jobs (`warmup_jobs`, auto or set) or a time its spec set. Without one, `warmup_time` is
    merely the first arrival, no end of anything."""
    t = row.get("warmup_time")
    if t is None or not pd.notna(t) or float(t) <= 0:
        return None
    jobs = row.get("warmup_jobs")
    set_time = ctx.run_specs.get(row["run"], {}).get("warmup_time") or 0
    if (jobs is not None and pd.notna(jobs) and jobs > 0) or float(set_time) > 0:
        return float(t)
    return None


def gantt(ctx: Context) -> Plot:
    title = "Schedule (Gantt chart)"
    s = ctx.res.summaries
    at = s[s["point"] == ctx.point]
    candidates = pd.concat([at, s[s["point"] != ctx.point]])
    chosen, seen = [], set()
    for _, row in candidates.iterrows():
        if row["run"] in seen or len(chosen) >= ctx.cfg.gantt_runs:
            continue
        sched = ctx.res.run_table(row["run"], "schedule")
        if sched is None or sched.empty or len(sched) > ctx.cfg.gantt_max_segments:
            continue
        seen.add(row["run"])
        chosen.append((row, sched))
    if not chosen:
        return Plot("gantt", title, "", note=f"{title}: no small run with a stored schedule "
                    f"(set experiment.keep_schedule; at most {ctx.cfg.gantt_max_segments} "
                    "segments per run, report.gantt_max_segments)")
    end = max(float(sc["end"].max()) for _, sc in chosen)
    ncpu = max(int(sc["cpu"].max()) + 1 for _, sc in chosen)
    fig, axes = _figure(len(chosen), 1, figsize=(11, 0.5 + len(chosen) * (0.45 * ncpu + 0.9)),
                        sharex=True, squeeze=False)
    cmap = matplotlib.colormaps["tab20"]
    for ax, (row, sc) in zip(axes[:, 0], chosen, strict=True):
        if sc["job"].isna().any():  # the os dispatcher schedules processes, not jobs
            sc = sc.assign(job=sc["task"])
        sc = sc.sort_values(["job", "start"]).reset_index(drop=True)
        # Preempted: the job's next segment starts later, or on another CPU. A quantum that
        # expires with nobody else waiting continues at once and is no preemption.
        same = sc["job"].shift(-1) == sc["job"]
        pre = sc[same & ((sc["start"].shift(-1) > sc["end"] + 1e-9)
                         | (sc["cpu"].shift(-1) != sc["cpu"]))]
        for _, seg in sc.iterrows():
            color = cmap(int(seg["job"]) % 20)
            w = float(seg["end"] - seg["start"])
            drawn = max(w, end / 400)  # a very short job stays visible as a sliver
            ax.broken_barh([(float(seg["start"]), drawn)], (int(seg["cpu"]) - 0.4, 0.8),
                           facecolors=color, edgecolors="black", linewidth=0.4)
            if w > end / 40:
                ax.text(float(seg["start"]) + w / 2, int(seg["cpu"]), str(int(seg["job"])),
                        ha="center", va="center", fontsize=7)
        if len(pre):
            ax.plot(pre["end"], pre["cpu"] + 0.42, "v", color="crimson", ms=4,
                    label="preempted")
        ax.set_yticks(range(ncpu), [f"CPU {i}" for i in range(ncpu)])
        ax.set_ylim(-0.6, ncpu - 0.4)
        coords = ", ".join(f"{_short_key(k)}={_short(row[k])}" for k in ctx.res.sweep_keys)
        ax.set_title(f"{row['label']}" + (f" [{row['world']}]" if len(ctx.worlds) > 1 else "")
                     + (f" ({coords})" if coords else "") + f", replication {row['replication']}",
                     fontsize=9, loc="left")
        ax.grid(False)
    axes[-1, 0].set_xlabel(f"time ({ctx.time_unit})")
    axes[-1, 0].set_xlim(0, end * 1.01)
    figure_legend(fig, axes[:, 0])
    return Plot("gantt", title, "One row per CPU; colours are jobs (numbers inside wide "
                "segments); a red triangle marks a job taken off the CPU before it finished.",
                fig)


PLOTTERS: dict[str, Callable[[Context], Plot]] = {
    "response": response, "percentiles": percentiles, "throughput": throughput,
    "fairness": fairness, "share": share, "classes": classes, "cdf": cdf, "load": load,
    "load_series": load_series, "gantt": gantt, "balance": balance, "makespan": makespan,
    "context_switches": context_switches,
}

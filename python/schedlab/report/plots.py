"""The report's figures. Each plotter takes the report context and returns a figure, or a note
saying why there is nothing to draw; none of them may stop the report."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: files only

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from schedlab import sweep  # noqa: E402
from schedlab.jsonio import json_safe  # noqa: E402
from schedlab.stats import t_interval  # noqa: E402

plt.rcParams.update({
    "figure.dpi": 100, "savefig.dpi": 110, "axes.grid": True, "grid.alpha": 0.3,
    "axes.spines.top": False, "axes.spines.right": False, "font.size": 9,
    "svg.fonttype": "none", "legend.fontsize": 8, "legend.frameon": False,
})

CDF_POINTS = 600  # points per CDF line: the shape, not every job
# Points per theory CDF: a numerically inverted transform costs milliseconds per point.
THEORY_CDF_POINTS = 150


@dataclass
class Plot:
    name: str
    title: str
    caption: str
    figure: Figure | None = None
    note: str | None = None


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

    def series_name(self, world: str, label: str, row: Any) -> str:
        name = label
        if len(self.worlds) > 1:
            name += f" [{world}]"
        for k in self.others:
            name += f", {k.rsplit('.', 1)[-1]}={_fmt(row[k])}"
        return name

    def point_desc(self) -> str:
        coords = self.res.manifest["points"][self.point] if self.res.manifest["points"] else {}
        if not coords:
            return ""
        return " at " + ", ".join(f"{k} = {_fmt(v)}" for k, v in coords.items())

    def colors(self) -> dict[str, Any]:
        cmap = plt.get_cmap("tab10")
        return {lab: cmap(i % 10) for i, lab in enumerate(self.res.labels)}

    def at_point(self, df: pd.DataFrame) -> pd.DataFrame:
        return df[df["point"] == self.point] if "point" in df else df

    @cached_property
    def theory_specs(self) -> dict[tuple[int, str], dict[str, Any] | None]:
        return theory_specs(self.res.manifest)

    @cached_property
    def run_specs(self) -> dict[str, dict[str, Any]]:
        return {r["id"]: r.get("spec") or {} for r in self.res.manifest.get("runs", [])}


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


def _numeric(values: pd.Series) -> bool:
    return bool(pd.api.types.is_numeric_dtype(values)) and not pd.api.types.is_bool_dtype(values)


# ---------------------------------------------------------------------------------------------
# Metric against the swept parameter (or bars when nothing is swept)
# ---------------------------------------------------------------------------------------------


def _metric_axes(ctx: Context, ax: Any, metric: str, ylabel: str, theory: bool = False) -> bool:
    st = ctx.res.metric(metric)
    if st.empty or st["mean"].isna().all():
        return False
    colors = ctx.colors()
    if ctx.x is None:
        return _metric_bars(ctx, ax, st, ylabel, theory, colors)
    xs = st[ctx.x]
    numeric = _numeric(xs)
    cats = list(dict.fromkeys(xs.astype(str))) if not numeric else []
    groups = st.groupby(["world", "label", *ctx.others], sort=False)
    styles = ["-", "--", ":", "-."]
    for i, (keys, g) in enumerate(groups):
        world, label = keys[0], keys[1]
        g = g.sort_values(ctx.x) if numeric else g
        x = g[ctx.x].to_numpy(float) if numeric else np.array([cats.index(str(v))
                                                                for v in g[ctx.x]])
        color = colors.get(label)
        ls = styles[ctx.worlds.index(world) % len(styles)]
        name = ctx.series_name(world, label, g.iloc[0])
        ax.plot(x, g["mean"], ls, marker="o", ms=3, color=color, label=name)
        ok = g["half_width"].notna().to_numpy()
        if ok.any():
            ax.fill_between(x[ok], g["ci_low"][ok], g["ci_high"][ok], color=color, alpha=0.18,
                            lw=0)
        if theory and ctx.cfg.theory and g["theory"].notna().any():
            t = g["theory"].to_numpy(float)
            ax.plot(x, t, ":", color=color, lw=1.5, label=f"{name}: theory" if i < 12 else None)
    if not numeric:
        ax.set_xticks(range(len(cats)), cats, rotation=20)
    else:
        if ctx.cfg.log_x:
            ax.set_xscale("log")
        ticks = sorted(set(xs.astype(float)))
        if len(ticks) <= 12:  # the swept values themselves, not 10^0, 10^1
            ax.set_xticks(ticks, [_fmt(t) for t in ticks])
            ax.minorticks_off()
    ax.set_xlabel(ctx.cfg.x_label or ctx.x)
    ax.set_ylabel(ylabel)
    return True


def _metric_bars(ctx: Context, ax: Any, st: pd.DataFrame, ylabel: str, theory: bool,
                 colors: dict[str, Any]) -> bool:
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
            ax.legend()
    ax.set_xticks(pos, names, rotation=15)
    ax.set_ylabel(ylabel)
    return True


def _single(ctx: Context, name: str, title: str, caption: str, metric: str, ylabel: str,
            theory: bool = False) -> Plot:
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    if not _metric_axes(ctx, ax, metric, ylabel, theory):
        plt.close(fig)
        return Plot(name, title, caption, note=f"{title}: no values of {metric} in the results")
    ax.set_title(title)
    if ctx.x is not None:
        ax.legend(loc="best", ncols=2 if len(ax.get_legend_handles_labels()[0]) > 8 else 1)
    fig.tight_layout()
    return Plot(name, title, caption, fig)


def response(ctx: Context) -> Plot:
    conf = int(round(100 * ctx.res.manifest["experiment"].get("experiment", {})
                     .get("confidence", 0.95)))
    return _single(ctx, "response", "Mean response time",
                   f"Mean response time with {conf}% confidence bands (Student t across "
                   "replications, or the batch-means interval of one run); dotted lines (black "
                   "bars) are the closed forms of queueing theory where one exists.",
                   "response_mean", "mean response time", theory=True)


def percentiles(ctx: Context) -> Plot:
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=False)
    drawn = [_metric_axes(ctx, ax, m, lab, theory=True) for ax, m, lab in
             zip(axes, ("response_p95", "response_p99"), ("p95 response", "p99 response"),
                 strict=True)]
    if not any(drawn):
        plt.close(fig)
        return Plot("percentiles", "Tail latency", "", note="no p95/p99 in the results")
    axes[0].set_title("95th percentile")
    axes[1].set_title("99th percentile")
    if ctx.x is not None:
        axes[1].legend(loc="best")
    fig.tight_layout()
    return Plot("percentiles", "Tail latency: p95 and p99 of response time",
                "Per-run percentiles, averaged over replications, with confidence bands "
                "(Student t across replications, or sectioning of one run); dotted lines "
                "(black bars) are the quantiles of queueing theory's response-time "
                "distribution where it is known.", fig)


def throughput(ctx: Context) -> Plot:
    return _single(ctx, "throughput", "Throughput", "Completed jobs per unit of time over the "
                   "measured interval.", "throughput", "jobs per time unit")


def fairness(ctx: Context) -> Plot:
    metrics = [(m, t) for m, t in (("jain_slowdown", "Jain's index over slowdowns"),
                                   ("jain_share", "Jain's index over share / entitlement"))
               if not ctx.res.metric(m).empty and ctx.res.metric(m)["mean"].notna().any()]
    if not metrics:
        return Plot("fairness", "Fairness", "", note="Jain's fairness: no values in the results")
    fig, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics) + 0.5, 4),
                             squeeze=False)
    for ax, (m, t) in zip(axes[0], metrics, strict=True):
        _metric_axes(ctx, ax, m, "Jain's index (1 = fair)")
        ax.set_title(t)
        ax.set_ylim(0, 1.05)
    if ctx.x is not None:
        axes[0][-1].legend(loc="best")
    fig.tight_layout()
    return Plot("fairness", "Jain's fairness", "Jain's index J = (sum x)^2 / (n sum x^2): over "
                "per-job slowdowns, and over per-task CPU share divided by entitlement (closed "
                "workloads and classes with tickets or weights).", fig)


# ---------------------------------------------------------------------------------------------
# Per-point plots
# ---------------------------------------------------------------------------------------------


def share(ctx: Context) -> Plot:
    tasks = ctx.at_point(ctx.res.tasks)
    title = "CPU share against entitlement"
    if tasks.empty or not {"share", "entitled"} <= set(tasks.columns):
        return Plot("share", title, "", note=f"{title}: no per-task shares in these results "
                    "(they come from closed workloads: clients, or tasks in a trace)")
    fig, ax = plt.subplots(figsize=(6, 5))
    colors = ctx.colors()
    for (world, label), g in tasks.groupby(["world", "label"], sort=False):
        ax.scatter(g["entitled"], g["share"], s=18, alpha=0.7, color=colors.get(label),
                   label=ctx.series_name(world, label, g.iloc[0]) if not ctx.others else label)
    hi = float(np.nanmax([tasks["entitled"].max(), tasks["share"].max(), 0.01])) * 1.08
    ax.plot([0, hi], [0, hi], "k--", lw=1, label="share = entitlement")
    ax.set_xlim(0, hi)
    ax.set_ylim(0, hi)
    ax.set_xlabel("entitled share (tickets or weight, over the contended interval)")
    ax.set_ylabel("measured CPU share")
    ax.set_title(title + ctx.point_desc())
    ax.legend(loc="best")
    fig.tight_layout()
    return Plot("share", title, "Each dot is one task in one replication; on the dashed line a "
                "task received exactly what its tickets or weight entitle it to.", fig)


def _jobs_at_point(ctx: Context, replication: int | None = 0) -> dict[tuple[str, str], Any]:
    """Stored per-job tables at the chosen point, by (world, label)."""
    s = ctx.at_point(ctx.res.summaries)
    if replication is not None:
        s = s[s["replication"] == replication]
    out = {}
    for _, row in s.iterrows():
        df = ctx.res.run_table(row["run"], "jobs")
        if df is not None and len(df):
            out[(row["world"], row["label"])] = df
    return out


def classes(ctx: Context) -> Plot:
    title = "Small against large jobs"
    cl = ctx.at_point(ctx.res.classes)
    colors = ctx.colors()
    if not cl.empty and cl["class"].nunique() > 1:
        rows = []
        for (world, label, cls), g in cl.groupby(["world", "label", "class"], sort=False):
            iv = t_interval(g["response_mean"].tolist())
            rows.append((world, label, str(cls), iv.mean,
                         0.0 if math.isnan(iv.half_width) else iv.half_width))
        caption = ("Mean response time per job class, averaged over replications with "
                   "confidence intervals.")
        groups = list(dict.fromkeys(r[2] for r in rows))
    else:
        jobs = _jobs_at_point(ctx, replication=None)
        if not jobs:
            return Plot("classes", title, "", note=f"{title}: no classes and no stored per-job "
                        "tables at this point (experiment.keep_jobs)")
        sizes = pd.concat([j["size"] for j in jobs.values()])
        lo, hi = float(sizes.quantile(0.5)), float(sizes.quantile(0.9))
        if not hi > lo:
            return Plot("classes", title, "", note=f"{title}: every job has the same size, so "
                        "there are no small and large jobs to compare")
        rows = []
        for (world, label), df in jobs.items():
            for name, mask in ((f"small (size <= {lo:.3g}, half of jobs)", df["size"] <= lo),
                               (f"large (size >= {hi:.3g}, top 10%)", df["size"] >= hi)):
                iv = t_interval(df.loc[mask, "response"].tolist())
                rows.append((world, label, name, iv.mean,
                             0.0 if math.isnan(iv.half_width) else iv.half_width))
        caption = ("Mean response time of the smallest half and the largest tenth of jobs "
                   "(stored per-job rows of every replication); intervals treat jobs as "
                   "independent, so they are optimistic.")
        groups = list(dict.fromkeys(r[2] for r in rows))
    fig, axes = plt.subplots(1, len(groups), figsize=(min(4.5 * len(groups), 12), 4),
                             squeeze=False)
    for ax, grp in zip(axes[0], groups, strict=True):
        sub = [r for r in rows if r[2] == grp]
        pos = np.arange(len(sub))
        ax.bar(pos, [r[3] for r in sub], yerr=[r[4] for r in sub], capsize=3,
               color=[colors.get(r[1]) for r in sub], alpha=0.85)
        ax.set_xticks(pos, [r[1] + (f" [{r[0]}]" if len(ctx.worlds) > 1 else "") for r in sub],
                      rotation=20)
        ax.set_title(f"class {grp}" if len(grp) < 20 else grp)
        ax.set_ylabel("mean response time")
    fig.suptitle(title + ctx.point_desc())
    fig.tight_layout()
    return Plot("classes", title, caption, fig)


def cdf(ctx: Context) -> Plot:
    title = "Response-time distribution"
    jobs = _jobs_at_point(ctx)
    if not jobs:
        return Plot("cdf", title, "", note=f"{title}: no stored per-job tables at this point "
                    "(experiment.keep_jobs = \"first\" or true stores them)")
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    colors = ctx.colors()
    lo, hi = math.inf, 0.0
    styles = ["-", "--", ":", "-."]
    labels = []
    for (world, label), df in jobs.items():
        r = np.sort(df["response"].to_numpy(float))
        r = r[np.isfinite(r)]
        if not len(r):
            continue
        q = np.linspace(0, 1, min(CDF_POINTS, len(r)))
        xs = np.quantile(r, q)
        ax.plot(xs, q, styles[ctx.worlds.index(world) % 4], color=colors.get(label),
                label=label + (f" [{world}]" if len(ctx.worlds) > 1 else ""))
        labels.append(label)
        pos = r[r > 0]
        if len(pos):
            lo, hi = min(lo, float(pos.min())), max(hi, float(pos.max()))
    log = math.isfinite(lo) and hi / lo > 100
    theory = _theory_cdfs(ctx, ax, list(dict.fromkeys(labels)), lo, hi, log) \
        if ctx.cfg.theory and hi > 0 else []
    if log:
        ax.set_xscale("log")
    for p in (0.95, 0.99):
        ax.axhline(p, color="grey", lw=0.6, ls=":")
    ax.set_xlabel("response time")
    ax.set_ylabel("fraction of jobs")
    ax.set_title(title + ctx.point_desc())
    ax.legend(loc="lower right")
    fig.tight_layout()
    caption = ("Empirical CDF of response time (replication 0, stored per-job rows); dotted "
               "grey lines mark p95 and p99.")
    if theory:
        caption += (" Thin dotted lines of the same colour are queueing theory's response-time "
                    "distribution, open diamonds its p95 and p99, for " + ", ".join(theory)
                    + ".")
    return Plot("cdf", title, caption, fig)


def _theory_cdfs(ctx: Context, ax: Any, labels: list[str], lo: float, hi: float,
                 log: bool) -> list[str]:
    """Draws the theory CDF and its p95 and p99 for each policy whose point has one (once per
    policy: theory describes the workload, whatever world ran it); returns those policies."""
    colors = ctx.colors()
    drawn = []
    for label in labels:
        spec = ctx.theory_specs.get((ctx.point, label))
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
        line.set_gid(f"theory-cdf-{slug}")  # an element id in the SVG
        (marks,) = ax.plot(tails, [0.95, 0.99], "D", ms=5, mfc="none", mew=1.2,
                           color=colors.get(label))
        marks.set_gid(f"theory-tail-{slug}")
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
        (_per_cpu_means(s, "utilization_per_cpu"), "utilisation"),
        (_per_cpu_means(s, "runnable_mean_per_cpu"), "runnable tasks (time mean)")) if rows]
    if not panels:
        return Plot("load", title, "", note=f"{title}: no per-CPU utilisation or runqueue "
                    "lengths in the results")
    ncpu = max(len(r[2]) for rows, _ in panels for r in rows)
    nrows = max(len(rows) for rows, _ in panels)
    width_in = min(12, max(6, 0.25 * ncpu * nrows + 4) * (1 + 0.6 * (len(panels) - 1)))
    fig, axes = plt.subplots(1, len(panels), figsize=(width_in, 4), squeeze=False)
    colors = ctx.colors()
    for ax, (rows, ylabel) in zip(axes[0], panels, strict=True):
        width = 0.8 / len(rows)
        for i, (world, label, u) in enumerate(rows):
            ax.bar(np.arange(len(u)) + i * width - 0.4 + width / 2, u, width,
                   color=colors.get(label), label=label + (f" [{world}]" if len(ctx.worlds) > 1
                                                           else ""))
        ax.set_xticks(range(ncpu), [f"CPU {i}" for i in range(ncpu)])
        if ylabel == "utilisation":
            ax.set_ylim(0, 1.05)
        ax.set_ylabel(ylabel)
        ax.legend(loc="lower right", fontsize=8)
    fig.suptitle(title + ctx.point_desc())
    fig.tight_layout()
    caption = "Busy fraction of each CPU over the measured interval, mean of replications."
    if len(panels) > 1 or panels[0][1] != "utilisation":
        caption += (" Runnable tasks (running or waiting) on each CPU's runqueue, time-weighted "
                    "mean over the measured interval (os: sampled at a fixed period).")
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
    fig, axes = plt.subplots(len(labels), len(worlds), figsize=(min(5.5 * len(worlds), 12),
                                                               0.6 + 2.4 * len(labels)),
                             squeeze=False, sharex=True, sharey=True)
    cmap = plt.get_cmap("tab10")
    for world, label, df, warmup_end in panels:
        ax = axes[labels.index(label)][worlds.index(world)]
        for cpu, g in df.groupby("cpu", sort=True):
            g = g.sort_values("time")
            ax.step(g["time"], g["runnable"], where="post", lw=1.1, color=cmap(int(cpu) % 10),
                    label=f"CPU {int(cpu)}")
        if warmup_end is not None:
            ax.axvline(warmup_end, color="black", ls="--", lw=1.0,
                       label="end of warm-up").set_gid("warmup-end")
            warmups = True
        ax.set_title(label + (f" [{world}]" if len(ctx.worlds) > 1 else ""), fontsize=9,
                     loc="left")
        ax.set_ylabel("runnable tasks")
        ax.legend(loc="upper right", ncols=2)
    for ax in axes[-1]:
        ax.set_xlabel("time (ms)")
    fig.suptitle(title + ctx.point_desc())
    fig.tight_layout()
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
    fig, axes = plt.subplots(len(chosen), 1, figsize=(10, 0.5 + len(chosen) * (0.45 * ncpu + 0.9)),
                             sharex=True, squeeze=False)
    cmap = plt.get_cmap("tab20")
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
            ax.legend(loc="upper right")
        ax.set_yticks(range(ncpu), [f"CPU {i}" for i in range(ncpu)])
        ax.set_ylim(-0.6, ncpu - 0.4)
        coords = ", ".join(f"{k.rsplit('.', 1)[-1]}={_fmt(row[k])}"
                           for k in ctx.res.sweep_keys)
        ax.set_title(f"{row['label']}" + (f" [{row['world']}]" if len(ctx.worlds) > 1 else "")
                     + (f" ({coords})" if coords else "") + f", replication {row['replication']}",
                     fontsize=9, loc="left")
        ax.grid(False)
    axes[-1, 0].set_xlabel("time")
    axes[-1, 0].set_xlim(0, end * 1.01)
    fig.tight_layout()
    return Plot("gantt", title, "One row per CPU; colours are jobs (numbers inside wide "
                "segments); a red triangle marks a job taken off the CPU before it finished.",
                fig)


PLOTTERS: dict[str, Callable[[Context], Plot]] = {
    "response": response, "percentiles": percentiles, "throughput": throughput,
    "fairness": fairness, "share": share, "classes": classes, "cdf": cdf, "load": load,
    "load_series": load_series, "gantt": gantt,
}

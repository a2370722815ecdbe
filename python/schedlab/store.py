"""A results directory, read back: the manifest, the combined tables and each run's stored
per-job rows, run segments and load series, as tidy DataFrames (`load_results`). Written by
`schedlab.sweep`; read by the API, the report and anyone with pandas."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from schedlab.results import plural
from schedlab.summary_rows import LABELS, UNITS, html_table, interval_text, number_text
from schedlab.vocabulary import DEFAULT_SEED, in_time_unit, spec_error

FORMAT = 1
MANIFEST = "manifest.json"
RUNS = "runs"
# The metrics of a results directory's table in a notebook (`Results._repr_html_`), and how
# many rows it shows (`.stats` has them all).
SHOWN_METRICS = ["response_mean", "response_p99", "throughput"]
SHOWN_ROWS = 30
# The tables a run may keep beside its summary (runs/RUN.KIND.parquet, as the sweep stores
# them).
RUN_TABLES = ("jobs", "schedule", "load_series", "migrations")


@dataclass
class Results:
    """A results directory as tidy DataFrames.

    `summaries`: one row per world x point x policy x replication, sweep keys as columns named
    by their path (`workload.load`); `stats`: mean and CI per metric (long form) with theory;
    `classes`, `tasks`: per-class and per-task rows with the same keys; `jobs`, `schedule`:
    stored per-job rows and run segments, keyed by `run` (join with `summaries` on `run`).
    """

    dir: Path
    manifest: dict[str, Any]
    summaries: pd.DataFrame
    stats: pd.DataFrame
    classes: pd.DataFrame
    tasks: pd.DataFrame
    timing: pd.DataFrame
    skipped: pd.DataFrame = field(default_factory=pd.DataFrame)

    def __post_init__(self) -> None:
        # Every number with its unit: each metric's, in the experiment's time unit (ticks for
        # the xv6 files); "" for a metric the vocabulary has none for.
        if not self.stats.empty and "metric" in self.stats and "unit" not in self.stats:
            units = {m: in_time_unit(UNITS.get(m, ""), self.time_unit)
                     for m in self.stats["metric"].unique()}
            self.stats.insert(self.stats.columns.get_loc("metric") + 1, "unit",
                              self.stats["metric"].map(units))

    @property
    def sweep_keys(self) -> list[str]:
        return list(self.manifest.get("sweep_keys", []))

    @property
    def labels(self) -> list[str]:
        return list(self.manifest.get("labels", []))

    def _stored(self, kind: str) -> pd.DataFrame:
        frames = []
        runs_dir = self.dir / RUNS
        keys = self.summaries.drop_duplicates("run").set_index("run")
        for rid in keys.index:
            path = runs_dir / f"{rid}.{kind}.parquet"
            if path.exists():
                df = pd.read_parquet(path)
                row = keys.loc[rid]
                for col in ("replication", "policy", "label", "world"):
                    df.insert(0, col, row[col])
                df.insert(0, "run", rid)
                frames.append(df)
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    @cached_property
    def jobs(self) -> pd.DataFrame:
        return self._stored("jobs")

    @cached_property
    def schedule(self) -> pd.DataFrame:
        return self._stored("schedule")

    @cached_property
    def load_series(self) -> pd.DataFrame:
        """Runnable tasks per CPU over time (time, cpu, runnable) of every run that has it."""
        return self._stored("load_series")

    def run_table(self, run: str, kind: str) -> pd.DataFrame | None:
        """A table one run kept (`kind`: one of RUN_TABLES), or None where it kept none (a
        run that was not asked to keep it)."""
        if kind not in RUN_TABLES:
            raise spec_error("kind", kind, f"a table a run keeps: {', '.join(RUN_TABLES)}")
        if run not in set(self.summaries.get("run", ())):
            raise spec_error("run", run, "a run of this results directory")
        path = self.dir / RUNS / f"{run}.{kind}.parquet"
        return pd.read_parquet(path) if path.exists() else None

    def run_result(self, run: str) -> Any:
        """One stored run as a Result: its summary row, and the tables it kept (per-job rows,
        run segments; classes and tasks from the combined tables), e.g. for `schedlab.trace`."""
        from schedlab.results import Result

        rows = self.summaries[self.summaries["run"] == run]
        if rows.empty:
            raise spec_error("run", run, "a run of this results directory")
        summary = {k: v for k, v in rows.iloc[0].to_dict().items()
                   if not (isinstance(v, float) and v != v)}

        def of_run(df: pd.DataFrame) -> pd.DataFrame:
            if df.empty or "run" not in df:
                return pd.DataFrame()
            return df[df["run"] == run].reset_index(drop=True)

        spec = next((r.get("spec") or {} for r in self.manifest.get("runs", [])
                     if r.get("id") == run), {})
        jobs, schedule = (self.run_table(run, kind) for kind in ("jobs", "schedule"))
        return Result(summary=summary, jobs=pd.DataFrame() if jobs is None else jobs,
                      classes=of_run(self.classes), tasks=of_run(self.tasks),
                      schedule=pd.DataFrame() if schedule is None else schedule,
                      spec={"world": summary.get("world", "sim"), **spec})

    def metric(self, name: str) -> pd.DataFrame:
        """The stats rows of one metric (mean, CI, theory) per world, point and policy; its
        unit in the `unit` column and in `.attrs["unit"]`."""
        known = sorted(set(self.stats.get("metric", ())))
        if name not in known and name not in UNITS:  # a summary key this run has not: no rows
            raise spec_error("metric", name, "a metric of this results directory: "
                             + (", ".join(known) or "none (no stats)"))
        rows = self.stats[self.stats.metric == name].reset_index(drop=True)
        rows.attrs["unit"] = in_time_unit(UNITS.get(name, ""), self.time_unit)
        return rows

    def _line(self) -> str:
        m, s = self.manifest, self.summaries
        name = f"{m.get('name', self.dir.name)}{' (quick)' if m.get('quick') else ''}"
        points = len(m.get("points", [])) or 1

        def spread(col: str, word: str) -> str:
            if col not in s or s[col].isna().all():
                return f"? {word}s"
            lo, hi = s[col].min(), s[col].max()
            return plural(lo, word) if lo == hi else f"{number_text(lo)}-{number_text(hi)} {word}s"

        seed = m.get("experiment", {}).get("experiment", {}).get("seed", DEFAULT_SEED)
        reps = s.groupby("world", sort=False)["replication"].nunique() if len(s) else {}
        worlds = ", ".join(f"{plural(n, 'replication')} in {w}" for w, n in reps.items())
        skipped = f" ({len(self.skipped)} skipped)" if len(self.skipped) else ""
        return (f"{name}: {', '.join(self.labels)} at {plural(points, 'point')}, "
                f"{worlds or 'no world'}; {plural(s['run'].nunique() if len(s) else 0, 'run')}"
                f"{skipped} of {spread('jobs', 'job')} on {spread('cpus', 'CPU')}, "
                f"seed {seed}; in {self.dir}")

    @property
    def time_unit(self) -> str:
        """The experiment's unit of time (`[experiment] unit`; ms unless the file says)."""
        return str(self.manifest.get("experiment", {}).get("experiment", {}).get("unit", "ms"))

    def __repr__(self) -> str:
        return f"<Results {self._line()}>"

    def _repr_html_(self) -> str:
        """Per world, sweep point and policy: the mean of each of SHOWN_METRICS with its 95%
        interval, and the closed form of the mean response where there is one."""
        stats = self.stats
        line = f"<p>{html.escape('Results ' + self._line())}</p>"
        if stats.empty or "metric" not in stats:
            return f"<div>{line}</div>"
        by = (["world"] if stats["world"].nunique() > 1 else []) + \
            [k for k in self.sweep_keys if k in stats] + ["label"]
        metrics = [m for m in SHOWN_METRICS if (stats["metric"] == m).any()]
        theory = stats[(stats["metric"] == "response_mean") & stats["theory"].notna()] \
            if "theory" in stats else stats.iloc[:0]
        unit = self.time_unit
        header = [("policy" if k == "label" else k) for k in by] + \
            [f"{LABELS[m]} ({in_time_unit(UNITS[m], unit)}) [95% interval]" for m in metrics]
        if len(theory):
            header.append(f"theory: {LABELS['response_mean']} "
                          f"({in_time_unit(UNITS['response_mean'], unit)})")
        cells: dict[tuple, dict[str, str]] = {}
        for _, r in stats[stats["metric"].isin(metrics)].iterrows():
            ci = (r["ci_low"], r["ci_high"])
            shown = interval_text(ci if all(map(np.isfinite, ci)) else None)
            row = cells.setdefault(tuple(r[k] for k in by), {})
            row[r["metric"]] = f"{number_text(r['mean'])} {shown}".strip()
        for _, r in theory.iterrows():
            cells[tuple(r[k] for k in by)]["theory"] = number_text(r["theory"])
        rows = [[number_text(v) for v in key] + [row.get(m, "") for m in metrics]
                + ([row.get("theory", "—")] if len(theory) else [])
                for key, row in cells.items()]
        more = len(rows) - SHOWN_ROWS
        table = html_table(header, rows[:SHOWN_ROWS], right=set(range(len(by), len(header))))
        note = f"<p>... {more} more rows: <code>.stats</code> has them all</p>" if more > 0 \
            else ""
        return f"<div>{table}{note}{line}</div>"


def load_results(directory: str | Path) -> Results:
    """Reads a results directory written by `schedlab run`."""
    d = Path(directory)
    path = d / MANIFEST
    if not path.exists():
        raise spec_error("results", str(d), "a directory written by `schedlab run` (no "
                         "manifest.json)")
    try:
        with open(path) as f:
            manifest = json.load(f)
        runs = manifest["runs"]
        ids = {r["id"] for r in runs}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise spec_error("results", str(d), "a directory written by `schedlab run` (its "
                         f"manifest.json is damaged: {type(e).__name__}: {e})") from None
    if manifest.get("format") != FORMAT:  # another version's tables: columns may differ
        said = json.dumps(manifest.get("format"))  # "1" as text, not as the format 1
        raise spec_error("results", str(d), f"results of format {FORMAT}, this version's "
                         f"(manifest.json says format {said}; rerun `schedlab run` into a "
                         "new directory)")
    if manifest.get("status") != "complete" or not (d / "summaries.parquet").exists():
        counts = manifest.get("counts", {})
        raise spec_error("results", str(d), "a finished sweep (this one has "
                         f"{counts.get('done', 0)} of {len(ids)}"
                         " runs done; rerun `schedlab run` to finish it)")

    def read(name: str, required: bool = False) -> pd.DataFrame:
        p = d / name
        if not (p.exists() and p.stat().st_size):
            if required:  # a sweep killed while writing its combined tables
                raise spec_error("results", str(d), f"a finished sweep ({name} is missing or "
                                 "empty; rerun `schedlab run` to write it again)")
            return pd.DataFrame()
        try:
            return pd.read_parquet(p)
        except (OSError, ValueError) as e:  # pyarrow's errors are both
            raise spec_error("results", str(d), f"a directory written by `schedlab run` ({name} "
                             f"is damaged: {type(e).__name__}: {e})") from None

    return Results(d, manifest, read("summaries.parquet", True), read("stats.parquet", True),
                   read("classes.parquet"), read("tasks.parquet"), read("timing.parquet"),
                   read("skipped.parquet"))

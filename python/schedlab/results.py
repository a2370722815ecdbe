"""The result schema shared by every world: per-job table, run summary, environment, and
`summarize`, the one code (the core's) that turns a world's per-job and per-task tables into
the run summary."""

from __future__ import annotations

import html
import math
import os
import platform
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import schedlab._core as _core
from schedlab.files import atomic_file
from schedlab.jsonio import dumps
from schedlab.summary_rows import (
    ESTIMATES,
    LABELS,
    UNITS,
    UNTRUSTED_MARK,
    class_rows,
    finite_number,
    html_table,
    interval_of,
    interval_text,
    metric_rows,
    number_text,
    replication_warnings,
    run_notes,
)
from schedlab.vocabulary import spec_error, summary_units, table_units

# The tables of a run (`Result` fields; `schedlab sim --NAME-out`).
TABLES = ("jobs", "classes", "tasks", "schedule", "loads", "load_series")

JOB_COLUMNS = [
    "job", "client", "class", "cpu", "arrival", "first_run", "completion", "size", "wait",
    "response", "slowdown", "context_switches", "migrations",
]


# What `summarize` reads of a per-job table; counts (context switches, migrations) are NaN where
# a world could not measure them.
SUMMARY_COLUMNS = ["client", "class", "arrival", "completion", "size", "wait", "response",
                   "slowdown", "context_switches", "migrations"]
TASK_COLUMNS = ["task", "class", "jobs", "response_mean", "migrations", "cpu", "service",
                "share", "entitled", "share_ratio"]
CLASS_COLUMNS = ["class", "jobs", "response_mean", "response_p50", "response_p95",
                 "response_p99", "wait_mean", "slowdown_mean", "response_mean_ci",
                 "response_p50_ci", "response_p95_ci", "response_p99_ci", "wait_mean_ci",
                 "slowdown_mean_ci", "ci_uncorrelated"]


def summarize(jobs: pd.DataFrame, tasks: list[dict[str, Any]], class_names: list[str],
              counters: dict[str, Any]) -> tuple[dict[str, Any], pd.DataFrame, pd.DataFrame]:
    """The run summary, the class table and the task table of a world's run.

    `jobs`: the measured jobs, in completion order, with SUMMARY_COLUMNS (negative client: a
    one-job task; NaN: not measured). `tasks`: per task, its CPU `service` and `entitled` CPU
    over the measured interval (task, class, service, entitled, migrations, cpu). `counters`:
    what only the world measured (policy, seed, cpus, measure_start, measure_end, busy_per_cpu
    and busy_span, ...; see `schedlab_model::summary::Counters`). Quantiles are the lower
    empirical ones (the ceil(p n)-th value), spreads are sample standard deviations, Jain's
    index of nothing shared is NaN: the definitions of every world, computed by one code.
    """
    ordered = jobs.sort_values("completion", kind="stable") if len(jobs) else jobs
    columns = {c: np.ascontiguousarray(ordered[c].to_numpy(dtype=float, na_value=np.nan))
               if c in ordered else np.full(len(ordered), np.nan) for c in SUMMARY_COLUMNS}
    out = _core.summarize(columns, tasks, [str(c) for c in class_names], counters)
    return (out["summary"], pd.DataFrame(out["classes"], columns=CLASS_COLUMNS),
            pd.DataFrame(out["tasks"], columns=TASK_COLUMNS))


def cut_auto_warmup(jobs: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """`warmup = "auto"` in a real world: the jobs left after the ones MSER-5 discards from the
    responses in arrival order (the simulator's rule and code, `schedlab_model::output`), and
    how many it discarded. Jobs without a response (failed requests) are kept out of the
    series but cut with the jobs around them."""
    if jobs.empty:
        return jobs, 0
    ordered = jobs.sort_values("arrival", kind="stable")
    response = ordered["response"].to_numpy(dtype=float, na_value=np.nan)
    finite = np.flatnonzero(np.isfinite(response))
    discard, _long_enough = _core.mser5(np.ascontiguousarray(response[finite]))
    if discard == 0:
        return jobs, 0
    cut = int(finite[discard - 1]) + 1
    return ordered.iloc[cut:].reset_index(drop=True), cut


def cut_at_precise(measured: pd.DataFrame, precision: float,
                   first_look: int | None) -> pd.DataFrame:
    """A real run its precision rule stopped: the measured jobs up to the one that met the
    rule, found by replaying the rule (`_core.precise_prefix`) over their responses in
    completion order. A real world decides while its jobs run on; the ones that complete
    after the rule was met, while the world stops, are not measured, so that the summary's
    interval is the one the rule stopped on (the simulator, which can, stops its arrivals and
    finishes the jobs present, measured). All of them when the replay never meets the rule
    (the world watched a set the summary does not measure: a warm-up by count is the first
    jobs to complete there, the first to arrive here)."""
    if measured.empty:
        return measured
    ordered = measured.sort_values("completion", kind="stable")
    response = ordered["response"].to_numpy(dtype=float, na_value=np.nan)
    finite = np.flatnonzero(np.isfinite(response))
    n = _core.precise_prefix(np.ascontiguousarray(response[finite]), float(precision),
                             None if first_look is None else int(first_look))
    if n is None:
        return measured
    return ordered.iloc[:int(finite[n - 1]) + 1].sort_index()


def environment() -> dict[str, Any]:
    """What a reader needs to rerun: versions and machine."""
    return dict(_environment())


@cache
def _environment() -> dict[str, Any]:
    # Read once per process: every Result records it, and reading the package's metadata
    # takes longer than a 1,000-job run.
    from importlib.metadata import version

    return {
        "schedlab": version("schedlab"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
    }


# ---------------------------------------------------------------------------------------------
# How a summary shows itself in a notebook (`_repr_html_`) and at a prompt (`__repr__`).
# ---------------------------------------------------------------------------------------------

def summary_html(summary: dict[str, Any], line: str, classes: pd.DataFrame | None = None,
                 warnings: list[str] | None = None) -> str:
    """A summary as a notebook shows it: its main metrics with units and 95% intervals, the
    per-class table when there are classes, one line about the run, and its warnings."""
    parts = [html_table(["metric", "value", "95% interval", "unit"],
                        [list(r) for r in metric_rows(summary)], right={1, 2})]
    header, rows = class_rows(None if classes is None else classes.to_dict("records"))
    if rows:
        parts.append(html_table(header, rows, right={2, 3}, caption="by class"))
    parts.append(f"<p>{html.escape(line)}</p>")
    parts += [f"<p><strong>{html.escape(w)}</strong></p>" for w in warnings or []]
    return "<div>" + "".join(parts) + "</div>"


def summary_repr(kind: str, line: str, summary: dict[str, Any],
                 warnings: list[str] | None = None) -> str:
    """One line: what the run was, then its mean and p99 response with their intervals, and
    whether it has warnings (their text is in `.notes` and in the notebook's view)."""
    shown = []
    for key in ("response_mean", "response_p99"):
        if finite_number(summary.get(key)):
            ci = interval_text(interval_of(summary, key))
            shown.append(f"{LABELS[key]} {number_text(summary[key])} {UNITS[key]}"
                         + (f" {ci}" if ci else ""))
    if warnings:
        shown.append(f"{plural(len(warnings), 'WARNING')} in .notes")
    return f"<{kind} {line}" + (f"; {', '.join(shown)}" if shown else "") + ">"


# The worlds whose runs are the simulator's model: theory's warnings about it apply.
MODELLED = ("sim", "calibrated")


def _warnings(notes: list[str]) -> list[str]:
    return [n for n in notes if n.startswith("WARNING")]


def plural(n: Any, word: str) -> str:
    """`1 CPU`, `2 CPUs`."""
    return f"{number_text(n)} {word}{'' if n == 1 else 's'}"


def _run_line(s: dict[str, Any]) -> str:
    return (f"{s.get('policy', '?')}: {plural(s.get('jobs', 0), 'job')} on "
            f"{plural(s.get('cpus', 0), 'CPU')}, seed {s.get('seed', '?')}")


def _frame(rows: list | None, columns: tuple[str, ...]) -> pd.DataFrame:
    """A table of `rows`, or an empty one with these columns."""
    if not rows:
        return _empty_frame(columns).copy()
    return pd.DataFrame(rows, columns=list(columns))


@cache
def _empty_frame(columns: tuple[str, ...], floats: bool = False) -> pd.DataFrame:
    # Built once and copied: pandas takes 0.2 ms to build even an empty table, as long as a
    # short run. `floats`: empty float columns instead of object ones.
    if floats:
        return pd.DataFrame({c: [] for c in columns}, columns=list(columns))
    return pd.DataFrame([], columns=list(columns))


@dataclass
class Result:
    """One run: `summary` (dict), `jobs`, `classes`, `tasks`, `schedule` (DataFrames)."""

    summary: dict[str, Any]
    jobs: pd.DataFrame
    classes: pd.DataFrame
    tasks: pd.DataFrame
    schedule: pd.DataFrame
    loads: pd.DataFrame = field(default_factory=pd.DataFrame)
    load_series: pd.DataFrame = field(default_factory=pd.DataFrame)
    spec: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=environment)
    # A real run's requests as a simulator trace (`schedlab.server.replay_trace`), with the
    # requests a replay leaves out at its start in attrs["warmup"]; None elsewhere.
    replay_trace: pd.DataFrame | None = None
    # The os world's workers' moves between CPUs from the kernel's trace (`trace_migrations`):
    # time (ms), task, from_cpu, to_cpu, path, running, running_pid; None when not traced.
    migrations: pd.DataFrame | None = None

    def table(self, name: str) -> pd.DataFrame:
        """One of the run's tables by name (`jobs`, `schedule`, ...), as `Replications.table`
        gives the runs' together."""
        if name not in TABLES:
            raise spec_error("table", name, f"one of {', '.join(TABLES)}")
        return getattr(self, name)

    @classmethod
    def from_core(cls, raw: dict[str, Any], spec: dict[str, Any]) -> Result:
        # The core's columns are fresh arrays nothing else holds: the table takes them as they
        # are (pandas would otherwise copy them into one block per dtype, 0.2 s per million jobs).
        jobs = (pd.DataFrame(raw["jobs"], columns=JOB_COLUMNS, copy=False) if raw["jobs"]
                else _empty_frame(tuple(JOB_COLUMNS), floats=True).copy())
        return cls(
            summary=raw["summary"],
            jobs=jobs,
            classes=pd.DataFrame(raw["classes"]),
            tasks=pd.DataFrame(raw["tasks"]),
            schedule=_frame(raw["schedule"], ("cpu", "job", "task", "start", "end")),
            loads=_frame(raw.get("loads"), ("cpu", "runnable", "time_share", "completion_share")),
            load_series=_frame(raw.get("load_series"), ("time", "cpu", "runnable")),
            spec=spec,
        )

    def to_json(self) -> str:
        return dumps({"summary": self.summary, "spec": self.spec, "environment": self.environment})

    @property
    def units(self) -> dict[str, dict[str, str]]:
        """The unit of every number: `units["summary"][key]` (`--json`'s `units`) and
        `units[table][column]` for each table (`schedlab.vocabulary.TABLE_UNITS`; a real
        world's own columns too: the server's `jobs.bytes`, the os world's counters)."""
        world = self.summary.get("world")
        return {"summary": summary_units(self.summary),
                **{name: table_units(name, getattr(self, name).columns, world)
                   for name in TABLES}}

    def _line(self) -> str:
        s = self.summary
        how = (f"; 95% intervals from {s['ci_batches']} batch means" if s.get("ci_batches")
               else "")
        if how and s.get("ci_uncorrelated") is False:
            how += f", not shown uncorrelated ({UNTRUSTED_MARK}: too few jobs to trust them)"
        if s.get("one_shot_batch"):
            how = "; no interval: one run of a one-shot batch"
        return f"{_run_line(s)} ({s.get('world', 'sim')}){how}"

    @property
    def notes(self) -> list[str]:
        """What a reader must know about the numbers, as `schedlab sim` prints them under its
        table: the warm-up, how the intervals were obtained, and WARNING lines (a precision
        not reached; a mean slowdown that is infinite in theory, for the simulator's runs)."""
        modelled = self.summary.get("world", "sim") in MODELLED
        return run_notes(self.summary, self.spec if modelled else None)

    def __repr__(self) -> str:
        return summary_repr("Result", self._line(), self.summary, _warnings(self.notes))

    def _repr_html_(self) -> str:
        return summary_html(self.summary, f"Result {self._line()}", self.classes,
                            _warnings(self.notes))


@dataclass
class Replications:
    """Independent runs of one spec (`simulate(replications=R)`): replication r is seeded
    `replication_seed(seed, r)`, as in experiment files. `runs` holds each run's Result;
    `summary` the mean of every numeric metric across the runs, with a Student-t interval
    across them (`KEY_ci`) for every metric a single run gives an interval for."""

    runs: list[Result]
    seed: int
    seeds: list[int]
    confidence: float = 0.95

    def interval(self, metric: str) -> Any:
        """Mean and Student-t half-width of `metric` across the runs (`schedlab.stats`); a
        summary's number (0 or more) has its interval cut at 0."""
        from schedlab.stats import t_interval  # scipy: not at import time
        from schedlab.vocabulary import nonnegative

        return t_interval([r.summary.get(metric) for r in self.runs], self.confidence,
                          floor=0.0 if nonnegative(metric) else -math.inf)

    @property
    def summaries(self) -> pd.DataFrame:
        """One row per replication: its summary's scalar metrics, `replication` and `seed`."""
        rows = [{"replication": i, **{k: v for k, v in r.summary.items()
                                      if not isinstance(v, list | tuple | dict)}}
                for i, r in enumerate(self.runs)]
        return pd.DataFrame(rows)

    @property
    def summary(self) -> dict[str, Any]:
        from schedlab.stats import across_replications  # scipy: not at import time

        return across_replications([r.summary for r in self.runs], self.seed, self.seeds,
                                   self.confidence, estimates=ESTIMATES)

    @property
    def units(self) -> dict[str, dict[str, str]]:
        """The unit of every number of `summary` and of each `table(name)` (as `Result.units`)."""
        first = self.runs[0].units
        world = self.runs[0].summary.get("world")
        return {**first, "summary": summary_units(self.summary),
                **{name: {**first[name], **table_units(name, ["replication"], world)}
                   for name in TABLES}}

    def table(self, name: str) -> pd.DataFrame:
        """One of the runs' tables (`jobs`, `schedule`, ...) with a `replication` column."""
        frames = [getattr(r, name).assign(replication=i) for i, r in enumerate(self.runs)]
        return pd.concat(frames, ignore_index=True)

    def to_json(self) -> str:
        return dumps({"summary": self.summary, "runs": [r.summary for r in self.runs],
                      "spec": self.runs[0].spec, "environment": self.runs[0].environment})

    def _line(self, s: dict[str, Any]) -> str:
        return (f"{_run_line(s)} ({s.get('world', 'sim')}) in {len(self.runs)} replications; "
                f"95% intervals: Student t across them")

    @property
    def notes(self) -> list[str]:
        """Each replication's WARNING lines (`Result.notes`), named by replication, and the
        spec's own once (a mean slowdown that is infinite in theory): every one a warning."""
        first = self.runs[0]
        modelled = first.summary.get("world", "sim") in MODELLED
        return replication_warnings([r.summary for r in self.runs],
                                    first.spec if modelled else None)

    def __repr__(self) -> str:
        s = self.summary
        return summary_repr("Replications", self._line(s), s, self.notes)

    def _repr_html_(self) -> str:
        s = self.summary
        from schedlab.stats import classes_across_replications

        classes = pd.DataFrame(classes_across_replications(
            [r.classes.to_dict("records") for r in self.runs]))
        return summary_html(s, f"Replications {self._line(s)}", classes, self.notes)


def write_outputs(table: Callable[[str], pd.DataFrame], outputs: dict[str, Any]) -> None:
    """Writes each table of `outputs` ({name: path or None}, `schedlab.files.TABLE_OUTPUTS`)
    that has a path, `table(name)` giving it: `Result.table`, `Replications.table`,
    `Comparison.runs_table`."""
    for name, path in outputs.items():
        if path is not None:
            write_table(table(name), path)


def write_table(df: pd.DataFrame, path: str | Path) -> None:
    """Writes CSV or Parquet (by extension) atomically: a reader never sees half a file."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise spec_error("out", str(path), "a file name ending in .csv or .parquet")
    with atomic_file(path) as tmp:
        if suffix == ".csv":
            df.to_csv(tmp, index=False)
        else:
            df.to_parquet(tmp, index=False)



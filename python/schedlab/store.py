"""A results directory, read back: the manifest, the combined tables and each run's stored
per-job rows, run segments and load series, as tidy DataFrames (`load_results`). Written by
`schedlab.sweep`; read by the API, the report and anyone with pandas."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from schedlab.vocabulary import spec_error

FORMAT = 1
MANIFEST = "manifest.json"
RUNS = "runs"


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
        path = self.dir / RUNS / f"{run}.{kind}.parquet"
        return pd.read_parquet(path) if path.exists() else None

    def metric(self, name: str) -> pd.DataFrame:
        """The stats rows of one metric (mean, CI, theory) per world, point and policy."""
        return self.stats[self.stats.metric == name].reset_index(drop=True)


def load_results(directory: str | Path) -> Results:
    """Reads a results directory written by `schedlab run`."""
    d = Path(directory)
    path = d / MANIFEST
    if not path.exists():
        raise spec_error("results", str(d), "a directory written by `schedlab run` (no "
                         "manifest.json)")
    with open(path) as f:
        manifest = json.load(f)
    if manifest.get("status") != "complete" or not (d / "summaries.parquet").exists():
        counts = manifest.get("counts", {})
        raise spec_error("results", str(d), "a finished sweep (this one has "
                         f"{counts.get('done', 0)} of {len(set(r['id'] for r in manifest['runs']))}"
                         " runs done; rerun `schedlab run` to finish it)")

    def read(name: str) -> pd.DataFrame:
        p = d / name
        return pd.read_parquet(p) if p.exists() and p.stat().st_size else pd.DataFrame()

    return Results(d, manifest, read("summaries.parquet"), read("stats.parquet"),
                   read("classes.parquet"), read("tasks.parquet"), read("timing.parquet"),
                   read("skipped.parquet"))

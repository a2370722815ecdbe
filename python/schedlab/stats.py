"""Confidence intervals: Student t across independent replications, batch means within one
long run. Both give (mean, half-width) of a 95% interval by default."""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special


@dataclass(frozen=True)
class Interval:
    mean: float
    half_width: float  # NaN when n < 2: one value gives no interval
    n: int
    std: float
    method: str  # "replications", "batch means" or "single run"
    # The least value the quantity can take (0 for a time): the interval stops there.
    floor: float = -math.inf

    @property
    def low(self) -> float:
        low = self.mean - self.half_width
        return self.floor if low < self.floor else low

    @property
    def high(self) -> float:
        return self.mean + self.half_width

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


def t_half_width(n: Any, std: Any, confidence: float = 0.95) -> Any:
    """Student-t half-width of the mean of n i.i.d. values of sample std `std`; NaN where
    n < 2. Works on numbers and on numpy arrays alike (a sweep's groups at once)."""
    n = np.asarray(n)
    with np.errstate(invalid="ignore", divide="ignore"):
        t = special.stdtrit(np.maximum(n - 1, 1), 0.5 + confidence / 2)  # Student t quantile
        return np.where(n >= 2, t * np.asarray(std) / np.sqrt(n), np.nan)


def t_interval(values: Sequence[float], confidence: float = 0.95,
               method: str = "replications", floor: float = -math.inf) -> Interval:
    """Mean and Student-t half-width of i.i.d. values (replications with different seeds);
    `floor`: the least value the quantity can take, where the interval's low end stops."""
    x = np.asarray([v for v in values if v is not None], dtype=float)
    x = x[np.isfinite(x)]
    n = len(x)
    if n == 0:
        return Interval(math.nan, math.nan, 0, math.nan, method, floor)
    mean = float(x.mean())
    if n < 2:
        return Interval(mean, math.nan, 1, math.nan, "single run", floor)
    std = float(x.std(ddof=1))
    return Interval(mean, float(t_half_width(n, std, confidence)), n, std, method, floor)


# Counts that add up across replications; every other number is averaged.
ADDITIVE = frozenset({"jobs", "unfinished", "events", "warmup_jobs"})
# How one run's own intervals were made: not what the replications' intervals are.
ONE_RUN = frozenset({"ci_batches", "ci_batch_size", "response_mean_precision"})


def across_replications(summaries: Sequence[dict[str, Any]], seed: int, seeds: Sequence[int],
                        confidence: float = 0.95, estimates: Collection[str] = ()
                        ) -> dict[str, Any]:
    """The summary of independent replications from their run summaries alone (no table):
    counts added up, every other number averaged, and a Student-t interval across the runs
    (`KEY_ci`, cut at 0: every number of a summary is 0 or more) for every metric a single run
    gives an interval for and every key of `estimates` (what a summary table shows:
    throughput, slowdown, utilization, ...: `schedlab.summary_rows.ESTIMATES`). What
    `Replications.summary` and `schedlab sim --replications` show."""
    shown = set(estimates) - ADDITIVE
    first = summaries[0]
    out: dict[str, Any] = {}
    for key, value in first.items():
        if key.endswith("_per_cpu") and isinstance(value, list):
            # Per CPU (or runqueue): the mean over the runs, CPU by CPU.
            out[key] = [float(np.mean(column))
                        for column in zip(*(s[key] for s in summaries), strict=True)]
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or key in ONE_RUN:
            continue
        values = [s.get(key) for s in summaries]
        out[key] = int(sum(values)) if key in ADDITIVE else float(np.mean(values))
        if f"{key}_ci" in first or key in shown:
            iv = t_interval(values, confidence, floor=0.0)
            out[key] = iv.mean
            out[f"{key}_ci"] = [iv.low, iv.high]
    # The estimator's spread, as one run's: the half-width before the cut at 0.
    half = t_interval([s.get("response_mean") for s in summaries], confidence).half_width
    out["response_mean_precision"] = half / abs(out["response_mean"])
    out["policy"], out["cpus"], out["seed"] = first["policy"], first["cpus"], seed
    out["replications"] = len(summaries)
    out["seeds"] = list(seeds)
    out["ci_method"] = "replications"
    return out


def classes_across_replications(runs: Sequence[Sequence[dict[str, Any]]]
                                ) -> list[dict[str, Any]]:
    """The per-class table of independent replications from each run's class records: per
    class (in the order they first appear) the counts added up, every other number averaged,
    and a Student-t interval across the runs (cut at 0) for every number a run gives an
    interval for, as `across_replications` does for the summary."""
    by_class: dict[Any, list[dict[str, Any]]] = {}
    for classes in runs:
        for row in classes:
            by_class.setdefault(row["class"], []).append(row)
    out = []
    for name, rows in by_class.items():
        record: dict[str, Any] = {"class": name}
        for key, value in rows[0].items():
            if key == "class" or isinstance(value, bool) or not isinstance(value, int | float):
                continue
            values = [r.get(key) for r in rows]
            record[key] = int(sum(values)) if key in ADDITIVE else float(np.mean(values))
            if f"{key}_ci" in rows[0]:
                iv = t_interval(values, floor=0.0)
                record[key] = iv.mean
                record[f"{key}_ci"] = [iv.low, iv.high]
        out.append(record)
    return out


def batch_means(batch_values: Sequence[float], confidence: float = 0.95,
                mean: float | None = None) -> Interval:
    """Interval from the batch means of one long run (the simulator's `batches = B` key gives
    summary["response_batch_means"]). Batches long compared with the correlation time are
    nearly independent, so the t interval over them is valid; `mean` (the run's overall mean)
    replaces the average of the batches when given."""
    iv = t_interval(batch_values, confidence, method="batch means")
    if mean is None or iv.n < 2:
        return iv
    return Interval(float(mean), iv.half_width, iv.n, iv.std, "batch means")


def lag1_autocorrelation(values: Sequence[float]) -> float:
    """Lag-1 autocorrelation of batch means: near 0 when batches are long enough."""
    x = np.asarray(values, dtype=float)
    if len(x) < 3:
        return math.nan
    d = x - x.mean()
    denom = float(np.dot(d, d))
    return float(np.dot(d[:-1], d[1:]) / denom) if denom > 0 else math.nan

"""`make run`: six policies on one CPU at load 0.95, deterministic and exponential service,
with the closed form beside each measurement where one exists.

At load 0.95 successive response times are strongly correlated, so each cell is the mean of
several independent replications with its 95% confidence interval (Student t), percentiles
included; each run discards its own warm-up (MSER-5, `warmup = "auto"`). The seeds are shared
across policies (common random numbers), so policy differences are not noise.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from rich.console import Console
from rich.table import Table

from schedlab import theory
from schedlab.api import simulate
from schedlab.clikit import progress_bar
from schedlab.command import callable_module
from schedlab.stats import t_interval
from schedlab.vocabulary import KEYS, SUMMARY_UNITS, replication_count, spec_error, typed

LOAD = 0.95
MEAN_SIZE = 20.0
POLICIES = [
    ("FCFS", "fcfs", {}),
    ("SJF", "sjf", {}),
    ("SRPT", "srpt", {}),
    ("PSJF", "psjf", {}),
    ("RR q=10", "rr", {"quantum": 10}),
    ("PS", "ps", {}),
]
SIZES = [f"det:{MEAN_SIZE:g}", f"exp:{MEAN_SIZE:g}"]
QUANTILES = [("p50", 0.5), ("p95", 0.95), ("p99", 0.99)]


def _theory(policy: str, params: dict, arrival: str, size: str) -> dict[str, float | None]:
    # RR with a quantum has no closed form, nor SJF's percentiles: the cell shows none.
    out: dict[str, float | None] = {"mean": theory.mean_response(policy, arrival, size, **params)}
    for label, p in QUANTILES:
        out[label] = theory.response_quantile(policy, arrival, size, p, **params)
    return out


def cell(row: dict[str, Any], key: str) -> str:
    """A row's figure as every table of schedlab writes it: `mean [low, high]` over the
    replications (Student t, cut at 0 as every interval of a summary is), the theory after it
    in parentheses where there is one. One replication has no interval: none is shown."""
    low, high = row[key + "_ci_low"], row[key + "_ci_high"]
    text = f"{row[key]:.1f}" + ("" if math.isnan(low) else f" [{low:.1f}, {high:.1f}]")
    expected = row[f"theory_{key}"]
    return text + (f" ({expected:.1f})" if not math.isnan(expected) else "")


def checked(jobs: Any, seed: Any, replications: Any) -> tuple[int, int, int]:
    """The three lengths as the command line and Python both take them, or a SpecError naming
    the key."""
    jobs = typed("jobs", jobs, KEYS["jobs"])
    seed = typed("seed", seed, KEYS["seed"])
    replications = replication_count(replications)
    if jobs < 1:
        raise spec_error("jobs", jobs, "a whole number >= 1")
    return jobs, seed, replications


def measure(jobs: int = 2_000_000, seed: int = 1, replications: int = 6
            ) -> tuple[str, list[dict[str, Any]]]:
    """Runs every cell; returns the Poisson arrival law and one row per size law and policy:
    `service`, `policy`, and for each of `response_mean`, `response_p50`, `response_p95`,
    `response_p99` (ms) the mean over the replications, its 95% interval (`KEY_ci_low`,
    `KEY_ci_high`) and the closed form (`theory_KEY`, NaN where there is none), as a
    comparison's table names them."""
    jobs, seed, replications = checked(jobs, seed, replications)
    arrival = theory.poisson_at_load(LOAD, SIZES[0])
    configs = [(label, policy, params, size)
               for size in SIZES for label, policy, params in POLICIES]
    tasks = [(c, r) for c in range(len(configs)) for r in range(replications)]

    def one(task: tuple[int, int]) -> dict:
        c, r = task
        _label, policy, params, size = configs[c]
        return simulate(policy, arrival=arrival, size=size, jobs=jobs, warmup="auto",
                        seed=seed + r, keep_jobs=False, **params).summary

    # The core releases the GIL, so threads keep every core busy.
    with ThreadPoolExecutor() as pool, \
            progress_bar(len(tasks), f"{len(tasks)} runs of {jobs:,} jobs") as bar:
        futures = [pool.submit(one, t) for t in tasks]
        task = bar.add_task("runs", total=len(tasks)) if bar else None
        for _ in as_completed(futures):
            if bar:
                bar.advance(task)
        summaries = [f.result() for f in futures]

    rows = []
    for c, (label, policy, params, size) in enumerate(configs):
        runs = summaries[c * replications:(c + 1) * replications]
        th = _theory(policy, params, arrival, size)
        row: dict[str, Any] = {"service": size, "policy": label}
        for name in ("mean", *dict(QUANTILES)):
            key = f"response_{name}"
            iv = t_interval([s[key] for s in runs], floor=0.0)
            expected = th[name]
            row.update({key: iv.mean, f"{key}_ci_low": iv.low, f"{key}_ci_high": iv.high,
                        f"theory_{key}": math.nan if expected is None else expected})
        rows.append(row)
    return arrival, rows


def table(jobs: int = 2_000_000, seed: int = 1, replications: int = 6) -> Any:
    """`schedlab quickstart` from Python (as `schedlab.quickstart(...)`): the table as a
    DataFrame, units in `.attrs["units"]`."""
    import pandas as pd

    _arrival, rows = measure(jobs, seed, replications)
    df = pd.DataFrame(rows)
    df.attrs["units"] = {c: SUMMARY_UNITS[c.removeprefix("theory_").split("_ci_")[0]]
                         for c in df.columns if c not in ("service", "policy")}
    return df


def main(jobs: int = 2_000_000, seed: int = 1, replications: int = 6) -> int:
    arrival, rows = measure(jobs, seed, replications)
    out = Table(title=f"One CPU, load {LOAD}, Poisson arrivals ({arrival}); {replications} "
                  f"replications of {jobs:,} jobs per cell: response time in ms, mean [95% "
                  f"interval], theory in parentheses where it exists"
                  + ("; one replication: no interval" if replications == 1 else ""))
    for col in ("service", "policy", "mean", "p50", "p95", "p99"):
        out.add_column(col, justify="left" if col in ("service", "policy") else "right")
    for row in rows:
        out.add_row(row["service"], row["policy"],
                    *(cell(row, f"response_{name}") for name in ("mean", *dict(QUANTILES))))
    Console(markup=False).print(out)  # "[low, high]" is data, not a style
    return 0


# `schedlab.quickstart(jobs=..., seed=..., replications=...)`, as the command line names it.
callable_module(__name__, table)

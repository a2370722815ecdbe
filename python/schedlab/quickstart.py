"""`make run`: six policies on one CPU at load 0.95, deterministic and exponential service,
with the closed form beside each measurement where one exists.

At load 0.95 successive response times are strongly correlated, so each cell is the mean of
several independent replications with its 95% confidence interval (Student t), percentiles
included; each run discards its own warm-up (MSER-5, `warmup = "auto"`). The seeds are shared
across policies (common random numbers), so policy differences are not noise.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor, as_completed

from rich.console import Console
from rich.table import Table

from schedlab import theory
from schedlab.api import simulate
from schedlab.clikit import progress_bar
from schedlab.stats import t_interval

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


def cell(values: list[float], expected: float | None) -> str:
    """The mean of the replications and its 95% interval (Student t, cut at 0 as every
    interval of a summary is), as every table of schedlab writes them: `mean [low, high]`;
    the theory after it in parentheses where there is one."""
    iv = t_interval(values, floor=0.0)
    text = f"{iv.mean:.1f} [{iv.low:.1f}, {iv.high:.1f}]"
    return text + (f" ({expected:.1f})" if expected is not None else "")


def main(jobs: int = 2_000_000, seed: int = 1, replications: int = 6) -> int:
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

    table = Table(title=f"One CPU, load {LOAD}, Poisson arrivals ({arrival}); {replications} "
                  f"replications of {jobs:,} jobs per cell: response time in ms, mean [95% "
                  f"interval], theory in parentheses where it exists")
    for col in ("service", "policy", "mean", "p50", "p95", "p99"):
        table.add_column(col, justify="left" if col in ("service", "policy") else "right")
    for c, (label, policy, params, size) in enumerate(configs):
        runs = summaries[c * replications:(c + 1) * replications]
        th = _theory(policy, params, arrival, size)
        table.add_row(size, label, cell([s["response_mean"] for s in runs], th["mean"]),
                      *(cell([s[f"response_{q}"] for s in runs], th[q]) for q, _ in QUANTILES))
    Console().print(table)
    return 0

"""`make run`: six policies on one CPU at load 0.95, deterministic and exponential service,
with the closed form beside each measurement where one exists."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from rich.console import Console
from rich.table import Table

from schedlab import theory
from schedlab.api import simulate

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


def _theory(policy: str, arrival: str, size: str) -> dict[str, float | None]:
    out: dict[str, float | None] = {"mean": theory.mean_response(policy, arrival, size)}
    # Quantiles have a closed form for M/M/1 FCFS only: the response is exponential.
    exact = policy == "fcfs" and size.startswith("exp:")
    lam, mu = 1 / float(arrival[4:]), 1 / float(size[4:])
    for label, p in QUANTILES:
        out[label] = theory.mm1_quantile(p, lam, mu) if exact else None
    return out


def main(jobs: int = 1_000_000, seed: int = 1) -> int:
    arrival = theory.poisson_at_load(LOAD, SIZES[0])
    runs = [(label, policy, params, size) for size in SIZES for label, policy, params in POLICIES]
    warmup = max(jobs // 50, 1)

    def one(run: tuple) -> dict:
        label, policy, params, size = run
        return simulate(policy, arrival=arrival, size=size, jobs=jobs, warmup=warmup,
                        seed=seed, keep_jobs=False, **params).summary

    # The core releases the GIL, so threads keep every core busy.
    with ThreadPoolExecutor() as pool:
        summaries = list(pool.map(one, runs))

    table = Table(title=f"One CPU, load {LOAD}, Poisson arrivals ({arrival}), {jobs:,} jobs "
                  f"per run; theory in brackets where a closed form exists")
    for col in ("service", "policy", "mean", "p50", "p95", "p99"):
        table.add_column(col, justify="left" if col in ("service", "policy") else "right")
    for (label, policy, _params, size), s in zip(runs, summaries, strict=True):
        th = _theory(policy, arrival, size)

        def cell(value: float, expected: float | None) -> str:
            return f"{value:8.1f}" + (f" [{expected:.1f}]" if expected is not None else "")

        table.add_row(size, label, cell(s["response_mean"], th["mean"]),
                      *(cell(s[f"response_{q}"], th[q]) for q, _ in QUANTILES))
    Console().print(table)
    return 0

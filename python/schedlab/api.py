"""The public Python API."""

from __future__ import annotations

from typing import Any

from schedlab import _core
from schedlab.results import Result
from schedlab.spec import build_spec


def simulate(policy: Any = "fcfs", *, keep_jobs: bool = True, **kwargs: Any) -> Result:
    """Runs one simulation and returns a Result.

    Keys are those of the CLI and of experiment files (`schedlab.spec.SPEC_KEYS`); policy
    parameters are passed by name:

        schedlab.simulate(policy="rr", quantum=10, arrival="exp:21", size="det:20",
                          jobs=200_000, cpus=1, seed=1)

    `keep_jobs=False` keeps only the summary (memory stays bounded for any run length).
    Raises SpecError (a ValueError) naming the key, the value and what is allowed.
    """
    spec = build_spec(policy, keep_jobs=keep_jobs, **kwargs)
    return Result.from_core(_core.simulate(spec), spec)


def validate(policy: Any = "fcfs", **kwargs: Any) -> dict[str, Any]:
    """Checks a spec without running it; returns the spec dict the core accepts."""
    spec = build_spec(policy, **kwargs)
    _core.validate(spec)
    return spec


def run(experiment: Any, out: Any = None, *, workers: int | None = None,
        dask: str | None = None, quick: bool = False, progress: bool | None = None) -> Any:
    """Runs an experiment (a TOML file path or a dict of the same sections) and returns its
    results, as `load_results` does. Resumes when `out` holds an interrupted sweep.

        res = schedlab.run("experiments/rr-ps-fcfs/experiment.toml", out="results/rr", quick=True)
        res.metric("response_mean")
    """
    from schedlab.sweep import load_results as _load
    from schedlab.sweep import run as _run

    return _load(_run(experiment, out=out, workers=workers, dask=dask, quick=quick,
                      progress=progress))


def load_results(directory: Any) -> Any:
    """Tidy DataFrames of a results directory: `.summaries`, `.stats`, `.classes`, `.tasks`,
    `.jobs`, `.schedule` (see `schedlab.sweep.Results`)."""
    from schedlab.sweep import load_results as _load

    return _load(directory)

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

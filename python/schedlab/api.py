"""The public Python API: the same keys as the CLI and experiment files, as keyword
arguments."""

from __future__ import annotations

from typing import Any

from schedlab.files import TABLE_OUTPUTS, check_outputs
from schedlab.vocabulary import flat_spec, replication_count, several_policies, spec_error
from schedlab.worlds import sim

# The tables `schedlab os` writes (`--jobs-out`, `--tasks-out`), and `schedlab.os` with them.
OS_OUTPUTS = ("jobs", "tasks")


def _outputs(kwargs: dict[str, Any], names: Any) -> dict[str, Any]:
    """The KEY_out paths among the keyword arguments, taken out of them."""
    return {name: kwargs.pop(f"{name}_out", None) for name in names}


def _check_trace_out(trace_out: Any) -> None:
    if trace_out is not None:
        from schedlab import trace

        trace.check_trace_out("trace_out", trace_out)


def simulate(policy: Any = "fcfs", *, keep_jobs: bool = True, replications: int = 1,
             workers: int | None = None, trace_out: Any = None, **kwargs: Any) -> Any:
    """Runs one simulation and returns a Result; with `replications=R` (R > 1), R independent
    runs on `workers` threads (default: every core), returned as Replications (`.runs`, and a
    `.summary` with Student-t intervals across them). Replication r is seeded
    `replication_seed(seed, r)`, as in experiment files; the results are the same whatever the
    number of workers.

    Keys are those of the CLI and of experiment files (`schedlab.vocabulary.KEYS`); policy
    parameters are passed by name:

        schedlab.simulate(policy="rr", quantum=10, arrival="exp:21", size="det:20",
                          jobs=200_000, cpus=1, seed=1)

    `keep_jobs=False` keeps only the summary (memory stays bounded for any run length).
    `trace_out="run.json"` writes the schedule as a Chrome/Perfetto trace (`schedlab.trace`;
    open it in ui.perfetto.dev), keeping the schedule for it. `jobs_out`, `schedule_out`,
    `tasks_out`, `loads_out` and `load_series_out` (`.csv` or `.parquet`) write those tables,
    as the CLI's `--jobs-out` and the others do (checked before the run; the schedule is
    kept for `schedule_out`, the load series needs `load_sample`).
    Raises SpecError (a ValueError) naming the key, the value and what is allowed.

    A list of policies (`["fcfs", "srpt", "rr:quantum=5", policies.PS()]`, or one text with
    commas) runs each on the same workload and seeds and returns a `schedlab.compare.
    Comparison`: `.table()` has one row per policy with 95% intervals and the closed form.
    """
    replications = replication_count(replications)
    if workers is not None:
        workers = replication_count(workers, "workers")
    outputs = _outputs(kwargs, TABLE_OUTPUTS)
    _check_trace_out(trace_out)
    check_outputs(outputs, trace_out, kwargs.get("load_sample"))
    if outputs["jobs"] is not None and not keep_jobs:
        raise spec_error("keep_jobs", keep_jobs, "true with jobs_out (the table written is "
                         "the jobs kept)")
    if outputs["schedule"] is not None:
        kwargs["keep_schedule"] = True
    if several_policies(policy):
        if trace_out is not None:
            raise spec_error("trace_out", trace_out, "one policy (a trace shows one schedule)")
        from schedlab.compare import compare  # theory and pandas: only when comparing

        comparison = compare(policy, keep_jobs=keep_jobs, replications=replications,
                             workers=workers, **kwargs)
        _write(comparison.runs_table, outputs)
        return comparison
    if trace_out is not None:
        kwargs["keep_schedule"] = True
    spec = flat_spec(policy, keep_jobs=keep_jobs, **kwargs)
    result = (sim.run(spec) if replications == 1
              else sim.run_replications(spec, replications, workers))
    _write(result.table, outputs)
    if trace_out is not None:
        from schedlab import trace

        trace.write_trace(result, trace_out)
    return result


def _write(table: Any, outputs: dict[str, Any]) -> None:
    if any(path is not None for path in outputs.values()):
        from schedlab.results import write_outputs

        write_outputs(table, outputs)


def os(policy: Any = "kernel", *, trace_out: Any = None, **kwargs: Any) -> Any:
    """`schedlab os` from Python: runs the workload on real Linux processes and returns a
    Result in the common schema. `policy="kernel"` (the default) runs each class under the
    kernel policy its keys give (nice, rtprio, SCHED_DEADLINE...); a schedlab policy
    (`"lottery"`, `policies.Stride(...)`) is enforced from user space by the dispatcher.
    The keys are the os world's (docs/os.md), as keyword arguments:

        schedlab.os(clients=2, size="det:200", jobs=4, cpus=1,
                    classes=[{"nice": 0}, {"nice": 5}])

    `trace_out="run.json"` writes the schedule as a Chrome/Perfetto trace; `jobs_out` and
    `tasks_out` those tables, as `schedlab os --jobs-out` does. Raises SpecError
    naming the key, `schedlab.osrun.Refused` when the kernel forbids what is asked (with its
    reason); `schedlab.osrun.capabilities()` says what this kernel allows.
    """
    from schedlab.worlds import os as os_world  # the os world: only when asked for

    if several_policies(policy):
        raise spec_error("policy", policy, "one policy: real processes compare policies in "
                         "an experiment file (world = \"os\", [[policy]] tables)")
    outputs = _outputs(kwargs, OS_OUTPUTS)
    _check_trace_out(trace_out)
    check_outputs(outputs, trace_out)
    result = os_world.run(flat_spec(policy, **kwargs))
    _write(result.table, outputs)
    if trace_out is not None:
        from schedlab import trace

        trace.write_trace(result, trace_out)
    return result


def validate(policy: Any = "fcfs", **kwargs: Any) -> dict[str, Any]:
    """Checks a spec without running it; returns the spec dict the core accepts."""
    return sim.validate(flat_spec(policy, **kwargs))


def run(experiment: Any, out: Any = None, *, workers: int | None = None,
        dask: str | None = None, quick: bool = False, progress: bool | None = None) -> Any:
    """Runs an experiment (a TOML file path or a dict of the same sections) and returns its
    results, as `load_results` does. Resumes when `out` holds an interrupted sweep.

        res = schedlab.run("experiments/rr-ps-fcfs/experiment.toml", out="results/rr", quick=True)
        res.metric("response_mean")
    """
    # Imported on use: experiment files need pydantic and every world; simulate() does not.
    from schedlab import store, sweep

    return store.load_results(sweep.run(experiment, out=out, workers=workers, dask=dask,
                                        quick=quick, progress=progress))


def load_results(directory: Any) -> Any:
    """Tidy DataFrames of a results directory: `.summaries`, `.stats`, `.classes`, `.tasks`,
    `.jobs`, `.schedule` (see `schedlab.store.Results`)."""
    from schedlab import store

    return store.load_results(directory)

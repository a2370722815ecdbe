"""How a run summary shows itself as text, whatever the world: its rows (key, label, unit),
numbers and 95% intervals as the tables print them, and plain HTML tables. Pure Python, so a
command that prints a summary (`schedlab sim` without table outputs) needs no pandas (issue 12);
`schedlab.results` builds its notebook views on the same rows."""

from __future__ import annotations

import html
import json
import math
import numbers
from typing import Any

from schedlab.vocabulary import SUMMARY_UNITS, WORLD_SUMMARY_UNITS

UNITS: dict[str, str] = {**SUMMARY_UNITS, **WORLD_SUMMARY_UNITS}


def _rows(*rows: tuple[str, str]) -> list[tuple[str, str, str]]:
    """(key, label, unit) rows, each key's unit the one the vocabulary declares."""
    return [(key, label, UNITS[key]) for key, label in rows]


# (key, label, unit): the rows of a run's summary table, in the CLI (`schedlab sim`) and in a
# notebook (`Result._repr_html_`); a key with a `KEY_ci` in the summary shows its 95% interval
# beside it.
SUMMARY_ROWS = _rows(
    ("response_mean", "response mean"), ("response_p50", "response p50"),
    ("response_p95", "response p95"), ("response_p99", "response p99"),
    ("response_std", "response std"), ("wait_mean", "wait mean"), ("wait_p99", "wait p99"),
    ("slowdown_mean", "slowdown mean"), ("throughput", "throughput"),
    ("makespan", "makespan"), ("utilization", "utilization"),
    ("context_switches", "context switches"),
    ("migrations", "migrations"), ("task_response_cv", "CV of task mean responses"),
    ("jain_slowdown", "Jain (slowdown)"), ("jain_share", "Jain (share/entitled)"),
)

# The rows of the os world's table: the common metrics, then the os world's own.
OS_SUMMARY_ROWS = _rows(
    ("response_mean", "response mean"), ("response_p50", "response p50"),
    ("response_p95", "response p95"), ("response_p99", "response p99"),
    ("wait_mean", "run-queue wait mean"), ("throughput", "throughput"),
    ("makespan", "makespan"), ("utilization", "utilization"),
    ("context_switches", "context switches"),
    ("migrations", "migrations"), ("jain_share", "Jain (share/entitled)"),
    ("contended_ms", "contended interval"), ("measure_overhead", "measurement overhead"),
    ("dispatcher_overhead", "dispatcher CPU / wall"), ("foreign_fraction", "foreign CPU"),
)

# The estimates a summary table shows: across replications each gets its interval.
ESTIMATES = frozenset(key for key, _, _ in (*SUMMARY_ROWS, *OS_SUMMARY_ROWS))

# The columns of the per-class table shown beside a summary (keys of CLASS_COLUMNS).
CLASS_ROWS = ["response_mean", "response_p99", "wait_mean", "slowdown_mean"]


LABELS: dict[str, str] = {key: label for key, label, _ in SUMMARY_ROWS}


def finite_number(value: Any) -> bool:
    return (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and math.isfinite(value))


def significant(value: float, digits: int = 4) -> str:
    """A number to `digits` significant digits, without an exponent below 10^7: a column of
    times reads 2490 above 24910, not 2490 above 2.491e+04."""
    text = f"{value:.{digits}g}"
    if "e+" in text and abs(value) < 1e7:
        return f"{float(text):.0f}"
    return text


def number_text(value: Any) -> str:
    """A number as the tables print it: whole numbers whole, others to 4 significant digits."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return str(int(value))
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return significant(float(value))
    return str(value)


def interval_of(summary: dict[str, Any], key: str) -> tuple[float, float] | None:
    """The 95% interval `KEY_ci` of a summary, or None where it has none (or a NaN one)."""
    ci = summary.get(f"{key}_ci")
    if hasattr(ci, "tolist"):  # a table's column read back (parquet gives arrays)
        ci = ci.tolist()
    if isinstance(ci, list | tuple) and len(ci) == 2 and all(map(finite_number, ci)):
        return float(ci[0]), float(ci[1])
    return None


def interval_text(ci: tuple[float, float] | None) -> str:
    return "" if ci is None else f"[{significant(ci[0])}, {significant(ci[1])}]"


def rows_of(summary: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The (key, label, unit) rows of a summary's world."""
    return OS_SUMMARY_ROWS if summary.get("world") == "os" else SUMMARY_ROWS


# Why one run of a batch of one-shot processes has no interval (docs/statistics.md), and the
# interval method the statistics table names for it.
ONE_SHOT_TEXT = ("a batch of one-shot processes (every process one job) is one sample of a "
                 "transient, not a stationary series: one run gives it no interval "
                 "(docs/statistics.md); replications give one, of width 0 where nothing in "
                 "the batch is random")
ONE_SHOT_METHOD = "none: one run of a one-shot batch"

# Beside an interval from one run too short to find uncorrelated batches (the report's mark).
UNTRUSTED_MARK = "†"


def metric_rows(summary: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(label, value, 95% interval, unit) of every row the summary has a finite value for; a
    run whose batches were not shown uncorrelated has its intervals marked (UNTRUSTED_MARK)."""
    mark = UNTRUSTED_MARK if summary.get("ci_uncorrelated") is False else ""
    rows = []
    for key, label, unit in rows_of(summary):
        if finite_number(summary.get(key)):
            ci = interval_of(summary, key)
            rows.append((label, number_text(summary[key]),
                         interval_text(ci) + (mark if ci is not None else ""), unit))
    return rows


def html_table(header: list[str], rows: list[list[str]], right: set[int] | None = None,
               caption: str = "") -> str:
    """A plain HTML table, every text escaped; the columns in `right` (numbers) align right,
    the others left."""
    right = set(range(1, len(header))) if right is None else right
    e = html.escape

    def cells(tag: str, row: list[str]) -> str:
        return "".join(f'<{tag} style="text-align:{"right" if i in right else "left"}">{e(c)}'
                       f"</{tag}>" for i, c in enumerate(row))

    body = "".join(f"<tr>{cells('td', r)}</tr>" for r in rows)
    cap = f"<caption>{e(caption)}</caption>" if caption else ""
    return (f"<table>{cap}<thead><tr>{cells('th', header)}</tr></thead>"
            f"<tbody>{body}</tbody></table>")


def class_rows(classes: list[dict[str, Any]] | None) -> tuple[list[str], list[list[str]]]:
    """The header and rows of a per-class table from its records (one dict per class, as the
    core returns them): per class its jobs, then each of CLASS_ROWS with its 95% interval
    (marked as `metric_rows` marks the summary's) and unit; none for a run of one class."""
    if not classes or len(classes) < 2 or "class" not in classes[0]:
        return [], []
    keys = [k for k in CLASS_ROWS if k in classes[0]]
    header = ["class", "metric", "value", "95% interval", "unit"]
    rows = []
    for r in classes:
        # Marked as the summary's are where the class's own batches were not shown
        # uncorrelated (replications have no such flag: their runs are independent).
        mark = "" if bool(r.get("ci_uncorrelated", True)) else UNTRUSTED_MARK
        rows.append([str(r["class"]), "jobs", number_text(r["jobs"]), "", "count"])
        for k in keys:
            ci = interval_of(r, k)
            rows.append(["", LABELS[k], number_text(r[k]),
                         "" if ci is None else interval_text(ci) + mark, UNITS[k]])
    return header, rows


# Policies under which a short job's response shrinks with its size (served at once, or at a
# share of a CPU): their mean slowdown stays finite whatever the sizes near 0.
SLOWDOWN_FINITE = frozenset({"ps", "gps", "srpt", "psjf", "fb"})


def _near_zero(text: str) -> bool:
    """Sizes with a positive density at 0, where E[1/S] is infinite: exp, hyperexp, erlang
    with one phase, uniform from 0."""
    from schedlab import _core

    d = _core.parse_dist(text, "size")
    name, p = d["name"], d["params"]
    return (name in ("exp", "hyperexp") or (name == "uniform" and p[0] == 0.0)
            or (name == "erlang" and p[0] == 1.0))


def run_notes(s: dict[str, Any], spec: dict[str, Any] | None = None) -> list[str]:
    """What a reader must know about a run's numbers: its warm-up, how its intervals were
    obtained, whether it reached the precision asked for (a warning when not), and, given
    the run's spec, whether its mean slowdown is infinite in theory (a warning)."""
    notes = [f"warm-up: {s.get('warmup_jobs', 0)} jobs, measured from "
             f"{s.get('warmup_time', float('nan')):.4g} ms"]
    if s.get("ci_batches"):
        how = ("uncorrelated" if s.get("ci_uncorrelated")
               else f"NOT shown uncorrelated: too few jobs to trust the intervals "
               f"marked {UNTRUSTED_MARK}")
        notes.append(f"95% intervals from {s['ci_batches']} batches of {s['ci_batch_size']} "
                     f"jobs ({how}); precision of the mean "
                     f"{s.get('response_mean_precision', float('nan')):.2%}")
    if s.get("one_shot_batch"):
        notes.append(ONE_SHOT_TEXT)
    quantiles = [k for k in ("response_p50", "response_p95", "response_p99")
                 if finite_number(s.get(k))]
    if quantiles and s.get("ci_batches") and not any(interval_of(s, k) for k in quantiles):
        notes.append("the percentiles have no interval: their sections (each as long as four "
                     "of the mean's batches) are fewer than two in so short a run "
                     "(docs/statistics.md); a longer run or replications give them one")
    if s.get("precision_reached") is False:
        notes.append(f"WARNING: precision {s['precision']:g} not reached "
                     f"({s.get('response_mean_precision', float('nan')):.2%} at the cap); "
                     f"raise {'max_jobs' if s.get('world', 'sim') == 'sim' else 'max_time'}")
    # A run that drains its jobs and ends with some not done (a clock that overflowed under
    # a cost of 1e308) said so in its JSON alone. A run of a set length leaves the jobs it
    # was serving unfinished by design (a share study's det:1e6 processes).
    drains = spec is not None and spec.get("time") is None and spec.get("max_time") is None
    if drains and finite_number(unfinished := s.get("unfinished")) and unfinished > 0:
        notes.append(f"WARNING: {int(unfinished):,} job(s) did not finish by the end of the "
                     f"run ({s.get('makespan', float('nan')):.4g} ms): the numbers are of the "
                     f"{int(s.get('jobs', 0)):,} that did")
    if s.get("world") == "server" and (failed := not_success(s)):
        notes.append(f"WARNING: {failed}; not measured: the numbers are of the files served")
    if spec is not None and (warning := saturation_warning(s, spec)):
        notes.append(warning)
    if spec is not None and (warning := slowdown_warning(spec)):
        notes.append(warning)
    return notes


def not_success(s: dict[str, Any]) -> str | None:
    """'N of M responses were not success (HTTP 503: N)' from a real run's `status` counts
    (a dict, or its JSON as a stored summary holds it), None when every answer was a 2xx."""
    status = s.get("status")
    if isinstance(status, str):
        try:
            status = json.loads(status)
        except ValueError:
            return None
    if not isinstance(status, dict):  # none recorded (NaN in a table of several worlds)
        return None
    status = {k: v for k, v in status.items() if finite_number(v)}
    failed = {k: v for k, v in status.items() if not str(k).startswith("2")}
    if not failed:
        return None
    return (f"{sum(failed.values())} of {sum(status.values())} responses were not success ("
            + ", ".join(f"HTTP {k}: {v}" for k, v in failed.items()) + ")")


# Machine costs that add CPU time to an open workload's offered load, and their neutral values.
MACHINE_COSTS = {"service_scale": 1, "service_offset": 0, "context_switch": 0, "start_cost": 0,
                 "end_cost": 0, "turn_cost": 0, "migration_cost": 0, "dispatcher_cost": 0}


def saturation_warning(s: dict[str, Any], spec: dict[str, Any]) -> str | None:
    """A warning when an open workload has no steady state: an offered load of 1 or more per
    CPU run with allow_unstable (refused without it), or machine costs that kept its CPUs busy
    for the whole measured interval (the costs of switches depend on the schedule). Either
    way its means grow with the run's length."""
    costs = [k for k, neutral in MACHINE_COSTS.items()
             if spec.get(k) is not None and spec[k] != neutral]
    load, busy = s.get("offered_load"), s.get("utilization")
    if (unstable := unstable_warning(s, spec)) is not None:
        return unstable
    if not (costs and finite_number(load) and finite_number(busy) and busy >= 0.999):
        return None
    return (f"WARNING: the CPUs were busy for the whole measured interval (utilisation "
            f"{busy:.4g} at an offered load of {load:.4g}): with {', '.join(costs)} the open "
            "system is saturated, has no steady state and its means grow with the run's "
            "length; lower the load or the costs")


def unstable_warning(s: dict[str, Any], spec: dict[str, Any]) -> str | None:
    """A load of 1 or more per CPU, run on purpose (allow_unstable): the numbers are this
    run's, not the system's."""
    load = s.get("offered_load")
    if not (spec.get("allow_unstable") and finite_number(load) and load >= 1):
        return None
    return (f"WARNING: an offered load of {load:.4g} per CPU (allow_unstable) has no steady "
            "state: the queue grows for as long as the run lasts, so its means, percentiles "
            "and their intervals describe this run's length, not the system")


def replication_warnings(summaries: list[dict[str, Any]],
                         spec: dict[str, Any] | None = None) -> list[str]:
    """Replications' warnings: each replication's (named by it), then, given the spec they
    share, its infinite mean slowdown once."""
    notes = [f"replication {i}: {n}" for i, s in enumerate(summaries)
             for n in run_notes(s) if n.startswith("WARNING")]
    if spec is not None and summaries and (warning := unstable_warning(summaries[0], spec)):
        notes.append(warning)
    if spec is not None and (warning := slowdown_warning(spec)):
        notes.append(warning)
    return notes


def slowdown_warning(spec: dict[str, Any]) -> str | None:
    """A warning when a run's mean slowdown is infinite in theory, None otherwise. The mean
    slowdown is E[T(S)/S]: where sizes have a positive density at 0 (E[1/S] infinite) and a
    short job waits whatever its size, it diverges, and a run's sample mean, its interval and
    Jain's index over slowdowns do not settle as the run grows (FCFS at load 0.8, exp:1 sizes:
    42 [35, 85] over 1e5 jobs, 154 [58, 647] over 1e6). A short job waits under every policy
    but those of SLOWDOWN_FINITE (and preemptive LCFS), and under those too when every job
    pays a delay (`dispatch_delay`, `start_cost`, `idle_wake`), I/O or a bounded buffer.
    `service_offset` > 0 keeps every service away from 0: no warning."""
    from schedlab.vocabulary import as_dist, find_policy, param_defaults, param_value

    if spec.get("trace") or (spec.get("service_offset") or 0) > 0:
        return None
    name = find_policy(str(spec.get("policy") or "fcfs").split(":")[0])["name"]
    given = {**param_defaults(name), **(spec.get("params") or {})}
    if "preemptive" in spec:
        given["preemptive"] = spec["preemptive"]
    preemptive = param_value("preemptive", given.get("preemptive", False), text=True) is True
    delayed = any((spec.get(k) or 0) > 0 for k in ("dispatch_delay", "start_cost", "idle_wake"))
    bursts = [spec.get("bursts")] + [c.get("bursts") for c in spec.get("classes") or []]
    delayed = delayed or spec.get("buffer") is not None or any((b or 1) > 1 for b in bursts)
    if not delayed and (name in SLOWDOWN_FINITE or (name == "lcfs" and preemptive)):
        return None
    default = spec.get("size") if spec.get("size") is not None else "exp:1"
    sizes = [as_dist(c["size"] if c.get("size") is not None else default)
             for c in spec.get("classes") or [{}]]
    near = [s for s in dict.fromkeys(map(str, sizes)) if _near_zero(s)]
    if not near:
        return None
    why = "every job pays a delay, I/O or a bounded buffer" if delayed and (
        name in SLOWDOWN_FINITE or name == "lcfs") else f"{name} makes a short job wait"
    return (f"WARNING: the mean slowdown is infinite in theory ({why}, and sizes "
            f"{', '.join(near)} have E[1/S] = inf): its value, its interval and Jain's index "
            "over slowdowns do not settle as the run grows; read slowdown_p99, or use sizes "
            "bounded away from 0")

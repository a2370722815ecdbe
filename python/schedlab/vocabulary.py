"""The one vocabulary: every key of every world, with its section, form, unit and help
(declared once, in `crates/model/src/vocabulary.rs`), and the policy catalogue with each
parameter's unit and typed default (declared by each policy in `crates/policy`).

A key means the same in the CLI (`--context-switch`), an experiment file (`context_switch`
in `[machine]`) and Python (`context_switch=`). Policy parameters never share a name with a
key (the core refuses to compile otherwise), so a flat spec such as
`simulate(policy="mlfq", boost_period=100, boost="windows")` is never ambiguous. How each world
reads each key is declared in that world's table (`schedlab.worlds`).
"""

from __future__ import annotations

import math
import numbers
import os
from dataclasses import dataclass
from functools import cache
from typing import Any

import schedlab._core as _core
from schedlab._core import SpecError

__all__ = ["KEYS", "CLASS_KEYS", "KERNEL", "KERNEL_PARAMS", "Key", "SpecError", "spec_error",
           "policy_catalog", "find_policy", "param_units", "param_defaults", "flat_spec",
           "param_value", "parse_policies", "as_dist", "cpu_list", "DEFAULT_SEED",
           "replication_seed", "replication_count", "SUMMARY_UNITS", "WORLD_SUMMARY_UNITS",
           "LOAD_SUMMARY_UNITS", "summary_units", "in_time_unit", "nonnegative", "TABLE_UNITS",
           "table_units"]


@dataclass(frozen=True)
class Key:
    name: str
    section: str  # policy, workload, machine, experiment, output, workload.classes
    form: str  # str, int, float, bool, dist, cpus, table, tables
    unit: str  # work, time, rate, count, ratio, bytes, bool, text, cpus, table
    help: str


KEYS: dict[str, Key] = {k["name"]: Key(**k) for k in _core.VOCABULARY}
CLASS_KEYS: dict[str, Key] = {k["name"]: Key(**k) for k in _core.CLASS_VOCABULARY}
# `policy = "kernel"`: the kernel's own policies (os world), whose parameters are the keys of
# section "policy" other than policy and params.
KERNEL = "kernel"
# A worker's real-time priority under kernel fifo and rr: 99 is the os world's watchdog's.
RTPRIO_RULE = "1..98 for fifo and rr (99 is the watchdog's)"


def check_deadline_budget(key: str, runtime: Any, deadline: Any, period: Any) -> None:
    """SCHED_DEADLINE's rule, runtime <= deadline <= period (a period left out is the
    deadline), as every world refuses it: a SpecError naming `key` (the runtime's) with the
    three as given. Values that are not numbers are left to their own keys' checks."""
    period = deadline if period is None else period
    if all(isinstance(v, int | float) and not isinstance(v, bool)
           for v in (runtime, deadline, period)) and not runtime <= deadline <= period:
        raise spec_error(key, f"{runtime} (deadline {deadline}, period {period})",
                         "runtime <= deadline <= period (ms), as SCHED_DEADLINE needs")
# The kernel's policies (`sched`), and how reports name them.
KERNEL_POLICIES = ("other", "batch", "idle", "fifo", "rr", "deadline")
KERNEL_LABELS = {"other": "CFS", "batch": "BATCH", "idle": "IDLE", "fifo": "FIFO", "rr": "RR",
                 "deadline": "DEADLINE"}
KERNEL_PARAMS: dict[str, Key] = {n: k for n, k in KEYS.items()
                                 if k.section == "policy" and n not in ("policy", "params")}


# The unit of every key of a run summary (`crates/model/src/summary.rs`, SUMMARY_UNITS): ms,
# jobs/ms, ratio, count, jobs (a time-averaged number of jobs), bool, text.
SUMMARY_UNITS: dict[str, str] = dict(_core.SUMMARY_UNITS)
# How a number of each unit is written for users (crates/model/src/units.rs); "" where the
# unit's name says it (count, ratio, bool...).
UNIT_SYMBOLS: dict[str, str] = dict(_core.UNIT_SYMBOLS)


def unit_text(unit: str, work: str = "ms of service") -> str:
    """A key's or a parameter's unit as a user reads it: ms, per ms, B, and `work` for work
    (ms of service in the simulator and on real processes, packets in the file server)."""
    return work if unit == "work" else (UNIT_SYMBOLS.get(unit) or unit)


# The unit of every number a real world adds to the summary beside the core's (docs/os.md,
# docs/server.md); its text, flags and tables (`contended_end`, `noisy`, `status`...) have none.
WORLD_SUMMARY_UNITS: dict[str, str] = {
    # os
    "release_ms": "ms", "tasks": "count", "wall_ms": "ms", "user_ms": "ms", "sys_ms": "ms",
    "runqueue_wait_ms": "ms", "wait_inconsistent_jobs": "count", "unaccounted_jobs": "count",
    "unaccounted_max": "ms",
    "killed_tasks": "count", "measure_cpu_ms": "ms", "measure_overhead": "ratio",
    "coordinator_cpu_ms": "ms", "samples_taken": "count", "foreign_fraction": "ratio",
    "steal_fraction": "ratio", "attempts": "count", "moves": "count", "moves_missed": "count",
    "first_move": "ms", "first_move_tasks": "count", "dispatcher_cpu_ms": "ms",
    "dispatcher_overhead": "ratio", "dispatcher_decisions": "count",
    "dispatcher_switches": "count", "dispatcher_timer_lateness_us": "us",
    # server
    "missed_sends": "count", "errors": "count", "bytes": "bytes", "duration": "ms",
    "sending_ended": "ms", "throughput_rps": "requests/s", "throughput_rps_ci": "requests/s",
    "offered_rate": "requests/s", "response_p999": "ms", "response_p999_ci": "ms",
    "connections": "count", "server_served": "count", "server_aborted": "count",
}


# The load generator's own summary (`schedlab load --json`, docs/server.md): a client's view
# of a server, in requests.
LOAD_SUMMARY_UNITS: dict[str, str] = {
    "requests": "count", "errors": "count", "sent": "count", "missed_sends": "count",
    "warmup": "count", "bytes": "bytes", "duration": "ms", "sending_ended": "ms",
    "throughput_rps": "requests/s", "throughput_rps_ci": "requests/s",
    "offered_rate": "requests/s", "connections": "count", "threads": "count", "start_ns": "ns",
    "precision": "ratio", "stopped_precise": "bool",
    "response_mean_precision": "ratio", "ci_uncorrelated": "bool",
    **{f"response_{q}": "ms" for q in ("mean", "std", "p50", "p90", "p95", "p99", "p999",
                                        "max")},
    **{f"response_{q}_ci": "ms" for q in ("mean", "p50", "p90", "p95", "p99", "p999")},
}


# The unit of every column of a run's tables (`Result.units`; "id" names a job, a task, a
# class or a CPU). A job's `size` is its service in ms in every world (the server's: its file
# through the cost model); the server world's per-job table has its file in `bytes`, the
# worker time it got in `service`, and columns of its own (docs/server.md).
TABLE_UNITS: dict[str, dict[str, str]] = {
    "jobs": {"job": "id", "client": "id", "class": "id", "cpu": "id", "arrival": "ms",
             "first_run": "ms", "completion": "ms", "size": "ms", "wait": "ms",
             "response": "ms", "slowdown": "ratio", "context_switches": "count",
             "migrations": "count", "replication": "id", "seed": "text"},
    "classes": {"class": "id", "jobs": "count", "response_mean": "ms", "response_p50": "ms",
                "response_p95": "ms", "response_p99": "ms", "wait_mean": "ms",
                "slowdown_mean": "ratio", "response_mean_ci": "ms", "response_p50_ci": "ms",
                "response_p95_ci": "ms", "response_p99_ci": "ms", "wait_mean_ci": "ms",
                "slowdown_mean_ci": "ratio", "ci_uncorrelated": "bool", "replication": "id",
                "seed": "text"},
    "tasks": {"task": "id", "class": "id", "jobs": "count", "response_mean": "ms",
              "migrations": "count", "cpu": "id", "service": "ms", "share": "ratio",
              "entitled": "ratio", "share_ratio": "ratio", "replication": "id",
              "seed": "text"},
    "schedule": {"cpu": "id", "job": "id", "task": "id", "start": "ms", "end": "ms",
                 "replication": "id", "seed": "text"},
    "loads": {"cpu": "id", "runnable": "jobs", "time_share": "ratio",
              "completion_share": "ratio", "replication": "id", "seed": "text"},
    "load_series": {"time": "ms", "cpu": "id", "runnable": "jobs", "replication": "id",
                    "seed": "text"},
}
SERVER_JOB_UNITS: dict[str, str] = {
    "bytes": "bytes", "sent": "ms", "status": "text", "error": "text", "path": "text",
    "server_arrival": "ms", "service": "ms", "turns": "count"}
# The os world's own columns (docs/os.md): a job's and a task's counters from the kernel and
# the dispatcher. nice, rtprio and priority are scheduling levels (no unit: "level").
OS_TABLE_UNITS: dict[str, dict[str, str]] = {
    "jobs": {"task_job": "id", "cpu_time": "ms", "runqueue_wait": "ms", "held": "ms",
             "io": "ms", "unaccounted": "ms", "voluntary": "count", "involuntary": "count"},
    "tasks": {"pid": "id", "policy": "text", "nice": "level", "rtprio": "level",
              "tickets": "count", "priority": "level", "weight": "ratio", "home_cpu": "id",
              "cpu_time": "ms", "runqueue_wait": "ms", "held": "ms", "slices": "count",
              "voluntary": "count", "involuntary": "count", "context_switches": "count",
              "wait_max": "ms", "wakeups": "count", "user_ms": "ms", "sys_ms": "ms",
              "wall_ms": "ms", "done_ms": "ms", "exit_code": "id", "killed": "text",
              "unfinished": "count", "records_dropped": "count", "rttime_limit_us": "text",
              "dispatches": "count"},
}


def table_units(table: str, columns: Any, world: str | None = None) -> dict[str, str]:
    """The units of a table's columns (`TABLE_UNITS`; the server world's per-job table and the
    os world's jobs and tasks have columns of their own); a column the vocabulary does not
    know is left out."""
    units = dict(TABLE_UNITS.get(table, {}))
    if table == "jobs" and world == "server":
        units.update(SERVER_JOB_UNITS)
    if world == "os":
        units.update(OS_TABLE_UNITS.get(table, {}))
    return {c: units[c] for c in columns if c in units}


# What a summary across replications adds (`schedlab.stats.across_replications`).
REPLICATION_UNITS: dict[str, str] = {"replications": "count", "seeds": "text",
                                     "ci_method": "text"}


def summary_units(summary: dict[str, Any]) -> dict[str, str]:
    """The units of a summary's numbers: the core's keys and each real world's own; an
    interval `KEY_ci` has the unit of KEY."""
    units = {**SUMMARY_UNITS, **WORLD_SUMMARY_UNITS, **REPLICATION_UNITS}
    return {k: units.get(k) or units[k.removesuffix("_ci")] for k in summary
            if k in units or k.removesuffix("_ci") in units}


def nonnegative(key: str) -> bool:
    """Whether `key` is a number of a summary: every one of them (times, counts, rates,
    ratios, bytes) is 0 or more by definition, so an interval of it is cut at 0 (cutting
    away values the quantity cannot take keeps an interval's coverage)."""
    unit = SUMMARY_UNITS.get(key) or WORLD_SUMMARY_UNITS.get(key)
    return unit is not None and unit not in ("text", "bool")


def in_time_unit(unit: str, time_unit: str = "ms") -> str:
    """A summary unit in an experiment's time unit (`[experiment] unit`): ms becomes it, and
    jobs/ms jobs per it; other units stay."""
    if time_unit == "ms":
        return unit
    return {"ms": time_unit, "jobs/ms": f"jobs/{time_unit}"}.get(unit, unit)


# The core's `seed` when none is given (a test checks that the two agree).
DEFAULT_SEED = 1


def replication_seed(seed: int, replication: int) -> int:
    """The seed of replication r: the same for every point and policy (common random numbers),
    independent streams across replications (numpy's SeedSequence mixes the pair). Used by
    experiment files and by `simulate(replications=R)` alike, so both make the same runs."""
    import numpy as np  # on use: the parser's path does not need numpy for this

    return int(np.random.SeedSequence([seed, replication]).generate_state(1, np.uint32)[0])


# Replications of one run at most (each is a whole run held in memory until all are done).
MAX_REPLICATIONS = 100_000


def replication_count(value: Any, key: str = "replications") -> int:
    """A count of replications or workers: a whole number, 1 to MAX_REPLICATIONS."""
    if isinstance(value, bool) or not isinstance(value, int) or not \
            1 <= value <= MAX_REPLICATIONS:
        raise spec_error(key, quoted(value),
                         f"a whole number, at least 1 and at most {MAX_REPLICATIONS:,}")
    return value


def batches_beside(replications: int) -> str:
    """Why `batches` is refused beside several replications: the interval across them
    replaces one run's batch means, which would go unused."""
    return (f"nothing beside replications = {replications}: the intervals are then taken "
            "across the replications (batches splits one run)")


def whole_number(key: str, value: Any, least: int, most: int | None = None,
                 note: str = "") -> int:
    """A whole number >= least (and <= most; 4.0 is 4), or SpecError naming the key and the
    range, with `note` (why the range) after it."""
    if (isinstance(value, bool) or not isinstance(value, numbers.Real)
            or not math.isfinite(value) or not float(value).is_integer() or value < least
            or (most is not None and value > most)):
        allowed = f"a whole number >= {least}" if most is None else \
            f"a whole number from {least} to {most}"
        raise spec_error(key, quoted(value), f"{allowed} ({note})" if note else allowed)
    return int(value)


def quoted(value: Any) -> Any:
    """A value as a message shows it where text is not what is expected: text quoted
    (`load = "0.5"` is refused as text, where `load = 0.5` would read as if the number were)."""
    return f'"{value}"' if isinstance(value, str) else value


def spec_error(key: str, value: Any, allowed: str) -> SpecError:
    """A SpecError like the core's: key, value given, what is allowed."""
    err = SpecError(f"{key} = {value}: expected {allowed}")
    err.key, err.value, err.allowed = key, str(value), allowed
    return err


@cache
def _catalog() -> tuple[dict[str, Any], ...]:
    return tuple(_core.policies())


def policy_catalog() -> list[dict[str, Any]]:
    """Every policy: name, aliases, summary, params (name, kind, unit, allowed, default,
    default_text, help)."""
    return list(_catalog())


def find_policy(name: str) -> dict[str, Any]:
    wanted = str(name).lower()
    for p in _catalog():
        if p["name"] == wanted or wanted in p["aliases"]:
            return p
    names = ", ".join(p["name"] for p in _catalog())
    raise spec_error("policy", name, f"one of {names}")


@cache
def param_units() -> dict[str, str]:
    """The unit of every policy parameter name (one per name: the core checks it)."""
    return {q["name"]: q["unit"] for p in _catalog() for q in p["params"]}


def param_defaults(policy: str) -> dict[str, Any]:
    """The typed defaults of a policy's parameters (those that have one)."""
    if policy == KERNEL:
        return {}
    return {q["name"]: q["default"] for q in find_policy(policy)["params"]
            if q["default"] is not None}


def as_dist(value: Any) -> Any:
    """A bare number is a constant: size=20 means det:20."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return f"det:{value}"
    return value


def cpu_list(value: Any) -> list[int]:
    """CPU numbers from [0, 1], 1, '0-1', '0,2' or '[0, 1]' (the form `cpus`); ValueError
    otherwise: for no CPU at all ("", [], "3-1": an empty set ran on every CPU, without a word), a
    negative one, or more than the simulator's MAX_CPUS (checked before a range is expanded:
    "0-4000000000" took all memory)."""
    if isinstance(value, bool):
        raise ValueError(value)
    out: list[int] = []
    if isinstance(value, numbers.Integral):  # numpy's integers too
        out = [int(value)]
    elif isinstance(value, str):
        # "[0, 1]" on a command line is the list a file writes.
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):
            text = text[1:-1]
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-"))
                if lo > hi or hi - lo >= _core.MAX_CPUS:
                    raise ValueError(value)
                out.extend(range(lo, hi + 1))
            elif part:
                out.append(int(part))
            if len(out) > _core.MAX_CPUS:
                raise ValueError(value)
    elif isinstance(value, list | tuple):
        if any(isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v)
               or int(v) != v for v in value):
            raise ValueError(value)
        out = [int(v) for v in value]
    else:
        raise ValueError(value)
    if not out or min(out) < 0 or len(out) > _core.MAX_CPUS:
        raise ValueError(value)
    return out


def param_value(key: str, value: Any, text: bool = False) -> Any:
    """A policy parameter as the core takes it: a number, a list of numbers or a bool
    (numpy's numbers as Python's). Text is read as one of these only where it was typed on
    the command line (`text`); from a file or Python, "10" is refused as `load = "0.5"` is."""
    if isinstance(value, bool | int | float):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, list | tuple):
        # A NaN or an infinity is a number: the core refuses it as not finite, by its domain.
        if not all(_is_number(v) for v in value):
            raise spec_error(key, list(value), "a number, a list of numbers or true/false")
        return [float(v) for v in value]
    if isinstance(value, str) and not text:
        raise spec_error(key, quoted(value), "a number, a list of numbers or true/false, not "
                         "text (text is read as a value on the command line only)")
    if isinstance(value, str):
        word = value.strip().lower()
        if word in ("true", "yes", "on"):
            return True
        if word in ("false", "no", "off"):
            return False
        try:
            parts = [float(p) for p in word.split(",")]
        except ValueError:
            raise spec_error(key, quoted(value), _param_allowed(key)) from None
        # inf and nan parse: the core refuses them by the parameter's domain, as from a file.
        return parts[0] if len(parts) == 1 else parts
    raise spec_error(key, value, "a number, a list of numbers or true/false")


def _param_allowed(key: str) -> str:
    """What a policy parameter of this name takes, as the policies declare it ("a number > 0"
    for every quantum); the three forms of any parameter where policies differ on it or
    none has it."""
    allowed = {q["allowed"] for p in _catalog() for q in p["params"] if q["name"] == key}
    return allowed.pop() if len(allowed) == 1 else "a number, a list of numbers or true/false"


def _is_number(v: Any) -> bool:
    """A number, numpy's too (a sweep's values often are), but not a bool."""
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def as_written(v: Any) -> Any:
    """A number as written (5 for 5.0), in a list too."""
    if isinstance(v, list | tuple):
        return [as_written(x) for x in v]
    return int(v) if isinstance(v, float) and v.is_integer() else v


def _same(key: str, a: Any, b: Any) -> bool:
    """One value written two ways (5 and 5.0, a tuple and a list); text (a kernel policy's
    sched) as it is: "5" is not 5 outside the command line, which reads its text first."""
    try:
        return bool(param_value(key, a) == param_value(key, b))
    except SpecError:
        return bool(a == b)


class Params:
    """A policy's parameters gathered from the ways they can be given (inline in the policy,
    a `params` table, by name or flag): the same value given twice is one value, two values
    are refused, since no way outranks another."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.where: dict[str, str] = {}

    def give(self, values: dict[str, Any], where: str) -> None:
        for k, v in values.items():
            if k in self.values and not _same(k, self.values[k], v):
                for text in (x for x in (self.values[k], v) if isinstance(x, str)):
                    try:
                        param_value(k, text, text=True)
                    except SpecError:
                        continue  # a word, as a kernel's sched: the two values differ
                    param_value(k, text)  # a number written as text: refused as text
                raise spec_error(k, quoted(as_written(v)), f"one value of {k}: it is "
                                 f"{quoted(as_written(self.values[k]))} in {self.where[k]} too")
            self.values[k], self.where[k] = v, where

    def of_policy(self, policy: Any, where: str | None = None) -> Any:
        """The parameters a policy carries (a policy object's, or inline as `--policy
        rr:quantum=5` takes one policy), given from `where`; returns the policy's name (any
        other policy, a list of them included, as it was)."""
        if hasattr(policy, "name") and hasattr(policy, "params"):
            self.give(dict(policy.params), where or "the policy object")
            return policy.name
        if isinstance(policy, str) and ":" in policy:
            parsed = parse_policies(policy)
            if len(parsed) == 1:  # one policy, a list value's commas included (quanta=1,2,4)
                ((name, inline),) = parsed
                self.give(inline, where or f"the policy's text ({policy})")
                return name
        return policy


# Specs the core accepts, to ask it about one count alone: a count may need others beside
# it (max_jobs needs precision, clients has no load). choices, whose rule names cpus, is
# not asked.
_PROBE_SPECS = (
    {"policy": "fcfs", "load": 0.5, "jobs": 10},
    {"policy": "fcfs", "jobs": 10},
    {"policy": "fcfs", "load": 0.5, "precision": 0.1},
)


@cache
def _count_rule(key: str, in_class: bool = False) -> str | None:
    """The simulator's own rule for a count it refuses at 0 (jobs: "a whole number >= 1"; at
    1 too, batches: ">= 2"), so that a negative count is not told ">= 0" and then, at 0,
    ">= 1". Asked of the core with the least value a spec takes (1, else 2) and the one below
    (in a class of two, for a class's count: a class may have no clients): a rule that
    refuses 2 in every such spec depends on other keys and is not given here."""
    validate, bases = _core.validate, _PROBE_SPECS
    if key not in (_core.SIM_CLASS_KEYS if in_class else _core.SIM_KEYS):
        if in_class or key not in dict(_core.SERVE_KEYS):
            return None
        # A key of the server only (packet): the server's rule.
        validate, bases = _core.serve_validate, ({"root": "/"},)
    path = f"classes[0].{key}" if in_class else key

    def refusal(base: dict, value: int) -> str | None:
        given = ({"classes": [{"name": "a", key: value}, {"name": "b"}]} if in_class
                 else {key: value})
        try:
            validate({**base, **given})
        except SpecError as e:
            return e.allowed if e.key == path else ""
        return None

    for base in bases:
        for least in (1, 2):
            if refusal(base, least) is None:
                return refusal(base, least - 1) or None
    return None


def typed(key: str, value: Any, k: Key, where: str | None = None) -> Any:
    """A value checked against its key's form, so that a wrong type is one error naming the
    key: a number where a word is expected goes on as text (the world then names the words it
    takes), a whole number may be written 4.0, anything else of the wrong type is refused."""
    path = where or key
    form = k.form
    shown = quoted(value)
    if form == "str":
        if _is_number(value) or isinstance(value, os.PathLike):
            return str(value)
        if not isinstance(value, str):
            raise spec_error(path, value, "text")
    elif form == "int":
        # A count is never negative; a ratio such as nice is signed.
        least = 0 if k.unit == "count" else None
        if (_is_number(value) and float(value).is_integer()
                and (least is None or value >= least)):
            return int(value)
        raise spec_error(path, shown, "a whole number" if least is None else
                         _count_rule(key, where is not None)
                         or f"a whole number >= {least}")
    elif form == "int|auto":
        if value == "auto":
            return value
        if _is_number(value) and float(value).is_integer() and value >= 0:
            return int(value)
        raise spec_error(path, shown, "a whole number >= 0, or auto")
    elif form == "float":
        if not _is_number(value):
            raise spec_error(path, shown, "a number")
        if not isinstance(value, int | float):
            return float(value)  # numpy's
    elif form == "bool":
        if not isinstance(value, bool):
            raise spec_error(path, shown, "true or false")
    elif form == "dist":
        value = as_dist(value)
        if not isinstance(value, str):
            raise spec_error(path, shown, f"a distribution ({_core.DIST_SYNTAX})")
    elif form == "cpus":
        if _is_number(value) and float(value).is_integer():
            return int(value)  # 2.0 and numpy's integers count CPUs as 2 does
        if not (isinstance(value, int | str | list | tuple) and not isinstance(value, bool)):
            raise spec_error(path, shown, "a number of CPUs or a list of CPU numbers")
    elif form == "table":
        if not isinstance(value, dict):
            raise spec_error(path, shown, "a table")
    elif form == "tables":
        if not isinstance(value, list | tuple) or not all(isinstance(v, dict) for v in value):
            raise spec_error(path, shown, "a list of tables")
    return value


def several_policies(policy: Any) -> bool:
    """A list of policies, or a text naming several (`fcfs,srpt`); not one policy whose list
    value has commas (`mlfq:quanta=1,2,4`). A text that does not parse counts as several
    where it has commas: the comparison refuses it by name."""
    if isinstance(policy, list | tuple):
        return True
    if not isinstance(policy, str) or "," not in policy:
        return False
    try:
        return len(parse_policies(policy)) > 1
    except SpecError:
        return True


def parse_policies(text: str) -> list[tuple[str, dict[str, Any]]]:
    """Policies written on one line, as `--policy` takes them: `fcfs,srpt,rr:quantum=5`, a
    parameter after a colon (several: `mlfq:levels=3:boost_period=100`); a list value goes
    on after commas (`mlfq:quanta=1,2,4,rr`: numbers continue the value before them), and
    more parameters may follow it (`mlfq:quanta=1,2,4:boost_period=100`).
    Returns (canonical name, parameters) pairs; unknown names and parameters are refused."""
    out: list[tuple[str, dict[str, Any]]] = []
    last: str | None = None
    for piece in (p.strip() for p in text.split(",")):
        head, *rest = piece.split(":")
        if last is not None and _is_number_text(head):
            # A list value goes on (`quanta=1,2,4`), and may be followed by more parameters
            # of the same policy (`quanta=1,2,4:boost_period=100`).
            name, params = out[-1]
            before = params[last]
            params[last] = [*(before if isinstance(before, list) else [before]),
                            param_value(last, head, text=True)]
            last = _policy_params(find_policy(name), piece, rest, params) or last
            continue
        if not piece:
            raise spec_error("policy", text, "policy names separated by commas, e.g. "
                             "fcfs,srpt,rr:quantum=5")
        info = find_policy(head)
        params = {}
        last = _policy_params(info, piece, rest, params)
        out.append((info["name"], params))
    return out


def _policy_params(info: dict[str, Any], piece: str, items: list[str],
                   params: dict[str, Any]) -> str | None:
    """Adds `PARAM=VALUE` items to `params`; returns the last parameter given (None: none)."""
    names = {q["name"] for q in info["params"]}
    last = None
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in names:
            allowed = ", ".join(sorted(names)) or "none"
            raise spec_error("policy", piece, f"NAME:PARAM=VALUE with PARAM a parameter of "
                             f"{info['name']} ({allowed})")
        params[key] = param_value(key, value, text=True)
        last = key
    return last


def _is_number_text(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# A schedlab policy's parameter beside the kernel's own policies (`schedlab os --quantum 3`).
KERNEL_HAS_NO_PARAMS = "nothing under the kernel (a parameter of a schedlab policy: set policy)"


def flat_spec(policy: Any = "fcfs", **kwargs: Any) -> dict[str, Any]:
    """Keyword arguments as one flat spec: `policy` (a name, an alias, "kernel", or a policy
    object from `schedlab.policies` carrying its params), `params` (a table) and the keys of
    the vocabulary. Parameters may also be given by name; a name that is neither a key nor a
    parameter of the policy is refused, naming both lists. A parameter given two ways (inline
    in the policy, in `params`, by name) with two values is refused: no way outranks another."""
    given = Params()
    policy = given.of_policy(policy)
    if str(policy).lower() == KERNEL:
        name, names = KERNEL, set(KERNEL_PARAMS)
    else:
        try:
            info = find_policy(str(policy))
        except SpecError as e:  # one more is taken here: the kernel's own (the os world's)
            raise spec_error("policy", policy, f"{e.allowed}, or kernel (the kernel's own "
                             "policies, chosen by sched)") from None
        name, names = info["name"], {p["name"] for p in info["params"]}
    spec: dict[str, Any] = {"policy": name}
    for key, value in kwargs.items():
        if value is None:
            continue
        if key == "params":
            if not isinstance(value, dict):
                raise spec_error("params", value, "a table of the policy's parameters "
                                 "(name = value)")
            given.give(value, "params")
        elif key in names:
            given.give({key: value}, "its own key")
        elif key in KEYS:
            spec[key] = typed(key, value, KEYS[key])
        elif key in param_units():
            # Another policy's parameter: said as the command line says it.
            if name == KERNEL:
                raise spec_error(key, as_written(value), KERNEL_HAS_NO_PARAMS)
            raise spec_error(key, value, f"a parameter of policy {name} "
                             f"({', '.join(sorted(names))})" if names
                             else f"no parameters for policy {name}")
        else:
            keys = ", ".join(k for k in KEYS if KEYS[k].section != "policy")
            allowed = (f"a key ({keys}) or a parameter of policy {name} "
                       f"({', '.join(sorted(names)) or 'none'})")
            raise spec_error(key, value, allowed)
    params = given.values
    if params:
        if name == KERNEL:
            for key, value in params.items():
                if key not in KERNEL_PARAMS and key in param_units():  # `--quantum 2`
                    raise spec_error(key, as_written(value), KERNEL_HAS_NO_PARAMS)
            spec.update(params)  # the kernel's parameters are keys of the os world
        else:
            spec["params"] = {k: param_value(k, v) for k, v in params.items()}
    if "classes" in spec:
        spec["classes"] = [
            {k: (typed(k, v, CLASS_KEYS[k], f"classes[{i}].{k}") if k in CLASS_KEYS else v)
             for k, v in c.items() if v is not None} for i, c in enumerate(spec["classes"])]
    return spec

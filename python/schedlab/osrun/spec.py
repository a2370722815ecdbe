"""The os world's spec: the vocabulary's keys (`schedlab.vocabulary`) that real processes can
honour; `schedlab.worlds.os` says how the os world reads every other key.

`build_plan(spec)` checks a spec dict and spells out every task (one real process each) for the
Rust coordinator. Errors name the key, the value and what is allowed (SpecError, exit 2).
"""

from __future__ import annotations

import math
import os
from typing import Any

import schedlab._core as _core
from schedlab.vocabulary import (
    KERNEL,
    KERNEL_HAS_NO_PARAMS,
    KERNEL_POLICIES,
    RTPRIO_RULE,
    SpecError,
    as_written,
    check_deadline_budget,
    cpu_list,
    find_policy,
    param_units,
    param_value,
    spec_error,
)

# The keys the os world reads (their meaning, unit and help: `schedlab.vocabulary`). Without
# `policy` (or with policy = kernel) the kernel schedules the processes; with a schedlab
# policy, the user-space dispatcher does.
NATIVE_KEYS = frozenset({
    "policy", "params", "sched", "nice", "rtprio", "runtime", "deadline", "period", "size",
    "jobs", "time", "clients", "think", "batch", "classes", "bursts", "io", "cpus", "runqueues",
    "affinity", "start_pinned", "release_after", "enforce", "seed", "warmup", "warmup_time",
    "hard_timeout", "rttime", "job_counters", "io_dir", "quiet_wait", "noise_threshold",
    "retry_noisy", "pretend_missing", "keep_jobs", "load_sample", "precision", "max_time",
    "trace_migrations"})
NATIVE_CLASS_KEYS = frozenset({
    "name", "fraction", "clients", "batch", "size", "think", "priority", "tickets", "weight",
    "nice", "sched", "rtprio", "runtime", "deadline", "period", "affinity", "start_pinned",
    "release_after", "io", "bursts", "rttime"})

PER_CLASS_OS = ("sched", "nice", "rtprio", "runtime", "deadline", "period", "affinity",
                "start_pinned", "release_after", "io", "bursts", "rttime", "think", "size")

# The dispatcher's runqueues (the kernel keeps its own per-CPU ones).
RUNQUEUES = ("global", "per-cpu")

# Worker processes a run forks at most (study 003 goes to 1,000; a typo of 10^8 must not
# start forking).
MAX_PROCESSES = 4_096


def _cpu_list(key: str, value: Any, allowed_cpus: list[int]) -> list[int]:
    try:
        out = cpu_list(value)
    except ValueError:
        raise spec_error(key, value, "a CPU list like [0, 1], '0-1' or '0,2'") from None
    bad = [c for c in out if c not in allowed_cpus]
    if not out or bad:
        raise spec_error(key, value, f"CPUs from {allowed_cpus}")
    if len(set(out)) != len(out):  # 0,0 ran on one CPU where two were read
        raise spec_error(key, value, f"each CPU once (CPUs from {allowed_cpus})")
    return sorted(out)


def _fraction(key: str, value: Any) -> float:
    """A fraction of the CPUs, 0 to 1."""
    allowed = "a fraction of the CPUs, from 0 to 1 (0.1: a tenth)"
    v = _number(key, value, lo=0, allowed=allowed)
    if v > 1:
        raise spec_error(key, value, allowed)
    return v


def _forkable(key: str, n: int) -> None:
    """Refuses more processes in all than a run forks (MAX_PROCESSES)."""
    if n > MAX_PROCESSES:
        raise spec_error(key, n, f"at most {MAX_PROCESSES:,} processes in all (each is a forked "
                         "worker on this machine)")


def _number(key: str, value: Any, lo: float | None = None, integer: bool = False,
            allowed: str | None = None) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if ok and integer and int(value) != value:
        ok = False
    if ok and lo is not None and value < lo:
        ok = False
    if not ok:
        what = allowed or (("a whole number" if integer else "a number")
                           + (f" >= {lo:g}" if lo is not None else ""))
        raise spec_error(key, value, what)
    return float(value)


def _flag(spec: dict[str, Any], key: str, default: bool) -> bool:
    value = spec.get(key, default)
    if not isinstance(value, bool):
        raise spec_error(key, value, "true or false")
    return value


def _dist(key: str, value: Any) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = f"det:{value}"
    if not isinstance(value, str):
        raise spec_error(key, value, f"a distribution ({_core.DIST_SYNTAX})")
    parsed = _core.parse_dist(value, key)
    return str(parsed["written"])


def _dist_mean(text: str) -> float:
    return float(_core.parse_dist(text, "dist")["mean"])


def _io(key: str, value: Any) -> dict[str, Any] | None:
    if value is None or value == "none":
        return None
    if isinstance(value, str) and ":" in value:
        kind, _, rest = value.partition(":")
        kind = kind.strip().lower()
        if kind == "dsync":
            try:
                n = int(rest)
            except ValueError:
                n = -1
            if n < 1:
                raise spec_error(key, value, "dsync:BYTES with BYTES a whole number >= 1")
            return {"dsync": n}
        if kind == "sleep":
            try:
                return {"sleep": _dist(key, rest)}
            except _core.SpecError as e:
                raise spec_error(key, value, f"sleep:DIST with DIST {e.allowed}") from None
    # A distribution alone is the simulator's wait between two bursts, which an experiment
    # file translates (bursts - 1 sleeps); here each burst is followed by its I/O.
    raise spec_error(key, value, "dsync:BYTES or sleep:DIST after each burst (e.g. "
                     "sleep:det:4); a distribution alone is the simulator's wait between "
                     "bursts, which an experiment file translates")


# The longest run of real processes accepted (ms): a day.
MAX_RUN_MS = 24 * 3_600_000
# Real-time runs: the hard timeout and RLIMIT_RTTIME are the planned length (or demand) times
# this, plus a fixed allowance for start-up.
RT_MARGIN = 1.25


def usable_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def _split(n: int, shares: list[float]) -> list[int]:
    """n items over classes by their shares, as the simulator assigns clients."""
    bounds, acc = [], 0.0
    for f in shares:
        acc += f
        bounds.append(acc)
    counts = [0] * len(shares)
    for i in range(n):
        u = (i + 0.5) / n
        c = next((k for k, hi in enumerate(bounds) if u < hi), len(shares) - 1)
        counts[c] += 1
    return counts


def _policy(name: Any) -> dict[str, Any]:
    """A schedlab policy by name; an unknown one is refused naming the os world's one more,
    the kernel's own (its default)."""
    try:
        return find_policy(str(name))
    except SpecError as e:
        raise spec_error("policy", name, f"{e.allowed}, or kernel (the kernel's own "
                         "policies, chosen by sched)") from None


def _dispatcher(spec: dict[str, Any]) -> str | None:
    """The schedlab policy the user-space dispatcher runs; None: the kernel schedules."""
    name = spec.get("policy")
    if name is None or name == KERNEL:
        return None
    if str(name).lower() in KERNEL_POLICIES and str(name).lower() not in ("rr",):
        raise spec_error("policy", name, "a schedlab policy; kernel policies go in the key sched")
    info = _policy(name)
    given = spec.get("params") or {}
    if not isinstance(given, dict):
        raise spec_error("params", given, "a table of policy parameters")
    params = {k: param_value(k, v) for k, v in given.items()}
    _core.check_discrete(str(name), params or None, _core.DISPATCH_FLUID_REFUSED)
    return info["name"]


def build_plan(spec: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Checks `spec` and returns (plan for the Rust coordinator, run options for Python)."""
    if not isinstance(spec, dict):
        raise spec_error("spec", spec, "a table of keys")
    spec = dict(spec)
    policy = spec.get("policy")
    names: set[str] = set()
    if policy is not None and policy != KERNEL:
        names = {p["name"] for p in _policy(policy)["params"]}
    for key in list(spec):
        if key in names and key not in NATIVE_KEYS:
            spec.setdefault("params", {})
            spec["params"] = {**spec["params"], key: spec.pop(key)}
        elif key not in NATIVE_KEYS:
            if not names and key in param_units():  # as `params` under the kernel below
                raise spec_error(key, as_written(spec[key]), KERNEL_HAS_NO_PARAMS)
            known = sorted(NATIVE_KEYS | names)
            raise spec_error(key, spec[key], f"an os-world key: {', '.join(known)}")
    allowed = usable_cpus()
    cpus_v = spec.get("cpus", len(allowed))
    if isinstance(cpus_v, int) and not isinstance(cpus_v, bool):
        if not 1 <= cpus_v <= len(allowed):
            raise spec_error("cpus", cpus_v, f"1..{len(allowed)} (CPUs this process may use: "
                             f"{allowed})")
        cpus = allowed[:cpus_v]
    else:
        cpus = _cpu_list("cpus", cpus_v, allowed)
    dispatcher = _dispatcher(spec)
    params = spec.get("params") or {}
    if not isinstance(params, dict):
        raise spec_error("params", params, "a table of policy parameters")
    params = dict(params)
    if dispatcher is None and params:
        # Named as the user wrote it (--quantum 3 said "params = {'quantum': 3.0}").
        key, value = next(iter(params.items()))
        raise spec_error(key, as_written(value), KERNEL_HAS_NO_PARAMS)
    if dispatcher is not None:
        info = find_policy(dispatcher)
        names = {p["name"] for p in info["params"]}
        for k, v in params.items():
            if k not in names:
                raise spec_error(k, v, f"a parameter of policy {dispatcher}: "
                                 f"{', '.join(sorted(names)) or 'none'}")
        params = {k: param_value(k, v) for k, v in params.items()}
    for key in ("runqueues", "enforce"):
        if key in spec and dispatcher is None:
            raise spec_error(key, spec[key], "nothing under the kernel: it is a key of the "
                             "user-space dispatcher (the kernel has its own runqueues)")
    runqueues = spec.get("runqueues", "global")
    if runqueues not in RUNQUEUES:
        raise spec_error("runqueues", runqueues, " or ".join(RUNQUEUES))
    enforce = spec.get("enforce", "stop")
    if enforce not in ("stop", "fifo"):
        raise spec_error("enforce", enforce, "stop or fifo")
    fifo = enforce == "fifo"

    seed = spec.get("seed", 1)
    _number("seed", seed, lo=0, integer=True)
    seed = int(seed)  # as given: a float would round a seed above 2^53
    if seed >= 2**64:
        raise spec_error("seed", seed, "a smaller whole number (it does not fit)")
    time_ = spec.get("time")
    if time_ is not None:
        time_ = _number("time", time_, lo=1e-9, allowed="a number > 0 (ms)")
    jobs = spec.get("jobs")
    if jobs is not None:
        jobs = int(_number("jobs", jobs, lo=1, integer=True))
    # Until precise, max_time caps the run (the coordinator stops there as at time) and jobs,
    # if given, is the first look (in all), not a quota per process.
    precision, first_look = spec.get("precision"), None
    if precision is not None:
        ok = isinstance(precision, int | float) and not isinstance(precision, bool) \
            and 0 < precision < 1
        if not ok:
            raise spec_error("precision", precision, "a relative half-width > 0 and < 1, "
                             "e.g. 0.05")
        if time_ is not None:
            raise spec_error("time", time_, "no time with precision: max_time caps a run "
                             "until precise")
        if "max_time" not in spec:
            raise spec_error("precision", precision, "a cap too: max_time (ms of running)")
        time_ = _number("max_time", spec["max_time"], lo=1e-9, allowed="a number > 0 (ms)")
        first_look, jobs = jobs, None
    elif "max_time" in spec:
        raise spec_error("max_time", spec["max_time"], "max_time with precision only (time "
                         "ends any other run)")
    warm_count = spec.get("warmup", 0)
    if (jobs is not None and isinstance(warm_count, int) and not isinstance(warm_count, bool)
            and warm_count > 0):
        # As in the simulator and the server: `jobs` are measured after the warm-up's, and
        # the processes run both (they measured jobs - warmup, and nothing at warmup >= jobs).
        jobs += warm_count
    classes_in = spec.get("classes") or [{}]
    if not isinstance(classes_in, list) or not all(isinstance(c, dict) for c in classes_in):
        raise spec_error("classes", classes_in, "a list of tables")
    for i, c in enumerate(classes_in):
        for k in c:
            if k not in NATIVE_CLASS_KEYS:
                raise spec_error(f"classes[{i}].{k}", c[k],
                                 f"a class key: {', '.join(sorted(NATIVE_CLASS_KEYS))}")
    # Unnamed: its index, as in the simulator.
    _core.check_class_names([str(c.get("name", i)) for i, c in enumerate(classes_in)])

    # How many processes of each class.
    n_classes = len(classes_in)
    has_clients = any("clients" in c for c in classes_in)
    has_batch = any("batch" in c for c in classes_in)
    if has_clients or has_batch:
        for key in ("clients", "batch"):
            if key in spec:
                raise spec_error(key, spec[key], f"either {key} or classes[].clients/batch")
        counts = [int(_number(f"classes[{i}].{'batch' if 'batch' in c else 'clients'}",
                              c.get("batch", c.get("clients", 0)), lo=0, integer=True))
                  for i, c in enumerate(classes_in)]
        one_shot = ["batch" in c for c in classes_in]
    else:
        if "clients" in spec and "batch" in spec:
            raise spec_error("batch", spec["batch"], "either clients or batch, not both")
        key = "batch" if "batch" in spec else "clients"
        if key not in spec:
            raise spec_error("clients", "(missing)", "a number of worker processes (clients), "
                             "or batch")
        n = int(_number(key, spec[key], lo=1, integer=True))
        _forkable(key, n)  # before the split, which walks them one by one
        fractions = [None if c.get("fraction") is None
                     else _number(f"classes[{i}].fraction", c["fraction"], lo=0)
                     for i, c in enumerate(classes_in)]
        counts = _split(n, _core.class_shares(fractions))
        one_shot = [key == "batch"] * n_classes
    if sum(counts) == 0:
        raise spec_error("clients", 0, "at least one process")
    _forkable("classes[].clients/batch", sum(counts))
    if any(one_shot) and precision is not None:
        raise spec_error("precision", precision, "a workload that goes on (clients): one-shot "
                         "batch processes end by themselves")
    if any(one_shot) and jobs is not None:
        raise spec_error("jobs", jobs, "nothing with batch: each one-shot process runs one job")
    if not all(one_shot) and jobs is None and time_ is None:
        raise spec_error("jobs", "(missing)", "a number of jobs, or time, to end the run")

    n_tasks = sum(counts)
    global_think = spec.get("think")
    tasks: list[dict[str, Any]] = []
    class_names: list[str] = []
    expected_cpu_ms = 0.0
    rt_classes = False
    kernel_weights: list[float] = []
    rttime_of: dict[int, float | None] = {}
    kernel_sched: list[dict[str, Any]] = []
    for ci, c in enumerate(classes_in):
        def get(k: str, default: Any = None, c: dict[str, Any] = c) -> Any:
            return c[k] if k in c else spec.get(k, default)

        def key(k: str, ci: int = ci, c: dict[str, Any] = c) -> str:
            return f"classes[{ci}].{k}" if k in c else k

        name = str(c.get("name", ci))
        class_names.append(name)
        size = _dist(key("size"), get("size", "exp:1"))
        think = get("think", global_think)
        think = _dist(key("think"), think) if think is not None else None
        sched = get("sched", "other")
        if sched not in KERNEL_POLICIES:
            raise spec_error(key("sched"), sched, f"one of {', '.join(KERNEL_POLICIES)}")
        rt_classes |= sched in ("fifo", "rr", "deadline")
        if sched in ("fifo", "rr") and "rtprio" not in c and "rtprio" not in spec:
            raise spec_error(key("rtprio"), "(missing)", RTPRIO_RULE)
        if sched not in ("fifo", "rr") and "rtprio" in c:
            raise spec_error(key("rtprio"), c["rtprio"], f"nothing for sched = {sched} (rtprio "
                             "is for fifo and rr)")
        nice = get("nice", 0)
        weight = c.get("weight")
        if sched not in ("other", "batch") and "nice" in c:
            raise spec_error(key("nice"), nice, f"nothing for sched = {sched} (nice is for "
                             "other and batch)")
        nice = int(_number(key("nice"), nice, lo=-20, integer=True,
                           allowed="a whole number from -20 to 19"))
        if nice > 19:
            raise spec_error(key("nice"), nice, "a whole number from -20 to 19")
        if weight is not None and "nice" in c:
            raise spec_error(key("nice"), nice, "either weight or nice, not both")
        if weight is not None:
            weight = _number(f"classes[{ci}].weight", weight, lo=1e-12, allowed="a number > 0")
        else:
            # As in the simulator: 1, or the kernel's weight of the nice value / 1024.
            weight = (_core.nice_to_weight(nice)
                      if ("nice" in c or "nice" in spec) else 1.0)
        kernel_weight = _kernel_weight(sched, nice)
        sched_plan: dict[str, Any] = {"policy": sched, "nice": nice}
        if sched in ("fifo", "rr"):
            rtprio = _number(key("rtprio"), get("rtprio"), lo=1, integer=True,
                             allowed=RTPRIO_RULE)
            if rtprio > 98:
                raise spec_error(key("rtprio"), get("rtprio"), RTPRIO_RULE)
            sched_plan["rtprio"] = int(rtprio)
        if sched == "deadline":
            for k in ("runtime", "deadline", "period"):
                if get(k) is not None:
                    sched_plan[k] = _number(key(k), get(k), lo=1e-6, allowed="a number > 0 (ms)")
            # The kernel's rule in the keys given (the dispatcher's plan named tasks[0]).
            check_deadline_budget(key("runtime"), get("runtime"), get("deadline"),
                                  get("period"))
        # Among the run's CPUs: its CPU time, its load samples and its noise gate are theirs.
        affinity = get("affinity")
        affinity = _cpu_list(key("affinity"), affinity, cpus) if affinity is not None else None
        start = get("start_pinned")
        start = _cpu_list(key("start_pinned"), start, cpus) if start is not None else None
        release = get("release_after")
        if release is not None:
            if start is None:
                raise spec_error(key("release_after"), release, "start_pinned as well")
            release = _number(key("release_after"), release, lo=0, allowed="a number >= 0 (ms)")
        elif start is not None:
            raise spec_error(key("start_pinned"), start, "release_after as well (ms)")
        io = _io(key("io"), get("io"))
        bursts = int(_number(key("bursts"), get("bursts", 1), lo=1, integer=True))
        rttime = get("rttime")
        if rttime is not None:
            rttime = _number(key("rttime"), rttime, lo=1, allowed="a number >= 1 (ms)")
        rttime_of[ci] = rttime
        tickets = _number(f"classes[{ci}].tickets", c.get("tickets", 1.0), lo=1e-12,
                          allowed="a number > 0")
        priority = _number(f"classes[{ci}].priority", c.get("priority", 0.0))
        mean_size = _dist_mean(size)
        for _ in range(counts[ci]):
            t = len(tasks)
            if one_shot[ci]:
                n_jobs: int | None = 1
            elif jobs is not None:
                n_jobs = jobs // n_tasks + (1 if t < jobs % n_tasks else 0)
                if n_jobs == 0:
                    raise spec_error("jobs", jobs, f"at least one per process ({n_tasks})")
            else:
                n_jobs = None
            demand = mean_size * (n_jobs if n_jobs is not None else 1)
            if n_jobs is None and time_ is not None:
                demand = time_
            expected_cpu_ms += demand
            rt_us = None
            if sched in ("fifo", "rr"):
                # Default: the task's whole expected demand may run without blocking, with a
                # small margin (calibration drift, RT throttling's 5%).
                rt_ms = rttime if rttime is not None else RT_MARGIN * demand + 500
                rt_us = int(rt_ms * 1000)
            tasks.append({
                "class": ci,
                "sched": sched_plan,
                "affinity": affinity,
                "start_cpus": start,
                "release_after": release,
                "jobs": n_jobs,
                "size": size,
                "think": think,
                "bursts": bursts,
                "io": io,
                "rttime_us": rt_us,
                "tickets": tickets,
                "priority": priority,
                "weight": float(weight),
                "seed": (seed * 1_000_003 + t) % 2**64,
            })
            kernel_weights.append(kernel_weight)
            kernel_sched.append(sched_plan)
    if "rtprio" in spec and not any(t["sched"]["policy"] in ("fifo", "rr") for t in tasks):
        raise spec_error("rtprio", spec["rtprio"], "a class with sched = fifo or rr (rtprio is "
                         "theirs; the dispatcher's enforce = fifo runs workers at SCHED_FIFO 1)")
    if dispatcher is not None and rt_classes:
        raise spec_error("sched", "fifo/rr/deadline", "other, batch or idle under a user-space "
                         "dispatcher (enforce = fifo runs the chosen workers at SCHED_FIFO 1)")

    # Bounds: a hard timeout from the work to do, unless given.
    think_ms = sum(
        (_dist_mean(t["think"]) if t["think"] else 0.0) * (t["jobs"] or 1) for t in tasks
    )
    io_ms = sum(
        (_dist_mean(t["io"]["sleep"]) if t["io"] and "sleep" in t["io"] else 0.0)
        * t["bursts"] * (t["jobs"] or 1) for t in tasks
    )
    if time_ is not None:
        estimate = time_
    else:
        estimate = expected_cpu_ms / len(cpus) + (think_ms + io_ms) / max(1, n_tasks)
    hard = spec.get("hard_timeout")
    if hard is None:
        # A real-time run holds CPUs from everything else: bounded by its planned length with
        # a small margin. Others may be slowed by foreign load, and lose their results if cut.
        realtime = fifo or rt_classes
        hard = (RT_MARGIN if realtime else 3) * estimate + 10_000 + 5 * n_tasks
        if any(t["io"] and "dsync" in t["io"] for t in tasks):
            hard += 60_000
    hard = _number("hard_timeout", hard, lo=1, allowed="a number > 0 (ms)")
    if hard > MAX_RUN_MS:
        # A run of real processes that would last days is a typo (det:1e300), and its timers
        # would overflow the kernel's.
        what = "hard_timeout" if spec.get("hard_timeout") is not None else \
            ("time" if time_ is not None else "size")
        raise spec_error(what, spec.get(what, f"{estimate:.3g} ms of work"),
                         f"a run of real processes under {MAX_RUN_MS / 3_600_000:g} h "
                         f"(this one would be bounded at {hard:.3g} ms)")
    if fifo:
        # enforce = fifo makes every worker an RT task: bound each one too.
        for t in tasks:
            t["rttime_us"] = int(1000 * (rttime_of.get(t["class"]) or hard))
    # Each sample reads /proc/<pid>/stat of every task: keep its cost near 1% of a CPU.
    sample = spec.get("load_sample", max(20.0, 0.5 * n_tasks))
    sample = _number("load_sample", sample, lo=0, allowed="a number >= 0 (ms)")
    io_dir = spec.get("io_dir", "/var/tmp")
    if any(t["io"] and "dsync" in t["io"] for t in tasks) and not os.path.isdir(io_dir):
        raise spec_error("io_dir", io_dir, "an existing directory")
    job_counters = _flag(spec, "job_counters", True)
    pretend = spec.get("pretend_missing", [])
    if not isinstance(pretend, list) or any(p not in ("schedstat", "sched", "tracefs")
                                            for p in pretend):
        raise spec_error("pretend_missing", pretend, "a list of schedstat, sched, tracefs")
    trace_migrations = _flag(spec, "trace_migrations", False)
    if trace_migrations:
        # Refused before anything starts, as any other key the machine cannot honour.
        from schedlab.osrun.ktrace import check_tracefs

        check_tracefs(hidden="tracefs" in pretend)

    plan = {
        "tasks": tasks,
        "cpus": cpus,
        "time": time_,
        "hard_timeout": hard,
        "sample": sample or None,
        "io_dir": io_dir,
        "job_counters": job_counters,
        "pretend_missing": [p for p in pretend if p != "tracefs"],
        "dispatcher": None if dispatcher is None else {
            "policy": dispatcher,
            "params": params,
            "runqueues": runqueues,
            "enforce": enforce,
            "seed": seed,
        },
    }
    # Every os workload is closed (it starts with every process): no warm-up unless asked.
    warmup = spec.get("warmup", 0)
    auto_warmup = warmup == "auto"
    if not auto_warmup:
        _number("warmup", warmup, lo=0, integer=True, allowed="a whole number >= 0, or auto")
    options = {
        "dispatcher": dispatcher,
        "class_names": class_names,
        "seed": seed,
        "warmup": 0 if auto_warmup else int(_number("warmup", warmup, lo=0, integer=True)),
        "auto_warmup": auto_warmup,
        "warmup_time": _number("warmup_time", spec.get("warmup_time", 0.0), lo=0),
        "keep_jobs": _flag(spec, "keep_jobs", True),
        "quiet_wait": _number("quiet_wait", spec.get("quiet_wait", 5000), lo=0),
        "noise_threshold": _fraction("noise_threshold", spec.get("noise_threshold", 0.1)),
        "retry_noisy": int(_number("retry_noisy", spec.get("retry_noisy", 0), lo=0,
                                   integer=True)),
        "kernel_weights": kernel_weights,
        "kernel_sched": kernel_sched,
        "trace_migrations": trace_migrations,
    }
    if precision is not None:
        # The coordinator's rule leaves out what the summary will leave out.
        plan.update({"precision": float(precision), "first_look": first_look,
                     "warmup": options["warmup"], "warmup_time": options["warmup_time"]})
    return plan, options


def _kernel_weight(sched: str, nice: int) -> float:
    """CFS weight of a task: from nice for other and batch, 3 for idle; NaN for RT (strict
    priority: no proportional entitlement)."""
    if sched in ("other", "batch"):
        return _core.kernel_weight(nice)
    if sched == "idle":
        return float(_core.WEIGHT_IDLEPRIO)
    return math.nan

"""From the coordinator's raw measurements to the common result schema.

Per job (JOB_COLUMNS): `wait` is the time the job spent runnable but not running, from the
kernel's own counter (`/proc/<pid>/schedstat` run-queue delay between the job's start and end,
read by the worker) plus, under a user-space dispatcher, the time the dispatcher held the worker
stopped or ungranted. Shares are taken over the contended interval only (from the start until the
first task finished or the time limit), against an entitlement integrated over the runnable set.
Every common key of the summary, the class table and the share columns of the task table come
from `schedlab.results.summarize`, the code every world's summary is computed by.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

import schedlab._core as _core
from schedlab.results import JOB_COLUMNS, Result, cut_at_precise, cut_auto_warmup, summarize

JOB_EXTRAS = ["task_job", "cpu_time", "runqueue_wait", "held", "io", "unaccounted",
              "voluntary", "involuntary"]

# A job's time its counters do not place (`unaccounted`) beyond which the machine stalled under
# it. A job's response is its run-queue wait, its CPU time and its I/O, and a little time that
# none of them counts: 0.15-0.3 ms in a 100-process batch of 5 ms jobs here, and about 0.015 ms
# more per context switch (2-3 ms for 250 ms jobs switched 190 times, the most seen in the
# experiment files' kernel runs). A hypervisor's steal is neither: the kernel takes it off the
# task's CPU clock and no run queue holds the task (traced here: a task kept its CPU 8.8 ms for
# 1.4 ms of CPU time; one job in 3,000 of the batches). /proc/stat counts steal in 10 ms
# ticks, too coarse to see such a stall; the job's own counters see it.
STALL_MS = 3.0
STALL_MS_PER_SWITCH = 0.02

POLICY_NAMES = {0: "other", 1: "fifo", 2: "rr", 3: "batch", 5: "idle", 6: "deadline"}
# The real-time priority the dispatcher's enforce = fifo runs a chosen worker at
# (crates/dispatch/src/worker.rs; 2 while it blocks, so that its wake-up is seen at once).
ENFORCE_FIFO_RTPRIO = 1


def _rtprio(task_plan: dict[str, Any], plan: dict[str, Any], applied: Any) -> int | None:
    """A task's real-time priority: its own (sched fifo or rr), or the dispatcher's when it
    enforces its choices with SCHED_FIFO; None for the others."""
    own = task_plan["sched"].get("rtprio")
    if own is not None:
        return int(own)
    d = plan.get("dispatcher")
    if d is not None and d.get("enforce") == "fifo" and POLICY_NAMES.get(applied) == "fifo":
        return ENFORCE_FIFO_RTPRIO
    return None


def _nan(v: Any) -> float:
    return math.nan if v is None else float(v)


def _delta(end: dict[str, Any], base: dict[str, Any], key: str) -> float:
    a, b = end.get(key), base.get(key)
    return math.nan if a is None or b is None else float(a - b)


def unaccounted_ms(raw_jobs: dict[str, Any]) -> np.ndarray:
    """Per job (raw records): the response less the run-queue wait, the dispatcher's hold, the
    CPU time and the I/O, ms; NaN where the kernel's wait is missing. Below 0 when the kernel
    counted a wait longer than the time the job was not running (docs/os.md)."""
    rq = np.array([_nan(v) for v in raw_jobs["runqueue_wait"]])
    response = (np.asarray(raw_jobs["completion"], dtype=float)
                - np.asarray(raw_jobs["arrival"], dtype=float))
    return response - (rq + np.asarray(raw_jobs["held"], dtype=float)
                       + np.asarray(raw_jobs["cpu_time"], dtype=float)
                       + np.asarray(raw_jobs["io"], dtype=float))


def stalled(unaccounted: np.ndarray, switches: np.ndarray) -> np.ndarray:
    """Whether the machine stalled under each job: its unaccounted time (ms) beyond STALL_MS
    and STALL_MS_PER_SWITCH for each of its context switches (NaN: none counted)."""
    allowance = STALL_MS + STALL_MS_PER_SWITCH * np.nan_to_num(switches)
    return np.asarray(unaccounted > allowance)


def switches_of(raw_jobs: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Per job (raw records): its voluntary and its involuntary context switches (NaN where
    the kernel gave none)."""
    return (np.array([_nan(v) for v in raw_jobs["voluntary"]]),
            np.array([_nan(v) for v in raw_jobs["involuntary"]]))


def stalls(raw: dict[str, Any]) -> list[float]:
    """The unaccounted time (ms) of every job of a raw run the machine stalled under."""
    j = raw["jobs"]
    if not j["task"]:
        return []
    gap = unaccounted_ms(j)
    vol, invol = switches_of(j)
    return [float(g) for g in gap[stalled(gap, vol + invol)]]


def _jobs_table(raw: dict[str, Any], task_class: list[int]) -> pd.DataFrame:
    j = raw["jobs"]
    n = len(j["task"])
    if n == 0:
        return pd.DataFrame(columns=JOB_COLUMNS + JOB_EXTRAS)
    task = np.asarray(j["task"], dtype=np.int64)
    rq = np.array([_nan(v) for v in j["runqueue_wait"]])
    held = np.asarray(j["held"], dtype=float)
    vol, invol = switches_of(j)
    arrival = np.asarray(j["arrival"], dtype=float)
    completion = np.asarray(j["completion"], dtype=float)
    size = np.asarray(j["size"], dtype=float)
    response = completion - arrival
    with np.errstate(divide="ignore", invalid="ignore"):
        slowdown = np.where(size > 0, response / np.where(size > 0, size, 1), np.nan)
    df = pd.DataFrame({
        "client": task,
        "class": np.asarray(task_class, dtype=np.int64)[task],
        "cpu": np.asarray(j["cpu"], dtype=np.int64),
        "arrival": arrival,
        "first_run": np.asarray(j["first_run"], dtype=float),
        "completion": completion,
        "size": size,
        "wait": rq + held,
        "response": response,
        "slowdown": slowdown,
        "context_switches": vol + invol,
        "migrations": np.array([_nan(v) for v in j["migrations"]]),
        "task_job": np.asarray(j["index"], dtype=np.int64),
        "cpu_time": np.asarray(j["cpu_time"], dtype=float),
        "runqueue_wait": rq,
        "held": held,
        "io": np.asarray(j["io"], dtype=float),
        "unaccounted": unaccounted_ms(j),
        "voluntary": vol,
        "involuntary": invol,
    })
    df = df.sort_values(["arrival", "client"], kind="stable").reset_index(drop=True)
    df.insert(0, "job", np.arange(len(df), dtype=np.int64))
    return df[JOB_COLUMNS + JOB_EXTRAS]


def _masks(plan: dict[str, Any], t_ms: float) -> list[tuple[int, ...]]:
    out = []
    for t in plan["tasks"]:
        if t["start_cpus"] is not None and t_ms < (t["release_after"] or 0.0):
            out.append(tuple(t["start_cpus"]))
        else:
            out.append(tuple(t["affinity"] or plan["cpus"]))
    return out


def _entitlement(raw: dict[str, Any], plan: dict[str, Any], weights: list[float],
                 end_ms: float) -> tuple[np.ndarray, str]:
    """Kernel runs: entitled CPU per task over [0, end_ms], integrated over the sampled runnable
    sets (state R: runnable from one sample to the next), water-filled over the CPUs the tasks
    may use."""
    n = len(plan["tasks"])
    if any(not math.isfinite(w) for w in weights):
        return np.full(n, np.nan), "none: real-time tasks have priorities, not shares"
    s = raw["samples"]
    if not s["t"]:
        masks = _masks(plan, 0.0)
        if len(set(masks)) != 1:
            return np.full(n, np.nan), "none: tasks have different CPU masks"
        ent = _core.entitled_from_intervals(list(range(n)), [0.0] * n, [end_ms] * n, weights,
                                            float(len(masks[0])), (0.0, end_ms))
        return np.asarray(ent), "assumed every task runnable (sampling off)"
    df = pd.DataFrame(s)
    df = df[df["t"] <= end_ms]
    times = sorted(df["t"].unique())
    if not times:
        return np.full(n, np.nan), "none: no sample in the contended interval"
    if any(len(set(_masks(plan, t))) != 1 for t in times):
        return np.full(n, np.nan), "none: tasks have different CPU masks"
    nxt = dict(zip(times, times[1:] + [end_ms], strict=True))
    r = df[df["state"] == "R"]
    ent = _core.entitled_from_intervals(
        r["task"].astype(int).tolist(), r["t"].astype(float).tolist(),
        [nxt[t] for t in r["t"]], weights, float(len(_masks(plan, times[0])[0])),
        (times[0], end_ms))
    return np.asarray(ent), "sampled runnable sets (state R), water-filled over the CPUs"


def _load(raw: dict[str, Any], plan: dict[str, Any]) -> pd.DataFrame:
    """Runnable tasks (state R) per CPU at each sample."""
    s = raw["samples"]
    cpus = plan["cpus"]
    if not s["t"]:
        return pd.DataFrame(columns=["t"] + [f"cpu{c}" for c in cpus])
    df = pd.DataFrame(s)
    r = df[df["state"] == "R"]
    table = r.groupby(["t", "cpu"]).size().unstack(fill_value=0)
    table = table.reindex(index=sorted(df["t"].unique()), columns=cpus, fill_value=0)
    table.columns = [f"cpu{c}" for c in table.columns]
    return table.reset_index().rename(columns={"index": "t"})


def _release(plan: dict[str, Any]) -> float:
    """When the pinned start was lifted (ms; 0: every task free from the start)."""
    return min((t["release_after"] for t in plan["tasks"] if t["release_after"] is not None),
               default=0.0)


def _load_samples(load: pd.DataFrame, plan: dict[str, Any], end_ms: float
                  ) -> dict[str, Any] | None:
    """Runnable workers per CPU at each sample, for the summary's load split and time to
    balance (`schedlab_model::balance`, the simulator's definition and code)."""
    if load.empty:
        return None
    cols = [c for c in load.columns if c != "t"]
    return {"time": load["t"].astype(float).tolist(),
            "runnable": load[cols].astype(int).to_numpy().tolist(),
            "release": _release(plan), "end": end_ms}


MIGRATION_COLUMNS = ["time", "task", "from_cpu", "to_cpu", "path", "running", "running_pid"]


def _migrations(raw: dict[str, Any]) -> pd.DataFrame:
    """The workers' moves in the kernel's trace (`trace_migrations`), on the run's clock (ms
    after the start signal; moves before it, such as the pinned start's own, are negative)."""
    from schedlab.osrun.ktrace import parse

    task_of = {t["pid"]: t["task"] for t in raw["tasks"]}
    rows = [{"time": (m["time"] * 1e9 - raw["start_ns"]) / 1e6, "task": task_of[m["pid"]],
             "from_cpu": m["from_cpu"], "to_cpu": m["to_cpu"], "path": m["path"],
             "running": m["running"], "running_pid": m["running_pid"]}
            for m in parse(raw["kernel_trace"]["text"])
            # The kernel traces set_task_cpu also when the CPU stays the same: not a move.
            if m["pid"] in task_of and m["from_cpu"] != m["to_cpu"]]
    return pd.DataFrame(rows, columns=MIGRATION_COLUMNS)


def _moves_missed(moves: pd.DataFrame, counted: pd.Series) -> int | None:
    """The moves the kernel counted (`se.nr_migrations` from the start on, per task) that its
    trace does not hold; None without the counters. The two come from the same line of
    `set_task_cpu`, and agree in nearly every run, but the trace has been seen to miss one
    (2 runs of about 110, each time the first move after a pinned start's release; no event
    lost by the ring buffer)."""
    if counted.isna().any():
        return None
    traced = moves[moves["time"] >= 0].groupby("task").size()
    return int(sum(max(int(n) - int(traced.get(task, 0)), 0) for task, n in counted.items()))


def _first_move(raw: dict[str, Any], plan: dict[str, Any], moves: pd.DataFrame,
                missed: int | None) -> dict[str, Any]:
    """How the kernel began to spread a pinned start: the first move of a worker once the pin
    was lifted (ms after the coordinator lifted it), the path that made it, and how many
    workers that path moved at that instant (a balance pass may move several at once).
    Unknown (NaN, None, 0) when the trace missed a move the kernel counted: the missed one
    may have been the first."""
    released = [t["released_ms"] for t in raw["tasks"] if t["released_ms"] is not None]
    release = min(released) if released else _release(plan)
    after = moves[moves["time"] >= release]
    if after.empty or missed:
        return {"first_move": math.nan, "first_move_path": None, "first_move_tasks": 0}
    first = after.iloc[0]
    same = after[(after["time"] - first["time"] < 0.01) & (after["path"] == first["path"])]
    return {"first_move": float(first["time"] - release), "first_move_path": first["path"],
            "first_move_tasks": int(len(same))}


def build(raw: dict[str, Any], plan: dict[str, Any], options: dict[str, Any],
          spec: dict[str, Any], environment: dict[str, Any], noise: dict[str, Any]) -> Result:
    tasks_plan = plan["tasks"]
    n = len(tasks_plan)
    task_class = [t["class"] for t in tasks_plan]
    class_names = options["class_names"]
    jobs = _jobs_table(raw, task_class)
    measured = jobs
    warm = 0
    if options["warmup"] or options["warmup_time"]:
        keep = (jobs["job"] >= options["warmup"]) & (jobs["arrival"] >= options["warmup_time"])
        warm = int((~keep).sum())
        measured = jobs[keep]
    if options.get("auto_warmup"):
        measured, warm = cut_auto_warmup(measured)
    if raw["stopped_precise"]:
        measured = cut_at_precise(measured, plan["precision"], plan.get("first_look"))

    wall = float(raw["wall_ms"])
    contended_end = float(raw["contended_end_ms"])
    dispatcher = options["dispatcher"]
    rt = raw["tasks"]

    # Shares over the contended interval.
    service = np.array([_delta(t["contended"], t["base"], "cpu_ns") / 1e6 for t in rt])
    if dispatcher is not None:
        entitled = np.array([_nan(t["entitled_ms"]) for t in rt])
        basis = "dispatcher: runnable set at every decision, water-filled over its CPUs"
    else:
        entitled, basis = _entitlement(raw, plan, options["kernel_weights"], contended_end)
    rows = []
    for i, t in enumerate(rt):
        tp = tasks_plan[i]
        b, e = t["base"], t["end"]
        vol = _delta(e, b, "nvcsw")
        invol = _delta(e, b, "nivcsw")
        rows.append({
            "task": i,
            "class": class_names[tp["class"]],
            "pid": t["pid"],
            "policy": POLICY_NAMES.get(t["policy_applied"], str(t["policy_applied"])),
            "nice": tp["sched"].get("nice"),
            "rtprio": _rtprio(tp, plan, t["policy_applied"]),
            "tickets": tp["tickets"],
            "priority": tp["priority"],
            "weight": options["kernel_weights"][i] if dispatcher is None else tp["weight"],
            "home_cpu": t["home_cpu"],
            "cpu_time": _delta(e, b, "cpu_ns") / 1e6,
            "runqueue_wait": _delta(e, b, "run_delay_ns") / 1e6,
            "held": _nan(t["held_ms"]),
            "slices": _delta(e, b, "slices"),
            "voluntary": vol,
            "involuntary": invol,
            "context_switches": vol + invol,
            "migrations": _delta(e, b, "migrations"),
            "wait_max": _nan(e.get("wait_max_ns")) / 1e6,
            "wakeups": _delta(e, b, "wakeups"),
            "user_ms": t["utime_ms"],
            "sys_ms": t["stime_ms"],
            "wall_ms": t["end_ms"],
            "done_ms": _nan(t["done_ms"]),
            "exit_code": t["exit_code"],
            "killed": t["killed"],
            "unfinished": t["unfinished"],
            "records_dropped": t["records_dropped"],
            "rttime_limit_us": None if t["rttime_limit_us"] is None else
            "/".join(t["rttime_limit_us"]),
            "dispatches": t["dispatches"],
        })
    extras = pd.DataFrame(rows)
    shares = [{"task": i, "class": class_names[tasks_plan[i]["class"]],
               "service": float(service[i]), "entitled": float(entitled[i]),
               "migrations": float(extras["migrations"].iloc[i]),
               "cpu": -1 if rt[i]["home_cpu"] is None else int(rt[i]["home_cpu"])}
              for i in range(n)]

    schedule = _schedule(raw["segments"], jobs)

    load = _load(raw, plan)
    cpus = plan["cpus"]
    stopped = raw["stopped_by_time"] or raw["stopped_precise"]
    samples = _load_samples(load, plan, contended_end if stopped else wall)
    summary, classes_df, common = _summary(raw, plan, options, measured, extras, shares, load,
                                           samples, warm, basis, noise)
    tasks = common.merge(extras.drop(columns=["class", "migrations"]), on="task", how="left")

    env = dict(environment)
    agroups = sorted({t["autogroup"] for t in rt if t["autogroup"]})
    cgroups = sorted({t["cgroup"] for t in rt if t["cgroup"]})
    env.update({
        "workers_autogroups": agroups,
        "workers_cgroups": cgroups,
        "watchdog_rtprio": raw["coordinator"]["watchdog_rtprio"],
        "coordinator_cpus": raw["coordinator"]["cpus"],
        "noise": noise,
        "cpus_used": cpus,
    })
    result = Result(summary=summary, jobs=jobs if options["keep_jobs"] else
                    jobs.iloc[:0], classes=classes_df, tasks=tasks, schedule=schedule,
                    spec=dict(spec), environment=env)
    # os-only tables: raw placement samples and runnable tasks per CPU over time.
    result.placement = pd.DataFrame(raw["samples"], columns=["t", "task", "cpu", "state"])
    result.load = load
    result.load_series = load_series(load)
    if "kernel_trace" in raw:
        result.migrations = _migrations(raw)
        missed = _moves_missed(result.migrations, extras.set_index("task")["migrations"])
        result.summary["moves"] = int(len(result.migrations))
        result.summary["moves_missed"] = missed
        if any(t["released_ms"] is not None for t in rt) or _release(plan) > 0:
            result.summary.update(_first_move(raw, plan, result.migrations, missed))
        env["kernel_trace"] = {"moves": int(len(result.migrations)),
                               "lost": raw["kernel_trace"]["lost"]}
    # The placement samples' period (ms; None: sampling off), for a trace drawn from them.
    result.sample_period_ms = plan.get("sample")
    return result


def _schedule(seg: dict[str, Any], jobs: pd.DataFrame) -> pd.DataFrame:
    """The dispatcher's run segments (which task ran on which CPU, when) with the job each
    stretch belongs to: a segment in which the task's next job began (no think time, so no
    block between them) is split there, and each piece belongs to the task's latest job begun
    by its start (the tail after a completion, until the dispatcher sees the task block, is
    the job's). `job` is NaN before a task's first job. Empty under the kernel's policies."""
    columns = ["cpu", "job", "task", "start", "end"]
    cpu = np.asarray(seg["cpu"], dtype=np.int64)
    task = np.asarray(seg["task"], dtype=np.int64)
    start = np.asarray(seg["start"], dtype=float)
    end = np.asarray(seg["end"], dtype=float)
    if not len(cpu):
        return pd.DataFrame(columns=columns)
    arrivals: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for t, g in jobs.groupby("client", sort=False):
        g = g.sort_values("arrival", kind="stable")
        arrivals[int(t)] = (g["arrival"].to_numpy(dtype=float),
                            g["job"].to_numpy(dtype=float))
    rows: list[tuple[int, float, int, float, float]] = []
    empty = (np.zeros(0), np.zeros(0))
    for c, t, a, b in zip(cpu.tolist(), task.tolist(), start.tolist(), end.tolist(),
                          strict=True):
        times, ids = arrivals.get(t, empty)
        inside = times[(times > a) & (times < b)]
        bounds = [a, *inside.tolist(), b]
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            k = int(np.searchsorted(times, lo, side="right")) - 1
            rows.append((c, float(ids[k]) if k >= 0 else math.nan, t, lo, hi))
    return pd.DataFrame(rows, columns=columns)


def load_series(load: pd.DataFrame) -> pd.DataFrame:
    """The load table in the simulator's `Result.load_series` shape: time, cpu, runnable."""
    cols = [c for c in load.columns if c != "t"]
    if load.empty or not cols:
        return pd.DataFrame(columns=["time", "cpu", "runnable"])
    long = load.melt(id_vars="t", value_vars=cols, var_name="cpu", value_name="runnable")
    long["cpu"] = long["cpu"].str.removeprefix("cpu").astype(int)
    long = long.rename(columns={"t": "time"}).sort_values(["time", "cpu"], kind="stable")
    return long[["time", "cpu", "runnable"]].reset_index(drop=True)


def _summary(raw: dict[str, Any], plan: dict[str, Any], options: dict[str, Any],
             measured: pd.DataFrame, tasks: pd.DataFrame, shares: list[dict[str, Any]],
             load: pd.DataFrame, samples: dict[str, Any] | None, warm: int, basis: str,
             noise: dict[str, Any]
             ) -> tuple[dict[str, Any], pd.DataFrame, pd.DataFrame]:
    """The common summary (`schedlab.results.summarize`) of the measured jobs, and the os
    world's own keys."""
    cpus = plan["cpus"]
    wall = float(raw["wall_ms"])
    start = options["warmup_time"]
    if warm and len(measured):
        # A warm-up by count (or the auto cut) ends at the first measured arrival, as the
        # simulator opens its measured interval: the warm-up's time is not the measured jobs'.
        start = max(start, float(measured["arrival"].min()))
    end = float(measured["completion"].max()) if len(measured) else wall
    busy = float(np.nansum(tasks["cpu_time"]))
    dispatcher = options["dispatcher"]
    d = raw["dispatcher"]
    coord = raw["coordinator"]
    worker_measure = sum(t["measure_cpu_ms"] for t in raw["tasks"])
    measure = worker_measure + coord["measure_cpu_ms"]
    # The workers' CPU time is exact; how it split over the CPUs is what the samples saw (the
    # share of samples in which a CPU had a runnable worker), or even without samples.
    if load.empty:
        busy_per_cpu = [busy / len(cpus)] * len(cpus)
    else:
        occupied = np.array([float((load[f"cpu{c}"] > 0).mean()) for c in cpus])
        split = occupied / occupied.sum() if occupied.sum() > 0 else \
            np.full(len(cpus), 1 / len(cpus))
        busy_per_cpu = [float(busy * f) for f in split]
    if dispatcher is None:
        kinds = sorted({t["sched"]["policy"] for t in plan["tasks"]})
        policy = "kernel:" + "+".join(kinds)
    else:
        policy = dispatcher
    # The jobs abandoned while they ran (at `time`, or precise), as the simulator counts the
    # jobs still in the system; a killed worker (hard timeout, RLIMIT_RTTIME) could not say,
    # and with jobs left it was in one. The jobs a stopped run never started are no one's:
    # counted, a stop while the workers thought made them hundreds.
    unfinished = int(sum(t["unfinished"] for t in raw["tasks"]))
    unfinished += int(sum(1 for tp, t in zip(plan["tasks"], raw["tasks"], strict=True)
                          if t["killed"] is not None and t["unfinished"] == 0
                          and tp["jobs"] is not None and t["jobs_done"] < tp["jobs"]))
    gap = measured["unaccounted"]
    counters = {
        "policy": policy, "seed": options["seed"], "cpus": len(cpus),
        "measure_start": start, "measure_end": end,
        "busy_per_cpu": busy_per_cpu, "busy_span": wall, "busy_time": busy,
        "work_served": float(measured["size"].sum()), "overhead_time": math.nan,
        # Samples come at a fixed period, so their mean is the time-weighted mean.
        "runnable_mean_per_cpu": [float(load[f"cpu{c}"].mean()) for c in cpus]
        if not load.empty else [math.nan] * len(cpus),
        "offered_load": math.nan, "sim_time": wall, "warmup_jobs": warm,
        "unfinished": unfinished, "precision": plan.get("precision"),
        "load_samples": samples,
    }
    class_names = options["class_names"]
    s, classes, common = summarize(measured, shares, class_names, counters)
    s.update({
        # os-only keys
        "world": "os",
        "release_ms": _release(plan) if samples is not None else math.nan,
        "dispatcher": dispatcher or "kernel",
        "tasks": len(plan["tasks"]),
        "wall_ms": wall,
        "user_ms": float(tasks["user_ms"].sum()),
        "sys_ms": float(tasks["sys_ms"].sum()),
        "runqueue_wait_ms": float(np.nansum(tasks["runqueue_wait"])),
        # Jobs whose kernel-counted wait exceeds the time they spent not running (docs/os.md:
        # the run queue's clock can be stale after a migration to an idle CPU), and jobs whose
        # response holds more time than their counters place (a stall of the machine; under a
        # dispatcher also its hand-offs, docs/os.md).
        "wait_inconsistent_jobs": int((gap < -0.5).sum()),
        "unaccounted_jobs": int(stalled(gap.to_numpy(dtype=float),
                                        measured["context_switches"].to_numpy(dtype=float)
                                        ).sum()),
        "unaccounted_max": float(gap.max()) if gap.notna().any() else math.nan,
        "contended_ms": float(raw["contended_end_ms"]),
        "contended_end": raw["contended_end"],
        "share_basis": basis,
        "stopped_by_time": raw["stopped_by_time"],
        "stopped_precise": raw["stopped_precise"],
        "timed_out": raw["timed_out"],
        "killed_tasks": int(tasks["killed"].notna().sum()),
        "measure_cpu_ms": measure,
        "measure_overhead": measure / max(busy + coord["cpu_ms"], 1e-9),
        "coordinator_cpu_ms": coord["cpu_ms"],
        "samples_taken": coord["samples_taken"],
        "noisy": noise["noisy"],
        "noise_reasons": noise["noise_reasons"],
        "foreign_fraction": noise["foreign_fraction"],
        "steal_fraction": noise["steal_fraction"],
        "missing": dict(raw["missing"]),
        "warnings": list(raw["warnings"]),
    })
    if d is not None:
        s.update({
            "dispatcher_cpu_ms": d["cpu_ms"],
            "dispatcher_overhead": d["overhead"],
            "dispatcher_decisions": d["decisions"],
            "dispatcher_switches": d["switches"],
            "dispatcher_timer_lateness_us": d["timer_lateness_us"],
            "runqueues": d["runqueues"],
            "enforce": d["enforce"],
        })
    return s, classes, common

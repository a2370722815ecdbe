"""From the coordinator's raw measurements to the common result schema.

Per job (JOB_COLUMNS): `wait` is the time the job spent runnable but not running, from the
kernel's own counter (`/proc/<pid>/schedstat` run-queue delay between the job's start and end,
read by the worker) plus, under a user-space dispatcher, the time the dispatcher held the worker
stopped or ungranted. Shares are taken over the contended interval only (from the start until the
first task finished or the time limit), against an entitlement integrated over the runnable set.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from schedlab.results import JOB_COLUMNS, Result

JOB_EXTRAS = ["task_job", "cpu_time", "runqueue_wait", "held", "io", "voluntary",
              "involuntary"]

POLICY_NAMES = {0: "other", 1: "fifo", 2: "rr", 3: "batch", 5: "idle", 6: "deadline"}


def _nan(v: Any) -> float:
    return math.nan if v is None else float(v)


def _delta(end: dict[str, Any], base: dict[str, Any], key: str) -> float:
    a, b = end.get(key), base.get(key)
    return math.nan if a is None or b is None else float(a - b)


def jain(values: np.ndarray) -> float:
    v = values[np.isfinite(values)]
    if len(v) == 0 or not np.any(v):
        return math.nan
    return float(v.sum() ** 2 / (len(v) * (v ** 2).sum()))


def water_fill(runnable: list[int], weight: list[float], capacity: float) -> dict[int, float]:
    """The runnable tasks split `capacity` CPUs by weight, none above one CPU."""
    open_ = [i for i in runnable if weight[i] > 0]
    free = min(capacity, float(len(open_)))
    rate: dict[int, float] = {}
    while open_ and free > 0:
        total = sum(weight[i] for i in open_)
        capped = [i for i in open_ if free * weight[i] / total >= 1.0]
        if not capped:
            for i in open_:
                rate[i] = free * weight[i] / total
            break
        for i in capped:
            rate[i] = 1.0
            free -= 1.0
        open_ = [i for i in open_ if i not in capped]
    return rate


def _jobs_table(raw: dict[str, Any], task_class: list[int]) -> pd.DataFrame:
    j = raw["jobs"]
    n = len(j["task"])
    if n == 0:
        return pd.DataFrame(columns=JOB_COLUMNS + JOB_EXTRAS)
    task = np.asarray(j["task"], dtype=np.int64)
    rq = np.array([_nan(v) for v in j["runqueue_wait"]])
    held = np.asarray(j["held"], dtype=float)
    vol = np.array([_nan(v) for v in j["voluntary"]])
    invol = np.array([_nan(v) for v in j["involuntary"]])
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
    sets (state R), water-filled over the CPUs the tasks may use."""
    n = len(plan["tasks"])
    if any(not math.isfinite(w) for w in weights):
        return np.full(n, np.nan), "none: real-time tasks have priorities, not shares"
    s = raw["samples"]
    if not s["t"]:
        masks = _masks(plan, 0.0)
        if len(set(masks)) != 1:
            return np.full(n, np.nan), "none: tasks have different CPU masks"
        rate = water_fill(list(range(n)), weights, len(masks[0]))
        return (np.array([rate.get(i, 0.0) for i in range(n)]) * end_ms,
                "assumed every task runnable (sampling off)")
    df = pd.DataFrame(s)
    df = df[df["t"] <= end_ms]
    times = sorted(df["t"].unique())
    ent = np.zeros(n)
    if not times:
        return np.full(n, np.nan), "none: no sample in the contended interval"
    bounds = times[1:] + [end_ms]
    groups = {t: g for t, g in df.groupby("t")}
    for t, t_next in zip(times, bounds, strict=True):
        masks = _masks(plan, t)
        if len(set(masks)) != 1:
            return np.full(n, np.nan), "none: tasks have different CPU masks"
        g = groups[t]
        runnable = sorted(int(x) for x in g.loc[g["state"] == "R", "task"])
        rate = water_fill(runnable, weights, len(masks[0]))
        for i, r in rate.items():
            ent[i] += r * (t_next - t)
    return ent, "sampled runnable sets (state R), water-filled over the CPUs"


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


def _balance(load: pd.DataFrame, plan: dict[str, Any], end_ms: float) -> dict[str, Any]:
    """Load distribution before and after the release of a pinned start, and how long the
    kernel took to reach the balanced split (study 002, Linux.1.a: ceil(n/m) and floor(n/m))."""
    if load.empty:
        return {}
    cols = [c for c in load.columns if c != "t"]
    m = len(cols)
    release = min((t["release_after"] for t in plan["tasks"] if t["release_after"] is not None),
                  default=0.0)
    live = load[load["t"] <= end_ms]
    before = live[live["t"] < release] if release > 0 else live.iloc[:0]
    after = live[live["t"] >= release]
    out: dict[str, Any] = {"release_ms": release}
    if not before.empty:
        out["load_distribution_start"] = [float(before[c].mean()) for c in cols]
    if after.empty:
        return out
    half = after[after["t"] >= after["t"].iloc[0] + (after["t"].iloc[-1] - after["t"].iloc[0]) / 2]
    out["load_distribution"] = [float(half[c].mean()) for c in cols]
    balanced_at = None
    ok = []
    for _, row in after.iterrows():
        counts = sorted((int(row[c]) for c in cols), reverse=True)
        n = sum(counts)
        target = sorted(((n + m - 1 - i) // m for i in range(m)), reverse=True)
        good = counts == target
        ok.append(good)
        if good and balanced_at is None:
            balanced_at = float(row["t"]) - release
    out["time_to_balance_ms"] = balanced_at if balanced_at is not None else math.nan
    out["balanced_fraction"] = float(np.mean(ok)) if ok else math.nan
    return out


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
    total_s = np.nansum(service)
    total_e = np.nansum(entitled)
    share = service / total_s if total_s > 0 else np.full(n, np.nan)
    ent_share = entitled / total_e if total_e > 0 else np.full(n, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = share / ent_share

    rows = []
    for i, t in enumerate(rt):
        tp = tasks_plan[i]
        b, e = t["base"], t["end"]
        mine = measured[measured["client"] == i]
        vol = _delta(e, b, "nvcsw")
        invol = _delta(e, b, "nivcsw")
        rows.append({
            "task": i,
            "class": class_names[tp["class"]],
            "pid": t["pid"],
            "policy": POLICY_NAMES.get(t["policy_applied"], str(t["policy_applied"])),
            "nice": tp["sched"].get("nice"),
            "rtprio": tp["sched"].get("rtprio"),
            "tickets": tp["tickets"],
            "priority": tp["priority"],
            "weight": options["kernel_weights"][i] if dispatcher is None else tp["weight"],
            "home_cpu": t["home_cpu"],
            "jobs": int(len(mine)),
            "response_mean": float(mine["response"].mean()) if len(mine) else math.nan,
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
            "service": service[i],
            "share": share[i],
            "entitled": ent_share[i],
            "share_ratio": ratio[i],
            "exit_code": t["exit_code"],
            "killed": t["killed"],
            "unfinished": t["unfinished"],
            "records_dropped": t["records_dropped"],
            "rttime_limit_us": None if t["rttime_limit_us"] is None else
            "/".join(t["rttime_limit_us"]),
            "dispatches": t["dispatches"],
        })
    tasks = pd.DataFrame(rows)

    classes = []
    for ci, name in enumerate(class_names):
        g = measured[measured["class"] == ci]
        r = g["response"].to_numpy()
        classes.append({
            "class": name,
            "jobs": len(g),
            "response_mean": float(r.mean()) if len(r) else math.nan,
            "response_p50": float(np.percentile(r, 50)) if len(r) else math.nan,
            "response_p95": float(np.percentile(r, 95)) if len(r) else math.nan,
            "response_p99": float(np.percentile(r, 99)) if len(r) else math.nan,
            "wait_mean": float(g["wait"].mean()) if len(g) else math.nan,
            "slowdown_mean": float(g["slowdown"].mean()) if len(g) else math.nan,
        })
    classes_df = pd.DataFrame(classes)

    seg = raw["segments"]
    schedule = pd.DataFrame({
        "cpu": seg["cpu"], "job": [math.nan] * len(seg["cpu"]), "task": seg["task"],
        "start": seg["start"], "end": seg["end"],
    }, columns=["cpu", "job", "task", "start", "end"])

    load = _load(raw, plan)
    cpus = plan["cpus"]
    summary = _summary(raw, plan, options, measured, tasks, load, warm, basis, noise)
    summary.update(_balance(load, plan, contended_end if raw["stopped_by_time"] else wall))

    env = dict(environment)
    agroups = sorted({t["autogroup"] for t in rt if t["autogroup"]})
    cgroups = sorted({t["cgroup"] for t in rt if t["cgroup"]})
    env.update({
        "workers_autogroups": agroups,
        "workers_cgroups": cgroups,
        "watchdog_rtprio": raw["coordinator"]["watchdog_rtprio"],
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
    return result


def load_series(load: pd.DataFrame) -> pd.DataFrame:
    """The load table in the simulator's `Result.load_series` shape: time, cpu, runnable."""
    cols = [c for c in load.columns if c != "t"]
    if load.empty or not cols:
        return pd.DataFrame(columns=["time", "cpu", "runnable"])
    long = load.melt(id_vars="t", value_vars=cols, var_name="cpu", value_name="runnable")
    long["cpu"] = long["cpu"].str.removeprefix("cpu").astype(int)
    long = long.rename(columns={"t": "time"}).sort_values(["time", "cpu"], kind="stable")
    return long[["time", "cpu", "runnable"]].reset_index(drop=True)


def _task_cv(measured: pd.DataFrame) -> float:
    """Coefficient of variation of the tasks' mean responses (as the simulator reports)."""
    means = measured.groupby("client")["response"].mean()
    return float(means.std(ddof=1) / means.mean()) if len(means) >= 2 else math.nan


def _pct(x: np.ndarray, q: float) -> float:
    x = x[np.isfinite(x)]
    return float(np.percentile(x, q)) if len(x) else math.nan


def _summary(raw: dict[str, Any], plan: dict[str, Any], options: dict[str, Any],
             measured: pd.DataFrame, tasks: pd.DataFrame, load: pd.DataFrame, warm: int,
             basis: str, noise: dict[str, Any]) -> dict[str, Any]:
    cpus = plan["cpus"]
    wall = float(raw["wall_ms"])
    resp = measured["response"].to_numpy(dtype=float)
    wait = measured["wait"].to_numpy(dtype=float)
    slow = measured["slowdown"].to_numpy(dtype=float)
    start = options["warmup_time"]
    end = float(measured["completion"].max()) if len(measured) else wall
    window = max(end - start, 1e-9)
    busy = float(np.nansum(tasks["cpu_time"]))
    ratios = tasks["share_ratio"].to_numpy(dtype=float)
    dispatcher = options["dispatcher"]
    d = raw["dispatcher"]
    coord = raw["coordinator"]
    worker_measure = sum(t["measure_cpu_ms"] for t in raw["tasks"])
    measure = worker_measure + coord["measure_cpu_ms"]
    util_cpu = [math.nan] * len(cpus)
    if not load.empty:
        util_cpu = [float((load[f"cpu{c}"] > 0).mean()) for c in cpus]
    if dispatcher is None:
        kinds = sorted({t["sched"]["policy"] for t in plan["tasks"]})
        policy = "kernel:" + "+".join(kinds)
    else:
        policy = dispatcher
    unfinished = int(sum(t["unfinished"] for t in raw["tasks"]))
    unfinished += int(sum(max(0, (tp["jobs"] or 0) - t["jobs_done"])
                          for tp, t in zip(plan["tasks"], raw["tasks"], strict=True)
                          if tp["jobs"] is not None and t["unfinished"] == 0))
    # Jobs whose kernel-counted wait exceeds the time they spent not running (see docs/os.md:
    # the run queue's clock can be stale after a migration to an idle CPU).
    gap = measured["response"] - (measured["wait"] + measured["cpu_time"] + measured["io"])
    s: dict[str, Any] = {
        "policy": policy,
        "jobs": int(len(measured)),
        "cpus": len(cpus),
        "seed": options["seed"],
        "response_mean": float(np.nanmean(resp)) if len(resp) else math.nan,
        "response_p50": _pct(resp, 50),
        "response_p95": _pct(resp, 95),
        "response_p99": _pct(resp, 99),
        "response_std": float(np.nanstd(resp)) if len(resp) else math.nan,
        "response_max": float(np.nanmax(resp)) if len(resp) else math.nan,
        "wait_mean": float(np.nanmean(wait)) if np.isfinite(wait).any() else math.nan,
        "wait_p50": _pct(wait, 50),
        "wait_p95": _pct(wait, 95),
        "wait_p99": _pct(wait, 99),
        "wait_std": float(np.nanstd(wait)) if np.isfinite(wait).any() else math.nan,
        "slowdown_mean": float(np.nanmean(slow)) if np.isfinite(slow).any() else math.nan,
        "slowdown_p99": _pct(slow, 99),
        "throughput": len(measured) / window,
        "utilization": busy / (wall * len(cpus)) if wall > 0 else math.nan,
        "utilization_per_cpu": util_cpu,
        # Samples come at a fixed period, so their mean is the time-weighted mean.
        "runnable_mean_per_cpu": [float(load[f"cpu{c}"].mean()) for c in cpus]
        if not load.empty else [math.nan] * len(cpus),
        "task_response_cv": _task_cv(measured),
        "context_switches": float(np.nansum(tasks["context_switches"])),
        "migrations": float(np.nansum(tasks["migrations"])),
        "jain_slowdown": jain(slow),
        "jain_share": jain(ratios),
        "arrival_rate": len(measured) / window,
        "mean_in_system": float(np.nansum(resp)) / window,
        "measure_start": start,
        "measure_end": end,
        "busy_time": busy,
        "work_served": float(measured["size"].sum()),
        "warmup_jobs": warm,
        "unfinished": unfinished,
        # os-only keys
        "world": "os",
        "dispatcher": dispatcher or "kernel",
        "tasks": len(plan["tasks"]),
        "wall_ms": wall,
        "user_ms": float(tasks["user_ms"].sum()),
        "sys_ms": float(tasks["sys_ms"].sum()),
        "runqueue_wait_ms": float(np.nansum(tasks["runqueue_wait"])),
        "wait_inconsistent_jobs": int((gap < -0.5).sum()),
        "contended_ms": float(raw["contended_end_ms"]),
        "contended_end": raw["contended_end"],
        "share_basis": basis,
        "stopped_by_time": raw["stopped_by_time"],
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
    }
    if d is not None:
        s.update({
            "dispatcher_cpu_ms": d["cpu_ms"],
            "dispatcher_overhead": d["overhead"],
            "dispatcher_decisions": d["decisions"],
            "dispatcher_switches": d["switches"],
            "dispatcher_timer_lateness_us": d["timer_lateness_us"],
            "view": d["view"],
            "enforce": "fifo" if d["boost"] else "stop",
        })
    return s

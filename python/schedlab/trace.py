"""A run's schedule as a Chrome/Perfetto trace-event file: which job ran on which CPU (or
server worker) when, with preemptions and migrations as events. Open it in ui.perfetto.dev
(or chrome://tracing); docs/trace.md says what the tracks and events mean.

    schedlab.trace.write_trace(result, "run.trace.json")   # writes atomically
    schedlab.trace.trace_dict(result)                        # the same, as a dict

The format is the JSON object form of the Trace Event Format: `traceEvents` (`X` complete
events with `ts` and `dur` in microseconds, `M` metadata naming processes and threads, `i`
instants, `s`/`f` flow arrows), `displayTimeUnit` and `otherData` (what schedlab says about the
file: world, policy, counts, definitions, caps). schedlab's own times are ms: ts = ms x 1000.

What each world gives (`Result.schedule`, one row per stretch of a job on a CPU):
- sim: every run segment, when the run kept its schedule (`keep_schedule = true`);
- server: every turn of a request on a worker (the server's log), `cpu` = the worker;
- os under the user-space dispatcher: the dispatcher's segments, split where the task's next
  job begins (`schedlab.osrun.build`);
- os under the kernel's own policies: no schedule, only the placement samples (`placement`:
  each task's state and CPU every `load_sample` ms); the trace then shows, per CPU, the tasks
  sampled runnable there (state R: running or waiting for that CPU), and says so.

No pandas at import time: the command line imports this module.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from schedlab.files import atomic_file, check_writable
from schedlab.jsonio import json_safe
from schedlab.vocabulary import spec_error

if TYPE_CHECKING:
    from schedlab.results import Replications, Result

# Slices written at most: a trace of a million slices is a JSON file of some 300 MB with its
# instants, past what ui.perfetto.dev opens comfortably. Past the cap the earliest slices (by
# start) are kept and `otherData` says how many there were.
MAX_SLICES = 500_000

PREEMPT = "preempt"
MIGRATE = "migrate"

DEFINITIONS = {
    "slice": "a stretch of a job on a CPU (server: a turn of a request on a worker)",
    PREEMPT: "at the end of a slice of a job that runs again later, when the CPU's next slice "
             "is not that job's next slice: the CPU went to another job, or the job resumed "
             "elsewhere (a job that goes on at once on the same CPU was not preempted)",
    MIGRATE: "at the start of a slice on another CPU than the job's previous slice, with a flow "
             "arrow from that slice",
}


def _world(result: Result) -> str:
    return str(result.summary.get("world") or result.spec.get("world") or "sim")


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _int_or_none(v: Any) -> int | None:
    return int(v) if _finite(v) else None


class _Builder:
    """Events of one trace; thread ids are unique across the whole file (Perfetto keys threads
    by tid, as Linux does)."""

    def __init__(self) -> None:
        self.meta: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.next_tid = 1
        self.flow_id = 0

    def process(self, pid: int, name: str, sort: int) -> None:
        self.meta.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "ts": 0,
                          "args": {"name": name}})
        self.meta.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                          "ts": 0, "args": {"sort_index": sort}})

    def thread(self, pid: int, name: str, sort: int) -> int:
        tid = self.next_tid
        self.next_tid += 1
        self.meta.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "ts": 0,
                          "args": {"name": name}})
        self.meta.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                          "ts": 0, "args": {"sort_index": sort}})
        return tid


def _class_names(result: Result) -> list[str]:
    classes = result.classes
    if classes is None or classes.empty or "class" not in classes:
        return []
    return [str(c) for c in classes["class"].tolist()]


def _job_attributes(result: Result) -> tuple[dict[int, str], dict[int, int]]:
    """Per job id: its class name and its task (client), from the per-job table."""
    jobs = result.jobs
    if jobs is None or jobs.empty or "job" not in jobs:
        return {}, {}
    names = _class_names(result)
    cls: dict[int, str] = {}
    task: dict[int, int] = {}
    for j, c, t in zip(jobs["job"].tolist(), jobs["class"].tolist(), jobs["client"].tolist(),
                       strict=True):
        if not _finite(j):
            continue
        if _finite(c):
            ci = int(c)
            cls[int(j)] = names[ci] if 0 <= ci < len(names) else str(ci)
        if _finite(t):
            task[int(j)] = int(t)
    return cls, task


def _task_classes(result: Result) -> dict[int, str]:
    """Per task: its class name (the os world's task table)."""
    tasks = result.tasks
    if tasks is None or tasks.empty or not {"task", "class"} <= set(tasks.columns):
        return {}
    return {int(t): str(c) for t, c in zip(tasks["task"].tolist(), tasks["class"].tolist(),
                                           strict=True) if _finite(t)}


def _has_blocking(result: Result, world: str) -> bool:
    """Whether a job's slice can end because it blocks (I/O phases), not only by preemption."""
    spec = result.spec or {}
    if world == "server":
        return False
    classes = spec.get("classes") or []
    keys = ("io", "bursts")
    if any(spec.get(k) not in (None, 0, 1, "none") for k in keys):
        return True
    return any(isinstance(c, dict) and any(c.get(k) not in (None, 0, 1, "none") for k in keys)
               for c in classes)


def _ran(b: _Builder, result: Result, pid: int, world: str, limit: int) -> dict[str, Any]:
    """Slices, preemptions and migrations of a schedule of what ran (sim, server, dispatcher)."""
    import numpy as np

    s = result.schedule
    n_total = len(s)
    cpu = s["cpu"].to_numpy(dtype=float)
    job = s["job"].to_numpy(dtype=float)
    task = s["task"].to_numpy(dtype=float)
    start = s["start"].to_numpy(dtype=float)
    end = s["end"].to_numpy(dtype=float)
    order = np.lexsort((cpu, start))
    truncated = n_total > limit
    if truncated:
        order = order[:limit]
    cpu, job, task, start, end = cpu[order], job[order], task[order], start[order], end[order]
    n = len(order)

    unit = "worker" if world == "server" else "CPU"
    cpus = sorted({int(c) for c in cpu.tolist()})
    if world == "server":
        want = int(result.summary.get("cpus") or 0)
        cpus = sorted(set(cpus) | set(range(want)))
    elif _finite(result.summary.get("cpus")) and world == "sim":
        cpus = sorted(set(cpus) | set(range(int(result.summary["cpus"]))))
    tid = {c: b.thread(pid, f"{unit} {c}", c) for c in cpus}

    # Slices keyed by job; where the job is unknown (os without a job table), by task.
    by_job = np.isfinite(job)
    key = np.where(by_job, job, -1.0 - np.nan_to_num(task, nan=0.0))
    next_same_key = np.full(n, -1)
    kord = np.lexsort((start, key))
    same = key[kord][1:] == key[kord][:-1]
    next_same_key[kord[:-1][same]] = kord[1:][same]
    next_on_cpu = np.full(n, -1)
    cord = np.lexsort((start, cpu))
    same = cpu[cord][1:] == cpu[cord][:-1]
    next_on_cpu[cord[:-1][same]] = cord[1:][same]
    later = next_same_key >= 0
    preempted = later & (next_on_cpu != next_same_key)
    # A process migrates, whichever of its jobs runs: in the os world a move is seen between a
    # task's consecutive slices; elsewhere between a job's.
    next_move = next_same_key
    if world == "os" and np.isfinite(task).all():
        next_move = np.full(n, -1)
        tord = np.lexsort((start, task))
        same = task[tord][1:] == task[tord][:-1]
        next_move[tord[:-1][same]] = tord[1:][same]
    moved = np.zeros(n, dtype=bool)
    has = next_move >= 0
    moved[has] = cpu[next_move[has]] != cpu[has]

    classes, job_task = _job_attributes(result)
    task_class = _task_classes(result)
    noun = {"server": "request"}.get(world, "job")
    slices: list[dict[str, Any]] = []
    marks: list[dict[str, Any]] = []
    us = 1000.0
    for i in range(n):
        c = int(cpu[i])
        j = int(job[i]) if by_job[i] else None
        t: int | None = int(task[i]) if _finite(task[i]) and task[i] >= 0 else None
        if t is None and j is not None:
            t = job_task.get(j)
            t = t if t is not None and t >= 0 else None
        cls = classes.get(j) if j is not None else None
        if cls is None and t is not None:
            cls = task_class.get(t)
        if world == "os":
            name = f"task {t}" + (f" job {j}" if j is not None else "")
        else:
            name = f"{noun} {j}" + ("" if t is None else f" (client {t})" if world == "server"
                                    else f" (task {t})")
        args: dict[str, Any] = {"job": j, "task": t, "class": cls, "cpu": c}
        slices.append({"ph": "X", "name": name, "cat": f"class {cls}" if cls else noun,
                       "ts": start[i] * us, "dur": max(end[i] - start[i], 0.0) * us,
                       "pid": pid, "tid": tid[c], "args": args})
        if preempted[i]:
            marks.append({"ph": "i", "s": "t", "name": PREEMPT, "cat": "schedule",
                          "ts": end[i] * us, "pid": pid, "tid": tid[c],
                          "args": {"job": j, "task": t, "cpu": c}})
        if moved[i]:
            k = int(next_move[i])
            to = int(cpu[k])
            b.flow_id += 1
            mid_from = (start[i] + end[i]) / 2 * us
            mid_to = (start[k] + end[k]) / 2 * us
            marks.append({"ph": "i", "s": "t", "name": MIGRATE, "cat": "schedule",
                          "ts": start[k] * us, "pid": pid, "tid": tid[to],
                          "args": {"job": j, "task": t, "from": c, "to": to}})
            marks.append({"ph": "s", "id": b.flow_id, "name": MIGRATE, "cat": "migration",
                          "ts": mid_from, "pid": pid, "tid": tid[c]})
            marks.append({"ph": "f", "bp": "e", "id": b.flow_id, "name": MIGRATE,
                          "cat": "migration", "ts": mid_to, "pid": pid, "tid": tid[to]})
    b.events.extend(slices)
    b.events.extend(marks)
    return {"slices": n, "slices_total": n_total, "truncated": truncated,
            "preemptions": int(preempted.sum()), "migrations": int(moved.sum()),
            "by": "job" if by_job.all() else "task" if not by_job.any() else "job, else task"}


def _sampled(b: _Builder, result: Result, first_pid: int, limit: int) -> dict[str, Any]:
    """The os world under the kernel: per CPU, each task's stretches sampled runnable there
    (consecutive samples in state R on that CPU: from the first to the sample after the last);
    a change of CPU between two samples of a task is a migration, unless the run traced the
    kernel's moves (`trace_migrations`): then each move is at its time, with its path."""
    import numpy as np

    p = getattr(result, "placement", None)
    if p is None or p.empty:
        return {"slices": 0, "slices_total": 0, "truncated": False, "preemptions": 0,
                "migrations": 0}
    p = p.sort_values(["task", "t"], kind="stable")
    times = np.sort(p["t"].unique())
    spacing = float(np.median(np.diff(times))) if len(times) > 1 else math.nan
    rows: list[tuple[int, int, float, float, int]] = []  # cpu, task, start, end, samples
    moves: list[tuple[int, int, float, int]] = []  # task, from cpu, t, to cpu
    for task, g in p.groupby("task", sort=True):
        t = g["t"].to_numpy(dtype=float)
        c = g["cpu"].to_numpy(dtype=int)
        r = (g["state"] == "R").to_numpy()
        open_at = None
        count = 0
        for i in range(len(t)):
            if i > 0 and c[i] != c[i - 1]:
                moves.append((int(task), int(c[i - 1]), float(t[i]), int(c[i])))
            if open_at is not None and (not r[i] or c[i] != c[i - 1]):
                rows.append((int(c[i - 1]), int(task), open_at, float(t[i]), count))
                open_at = None
            if r[i] and i + 1 < len(t):
                if open_at is None:
                    open_at, count = float(t[i]), 0
                count += 1
            elif open_at is not None:  # R at the last sample: the stretch ends there
                rows.append((int(c[i]), int(task), open_at, float(t[i]), count))
                open_at = None
    rows.sort(key=lambda x: (x[2], x[0]))
    total = len(rows)
    truncated = total > limit
    rows = rows[:limit]
    task_class = _task_classes(result)
    cpus = sorted({int(c) for c in p["cpu"].unique()})
    pid_of = {c: first_pid + i for i, c in enumerate(cpus)}
    period = getattr(result, "sample_period_ms", None)
    for c in cpus:
        b.process(pid_of[c], f"CPU {c} (sampled every {period or spacing:g} ms: runnable tasks)",
                  c)
    tids: dict[tuple[int, int], int] = {}

    def lane(c: int, task: int) -> int:
        if (c, task) not in tids:
            tids[(c, task)] = b.thread(pid_of[c], f"task {task}", task)
        return tids[(c, task)]

    us = 1000.0
    for c, task, a, e, count in rows:
        cls = task_class.get(task)
        b.events.append({"ph": "X", "name": f"task {task} runnable", "cat":
                         f"class {cls}" if cls else "task", "ts": a * us, "dur": (e - a) * us,
                         "pid": pid_of[c], "tid": lane(c, task),
                         "args": {"task": task, "class": cls, "cpu": c, "samples": count,
                                  "state": "R"}})
    cutoff = rows[-1][2] if truncated and rows else math.inf
    traced = getattr(result, "migrations", None)
    paths: list[str | None] = [None] * len(moves)
    if traced is not None:
        # The kernel's own moves (from the start signal on), on CPUs the samples saw.
        kept = traced[(traced["time"] >= 0) & traced["to_cpu"].isin(list(pid_of))]
        moves = [(int(m.task), int(m.from_cpu), float(m.time), int(m.to_cpu))
                 for m in kept.itertuples()]
        paths = kept["path"].tolist()
    shown = [(m, path) for m, path in zip(moves, paths, strict=True) if m[2] <= cutoff]
    for (task, frm, t, to), path in shown:
        args: dict[str, Any] = {"task": task, "from": frm, "to": to}
        if path is not None:
            args["path"] = path
        b.events.append({"ph": "i", "s": "t", "name": MIGRATE, "cat": "schedule", "ts": t * us,
                         "pid": pid_of[to], "tid": lane(to, task), "args": args})
    return {"slices": len(rows), "slices_total": total, "truncated": truncated,
            "preemptions": 0, "migrations": len(shown), "sampled": True,
            "sample_period_ms": period, "sample_spacing_ms": spacing,
            "migrations_from": "the kernel's trace" if traced is not None else "the samples"}


def trace_dict(result: Result | Replications, *, limit: int = MAX_SLICES) -> dict[str, Any]:
    """The trace of a run (or of every run of a Replications, one process group each) as a
    Trace Event Format JSON object. Raises SpecError when a simulated run kept no schedule."""
    if not (hasattr(result, "summary") and hasattr(result, "schedule")) and \
            not hasattr(result, "runs"):
        raise spec_error("result", type(result).__name__, "a Result or Replications (a run "
                         "of any world, as simulate returns)")
    runs = list(getattr(result, "runs", None) or [result])
    b = _Builder()
    notes: list[dict[str, Any]] = []
    pid = 1
    left = limit
    for r_i, run in enumerate(runs):
        world = _world(run)
        has_schedule = run.schedule is not None and len(run.schedule) > 0
        placement = getattr(run, "placement", None)
        label = f" (replication {r_i})" if len(runs) > 1 else ""
        if has_schedule or placement is None or placement.empty:
            if not has_schedule and world == "sim" and not (run.spec or {}).get("keep_schedule"):
                raise spec_error("keep_schedule", (run.spec or {}).get("keep_schedule", False),
                                 "true: a trace is drawn from the run's schedule")
            if not has_schedule and world == "os" and run.summary.get("dispatcher") == "kernel":
                raise spec_error("load_sample", (run.spec or {}).get("load_sample", 0),
                                 "a period > 0 (ms): under the kernel's policies a trace is "
                                 "drawn from the placement samples")
            what = {"server": "workers", "os": f"CPUs (dispatcher: {run.summary.get('policy')})",
                    }.get(world, f"CPUs (simulated: {run.summary.get('policy')})")
            b.process(pid, what + label, pid)
            note = _ran(b, run, pid, world, max(left, 0))
            pid += 1
        else:
            note = _sampled(b, run, pid, max(left, 0))
            pid += len(set(placement["cpu"].tolist()))
        left -= note["slices"]
        blocking = _has_blocking(run, world) or note.get("by") not in (None, "job")
        note.update({"world": world, "policy": run.summary.get("policy"),
                     "cpus": run.summary.get("cpus"), "blocking": blocking})
        notes.append(note)
    truncated = any(n["truncated"] for n in notes)
    other: dict[str, Any] = {
        "schedlab": "schedule trace",
        "time_unit": "ts and dur in microseconds; schedlab's times are ms (ts = ms x 1000)",
        "runs": notes,
        "slices": sum(n["slices"] for n in notes),
        "slices_total": sum(n["slices_total"] for n in notes),
        "preemptions": sum(n["preemptions"] for n in notes),
        "migrations": sum(n["migrations"] for n in notes),
        "truncated": truncated,
        "limit": limit,
        "definitions": dict(DEFINITIONS),
    }
    if truncated:
        other["note"] = (f"truncated: the first {other['slices']:,} of "
                         f"{other['slices_total']:,} slices by start time (limit {limit:,})")
    if any(n["blocking"] for n in notes):
        other["definitions"][PREEMPT] += ("; in a run with I/O phases (or slices keyed by task) "
                                          "a job that blocks counts too")
    if any(n.get("sampled") for n in notes):
        other["sampled"] = ("os world under the kernel: slices are stretches in which the task "
                            "was sampled runnable (state R: running, or waiting for that CPU) "
                            "on that CPU, from its placement samples; not exact run times, no "
                            "preemptions; migrations are changes of CPU between two samples")
    return {"traceEvents": b.meta + b.events, "displayTimeUnit": "ms",
            "otherData": json_safe(other)}


def check_trace_out(key: str, path: str | Path) -> None:
    """Refuses, before any work, a trace file that could not be written: a name not ending in
    .json, or a directory that does not exist or does not take new files (SpecError naming
    `key`)."""
    check_writable(key, path, (".json",), "a Chrome/Perfetto trace")


def write_trace(result: Result | Replications, path: str | Path, *,
                limit: int = MAX_SLICES) -> dict[str, Any]:
    """Writes the run's trace (`trace_dict`) to `path` atomically; returns its `otherData`
    (counts, `truncated`, `note`) so a caller can say what was written. The path is checked
    first, as `--trace-out`'s is (`path` is its key here)."""
    check_trace_out("path", path)
    data = trace_dict(result, limit=limit)
    with atomic_file(path) as tmp, open(tmp, "w") as f:
        json.dump(data, f, separators=(",", ":"), allow_nan=False)
    return data["otherData"]

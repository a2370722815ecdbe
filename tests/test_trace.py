"""`schedlab.trace`: a run's schedule as a Chrome/Perfetto trace-event file, in every world.

Each trace is checked three ways: against the Trace Event Format (a schema of the events this
module writes, and the rules Perfetto's JSON importer relies on: every track named, slices on
one track never overlapping, each flow's two ends inside slices), against the run's own tables
(one slice per schedule row; per job, the slices' time is its service and the instants are its
context switches and migrations), and event by event against hand-computed schedules.

Perfetto's trace processor itself runs where its binary is at hand (`trace_processor_shell` on
PATH, or SCHEDLAB_TRACE_PROCESSOR naming it): it is not in any package registry this project
reaches (the `perfetto` package on PyPI downloads the binary from Google's storage at first use,
which fails offline), so here the schema check stands in for it and that test is skipped with
the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import pytest
import schedlab
from conftest import BIN
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from schedlab import trace as st
from schedlab._core import SpecError

# --- the Trace Event Format, as this module writes it ------------------------------------


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    name: str
    pid: int = Field(ge=0)
    tid: int = Field(ge=0)
    ts: float = Field(ge=0)


class Complete(_Event):
    ph: Literal["X"]
    cat: str
    dur: float = Field(ge=0)
    args: dict[str, Any]


class Metadata(_Event):
    ph: Literal["M"]
    name: Literal["process_name", "process_sort_index", "thread_name", "thread_sort_index"]
    args: dict[str, str | int]


class Instant(_Event):
    ph: Literal["i"]
    s: Literal["g", "p", "t"]
    cat: str
    args: dict[str, Any]


class FlowStart(_Event):
    ph: Literal["s"]
    id: int
    cat: str


class FlowEnd(_Event):
    ph: Literal["f"]
    id: int
    cat: str
    bp: Literal["e"]


Event = Annotated[Complete | Metadata | Instant | FlowStart | FlowEnd,
                  Field(discriminator="ph")]


class TraceFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    traceEvents: list[Event]  # noqa: N815 (the format's key)
    displayTimeUnit: Literal["ms", "ns"]  # noqa: N815
    otherData: dict[str, Any]  # noqa: N815


def check_format(data: dict[str, Any]) -> None:
    """The schema, then what Perfetto's JSON importer needs beyond it."""
    TraceFile.model_validate(data)
    ev = data["traceEvents"]
    meta = [e for e in ev if e["ph"] == "M"]
    processes = {e["pid"] for e in meta if e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]) for e in meta if e["name"] == "thread_name"}
    assert len({tid for _, tid in threads}) == len(threads), "a tid in two processes"
    for e in ev:
        if e["ph"] == "M" and e["name"].startswith("thread"):
            assert e["pid"] in processes, e
        if e["ph"] != "M":
            assert (e["pid"], e["tid"]) in threads, f"unnamed track: {e}"
    # Slices of one track never overlap (none nests in another in a schedule).
    tracks: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    for e in ev:
        if e["ph"] == "X":
            tracks[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    for spans in tracks.values():
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
            assert start >= end - 1e-6, (end, start)

    def inside(e: dict[str, Any]) -> bool:
        return any(a <= e["ts"] <= b for a, b in tracks[(e["pid"], e["tid"])])

    flows: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
    for e in ev:
        if e["ph"] in "sf":
            assert e["ph"] not in flows[e["id"]], f"flow {e['id']} twice"
            flows[e["id"]][e["ph"]] = e
            assert inside(e), f"flow end outside any slice: {e}"
    for fid, ends in flows.items():
        assert set(ends) == {"s", "f"}, fid
        assert ends["s"]["ts"] < ends["f"]["ts"], ends


def events(data: dict[str, Any], ph: str, name: str | None = None) -> list[dict[str, Any]]:
    return [e for e in data["traceEvents"] if e["ph"] == ph and (name is None or
                                                                 e["name"] == name)]


def per_job(data: dict[str, Any], name: str, key: str = "job") -> Counter:
    return Counter(e["args"][key] for e in events(data, "i", name))


def test_the_schema_check_refuses_what_perfetto_would_not_read():
    good = {"traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "ts": 0, "args": {"name": "p"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "ts": 0, "args": {"name": "t"}},
        {"ph": "X", "name": "a", "cat": "c", "ts": 0.0, "dur": 2.0, "pid": 1, "tid": 1,
         "args": {}}], "displayTimeUnit": "ms", "otherData": {}}
    check_format(good)
    slice_ = good["traceEvents"][2]
    for broken in ({**slice_, "dur": -1.0}, {k: v for k, v in slice_.items() if k != "dur"},
                   {**slice_, "ph": "Q"}, {**slice_, "ts": "0"}, {**slice_, "extra": 1}):
        with pytest.raises(ValidationError):
            check_format({**good, "traceEvents": [*good["traceEvents"][:2], broken]})
    with pytest.raises(AssertionError, match="overlap|1.0"):  # two slices overlapping
        check_format({**good, "traceEvents": [*good["traceEvents"], {**slice_, "ts": 1.0}]})
    with pytest.raises(AssertionError, match="unnamed track"):
        check_format({**good, "traceEvents": [*good["traceEvents"], {**slice_, "tid": 9}]})


# --- the simulator ------------------------------------------------------------------------


SMP = dict(policy="rr", params={"quantum": 1}, cpus=2, runqueues="per-cpu", balancer="linux",
           load=0.9, jobs=300, warmup=0, keep_schedule=True, seed=2,
           classes=[{"name": "a", "fraction": 0.5}, {"name": "b", "fraction": 0.5}])


def test_sim_trace_has_a_slice_per_segment_and_the_job_tables_counts(tmp_path: Path):
    r = schedlab.simulate(**SMP)
    path = tmp_path / "sim.trace.json"
    other = st.write_trace(r, path)
    data = json.loads(path.read_text())
    check_format(data)
    assert data["otherData"] == other
    jobs = r.jobs.set_index("job")
    assert len(jobs) == 300 and jobs.index.is_unique
    # One slice per schedule segment, on the track of its CPU, named and classed by its job.
    slices = events(data, "X")
    assert len(slices) == len(r.schedule) == other["slices"] > 300
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events(data, "M", "thread_name")}
    assert sorted(names.values()) == ["CPU 0", "CPU 1"]
    for e in slices:
        assert names[(e["pid"], e["tid"])] == f"CPU {e['args']['cpu']}"
        j = e["args"]["job"]
        assert e["name"] == f"job {j}"
        assert e["args"]["class"] == ["a", "b"][int(jobs.loc[j, "class"])]
    # Per job, its slices add up to its service (size): nothing lost, nothing counted twice.
    served: dict[int, float] = defaultdict(float)
    for e in slices:
        served[e["args"]["job"]] += e["dur"] / 1000
    assert set(served) == set(jobs.index)
    err = max(abs(served[j] - jobs.loc[j, "size"]) for j in jobs.index)
    assert err < 1e-6, err
    # Preemptions and migrations, job by job, are the simulator's own counters.
    preempt, migrate = per_job(data, st.PREEMPT), per_job(data, st.MIGRATE)
    assert sum(preempt.values()) == other["preemptions"] == jobs["context_switches"].sum() > 50
    assert sum(migrate.values()) == other["migrations"] == jobs["migrations"].sum() > 5
    for j in jobs.index:
        assert preempt[j] == jobs.loc[j, "context_switches"], j
        assert migrate[j] == jobs.loc[j, "migrations"], j
    # Each migration has its arrow, from the job's slice on one CPU to its next on the other.
    assert len(events(data, "s")) == len(events(data, "f")) == other["migrations"]
    assert other["truncated"] is False and other["slices_total"] == len(r.schedule)


def run_rows(write_trace, policy: str, rows: list[tuple], **params: Any):
    return schedlab.simulate(policy, trace=write_trace("arrival,size", rows),
                             keep_schedule=True, **params)


def test_a_quantum_that_expires_with_nobody_waiting_goes_on_on_its_own_cpu(write_trace):
    # Two jobs at 0 on 2 CPUs with a global queue, RR quantum 1: job 0 (size 1) on CPU 0, job 1
    # (size 3) on CPU 1. At 1 job 0 ends and job 1's quantum expires with nobody waiting: it
    # goes on on CPU 1. It moved to CPU 0, the first idle CPU: a migration and, in the trace, a
    # preemption, which the jobs table did not count (its context switches are counted when
    # the CPU takes another job, and CPU 1 took none).
    r = run_rows(write_trace, "rr", [(0, 1), (0, 3)], quantum=1, cpus=2, keep_jobs=True)
    segments = [(int(x.job), int(x.cpu), x.start, x.end) for x in r.schedule.itertuples()]
    assert segments == [(0, 0, 0, 1), (1, 1, 0, 1), (1, 1, 1, 2), (1, 1, 2, 3)]
    assert list(r.jobs["migrations"]) == [0, 0]
    assert list(r.jobs["context_switches"]) == [0, 0]
    other = st.trace_dict(r)["otherData"]
    assert (other["preemptions"], other["migrations"]) == (0, 0)
    # And on open arrivals, job by job, the trace's marks are the jobs table's counters.
    for seed in range(1, 9):
        r = schedlab.simulate("rr", quantum=1, cpus=2, load=0.9, jobs=300, warmup=0,
                              seed=seed, keep_jobs=True, keep_schedule=True)
        data = st.trace_dict(r)
        jobs = r.jobs.set_index("job")
        preempt, migrate = per_job(data, st.PREEMPT), per_job(data, st.MIGRATE)
        assert all(preempt[j] == jobs.loc[j, "context_switches"] for j in jobs.index), seed
        assert all(migrate[j] == jobs.loc[j, "migrations"] for j in jobs.index), seed


def tracks(*names: str) -> list[dict[str, Any]]:
    out = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "ts": 0,
            "args": {"name": names[0]}},
           {"ph": "M", "name": "process_sort_index", "pid": 1, "tid": 0, "ts": 0,
            "args": {"sort_index": 1}}]
    for i, n in enumerate(names[1:]):
        out += [{"ph": "M", "name": "thread_name", "pid": 1, "tid": i + 1, "ts": 0,
                 "args": {"name": n}},
                {"ph": "M", "name": "thread_sort_index", "pid": 1, "tid": i + 1, "ts": 0,
                 "args": {"sort_index": i}}]
    return out


def job_slice(job: int, start: float, end: float, cpu: int = 0) -> dict[str, Any]:
    return {"ph": "X", "name": f"job {job}", "cat": "class 0", "ts": start * 1000,
            "dur": (end - start) * 1000, "pid": 1, "tid": cpu + 1,
            "args": {"job": job, "task": None, "class": "0", "cpu": cpu}}


def test_fcfs_on_one_cpu_event_by_event(write_trace):
    # Arrivals 0, 1, 2 with sizes 3, 2, 1: job 0 runs 0-3, job 1 3-5, job 2 5-6; no job is
    # preempted or moves.
    r = run_rows(write_trace, "fcfs", [(0, 3), (1, 2), (2, 1)])
    data = st.trace_dict(r)
    check_format(data)
    assert data["traceEvents"] == tracks("CPUs (simulated: fcfs)", "CPU 0") + [
        job_slice(0, 0, 3), job_slice(1, 3, 5), job_slice(2, 5, 6)]
    assert data["otherData"]["preemptions"] == data["otherData"]["migrations"] == 0


def test_global_rr_on_two_cpus_event_by_event(write_trace):
    # Three jobs of 4 ms at 0, one global queue, quantum 2, two CPUs. 0-2: job 0 on CPU 0,
    # job 1 on CPU 1, job 2 queued. At 2 both slices expire: job 0 is queued (CPU 0 first),
    # CPU 0 takes job 2, job 1 is queued, CPU 1 takes job 0 (a move). At 4 job 0 is done
    # (4 ms); job 2 expires on CPU 0 behind job 1, and both CPUs are idle: job 1 goes back to
    # CPU 1, its last, and job 2 goes on on CPU 0 (before, CPU 0 took job 1 and CPU 1 job 2:
    # two moves nothing asked for). Two preemptions (jobs 0 and 1 at 2; job 2 goes on at once
    # on its CPU), one migration with its arrow from the middle of the job's slice to the
    # middle of its next.
    r = run_rows(write_trace, "rr", [(0, 4), (0, 4), (0, 4)], cpus=2, quantum=2,
                 runqueues="global")
    data = st.trace_dict(r)
    check_format(data)

    def preempt(job, t, cpu):
        return {"ph": "i", "s": "t", "name": "preempt", "cat": "schedule", "ts": t * 1000,
                "pid": 1, "tid": cpu + 1, "args": {"job": job, "task": None, "cpu": cpu}}

    def migrate(job, t, frm, to, fid, mid_from, mid_to):
        return [{"ph": "i", "s": "t", "name": "migrate", "cat": "schedule", "ts": t * 1000,
                 "pid": 1, "tid": to + 1,
                 "args": {"job": job, "task": None, "from": frm, "to": to}},
                {"ph": "s", "id": fid, "name": "migrate", "cat": "migration",
                 "ts": mid_from * 1000, "pid": 1, "tid": frm + 1},
                {"ph": "f", "bp": "e", "id": fid, "name": "migrate", "cat": "migration",
                 "ts": mid_to * 1000, "pid": 1, "tid": to + 1}]

    assert data["traceEvents"] == tracks("CPUs (simulated: rr)", "CPU 0", "CPU 1") + [
        job_slice(0, 0, 2, 0), job_slice(1, 0, 2, 1), job_slice(2, 2, 4, 0),
        job_slice(0, 2, 4, 1), job_slice(2, 4, 6, 0), job_slice(1, 4, 6, 1),
        preempt(0, 2, 0), *migrate(0, 2, 0, 1, 1, 1, 3),
        preempt(1, 2, 1)]
    assert len(events(data, "i", "preempt")) == 2
    assert list(r.jobs.sort_values("job")["migrations"]) == [1, 0, 0]
    assert list(r.jobs.sort_values("job")["context_switches"]) == [1, 1, 0]


def test_a_job_that_goes_on_at_once_on_its_cpu_is_not_preempted(write_trace):
    # One job of 3 ms, quantum 1: three slices back to back on CPU 0, no other job to run:
    # the slices end, the job is never preempted.
    r = run_rows(write_trace, "rr", [(0, 3)], quantum=1)
    data = st.trace_dict(r)
    assert [(e["ts"], e["dur"]) for e in events(data, "X")] == [(0, 1000), (1000, 1000),
                                                                (2000, 1000)]
    assert events(data, "i") == [] and r.jobs["context_switches"].iloc[0] == 0


def test_a_huge_schedule_is_cut_to_the_limit_and_says_so(tmp_path: Path):
    r = schedlab.simulate(**SMP)
    other = st.write_trace(r, tmp_path / "cut.json", limit=100)
    data = json.loads((tmp_path / "cut.json").read_text())
    check_format(data)
    slices = events(data, "X")
    assert len(slices) == other["slices"] == 100 and other["slices_total"] == len(r.schedule)
    assert other["truncated"] is True and "first 100 of" in other["note"]
    # The earliest 100 by start.
    first = np.sort(r.schedule["start"].to_numpy())[:100] * 1000
    assert np.allclose(sorted(e["ts"] for e in slices), first)


def test_a_simulation_without_its_schedule_is_refused_and_nothing_written(tmp_path: Path):
    r = schedlab.simulate("fcfs", load=0.5, jobs=50)
    with pytest.raises(SpecError, match="keep_schedule"):
        st.write_trace(r, tmp_path / "none.json")
    assert list(tmp_path.iterdir()) == []


def test_replications_are_one_process_each():
    reps = schedlab.simulate("fcfs", load=0.5, jobs=40, keep_schedule=True, replications=2)
    data = st.trace_dict(reps)
    check_format(data)
    procs = [e["args"]["name"] for e in events(data, "M", "process_name")]
    assert procs == ["CPUs (simulated: fcfs) (replication 0)",
                     "CPUs (simulated: fcfs) (replication 1)"]
    by_pid = Counter(e["pid"] for e in events(data, "X"))
    assert by_pid == {1: len(reps.runs[0].schedule), 2: len(reps.runs[1].schedule)}


def test_the_module_imports_no_pandas():
    code = "import sys, schedlab.trace; print('pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "False", out


def kernel_result(placement: list[tuple[float, int, int, str]]) -> Any:
    """An os-world Result under the kernel's policies: no schedule, placement samples only."""
    import pandas as pd
    from schedlab.results import Result

    r = Result(summary={"world": "os", "dispatcher": "kernel", "policy": "kernel:other",
                        "cpus": 2},
               jobs=pd.DataFrame(), classes=pd.DataFrame(),
               tasks=pd.DataFrame({"task": [0, 1], "class": ["a", "b"]}),
               schedule=pd.DataFrame(columns=["cpu", "job", "task", "start", "end"]),
               spec={"world": "os", "load_sample": 10})
    r.placement = pd.DataFrame(placement, columns=["t", "task", "cpu", "state"])
    r.sample_period_ms = 10.0
    return r


# Two tasks sampled every 10 ms: (t, task, cpu, state).
TWO_TASKS = ([(t, 0, c, st_) for t, c, st_ in
              ((0, 0, "R"), (10, 0, "R"), (20, 0, "S"), (30, 1, "R"), (40, 1, "R"))]
             + [(t, 1, c, st_) for t, c, st_ in
                ((0, 1, "R"), (10, 1, "R"), (20, 0, "R"), (30, 0, "R"), (40, 0, "S"))])


def test_kernel_samples_become_runnable_stretches_event_by_event():
    # Samples every 10 ms. Task 0: R on CPU 0 at 0 and 10, asleep at 20, R on CPU 1 at 30 and
    # 40 (the last sample). Task 1: R on CPU 1 at 0 and 10, R on CPU 0 at 20 and 30, asleep
    # at 40. Stretches: task 0 on CPU 0 0-20 (2 samples) and on CPU 1 30-40 (1: the last
    # sample ends it); task 1 on CPU 1 0-20 (2) and on CPU 0 20-40 (2). Moves: task 1 at 20
    # (1 -> 0), task 0 at 30 (0 -> 1). A lane per (CPU, task) in order of first use.
    r = kernel_result(TWO_TASKS)
    data = st.trace_dict(r)
    check_format(data)

    def proc(pid, cpu):
        return [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "ts": 0,
                 "args": {"name": f"CPU {cpu} (sampled every 10 ms: runnable tasks)"}},
                {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "ts": 0,
                 "args": {"sort_index": cpu}}]

    def lane(pid, tid, task):
        return [{"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "ts": 0,
                 "args": {"name": f"task {task}"}},
                {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "ts": 0,
                 "args": {"sort_index": task}}]

    def stretch(pid, tid, task, cpu, a, b, n):
        cls = "ab"[task]
        return {"ph": "X", "name": f"task {task} runnable", "cat": f"class {cls}",
                "ts": a * 1000.0, "dur": (b - a) * 1000.0, "pid": pid, "tid": tid,
                "args": {"task": task, "class": cls, "cpu": cpu, "samples": n, "state": "R"}}

    def move(pid, tid, task, t, frm, to):
        return {"ph": "i", "s": "t", "name": "migrate", "cat": "schedule", "ts": t * 1000.0,
                "pid": pid, "tid": tid, "args": {"task": task, "from": frm, "to": to}}

    assert data["traceEvents"] == [
        *proc(1, 0), *proc(2, 1), *lane(1, 1, 0), *lane(2, 2, 1), *lane(1, 3, 1),
        *lane(2, 4, 0),
        stretch(1, 1, 0, 0, 0, 20, 2), stretch(2, 2, 1, 1, 0, 20, 2),
        stretch(1, 3, 1, 0, 20, 40, 2), stretch(2, 4, 0, 1, 30, 40, 1),
        move(2, 4, 0, 30, 0, 1), move(1, 3, 1, 20, 1, 0)]
    run = data["otherData"]["runs"][0]
    assert (run["sampled"], run["sample_period_ms"], run["preemptions"], run["migrations"]) == \
        (True, 10.0, 0, 2)


def test_a_traced_kernel_run_shows_the_kernels_moves_with_their_paths():
    # The samples of the test above, with the kernel's trace of the moves (trace_migrations):
    # task 1 moved at 14.5 ms by an idle balance and back at 17 by a wake-up (between two
    # samples: the samples miss both), task 0 at 26.25 by a newly-idle balance; a move before
    # the start (the pinned start's own) is not drawn.
    import pandas as pd

    r = kernel_result(TWO_TASKS)
    r.migrations = pd.DataFrame(
        [(-1.5, 0, 1, 0, "affinity", "migration/1", 21),
         (14.5, 1, 1, 0, "idle balance", "idle", 0), (17.0, 1, 0, 1, "wake-up", "x", 7),
         (18.0, 1, 1, 0, "newly-idle balance", "y", 8),
         (26.25, 0, 0, 1, "newly-idle balance", "z", 9)],
        columns=["time", "task", "from_cpu", "to_cpu", "path", "running", "running_pid"])
    data = st.trace_dict(r)
    check_format(data)
    moves = [(e["ts"], e["pid"], e["args"]) for e in data["traceEvents"]
             if e.get("name") == st.MIGRATE]
    assert moves == [
        (14500.0, 1, {"task": 1, "from": 1, "to": 0, "path": "idle balance"}),
        (17000.0, 2, {"task": 1, "from": 0, "to": 1, "path": "wake-up"}),
        (18000.0, 1, {"task": 1, "from": 1, "to": 0, "path": "newly-idle balance"}),
        (26250.0, 2, {"task": 0, "from": 0, "to": 1, "path": "newly-idle balance"})]
    run = data["otherData"]["runs"][0]
    assert (run["migrations"], run["migrations_from"]) == (4, "the kernel's trace")


def test_kernel_runs_without_samples_are_refused_naming_the_key(tmp_path: Path):
    with pytest.raises(SpecError, match="load_sample"):
        st.write_trace(kernel_result([]), tmp_path / "k.json")
    assert list(tmp_path.iterdir()) == []


def test_a_trace_path_is_checked_before_any_work(tmp_path: Path):
    st.check_trace_out("trace_out", tmp_path / "ok.json")
    # A missing directory is made when the trace is written, not by the check.
    st.check_trace_out("trace_out", tmp_path / "missing" / "x.json")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "f").write_text("a file")
    for bad in (tmp_path / "x.csv", tmp_path / "f" / "x.json"):
        with pytest.raises(SpecError, match="trace_out"):
            st.check_trace_out("trace_out", bad)
    assert [p.name for p in tmp_path.iterdir()] == ["f"]


# --- Perfetto's trace processor, where it runs offline ------------------------------------


def trace_processor() -> str | None:
    named = os.environ.get("SCHEDLAB_TRACE_PROCESSOR")
    return named or shutil.which("trace_processor_shell") or shutil.which(
        "trace_processor", path=str(BIN))


def test_perfettos_trace_processor_counts_the_slices(tmp_path: Path):
    tp = trace_processor()
    if tp is None:
        pytest.skip("no Perfetto trace processor here: its binary is not in a package "
                    "registry this machine reaches (the perfetto package downloads it from "
                    "Google at first use); the schema check above stands in for it")
    r = schedlab.simulate(**SMP)
    path = tmp_path / "sim.trace.json"
    other = st.write_trace(r, path)
    query = tmp_path / "q.sql"
    query.write_text(
        "select (select count(*) from slice where name like 'job %') as slices, "
        "(select count(*) from slice where name = 'preempt') as preemptions, "
        "(select count(*) from slice where name = 'migrate') as migrations, "
        "(select count(*) from flow) as flows, "
        "(select count(*) from thread where name like 'CPU %') as cpus;")
    out = subprocess.run([tp, "-q", str(query), str(path)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [ln for ln in out.stdout.splitlines() if ln.strip()]
    header = [h.strip('"') for h in lines[-2].split(",")]
    values = dict(zip(header, (int(v.strip('"')) for v in lines[-1].split(",")), strict=True))
    assert values == {"slices": len(r.schedule), "preemptions": other["preemptions"],
                      "migrations": other["migrations"], "flows": other["migrations"],
                      "cpus": 2}


# --- the real worlds ------------------------------------------------------------------------


@pytest.mark.real
def test_server_trace_has_a_slice_per_turn_of_each_request(tmp_path: Path):
    from schedlab.server import run

    # Four clients, two workers, round robin by one packet: a 256 KiB request is 16 packets of
    # 16 KiB, so 16 passes of a worker, each by whichever worker is free (migrations).
    r = run({"policy": "rr", "quantum": 1, "packet": 16384, "cpus": 2,
             "catalogue": [{"path": "/a.bin", "bytes": 262_144}],
             "cost": "0ms+0.02ms/KiB", "clients": 4, "jobs": 40, "seed": 3})
    path = tmp_path / "server.trace.json"
    other = st.write_trace(r, path)
    data = json.loads(path.read_text())
    check_format(data)
    j = r.jobs.set_index("job")
    assert len(j) == 40 and (j["error"] == 0).all()
    names = sorted(e["args"]["name"] for e in events(data, "M", "thread_name"))
    assert names == ["worker 0", "worker 1"]
    slices = events(data, "X")
    assert len(slices) == len(r.schedule) == other["slices"] >= 40 * 16
    mine: dict[int, list[int]] = defaultdict(list)
    next_on_worker: dict[int, int] = {}
    last: dict[int, int] = {}
    for i in sorted(range(len(slices)), key=lambda i: slices[i]["ts"]):
        mine[slices[i]["args"]["job"]].append(i)
        w = slices[i]["args"]["cpu"]
        if w in last:
            next_on_worker[last[w]] = i
        last[w] = i
    preempt, migrate = per_job(data, st.PREEMPT), per_job(data, st.MIGRATE)
    assert sum(migrate.values()) > 0
    for job, row in j.iterrows():
        s = [slices[i] for i in mine[job]]
        assert s[0]["name"] == f"request {job} (client {row['client']})"
        # The server's own measures of the request: its service is the time of its turns,
        # its first worker and first run are its first slice's, its workers are its slices'.
        served = sum(e["dur"] for e in s) / 1000
        assert abs(served - row["service"]) < 1e-5, (job, served, row["service"])
        assert s[0]["args"]["cpu"] == row["cpu"]
        assert abs(s[0]["ts"] / 1000 - row["first_run"]) < 1e-5
        assert len({e["args"]["cpu"] for e in s}) - 1 == row["migrations"]
        # Its turns: runs of its slices that one worker gave it one after the other (a slice
        # ends a turn unless the worker's next slice is the request's next).
        ends = sum(1 for a, b in zip(mine[job], mine[job][1:], strict=False)
                   if next_on_worker.get(a) != b)
        assert len(s) == 16, job  # a packet a pass
        assert ends + 1 == row["turns"], job  # 16 but at the run's edges, with fewer rivals
        assert preempt[job] == ends == row["context_switches"], job


OS = {"clients": 3, "size": 5, "think": "exp:3", "time": 1000, "cpus": 2, "quiet_wait": 0}


@pytest.mark.real
def test_os_trace_under_the_dispatcher_has_the_jobs_cpu_and_the_kernels_migrations(
        tmp_path: Path):
    from schedlab import osrun

    # Three processes of 5 ms jobs with think times, round robin by 2 ms on two CPUs, from
    # user space: the dispatcher's segments, split where a task's next job began.
    r = osrun.run({**OS, "policy": "rr", "params": {"quantum": 2}})
    path = tmp_path / "os.trace.json"
    other = st.write_trace(r, path)
    data = json.loads(path.read_text())
    check_format(data)
    slices = events(data, "X")
    assert len(slices) == len(r.schedule) == other["slices"] > 100
    assert "sampled" not in data["otherData"]
    jobs, tasks = r.jobs.set_index("job"), r.tasks.set_index("task")
    assert len(jobs) > 50
    mine: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for e in slices:
        assert e["name"] == f"task {e['args']['task']} job {e['args']['job']}"
        mine[e["args"]["job"]].append(e)
    for job, row in jobs.iterrows():
        # Its slices are its task's, from its start until its task's next job starts; and
        # it ran only while the dispatcher let it: its CPU time (the worker's own clock) is
        # within the time its slices gave it between its arrival and its completion (less a
        # signal's delivery, well under a ms).
        s = mine[job]
        assert s and {e["args"]["task"] for e in s} == {row["client"]}
        assert min(e["ts"] for e in s) >= row["arrival"] * 1000 - 1e-3
        given = sum(max(0.0, min(e["ts"] + e["dur"], row["completion"] * 1000)
                        - max(e["ts"], row["arrival"] * 1000)) for e in s) / 1000
        assert row["cpu_time"] <= given + 1.0, (job, row["cpu_time"], given)
    # Per task: the dispatcher's own count of its slices bounds the trace's (a split per job
    # at most), and each move the trace shows is one the kernel counted.
    migrate = per_job(data, st.MIGRATE, "task")
    assert sum(migrate.values()) > 0
    for t, row in tasks.iterrows():
        n = sum(1 for e in slices if e["args"]["task"] == t)
        assert n <= row["dispatches"] + (jobs["client"] == t).sum(), (t, n)
        assert migrate[t] <= row["migrations"], (t, migrate[t], row["migrations"])


@pytest.mark.real
def test_os_trace_under_the_kernel_is_drawn_from_its_samples(tmp_path: Path):
    from schedlab import osrun

    # The same processes under SCHED_OTHER, sampled every 5 ms: per CPU, each task's
    # stretches sampled runnable there.
    r = osrun.run({**OS, "load_sample": 5})
    path = tmp_path / "kernel.trace.json"
    other = st.write_trace(r, path)
    data = json.loads(path.read_text())
    check_format(data)
    assert len(r.schedule) == 0 and other["runs"][0]["sample_period_ms"] == 5
    assert "sampled" in other and other["preemptions"] == 0
    procs = sorted(e["args"]["name"] for e in events(data, "M", "process_name"))
    assert procs and all(p.endswith("(sampled every 5 ms: runnable tasks)") for p in procs)
    p = r.placement.sort_values(["task", "t"], kind="stable")
    slices = events(data, "X")
    assert len(slices) == other["slices"] > 0
    for t, g in p.groupby("task"):
        mine = sorted((e for e in slices if e["args"]["task"] == t), key=lambda e: e["ts"])
        # Every sample of the task in state R (but its last) is in one of its slices, on the
        # CPU it was sampled on; the slices hold nothing else.
        runnable = g[(g["state"] == "R")].iloc[:-1] if g["state"].iloc[-1] == "R" else \
            g[g["state"] == "R"]
        assert sum(e["args"]["samples"] for e in mine) == len(runnable), t
        for _, smp in runnable.iterrows():
            assert any(e["ts"] <= smp["t"] * 1000 < e["ts"] + e["dur"]
                       and e["args"]["cpu"] == smp["cpu"] for e in mine), (t, smp["t"])
        # A move seen between two samples is one the kernel counted at least.
        moves = int((g["cpu"].to_numpy()[1:] != g["cpu"].to_numpy()[:-1]).sum())
        assert per_job(data, st.MIGRATE, "task")[t] == moves
        assert moves <= r.tasks.set_index("task").loc[t, "migrations"], t


# --- The same file from the command line and from simulate() -------------------------------


def test_trace_out_from_the_command_line_and_from_simulate(tmp_path: Path):
    from conftest import SCHEDLAB, cli_env

    spec = {"policy": "rr", "quantum": 1, "load": 0.7, "jobs": 300, "cpus": 2,
            "runqueues": "per-cpu", "balancer": "linux", "seed": 5}
    reference = schedlab.simulate(keep_schedule=True, **spec)
    out = subprocess.run([SCHEDLAB, "sim", "--policy", "rr", "--quantum", "1", "--load", "0.7",
                          "--jobs", "300", "--cpus", "2", "--runqueues", "per-cpu",
                          "--balancer", "linux", "--seed", "5", "--trace-out",
                          str(tmp_path / "cli.json"), "--json"],
                         capture_output=True, text=True, timeout=120, env=cli_env())
    assert out.returncode == 0, out.stderr
    # `--json` alone prints the core's summary; with a trace it is the same summary.
    assert json.loads(out.stdout)["response_mean"] == reference.summary["response_mean"]
    schedlab.simulate(trace_out=tmp_path / "api.json", **spec)
    for name in ("cli.json", "api.json"):
        data = json.loads((tmp_path / name).read_text())
        check_format(data)
        assert len(events(data, "X")) == len(reference.schedule) > 300
        moved = per_job(data, st.MIGRATE)
        table = reference.jobs.set_index("job")["migrations"]
        assert table.sum() > 5
        assert all(moved[j] == m for j, m in table.items()), "migrations job by job"
    assert (tmp_path / "cli.json").read_bytes() == (tmp_path / "api.json").read_bytes()
    with pytest.raises(SpecError, match="trace_out"):
        schedlab.simulate(policy=["fcfs", "srpt"], load=0.5, jobs=10,
                          trace_out=tmp_path / "no.json")
    assert not (tmp_path / "no.json").exists()

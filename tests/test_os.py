"""The os world: real processes under real kernel policies, and schedlab policies enforced from
user space. Every check compares with the kernel's own counters or with theory (the kernel's
weight table, the policy's definition); none times anything for speed. Runs are short and
bounded; trials the noise gate flags are retried (bounded) where foreign load would matter.
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import schedlab
from conftest import SCHEDLAB, cli_env, unitless
from schedlab import _core, osrun
from schedlab._core import NICE_TO_WEIGHT as NICE_WEIGHTS
from schedlab._core import SpecError
from schedlab.worlds import os as os_world

CAPS = osrun.capabilities()
QUIET = {"quiet_wait": 0}


def need(policy: str) -> None:
    """Skips with the kernel's own reason when it forbids `policy` here."""
    if not CAPS[policy]["ok"]:
        pytest.skip(f"kernel forbids {policy}: {CAPS[policy]['reason']}")
    if policy in ("fifo", "rr", "deadline") and not CAPS["rt_throttling"]:
        pytest.skip("RT throttling is off: schedlab refuses RT workers")


def by_class(result, name):
    return result.tasks[result.tasks["class"] == name].iloc[0]


# --- calibrated work and the kernel's counters -------------------------------------------


def test_a_200ms_job_is_200ms_of_cpu_by_schedstat():
    r = osrun.run({"clients": 1, "jobs": 3, "size": 200, "cpus": [0], **QUIET})
    assert len(r.jobs) == 3
    # The worker's own thread CPU clock: the job's size.
    assert np.allclose(r.jobs["cpu_time"], 200.0, atol=0.5), r.jobs["cpu_time"].tolist()
    # The kernel's schedstat for the whole process: three jobs plus setup and measurement.
    cpu = r.tasks["cpu_time"].iloc[0]
    assert 600.0 <= cpu <= 630.0, cpu
    # utime + stime (tick-sampled) agree with schedstat within a few ticks.
    t = r.tasks.iloc[0]
    assert abs((t["user_ms"] + t["sys_ms"]) - cpu) < 30, (t["user_ms"], t["sys_ms"], cpu)
    assert r.summary["jobs"] == 3 and r.summary["unfinished"] == 0


def test_a_warm_up_by_count_is_left_out_of_the_jobs_and_of_the_window():
    # Two processes of 5 ms jobs back to back on one CPU: 4 warm-up jobs, then 10 measured,
    # as the simulator and the server count `jobs` (the os world measured 6); the measured
    # interval opens at the first measured arrival, as the simulator's does (it opened at 0:
    # the throughput spread the 10 jobs over the warm-up's time too, 8% low in the audit's
    # case).
    r = osrun.run({"clients": 2, "size": "det:5", "think": "det:0", "jobs": 10, "warmup": 4,
                   "cpus": 1, **QUIET})
    s, j = r.summary, r.jobs
    assert (s["jobs"], s["warmup_jobs"], len(j), s["unfinished"]) == (10, 4, 14, 0)
    measured = j[j["job"] >= 4]
    start, end = float(measured["arrival"].min()), float(measured["completion"].max())
    assert s["measure_start"] == start and s["measure_end"] == end and start > 10
    assert s["throughput"] == pytest.approx(10 / (end - start), rel=1e-12)
    assert s["mean_in_system"] == pytest.approx(measured["response"].sum() / (end - start),
                                                rel=1e-9)


def test_response_is_runqueue_wait_plus_cpu_for_a_batch():
    """100 one-shot CPU jobs on 2 CPUs: each job's response is the run-queue wait the kernel
    counted plus its CPU time (nothing else happens to it), for nearly every job. A run the
    machine stalled under (a hypervisor's steal, which the kernel counts as neither: 7.5 ms
    under one job in 3,000 here) is flagged noisy, and run again."""
    r = osrun.run({"batch": 100, "size": 5, "quiet_wait": 2000, "retry_noisy": 3})
    reasons = r.summary["noise_reasons"]
    if r.summary["noisy"] and all(why.startswith("others used") for why in reasons):
        pytest.skip(f"others kept the machine busy through 4 tries: {reasons}")
    assert not r.summary["noisy"], reasons
    j = r.jobs
    assert len(j) == 100 and (j["arrival"] == 0).all()
    assert (j["first_run"] >= j["arrival"]).all()
    gap = j["response"] - (j["wait"] + j["cpu_time"])
    assert np.allclose(j["unaccounted"], gap)
    # Measurement and exit take well under a millisecond.
    assert gap.median() < 1.0, gap.describe()
    # The kernel adds a wait when it ends, from the run queue's clock; after a migration to an
    # idle CPU that clock can be stale and a wait comes out a few tens of ms long (documented
    # in docs/os.md). It never hides time: the other direction stays bounded.
    assert (gap < 3.0).all(), gap.max()
    assert (gap > -0.5).mean() >= 0.8, gap.describe()
    assert r.summary["wait_inconsistent_jobs"] == int((gap < -0.5).sum())
    assert r.summary["unaccounted_max"] == pytest.approx(gap.max())
    assert r.summary["unaccounted_jobs"] == int((gap > 3.0 + 0.02 * j["context_switches"]).sum())
    # The makespan is the batch's completion time, its first fork (time 0) to its last exit:
    # no less than its CPU time spread over the 2 CPUs.
    assert r.summary["makespan"] == j["completion"].max()
    assert r.summary["makespan"] >= j["cpu_time"].sum() / 2
    # One-shot processes: one sample of a transient, with no interval of one run.
    assert r.summary["one_shot_batch"] is True
    assert not np.isfinite(r.summary["response_mean_ci"]).any()


def test_a_dispatched_workers_hold_runs_to_its_grant():
    """Under the dispatcher a job's wait is its run-queue wait plus the time the dispatcher held
    it ungranted or stopped (`held`). 200 tiny processes through round robin: a round of the
    dispatcher handles many notices on one clock reading, and a hold is read from the clock at
    the grant itself, so no job's response holds time its counters do not place (read from the
    round's reading, the workers granted late in a round missed 2.8-4.0 ms)."""
    need("fifo")
    r = osrun.run({"policy": "rr", "params": {"quantum": 10}, "batch": 200,
                   "size": "det:0.01", "cpus": 2, "enforce": "fifo", **QUIET})
    j = r.jobs
    assert len(j) == 200 and (j["held"] > 0).mean() > 0.9
    worst = j.nlargest(3, "unaccounted")[["client", "first_run", "held", "runqueue_wait",
                                          "unaccounted"]]
    assert j["unaccounted"].max() < 1.0, worst
    assert r.summary["unaccounted_jobs"] == 0
    # Every column of the os world's own tables has its unit (docs/os.md).
    for name in ("jobs", "tasks"):
        assert set(r.units[name]) == set(getattr(r, name).columns), name
    assert r.units["jobs"]["unaccounted"] == "ms" and r.units["tasks"]["dispatches"] == "count"


def test_a_run_with_jobs_the_machine_stalled_under_is_logged_for_the_harness(tmp_path,
                                                                            monkeypatch):
    """A stall counted under a dispatcher does not flag the run (docs/os.md), but it is logged
    for a harness that asked (`SCHEDLAB_NOISE_LOG`: the test suite's gate reruns a failed test
    on it). Stalls are made here by an allowance below any job's unaccounted time."""
    from schedlab.osrun import build

    log = tmp_path / "disturbed.jsonl"
    monkeypatch.setenv(schedlab.noise.LOG_ENV, str(log))
    spec = {"policy": "rr", "params": {"quantum": 10}, "batch": 20, "size": "det:0.5",
            "cpus": 2, **QUIET}
    r = osrun.run(spec)
    assert r.summary["dispatcher"] != "kernel"
    # Logged only if the machine disturbed it (steal, others' load or a real stall).
    clean = r.summary["unaccounted_jobs"] == 0 and not r.summary["noisy"]
    monkeypatch.setattr(build, "STALL_MS", -1000.0)
    s = osrun.run(spec).summary
    assert s["unaccounted_jobs"] == 20
    assert not any("stalled" in reason for reason in s["noise_reasons"])  # not flagged
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(records) == (1 if clean else 2), records
    assert records[-1] == {"world": "os", "pid": os.getpid(), "noisy": s["noisy"],
                           "reasons": s["noise_reasons"], "stalled_jobs": 20,
                           "unaccounted_max_ms": s["unaccounted_max"]}


def test_a_dispatched_jobs_io_is_its_sleeps_and_the_wait_after_is_held():
    """Under the dispatcher a worker back from its I/O waits for a grant, which is the
    dispatcher's hold, not I/O. One CPU, round robin in 10 ms quanta, two CPU hogs and a
    process of 4 bursts of 0.25 ms each followed by 3 ms of sleep: after each sleep it waits
    for the hog's quantum to end. Its `io` is its sleeps (12 ms and the timer's overshoot);
    counted up to the grant, as until 2026-11-28, it also held every wait (up to 10 ms each),
    which `held` counts too."""
    r = osrun.run({"policy": "rr", "params": {"quantum": 10}, "cpus": [0], "time": 800,
                   "think": "det:0", "classes": [
                       {"name": "hog", "clients": 2, "size": "det:1000"},
                       {"name": "io", "clients": 1, "size": "det:1", "bursts": 4,
                        "io": "sleep:det:3"}], **QUIET})
    j = r.jobs[r.jobs["class"] == 1]
    assert len(j) >= 5
    assert ((j["io"] >= 12.0) & (j["io"] < 12.0 + 4 * 0.5)).all(), j["io"].describe()
    # It waited after its sleeps (the hogs hold the CPU for up to a quantum).
    assert j["held"].mean() > 4.0, j["held"].describe()
    # Nothing counted twice: the parts never add up to more than the response.
    parts = j["runqueue_wait"] + j["held"] + j["cpu_time"] + j["io"]
    worst = j.assign(excess=parts - j["response"]).nlargest(2, "excess")[
        ["job", "response", "runqueue_wait", "held", "cpu_time", "io", "excess"]]
    assert (parts <= j["response"] + 0.5).all(), worst


# --- kernel policies --------------------------------------------------------------------


def test_nice_weights_give_the_kernel_table_shares_on_one_cpu():
    r = osrun.run({"jobs": 4, "size": 200, "cpus": [0], **QUIET,
                   "classes": [{"name": "n0", "nice": 0, "clients": 1},
                               {"name": "n5", "nice": 5, "clients": 1}]})
    theory = NICE_WEIGHTS[20] / (NICE_WEIGHTS[20] + NICE_WEIGHTS[25])  # 1024 / (1024 + 335)
    a = by_class(r, "n0")
    assert abs(a["share"] - theory) < 0.02, (a["share"], theory)
    assert abs(a["entitled"] - theory) < 0.01, a["entitled"]
    # The share was taken while both ran: the interval ends when n0 finished.
    assert r.summary["contended_end"] == "task 0 finished its jobs"
    assert r.summary["contended_ms"] < r.summary["wall_ms"]


def test_the_os_world_from_python_takes_the_commands_keys(tmp_path):
    # `schedlab os` from Python is `schedlab.os(...)` (it was the standard library's `os`):
    # the command's keys as keyword arguments, its trace file, its one-policy rule.
    trace = tmp_path / "os.json"
    r = schedlab.os(jobs=4, size=200, cpus=[0], quiet_wait=0, trace_out=trace,
                    classes=[{"name": "n0", "nice": 0, "clients": 1},
                             {"name": "n5", "nice": 5, "clients": 1}])
    theory = NICE_WEIGHTS[20] / (NICE_WEIGHTS[20] + NICE_WEIGHTS[25])
    assert abs(by_class(r, "n0")["share"] - theory) < 0.02, by_class(r, "n0")["share"]
    assert r.summary["jobs"] == 4 and r.summary["unfinished"] == 0
    events = json.loads(trace.read_text())["traceEvents"]
    # Under the kernel the trace is each process's sampled runnable stretches (docs/trace.md).
    assert {e["name"] for e in events if e.get("ph") == "X"} == \
        {"task 0 runnable", "task 1 runnable"}
    with pytest.raises(SpecError, match=r"^policy = "):
        schedlab.os("lottery,stride", jobs=1, size=1)
    with pytest.raises(SpecError, match=r"^nice = "):
        schedlab.os(jobs=1, size=1, clients=1, nice=99)


def test_sched_idle_gets_almost_nothing_next_to_a_normal_task():
    need("idle")
    r = osrun.run({"jobs": 2, "size": 150, "cpus": [0], **QUIET,
                   "classes": [{"name": "idle", "sched": "idle", "clients": 1},
                               {"name": "normal", "clients": 1}]})
    idle, normal = by_class(r, "idle"), by_class(r, "normal")
    assert idle["policy"] == "idle" and normal["policy"] == "other"
    # Weight 3 against 1024: a fraction of a percent; EEVDF's minimum slice makes it a little
    # more, never a proportional share.
    assert idle["share"] < 0.02, idle["share"]
    assert normal["done_ms"] < idle["done_ms"]


def test_fifo_runs_before_other_on_one_pinned_cpu():
    need("fifo")
    r = osrun.run({"jobs": 2, "size": 250, "cpus": [0], **QUIET,
                   "classes": [{"name": "other", "clients": 1},
                               {"name": "fifo", "sched": "fifo", "rtprio": 10, "clients": 1}]})
    fifo, other = by_class(r, "fifo"), by_class(r, "other")
    assert fifo["policy"] == "fifo" and other["policy"] == "other"
    # FIFO never waited for the CPU and finished in its own CPU time (250 ms < the 950 ms RT
    # budget, so no throttling); OTHER got nothing meanwhile.
    assert fifo["runqueue_wait"] < 5.0, fifo["runqueue_wait"]
    assert fifo["done_ms"] < 250 + 10
    assert fifo["done_ms"] < other["done_ms"]
    assert other["share"] < 0.02
    # The RT worker ran under the RLIMIT_RTTIME schedlab derived for it.
    assert fifo["rttime_limit_us"] != "unlimited/unlimited"


def test_fifo_priorities_order_and_rr_shares_by_time_slice():
    need("fifo")
    need("rr")
    r = osrun.run({"jobs": 2, "size": 200, "cpus": [0], **QUIET,
                   "classes": [{"name": "low", "sched": "fifo", "rtprio": 5, "clients": 1},
                               {"name": "high", "sched": "fifo", "rtprio": 20, "clients": 1}]})
    assert by_class(r, "high")["done_ms"] < by_class(r, "low")["done_ms"]
    assert by_class(r, "high")["runqueue_wait"] < 5.0
    rr = osrun.run({"jobs": 2, "size": 300, "cpus": [0], "sched": "rr", "rtprio": 10,
                    "clients": 2, **QUIET})
    slice_ms = int(Path("/proc/sys/kernel/sched_rr_timeslice_ms").read_text())
    # Two SCHED_RR tasks alternate every time slice: both finish near 2 x 300 ms, each was
    # preempted about 300 / slice times, and each waited about as long as the other ran.
    done = rr.tasks["done_ms"].to_numpy()
    assert (done > 600 - slice_ms - 10).all() and (done < 600 + 30).all(), done
    assert (rr.tasks["involuntary"] >= 300 // slice_ms - 1).all()
    # Shares are taken over the contended interval, until the first task is done: it had its
    # 300 ms, the other the rest. Here both usually end together (shares 0.50), but strict
    # alternation lets the first end a slice early (300 / 500 and 200 / 500: one CI run,
    # 2026-11-27, which the old check of 0.5 +- 0.05 failed although the kernel was right).
    contended = rr.summary["contended_ms"]
    first = np.arange(len(done)) == np.argmin(done)
    expected = np.where(first, 300 / contended, 1 - 300 / contended)
    assert np.allclose(rr.tasks["share"], expected, atol=0.02), (rr.tasks["share"], contended)


def test_sched_deadline_runs_at_its_bandwidth_or_is_skipped_with_the_kernel_reason():
    need("deadline")
    r = osrun.run({"clients": 1, "jobs": 1, "size": 60, "sched": "deadline", "runtime": 10,
                   "deadline": 30, "period": 30, **QUIET})
    t = r.tasks.iloc[0]
    assert t["policy"] == "deadline"
    # 60 ms of CPU at 10 ms per 30 ms period: about 6 periods, the last one partly.
    response = r.jobs["response"].iloc[0]
    assert 150 <= response <= 200, response


def test_a_deadline_set_beyond_the_bandwidth_is_refused_with_the_reason():
    need("deadline")
    cpus = len(os.sched_getaffinity(0))
    with pytest.raises(osrun.Refused) as e:
        osrun.run({"clients": cpus + 1, "jobs": cpus + 1, "size": 1, "sched": "deadline",
                   "runtime": 9, "deadline": 10, "period": 10, **QUIET})
    assert "SCHED_DEADLINE" in e.value.what
    assert "EBUSY" in e.value.reason and "admission" in e.value.reason


def test_rlimit_rttime_stops_a_runaway_fifo_worker():
    need("fifo")
    r = osrun.run({"clients": 1, "jobs": 1, "size": 1000, "sched": "fifo", "rtprio": 5,
                   "rttime": 100, "cpus": [0], **QUIET})
    t = r.tasks.iloc[0]
    assert t["rttime_limit_us"] == "100000/1100000"
    assert "RLIMIT_RTTIME" in t["killed"]
    # Killed at the soft limit (checked at scheduler ticks), long before its 1000 ms job ended.
    assert 100 <= t["cpu_time"] < 300, t["cpu_time"]
    assert r.summary["jobs"] == 0 and r.summary["unfinished"] == 1


def test_a_run_stopped_while_its_processes_think_has_nothing_unfinished():
    # Four processes of 5 ms jobs thinking 100 ms, on one CPU, stopped at 280 ms: they ran
    # three rounds (0-20, 105-125, 210-230 ms) and were thinking. The 388 jobs of their quota
    # they never started were counted unfinished; the jobs abandoned while they ran are
    # (as the simulator counts the jobs still in the system), none here.
    r = osrun.run({"clients": 4, "jobs": 400, "size": "det:5", "think": "det:100",
                   "time": 280, "cpus": 1, **QUIET})
    assert r.summary["jobs"] == 12 and r.summary["unfinished"] == 0
    assert r.tasks["unfinished"].tolist() == [0, 0, 0, 0]


def test_io_bound_jobs_block_voluntarily():
    r = osrun.run({"clients": 1, "jobs": 3, "size": 2, "bursts": 5, "io": "sleep:det:3",
                   "cpus": [0], **QUIET})
    j = r.jobs
    # Each job: 5 bursts of 0.4 ms CPU, each followed by a 3 ms blocking wait.
    assert (j["voluntary"] >= 5).all(), j["voluntary"].tolist()
    assert (j["io"] >= 15.0).all()
    # The CPU spent inside the I/O calls (entering the sleep, the wake-up path) is in both io
    # (wall time around the call) and cpu_time: allow up to 0.1 ms of it per call, over the
    # run's 15 calls. Per job it is 0.06 ms in the median, but 1 job in 90 showed 0.5 ms (the
    # limit of a job's 5 calls; 2026-12-01), so a per-job bound failed about 1 run in 30. A
    # wait counted twice in any one job would break this by 3 ms.
    overlap = j["io"] + j["cpu_time"] - j["response"]
    assert overlap.sum() <= len(j) * 5 * 0.1, overlap.tolist()


def test_dsync_writes_are_real_io():
    r = osrun.run({"clients": 1, "jobs": 2, "size": 1, "bursts": 4, "io": "dsync:4096",
                   "cpus": [0], **QUIET})
    assert r.environment["io_dir_fs"] not in (None, "tmpfs")
    assert (r.jobs["io"] > 0).all()
    assert r.tasks["killed"].isna().all()


# --- the pinned start of study 002 ------------------------------------------------------


def test_pinned_start_is_balanced_by_the_kernel_and_reported_over_time():
    spec = {"clients": 7, "size": 250, "time": 2500, "start_pinned": [0], "release_after": 500,
            "load_sample": 10, "quiet_wait": 2000, "retry_noisy": 1}
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs")
    spec["cpus"] = 2
    r = osrun.run(spec)
    s = r.summary
    # The coordinator kept to CPU 0 with the tasks (it would otherwise sleep on the idle CPU
    # 1 and give the kernel newly-idle pulls); a run without a pinned start keeps to none.
    assert r.environment["coordinator_cpus"] == [0]
    assert not any("coordinator" in w for w in s["warnings"]), s["warnings"]
    free = osrun.run({"clients": 1, "jobs": 1, "size": 5, "cpus": 2, **QUIET})
    assert free.environment["coordinator_cpus"] is None
    # Before the release every task is on CPU 0: the load distribution is (7, 0).
    assert s["load_distribution_start"] == [7.0, 0.0]
    assert not r.load.empty and list(r.load.columns) == ["t", "cpu0", "cpu1"]
    # The same series in the simulator's shape, and its time-weighted mean per CPU: the 7
    # runnable tasks are somewhere at every sample (2 CPUs, so between 3 and 7 on each).
    series = r.load_series
    assert list(series.columns) == ["time", "cpu", "runnable"] and len(series) == 2 * len(r.load)
    per_cpu = s["runnable_mean_per_cpu"]
    assert per_cpu == pytest.approx([r.load["cpu0"].mean(), r.load["cpu1"].mean()])
    assert 6.0 <= sum(per_cpu) <= 7.0 and per_cpu[0] > per_cpu[1]
    assert s["task_response_cv"] >= 0
    if s["noisy"]:
        # Other load changes the balance itself: with autogroups our 7 tasks weigh as one
        # session against every other session, so a busy CPU 1 may never pull any of them.
        pytest.skip(f"balance not judged on a noisy machine: {s['noise_reasons']}")
    assert s["migrations"] >= 3
    # After it, Linux balances to ceil(7/2), floor(7/2) = (4, 3) (study 002, Linux.1.a).
    assert sorted(s["load_distribution"], reverse=True) == pytest.approx([4, 3], abs=0.5)
    assert math.isfinite(s["time_to_balance"])


# --- user-space policies over real processes --------------------------------------------

LOTTERY = [{"name": "A", "tickets": 30, "clients": 1}, {"name": "B", "tickets": 20, "clients": 1},
           {"name": "C", "tickets": 10, "clients": 1}]


def shares(result):
    return result.tasks.set_index("class")["share"].to_dict()


def test_user_space_lottery_on_one_cpu_gives_ticket_shares():
    # 1 ms quanta for 8 s: about 8000 draws, so the binomial error of A's share is 0.6 points
    # and 2 points is over 3 standard errors.
    r = osrun.run({"policy": "lottery", "params": {"quantum": 1}, "time": 8000, "cpus": 1,
                   "size": 1e6, "classes": LOTTERY, **QUIET})
    got = shares(r)
    for name, want in (("A", 1 / 2), ("B", 1 / 3), ("C", 1 / 6)):
        assert abs(got[name] - want) < 0.02, (name, got, want)
    assert r.summary["dispatcher"] == "lottery" and r.summary["dispatcher_decisions"] > 6000


def test_user_space_lottery_on_two_cpus_needs_a_global_view_and_lag_balance():
    """Not a placement coincidence: one global lottery for both CPUs. Drawing two distinct
    winners per round gives A only ~42.5% (the simulator's global lottery agrees); with the
    lottery's `balance` (draws weighted by the CPU a task is owed, the same code as in the
    simulator) the shares are 50/33.3/16.7, and so are 40/40/20, a split no per-CPU placement
    can produce."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs")
    need("fifo")  # enforce = fifo: the chosen workers beat other engineers' builds
    base = {"policy": "lottery", "params": {"quantum": 2}, "time": 4000, "cpus": 2, "size": 1e6,
            "enforce": "fifo", **QUIET}
    plain = osrun.run({**base, "classes": LOTTERY})
    # The task table says how the dispatcher ran them: SCHED_FIFO at priority 1 (issue 15).
    assert (plain.tasks["policy"] == "fifo").all() and (plain.tasks["rtprio"] == 1).all()
    sim = schedlab.simulate("lottery", quantum=2, time=200_000, cpus=2, size="det:1e9",
                            think="det:0", classes=[{k: v for k, v in c.items()}
                                                    for c in LOTTERY])
    sim_shares = sim.tasks.set_index("class")["share"].to_dict()
    for name in "ABC":
        # The same algorithm in both worlds; real charging (measured CPU, compensation on
        # partial quanta) moves it by about a point.
        assert abs(shares(plain)[name] - sim_shares[name]) < 0.03, (shares(plain), sim_shares)
    assert shares(plain)["A"] < 0.46  # the global draw without balance misses A's entitlement
    balanced = osrun.run({**base, "classes": LOTTERY,
                          "params": {"quantum": 2, "balance": True}})
    got = shares(balanced)
    for name, want in (("A", 1 / 2), ("B", 1 / 3), ("C", 1 / 6)):
        assert abs(got[name] - want) < 0.02, (name, got, want)
    odd = osrun.run({**base, "params": {"quantum": 2, "balance": True}, "classes": [
        {"name": "A", "tickets": 40, "clients": 1}, {"name": "B", "tickets": 40, "clients": 1},
        {"name": "C", "tickets": 20, "clients": 1}]})
    got = shares(odd)
    for name, want in (("A", 0.4), ("B", 0.4), ("C", 0.2)):
        assert abs(got[name] - want) < 0.02, (name, got, want)
    assert balanced.summary["runqueues"] == "global"
    # The simulator's balanced lottery gives the same shares.
    sim = schedlab.simulate("lottery", quantum=2, balance=True, time=200_000, cpus=2,
                            size="det:1e9", think="det:0", classes=LOTTERY)
    sim_shares = sim.tasks.set_index("class")["share"].to_dict()
    for name, want in (("A", 1 / 2), ("B", 1 / 3), ("C", 1 / 6)):
        assert abs(sim_shares[name] - want) < 0.01, (name, sim_shares)


def test_per_cpu_lottery_shows_the_placement_coincidence():
    """xv6's per-CPU lotteries with fork-time placement by fewest tickets: 30/20/10 puts A alone
    on one CPU and comes out right; 40/40/20 cannot."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs")
    need("fifo")
    base = {"policy": "lottery", "params": {"quantum": 2}, "time": 3000, "cpus": 2, "size": 1e6,
            "enforce": "fifo", "runqueues": "per-cpu", **QUIET}
    r = osrun.run({**base, "classes": LOTTERY})
    homes = r.tasks.set_index("class")["home_cpu"].to_dict()
    assert homes["A"] != homes["B"] and homes["B"] == homes["C"]
    assert abs(shares(r)["A"] - 0.5) < 0.02
    odd = osrun.run({**base, "classes": [
        {"name": "A", "tickets": 40, "clients": 1}, {"name": "B", "tickets": 40, "clients": 1},
        {"name": "C", "tickets": 20, "clients": 1}]})
    got = shares(odd)
    # A and C share a CPU: A gets 40/60 of it, 1/3 of the total, not its 40%.
    assert abs(got["A"] - 1 / 3) < 0.03 and abs(got["B"] - 0.5) < 0.03, got


def test_io_bound_entitlement_passes_to_the_runnable():
    """A sleeping task does not want its share: entitlement is integrated over the runnable
    set, so the I/O-bound task's 30 tickets do not count while it sleeps."""
    need("fifo")
    r = osrun.run({"policy": "lottery", "params": {"quantum": 2}, "time": 3000, "cpus": 1,
                   "enforce": "fifo", **QUIET, "classes": [
                       {"name": "io", "tickets": 30, "clients": 1, "size": 0.5,
                        "io": "sleep:det:5", "bursts": 1},
                       {"name": "cpu20", "tickets": 20, "clients": 1, "size": 1e6},
                       {"name": "cpu10", "tickets": 10, "clients": 1, "size": 1e6}]})
    t = r.tasks.set_index("class")
    # The I/O-bound task holds half the tickets but is entitled to less (it sleeps most of the
    # time), and what it leaves passes to the CPU-bound ones, 2:1 by their tickets.
    assert t.loc["io", "entitled"] < 0.45, t["entitled"]
    assert t.loc["cpu20", "entitled"] > 20 / 60 and t.loc["cpu10", "entitled"] > 10 / 60
    assert t.loc["cpu20", "entitled"] / t.loc["cpu10", "entitled"] == pytest.approx(2, rel=1e-6)
    # It takes far less than even that: its bursts are short.
    assert t.loc["io", "share"] < t.loc["io", "entitled"]
    ratio = t.loc["cpu20", "service"] / t.loc["cpu10", "service"]
    assert 1.6 < ratio < 2.5, ratio


def test_user_space_stride_and_rr_shares_are_exact_by_construction():
    need("fifo")
    stride = osrun.run({"policy": "stride", "params": {"quantum": 2}, "time": 2000, "cpus": 1,
                        "size": 1e6, "enforce": "fifo", "classes": LOTTERY, **QUIET})
    got = shares(stride)
    for name, want in (("A", 1 / 2), ("B", 1 / 3), ("C", 1 / 6)):
        assert abs(got[name] - want) < 0.01, (name, got)
    rr = osrun.run({"policy": "rr", "params": {"quantum": 2}, "time": 2000, "cpus": 1,
                    "size": 1e6, "enforce": "fifo", "clients": 3, **QUIET})
    assert np.allclose(rr.tasks["share"], 1 / 3, atol=0.01), rr.tasks["share"].tolist()


def test_user_space_mlfq_keeps_an_interactive_process_responsive():
    """Two CPU hogs and one interactive process (0.5 ms bursts, 5 ms sleeps) on one CPU. The
    dispatcher schedules processes, so MLFQ levels persist over a process's jobs: with a boost
    every 20 ms the interactive one never uses its 4 ms allotment at the top, the hogs sink
    within 8 ms of each boost, and a top-level wake-up preempts them. Under round robin it
    waits behind the hogs' quanta. Most of its jobs do not wait at all under MLFQ (median 0
    against 7.1 ms); the mean keeps the jobs that arrive while a freshly boosted hog runs at
    the same level (about 10 ms each), which put it at 0.38-0.49 of round robin's in 14 runs
    of 2 s and 5 s (and the kernel's real-time throttling stalls both by up to 80 ms)."""
    need("fifo")
    classes = [{"name": "hog", "clients": 2, "size": 1e6},
               {"name": "interactive", "clients": 1, "size": 0.5, "think": "det:5"}]
    waits = {}
    for policy, params in (("mlfq", {"quantum": 4, "boost_period": 20}), ("rr", {"quantum": 4})):
        r = osrun.run({"policy": policy, "params": params, "time": 2000, "cpus": 1,
                       "enforce": "fifo", "classes": classes, **QUIET})
        j = r.jobs[r.jobs["client"] == 2]
        assert len(j) > 50, (policy, len(j))
        waits[policy] = (j["wait"].mean(), j["wait"].median())
    (mlfq_mean, mlfq_median), (rr_mean, rr_median) = waits["mlfq"], waits["rr"]
    assert rr_median > 3.0 and mlfq_median < 0.1 * rr_median, waits
    assert mlfq_mean < 0.6 * rr_mean, waits
    assert rr_mean > 2.0, waits


def test_user_space_priority_serves_the_light_process_first():
    """xv6 priority starvation check: one light process at priority 0 against five heavy ones
    at 10, on one CPU: the light one never waits behind them."""
    need("fifo")
    r = osrun.run({"policy": "priority", "cpus": 1, "enforce": "fifo", **QUIET, "classes": [
        {"name": "heavy", "priority": 10, "clients": 5, "size": 150},
        {"name": "light", "priority": 0, "clients": 1, "size": 20}], "jobs": 6})
    light = r.jobs[r.jobs["client"] == 5].iloc[0]
    heavy_done = r.jobs[r.jobs["client"] < 5]["completion"]
    assert light["completion"] < heavy_done.min()
    assert light["response"] < 20 + 10, light["response"]
    assert unitless(r.summary) == set()  # the dispatcher's numbers among them



# --- the studies' experiments -----------------------------------------------------------


def test_every_study_preset_is_a_valid_os_spec_and_has_its_sim_model_where_one_exists():
    import json

    from schedlab import _core, worlds
    from schedlab.api import validate
    from schedlab.osrun import presets

    specs = {**{f"quick-{k}": v for k, v in presets.linux_grid(quick=True).items()},
             **presets.linux_grid(quick=False),
             "pinned": presets.pinned_start(), "pinned-moderate": presets.pinned_start(10)}
    specs.update({f"lottery-{k}": v for k, v in presets.xv6_lottery(cpus=2).items()})
    specs.update({f"priority-{k}": v for k, v in presets.xv6_priority(aging=0.01).items()})
    assert len(specs) == 27 * 2 + 2 + 6 + 7
    modelled = 0
    for spec in specs.values():
        plan, _ = osrun.build_plan(spec)
        _core.os_check(json.dumps(plan))
        sim = worlds.translate("sim", {"policy": "kernel", **spec})
        if sim.skip is None:
            validate(**sim.spec)
            modelled += 1
    # CPU-bound grid cells, the lottery tests without I/O and the CPU-only priority tests.
    assert modelled >= 18 + 5 + 4, modelled


def test_linux_grid_runs_and_fifo_beats_cfs_on_mean_response_of_a_cpu_batch():
    """Study 003's grid (quick): CFS, FIFO and RR x CPU, I/O and mixed x three loads, every
    cell to completion. For a batch of N equal CPU jobs on m CPUs, FIFO serves them in order
    (mean response size * (N/m + 1) / 2) while CFS shares the CPUs until nearly all finish
    (about N * size / m): FIFO's mean response is about half of CFS's."""
    need("fifo")
    need("rr")
    from schedlab.osrun import presets

    grid = presets.linux_grid(quick=True)
    results = {}
    for name, spec in grid.items():
        r = osrun.run({**spec, **QUIET})
        n = spec["batch"]
        assert r.summary["jobs"] == n and r.summary["unfinished"] == 0, name
        assert r.tasks["killed"].isna().all(), (name, r.tasks["killed"].tolist())
        if "-io-" in name or "-mixed-" in name:
            assert (r.tasks["voluntary"] >= spec["bursts"]).all(), name
        results[name] = r
    m = results["fifo-cpu-heavy"].summary["cpus"]
    n = grid["fifo-cpu-heavy"]["batch"]
    size = 5.0
    fifo = results["fifo-cpu-heavy"].summary["response_mean"]
    cfs = results["cfs-cpu-heavy"].summary["response_mean"]
    fcfs_theory = size * (n / m + 1) / 2
    assert fifo == pytest.approx(fcfs_theory, rel=0.3), (fifo, fcfs_theory)
    assert fifo < 0.75 * cfs, (fifo, cfs)


def test_xv6_lottery_starvation_check_on_real_processes_and_in_sim():
    """Tickets 50,50,10,10,1,1,1,1: grouped shares 81/16/3 over the contended interval, on
    real processes and in the simulator (the xv6 report measured 45-66% for the first group
    because it counted after competitors had finished)."""
    from schedlab import worlds
    from schedlab.osrun import presets

    spec = presets.xv6_lottery(cpus=1, time=3000, quantum=2)["starvation_check"]
    r = osrun.run({**spec, **QUIET})
    sim_spec = worlds.translate("sim", spec).spec
    sim_spec["time"] = 300_000
    sim = schedlab.simulate(**sim_spec)
    want = {"t50": 100 / 124, "t10": 20 / 124, "t1": 4 / 124}
    for res, tol in ((r, 0.03), (sim, 0.01)):
        got = res.tasks.groupby("class")["share"].sum().to_dict()
        for name, w in want.items():
            assert abs(got[name] - w) < tol, (got, want)

# --- missing counters, safety, cleanup --------------------------------------------------


def test_missing_counters_are_reported_missing_not_zero():
    r = osrun.run({"clients": 1, "jobs": 2, "size": 20, "cpus": [0], **QUIET,
                   "pretend_missing": ["schedstat"]})
    missing = r.summary["missing"]
    assert "runqueue_wait" in missing and "schedstat" in missing["runqueue_wait"]
    assert r.tasks["runqueue_wait"].isna().all() and r.tasks["cpu_time"].isna().all()
    assert r.jobs["wait"].isna().all()
    # This kernel's real gap: without CONFIG_SCHEDSTATS there is no per-task wait_max.
    real = osrun.run({"clients": 1, "jobs": 1, "size": 5, "cpus": [0], **QUIET})
    if "wait_max" in real.summary["missing"]:
        assert real.tasks["wait_max"].isna().all()
        assert "SCHEDSTATS" in real.summary["missing"]["wait_max"]
    else:
        assert (real.tasks["wait_max"] >= 0).all()


def test_real_time_runs_are_bounded_by_their_planned_length():
    # Issue 15: two FIFO workers of 1,000 s each on 2 CPUs used to be bounded at 3,010 s, each
    # worker's RLIMIT_RTTIME at 2,000.5 s. Now 1.25 times the plan, plus start-up allowances.
    plan = osrun.validate({"clients": 2, "jobs": 2, "size": "det:1e6", "cpus": 2,
                           "sched": "fifo", "rtprio": 10})
    assert plan["hard_timeout"] == pytest.approx(1.25 * 1e6 + 10_000 + 10)
    assert [t["rttime_us"] for t in plan["tasks"]] == [int((1.25 * 1e6 + 500) * 1000)] * 2
    # Under the dispatcher with enforce = fifo every worker is real-time: the same bound.
    fifo = osrun.validate({"clients": 2, "time": 60_000, "size": "det:100", "cpus": 2,
                           "policy": "rr", "enforce": "fifo"})
    assert fifo["hard_timeout"] == pytest.approx(1.25 * 60_000 + 10_000 + 10)
    # Not real-time: foreign load may slow it, so the bound stays generous.
    other = osrun.validate({"clients": 2, "time": 60_000, "size": "det:100", "cpus": 2})
    assert other["hard_timeout"] == pytest.approx(3 * 60_000 + 10_000 + 10)


def test_hard_timeout_kills_and_reaps_every_worker():
    r = osrun.run({"clients": 3, "jobs": 3, "size": 5000, "cpus": [0], "hard_timeout": 800,
                   **QUIET})
    assert r.summary["timed_out"] and r.summary["killed_tasks"] == 3
    assert all("hard timeout" in k for k in r.tasks["killed"])
    for pid in r.tasks["pid"]:
        assert not Path(f"/proc/{pid}").exists(), pid


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rfind(")") + 2:].split()[1]) == pid:
                out.append(int(entry))
    return out


def _running(pid: int) -> bool:
    """Alive and not a zombie (a dead child its reparented parent has not reaped yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _default_signals() -> None:
    # A shell without job control starts background commands with SIGINT ignored, `nohup`
    # starts its command with SIGHUP ignored, and a child inherits both: the suite run that
    # way would see Ctrl-C or a hangup do nothing (one way this test could run its full 30 s,
    # as it did once; under nohup every SIGHUP case failed). A terminal's Ctrl-C and a closed
    # terminal's hangup find the default.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def test_ctrl_c_kills_and_reaps_every_child():
    proc = subprocess.Popen([SCHEDLAB, "os", "--clients", "4", "--size", "det:100000",
                             "--time", "30000", "--quiet-wait", "0"], env=cli_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_signals)
    workers: list[int] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(workers) < 4:
        launchers = _children(proc.pid)
        workers = [w for launcher in launchers for w in _children(launcher)]
        time.sleep(0.1)
    assert len(workers) == 4, "the run did not start"
    launcher = _children(proc.pid)[0]
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 4, err
    assert "killed and reaped" in err
    for pid in workers + [launcher]:
        assert not Path(f"/proc/{pid}").exists(), (pid, err)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _launchers(pid: int) -> list[int]:
    """The os launchers among `pid`'s children, by command line (the command may start
    short-lived probes first)."""
    return [c for c in _children(pid) if "launcher.py" in _cmdline(c)]


def _alive_after(pids: list[int], seconds: float) -> list[int]:
    """Those of `pids` still running (not zombies) after waiting up to `seconds` for all to
    end."""
    deadline = time.monotonic() + seconds
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if _running(p)]
        time.sleep(0.02)
    return alive


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        kids = _children(todo.pop())
        out += kids
        todo += kids
    return out


# Issue 15: the three kinds of os run whose processes hold real-time priority or stop others.
RUNS = {
    "kernel-fifo": ["--sched", "fifo", "--rtprio", "10"],
    "dispatcher-fifo": ["--policy", "rr", "--quantum", "5", "--enforce", "fifo"],
    "dispatcher-stop": ["--policy", "rr", "--quantum", "5", "--enforce", "stop"],
}


@pytest.mark.parametrize("run", list(RUNS))
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL],
                         ids=lambda s: signal.Signals(s).name)
def test_whatever_kills_the_command_kills_the_run(sig, run):
    # Issue 15: a closed terminal, `timeout`, systemd or kill -9 used to leave the launcher and
    # real-time workers running to their own end. The launcher now dies with the command
    # (PR_SET_PDEATHSIG), the dispatcher and the workers with the launcher; Ctrl-C is handled
    # by the command itself. Nothing of the run may be alive 2 s after the signal.
    if "fifo" in run:
        need("fifo")
    proc = subprocess.Popen([SCHEDLAB, "os", "--clients", "2", "--size", "det:100000",
                             *RUNS[run], "--time", "30000", "--quiet-wait", "0"],
                            env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=_default_signals)
    workers: list[int] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(workers) < 2:
        launchers = _children(proc.pid)
        workers = [w for launcher in launchers for w in _children(launcher)]
        time.sleep(0.1)
    assert len(workers) >= 2, "the run did not start"
    time.sleep(0.3)  # into the run: the dispatcher has made its first decisions
    run_processes = _descendants(proc.pid)
    if sig == signal.SIGKILL:
        # The real-time coordinator (launcher, dispatcher) runs under a short RLIMIT_RTTIME:
        # a hang of 1 s without blocking stops it, and its workers with it.
        launcher = _launchers(proc.pid)[0]
        limits = Path(f"/proc/{launcher}/limits").read_text()
        line = next(x for x in limits.splitlines() if x.startswith("Max realtime timeout"))
        assert line.split()[3:5] == ["1000000", "2000000"], line
    proc.send_signal(sig)
    alive = _alive_after(run_processes, 2)
    assert not alive, f"{run}: alive 2 s after {signal.Signals(sig).name}: {alive}"
    proc.communicate(timeout=30)


# Issue 15's fault injection: a signal to a process *inside* the run (the launcher, which runs
# the coordinator and the dispatcher, or one worker), at a moment drawn at random (seeded: the
# case's id gives its seed) in one of two phases: while the workers are being started, or in
# the middle of the run.
FAULTS = [(target, sig) for target in ("launcher", "worker")
          for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL)]


@pytest.mark.parametrize(("target", "sig"), FAULTS,
                         ids=[f"{t}-{signal.Signals(s).name}" for t, s in FAULTS])
def test_a_signal_inside_the_run_leaves_nothing_behind(target, sig):
    need("fifo")
    rng = random.Random(f"{target}-{int(sig)}")
    phase = rng.choice(["start", "middle"])
    proc = subprocess.Popen([SCHEDLAB, "os", "--clients", "2", "--size", "det:100000",
                             "--policy", "rr", "--quantum", "5", "--enforce", "fifo",
                             "--time", "5000", "--quiet-wait", "0"], env=cli_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_signals)
    deadline = time.monotonic() + 20
    launcher, workers = None, []
    while time.monotonic() < deadline:
        launchers = _launchers(proc.pid)
        launcher = launchers[0] if launchers else None
        workers = _children(launcher) if launcher else []
        if (phase == "start" and (workers if target == "worker" else launcher)) or \
                len(workers) == 2:
            break
        time.sleep(0.01)
    assert launcher is not None, "the run did not start"
    time.sleep(rng.uniform(0, 0.05) if phase == "start" else rng.uniform(0.3, 1.5))
    run_processes = _descendants(proc.pid)
    # The victim as it is now (the list above may be a moment old).
    victims = [launcher] if target == "launcher" else _children(launcher)
    assert victims, f"{target}: none alive to signal"
    os.kill(victims[0], sig)
    _, err = proc.communicate(timeout=30)
    alive = _alive_after(run_processes, 2)
    case = f"{target} {signal.Signals(sig).name} at {phase}"
    assert not alive, f"{case}: alive 2 s after the command ended: {alive}"
    # What the user sees: an answer, never a traceback; a killed worker is reported as such
    # and the run otherwise completes.
    assert "Traceback" not in err, (case, err)
    if target == "worker":
        assert proc.returncode == 0, (case, err)
    else:
        assert proc.returncode != 0 and err.strip(), (case, err)
        assert len(err.strip().splitlines()) <= 3, (case, err)


def test_run_until_precise_stops_when_precise_or_at_max_time():
    # Two closed-loop processes of 2 ms jobs, thinking 4 ms on average, on one CPU: the
    # coordinator reads their job records every 50 ms and stops them once the mean response
    # is known to 2% (the simulator's rule), or at max_time.
    spec = {"clients": 2, "size": "det:2", "think": "exp:4", "cpus": 1, "jobs": 200,
            "seed": 3, **QUIET}
    for bad, key in (({"precision": 0.02}, "precision"), ({"max_time": 9}, "max_time"),
                     ({"precision": 0.02, "max_time": 9, "time": 9}, "time"),
                     ({"precision": 2, "max_time": 9}, "precision"),
                     ({"precision": 0.02, "max_time": 9, "batch": 2, "clients": None}, "precision"),
                     ({"max_jobs": 9, "precision": 0.02, "max_time": 9}, "max_jobs")):
        given = {k: v for k, v in {**spec, **bad}.items() if v is not None}
        with pytest.raises(SpecError) as e:
            os_world.run(given)
        assert e.value.key == key, (bad, e.value)
    # Under the user-space dispatcher, too tight for the cap: it stops at max_time, says so.
    capped = osrun.run({**spec, "policy": "rr", "quantum": 1, "precision": 0.0001,
                        "max_time": 1500}).summary
    assert capped["precision_reached"] is False and capped["stopped_by_time"]
    assert not capped["stopped_precise"] and capped["response_mean_precision"] > 0.0001
    assert 1400 <= capped["contended_ms"] < 2500
    # Others on the CPU stretch the responses for seconds: the batch means are correlated look
    # after look (46% of the CPU taken by another run: 0.14-0.24 at the cap, 3 runs of 3), so
    # the run waits for a quiet machine and is retried when it was not one.
    r = osrun.run({**spec, "precision": 0.02, "max_time": 20_000, "quiet_wait": 2000,
                   "retry_noisy": 2})
    s = r.summary
    if s["noisy"] and not s["stopped_precise"]:
        assert s["stopped_by_time"] and s["precision_reached"] is False
        pytest.skip(f"a run until precise not judged on a noisy machine: {s['noise_reasons']}")
    assert s["precision"] == 0.02 and s["precision_reached"] is True
    assert s["stopped_precise"] and not s["stopped_by_time"] and s["contended_end"] == "precise"
    assert s["response_mean_precision"] <= 0.02 and s["jobs"] >= 200
    # It measures the jobs up to the one that met the rule (replayed over the job table in
    # completion order), not the ones that completed while the coordinator stopped the
    # workers (up to its 50 ms between looks): its interval is the one the rule stopped on.
    # Measured with them, one run stopped at 2% reported precision_reached = false.
    done = r.jobs.sort_values("completion", kind="stable")["response"].to_numpy(dtype=float)
    assert s["jobs"] == _core.precise_prefix(np.ascontiguousarray(done), 0.02, 200)
    lo, hi = s["response_mean_ci"]
    assert (hi - lo) / 2 <= 0.02 * s["response_mean"]
    # About 300 jobs/s: precise after 850-1,500 jobs (3-5 s in 12 runs), before the 20 s cap.
    assert s["contended_ms"] < 15_000


def test_the_kernels_trace_names_the_path_of_each_move():
    """trace_migrations: the workers' moves from the kernel's own trace (sched_migrate_task)
    agree with its per-task counter (se.nr_migrations, read from /proc at the start and the
    end) and with every placement sample (/proc/<pid>/stat), and each carries the path that
    made it: the pinned start's own moves are affinity moves, the first move after the
    release is CPU 1's balance (periodic or newly-idle)."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs")
    spec = {"clients": 5, "size": "det:250", "think": "det:0", "time": 1000, "cpus": 2,
            "start_pinned": [0], "release_after": 200, "load_sample": 10,
            "trace_migrations": True, **QUIET}
    r = osrun.run(spec)
    # In 2 runs of about 110 the trace lacked a move the counter has (tests/test_ktrace.py):
    # the run says how many, and a second run is taken; the checks below hold for it.
    assert unitless(r.summary) == set()  # the trace's numbers among them
    counted = r.tasks.set_index("task")["migrations"]
    traced = r.migrations[r.migrations["time"] >= 0].groupby("task").size()
    assert r.summary["moves_missed"] == sum(max(int(n) - int(traced.get(t, 0)), 0)
                                            for t, n in counted.items())
    if r.summary["moves_missed"]:
        assert r.summary["first_move_path"] is None and r.summary["first_move_tasks"] == 0
        r = osrun.run(spec)
    m, s = r.migrations, r.summary
    assert s["moves_missed"] == 0
    assert list(m.columns) == ["time", "task", "from_cpu", "to_cpu", "path", "running",
                               "running_pid"]
    assert ((m["running"] == "idle") == (m["running_pid"] == 0)).all()
    assert (m["from_cpu"] != m["to_cpu"]).all() and set(m["task"]) <= set(range(5))
    assert r.environment["kernel_trace"] == {"moves": len(m), "lost": 0}
    # The trace against the kernel's counter: the same moves, task by task, over the run.
    traced = m[m["time"] >= 0].groupby("task").size().reindex(range(5), fill_value=0)
    counted = r.tasks.set_index("task")["migrations"].astype(int)
    assert traced.tolist() == counted.tolist(), (traced.tolist(), counted.tolist())
    assert counted.sum() >= 2  # the release moved some of them
    # The trace against the samples: each sample's CPU is where the last move before it left
    # the task (or, before any move, where its first one took it from); a move within
    # 0.1 ms of a sample may fall on either side of it.
    checked = 0
    for task, samples in r.placement.groupby("task"):
        moves = m[m["task"] == task]
        times, dests = moves["time"].to_numpy(), moves["to_cpu"].to_numpy()
        for t, cpu in zip(samples["t"], samples["cpu"], strict=True):
            before = times <= t
            where = dests[before][-1] if before.any() else \
                (moves["from_cpu"].iloc[0] if len(moves) else cpu)
            near = np.abs(times - t) < 0.1
            assert cpu == where or cpu in dests[near] or cpu in moves["from_cpu"][near].values, \
                (task, t, cpu, where)
            checked += 1
    assert checked >= 5 * 90
    # Paths: before the start each worker pins itself to CPU 0, the stopper moving it there
    # (between its fork and its pin a newly-idle balance may take it once: 2 runs of 10), so
    # every task's last move before the start is to CPU 0, and the pin's moves are affinity
    # moves; after the release every move is the kernel's own, and the first took a task to
    # CPU 1 (by its idle or newly-idle balance, or its busy balance if it was running
    # something else then).
    pre = m[m["time"] < 0]
    assert (pre.groupby("task")["to_cpu"].last() == 0).all(), pre.to_string()
    assert (pre[pre["path"] == "affinity"]["to_cpu"] == 0).all()
    assert (pre["path"] != "other").all(), pre.to_string()
    after = m[m["time"] >= 200]
    assert not after["path"].isin(["affinity", "other"]).any(), after.to_string()
    assert s["first_move_path"] in ("idle balance", "newly-idle balance", "busy balance"), s
    assert after.iloc[0]["to_cpu"] == 1 and 0 <= s["first_move"] < 800
    assert 1 <= s["first_move_tasks"] <= 3 and s["moves"] == len(m)
    if s["first_move_path"] == "newly-idle balance":
        assert s["first_move_tasks"] == 1  # a newly-idle pull takes one task
    # No instance of the trace is left behind.
    assert not list(Path("/sys/kernel/tracing/instances").glob(f"schedlab-{os.getpid()}-*"))


def test_a_trace_left_by_a_killed_run_is_removed_by_the_next():
    """A run killed with SIGKILL cannot remove its tracefs instance (a ring buffer per CPU):
    the next traced run removes every schedlab instance whose process is gone, and no other."""
    instances = Path("/sys/kernel/tracing/instances")
    dead = _a_dead_pid()
    stale, alive = instances / f"schedlab-{dead}-0", instances / f"schedlab-{os.getpid()}-999"
    stale.mkdir()
    alive.mkdir()
    try:
        osrun.run({"clients": 1, "jobs": 1, "size": 1, "cpus": [0], "trace_migrations": True,
                   **QUIET})
        assert not stale.exists() and alive.exists()
    finally:
        for inst in (stale, alive):
            if inst.exists():
                inst.rmdir()


def _a_dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_trace_migrations_is_refused_where_the_kernel_has_no_trace():
    for bad, allowed in ((["tracefs"], "tracefs mounted"), (None, "true or false")):
        spec = {"clients": 1, "jobs": 1, "trace_migrations": True if bad else "yes"}
        if bad:
            spec["pretend_missing"] = bad
        with pytest.raises(SpecError) as e:
            osrun.validate(spec)
        assert e.value.key == "trace_migrations" and allowed in e.value.allowed


def test_bad_keys_name_the_key_and_exit_2():
    with pytest.raises(SpecError) as e:
        osrun.run({"clients": 1, "jobs": 1, "sched": "fifo"})
    assert e.value.key == "rtprio"
    with pytest.raises(SpecError) as e:
        os_world.run({"clients": 1, "jobs": 1, "arrival": "exp:10"})
    assert e.value.key == "arrival" and "closed loops" in e.value.allowed
    with pytest.raises(SpecError) as e:
        osrun.run({"jobs": 1, "classes": [{"clients": 1, "io": "disk:5"}]})
    assert e.value.key == "classes[0].io"
    out = subprocess.run([SCHEDLAB, "os", "--clients", "1", "--jobs", "1", "--sched", "bogus"],
                         env=cli_env(), capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "sched = bogus" in out.stderr


def test_launcher_refuses_to_fork_from_a_threaded_process():
    import json
    import threading

    from schedlab import _core

    plan, _ = osrun.build_plan({"clients": 1, "jobs": 1, "size": 1})
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        reply = json.loads(_core.os_run(json.dumps(plan)))
    finally:
        stop.set()
        t.join()
    assert reply["error"]["kind"] == "failed" and "single-threaded" in reply["error"]["message"]


def test_environment_is_recorded():
    r = osrun.run({"clients": 1, "jobs": 1, "size": 5, "cpus": [0], **QUIET})
    env = r.environment
    for key in ("kernel_release", "kernel_cmdline", "hz", "preemption", "autogroup_enabled",
                "cpu_model", "workers_autogroups", "workers_cgroups", "noise", "rt_throttling"):
        assert key in env, key
    assert env["world"] == "os" and env["noise"]["foreign_cpu_ms"] >= 0
    assert "foreign_fraction" in r.summary and isinstance(r.summary["noisy"], bool)
    # The summary has the simulator's keys where they apply.
    sim_keys = set(schedlab.simulate("fcfs", load=0.5, jobs=10).summary)
    shared = {"policy", "jobs", "cpus", "seed", "response_mean", "response_p50", "response_p95",
              "response_p99", "wait_mean", "throughput", "context_switches", "migrations",
              "jain_share", "jain_slowdown", "utilization"}
    assert shared <= sim_keys and shared <= set(r.summary)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))

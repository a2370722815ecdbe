"""Multiprocessor scheduling against the equations of study 002 and queueing results.

Study 002 (Windows and Linux load balancing on SMP) derives, for n closed-loop tasks of
computation time tc with no think time on m CPUs, all started on CPU 0, with a timeslice TS
owned by the task:

- Linux.1.a: the balancer ends with ceil(n/m) tasks on (n mod m) CPUs and floor(n/m) on the
  others;
- Linux.1.b: a task on a CPU holding L tasks sees min(RT) = floor(tc/TS) * L * TS + (tc mod TS)
  and max(RT) = min(RT) + (L - 1) * TS, the latter once every TS / (tc mod TS) requests;
- Windows.1.a: CPU 0 keeps n - m + 1 tasks and every other CPU one;
- Windows.1.b: E[RT] = Load(onCpu) * tc;
- Linux.2.a: with think time tw < TS and tc > TS, E[RT] = tc * n / m - tw for n > m.

The tests check these for several (n, m, tc, TS), not only the study's 7 tasks on 2 CPUs.
"""

from __future__ import annotations

import json
import math
import subprocess

import numpy as np
import pytest
import schedlab
from conftest import SCHEDLAB, assert_conserved, cli_env

CASES = [(7, 2, 250, 100), (5, 2, 250, 100), (9, 3, 250, 100), (10, 4, 250, 100),
         (8, 3, 170, 50), (11, 4, 330, 100)]


def closed_pinned(n, m, tc, ts, balancer, think=0.0, cycles=120, **extra):
    """n tasks of tc ms each, all started on CPU 0; about `cycles` requests per task."""
    horizon = cycles * tc * math.ceil(n / m) * 1.0
    spec = dict(clients=n, size=f"det:{tc}", think=f"det:{think}", cpus=m, runqueues="per-cpu",
                balancer=balancer, timeslice=ts, start_pinned=0, time=horizon,
                warmup_time=horizon / 4, keep_jobs=True)
    spec.update(extra)
    return schedlab.simulate("rr", **spec)


def linux_loads(n, m):
    """Linux.1.a, sorted."""
    return sorted([math.ceil(n / m)] * (n % m) + [n // m] * (m - n % m))


def linux_peaks(load, tc, ts):
    """Linux.1.b: (min RT, max RT) on a CPU holding `load` tasks."""
    low = (tc // ts) * load * ts + tc % ts
    return low, low + (load - 1) * ts


def tasks_per_cpu(jobs):
    return jobs.groupby("cpu")["client"].nunique()


@pytest.mark.parametrize("balancer", ["linux", "linux26"])
@pytest.mark.parametrize(("n", "m", "tc", "ts"), CASES)
def test_linux_heavy_load_splits_evenly_and_peaks_follow_the_timeslice(n, m, tc, ts, balancer):
    r = closed_pinned(n, m, tc, ts, balancer)
    assert_conserved(r.summary, little_tolerance=0.05)
    per_cpu = tasks_per_cpu(r.jobs)
    assert sorted(per_cpu) == linux_loads(n, m)
    # Time-weighted runnable tasks per CPU over the measured interval: exactly the split.
    assert sorted(r.summary["runnable_mean_per_cpu"]) == pytest.approx(linux_loads(n, m))
    for cpu, jobs in r.jobs.groupby("cpu"):
        load = per_cpu[cpu]
        low, high = linux_peaks(load, tc, ts)
        values = np.round(jobs["response"].to_numpy(), 6)
        assert set(values) <= {low, high}, (cpu, load, sorted(set(values)))
        if tc % ts:
            # max(RT) once every TS / (tc mod TS) requests.
            assert (values == high).mean() == pytest.approx((tc % ts) / ts, abs=0.05)


@pytest.mark.parametrize(("n", "m", "tc", "ts"), CASES)
def test_windows_heavy_load_keeps_the_initial_imbalance(n, m, tc, ts):
    r = closed_pinned(n, m, tc, ts, "windows")
    per_cpu = tasks_per_cpu(r.jobs)
    assert per_cpu[0] == n - m + 1  # Windows.1.a
    assert all(per_cpu[c] == 1 for c in range(1, m))
    for cpu, jobs in r.jobs.groupby("cpu"):
        # Windows.1.b: E[RT] = Load * tc (the mean of the two timeslice peaks).
        assert jobs["response"].mean() == pytest.approx(per_cpu[cpu] * tc, rel=0.02)
    alone = r.jobs[r.jobs["cpu"] > 0]["response"]
    assert (alone == tc).all()


@pytest.mark.parametrize("balancer", ["linux", "linux26"])
@pytest.mark.parametrize(("n", "m"), [(7, 2), (9, 2), (10, 3), (13, 4)])
def test_linux_moderate_load_mean_follows_equation_2a(n, m, balancer):
    tc, ts, tw = 250, 100, 10
    r = closed_pinned(n, m, tc, ts, balancer, think=tw, cycles=300, keep_jobs=False)
    expected = tc * n / m - tw  # Linux.2.a
    assert r.summary["response_mean"] == pytest.approx(expected, rel=0.05)
    # Every task gets the same service in the long run: its mean response barely varies.
    assert r.summary["task_response_cv"] < 0.05


def test_study_example_command_line(tmp_path):
    """The command of the issue, with the per-job file it writes."""
    from schedlab.cli import main

    out = tmp_path / "jobs.csv"
    code = main(["sim", "--clients", "7", "--size", "det:250", "--think", "det:0", "--cpus", "2",
                 "--runqueues", "per-cpu", "--balancer", "linux", "--timeslice", "100",
                 "--start-pinned", "0", "--policy", "rr", "--time", "60000",
                 "--warmup-time", "10000", "--jobs-out", str(out), "--json"])
    assert code == 0
    import pandas as pd

    jobs = pd.read_csv(out)
    assert sorted(np.unique(jobs["response"].round(6))) == [650, 850, 1150]


def test_pinned_start_load_series_shows_the_balancing():
    r = schedlab.simulate("rr", clients=7, size="det:250", think="det:0", cpus=2,
                          runqueues="per-cpu", balancer="linux", timeslice=100, start_pinned=0,
                          time=5000, load_sample=50)
    series = r.load_series
    first = series[series["time"] == 0]
    # Sampled before the tasks start: nothing runnable yet.
    assert list(first["runnable"]) == [0, 0]
    late = series[series["time"] >= 1000].groupby("cpu")["runnable"].agg(["min", "max"])
    assert list(late["min"]) == [4, 3] and list(late["max"]) == [4, 3]
    # The load distribution table: time shares of each CPU sum to one.
    loads = r.loads
    assert loads.groupby("cpu")["time_share"].sum().to_numpy() == pytest.approx([1.0, 1.0])


def test_a_runqueue_of_more_than_255_jobs_is_counted_exactly():
    # A batch of 1,000 unit jobs on one CPU: n jobs are runnable for one ms each, n = 1000..1,
    # so the mean is 500.5 and every count holds 1/1000 of the time. The load histogram had
    # 256 bins and put 255 or more in the last, which made the mean 222.6 (the report's
    # "runnable jobs" bar at 1,000 processes).
    r = schedlab.simulate("fcfs", clients=1000, jobs=1000, think="det:0", size="det:1")
    assert r.summary["runnable_mean_per_cpu"] == pytest.approx([500.5], rel=1e-12)
    assert r.summary["mean_in_system"] == pytest.approx(500.5, rel=1e-12)
    loads = r.loads
    assert list(loads["runnable"]) == list(range(1, 1001))
    assert loads["time_share"].to_numpy() == pytest.approx(np.full(1000, 0.001), rel=1e-9)
    # Each job leaves when it is the oldest of n runnable: one completion at each count.
    assert loads["completion_share"].to_numpy() == pytest.approx(np.full(1000, 0.001))


def test_time_to_balance_is_the_first_balanced_sample():
    # The linux balancer's idle CPU pulls 3 of the 7 tasks at once: 4/3 at the first sample
    # with anything runnable (10 ms; the sample at 0 precedes the first arrivals), and stays.
    spec = dict(clients=7, size="det:250", think="det:0", cpus=2, runqueues="per-cpu",
                timeslice=100, start_pinned=0, time=2000, load_sample=10)
    s = schedlab.simulate("rr", balancer="linux", **spec).summary
    assert s["time_to_balance"] == 10.0
    assert s["load_distribution"] == [4.0, 3.0] and s["load_distribution_start"] == []
    # 200 samples after the release at 0 (0..2000 ms): only the empty one at 0 is unbalanced.
    assert s["balanced_fraction"] == pytest.approx(200 / 201)
    # Windows-like balancing keeps 6/1 (Windows.1.a): never balanced.
    w = schedlab.simulate("rr", balancer="windows", **spec).summary
    assert math.isnan(w["time_to_balance"]) and w["balanced_fraction"] == 0.0
    assert w["load_distribution"] == [6.0, 1.0]
    # No samples, or one global queue: nothing to say.
    g = schedlab.simulate("rr", clients=3, size="det:10", cpus=2, time=100, load_sample=10)
    assert math.isnan(g.summary["time_to_balance"]) and g.summary["load_distribution"] == []


def test_release_after_holds_the_pin_then_each_balancer_notices_at_its_pass():
    """`release_after`: nothing runs off CPU 0 before it; then the balancer moves work at its
    next pass. Linux 2.6.22's idle CPU found every task pinned elsewhere for 200 ms, so its
    interval doubled past max_interval toward MAX_PINNED_INTERVAL: passes at 1.5, 3.5, 7.5,
    ..., 127.5 and 255.5 ms (intervals 1, 2, 4, ..., 128), the last one moves 3 tasks and the
    sample at 260 ms is the first balanced one. The modern-like linux balancer's idle CPU
    doubled its interval up to its maximum, 128 ms, the same way."""
    spec = dict(clients=7, size="det:250", think="det:0", cpus=2, runqueues="per-cpu",
                timeslice=100, start_pinned=0, release_after=200, time=1000, load_sample=10,
                keep_schedule=True)
    old = schedlab.simulate("rr", balancer="linux26", **spec)
    seg = old.schedule
    assert seg[seg["cpu"] == 1]["start"].min() >= 200
    s = old.summary
    assert s["time_to_balance"] == 60.0 and s["load_distribution"] == [4.0, 3.0]
    # Before the release: the sample at 0 (nothing yet), then 7/0 every 10 ms.
    assert s["load_distribution_start"] == pytest.approx([7 * 19 / 20, 0.0])
    new = schedlab.simulate("rr", balancer="linux", **spec).summary
    assert 10.0 < new["time_to_balance"] <= 130.0
    with pytest.raises(schedlab.SpecError, match="release_after.*start_pinned"):
        schedlab.simulate("rr", clients=2, cpus=2, runqueues="per-cpu", release_after=5,
                          time=10)


def test_ideal_processors_are_their_own_key():
    """Study 002's moderate load under Windows-like balancing. With `ideal = "start"` (the
    default) the pinned start makes CPU 0 every task's ideal processor, so waking tasks queue
    there (6/1 on the runqueues); with round-robin ideal processors (Windows at thread
    creation) tasks started on CPU 0 drift to their ideal CPUs: 4/3, as Linux.1.a; with a list
    naming CPU 1 for everyone, they gather there."""
    spec = dict(clients=7, size="det:250", think="uniform:9,11", cpus=2, runqueues="per-cpu",
                balancer="windows", timeslice=100, start_pinned=0, time=30000,
                warmup_time=10000)
    start = schedlab.simulate("rr", **spec).summary["runnable_mean_per_cpu"]
    rr = schedlab.simulate("rr", ideal="round-robin", **spec).summary["runnable_mean_per_cpu"]
    ones = schedlab.simulate("rr", ideal=[1], **spec).summary["runnable_mean_per_cpu"]
    assert start[0] > 5.5 and start[1] == pytest.approx(1.0, abs=0.05)
    assert rr == pytest.approx([3.96, 2.96], abs=0.03)
    assert ones[1] > 5.5 and ones[0] == pytest.approx(1.0, abs=0.05)
    # Every spelling of a CPU key: one CPU, its text, CPUs as text (the command line's).
    for same in (1, "1", "1-1"):
        again = schedlab.simulate("rr", ideal=same, **spec).summary["runnable_mean_per_cpu"]
        assert again == ones, same
    cli = subprocess.run([SCHEDLAB, "sim", "--policy", "rr", "--clients", "7", "--size",
                          "det:250", "--think", "uniform:9,11", "--cpus", "2", "--runqueues",
                          "per-cpu", "--balancer", "windows", "--timeslice", "100",
                          "--start-pinned", "0", "--time", "30000", "--warmup-time", "10000",
                          "--ideal", "0,1", "--json"], capture_output=True, text=True,
                         timeout=120, env=cli_env())
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["runnable_mean_per_cpu"] == schedlab.simulate(
        "rr", ideal=[0, 1], **spec).summary["runnable_mean_per_cpu"]
    # Heavy load: tasks never wake, so their ideal CPUs never matter (Windows.1.a holds).
    r = closed_pinned(7, 2, 250, 100, "windows", ideal="round-robin", load_sample=50)
    assert r.summary["load_distribution"] == [6.0, 1.0]


@pytest.mark.parametrize(("value", "allowed"), [
    ("sideways", "start, round-robin, or a list of CPU numbers"),
    ([0, 2], "CPU numbers from 0 to 1"),
    ("0-7", "CPU numbers from 0 to 1"),
    ("1-0", "start, round-robin, or a list of CPU numbers"),
])
def test_ideal_refuses_what_it_cannot_place(value, allowed):
    with pytest.raises(schedlab.SpecError, match="ideal") as e:
        schedlab.simulate("rr", clients=2, cpus=2, runqueues="per-cpu", ideal=value, time=10)
    assert allowed in str(e.value)
    with pytest.raises(schedlab.SpecError, match="ideal.*runqueues = per-cpu"):
        schedlab.simulate("rr", clients=2, cpus=2, ideal="round-robin", time=10)


def test_without_a_balancer_pinned_tasks_stay():
    r = closed_pinned(4, 2, 100, 50, "none", cycles=20)
    assert set(r.jobs["cpu"]) == {0}
    assert r.summary["utilization_per_cpu"][1] == 0


def test_steal_fills_idle_cpus_but_does_not_equalise_queues():
    # Idle CPUs 1 and 2 each steal one job at the start and never run dry again (no think
    # time), so the work is spread only as far as idleness demands: 4/1/1.
    r = closed_pinned(6, 3, 100, 50, "steal", cycles=60)
    assert min(r.summary["utilization_per_cpu"]) > 0.99
    assert sorted(tasks_per_cpu(r.jobs)) == [1, 1, 4]
    # With think time a CPU whose task sleeps runs dry and steals again: jobs keep moving,
    # and the CPUs stay busy although every waking task returns to CPU 0, its ideal CPU.
    r = closed_pinned(6, 3, 100, 50, "steal", think=30, cycles=200)
    assert r.summary["migrations"] > 100
    assert min(r.summary["utilization_per_cpu"]) > 0.9


def test_a_task_that_wakes_on_another_cpu_takes_its_policy_state_along(tmp_path):
    """Waking on another CPU's runqueue is a migration: the runqueue the task slept on hands
    over what its policy keeps (here MLFQ's level). Hand-computed: MLFQ with quanta 1 and 10
    and a top allotment of 1, 2 CPUs with their own runqueues, joining the shortest queue.
    x (two bursts of 5 ms, 1 ms of I/O between) runs 0-1 at the top and 1-5 at level 1 on one
    CPU; z takes that CPU at 5.5; x wakes at 6 on the hog's CPU, still at level 1, so it does
    not preempt the hog (level 1 since 1, in a 10 ms slice to 11) and runs 11-16. Starting
    afresh at the top there, it would have preempted the hog at 6."""
    trace = tmp_path / "t.csv"
    trace.write_text("arrival,size,class\n0,100,hog\n0,10,x\n5.5,20,z\n")
    r = schedlab.simulate(policy="mlfq", quanta=[1, 10], allotment=[1, 40], trace=str(trace),
                          cpus=2, runqueues="per-cpu", placement="jsq", io_device="delay",
                          classes=[{"name": "hog"}, {"name": "x", "bursts": 2, "io": "det:1"},
                                   {"name": "z"}],
                          keep_jobs=True, keep_schedule=True)
    seg = r.schedule
    x, hog = seg[seg.job == 1], seg[seg.job == 0]
    hog_cpu = int(hog.cpu.iloc[0])
    assert [(int(c), s, e) for c, s, e in zip(x.cpu, x.start, x.end, strict=True)] == \
        [(1 - hog_cpu, 0.0, 1.0), (1 - hog_cpu, 1.0, 5.0), (hog_cpu, 11.0, 16.0)]
    assert (hog_cpu, 1.0, 11.0) in set(zip(hog.cpu, hog.start, hog.end, strict=True))
    assert r.jobs.set_index("job").loc[1, "completion"] == 16.0


@pytest.mark.parametrize("policy", ["gps", "ps", "fb"])
def test_fluid_runqueues_are_balanced_like_turn_based_ones(policy):
    """Four endless tasks started on CPU 0 of 2: a fluid per-CPU runqueue serves all four at
    once, and the balancers must see them to move them (they did not: CPU 1 stayed idle).
    Linux balancers split them 2/2 (each task half a CPU: 5,000 of 10,000 ms); `steal` and
    `windows` pull one to the idle CPU (one task 10,000 ms, three 3,333.3); without a
    balancer they stay (2,500 each, CPU 1 idle), as RR does in every case."""
    spread = {"none": [2500.0] * 4, "linux": [5000.0] * 4, "linux26": [5000.0] * 4,
              "steal": [10000.0] + [10000.0 / 3] * 3, "windows": [10000.0] + [10000.0 / 3] * 3}
    for balancer, expected in spread.items():
        for p in (policy, "rr"):
            r = schedlab.simulate(p, clients=4, size="det:1e9", think="det:0", cpus=2,
                                  runqueues="per-cpu", balancer=balancer, start_pinned=0,
                                  time=10000.0, seed=1, **({"quantum": 1} if p == "rr" else {}))
            got = sorted(r.tasks["service"], reverse=True)
            assert got == pytest.approx(sorted(expected, reverse=True), abs=2.0), (p, balancer)
            assert r.summary["utilization"] == pytest.approx(
                0.5 if balancer == "none" else 1.0, abs=1e-3), (p, balancer)


def test_a_fluid_jobs_migrations_are_counted_and_its_service_is_the_cpus_busy_time():
    """Tasks that think and wake on either CPU under PS on per-CPU runqueues: every ms a CPU
    was busy is a ms some task received (the service was short of it when a job moved: what
    it had received before the move was lost), and moves are counted as under RR."""
    for policy in ("gps", "rr"):
        r = schedlab.simulate(policy, clients=6, size="exp:10", think="exp:10", cpus=2,
                              runqueues="per-cpu", balancer="linux", time=20000.0, seed=1,
                              **({"quantum": 1} if policy == "rr" else {}))
        s = r.summary
        busy = sum(s["utilization_per_cpu"]) * s["makespan"]
        assert r.tasks["service"].sum() == pytest.approx(busy, abs=2.0), policy
        assert s["migrations"] > 300, policy
        assert r.tasks["migrations"].sum() >= s["migrations"], policy


def test_a_job_moved_before_it_ran_keeps_the_wait_it_had_queued(tmp_path):
    # Four jobs at 0 dealt round robin to 2 CPUs: CPU 0 gets A (1) and C (1), CPU 1 B (10)
    # and D (1). CPU 0 runs A 0-1, C 1-2, then pulls D from behind B and runs it 2-3: D
    # waited 2 (queued on CPU 1 from 0, then on CPU 0), not 0 from the move. Mean wait
    # (0 + 0 + 1 + 2) / 4 = 0.75.
    trace = tmp_path / "pc.csv"
    trace.write_text("arrival,size\n0,1\n0,10\n0,1\n0,1\n")
    r = schedlab.simulate("fcfs", trace=str(trace), cpus=2, runqueues="per-cpu",
                          placement="rr", balancer="linux", keep_jobs=True)
    jobs = r.jobs.set_index("job")
    assert (jobs.loc[3, "cpu"], jobs.loc[3, "first_run"], jobs.loc[3, "wait"]) == (0, 2.0, 2.0)
    assert r.summary["wait_mean"] == 0.75
    # Without I/O or costs a job is waiting or running: response = size + wait, job by job,
    # under every balancer and policy (the wait lost 7-14% of its mean to moves).
    for policy in ("fcfs", "rr", "cfs", "eevdf"):
        for balancer in ("linux", "windows", "steal"):
            r = schedlab.simulate(policy, load=0.8, size="exp:1", cpus=2, jobs=20_000,
                                  runqueues="per-cpu", balancer=balancer, keep_jobs=True)
            j = r.jobs
            gap = (j["response"] - j["size"] - j["wait"]).abs().max()
            assert gap < 1e-9, (policy, balancer, gap)
            assert r.summary["wait_mean"] == pytest.approx(
                (j["response"] - j["size"]).mean(), rel=1e-12)

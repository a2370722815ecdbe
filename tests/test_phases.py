"""Tasks with phases (CPU bursts and I/O waits), wake-up boosts, affinity and migration cost.

Schedules are worked out by hand in the comments; ties go to the job queued first.
"""

from __future__ import annotations

import pytest
import schedlab
from conftest import assert_conserved


def segments(result) -> list[tuple[int, float, float]]:
    return [(int(r.job), float(r.start), float(r.end)) for r in result.schedule.itertuples()]


def completions(result) -> dict[int, float]:
    return dict(zip(result.jobs["job"].astype(int), result.jobs["completion"], strict=True))


def test_bursts_are_separated_by_io(write_trace):
    # Size 10 in 2 bursts of 5 with 5 of I/O between: runs [0,5], waits [5,10], runs [10,15].
    trace = write_trace("arrival,size", [(0, 10)])
    r = schedlab.simulate("fcfs", trace=trace, bursts=2, io="det:5", keep_schedule=True)
    assert segments(r) == [(0, 0, 5), (0, 10, 15)]
    assert r.jobs["response"].tolist() == [15]
    assert r.jobs["wait"].tolist() == [0]  # the I/O is neither service nor waiting for a CPU
    assert_conserved(r.summary, little_tolerance=1e-9)


@pytest.mark.parametrize(("device", "expected"), [("delay", {0: 7, 1: 9}),
                                                 ("fcfs", {0: 7, 1: 10})])
def test_io_device_delay_or_fcfs(write_trace, device, expected):
    # Two jobs of 4 in bursts of 2, I/O of 3, one CPU, FCFS.
    # Job 0 runs [0,2], I/O [2,5], runs [5,7]. Job 1 runs [2,4]; its I/O is [4,7] with a pure
    # delay, then it runs [7,9]; with one FCFS device it waits for job 0's I/O, [5,8], and
    # runs [8,10].
    trace = write_trace("arrival,size", [(0, 4), (0, 4)])
    r = schedlab.simulate("fcfs", trace=trace, bursts=2, io="det:3", io_device=device,
                          keep_schedule=True)
    assert completions(r) == expected


def test_sleeping_tasks_pass_their_entitlement_to_the_runnable_ones():
    """Study 004's trap: an I/O-bound task does not want its share. Lottery with equal tickets:
    a CPU-bound task and a task that computes 1 and sleeps 9 per cycle. Entitlement counts only
    while a task is runnable, so both receive what they are entitled to."""
    classes = [{"name": "cpu", "clients": 1, "size": "det:1000000", "tickets": 1},
               {"name": "io", "clients": 1, "size": "det:1", "think": "det:9", "tickets": 1}]
    r = schedlab.simulate("lottery", quantum=1, classes=classes, time=100_000, seed=2)
    shares = r.tasks.set_index("class")
    # The I/O task runs about 1 in 10 time units (a little more while it waits its turn).
    assert 0.07 < shares.loc["io", "share"] < 0.1
    assert shares["share_ratio"].tolist() == pytest.approx([1.0, 1.0], abs=0.05)
    assert r.summary["jain_share"] > 0.99


def test_windows_boost_lets_a_waking_io_task_preempt(write_trace):
    # Equal base priority 8, quantum 20. Job 0 is CPU-bound (100); job 1 computes 1, waits 10
    # for the keyboard, computes 1. Job 0 runs [0,20]; job 1 [20,21], then I/O until 31; job 0
    # [21,41]. Without a boost job 1 waits for the quantum to end and runs [41,42]; with a
    # Windows boost (keyboard: 6 levels) its priority is 2 at wake-up and it preempts at 31.
    trace = write_trace("arrival,size,class", [(0, 100, "cpu"), (0, 2, "io")])
    classes = [{"name": "cpu", "priority": 8},
               {"name": "io", "priority": 8, "bursts": 2, "io": "det:10", "io_kind": "keyboard"}]
    plain = schedlab.simulate("priority", quantum=20, trace=trace, classes=classes,
                              keep_schedule=True)
    assert completions(plain)[1] == 42
    boosted = schedlab.simulate("priority", quantum=20, trace=trace, classes=classes,
                                boost="windows", keep_schedule=True)
    assert completions(boosted)[1] == 32
    assert segments(boosted)[:4] == [(0, 0, 20), (1, 20, 21), (0, 21, 31), (1, 31, 32)]


def test_linux26_bonus_favours_tasks_that_sleep():
    # A CPU hog and a task that sleeps 50 for each 5 of CPU, same static priority: with the
    # interactivity bonus the sleeper waits far less for the CPU after each wake-up.
    classes = [{"name": "hog", "clients": 2, "size": "det:1000000"},
               {"name": "sleeper", "clients": 1, "size": "det:5", "think": "det:50"}]
    spec = dict(quantum=10, classes=classes, time=200_000, keep_jobs=True)
    plain = schedlab.simulate("priority", **spec)
    bonus = schedlab.simulate("priority", boost="linux26", **spec)

    def sleeper_wait(r):
        return r.jobs[r.jobs["class"] == 1]["wait"].mean()

    assert sleeper_wait(plain) > 5  # behind the hogs' quanta
    assert sleeper_wait(bonus) < 0.1 * sleeper_wait(plain)


def test_affinity_keeps_a_class_on_its_cpus():
    classes = [{"name": "pinned", "clients": 4, "affinity": [1]}, {"name": "free", "clients": 4}]
    r = schedlab.simulate("rr", quantum=1, classes=classes, size="exp:5", think="exp:5", cpus=2,
                          runqueues="per-cpu", placement="jsq", balancer="linux", jobs=20_000,
                          keep_jobs=True)
    pinned = r.jobs[r.jobs["class"] == 0]
    assert set(pinned["cpu"]) == {1}
    assert set(r.jobs[r.jobs["class"] == 1]["cpu"]) == {0, 1}


def test_affinity_needs_per_cpu_runqueues():
    with pytest.raises(schedlab.SpecError) as e:
        schedlab.simulate("fcfs", cpus=2, clients=2, classes=[{"affinity": [1], "clients": 2}],
                          time=10)
    assert e.value.key == "classes[0].affinity"


def test_migration_cost_is_paid_once_per_migration():
    r = schedlab.simulate("rr", quantum=5, clients=6, size="det:20", think="det:3", cpus=3,
                          runqueues="per-cpu", balancer="steal", start_pinned=0,
                          migration_cost=0.5, jobs=3000)
    s = r.summary
    assert s["migrations"] > 50
    # No context-switch cost is set: all the overhead is cache refill after migrations.
    assert s["overhead_time"] == pytest.approx(0.5 * s["migrations"])
    assert_conserved(s, little_tolerance=0.05)

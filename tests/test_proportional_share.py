"""Lottery and stride: tickets 30/20/10 give CPU shares 50/33.3/16.7%.

Three closed-loop tasks that never finish their work stay runnable all run long, so every
instant is contended and the share is measured over that interval (the trap of study 004,
shares read after competitors left, cannot occur). Stride is deterministic: its service stays
within one quantum of the exact share at every point. Lottery is random: each quantum is a
draw, so its shares are within the binomial error of the ticket ratios.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import schedlab

TICKETS = [30, 20, 10]
SHARES = [t / sum(TICKETS) for t in TICKETS]
CLASSES = [{"name": n, "tickets": t, "clients": 1} for n, t in zip("ABC", TICKETS, strict=True)]


def run(policy: str, quanta: int, seed: int = 1):
    return schedlab.simulate(policy, quantum=1, clients=None, classes=CLASSES, size="det:1e9",
                             think="det:0", time=float(quanta), keep_schedule=True, seed=seed)


def test_stride_is_within_one_quantum_of_exact_at_every_point():
    r = run("stride", 30_000)
    seg = r.schedule.sort_values("end")
    assert (seg["end"] - seg["start"]).max() == pytest.approx(1.0)
    served = np.zeros(3)
    worst = 0.0
    for task, start, end in zip(seg["task"], seg["start"], seg["end"], strict=True):
        served[task] += end - start
        worst = max(worst, float(np.abs(served - np.array(SHARES) * end).max()))
    assert worst <= 1.0 + 1e-9, worst
    assert list(r.tasks["share"]) == pytest.approx(SHARES, abs=1 / 30_000 + 1e-12)
    assert list(r.tasks["entitled"]) == pytest.approx(SHARES, abs=1e-12)
    assert r.summary["jain_share"] == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_lottery_shares_are_within_binomial_error(seed):
    quanta = 60_000
    r = run("lottery", quanta, seed=seed)
    seg = r.schedule
    assert len(seg) == quanta  # one draw per quantum, nobody blocks
    counts = np.bincount(seg["task"], minlength=3)
    for got, p in zip(counts / quanta, SHARES, strict=True):
        sigma = math.sqrt(p * (1 - p) / quanta)
        assert abs(got - p) < 4 * sigma, (got, p, sigma)
    # The summary's per-task shares are the same measurement.
    assert list(r.tasks["share"]) == pytest.approx(list(counts / quanta), abs=1e-9)


# Entitlement: at every instant the runnable tasks split the CPUs by their policy's weight
# (tickets for lottery and stride, the weight for cfs, eevdf and gps), none above one CPU.


@pytest.mark.parametrize("policy, key", [("lottery", "tickets"), ("stride", "tickets"),
                                         ("cfs", "weight"), ("eevdf", "weight"),
                                         ("gps", "weight")])
def test_entitlement_follows_each_policys_weight(policy, key):
    # Weights 3:2:1 on one CPU, every task always runnable: entitled 1/2, 1/3, 1/6 exactly; the
    # CPU received follows it (lottery by draws, cfs and eevdf within their slices, stride
    # and gps exactly). Tickets or weights that the policy does not use weigh nothing: a
    # ticket holder under gps, or a weighted task under lottery, is entitled like the others.
    other = "weight" if key == "tickets" else "tickets"
    classes = [{"name": n, key: w, other: 7 - w, "clients": 1}
               for n, w in zip("ABC", (3, 2, 1), strict=True)]
    params = {"quantum": 1} if policy in ("lottery", "stride") else {}
    r = schedlab.simulate(policy, classes=classes, size="det:1e9", think="det:0",
                          time=60_000.0, seed=3, **params)
    t = r.tasks.set_index("class")
    assert list(t["entitled"]) == pytest.approx([1 / 2, 1 / 3, 1 / 6], abs=1e-12)
    tolerance = {"lottery": 0.01, "stride": 1e-4, "cfs": 1e-3, "eevdf": 1e-3, "gps": 1e-9}
    assert list(t["share"]) == pytest.approx([1 / 2, 1 / 3, 1 / 6], abs=tolerance[policy])
    assert r.summary["jain_share"] > 0.999


def test_entitlement_is_water_filled_over_the_cpus():
    # Tickets 30/20/10 on two CPUs: A would get 2 x 1/2 = one whole CPU, which is the most a
    # task can use, so A is entitled to one CPU and B and C split the other 2:1: still
    # 1/2, 1/3, 1/6 of the service. With 60/20/20 A is capped at one CPU (1/2), and B and C
    # get half a CPU each (1/4), not 1/5.
    for tickets, want in (((30, 20, 10), (1 / 2, 1 / 3, 1 / 6)), ((60, 20, 20), (1 / 2, 1 / 4,
                                                                            1 / 4))):
        classes = [{"name": n, "tickets": t, "clients": 1}
                   for n, t in zip("ABC", tickets, strict=True)]
        r = schedlab.simulate("lottery", quantum=1, balance=True, classes=classes, cpus=2,
                              size="det:1e9", think="det:0", time=20_000.0)
        t = r.tasks.set_index("class")
        assert list(t["entitled"]) == pytest.approx(want, abs=1e-12)
        assert list(t["share"]) == pytest.approx(want, abs=0.01)


def test_balance_reaches_the_capped_entitlement_of_study_004s_test_4():
    # 50,50 / 10,10 / 1,1,1,1 tickets, always runnable, one global lottery with balance. By
    # hand (a task runs on one CPU at a time): on 3 CPUs the 50s are capped at a CPU each
    # (2/3), the others share one CPU by tickets (20/24 and 4/24 of 1/3); on 4 CPUs 1/2,
    # 2/4 x 20/24, 2/4 x 4/24; on 5 CPUs the 10s are capped too: 2/5, 2/5, 1/5. Owing the 50s
    # their uncapped share left every lag at its bound: 50.0/38.2/11.8 on 4 CPUs.
    classes = [{"name": "A+B", "tickets": 50, "clients": 2},
               {"name": "C+D", "tickets": 10, "clients": 2},
               {"name": "E-H", "tickets": 1, "clients": 4}]
    want = {3: (2 / 3, 1 / 3 * 20 / 24, 1 / 3 * 4 / 24), 4: (1 / 2, 1 / 2 * 20 / 24,
                                                            1 / 2 * 4 / 24),
            5: (2 / 5, 2 / 5, 1 / 5)}
    for cpus, shares in want.items():
        r = schedlab.simulate("lottery", quantum=1, balance=True, compensation=False,
                              classes=classes, cpus=cpus, size="det:100", think="det:0",
                              time=10_000.0)
        by = r.tasks.groupby("class", sort=False)[["share", "entitled"]].sum()
        assert list(by["entitled"]) == pytest.approx(shares, abs=1e-9), cpus
        assert list(by["share"]) == pytest.approx(shares, abs=0.005), (cpus, by)


def test_a_task_owned_slice_keeps_every_thread_entitled():
    # Seven closed-loop threads of 250 ms jobs on one CPU, RR with a 100 ms slice owned by the
    # thread: a thread whose next request starts at once keeps its CPU and stays runnable, so
    # it stays entitled. Every thread gets 1/7 and is entitled to 1/7 (before the fix, the
    # threads that went on with their next job in place counted as not runnable: entitlements
    # from 0.101 to 0.221 and jain_share 0.946 for this perfectly fair schedule).
    r = schedlab.simulate("rr", clients=7, size="det:250", think="det:0", cpus=1,
                          timeslice=100, time=60_000.0)
    assert list(r.tasks["entitled"]) == pytest.approx([1 / 7] * 7, abs=1e-12)
    assert list(r.tasks["share"]) == pytest.approx([1 / 7] * 7, abs=0.002)
    assert r.summary["jain_share"] >= 0.999


@pytest.mark.parametrize("policy", ["gps", "ps", "fb", "stride"])
def test_a_fluid_tasks_service_before_the_measured_interval_is_not_counted(policy):
    """A hog beside a task that asks 100 ms every 2 s, measured after a warm-up: the window
    opens at the sleeper's arrival at 2,000 ms and ends at 3,000. By hand: the sleeper gets
    its 100 ms, the hog the other 900, and each its entitlement (share_ratio 1). A fluid
    runqueue credited a task's burst whole when it ended, warm-up included: the hog had 2,900
    ms in a 1,000 ms window, and jain_share 0.78 for a fair policy."""
    r = schedlab.simulate(policy, classes=[
        {"name": "hog", "clients": 1, "size": "det:1e9", "think": "det:0"},
        {"name": "sleeper", "clients": 1, "size": "det:100", "think": "det:2000"}],
        time=3000.0, warmup_time=1500.0, seed=1)
    s = r.summary
    assert (s["measure_start"], s["measure_end"]) == (2000.0, 3000.0)
    assert r.tasks["service"].tolist() == pytest.approx([900.0, 100.0], abs=1e-6)
    if policy in ("gps", "ps"):
        # Both served at once, half each while both are present: exactly their entitlement.
        # (FB serves the newcomer alone, stride in turns of its quantum.)
        assert r.tasks["share_ratio"].tolist() == pytest.approx([1.0, 1.0], abs=1e-9)
        assert s["jain_share"] == pytest.approx(1.0, abs=1e-9)


def test_shares_are_taken_over_the_contended_interval():
    """Study 004's trap (a share read after competitors left), by hand. RR with quantum 1 on
    one CPU, A asks 2 ms and B 4 ms, each one job: A runs [0, 1] and [2, 3] and finishes at 3,
    which ends the contended interval (as the os world's first task to finish its jobs does).
    Over [0, 3] A received 2 ms and B 1 ms, both entitled to half. Over the whole run (until
    this rule) B's lone last 3 ms counted: A 2 of 6, B 4 of 6, with B entitled to A's half
    once A had gone."""
    r = schedlab.simulate("rr", quantum=1, jobs=2, think="det:0", warmup=0, classes=[
        {"name": "a", "clients": 1, "size": "det:2"},
        {"name": "b", "clients": 1, "size": "det:4"}])
    s, t = r.summary, r.tasks
    assert (s["contended_ms"], s["contended_end"]) == (3.0, "task 0 finished its jobs")
    assert s["makespan"] == 6.0
    assert t["service"].tolist() == [2.0, 1.0]
    assert t["share"].tolist() == pytest.approx([2 / 3, 1 / 3], abs=1e-12)
    assert t["entitled"].tolist() == pytest.approx([0.5, 0.5], abs=1e-12)
    assert t["share_ratio"].tolist() == pytest.approx([4 / 3, 2 / 3], abs=1e-12)


@pytest.mark.parametrize("policy", ["ps", "gps"])
def test_a_fluid_runqueue_credits_what_it_served_until_the_contended_end(policy):
    """PS serves three jobs of 1, 2 and 3 ms at a third of the CPU each: the first ends at 3
    ms, when each has received 1 ms. The two still in the fluid are credited what they had by
    then, and nothing after (a fluid job is otherwise credited when its burst ends)."""
    r = schedlab.simulate(policy, jobs=3, think="det:0", warmup=0, classes=[
        {"name": n, "clients": 1, "size": f"det:{k}"} for k, n in enumerate("abc", start=1)])
    s, t = r.summary, r.tasks
    assert s["contended_ms"] == pytest.approx(3.0, abs=1e-12)
    assert s["contended_end"] == "task 0 finished its jobs"
    assert t["service"].tolist() == pytest.approx([1.0, 1.0, 1.0], abs=1e-12)
    assert t["share_ratio"].tolist() == pytest.approx([1.0, 1.0, 1.0], abs=1e-12)


def test_a_run_in_progress_at_the_end_counts_in_its_tasks_service():
    """RR with quantum 10 on one CPU, two tasks that never finish, until 15 ms: A runs
    [0, 10], B [10, 15] and is still running at the end. Nobody finished, so the contended
    interval is the whole run. B's 5 ms count (they were left out until this rule)."""
    r = schedlab.simulate("rr", quantum=10, time=15.0, think="det:0", warmup=0, classes=[
        {"name": n, "clients": 1, "size": "det:1e9"} for n in "ab"])
    s, t = r.summary, r.tasks
    assert (s["contended_ms"], s["contended_end"]) == (15.0, "time limit")
    assert t["service"].tolist() == [10.0, 5.0]
    assert t["share"].tolist() == pytest.approx([2 / 3, 1 / 3], abs=1e-12)

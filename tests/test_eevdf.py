"""EEVDF (crates/policy/src/eevdf.rs) against hand computations and its own conservation law.

Notation: w weight, v vruntime (grows by ran / w), V = sum(w v) / sum(w) over the runnable jobs
(the running one included, with its service up to now), lag = V - v (virtual), eligible when
v <= V, deadline d = v + slice / w set when a request starts. The eligible job with the earliest
d runs, for the rest of its request, (d - v) * w. Ties go to the job queued first.
"""

from __future__ import annotations

import pandas as pd
import pytest
import schedlab
from conftest import assert_conserved


def segments(result) -> list[tuple[int, float, float]]:
    return [(int(r.job), float(r.start), float(r.end)) for r in result.schedule.itertuples()]


def run(write_trace, rows, header="arrival,size,weight", **params):
    trace = write_trace(header, rows)
    return schedlab.simulate("eevdf", trace=trace, keep_schedule=True, **params)


# (a) Hand-computed schedules.


def test_eligibility_comes_before_an_earlier_deadline(write_trace):
    # Slice 2. J0 (w 3, size 6) and J1 (w 1, size 4) at 0, J2 (w 1, size 2) at 3.
    # t=0: V = 0; v0 = v1 = 0; d0 = 2/3, d1 = 2. J0 runs its request: (2/3) * 3 = 2 units.
    # t=2: v0 = 2/3 = d0, so d0 = 4/3. V = (3 * 2/3 + 0) / 4 = 1/2 < v0: J0 is not eligible
    #      even though 4/3 < 2 (a deadline-only rule would run it again). J1 runs 2.
    # t=3: J2 arrives. J1 has run 1, so v1 = 1 and V = (2 + 1) / 4 = 3/4; v2 = 3/4, d2 = 11/4.
    #      J1 (v 1 > 3/4) is not eligible, so run-to-parity does not shield it. But the pick
    #      would be J0 (v 2/3 <= 3/4, d 4/3), not J2, so J2 does not preempt.
    # t=4: v1 = 2 = d1, so d1 = 4. V = (2 + 2 + 3/4) / 5 = 0.95. Eligible: J0 (d 4/3) and
    #      J2 (d 11/4). J0 runs (4/3 - 2/3) * 3 = 2.
    # t=6: v0 = 4/3, d0 = 2. V = (4 + 2 + 3/4) / 5 = 1.35 >= 4/3. J0 (d 2) beats J2 (d 11/4)
    #      and runs its last 2 units.
    # t=8: J0 leaves. V = (2 + 3/4) / 2 = 1.375. J2 eligible, J1 (v 2) not. J2 runs its 2.
    # t=10: J1 alone, 2 left.
    r = run(write_trace, [(0, 6, 3), (0, 4, 1), (3, 2, 1)], slice=2)
    assert segments(r) == [(0, 0, 2), (1, 2, 4), (0, 4, 6), (0, 6, 8), (2, 8, 10), (1, 10, 12)]
    assert r.summary["policy"] == "eevdf"


def test_wakeup_preemption_with_and_without_run_to_parity(write_trace):
    # Slice 2. J0 (w 1, size 4) from 0 with d0 = 2. J1 (w 4, size 1) arrives at 1:
    # V = v0 = 1, so v1 = 1 (lag 0) and d1 = 1 + 2/4 = 1.5 < 2. Both are eligible.
    rows = [(0, 4, 1), (1, 1, 4)]
    # Without run-to-parity J1 is the pick and preempts. J0 keeps d0 = 2 with v0 = 1, so
    # after J1 it runs (2 - 1) * 1 = 1 to finish that request, then a new one of 2.
    r = run(write_trace, rows, slice=2, run_to_parity=False)
    assert segments(r) == [(0, 0, 1), (1, 1, 2), (0, 2, 3), (0, 3, 5)]
    # With it (the default), J0 is still eligible and finishes its slice. At 2, v0 = 2 and
    # V = (2 + 4 * 1) / 5 = 1.2: J1 runs, then J0.
    r = run(write_trace, rows, slice=2)
    assert segments(r) == [(0, 0, 2), (1, 2, 3), (0, 3, 5)]


@pytest.mark.parametrize("parity", [True, False])
def test_lag_is_kept_across_a_sleep(write_trace, parity):
    # Slice 2, all weights 1. Task 0: H (size 9) at 0. Task 1: S1 (size 1) at 0, then S2
    # (size 1) at 6. S2 is the same task waking, so it gets back the lag S1 left with.
    # t=0: v_H = v_S1 = 0, both d = 2; H was queued first and runs 2.
    # t=2: v_H = 2, d_H = 4. V = 1: only S1 is eligible. It runs its 1 unit.
    # t=3: S1 leaves with v = 1 and V = (2 + 1) / 2 = 1.5: lag +0.5. H runs alone: 3-5, then
    #      5-7 is planned (v_H = 4, d_H = 6).
    # t=6: S2 wakes. V = v_H = 5 and W = 1, so v = 5 - 0.5 * (1 + 1) / 1 = 4 and d = 6. Then
    #      V = (5 + 4) / 2 = 4.5: the lag is 0.5 again. H (v 5 > 4.5) is no longer eligible
    #      and S2 is the pick, so S2 preempts, with or without run-to-parity. With its lag
    #      dropped (v = 5 = V) it would have waited until 7.
    # t=7: H alone: 1 unit to d_H = 6, then requests of 2.
    r = run(write_trace, [(0, 9, 0), (0, 1, 1), (6, 1, 1)], header="arrival,size,task",
            slice=2, run_to_parity=parity)
    assert segments(r) == [(0, 0, 2), (1, 2, 3), (0, 3, 5), (0, 5, 6), (2, 6, 7), (0, 7, 8),
                           (0, 8, 10), (0, 10, 11)]


# (b) Weighted fairness.


@pytest.mark.parametrize("classes,share", [
    ([{"weight": 3, "clients": 1}, {"weight": 1, "clients": 1}], 0.75),
    # nice -5 and 0: weights 3121 and 1024 (the kernel's table).
    ([{"nice": -5, "clients": 1}, {"nice": 0, "clients": 1}], 3121 / (3121 + 1024)),
])
def test_two_hogs_share_by_weight_within_one_slice(classes, share):
    r = schedlab.simulate("eevdf", classes=classes, size="det:1e9", think="det:0", time=1200,
                          keep_schedule=True)
    s = r.schedule
    if share == 0.75:
        # v0 grows 1 per 3-unit request and v1 3. From 6 on, a 12-unit cycle: J0 runs at
        # V = 1.5, 2.25 and 3 (v0 = 1, 2, 3 <= V), is then ahead (v0 = 4 > V = 3.75), so J1 runs.
        assert segments(r)[:10] == [(0, 0, 3), (1, 3, 6), (0, 6, 9), (0, 9, 12), (0, 12, 15),
                                    (1, 15, 18), (0, 18, 21), (0, 21, 24), (0, 24, 27),
                                    (1, 27, 30)]
    # Lag of task 0 against its fluid share, at every segment boundary (extremes of a
    # piecewise-linear function): never more than one slice (3).
    served = 0.0
    worst = 0.0
    for seg in s.itertuples():
        worst = max(worst, abs(served - share * seg.start))
        if seg.task == 0:
            served += seg.end - seg.start
        worst = max(worst, abs(served - share * seg.end))
    assert worst <= 3.0
    tasks = r.tasks.set_index("task")
    assert tasks.loc[0, "share"] == pytest.approx(share, abs=3.0 / 1200)
    assert tasks.loc[1, "share"] == pytest.approx(1 - share, abs=3.0 / 1200)


# (c) A latency-sensitive task waking among CPU hogs.


def interactive(hogs: int, seed: int, interactive_class: dict | None = None, **params):
    ic = {"clients": 1, "size": "det:0.5", "think": "exp:10"} | (interactive_class or {})
    r = schedlab.simulate("eevdf", classes=[
        {"clients": hogs, "size": "det:1e9", "think": "det:0"}, ic], time=40000, seed=seed,
        **params)
    return r.jobs[r.jobs["class"] == 1]


@pytest.mark.parametrize("hogs,weight", [(1, 0.5), (2, 1.0), (3, 2.0), (4, 1.0)])
def test_mean_wait_pays_back_exactly_the_service_taken_ahead(hogs, weight):
    # Lag is kept across sleeps, so it changes only while the task is runnable. While it
    # waits, V grows at 1 / W per unit of CPU (W = hogs + w), and so does its lag. While it
    # runs its q = 0.5, its lag falls by q / w - q / W. Lag stays bounded (well inside the
    # 2 * slice / w clamp), so over many jobs: mean wait / W = q / w - q / W, that is
    # mean wait = q * hogs / w. This is the closed form of "no sleeper bonus".
    jobs = interactive(hogs, seed=5, interactive_class={"weight": weight})
    assert len(jobs) > 3000
    assert jobs.wait.mean() == pytest.approx(0.5 * hogs / weight, rel=0.02)


@pytest.mark.parametrize("parity", [True, False])
@pytest.mark.parametrize("hogs", [1, 2, 4])
def test_short_slice_serves_a_waking_task_within_one_slice_of_its_payback(hogs, parity):
    # With its own slice equal to its burst (slices = [3, 0.5], the kernel's custom slice),
    # the task becomes eligible once it has paid back its last burst's advance. It left with
    # lag >= -q * hogs / W (picked at lag >= 0, then ran q), so that takes at most
    # W * q * hogs / W = q * hogs. Its deadline v + 0.5 then precedes the hogs' v + 3, so it
    # runs when the hog on the CPU ends its slice (at most 3 later). Its wait is at most
    # q * hogs + slice.
    bound = 0.5 * hogs + 3.0
    waits = [interactive(hogs, seed, slices=[3, 0.5], run_to_parity=parity).wait.max()
             for seed in (1, 2, 3)]
    assert max(waits) <= bound + 1e-9
    # With the base slice for everyone, the hogs' deadlines are no later than its own, so
    # with several hogs it can wait for more than one of their slices.
    if hogs == 4:
        assert interactive(hogs, 1, run_to_parity=parity).wait.max() > bound


# (d) Determinism, including the migration path.


def smp_jobs(seed: int) -> pd.DataFrame:
    r = schedlab.simulate("eevdf", cpus=4, runqueues="per-cpu", balancer="linux",
                          placement="least-weight", load=0.8, size="exp:1", bursts=3,
                          io="exp:2", jobs=5000, warmup=100, seed=seed,
                          classes=[{"nice": 0}, {"nice": 5}])
    assert_conserved(r.summary, little_tolerance=0.1)
    assert r.summary["migrations"] > 0
    return r.jobs


def test_same_seed_same_schedule_on_four_cpus_with_migrations():
    a, b, c = smp_jobs(11), smp_jobs(11), smp_jobs(12)
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert not a["response"].equals(c["response"])


def test_parameters_are_checked():
    with pytest.raises(ValueError, match="slice"):
        schedlab.simulate("eevdf", slice=0, jobs=10)
    with pytest.raises(ValueError, match="quantum"):
        schedlab.simulate("eevdf", quantum=3, jobs=10)

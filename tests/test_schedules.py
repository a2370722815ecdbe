"""Hand-computed schedules: who runs when, segment by segment, for every policy.

Each expected schedule below was worked out by hand from the policy's rules (comments give
the reasoning); ties go to the job that was queued first, and a job arriving at the instant a
slice expires is queued ahead of the expired job.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import schedlab


def segments(result) -> list[tuple[int, float, float]]:
    return [(int(r.job), float(r.start), float(r.end)) for r in result.schedule.itertuples()]


def completions(result) -> dict[int, float]:
    return dict(zip(result.jobs.job.astype(int), result.jobs.completion, strict=True))


def run(write_trace, policy, rows, header="arrival,size", **params):
    trace = write_trace(header, rows)
    return schedlab.simulate(policy, trace=trace, keep_schedule=True, **params)


def test_textbook_24_3_3_mean_wait(write_trace):
    rows = [(0, 24), (0, 3), (0, 3)]
    assert run(write_trace, "fcfs", rows).summary["wait_mean"] == pytest.approx(17.0, abs=1e-12)
    assert run(write_trace, "sjf", rows).summary["wait_mean"] == pytest.approx(3.0, abs=1e-12)
    rr = run(write_trace, "rr", rows, quantum=4)
    # P1 0-4, P2 4-7, P3 7-10, P1 10-30: waits 6, 4, 7.
    assert rr.summary["wait_mean"] == pytest.approx(17 / 3, abs=1e-12)
    assert segments(rr)[:3] == [(0, 0, 4), (1, 4, 7), (2, 7, 10)]


def test_fcfs(write_trace):
    r = run(write_trace, "fcfs", [(0, 3), (1, 2), (2, 1)])
    assert segments(r) == [(0, 0, 3), (1, 3, 5), (2, 5, 6)]
    assert list(r.jobs.wait) == [0, 2, 3]
    assert r.summary["context_switches"] == 0


def test_lcfs_preemptive_resume(write_trace):
    # Each newcomer takes the CPU; the interrupted job resumes after all later arrivals.
    r = run(write_trace, "lcfs", [(0, 4), (1, 2), (2, 1)])
    assert segments(r) == [(0, 0, 1), (1, 1, 2), (2, 2, 3), (1, 3, 4), (0, 4, 7)]


def test_lcfs_non_preemptive(write_trace):
    r = run(write_trace, "lcfs", [(0, 4), (1, 2), (2, 1)], preemptive=False)
    assert segments(r) == [(0, 0, 4), (2, 4, 5), (1, 5, 7)]


def test_sjf(write_trace):
    r = run(write_trace, "sjf", [(0, 5), (1, 3), (2, 1), (3, 2)])
    assert segments(r) == [(0, 0, 5), (2, 5, 6), (3, 6, 8), (1, 8, 11)]


def test_srpt_and_psjf_differ_on_remaining_work(write_trace):
    rows = [(0, 4), (1, 3.5)]
    # SRPT: at t=1 job 0 has 3 left < 3.5, so it keeps the CPU.
    assert segments(run(write_trace, "srpt", rows)) == [(0, 0, 4), (1, 4, 7.5)]
    # PSJF compares original sizes: 3.5 < 4 preempts.
    assert segments(run(write_trace, "psjf", rows)) == [(0, 0, 1), (1, 1, 4.5), (0, 4.5, 7.5)]


def test_srpt_chain_of_preemptions(write_trace):
    r = run(write_trace, "srpt", [(0, 5), (1, 3), (2, 1)])
    # t=1: 4 left > 3, preempt; t=2: 2 left > 1, preempt; then 2 left, then 4 left.
    assert segments(r) == [(0, 0, 1), (1, 1, 2), (2, 2, 3), (1, 3, 5), (0, 5, 9)]
    assert list(r.jobs.sort_values("job").context_switches) == [1, 1, 0]


def test_rr_arrival_queued_ahead_of_expired_job(write_trace):
    r = run(write_trace, "rr", [(0, 4), (2, 2)], quantum=2)
    assert segments(r) == [(0, 0, 2), (1, 2, 4), (0, 4, 6)]
    r = run(write_trace, "rr", [(0, 3), (1, 3)], quantum=2)
    assert segments(r) == [(0, 0, 2), (1, 2, 4), (0, 4, 5), (1, 5, 6)]


def test_context_switch_cost_delays_each_switch(write_trace):
    # Cost 0.5 whenever a CPU starts a job other than the one it ran last.
    r = run(write_trace, "rr", [(0, 2), (0, 2)], quantum=1, context_switch=0.5)
    assert segments(r) == [(0, 0.5, 1.5), (1, 2, 3), (0, 3.5, 4.5), (1, 5, 6)]
    assert r.summary["overhead_time"] == pytest.approx(2.0)
    assert r.summary["busy_time"] == pytest.approx(4.0)


def test_ps_exact_fluid(write_trace):
    # Sizes 1 and 3 at 0: rate 1/2 each until t=2, then job 1 alone until 4.
    assert completions(run(write_trace, "ps", [(0, 1), (0, 3)])) == {0: 2.0, 1: 4.0}
    # Job 0 alone for 1 unit, then both with 1 left at rate 1/2: both end at 3.
    c = completions(run(write_trace, "ps", [(0, 2), (1, 1)]))
    assert c[0] == pytest.approx(3.0) and c[1] == pytest.approx(3.0)


def test_gps_weights(write_trace):
    r = run(write_trace, "gps", [(0, 3, 3), (0, 3, 1)], header="arrival,size,weight")
    # Weight 3 runs at 3/4 and ends at 4; the other has 1 done, 2 left alone: ends at 6.
    c = completions(r)
    assert c[0] == pytest.approx(4.0) and c[1] == pytest.approx(6.0)


def test_fb_fluid(write_trace):
    # Job 0 alone to 2; job 1 alone until it also has 2 (t=4); shared: job 1 ends at level 3
    # (t=6), job 0 alone to 4 (t=7).
    c = completions(run(write_trace, "fb", [(0, 4), (2, 3)]))
    assert c[1] == pytest.approx(6.0) and c[0] == pytest.approx(7.0)


def test_fb_sliced(write_trace):
    # Least attained first, quantum 1: 0 [0,1]; 1 (attained 0) [1,2]; tie at 1: job 0 queued
    # first [2,3]; job 1 [3,4] ends; job 0 [4,5] ends.
    r = run(write_trace, "fb", [(0, 3), (0, 2)], quantum=1)
    assert segments(r) == [(0, 0, 1), (1, 1, 2), (0, 2, 3), (1, 3, 4), (0, 4, 5)]


def test_priority_preemptive_and_not(write_trace):
    rows = [(0, 4, 2), (1, 2, 1), (2, 1, 3)]
    h = "arrival,size,priority"
    assert segments(run(write_trace, "priority", rows, header=h)) == [
        (0, 0, 1), (1, 1, 3), (0, 3, 6), (2, 6, 7)]
    assert segments(run(write_trace, "priority", rows, header=h, preemptive=False)) == [
        (0, 0, 4), (1, 4, 6), (2, 6, 7)]


def test_priority_aging_lets_the_longer_waiter_pass(write_trace):
    rows = [(0, 10, 0), (1, 1, 3), (2, 1, 2.5)]
    h = "arrival,size,priority"
    # Without aging 2.5 beats 3; with aging 1/unit job 1 has waited 1 unit longer: 3-9 < 2.5-8.
    plain = run(write_trace, "priority", rows, header=h, preemptive=False)
    assert segments(plain) == [(0, 0, 10), (2, 10, 11), (1, 11, 12)]
    aged = run(write_trace, "priority", rows, header=h, preemptive=False, aging=1)
    assert segments(aged) == [(0, 0, 10), (1, 10, 11), (2, 11, 12)]


def test_stride(write_trace):
    # Tickets 2 and 1, quantum 1: passes advance by 1/2 and 1 per quantum.
    r = run(write_trace, "stride", [(0, 3, 2), (0, 3, 1)], header="arrival,size,tickets",
            quantum=1)
    assert segments(r) == [(0, 0, 1), (1, 1, 2), (0, 2, 3), (1, 3, 4), (0, 4, 5), (1, 5, 6)]


def test_mlfq_demotion_and_preemption(write_trace):
    # Levels 2, quanta 1 and 2. Job 0 uses its top-level quantum and drops; job 1 arrives at
    # 1.5 at the top and preempts; job 0 resumes first at its level with 1.5 of allotment left.
    r = run(write_trace, "mlfq", [(0, 4), (1.5, 1)], levels=2, quantum=1)
    assert segments(r) == [(0, 0, 1), (0, 1, 1.5), (1, 1.5, 2.5), (0, 2.5, 4), (0, 4, 5)]


def test_cfs(write_trace):
    # Latency 6: the first job starts a full slice behind (vruntime 6), the second half a
    # period (3); slices are 3 each while both run, then 6 for the one left.
    r = run(write_trace, "cfs", [(0, 6), (0, 6)])
    assert segments(r) == [(1, 0, 3), (0, 3, 6), (1, 6, 9), (0, 9, 12)]


def test_edf(write_trace):
    r = run(write_trace, "edf", [(0, 3, 10), (1, 2, 4), (2, 1, 2)],
            header="arrival,size,deadline")
    assert segments(r) == [(0, 0, 1), (1, 1, 2), (2, 2, 3), (1, 3, 4), (0, 4, 6)]


def test_global_queue_on_two_cpus(write_trace):
    # FCFS on 2 CPUs: jobs 0 and 1 start at once; job 2 takes the first CPU to free up.
    r = run(write_trace, "fcfs", [(0, 3), (0, 1), (0, 2)], cpus=2)
    by_job = {int(s.job): (int(s.cpu), s.start, s.end) for s in r.schedule.itertuples()}
    assert by_job == {0: (0, 0, 3), 1: (1, 0, 1), 2: (1, 1, 3)}


# A job preempted by a more important one goes back to the head of its level with the rest of
# its slice (Linux SCHED_RR, the textbook MLFQ); only an expired slice sends a job to the tail
# with a new one.


def test_mlfq_preempted_job_keeps_the_rest_of_its_slice(write_trace):
    # Quanta 1 and 10, allotments 2 and 30 (two and three slices). A and B (30 each) alternate
    # at the top (0-4) and both reach level 1. A runs from 4 with a 10 slice; C (3) arrives at
    # 5 and preempts it after 1. C runs 5-7 at the top and drops behind A and B. A resumes at
    # 7 with the 9 left of its slice (7-16), B runs 16-26, C its last unit 26-27; then A
    # 27-37, B 37-47, A's last 8 at 47-55 and B's at 55-63. A fresh slice for A after the
    # preemption would end C at 28.
    r = run(write_trace, "mlfq", [(0, 30), (0, 30), (5, 3)], quanta=[1, 10],
            allotment=[2, 30])
    assert completions(r) == {0: 55.0, 1: 63.0, 2: 27.0}
    assert segments(r)[4:9] == [(0, 4, 5), (2, 5, 6), (2, 6, 7), (0, 7, 16), (1, 16, 26)]


def test_mlfq_boost_gives_every_job_a_new_top_level_slice(write_trace):
    # Quanta 1, 2, 4, a boost every 5 (taken at the first scheduling event at or after it). A
    # (20) runs 0-1 at the top, 1-3 at level 1, and from 3 at the bottom until B (2) arrives
    # at 3.5: A has used 0.5 of its 4 slice. B runs 3.5-4.5 at the top, 4.5-5.5 at level 1.
    # C (3) arrives at 5.2: the boost puts A (queued) at the top and B (running) finishes.
    # A's turn at the top is a whole quantum, 5.5-6.5, not the 0.5 its old slice had left
    # (which let C in at 6 and gave A a second turn at the top); then C 6.5-7.5, A 7.5-9.5
    # and C 9.5-11.5 at level 1.
    r = run(write_trace, "mlfq", [(0, 20), (3.5, 2), (5.2, 3)], quanta=[1, 2, 4],
            boost_period=5)
    assert segments(r)[:9] == [(0, 0, 1), (0, 1, 3), (0, 3, 3.5), (1, 3.5, 4.5),
                               (1, 4.5, 5.5), (0, 5.5, 6.5), (2, 6.5, 7.5), (0, 7.5, 9.5),
                               (2, 9.5, 11.5)]
    assert completions(r) == {0: 25.0, 1: 5.5, 2: 11.5}


def test_priority_with_a_quantum_preempted_job_resumes_first_with_its_rest(write_trace):
    # Quantum 4. A (10) and B (6) at priority 1, H (2) at priority 0 arriving at 3. A runs 0-3
    # and is preempted; H runs 3-5; A resumes ahead of B with the 1 left of its quantum (5-6),
    # then B 6-10, A 10-14, B 14-16 (done), A 16-18 (done). At the tail with a new quantum, A
    # would come after B (B done at 15); at the head with a new quantum, A would end at 16.
    h = "arrival,size,priority"
    r = run(write_trace, "priority", [(0, 10, 1), (0, 6, 1), (3, 2, 0)], header=h, quantum=4)
    assert segments(r) == [(0, 0, 3), (2, 3, 5), (0, 5, 6), (1, 6, 10), (0, 10, 14),
                           (1, 14, 16), (0, 16, 18)]
    assert completions(r) == {0: 18.0, 1: 16.0, 2: 5.0}


def test_rr_expired_job_goes_to_the_tail_with_a_new_quantum(write_trace):
    # Quantum 4: A (10) at 0, B (3) at 2, C (5) at 5. A's quantum expires at 4 behind B (which
    # came at 2): B 4-7; C came at 5, so A 7-11 then C 11-15, A's last 2 at 15-17, C's last 1
    # at 17-18. Each turn after an expiry is a whole new quantum.
    r = run(write_trace, "rr", [(0, 10), (2, 3), (5, 5)], quantum=4)
    assert segments(r) == [(0, 0, 4), (1, 4, 7), (0, 7, 11), (2, 11, 15), (0, 15, 17),
                           (2, 17, 18)]


def test_a_dispatcher_on_cpu_0_from_python_and_the_cli(write_trace):
    """`dispatcher_cost` (the Rust test has the reasoning): four 1 ms jobs at 0 on 2 CPUs,
    the dispatcher's 0.1 ms per first run on CPU 0. The same schedule from the CLI; the
    xv6 file's measured split (README: the dispatcher's CPU completes 63-84 of 200 tiny
    jobs) comes out of the traced s = 0.254 and w = 0.08 ms: 69 of 200."""
    rows = [(0, 1), (0, 1), (0, 1), (0, 1)]
    r = run(write_trace, "fcfs", rows, cpus=2, dispatcher_cost=0.1)
    # A segment is a run's service; as with every overhead, the dispatcher's holds are not
    # drawn: job 0's 1 ms ends at 1.3, so its segment is 0.3-1.3.
    assert [(j, round(s, 9), round(e, 9)) for j, s, e in segments(r)] == [
        (1, 0.0, 1.0), (0, 0.3, 1.3), (2, 1.0, 2.0), (3, 1.4, 2.4)]
    assert r.jobs.sort_values("job")["cpu"].tolist() == [0, 1, 1, 0]
    out = subprocess.run([sys.executable, "-m", "schedlab.cli", "sim", "--trace",
                          write_trace("arrival,size", rows), "--cpus", "2",
                          "--dispatcher-cost", "0.1", "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["response_max"] == pytest.approx(2.4, abs=1e-9)
    tiny = run(write_trace, "rr", [(0, 0.01)] * 200, quantum=10, cpus=2,
               start_cost=0.254 - 0.01, dispatcher_cost=0.08)
    assert tiny.jobs.groupby("cpu").size().to_dict() == {0: 69, 1: 131}


def test_a_jobs_end_after_its_final_io_waits_its_turn_then_keeps_the_cpu():
    """`end_cost` (the Rust test has a plain FCFS case): three clients of one job each, 1 ms
    of CPU then a final I/O of 0.2, RR with quantum 10 on one CPU, end 0.5. The bursts run
    0-1, 1-2, 2-3; A wakes at 1.2 and queues behind C, B at 2.2 behind A, C at 3.2. A's end
    runs at 3 (completion 3.0) and keeps the CPU to 3.5, B's at 3.5 (to 4.0), C's at 4.0.
    Without it: 3.0, 3.0, 3.2 (each end is a run of no time). The same from the CLI."""
    common = {"quantum": 10, "jobs": 3, "clients": 3, "think": "det:0", "size": "det:1",
              "bursts": 1, "io": "det:0.2", "final_io": True, "cpus": 1}
    ends = schedlab.simulate("rr", end_cost=0.5, **common)
    assert ends.jobs.sort_values("job")["completion"].tolist() == [3.0, 3.5, 4.0]
    plain = schedlab.simulate("rr", **common)
    assert plain.jobs.sort_values("job")["completion"].tolist() == [3.0, 3.0, 3.2]
    out = subprocess.run([sys.executable, "-m", "schedlab.cli", "sim", "--policy", "rr",
                          "--quantum", "10", "--jobs", "3", "--clients", "3", "--think", "det:0",
                          "--size", "det:1", "--bursts", "1", "--io", "det:0.2", "--final-io",
                          "--cpus", "1", "--end-cost", "0.5", "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["response_max"] == pytest.approx(4.0, abs=1e-9)


def test_a_wake_up_after_an_io_keeps_the_job_out_of_its_runqueue():
    """`wake_delay` (the Rust test has FCFS): two clients of one job of 2 ms in two bursts with
    an I/O of 0.5 between, RR with quantum 10 on one CPU, wake-up 1. A runs 0-1 and is back
    at 2.5, B runs 1-2 and is back at 3.5; the CPU idles 2-2.5: A 2.5-3.5, B 3.5-4.5. A
    wake-up is not a wait in the runqueue: A waits 0, B 1 (0-1). Without it A ends at 3, B at
    4. The same from the CLI."""
    common = {"quantum": 10, "jobs": 2, "clients": 2, "think": "det:0", "size": "det:2",
              "bursts": 2, "io": "det:0.5", "cpus": 1, "keep_schedule": True}
    woke = schedlab.simulate("rr", wake_delay=1.0, **common)
    jobs = woke.jobs.sort_values("job")
    assert jobs["completion"].tolist() == [3.5, 4.5]
    assert jobs["wait"].tolist() == [0.0, 1.0]
    assert woke.schedule[["start", "end"]].to_numpy().ravel().tolist() == [0, 1, 1, 2, 2.5,
                                                                           3.5, 3.5, 4.5]
    plain = schedlab.simulate("rr", **common)
    assert plain.jobs.sort_values("job")["completion"].tolist() == [3.0, 4.0]
    out = subprocess.run([sys.executable, "-m", "schedlab.cli", "sim", "--policy", "rr",
                          "--quantum", "10", "--jobs", "2", "--clients", "2", "--think", "det:0",
                          "--size", "det:2", "--bursts", "2", "--io", "det:0.5", "--cpus", "1",
                          "--wake-delay", "1", "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["response_max"] == pytest.approx(4.5, abs=1e-9)

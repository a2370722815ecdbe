"""The os world's noise flag (schedlab.osrun.env.foreign_load): others' CPU time during a run,
from /proc/stat's ticks less the run's own CPU time, judged beyond the ticks' resolution;
and the stalls under its jobs, from each job's own counters."""

from __future__ import annotations

import pytest
from schedlab.osrun.build import stalls, unaccounted_ms
from schedlab.osrun.env import foreign_load

FIELDS = ("user", "nice", "system", "irq", "softirq", "steal")


def _raw(wall_ms: float, ours_ms: float, busy_ticks: list[int], steal_ticks: list[int]
         ) -> dict:
    """A run on CPUs 0 and 1 at USER_HZ 100: `ours_ms` of CPU time by its one task,
    `busy_ticks` and `steal_ticks` counted per CPU by /proc/stat during it."""
    zero = {"cpu": ["cpu", "cpu0", "cpu1"], **{f: [0, 0, 0] for f in FIELDS}}
    after = {"cpu": ["cpu", "cpu0", "cpu1"], **{f: [0, 0, 0] for f in FIELDS}}
    after["user"] = [sum(busy_ticks), *busy_ticks]
    after["steal"] = [sum(steal_ticks), *steal_ticks]
    task = {"base": {"cpu_ns": 0}, "end": {"cpu_ns": int(ours_ms * 1e6)}}
    return {"user_hz": 100, "cpu_times_before": zero, "cpu_times_after": after,
            "coordinator": {"cpu_ms": 0.0}, "tasks": [task], "wall_ms": wall_ms}


def test_a_run_of_a_few_ms_is_not_noisy_by_the_ticks_rounding():
    # 4.8 ms on 2 CPUs, 9.2 ms of it ours, and /proc/stat counted one tick on each CPU (20 ms):
    # 10.8 ms "foreign", 112% of the run's capacity, all of it within one tick per CPU.
    n = foreign_load(_raw(4.8, 9.2, [1, 1], [0, 0]), [0, 1], 0.1, [])
    assert n["resolution_ms"] == 20.0
    assert n["foreign_cpu_ms"] == pytest.approx(10.8)
    assert n["foreign_fraction"] == pytest.approx(10.8 / 9.6)
    assert n["noisy"] is False and n["noise_reasons"] == []


def test_others_beyond_the_threshold_and_the_resolution_flag_the_run():
    # 1 s on 2 CPUs (capacity 2,000 ms), ours 1,500 ms: 10% is 200 ms, the resolution 20 ms.
    quiet = foreign_load(_raw(1000.0, 1500.0, [86, 85], [0, 0]), [0, 1], 0.1, [])  # 210 ms others
    assert quiet["foreign_cpu_ms"] == pytest.approx(210.0) and quiet["noisy"] is False
    noisy = foreign_load(_raw(1000.0, 1500.0, [87, 86], [0, 0]), [0, 1], 0.1, [])  # 230 ms others
    assert noisy["foreign_cpu_ms"] == pytest.approx(230.0)
    assert noisy["foreign_fraction"] == pytest.approx(0.115) and noisy["noisy"] is True
    assert noisy["noise_reasons"] == ["others used 11.5% of the run's CPUs (threshold 10%, "
                                      "beyond /proc/stat's resolution of 20 ms)"]


def test_steal_beyond_two_percent_and_the_resolution_flags_the_run():
    assert foreign_load(_raw(1000.0, 1500.0, [75, 75], [3, 2]), [0, 1], 0.1, [])["noisy"] is False
    stolen = foreign_load(_raw(1000.0, 1500.0, [75, 75], [4, 3]), [0, 1], 0.1, [])
    assert stolen["steal_fraction"] == pytest.approx(0.035)
    assert stolen["noise_reasons"] == ["the hypervisor stole 3.5% of the run's CPUs"]


def test_only_the_runs_cpus_are_counted():
    # Others kept CPU 1 busy; the run had CPU 0 alone (ours 900 of 1,000 ms, 90 ticks counted).
    n = foreign_load(_raw(1000.0, 900.0, [90, 100], [0, 0]), [0], 0.1, [])
    assert n["foreign_cpu_ms"] == 0.0 and n["resolution_ms"] == 10.0 and n["noisy"] is False


def test_a_stall_under_a_job_flags_the_run_though_proc_stat_saw_no_steal():
    # A quiet run by its ticks; one job's response held 7.5 ms that was neither its run-queue
    # wait nor its CPU time (a hypervisor's steal under one tick, seen in a trace).
    n = foreign_load(_raw(1000.0, 1500.0, [75, 75], [0, 0]), [0, 1], 0.1, [7.5])
    assert n["steal_fraction"] == 0.0 and n["unaccounted_jobs"] == 1 and n["noisy"] is True
    assert n["noise_reasons"] == [
        "the machine stalled under 1 job(s): up to 7.5 ms of a job's response was neither its "
        "run-queue wait nor its CPU time or I/O (a hypervisor's steal is taken off the task's "
        "CPU clock)"]


def test_a_jobs_unaccounted_time_is_its_response_less_its_counted_parts():
    # Four jobs' raw records (ms): response 10 = 4 wait + 5.8 CPU + 0.2 (wake-up, measurement);
    # response 20 = 5 + 1 held + 3 CPU + 2 I/O + 9 stalled; a wait the kernel over-counted;
    # 4 ms unplaced in a job switched 100 times: within 3 ms + 0.02 ms a switch.
    raw = {"jobs": {"task": [0, 1, 2, 3], "arrival": [0.0, 5.0, 0.0, 0.0],
                    "completion": [10.0, 25.0, 6.0, 500.0],
                    "runqueue_wait": [4.0, 5.0, 5.0, 246.0], "held": [0.0, 1.0, 0.0, 0.0],
                    "cpu_time": [5.8, 3.0, 2.0, 250.0], "io": [0.0, 2.0, 0.0, 0.0],
                    "voluntary": [0, 1, 0, 0], "involuntary": [3, 2, 1, 100]}}
    assert unaccounted_ms(raw["jobs"]) == pytest.approx([0.2, 9.0, -1.0, 4.0])
    assert stalls(raw) == pytest.approx([9.0])
    raw["jobs"]["involuntary"][3] = 40  # 3.8 ms allowed: stalled
    assert stalls(raw) == pytest.approx([9.0, 4.0])
    raw["jobs"]["runqueue_wait"][1] = None  # schedstat missing: nothing to judge
    assert stalls(raw) == pytest.approx([4.0])

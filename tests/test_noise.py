"""The os world's noise flag (schedlab.osrun.env.foreign_load): others' CPU time during a run,
from /proc/stat's ticks less the run's own CPU time, judged beyond the ticks' resolution."""

from __future__ import annotations

import pytest
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
    n = foreign_load(_raw(4.8, 9.2, [1, 1], [0, 0]), [0, 1], 0.1)
    assert n["resolution_ms"] == 20.0
    assert n["foreign_cpu_ms"] == pytest.approx(10.8)
    assert n["foreign_fraction"] == pytest.approx(10.8 / 9.6)
    assert n["noisy"] is False and n["noise_reasons"] == []


def test_others_beyond_the_threshold_and_the_resolution_flag_the_run():
    # 1 s on 2 CPUs (capacity 2,000 ms), ours 1,500 ms: 10% is 200 ms, the resolution 20 ms.
    quiet = foreign_load(_raw(1000.0, 1500.0, [86, 85], [0, 0]), [0, 1], 0.1)  # 210 ms others
    assert quiet["foreign_cpu_ms"] == pytest.approx(210.0) and quiet["noisy"] is False
    noisy = foreign_load(_raw(1000.0, 1500.0, [87, 86], [0, 0]), [0, 1], 0.1)  # 230 ms others
    assert noisy["foreign_cpu_ms"] == pytest.approx(230.0)
    assert noisy["foreign_fraction"] == pytest.approx(0.115) and noisy["noisy"] is True
    assert noisy["noise_reasons"] == ["others used 11.5% of the run's CPUs (threshold 10%, "
                                      "beyond /proc/stat's resolution of 20 ms)"]


def test_steal_beyond_two_percent_and_the_resolution_flags_the_run():
    assert foreign_load(_raw(1000.0, 1500.0, [75, 75], [3, 2]), [0, 1], 0.1)["noisy"] is False
    stolen = foreign_load(_raw(1000.0, 1500.0, [75, 75], [4, 3]), [0, 1], 0.1)
    assert stolen["steal_fraction"] == pytest.approx(0.035)
    assert stolen["noise_reasons"] == ["the hypervisor stole 3.5% of the run's CPUs"]


def test_only_the_runs_cpus_are_counted():
    # Others kept CPU 1 busy; the run had CPU 0 alone (ours 900 of 1,000 ms, 90 ticks counted).
    n = foreign_load(_raw(1000.0, 900.0, [90, 100], [0, 0]), [0], 0.1)
    assert n["foreign_cpu_ms"] == 0.0 and n["resolution_ms"] == 10.0 and n["noisy"] is False

"""The studies' os experiments as spec dicts, for `schedlab.osrun.run` and for experiment files
(each dict is one `[[runs]]`-style table of os keys), and the simulator spec that models each.

- `linux_grid`: study 003, CFS / FIFO / RR x CPU-bound / I/O-bound / mixed x 10 / 100 / 1000
  one-shot processes (reduced under quick).
- `pinned_start`: study 002, 7 closed-loop tasks of 250 ms started on one CPU, then released.
- `xv6_lottery`, `xv6_priority`: study 004's test suites (sections 4.2 and 4.3) on real
  processes under the user-space dispatcher.

`schedlab.worlds.translate("sim", {"policy": "kernel", **spec})` gives the simulator's model of
any of them (or the reason there is none).
"""

from __future__ import annotations

import copy
from typing import Any

KERNEL = {"cfs": {"sched": "other"}, "fifo": {"sched": "fifo", "rtprio": 10},
          "rr": {"sched": "rr", "rtprio": 10}}

# Study 003's process kinds. CPU: a prime search (here a calibrated CPU burst). I/O: `rw`,
# 100 synchronous writes of 1024 bytes. Mixed: the prime search writing 512 bytes at a time,
# synchronously.
KINDS = {
    "cpu": {"size": "det:20"},
    "io": {"size": "det:0", "bursts": 100, "io": "dsync:1024"},
    "mixed": {"size": "det:20", "bursts": 20, "io": "dsync:512"},
}
LOADS = {"light": 10, "medium": 100, "heavy": 1000}
QUICK_LOADS = {"light": 4, "medium": 16, "heavy": 64}
QUICK_KINDS = {
    "cpu": {"size": "det:5"},
    "io": {"size": "det:0", "bursts": 10, "io": "dsync:1024"},
    "mixed": {"size": "det:5", "bursts": 5, "io": "dsync:512"},
}


def linux_grid(quick: bool = False) -> dict[str, dict[str, Any]]:
    """27 specs named policy-kind-load, as in study 003's result files."""
    out = {}
    kinds = QUICK_KINDS if quick else KINDS
    loads = QUICK_LOADS if quick else LOADS
    for pol, sched in KERNEL.items():
        for kind, work in kinds.items():
            for load, n in loads.items():
                out[f"{pol}-{kind}-{load}"] = {"batch": n, **sched, **work, "seed": 1}
    return out


def pinned_start(think: float = 0.0, time: float = 6000.0) -> dict[str, Any]:
    """Study 002's heavy (think 0) and moderate (think 10 ms) scenarios: 7 tasks of 250 ms
    closed loops, all started on CPU 0, released to both CPUs after 500 ms."""
    spec: dict[str, Any] = {"clients": 7, "size": "det:250", "time": time, "cpus": 2,
                            "start_pinned": [0], "release_after": 500, "load_sample": 10}
    if think:
        spec["think"] = f"det:{think}"
    return spec


def _tickets(groups: list[tuple[int, float]], **extra: Any) -> list[dict[str, Any]]:
    return [{"name": f"t{t:g}", "tickets": t, "clients": n, **extra} for n, t in groups]


def xv6_lottery(cpus: int = 1, time: float = 5000.0, quantum: float = 10.0
                ) -> dict[str, dict[str, Any]]:
    """Study 004, section 4.3: the six lottery tests. Shares are taken over the contended
    interval (the xv6 tests counted dispatches after some competitors had finished)."""
    base = {"policy": "lottery", "params": {"quantum": quantum}, "time": time, "cpus": cpus,
            "size": "det:1000000"}
    tests = {
        "low_process_count": _tickets([(1, 30), (1, 20), (1, 10)]),
        "basic_fairness": _tickets([(2, 30), (2, 20), (2, 10), (2, 5)]),
        "switch_overhead": _tickets([(17, 30), (17, 20), (16, 10)]),
        "starvation_check": _tickets([(2, 50), (2, 10), (4, 1)]),
        "grouped_ticket_levels": _tickets([(10, 1), (10, 5), (10, 10)]),
        "mixed_load": [
            {"name": "cpu", "tickets": 20, "clients": 5},
            {"name": "io", "tickets": 15, "clients": 5, "size": "det:0.5", "bursts": 1,
             "io": "sleep:det:10"},
            {"name": "short", "tickets": 10, "clients": 5, "size": "det:5",
             "think": "det:20"},
            {"name": "mixed", "tickets": 5, "clients": 5, "size": "det:20", "bursts": 4,
             "io": "sleep:det:5"},
        ],
    }
    return {name: {**copy.deepcopy(base), "classes": classes} for name, classes in tests.items()}


def xv6_priority(cpus: int = 1, aging: float = 0.0) -> dict[str, dict[str, Any]]:
    """Study 004, section 4.2: the priority tests (xv6 priority 0 is the highest, as here; a
    tick of xv6 is 10 ms)."""
    base: dict[str, Any] = {"policy": "priority", "cpus": cpus}
    if aging:
        base["params"] = {"aging": aging}
    tests = {
        "cpu_heavy": {"batch": 10, "size": "det:100", "classes": [{"priority": 5}]},
        "switch_overhead": {"batch": 200, "size": "det:0.01", "classes": [{"priority": 5}]},
        "io_bound": {"jobs": 50, "size": "det:1", "bursts": 1, "io": "sleep:det:10",
                     "classes": [{"name": "p5", "priority": 5, "clients": 25},
                                 {"name": "p0", "priority": 0, "clients": 25}]},
        "mixed_load": {"jobs": 10, "classes": [
            {"name": "cpu", "priority": 0, "clients": 5, "size": "det:250"},
            {"name": "io", "priority": 10, "clients": 5, "size": "det:1", "bursts": 1,
             "io": "sleep:det:500"}]},
        "process_creation": {"batch": 50, "size": "det:0.01", "classes": [{"priority": 5}]},
        "low_process_count": {"batch": 200, "size": "det:0.5", "classes": [{"priority": 5}]},
        "starvation_check": {"jobs": 6, "classes": [
            {"name": "light", "priority": 0, "clients": 1, "size": "det:1"},
            {"name": "heavy", "priority": 10, "clients": 5, "size": "det:100"}]},
    }
    return {name: {**copy.deepcopy(base), **t} for name, t in tests.items()}


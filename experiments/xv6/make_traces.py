"""Writes the traces of study 004's timing and priority tests (traces/*.csv).

Time is in xv6 timer ticks (about 10 ms under QEMU); RR's quantum is one tick. Two constants
are calibrated on the study's round-robin results on 1 CPU (its table 1):
- ITER: ticks per loop iteration. CPU-heavy, 10 processes x 20M iterations, took 86 ticks:
  0.43 ticks per million iterations.
- FORK: ticks between two forks of the parent. Switch overhead, 200 fork+exit+wait cycles,
  took 72 ticks: 0.36 ticks per cycle (Process creation, 50 forks in 19 ticks, agrees).
A child that exits at once is given 0.01 ticks of CPU. The parent itself is not simulated:
children arrive FORK apart. Run `python make_traces.py` to rewrite the files.
"""

from __future__ import annotations

import csv
from pathlib import Path

ITER = 0.43e-6  # ticks per loop iteration
FORK = 0.36  # ticks between two forks
EXIT = 0.01  # ticks of CPU of a child that exits at once

HERE = Path(__file__).resolve().parent / "traces"


def write(name: str, rows: list[tuple[str, float, int | None]]) -> None:
    """rows: (class, size, priority); the i-th child arrives at i * FORK."""
    with open(HERE / name, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        prio = any(p is not None for _, _, p in rows)
        w.writerow(["arrival", "size", "class"] + (["priority"] if prio else []))
        for i, (cls, size, p) in enumerate(rows):
            w.writerow([f"{i * FORK:.2f}", f"{size:.6g}", cls] + ([p] if prio else []))


def tests(priorities: bool) -> dict[str, list[tuple[str, float, int | None]]]:
    def p(value: int) -> int | None:
        return value if priorities else None

    heavy, light, io = 20_000_000 * ITER, 50_000 * ITER, 10 * 100_000 * ITER
    return {
        # 10 processes of 20M iterations (8.6 ticks each).
        "cpu-heavy": [("cpu", heavy, p(5))] * 10,
        # 200 fork + exit + wait cycles.
        "switch-overhead": [("exit", EXIT, p(5))] * 200,
        # timing: 100 processes; priority: 50, the first 25 at priority 5, the last 25 at 0.
        # Each: 10 bursts of 100k iterations with a 1-tick sleep between (class io).
        "io-bound": ([("io", io, None)] * 100 if not priorities
                     else [("io", io, 5)] * 25 + [("io", io, 0)] * 25),
        # 5 sleepers (50 ticks, priority 10) forked first, then 5 of 50M iterations (priority 0).
        "mixed": [("sleep50", EXIT, p(10))] * 5 + [("cpu", 50_000_000 * ITER, p(0))] * 5,
        # 50 forks of children that exit at once.
        "process-creation": [("exit", EXIT, p(5))] * 50,
        # 200 children of 10k iterations (forked in batches of 50).
        "short-tasks": [("short", 10_000 * ITER, p(5))] * 200,
        # 1 light child (50k iterations, priority 0) forked first, then 5 heavy (priority 10).
        "starvation": [("light", light, p(0))] + [("cpu", heavy, p(10))] * 5,
    }


if __name__ == "__main__":
    HERE.mkdir(exist_ok=True)
    for i, (name, rows) in enumerate(tests(False).items(), 1):
        write(f"timing-{i}-{name}.csv", rows)
    for i, (name, rows) in enumerate(tests(True).items(), 1):
        write(f"priority-{i}-{name}.csv", rows)

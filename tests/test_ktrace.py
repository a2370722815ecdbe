"""The parser of the kernel's trace of migrations (`trace_migrations`, schedlab.osrun.ktrace),
on excerpts of this machine's real trace (tests/data/ktrace_moves.txt): each move's path is
read from the kernel's stack, or from its context when the kernel gave none."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from schedlab.osrun.ktrace import parse

DATA = Path(__file__).parent / "data" / "ktrace_moves.txt"


def test_each_move_gets_the_path_its_stack_or_context_names():
    moves = parse(DATA.read_text())
    got = [(m["pid"], m["from_cpu"], m["to_cpu"], m["path"], m["running"]) for m in moves]
    assert [m["running_pid"] for m in moves] == [21, 102, 0, 0, 0, 102, 23720, 21]
    assert got == [
        # The stopper moves a task whose CPU left its mask, then wakes it: affinity, not a
        # wake-up, although try_to_wake_up is on the stack.
        (101, 1, 0, "affinity", "migration/1"),
        (69, 0, 1, "wake-up", "schedlab-os"),
        # An idle CPU's periodic balance in its softirq: the kernel gives no stack there.
        (102, 0, 1, "idle balance", "idle"),
        (103, 0, 1, "idle balance", "idle"),
        (104, 0, 1, "idle balance", "idle"),
        (105, 0, 1, "busy balance", "schedlab-os"),
        (101, 0, 1, "newly-idle balance", "memfd:sealed-91"),
        (101, 1, 1, "other", "migration/1"),  # no stack, not a softirq: unknown
    ]
    assert moves[0]["time"] == 50143.030490 and moves[-2]["time"] == 50143.501559


def test_a_move_the_trace_missed_makes_the_first_move_unknown():
    """The kernel's counter (se.nr_migrations) and its trace come from the same line of
    set_task_cpu and agree in nearly every run, but the trace in 2 runs of about 110 lacked
    a move the counter has. A CI run of 2026-11-27 (3 tasks pinned to CPU 0, released at
    200 ms): the load samples had a task on CPU 1 from 220 ms, the trace's first move after
    the release came at 336.9 ms, and task 0 had 4 moves counted against 3 traced. The first
    move is then unknown, not the later one the trace holds."""
    import pandas as pd
    from schedlab.osrun.build import _first_move, _moves_missed

    moves = pd.DataFrame({"time": [-1.127, -1.056, 336.9, 428.9, 516.9, 604.9],
                          "task": [1, 2, 2, 0, 0, 2], "from_cpu": [1, 1, 0, 1, 0, 1],
                          "to_cpu": [0, 0, 1, 0, 1, 0], "path": ["affinity"] * 2 +
                          ["busy balance"] * 4})
    raw = {"tasks": [{"released_ms": 200.0}, {"released_ms": 200.01}, {"released_ms": 200.02}]}
    plan = {"tasks": [{"release_after": 200.0}] * 3}
    counted = pd.Series({0: 2.0, 1: 0.0, 2: 2.0})  # as traced from the start on
    assert _moves_missed(moves, counted) == 0
    first = _first_move(raw, plan, moves, 0)
    assert first["first_move"] == pytest.approx(136.9) and first["first_move_tasks"] == 1
    assert first["first_move_path"] == "busy balance"
    counted[0] = 3.0  # the kernel counted one more move of task 0 than its trace holds
    assert _moves_missed(moves, counted) == 1
    assert _first_move(raw, plan, moves, 1) == {"first_move": pytest.approx(math.nan,
                                                                            nan_ok=True),
                                                "first_move_path": None, "first_move_tasks": 0}
    # Without the counters (schedstat hidden) nothing can be said.
    assert _moves_missed(moves, pd.Series({0: math.nan, 1: 0.0, 2: 2.0})) is None

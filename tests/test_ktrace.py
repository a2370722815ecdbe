"""The parser of the kernel's trace of migrations (`trace_migrations`, schedlab.osrun.ktrace),
on excerpts of this machine's real trace (tests/data/ktrace_moves.txt): each move's path is
read from the kernel's stack, or from its context when the kernel gave none."""

from __future__ import annotations

from pathlib import Path

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

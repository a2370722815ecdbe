"""A timer's overshoot on this machine: how late a process wakes from a sleep to an absolute
deadline, one sleep at a time (`schedlab calibrate os`, terms `timer` and `timer_other`).

`overshoots` starts `python -I -S timer.py CPU N SLEEP_NS FIFO`, which pins itself to CPU
and sleeps N times to a deadline SLEEP_NS ahead (clock_nanosleep on CLOCK_MONOTONIC, as the
workers' futex waits: both are hrtimers) under SCHED_OTHER and, when FIFO is 1, N times under
SCHED_FIFO (priority 10, as the os world's kernel batches) in turns with them, and prints, as
JSON, each wake-up's lateness and the timer slack the kernel gave each policy. The kernel
applies no slack to real-time processes, so under SCHED_OTHER the overshoot carries the slack
(50 us by default) and under FIFO it does not. The child imports nothing of schedlab (no numpy
threads, nothing to wake it) and dies with its parent (schedlab.lifetime's environment
variable).
"""

import json
import os
import sys
import time


def _probe(cpu: int, n: int, sleep_ns: int, fifo: bool) -> dict:
    """n sleeps under each policy asked for, taken in turns (SCHED_FIFO, then SCHED_OTHER, and
    again), so that both meet the machine in the same state: its wake-up latency moves between
    runs a minute apart (a median of 25 us in one, 55 us in the next)."""
    os.sched_setaffinity(0, {cpu})
    policies = {"fifo": (os.SCHED_FIFO, 10), "other": (os.SCHED_OTHER, 0)} if fifo else \
        {"other": (os.SCHED_OTHER, 0)}
    clock = time.CLOCK_MONOTONIC
    late: dict[str, list[int]] = {name: [] for name in policies}
    slack: dict[str, int] = {}
    for _ in range(n):
        for name, (policy, priority) in policies.items():
            os.sched_setscheduler(0, policy, os.sched_param(priority))
            if name not in slack:
                with open("/proc/self/timerslack_ns") as f:
                    slack[name] = int(f.read())
            deadline = time.clock_gettime_ns(clock) + sleep_ns
            time.sleep(sleep_ns / 1e9)
            late[name].append(time.clock_gettime_ns(clock) - deadline)
    return {"slack_ns": slack, "overshoot_ns": late}


def overshoots(cpu: int, n: int, sleep_ms: float, fifo: bool = True) -> dict:
    """`n` sleeps of `sleep_ms` on `cpu` in a fresh process, under SCHED_OTHER and, if `fifo`,
    in turns with as many under SCHED_FIFO: {"other": {"overshoot_ms": [...], "slack_ns":
    the process's timer slack}, "fifo": {...}}. Raises PermissionError when the kernel
    refuses SCHED_FIFO."""
    import subprocess

    from schedlab.lifetime import child_env

    proc = subprocess.run(
        [sys.executable, "-I", "-S", __file__, str(cpu), str(n), str(int(sleep_ms * 1e6)),
         "1" if fifo else "0"],
        capture_output=True, text=True, env=child_env(),
        timeout=60 + 10 * (2 * n * sleep_ms) / 1000)  # ten times the sleeps' own length
    if proc.returncode == 3:
        raise PermissionError(proc.stderr.strip())
    if proc.returncode != 0:
        raise RuntimeError(f"the timer probe failed: {proc.stderr.strip()}")
    out = json.loads(proc.stdout)
    return {name: {"overshoot_ms": [v / 1e6 for v in late], "slack_ns": out["slack_ns"][name]}
            for name, late in out["overshoot_ns"].items()}


if __name__ == "__main__":
    parent = os.environ.get("SCHEDLAB_DIE_WITH", "")
    if parent.isdigit():  # as schedlab.lifetime.die_with_parent, which this may not import
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != int(parent):
            os._exit(1)
    cpu_arg, n_arg, sleep_arg, fifo_arg = sys.argv[1:5]
    try:
        result = _probe(int(cpu_arg), int(n_arg), int(sleep_arg), fifo_arg == "1")
    except PermissionError as e:
        print(f"SCHED_FIFO refused: {e}", file=sys.stderr)
        sys.exit(3)
    print(json.dumps(result))

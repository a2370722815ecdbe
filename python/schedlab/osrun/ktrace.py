"""The kernel's own record of the workers' moves between CPUs (`trace_migrations`).

The load samples say where each worker was every `load_sample` ms; they do not say which part
of the kernel moved it. The kernel's trace does: ftrace's `sched_migrate_task` event fires in
`set_task_cpu` for every move, and with the `stacktrace` option the stack says who called it:
the periodic balance of an idle or a busy CPU (`sched_balance_domains`, from the timer's
softirq), the newly-idle balance of a CPU about to go idle (`sched_balance_newidle`), the
active balance's stopper, a wake-up's placement (`try_to_wake_up`), or an affinity change.
Study 002's question (how long until the kernel balances a pinned start) has two answers on
today's kernels depending on which of these comes first (experiments/smp-balancing/README.md).

The trace uses its own tracefs instance (`instances/schedlab-<pid>-<n>`), so it neither sees
nor disturbs another tracer; the instance is removed when the run ends, however it ends, and
the instances of schedlab processes killed with SIGKILL by the next traced run. The
launcher names itself `schedlab-os` before it forks the workers, so the kernel filters the
event by name and the stacks are taken for the run's processes only; the workers are then
picked out by pid. The instance's clock is CLOCK_MONOTONIC, the coordinator's.
"""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path

from schedlab.vocabulary import spec_error

# The name the launcher and its workers take (prctl PR_SET_NAME; at most 15 bytes).
WORKER_COMM = "schedlab-os"
ROOTS = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))
EVENT = "events/sched/sched_migrate_task"
BUFFER_KB = 4096  # per CPU: ~20,000 moves with their stacks
_instances = itertools.count()

# The path that moved a task, from its stack (first match wins), else from its context.
# An affinity change moves a task through the stopper (`migration_cpu_stop`), which wakes it
# on its new CPU: that stack has try_to_wake_up too, so the callers come before it.
PATHS = (
    ("sched_balance_newidle", "newly-idle balance"),
    ("active_load_balance_cpu_stop", "active balance"),
    ("migration_cpu_stop", "affinity"),
    ("set_cpus_allowed", "affinity"),
    ("wake_up_new_task", "fork"),
    ("sched_exec", "exec"),
    ("try_to_wake_up", "wake-up"),
    ("sched_balance_domains", "periodic balance"),
)
# A move's first line: task-pid [cpu] flags seconds: sched_migrate_task: comm=... pid=...
_EVENT_LINE = re.compile(
    r"^\s*(?P<ctx>.+?)-(?P<ctxpid>\d+)\s+\[(?P<cpu>\d+)\]\s+(?P<flags>\S+)\s+"
    r"(?P<t>\d+\.\d+): sched_migrate_task: comm=(?P<comm>.*?) pid=(?P<pid>\d+) "
    r"prio=-?\d+ orig_cpu=(?P<orig>\d+) dest_cpu=(?P<dest>\d+)")


def tracefs_root(hidden: bool = False) -> Path | None:
    """The tracefs mount with the migration event, if this process may write to it."""
    if hidden:
        return None
    for root in ROOTS:
        if (root / EVENT / "enable").exists() and os.access(root / "instances", os.W_OK):
            return root
    return None


def check_tracefs(hidden: bool = False) -> Path:
    """Raises the key's error when the kernel's trace is not available to this process."""
    root = tracefs_root(hidden)
    if root is None:
        raise spec_error("trace_migrations", "true",
                         "tracefs mounted at /sys/kernel/tracing with the sched_migrate_task "
                         "event and writable instances (root); this machine has none"
                         + (" (hidden by pretend_missing)" if hidden else ""))
    return root


class MigrationTrace:
    """One tracefs instance recording the moves of processes named WORKER_COMM, with stacks.

        with MigrationTrace() as trace:   # before the launcher forks its workers
            ...run...
        text = trace.text                 # read when the block ends
    """

    def __init__(self) -> None:
        self.root = check_tracefs()
        remove_stale_instances(self.root)
        self.dir = self.root / "instances" / f"schedlab-{os.getpid()}-{next(_instances)}"
        self.text = ""
        self.lost = 0

    def _write(self, rel: str, value: str) -> None:
        (self.dir / rel).write_text(value)

    def __enter__(self) -> MigrationTrace:
        self.dir.mkdir()
        try:
            self._write("trace_clock", "mono")
            self._write("buffer_size_kb", str(BUFFER_KB))
            self._write("options/stacktrace", "1")
            self._write(f"{EVENT}/filter", f'comm == "{WORKER_COMM}"')
            self._write(f"{EVENT}/enable", "1")
            self._write("tracing_on", "1")
        except BaseException:
            self._remove()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._write("tracing_on", "0")
            self.text = (self.dir / "trace").read_text(errors="replace")
            self.lost = sum(_overrun(p) for p in (self.dir / "per_cpu").glob("cpu*/stats"))
        finally:
            self._remove()

    def _remove(self) -> None:
        try:
            self._write(f"{EVENT}/enable", "0")
        except OSError:
            pass
        try:
            self.dir.rmdir()  # removes the instance and its buffers
        except OSError:
            pass


def remove_stale_instances(root: Path) -> list[str]:
    """Removes the instances of schedlab processes that no longer exist (a run killed with
    SIGKILL cannot remove its own; each holds a ring buffer per CPU); returns their names."""
    removed = []
    for inst in (root / "instances").glob("schedlab-*-*"):
        pid = inst.name.split("-")[1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            try:
                (inst / EVENT / "enable").write_text("0")
                inst.rmdir()
                removed.append(inst.name)
            except OSError:
                pass
    return removed


def _overrun(stats: Path) -> int:
    m = re.search(r"^overrun: (\d+)", stats.read_text(), re.M)
    return int(m.group(1)) if m else 0


def parse(text: str) -> list[dict[str, object]]:
    """The moves in a trace's text: time (s, the trace clock), pid, comm, from_cpu, to_cpu,
    path (PATHS; from the context when the kernel gave no stack: a move made in a softirq on
    the destination CPU is its periodic balance, `idle balance` when that CPU was idle and
    `busy balance` when not), and the task that was running where the move was made (its
    name and pid; 0 for the idle task)."""
    moves: list[dict[str, object]] = []
    for block in re.split(r"\n(?=[^\n]*: sched_migrate_task: )", text):
        m = _EVENT_LINE.search(block)
        if m is None:
            continue
        stack = block[m.end():]
        path = next((name for fn, name in PATHS if fn in stack), None)
        idle = m["ctx"] == "<idle>" and m["ctxpid"] == "0"
        softirq = len(m["flags"]) > 2 and m["flags"][2] in "sS"
        if path == "periodic balance" or (path is None and softirq and
                                          int(m["cpu"]) == int(m["dest"])):
            path = "idle balance" if idle else "busy balance"
        moves.append({
            "time": float(m["t"]), "pid": int(m["pid"]), "comm": m["comm"],
            "from_cpu": int(m["orig"]), "to_cpu": int(m["dest"]), "path": path or "other",
            "running": "idle" if idle else m["ctx"].strip(), "running_pid": int(m["ctxpid"]),
        })
    return moves

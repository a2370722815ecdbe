"""The noise gate's rule, one for every real world: how much CPU others used on the machine
while a run measured, and whether that flags the run noisy.

A real run (the os world's processes, the server world's server and load generator) shares the
machine with whatever else runs on it. `/proc/stat` counts every CPU's busy and stolen time in
USER_HZ ticks; what the run's own processes used is subtracted, and the rest is others'
(`foreign`). A run is noisy when others used more than `threshold` of its CPUs beyond
`/proc/stat`'s resolution (about one tick per CPU either way, so that a run of a few ms is not
flagged by the rounding alone), or the hypervisor stole more than 2% of them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

# Steal beyond the resolution that flags a run (a fraction of its CPUs' capacity).
STEAL_THRESHOLD = 0.02
# A file this names gets one JSON line per disturbed real run (log_disturbed).
LOG_ENV = "SCHEDLAB_NOISE_LOG"


def user_hz() -> int:
    return os.sysconf("SC_CLK_TCK")


def cpu_ticks(cpus: list[int] | None = None) -> tuple[int, int]:
    """Busy (user, nice, system, irq, softirq) and steal USER_HZ ticks of the given CPUs
    (all of them: None), from /proc/stat."""
    busy = steal = 0
    try:
        with open("/proc/stat") as f:
            lines = f.read().splitlines()
    except OSError:
        return 0, 0
    for line in lines:
        parts = line.split()
        if not parts or not parts[0].startswith("cpu") or parts[0] == "cpu":
            continue
        if cpus is not None and int(parts[0][3:]) not in cpus:
            continue
        v = [int(x) for x in parts[1:]]
        busy += v[0] + v[1] + v[2] + v[5] + v[6]
        steal += v[7] if len(v) > 7 else 0
    return busy, steal


def verdict(busy_ms: float, steal_ms: float, ours_ms: float, wall_ms: float, cpus: int,
            threshold: float, hz: int | None = None) -> dict[str, Any]:
    """Others' CPU time over a run of `wall_ms` on `cpus` CPUs whose counters read `busy_ms`
    and `steal_ms` while its own processes used `ours_ms`, and whether the run is noisy."""
    hz = hz or user_hz()
    capacity = wall_ms * cpus
    foreign = max(0.0, busy_ms - ours_ms)
    frac = foreign / capacity if capacity > 0 else float("nan")
    steal_frac = steal_ms / capacity if capacity > 0 else float("nan")
    resolution_ms = 1000 / hz * cpus
    reasons = []
    if foreign - resolution_ms > threshold * capacity:
        reasons.append(f"others used {frac:.1%} of the run's CPUs (threshold {threshold:.0%}, "
                       f"beyond /proc/stat's resolution of {resolution_ms:g} ms)")
    if steal_ms - resolution_ms > STEAL_THRESHOLD * capacity:
        reasons.append(f"the hypervisor stole {steal_frac:.1%} of the run's CPUs")
    return {
        "foreign_cpu_ms": foreign,
        "foreign_fraction": frac,
        "steal_ms": steal_ms,
        "steal_fraction": steal_frac,
        "busy_ms": busy_ms,
        "ours_ms": ours_ms,
        "noisy": bool(reasons),
        "noise_reasons": reasons,
        "resolution_ms": resolution_ms,
    }


def process_cpu_ms(pid: int) -> float | None:
    """CPU time (user + system, every thread) a live process has used so far, from
    /proc/PID/stat; None if it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # After the command: state is field 3, utime 14 and stime 15 (1-based in proc(5)).
    return (int(fields[11]) + int(fields[12])) * 1000 / user_hz()


def log_disturbed(world: str, summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """Appends a finished real run that the machine disturbed to the file `SCHEDLAB_NOISE_LOG`
    names, as one JSON line, and returns the record (None: not disturbed, or no log asked for).

    Disturbed: flagged noisy after its retries, or with jobs the machine stalled under
    (`unaccounted_jobs`, counted under a dispatcher too, where they do not flag the run). The
    log is how a harness that runs schedlab, in its own process or in processes it starts,
    learns that a measurement it asked for was disturbed: the test suite's gate
    (tests/noise_gate.py) reruns a failed real test on that evidence."""
    path = os.environ.get(LOG_ENV)
    stalled = int(summary.get("unaccounted_jobs") or 0)
    if not path or (not summary.get("noisy") and stalled == 0):
        return None
    record = {"world": world, "pid": os.getpid(), "noisy": bool(summary.get("noisy")),
              "reasons": list(summary.get("noise_reasons") or []), "stalled_jobs": stalled,
              "unaccounted_max_ms": float(summary.get("unaccounted_max") or 0.0)}
    # One write of one line in append mode: lines of concurrent runs do not interleave.
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")
    return record


def describe_disturbed(record: Mapping[str, Any]) -> str:
    """One line for a record of log_disturbed."""
    parts = list(record["reasons"])
    if record["stalled_jobs"] and not any("stalled" in r for r in parts):
        parts.append(f"the machine stalled under {record['stalled_jobs']} job(s), up to "
                     f"{record['unaccounted_max_ms']:.1f} ms that no counter placed")
    article = "an" if record["world"][0] in "aeiou" else "a"
    return f"{article} {record['world']} run it measured: {'; '.join(parts)}"

"""The environment of an os run, and the noise gate.

Kernel-policy results depend on the kernel (version, HZ, preemption mode), on the machine and on
whatever else runs on it: autogroups weigh whole sessions against each other, so another build
on the same machine can change a CFS result by 2x. Every run records what it ran on and how much
CPU others used meanwhile, and a trial is flagged noisy rather than reported silently.
"""

from __future__ import annotations

import gzip
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import schedlab._core as _core
from schedlab import noise
from schedlab.noise import cpu_ticks
from schedlab.vocabulary import KERNEL_POLICIES

MISSING = "missing"


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def kernel_config() -> dict[str, str] | None:
    """The running kernel's build configuration, if the kernel exposes it."""
    for path in ("/proc/config.gz", f"/boot/config-{platform.release()}"):
        try:
            raw = gzip.open(path).read() if path.endswith(".gz") else open(path, "rb").read()
        except OSError:
            continue
        out = {}
        for line in raw.decode(errors="replace").splitlines():
            if line.startswith("CONFIG_") and "=" in line:
                k, _, v = line.partition("=")
                out[k] = v
        return out
    return None


def _hz(config: dict[str, str] | None) -> tuple[int | None, str]:
    if config and "CONFIG_HZ" in config:
        return int(config["CONFIG_HZ"]), "CONFIG_HZ of the kernel configuration"
    return None, "missing: no /proc/config.gz or /boot/config-* to read CONFIG_HZ from"


def _preemption(config: dict[str, str] | None, cmdline: str) -> tuple[str | None, str]:
    live = _read("/sys/kernel/debug/sched/preempt")
    if live:
        # "none (voluntary) full": the active mode is in parentheses.
        for word in live.split():
            if word.startswith("(") and word.endswith(")"):
                return word.strip("()"), "/sys/kernel/debug/sched/preempt"
    for arg in cmdline.split():
        if arg.startswith("preempt="):
            return arg.split("=", 1)[1], "kernel command line"
    if config:
        for mode in ("NONE", "VOLUNTARY", "LAZY", "RT"):
            if config.get(f"CONFIG_PREEMPT_{mode}") == "y":
                dyn = " (PREEMPT_DYNAMIC: default of the build)" if config.get(
                    "CONFIG_PREEMPT_DYNAMIC") == "y" else ""
                return mode.lower(), f"kernel configuration{dyn}"
        if config.get("CONFIG_PREEMPT") == "y":
            return "full", "kernel configuration"
    return None, "missing: no debugfs, no preempt= argument and no kernel configuration"


def _cpu_model() -> str | None:
    text = _read("/proc/cpuinfo") or ""
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return None


def _fs_type(path: str) -> str | None:
    best, fstype = "", None
    for line in (_read("/proc/mounts") or "").splitlines():
        parts = line.split()
        if len(parts) >= 3 and path.startswith(parts[1]) and len(parts[1]) >= len(best):
            best, fstype = parts[1], parts[2]
    return fstype


def record(io_dir: str | None = None) -> dict[str, Any]:
    """What a reader needs to judge and rerun an os measurement."""
    from schedlab.results import environment

    env = environment()
    config = kernel_config()
    cmdline = _read("/proc/cmdline") or ""
    hz, hz_source = _hz(config)
    preempt, preempt_source = _preemption(config, cmdline)
    caps = json.loads(_core.os_capabilities())
    env.update({
        "world": "os",
        "kernel_release": platform.release(),
        "kernel_version": platform.version(),
        "kernel_cmdline": cmdline,
        "hz": hz,
        "hz_source": hz_source,
        "preemption": preempt,
        "preemption_source": preempt_source,
        "schedstats": (config or {}).get("CONFIG_SCHEDSTATS", "not set") if config else None,
        "autogroup_enabled": _read("/proc/sys/kernel/sched_autogroup_enabled"),
        "cpu_model": _cpu_model(),
        "cpus_online": os.cpu_count(),
        "cpus_allowed": sorted(os.sched_getaffinity(0)),
        "rt_runtime_us": caps["rt_runtime_us"],
        "rt_period_us": caps["rt_period_us"],
        "rt_throttling": caps["rt_throttling"],
        "cgroup_rt_runtime_us": caps["cgroup_rt_runtime_us"],
        "kernel_allows": {k: caps[k]["ok"] for k in KERNEL_POLICIES},
        "kernel_refuses": {k: caps[k]["reason"] for k in KERNEL_POLICIES if not caps[k]["ok"]},
        "loadavg": _read("/proc/loadavg"),
    })
    if io_dir:
        env["io_dir"] = io_dir
        env["io_dir_fs"] = _fs_type(os.path.realpath(io_dir))
    return env


def machine_busy(cpus: list[int], window_s: float = 0.25) -> float:
    """Fraction of the given CPUs busy with anything (this process is idle meanwhile)."""
    hz = os.sysconf("SC_CLK_TCK")
    b0, s0 = cpu_ticks(cpus)
    time.sleep(window_s)
    b1, s1 = cpu_ticks(cpus)
    return ((b1 - b0) + (s1 - s0)) / hz / (window_s * len(cpus))


def wait_for_quiet(cpus: list[int], threshold: float, max_wait_ms: float) -> dict[str, Any]:
    """The noise gate: waits (bounded) until others use less than `threshold` of the CPUs."""
    start = time.monotonic()
    readings = []
    window = 0.25 if max_wait_ms > 0 else 0.1
    while True:
        busy = machine_busy(cpus, window)
        readings.append(round(busy, 4))
        waited = (time.monotonic() - start) * 1000
        if busy <= threshold:
            return {"quiet": True, "waited_ms": waited, "busy_before": busy,
                    "readings": readings[-20:]}
        if waited >= max_wait_ms:
            return {"quiet": False, "waited_ms": waited, "busy_before": busy,
                    "readings": readings[-20:]}


def foreign_load(raw: dict[str, Any], cpus: list[int], threshold: float,
                 stalls: list[float]) -> dict[str, Any]:
    """CPU time others used on the run's CPUs during the run, and steal; flags noise, and a run
    that the machine stalled under (`stalls`: the unaccounted ms of each job it stalled under;
    a hypervisor's steal in a short run is below /proc/stat's resolution)."""
    hz = raw["user_hz"]
    before, after = raw["cpu_times_before"], raw["cpu_times_after"]

    def ticks(t: dict[str, Any], field: str) -> int:
        return sum(v for name, v in zip(t["cpu"], t[field], strict=True)
                   if name != "cpu" and int(name[3:]) in cpus)

    busy = sum(ticks(after, f) - ticks(before, f)
               for f in ("user", "nice", "system", "irq", "softirq"))
    steal = ticks(after, "steal") - ticks(before, "steal")
    busy_ms = busy * 1000 / hz
    steal_ms = steal * 1000 / hz
    ours = raw["coordinator"]["cpu_ms"]
    for t in raw["tasks"]:
        b, e = t["base"]["cpu_ns"], t["end"]["cpu_ns"]
        if b is not None and e is not None:
            ours += (e - b) / 1e6
        else:
            ours += t["utime_ms"] + t["stime_ms"]
    verdict = noise.verdict(busy_ms, steal_ms, ours, raw["wall_ms"], len(cpus), threshold, hz)
    verdict["unaccounted_jobs"] = len(stalls)
    if stalls:
        verdict["noisy"] = True
        verdict["noise_reasons"].append(
            f"the machine stalled under {len(stalls)} job(s): up to {max(stalls):.1f} ms of a "
            "job's response was neither its run-queue wait nor its CPU time or I/O (a "
            "hypervisor's steal is taken off the task's CPU clock)")
    return verdict

"""The os world: real Linux processes, under the kernel's policies or a schedlab policy
enforced from user space. Orchestration lives here (spawn, measure, clean up); the forking,
the workers and the dispatcher are Rust (`crates/dispatch`).

    from schedlab import osrun
    r = osrun.run({"clients": 2, "size": 200, "jobs": 2, "cpus": [0],
                   "classes": [{"nice": 0}, {"nice": 5}]})
    r.tasks[["task", "nice", "cpu_time", "share", "entitled"]]

`run(spec)` returns a `schedlab.results.Result` in the common schema (see docs/os.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import schedlab._core as _core
from schedlab.clikit import status
from schedlab.noise import log_disturbed
from schedlab.osrun import env as envmod
from schedlab.osrun.ktrace import MigrationTrace
from schedlab.osrun.spec import NATIVE_CLASS_KEYS, NATIVE_KEYS, build_plan
from schedlab.vocabulary import spec_error

# Whether to show the wait for a quiet machine: `schedlab os` sets None (on a terminal, yes);
# the Python API and a sweep's workers (under a sweep's progress bar) stay silent.
announce: bool | None = False

if TYPE_CHECKING:
    from schedlab.results import Result

__all__ = ["run", "validate", "capabilities", "Refused", "Interrupted", "NATIVE_KEYS",
           "NATIVE_CLASS_KEYS", "build_plan"]

LAUNCHER = Path(__file__).with_name("launcher.py")


class Refused(RuntimeError):
    """The kernel does not allow what the spec asks (a policy, an RT budget). `.what` and
    `.reason` say which and why; callers report the run as skipped, with the reason."""

    def __init__(self, what: str, reason: str):
        super().__init__(f"kernel refused {what}: {reason}")
        self.what, self.reason = what, reason


class Interrupted(RuntimeError):
    """The run was interrupted (SIGTERM/SIGINT to the launcher, or the launcher killed);
    every worker was reaped."""


def capabilities() -> dict[str, Any]:
    """What this kernel allows this process: per policy {ok, reason}, RT throttling, the
    cgroup's RT budget, usable CPUs. Probed on a short-lived thread; nothing changes."""
    return json.loads(_core.os_capabilities())


def _session_members(sid: int) -> list[int]:
    """Processes (zombies included) whose session is `sid`."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2:].split()
        if len(fields) > 3 and int(fields[3]) == sid:
            out.append(int(entry))
    return out


def _stop_launcher(proc: subprocess.Popen[str]) -> None:
    """SIGTERM: the coordinator kills and reaps its workers, then exits. If it does not within
    5 s, SIGKILL to the whole session (the workers die with it: PR_SET_PDEATHSIG)."""
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()


def _launch(plan: dict[str, Any], trace: MigrationTrace | None = None
            ) -> tuple[dict[str, Any], int]:
    """Runs a plan in a fresh launcher process, in a new session; returns (raw, launcher pid).
    With `trace`, the kernel's trace of the workers' moves is recorded for the whole run."""
    timeout = plan["hard_timeout"] / 1000 + 30 + 0.05 * len(plan["tasks"])
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", str(LAUNCHER), _core.__file__, str(os.getpid())],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )
    try:
        # The launcher forks its workers only once it has the plan: the trace starts first.
        with trace or contextlib.nullcontext():
            out, err = proc.communicate(json.dumps(plan), timeout=timeout)
    except BaseException:
        # Ctrl-C, a timeout, anything: nothing of the run may survive it.
        _stop_launcher(proc)
        raise
    finally:
        left = _session_members(proc.pid)
        if left:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    if proc.returncode < 0:
        # Killed from outside (kill -9, the OOM killer): its workers died with it
        # (PR_SET_PDEATHSIG) and the session's stragglers were killed above.
        name = signal.Signals(-proc.returncode).name
        raise Interrupted(f"the os launcher was killed by {name}; its workers died with it "
                          "and nothing of the run is left")
    if proc.returncode != 0 or not out:
        raise RuntimeError(f"the os launcher failed (exit {proc.returncode}): "
                           f"{err.strip()[-2000:]}")
    reply = json.loads(out)
    if "error" in reply:
        e = reply["error"]
        kind = e.get("kind")
        if kind == "spec":
            raise spec_error(e["key"], e["value"], e["allowed"])
        if kind == "refused":
            raise Refused(e["what"], e["reason"])
        if kind == "interrupted":
            raise Interrupted(e["message"])
        raise RuntimeError(e["message"])
    return reply["output"], proc.pid


def validate(spec: dict[str, Any]) -> dict[str, Any]:
    """Checks an os spec without starting anything (the experiment runner calls this before a
    sweep writes anything); raises SpecError naming the key. Returns the plan."""
    plan, _options = build_plan(spec)
    _core.os_check(json.dumps(plan))
    return plan


def run(spec: dict[str, Any]) -> Result:
    """Runs one os experiment and returns a Result in the common schema.

    Raises SpecError (a ValueError naming the key, the value and what is allowed), Refused when
    the kernel forbids a policy, Interrupted when the launcher was told to stop.
    """
    from schedlab.osrun.build import build as build_result  # pandas: not at import time
    from schedlab.osrun.build import stalls

    plan, options = build_plan(spec)
    _core.os_check(json.dumps(plan))
    uses_dsync = any(t["io"] and "dsync" in t["io"] for t in plan["tasks"])
    environment = envmod.record(plan["io_dir"] if uses_dsync else None)
    cpus = plan["cpus"]
    attempts = []
    for _attempt in range(options["retry_noisy"] + 1):
        with status(f"waiting up to {options['quiet_wait'] / 1000:g} s for a quiet machine "
                    f"(CPUs {cpus}: others' use under {options['noise_threshold']:g})",
                    enabled=announce):
            gate = envmod.wait_for_quiet(cpus, options["noise_threshold"],
                                         options["quiet_wait"])
        started = time.time()
        trace = MigrationTrace() if options["trace_migrations"] else None
        raw, launcher = _launch(plan, trace)
        if trace is not None:
            raw["kernel_trace"] = {"text": trace.text, "lost": trace.lost}
        # A stall is judged under the kernel's policies only: under a dispatcher a job's
        # response also holds hand-offs its counters do not place (docs/os.md).
        noise = envmod.foreign_load(raw, cpus, options["noise_threshold"],
                                    stalls(raw) if plan.get("dispatcher") is None else [])
        noise["gate"] = gate
        noise["started"] = started
        noise["launcher_pid"] = launcher
        attempts.append({k: noise[k] for k in ("noisy", "foreign_fraction", "steal_fraction",
                                                "noise_reasons")})
        if not noise["noisy"]:
            break
    noise["attempts"] = attempts
    result = build_result(raw, plan, options, spec, environment, noise)
    result.summary["attempts"] = len(attempts)
    result.summary["quiet_before"] = noise["gate"]["quiet"]
    log_disturbed("os", result.summary)
    result.raw = raw
    result.plan = plan
    return result

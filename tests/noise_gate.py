"""The worlds' noise gate one level up: the tests that measure the machine (`-m real`), run
again where they failed on a disturbed machine.

A real world reruns a trial its noise gate flags (`retry_noisy`, schedlab.noise); the tests of
those worlds had no such rule of their own, and on a shared host 10 of them once failed on
timing in one CI run under 20%+ steal. Here each real test is watched as a world's run is,
from the start of its setup to the end of the phase that failed: a failure while the
hypervisor stole more than `schedlab.noise.STEAL_THRESHOLD` of the machine's CPUs beyond
/proc/stat's resolution, or beside a real run it measured that the machine disturbed (flagged
noisy after its own retries, or with jobs the machine stalled under: steal too short for
/proc/stat's 10 ms ticks, which the jobs' own counters see; schedlab.noise.log_disturbed), is
a noisy failure, and `make test` runs those tests again in a new pytest process, up to
`RETRIES` times, each after waiting for a quiet window, saying so in its output. The evidence
of a run is coarse on purpose: any disturbed run of the test counts, not only the one an
assertion read, since a retry costs minutes and a failure that stays still fails.
Any other failure (a quiet one, one too short to judge, a collection error, a session stopped
early, a crash) fails at once, and so does one still failing after the retries: no
assertion is loosened, a test only gets another, quieter machine to pass on.

`python tests/noise_gate.py [pytest options]` runs `pytest -m real` this way (options, not
test paths: a retry names the tests it runs again, and a path would select more).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from schedlab import noise

RETRIES = 2
# Before a retry, the gate waits (up to QUIET_WAIT_S) for a window of QUIET_PROBE_S in which the
# hypervisor stole no more than it allows, sleeping a millisecond at a time: steal accrues on
# an idle guest's wake-ups (a sleep-heavy run saw 9-49% while two busy loops saw 2.5%), so a
# probe that only slept would find any machine quiet.
QUIET_PROBE_S, QUIET_WAIT_S = 3.0, 90.0
# Where each pytest run writes what the gate saw (JSON: the failed tests' verdicts by node id,
# whether the session stopped early, the root directory the node ids are relative to).
VERDICTS_ENV = "SCHEDLAB_NOISE_VERDICTS"
PROPERTY = "noise_gate"  # the verdict's name among a report's user_properties


def disturbed_log() -> Path | None:
    """The file this process's real runs log their disturbances to (schedlab.noise.LOG_ENV)."""
    path = os.environ.get(noise.LOG_ENV)
    return Path(path) if path else None


def log_offset() -> int:
    log = disturbed_log()
    return log.stat().st_size if log is not None and log.exists() else 0


def disturbed_since(offset: int) -> list[dict]:
    """The disturbed runs logged since `offset` (log_offset)."""
    log = disturbed_log()
    if log is None or not log.exists():
        return []
    with open(log, "rb") as f:
        f.seek(offset)
        return [json.loads(line) for line in f.read().decode().splitlines() if line.strip()]


def carry(records: list[dict]) -> None:
    """Logs again the disturbed runs of a measurement a shared fixture made earlier, for the
    test that reads it now: a result it reads is as disturbed as when it was measured."""
    log = disturbed_log()
    if log is not None and records:
        with open(log, "a") as f:
            f.write("".join(json.dumps({**r, "carried": True}) + "\n" for r in records))


def steal_verdict(steal_ticks: int, wall_ms: float, cpus: int | None = None,
                  hz: int | None = None) -> dict:
    """The hypervisor's steal over `wall_ms` on `cpus` CPUs (default: this machine's, at its
    USER_HZ), judged by the worlds' rule (only steal: a test's own processes are all the rest
    of what runs). A window shorter than /proc/stat's resolution (a tick per CPU) is too short
    to judge, and judged quiet."""
    cpus, hz = cpus or os.cpu_count() or 1, hz or noise.user_hz()
    v = noise.verdict(0.0, steal_ticks * 1000 / hz, 0.0, wall_ms, cpus, math.inf, hz)
    return {"steal_fraction": v["steal_fraction"], "steal_ms": v["steal_ms"],
            "wall_ms": wall_ms, "noisy": v["noisy"], "reasons": v["noise_reasons"],
            "judged": wall_ms * cpus >= v["resolution_ms"], "watched": True}


def _steal_ticks() -> int:
    return noise.cpu_ticks()[1]


# A test that read many disturbed runs (a cached experiment's) names this many of them and
# counts the rest, so its reason stays a line a reader takes in.
SHOWN_DISTURBED = 2


def _summarise(records: list[dict]) -> str:
    """One line for the disturbed runs past the ones named: how many, in which worlds, and the
    worst stall their jobs' counters saw."""
    worlds = ", ".join(sorted({r["world"] for r in records}))
    stalled = [r for r in records if r["stalled_jobs"]]
    line = f"{len(records)} more disturbed run(s) ({worlds})"
    if stalled:
        worst = max(r["unaccounted_max_ms"] for r in stalled)
        line += (f", {len(stalled)} with stalled jobs (up to "
                 f"{max(r['stalled_jobs'] for r in stalled)} job(s) in one run, "
                 f"up to {worst:.1f} ms that no counter placed)")
    return line


def with_disturbed(verdict: dict, records: list[dict]) -> dict:
    """A steal verdict with the disturbed runs the test measured meanwhile: any makes it noisy
    (the runs judged the machine, however short the test's own window)."""
    if not records:
        return {**verdict, "disturbed": []}
    described = [(noise.describe_disturbed(r), r) for r in records]
    lines = list(dict.fromkeys(line for line, _ in described))
    if len(lines) > SHOWN_DISTURBED:
        shown = set(lines[:SHOWN_DISTURBED])
        rest = [r for line, r in described if line not in shown]
        lines = [*lines[:SHOWN_DISTURBED], _summarise(rest)]
    reasons = [*verdict["reasons"], *lines]
    return {**verdict, "noisy": True, "judged": True, "reasons": reasons,
            "disturbed": records}


class NoiseGate:
    """The pytest plugin: watches each real test from the start of its setup and puts the
    verdict of each failed phase on its report; keeps every failure the session reports (on
    the controller too, under xdist: reports carry their verdicts there)."""

    def __init__(self, read_steal: Callable[[], int] = _steal_ticks,
                 cpus: int | None = None, hz: int | None = None):
        self.read_steal = read_steal
        self.cpus, self.hz = cpus, hz
        self.start = pytest.StashKey[tuple[float, int, int]]()
        self.failed: dict[str, dict] = {}

    def pytest_configure(self, config):
        # A log of its own for each pytest process (an xdist worker too), inherited by the
        # processes its tests start (a CLI run, a sweep's workers): its tests run one at a
        # time, so what a test's window logs is its own runs'.
        fd, path = tempfile.mkstemp(prefix="schedlab-disturbed-", suffix=".jsonl")
        os.close(fd)
        self.log = path
        os.environ[noise.LOG_ENV] = path

    def pytest_unconfigure(self, config):
        Path(self.log).unlink(missing_ok=True)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        if item.get_closest_marker("real") is not None:
            item.stash[self.start] = (time.monotonic(), self.read_steal(), log_offset())

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        start = item.stash.get(self.start, None)
        if start is not None and report.failed:
            wall_ms = (time.monotonic() - start[0]) * 1000
            verdict = with_disturbed(
                steal_verdict(self.read_steal() - start[1], wall_ms, self.cpus, self.hz),
                disturbed_since(start[2]))
            report.user_properties.append((PROPERTY, verdict))
            report.sections.append(("noise gate", _describe(verdict)))
        return report

    def pytest_runtest_logreport(self, report):
        if report.failed:
            self._keep(report.nodeid, dict(report.user_properties).get(PROPERTY))

    def pytest_collectreport(self, report):
        if report.failed:
            self._keep(report.nodeid or "collection", None)

    def _keep(self, nodeid: str, verdict: dict | None) -> None:
        # Unwatched (not a real test, a collection error): never noisy. A test that failed in
        # two phases is noisy only if both were.
        verdict = verdict or {"noisy": False, "judged": False, "watched": False,
                              "wall_ms": 0.0, "steal_fraction": float("nan"), "reasons": []}
        if nodeid in self.failed and not self.failed[nodeid]["noisy"]:
            return
        self.failed[nodeid] = verdict

    def pytest_terminal_summary(self, terminalreporter):
        watched = {n: v for n, v in self.failed.items() if v["watched"]}
        if watched:
            terminalreporter.write_sep("=", "noise gate: the real tests that failed, and the "
                                       "machine meanwhile")
            for nodeid, verdict in watched.items():
                terminalreporter.write_line(f"{nodeid}: {_describe(verdict)}")

    def pytest_sessionfinish(self, session):
        path = os.environ.get(VERDICTS_ENV)
        if path and not hasattr(session.config, "workerinput"):
            Path(path).write_text(json.dumps({
                "failed": self.failed, "rootdir": str(session.config.rootpath),
                "stopped": bool(session.shouldstop or session.shouldfail)}))


def _describe(verdict: dict) -> str:
    seconds = verdict["wall_ms"] / 1000
    if verdict["noisy"]:
        return f"{'; '.join(verdict['reasons'])} over its {seconds:.1f} s (noisy)"
    if not verdict["judged"]:
        return (f"over {seconds * 1000:.0f} ms, too short a time to judge the machine (a "
                "failure of the test itself, or of a fixture it shares)")
    return (f"the hypervisor stole {verdict['steal_fraction']:.1%} of the run's CPUs over its "
            f"{seconds:.1f} s (quiet: a failure of the test itself)")


def wait_for_quiet(read_steal: Callable[[], int] = _steal_ticks, probe_s: float = QUIET_PROBE_S,
                   wait_s: float = QUIET_WAIT_S, cpus: int | None = None, hz: int | None = None,
                   clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], None] = time.sleep) -> dict:
    """Probes the machine window by window until one is quiet or `wait_s` has passed; the
    last window's verdict, with the number of windows (`windows`) and the seconds they took
    (`waited_s`)."""
    began = clock()
    windows = 0
    while True:
        before, start = read_steal(), clock()
        while clock() - start < probe_s:
            sleep(0.001)
        windows += 1
        verdict = steal_verdict(read_steal() - before, (clock() - start) * 1000, cpus, hz)
        if not verdict["noisy"] or clock() >= began + wait_s:
            return {**verdict, "windows": windows, "waited_s": clock() - began}


def noisy_failures(seen: dict) -> list[str] | None:
    """The tests to run again (as absolute node ids): every failed one, when each failed while
    the machine was stolen and the session ran to its end; None otherwise."""
    failed = seen.get("failed", {})
    if not failed or seen.get("stopped") or not all(v["noisy"] for v in failed.values()):
        return None
    return [f"{seen['rootdir']}/{nodeid}" for nodeid in failed]


def main(args: list[str], pytest_cmd: list[str] | None = None, cwd: str | None = None,
         wait: Callable[[], dict] = wait_for_quiet) -> int:
    """`pytest -m real ARGS`, then the noisy failures again, up to RETRIES times, each time
    once the machine is quiet (`wait`) or has had its chance to be."""
    # -P: the tests' imports are pytest's (rootdir and conftest), not the current directory's.
    cmd = pytest_cmd or [sys.executable, "-P", "-m", "pytest"]
    with tempfile.TemporaryDirectory() as tmp:
        seen_path = Path(tmp) / "verdicts.json"
        env = {**os.environ, VERDICTS_ENV: str(seen_path)}
        selection: list[str] = []
        for attempt in range(RETRIES + 1):
            seen_path.unlink(missing_ok=True)
            rc = subprocess.run([*cmd, "-m", "real", *selection, *args], env=env,
                                cwd=cwd).returncode
            if rc < 0:
                print(f"noise gate: pytest was killed by signal {-rc}", flush=True)
                return 1
            if rc == 0 and attempt > 0:
                print(f"noise gate: passed on retry {attempt} of {RETRIES} (the failures "
                      "above were each on a disturbed machine)", flush=True)
            # 1: tests failed; 0 passed, anything else (interrupted, usage, internal) is final.
            if rc != 1:
                return rc
            seen = json.loads(seen_path.read_text()) if seen_path.exists() else {}
            again = noisy_failures(seen)
            if again is None or attempt == RETRIES:
                if attempt > 0:
                    print(f"noise gate: still failing after {attempt} of {RETRIES} retries",
                          flush=True)
                return rc
            failed = seen["failed"]
            print(f"\nnoise gate: {len(again)} real test(s) failed on a disturbed machine "
                  f"(stolen, or stalled under a run they measured); running them again (retry "
                  f"{attempt + 1} of {RETRIES}):", flush=True)
            for nodeid in failed:
                print(f"  {nodeid}: {_describe(failed[nodeid])}", flush=True)
            quiet = wait()
            state = "stolen still" if quiet["noisy"] else "quiet"
            print(f"noise gate: the machine is {state} (steal {quiet['steal_fraction']:.1%} over "
                  f"the last {quiet['wall_ms'] / 1000:.1f} s, after {quiet['waited_s']:.0f} s of "
                  "watching)", flush=True)
            selection = again
    raise AssertionError("unreachable: the last attempt returns")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

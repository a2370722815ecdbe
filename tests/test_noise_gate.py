"""The noise gate of the real tests (tests/noise_gate.py): the worlds' steal rule, and the
runner that runs a real test again only when it failed while the hypervisor stole the machine
or beside a real run the machine disturbed (up to twice, after waiting for a quiet window), and
fails at once on any other failure."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT
from noise_gate import RETRIES, main, noisy_failures, steal_verdict, wait_for_quiet


def test_steal_beyond_two_percent_and_the_resolution_makes_a_failure_noisy():
    # 1 s on 2 CPUs at USER_HZ 100: capacity 2,000 ms, 2% of it 40 ms, the resolution 20 ms.
    quiet = steal_verdict(6, 1000.0, 2, 100)  # 60 ms: 40 ms beyond the resolution, not more
    assert quiet["steal_ms"] == 60.0 and quiet["steal_fraction"] == pytest.approx(0.03)
    assert quiet["noisy"] is False and quiet["reasons"] == [] and quiet["judged"] is True
    noisy = steal_verdict(7, 1000.0, 2, 100)
    assert noisy["steal_fraction"] == pytest.approx(0.035) and noisy["noisy"] is True
    assert noisy["reasons"] == ["the hypervisor stole 3.5% of the run's CPUs"]
    # 5 ms on 2 CPUs is less than a tick per CPU: too short to judge.
    assert steal_verdict(0, 5.0, 2, 100)["judged"] is False


def test_only_a_whole_session_whose_failures_were_all_on_a_stolen_machine_runs_again():
    noisy, quiet = {"noisy": True}, {"noisy": False}
    seen = {"rootdir": "/r", "stopped": False, "failed": {"t.py::a": noisy, "t.py::b": noisy}}
    assert noisy_failures(seen) == ["/r/t.py::a", "/r/t.py::b"]
    assert noisy_failures({**seen, "failed": {"t.py::a": noisy, "t.py::b": quiet}}) is None
    assert noisy_failures({**seen, "stopped": True}) is None  # -x: the rest never ran
    assert noisy_failures({**seen, "failed": {}}) is None
    assert noisy_failures({}) is None  # a crash wrote nothing


def test_a_retry_waits_for_a_quiet_window():
    # Windows of 10 ms on 2 CPUs at USER_HZ 100 (capacity 20 ms, so a whole tick beyond the
    # resolution of 20 ms flags one), on a clock that moves 1 ms a sleep: 5 ticks stolen, 4,
    # then none.
    now = [0.0]

    def sleep(s: float) -> None:
        now[0] += s

    ticks = iter([0, 5, 5, 9, 9, 9])
    quiet = wait_for_quiet(lambda: next(ticks), probe_s=0.01, wait_s=60, cpus=2, hz=100,
                           clock=lambda: now[0], sleep=sleep)
    assert quiet["windows"] == 3 and quiet["noisy"] is False and quiet["steal_ms"] == 0
    assert quiet["wall_ms"] == pytest.approx(10.0) and quiet["waited_s"] == pytest.approx(0.03)
    # A machine stolen from throughout: the wait ends at its deadline (40 ms: 4 windows), the
    # verdict noisy.
    ticks = iter(range(0, 10_000, 5))
    stolen = wait_for_quiet(lambda: next(ticks), probe_s=0.01, wait_s=0.04, cpus=2, hz=100,
                            clock=lambda: now[0], sleep=sleep)
    assert stolen["noisy"] is True and stolen["windows"] == 4 and stolen["steal_ms"] == 50


def _suite(tmp_path: Path, steal_ticks: int, fails: dict[str, int], quiet: str = "-",
           extra: str = "") -> Path:
    """A suite of real tests in `tmp_path`: test `name` fails its first `fails[name]` runs, and
    the gate reads `steal_ticks` more stolen ticks at every look (20 ms tests: any steal counts),
    none from the start to the end of the test named `quiet` (its looks all read one count)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    real: measures\n")
    (tmp_path / "conftest.py").write_text(textwrap.dedent(f"""
        import itertools, sys
        sys.path.insert(0, {str(ROOT / "tests")!r})
        from noise_gate import NoiseGate

        ticks, current, last = itertools.count(step={steal_ticks}), [""], [0]

        def pytest_runtest_logstart(nodeid, location):
            current[0] = nodeid

        def read():
            if not current[0].endswith("::test_{quiet}"):
                last[0] = next(ticks)
            return last[0]

        def pytest_configure(config):
            config.pluginmanager.register(NoiseGate(read, 2, 100), "noise_gate")
    """))
    body = ["import pathlib, time, pytest", ""]
    for name, n in fails.items():
        body += ["@pytest.mark.real",
                 f"def test_{name}():",
                 "    time.sleep(0.02)  # a tick per CPU at least: long enough to judge",
                 f"    runs = pathlib.Path({str(tmp_path / name)!r})",
                 "    runs.write_text(runs.read_text() + 'x' if runs.exists() else 'x')",
                 f"    assert len(runs.read_text()) > {n}", ""]
    (tmp_path / "test_suite.py").write_text("\n".join(body) + textwrap.dedent(extra))
    return tmp_path


def _runs(suite: Path, name: str) -> int:
    path = suite / name
    return len(path.read_text()) if path.exists() else 0


def _gate(suite: Path, *args: str) -> int:
    waited = steal_verdict(0, 3000.0, 2, 100) | {"windows": 1, "waited_s": 3.0}
    # Run from the suite's parent: the retries name their tests by absolute node ids.
    return main(["-q", "-p", "no:cacheprovider", "-c", str(suite / "pytest.ini"), *args],
                [sys.executable, "-m", "pytest"], str(suite.parent), wait=lambda: waited)


def test_a_noisy_failure_runs_again_alone_and_passes(tmp_path, capfd):
    suite = _suite(tmp_path / "s", 1000, {"flaky": 1, "steady": 0})
    assert _gate(suite) == 0
    assert _runs(suite, "flaky") == 2 and _runs(suite, "steady") == 1
    out = capfd.readouterr().out
    assert f"running them again (retry 1 of {RETRIES})" in out
    assert "  test_suite.py::test_flaky: the hypervisor stole" in out and "(noisy)" in out
    assert f"passed on retry 1 of {RETRIES}" in out
    assert "the machine is quiet (steal 0.0% over the last 3.0 s" in out


def test_a_noisy_failure_that_stays_fails_after_the_retries(tmp_path, capfd):
    suite = _suite(tmp_path / "s", 1000, {"broken": 99})
    assert _gate(suite) == 1
    assert _runs(suite, "broken") == 1 + RETRIES
    out = capfd.readouterr().out
    assert f"retry {RETRIES} of {RETRIES}" in out
    assert f"still failing after {RETRIES} of {RETRIES} retries" in out


def test_a_quiet_failure_fails_at_once(tmp_path, capfd):
    suite = _suite(tmp_path / "s", 0, {"flaky": 1})
    assert _gate(suite) == 1
    assert _runs(suite, "flaky") == 1
    out = capfd.readouterr().out
    assert "running them again" not in out
    assert "stole 0.0% of the run's CPUs" in out and "(quiet" in out


def test_one_quiet_failure_among_noisy_ones_fails_at_once(tmp_path, capfd):
    # The machine was stolen under `flaky` only: the counter stands still under `quiet`.
    suite = _suite(tmp_path / "s", 1000, {"flaky": 1, "quiet": 99}, quiet="quiet")
    assert _gate(suite) == 1
    assert _runs(suite, "flaky") == 1 and _runs(suite, "quiet") == 1
    out = capfd.readouterr().out
    assert "test_suite.py::test_quiet: the hypervisor stole 0.0%" in out
    assert "test_suite.py::test_flaky: the hypervisor stole" in out and "(noisy)" in out


def test_a_noisy_setup_failure_runs_again(tmp_path):
    suite = _suite(tmp_path / "s", 1000, {}, extra=f"""
        @pytest.fixture
        def once():
            runs = pathlib.Path({str(tmp_path / "s" / "setup")!r})
            runs.write_text(runs.read_text() + 'x' if runs.exists() else 'x')
            assert len(runs.read_text()) > 1

        @pytest.mark.real
        def test_fixture(once):
            pass
    """)
    assert _gate(suite) == 0
    assert _runs(suite, "setup") == 2


def test_a_quiet_teardown_error_beside_a_noisy_failure_fails_at_once(tmp_path):
    # The error in the teardown of a test that passed is judged like any failure (quiet here).
    suite = _suite(tmp_path / "s", 1000, {"flaky": 1}, quiet="leaky", extra="""
        @pytest.fixture
        def leak():
            yield
            raise RuntimeError("left something behind")

        @pytest.mark.real
        def test_leaky(leak):
            pass
    """)
    assert _gate(suite) == 1
    assert _runs(suite, "flaky") == 1


def test_a_session_stopped_early_a_collection_error_or_a_crash_is_final(tmp_path):
    # -x: the first noisy failure stopped the session, the tests after it never ran.
    suite = _suite(tmp_path / "x" / "s", 1000, {"flaky": 1, "later": 0})
    assert _gate(suite, "-x") == 1
    assert _runs(suite, "flaky") == 1 and _runs(suite, "later") == 0
    # A module that does not import: pytest's own error (2), not retried.
    suite = _suite(tmp_path / "c" / "s", 1000, {"flaky": 1}, extra="\nimport not_a_module_here\n")
    assert _gate(suite) == 2
    # A run that dies before it can say what failed: no verdicts, no retry.
    suite = _suite(tmp_path / "k" / "s", 1000, {"flaky": 1}, extra="""
        @pytest.mark.real
        def test_exit():
            import os
            os._exit(1)
    """)
    assert _gate(suite) == 1
    assert _runs(suite, "flaky") == 1


# A real run the machine disturbed, logged from another process as a CLI run or a sweep's
# worker would (schedlab.noise.log_disturbed): stalls too short for /proc/stat's ticks.
_STALL = ("import subprocess, sys\n"
          "subprocess.run([sys.executable, '-c', 'from schedlab import noise; "
          "noise.log_disturbed(\"os\", {\"noisy\": False, \"unaccounted_jobs\": 2, "
          "\"unaccounted_max\": 4.2})'], check=True)\n")


def test_a_failure_beside_a_run_the_machine_stalled_under_runs_again(tmp_path, capfd):
    # No steal at all: the evidence is the run's, logged by a process the test started.
    suite = _suite(tmp_path / "s", 0, {"steady": 0}, extra=f"""
        @pytest.mark.real
        def test_stalled():
            runs = pathlib.Path({str(tmp_path / "s" / "stalled")!r})
            runs.write_text(runs.read_text() + 'x' if runs.exists() else 'x')
            if len(runs.read_text()) == 1:
{textwrap.indent(_STALL, " " * 16)}
            assert len(runs.read_text()) > 1
    """)
    assert _gate(suite) == 0
    assert _runs(suite, "stalled") == 2 and _runs(suite, "steady") == 1
    out = capfd.readouterr().out
    assert ("an os run it measured: the machine stalled under 2 job(s), up to 4.2 ms that no "
            "counter placed") in out and "(noisy)" in out
    assert f"passed on retry 1 of {RETRIES}" in out


def test_a_disturbed_run_counts_for_the_test_that_made_it_or_reads_it_not_for_the_next(tmp_path,
                                                                                     capfd):
    # `made` runs a stalled measurement and passes; `after` fails on a quiet machine: its own
    # window holds no run, so it fails at once. `reads` fails reading a shared fixture's
    # result measured earlier under a stall (carried, as conftest.quick_run does): noisy.
    suite = _suite(tmp_path / "s", 0, {}, extra=f"""
        import noise_gate

        @pytest.fixture(scope="session")
        def shared():
            offset = noise_gate.log_offset()
{textwrap.indent(_STALL, " " * 12)}
            return noise_gate.disturbed_since(offset)

        @pytest.fixture
        def measured(shared):
            noise_gate.carry(shared)

        @pytest.mark.real
        def test_made(shared):
            assert len(shared) == 1

        @pytest.mark.real
        def test_after():
            time.sleep(0.02)
            assert False

        @pytest.mark.real
        def test_reads(measured):
            assert False
    """)
    assert _gate(suite) == 1
    out = capfd.readouterr().out
    gate = out[out.index("noise gate: the real tests that failed"):]
    assert "test_suite.py::test_after: the hypervisor stole 0.0%" in gate
    assert "(quiet: a failure of the test itself)" in gate
    assert "test_suite.py::test_reads: an os run it measured: the machine stalled" in gate
    assert "running them again" not in out  # one quiet failure: final


def test_a_world_logs_a_run_only_when_the_machine_disturbed_it(tmp_path, monkeypatch):
    from noise_gate import disturbed_since, with_disturbed
    from schedlab import noise

    log = tmp_path / "log.jsonl"
    monkeypatch.delenv(noise.LOG_ENV, raising=False)
    assert noise.log_disturbed("os", {"noisy": True, "noise_reasons": ["x"]}) is None
    monkeypatch.setenv(noise.LOG_ENV, str(log))
    assert noise.log_disturbed("os", {"noisy": False, "unaccounted_jobs": 0}) is None
    assert noise.log_disturbed("server", {"noisy": False}) is None
    assert not log.exists()
    stolen = noise.log_disturbed("server", {"noisy": True, "noise_reasons": [
        "the hypervisor stole 7.0% of the run's CPUs"]})
    stalled = noise.log_disturbed("os", {"noisy": True, "unaccounted_jobs": 3,
                                         "unaccounted_max": 8.76, "noise_reasons": [
                                             "the machine stalled under 3 job(s): ..."]})
    assert disturbed_since(0) == [stolen, stalled]
    assert stalled["stalled_jobs"] == 3 and stalled["unaccounted_max_ms"] == 8.76
    # The os world's own reason is not said twice; a stall under a dispatcher (not flagged)
    # is described from its counts.
    assert noise.describe_disturbed(stalled) == \
        "an os run it measured: the machine stalled under 3 job(s): ..."
    assert noise.describe_disturbed(stolen) == \
        "a server run it measured: the hypervisor stole 7.0% of the run's CPUs"
    quiet = steal_verdict(0, 1000.0, 2, 100)
    assert with_disturbed(quiet, []) == {**quiet, "disturbed": []}
    both = with_disturbed(steal_verdict(0, 5.0, 2, 100), [stolen, stolen])
    assert both["noisy"] is True and both["judged"] is True
    assert both["reasons"] == [noise.describe_disturbed(stolen)]  # said once
    # Many distinct runs (a cached experiment's): two named, the rest counted with the worst.
    def os_run(jobs, ms):
        return {"world": "os", "pid": 1, "noisy": False, "reasons": [], "stalled_jobs": jobs,
                "unaccounted_max_ms": ms}
    many = [stolen, os_run(1, 3.5), os_run(2, 18.5), os_run(4, 6.0), stolen,
            {**stolen, "reasons": ["the hypervisor stole 9.0% of the run's CPUs"]}]
    lines = with_disturbed(quiet, many)["reasons"][len(quiet["reasons"]):]
    assert lines == [noise.describe_disturbed(stolen), noise.describe_disturbed(os_run(1, 3.5)),
                     "3 more disturbed run(s) (os, server), 2 with stalled jobs (up to 4 job(s) "
                     "in one run, up to 18.5 ms that no counter placed)"]
    assert with_disturbed(quiet, many)["disturbed"] == many  # every record kept

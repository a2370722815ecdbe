"""The noise gate of the real tests (tests/noise_gate.py): the worlds' steal rule, and the
runner that runs a real test again only when it failed while the hypervisor stole the machine
(up to twice), and fails at once on a quiet failure."""

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
    assert quiet["noisy"] is False and quiet["reasons"] == []
    noisy = steal_verdict(7, 1000.0, 2, 100)
    assert noisy["steal_fraction"] == pytest.approx(0.035) and noisy["noisy"] is True
    assert noisy["reasons"] == ["the hypervisor stole 3.5% of the run's CPUs"]


def test_only_failures_all_on_a_stolen_machine_are_run_again():
    noisy, quiet = {"noisy": True}, {"noisy": False}
    assert noisy_failures({"a": noisy, "b": noisy}) == ["a", "b"]
    assert noisy_failures({"a": noisy, "b": quiet}) is None
    assert noisy_failures({}) is None


def test_a_retry_waits_for_a_quiet_window():
    # Windows of 10 ms on 2 CPUs at USER_HZ 100 (capacity 20 ms, so any whole tick beyond the
    # resolution of 20 ms flags one): 5 ticks stolen, then 4, then none.
    ticks = iter([0, 5, 5, 9, 9, 9])
    quiet = wait_for_quiet(lambda: next(ticks), probe_s=0.01, wait_s=60, cpus=2, hz=100)
    assert quiet["windows"] == 3 and quiet["noisy"] is False and quiet["steal_ms"] == 0
    # A machine stolen from throughout: the wait ends at its deadline (here: after the first
    # window), the verdict noisy.
    ticks = iter(range(0, 10_000, 5))
    stolen = wait_for_quiet(lambda: next(ticks), probe_s=0.01, wait_s=0, cpus=2, hz=100)
    assert stolen["noisy"] is True and stolen["windows"] == 1 and stolen["steal_ms"] == 50


def _suite(tmp_path: Path, steal_ticks: int, fails: dict[str, int], quiet: str = "-") -> Path:
    """A suite of real tests in `tmp_path`: test `name` fails its first `fails[name]` runs, and
    the gate reads `steal_ticks` more stolen ticks at every look (1 ms tests: any steal counts),
    none during the test named `quiet`."""
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    real: measures\n")
    (tmp_path / "conftest.py").write_text(textwrap.dedent(f"""
        import itertools, os, sys
        sys.path.insert(0, {str(ROOT / "tests")!r})
        from noise_gate import NoiseGate

        def pytest_configure(config):
            ticks = itertools.count(step={steal_ticks})
            def read():
                quiet = "test_{quiet} " in os.environ.get("PYTEST_CURRENT_TEST", "")
                return 0 if quiet else next(ticks)
            config.pluginmanager.register(NoiseGate(read, 2, 100), "noise_gate")
    """))
    body = ["import pathlib, pytest", ""]
    for name, n in fails.items():
        body += ["@pytest.mark.real",
                 f"def test_{name}():",
                 f"    runs = pathlib.Path({str(tmp_path / name)!r})",
                 "    runs.write_text(runs.read_text() + 'x' if runs.exists() else 'x')",
                 f"    assert len(runs.read_text()) > {n}", ""]
    (tmp_path / "test_suite.py").write_text("\n".join(body))
    return tmp_path


def _runs(suite: Path, name: str) -> int:
    return len((suite / name).read_text())


def _gate(suite: Path) -> int:
    waited = steal_verdict(0, 3000.0, 2, 100) | {"windows": 1}
    return main(["-q", "-p", "no:cacheprovider"], [sys.executable, "-m", "pytest"], str(suite),
                wait=lambda: waited)


def test_a_noisy_failure_runs_again_alone_and_passes(tmp_path, capfd):
    suite = _suite(tmp_path, 1000, {"flaky": 1, "steady": 0})
    assert _gate(suite) == 0
    assert _runs(suite, "flaky") == 2 and _runs(suite, "steady") == 1
    out = capfd.readouterr().out
    assert f"running them again (retry 1 of {RETRIES})" in out
    assert "test_suite.py::test_flaky: steal" in out and "(noisy)" in out
    assert f"passed on retry 1 of {RETRIES}" in out
    assert "the machine is quiet (steal 0.0% over the last 3.0 s" in out


def test_a_noisy_failure_that_stays_fails_after_the_retries(tmp_path, capfd):
    suite = _suite(tmp_path, 1000, {"broken": 99})
    assert _gate(suite) == 1
    assert _runs(suite, "broken") == 1 + RETRIES
    assert f"retry {RETRIES} of {RETRIES}" in capfd.readouterr().out


def test_a_quiet_failure_fails_at_once(tmp_path, capfd):
    suite = _suite(tmp_path, 0, {"flaky": 1})
    assert _gate(suite) == 1
    assert _runs(suite, "flaky") == 1
    out = capfd.readouterr().out
    assert "running them again" not in out
    assert "stole 0.0% of the machine's CPUs" in out and "(quiet" in out


def test_one_quiet_failure_among_noisy_ones_fails_at_once(tmp_path):
    # The machine was stolen under `flaky` only (the fake counter stands still under `quiet`).
    suite = _suite(tmp_path, 1000, {"flaky": 1, "quiet": 99}, quiet="quiet")
    assert _gate(suite) == 1
    assert _runs(suite, "flaky") == 1 and _runs(suite, "quiet") == 1

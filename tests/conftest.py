from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import noise_gate  # tests/noise_gate.py, beside this file
import pytest

# As `import schedlab` does (schedlab/__init__.py): one OpenBLAS thread, set before any test
# module imports numpy (they import it before schedlab).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
BIN = ROOT / ".venv" / "bin"
SCHEDLAB = str(BIN / "schedlab") if (BIN / "schedlab").exists() else "schedlab"


def _reference_dir() -> Path:
    """The independent reference values: ../shared/reference when present, else the copy."""
    shared = ROOT.parent / "shared" / "reference"
    return shared if (shared / "mg1.csv").exists() else ROOT / "tests" / "data" / "reference"


REFERENCE = _reference_dir()

# Tests that measure the machine (real processes, sockets on 127.0.0.1, the server and os
# worlds of the experiment files) are marked `real`: every test of these files, and elsewhere
# each test that runs a real world (`@pytest.mark.real`, or `real_param`). `make test` runs
# every other test two at a time (pytest-xdist), then these alone, so that nothing of the
# suite competes with them.
REAL = {"test_os.py", "test_server.py"}


def real_param(value, real: bool, id: str):
    """A parametrize value, marked `real` when it runs a world that measures the machine."""
    return pytest.param(value, marks=[pytest.mark.real] if real else [], id=id)


def pytest_configure(config):
    # tests/noise_gate.py: the worlds' noise gate one level up, for the `real` tests.
    config.pluginmanager.register(noise_gate.NoiseGate(), "noise_gate")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in REAL:
            item.add_marker(pytest.mark.real)


@pytest.fixture
def write_trace(tmp_path):
    """Writes a trace CSV from a header and rows; returns its path."""

    def write(header: str, rows: list[tuple]) -> str:
        path = tmp_path / f"trace{len(os.listdir(tmp_path))}.csv"
        lines = [header] + [",".join(str(v) for v in row) for row in rows]
        path.write_text("\n".join(lines) + "\n")
        return str(path)

    return write


@pytest.fixture(scope="session")
def quick_run(tmp_path_factory):
    """`schedlab run FILE --quick`, once per file for the whole session: the test of every
    file (test_experiments.py) and the tests that read one file's results (its own
    assertions, the report's) share a run instead of each paying for its real worlds."""
    done: dict[Path, tuple[Path, list[dict]]] = {}

    def get(path: Path) -> Path:
        path = Path(path)
        if path not in done:
            out = tmp_path_factory.mktemp(path.parent.name) / path.stem
            offset = noise_gate.log_offset()
            r = subprocess.run([SCHEDLAB, "run", str(path), "--quick", "--out", str(out)],
                               capture_output=True, text=True, timeout=300, env=cli_env())
            assert r.returncode == 0, r.stderr
            assert r.stdout.strip() == str(out)
            done[path] = out, noise_gate.disturbed_since(offset)
        else:
            # The noise gate judges a test by the runs it reads, measured earlier or not.
            noise_gate.carry(done[path][1])
        return done[path][0]

    return get


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


sys.path.insert(0, str(ROOT / "tests"))


def assert_conserved(summary: dict, little_tolerance: float) -> None:
    """Conservation laws every run must obey.

    Busy time equals the work served (the CPUs did exactly the work the jobs received), and
    Little's law L = lambda W holds over the measured interval within `little_tolerance`
    (edge effects of a finite run; exact in the limit).
    """
    busy, served = summary["busy_time"], summary["work_served"]
    assert abs(busy - served) <= 1e-9 * max(served, 1.0), f"busy {busy} != served {served}"
    little = summary["arrival_rate"] * summary["response_mean"]
    L = summary["mean_in_system"]
    assert abs(L - little) <= little_tolerance * little, f"L = {L}, lambda W = {little}"


def numbers_of(record: dict) -> set[str]:
    """The keys of a summary whose values are numbers (not flags, texts or tables)."""
    return {k for k, v in record.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def unitless(summary: dict) -> set[str]:
    """The numbers of a summary without a unit in the vocabulary (`--json`'s `units`)."""
    from schedlab.vocabulary import summary_units

    return numbers_of(summary) - set(summary_units(summary))

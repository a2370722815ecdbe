"""The README's tour runs as written: its `schedlab sim`, `theory`, `policies`, `run` and
`report` commands and its Python block (the server, load and os lines start real servers and
processes; tests/test_server.py and tests/test_os.py cover those)."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, SCHEDLAB, cli_env

README = (ROOT / "README.md").read_text()
RUNNABLE = ("sim", "theory", "policies", "run", "report")


def readme_commands() -> list[list[str]]:
    block = re.search(r"\*\*Command line\.\*\*.*?```sh\n(.*?)```", README, re.S).group(1)
    # Join continuation lines, drop comments.
    text = re.sub(r"\\\n\s*", " ", block)
    commands = []
    for line in text.splitlines():
        argv = shlex.split(line, comments=True)
        if argv and argv[0] == "schedlab" and argv[1] in RUNNABLE:
            commands.append(argv[1:])
    return commands


def test_the_tour_covers_every_world():
    names = {line.split()[1] for line in README.splitlines() if line.startswith("schedlab ")}
    assert {"sim", "theory", "run", "report", "serve", "load", "os"} <= names


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A directory where the README's relative paths (experiments/...) resolve."""
    d = tmp_path_factory.mktemp("readme")
    (d / "experiments").symlink_to(ROOT / "experiments")
    return d


@pytest.mark.parametrize("argv", readme_commands(), ids=lambda a: " ".join(a)[:40])
def test_readme_command_runs(argv, workdir):
    # In the README's order: `report` reads what `run` wrote into results/rr.
    out = subprocess.run([SCHEDLAB, *argv], cwd=workdir, capture_output=True, text=True,
                         timeout=300, env=cli_env())
    assert out.returncode == 0, out.stderr
    if argv[0] == "report":
        assert (workdir / "results" / "rr" / "report.html").stat().st_size > 0
    if argv[0] == "theory":
        assert float(out.stdout) == pytest.approx(3.5521, rel=1e-3)
    if "--jobs-out" in argv:
        assert (workdir / argv[argv.index("--jobs-out") + 1]).stat().st_size > 0


def test_readme_python_block_runs(workdir, monkeypatch):
    block = re.search(r"\*\*Python\.\*\*.*?```python\n(.*?)```", README, re.S).group(1)
    monkeypatch.chdir(workdir)
    scope: dict = {}
    exec(compile(block, "README.md", "exec"), scope)
    assert scope["r"].summary["jobs"] == 200_000
    assert len(scope["r"].jobs) == 200_000
    stats = scope["res"].metric("response_mean")
    assert len(stats) > 0 and stats["mean"].notna().all()

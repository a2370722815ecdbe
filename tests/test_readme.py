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


def readme_commands() -> list[list[list[str]]]:
    """The README's commands, a `report` together with the commands before it since the last
    `run` (it reads what that run wrote), so that each group runs in one test, on one worker."""
    block = re.search(r"\*\*Command line\.\*\*.*?```sh\n(.*?)```", README, re.S).group(1)
    # Join continuation lines, drop comments.
    text = re.sub(r"\\\n\s*", " ", block)
    groups: list[list[list[str]]] = []
    for line in text.splitlines():
        argv = shlex.split(line, comments=True)
        if argv and argv[0] == "schedlab" and argv[1] in RUNNABLE:
            if argv[1] == "report" and groups and groups[-1][0][0] == "run":
                groups[-1].append(argv[1:])
            else:
                groups.append([argv[1:]])
    return groups


def test_the_tour_covers_every_world():
    names = {line.split()[1] for line in README.splitlines() if line.startswith("schedlab ")}
    assert {"sim", "theory", "run", "report", "serve", "load", "os"} <= names


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A directory where the README's relative paths (experiments/...) resolve."""
    d = tmp_path_factory.mktemp("readme")
    (d / "experiments").symlink_to(ROOT / "experiments")
    (d / "docs").symlink_to(ROOT / "docs")  # the example machine profile
    return d


@pytest.mark.parametrize("group", readme_commands(), ids=lambda g: " ".join(g[-1])[:40])
def test_readme_command_runs(group, workdir):
    for argv in group:
        check_readme_command(argv, workdir)


def check_readme_command(argv, workdir):
    # In the README's order: `report` reads what `run` wrote into results/rr.
    out = subprocess.run([SCHEDLAB, *argv], cwd=workdir, capture_output=True, text=True,
                         timeout=300, env=cli_env())
    assert out.returncode == 0, out.stderr
    if argv[0] == "report":
        assert (workdir / "results" / "rr" / "report.html").stat().st_size > 0
    if argv[0] == "theory":
        word, value, unit = out.stdout.split()
        assert (word, unit) == ("mean", "ms") and float(value) == pytest.approx(3.5521, rel=1e-3)
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


def test_the_quick_start_gives_every_figure_its_interval_and_theory(capsys, monkeypatch):
    from schedlab import quickstart

    monkeypatch.setenv("COLUMNS", "200")
    assert quickstart.main(jobs=100_000, replications=3) == 0
    out = capsys.readouterr().out
    rows = {tuple(c.strip() for c in line.split("│")[1:3]): [c.strip() for c in
                                                              line.split("│")[3:7]]
            for line in out.splitlines() if line.startswith("│")}
    assert len(rows) == 12
    for cells in rows.values():
        assert all(re.fullmatch(r"\d+\.\d \[\d+\.\d, \d+\.\d\]( \(\d+\.\d\))?", c)
                   for c in cells), cells
    # Theory beside the measurement: M/D/1 FCFS at load 0.95 with size 20 ms has mean 210 ms
    # (P-K) and p99 918.8 ms (schedlab.theory's M/G/1 law); M/M/1 PS has mean 400 ms.
    fcfs = rows[("det:20", "FCFS")]
    assert fcfs[0].endswith("(210.0)") and fcfs[3].endswith("(918.8)")
    assert rows[("exp:20", "PS")][0].endswith("(400.0)")
    assert "(" not in rows[("det:20", "RR q=10")][0]  # no closed form: none shown
    # The interval over 3 replications of 100k jobs holds the theory's mean (fixed seeds).
    mean, low, high = (float(v) for v in re.findall(r"[\d.]+", fcfs[0])[:3])
    assert low <= mean <= high and low <= 210.0 <= high


def test_the_readmes_experiment_file_is_the_shipped_one():
    """The tour's TOML says it is experiments/rr-ps-fcfs/experiment.toml without some tables:
    each key it gives is the file's, with the file's value (it had drifted: other quanta, no
    PS, a warm-up the file does not use). `world` is given where the file takes the default."""
    import tomllib

    block = re.search(r"\*\*Experiment file\.\*\*.*?```toml\n(.*?)```", README, re.S).group(1)
    shown = tomllib.loads(block)
    shipped = tomllib.loads((ROOT / "experiments/rr-ps-fcfs/experiment.toml").read_text())
    assert shown["experiment"].pop("world") == "sim" and "world" not in shipped["experiment"]
    for section, table in shown.items():
        if isinstance(table, list):
            assert table == shipped[section], section
            continue
        for key, value in table.items():
            assert shipped[section][key] == value, f"{section}.{key}"
    assert set(shipped) - set(shown) == {"report", "quick"}

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
        if "--text" in argv:
            assert "Response time" in out.stdout and "FCFS" in out.stdout
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


def test_the_quick_start_from_python_is_the_commands_table():
    """`schedlab.quickstart(...)` is `schedlab quickstart`: the same runs as a DataFrame (the
    mean over the replications, its interval, the closed form), each cell as the command
    prints it; bad lengths are refused by name, as on the command line."""
    import math

    import schedlab
    from schedlab import quickstart

    out = subprocess.run([SCHEDLAB, "quickstart", "--jobs", "20000", "--replications", "2"],
                         capture_output=True, text=True, timeout=120,
                         env={**cli_env(), "COLUMNS": "250"})
    assert out.returncode == 0, out.stderr
    printed = {tuple(c.strip() for c in line.split("│")[1:3]):
               [c.strip() for c in line.split("│")[3:7]]
               for line in out.stdout.splitlines() if line.startswith("│")}
    df = schedlab.quickstart(jobs=20_000, replications=2)
    assert len(df) == len(printed) == 12
    names = ("mean", "p50", "p95", "p99")
    for _, row in df.iterrows():
        assert [quickstart.cell(row, f"response_{n}") for n in names] == \
            printed[(row["service"], row["policy"])]
        for n in names:
            key = f"response_{n}"
            assert 0 <= row[f"{key}_ci_low"] <= row[key] <= row[f"{key}_ci_high"]
    by = df.set_index(["service", "policy"])
    # M/D/1 FCFS at load 0.95 with size 20 ms: P-K mean 210 ms; M/M/1 PS: 400 ms; RR with a
    # quantum has no closed form.
    assert math.isclose(by.loc[("det:20", "FCFS"), "theory_response_mean"], 210.0, rel_tol=1e-9)
    assert math.isclose(by.loc[("exp:20", "PS"), "theory_response_mean"], 400.0, rel_tol=1e-9)
    assert math.isnan(by.loc[("det:20", "RR q=10"), "theory_response_mean"])
    assert set(df.attrs["units"].values()) == {"ms"}
    # One replication has no interval: the cell shows none (rich once ate "[nan, nan]" as
    # markup, by accident); the theory stays.
    one = {"response_mean": 168.6, "response_mean_ci_low": math.nan,
           "response_mean_ci_high": math.nan, "theory_response_mean": 210.0}
    assert quickstart.cell(one, "response_mean") == "168.6 (210.0)"
    assert quickstart.cell({**one, "response_mean_ci_low": 150.0,
                            "response_mean_ci_high": 187.2}, "response_mean") == \
        "168.6 [150.0, 187.2] (210.0)"
    assert len(df.attrs["units"]) == len(df.columns) - 2
    for kwargs, key in ((dict(jobs=0), "jobs"), (dict(replications=0), "replications"),
                        (dict(seed=-1), "seed")):
        with pytest.raises(schedlab.SpecError, match=f"^{key} = "):
            schedlab.quickstart(**kwargs)


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

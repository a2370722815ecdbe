"""kill -9 in the middle of a sweep, rerun: the same final files as an uninterrupted sweep, byte
for byte, and no run lost or run twice."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest
import schedlab
from conftest import SCHEDLAB, cli_env

# 3 loads x 3 policies x 4 replications = 36 runs of a few tenths of a second each: long
# enough to be killed in the middle, short enough for the suite.
EXPERIMENT = """
[experiment]
name = "resume"
seed = 11
replications = 4
warmup = 1000
keep_jobs = "first"
job_rows = 2000

[workload]
size = "exp:1"
jobs = 300_000

[[policy]]
name = "fcfs"

[[policy]]
name = "rr"
quantum = 0.2

[[policy]]
name = "srpt"

[sweep]
"workload.load" = [0.6, 0.75, 0.9]
"""
TOTAL = 36
COMBINED = ["summaries.parquet", "stats.parquet", "classes.parquet", "tasks.parquet"]


def run(path: Path, out: Path, **kw) -> subprocess.Popen:
    return subprocess.Popen([SCHEDLAB, "run", str(path), "--out", str(out), "--workers", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=cli_env(), **kw)


def done_records(out: Path) -> list[Path]:
    return sorted((out / "runs").glob("*.json")) if (out / "runs").exists() else []


def test_kill_9_midway_then_resume_gives_the_same_bytes(tmp_path):
    path = tmp_path / "resume.toml"
    path.write_text(EXPERIMENT)
    full, resumed = tmp_path / "full", tmp_path / "resumed"

    p = run(path, full)
    assert p.wait(timeout=300) == 0, p.stderr.read()

    # Start again elsewhere and kill the whole process group (parent and workers) with
    # SIGKILL as soon as a few runs are stored: nothing gets a chance to clean up.
    p = run(path, resumed, start_new_session=True)
    deadline = time.monotonic() + 120
    while len(done_records(resumed)) < 6:
        assert p.poll() is None, "the sweep finished before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    assert p.returncode == -signal.SIGKILL
    killed_at = time.time()
    survivors = {f.name: f.stat().st_mtime for f in done_records(resumed)}
    assert 6 <= len(survivors) < TOTAL, len(survivors)
    manifest = json.loads((resumed / "manifest.json").read_text())
    assert manifest["status"] == "running"  # as the kill left it
    assert not (resumed / "summaries.parquet").exists()

    p = run(path, resumed)
    assert p.wait(timeout=300) == 0, p.stderr.read()

    for name in COMBINED:
        assert (full / name).read_bytes() == (resumed / name).read_bytes(), name
    # Runs finished before the kill were kept, not run again (their records are untouched).
    after = {f.name: f.stat().st_mtime for f in done_records(resumed)}
    for name, mtime in survivors.items():
        assert after[name] == mtime, name
    assert all(t <= killed_at + 0.5 for t in survivors.values())
    # Nothing lost, nothing twice: one record per run, one row per point x policy x rep.
    assert len(after) == TOTAL
    s = pd.read_parquet(resumed / "summaries.parquet")
    assert len(s) == TOTAL and s["run"].is_unique
    assert not s.duplicated(["point", "label", "replication"]).any()
    assert not list((resumed / "runs").glob(".*.tmp"))
    manifest = json.loads((resumed / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["counts"]["done"] == TOTAL
    # Per-job tables of replication 0 are complete Parquet files, killed or not.
    for rid in s[s.replication == 0]["run"]:
        assert len(pd.read_parquet(resumed / "runs" / f"{rid}.jobs.parquet")) == 2000


def test_rerun_of_a_finished_sweep_runs_nothing(tmp_path):
    path = tmp_path / "small.toml"
    path.write_text(EXPERIMENT.replace("jobs = 300_000", "jobs = 2000"))
    out = tmp_path / "o"
    assert run(path, out).wait(timeout=120) == 0
    before = {f.name: f.stat().st_mtime_ns for f in done_records(out)}
    summaries = (out / "summaries.parquet").read_bytes()
    assert run(path, out).wait(timeout=120) == 0
    assert {f.name: f.stat().st_mtime_ns for f in done_records(out)} == before
    assert (out / "summaries.parquet").read_bytes() == summaries


def test_a_damaged_record_is_run_again_and_a_runs_file_refused(tmp_path):
    # A record that does not parse (a disk full, a hand) crashed the resume with a
    # JSONDecodeError, and `schedlab report` sent the user back to that resume.
    path = tmp_path / "small.toml"
    path.write_text(EXPERIMENT.replace("jobs = 300_000", "jobs = 2000"))
    out = tmp_path / "o"
    assert run(path, out).wait(timeout=120) == 0
    summaries = (out / "summaries.parquet").read_bytes()
    records = done_records(out)
    damaged, kept = records[0], records[1]
    whole = damaged.read_text()
    damaged.write_text("{not json")
    before = kept.stat().st_mtime_ns
    second = run(path, out)
    _, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    again, first = json.loads(damaged.read_text()), json.loads(whole)
    # Run again: the same run, to the bit (its timing aside; NaN is not equal to itself).
    assert json.dumps(again["summary"], sort_keys=True) == \
        json.dumps(first["summary"], sort_keys=True)
    assert kept.stat().st_mtime_ns == before  # and no other
    assert (out / "summaries.parquet").read_bytes() == summaries
    # Another version's record (format 999, or not a table) is run again too; another
    # version's manifest is refused by the reader, naming both formats.
    for text in (json.dumps({**first, "format": 999}), "[1, 2]"):
        damaged.write_text(text)
        again_run = run(path, out)
        _, err = again_run.communicate(timeout=120)
        assert again_run.returncode == 0, err
        assert json.loads(damaged.read_text())["format"] == 1
        assert kept.stat().st_mtime_ns == before
    manifest = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps({**manifest, "format": 999}))
    with pytest.raises(schedlab.SpecError, match=r"expected results of format 1, this "
                       r"version's \(manifest.json says format 999"):
        schedlab.load_results(out)
    # The format 1 as text is not the format 1, and the message does not say it is.
    (out / "manifest.json").write_text(json.dumps({**manifest, "format": "1"}))
    with pytest.raises(schedlab.SpecError, match=r'manifest.json says format "1"; rerun'):
        schedlab.load_results(out)
    # A `runs` that is a file is refused, naming the directory, and nothing is written.
    other = tmp_path / "other"
    shutil.copytree(out, other)
    shutil.rmtree(other / "runs")
    (other / "runs").write_text("")
    names = sorted(p.name for p in other.iterdir())
    third = run(path, other)
    _, err = third.communicate(timeout=120)
    assert third.returncode == 2 and "Traceback" not in err, err
    assert f"out = {other}: expected a results directory whose runs/ is a directory" in err
    assert sorted(p.name for p in other.iterdir()) == names


def test_a_second_sweep_into_the_same_directory_is_refused(tmp_path):
    path = tmp_path / "slow.toml"
    path.write_text(EXPERIMENT)
    out = tmp_path / "o"
    first = run(path, out, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (out / "manifest.json").exists():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        second = subprocess.run([SCHEDLAB, "run", str(path), "--out", str(out)],
                                capture_output=True, text=True, env=cli_env(), timeout=60)
        assert second.returncode == 2
        assert "a directory no other sweep is writing" in second.stderr
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=30)


def _children(pid: int) -> set[int]:
    """Every descendant of `pid` now (from /proc: each process's parent)."""
    parents: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            parents[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    out: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {c for c, p in parents.items() if p in frontier} - out
        out |= frontier
    return out


def _alive(pid: int) -> bool:
    """Running or sleeping; a zombie (dead, not yet reaped) counts as gone."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_kill_9_of_the_sweep_takes_its_workers_along(tmp_path):
    # Issue 13: the pool workers used to finish their runs and then sit blocked for minutes.
    path = tmp_path / "resume.toml"
    path.write_text(EXPERIMENT)
    p = run(path, tmp_path / "out", start_new_session=True)
    deadline = time.monotonic() + 120
    while len(done_records(tmp_path / "out")) < 2:
        assert p.poll() is None, "the sweep finished before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    workers = _children(p.pid)
    assert len(workers) >= 2, workers  # the pool of --workers 2
    os.kill(p.pid, signal.SIGKILL)  # the parent only, not its process group
    p.wait(timeout=30)
    deadline = time.monotonic() + 5
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [w for w in workers if _alive(w)], "workers outlived their sweep by 5 s"


REAL_WORLDS = {
    # A real server on 127.0.0.1 (a process of its own), and real processes under the kernel
    # (a launcher, its coordinator and workers): each runs 20 s unless its sweep dies first.
    "server": """
[experiment]
name = "orphans-server"
world = "server"
[workload]
clients = 2
bytes = "det:4096"
time = 20_000
[[policy]]
name = "fcfs"
""",
    "os": """
[experiment]
name = "orphans-os"
world = "os"
[workload]
clients = 2
size = "det:50"
time = 20_000
[machine]
cpus = 2
[[policy]]
name = "kernel"
""",
}


@pytest.mark.real
@pytest.mark.parametrize("world", sorted(REAL_WORLDS))
def test_kill_9_of_a_sweep_takes_its_servers_and_processes_along(world, tmp_path):
    # Issue 13: workers die with the sweep, whatever kills it; the processes a run starts (the
    # server, the os world's launcher and its workers) die with them.
    path = tmp_path / "real.toml"
    path.write_text(REAL_WORLDS[world])
    p = run(path, tmp_path / "out", start_new_session=True)
    deadline = time.monotonic() + 60
    started: set[int] = set()
    while time.monotonic() < deadline and p.poll() is None:
        started = _children(p.pid)
        # The pool worker, and under it what the run started (server or launcher + workers).
        if len(started) >= (2 if world == "server" else 4):
            break
        time.sleep(0.05)
    assert p.poll() is None, p.stderr.read() if p.stderr else ""
    time.sleep(1.0)  # the run under way
    started = _children(p.pid)
    assert len(started) >= (2 if world == "server" else 4), started
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    deadline = time.monotonic() + 5
    while any(_alive(c) for c in started) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [c for c in started if _alive(c)]
    assert not left, f"alive 5 s after the sweep died: {left}"
    if world == "server":
        # kill -9 leaves no process to remove the run's scratch directory (its catalogue and
        # request log); the next server run removes it, its owner being dead.
        from schedlab import server

        def scratch() -> list[Path]:
            tmp = Path(tempfile.gettempdir())
            return [d for pid in started for d in tmp.glob(f"{server.WORK_PREFIX}{pid}-*")]

        assert scratch(), "the killed run's scratch directory was expected to outlive it"
        server.run({"policy": "fcfs", "clients": 1, "jobs": 3, "seed": 1,
                    "catalogue": [{"path": "/a.bin", "bytes": 4096}]})
        assert not scratch()

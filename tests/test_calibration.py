"""Calibration (issue 14): the simulator's terms for a machine's costs (turn_cost,
service_scale/offset, dispatch_delay) against hand-computed schedules, a machine profile read
and modelled by hand-computed arithmetic, and, on the real server, a known emulated cost
calibrated back and a profile that predicts another run."""

from __future__ import annotations

import json
import math
import os
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import schedlab
import tomli_w
from conftest import ROOT, SCHEDLAB, cli_env
from schedlab import experiment as ex
from schedlab import profile, worlds
from schedlab.calibration import (
    _mark_disagreeing_scales,
    _over_reps,
    _quantiles_with_intervals,
    _without_stalls,
)
from schedlab.worlds import server as server_world


def _trace(tmp_path: Path, rows: list[tuple[float, float]]) -> str:
    path = tmp_path / "trace.csv"
    path.write_text("arrival,size\n" + "".join(f"{a},{s}\n" for a, s in rows))
    return str(path)


def _same(a: dict, b: dict) -> bool:
    """Summaries equal key by key (NaN equal to NaN)."""
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True,
                                                                    default=str)


def test_a_turn_costs_a_run_that_goes_on_and_a_switch_one_after_another_job(tmp_path):
    # Two jobs of 2 at 0, RR quantum 1, one CPU, turn 0.1, switch 0.05: the runs alternate,
    # each after the other job's. By hand: A [0.05, 1.05] (a switch from nothing), B [1.10,
    # 2.10], A [2.15, 3.15], B [3.20, 4.20].
    r = schedlab.simulate("rr", quantum=1, trace=_trace(tmp_path, [(0, 2), (0, 2)]), cpus=1,
                          turn_cost=0.1, context_switch=0.05, keep_schedule=True)
    assert r.schedule[["start", "end"]].to_numpy().ravel().tolist() == pytest.approx(
        [0.05, 1.05, 1.10, 2.10, 2.15, 3.15, 3.20, 4.20])
    assert r.jobs["completion"].tolist() == pytest.approx([3.15, 4.20])
    # Alone, a job that goes on after its own quantum pays a turn per later run:
    # [0.05, 1.05], [1.15, 2.15], [2.25, 3.25].
    r = schedlab.simulate("rr", quantum=1, trace=_trace(tmp_path, [(0, 3)]), cpus=1,
                          turn_cost=0.1, context_switch=0.05)
    assert r.jobs["completion"].tolist() == pytest.approx([3.25])


def test_service_scale_and_offset_make_a_jobs_service_on_this_machine(tmp_path):
    # Sizes 2 -> 1.5 x 2 + 0.5 = 3.5 ms of CPU each, FCFS on one CPU.
    r = schedlab.simulate("fcfs", trace=_trace(tmp_path, [(0, 2), (0, 2)]), cpus=1,
                          service_scale=1.5, service_offset=0.5)
    assert r.jobs["size"].tolist() == pytest.approx([3.5, 3.5])
    assert r.jobs["completion"].tolist() == pytest.approx([3.5, 7.0])


def test_dispatch_delay_counts_in_responses_and_delays_the_machine(tmp_path):
    # A trace row's arrival is when the job is sent; it reaches the machine 0.25 later.
    r = schedlab.simulate("fcfs", trace=_trace(tmp_path, [(0, 2), (0, 2)]), cpus=1,
                          dispatch_delay=0.25)
    assert r.jobs["arrival"].tolist() == [0.0, 0.0]
    assert r.jobs["completion"].tolist() == pytest.approx([2.25, 4.25])
    assert r.jobs["response"].tolist() == pytest.approx([2.25, 4.25])
    # Open: every 10 ms a job of 2, no queue: each response is 2 + 0.5.
    r = schedlab.simulate("fcfs", arrival="det:10", size="det:2", dispatch_delay=0.5, jobs=3,
                          warmup=0)
    assert r.jobs["arrival"].tolist() == pytest.approx([10.0, 20.0, 30.0])
    assert r.jobs["response"].tolist() == pytest.approx([2.5, 2.5, 2.5])
    # Closed: think 1, the way 0.5, service 2: a cycle of 3.5 ms, responses of 2.5.
    r = schedlab.simulate("fcfs", clients=1, think="det:1", size="det:2", dispatch_delay=0.5,
                          time=35.0, warmup=0)
    assert r.jobs["arrival"].tolist()[:3] == pytest.approx([1.0, 4.5, 8.0])
    assert r.summary["response_mean"] == pytest.approx(2.5)
    assert r.summary["jobs"] == 10


def test_without_the_new_terms_a_run_is_unchanged():
    spec = dict(policy="rr", quantum=0.5, load=0.8, size="exp:1", jobs=20_000, seed=3)
    plain = schedlab.simulate(**spec, keep_jobs=False).summary
    zero = schedlab.simulate(**spec, keep_jobs=False, turn_cost=0.0, service_scale=1.0,
                             service_offset=0.0, dispatch_delay=0.0).summary
    assert _same(plain, zero)


PROFILE = """
[profile]
format = 1
world = "server"
[profile.config]
cpus = 2
cost = "0.25ms+0.02ms/KiB"
cost_mode = "sleep"
packet = 16384
[server.fixed]
mean = 0.4
[server.per_kib]
mean = 0.021
[server.turn]
mean = 0.05
[server.switch]
mean = 0.01
[server.delay]
mean = 0.1
"""


@pytest.fixture
def profile_file(tmp_path: Path) -> Path:
    path = tmp_path / "server.toml"
    path.write_text(PROFILE)
    return path


def test_a_profile_becomes_the_simulators_terms_by_hand(profile_file):
    prof = profile.load(profile_file)
    # As calibrated: per KiB 0.021 against 0.02 emulated, scale 1.05, on the bytes' part of
    # a size (offset -1.05 x 0.25); a turn after another request's 0.05 + 0.01; the
    # request's fixed 0.4 ms on its first run, less the 0.06 switch that run pays: 0.34.
    terms, _ = profile.model_terms(prof, {"policy": "rr", "params": {"quantum": 5}})
    assert terms["service_scale"] == pytest.approx(1.05)
    assert terms["service_offset"] == pytest.approx(-1.05 * 0.25)
    assert terms["start_cost"] == pytest.approx(0.4 - 0.06)
    assert terms["turn_cost"] == 0.05 and terms["context_switch"] == pytest.approx(0.06)
    assert terms["dispatch_delay"] == 0.1
    # 5 ms = 15.625 packets of 0.32 ms: 16 whole packets, each 0.32 x 1.05 as calibrated.
    assert terms["params"]["quantum"] == pytest.approx(16 * 0.32 * 1.05)
    # Another emulated cost keeps the server's own part: 0.15 ms and 0.001 ms/KiB.
    terms, _ = profile.model_terms(prof, {"policy": "fcfs", "cost": "1ms+0.1ms/KiB"})
    assert terms["service_scale"] == pytest.approx(0.101 / 0.1)
    assert terms["service_offset"] == pytest.approx(-1.01 * 1.0)
    assert terms["start_cost"] == pytest.approx(1.15 - 0.06)
    assert "params" not in terms
    # A request measured cheaper than its switch: no negative start.
    prof["server"]["fixed"]["mean"] = 0.05
    terms, notes = profile.model_terms(prof, {"policy": "fcfs"})
    assert terms["start_cost"] == 0.0
    assert any("start_cost -0.01 ms < 0" in n for n in notes)


def test_an_idle_machines_wake_up_is_its_own_term(profile_file, tmp_path):
    # [server.idle_delay] (one client thinking long): what a request that finds the server
    # empty spends outside the workers; beyond the busy delay it is idle_wake.
    assert "idle_wake" not in profile.model_terms(profile.load(profile_file), {})[0]
    woken = tmp_path / "woken.toml"
    woken.write_text(PROFILE + "[server.idle_delay]\nmean = 0.25\n")
    terms, notes = profile.model_terms(profile.load(woken), {"policy": "fcfs"})
    assert terms["idle_wake"] == pytest.approx(0.25 - 0.1)
    assert any("waits 0.15 ms more for it to wake (idle_wake)" in n for n in notes)
    # Measured under the busy delay (noise): no negative wake-up.
    woken.write_text(PROFILE + "[server.idle_delay]\nmean = 0.09\n")
    assert profile.model_terms(profile.load(woken), {})[0]["idle_wake"] == 0.0
    woken.write_text(PROFILE + "[server.idle_delay]\nlow = 0.2\n")
    with pytest.raises(schedlab.SpecError, match=r"\[server.idle_delay\] has no finite mean"):
        profile.load(woken)
    # In the model: two clients thinking 30 ms on an otherwise empty server mostly find it
    # empty, and their mean response grows by nearly the whole wake-up; 32 clients on 2 CPUs
    # keep it busy and hardly pay it.
    spec = dict(policy="fcfs", think="exp:30", size="exp:5", cpus=2, jobs=20_000, seed=2,
                keep_jobs=False)
    for clients, share in ((2, (0.75, 0.95)), (32, (0.0, 0.05))):
        plain = schedlab.simulate(**spec, clients=clients).summary["response_mean"]
        woke = schedlab.simulate(**spec, clients=clients, idle_wake=0.15).summary
        assert share[0] < (woke["response_mean"] - plain) / 0.15 < share[1], clients
    with pytest.raises(schedlab.SpecError, match="^idle_wake = 0.15.*shares the CPU"):
        schedlab.simulate("ps", load=0.5, jobs=10, idle_wake=0.15)


def test_a_profile_reaches_the_simulator_from_python_the_cli_and_a_file(profile_file,
                                                                        tmp_path):
    spec = dict(policy="fcfs", clients=2, think="exp:5", size="exp:2", jobs=3_000, seed=4)
    ideal = schedlab.simulate(**spec, keep_jobs=False).summary["response_mean"]
    by_hand = schedlab.simulate(**spec, keep_jobs=False, service_scale=1.05,
                                service_offset=-1.05 * 0.25, start_cost=0.34, turn_cost=0.05,
                                context_switch=0.06, dispatch_delay=0.1).summary
    py = schedlab.simulate(**spec, keep_jobs=False, profile=str(profile_file)).summary
    assert _same(py, by_hand) and py["response_mean"] > ideal
    out = subprocess.run([SCHEDLAB, "sim", "--policy", "fcfs", "--clients", "2", "--think",
                          "exp:5", "--size", "exp:2", "--jobs", "3000", "--seed", "4",
                          "--profile", str(profile_file), "--json"],
                         capture_output=True, text=True, env=cli_env(), check=True)
    assert json.loads(out.stdout)["response_mean"] == py["response_mean"]
    # In a file: the calibrated world models it with the server keys it reads; the
    # simulator's ideal model leaves both out.
    written = {**spec, "cost": "0.25ms+0.02ms/KiB", "packet": 16384,
               "profile": str(profile_file)}
    t = worlds.translate("calibrated", written, {"profile": "machine.profile"})
    assert t.skip is None
    assert t.spec["profile"] == str(profile_file) and t.spec["cost"] == "0.25ms+0.02ms/KiB"
    assert any(n.startswith("machine.profile = ") and "0.021 ms/KiB" in n for n in t.notes)
    assert _same(worlds.runner("calibrated")(**t.spec, keep_jobs=False).summary
                 | {"world": "sim"}, py | {"world": "sim"})
    t = worlds.translate("sim", written, {"profile": "machine.profile"})
    assert "profile" not in t.spec and "cost" not in t.spec
    assert any(n.startswith("machine.profile = ") and "ideal model" in n for n in t.notes)
    # The real worlds measure what a profile models: they drop it, and its terms, with a note.
    for world in ("server", "os"):
        t = worlds.translate(world, {**spec, "profile": str(profile_file), "turn_cost": 0.1})
        assert "profile" not in t.spec and "turn_cost" not in t.spec
        assert any("profile" in n for n in t.notes)


@pytest.mark.parametrize("text, why", [
    (None, "no such file"),
    ("[profile]\nworld = 'server'\n", "format = 1 is missing"),
    ("[profile]\nformat = 1\nworld = 'disk'\n", "its world is 'disk'"),
    ("[profile]\nformat = 1\nworld = 'os'\n", "[os.start] has no finite mean"),
    ("[profile]\nformat = 1\nworld = 'server'\n[server.fixed]\nmean = 1\n", "[server.per_kib] "
     "has no finite mean"),
    ("not toml [", "reading it failed"),
    # What the file says beside what it lacks: not "format = 1 is missing" alone.
    ("[profile]\nformat = 2\nworld = 'server'\n", "format = 1 is missing (it says 2)"),
    ("[profile]\nformat = 1\nworld = 'server'\n[server.fixed]\nmean = nan\n",
     "[server.fixed] has no finite mean"),
])
def test_a_bad_profile_is_one_error_naming_the_key(tmp_path, text, why):
    path = tmp_path / "p.toml"
    if text is not None:
        path.write_text(text)
    with pytest.raises(schedlab.SpecError, match=r"^profile = .*p\.toml: expected a machine "
                       r"profile") as e:
        schedlab.simulate("fcfs", jobs=10, profile=str(path))
    # What is wrong comes first, before what a profile holds (it ended a 700-character line).
    assert why in str(e.value) and str(e.value).index(why) < 160 + len(str(path))
    out = subprocess.run([SCHEDLAB, "sim", "--jobs", "10", "--profile", str(path)],
                         capture_output=True, text=True, env=cli_env())
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "profile = " in out.stderr and why in out.stderr


def test_calibrate_refuses_bad_input_before_any_run(tmp_path):
    (tmp_path / "f").write_text("a file, where a directory would be made")
    for args, key in ((["--out", str(tmp_path / "p.txt")], "out = "),
                      (["--out", str(tmp_path / "p.toml"), "--cost", "5xs"], "cost = 5xs"),
                      (["--out", str(tmp_path / "p.toml"), "--cpus", "0"], "cpus = 0"),
                      # The server's own rule, not ">= 0" and then, at 0, ">= 1".
                      (["--out", str(tmp_path / "p.toml"), "--packet", "-1"],
                       "packet = -1: expected a whole number >= 1"),
                      (["--out", str(tmp_path / "p.toml"), "--phase-ms", "500"],
                       "phase_ms = 500.0: expected ms of load per server phase, from 1000"),
                      (["--out", str(tmp_path / "f" / "p.toml")], "out = ")):
        out = subprocess.run([SCHEDLAB, "calibrate", "server", *args], capture_output=True,
                             text=True, env=cli_env(), timeout=60)
        assert out.returncode == 2, out.stderr
        assert key in out.stderr
    # A server key is not an os key: refused by name before any process starts.
    out = subprocess.run([SCHEDLAB, "calibrate", "os", "--out", str(tmp_path / "p.toml"),
                          "--cost", "5ms"], capture_output=True, text=True, env=cli_env(),
                         timeout=60)
    assert out.returncode == 2 and "cost = 5ms" in out.stderr and "enforce" in out.stderr
    out = subprocess.run([SCHEDLAB, "calibrate", "os", "--out", str(tmp_path / "p.toml"),
                          "--enforce", "never"], capture_output=True, text=True, env=cli_env(),
                         timeout=60)
    assert out.returncode == 2 and "enforce = never" in out.stderr
    out = subprocess.run([SCHEDLAB, "calibrate", "os", "--out", str(tmp_path / "p.toml"),
                          "--reps", "0"], capture_output=True, text=True, env=cli_env(),
                         timeout=60)
    assert out.returncode == 2 and "reps = 0: expected repetitions of each os phase" in out.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["f"]
    with pytest.raises(schedlab.SpecError, match="^world = disk: expected server or os"):
        schedlab.calibrate("disk")
    for option, message in ((dict(phase_ms=0), "^phase_ms = 0: "),
                            (dict(reps=2.5), "^reps = 2.5: "),
                            (dict(quick="yes"), '^quick = "yes": expected true or false'),
                            (dict(seed="1"), '^seed = "1": expected a whole number'),
                            # The os world's length was taken by a server calibration and
                            # ignored (a full run, exit 0).
                            (dict(reps=3), "^reps = 3: expected nothing in a server "
                             r"calibration \(it is the os calibration's\)")):
        with pytest.raises(schedlab.SpecError, match=message):
            schedlab.calibrate("server", tmp_path / "p.toml", **option)
    with pytest.raises(schedlab.SpecError,
                       match="^phase_ms = 2000: expected nothing in an os calibration"):
        schedlab.calibrate("os", tmp_path / "p.toml", phase_ms=2000)
    assert [p.name for p in tmp_path.iterdir()] == ["f"]


OS_PROFILE = """
[profile]
format = 1
world = "os"
config = { cpus = 2, enforce = "fifo" }
[os.start]
mean = 0.3
tasks = 16
[os.start_many]
mean = 0.2
tasks = 256
[os.scale]
mean = 1.0
[os.scale_many]
mean = 1.1
[os.other_start]
mean = 0.5
tasks = 16
[os.other_start_many]
mean = 0.4
tasks = 256
[os.other_scale]
mean = 1.02
[os.other_scale_many]
mean = 1.04
[os.dispatch_start]
mean = 0.2
tasks = 16
[os.dispatch_start_many]
mean = 0.3
tasks = 256
[os.dispatch_switch]
mean = 0.02
"""


def test_an_os_profile_becomes_the_simulators_terms_by_hand(tmp_path):
    path = tmp_path / "os.toml"
    path.write_text(OS_PROFILE)
    prof = profile.load(path)
    # 64 processes: halfway between 16 and 256 in log. SCHED_FIFO: FIFO's line, start 0.25
    # and scale 1.05; SCHED_OTHER: its own line (its switches in it), 0.45 and 1.03.
    kernel, notes = profile.model_terms(prof, {"policy": "priority", "clients": 64,
                                               "sched": "fifo"})
    assert kernel == pytest.approx({"service_scale": 1.05, "start_cost": 0.25,
                                    "context_switch": 0.0})
    assert "64 processes under the kernel's SCHED_FIFO" in notes[0]
    other, _ = profile.model_terms(prof, {"policy": "cfs", "clients": 64, "sched": "other"})
    assert other == pytest.approx({"service_scale": 1.03, "start_cost": 0.45,
                                   "context_switch": 0.0})
    # Through the dispatcher: its start less the switch the simulator charges a first run.
    dispatched, _ = profile.model_terms(prof, {"policy": "rr", "clients": 64})
    assert dispatched == pytest.approx({"service_scale": 1.0, "start_cost": 0.25 - 0.02,
                                        "context_switch": 0.02})
    _, notes = profile.model_terms(prof, {"policy": "rr", "batch": 1000})
    assert any("outside the 16..256 calibrated, extrapolated" in n for n in notes)
    # A kernel FIFO batch of 64 jobs of 10 ms on 2 CPUs through an experiment file: each CPU
    # runs 32 back to back, each 0.25 + 10 x 1.05 = 10.75 ms: makespan 344, mean
    # 10.75 x 33 / 2 = 177.375.
    exp = {"experiment": {"name": "os-model", "world": ["sim", "calibrated"]},
           "workload": {"batch": 64, "size": "det:10"},
           "machine": {"cpus": 2, "enforce": "fifo", "profile": str(path)},
           "policy": [{"name": "kernel", "label": "FIFO", "sched": "fifo", "rtprio": 10}]}
    res = schedlab.run(exp, out=tmp_path / "out")
    s = res.summaries.set_index("world")
    assert s.loc["calibrated", "response_max"] == pytest.approx(344.0)
    assert s.loc["calibrated", "response_mean"] == pytest.approx(177.375)
    assert s.loc["sim", "response_max"] == pytest.approx(320.0)
    assert any("64 processes under the kernel's SCHED_FIFO" in n
               for n in res.manifest["notes"]["calibrated"])
    # A kernel policy given per class is kept for the profile as the simulator reads it.
    t = worlds.translate("calibrated", {"policy": "kernel", "profile": str(path), "cpus": 2,
                                        "size": "det:10", "classes": [
                                            {"name": "a", "sched": "fifo", "batch": 4}]})
    assert t.spec["sched"] == "fifo" and t.skip is None


def _one_part(text: str, part: str) -> str:
    """OS_PROFILE as a calibration of one part writes it: its terms alone, and parts."""
    data = tomllib.loads(text)
    data["os"] = {k: v for k, v in data["os"].items() if profile.part_of(k) in (part, None)}
    data["profile"]["parts"] = [part]
    return tomli_w.dumps(data)


def test_a_profile_of_one_part_models_its_runs_and_refuses_the_others(tmp_path):
    both, dispatcher, kernel = (tmp_path / f"{n}.toml" for n in ("both", "dispatcher", "kernel"))
    both.write_text(OS_PROFILE)
    dispatcher.write_text(_one_part(OS_PROFILE, "dispatcher"))
    kernel.write_text(_one_part(OS_PROFILE, "kernel"))
    assert "start" not in profile.load(dispatcher)["os"]
    assert "dispatch_start" not in profile.load(kernel)["os"]
    # A dispatched run from the dispatcher's part, a kernel run from the kernel's: the same
    # bits as from a profile of both.
    runs = [({"policy": "rr", "quantum": 10}, dispatcher),
            ({"policy": "kernel", "sched": "fifo", "rtprio": 10}, kernel)]
    for policy, part in runs:
        spec = {**policy, "batch": 64, "size": "det:10", "cpus": 2}
        assert schedlab.simulate(**spec, profile=str(part)).summary["response_mean"] == \
            schedlab.simulate(**spec, profile=str(both)).summary["response_mean"]
    # The other kind of run: refused, naming the key, the file and what it lacks, in Python,
    # the command line (exit 2) and an experiment file (nothing left behind).
    with pytest.raises(schedlab.SpecError, match=r"profile = .*dispatcher\.toml: expected a "
                       r"profile that measured the kernel \(this run is under the kernel's "
                       r"SCHED_FIFO; the profile measured parts = \[\"dispatcher\"\] only"):
        schedlab.simulate(**runs[1][0], batch=8, size="det:1", cpus=2, profile=str(dispatcher))
    with pytest.raises(schedlab.SpecError, match="measured the dispatcher .*under schedlab's "
                       "dispatcher"):
        schedlab.simulate(policy="rr", batch=8, size="det:1", cpus=2, profile=str(kernel))
    out = subprocess.run([SCHEDLAB, "sim", "--policy", "rr", "--batch", "8", "--size", "det:1",
                          "--cpus", "2", "--profile", str(kernel)], capture_output=True,
                         text=True, env=cli_env(), timeout=60)
    assert out.returncode == 2 and "measured the dispatcher" in out.stderr, out.stderr
    exp = {"experiment": {"name": "one-part", "world": ["sim", "calibrated"]},
           "workload": {"batch": 8, "size": "det:1"},
           "machine": {"cpus": 2, "profile": str(kernel)}, "policy": [{"name": "rr"}]}
    with pytest.raises(schedlab.SpecError, match="machine.profile = .*measured the dispatcher"):
        schedlab.run(exp, out=tmp_path / "out")
    assert not (tmp_path / "out").exists()
    # A file that says one part and lacks one of its terms, or names a part that is none.
    broken = tomllib.loads(dispatcher.read_text())
    del broken["os"]["dispatch_switch"]
    dispatcher.write_text(tomli_w.dumps(broken))
    with pytest.raises(schedlab.SpecError, match=r"\[os.dispatch_switch\] has no finite mean"):
        profile.load(dispatcher)
    kernel.write_text(kernel.read_text().replace('parts = [\n    "kernel",\n]',
                                                 'parts = ["kernal"]'))
    with pytest.raises(schedlab.SpecError, match=r"parts = \['kernal'\]: expected a list of "
                       "what an os calibration measures"):
        profile.load(kernel)


def test_calibrate_refuses_bad_parts_before_any_run(tmp_path):
    out_file = tmp_path / "p.toml"
    for parts in ("kernal", "kernel,kernel", ""):
        out = subprocess.run([SCHEDLAB, "calibrate", "os", "--out", str(out_file), "--parts",
                              parts], capture_output=True, text=True, env=cli_env(), timeout=60)
        assert out.returncode == 2, out.stderr
        assert f'parts = "{parts}": expected a list of what an os calibration measures' in \
            out.stderr and "kernel (" in out.stderr and "dispatcher (" in out.stderr
    for parts in (["kernal"], [], ["dispatcher", "dispatcher"], 3):
        with pytest.raises(schedlab.SpecError, match="parts = .*: expected a list of what"):
            schedlab.calibrate("os", out_file, parts=parts)
    out = subprocess.run([SCHEDLAB, "calibrate", "server", "--out", str(out_file), "--parts",
                          "kernel"], capture_output=True, text=True, env=cli_env(), timeout=60)
    assert out.returncode == 2 and 'parts = "kernel": expected nothing in a server ' \
        "calibration (it is the os calibration's)" in out.stderr
    assert not out_file.exists()


def test_an_experiment_calibrates_only_the_parts_its_runs_read(tmp_path, monkeypatch):
    from schedlab import calibration, sweep

    asked = []

    def fake(world, out, *, parts=profile.OS_PARTS, **kwargs):
        asked.append((Path(out).name, parts))
        data = tomllib.loads(OS_PROFILE if parts == profile.OS_PARTS
                             else _one_part(OS_PROFILE, parts[0]))
        for term in data["os"].values():
            term["unit"] = "ms"
        Path(out).write_text(tomli_w.dumps(data))
        return profile.load(out)

    monkeypatch.setattr(calibration, "calibrate", fake)
    for name, parts in (("xv6/os-priority.toml", ("dispatcher",)),
                        ("linux-policies/grid-os.toml", ("kernel",))):
        asked.clear()
        exp = ex.load(ROOT / "experiments" / name, quick=True)
        sweep.calibrate_first(exp, tmp_path)
        assert asked and all(p == parts for _, p in asked), asked
        assert all(n.endswith(f"-{parts[0]}.toml") for n, _ in asked), asked
    # Both kinds of run in one file: one profile of both parts.
    asked.clear()
    mixed = {"experiment": {"name": "mixed", "world": ["os", "calibrated"]},
             "workload": {"batch": 8, "size": "det:1"},
             "machine": {"cpus": 2, "profile": "calibrate"},
             "policy": [{"name": "rr"}, {"name": "kernel", "sched": "fifo", "rtprio": 10}]}
    sweep.calibrate_first(ex.load(mixed), tmp_path)
    assert asked == [("profile-os-cpus2.toml", profile.OS_PARTS)]


def test_an_os_profiles_exit_splits_the_dispatchers_start_from_the_end(tmp_path):
    # With `dispatch_exit` 0.1 ms: the end is 0.1 less the switch its run pays (0.08), and the
    # start keeps the rest of dispatch_start at 64 processes (0.25 - 0.02 - 0.08); a job's
    # whole cost is the same. An end larger than the start is held to it (the start is 0).
    path = tmp_path / "os.toml"
    path.write_text(OS_PROFILE + "[os.dispatch_exit]\nmean = 0.1\n")
    terms, notes = profile.model_terms(profile.load(path), {"policy": "rr", "clients": 64})
    assert terms == pytest.approx({"service_scale": 1.0, "start_cost": 0.15, "end_cost": 0.08,
                                   "context_switch": 0.02})
    assert "0.15 ms more to start (start_cost), 0.08 ms to end (end_cost)" in notes[0]
    path.write_text(OS_PROFILE + "[os.dispatch_exit]\nmean = 0.5\n")
    terms, _ = profile.model_terms(profile.load(path), {"policy": "rr", "clients": 64})
    assert terms == pytest.approx({"service_scale": 1.0, "start_cost": 0.0, "end_cost": 0.23,
                                   "context_switch": 0.02})
    # The kernel's own policies have their lines: no end apart.
    kernel, _ = profile.model_terms(profile.load(path), {"policy": "priority", "clients": 64,
                                                         "sched": "fifo"})
    assert "end_cost" not in kernel
    # A mean that is not a number is refused, naming the term.
    path.write_text(OS_PROFILE + "[os.dispatch_exit]\nmean = \"fast\"\n")
    with pytest.raises(schedlab.SpecError, match=r"\[os.dispatch_exit\] has no finite mean"):
        profile.load(path)


def test_an_os_profiles_long_start_is_taken_at_the_runs_job_size(tmp_path):
    # dispatch_exit 0.1 and dispatch_start_long 0.12 (jobs of 1 ms): at 64 processes the tiny
    # batches' start is 0.25, less the end (0.08): 0.17. Jobs of 0.01 ms keep it (start_cost
    # 0.17 - 0.02, a switch), jobs of 1 ms and more take 0.12 (0.10), jobs of 0.1 ms halfway
    # in log (0.145: 0.125); classes by their fractions (a mean of 0.1 ms). The end stays.
    path = tmp_path / "os.toml"
    path.write_text(OS_PROFILE + "[os.dispatch_exit]\nmean = 0.1\n[os.dispatch_start_long]\n"
                    "mean = 0.12\ntasks = 64\nsize_ms = 1.0\n")
    prof = profile.load(path)
    for spec, start in (({"size": "det:0.01"}, 0.15), ({"size": "det:1"}, 0.10),
                        ({"size": "det:20"}, 0.10), ({}, 0.10), ({"size": "det:0.1"}, 0.125),
                        ({"size": "det:0.001"}, 0.15),
                        ({"classes": [{"fraction": 0.5, "size": "det:0.01"},
                                      {"fraction": 0.5, "size": "det:0.19"}]}, 0.125)):
        terms, notes = profile.model_terms(prof, {"policy": "rr", "clients": 64, **spec})
        assert terms == pytest.approx({"service_scale": 1.0, "start_cost": start,
                                       "end_cost": 0.08, "context_switch": 0.02}), spec
        assert any(n.startswith("a start at the mean job size") for n in notes), notes
    # The kernel's own policies have their lines: the term is the dispatcher's alone.
    kernel, _ = profile.model_terms(prof, {"policy": "priority", "clients": 64, "sched": "fifo",
                                           "size": "det:1"})
    assert kernel["start_cost"] == pytest.approx(0.25)


def test_a_timer_terms_quantile_intervals_are_the_order_statistics_that_cover_it():
    # 1..500: the p50 interval is the 228th and 273rd values (binomial 2.5% and 97.5% points
    # of Bin(500, 0.5): 228 and 272), the p99's the 490th and the largest.
    q = _quantiles_with_intervals(np.arange(500, 0, -1.0))
    assert (q["p50_low"], q["p50"], q["p50_high"]) == (228.0, 250.5, 273.0)
    assert (q["p99_low"], q["p99_high"], q["max"]) == (490.0, 500.0, 500.0)
    # Coverage of the true quantiles of exp(1) (ln 2, ln 20, ln 100) by 2,000 samples of 500:
    # a distribution-free interval covers at least 95% (these seeds: fixed counts; 2,000 runs
    # give the count an sd of 0.5 points).
    rng = np.random.default_rng(11)
    truth = {"p50": np.log(2), "p95": np.log(20), "p99": np.log(100)}
    covered = dict.fromkeys(truth, 0)
    for _ in range(2_000):
        q = _quantiles_with_intervals(rng.exponential(1.0, 500))
        for name, value in truth.items():
            covered[name] += q[f"{name}_low"] <= value <= q[f"{name}_high"]
    for name, count in covered.items():
        assert 0.94 <= count / 2_000 <= 0.99, (name, count)  # 0.9495, 0.958, 0.976


def test_a_stalled_wake_up_repetition_is_left_out():
    # Three slopes of 0.109, 0.112 and 0.402 ms (this machine, 2026-11-27: one run of 45
    # sleeps held 13 ms longer): median 0.112, spread 1.4826 x 0.0026, so 0.402 is ~75 spreads
    # above and left out. A spread is taken at least 0.005 ms: 0.05 among four near 0.011 is
    # 7.6 of those above and stays; and a low value is never a stall.
    assert _without_stalls([0.109066, 0.111689, 0.401618]) == [0.109066, 0.111689]
    assert _without_stalls([0.01, 0.012, 0.011, 0.05, 0.013]) == [0.01, 0.012, 0.011, 0.05,
                                                                 0.013]
    assert _without_stalls([0.1, 0.1, 0.1, -0.3]) == [0.1, 0.1, 0.1, -0.3]


def test_a_slow_batch_of_tiny_dispatched_jobs_is_left_out(monkeypatch):
    # The dispatcher's starts repeat as the short phases do, and a batch far slower than its
    # neighbours is left out: a quick calibration (2026-12-01) took 0.739 and 0.216 ms a
    # start at 64 processes, and its mean of the two put the xv6 file's tiny cells at twice the
    # real. Every phase is stood in for: the batches' per-CPU wall time is a start of 0.2 ms
    # (0.22 at many) plus the CPU asked, and the third repetition of each tiny batch is 3.4x.
    from schedlab import calibration

    def batch(gate, phase, config, n, size, seed, **policy):
        start = 0.2 if n <= calibration.FEW * 2 else 0.22
        if size == 0.01 and seed == 12:
            start *= 3.4
        return {"response_max": (start + size) * n / 2, "jobs": n, "context_switches": 100.0,
                "migrations": 200, "dispatcher_cpu_ms": (0.1 + 0.01 * (seed - 10)) * n}

    monkeypatch.setattr(calibration, "_os_batch", batch)
    monkeypatch.setattr(calibration, "_exit_cost", lambda *a, **k: (0.1, 0.08))
    monkeypatch.setattr(calibration, "_wake_cost", lambda *a, **k: 0.05)
    monkeypatch.setattr(calibration, "_timer_terms", lambda *a, **k: {})
    monkeypatch.setattr(calibration, "_migration_cost", lambda *a, **k: (0.0, 200))
    terms = calibration.calibrate_os({"cpus": 2}, seed=10, reps=2, many=64)["os"]
    for name, start in (("dispatch_start", 0.2), ("dispatch_start_many", 0.22)):
        t = terms[name]
        assert len(t["reps"]) == 3 and t["stalled"] == [pytest.approx(3.4 * start)], t
        assert t["mean"] == pytest.approx(start), t
    # The dispatcher's own CPU per job, from the many processes' batches: every repetition
    # (a stall of the machine lengthens the wall time, not the dispatcher's CPU clock).
    own = terms["dispatcher_cpu"]
    assert own["reps"] == pytest.approx([0.10, 0.11, 0.12, 0.13]) and own["tasks"] == 128
    assert own["mean"] == pytest.approx(0.115) and own["unit"] == "ms"
    # The exit phase's two numbers: an end and a start of a job of 1 ms, per repetition.
    assert terms["dispatch_exit"]["reps"] == [0.1, 0.1]
    long = terms["dispatch_start_long"]
    assert long["reps"] == [0.08, 0.08] and long["tasks"] == 64 and long["size_ms"] == 1.0


def test_the_exit_phase_gives_an_end_and_a_start_of_a_1_ms_job():
    # Six processes of 1 ms on 2 CPUs, first runs two at a time at 0, 1.3 and 2.6 ms: a CPU
    # starts one every 1.3 ms, 0.3 beyond its 1 ms. The last first run ends at 3.6; the two
    # that ran at 0 woke (after their 2 ms sleep) before it and ended at 3.7 and 3.9: an end
    # every 0.2 ms on one CPU's worth of their span, 0.4 per CPU.
    import pandas as pd
    from schedlab import calibration

    class Gate:
        def run(self, phase, spec):
            assert phase == "exits" and spec["size"] == "det:1" and spec["jobs"] == 6
            return type("Run", (), {"jobs": pd.DataFrame({
                "first_run": [0.0, 0.0, 1.3, 1.3, 2.6, 2.6],
                "completion": [3.7, 3.9, 6.0, 6.1, 7.0, 7.2]})})()

    end, start = calibration._exit_cost(Gate(), {"cpus": 2}, 6, 1, {"policy": "rr"})
    assert end == pytest.approx(0.4) and start == pytest.approx(0.3)


def test_a_scale_whose_repetitions_disagree_is_flagged():
    # The quick Linux grid's other_scale (2026-11-28): 1.83, 1.81, 1.10, 1.01, mean 1.4375,
    # sd 0.4433, t(3) 3.182: 95% [0.732, 2.143], +-0.705 > 0.15. The example profile's
    # other_scale_many: three repetitions within 0.003 of each other.
    terms = {"scale": _over_reps([1.02, 1.03, 1.01, 1.02, 1.04], "ratio"),
             "scale_many": _over_reps([1.05, 1.06, 1.055], "ratio"),
             "other_scale": _over_reps([1.83, 1.81, 1.10, 1.01], "ratio"),
             "other_scale_many": _over_reps([1.0233, 1.0251, 1.0256], "ratio")}
    warnings = _mark_disagreeing_scales(terms)
    t = terms["other_scale"]
    assert t["mean"] == pytest.approx(1.4375)
    assert (t["low"], t["high"]) == (pytest.approx(0.7322, abs=1e-3), pytest.approx(2.1428,
                                                                                    abs=1e-3))
    assert t["disagree"] is True
    assert [terms[n]["disagree"] for n in ("scale", "scale_many", "other_scale_many")] == [
        False, False, False]
    assert warnings == ["os.other_scale = 1.44 [0.732, 2.14]: its repetitions disagree (1.83, "
                        "1.81, 1.1, 1.01; more than +-0.15), and a model on it is off by as "
                        "much: calibrate again on a quiet machine"]


def test_an_os_profiles_wake_up_and_migration_become_model_terms(tmp_path):
    # Under the dispatcher: its wake-up (0.12) is the time out of the runqueue after each I/O,
    # its migration (0.01) the migration cost; under the kernel, the kernel's wake-up (0.03).
    # Negative means (noise about 0) are 0 and leave the key out; the other terms stay.
    path = tmp_path / "os.toml"
    path.write_text(OS_PROFILE + "[os.kernel_wake]\nmean = 0.03\n[os.dispatch_wake]\nmean = 0.12"
                    "\n[os.dispatch_migrate]\nmean = 0.01\n")
    terms, notes = profile.model_terms(profile.load(path), {"policy": "rr", "clients": 64})
    assert terms == pytest.approx({"service_scale": 1.0, "start_cost": 0.23,
                                   "context_switch": 0.02, "wake_delay": 0.12,
                                   "migration_cost": 0.01})
    assert "0.12 ms to wake after each I/O (wake_delay), 0.01 ms per migration" in notes[0]
    kernel, _ = profile.model_terms(profile.load(path), {"policy": "priority", "clients": 64,
                                                         "sched": "fifo"})
    assert kernel["wake_delay"] == pytest.approx(0.03) and "migration_cost" not in kernel
    path.write_text(OS_PROFILE + "[os.dispatch_wake]\nmean = -0.004\n[os.dispatch_migrate]\n"
                    "mean = -0.01\n")
    terms, _ = profile.model_terms(profile.load(path), {"policy": "rr", "clients": 64})
    assert "wake_delay" not in terms and "migration_cost" not in terms
    assert terms["start_cost"] == pytest.approx(0.23)
    path.write_text(OS_PROFILE + "[os.dispatch_wake]\nmean = nan\n")
    with pytest.raises(schedlab.SpecError, match=r"\[os.dispatch_wake\] has no finite mean"):
        profile.load(path)


# --- On the real server ------------------------------------------------------------------

def _shared(prof: dict, summaries: Any = None) -> list[str]:
    """Why a profile, or the runs beside it, were measured on a machine the noise gate found
    shared: its warnings, and every run flagged noisy after its retries. With the hypervisor
    stealing 9-49% of the CPUs of sleep-heavy runs (an idle guest's wake-ups came late), a
    known 5 ms cost was calibrated back as 5.36 ms and a run's mean moved from 3.8 to 11.6 ms
    within minutes (2026-12-02)."""
    noisy = list(prof["profile"].get("warnings", []))
    if summaries is not None and "noisy" in summaries:
        flagged = summaries[summaries["noisy"].fillna(False).astype(bool)]
        noisy += [f"{r.world} {r.label} replication {r.replication}: {r.noise_reasons}"
                  for r in flagged.itertuples()]
    return noisy


def _skip_if_shared(prof: dict, summaries: Any = None) -> None:
    """Skips the rest of a test, a judgement of how near a model is to the machine, when
    `_shared` finds the machine shared; the skip names the test."""
    if noisy := _shared(prof, summaries):
        test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
        pytest.skip(f"{test}: not judged on a shared machine: {noisy}")


@pytest.mark.real
def test_a_known_emulated_cost_is_calibrated_back(tmp_path):
    out = tmp_path / "server.toml"
    run = subprocess.run([SCHEDLAB, "calibrate", "server", "--out", str(out), "--cpus", "1",
                          "--cost", "5ms+0.1ms/KiB", "--packet", "16384"],
                         capture_output=True, text=True, env=cli_env(), timeout=120)
    assert run.returncode == 0, run.stderr
    prof = profile.load(out)
    terms = prof["server"]
    assert prof["fit"]["requests"] > 300 and prof["profile"]["seconds"] > 0
    assert "fixed" in run.stdout and "ms/KiB" in run.stdout
    assert terms["fixed"]["low"] <= terms["fixed"]["mean"] <= terms["fixed"]["high"]
    assert terms["idle_delay"]["think_ms"] == 20.0 and prof["fit"]["phases"]["idle"] > 30
    assert prof["profile"]["config"]["cost"] == "5ms+0.1ms/KiB"
    # A phase still noisy after its retries is named, and the command says so.
    for warning in prof["profile"]["warnings"]:
        assert f"warning: {warning}" in run.stderr, run.stderr
    _skip_if_shared(prof)
    # The server adds its own tens of microseconds to the emulated 5 ms and 0.1 ms/KiB.
    assert terms["fixed"]["mean"] == pytest.approx(5.0, rel=0.05)
    assert terms["per_kib"]["mean"] == pytest.approx(0.1, rel=0.05)
    assert 0 <= terms["turn"]["mean"] < 0.5 and 0 < terms["delay"]["mean"] < 2
    # After a long think the server is woken first (on this machine 0.1-0.2 ms more than the
    # busy delay; a machine that never sleeps would show none).
    assert 0 < terms["idle_delay"]["mean"] < 2


@pytest.mark.real
def test_a_profile_predicts_another_run_of_the_server(tmp_path):
    # A cheap emulated cost (0.08 ms a packet) served in one-packet quanta: the server's own
    # cost of a turn is as large as a packet's, so the ideal model is far off.
    server = {"cpus": 2, "cost": "0.1ms+0.005ms/KiB", "packet": 16384}
    path = tmp_path / "server.toml"
    prof = schedlab.calibrate("server", path, **server)
    run = {**server, "policy": "rr", "params": {"quantum": 0.08}, "clients": 4,
           "think": "exp:2", "size": "uniform:0.5,3", "files": 50, "warmup": 100}
    reals = []
    for seed in (7, 8, 9):
        t = worlds.translate("server", {**run, "seed": seed, "time": 3000, "retry_noisy": 2})
        reals.append(server_world.run(t.spec).summary)
    real = [r["response_mean"] for r in reals]
    real_mean = float(np.median(real))
    # A machine shared with others is not the one a profile describes (`_skip_if_shared`).
    import pandas as pd

    _skip_if_shared(prof, pd.DataFrame([{**r, "world": "server", "label": "RR", "replication": i}
                                        for i, r in enumerate(reals)]))

    def simulated(world: str, extra: dict) -> float:
        t = worlds.translate(world, {**run, **extra, "jobs": 200_000, "seed": 7})
        return worlds.runner(world)(**t.spec, keep_jobs=False).summary["response_mean"]

    ideal = simulated("sim", {})
    calibrated = simulated("calibrated", {"profile": str(path)})
    # Measured on this machine: the ideal model 44-51% under, the calibrated one within 6%
    # (the server's own mean moves by about that between minutes of a shared machine).
    assert calibrated == pytest.approx(real_mean, rel=0.10), (real, ideal, calibrated)
    assert abs(calibrated - real_mean) < 0.25 * abs(ideal - real_mean), (real, ideal, calibrated)


def _experiment(profile_value: str, worlds_: list[str], **server_time: object) -> dict:
    return {
        "experiment": {"name": "calibrated", "world": worlds_, "replications": 2, "seed": 5,
                       "warmup": 100},
        "workload": {"clients": 4, "think": "exp:2", "size": "uniform:0.5,3", "files": 50,
                     "jobs": 4_000},
        "machine": {"cpus": 2, "cost": "0.1ms+0.005ms/KiB", "packet": 16384,
                    "profile": profile_value},
        "policy": [{"name": "fcfs"}, {"name": "rr", "label": "RR 1 packet", "quantum": 0.08}],
        "worlds": {"server": {"time": 2_000, "replications": 1, "retry_noisy": 2,
                              **server_time}},
    }


def test_the_calibrated_world_is_the_simulator_with_the_profile(profile_file, tmp_path):
    from schedlab.report import world_gap

    exp = _experiment(str(profile_file), ["sim", "calibrated"])
    res = schedlab.run(exp, out=tmp_path / "out")
    m = res.metric("response_mean").set_index(["world", "label"])["mean"]
    for label in ("FCFS", "RR 1 packet"):
        assert m[("calibrated", label)] > m[("sim", label)]
    # Replication 0 of the calibrated FCFS is simulate() with the profile's terms by hand: the
    # server's own 0.15 ms and 0.001 ms/KiB on the file's 0.1 ms + 0.005 ms/KiB.
    s = res.summaries
    row = s[(s["world"] == "calibrated") & (s["label"] == "FCFS") & (s["replication"] == 0)]
    seed = int(row["seed"].iloc[0])
    by_hand = schedlab.simulate("fcfs", clients=4, think="exp:2", size="uniform:0.5,3",
                                jobs=4_000, warmup=100, cpus=2, seed=seed, keep_jobs=False,
                                service_scale=0.006 / 0.005, turn_cost=0.05,
                                context_switch=0.06, service_offset=-1.2 * 0.1,
                                start_cost=0.25 - 0.06, dispatch_delay=0.1).summary
    assert row["response_mean"].iloc[0] == pytest.approx(by_hand["response_mean"], rel=1e-12)
    # The simulator's ideal model leaves the profile out, with a note; the calibrated world
    # says what it modelled.
    notes = res.manifest["notes"]
    assert any("machine.profile" in n and "ideal model" in n for n in notes["sim"])
    assert any("machine.profile" in n and "ms/KiB" in n for n in notes["calibrated"])
    gap = world_gap(res)
    assert set(zip(gap["reference"], gap["world"], strict=True)) == {("sim", "calibrated")}


def test_a_calibrated_world_needs_a_profile(tmp_path):
    exp = _experiment("x", ["calibrated"])
    del exp["machine"]["profile"]
    with pytest.raises(schedlab.SpecError, match=r"profile = \(missing\): expected a machine "
                       "profile"):
        schedlab.run(exp, out=tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.real
def test_an_experiment_calibrates_first_and_shows_three_lines(tmp_path):
    from schedlab.report import world_gap

    out = tmp_path / "out"
    res = schedlab.run(_experiment("calibrate", ["sim", "calibrated", "server"]), out=out)
    prof = profile.load(out / "profile-server.toml")
    assert prof["profile"]["config"] == {"cpus": 2, "cost": "0.1ms+0.005ms/KiB",
                                         "cost_mode": "sleep", "packet": 16384}
    note = res.manifest["notes"]["calibrated"][0]
    assert note.startswith("machine.profile = calibrate: profile-server.toml, measured in ")
    # The profile's warnings (phases still noisy after their retries) are in the note.
    assert all(f"; warning: {w}" in note for w in prof["profile"]["warnings"]), note
    gap = world_gap(res)
    assert set(zip(gap["reference"], gap["world"], strict=True)) == {("sim", "server"),
                                                                     ("calibrated", "server")}
    # A resumed sweep reuses the profile: nothing is measured again.
    before = (out / "profile-server.toml").stat().st_mtime_ns
    schedlab.run(_experiment("calibrate", ["sim", "calibrated", "server"]), out=out)
    assert (out / "profile-server.toml").stat().st_mtime_ns == before
    _skip_if_shared(prof, res.summaries)
    m = res.metric("response_mean").set_index(["world", "label"])["mean"]
    # One-packet quanta: the server's own cost of a turn is as large as a packet's. The
    # calibrated model is near the server, the ideal one well under it. How near one pair can
    # be is set by this machine: the server's RR mean and the profile's cost of a turn drift
    # by 4-6% from one minute to the next whatever the run's length (2 s, 6 s, or 3 x 2 s),
    # so calibrated / real ranged 0.91-1.14 over 40 runs of this test (2026-11-27, sd 0.05;
    # one CI run failed the 10% this used to ask). 20% is 3.5 sd. The 5% of issue 14 is
    # measured on the full files, paired run by run (experiments/fileserver/README.md).
    real, ideal, calibrated = (m[(w, "RR 1 packet")] for w in ("server", "sim", "calibrated"))
    assert calibrated == pytest.approx(real, rel=0.20), (real, ideal, calibrated)
    # How far under the ideal model is depends on the machine's cost of a turn: 40% on the
    # machine of 2026-11-27, 21-23% on that of 2026-11-28 (real 2.94-3.01 ms, ideal 2.317,
    # calibrated within 1%; the build of 59339a9 gives the same server means there), where
    # `ideal < 0.75 real` failed. What the test is for holds on both: the ideal model is
    # clearly under the server, and the calibration takes at least half of the gap away.
    assert ideal < 0.9 * real, (real, ideal, calibrated)
    assert abs(calibrated - real) < 0.5 * (real - ideal), (real, ideal, calibrated)
    # FCFS has no turns: there the profile's fixed and per-KiB costs alone carry the model
    # (0.96-1.03 over the same 40 runs).
    real, calibrated = m[("server", "FCFS")], m[("calibrated", "FCFS")]
    assert calibrated == pytest.approx(real, rel=0.10), (real, calibrated)


@pytest.mark.real
def test_a_replay_runs_the_model_on_each_server_runs_requests(tmp_path):
    import pandas as pd
    from schedlab.report import world_gap

    out, runs = tmp_path / "out", tmp_path / "out" / "runs"
    prof = tmp_path / "server.toml"
    config = {"cpus": 2, "cost": "0.1ms+0.005ms/KiB", "packet": 16384}
    measured = schedlab.calibrate("server", prof, **config)
    exp = _experiment(str(prof), ["calibrated", "server"])
    exp["policy"][1].update(label="RR 5 packets", quantum=0.4)
    exp["worlds"] = {"server": {"time": 2_000, "replications": 2, "retry_noisy": 2},
                     "calibrated": {"replay": "server"}}
    res = schedlab.run(exp, out=out)
    assert res.manifest["replays"] == {"calibrated": "server"}
    # What a shared machine moves (the runs' lengths, the model's distance) is judged on a
    # quiet one only; the replay's own mechanics on either.
    quiet = not _shared(measured, res.summaries)
    s = res.summaries.set_index(["world", "label", "replication"])
    for label in ("FCFS", "RR 5 packets"):
        for rep in (0, 1):
            real, model = s.loc[("server", label, rep)], s.loc[("calibrated", label, rep)]
            record = json.loads((runs / f"{model['run']}.json").read_text())
            # Each model run replays its server run: the same requests, the warm-up's left
            # out the same, sent until the server run stopped sending (its 2 s cap, when its
            # load thread saw it: later on a busy machine), then drained; a
            # client goes on past its recorded requests with ones drawn from the run's own.
            # So it measures about as many, fewer where the model is slower than the server
            # (measured, 12 runs: -3.3% to +1.0%, RR's one-packet turns the lowest).
            assert record["replay"]["of"] == real["run"]
            assert record["replay"]["end"] == real["sending_ended"]
            assert 2_000 <= real["sending_ended"] and real["jobs"] > 500
            if quiet:
                assert real["sending_ended"] < 2_000 + 250
                assert model["jobs"] == pytest.approx(real["jobs"], rel=0.05)
            trace = runs / f"{real['run']}.trace.csv"
            recorded = int(real["jobs"]) + record["replay"]["warmup"]
            drawn = pd.read_csv(trace).iloc[recorded:]
            assert len(drawn) >= recorded and drawn["task"].value_counts().nunique() == 1
            # The replay is the simulator on the server run's trace, nothing else: by hand.
            spec = {"policy": model["policy"], "cpus": 2, "trace": str(trace),
                    "warmup": record["replay"]["warmup"], "profile": str(prof),
                    "cost": config["cost"], "packet": 16384,
                    "time": record["replay"]["end"], "drain": True,
                    "params": {"quantum": 0.4} if label != "FCFS" else {}}
            t = worlds.translate("calibrated", spec)
            by_hand = worlds.runner("calibrated")(**t.spec, keep_jobs=False).summary
            assert model["response_mean"] == pytest.approx(by_hand["response_mean"], rel=1e-12)
    # Paired: the gap of each policy has its own interval, from the two replications'
    # differences; on the same requests the calibrated model is within 8% of the server
    # (measured in 16 runs: within 4.1%; RR in one-packet turns, where the server's cost of a
    # turn moves between a calibration and a run, strayed to 15% with a quick calibration).
    gap = world_gap(res).set_index("label")
    assert gap["paired"].all() and np.isfinite(gap["diff_half_width"]).all()
    for label in ("FCFS", "RR 5 packets"):
        assert not quiet or abs(gap.loc[label, "rel_diff"]) < 0.08, \
            gap[["ref_mean", "mean", "rel_diff"]]
    # Resumed: nothing runs again. A server run measured again makes its replay pending.
    mtimes = {p.name: p.stat().st_mtime_ns for p in runs.glob("*.json")}
    schedlab.run(exp, out=out)
    assert {p.name: p.stat().st_mtime_ns for p in runs.glob("*.json")} == mtimes
    real = s.loc[("server", "FCFS", 0), "run"]
    model = s.loc[("calibrated", "FCFS", 0), "run"]
    (runs / f"{real}.json").unlink()
    schedlab.run(exp, out=out)
    changed = {p.name for p in runs.glob("*.json") if p.stat().st_mtime_ns != mtimes[p.name]}
    assert changed == {f"{real}.json", f"{model}.json"}
    _skip_if_shared(measured, res.summaries)  # says that the distances were not judged


def test_a_closed_trace_replays_each_tasks_thinks_and_sizes(tmp_path):
    # Task 1 sends 3 at once; task 0 thinks 1, sends 2, waits (FCFS, one CPU: 3..5), thinks
    # 0.5 and sends 1 (5.5..6.5). Responses 3, 4 and 1.
    path = tmp_path / "closed.csv"
    path.write_text("task,think,size\n0,1,2\n1,0,3\n0,0.5,1\n")
    r = schedlab.simulate("fcfs", trace=str(path), cpus=1, warmup=0)
    j = r.jobs.sort_values("arrival")
    assert j["arrival"].tolist() == pytest.approx([0.0, 1.0, 5.5])
    assert j["completion"].tolist() == pytest.approx([3.0, 5.0, 6.5])
    assert j["response"].tolist() == pytest.approx([3.0, 4.0, 1.0])
    assert r.summary["jobs"] == 3
    # With the machine's costs: every job starts 0.2 later and the way adds 0.1 each.
    r = schedlab.simulate("fcfs", trace=str(path), cpus=1, warmup=0, start_cost=0.2,
                          dispatch_delay=0.1)
    assert sorted(r.jobs["completion"]) == pytest.approx([3.3, 5.5, 7.3])


def test_a_real_runs_requests_become_a_closed_trace():
    import pandas as pd
    from schedlab.server import replay_trace

    # Client 7 sends at 0 and 10 (its first response came at 4: think 6); client 3 at 2; a
    # request of client 3 that failed at 3 is in neither the trace nor its thinks. Sizes are
    # ms of service (files of 1 KiB, 0 and 2 KiB at 0.25 ms + 0.02 ms/KiB).
    jobs = pd.DataFrame({"client": [7, 3, 3, 7], "arrival": [0.0, 2.0, 3.0, 10.0],
                         "completion": [4.0, 5.0, 3.5, 12.0],
                         "size": [0.27, 0.25, 0.25, 0.29], "error": [0, 0, 1, 0],
                         "status": [200, 200, 0, 200]})
    trace = replay_trace(jobs)
    # An answer that is no file (a 503 of a full server) is not served either.
    refused = jobs.assign(error=0, status=[200, 200, 503, 200])
    assert replay_trace(refused).iloc[:3].equals(trace.iloc[:3])
    recorded = trace.iloc[:3]
    assert recorded["task"].tolist() == [0, 1, 1]
    assert recorded["think"].tolist() == pytest.approx([2.0, 0.0, 6.0])
    assert recorded["size"].tolist() == pytest.approx([0.25, 0.27, 0.29])
    # Then as many rows again per client (the most any sent: 2), drawn from the run's thinks
    # between requests (6 only: a first think is from the start) and its sizes.
    more = trace.iloc[3:]
    assert more["task"].tolist() == [0, 0, 1, 1]
    assert more["think"].tolist() == pytest.approx([6.0] * 4)
    assert set(more["size"].round(6)) <= {0.25, 0.27, 0.29}
    assert replay_trace(jobs, seed=5).iloc[3:].equals(replay_trace(jobs, seed=5).iloc[3:])
    # An open-loop run (no clients): its arrivals and sizes, in arrival order.
    open_loop = jobs.assign(client=-1)
    trace = replay_trace(open_loop)
    assert trace.columns.tolist() == ["arrival", "size"]
    assert trace["arrival"].tolist() == pytest.approx([0.0, 2.0, 10.0])
    assert trace["size"].tolist() == pytest.approx([0.27, 0.25, 0.29])
    # No service time in the cost model: nothing to replay.
    assert replay_trace(jobs.assign(size=np.nan)) is None


@pytest.mark.parametrize("text, why", [
    ("task,think,size,arrival\n0,1,1,0\n", "unknown 'arrival'"),
    ("think,size\n1,1\n", "missing 'task'"),
    ("task,think,size\n1,1,1\n", "task 0 has no row"),
    ("task,think,size\n0,-1,1\n", "column think at line 2"),
    ("task,think,size,class\n0,1,1,a\n0,1,1,b\n", "one class per task"),
])
def test_a_bad_closed_trace_is_one_error_naming_the_key(tmp_path, text, why):
    path = tmp_path / "closed.csv"
    path.write_text(text)
    with pytest.raises(schedlab.SpecError, match="^trace = ") as e:
        schedlab.simulate("fcfs", trace=str(path), classes=[{"name": "a"}, {"name": "b"}])
    assert why in str(e.value)


def test_a_closed_trace_refuses_a_think_of_its_own(tmp_path):
    path = tmp_path / "closed.csv"
    path.write_text("task,think,size\n0,1,1\n")
    with pytest.raises(schedlab.SpecError, match="^think = exp:1: expected nothing: a closed "
                       "trace gives every think"):
        schedlab.simulate("fcfs", trace=str(path), think="exp:1")


@pytest.mark.parametrize("buffer, completions", [
    (None, {"A": 10, "B": 6, "C": 3, "D": 1}),   # SJF sees all four: 1, 2, 3, 4
    (1, {"A": 4, "B": 7, "C": 9, "D": 10}),      # one waits at a time: arrival order
    (2, {"A": 10, "B": 3, "C": 5, "D": 6}),      # B of {A, B}; C joins: C; D joins: D; A
])
def test_a_bounded_buffer_holds_arrivals_outside_in_order(tmp_path, buffer, completions):
    # Sizes 4, 3, 2, 1 sent at once to one CPU under SJF (the server's master stops reading
    # while its buffer is full: the policy sees only what the buffer holds).
    path = _trace(tmp_path, [(0, 4), (0, 3), (0, 2), (0, 1)])
    extra = {} if buffer is None else {"buffer": buffer}
    r = schedlab.simulate("sjf", trace=path, cpus=1, **extra)
    got = dict(zip("ABCD", r.jobs.sort_values("job")["completion"], strict=True))
    assert got == pytest.approx(completions)
    # The time held outside counts as waiting.
    assert r.jobs["response"].sum() == pytest.approx(sum(completions.values()))


def test_a_bounded_buffer_needs_one_queue():
    with pytest.raises(schedlab.SpecError, match="^buffer = 2: expected global runqueues"):
        schedlab.simulate("rr", load=0.5, jobs=10, cpus=2, runqueues="per-cpu", buffer=2)
    with pytest.raises(schedlab.SpecError, match="^buffer = 0: expected a number of jobs"):
        schedlab.simulate("rr", load=0.5, jobs=10, buffer=0)


# --- On real processes ---------------------------------------------------------------------


@pytest.mark.real
def test_a_timers_overshoot_carries_the_slack_outside_real_time():
    from schedlab.osrun import timer

    # The kernel gives a real-time process no timer slack and any other its own (50 us by
    # default, /proc/PID/timerslack_ns, inherited from this process): a sleep under
    # SCHED_OTHER may end anywhere up to the slack past its deadline, and on an idle CPU, where
    # nothing else expires the timer early, ends there. The probe takes the two policies'
    # sleeps in turns, so both meet the machine in one state: the median under FIFO moved
    # between 23 and 61 us from one run to the next, the gap stayed at 47.2-54.0 us (30 runs,
    # 2026-11-27; 20-86 us when the policies ran one after the other).
    slack = int(Path("/proc/self/timerslack_ns").read_text())
    probe = timer.overshoots(0, 300, 1.0, fifo=True)
    fifo, other = probe["fifo"], probe["other"]
    assert fifo["slack_ns"] == 0 and other["slack_ns"] == slack > 0
    assert len(fifo["overshoot_ms"]) == len(other["overshoot_ms"]) == 300
    assert min(fifo["overshoot_ms"]) >= 0 and min(other["overshoot_ms"]) >= 0  # never early
    gap = float(np.median(other["overshoot_ms"]) - np.median(fifo["overshoot_ms"]))
    assert 0.8 * slack / 1e6 <= gap <= 1.25 * slack / 1e6, (gap, slack)


@pytest.mark.real
def test_an_os_profile_predicts_batches_of_real_processes(tmp_path):
    from schedlab.worlds import os as os_world

    path = tmp_path / "os.toml"
    # The default three repetitions: with two, one stalled batch moves a term by half. A
    # profile with warnings (runs still noisy after their retries) is measured again, up to
    # twice: one with 7 of 32 kernel batches and 4 of 20 wake-up runs still noisy (steal 21%,
    # stalls of 9-11 ms) had kernel_wake 0.19 ms and dispatch_wake 0.79 where the next
    # calibration, without warnings, had 0.017 and 0.100 (2026-12-02), and failed this test.
    for _ in range(3):
        prof = schedlab.calibrate("os", path, cpus=2, enforce="fifo")
        if not prof["profile"]["warnings"]:
            break
    else:
        _skip_if_shared(prof)
    # The profile says how long it took, in the file too (the report shows it). How long is a
    # benchmark's question, not a test's (bench/RESULTS.md: 46-69 s on this machine, against
    # issue 14's 60 s): a bound here failed a fresh-clone run at 69.2 s on 2026-11-28.
    seconds = prof["profile"]["seconds"]
    assert math.isfinite(seconds) and seconds > 0
    assert f"seconds = {seconds}" in path.read_text()
    terms = prof["os"]
    assert 0.95 < terms["scale"]["mean"] < 1.2 and 0.95 < terms["other_scale"]["mean"] < 1.2
    assert 0 < terms["dispatch_start"]["mean"] < 2
    assert 0 < terms["dispatch_exit"]["mean"] < 1 and terms["dispatch_exit"]["tasks"] == 64
    # A start of a job of 1 ms, from the exit phase's first runs: less than a tiny batch's,
    # whose hand-offs through the dispatcher line up (0.18-0.25 ms against 0.55-0.74 here).
    long = terms["dispatch_start_long"]
    assert long["tasks"] == 64 and long["size_ms"] == 1.0 and long["unit"] == "ms"
    assert 0 < long["mean"] < terms["dispatch_start"]["mean"]
    # A sleep's wake-up: the kernel's alone (0.020-0.028 ms today) is less than the
    # dispatcher's, which adds its hand-off (0.080-0.119 ms). A migration through the
    # dispatcher costs this machine's two vCPUs nothing measurable (-0.0009 ms [-0.019,
    # 0.017]); the phase does move the odd process out (~510 moves a run against 3-9 with
    # the processes in pairs).
    assert 0 <= terms["kernel_wake"]["mean"] < terms["dispatch_wake"]["mean"] < 0.5
    # A timer's overshoot sleep by sleep, with its spread: no slack under FIFO, the kernel's
    # 50 us under SCHED_OTHER (test_a_timers_overshoot_carries_the_slack_outside_real_time).
    own_slack = int(Path("/proc/self/timerslack_ns").read_text()) / 1e6
    for name, slack in (("timer", 0.0), ("timer_other", own_slack)):
        t = terms[name]
        assert t["sleeps"] == 500 and t["slack_ms"] == slack and t["unit"] == "ms"
        assert 0 <= t["p50_low"] <= t["p50"] <= t["p50_high"] <= t["p95"] <= t["p99"] <= t["max"]
        assert t["p99_low"] <= t["p99"] <= t["p99_high"] and t["low"] <= t["mean"] <= t["high"]
    assert terms["timer"]["p50"] < terms["timer_other"]["p50"]
    assert abs(terms["dispatch_migrate"]["mean"]) < 0.1
    assert min(terms["dispatch_migrate"]["migrations"]) > 100
    # Batches other than the calibration's: 96 FIFO jobs of 7 ms, 64 CFS jobs of 6 ms, 240
    # tiny jobs through the dispatcher (round robin, 10 ms quanta). Each real batch runs three
    # times and the model meets their median: one run of a few hundred ms can hold a stall of
    # this shared machine (a batch of 400 tiny jobs once took 94 ms where its neighbours took
    # 70).
    # The dispatched batches first, nearest the calibration in time: their cost drifts most.
    cases = {
        "dispatched": {"policy": "rr", "params": {"quantum": 10}, "batch": 240,
                       "size": "det:0.01", "enforce": "fifo"},
        "fifo": {"policy": "kernel", "sched": "fifo", "rtprio": 10, "batch": 96,
                 "size": "det:7"},
        "cfs": {"policy": "kernel", "sched": "other", "batch": 64, "size": "det:6"},
        # The xv6 file's I/O-bound test under RR: 50 processes of 1 ms and a final sleep of
        # 10 ms; their ends wait behind the first runs, off the path the makespan follows.
        "sleepers": {"policy": "rr", "params": {"quantum": 10}, "jobs": 50, "clients": 50,
                     "size": "det:1", "bursts": 1, "io": "sleep:det:10", "think": "det:0",
                     "enforce": "fifo"},
        # One process per CPU of 40 bursts of 0.5 ms, each followed by a sleep of 1 ms (the
        # calibration's are 1 and 2): the CPUs idle through every wake-up.
        "wakers": {"policy": "rr", "params": {"quantum": 10}, "jobs": 2, "clients": 2,
                   "size": "det:20", "bursts": 40, "io": "sleep:det:1", "think": "det:0",
                   "enforce": "fifo"},
    }
    got = {}
    for name, case in cases.items():
        run = {**case, "cpus": 2, "seed": 3}
        # A batch others disturbed is run again (the calibration's own rule), and the median
        # is of the quiet ones: a fresh-clone CI once met a CFS mean of 176.9 ms where quiet
        # runs give 190.7-191.3 (2026-11-29, 3 calibrations), with nothing to say why.
        reals = [os_world.run(worlds.translate("os", {**run, "retry_noisy": 2}).spec).summary
                 for _ in range(3)]
        quiet = [s for s in reals if not s["noisy"]]
        if not quiet:
            pytest.skip(f"{name}: every batch was disturbed: {reals[0]['noise_reasons']}")
        real = {k: float(np.median([s[k] for s in quiet])) for k in ("response_mean",
                                                                      "response_max")}
        if name == "dispatched":
            dispatcher_cpu = float(np.median([s["dispatcher_cpu_ms"] for s in quiet])) / 240
        models = {}
        for world, extra in (("sim", {}), ("calibrated", {"profile": str(path)})):
            t = worlds.translate(world, {**run, **extra})
            models[world] = worlds.runner(world)(**t.spec).summary
        if name == "wakers":
            spec, _ = profile.apply(worlds.translate("calibrated", {**run, "profile": str(path)})
                                    .spec)
            assert spec.pop("wake_delay") == pytest.approx(terms["dispatch_wake"]["mean"],
                                                           rel=1e-5)
            models["no wake"] = schedlab.simulate(**spec).summary
        got[name] = {w: (s["response_mean"], s["response_max"])
                     for w, s in (("os", real), *models.items())}
    # The sleepers' makespan (2026-11-27, 10 calibrations, each against the median of 3 real
    # runs): -4.5% to +5.5%; with the whole start before the first run (no end_cost), +4.1%
    # to +12.3%. On 2026-12-07, with a tiny batch's start of 0.55-0.74 ms where 1 ms jobs
    # pay 0.18-0.25, the tiny start made it +3.5% to +15.2% (9 calibrations); hence the start
    # at the jobs' size (dispatch_start_long).
    (_, real_max), (_, cal_max) = got["sleepers"]["os"], got["sleepers"]["calibrated"]
    assert cal_max == pytest.approx(real_max, rel=0.12), got
    # The wakers (2026-11-27, 4 calibrations, each against the median of 3 real runs): the
    # calibrated mean -1.4% to +2.5% but once +7.8%, from a calibration with one stalled
    # repetition of its wake-ups (0.40 ms against 0.11), which is now left out; without the
    # wake-up 4.7-7.2% short.
    real_mean, cal_mean = got["wakers"]["os"][0], got["wakers"]["calibrated"][0]
    assert cal_mean == pytest.approx(real_mean, rel=0.05), got
    assert got["wakers"]["no wake"][0] < 0.97 * real_mean, got
    for name in ("fifo", "cfs", "dispatched"):
        (real_mean, real_max), (cal_mean, cal_max) = got[name]["os"], got[name]["calibrated"]
        # Measured (2026-11-26, 12 batches of each after 4 calibrations): FIFO within 3.4%;
        # CFS's makespan within 4% (once 5.4% from a single run), its mean 3-8% over (the
        # model's CFS ends its jobs closer together than the kernel's EEVDF). Through the
        # dispatcher the model is right in scale (the ideal one is 30 times too fast) but
        # this machine does not repeat a tiny process's cost to 20% within half a minute:
        # the calibration's own points moved 0.26-0.37 ms (few) and 0.33-0.43 ms (many)
        # between runs, and over 10 runs of this test the model's mean or makespan came
        # out 0.71 to 1.32 times the real median. A tiny job's cost also falls as the
        # batch's processes exit, which one start cost per run does not follow (the
        # model's mean 11-14% under at 240 jobs). Hence 50% here. One CI run met 1.56 with
        # two calibration repetitions and the dispatched batches last; with three and the
        # dispatched batches first, 10 runs (2026-11-27) gave 0.87-1.27.
        rel = {"fifo": 0.05, "cfs": 0.05, "dispatched": 0.50}[name]
        assert cal_max == pytest.approx(real_max, rel=rel), got
        assert cal_mean == pytest.approx(real_mean, rel=2 * rel if name == "cfs" else rel), got
    # The dispatcher's own CPU per job, measured on the calibration's batches of 512, is that
    # of a batch of 240 to a factor of 2: it moves with the population and between runs
    # (2026-12-02, kernel fc-v1045: 0.094-0.135 ms a run at 512, 0.080-0.114 at 240; once the
    # term was 0.119 against a batch's median of 0.080). A gross error (a total not divided by
    # the jobs, us for ms) is off by far more.
    own = terms["dispatcher_cpu"]
    assert own["tasks"] == 512 and own["unit"] == "ms"
    assert 0.5 < own["mean"] / dispatcher_cpu < 2, (own, dispatcher_cpu)
    # Without the profile, a batch of tiny processes is more than 20 times faster than the real
    # one.
    assert got["dispatched"]["sim"][1] < 0.05 * got["dispatched"]["os"][1], got


def test_a_final_io_ends_the_job_after_its_last_burst():
    # One job of 2 ms in 2 bursts, I/O of 5 after each, FCFS on one CPU: runs [0, 1] and
    # [6, 7], then its final I/O [7, 12] and a run of no time: it ends at 12 (7 without).
    common = {"jobs": 1, "clients": 1, "think": "det:0", "size": "det:2", "bursts": 2,
              "io": "det:5", "cpus": 1, "keep_schedule": True}
    r = schedlab.simulate("fcfs", final_io=True, **common)
    assert r.schedule[["start", "end"]].to_numpy().ravel().tolist() == [0, 1, 6, 7]
    assert r.jobs["completion"].tolist() == [12.0]
    assert schedlab.simulate("fcfs", **common).jobs["completion"].tolist() == [7.0]
    # Fluid too: two such jobs of 2 ms in one burst under PS share the CPU until 4, then
    # wait 5 each.
    r = schedlab.simulate("ps", jobs=2, clients=2, think="det:0", size="det:2", io="det:5",
                          final_io=True, cpus=1)
    assert r.jobs["completion"].tolist() == [9.0, 9.0]
    with pytest.raises(schedlab.SpecError, match="^io = \\(missing\\).*final_io"):
        schedlab.simulate("fcfs", jobs=1, final_io=True)


def test_a_run_that_drains_ends_as_a_server_run_ends(tmp_path):
    # One client thinks 1 and sends 2 ms of work that reaches the machine 0.25 later: sent at
    # 1 and 4.25; the next send (7.5) is past time = 5. Drained, both finish (at 3.25 and
    # 6.5); cut at 5, the second is left unfinished.
    common = {"clients": 1, "think": "det:1", "size": "det:2", "dispatch_delay": 0.25,
              "time": 5, "keep_jobs": True}
    r = schedlab.simulate("fcfs", drain=True, **common)
    assert r.jobs["response"].tolist() == pytest.approx([2.25, 2.25])
    assert (r.summary["jobs"], r.summary["unfinished"]) == (2, 0)
    assert r.summary["sim_time"] == pytest.approx(6.5)
    r = schedlab.simulate("fcfs", **common)
    assert (r.summary["jobs"], r.summary["unfinished"]) == (1, 1)
    # The same from an experiment file and the command line.
    path = tmp_path / "drain.toml"
    path.write_text('[experiment]\nname = "d"\n[workload]\nclients = 1\nthink = "det:1"\n'
                    'size = "det:2"\ntime = 5\ndrain = true\n[machine]\n'
                    'dispatch_delay = 0.25\n[[policy]]\nname = "fcfs"\n')
    res = schedlab.run(str(path), out=tmp_path / "out")
    assert res.summaries["jobs"].tolist() == [2]
    out = subprocess.run([SCHEDLAB, "sim", "--clients", "1", "--think", "det:1", "--size",
                          "det:2", "--dispatch-delay", "0.25", "--time", "5", "--drain",
                          "--json"], capture_output=True, text=True, env=cli_env(), check=True)
    assert json.loads(out.stdout)["jobs"] == 2
    # Without time there is no end to drain after.
    with pytest.raises(schedlab.SpecError, match="^drain = true: expected drain with time"):
        schedlab.simulate("fcfs", jobs=10, drain=True)
    # The server always drains; real processes always stop at time.
    run = {"policy": "fcfs", "clients": 2, "think": "exp:1", "size": "det:1", "time": 100,
           "cost": "0.1ms+0.01ms/KiB"}
    assert worlds.translate("server", {**run, "drain": True}).skip is None
    assert "drain" not in worlds.translate("server", {**run, "drain": True}).spec
    skip = worlds.translate("server", {**run, "drain": False}).skip
    assert skip[0] == "drain" and "always finishes the requests in flight" in skip[2]
    assert worlds.translate("os", {**run, "drain": False}).skip is None
    skip = worlds.translate("os", {**run, "drain": True}).skip
    assert skip[0] == "drain" and "abandon the job they run" in skip[2]


def test_the_os_worlds_io_after_each_burst_is_final_io_in_the_simulator():
    run = {"policy": "rr", "clients": 2, "jobs": 2, "size": "det:1", "bursts": 1,
           "io": "sleep:det:10"}
    t = worlds.translate("sim", run)
    assert t.spec["final_io"] is True and t.spec["bursts"] == 1 and t.spec["io"] == "det:10"
    assert any("final_io = true" in n for n in t.notes)
    # Written the simulator's way with final_io, real processes do an I/O after each burst.
    t = worlds.translate("os", {**run, "io": "det:10", "bursts": 2, "final_io": True})
    assert t.spec["bursts"] == 2 and t.spec["io"] == "sleep:det:10"
    assert "final_io" not in t.spec
    t = worlds.translate("os", {**run, "io": "det:10", "bursts": 2})
    assert t.spec["bursts"] == 1


def test_a_phase_still_noisy_after_its_retries_is_named_in_the_warnings():
    # One gate for both worlds' calibrations: the world's runner reruns a noisy run up to
    # `retries` times, the gate counts, phase by phase, the runs still flagged after that.
    from types import SimpleNamespace

    from schedlab.calibration import _Gate

    stolen = "the hypervisor stole 12.5% of the run's CPUs"
    verdicts = iter([(False, []), (True, [stolen]), (True, ["a stall of 7.5 ms"]), (False, []),
                     (True, [stolen, "others used 12.0%"])])

    def run(spec):
        noisy, reasons = next(verdicts)
        return SimpleNamespace(summary={"noisy": noisy, "noise_reasons": reasons})

    gate = _Gate(run, 2)
    for phase in ("wake-ups", "wake-ups", "wake-ups", "exits", "idle"):
        gate.run(phase, {})
    assert gate.runs == {"wake-ups": 3, "exits": 1, "idle": 1}
    assert gate.warnings() == [
        f"the wake-ups phase: 2 of 3 runs still noisy after 2 retries (first: {stolen}): its "
        "terms may carry the machine as it was shared; calibrate again on a quiet machine",
        f"the idle phase: 1 of 1 run still noisy after 2 retries (first: {stolen}; others "
        "used 12.0%): its terms may carry the machine as it was shared; calibrate again on a "
        "quiet machine"]
    assert _Gate(run, 2).warnings() == []


def test_each_worlds_calibration_runs_through_its_worlds_noise_gate(monkeypatch):
    # The server's phases and the os runs go through the gate, with their world's runner and
    # retries (a run made beside it would leave its noise out of the warnings).
    from schedlab import calibration
    from schedlab import server as machinery

    seen = []

    def gate_run(gate, phase, spec):
        seen.append((phase, gate.retries, spec["retry_noisy"], gate._run))
        raise RuntimeError("stop here")

    monkeypatch.setattr(calibration._Gate, "run", gate_run)
    with pytest.raises(RuntimeError, match="stop here"):
        calibration.calibrate_server({"cost": "5ms"}, phase_ms=1000.0)
    with pytest.raises(RuntimeError, match="stop here"):
        calibration.calibrate_os({})
    server_retries, os_retries = (calibration.SERVER_RETRY_NOISY,
                                  calibration.OS_RUN_OPTIONS["retry_noisy"])
    assert seen == [("alone", server_retries, server_retries, machinery.run),
                    ("kernel batches", os_retries, os_retries, calibration._os_run)]

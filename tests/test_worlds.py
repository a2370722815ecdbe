"""How each world reads a run's keys (schedlab.worlds): conversions by declared unit, refusals
with the world's reason, and one name for a key in the CLI, a file and Python."""

from __future__ import annotations

import json
import subprocess

import pytest
import schedlab
from conftest import SCHEDLAB, cli_env
from schedlab import _core, experiment, osrun, server, worlds
from schedlab.worlds import translate

# 1 KiB packets at 0.1 ms per KiB: 0.1 ms of service per packet.
SERVER = {"cost": "0ms+0.1ms/KiB", "packet": 1024, "clients": 2, "jobs": 10, "size": "det:1"}


def test_work_parameters_reach_the_server_as_packets_whatever_their_name():
    # EEVDF's slice and per-class slices are work: 3 ms of service = 30 packets of 0.1 ms.
    t = translate("server", {"policy": "eevdf", "params": {"slice": 3, "slices": [1, 6]},
                             **SERVER})
    assert t.skip is None
    assert t.spec["params"] == {"slice": 30.0, "slices": [10.0, 60.0]}
    assert server.plan(t.spec).serve["params"] == {"slice": 30.0, "slices": [10.0, 60.0]}
    # A default in ms is converted too: EEVDF's default slice of 3 ms, RR's quantum of 10 ms.
    assert translate("server", {"policy": "eevdf", **SERVER}).spec["params"] == {"slice": 30.0}
    assert translate("server", {"policy": "rr", "params": {}, **SERVER}).spec["params"] == \
        {"quantum": 100.0}
    # MLFQ: quanta and allotments are work; the boost period is wall-clock time and stays ms.
    t = translate("server", {"policy": "mlfq", "params": {"quanta": [1, 2], "boost_period": 50},
                             **SERVER})
    assert t.spec["params"] == {"quanta": [10.0, 20.0], "quantum": 100.0, "boost_period": 50}
    # Without a per-size cost there is no conversion, and the run is refused with the reason.
    t = translate("server", {"policy": "eevdf", "params": {"slice": 3}, "clients": 1,
                             "jobs": 1})
    assert t.skip is not None and "per-size part" in t.skip[2]
    # A cost the server cannot read is an error naming it, not a run skipped for no per-size
    # part.
    with pytest.raises(schedlab.SpecError, match=r"^cost = 0ms\+0.1ms/KBB: expected "):
        translate("server", {**SERVER, "policy": "rr", "cost": "0ms+0.1ms/KBB"})


@pytest.mark.parametrize("policy, params", [("ps", {}), ("gps", {}), ("fb", {})])
def test_fluid_policies_are_refused_by_every_world_that_cannot_run_them(policy, params):
    run = {"policy": policy, "params": params, **SERVER}
    assert translate("sim", run).skip is None
    for world, reason in (("server", _core.SERVE_FLUID_REFUSED),
                          ("os", _core.DISPATCH_FLUID_REFUSED)):
        t = translate(world, run)
        assert t.skip == ("policy", policy, reason), (world, t.skip)
    # Called directly, each world refuses it too, naming the key, before anything starts.
    with pytest.raises(schedlab.SpecError, match=r"^policy = .*one job at a time") as e:
        server.validate({"policy": policy, "clients": 1, "jobs": 1})
    assert _core.SERVE_FLUID_REFUSED in e.value.allowed
    with pytest.raises(schedlab.SpecError, match=r"^policy = .*one job at a time") as e:
        osrun.validate({"policy": policy, "clients": 1, "jobs": 1, "size": 1})
    assert _core.DISPATCH_FLUID_REFUSED in e.value.allowed
    # The dispatcher's own plan check refuses it as well (a plan written by hand).
    plan, _ = osrun.build_plan({"policy": "rr", "clients": 1, "jobs": 1, "size": 1})
    plan["dispatcher"]["policy"] = policy
    with pytest.raises(schedlab.SpecError, match="one job at a time"):
        _core.os_check(json.dumps(plan))


def test_fb_with_a_quantum_runs_in_turns_and_is_not_refused():
    run = {"policy": "fb", "params": {"quantum": 2}, **SERVER}
    for world in worlds.WORLDS:
        assert translate(world, run).skip is None, world


def test_mlfq_boost_period_has_one_name_in_python_the_cli_and_a_file(tmp_path):
    spec = {"load": 0.8, "size": "exp:10", "jobs": 20_000, "seed": 4}
    py = schedlab.simulate("mlfq", quanta=[1, 10, 100], boost_period=50, **spec,
                           keep_jobs=False).summary
    off = schedlab.simulate("mlfq", quanta=[1, 10, 100], **spec, keep_jobs=False).summary
    # The boost matters here: long jobs return to the top every 50 ms.
    assert py["response_mean"] != pytest.approx(off["response_mean"], rel=1e-3)
    r = subprocess.run([SCHEDLAB, "sim", "--policy", "mlfq", "--quanta", "1,10,100",
                        "--boost-period", "50", "--load", "0.8", "--size", "exp:10", "--jobs",
                        "20000", "--seed", "4", "--json"], capture_output=True, text=True,
                       env=cli_env(), timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["response_mean"] == py["response_mean"]
    workload = {k: v for k, v in spec.items() if k != "seed"}
    exp = experiment.load({"experiment": {"name": "b"}, "workload": workload,
                           "policy": [{"name": "mlfq", "quanta": [1, 10, 100],
                                       "boost_period": 50}]})
    assert exp.runs[0].spec["params"]["boost_period"] == 50
    # `boost` is the machine's wake-up boost (a word), never MLFQ's period.
    with pytest.raises(schedlab.SpecError, match=r"^boost = 100: expected one of none, "
                       "windows, linux26"):
        schedlab.simulate("mlfq", boost=100, **spec)


def test_kernel_policies_are_modelled_in_the_simulator_and_refused_by_the_server():
    run = {"policy": "kernel", "params": {"sched": "fifo", "rtprio": 10}, "clients": 2,
           "jobs": 4, "size": 5}
    sim = translate("sim", run)
    assert sim.spec["policy"] == "priority" and sim.spec["classes"][0]["priority"] == 89
    assert any("modelled by priority" in n for n in sim.notes)
    assert translate("server", run).skip[2].startswith("kernel policies schedule processes")
    os_spec = translate("os", run).spec
    assert "policy" not in os_spec and os_spec["sched"] == "fifo" and os_spec["rtprio"] == 10


def test_os_flags_with_policy_parameters_validate_as_the_readme_writes_them():
    # Flags arrive as text ("10", "true"): they are read as numbers and bools before the os
    # world asks the core how the policy serves its jobs. Nothing is started.
    from schedlab.cli import make_parser, native_keys
    from schedlab.clikit import spec_from_args
    from schedlab.worlds import os as os_world

    args = make_parser().parse_args([
        "os", "--policy", "lottery", "--balance", "true", "--quantum", "10", "--cpus", "1",
        "--time", "3000", "--size", "det:1e6", "--class", "name=A tickets=30 clients=1",
        "--class", "name=B tickets=20 clients=1"])
    spec = spec_from_args(args, native_keys(os_world))
    plan = os_world.validate(spec)
    assert plan["dispatcher"]["params"] == {"balance": True, "quantum": 10.0}
    with pytest.raises(schedlab.SpecError, match="^policy = ps"):
        os_world.validate({**spec, "policy": "ps", "params": {}})


def test_a_value_for_every_task_is_every_class_value_in_every_world():
    # Top-level nice and deadline are every class's, unless a class sets its own: the same in
    # the simulator and the server (which schedules classes by nice and deadline natively).
    run = {"policy": "edf", "deadline": 10, "nice": 3, "classes": [{"name": "a"},
           {"name": "b", "deadline": 5}], **SERVER}
    for world in ("sim", "server"):
        t = translate(world, run)
        assert t.skip is None, world
        assert [(c.get("deadline"), c.get("nice")) for c in t.spec["classes"]] == \
            [(10, 3), (5, 3)], world
    server.plan(translate("server", run).spec)  # and the server takes them


def test_a_size_in_ms_needs_a_per_size_cost_on_the_server():
    # The server turns ms of service into file bytes through the cost model's per-size part;
    # without one the spec is refused, naming the size as written (it said "(size in ms)").
    for spec, given in (({"size": "exp:5"}, "exp:5"), ({"size": 5, "cost": "2ms"}, "det:5")):
        with pytest.raises(schedlab.SpecError) as e:
            server.plan({"policy": "sjf", "clients": 1, "jobs": 10, **spec})
        assert (e.value.key, e.value.value) == ("size", given)
        assert "a cost with a per-size part" in e.value.allowed
    # With one, every file's bytes give back its ms: fixed + bytes x per-byte cost.
    p = server.plan({"policy": "sjf", "clients": 1, "jobs": 10, "size": "det:5",
                     "cost": "1ms+0.01ms/KB", "files": 4})
    assert {b for _path, b in p.files} == {400_000}


def test_keys_a_file_translates_run_directly_as_the_file_runs_them():
    # batch, nice, deadline, the machine's affinity and a kernel policy reached the simulator
    # only through an experiment file: `simulate(batch=5)` said "give it through an experiment
    # file" and `schedlab sim` had no flag for them. Now a direct run translates them as a
    # file does: the same bits, and the translation's notes on the command line.
    pair = [{"name": "hi", "rtprio": 20, "clients": 1}, {"name": "lo", "rtprio": 10, "clients": 1}]
    cases = [
        {"policy": "fcfs", "batch": 5, "size": "det:1"},
        {"policy": "fcfs", "classes": [{"name": "a", "batch": 3}, {"name": "b", "batch": 2}],
         "size": "det:2", "cpus": 2},
        {"policy": "cfs", "clients": 3, "jobs": 300, "nice": 5, "seed": 2},
        {"policy": "kernel", "sched": "fifo", "classes": pair, "jobs": 400, "think": "exp:2",
         "seed": 4},
        {"policy": "kernel", "sched": "deadline", "deadline": 5, "clients": 2, "jobs": 50},
        {"policy": "rr", "params": {"quantum": 1}, "affinity": "0", "cpus": 2,
         "runqueues": "per-cpu",
         "clients": 2, "jobs": 100},
    ]
    got = []
    for case in cases:
        by_file = schedlab.simulate(**worlds.translate("sim", case).spec).summary
        direct = schedlab.simulate(**case).summary
        assert json.dumps(direct, default=str) == json.dumps(by_file, default=str), case
        got.append(direct)
    # By hand: 5 one-shot jobs of 1 ms in a row (1+2+3+4+5)/5; 3 + 2 jobs of 2 ms on 2 CPUs
    # end at 2, 2, 4, 4, 6.
    assert (got[0]["jobs"], got[0]["response_mean"]) == (5, 3.0)
    assert (got[1]["jobs"], got[1]["response_mean"]) == (5, 3.6)
    assert got[3]["policy"] == "priority" and got[4]["policy"] == "edf"
    # Pinned to CPU 0, two clients share one CPU of the two.
    assert got[5]["utilization_per_cpu"][1] == 0.0
    fifo = schedlab.simulate(**cases[3]).classes.set_index("class")["response_mean"]
    assert fifo["hi"] < fifo["lo"]
    out = subprocess.run([SCHEDLAB, "sim", "--policy", "kernel", "--sched", "fifo", "--class",
                          "name=hi rtprio=20 clients=1", "--class", "name=lo rtprio=10 clients=1",
                          "--jobs", "400", "--think", "exp:2", "--seed", "4"],
                         capture_output=True, text=True, env=cli_env(), timeout=60)
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "policy = kernel fifo: modelled by priority preemptive=True" in text
    assert f"{got[3]['response_mean']:.4g}" in text
    # A kernel attribute without the kernel policy, and a run with no model, are refused.
    for bad, key in (({"sched": "fifo", "clients": 1, "jobs": 1}, "sched"),
                     ({"classes": [{"rtprio": 3, "clients": 1}], "jobs": 1}, "classes[0].rtprio"),
                     ({"policy": "kernel", "jobs": 2, "classes": [
                         {"sched": "fifo", "clients": 1}, {"sched": "other", "clients": 1}]},
                      "classes"),
                     # The os world's forms a file translates stay refused in a direct run,
                     # whatever else it translates (with batch, cpus = [0, 2] became 2).
                     ({"cpus": [0, 2], "batch": 5}, "cpus"),
                     ({"io": "sleep:det:3", "nice": 0, "clients": 1, "jobs": 2, "bursts": 2},
                      "io")):
        with pytest.raises(schedlab.SpecError) as e:
            schedlab.simulate(**bad)
        assert e.value.key == key, (bad, e.value)

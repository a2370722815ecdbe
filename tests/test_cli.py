"""The `schedlab` command end to end: real subprocesses, exit codes, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import SCHEDLAB, cli_env
from schedlab import theory
from schedlab.jsonio import dumps

JSON_KEYS = {
    "policy", "jobs", "response_mean", "response_p50", "response_p95", "response_p99",
    "response_std", "wait_mean", "slowdown_mean", "throughput", "utilization",
    "context_switches", "jain_slowdown",
}
JOB_COLUMNS = ["job", "client", "class", "cpu", "arrival", "first_run", "completion", "size",
               "wait", "response", "slowdown", "context_switches", "migrations"]


def schedlab(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([SCHEDLAB, *args], capture_output=True, text=True, timeout=timeout,
                          env=cli_env())


def test_sim_json_has_the_summary_keys_and_matches_the_api():
    out = schedlab("sim", "--policy", "rr", "--quantum", "10", "--arrival", "exp:21", "--size",
                   "det:20", "--jobs", "20000", "--cpus", "1", "--seed", "1", "--json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert JSON_KEYS <= summary.keys()
    assert summary["policy"] == "rr" and summary["jobs"] == 20000
    import schedlab as sl
    from schedlab.vocabulary import summary_units

    api = sl.simulate("rr", quantum=10, arrival="exp:21", size="det:20", jobs=20000, seed=1)
    assert summary["response_mean"] == api.summary["response_mean"]
    assert summary["context_switches"] == api.summary["context_switches"] > 0
    # The whole summary, though the command builds no table (it prints the core's summary).
    assert summary == json.loads(dumps({**api.summary, "units": summary_units(api.summary)}))


def test_a_bare_number_is_a_constant_and_one_policy_takes_its_parameters_inline():
    """`--size 20` is det:20, as `size = 20` in a file and `size=20` in Python (the command
    line refused it); `simulate("rr:quantum=5")` is `--policy rr:quantum=5` (the API
    refused it)."""
    import schedlab as sl

    out = schedlab("sim", "--policy", "rr:quantum=5", "--size", "20", "--think", "3",
                   "--clients", "2", "--jobs", "500", "--seed", "2", "--json")
    assert out.returncode == 0, out.stderr
    api = sl.simulate("rr:quantum=5", size=20, think=3, clients=2, jobs=500, seed=2).summary
    spelled = sl.simulate("rr", quantum=5, size="det:20", think="det:3", clients=2, jobs=500,
                          seed=2).summary
    default = sl.simulate("rr", size=20, think=3, clients=2, jobs=500, seed=2).summary
    assert json.loads(out.stdout)["response_mean"] == api["response_mean"]
    assert api["response_mean"] == spelled["response_mean"] != default["response_mean"]


def test_a_parameter_given_two_ways_is_one_value_or_refused(tmp_path):
    """Inline in the policy, in `params`, by its own name or flag: the same value twice is one
    value, two values are refused on every surface (neither way outranks the other); the
    command line overrides a `--spec` file's `params`, as it overrides the file's keys."""
    import schedlab as sl

    base = dict(size=20, think=3, clients=2, jobs=500, seed=2)
    q7 = sl.simulate("rr", quantum=7, **base).summary["response_mean"]
    assert sl.simulate("rr:quantum=7", quantum=7.0, **base).summary["response_mean"] == q7
    for call in (lambda: sl.simulate("rr:quantum=5", params={"quantum": 3}, **base),
                 lambda: sl.simulate("rr:quantum=5", quantum=3, **base),
                 lambda: sl.simulate("rr", params={"quantum": 5}, quantum=3, **base)):
        with pytest.raises(sl.SpecError, match=r"^quantum = 3: expected one value of quantum: "
                           r"it is 5 in "):
            call()
    flags = ["--size", "20", "--think", "3", "--clients", "2", "--jobs", "500", "--seed", "2",
             "--json"]
    out = schedlab("sim", "--policy", "rr:quantum=5", "--quantum", "3", *flags)
    assert out.returncode == 2 and out.stderr.startswith(
        "schedlab: error: quantum = 3: expected one value of quantum: it is 5 in --policy "
        "rr:quantum=5 too")
    spec = tmp_path / "s.toml"
    # The file's parameter, in its params, inline or by name, is overridden by the line's.
    for text in ('policy = "rr"\n[params]\nquantum = 3\n', 'policy = "rr:quantum=3"\n',
                 'policy = "rr"\nquantum = 3\n'):
        spec.write_text(text)
        for policy in (["--policy", "rr:quantum=7"], ["--quantum", "7"]):
            out = schedlab("sim", "--spec", str(spec), *policy, *flags)
            assert out.returncode == 0, (text, out.stderr)
            assert json.loads(out.stdout)["response_mean"] == q7, text
    spec.write_text('policy = "rr:quantum=5"\n[params]\nquantum = 3\n')
    out = schedlab("sim", "--spec", str(spec), *flags)
    assert out.returncode == 2 and "quantum = 5: expected one value of quantum: it is 3 in " \
        "the --spec file's params too" in out.stderr, out.stderr
    # The same value written two ways is one value: a tuple and a list, the policy's text
    # and a number, numpy's numbers and Python's.
    assert sl.simulate("rr:quantum=7", quantum=7, **base).summary["response_mean"] == q7
    # Text given as a value from Python is refused, as load = "0.5" is (it ran as 7 before).
    with pytest.raises(sl.SpecError, match='quantum = "7": expected a number, a list of '
                       'numbers or true/false, not text'):
        sl.simulate("rr", quantum="7", **base)
    sl.validate("mlfq", params={"quanta": [1, 2, 4]}, quanta=(1, 2, 4), load=0.5, jobs=10)
    numpy_base = {**base, "clients": np.int64(2), "jobs": np.int64(500), "size": np.float64(20)}
    assert sl.simulate("rr", quantum=np.float64(7), **numpy_base).summary["response_mean"] == q7
    assert sl.simulate("rr", quantum=7, cpus=np.int64(1), **base).summary["response_mean"] == q7


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_jobs_out_has_the_schema(tmp_path, suffix):
    path = tmp_path / f"jobs{suffix}"
    out = schedlab("sim", "--policy", "srpt", "--load", "0.7", "--size", "exp:1", "--jobs", "500",
                   "--jobs-out", str(path))
    assert out.returncode == 0, out.stderr
    df = pd.read_csv(path) if suffix == ".csv" else pd.read_parquet(path)
    assert list(df.columns) == JOB_COLUMNS
    assert len(df) == 500
    assert ((df.response - (df.completion - df.arrival)).abs() < 1e-9).all()
    assert ((df["slowdown"] - df["response"] / df["size"]).abs() < 1e-9).all()


def test_every_output_of_the_command_line_is_a_keyword_in_python(tmp_path):
    # `--jobs-out FILE` and the others are `jobs_out=FILE` in Python (they were refused as
    # unknown keys there): for one run, for replications and for a comparison, each file
    # the API writes is the command's, byte for byte.
    import argparse

    import schedlab as schedlab_api
    from schedlab.cli import make_parser

    sub = next(a for a in make_parser()._actions if isinstance(a, argparse._SubParsersAction))

    def outputs(command: str) -> list[str]:
        return [a.dest for a in sub.choices[command]._actions if a.dest.endswith("_out")]

    names = outputs("sim")
    assert set(names) == {"jobs_out", "schedule_out", "tasks_out", "loads_out",
                          "load_series_out", "trace_out"}
    # A closed workload: an open one has no task table.
    base = {"clients": "5", "think": "exp:1", "jobs": "300", "cpus": "2",
            "runqueues": "per-cpu", "balancer": "linux", "load_sample": "5"}
    for policy, extra in (("rr", []), ("rr", ["--replications", "2"]), ("fcfs,srpt", [])):
        many = "," in policy or extra
        wanted = [n for n in names if not (many and n == "trace_out")]
        cli_dir, api_dir = tmp_path / f"cli{len(extra)}{many}", tmp_path / f"api{len(extra)}{many}"
        cli_dir.mkdir()
        api_dir.mkdir()

        def path(d: Path, n: str) -> str:
            return str(d / (f"{n}.json" if n == "trace_out" else f"{n}.csv"))

        flags = [x for k, v in base.items() for x in (f"--{k.replace('_', '-')}", v)]
        files = [x for n in wanted for x in (f"--{n.replace('_', '-')}", path(cli_dir, n))]
        out = schedlab("sim", "--policy", policy, *flags, *extra, *files)
        assert out.returncode == 0, out.stderr
        reps = {"replications": 2} if extra else {}
        schedlab_api.simulate(policy, clients=5, think="exp:1", jobs=300, cpus=2,
                              runqueues="per-cpu", balancer="linux", load_sample=5, **reps,
                              **{n: path(api_dir, n) for n in wanted})
        for n in wanted:
            cli_bytes = Path(path(cli_dir, n)).read_bytes()
            assert len(cli_bytes) > 100 and cli_bytes == Path(path(api_dir, n)).read_bytes(), n
    # schedlab os writes the jobs and the tasks, and so does schedlab.os (checked before any
    # process starts: a name without .csv or .parquet is refused).
    assert outputs("os") == ["jobs_out", "tasks_out", "trace_out"]
    for n in ("jobs_out", "tasks_out"):
        with pytest.raises(ValueError, match=f"^{n} = x.txt: expected a file name ending in"):
            schedlab_api.os(clients=1, size="det:1", jobs=1, **{n: "x.txt"})


def test_table_output_is_readable():
    out = schedlab("sim", "--policy", "fcfs", "--load", "0.5", "--jobs", "1000")
    assert out.returncode == 0, out.stderr
    assert "response mean" in out.stdout and "utilization" in out.stdout


def test_closed_and_time_flags():
    out = schedlab("sim", "--policy", "rr", "--quantum", "1", "--clients", "3", "--think",
                   "exp:2", "--size", "exp:1", "--time", "5000", "--json")
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    assert s["sim_time"] <= 5000 and s["jobs"] > 1000


def test_theory_command_prints_the_closed_form():
    out = schedlab("theory", "--policy", "srpt", "--arrival", "exp:1.1111", "--size", "exp:1")
    assert out.returncode == 0, out.stderr
    # Schrage-Miller at rho = 0.9 (reference table: 3.55213 at exp:1.111111111).
    word, value, unit = out.stdout.split()
    assert (word, unit) == ("mean", "ms")
    assert float(value) == pytest.approx(3.5521, rel=2e-3)
    out = schedlab("theory", "--policy", "fcfs", "--load", "0.9", "--size", "exp:1", "--json")
    data = json.loads(out.stdout)
    assert data["mean"] == pytest.approx(10.0, rel=1e-9) and data["unit"] == "ms"


def test_theory_of_rr_says_it_is_the_vanishing_quantum_limit():
    # M/D/1 at load 0.5, size 20: PS gives 20 / (1 - 0.5) = 40 ms. The simulator's rr has a
    # quantum of 10 ms, which has no closed form: the number comes with what it is.
    out = schedlab("theory", "--policy", "rr", "--load", "0.5", "--size", "det:20")
    assert out.returncode == 0 and out.stdout == "mean 40 ms\n", out
    assert "processor sharing" in out.stderr and "quantum 10" in out.stderr
    data = json.loads(schedlab("theory", "--policy", "rr", "--load", "0.5", "--size", "det:20",
                               "--json").stdout)
    assert data["mean"] == pytest.approx(40.0) and "processor sharing" in data["note"]
    out = schedlab("theory", "--policy", "rr", "--quantum", "10", "--load", "0.5", "--size",
                   "det:20")
    assert out.returncode == 1 and "no closed form" in out.stderr and "quantum 10" in out.stderr
    out = schedlab("theory", "--policy", "fcfs", "--quantum", "3", "--load", "0.5")
    assert out.returncode == 2 and "quantum = 3.0: expected no quantum" in out.stderr



def test_theory_from_python_is_the_commands_json():
    # `schedlab.theory(...)` answers what `schedlab theory --json` prints, key for key.
    import schedlab as lab

    cases = [(["--policy", "fcfs", "--load", "0.9", "--size", "exp:1", "--quantile", "0.5,0.99"],
              dict(policy="fcfs", size="exp:1", load=0.9, quantiles=[0.5, 0.99])),
             (["--policy", "rr", "--load", "0.5", "--size", "det:20"],
              dict(policy="rr", size="det:20", load=0.5)),
             (["--policy", "srpt", "--arrival", "exp:1.25", "--size", "exp:1", "--quantile",
               "0.99"], dict(policy="srpt", size="exp:1", arrival="exp:1.25", quantiles=[0.99])),
             (["--policy", "lcfs", "--preemptive", "true", "--load", "0.5", "--size", "det:1"],
              dict(policy="lcfs", size="det:1", load=0.5, preemptive=True))]
    for args, kwargs in cases:
        out = schedlab("theory", *args, "--json")
        assert lab.theory(**kwargs) == json.loads(out.stdout), args
    # M/M/1 at load 0.9, mean size 1: mean 10 ms, p99 = 10 ln 100 = 46.0517 ms.
    got = lab.theory("fcfs", "exp:1", load=0.9, quantiles=[0.99])
    assert got["mean"] == pytest.approx(10.0) and got["unit"] == "ms"
    assert got["quantiles"]["p99"] == pytest.approx(10 * np.log(100))
    for kwargs, key in ((dict(quantiles=[1.5], load=0.5), "quantile"),
                        (dict(quantiles=["0.5"], load=0.5), "quantile"),
                        (dict(load=0.5, arrival="exp:2"), "load"),
                        (dict(), "arrival"), (dict(policy="foo", load=0.5), "policy")):
        with pytest.raises(lab.SpecError, match=f"^{key} = "):
            lab.theory(**kwargs)
    assert lab.theory.mean_response("ps", "exp:21", "det:20") == pytest.approx(420.0)
    # Any collection of probabilities, numpy's included, or one; numpy's numbers for numbers;
    # the policy as `simulate` takes it (a policies object, inline text).
    want = {"p50": 10 * np.log(2), "p99": 10 * np.log(100)}
    for qs in (np.array([0.5, 0.99]), (q for q in (0.5, 0.99)), pd.Series([0.5, 0.99]),
               [np.float32(0.5), 0.99]):
        assert lab.theory("fcfs", "exp:1", load=0.9, quantiles=qs)["quantiles"] == \
            pytest.approx(want), qs
    assert lab.theory("fcfs", "exp:1", load=0.9, quantiles=0.99)["quantiles"] == \
        pytest.approx({"p99": want["p99"]})
    # M/M/2 at load 0.9 per CPU: Erlang C, 1 + C / (2 - 1.8) with C = 1.62 / 1.9.
    two = lab.theory("fcfs", "exp:1", load=np.float64(0.9), cpus=np.int64(2))
    assert two["mean"] == pytest.approx(1 + (1.62 / 1.9) / 0.2) and two["cpus"] == 2
    for policy in (lab.policies.RR(quantum=5), "rr:quantum=5"):
        got = lab.theory(policy, "exp:1", load=0.5)
        assert got["mean"] is None and got["quantum"] == 5 and "note" not in got
    assert lab.theory("rr", "exp:1", load=0.5, quantum=None)["mean"] == pytest.approx(2.0)


def test_theory_takes_every_policy_parameter_the_formulas_read():
    # M/D/1 at load 0.5, size 1: non-preemptive LCFS has FCFS's mean, 1 + 0.5 / (2 x 0.5) =
    # 1.5 ms (Pollaczek-Khinchine); preemptive LCFS has PS's, 1 / (1 - 0.5) = 2 ms.
    out = schedlab("theory", "--policy", "lcfs", "--preemptive", "false", "--load", "0.5",
                   "--size", "det:1")
    assert out.returncode == 0 and out.stdout == "mean 1.5 ms\n", out
    data = json.loads(schedlab("theory", "--policy", "lcfs", "--preemptive", "true", "--load",
                               "0.5", "--size", "det:1", "--json").stdout)
    assert data["mean"] == pytest.approx(2.0) and data["preemptive"] is True
    assert data["mean"] == theory.mean_response("lcfs", "exp:2", "det:1", preemptive=True)
    out = schedlab("theory", "--policy", "fcfs", "--preemptive", "false", "--load", "0.5")
    assert out.returncode == 2 and "preemptive = False: expected no preemptive" in out.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["sim", "--policy", "fifo2", "--load", "0.5", "--jobs", "10"], "policy = fifo2"),
        (["sim", "--size", "exp:-1", "--load", "0.5", "--jobs", "10"], "size = exp:-1"),
        (["sim", "--size", "gauss:1", "--load", "0.5", "--jobs", "10"], "size = gauss:1"),
        (["sim", "--policy", "rr", "--quantum", "-3", "--load", "0.5", "--jobs", "10"],
         "quantum = -3"),
        (["sim", "--load", "1.0", "--jobs", "10"], "allow_unstable"),
        (["sim", "--arrival", "exp:0.9", "--size", "exp:1", "--jobs", "10"], "load 1.1111"),
        (["sim", "--policy", "fcfs", "--quantum", "3", "--load", "0.5", "--jobs", "10"],
         "quantum = 3"),
        (["sim", "--load", "0.5"], "jobs"),
        (["sim", "--load", "0.5", "--jobs", "10", "--jobs-out", "x.txt"], ".csv or .parquet"),
    ],
)
def test_bad_input_one_line_exit_2(args, needle):
    out = schedlab(*args)
    assert out.returncode == 2, (out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert needle in lines[0], lines[0]
    assert out.stdout == ""


def test_trace_missing_column_is_refused(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival,work\n0,1\n")
    out = schedlab("sim", "--trace", str(trace))
    assert out.returncode == 2
    assert "missing 'size'" in out.stderr and str(trace) in out.stderr


def test_allow_unstable_runs_with_a_time_limit():
    out = schedlab("sim", "--load", "1.2", "--time", "1000", "--allow-unstable", "--json")
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    assert s["utilization"] > 0.95 and s["unfinished"] > 0
    # Its table says the intervals describe the run, not a steady state; at 0.9 nothing is
    # said, and replications say it once.
    for load, extra, count in (("1.2", [], 1), ("0.9", [], 0), ("1.2", ["--replications",
                                                                       "2"], 1)):
        text = schedlab("sim", "--load", load, "--time", "1000", "--allow-unstable", *extra)
        assert text.returncode == 0, text.stderr
        assert " ".join(text.stdout.split()).count(
            f"WARNING: an offered load of {load} per CPU (allow_unstable) has no steady "
            "state") == count, text.stdout


def test_spec_file_gives_the_same_run_as_flags(tmp_path):
    spec = tmp_path / "run.toml"
    spec.write_text('policy = "rr"\nload = 0.8\nsize = "exp:1"\njobs = 3000\nseed = 4\n'
                    "[params]\nquantum = 0.5\n")
    a = json.loads(schedlab("sim", "--spec", str(spec), "--json").stdout)
    b = json.loads(schedlab("sim", "--policy", "rr", "--quantum", "0.5", "--load", "0.8",
                            "--size", "exp:1", "--jobs", "3000", "--seed", "4", "--json").stdout)
    assert a["response_mean"] == b["response_mean"]


def test_policies_lists_every_policy_with_params():
    out = schedlab("policies", "--json")
    names = {p["name"] for p in json.loads(out.stdout)}
    assert {"fcfs", "lcfs", "sjf", "psjf", "srpt", "rr", "ps", "priority", "lottery", "stride",
            "mlfq", "fb", "cfs", "edf"} <= names


def test_every_command_prints_its_help():
    # The vocabulary's texts go into argparse, which formats them with %: one "95% interval"
    # in a key's help once made `sim --help` and `os --help` raise.
    import argparse

    from schedlab.cli import make_parser

    parser = make_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert {"sim", "os", "run", "serve", "load", "theory"} <= set(sub.choices)
    for name, p in sub.choices.items():
        text = p.format_help()
        assert f"usage: schedlab {name}" in text, name
    sim_help = sub.choices["sim"].format_help()
    assert "--precision" in sim_help and "95% interval" in sim_help


def test_every_command_is_a_python_call_of_its_name():
    # "Everything a user can do is reachable from the CLI and from Python, with the same
    # names": `schedlab report`, `quickstart`, `policies` and `os` had no call of their name
    # (`schedlab.os` was the standard library's). `sim` is `simulate`.
    import argparse

    import schedlab as lab
    from schedlab.cli import make_parser

    parser = make_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name in sub.choices:
        call = getattr(lab, "simulate" if name == "sim" else name)
        assert callable(call), name
    assert lab.os.__module__ == "schedlab.api"
    assert "os" in dir(lab) and "os" not in lab.__all__  # `import *` keeps the user's os
    assert lab.policies() == json.loads(schedlab("policies", "--json").stdout)
    lab.policies()[0]["name"] = "changed"  # a copy: the catalogue the others read stays
    assert lab.policies()[0]["name"] == "fcfs" and lab.theory("fcfs", load=0.5)["mean"] == 2.0
    assert repr(lab.policies.RR(quantum=5)) == "RR(quantum=5)"  # still the policies' module
    # A wrong argument names the call the user made, not the function behind it.
    with pytest.raises(TypeError, match=r"^schedlab\.report\(\) got an unexpected keyword "
                                        r"argument 'bogus'$"):
        lab.report("results", bogus=1)
    with pytest.raises(TypeError, match=r"^schedlab\.policies\(\) takes 0 positional"):
        lab.policies("rr")
    assert lab.report.make_report.__name__ == "make_report"  # the CLI's own stays itself
    # The docs name `schedlab.compare` beside `simulate(policy=[...])`: a call of it too.
    pair = lab.compare(["fcfs", "srpt"], load=0.5, jobs=1000)
    assert pair.table()["response_mean"].tolist() == \
        lab.simulate(["fcfs", "srpt"], load=0.5, jobs=1000).table()["response_mean"].tolist()
    # `import schedlab` still keeps OpenBLAS to one thread (its `os` is now `_os`).
    env = {k: v for k, v in cli_env().items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", "import os, schedlab; "
                          "print(os.environ['OPENBLAS_NUM_THREADS'])"],
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.stdout.strip() == "1", out.stderr


def test_the_os_commands_task_table_heads_each_measured_column_with_its_unit(capsys):
    # `schedlab os` printed cpu_time, runqueue_wait, share... as bare numbers below a summary
    # with units. Drawn from a result by hand: the printing, not the kernel, is under test.
    import types

    from schedlab import cli

    tasks = pd.DataFrame({"task": [0, 1], "class": ["a", "b"], "policy": ["other"] * 2,
                          "nice": [0, 5], "cpu_time": [40.5, 39.9], "runqueue_wait": [1.0, 2.0],
                          "context_switches": [3, 4], "share": [0.5, 0.5]})
    summary = {"policy": "kernel:other", "tasks": 2, "jobs": 4, "cpus": 1, "wall_ms": 80.0,
               "response_mean": 40.0}
    cli._print_os(types.SimpleNamespace(summary=summary, tasks=tasks))
    header = next(line for line in capsys.readouterr().out.splitlines()
                  if line.lstrip().startswith("task"))
    assert header.split() == ["task", "class", "policy", "nice", "cpu_time", "(ms)",
                              "runqueue_wait", "(ms)", "context_switches", "(count)", "share",
                              "(ratio)"], header


def test_one_policy_with_a_list_value_is_one_run_not_a_comparison():
    # `--policy mlfq:quanta=1,2,4:boost_period=100` has commas, and was taken for several
    # policies: a comparison table titled "1 policies", and from Python a Comparison; the
    # os world refused it as a list of policies.
    import schedlab as lab

    spec = ["--load", "0.5", "--jobs", "1000"]
    expected = lab.simulate("mlfq", quanta=[1, 2, 4], boost_period=100, load=0.5, jobs=1000)
    out = schedlab("sim", "--policy", "mlfq:quanta=1,2,4:boost_period=100", *spec, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["response_mean"] == expected.summary["response_mean"]
    out = schedlab("sim", "--policy", "mlfq:quanta=1,2,4:boost_period=100", *spec)
    assert "policies on one workload" not in out.stdout and "mlfq: 1000 jobs" in out.stdout
    inline = lab.simulate("mlfq:quanta=1,2,4:boost_period=100", load=0.5, jobs=1000)
    assert inline.summary["response_mean"] == expected.summary["response_mean"]
    # Several policies, a list value among them, are still a comparison of that many.
    both = lab.simulate("fcfs,mlfq:quanta=1,2,4", load=0.5, jobs=1000)
    assert len(both.table()) == 2


def test_result_files_take_the_umask_not_0600(tmp_path):
    # Written atomically through a temporary file, yet readable as any new file is.
    out = schedlab("sim", "--load", "0.5", "--jobs", "100", "--jobs-out",
                   str(tmp_path / "jobs.csv"), "--json")
    assert out.returncode == 0, out.stderr
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "jobs.csv").stat().st_mode & 0o777 == 0o666 & ~umask
    assert [p.name for p in tmp_path.iterdir()] == ["jobs.csv"]  # no temporary left


def test_the_json_summary_carries_the_unit_of_every_key():
    # Issue 13: units everywhere a number is printed; the core declares one per summary key.
    out = schedlab("sim", "--load", "0.5", "--jobs", "2000", "--cpus", "2", "--json")
    s = json.loads(out.stdout)
    units = s.pop("units")
    assert set(units) == set(s)
    assert (units["response_mean"], units["throughput"], units["utilization"],
            units["migrations"], units["mean_in_system"]) == ("ms", "jobs/ms", "ratio",
                                                              "count", "jobs")
    out = schedlab("sim", "--load", "0.5", "--jobs", "2000", "--replications", "2", "--json")
    s = json.loads(out.stdout)
    assert s["units"]["response_mean_ci"] == "ms" and "runs" not in s["units"]
    # A closed run writes its contended interval (text and ms): declared too.
    out = schedlab("sim", "--clients", "3", "--think", "exp:1", "--jobs", "200", "--json")
    s = json.loads(out.stdout)
    units = s.pop("units")
    assert "contended_end" in s and set(units) == set(s)
    assert (units["contended_end"], units["contended_ms"]) == ("text", "ms")


def _on_a_terminal(args: list[str]) -> tuple[int, str]:
    """Runs the command with stdout and stderr on a pseudo-terminal; returns (code, output)."""
    import pty
    import select

    master, slave = pty.openpty()
    p = subprocess.Popen([SCHEDLAB, *args], stdin=subprocess.DEVNULL, stdout=slave,
                         stderr=slave, env={**cli_env(), "COLUMNS": "120", "TERM": "xterm"})
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        if not ready:
            p.kill()
            break
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return p.wait(timeout=30), b"".join(chunks).decode(errors="replace")


def test_progress_on_a_terminal_and_silence_in_a_pipe():
    # Issue 13: quickstart ran 36 s without a word. On a terminal a bar counts its runs (2 size
    # laws x 6 policies x 2 replications = 24); in a pipe stderr stays empty.
    args = ["quickstart", "--jobs", "3000", "--replications", "2"]
    code, text = _on_a_terminal(args)
    assert code == 0, text
    assert "24 runs of 3,000 jobs" in text and "24/24" in text, text
    out = schedlab(*args)
    assert out.returncode == 0 and out.stderr == ""
    assert "RR q=10" in out.stdout


def test_one_policy_with_its_parameters_inline_is_the_policy_and_its_flags():
    # `--policy rr:quantum=5` alone, as a comparison list writes it: the same run as
    # `--policy rr --quantum 5` (it used to be refused as an unknown policy name).
    def run(*args: str) -> dict:
        out = schedlab("sim", *args, "--load", "0.7", "--jobs", "2000", "--json")
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    inline, flags = run("--policy", "rr:quantum=5"), run("--policy", "rr", "--quantum", "5")
    assert inline["response_mean"] == flags["response_mean"]
    assert inline["response_mean"] != run("--policy", "rr")["response_mean"]  # quantum 10
    out = schedlab("sim", "--policy", "rr:quantum=", "--load", "0.7", "--jobs", "10")
    assert out.returncode == 2 and out.stderr.startswith("schedlab: error: quantum = "), out


def test_intervals_of_a_run_too_short_to_trust_are_marked_in_the_table():
    short = schedlab("sim", "--load", "0.5", "--jobs", "100")
    assert short.returncode == 0
    rows = [line for line in short.stdout.splitlines() if "response mean" in line]
    assert len(rows) == 1 and "]†" in rows[0], short.stdout
    assert "NOT shown uncorrelated" in short.stdout and "marked †" in short.stdout
    long = schedlab("sim", "--load", "0.5", "--jobs", "200000")
    assert long.returncode == 0 and "†" not in long.stdout, long.stdout


def test_serve_and_load_take_their_specs_keys_on_every_surface():
    # Every key of the server's and the load generator's specs (the core's SERVE_KEYS and
    # LOAD_KEYS) is a flag of `schedlab serve`/`load` by its name and an option of
    # `schedlab.serve`/`schedlab.load`, but those the program sets itself (the url is load's
    # first argument, targets come from --mix/--burst, keep_requests from --out, announce from
    # --quiet, params from the policy's own flags); and the keys a world has are its keys.
    import argparse

    import schedlab._core as core
    from schedlab import server
    from schedlab.vocabulary import KEYS

    parser = argparse.ArgumentParser()
    server.add_commands(parser.add_subparsers(dest="command"))
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    set_by_the_program = {"url", "targets", "keep_requests", "announce", "params"}
    for command, keys, options in (("serve", core.SERVE_KEYS, server.SERVE_OPTIONS),
                                   ("load", core.LOAD_KEYS, server.LOAD_OPTIONS)):
        flags = {o for a in sub.choices[command]._actions for o in a.option_strings}
        names = {k for k, _ in keys} - set_by_the_program
        assert {f"--{k.replace('_', '-')}" for k in names} - {"--classes"} <= flags, command
        assert names <= set(options), command
    # The keys a world reads are the world's: the server's CPUs and log, the load's time.
    assert {"cpus", "server_log", "time", "keep_alive", "hdr_log"} <= set(KEYS)
    assert "workers" not in {k for k, _ in core.SERVE_KEYS}


def test_an_abbreviated_flag_is_not_taken_for_a_longer_one():
    # `batch` was a workload key with no flag: argparse took `--batch 5` for `--batches 5`
    # (batch means) and ran, exit 0, where a batch of processes was meant. It has its flag
    # now (a batch of one-shot processes); a prefix of a flag is still no flag.
    out = schedlab("sim", "--load", "0.5", "--jobs", "100", "--prec", "0.05")
    assert out.returncode == 2, out.stdout
    assert out.stderr.strip() == "schedlab: error: unrecognized arguments: --prec 0.05"
    out = schedlab("sim", "--size", "det:1", "--batch", "5", "--json")
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    assert s["jobs"] == 5 and s["response_mean"] == 3.0 and s["one_shot_batch"] is True
    out = schedlab("serve", "--root", ".", "--cpu", "2")  # --cpus
    assert out.returncode == 2 and "unrecognized arguments: --cpu 2" in out.stderr


def test_every_submodule_the_docs_name_works_after_import_schedlab_alone():
    # `schedlab.trace.write_trace` (docs/simulator.md) raised AttributeError after `import
    # schedlab`: only `theory` and `policies` were loaded on use.
    code = ("import schedlab\n"
            "print(callable(schedlab.trace.write_trace), callable(schedlab.stats.t_interval),"
            " callable(schedlab.results.summarize), callable(schedlab.compare.compare))\n"
            "try:\n    schedlab.no_such_thing\nexcept AttributeError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, env=cli_env())
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["True True True True",
                                       "module 'schedlab' has no attribute 'no_such_thing'"]


def test_help_and_the_policy_list_give_each_numbers_unit():
    # "(work)" and "(time)" before, and --timeslice without a unit.
    listing = " ".join(schedlab("policies").stdout.split())
    assert ("--quantum: longest turn on the CPU; a number > 0 (ms of service; packets in the "
            "server), default 10") in listing
    assert "priority points gained per ms spent waiting; a number >= 0 (per ms)" in listing
    assert "(work)" not in listing and "(time)" not in listing
    sim = " ".join(schedlab("sim", "--help").stdout.split())
    assert "slice owned by the task, in ms of service: replaces" in sim
    assert "share the CPU continuously) (ms of service)" not in sim
    assert "--quantum NUMBER longest turn on the CPU (ms of service)" in sim
    assert "(ms) (ms)" not in sim  # a help that says its unit is left alone
    serve = " ".join(schedlab("serve", "--help").stdout.split())
    assert "--quantum NUMBER longest turn on the CPU (packets)" in serve

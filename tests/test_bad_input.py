"""Bad input on every subcommand (issue 13): one line on stderr naming the key, exit code 2, no
traceback, nothing written, and before any work starts."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess

import pytest
from conftest import ROOT, SCHEDLAB, cli_env

# (arguments, the key the message must name). Each must fail at once: the timeout is short.
BAD = [
    (["sim", "--jobs", "-5"], "jobs"),
    # A run until precise measures as many jobs as it takes: B batches of `jobs` would not be B.
    (["sim", "--load", "0.5", "--jobs", "1000", "--batches", "3", "--precision", "0.05"],
     "batches"),
    (["sim", "--jobs", "2.5"], "jobs"),
    (["sim", "--jobs", "many"], "jobs"),
    (["sim", "--cpus", "-2"], "cpus"),
    (["sim", "--cpus", "0"], "cpus"),
    (["sim", "--seed", "-1"], "seed"),
    (["sim", "--clients", "-3"], "clients"),
    (["sim", "--load", "1.2"], "load"),
    (["sim", "--load", "-0.5"], "load"),
    (["sim", "--load", "abc"], "load"),
    (["sim", "--policy", "nosuch"], "policy"),
    (["sim", "--policy", "fcfs,nosuch", "--load", "0.5"], "policy"),
    (["sim", "--policy", "fcfs,rr:colour=5", "--load", "0.5"], "policy"),
    (["sim", "--policy", "fcfs,sjf", "--quantum", "2", "--load", "0.5", "--jobs", "9"], "quantum"),
    # Every policy that takes it gives its own: it reached none, without a word.
    (["sim", "--policy", "rr:quantum=5,srpt", "--quantum", "3", "--load", "0.5", "--jobs", "9"],
     "quantum"),
    (["os", "--policy", "fcfs,srpt", "--clients", "2", "--jobs", "4"], "policy"),
    (["sim", "--policy", "rr", "--quantum", "-1"], "quantum"),
    (["sim", "--policy", "rr", "--quantum", "zero"], "quantum"),
    (["sim", "--size", "exp:-1"], "size"),
    (["sim", "--size", "gauss:1"], "size"),
    (["sim", "--arrival", "exp:0"], "arrival"),
    (["sim", "--arrival", "exp:1", "--load", "0.5"], "load"),
    (["sim", "--runqueues", "sideways"], "runqueues"),
    (["sim", "--balancer", "magic", "--runqueues", "per-cpu", "--cpus", "2"], "balancer"),
    (["sim", "--timeslice", "-4"], "timeslice"),
    # A timeslice replaces a turn: FCFS or SRPT with one would be round robin by another name.
    (["sim", "--policy", "srpt", "--timeslice", "5"], "timeslice"),
    (["sim", "--context-switch", "-0.1"], "context_switch"),
    (["sim", "--load", "0.5", "--precision", "2"], "precision"),
    (["sim", "--warmup", "-3"], "warmup"),
    (["sim", "--replications", "0"], "replications"),
    (["sim", "--replications", "2", "--workers", "0"], "workers"),
    (["sim", "--jobs-out", "jobs.txt"], "jobs_out"),
    (["sim", "--load", "0.5", "--jobs", "10", "--jobs-out", "/proc/x/jobs.csv"],
     "jobs_out"),
    (["sim", "--load", "0.5", "--jobs", "10", "--tasks-out", "/proc/tasks.csv"], "tasks_out"),
    (["sim", "--load", "0.5", "--jobs", "10", "--class", "name=A fraction=0.7", "--class",
      "name=B fraction=0.7"], "fraction"),
    (["sim", "--class", "name=A colour=red"], "class"),
    (["sim", "--load", "0.5", "--jobs", "10", "--trace-out", "trace.txt"], "trace_out"),
    (["sim", "--policy", "fcfs,srpt", "--load", "0.5", "--jobs", "10", "--trace-out", "t.json"],
     "trace_out"),
    (["sim", "--nosuchflag", "1"], "nosuchflag"),
    (["sim", "--boost", "sometimes"], "boost"),
    (["os", "--jobs", "-5"], "jobs"),
    (["os", "--sched", "teleport"], "sched"),
    (["os", "--clients", "1", "--jobs", "1", "--size", "det:5", "--sched", "other", "--rtprio",
      "10"], "rtprio"),
    (["os", "--clients", "1", "--jobs", "1", "--size", "det:1e300"], "size"),
    (["os", "--cpus", "-1"], "cpus"),
    (["os", "--clients", "1", "--jobs", "5", "--size", "exp:-2"], "size"),
    (["os", "--jobs-out", "jobs.txt"], "jobs_out"),
    (["os", "--clients", "1", "--jobs", "2", "--trace-out", "/proc/x/t.json"], "trace_out"),
    # argparse's own type and choice errors, in the same words ("argument --jobs: invalid
    # int value: '1e3'" under "schedlab sim: error:" before).
    (["sim", "--jobs", "1e3"], "jobs"),
    (["theory", "--load", "0.5", "--cpus", "1e9"], "cpus"),
    (["calibrate", "disk", "--out", "p.toml"], "world"),
    # A size whose arrivals at the load have no finite rate is named, not the derived
    # arrival (arrival = exp:inf) or load (load = inf) the user never gave.
    (["theory", "--load", "0.5", "--size", "det:1e308"], "size"),
    (["theory", "--policy", "ps", "--load", "0.5", "--size", "det:1e-320"], "size"),
    (["theory", "--policy", "foo", "--load", "0.5"], "policy"),
    # The closed form's terms overflowed: a traceback (OverflowError) where exp:1e100 works.
    (["theory", "--load", "0.5", "--size", "exp:1e103"], "size"),
    # An unstable queue from the arrival given names the arrival, as `sim` does (not load).
    (["theory", "--arrival", "exp:0.5", "--size", "exp:1"], "arrival"),
    (["calibrate", "os", "--out", "p.toml", "--parts", "kernal"], "parts"),
    (["theory", "--load", "1.2"], "load"),
    (["theory", "--load", "0.5", "--size", "exp:-1"], "size"),
    (["theory", "--load", "0.5", "--quantile", "1.5"], "quantile"),
    (["theory"], "arrival"),
    (["serve", "--port", "70000", "--root", "."], "port"),
    (["serve", "--root", "/nonexistent/www"], "root"),
    (["serve", "--root", ".", "--cpus", "0"], "cpus"),
    (["serve", "--root", ".", "--workers", "0"], "cpus"),  # the former name of --cpus
    (["serve", "--root", ".", "--policy", "nosuch"], "policy"),
    (["load", "--url", "http://127.0.0.1:9/", "--clients", "-1"], "clients"),
    (["load", "--url", "ftp://127.0.0.1/", "--duration", "1"], "url"),
    (["load", "--url", "http://127.0.0.1:9/", "--duration", "-1"], "duration"),
    (["load", "--url", "http://127.0.0.1:9/", "--time", "0ms"], "time"),
    # A value that starts with "-" reaches its own check (argparse took "-1s" for an option:
    # "expected one argument").
    (["load", "--url", "http://127.0.0.1:9/", "--time", "-1s"], "'-1s': expected a time > 0"),
    (["sim", "--size", "-x", "--jobs", "5"], "size = -x: expected name:params"),
    (["load", "--url", "http://127.0.0.1:9/", "--time", "5", "--duration", "5"], "duration"),
    (["load", "--url", "http://127.0.0.1:9/", "--clients", "1", "--out", "/proc/x/r.csv"],
     "out"),
    (["load", "--url", "http://127.0.0.1:9/", "--clients", "1", "--duration", "1s"], "url"),
    (["run", "/nonexistent/experiment.toml"], "experiment"),
    (["run", "experiments/rr-ps-fcfs/experiment.toml", "--workers", "0"], "workers"),
    (["report", "/nonexistent/results"], "results"),
    (["sim", "--cpus", "100000000", "--load", "0.5", "--jobs", "100"], "cpus"),
    (["sim", "--load", "0.5", "--jobs", "100", "--replications", "1000000"], "replications"),
    (["os", "--clients", "100000000", "--jobs", "10"], "clients"),
    (["load", "--url", "http://127.0.0.1:9/", "--clients", "100000000"], "clients"),
    (["load", "--url", "http://127.0.0.1:9/", "--clients", "1", "--threads", "0"], "threads"),
    (["sim", "--load", "0.5", "--jobs", "300", "--load-series-out", "s.csv"],
     "load_series_out"),
    (["sim", "--load", "0.5", "--jobs", "300", "--jobs-out", "a.csv", "--tasks-out", "a.csv"],
     "tasks_out"),
    (["sim", "--load", "0.5", "--jobs", "300", "--class", "name=A", "--class", "name=A"],
     "classes[1].name"),
    (["os", "--clients", "2", "--jobs", "2", "--class", "name=A", "--class", "name=A"],
     "classes[1].name"),
    (["load", "--url", "http://127.0.0.1:9/", "--clients", "1", "--jobs", "0"], "jobs"),
    (["load", "--url", "http://127.0.0.1:9/", "--rate", "10", "--think", "exp:5", "--jobs",
      "10"], "think"),
    (["load", "--url", "http://127.0.0.1:9/", "--clients", "1", "--jobs", "10", "--zipf",
      "1.1"], "zipf"),
    (["os", "--clients", "1", "--jobs", "1", "--size", "det:1", "--noise-threshold", "5"],
     "noise_threshold"),
    (["sim", "--size", "det:0", "--load", "0.5", "--jobs", "10"], "load"),
    (["sim", "--cpus", "0,1"], "cpus"),
    (["sim", "--cpus", "abc"], "cpus"),
    (["sim", "--spec", "/tmp"], "spec"),
    (["sim", "--spec", "/bin/true"], "spec"),
    (["run", "/bin/true"], "experiment"),
    (["serve", "--root", ".", "--stats", "/proc/x/s.json"], "stats"),
    (["serve", "--root", ".", "--server-log", "/proc/x/l.csv"], "server_log"),
    (["serve", "--root", ".", "--log", "/proc/x/l.csv"], "server_log"),  # its former name
    (["load", "--url", "http://127.0.0.1:9/", "--clients", "1", "--hdr-log", "/proc/x/h.log"],
     "hdr_log"),
    (["report", "/nonexistent/results", "--html", "/proc/x/r.html"], "results"),
    # Refused by the server calibration starts (it used to surface as a RuntimeError).
    (["calibrate", "server", "--out", "p.toml", "--cost-mode", "burn"], "cost_mode"),
    (["calibrate", "server", "--out", "p.toml", "--packet", "0"], "packet"),
    (["quickstart", "--jobs", "-1"], "jobs"),
    (["quickstart", "--replications", "0"], "replications"),
    # A warm-up that every job falls in measures nothing (the summary said "warm-up: 0 jobs,
    # measured from inf ms" and exited 0).
    (["sim", "--load", "0.5", "--jobs", "2000", "--warmup-time", "1e9"], "warmup_time"),
    (["sim", "--load", "0.5", "--time", "1000", "--warmup-time", "2000"], "warmup_time"),
    (["sim", "--clients", "2", "--size", "det:1", "--time", "10", "--warmup", "100"], "warmup"),
    # Machine costs that take an open system past saturation (its mean grew with the run).
    (["sim", "--service-scale", "1.5", "--load", "0.8", "--jobs", "200"], "service_scale"),
    (["sim", "--service-offset", "0.3", "--load", "0.8", "--jobs", "200"], "service_offset"),
    # The os world's io forms, where the simulator's parser said "numbers after the colon".
    (["sim", "--load", "0.5", "--jobs", "30", "--io", "sleep:exp:1", "--bursts", "2"], "io"),
    # A cap below the jobs a run until precise measures first: it measured the cap.
    (["sim", "--load", "0.5", "--jobs", "2000", "--precision", "0.05", "--max-jobs", "100"],
     "max_jobs"),
    # Found by an audit (2026-12-01): a CV past the doubles' range made the core panic (and
    # `run` spin for ever); huge counts aborted it while allocating, or hung `theory`; an
    # empty or reversed CPU list ran on every CPU; an empty path wrote nothing, silently.
    (["sim", "--load", "0.5", "--jobs", "100", "--size", "hyperexp:1,1e300"], "size"),
    (["theory", "--load", "0.5", "--size", "hyperexp:1,1e300"], "size"),
    (["sim", "--load", "0.5", "--jobs", "100", "--size", "lognormal:1,1e300"], "size"),
    (["sim", "--clients", "20000000", "--jobs", "100", "--size", "det:1"], "clients"),
    (["sim", "--batch", "20000000", "--size", "det:1"], "batch"),
    (["sim", "--batch", "0", "--size", "det:1"], "batch"),
    (["sim", "--policy", "rr", "--quantum", "1e-17", "--load", "0.5", "--jobs", "10", "--size",
      "det:1"], "quantum"),
    (["sim", "--load", "0.5", "--jobs", "100", "--cpus", "4", "--runqueues", "per-cpu",
      "--affinity", "0-4000000000"], "affinity"),
    (["sim", "--load", "0.5", "--jobs", "100", "--cpus", "2", "--affinity", "3-1"], "affinity"),
    (["sim", "--load", "0.5", "--jobs", "100", "--cpus", "2", "--affinity", ""], "affinity"),
    (["theory", "--load", "0.5", "--cpus", "1000000000"], "cpus"),
    (["theory", "--clients", "1000000000", "--size", "exp:1", "--think", "exp:10"], "clients"),
    (["sim", "--load", "0.5", "--jobs", "10", "--jobs-out", ""], "jobs_out"),
    (["sim", "--load", "0.5", "--jobs", "10", "--trace-out", ""], "trace_out"),
    (["sim", "--load", "0.5", "--jobs", "10", "--spec", ""], "spec"),
    (["sim", "--load", "0.5", "--jobs", "10", "--profile", ""], "profile"),
    (["sim", "--load", "0.5", "--jobs", "10", "--class", "name=a name=b fraction=1"], "class"),
    # A machine key the profile sets too (the profile's value won, without a word).
    (["sim", "--load", "0.5", "--jobs", "200", "--profile",
      str(ROOT / "docs" / "server-profile.toml"), "--context-switch", "50"], "context_switch"),
]


def test_the_table_is_large_and_covers_every_subcommand():
    assert len(BAD) >= 40
    assert {args[0] for args, _ in BAD} == {"sim", "os", "theory", "serve", "load", "run",
                                            "report", "quickstart", "calibrate"}


@pytest.mark.parametrize(("args", "key"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_is_one_line_naming_the_key_exit_2(args, key, tmp_path):
    out = subprocess.run([SCHEDLAB, *args], capture_output=True, text=True, timeout=30,
                         env=cli_env(), cwd=_cwd(args, tmp_path))
    err = out.stderr.strip()
    assert out.returncode == 2, (out.returncode, err, out.stdout[-500:])
    assert "Traceback" not in out.stderr and "Traceback" not in out.stdout
    assert len(err.splitlines()) == 1, err
    assert key in err.replace("-", "_") or key.replace("_", "-") in err, err
    assert out.stdout == ""
    # Nothing written where the command ran.
    assert not any(tmp_path.iterdir()), list(tmp_path.iterdir())


def test_the_audits_messages_say_what_is_allowed(tmp_path):
    # Beyond the key: the allowed values, and the value as typed.
    for args, allowed in [
        (["sim", "--load", "0.5", "--jobs", "9", "--size", "lognormal:1,1e300"],
         "size = lognormal:1,1e300: expected MEAN > 0 and 0 < CV <= 10000"),  # it said "ln"
        (["sim", "--load", "0.5", "--jobs", "9", "--size", "hyperexp:1,1e300"],
         "expected MEAN > 0 and 1 <= CV <= 10000"),
        (["sim", "--batch", "0", "--size", "det:1"], "batch = 0: expected a whole number from "
         "1 to 10000000"),  # it said jobs = 0
        (["sim", "--clients", "20000000", "--jobs", "9", "--size", "det:1"],
         "clients = 20000000: expected a whole number from 1 to 10000000"),
        (["sim", "--policy", "rr", "--quantum", "1e-7", "--load", "0.5", "--jobs", "9",
          "--size", "exp:1"], "quantum = 1e-7: expected a turn of at least 1e-6 ms (a "
         "millionth of the mean size 1 ms)"),
        (["theory", "--load", "0.5", "--cpus", "100000"], "cpus = 100000: expected a whole "
         "number from 1 to 65536"),
        (["sim", "--load", "0.5", "--jobs", "9", "--profile", ""], 'profile = "": expected'),
        (["sim", "--load", "0.5", "--jobs", "90", "--batches", "5", "--replications", "3"],
         "error: batches = 5: expected nothing beside replications = 3"),
        # A key the command does not take, said as a key with the world's reason (argparse
        # said "unrecognized arguments: --load 0.5").
        (["os", "--load", "0.5", "--clients", "2"], "error: load = 0.5: expected nothing in "
         "schedlab os: the os world has no open arrivals"),
        (["os", "--buffer=3"], "error: buffer = 3: expected a key of schedlab os (buffer is "
         "not one"),
        (["os", "--frobnicate", "3"], "error: unrecognized arguments: --frobnicate 3"),
        # inf is "> 0" and ">= 0" by its sign: the refusal names finiteness.
        (["sim", "--load", "0.5", "--jobs", "9", "--context-switch", "inf"],
         "error: context_switch = inf: expected a finite number >= 0"),
        (["sim", "--load", "0.5", "--time", "inf"], "error: time = inf: expected a finite "
         "number > 0"),
        # SCHED_DEADLINE's rule in the keys typed (it said tasks[0].runtime = runtime 5 ms, ...).
        (["os", "--jobs", "5", "--clients", "1", "--sched", "deadline", "--runtime", "5",
          "--deadline", "2"], "error: runtime = 5.0 (deadline 2.0, period 2.0): expected "
         "runtime <= deadline <= period (ms)"),
        # ... and in the simulator's model of the kernel, which dropped the runtime silently.
        (["sim", "--clients", "1", "--jobs", "100", "--policy", "kernel", "--sched", "deadline",
          "--runtime", "5", "--deadline", "2"], "error: runtime = 5.0 (deadline 2.0, period "
         "2.0): expected runtime <= deadline <= period (ms)"),
        # A policy parameter under the kernel, named as typed (it said params = {'quantum': 3.0}).
        (["os", "--quantum", "3", "--clients", "2"], "error: quantum = 3: expected nothing "
         "under the kernel (a parameter of a schedlab policy: set policy)"),
        (["sim", "--policy", "kernel", "--quantum", "3", "--load", "0.5", "--jobs", "9"],
         "error: quantum = 3: expected nothing under the kernel (a parameter of a schedlab "
         "policy: set policy)"),
        # The machine's affinity as typed, not the class it went into (classes[0].affinity = 4).
        (["sim", "--load", "0.5", "--jobs", "9", "--cpus", "4", "--affinity", "0-9"],
         "error: affinity = 0-9: expected CPU numbers from 0 to 3 (the simulated machine has 4 "
         "CPUs; CPU 9 is not one)"),
        (["sim", "--load", "0.5", "--jobs", "9", "--cpus", "4", "--affinity", "0-3"],
         "error: affinity = 0-3: expected runqueues = per-cpu"),
        (["sim", "--load", "0.5", "--jobs", "9", "--cpus", "2", "--runqueues", "per-cpu",
          "--class", "affinity=0,2"], "error: classes[0].affinity = 0,2: expected CPU numbers "
         "from 0 to 1"),
        (["sim", "--load", "0.5", "--jobs", "9", "--cpus", "2", "--runqueues", "per-cpu",
          "--class", "affinity=x"], "error: classes[0].affinity = x: expected CPU numbers: 0,2 "
         "or 0-3 or [0, 1]"),
        # A nice or deadline for every task, named as typed (it said classes[0].nice = 99).
        (["sim", "--load", "0.5", "--jobs", "9", "--nice", "99"], "error: nice = 99: expected "
         "a number from -20 to 19"),
        (["sim", "--policy", "edf", "--load", "0.5", "--jobs", "9", "--deadline", "-1"],
         "error: deadline = -1: expected a number > 0"),
        # The list form the message offers, written on the command line (it was refused).
        (["sim", "--load", "0.5", "--jobs", "9", "--cpus", "4", "--runqueues", "per-cpu",
          "--affinity", "[0, 9]"], "error: affinity = [0, 9]: expected CPU numbers from 0 to 3"),
        # The os world's default is one policy more than the simulator's list (it was left out).
        (["os", "--policy", "nosuch", "--jobs", "1", "--clients", "1"], "error: policy = "
         "nosuch: expected one of fcfs, lcfs, sjf, psjf, srpt, rr, ps, gps, fb, priority, "
         "lottery, stride, mlfq, cfs, eevdf, edf, or kernel (the kernel's own policies"),
    ]:
        out = subprocess.run([SCHEDLAB, *args], capture_output=True, text=True, timeout=30,
                             env=cli_env(), cwd=tmp_path)
        assert out.returncode == 2 and allowed in out.stderr, (args, out.stderr)
    # A class may have no one-shot process (as in the os world), not more than the limit.
    import schedlab

    # A policy parameter under the kernel, from Python as from the command line (it said
    # "quantum = 2.5: expected an os-world key: affinity, batch, ...").
    # The same words by name, and in the simulator's model of the kernel (they said "a
    # parameter of policy kernel (deadline, ...)" and "quantum = 2.0: expected a key of the
    # vocabulary").
    for call in (lambda: schedlab.os(clients=2, size="det:1", params={"quantum": 2.5}),
                 lambda: schedlab.os(clients=2, size="det:1", quantum=2.5),
                 lambda: schedlab.simulate("kernel", load=0.5, jobs=9, params={"quantum": 2.5})):
        with pytest.raises(schedlab.SpecError, match=r"^quantum = 2.5: expected nothing under "
                           r"the kernel \(a parameter of a schedlab policy: set policy\)$"):
            call()
    assert schedlab.simulate("kernel", load=0.5, jobs=9, nice=3).summary["jobs"] == 9
    # A name that is no policy's parameter is not said to be one: the keys are listed.
    with pytest.raises(schedlab.SpecError, match=r"^nicee = 3: expected a key \(arrival, "
                       r".*or a parameter of policy kernel \(deadline, nice"):
        schedlab.simulate("kernel", load=0.5, jobs=9, params={"nicee": 3})
    # A class's affinity written as text from Python, as in a file (it said
    # classes[0].affinity[0] = "0": expected a whole number).
    with pytest.raises(schedlab.SpecError, match=r"^classes\[0\]\.affinity = 0-9: expected CPU "
                       r"numbers from 0 to 3 \(the simulated machine has 4 CPUs; CPU 9 is not "
                       r"one\)$"):
        schedlab.simulate("fcfs", load=0.5, jobs=9, cpus=4, runqueues="per-cpu",
                          classes=[{"affinity": "0-9"}])
    pinned = schedlab.simulate("fcfs", load=0.5, jobs=200, cpus=4, runqueues="per-cpu",
                               classes=[{"affinity": "2-3"}], keep_jobs=True)
    assert set(pinned.jobs["cpu"]) <= {2, 3} and len(pinned.jobs) == 200
    import numpy as np

    on_numpy = schedlab.simulate("fcfs", load=0.5, jobs=200, cpus=4, runqueues="per-cpu",
                                 affinity=[np.int64(1), np.int64(2)], keep_jobs=True)
    assert set(on_numpy.jobs["cpu"]) <= {1, 2}
    with pytest.raises(schedlab.SpecError, match=r"^affinity = \[inf\]: expected CPU numbers"):
        schedlab.simulate("fcfs", load=0.5, jobs=9, cpus=4, affinity=[float("inf")])
    for flags in (["--affinity", "[1, 3]"], ["--class", "affinity=[1,3]"]):
        cli_list = subprocess.run([SCHEDLAB, "sim", "--load", "0.5", "--jobs", "200", "--cpus",
                                   "4", "--runqueues", "per-cpu", *flags, "--json"],
                                  capture_output=True, text=True, timeout=30, env=cli_env())
        assert cli_list.returncode == 0, (flags, cli_list.stderr)
        assert json.loads(cli_list.stdout)["jobs"] == 200
    # A class's affinity beside a profile: the profile is the calibrated model's, applied
    # after the affinity is judged (it said `profile = ...: expected a key of this table`).
    profiled = subprocess.run([SCHEDLAB, "sim", "--load", "0.5", "--jobs", "50", "--cpus", "4",
                               "--runqueues", "per-cpu", "--class", "affinity=0,1", "--profile",
                               str(ROOT / "docs" / "server-profile.toml"), "--json"],
                              capture_output=True, text=True, timeout=30, env=cli_env())
    assert profiled.returncode == 0 and json.loads(profiled.stdout)["jobs"] == 50, profiled.stderr
    # What a file's translation drops for the simulator is refused in a direct run whether or
    # not another key is translated (beside affinity or nice, cost and a class's prefix ran).
    for extra in ({}, {"affinity": [0]}, {"nice": 3}):
        with pytest.raises(schedlab.SpecError, match=r"^cost = 1ms: expected nothing in the sim "
                           "world: a key of the server's emulated cost"):
            schedlab.simulate("fcfs", load=0.5, jobs=9, cpus=4, runqueues="per-cpu", cost="1ms",
                              **extra)
        with pytest.raises(schedlab.SpecError, match=r"^classes\[0\]\.prefix = /a: expected "
                           "nothing in the sim world: a key of another world"):
            schedlab.simulate("fcfs", load=0.5, jobs=9, cpus=4, runqueues="per-cpu",
                              classes=[{"prefix": "/a", **({"affinity": [0]} if extra else {})}],
                              **{k: v for k, v in extra.items() if k == "nice"})
    # batches splits one run; across replications it would go unused (it was accepted).
    for call in (lambda: schedlab.simulate("fcfs", load=0.5, jobs=100, batches=5,
                                           replications=2),
                 lambda: schedlab.simulate(["fcfs", "srpt"], load=0.5, jobs=100, batches=5,
                                           replications=2)):
        with pytest.raises(schedlab.SpecError, match=r"^batches = 5: expected nothing beside "
                           "replications = 2"):
            call()
    assert schedlab.simulate("fcfs", load=0.5, jobs=100, batches=5).summary["ci_batches"] == 5
    classes = [{"name": "a", "batch": 0}, {"name": "b", "batch": 2}]
    assert schedlab.simulate("fcfs", size="det:1", classes=classes).summary["jobs"] == 2
    with pytest.raises(schedlab.SpecError, match=r"^classes\[1\]\.batch = 20000000: expected "
                       r"a whole number from 0 to 10000000"):
        schedlab.simulate("fcfs", size="det:1", classes=[classes[0], {"name": "b",
                                                                        "batch": 20_000_000}])
    # The largest allowed still run: a million turns a job, a CV of 10,000, 65,536 CPUs.
    for args in (["sim", "--policy", "rr", "--quantum", "1e-6", "--load", "0.5", "--jobs",
                  "2", "--size", "det:1", "--json"],
                 ["sim", "--load", "0.5", "--jobs", "50", "--size", "hyperexp:1,10000",
                  "--json"],
                 ["theory", "--load", "0.5", "--cpus", "65536"]):
        out = subprocess.run([SCHEDLAB, *args], capture_output=True, text=True, timeout=60,
                             env=cli_env(), cwd=tmp_path)
        assert out.returncode == 0, (args, out.stderr)


def _cwd(args: list[str], tmp_path):
    """An empty directory to run in; `run` reads its experiment from the repository."""
    if args[0] == "run" and not args[1].startswith("/"):
        from conftest import ROOT

        return ROOT
    return tmp_path


def test_serve_on_a_port_in_use_names_the_port(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run([SCHEDLAB, "serve", "--root", str(tmp_path), "--port", str(port)],
                             capture_output=True, text=True, timeout=30, env=cli_env())
    err = out.stderr.strip()
    assert out.returncode == 2 and len(err.splitlines()) == 1, err
    assert f"port = {port}" in err and "in use" in err, err


def test_class_fractions_are_shares_in_every_world():
    """A fraction is a share: classes without one split what is left (0.2, then 0.4 and 0.4),
    in the simulator's arrivals and in the os world's processes alike (one rule, the core's)."""
    import schedlab
    from schedlab.osrun.spec import build_plan

    r = schedlab.simulate(load=0.5, jobs=20_000, seed=3, classes=[
        {"name": "a", "fraction": 0.2}, {"name": "b"}, {"name": "c"}])
    counts = r.classes.set_index("class")["jobs"]
    n = counts.sum()
    # Binomial standard error at p = 0.2 and n = 20,000 is 0.0028; allow 4 of them.
    for name, share in (("a", 0.2), ("b", 0.4), ("c", 0.4)):
        assert abs(counts[name] / n - share) < 0.012, counts
    plan, _ = build_plan({"clients": 10, "size": "det:1", "jobs": 10, "classes": [
        {"name": "a", "fraction": 0.2}, {"name": "b"}, {"name": "c"}]})
    assert [sum(1 for t in plan["tasks"] if t["class"] == i) for i in range(3)] == [2, 4, 4]


def test_a_broken_pipe_ends_quietly():
    # `schedlab policies | head -1`: the reader leaves early; no traceback.
    out = subprocess.run(f"{SCHEDLAB} policies | head -c 10; "
                         f"{SCHEDLAB} sim --load 0.5 --jobs 2000 --replications 3 --json "
                         f"| head -c 10", shell=True, capture_output=True, text=True,
                         timeout=120, env=cli_env())
    assert "Traceback" not in out.stderr and "BrokenPipe" not in out.stderr, out.stderr
    assert out.stderr.strip() == ""


def test_version():
    from importlib.metadata import version

    out = subprocess.run([SCHEDLAB, "--version"], capture_output=True, text=True, timeout=30,
                         env=cli_env())
    assert out.returncode == 0
    assert out.stdout.strip() == f"schedlab {version('schedlab')}"


def test_a_spec_error_raised_in_a_worker_process_reaches_the_parent_whole():
    # Sweeps run in process pools: the error crosses by pickle, with its key, value and
    # what is allowed (it used to become a PicklingError naming the module `_core`).
    from concurrent.futures import ProcessPoolExecutor

    import schedlab

    with ProcessPoolExecutor(1) as pool, pytest.raises(schedlab.SpecError) as e:
        pool.submit(schedlab.simulate, "fcfs", load=2.5, jobs=10).result()
    assert str(e.value).startswith("load = 2.5 (load 2.5000): expected a load < 1")
    assert (e.value.key, e.value.allowed) == ("load", "a load < 1 for an open system; set "
                                              "allow_unstable to run it anyway")


def _refused(args: list[str], cwd, key: str) -> str:
    out = subprocess.run([SCHEDLAB, *args], capture_output=True, text=True, timeout=60,
                         env=cli_env(), cwd=cwd)
    err = out.stderr.strip()
    assert out.returncode == 2, (out.returncode, err)
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith(f"schedlab: error: {key} = "), err
    return err


def test_outputs_named_like_a_directory_and_damaged_inputs_are_refused_before_any_work(
        tmp_path):
    # An output whose name is a directory's, checked before the run (it used to fail with
    # IsADirectoryError after it); the directory is left as it was.
    for name in ("d.csv", "t.json", "s.json"):
        (tmp_path / name).mkdir()
    assert "a directory of that name" in _refused(
        ["sim", "--load", "0.5", "--jobs", "300", "--jobs-out", "d.csv"], tmp_path, "jobs_out")
    _refused(["sim", "--load", "0.5", "--jobs", "300", "--trace-out", "t.json"], tmp_path,
             "trace_out")
    _refused(["serve", "--root", ".", "--port", "0", "--stats", "s.json"], tmp_path, "stats")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.csv", "s.json", "t.json"]
    assert not any(any(p.iterdir()) for p in tmp_path.iterdir())
    # A serve config that is JSON but not an object of keys.
    (tmp_path / "c.json").write_text("[1, 2]")
    assert "a JSON object" in _refused(["serve", "--config", "c.json"], tmp_path, "config")
    # A results directory whose files are damaged: named, not a traceback.
    for manifest, why in (("{bad", "JSONDecodeError"), ('{"format": 99}', "KeyError"),
                          ("[]", "TypeError")):
        res = tmp_path / "res"
        res.mkdir(exist_ok=True)
        (res / "manifest.json").write_text(manifest)
        assert why in _refused(["report", "res"], tmp_path, "results")
    # `cpus` as text in an experiment file names its key path.
    (tmp_path / "e.toml").write_text('[experiment]\nname = "e"\n[workload]\nload = 0.5\n'
                                     'jobs = 100\n[machine]\ncpus = "two"\n'
                                     '[[policy]]\nname = "fcfs"\n')
    assert "CPU numbers" in _refused(["run", "e.toml", "--out", "out"], tmp_path,
                                     "machine.cpus")
    assert not (tmp_path / "out").exists()


def test_the_python_api_names_the_key_of_a_value_of_the_wrong_type():
    import schedlab

    for call, text in ((lambda: schedlab.run(5), "experiment = 5: expected a TOML file's path"),
                       (lambda: schedlab.run([1, 2]), "experiment = [1, 2]: expected"),
                       (lambda: schedlab.simulate(trace_out=5, jobs=10),
                        "trace_out = 5: expected a file's path (given: int)"),
                       (lambda: schedlab.simulate(cpus="two", jobs=10),
                        'cpus = "two": expected a whole number from 1 to 65536 (the simulator '
                        "counts its CPUs; a list of CPU numbers is the os world's)"),
                       # Every wrong count says the same as the core's for one too large.
                       (lambda: schedlab.simulate(cpus=-2, jobs=10),
                        "cpus = -2: expected a whole number from 1 to 65536"),
                       (lambda: schedlab.simulate(cpus=0, jobs=10),
                        "cpus = 0: expected a whole number from 1 to 65536"),
                       (lambda: schedlab.simulate(cpus=70_000, load=0.5, jobs=10),
                        "cpus = 70000: expected a whole number from 1 to 65536"),
                       # Text where a number is expected is quoted: the number is not refused.
                       (lambda: schedlab.simulate("fcfs", load="0.5", jobs=10),
                        'load = "0.5": expected a number'),
                       (lambda: schedlab.simulate("fcfs", load=0.5, jobs="10"),
                        'jobs = "10": expected a whole number >= 1'),
                       # Another policy's parameter, said as the command line says it.
                       (lambda: schedlab.simulate("fcfs", quantum=5, load=0.5, jobs=10),
                        "quantum = 5: expected no parameters for policy fcfs"),
                       (lambda: schedlab.simulate("fcfs", load=0.5, jobs=10, classes=[
                           {"name": "a", "priority": float("inf")}]),
                        "classes[0].priority = inf: expected a finite number"),
                       # A TypeError and a ValueError before: no key named.
                       (lambda: schedlab.simulate("rr", params=5, load=0.5, jobs=10),
                        "params = 5: expected a table of the policy's parameters"),
                       (lambda: schedlab.simulate("mlfq", quanta=[1, "a"], load=0.5, jobs=10),
                        "quanta = [1, 'a']: expected a number, a list of numbers"),
                       # A list shown as a list ("quantum = 1: expected a number > 0" before).
                       (lambda: schedlab.simulate("rr", quantum=[1], load=0.5, jobs=10),
                        "quantum = [1]: expected a number > 0"),
                       (lambda: schedlab.simulate("rr", replications="2", load=0.5, jobs=10),
                        'replications = "2": expected a whole number'),
                       # pyo3's "expected int too big to convert" before.
                       (lambda: schedlab.simulate("fcfs", seed=2**70, load=0.5, jobs=10),
                        "seed = 1180591620717411303424: expected a smaller whole number"),
                       (lambda: schedlab.simulate("fcfs", load=float("inf"), jobs=10),
                        "load = inf: expected a finite number > 0")):
        with pytest.raises(schedlab.SpecError) as e:
            call()
        assert str(e.value).startswith(text), str(e.value)


def test_an_experiment_refused_by_the_simulator_leaves_no_directory(tmp_path):
    # Fluid policies refuse the keys of a machine that runs jobs in turns, and GPS more than
    # one CPU: checked with the file, before the results directory exists (these used to be
    # found by the first run, leaving out/.lock and out/runs/ behind).
    head = '[experiment]\nname = "e"\n[workload]\nload = 0.5\njobs = 100\n'
    for machine, policy, key in (("timeslice = 5", "ps", "machine.timeslice"),
                                 ("cpus = 2", "gps", "machine.cpus"),
                                 ("end_cost = 0.1", "fb", "machine.end_cost"),
                                 ("timeslice = 5", "fcfs", "machine.timeslice")):
        (tmp_path / "e.toml").write_text(f'{head}[machine]\n{machine}\n'
                                         f'[[policy]]\nname = "{policy}"\n')
        _refused(["run", "e.toml", "--out", "out"], tmp_path, key)
        assert not (tmp_path / "out").exists()
    # A name that would lead the default results directory out of results/.
    (tmp_path / "e.toml").write_text(head.replace('"e"', '"../../away"')
                                     + '[[policy]]\nname = "fcfs"\n')
    _refused(["run", "e.toml"], tmp_path, "experiment.name")
    (tmp_path / "e.toml").write_text(head + '[[policy]]\nname = "fcfs"\n')
    assert "can be made" in _refused(["run", "e.toml", "--out", "/proc/x/out"], tmp_path, "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.toml"]


def test_a_size_too_large_to_set_an_arrival_rate_is_named_shortly():
    # Sizes of mean 1e308 ms at load 0.5: the inter-arrival mean would overflow. The message
    # names both numbers as written (it printed 1e308's 309 digits).
    out = subprocess.run([SCHEDLAB, "sim", "--load", "0.5", "--size", "exp:1e308", "--jobs",
                          "10"], capture_output=True, text=True, timeout=30, env=cli_env())
    assert out.returncode == 2
    assert "their mean is 1e308 ms: a mean inter-arrival time of inf ms" in out.stderr
    assert len(out.stderr) < 300, out.stderr


def test_a_bad_class_key_is_named_by_its_path_and_its_value(tmp_path):
    # A class table's unknown key or bad value, in a --spec file and in the API, names its
    # path (classes[1].bogus), the value given and the keys allowed.
    import schedlab

    spec = tmp_path / "classes.toml"
    spec.write_text('policy = "fcfs"\nload = 0.5\njobs = 10\n[[classes]]\nname = "a"\n'
                    '[[classes]]\nname = "b"\nbogus = 7\n')
    out = subprocess.run([SCHEDLAB, "sim", "--spec", str(spec)], capture_output=True,
                         text=True, timeout=30, env=cli_env())
    assert out.returncode == 2
    assert "classes[1].bogus = 7: expected a key of this table (one of name, fraction" \
        in out.stderr, out.stderr
    with pytest.raises(schedlab.SpecError) as e:
        schedlab.simulate("fcfs", jobs=10, classes=[{"name": "a", "clients": 2},
                                                     {"name": "b", "clients": -1}])
    assert (e.value.key, e.value.value) == ("classes[1].clients", "-1")


def test_a_spec_files_policy_parameters_are_checked_like_the_apis(tmp_path):
    # `params` not a table, a list parameter with a word in it: a TypeError and a ValueError
    # with exit 1 before, now the key, the value and what is allowed, exit 2.
    for body, text in (('policy = "rr"\nparams = 5\n',
                        "params = 5: expected a table of the policy's parameters"),
                       ('policy = "mlfq"\n[params]\nquanta = [1, "a"]\n',
                        "quanta = [1, 'a']: expected a number, a list of numbers")):
        spec = tmp_path / "spec.toml"
        spec.write_text('load = 0.5\njobs = 10\n' + body)
        out = subprocess.run([SCHEDLAB, "sim", "--spec", str(spec)], capture_output=True,
                             text=True, timeout=30, env=cli_env())
        assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
        assert text in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_two_classes_of_one_name_are_one_rule_in_every_world():
    # Every table names a class by its name: the model's rule, the same error in each world.
    import schedlab
    from schedlab import server
    from schedlab.worlds import os as os_world

    classes = [{"name": "a", "clients": 2}, {"name": "a", "clients": 2}]
    calls = [lambda: schedlab.simulate("fcfs", jobs=10, think="exp:1", classes=classes),
             lambda: os_world.validate({"policy": "fcfs", "jobs": 4, "classes": classes}),
             lambda: server.plan({"policy": "fcfs", "jobs": 10, "cost": "0ms+1ms/KiB",
                                  "classes": classes})]
    for call in calls:
        with pytest.raises(schedlab.SpecError) as e:
            call()
        assert (e.value.key, e.value.value, e.value.allowed) == (
            "classes[1].name", "a", "a name no other class has")


@pytest.mark.parametrize(("args", "message"), [
    (["--placement", "jsq"], "placement = jsq: expected runqueues = per-cpu"),
    (["--balancer", "linux"], "balancer = linux: expected runqueues = per-cpu"),
    (["--ideal", "0,1", "--cpus", "2"], "ideal = 0,1: expected runqueues = per-cpu"),
    (["--runqueues", "per-cpu", "--cpus", "2", "--balancer", "steal", "--imbalance", "1.5"],
     "imbalance = 1.5: expected balancer = linux or linux26"),
    (["--runqueues", "per-cpu", "--cpus", "2", "--balancer", "windows", "--balance-interval",
      "4"], "balance_interval = 4: expected balancer = linux, linux26 or steal"),
])
def test_a_key_refused_for_the_machine_it_is_given_with_names_its_value(args, message):
    # The value given, not "(given)".
    out = subprocess.run([SCHEDLAB, "sim", "--load", "0.5", "--jobs", "10", *args],
                         capture_output=True, text=True, timeout=30, env=cli_env())
    assert out.returncode == 2 and message in out.stderr, out.stderr


@pytest.mark.parametrize("column, policy, rows, needle", [
    # A lottery of no tickets panicked in the policy; a negative weight panicked in EEVDF's
    # lag bounds; zero weights gave GPS responses shorter than the jobs' sizes.
    ("tickets", "lottery", ["1,2,-1"], "a number > 0 in column tickets at line 2, not '-1'"),
    ("tickets", "stride", ["1,2,1", "2,1,0"], "a number > 0 in column tickets at line 3"),
    ("weight", "eevdf", ["1,2,-1", "1.5,3,1"], "a number > 0 in column weight at line 2"),
    ("weight", "gps", ["1,2,0", "1.5,1,0"], "a number > 0 in column weight at line 2"),
    ("deadline", "edf", ["1,2,-5"], "a number > 0 in column deadline at line 2"),
    # A task number of 99,999,999,999 asked for a slot per task up to it (34 GB): aborted.
    ("task", "cfs", ["1,2,0", "2,1,99999999999"], "a whole task number from 0 to 4194304 at "
                                                    "line 3"),
    ("task", "cfs", ["1,2,-1"], "a whole task number from 0 to 4194304 at line 2, not '-1'"),
    ("task", "cfs", ["1,2,1.5"], "a whole task number from 0 to 4194304 at line 2"),
])
def test_a_traces_column_values_are_checked_as_a_class_keys_are(tmp_path, column, policy, rows,
                                                                  needle):
    import schedlab

    trace = tmp_path / "t.csv"
    trace.write_text("\n".join([f"arrival,size,{column}", *rows]) + "\n")
    err = _refused(["sim", "--trace", str(trace), "--policy", policy], tmp_path, "trace")
    assert needle in err, err
    with pytest.raises(schedlab.SpecError, match=re.escape(needle)):
        schedlab.simulate(policy, trace=str(trace))


def test_a_closed_traces_task_number_is_bounded(tmp_path):
    trace = tmp_path / "c.csv"
    trace.write_text("task,think,size\n0,1,1\n99999999999,1,1\n")
    err = _refused(["sim", "--trace", str(trace), "--policy", "rr"], tmp_path, "trace")
    assert "a whole task number from 0 to 4194304 at line 3" in err, err


def test_an_experiments_output_and_workers_are_checked_before_anything_is_written(tmp_path):
    import schedlab

    exp = str(ROOT / "experiments" / "rr-ps-fcfs" / "experiment.toml")
    # A TypeError and a comparison of str with int before.
    for kwargs, text in ((dict(out=5), "out = 5: expected a directory's path"),
                         (dict(out=tmp_path / "o", workers="2"),
                          'workers = "2": expected a whole number, at least 1 and at most'),
                         (dict(out=tmp_path / "o", workers=0), "workers = 0: expected")):
        with pytest.raises(schedlab.SpecError) as e:
            schedlab.run(exp, quick=True, **kwargs)
        assert str(e.value).startswith(text), str(e.value)
    # `--out ""` and `--out .` wrote .lock, manifest.json and runs/ among the user's files.
    (tmp_path / "mine.txt").write_text("mine")
    assert 'out = "": expected a directory\'s path' in _refused(
        ["run", exp, "--quick", "--out", ""], tmp_path, "out")
    assert "a new or empty directory, or a results directory to resume" in _refused(
        ["run", exp, "--quick", "--out", "."], tmp_path, "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]


def test_an_experiment_file_given_as_a_runs_spec_says_where_it_goes(tmp_path):
    exp = str(ROOT / "experiments" / "rr-ps-fcfs" / "experiment.toml")
    # It was a line of 3,000 characters: the [experiment] table refused as an unknown key.
    for command in ("sim", "os"):
        err = _refused([command, "--spec", exp], tmp_path, "spec")
        assert err.endswith("runs with `schedlab run FILE`") and len(err) < 300, err


@pytest.mark.parametrize("change, text", [
    # pydantic's own words before: "a valid dictionary or instance of World_sim".
    (lambda d: d.update(worlds={"sim": 5}), "worlds.sim = 5: expected a table"),
    (lambda d: d["workload"].update(classes=[5]), "workload.classes[0] = 5: expected a table"),
    # A union said one member: "a valid boolean, unable to interpret input".
    (lambda d: d["experiment"].update(keep_jobs="sometimes"),
     "experiment.keep_jobs = \"sometimes\": expected true or false, or 'first'"),
    # An empty label was taken (a policy without a name in every table and plot).
    (lambda d: d["policy"][0].update(label=""), 'policy[0].label = "": expected text, not '
                                                 "empty"),
    # "an index below 0" for a list the base file does not have.
    (lambda d: d.update(sweep={"workload.classes[3].tickets": [1, 2]}),
     "sweep.workload.classes[3].tickets = 1: expected an entry the base file has"),
    # Read as seed 1, one replication, 2 and 0.9 before, where jobs = "2000" was refused.
    (lambda d: d["experiment"].update(seed=True), "experiment.seed = true: expected a whole "
                                                  "number"),
    (lambda d: d["experiment"].update(seed=1.0), "experiment.seed = 1.0: expected a whole "
                                                 "number"),
    (lambda d: d["experiment"].update(replications="2"),
     'experiment.replications = "2": expected a whole number'),
    (lambda d: d["experiment"].update(confidence="0.9"),
     'experiment.confidence = "0.9": expected a number'),
    (lambda d: d.update(worlds={"sim": {"replications": True}}),
     "worlds.sim.replications = true: expected a whole number"),
    # An empty list in [quick.sweep] was named sweep.workload.load, where the file has two.
    (lambda d: d.update(sweep={"workload.load": [0.5, 0.7]},
                        quick={"sweep": {"workload.load": []}}),
     "quick.sweep.workload.load = []: expected a non-empty list of values"),
    # The same point twice ran under one run id and repeated its rows in every table; a
    # million points validated for minutes (found by an audit, 2026-12-01).
    (lambda d: d.update(sweep={"workload.load": [0.5, 0.7, 0.5]}),
     "sweep.workload.load = [0.5, 0.7, 0.5]: expected each value once (0.5 is given twice)"),
    (lambda d: d.update(sweep={"mode": "zip", "workload.load": [0.5, 0.5],
                               "workload.jobs": [100, 100]}),
     "sweep = [0.5, 100]: expected points that differ (mode = zip makes this one twice)"),
    (lambda d: d.update(sweep={"workload.load": [0.1 + i / 1e6 for i in range(1000)],
                               "workload.jobs": list(range(100, 1100))}),
     "sweep = 1,000,000 points: expected at most 100,000 points"),
    # A sweep of one class's fraction: the other class's fraction was named as swept
    # (sweep.workload.classes[1].fraction); it is where the file has it, the sweep's value
    # beside it.
    (lambda d: d.update(sweep={"workload.classes[0].fraction": [0.3]}) or d["workload"].update(
        classes=[{"name": "x", "fraction": 0.5}, {"name": "y", "fraction": 0.5}]),
     "workload.classes[1].fraction = 0.5: expected fractions that add up to 1 (these add up "
     "to 0.8) (at this point of the sweep, sweep.workload.classes[0].fraction = 0.3)"),
])
def test_an_experiments_values_are_refused_in_the_projects_words(change, text):
    import copy

    import schedlab
    from schedlab import experiment

    d = {"experiment": {"name": "x"}, "workload": {"load": 0.5, "jobs": 100},
         "policy": [{"name": "fcfs"}]}
    d = copy.deepcopy(d)
    change(d)
    with pytest.raises(schedlab.SpecError) as e:
        experiment.load(d)
    assert str(e.value).startswith(text), str(e.value)


def test_a_key_a_trace_or_clients_replace_is_named_with_its_value(tmp_path):
    # "load = (given)" before: the value the user gave was not shown.
    (tmp_path / "t.csv").write_text("arrival,size\n1,2\n")
    for args, text in ((["--trace", "t.csv", "--load", "0.5"], "load = 0.5: expected nothing: "
                        "trace replaces arrival, load and clients"),
                       (["--trace", "t.csv", "--clients", "3"], "clients = 3: expected nothing"),
                       (["--clients", "3", "--arrival", "exp:2"], "arrival = exp:2: expected "
                        "nothing: a closed workload (clients) has no arrival rate")):
        assert text in _refused(["sim", *args], tmp_path, args[-2].lstrip("-")), args


def test_a_negative_count_is_told_the_rule_that_0_would_meet(tmp_path):
    # "jobs = -200: expected a whole number >= 0", then at 0 "... >= 1": two messages for one
    # rule. The simulator's own rule is given where it refuses 0 too; a count that may be 0
    # (seed) keeps ">= 0". The same from the command line, Python, and the core itself.
    import schedlab
    from schedlab import _core

    assert "jobs = -200: expected a whole number >= 1" in _refused(
        ["sim", "--jobs", "-200"], tmp_path, "jobs")
    assert "clients = -2: expected a whole number from 1 to 10000000" in _refused(
        ["sim", "--clients", "-2", "--jobs", "10"], tmp_path, "clients")
    for kwargs, text in (({"jobs": -3}, "jobs = -3: expected a whole number >= 1"),
                         ({"bursts": -1}, "bursts = -1: expected a whole number >= 1"),
                         ({"seed": -1}, "seed = -1: expected a whole number >= 0"),
                         # Counts the core judges only beside other keys are asked so too.
                         ({"batches": -1}, "batches = -1: expected a whole number >= 2: the "
                          "mean's interval is Student's t over the batch means"),
                         ({"precision": 0.1, "jobs": None, "max_jobs": -2},
                          "max_jobs = -2: expected a whole number >= 1")):
        with pytest.raises(schedlab.SpecError) as e:
            schedlab.simulate("fcfs", load=0.5, **{"jobs": 10, **kwargs})
        assert str(e.value) == text
    # A class may have no clients: its rule stays ">= 0", not the whole workload's ">= 1".
    with pytest.raises(schedlab.SpecError) as e:
        schedlab.simulate("fcfs", jobs=10, classes=[{"clients": -1, "think": "exp:1"},
                                                    {"clients": 2, "think": "exp:1"}])
    assert str(e.value) == "classes[0].clients = -1: expected a whole number >= 0"
    schedlab.simulate("fcfs", jobs=10, classes=[{"clients": 0, "think": "exp:1"},
                                                {"clients": 2, "think": "exp:1"}])
    # A class's count the core refuses at 0 too gets the core's rule, as the whole
    # workload's does.
    with pytest.raises(schedlab.SpecError) as e:
        schedlab.simulate("fcfs", load=0.5, jobs=10, classes=[{"name": "a", "bursts": -1},
                                                              {"name": "b"}])
    assert str(e.value) == "classes[0].bursts = -1: expected a whole number >= 1"
    for spec, text in (({"jobs": -3}, "jobs = -3: expected a whole number >= 1"),
                       ({"jobs": 10, "buffer": -4}, "buffer = -4: expected a number of jobs "
                        ">= 1"),
                       ({"jobs": 10, "seed": -1}, "seed = -1: expected a whole number >= 0")):
        with pytest.raises(schedlab.SpecError) as e:
            _core.validate({"policy": "fcfs", "load": 0.5, **spec})
        assert str(e.value) == text
    # The server's load generator reads through the same door.
    with pytest.raises(schedlab.SpecError) as e:
        _core.load_validate({"url": "http://127.0.0.1:1/", "threads": -1})
    assert str(e.value).startswith("threads = -1: expected"), str(e.value)


IDLE_HEAD = ('[experiment]\nname = "e"\nworld = "sim"\n[workload]\nload = 0.5\njobs = 100\n'
             '[[policy]]\nname = "fcfs"\n')


@pytest.mark.parametrize("tail, key, text", [
    # A server table in a simulator's file, whose workload the server cannot run (no cost
    # model): its jobs are judged by the simulator, which reads jobs too.
    ("[worlds.server]\njobs = -7\n", "worlds.server.jobs", "expected a whole number >= 1"),
    ("[worlds.os]\nwarmup = -1\n", "worlds.os.warmup", "expected a whole number >= 0, or auto"),
    ('[worlds.os]\ntime = "long"\n', "worlds.os.time", "expected a number"),
    # Keys every world of the file drops are judged by the world that reads them.
    ('[machine]\ncost = "lots"\n', "machine.cost", "'lots' does not start with a number"),
    ('[machine]\nprofile = "missing.toml"\n', "machine.profile", "there is no such file"),
    # ... even where the rest of the file is no run of that world (a simulator's open
    # arrivals and no cost model, which the server and the os world cannot run).
    ('[machine]\ncost_mode = "bogus"\n', "machine.cost_mode", "expected sleep or spin"),
    ("[machine]\nmax_connections = -1\n", "machine.max_connections",
     "expected a whole number >= 1"),
    ('[machine]\nenforce = "bogus"\n', "machine.enforce", "expected stop or fifo"),
    ("[worlds.server]\nthreads = -1\n", "worlds.server.threads",
     "expected a whole number from 1 to 256"),
])
def test_what_a_file_writes_for_a_world_it_does_not_run_is_checked(tmp_path, tail, key, text):
    # These ran (or waited for the day the world was switched on) before: nothing checked a
    # table of a world left out of experiment.world, nor a key only such a world reads.
    (tmp_path / "e.toml").write_text(IDLE_HEAD + tail)
    assert text in _refused(["run", "e.toml", "--out", "out"], tmp_path, key)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.toml"]


def test_a_value_of_no_form_the_core_takes_is_told_the_forms():
    # serde said "data did not match any variant of untagged enum WarmupSpec" for a value
    # of a key with several forms, given to the core as a dict (serve --config, _core).
    from schedlab import _core

    sim = {"policy": "rr", "load": 0.5, "jobs": 10}
    for check, spec, text in (
            (_core.validate, {**sim, "warmup": -1},
             "warmup = -1: expected a whole number >= 0, or auto"),
            (_core.validate, {**sim, "warmup": "x"},
             "warmup = x: expected a whole number >= 0, or auto"),
            (_core.validate, {**sim, "params": {"quantum": "5"}},
             'params.quantum = "5": expected a number, a list of numbers or true/false'),
            (_core.validate, {**sim, "cpus": 2, "ideal": -1},
             "ideal = -1: expected a CPU, a list of CPUs, or a word (start, round-robin, ...)"),
            (_core.load_validate, {"url": "http://127.0.0.1:1/", "burst": 5},
             "burst = 5: expected a burst as text (COUNTx/PATH@MS, ...) or a list of groups")):
        with pytest.raises(_core.SpecError) as e:
            check(spec)
        assert str(e.value) == text


@pytest.mark.parametrize("text", [
    # A world table's key valid only beside another key of the file (max_time beside its
    # precision), where the rest of the file is no run of that world (I/O bursts; open
    # arrivals in the os world).
    '[experiment]\nname = "b"\nworld = "sim"\nprecision = 0.05\nmax_jobs = 100_000\n'
    '[workload]\nclients = 4\nthink = "exp:30"\nsize = "exp:1"\nbursts = 2\nio = "det:0.5"\n'
    '[[policy]]\nname = "fcfs"\n[worlds.server]\nmax_time = 60_000\n',
    '[experiment]\nname = "d"\nworld = "sim"\nprecision = 0.05\nmax_jobs = 100_000\n'
    '[workload]\narrival = "exp:2"\nsize = "exp:1"\n[[policy]]\nname = "fcfs"\n'
    "[worlds.os]\nmax_time = 30_000\n",
    # The runner's own keys (which runs keep their schedules) are no world's to judge.
    '[experiment]\nname = "g"\nworld = "server"\nkeep_schedule = "first"\n[workload]\n'
    'clients = 4\nthink = "exp:30"\nbytes = "exp:4096"\njobs = 1000\n[[policy]]\nname = "fcfs"\n',
])
def test_keys_for_a_world_not_run_are_judged_beside_the_files_own(tmp_path, monkeypatch, text):
    # These valid files were refused: the keys were judged beside a stand-in workload only
    # ("max_time with precision only"), and the runner's keep_schedule by the simulator.
    from schedlab import experiment

    (tmp_path / "e.toml").write_text(text)
    monkeypatch.chdir(tmp_path)
    assert len(experiment.load(tmp_path / "e.toml").runs) >= 1


def test_a_boolean_key_takes_true_or_false_only(tmp_path):
    # The core read a boolean as any value's truth: keep_alive = "false" in a server table
    # ran with keep-alive on, keep_jobs = "false" kept the jobs.
    from schedlab import _core

    (tmp_path / "e.toml").write_text(
        '[experiment]\nname = "e"\nworld = "server"\n[workload]\nload = 0.5\njobs = 100\n'
        '[machine]\ncost = "1ms"\n[[policy]]\nname = "fcfs"\n[worlds.server]\n'
        'keep_alive = "false"\n')
    assert 'worlds.server.keep_alive = "false": expected true or false' in _refused(
        ["run", "e.toml", "--out", "out"], tmp_path, "worlds.server.keep_alive")
    for check, spec, text in (
            (_core.load_validate, {"url": "http://127.0.0.1:1/", "clients": 2, "jobs": 10,
                                   "keep_alive": "x"}, 'keep_alive = "x"'),
            (_core.validate, {"policy": "fcfs", "load": 0.5, "jobs": 10,
                              "keep_jobs": "false"}, 'keep_jobs = "false"'),
            (_core.validate, {"policy": "fcfs", "load": 0.5, "jobs": 10,
                              "classes": [{"final_io": 1}, {}]}, "classes[0].final_io = 1"),
            (_core.serve_validate, {"root": str(tmp_path), "announce": "yes"},
             'announce = "yes"')):
        with pytest.raises(_core.SpecError) as e:
            check(spec)
        assert str(e.value) == f"{text}: expected true or false"
    _core.load_validate({"url": "http://127.0.0.1:1/", "clients": 2, "jobs": 10,
                         "keep_alive": False, "progress": None})
    # ... and true is not the number 1 (serve --config {"cpus": true} started one worker).
    for check, spec, text in (
            (_core.validate, {"policy": "fcfs", "load": True, "jobs": 10},
             "load = true: expected a number, not true or false"),
            (_core.validate, {"policy": "fcfs", "load": 0.5, "jobs": 10,
                              "classes": [{"bursts": True}, {}]},
             "classes[0].bursts = true: expected a whole number, not true or false"),
            (_core.serve_validate, {"root": str(tmp_path), "cpus": True},
             "cpus = true: expected a whole number, not true or false")):
        with pytest.raises(_core.SpecError) as e:
            check(spec)
        assert str(e.value) == text
    (tmp_path / "serve.json").write_text('{"root": ".", "port": true}')
    assert "port = True: expected a TCP port" in _refused(
        ["serve", "--config", "serve.json"], tmp_path, "port")


def test_a_world_left_out_keeps_its_table_and_the_file_runs(monkeypatch):
    # The fileserver baseline with only the simulator: its server table and cost model are
    # valid for the server, so they are checked and the file loads; a bad one is refused.
    import copy

    from schedlab import experiment

    folder = ROOT / "experiments/fileserver"
    monkeypatch.chdir(folder)  # a dict's files are found from the working directory
    raw = experiment.read_toml(folder / "baseline.toml")
    raw["experiment"]["world"] = ["sim"]
    exp = experiment.load(raw)
    assert exp.worlds == ["sim"] and len(exp.runs) == 4 * 10
    for section, key, value, text in (
            ("worlds", "server", {"time": -5}, "worlds.server.time = -5: expected"),
            ("machine", "cost", "0.25ms+", "machine.cost = 0.25ms+: expected a cost")):
        bad = copy.deepcopy(raw)
        bad[section][key] = value
        with pytest.raises(experiment.SpecError) as e:
            experiment.load(bad)
        assert str(e.value).startswith(text), str(e.value)


def test_every_file_output_makes_its_missing_directories_and_only_then(tmp_path):
    # One rule for every output (report --html made its directory, sim --jobs-out refused
    # one that did not exist): a missing directory is made with the file, once the run has
    # something to write; an ancestor that is a file, or a directory that takes no new ones,
    # is refused before any work, and then nothing is made.
    run = ["sim", "--load", "0.5", "--jobs", "300"]
    out = subprocess.run([SCHEDLAB, *run, "--jobs-out", "a/b/jobs.csv", "--trace-out",
                          "c/t.json"], capture_output=True, text=True, timeout=60,
                         env=cli_env(), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert len((tmp_path / "a/b/jobs.csv").read_text().splitlines()) == 301
    assert (tmp_path / "c/t.json").stat().st_size > 0
    (tmp_path / "f").write_text("a file")
    for args, key, why in (([*run, "--jobs-out", "f/x/jobs.csv"], "jobs_out",
                            "a file in a directory (f is a file)"),
                           ([*run, "--trace-out", "/proc/n/t.json"], "trace_out",
                            "a file in a directory that can be made"),
                           (["serve", "--root", ".", "--port", "0", "--stats", "f/s.json"],
                            "stats", "a file in a directory (f is a file)")):
        assert why in _refused(args, tmp_path, key), args
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "c", "f"]
    # A link to nothing is there: no directory can be made in its place (this ran the whole
    # simulation, then failed on mkdir with a traceback).
    (tmp_path / "f").unlink()
    os.symlink("nowhere", tmp_path / "gone")
    assert "a file in a directory (gone is a link to nothing)" in _refused(
        [*run, "--jobs-out", "gone/x/jobs.csv"], tmp_path, "jobs_out")
    # A server refused (a bad key; a port in use) makes no directory for its outputs.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        for args, key in ((["--cpus", "0"], "cpus"), (["--port", port], "port")):
            _refused(["serve", "--root", ".", "--port", "0", "--stats", "new/s.json",
                      "--server-log", "new/l/log.csv", *args], tmp_path, key)
    # The server world checks the logs it keeps where a file asks, before any run.
    (tmp_path / "f").write_text("a file")
    from schedlab import SpecError, worlds

    for key in ("hdr_log", "server_log"):
        with pytest.raises(SpecError) as e:
            worlds.validator("server")(policy="fcfs", clients=2, jobs=10,
                                       **{key: str(tmp_path / "f/x.log")})
        assert str(e.value).startswith(f"{key} = {tmp_path / 'f/x.log'}: expected a file in "
                                       "a directory"), str(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "c", "f", "gone"]


def test_a_failed_server_world_run_removes_the_directories_it_made(tmp_path, monkeypatch):
    # The server world makes the directories of `server_log` and `hdr_log` before it serves;
    # a run that fails (here its server, stopped by hand) takes away those it made, and
    # only those: a directory that was there stays.
    from schedlab import server
    from schedlab.worlds import server as server_world

    def fails(*_args, **_kwargs):
        raise RuntimeError("the server stopped")

    monkeypatch.setattr(server, "_serve_once", fails)
    (tmp_path / "kept").mkdir()
    spec = {"policy": "fcfs", "clients": 2, "jobs": 10, "bytes": "det:1000",
            "server_log": str(tmp_path / "new" / "logs" / "requests.csv"),
            "hdr_log": str(tmp_path / "kept" / "deeper" / "h.log")}
    with pytest.raises(RuntimeError, match="the server stopped"):
        server_world.run(spec)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"]
    assert list((tmp_path / "kept").iterdir()) == []


def test_a_policy_parameter_given_as_text_is_refused_outside_the_command_line(tmp_path):
    # quantum = "10" ran as 10 from a file and from Python, compensation = "yes" as true,
    # while load = "0.5" was refused: text is read as a value where it was typed only.
    import schedlab
    from schedlab import experiment

    for kwargs, text in (({"quantum": "10"}, 'quantum = "10": expected a number, a list of '
                          "numbers or true/false, not text"),
                         ({"params": {"quantum": "10"}}, 'quantum = "10": expected'),
                         ({"policy": "lottery", "compensation": "yes"},
                          'compensation = "yes": expected')):
        with pytest.raises(schedlab.SpecError) as e:
            schedlab.simulate(**{"policy": "rr", "load": 0.5, "jobs": 10, **kwargs})
        assert str(e.value).startswith(text), str(e.value)
    # Nor does the same value as a number beside it let the text through (it did, in
    # params first), in either order.
    for params, quantum in (({"quantum": "7"}, 7), ({"quantum": 7}, "7")):
        with pytest.raises(schedlab.SpecError) as e:
            schedlab.simulate("rr", load=0.5, jobs=10, params=params, quantum=quantum)
        assert str(e.value).startswith('quantum = "7": expected a number, a list of numbers '
                                       "or true/false, not text"), str(e.value)
    d = {"experiment": {"name": "x"}, "workload": {"load": 0.5, "jobs": 100},
         "policy": [{"name": "fcfs"}, {"name": "rr", "quantum": "10"}]}
    with pytest.raises(schedlab.SpecError) as e:
        experiment.load(d)
    assert str(e.value).startswith('policy[1].quantum = "10": expected a number'), str(e.value)
    # Typed on the command line, the same text is a number (and a word a bool).
    out = subprocess.run([SCHEDLAB, "sim", "--policy", "lottery", "--compensation", "yes",
                          "--load", "0.5", "--jobs", "100", "--json"], capture_output=True,
                         text=True, timeout=60, env=cli_env(), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    import json

    # A typed word that is none of a parameter's forms is told what that parameter takes, as
    # the policies declare it (it was "a number, a list of numbers or true/false" for all).
    for flag, typed, allowed in (("--quantum", "abc", "a number > 0"),
                                 ("--preemptive", "maybe", "true or false"),
                                 ("--quanta", "a,b", "a list of numbers > 0")):
        policy = {"--quantum": "rr", "--preemptive": "priority", "--quanta": "mlfq"}[flag]
        out = subprocess.run([SCHEDLAB, "sim", "--policy", policy, flag, typed, "--load", "0.5",
                              "--jobs", "100"], capture_output=True, text=True, timeout=60,
                             env=cli_env(), cwd=tmp_path)
        assert out.returncode == 2 and out.stderr.strip().splitlines() == [
            f'schedlab: error: {flag[2:]} = "{typed}": expected {allowed}'], out.stderr
    number = schedlab.simulate("rr", quantum=10, load=0.5, jobs=100).summary["response_mean"]
    for policy in (["--policy", "rr:quantum=10"], ["--policy", "rr", "--quantum", "10"]):
        out = subprocess.run([SCHEDLAB, "sim", *policy, "--load", "0.5", "--jobs", "100",
                              "--json"], capture_output=True, text=True, timeout=60,
                             env=cli_env(), cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["response_mean"] == number


def test_pythons_results_trace_and_report_refuse_what_the_command_line_refuses(tmp_path,
                                                                               monkeypatch):
    # Found by an audit of the commands other than sim and run: raw FileNotFoundError and
    # OSError from write_trace (and y.txt written where --trace-out refuses it), empty
    # frames and None for a misspelt metric or table, report --html "" and log_x = "yes"
    # taken silently.
    import schedlab
    from schedlab import experiment, trace
    from schedlab.report import make_report

    monkeypatch.chdir(tmp_path)
    r = schedlab.simulate("rr", load=0.5, jobs=20, keep_schedule=True)
    for result, path, text in (
            (r, "/proc/x/y.json", "path = /proc/x/y.json: expected a file in a directory"),
            (r, "", 'path = "": expected a file name ending in .json'),
            (r, "y.txt", "path = y.txt: expected a file name ending in .json"),
            (None, "a.json", "result = NoneType: expected a Result or Replications")):
        with pytest.raises(schedlab.SpecError) as e:
            trace.write_trace(result, path)
        assert str(e.value).startswith(text), str(e.value)
    d = {"experiment": {"name": "x", "keep_jobs": True},
         "workload": {"load": 0.5, "jobs": 200}, "policy": [{"name": "fcfs"}]}
    schedlab.run(d, out="res")
    res = schedlab.load_results("res")
    run = res.summaries["run"].iloc[0]
    assert len(res.run_table(run, "jobs")) == 200 and res.run_table(run, "schedule") is None
    assert res.metric("response_mean").attrs["unit"] == "ms"
    assert res.metric("jain_share").empty  # a summary key these runs have not: no rows
    for call, text in ((lambda: res.metric("bogus"), "metric = bogus: expected a metric of "
                        "this results directory: arrival_rate, "),
                       (lambda: res.run_table("nope", "jobs"),
                        "run = nope: expected a run of this results directory"),
                       (lambda: res.run_table(run, "bogus"), "kind = bogus: expected a table "
                        "a run keeps: jobs, schedule, load_series, migrations"),
                       (lambda: make_report("res", html=""),
                        'html = "": expected a file name ending in .html')):
        with pytest.raises(schedlab.SpecError) as e:
            call()
        assert str(e.value).startswith(text), str(e.value)
    assert not (tmp_path / "res/report").exists()
    for key, value in (("log_x", "yes"), ("theory", "maybe")):
        with pytest.raises(schedlab.SpecError) as e:
            experiment.load({**d, "report": {key: value}})
        assert str(e.value) == f"report.{key} = {value}: expected true or false"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["res"]
    # The os world ran --cpus 0,0 on one CPU (calibrate os refused it).
    from schedlab import worlds

    with pytest.raises(schedlab.SpecError) as e:
        worlds.validator("os")(policy="fcfs", clients=1, jobs=5, size="det:1", cpus="0,0")
    assert str(e.value).startswith("cpus = 0,0: expected each CPU once"), str(e.value)
    # schedlab theory said "no closed form" with exit 1 for a value sim refuses with 2.
    assert "levels = 0: expected a whole number >= 1" in _refused(
        ["theory", "--policy", "mlfq", "--load", "0.5", "--size", "exp:1", "--levels", "0"],
        tmp_path, "levels")


def test_a_value_the_sweep_replaces_is_checked_all_the_same():
    # `quantum = -3` under a policy whose quantum the sweep sets at every point was never run,
    # and the file ran (docs/tutorial.md: everything in the file is checked before anything
    # runs). Checked as if that sweep key were not there; the same file without it runs.
    import schedlab
    from schedlab import experiment

    base = {"experiment": {"name": "x"}, "workload": {"load": 0.5, "jobs": 100},
            "policy": [{"name": "fcfs"}, {"name": "rr", "quantum": -3}],
            "sweep": {"policy.quantum": [1, 2]}}
    cases = [
        (base, "policy[1].quantum = -3: expected a number > 0"),
        ({**base, "policy": [{"name": "rr", "quantum": 2}],
          "workload": {"load": 0.5, "jobs": -5}, "sweep": {"workload.jobs": [100, 200]}},
         "workload.jobs = -5: expected a whole number >= 1"),
        ({**base, "policy": [{"name": "rr", "quantum": 2}], "machine": {"cpus": 0},
          "sweep": {"machine.cpus": [1, 2]}, "report": {"x": "machine.cpus"}},
         "machine.cpus = 0: expected a whole number from 1"),
    ]
    for d, message in cases:
        with pytest.raises(schedlab.SpecError) as e:
            experiment.load(d)
        assert str(e.value).startswith(message), str(e.value)
    fine = experiment.load({**base, "policy": [{"name": "fcfs"}, {"name": "rr", "quantum": 3}]})
    assert [r.spec["params"].get("quantum") for r in fine.runs if r.spec["policy"] == "rr"] \
        == [1, 2]


def test_what_a_run_cannot_measure_is_said_and_what_a_user_gave_is_not_dropped(tmp_path):
    import signal
    import time

    import schedlab
    from schedlab import summary_rows

    # Switching costs that saturate an open system are only known from the schedule: a
    # warning (the mean grows with the run), where the load alone is fine.
    r = schedlab.simulate("rr", cpus=2, context_switch=0.5, load=0.7, jobs=5_000)
    assert r.summary["utilization"] >= 0.999
    assert sum("with context_switch the open system is saturated" in n for n in r.notes) == 1
    assert summary_rows.saturation_warning(
        schedlab.simulate("rr", cpus=2, context_switch=0.001, load=0.7, jobs=5_000).summary,
        {"context_switch": 0.001}) is None
    # A profile from Python: refused beside a key it sets, as on the command line.
    profile = str(ROOT / "docs" / "server-profile.toml")
    with pytest.raises(schedlab.SpecError, match=r"^start_cost = 50: expected nothing beside "
                       r"profile, which sets start_cost to what it measured"):
        schedlab.simulate("rr", quantum=1, load=0.5, jobs=500, size="det:5", profile=profile,
                          start_cost=50)
    # In an experiment file the key is the ideal model's too: the calibrated world takes the
    # profile's value and says so; the sim world keeps the file's.
    base = {"experiment": {"name": "cs", "world": ["sim", "calibrated"], "seed": 3},
            "workload": {"load": 0.5, "size": "det:5", "jobs": 2_000},
            "machine": {"profile": profile},
            "policy": [{"name": "rr", "quantum": 1}]}
    with_key = {**base, "machine": {**base["machine"], "context_switch": 5}}
    a = schedlab.run(base, out=tmp_path / "a").summaries.set_index("world")
    b = schedlab.run(with_key, out=tmp_path / "b")
    notes = " ".join(b.manifest["notes"]["calibrated"])
    assert "context_switch = 5 (given) is the profile's" in notes
    b = b.summaries.set_index("world")
    assert b.loc["calibrated", "response_mean"] == a.loc["calibrated", "response_mean"]
    assert b.loc["sim", "response_mean"] > 2 * a.loc["sim", "response_mean"]
    # A results directory without its stats table (a sweep killed while writing it): one
    # line, exit 2, not a traceback.
    (tmp_path / "a" / "stats.parquet").unlink()
    out = subprocess.run([SCHEDLAB, "report", str(tmp_path / "a")], capture_output=True,
                         text=True, timeout=60, env=cli_env())
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "stats.parquet is missing or empty; rerun `schedlab run`" in out.stderr
    # theory's probabilities are `quantiles` in Python: `quantile` is told so, not that the
    # policy has no such parameter.
    with pytest.raises(schedlab.SpecError, match="quantile = 0.99: expected quantiles="):
        schedlab.theory("fcfs", "exp:1", load=0.9, quantile=0.99)
    # Ctrl-C stops `schedlab sim` at once: the core runs outside Python's lock, and the run
    # below takes minutes.
    run = subprocess.Popen([SCHEDLAB, "sim", "--policy", "rr", "--quantum", "0.01", "--load",
                            "0.9", "--jobs", "100000000"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=cli_env())
    time.sleep(2.0)  # most likely past the imports, into the run
    run.send_signal(signal.SIGINT)
    # Killed by the signal in the run (130 from the "interrupted" line if it came earlier);
    # ignored, the run would go on for minutes.
    assert run.wait(timeout=30) in (-signal.SIGINT, 130)
    assert run.stdout.read() == b""


def test_with_a_dispatch_delay_littles_law_counts_jobs_at_the_machine():
    # A job reaches the machine d after it is sent; its response counts d; the jobs present
    # are those at the machine: L = lambda (W - d) (docs/simulator.md).
    import schedlab

    s = schedlab.simulate("fcfs", load=0.5, size="exp:1", dispatch_delay=0.2, jobs=200_000,
                          seed=3).summary
    assert s["mean_in_system"] == pytest.approx(
        s["arrival_rate"] * (s["response_mean"] - 0.2), rel=0.01)
    assert abs(s["mean_in_system"] - s["arrival_rate"] * s["response_mean"]) > 0.05


def test_os_world_refusals_the_audit_found_name_the_key():
    import schedlab
    from schedlab import osrun

    cases = [
        # Pinned outside the run's CPUs: the jobs ran on CPU 1 while the utilisation, the load
        # samples and the noise gate described CPU 0.
        ({"clients": 2, "size": "det:100", "jobs": 2, "cpus": [0], "affinity": [1]},
         "affinity = [1]: expected CPUs from [0]"),
        ({"clients": 2, "size": "det:100", "jobs": 2, "cpus": [0], "start_pinned": [1],
          "release_after": 5}, "start_pinned = [1]: expected CPUs from [0]"),
        # An AttributeError before.
        ({"policy": "rr", "params": [1], "clients": 1, "jobs": 1},
         "params = [1]: expected a table of policy parameters"),
        ({"params": "x", "clients": 1, "jobs": 1},  # under the kernel: a ValueError before
         "params = x: expected a table of policy parameters"),
        # A serde message that named no key before ("1.18e+27 = (given): ... expected u64").
        ({"seed": 2**70, "clients": 1, "jobs": 1},
         "seed = 1180591620717411303424: expected a smaller whole number (it does not fit)"),
        # Named by the coordinator's plan (tasks[0].rtprio) before.
        ({"clients": 1, "jobs": 1, "sched": "fifo", "rtprio": 99},
         "rtprio = 99: expected 1..98 for fifo and rr (99 is the watchdog's)"),
        ({"jobs": 1, "classes": [{"sched": "fifo", "rtprio": 150, "clients": 1}]},
         "classes[0].rtprio = 150: expected 1..98 for fifo and rr"),
    ]
    for spec, text in cases:
        with pytest.raises(schedlab.SpecError) as e:
            osrun.validate(spec)
        assert str(e.value).startswith(text), (spec, str(e.value))
    # A large seed is kept whole (it went through a float: 2^60 + 1 lost its 1), and the
    # processes' seeds derived from it stay 64-bit.
    seed = 2**60 + 1
    plan = osrun.validate({"seed": seed, "clients": 2, "jobs": 2})
    assert [t["seed"] for t in plan["tasks"]] == [(seed * 1_000_003 + t) % 2**64
                                                  for t in (0, 1)]


def test_a_kernel_policys_rtprio_that_is_no_number_is_refused_not_a_traceback(tmp_path):
    # The simulator's translation of the kernel policy computed 99 - "high": a TypeError.
    import schedlab

    exp = {"experiment": {"name": "x", "world": ["os"]},
           "workload": {"clients": 1, "jobs": 2, "size": "det:1"},
           "policy": [{"name": "kernel", "sched": "fifo", "rtprio": "high"}]}
    with pytest.raises(schedlab.SpecError) as e:
        schedlab.run(exp, out=tmp_path / "out")
    assert str(e.value) == ('policy[0].rtprio = "high": expected a real-time priority: '
                            "1..98 for fifo and rr (99 is the watchdog's)")
    assert not (tmp_path / "out").exists()
    # Out of range, the simulator's model of it was priority 99 - 150 = -51 without a word.
    with pytest.raises(schedlab.SpecError) as e:
        schedlab.simulate(policy="kernel", sched="fifo", rtprio=150, clients=1, jobs=1)
    assert str(e.value).startswith("rtprio = 150: expected a real-time priority: 1..98")


def test_the_os_worlds_io_names_its_forms_and_what_a_distribution_alone_is():
    # `schedlab os --io 3` was refused as "io = det:3.0: expected dsync:BYTES or sleep:DIST":
    # a distribution alone is the simulator's wait between bursts (an experiment file
    # translates it to bursts - 1 sleeps), which a direct run must not read as a sleep after
    # every burst. Refused, saying so; the os world's own forms are taken.
    import schedlab
    from schedlab import osrun

    base = {"clients": 1, "jobs": 1, "size": "det:1", "bursts": 2}
    assert osrun.validate({**base, "io": "sleep:det:4"})["tasks"][0]["io"] == {"sleep": "det:4"}
    assert osrun.validate({**base, "io": "dsync:4096"})["tasks"][0]["io"] == {"dsync": 4096}
    for given, text in ((3, "io = 3: expected dsync:BYTES or sleep:DIST after each burst"),
                        ("exp:2", "io = exp:2: expected dsync:BYTES or sleep:DIST after each "
                                  "burst (e.g. sleep:det:4); a distribution alone is the "
                                  "simulator's wait between bursts, which an experiment file "
                                  "translates"),
                        ("sleep:", "io = sleep:: expected sleep:DIST with DIST name:params")):
        with pytest.raises(schedlab.SpecError) as e:
            osrun.validate({**base, "io": given})
        assert str(e.value).startswith(text), str(e.value)


@pytest.mark.parametrize("world, machine", [("server", {"cost": "0ms+0.1ms/KB"}), ("os", {})])
def test_a_policy_parameter_is_named_where_the_file_wrote_it_in_every_world(world, machine):
    # The server's and the os world's translations checked the policy's parameters and said
    # "quantum = -1", where the simulator's said policy[1].quantum.
    import schedlab
    from schedlab import experiment

    d = {"experiment": {"name": "x", "world": [world]},
         "workload": {"clients": 2, "jobs": 10, "size": "det:1"}, "machine": machine,
         "policy": [{"name": "fcfs"}, {"name": "rr", "quantum": -1}]}
    with pytest.raises(schedlab.SpecError) as e:
        experiment.load(d)
    assert str(e.value) == "policy[1].quantum = -1: expected a number > 0"


def test_an_infinite_quantum_is_refused_as_not_finite_in_every_entry_point(tmp_path):
    # `quantum = inf` is "> 0" by its sign: "expected a number > 0" beside it contradicted
    # itself in the file and in Python, where the CLI already said "finite".
    import schedlab
    from schedlab import experiment

    d = {"experiment": {"name": "x"}, "workload": {"jobs": 10},
         "policy": [{"name": "rr", "quantum": float("inf")}]}
    with pytest.raises(schedlab.SpecError) as e:
        experiment.load(d)
    assert str(e.value) == "policy[0].quantum = inf: expected a finite number > 0"
    with pytest.raises(schedlab.SpecError) as e:
        schedlab.simulate(policy="mlfq", quanta=[1, float("nan")], jobs=10)
    assert "a list of finite numbers > 0" in str(e.value), str(e.value)
    f = tmp_path / "x.toml"
    f.write_text('[experiment]\nname = "x"\n[workload]\njobs = 10\n'
                 '[[policy]]\nname = "rr"\nquantum = inf\n')
    r = subprocess.run([SCHEDLAB, "run", str(f), "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=30, env=cli_env())
    assert r.returncode == 2
    assert "policy[0].quantum = inf: expected a finite number > 0" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()
    r = subprocess.run([SCHEDLAB, "sim", "--policy", "rr", "--quantum", "inf", "--jobs", "10"],
                       capture_output=True, text=True, timeout=30, env=cli_env())
    assert r.returncode == 2
    assert "quantum = inf: expected a finite number > 0" in r.stderr, r.stderr


def test_a_timeslice_is_refused_by_a_policy_without_a_turn_to_replace():
    # `timeslice` replaces a quantum or slice: FCFS with one became round robin under its own
    # name (0 switches to 96,738 in 20,000 jobs). The fluid policies say they share the CPU.
    import schedlab

    turns = ["rr", "fb", "priority", "lottery", "stride", "mlfq", "cfs", "eevdf"]
    common = {"clients": 3, "think": "det:0", "size": "det:20", "jobs": 30, "timeslice": 5}
    for p in schedlab.policies():
        name = p["name"]
        extra = {"quantum": 5} if name == "fb" else {}
        if name in turns:
            r = schedlab.simulate(name, **common, **extra)
            assert r.summary["jobs"] == 30 and r.summary["context_switches"] > 30, name
            continue
        with pytest.raises(schedlab.SpecError) as e:
            schedlab.simulate(name, **common)
        if name in ("ps", "gps", "fb"):
            assert str(e.value) == (f"timeslice = 5: expected a policy that runs jobs in turns; "
                                    f"{name} shares the CPU continuously"), name
        else:
            assert str(e.value) == ("timeslice = 5: expected a policy that runs jobs in turns "
                                    f"({', '.join(turns)}); {name} has no turn to replace")


def test_a_report_refuses_a_file_where_its_figures_go_and_a_directory_where_its_page_goes(
        tmp_path):
    import schedlab

    res = schedlab.run({"experiment": {"name": "tiny"}, "workload": {"load": 0.5, "jobs": 500},
                        "policy": [{"name": "fcfs"}]}, out=tmp_path / "r", progress=False)
    (res.dir / "report").write_text("a file where the figures go")
    out = subprocess.run([SCHEDLAB, "report", str(res.dir)], capture_output=True, text=True,
                         env=cli_env(), timeout=120)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "directory = " in out.stderr and "report is a file" in out.stderr
    (res.dir / "report").unlink()
    (res.dir / "report.html").mkdir()
    with pytest.raises(schedlab.SpecError, match=r"html = .*report\.html.: expected a file to "
                       "write the report's page to \\(a directory is there\\)"):
        schedlab.report(res.dir)
    # Refused before any figure was drawn.
    assert not (res.dir / "report").exists()


def test_python_entry_points_refuse_what_the_command_line_does(tmp_path):
    import schedlab

    for kwargs in ({"quick": "yes"}, {"quick": 1}, {"progress": "no"}):
        with pytest.raises(schedlab.SpecError, match=f"{next(iter(kwargs))} = .*: expected "
                           "true or false"):
            schedlab.run({"experiment": {"name": "x"}}, out=tmp_path / "x", **kwargs)
        assert not (tmp_path / "x").exists()
    # A bare number is a constant size here as in simulate (it was a TypeError).
    assert schedlab.theory("fcfs", size=1, load=0.5)["mean"] == pytest.approx(1.5)
    with pytest.raises(schedlab.SpecError, match=r"^arrival = exp:0.5 \(load 2\): expected a "
                       "load < 1"):
        schedlab.theory("fcfs", size="exp:1", arrival="exp:0.5")
    # The policies a flat call takes, the kernel's among them.
    with pytest.raises(schedlab.SpecError, match="expected one of fcfs, .*, edf, or kernel"):
        schedlab.simulate("nosuch", jobs=1)


def test_a_run_whose_jobs_did_not_all_finish_says_so_in_its_text():
    out = subprocess.run([SCHEDLAB, "sim", "--jobs", "100", "--load", "0.5", "--start-cost",
                          "1e308"], capture_output=True, text=True, env=cli_env(), timeout=60)
    assert out.returncode == 0, out.stderr
    assert "WARNING: 99 job(s) did not finish by the end of the run" in \
        " ".join(out.stdout.split()), out.stdout
    ok = subprocess.run([SCHEDLAB, "sim", "--jobs", "100", "--load", "0.5"],
                        capture_output=True, text=True, env=cli_env(), timeout=60)
    assert "did not finish" not in ok.stdout
    # A run of a set length leaves its processes unfinished by design: no warning.
    shares = subprocess.run([SCHEDLAB, "sim", "--policy", "lottery", "--clients", "3", "--size",
                             "det:1e6", "--think", "det:0", "--time", "3000", "--json"],
                            capture_output=True, text=True, env=cli_env(), timeout=60)
    assert json.loads(shares.stdout)["unfinished"] == 3
    table = subprocess.run([SCHEDLAB, "sim", "--policy", "lottery", "--clients", "3", "--size",
                            "det:1e6", "--think", "det:0", "--time", "3000"],
                           capture_output=True, text=True, env=cli_env(), timeout=60)
    assert table.returncode == 0 and "did not finish" not in table.stdout, table.stdout
    # The help's form is what the flag takes: auto as typed (AUTO was refused).
    helped = subprocess.run([SCHEDLAB, "sim", "--help"], capture_output=True, text=True,
                            env=cli_env(), timeout=60)
    assert "--warmup INT|auto" in helped.stdout


@pytest.mark.parametrize(("line", "said"), [
    ("replications = 0", "experiment.replications = 0: expected a whole number >= 1"),
    ("replications = 200000", "experiment.replications = 200000: expected a whole number "
     "<= 100000"),
    ("seed = -1", "experiment.seed = -1: expected a whole number >= 0"),
    ("confidence = 1.5", "experiment.confidence = 1.5: expected a number < 1"),
])
def test_an_experiment_files_bounds_are_said_in_the_projects_words(tmp_path, line, said):
    # pydantic's own words were "expected greater than or equal to 1".
    path = tmp_path / "x.toml"
    path.write_text(f'[experiment]\nname = "x"\n{line}\n[workload]\nload = 0.5\njobs = 100\n'
                    '[[policy]]\nname = "fcfs"\n')
    out = subprocess.run([SCHEDLAB, "run", str(path), "--out", str(tmp_path / "out")],
                         capture_output=True, text=True, env=cli_env(), timeout=60)
    assert out.returncode == 2 and out.stderr.strip() == f"schedlab: error: {said}", out.stderr
    assert not (tmp_path / "out").exists()

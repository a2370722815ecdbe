"""Experiment files: every file in experiments/ runs (--quick) and reports; validation names the
key path and writes nothing; sweeps expand as documented; seeds are common random numbers."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import schedlab
from conftest import ROOT, SCHEDLAB, cli_env, real_param
from schedlab import experiment as ex
from schedlab import profile, stats, sweep, vocabulary, worlds
from schedlab.report import make_report
from schedlab.worlds import os as os_world

EXPERIMENTS = sorted((ROOT / "experiments").glob("*/*.toml"))


def _runs_a_real_world(path: Path) -> bool:
    try:
        return any(sweep.real_world(w) for w in ex.load(path, quick=True).worlds)
    except schedlab.SpecError:
        # A file this machine refuses (a real world's needs unmet, say tracefs): its own test
        # runs it alone and fails with the reason, instead of the module failing to collect.
        return True


EXPERIMENT_PARAMS = [real_param(p, _runs_a_real_world(p), f"{p.parent.name}/{p.name}")
                     for p in EXPERIMENTS]


def schedlab_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([SCHEDLAB, *args], capture_output=True, text=True, timeout=timeout,
                          env=cli_env())


def base(**over) -> dict:
    """A small valid experiment as a dict; `over` replaces whole sections."""
    d = {
        "experiment": {"name": "t", "replications": 2, "seed": 7},
        "workload": {"load": 0.7, "size": "exp:1", "jobs": 2000},
        "policy": [{"name": "fcfs"}, {"name": "rr", "quantum": 0.5, "label": "RR"},
                   {"name": "mlfq", "levels": 2}],
        "sweep": {"workload.load": [0.5, 0.7]},
    }
    d.update(over)
    return d


# ---------------------------------------------------------------------------------------------
# Every study file: run --quick, then report
# ---------------------------------------------------------------------------------------------


def test_every_study_has_an_experiment_and_a_readme():
    folders = sorted({p.parent for p in EXPERIMENTS})
    assert {f.name for f in folders} >= {"rr-ps-fcfs", "convoy", "fileserver"}
    for folder in folders:
        readme = (folder / "README.md").read_text()
        assert "schedlab run" in readme and "studies/" in readme, folder


@pytest.mark.parametrize("path", EXPERIMENT_PARAMS)
def test_experiment_runs_quick_and_reports(path, quick_run):
    out = quick_run(path)
    r = schedlab_cli("report", str(out))
    assert r.returncode == 0, r.stderr
    html = (out / "report.html").read_text()
    assert html.count('<svg class="plot"') >= 2
    exp = ex.load(path, quick=True)
    res = schedlab.load_results(out)
    # One row per world x point x policy x replication (each world has its own count), or a
    # skipped run with its reason. A run that completed jobs has a positive mean response;
    # one that completed none (the share tests: jobs longer than the run) has none, not 0,
    # and its tasks still report their CPU shares.
    expected = sum(len(exp.points) * len(exp.labels) * exp.replications_of(w)
                   for w in exp.worlds)
    assert len(res.summaries) + len(res.skipped) == expected
    assert res.skipped["reason"].str.len().gt(0).all()
    s = res.summaries
    done = s["jobs"] > 0
    assert s.loc[done, "response_mean"].gt(0).all()
    assert s.loc[~done, "response_mean"].isna().all()
    if (~done).any():
        idle = res.tasks[res.tasks["run"].isin(s.loc[~done, "run"])]
        assert len(idle) and idle["share"].gt(0).any()
    assert res.manifest["status"] == "complete" and res.manifest["quick"] is True


# ---------------------------------------------------------------------------------------------
# The os-world files: real processes beside the simulator, from one file each
# ---------------------------------------------------------------------------------------------


def quick_results(quick_run, *parts: str) -> schedlab.Results:
    return schedlab.load_results(quick_run(ROOT.joinpath("experiments", *parts)))


@pytest.mark.real
def test_linux_grid_runs_in_os_and_sim_from_one_file(quick_run):
    res = quick_results(quick_run, "linux-policies", "grid-os.toml")
    s = res.summaries
    os_runs, sim = s[s.world == "os"], s[s.world == "sim"]
    # Every cell of the 3 x 3 x 3 grid ran on real processes, every process finished.
    assert len(os_runs) == 27 and os_runs["unfinished"].eq(0).all()
    assert (os_runs["jobs"] == os_runs["workload.batch"]).all()
    # The simulator has no model of a synchronous write: those 18 runs are skipped, with why,
    # in both models (the ideal and the calibrated).
    assert len(sim) == 9 and set(sim["case"]) == {"cpu"}
    assert res.skipped.groupby("world").size().to_dict() == {"calibrated": 18, "sim": 18}
    assert res.skipped["reason"].str.contains("synchronous").all()
    # The calibrated model ran the CPU cells with the profile measured first.
    # Every one of them under a kernel policy: the calibration measured the kernel alone.
    calibrated = s[s.world == "calibrated"]
    assert len(calibrated) == 9
    measured = profile.load(res.dir / "profile-os-cpus2-kernel.toml")
    assert measured["profile"]["parts"] == ["kernel"]
    assert {"scale", "other_scale_many", "kernel_wake"} <= set(measured["os"])
    assert not any(t.startswith("dispatch") for t in measured["os"]), measured["os"].keys()
    # CPU batches: FIFO and RR (100 ms slices, longer than a 20 ms job) serve the batch in
    # order, mean response size * (N/m + 1) / 2 exactly in the simulator; on real processes
    # within 15%. CFS shares the CPUs: its mean is far later.
    cpu = s[s.case == "cpu"].set_index(["world", "workload.batch", "label"])["response_mean"]
    for n in (4, 16, 64):
        fifo = 20 * (n / 2 + 1) / 2
        assert cpu["sim", n, "FIFO"] == pytest.approx(fifo)
        assert cpu["os", n, "FIFO"] == pytest.approx(fifo, rel=0.15)
        assert cpu["os", n, "RR"] == pytest.approx(fifo, rel=0.15)
    assert cpu["os", 64, "CFS"] > 1.5 * cpu["os", 64, "FIFO"]
    assert cpu["os", 64, "CFS"] == pytest.approx(cpu["sim", 64, "CFS"], rel=0.15)


@pytest.mark.real
def test_pinned_start_reports_the_load_over_time_in_both_worlds(quick_run):
    res = quick_results(quick_run, "smp-balancing", "pinned-os.toml")
    s = res.summaries.set_index("world")
    # Real processes: all 7 on CPU 0 until the release at 500 ms.
    assert list(s.loc["os", "load_distribution_start"]) == [7.0, 0.0]
    for world in ("os", "sim"):
        series = res.run_table(s.loc[world, "run"], "load_series")
        assert list(series.columns) == ["time", "cpu", "runnable"], world
        assert set(series["cpu"]) == {0, 1}, world
        # 7 tasks that never think: all of them runnable at (nearly) every sample.
        total = series.groupby("time")["runnable"].sum()
        assert total.median() == 7, world
    html = make_report(res.dir, res.dir / "pinned.html").read_text()
    assert html.count('<figure class="figure" data-plot="load_series">') == 1
    # The simulator holds the same pin for the same 500 ms (its sample at 0 precedes the
    # tasks), and both worlds' time to balance comes from one code.
    assert list(s.loc["sim", "load_distribution_start"]) == pytest.approx([7 * 49 / 50, 0.0])
    for world in ("os", "sim"):
        assert math.isfinite(s.loc[world, "time_to_balance"]), world


def _until_an_idle_balance(out: Path, runs: pd.DataFrame, n: int, attempts: int
                           ) -> pd.DataFrame:
    """The kernel's runs at n, with the file's os run at n repeated until the idle CPU's
    periodic balance made the first move in one of them (or `attempts` more runs)."""
    at_n = runs[runs["workload.clients"] == n]
    spec = json.loads((out / "runs" / f"{at_n['run'].iloc[0]}.json").read_text())["spec"]
    for attempt in range(attempts):
        if (runs[runs["workload.clients"] == n]["first_move_path"] == "idle balance").any():
            break
        extra = os_world.run(spec).summary
        row = {**{k: v for k, v in extra.items() if np.ndim(v) == 0},
               "workload.clients": n, "run": f"extra-{n}-{attempt}"}
        runs = pd.concat([runs, pd.DataFrame([row])], ignore_index=True)
    return runs


@pytest.mark.real
def test_time_to_balance_three_ways(quick_run):
    """Study 002's time to balance: Linux 2.6.22's rules and the linux-like balancer in the
    simulator (exact: each notices the release at its pass 55 ms after it, the first balanced
    sample at 60 ms), the linux balancer with this kernel's idle interval cap (32 ms: its
    pass 20 ms after the release, the sample at 30 ms), and this machine's kernel on real
    processes, runs shared by the three cases, each with the kernel's trace of the moves;
    every split ends as Linux.1.a's."""
    res = quick_results(quick_run, "smp-balancing", "time-to-balance.toml")
    s = res.summaries
    sim = s[s.world == "sim"].set_index(["case", "workload.clients"])
    expected = {"linux26": 60.0, "linux": 60.0, "linux-32": 30.0}
    for case, ttb in expected.items():
        for n in (3, 7):
            assert sim.loc[(case, n), "time_to_balance"] == ttb, (case, n)
            assert sorted(sim.loc[(case, n), "load_distribution"]) == [n // 2, n - n // 2]
    real = s[s.world == "os"]
    assert set(real["workload.clients"]) == {3, 7}
    # The kernel's runs do not depend on the simulator's cases: one set, shared by all three.
    assert real.groupby("case")["run"].apply(frozenset).nunique() == 1
    assert real["run"].nunique() == 2 * 2  # n = 3, 7; two replications in --quick
    runs = real.drop_duplicates("run")
    # The kernel balances a pinned start in one of two ways (README, "This kernel, traced"):
    # the idle CPU 1's periodic balance pulls n // 2 tasks at once, or a task going to sleep
    # on CPU 1 first makes it pull one by its newly-idle balance, which runs with a
    # probability the kernel keeps from its recent success (hidden state the suite's own
    # load sets: 4 of 5 full-suite runs of 2026-11-27 had both runs of one n start so).
    # linux-32 models the first way. When neither run of an n began so, the same os run is
    # repeated until one does (at most 10 times: ~3.5 s each; after 20 s of short sleeps on
    # both CPUs 7 of 16 runs began the other way, one pair at n = 7 both).
    for n in (3, 7):
        runs = _until_an_idle_balance(res.dir, runs, n, attempts=10)
    assert (runs["time_to_balance"] < 1000).all(), runs["time_to_balance"].tolist()
    assert (runs["balanced_fraction"] > 0.5).all(), runs["balanced_fraction"].tolist()
    # The kernel's trace lacks a move its counter has in 2 runs of about 110 (a CI run of
    # 2026-11-27: its first move after the release; tests/test_ktrace.py): such a run says so
    # (`moves_missed`) and its first move is unknown. The trace's checks read the others.
    unknown = runs["first_move_path"].isna()
    assert runs.loc[unknown, "moves_missed"].gt(0).all(), runs["moves_missed"].tolist()
    assert runs.loc[~unknown, "moves_missed"].eq(0).all(), runs["moves_missed"].tolist()
    runs = runs[~unknown]
    # (Or, when CPU 1 was running something else at its next pass, its busy balance: 1 of
    # the 21 runs of a whole-file run after the churn, README.)
    assert runs["first_move_path"].isin(["idle balance", "newly-idle balance",
                                         "busy balance"]).all(), runs["first_move_path"].tolist()
    newly = runs[runs["first_move_path"] == "newly-idle balance"]
    assert (newly["first_move_tasks"] == 1).all()
    # The trace against the load samples: when the first move took n // 2 tasks, the split
    # was balanced from then on, so the first balanced sample is the next one: within one
    # period (10 ms) and 2 ms for the coordinator's wake-up (the time to balance counts from
    # the planned release, the move from the actual one, a fraction of a ms later).
    whole = runs[runs["first_move_tasks"] == runs["workload.clients"] // 2]
    assert len(whole) >= 2
    gap = whole["time_to_balance"] - whole["first_move"]
    assert ((gap > 0) & (gap <= 12)).all(), whole[["time_to_balance", "first_move"]]
    # linux-32's 30 ms is within 50% of the faster idle-balance run at each n (20-40 ms;
    # the default linux's 60 ms is not within 50% of 20-39).
    idle = runs[runs["first_move_path"] == "idle balance"]
    fastest = idle.groupby("workload.clients")["time_to_balance"].min()
    assert sorted(fastest.index) == [3, 7], runs[["workload.clients", "first_move_path"]]
    for n, ttb in fastest.items():
        assert expected["linux-32"] == pytest.approx(ttb, rel=0.5), (n, fastest.to_dict())
    html = make_report(res.dir, res.dir / "ttb.html").read_text()
    assert html.count('<figure class="figure" data-plot="balance">') == 1
    # One line for the kernel (its runs are shared by the cases), one per simulator case.
    balance = html[html.index('data-plot="balance"'):]
    balance = balance[:balance.index("</figure>")]
    assert balance.count("Linux [os]") == 1
    assert all(balance.count(f"Linux [sim], case={c}<") == 1 for c in expected), balance
    # And each kernel run of the file as a point marked by the path of its first move; a run
    # whose trace missed a move has no known first move, and the caption says so.
    file_runs = s[s.world == "os"].drop_duplicates("run")
    known = int(file_runs["first_move_path"].notna().sum())
    missed = "" if known == 4 else (f"; {4 - known} more whose trace lacks a move the kernel "
                                    "counted, so its first move is unknown")
    assert f"of {known} runs{missed}): an idle CPU" in balance, balance
    assert "first move by" in balance


@pytest.mark.real
def test_xv6_lottery_tests_on_real_processes_and_in_sim(quick_run):
    res = quick_results(quick_run, "xv6", "os-lottery.toml")
    t = res.tasks
    g = t.groupby(["world", "case", "machine.cpus", "label", "class"])[["share", "entitled"]] \
        .sum().reset_index()
    assert set(g.world) == {"os", "sim"} and set(g["machine.cpus"]) == {1, 2}
    # Balanced draws keep every group within 3 points of its tickets' share on 1 and 2 CPUs,
    # in both worlds, over only 1 s (100 draws per CPU) under --quick.
    bal = g[(g.label == "lottery, balance") & g.case.isin(["low_process_count",
                                                           "starvation_check"])]
    assert len(bal) == 2 * 2 * (3 + 3)
    assert (bal.share - bal.entitled).abs().max() < 0.03, bal.to_string()


@pytest.mark.real
def test_xv6_priority_tests_on_real_processes_and_in_sim(quick_run):
    res = quick_results(quick_run, "xv6", "os-priority.toml")
    c = res.classes.set_index(["world", "case", "machine.cpus", "label", "class"])
    r = c["response_mean"]
    for world in ("os", "sim"):
        for cpus in (1, 2):
            # Priority 0 protects the light process of the starvation check: about its 1 ms.
            assert r[world, "starvation_check", cpus, "xv6 priority", "light"] < 3.0
            # Sleepers at priority 10 wait behind the CPU-bound processes at 0; RR does not.
            assert r[world, "mixed_load", cpus, "xv6 priority", "io"] > \
                1.5 * r[world, "mixed_load", cpus, "RR", "io"]
    # CPU-heavy: 10 jobs of 100 ms; the real processes are within 10% of the simulator.
    for cpus in (1, 2):
        for label in ("xv6 priority", "RR"):
            assert r["os", "cpu_heavy", cpus, label, "p5"] == pytest.approx(
                r["sim", "cpu_heavy", cpus, label, "p5"], rel=0.10)
    # Tests of tiny processes: the ideal model leaves out a process's start, exit and
    # hand-off through the dispatcher (20-48 times the work); the calibrated one has them
    # (profiles measured first, one per CPU count). Median over policies and CPU counts of
    # the completion time's ratio to the real one, robust to one real run's hiccup. Not to
    # 25%: this machine's cost of a tiny process moves by a third within minutes (2026-11-26:
    # the median ratio came out 1.38 in a fresh-clone CI run, the whole file's cells 0.82-1.18,
    # test_calibration's prediction test 0.71-1.32), so within 0.6-1.6, where the ideal
    # model is under a tenth. Each real cell is the median of three runs (the quick run's one
    # and two more of the tiny cases alone): one batch of 50 tiny processes in about ten ran
    # 2-3x as slow as its neighbours on 2026-12-01 (8.5-17 ms, then 24 and 38), and a CI run
    # met two such cells of four (median ratio 0.53). Each calibrated cell is the mean of two
    # profiles', the quick run's and one measured again beside the two more real runs: the
    # cost moves between a profile and runs a minute later too (a CI run on 2026-12-07:
    # 77 ms modelled on 2 CPUs beside 41 real, ratio 1.87, with 1.38-1.46 on 1 CPU; profiles
    # of the same code a quarter of an hour apart put 200 tiny processes at 60-92 ms).
    done = res.summaries.set_index(["world", "case", "machine.cpus", "label"])["response_max"]
    tiny = ["switch_overhead", "process_creation"]
    more = tomllib.loads((ROOT / "experiments" / "xv6" / "os-priority.toml").read_text())
    more["experiment"]["world"] = ["os", "calibrated"]
    more["quick"] = {"worlds": {"os": {"replications": 2}}, "sweep": {"case": tiny}}
    again = schedlab.run(more, out=res.dir.parent / "tiny-again", quick=True, progress=False)
    assert (res.dir.parent / "tiny-again" / "profile-os-cpus2-fifo-dispatcher.toml").exists()
    again = again.summaries.groupby(["world", "case", "machine.cpus", "label"])["response_max"]
    assert again.size().to_dict() == {
        (world, case, cpus, label): 2 if world == "os" else 1 for world in ("os", "calibrated")
        for case in tiny for cpus in (1, 2) for label in ("xv6 priority", "RR")}
    for case in tiny:
        cells = [(cpus, label) for cpus in (1, 2) for label in ("xv6 priority", "RR")]
        real = np.array([np.median([done["os", case, c, label],
                                    *again.get_group(("os", case, c, label))])
                         for c, label in cells])
        ideal = np.array([done["sim", case, c, label] for c, label in cells])
        calibrated = np.array([np.mean([done["calibrated", case, c, label],
                                        *again.get_group(("calibrated", case, c, label))])
                               for c, label in cells])
        assert 0.6 < np.median(calibrated / real) < 1.6, (case, real, calibrated)
        assert np.median(ideal / real) < 0.1, (case, real, ideal)
    # Every calibrated run is dispatched: the calibrations measured the dispatcher alone.
    for cpus in (1, 2):
        measured = profile.load(res.dir / f"profile-os-cpus{cpus}-fifo-dispatcher.toml")
        assert measured["profile"]["parts"] == ["dispatcher"]
        assert {"dispatch_start", "dispatch_switch", "dispatch_exit", "dispatch_wake"} <= \
            set(measured["os"])
        assert not {"start", "scale", "other_scale", "kernel_wake"} & set(measured["os"])


# ---------------------------------------------------------------------------------------------
# The RR / PS / FCFS study reproduces theory with confidence intervals
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rr_ps_fcfs(quick_run):
    return schedlab.load_results(quick_run(ROOT / "experiments" / "rr-ps-fcfs" /
                                           "experiment.toml"))


def test_rr_ps_fcfs_reproduces_theory_with_confidence_intervals(rr_ps_fcfs):
    m = rr_ps_fcfs.metric("response_mean")
    for label, expected in (("FCFS", 220.0), ("PS", 420.0)):
        rows = m[m.label == label]
        row = rows.iloc[0]
        # FCFS and PS have no quantum: one run set shared by every point of the RR sweep.
        assert rows["mean"].nunique() == 1
        assert row["theory"] == pytest.approx(expected, rel=1e-9)
        # --quick: 8 replications of 400,000 measured jobs. The 95% interval must contain the
        # closed form and be narrower than 5% of it; the study's own run was 16% off.
        assert row["n"] == 8 and row["method"] == "replications"
        assert row["ci_low"] <= expected <= row["ci_high"], row.to_dict()
        assert row["half_width"] < 0.05 * expected
        assert abs(row["mean"] - expected) / expected < 0.05
    rr = m[m.label == "RR"].set_index("policy.RR.quantum")["mean"]
    fcfs = m[m.label == "FCFS"]["mean"].iloc[0]
    ps = m[m.label == "PS"]["mean"].iloc[0]
    # A quantum of 20 ms or more serves each 20 ms job in one turn: exactly FCFS (same seeds).
    assert rr[20] == fcfs
    # Smaller quanta move RR towards PS, monotonically.
    assert fcfs < rr[10] < rr[5] < ps


def test_theory_for_uses_the_engines_defaults():
    assert sweep.theory_for({"policy": "fcfs", "arrival": "exp:21", "size": "det:20"}) == \
        pytest.approx(220.0)
    assert sweep.theory_for({"policy": "ps", "load": 0.5, "size": "exp:1"}) == \
        pytest.approx(2.0)
    # RR's default quantum is 10: a finite quantum has no closed form, it is not PS.
    assert sweep.theory_for({"policy": "rr", "arrival": "exp:21", "size": "det:20"}) is None
    assert sweep.theory_for({"policy": "fcfs", "arrival": "exp:21", "size": "det:20",
                             "context_switch": 0.1}) is None
    # A closed system: 3 clients that never think (the default det:0) keep one CPU busy, each
    # response 3 jobs of mean 1 ms; FCFS with constant sizes has no product form.
    assert sweep.theory_for({"policy": "fcfs", "clients": 3, "size": "exp:1"}) == \
        pytest.approx(3.0)
    assert sweep.theory_for({"policy": "fcfs", "clients": 3, "think": "exp:1",
                             "size": "det:1"}) is None


# ---------------------------------------------------------------------------------------------
# Validation: one line naming the key path, exit code 2, nothing written
# ---------------------------------------------------------------------------------------------

BAD = [
    ('[experiment]\nname = "x"\n[workload]\nsize = "exp:-1"\njobs = 10\nload = 0.5\n'
     '[[policy]]\nname = "fcfs"\n', "workload.size = exp:-1: expected a mean > 0"),
    ('[workload]\nsizee = "exp:1"\n[[policy]]\nname = "fcfs"\n', "workload.sizee = exp:1"),
    ('[experiment]\nreplications = 0\n[workload]\njobs = 10\nload = 0.5\n[[policy]]\n'
     'name = "fcfs"\n', "experiment.replications = 0"),
    ('[experiment]\nworld = "moon"\n[[policy]]\nname = "fcfs"\n', "experiment.world = moon"),
    ('[experiment]\nreplications = 3\n[worlds.sim]\nbatches = 5\n[workload]\njobs = 1000\n'
     'load = 0.5\n[[policy]]\nname = "fcfs"\n', "worlds.sim.batches = 5: expected nothing "
     "beside replications = 3: the intervals are then taken across the replications"),
    ('[experiment]\nworld = ["sim", "sim"]\n[workload]\njobs = 10\nload = 0.5\n[[policy]]\n'
     'name = "fcfs"\n', 'experiment.world = ["sim", "sim"]: expected each world once (sim is '
     'given twice)'),
    ('[workload]\njobs = 10\nload = 0.5\n[[policy]]\nname = "fcfs"\n[[policy]]\nname = "rr"\n'
     'quantum = -3\n', "policy[1].quantum = -3: expected a number > 0"),
    ('[workload]\njobs = 10\nload = 0.5\n[[policy]]\nname = "fcfs"\nquantum = 3\n',
     "policy[0].quantum = 3"),
    ('[workload]\njobs = 10\nload = 0.5\n[[policy]]\nname = "fifo2"\n',
     "policy[0].name = fifo2"),
    ('[workload]\njobs = 10\n[[policy]]\nname = "rr"\n[sweep]\n"workload.load" = [0.5, 1.5]\n',
     "sweep.workload.load = 1.5"),
    ('[workload]\njobs = 10\nload = 0.5\n[[policy]]\nname = "rr"\nlabel = "R"\n[sweep]\n'
     '"policy.R.quantum" = [1, 0]\n', "sweep.policy.R.quantum = 0"),
    ('[workload]\njobs = 10\nload = 0.5\n[[policy]]\nname = "fcfs"\n[sweep]\n'
     '"policy.quantum" = [1]\n', "sweep.policy.quantum"),
    ('[workload]\njobs = 10\nload = 0.5\n[[policy]]\nname = "fcfs"\n[sweep]\n'
     '"workload.cpus" = [1]\n', "sweep.workload.cpus"),
    ('[workload]\njobs = 10\nload = 0.5\n[[policy]]\nname = "fcfs"\n[sweep]\nmode = "zip"\n'
     '"workload.jobs" = [1, 2]\n"machine.cpus" = [1]\n', "sweep.machine.cpus"),
    ('[workload]\nload = 0.5\n[[policy]]\nname = "fcfs"\n', "workload.jobs = (missing)"),
    ('[workload]\njobs = 10\nload = 0.5\n[[policy]]\nname = "fcfs"\n[report]\n'
     'plots = ["pie"]\n', "report.plots[0] = pie"),
    ('[workload]\njobs = 10\nload = 0.5\n[[policy]]\nname = "fcfs"\n[experiment]\n'
     'warmup = 1.5\n', "experiment.warmup = 1.5"),
    ('[workload]\njobs = 10\nload = 0.5\nclasses = [{name = "a", colour = 1}]\n[[policy]]\n'
     'name = "fcfs"\n', "workload.classes[0].colour = 1"),
    ('[workload]\njobs = 10\nload = 0.5\nclasses = [{name = "a", size = "exp:-2"}]\n'
     '[[policy]]\nname = "fcfs"\n', "workload.classes[0].size = exp:-2"),
    ('[[policy]]\nname = "fcfs"\n[mystery]\n', "mystery = {}: expected a section"),
    ('[workload\n', "valid TOML"),
    # A replay needs the world it replays, one that keeps its requests, and no classes.
    ('[workload]\njobs = 10\nload = 0.5\n[[policy]]\nname = "fcfs"\n[worlds.sim]\n'
     'replay = "server"\n', "worlds.sim.replay = server: expected a file whose worlds include "
     "server"),
    ('[workload]\njobs = 10\nload = 0.5\n[[policy]]\nname = "fcfs"\n[worlds.sim]\n'
     'replay = "os"\n', "worlds.sim.replay = os"),
    ('[experiment]\nworld = ["server"]\n[workload]\njobs = 10\nload = 0.5\n[[policy]]\n'
     'name = "fcfs"\n[worlds.server]\nreplay = "server"\n', "worlds.server.replay"),
    ('[experiment]\nworld = ["sim", "server"]\n[workload]\njobs = 10\n'
     'size = "exp:1"\nclasses = [{name = "a", clients = 2}]\n[machine]\n'
     'cost = "0.1ms+0.01ms/KiB"\n[[policy]]\nname = "fcfs"\n[worlds.sim]\nreplay = "server"\n',
     "worlds.sim.replay = server: expected a file without workload.classes"),
    ('[workload]\njobs = 10\nload = 0.5\n', "policy = (missing)"),
    # A sweep of one key inside the classes names that key, once (it used to repeat it:
    # sweep.workload.classes[0].tickets[0].tickets).
    ('[workload]\njobs = 10\nload = 0.5\nclasses = [{name = "a", tickets = 1}]\n[[policy]]\n'
     'name = "lottery"\n[sweep]\n"workload.classes[0].tickets" = [1, -2]\n',
     "sweep.workload.classes[0].tickets = -2: expected a number > 0"),
    ('[workload]\njobs = 10\nload = 0.5\nclasses = [{name = "a", tickets = 1}]\n[[policy]]\n'
     'name = "lottery"\n[sweep]\n"workload.classes[0].tikets" = [1, 2]\n',
     "sweep.workload.classes[0].tikets = 1: expected a class key"),
    # Text where a number is expected keeps its quotes: the reader sees why 300 was refused.
    ('[workload]\njobs = "300"\nload = 0.5\n[[policy]]\nname = "fcfs"\n',
     'workload.jobs = "300": expected a whole number'),
    ('[workload]\njobs = 10\n[[policy]]\nlabel = "x"\n',
     "policy[0].name = (missing): expected a value: the key is required here"),
    # One parameter given twice in a [[policy]] (as a key and in its params table).
    ('[workload]\njobs = 10\nload = 0.5\n[[policy]]\nname = "mlfq"\nlevels = 2\n'
     'params = {levels = 3}\n', "policy[0].levels = 2: expected one value"),
    # The report's axis and point name what the sweep has.
    ('[workload]\njobs = 10\n[[policy]]\nname = "fcfs"\n[sweep]\n"workload.load" = [0.5, 0.6]\n'
     '[report]\nx = "workload.nope"\n', "report.x = workload.nope: expected a key of [sweep]"),
    ('[workload]\njobs = 10\n[[policy]]\nname = "fcfs"\n[sweep]\n"workload.load" = [0.5, 0.6]\n'
     '[report]\npoint = 2\n', "report.point = 2: expected a sweep point from 0 to 1"),
    # [quick] has sections of its own: [quick.policy] is not one, and [policy] is no answer.
    ('[workload]\njobs = 10\n[[policy]]\nname = "fcfs"\n[quick.policy]\nname = "rr"\n',
     'quick.policy = {"name": "rr"}: expected a section of [quick] among [quick.experiment], '
     '[quick.workload], [quick.machine], [quick.sweep], [quick.report], [quick.worlds]'),
    # A simulator refusal of the machine (a fluid policy's) is found with the file.
    ('[workload]\njobs = 10\nload = 0.5\n[machine]\ntimeslice = 5\n[[policy]]\nname = "ps"\n',
     "machine.timeslice = 5: expected a policy that runs jobs in turns"),
    # The machine's affinity becomes its classes' for the simulator: a refusal names the key
    # as written (it named workload.classes[0].affinity, a table the file does not have).
    ('[workload]\njobs = 10\nload = 0.5\n[machine]\ncpus = 2\naffinity = [0]\n[[policy]]\n'
     'name = "fcfs"\n', "machine.affinity = [0]: expected runqueues = per-cpu"),
    # A schedlab policy's parameter in a kernel table, said as the command line says it (it
    # listed the kernel's keys as if quantum were a misspelling of one).
    ('[workload]\njobs = 10\nload = 0.5\n[[policy]]\nname = "kernel"\nquantum = 2\n',
     "policy[0].quantum = 2: expected nothing under the kernel (a parameter of a schedlab "
     "policy: set name; the kernel's are deadline, nice, period, rtprio, runtime, sched)"),
    # A kernel policy's nice goes into every class for the simulator: named where the file
    # wrote it (it said workload.classes[0].nice, a table the file does not have).
    ('[workload]\njobs = 10\nload = 0.5\n[[policy]]\nname = "kernel"\nnice = 99\n',
     "policy[0].nice = 99: expected a number from -20 to 19"),
    # Whether an affinity's CPUs are the machine's is the core's check, named as written
    # (not as the list the translation made of it), at a class and at a sweep's point.
    ('[workload]\njobs = 10\nload = 0.5\n[machine]\ncpus = 4\nrunqueues = "per-cpu"\n'
     'affinity = "0-9"\n[[policy]]\nname = "fcfs"\n', "machine.affinity = 0-9: expected CPU "
     "numbers from 0 to 3 (the simulated machine has 4 CPUs; CPU 9 is not one)"),
    ('[workload]\njobs = 10\nload = 0.5\n[[workload.classes]]\nname = "a"\nfraction = 1\n'
     'affinity = "1,2"\n[machine]\ncpus = 2\nrunqueues = "per-cpu"\n[[policy]]\n'
     'name = "fcfs"\n', "workload.classes[0].affinity = 1,2: expected CPU numbers from 0 to 1"),
    ('[workload]\njobs = 10\nload = 0.5\n[machine]\naffinity = "0-3"\nrunqueues = "per-cpu"\n'
     '[[policy]]\nname = "fcfs"\n[sweep]\n"machine.cpus" = [4, 2]\n',
     "machine.affinity = 0-3: expected CPU numbers from 0 to 1 (the simulated machine has 2 "
     "CPUs; CPU 3 is not one)"),
    # A misspelt world's table names the worlds (it said "a known key").
    ('[workload]\njobs = 10\nload = 0.5\n[[policy]]\nname = "fcfs"\n[worlds.simm]\njobs = 3\n',
     'worlds.simm = {"jobs": 3}: expected a world\'s table [worlds.NAME], NAME one of sim, '
     "calibrated, server, os"),
]


@pytest.mark.parametrize(("text", "needle"), BAD)
def test_bad_file_one_line_exit_2_nothing_written(tmp_path, text, needle):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    out = tmp_path / "out"
    r = schedlab_cli("run", str(path), "--out", str(out))
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert needle in lines[0], lines[0]
    assert r.stdout == ""
    assert not out.exists()


@pytest.mark.parametrize(("quick", "needle"), [
    ('[quick.workload]\njobs = "x"\n', 'quick.workload.jobs = "x": expected a whole number'),
    ("[quick.workload]\nload = 7\n", "quick.workload.load = 7"),
    ('[quick.worlds.sim]\njobs = "x"\n', 'quick.worlds.sim.jobs = "x"'),
])
def test_a_bad_quick_value_is_named_where_it_was_written(tmp_path, quick, needle):
    # Without --quick too: a file's [quick] tables are checked on every load (a bad one was
    # found only by the first run with --quick).
    path = tmp_path / "q.toml"
    path.write_text('[experiment]\nname = "q"\n[workload]\nload = 0.5\njobs = 100\n'
                    '[[policy]]\nname = "fcfs"\n' + quick)
    out = tmp_path / "out"
    for flags in (["--quick"], []):
        r = schedlab_cli("run", str(path), *flags, "--out", str(out))
        assert r.returncode == 2 and needle in r.stderr, (flags, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and not out.exists()
    # A good [quick] table changes nothing without --quick: the file's own values.
    path.write_text(path.read_text().replace('"x"', "50").replace("= 7", "= 0.7"))
    assert ex.load(path).raw["workload"]["jobs"] == 100
    assert ex.load(path).raw["workload"]["load"] == 0.5


def test_a_replay_pairs_each_model_run_with_the_server_run_it_replays(monkeypatch):
    monkeypatch.chdir(ROOT / "experiments" / "fileserver")  # the file's relative paths
    raw = ex.read_toml("quantum.toml")
    raw["worlds"]["calibrated"] = {"replay": "server"}
    exp = ex.load(raw)
    server = {(r.point, r.label, r.replication): r for r in exp.runs if r.world == "server"}
    replays = [r for r in exp.runs if r.world == "calibrated"]
    # The server's 3 replications, not the file's 10: one replay per server run.
    assert exp.replications_of("calibrated") == 3 and exp.replications_of("sim") == 10
    assert len(replays) == len(server) == 6 * 3 * 3
    for r in replays:
        of = server[(r.point, r.label, r.replication)]
        assert r.replay_of == of.id and r.seed == of.seed
        # The workload is the trace: no key that draws one or ends a run is its own.
        assert not {"clients", "think", "size", "jobs", "time", "warmup"} & set(r.spec)
        assert r.spec["profile"] == "calibrate" and r.spec["cpus"] == 2
    # A replay's id names the run it replays; FCFS, swept with nothing, is one run per
    # replication in both worlds.
    assert len({r.id for r in replays}) == len({r.id for r in server.values()}) == 6 * 3 + 2 * 3
    tasks = sweep.plan(exp, Path("/runs"))
    by_id = {t["id"]: t for t in tasks}
    for r in replays:
        assert by_id[r.id]["spec"]["trace"] == f"/runs/{r.replay_of}.trace.csv"
        assert by_id[r.replay_of]["replayed"] and not by_id[r.id]["replayed"]


def test_missing_file_and_missing_world_module(tmp_path, monkeypatch):
    r = schedlab_cli("run", str(tmp_path / "nope.toml"), "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "nope.toml" in r.stderr
    monkeypatch.setitem(worlds.MODULES, "server", "schedlab.no_such_world")
    with pytest.raises(schedlab.SpecError, match="experiment.world = server: expected a world "
                       "whose module is installed"):
        ex.load(base(experiment={"name": "t", "world": "server"}))


def test_quick_overrides_are_checked_too(tmp_path):
    for quick in (True, False):
        d = base(quick={"sweep": {"machine.cpus": [1]}})
        with pytest.raises(schedlab.SpecError, match=r"quick.sweep.machine.cpus"):
            ex.load(d, quick=quick)
        d = base(quick={"experiment": {"replications": -1}})
        with pytest.raises(schedlab.SpecError, match=r"quick.experiment.replications = -1"):
            ex.load(d, quick=quick)
        d = base(quick={"report": {"plots": ["foo"]}})
        with pytest.raises(schedlab.SpecError, match=r"quick.report.plots\[0\] = foo"):
            ex.load(d, quick=quick)


# ---------------------------------------------------------------------------------------------
# Sweep expansion
# ---------------------------------------------------------------------------------------------


def test_cartesian_sweep_and_policy_paths():
    d = base(sweep={"workload.load": [0.5, 0.6, 0.7], "policy.quantum": [0.1, 1.0]},
             experiment={"name": "t", "replications": 1})
    e = ex.load(d)
    assert e.sweep_keys == ["workload.load", "policy.quantum"]
    assert len(e.points) == 6
    assert e.points[1] == {"workload.load": 0.5, "policy.quantum": 1.0}
    by = {(r.point, r.label): r for r in e.runs}
    # policy.quantum reaches every policy that has a quantum (RR and MLFQ), not FCFS.
    assert by[(1, "RR")].spec["params"]["quantum"] == 1.0
    assert by[(1, "MLFQ levels=2")].spec["params"]["quantum"] == 1.0
    assert "quantum" not in by[(1, "FCFS")].spec["params"]
    # FCFS is the same run at both quanta: one id, run once.
    assert by[(0, "FCFS")].id == by[(1, "FCFS")].id
    assert by[(0, "RR")].id != by[(1, "RR")].id
    assert len(e.runs) == 18 and len(e.unique_runs()) == 3 * (1 + 2 + 2)


def test_zip_sweep_label_path_and_nested_class_path():
    d = base(sweep={"mode": "zip", "workload.load": [0.5, 0.6], "policy.RR.quantum": [1, 2],
                    "workload.classes[1].tickets": [3, 9]},
             workload={"load": 0.7, "size": "exp:1", "jobs": 2000,
                       "classes": [{"name": "a"}, {"name": "b", "tickets": 1}]},
             experiment={"name": "t", "replications": 1})
    e = ex.load(d)
    assert len(e.points) == 2
    rr = [r for r in e.runs if r.label == "RR"]
    assert [(r.spec["load"], r.spec["params"]["quantum"], r.spec["classes"][1]["tickets"])
            for r in rr] == [(0.5, 1, 3), (0.6, 2, 9)]
    mlfq = [r for r in e.runs if r.policy == "mlfq"]
    assert all("quantum" not in r.spec["params"] for r in mlfq)  # the label path: RR only


def test_seeds_are_common_random_numbers_and_reproducible(tmp_path):
    e = ex.load(base())
    seeds = {(r.point, r.label, r.replication): r.seed for r in e.runs}
    for rep in range(2):
        assert len({s for (p, lab, r), s in seeds.items() if r == rep}) == 1
    assert seeds[(0, "FCFS", 0)] != seeds[(0, "FCFS", 1)]
    assert ex.replication_seed(7, 0) == e.runs[0].seed
    assert ex.replication_seed(7, 0) == ex.replication_seed(7, 0) != ex.replication_seed(8, 0)
    a = schedlab.run(base(), out=tmp_path / "a")
    schedlab.run(base(), out=tmp_path / "b", workers=1)
    assert (tmp_path / "a" / "summaries.parquet").read_bytes() == \
        (tmp_path / "b" / "summaries.parquet").read_bytes()
    # Common random numbers: same seed, same arrivals and sizes for every policy.
    jobs = a.jobs[a.jobs.replication == 0]
    sizes = {lab: g.sort_values("job")["size"].to_numpy()[:500] for lab, g in
             jobs[jobs.run.isin(a.summaries[a.summaries.point == 0].run)].groupby("label")}
    assert (sizes["FCFS"] == sizes["RR"]).all()


def test_auto_warmup_is_common_to_the_policies_of_a_point(tmp_path, monkeypatch):
    """Each policy's own MSER-5 truncation differs; the sweep gives every policy of a point and
    replication the largest, so all are measured on the same jobs."""
    e = ex.load(base())
    own = {(r.point, r.replication, r.label): worlds.module("sim").run(dict(r.spec))
           .summary["warmup_jobs"] for r in e.runs}
    assert len(set(own.values())) > 1  # the policies really disagree somewhere
    a = schedlab.run(base(), out=tmp_path / "a")
    s = a.summaries
    for (point, rep), g in s.groupby(["point", "replication"]):
        want = max(own[(point, rep, lab)] for lab in g.label)
        assert (g.warmup_jobs == want).all(), (point, rep, g.warmup_jobs.tolist(), want)
        assert (g.jobs == 2000).all()
    jobs = a.jobs
    first = {lab: sorted(g.job) for lab, g in
             jobs[jobs.run.isin(s[(s.point == 1) & (s.replication == 0)].run)].groupby("label")}
    assert first["FCFS"] == first["RR"] == first["MLFQ levels=2"]
    assert min(first["FCFS"]) == max(own[(1, 0, lab)] for lab in first)
    # A resumed sweep reads the truncations it found (warmups.json) instead of piloting again.
    stored = json.loads((tmp_path / "a" / "warmups.json").read_text())
    assert sorted(stored.values()) == sorted(own.values())

    def no_pilots(spec):
        raise AssertionError("pilot run again")

    monkeypatch.setattr(worlds.module("sim"), "warmup", no_pilots)
    before = (tmp_path / "a" / "summaries.parquet").read_bytes()
    schedlab.run(base(), out=tmp_path / "a")
    assert (tmp_path / "a" / "summaries.parquet").read_bytes() == before


def test_quick_generic_scaling():
    d = base(experiment={"name": "t", "replications": 9, "warmup": 50_000},
             workload={"load": 0.7, "size": "exp:1", "jobs": 1_000_000},
             sweep={"workload.load": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]})
    e = ex.load(d, quick=True)
    assert e.replications == 2
    assert e.points == [{"workload.load": v} for v in (0.1, 0.4, 0.7)]
    assert all(r.spec["jobs"] == 5000 and r.spec["warmup"] == 1000 for r in e.runs)
    d["quick"] = {"workload": {"jobs": 300}, "sweep": {"workload.load": [0.2]}}
    e = ex.load(d, quick=True)
    assert e.points == [{"workload.load": 0.2}] and e.runs[0].spec["jobs"] == 300


def test_relative_paths_follow_the_file_and_edits_change_the_id(tmp_path):
    (tmp_path / "sizes.csv").write_text("size\n1\n2\n")
    f = tmp_path / "e.toml"
    f.write_text('[workload]\nload = 0.5\njobs = 100\nsize = "empirical:sizes.csv"\n'
                 '[[policy]]\nname = "fcfs"\n')
    e = ex.load(f)
    assert e.name == "e"
    assert e.runs[0].spec["size"] == f"empirical:{tmp_path / 'sizes.csv'}"
    before = e.runs[0].id
    (tmp_path / "sizes.csv").write_text("size\n1\n3\n")
    assert ex.load(f).runs[0].id != before


# ---------------------------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------------------------


def test_student_t_interval_matches_hand_values():
    iv = stats.t_interval([1.0, 2.0, 3.0, 4.0])
    # t(0.975, 3) = 3.182446; s = 1.290994; half-width = t s / sqrt(4)
    assert iv.mean == 2.5 and iv.n == 4
    assert iv.half_width == pytest.approx(3.182446305 * 1.290994449 / 2, rel=1e-8)
    assert stats.t_interval([5.0]).method == "single run"
    assert math.isnan(stats.t_interval([5.0]).half_width)
    bm = stats.batch_means([1.0, 3.0], mean=2.2)
    assert bm.mean == 2.2 and bm.half_width == pytest.approx(12.7062047 * 1.41421356 / 1.41421356,
                                                             rel=1e-6)


def test_batch_means_give_the_interval_of_one_long_run(tmp_path):
    d = base(experiment={"name": "bm", "replications": 1, "batches": 20},
             workload={"load": 0.8, "size": "exp:1", "jobs": 400_000},
             policy=[{"name": "fcfs"}], sweep={})
    res = schedlab.run(d, out=tmp_path / "bm")
    row = res.metric("response_mean").iloc[0]
    assert row["method"] == "batch means" and row["n"] == 20
    # M/M/1 at load 0.8: E[T] = 1 / (1 - 0.8) = 5.
    assert row["theory"] == pytest.approx(5.0)
    assert row["ci_low"] <= 5.0 <= row["ci_high"]
    assert 0 < row["half_width"] < 0.05 * 5


def test_a_sweeps_intervals_stop_at_zero(tmp_path):
    # Three replications of 50 jobs at load 0.5: the median wait is 0 in most runs, so the t
    # interval across them reaches below 0; a wait is never negative, so ci_low is 0, while
    # half_width stays the estimator's spread.
    d = base(experiment={"name": "z", "replications": 3, "seed": 1},
             workload={"load": 0.5, "size": "exp:1", "jobs": 50}, policy=[{"name": "fcfs"}],
             sweep={})
    res = schedlab.run(d, out=tmp_path / "z")
    row = res.metric("wait_p50").iloc[0]
    assert row["n"] == 3 and row["mean"] - row["half_width"] < 0
    assert row["ci_low"] == 0.0 and row["ci_high"] == pytest.approx(row["mean"]
                                                                     + row["half_width"])
    assert (res.stats.dropna(subset=["ci_low"])["ci_low"] >= 0).all()


# ---------------------------------------------------------------------------------------------
# Docs cannot drift from the validator
# ---------------------------------------------------------------------------------------------


def test_experiment_reference_is_generated_from_the_models():
    text = (ROOT / "docs" / "experiments.md").read_text()
    block = text[text.index(ex.DOC_BEGIN) + len(ex.DOC_BEGIN):text.index(ex.DOC_END)]
    assert block.strip() == ex.reference_markdown().strip(), (
        "docs/experiments.md is stale: run .venv/bin/python -m schedlab.experiment "
        "--write-docs docs/experiments.md")
    for key, k in vocabulary.KEYS.items():
        if k.section in ("workload", "machine", "experiment", "output"):
            assert f"| `{key}` |" in block, key


def test_policy_reference_names_every_policy_and_parameter():
    text = (ROOT / "docs" / "policies.md").read_text()
    block = text[text.index(ex.POLICY_BEGIN) + len(ex.POLICY_BEGIN):]
    block = block[:block.index(ex.DOC_END)]
    assert block.strip() == ex.policies_markdown().strip(), (
        "docs/policies.md is stale: run .venv/bin/python -m schedlab.experiment "
        "--write-policies docs/policies.md")
    for p in vocabulary.policy_catalog():
        assert f"### `{p['name']}`" in block
        for q in p["params"]:
            assert re.search(rf"\| `{q['name']}` \|", block), (p["name"], q["name"])


def test_tutorial_commands_exist():
    text = (ROOT / "docs" / "tutorial.md").read_text()
    for needle in ("schedlab run", "schedlab report", "load_results", "--quick"):
        assert needle in text
    for path in re.findall(r"experiments/[\w./-]+\.toml", text):
        assert (ROOT / path).exists(), path


def test_manifest_lists_runs_with_ids_and_status(tmp_path):
    schedlab.run(base(), out=tmp_path / "m")
    m = json.loads((tmp_path / "m" / "manifest.json").read_text())
    assert m["status"] == "complete" and m["counts"]["done"] == len({r["id"] for r in m["runs"]})
    assert len(m["runs"]) == 2 * 3 * 2
    assert all(r["status"] == "done" for r in m["runs"])
    st = pd.read_parquet(tmp_path / "m" / "stats.parquet")
    assert {"metric", "mean", "ci_low", "ci_high", "theory", "n"} <= set(st.columns)


def run(spec: dict) -> schedlab.Result:
    """A stand-in world for the failure test: fails at load 0.7, simulates otherwise."""
    if spec.get("load") == 0.7 and FAIL_AT_07:
        raise RuntimeError("stand-in world failed on purpose")
    return schedlab.simulate(**spec)


FAIL_AT_07 = True


def test_a_failing_run_fails_the_sweep_and_a_rerun_retries_only_it(tmp_path, monkeypatch):
    monkeypatch.setitem(worlds.MODULES, "os", "test_experiments")
    d = base(experiment={"name": "f", "world": "os", "replications": 2, "seed": 7})
    out = tmp_path / "f"
    with pytest.raises(sweep.SweepFailed, match="6 of 12 runs failed.*failed on purpose"):
        schedlab.run(d, out=out, workers=2)
    m = json.loads((out / "manifest.json").read_text())
    assert m["status"] == "failed" and m["counts"] == {"done": 6, "pending": 0, "failed": 6,
                                                       "skipped": 0}
    kept = {f.name: f.stat().st_mtime_ns for f in (out / "runs").glob("*.json")}
    assert len(kept) == 6
    monkeypatch.setattr(sys.modules[__name__], "FAIL_AT_07", False)
    res = schedlab.run(d, out=out, workers=2)
    assert len(res.summaries) == 12 and res.manifest["status"] == "complete"
    for name, mtime in kept.items():
        assert (out / "runs" / name).stat().st_mtime_ns == mtime  # not run again


def test_an_experiments_time_unit_labels_its_tables_and_is_refused_for_real_worlds(tmp_path):
    # Issue 13: xv6's files count time in ticks; their tables and plots must not say ms.
    base = {"experiment": {"name": "ticks", "unit": "tick", "keep_jobs": False},
            "workload": {"load": 0.5, "size": "exp:4", "jobs": 2000},
            "policy": [{"name": "fcfs"}]}
    res = schedlab.run(base, out=tmp_path / "ticks")
    assert res.time_unit == "tick"
    html = res._repr_html_()
    assert "response mean (tick) [95% interval]" in html and "(ms)" not in html
    # The numbers are the simulator's, unit-free: M/M/1 at load 0.5, mean size 4: 8 ticks.
    assert res.stats.query("metric == 'response_mean'")["theory"].iloc[0] == \
        pytest.approx(8.0, rel=1e-9)
    assert schedlab.run({**base, "experiment": {"name": "ms", "keep_jobs": False}},
                        out=tmp_path / "ms").time_unit == "ms"
    with pytest.raises(schedlab.SpecError, match="experiment.unit = tick"):
        ex.load({**base, "experiment": {"name": "x", "unit": "tick", "world": ["sim", "os"]}})
    # A unit of time: "parsec" would print "mean (parsec)" on every table and plot.
    with pytest.raises(schedlab.SpecError, match=r"^experiment.unit = parsec: expected 'ms', "
                                                 r"'s', 'us', 'ns', 'min' or 'tick'$"):
        ex.load({**base, "experiment": {"name": "x", "unit": "parsec"}})
    from schedlab.vocabulary import in_time_unit

    assert [in_time_unit(u, "tick") for u in ("ms", "jobs/ms", "ratio")] == \
        ["tick", "jobs/tick", "ratio"]


def test_every_stats_row_carries_its_unit(tmp_path):
    # `res.metric(...)` and `res.stats` had no unit: a mean response or a throughput with
    # nothing to say ms or jobs/ms. The experiment's time unit replaces ms (xv6: ticks).
    d = base(experiment={"name": "u", "replications": 2, "unit": "tick"},
             workload={"load": 0.5, "size": "exp:1", "jobs": 2_000},
             policy=[{"name": "fcfs"}], sweep={})
    res = schedlab.run(d, out=tmp_path / "u")
    units = dict(zip(res.stats["metric"], res.stats["unit"], strict=True))
    assert units["response_mean"] == "tick" and units["throughput"] == "jobs/tick"
    assert units["utilization"] == "ratio" and units["jobs"] == "count"
    assert "" not in set(units.values())
    assert res.metric("response_p99").attrs["unit"] == "tick"
    assert res.metric("response_p99")["unit"].tolist() == ["tick"]

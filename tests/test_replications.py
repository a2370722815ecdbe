"""Replications inside one call: `simulate(replications=R)` and `schedlab sim --replications R`
run R independent runs on every core, with the bits of running them one after the other, the
seeds of an experiment file's replications, and Student-t intervals across them."""

from __future__ import annotations

import json
import math
import subprocess

import numpy as np
import pandas as pd
import pytest
import schedlab
from conftest import SCHEDLAB, cli_env
from schedlab.jsonio import dumps
from schedlab.vocabulary import DEFAULT_SEED, SpecError, replication_seed, summary_units
from scipy import stats as st


def same(a: dict, b: dict) -> bool:
    """Summaries equal to the bit (NaN included: compared as their JSON text)."""
    return dumps(a) == dumps(b)


SPEC = dict(policy="rr", quantum=0.5, load=0.8, size="exp:1", jobs=20_000, warmup=0)


def test_threads_give_the_runs_of_one_after_the_other_with_the_experiment_seeds():
    many = schedlab.simulate(**SPEC, seed=7, replications=5, workers=2)
    one = schedlab.simulate(**SPEC, seed=7, replications=5, workers=1)
    assert many.seeds == one.seeds == [replication_seed(7, r) for r in range(5)]
    assert len(set(many.seeds)) == 5
    for a, b in zip(many.runs, one.runs, strict=True):
        assert same(a.summary, b.summary)
        assert np.array_equal(a.jobs["response"].to_numpy(), b.jobs["response"].to_numpy())
        assert len(a.jobs) == 20_000
    # Replication r is the single run with seed replication_seed(seed, r).
    single = schedlab.simulate(**SPEC, seed=replication_seed(7, 3))
    assert same(many.runs[3].summary, single.summary)
    means = [r.summary["response_mean"] for r in many.runs]
    assert len(set(means)) == 5  # independent runs, not one run copied


def test_the_summary_is_the_mean_across_runs_with_a_student_t_interval():
    rep = schedlab.simulate(**SPEC, replications=6, keep_jobs=False)
    s = rep.summary
    assert s["replications"] == 6 and s["seed"] == DEFAULT_SEED and s["policy"] == "rr"
    assert s["ci_method"] == "replications" and s["seeds"] == rep.seeds
    assert s["jobs"] == 6 * 20_000 and s["events"] == sum(r.summary["events"] for r in rep.runs)
    assert "ci_batches" not in s and "ci_batch_size" not in s
    low, high = s["response_mean_ci"]
    assert s["response_mean_precision"] == pytest.approx((high - low) / 2 / s["response_mean"])
    assert s["warmup_time"] == pytest.approx(np.mean([r.summary["warmup_time"]
                                                      for r in rep.runs]))
    for metric in ("response_mean", "response_p99", "wait_mean"):
        x = np.array([r.summary[metric] for r in rep.runs])
        half = st.t.ppf(0.975, 5) * x.std(ddof=1) / math.sqrt(6)
        assert s[metric] == pytest.approx(x.mean(), rel=1e-12)
        assert s[f"{metric}_ci"] == pytest.approx([x.mean() - half, x.mean() + half],
                                                  rel=1e-12)
    # Every other estimate the table shows has its interval too, across the runs.
    for metric in ("throughput", "utilization", "slowdown_mean", "makespan"):
        x = np.array([r.summary[metric] for r in rep.runs])
        half = st.t.ppf(0.975, 5) * x.std(ddof=1) / math.sqrt(6)
        assert s[f"{metric}_ci"] == pytest.approx([max(x.mean() - half, 0), x.mean() + half],
                                                  rel=1e-12), metric
    assert summary_units(s)["throughput_ci"] == "jobs/ms"
    assert {k: summary_units(s)[k] for k in ("replications", "seeds", "ci_method")} == {
        "replications": "count", "seeds": "text", "ci_method": "text"}
    # M/M/1 RR with a small quantum is close to PS: mean response 1 / (1 - 0.8) = 5 ms.
    low, high = s["response_mean_ci"]
    assert low < 5.0 * 1.05 and high > 5.0 * 0.95
    assert s["utilization"] == pytest.approx(np.mean([r.summary["utilization"]
                                                      for r in rep.runs]))
    frame = rep.summaries
    assert list(frame["replication"]) == list(range(6))
    assert list(frame["seed"]) == rep.seeds


def test_an_interval_across_replications_stops_at_zero():
    # Three short runs: the t interval of the median wait (0 in one run, 0.12 ms in another)
    # reaches below 0; a wait is never negative, so it is cut there, as a run's own is.
    rep = schedlab.simulate("fcfs", load=0.5, size="exp:1", jobs=50, replications=3,
                            keep_jobs=False)
    s = rep.summary
    x = np.array([r.summary["wait_p50"] for r in rep.runs])
    half = st.t.ppf(0.975, 2) * x.std(ddof=1) / math.sqrt(3)
    assert x.mean() - half < 0 < x.mean() + half
    assert s["wait_p50_ci"] == pytest.approx([0.0, x.mean() + half], rel=1e-12)
    iv = rep.interval("wait_p50")
    assert iv.low == 0.0 and iv.high == pytest.approx(x.mean() + half, rel=1e-12)
    assert not any(v[0] < 0 for k, v in s.items() if k.endswith("_ci"))  # NaN: no interval


def test_the_default_seed_is_the_cores():
    a = schedlab.simulate("fcfs", load=0.7, jobs=3_000, keep_jobs=False)
    b = schedlab.simulate("fcfs", load=0.7, jobs=3_000, keep_jobs=False, seed=DEFAULT_SEED)
    assert a.summary["seed"] == DEFAULT_SEED and same(a.summary, b.summary)


@pytest.mark.parametrize("key,value", [("replications", 0), ("replications", 2.5),
                                       ("replications", "4"), ("workers", 0),
                                       ("workers", True)])
def test_bad_counts_are_refused_naming_the_key(key, value):
    with pytest.raises(SpecError) as e:
        schedlab.simulate("fcfs", load=0.5, jobs=100, **{"replications": 2, key: value})
    assert e.value.key == key and "at least 1" in str(e.value)


def test_a_bad_spec_is_refused_before_any_run():
    with pytest.raises(SpecError) as e:
        schedlab.simulate("fcfs", load=1.5, jobs=100, replications=3)
    assert e.value.key == "load"


def test_the_command_line_runs_replications(tmp_path):
    out = subprocess.run([SCHEDLAB, "sim", "--policy", "fcfs", "--load", "0.6", "--jobs", "4000",
                          "--seed", "3", "--replications", "3", "--json", "--jobs-out",
                          str(tmp_path / "jobs.csv")], capture_output=True, text=True,
                         timeout=120, env=cli_env())
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    api = schedlab.simulate("fcfs", load=0.6, jobs=4000, seed=3, replications=3)
    assert s["seeds"] == api.seeds and s["replications"] == 3
    assert [r["response_mean"] for r in s["runs"]] == [r.summary["response_mean"]
                                                      for r in api.runs]
    assert s["response_mean_ci"] == pytest.approx(api.summary["response_mean_ci"], rel=1e-12)
    jobs = pd.read_csv(tmp_path / "jobs.csv")
    assert sorted(jobs["replication"].unique()) == [0, 1, 2]
    assert len(jobs) == 3 * 4000
    table = subprocess.run([SCHEDLAB, "sim", "--load", "0.6", "--jobs", "2000",
                            "--replications", "2"], capture_output=True, text=True,
                           timeout=120, env=cli_env())
    assert table.returncode == 0, table.stderr
    assert "2 replications" in table.stdout and "Student t" in table.stdout
    # On two CPUs the table has per-CPU rows: the runs' means, CPU by CPU (a KeyError before).
    two = subprocess.run([SCHEDLAB, "sim", "--load", "0.5", "--jobs", "2000", "--cpus", "2",
                          "--seed", "3", "--replications", "2", "--workers", "1"],
                         capture_output=True, text=True, timeout=120, env=cli_env())
    assert two.returncode == 0, two.stderr
    reps = schedlab.simulate("fcfs", load=0.5, jobs=2000, cpus=2, seed=3, replications=2)
    per_cpu = [sum(r.summary["utilization_per_cpu"][c] for r in reps.runs) / 2 for c in (0, 1)]
    assert reps.summary["utilization_per_cpu"] == pytest.approx(per_cpu, rel=1e-12)
    row = next(line for line in two.stdout.splitlines() if "utilization per CPU" in line)
    assert row.split("│")[2].split() == [f"{v:.3g}" for v in per_cpu]
    bad = subprocess.run([SCHEDLAB, "sim", "--jobs", "100", "--replications", "0"],
                         capture_output=True, text=True, timeout=60, env=cli_env())
    assert bad.returncode == 2 and "replications = 0" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


CLASSES_SPEC = ('policy = "fcfs"\nload = 0.7\nsize = "exp:1"\njobs = 3000\nseed = 5\n'
                '[[classes]]\nname = "small"\nfraction = 0.7\nsize = "exp:0.5"\n'
                '[[classes]]\nname = "big"\nsize = "exp:2"\n')


@pytest.mark.parametrize("table", [False, True])
def test_the_class_table_of_replications_and_of_one_run_in_json(tmp_path, table):
    # With or without a table to write (two paths through the command): the class table is
    # in --json and in the text, counts added up and means averaged over the replications.
    spec = tmp_path / "classes.toml"
    spec.write_text(CLASSES_SPEC)
    extra = ["--jobs-out", str(tmp_path / "jobs.csv")] if table else []

    def cli(*args: str) -> subprocess.CompletedProcess:
        p = subprocess.run([SCHEDLAB, "sim", "--spec", str(spec), *args, *extra],
                           capture_output=True, text=True, timeout=120, env=cli_env())
        assert p.returncode == 0, p.stderr
        return p

    rep = schedlab.simulate(policy="fcfs", load=0.7, size="exp:1", jobs=3000, seed=5,
                            classes=[{"name": "small", "fraction": 0.7, "size": "exp:0.5"},
                                     {"name": "big", "size": "exp:2"}], replications=3)
    got = json.loads(cli("--replications", "3", "--json").stdout)["classes"]
    assert [c["class"] for c in got] == ["small", "big"]
    for c in got:
        rows = [r.classes.set_index("class").loc[c["class"]] for r in rep.runs]
        assert c["jobs"] == sum(int(r["jobs"]) for r in rows)
        assert c["response_mean"] == pytest.approx(np.mean([r["response_mean"] for r in rows]),
                                                   rel=1e-12)
        # Each number a run gives an interval for has Student's t across the three runs
        # (t = 4.303 at 2 degrees of freedom), cut at 0; one run's flag is not carried.
        for key in ("response_mean", "response_p99", "wait_mean", "slowdown_mean"):
            values = [r[key] for r in rows]
            half = 4.302653 * np.std(values, ddof=1) / np.sqrt(3)
            assert c[f"{key}_ci"] == pytest.approx([max(0.0, np.mean(values) - half),
                                                   np.mean(values) + half], rel=1e-5), key
        assert "ci_uncorrelated" not in c
    assert sum(c["jobs"] for c in got) == 3 * 3000
    text = cli("--replications", "3").stdout
    assert "small" in text and "big" in text and "averaged over the replications" in text
    assert "Student t interval across them" in text
    one = json.loads(cli("--json").stdout)
    alone = schedlab.simulate(policy="fcfs", load=0.7, size="exp:1", jobs=3000, seed=5,
                              classes=[{"name": "small", "fraction": 0.7, "size": "exp:0.5"},
                                       {"name": "big", "size": "exp:2"}])
    assert one["classes"] == alone.classes.to_dict("records")


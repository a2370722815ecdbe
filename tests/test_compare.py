"""Policies compared in one command (issue 13): `schedlab sim --policy fcfs,srpt,ps,rr:quantum=5`
and `simulate(policy=[...])` run every policy on the same workload and seeds and give one table
with 95% intervals and the closed form beside each row."""

from __future__ import annotations

import json
import math
import re
import subprocess

import pytest
import schedlab
from conftest import SCHEDLAB, cli_env
from schedlab import policies, theory
from schedlab.compare import Comparison

SPEC = {"load": 0.8, "size": "exp:1", "jobs": 100_000, "seed": 4}


@pytest.fixture(scope="module")
def four() -> Comparison:
    return schedlab.simulate(policy=["fcfs", "srpt", policies.PS(), {"name": "rr", "quantum": 5}],
                             **SPEC)


def test_each_row_is_the_policy_run_alone_on_the_same_measured_jobs(four):
    # Every policy leaves out the largest warm-up any of them finds alone (warmup = "auto"),
    # and is then the policy run alone with that warm-up, to the bit.
    assert four.labels == ["FCFS", "SRPT", "PS", "RR quantum=5"]
    cases = [("fcfs", {}), ("srpt", {}), ("ps", {}), ("rr", {"quantum": 5})]
    own = [schedlab.simulate(policy=name, keep_jobs=False, **params, **SPEC)
           .summary["warmup_jobs"] for name, params in cases]
    cut = max(own)
    assert len(set(own)) > 1  # the policies alone would measure different jobs
    for (name, params), result in zip(cases, four.results, strict=True):
        assert result.summary["warmup_jobs"] == cut
        alone = schedlab.simulate(policy=name, keep_jobs=False, warmup=cut, **params,
                                  **SPEC).summary
        assert result.summary["response_mean"] == alone["response_mean"]
        assert result.summary["response_p99"] == alone["response_p99"]


def test_every_policy_sees_the_same_arrivals_and_sizes(four):
    # Common random numbers: the job tables agree job by job on what arrived when, how big.
    fcfs, srpt = (four.result(x).jobs.sort_values("job") for x in ("FCFS", "SRPT"))
    assert len(fcfs) > 90_000
    common = fcfs.merge(srpt, on="job", suffixes=("_a", "_b"))
    assert len(common) > 0.99 * len(fcfs)
    assert (common["arrival_a"] == common["arrival_b"]).all()
    assert (common["size_a"] == common["size_b"]).all()


def test_the_table_has_intervals_and_theory(four):
    t = four.table().set_index("policy")
    # M/M/1 at load 0.8, mean size 1: FCFS and PS both 1 / (1 - 0.8) = 5 ms; SRPT's
    # Schrage-Miller mean is 2.3528 (reference table); RR with a quantum has no closed form.
    assert t.loc["FCFS", "theory_response_mean"] == pytest.approx(5.0, rel=1e-9)
    assert t.loc["PS", "theory_response_mean"] == pytest.approx(5.0, rel=1e-9)
    assert t.loc["SRPT", "theory_response_mean"] == pytest.approx(
        theory.mean_response("srpt", "exp:1.25", "exp:1"), rel=1e-9)
    assert t.loc["SRPT", "theory_response_mean"] == pytest.approx(2.3528, rel=1e-3)
    assert math.isnan(t.loc["RR quantum=5", "theory_response_mean"])
    assert four.rows()[3]["theory_response_mean"] is None  # JSON null, not NaN
    # FCFS's p99: -ln(0.01) x 5 = 23.03 ms.
    assert t.loc["FCFS", "theory_response_p99"] == pytest.approx(23.0259, rel=1e-4)
    for name in ("FCFS", "PS", "SRPT"):
        lo, hi = t.loc[name, "response_mean_ci_low"], t.loc[name, "response_mean_ci_high"]
        assert lo < t.loc[name, "response_mean"] < hi
        # This seed's intervals cover the closed form, which is within 6% of the measure.
        assert lo < t.loc[name, "theory_response_mean"] < hi, (name, lo, hi)
    assert t.loc["SRPT", "response_mean"] < 0.5 * t.loc["FCFS", "response_mean"]
    assert four.table().attrs["units"]["response_mean"] == "ms"


def test_replications_give_student_t_intervals():
    c = schedlab.simulate(policy="fcfs,sjf", replications=3, workers=2,
                          **{**SPEC, "jobs": 20_000})
    assert c.interval_method == "Student t across 3 replications"
    for r in c.results:
        assert len(r.runs) == 3
    row = c.rows()[0]
    iv = c.results[0].interval("response_mean")
    assert row["response_mean_ci_low"] == pytest.approx(iv.mean - iv.half_width, rel=1e-12)
    # The same seeds for both policies, replication by replication.
    assert c.results[0].seeds == c.results[1].seeds
    # And the same measured jobs, replication by replication: the larger of the two cuts.
    for i, seed in enumerate(c.results[0].seeds):
        own = [schedlab.simulate(policy=p, keep_jobs=False, **{**SPEC, "jobs": 20_000,
                                                               "seed": seed})
               .summary["warmup_jobs"] for p in ("fcfs", "sjf")]
        assert [r.runs[i].summary["warmup_jobs"] for r in c.results] == [max(own)] * 2


def test_the_command_prints_one_table_and_json():
    out = subprocess.run([SCHEDLAB, "sim", "--policy", "fcfs,srpt,ps,rr:quantum=5", "--load",
                          "0.8", "--jobs", "20000"], capture_output=True, text=True,
                         timeout=120, env=cli_env())
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    for name in ("FCFS", "SRPT", "PS", "RR quantum=5"):
        assert sum(line.strip().startswith(name + " ") for line in lines) == 1, out.stdout
    assert "response mean" in out.stdout and "[95% interval]" in out.stdout
    assert "theory" in out.stdout and "(ms)" in out.stdout
    assert "common random numbers" in out.stdout
    assert re.search(r"measured on the same jobs \(the first [\d,]+ jobs left out", out.stdout)
    # Repeated flags compare too (the last one no longer wins silently), with a shared
    # parameter going to the policies that have it.
    out = subprocess.run([SCHEDLAB, "sim", "--policy", "fcfs", "--policy", "rr", "--quantum",
                          "2", "--load", "0.5", "--jobs", "2000", "--json"],
                         capture_output=True, text=True, timeout=120, env=cli_env())
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["policies"] == ["FCFS", "RR quantum=2"]
    assert data["units"]["response_p99"] == "ms"
    assert [r["policy"] for r in data["rows"]] == data["policies"]
    assert len({r["warmup_jobs"] for r in data["rows"]}) == 1
    assert data["units"]["warmup_jobs"] == "count"
    assert data["rows"][0]["theory_response_mean"] == pytest.approx(2.0, rel=1e-9)


def test_intervals_of_a_run_too_short_to_trust_are_said_so():
    # 2,000 jobs at load 0.8 (seed 4): FCFS's batches are not shown uncorrelated, SRPT's are.
    c = schedlab.simulate(policy="fcfs,srpt", load=0.8, jobs=2000, seed=4)
    assert [r["ci_uncorrelated"] for r in c.rows()] == [False, True]
    assert [r["ci_uncorrelated"] for r in c.rows()] == [
        r.summary["ci_uncorrelated"] for r in c.results]
    out = subprocess.run([SCHEDLAB, "sim", "--policy", "fcfs,srpt", "--load", "0.8", "--jobs",
                          "2000", "--seed", "4"], capture_output=True, text=True, timeout=120,
                         env=cli_env())
    assert out.returncode == 0, out.stderr
    warning = [line for line in out.stdout.splitlines() if "NOT to be trusted" in line]
    assert len(warning) == 1 and warning[0].startswith("FCFS:"), out.stdout
    # Replications are independent: their t intervals are trusted.
    c = schedlab.simulate(policy="fcfs,srpt", load=0.8, jobs=2000, seed=4, replications=3)
    assert all(r["ci_uncorrelated"] for r in c.rows())


def test_policy_lists_parse_parameters_and_lists():
    assert policies.parse("fcfs, srpt,rr:quantum=5") == [("fcfs", {}), ("srpt", {}),
                                                         ("rr", {"quantum": 5.0})]
    assert policies.parse("mlfq:quanta=1,2,4,rr") == [("mlfq", {"quanta": [1.0, 2.0, 4.0]}),
                                                      ("rr", {})]
    # A list followed by another parameter (it was read as a policy named "4").
    assert policies.parse("fcfs,mlfq:quanta=1,2,4:boost_period=100,rr") == [
        ("fcfs", {}), ("mlfq", {"quanta": [1.0, 2.0, 4.0], "boost_period": 100.0}), ("rr", {})]
    # Labelled as it was written ("quanta=[1.0, 2.0, 4.0]" before).
    assert policies.label("mlfq", {"quanta": [1.0, 2.0, 4.0], "boost_period": 100.0}) == \
        "MLFQ quanta=1,2,4 boost_period=100"
    assert policies.label("rr", {"quantum": 0.5}) == "RR quantum=0.5"
    for bad in ("fcfs,,srpt", "rr:colour=5", "nosuch", "rr:quantum", "mlfq:quanta=1,2:bogus=1"):
        with pytest.raises(schedlab.SpecError, match="policy"):
            policies.parse(bad)
    with pytest.raises(schedlab.SpecError, match="each policy once"):
        schedlab.simulate(policy=["fcfs", "fcfs"], **SPEC)
    # The same run once its defaults are filled in (RR's quantum is 10, LCFS preempts): two
    # identical rows under two labels, before.
    for twice, text in (("rr:quantum=10,rr", "RR is RR quantum=10 once its defaults"),
                        ("lcfs,lcfs:preemptive=true", "LCFS preemptive=true is LCFS once"),
                        ("mlfq:quantum=10,mlfq", "MLFQ is MLFQ quantum=10 once")):
        with pytest.raises(schedlab.SpecError, match=f"^policy = .*: expected each policy "
                                                     f"once .*{text}"):
            schedlab.simulate(policy=twice, **SPEC)
    assert schedlab.simulate(policy="rr:quantum=5,rr", **SPEC).labels == ["RR quantum=5", "RR"]
    assert policies.label("lcfs", {"preemptive": False}) == "LCFS preemptive=false"
    with pytest.raises(schedlab.SpecError, match="quantum = 2"):
        schedlab.simulate(policy=["fcfs", "sjf"], quantum=2, **SPEC)


def test_a_comparison_shows_itself_in_a_notebook(four):
    html = four._repr_html_()
    assert html.count("<tr>") == 1 + len(four.labels)
    assert "response mean (ms) [95% interval]" in html and "theory (ms)" in html
    fcfs = four.rows()[0]
    assert f"{fcfs['response_mean']:.4g} [{fcfs['response_mean_ci_low']:.4g}, " in html
    assert "RR quantum=5" in html and repr(four).startswith("Comparison(FCFS, SRPT, PS")


def test_the_comparison_table_keeps_every_digit_of_long_labels_and_intervals():
    # At a fixed 150 columns rich cut cells short: "21.21 [16.64, 25.7…", and the label of an
    # MLFQ with two parameters. Every row's cells must come out whole, on one line each.
    out = subprocess.run([SCHEDLAB, "sim", "--policy", "fcfs,mlfq:quanta=1,2,4:boost_period=100",
                          "--load", "0.8", "--jobs", "5000", "--json"], capture_output=True,
                         text=True, timeout=120, env=cli_env())
    rows = {r["policy"]: r for r in json.loads(out.stdout)["rows"]}
    out = subprocess.run([SCHEDLAB, "sim", "--policy", "fcfs,mlfq:quanta=1,2,4:boost_period=100",
                          "--load", "0.8", "--jobs", "5000"], capture_output=True, text=True,
                         timeout=120, env={**cli_env(), "COLUMNS": "80"})
    assert out.returncode == 0, out.stderr
    assert "…" not in out.stdout, out.stdout
    mlfq = next(line for line in out.stdout.splitlines() if line.strip().startswith("MLFQ"))
    assert "boost_period=100" in mlfq
    high = rows[next(k for k in rows if k.startswith("MLFQ"))]["response_p99_ci_high"]
    assert f"{high:.4g}]" in mlfq, mlfq

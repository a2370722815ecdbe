"""One summary for every world: the same per-job table through the summary code of the file
server, of real processes and of `schedlab.results.summarize` gives the same numbers, key by
key, and they follow the documented definitions (numpy computes them independently here); the
simulator's own streaming summary equals `summarize` of its per-job table."""

from __future__ import annotations

import math
import subprocess

import numpy as np
import pandas as pd
import pytest
import schedlab
import schedlab._core as _core
from conftest import SCHEDLAB, cli_env, unitless
from schedlab import results, server, summary_rows, theory
from schedlab.osrun import build as os_build
from schedlab.vocabulary import summary_units

# Keys computed from the per-job table alone: the same in every world for the same table.
FROM_TABLE = ["jobs", "response_mean", "response_p50", "response_p95", "response_p99",
              "response_std", "response_max", "wait_mean", "wait_p50", "wait_p95", "wait_p99",
              "wait_std", "slowdown_mean", "slowdown_p99", "throughput", "arrival_rate",
              "mean_in_system", "context_switches", "migrations", "jain_slowdown",
              "task_response_cv"]
CLASSES = ["a", "b"]


def job_table(n: int = 301, seed: int = 5) -> pd.DataFrame:
    """Measured jobs of 4 closed clients in 2 classes, in completion order, starting at 0."""
    rng = np.random.default_rng(seed)
    arrival = np.sort(rng.exponential(3.0, n).cumsum() - 0.0)
    arrival -= arrival[0]
    size = rng.exponential(2.0, n) + 0.1
    wait = rng.exponential(4.0, n)
    response = size + wait
    completion = arrival + response
    order = np.argsort(completion, kind="stable")
    client = rng.integers(0, 4, n)
    df = pd.DataFrame({
        "client": client, "class": client % 2, "arrival": arrival, "completion": completion,
        "size": size, "wait": wait, "response": response, "slowdown": response / size,
        "context_switches": rng.integers(0, 5, n).astype(float),
        "migrations": rng.integers(0, 2, n).astype(float),
    }).iloc[order].reset_index(drop=True)
    return df


def independent(jobs: pd.DataFrame) -> dict[str, float]:
    """The definitions, computed with numpy: lower empirical quantiles (numpy's
    inverted_cdf is the ceil(p n)-th value), sample std, Jain's (sum x)^2 / (n sum x^2)."""
    r, w, s = (jobs[c].to_numpy() for c in ("response", "wait", "slowdown"))
    start, end = jobs["arrival"].min(), jobs["completion"].max()
    q = lambda x, p: float(np.quantile(x, p, method="inverted_cdf"))  # noqa: E731
    means = jobs.groupby("client")["response"].mean()
    return {
        "jobs": len(jobs), "response_mean": r.mean(), "response_p50": q(r, 0.5),
        "response_p95": q(r, 0.95), "response_p99": q(r, 0.99), "response_std": r.std(ddof=1),
        "response_max": r.max(), "wait_mean": w.mean(), "wait_p50": q(w, 0.5),
        "wait_p95": q(w, 0.95), "wait_p99": q(w, 0.99), "wait_std": w.std(ddof=1),
        "slowdown_mean": s.mean(), "slowdown_p99": q(s, 0.99),
        "throughput": len(jobs) / (end - start), "arrival_rate": len(jobs) / (end - start),
        "mean_in_system": r.sum() / (end - start),
        "context_switches": jobs["context_switches"].sum(),
        "migrations": jobs["migrations"].sum(),
        "jain_slowdown": s.sum() ** 2 / (len(s) * (s ** 2).sum()),
        "task_response_cv": means.std(ddof=1) / means.mean(),
    }


def server_summary(jobs: pd.DataFrame) -> dict:
    """The server world's summary code (schedlab.server._summary) on this table."""
    p = server.plan({"policy": "fcfs", "jobs": len(jobs), "cost": "0ms+1ms/KiB",
                     "classes": [{"name": "a", "clients": 2}, {"name": "b", "clients": 2}]})
    ok = jobs.assign(service=jobs["size"], error=0, status=200)
    s = {"duration": float(jobs["completion"].max()), "warmup": 0, "sent": len(jobs),
         "sending_ended": float(jobs["completion"].max()),
         "missed_sends": 0, "errors": 0, "errors_by_kind": {}, "status": {"200": len(jobs)},
         "bytes": 0, "throughput_rps": 0.0, "throughput_rps_ci": [0.0, 0.0], "offered_rate": 0.0,
         "connections": 4}
    stats = {"busy_ms": [float(jobs["size"].sum())], "served": len(jobs), "aborted": 0,
             "errors": {}, "drained": True}
    summary, classes, tasks = server._summary(p, ok, ok, s, stats)
    return {"summary": summary, "classes": classes, "tasks": tasks}


def os_summary(jobs: pd.DataFrame) -> dict:
    """The os world's summary code (schedlab.osrun.build._summary) on this table."""
    wall = float(jobs["completion"].max())
    n_tasks = 4
    raw = {"wall_ms": wall, "dispatcher": None,
           "coordinator": {"measure_cpu_ms": 0.0, "cpu_ms": 1.0, "samples_taken": 0},
           "tasks": [{"measure_cpu_ms": 0.0, "unfinished": 0, "jobs_done": 0,
                      "killed": None}] * n_tasks,
           "contended_end_ms": wall, "contended_end": "time", "stopped_by_time": True,
           "stopped_precise": False, "timed_out": False, "missing": {}, "warnings": []}
    plan = {"cpus": [0], "tasks": [{"sched": {"policy": "other"}, "jobs": None}] * n_tasks}
    options = {"dispatcher": None, "seed": 1, "warmup_time": 0.0, "class_names": CLASSES}
    measured = jobs.assign(cpu_time=jobs["size"], io=0.0)
    measured = measured.assign(unaccounted=measured["response"] - (
        measured["wait"] + measured["cpu_time"] + measured["io"]))
    extras = pd.DataFrame({"cpu_time": measured.groupby("client")["size"].sum().to_numpy(),
                           "user_ms": 0.0, "sys_ms": 0.0, "runqueue_wait": 0.0,
                           "killed": None})
    shares = [{"task": t, "class": CLASSES[t % 2], "service": 1.0, "entitled": 1.0,
               "migrations": 0.0, "cpu": -1} for t in range(n_tasks)]
    noise = {"noisy": False, "noise_reasons": [], "foreign_fraction": 0.0,
             "steal_fraction": 0.0}
    summary, classes, tasks = os_build._summary(raw, plan, options, measured, extras, shares,
                                                pd.DataFrame(), None, 0, "test", noise)
    return {"summary": summary, "classes": classes, "tasks": tasks}


def test_one_table_gives_one_summary_in_every_world():
    jobs = job_table()
    counters = {"measure_start": 0.0, "measure_end": float(jobs["completion"].max())}
    tasks = [{"task": t, "class": CLASSES[t % 2], "service": 1.0, "entitled": 1.0,
              "migrations": 0.0, "cpu": -1} for t in range(4)]
    ref, ref_classes, _ = results.summarize(jobs, tasks, CLASSES, counters)
    want = independent(jobs)
    for key in FROM_TABLE:
        assert ref[key] == pytest.approx(want[key], rel=1e-12), key
    for name, world in (("server", server_summary(jobs)), ("os", os_summary(jobs))):
        for key in [*FROM_TABLE, "throughput_ci"]:
            assert world["summary"][key] == ref[key], (name, key)
        pd.testing.assert_frame_equal(world["classes"], ref_classes, check_exact=True)
    # The throughput's interval reads the completions in time order, whatever the rows' order.
    columns = {c: np.ascontiguousarray(jobs[c].to_numpy(dtype=float)[::-1])
               for c in results.SUMMARY_COLUMNS if c in jobs}
    backwards = _core.summarize(columns, tasks, CLASSES, counters)["summary"]
    assert backwards["throughput_ci"] == ref["throughput_ci"]
    assert ref["throughput_ci"][0] < ref["throughput"] < ref["throughput_ci"][1]
    # The server world's p99.9, beyond the common keys: the same quantile rule, same jobs.
    server = server_summary(jobs)["summary"]
    assert server["response_p999"] == np.quantile(
        jobs["response"], 0.999, method="inverted_cdf")
    # Its interval (it had none): the load generator's sectioning of the responses in
    # completion order, whatever the rows' order; it holds the quantile.
    low, high = server["response_p999_ci"]
    assert low <= server["response_p999"] <= high and high > low
    assert server_summary(jobs.sample(frac=1, random_state=3))["summary"][
        "response_p999_ci"] == [low, high]
    ordered = jobs.sort_values("completion", kind="stable")["response"].to_numpy(dtype=float)
    assert _core.quantiles_with_intervals(ordered, [0.999])[1][0] == [low, high]
    # Per class: the same definitions over each class's jobs.
    for c, name in enumerate(CLASSES):
        mine = jobs[jobs["class"] == c]
        row = ref_classes.set_index("class").loc[name]
        assert row["response_p95"] == np.quantile(mine["response"], 0.95, method="inverted_cdf")
        assert row["jobs"] == len(mine)


def test_edge_cases_have_one_answer():
    one = job_table(1)
    s, _, _ = results.summarize(one, [], CLASSES, {"measure_start": 0.0, "measure_end": 1.0})
    assert math.isnan(s["response_std"])
    assert s["response_p50"] == s["response_p99"] == s["response_max"] == one["response"][0]
    # Nothing served: every share is 0/0, so Jain's index over the tasks is undefined (NaN),
    # not 1. (Jain of all-zero values is NaN as well: crates/model/src/stats.rs tests it.)
    zero = [{"task": t, "class": "a", "service": 0.0, "entitled": 1.0, "migrations": 0.0,
             "cpu": -1} for t in range(2)]
    s, _, tasks = results.summarize(job_table(), zero, CLASSES, {"measure_start": 0.0,
                                                                 "measure_end": 10.0})
    assert math.isnan(s["jain_share"]) and tasks["share"].isna().all()
    # A job whose client is unknown is a task of its own, not client 0's.
    anon = job_table().drop(columns="client")
    one_task = [{"task": 0, "class": "a", "service": 1.0, "entitled": 1.0, "migrations": 0.0,
                 "cpu": -1}]
    _, _, tasks = results.summarize(anon, one_task, CLASSES, {"measure_start": 0.0,
                                                              "measure_end": 10.0})
    assert math.isnan(tasks.set_index("task").loc[0, "response_mean"])
    # A count a world could not read is NaN, not 0.
    blind = job_table().assign(context_switches=np.nan)
    s, _, _ = results.summarize(blind, [], CLASSES, {"measure_start": 0.0, "measure_end": 1.0})
    assert math.isnan(s["context_switches"]) and s["migrations"] > 0
    # No measured job (a time-bounded run whose jobs outlast it): the sums over the measured
    # jobs are NaN, not 0 beside tasks that were switched (the README's os lottery line
    # showed 0 context switches). The simulator's run, through the one summary code.
    import schedlab

    r = schedlab.simulate("rr", quantum=1, clients=2, size="det:1e6", think="det:0", time=100)
    assert r.summary["jobs"] == 0 and list(r.tasks["service"]) == [50.0, 50.0]
    assert math.isnan(r.summary["context_switches"]) and math.isnan(r.summary["migrations"])
    # A real world's table with no measured job has no measured interval of its own: no
    # throughput and no jobs present to count (0 jobs/ms and 0 jobs before, beside three
    # processes that held the CPU throughout).
    s, _, _ = results.summarize(job_table().iloc[:0], [], CLASSES,
                                {"measure_start": 0.0, "measure_end": 3000.0})
    assert s["jobs"] == 0
    for key in ("throughput", "arrival_rate", "mean_in_system"):
        assert math.isnan(s[key]), key


def test_an_interval_never_reaches_below_zero():
    """A response time or a wait is never negative: a short run's interval stops at 0
    (cutting away what the quantity cannot take keeps the coverage). This run's sections
    give the median response a symmetric interval reaching below 0 and the median wait,
    which is 0, one around it."""
    s = schedlab.simulate("fcfs", load=0.5, size="exp:1", jobs=100, seed=1).summary
    q, (low, high) = s["response_p50"], s["response_p50_ci"]
    assert 2 * q - high < 0 < q < high  # the interval before the cut: centred on q
    assert low == 0.0
    assert s["wait_p50"] == 0.0 and s["wait_p50_ci"][0] == 0.0 < s["wait_p50_ci"][1]
    # The precision is the estimator's spread, taken before the cut.
    mlow, mhigh = s["response_mean_ci"]
    assert s["response_mean_precision"] >= (mhigh - mlow) / 2 / s["response_mean"]
    for key, value in s.items():
        if key.endswith("_ci"):
            # A list [low, high] like every list of the summary (it was a tuple in Python).
            assert isinstance(value, list) and len(value) == 2 and value[0] >= 0.0, key


@pytest.mark.parametrize("spec", [
    {"policy": "rr", "quantum": 2, "clients": 6, "think": "exp:3", "size": "exp:2",
     "jobs": 20_000, "classes": [{"name": "a", "fraction": 0.5}, {"name": "b", "size": "exp:5"}],
     "batches": 10, "warmup": 500},
    {"policy": "srpt", "load": 0.9, "size": "bpareto:1.5,1,1000", "jobs": 50_000, "cpus": 2,
     "warmup": 1000},
    {"policy": "cfs", "clients": 5, "size": "det:20", "think": "det:0", "time": 20_000.0,
     "cpus": 2, "runqueues": "per-cpu", "balancer": "linux", "timeslice": 4},
    # Every job arrives and completes inside the window (no warm-up, run to the last job):
    # the table alone gives the counts the simulator kept as events happened.
    {"policy": "ps", "load": 0.8, "size": "exp:1", "jobs": 5_000, "warmup": 0, "seed": 3},
])
def test_the_simulators_streaming_summary_is_summarize_of_its_table(spec):
    r = schedlab.simulate(**spec)
    s = r.summary
    names = list(r.classes["class"])
    tasks = [{"task": int(t.task), "class": t["class"], "service": float(t.service),
              "entitled": float(t.entitled), "migrations": float(t.migrations),
              "cpu": int(t.cpu)} for _, t in r.tasks.iterrows()]
    counters = {k: s[k] for k in ("policy", "seed", "cpus", "measure_start", "measure_end",
                                   "busy_time", "work_served", "overhead_time",
                                   "runnable_mean_per_cpu", "offered_load", "sim_time",
                                   "warmup_jobs", "unfinished", "events")}
    window = s["measure_end"] - s["measure_start"]
    counters.update(busy_per_cpu=[u * window for u in s["utilization_per_cpu"]],
                    busy_span=window, batch_size=20_000 // 10 if "batches" in spec else 0)
    # Arrivals, completions and time in system are the simulator's own counters (they include
    # jobs that had not completed, or arrived in the warm-up); the table agrees with them only
    # when every job of the window completed in it, as in the last case.
    whole = "jobs" in spec and spec.get("warmup") == 0
    again, classes, task_rows = results.summarize(r.jobs, tasks, names, counters)
    for key in FROM_TABLE + ["response_batch_means"]:
        a, b = again[key], s[key]
        if isinstance(b, float) and math.isnan(b):
            assert math.isnan(a), key
        elif key in ("throughput", "arrival_rate", "mean_in_system"):
            if whole:  # counted by events against summed from the table
                assert a == pytest.approx(b, rel=1e-9), key
        else:
            assert a == b, key  # the same code in the same order: the same bits
    pd.testing.assert_frame_equal(classes, r.classes, check_exact=True)
    if len(tasks):
        assert again["jain_share"] == pytest.approx(s["jain_share"], rel=1e-12)
        assert list(task_rows["response_mean"]) == list(r.tasks["response_mean"])


def test_real_worlds_cut_their_auto_warmup_with_the_simulators_mser5():
    # A backlog draining from 50 ms to a level of 5 +- 0.5 over the first ~300 jobs, then
    # stationary; jobs listed out of arrival order, two failed requests (no response) inside
    # the transient.
    rng = np.random.default_rng(3)
    n = 4000
    response = 5 + 45 * np.exp(-np.arange(n) / 60) + rng.uniform(-0.5, 0.5, n)
    response[[10, 20]] = np.nan
    jobs = pd.DataFrame({"job": np.arange(n), "arrival": np.arange(n) * 1.0,
                         "response": response}).sample(frac=1, random_state=1)
    kept, cut = results.cut_auto_warmup(jobs)
    # The same cut as the simulator's MSER-5 over the finite responses in arrival order
    # (plus the two failed requests inside it), and after the transient (45 e^(-j/60) is
    # under the noise's 0.29 std after ~300 jobs).
    discard, valid = schedlab._core.mser5(response[np.isfinite(response)])
    assert valid and cut == discard + 2 and 200 <= cut <= 1000
    assert len(kept) == n - cut and kept["arrival"].min() == cut
    assert kept["arrival"].is_monotonic_increasing
    assert abs(kept["response"].mean() - 5.0) < 0.1
    assert results.cut_auto_warmup(jobs.iloc[:0])[1] == 0


def test_a_real_run_until_precise_measures_the_jobs_up_to_the_one_that_met_the_rule():
    # 6,000 jobs in completion order (listed shuffled): exponential responses of mean 5 ms,
    # then 150 of 400 ms, the jobs that completed while a real world stopped its workers
    # after its rule had met the precision. Measured with them, the batch means are
    # correlated and the summary says the 5% was not reached; measured up to the job the rule
    # stopped on (the rule replayed by the simulator's code), it was, and those are the jobs.
    rng = np.random.default_rng(7)
    n = 6000
    response = rng.exponential(5.0, n)
    response[-150:] = 400.0 + rng.uniform(0.0, 10.0, 150)
    completion = np.arange(1.0, n + 1.0)
    jobs = pd.DataFrame({"job": np.arange(n), "arrival": completion - response,
                         "completion": completion, "size": np.ones(n),
                         "response": response}).sample(frac=1, random_state=2)
    counters = {"measure_start": 0.0, "measure_end": float(n), "precision": 0.05}
    whole, _, _ = results.summarize(jobs, [], ["0"], counters)
    assert whole["jobs"] == n and whole["precision_reached"] is False
    kept = results.cut_at_precise(jobs, 0.05, 500)
    stop = _core.precise_prefix(response, 0.05, 500)
    assert stop is not None and 500 <= stop < n - 150
    assert sorted(kept["job"]) == list(range(stop)) and kept.index.is_monotonic_increasing
    s, _, _ = results.summarize(kept, [], ["0"], counters)
    assert s["jobs"] == stop and s["precision_reached"] is True
    assert s["response_mean_precision"] <= 0.05
    # One look at 500 jobs and none after: never met, every job stays measured.
    assert _core.precise_prefix(response[:400], 0.05, 500) is None
    assert len(results.cut_at_precise(jobs[jobs["job"] < 400], 0.05, 500)) == 400
    assert results.cut_at_precise(jobs.iloc[:0], 0.05, 500).empty


def test_real_worlds_take_warmup_auto_and_refuse_other_words():
    spec = {"policy": "fcfs", "arrival": "exp:5", "bytes": "det:1000", "jobs": 10}
    p = server.plan({**spec, "warmup": "auto"})
    assert p.auto_warmup and "warmup" not in p.load
    assert not server.plan(spec).auto_warmup and server.plan({**spec, "warmup": 3}).load[
        "warmup"] == 3
    from schedlab.osrun.spec import build_plan

    _, options = build_plan({"policy": "fcfs", "clients": 2, "jobs": 4, "size": "det:5",
                             "warmup": "auto"})
    assert options["auto_warmup"] and options["warmup"] == 0
    with pytest.raises(schedlab.SpecError, match="warmup = soon: expected a whole number"):
        build_plan({"policy": "fcfs", "clients": 2, "jobs": 4, "size": "det:5",
                    "warmup": "soon"})


def test_os_time_to_balance_is_the_simulators_code():
    """The os world's placement samples go through the model's balance code: pinned 7/0
    until the release at 500 ms, then 6/1, 5/2, 4/3 (balanced 30 ms after it), 5/2, 4/3, 3/4."""
    t = [480.0, 490.0, 500.0, 510.0, 530.0, 540.0, 550.0, 560.0]
    cpu0 = [7, 7, 6, 5, 4, 5, 4, 3]
    load = pd.DataFrame({"t": t, "cpu0": cpu0, "cpu1": [7 - c for c in cpu0]})
    plan = {"tasks": [{"release_after": 500.0}] * 7}
    samples = os_build._load_samples(load, plan, 1e9)
    jobs = job_table()
    counters = {"measure_start": 0.0, "measure_end": float(jobs["completion"].max()),
                "load_samples": samples}
    s, _, _ = results.summarize(jobs, [], CLASSES, counters)
    assert s["load_distribution_start"] == [7.0, 0.0]
    assert s["time_to_balance"] == 30.0
    assert s["balanced_fraction"] == 0.5
    assert s["load_distribution"] == [4.0, 3.0]
    # Samples past the end of the contended run are left out: never balanced before 520 ms.
    late = os_build._load_samples(load, plan, 520.0)
    s, _, _ = results.summarize(jobs, [], CLASSES, dict(counters, load_samples=late))
    assert math.isnan(s["time_to_balance"])


def test_every_column_of_every_table_has_its_unit():
    spec = {"policy": "rr", "quantum": 2, "think": "exp:3", "size": "exp:2",
            "time": 2000.0, "cpus": 2, "runqueues": "per-cpu", "balancer": "linux",
            "keep_schedule": True, "load_sample": 50,
            "classes": [{"name": "a", "clients": 2}, {"name": "b", "clients": 2}]}
    r = schedlab.simulate(**spec)
    for name in ("jobs", "classes", "tasks", "schedule", "loads", "load_series"):
        table = getattr(r, name)
        assert len(table.columns) > 0 and set(r.units[name]) == set(table.columns), name
    assert r.units["jobs"]["size"] == "ms" and r.units["schedule"]["start"] == "ms"
    assert r.units["summary"] == summary_units(r.summary)
    rep = schedlab.simulate(**spec, replications=2)
    for name in ("jobs", "tasks", "load_series"):
        assert set(rep.units[name]) == set(rep.table(name).columns), name
    assert rep.units["summary"]["response_mean_ci"] == "ms"


def test_every_number_of_every_worlds_summary_has_its_unit():
    jobs = job_table()
    for name, world in (("server", server_summary(jobs)), ("os", os_summary(jobs))):
        s = world["summary"]
        assert unitless(s) == set(), name
        assert summary_units(s)["duration" if name == "server" else "wall_ms"] == "ms"
    assert summary_units({"dispatcher_timer_lateness_us": 1.0, "throughput_rps": 2.0,
                          "moves_missed": 0, "noisy": False}) == {
        "dispatcher_timer_lateness_us": "us", "throughput_rps": "requests/s",
        "moves_missed": "count"}


def test_the_mean_slowdown_has_its_interval_by_the_same_batches():
    """`slowdown_mean_ci`: batch means of the slowdowns, grouped as the responses are. With
    one size d every slowdown is response / d, so its interval is the response's over d; under
    FCFS with sizes uniform on [1, 3] at load 0.7 the mean slowdown is 1 + E[W] E[1/S] =
    1 + (lambda E[S^2] / (2 (1 - rho))) ln(3) / 2 = 2.3885 (waiting independent of the size),
    and the interval of a 400,000-job run holds it (fixed seed)."""
    d = schedlab.simulate("fcfs", load=0.8, size="det:2", jobs=200_000, seed=4).summary
    assert [2 * x for x in d["slowdown_mean_ci"]] == pytest.approx(d["response_mean_ci"],
                                                                   rel=1e-12)
    u = schedlab.simulate("fcfs", arrival=f"exp:{1 / 0.35}", size="uniform:1,3",
                          jobs=400_000, seed=3, warmup=2000).summary
    expected = 1 + 0.35 * (4 + 4 / 12) / (2 * 0.3) * math.log(3) / 2
    low, high = u["slowdown_mean_ci"]
    assert low <= expected <= high and low < u["slowdown_mean"] < high
    assert (high - low) / expected < 0.05
    assert summary_units(u)["slowdown_mean_ci"] == "ratio"


def test_the_throughput_has_its_interval_from_the_times_between_completions():
    """`throughput_ci`: batch means of the times between measured completions; the mean gap's
    interval [low, high] becomes throughput x [gap / high, gap / low]. With every gap the same
    it is the throughput itself; M/M/1 at load 0.8 (throughput = the arrival rate 0.1 jobs/ms)
    and the closed machine-repairman model (exact MVA) are held at 95% (a 200-run coverage and
    a fixed seed); the interval is as narrow as a Poisson count's (the departures of M/M/1
    are Poisson, Burke)."""
    d = schedlab.simulate("fcfs", arrival="det:10", size="det:5", jobs=20_000, warmup=0).summary
    assert d["throughput_ci"] == pytest.approx([d["throughput"]] * 2, rel=1e-12)
    reps = schedlab.simulate("fcfs", arrival="exp:10", size="exp:8", jobs=20_000, seed=11,
                             replications=200, keep_jobs=False)
    covered = [r.summary["throughput_ci"][0] <= 0.1 <= r.summary["throughput_ci"][1]
               for r in reps.runs]
    assert 0.89 <= np.mean(covered) <= 0.99, np.mean(covered)
    s = reps.runs[0].summary
    low, high = s["throughput_ci"]
    assert low < s["throughput"] < high and summary_units(s)["throughput_ci"] == "jobs/ms"
    # A Poisson count over the measured window: relative half-width 1.96 / sqrt(n).
    poisson = 1.96 / math.sqrt(s["jobs"])
    assert 0.5 * poisson < (high - low) / 2 / s["throughput"] < 2 * poisson
    closed = schedlab.simulate("fcfs", clients=5, think="exp:20", size="exp:5", jobs=100_000,
                               seed=2).summary
    expected = theory.mva(5, 20, [5])["throughput"]
    low, high = closed["throughput_ci"]
    assert low <= expected <= high and (high - low) / expected < 0.02


@pytest.mark.parametrize("jobs, batches", [(1000, 3), (1000, 7), (999, 10), (1000, 10)])
def test_batches_give_as_many_means_and_every_job_is_in_one(jobs, batches):
    """`batches = B` splits the measured jobs into B batches of sizes within one of each other
    (the first jobs % B batches hold one more). A last partial batch was dropped: 1,000 jobs in
    3 batches gave 2 means, and an interval from 2 batch means. Checked by hand against the
    per-job table, in completion order."""
    r = schedlab.simulate("fcfs", load=0.5, jobs=jobs, batches=batches, warmup=0, seed=5)
    means = r.summary["response_batch_means"]
    assert len(means) == batches
    response = r.jobs.sort_values("completion", kind="stable")["response"].to_numpy()
    size, extra = divmod(jobs, batches)
    bounds = np.cumsum([0] + [size + (i < extra) for i in range(batches)])
    want = [response[a:b].mean() for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    assert means == pytest.approx(want, rel=1e-12)
    assert bounds[-1] == jobs == r.summary["jobs"]


def test_a_mean_slowdown_that_is_infinite_in_theory_is_said_to_be():
    """E[T/S] under FCFS is 1 + E[W] E[1/S] (a job's wait does not depend on its size): with
    exp sizes E[1/S] is infinite, and a run's mean slowdown only grows with its length. With
    erlang:3,1 sizes E[1/S] = 3/2 and at load 0.5 E[W] = lambda E[S^2] / (2 (1 - rho)) =
    0.5 x 4/3 / 1 = 2/3: the mean slowdown is 2, which the simulator gives."""
    from schedlab.summary_rows import slowdown_warning

    r = schedlab.simulate("fcfs", load=0.5, size="erlang:3,1", jobs=400_000, seed=2,
                          keep_jobs=False)
    low, high = r.summary["slowdown_mean_ci"]
    assert low <= 2.0 <= high and high - low < 0.05, (low, high)
    assert slowdown_warning({"policy": "fcfs", "size": "erlang:3,1"}) is None
    for spec in ({"policy": "fcfs"}, {"policy": "fcfs", "size": "exp:1"},
                 {"policy": "rr", "params": {"quantum": 1}, "size": "hyperexp:1,3"},
                 {"policy": "sff", "classes": [{"size": "det:1"}, {"size": "uniform:0,2"}]},
                 {"policy": "lcfs", "params": {"preemptive": False}, "size": "erlang:1,2"}):
        assert "infinite in theory" in slowdown_warning(spec), spec
    # Policies that serve a short job at once or at a share of a CPU: finite.
    for policy in ("ps", "gps", "srpt", "psjf", "fb"):
        assert slowdown_warning({"policy": policy, "size": "exp:1"}) is None, policy
    assert slowdown_warning({"policy": "lcfs"}) is None  # preemptive by default
    assert slowdown_warning({"policy": "lcfs", "params": {"preemptive": "true"}}) is None
    assert slowdown_warning({"policy": "fcfs", "trace": "t.csv"}) is None
    # A size given as a number is a constant (it raised from parse_dist); sizes offset from 0
    # have E[1/S] finite; a delay every job pays makes even SRPT's short jobs wait.
    assert slowdown_warning({"policy": "fcfs", "size": 20}) is None
    assert slowdown_warning({"policy": "fcfs", "classes": [{"size": 2}, {"name": "b"}]}) \
        and "sizes exp:1 " in slowdown_warning({"policy": "fcfs", "classes": [{"size": 2}, {}]})
    assert slowdown_warning({"policy": "fcfs", "service_offset": 0.1}) is None
    assert "every job pays a delay" in slowdown_warning({"policy": "srpt", "dispatch_delay": 1})
    assert "every job pays a delay" in slowdown_warning({"policy": "ps", "bursts": 2,
                                                          "io": "exp:1"})
    out = subprocess.run([SCHEDLAB, "sim", "--load", "0.8", "--jobs", "2000"], capture_output=True,
                         text=True, timeout=60, env=cli_env())
    assert "WARNING: the mean slowdown is infinite in theory (fcfs" in " ".join(out.stdout.split())
    out = subprocess.run([SCHEDLAB, "sim", "--policy", "fcfs,srpt", "--load", "0.8", "--jobs",
                          "2000"], capture_output=True, text=True, timeout=60, env=cli_env())
    text = " ".join(out.stdout.split())
    assert "FCFS: WARNING: the mean slowdown is infinite" in text and "SRPT: WARNING" not in text


def test_pythons_results_carry_the_warnings_the_command_line_prints():
    # The infinite-slowdown WARNING was printed by `schedlab sim` only: a Result, its
    # replications and their notebook views said nothing of it.
    fcfs = schedlab.simulate("fcfs", load=0.8, jobs=2000)
    warning = next(n for n in fcfs.notes if n.startswith("WARNING"))
    assert "mean slowdown is infinite in theory (fcfs" in warning
    assert fcfs.notes[0].startswith("warm-up: ") and len(fcfs.notes) == 3
    assert repr(fcfs).endswith(", 1 WARNING in .notes>") and "\n" not in repr(fcfs)
    assert "mean slowdown is infinite in theory" in fcfs._repr_html_()
    srpt = schedlab.simulate("srpt", load=0.8, jobs=2000)
    assert not [n for n in srpt.notes if n.startswith("WARNING")]
    assert "WARNING" not in repr(srpt) and "WARNING" not in srpt._repr_html_()
    reps = schedlab.simulate("fcfs", load=0.8, jobs=2000, replications=2)
    assert [n[:50] for n in reps.notes] == [warning[:50]]
    import html

    assert "1 WARNING in .notes" in repr(reps) and html.escape(warning) in reps._repr_html_()
    # A precision not reached is named by replication.
    short = schedlab.simulate("srpt", load=0.8, precision=0.001, max_jobs=2000, replications=2)
    assert [n.split(":")[0] for n in short.notes] == ["replication 0", "replication 1"]
    assert all("precision 0.001 not reached" in n for n in short.notes)
    # ... and counted and shown as the warnings they are (the views counted only lines that
    # began with WARNING, none of the replications').
    assert repr(short).endswith(", 2 WARNINGs in .notes>"), repr(short)
    assert "replication 1: WARNING" in short._repr_html_()


def test_a_run_too_short_for_percentile_intervals_says_so():
    # 30 jobs: the mean has an interval (15 batches of 2), the percentiles none (fewer than
    # two sections of four batches' jobs): their cells were blank without a word.
    short = schedlab.simulate("fcfs", load=0.5, jobs=30)
    assert short.summary["response_mean_ci"] is not None
    assert all(not np.isfinite(short.summary[f"response_{q}_ci"]).all()
               for q in ("p50", "p95", "p99"))
    assert sum("the percentiles have no interval" in n for n in short.notes) == 1
    longer = schedlab.simulate("fcfs", load=0.5, jobs=3000)
    assert np.isfinite(longer.summary["response_p50_ci"]).all()
    assert not any("percentiles have no interval" in n for n in longer.notes)


def test_a_batch_of_one_shot_processes_has_no_interval_from_one_run(tmp_path):
    # 40 processes of 20 ms forked at once on 2 CPUs under FCFS: 20 rounds, the ith pair ends
    # at 20 i, so the mean is 20 x 21 / 2 = 210 ms exactly. Batch means of that ramp gave an
    # interval around an exact number (linux-policies/cpu.toml: "240 [179.7, 300.3]").
    one_shot = dict(clients=40, jobs=40, think="det:0", size="det:20", cpus=2)
    r = schedlab.simulate("fcfs", **one_shot)
    s = r.summary
    assert s["response_mean"] == 210.0 and s["one_shot_batch"] is True
    for key in ("response_mean", "response_p50", "response_p99", "wait_mean", "slowdown_mean",
                "throughput"):
        assert not np.isfinite(s[f"{key}_ci"]).any(), key
    assert s["ci_batches"] == 0
    assert sum("one-shot processes" in n for n in r.notes) == 1
    assert "no interval: one run of a one-shot batch" in repr(r)
    # Replications give the interval: of width 0 where nothing is random, around the mean of
    # the replications where the sizes are.
    assert schedlab.simulate("fcfs", replications=3, **one_shot).summary[
        "response_mean_ci"] == [210.0, 210.0]
    random = schedlab.simulate("fcfs", replications=4, **{**one_shot, "size": "exp:20"})
    low, high = random.summary["response_mean_ci"]
    assert low < random.summary["response_mean"] < high
    # Processes of several jobs each, or an open stream, are series with their own intervals.
    for spec in (dict(one_shot, jobs=400, clients=4), dict(load=0.5, jobs=400)):
        s = schedlab.simulate("fcfs", **spec).summary
        assert s["one_shot_batch"] is False and s["ci_batches"] > 0, spec
        assert np.isfinite(s["response_mean_ci"]).all(), spec
    # The os world decides it by the same code, from its per-job table.
    jobs = job_table(40).assign(client=range(40))
    real = os_summary(jobs)["summary"]
    assert real["one_shot_batch"] is True and not np.isfinite(real["response_mean_ci"]).any()
    assert os_summary(job_table(40))["summary"]["one_shot_batch"] is False
    # A sweep's stats table names why, even where the file asks for batch means (`batches`),
    # and the report says so under its table; the command line prints the reason once.
    exp = {"experiment": {"name": "one-shot", "world": "sim", "batches": 5},
           "workload": {"batch": 10, "size": "det:20"},
           "machine": {"cpus": 2}, "policy": [{"name": "fcfs", "label": "fcfs"},
                                                    {"name": "ps", "label": "ps"}]}
    res = schedlab.run(exp, out=tmp_path / "out")
    st = res.metric("response_mean").set_index("label")
    assert st.loc["fcfs", "mean"] == 60.0 and st.loc["ps", "mean"] == 100.0
    assert (st["method"] == summary_rows.ONE_SHOT_METHOD).all()
    assert st["ci_low"].isna().all() and st["ci_high"].isna().all()
    page = schedlab.report(tmp_path / "out")
    assert summary_rows.ONE_SHOT_METHOD in page.read_text()
    out = subprocess.run([SCHEDLAB, "sim", "--policy", "fcfs,ps", "--clients", "10", "--jobs",
                          "10", "--think", "det:0", "--size", "det:20", "--cpus", "2"],
                         capture_output=True, text=True, env=cli_env(), check=True).stdout
    assert "fcfs, ps: a batch of one-shot processes" in " ".join(out.lower().split())
    assert "too short to find" not in out


def test_batches_asked_for_give_the_means_interval_in_every_interface(tmp_path):
    # batches = 5: Student's t over the 5 batch means, centred on the mean of every job. An
    # experiment file's statistics did so; simulate and schedlab sim kept their own batches
    # ("15 batches of 128 jobs"): one key, two intervals for one run.
    from scipy import stats

    r = schedlab.simulate("fcfs", load=0.5, jobs=2000, seed=11, batches=5)
    s, means = r.summary, np.array(r.summary["response_batch_means"])
    half = stats.t.ppf(0.975, 4) * means.std(ddof=1) / math.sqrt(5)
    assert s["response_mean_ci"] == pytest.approx(
        [s["response_mean"] - half, s["response_mean"] + half], rel=1e-12)
    assert (s["ci_batches"], s["ci_batch_size"]) == (5, 400)
    res = schedlab.run({"experiment": {"name": "b5", "seed": 3, "batches": 5},
                        "workload": {"load": 0.5, "jobs": 2000}, "policy": [{"name": "fcfs"}]},
                       out=tmp_path / "b5")
    seed = int(res.summaries["seed"].iloc[0])
    row = res.metric("response_mean").iloc[0]
    one = schedlab.simulate("fcfs", load=0.5, jobs=2000, seed=seed, batches=5).summary
    assert [row["ci_low"], row["ci_high"]] == pytest.approx(one["response_mean_ci"], rel=1e-9)
    out = subprocess.run([SCHEDLAB, "sim", "--load", "0.5", "--jobs", "2000", "--seed", "11",
                          "--batches", "5"], capture_output=True, text=True, env=cli_env(),
                         check=True).stdout
    assert "95% intervals from 5 batches of 400 jobs" in " ".join(out.split())

"""M/M/1 at load 0.9: schedlab against SimPy and Ciw, measured in the same run, then schedlab's
throughput targets for FCFS, RR (quantum 0.1), PS and SRPT through schedlab's engine, each
beside the plain Rust reference loop (bench/refloop: the same generator and distributions, a
heap event list, no policy abstraction, nothing measured but the mean) as a ratio to the
limit of the machine, and the whole `schedlab sim` process against a whole SimPy process.

Jobs per second = completed jobs / wall seconds of one whole run (model set-up included), median
over --reps repetitions. Repetitions are interleaved (rep 1 of every case, then rep 2, ...) so a
burst of noise from other work on the machine is spread over all tools instead of landing on one.
The process is pinned to one CPU. Each tool's mean response time is printed beside the M/M/1
value as a check that the harness simulates the same system everywhere.

    .venv/bin/python mm1.py [--reps 5] [--cpu N] [--scale 1.0] [--out out/mm1.json] [--strict]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import ciw
import schedlab
import simpy
from scipy import integrate

LOAD = 0.9  # arrival rate, since the mean size is 1
MEAN_SIZE = 1.0
HERE = Path(__file__).resolve().parent

# jobs/s that schedlab must reach on one core (issue 2; RR raised by issue 12)
TARGETS = {"fcfs": 5_000_000, "rr": 3_000_000, "ps": 2_000_000, "srpt": 3_000_000}
# schedlab's jobs/s as a fraction of the reference loop's for the same policy (issue 12)
REFERENCE_TARGETS = {"fcfs": 0.65, "srpt": 0.5, "ps": 0.5}
REFLOOP = HERE.parent / "target" / "release" / "refloop"
# Whole processes (issue 12): `schedlab sim` on 20M jobs against a SimPy script on 100k.
WHOLE_JOBS = {"schedlab": 20_000_000, "simpy": 100_000}
WHOLE_TARGET = 100.0
POLICY_PARAMS: dict[str, dict[str, float]] = {"rr": {"quantum": 0.1}}

# Jobs per run at --scale 1: each run takes about 2 s on the reference machine.
DEFAULT_JOBS = {
    "schedlab fcfs": 10_000_000,
    "schedlab rr": 4_000_000,
    "schedlab ps": 10_000_000,
    "schedlab srpt": 10_000_000,
    "simpy": 200_000,
    "ciw": 100_000,
    "reference fcfs": 10_000_000,
    "reference rr": 4_000_000,
    "reference ps": 10_000_000,
    "reference srpt": 10_000_000,
}


# (completed jobs, mean response time, extra figures to record)
Outcome = tuple[int, float, dict[str, float]]
WORK_GAP_WARN = 1e-6  # relative |busy time - work served| above which a run is suspicious


# --- the three tools -------------------------------------------------------------------------

def run_schedlab(policy: str, jobs: int, seed: int) -> Outcome:
    r = schedlab.simulate(policy, load=LOAD, size=f"exp:{MEAN_SIZE:g}", jobs=jobs,
                          keep_jobs=False, seed=seed, **POLICY_PARAMS.get(policy, {}))
    s = r.summary
    # Busy time is the same for every work-conserving policy and equals the work served; a gap
    # means the engine lost or invented work (it is recorded and warned about, not fatal).
    gap = (s["busy_time"] - s["work_served"]) / s["work_served"]
    return (int(s["jobs"]) - int(s.get("unfinished", 0)), float(s["response_mean"]),
            {"busy_minus_work_rel": gap})


def run_reference(policy: str, jobs: int, seed: int, summary: bool = False
                  ) -> tuple[Outcome, float]:
    """The reference loop, as a process; its own clock times the loop alone (its set-up and
    the process start are left out, which favours the reference). `summary`: the FCFS loop
    also streams every job into schedlab's summary, the ceiling of any engine keeping it."""
    cmd = [str(REFLOOP), "--policy", policy, "--jobs", str(jobs), "--seed", str(seed),
           "--arrival", f"exp:{MEAN_SIZE / LOAD!r}", "--size", f"exp:{MEAN_SIZE:g}"]
    if summary:
        cmd.append("--summary")
    for k, v in POLICY_PARAMS.get(policy, {}).items():
        cmd += [f"--{k}", str(v)]
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return (int(out["jobs"]), float(out["response_mean"]), {}), float(out["seconds"])


SIMPY_SCRIPT = HERE / "simpy_mm1.py"


def whole_process(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - t0


def whole_cases() -> dict[str, list[str]]:
    bindir = Path(sys.executable).parent
    return {
        "schedlab": [str(bindir / "schedlab"), "sim", "--load", str(LOAD), "--size",
                     f"exp:{MEAN_SIZE:g}", "--jobs", str(WHOLE_JOBS["schedlab"]), "--json"],
        "simpy": [sys.executable, str(SIMPY_SCRIPT), str(WHOLE_JOBS["simpy"])],
    }


def run_simpy(jobs: int, seed: int) -> Outcome:
    """The textbook SimPy M/M/1: a source process, one process per customer, a Resource."""
    rng = random.Random(seed)
    env = simpy.Environment()
    server = simpy.Resource(env, capacity=1)
    responses: list[float] = []

    def customer(env: simpy.Environment):
        arrival = env.now
        with server.request() as req:
            yield req
            yield env.timeout(rng.expovariate(1.0 / MEAN_SIZE))
        responses.append(env.now - arrival)

    def source(env: simpy.Environment):
        for _ in range(jobs):
            yield env.timeout(rng.expovariate(LOAD / MEAN_SIZE))
            env.process(customer(env))

    env.process(source(env))
    env.run()  # until every customer has left
    return len(responses), statistics.fmean(responses), {}


def run_ciw(jobs: int, seed: int) -> Outcome:
    """Ciw's M/M/1, run to the simulated time in which about `jobs` jobs arrive."""
    ciw.seed(seed)
    network = ciw.create_network(
        arrival_distributions=[ciw.dists.Exponential(rate=LOAD / MEAN_SIZE)],
        service_distributions=[ciw.dists.Exponential(rate=1.0 / MEAN_SIZE)],
        number_of_servers=[1],
    )
    sim = ciw.Simulation(network)
    sim.simulate_until_max_time(jobs * MEAN_SIZE / LOAD)
    done = [r for r in sim.get_all_records() if r.record_type == "service"]
    return len(done), statistics.fmean(r.exit_date - r.arrival_date for r in done), {}


# --- theory, for the sanity check ---------------------------------------------------------------

def theory_mean_response(policy: str) -> float:
    """M/M/1 mean response time. FCFS, RR and PS: 1/(mu - lambda) (with exponential sizes every
    size-blind work-conserving policy has the same mean). SRPT: Schrage and Miller's formula."""
    lam, mu = LOAD / MEAN_SIZE, 1.0 / MEAN_SIZE
    if policy != "srpt":
        return 1.0 / (mu - lam)

    def rho(x: float) -> float:  # load made of jobs smaller than x
        return lam * (1 - math.exp(-mu * x) * (1 + mu * x)) / mu

    def second(x: float) -> float:  # int_0^x t^2 f(t) dt + x^2 (1 - F(x))
        return 2 / mu**2 * (1 - math.exp(-mu * x) * (1 + mu * x))

    def response(x: float) -> float:
        waiting = lam * second(x) / (2 * (1 - rho(x)) ** 2)
        residence = integrate.quad(lambda t: 1 / (1 - rho(t)), 0, x)[0]
        return waiting + residence

    return integrate.quad(lambda x: response(x) * mu * math.exp(-mu * x), 0, math.inf,
                          limit=200)[0]


def relative_stderr(jobs_total: int) -> float:
    """Approximate relative standard error of the mean response of an M/M/1 run with this many
    jobs (Whitt 1989: the time-average number in system has asymptotic variance
    2 rho (1 + rho) / (1 - rho)^4 per unit time, mu = 1). At load 0.9 it is ~11% for 30k jobs."""
    rho = LOAD
    horizon = jobs_total * MEAN_SIZE / LOAD
    mean_in_system = rho / (1 - rho)
    return math.sqrt(2 * rho * (1 + rho) / (1 - rho) ** 4 / horizon) / mean_in_system


# --- the harness ---------------------------------------------------------------------------

def pin(cpu: int | None) -> int | None:
    """Pins this process to one CPU (default: the last one it may use); returns it."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    cpu = allowed[-1] if cpu is None else cpu
    os.sched_setaffinity(0, {cpu})
    return cpu


def machine() -> dict[str, str | int | None]:
    model = None
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")),
                         None)
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu_model": model, "kernel": platform.release(),
            "python": platform.python_version()}


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5, help="repetitions; medians are reported")
    ap.add_argument("--cpu", type=int, default=None, help="CPU to pin to (default: the last)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every run's job count")
    ap.add_argument("--out", type=Path, default=HERE / "out" / "mm1.json")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args(argv)
    if args.reps < 1 or args.scale <= 0:
        ap.error("--reps must be >= 1 and --scale > 0")

    cpu = pin(args.cpu)
    jobs = {k: max(1000, int(v * args.scale)) for k, v in DEFAULT_JOBS.items()}
    jobs["reference fcfs+summary"] = jobs["reference fcfs"]
    cases: dict[str, Callable[[int], Outcome]] = {
        "schedlab fcfs": lambda s: run_schedlab("fcfs", jobs["schedlab fcfs"], s),
        "simpy": lambda s: run_simpy(jobs["simpy"], s),
        "ciw": lambda s: run_ciw(jobs["ciw"], s),
        "schedlab rr": lambda s: run_schedlab("rr", jobs["schedlab rr"], s),
        "schedlab ps": lambda s: run_schedlab("ps", jobs["schedlab ps"], s),
        "schedlab srpt": lambda s: run_schedlab("srpt", jobs["schedlab srpt"], s),
    }
    if not REFLOOP.exists():
        ap.error(f"{REFLOOP} is missing: make -C bench setup builds it")
    for policy in ("fcfs", "rr", "ps", "srpt"):
        cases[f"reference {policy}"] = (
            lambda s, p=policy: run_reference(p, jobs[f"reference {p}"], s))
    cases["reference fcfs+summary"] = (
        lambda s: run_reference("fcfs", jobs["reference fcfs"], s, summary=True))
    cases["whole schedlab"] = lambda s: (WHOLE_JOBS["schedlab"], math.nan, {})
    cases["whole simpy"] = lambda s: (WHOLE_JOBS["simpy"], math.nan, {})
    wholes = whole_cases()
    versions = {p: version(p) for p in ("schedlab", "simpy", "ciw")}
    print(f"M/M/1 at load {LOAD}, size exp:{MEAN_SIZE:g}; {args.reps} interleaved reps; "
          f"pinned to CPU {cpu}; " + ", ".join(f"{k} {v}" for k, v in versions.items()),
          flush=True)

    # One small run first: `import schedlab` loads pandas on the first simulate(), which would
    # otherwise be charged to the first repetition of the first case.
    schedlab.simulate("fcfs", load=0.5, jobs=1000, keep_jobs=False)
    samples: dict[str, list[dict[str, float]]] = {k: [] for k in cases}
    for rep in range(args.reps):
        for name, run in cases.items():
            t0 = time.perf_counter()
            outcome = run(rep + 1)
            wall = time.perf_counter() - t0
            if name.startswith("reference"):
                outcome, wall = outcome
            elif name.startswith("whole"):
                wall = whole_process(wholes[name.split()[1]])
            done, mean, extra = outcome
            samples[name].append({"seed": rep + 1, "jobs": done, "seconds": wall,
                                  "jobs_per_s": done / wall, "mean_response": mean, **extra})
        print(f"  rep {rep + 1}/{args.reps}: " + ", ".join(
            f"{k} {samples[k][-1]['jobs_per_s'] / 1e6:.3f}M/s" for k in cases), flush=True)

    summary: dict[str, dict[str, float | int | str | None]] = {}
    for name, runs in samples.items():
        rates = [r["jobs_per_s"] for r in runs]
        total = sum(r["jobs"] for r in runs)
        if name.startswith("whole"):
            summary[name] = {"jobs_per_run": runs[0]["jobs"],
                             "median_jobs_per_s": statistics.median(rates),
                             "median_seconds": statistics.median(r["seconds"] for r in runs),
                             "command": " ".join(wholes[name.split()[1]])}
            continue
        mean = sum(r["mean_response"] * r["jobs"] for r in runs) / total  # pooled over reps
        policy = (name.split()[-1].split("+")[0] if name.startswith(("schedlab", "reference"))
                  else "fcfs")
        theory = theory_mean_response(policy)
        dev = mean / theory - 1
        se = relative_stderr(total)
        # Off by more than 10% is a harness bug unless the run is that short that chance
        # explains it (more than 3 standard errors then means a bug all the same).
        check = "ok" if abs(dev) <= 0.10 else ("noisy" if abs(dev) <= 3 * se else "BUG?")
        summary[name] = {
            "jobs_per_run": jobs[name], "median_jobs_per_s": statistics.median(rates),
            "min_jobs_per_s": min(rates), "max_jobs_per_s": max(rates),
            "median_seconds": statistics.median(r["seconds"] for r in runs),
            "mean_response": mean, "theory_mean_response": theory, "deviation": dev,
            "relative_stderr": se, "check": check,
        }

    def ratio(a: str, b: str) -> float:
        """Median over repetitions of the ratio within each repetition."""
        return statistics.median(x["jobs_per_s"] / y["jobs_per_s"]
                                 for x, y in zip(samples[a], samples[b], strict=True))

    ratios = {"schedlab/simpy": ratio("schedlab fcfs", "simpy"),
              "schedlab/ciw": ratio("schedlab fcfs", "ciw"),
              "whole schedlab/whole simpy": ratio("whole schedlab", "whole simpy")}
    for policy in ("fcfs", "rr", "ps", "srpt"):
        ratios[f"{policy}/reference"] = ratio(f"schedlab {policy}", f"reference {policy}")
    ratios["reference+summary/reference"] = ratio("reference fcfs+summary", "reference fcfs")

    print(f"\nM/M/1 FCFS, load {LOAD}: jobs/s, median of {args.reps} (min..max); mean response "
          f"pooled over reps vs theory {theory_mean_response('fcfs'):.2f}")
    head = (f"{'tool':<10} {'jobs/run':>12} {'jobs/s':>12} {'min..max':>25} "
            f"{'mean resp':>10} {'dev':>7} {'±se':>6}  check")
    print(head)
    print("-" * len(head))
    for name, label in (("schedlab fcfs", "schedlab"), ("simpy", "SimPy"), ("ciw", "Ciw")):
        s = summary[name]
        print(f"{label:<10} {s['jobs_per_run']:>12,} {fmt_rate(s['median_jobs_per_s']):>12} "
              f"{fmt_rate(s['min_jobs_per_s']) + '..' + fmt_rate(s['max_jobs_per_s']):>25} "
              f"{s['mean_response']:>10.3f} {s['deviation']:>+7.1%} {s['relative_stderr']:>6.1%}"
              f"  {s['check']}")
    print(f"ratios: schedlab/SimPy = {ratios['schedlab/simpy']:,.1f}x, "
          f"schedlab/Ciw = {ratios['schedlab/ciw']:,.1f}x")
    ws, wp = summary["whole schedlab"], summary["whole simpy"]
    whole = ratios["whole schedlab/whole simpy"]
    print(f"\nwhole processes: schedlab sim, {ws['jobs_per_run']:,} jobs in "
          f"{ws['median_seconds']:.2f} s; SimPy, {wp['jobs_per_run']:,} jobs in "
          f"{wp['median_seconds']:.2f} s; ratio of jobs/s {whole:,.1f}x (target "
          f"{WHOLE_TARGET:g}x: {'PASS' if whole >= WHOLE_TARGET else 'FAIL'})")

    print("\nagainst the reference loop (same policy, same jobs): schedlab jobs/s / "
          "reference jobs/s, median of the ratios within each repetition")
    for policy in ("fcfs", "rr", "ps", "srpt"):
        r = ratios[f"{policy}/reference"]
        ref = summary[f"reference {policy}"]
        target = REFERENCE_TARGETS.get(policy)
        verdict = "" if target is None else (
            f"target {target:g}: {'PASS' if r >= target else 'FAIL'}")
        print(f"  {policy:<5} reference {fmt_rate(ref['median_jobs_per_s']):>12} jobs/s "
              f"(mean {ref['mean_response']:.3f}), ratio {r:.3f}  {verdict}")
    print(f"  the FCFS reference streaming every job into schedlab's summary runs at "
          f"{ratios['reference+summary/reference']:.3f} of the reference: the ceiling of any "
          "engine that keeps today's summary")

    print(f"\nschedlab targets, one core, load {LOAD}, size exp:{MEAN_SIZE:g}")
    head = (f"{'policy':<12} {'jobs/run':>12} {'jobs/s':>12} {'min..max':>25} {'target':>12} "
            f"{'mean resp':>10} {'theory':>7}  result")
    print(head)
    print("-" * len(head))
    targets = {}
    for policy, target in TARGETS.items():
        s = summary[f"schedlab {policy}"]
        passed = s["median_jobs_per_s"] >= target
        targets[policy] = {"target_jobs_per_s": target, "median_jobs_per_s":
                           s["median_jobs_per_s"], "pass": passed,
                           "params": POLICY_PARAMS.get(policy, {})}
        label = policy + "".join(f" q={v:g}" for v in POLICY_PARAMS.get(policy, {}).values())
        verdict = "PASS" if passed else "FAIL"
        if s["check"] != "ok":
            verdict += f" ({s['check']})"
        print(f"{label:<12} {s['jobs_per_run']:>12,} {fmt_rate(s['median_jobs_per_s']):>12} "
              f"{fmt_rate(s['min_jobs_per_s']) + '..' + fmt_rate(s['max_jobs_per_s']):>25} "
              f"{target:>12,} {s['mean_response']:>10.3f} {s['theory_mean_response']:>7.3f}  "
              f"{verdict}")

    for name, runs in samples.items():
        gaps = [r["busy_minus_work_rel"] for r in runs if "busy_minus_work_rel" in r]
        worst = max(gaps, key=abs, default=0.0)
        if gaps:
            summary[name]["worst_busy_minus_work_rel"] = worst
        if abs(worst) > WORK_GAP_WARN:
            print(f"WARNING {name}: busy time - work served = {worst:+.2e} of the work served "
                  "(should be ~0 for a work-conserving policy): the engine loses or invents work")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "benchmark": "mm1", "date": dt.datetime.now().isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]), "reps": args.reps,
        "scale": args.scale, "pinned_cpu": cpu, "machine": machine(), "versions": versions,
        "load": LOAD, "size": f"exp:{MEAN_SIZE:g}", "summary": summary, "ratios": ratios,
        "targets": targets, "samples": samples,
    }
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(tmp, args.out)
    print(f"\nwrote {args.out}")
    missed = [p for p, t in targets.items() if not t["pass"]]
    missed += [f"{p}/reference" for p, t in REFERENCE_TARGETS.items()
               if ratios[f"{p}/reference"] < t]
    if whole < WHOLE_TARGET:
        missed.append("whole schedlab/whole simpy")
    if missed:
        print(f"missed targets: {', '.join(missed)}")
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Same bits across builds (issue 12): digests of the summary and the per-job table of a set of
runs covering every policy and every engine path (open and closed workloads, classes, I/O
bursts, threads with a timeslice, per-CPU runqueues under every balancer, traces of boosts,
runs until precise and with automatic warm-up, the calibrated model's terms). Run it under
two builds and compare:

    .venv/bin/python bits.py > new.txt
    PYTHONPATH=/path/to/old/python .venv/bin/python bits.py > old.txt && diff old.txt new.txt

Prints one line per run: its name and a SHA-256 of the summary (JSON, floats written
exactly) and of the per-job table (raw column bytes). `--without KEY` (repeatable) leaves a
summary key out: a build that adds a key compares with one before it on the others.
"""

from __future__ import annotations

import argparse
import hashlib
import sys

import schedlab
from schedlab.jsonio import dumps
from schedlab.vocabulary import policy_catalog

OPEN = dict(load=0.85, size="hyperexp:1,3", jobs=20_000, seed=11)
CLOSED = dict(clients=6, think="exp:2", size="exp:1", jobs=20_000, seed=12)
SMP = dict(clients=40, think="exp:3", size="exp:1", jobs=30_000, cpus=4, runqueues="per-cpu",
           seed=13)


def cases() -> list[tuple[str, str, dict]]:
    out = []
    for p in (p["name"] for p in policy_catalog()):
        extra = {"classes": [{"size": "exp:1", "deadline": 5}]} if p == "edf" else {}
        out.append((f"{p} open", p, {**OPEN, **extra}))
        out.append((f"{p} closed", p, {**CLOSED, **extra}))
        out.append((f"{p} 2 cpus", p, {**OPEN, "cpus": 2, **extra}))
        out.append((f"{p} per-cpu linux", p, {**SMP, "balancer": "linux", **extra}))
    for balancer in ("none", "linux", "windows", "steal"):
        out.append((f"rr smp {balancer}", "rr", {**SMP, "balancer": balancer, "quantum": 1}))
    out += [
        ("cfs threads", "cfs", {**SMP, "timeslice": 4, "balancer": "linux"}),
        ("rr io", "rr", {**CLOSED, "bursts": 3, "io": "exp:1", "quantum": 0.5}),
        ("priority classes", "priority", {**OPEN, "classes": [
            {"name": "a", "fraction": 0.3, "priority": 1, "size": "exp:0.5"},
            {"name": "b", "fraction": 0.7, "priority": 2, "size": "exp:1.5"}]}),
        ("mlfq windows boost", "mlfq", {**SMP, "boost": "windows", "balancer": "windows",
                                        "timeslice": 2}),
        ("fcfs auto warm-up", "fcfs", {**OPEN, "warmup": "auto", "jobs": 50_000}),
        ("srpt precise", "srpt", {**OPEN, "precision": 0.05, "max_jobs": 200_000}),
        ("rr switch cost", "rr", {**OPEN, "context_switch": 0.01, "quantum": 0.2}),
        ("fcfs 10M", "fcfs", dict(load=0.9, size="exp:1", jobs=10_000_000, seed=1,
                                  keep_jobs=False)),
        # The calibrated model's terms (issue 14): the server's bounded buffer and costs, the
        # kernel's wake-ups and the dispatcher's work, a drained run of a fixed length.
        ("fcfs server model", "fcfs", {**CLOSED, "cpus": 2, "buffer": 2, "start_cost": 0.05,
                                       "context_switch": 0.01, "turn_cost": 0.005,
                                       "service_scale": 1.1, "service_offset": 0.02,
                                       "dispatch_delay": 0.03, "idle_wake": 0.02}),
        ("rr server model", "rr", {**CLOSED, "cpus": 2, "buffer": 3, "quantum": 0.4,
                                   "turn_cost": 0.01, "idle_wake": 0.02, "end_cost": 0.01}),
        ("rr os model", "rr", {**CLOSED, "cpus": 2, "runqueues": "per-cpu", "quantum": 0.5,
                               "bursts": 3, "io": "exp:1", "final_io": True,
                               "wake_delay": 0.02, "dispatcher_cost": 0.01,
                               "end_cost": 0.02, "migration_cost": 0.01}),
        ("fcfs drained", "fcfs", {**OPEN, "jobs": None, "time": 5_000, "drain": True}),
        # The one-CPU loop's own paths: costs on one CPU (a preemption inside a run's
        # overhead, a turn, an idle wake-up), a time limit that ends a run mid-job, a warm-up
        # time.
        ("srpt one cpu costs", "srpt", {**OPEN, "start_cost": 0.05, "context_switch": 0.02,
                                        "turn_cost": 0.01, "idle_wake": 0.03}),
        ("rr one cpu costs", "rr", {**OPEN, "quantum": 0.3, "start_cost": 0.05,
                                    "turn_cost": 0.01, "idle_wake": 0.03}),
        ("psjf time limit", "psjf", {**OPEN, "jobs": None, "time": 5_000}),
        ("fcfs warm-up time", "fcfs", {**OPEN, "warmup_time": 500}),
        # The fluid one-CPU loop's: a time limit inside a busy period, weighted classes,
        # FB's regroupings with a quantum, a grid of arrivals that meets completions.
        ("ps time limit", "ps", {**OPEN, "jobs": None, "time": 5_000}),
        ("gps weighted classes", "gps", {**OPEN, "classes": [
            {"name": "a", "fraction": 0.4, "weight": 3, "size": "exp:0.5"},
            {"name": "b", "fraction": 0.6, "weight": 1, "size": "exp:1.5"}]}),
        ("fb quantum", "fb", {**OPEN, "quantum": 0.25, "warmup_time": 500}),
        ("ps grid", "ps", {**OPEN, "load": None, "arrival": "det:1", "size": "det:1",
                           "allow_unstable": True}),
    ]
    return out


def digest(r: schedlab.Result, without: frozenset[str] = frozenset()) -> str:
    h = hashlib.sha256(dumps({k: v for k, v in r.summary.items()
                              if k not in without}).encode())
    for column in r.jobs.columns:
        h.update(r.jobs[column].to_numpy().tobytes())
    return h.hexdigest()[:16]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--without", action="append", default=[], metavar="KEY",
                    help="a summary key to leave out of the digests")
    without = frozenset(ap.parse_args().without)
    for name, policy, spec in cases():
        try:
            line = digest(schedlab.simulate(policy, **spec), without)
        except schedlab.SpecError as e:
            line = f"refused: {e}"
        print(f"{name:<28} {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

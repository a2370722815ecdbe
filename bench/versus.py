"""The simulator against another build of itself: the same engine cases run by two Python
interpreters (this build and a baseline, e.g. a worktree of the last release in its own venv),
interleaved and pinned to one CPU, so a change of the engine is measured as a ratio within one
run. Cases: M/M/1 at load 0.9 for FCFS, RR (quantum 0.1), PS and SRPT (bench/mm1.py's), and the
64-CPU per-CPU RR case of bench/smp.py.

    .venv/bin/python versus.py --baseline /path/to/old/.venv/bin/python [--reps 5] [--cpu N]

Each repetition runs every case once under each build, in alternating order; throughput is
jobs (or events) per wall second of the `simulate` calls alone, median over repetitions.

    .venv/bin/python versus.py --baseline ... --callgrind

counts instead the instructions executed inside `simulate` (valgrind's callgrind, each case
scaled down 20 times, one run per build): deterministic, and blind to what moves wall time by
a percent or two between builds of the same code (its layout in memory).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

# warmup = 0: an open workload's default is "auto" since issue 11 (pilot runs first), which a
# build from before it does not have; both builds then simulate the same jobs.
CASES = {
    "M/M/1 FCFS": ("jobs", dict(policy="fcfs", load=0.9, size="exp:1", jobs=5_000_000,
                                warmup=0)),
    "M/M/1 RR q=0.1": ("jobs", dict(policy="rr", quantum=0.1, load=0.9, size="exp:1",
                                    jobs=2_000_000, warmup=0)),
    "M/M/1 PS": ("jobs", dict(policy="ps", load=0.9, size="exp:1", jobs=5_000_000, warmup=0)),
    "M/M/1 SRPT": ("jobs", dict(policy="srpt", load=0.9, size="exp:1", jobs=5_000_000,
                                warmup=0)),
    "64 CPUs per-CPU RR, linux balancer, 10,000 tasks": ("events", dict(
        policy="rr", quantum=0.5, clients=10_000, size="exp:2", think="exp:400", cpus=64,
        runqueues="per-cpu", placement="last", balancer="linux", time=20_000)),
    # Short runs, as a sweep's points or a test suite make them (`repeat`: the child makes
    # that many calls, seeds one after the other, and times them together), with the
    # defaults a user gets: automatic warm-up, the per-job table kept.
    "M/M/1 FCFS, 200 runs of 1,000 jobs": ("jobs", dict(
        policy="fcfs", load=0.9, size="exp:1", jobs=1_000, repeat=200, keep_jobs=True)),
    "M/M/1 FCFS, 50 runs of 20,000 jobs": ("jobs", dict(
        policy="fcfs", load=0.9, size="exp:1", jobs=20_000, repeat=50, keep_jobs=True)),
}

CHILD = """
import json, os, sys, time
os.sched_setaffinity(0, {%(cpu)d})
import schedlab
spec = json.loads(sys.argv[1])
# One tiny run first: since issue 12 the first simulate() imports the API (pandas), which must
# not count in the time of a build that has it against one that imported it with the package.
schedlab.simulate(keep_jobs=False, policy="fcfs", load=0.5, size="exp:1", jobs=100, warmup=0)
repeat = spec.pop("repeat", 1)
spec.setdefault("keep_jobs", False)
jobs = events = 0
t0 = time.perf_counter()
for i in range(repeat):
    s = schedlab.simulate(**{**spec, "seed": spec["seed"] + i}).summary
    jobs, events = jobs + s["jobs"], events + s["events"]
wall = time.perf_counter() - t0
print(json.dumps({"wall": wall, "jobs": jobs, "events": events,
                  "response_mean": s["response_mean"]}))
"""


CALLGRIND_SCALE = 20


def instructions(python: str, spec: dict) -> int:
    """Instructions executed inside `simulate` (inclusive), counted by callgrind."""
    small = dict(spec)
    if small.pop("repeat", None) is None:  # a short case: one of its runs, whole
        for key in ("jobs", "time"):
            if key in small:
                small[key] = small[key] // CALLGRIND_SCALE
    small.setdefault("keep_jobs", False)
    child = "import json, sys, schedlab; schedlab.simulate(**json.loads(sys.argv[1]))"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", python,
                        "-c", child, json.dumps(small)], capture_output=True, check=True,
                       timeout=3600)
        text = subprocess.run(["callgrind_annotate", "--inclusive=yes", str(out)],
                              capture_output=True, text=True, check=True).stdout
    for line in text.splitlines():
        if "__pyfunction_simulate" in line:
            return int(line.split()[0].replace(",", ""))
    raise RuntimeError("callgrind_annotate shows no __pyfunction_simulate")


def one(python: str, spec: dict, cpu: int) -> dict:
    out = subprocess.run([python, "-c", CHILD % {"cpu": cpu}, json.dumps(spec)],
                         capture_output=True, text=True, check=True, timeout=600)
    return json.loads(out.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", required=True, help="the baseline build's Python")
    ap.add_argument("--current", default=sys.executable, help="this build's Python")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--cpu", type=int, default=None, help="CPU to pin to (default: the last)")
    ap.add_argument("--out", default=None, help="default out/versus.json "
                    "(out/versus-callgrind.json with --callgrind)")
    ap.add_argument("--callgrind", action="store_true",
                    help="count instructions with valgrind's callgrind instead of timing")
    args = ap.parse_args()
    cpu = args.cpu if args.cpu is not None else max(os.sched_getaffinity(0))
    builds = {"current": args.current, "baseline": args.baseline}
    if args.callgrind:
        return count_instructions(builds, Path(args.out or HERE / "out" /
                                               "versus-callgrind.json"))
    args.out = args.out or str(HERE / "out" / "versus.json")
    runs: dict[str, dict[str, list[dict]]] = {c: {b: [] for b in builds} for c in CASES}
    for rep in range(args.reps):
        order = list(builds) if rep % 2 == 0 else list(reversed(builds))
        for case, (_unit, spec) in CASES.items():
            for b in order:
                runs[case][b].append(one(builds[b], {**spec, "seed": rep + 1}, cpu))
    print(f"pinned to CPU {cpu}; median of {args.reps} interleaved repetitions")
    print(f"{'case':<52} {'current':>12} {'baseline':>12} {'ratio':>7}  unit/s")
    results = {}
    for case, (unit, _spec) in CASES.items():
        rate = {b: [r[unit] / r["wall"] for r in runs[case][b]] for b in builds}
        ratios = [c / b for c, b in zip(rate["current"], rate["baseline"], strict=True)]
        med = {b: statistics.median(v) for b, v in rate.items()}
        results[case] = {"unit": unit, "median": med, "ratio_median": statistics.median(ratios),
                         "ratios": ratios, "runs": runs[case]}
        same = {round(r["response_mean"], 9) for b in builds for r in runs[case][b][:1]}
        print(f"{case:<52} {med['current']:>12,.0f} {med['baseline']:>12,.0f} "
              f"{statistics.median(ratios):>7.3f}  {unit}"
              + ("" if len(same) == 1 else f"  (mean response differs: {sorted(same)})"))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"date": dt.datetime.now().isoformat(timespec="seconds"),
                               "cpu": cpu, "reps": args.reps, "builds": builds,
                               "results": results}, indent=2))
    return 0


def count_instructions(builds: dict[str, str], out: Path) -> int:
    print(f"instructions inside simulate (callgrind), each case scaled down {CALLGRIND_SCALE}x")
    print(f"{'case':<52} {'current':>15} {'baseline':>15} {'ratio':>7}")
    results = {}
    for case, (_unit, spec) in CASES.items():
        n = {b: instructions(py, {**spec, "seed": 1}) for b, py in builds.items()}
        ratio = n["current"] / n["baseline"]
        results[case] = {"instructions": n, "ratio": ratio}
        print(f"{case:<52} {n['current']:>15,} {n['baseline']:>15,} {ratio:>7.4f}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"date": dt.datetime.now().isoformat(timespec="seconds"),
                               "scale": CALLGRIND_SCALE, "builds": builds,
                               "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

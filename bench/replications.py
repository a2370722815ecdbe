"""Replications inside one call (issue 12): `simulate(replications=8)` of a 10M-job M/M/1 FCFS
run at load 0.9, on every core, against the same 8 runs one after the other (`workers=1`),
interleaved; the ratio is taken within each repetition and its median reported. Both give the
same summaries, which this script checks.

    .venv/bin/python replications.py [--reps 5] [--replications 8] [--jobs 10000000]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import time
from pathlib import Path

import schedlab
from schedlab.jsonio import dumps

HERE = Path(__file__).resolve().parent
TARGET = 0.6  # wall of the parallel call / wall of the sequential one, at most


def timed(workers: int, replications: int, jobs: int) -> tuple[float, list[str]]:
    t0 = time.perf_counter()
    rep = schedlab.simulate("fcfs", load=0.9, size="exp:1", jobs=jobs, keep_jobs=False,
                            replications=replications, workers=workers)
    wall = time.perf_counter() - t0
    return wall, [dumps(r.summary) for r in rep.runs]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--replications", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=10_000_000)
    ap.add_argument("--out", type=Path, default=HERE / "out" / "replications.json")
    args = ap.parse_args(argv)
    cores = len(os.sched_getaffinity(0))
    print(f"{args.replications} replications of {args.jobs:,} jobs (M/M/1 FCFS, load 0.9); "
          f"{cores} cores; {args.reps} interleaved repetitions", flush=True)
    rows = []
    for rep in range(args.reps):
        parallel, a = timed(cores, args.replications, args.jobs)
        sequential, b = timed(1, args.replications, args.jobs)
        if a != b:
            print("ERROR: the parallel call gave other summaries than the sequential one")
            return 1
        rows.append({"parallel_s": parallel, "sequential_s": sequential,
                     "ratio": parallel / sequential})
        print(f"  rep {rep + 1}: parallel {parallel:.2f} s, one after the other "
              f"{sequential:.2f} s, ratio {parallel / sequential:.3f}", flush=True)
    ratio = statistics.median(r["ratio"] for r in rows)
    print(f"median ratio {ratio:.3f} (target <= {TARGET}): {'PASS' if ratio <= TARGET else 'FAIL'}"
          f"; median walls {statistics.median(r['parallel_s'] for r in rows):.2f} s against "
          f"{statistics.median(r['sequential_s'] for r in rows):.2f} s; same summaries")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "benchmark": "replications", "date": dt.datetime.now().isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]), "cores": cores,
        "replications": args.replications, "jobs": args.jobs, "rows": rows,
        "median_ratio": ratio, "target": TARGET}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

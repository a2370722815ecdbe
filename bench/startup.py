"""How long the command line takes to start (issue 12): whole processes, wall time, median of
interleaved repetitions, beside the interpreter alone and the imports it may or may not pay
for, measured in the same run.

    .venv/bin/python startup.py [--reps 5] [--schedlab PATH] [--cpu N]

Writes bench/out/startup.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def cases(py: str, schedlab: str) -> dict[str, list[str]]:
    return {
        "python -c pass": [py, "-c", "pass"],
        "python -c 'import numpy'": [py, "-c", "import numpy"],
        "python -c 'import pandas'": [py, "-c", "import pandas"],
        "schedlab --help": [schedlab, "--help"],
        "schedlab policies": [schedlab, "policies"],
        "schedlab sim --load 0.9 --jobs 100 --json": [schedlab, "sim", "--load", "0.9",
                                                      "--jobs", "100", "--json"],
        "schedlab sim --load 0.9 --jobs 100": [schedlab, "sim", "--load", "0.9",
                                               "--jobs", "100"],
        "schedlab sim --load 0.9 --jobs 100 --replications 4": [
            schedlab, "sim", "--load", "0.9", "--jobs", "100", "--replications", "4"],
        "schedlab sim --load 0.9 --jobs 20000000 --json": [schedlab, "sim", "--load", "0.9",
                                                           "--jobs", "20000000", "--json"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--schedlab", default=str(Path(sys.executable).with_name("schedlab")))
    ap.add_argument("--cpu", type=int, help="pin to this CPU")
    args = ap.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    todo = cases(sys.executable, args.schedlab)
    times: dict[str, list[float]] = {name: [] for name in todo}
    for _ in range(args.reps):
        for name, argv in todo.items():  # interleaved: a noisy moment hits every case
            t0 = time.perf_counter()
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - t0)
    out = {"reps": args.reps, "cpu": args.cpu, "seconds": times,
           "median": {k: statistics.median(v) for k, v in times.items()}}
    (HERE / "out").mkdir(exist_ok=True)
    (HERE / "out" / "startup.json").write_text(json.dumps(out, indent=2))
    print(f"| command | median (s) | all {args.reps} (s) |\n| --- | ---: | --- |")
    for name, v in times.items():
        print(f"| `{name}` | {statistics.median(v):.3f} | "
              + " / ".join(f"{x:.3f}" for x in v) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

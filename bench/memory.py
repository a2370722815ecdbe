"""Memory of a long run that keeps only the summary: M/M/1 FCFS at load 0.9, size exp:1, with
keep_jobs=False, in a child process, at growing job counts up to 100 million. Reports each child's
peak resident set size (ru_maxrss, KiB on Linux) against the 1 GiB target, and the elapsed time.
A bounded run shows the same peak at 1M and at 100M jobs.

    .venv/bin/python memory.py [--jobs 1000000 10000000 100000000] [--cpu N] [--out out/memory.json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET_KIB = 1024 * 1024  # 1 GiB
LOAD = 0.9

# Runs in the child (argv: jobs, cpu, load): pinned, one simulation; prints the summary and the
# simulate() time.
CHILD = """
import json, os, sys, time
cpu = int(sys.argv[2])
if cpu >= 0 and hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {cpu})
import schedlab
t0 = time.perf_counter()
r = schedlab.simulate("fcfs", load=float(sys.argv[3]), size="exp:1", jobs=int(sys.argv[1]),
                      keep_jobs=False, seed=1)
s = r.summary
print(json.dumps({"seconds": time.perf_counter() - t0, "jobs": s["jobs"],
                  "response_mean": s["response_mean"], "kept_rows": len(r.jobs)}))
"""


def run_child(jobs: int, cpu: int) -> dict[str, float | int]:
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(jobs), str(cpu), str(LOAD)],
                            stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage
    proc.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"child for {jobs:,} jobs failed with exit code {proc.returncode}")
    child = json.loads(out)
    return {"jobs": jobs, "peak_rss_kib": usage.ru_maxrss, "elapsed_s": elapsed,
            "simulate_s": child["seconds"], "jobs_per_s": child["jobs"] / child["seconds"],
            "completed": child["jobs"], "response_mean": child["response_mean"],
            "kept_rows": child["kept_rows"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, nargs="+", default=[1_000_000, 10_000_000, 100_000_000],
                    help="job counts to run, one child each; the target applies to the largest")
    ap.add_argument("--cpu", type=int, default=None,
                    help="CPU to pin the child to (default: the last allowed; -1: no pinning)")
    ap.add_argument("--out", type=Path, default=HERE / "out" / "memory.json")
    args = ap.parse_args(argv)
    cpu = args.cpu
    if cpu is None:
        cpu = max(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else -1

    print(f"M/M/1 FCFS, load {LOAD}, size exp:1, keep_jobs=False; one child per run, "
          f"pinned to CPU {cpu}; target peak RSS < 1 GiB for the largest", flush=True)
    head = (f"{'jobs':>13} {'peak RSS MiB':>13} {'elapsed s':>10} {'simulate s':>11} "
            f"{'jobs/s':>12} {'mean resp':>10}")
    print(head)
    print("-" * len(head), flush=True)
    runs = []
    for jobs in sorted(args.jobs):
        r = run_child(jobs, cpu)
        runs.append(r)
        print(f"{jobs:>13,} {r['peak_rss_kib'] / 1024:>13.1f} {r['elapsed_s']:>10.2f} "
              f"{r['simulate_s']:>11.2f} {r['jobs_per_s']:>12,.0f} {r['response_mean']:>10.3f}",
              flush=True)

    largest = runs[-1]
    all_children_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    passed = largest["peak_rss_kib"] < TARGET_KIB and largest["kept_rows"] == 0
    print(f"\n{largest['jobs']:,} jobs: peak RSS {largest['peak_rss_kib']:,} KiB "
          f"({largest['peak_rss_kib'] / 1024:.1f} MiB) vs target < {TARGET_KIB:,} KiB (1 GiB): "
          f"{'PASS' if passed else 'FAIL'}; elapsed {largest['elapsed_s']:.1f} s "
          f"(RUSAGE_CHILDREN max over all children: {all_children_kib:,} KiB)")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "benchmark": "memory", "date": dt.datetime.now().isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]), "pinned_cpu": cpu,
        "kernel": platform.release(), "nproc": os.cpu_count(), "target_kib": TARGET_KIB,
        "runs": runs, "rusage_children_max_kib": all_children_kib, "pass": passed,
    }
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(tmp, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

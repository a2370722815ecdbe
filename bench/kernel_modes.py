"""Why a tiny process's cost cannot be calibrated to 5% on this machine (issue 14): runs one
batch of tiny one-shot processes through the dispatcher again and again, and beside each run
two probes of the machine's speed: user-space work (the reference loop, pinned to each CPU)
and kernel work (the reads of /proc the coordinator and each worker make, `measure_cpu_ms`,
which the os world reports in every run).

    .venv/bin/python kernel_modes.py [--runs 20] [--cpus 2] [--batch 50]

With `--target N`, the probe is the batch itself: each run is a batch of `--batch` tiny
processes, then one of N (the xv6 file's switch-overhead test has 200), then `--batch` again,
seconds apart: whether a process's cost measured just before (or around) a run predicts the
run's, which a model that follows the machine would need.

Prints one line per run and writes bench/out/kernel_modes.json (kernel_probe.json with
`--target`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REFLOOP = HERE.parent / "target" / "release" / "refloop"


def user_probe() -> list[float]:
    """ms the reference loop takes for 1M FCFS jobs, pinned to each CPU in turn."""
    out = []
    for cpu in sorted(os.sched_getaffinity(0)):
        r = subprocess.run(["taskset", "-c", str(cpu), str(REFLOOP), "--jobs", "1000000"],
                           capture_output=True, text=True, check=True)
        out.append(1000 * json.loads(r.stdout)["seconds"])
    return out


def batch_spec(batch: int, cpus: int, seed: int) -> dict:
    """Tiny one-shot processes (0.01 ms of CPU) through the dispatcher's RR, as in the
    calibration's starts and the xv6 file's switch-overhead test."""
    return {"batch": batch, "size": "det:0.01", "cpus": cpus, "seed": seed,
            "quiet_wait": 2_000, "policy": "rr", "enforce": "fifo",
            "params": {"quantum": 10.0}}


def cost_of(summary: dict, batch: int, cpus: int) -> float:
    """ms of a CPU a process of a batch took: the batch's span (first fork to last exit)
    spread over its processes, less a process's own CPU time. Both modes read it so."""
    return float(summary["makespan"]) * cpus / batch - 0.01


def per_process_ms(batch: int, cpus: int, seed: int) -> float:
    from schedlab import osrun

    return cost_of(osrun.run(batch_spec(batch, cpus, seed)).summary, batch, cpus)


def spread(values: list[float]) -> str:
    mean = statistics.mean(values)
    return (f"mean {mean:.3f}, CV {statistics.stdev(values) / mean:.1%}, "
            f"{min(values):.3f}-{max(values):.3f}")


def probe_and_target(args: argparse.Namespace) -> int:
    rows = []
    for r in range(args.runs):
        before = per_process_ms(args.batch, args.cpus, 1 + 3 * r)
        target = per_process_ms(args.target, args.cpus, 2 + 3 * r)
        after = per_process_ms(args.batch, args.cpus, 3 + 3 * r)
        rows.append({"run": r, "before_ms": before, "target_ms": target, "after_ms": after})
        print(f"run {r:2d}: a process {before:.3f} ms per CPU in {args.batch}, then {target:.3f} "
              f"in {args.target}, then {after:.3f} in {args.batch}", flush=True)
    target = [x["target_ms"] for x in rows]
    by_before = [x["target_ms"] / x["before_ms"] for x in rows]
    by_around = [2 * x["target_ms"] / (x["before_ms"] + x["after_ms"]) for x in rows]
    print(f"target, ms per process per CPU: {spread(target)}")
    print(f"target / the batch before: {spread(by_before)}; within 5% of its mean in "
          f"{sum(abs(v / statistics.mean(by_before) - 1) <= 0.05 for v in by_before)} of "
          f"{len(rows)}")
    print(f"target / the mean of the batches around it: {spread(by_around)}; within 5% of its "
          f"mean in {sum(abs(v / statistics.mean(by_around) - 1) <= 0.05 for v in by_around)} "
          f"of {len(rows)}")
    (HERE / "out").mkdir(exist_ok=True)
    (HERE / "out" / "kernel_probe.json").write_text(json.dumps(
        {"cpus": args.cpus, "batch": args.batch, "target": args.target, "runs": rows},
        indent=2))
    return 0


def main() -> int:
    from schedlab import osrun

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--target", type=int,
                    help="probe each run of this many processes with a batch before and after")
    args = ap.parse_args()
    if args.target:
        return probe_and_target(args)
    if not REFLOOP.exists():
        sys.exit(f"{REFLOOP} is missing: make -C bench setup builds it")
    rows = []
    for r in range(args.runs):
        spec = batch_spec(args.batch, args.cpus, 1 + r)
        before = user_probe()
        s = osrun.run(spec).summary
        row = {"run": r,
               "per_process_ms": cost_of(s, args.batch, args.cpus),
               "measure_ms_per_task": float(s["measure_cpu_ms"]) / args.batch,
               "user_probe_ms": before + user_probe()}
        rows.append(row)
        print(f"run {r:2d}: a process {row['per_process_ms']:.3f} ms per CPU; kernel probe "
              f"{row['measure_ms_per_task'] * 1000:.1f} us per task; user probe "
              + " / ".join(f"{x:.1f}" for x in row["user_probe_ms"]) + " ms", flush=True)
    (HERE / "out").mkdir(exist_ok=True)
    (HERE / "out" / "kernel_modes.json").write_text(json.dumps(
        {"cpus": args.cpus, "batch": args.batch, "runs": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

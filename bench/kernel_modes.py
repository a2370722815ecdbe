"""Why a tiny process's cost cannot be calibrated to 5% on this machine (issue 14): runs one
batch of tiny one-shot processes through the dispatcher again and again, and beside each run
two probes of the machine's speed: user-space work (the reference loop, pinned to each CPU)
and kernel work (the reads of /proc the coordinator and each worker make, `measure_cpu_ms`,
which the os world reports in every run).

    .venv/bin/python kernel_modes.py [--runs 20] [--cpus 2] [--batch 50]

Prints one line per run and writes bench/out/kernel_modes.json.
"""

from __future__ import annotations

import argparse
import json
import os
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


def main() -> int:
    from schedlab import osrun

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--batch", type=int, default=50)
    args = ap.parse_args()
    if not REFLOOP.exists():
        sys.exit(f"{REFLOOP} is missing: make -C bench setup builds it")
    rows = []
    for r in range(args.runs):
        spec = {"batch": args.batch, "size": "det:0.01", "cpus": args.cpus, "seed": 1 + r,
                "quiet_wait": 2_000, "policy": "rr", "enforce": "fifo",
                "params": {"quantum": 10.0}}
        before = user_probe()
        s = osrun.run(spec).summary
        row = {"run": r,
               "per_process_ms": float(s["response_max"]) * args.cpus / args.batch - 0.01,
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

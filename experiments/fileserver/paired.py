"""Paired comparison of the real server with the simulator's ideal and calibrated models.

    .venv/bin/python experiments/fileserver/paired.py experiments/fileserver/baseline.toml \
        --profile results/fileserver-baseline/profile-server.toml [--replications 3] [--quick]

Runs every server run of an experiment file (each point, policy and replication, as the file
configures the server world), keeps each run's requests with their warm-up, and replays them
in the simulator as a closed trace (`schedlab.calibration.closed_trace`: every client's
thinks and file sizes, request for request) under the same policy, once with the ideal model
and once with the machine profile. The three then served the same workload, so their gap is
the model's, not the sampling noise of a 10 s run (a run's realised mean service moves by
10-15% between seeds with this file's heavy-tailed sizes). Prints, per point and policy, the
server's mean and p99 response over replications and each model's relative gap, with the
95% Student-t interval of the gap across replications.
"""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from schedlab import _core, calibration, worlds
from schedlab import experiment as ex
from scipy import stats


def replay(run: ex.Run, sim_run: ex.Run, profile: str, tmp: Path) -> dict:
    """One server run and its two replays; the warm-up (the file's, by arrival) left out of
    all three."""
    cut = int(run.spec.get("warmup") or 0)
    res = worlds.module("server").run({**run.spec, "warmup": 0, "keep_jobs": True})
    jobs = res.jobs[res.jobs["error"] == 0]
    cost = _core.parse_cost(str(run.spec.get("cost", "none")))
    trace = calibration.closed_trace(
        jobs, lambda b: cost["fixed_ms"] + cost["per_byte_ms"] * np.asarray(b))
    path = tmp / f"{run.id}.csv"
    trace.to_csv(path, index=False)
    real = jobs.sort_values("arrival")["response"].to_numpy()[cut:]
    written = {"policy": sim_run.policy, "params": sim_run.spec.get("params") or {},
               "cpus": run.spec["cpus"], "trace": str(path), "warmup": cut,
               **{k: run.spec[k] for k in ("cost", "packet", "packet_unit", "cost_mode")
                  if k in run.spec}}
    row = {"point": run.point, "label": run.label, "replication": run.replication,
           "requests": len(real), "server": float(real.mean()),
           "server_p99": float(np.quantile(real, 0.99))}
    for world, extra in (("sim", {}), ("calibrated", {"profile": profile})):
        t = worlds.translate(world, {**written, **extra})
        s = worlds.runner(world)(**t.spec, keep_jobs=False).summary
        row[world] = s["response_mean"]
        row[f"{world}_p99"] = s["response_p99"]
    return row


def gap(values: pd.Series) -> str:
    """Mean relative gap, in %, with its 95% t interval across replications."""
    m = values.mean() * 100
    if len(values) < 2:
        return f"{m:+.1f}%"
    half = stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / math.sqrt(len(values))
    return f"{m:+.1f}% ± {half * 100:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--profile", required=True)
    ap.add_argument("--replications", type=int, help="server runs per point and policy; "
                    "default the file's")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", help="CSV of every run and replay")
    args = ap.parse_args()
    exp = ex.load(args.file, quick=args.quick)
    # A policy the sweep does not touch (FCFS beside a quantum sweep) is one run, not one
    # per point.
    runs = [r for r in exp.unique_runs() if r.world == "server" and not r.skip
            and (args.replications is None or r.replication < args.replications)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in runs:
            sim_run = next(x for x in exp.runs if x.world == "sim" and x.label == r.label
                           and x.point == r.point)
            rows.append(replay(r, sim_run, str(Path(args.profile).resolve()), Path(tmp)))
            print(rows[-1], flush=True)
    d = pd.DataFrame(rows)
    if args.out:
        d.to_csv(args.out, index=False)
    for w in ("sim", "calibrated"):
        d[f"{w}_gap"] = d[w] / d["server"] - 1
        d[f"{w}_p99_gap"] = d[f"{w}_p99"] / d["server_p99"] - 1
    out = d.groupby(["point", "label"], sort=False).agg(
        runs=("server", "size"), server=("server", "mean"), ideal=("sim_gap", gap),
        calibrated=("calibrated_gap", gap), server_p99=("server_p99", "mean"),
        ideal_p99=("sim_p99_gap", gap), calibrated_p99=("calibrated_p99_gap", gap))
    print(out.round(3).to_string())


if __name__ == "__main__":
    main()

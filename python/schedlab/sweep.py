"""Sweeps: every sweep point x policy x replication of an experiment, run in a local process
pool or on a Dask cluster, stored so that an interrupted sweep resumes where it stopped.

Layout of a results directory:

    manifest.json          the experiment as resolved, every run with its id and status
    warmups.json           each auto warm-up run's own truncation (see common_warmups)
    runs/<id>.json         one finished run: summary, class and task tables (written last:
                           its presence is what "done" means)
    runs/<id>.jobs.parquet, runs/<id>.schedule.parquet   per-job table and run segments
    runs/<id>.load_series.parquet   runnable tasks per CPU over time (sim load_sample, os)
    runs/<id>.migrations.parquet    the workers' moves between CPUs (os trace_migrations)
    summaries.parquet      one row per world x point x policy x replication (deterministic bytes)
    stats.parquet          mean and confidence interval of every metric, with theory
    classes.parquet, tasks.parquet   per-class and per-task tables of every run
    skipped.parquet        runs not made, with the reason: the world has no model of the run,
                           or the kernel forbids what it asks (os)
    timing.parquet         wall-clock timing of each run (kept apart: it differs every time)
    .lock                  empty: one sweep at a time holds it (flock). It stays after the
                           sweep: deleting it would let a sweep that opened it just before
                           and one that makes a new one run in one directory at once.

A run's id is a hash of its world, flat spec and seed, so reruns, resumed sweeps and edited
experiments reuse every run whose inputs did not change. Simulator runs go to a pool of
processes (or Dask); server and os runs measure the machine, so they run one at a time, after
the simulator's runs, with nothing else of the sweep running beside them.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import json
import math
import os
import shutil
import sys
import time
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from schedlab import experiment as ex
from schedlab import profile, worlds
from schedlab._core import SpecError
from schedlab.clikit import progress_bar
from schedlab.files import atomic_file
from schedlab.jsonio import json_safe
from schedlab.lifetime import die_with_parent
from schedlab.results import environment, write_table
from schedlab.stats import batch_means, t_half_width
from schedlab.store import FORMAT, MANIFEST, RUNS
from schedlab.summary_rows import ONE_SHOT_METHOD
from schedlab.theory import spec_cdf as theory_cdf  # noqa: F401  (the report reads it here)
from schedlab.theory import spec_mean as theory_for
from schedlab.theory import spec_quantile as theory_quantile
from schedlab.vocabulary import nonnegative, quoted, replication_count, spec_error

MANIFEST_EVERY = 1.0  # seconds between manifest rewrites while running
KEY_COLUMNS = ["world", "point", "label", "policy", "replication", "seed", "run"]


class SweepFailed(RuntimeError):
    """Some runs raised; the others are stored and a rerun retries only the failed ones."""


# ---------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------


def write_json(path: Path, value: Any) -> None:
    """Atomic: a temporary file in the same directory, then rename. A reader, or a sweep
    resumed after kill -9, sees the whole file or none of it."""
    with atomic_file(path) as tmp, open(tmp, "w") as f:
        json.dump(value, f, default=_json_default)


def _json_default(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    return str(v)


def _records(df: pd.DataFrame | None) -> list[dict[str, Any]]:
    if df is None or df.empty:
        return []
    cols = [str(c) for c in df.columns]  # plain tuples: a fraction of pandas' to_dict cost
    return [dict(zip(cols, row, strict=True)) for row in df.itertuples(index=False, name=None)]


def _sample(jobs: pd.DataFrame, rows: int) -> pd.DataFrame:
    """An even systematic sample in arrival order: unbiased for CDFs and per-size means."""
    if rows <= 0 or len(jobs) <= rows:
        return jobs
    idx = np.linspace(0, len(jobs) - 1, rows).round().astype(np.int64)
    return jobs.iloc[np.unique(idx)].reset_index(drop=True)


# ---------------------------------------------------------------------------------------------
# One run, in a worker
# ---------------------------------------------------------------------------------------------

_RUNNERS: dict[str, Any] = {}


def _refusal(e: BaseException) -> tuple[str, str] | None:
    """(what, reason) when a world refused a run because the machine forbids it (the os
    world's `Refused`: a kernel policy, an RT budget), else None."""
    what, reason = getattr(e, "what", None), getattr(e, "reason", None)
    if type(e).__name__ == "Refused" and isinstance(what, str) and isinstance(reason, str):
        return what, reason
    return None


def _skipped(task: dict[str, Any], what: str, reason: str, timing: dict[str, Any]
             ) -> dict[str, Any]:
    rid = task["id"]
    record = {"format": FORMAT, "id": rid, "world": task["world"], "spec": task["spec"],
              "skipped": {"what": what, "reason": reason}, "summary": {}, "classes": [],
              "tasks": [], "files": {}, "jobs_total": 0, "environment": {}, "timing": timing}
    write_json(Path(task["dir"]) / f"{rid}.json", record)
    return {"id": rid, "skipped": f"{what}: {reason}", **timing}


def execute(task: dict[str, Any]) -> dict[str, Any]:
    """Runs one task and stores it; returns its timing. Picklable by reference, so the same
    function serves the process pool and Dask workers (which must share the directory).

    A run the world has no model of (task["skip"]), or that the machine refuses (the os
    world's `Refused`), is stored as skipped, with the reason: never silently dropped."""
    start_wall, t0, c0 = time.time(), time.perf_counter(), time.process_time()
    world, module = task["world"], task["module"]
    if task.get("skip"):
        return _skipped(task, "no model", task["skip"], {"start": start_wall,
                                                         "end": time.time()})
    replay = None
    if task.get("replay_of"):
        replay = _replay_source(task)
        if "skipped" in replay:
            return _skipped(task, *replay["skipped"], {"start": start_wall, "end": time.time()})
        # The replay ends as its run did: nothing sent from the run's end on, then drained.
        ends = {"time": replay["end"], "drain": True} if replay.get("end") else {}
        task = {**task, "spec": {**task["spec"], "warmup": replay["warmup"], **ends}}
    if module not in _RUNNERS:
        _RUNNERS[module] = worlds.runner(world, module)
    kw: dict[str, Any] = {"keep_jobs": task["jobs"]}
    # Worlds that keep run segments on request (the os world always returns the dispatcher's).
    if module != worlds.DEFAULT_MODULES.get(world) or world in worlds.key_worlds()["keep_schedule"]:
        kw["keep_schedule"] = task["schedule"] or None
    try:
        result = _RUNNERS[module](**task["spec"], **kw)
    except Exception as e:
        refused = _refusal(e)
        if refused is None:
            raise
        return _skipped(task, *refused, {"start": start_wall, "end": time.time()})
    t1, c1 = time.perf_counter(), time.process_time()
    runs = Path(task["dir"])
    rid = task["id"]
    files = {}
    if task["jobs"]:
        write_table(_sample(result.jobs, task["job_rows"]), runs / f"{rid}.jobs.parquet")
        files["jobs"] = f"{rid}.jobs.parquet"
    if task["schedule"] and result.schedule is not None and len(result.schedule):
        write_table(result.schedule, runs / f"{rid}.schedule.parquet")
        files["schedule"] = f"{rid}.schedule.parquet"
    series = getattr(result, "load_series", None)
    if series is not None and len(series):
        write_table(series, runs / f"{rid}.load_series.parquet")
        files["load_series"] = f"{rid}.load_series.parquet"
    moves = getattr(result, "migrations", None)
    if moves is not None:
        write_table(moves, runs / f"{rid}.migrations.parquet")
        files["migrations"] = f"{rid}.migrations.parquet"
    # A real run that a model replays keeps its requests as a trace.
    trace = getattr(result, "replay_trace", None) if task.get("replayed") else None
    if trace is not None:
        # CSV, as the simulator's `trace` key reads it; written whole, then renamed.
        tmp = runs / f".{rid}.trace.csv.tmp"
        trace.to_csv(tmp, index=False)
        os.replace(tmp, runs / f"{rid}{TRACE}")
        files["replay_trace"] = f"{rid}{TRACE}"
    t2 = time.perf_counter()
    timing = {"compute": t1 - t0, "compute_cpu": c1 - c0, "store": t2 - t1,
              "worker": os.getpid(),
              "start": start_wall, "end": time.time()}
    record = {"format": FORMAT, "id": rid, "world": world, "spec": task["spec"],
              "summary": result.summary, "classes": _records(result.classes),
              "tasks": _records(result.tasks), "files": files, "jobs_total": int(len(result.jobs)),
              "environment": getattr(result, "environment", {}), "timing": timing}
    if task.get("replayed"):
        # False: no trace can be made of it (no service time, or no request succeeded); its
        # replay is skipped, and the run is not measured again for want of one.
        record["traced"] = trace is not None
        if trace is not None:
            record["replay_warmup"] = int(trace.attrs.get("warmup", 0))
            if trace.attrs.get("end"):
                record["replay_end"] = float(trace.attrs["end"])
    if replay is not None:
        record["replay"] = {"of": task["replay_of"], "trace": replay["digest"],
                            "warmup": replay["warmup"], "end": replay["end"]}
    # Written last: the record is what marks the run as done.
    write_json(runs / f"{rid}.json", record)
    timing["store"] = time.perf_counter() - t1
    return {"id": rid, **timing}


TRACE = ".trace.csv"


def _trace_digest(runs_dir: Path, rid: str) -> str:
    return ex._file_digest(str(runs_dir / f"{rid}{TRACE}"))


def _replay_source(task: dict[str, Any]) -> dict[str, Any]:
    """What a replay takes from the run it replays: the digest of its trace (so a rerun of
    that run makes the replay pending again) and its warm-up; or why there is nothing to
    replay ({"skipped": (what, reason)})."""
    runs_dir, of = Path(task["dir"]), task["replay_of"]
    try:
        rec = _read_record(runs_dir, of)
    except (OSError, ValueError):
        raise RuntimeError(f"run {of}, which this run replays, has not run") from None
    if rec.get("skipped"):
        return {"skipped": ("replayed run skipped", f"{rec['skipped']['what']}: "
                            f"{rec['skipped']['reason']}")}
    if not rec.get("traced"):
        return {"skipped": ("nothing to replay", "the run's requests have no service time "
                            "(a server run needs machine.cost) or none succeeded")}
    return {"digest": _trace_digest(runs_dir, of), "warmup": int(rec["replay_warmup"]),
            "end": rec.get("replay_end")}


def execute_chunk(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Several runs in one task: fewer round trips to the parent, so short runs keep the cores
    busy. Each run is still stored on its own, so a kill loses at most the runs in flight; a
    run that raises is reported and the others go on."""
    out = []
    for task in tasks:
        try:
            out.append(execute(task))
        except Exception as e:
            out.append({"id": task["id"], "error": f"{type(e).__name__}: {e}"})
    return out


def real_world(world: str) -> bool:
    """Server and os runs measure the machine: one at a time, nothing else beside them."""
    return world not in worlds.SIMULATED


MAX_CHUNK = 25


def chunks(tasks: list[dict[str, Any]], workers: int) -> list[list[dict[str, Any]]]:
    """Guided chunking: big chunks first (few round trips while there is plenty of work),
    single runs at the end (no core idles long at the tail). Tasks are dealt round robin
    across the sweep first, so a chunk mixes points and policies and chunks cost alike."""
    stride = max(1, math.isqrt(len(tasks)))
    order = [t for i in range(stride) for t in tasks[i::stride]]
    out, i = [], 0
    while i < len(order):
        size = max(1, min(MAX_CHUNK, (len(order) - i) // (workers * 4)))
        out.append(order[i:i + size])
        i += size
    return out


# ---------------------------------------------------------------------------------------------
# Planning and resuming
# ---------------------------------------------------------------------------------------------


def _wants(policy: bool | str, replication: int) -> bool:
    return policy is True or (policy == "first" and replication == 0)


def plan(exp: ex.Experiment, runs_dir: Path,
         profiles: dict[str, Path] | None = None) -> list[dict[str, Any]]:
    cfg = exp.config.experiment
    tasks = []
    replayed = {r.replay_of for r in exp.runs if r.replay_of}
    for r in exp.unique_runs():
        spec = r.spec
        if profiles and spec.get("profile") == profile.CALIBRATE:
            spec = {**spec, "profile": str(profiles[_config_key(exp, spec)])}
        if r.replay_of:
            spec = {**spec, "trace": str(runs_dir / f"{r.replay_of}{TRACE}")}
        tasks.append({"id": r.id, "world": r.world, "module": worlds.MODULES[r.world],
                      "spec": spec, "dir": str(runs_dir),
                      "jobs": _wants(cfg.keep_jobs, r.replication),
                      "schedule": _wants(cfg.keep_schedule, r.replication),
                      "job_rows": cfg.job_rows, "skip": r.skip, "replay_of": r.replay_of,
                      "replayed": r.id in replayed})
    return tasks


def _calibrated_world(exp: ex.Experiment) -> str:
    """The real world `profile = "calibrate"` measures: the experiment's os world, or else
    the server."""
    return profile.OS if profile.OS in exp.worlds and profile.SERVER not in exp.worlds \
        else profile.SERVER


def _config(exp: ex.Experiment, spec: dict[str, Any]) -> dict[str, Any]:
    from schedlab import calibration

    keys = calibration.WORLDS[_calibrated_world(exp)]
    return {k: spec[k] for k in keys if spec.get(k) is not None}


def _config_key(exp: ex.Experiment, spec: dict[str, Any]) -> str:
    return json.dumps(_config(exp, spec), sort_keys=True, default=str)


def _profile_name(world: str, config: dict[str, Any], index: int, count: int,
                  parts: tuple[str, ...] = profile.OS_PARTS) -> str:
    if world == profile.OS:
        tail = f"-cpus{config['cpus']}" if "cpus" in config else ""
        tail += f"-{config['enforce']}" if "enforce" in config else ""
        # A profile of one part is named so: runs that need the other (an added kernel
        # policy) then calibrate anew on resume instead of meeting a profile without it.
        tail += "".join(f"-{p}" for p in parts) if parts != profile.OS_PARTS else ""
        return f"profile-os{tail}.toml"
    return PROFILE if count == 1 else f"profile-server-{index + 1}.toml"


PROFILE = "profile-server.toml"


def calibrate_first(exp: ex.Experiment, out_dir: Path) -> dict[str, Path]:
    """`profile = "calibrate"`: the real world (the server, or real processes) is measured
    before any run (the machine is quiet then), once per configuration the calibrated runs
    have (a sweep over CPUs: one profile per CPU count), and each profile kept in the results
    directory (a resumed sweep reuses it). Returns the profile of each configuration."""
    asking = [r for r in exp.runs if not r.skip and r.spec.get("profile") == profile.CALIBRATE]
    world = _calibrated_world(exp)
    configs: dict[str, dict[str, Any]] = {}
    needs: dict[str, set[str]] = {}
    for r in asking:
        key = _config_key(exp, r.spec)
        configs.setdefault(key, _config(exp, r.spec))
        # Real processes: only the part of the calibration that models these runs (the
        # kernel's batches take about 60% of it, and a dispatched run reads none of them).
        needs.setdefault(key, set()).add("dispatcher" if r.spec.get("sched") is None
                                         else "kernel")
    paths = {}
    for i, (key, config) in enumerate(sorted(configs.items())):
        parts = tuple(p for p in profile.OS_PARTS if p in needs[key])
        name = _profile_name(world, config, i, len(configs), parts)
        path = paths[key] = out_dir / name
        if not path.exists():
            from schedlab import calibration

            calibration.calibrate(world, path, seed=exp.config.experiment.seed,
                                  quick=bool(exp.quick), **config,
                                  **({"parts": parts} if world == profile.OS else {}))
        prof = profile.load(path, "machine.profile")
        terms = ", ".join(f"{k} {v['mean']:.4g} {v['unit']}" + (
            f" [{v['low']:.4g}, {v['high']:.4g}]" if "low" in v and "high" in v else "")
            for k, v in prof[world].items())
        line = (f"machine.profile = calibrate: {name}, measured in "
                f"{prof['profile'].get('seconds', float('nan')):.1f} s (95% intervals): {terms}"
                + "".join(f"; warning: {w}" for w in prof["profile"].get("warnings", [])))
        notes = exp.notes.setdefault("calibrated", [])
        if line not in notes:
            notes.insert(i, line)
    return paths


WARMUPS = "warmups.json"


def _own_warmup(item: tuple[str, str, dict[str, Any]]) -> tuple[str, int]:
    key, module_name, spec = item
    return key, int(importlib.import_module(module_name).warmup(spec))


def common_warmups(exp: ex.Experiment, out: Path, workers: int, lock_fd: int) -> None:
    """`warmup = "auto"` in a sweep: the pilot runs of every policy find its own truncation
    (MSER-5), and every policy of one point and replication discards the largest of them, so
    that all are measured on the same jobs and common random numbers pair them job by job.
    The runs then carry that number of jobs (it is part of their id, so adding a policy that
    needs a longer warm-up makes new runs). A world without pilots (server, os: they truncate
    after the run) keeps its own. The truncations found are kept in warmups.json, so a
    resumed sweep does not look for them again."""
    groups: dict[tuple[str, int, int], list[ex.Run]] = {}
    for r in exp.runs:
        # A replay's warm-up is its real run's (the requests that run left out).
        if r.skip or r.replay_of or r.spec.get("warmup", "auto") != "auto" or \
                not hasattr(worlds.module(r.world), "warmup"):
            continue
        groups.setdefault((r.world, r.point, r.replication), []).append(r)
    if not groups:
        return
    path = out / WARMUPS
    known: dict[str, int] = {}
    with contextlib.suppress(OSError, ValueError):
        known = {str(k): int(v) for k, v in json.loads(path.read_text()).items()}
    todo = {r.id: (r.id, worlds.MODULES[r.world], r.spec)
            for runs in groups.values() for r in runs if r.id not in known}
    if todo:
        import multiprocessing as mp

        method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
        with ProcessPoolExecutor(max_workers=max(1, min(workers, len(todo))),
                                 mp_context=mp.get_context(method),
                                 initializer=_worker_init, initargs=(lock_fd, os.getpid())) as pool:
            known.update(pool.map(_own_warmup, todo.values()))
        write_json(path, dict(sorted(known.items())))
    for runs in groups.values():
        common = max(known[r.id] for r in runs)
        for r in runs:
            r.spec = {**r.spec, "warmup": common}
            r.id = ex.run_id(r.world, r.spec)


def _status(runs_dir: Path, task: dict[str, Any], replayed: str = "done") -> str:
    """done (or skipped) only if the record exists and every file this sweep wants of it
    exists; else pending. A replay (`replayed`: the status of the run it replays) is pending
    too when that run is, or has run again since (its trace is not the one replayed)."""
    if not (runs_dir / f"{task['id']}.json").exists():
        return "pending"
    cache: list[dict[str, Any] | None] = []

    def record() -> dict[str, Any] | None:
        """The run's record, read once and only when asked (None: unreadable)."""
        if not cache:
            try:
                cache.append(_read_record(runs_dir, task["id"]))
            except (OSError, ValueError):
                cache.append(None)
        return cache[0]

    # Damaged (a crash, a hand) or another version's: run again, and its record rewritten.
    if not isinstance(r := record(), dict) or r.get("format") != FORMAT:
        return "pending"
    if task.get("replay_of"):
        if replayed == "pending":
            return "pending"
        if (r := record()) is not None:
            if r.get("skipped"):
                return "skipped"
            with contextlib.suppress(OSError):
                if r.get("replay", {}).get("trace") != \
                        _trace_digest(runs_dir, task["replay_of"]):
                    return "pending"
    # Only these can have been skipped.
    if (task["skip"] or real_world(task["world"])) and (record() or {}).get("skipped"):
        return "skipped"
    if task.get("replayed"):
        # Run before replays were asked for (its requests were not kept), or its trace is gone.
        traced = (record() or {}).get("traced")
        if traced is None or (traced and not (runs_dir / f"{task['id']}{TRACE}").exists()):
            return "pending"
    if task["jobs"] and not (runs_dir / f"{task['id']}.jobs.parquet").exists():
        return "pending"
    if task["schedule"] and not (runs_dir / f"{task['id']}.schedule.parquet").exists() \
            and not real_world(task["world"]):  # the real worlds may have no segments
        return "pending"
    return "done"


@contextlib.contextmanager
def _locked(out: Path) -> Iterator[int]:
    """One sweep at a time per directory. The kernel drops the lock when the process dies,
    kill -9 included, so a resumed sweep never finds a stale lock."""
    fd = os.open(out / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise spec_error("out", str(out), "a directory no other sweep is writing") from None
        yield fd
    finally:
        os.close(fd)


def _worker_init(lock_fd: int, parent: int) -> None:
    # A forked worker's copy of the lock descriptor would keep the directory locked if the
    # parent died first; the parent's own descriptor holds the lock.
    with contextlib.suppress(OSError):
        os.close(lock_fd)
    die_with_parent(parent)  # whatever kills the sweep takes its workers along


def default_out(exp: ex.Experiment) -> Path:
    """results/NAME (NAME-quick under --quick): a name that would lead out of results/ is
    refused (with --out, any name will do: it is only a title then)."""
    if "/" in exp.name or "\\" in exp.name or exp.name in (".", ".."):
        raise spec_error("experiment.name", exp.name, "a name without / or \\ (it names the "
                         "results directory results/NAME; or give --out)")
    return Path("results") / (exp.name + ("-quick" if exp.quick else ""))


# ---------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------


@dataclass
class _State:
    out: Path
    exp: ex.Experiment
    status: dict[str, str]
    errors: dict[str, str] = field(default_factory=dict)
    started: float = field(default_factory=time.time)
    last_write: float = 0.0
    _static: dict[str, Any] | None = None

    def manifest(self, state: str) -> dict[str, Any]:
        exp = self.exp
        if self._static is None:  # built once: rewriting the manifest stays cheap
            self._static = json_safe({
                "format": FORMAT, "name": exp.name, "worlds": exp.worlds,
                "source": exp.source, "quick": exp.quick, "experiment": exp.raw,
                "sweep_keys": exp.sweep_keys, "labels": exp.labels, "points": exp.points,
                "replications": exp.replications,
                "replications_by_world": {w: exp.replications_of(w) for w in exp.worlds},
                "notes": exp.notes, "environment": environment(),
                "runs": [{"id": r.id, "point": r.point, "label": r.label, "policy": r.policy,
                          "replication": r.replication, "seed": r.seed, "world": r.world,
                          "status": "", "spec": r.spec,
                          **({"skip": r.skip} if r.skip else {}),
                          **({"replay_of": r.replay_of} if r.replay_of else {})}
                         for r in exp.runs],
                "replays": {w: exp.replays(w) for w in exp.worlds if exp.replays(w)}})
        for run in self._static["runs"]:
            run["status"] = self.status[run["id"]]
        counts = {s: sum(1 for v in self.status.values() if v == s)
                  for s in ("done", "pending", "failed", "skipped")}
        return {**self._static, "status": state, "counts": counts, "errors": self.errors,
                "started": self.started, "updated": time.time()}

    def write(self, state: str, force: bool = True) -> None:
        now = time.monotonic()
        if force or now - self.last_write >= MANIFEST_EVERY:
            write_json(self.out / MANIFEST, self.manifest(state))
            self.last_write = now


def run(source: str | Path | dict[str, Any], out: str | Path | None = None,
        workers: int | None = None, dask: str | None = None, quick: bool = False,
        progress: bool | None = None) -> Path:
    """Runs (or resumes) an experiment; returns the results directory.

    Validates everything before writing anything: a bad file raises SpecError naming the key.
    """
    if out is not None and (not isinstance(out, str | os.PathLike) or str(out).strip() == ""):
        raise spec_error("out", quoted(out), "a directory's path")
    if workers is not None:
        replication_count(workers, "workers")  # as the command line checks it
    # "yes" was a quick run, and the manifest kept "quick": "yes".
    for key, value, allowed in (("quick", quick, (bool,)), ("progress", progress,
                                                            (bool, type(None)))):
        if not isinstance(value, allowed):
            raise spec_error(key, quoted(value), "true or false" + (
                " (or None: a bar on a terminal)" if key == "progress" else ""))
    exp = ex.load(source, quick=quick)
    out_dir = Path(out) if out is not None else default_out(exp)
    if out_dir.exists() and not out_dir.is_dir():
        raise spec_error("out", str(out_dir), "a directory")
    if out_dir.is_dir() and any(not p.name.startswith(".") for p in out_dir.iterdir()) and not (
            (out_dir / MANIFEST).exists() or (out_dir / RUNS).is_dir()):
        # `--out .` or `--out ~` would spread a results directory over files of the user's.
        raise spec_error("out", str(out_dir), "a new or empty directory, or a results "
                         "directory to resume (this one holds other files)")
    fresh = not out_dir.exists()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise spec_error("out", str(out_dir), f"a directory that can be made ({e.strerror})") \
            from None
    runs_dir = out_dir / RUNS
    if runs_dir.exists() and not runs_dir.is_dir():
        raise spec_error("out", str(out_dir), f"a results directory whose {RUNS}/ is a "
                         f"directory ({runs_dir} is a file)")
    runs_dir.mkdir(exist_ok=True)
    try:
        return _run_in(exp, out_dir, runs_dir, workers, dask, progress)
    except SpecError:
        # Bad input found only once running (validation missed it): a directory this call
        # made, with no run's result in it yet, is not left half-written.
        if fresh and not any(p for p in runs_dir.iterdir() if not p.name.startswith(".")):
            shutil.rmtree(out_dir, ignore_errors=True)
        raise


def _run_in(exp: ex.Experiment, out_dir: Path, runs_dir: Path, workers: int | None,
            dask: str | None, progress: bool | None) -> Path:
    with _locked(out_dir) as lock_fd:
        for tmp in runs_dir.glob(".*.tmp"):  # halves of files whose writer was killed
            with contextlib.suppress(OSError):
                tmp.unlink()
        profiles = calibrate_first(exp, out_dir)
        common_warmups(exp, out_dir, workers or os.cpu_count() or 1, lock_fd)
        tasks = plan(exp, runs_dir, profiles)
        status: dict[str, str] = {}
        for t in sorted(tasks, key=lambda t: bool(t["replay_of"])):  # replayed runs first
            status[t["id"]] = _status(runs_dir, t, status.get(t["replay_of"] or "", "done"))
        state = _State(out_dir, exp, status)
        state.write("running")
        pending = [t for t in tasks if status[t["id"]] == "pending"]
        if progress is None:
            progress = sys.stderr.isatty()
        timings: list[dict[str, Any]] = []
        # Runs a world has no model of: recorded at once, with the reason.
        for task in [t for t in pending if t["skip"]]:
            _finished(state, [task], _Done([execute(task)]), timings)
        runnable = [t for t in pending if not t["skip"]]
        sims = [t for t in runnable if not real_world(t["world"]) and not t["replay_of"]]
        reals = [t for t in runnable if real_world(t["world"])]

        def simulate(batch: list[dict[str, Any]]) -> None:
            if not batch:
                return
            if dask:
                _run_dask(batch, dask, state, progress, timings)
            else:
                _run_local(batch, workers or os.cpu_count() or 1, state, progress, timings,
                           lock_fd)

        simulate(sims)
        if reals:
            # The real worlds measure the machine: one run at a time, after the simulator's,
            # in a worker process of their own (a crash in a run cannot take the sweep down).
            _run_local(reals, 1, state, progress, timings, lock_fd, one_by_one=True)
        # Replays read the requests of real runs: after them (not those whose run failed).
        simulate([t for t in runnable if t["replay_of"] and t["replay_of"] not in state.errors])
        if state.errors:
            state.write("failed")
            first = next(iter(state.errors.values()))
            raise SweepFailed(f"{len(state.errors)} of {len(tasks)} runs failed; rerun to retry "
                              f"them. First error: {first}")
        combine(out_dir, exp)
        state.write("complete")
    return out_dir


@dataclass
class _Done:
    """A finished future's stand-in, for runs recorded in the parent."""

    value: Any

    def result(self) -> Any:
        return self.value


def _finished(state: _State, chunk: list[dict[str, Any]], fut: Future | Any,
              timings: list) -> int:
    """Records a finished chunk; returns how many runs it held."""
    try:
        results = fut.result()
    except Exception as e:  # the worker died: every run of the chunk failed
        results = [{"id": t["id"], "error": f"{type(e).__name__}: {e}"} for t in chunk]
    for r in results:
        if r.get("error"):
            state.status[r["id"]] = "failed"
            state.errors[r["id"]] = r["error"]
        elif r.get("skipped"):
            state.status[r["id"]] = "skipped"
        else:
            state.status[r["id"]] = "done"
            timings.append(r)
    return len(chunk)


def _run_local(pending: list[dict[str, Any]], workers: int, state: _State, progress: bool,
               timings: list, lock_fd: int, one_by_one: bool = False) -> None:
    import multiprocessing as mp

    # fork where there is one: workers start in milliseconds with schedlab already imported,
    # and a script that calls schedlab.run() needs no `if __name__ == "__main__"` guard. The
    # pool forks every worker at the first submit, before the progress bar starts its thread.
    method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
    workers = max(1, min(workers, len(pending)))
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context(method),
                             initializer=_worker_init, initargs=(lock_fd, os.getpid())) as pool:
        parts = [[task] for task in pending] if one_by_one else chunks(pending, workers)
        futures = {pool.submit(execute_chunk, c): c for c in parts}
        try:
            with progress_bar(len(pending), state.exp.name, progress) as bar:
                bar_task = bar.add_task("runs", total=len(pending)) if bar else None
                remaining = set(futures)
                while remaining:
                    done, remaining = wait(remaining, timeout=MANIFEST_EVERY,
                                           return_when=FIRST_COMPLETED)
                    for fut in done:
                        n = _finished(state, futures[fut], fut, timings)
                        if bar:
                            bar.advance(bar_task, n)
                    state.write("running", force=False)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            state.write("interrupted")
            raise


def _run_dask(pending: list[dict[str, Any]], address: str, state: _State, progress: bool,
              timings: list) -> None:
    try:
        from distributed import Client, as_completed
    except ImportError as e:
        raise spec_error("dask", address, f"dask.distributed installed ({e})") from None
    try:
        client = Client(address, timeout="10s")  # as_completed needs it as the default
    except (OSError, TimeoutError, ValueError) as e:
        raise spec_error("dask", address, f"the address of a reachable Dask scheduler ({e})") \
            from None
    try:
        nworkers = max(1, len(client.scheduler_info().get("workers", {})))
        parts = chunks(pending, nworkers)
        futures = client.map(execute_chunk, parts, pure=False,
                             key=[f"schedlab-{c[0]['id']}-{len(c)}" for c in parts])
        by_key = {f.key: c for f, c in zip(futures, parts, strict=True)}
        with progress_bar(len(pending), state.exp.name, progress) as bar:
            bar_task = bar.add_task("runs", total=len(pending)) if bar else None
            for fut in as_completed(futures):
                n = _finished(state, by_key[fut.key], fut, timings)
                if bar:
                    bar.advance(bar_task, n)
                state.write("running", force=False)
    except BaseException:
        state.write("interrupted")
        raise
    finally:
        client.close()


# ---------------------------------------------------------------------------------------------
# Combining: summaries, statistics, theory
# ---------------------------------------------------------------------------------------------


def _read_record(runs_dir: Path, rid: str) -> dict[str, Any]:
    with open(runs_dir / f"{rid}.json") as f:
        return json.load(f)


def _cell(v: Any) -> Any:
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True)
    return v


def combine(out: Path, exp: ex.Experiment) -> None:
    """Writes the combined tables from the stored runs. The bytes depend only on the runs'
    inputs and results (rows in experiment order, no wall-clock values), so an interrupted and
    resumed sweep writes the same files as an uninterrupted one."""
    runs_dir = out / RUNS
    records = {r.id: _read_record(runs_dir, r.id) for r in exp.unique_runs()}
    rows, class_rows, task_rows, timing_rows, skip_rows = [], [], [], [], []
    for r in exp.runs:
        rec = records[r.id]
        key = {"world": r.world, "point": r.point, **r.coords, "label": r.label,
               "policy": r.policy, "replication": r.replication, "seed": r.seed, "run": r.id}
        if rec.get("skipped"):
            skip_rows.append({**key, "what": rec["skipped"]["what"],
                              "reason": rec["skipped"]["reason"]})
            continue
        row = dict(key)
        for k, v in rec["summary"].items():
            if k not in row:
                row[k] = _cell(v)
        rows.append(row)
        for c in rec.get("classes", []):
            class_rows.append({**key, **{k: _cell(v) for k, v in c.items()}})
        for t in rec.get("tasks", []):
            task_rows.append({**key, **{k: _cell(v) for k, v in t.items()}})
    for rid, rec in records.items():
        timing_rows.append({"run": rid, **rec.get("timing", {})})
    summaries = _frame(rows)
    write_table(summaries, out / "summaries.parquet")
    write_table(_frame(class_rows), out / "classes.parquet")
    write_table(_frame(task_rows), out / "tasks.parquet")
    write_table(statistics(summaries, exp), out / "stats.parquet")
    write_table(pd.DataFrame(skip_rows, columns=list(skip_rows[0]) if skip_rows else
                             ["world", "point", "label", "policy", "replication", "seed",
                              "run", "what", "reason"]), out / "skipped.parquet")
    write_table(pd.DataFrame(timing_rows), out / "timing.parquet")


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows of several worlds as one table. A column is one kind of value: where worlds
    disagree (a number in one, text or a list in another), the numbers are written as text,
    so Parquet can store the column and nothing is lost."""
    df = pd.DataFrame(rows)
    for c in df.columns:
        if df[c].dtype != object:
            continue
        kinds = {type(v) for v in df[c] if v is not None and not (isinstance(v, float)
                                                                  and math.isnan(v))}
        if len(kinds) > 1 and not kinds <= {int, float, bool}:
            df[c] = [None if v is None or (isinstance(v, float) and math.isnan(v))
                     else (json.dumps(v) if isinstance(v, list) else str(v)) for v in df[c]]
    return df


NOT_METRICS = {"point", "replication", "seed", "cpus"}


def metric_columns(summaries: pd.DataFrame, exp_keys: list[str]) -> list[str]:
    skip = set(KEY_COLUMNS) | set(exp_keys) | NOT_METRICS
    out = []
    for c in summaries.columns:
        if c in skip:
            continue
        if pd.api.types.is_numeric_dtype(summaries[c]) and not pd.api.types.is_bool_dtype(
                summaries[c]):
            out.append(c)
    return out


# Metrics whose interval one run gives by itself (`<metric>_ci` of the summary, see
# docs/statistics.md): batch means for the means, sectioning for the percentiles.
RUN_INTERVALS = {**{m: "batch means" if m.endswith("_mean") else "sectioning"
                    for m in ("response_mean", "response_p50", "response_p95", "response_p99",
                              "wait_mean", "wait_p50", "wait_p95", "wait_p99",
                              "slowdown_mean")},
                 "throughput": "batch means of the times between completions"}
# The level of the intervals one run gives by itself (the one summary code's).
RUN_CONFIDENCE = 0.95
# Percentiles with a theory where the response-time distribution has one.
THEORY_QUANTILES = {"response_p50": 0.5, "response_p95": 0.95, "response_p99": 0.99}


def _listed(v: Any) -> list[Any] | None:
    """A list-valued summary cell as a list: a list in memory, an array once read back from
    Parquet, JSON text where `_frame` had to write it as text; None when absent."""
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            return None
    if isinstance(v, list | tuple | np.ndarray):
        return list(v)
    return None


def _run_interval(v: Any) -> tuple[float, float] | None:
    """[low, high] of a summary's `<metric>_ci`, or None where the run has none."""
    pair = _listed(v)
    if pair is None or len(pair) != 2 or any(x is None for x in pair):
        return None
    low, high = float(pair[0]), float(pair[1])
    return (low, high) if math.isfinite(low) and math.isfinite(high) and low <= high else None


def _theory_values(spec: dict[str, Any], metrics: list[str]) -> dict[str, float]:
    """Closed forms of a sim spec for the metrics that have one: the mean, and the response
    percentiles where the distribution is known (one law for all of them)."""
    out: dict[str, float] = {}
    if "response_mean" in metrics:
        mean = theory_for(spec)
        if mean is not None:
            out["response_mean"] = mean
    wanted = [m for m in THEORY_QUANTILES if m in metrics]
    if wanted:
        qs = theory_quantile(spec, [THEORY_QUANTILES[m] for m in wanted])
        if qs is not None:
            out.update(zip(wanted, map(float, qs), strict=True))
    return out


def statistics(summaries: pd.DataFrame, exp: ex.Experiment) -> pd.DataFrame:
    """Mean and confidence interval of every metric per world, point and policy, in long form;
    theory beside response_mean and the response percentiles where a closed form exists.

    Intervals: Student t across replications; with one replication, the run's own interval
    (`<metric>_ci`) for the metrics of RUN_INTERVALS, which may be asymmetric about the mean;
    an explicit `batches = B` gives response_mean the B batch means instead (what the file
    asked for, and the interval of results stored before runs had their own). Vectorised over
    groups: a sweep of thousands of runs is combined in a fraction of a second."""
    conf = float(exp.config.experiment.confidence)
    if summaries.empty:
        return pd.DataFrame(columns=["world", "point", *exp.sweep_keys, "label", "policy",
                                     "metric", "n", "mean", "std", "half_width", "ci_low",
                                     "ci_high", "method", "uncorrelated", "theory"])
    metrics = metric_columns(summaries, exp.sweep_keys)
    # Theory is a property of the workload: the simulator's reading of the point, in every
    # world that ran it.
    spec_of = dict(exp.theory_specs)
    keys = ["world", "point", "label"]
    grouped = summaries.groupby(keys, sort=False)
    firsts = grouped.first().reset_index()
    values = grouped[metrics]
    n = values.count().to_numpy()
    mean = values.mean().to_numpy()
    std = values.std(ddof=1).to_numpy()
    half = t_half_width(n, std, conf)
    low, high = mean - half, mean + half
    method = np.where(n >= 2, "replications", "single run").astype(object)
    # One run of a one-shot batch is one sample of a transient: no interval (docs/statistics.md).
    one_shot = (firsts["one_shot_batch"].fillna(False).astype(bool).to_numpy()
                if "one_shot_batch" in firsts else np.zeros(len(firsts), dtype=bool))
    method[(n == 1) & one_shot[:, None]] = ONE_SHOT_METHOD
    # False where the interval is one run's own and that run was too short to find
    # uncorrelated batches (`ci_uncorrelated`): an interval not to be trusted.
    uncorrelated = np.ones(n.shape, dtype=bool)
    theory_of = np.full((len(firsts), len(metrics)), np.nan)
    column = {m: j for j, m in enumerate(metrics)}
    known: dict[str, dict[str, float]] = {}  # points often share a spec (FCFS in an RR sweep)
    for i, row in firsts.iterrows():
        spec = spec_of.get((row["point"], row["label"]))
        if spec is None:
            continue
        key = json.dumps(spec, sort_keys=True, default=str)
        if key not in known:
            known[key] = _theory_values(spec, metrics)
        for m, v in known[key].items():
            theory_of[i, column[m]] = v
    for m, how in RUN_INTERVALS.items():
        if m not in column or f"{m}_ci" not in firsts:
            continue
        j = column[m]
        for i, cell in enumerate(firsts[f"{m}_ci"]):
            iv = _run_interval(cell) if n[i, j] == 1 else None
            if iv is not None and conf != RUN_CONFIDENCE:
                # Labelled with the file's level, a run's 95% would be passed for another.
                method[i, j] = (f"none: one run's intervals are {RUN_CONFIDENCE:.0%} ones "
                                f"(replications give {conf:g})")
                continue
            if iv is not None:
                low[i, j], high[i, j] = iv
                # The estimator's spread, which the summary's cut at 0 hides: the response
                # mean's is its precision; a section's interval is even about its estimate,
                # so the side above is it. (A batch-means interval is uneven about its mean,
                # skewness adjusted: the other means keep half of what is left.)
                spread = (iv[1] - iv[0]) / 2
                precision = firsts["response_mean_precision"].iloc[i] \
                    if "response_mean_precision" in firsts else math.nan
                if m == "response_mean" and math.isfinite(precision):
                    spread = float(precision) * abs(float(mean[i, j]))
                elif how == "sectioning" and iv[0] <= 0 < mean[i, j]:
                    spread = max(spread, iv[1] - mean[i, j])
                half[i, j], std[i, j], method[i, j] = spread, math.nan, how
                flag = firsts["ci_uncorrelated"].iloc[i] if "ci_uncorrelated" in firsts else None
                if isinstance(flag, bool | np.bool_) and not flag:
                    uncorrelated[i, j] = False
    if "response_mean" in column and "response_batch_means" in firsts:
        j = column["response_mean"]
        for i, cell in enumerate(firsts["response_batch_means"]):
            bm = _listed(cell)
            if n[i, j] == 1 and not one_shot[i] and bm is not None and len(bm) >= 2:
                iv = batch_means([float(b) for b in bm], conf, mean=float(mean[i, j]))
                half[i, j], std[i, j], n[i, j], method[i, j] = (iv.half_width, iv.std, iv.n,
                                                                  iv.method)
                low[i, j], high[i, j] = mean[i, j] - iv.half_width, mean[i, j] + iv.half_width
    # Every number of a summary is 0 or more: its interval stops at 0 (`half_width` stays the
    # estimator's spread).
    floored = np.array([nonnegative(m) for m in metrics], dtype=bool)
    low = np.where(floored & (low < 0), 0.0, low)
    out = []
    cols = ["world", "point", *exp.sweep_keys, "label", "policy"]
    for i, row in firsts.iterrows():
        key = {c: row[c] for c in cols}
        for j, m in enumerate(metrics):
            if n[i, j] == 0:  # a metric another world has and this one does not
                continue
            out.append({**key, "metric": m, "n": int(n[i, j]), "mean": float(mean[i, j]),
                        "std": float(std[i, j]), "half_width": float(half[i, j]),
                        "ci_low": float(low[i, j]), "ci_high": float(high[i, j]),
                        "method": method[i, j], "uncorrelated": bool(uncorrelated[i, j]),
                        "theory": float(theory_of[i, j])})
    return pd.DataFrame(out)

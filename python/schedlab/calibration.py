"""`schedlab calibrate server` and `schedlab calibrate os`: short, automatic measurements of the
real file server and of real processes on this machine, written as a machine profile
(`schedlab.profile`) that the simulator then models.

**The server**

The server runs as configured (workers, cost, cost_mode, packet), on loopback, in four
phases of a few seconds each, with a catalogue of files chosen to spread the sizes:

1. one client, FCFS: every request alone in the server (worker time against file size: the
   fixed and per-KiB costs; client response minus worker time: the delay outside the workers);
2. one client, round robin with a one-packet quantum: a request goes on after its own
   quantum, turn after turn (the cost of a later turn);
3. two clients per worker, round robin with a one-packet quantum: turns alternate between
   requests (the extra cost of a switch);
4. one client, FCFS, thinking 20 ms: the server falls asleep between requests (client
   response minus worker time: the delay of a request that wakes it, `idle_delay`).

One least-squares fit over all requests of the first three phases gives worker time = fixed +
per_kib x KiB + turn x later turns + switch x later turns after another request, with 95%
intervals from the fit's standard errors (requests far off the fit, the machine's hiccups,
are left out and counted). Times come from the server's own per-request log (worker time,
turns) and the load generator (response), as in every server run.

**Real processes** (`calibrate_os`), each phase a batch of one-shot processes run by the os
world itself (so the harness's own costs are in what is measured), repeated `REPS` times; the
intervals are over the repetitions:

1. the kernel, SCHED_FIFO: batches of jobs of 2 and 8 ms of CPU, each at a few and at many
   processes (8 and 256 per CPU). FIFO runs a batch back to back, so a CPU's wall time per
   job (its makespan over its jobs) is `start + scale x size`: `start` (a process's cost
   beyond its CPU time: waking, exit, reaping) and `scale` (wall time per ms of the job's CPU
   clock: the kernel's own work, the measurement's, the hypervisor's) at each population;
2. the kernel, SCHED_OTHER (CFS/EEVDF): the same batches, which time-share their CPUs until
   nearly all end: the same line with its switches in it (`other_start`, `other_scale`);
3. the user-space dispatcher (round robin, the configured `enforce`): batches of tiny jobs at
   a few and at many processes (`dispatch_start`, `dispatch_start_many`: a job's start, exit
   and hand-off through the dispatcher) and CPU-bound jobs in 1 ms quanta
   (`dispatch_switch`: one quantum's stop, decision and resume; a worker's CPU clock runs
   with the wall clock inside its quantum).
"""

from __future__ import annotations

import datetime
import math
import os
import platform
import time
from typing import TYPE_CHECKING, Any

from schedlab import profile as profiles
from schedlab import server as machinery
from schedlab.vocabulary import KEYS, quoted, spec_error, typed

# numpy is imported where it is used: the command line's parser reads this module's
# constants, and should start at once (issue 12).
if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np

# The server keys a calibration takes (the server as it will run), and their defaults.
CONFIG_KEYS = ("cpus", "cost", "cost_mode", "packet", "packet_unit", "buffer")
DEFAULTS = {"cpus": 2, "cost": "none", "cost_mode": "sleep"}
# The os keys a calibration takes (the machine the processes run on); default: every CPU.
OS_CONFIG_KEYS = ("cpus", "enforce")
WORLDS = {"server": CONFIG_KEYS, "os": OS_CONFIG_KEYS}
REPS = 3  # repetitions of each os phase
# What an os calibration measures: the kernel's own classes (its batches under SCHED_FIFO and
# SCHED_OTHER, its wake-up) and schedlab's dispatcher (its starts, switches, exits, wake-ups
# and migrations); the timer's overshoot in either (profile.OS_PARTS). A run is modelled from
# its own part: an experiment whose os runs are all dispatched measures the dispatcher alone,
# in about 40% of the time.
# Every os run of a calibration waits for a quiet machine, and a run flagged noisy (others'
# CPU, steal, or a stall under one of its jobs: one stall moves a short batch's makespan by
# several ms) is run again, up to twice.
OS_RUN_OPTIONS = {"quiet_wait": 2_000, "retry_noisy": 2}
# A server phase the noise gate flags (others' CPU, or the hypervisor's steal: an idle guest's
# wake-ups late by 0.5-0.9 ms for tens of seconds, a turn's cost several times its own) is
# served again, up to twice; one still flagged is named in the profile's warnings.
SERVER_RETRY_NOISY = 2
# A kernel class's scale whose repetitions disagree by more than this (its 95% interval's
# half-width; a scale is a ratio near 1) is flagged in the profile: a model on it is off by as
# much. A quiet machine gives 0.003-0.06 (docs/os-profile.toml); the quick Linux grid's
# other_scale once came out 1.44 from 1.83, 1.81, 1.10 and 1.01 (+-0.71), and its calibrated
# CFS 78% off at 4 processes.
SCALE_AGREEMENT = 0.15
SCALE_TERMS = ("scale", "scale_many", "other_scale", "other_scale_many")
# The short os phases (the kernel's few-process batches, the wake-ups, the migrations) repeat
# this many times more: each run is a fraction of a second, where one stall moves a slope.
EXTRA_REPS = 2
FEW, MANY = 8, 256  # processes per CPU in the os world's batches
QUICK_MANY = 64
LONG_START_MS = 1.0  # the exit phase's jobs: the size its first runs measure a start at
EXIT_TASKS, EXIT_SLEEP_MS = 32, 2.0  # the exit phase: sleepers per CPU, their final sleep
WAKE_BURSTS, WAKE_BURST_MS, WAKE_SLEEP_MS = (5, 45), 1.0, 2.0  # the wake phase: one sleeper per CPU
STALL_FLOOR_MS = 0.005  # the least spread of repetitions that _without_stalls assumes (ms)
TURNS_PER_CPU, TURN_MS = 2, 50.0  # the switch phase: CPU-bound jobs per CPU, their size (ms)
MIGRATE_MS = 100.0  # the migration phase: 2 x cpus + 1 processes of this much CPU, 1 ms quanta
TIMER_SLEEPS, TIMER_SLEEP_MS = 500, 1.0  # the timer phase: sleeps per policy, each this long
SIZES = (2.0, 8.0)  # ms of CPU per job in the kernel's batches
PHASE_MS = 2_500.0  # load per phase (ms)
MIN_PHASE_MS, MAX_PHASE_MS = 1_000.0, 600_000.0  # --quick's phases are the shortest
MAX_REPS = 100
IDLE_THINK_MS = 20.0  # the idle phase's think time: long enough for the machine to sleep
OUTLIER_MADS = 8.0  # a request this many MADs off the first fit is left out of the second
TERMS = ("fixed", "per_kib", "turn", "switch")


def config_of(spec: dict[str, Any], world: str = "server") -> dict[str, Any]:
    """The configuration a calibration measures: the spec's keys for `world`, defaults."""
    keys = WORLDS[world]
    unknown = sorted(set(spec) - set(keys))
    if unknown:
        raise spec_error(unknown[0], spec[unknown[0]],
                         f"{'an' if world == 'os' else 'a'} {world} key a calibration "
                         "takes: " + ", ".join(keys))
    if world == "os":
        config = {"cpus": len(os.sched_getaffinity(0)), "enforce": "stop", **spec}
        if config["enforce"] not in ("stop", "fifo"):
            raise spec_error("enforce", config["enforce"], "stop or fifo")
    else:
        config = {**DEFAULTS, **spec}
    cpus = config["cpus"]
    if not (isinstance(cpus, int) and not isinstance(cpus, bool) and cpus >= 1):
        raise spec_error("cpus", cpus, "a number of worker threads >= 1" if world == "server"
                         else f"a number of CPUs from 1 to {len(os.sched_getaffinity(0))}")
    return config


def _sizes(packet: int, per_byte: float) -> list[int]:
    """File sizes that spread the worker time: from 1 KiB to about 5 ms of emulated cost
    (between 4 and 32 packets)."""
    most = 5.0 / per_byte if per_byte > 0 else 16 * packet
    most = int(min(max(most, 4 * packet), 32 * packet))
    return [1024] + [int(most * k / 5) for k in range(1, 6)]


def _phase(gate: _Gate, name: str, config: dict[str, Any], policy: str, params: dict[str, Any],
           clients: int, sizes: list[int], seed: int, duration_ms: float,
           think: float | None = None) -> Any:
    catalogue = [{"path": f"/cal/{i}.bin", "bytes": b} for i, b in enumerate(sizes)]
    if think is None:
        think = 0.5 if clients == 1 else 0.0
    spec = {**config, "policy": policy, "params": params, "clients": clients,
            "think": f"det:{think}", "catalogue": catalogue,
            "time": duration_ms, "warmup": 20, "seed": seed, "retry_noisy": gate.retries}
    return gate.run(name, spec)


class _Gate:
    """The runs of a calibration, phase by phase, through its world's noise gate (`run`, which
    reruns a noisy one up to `retries` times), and those still flagged after their retries:
    the profile's warnings, in one wording for both worlds."""

    def __init__(self, run: Callable[[dict[str, Any]], Any], retries: int) -> None:
        self._run = run
        self.retries = retries
        self.runs: dict[str, int] = {}
        self.flagged: dict[str, list[list[str]]] = {}

    def run(self, phase: str, spec: dict[str, Any]) -> Any:
        result = self._run(spec)
        self.runs[phase] = self.runs.get(phase, 0) + 1
        if result.summary.get("noisy"):
            self.flagged.setdefault(phase, []).append(list(result.summary["noise_reasons"]))
        return result

    def warnings(self) -> list[str]:
        return [f"the {phase} phase: {len(reasons)} of {self.runs[phase]} "
                f"run{'' if self.runs[phase] == 1 else 's'} still noisy after {self.retries} "
                f"retries (first: {'; '.join(reasons[0])}): its terms may carry the machine as "
                "it was shared; calibrate again on a quiet machine"
                for phase, reasons in self.flagged.items()]


def _os_run(spec: dict[str, Any]) -> Any:
    from schedlab import osrun

    return osrun.run(spec)


def _switched_turns(schedule: Any) -> dict[int, tuple[int, int]]:
    """Per request: (later turns, later turns whose worker ran another request just
    before)."""
    out: dict[int, list[int]] = {}
    s = schedule.sort_values(["cpu", "start"], kind="stable")
    for _cpu, rows in s.groupby("cpu"):
        prev = None
        seen: set[int] = set()
        for job in rows["job"].to_numpy():
            job = int(job)
            later = job in seen
            seen.add(job)
            if later:
                c = out.setdefault(job, [0, 0])
                c[0] += 1
                c[1] += int(prev != job)
            prev = job
    # A request's turns on several workers: count its first turn once, on any worker.
    first = schedule.groupby("job")["cpu"].nunique()
    for job, workers in first.items():
        if workers > 1:
            c = out.setdefault(int(job), [0, 0])
            c[0] += int(workers) - 1
            c[1] += int(workers) - 1
    return {k: (v[0], v[1]) for k, v in out.items()}


def _rows(result: Any) -> np.ndarray:
    """[worker ms, KiB, later turns, switched turns, response ms] per served request."""
    import numpy as np

    jobs = result.jobs
    jobs = jobs[(jobs["error"] == 0) & jobs["service"].notna()]
    turns = _switched_turns(result.schedule)
    later = np.array([turns.get(int(j), (0, 0)) for j in jobs["job"]], dtype=float)
    later = later.reshape(-1, 2)
    return np.column_stack([jobs["service"].to_numpy(float), jobs["bytes"].to_numpy(float) / 1024,
                            later[:, 0], later[:, 1], jobs["response"].to_numpy(float)])


def _fit(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Least squares of worker time on (1, KiB, later turns, switched turns), refit without
    the requests far off the first fit. Returns (coefficients, standard errors, n, left out)."""
    import numpy as np

    y = rows[:, 0]
    x = np.column_stack([np.ones(len(rows)), rows[:, 1], rows[:, 2], rows[:, 3]])
    coef = np.linalg.lstsq(x, y, rcond=None)[0]
    resid = y - x @ coef
    mad = float(np.median(np.abs(resid - np.median(resid)))) or 1e-9
    keep = np.abs(resid - np.median(resid)) <= OUTLIER_MADS * 1.4826 * mad
    x, y = x[keep], y[keep]
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ coef
    dof = max(len(y) - x.shape[1], 1)
    s2 = float(resid @ resid) / dof
    cov = s2 * np.linalg.pinv(x.T @ x)
    return coef, np.sqrt(np.maximum(np.diag(cov), 0.0)), int(len(y)), int((~keep).sum())


def _term(mean: float, se: float, n: int, unit: str, **extra: Any) -> dict[str, Any]:
    from scipy import stats

    half = float(stats.t.ppf(0.975, max(n - 1, 1))) * se
    return {"mean": float(mean), "low": float(mean - half), "high": float(mean + half),
            "unit": unit, **extra}


def _quantiles(values: np.ndarray) -> dict[str, float]:
    import numpy as np

    return {"p50": float(np.quantile(values, 0.5)), "p95": float(np.quantile(values, 0.95))}


def _quantiles_with_intervals(values: np.ndarray) -> dict[str, float]:
    """p50, p95, p99, each with its distribution-free 95% interval (the order statistics
    that bracket the quantile with probability 0.95: binomial counts), and the max."""
    import numpy as np
    from scipy import stats

    v = np.sort(np.asarray(values, dtype=float))
    n = len(v)
    out: dict[str, float] = {}
    for q in (0.5, 0.95, 0.99):
        name = f"p{round(q * 100)}"
        low = int(stats.binom.ppf(0.025, n, q))  # 1-based rank of the lower bound
        high = int(stats.binom.ppf(0.975, n, q))  # 0-based index of the upper bound
        out |= {name: float(np.quantile(v, q)), f"{name}_low": float(v[max(low - 1, 0)]),
                f"{name}_high": float(v[min(high, n - 1)])}
    return out | {"max": float(v[-1])}


def _timer_terms(cpu: int, unit: str) -> dict[str, dict[str, Any]]:
    """A timer's overshoot on `cpu`, sleep by sleep (schedlab.osrun.timer), under SCHED_FIFO
    (`timer`) in turns with SCHED_OTHER (`timer_other`); SCHED_OTHER's alone where the kernel
    refuses FIFO."""
    import numpy as np

    from schedlab.osrun import timer

    try:
        probe = timer.overshoots(cpu, TIMER_SLEEPS, TIMER_SLEEP_MS, fifo=True)
    except PermissionError:
        probe = timer.overshoots(cpu, TIMER_SLEEPS, TIMER_SLEEP_MS, fifo=False)
    terms = {}
    for policy, name in (("fifo", "timer"), ("other", "timer_other")):
        if policy not in probe:
            continue
        late = np.asarray(probe[policy]["overshoot_ms"], dtype=float)
        se = float(np.std(late, ddof=1) / math.sqrt(len(late)))
        terms[name] = _term(float(np.mean(late)), se, len(late), unit,
                            **_quantiles_with_intervals(late), sleeps=len(late),
                            sleep_ms=TIMER_SLEEP_MS, cpu=cpu,
                            slack_ms=probe[policy]["slack_ns"] / 1e6)
    return terms


def calibrate_server(spec: dict[str, Any] | None = None, *, seed: int = 1,
                     phase_ms: float = PHASE_MS) -> dict[str, Any]:
    """Measures the server configured by `spec` (keys of `CONFIG_KEYS`) and returns its
    profile (write it with `schedlab.profile.write`)."""
    import numpy as np

    config = config_of(dict(spec or {}))
    _ms, packet, per_byte = machinery.packet_ms(config)  # a bad cost: refused before any run
    started = time.monotonic()
    sizes = _sizes(packet, per_byte)
    large = [b for b in sizes if b > 1024]
    cpus = int(config["cpus"])
    gate = _Gate(machinery.run, SERVER_RETRY_NOISY)
    alone = _phase(gate, "alone", config, "fcfs", {}, 1, sizes, seed, phase_ms)
    turns = _phase(gate, "turns", config, "rr", {"quantum": 1}, 1, large, seed + 1, phase_ms)
    switches = _phase(gate, "switches", config, "rr", {"quantum": 1}, 2 * cpus, large, seed + 2,
                      phase_ms)
    # One client that thinks long enough for the machine to fall asleep between requests.
    idle_run = _phase(gate, "idle", config, "fcfs", {}, 1, sizes, seed + 3, phase_ms,
                      think=IDLE_THINK_MS)
    idle = _rows(idle_run)
    warnings = gate.warnings()
    rows = [_rows(r) for r in (alone, turns, switches)]
    coef, se, n, left_out = _fit(np.vstack(rows))
    a = rows[0]
    # Worker time of a request alone beyond its bytes: the spread of the fixed cost.
    fixed_each = a[:, 0] - coef[1] * a[:, 1]
    # Outside the workers with no queue: the client's response minus the worker's time.
    delay = a[:, 4] - a[:, 0]
    units = profiles.SERVER_TERMS
    terms = {name: _term(coef[i], se[i], n, units[name]) for i, name in enumerate(TERMS)}
    terms["fixed"].update(_quantiles(fixed_each))
    terms["delay"] = _term(float(np.mean(delay)), float(np.std(delay, ddof=1) / math.sqrt(
        len(delay))), len(delay), units["delay"], **_quantiles(delay))
    idle_delay = idle[:, 4] - idle[:, 0]
    terms["idle_delay"] = _term(float(np.mean(idle_delay)), float(np.std(
        idle_delay, ddof=1) / math.sqrt(len(idle_delay))), len(idle_delay),
        profiles.OPTIONAL_SERVER_TERMS["idle_delay"], think_ms=IDLE_THINK_MS,
        **_quantiles(idle_delay))
    seconds = time.monotonic() - started
    return {
        "profile": {**_machine(profiles.SERVER, seconds),
                    "config": {k: v for k, v in config.items() if v is not None},
                    "warnings": warnings},
        "server": terms,
        "fit": {
            "requests": n, "left_out": left_out, "phase_ms": phase_ms,
            "phases": {"alone": len(rows[0]), "turns": len(rows[1]), "switches": len(rows[2]),
                       "idle": len(idle)},
            "file_bytes": sizes, "packet_bytes": packet,
            "emulated_ms_per_kib": per_byte * 1024,
        },
    }


def _os_batch(gate: _Gate, phase: str, config: dict[str, Any], n: int, size: float, seed: int,
              **policy: Any) -> dict[str, Any]:
    """One batch of `n` one-shot processes of `size` ms of CPU on the configured CPUs; the
    os world's summary."""
    spec = {"batch": n, "size": f"det:{size}", "cpus": config["cpus"], "seed": seed,
            **OS_RUN_OPTIONS, **policy}
    return gate.run(phase, spec).summary


def _exit_cost(gate: _Gate, config: dict[str, Any], n: int, seed: int,
               dispatched: dict[str, Any]) -> tuple[float, float]:
    """A CPU's time per job end after a final I/O, and per start of a job of 1 ms: `n`
    processes of one 1 ms burst and a final sleep of EXIT_SLEEP_MS under the dispatcher's RR
    (quantum 10 ms). A sleeper that wakes queues behind the first runs still to come, so the
    first runs go back to back (their span over their number per CPU, less the 1 ms, is a
    start), and those that woke before the last first run ended end back to back after it
    (their completions' span over their number, per CPU, is an end)."""
    import numpy as np

    spec = {"jobs": n, "clients": n, "think": "det:0", "size": "det:1", "bursts": 1,
            "io": f"sleep:det:{EXIT_SLEEP_MS}", "cpus": config["cpus"], "seed": seed,
            **OS_RUN_OPTIONS, "keep_jobs": True, "params": {"quantum": 10.0},
            **dispatched}
    jobs = gate.run("exits", spec).jobs
    cpus = int(config["cpus"])
    firsts = jobs["first_run"].to_numpy(dtype=float)
    start = (float(firsts.max() - firsts.min()) / (len(firsts) - cpus) * cpus - 1.0
             if len(firsts) > cpus else float("nan"))
    last_burst = float(firsts.max()) + 1.0
    woke = jobs[jobs["first_run"] + 1.0 + EXIT_SLEEP_MS < last_burst]
    ends = np.sort(woke["completion"].to_numpy(dtype=float))
    if len(ends) < 2:
        return float("nan"), start
    return float(ends[-1] - ends[0]) / (len(ends) - 1) * cpus, start


def _wake_cost(gate: _Gate, config: dict[str, Any], seed: int, **policy: Any) -> float:
    """A sleep's cost beyond itself: one process per CPU of k bursts of WAKE_BURST_MS, each
    followed by a sleep of WAKE_SLEEP_MS, on CPUs that idle while it sleeps, at two k: the
    slope of its response over k less a burst and a sleep. Its start and exit are in both
    responses and cancel."""
    cpus = int(config["cpus"])
    responses = []
    for k in WAKE_BURSTS:
        spec = {"jobs": cpus, "clients": cpus, "think": "det:0", "size": f"det:{k * WAKE_BURST_MS}",
                "bursts": k, "io": f"sleep:det:{WAKE_SLEEP_MS}", "cpus": cpus, "seed": seed,
                **OS_RUN_OPTIONS, **policy}
        responses.append(float(gate.run("wake-ups", spec).summary["response_mean"]))
    per_sleep = (responses[1] - responses[0]) / (WAKE_BURSTS[1] - WAKE_BURSTS[0])
    return per_sleep - WAKE_BURST_MS - WAKE_SLEEP_MS


def _without_stalls(values: list[float]) -> list[float]:
    """The values but those far above their median (OUTLIER_MADS; the spread taken at least
    STALL_FLOOR_MS): a stall only ever makes a run slower."""
    import numpy as np

    v = np.asarray(values, dtype=float)
    mid = float(np.median(v))
    spread = max(1.4826 * float(np.median(np.abs(v - mid))), STALL_FLOOR_MS)
    return [float(x) for x in v if x - mid <= OUTLIER_MADS * spread]


def _migration_cost(gate: _Gate, config: dict[str, Any], seed: int, start: float, switch: float,
                    dispatched: dict[str, Any]) -> tuple[float, int]:
    """What a migration adds to a quantum's switch: 2 x cpus + 1 processes of MIGRATE_MS under
    the dispatcher's RR in 1 ms quanta (one process more than pairs of CPUs, so that a process
    resumes on another CPU at about every other switch); the CPUs' overhead beyond the
    processes' starts and switches, per migration the kernel counted."""
    cpus = int(config["cpus"])
    n = 2 * cpus + 1
    s = _os_batch(gate, "migrations", config, n, MIGRATE_MS, seed, params={"quantum": 1.0},
                  **dispatched)
    extra = float(s["response_max"]) * cpus - n * (start + MIGRATE_MS) \
        - float(s["context_switches"]) * switch
    moves = int(s["migrations"])
    return (extra / moves if moves else float("nan")), moves


def _per_cpu_job(summary: dict[str, Any], cpus: int) -> float:
    """A CPU's wall time per job (ms): the batch's makespan over its jobs per CPU."""
    return float(summary["response_max"]) * cpus / float(summary["jobs"])


def _over_reps(values: list[float], unit: str, **extra: Any) -> dict[str, Any]:
    import numpy as np

    v = np.asarray(values, dtype=float)
    se = float(np.std(v, ddof=1) / math.sqrt(len(v))) if len(v) > 1 else float("nan")
    return _term(float(np.mean(v)), se, len(v), unit, reps=[float(x) for x in v], **extra)


def calibrate_os(spec: dict[str, Any] | None = None, *, seed: int = 1, reps: int = REPS,
                 many: int = MANY, parts: tuple[str, ...] = profiles.OS_PARTS) -> dict[str, Any]:
    """Measures real processes on the CPUs configured by `spec` (keys of `OS_CONFIG_KEYS`)
    and returns their profile (write it with `schedlab.profile.write`). `many`: processes per
    CPU of the larger population; `parts`: of profile.OS_PARTS, those to measure."""
    config = config_of(dict(spec or {}), "os")
    cpus = int(config["cpus"])
    started = time.monotonic()
    gate = _Gate(_os_run, OS_RUN_OPTIONS["retry_noisy"])
    units = profiles.OS_TERMS
    terms: dict[str, Any] = {}
    short_reps = reps + EXTRA_REPS
    # Each kernel class's line: a CPU's wall time per job of a batch = start + scale x size,
    # at few and at many processes. FIFO runs a batch back to back; CFS/EEVDF shares the CPUs
    # until nearly all end: either way the makespan over a CPU's jobs, its switches included.
    kernel_classes = (("", {"sched": "fifo", "rtprio": 10}), ("other_", {"sched": "other"}))
    for prefix, policy in kernel_classes if "kernel" in parts else ():
        for per_cpu in (FEW, many):
            n = per_cpu * cpus
            starts, scales = [], []
            # The few processes' batches last tens of ms, where one late end moves a slope
            # by a tenth (SCHED_OTHER's scale: 0.92-1.23 a repetition).
            for r in range(short_reps if per_cpu == FEW else reps):
                w = [_per_cpu_job(_os_batch(gate, "kernel batches", config, n, size, seed + r,
                                            policy="kernel",
                                            **policy), cpus) for size in SIZES]
                scale = (w[1] - w[0]) / (SIZES[1] - SIZES[0])
                scales.append(scale)
                starts.append(w[0] - scale * SIZES[0])
            suffix = "" if per_cpu == FEW else "_many"
            for name, values in (("start", starts), ("scale", scales)):
                term = f"{prefix}{name}{suffix}"
                terms[term] = _over_reps(values, units[term], tasks=n)
    # The user-space dispatcher: tiny jobs (a job's start through it), then CPU-bound jobs in
    # 1 ms quanta (a quantum's switch).
    dispatched = {"policy": "rr", "enforce": config["enforce"]}
    tiny = 0.01
    if "dispatcher" in parts:
        _dispatcher_terms(gate, config, terms, seed, reps, many, tiny, dispatched)
    # A sleep's wake-up: under the kernel (FIFO; the timer's overshoot and the kernel's
    # wake-up) and through the dispatcher (the same and its hand-off to the woken worker).
    # A lone process's CPU clock runs with the wall clock (the batches' `scale` is a crowd's).
    optional = profiles.OPTIONAL_OS_TERMS
    # A stall of this shared machine in one run moves a slope by tenths of a ms: left out.
    for term, policy in (("kernel_wake", {"policy": "kernel", "sched": "fifo", "rtprio": 10}),
                         ("dispatch_wake", {**dispatched, "params": {"quantum": 10.0}})):
        if profiles.part_of(term) not in parts:
            continue
        wakes = [_wake_cost(gate, config, seed + r, **policy) for r in range(short_reps)]
        kept = _without_stalls(wakes)
        terms[term] = _over_reps(kept, optional[term], tasks=cpus,
                                 stalled=[w for w in wakes if w not in kept])
    # The timer's overshoot, one sleep at a time (the wake-up terms above are means over many):
    # under SCHED_FIFO, which gets no timer slack, and under SCHED_OTHER, which does. Reported
    # with its spread; the model's wake-up is the terms above.
    terms.update(_timer_terms(0, optional["timer"]))
    if cpus > 1 and "dispatcher" in parts:
        # As the wake-ups: one stall in a run of ~500 migrations once moved a repetition to
        # 0.35 ms per migration where the others gave -0.003.
        moved = [_migration_cost(gate, config, seed + r, terms["dispatch_start"]["mean"],
                                 terms["dispatch_switch"]["mean"], dispatched)
                 for r in range(short_reps)]
        costs = [c for c, _ in moved if math.isfinite(c)]
        if costs:
            kept = _without_stalls(costs)
            terms["dispatch_migrate"] = _over_reps(kept, optional["dispatch_migrate"],
                                                   tasks=2 * cpus + 1,
                                                   migrations=[m for _, m in moved],
                                                   stalled=[c for c in costs if c not in kept])
    seconds = time.monotonic() - started
    fit: dict[str, Any] = {"reps": reps, "reps_short": short_reps}
    if "kernel" in parts:
        fit.update({"sizes_ms": list(SIZES), "tasks": [FEW * cpus, many * cpus]})
    if "dispatcher" in parts:
        fit["dispatcher"] = {"tiny_ms": tiny, "quantum_ms": 1.0,
                             "turn_tasks": TURNS_PER_CPU * cpus, "turn_ms": TURN_MS,
                             "exit_tasks": EXIT_TASKS * cpus, "exit_sleep_ms": EXIT_SLEEP_MS}
    fit.update({"wake": {"bursts": list(WAKE_BURSTS), "burst_ms": WAKE_BURST_MS,
                         "sleep_ms": WAKE_SLEEP_MS},
                "timer": {"sleeps": TIMER_SLEEPS, "sleep_ms": TIMER_SLEEP_MS, "cpu": 0}})
    if cpus > 1 and "dispatcher" in parts:
        fit["migrate"] = {"tasks": 2 * cpus + 1, "ms": MIGRATE_MS, "quantum_ms": 1.0}
    return {
        "profile": {**_machine(profiles.OS, seconds), "config": config,
                    "parts": [p for p in profiles.OS_PARTS if p in parts],
                    "warnings": _mark_disagreeing_scales(terms) + gate.warnings()},
        "os": terms,
        "fit": fit,
    }


def _dispatcher_terms(gate: _Gate, config: dict[str, Any], terms: dict[str, Any], seed: int,
                      reps: int, many: int, tiny: float, dispatched: dict[str, Any]) -> None:
    """The dispatcher's starts (tiny jobs), switches (CPU-bound jobs in 1 ms quanta), and
    exits and long starts (sleepers), into `terms`."""
    cpus = int(config["cpus"])
    units = profiles.OS_TERMS
    short_reps = reps + EXTRA_REPS
    # Batches of tiny jobs are short too, and one of them in about twelve ran 2-3.4 times as
    # slow as the others with no stall the gate sees (2026-12-01: 0.739 ms a start beside 0.216;
    # a quick calibration's mean of two then put the xv6 file's tiny cells at twice the real):
    # repeated as the short phases are, and a run far slower than the others left out.
    for per_cpu in (FEW, many):
        n = per_cpu * cpus
        runs = [_os_batch(gate, "dispatcher starts", config, n, tiny, seed + r,
                          params={"quantum": 10.0}, **dispatched)
                for r in range(short_reps)]
        starts = [_per_cpu_job(s, cpus) - tiny for s in runs]
        kept = _without_stalls(starts)
        suffix = "" if per_cpu == FEW else "_many"
        terms["dispatch_start" + suffix] = _over_reps(kept, units["dispatch_start"], tasks=n,
                                                      stalled=[x for x in starts
                                                               if x not in kept])
        if per_cpu == many:
            # The dispatcher's own CPU clock per job (its start, decision, hand-off and reap),
            # where its wall-time cost is in dispatch_start: the many processes' batches, where
            # it moved least between runs (0.09-0.13 ms at 512; 0.07-0.20 at 16).
            own = [float(s["dispatcher_cpu_ms"]) / n for s in runs
                   if math.isfinite(float(s.get("dispatcher_cpu_ms", math.nan)))]
            if own:
                terms["dispatcher_cpu"] = _over_reps(
                    own, profiles.OPTIONAL_OS_TERMS["dispatcher_cpu"], tasks=n)
    n_turns, size_turns = TURNS_PER_CPU * cpus, TURN_MS
    d_switch = []
    for r in range(reps):
        s = _os_batch(gate, "dispatcher switches", config, n_turns, size_turns, seed + r,
                      params={"quantum": 1.0}, **dispatched)
        # The dispatcher's quanta are wall time and a worker's CPU clock runs with it: the
        # overhead is its starts and its switches.
        extra = float(s["response_max"]) * cpus - n_turns * (
            terms["dispatch_start"]["mean"] + size_turns)
        d_switch.append(extra / max(float(s["context_switches"]), 1.0))
    terms["dispatch_switch"] = _over_reps(d_switch, units["dispatch_switch"], tasks=n_turns)
    # A job that ends with an I/O ends when the dispatcher runs it again (its exit): sleepers
    # whose wake-ups queue behind the others' first runs (RR) then end back to back.
    phase = [_exit_cost(gate, config, EXIT_TASKS * cpus, seed + r, dispatched)
             for r in range(reps)]
    exits = [x for x, _ in phase if math.isfinite(x)]
    if exits:  # else left out, as an older profile has it: no end apart from the start
        terms["dispatch_exit"] = _over_reps(exits, profiles.OPTIONAL_OS_TERMS["dispatch_exit"],
                                            tasks=EXIT_TASKS * cpus)
    # The same runs' first runs: a start of a job of 1 ms, where the tiny batches' start
    # holds the dispatcher's hand-offs lined up one behind the other (2026-12-07: 0.18-0.25
    # ms against 0.55-0.74; the model of 50 processes of 1 ms took the tiny one and came out
    # 4-15% long).
    long_starts = [x for _, x in phase if math.isfinite(x)]
    if long_starts:
        terms["dispatch_start_long"] = _over_reps(
            long_starts, profiles.OPTIONAL_OS_TERMS["dispatch_start_long"],
            tasks=EXIT_TASKS * cpus, size_ms=LONG_START_MS)


def _mark_disagreeing_scales(terms: dict[str, Any]) -> list[str]:
    """Marks each scale whose repetitions disagree (SCALE_AGREEMENT) and says so, one line
    each."""
    out = []
    for name in (n for n in SCALE_TERMS if n in terms):  # a dispatcher-only profile has none
        t = terms[name]
        half = (t["high"] - t["low"]) / 2
        t["disagree"] = bool(half > SCALE_AGREEMENT)
        if t["disagree"]:
            reps = ", ".join(f"{r:.3g}" for r in t["reps"])
            out.append(f"os.{name} = {t['mean']:.3g} [{t['low']:.3g}, {t['high']:.3g}]: its "
                       f"repetitions disagree ({reps}; more than +-{SCALE_AGREEMENT:g}), and a "
                       "model on it is off by as much: calibrate again on a quiet machine")
    return out


def _machine(world: str, seconds: float) -> dict[str, Any]:
    return {"format": profiles.FORMAT, "world": world,
            "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "host": platform.node(), "kernel": platform.release(),
            "cpu": _cpu_model(), "cpus_online": os.cpu_count() or 0,
            "seconds": round(seconds, 2)}


def _cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def calibrate(world: str, out: str | os.PathLike[str] | None = None, *, seed: int = 1,
              phase_ms: float | None = None, reps: int | None = None, quick: bool = False,
              parts: Any = None, **spec: Any) -> dict[str, Any]:
    """Calibrates `world` ("server": as configured by `spec`'s cpus, cost, cost_mode, packet,
    packet_unit, buffer; "os": real processes on `spec`'s cpus, with its enforce), writes the
    profile to `out` (TOML) if given, and returns it. `phase_ms`: the length of a server
    phase; `reps`: repetitions of each os phase; `quick` (demos, CI): server phases of 1 s,
    os phases twice and at most 64 processes per CPU; `parts`: what an os calibration
    measures, "kernel" and/or "dispatcher" (default both; a run is modelled from its own).

        schedlab.calibrate("server", "server.toml", cpus=2, cost="0.25ms+0.02ms/KiB")
        schedlab.simulate("rr", quantum=5, profile="server.toml", ...)
        schedlab.calibrate("os", "os.toml", cpus=2, enforce="fifo")
    """
    if world not in WORLDS:
        raise spec_error("world", world, "server or os")
    config_of(dict(spec), world)  # bad keys: refused before anything is written or run
    seed = typed("seed", seed, KEYS["seed"])  # "1" named as text, before any phase runs
    # Each world's length is its own: a server's reps were ignored silently.
    for key, value, its in (("reps", reps, "os"), ("phase_ms", phase_ms, "server"),
                            ("parts", parts, "os")):
        if value is not None and world != its:
            article = "an" if world == "os" else "a"
            raise spec_error(key, quoted(value), f"nothing in {article} {world} calibration "
                             f"(it is the {its} calibration's)")
    phase_ms = PHASE_MS if phase_ms is None else phase_ms
    reps = REPS if reps is None else reps
    if isinstance(phase_ms, bool) or not isinstance(phase_ms, int | float) or \
            not MIN_PHASE_MS <= phase_ms <= MAX_PHASE_MS:
        raise spec_error("phase_ms", quoted(phase_ms), f"ms of load per server phase, from "
                         f"{MIN_PHASE_MS:g} (requests enough for every phase's fit) to "
                         f"{MAX_PHASE_MS:g}")
    if isinstance(reps, bool) or not isinstance(reps, int) or not 1 <= reps <= MAX_REPS:
        raise spec_error("reps", quoted(reps), "repetitions of each os phase, a whole number "
                         f"from 1 to {MAX_REPS}")
    if not isinstance(quick, bool):
        raise spec_error("quick", quoted(quick), "true or false")
    measured = profiles.check_parts("parts", profiles.OS_PARTS if parts is None
                                     else parts)
    if out is not None:
        from schedlab.files import check_writable

        check_writable("out", out, (".toml",))
    if world == "os":
        result = calibrate_os(spec, seed=seed, reps=min(reps, 2) if quick else reps,
                              many=QUICK_MANY if quick else MANY, parts=measured)
    else:
        result = calibrate_server(spec, seed=seed, phase_ms=min(phase_ms, 1_000.0) if quick
                                  else phase_ms)
    if out is not None:
        profiles.write(out, result)
    return result

"""The simulator world: the discrete-event engine of `crates/sim`, run in this process.

Its native keys are the fields of the core's `SimSpec` (`_core.SIM_KEYS`); the table below
says how it reads every other key of the vocabulary.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import schedlab._core as _core
from schedlab._core import SpecError
from schedlab.vocabulary import (
    DEFAULT_SEED,
    KERNEL,
    RTPRIO_RULE,
    as_written,
    batches_beside,
    check_deadline_budget,
    cpu_list,
    flat_spec,
    quoted,
    replication_seed,
    spec_error,
    whole_number,
)
from schedlab.worlds import (
    NATIVE,
    Translation,
    check_native,
    drops,
    every_class,
    io_bursts,
    maps,
    refuses,
)

if TYPE_CHECKING:
    from schedlab.results import Replications, Result

# A kernel policy as the simulator models it: its textbook policy and parameters.
MODEL_OF_KERNEL = {
    "other": ("cfs", {}),
    "batch": ("cfs", {}),
    "fifo": ("priority", {"preemptive": True}),
    "rr": ("priority", {"preemptive": True, "quantum": 100.0}),
    "deadline": ("edf", {}),
}
KERNEL_ATTRIBUTES = ("sched", "rtprio", "runtime", "period")


def kernel_scheds(spec: dict[str, Any]) -> set[str]:
    """The kernel policies a run's tasks have (its `sched`, or each class's own)."""
    sched = spec.get("sched", "other")
    return {c.get("sched", sched) for c in spec.get("classes") or []} or {sched}


def _policy(t: Translation, key: str) -> None:
    """A kernel policy (`policy = "kernel"`) becomes the textbook policy that models it."""
    if not t.policy_is_kernel():
        return
    s = t.spec
    kinds = kernel_scheds(s)
    s.pop("sched", None)
    where = t.path("policy")
    if len(kinds) > 1:
        t.refuse(t.path("classes"), sorted(kinds), "different kernel policies in one run have "
                 "no model in the simulator")
        return
    sched = kinds.pop()
    if sched not in MODEL_OF_KERNEL:
        t.refuse(t.where.get("sched", where), sched, f"SCHED_{sched.upper()} has no model in "
                 "the simulator")
        return
    name, extra = MODEL_OF_KERNEL[sched]
    s["policy"] = name
    model = name + (" " + ", ".join(f"{k}={v}" for k, v in extra.items()) if extra else "")
    t.note("policy", f"kernel {sched}", f"modelled by {model}")
    if extra:
        s["params"] = {**extra, **(s.get("params") or {})}
    rtprio = s.pop("rtprio", 1)
    deadline = s.pop("deadline", None)
    budget = {k: s.pop(k, None) for k in ("runtime", "period")}
    if sched in ("fifo", "rr"):
        for i, c in enumerate(t.classes(create=True)):
            p = c.get("rtprio", rtprio)
            if not (isinstance(p, int) and not isinstance(p, bool) and 1 <= p <= 98):
                path = t.class_path(i, "rtprio") if "rtprio" in c else t.path("rtprio")
                raise spec_error(path, quoted(p), f"a real-time priority: {RTPRIO_RULE}")
            c["priority"] = 99 - p
        t.note("policy", f"kernel {sched}", "real-time priority p becomes priority 99 - p "
               "(lower runs first)")
    elif sched == "deadline":
        for i, c in enumerate(t.classes(create=True)):
            d = c.get("deadline", deadline)
            # The kernel's rule, as the os world refuses it: the model drops the runtime, but
            # a run it would refuse is no run to model.
            path = t.class_path(i, "runtime") if "runtime" in c else t.path("runtime")
            check_deadline_budget(path, c.get("runtime", budget["runtime"]), d,
                                  c.get("period", budget["period"]))
            if d is not None:
                c["deadline"] = d
    for c in t.spec.get("classes") or []:
        for k in KERNEL_ATTRIBUTES:
            c.pop(k, None)


def _wait_dist(t: Translation, path: str, value: Any) -> Any:
    """The os world's io (sleep:DIST, dsync:BYTES) as the simulator's I/O wait."""
    if isinstance(value, str):
        kind, sep, rest = value.partition(":")
        if sep and kind.strip().lower() == "sleep":
            return rest
        if sep and kind.strip().lower() == "dsync":
            t.refuse(path, value, "a synchronous write to a real disk has no model in the "
                     "simulator (give io as a distribution of waiting times, or sleep:DIST)")
            return None
    return value


def _io(t: Translation, key: str) -> None:
    io_bursts(t, "sim")
    if key in t.spec:
        new = _wait_dist(t, t.path(key), t.spec[key])
        if new is not None:
            t.spec[key] = new


def _class_io(t: Translation, i: int, key: str) -> None:
    io_bursts(t, "sim")
    c = t.spec["classes"][i]
    if key in c:
        new = _wait_dist(t, t.class_path(i, key), c[key])
        if new is not None:
            c[key] = new


def _whole_batch(path: str, v: object, least: int) -> int:
    """Checked as `batch`: as `clients` and `jobs` its message named the key not given. A
    class may have none (the os world's rule too); the whole workload needs one."""
    return whole_number(path, v, least, _core.MAX_CLIENTS, "one-shot processes, each a client")


def _batch(t: Translation, key: str) -> None:
    v = _whole_batch(t.path(key), t.spec.pop(key), 1)
    t.put("clients", v, key)
    t.put("jobs", v, key)
    t.spec.setdefault("think", "det:0")


def _class_batch(t: Translation, i: int, key: str) -> None:
    c = t.spec["classes"][i]
    n = _whole_batch(t.class_path(i, key), c.pop(key), 0)
    c["clients"] = n
    # The run's jobs: one per one-shot task of every class that has a batch.
    if "batch-jobs" not in t.done:
        t.done.add("batch-jobs")
        t.spec["jobs"] = 0
    t.spec["jobs"] += n
    t.spec.setdefault("think", "det:0")


CPU_LIST = "CPU numbers: 0,2 or 0-3 or [0, 1]"


def _cpus(t: Translation, key: str) -> None:
    v = t.spec[key]
    if isinstance(v, list | str):
        try:
            t.spec[key] = len(cpu_list(v))
        except ValueError:
            raise spec_error(t.path(key), v, f"a number of CPUs, or {CPU_LIST}") from None


def _affinity_cpus(path: str, v: object) -> list[int]:
    """An affinity's CPUs. Whether they are the machine's is the core's check, named as the
    user wrote them (`Translation.given`)."""
    try:
        return cpu_list(v)
    except ValueError:
        raise spec_error(path, v, CPU_LIST) from None


def _affinity(t: Translation, key: str) -> None:
    given = t.spec.pop(key)
    cpus = _affinity_cpus(t.path(key), given)
    for i, c in enumerate(t.classes(create=True)):
        if "affinity" not in c:
            c["affinity"] = cpus
            t.where[f"classes[{i}].affinity"] = t.path(key)  # a message names machine.affinity
            t.given[f"classes[{i}].affinity"] = given


def _class_affinity(t: Translation, i: int, key: str) -> None:
    c = t.spec["classes"][i]
    t.given.setdefault(f"classes[{i}].{key}", c[key])  # the machine's, when it put it there
    c[key] = _affinity_cpus(t.class_path(i, key), c[key])


def _ideal(t: Translation, key: str) -> None:
    """A word (start, round-robin) goes as it is; CPUs written as text ("0,1,1") become a
    list."""
    v = t.spec[key]
    if isinstance(v, str) and v.strip().lower() in ("start", "round-robin", "rr"):
        return
    try:
        t.spec[key] = cpu_list(v)
    except ValueError:
        t.refuse(t.path(key), v, "start, round-robin, or a list of CPU numbers")


def _start_pinned(t: Translation, key: str) -> None:
    v = t.spec[key]
    if isinstance(v, int) and not isinstance(v, bool):
        return
    try:
        cpus = cpu_list(v)
    except ValueError:
        cpus = []
    if len(cpus) != 1:
        t.refuse(t.path(key), v, "the simulator starts every task on one CPU (give one CPU)")
    else:
        t.spec[key] = cpus[0]


KERNEL_NOTE = "a kernel attribute: the simulator models kernel policies (policy = kernel)"
SERVER_COST = "a key of the server's emulated cost: sizes are already ms here"

KEYS = {
    "policy": maps(_policy), "params": NATIVE,
    "sched": drops(KERNEL_NOTE), "nice": maps(every_class), "rtprio": drops(KERNEL_NOTE),
    "runtime": drops(KERNEL_NOTE), "deadline": maps(every_class), "period": drops(KERNEL_NOTE),
    "arrival": NATIVE, "load": NATIVE, "size": NATIVE, "jobs": NATIVE, "time": NATIVE,
    "drain": NATIVE, "clients": NATIVE, "think": NATIVE,
    "batch": maps(_batch, "a batch of one-shot processes is as many clients that each run "
                  "one job"),
    "trace": NATIVE, "classes": NATIVE, "bursts": NATIVE, "io": maps(_io), "final_io": NATIVE,
    "io_device": NATIVE, "allow_unstable": NATIVE,
    "bytes": refuses("the simulator has no model of file sizes in bytes: give size in ms "
                     "(the server's cost turns it into bytes)"),
    "files": drops("the simulator draws every job's size from the size law; the server "
                   "serves a catalogue of files drawn from it"),
    "catalogue": refuses("the simulator has no model of an explicit catalogue of files"),
    "zipf": drops("the simulator draws every job's size from the size law; the server "
                  "serves a catalogue of files drawn from it"),
    "burst": refuses("the simulator has no model of a scripted burst: give it as a trace "
                     "(arrival, size, class), which the server world reads as a burst"),
    "cpus": maps(_cpus), "context_switch": NATIVE, "turn_cost": NATIVE, "start_cost": NATIVE,
    "service_scale": NATIVE,
    "service_offset": NATIVE, "dispatch_delay": NATIVE, "idle_wake": NATIVE,
    "dispatcher_cost": NATIVE, "end_cost": NATIVE, "wake_delay": NATIVE,
    "profile": drops("the simulator's ideal model leaves the profile out: the world "
                     "`calibrated` models it"),
    "runqueues": NATIVE, "placement": NATIVE,
    "choices": NATIVE, "balancer": NATIVE, "balance_interval": NATIVE,
    "balance_interval_max": NATIVE, "imbalance": NATIVE, "migration_cost": NATIVE,
    "cache_hot": NATIVE, "timeslice": NATIVE, "affinity": maps(_affinity),
    "start_pinned": maps(_start_pinned), "ideal": maps(_ideal),
    "release_after": NATIVE,
    "boost": NATIVE, "boost_max": NATIVE, "sleep_avg_max": NATIVE, "enforce": drops(),
    "buffer": NATIVE,
    "packet": drops(), "packet_unit": drops(), "cost": drops(SERVER_COST), "cost_mode": drops(),
    "max_connections": drops(), "header_timeout": drops(), "idle_timeout": drops(),
    "send_timeout": drops(), "drain_timeout": drops(),
    "seed": NATIVE, "warmup": NATIVE, "warmup_time": NATIVE, "precision": NATIVE,
    "max_jobs": NATIVE, "batches": NATIVE,
    "max_time": refuses("the server's cap of a run until precise: the simulator's is max_jobs"),
    "threads": drops(), "connections": drops(), "timeout": drops(), "miss": drops(),
    "keep_alive": drops(), "hard_timeout": drops(), "rttime": drops(), "job_counters": drops(),
    "io_dir": drops(), "quiet_wait": drops(), "noise_threshold": drops(),
    "retry_noisy": drops(), "pretend_missing": drops(),
    "keep_jobs": NATIVE, "keep_schedule": NATIVE, "load_sample": NATIVE,
    "hdr_log": drops(), "server_log": drops(),
    "trace_migrations": drops("the kernel's trace of real processes (os world)"),
}

CLASS_KEYS = {
    "name": NATIVE, "fraction": NATIVE, "size": NATIVE,
    "bytes": refuses("the simulator has no model of file sizes in bytes: give size in ms"),
    "priority": NATIVE, "tickets": NATIVE, "weight": NATIVE, "nice": NATIVE,
    "deadline": NATIVE, "clients": NATIVE,
    "batch": maps(_class_batch, "one-shot processes are clients that each run one job"),
    "think": NATIVE, "bursts": NATIVE, "io": maps(_class_io), "final_io": NATIVE,
    "io_kind": NATIVE,
    "affinity": maps(_class_affinity),
    "start_pinned": refuses("the simulator pins every task or none (use "
                            "machine.start_pinned)"),
    "release_after": refuses("the simulator pins every task or none (use "
                             "machine.start_pinned)"),
    "prefix": drops(), "sched": drops(), "rtprio": drops(), "runtime": drops(),
    "period": drops(), "rttime": drops(),
}

# The keys the core reads (its SimSpec); the table's NATIVE keys must be these (a test checks).
NATIVE_KEYS = frozenset(_core.SIM_KEYS)
NATIVE_CLASS_KEYS = frozenset(_core.SIM_CLASS_KEYS)
# Keys a direct run (the CLI, `simulate`) takes that the simulator reads through an experiment
# file's translation (`direct_translation`): one-shot processes, a nice or a deadline for every
# class, the machine's affinity (in every class), and a kernel policy's attributes (with
# `policy = "kernel"`). A class's own affinity is native (its text form becomes a list first).
TRANSLATED_KEYS = frozenset({"batch", "nice", "deadline", "affinity"})
TRANSLATED_CLASS_KEYS = frozenset({"batch"})
# What a direct run takes: the native keys, those translated, and a profile (core_spec applies
# it as the table's mapping does).
DIRECT_KEYS = NATIVE_KEYS | TRANSLATED_KEYS | set(KERNEL_ATTRIBUTES) | {"profile"}
DIRECT_CLASS_KEYS = NATIVE_CLASS_KEYS | TRANSLATED_CLASS_KEYS | set(KERNEL_ATTRIBUTES)


def core_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """A spec as the core takes it: parameters in `params`, bare numbers as `det:`."""
    if spec.get("profile") is not None:
        from schedlab import profile  # a TOML file and the server's cost model: on use

        if replaced := profile.replaced(spec):
            key, (given, measured) = next(iter(replaced.items()))
            raise spec_error(key, quoted(given), f"nothing beside profile, which sets {key} "
                             f"to what it measured ({measured:.4g}); leave the profile out to "
                             f"model {key} = {given}")
        spec, _notes = profile.apply(spec)
    core = direct_translation(flat_spec(**spec))
    check_native("sim", KEYS, NATIVE_KEYS, core)
    for i, c in enumerate(core.get("classes") or []):
        if isinstance(c, dict):
            check_native("sim", CLASS_KEYS, NATIVE_CLASS_KEYS, c, f"classes[{i}].")
    return core


def _check_direct(spec: dict[str, Any]) -> None:
    """What a direct run takes in the simulator's own forms, checked before any translation
    (which takes the os world's as well: with batch given, cpus = [0, 2] would become 2)."""
    _check_direct_io(spec)
    cpus = spec.get("cpus")
    if cpus is not None and not (type(cpus) is int and cpus >= 1):
        # Said once for every wrong form (text, a list, 0, -2), as the core says a count too large.
        raise spec_error("cpus", quoted(cpus),
                         f"a whole number from 1 to {_core.MAX_CPUS} (the simulator counts its "
                         "CPUs; a list of CPU numbers is the os world's)")


def direct_translation(spec: dict[str, Any], notes: list[str] | None = None) -> dict[str, Any]:
    """A direct run's spec with the keys the simulator reads through an experiment file's
    translation translated as a file's are (`batch` as clients of one job each, `nice` and
    `deadline` in every class, `affinity` in every class, a kernel policy as the textbook
    policy that models it); as given when it has none. A class's affinity written as text
    becomes its list. A kernel attribute without the kernel policy, a key the translation
    would drop, or a run the simulator has no model of, is refused (a file drops or skips
    it). What the translation did is appended to `notes`."""
    _check_direct(spec)
    spec, given = _class_affinities(spec)
    classes = spec.get("classes") or []
    kernel = spec.get("policy") == KERNEL
    if not kernel:
        places = [(k, spec) for k in KERNEL_ATTRIBUTES] + [
            (f"classes[{i}].{k}", c) for i, c in enumerate(classes) for k in KERNEL_ATTRIBUTES]
        for path, table in places:
            key = path.rpartition(".")[2]
            if key in table:
                raise spec_error(path, quoted(table[key]), f"nothing without policy = kernel: "
                                 f"{KERNEL_NOTE}")
    if not (kernel or TRANSLATED_KEYS & set(spec)
            or any(TRANSLATED_CLASS_KEYS & set(c) for c in classes if isinstance(c, dict))):
        _judged_as_written({k: v for k, v in spec.items() if k != "profile"}, given, {})
        return spec
    from schedlab.worlds import translate

    # What the translation would drop (threads, a class's prefix) is refused, as it is where
    # nothing is translated.
    check_native("sim", KEYS, DIRECT_KEYS, spec)
    for i, c in enumerate(classes):
        if isinstance(c, dict):
            check_native("sim", CLASS_KEYS, DIRECT_CLASS_KEYS, c, f"classes[{i}].")
    # A direct run's profile is the calibrated model's (core_spec applies it), which a
    # file's sim world leaves out.
    profile = {k: spec[k] for k in ("profile",) if k in spec}
    t = translate("sim", {k: v for k, v in spec.items() if k != "profile"})
    if t.skip is not None:
        path, value, reason = t.skip
        raise spec_error(path, value, f"a run the simulator has a model of: {reason}")
    if notes is not None:
        notes += [n for n in t.notes if n not in notes]
    _judged_as_written(t.spec, {**t.given, **given}, t.where)
    return {**t.spec, **profile}


def _class_affinities(spec: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`spec` with each class's affinity written as text ("0-3") as its list, and the text
    as written by path (classes[0].affinity), for the core's refusal of it."""
    classes = spec.get("classes")
    if not isinstance(classes, list):
        return spec, {}
    given: dict[str, Any] = {}
    out = []
    for i, c in enumerate(classes):
        if isinstance(c, dict) and isinstance(c.get("affinity"), str):
            path = f"classes[{i}].affinity"
            given[path] = c["affinity"]
            c = {**c, "affinity": _affinity_cpus(path, c["affinity"])}
        out.append(c)
    return ({**spec, "classes": out} if given else spec), given


def _judged_as_written(core: dict[str, Any], given: dict[str, Any],
                       where: dict[str, str]) -> None:
    """A key moved or rewritten here (the machine's affinity or a nice in every class, a
    class's text affinity) is judged by the core, its refusal named with the key and value
    as the user wrote them."""
    if not given:
        return
    try:
        _core.validate(core)
    except SpecError as e:
        if e.key in given:
            raise spec_error(where.get(e.key, e.key), as_written(given[e.key]), e.allowed) \
                from None
        raise


def _check_direct_io(core: dict[str, Any]) -> None:
    """The os world's io forms given to the simulator itself (the command line, `simulate`),
    where no translation of an experiment file turns them into its waits: told what it takes
    (the parser said "expected numbers after the colon")."""
    places = [("io", core)] + [(f"classes[{i}].io", c)
                               for i, c in enumerate(core.get("classes") or [])]
    for path, table in places:
        value = table.get("io")
        kind = value.partition(":")[0].strip().lower() if isinstance(value, str) else ""
        if kind in ("sleep", "dsync"):
            raise spec_error(path, value, "a distribution of the waits between bursts (exp:5; "
                             "with final_io after the last burst too): sleep:DIST and "
                             "dsync:BYTES are the os world's forms, which an experiment file "
                             "translates for the simulator")


def validate(spec: dict[str, Any]) -> dict[str, Any]:
    """Checks a spec without running it; returns the spec the core accepts. Raises SpecError
    naming the key, the value and what is allowed."""
    core = core_spec(spec)
    _core.validate(core)
    return core


def warmup(spec: dict[str, Any]) -> int:
    """The jobs a run of this spec discards at its start: the given `warmup`, or with
    "auto" the MSER-5 truncation its pilot runs find (the run itself is not made)."""
    return int(_core.warmup(core_spec(spec)))


def run(spec: dict[str, Any]) -> Result:
    """Runs one simulation; per-job rows are kept unless `keep_jobs` is false."""
    from schedlab.results import Result  # pandas: not at import time

    spec = {"keep_jobs": True, **spec}
    core = core_spec(spec)
    return Result.from_core(_core.simulate(core), core)


def replication_specs(spec: dict[str, Any], replications: int) -> list[dict[str, Any]]:
    """The core specs of `replications` independent runs of `spec`: replication r is seeded
    `replication_seed(seed, r)`, as an experiment file seeds its replications."""
    if replications > 1 and spec.get("batches") is not None:
        raise spec_error("batches", quoted(spec["batches"]), batches_beside(replications))
    seed = int(spec.get("seed", DEFAULT_SEED))
    core = core_spec(spec)
    return [{**core, "seed": replication_seed(seed, r)} for r in range(replications)]


def run_replications(spec: dict[str, Any], replications: int,
                     workers: int | None = None) -> Replications:
    """Independent replications of one spec, run in the core on `workers` threads (default:
    every core) with the same results as one after the other."""
    return run_replications_many([spec], replications, workers)[0]


def run_replication_summaries_and_classes(
        spec: dict[str, Any], replications: int, workers: int | None = None
) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """The run summaries and class records alone of `run_replications(spec, ...)` (no other
    table, nor pandas to hold one): what `schedlab sim --replications` prints, through
    `stats.across_replications` and `stats.classes_across_replications`."""
    runs = replication_specs({**spec, "keep_jobs": False}, replications)
    return [(raw["summary"], raw["classes"]) for raw in _core.simulate_many(runs, workers)]


def common_warmups(runs: list[list[dict[str, Any]]], workers: int | None = None) -> None:
    """Policies compared on the same seeds discard the same jobs, as in an experiment file:
    `runs[p][r]` is the core spec of policy `p` in replication `r`; every policy of one
    replication gets the largest truncation any of them finds (its pilots, with `warmup =
    "auto"`), so that all are measured on the same jobs and common random numbers pair them
    job by job (each policy's transient is then over). In place; a `warmup_time` is common
    already and is left as given."""
    if len(runs) < 2 or any(r.get("warmup_time") is not None for rs in runs for r in rs):
        return
    from concurrent.futures import ThreadPoolExecutor

    flat = [r for rs in runs for r in rs]
    with ThreadPoolExecutor(max_workers=workers) as pool:  # the core leaves the GIL
        found = iter(pool.map(lambda r: int(_core.warmup(r)), flat))
    own = [[next(found) for _ in rs] for rs in runs]
    for i in range(len(runs[0])):
        common = max(jobs[i] for jobs in own)
        for rs in runs:
            rs[i]["warmup"] = common


def run_replications_many(specs: list[dict[str, Any]], replications: int,
                          workers: int | None = None,
                          common_warmup: bool = False) -> list[Replications]:
    """Replications of several specs in one pool of threads: every run of every spec keeps a
    core busy until all are done; `common_warmup`: the specs are policies compared on one
    workload, and the policies of one replication discard the same jobs (`common_warmups`)."""
    from schedlab.results import Replications, Result

    specs = [{"keep_jobs": True, **spec} for spec in specs]
    runs = [replication_specs(spec, replications) for spec in specs]
    if common_warmup:
        common_warmups(runs, workers)
    raws = iter(_core.simulate_many([r for rs in runs for r in rs], workers))
    return [Replications(runs=[Result.from_core(next(raws), r) for r in rs],
                         seed=int(spec.get("seed", DEFAULT_SEED)),
                         seeds=[r["seed"] for r in rs])
            for spec, rs in zip(specs, runs, strict=True)]


def run_many(specs: list[dict[str, Any]], workers: int | None = None,
             common_warmup: bool = False) -> list[Result]:
    """Several one-run specs on `workers` threads (default every core), as `run` each;
    `common_warmup`: they are policies compared on one workload and seed, and discard the
    same jobs (`common_warmups`)."""
    from schedlab.results import Result

    cores = [core_spec({"keep_jobs": True, **spec}) for spec in specs]
    if common_warmup:
        common_warmups([[c] for c in cores], workers)
    return [Result.from_core(raw, c)
            for raw, c in zip(_core.simulate_many(cores, workers), cores, strict=True)]


def run_summary(spec: dict[str, Any]) -> dict[str, Any]:
    """The summary of `run(spec)` alone, without its tables (nor pandas to hold them)."""
    return run_summary_and_classes(spec)[0]


def run_summary_and_classes(spec: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The summary of `run(spec)` and its per-class table as records (one dict per class), no
    other table and no pandas: what `schedlab sim` prints."""
    raw = _core.simulate(core_spec({**spec, "keep_jobs": False}))
    return raw["summary"], raw["classes"]

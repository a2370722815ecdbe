"""The server world: a real HTTP file server whose request queue is ordered by the policy,
driven over real sockets on 127.0.0.1 (`schedlab.server`). Its native keys are
`schedlab.server.NATIVE_KEYS`; the table below says how it reads every other key.

Service is counted in packets in the server: every policy parameter declared in work units
(a quantum, a slice, a latency) is converted from ms of service to packets through the cost
model, whatever its name; parameters in ms of wall-clock time (an MLFQ boost period) stay ms.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import schedlab._core as _core
from schedlab import server as machinery
from schedlab._core import SpecError
from schedlab.vocabulary import find_policy, param_units, spec_error
from schedlab.worlds import (
    NATIVE,
    Translation,
    check_native,
    drops,
    every_class,
    maps,
    policy_service,
    refuses,
)

if TYPE_CHECKING:
    from schedlab.results import Result


def fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _policy(t: Translation, key: str) -> None:
    v = t.spec[key]
    if t.policy_is_kernel():
        sched = t.spec.get("sched", "other")
        t.refuse(t.path(key), f"kernel {sched}", "kernel policies schedule processes: they "
                 "exist in the os world only")
        return
    if policy_service(t, key) == "fluid":
        t.refuse(t.path(key), v, _core.SERVE_FLUID_REFUSED)
    elif "params" not in t.spec:
        _params(t, "params")  # the defaults of work parameters are ms too


def packet_ms(t: Translation) -> tuple[float, int, float]:
    """(ms per packet by the cost model, bytes per packet, per-byte ms)."""
    try:
        return machinery.packet_ms(t.spec)
    except SpecError as e:  # named by its path in the file, before a run is refused for it
        raise spec_error(t.path(e.key), e.value, e.allowed) from None


def _params(t: Translation, key: str) -> None:
    """Parameters in work units (ms of service) become packets; given ones, and the defaults
    of the policy's work parameters (RR's default quantum is 10 ms, not 10 packets)."""
    if t.skip:
        return
    policy = t.spec.get("policy", "fcfs")
    params = dict(t.spec.get(key) or {})
    units = param_units()
    defaults = {q["name"]: q["default"] for q in find_policy(policy)["params"]}
    work = [n for n in defaults if units[n] == "work"
            and (n in params or isinstance(defaults[n], int | float))]
    if not work:
        return
    per_packet, nbytes, per_byte = packet_ms(t)
    for p in work:
        ms = params.get(p, defaults[p])
        path = t.path(p) if p in params else \
            f"{t.path('policy').removesuffix('.name')}.{p} (default)"
        if not per_byte > 0:
            t.refuse(path, ms, f"{p} is in ms of service in experiment files and in packets in "
                     "the server: give machine.cost a per-size part (e.g. 0ms+0.1ms/KB) to "
                     "convert it")
            return
        if not math.isfinite(per_packet) or per_packet <= 0:
            continue
        # Rounded to 9 digits: 0.1 ms / 0.1 ms is 1 packet, not 1.0000000001 (2 turns).
        if isinstance(ms, list):
            params[p] = [round(float(x) / per_packet, 9) for x in ms]
            text = f"ms of service, in packets of {nbytes} B ({per_packet:.4g} ms each)"
        elif isinstance(ms, int | float) and not isinstance(ms, bool):
            params[p] = round(float(ms) / per_packet, 9)
            text = (f"{fmt(ms)} ms of service = {fmt(params[p])} packets of {nbytes} B "
                    f"({per_packet:.4g} ms each by the cost model; a turn is a whole number of "
                    "packets, rounded up)")
        else:
            continue
        t.where.setdefault(p, path)
        t.note(p, ms, text)
    t.spec["params"] = params


def _size(t: Translation, key: str) -> None:
    if "trace" in t.spec:
        return
    _packet, _nbytes, per = packet_ms(t)
    if per > 0:
        t.note(key, t.spec[key], f"files of B = (size - fixed) / per-byte bytes (cost = "
               f"{t.spec.get('cost')}), a catalogue of {t.spec.get('files', 100)} files drawn "
               "from this law")


def _drain(t: Translation, key: str) -> None:
    if not t.drop(key):
        t.refuse(t.path(key), False, "the server always finishes the requests in flight when "
                 "its clients stop sending at time (drain_timeout caps it): drain = true")


def _trace(t: Translation, key: str) -> None:
    """A trace whose rows are (arrival, size[, class]) as the server's burst groups: rows with
    the same arrival, size and class in a row become one group."""
    import pandas as pd

    v = t.spec[key]
    try:
        df = pd.read_csv(v)
    except (OSError, ValueError) as e:
        t.refuse(t.path(key), v, f"the server world reads a trace as a burst: a readable trace "
                 f"({e})")
        return
    cols = set(df.columns)
    extra = cols - {"arrival", "size", "class"}
    if not {"arrival", "size"} <= cols or extra:
        t.refuse(t.path(key), v, "the server world reads a trace as a burst: a trace of "
                 "arrival, size and class only (the server sends each request of a burst at "
                 f"its time; it cannot set {', '.join(sorted(extra)) or 'that'})")
        return
    classes = t.spec.get("classes") or []
    groups: list[dict[str, Any]] = []
    names = df["class"].tolist() if "class" in cols else [None] * len(df)
    for arrival, size, cls in zip(df["arrival"], df["size"], names, strict=True):
        if cls is not None and not isinstance(cls, str):
            idx = int(cls)
            cls = str(classes[idx].get("name", idx)) if idx < len(classes) else str(idx)
        g = (float(arrival), float(size), cls)
        if groups and (groups[-1]["at"], groups[-1]["size"], groups[-1].get("class")) == g:
            groups[-1]["count"] += 1
        else:
            groups.append({"at": g[0], "count": 1, "size": g[1],
                           **({"class": cls} if cls is not None else {})})
    t.drop(key)
    t.put("burst", groups, key)
    t.note(key, Path(str(v)).name, f"sent as a scripted burst of {len(groups)} groups, sizes "
           "in ms through the cost model")


def _bursts(t: Translation, key: str) -> None:
    if t.spec[key] == 1:
        t.drop(key)
    else:
        t.refuse(t.path(key), t.spec[key], NO_IO)


def _runqueues(t: Translation, key: str) -> None:
    if t.spec[key] == "per-cpu":
        t.refuse(t.path(key), t.spec[key], "the server has one bounded buffer for all workers "
                 "(no per-CPU runqueues)")
    t.drop(key)


KERNEL = "kernel policies schedule processes: they exist in the os world only"
NO_IO = "the server has no I/O phases: a request's cost is its emulated I/O (cost)"
ONE_QUEUE = "a key of per-CPU runqueues: the server has one queue"
NO_COUNTERPART = "the server serves requests from one queue: it has no counterpart of it"
CLASS_NO_COUNTERPART = ("a class key the server has no counterpart of (its classes differ by "
                        "size, priority, tickets, weight or deadline)")

SIM_CAP = "the simulator's cap of a run until precise: the server's is max_time (ms)"

MEASURED_COSTS = "a term of a calibrated model: the server's costs are real"

KEYS = {
    "policy": maps(_policy), "params": maps(_params),
    "sched": refuses(KERNEL), "nice": maps(every_class), "rtprio": refuses(KERNEL),
    "runtime": refuses(KERNEL), "deadline": maps(every_class), "period": refuses(KERNEL),
    "arrival": NATIVE, "load": NATIVE, "size": maps(_size), "jobs": NATIVE, "time": NATIVE,
    "drain": maps(_drain),
    "clients": NATIVE, "think": NATIVE,
    "batch": refuses("one-shot processes are the os world's"),
    "trace": maps(_trace), "classes": NATIVE, "bursts": maps(_bursts), "io": refuses(NO_IO),
    "final_io": drops(NO_IO),
    "io_device": refuses(NO_IO), "allow_unstable": drops(), "bytes": NATIVE, "files": NATIVE,
    "catalogue": NATIVE, "zipf": NATIVE, "burst": NATIVE,
    "cpus": NATIVE,
    "context_switch": drops("the server's switches between requests cost what they really "
                            "cost (measured, not modelled)"),
    "turn_cost": drops(MEASURED_COSTS), "start_cost": drops(MEASURED_COSTS),
    "service_scale": drops(MEASURED_COSTS),
    "service_offset": drops(MEASURED_COSTS), "dispatch_delay": drops(MEASURED_COSTS),
    "idle_wake": drops(MEASURED_COSTS), "dispatcher_cost": drops(MEASURED_COSTS),
    "end_cost": drops(MEASURED_COSTS), "wake_delay": drops(MEASURED_COSTS),
    "profile": drops("a profile is what the server measured: the simulator models it"),
    "runqueues": maps(_runqueues), "placement": drops(ONE_QUEUE), "choices": drops(ONE_QUEUE),
    "balancer": drops(ONE_QUEUE), "balance_interval": drops(ONE_QUEUE),
    "balance_interval_max": drops(ONE_QUEUE), "imbalance": drops(ONE_QUEUE),
    "ideal": drops(ONE_QUEUE),
    "migration_cost": drops(ONE_QUEUE), "cache_hot": drops(ONE_QUEUE),
    "timeslice": refuses(NO_COUNTERPART), "affinity": refuses(NO_COUNTERPART),
    "start_pinned": refuses(NO_COUNTERPART), "release_after": refuses(NO_COUNTERPART),
    "boost": refuses(NO_COUNTERPART), "boost_max": refuses(NO_COUNTERPART),
    "sleep_avg_max": refuses(NO_COUNTERPART), "enforce": drops(),
    "buffer": NATIVE, "packet": NATIVE, "packet_unit": NATIVE, "cost": NATIVE,
    "cost_mode": NATIVE, "max_connections": NATIVE, "header_timeout": NATIVE,
    "idle_timeout": NATIVE, "send_timeout": NATIVE, "drain_timeout": NATIVE,
    "seed": NATIVE, "warmup": NATIVE, "warmup_time": NATIVE,
    "precision": NATIVE, "max_time": NATIVE, "max_jobs": refuses(SIM_CAP), "batches": drops(),
    "threads": NATIVE, "connections": NATIVE, "timeout": NATIVE, "miss": NATIVE,
    "keep_alive": NATIVE, "hard_timeout": drops(), "rttime": drops(), "job_counters": drops(),
    "io_dir": drops(), "quiet_wait": drops(), "noise_threshold": NATIVE,
    "retry_noisy": NATIVE, "pretend_missing": drops(),
    "keep_jobs": NATIVE, "keep_schedule": drops(), "load_sample": drops(),
    "hdr_log": NATIVE, "server_log": NATIVE,
    "trace_migrations": drops("the kernel's trace of real processes (os world)"),
}

CLASS_KEYS = {
    "name": NATIVE, "fraction": NATIVE, "size": NATIVE, "bytes": NATIVE, "priority": NATIVE,
    "tickets": NATIVE, "weight": NATIVE, "nice": NATIVE, "deadline": NATIVE, "clients": NATIVE,
    "batch": refuses(CLASS_NO_COUNTERPART), "think": refuses(CLASS_NO_COUNTERPART),
    "bursts": refuses(CLASS_NO_COUNTERPART), "io": refuses(CLASS_NO_COUNTERPART),
    "final_io": drops(NO_IO),
    "io_kind": refuses(CLASS_NO_COUNTERPART), "affinity": refuses(CLASS_NO_COUNTERPART),
    "start_pinned": refuses(CLASS_NO_COUNTERPART), "release_after": refuses(CLASS_NO_COUNTERPART),
    "prefix": NATIVE, "sched": refuses(CLASS_NO_COUNTERPART),
    "rtprio": refuses(CLASS_NO_COUNTERPART), "runtime": refuses(CLASS_NO_COUNTERPART),
    "period": refuses(CLASS_NO_COUNTERPART), "rttime": drops(),
}

NATIVE_KEYS = machinery.NATIVE_KEYS
NATIVE_CLASS_KEYS = machinery.NATIVE_CLASS_KEYS


def validate(spec: dict[str, Any]) -> dict[str, Any]:
    """Checks a server-world spec without starting anything; raises SpecError naming the key."""
    check_native("server", KEYS, NATIVE_KEYS, spec)
    return machinery.validate(spec)


def run(spec: dict[str, Any]) -> Result:
    """Serves one run's workload for real and measures it."""
    check_native("server", KEYS, NATIVE_KEYS, spec)
    return machinery.run(spec)

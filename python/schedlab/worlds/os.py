"""The os world: real Linux processes, under the kernel's own policies (`policy = "kernel"`,
`sched = other | batch | idle | fifo | rr | deadline`) or under a schedlab policy enforced by
the user-space dispatcher (`schedlab.osrun`). Its native keys are
`schedlab.osrun.NATIVE_KEYS`; the table below says how it reads every other key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import schedlab._core as _core
from schedlab import osrun
from schedlab.osrun.spec import RUNQUEUES
from schedlab.vocabulary import spec_error
from schedlab.worlds import (
    NATIVE,
    Translation,
    check_native,
    drops,
    io_bursts,
    maps,
    os_form,
    policy_service,
    refuses,
)

if TYPE_CHECKING:
    from schedlab.results import Result

OPEN_ARRIVALS = ("the os world has no open arrivals: its workloads are closed loops (clients, "
                 "think) or a batch of one-shot processes")


def _policy(t: Translation, key: str) -> None:
    if t.policy_is_kernel():
        t.spec.pop(key)  # no policy: the kernel schedules
        return
    if policy_service(t, key) == "fluid":
        t.refuse(t.path(key), t.spec[key], _core.DISPATCH_FLUID_REFUSED)


def _io(t: Translation, key: str) -> None:
    io_bursts(t, "os")
    if key not in t.spec:
        return
    v = t.spec[key]
    if isinstance(v, int | float) and not isinstance(v, bool):
        t.spec[key] = f"sleep:det:{v}"
    elif not os_form(v):
        t.spec[key] = f"sleep:{v}"


def _class_io(t: Translation, i: int, key: str) -> None:
    io_bursts(t, "os")
    c = t.spec["classes"][i]
    if key in c and not os_form(c[key]):
        v = c[key]
        c[key] = f"sleep:det:{v}" if isinstance(v, int | float) else f"sleep:{v}"


def _final_io(t: Translation, key: str) -> None:
    io_bursts(t, "os")  # an I/O after each burst is the os world's own form
    t.spec.pop(key)


def _class_final_io(t: Translation, i: int, key: str) -> None:
    io_bursts(t, "os")
    t.spec["classes"][i].pop(key)


def _drain(t: Translation, key: str) -> None:
    if t.drop(key):
        t.refuse(t.path(key), True, "the workers stop at time and abandon the job they run "
                 "(counted unfinished): drain = false")


def _io_device(t: Translation, key: str) -> None:
    v = t.drop(key)
    if v != "delay":
        t.refuse(t.path(key), v, "one shared I/O device has no counterpart on real processes "
                 "(their waits are sleeps or real writes)")


def _runqueues(t: Translation, key: str) -> None:
    v = t.spec[key]
    if v not in RUNQUEUES:  # checked here too: the kernel's case drops it before the world
        raise spec_error(t.path(key), v, " or ".join(RUNQUEUES))
    if "policy" not in t.spec:  # the kernel
        t.drop(key)
        t.note(key, v, "the kernel's own per-CPU runqueues" if v == "per-cpu" else
               "the kernel keeps per-CPU runqueues whatever this says")
    elif v == "per-cpu":
        t.note(key, v, "the dispatcher's per-CPU runqueues: each task placed at the start on "
               "the CPU with the fewest tickets (least-tickets placement), never moved")


def _placement_model(t: Translation, key: str) -> None:
    t.drop(key, "the kernel's own placement and load balancing" if "policy" not in t.spec
           else "the dispatcher places tasks itself (least tickets, at the start)")


def _timeslice(t: Translation, key: str) -> None:
    t.drop(key, "the kernel's own time slices" if "policy" not in t.spec else
           "the dispatcher sees one entry per process for its whole life, so a process keeps "
           "its slice across jobs")


def _start_pinned(t: Translation, key: str) -> None:
    v = t.spec[key]
    if isinstance(v, int) and not isinstance(v, bool):
        t.spec[key] = [v]
        if "release_after" not in t.spec:
            t.put("release_after", 0, key)
            t.note(key, v, "every task starts confined to this CPU, released at once (as in "
                   "the simulator: the balancer may move them from the start)")


MEASURED = "real context switches cost what they cost: measured, not modelled"
SERVER_FILES = "files and their sizes belong to the server world: give size (ms of CPU)"

SIM_CAP = "the simulator's cap of a run until precise: the os world's is max_time (ms)"

MODEL_TERM = "a term of a calibrated model: real processes' costs are real"
PROFILE = "a profile is what the real processes measured: the simulator models it"

KEYS = {
    "policy": maps(_policy), "params": NATIVE,
    "sched": NATIVE, "nice": NATIVE, "rtprio": NATIVE, "runtime": NATIVE, "deadline": NATIVE,
    "period": NATIVE,
    "arrival": refuses(OPEN_ARRIVALS), "load": refuses(OPEN_ARRIVALS), "size": NATIVE,
    "jobs": NATIVE, "time": NATIVE, "drain": maps(_drain), "clients": NATIVE, "think": NATIVE,
    "batch": NATIVE,
    "trace": refuses(OPEN_ARRIVALS), "classes": NATIVE, "bursts": NATIVE, "io": maps(_io),
    "final_io": maps(_final_io),
    "io_device": maps(_io_device), "allow_unstable": drops(),
    "bytes": refuses(SERVER_FILES),
    "files": drops(), "catalogue": refuses(SERVER_FILES), "zipf": drops(),
    "burst": refuses(OPEN_ARRIVALS),
    "cpus": NATIVE, "context_switch": drops(MEASURED), "turn_cost": drops(MODEL_TERM),
    "start_cost": drops(MODEL_TERM),
    "service_scale": drops(MODEL_TERM), "service_offset": drops(MODEL_TERM),
    "dispatch_delay": drops(MODEL_TERM), "idle_wake": drops(MODEL_TERM),
    "dispatcher_cost": drops(MODEL_TERM), "end_cost": drops(MODEL_TERM),
    "wake_delay": drops(MODEL_TERM),
    "profile": drops(PROFILE), "runqueues": maps(_runqueues),
    "placement": maps(_placement_model), "choices": maps(_placement_model),
    "balancer": maps(_placement_model), "balance_interval": maps(_placement_model),
    "balance_interval_max": maps(_placement_model), "imbalance": maps(_placement_model),
    "migration_cost": maps(_placement_model), "cache_hot": maps(_placement_model),
    "ideal": maps(_placement_model),
    "timeslice": maps(_timeslice), "affinity": NATIVE, "start_pinned": maps(_start_pinned),
    "release_after": NATIVE,
    "boost": drops("the simulator's wake-up boosts are not applied to real processes"),
    "boost_max": drops("the simulator's wake-up boosts are not applied to real processes"),
    "sleep_avg_max": drops("the simulator's wake-up boosts are not applied to real processes"),
    "enforce": NATIVE,
    "buffer": drops("a key of the file server"), "packet": drops(), "packet_unit": drops(),
    "cost": drops("a key of the file server"), "cost_mode": drops(),
    "max_connections": drops(), "header_timeout": drops(), "idle_timeout": drops(),
    "send_timeout": drops(), "drain_timeout": drops(),
    "seed": NATIVE, "warmup": NATIVE, "warmup_time": NATIVE,
    "precision": NATIVE, "max_time": NATIVE, "max_jobs": refuses(SIM_CAP),
    "batches": drops(),
    "threads": drops(), "connections": drops(), "timeout": drops(), "miss": drops(),
    "keep_alive": drops(), "hard_timeout": NATIVE, "rttime": NATIVE, "job_counters": NATIVE,
    "io_dir": NATIVE, "quiet_wait": NATIVE, "noise_threshold": NATIVE, "retry_noisy": NATIVE,
    "pretend_missing": NATIVE,
    "keep_jobs": NATIVE, "keep_schedule": drops(), "load_sample": NATIVE,
    "hdr_log": drops(), "server_log": drops(), "trace_migrations": NATIVE,
}

CLASS_KEYS = {
    "name": NATIVE, "fraction": NATIVE, "size": NATIVE,
    "bytes": refuses("file sizes belong to the server world"),
    "priority": NATIVE, "tickets": NATIVE, "weight": NATIVE, "nice": NATIVE,
    "deadline": NATIVE, "clients": NATIVE, "batch": NATIVE, "think": NATIVE, "bursts": NATIVE,
    "io": maps(_class_io), "final_io": maps(_class_final_io), "io_kind": drops(),
    "affinity": NATIVE, "start_pinned": NATIVE,
    "release_after": NATIVE, "prefix": drops(), "sched": NATIVE, "rtprio": NATIVE,
    "runtime": NATIVE, "period": NATIVE, "rttime": NATIVE,
}

NATIVE_KEYS = osrun.NATIVE_KEYS
NATIVE_CLASS_KEYS = osrun.NATIVE_CLASS_KEYS


def validate(spec: dict[str, Any]) -> dict[str, Any]:
    """Checks an os spec without starting anything; raises SpecError naming the key."""
    check_native("os", KEYS, NATIVE_KEYS, spec)
    return osrun.validate(spec)


def run(spec: dict[str, Any]) -> Result:
    """Runs real processes; raises osrun.Refused when the kernel forbids what is asked."""
    check_native("os", KEYS, NATIVE_KEYS, spec)
    return osrun.run(spec)

"""One experiment file, three worlds: which keys each world understands, and how a run's keys
are read by a world that has no key of that name.

An experiment file is written once. Its keys come from the simulator (`schedlab.spec`), the
server world (`schedlab.server.SERVER_KEYS`) and the os world (`schedlab.osrun.OS_KEYS`); each
world reads every key of a run in one of four ways:

- **native**: the world has the key, with the same meaning (`clients`, `think`, `jobs`, ...);
- **translated**, so that the same file means the same workload: a server's `workers` are the
  simulator's `cpus`; a quantum in ms becomes packets in the server through its cost model
  (`packet` bytes x per-byte ms); the os world's `io = "sleep:det:5"` is the simulator's
  `io = "det:5"`; a batch of N one-shot processes is N clients that each run one job; a kernel
  policy (`[[policy]] name = "kernel"`) is modelled in the simulator by its textbook policy
  (`schedlab.osrun.presets.SIM_OF_KERNEL`); a trace of bursts is the server's `burst`;
- **dropped with a note**: the key describes something the world does not model or measures
  for real (`context_switch` in server and os, `buffer` in sim, the simulator's balancer
  under the kernel): the run goes ahead and the report lists the note;
- **no model**: the world cannot run what the key asks (open arrivals on real processes, a
  real synchronous write in the simulator, a kernel policy in the file server): the run is
  skipped with that reason, and the report says so. If every run of a world would be skipped,
  the file is refused (exit 2) instead.

Keys that only decide how a world measures (the os world's noise gate, the server's timeouts)
are dropped silently by the other worlds.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

WORLDS = ("sim", "server", "os")
KERNEL = "kernel"  # the [[policy]] name of the kernel's own policies
KERNEL_PARAMS = {
    "sched": "kernel policy: other (CFS/EEVDF), batch, idle, fifo, rr, deadline; default other",
    "nice": "nice value -20..19 (other, batch)",
    "rtprio": "real-time priority 1..98 (fifo, rr)",
    "runtime": "SCHED_DEADLINE runtime (ms)",
    "deadline": "SCHED_DEADLINE relative deadline (ms)",
    "period": "SCHED_DEADLINE period (ms); default the deadline",
}
KERNEL_LABELS = {"other": "CFS", "batch": "BATCH", "idle": "IDLE", "fifo": "FIFO", "rr": "RR",
                 "deadline": "DEADLINE"}

# Sections of the os world's own keys in an experiment file (osrun's spec is flat).
OS_SECTIONS = {
    "batch": "workload", "io": "workload", "bursts": "workload",
    "affinity": "machine", "start_pinned": "machine", "release_after": "machine",
    "view": "machine", "enforce": "machine",
    "sample": "experiment", "hard_timeout": "experiment", "rttime": "experiment",
    "job_counters": "experiment", "io_dir": "experiment", "quiet_wait": "experiment",
    "noise_threshold": "experiment", "retry_noisy": "experiment",
    "pretend_missing": "experiment",
}
SERVER_CLASS_HELP = {"bytes": "file size distribution in bytes of this class (server)",
                     "prefix": "URL prefix of this class's files (server); default /NAME/"}

# Keys about how a world measures, not what runs: other worlds drop them without a note.
MEASUREMENT = {
    "server": {"threads", "connections", "timeout", "miss", "keep_alive", "hdr_log",
               "server_log", "max_connections", "header_timeout", "idle_timeout",
               "send_timeout", "drain_timeout"},
    "os": {"hard_timeout", "rttime", "job_counters", "io_dir", "quiet_wait", "noise_threshold",
           "retry_noisy", "pretend_missing", "enforce"},
    "sim": {"batches", "allow_unstable", "load_sample", "keep_schedule"},
}
# Sim machine keys of per-CPU runqueues and balancing.
SIM_MACHINE_MODEL = ("placement", "choices", "balancer", "balance_interval",
                     "balance_interval_max", "imbalance", "migration_cost", "cache_hot")
SIM_BOOST = ("boost", "boost_max", "sleep_avg_max")
# Server policy parameters counted in packets (docs/server.md); experiment files give ms.
PACKET_PARAMS = ("quantum", "quanta", "allotment", "latency", "min_granularity",
                 "wakeup_granularity")
LINE_BYTES = 64  # the generated catalogue's line (schedlab.server.LINE)
DEFAULT_PACKET_BYTES = 65_536
DEFAULT_PACKET_LINES = 10
OPEN_ARRIVALS = "the os world has no open arrivals: its workloads are closed loops (clients, " \
    "think) or a batch of one-shot processes"


@dataclass(frozen=True)
class FileKey:
    """A key of an experiment file: its section, help text and the worlds that have it."""

    section: str
    help: str
    worlds: tuple[str, ...]


@cache
def file_keys() -> dict[str, FileKey]:
    """Every spec key an experiment file may hold outside [[policy]], across the worlds."""
    from schedlab.osrun.spec import OS_ONLY_KEYS
    from schedlab.osrun.spec import SHARED_KEYS as OS_SHARED
    from schedlab.server import SERVER_KEYS
    from schedlab.server import SIM_KEYS as SERVER_SHARED
    from schedlab.spec import SPEC_KEYS, SPEC_SECTIONS

    out: dict[str, FileKey] = {}

    def add(name: str, section: str, help_text: str, world: str) -> None:
        if name in ("policy", "params", "world", "dispatcher") or name in KERNEL_PARAMS:
            return
        k = out.get(name)
        if k is None:
            out[name] = FileKey(section, help_text, (world,))
        elif world not in k.worlds:
            out[name] = FileKey(k.section, k.help, (*k.worlds, world))

    for name, section in SPEC_SECTIONS.items():
        if section != "policy":
            add(name, section, SPEC_KEYS[name], "sim")
    for name in SERVER_SHARED:
        if name in out:
            add(name, out[name].section, "", "server")
    for name, (section, help_text) in SERVER_KEYS.items():
        add(name, section, help_text, "server")
    for name in OS_SHARED:
        if name in out:
            add(name, out[name].section, "", "os")
    for name, help_text in OS_ONLY_KEYS.items():
        if name in OS_SECTIONS:
            add(name, OS_SECTIONS[name], help_text, "os")
    return out


@cache
def class_keys() -> dict[str, FileKey]:
    """Every key of a [[workload.classes]] table, across the worlds."""
    from schedlab.osrun.spec import OS_CLASS_KEYS
    from schedlab.server import CLASS_KEYS as SERVER_CLASS
    from schedlab.spec import CLASS_KEYS

    out: dict[str, FileKey] = {}
    for world, keys in (("sim", CLASS_KEYS), ("server", {k: SERVER_CLASS_HELP.get(k, "")
                                                        for k in SERVER_CLASS}),
                        ("os", OS_CLASS_KEYS)):
        for name, help_text in keys.items():
            k = out.get(name)
            if k is None:
                out[name] = FileKey("workload", help_text, (world,))
            elif world not in k.worlds:
                out[name] = FileKey("workload", k.help or help_text, (*k.worlds, world))
    return out


def kernel_policies() -> tuple[str, ...]:
    from schedlab.osrun.spec import KERNEL_POLICIES

    return KERNEL_POLICIES


# ---------------------------------------------------------------------------------------------
# Translation of one run's keys for one world
# ---------------------------------------------------------------------------------------------


def _short(value: Any) -> str:
    import json

    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass
class Translation:
    """A run's keys as one world reads them.

    `spec` is what the world's `run(spec)` gets; `where` maps each of its keys to the path in
    the file it came from (for error messages); `notes` say what was translated or dropped;
    `skip` is (path, value, reason) when the world has no model of the run.
    """

    world: str
    spec: dict[str, Any]
    where: dict[str, str]
    notes: list[str] = field(default_factory=list)
    skip: tuple[str, str, str] | None = None

    def path(self, key: str) -> str:
        return self.where.get(key, key)

    def note(self, key: str, value: Any, text: str) -> None:
        line = f"{self.path(key)} = {_short(value)}: {text}"
        if line not in self.notes:
            self.notes.append(line)

    def refuse(self, path: str, value: Any, reason: str) -> None:
        if self.skip is None:
            self.skip = (path, _short(value), reason)

    def drop(self, key: str, text: str | None = None) -> Any:
        value = self.spec.pop(key)
        if text:
            self.note(key, value, text)
        return value

    def put(self, key: str, value: Any, origin: str) -> None:
        self.spec[key] = value
        self.where[key] = self.where.get(origin, origin)

    def class_path(self, i: int, key: str) -> str:
        return f"{self.path('classes')}[{i}].{key}"


def translate(world: str, flat: dict[str, Any], where: dict[str, str], *,
              param_names: set[str], param_defaults: dict[str, Any],
              base_dir: Path | None = None) -> Translation:
    """`flat` is a run as written: policy (a schedlab name or "kernel"), `params` (a dict),
    and the spec keys of its sections."""
    t = Translation(world, copy.deepcopy({k: v for k, v in flat.items() if v is not None}),
                    dict(where))
    if world == "sim":
        _to_sim(t, param_names)
    elif world == "server":
        _to_server(t, param_names, param_defaults, base_dir)
    elif world == "os":
        _to_os(t, param_names)
    return t


def _flatten_params(t: Translation) -> None:
    params = t.spec.pop("params", None) or {}
    for k, v in params.items():
        t.spec[k] = v


def _cpu_list(value: Any) -> list[int] | None:
    """[0, 1], 1, "0-1" or "0,2" as a list; None when it is none of these."""
    from schedlab.osrun.spec import parse_cpu_list

    try:
        return parse_cpu_list(value)
    except ValueError:
        return None


def _classes(t: Translation, create: bool = False) -> list[dict[str, Any]]:
    cls = t.spec.get("classes")
    if not cls and create:
        cls = [{}]
        t.spec["classes"] = cls
        t.where.setdefault("classes", "workload.classes")
    return cls or []


# --- sim ------------------------------------------------------------------------------------


def _sleep_dist(t: Translation, path: str, value: Any) -> Any:
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


def _os_form(io: Any) -> bool:
    """io written the os world's way (sleep:DIST, dsync:BYTES): an I/O after every burst.
    Otherwise it is the simulator's (a distribution): an I/O between two bursts."""
    return isinstance(io, str) and io.split(":", 1)[0].strip().lower() in ("sleep", "dsync")


def _io_bursts(t: Translation, to: str) -> None:
    """Keeps the number of I/Os per job and the CPU per job the same across worlds.

    The os world does an I/O after each of its b bursts (b per job); the simulator waits
    between bursts (b - 1 per job). So io written the os way runs in the simulator with one
    burst more (the job ends with CPU instead of I/O), and io written the simulator's way runs
    on real processes with one burst fewer (none: no I/O). Global keys, then each class that
    sets io or bursts of its own."""
    s = t.spec
    g_io, g_b = s.get("io"), s.get("bursts", 1)
    units: list[tuple[dict[str, Any], Any, Any, str]] = []
    if g_io is not None:
        units.append((s, g_io, g_b, "io"))
    for i, c in enumerate(s.get("classes") or []):
        if "io" in c or "bursts" in c:
            units.append((c, c.get("io", g_io), c.get("bursts", g_b), t.class_path(i, "io")))
    for table, io, b, path in units:
        if io is None or not isinstance(b, int) or isinstance(b, bool):
            continue
        where = t.where.get(path, path)
        if to == "sim" and _os_form(io):
            table["bursts"] = b + 1
            line = (f"{where} = {_short(io)}: an I/O after each of {b} bursts becomes "
                    f"{b + 1} bursts with an I/O between two (same CPU and number of I/Os per "
                    "job; the job ends with CPU)")
        elif to == "os" and not _os_form(io):
            if b <= 1:
                table.pop("io", None)
                line = (f"{where} = {_short(io)}: one burst, so no I/O (the simulator waits "
                        "only between bursts)")
            else:
                table["bursts"] = b - 1
                line = (f"{where} = {_short(io)}: an I/O between two of {b} bursts becomes "
                        f"{b - 1} bursts, each followed by an I/O (same CPU and number of "
                        "I/Os per job)")
        else:
            continue
        if line not in t.notes:
            t.notes.append(line)


def _kernel_to_sim(t: Translation) -> None:
    from schedlab.osrun.presets import SIM_OF_KERNEL

    s = t.spec
    params = s.pop("params", None) or {}
    classes = s.get("classes") or []
    sched = params.get("sched", "other")
    kinds = {c.get("sched", sched) for c in classes} or {sched}
    where = t.path("policy")
    if len(kinds) > 1:
        t.refuse(t.path("classes"), sorted(kinds), "different kernel policies in one run have "
                 "no model in the simulator")
        return
    sched = kinds.pop()
    if sched not in SIM_OF_KERNEL:
        t.refuse(t.where.get("sched", where), sched, f"SCHED_{sched.upper()} has no model in "
                 "the simulator")
        return
    name, extra = SIM_OF_KERNEL[sched]
    s["policy"] = name
    model = name + (" " + ", ".join(f"{k}={v}" for k, v in extra.items()) if extra else "")
    t.note("policy", f"kernel {sched}", f"modelled by {model}")
    for k, v in extra.items():
        s[k] = v
    if sched in ("fifo", "rr"):
        cls = _classes(t, create=True)
        for c in cls:
            rt = c.get("rtprio", params.get("rtprio", 1))
            c["priority"] = 99 - rt
        t.note("policy", f"kernel {sched}", "real-time priority p becomes priority 99 - p "
               "(lower runs first)")
    elif sched == "deadline":
        cls = _classes(t, create=True)
        for c in cls:
            d = c.get("deadline", params.get("deadline"))
            if d is not None:
                c["deadline"] = d
    elif "nice" in params:
        for c in _classes(t, create=True):
            c.setdefault("nice", params["nice"])
    for c in classes:
        for k in ("sched", "rtprio", "runtime", "period"):
            c.pop(k, None)


def _to_sim(t: Translation, param_names: set[str]) -> None:
    from schedlab.spec import CLASS_KEYS

    s = t.spec
    if s.get("policy") == KERNEL:
        _kernel_to_sim(t)
        if t.skip:
            return
    else:
        _flatten_params(t)
    _io_bursts(t, "sim")
    for key in list(s):
        if key not in s:
            continue
        v = s[key]
        if key == "io":
            new = _sleep_dist(t, t.path(key), v)
            if new is not None:
                s[key] = new
        elif key == "cpus" and isinstance(v, list):
            s[key] = len(v)
        elif key == "start_pinned" and not isinstance(v, int):
            cpus = _cpu_list(v)
            if cpus is None or len(cpus) != 1:
                t.refuse(t.path(key), v, "the simulator starts every task on one CPU (give "
                         "one CPU)")
            else:
                s[key] = cpus[0]
        elif key == "release_after":
            t.drop(key, "no release in the simulator: tasks start on start_pinned's CPU and "
                   "the balancer may move them from the start")
        elif key == "workers":
            t.drop(key)
            if "cpus" not in s:
                t.put("cpus", v, key)
                t.note(key, v, "the server's worker threads are the simulator's CPUs (one "
                       "global queue)")
        elif key == "rate":
            t.drop(key)
            kind = s.get("arrival")
            mean = 1000.0 / float(v) if isinstance(v, int | float) and v > 0 else v
            law = "det" if kind == "constant" else "exp"
            t.put("arrival", f"{law}:{mean:g}" if isinstance(mean, float) else mean, key)
            t.note(key, v, f"requests per second as inter-arrival times {law}:{_fmt(mean)} ms")
        elif key == "duration":
            t.drop(key)
            t.put("time", v, key)
        elif key in ("bytes", "catalogue", "burst"):
            what = {"bytes": "file sizes in bytes: give size in ms (the server's cost turns "
                    "it into bytes)", "catalogue": "an explicit catalogue of files",
                    "burst": "a scripted burst: give it as a trace (arrival, size, class), "
                    "which the server world reads as a burst"}[key]
            t.refuse(t.path(key), v, f"the simulator has no model of {what}")
        elif key == "buffer":
            t.drop(key, "not modelled: the simulator's queue is unbounded (the server's master "
                   "blocks when the buffer is full)")
        elif key in ("files", "zipf"):
            t.drop(key, "the simulator draws every job's size from the size law; the server "
                   "serves a catalogue of files drawn from it")
        elif key in ("cost", "cost_mode", "packet", "packet_unit"):
            t.drop(key, "a key of the server's emulated cost: sizes are already ms here"
                   if key == "cost" else None)
        elif key == "batch":
            t.drop(key)
            t.put("clients", v, key)
            t.put("jobs", v, key)
            s.setdefault("think", "det:0")
            t.note(key, v, "a batch of one-shot processes is as many clients that each run "
                   "one job")
        elif key == "affinity":
            t.drop(key)
            cpus = _cpu_list(v)
            for c in _classes(t, create=True):
                c.setdefault("affinity", cpus)
        elif key == "view":
            t.drop(key)
            if v == "per_cpu":
                t.put("runqueues", "per-cpu", key)
                t.put("placement", "least-tickets", key)
                t.note(key, v, "per-CPU runqueues, tasks placed on the CPU with the fewest "
                       "tickets (xv6's fork-time placement), no balancer")
        elif key == "sample":
            t.drop(key)
            s.setdefault("load_sample", v)
        elif key in MEASUREMENT["os"] or key in MEASUREMENT["server"]:
            t.drop(key)
    batch_total = 0
    for i, c in enumerate(_classes(t)):
        for k in list(c):
            v = c[k]
            if k == "batch":
                c.pop(k)
                c["clients"] = v
                batch_total += int(v) if isinstance(v, int | float) else 0
                t.note("classes", f"classes[{i}].batch = {v}", "one-shot processes are "
                       "clients that each run one job")
            elif k == "io":
                new = _sleep_dist(t, t.class_path(i, k), v)
                if new is not None:
                    c[k] = new
            elif k == "affinity":
                c[k] = _cpu_list(v)
            elif k in ("start_pinned", "release_after"):
                t.refuse(t.class_path(i, k), v, "the simulator pins every task or none (use "
                         "machine.start_pinned)")
            elif k in ("rttime", "runtime", "period", "sched", "rtprio", "prefix"):
                c.pop(k)
            elif k == "bytes":
                t.refuse(t.class_path(i, k), v, "the simulator has no model of file sizes in "
                         "bytes: give size in ms")
            elif k not in CLASS_KEYS:
                c.pop(k)
    if batch_total:
        s["jobs"] = batch_total
        s.setdefault("think", "det:0")


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


# --- server ---------------------------------------------------------------------------------


def _trace_burst(path: str, classes: list[dict[str, Any]]) -> list[dict[str, Any]] | str:
    """A trace whose rows are (arrival, size[, class]) as the server's burst groups: rows with
    the same arrival, size and class in a row become one group. A reason when it is not one."""
    import pandas as pd

    try:
        df = pd.read_csv(path)
    except (OSError, ValueError) as e:
        return f"a readable trace ({e})"
    cols = set(df.columns)
    extra = cols - {"arrival", "size", "class"}
    if not {"arrival", "size"} <= cols or extra:
        return ("a trace of arrival, size and class only (the server sends each request of "
                f"a burst at its time; it cannot set {', '.join(sorted(extra)) or 'that'})")
    groups: list[dict[str, Any]] = []
    names = df["class"].tolist() if "class" in cols else [None] * len(df)
    for arrival, size, cls in zip(df["arrival"], df["size"], names, strict=True):
        if cls is not None and not isinstance(cls, str):
            idx = int(cls)
            cls = str(classes[idx].get("name", idx)) if idx < len(classes) else str(idx)
        key = (float(arrival), float(size), cls)
        if groups and (groups[-1]["at"], groups[-1]["size"], groups[-1].get("class")) == key:
            groups[-1]["count"] += 1
        else:
            groups.append({"at": key[0], "count": 1, "size": key[1],
                           **({"class": cls} if cls is not None else {})})
    return groups


def _packet_ms(t: Translation) -> tuple[float, int, float]:
    """(ms per packet by the cost model, bytes per packet, per-byte ms)."""
    from schedlab import _core

    try:
        cost = _core.parse_cost(str(t.spec.get("cost", "none")))
    except Exception:  # the server's validation names the key
        return math.nan, 0, 0.0
    unit = t.spec.get("packet_unit", "bytes")
    packet = t.spec.get("packet")
    if unit == "lines":
        nbytes = int(packet or DEFAULT_PACKET_LINES) * LINE_BYTES
    else:
        nbytes = int(packet or DEFAULT_PACKET_BYTES)
    per = float(cost["per_byte_ms"])
    return nbytes * per, nbytes, per


def _to_server(t: Translation, param_names: set[str], defaults: dict[str, Any],
               base_dir: Path | None) -> None:
    s = t.spec
    if s.get("policy") == KERNEL:
        sched = (s.get("params") or {}).get("sched", "other")
        t.refuse(t.path("policy"), f"kernel {sched}", "kernel policies schedule processes: "
                 "they exist in the os world only")
        return
    params = dict(s.pop("params", None) or {})
    counted = [p for p in PACKET_PARAMS if p in param_names
               and (p in params or isinstance(defaults.get(p), int | float))]
    if counted:
        packet_ms, nbytes, per = _packet_ms(t)
        for p in counted:
            ms = params.get(p, defaults.get(p))
            path = t.path(p) if p in params else t.path("policy")
            if not per > 0:
                t.refuse(path, ms, f"{p} is in ms in experiment files and in packets in the "
                         "server: give machine.cost a per-size part (e.g. 0ms+0.1ms/KB) to "
                         "convert it")
                continue
            if not math.isfinite(packet_ms) or packet_ms <= 0:
                continue
            # Rounded to 9 digits: 0.1 ms / 0.1 ms is 1 packet, not 1.0000000001 (2 turns).
            if isinstance(ms, list):
                params[p] = [round(float(x) / packet_ms, 9) for x in ms]
            elif isinstance(ms, int | float) and not isinstance(ms, bool):
                params[p] = round(float(ms) / packet_ms, 9)
            else:
                continue
            t.where.setdefault(p, path)
            t.note(p, ms, f"{_fmt(ms)} ms of service = {_fmt(params[p])} packets of "
                   f"{nbytes} B ({packet_ms:.4g} ms each by the cost model; a turn is a whole "
                   "number of packets, rounded up)" if not isinstance(ms, list) else
                   f"ms of service, in packets of {nbytes} B ({packet_ms:.4g} ms each)")
    for k, v in params.items():
        s[k] = v
    if "size" in s and "trace" not in s:
        _packet, _nbytes, per = _packet_ms(t)
        if per > 0:
            t.note("size", s["size"], f"files of B = (size - fixed) / per-byte bytes "
                   f"(cost = {s.get('cost')}), a catalogue of {s.get('files', 100)} files "
                   "drawn from this law")
    for key in list(s):
        if key not in s:
            continue
        v = s[key]
        if key == "context_switch":
            t.drop(key, "the server's switches between requests cost what they really cost "
                   "(measured, not modelled)" if v else None)
        elif key == "runqueues":
            if v == "per-cpu":
                t.refuse(t.path(key), v, "the server has one bounded buffer for all workers "
                         "(no per-CPU runqueues)")
            t.drop(key)
        elif key in SIM_MACHINE_MODEL:
            t.drop(key, "a key of per-CPU runqueues: the server has one queue")
        elif key in ("timeslice", "start_pinned", "affinity", "release_after", "view",
                     *SIM_BOOST):
            t.refuse(t.path(key), v, "the server serves requests from one queue: it has no "
                     f"counterpart of {key}")
        elif key in ("io", "io_device") or (key == "bursts" and v != 1):
            t.refuse(t.path(key), v, "the server has no I/O phases: a request's cost is its "
                     "emulated I/O (cost)")
        elif key == "bursts":
            t.drop(key)
        elif key == "trace":
            groups = _trace_burst(str(v), s.get("classes") or [])
            if isinstance(groups, str):
                t.refuse(t.path(key), v, f"the server world reads a trace as a burst: {groups}")
            else:
                t.drop(key)
                t.put("burst", groups, key)
                t.note(key, Path(str(v)).name, f"sent as a scripted burst of {len(groups)} "
                       "groups, sizes in ms through the cost model")
        elif key == "batch":
            t.refuse(t.path(key), v, "one-shot processes are the os world's")
        elif key in ("load_sample", "keep_schedule", "batches", "sample"):
            t.drop(key)
        elif key in MEASUREMENT["os"]:
            t.drop(key)
    for i, c in enumerate(s.get("classes") or []):
        for k in list(c):
            if k in ("think", "bursts", "io", "io_kind", "affinity", "batch", "sched",
                     "rtprio", "runtime", "period", "start_pinned", "release_after"):
                t.refuse(t.class_path(i, k), c[k], "a class key the server has no counterpart "
                         "of (its classes differ by size, priority, tickets, weight or "
                         "deadline)")
            elif k == "rttime":
                c.pop(k)


# --- os ---------------------------------------------------------------------------------------


def _to_os(t: Translation, param_names: set[str]) -> None:
    s = t.spec
    params = dict(s.pop("params", None) or {})
    _io_bursts(t, "os")
    if s.get("policy") == KERNEL:
        s.pop("policy")
        for k, v in params.items():
            s[k] = v
    elif params:
        s["params"] = params
    for key in list(s):
        if key not in s:
            continue
        v = s[key]
        if key in ("arrival", "load", "trace", "rate", "burst", "catalogue"):
            t.refuse(t.path(key), v, OPEN_ARRIVALS)
        elif key in ("allow_unstable", "keep_schedule", "batches"):
            t.drop(key)
        elif key == "context_switch":
            t.drop(key, "real context switches cost what they cost: measured, not modelled"
                   if v else None)
        elif key == "load_sample":
            t.drop(key)
            if "sample" not in s:
                t.put("sample", v, key)
        elif key == "runqueues":
            t.drop(key)
            if v == "per-cpu" and "policy" in s:
                t.put("view", "per_cpu", key)
                t.note(key, v, "the dispatcher's per-CPU view: each task placed at the start "
                       "on the CPU with the fewest tickets, never moved")
            elif v == "per-cpu":
                t.note(key, v, "the kernel's own per-CPU runqueues")
        elif key in SIM_MACHINE_MODEL:
            t.drop(key, ("the kernel's own placement and load balancing" if "policy" not in s
                         else "the dispatcher places tasks itself (view)"))
        elif key == "timeslice":
            t.drop(key, "the kernel's own time slices" if "policy" not in s else
                   "the dispatcher sees one entry per process for its whole life, so a "
                   "process keeps its slice across jobs")
        elif key in SIM_BOOST:
            t.drop(key, "the simulator's wake-up boosts are not applied to real processes")
        elif key == "start_pinned" and isinstance(v, int) and not isinstance(v, bool):
            s[key] = [v]
            if "release_after" not in s:
                t.put("release_after", 0, key)
                t.note(key, v, "every task starts confined to this CPU, released at once (as "
                       "in the simulator: the balancer may move them from the start)")
        elif key == "io":
            if isinstance(v, int | float) and not isinstance(v, bool):
                s[key] = f"sleep:det:{v}"
            elif not _os_form(v):
                s[key] = f"sleep:{v}"
        elif key == "io_device":
            if v != "delay":
                t.refuse(t.path(key), v, "one shared I/O device has no counterpart on real "
                         "processes (their waits are sleeps or real writes)")
            t.drop(key)
        elif key == "workers":
            t.drop(key)
            if "cpus" not in s:
                t.put("cpus", v, key)
        elif key == "duration":
            t.drop(key)
            t.put("time", v, key)
        elif key in ("bytes",):
            t.refuse(t.path(key), v, "file sizes belong to the server world: give size (ms "
                     "of CPU)")
        elif key in ("cost", "cost_mode", "packet", "packet_unit", "buffer", "files", "zipf"):
            t.drop(key, "a key of the file server" if key in ("cost", "buffer") else None)
        elif key in MEASUREMENT["server"]:
            t.drop(key)
    for i, c in enumerate(s.get("classes") or []):
        for k in list(c):
            v = c[k]
            if k == "io_kind":
                c.pop(k)
            elif k == "io" and not _os_form(v):
                c[k] = f"sleep:det:{v}" if isinstance(v, int | float) else f"sleep:{v}"
            elif k == "prefix":
                c.pop(k)
            elif k == "bytes":
                t.refuse(t.class_path(i, k), v, "file sizes belong to the server world")

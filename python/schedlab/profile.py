"""Machine profiles: what `schedlab calibrate` measured on a machine, as a TOML file a person
can read and edit, and how the simulator models it (`profile = "FILE"` in `[machine]`,
`--profile FILE`, `simulate(profile=...)`).

A profile is the server's (`schedlab calibrate server`) or real processes'
(`schedlab calibrate os`).

A server profile holds, for the server as it was calibrated (`[profile.config]`: workers,
cost, cost_mode, packet), each measured term with its 95% interval and, where one number
would hide the spread, its quantiles:

- `fixed`: worker time of a request beyond its bytes (the emulated fixed cost plus the
  server's own: the first turn's wake-up from the emulated cost, its last write, the queue);
- `per_kib`: worker time per KiB of file (the emulated per-size cost plus the server's own);
- `turn`: worker time of every later turn of a request that goes on after its own quantum;
- `switch`: what a later turn costs more when its worker ran another request just before;
- `delay`: a request's time outside the workers with no queue: the client's send, the
  master's read and parse, the hand-off to an idle worker, the response's way back;
- `idle_delay` (optional: older profiles lack it): the same after a long think, when the
  server has fallen asleep.

The simulator's model of it (`model_terms`): a job of s ms of ideal service (the cost
model's `F + per-byte x bytes`) costs the measured `fixed + per_kib x KiB`: its first run
`start_cost` (the fixed part, which the server spends with the first packet) and its bytes
`service_scale x s + service_offset` (offset -scale x F), so that a quantum counts the bytes
alone, as the server's packets do; a run that goes on with the job its CPU ran just before
costs `turn_cost`, one after another job's `context_switch` (turn + switch); each response
includes `dispatch_delay`, and a job that finds the machine empty pays `idle_wake`
(`idle_delay - delay`) on its first run. Work
parameters (a quantum) become whole packets, as the server counts them, of the calibrated
per-KiB cost. A profile measured under another emulated cost still applies: the server's own
part (measured minus emulated) is added to the spec's cost.

An os profile holds, for the CPUs it was measured on (`[profile.config]`: cpus, enforce):

- `start`, `scale` (and `start_many`, `scale_many` at many processes): a CPU's wall time per
  job of a SCHED_FIFO batch is `start + scale x size` (size: the job's ms of CPU clock);
- `other_start`, `other_scale` (and their `_many`): the same under SCHED_OTHER (CFS/EEVDF),
  whose batches time-share the CPUs: its switches are in the line;
- `dispatch_start` (and `dispatch_start_many`), `dispatch_switch`: under schedlab's
  user-space dispatcher, a job's start and end (a tiny process's whole cost) and a quantum's
  switch;
- `dispatch_exit` (optional: older profiles lack it): the part of that a job spends at its
  end, measured where the end comes apart from the rest: a process that ends with an I/O is
  run once more to exit, when the policy gives it a CPU again;
- `dispatch_start_long` (optional, with its `size_ms`, 1): the start of a job of 1 ms, from
  the same runs' first runs, which go back to back. A tiny batch's start is larger (0.55-0.74
  ms against 0.18-0.25 on 2026-12-07): its processes' hand-offs through the one dispatcher
  line up one behind the other, where a job of 1 ms runs beside the next one's;
- `kernel_wake`, `dispatch_wake` (optional): what a sleep costs beyond itself, under the
  kernel (a timer's overshoot and the wake-up) and through the dispatcher (also its hand-off
  to the woken worker), on CPUs that idle meanwhile;
- `dispatch_migrate` (optional, on 2 CPUs or more): what a migration adds to a quantum's
  switch through the dispatcher;
- `timer`, `timer_other` (optional): how late a process wakes from a sleep to a deadline, sleep
  by sleep (mean, p50, p95, p99 each with its interval, max), under SCHED_FIFO (no timer
  slack) and SCHED_OTHER (the process's `slack_ms`). Reported, not modelled: the model's
  wake-ups are `kernel_wake` and `dispatch_wake` (smaller: part of a wake-up is charged to the
  sleeper's CPU clock, and so spent inside its next burst; docs/calibration.md).

Each os term keeps its repetitions (`reps`); a kernel scale whose repetitions disagree
(`schedlab.calibration.SCALE_AGREEMENT`) carries `disagree = true`, and `[profile] warnings`
lists, one line each, what a reader should know before trusting the profile (empty when
nothing is): such a scale, and in either world the phases whose runs the noise gate still
flagged after their retries.

The simulator's model of it (`_os_terms`): `service_scale` and `start_cost` at the run's
number of processes (log-linear between the two populations measured) on the line of the
run's kernel class, or the dispatcher's start and `context_switch`, the start split into
`start_cost` and `end_cost` (`dispatch_exit` less a switch; the rest of the start before),
and the start itself taken at the run's mean job size: the tiny batches' up to their size
(0.01 ms), `dispatch_start_long` from its size on, log-linear in the size between; a
run of the kernel's own policy is one whose spec still has `sched` (the calibrated world
keeps it). Where measured, a sleep's wake-up (`kernel_wake`, `dispatch_wake`) becomes
`wake_delay` and a migration through the dispatcher (`dispatch_migrate`) `migration_cost`.
"""

from __future__ import annotations

import math
import os
import tomllib
from pathlib import Path
from typing import Any

import tomli_w

import schedlab._core as _core
from schedlab import server as machinery
from schedlab.files import atomic_file
from schedlab.vocabulary import SpecError, find_policy, param_units, quoted, spec_error

FORMAT = 1
# `profile = "calibrate"` in an experiment file: measure the real world first (schedlab.sweep).
CALIBRATE = "calibrate"
SERVER, OS = "server", "os"
SERVER_TERMS = {
    "fixed": "ms",
    "per_kib": "ms/KiB",
    "turn": "ms",
    "switch": "ms",
    "delay": "ms",
}
# Terms a profile may lack (written by an older schedlab): their model term is then 0.
OPTIONAL_SERVER_TERMS = {"idle_delay": "ms"}
OPTIONAL_OS_TERMS = {"dispatch_exit": "ms", "kernel_wake": "ms", "dispatch_wake": "ms",
                     "dispatch_migrate": "ms", "timer": "ms", "timer_other": "ms",
                     "dispatcher_cpu": "ms", "dispatch_start_long": "ms"}
OS_TERMS = {
    "start": "ms",
    "scale": "ms/ms",
    "start_many": "ms",
    "scale_many": "ms/ms",
    "other_start": "ms",
    "other_scale": "ms/ms",
    "other_start_many": "ms",
    "other_scale_many": "ms/ms",
    "dispatch_start": "ms",
    "dispatch_start_many": "ms",
    "dispatch_switch": "ms",
}
TERMS = {SERVER: SERVER_TERMS, OS: OS_TERMS}
# What an os calibration measured (`[profile] parts`; a profile without it measured both):
# the kernel's own classes, whose terms model runs under the kernel's policies, and
# schedlab's dispatcher, whose terms model the dispatched runs. The timers are either's.
OS_PARTS = ("kernel", "dispatcher")
KERNEL_TERMS = ("start", "scale", "start_many", "scale_many", "other_start", "other_scale",
                "other_start_many", "other_scale_many", "kernel_wake")
OPTIONAL_TERMS = {SERVER: OPTIONAL_SERVER_TERMS, OS: OPTIONAL_OS_TERMS}
# The server's keys a profile reads to model a run (the simulator has no use for them otherwise).
SERVER_KEYS = ("cost", "cost_mode", "packet", "packet_unit")
# The os keys an os profile reads at the run (the calibrated world keeps them): `sched` says a
# run is the kernel's own policy (without it a run models the user-space dispatcher),
# `enforce` is checked against the calibrated configuration.
OS_KEYS = ("sched", "enforce")
# The simulator's machine keys a profile may set to what it measured.
MEASURED_KEYS = ("service_scale", "service_offset", "start_cost", "end_cost", "turn_cost",
                 "context_switch", "migration_cost", "dispatch_delay", "idle_wake", "wake_delay")
ALLOWED = "a machine profile written by `schedlab calibrate`"
# What a profile holds, said after what is wrong with the file given.
FORMAT_HELP = ("a profile is TOML: [profile] format = 1, world = \"server\" or \"os\", and a "
               "table per term of that world with its mean: [server.fixed], [server.per_kib], "
               "[server.turn], [server.switch], [server.delay] (and [server.idle_delay] if "
               "measured); or [os.start], [os.scale], [os.start_many], [os.scale_many], "
               "[os.other_start], [os.other_scale], [os.other_start_many], "
               "[os.other_scale_many], [os.dispatch_start], [os.dispatch_start_many], "
               "[os.dispatch_switch] (and [os.dispatch_exit], [os.kernel_wake], "
               "[os.dispatch_wake], [os.dispatch_migrate], [os.timer], [os.timer_other], "
               "[os.dispatcher_cpu], [os.dispatch_start_long] if measured; [profile] parts "
               "= [\"kernel\"] or [\"dispatcher\"] says one part was, and its terms alone "
               "are there)")


def part_of(term: str) -> str | None:
    """The part of an os calibration that measures `term` (None: the timers, either)."""
    if term in KERNEL_TERMS:
        return "kernel"
    return "dispatcher" if term.startswith("dispatch") else None


def check_parts(key: str, value: Any) -> tuple[str, ...]:
    """`parts` as a tuple in OS_PARTS' order: a list (or a comma-separated text) of them,
    each once, at least one; else a SpecError naming `key`."""
    items = [p.strip() for p in value.split(",")] if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not items or \
            not all(isinstance(p, str) and p in OS_PARTS for p in items) or \
            len(set(items)) != len(items):
        raise spec_error(key, quoted(value), "a list of what an os calibration measures, "
                         "each at most once: kernel (its classes' batches and wake-up), "
                         "dispatcher (schedlab's dispatcher: starts, switches, exits, "
                         "wake-ups, migrations)")
    return tuple(p for p in OS_PARTS if p in items)


def parts_of(profile: dict[str, Any]) -> tuple[str, ...]:
    """What an os profile measured (an older one, without `parts`: both)."""
    return tuple(profile["profile"].get("parts", OS_PARTS))


def _not_a_profile(key: str, path: Any, why: str, help_: bool = True) -> SpecError:
    """What is wrong first, then what a profile holds (a line of 700 characters put the cause
    at its end)."""
    return spec_error(key, str(path), f"{ALLOWED} ({why}" + (f"; {FORMAT_HELP})" if help_
                                                              else ")"))


def load(path: str | os.PathLike[str], key: str = "profile") -> dict[str, Any]:
    """Reads and checks a profile; a missing or malformed file is one SpecError naming `key`."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise _not_a_profile(key, path, "there is no such file", help_=False) from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise _not_a_profile(key, path, f"reading it failed: {e}") from None
    head = data.get("profile")
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        said = f" (it says {quoted(head['format'])})" if isinstance(head, dict) and \
            "format" in head else ""
        raise _not_a_profile(key, path, f"[profile] format = {FORMAT} is missing{said}")
    world = head.get("world")
    if world not in TERMS:
        raise _not_a_profile(key, path, f"its world is {world!r}")
    terms = data.get(world)
    optional = [n for n in OPTIONAL_TERMS[world] if isinstance(terms, dict) and n in terms]
    required = list(TERMS[world])
    if world == OS:
        try:
            parts = check_parts("parts", head.get("parts", list(OS_PARTS)))
        except SpecError as e:
            raise _not_a_profile(key, path, f"[profile] parts = {quoted(head['parts'])}: "
                                 f"expected {e.allowed}", help_=False) from None
        required = [n for n in required if part_of(n) in parts]
    for name in [*required, *optional]:
        term = terms.get(name) if isinstance(terms, dict) else None
        mean = term.get("mean") if isinstance(term, dict) else None
        if not (isinstance(mean, int | float) and not isinstance(mean, bool)
                and math.isfinite(mean)):
            raise _not_a_profile(key, path, f"[{world}.{name}] has no finite mean")
    if world == OS:
        counted = ("start", "start_many", "other_start", "other_start_many", "dispatch_start",
                   "dispatch_start_many")
        for name in (n for n in counted if n in required):
            if not isinstance(terms[name].get("tasks"), int) or terms[name]["tasks"] < 1:
                raise _not_a_profile(key, path, f"[os.{name}] has no tasks")
    return data


def world_of(profile: dict[str, Any]) -> str:
    return str(profile["profile"]["world"])


def write(path: str | os.PathLike[str], profile: dict[str, Any]) -> None:
    """Writes a profile whole or not at all (a comment line first says what it is)."""
    text = ("# schedlab machine profile: what `schedlab calibrate` measured (docs/calibration.md)."
            "\n# Every term: mean, its 95% interval [low, high], and quantiles where measured.\n"
            + tomli_w.dumps(_plain(profile)))
    with atomic_file(path) as tmp:
        tmp.write_text(text)


def _plain(v: Any) -> Any:
    """Numbers and tables TOML can hold (numpy scalars become floats; NaN is left out)."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()
                if not (isinstance(x, float) and math.isnan(x)) and x is not None}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float):
        return float(f"{v:.6g}")  # a person reads the file: six digits are plenty
    return v


def mean(profile: dict[str, Any], term: str) -> float:
    return float(profile[world_of(profile)][term]["mean"])


def model_terms(profile: dict[str, Any], spec: dict[str, Any]) -> tuple[dict[str, Any],
                                                                        list[str]]:
    """The simulator's keys that model `profile` for a run of `spec` (its policy, params,
    cost and packet as the server world reads them; its tasks, and `sched` for the kernel's
    own policies, as the os world runs them), and one note per term."""
    if world_of(profile) == OS:
        return _os_terms(profile, spec)
    calibrated = profile["profile"].get("config", {})
    # The server modelled: the spec's cost and packets, or those it was calibrated with.
    server = {k: spec.get(k, calibrated.get(k)) for k in SERVER_KEYS}
    server = {k: v for k, v in server.items() if v is not None}
    per_packet, packet_bytes, per_byte = machinery.packet_ms(server)
    fixed_spec = float(_core.parse_cost(str(server.get("cost", "none")))["fixed_ms"])
    cal_cost = _core.parse_cost(str(calibrated.get("cost", "none")))
    # The server's own costs: measured minus what the calibrated server emulated.
    own_fixed = mean(profile, "fixed") - float(cal_cost["fixed_ms"])
    own_per_kib = mean(profile, "per_kib") - float(cal_cost["per_byte_ms"]) * 1024
    fixed = fixed_spec + own_fixed
    per_kib = per_byte * 1024 + own_per_kib
    notes = []
    if per_byte > 0:
        scale = per_kib / (per_byte * 1024)
    else:
        # Sizes carry no bytes without a per-size cost: only the fixed part is modelled.
        scale = 1.0
        notes.append("the cost has no per-size part: sizes are not scaled")
    # A later turn after another request's costs turn + switch: the simulator's context
    # switch, which it charges on a job's first run too.
    turn = max(mean(profile, "turn"), 0.0)
    switch = max(turn + mean(profile, "switch"), 0.0)
    # The server spends a request's fixed cost with its first packet, and counts a quantum in
    # packets of its bytes: the fixed part is the first run's start_cost (less the switch the
    # first run pays), the job's service its bytes' part alone.
    start = fixed - switch
    if start < 0:
        notes.append(f"start_cost {start:.4g} ms < 0 (within the measurement's noise) is "
                     "taken as 0")
        start = 0.0
    terms: dict[str, Any] = {
        "service_scale": scale,
        "service_offset": -scale * fixed_spec,
        "start_cost": start,
        "turn_cost": turn,
        "context_switch": switch,
        "dispatch_delay": max(mean(profile, "delay"), 0.0),
    }
    # A request that finds the server empty waits for it to wake: what it spends outside the
    # workers after a long think, beyond the busy machine's delay.
    if "idle_delay" in profile[SERVER]:
        terms["idle_wake"] = max(mean(profile, "idle_delay") - mean(profile, "delay"), 0.0)
    notes.insert(0, f"a request costs {fixed:.4g} ms + {per_kib:.4g} ms/KiB (start_cost "
                 f"{start:.4g} ms, then its bytes: service_scale {scale:.4g}, service_offset "
                 f"{terms['service_offset']:.4g} ms), a turn that goes on "
                 f"{terms['turn_cost']:.4g} ms, one after another request's "
                 f"{terms['context_switch']:.4g} ms, and a response "
                 f"{terms['dispatch_delay']:.4g} ms outside the workers")
    if "idle_wake" in terms:
        notes.insert(1, f"a request that finds the server empty waits "
                     f"{terms['idle_wake']:.4g} ms more for it to wake (idle_wake)")
    params = _packet_params({**spec, **server}, per_packet * scale, per_packet, packet_bytes, notes)
    if params is not None:
        terms["params"] = params
    return terms, notes


def tasks_of(spec: dict[str, Any]) -> int:
    """The processes a run has (clients, or one per job of a batch), as the simulator's spec
    gives them (a batch is clients there)."""
    classes = spec.get("classes") or []
    counted = [int(c.get("clients") or c.get("batch") or 0) for c in classes]
    if any(counted):
        return max(sum(counted), 1)
    return max(int(spec.get("clients") or spec.get("batch") or 1), 1)


def _os_terms(profile: dict[str, Any], spec: dict[str, Any]) -> tuple[dict[str, Any],
                                                                      list[str]]:
    """Real processes: a job of s ms of CPU costs its CPU `scale x s` and `start` beyond (the
    kernel's FIFO line at this many processes, log-linear between the two populations
    measured; under the kernel's time-sharing classes, their own line); under schedlab's
    dispatcher a job's start costs `dispatch_start` (at this many processes) and a quantum's
    switch `dispatch_switch`."""
    n = tasks_of(spec)
    notes: list[str] = []

    def at(name: str, measured_at: str) -> float:
        """The term at n processes: log-linear between the two populations measured (the
        `tasks` of `measured_at` and of its `_many`)."""
        few, many = (int(profile[OS][x]["tasks"]) for x in (measured_at, measured_at + "_many"))
        t = (math.log(n) - math.log(few)) / (math.log(many) - math.log(few)) \
            if few != many else 0.0
        if not 0 <= t <= 1:
            line = f"{n} processes: outside the {few}..{many} calibrated, extrapolated"
            if line not in notes:
                notes.append(line)
        return mean(profile, name) + t * (mean(profile, name + "_many") - mean(profile, name))

    sched = spec.get("sched")
    end = migration = 0.0
    if sched is not None:
        # The kernel's time-sharing classes have their own line, switches included; the
        # real-time ones (and deadline) FIFO's.
        line = "other_" if sched in ("other", "batch", "idle") else ""
        scale = at(line + "scale", line + "start")
        start, switch = at(line + "start", line + "start"), 0.0
        how = f"the kernel's SCHED_{str(sched).upper()}"
        wake = _measured(profile, "kernel_wake")
    else:
        # A dispatched worker's CPU clock runs with the wall clock inside its quantum: the
        # dispatcher's costs are its starts and its switches, sizes and quanta stay.
        scale = 1.0
        start = at("dispatch_start", "dispatch_start")
        switch = max(mean(profile, "dispatch_switch"), 0.0)
        how = "schedlab's dispatcher"
        if "dispatch_exit" in profile[OS]:
            # A job's end is CPU time after its last run, which a final I/O puts apart from
            # the rest (the simulator's exit run pays a switch too); the rest is its start.
            end = min(max(mean(profile, "dispatch_exit") - switch, 0.0), max(start - switch, 0.0))
            start -= end
            if "dispatch_start_long" in profile[OS]:
                start, line = _start_at_size(profile, spec, start)
                notes.append(line)
        # A woken worker's way back (the timer, the dispatcher's hand-off) keeps it out of
        # the runqueue, its CPU free; the run it then gets is its CPU's last job's (no switch).
        wake = _measured(profile, "dispatch_wake")
        migration = _measured(profile, "dispatch_migrate")
    # The simulator charges a job's first run a switch too: the measured start includes it.
    start -= switch
    if start < 0:
        notes.append(f"start_cost {start:.4g} ms < 0 (within the measurement's noise) is "
                     "taken as 0")
        start = 0.0
    terms: dict[str, Any] = {"service_scale": scale, "start_cost": start,
                             "context_switch": switch}
    ending = f"{start:.4g} ms more to start and end (start_cost)"
    if end > 0:
        terms["end_cost"] = end
        ending = f"{start:.4g} ms more to start (start_cost), {end:.4g} ms to end (end_cost)"
    if wake > 0:
        terms["wake_delay"] = wake
        ending += f", {wake:.4g} ms to wake after each I/O (wake_delay)"
    if migration > 0:
        terms["migration_cost"] = migration
        ending += f", {migration:.4g} ms per migration (migration_cost)"
    notes.insert(0, f"{n} processes under {how}: a job of s ms of CPU takes {scale:.4g} x s "
                 f"(service_scale), {ending}, and {switch:.4g} ms per switch (context_switch)")
    return terms, notes


# The size of the tiny batches' jobs (ms of CPU): their start is the dispatcher's start up to it.
TINY_START_MS = 0.01


def _start_at_size(profile: dict[str, Any], spec: dict[str, Any], tiny: float
                   ) -> tuple[float, str]:
    """A dispatched job's start at the run's mean job size: `tiny` (the tiny batches' start,
    its end taken out) up to TINY_START_MS, `dispatch_start_long` from its `size_ms` on,
    log-linear in the size between; and a note saying so."""
    term = profile[OS]["dispatch_start_long"]
    long_ms = float(term.get("size_ms", 1.0))
    size = _mean_size(spec)
    w = min(max(math.log(size / TINY_START_MS) / math.log(long_ms / TINY_START_MS), 0.0), 1.0) \
        if size > 0 else 0.0
    start = tiny + w * (float(term["mean"]) - tiny)
    return start, (f"a start at the mean job size {size:.4g} ms: {start:.4g} ms, between the "
                   f"tiny batches' {tiny:.4g} ({TINY_START_MS:g} ms jobs) and "
                   f"{float(term['mean']):.4g} for jobs of {long_ms:g} ms (log-linear in the "
                   "size)")


def _mean_size(spec: dict[str, Any]) -> float:
    """The mean size of a run's jobs (ms): its classes' by their fractions (or clients)."""
    def mean_of(text: Any) -> float:
        return float(_core.parse_dist(str(text), "size")["mean"])

    base = spec.get("size") or "exp:1"
    classes = spec.get("classes") or []
    if not classes:
        return mean_of(base)
    weights = [float(c.get("fraction") or c.get("clients") or c.get("batch") or 1)
               for c in classes]
    means = [mean_of(c.get("size") or base) for c in classes]
    return sum(w * m for w, m in zip(weights, means, strict=True)) / sum(weights)


def _measured(profile: dict[str, Any], term: str) -> float:
    """An optional os term's mean, at least 0; 0 where the profile (an older one) lacks it."""
    return max(mean(profile, term), 0.0) if term in profile[OS] else 0.0


def _packet_params(spec: dict[str, Any], calibrated_packet: float, per_packet: float,
                   packet_bytes: int, notes: list[str]) -> dict[str, Any] | None:
    """Work parameters as the server runs them: whole packets (rounded up, as a turn is),
    each of the calibrated cost of a packet."""
    if not (per_packet > 0 and math.isfinite(per_packet)):
        return None
    policy = spec.get("policy", "fcfs")
    params = dict(spec.get("params") or {})
    units = param_units()
    defaults = {q["name"]: q["default"] for q in find_policy(policy)["params"]}
    changed = False

    def whole(ms: float) -> float:
        return max(math.ceil(round(float(ms) / per_packet, 9)), 1) * calibrated_packet

    for name, default in defaults.items():
        if units.get(name) != "work":
            continue
        value = params.get(name, default)
        if isinstance(value, list):
            params[name] = [whole(x) for x in value]
        elif isinstance(value, int | float) and not isinstance(value, bool):
            params[name] = whole(value)
        else:
            continue
        changed = True
        notes.append(f"{name} = {value} ms of service: whole packets of {packet_bytes} B, "
                     f"{calibrated_packet:.4g} ms each as calibrated")
    return params if changed else None


def apply(spec: dict[str, Any], base_dir: Path | None = None,
          key: str = "profile") -> tuple[dict[str, Any], list[str]]:
    """`spec` with its `profile` replaced by the simulator's terms that model it."""
    spec, profile, terms, notes = _read(spec, base_dir, key)
    calibrated = profile["profile"].get("config", {})
    checked = ("cost_mode", "packet", "packet_unit") if world_of(profile) == SERVER \
        else ("cpus", "enforce")
    for k in checked:
        if k in calibrated and k in spec and spec[k] != calibrated[k]:
            notes.append(f"calibrated with {k} = {calibrated[k]}, modelled for {spec[k]}")
    for k in SERVER_KEYS + OS_KEYS:
        spec.pop(k, None)
    for k, (given, measured) in _replaced(spec, terms).items():
        notes.append(f"{k} = {given} (given) is the profile's {measured:.4g} here: a "
                     "calibrated run models what was measured")
    spec.update(terms)
    return spec, notes


def _replaced(spec: dict[str, Any], terms: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The spec's machine keys that the profile's terms set otherwise: key -> (given,
    measured)."""
    return {k: (spec[k], terms[k]) for k in MEASURED_KEYS
            if k in spec and k in terms and spec[k] != terms[k]}


def replaced(spec: dict[str, Any], base_dir: Path | None = None,
             key: str = "profile") -> dict[str, tuple[Any, Any]]:
    """The machine keys of a spec with a profile that the profile sets to something else:
    key -> (given, measured). A run given both is refused (`schedlab sim`, `simulate`); a
    calibrated world of an experiment file, whose keys are the ideal model's too, drops them
    with a note."""
    spec, _, terms, _ = _read(spec, base_dir, key)
    return _replaced(spec, terms)


def _read(spec: dict[str, Any], base_dir: Path | None, key: str
          ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], list[str]]:
    """The spec without its profile, the profile (its path relative to `base_dir`), and the
    terms that model it with their notes."""
    spec = dict(spec)
    given = spec.pop("profile")
    if isinstance(given, str) and not given.strip():  # Path("") is ".", which it was not
        raise spec_error(key, quoted(given), "a machine profile file (schedlab calibrate "
                         "writes one)")
    path = Path(given)
    if base_dir is not None and not path.is_absolute():
        path = base_dir / path
    profile = load(path, key)
    if world_of(profile) == OS:
        sched = spec.get("sched")
        need = "dispatcher" if sched is None else "kernel"
        if need not in parts_of(profile):
            run = "schedlab's dispatcher" if sched is None else \
                f"the kernel's SCHED_{str(sched).upper()}"
            measured = ", ".join(f'"{p}"' for p in parts_of(profile))
            raise spec_error(key, str(path), f"a profile that measured the {need} (this run "
                             f"is under {run}; the profile measured parts = [{measured}] "
                             f"only: calibrate os with parts including \"{need}\")")
    terms, notes = model_terms(profile, spec)
    return spec, profile, terms, notes

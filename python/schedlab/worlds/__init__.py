"""One experiment file, three worlds. Each world is a module of this package with one shape:

- `KEYS` and `CLASS_KEYS`: how the world reads every key of the vocabulary (a test checks that
  each table covers exactly the vocabulary), one of four ways:
  - `NATIVE`: the world has the key, with the same meaning (`clients`, `think`, `jobs`, ...);
  - `maps(how, note)`: translated so that the same file means the same workload, by the key's
    declared unit or by a rule (a quantum in ms of service becomes packets in the server
    through its cost model; a batch of one-shot processes is as many one-job clients; a
    kernel policy is modelled in the simulator by its textbook policy);
  - `drops(note)`: the key describes something the world does not model or measures for real
    (`context_switch` in server and os, `buffer` in sim): the run goes ahead and the report
    lists the note; without a note, a key about how another world measures (timeouts, the
    os world's noise gate) is dropped silently;
  - `refuses(reason)`: the world has no model of what the key asks (open arrivals on real
    processes, a real synchronous write in the simulator, a kernel policy in the file
    server): the run is skipped with that reason, and the report says so;
- `validate(spec)` and `run(spec) -> schedlab.results.Result`, on a spec of native keys.

`translate(world, run)` applies a world's tables to a run as written; the experiment runner
(`schedlab.experiment`) translates every run for every world, and `schedlab.worlds.MODULES`
says which module is each world's (tests register stand-ins, which get the keys as written).
"""

from __future__ import annotations

import copy
import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import schedlab._core as _core
from schedlab._core import SpecError
from schedlab.vocabulary import CLASS_KEYS, KERNEL, KERNEL_PARAMS, KEYS, spec_error

WORLDS = ("sim", "calibrated", "server", "os")
MODULES = {"sim": "schedlab.worlds.sim", "calibrated": "schedlab.worlds.calibrated",
           "server": "schedlab.worlds.server", "os": "schedlab.worlds.os"}
# The worlds that compute rather than measure: they run in parallel, the others alone.
SIMULATED = ("sim", "calibrated")
DEFAULT_MODULES = dict(MODULES)


def short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


# ---------------------------------------------------------------------------------------------
# How a world reads a key
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Native:
    kind = "native"


@dataclass(frozen=True)
class Maps:
    """`how(t, key)` rewrites the key in `t.spec` (or, for a class key, `how(t, i, key)` in
    class i); `note`, if any, is added for the report."""

    how: Callable[..., None]
    note: str | None = None
    kind = "maps"


@dataclass(frozen=True)
class Drops:
    note: str | None = None
    kind = "drops"


@dataclass(frozen=True)
class Refuses:
    reason: str
    kind = "refuses"


Treatment = Native | Maps | Drops | Refuses
NATIVE = Native()


def maps(how: Callable[..., None], note: str | None = None) -> Maps:
    return Maps(how, note)


def drops(note: str | None = None) -> Drops:
    return Drops(note)


def refuses(reason: str) -> Refuses:
    return Refuses(reason)


# ---------------------------------------------------------------------------------------------
# Translation of one run's keys for one world
# ---------------------------------------------------------------------------------------------


@dataclass
class Translation:
    """A run's keys as one world reads them.

    `spec` is what the world's `run(spec)` gets; `where` maps each of its keys to the path in
    the file it came from (for error messages); `notes` say what was translated or dropped;
    `skip` is (path, value, reason) when the world has no model of the run; `given` keeps
    the value as written of a key the translation moved or rewrote where the world's own
    check judges it (machine.affinity = "0-9" as the list in every class, a nice in every
    class), by the path the check names (classes[0].affinity), for that check's message.
    """

    world: str
    spec: dict[str, Any]
    where: dict[str, str]
    base_dir: Path | None = None
    notes: list[str] = field(default_factory=list)
    skip: tuple[str, str, str] | None = None
    done: set[str] = field(default_factory=set)
    given: dict[str, Any] = field(default_factory=dict)

    def path(self, key: str) -> str:
        return self.where.get(key, key)

    def class_path(self, i: int, key: str) -> str:
        # A sweep that sets one key inside the classes is the origin of the whole list
        # (sweep.workload.classes[0].tickets): the path of the list is the part before it.
        base = self.path("classes")
        cut = base.find("classes[")
        return f"{base[:cut + len('classes')] if cut >= 0 else base}[{i}].{key}"

    def note(self, key: str, value: Any, text: str) -> None:
        line = f"{self.path(key)} = {short(value)}: {text}"
        if line not in self.notes:
            self.notes.append(line)

    def refuse(self, path: str, value: Any, reason: str) -> None:
        if self.skip is None:
            self.skip = (path, short(value), reason)

    def drop(self, key: str, text: str | None = None) -> Any:
        value = self.spec.pop(key)
        if text:
            self.note(key, value, text)
        return value

    def put(self, key: str, value: Any, origin: str) -> None:
        self.spec[key] = value
        self.where[key] = self.where.get(origin, origin)

    def classes(self, create: bool = False) -> list[dict[str, Any]]:
        cls = self.spec.get("classes")
        if not cls and create:
            cls = [{}]
            self.spec["classes"] = cls
            self.where.setdefault("classes", "workload.classes")
        return cls or []

    def policy_is_kernel(self) -> bool:
        return self.spec.get("policy") == KERNEL


# ---------------------------------------------------------------------------------------------
# Rules that more than one world's table uses
# ---------------------------------------------------------------------------------------------


def os_form(io: Any) -> bool:
    """io written the os world's way (sleep:DIST, dsync:BYTES): an I/O after every burst.
    Otherwise it is the simulator's (a distribution): an I/O between two bursts."""
    return isinstance(io, str) and io.split(":", 1)[0].strip().lower() in ("sleep", "dsync")


def every_class(t: Translation, key: str) -> None:
    """A value for every task (nice, deadline) is every class's own, unless a class sets it;
    a refusal of it names the key where it was written (nice = 99, not classes[0].nice)."""
    value = t.spec.pop(key)
    for i, c in enumerate(t.classes(create=True)):
        if key not in c:
            c[key] = value
            t.where[f"classes[{i}].{key}"] = t.path(key)
            t.given[f"classes[{i}].{key}"] = value


def policy_service(t: Translation, key: str) -> str:
    """How the run's policy serves ("discrete" or "fluid", `_core.policy_service`), its
    parameters checked: a bad one is named where the file wrote it (policy[1].quantum)."""
    try:
        return str(_core.policy_service(t.spec[key], t.spec.get("params") or None))
    except SpecError as e:
        raise spec_error(t.path(e.key), e.value, e.allowed) from None


def io_bursts(t: Translation, to: str) -> None:
    """Keeps the number of I/Os per job and the CPU per job the same across worlds.

    The os world does an I/O after each of its b bursts (b per job); the simulator waits
    between bursts (b - 1 per job), and after the last one too with `final_io` (the job then
    ends with a run of no time, as a process exits). So io written the os way runs in the
    simulator with `final_io` (or, with `final_io = false`, one burst more: the job ends with
    CPU), and io written the simulator's way runs on real processes with one burst fewer
    (none: no I/O) unless `final_io` says it ends with an I/O. Global keys, then each class
    that sets io, bursts or final_io of its own. Runs once per translation, whichever io key
    asks first."""
    if "io-bursts" in t.done:
        return
    t.done.add("io-bursts")
    s = t.spec
    g_io, g_b, g_final = s.get("io"), s.get("bursts", 1), s.get("final_io")
    units: list[tuple[dict[str, Any], Any, Any, Any, str]] = []
    if g_io is not None:
        units.append((s, g_io, g_b, g_final, "io"))
    for i, c in enumerate(s.get("classes") or []):
        if "io" in c or "bursts" in c or "final_io" in c:
            units.append((c, c.get("io", g_io), c.get("bursts", g_b),
                          c.get("final_io", g_final), t.class_path(i, "io")))
    for table, io, b, final, path in units:
        if io is None or not isinstance(b, int) or isinstance(b, bool):
            continue
        where = t.where.get(path, path)
        if to == "sim" and os_form(io) and final is not False:
            table["final_io"] = True
            line = (f"{where} = {io}: an I/O after each of {b} bursts: final_io = true (the "
                    "job ends when its last I/O does, with a run of no time, as a process "
                    "exits)")
        elif to == "sim" and os_form(io):
            table["bursts"] = b + 1
            line = (f"{where} = {io}: final_io = false: an I/O after each of {b} bursts "
                    f"becomes {b + 1} bursts with an I/O between two (same CPU and number of "
                    "I/Os per job; the job ends with CPU)")
        elif to == "os" and final and not os_form(io):
            line = (f"{where} = {io}: final_io = true: an I/O after each of {b} bursts, the "
                    "os world's own form")
        elif to == "os" and not os_form(io):
            if b <= 1:
                table.pop("io", None)
                line = (f"{where} = {io}: one burst, so no I/O (the simulator waits "
                        "only between bursts)")
            else:
                table["bursts"] = b - 1
                line = (f"{where} = {io}: an I/O between two of {b} bursts becomes "
                        f"{b - 1} bursts, each followed by an I/O (same CPU and number of "
                        "I/Os per job)")
        else:
            continue
        if line not in t.notes:
            t.notes.append(line)


def _apply(t: Translation, treatment: Treatment, key: str, path: str, value: Any,
           table: dict[str, Any], how_args: tuple[Any, ...]) -> None:
    if isinstance(treatment, Native):
        return
    if isinstance(treatment, Refuses):
        t.refuse(path, value, treatment.reason)
    elif isinstance(treatment, Drops):
        table.pop(key, None)
        if treatment.note and value not in (None, False, 0, 0.0):
            line = f"{path} = {short(value)}: {treatment.note}"
            if line not in t.notes:
                t.notes.append(line)
    else:
        treatment.how(t, *how_args)
        if treatment.note:
            line = f"{path} = {short(value)}: {treatment.note}"
            if line not in t.notes:
                t.notes.append(line)


def translate(world: str, run: dict[str, Any], where: dict[str, str] | None = None,
              base_dir: Path | None = None) -> Translation:
    """`run` as written (policy, params, and keys of the vocabulary) as `world` reads it."""
    mod = module(world)
    t = Translation(world, copy.deepcopy({k: v for k, v in run.items() if v is not None}),
                    dict(where or {}), base_dir)
    params = t.spec.get("params") or {}
    if t.policy_is_kernel() and params:
        # The kernel's parameters are keys of the vocabulary (sched, nice, rtprio, ...).
        for k in list(params):
            if k in KERNEL_PARAMS:
                t.spec[k] = params.pop(k)
                t.where.setdefault(k, t.where.get(f"params.{k}", k))
        if not params:
            t.spec.pop("params")
    order = {k: i for i, k in enumerate(KEYS)}
    for key in sorted(t.spec, key=lambda k: order.get(k, len(order))):
        if key not in t.spec:
            continue  # taken by an earlier key's mapping
        treatment = mod.KEYS.get(key)
        if treatment is None:
            raise spec_error(t.path(key), short(t.spec[key]), "a key of the vocabulary")
        _apply(t, treatment, key, t.path(key), t.spec[key], t.spec, (key,))
    for i, c in enumerate(t.spec.get("classes") or []):
        for k in list(c):
            treatment = mod.CLASS_KEYS.get(k)
            if treatment is None:
                raise spec_error(t.class_path(i, k), short(c[k]), "a class key of the "
                                 "vocabulary")
            _apply(t, treatment, k, t.class_path(i, k), c[k], c, (i, k))
    return t


def check_native(world: str, table: dict[str, Treatment], native: frozenset[str],
                 spec: dict[str, Any], where: str = "") -> None:
    """A spec given to a world directly (not through `translate`) has only keys the world
    reads natively; a key of the vocabulary that the world drops or refuses is one error with
    the table's reason. (Keys outside the vocabulary, and policy parameters given by name, are
    the world's own code's to judge.) `where` goes before a key in the message: a class's
    table is checked as `classes[0].`."""
    for key, value in spec.items():
        treatment = table.get(key)
        if key in native or treatment is None:
            continue
        if isinstance(treatment, Refuses):
            why = treatment.reason
        elif isinstance(treatment, Drops) and treatment.note:
            why = treatment.note
        elif isinstance(treatment, Drops):
            why = "a key of another world, which an experiment file leaves out of this one"
        else:
            why = "give it through an experiment file, which translates it"
        raise spec_error(f"{where}{key}", short(value), f"nothing in the {world} world: {why}")


# ---------------------------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------------------------


def module(world: str) -> Any:
    """A world's module (its tables, validate and run)."""
    name = MODULES.get(world)
    if name is None:
        raise spec_error("experiment.world", world, "one of " + ", ".join(WORLDS))
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise spec_error("experiment.world", world,
                         f"a world whose module is installed ({name}: {e})") from None


def stand_in(world: str) -> bool:
    """A world whose module was replaced (tests register stand-ins): its runs get the keys as
    written, untranslated."""
    return MODULES.get(world) != DEFAULT_MODULES.get(world)


def runner(world: str, module_name: str | None = None) -> Callable[..., Any]:
    """The function that runs one spec in a world and returns a schedlab Result."""
    name = module_name or MODULES.get(world)
    if name is None:
        raise spec_error("experiment.world", world, "one of " + ", ".join(WORLDS))
    try:
        mod = importlib.import_module(name)
    except ImportError as e:
        raise spec_error("experiment.world", world,
                         f"a world whose module is installed ({name}: {e})") from None
    run = getattr(mod, "run", None)
    if run is None:
        raise spec_error("experiment.world", world, f"a world whose module {name} has "
                         "run(spec)")

    def call(**spec: Any) -> Any:
        return run(spec)

    return call


def validator(world: str) -> Callable[..., Any]:
    """The function that checks one spec of a world (its own `validate`, or the simulator's
    for a stand-in that has none)."""
    mod = module(world)
    own = getattr(mod, "validate", None)
    if own is None:
        own = importlib.import_module(DEFAULT_MODULES["sim"]).validate

    def call(**spec: Any) -> Any:
        return own(spec)

    return call


def class_key_worlds() -> dict[str, tuple[str, ...]]:
    """Per class key, the worlds that read it natively."""
    tables = {w: importlib.import_module(DEFAULT_MODULES[w]).CLASS_KEYS for w in WORLDS}
    return {k: tuple(w for w in WORLDS if isinstance(tables[w][k], Native)) for k in CLASS_KEYS}


def reading_worlds() -> dict[str, tuple[str, ...]]:
    """Per key, the worlds that read it, natively or by a mapping (not dropped or refused)."""
    tables = {w: importlib.import_module(DEFAULT_MODULES[w]).KEYS for w in WORLDS}
    return {k: tuple(w for w in WORLDS if isinstance(tables[w][k], Native | Maps))
            for k in KEYS}


def key_worlds() -> dict[str, tuple[str, ...]]:
    """Per key, the worlds that read it natively."""
    tables = {w: importlib.import_module(DEFAULT_MODULES[w]).KEYS for w in WORLDS}
    return {k: tuple(w for w in WORLDS if isinstance(tables[w][k], Native)) for k in KEYS}

"""Experiment files: parse, validate, expand into runs.

An experiment file (TOML) has the sections [experiment], [workload], [machine], [[policy]],
[sweep], [report], [worlds] and [quick]. Which key goes in which section is the vocabulary's
(`schedlab.vocabulary`, one declaration for every world), so a key added there is accepted
here without a change. pydantic checks the structure (sections, unknown keys, types of the keys
this module owns); each world checks every value of every run (after `schedlab.worlds.translate`
has read the run's keys the way that world's table says), and its errors are mapped back to the
path of the key in the file (`workload.size`, `policy[2].quantum`, `sweep.workload.load`), so a
bad file gives one line naming what to fix, before anything is written.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import itertools
import json
import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
    create_model,
)

from schedlab import worlds
from schedlab._core import SpecError
from schedlab.policies import label as policy_label
from schedlab.profile import CALIBRATE
from schedlab.vocabulary import (
    CLASS_KEYS,
    KERNEL,
    KERNEL_LABELS,
    KERNEL_PARAMS,
    KERNEL_POLICIES,
    KEYS,
    MAX_REPLICATIONS,
    batches_beside,
    find_policy,
    param_units,
    policy_catalog,
    replication_seed,
    spec_error,
)
from schedlab.worlds import WORLDS

PLOTS = ("response", "percentiles", "throughput", "fairness", "share", "classes", "cdf",
         "load", "load_series", "gantt", "balance", "makespan", "context_switches")
# Drawn when a file asks for them: a batch's completion time, and the switches each world
# counts its own way.
ON_REQUEST_PLOTS = ("makespan", "context_switches")
# Summary keys the "Worlds side by side" tables can compare (`[report] gap_metrics`).
GAP_METRICS = ("response_mean", "response_p50", "response_p95", "response_p99", "wait_mean",
               "slowdown_mean", "throughput", "makespan", "utilization", "context_switches",
               "migrations")
SECTIONS = ("experiment", "workload", "machine", "policy", "sweep", "report", "worlds",
            "quick")
# Keys of [worlds.NAME] besides the world's [experiment] keys: how long a world runs.
RUN_LENGTH = {
    "replications": "independent runs per sweep point and policy in this world",
    "jobs": "measured jobs per run in this world",
    "time": "run length (ms) in this world",
    "warmup": "jobs discarded at the start in this world",
    "warmup_time": "jobs arriving before this time (ms) are discarded in this world",
}
REPLAY_HELP = (
    "\"server\": each run of this world is the simulator on the requests of the server "
    "world's run with the same point, policy and replication (every client's thinks and "
    "file sizes, request for request, its warm-up left out the same; an open-loop run's "
    "arrivals and sizes), sent until the server run stopped sending and then drained (a "
    "client goes on past its recorded requests with ones drawn from the run's own), so its "
    "gap to the server is the model's, not the noise of two samples; this world then has "
    "the server's replications and no run length of its own")
# Keys of a world's table that tell the runner how to run the world, not the world itself.
RUNNER_KEYS = ("replications", "replay")
# Spec keys that decide what is stored, not what is simulated: left out of a run's identity.
OUTPUT_SECTION = "output"
QUICK_JOBS = 5_000
QUICK_REPLICATIONS = 2
QUICK_SWEEP_VALUES = 3


# ---------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


WorldName = Literal["sim", "calibrated", "server", "os"]


class ExperimentFields(Strict):
    """The keys of [experiment] that this module owns; the core's experiment and output keys
    (warmup, warmup_time, batches, ...) are added to the model at run time."""

    name: str | None = Field(None, description="name of the experiment; default the file name")
    world: WorldName | list[WorldName] = Field(
        "sim", description="where runs happen: sim (simulator: the ideal model), calibrated "
        "(the simulator with machine.profile: the model of what schedlab calibrate measured), "
        "server (real file server), os (real Linux processes); a list runs every point in each "
        "world, same seeds, for side-by-side reports")
    description: str = Field("", description="one paragraph shown at the top of the report")
    # Strict: true, "7" or 1.0 were read as seeds and counts; the simulator's keys refuse them.
    seed: StrictInt = Field(1, ge=0, description="experiment seed; replication r of every point "
                            "and policy runs with a seed derived from (seed, r): common random "
                            "numbers")
    replications: StrictInt = Field(1, ge=1, le=MAX_REPLICATIONS,
                                    description="independent runs per sweep point and policy")
    confidence: StrictFloat = Field(0.95, gt=0, lt=1,
                                    description="level of confidence intervals")
    keep_jobs: StrictBool | Literal["first"] = Field(
        "first", description="store per-job tables: true (every run), \"first\" (replication 0 "
        "of each point and policy) or false")
    keep_schedule: StrictBool | Literal["first"] = Field(
        False, description="store run segments for the Gantt chart (small runs only): true, "
        "\"first\" or false")
    job_rows: StrictInt = Field(100_000, ge=0, description="at most this many per-job rows "
                                "stored per run, an even systematic sample in arrival order; "
                                "0 = all")
    unit: Literal["ms", "s", "us", "ns", "min", "tick"] = Field(
        "ms", description="the unit of the file's times (sizes, think and arrival times, "
        "quanta, time) and so of every time in its tables and plots: ms, or in the simulator, "
        "whose times are plain numbers, another one (s, us, ns, min, or tick for xv6); give "
        "such a file every time explicitly (defaults such as RR's quantum of 10 are meant as "
        "ms). The server and os worlds measure ms")


class PolicyEntry(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str = Field(description="policy name or alias (`schedlab policies`)")
    label: str | None = Field(None, min_length=1, description="label in tables and plots; "
                              "default from the name and parameters")
    params: dict[str, Any] | None = Field(None, description="parameters as a table; or give "
                                          "them by name beside `name`")


class SweepFields(BaseModel):
    model_config = ConfigDict(extra="allow")
    mode: Literal["cartesian", "zip"] = Field(
        "cartesian", description="cartesian: every combination of the lists; zip: the i-th "
        "values of every list together (lists of equal length)")


class ReportFields(Strict):
    plots: list[Literal[PLOTS]] = Field(  # type: ignore[valid-type]
        [p for p in PLOTS if p not in ON_REQUEST_PLOTS],
        description="plots to draw, in order: " + ", ".join(PLOTS) + "; default all but "
        + " and ".join(ON_REQUEST_PLOTS))
    gap_metrics: list[Literal[GAP_METRICS]] = Field(  # type: ignore[valid-type]
        ["response_mean"], description="summary keys compared world against world in the "
        "report's \"Worlds side by side\" tables, one table each, in order (default "
        "response_mean): "
        + ", ".join(GAP_METRICS))
    x: str | None = Field(None, description="sweep key on the x axis; default the first")
    x_label: str | None = Field(None, description="x-axis label; default the sweep key")
    log_x: StrictBool = Field(False, description="logarithmic x axis")
    theory: StrictBool = Field(True, description="draw closed forms where they exist")
    point: int | None = Field(None, description="sweep point (index) of the class, load and "
                              "Gantt plots, always among the CDF's panels; default the last")
    gantt_max_segments: int = Field(400, ge=1, description="a run is drawn as a Gantt chart "
                                    "only when it has at most this many run segments")
    gantt_runs: int = Field(6, ge=1, description="at most this many Gantt charts")
    title: str | None = Field(None, description="report title; default the experiment name")


def _keys_of(section: str, skip: set[str]) -> dict[str, Any]:
    return {k: (Any, Field(None, description=key.help)) for k, key in KEYS.items()
            if key.section == section and k not in skip}


@cache
def _models() -> dict[str, type[BaseModel]]:
    """pydantic models of every section, built from the worlds' key lists."""
    owned = set(ExperimentFields.model_fields)
    cls = create_model("WorkloadClass", __base__=Strict,
                       **{k: (Any, Field(None, description=key.help))
                          for k, key in CLASS_KEYS.items()})
    workload = _keys_of("workload", {"classes"})
    workload["classes"] = (list[cls] | None, Field(None, description=KEYS["classes"].help))
    experiment = create_model("Experiment", __base__=ExperimentFields,
                              **_keys_of("experiment", owned), **_keys_of(OUTPUT_SECTION, owned))
    machine = create_model("Machine", __base__=Strict, **_keys_of("machine", set()))
    workload_m = create_model("Workload", __base__=Strict, **workload)

    def world_table(world: str) -> type[BaseModel]:
        fields: dict[str, Any] = {
            "replications": (StrictInt | None, Field(None, ge=1, le=MAX_REPLICATIONS,
                                               description=RUN_LENGTH["replications"]))}
        fields.update({k: (Any, Field(None, description=h)) for k, h in RUN_LENGTH.items()
                       if k != "replications"})
        if world in worlds.SIMULATED:
            fields["replay"] = (Literal["server"] | None, Field(None, description=REPLAY_HELP))
        native = worlds.key_worlds()
        for k, key in KEYS.items():
            if key.section in ("experiment", OUTPUT_SECTION) and world in native[k] \
                    and k not in fields and k not in owned and k != "seed":
                fields[k] = (Any, Field(None, description=key.help))
        return create_model(f"World_{world}", __base__=Strict, **fields)

    tables = {w: world_table(w) for w in WORLDS}
    worlds_model = create_model("Worlds", __base__=Strict,
                          **{w: (m | None, Field(None, description=f"run length and "
                                                 f"measurement keys of the {w} world"))
                             for w, m in tables.items()})
    quick = create_model(
        "Quick", __base__=Strict,
        experiment=(dict[str, Any] | None, None), workload=(dict[str, Any] | None, None),
        machine=(dict[str, Any] | None, None), sweep=(dict[str, Any] | None, None),
        report=(dict[str, Any] | None, None), worlds=(dict[str, Any] | None, None))
    top = create_model(
        "ExperimentFile", __base__=Strict,
        experiment=(experiment, Field(default_factory=experiment)),
        workload=(workload_m, Field(default_factory=workload_m)),
        machine=(machine, Field(default_factory=machine)),
        policy=(list[PolicyEntry], Field(min_length=1)),
        sweep=(SweepFields, Field(default_factory=SweepFields)),
        report=(ReportFields, Field(default_factory=ReportFields)),
        worlds=(worlds_model, Field(default_factory=worlds_model)),
        quick=(quick | None, None),
    )
    return {"top": top, "experiment": experiment, "workload": workload_m, "machine": machine,
            "classes": cls, "quick": quick, **{f"worlds.{w}": m for w, m in tables.items()}}


def key_worlds(section: str, key: str) -> tuple[str, ...]:
    """The worlds that have a key of a section natively (the others translate or drop it)."""
    if section == "workload.classes":
        return worlds.class_key_worlds().get(key, WORLDS)
    if section in ("experiment", "workload", "machine") and key in KEYS:
        return worlds.key_worlds()[key]
    return WORLDS


def section_keys() -> dict[str, dict[str, str]]:
    """Every key of every section with its help text: the experiment-file reference."""
    m = _models()

    def fields(model: type[BaseModel]) -> dict[str, str]:
        return {k: (f.description or "") for k, f in model.model_fields.items()}

    return {
        "experiment": fields(m["experiment"]),
        "workload": fields(m["workload"]),
        "workload.classes": fields(m["classes"]),
        "machine": fields(m["machine"]),
        "policy": fields(PolicyEntry),
        "sweep": {**fields(SweepFields), "SECTION.KEY": "a list of values for the key at "
                  "that path: workload.load, machine.cpus, experiment.warmup, policy.quantum "
                  "(every policy with that parameter), policy.LABEL.quantum (one policy), "
                  "workload.classes[1].tickets",
                  "case": "[[sweep.case]]: named points, each a table with `name` and partial "
                  "[workload], [machine] and [experiment] tables that replace the base keys "
                  "(a test suite in one file); combined with the other sweep keys"},
        "report": fields(ReportFields),
        **{f"worlds.{w}": fields(m[f"worlds.{w}"]) for w in WORLDS},
        "quick": {s: f"overrides of [{s}] used by --quick" for s in
                  ("experiment", "workload", "machine", "sweep", "report", "worlds")},
    }


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _allowed_keys(loc: tuple[Any, ...]) -> str:
    keys = section_keys()
    names = [str(p) for p in loc if not isinstance(p, int)]
    if names == ["quick"]:
        # A table of [quick] itself: its own sections ([quick.policy] is not one of them).
        return "a section of [quick] among " + ", ".join(f"[quick.{q}]"
                                                         for q in section_keys()["quick"])
    if names and names[0] == "quick":
        names = names[1:]
    if names[:2] == ["sweep", "case"]:
        names = names[2:]
    section = ".".join(names) if names else ""
    if section in keys:
        return f"a key of [{section}]: " + ", ".join(k for k in keys[section] if k != "SECTION.KEY")
    if not section:
        return "a section among " + ", ".join(f"[{s}]" for s in SECTIONS)
    if names == ["worlds"]:
        return "a world's table [worlds.NAME], NAME one of " + ", ".join(worlds.MODULES)
    return "a known key"


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


_UNION_TAG = re.compile(r"^(literal|list|dict|bool|int|float|str|function-\w+)(\[.*\])?$")


def _stripped(prefix: tuple[Any, ...], loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """A location without the union members' tags (literal['sim',...], list[...], bool): the
    user wrote a key, not a type."""
    return prefix + tuple(p for p in loc if not (isinstance(p, str) and _UNION_TAG.match(p)))


def _expected(err: Any) -> str:
    """What one pydantic error says is allowed, in the project's words."""
    if err["type"] in ("model_type", "dict_type", "model_attributes_type"):
        return "a table"  # pydantic: "a valid dictionary or instance of World_sim"
    if err["type"] in ("bool_parsing", "bool_type"):
        return "true or false"
    if err["type"] == "string_too_short":
        return "text, not empty"
    if err["type"] == "int_type":
        return "a whole number"
    if err["type"] == "float_type":
        return "a number"
    bounds = {"greater_than_equal": ("ge", ">="), "less_than_equal": ("le", "<="),
              "greater_than": ("gt", ">"), "less_than": ("lt", "<")}
    if err["type"] in bounds:  # pydantic: "greater than or equal to 1"
        name, sign = bounds[err["type"]]
        bound = err["ctx"][name]
        whole = isinstance(err.get("input"), int) and isinstance(bound, int)
        shown = f"{bound:g}" if isinstance(bound, float) else str(bound)
        return f"a {'whole ' if whole else ''}number {sign} {shown}"
    msg = err["msg"]
    for head in ("Input should be ", "Value should be ", "Value error, "):
        msg = msg.removeprefix(head)
    return msg


def _from_pydantic(e: ValidationError, prefix: tuple[Any, ...] = ()) -> SpecError:
    err = e.errors()[0]
    loc = _stripped(prefix, err["loc"])
    value = err.get("input", "(missing)")
    if err["type"] == "missing":
        value = "(missing)"
    if err["type"] == "extra_forbidden":
        allowed = _allowed_keys(loc[:-1])
        return spec_error(_path(loc), _short(value), allowed)
    # A union's members each report an error at the same key (keep_jobs: a boolean, or
    # "first"): together they say what is allowed.
    same = [x for x in e.errors() if _stripped(prefix, x["loc"]) == loc] or [err]
    said = list(dict.fromkeys(_expected(x) for x in same))
    msg = said[0] if len(said) == 1 else ", ".join(said[:-1]) + ", or " + said[-1]
    if err["type"] == "missing":
        msg = "a value: the key is required here"
    name = next((p for p in reversed(loc) if isinstance(p, str)), "")
    return spec_error(_path(loc), '""' if value == "" else _given(value, name), msg)


# The forms of keys whose values are text (a word, a distribution, CPUs as text, tables).
TEXT_FORMS = frozenset({"str", "dist", "cpus", "table", "tables"})


def _given(value: Any, key: str) -> str:
    """The value as the message shows it: text given to a key that takes a number or a
    boolean (its form in the vocabulary; every policy parameter does) keeps its quotes
    (`jobs = "300"`), so that the reader sees why 300 was refused."""
    spec = KEYS.get(key) or CLASS_KEYS.get(key)
    numeric = spec.form not in TEXT_FORMS if spec is not None else (
        key in _param_names() or key in ("replications", "confidence", "job_rows"))
    return _short(json.dumps(value) if isinstance(value, str) and numeric else value)


@functools.cache
def _param_names() -> frozenset[str]:
    return frozenset(q["name"] for info in policy_catalog() for q in info["params"])


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------


def read_toml(path: str | Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise spec_error("experiment file", str(path), "an existing TOML file") from None
    except IsADirectoryError:
        raise spec_error("experiment file", str(path), "a TOML file, not a directory") from None
    except OSError as e:
        raise spec_error("experiment file", str(path), f"a readable TOML file ({e.strerror})") \
            from None
    except UnicodeDecodeError:
        raise spec_error("experiment file", str(path), "a TOML file (text in UTF-8; this one "
                         "is not)") from None
    except tomllib.TOMLDecodeError as e:
        raise spec_error("experiment file", str(path), f"valid TOML ({e})") from None


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _subset(values: list[Any]) -> list[Any]:
    if len(values) <= QUICK_SWEEP_VALUES:
        return values
    return [values[0], values[len(values) // 2], values[-1]]


def quick_overrides(raw: dict[str, Any]) -> dict[str, Any]:
    """What --quick changes: generic scaling, then the file's own [quick] tables on top.

    Generic: at most 2 replications, at most 5,000 measured jobs (warm-up cut to a fifth of
    them), sweep lists longer than 3 cut to their first, middle and last values.
    """
    out = copy.deepcopy({k: v for k, v in raw.items() if k != "quick"})
    exp = out.setdefault("experiment", {})
    exp["replications"] = min(int(exp.get("replications", 1)), QUICK_REPLICATIONS)
    wl = out.setdefault("workload", {})
    if isinstance(wl.get("jobs"), int) and wl["jobs"] > QUICK_JOBS:
        wl["jobs"] = QUICK_JOBS
        if isinstance(exp.get("warmup"), int):
            exp["warmup"] = min(exp["warmup"], QUICK_JOBS // 5)
    sweep = out.get("sweep", {})
    mode = sweep.get("mode", "cartesian")
    lists = {k: v for k, v in sweep.items() if k != "mode" and isinstance(v, list)}
    if lists and mode == "zip":
        n = max(len(v) for v in lists.values())
        if n > QUICK_SWEEP_VALUES and len({len(v) for v in lists.values()}) == 1:
            idx = [0, n // 2, n - 1]
            for k, v in lists.items():
                sweep[k] = [v[i] for i in idx]
    else:
        for k, v in lists.items():
            sweep[k] = _subset(v)
    for table in (out.get("worlds") or {}).values():  # the same caps inside [worlds.NAME]
        if isinstance(table, dict):
            if isinstance(table.get("replications"), int):
                table["replications"] = min(table["replications"], QUICK_REPLICATIONS)
            if isinstance(table.get("jobs"), int) and table["jobs"] > QUICK_JOBS:
                table["jobs"] = QUICK_JOBS
    quick = raw.get("quick") or {}
    for section, table in quick.items():
        if section == "sweep" and isinstance(table, dict):
            for k in table:
                if k != "mode" and k not in sweep:
                    raise spec_error(f"quick.sweep.{k}", _short(table[k]),
                                     "a key of [sweep] (quick can only narrow a sweep)")
                if k not in ("mode", "case") and not (isinstance(table[k], list) and table[k]):
                    raise spec_error(f"quick.sweep.{k}", _short(table[k]),
                                     "a non-empty list of values")
            if "case" in table:  # names of the cases to keep, in order
                table = dict(table)
                sweep["case"] = _quick_cases(table.pop("case"), (raw.get("sweep") or {})
                                             .get("case"))
        if isinstance(table, dict):
            out[section] = _merge(out.get(section, {}), table)
    return out


def _quick_keys(quick: Any) -> frozenset[str]:
    """The paths ("workload.jobs", "worlds.sim.jobs", "sweep.workload.load") a [quick] table
    sets."""
    out: set[str] = set()
    for section, table in (quick or {}).items() if isinstance(quick, dict) else ():
        if not isinstance(table, dict):
            continue
        for k, v in table.items():
            out.add(f"{section}.{k}")
            if section == "worlds" and isinstance(v, dict):
                out.update(f"worlds.{k}.{kk}" for kk in v)
    return frozenset(out)


def _quick_cases(names: Any, cases: Any) -> list[Any]:
    known = [c.get("name") for c in cases if isinstance(c, dict)] if isinstance(cases, list) \
        else []
    if not isinstance(names, list) or not names or not all(n in known for n in names):
        raise spec_error("quick.sweep.case", _short(names), "a list of case names of "
                         f"[[sweep.case]]: {', '.join(map(str, known))}")
    return [copy.deepcopy(cases[known.index(n)]) for n in names]


@dataclass
class Run:
    """One run of one policy at one sweep point in one replication, in one world."""

    id: str
    world: str
    spec: dict[str, Any]  # flat: what the world's run(spec) takes, seed included
    point: int
    coords: dict[str, Any]  # sweep path -> value at this point
    label: str
    policy: str
    policy_index: int
    replication: int
    seed: int
    skip: str | None = None  # why this world has no model of the run (it is not run)
    replay_of: str | None = None  # the id of the server run whose requests this run replays


@dataclass
class Experiment:
    name: str
    worlds: list[str]
    raw: dict[str, Any]  # the file as resolved (after --quick), what the manifest records
    config: Any  # the validated pydantic model
    base_dir: Path
    source: str | None
    quick: bool
    runs: list[Run] = field(default_factory=list)
    sweep_keys: list[str] = field(default_factory=list)
    points: list[dict[str, Any]] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    # How each world read the file: translations and dropped keys (schedlab.worlds).
    notes: dict[str, list[str]] = field(default_factory=dict)
    # The simulator's reading of each (point, label), for the closed forms of every world.
    theory_specs: dict[tuple[int, str], dict[str, Any] | None] = field(default_factory=dict)
    # The keys --quick took from the file's [quick] tables ("workload.jobs"): a message about
    # one names it where it was written ("quick.workload.jobs").
    quick_keys: frozenset[str] = frozenset()

    def written_at(self, path: str) -> str:
        return f"quick.{path}" if path in self.quick_keys else path

    @property
    def world(self) -> str:
        return self.worlds[0]

    @property
    def replications(self) -> int:
        """The most replications of any world (see replications_of)."""
        return max(self.replications_of(w) for w in self.worlds)

    def replays(self, world: str) -> str | None:
        """The real world whose runs this world's runs replay ([worlds.W] replay), or None."""
        table = getattr(self.config.worlds, world, None)
        return getattr(table, "replay", None)

    def replications_of(self, world: str) -> int:
        if (real := self.replays(world)) is not None:
            return self.replications_of(real)
        table = getattr(self.config.worlds, world, None)
        if table is not None and table.replications is not None:
            return int(table.replications)
        return int(self.config.experiment.replications)

    def unique_runs(self) -> list[Run]:
        seen: dict[str, Run] = {}
        for r in self.runs:
            seen.setdefault(r.id, r)
        return list(seen.values())


def load(source: str | Path | dict[str, Any], quick: bool = False,
         check_world: bool = True) -> Experiment:
    """Reads, validates and expands an experiment (a file path or a dict of the same shape).

    Raises SpecError naming the key path on any problem; writes nothing.
    """
    if isinstance(source, dict):
        raw, base_dir, src = copy.deepcopy(source), Path.cwd(), None
    elif not isinstance(source, str | os.PathLike):
        raise spec_error("experiment", _short(source), "a TOML file's path or a dict of its "
                         f"sections (given: {type(source).__name__})")
    else:
        path = Path(source)
        raw, base_dir, src = read_toml(path), path.resolve().parent, str(path)
    if not isinstance(raw, dict):
        raise spec_error("experiment", _short(raw), "a table of sections")
    exp = _load(raw, base_dir, src, quick, check_world)
    if not quick and raw.get("quick"):
        # The file's [quick] tables are checked on every load, not first when someone runs
        # it with --quick.
        _load(raw, base_dir, src, True, False)
    return exp


def _load(raw: dict[str, Any], base_dir: Path, src: str | None, quick: bool,
          check_world: bool) -> Experiment:
    raw = copy.deepcopy(raw)
    top = _models()["top"]
    try:
        top.model_validate(raw)  # the file as written, [quick] included
    except ValidationError as e:
        raise _from_pydantic(e) from None
    quick_keys = _quick_keys(raw.get("quick")) if quick else frozenset()
    if quick:
        raw = quick_overrides(raw)
        try:
            top.model_validate(raw)
        except ValidationError as e:
            raise _from_pydantic(e, ("quick",)) from None
    raw.pop("quick", None)
    config = top.model_validate(raw)
    name = config.experiment.name or (Path(src).stem if src else None)
    if not name:
        raise spec_error("experiment.name", "(missing)", "a name for the experiment")
    if name == "experiment" and src:  # experiments/<study>/experiment.toml: the folder's name
        name = Path(src).resolve().parent.name
    world_list = config.experiment.world
    world_list = world_list if isinstance(world_list, list) else [world_list]
    if (twice := _first_repeated(world_list)) is not None:
        # Each world runs every point once; a second "sim" was dropped without a word.
        raise spec_error("experiment.world", _short(world_list), f"each world once ({twice} "
                         "is given twice)")
    if not world_list:
        raise spec_error("experiment.world", "[]", "at least one world")
    real = [w for w in world_list if w not in worlds.SIMULATED]
    if config.experiment.unit != "ms" and real:
        raise spec_error("experiment.unit", config.experiment.unit,
                         f"ms: the {' and '.join(real)} world(s) measure real time in ms "
                         "(another unit in the simulator only)")
    exp = Experiment(name=name, worlds=world_list, raw=raw, config=config,
                     base_dir=base_dir, source=src, quick=quick, quick_keys=quick_keys)
    if check_world:
        for w in world_list:
            worlds.runner(w)
    _expand(exp)
    _check_swept_over(exp)
    _check_idle_worlds(exp)
    return exp


def _check_swept_over(exp: Experiment) -> None:
    """A value the file writes and its sweep replaces at every point (`quantum = -3` under
    a policy whose quantum is swept) is never run, yet it is the file's: it is checked as if
    that sweep key were not there. Only a refusal of the value itself counts (one that names
    where the file writes it): a value valid alone may not fit the other sweep keys' values."""
    sweep = dict(exp.config.sweep.model_extra or {})
    policies = _policies(exp.config)
    for path, values in sweep.items():
        if path == CASE:
            continue
        target = _sweep_target(path, policies, values)
        if target.section == "policy":
            own = [f"policy[{i}].{target.key}" for i, p in enumerate(policies)
                   if p[0] in target.labels and target.key in p[2]]
        elif getattr(getattr(exp.config, target.section), target.key, None) is not None:
            own = [exp.written_at(f"{target.section}.{target.key}")]
        else:
            own = []
        if not own:
            continue
        config = exp.config.model_copy(deep=True)
        del config.sweep.model_extra[path]
        config.report.x = None if config.report.x == path else config.report.x
        config.report.point = None
        shadow = Experiment(name=exp.name, worlds=exp.worlds, raw=exp.raw, config=config,
                            base_dir=exp.base_dir, source=exp.source, quick=exp.quick,
                            quick_keys=exp.quick_keys)
        try:
            _expand(shadow, pair_replays=False)
        except SpecError as e:
            if any(e.key == at or e.key.startswith((f"{at}.", f"{at}[")) for at in own):
                raise


def _check_idle_worlds(exp: Experiment) -> None:
    """What the file writes for a world it does not run is checked as that world would read
    it: a [worlds.NAME] table (a file switched to `world = "sim"` for a while keeps its server
    table, and `jobs = -1` there must not wait to be found until the server runs), and a key
    that every world the file runs drops (`cost = "lots"` in a simulator's file). Only those
    keys are judged here: the rest of the file was checked for the worlds it runs."""
    native, reading = worlds.key_worlds(), worlds.reading_worlds()
    storage = set(ExperimentFields.model_fields)  # the runner's, not a world's
    written = {f"{section}.{k}": k for section in ("workload", "machine", "experiment")
               for k in getattr(exp.config, section).model_dump(exclude_none=True)
               if not (section == "experiment" and k in storage)}
    dropped = {path: k for path, k in written.items()
               if k in reading and not set(reading[k]) & set(exp.worlds)}
    for w in WORLDS:
        if w in exp.worlds:
            continue
        table = getattr(exp.config.worlds, w, None)
        theirs = [exp.written_at(p) for p, k in dropped.items() if w in reading[k]]
        if table is None and not theirs:
            continue
        judged = [exp.written_at(f"worlds.{w}")] + theirs
        shadow = Experiment(name=exp.name, worlds=[w], raw=exp.raw, config=exp.config,
                            base_dir=exp.base_dir, source=exp.source, quick=exp.quick,
                            quick_keys=exp.quick_keys)
        try:
            _expand(shadow, pair_replays=False)
            continue
        except SpecError as e:
            if any(e.key == p or e.key.startswith((f"{p}.", f"{p}[")) for p in judged):
                raise
        # The rest of the file is not a run of that world (a simulator's file has no server
        # cost model): the judged keys, together, are judged by that world beside a workload
        # it runs. Not the workload's own keys: the workload is what it cannot run.
        alone = {k: getattr(getattr(exp.config, path.split(".")[0]), k)
                 for path, k in dropped.items()
                 if w in reading[k] and not path.startswith("workload.")}
        alone_at = {k: exp.written_at(path) for path, k in dropped.items() if k in alone}
        if table is not None:
            own = {k: v for k, v in table.model_dump(exclude_none=True).items()
                   if k not in RUNNER_KEYS}
            alone.update(own)
            alone_at.update({k: exp.written_at(f"worlds.{w}.{k}") for k in own})
        ran = next((r.spec for r in exp.runs if not r.skip and not worlds.stand_in(r.world)),
                   {})
        _check_judged(w, alone, alone_at, ran)
        if table is None:
            continue
        # The table's keys that a world of the file reads too are judged by it as well, on
        # that world's first run.
        values = table.model_dump(exclude_none=True)
        for runs_in in exp.worlds:
            shared = {k: v for k, v in values.items()
                      if k not in RUNNER_KEYS and runs_in in native.get(k, ())}
            first = next((r for r in exp.runs if r.world == runs_in and not r.skip), None)
            if not shared or first is None or worlds.stand_in(runs_in):
                continue
            _check_values(runs_in, {**first.spec, **shared},
                          {k: exp.written_at(f"worlds.{w}.{k}") for k in shared})


# A workload every world runs (the os world has no open arrivals), to judge keys in.
EVERY_WORLD_RUNS = {"policy": "fcfs", "clients": 2, "jobs": 10}


def _check_judged(world: str, values: dict[str, Any], where: dict[str, str],
                  ran: dict[str, Any]) -> None:
    """`values` as `world` reads them, refused only where they are refused both beside a
    workload every world runs and beside the file's own run (`ran`, less what `world` cannot
    run): a key may be valid only beside another of the file (batches beside its jobs,
    max_time beside its precision), and a refusal that names the workload is not theirs."""
    if not values:
        return
    validate = worlds.validator(world)

    def refused(flat: dict[str, Any]) -> dict[str, Any] | None:
        for _ in range(len(flat) + len(EVERY_WORLD_RUNS) + 1):
            try:
                validate(**flat)
                return None
            except SpecError as e:
                key = re.split(r"[\[.]", e.key, maxsplit=1)[0]
            if key in where:
                return flat
            if key in flat and key not in values:
                flat = {k: v for k, v in flat.items() if k != key}
            elif any(k not in flat for k in EVERY_WORLD_RUNS):
                flat = {**EVERY_WORLD_RUNS, **flat}  # a workload it runs, in the file's stead
            else:
                return None
        return None

    if refused({**EVERY_WORLD_RUNS, **values}) is None:
        return
    beside_the_file = refused({**{k: v for k, v in ran.items() if k not in where}, **values})
    if beside_the_file is not None:
        _check_values(world, beside_the_file, where)


# ---------------------------------------------------------------------------------------------
# Policies and sweep paths
# ---------------------------------------------------------------------------------------------


def _policies(config: Any) -> list[tuple[str, str, dict[str, Any], set[str]]]:
    """(label, canonical name, params, parameter names) of each [[policy]]."""
    out = []
    labels: set[str] = set()
    for i, entry in enumerate(config.policy):
        info = _policy_info(i, entry.name)
        names = {p["name"] for p in info["params"]}
        params = dict(entry.params or {})
        for k, v in (entry.model_extra or {}).items():
            if k in params:  # two values for one parameter: which was meant?
                raise spec_error(f"policy[{i}].{k}", _short(v), f"one value: policy[{i}]."
                                 f"params.{k} = {_short(params[k])} gives it too")
            params[k] = v
        for k, v in params.items():
            if k not in names:
                allowed = ", ".join(sorted(names)) or "none"
                if info["name"] == KERNEL and k in param_units():
                    # A schedlab policy's parameter, said as the command line says it.
                    raise spec_error(f"policy[{i}].{k}", _short(v), "nothing under the kernel "
                                     "(a parameter of a schedlab policy: set name; the "
                                     f"kernel's are {allowed})")
                raise spec_error(f"policy[{i}].{k}", _short(v),
                                 f"a parameter of policy {info['name']} ({allowed}), or "
                                 "name, label, params")
        if info["name"] == KERNEL:
            sched = params.get("sched", "other")
            if sched not in KERNEL_POLICIES:
                raise spec_error(f"policy[{i}].sched", _short(sched),
                                 f"one of {', '.join(KERNEL_POLICIES)}")
            default = f"{KERNEL_LABELS[sched]} (kernel)"
        else:
            default = policy_label(info["name"], params)
        label = entry.label or default
        if label in labels:
            raise spec_error(f"policy[{i}].label", label, "a label no other policy has")
        labels.add(label)
        out.append((label, info["name"], params, names))
    return out


def _policy_info(i: int, name: str) -> dict[str, Any]:
    """The catalogue entry of a policy name; `kernel` is the kernel's own policies (os world;
    the simulator models them, the server has none)."""
    if str(name).lower() == KERNEL:
        return {"name": KERNEL, "params": [{"name": k, "help": key.help, "default": None}
                                           for k, key in KERNEL_PARAMS.items()]}
    try:
        return find_policy(name)
    except SpecError as e:
        raise spec_error(f"policy[{i}].name", name, e.allowed + f", or {KERNEL} (the kernel's "
                         "own policies: sched = other, fifo, rr, ...)") from None


_INDEX = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)((?:\.[A-Za-z_][A-Za-z0-9_]*)*)$")


@dataclass
class SweepTarget:
    path: str
    section: str  # workload, machine, experiment or policy
    key: str  # spec key or parameter name
    rest: str = ""  # [1].tickets after classes
    labels: tuple[str, ...] = ()  # policies it applies to (policy section)


def _sweep_target(path: str, policies: list[tuple[str, str, dict[str, Any], set[str]]],
                  value: Any) -> SweepTarget:
    where = f"sweep.{path}"
    section, dot, rest = path.partition(".")
    if not dot or not rest:
        raise spec_error(where, _short(value), "a key path SECTION.KEY such as workload.load, "
                         "machine.cpus or policy.quantum")
    if section == "policy":
        label, _, param = rest.rpartition(".")
        if label:
            match = [p for p in policies if p[0] == label]
            if not match:
                raise spec_error(where, _short(value), "policy.LABEL.PARAM with LABEL one of: "
                                 + ", ".join(p[0] for p in policies))
            if param not in match[0][3]:
                raise spec_error(where, _short(value), f"a parameter of {label} "
                                 f"({', '.join(sorted(match[0][3])) or 'none'})")
            return SweepTarget(path, "policy", param, labels=(label,))
        having = tuple(p[0] for p in policies if rest in p[3])
        if not having:
            every = sorted(set().union(*(p[3] for p in policies)))
            raise spec_error(where, _short(value), "policy.PARAM with PARAM a parameter of one "
                             f"of the policies ({', '.join(every) or 'they have none'})")
        return SweepTarget(path, "policy", rest, labels=having)
    if section not in ("workload", "machine", "experiment"):
        raise spec_error(where, _short(value), "a path starting with workload., machine., "
                         "experiment. or policy.")
    m = _INDEX.match(rest)
    key = m.group(1) if m else rest
    allowed = [k for k, key in KEYS.items() if key.section == section and k != "seed"]
    if not m or key not in allowed:
        raise spec_error(where, _short(value), f"a key of [{section}]: {', '.join(allowed)}")
    return SweepTarget(path, section, key, rest=rest[len(key):])


def _set_nested(obj: Any, rest: str, value: Any, where: str) -> Any:
    """obj with the part at `rest` ([1].tickets) replaced by value."""
    if not rest:
        return value
    obj = copy.deepcopy(obj)
    tokens = re.findall(r"\[(\d+)\]|\.([A-Za-z_][A-Za-z0-9_]*)", rest)
    cur = obj
    for n, (idx, name) in enumerate(tokens):
        last = n == len(tokens) - 1
        if idx:
            i = int(idx)
            if not isinstance(cur, list) or i >= len(cur):
                have = (f"an index below {len(cur)}" if isinstance(cur, list) and cur
                        else "an entry the base file has (the list it indexes is empty or "
                        "missing)")
                raise spec_error(where, _short(value), have)
            if last:
                cur[i] = value
            cur = cur[i]
        else:
            if not isinstance(cur, dict):
                raise spec_error(where, _short(value), "a path into a table")
            if last:
                cur[name] = value
            cur = cur.setdefault(name, {})
    return obj


CASE = "case"  # [[sweep.case]]: named points
MAX_POINTS = 100_000


def _cases(values: Any) -> dict[str, dict[str, dict[str, Any]]]:
    """Validates [[sweep.case]]: name -> {section: keys}. Each section table is checked by the
    model of that section, so a misspelt key names its path (sweep.case[1].workload.sizee)."""
    if not isinstance(values, list) or not values:
        raise spec_error("sweep.case", _short(values), "a non-empty list of tables "
                         "[[sweep.case]] with name and workload/machine/experiment tables")
    models = _models()
    owned = set(ExperimentFields.model_fields)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for i, case in enumerate(values):
        where = f"sweep.case[{i}]"
        if not isinstance(case, dict):
            raise spec_error(where, _short(case), "a table with name and section tables")
        name = case.get("name")
        if not isinstance(name, str) or not name:
            raise spec_error(f"{where}.name", _short(name), "a name for the case")
        if name in out:
            raise spec_error(f"{where}.name", name, "a name no other case has")
        sections: dict[str, dict[str, Any]] = {}
        for section, table in case.items():
            if section == "name":
                continue
            if section not in ("workload", "machine", "experiment"):
                raise spec_error(f"{where}.{section}", _short(table), "a case table: name, "
                                 "workload, machine or experiment")
            if not isinstance(table, dict):
                raise spec_error(f"{where}.{section}", _short(table), "a table of keys")
            for k in table:
                if section == "experiment" and k in owned:
                    raise spec_error(f"{where}.experiment.{k}", _short(table[k]), "a spec key "
                                     "of [experiment] (a case cannot change the experiment's "
                                     "own settings)")
            try:
                models[section].model_validate(table)
            except ValidationError as e:
                raise _from_pydantic(e, ("sweep", "case", i, section)) from None
            sections[section] = dict(table)
        out[name] = sections
    return out


def _first_repeated(values: list[Any]) -> Any:
    """The first value seen a second time (compared as JSON: values may be tables), or None."""
    seen: set[str] = set()
    for v in values:
        key = json.dumps(v, sort_keys=True, default=str)
        if key in seen:
            return v
        seen.add(key)
    return None


def _points(config: Any, policies: list) -> tuple[list[SweepTarget], list[dict[str, Any]],
                                                  dict[str, dict[str, dict[str, Any]]]]:
    sweep = dict(config.sweep.model_extra or {})
    targets = []
    lists = []
    cases: dict[str, dict[str, dict[str, Any]]] = {}
    if CASE in sweep:  # cases first: their keys are the base the other sweep keys change
        cases = _cases(sweep.pop(CASE))
        targets.append(SweepTarget(CASE, CASE, CASE))
        lists.append(list(cases))
    for path, values in sweep.items():
        if not isinstance(values, list) or not values:
            raise spec_error(f"sweep.{path}", _short(values), "a non-empty list of values")
        targets.append(_sweep_target(path, policies, values))
        lists.append(values)
    if not targets:
        return [], [{}], cases
    for t, v in zip(targets, lists, strict=True):
        twice = _first_repeated(v)
        if twice is not None and config.sweep.mode != "zip":
            # The same point twice: the same run ids, the points repeated in every table.
            raise spec_error(f"sweep.{t.path}", _short(v), f"each value once ({_short(twice)} "
                             "is given twice)")
    count = len(lists[0]) if config.sweep.mode == "zip" else math.prod(len(v) for v in lists)
    if count > MAX_POINTS:  # two lists of 1,000 validated a million points for minutes
        raise spec_error("sweep", f"{count:,} points", f"at most {MAX_POINTS:,} points")
    if config.sweep.mode == "zip":
        n = len(lists[0])
        for t, v in zip(targets, lists, strict=True):
            if len(v) != n:
                raise spec_error(f"sweep.{t.path}", _short(v),
                                 f"a list of {n} values, as long as the others (mode = zip)")
        combos = list(zip(*lists, strict=True))
        if (twice := _first_repeated(combos)) is not None:
            raise spec_error("sweep", _short(list(twice)), "points that differ (mode = zip "
                             "makes this one twice)")
    else:
        combos = list(itertools.product(*lists))
    return targets, [dict(zip([t.path for t in targets], c, strict=True)) for c in combos], cases


# ---------------------------------------------------------------------------------------------
# Expansion into runs
# ---------------------------------------------------------------------------------------------


def _resolve_files(value: Any, key: str, base: Path) -> Any:
    """Relative trace and empirical:FILE paths are relative to the experiment file."""
    if isinstance(value, str):
        if key in ("trace", "profile") and value != CALIBRATE and \
                not Path(value).is_absolute():
            return str((base / value).resolve())
        if value.startswith("empirical:"):
            f = value[len("empirical:"):].strip()
            if not Path(f).is_absolute():
                return "empirical:" + str((base / f).resolve())
    if isinstance(value, dict):
        return {k: _resolve_files(v, k, base) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve_files(v, key, base) for v in value]
    return value


def _files_of(spec: dict[str, Any]) -> list[str]:
    out = []

    def walk(k: str, v: Any) -> None:
        if isinstance(v, str):
            if k == "trace" or (k == "profile" and v != CALIBRATE):
                out.append(v)
            elif v.startswith("empirical:"):
                out.append(v[len("empirical:"):])
        elif isinstance(v, dict):
            for kk, vv in v.items():
                walk(kk, vv)
        elif isinstance(v, list):
            for vv in v:
                walk(k, vv)

    for k, v in spec.items():
        walk(k, v)
    return sorted(set(out))


@cache
def _digest_file(path: str, mtime: float, size: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


def _file_digest(path: str) -> str:
    try:
        st = Path(path).stat()
    except OSError:
        return "missing"
    return _digest_file(path, st.st_mtime, st.st_size)


def _is_output(key: str) -> bool:
    return key in KEYS and KEYS[key].section == OUTPUT_SECTION


def run_id(world: str, spec: dict[str, Any]) -> str:
    """A stable name of a run: hash of world, flat spec (seed included, storage keys not) and
    the contents of the files it reads, so an edited trace is a new run."""
    ident = {k: v for k, v in spec.items() if not _is_output(k)}
    files = {f: _file_digest(f) for f in _files_of(ident)}
    text = json.dumps({"world": world, "spec": ident, "files": files}, sort_keys=True,
                      default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _expand(exp: Experiment, pair_replays: bool = True) -> None:
    config = exp.config
    policies = _policies(config)
    exp.labels = [p[0] for p in policies]
    targets, points, cases = _points(config, policies)
    exp.sweep_keys = [t.path for t in targets]
    exp.points = points
    rep = config.report
    # The report's axis and point name what the sweep has (the report would quietly fall
    # back to the first key and the last point).
    if rep.x is not None and rep.x not in exp.sweep_keys:
        raise spec_error("report.x", rep.x, "a key of [sweep]: " + (
            ", ".join(exp.sweep_keys) or "none (this file has no sweep)"))
    if rep.point is not None and not 0 <= rep.point < len(points):
        raise spec_error("report.point", rep.point, f"a sweep point from 0 to {len(points) - 1}")
    reserved = set(ExperimentFields.model_fields)
    base: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for section in ("workload", "machine", "experiment"):
        model = getattr(config, section)
        for k, v in model.model_dump(exclude_none=True).items():
            if section == "experiment" and k in reserved:
                continue  # storage policy (keep_jobs, ...): decided per run by the runner
            base[k] = v
            origin[k] = exp.written_at(f"{section}.{k}")
    case_index = {name: i for i, name in enumerate(cases)}
    checked: dict[str, None] = {}
    runs: list[Run] = []
    notes: dict[str, list[str]] = {w: [] for w in exp.worlds}
    skips: dict[str, list[tuple[str, str, str]]] = {w: [] for w in exp.worlds}
    for pi, coords in enumerate(points):
        spec_pt = copy.deepcopy(base)
        origin_pt = dict(origin)
        params_pt: dict[str, dict[str, Any]] = {p[0]: dict(p[2]) for p in policies}
        porigin: dict[str, dict[str, str]] = {
            p[0]: {k: f"policy[{i}].{k}" for k in p[2]} for i, p in enumerate(policies)}
        for t in targets:
            value = coords[t.path]
            where = exp.written_at(f"sweep.{t.path}")
            if t.section == CASE:
                ci = case_index[value]
                for section, table in cases[value].items():
                    for k, v in table.items():
                        spec_pt[k] = copy.deepcopy(v)
                        origin_pt[k] = f"sweep.case[{ci}].{section}.{k}"
            elif t.section == "policy":
                for label in t.labels:
                    params_pt[label][t.key] = value
                    porigin[label][t.key] = where
            else:
                spec_pt[t.key] = _set_nested(spec_pt.get(t.key), t.rest, value, where)
                origin_pt[t.key] = where
        spec_pt = _resolve_files(spec_pt, "", exp.base_dir)
        for i, (label, name, _params, _names) in enumerate(policies):
            written = {"policy": name, "params": params_pt[label], **spec_pt}
            where0 = {**origin_pt, **porigin[label], "policy": f"policy[{i}].name"}
            sim = worlds.translate("sim", written, where0, exp.base_dir)
            exp.theory_specs[(pi, label)] = None if sim.skip else sim.spec
            for world in exp.worlds:
                spec_w, where_w = dict(written), dict(where0)
                table = getattr(config.worlds, world, None)
                if table is not None:
                    for k, v in table.model_dump(exclude_none=True).items():
                        if k not in RUNNER_KEYS:
                            spec_w[k] = v
                            where_w[k] = exp.written_at(f"worlds.{world}.{k}")
                if worlds.stand_in(world):
                    flat = {"policy": name, **spec_w.pop("params"), **spec_w}
                    tr = None
                elif world == "sim" and table is None:
                    tr = sim
                    flat = tr.spec
                else:
                    tr = worlds.translate(world, spec_w, where_w, exp.base_dir)
                    flat = tr.spec
                skip = None
                if tr is not None:
                    where_w = tr.where
                    for n in tr.notes:
                        if n not in notes[world]:
                            notes[world].append(n)
                    if tr.skip:
                        skips[world].append(tr.skip)
                        skip = f"{tr.skip[0]} = {tr.skip[1]}: {tr.skip[2]}"
                if skip is None:
                    key = json.dumps([world, flat], sort_keys=True, default=str)
                    if key not in checked:
                        _check_values(world, flat, where_w, tr.given if tr else None)
                        checked[key] = None
                if (n := exp.replications_of(world)) > 1 and flat.get("batches") is not None:
                    raise spec_error(where_w.get("batches", "experiment.batches"),
                                     flat["batches"], batches_beside(n))
                for r in range(n):
                    seed = replication_seed(config.experiment.seed, r)
                    spec = {**flat, "seed": seed}
                    runs.append(Run(id=run_id(world, spec), world=world, spec=spec,
                                    point=pi, coords=dict(coords), label=label, policy=name,
                                    policy_index=i, replication=r, seed=seed, skip=skip))
    for world in exp.worlds:
        if skips[world] and all(r.skip for r in runs if r.world == world):
            path, value, reason = skips[world][0]
            raise spec_error(path, value, f"a key the {world} world can run ({reason}); "
                             f"no run of the {world} world would be left")
    if pair_replays:
        _pair_replays(exp, runs)
    order = {w: i for i, w in enumerate(exp.worlds)}
    runs.sort(key=lambda r: (order[r.world], r.point, r.policy_index, r.replication))
    exp.runs = runs
    exp.notes = {w: n for w, n in notes.items() if n}


# A replay's workload is the trace: the keys that draw one, or end a run, are not its own.
_NOT_REPLAYED = {"precision", "max_jobs", "max_time", "warmup"}


def _pair_replays(exp: Experiment, runs: list[Run]) -> None:
    """[worlds.W] replay = "server": each run of W becomes the simulator on the requests of
    the server run of its point, policy and replication. Its spec is W's reading of the file
    without the workload (the trace, its path and its warm-up come from the server run when
    it has run: `schedlab.sweep`), and its id names the server run it replays."""
    for world in exp.worlds:
        real = exp.replays(world)
        if real is None:
            continue
        where = f"worlds.{world}.replay"
        if real not in exp.worlds:
            raise spec_error(where, real, f"a file whose worlds include {real} "
                             f"(experiment.world = [..., \"{real}\"]): there is nothing to replay")
        source = {(r.point, r.label, r.replication): r for r in runs if r.world == real}
        for r in runs:
            if r.world != world:
                continue
            if r.spec.get("classes"):
                raise spec_error(where, real, "a file without workload.classes: a replayed "
                                 "trace carries no classes")
            of = source[(r.point, r.label, r.replication)]
            r.replay_of = of.id
            r.skip = r.skip or (f"{real}: {of.skip}" if of.skip else None)
            r.spec = {k: v for k, v in r.spec.items()
                      if k not in _NOT_REPLAYED and not (k in KEYS and
                                                         KEYS[k].section == "workload")}
            r.id = run_id(world, {**r.spec, "replay_of": of.id})


def _check_values(world: str, flat: dict[str, Any], where: dict[str, str],
                  written: dict[str, Any] | None = None) -> None:
    """The core validates the values; its key is mapped back to the path in the file, and its
    value to the one written there where the translation rewrote it (`written`:
    `Translation.given`)."""
    validate = worlds.validator(world)
    try:
        validate(**flat)
    except SpecError as e:
        key = e.key
        if key == "spec":  # a type the bindings could not convert: find which key it was
            key = _culprit(flat) or key
        base = re.split(r"[\[.]", key, maxsplit=1)[0]
        exact = where.get(key)  # a key a translation put inside a list (machine.affinity)
        path = exact or where.get(base)
        if path is None:
            section = KEYS[base].section if base in KEYS else None
            if section == OUTPUT_SECTION:
                section = "experiment"
            path = f"{section}.{key}" if section and section != "policy" else key
        elif key != base and not exact:
            # A sweep that set one key inside a list is the origin of the whole list
            # (sweep.workload.classes[0].tickets): the key's path goes on from the list's,
            # unless the key is another one of the list, which lies where the file wrote it
            # (workload.classes[1].fraction), the sweep's value said beside it.
            nested = re.search(rf"\b{re.escape(base)}\[", path)
            swept = path[nested.start():] if nested else None
            if swept is not None and swept != key and base in KEYS:
                e.allowed += f" (at this point of the sweep, {path} = {_short(_at(flat, swept))})"
                path = f"{KEYS[base].section}.{key}"
            else:
                path = (path[:nested.start() + len(base)] if nested else path) + key[len(base):]
        value = flat.get(base, e.value) if key != e.key else e.value
        allowed = e.allowed
        if re.match(r"^[A-Za-z]+Error: ", allowed):  # a conversion error from the bindings
            allowed = f"a value of another type ({allowed})"
        # The user's own text keeps its quotes (the core's value is always text).
        given = _given(flat[base], base) if key == base and isinstance(flat.get(base), str) \
            else _short(value)
        if written and e.key in written:
            as_typed = written[e.key]
            given = as_typed if isinstance(as_typed, str) else _short(as_typed)
        raise spec_error(path, given, allowed) from None


def _at(flat: dict[str, Any], key: str) -> Any:
    """The value at a key inside a list ("classes[0].fraction"), None when there is none."""
    value: Any = flat
    for name, index in re.findall(r"([A-Za-z_]+)(?:\[(\d+)\])?", key):
        value = value.get(name) if isinstance(value, dict) else None
        if index:
            value = value[int(index)] if isinstance(value, list) and int(index) < len(value) \
                else None
    return value


def _culprit(flat: dict[str, Any]) -> str | None:
    validate = worlds.validator("sim")
    for k, v in flat.items():
        if k == "policy":
            continue
        probe = {"policy": flat["policy"], "jobs": 1, k: v}
        try:
            validate(**probe)
        except SpecError as e:
            if e.key == "spec":
                return k
    return None


# ---------------------------------------------------------------------------------------------
# Reference documentation
# ---------------------------------------------------------------------------------------------

DOC_BEGIN = ("<!-- BEGIN GENERATED: python -m schedlab.experiment --write-docs "
             "docs/experiments.md -->")
DOC_END = "<!-- END GENERATED -->"
POLICY_BEGIN = ("<!-- BEGIN GENERATED: python -m schedlab.experiment --write-policies "
                "docs/policies.md -->")


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def reference_markdown() -> str:
    """The key tables of docs/experiments.md, from the models and the core's key list."""
    lines = []
    for section, keys in section_keys().items():
        head = f"[[{section}]]" if section in ("policy", "workload.classes") else f"[{section}]"
        lines += [f"### `{head}`", "", "| key | meaning |", "| --- | --- |"]
        for k, help_text in keys.items():
            lines.append(f"| `{k}` | {_md(help_text)} |")
        if section == "policy":
            lines.append("| `PARAM` | any parameter of the policy by name, e.g. `quantum = 10` "
                         "(see docs/policies.md) |")
        lines.append("")
    return "\n".join(lines)


def policies_markdown() -> str:
    lines = []
    for p in policy_catalog():
        aliases = f" (aliases: {', '.join(f'`{a}`' for a in p['aliases'])})" if p["aliases"] else ""
        lines += [f"### `{p['name']}`{aliases}", "", _md(p["summary"]), ""]
        if p["params"]:
            lines += ["| parameter | meaning | allowed | unit | default |",
                      "| --- | --- | --- | --- | --- |"]
            for q in p["params"]:
                lines.append(f"| `{q['name']}` | {_md(q['help'])} | {_md(q['allowed'])} | "
                             f"{q['unit']} | {_md(q['default_text'])} |")
        else:
            lines.append("No parameters.")
        lines.append("")
    return "\n".join(lines)


def replace_block(text: str, begin: str, body: str) -> str:
    start = text.index(begin) + len(begin)
    end = text.index(DOC_END, start)
    return text[:start] + "\n\n" + body.rstrip() + "\n\n" + text[end:]


def _main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m schedlab.experiment")
    p.add_argument("--write-docs", metavar="FILE")
    p.add_argument("--write-policies", metavar="FILE")
    args = p.parse_args(argv)
    for path, begin, body in ((args.write_docs, DOC_BEGIN, reference_markdown),
                              (args.write_policies, POLICY_BEGIN, policies_markdown)):
        if path:
            text = Path(path).read_text()
            Path(path).write_text(replace_block(text, begin, body()))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())

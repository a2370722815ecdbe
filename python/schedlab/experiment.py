"""Experiment files: parse, validate, expand into runs.

An experiment file (TOML) has the sections [experiment], [workload], [machine], [[policy]],
[sweep], [report] and [quick]. Which spec key goes in which section comes from the Rust core
(`schedlab.spec.SPEC_SECTIONS`), so a key added there is accepted here without a change.
pydantic checks the structure (sections, unknown keys, types of the keys this module owns);
the core checks every value of every run, and its errors are mapped back to the path of the
key in the file (`workload.size`, `policy[2].quantum`, `sweep.workload.load`), so a bad file
gives one line naming what to fix, before anything is written.
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import itertools
import json
import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from schedlab._core import SpecError
from schedlab.spec import (
    CLASS_KEYS,
    SPEC_KEYS,
    SPEC_SECTIONS,
    find_policy,
    policy_catalog,
    spec_error,
)

WORLDS = ("sim", "server", "os")
PLOTS = ("response", "percentiles", "throughput", "fairness", "share", "classes", "cdf",
         "load", "gantt")
SECTIONS = ("experiment", "workload", "machine", "policy", "sweep", "report", "quick")
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


class ExperimentFields(Strict):
    """The keys of [experiment] that this module owns; the core's experiment and output keys
    (warmup, warmup_time, batches, ...) are added to the model at run time."""

    name: str | None = Field(None, description="name of the experiment; default the file name")
    world: Literal["sim", "server", "os"] | list[Literal["sim", "server", "os"]] = Field(
        "sim", description="where runs happen: sim (simulator), server (real file server), "
        "os (real Linux processes); a list runs every point in each world, same seeds, for "
        "side-by-side reports")
    description: str = Field("", description="one paragraph shown at the top of the report")
    seed: int = Field(1, ge=0, description="experiment seed; replication r of every point and "
                      "policy runs with a seed derived from (seed, r): common random numbers")
    replications: int = Field(1, ge=1, description="independent runs per sweep point and policy")
    confidence: float = Field(0.95, gt=0, lt=1, description="level of confidence intervals")
    keep_jobs: bool | Literal["first"] = Field(
        "first", description="store per-job tables: true (every run), \"first\" (replication 0 "
        "of each point and policy) or false")
    keep_schedule: bool | Literal["first"] = Field(
        False, description="store run segments for the Gantt chart (small runs only): true, "
        "\"first\" or false")
    job_rows: int = Field(100_000, ge=0, description="at most this many per-job rows stored per "
                          "run, an even systematic sample in arrival order; 0 = all")


class PolicyEntry(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str = Field(description="policy name or alias (`schedlab policies`)")
    label: str | None = Field(None, description="label in tables and plots; default from the "
                              "name and parameters")
    params: dict[str, Any] | None = Field(None, description="parameters as a table; or give "
                                          "them by name beside `name`")


class SweepFields(BaseModel):
    model_config = ConfigDict(extra="allow")
    mode: Literal["cartesian", "zip"] = Field(
        "cartesian", description="cartesian: every combination of the lists; zip: the i-th "
        "values of every list together (lists of equal length)")


class ReportFields(Strict):
    plots: list[Literal[PLOTS]] = Field(  # type: ignore[valid-type]
        list(PLOTS), description="plots to draw, in order: " + ", ".join(PLOTS))
    x: str | None = Field(None, description="sweep key on the x axis; default the first")
    x_label: str | None = Field(None, description="x-axis label; default the sweep key")
    log_x: bool = Field(False, description="logarithmic x axis")
    theory: bool = Field(True, description="draw closed forms where they exist")
    point: int | None = Field(None, description="sweep point (index) for the CDF, class, load "
                              "and Gantt plots; default the last")
    gantt_max_segments: int = Field(400, ge=1, description="a run is drawn as a Gantt chart "
                                    "only when it has at most this many run segments")
    gantt_runs: int = Field(6, ge=1, description="at most this many Gantt charts")
    title: str | None = Field(None, description="report title; default the experiment name")


@cache
def _models() -> dict[str, type[BaseModel]]:
    """pydantic models of every section, built from the core's key list."""

    def keys(section: str, skip: set[str]) -> dict[str, Any]:
        return {k: (Any, Field(None, description=SPEC_KEYS[k])) for k, s in SPEC_SECTIONS.items()
                if s == section and k not in skip}

    owned = set(ExperimentFields.model_fields)
    cls = create_model("WorkloadClass", __base__=Strict,
                       **{k: (Any, Field(None, description=h)) for k, h in CLASS_KEYS.items()})
    workload = keys("workload", {"classes"})
    if "classes" in SPEC_SECTIONS:
        workload["classes"] = (list[cls] | None, Field(None, description=SPEC_KEYS["classes"]))
    experiment = create_model("Experiment", __base__=ExperimentFields,
                              **keys("experiment", owned), **keys(OUTPUT_SECTION, owned))
    machine = create_model("Machine", __base__=Strict, **keys("machine", set()))
    workload_m = create_model("Workload", __base__=Strict, **workload)
    quick = create_model(
        "Quick", __base__=Strict,
        experiment=(dict[str, Any] | None, None), workload=(dict[str, Any] | None, None),
        machine=(dict[str, Any] | None, None), sweep=(dict[str, Any] | None, None),
        report=(dict[str, Any] | None, None))
    top = create_model(
        "ExperimentFile", __base__=Strict,
        experiment=(experiment, Field(default_factory=experiment)),
        workload=(workload_m, Field(default_factory=workload_m)),
        machine=(machine, Field(default_factory=machine)),
        policy=(list[PolicyEntry], Field(min_length=1)),
        sweep=(SweepFields, Field(default_factory=SweepFields)),
        report=(ReportFields, Field(default_factory=ReportFields)),
        quick=(quick | None, None),
    )
    return {"top": top, "experiment": experiment, "workload": workload_m, "machine": machine,
            "classes": cls, "quick": quick}


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
                  "workload.classes[1].tickets"},
        "report": fields(ReportFields),
        "quick": {s: f"overrides of [{s}] used by --quick" for s in
                  ("experiment", "workload", "machine", "sweep", "report")},
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
    if names and names[0] == "quick":
        names = names[1:]
    section = ".".join(names) if names else ""
    if section in keys:
        return f"a key of [{section}]: " + ", ".join(k for k in keys[section] if k != "SECTION.KEY")
    if not section:
        return "a section among " + ", ".join(f"[{s}]" for s in SECTIONS)
    return "a known key"


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


_UNION_TAG = re.compile(r"^(literal|list|dict|bool|int|float|str|function-\w+)(\[.*\])?$")


def _from_pydantic(e: ValidationError, prefix: tuple[Any, ...] = ()) -> SpecError:
    err = e.errors()[0]
    # Union members appear in the location as tags (literal['sim',...], list[...], bool):
    # the user wrote a key, not a type.
    loc = prefix + tuple(p for p in err["loc"] if not (isinstance(p, str) and _UNION_TAG.match(p)))
    value = err.get("input", "(missing)")
    if err["type"] == "missing":
        value = "(missing)"
    if err["type"] == "extra_forbidden":
        allowed = _allowed_keys(loc[:-1])
        return spec_error(_path(loc), _short(value), allowed)
    msg = err["msg"]
    for head in ("Input should be ", "Value should be ", "Value error, "):
        msg = msg.removeprefix(head)
    return spec_error(_path(loc), _short(value), msg)


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
    quick = raw.get("quick") or {}
    for section, table in quick.items():
        if section == "sweep" and isinstance(table, dict):
            for k in table:
                if k != "mode" and k not in sweep:
                    raise spec_error(f"quick.sweep.{k}", _short(table[k]),
                                     "a key of [sweep] (quick can only narrow a sweep)")
        if isinstance(table, dict):
            out[section] = _merge(out.get(section, {}), table)
    return out


@dataclass
class Run:
    """One run of one policy at one sweep point in one replication."""

    id: str
    world: str
    spec: dict[str, Any]  # flat: what `schedlab.simulate(**spec)` takes, seed included
    point: int
    coords: dict[str, Any]  # sweep path -> value at this point
    label: str
    policy: str
    policy_index: int
    replication: int
    seed: int


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

    @property
    def world(self) -> str:
        return self.worlds[0]

    @property
    def replications(self) -> int:
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
    else:
        path = Path(source)
        raw, base_dir, src = read_toml(path), path.resolve().parent, str(path)
    if not isinstance(raw, dict):
        raise spec_error("experiment", _short(raw), "a table of sections")
    top = _models()["top"]
    try:
        top.model_validate(raw)  # the file as written, [quick] included
    except ValidationError as e:
        raise _from_pydantic(e) from None
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
    worlds = config.experiment.world
    worlds = list(dict.fromkeys(worlds if isinstance(worlds, list) else [worlds]))
    if not worlds:
        raise spec_error("experiment.world", "[]", "at least one world")
    exp = Experiment(name=name, worlds=worlds, raw=raw, config=config,
                     base_dir=base_dir, source=src, quick=quick)
    if check_world:
        for w in worlds:
            world_runner(w)
    _expand(exp)
    return exp


# ---------------------------------------------------------------------------------------------
# Policies and sweep paths
# ---------------------------------------------------------------------------------------------


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _policies(config: Any) -> list[tuple[str, str, dict[str, Any], set[str]]]:
    """(label, canonical name, params, parameter names) of each [[policy]]."""
    out = []
    labels: set[str] = set()
    for i, entry in enumerate(config.policy):
        try:
            info = find_policy(entry.name)
        except SpecError as e:
            raise spec_error(f"policy[{i}].name", entry.name, e.allowed) from None
        names = {p["name"] for p in info["params"]}
        params = dict(entry.params or {})
        params.update(entry.model_extra or {})
        for k, v in params.items():
            if k not in names:
                allowed = ", ".join(sorted(names)) or "none"
                raise spec_error(f"policy[{i}].{k}", _short(v),
                                 f"a parameter of policy {info['name']} ({allowed}), or "
                                 "name, label, params")
        label = entry.label or " ".join(
            [info["name"].upper() if len(info["name"]) <= 5 else info["name"].capitalize()]
            + [f"{k}={_fmt(v)}" for k, v in params.items()])
        if label in labels:
            raise spec_error(f"policy[{i}].label", label, "a label no other policy has")
        labels.add(label)
        out.append((label, info["name"], params, names))
    return out


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
    allowed = [k for k, s in SPEC_SECTIONS.items()
               if (s == section or (section == "experiment" and s == OUTPUT_SECTION))
               and k != "seed" and s != OUTPUT_SECTION]
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
                raise spec_error(where, _short(value), f"an index below {len(cur or [])}")
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


def _points(config: Any, policies: list) -> tuple[list[SweepTarget], list[dict[str, Any]]]:
    sweep = dict(config.sweep.model_extra or {})
    targets = []
    for path, values in sweep.items():
        if not isinstance(values, list) or not values:
            raise spec_error(f"sweep.{path}", _short(values), "a non-empty list of values")
        targets.append(_sweep_target(path, policies, values))
    if not targets:
        return [], [{}]
    lists = [sweep[t.path] for t in targets]
    if config.sweep.mode == "zip":
        n = len(lists[0])
        for t, v in zip(targets, lists, strict=True):
            if len(v) != n:
                raise spec_error(f"sweep.{t.path}", _short(v),
                                 f"a list of {n} values, as long as the others (mode = zip)")
        combos = list(zip(*lists, strict=True))
    else:
        combos = list(itertools.product(*lists))
    return targets, [dict(zip([t.path for t in targets], c, strict=True)) for c in combos]


# ---------------------------------------------------------------------------------------------
# Expansion into runs
# ---------------------------------------------------------------------------------------------


def replication_seed(seed: int, replication: int) -> int:
    """The seed of replication r: the same for every point and policy (common random numbers),
    independent streams across replications (numpy's SeedSequence mixes the pair)."""
    return int(np.random.SeedSequence([seed, replication]).generate_state(1, np.uint32)[0])


def _resolve_files(value: Any, key: str, base: Path) -> Any:
    """Relative trace and empirical:FILE paths are relative to the experiment file."""
    if isinstance(value, str):
        if key == "trace" and not Path(value).is_absolute():
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
            if k == "trace":
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


def run_id(world: str, spec: dict[str, Any]) -> str:
    """A stable name of a run: hash of world, flat spec (seed included, storage keys not) and
    the contents of the files it reads, so an edited trace is a new run."""
    ident = {k: v for k, v in spec.items() if SPEC_SECTIONS.get(k) != OUTPUT_SECTION}
    files = {f: _file_digest(f) for f in _files_of(ident)}
    text = json.dumps({"world": world, "spec": ident, "files": files}, sort_keys=True,
                      default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _expand(exp: Experiment) -> None:
    config = exp.config
    policies = _policies(config)
    exp.labels = [p[0] for p in policies]
    targets, points = _points(config, policies)
    exp.sweep_keys = [t.path for t in targets]
    exp.points = points
    reserved = set(ExperimentFields.model_fields)
    base: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for section in ("workload", "machine", "experiment"):
        model = getattr(config, section)
        for k, v in model.model_dump(exclude_none=True).items():
            if section == "experiment" and k in reserved:
                continue
            if SPEC_SECTIONS.get(k) == OUTPUT_SECTION:
                continue  # storage policy: decided per run by the runner
            base[k] = v
            origin[k] = f"{section}.{k}"
    seeds = [replication_seed(config.experiment.seed, r) for r in range(exp.replications)]
    checked: dict[str, None] = {}
    runs: list[Run] = []
    for world, (pi, coords) in itertools.product(exp.worlds, enumerate(points)):
        spec_pt = copy.deepcopy(base)
        origin_pt = dict(origin)
        params_pt: dict[str, dict[str, Any]] = {p[0]: dict(p[2]) for p in policies}
        porigin: dict[str, dict[str, str]] = {
            p[0]: {k: f"policy[{i}].{k}" for k in p[2]} for i, p in enumerate(policies)}
        for t in targets:
            value = coords[t.path]
            where = f"sweep.{t.path}"
            if t.section == "policy":
                for label in t.labels:
                    params_pt[label][t.key] = value
                    porigin[label][t.key] = where
            else:
                spec_pt[t.key] = _set_nested(spec_pt.get(t.key), t.rest, value, where)
                origin_pt[t.key] = where
        for i, (label, name, _params, _names) in enumerate(policies):
            flat = {"policy": name, **params_pt[label],
                    **_resolve_files(spec_pt, "", exp.base_dir)}
            where = {**origin_pt, **porigin[label], "policy": f"policy[{i}].name"}
            key = json.dumps([world, flat], sort_keys=True, default=str)
            if key not in checked:
                _check_values(world, flat, where)
                checked[key] = None
            for r, seed in enumerate(seeds):
                spec = {**flat, "seed": seed}
                runs.append(Run(id=run_id(world, spec), world=world, spec=spec,
                                point=pi, coords=dict(coords), label=label, policy=name,
                                policy_index=i, replication=r, seed=seed))
    exp.runs = runs


def _check_values(world: str, flat: dict[str, Any], where: dict[str, str]) -> None:
    """The core validates the values; its key is mapped back to the path in the file."""
    validate = _world_validator(world)
    try:
        validate(**flat)
    except SpecError as e:
        key = e.key
        if key == "spec":  # a type the bindings could not convert: find which key it was
            key = _culprit(flat) or key
        base = re.split(r"[\[.]", key, maxsplit=1)[0]
        path = where.get(base)
        if path is None:
            section = SPEC_SECTIONS.get(base)
            path = f"{section}.{key}" if section and section != "policy" else key
        elif key != base:
            path = path + key[len(base):]
        value = flat.get(base, e.value) if key != e.key else e.value
        allowed = e.allowed
        if re.match(r"^[A-Za-z]+Error: ", allowed):  # a conversion error from the bindings
            allowed = f"a value of another type ({allowed})"
        raise spec_error(path, _short(value), allowed) from None


def _culprit(flat: dict[str, Any]) -> str | None:
    from schedlab.api import validate

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
# Worlds
# ---------------------------------------------------------------------------------------------

# Each world's module: run(spec) -> schedlab.results.Result, optionally validate(spec).
# Tasks carry the module name, so a worker process runs what the parent resolved (tests
# register stand-ins here).
WORLD_MODULES = {"sim": "schedlab.api", "server": "schedlab.server", "os": "schedlab.osrun"}


def world_module(world: str) -> str:
    name = WORLD_MODULES.get(world)
    if name is None:
        raise spec_error("experiment.world", world, "one of " + ", ".join(WORLDS))
    return name


def world_runner(world: str, module_name: str | None = None) -> Any:
    """The function that runs one flat spec in a world and returns a schedlab Result."""
    module_name = module_name or world_module(world)
    if module_name == "schedlab.api":
        from schedlab.api import simulate

        return simulate
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise spec_error("experiment.world", world,
                         f"a world whose module is installed ({module_name}: {e})") from None
    run = getattr(module, "run", None)
    if run is None:
        raise spec_error("experiment.world", world, f"a world whose module {module_name} "
                         "has run(spec)")

    def call(**spec: Any) -> Any:
        return run(spec)

    return call


def _world_validator(world: str) -> Any:
    from schedlab.api import validate

    name = world_module(world)
    if name == "schedlab.api":
        return validate
    module = importlib.import_module(name)
    own = getattr(module, "validate", None)
    if own is None:
        return validate

    def call(**spec: Any) -> Any:
        return own(spec)

    return call


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
            lines += ["| parameter | meaning | allowed | default |", "| --- | --- | --- | --- |"]
            for q in p["params"]:
                lines.append(f"| `{q['name']}` | {_md(q['help'])} | {_md(q['allowed'])} | "
                             f"{_md(str(q['default']))} |")
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

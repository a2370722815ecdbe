"""What every `schedlab` command shares: one-line errors, flags made from the vocabulary (so a
flag, a TOML key and a Python keyword are one name), `--class 'k=v ...'` tables, policy
parameter flags and `--spec FILE.toml` one-run files."""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path
from typing import Any, NoReturn

from schedlab.vocabulary import (
    CLASS_KEYS,
    KEYS,
    UNIT_SYMBOLS,
    Params,
    as_dist,
    param_value,
    policy_catalog,
    quoted,
    spec_error,
    unit_text,
)


class Parser(argparse.ArgumentParser):
    """Errors in one line, exit code 2. No abbreviated flags: `--batch 5` (a workload key
    with no flag) must not silently become `--batches 5`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    # Says what an argument no command took is (set by the command line, which knows the
    # worlds): None leaves argparse's "unrecognized arguments".
    unknown_flag: Any = None

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:  # type: ignore[override]
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            said = self.unknown_flag and self.unknown_flag(getattr(parsed, "command", None),
                                                           extra)
            self.error(said or f"unrecognized arguments: {' '.join(extra)}")
        return parsed

    def error(self, message: str) -> NoReturn:
        # "schedlab: error:" as every other refusal says, not "schedlab sim: error:".
        print(f"{self.prog.split()[0]}: error: {_as_key(message)}", file=sys.stderr)
        sys.exit(2)


# argparse's "argument --jobs: invalid int value: '1e3'" in the project's words: the key,
# the value, what is allowed.
_ARGPARSE_TYPE = re.compile(r"^argument ((?:--)?[\w-]+)[^:]*: invalid (int|float) value: '(.*)'$")
_ARGPARSE_CHOICE = re.compile(r"^argument ((?:--)?[\w-]+)[^:]*: invalid choice: '(.*)' "
                              r"\(choose from (.*)\)$")


def _as_key(message: str) -> str:
    if m := _ARGPARSE_TYPE.match(message):
        key = m[1].removeprefix("--").replace("-", "_")
        return f"{key} = {m[3]}: expected {'a whole number' if m[2] == 'int' else 'a number'}"
    if m := _ARGPARSE_CHOICE.match(message):
        key = m[1].removeprefix("--").replace("-", "_")
        return f"{key} = {m[2]}: expected one of {m[3].replace(chr(39), '')}"
    return message


def flag_params(args: argparse.Namespace) -> dict[str, Any]:
    """The policy parameters given by flag (`add_policy_param_flags`), each flag's text read
    as its value (3, not "3": what was typed was a number)."""
    return {name[len("param_"):]: param_value(name[len("param_"):], value, text=True)
            for name, value in vars(args).items()
            if name.startswith("param_") and value is not None}


def progress_bar(total: int, what: str, enabled: bool | None = None) -> Any:
    """A rich progress bar on stderr (bar, done/total, elapsed, ETA) for work longer than about
    a second; nothing when stderr is not a terminal (`enabled` None) or when disabled. Use
    `bar.add_task(what, total=total)` and `bar.advance(task)` inside `with progress_bar(...)
    as bar`, guarding on `bar is not None`."""
    import contextlib

    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        return contextlib.nullcontext(None)
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(TextColumn(f"[bold]{what}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                    console=Console(stderr=True), transient=False)


def status(message: str, enabled: bool | None = None) -> Any:
    """A spinner with a message on stderr while something waits; nothing off a terminal."""
    import contextlib

    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        return contextlib.nullcontext(None)
    from rich.console import Console

    return Console(stderr=True).status(message)


def flag(key: str) -> str:
    return f"--{key.replace('_', '-')}"


def cpus_arg(text: str) -> Any:
    """A count (4) or a CPU list as written (0,1 or 0-3); the worlds read the list."""
    # A signed number is a count too, so that -2 is refused as a count, not read as a range.
    return int(text) if text.strip().lstrip("-").isdigit() else text


def int_or_auto(text: str) -> Any:
    """A whole number, or the word auto (kept as text; the key's check names what is allowed)."""
    return int(text) if text.strip().lstrip("-").isdigit() else text.strip()


def dist_arg(text: str) -> Any:
    """A distribution as written, or a bare number: a constant, as `size = 20` in a file and
    `size=20` in Python are (`vocabulary.as_dist`)."""
    try:
        return as_dist(float(text))
    except ValueError:
        return text


_TYPES = {"str": str, "dist": dist_arg, "int": int, "float": float, "cpus": cpus_arg,
          "int|auto": int_or_auto}


def _help(text: str) -> str:
    """A vocabulary text as argparse help, which formats it with % (a "95% interval")."""
    return text.replace("%", "%%")


def add_key_flags(parser: argparse.ArgumentParser, keys: list[str],
                  skip: tuple[str, ...] = ()) -> None:
    """One flag per key (`--context-switch` is `context_switch`), grouped by section, typed
    by the key's form. Tables (params, classes, catalogues) have flags of their own."""
    groups: dict[str, Any] = {}
    for name in keys:
        k = KEYS[name]
        if name in skip or k.form in ("table", "tables"):
            continue
        group = groups.setdefault(k.section, parser.add_argument_group(f"{k.section} keys"))
        if k.form == "bool":
            group.add_argument(flag(name), action=argparse.BooleanOptionalAction, default=None,
                               help=_help(k.help))
        elif name == "policy":
            # Repeatable (`--policy fcfs --policy srpt`), as a list is (`--policy fcfs,srpt`):
            # never the last one silently.
            group.add_argument(flag(name), action="append", metavar="POLICY[,POLICY...]",
                               help=_help(k.help) + "; several (repeated or comma-separated, "
                               "NAME:PARAM=VALUE for parameters) are compared on one workload")
        else:
            # The form's type in capitals, a word to type as it is: INT|auto (AUTO was refused).
            metavar = "|".join(part if part == "auto" else part.upper()
                               for part in k.form.split("|"))
            group.add_argument(flag(name), type=_TYPES[k.form], metavar=metavar,
                               help=key_help(name))


def key_help(name: str) -> str:
    """A key's help as its flag shows it: the vocabulary's text with its unit, where the text
    does not say it (--timeslice: ms of service; --size: a distribution of ms of service)."""
    k = KEYS[name]
    unit = unit_text(k.unit) if k.form in ("int", "float", "dist") else ""
    said = not UNIT_SYMBOLS.get(k.unit) or unit in k.help
    return _help(k.help if said else f"{k.help} ({unit})")


def add_policy_param_flags(parser: argparse.ArgumentParser, title: str,
                           work: str = "ms of service") -> None:
    """One `--PARAM` flag per parameter of any policy (dest `param_NAME`), in a group of its
    own, with its unit (`work`: what work counts in this world). No parameter shares a name
    with a key (the core checks), so none shadows a flag."""
    seen: set[str] = set()
    group = parser.add_argument_group(title)
    for info in policy_catalog():
        for param in info["params"]:
            if param["name"] in seen:
                continue
            seen.add(param["name"])
            group.add_argument(flag(param["name"]), dest=f"param_{param['name']}",
                               metavar=param["kind"].upper(),
                               help=_help(f"{param['help']} "
                                          f"({unit_text(param['unit'], work)})"))


def _class_value(key: str, value: str) -> Any:
    form = CLASS_KEYS[key].form
    try:
        if form == "int":
            return int(value)
        if form == "float":
            return float(value)
        if form == "cpus":
            return value  # the world reads the CPU list, and names it as typed
    except ValueError:
        kind = "a whole number" if form == "int" else "a number"
        raise argparse.ArgumentTypeError(f"class field {key}={value}: expected {kind}") \
            from None
    return value


def class_arg(allowed: tuple[str, ...] | None = None) -> Any:
    """`--class 'name=big fraction=0.2 size=exp:10 priority=1 affinity=0,1'` as a table,
    values typed by the class keys' forms."""
    names = allowed or tuple(CLASS_KEYS)

    def parse(text: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for part in text.split():
            key, sep, value = part.partition("=")
            if not sep or key not in names:
                raise argparse.ArgumentTypeError(
                    f"class field '{part}': expected key=value with key one of "
                    f"{', '.join(names)}")
            if key in out:  # the last one won, without a word
                raise argparse.ArgumentTypeError(
                    f"class field '{part}': expected each field once ({key} is given twice)")
            if not value:
                raise argparse.ArgumentTypeError(f"class field '{part}': expected a value")
            out[key] = _class_value(key, value)
        return out

    return parse


def load_toml(path: str | Path) -> dict[str, Any]:
    """A one-run spec file: top-level keys, a [params] table, [[classes]]."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise spec_error("spec", path, "an existing TOML file") from None
    except IsADirectoryError:
        raise spec_error("spec", path, "a TOML file, not a directory") from None
    except OSError as e:
        raise spec_error("spec", path, f"a readable TOML file ({e.strerror})") from None
    except UnicodeDecodeError:
        raise spec_error("spec", path, "a TOML file (text in UTF-8; this one is not)") from None
    except tomllib.TOMLDecodeError as e:
        raise spec_error("spec", path, f"valid TOML ({e})") from None


def spec_from_args(args: argparse.Namespace, keys: list[str]) -> dict[str, Any]:
    """A flat spec from `--spec FILE` (if any), then the key flags, the class tables and the
    policy parameter flags on top. A policy's parameters in the file (its `params`, inline in
    its policy, by name) are the file's; the command line's (inline in `--policy`, flags)
    override them, as every flag overrides the file's key. In each, a parameter given two
    ways with two values is refused, as in Python (`flat_spec`)."""
    given = getattr(args, "spec", None)
    if given is not None and not given.strip():
        raise spec_error("spec", quoted(given), "a TOML file of one run's keys")
    spec: dict[str, Any] = load_toml(given) if given else {}
    if "experiment" in spec or "workload" in spec:
        # An experiment file: its tables would each be refused as an unknown key, at length.
        raise spec_error("spec", args.spec, "a flat file of one run's keys (load = 0.9, ...); "
                         "an experiment file, with [experiment] and [workload] tables, runs "
                         "with `schedlab run FILE`")
    in_file = Params()
    params = spec.pop("params", None) or {}
    if not isinstance(params, dict):
        raise spec_error("params", params, "a table of the policy's parameters (name = value)")
    in_file.give(params, "the --spec file's params")
    if "policy" in spec:
        spec["policy"] = in_file.of_policy(spec["policy"], "the --spec file's policy")
    names = {q["name"] for p in policy_catalog() for q in p["params"]} - set(KEYS)
    in_file.give({k: spec.pop(k) for k in list(spec) if k in names}, "the --spec file")
    for key in keys:
        value = getattr(args, key, None)
        if key == "policy" and isinstance(value, list):
            value = ",".join(value)  # repeated: a comparison
        if value is not None:
            spec[key] = value
    if getattr(args, "classes", None):
        spec["classes"] = args.classes
    on_line = Params()
    if getattr(args, "policy", None) is not None:
        spec["policy"] = on_line.of_policy(spec["policy"], f"--policy {spec['policy']}")
    on_line.give(flag_params(args), "its flag")
    params = {**in_file.values, **on_line.values}
    if params:
        spec["params"] = params
    return spec

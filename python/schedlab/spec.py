"""From keyword arguments, CLI flags or a TOML table to the one spec dict the core validates.

The core (Rust) is the single validator; this module only sorts keys into spec keys and policy
parameters, so that a misspelt key gets a message listing both.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from schedlab import _core
from schedlab._core import SpecError

SPEC_KEYS: dict[str, str] = {name: help for name, _section, _kind, help in _core.SPEC_KEYS}
# The section of an experiment file each key belongs to: workload, machine, policy, ...
SPEC_SECTIONS: dict[str, str] = {name: section for name, section, _k, _h in _core.SPEC_KEYS}
# The kind of value: str, int, float, bool, dist, table (params), classes.
SPEC_KINDS: dict[str, str] = {name: kind for name, _section, kind, _help in _core.SPEC_KEYS}
CLASS_KEYS: dict[str, str] = dict(_core.CLASS_KEYS)
DIST_KEYS = ("arrival", "size", "think")


def spec_error(key: str, value: Any, allowed: str) -> SpecError:
    """A SpecError like the core's: key, value given, what is allowed."""
    err = SpecError(f"{key} = {value}: expected {allowed}")
    err.key, err.value, err.allowed = key, str(value), allowed
    return err


def policy_catalog() -> list[dict[str, Any]]:
    return _core.policies()


def add_policy_param_flags(parser: Any, title: str, skip: Any = ()) -> None:
    """One `--PARAM` flag per parameter of any policy (dest `param_NAME`), in an argument group
    of its own; names in `skip` are left to the caller. Shared by sim, serve and os."""
    seen: set[str] = set(skip)
    group = parser.add_argument_group(title)
    for info in policy_catalog():
        for param in info["params"]:
            if param["name"] in seen:
                continue
            seen.add(param["name"])
            group.add_argument(f"--{param['name'].replace('_', '-')}",
                               dest=f"param_{param['name']}", metavar=param["kind"].upper(),
                               help=param["help"])


def find_policy(name: str) -> dict[str, Any]:
    wanted = name.lower()
    for p in policy_catalog():
        if p["name"] == wanted or wanted in p["aliases"]:
            return p
    names = ", ".join(p["name"] for p in policy_catalog())
    raise spec_error("policy", name, f"one of {names}")


def _as_dist(key: str, value: Any) -> Any:
    # A bare number is a constant: size=20 means det:20.
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return f"det:{value}"
    return value


def build_spec(policy: Any = "fcfs", **kwargs: Any) -> dict[str, Any]:
    """Sorts keyword arguments into the spec and the policy's parameters.

    `policy` is a name or a policy object from `schedlab.policies` (which carries its params).
    """
    params: dict[str, Any] = {}
    if hasattr(policy, "name") and hasattr(policy, "params"):
        params.update(policy.params)
        policy = policy.name
    info = find_policy(str(policy))
    param_names = {p["name"] for p in info["params"]}
    spec: dict[str, Any] = {"policy": info["name"]}
    for key, value in kwargs.items():
        if value is None:
            continue
        if key == "params":
            params.update(value)
        elif key in SPEC_KEYS:
            spec[key] = _as_dist(key, value) if key in DIST_KEYS else value
        elif key in param_names:
            params[key] = value
        else:
            allowed = (
                f"a spec key ({', '.join(SPEC_KEYS)}) or a parameter of policy {info['name']} "
                f"({', '.join(sorted(param_names)) or 'none'})"
            )
            raise spec_error(key, value, allowed)
    if params:
        spec["params"] = {k: _param_value(k, v) for k, v in params.items()}
    if "classes" in spec:
        spec["classes"] = [
            {k: (_as_dist(k, v) if k == "size" else v) for k, v in c.items()}
            for c in spec["classes"]
        ]
    return spec


def _param_value(key: str, value: Any) -> Any:
    if isinstance(value, bool | int | float):
        return value
    if isinstance(value, list | tuple):
        return [float(v) for v in value]
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "yes", "on"):
            return True
        if text in ("false", "no", "off"):
            return False
        try:
            parts = [float(p) for p in text.split(",")]
        except ValueError:
            raise spec_error(key, value, "a number, a list of numbers or true/false") from None
        return parts[0] if len(parts) == 1 else parts
    raise spec_error(key, value, "a number, a list of numbers or true/false")


def load_toml(path: str | Path) -> dict[str, Any]:
    """Reads a one-run spec file: top-level spec keys, a [params] table, [[classes]]."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise spec_error("spec", path, "an existing TOML file") from None
    except tomllib.TOMLDecodeError as e:
        raise spec_error("spec", path, f"valid TOML ({e})") from None

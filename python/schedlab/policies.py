"""Policies as objects: `schedlab.policies.RR(quantum=10)`, generated from the core's catalogue
so that a new policy needs no Python change."""

from __future__ import annotations

import copy
from typing import Any

from schedlab.command import callable_module
from schedlab.vocabulary import parse_policies, policy_catalog, spec_error

# Policies written on one line (`fcfs,srpt,rr:quantum=5`): the vocabulary reads them.
parse = parse_policies


class Policy:
    """A policy name with its parameters; pass it as `policy=` to `schedlab.simulate`."""

    name: str = ""
    param_names: tuple[str, ...] = ()

    def __init__(self, **params: Any) -> None:
        for key, value in params.items():
            if key not in self.param_names:
                allowed = ", ".join(self.param_names) or "no parameters"
                raise spec_error(key, value, f"a parameter of policy {self.name}: {allowed}")
        self.params = params

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({args})"


def _class_name(name: str) -> str:
    return name.upper() if len(name) <= 5 else name.capitalize()


def label(name: str, params: dict[str, Any]) -> str:
    """How tables and plots name a policy with its parameters: `RR quantum=5`, `Lottery`."""
    return " ".join([_class_name(name)] + [f"{k}={_written(v)}" for k, v in params.items()])


def _written(value: Any) -> str:
    """A number as a user writes it (5, not 5.0), a list as the command line takes it."""
    if isinstance(value, list | tuple):
        return ",".join(_written(v) for v in value)
    if isinstance(value, bool):  # as TOML and the command line write it
        return "true" if value else "false"
    return f"{value:g}" if isinstance(value, float) else str(value)




__all__ = ["Policy"]
for _info in policy_catalog():
    _cls = type(
        _class_name(_info["name"]),
        (Policy,),
        {
            "name": _info["name"],
            "param_names": tuple(p["name"] for p in _info["params"]),
            "__doc__": _info["summary"],
        },
    )
    globals()[_cls.__name__] = _cls
    __all__.append(_cls.__name__)


def catalog() -> list[dict[str, Any]]:
    """`schedlab policies` from Python (as `schedlab.policies()`): every policy with its
    aliases, summary and parameters (name, unit, allowed values, typed default), as
    `schedlab policies --json` prints them. A copy: changing it changes nothing else."""
    return copy.deepcopy(policy_catalog())


callable_module(__name__, catalog)

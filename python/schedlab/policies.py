"""Policies as objects: `schedlab.policies.RR(quantum=10)`, generated from the core's catalogue
so that a new policy needs no Python change."""

from __future__ import annotations

from typing import Any

from schedlab.vocabulary import policy_catalog, spec_error


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

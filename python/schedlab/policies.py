"""Policies as objects: `schedlab.policies.RR(quantum=10)`, generated from the core's catalogue
so that a new policy needs no Python change."""

from __future__ import annotations

from typing import Any

from schedlab.vocabulary import find_policy, param_value, policy_catalog, spec_error


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
    return " ".join([_class_name(name)] + [f"{k}={f'{v:g}' if isinstance(v, float) else v}"
                                           for k, v in params.items()])


def parse(text: str) -> list[tuple[str, dict[str, Any]]]:
    """Policies written on one line, as `--policy` takes them: `fcfs,srpt,rr:quantum=5`, a
    parameter after a colon (several: `mlfq:levels=3:boost_period=100`); a list value goes
    on after commas (`mlfq:quanta=1,2,4,rr`: numbers continue the value before them).
    Returns (canonical name, parameters) pairs; unknown names and parameters are refused."""
    out: list[tuple[str, dict[str, Any]]] = []
    last: str | None = None
    for piece in (p.strip() for p in text.split(",")):
        if last is not None and _is_number(piece):
            name, params = out[-1]
            before = params[last]
            params[last] = [*(before if isinstance(before, list) else [before]),
                            param_value(last, piece)]
            continue
        if not piece:
            raise spec_error("policy", text, "policy names separated by commas, e.g. "
                             "fcfs,srpt,rr:quantum=5")
        head, *rest = piece.split(":")
        info = find_policy(head)
        names = {q["name"] for q in info["params"]}
        params: dict[str, Any] = {}
        last = None
        for item in rest:
            key, sep, value = item.partition("=")
            if not sep or key not in names:
                allowed = ", ".join(sorted(names)) or "none"
                raise spec_error("policy", piece, f"NAME:PARAM=VALUE with PARAM a parameter of "
                                 f"{info['name']} ({allowed})")
            params[key] = param_value(key, value)
            last = key
        out.append((info["name"], params))
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


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

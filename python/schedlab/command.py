"""Commands of `schedlab` that are modules in Python: `schedlab.report(DIR)`,
`schedlab.quickstart()`, `schedlab.policies()` call the module of that name."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from types import FunctionType, ModuleType
from typing import Any


def callable_module(name: str, command: Callable[..., Any]) -> None:
    """Makes module `name` callable as `command`: `schedlab.report(DIR)` runs `schedlab report
    DIR`. A function of the command's name in the package would not do: importing the
    module of the same name (`schedlab.report`) replaces the package's attribute with it."""

    class Command(ModuleType):
        __call__ = staticmethod(_named(command, name))

    module = sys.modules[name]
    module.__class__ = Command
    signature = inspect.signature(command)
    module.__signature__ = signature  # inspect would drop its first parameter
    summary = (command.__doc__ or "").strip().split("\n\n")[0]
    module.__doc__ = (f"{module.__doc__ or ''}\n\nCalled, `{name}{signature}` is "
                      f"`{command.__name__}`: {summary}")


def _named(command: Callable[..., Any], name: str) -> Callable[..., Any]:
    """`command` under the name a user called: a wrong argument says `schedlab.report()
    got an unexpected keyword argument`, not `make_report()` (Python names the function's
    qualified name). A copy, so that `command` keeps its own name where it is called as
    itself."""
    if not isinstance(command, FunctionType):
        return command
    public = FunctionType(command.__code__, command.__globals__, name.rpartition(".")[2],
                          command.__defaults__, command.__closure__)
    public.__kwdefaults__ = command.__kwdefaults__
    public.__dict__.update(command.__dict__)
    public.__doc__ = command.__doc__
    public.__annotations__ = command.__annotations__
    public.__qualname__ = name
    public.__module__ = command.__module__
    return public

"""Commands of `schedlab` that are modules in Python: `schedlab.report(DIR)`,
`schedlab.quickstart()`, `schedlab.policies()` call the module of that name."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any


def callable_module(name: str, command: Callable[..., Any]) -> None:
    """Makes module `name` callable as `command`: `schedlab.report(DIR)` runs `schedlab report
    DIR`. A function of the command's name in the package would not do: importing the
    module of the same name (`schedlab.report`) replaces the package's attribute with it."""

    class Command(ModuleType):
        __call__ = staticmethod(command)

    module = sys.modules[name]
    module.__class__ = Command
    signature = inspect.signature(command)
    module.__signature__ = signature  # inspect would drop its first parameter
    summary = (command.__doc__ or "").strip().split("\n\n")[0]
    module.__doc__ = (f"{module.__doc__ or ''}\n\nCalled, `{name}{signature}` is "
                      f"`{command.__name__}`: {summary}")

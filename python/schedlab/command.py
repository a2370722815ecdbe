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
    module.__signature__ = inspect.signature(command)  # inspect would drop its first parameter

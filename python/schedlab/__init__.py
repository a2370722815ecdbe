"""schedlab: a laboratory for scheduling policies.

    import schedlab
    r = schedlab.simulate(policy="rr", quantum=10, arrival="exp:21", size="det:20", jobs=200_000)
    r.summary["response_mean"], r.jobs.head()
"""

from __future__ import annotations

import os as _os
from importlib import import_module
from typing import TYPE_CHECKING, Any

# numpy's and scipy's OpenBLAS start a thread per core that spins after each call: schedlab's
# few small fits gain nothing from it, and the spinning takes a core from the simulator and
# from the real worlds' measurements (a fifth of the CPU of a batch of short runs, issue 12).
# Set before numpy loads; a value the user set wins.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from schedlab._core import SpecError  # noqa: E402

if TYPE_CHECKING:
    from schedlab import policies, quickstart, report, theory
    from schedlab.api import load_results, run, simulate, validate
    from schedlab.api import os as os  # re-exported, left out of __all__ (below)
    from schedlab.calibration import calibrate
    from schedlab.results import Result
    from schedlab.server import Server, load, serve

# Every command of `schedlab` by its name (`sim` is `simulate`; `report`, `quickstart` and
# `policies` are callable modules). `os` is left out of `*`: it would shadow the standard
# library's.
__all__ = ["simulate", "validate", "run", "load_results", "calibrate", "serve", "load",
           "policies", "theory", "report", "quickstart", "Result", "Server", "SpecError"]
__version__ = "0.1.0"

# The API is imported on first use (PEP 562), so the command line starts without pandas and
# scipy (issue 12). Name -> the module that defines it; None for a submodule.
_LAZY = {"simulate": "schedlab.api", "validate": "schedlab.api", "run": "schedlab.api",
         "os": "schedlab.api",
         "load_results": "schedlab.api", "calibrate": "schedlab.calibration",
         "serve": "schedlab.server", "load": "schedlab.server", "Server": "schedlab.server",
         "Result": "schedlab.results", "policies": None, "theory": None, "report": None,
         "quickstart": None}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        # Every submodule the docs name (`schedlab.trace.write_trace`, `schedlab.stats`...)
        # works after `import schedlab` alone, as a package's attributes would.
        from importlib.util import find_spec

        if name.startswith("_") or find_spec(f"schedlab.{name}") is None:
            raise AttributeError(f"module 'schedlab' has no attribute {name!r}")
        value = import_module(f"schedlab.{name}")
        globals()[name] = value
        return value
    source = _LAZY[name]
    value = import_module(f"schedlab.{name}") if source is None else \
        getattr(import_module(source), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted((set(globals()) - {"_os"}) | set(__all__) | {"os"})

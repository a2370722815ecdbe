"""The launcher process of the os world: `python -I -S launcher.py PATH_TO_CORE_SO PARENT_PID`.

It reads a plan (JSON) on stdin, runs it with the Rust coordinator and writes the result (JSON)
on stdout. It is started fresh for every run, in a new session, and loads only the native
extension, straight from its file: importing the `schedlab` package would import numpy, whose
thread pool would make this process multi-threaded, and the coordinator forks its workers,
which is only safe from a single-threaded process. Nothing here may import numpy or pandas.
"""

import importlib.machinery
import importlib.util
import sys


def die_with_parent(parent: int) -> None:
    """SIGKILL when the process that started the run exits, whatever kills it; the coordinator
    in this process takes its workers along (theirs is PR_SET_PDEATHSIG too). The same as
    schedlab.lifetime, written out: this process may not import the package."""
    import ctypes
    import os
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)


def name_workers() -> None:
    """This process and the workers it forks are `schedlab-os` in ps, top and the kernel's
    trace (schedlab.osrun.ktrace filters its event on the name)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(15, b"schedlab-os", 0, 0, 0)  # PR_SET_NAME


def main() -> int:
    path = sys.argv[1]
    if len(sys.argv) > 2:
        die_with_parent(int(sys.argv[2]))
    name_workers()
    loader = importlib.machinery.ExtensionFileLoader("schedlab._core", path)
    spec = importlib.util.spec_from_file_location("schedlab._core", path, loader=loader)
    core = importlib.util.module_from_spec(spec)
    loader.exec_module(core)
    plan = sys.stdin.read()
    out = core.os_run(plan)
    sys.stdout.write(out)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

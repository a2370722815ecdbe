"""Every process schedlab starts dies with the process that started it, whatever kills that one
(kill -9, a closed terminal, `timeout`): the kernel sends it SIGKILL when its parent exits
(PR_SET_PDEATHSIG), and a parent already gone before the request took effect shows as a changed
parent pid. Sweep workers call `die_with_parent` as they start; a process started with
`child_env()` calls it with no argument and finds its parent's pid in its environment."""

from __future__ import annotations

import os
import sys
from pathlib import Path

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
ENV = "SCHEDLAB_DIE_WITH"


def die_with_parent(parent: int | None = None) -> None:
    """Dies (SIGKILL) when the parent process exits; exits at once if it already has.
    `parent` None: the pid in $SCHEDLAB_DIE_WITH, or nothing to do when it is not set."""
    if parent is None:
        text = os.environ.get(ENV, "")
        if not text.isdigit():
            return
        parent = int(text)
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def alive(pid: int) -> bool:
    """Running or sleeping; a zombie (dead, not yet reaped) is gone; unreadable: alive."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a child that must die with this process (see die_with_parent)."""
    return {**(os.environ if env is None else env), ENV: str(os.getpid())}

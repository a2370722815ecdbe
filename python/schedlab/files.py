"""Files a run writes: atomically (a reader, or a sweep resumed after kill -9, sees the whole
file or none of it) and checked before any work starts. Light: no pandas, so the command line
checks its outputs before it imports anything heavy."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from schedlab.vocabulary import quoted, spec_error

TABLE_SUFFIXES = (".csv", ".parquet")

# The tables a simulation writes when asked: `--jobs-out FILE` on the command line,
# `jobs_out=FILE` in Python (`schedlab.simulate`; `schedlab.os` and `schedlab os` have jobs
# and tasks), each one KEY_out.
TABLE_OUTPUTS = {
    "jobs": "the per-job table",
    "schedule": "every run segment (cpu, job, task, start, end)",
    "tasks": "the per-task table (response, migrations, CPU share against entitlement)",
    "loads": "the load distribution (runnable jobs per runqueue: time and completion shares)",
    "load_series": "the runnable jobs of each runqueue over time (needs --load-sample)",
}


def not_empty(key: str, path: Any) -> None:
    """An output given an empty path: refused, not taken for "not given" (which wrote nothing
    and said nothing)."""
    if isinstance(path, str) and not path.strip():
        raise spec_error(key, quoted(path), "a file's path")


def check_outputs(outputs: dict[str, Any], trace_out: Any = None,
                  load_sample: Any = None) -> None:
    """Refuses, before any work, the tables of `outputs` ({table: path or None}) that could not
    be written: an empty path, one `check_writable` refuses, two outputs to one file, the
    trace's included (the second would overwrite the first), or the load series without
    `load_sample`. The trace's own checks are `schedlab.trace.check_trace_out`'s."""
    seen: dict[str, str] = {}
    named = [(f"{k}_out", v) for k, v in outputs.items()] + [("trace_out", trace_out)]
    for key, path in named:
        not_empty(key, path)
        if path is None:
            continue
        if key != "trace_out":
            check_writable(key, path)
        real = os.path.realpath(path)
        if real in seen:
            raise spec_error(key, path, f"a file of its own ({seen[real]} writes it too)")
        seen[real] = key
    if outputs.get("load_series") and load_sample is None:
        raise spec_error("load_series_out", outputs["load_series"], "load_sample too (the "
                         "series is the runqueues sampled every load_sample ms: --load-sample)")


@contextlib.contextmanager
def atomic_file(path: str | Path) -> Iterator[Path]:
    """A temporary path beside `path`, renamed onto it when the block ends without error (and
    removed otherwise): a reader, or a sweep resumed after kill -9, sees the whole file or
    none. The file gets the permissions of any new file (0666 less the umask), not mkstemp's
    private 0600."""
    path = Path(path)
    made = make_parent(path)
    try:
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except BaseException:
        unmake(made)
        raise
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        unmake(made)
        raise


def make_parent(path: str | Path) -> list[Path]:
    """Makes a file's missing directories, when there is something to write (every output
    does: `check_writable` found before any work that they can be made); returns those it
    made, outermost first, for `unmake` if the file is not written after all."""
    made = []
    parent = Path(path).parent
    while not (parent.exists() or parent.is_symlink()) and parent != parent.parent:
        made.append(parent)
        parent = parent.parent
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return made[::-1]


def unmake(made: list[Path]) -> None:
    """Removes the directories `make_parent` made, innermost first, where they are still
    empty: a file that was not written leaves nothing behind."""
    for d in reversed(made):
        with contextlib.suppress(OSError):
            d.rmdir()


def check_writable(key: str, path: str | Path, suffixes: tuple[str, ...] = TABLE_SUFFIXES,
                   kind: str = "") -> None:
    """Refuses, before any work, an output that could not be written: a name without one of
    `suffixes` (a table's .csv or .parquet by default; `()`: any name), a directory's name, or
    a directory that does not take new files. A missing directory is made when the file is
    written (`make_parent`), so here its nearest existing ancestor must be a directory that
    takes new ones; nothing is made now (a run refused later leaves nothing behind)."""
    if not isinstance(path, str | os.PathLike):
        raise spec_error(key, repr(path), f"a file's path (given: {type(path).__name__})")
    given = str(path) or '""'  # Path("") reads as "."
    path = Path(path)
    if suffixes and path.suffix.lower() not in suffixes:
        raise spec_error(key, given, f"a file name ending in {' or '.join(suffixes)}"
                         + (f" ({kind})" if kind else ""))
    if path.is_dir():
        raise spec_error(key, given, "a file to write (a directory of that name is there)")
    parent = path.parent
    existing = parent
    # A link to nothing is there too: a directory cannot be made in its place.
    while not (existing.exists() or existing.is_symlink()) and existing != existing.parent:
        existing = existing.parent
    missing = existing != parent
    if not existing.is_dir():
        what = "a link to nothing" if not existing.exists() else "a file"
        raise spec_error(key, given, f"a file in a directory ({existing} is {what})")
    try:
        fd, probe = tempfile.mkstemp(dir=existing, prefix=f".{path.name}.", suffix=".probe")
    except OSError as e:
        where = "a directory that can be made" if missing else "a directory you can write"
        raise spec_error(key, given, f"a file in {where} ({e.strerror})") from None
    os.close(fd)
    os.unlink(probe)

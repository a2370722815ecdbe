"""Files a run writes: atomically (a reader, or a sweep resumed after kill -9, sees the whole
file or none of it) and checked before any work starts. Light: no pandas, so the command line
checks its outputs before it imports anything heavy."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from schedlab.vocabulary import spec_error

TABLE_SUFFIXES = (".csv", ".parquet")


@contextlib.contextmanager
def atomic_file(path: str | Path) -> Iterator[Path]:
    """A temporary path beside `path`, renamed onto it when the block ends without error (and
    removed otherwise): a reader, or a sweep resumed after kill -9, sees the whole file or
    none. The file gets the permissions of any new file (0666 less the umask), not mkstemp's
    private 0600."""
    path = Path(path)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
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
        raise


def check_writable(key: str, path: str | Path, suffixes: tuple[str, ...] = TABLE_SUFFIXES,
                   kind: str = "", make_parent: bool = False) -> None:
    """Refuses, before any work, an output that could not be written: a name without one of
    `suffixes` (a table's .csv or .parquet by default; `()`: any name), a directory's name, or
    a directory that does not exist (`make_parent`: that cannot be made) or does not take new
    files. The name is checked before any directory is made."""
    if not isinstance(path, str | os.PathLike):
        raise spec_error(key, repr(path), f"a file's path (given: {type(path).__name__})")
    path = Path(path)
    if suffixes and path.suffix.lower() not in suffixes:
        raise spec_error(key, str(path), f"a file name ending in {' or '.join(suffixes)}"
                         + (f" ({kind})" if kind else ""))
    if path.is_dir():
        raise spec_error(key, str(path), "a file to write (a directory of that name is there)")
    parent = path.parent
    if make_parent and not parent.is_dir():
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise spec_error(key, str(path), f"a file in a directory that can be made "
                             f"({e.strerror})") from None
    if not parent.is_dir():
        raise spec_error(key, str(path), f"a file in an existing directory ({parent} is not one)")
    try:
        fd, probe = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.", suffix=".probe")
    except OSError as e:
        raise spec_error(key, str(path), f"a file in a directory you can write ({e.strerror})") \
            from None
    os.close(fd)
    os.unlink(probe)

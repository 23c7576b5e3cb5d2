"""Files: atomic writes and JSON reads with errors that name the file.

A write goes to a temporary file in the target's folder, is flushed and fsync-ed, then
:func:`os.replace`-d over the target (and the folder fsync-ed): a reader (or a run killed at
any moment) sees the old file or the new one, never a partial one. Used by results, checkpoints and LEAF files.

The file gets the mode an ordinary ``open(path, "w")`` would give it: the mode of the
file it replaces, or ``0o666`` less the process umask for a new file (the temporary
file itself is created ``0o600``).
"""
from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Callable, Union

__all__ = ["atomic_write", "atomic_write_all", "read_json"]


def _mode_for(path: Path) -> int:
    """Permission bits for a write to ``path``: those of the existing file (followed
    through a symlink), else ``0o666`` less the umask."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)  # the only portable way to read it: set, then restore at once
        os.umask(umask)
        return 0o666 & ~umask


def _target(path: os.PathLike) -> Path:
    """The file a write to ``path`` replaces: a symlink's target; refuses a non-regular file."""
    path = Path(path)
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    if path.exists() and not path.is_file():
        raise ValueError(f"{path}: exists and is not a regular file; refusing to replace it")
    return path


def _stage(path: Path, data: Union[bytes, str, Callable]) -> str:
    """Write ``data`` to a fsync-ed temporary file next to ``path`` with ``path``'s future mode
    (a callable ``data`` is called with the open binary file and writes into it)."""
    folder = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            if callable(data):
                data(fh)
            else:
                fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _mode_for(path))
    except BaseException:
        _unlink(tmp)
        raise
    return tmp


def _fsync_folder(folder: Path) -> None:
    """Flush a folder's entry list, so that a rename survives a power loss (not only a kill).
    Skipped where folders cannot be opened (Windows)."""
    try:
        fd = os.open(folder if str(folder) else ".", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some file systems refuse fsync on a folder; the rename itself is done
        pass
    finally:
        os.close(fd)


def _unlink(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass


def atomic_write(path: os.PathLike, data: Union[bytes, str, Callable]) -> Path:
    """Write ``data`` (bytes, or text as UTF-8) to ``path`` atomically; return the path.
    ``data`` may also be a callable that is given the open binary file and writes into it,
    for contents too large to build in memory first (checkpoints); if it raises, the target
    is left as it was.
    The file keeps the mode of the one it replaces; a new one gets ``0o666`` less the umask.
    A symbolic link is followed (its target is replaced, the link stays a link); an existing
    path that is not a regular file (a folder, a FIFO, a device) is refused, since renaming over
    it would replace it rather than write into it."""
    return atomic_write_all([(path, data)])[0]


def atomic_write_all(items) -> list:
    """Write several files that belong together (``[(path, data), ...]``, as :func:`atomic_write`):
    every file is first written in full to a temporary file, and only then are they renamed over
    their targets, one after the other. A failure or a kill while writing (the slow part) leaves
    every old file in place; only a kill between the renames (microseconds) can leave some new
    and some old. Returns the paths written."""
    staged: list = []
    try:
        for path, data in items:
            target = _target(path)
            staged.append((_stage(target, data), target))
        for tmp, target in staged:
            os.replace(tmp, target)
        done = [target for _, target in staged]
        staged = []
        for folder in dict.fromkeys(t.parent for t in done):
            _fsync_folder(folder)
        return done
    finally:
        for tmp, _ in staged:
            _unlink(tmp)


def read_json(path: os.PathLike, *, object_pairs_hook=None):
    """Parse a JSON file; ``ValueError`` says which file and what is wrong with it.
    ``object_pairs_hook`` is passed to :func:`json.load` (e.g. to refuse duplicate keys)."""
    path = Path(path)
    try:
        with open(path, "r", encoding="utf-8") as fh:
            return json.load(fh, object_pairs_hook=object_pairs_hook)
    except FileNotFoundError:
        raise ValueError(f"{path}: file not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    except RecursionError:
        raise ValueError(f"{path}: not a usable JSON document (nested too deeply)") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot read ({exc})") from None

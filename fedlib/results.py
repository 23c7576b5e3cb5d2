"""Result records of runs: the schema, provenance and atomic JSON files.

Every run the command line writes (``python -m fedlib run ...``) and every benchmark is
one JSON object::

    {"schema": "fedlib.result/1",
     "kind": "run",                       # or "bench", ... (only runs must have a history)
     "config": {...},                     # everything needed to rerun it (resolved flags)
     "provenance": {"fedlib": "0.1.0", "git_commit": "<sha>" | "unknown", "git_dirty": bool | null,
                    "python": "3.11.7", "numpy": "...", "torch": "..." | null, "platform": "...",
                    "device": "cpu" | "<GPU name>", "threads": {...}, "command": "python -m fedlib ...",
                    "cwd": "/folder/it/ran/in",
                    "started_utc": "...Z", "finished_utc": "...Z", "wall_time_s": 12.3,
                    "git_changed_during_run": bool,      # runs timed by RunClock only
                    "git_commit_end": "<sha>", "git_dirty_end": bool | null},  # only when it changed
     "initial": {"train_loss": ..., "test_accuracy": ...},     # optional: before round 0
     "history": [{"round": 0, "train_loss": ..., "test_accuracy": ... | null, "tau_eff": ...,
                  "chi2": ..., "local_steps": [...], ...}, ...],   # one record per round
     "summary": {...}}                    # optional: final values

Rounds are counted from 0. ``train_loss`` is measured *after* the round (:math:`F(x)` of the
new global model) by ``run synthetic``; the CIFAR-10 runs (``run cifar10``, ``table1``)
record instead the participation-weighted mean of the clients' mini-batch losses *during*
the round (:class:`fedlib.engines.stacked.RoundRecord`: a pass over the 50,000 training
images would cost as much as the round), with the new model's ``test_loss`` and
``test_accuracy``; their ``summary.final_train_loss`` is the last round's such mean.
Non-finite numbers are written as ``null`` (JSON has no NaN).

``git_commit`` / ``git_dirty`` name the code that ran: :class:`RunClock` reads them when
the run starts. If they differ when the provenance is made (a commit or an edit during
the run), ``git_changed_during_run`` is ``true``, ``git_commit_end`` / ``git_dirty_end``
hold the later state, and a warning is issued. The comparison sees a new commit and a
clean tree becoming dirty (or clean), not a further edit to an already dirty tree.

``command`` is the command line, shell-quoted (``shlex.join``): ``sys.argv``, or,
inside :func:`recorded_command` (``fedlib.cli.main(argv)`` called with an explicit
``argv``), the command given there. ``cwd`` is the folder it ran in: relative paths in
``command`` are relative to it (``cd "$cwd" && $command`` reruns it as written).

:func:`write_result` serialises first, then writes a temporary file in the target's
folder and :func:`os.replace`-s it: a reader sees the old file or the new one, never a
partial one, and a failure leaves the target untouched. :func:`read_result` checks the
schema — including that ``summary.final_<field>`` is the last history record's ``<field>`` and
``summary.rounds`` the number of records — and raises ``ValueError`` naming the file and the problem.

:func:`results_folder` finds the repository's committed results (``data/results/<name>``) whatever the working
folder. Used by chapters 5 and 10 (their committed results).

Shared by ``fedlib.cli.synthetic``, the CIFAR-10 commands and the book's chapters.
"""
from __future__ import annotations

import contextlib
import contextvars
import datetime as _dt
import json
import math
import numbers
import os
import platform
import re
import shlex
import subprocess
import sys
import time
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence

import numpy as np

from ._io import atomic_write, read_json
from ._validate import a_type, check_nonnegative

__all__ = ["SCHEMA", "HISTORY_KEYS", "PROVENANCE_KEYS", "git_commit", "device_name", "make_provenance", "RunClock",
           "recorded_command",
           "make_result", "to_jsonable", "validate_result", "write_result", "read_result", "REPOSITORY_RESULTS",
           "results_folder"]

#: The ``schema`` field of every result file this version writes and reads.
SCHEMA = "fedlib.result/1"
#: Keys every history record has.
HISTORY_KEYS = ("round", "train_loss", "test_accuracy", "tau_eff", "chi2", "local_steps")
#: Keys every provenance block has.
PROVENANCE_KEYS = ("fedlib", "git_commit", "python", "numpy", "torch", "platform", "device", "command",
                   "started_utc", "finished_utc", "wall_time_s")


#: A full git commit; a result records it, or ``"unknown"`` outside a checkout.
_SHA = re.compile(r"[0-9a-f]{40}")


# ----------------------------------------------------------------------------- provenance
def _repo_root() -> Path:
    return Path(__file__).resolve().parents[1]


#: The warnings :func:`git_commit` gave in this process (each is given once).
_GIT_WARNED: set = set()


def git_commit(root: Optional[os.PathLike] = None) -> tuple[str, Optional[bool]]:
    """``(commit sha, dirty)`` of the git checkout holding fedlib, or ``("unknown", None)``.

    The environment variable ``FEDLIB_GIT_COMMIT``, when set, is the answer (its dirty flag
    unknown): a copy of the tree shipped to another machine (a GPU machine) may carry no
    ``.git``, or a stale one — the device tool of this project sent the session's first
    commit while the tree was a later one — so the caller who made the copy names its commit
    (a ``ValueError`` unless it is a full 40-hex-digit commit).

    ``root`` is the checkout to read (default: the one holding fedlib); a folder without ``.git`` (a
    downloaded zip or tarball) gives ``("unknown", None)``, and so does a checkout whose commit ``git`` cannot
    give (no ``git`` on ``PATH``, a folder of another owner that git refuses, a timeout), with a
    ``UserWarning`` that says why, once a process (``python -m fedlib`` prints it as ``warning: ...``).

    Example
    -------
    >>> import os, tempfile
    >>> saved = os.environ.pop("FEDLIB_GIT_COMMIT", None)
    >>> with tempfile.TemporaryDirectory() as folder:        # no .git there
    ...     git_commit(folder)
    ('unknown', None)
    >>> os.environ["FEDLIB_GIT_COMMIT"] = "AB" * 20
    >>> git_commit() == ("ab" * 20, None)
    True
    >>> _ = os.environ.pop("FEDLIB_GIT_COMMIT") if saved is None else os.environ.update(FEDLIB_GIT_COMMIT=saved)
    """
    given = os.environ.get("FEDLIB_GIT_COMMIT", "").strip()
    if given:
        if not _SHA.fullmatch(given.lower()):
            raise ValueError(f"FEDLIB_GIT_COMMIT must be a full 40-hex-digit commit (git rev-parse HEAD), got {given!r}")
        return given.lower(), None
    root = Path(root) if root is not None else _repo_root()
    if not (root / ".git").exists():
        return "unknown", None
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        # a checkout whose commit git cannot give (git not installed, or refusing a folder of another owner:
        # "detected dubious ownership") was recorded "unknown" without a word
        message = (f"{root} is a git checkout, but its commit cannot be read ({_git_failure(exc)}): results record "
                   "git_commit 'unknown'; FEDLIB_GIT_COMMIT=<40-hex-digit commit> names it")
        if message not in _GIT_WARNED:  # once a process: a run reads the commit at its start, its end, ...
            _GIT_WARNED.add(message)
            warnings.warn(message, UserWarning, stacklevel=2)
        return "unknown", None
    return (sha or "unknown"), (bool(status.strip()) if sha else None)


def _git_failure(exc: BaseException) -> str:
    """Why a ``git`` call of :func:`git_commit` failed, in a few words."""
    if isinstance(exc, FileNotFoundError):
        return "no git command on PATH"
    if isinstance(exc, subprocess.TimeoutExpired):
        return f"git took over {exc.timeout:g} s"
    if isinstance(exc, subprocess.CalledProcessError):
        lines = [line.strip() for line in (exc.stderr or "").splitlines() if line.strip()]
        return f"git exited {exc.returncode}" + (f": {lines[0]}" if lines else "")
    return f"{type(exc).__name__}: {exc}"


def _version(dist: str) -> Optional[str]:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def device_name(device: Any = "cpu") -> str:
    """Provenance's ``device`` field: ``"cpu"`` for a CPU ``device``, the GPU's name for a CUDA one
    (torch), and the device string itself for any other (``"mps"``, ``"xpu:0"``) or a CUDA device
    torch cannot name: provenance never fails a run, and never records another device as the CPU.

    Example
    -------
    >>> device_name("cpu"), device_name("cpu:0"), device_name("mps")
    ('cpu', 'cpu', 'mps')
    """
    dev = str(device)
    if dev == "cpu" or dev.startswith("cpu:"):
        return "cpu"
    if not dev.startswith("cuda"):
        return dev
    try:
        import torch

        return torch.cuda.get_device_name(torch.device(dev))
    except Exception:  # noqa: BLE001 - provenance must never fail a run
        return dev


#: 10000-01-01T00:00:00Z as a ``time.time()`` value: a stamp's year has four digits (``datetime``'s limit).
_TIME_LIMIT = 253402300800.0


def _utc(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _threads() -> dict:
    env = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count()
    return {"cpus_available": cores, **{k: v for k, v in env.items() if v is not None}}


#: The command line :func:`recorded_command` set (``None``: read ``sys.argv``).
_RECORDED_COMMAND: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar("fedlib_recorded_command",
                                                                                   default=None)


@contextlib.contextmanager
def recorded_command(argv: Sequence[str]) -> Iterator[str]:
    """Within the block, provenance records the command line ``argv`` (the whole line,
    e.g. ``["python", "-m", "fedlib", "run", "synthetic", ...]``), shell-quoted, instead of
    ``sys.argv``; yields that string. Blocks nest: leaving one restores the command of the
    enclosing block (``fedlib rerun`` calls ``fedlib.cli.main`` inside its own). ``argv`` must be a
    list of strings (a ``TypeError`` otherwise).

    Example
    -------
    An argument with a space is quoted, so the recorded line reruns as written:

    >>> with recorded_command(["python", "-m", "fedlib", "run", "synthetic", "--out", "my run.json"]) as command:
    ...     recorded = make_provenance(0.0, 1.0)["command"]
    >>> command, recorded == command
    ("python -m fedlib run synthetic --out 'my run.json'", True)
    """
    try:  # read once: a generator was used up by the check below and recorded as the command ''
        args = None if isinstance(argv, (str, bytes)) else list(argv)
    except TypeError:
        args = None
    if args is None or not all(isinstance(a, str) for a in args):
        raise TypeError(f"recorded_command needs a list of strings (one per argument), got {argv!r}")
    command = shlex.join(args)
    token = _RECORDED_COMMAND.set(command)
    try:
        yield command
    finally:
        _RECORDED_COMMAND.reset(token)


def _command() -> str:
    """The command line, shell-quoted: the innermost :func:`recorded_command`, else
    ``sys.argv`` with ``python -m fedlib`` for the package's entry points (and the
    interpreter's name before any other script)."""
    recorded = _RECORDED_COMMAND.get()
    if recorded is not None:
        return recorded
    argv = list(sys.argv)
    if argv and (argv[0].replace("\\", "/").endswith(("fedlib/__main__.py", "fedlib/cli/__main__.py"))
                 or Path(argv[0]).name in ("fedlib", "fedlib.exe")):  # the console script of [project.scripts]
        argv = ["python", "-m", "fedlib"] + argv[1:]
    elif argv:
        argv = [Path(sys.executable).name] + argv
    return shlex.join(argv)


def make_provenance(started: float, finished: float, device: Any = "cpu", command: Optional[str] = None, *,
                    git_start: Optional[tuple[str, Optional[bool]]] = None) -> dict:
    """Provenance of a run that ran from ``started`` to ``finished`` (``time.time()`` values).

    ``git_start`` is :func:`git_commit` read when the run started (:class:`RunClock` does
    this); the commit is read again now and, if it differs, the record says so
    (``git_changed_during_run``, ``git_commit_end``, ``git_dirty_end``) and a
    ``UserWarning`` is issued (``python -m fedlib`` prints it as one line, ``warning: the git checkout changed
    during the run: ...``). Without ``git_start`` the commit read now is recorded and
    no comparison is made. ``command`` defaults to the current command line (see
    :func:`recorded_command`). Times are written as UTC ISO 8601 stamps, ``wall_time_s`` their
    difference; each must be a finite number >= 0 before the year 10000 (``ValueError`` naming it otherwise).

    ``device`` is where the run ran (default ``"cpu"``; recorded through :func:`device_name`).

    Example
    -------
    >>> provenance = make_provenance(0.0, 1.5, command="python -m fedlib run synthetic")
    >>> provenance["started_utc"], provenance["finished_utc"], provenance["wall_time_s"]
    ('1970-01-01T00:00:00.000000Z', '1970-01-01T00:00:01.500000Z', 1.5)
    >>> [key for key in PROVENANCE_KEYS if key not in provenance]
    []
    """
    from . import __version__

    # nan failed in datetime ("Invalid value NaN"), inf with an OverflowError about time_t
    started, finished = check_nonnegative("started", started), check_nonnegative("finished", finished)
    for name, ts in (("started", started), ("finished", finished)):
        if ts >= _TIME_LIMIT:  # datetime raised 'year 10000 is out of range', OSError or OverflowError (time_t)
            raise ValueError(f"{name} must be a time.time() value before the year 10000 ({_TIME_LIMIT:.0f}), got {ts!r}")
    sha, dirty = git_commit()
    prov = {
        "fedlib": __version__,
        "git_commit": sha,
        "git_dirty": dirty,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch": _version("torch"),
        "platform": platform.platform(),
        "device": device_name(device),
        "threads": _threads(),
        "command": command if command is not None else _command(),
        "cwd": os.getcwd(),  # relative paths in the command are relative to it
        "started_utc": _utc(started),
        "finished_utc": _utc(finished),
        "wall_time_s": round(float(finished - started), 6),
    }
    if git_start is not None:
        start_sha, start_dirty = git_start
        changed = (start_sha, start_dirty) != (sha, dirty)
        prov.update(git_commit=start_sha, git_dirty=start_dirty, git_changed_during_run=changed)
        if changed:
            prov.update(git_commit_end=sha, git_dirty_end=dirty)
            warnings.warn(f"the git checkout changed during the run: commit {start_sha} (dirty: {start_dirty}) "
                          f"at the start, {sha} (dirty: {dirty}) at the end; the result records the start "
                          f"and marks git_changed_during_run", UserWarning, stacklevel=2)
    return prov


class RunClock:
    """``with RunClock() as clock: ...`` then ``clock.provenance(device)``.

    Entering reads the git commit and dirty flag (:func:`git_commit`), then the start
    time; leaving reads the finish time. :meth:`provenance` records the commit read at
    the start and flags a change since (see :func:`make_provenance`). The CLI's runs
    (``fedlib.cli.synthetic``, ``fedlib.cli.cifar10``) are timed with it.

    Example
    -------
    >>> with RunClock() as clock:
    ...     pass                                   # the run
    >>> provenance = clock.provenance("cpu", command="python -m fedlib run synthetic")
    >>> provenance["wall_time_s"] >= 0, "git_changed_during_run" in provenance, provenance["device"]
    (True, True, 'cpu')
    """

    def __enter__(self):
        self.git_start = git_commit()
        self.started = time.time()
        self._ticks = time.monotonic()  # the duration: immune to the wall clock being set during the run
        self.finished = None
        return self

    def _now(self) -> float:
        """The start plus the monotonic clock's duration (never before the start)."""
        return self.started + (time.monotonic() - self._ticks)

    def __exit__(self, *exc):
        self.finished = self._now()
        return False

    def provenance(self, device: Any = "cpu", command: Optional[str] = None) -> dict:
        """:func:`make_provenance` of the timed block (up to now while still inside it); the
        finish time is the start plus the monotonic clock's duration, so ``wall_time_s`` >= 0.

        ``device`` and ``command`` are :func:`make_provenance`'s."""
        finished = self.finished if self.finished is not None else self._now()
        return make_provenance(self.started, finished, device, command, git_start=self.git_start)


# ----------------------------------------------------------------------------- records
def to_jsonable(obj: Any) -> Any:
    """Plain JSON types: numpy scalars/arrays to numbers/lists, non-finite floats to ``None``, paths to
    strings; anything else is a ``ValueError`` naming its type.

    ``obj`` may nest mappings, lists and tuples of these values (mappings become dicts, tuples lists).

    Example
    -------
    >>> import numpy as np
    >>> to_jsonable({"loss": np.float64(0.5), "steps": np.array([2, 4]), "gap": float("nan"), "ok": np.bool_(True)})
    {'loss': 0.5, 'steps': [2, 4], 'gap': None, 'ok': True}
    >>> to_jsonable({"clients": {1, 2}})
    Traceback (most recent call last):
    ...
    ValueError: cannot store a set in a result record: {1, 2}

    Keys become strings (JSON's only keys); two keys that give the same string are refused, as one
    would silently replace the other:

    >>> to_jsonable({1: "a", "1": "b"})
    Traceback (most recent call last):
    ...
    ValueError: cannot store both keys 1 and '1' in a result record: both are written "1"
    """
    if isinstance(obj, Mapping):
        out, first = {}, {}
        for k, v in obj.items():
            key = str(k)
            if key in first:
                raise ValueError(f"cannot store both keys {first[key]!r} and {k!r} in a result record: both are "
                                 f'written "{key}"')
            first[key] = k
            out[key] = to_jsonable(v)
        return out
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, numbers.Integral):
        return int(obj)
    if isinstance(obj, numbers.Real):
        f = float(obj)
        return f if math.isfinite(f) else None
    if obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    raise ValueError(f"cannot store {a_type(obj)} in a result record: {obj!r}")


def make_result(config: Mapping, history: Optional[Sequence[Mapping]], provenance: Mapping, *, kind: str = "run",
                initial: Optional[Mapping] = None, summary: Optional[Mapping] = None) -> dict:
    """Assemble (and validate) a result record; values are converted with :func:`to_jsonable`, and a
    record :func:`validate_result` refuses is a ``ValueError``.

    ``initial`` is the metrics before the first round (a mapping; default ``None``: no ``"initial"`` entry).

    Example
    -------
    >>> provenance = make_provenance(0.0, 1.0, command="python -m fedlib run synthetic")
    >>> history = [{"round": t, "train_loss": loss, "test_accuracy": None, "tau_eff": 6.0, "chi2": 0.0,
    ...             "local_steps": [2, 4, 8]} for t, loss in enumerate([0.6, 0.5])]
    >>> result = make_result({"rounds": 2}, history, provenance, summary={"final_train_loss": 0.5, "rounds": 2})
    >>> result["schema"], result["kind"], sorted(result)
    ('fedlib.result/1', 'run', ['config', 'history', 'kind', 'provenance', 'schema', 'summary'])
    >>> make_result({"rounds": 2}, history, provenance, summary={"final_train_loss": 0.6})  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    ValueError: result: summary.final_train_loss is 0.6 but the last round (history[1]) has train_loss 0.5;
    the summary must be the history's last record
    """
    result = {"schema": SCHEMA, "kind": kind, "config": _as_dict("config", config),
              "provenance": _as_dict("provenance", provenance)}
    if initial is not None:
        result["initial"] = _as_dict("initial", initial)
    if history is not None:
        if isinstance(history, (str, bytes, Mapping)) or not hasattr(history, "__iter__"):
            raise ValueError(f"history must be a sequence of per-round mappings, got {type(history).__name__}")
        result["history"] = [_as_dict(f"history[{k}]", h) for k, h in enumerate(history)]
    if summary is not None:
        result["summary"] = _as_dict("summary", summary)
    result = to_jsonable(result)
    validate_result(result)
    return result


def _as_dict(name: str, value: Any) -> dict:
    """``dict(value)``, or ``ValueError`` naming ``name`` (``dict("abc")`` said only "dictionary update
    sequence element #0 has length 1; 2 is required")."""
    try:
        return dict(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a mapping (a dict of names to values), got {type(value).__name__}: "
                         f"{exc}") from None


def _is_num(x) -> bool:
    """A finite JSON number (not a bool; ``json`` reads NaN and Infinity as floats)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _check_finite_numbers(value: Any, where: str) -> None:
    """No NaN or +-inf anywhere (a result stores a missing number as null)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where}: {value!r} is not a finite number (a result stores a missing number as null)")
    if isinstance(value, dict):
        for k, v in value.items():
            _check_finite_numbers(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_finite_numbers(v, f"{where}[{i}]")


def _check_provenance(prov: dict, where: str) -> None:
    commit = prov["git_commit"]
    if not (isinstance(commit, str) and (commit == "unknown" or _SHA.fullmatch(commit))):
        raise ValueError(f"{where}: provenance.git_commit must be a 40-hex-digit commit or 'unknown', got {commit!r}")
    if not _is_num(prov["wall_time_s"]) or prov["wall_time_s"] < 0:
        raise ValueError(f"{where}: provenance.wall_time_s must be a number >= 0, got {prov['wall_time_s']!r}")
    for key in ("device", "command", "fedlib", "python", "numpy", "platform"):
        if not isinstance(prov[key], str) or not prov[key].strip():
            raise ValueError(f"{where}: provenance.{key} must be a non-empty string, got {prov[key]!r}")
    if prov["torch"] is not None and not (isinstance(prov["torch"], str) and prov["torch"].strip()):
        raise ValueError(f"{where}: provenance.torch must be a version string or null, got {prov['torch']!r}")
    stamps = {}
    for key in ("started_utc", "finished_utc"):
        try:
            stamps[key] = _dt.datetime.fromisoformat(str(prov[key]).replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"{where}: provenance.{key} must be an ISO 8601 time, got {prov[key]!r}") from None
        if stamps[key].utcoffset() != _dt.timedelta(0):  # no zone, or another one: not what the name says
            raise ValueError(f"{where}: provenance.started_utc and finished_utc must both be UTC times (ending in Z "
                             f"or +00:00), got {key} {prov[key]!r}")
    backwards = stamps["finished_utc"] < stamps["started_utc"]
    if backwards:
        raise ValueError(f"{where}: provenance.finished_utc ({prov['finished_utc']}) is before started_utc "
                         f"({prov['started_utc']})")


def validate_result(result: Any, where: str = "result") -> dict:
    """Check the schema; raise ``ValueError`` starting with ``where`` on the first problem. Returns
    ``result``. The module docstring lists the fields; a run's history must be rounds 0, 1, 2, ...
    with :data:`HISTORY_KEYS`, accuracies fractions in [0, 1], no NaN or inf anywhere.

    Example
    -------
    >>> provenance = make_provenance(0.0, 1.0, command="python -m fedlib run synthetic")
    >>> history = [{"round": t, "train_loss": loss, "test_accuracy": None, "tau_eff": 6.0, "chi2": 0.0,
    ...             "local_steps": [2, 4, 8]} for t, loss in enumerate([0.6, 0.5])]
    >>> result = make_result({"rounds": 2}, history, provenance)
    >>> validate_result(result) is result
    True
    >>> history[0]["test_accuracy"] = 87.0                     # a percentage
    >>> validate_result(dict(result, history=history), where="run.json")
    Traceback (most recent call last):
    ...
    ValueError: run.json: history[0].test_accuracy must be a fraction in [0, 1] (not a percentage), got 87.0
    """
    if not isinstance(result, dict):
        raise ValueError(f"{where}: a result must be a JSON object, got {type(result).__name__}")
    if result.get("schema") != SCHEMA:
        raise ValueError(f"{where}: schema must be {SCHEMA!r}, got {result.get('schema')!r}")
    for key in ("config", "provenance"):
        if not isinstance(result.get(key), dict):
            raise ValueError(f"{where}: {key!r} must be an object")
    missing = [k for k in PROVENANCE_KEYS if k not in result["provenance"]]
    if missing:
        raise ValueError(f"{where}: provenance lacks {missing}")
    _check_provenance(result["provenance"], where)
    if not isinstance(result.get("kind"), str) or not result["kind"]:
        raise ValueError(f"{where}: 'kind' must be a string such as 'run'")
    for key in ("initial", "summary"):
        if key in result and not isinstance(result[key], dict):
            raise ValueError(f"{where}: {key!r} must be an object, got {type(result[key]).__name__}")
    _check_finite_numbers(result, where)
    if result["kind"] != "run" and "history" not in result:
        return result  # e.g. a benchmark: no per-round training records
    history = result.get("history")
    if not isinstance(history, list):
        raise ValueError(f"{where}: 'history' must be a list of per-round records")
    rounds = result["config"].get("rounds")
    if isinstance(rounds, int) and not isinstance(rounds, bool) and len(history) != rounds:
        raise ValueError(f"{where}: config.rounds is {rounds} but the history has {len(history)} records")
    for i, rec in enumerate(history):
        if not isinstance(rec, dict):
            raise ValueError(f"{where}: history[{i}] must be an object")
        missing = [k for k in HISTORY_KEYS if k not in rec]
        if missing:
            raise ValueError(f"{where}: history[{i}] lacks {missing}")
        if not isinstance(rec["round"], int) or isinstance(rec["round"], bool) or rec["round"] < 0:
            raise ValueError(f"{where}: history[{i}].round must be an integer >= 0, got {rec['round']!r}")
        if i and rec["round"] <= history[i - 1]["round"]:
            raise ValueError(f"{where}: history rounds must increase (history[{i}].round = {rec['round']})")
        if rec["round"] != i:
            raise ValueError(f"{where}: history[{i}].round is {rec['round']}: the records must be rounds 0, 1, 2, ... "
                             "with none missing")
        for k in ("train_loss", "test_accuracy", "tau_eff", "chi2"):
            if rec[k] is not None and not _is_num(rec[k]):
                raise ValueError(f"{where}: history[{i}].{k} must be a number or null, got {rec[k]!r}")
        if rec["test_accuracy"] is not None and not 0 <= rec["test_accuracy"] <= 1:
            raise ValueError(f"{where}: history[{i}].test_accuracy must be a fraction in [0, 1] (not a percentage), "
                             f"got {rec['test_accuracy']!r}")
        steps = rec["local_steps"]
        if not isinstance(steps, list) or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                                                  for s in steps):
            raise ValueError(f"{where}: history[{i}].local_steps must be a list of integers >= 0")
    _check_summary_against_history(result.get("summary"), history, where)
    return result


def _check_summary_against_history(summary: Optional[dict], history: list, where: str) -> None:
    """``summary.final_<field>`` must be the last round's ``<field>`` (the writers copy it; an
    edited or mixed-up file whose summary and history disagree is refused, since tables read the
    summary and figures the history), and ``summary.rounds`` the number of records."""
    if not summary:
        return
    if "rounds" in summary and summary["rounds"] != len(history):
        raise ValueError(f"{where}: summary.rounds is {summary['rounds']!r} but the history has {len(history)} "
                         "records")
    for key, value in summary.items():
        if not key.startswith("final_"):
            continue
        field = key[len("final_"):]
        if not history:
            raise ValueError(f"{where}: summary.{key} is {value!r} but the history is empty")
        if field in history[-1] and value != history[-1][field]:
            raise ValueError(f"{where}: summary.{key} is {value!r} but the last round (history[{len(history) - 1}]) "
                             f"has {field} {history[-1][field]!r}; the summary must be the history's last record")


# ----------------------------------------------------------------------------- files
def write_result(path: os.PathLike, result: Mapping) -> Path:
    """Write ``result`` to ``path`` atomically (temporary file in the same folder, fsync,
    :func:`os.replace`); nothing is left behind on failure. Returns the path. ``result`` is validated
    first (:func:`validate_result`); the folder must exist.

    Example
    -------
    >>> provenance = make_provenance(0.0, 1.0, command="python -m fedlib run synthetic")
    >>> history = [{"round": t, "train_loss": loss, "test_accuracy": None, "tau_eff": 6.0, "chi2": 0.0,
    ...             "local_steps": [2, 4, 8]} for t, loss in enumerate([0.6, 0.5])]
    >>> import os, tempfile
    >>> result = make_result({"rounds": 2}, history, provenance)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = write_result(os.path.join(folder, "run.json"), result)
    ...     print(path.name, os.listdir(folder), read_result(path) == result)
    run.json ['run.json'] True
    """
    path = Path(path)
    doc = to_jsonable(result)
    validate_result(doc, str(path))
    text = json.dumps(doc, indent=1, allow_nan=False) + "\n"  # serialise before touching the disk
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise ValueError(f"{path}: folder {folder} does not exist")
    if path.is_dir():
        raise ValueError(f"{path}: is a folder")
    atomic_write(path, text)
    return path


def read_result(path: os.PathLike) -> dict:
    """Read and validate a result file; ``ValueError`` names the file and the problem (a key written twice in one
    JSON object is one: ``json`` would keep the last copy without a word). The book's chapters
    read the committed GPU results of chapter 5's Table 1 with it
    (:func:`fedlib.experiments.cifar10.load_table1_results`).

    Example
    -------
    >>> import json, os, tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = os.path.join(folder, "old.json")
    ...     with open(path, "w") as file:
    ...         json.dump({"schema": "fedlib.result/0"}, file)
    ...     try:
    ...         read_result(path)
    ...     except ValueError as error:
    ...         print(str(error).split("old.json: ")[1])          # the message starts with the path
    schema must be 'fedlib.result/1', got 'fedlib.result/0'
    """
    path = Path(path)
    try:
        doc = read_json(path, object_pairs_hook=_unique_keys(path))
    except ValueError:
        if _is_checkpoint(path):
            raise ValueError(f"{path}: is a fedlib checkpoint, not a result file (a result is the JSON file a run "
                             "writes with --out; a checkpoint is read by --resume)") from None
        raise
    return validate_result(doc, str(path))


def _is_checkpoint(path: Path) -> bool:
    """Whether ``path`` ends with a checkpoint's footer (:data:`fedlib.checkpoint.FOOTER` and 64 hex digits), or
    starts as a pickle does (``0x80``, then the protocol: a checkpoint written without the footer); reads at most
    a few bytes of each end. Only asked once the file failed to parse as JSON (no JSON text starts with ``0x80``)."""
    from .checkpoint import _has_footer

    try:
        with open(path, "rb") as fh:
            head = fh.read(2)
    except OSError:
        return False
    return _has_footer(path) or (len(head) == 2 and head[0] == 0x80 and 2 <= head[1] <= 5)


def _unique_keys(path: Path):
    """``object_pairs_hook`` refusing a key written twice in one JSON object: ``json`` keeps only the last copy, so
    an edited or merged file with two ``"lr"`` (or two ``"history"``) in one object was read as the last one."""
    def hook(pairs):
        out = {}
        for key, value in pairs:
            if key in out:
                raise ValueError(f"{path}: key {key!r} appears twice in one JSON object; a JSON reader keeps only the "
                                 "last copy")
            out[key] = value
        return out
    return hook


# ----------------------------------------------------------------------------- the repository's committed results
#: The repository's ``data/results/`` folder, found from fedlib's own location (a checkout of fednova-book with
#: fedlib installed from it, as ``make env`` installs it), whatever the working folder.
#:
#: :meta hide-value:
REPOSITORY_RESULTS = _repo_root() / "data" / "results"


def results_folder(path: Optional[os.PathLike], committed: str, *, create: bool = False) -> Path:
    """The folder of result files a chapter reads: ``path`` as given (relative to the working folder), or for
    ``path=None`` the repository's committed ``data/results/<committed>`` (:data:`REPOSITORY_RESULTS`), found
    whatever the working folder (relative to the working folder when it lies inside it, else absolute).
    Chapters 5 and 10 read their results through it: their paths were relative to the working folder, so a
    chapter opened in Jupyter (which starts its kernel in ``book/``) or executed by papermill from another folder
    found no results (chapter 5's table showed none and then stopped on an empty benchmark table). A folder that
    does not exist is a ``FileNotFoundError`` naming it, or with ``create`` is made (where a run is about to write
    its results).

    Example
    -------
    >>> results_folder(None, "bench").resolve() == REPOSITORY_RESULTS / "bench"
    True
    >>> results_folder("no/such/folder", "bench")
    Traceback (most recent call last):
    ...
    FileNotFoundError: no/such/folder: no such folder (relative to the working folder ...); give the folder of the ...
    """
    if not isinstance(committed, str) or not committed or Path(committed).name != committed:
        raise ValueError(f"committed must name one folder under {REPOSITORY_RESULTS}, got {committed!r}")
    if path is None:
        folder = REPOSITORY_RESULTS / committed
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder}: no such folder: the committed results are read from the checkout of "
                                    "the fednova-book repository that fedlib is installed from (pip install -e .); "
                                    "give the folder's path instead")
        try:  # as the chapters printed it when executed from the repository root: data/results/<committed>
            return folder.relative_to(Path.cwd().resolve())
        except ValueError:
            return folder
    folder = Path(path)
    if create:
        folder.mkdir(parents=True, exist_ok=True)
    elif not folder.is_dir():
        raise FileNotFoundError(f"{path}: no such folder (relative to the working folder {os.getcwd()}); give the "
                                f"folder of the result files, or None for the repository's committed "
                                f"data/results/{committed}")
    return folder

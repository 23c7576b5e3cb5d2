r"""Checkpoints: save a run every K rounds, atomically, and resume it after a crash.

A checkpoint is one pickle file (``fedlib.checkpoint/1``) holding everything the next
round depends on:

* ``config`` — the run's resolved configuration (the result file's ``config``); a
  resume with another configuration is refused, naming the differing keys;
* ``round`` — rounds done (the next round to run);
* ``state`` — the :class:`~fedlib.algorithms.ServerState`: global model, server optimizer
  state (momentum buffer / Adam moments and counter), control variates :math:`c_i`, :math:`\bar c`
  (all as numpy arrays, moved back to the run's backend on resume);
* ``history`` / ``initial`` — the per-round records so far;
* ``rng`` — the random state. Every draw in fedlib comes from a fresh generator of the
  stream ``(seed, purpose, round, client)`` (:mod:`fedlib.rng`): participants
  (``"sampling"``, round), :math:`\tau_i` (``"local_steps"``, round, client), mini-batches
  (``"batches"``, round, client), CIFAR augmentation and dropout. No generator lives across
  rounds and no global RNG is used, so the complete RNG state *is* the seed plus the
  round counter; it is recorded as ``{"seed", "next_round"}``. (The tests check that a
  run leaves numpy's, Python's and torch's global generators untouched.)

:func:`save_checkpoint` pickles to a temporary file in the target's folder, fsyncs and
:func:`os.replace`-s it, so a ``kill -9`` at any moment leaves the previous checkpoint or
the new one, never a torn file. The pickle is followed by a footer, ``FOOTER`` and the
SHA-256 of the pickle's bytes (64 hex digits; ``pickle.load`` stops before it), which
:func:`load_checkpoint` checks: a file damaged after it was written (bit rot, a bad copy)
still unpickles, into other numbers, and is refused instead. A file without the footer
(written before it existed, or by hand) is read unchecked. The pickle goes to the file, and
through SHA-256, as it is made (the state's arrays are pickled without being copied first), and
a file is hashed in chunks before it is unpickled: saving raises the peak memory by about the
file's size (the pickler keeps each array's bytes until it is done), loading by the arrays it
returns (``tests/test_checkpoint_io.py`` measures both). A checkpoint must hold every
part :func:`save_checkpoint` writes (``PARTS``). Only load checkpoints you wrote (pickle).
"""
from __future__ import annotations

import hashlib
import numbers
import os
import pickle
from pathlib import Path
from typing import Any, Mapping, Optional

import numpy as np

from ._io import atomic_write
from ._validate import a_type, bool_entry, check_int, is_bool
from .tree import tree_map

__all__ = ["FORMAT", "FOOTER", "PARTS", "CheckpointError", "to_numpy_tree", "to_torch_tree", "save_checkpoint",
           "load_checkpoint", "KIND_COMMANDS", "kind_name",
           "config_diff", "check_config", "default_checkpoint_path"]

#: The ``format`` field of every checkpoint this version writes and reads.
FORMAT = "fedlib.checkpoint/1"

#: Starts the footer after the pickle, ``FOOTER + sha256(pickle bytes).hexdigest()``, where ``FOOTER`` is a newline and
#: ``fedlib-checkpoint-sha256:``.
#:
#: :meta hide-value:
FOOTER = b"\nfedlib-checkpoint-sha256:"

#: The commands that write each ``kind`` of checkpoint, as the messages name them (``kind`` itself is an internal
#: name: ``table1`` is also what ``run cifar10`` writes).
KIND_COMMANDS = {"synthetic": "run synthetic", "table1": "run cifar10 / table1"}


def kind_name(kind) -> str:
    """``kind`` as the messages name it: ``"run cifar10 / table1 (kind 'table1')"``, or ``"kind 'x'"`` for a kind
    no command of fedlib writes (a checkpoint of your own, :func:`save_checkpoint`).

    Example
    -------
    >>> kind_name("table1"), kind_name("mine")
    ("run cifar10 / table1 (kind 'table1')", "kind 'mine'")
    """
    return f"{KIND_COMMANDS[kind]} (kind {kind!r})" if kind in KIND_COMMANDS else f"kind {kind!r}"


#: The parts of a checkpoint, each of them read by some resume.
PARTS = ("format", "kind", "config", "round", "state", "history", "initial", "rng", "extra")


class CheckpointError(ValueError):
    """A missing, corrupt or mismatched checkpoint; the message names the file. ``reason``
    (when :func:`load_checkpoint` refused the file) says what is wrong with it, without the
    file name or advice, e.g. ``"corrupt: its SHA-256 footer does not match its contents ..."``.
    A ``ValueError``, so the CLI reports it as a usage error (exit status 2).

    Example
    -------
    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     try:
    ...         load_checkpoint(os.path.join(folder, "missing.ckpt"))
    ...     except CheckpointError as error:
    ...         print(error.reason, isinstance(error, ValueError))
    not found True
    """

    def __init__(self, message: str, reason: Optional[str] = None):
        super().__init__(message)
        self.reason = reason


def to_numpy_tree(obj: Any) -> Any:
    """A copy of ``obj`` with every torch tensor turned into a numpy array (NamedTuples,
    dicts, lists and tuples kept).

    A tensor of a dtype numpy lacks (``bfloat16``, the ``float8`` types) becomes a
    ``float32`` array: every such value is exactly representable in ``float32``, so
    nothing is rounded; casting the array back to the tensor's dtype restores it bit
    for bit. :func:`save_checkpoint` stores the server state this way.

    Example
    -------
    >>> import torch
    >>> to_numpy_tree({"w": torch.tensor([1.5, -0.25], dtype=torch.bfloat16), "steps": (torch.tensor([2, 4]), 3)})
    {'w': array([ 1.5 , -0.25], dtype=float32), 'steps': (array([2, 4]), 3)}
    """
    return _numpy_tree(obj, True)


def to_torch_tree(obj: Any, like: Any) -> Any:
    """A copy of ``obj`` (e.g. the server state of :func:`load_checkpoint`) with every numpy array turned into a
    torch tensor on the device of ``like`` (a tensor, or a list of them such as :func:`fedlib.optim.parameters_of`
    of the model), floating-point arrays in its dtype: the inverse of :func:`to_numpy_tree` for a run in your
    own loop with :class:`fedlib.optim.ClientOptimizer`, whose model, server optimizer state (momentum buffer,
    Adam's moments) and control variates must all be tensors. Numbers, ``None`` and tensors are kept;
    NamedTuples, dicts, lists and tuples keep their types; integer arrays keep their dtype.

    A list or tuple of ``obj`` shaped like ``like`` (as many arrays as it has tensors, each of its tensor's shape:
    the state's ``params``, momentum buffers, control variates) takes ``like``'s dtypes entry by entry, so a model
    whose parameters mix dtypes (a float64 parameter among float32 ones) gets each back in its own dtype. Any
    other floating-point array takes the one floating dtype of ``like``; where ``like`` mixes several it keeps its
    own (rather than being rounded to one of them): convert such a part with its own ``like``, e.g.
    ``to_torch_tree(saved["buffers"], like=buffers_of(model))`` for buffers saved beside the state.

    Example
    -------
    A FedNova state with server momentum saved from a float64 model, read back as numpy, continues as tensors:

    >>> import os, tempfile, torch
    >>> from fedlib.algorithms import make_algorithm
    >>> from fedlib.optim import parameters_of
    >>> from fedlib.server import momentum
    >>> from fedlib.solvers import sgd
    >>> model = torch.nn.Linear(2, 1).double()
    >>> state = make_algorithm("fednova", sgd(0.1), momentum(0.9)).init(parameters_of(model), num_clients=2)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = save_checkpoint(os.path.join(folder, "run.ckpt"), config={}, round_done=0, state=state, history=[])
    ...     saved = load_checkpoint(path)["state"]
    >>> type(saved.server.buffer[0]).__name__
    'ndarray'
    >>> resumed = to_torch_tree(saved, like=parameters_of(model))
    >>> resumed.params[0].dtype, type(resumed.server.buffer[0]).__name__, resumed.round
    (torch.float64, 'Tensor', 0)
    """
    import torch

    candidates = [like] if isinstance(like, torch.Tensor) else list(like) if isinstance(like, (list, tuple)) else []
    first = next((t for t in candidates if isinstance(t, torch.Tensor)), None)
    if first is None:
        raise ValueError(f"like must be a torch tensor or a list of them (parameters_of(model)), got "
                         f"{type(like).__name__}")
    floats = {t.dtype for t in candidates if isinstance(t, torch.Tensor) and t.is_floating_point()}
    # one dtype for all floating arrays was right for one dtype only: a float64 parameter among float32 ones was
    # rounded to float32 (or the float32 ones made float64), and ClientOptimizer.begin then refused the state
    dtype = next(iter(floats)) if len(floats) == 1 else None
    entry_dtypes: dict = {}  # id of an array in a list shaped like `like` -> the dtype of its entry of like
    _collect_like_dtypes(obj, candidates, entry_dtypes)

    def leaf(x: Any) -> Any:
        if not isinstance(x, np.ndarray):
            return x
        t = torch.as_tensor(np.array(x, copy=True), device=first.device)
        to = entry_dtypes.get(id(x), dtype)
        return t.to(to) if to is not None and t.is_floating_point() else t

    return tree_map(leaf, obj)


def _collect_like_dtypes(obj: Any, like: list, out: dict) -> None:
    """For :func:`to_torch_tree`: ``out[id(array)] = like[k].dtype`` for entry ``k`` of every list or tuple in
    ``obj`` that holds one array per tensor of ``like``, each of its tensor's shape (``like[k]`` floating)."""
    if isinstance(obj, dict):
        for v in obj.values():
            _collect_like_dtypes(v, like, out)
    elif isinstance(obj, (list, tuple)):
        if (not hasattr(obj, "_fields") and len(obj) == len(like)
                and all(isinstance(x, np.ndarray) and hasattr(t, "is_floating_point") and x.shape == tuple(t.shape)
                        for x, t in zip(obj, like))):
            out.update((id(x), t.dtype) for x, t in zip(obj, like) if t.is_floating_point())
        else:
            for v in obj:
                _collect_like_dtypes(v, like, out)


def _numpy_tree(obj: Any, copy: bool) -> Any:
    """:func:`to_numpy_tree`; with ``copy=False`` a C-contiguous array or CPU tensor is shared, not
    copied (a new array object all the same, so it pickles exactly as its copy would): for a tree
    pickled at once, which then needs no second copy of the state in memory."""
    if obj is None or isinstance(obj, (str, bool, int, float, np.generic)):
        return obj
    if hasattr(obj, "detach"):
        t = obj.detach().cpu()
        try:
            a = t.numpy()
        except TypeError:  # a dtype numpy lacks
            if not t.is_floating_point():
                raise
            return t.float().numpy()
        return a.copy() if copy or not a.flags.c_contiguous else a
    if isinstance(obj, np.ndarray):
        return obj.copy() if copy or not obj.flags.c_contiguous else obj.view()
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*[_numpy_tree(v, copy) for v in obj])
    if isinstance(obj, (list, tuple)):
        return type(obj)(_numpy_tree(v, copy) for v in obj)
    if isinstance(obj, dict):
        return {k: _numpy_tree(v, copy) for k, v in obj.items()}
    return obj


def default_checkpoint_path(out: Optional[os.PathLike]) -> Optional[Path]:
    """``<out>.ckpt`` (``None`` without ``--out``): where the CLI keeps a run's checkpoint next to its
    result file.

    Example
    -------
    >>> default_checkpoint_path("results/run.json").name, default_checkpoint_path(None)
    ('run.json.ckpt', None)
    """
    return None if out is None else Path(os.fspath(out) + ".ckpt")


def save_checkpoint(path: os.PathLike, *, config: Mapping, round_done: int, state: Any, history: list,
                    initial: Optional[Mapping] = None, seed: Optional[int] = None, kind: str = "run",
                    extra: Optional[Mapping] = None, who: str = "save_checkpoint") -> Path:
    """Write a checkpoint atomically (temporary file, fsync, :func:`os.replace`).

    ``round_done`` (rounds done, >= 0) and ``seed`` (>= 0, or ``None``) must be integers: they are
    the RNG state (see the module docstring), so a float or negative value is refused, not rounded.
    ``state`` is stored through :func:`to_numpy_tree`; ``history`` is a list of mappings, ``initial`` and
    ``extra`` mappings or ``None`` (``{}``); the folder must exist (a :class:`CheckpointError` naming what is wrong
    otherwise; its message starts with ``who``: the command line passes its flag, ``--checkpoint``). Returns the
    path. The file is the pickle, then ``FOOTER`` and 64 hex digits. :func:`load_checkpoint` returns the parts
    named in ``PARTS``: ``round_done`` comes back as ``["round"]`` (and as ``["rng"]["next_round"]``), ``seed`` as
    ``["rng"]["seed"]``, the others under their own names.

    ``kind`` labels what wrote it (default ``"run"``); :func:`load_checkpoint` refuses a checkpoint of another ``kind``
    when asked for one.

    Example
    -------
    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = save_checkpoint(os.path.join(folder, "run.ckpt"), config={"rounds": 3}, round_done=1,
    ...                            state={"w": [0.5]}, history=[{"round": 0}], seed=0)
    ...     data = path.read_bytes()
    >>> data[-64 - len(FOOTER):-64] == FOOTER, len(data[-64:].decode("ascii"))
    (True, 64)
    """
    path = Path(path)
    round_done = check_int("round_done", round_done, minimum=0)
    if seed is not None:
        seed = check_int("seed", seed, minimum=0)
    if not isinstance(config, Mapping):
        raise CheckpointError(f"{_where(who, path)}: config must be a mapping, got {type(config).__name__}")
    if isinstance(history, (str, bytes, Mapping)) or not hasattr(history, "__iter__"):
        raise CheckpointError(f"{_where(who, path)}: history must be a list of per-round mappings, got "
                              f"{type(history).__name__}")
    doc = {"format": FORMAT, "kind": kind, "config": dict(config), "round": round_done,
           "state": _numpy_tree(state, False),
           "history": [_mapping(who, path, f"history[{k}]", h) for k, h in enumerate(history)],
           "initial": {} if initial is None else _mapping(who, path, "initial", initial),
           "rng": {"seed": seed, "next_round": round_done,
                   "note": "all draws come from (seed, purpose, round, client) streams; nothing else carries state"},
           "extra": {} if extra is None else _mapping(who, path, "extra", extra)}
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise CheckpointError(f"{_where(who, path)}: folder {folder} does not exist")

    def write(fh) -> None:  # the bytes of pickle.dumps(doc, protocol=4) + footer, streamed: no copy of them in memory
        sha = _HashingWriter(fh)
        pickle.Pickler(sha, protocol=4).dump(doc)
        fh.write(FOOTER + sha.hexdigest().encode("ascii"))

    atomic_write(path, write)
    return path


def _where(who: str, path: Path) -> str:
    """The start of :func:`save_checkpoint`'s messages: the flag and its value (``--checkpoint run.ckpt``) or the
    function and the file (``save_checkpoint: run.ckpt``)."""
    return f"{who} {path}" if who.startswith("--") else f"{who}: {path}"


def _mapping(who: str, path: Path, name: str, value: Any) -> dict:
    """``dict(value)``, or a :class:`CheckpointError` naming ``name`` (``dict(3)`` said only "'int' object is not
    iterable"; the ``TypeError``, ``ValueError`` or ``RuntimeError`` that ``dict`` raises on a value it cannot take)."""
    try:
        return dict(value)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise CheckpointError(f"{_where(who, path)}: {name} must be a mapping (a dict of names to values), got "
                              f"{type(value).__name__} ({exc})") from None


class _HashingWriter:
    """A binary file's ``write`` that also feeds SHA-256 with what it writes."""

    def __init__(self, fh):
        self._fh, self._sha = fh, hashlib.sha256()

    def write(self, data) -> int:
        self._sha.update(data)
        return self._fh.write(data)

    def hexdigest(self) -> str:
        return self._sha.hexdigest()


_CHUNK = 1 << 20


def _file_version(fh) -> tuple:
    """Size and modification time of an open file: they change when it is written in place (not when
    an atomic save replaces the path: the open file keeps its contents, as its ctime alone changes)."""
    st = os.fstat(fh.fileno())
    return st.st_size, st.st_mtime_ns


def _has_footer(path: os.PathLike) -> bool:
    """Whether the file ``path`` ends with a checkpoint's footer (``FOOTER`` and the 64 bytes of its digest, which is
    neither checked nor hashed here: a corrupt checkpoint counts too); reads only that end of the file, and an
    unreadable file is no checkpoint."""
    size = len(FOOTER) + 64
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            if fh.tell() < size:
                return False
            fh.seek(-size, os.SEEK_END)
            return fh.read(size)[:-64] == FOOTER
    except OSError:
        return False


def _check_footer(who: str, path: Path, fh, length: int) -> None:
    """Refuse a file (open, ``length`` bytes) whose pickle does not match the SHA-256 in its footer
    (files without one pass); reads it in chunks."""
    size = len(FOOTER) + 64
    if length < size:
        return
    fh.seek(length - size)
    tail = fh.read(size)
    if tail[:-64] != FOOTER:
        return
    sha, left = hashlib.sha256(), length - size
    fh.seek(0)
    while left > 0:
        chunk = fh.read(min(_CHUNK, left))
        if not chunk:  # the file shrank while being read: what is left cannot match
            break
        sha.update(chunk)
        left -= len(chunk)
    if left or sha.hexdigest().encode("ascii") != tail[-64:]:
        raise CheckpointError(f"{who}: checkpoint {path} is corrupt: its SHA-256 does not match its contents "
                              "(damaged after it was written); resume from another copy, or delete it to start over",
                              reason="corrupt: its SHA-256 footer does not match its contents (damaged after it was "
                                     "written)")


def load_checkpoint(path: os.PathLike, kind: Optional[str] = None, *, who: str = "load_checkpoint") -> dict:
    """Read a checkpoint; :class:`CheckpointError` names the file and the problem: missing,
    truncated or not a pickle, a SHA-256 that does not match (see the module docstring), a file
    written in place while it was read (it is read twice: hashed, then unpickled), another
    format or ``kind``, or a part of ``PARTS`` missing or of the wrong type. Its message starts with ``who``
    (the command line passes its flag, ``--resume``).

    Example
    -------
    A run of 3 rounds saved after round 0 by :func:`fedlib.engines.batched.run_batched`'s ``on_round_end``
    and resumed from the file ends where the run without a break ends, bit for bit (FedNova with server
    momentum: the momentum buffer is in the checkpoint too); one flipped bit in the file is refused:

    >>> import os, tempfile
    >>> import numpy as np
    >>> from fedlib.algorithms import make_algorithm
    >>> from fedlib.data import synthetic
    >>> from fedlib.engines.batched import run_batched
    >>> from fedlib.problems.logistic import LogisticProblem
    >>> from fedlib.schedules import FixedSteps
    >>> from fedlib.server import momentum
    >>> from fedlib.solvers import sgd
    >>> problem = LogisticProblem(synthetic(num_clients=2, dim=3, num_classes=2, num_samples=[10, 20], seed=0))
    >>> algorithm, schedule = make_algorithm("fednova", sgd(0.1), momentum(0.9)), FixedSteps([1, 2])
    >>> folder = tempfile.TemporaryDirectory()
    >>> path = os.path.join(folder.name, "run.ckpt")
    >>> def save(state, history, initial):
    ...     _ = save_checkpoint(path, config={"rounds": 3}, round_done=len(history), state=state, history=history,
    ...                         initial=initial, seed=0)
    >>> _ = run_batched(algorithm, problem, schedule, 1, batch_size=5, on_round_end=save)   # then a crash
    >>> checkpoint = load_checkpoint(path)
    >>> checkpoint["round"], checkpoint["rng"]  # doctest: +NORMALIZE_WHITESPACE
    (1, {'seed': 0, 'next_round': 1,
         'note': 'all draws come from (seed, purpose, round, client) streams; nothing else carries state'})
    >>> resumed = run_batched(algorithm, problem, schedule, 3, batch_size=5, resume=checkpoint)
    >>> straight = run_batched(algorithm, problem, schedule, 3, batch_size=5)
    >>> bool(np.array_equal(resumed.params["W"], straight.params["W"])), len(resumed.history)
    (True, 3)
    >>> data = bytearray(open(path, "rb").read())
    >>> data[40] ^= 1
    >>> _ = open(path, "wb").write(bytes(data))
    >>> try:
    ...     load_checkpoint(path)
    ... except CheckpointError as error:
    ...     print(error.reason)
    corrupt: its SHA-256 footer does not match its contents (damaged after it was written)
    >>> folder.cleanup()
    """
    path = Path(path)
    if kind is not None and not isinstance(kind, str):  # an array made `doc.get("kind") != kind` ambiguous
        raise ValueError(f"kind must be None or a string such as 'run', got {kind!r}")
    try:
        with open(path, "rb") as fh:
            before = _file_version(fh)
            length = before[0]
            _check_footer(who, path, fh, length)
            fh.seek(0)
            doc, failure = None, None
            try:
                doc = pickle.load(fh)
            except OSError:
                raise
            except Exception as exc:  # noqa: BLE001 - truncated / foreign file
                failure = exc
            # the file is read twice (hashed, then unpickled): one rewritten in place in between (cp, a
            # copy tool writing into it) would be unpickled unchecked; fedlib's own writes replace it
            if _file_version(fh) != before:
                raise CheckpointError(f"{who}: checkpoint {path} changed while it was read (written in place by "
                                      "another program?); resume once it is complete",
                                      reason="changed while it was read") from None
            if failure is not None:
                raise CheckpointError(f"{who}: checkpoint {path} is corrupt or not a fedlib checkpoint ({failure})",
                                      reason=f"truncated, corrupt or not a fedlib checkpoint: it does not unpickle "
                                             f"({type(failure).__name__}: {failure})" if length else "empty (0 bytes)"
                                      ) from None
    except FileNotFoundError:
        raise CheckpointError(f"{who}: checkpoint {path} not found", reason="not found") from None
    except OSError as exc:
        raise CheckpointError(f"{who}: checkpoint {path} cannot be read ({exc.strerror or exc})",
                              reason=f"unreadable ({exc.strerror or exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CheckpointError(f"{who}: {path} is not a {FORMAT} checkpoint",
                              reason=f"not a fedlib checkpoint (a pickle without the format tag {FORMAT!r})")
    if kind is not None and doc.get("kind") != kind:
        raise CheckpointError(f"{who}: {path} is a checkpoint of {kind_name(doc.get('kind'))}, not of "
                              f"{kind_name(kind)}",
                              reason=f"a fedlib checkpoint of another command ({kind_name(doc.get('kind'))})")
    types = {"config": Mapping, "round": int, "history": list, "initial": Mapping, "rng": Mapping, "extra": Mapping}
    for part in PARTS:
        if part not in doc:
            raise CheckpointError(f"{who}: checkpoint {path} is corrupt or not a fedlib checkpoint: it has no "
                                  f"{part!r}", reason=f"corrupt: it has no {part!r}")
        want = types.get(part)
        if want is not None and (not isinstance(doc[part], want) or isinstance(doc[part], bool)):
            raise CheckpointError(f"{who}: checkpoint {path} is corrupt or not a fedlib checkpoint: its {part!r} "
                                  f"is {a_type(doc[part])}, not a {want.__name__}",
                                  reason=f"corrupt: its {part!r} is {a_type(doc[part])}, not a "
                                         f"{want.__name__}")
    if doc["round"] < 0:
        raise CheckpointError(f"{who}: checkpoint {path} is corrupt: round {doc['round']} < 0",
                              reason=f"corrupt: round {doc['round']} < 0")
    return doc


def _nan_kind(v: Any) -> Any:
    """``"nan"`` for a NaN number (float, complex, ``Decimal``, numpy's), ``"M"`` / ``"m"`` for numpy's NaT
    datetime64 / timedelta64 scalar, ``None`` for anything else: values equal to no value, themselves included."""
    if isinstance(v, (np.datetime64, np.timedelta64)):
        return v.dtype.kind if np.isnat(v) else None
    if not isinstance(v, numbers.Number) or isinstance(v, (bool, np.bool_)):
        return None
    try:
        return "nan" if v != v else None
    except ArithmeticError:  # Decimal("sNaN") refuses to be compared
        return "nan"


def _same_set(x: Any, y: Any) -> bool:
    """Two sets hold the same values by :func:`_same`, each entry of ``x`` matched to its own entry of ``y``: ``==``
    finds a NaN only by identity (a set read back from a checkpoint holds other NaN objects) and takes ``True``
    for ``1``."""
    rest = list(y)
    if len(x) != len(rest):
        return False
    for u in x:
        match = next((k for k, v in enumerate(rest) if _same(u, v)), None)
        if match is None:
            return False
        rest.pop(match)
    return True


def _same(x: Any, y: Any) -> bool:
    """Config values equal: numpy arrays (and torch tensors, as their numpy arrays) by shape and entries, NaN
    equal to NaN and NaT to NaT (a NaN in a config would otherwise refuse every resume), sequences entry by entry,
    sets entry by entry, a value always equal to itself; a bool never equals a number (``True`` and ``1`` mean
    different settings)."""
    if x is y:
        return True
    x, y = (_numpy_tree(v, False) if hasattr(v, "detach") else v for v in (x, y))
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        xa, ya = np.asarray(x), np.asarray(y)
        if xa.shape != ya.shape or xa.dtype.kind in "OSUV" or ya.dtype.kind in "OSUV":
            return xa.shape == ya.shape and all(_same(u, v) for u, v in zip(xa.ravel().tolist(), ya.ravel().tolist()))
        if (xa.dtype.kind in "Mm" or ya.dtype.kind in "Mm") and xa.dtype.kind != ya.dtype.kind:
            return False  # a date or duration is no number (numpy 1.x warns comparing them elementwise)
        if (xa.dtype.kind == "b") != (ya.dtype.kind == "b") or any(
                bool_entry(v) is not None and va.dtype.kind != "b" for v, va in ((x, xa), (y, ya))):
            return False  # bools against numbers (a list of bools and numbers is an array of numbers)
        nan = xa.dtype.kind in "fc" and ya.dtype.kind in "fc" or xa.dtype.kind in "Mm"  # NaN / NaT alike
        return bool(np.array_equal(xa, ya, equal_nan=nan))
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and all(_same(u, v) for u, v in zip(x, y))
    if isinstance(x, Mapping) and isinstance(y, Mapping):
        return set(x) == set(y) and all(_same(x[k], y[k]) for k in x)
    if isinstance(x, (set, frozenset)) and isinstance(y, (set, frozenset)):
        return _same_set(x, y)
    if is_bool(x) != is_bool(y):
        return False
    nan = _nan_kind(x)
    if nan is not None or _nan_kind(y) is not None:
        return nan == _nan_kind(y)
    try:
        return bool(x == y)
    except (TypeError, ValueError):  # an object whose == is not a truth value
        return False


def _diff_paths(a: Mapping, b: Mapping, prefix: tuple = ()) -> list:
    out = []
    for key in sorted(set(a) | set(b), key=str):
        path = prefix + (key,)
        if key not in a or key not in b:
            out.append(path)
        elif isinstance(a[key], Mapping) and isinstance(b[key], Mapping):
            out.extend(_diff_paths(a[key], b[key], path))
        elif not _same(a[key], b[key]):
            out.append(path)
    return out


def config_diff(a: Mapping, b: Mapping, prefix: str = "") -> list:
    """Dotted keys whose values differ between two (nested) config dicts (numpy arrays and torch tensors
    compared entry by entry, sets entry by entry, NaN equal to NaN and NaT to NaT, so a config never differs from
    itself; a bool differs from a number: ``True`` is no ``1``), sorted; a key in one dict only differs too. ``a``
    and ``b`` must be mappings (a ``ValueError`` naming them otherwise).

    ``prefix`` is put before every dotted key returned (default ``""``).

    Example
    -------
    >>> saved = {"lr": 0.1, "data": {"clients": 30, "alpha": float("nan")}}
    >>> config_diff(saved, {"lr": 0.05, "data": {"clients": 30, "alpha": float("nan")}, "seed": 1})
    ['lr', 'seed']
    >>> config_diff(saved, {"lr": 0.1, "data": {"clients": 20, "alpha": float("nan")}})
    ['data.clients']
    >>> config_diff({"shuffle": True, "clients": 30}, {"shuffle": 1, "clients": 30.0})
    ['shuffle']
    """
    if not isinstance(a, Mapping) or not isinstance(b, Mapping):
        raise ValueError(f"a and b must be config mappings, got {type(a).__name__} and {type(b).__name__}")
    return [prefix + ".".join(str(k) for k in path) for path in _diff_paths(a, b)]


def check_config(path: os.PathLike, saved: Mapping, current: Mapping, *, who: str = "check_config",
                 hint: str = "") -> None:
    """Refuse to resume a checkpoint written by another configuration.

    The message starts with ``who`` (the flag or command that resumes) and ends with
    ``hint`` (what to do about it), after the differing keys and both values of each
    (:func:`config_diff`'s keys, at most 8 listed).

    ``path`` is the checkpoint's file (named in the message); ``saved`` is the configuration it holds and ``current``
    the one of the run that resumes, both mappings (``CheckpointError`` otherwise).

    Example
    -------
    >>> check_config("run.ckpt", {"lr": 0.1}, {"lr": 0.1})          # the same run: nothing to say
    >>> check_config("run.ckpt", {"lr": 0.1}, {"lr": 0.05}, hint="rerun with --lr 0.1")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    fedlib.checkpoint.CheckpointError: check_config: checkpoint run.ckpt was written by another configuration;
    differing keys: lr (checkpoint 0.1, now 0.05); rerun with --lr 0.1
    """
    if not isinstance(saved, Mapping) or not isinstance(current, Mapping):
        raise CheckpointError(f"{who}: checkpoint {path}: a config must be a mapping, got "
                              f"{type(saved).__name__} and {type(current).__name__}")
    diff = _diff_paths(dict(saved), dict(current))
    if diff:
        detail = ", ".join(f"{'.'.join(str(k) for k in p)} (checkpoint {_get(saved, p)!r}, now {_get(current, p)!r})"
                           for p in diff[:8])
        raise CheckpointError(f"{who}: checkpoint {path} was written by another configuration; "
                              f"differing keys: {detail}" + (f"; {hint}" if hint else ""))


def _get(cfg: Mapping, path: tuple):
    cur: Any = cfg
    for part in path:
        if not isinstance(cur, Mapping) or part not in cur:
            return "<missing>"
        cur = cur[part]
    return cur

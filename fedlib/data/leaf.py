"""Read and write federated data in the LEAF / FedProx JSON format.

One JSON file holds some users::

    {"users": ["f_00000", ...],
     "num_samples": [123, ...],
     "user_data": {"f_00000": {"x": [[0.1, ...], ...], "y": [3, ...]}, ...}}

:func:`load_leaf` accepts

* a single ``.json`` file: training data only (every client gets an empty test set);
* a folder with ``train/`` (and usually ``test/``) subfolders of ``.json`` files, the
  layout of the FedProx release (``data/synthetic_1_1/data/train/*.json`` and
  ``.../test/*.json``);
* a folder of ``.json`` files: training data only.

Files in a folder are read in sorted name order and merged by user: a user listed in
several files gets their samples concatenated in that order (the readers of LEAF and
FedProx keep only the last file's samples of such a user).  Clients are the training
users sorted by id, as in those readers (``sorted(data.keys())``), so client ``i`` here is
client ``i`` there; ``client_order="appearance"`` keeps the order in which users first
appear in the ``"users"`` lists of the training files instead.  Labels
may be written as integer-valued floats (``3.0``), as the FedProx generator does.
(For speed, ``x`` is converted by numpy in one go, so a stray JSON ``true``/``false``
among numbers in ``x`` reads as 1/0; in ``y`` it is rejected.)

Every problem is reported as a :class:`ValueError` whose message starts with the file
(or folder) concerned.  The book's chapters generate Synthetic(1,1) in memory
(:mod:`fedlib.data.synthetic`); ``python -m fedlib run synthetic --data PATH`` runs on a LEAF data
set instead (FedProx's released ``synthetic_1_1`` files, say).

Example
-------
>>> import tempfile
>>> from fedlib.data.synthetic import synthetic
>>> ds = synthetic(num_clients=3, seed=0)
>>> with tempfile.TemporaryDirectory() as tmp:
...     files = save_leaf(ds, tmp)
...     back = load_leaf(tmp, num_classes=10)
>>> back.num_clients, back.meta["users"][0]
(3, 'f_00000')
>>> bool((back.train_x[2] == ds.train_x[2]).all())
True
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from .._io import atomic_write, atomic_write_all, read_json
from .._validate import check_flag, check_int, check_path, is_choice
from .clients import FederatedDataset
from .partition import _MAX_CLASSES

__all__ = ["load_leaf", "save_leaf"]

_KEYS = ("users", "num_samples", "user_data")


# ----------------------------------------------------------------------------- reading


def _is_data_name(file: Path) -> bool:
    """Whether a file of a folder that :func:`load_leaf` reads is one of its data files (by its name)."""
    return file.suffix.lower() == ".json"


def _json_files(folder: Path) -> list[Path]:
    files = sorted(p for p in folder.iterdir() if p.is_file() and _is_data_name(p))
    if not files:
        raise ValueError(f"{folder}: folder contains no .json files")
    return files


def _data_folders(root: Path) -> list[Path]:
    """The folders whose ``.json`` files :func:`load_leaf` reads from the folder ``root``: ``root/train``
    and, if it is a folder, ``root/test`` when ``root/train`` is a folder, else ``root`` itself.
    ``ValueError`` when ``root`` has a ``test/`` subfolder but no ``train/`` one (nothing is read)."""
    if (root / "train").is_dir():
        return [root / "train"] + ([root / "test"] if (root / "test").is_dir() else [])
    if (root / "test").is_dir():
        raise ValueError(f"{root}: has a test/ subfolder but no train/ subfolder")
    return [root]


def _reads_as_data(root, file) -> bool:
    """Whether :func:`load_leaf` of the folder ``root`` would read a file written at ``file`` as data: a
    name ending in ``.json`` directly in one of the folders it reads (``train/`` and ``test/``, else
    ``root``), as the path itself or, for a symbolic link, the file it points to. Other files in
    ``root`` (a checkpoint, ``root/r.json`` next to ``train/``, anything in other subfolders) are never
    read; neither is anything in a folder that :func:`load_leaf` refuses (``test/`` without ``train/``).
    Used by the command line to refuse an output that the next run would read as data."""
    try:
        folders = {os.path.realpath(f) for f in _data_folders(Path(root))}
    except ValueError:
        return False
    file = Path(file)
    entries = (Path(os.path.realpath(file.parent)) / file.name, Path(os.path.realpath(file)))
    return any(_is_data_name(e) and str(e.parent) in folders for e in entries)


def _as_features(file: Path, user: str, x) -> np.ndarray:
    """Check and convert one user's ``x`` to a float64 ``(n, d)`` array."""
    where = f"{file}: user {user!r} x"
    if not isinstance(x, list):
        raise ValueError(f"{where} must be a list of rows, got {type(x).__name__}")
    if len(x) == 0:
        return np.zeros((0, 0))
    try:
        arr = np.array(x)
    except ValueError:
        arr = None  # ragged; located below
    if arr is None or arr.ndim != 2:
        for i, row in enumerate(x):
            if not isinstance(row, list):
                raise ValueError(f"{where} row {i} is not a list of numbers (got {type(row).__name__})")
            if len(row) != len(x[0]):
                raise ValueError(f"{where} is ragged: row 0 has {len(x[0])} values, row {i} has {len(row)}")
        raise ValueError(f"{where} must be a list of rows of numbers (nested too deeply)")
    if arr.dtype.kind not in "iuf":
        raise ValueError(f"{where} holds non-numeric values (parsed as dtype {arr.dtype})")
    if arr.shape[1] == 0:
        raise ValueError(f"{where} rows are empty (0 features)")
    arr = arr.astype(np.float64)
    finite = np.isfinite(arr).all(axis=1)
    if not finite.all():
        raise ValueError(f"{where} contains NaN or inf (row {int(np.flatnonzero(~finite)[0])})")
    return arr


def _as_labels(file: Path, user: str, y, num_classes: int | None) -> np.ndarray:
    """Check and convert one user's ``y`` (integers, or integer-valued floats) to int64."""
    where = f"{file}: user {user!r} y"
    if not isinstance(y, list):
        raise ValueError(f"{where} must be a list of labels, got {type(y).__name__}")
    if len(y) == 0:
        return np.zeros(0, dtype=np.int64)
    try:
        arr = np.array(y)
    except ValueError:
        arr = np.array(y, dtype=object)
    if arr.ndim != 1 or arr.dtype.kind not in "iuf" or any(type(v) is bool for v in y):
        bad = next((i for i, v in enumerate(y) if isinstance(v, bool) or not isinstance(v, (int, float))), None)
        if bad is None:  # only numbers, but some integer too large for int64 (an object array)
            bad = next(i for i, v in enumerate(y) if isinstance(v, int) and not -2**63 <= v < 2**63)
            raise ValueError(f"{where}[{bad}] = {y[bad]!r} is too large for a label")
        raise ValueError(f"{where}[{bad}] = {y[bad]!r} is not an integer label")
    if arr.dtype.kind == "f":
        ok = np.isfinite(arr) & (arr == np.round(arr))
        if not ok.all():
            bad = int(np.flatnonzero(~ok)[0])
            raise ValueError(f"{where}[{bad}] = {y[bad]!r} is not an integer label")
    lo, hi = arr.min(), arr.max()
    if lo < 0:
        bad = int(np.argmin(arr))
        raise ValueError(f"{where}[{bad}] = {y[bad]!r} is negative")
    if hi >= 2**62:  # no real label set has that many classes; int64 (and float rounding) end near here
        bad = int(np.argmax(arr))
        raise ValueError(f"{where}[{bad}] = {y[bad]!r} is too large for a label")
    if num_classes is not None and hi >= num_classes:
        bad = int(np.argmax(arr))
        raise ValueError(f"{where}[{bad}] = {y[bad]!r} is out of range [0, {num_classes})")
    if num_classes is None and hi >= _MAX_CLASSES:  # the class count comes from the largest label
        bad = int(np.argmax(arr))
        raise ValueError(f"{where}[{bad}] = {y[bad]!r} would make num_classes {int(hi) + 1} (the largest label plus "
                         f"one; a model has one output per class), more than the {_MAX_CLASSES} inferred at most: "
                         "labels must be class numbers 0..K-1, not ids; renumber them, or give num_classes")
    return arr.astype(np.int64)


def _unique_keys(file: Path):
    """``object_pairs_hook`` refusing a key written twice in one JSON object: ``json`` keeps only
    the last, so a user written twice in ``user_data`` would silently lose the first copy's data."""
    def hook(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"{file}: key {key!r} appears twice in one JSON object (e.g. a user written "
                                 "twice in 'user_data'); a JSON reader keeps only the last copy")
            seen.add(key)
        return dict(pairs)
    return hook


def _read_file(file: Path, num_classes: int | None):
    """Parse one LEAF file into ``(users, {user: (x, y)})`` after checking it."""
    doc = read_json(file, object_pairs_hook=_unique_keys(file))
    if not isinstance(doc, dict):
        raise ValueError(f"{file}: top level must be a JSON object with keys {list(_KEYS)}")
    missing = [k for k in _KEYS if k not in doc]
    if missing:
        raise ValueError(f"{file}: missing key(s) {missing} (need {list(_KEYS)})")
    users, counts, data = doc["users"], doc["num_samples"], doc["user_data"]
    if not isinstance(users, list) or not all(isinstance(u, str) for u in users):
        raise ValueError(f"{file}: 'users' must be a list of strings")
    if len(set(users)) != len(users):
        dup = next(u for u in users if users.count(u) > 1)
        raise ValueError(f"{file}: user {dup!r} is listed twice in 'users'")
    if not isinstance(counts, list) or len(counts) != len(users):
        got = len(counts) if isinstance(counts, list) else type(counts).__name__
        raise ValueError(f"{file}: 'num_samples' must be a list with one count per user ({len(users)}), got {got}")
    if not isinstance(data, dict):
        raise ValueError(f"{file}: 'user_data' must be an object mapping user -> {{x, y}}")
    listed = set(users)
    unlisted = [u for u in data if u not in listed]
    if unlisted:  # LEAF's and FedProx's readers take the clients from user_data's keys: they would disagree
        raise ValueError(f"{file}: user {unlisted[0]!r} is in 'user_data' but not in 'users'"
                         + (f" ({len(unlisted)} such users)" if len(unlisted) > 1 else ""))
    parsed = {}
    for user, count in zip(users, counts):
        if user not in data:
            raise ValueError(f"{file}: user {user!r} is in 'users' but missing from 'user_data'")
        entry = data[user]
        if not isinstance(entry, dict) or "x" not in entry or "y" not in entry:
            raise ValueError(f"{file}: user {user!r} user_data must be an object with keys 'x' and 'y'")
        x = _as_features(file, user, entry["x"])
        y = _as_labels(file, user, entry["y"], num_classes)
        if len(x) != len(y):
            raise ValueError(f"{file}: user {user!r} has {len(x)} rows of x but {len(y)} labels y")
        if isinstance(count, bool) or not isinstance(count, int):
            raise ValueError(f"{file}: user {user!r} num_samples = {count!r} is not an integer")
        if count != len(y):
            raise ValueError(
                f"{file}: user {user!r} num_samples = {count!r} disagrees with its data length {len(y)}"
            )
        parsed[user] = (x, y)
    return users, parsed


def _read_split(files: list[Path], num_classes: int | None):
    """Read and merge several files: ``(user order, {user: (x, y)}, {user: first file})``."""
    order: list[str] = []
    merged: dict[str, list] = {}
    origin: dict[str, Path] = {}
    dim, dim_file = None, None
    for file in files:
        users, parsed = _read_file(file, num_classes)
        for user in users:
            x, y = parsed[user]
            if len(x):
                if dim is None:
                    dim, dim_file = x.shape[1], file
                elif x.shape[1] != dim:
                    raise ValueError(
                        f"{file}: user {user!r} x has {x.shape[1]} features, but {dim_file} has {dim}"
                    )
            if user not in merged:
                order.append(user)
                merged[user] = []
                origin[user] = file
            merged[user].append((x, y))
    out = {}
    for user, parts in merged.items():
        xs = [x for x, _ in parts if len(x)]
        x = np.concatenate(xs) if xs else np.zeros((0, dim or 0))
        y = np.concatenate([y for _, y in parts]).astype(np.int64)
        out[user] = (x, y)
    return order, out, origin, dim, dim_file


def load_leaf(path, num_classes: int | None = None, name: str | None = None, *,
              client_order: str = "sorted") -> FederatedDataset:
    """Load a LEAF / FedProx JSON data set (see the module docstring for the layouts).

    Parameters
    ----------
    path:
        A ``.json`` file, a folder with ``train/`` (and optionally ``test/``) subfolders
        of ``.json`` files, or a folder of ``.json`` files.
    num_classes:
        Number of labels (>= 2); every label must lie in ``[0, num_classes)``.  Default:
        largest label over train and test plus one, and at least 2; at most 1,000,000 (as
        :func:`~fedlib.data.partition.dirichlet_partition`): a larger label is refused, naming
        it, as an id rather than a class number (the data set's models would have one output
        per class).
    name:
        Name of the returned data set; default ``str(path)``.
    client_order:
        ``"sorted"`` (default): clients are the training users sorted by id, the order of
        LEAF's and FedProx's ``read_data``; ``"appearance"``: in the order users first
        appear in the ``"users"`` lists of the training files (files in name order).

    Returns
    -------
    FederatedDataset
        One client per training user, in ``client_order``.  ``meta`` holds
        ``source``, ``users``, ``train_files``, ``test_files`` and ``has_test``.

    Raises
    ------
    ValueError
        Naming the file and the problem: missing file or folder, invalid JSON, missing
        keys, a key written twice in one JSON object (``json`` would keep only the last
        copy, e.g. of a user's data), ``num_samples`` disagreeing with the data, a listed user absent from
        ``user_data``, ragged / non-numeric / non-finite ``x``, non-integer or
        out-of-range labels, a user without training samples, different user sets in
        train and test, inconsistent feature dimensions.

    Example
    -------
    A one-file data set written by hand: user ``"b"`` (listed first) has one sample whose label is
    written ``2.0``, user ``"a"`` three.  Clients come sorted by id, so :math:`n = (3, 1)` and
    :math:`p = (3/4, 1/4)`; the default ``num_classes`` is the largest label plus one, 3; a single
    file gives empty test sets:

    >>> import json, tempfile
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     file = Path(tmp) / "train.json"
    ...     _ = file.write_text(json.dumps({
    ...         "users": ["b", "a"], "num_samples": [1, 3],
    ...         "user_data": {"b": {"x": [[1.0, 2.0]], "y": [2.0]},
    ...                       "a": {"x": [[0.0, 0.0], [0.0, 1.0], [1.0, 0.0]], "y": [0, 1, 1]}}}))
    ...     ds = load_leaf(file)
    ...     in_file_order = load_leaf(file, client_order="appearance").meta["users"]
    >>> ds.meta["users"], ds.num_samples.tolist(), ds.weights.tolist(), ds.num_classes
    (['a', 'b'], [3, 1], [0.75, 0.25], 3)
    >>> ds.train_y[1].tolist(), [len(y) for y in ds.test_y], in_file_order
    ([2], [0, 0], ['b', 'a'])

    A path that does not exist is refused, naming it:

    >>> load_leaf("no/such/folder")
    Traceback (most recent call last):
    ...
    ValueError: no/such/folder: no such file or folder
    """
    if num_classes is not None:
        num_classes = check_int("num_classes", num_classes, minimum=2)
    if not is_choice(client_order, ("sorted", "appearance")):  # an array is none (not numpy's 'truth value ... ambiguous')
        raise ValueError(f"client_order must be 'sorted' or 'appearance', got {client_order!r}")
    root = check_path("path", path)
    if not root.exists():
        raise ValueError(f"{root}: no such file or folder")
    if root.is_file():
        train_files, test_files = [root], []
    elif not root.is_dir():  # a device or FIFO (/dev/null): iterdir() raised NotADirectoryError, naming no argument
        raise ValueError(f"{root}: neither a file nor a folder (a device, FIFO or socket)")
    else:  # train/ and test/, else root itself (_reads_as_data's folders)
        train_folder, *test_folder = _data_folders(root)
        train_files = _json_files(train_folder)
        test_files = _json_files(test_folder[0]) if test_folder else []

    users, train, origin, dim, dim_file = _read_split(train_files, num_classes)
    if client_order == "sorted":
        users = sorted(users)
    train_where = train_files[0] if len(train_files) == 1 else train_files[0].parent
    if not users:
        raise ValueError(f"{train_where}: no users")
    for user in users:
        if len(train[user][1]) == 0:
            raise ValueError(f"{origin[user]}: user {user!r} has no training samples (empty client)")

    if test_files:
        test_users, test, _, tdim, tdim_file = _read_split(test_files, num_classes)
        test_where = test_files[0].parent
        if set(test_users) != set(users):
            only_train = sorted(set(users) - set(test_users))
            only_test = sorted(set(test_users) - set(users))
            raise ValueError(
                f"{test_where}: test users differ from train users ({train_where}): "
                f"only in train {only_train[:5]}, only in test {only_test[:5]}"
            )
        if tdim is not None and tdim != dim:
            raise ValueError(f"{tdim_file}: test x has {tdim} features but train x ({dim_file}) has {dim}")
    else:
        test = {u: (np.zeros((0, dim)), np.zeros(0, dtype=np.int64)) for u in users}

    train_x = [train[u][0] for u in users]
    train_y = [train[u][1] for u in users]
    test_x = [test[u][0] if len(test[u][0]) else np.zeros((0, dim)) for u in users]
    test_y = [test[u][1] for u in users]
    if num_classes is None:
        top = max(int(y.max()) for y in train_y + test_y if len(y))
        num_classes = max(2, top + 1)
    meta = {
        "format": "leaf",
        "source": str(root),
        "users": list(users),
        "train_files": [str(f) for f in train_files],
        "test_files": [str(f) for f in test_files],
        "has_test": bool(test_files),
    }
    return FederatedDataset(
        train_x, train_y, test_x, test_y, num_classes=num_classes, name=str(root) if name is None else name, meta=meta
    )


# ----------------------------------------------------------------------------- writing


def _user_ids(dataset: FederatedDataset) -> list[str]:
    users = dataset.meta.get("users") if isinstance(dataset.meta, dict) else None
    if (
        isinstance(users, (list, tuple))
        and len(users) == dataset.num_clients
        and all(isinstance(u, str) for u in users)
        and len(set(users)) == len(users)
    ):
        return list(users)
    width = max(5, len(str(dataset.num_clients - 1)))  # ids that sort in client order (f_99999 < f_100000)
    return [f"f_{i:0{width}d}" for i in range(dataset.num_clients)]


def _document(users: list[str], xs, ys) -> dict:
    return {
        "users": users,
        "num_samples": [int(len(y)) for y in ys],
        "user_data": {
            u: {"x": np.asarray(x, dtype=np.float64).tolist(), "y": np.asarray(y).astype(np.int64).tolist()}
            for u, x, y in zip(users, xs, ys)
        },
    }


def _json_text(doc: dict) -> str:
    return json.dumps(doc, allow_nan=False)


def save_leaf(dataset: FederatedDataset, path, *, drop_test: bool = False) -> list[str]:
    """Write ``dataset`` in the LEAF JSON format that :func:`load_leaf` reads.

    Parameters
    ----------
    dataset:
        The data set.  User ids come from ``dataset.meta["users"]`` when present (one
        distinct string per client), else ``f_00000, f_00001, ...`` (more digits past
        100,000 clients, so that the ids sort in client order).
    path:
        A path ending in ``.json``: one train-only file.  Anything else is a folder
        (created if needed) that receives ``train/train.json`` and ``test/test.json``.
        Other ``.json`` files already in those subfolders would be merged by
        :func:`load_leaf`, so use a fresh folder.
    drop_test:
        A single file cannot hold the test sets; writing one while some client has
        test samples raises ``ValueError`` unless ``drop_test`` is true.

    Returns
    -------
    list of str
        The files written.  Both are written in full to temporary files in their folders
        before either replaces its target (``fedlib._io.atomic_write_all``), so an error
        or a kill while writing leaves the old pair.

    Notes
    -----
    Reading the files back with :func:`load_leaf` gives this data set when

    * ``client_order="appearance"`` is passed, or the user ids sort in client order (the
      default ids do): the default ``"sorted"`` order of LEAF's readers sorts the ids;
    * ``num_classes=dataset.num_classes`` is passed: the format has no class count, and
      the loader's default is the largest label present plus one.

    Example
    -------
    Two clients (2 and 1 training samples, 1 and 0 test samples) with labels 0 and 1 of
    ``num_classes=3``.  A folder receives a training and a test file; reading it back gives the same
    sizes, and ``num_classes`` only when it is passed (the labels alone say 2).  A single ``.json``
    file cannot hold the test sample:

    >>> import tempfile
    >>> from pathlib import Path
    >>> import numpy as np
    >>> ds = FederatedDataset([np.zeros((2, 2)), np.ones((1, 2))], [np.array([0, 1]), np.array([1])],
    ...                       [np.zeros((1, 2)), np.zeros((0, 2))], [np.array([0]), np.zeros(0, dtype=int)],
    ...                       num_classes=3)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     written = [Path(f).relative_to(tmp).as_posix() for f in save_leaf(ds, tmp)]
    ...     back, guessed = load_leaf(tmp, num_classes=3), load_leaf(tmp)
    >>> written
    ['train/train.json', 'test/test.json']
    >>> back.num_samples.tolist(), [len(y) for y in back.test_y], back.meta["users"], back.num_classes
    ([2, 1], [1, 0], ['f_00000', 'f_00001'], 3)
    >>> guessed.num_classes
    2
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     save_leaf(ds, Path(tmp) / "one.json")
    Traceback (most recent call last):
    ...
    ValueError: ...one.json: a single file holds training data only, but dataset has test samples; give a folder, or pass drop_test=True
    """
    if not isinstance(dataset, FederatedDataset):
        raise ValueError(f"dataset must be a FederatedDataset, got {type(dataset).__name__}")
    check_flag("drop_test", drop_test)  # "no" is truthy: it would drop the test sets
    users = _user_ids(dataset)
    target = check_path("path", path)
    train_doc = _document(users, dataset.train_x, dataset.train_y)
    if target.suffix.lower() == ".json":
        if not drop_test and any(len(y) for y in dataset.test_y):
            raise ValueError(
                f"{target}: a single file holds training data only, but {dataset.name} has test samples; "
                "give a folder, or pass drop_test=True"
            )
        if not target.parent.is_dir():
            raise ValueError(f"{target}: folder {target.parent} does not exist")
        atomic_write(target, _json_text(train_doc))
        return [str(target)]
    if target.exists() and not target.is_dir():
        raise ValueError(f"{target}: exists and is not a folder (a single file must end in .json)")
    (target / "train").mkdir(parents=True, exist_ok=True)
    (target / "test").mkdir(parents=True, exist_ok=True)
    train_file, test_file = target / "train" / "train.json", target / "test" / "test.json"
    atomic_write_all([(train_file, _json_text(train_doc)),
                      (test_file, _json_text(_document(users, dataset.test_x, dataset.test_y)))])
    return [str(train_file), str(test_file)]

"""CIFAR-10 as plain numpy arrays, read straight from the "python version" batch files.

Chapter 5 (Table 1) trains VGG-11 on CIFAR-10 split over 16 clients (the official setup,
paper §6).  This module only *reads* the images; partitioning is in
:mod:`fedlib.data.partition`, the model in :mod:`fedlib.models`.

On-disk layout (the official archive and torchvision's ``CIFAR10(root=...)``)::

    root/cifar-10-batches-py/data_batch_1 ... data_batch_5, test_batch, batches.meta

Each batch is a pickled ``dict`` with ``data``, an ``(n, 3072)`` uint8 array whose rows
are channel-planar RGB images (1024 red, then 1024 green, then 1024 blue values, each
plane row-major 32x32), and ``labels``, a list of ``n`` ints in ``0..9``.

The batches are unpickled directly instead of going through
``torchvision.datasets.CIFAR10``: torchvision refuses any copy whose md5 sums differ from
the official ones even when pixels, labels and order are identical (the shared copy of
this project is such a copy).  Images come back as ``(N, 32, 32, 3)`` uint8 (NHWC, the
layout of ``torchvision``'s ``.data`` attribute), in the original order, so index ``i``
here is index ``i`` of every other CIFAR-10 loader — which matters because the
Dirichlet partition of the paper is defined on the standard training order.

The small class-balanced sample shipped in ``data/cifar10-sample/`` (written by
``scripts/make_cifar_sample.py``) is loaded by :func:`load_cifar10_sample` and has the
same type, so code and tests can run without the 170 MB data set.
"""
from __future__ import annotations

import contextlib
import math
import pickle
import shlex
import socket
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .._validate import check_flag, check_int, check_path

__all__ = [
    "Cifar10Arrays",
    "load_cifar10",
    "load_cifar10_sample",
    "cifar10_random_images",
    "load_cifar10_labels",
    "DEFAULT_LABELS_PATH",
    "CIFAR10_MEAN",
    "CIFAR10_STD",
    "CIFAR10_CLASSES",
    "BATCH_FOLDER",
    "TRAIN_FILES",
    "TEST_FILE",
    "DEFAULT_SAMPLE_PATH",
]

#: Per-channel RGB mean used by the official FedNova code to normalise inputs.
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
#: Per-channel RGB "standard deviation" used by the official FedNova code.  Not the
#: pixel standard deviation of the training set (0.2470, 0.2435, 0.2616): it matches the mean over
#: images of each image's own standard deviation (0.2022, 0.1993, 0.2009).  Kept for fidelity.
CIFAR10_STD = (0.2023, 0.1994, 0.2010)
#: Class names, in label order (``batches.meta``).
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")

#: Name of the folder that holds the batch files.
BATCH_FOLDER = "cifar-10-batches-py"
#: Training batch files, in the order that defines the standard training order.
TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
#: Test batch file.
TEST_FILE = "test_batch"

_IMAGE_SHAPE = (32, 32, 3)
_ROW_LENGTH = 3 * 32 * 32
_NUM_CLASSES = len(CIFAR10_CLASSES)

#: Where :func:`load_cifar10_sample` looks by default (inside a source checkout), ``data/cifar10-sample/`` of the
#: repository.
#:
#: :meta hide-value:
DEFAULT_SAMPLE_PATH = Path(__file__).resolve().parents[2] / "data" / "cifar10-sample" / "cifar10-sample.npz"
#: Where :func:`cifar10_random_images` reads every label of the full data set (a source checkout),
#: ``data/cifar10-sample/cifar10-labels.npz`` of the repository.
#:
#: :meta hide-value:
DEFAULT_LABELS_PATH = DEFAULT_SAMPLE_PATH.with_name("cifar10-labels.npz")


class Cifar10Arrays(NamedTuple):
    """CIFAR-10 (or a subset of it) as numpy arrays.

    Attributes
    ----------
    train_images, test_images:
        ``(N, 32, 32, 3)`` uint8, NHWC, RGB, values 0..255, in the original order.
    train_labels, test_labels:
        ``(N,)`` int64 in ``0..9`` (see :data:`CIFAR10_CLASSES`).
    source:
        Where the arrays were read from (batch folder or ``.npz`` file), for messages.

    Example
    -------
    Two black training images of classes 0 and 9 and no test image; a label names its class
    through :data:`CIFAR10_CLASSES`:

    >>> import numpy as np
    >>> toy = Cifar10Arrays(np.zeros((2, 32, 32, 3), np.uint8), np.array([0, 9]),
    ...                     np.zeros((0, 32, 32, 3), np.uint8), np.zeros(0, np.int64), "toy")
    >>> toy.train_images.shape, [CIFAR10_CLASSES[k] for k in toy.train_labels]
    ((2, 32, 32, 3), ['airplane', 'truck'])
    """

    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray
    source: str


# --------------------------------------------------------------------------- real data


def _missing_message(folder: Path, missing: list[str] | None = None) -> str:
    what = f"the CIFAR-10 batch folder {folder}" if missing is None else (
        f"{', '.join(missing)} in the CIFAR-10 batch folder {folder}"
    )
    if folder.name != BATCH_FOLDER:  # a renamed batch folder: a download would go next to it
        return (f"CIFAR-10 incomplete: looked for {what} (expected files {', '.join(TRAIN_FILES)}, {TEST_FILE}); "
                "copy the missing files into it")
    return (
        f"CIFAR-10 not found: looked for {what} "
        f"(expected files {', '.join(TRAIN_FILES)}, {TEST_FILE}). "
        f"To get it, call load_cifar10({str(folder.parent)!r}, download=True) "
        "(or pass --download on the command line), which downloads the official archive "
        f"with torchvision; or copy an existing '{BATCH_FOLDER}' folder to {folder}."
    )


def _resolve_folder(root: Path) -> Path:
    """``root/cifar-10-batches-py``, or ``root`` itself when it already is that folder (named so, or
    holding any batch file: a renamed folder that lacks ``data_batch_1`` is still that folder)."""
    if root.name == BATCH_FOLDER or any((root / name).is_file() for name in TRAIN_FILES + (TEST_FILE,)):
        return root
    return root / BATCH_FOLDER


def _rows_to_nhwc(rows: np.ndarray, out: np.ndarray) -> None:
    """Channel-planar rows ``(n, 3072)`` written into ``out`` as NHWC images ``(n, 32, 32, 3)``: one
    copy per colour plane into the interleaved layout (about four times as fast as a contiguous copy of the
    transposed view, ``ascontiguousarray(rows.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))``, which gives the same
    array: 0.011 s against 0.040 s for a batch of 10,000 images, medians of 15 on the CPU it was written on)."""
    planes = rows.reshape(-1, 3, 32, 32)
    for channel in range(3):
        out[..., channel] = planes[:, channel]


def _read_batch_rows(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One batch file as ``(rows (n, 3072) uint8, labels int64)``, checked; ValueError naming the file."""
    try:
        with open(path, "rb") as fh:
            batch = pickle.load(fh, encoding="latin1")
    except OSError:
        raise
    except Exception as exc:  # UnpicklingError, EOFError (truncated), ValueError, ...
        raise ValueError(f"{path}: not a readable CIFAR-10 batch file (unpickling failed: "
                         f"{type(exc).__name__}: {exc}); the file may be truncated or corrupt") from None
    if not isinstance(batch, dict) or "data" not in batch or "labels" not in batch:
        keys = sorted(batch) if isinstance(batch, dict) else type(batch).__name__
        raise ValueError(f"{path}: expected a dict with 'data' and 'labels' (a CIFAR-10 batch), got {keys}")
    data = batch["data"]
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != _ROW_LENGTH:
        desc = f"{data.dtype} array of shape {data.shape}" if isinstance(data, np.ndarray) else type(data).__name__
        raise ValueError(f"{path}: 'data' must be a uint8 array of shape (n, {_ROW_LENGTH}), got {desc}")
    try:
        labels = np.asarray(batch["labels"])
    except Exception as exc:  # ragged nested lists and the like
        raise ValueError(f"{path}: 'labels' is not a list of integers ({exc})") from None
    if labels.ndim != 1 or labels.shape[0] != data.shape[0]:
        raise ValueError(f"{path}: 'labels' must hold one label per image ({data.shape[0]}), got shape {labels.shape}")
    if labels.size and labels.dtype.kind not in "iu":
        raise ValueError(f"{path}: 'labels' must be integers, got dtype {labels.dtype}")
    labels = labels.astype(np.int64)
    if labels.size and (labels.min() < 0 or labels.max() >= _NUM_CLASSES):
        raise ValueError(f"{path}: labels must lie in 0..{_NUM_CLASSES - 1}, got range "
                         f"{int(labels.min())}..{int(labels.max())}")
    return data, labels


def _read_split(folder: Path, names) -> tuple[np.ndarray, np.ndarray]:
    """The batches ``names`` of ``folder`` as one ``(images NHWC, labels)`` pair, in order, read one batch at a time:
    each batch is unpickled, its rows converted straight into its slice of the result, and dropped before the next
    is read, so the peak memory is the result plus one batch (the raw batches were all held until the result was
    filled: 294 MiB against 176 MiB of result for the real data set).

    The result is sized from the first batch, ``len(names)`` times its row count (the exact size of every official
    split, whose batches hold 10,000 images each); batches of other sizes grow or shrink it in place
    (``ndarray.resize``, a ``realloc`` of its buffer; ``refcheck=False`` is safe as its only views, the slice each
    batch is written into, are gone before it is resized)."""
    images = np.empty((0,) + _IMAGE_SHAPE, dtype=np.uint8)
    labels = []
    start = 0
    for index, name in enumerate(names):
        rows, batch_labels = _read_batch_rows(folder / name)
        end = start + len(rows)
        if index == 0 or end > len(images):  # room for this batch and, at its size, the ones still to read
            images.resize((end + len(rows) * (len(names) - index - 1),) + _IMAGE_SHAPE, refcheck=False)
        _rows_to_nhwc(rows, images[start:end])
        labels.append(batch_labels)
        del rows  # the batch goes before the next one is unpickled
        start = end
    if start != len(images):
        images.resize((start,) + _IMAGE_SHAPE, refcheck=False)
    return images, (labels[0] if len(labels) == 1 else np.concatenate(labels))


@contextlib.contextmanager
def _socket_timeout(timeout: float | None):
    """``socket``'s default timeout set to ``timeout`` inside the block, restored after it."""
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(timeout)
    try:
        yield
    finally:
        socket.setdefaulttimeout(previous)


def _download(root: Path) -> None:
    try:
        import torchvision
    except ImportError as exc:  # pragma: no cover - torchvision is a dependency
        raise RuntimeError("download=True needs torchvision installed") from exc
    made = [folder for folder in (root, *root.parents) if not folder.exists()]  # deepest first
    root.mkdir(parents=True, exist_ok=True)
    # Downloads, verifies and extracts the official archive (train and test together). torchvision opens
    # its connections without a timeout, i.e. with socket's default (load_cifar10 sets it: _socket_timeout).
    timeout = socket.getdefaulttimeout()
    try:
        torchvision.datasets.CIFAR10(str(root), train=True, download=True)
    except (OSError, RuntimeError) as exc:  # URLError (no network, DNS, HTTP), a disk error, a bad md5, a timeout
        for folder in made:  # a failed download left the folders it made, empty; a partial archive stays
            try:
                folder.rmdir()
            except OSError:
                break
        url = getattr(torchvision.datasets.CIFAR10, "url", "the CIFAR-10 python archive")
        timed_out = isinstance(exc, TimeoutError) or isinstance(getattr(exc, "reason", None), TimeoutError)
        waited = (f" (no answer within timeout={timeout:g} s; a slow but working network: a larger timeout, or "
                  "timeout=None to wait without limit)") if timed_out and timeout is not None else ""
        raise OSError(
            f"CIFAR-10 download into {root} failed ({type(exc).__name__}: {exc}){waited}. Without network access "
            f"to {url}, "
            f"fetch that archive (cifar-10-python.tar.gz) on a machine that has it and extract it into {root} "
            f"(tar -xzf cifar-10-python.tar.gz -C {shlex.quote(str(root))}), so that {root / BATCH_FOLDER} holds "
            f"{', '.join(TRAIN_FILES)}, {TEST_FILE}; or copy an existing '{BATCH_FOLDER}' folder there, and load "
            "it without download") from exc


def _missing_batches(folder: Path) -> list:
    """The batch files (five training, one test) that ``folder`` lacks."""
    return [name for name in TRAIN_FILES + (TEST_FILE,) if not (folder / name).is_file()]


def load_cifar10(root, download: bool = False, timeout: float | None = 60.0) -> Cifar10Arrays:
    """Load the full CIFAR-10 data set (50,000 training and 10,000 test images).

    Parameters
    ----------
    root:
        Folder that *contains* ``cifar-10-batches-py/`` (the ``root`` of torchvision's
        ``CIFAR10``), or that batch folder itself.
    download:
        If the batch folder does not exist or lacks a batch file (an interrupted
        extraction), download the official archive into ``root`` with
        ``torchvision.datasets.CIFAR10(root, train=True, download=True)`` and read it.  A
        complete folder is never re-downloaded or checked against md5 sums.
    timeout:
        Seconds that one network operation of the download (a connection, one read) may wait for
        an answer, so that a network that drops packets without a word ends in an ``OSError``
        instead of hanging; a slow download that keeps receiving is not cut. ``None``: no limit
        (torchvision's own behaviour). It is set as ``socket``'s default timeout during the
        download only (other threads opening sockets meanwhile get it too) and restored after.

    Returns
    -------
    Cifar10Arrays
        Training images in the standard order (``data_batch_1`` … ``data_batch_5``),
        test images in ``test_batch`` order; uint8 NHWC images, int64 labels.

    Raises
    ------
    FileNotFoundError
        The folder or a batch file is missing (and ``download`` is false); the message
        gives the path looked at and how to get the data.
    ValueError
        A batch file cannot be unpickled (corrupt, truncated) or holds data of the
        wrong shape, a wrong number of labels or labels outside 0..9; names the file.
        ``root`` is a file or not a path, ``download`` is not a bool, or ``timeout`` is neither
        ``None`` nor a number > 0.
    OSError
        ``download`` is true and the download failed (no network access to the archive's
        address, no answer within ``timeout``, a disk error, a corrupt archive); the message
        names the address and how to
        install the archive by hand.

    Examples
    --------
    >>> cifar = load_cifar10("path/to/data")               # doctest: +SKIP
    >>> cifar.train_images.shape, cifar.train_labels[:3]   # doctest: +SKIP
    ((50000, 32, 32, 3), array([6, 9, 9]))

    The layout, on a stand-in folder of six one-image batch files written here: training image
    :math:`i` has label :math:`i` and is pure red (its 1,024 red values 255, the green and blue
    planes 0), so every NHWC pixel reads ``[255, 0, 0]``; the test image has label 5:

    >>> import pickle, tempfile
    >>> from pathlib import Path
    >>> red = np.concatenate([np.full(1024, 255), np.zeros(2048)]).astype(np.uint8)[None, :]
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     folder = Path(tmp) / BATCH_FOLDER
    ...     folder.mkdir()
    ...     for i, name in enumerate(TRAIN_FILES + (TEST_FILE,)):
    ...         _ = (folder / name).write_bytes(pickle.dumps({"data": red, "labels": [i]}))
    ...     toy = load_cifar10(tmp)
    >>> toy.train_images.shape, toy.train_labels.tolist(), toy.test_labels.tolist()
    ((5, 32, 32, 3), [0, 1, 2, 3, 4], [5])
    >>> toy.train_images[0, 0, 0].tolist(), toy.train_images[0, 31, 31].tolist()
    ([255, 0, 0], [255, 0, 0])

    Without the data (and ``download=False``) the error names the folder and how to get it:

    >>> load_cifar10("no/such/root")
    Traceback (most recent call last):
    ...
    FileNotFoundError: CIFAR-10 not found: looked for the CIFAR-10 batch folder no/such/root/cifar-10-batches-py ...
    """
    root = check_path("root", root)
    check_flag("download", download)  # download="no" is truthy: it would fetch 170 MB
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float, np.number))
                                or not math.isfinite(timeout) or timeout <= 0):
        raise ValueError(f"timeout must be None or a number of seconds > 0, got {timeout!r}")
    timeout = None if timeout is None else float(timeout)
    if root.is_file():  # a batch file or the downloaded archive: mkdir would fail on it with download=True
        raise ValueError(f"root must be a folder (the one containing '{BATCH_FOLDER}', or that folder itself), "
                         f"got the file {root}")
    folder = _resolve_folder(root)
    missing = _missing_batches(folder) if download and folder.name != BATCH_FOLDER else []
    if missing:
        # torchvision extracts into <parent>/cifar-10-batches-py: it would download next to this folder
        # (170 MB) and then still find this one incomplete
        raise FileNotFoundError(
            f"{folder} holds CIFAR-10 batch files but lacks {', '.join(missing)}; download=True "
            f"cannot complete a batch folder not named '{BATCH_FOLDER}' (it would download into "
            f"{folder.parent / BATCH_FOLDER}): copy the missing files in, or give the folder that should "
            f"contain '{BATCH_FOLDER}'")
    if not folder.is_dir():
        if not download:
            raise FileNotFoundError(_missing_message(folder))
        download_root = folder.parent
        with _socket_timeout(timeout):
            _download(download_root)
        folder = download_root / BATCH_FOLDER
        if not folder.is_dir():  # pragma: no cover - torchvision changed its layout
            raise FileNotFoundError(f"download finished but {folder} does not exist")
    missing = _missing_batches(folder)
    if missing and download:  # an incomplete folder (an interrupted extraction): fetch it again
        with _socket_timeout(timeout):
            _download(folder.parent)
        missing = _missing_batches(folder)
        if missing:
            raise FileNotFoundError(f"download finished but {folder} still lacks {', '.join(missing)}")
    if missing:
        raise FileNotFoundError(_missing_message(folder, missing))
    train_images, train_labels = _read_split(folder, TRAIN_FILES)
    test_images, test_labels = _read_split(folder, (TEST_FILE,))
    return Cifar10Arrays(train_images, train_labels, test_images, test_labels, str(folder))


# --------------------------------------------------------------------------- the shipped sample


def _check_labels(source: str, labels, split: str, n: int | None = None) -> np.ndarray:
    """``labels`` as int64 after checking: a vector (of ``n`` entries if given) of classes 0..9."""
    labels = np.asarray(labels)
    if labels.ndim != 1 or (n is not None and labels.shape[0] != n) or (labels.size and labels.dtype.kind not in "iu"):
        what = "a vector of integers" if n is None else f"{n} integers"
        raise ValueError(f"{source}: {split}_labels must be {what}, got {labels.dtype} {labels.shape}")
    labels = labels.astype(np.int64)
    if labels.size and (labels.min() < 0 or labels.max() >= _NUM_CLASSES):
        raise ValueError(f"{source}: {split}_labels must lie in 0..{_NUM_CLASSES - 1}")
    return labels


def _check_arrays(source: str, images, labels, split: str) -> tuple[np.ndarray, np.ndarray]:
    images = np.asarray(images)
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[1:] != _IMAGE_SHAPE:
        raise ValueError(f"{source}: {split}_images must be uint8 of shape (n, 32, 32, 3), "
                         f"got {images.dtype} {images.shape}")
    return images, _check_labels(source, labels, split, images.shape[0])


def _read_npz(file: Path, needed: tuple) -> dict:
    """The arrays ``needed`` of the ``.npz`` ``file`` (ValueError: unreadable, or a key missing)."""
    try:
        with np.load(file, allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in needed if key in npz.files}
    except Exception as exc:
        raise ValueError(f"{file}: not a readable .npz file ({type(exc).__name__}: {exc})") from None
    missing = [key for key in needed if key not in arrays]
    if missing:
        raise ValueError(f"{file}: missing array(s) {', '.join(missing)}")
    return arrays


def load_cifar10_sample(path=None) -> Cifar10Arrays:
    """Load the small class-balanced CIFAR-10 sample shipped with the repository.

    The default file, ``data/cifar10-sample/cifar10-sample.npz`` next to the ``fedlib``
    package of a source checkout, holds 2,000 training images (the first 200 of each
    class in the standard training order) and 500 test images (the first 50 of each
    class); see the ``README.md`` beside it for provenance.  Images keep their original
    relative order.  Meant for tests, CPU demos and the book's quick runs — not for
    reproducing Table 1.

    Parameters
    ----------
    path:
        Another ``.npz`` with the keys ``train_images``, ``train_labels``,
        ``test_images``, ``test_labels`` (as written by ``scripts/make_cifar_sample.py``).

    Raises
    ------
    FileNotFoundError
        The file does not exist (e.g. ``fedlib`` was installed without the repository's
        ``data/`` folder); the message says how to recreate it.
    ValueError
        The file lacks a key or holds arrays of the wrong type or shape.

    Example
    -------
    The shipped sample (in a source checkout): 200 training images of each class, 50 test images
    of each:

    >>> import numpy as np
    >>> sample = load_cifar10_sample()
    >>> sample.train_images.shape, sample.test_images.shape, sample.train_images.dtype
    ((2000, 32, 32, 3), (500, 32, 32, 3), dtype('uint8'))
    >>> np.bincount(sample.train_labels).tolist() == [200] * 10, np.bincount(sample.test_labels).tolist() == [50] * 10
    (True, True)
    """
    file = DEFAULT_SAMPLE_PATH if path is None else check_path("path", path)
    if not file.is_file():
        raise FileNotFoundError(
            f"CIFAR-10 sample not found at {file}. It ships in the repository's data/cifar10-sample/ "
            "folder (not in an installed wheel); recreate it from the full data set with "
            "'python scripts/make_cifar_sample.py --root DIR' (DIR containing cifar-10-batches-py), "
            "or pass path= to a copy."
        )
    arrays = _read_npz(file, ("train_images", "train_labels", "test_images", "test_labels"))
    train = _check_arrays(str(file), arrays["train_images"], arrays["train_labels"], "train")
    test = _check_arrays(str(file), arrays["test_images"], arrays["test_labels"], "test")
    return Cifar10Arrays(train[0], train[1], test[0], test[1], str(file))


# --------------------------------------------------------------------------- labels only (benchmarks)


def load_cifar10_labels(path=None) -> tuple[np.ndarray, np.ndarray]:
    """Every CIFAR-10 label, ``(train_labels, test_labels)`` (int64, 50,000 and 10,000, in
    the standard order), from the shipped ``data/cifar10-sample/cifar10-labels.npz`` (30 kB)
    or ``path``: what the official split (:func:`fedlib.data.partition.dirichlet_partition`)
    needs, without the images. Chapter 5 rebuilds the split with it to check the
    diagnostics that GPU runs recorded.

    Raises
    ------
    FileNotFoundError, ValueError
        A missing file, a missing key, labels out of range.

    Example
    -------
    5,000 training and 1,000 test images of each class; the first training labels are 6, 9, 9
    (frog, truck, truck), and with them the official Dir(0.1) split is the 16 clients of Table 1:

    >>> import numpy as np
    >>> from fedlib.data.partition import dirichlet_partition
    >>> train_labels, test_labels = load_cifar10_labels()
    >>> train_labels[:3].tolist(), np.bincount(train_labels).tolist() == [5000] * 10, len(test_labels)
    ([6, 9, 9], True, 10000)
    >>> parts = dirichlet_partition(train_labels)
    >>> len(parts), sum(len(part) for part in parts)
    (16, 50000)
    """
    file = DEFAULT_LABELS_PATH if path is None else check_path("path", path)
    if not file.is_file():
        raise FileNotFoundError(
            f"CIFAR-10 labels not found at {file}. They ship in the repository's data/cifar10-sample/ "
            "folder; recreate them with 'python scripts/make_cifar_sample.py --root DIR'.")
    arrays = _read_npz(file, ("train_labels", "test_labels"))
    return (_check_labels(str(file), arrays["train_labels"], "train"),
            _check_labels(str(file), arrays["test_labels"], "test"))


def cifar10_random_images(seed: int = 0, path=None) -> Cifar10Arrays:
    """The real CIFAR-10 labels (all 50,000 + 10,000, shipped) with uniformly random pixels.

    A speed benchmark's work depends on the federated split (which is built from the
    labels: :func:`fedlib.data.partition.dirichlet_partition`) and on the tensor shapes,
    not on the pixels. This stand-in lets ``bench cifar10 --random-images`` time the
    real Table 1 round — the official Dir(0.1) split of the 50,000 training labels — on a
    machine that does not hold the images (a GPU machine still receiving them).
    Never use it to train for accuracy.

    Parameters
    ----------
    seed:
        Seed of the pixels (``numpy.random.default_rng(seed)``).
    path:
        Another ``.npz`` with ``train_labels`` and ``test_labels`` (default
        ``data/cifar10-sample/cifar10-labels.npz``, written by
        ``scripts/make_cifar_sample.py``).

    Raises
    ------
    FileNotFoundError, ValueError
        As :func:`load_cifar10_sample`: a missing file, a missing key, labels out of range.

    Examples
    --------
    >>> d = cifar10_random_images()                       # doctest: +SKIP
    >>> d.train_images.shape, int(d.train_labels[0])      # doctest: +SKIP
    ((50000, 32, 32, 3), 6)

    On a labels file of three labels written here: the images follow the labels' counts, the
    pixels are uint8 noise, and the same seed gives the same pixels:

    >>> import tempfile
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     file = Path(tmp) / "labels.npz"
    ...     np.savez(file, train_labels=np.array([6, 9]), test_labels=np.array([3]))
    ...     d, again = cifar10_random_images(seed=1, path=file), cifar10_random_images(seed=1, path=file)
    >>> d.train_images.shape, d.test_images.shape, d.train_labels.tolist(), d.train_images.dtype
    ((2, 32, 32, 3), (1, 32, 32, 3), [6, 9], dtype('uint8'))
    >>> bool((d.train_images == again.train_images).all())
    True
    """
    seed = check_int("seed", seed, minimum=0)
    train_labels, test_labels = load_cifar10_labels(path)
    file = DEFAULT_LABELS_PATH if path is None else check_path("path", path)
    rng = np.random.default_rng(seed)
    train_images = rng.integers(0, 256, size=(len(train_labels),) + _IMAGE_SHAPE, dtype=np.uint8)
    test_images = rng.integers(0, 256, size=(len(test_labels),) + _IMAGE_SHAPE, dtype=np.uint8)
    return Cifar10Arrays(train_images, train_labels, test_images, test_labels,
                         f"{file} labels + random images (seed {seed})")

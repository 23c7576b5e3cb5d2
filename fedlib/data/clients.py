r"""The federated data set type shared by every in-memory problem (Synthetic, LEAF).

A :class:`FederatedDataset` holds one training and one test array pair per client.
Client weights follow the paper: :math:`p_i = n_i / n` with :math:`n_i` the number of
*training* samples of client :math:`i` (paper §2).  Chapters 1, 4, 7, 9 and 10 run on one
(Synthetic(:math:`\alpha`, :math:`\beta`)), chapter 1 directly, the others through
:class:`fedlib.problems.logistic.LogisticProblem`.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .._validate import mismatch

__all__ = ["FederatedDataset"]


@dataclass(frozen=True)
class FederatedDataset:
    """Per-client arrays of a classification problem.

    Attributes
    ----------
    train_x, train_y, test_x, test_y:
        Lists with one array per client: ``x`` is ``(n_i, d)`` real numbers (float64 as
        every loader returns; integer features are accepted and kept as given), ``y`` is
        ``(n_i,)`` integers with labels in ``[0, num_classes)``.  A client's test set may
        be empty; its training set may not.
    num_classes:
        Number of labels.
    name:
        Human-readable origin (``"synthetic(1,1)"``, a file path, ...), used in errors.
    meta:
        Free-form provenance (generator parameters, source file, user ids, ...).

    Example
    -------
    Two clients with 3 and 1 training samples of 2 features (client 0 has no test set), so
    :math:`p = (3/4, 1/4)`:

    >>> import numpy as np
    >>> ds = FederatedDataset(train_x=[np.zeros((3, 2)), np.ones((1, 2))],
    ...                       train_y=[np.array([0, 1, 1]), np.array([0])],
    ...                       test_x=[np.zeros((0, 2)), np.ones((1, 2))],
    ...                       test_y=[np.zeros(0, dtype=int), np.array([1])], num_classes=2, name="toy")
    >>> ds.num_clients, ds.num_features, ds.num_samples.tolist(), ds.weights.tolist()
    (2, 2, [3, 1], [0.75, 0.25])
    >>> len(ds.sha256())
    20

    Inputs are checked when the data set is built; a label outside ``[0, num_classes)`` is refused:

    >>> FederatedDataset([np.zeros((2, 2))], [np.array([0, 2])], [np.zeros((0, 2))],
    ...                  [np.zeros(0, dtype=int)], num_classes=2, name="toy")
    Traceback (most recent call last):
    ...
    ValueError: toy: client 0 train labels must be integers in [0, 2), got range [0, 2] dtype int64
    """

    train_x: Sequence[np.ndarray]
    train_y: Sequence[np.ndarray]
    test_x: Sequence[np.ndarray]
    test_y: Sequence[np.ndarray]
    num_classes: int
    name: str = "dataset"
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        src = self.name
        for label in ("train_x", "train_y", "test_x", "test_y"):
            seq = getattr(self, label)
            if (isinstance(seq, (dict, str, bytes)) or not hasattr(seq, "__len__") or not hasattr(seq, "__getitem__")
                    or getattr(seq, "ndim", 1) == 0):  # a 0-d array or tensor: len() raised TypeError
                raise ValueError(f"{src}: {label} must be a list with one array per client, got {type(seq).__name__}")
        m = len(self.train_x)
        if m == 0:
            raise ValueError(f"{src}: the data set has no clients")
        for label, seq in (("train_y", self.train_y), ("test_x", self.test_x), ("test_y", self.test_y)):
            if len(seq) != m:
                raise ValueError(f"{src}: {label} has {len(seq)} clients but train_x has {m}")
        if not isinstance(self.num_classes, (int, np.integer)) or self.num_classes < 2:
            raise ValueError(f"{src}: num_classes must be an integer >= 2, got {self.num_classes!r}")
        dim = dim_from = None  # the width of the last non-empty x, and which x it is (named when another differs)
        for i in range(m):
            for part, xs, ys in (("train", self.train_x[i], self.train_y[i]), ("test", self.test_x[i], self.test_y[i])):
                for what, arr in (("x", xs), ("y", ys)):  # np.asarray raised torch's "Can't call numpy() on Tensor ..."
                    if getattr(arr, "requires_grad", False):
                        raise ValueError(f"{src}: client {i} {part} {what} is a tensor that requires grad (data, not "
                                         f"parameters: pass it detached, {what}.detach())")
                try:
                    x = np.asarray(xs)
                    y = np.asarray(ys)
                except ValueError as exc:  # ragged rows
                    raise ValueError(f"{src}: client {i} {part} x and y must be arrays ({exc})") from None
                if x.ndim != 2:
                    hint = (f"; an empty {part} set is np.zeros((0, d)) with labels np.zeros(0, dtype=int)"
                            if x.size == 0 else "")
                    raise ValueError(f"{src}: client {i} {part} x must be 2-d (samples, features), got shape "
                                     f"{x.shape}{hint}")
                if y.ndim != 1:
                    raise ValueError(f"{src}: client {i} {part} y has shape {y.shape}, expected ({x.shape[0]},)")
                if y.shape[0] != x.shape[0]:  # either may be the wrong one ('y has shape (3,), expected (4,)' blamed y)
                    raise ValueError(f"{src}: " + mismatch(f"client {i} {part} y", y.shape[0], f"its {part} x",
                                                           x.shape[0], "labels", ref_what="rows"))
                if part == "train" and x.shape[0] == 0:
                    raise ValueError(f"{src}: client {i} has no training samples")
                if x.shape[0] and dim is not None and x.shape[1] != dim:  # named both: the reference may be the wrong one
                    raise ValueError(f"{src}: " + mismatch(f"client {i} {part} x", x.shape[1], dim_from, dim, "features"))
                if x.shape[0] and x.shape[1] == 0:  # LEAF's reader refuses these rows too; a model would get no input
                    raise ValueError(f"{src}: client {i} {part} x has {x.shape[0]} rows of 0 features")
                if x.shape[0]:
                    dim, dim_from = x.shape[1], f"client {i} {part} x"
                if x.dtype.kind not in "iuf":
                    raise ValueError(f"{src}: client {i} {part} x must hold real numbers, got dtype {x.dtype}")
                if not np.all(np.isfinite(x)):
                    raise ValueError(f"{src}: client {i} {part} x contains NaN or inf")
                if y.size and y.dtype.kind not in "iu":  # y.min() of strings or None would be numpy's own error
                    raise ValueError(f"{src}: client {i} {part} labels must be integers in [0, {self.num_classes}), "
                                     f"got dtype {y.dtype}")
                if y.size and (y.min() < 0 or y.max() >= self.num_classes):
                    raise ValueError(
                        f"{src}: client {i} {part} labels must be integers in [0, {self.num_classes}), "
                        f"got range [{y.min()}, {y.max()}] dtype {y.dtype}"
                    )

    @property
    def num_clients(self) -> int:
        """Number of clients :math:`m`."""
        return len(self.train_x)

    @property
    def num_features(self) -> int:
        """Feature dimension :math:`d`."""
        return int(np.asarray(self.train_x[0]).shape[1])

    @property
    def num_samples(self) -> np.ndarray:
        """Training sizes :math:`n_i`, shape ``(m,)``."""
        return np.array([len(y) for y in self.train_y], dtype=np.int64)

    @property
    def weights(self) -> np.ndarray:
        r"""Client weights :math:`p_i = n_i / \sum_j n_j` (paper eq. 1)."""
        n = self.num_samples.astype(np.float64)
        return n / n.sum()

    def sha256(self) -> str:
        """SHA-256 (first 20 hex digits) of every client's training and test arrays with their
        dtypes and shapes, in client order. ``run synthetic --data`` records it in the result's
        ``config.data``, so a ``--resume`` (and ``rerun``) on a data file rewritten with other
        values of the same sizes is refused instead of continuing on other data."""
        digest = hashlib.sha256()
        for label in ("train_x", "train_y", "test_x", "test_y"):
            digest.update(label.encode())
            for arr in getattr(self, label):
                a = np.ascontiguousarray(np.asarray(arr))
                digest.update(f"|{a.dtype.str}{a.shape}|".encode())
                digest.update(a.tobytes())
        return digest.hexdigest()[:20]

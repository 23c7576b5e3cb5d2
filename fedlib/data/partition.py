r"""Splitting a labelled data set over clients: the Dirichlet label-skew partition and IID.

Used by chapter 5 (Table 1: CIFAR-10, 16 clients, paper §6), and by chapter 3 for the client
sizes :math:`n_i` of that split: the training set is split over :math:`m` clients by drawing,
for every class, the share of that class that each client receives from a symmetric Dirichlet
distribution.

The algorithm (Hsu et al. 2019, as used by Lin et al. and by the official FedNova code)
---------------------------------------------------------------------------------------
Let :math:`n` be the number of samples, :math:`K` the number of classes and
:math:`S_j` the index list of client :math:`j` (initially empty).  For every class
:math:`k = 0, \dots, K-1` *in order*:

1. shuffle the indices :math:`I_k` of class :math:`k` (:math:`n_k = |I_k|`);
2. draw :math:`q \sim \mathrm{Dir}(\alpha \mathbf{1}_m)`;
3. cap: :math:`q_j \leftarrow q_j \cdot [\,|S_j| < n/m\,]` — a client that already holds
   its fair share :math:`n/m` receives nothing more — and renormalise,
   :math:`q \leftarrow q / \sum_j q_j`;
4. cut :math:`I_k` at the points :math:`\lfloor n_k \sum_{l \le j} q_l \rfloor`,
   :math:`j = 0, \dots, m-2`, and append the :math:`j`-th piece to :math:`S_j`.

If some client ends with fewer than ``min_size`` samples the whole procedure is repeated
(continuing the same random stream).  Finally each :math:`S_j` is shuffled.  Client
weights are then :math:`p_j = |S_j| / n` (paper §2).  Small :math:`\alpha` (0.1 in the
paper) gives clients that hold mostly one to three classes and very unequal sizes.

The paper's :math:`\mathrm{Dir}_{16}(0.1)` (§6) is this draw, as the official code that ran Table 1
makes it: one :math:`q` per *class*, over the 16 clients, with the symmetric concentration
:math:`\alpha\mathbf 1_m`.
The cap of step 3 is checked before a class is handed out, so a client may end above :math:`n/m`.

Two random sources
------------------
:func:`dirichlet_partition` reproduces the official FedNova partition exactly: the
official code seeds numpy's *legacy global* generator with 2020 (independent of the run
seed) and makes the calls above on it.  Here the same call sequence runs on a private
:class:`numpy.random.RandomState` (which is what the legacy global generator is), so the
global numpy state is never touched and the split is bit-identical to the official one.

:func:`dirichlet_partition_generator` runs the same algorithm on a modern
:class:`numpy.random.Generator` (by default ``fedlib.rng.generator(seed, "partition")``),
for experiments that want a different partition per seed.  Its splits are statistically
equivalent but not equal to the official ones.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .._validate import check_int, check_positive
from ..rng import generator as _stream

__all__ = [
    "dirichlet_partition",
    "dirichlet_partition_generator",
    "iid_partition",
    "class_counts",
    "OFFICIAL_PARTITION_SEED",
]

#: Seed of numpy's legacy generator in the official FedNova partition.
OFFICIAL_PARTITION_SEED = 2020

_DEFAULT_MAX_ATTEMPTS = 10_000
#: Most classes a partition accepts (the split loops over every class 0..K-1, empty ones included).
_MAX_CLASSES = 1_000_000


def _check_labels(labels, num_classes) -> tuple[np.ndarray, int]:
    try:
        y = np.asarray(labels)
    except Exception as exc:
        raise ValueError(f"labels must be a 1-d array of integers ({exc})") from None
    if y.ndim != 1 or y.size == 0:
        raise ValueError(f"labels must be a non-empty 1-d array of integers, got shape {y.shape}")
    if y.dtype.kind not in "iu":
        raise ValueError(f"labels must hold integers, got dtype {y.dtype}")
    y = y.astype(np.int64)
    if y.min() < 0:
        raise ValueError(f"labels must be >= 0, got min {int(y.min())}")
    if num_classes is None:
        num_classes = int(y.max()) + 1
    else:
        num_classes = check_int("num_classes", num_classes, minimum=1)
        if y.max() >= num_classes:
            raise ValueError(f"num_classes={num_classes} but labels go up to {int(y.max())}")
    if num_classes > _MAX_CLASSES:  # one pass (and one Dirichlet draw) per class: labels like [0, 10**9] never end
        raise ValueError(f"num_classes={num_classes} (labels up to {int(y.max())}) exceeds {_MAX_CLASSES}: labels "
                         "must be class numbers 0..K-1, not ids; renumber them with "
                         "np.unique(labels, return_inverse=True)[1]")
    return y, num_classes


def _check_common(y: np.ndarray, num_clients, alpha, min_size, max_attempts) -> tuple[int, float, int, int]:
    num_clients = check_int("num_clients", num_clients, minimum=1)
    alpha = check_positive("alpha", alpha)
    if not np.isfinite(2.0 * alpha * num_clients):  # the Dirichlet draw normalises a sum of gammas ~ alpha each
        raise ValueError(f"alpha={alpha} is too large: Dirichlet(alpha * ones({num_clients})) overflows to NaN "
                         "(any alpha above ~1e3 already gives near-equal shares)")
    min_size = check_int("min_size", min_size, minimum=0)
    max_attempts = check_int("max_attempts", max_attempts, minimum=1)
    if num_clients * min_size > y.size:
        raise ValueError(
            f"min_size={min_size} cannot be met: {num_clients} clients x {min_size} samples "
            f"> {y.size} samples in labels (lower min_size or num_clients)"
        )
    return num_clients, alpha, min_size, max_attempts


def _dirichlet_split(
    y: np.ndarray,
    num_clients: int,
    alpha: float,
    min_size: int,
    num_classes: int,
    max_attempts: int,
    shuffle: Callable,
    dirichlet: Callable,
) -> list[np.ndarray]:
    """The algorithm of the module docstring, with the random calls supplied.

    ``shuffle`` and ``dirichlet`` are bound methods of one random source; the order
    of the calls is the order of the official code, which makes the legacy-RNG result
    identical to it.
    """
    n = y.size
    fair_share = n / num_clients
    by_class = [np.flatnonzero(y == k) for k in range(num_classes)]
    concentration = np.repeat(alpha, num_clients)
    nan_draws = 0  # attempts ended by a NaN share (numpy's legacy Dirichlet at a tiny alpha: every gamma draw is 0)
    short = 0  # attempts that split every class and still missed min_size
    for _attempt in range(max_attempts):
        clients: list[list[int]] = [[] for _ in range(num_clients)]
        degenerate = False
        for k in range(num_classes):
            idx_k = by_class[k].copy()
            shuffle(idx_k)
            q = dirichlet(concentration)
            if idx_k.size == 0:
                # An empty class (a label below num_classes that no sample has): its draws are
                # made, as in the official code, and it hands out nothing.  Skipped before the
                # check below, which would otherwise see all clients full and fail every attempt.
                continue
            with np.errstate(invalid="ignore"):  # a legacy draw of inf (tiny alpha) times a closed client's 0: NaN
                q = np.array([qj * (len(s) < fair_share) for qj, s in zip(q, clients)])
            total = q.sum()
            if not (np.isfinite(total) and total > 0):
                # Every open client drew an (underflowed) zero share, or the draw is NaN.
                # The official code would divide by zero here and cut at garbage points;
                # treat it as a failed attempt instead (never happens at alpha = 0.1).
                degenerate = True
                nan_draws += bool(np.isnan(total))
                break
            q = q / total
            cuts = (np.cumsum(q) * len(idx_k)).astype(int)[:-1]
            for s, piece in zip(clients, np.split(idx_k, cuts)):
                s.extend(piece.tolist())
        if not degenerate:
            if min(len(s) for s in clients) >= min_size:
                break
            short += 1
    else:
        nan_note = (f"{nan_draws} of the {max_attempts} attempts drew a Dirichlet share of NaN (numpy's legacy "
                    "RandomState.dirichlet, the official code's stream, divides gamma draws that all underflow to 0)")
        if nan_draws == max_attempts:  # NaN alone ended every attempt: min_size was never the obstacle
            raise ValueError(
                f"alpha={alpha} is too small for this random source: {nan_note}; raise alpha, or use "
                "dirichlet_partition_generator, whose Generator.dirichlet handles small alpha"
            )
        if short == 0:  # every attempt ended on a degenerate draw (NaN or all-zero shares), none on min_size
            raise ValueError(
                f"no partition found in max_attempts={max_attempts} attempts ({num_clients} clients, {n} samples, "
                f"alpha={alpha}): every attempt ended on a class whose Dirichlet shares were 0 on every client still "
                f"open for it, or NaN, before min_size was checked" + (f" ({nan_note})" if nan_draws else "")
                + "; raise alpha"
            )
        raise ValueError(
            f"no partition with min_size={min_size} found in max_attempts={max_attempts} attempts "
            f"({num_clients} clients, {n} samples, alpha={alpha}); lower min_size or raise alpha"
            + (f" ({nan_note})" if nan_draws else "")
        )
    for s in clients:
        shuffle(s)
    return [np.asarray(s, dtype=np.int64) for s in clients]


def dirichlet_partition(
    labels,
    num_clients: int = 16,
    alpha: float = 0.1,
    seed: int = OFFICIAL_PARTITION_SEED,
    min_size: int = 10,
    *,
    num_classes: int | None = None,
    max_attempts: int = _DEFAULT_MAX_ATTEMPTS,
) -> list[np.ndarray]:
    r"""The official FedNova Dirichlet partition, bit for bit (github.com/JYWa/FedNova, paper §6).

    Runs the algorithm of the module docstring on ``numpy.random.RandomState(seed)`` with
    exactly the calls of the official code after ``np.random.seed(seed)``: per attempt,
    per class :math:`k=0..K-1`, one ``shuffle`` of the class indices and one
    ``dirichlet(alpha * ones(num_clients))``; after the last attempt one ``shuffle`` per
    client.  (One exception: where every client still open draws a zero share, which the
    official code divides by zero and cuts at garbage points, the attempt ends at that class
    and counts as failed, so later draws differ; it needs a tiny ``alpha`` and does not
    happen at 0.1.)  Numpy's global random state is neither read nor changed.  With the defaults
    and the CIFAR-10 training labels in their standard order this is the split behind
    Table 1 (chapter 5; chapter 3 takes its sizes).

    Parameters
    ----------
    labels:
        1-d integer labels :math:`y_1..y_n` in ``0..num_classes-1``.
    num_clients:
        :math:`m`, the number of clients (16 in the paper).
    alpha:
        Dirichlet concentration :math:`\alpha > 0` (0.1 in the paper; small = skewed).
    seed:
        Seed of the legacy generator (2020 in the official code, whatever the run seed).
    min_size:
        Repeat until every client holds at least this many samples (10 officially: the
        official loop tests ``min_size < K`` with ``K = 10`` classes).
    num_classes:
        :math:`K`; default ``max(labels) + 1``.  Empty classes still consume their random
        draws, as in the official code with its fixed ``K = 10`` — so on labels without the
        top classes (a subset of CIFAR-10 with only classes 0..7, say) pass
        ``num_classes=10`` to get the official split.
    max_attempts:
        Give up with ``ValueError`` after this many attempts. Below :math:`\alpha = 10^{-3}`
        numpy's legacy ``RandomState.dirichlet`` returns NaN shares ever more often (its gamma draws
        all underflow to 0; over 16 clients in 4 % of the draws at :math:`3 \cdot 10^{-4}`, 32 % at
        :math:`10^{-4}`, 89 % at :math:`10^{-5}`), each ending its attempt; when every attempt ended so,
        the ``ValueError`` says so (use :func:`dirichlet_partition_generator` for such an :math:`\alpha`);
        when some attempt split every class and still missed ``min_size``, it is the ``min_size`` error, counting
        the NaN attempts (then the Generator variant may miss ``min_size`` too); when every attempt ended on a
        class's NaN or all-zero shares, before ``min_size`` was checked, the error says that and advises a larger
        :math:`\alpha` only.

    Returns
    -------
    list of numpy.ndarray
        ``num_clients`` int64 index arrays, disjoint, together covering ``range(n)``,
        each in the shuffled order of the official code.

    Example
    -------
    Sixty labels, twenty of each of three classes, over :math:`m = 3` clients with
    :math:`\alpha = 0.1` (rows of :func:`class_counts` are clients, columns classes).  Each class
    goes almost whole to one client; the cap :math:`|S_j| < n/m = 20` is checked before each
    class, so client 1, which holds 17 samples after class 0, still takes 19 of class 2 (36 in
    all).  Client 2 gets 3 samples: with the default ``min_size=10`` that attempt is refused and
    the next draw of the same stream is kept:

    >>> import numpy as np
    >>> labels = np.repeat(np.arange(3), 20)
    >>> parts = dirichlet_partition(labels, num_clients=3, alpha=0.1, min_size=1)
    >>> class_counts(labels, parts).tolist(), [len(part) for part in parts]
    ([[2, 19, 0], [17, 0, 19], [1, 1, 1]], [21, 36, 3])
    >>> sorted(np.concatenate(parts).tolist()) == list(range(60))
    True
    >>> class_counts(labels, dirichlet_partition(labels, num_clients=3, alpha=0.1)).tolist()
    [[0, 19, 0], [0, 1, 20], [20, 0, 0]]

    A large :math:`\alpha` gives near-equal shares of every class:

    >>> class_counts(labels, dirichlet_partition(labels, num_clients=3, alpha=1000.0, min_size=1)).tolist()
    [[6, 6, 6], [7, 7, 7], [7, 7, 7]]
    """
    y, num_classes = _check_labels(labels, num_classes)
    num_clients, alpha, min_size, max_attempts = _check_common(y, num_clients, alpha, min_size, max_attempts)
    seed = check_int("seed", seed, minimum=0)
    if seed >= 2**32:
        raise ValueError(f"seed must be < 2**32 for numpy's legacy generator, got {seed}")
    rs = np.random.RandomState(seed)
    return _dirichlet_split(y, num_clients, alpha, min_size, num_classes, max_attempts, rs.shuffle, rs.dirichlet)


def dirichlet_partition_generator(
    labels,
    num_clients: int = 16,
    alpha: float = 0.1,
    rng_or_seed: np.random.Generator | int = 0,
    min_size: int = 10,
    *,
    num_classes: int | None = None,
    max_attempts: int = _DEFAULT_MAX_ATTEMPTS,
) -> list[np.ndarray]:
    r"""The same Dirichlet partition on a modern :class:`numpy.random.Generator`.

    Identical algorithm and parameters as :func:`dirichlet_partition` (see the module
    docstring for the math); only the random source differs, so the split has the same
    distribution but is not the official one.  Use it to vary the partition with the
    run seed (the paper keeps it fixed).  The defaults of the shared parameters are those of
    :func:`dirichlet_partition` (the paper's 16 clients, :math:`\alpha = 0.1`, ``min_size``
    10).

    Parameters
    ----------
    labels, num_clients, alpha, min_size, num_classes, max_attempts:
        As in :func:`dirichlet_partition`.
    rng_or_seed:
        A ``numpy.random.Generator`` (advanced in place), or an integer seed ``s >= 0`` meaning
        ``fedlib.rng.generator(s, "partition")``; default 0, the run seed the chapters default
        to (not the official partition seed 2020, which seeds a different, legacy stream).

    Returns
    -------
    list of numpy.ndarray
        As in :func:`dirichlet_partition`: ``num_clients`` disjoint int64 index arrays covering
        ``range(n)``.

    Example
    -------
    The same seed gives the same split; every class is handed out whole (column sums 20), and the
    split differs from the official stream's (:func:`dirichlet_partition`):

    >>> import numpy as np
    >>> labels = np.repeat(np.arange(3), 20)
    >>> first = dirichlet_partition_generator(labels, 3, 0.1, 7, min_size=1)
    >>> again = dirichlet_partition_generator(labels, 3, 0.1, 7, min_size=1)
    >>> all(np.array_equal(a, b) for a, b in zip(first, again))
    True
    >>> class_counts(labels, first).sum(axis=0).tolist()
    [20, 20, 20]
    >>> official = dirichlet_partition(labels, 3, 0.1, min_size=1)
    >>> all(np.array_equal(a, b) for a, b in zip(first, official))
    False

    With the defaults: 16 clients, :math:`\alpha = 0.1`, seed 0 (a ``Generator`` of that stream
    gives the same split):

    >>> from fedlib.rng import generator
    >>> labels = np.repeat(np.arange(10), 100)
    >>> split = dirichlet_partition_generator(labels)
    >>> len(split), min(map(len, split)) >= 10
    (16, True)
    >>> seeded = dirichlet_partition_generator(labels, rng_or_seed=generator(0, "partition"))
    >>> all(np.array_equal(a, b) for a, b in zip(split, seeded))
    True
    """
    y, num_classes = _check_labels(labels, num_classes)
    num_clients, alpha, min_size, max_attempts = _check_common(y, num_clients, alpha, min_size, max_attempts)
    rng = _as_generator(rng_or_seed)
    return _dirichlet_split(y, num_clients, alpha, min_size, num_classes, max_attempts, rng.shuffle, rng.dirichlet)


def iid_partition(n: int, num_clients: int, seed) -> list[np.ndarray]:
    r"""Split ``range(n)`` uniformly at random into ``num_clients`` near-equal parts.

    A random permutation of ``0..n-1`` cut into consecutive blocks whose sizes differ by
    at most one (the first ``n mod num_clients`` blocks are one larger).  The IID
    baseline to the Dirichlet split.

    Parameters
    ----------
    n:
        Number of samples (>= ``num_clients``, so that no client is empty).
    num_clients:
        Number of parts.
    seed:
        An integer (stream ``fedlib.rng.generator(seed, "partition")``) or a
        ``numpy.random.Generator``.

    Returns
    -------
    list of numpy.ndarray
        ``num_clients`` disjoint int64 index arrays covering ``range(n)``.

    Example
    -------
    Ten samples over three clients: :math:`10 = 4 + 3 + 3`, the first :math:`10 \bmod 3 = 1`
    block one larger, and every index used once:

    >>> import numpy as np
    >>> parts = iid_partition(10, 3, seed=0)
    >>> [len(part) for part in parts], sorted(np.concatenate(parts).tolist()) == list(range(10))
    ([4, 3, 3], True)
    """
    n = check_int("n", n, minimum=1)
    num_clients = check_int("num_clients", num_clients, minimum=1)
    if num_clients > n:
        raise ValueError(f"num_clients={num_clients} exceeds n={n}: some client would be empty")
    rng = _as_generator(seed, name="seed")
    perm = rng.permutation(n).astype(np.int64)
    return [np.ascontiguousarray(part) for part in np.array_split(perm, num_clients)]


def class_counts(labels, parts, num_classes: int | None = None) -> np.ndarray:
    r"""Matrix ``C[j, k]`` = number of samples of class ``k`` held by client ``j``.

    ``parts`` is a list of index arrays as returned by the partition functions (for the
    official code's ``{client: indices}`` dict, pass ``[d[j] for j in range(len(d))]``).
    Row :math:`j` sums to :math:`n_j = |S_j|`, column :math:`k` to the number of samples of class
    :math:`k` the parts hold. ``parts`` need not be disjoint (a split of your own may share samples, as
    :class:`fedlib.engines.stacked.RunSpec` allows): a sample in several parts is counted in each.

    ``labels`` is the non-empty 1-d integer array of every sample's class (:math:`\ge 0`); ``num_classes`` the number
    of columns (an integer :math:`\ge 1`; default ``max(labels) + 1``).

    Example
    -------
    Labels ``0, 0, 1, 2, 2, 2``; client 0 holds samples 0 and 2 (classes 0 and 1), client 1 the
    other four (one of class 0, three of class 2):

    >>> class_counts([0, 0, 1, 2, 2, 2], [[0, 2], [1, 3, 4, 5]]).tolist()
    [[1, 1, 0], [1, 0, 3]]
    """
    y, num_classes = _check_labels(labels, num_classes)
    if isinstance(parts, np.ndarray) and parts.ndim == 2:  # equal-size clients stacked: one row each
        parts = list(parts)
    if not isinstance(parts, (list, tuple)):
        hint = " (the official code's {client: indices} dict: pass [d[j] for j in range(len(d))])" \
            if isinstance(parts, dict) else ""
        raise ValueError(f"parts must be a list of index arrays, one per client, got {type(parts).__name__}{hint}")
    counts = np.zeros((len(parts), num_classes), dtype=np.int64)
    for j, idx in enumerate(parts):
        try:
            idx = np.asarray(idx)
        except ValueError as exc:  # ragged nesting
            raise ValueError(f"parts[{j}] must be a 1-d array of indices ({exc})") from None
        if idx.ndim != 1:
            raise ValueError(f"parts[{j}] must be a 1-d array of indices, got shape {idx.shape}")
        if idx.size and idx.dtype.kind not in "iu":
            raise ValueError(f"parts[{j}] must hold integer indices, got dtype {idx.dtype}")
        idx = idx.astype(np.int64, copy=False)
        if idx.size and (idx.min() < 0 or idx.max() >= y.size):
            raise ValueError(f"parts[{j}] holds indices outside 0..{y.size - 1}")
        counts[j] = np.bincount(y[idx], minlength=num_classes)
    return counts


def _as_generator(rng_or_seed, name: str = "rng_or_seed") -> np.random.Generator:
    if isinstance(rng_or_seed, np.random.Generator):
        return rng_or_seed
    if isinstance(rng_or_seed, np.random.RandomState):
        raise ValueError(f"{name} must be a numpy.random.Generator or an int seed, not a legacy RandomState "
                         "(use dirichlet_partition for the legacy/official stream)")
    return _stream(check_int(name, rng_or_seed, minimum=0), "partition")

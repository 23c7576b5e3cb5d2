r"""The Synthetic(:math:`\alpha`, :math:`\beta`) federated classification problem.

This is the generator introduced with FedProx (T. Li, A. K. Sahu, M. Zaheer, M. Sanjabi,
A. Talwalkar, V. Smith, *Federated Optimization in Heterogeneous Networks*, MLSys 2020)
and used by FedNova for its logistic-regression experiments (paper §6, Figure 5: chapter 4 of
our book; chapters 1, 7, 9 and 10 run on it too).  :math:`\alpha` is meant to spread the clients' *models*, :math:`\beta` their
*inputs*; ``Synthetic(0, 0)`` is still non-IID (each client has its own :math:`W_k`,
:math:`v_k`), while ``iid=True`` gives the FedProx "synthetic_iid" set.

In exact arithmetic :math:`\alpha` has no effect on the labels: the mean :math:`u_k` is added
to every entry of :math:`W_k` and :math:`b_k`, which adds :math:`u_k(\sum_j x_j + 1)` to *every*
class score of a sample, an :math:`\arg\max` does not see a shift common to all classes, and
:math:`x` does not involve :math:`\alpha`. So, although FedProx describes :math:`\alpha` as
controlling how much the local models differ, in this generator (as in FedProx's code) the
clients' labelling functions differ only through their own :math:`W_k, b_k, v_k` and through
:math:`\beta`. In float64 the shift is not free: FedProx's code, and this generator, compute
the scores with it, and an entry :math:`u_k + \varepsilon` of :math:`W_k` keeps its
class-specific part :math:`\varepsilon \sim \mathcal N(0, 1)` only to about
:math:`|u_k|\,2^{-53}`, so a sample whose two largest class scores are closer than about
:math:`|u_k|\,2^{-53}\sum_j|x_j|` may get another label than with :math:`\alpha = 0`. With
seeds 0 and 1 (:math:`\beta` = 0 and 1, about 12,000 samples each) no label differs from
:math:`\alpha = 0` up to :math:`\alpha = 10^{10}`, 1 to 3 do at :math:`10^{11}` and 2 to 5 at
:math:`10^{12}`; an audit measured 6 % at :math:`10^{14}`, 38 % at :math:`10^{15}`, 83 % at
:math:`10^{16}`. :func:`synthetic` therefore refuses :math:`\alpha >` :data:`ALPHA_MAX`
:math:`= 2^{26} \approx 6.7 \times 10^7`: up to it, every client with :math:`|u_k| \le 8\alpha`
(all but a :math:`10^{-15}` chance per client) keeps :math:`\varepsilon` to at least float32's
24 bits, :math:`8\alpha\,2^{-53} \le 2^{-24}`. With the same seed, ``synthetic(0, beta)`` and
``synthetic(5, beta)`` are the same data set (``tests/test_data_synthetic.py`` checks it).

Generative model (client :math:`k = 1..m`, feature :math:`j = 1..d`, :math:`C` classes)
---------------------------------------------------------------------------------------

.. math::

    n_k &= \lfloor e^{Z_k} \rfloor + 50, \qquad Z_k \sim \mathcal N(4, 2^2) \\
    u_k &\sim \mathcal N(0, \alpha^2), \qquad
        W_k \in \mathbb R^{d \times C},\ (W_k)_{jc} \sim \mathcal N(u_k, 1), \qquad
        b_k \in \mathbb R^{C},\ (b_k)_c \sim \mathcal N(u_k, 1) \\
    B_k &\sim \mathcal N(0, \beta^2), \qquad (v_k)_j \sim \mathcal N(B_k, 1) \\
    x &\sim \mathcal N(v_k, \Sigma), \qquad \Sigma = \operatorname{diag}(j^{-1.2}) \\
    y &= \arg\max_c \,(x^\top W_k + b_k)_c

(:math:`\alpha` and :math:`\beta` are *standard deviations*, as in the FedProx code.)
With ``iid=True`` one shared :math:`W, b` with entries :math:`\mathcal N(0, 1)` is used by
every client and :math:`x \sim \mathcal N(0, \Sigma)`; ``alpha`` and ``beta`` are then
unused.  Each client's samples are shuffled and split into the first
``int(train_fraction * n_k)`` for training (the FedProx rule, i.e. *floor*, at least 1)
and the rest for testing.

Randomness
----------
The sizes come from stream ``generator(seed, "data_sizes")``, client :math:`k`'s
:math:`u_k, B_k, W_k, b_k, v_k, x` and shuffle from ``generator(seed, "data", k)``, and the
shared IID model from ``generator(seed, "data_shared")`` (see :mod:`fedlib.rng`).  Client
:math:`k`'s data therefore does not depend on ``num_clients``, and two calls with the
same seed but different :math:`(\alpha, \beta)` use the same underlying standard normals.
The original FedProx script sets no seed, so its released files cannot be reproduced
draw for draw; only the distribution is the same.

Example
-------
>>> from fedlib.data.synthetic import synthetic
>>> ds = synthetic(alpha=1.0, beta=1.0, seed=0)
>>> ds.num_clients, ds.num_features, ds.num_classes
(30, 60, 10)
>>> bool(ds.num_samples.min() >= int(0.9 * 50))
True
>>> ds.name
'synthetic(1,1)'
"""
from __future__ import annotations

import numbers

import numpy as np

from .._validate import check_agree, check_flag, check_int, check_memory, check_nonnegative
from ..rng import generator
from .clients import FederatedDataset

__all__ = ["synthetic", "synthetic_covariance_diagonal", "ALPHA_MAX"]

#: Parameters of the lognormal client sizes and the minimum size (FedProx).
LOGNORMAL_MEAN = 4.0
LOGNORMAL_SIGMA = 2.0
MIN_SAMPLES = 50
#: Largest ``alpha`` :func:`synthetic` takes, :math:`2^{26}` — with it :math:`8\alpha\,2^{-53} \le 2^{-24}`, so the
#: class-specific part of :math:`W_k`'s entries keeps float32's 24 bits next to a shift :math:`|u_k| \le 8\alpha`
#: (module docstring).
ALPHA_MAX = 2.0 ** 26
#: Exponent of the feature covariance :math:`\Sigma_{jj} = j^{-1.2}`.
COVARIANCE_EXPONENT = -1.2


def synthetic_covariance_diagonal(dim: int) -> np.ndarray:
    r"""The diagonal of :math:`\Sigma`, :math:`\Sigma_{jj} = j^{-1.2}` for :math:`j = 1..d`.

    ``dim`` is :math:`d`, an integer :math:`\ge 1`.

    Example
    -------
    :math:`1^{-1.2} = 1`, :math:`2^{-1.2} = 0.4353`, :math:`3^{-1.2} = 0.2676`: later features vary less.

    >>> synthetic_covariance_diagonal(3).round(4).tolist()
    [1.0, 0.4353, 0.2676]
    """
    dim = check_int("dim", dim, minimum=1)
    return np.arange(1, dim + 1, dtype=np.float64) ** COVARIANCE_EXPONENT


def _client_sizes(seed: int, num_clients: int, num_samples) -> np.ndarray:
    """Total sample counts n_k (train + test): FedProx lognormal, or user-fixed."""
    if num_samples is None:
        rng = generator(seed, "data_sizes")
        z = rng.lognormal(LOGNORMAL_MEAN, LOGNORMAL_SIGMA, size=num_clients)
        return np.floor(z).astype(np.int64) + MIN_SAMPLES
    if isinstance(num_samples, np.ndarray) and num_samples.ndim == 0:  # a 0-d array is its one value
        num_samples = num_samples[()]
    if isinstance(num_samples, (numbers.Integral, np.integer)) and not isinstance(num_samples, bool):
        return np.full(num_clients, _check_size(num_samples), dtype=np.int64)
    if isinstance(num_samples, (str, bytes, bool)) or not hasattr(num_samples, "__len__"):
        raise ValueError(f"num_samples must be None, a positive integer or one positive integer per client, "
                         f"got {num_samples!r}")
    sizes = list(num_samples)
    # either may be the wrong one: 'num_samples must have 3 entries' blamed num_samples for num_clients=3
    check_agree("num_samples", len(sizes), "num_clients", num_clients, "entries", count=True)
    return np.array([_check_size(s) for s in sizes], dtype=np.int64)


def _check_size(n) -> int:
    """One client's total size: an integer >= 1 below 2**63 (an int64: past it numpy's OverflowError 'Python int
    too large to convert to C long' named no argument)."""
    n = check_int("num_samples", n, minimum=1)
    if n >= 2 ** 63:
        raise ValueError(f"num_samples must be below 2**63 (a sample count), got {n}")
    return n


def _check_finite_client(k: int, x: np.ndarray, scores: np.ndarray, alpha: float, beta: float) -> None:
    r"""Refuse a client whose features :math:`x` or class scores :math:`x^\top W_k + b_k` overflow
    float64: the labels would be the :math:`\arg\max` of inf / NaN (in practice from
    :math:`\alpha` or :math:`\beta` of order :math:`10^{306}`, :math:`|u_k|\,|\sum_j x_j + 1|` or
    :math:`|x|\,|W_k|` above the largest double, :math:`1.8 \times 10^{308}`)."""
    if not np.all(np.isfinite(x)):
        raise ValueError(f"beta={beta!r} is too large: client {k}'s inputs x ~ N(v_k, Sigma), v_k ~ N(B_k, 1), "
                         f"B_k ~ N(0, beta^2), overflow float64 (inf); choose a smaller beta")
    if not np.all(np.isfinite(scores)):
        raise ValueError(f"alpha={alpha!r}, beta={beta!r} are too large: client {k}'s class scores x^T W_k + b_k "
                         f"(W_k, b_k ~ N(u_k, 1), u_k ~ N(0, alpha^2)) overflow float64 (inf or NaN), so its labels "
                         f"would be the argmax of inf; choose a smaller alpha or beta")


def synthetic(
    alpha: float = 1.0,
    beta: float = 1.0,
    num_clients: int = 30,
    dim: int = 60,
    num_classes: int = 10,
    seed: int = 0,
    train_fraction: float = 0.9,
    iid: bool = False,
    num_samples=None,
) -> FederatedDataset:
    r"""Generate the FedProx Synthetic(:math:`\alpha`, :math:`\beta`) data set.

    See the module docstring for the generative model.

    Parameters
    ----------
    alpha, beta:
        Standard deviations of the per-client model mean :math:`u_k` and input mean
        :math:`B_k` (>= 0; ``alpha`` at most :data:`ALPHA_MAX`).  Ignored when ``iid`` is true.
    num_clients, dim, num_classes:
        :math:`m` (>= 1), :math:`d` (>= 1), :math:`C` (>= 2).  FedProx: 30, 60, 10.
    seed:
        Run seed (>= 0) for :func:`fedlib.rng.generator`.
    train_fraction:
        In (0, 1).  Client :math:`k` keeps ``max(1, int(train_fraction * n_k))``
        shuffled samples for training and the rest for testing.
    iid:
        If true, the FedProx "synthetic_iid" variant: one shared :math:`W, b \sim
        \mathcal N(0, 1)` and :math:`x \sim \mathcal N(0, \Sigma)` on every client.
    num_samples:
        ``None`` (default) for the FedProx sizes :math:`\lfloor \mathrm{LogNormal}(4, 2)
        \rfloor + 50`; an integer or a sequence of ``num_clients`` integers (>= 1) to
        fix the total per-client sizes instead (not in FedProx; useful for tests).

    Raises
    ------
    ValueError
        A parameter out of range, ``alpha`` above :data:`ALPHA_MAX` (module docstring), or
        ``beta`` so large (of order :math:`10^{306}`) that a client's features or class scores
        overflow float64.

    Returns
    -------
    FederatedDataset
        float64 features, int64 labels.  ``meta`` records the parameters, the user ids
        ``f_00000, ...`` (FedProx naming), the total sizes and the drawn
        :math:`u_k, B_k`.

    Example
    -------
    >>> ds = synthetic(0.5, 0.5, num_clients=5, seed=1)
    >>> ds.num_clients, ds.meta["alpha"], ds.test_y[0].dtype
    (5, 0.5, dtype('int64'))
    """
    alpha = check_nonnegative("alpha", alpha)
    beta = check_nonnegative("beta", beta)
    num_clients = check_int("num_clients", num_clients, minimum=1)
    dim = check_int("dim", dim, minimum=1)
    num_classes = check_int("num_classes", num_classes, minimum=2)
    seed = check_int("seed", seed, minimum=0)
    if not (isinstance(train_fraction, numbers.Real) and not isinstance(train_fraction, bool)
            and 0.0 < train_fraction < 1.0):
        raise ValueError(f"train_fraction must lie in (0, 1), got {train_fraction!r}")
    train_fraction = float(train_fraction)
    iid = check_flag("iid", iid)
    if not iid and alpha > ALPHA_MAX:
        raise ValueError(f"alpha must be at most ALPHA_MAX = 2**26 = {ALPHA_MAX:.0f}, got {alpha!r}: the shift u_k ~ "
                         f"N(0, alpha^2) added to every entry of W_k rounds away the class-specific N(0, 1) part in "
                         f"float64 (labels then differ from alpha = 0 although alpha cancels in the argmax)")

    sizes = _client_sizes(seed, num_clients, num_samples)
    total = int(sizes.sum())  # float64 features and int64 labels, made client by client
    check_memory(total * (dim + 1) * 8, f"the Synthetic data ({total:,} samples of {num_clients:,} clients, dim {dim})")
    std = np.sqrt(synthetic_covariance_diagonal(dim))
    if iid:
        shared = generator(seed, "data_shared")
        w_shared = shared.standard_normal((dim, num_classes))
        b_shared = shared.standard_normal(num_classes)

    train_x, train_y, test_x, test_y = [], [], [], []
    us, bs = [], []
    for k in range(num_clients):
        rng = generator(seed, "data", k)
        n = int(sizes[k])
        with np.errstate(over="ignore", invalid="ignore"):  # checked below, naming alpha / beta
            if iid:
                u_k = b_k_mean = 0.0
                w, b = w_shared, b_shared
                v = np.zeros(dim)
            else:
                u_k = alpha * rng.standard_normal()
                b_k_mean = beta * rng.standard_normal()
                w = u_k + rng.standard_normal((dim, num_classes))
                b = u_k + rng.standard_normal(num_classes)
                v = b_k_mean + rng.standard_normal(dim)
            x = v + std * rng.standard_normal((n, dim))
            scores = x @ w + b
        _check_finite_client(k, x, scores, alpha, beta)
        y = np.argmax(scores, axis=1).astype(np.int64)
        order = rng.permutation(n)
        x, y = x[order], y[order]
        n_train = max(1, int(train_fraction * n))
        train_x.append(np.ascontiguousarray(x[:n_train]))
        train_y.append(y[:n_train].copy())
        test_x.append(np.ascontiguousarray(x[n_train:]))
        test_y.append(y[n_train:].copy())
        us.append(float(u_k))
        bs.append(float(b_k_mean))

    name = "synthetic_iid" if iid else f"synthetic({alpha:g},{beta:g})"
    meta = {
        "generator": "fedprox-synthetic",
        "alpha": alpha,
        "beta": beta,
        "num_clients": num_clients,
        "dim": dim,
        "num_classes": num_classes,
        "seed": seed,
        "train_fraction": train_fraction,
        "iid": iid,
        "sizes": "fixed" if num_samples is not None else "lognormal(4,2)+50",
        "total_samples": sizes.tolist(),
        "users": [f"f_{k:05d}" for k in range(num_clients)],
        "u": us,
        "B": bs,
    }
    return FederatedDataset(train_x, train_y, test_x, test_y, num_classes=num_classes, name=name, meta=meta)

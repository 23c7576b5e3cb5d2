r"""Quadratic clients :math:`F_i(x) = \frac12 x^\top H_i x - e_i^\top x` (paper §3, App. A).

Used by chapter 2 (objective inconsistency, Figure 2), chapter 3 (FedProx's trade-off), and
by chapters 7, 8 and 10 through :mod:`fedlib.experiments`; the closed forms live in
:mod:`fedlib.theory`.  The global objective is :math:`F = \sum_i p_i F_i`, minimised at
:math:`x^* = (\sum_i p_i H_i)^{-1} \sum_i p_i e_i`.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .._validate import check_agree, check_int, check_positive, check_probability_vector, tensor_as_float64
from ..rng import generator
from ..theory import _check_quadratic, quadratic_global_optimum

__all__ = ["QuadraticProblem", "random_quadratic"]


@dataclasses.dataclass(frozen=True)
class QuadraticProblem:
    r"""Clients :math:`F_i(x) = \tfrac12 x^\top H_i x - e_i^\top x` with ``H`` (m, d, d) symmetric
    positive semi-definite, ``e`` (m, d) and weights ``p`` (m,). An :math:`H_i` with a negative
    eigenvalue is refused: :math:`F_i` would be unbounded below and :meth:`optimum` a saddle point.

    Example
    -------
    Two one-dimensional clients, :math:`F_1 = \tfrac12 x^2 - 2x` (:math:`x_1^* = 2`) and
    :math:`F_2 = \tfrac32 x^2` (:math:`x_2^* = 0`), equal weights:
    :math:`x^* = (\tfrac12 \cdot 2)/(\tfrac12(1 + 3)) = 1/2`, :math:`\nabla F_1(0) = -2`,
    :math:`\nabla F(0) = \tfrac12(-2 + 0) = -1`, :math:`F(x^*) = \tfrac12 \cdot 2 \cdot \tfrac14 - \tfrac12 = -\tfrac14`:

    >>> import numpy as np
    >>> problem = QuadraticProblem(H=np.array([[[1.0]], [[3.0]]]), e=np.array([[2.0], [0.0]]), p=np.array([0.5, 0.5]))
    >>> problem.num_clients, problem.dim, problem.optimum().tolist()
    (2, 1, [0.5])
    >>> problem.grad(np.zeros(1), 0).tolist(), problem.global_grad(np.zeros(1)).tolist(), problem.loss(problem.optimum())
    ([-2.0], [-1.0], -0.25)
    >>> QuadraticProblem(H=np.array([[[-1.0]]]), e=np.array([[0.0]]), p=np.array([1.0]))
    Traceback (most recent call last):
    ...
    ValueError: H: every H_i must be positive semi-definite; H_0 has the eigenvalue -1
    """

    H: np.ndarray
    e: np.ndarray
    p: np.ndarray

    def __post_init__(self):
        H, e, p, _ = _check_quadratic(self.H, self.e, self.p)
        # relative to each H_i's own size, as the symmetry check is: rounding leaves ~1e-16 of it
        eig = np.linalg.eigvalsh(H)
        bad = np.flatnonzero(eig[:, 0] < -1e-10 * np.abs(eig).max(axis=1))
        if bad.size:
            raise ValueError(f"H: every H_i must be positive semi-definite; H_{bad[0]} has the eigenvalue "
                             f"{eig[bad[0], 0]:.3g}")
        object.__setattr__(self, "H", H)
        object.__setattr__(self, "e", e)
        object.__setattr__(self, "p", p)

    @property
    def num_clients(self) -> int:
        """Number of clients :math:`m`."""
        return self.H.shape[0]

    @property
    def dim(self) -> int:
        """Dimension :math:`d` of :math:`x`."""
        return self.H.shape[1]

    def _vector(self, x) -> np.ndarray:
        if type(x) is np.ndarray and x.shape == (self.H.shape[1],):  # the common case, without np.shape's dispatch
            return x
        x = tensor_as_float64(x)
        if np.shape(x) != (self.H.shape[1],):
            raise ValueError(f"x must be a vector of the problem's dimension {self.H.shape[1]}, got shape {np.shape(x)}")
        x = np.asarray(x)
        if x.dtype.kind not in "biufc":  # strings or objects failed inside numpy's matmul / einsum
            raise ValueError(f"x must be a vector of numbers, got dtype {x.dtype}")
        return x

    def grad(self, x: np.ndarray, client: int) -> np.ndarray:
        r""":math:`\nabla F_i(x) = H_i x - e_i` for the client index ``0 <= client < m``."""
        m = self.H.shape[0]
        # numpy indexing took client -1 as the last client and 1.0 as an error deep inside numpy
        if not (type(client) is int and 0 <= client < m) and (  # a plain int in range: no isinstance chain
                isinstance(client, bool) or not isinstance(client, (int, np.integer)) or not 0 <= client < m):
            raise ValueError(f"client must be an integer in [0, {m}), got {client!r}")
        return self.H[client] @ self._vector(x) - self.e[client]

    def global_grad(self, x: np.ndarray) -> np.ndarray:
        r""":math:`\nabla F(x) = \sum_i p_i (H_i x - e_i)`."""
        return np.einsum("i,ijk,k->j", self.p, self.H, self._vector(x)) - self.p @ self.e

    def loss(self, x: np.ndarray) -> float:
        r""":math:`F(x) = \sum_i p_i F_i(x)`."""
        x = self._vector(x)  # a list failed in 0.5 * x
        return float(0.5 * x @ np.einsum("i,ijk->jk", self.p, self.H) @ x - (self.p @ self.e) @ x)

    def optimum(self) -> np.ndarray:
        """The global minimiser :math:`x^*`."""
        return quadratic_global_optimum(self.H, self.e, self.p)

    def grad_fn(self):
        """``(params, client, round, step) -> grad`` for :func:`fedlib.engines.reference.run_sequential`."""
        return lambda x, i, t, k: self.grad(x, i)


def random_quadratic(num_clients: int, dim: int, seed: int = 0, *, eig_range=(0.5, 2.0), spread: float = 5.0,
                     p=None) -> QuadraticProblem:
    r"""Random SPD :math:`H_i = Q_i \operatorname{diag}(\lambda_i) Q_i^\top` (eigenvalues uniform in
    ``eig_range``, :math:`Q_i` Haar-random) and :math:`e_i = H_i x_i^*` with local optima
    :math:`x_i^* \sim N(0, \text{spread}^2 I)`; equal weights unless ``p`` given.

    Client :math:`i`'s draws come from ``fedlib.rng.generator(seed, "data", i)``, so it does not depend
    on ``num_clients``.  Chapters 2, 3 and 10 build their problems with it.

    Example
    -------
    Three clients in :math:`d = 4`: every eigenvalue of every :math:`H_i` lies in the default
    ``eig_range`` :math:`[1/2, 2]`, the weights are :math:`1/3`, and the global gradient vanishes at
    :meth:`QuadraticProblem.optimum`:

    >>> import numpy as np
    >>> problem = random_quadratic(num_clients=3, dim=4, seed=0)
    >>> problem.H.shape, problem.e.shape, problem.p.round(4).tolist()
    ((3, 4, 4), (3, 4), [0.3333, 0.3333, 0.3333])
    >>> eigenvalues = np.linalg.eigvalsh(problem.H)
    >>> bool(eigenvalues.min() >= 0.5 and eigenvalues.max() <= 2.0)
    True
    >>> bool(np.abs(problem.global_grad(problem.optimum())).max() < 1e-12)
    True
    >>> small = random_quadratic(num_clients=2, dim=4, seed=0)
    >>> bool(np.array_equal(small.H, problem.H[:2]))
    True
    """
    m = check_int("num_clients", num_clients, minimum=1)
    d = check_int("dim", dim, minimum=1)
    if (isinstance(eig_range, (str, bytes)) or not hasattr(eig_range, "__len__") or getattr(eig_range, "ndim", 1) != 1
            or len(eig_range) != 2):  # a 0-d array has __len__ (len() raised TypeError), a (2, 1) one two rows
        raise ValueError(f"eig_range must be a pair (low, high) of eigenvalues > 0, got {eig_range!r}")
    lo, hi = eig_range
    check_positive("eig_range[0]", lo)
    check_positive("eig_range[1]", hi)  # nan / inf passed the order check below and crashed in numpy's uniform
    if hi < lo:
        raise ValueError(f"eig_range must be (low, high) with low <= high, got {eig_range!r}")
    check_positive("spread", spread)
    if p is not None:  # measured against num_clients here: QuadraticProblem's check would name H, built from it
        check_agree("p", check_probability_vector("p", p).size, "num_clients", m, "entries", count=True)
    H = np.empty((m, d, d))
    e = np.empty((m, d))
    for i in range(m):
        g = generator(seed, "data", i)
        Q, R = np.linalg.qr(g.standard_normal((d, d)))
        Q = Q * np.sign(np.diag(R))
        lam = g.uniform(lo, hi, size=d)
        H[i] = (Q * lam) @ Q.T
        H[i] = 0.5 * (H[i] + H[i].T)
        e[i] = H[i] @ (spread * g.standard_normal(d))
    # a given p is checked by QuadraticProblem as given (np.asarray(p, dtype=float) failed on a tensor with grad
    # or in bfloat16, and on complex or string entries, naming no argument)
    return QuadraticProblem(H, e, np.full(m, 1.0 / m) if p is None else p)

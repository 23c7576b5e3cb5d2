r"""Taking the general update rule apart: measure :math:`G_i` and :math:`a_i` of real local runs.

Used by chapter 1 ("The general update rule"; paper §4.1, App. B). Three kinds of
measurement, all on the real :class:`fedlib.solvers.LocalSolver` step:

* :func:`trace_local_run` runs a solver and records the *effective* gradient of every
  local step (the gradient passed in plus the weight-decay term :math:`\lambda x_k`,
  which belongs to :math:`G_i`, not to :math:`a_i`), so that the change
  :math:`\Delta_i` can be rebuilt from the rule :math:`\Delta_i = -\eta G_i a_i`
  (:func:`delta_from_rule`).
* :func:`probe_a_vector` reads :math:`a_i` off a run on a probe problem whose gradient
  at local step :math:`k` is the unit vector :math:`e_k` (independent of the
  parameters): then :math:`G_i = I` and :math:`\Delta_i = -\eta a_i` exactly.
* :func:`check_server_step` runs one round of FedAvg or FedNova through the library (clients' local runs,
  ``client_final``, ``apply``) and compares the change of the global model with eq. 4 written out from the
  recorded gradients and the closed-form :math:`a_i`: the step the server applies, not only the weights it reports.
* :func:`official_counter_a_norm` is the running counter of the official FedNova code
  for momentum + prox (momentum counter first, then prox counter), :func:`official_counter_excess`
  its overshoot of the true :math:`\|a_i\|_1` in closed form (relatively :math:`|1-\alpha-\rho|` in the
  limit: the counter is right only there, and only when :math:`\alpha+\rho = 1`), and
  :func:`official_inplace_a_vector` the true :math:`a_i` of the official code's
  *dynamics*, which add the proximal term in place into the momentum buffer.

The client problem of the chapter is multinomial logistic regression on one
Synthetic(1, 1) client (:class:`SoftmaxRegressionClient`, mini-batch gradients).

Example
-------
>>> import numpy as np
>>> from fedlib.solvers import momentum_proximal_sgd
>>> s = momentum_proximal_sgd(lr=0.1, momentum=0.5, mu=1.0)
>>> bool(np.allclose(probe_a_vector(s, 4), s.a_vector(4)))
True
>>> round(official_counter_a_norm(1, 0.5, 0.1), 12)   # the true ||a||_1 for one step is 1
1.9
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import numpy as np

from ._validate import (check_agree, check_count, check_in_range, check_instance, check_int, check_nonnegative,
                        check_positive, plain)
from .rng import generator
from . import solvers as _solvers
from .solvers import LocalSolver, SolverState

__all__ = [
    "LocalTrace",
    "trace_local_run",
    "delta_from_rule",
    "relative_error",
    "RuleCheck",
    "check_update_rule",
    "ServerStepCheck",
    "check_server_step",
    "a_norm_curves",
    "probe_a_vector",
    "official_counter_a_norm",
    "official_counter_excess",
    "official_counter_excess_limit",
    "official_inplace_a_vector",
    "SoftmaxRegressionClient",
    "solver_family",
    "momentum_prox_a_table",
    "traced_clients",
]


class LocalTrace(NamedTuple):
    r"""One recorded local run.

    ``G`` is :math:`(P, \tau)`: column :math:`k` is the effective gradient of step
    :math:`k` (gradient + weight decay); ``delta`` is :math:`\Delta_i = x^{(\tau)} - x^{(0)}`;
    ``a_norm`` the solver's online :math:`\|a_i\|_1`; ``state`` the final solver state.
    """

    G: np.ndarray
    delta: np.ndarray
    a_norm: float
    state: SolverState


def trace_local_run(solver: LocalSolver, params: np.ndarray, grad_fn: Callable[[np.ndarray, int], np.ndarray],
                    local_steps: int) -> LocalTrace:
    r"""Run ``solver`` for ``local_steps`` steps from the flat vector ``params`` with
    ``grad_fn(x, k)`` and record the effective gradients :math:`g_k + \lambda x_k`; ``local_steps`` is
    :math:`\tau`, a whole number :math:`\ge 1`."""
    tau = check_count("local_steps", local_steps, minimum=1)
    x0 = np.asarray(params, dtype=np.float64)
    if x0.ndim != 1:
        raise ValueError(f"params must be a flat 1-d vector, got shape {x0.shape}")
    G, state = _traced_steps(solver, solver.init(x0), grad_fn, tau)
    return LocalTrace(G, state.params - x0, float(state.a_norm), state)


def _traced_steps(solver: LocalSolver, state: SolverState, grad_fn: Callable[[np.ndarray, int], np.ndarray],
                  tau: int) -> tuple[np.ndarray, SolverState]:
    r"""``tau`` steps of ``solver`` from ``state``: the (P, tau) effective gradients :math:`g_k + \lambda x_k` (the
    columns of :math:`G_i`) and the final state."""
    G = np.empty((np.size(state.params), tau))
    for k in range(tau):
        g = np.asarray(grad_fn(state.params, k), dtype=np.float64)
        G[:, k] = g + solver.weight_decay * state.params
        state = solver.update(state, g)
    return G, state


def delta_from_rule(G: np.ndarray, a: np.ndarray, lr: float) -> np.ndarray:
    r"""The paper's :math:`\Delta_i = -\eta\, G_i a_i`.

    ``G`` is the (P, :math:`\tau`) matrix of the effective gradients, one column per step; ``a`` the (:math:`\tau`,)
    vector :math:`a_i`; ``lr`` :math:`\eta > 0`. Other shapes are a ``ValueError``."""
    lr = check_positive("lr", lr)
    G = np.asarray(G, dtype=np.float64)
    a = np.asarray(a, dtype=np.float64)
    if G.ndim != 2 or a.shape != (G.shape[1],):
        raise ValueError(f"G must be (P, tau) and a (tau,), got {G.shape} and {a.shape}")
    return -lr * (G @ a)


def relative_error(x: Any, reference: Any) -> float:
    r""":math:`\|x - r\|_2 / \|r\|_2` (plain :math:`\|x - r\|_2` when :math:`r = 0`).

    ``x`` and ``reference`` (:math:`r`) are arrays of one shape."""
    x = np.asarray(x, dtype=np.float64)
    r = np.asarray(reference, dtype=np.float64)
    check_agree("x", x.shape, "reference", r.shape, "shape")  # was 'shapes differ: (3,) vs (2,)', naming neither
    scale = float(np.linalg.norm(r))
    err = float(np.linalg.norm(x - r))
    return err / scale if scale > 0 else err


class RuleCheck(NamedTuple):
    r"""Result of :func:`check_update_rule`: relative errors of :math:`\Delta_i` rebuilt from
    the closed-form :math:`a_i` and of the online :math:`\|a_i\|_1`, plus the sizes compared.

    Fields: ``delta_error`` (:math:`\Delta_i` against :math:`-\eta G_i a_i`), ``a_norm_error`` (the online
    :math:`\|a_i\|_1` against the closed form, relative), ``a_norm`` (the closed-form :math:`\|a_i\|_1`) and
    ``delta_norm`` (:math:`\|\Delta_i\|_2` of the run)."""

    delta_error: float
    a_norm_error: float
    a_norm: float
    delta_norm: float


def check_update_rule(solver: LocalSolver, params: np.ndarray, grad_fn: Callable[[np.ndarray, int], np.ndarray],
                      local_steps: int) -> RuleCheck:
    r"""Run ``solver`` (:func:`trace_local_run`) and compare its real :math:`\Delta_i` with
    :math:`-\eta G_i a_i` (closed-form :meth:`~fedlib.solvers.LocalSolver.a_vector`), and its
    online :math:`\|a_i\|_1` with the closed form :meth:`~fedlib.solvers.LocalSolver.a_norm`.

    ``params`` is the flat starting vector :math:`x^{(t,0)}` (1-d), ``grad_fn(x, k)`` the gradient at step ``k`` and
    ``local_steps`` :math:`\tau \ge 1` (a whole number)."""
    trace = trace_local_run(solver, params, grad_fn, local_steps)
    rebuilt = delta_from_rule(trace.G, solver.a_vector(local_steps), solver.lr)
    closed = solver.a_norm(local_steps)
    return RuleCheck(relative_error(rebuilt, trace.delta), abs(trace.a_norm - closed) / closed, closed,
                     float(np.linalg.norm(trace.delta)))


class ServerStepCheck(NamedTuple):
    r"""Result of :func:`check_server_step`: ``relative_error`` of the library's change of the global model against
    eq. 4 written out (:math:`\|x_{\text{lib}} - x_{\text{eq. 4}}\|_2 / \|x_{\text{eq. 4}} - x^{(t,0)}\|_2`), and
    ``tau_eff`` and ``weights``, the :math:`\tau_{\text{eff}}` and :math:`w` that the written-out step used (eq. 6
    for FedAvg; :math:`w = p` for FedNova)."""

    relative_error: float
    tau_eff: float
    weights: np.ndarray


def check_server_step(name: str, solver: LocalSolver, clients: list, local_steps: Any, p: Any,
                      params: np.ndarray) -> ServerStepCheck:
    r"""One round of ``name`` (``"fedavg"`` or ``"fednova"``, with ``solver`` as every client's local solver) from
    the flat vector ``params``, every client of ``clients`` taking part with its ``local_steps[i]`` steps, run
    through the library: :func:`fedlib.algorithms.make_algorithm`'s ``client_init``, the solver's ``update`` on the
    client's gradients (``clients[i].grad(x, k)``), ``client_final`` and ``apply``. Next to it, eq. 4 written out
    from the effective gradients recorded on the way (gradient plus weight decay, the columns of :math:`G_i`) and
    the closed-form :math:`a_i` (:meth:`~fedlib.solvers.LocalSolver.a_vector`):

    .. math::

        x^{(t+1,0)} - x^{(t,0)} = -\tau_{\text{eff}}\sum_i w_i\,\eta\,\frac{G_i a_i}{\|a_i\|_1},

    with eq. 6's :math:`\tau_{\text{eff}} = \sum_i p_i\|a_i\|_1`, :math:`w_i = p_i\|a_i\|_1/\tau_{\text{eff}}` for
    FedAvg, and :math:`w_i = p_i` with the same :math:`\tau_{\text{eff}}` for FedNova. A server that reported
    :math:`w = p` but applied other coefficients (e.g. :math:`p_i/\|a_i\|_1` normalised to sum to 1) fails here,
    where a check of the reported weights passes. Used by chapter 1.

    ``clients`` are objects with ``grad(x, k)`` (e.g. :func:`traced_clients`), ``local_steps`` their :math:`\tau_i`
    (whole numbers :math:`\ge 1`, one per client), ``p`` their weights (summing to 1)."""
    from .algorithms import make_algorithm  # not at import: fedlib.algorithms need not load with this module
    from .sampling import full_participation

    check_instance("solver", solver, LocalSolver)
    if name not in ("fedavg", "fednova"):
        raise ValueError(f"name must be 'fedavg' or 'fednova', got {name!r}")
    steps = [check_count(f"local_steps[{i}]", t, minimum=1) for i, t in enumerate(local_steps)]
    if len(steps) != len(clients):
        raise ValueError(f"local_steps: {len(steps)} step counts for {len(clients)} clients")
    p = np.asarray(p, dtype=np.float64)
    x0 = np.asarray(params, dtype=np.float64)
    if x0.ndim != 1:
        raise ValueError(f"params must be a flat 1-d vector, got shape {x0.shape}")
    algo = make_algorithm(name, solver)
    server = algo.init(x0, len(clients))
    updates, by_hand, norms = [], [], []
    for i, (client, tau) in enumerate(zip(clients, steps)):
        G, state = _traced_steps(algo.solver, algo.client_init(server, i), client.grad, tau)
        updates.append(algo.client_final(server, i, state))
        a = solver.a_vector(tau)
        norms.append(a.sum())
        by_hand.append(G @ a / norms[-1])  # d_i
    new, _ = algo.apply(server, full_participation(p), updates, solver.lr, p)
    norms = np.array(norms)
    tau_eff = float(p @ norms)
    w = p * norms / tau_eff if name == "fedavg" else p.copy()
    change = -tau_eff * solver.lr * (w @ np.array(by_hand))
    err = float(np.linalg.norm(np.asarray(new.params, dtype=np.float64) - (x0 + change)) / np.linalg.norm(change))
    return ServerStepCheck(err, tau_eff, w)


def a_norm_curves(solver: LocalSolver, max_steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""For :math:`\tau = 1..` ``max_steps``: ``(taus, closed, probed)`` with the closed-form
    :math:`\|a_i\|_1` and the one measured by :func:`probe_a_vector` on the real solver; ``max_steps`` is a whole
    number :math:`\ge 1`."""
    check_instance("solver", solver, LocalSolver)
    taus = np.arange(1, check_count("max_steps", max_steps, minimum=1) + 1)
    closed = np.array([solver.a_norm(int(t)) for t in taus])
    probed = np.array([probe_a_vector(solver, int(t)).sum() for t in taus])
    return taus, closed, probed


def probe_a_vector(solver: LocalSolver, local_steps: int) -> np.ndarray:
    r"""Measure :math:`a_i` by running ``solver`` on a :math:`\tau`-dimensional probe whose
    gradient at step :math:`k` is :math:`e_k`: :math:`G_i = I`, so :math:`a_i = -\Delta_i/\eta`.

    Weight decay is switched off for the probe (it would add :math:`\lambda x_k` to
    :math:`G_i`; it is never part of :math:`a_i`).

    ``local_steps`` is :math:`\tau`, a whole number :math:`\ge 1`.
    """
    check_instance("solver", solver, LocalSolver)
    tau = check_count("local_steps", local_steps, minimum=1)
    return solver._stepped_a_vector(tau)  # the probe LocalSolver.a_vector uses for a solver with its own step


def official_counter_a_norm(local_steps: int, momentum: float, alpha: float) -> float:
    r"""The official FedNova code's running :math:`\|a_i\|_1` for momentum + prox.

    Per step it runs the momentum counter, then the prox counter
    (``local_counter = local_counter * rho + 1``; ``vec += local_counter``;
    ``vec *= 1 - eta*mu``; ``vec += 1``), i.e. :math:`c \leftarrow \rho c + 1`,
    :math:`S \leftarrow (S + c)(1-\alpha) + 1` from :math:`S = c = 0`. For either
    solver alone the counter is right; for both it is not the :math:`\|a_i\|_1` of any
    of the two dynamics (see :func:`official_inplace_a_vector`).

    ``local_steps`` is :math:`\tau`, a whole number :math:`\ge 1`; ``momentum`` is :math:`\rho` and ``alpha``
    :math:`\alpha = \eta\mu`.
    """
    tau = check_count("local_steps", local_steps, minimum=1)
    rho = check_in_range("momentum", momentum, 0.0, 1.0)
    alpha = check_in_range("alpha", alpha, 0.0, 1.0, high_inclusive=True)
    c = s = 0.0
    for _ in range(tau):
        if rho > 0:
            c = c * rho + 1.0
            s += c
        if alpha > 0:
            s = s * (1.0 - alpha) + 1.0
        if rho == 0 and alpha == 0:
            s += 1.0
    return s


def official_counter_excess(local_steps: int, momentum: float, alpha: float) -> float:
    r"""How far the official counter (:func:`official_counter_a_norm`) overshoots the true
    :math:`\|a_i\|_1` of momentum + prox (prox outside the buffer, :mod:`fedlib.solvers`) after
    :math:`\tau` steps: :math:`D_\tau = S_\tau - \|a_i\|_1`.

    With :math:`\beta = 1-\alpha` and :math:`m_t = (1-\rho^t)/(1-\rho)` the momentum counter after
    :math:`t` steps, the counter runs :math:`S_t = \beta S_{t-1} + \beta m_t + 1` while the true norm
    :math:`T_\tau = \sum_{j+k\le\tau-1}\beta^j\rho^k` runs :math:`T_t = \beta T_{t-1} + m_t`, so
    :math:`D_t = \beta D_{t-1} + 1 - \alpha m_t`, :math:`D_0 = 0`, and

    .. math::

        D_\tau = \frac{1}{1-\rho}\Bigl[(1-\alpha-\rho)\,\frac{1-\beta^\tau}{\alpha}
                  + \alpha\sum_{t=1}^{\tau}\beta^{\tau-t}\rho^t\Bigr]
        \xrightarrow[\tau\to\infty]{} \frac{1-\alpha-\rho}{\alpha(1-\rho)}

    (:func:`official_counter_excess_limit`). :math:`D_1 = 1-\alpha`. When :math:`\alpha+\rho = 1` (:math:`\beta = \rho`) the first term vanishes
    and :math:`D_\tau = \tau\rho^\tau`: the counter is right only in the limit. With
    :math:`\rho = 0` or :math:`\alpha = 0` the official code runs one counter only, which is right:
    :math:`D_\tau = 0`. The sum is evaluated term by term (no division by :math:`1-\alpha-\rho`), and
    :math:`(1-\beta^\tau)/\alpha` for :math:`\alpha < 0.01` from ``log1p`` / ``expm1`` (:math:`1-\alpha`
    rounds away the digits of a small :math:`\alpha`).

    ``local_steps`` is :math:`\tau`, a whole number :math:`\ge 1`; ``momentum`` is :math:`\rho` and ``alpha``
    :math:`\alpha = \eta\mu`.
    """
    tau = check_count("local_steps", local_steps, minimum=1)
    rho = check_in_range("momentum", momentum, 0.0, 1.0)
    alpha = check_in_range("alpha", alpha, 0.0, 1.0, high_inclusive=True)
    if rho == 0 or alpha == 0:
        return 0.0
    beta = 1.0 - alpha
    t = np.arange(1, tau + 1, dtype=np.float64)
    cross = float(np.sum(beta ** (tau - t) * rho ** t))
    # (1 - beta^tau)/alpha: 1 - alpha rounds alpha to the ulp of 1, a relative error of about 1e-16/alpha
    # (2e-5 at alpha = 1e-12, all of it below 1.1e-16, where beta is 1.0): below 0.01, from log1p / expm1
    geometric = (1.0 - beta ** tau) / alpha if alpha >= 0.01 else -float(np.expm1(tau * np.log1p(-alpha))) / alpha
    return ((1.0 - alpha - rho) * geometric + alpha * cross) / (1.0 - rho)


def official_counter_excess_limit(momentum: float, alpha: float) -> float:
    r""":math:`\lim_{\tau\to\infty}` of :func:`official_counter_excess`: the official counter's limit
    :math:`[(1-\alpha)/(1-\rho) + 1]/\alpha` minus the true :math:`1/(\alpha(1-\rho))`,

    .. math::

        \frac{1-\alpha-\rho}{\alpha(1-\rho)},

    a relative error of :math:`|1-\alpha-\rho|`: zero only when :math:`\alpha + \rho = 1`, negative (the
    counter undershoots) when :math:`\alpha+\rho > 1`. ``alpha`` must be :math:`> 0` (without prox the
    limit is infinite and the momentum counter alone is right); ``momentum = 0`` gives 0 (one counter).
    """
    rho = check_in_range("momentum", momentum, 0.0, 1.0)
    alpha = check_in_range("alpha", check_positive("alpha", alpha), 0.0, 1.0, high_inclusive=True)
    if rho == 0:
        return 0.0
    return (1.0 - alpha - rho) / (alpha * (1.0 - rho))


def official_inplace_a_vector(local_steps: int, lr: float, momentum: float, mu: float) -> np.ndarray:
    r""":math:`a_i` of the official code's momentum + prox *dynamics*, where the proximal
    term is added in place into the momentum buffer (github.com/JYWa/FedNova):

    .. math::

        u_{k+1} = \rho u_k + g_k + \mu (x_k - x^{(t,0)}), \qquad x_{k+1} = x_k - \eta u_{k+1}.

    Computed as the exact impulse response of this linear recursion (entry :math:`j`
    weighs :math:`g_j`). For comparison only: :mod:`fedlib.solvers` keeps the prox term
    outside the buffer. The coefficients do not change from step to step, so the response of
    :math:`x_\tau` to :math:`g_j` is that of :math:`x_{\tau-j}` to :math:`g_0`: one run of :math:`\tau` steps
    from an impulse at step 0 gives every entry (:math:`O(\tau)`, bit for bit the :math:`\tau` runs of
    :math:`\tau` steps it replaces: before step :math:`j` those stay at an exact 0).

    ``local_steps`` is :math:`\tau` (a whole number :math:`\ge 1`), ``lr`` :math:`\eta > 0`, ``momentum`` :math:`\rho`
    and ``mu`` :math:`\mu`.
    """
    tau = check_count("local_steps", local_steps, minimum=1)
    lr = check_positive("lr", lr)
    rho = check_in_range("momentum", momentum, 0.0, 1.0)
    mu = check_nonnegative("mu", mu)
    a = np.empty(tau)
    y = u = 0.0
    for k in range(tau):  # a_j = -x_{tau-j}/eta of the run whose only gradient is g_0 = 1
        u = rho * u + (1.0 if k == 0 else 0.0) + mu * y
        y = y - lr * u
        a[tau - 1 - k] = -y / lr
    return a


@dataclasses.dataclass(frozen=True)
class SoftmaxRegressionClient:
    r"""One client of multinomial logistic regression, :math:`F_i(W, b) =
    \frac{1}{n_i}\sum_s \ell(\operatorname{softmax}(x_s^\top W + b), y_s)` (cross-entropy).

    Parameters are one flat vector ``[vec(W) (d*C, row-major), b (C)]``.
    :meth:`grad` returns the mini-batch gradient of local step ``k``; the batch is a
    draw without replacement from stream ``generator(seed, "anatomy_batches", client, k)``, so
    the clients of one seed (``client`` = 0, 1, ...) draw independent mini-batches, and none of
    them shares a stream with the engines' ``(seed, "batches", round, client)``.

    ``x`` is the client's (n, d) features (:math:`n \ge 1`) and ``y`` its (n,) integer labels in ``[0, num_classes)``;
    ``num_classes`` is :math:`C \ge 2`; ``batch_size`` the mini-batch size (:math:`\ge 1`, default 20; a client with
    fewer samples uses them all); ``seed`` and ``client`` pick the stream.
    """

    x: np.ndarray
    y: np.ndarray
    num_classes: int
    batch_size: int = 20
    seed: int = 0
    client: int = 0

    def __post_init__(self):
        x = np.asarray(self.x, dtype=np.float64)
        y = np.asarray(self.y)
        if x.ndim != 2 or y.shape != (x.shape[0],):
            raise ValueError(f"x must be (n, d) and y (n,), got {x.shape} and {y.shape}")
        if x.shape[0] == 0:
            raise ValueError("x: the client needs at least one sample (F_i is a mean over its samples)")
        check_int("num_classes", self.num_classes, minimum=2)
        if y.size and (not np.issubdtype(y.dtype, np.integer) or y.min() < 0 or y.max() >= self.num_classes):
            raise ValueError(f"y must hold integer labels in [0, {self.num_classes}), got values from "
                             f"{plain(y.min())!r} to {plain(y.max())!r}")
        check_int("batch_size", self.batch_size, minimum=1)
        check_int("client", self.client, minimum=0)
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "y", y.astype(np.int64))

    @property
    def num_params(self) -> int:
        return (self.x.shape[1] + 1) * self.num_classes

    def init_params(self) -> np.ndarray:
        """Small random start from ``generator(seed, "init")`` (zero would make every
        first-step gradient column equal up to sign)."""
        return 0.01 * generator(self.seed, "init").standard_normal(self.num_params)

    def full_grad(self, params: np.ndarray, idx: Any = None) -> np.ndarray:
        """Gradient of the mean cross-entropy over the rows ``idx`` (all rows if None) at the flat
        ``params`` of length ``num_params``."""
        params = np.asarray(params, dtype=np.float64)
        if params.shape != (self.num_params,):
            raise ValueError(f"params must be a flat vector of {self.num_params} entries "
                             f"([vec(W), b]), got shape {params.shape}")
        x = self.x if idx is None else self.x[idx]
        y = self.y if idx is None else self.y[idx]
        if y.size == 0:
            raise ValueError(f"idx selects no sample (the mean cross-entropy over no rows is undefined), got {idx!r}")
        d, C = self.x.shape[1], self.num_classes
        W = params[: d * C].reshape(d, C)
        b = params[d * C:]
        z = x @ W + b
        z -= z.max(axis=1, keepdims=True)
        prob = np.exp(z)
        prob /= prob.sum(axis=1, keepdims=True)
        prob[np.arange(len(y)), y] -= 1.0
        prob /= len(y)
        return np.concatenate([(x.T @ prob).ravel(), prob.sum(axis=0)])

    def grad(self, params: np.ndarray, k: int) -> np.ndarray:
        """Mini-batch gradient of local step ``k``.

        ``params`` is the flat parameter vector."""
        n = self.x.shape[0]
        rng = generator(self.seed, "anatomy_batches", self.client, k)
        idx = rng.choice(n, size=min(self.batch_size, n), replace=False)
        return self.full_grad(params, idx)


def solver_family(lr: float, momentum: float, alpha: float, gamma: float, weight_decay: float = 0.0) -> dict:
    r"""The chapter's five local solvers, keyed by their labels: SGD, decayed SGD
    (:math:`\eta_k = \eta\gamma^k`), proximal SGD and momentum + prox with
    :math:`\mu = \alpha/\eta`, heavy-ball momentum :math:`\rho`.

    Every parameter is checked by its own name before :math:`\mu = \alpha/\eta` is formed:
    ``lr`` :math:`> 0`, ``momentum`` in :math:`[0, 1)`, ``alpha`` in :math:`(0, 1]`
    (:math:`\alpha = \eta\mu`; :math:`\alpha = 0` is no proximal term, and the chapter's
    :math:`\|a_i\|_1 \to 1/\alpha` needs :math:`\alpha > 0`; :math:`\alpha > 1` overshoots the
    anchor), ``gamma`` in :math:`(0, 1]`, ``weight_decay`` :math:`\ge 0`.

    >>> s = solver_family(0.05, 0.9, 0.05, 0.95)
    >>> round(s["proximal"].mu, 12), s["momentum"].momentum
    (1.0, 0.9)
    """
    lr = check_positive("lr", lr)
    momentum = check_in_range("momentum", momentum, 0.0, 1.0)
    alpha = check_positive("alpha", alpha)
    if alpha > 1.0:
        raise ValueError(f"alpha must lie in (0, 1] (alpha = lr * mu), got {alpha!r}")
    gamma = check_positive("gamma", gamma)
    if gamma > 1.0:
        raise ValueError(f"gamma must lie in (0, 1] (a per-step decay), got {gamma!r}")
    weight_decay = check_nonnegative("weight_decay", weight_decay)
    mu = alpha / lr
    return {
        "SGD": _solvers.sgd(lr, weight_decay),
        "decayed SGD": _solvers.decayed_sgd(lr, gamma=gamma, weight_decay=weight_decay),
        "proximal": _solvers.proximal_sgd(lr, mu, weight_decay),
        "momentum": _solvers.momentum_sgd(lr, momentum, weight_decay),
        "momentum + prox": _solvers.momentum_proximal_sgd(lr, momentum, mu, weight_decay),
    }


def traced_clients(data: Any, num_clients: int, batch_size: int, seed: int) -> list:
    r""":class:`SoftmaxRegressionClient` for the first ``num_clients`` clients of a federated
    data set (``train_x``, ``train_y``, ``num_classes``, as :func:`fedlib.data.synthetic`
    returns), client ``i`` drawing its mini-batches from its own stream. ``num_clients``
    must lie in ``1 .. len(data.train_x)`` (a ``ValueError`` names it ``num_traced_clients``, chapter 1's
    parameter that it comes from).

    ``batch_size`` and ``seed`` go to every :class:`SoftmaxRegressionClient` (client ``i`` gets ``client=i``)."""
    missing = [attr for attr in ("train_x", "train_y", "num_classes") if not hasattr(data, attr)]
    if missing:  # else "'NoneType' object has no attribute 'train_x'"
        raise ValueError(f"data must be a federated data set with train_x, train_y and num_classes (e.g. "
                         f"fedlib.data.synthetic(...)), got {type(data).__name__} without {', '.join(missing)}")
    available = len(data.train_x)
    n = check_int("num_traced_clients", num_clients, minimum=1)
    if n > available:
        raise ValueError(f"num_traced_clients must be at most the {available} clients of the data set, got {n!r}")
    return [SoftmaxRegressionClient(data.train_x[i], data.train_y[i], data.num_classes, batch_size, seed, client=i)
            for i in range(n)]


def momentum_prox_a_table(local_steps: int, momentum: float, alpha: float) -> np.ndarray:
    r"""The chapter's table entry for momentum + prox, :math:`a_{i,j} = \frac{(1-\alpha)^{n+1} -
    \rho^{n+1}}{1-\alpha-\rho}` with :math:`n = \tau-1-j`, evaluated as the sum it equals,
    :math:`\sum_{k=0}^{n}(1-\alpha)^k\rho^{n-k}`: the quotient is 0/0 at :math:`1-\alpha = \rho`
    (``alpha=0.1, momentum=0.9`` in float64 too) and loses digits near it, the sum does neither.

    ``local_steps`` is :math:`\tau`, a whole number :math:`\ge 1`; ``momentum`` is :math:`\rho` and ``alpha``
    :math:`\alpha = \eta\mu`.

    >>> momentum_prox_a_table(3, 0.5, 0.5).tolist()   # n = 2, 1, 0: 3/4, 1, 1
    [0.75, 1.0, 1.0]
    """
    tau = check_count("local_steps", local_steps, minimum=1)
    rho = check_in_range("momentum", momentum, 0.0, 1.0)
    alpha = check_in_range("alpha", alpha, 0.0, 1.0, high_inclusive=True)
    q = 1.0 - alpha
    out = np.empty(tau)
    for j in range(tau):
        n = tau - 1 - j
        k = np.arange(n + 1)
        out[j] = float(np.sum(q ** k * rho ** (n - k)))
    return out

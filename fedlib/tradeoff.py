r"""FedProx's :math:`\alpha = \eta\mu` trade-off (paper §4.2, Figure 4, Corollary 2).

Used by chapter 3 ("FedProx's :math:`\alpha` trade-off"). FedProx's local solver has
:math:`a_i = [(1-\alpha)^{\tau_i-1}, \dots, 1]`, so (eq. 7)

.. math::

    \tau_{\text{eff}}(\alpha) = \sum_i p_i \frac{1-(1-\alpha)^{\tau_i}}{\alpha}, \qquad
    w_i(\alpha) = \frac{p_i[1-(1-\alpha)^{\tau_i}]}{\sum_j p_j[1-(1-\alpha)^{\tau_j}]}.

Larger :math:`\alpha` brings :math:`w` closer to :math:`p` (smaller
:math:`\chi^2_{p\|w}`, the inconsistency of Theorem 2) but shrinks
:math:`\tau_{\text{eff}}` (larger slowdown :math:`\bar\tau/\tau_{\text{eff}}`, the
first term of Theorem 1).

* :func:`fedprox_curves` — the closed forms on a grid of :math:`\alpha`;
* :func:`measured_fedprox_weights` — the same from real proximal-SGD runs (online
  :math:`\|a_i\|_1` fed to :func:`fedlib.rule.fedavg_weights`);
* :func:`probed_fedprox_weights` — the same from the changes :math:`\Delta_i` of the solver's own steps
  (:math:`a_i` read off a probe, :func:`fedlib.anatomy.probe_a_vector`), not from its counter;
* :func:`fedprox_sweep` — distance to :math:`x^*` after :math:`T` rounds on a quadratic,
  FedProx for every :math:`\alpha` and FedNova with the same proximal solver and
  :math:`\tau_{\text{eff}} = \sum_i p_i\tau_i`, with :func:`fedlib.engines.reference.run_sequential`;
* :func:`closed_form_distances` — the same distances from the affine round map
  (:func:`fedlib.theory.quadratic_round_map`), cheap for many :math:`T`;
* :func:`fedprox_bound` and :func:`fedprox_bound_best_alpha` — Theorem 1's bound (eq. 8) for
  FedProx as a function of :math:`\alpha`, and its minimiser found numerically: what Corollary 2's
  closed form (:func:`fedlib.theory.corollary2_best_alpha`) is checked against.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional, Sequence

import numpy as np

from ._validate import (bool_entry, check_count, check_finite_array, check_in_range, check_instance, check_int,
                        check_local_steps, check_positive, check_sequence, is_bool)
from .algorithms import make_algorithm
from .anatomy import probe_a_vector
from .engines.reference import run_sequential
from .problems.quadratic import QuadraticProblem
from .rule import fedavg_weights
from .schedules import FixedSteps
from .solvers import proximal_sgd, sgd
from .theory import (Theorem1Terms, _radius_or_inf, chi_square, fedprox_weights, quadratic_round_map, slowdown,
                     theorem1_bound, theorem1_constants)
from .tree import _scaled_norm

__all__ = ["FedProxCurves", "fedprox_curves", "measured_fedprox_weights", "probed_fedprox_weights", "mu_for_alpha",
           "Sweep",
           "fedprox_sweep", "closed_form_distances", "round_contraction", "fedprox_bound", "fedprox_bound_best_alpha"]


class FedProxCurves(NamedTuple):
    r"""Closed forms on a grid: ``alphas``, :math:`\tau_{\text{eff}}`, :math:`\chi^2_{p\|w}`,
    slowdown :math:`\bar\tau/\tau_{\text{eff}}` (arrays of the grid's length).

    Fields: ``alphas``, ``tau_eff`` (:math:`\tau_{\text{eff}}`), ``chi2`` (:math:`\chi^2_{p\|w}`) and ``slowdown``."""

    alphas: np.ndarray
    tau_eff: np.ndarray
    chi2: np.ndarray
    slowdown: np.ndarray


def _check_alphas(alphas: Any) -> np.ndarray:
    r"""A grid of :math:`\alpha = \eta\mu` in [0, 1]: numbers only (``np.asarray(..., dtype=float64)`` took ``["0.5"]``
    as 0.5 and ``[True]`` as 1)."""
    if is_bool(alphas) or bool_entry(alphas) is not None:
        raise ValueError(f"alphas must be numbers in [0, 1], got a bool in {alphas!r}")
    a = check_finite_array("alphas", alphas)
    if a.ndim != 1 or a.size == 0 or np.any(a < 0) or np.any(a > 1):
        raise ValueError(f"alphas must be a non-empty 1-d array of values in [0, 1], got {alphas!r}")
    return a


def fedprox_curves(p: Any, local_steps: Any, alphas: Any) -> FedProxCurves:
    r""":math:`\tau_{\text{eff}}`, :math:`\chi^2_{p\|w}` and the slowdown of FedProx for every
    :math:`\alpha` in ``alphas`` (:func:`fedlib.theory.fedprox_weights`; :math:`\alpha = 0` is FedAvg).

    ``p`` is the (m,) client weights (summing to 1), ``local_steps`` the (m,) :math:`\tau_i` (whole numbers
    :math:`\ge 1`) and ``alphas`` the grid of :math:`\alpha \in [0, 1]`."""
    a = _check_alphas(alphas)
    steps = check_local_steps("local_steps", local_steps)
    tau_eff = np.empty(a.size)
    chi2 = np.empty(a.size)
    for k, alpha in enumerate(a):
        tau_eff[k], w = fedprox_weights(p, steps, float(alpha))
        chi2[k] = chi_square(p, w)
    return FedProxCurves(a, tau_eff, chi2, np.array([slowdown(steps, t) for t in tau_eff]))


def mu_for_alpha(alpha: float, lr: float) -> float:
    r""":math:`\mu = \alpha/\eta` for :math:`\alpha \in [0, 1]`, nudged down by one ulp if rounding makes
    :math:`\eta\mu > 1`. Raises if :math:`\alpha/\eta` overflows (a subnormal step size).

    ``lr`` is :math:`\eta`, finite and > 0; ``alpha`` outside :math:`[0, 1]` is a ``ValueError``."""
    lr = check_positive("lr", lr)
    mu = check_in_range("alpha", alpha, 0.0, 1.0, high_inclusive=True) / lr
    if not np.isfinite(mu):
        raise ValueError(f"lr: alpha/lr = {alpha!r}/{lr!r} overflows; lr must be larger")
    while lr * mu > 1.0:
        mu = float(np.nextafter(mu, 0.0))
    return mu


def measured_fedprox_weights(problem: QuadraticProblem, local_steps: Any, lr: float, alpha: float,
                             params: Optional[np.ndarray] = None) -> tuple[float, np.ndarray, np.ndarray]:
    r"""Run proximal SGD (:math:`\mu = \alpha/\eta`) for :math:`\tau_i` steps on every client
    of ``problem`` from ``params`` (default 0), read each solver's online
    :math:`\|a_i\|_1`, and return ``(tau_eff, w, a_norms)`` of FedAvg's rule (eq. 6).

    ``problem`` is a :class:`~fedlib.problems.quadratic.QuadraticProblem`, ``local_steps`` its clients' :math:`\tau_i`
    (whole numbers :math:`\ge 1`, one per client), ``lr`` :math:`\eta > 0` and ``alpha`` :math:`\alpha \in [0, 1]`."""
    check_instance("problem", problem, QuadraticProblem)
    steps = check_local_steps("local_steps", local_steps, size=problem.num_clients)
    solver = proximal_sgd(lr, mu_for_alpha(alpha, lr))
    x0 = np.zeros(problem.dim) if params is None else np.asarray(params, dtype=np.float64)
    a_norms = np.array([solver.run(x0, lambda x, k, i=i: problem.grad(x, i), int(steps[i])).a_norm
                        for i in range(problem.num_clients)])
    tau_eff, w = fedavg_weights(problem.p, a_norms)
    return tau_eff, w, a_norms


def probed_fedprox_weights(p: Any, local_steps: Any, lr: float, alpha: float) -> tuple[float, np.ndarray, np.ndarray]:
    r"""``(tau_eff, w, a_norms)`` of FedAvg's rule (eq. 6) with each :math:`\|a_i\|_1` measured from the parameter
    change of proximal SGD's own steps (:math:`\mu = \alpha/\eta`): :func:`fedlib.anatomy.probe_a_vector` runs
    the solver's ``update`` for :math:`\tau_i` steps on a :math:`\tau_i`-vector whose gradient at step :math:`k` is
    :math:`e_k`, so :math:`\Delta_i = -\eta G_i a_i` with :math:`G_i = I` gives :math:`a_i = -\Delta_i/\eta`. Unlike
    :func:`measured_fedprox_weights` (the solver's running counter :math:`A \leftarrow (1-\alpha)A + 1`), this reads
    the steps themselves; both should equal eq. 7 (chapter 3 asserts it).

    ``p`` is the (m,) client weights, ``local_steps`` the (m,) :math:`\tau_i` (whole numbers :math:`\ge 1`),
    ``lr`` :math:`\eta > 0` and ``alpha`` :math:`\alpha \in [0, 1]`."""
    steps = check_local_steps("local_steps", local_steps)
    solver = proximal_sgd(lr, mu_for_alpha(alpha, lr))
    a_norms = np.array([probe_a_vector(solver, int(t)).sum() for t in steps])
    tau_eff, w = fedavg_weights(p, a_norms)
    return tau_eff, w, a_norms


class Sweep(NamedTuple):
    r"""Distances :math:`\|x^{(T,0)} - x^*\|` after ``rounds`` rounds: FedAvg (plain SGD,
    :math:`\alpha = 0`), FedProx and FedNova-prox for every :math:`\alpha` of ``alphas``.

    Fields: ``alphas``, ``rounds``; ``fedavg``, FedAvg's distance (one number); ``fedprox`` and ``fednova``, the
    distances of FedProx and FedNova-prox, one per :math:`\alpha`."""

    alphas: np.ndarray
    rounds: int
    fedavg: float
    fedprox: np.ndarray
    fednova: np.ndarray


def _distance(algorithm, problem: QuadraticProblem, schedule, rounds: int, x0: np.ndarray, x_star: np.ndarray) -> float:
    run = run_sequential(algorithm, x0, problem.grad_fn(), problem.p, schedule, rounds)
    return float(_scaled_norm(run.state.params - x_star))  # np.linalg.norm's: inf past ~1.3e154


def fedprox_sweep(problem: QuadraticProblem, local_steps: Sequence[int], lr: float, alphas: Any, rounds: int,
                  params: Optional[np.ndarray] = None) -> Sweep:
    r"""Run :math:`T` = ``rounds`` rounds (full participation, full-batch gradients,
    fixed :math:`\tau_i`) of FedAvg, of FedProx with :math:`\mu = \alpha/\eta` and of
    FedNova with the same proximal solver and :math:`\tau_{\text{eff}} = \sum_i p_i\tau_i`,
    from ``params`` (default 0); return the distances to :math:`x^*`.

    ``problem`` is a :class:`~fedlib.problems.quadratic.QuadraticProblem`, ``local_steps`` its clients' :math:`\tau_i`,
    ``lr`` :math:`\eta > 0` and ``alphas`` the :math:`\alpha \in (0, 1]` (0 is refused: FedAvg is reported separately).
    """
    check_instance("problem", problem, QuadraticProblem)
    a = _check_alphas(alphas)
    if np.any(a <= 0):
        raise ValueError("alphas must be > 0 (alpha = 0 is FedAvg, reported separately)")
    rounds = check_int("rounds", rounds, minimum=1)
    # by name: FixedSteps calls them 'steps'
    schedule = FixedSteps(check_local_steps("local_steps", local_steps, size=problem.num_clients))
    x0 = np.zeros(problem.dim) if params is None else np.asarray(params, dtype=np.float64)
    x_star = problem.optimum()
    fedavg = _distance(make_algorithm("fedavg", sgd(lr)), problem, schedule, rounds, x0, x_star)
    prox = np.empty(a.size)
    nova = np.empty(a.size)
    for k, alpha in enumerate(a):
        solver = proximal_sgd(lr, mu_for_alpha(alpha, lr))
        prox[k] = _distance(make_algorithm("fedprox", solver), problem, schedule, rounds, x0, x_star)
        nova[k] = _distance(make_algorithm("fednova", solver, tau_eff="local_steps"), problem, schedule, rounds,
                            x0, x_star)
    return Sweep(a, rounds, fedavg, prox, nova)


def closed_form_distances(problem: QuadraticProblem, local_steps: Sequence[int], lr: float, alphas: Any,
                          rounds: Sequence[int], algorithm: str = "fedprox", tau_eff: Any = None,
                          params: Optional[np.ndarray] = None) -> np.ndarray:
    r"""Distances :math:`\|x^{(T,0)} - x^*\|` for every :math:`T` in ``rounds`` (rows) and
    :math:`\alpha` in ``alphas`` (columns), by iterating the exact affine round map
    :math:`x \mapsto Mx + b` of :func:`fedlib.theory.quadratic_round_map` (full-batch GD).

    ``problem`` is a :class:`~fedlib.problems.quadratic.QuadraticProblem`, ``local_steps`` its clients' :math:`\tau_i`,
    ``lr`` :math:`\eta > 0`, ``rounds`` integers :math:`\ge 0`; ``algorithm`` (default ``"fedprox"``, which is
    FedAvg at :math:`\alpha = 0`) and ``tau_eff`` go to :func:`fedlib.theory.quadratic_round_map`; ``params`` is the
    start :math:`x^{(0,0)}` (default 0)."""
    check_instance("problem", problem, QuadraticProblem)
    a = _check_alphas(alphas)
    T = [check_int("rounds", t, minimum=0) for t in check_sequence("rounds", rounds, "round counts")]
    order = np.argsort(T, kind="stable")
    x0 = np.zeros(problem.dim) if params is None else np.asarray(params, dtype=np.float64)
    x_star = problem.optimum()
    out = np.empty((len(T), a.size))
    for k, alpha in enumerate(a):
        mu = mu_for_alpha(alpha, lr)
        alg = "fedavg" if (alpha == 0 and algorithm == "fedprox") else algorithm
        M, b = quadratic_round_map(problem.H, problem.e, problem.p, local_steps, lr, alg, mu, tau_eff)
        x, t = x0.copy(), 0
        for r in order:
            target = T[r]
            for _ in range(target - t):
                x = M @ x + b
            t = target
            out[r, k] = _scaled_norm(x - x_star)
    return out


def round_contraction(problem: QuadraticProblem, local_steps: Sequence[int], lr: float, alpha: float,
                      algorithm: str = "fedprox", tau_eff: Any = None) -> float:
    r"""Spectral radius of the round map :math:`x \mapsto Mx + b` of FedProx (or FedAvg at
    :math:`\alpha = 0`, or ``algorithm``): the error to the fixed point shrinks by about
    this factor per round; ``inf`` when the map itself overflows float64 (an ``lr`` far too large).

    ``problem`` is a :class:`~fedlib.problems.quadratic.QuadraticProblem`, ``local_steps`` its clients' :math:`\tau_i`;
    ``algorithm`` and ``tau_eff`` go to :func:`fedlib.theory.quadratic_round_map` as in :func:`closed_form_distances`.
    """
    check_instance("problem", problem, QuadraticProblem)
    alg = "fedavg" if (alpha == 0 and algorithm == "fedprox") else algorithm
    M, _ = quadratic_round_map(problem.H, problem.e, problem.p, local_steps, lr, alg, mu_for_alpha(alpha, lr), tau_eff)
    return _radius_or_inf(M)


def fedprox_bound(alpha: float, m: int, tau_bar: int, rounds: int, sigma2: float = 1.0,
                  kappa2: float = 1.0) -> Theorem1Terms:
    r"""Theorem 1's bound (eq. 8, :func:`fedlib.theory.theorem1_bound`: unit constants,
    :math:`\eta = \sqrt{m/(\bar\tau T)}`) for FedProx with :math:`p_i = 1/m` and
    :math:`\tau_i = \bar\tau` (Corollary 2's setting): :math:`A, B, C` from the proximal
    :math:`a = [(1-\alpha)^{\bar\tau-1}, \dots, 1]` (:func:`fedlib.theory.theorem1_constants`),
    :math:`\tau_{\text{eff}} = \|a\|_1`.

    ``alpha`` lies in :math:`(0, 1]`; ``m`` is an integer and ``tau_bar`` (:math:`\bar\tau`) a whole
    number, both :math:`\ge 1`;
    ``rounds`` is :math:`T`; ``sigma2`` and ``kappa2`` (:math:`\sigma^2, \kappa^2`, defaults 1) go to
    :func:`fedlib.theory.theorem1_bound`."""
    alpha = check_in_range("alpha", alpha, 0.0, 1.0, high_inclusive=True)
    if alpha == 0.0:
        raise ValueError(f"alpha must lie in (0, 1], got {alpha!r}")
    m = check_int("m", m, minimum=1)
    tau = check_count("tau_bar", tau_bar, minimum=1)
    a = (1.0 - float(alpha)) ** np.arange(tau - 1, -1, -1, dtype=np.float64)
    tau_eff = float(a.sum())
    A, B, C = theorem1_constants(np.full(m, 1.0 / m), [a] * m, tau_eff)
    return theorem1_bound(m, float(tau), rounds, tau_eff, A, B, C, sigma2, kappa2)


def fedprox_bound_best_alpha(m: int, tau_bar: int, rounds: int, sigma2: float = 1.0, kappa2: float = 1.0) -> float:
    r"""The :math:`\alpha \in [10^{-9}, 1]` that minimises :func:`fedprox_bound`'s total, found
    numerically (bounded scalar minimisation over :math:`\log\alpha`). For
    :math:`\alpha\bar\tau \gg 1` it is Corollary 2's
    :math:`(2\kappa^2)^{1/3} m^{1/2}\bar\tau^{-1/2}T^{-1/6}` (see
    :func:`fedlib.theory.corollary2_best_alpha`; chapter 3 compares the two).

    ``m``, ``tau_bar``, ``rounds``, ``sigma2`` and ``kappa2`` are :func:`fedprox_bound`'s."""
    from scipy.optimize import minimize_scalar

    def total(log_alpha):
        return fedprox_bound(float(np.exp(log_alpha)), m, tau_bar, rounds, sigma2, kappa2).total

    res = minimize_scalar(total, bounds=(np.log(1e-9), 0.0), method="bounded", options={"xatol": 1e-10})
    return float(np.exp(res.x))


r"""Theorems 1 and 3 with their constants, measured on noisy quadratic clients (chapters 7, 8).

Theorem 1 (App. C, the version that keeps the step size :math:`\eta`): every algorithm of
the general update rule (eq. 4) with weights :math:`w` satisfies

.. math::

    \frac1T\sum_{t<T}\mathbb E\,\|\nabla\widetilde F(x^{(t,0)})\|^2 \le
    \frac{4[\widetilde F(x^{(0,0)}) - \widetilde F_{\inf}]}{\eta\,\tau_{\text{eff}}T}
    + \frac{4\eta L\sigma^2 A}{m} + 6\eta^2L^2\sigma^2 B + 12\eta^2L^2\kappa^2 C,
    \qquad \widetilde F = \sum_i w_i F_i

(:func:`fedlib.theory.theorem1_explicit_bound`). On quadratic clients
:math:`F_i = \frac12 x^\top H_i x - e_i^\top x` with gradient noise
:math:`\sigma_0\xi`, :math:`\xi \sim N(0, I_d)`, every constant is known exactly:
:math:`L = \max_i\lambda_{\max}(H_i)`, :math:`\sigma^2 = \sigma_0^2 d`, and for each
:math:`\beta^2` the smallest :math:`\kappa^2` (:func:`fedlib.theory.quadratic_kappa2`).
:func:`bound_check` runs the library's replica engine
(:func:`fedlib.engines.quadratic.run_replicas`, which records
:math:`\|\nabla\widetilde F\|^2` for the weights it is given), averages over replicas
and rounds, and puts the measured left-hand side next to the bound. It records how far the run is from the
algorithm the bound is for: the same engine call without noise, over :math:`\min(T, 10)` rounds, against the
closed-form round map of the algorithm and local solver, momentum included
(:func:`fedlib.theory.quadratic_round_map`; ``closed_form_gap`` of
:class:`fedlib.experiments.bounds.Theorem1Row`, rounding error; chapter 7 asserts it). It also evaluates
the bound as if the algorithm minimised :math:`F = \sum_i p_i F_i` (the same formula
with :math:`p` for :math:`w`): FedAvg's :math:`\|\nabla F\|^2` must break that one once
:math:`T` is large (Theorem 2's floor), FedNova's :math:`\widetilde F` is :math:`F`.

Theorem 3 (FedNova, :math:`\tau_i^{(t)}` and :math:`a_i^{(t)}` changing every round) says the
bound is the same with :math:`\bar\tau, A, B, C` "replaced by their average values over all
rounds". The per-round inequality behind Theorem 1 is
:math:`\tau_{\text{eff}}^{(t)}\,\mathbb E\|\nabla F(x^{(t,0)})\|^2 \le
4\,\mathbb E[F(x^{(t,0)}) - F(x^{(t+1,0)})]/\eta + \tau_{\text{eff}}^{(t)} R_t`
(:math:`R_t` the last three terms with round :math:`t`'s :math:`A, B, C`); summed over the
rounds it gives the bound on the :math:`\tau_{\text{eff}}^{(t)}`-weighted average of
:math:`\mathbb E\|\nabla F\|^2`, with :math:`\tau_{\text{eff}}T` replaced by
:math:`\sum_t\tau_{\text{eff}}^{(t)}` and the other terms averaged with the same weights, for a
step size that meets the conditions in every round (:func:`theorem3_check`). The minimum over
the rounds is below that average.

Example
-------
>>> problem, steps = default_setup(seed=0)
>>> row = bound_check(problem, steps, "fednova", "sgd", 100, replicas=4)
>>> bool(row.measured <= row.bound.total)
True
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple, Optional, Sequence

import numpy as np

from .._validate import (check_choice, check_finite_array, check_instance, check_int, check_local_steps,
                         check_nonnegative, check_positive, check_probability_vector, plain)
from ..engines.quadratic import run_replicas
from ..problems.quadratic import QuadraticProblem, random_quadratic
from ..rule import AGGREGATIONS, effective_weights
from ..schedules import RandomLocalWork, _check_local_work
from ..solvers import LocalSolver, check_shared_lr, make_solver
from ..theory import (Theorem1Terms, chi_square, quadratic_global_optimum, quadratic_kappa2, quadratic_min_beta2,
                      quadratic_round_map, quadratic_smoothness, theorem1_constants, theorem1_explicit_bound,
                      theorem1_max_beta2, theorem2_bound)

__all__ = ["DEFAULT_STEPS", "default_setup", "objective_gap", "Theorem1Row", "bound_check", "Theorem3Row",
           "theorem3_check"]

DEFAULT_STEPS = (1, 2, 3, 4, 6, 8, 12, 16)
"""The fixed :math:`\\tau_i` of :func:`default_setup`'s eight clients."""

SOLVERS = ("sgd", "momentum")


def default_setup(seed: int = 0, dim: int = 10) -> tuple[QuadraticProblem, np.ndarray]:
    r"""Eight random quadratic clients (:func:`fedlib.problems.quadratic.random_quadratic`,
    eigenvalues in [0.5, 2], local optima :math:`\sim N(0, I)`, :math:`p_i = 1/8`) and their
    fixed local steps :data:`DEFAULT_STEPS`.

    ``seed`` draws the quadratics (:func:`fedlib.problems.quadratic.random_quadratic`'s ``seed``, default 0) and
    ``dim`` is their dimension :math:`d` (default 10)."""
    problem = random_quadratic(len(DEFAULT_STEPS), dim, seed=seed, spread=1.0)
    return problem, np.array(DEFAULT_STEPS, dtype=np.int64)


def objective_gap(problem: QuadraticProblem, weights: Any, x0: Any = None) -> float:
    r""":math:`\widetilde F(x_0) - \min\widetilde F` for :math:`\widetilde F = \sum_i w_i F_i`
    (:math:`x_0 = 0` by default): :math:`\frac12 (x_0 - \tilde x)^\top\widetilde H(x_0 - \tilde x)`.

    ``problem`` is a :class:`~fedlib.problems.quadratic.QuadraticProblem`, ``weights`` the (m,) :math:`w_i` (summing to
    1) and ``x0`` a (d,) point (finite)."""
    check_instance("problem", problem, QuadraticProblem)
    w = check_probability_vector("weights", weights, size=problem.num_clients)
    x0 = np.zeros(problem.dim) if x0 is None else check_finite_array("x0", x0, shape=(problem.dim,))
    diff = x0 - quadratic_global_optimum(problem.H, problem.e, w)
    return float(0.5 * diff @ np.tensordot(w, problem.H, 1) @ diff)


class Theorem1Row(NamedTuple):
    """One run of :func:`bound_check`.

    ``measured`` is :math:`\\frac1T\\sum_{t<T}` of the replica mean of
    :math:`\\|\\nabla\\widetilde F(x^{(t,0)})\\|^2` (the left-hand side), ``measured_min`` its
    smallest round; ``bound`` the right-hand side (:class:`fedlib.theory.Theorem1Terms`) at
    ``beta2`` (the largest the step size admits) and ``kappa2``; ``true_measured`` and
    ``true_bound`` the same for :math:`F = \\sum_i p_i F_i` (``true_bound`` is ``None`` when
    the step size admits no :math:`\\beta^2` for :math:`p`); ``tau_eff`` and ``w`` the
    algorithm's; ``chi2`` is :math:`\\chi^2_{p\\|w}` and ``theorem2_bound`` Theorem 2's bound on
    ``true_measured`` (:func:`fedlib.theory.theorem2_bound` with ``bound.total`` for the
    surrogate, at the :math:`\\beta^2` of a grid that makes it smallest). ``closed_form_gap`` is the relative
    distance after :math:`\\min(T, 10)` rounds of the same engine run without noise to the closed-form round map
    (:func:`fedlib.theory.quadratic_round_map`) of the algorithm and local solver the bound is for (~1e-15: the
    run is that algorithm, momentum included).

    ``algorithm`` and ``solver`` name the run's algorithm and local solver; ``rounds`` is :math:`T`, ``lr``
    :math:`\\eta` and ``replicas`` the number of noisy replicas averaged.
    """

    algorithm: str
    solver: str
    rounds: int
    lr: float
    replicas: int
    tau_eff: float
    w: np.ndarray
    beta2: float
    kappa2: float
    bound: Theorem1Terms
    measured: float
    measured_min: float
    true_measured: float
    true_bound: Optional[Theorem1Terms]
    chi2: float
    theorem2_bound: float
    closed_form_gap: float = math.nan

    @property
    def ratio(self) -> float:
        """The bound divided by the measured value (how loose Theorem 1 is; at least 1 when it holds)."""
        return self.bound.total / self.measured


def _assumption3_pair(problem, weights, lr, L, C, theorem: str) -> tuple[float, float]:
    """The largest beta^2 the step-size condition admits, and Assumption 3's kappa^2 for it."""
    beta2 = theorem1_max_beta2(lr, L, C)
    smallest = quadratic_min_beta2(problem.H, weights)
    if not beta2 > smallest:
        raise ValueError(f"lr = {lr:.4g} is too large for {theorem} with these weights: the step-size condition "
                         f"allows beta^2 <= {beta2:.4g} but Assumption 3 needs beta^2 > {smallest:.4g}")
    beta2 = min(beta2, 1e12)
    return beta2, quadratic_kappa2(problem.H, problem.e, weights, beta2)


def _bound_for(problem, weights, lr, rounds, L, sigma2, a_vectors, tau_eff, C) -> tuple[float, float, Theorem1Terms]:
    beta2, kappa2 = _assumption3_pair(problem, weights, lr, L, C, "Theorem 1")
    terms = theorem1_explicit_bound(lr, rounds, L=L, sigma2=sigma2, beta2=beta2, kappa2=kappa2,
                                    initial_gap=objective_gap(problem, weights), w=weights, a_vectors=a_vectors,
                                    tau_eff=tau_eff)
    return beta2, kappa2, terms


def _momentum_of(solver: str, momentum: Optional[float]) -> Optional[float]:
    """``momentum`` for :func:`make_solver`: 0.5 for ``"momentum"`` when not given; refused with ``"sgd"``."""
    if solver == "sgd" and momentum is not None:
        raise ValueError(f"momentum: solver 'sgd' has no momentum buffer, got momentum = {plain(momentum)!r} (use "
                         "solver='momentum')")
    return 0.5 if momentum is None and solver == "momentum" else momentum


def bound_check(problem: QuadraticProblem, local_steps: Sequence[int], algorithm: str, solver: str, rounds: int, *,
                lr_scale: float = 0.05, momentum: Optional[float] = None, sigma: float = 0.5, replicas: int = 32,
                seed: int = 0) -> Theorem1Row:
    r"""Measure both sides of Theorem 1 for one algorithm, local solver and :math:`T`.

    Parameters
    ----------
    problem, local_steps : quadratic clients and their fixed :math:`\tau_i`.
    algorithm : ``"fedavg"`` (:math:`w_i \propto p_i\|a_i\|_1`) or ``"fednova"`` (:math:`w = p`).
    solver : ``"sgd"`` or ``"momentum"`` (heavy ball with ``momentum``), for every client.
    rounds : :math:`T`.
    lr_scale : :math:`c` in :math:`\eta = c\sqrt{m/(\bar\tau T)}` (Theorem 1's step size up
        to the constant); a :class:`ValueError` if :math:`\eta` breaks the theorem's conditions.
    momentum : :math:`\rho` of ``"momentum"`` (default 0.5); given with ``"sgd"`` it is refused
        (``ValueError`` naming it), never dropped.
    sigma : :math:`\sigma_0`, so :math:`\sigma^2 = \sigma_0^2 d`.
    replicas, seed : independent runs averaged for the expectation; the noise seed.
    """
    check_instance("problem", problem, QuadraticProblem)
    algorithm = check_choice("algorithm", algorithm, AGGREGATIONS)
    solver = check_choice("solver", solver, SOLVERS)
    steps = check_local_steps("local_steps", local_steps, size=problem.num_clients)
    rounds = check_int("rounds", rounds, minimum=1)
    lr_scale = check_positive("lr_scale", lr_scale)
    sigma = check_nonnegative("sigma", sigma)
    m, d = problem.num_clients, problem.dim
    lr = lr_scale * math.sqrt(m / (float(steps.mean()) * rounds))
    rho = _momentum_of(solver, momentum)
    local = make_solver(solver, lr, momentum=rho)
    a_vectors = [local.a_vector(int(t)) for t in steps]
    a_norms = np.array([a.sum() for a in a_vectors])
    tau_eff, w = effective_weights(algorithm, problem.p, a_norms)
    L = quadratic_smoothness(problem.H)
    sigma2 = sigma ** 2 * d
    C = theorem1_constants(w, a_vectors, tau_eff)[2]
    beta2, kappa2, bound = _bound_for(problem, w, lr, rounds, L, sigma2, a_vectors, tau_eff, C)
    try:
        true_bound = _bound_for(problem, problem.p, lr, rounds, L, sigma2, a_vectors, tau_eff, C)[2]
    except ValueError:
        true_bound = None

    def replica_run(rounds_, sigma_, replicas_):  # the engine's one call, noisy below and noiseless for the gap
        return run_replicas(problem, algorithm, [local], RandomLocalWork(steps, steps, 1, seed), rounds_, sigma=sigma_,
                            replicas=replicas_, seed=seed, surrogate_weights=w)

    run = replica_run(rounds, sigma, check_int("replicas", replicas, minimum=1))
    gap_rounds = min(rounds, 10)
    M, b = quadratic_round_map(problem.H, problem.e, problem.p, steps, lr, algorithm, momentum=rho or 0.0)
    x = np.zeros(d)
    for _ in range(gap_rounds):
        x = M @ x + b
    closed_form_gap = float(np.linalg.norm(replica_run(gap_rounds, 0.0, 1).params[0] - x) / np.linalg.norm(x))
    per_round = run.surrogate_grad_norm2[:rounds].mean(axis=1)
    true_per_round = run.grad_norm2[:rounds].mean(axis=1)
    chi2 = chi_square(problem.p, w)
    grid = quadratic_min_beta2(problem.H, w) * np.geomspace(1.001, 1000.0, 40)
    theorem2 = min(theorem2_bound(chi2, b, quadratic_kappa2(problem.H, problem.e, w, b), bound.total) for b in grid)
    return Theorem1Row(algorithm, solver, rounds, lr, replicas, float(tau_eff), w, beta2, kappa2, bound,
                       float(per_round.mean()), float(per_round.min()), float(true_per_round.mean()), true_bound,
                       chi2, theorem2, closed_form_gap)


class Theorem3Row(NamedTuple):
    """One run of :func:`theorem3_check` (FedNova, local work redrawn every round).

    ``measured`` is the :math:`\\tau_{\\text{eff}}^{(t)}`-weighted average over the rounds of the
    replica mean of :math:`\\|\\nabla F(x^{(t,0)})\\|^2`, ``measured_min`` its smallest round;
    ``bound`` the right-hand side with the same weights (:class:`fedlib.theory.Theorem1Terms`);
    ``tau_eff`` the per-round :math:`\\tau_{\\text{eff}}^{(t)}`.

    ``rounds`` is :math:`T`, ``lr`` :math:`\\eta`, ``replicas`` the number of noisy replicas averaged; ``beta2`` and
    ``kappa2`` are Assumption 3's :math:`\\beta^2, \\kappa^2` the bound is taken at.
    """

    rounds: int
    lr: float
    replicas: int
    tau_eff: np.ndarray
    beta2: float
    kappa2: float
    bound: Theorem1Terms
    measured: float
    measured_min: float

    @property
    def ratio(self) -> float:
        """The bound divided by the measured value (at least 1 when Theorem 3 holds)."""
        return self.bound.total / self.measured


def theorem3_check(problem: QuadraticProblem, work: RandomLocalWork, solvers: Sequence[LocalSolver], rounds: int, *,
                   sigma: float = 0.5, replicas: int = 32, seed: int = 0) -> Theorem3Row:
    r"""Both sides of Theorem 3 for FedNova under arbitrary local work.

    Client :math:`i` runs ``work.draw(t)``'s :math:`\tau_i^{(t)}` steps of solver
    ``solvers[s_i^{(t)}]`` (all with the same step size :math:`\eta`, e.g.
    :func:`fedlib.experiments.speedup.make_solvers`); :math:`\tau_{\text{eff}}^{(t)} = \sum_i
    p_i\|a_i^{(t)}\|_1` and round :math:`t`'s :math:`A_t, B_t, C_t`
    (:func:`fedlib.theory.theorem1_constants` with :math:`w = p`) give

    .. math::

        \frac{\sum_t\tau_{\text{eff}}^{(t)}\mathbb E\|\nabla F(x^{(t,0)})\|^2}{\sum_t\tau_{\text{eff}}^{(t)}}
        \le \frac{4[F(x^{(0,0)}) - F_{\inf}]}{\eta\sum_t\tau_{\text{eff}}^{(t)}}
        + \frac{\sum_t\tau_{\text{eff}}^{(t)}\bigl(4\eta L\sigma^2A_t/m + 6\eta^2L^2\sigma^2B_t
        + 12\eta^2L^2\kappa^2C_t\bigr)}{\sum_t\tau_{\text{eff}}^{(t)}},

    for :math:`\eta L\max_t\tau_{\text{eff}}^{(t)} \le 1/2` and
    :math:`4\eta^2L^2\max_t C_t \le 1/(2\beta^2+1)` (else a :class:`ValueError`), with the
    largest such :math:`\beta^2` and its :math:`\kappa^2` for :math:`p`. Noise
    :math:`\sigma_0\xi`, :math:`\sigma^2 = \sigma_0^2 d`. Used by chapter 8.

    ``problem`` is a :class:`~fedlib.problems.quadratic.QuadraticProblem` with as many clients as ``work``; ``rounds``
    is :math:`T \ge 1`; ``sigma`` is :math:`\sigma_0 \ge 0`, the gradient noise's standard deviation per coordinate
    (the bound's :math:`\sigma^2 = \sigma_0^2 d`); ``replicas`` (:math:`\ge 1`, default 32) and ``seed`` go to
    :func:`fedlib.engines.quadratic.run_replicas`.
    """
    check_instance("problem", problem, QuadraticProblem)
    # local work that draws steps and solver numbers, for the problem's clients: a step schedule (FixedSteps) failed
    # as an AttributeError. The check fedlib.experiments.speedup makes, with the attributes this function reads
    _check_local_work(work, ("draw", "num_solvers", "num_clients"), "each round's steps and solver numbers",
                      "fixed steps tau_i are RandomLocalWork(steps, steps)", problem.num_clients)
    solvers = check_shared_lr("solvers", solvers)  # Theorem 3 has one step size eta
    if len(solvers) != work.num_solvers:
        raise ValueError(f"solvers: work draws among {work.num_solvers} solvers, got {len(solvers)}")
    rounds = check_int("rounds", rounds, minimum=1)
    sigma = check_nonnegative("sigma", sigma)
    lr = float(solvers[0].lr)
    p = problem.p
    d = problem.dim
    rounds_a = []
    for t in range(rounds):
        steps, numbers = work.draw(t)
        rounds_a.append([solvers[int(j)].a_vector(int(s)) for s, j in zip(steps, numbers)])
    tau_eff = np.array([float(sum(pi * a.sum() for pi, a in zip(p, a_vectors))) for a_vectors in rounds_a])
    L = quadratic_smoothness(problem.H)
    if lr * L * tau_eff.max() > 0.5:
        raise ValueError(f"lr = {lr:.4g} is too large for Theorem 3: eta L max_t tau_eff = "
                         f"{lr * L * tau_eff.max():.4g} > 1/2")
    C_max = max(theorem1_constants(p, a_vectors, te)[2] for a_vectors, te in zip(rounds_a, tau_eff))
    beta2, kappa2 = _assumption3_pair(problem, p, lr, L, C_max, "Theorem 3")
    # Theorem 1's bound of every round (with T rounds), averaged with weights tau_eff^(t): its first
    # term becomes 4 gap / (eta sum_t tau_eff^(t)), the others the weighted averages of the docstring
    weights = tau_eff / tau_eff.sum()
    gap = objective_gap(problem, p)
    per_round = np.array([theorem1_explicit_bound(lr, rounds, L=L, sigma2=sigma ** 2 * d, beta2=beta2, kappa2=kappa2,
                                                  initial_gap=gap, w=p, a_vectors=a_vectors, tau_eff=te)
                          for a_vectors, te in zip(rounds_a, tau_eff)])
    bound = Theorem1Terms(*(float(v) for v in weights @ per_round))
    run = run_replicas(problem, "fednova", solvers, work, rounds, sigma=sigma,
                       replicas=check_int("replicas", replicas, minimum=1), seed=seed)
    if not np.allclose(run.tau_eff, tau_eff, rtol=1e-12, atol=0.0):
        raise RuntimeError("run_replicas' tau_eff differs from the one the bound was computed with")
    measured = run.grad_norm2[:rounds].mean(axis=1)
    return Theorem3Row(rounds, lr, replicas, tau_eff, beta2, kappa2, bound, float(weights @ measured),
                       float(measured.min()))

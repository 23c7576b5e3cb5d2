r"""Experiments on quadratic clients :math:`F_i(x) = \frac12 x^\top H_i x - e_i^\top x`
(paper §3, Lemma 1, App. A, Theorem 2 and App. D.1).

Used by chapters 2, 3 and 8 (mainly chapter 2, "Objective inconsistency on quadratics").
Everything here *runs* the library's algorithms (:func:`fedlib.engines.reference.run_sequential`
with full-batch gradients, i.e. local gradient descent) or *evaluates* the closed forms of
:mod:`fedlib.theory`; chapter 2 compares the two.

Example
-------
>>> from fedlib.problems import random_quadratic
>>> from fedlib.schedules import FixedSteps
>>> prob = random_quadratic(4, 3, seed=0)
>>> run = run_quadratic(prob, "fednova", 0.05, FixedSteps([1, 2, 3, 4]), 200)
>>> bool(run.distances[-1] < run.distances[0]), run.diverged
(True, False)
"""
from __future__ import annotations

import math
from typing import Any, Mapping, NamedTuple, Optional, Sequence

import numpy as np

from .._validate import (check_choice, check_count, check_finite_array, check_instance, check_int, check_local_steps,
                         check_nonnegative, check_positive, check_probability_vector, check_sequence)
from ..algorithms import FederatedAlgorithm, make_algorithm
from ..engines.reference import run_sequential
from ..plotting import ALGORITHM_COLORS
from ..problems.quadratic import QuadraticProblem
from ..rng import generator
from ..schedules import check_schedule_size
from ..solvers import proximal_sgd, sgd
from ..theory import _radius_or_inf, quadratic_fixed_point, quadratic_global_optimum, quadratic_round_map
from ..tree import _scaled_norm

__all__ = [
    "LABELS",
    "CLOSED_FORM",
    "quadratic_algorithm",
    "QuadraticRun",
    "run_quadratic",
    "fixed_point",
    "round_map_radius",
    "rounds_to_converge",
    "surrogate_optimum",
    "tau_weighted_optimum",
    "small_lr_limit",
    "identity_quadratic",
    "two_client_problem",
    "instance_seed",
    "fixed_local_steps",
    "FixedPointCheck",
    "fixed_point_check",
    "WeightedLimitCheck",
    "weighted_limit_check",
    "TwoClientPoint",
    "two_client_sweep",
    "loglog_slope",
    "STYLES",
    "plot_distance_panel",
    "figure1_problem",
    "OneRound",
    "one_round",
    "plot_one_round",
]

#: Display names of the algorithms compared in Figure 2.
LABELS = {"fedavg": "FedAvg", "fedprox": "FedProx", "vrlsgd": "VRLSGD", "fednova": "FedNova"}
#: Algorithms with a closed-form fixed point in :func:`fedlib.theory.quadratic_fixed_point`.
CLOSED_FORM = ("fedavg", "fedprox", "fednova")


# ---------------------------------------------------------------- algorithms
def quadratic_algorithm(name: str, lr: float, mu: float = 0.0) -> FederatedAlgorithm:
    r"""``name`` (``fedavg``, ``fedprox``, ``fednova``, ``vrlsgd``) with local (full-batch)
    gradient descent at step ``lr``; FedProx uses the proximal solver with ``mu`` > 0,
    the others plain SGD (``mu`` is ignored for them, but must still be a finite number >= 0)."""
    check_choice("name", name, tuple(LABELS))
    mu = check_nonnegative("mu", mu)  # mu = nan or "a" passed silently with fedavg / fednova / vrlsgd
    if name == "fedprox":
        return make_algorithm(name, proximal_sgd(lr, check_positive("mu", mu)))
    return make_algorithm(name, sgd(lr))


class QuadraticRun(NamedTuple):
    """One simulated run.

    ``distances[t]`` is :math:`\\|x^{(t,0)} - x_{\\text{ref}}\\|` for the rounds that
    were completed (``distances[0]`` at the start); ``params`` the last recorded iterate.
    ``diverged`` is True when the run stopped early because the aggregate became
    non-finite (``FloatingPointError`` from :meth:`fedlib.algorithms.FederatedAlgorithm.apply`) or the
    distance exceeded ``stop_above``; ``diverged_round`` is then the index :math:`t` of the first bad iterate
    :math:`x^{(t,0)}`, made by round :math:`t-1`'s update: a ``FloatingPointError`` in round 99 ("round 99: the
    aggregated update is not finite") gives 100, with ``distances[0..99]``; a distance over ``stop_above`` at
    :math:`x^{(t,0)}` gives :math:`t`, with ``distances[0..t]`` (the last one the distance that stopped it).
    ``name`` is the algorithm's name (its label); ``reason`` says why the run stopped early (the
    ``FloatingPointError``'s message, or ``"distance > 0.1"`` for ``stop_above=0.1``), ``""`` when it did not.
    """

    name: str
    params: np.ndarray
    distances: np.ndarray
    diverged: bool
    diverged_round: Optional[int]
    reason: str


class _Stop(Exception):
    def __init__(self, round_index: int):
        super().__init__(round_index)
        self.round_index = round_index


def run_quadratic(problem: QuadraticProblem, name: str, lr: float, schedule, rounds: int, *, mu: float = 0.0,
                  x0: Any = None, reference: Any = None, stop_above: Optional[float] = None,
                  algorithm: Optional[FederatedAlgorithm] = None) -> QuadraticRun:
    r"""Run ``rounds`` rounds of ``name`` on ``problem`` (full participation, full-batch
    local GD, :math:`\tau_i^{(t)}` from ``schedule``) from ``x0`` (default 0) and record the
    distance to ``reference`` (default :math:`x^*`) after every round; ``x0`` and ``reference`` must be
    finite vectors of the problem's dimension.

    ``algorithm``: run this :class:`~fedlib.algorithms.FederatedAlgorithm` instead of
    :func:`quadratic_algorithm` ``(name, lr, mu)`` (``name`` is then only its label; its
    solver's learning rate is used in every round and ``lr`` must equal it).
    Divergence does not raise: the run stops and is marked (see :class:`QuadraticRun`).
    ``stop_above`` (default ``None``: never) stops the run once a distance exceeds it or is NaN; it must be a
    finite number > 0.
    """
    check_instance("problem", problem, QuadraticProblem)
    check_schedule_size(schedule, problem.num_clients, "the problem")  # before run_sequential's, which names p
    rounds = check_int("rounds", rounds, minimum=0)
    d = problem.dim
    ref = problem.optimum() if reference is None else check_finite_array("reference", reference, shape=(d,))
    x0 = np.zeros(d) if x0 is None else check_finite_array("x0", x0, shape=(d,)).copy()
    if stop_above is not None:
        stop_above = check_positive("stop_above", stop_above)
    dist: list[float] = []
    last = [x0]

    def metric(x, t):
        d = float(_scaled_norm(x - ref))  # np.linalg.norm: inf past ~1.3e154, so 1e160 > stop_above = 1e200
        dist.append(d)
        if np.all(np.isfinite(x)):
            last[0] = x
        if stop_above is not None and not d <= stop_above:  # also catches nan
            raise _Stop(t)
        return None

    if algorithm is None:
        algo = quadratic_algorithm(name, lr, mu)
    elif not isinstance(algorithm, FederatedAlgorithm):
        raise ValueError(f"algorithm must be a fedlib.algorithms.FederatedAlgorithm, got {type(algorithm).__name__}")
    elif not math.isclose(algorithm.solver.lr, lr):
        raise ValueError(f"lr ({lr!r}) must equal the algorithm's solver lr ({algorithm.solver.lr!r})")
    else:
        algo = algorithm
    diverged, at, reason = False, None, ""
    with np.errstate(over="ignore", invalid="ignore"):
        try:
            run_sequential(algo, x0, problem.grad_fn(), problem.p, schedule, rounds, metric_fn=metric)
        except _Stop as exc:
            diverged, at, reason = True, exc.round_index, f"distance > {stop_above:g}"
        except FloatingPointError as exc:
            diverged, at, reason = True, len(dist), str(exc)
    return QuadraticRun(name, np.asarray(last[0]), np.asarray(dist), diverged, at, reason)


# ---------------------------------------------------------------- closed forms
def _closed_form_mu(name: str, mu: float) -> float:
    """The proximal ``mu`` of ``name``'s closed form: FedProx's (> 0, as :func:`quadratic_algorithm`
    asks: FedProx at mu = 0 is FedAvg), 0 for the others (their ``mu`` is ignored)."""
    check_choice("name", name, CLOSED_FORM)
    return check_positive("mu", mu) if name == "fedprox" else 0.0


def fixed_point(problem: QuadraticProblem, name: str, lr: float, local_steps: Any, mu: float = 0.0) -> np.ndarray:
    r""":func:`fedlib.theory.quadratic_fixed_point` for ``problem`` (FedAvg, FedProx with ``mu`` > 0, FedNova).

    ``name`` is one of :data:`CLOSED_FORM` (``"vrlsgd"`` is a ``ValueError``), ``lr`` :math:`\eta > 0` and
    ``local_steps`` the (m,) :math:`\tau_i` (whole numbers :math:`\ge 1`); ``mu`` is used by FedProx alone (> 0,
    with :math:`\eta\mu \le 1`). Rounds that do not converge (spectral radius :math:`\ge 1`) are a ``ValueError``
    naming ``lr``."""
    check_instance("problem", problem, QuadraticProblem)
    return quadratic_fixed_point(problem.H, problem.e, problem.p, local_steps, lr, name, mu=_closed_form_mu(name, mu))


def round_map_radius(problem: QuadraticProblem, name: str, lr: float, local_steps: Any, mu: float = 0.0) -> float:
    r"""Spectral radius of one round's affine map (< 1: the rounds converge, geometrically); ``inf`` when the
    map itself overflows float64 (an ``lr`` far too large: eigvals would raise on its inf / NaN entries).

    ``problem``, ``name``, ``lr``, ``local_steps`` and ``mu`` are checked as in :func:`fixed_point`; a radius
    :math:`\ge 1` is returned, not refused."""
    check_instance("problem", problem, QuadraticProblem)
    M, _ = quadratic_round_map(problem.H, problem.e, problem.p, local_steps, lr, name, mu=_closed_form_mu(name, mu))
    return _radius_or_inf(M)


def rounds_to_converge(problem: QuadraticProblem, name: str, lr: float, local_steps: Any, mu: float = 0.0,
                       reduction: float = 1e-13) -> int:
    r"""Rounds :math:`T` with :math:`\rho^T \le` ``reduction``, :math:`\rho` the spectral radius of
    the round map. The map is symmetric (each :math:`K_i H_i` is a function of :math:`H_i`),
    so after :math:`T` rounds :math:`\|x^{(T,0)} - \tilde x\| \le \rho^T \|x^{(0,0)} - \tilde x\|`.
    ``reduction`` must lie in (0, 1); :math:`\rho = 0` (one round lands on :math:`\tilde x`) gives 1.
    ``problem``, ``name``, ``lr``, ``local_steps`` and ``mu`` are :func:`round_map_radius`'s; :math:`\rho \ge 1` is a
    ``ValueError`` naming ``lr``."""
    check_instance("problem", problem, QuadraticProblem)
    if check_positive("reduction", reduction) >= 1:
        raise ValueError(f"reduction must lie in (0, 1), got {reduction!r}")
    rho = round_map_radius(problem, name, lr, local_steps, mu)
    if rho >= 1:
        raise ValueError(f"lr: the rounds of {name} do not converge (spectral radius {rho:.4g} >= 1)")
    if rho == 0:
        return 1
    return max(1, math.ceil(math.log(reduction) / math.log(rho)))


def surrogate_optimum(problem: QuadraticProblem, weights: Any) -> np.ndarray:
    r"""Minimiser of the surrogate :math:`\tilde F = \sum_i w_i F_i` (Theorem 1), ``weights`` summing to 1.

    ``problem`` gives the :math:`H_i` and :math:`e_i`; its own ``p`` is not used."""
    check_instance("problem", problem, QuadraticProblem)
    # checked here as 'weights': quadratic_global_optimum names its weights 'p', which here is problem.p
    weights = check_probability_vector("weights", weights, size=problem.num_clients)
    return quadratic_global_optimum(problem.H, problem.e, weights)


def tau_weighted_optimum(problem: QuadraticProblem, local_steps: Any) -> np.ndarray:
    r"""Minimiser of :math:`\tilde F` with :math:`w_i = p_i\tau_i/\sum_j p_j\tau_j`: FedAvg's
    :math:`\eta \to 0` limit (Lemma 1 for general :math:`H_i`: :math:`K_i \approx \eta\tau_i I`).
    ``problem`` gives :math:`H_i`, :math:`e_i` and :math:`p_i`; ``local_steps`` is the (m,) :math:`\tau_i`, whole
    numbers :math:`\ge 1`."""
    check_instance("problem", problem, QuadraticProblem)
    steps = check_local_steps("local_steps", local_steps, size=problem.num_clients).astype(np.float64)
    w = problem.p * steps
    return surrogate_optimum(problem, w / w.sum())


def small_lr_limit(problem: QuadraticProblem, name: str, local_steps: Any, weights: Any = None) -> np.ndarray:
    r"""Where the fixed point of ``name`` (``fedavg``, ``fedprox``, ``fednova``; full participation, full-batch
    local GD) goes as :math:`\eta \to 0`: the minimiser of the surrogate :math:`\tilde F = \sum_i w_i F_i` of
    Theorem 1 (paper §4, eq. 6; Lemma 1 for general :math:`H_i`), with the weights :math:`p_i` of ``weights``
    (default ``problem.p``):

    * FedAvg with plain SGD (:math:`\|a_i\|_1 = \tau_i`), and FedProx at a fixed :math:`\mu`
      (:math:`\alpha = \eta\mu \to 0`): :math:`w_i = p_i\tau_i / \sum_j p_j\tau_j`. Its fixed point solves
      :math:`\sum_i p_i K_i (H_i x - e_i) = 0` with :math:`K_i = \eta\tau_i I + O(\eta^2)`
      (:func:`fedlib.theory.quadratic_local_operator`), i.e. :math:`\sum_i p_i\tau_i\nabla F_i(x) = O(\eta)`
      (:func:`tau_weighted_optimum`);
    * FedNova: :math:`w_i = p_i`, the true optimum :math:`x^* = (\sum_i p_iH_i)^{-1}\sum_i p_ie_i` of
      :math:`F = \sum_i p_i F_i` (its coefficients
      :math:`\tau_{\text{eff}} p_i K_i / \tau_i = \eta\,\tau_{\text{eff}}\,p_i I + O(\eta^2)`).

    ``local_steps`` is the (m,) :math:`\tau_i` (whole numbers :math:`\ge 1`; FedNova's point does not depend on it).

    Both are :math:`O(\eta)` from the fixed point at a step :math:`\eta` (:func:`fixed_point`). ``weights``
    = :math:`1/m` gives the point an implementation that drops the :math:`p_i` (averages with :math:`1/m`)
    converges to: chapter 2's unequal-weights section (:func:`weighted_limit_check`) asserts that the
    simulated limits are near the first and far from the second.

    Example
    -------
    Scalar clients :math:`H_i = 1`, :math:`e = (1, -1)` (local optima :math:`\pm 1`), :math:`p = (3/4, 1/4)`,
    :math:`\tau = (1, 3)`: :math:`p_i\tau_i = (3/4, 3/4)`, so FedAvg's :math:`w = (1/2, 1/2)` and its limit is
    :math:`0`; FedNova's is :math:`x^* = 3/4 - 1/4 = 1/2`; with :math:`p_i = 1/2` instead FedAvg's would be
    :math:`(1 - 3)/4 = -1/2`:

    >>> prob = QuadraticProblem(np.ones((2, 1, 1)), np.array([[1.0], [-1.0]]), np.array([0.75, 0.25]))
    >>> [float(small_lr_limit(prob, n, [1, 3])[0]) for n in ("fedavg", "fednova")]
    [0.0, 0.5]
    >>> float(small_lr_limit(prob, "fedavg", [1, 3], weights=[0.5, 0.5])[0])
    -0.5
    """
    check_instance("problem", problem, QuadraticProblem)
    check_choice("name", name, CLOSED_FORM)
    steps = check_local_steps("local_steps", local_steps, size=problem.num_clients)
    if weights is not None:  # QuadraticProblem would name them 'p', which here is problem.p
        weights = check_probability_vector("weights", weights, size=problem.num_clients)
    weighted = problem if weights is None else QuadraticProblem(problem.H, problem.e, weights)
    return tau_weighted_optimum(weighted, steps) if name != "fednova" else weighted.optimum()


# ---------------------------------------------------------------- problems
def identity_quadratic(num_clients: int, dim: int, seed: int = 0, spread: float = 5.0, p: Any = None) -> QuadraticProblem:
    r"""Lemma 1's setting: :math:`H_i = I` exactly, :math:`e_i = x_i^* \sim N(0, \text{spread}^2 I)`
    (stream ``(seed, "data", i)``), equal weights unless ``p`` is given. ``num_clients`` :math:`m` and ``dim``
    :math:`d` are integers :math:`\ge 1` (a float is refused), ``spread`` > 0."""
    m = check_int("num_clients", num_clients, minimum=1)
    d = check_int("dim", dim, minimum=1)
    spread = check_positive("spread", spread)
    H = np.broadcast_to(np.eye(d), (m, d, d)).copy()
    e = np.stack([spread * generator(seed, "data", i).standard_normal(d) for i in range(m)])
    # a given p is checked by QuadraticProblem as given (as random_quadratic's since 47cfaa0)
    return QuadraticProblem(H, e, np.full(m, 1.0 / m) if p is None else p)


def two_client_problem(a: float = 1.0) -> QuadraticProblem:
    r"""App. D.1: :math:`F_1 = \frac12(x-a)^2`, :math:`F_2 = \frac12(x+a)^2` (:math:`H_i = 1`,
    :math:`e = \pm a`, up to constants), :math:`p = (\frac12, \frac12)`, so :math:`x^* = 0` and
    :math:`\nabla F(x) = x`."""
    a = check_positive("a", a)
    return QuadraticProblem(np.ones((2, 1, 1)), np.array([[a], [-a]]), np.array([0.5, 0.5]))


def instance_seed(seed: int, index: int, purpose: str = "instances") -> int:
    """An integer seed for random instance ``index`` of run ``seed`` (stream ``(seed, purpose, index)``),
    e.g. for :func:`fedlib.problems.quadratic.random_quadratic`."""
    return int(generator(seed, purpose, check_int("index", index)).integers(2 ** 31))


def fixed_local_steps(seed: int, index: int, num_clients: int, low: int, high: int,
                      purpose: str = "fixed_local_steps") -> np.ndarray:
    r"""Heterogeneous :math:`\tau_i`, uniform on the inclusive range ``[low, high]``, drawn once
    (stream ``(seed, purpose, index)``), one for each of ``num_clients`` clients (an integer :math:`\ge 1`); ``low`` and
    ``high`` are whole numbers, :math:`1 \le` ``low`` :math:`\le` ``high``."""
    m = check_int("num_clients", num_clients, minimum=1)
    low = check_count("low", low, minimum=1)
    high = check_count("high", high, minimum=low)
    return generator(seed, purpose, check_int("index", index)).integers(low, high + 1, size=m)


# ---------------------------------------------------------------- experiments
class FixedPointCheck(NamedTuple):
    r"""Simulated limit vs closed form for one algorithm on one instance.

    ``name`` is the algorithm; ``rounds`` the :math:`T` simulated (:func:`rounds_to_converge`); ``radius`` the
    spectral radius :math:`\rho` of the round map; ``closed_form`` :math:`\tilde x` (:func:`fixed_point`) and
    ``simulated`` :math:`x^{(T,0)}`, both (d,); ``rel_error`` and ``dist_to_opt`` as in :func:`fixed_point_check`."""

    name: str
    rounds: int
    radius: float
    closed_form: np.ndarray
    simulated: np.ndarray
    rel_error: float
    dist_to_opt: float


def fixed_point_check(problem: QuadraticProblem, local_steps: Any, lr: float, mu: float = 0.0,
                      names: Optional[Sequence[str]] = None, reduction: float = 1e-13) -> list[FixedPointCheck]:
    r"""For each algorithm: simulate from 0 for :func:`rounds_to_converge` rounds with fixed
    :math:`\tau_i` and compare with the closed form; ``rel_error`` is
    :math:`\|x^{(T,0)} - \tilde x\| / \|\tilde x\|` (the absolute error when :math:`\tilde x = 0`),
    ``dist_to_opt`` is :math:`\|\tilde x - x^*\|`.
    ``names`` defaults to :data:`CLOSED_FORM`, without FedProx when ``mu`` is 0 (FedProx needs
    ``mu`` > 0); every name is checked before anything runs.

    ``problem`` is a :class:`~fedlib.problems.quadratic.QuadraticProblem`, ``local_steps`` the (m,) fixed
    :math:`\tau_i` (whole numbers :math:`\ge 1`), ``lr`` :math:`\eta > 0` (rounds that do not converge are a
    ``ValueError`` naming it) and ``reduction`` in (0, 1) (:func:`rounds_to_converge`). A simulated run that diverges
    is a ``FloatingPointError``."""
    from ..schedules import FixedSteps

    check_instance("problem", problem, QuadraticProblem)
    if names is None:
        names = CLOSED_FORM if mu != 0 else tuple(n for n in CLOSED_FORM if n != "fedprox")
    for name in names:
        _closed_form_mu(name, mu)
    steps = check_local_steps("local_steps", local_steps, size=problem.num_clients)
    schedule = FixedSteps(steps)
    xs = problem.optimum()
    out = []
    for name in names:
        rounds = rounds_to_converge(problem, name, lr, steps, mu, reduction)
        xt = fixed_point(problem, name, lr, steps, mu)
        run = run_quadratic(problem, name, lr, schedule, rounds, mu=mu, reference=xt)
        if run.diverged:
            raise FloatingPointError(f"{name} diverged ({run.reason})")
        scale = float(np.linalg.norm(xt)) or 1.0  # x~ = 0: the absolute error (0/0 would be nan)
        out.append(FixedPointCheck(name, rounds, round_map_radius(problem, name, lr, steps, mu), xt, run.params,
                                   float(run.distances[-1] / scale), float(np.linalg.norm(xt - xs))))
    return out


class WeightedLimitCheck(NamedTuple):
    r"""One algorithm of :func:`weighted_limit_check`: its simulated limit at the step ``lr`` against the
    closed form at that step and against its :math:`\eta \to 0` point (:func:`small_lr_limit`).

    ``simulated`` is :math:`x^{(T,0)}` (from 0, :math:`\rho^T \le` ``reduction``), ``rel_error`` its
    relative distance to the closed-form fixed point (App. A), ``target`` :math:`\tilde x_0` / ``uniform_target``
    :math:`\tilde x_0^{1/m}` the :math:`\eta \to 0` point with the problem's :math:`p_i` / with :math:`p_i = 1/m`,
    ``target_distance`` :math:`\|x^{(T,0)} - \tilde x_0\|` (the :math:`O(\eta)` term), ``uniform_distance``
    :math:`\|x^{(T,0)} - \tilde x_0^{1/m}\|`, ``separation`` :math:`\|\tilde x_0 - \tilde x_0^{1/m}\|`, and
    ``tenth_distance`` the closed-form fixed point's distance to :math:`\tilde x_0` at ``lr / 10`` (a tenth of the
    :math:`O(\eta)` term when the limit is :math:`\tilde x_0`). ``name`` is the algorithm and ``rounds`` the
    :math:`T` simulated."""

    name: str
    rounds: int
    simulated: np.ndarray
    rel_error: float
    target: np.ndarray
    uniform_target: np.ndarray
    target_distance: float
    uniform_distance: float
    separation: float
    tenth_distance: float


def weighted_limit_check(problem: QuadraticProblem, local_steps: Any, lr: float,
                         names: Sequence[str] = ("fedavg", "fednova"), mu: float = 0.0,
                         reduction: float = 1e-13) -> list[WeightedLimitCheck]:
    r"""Chapter 2's check for unequal weights :math:`p_i`: simulate each algorithm of ``names`` (fixed
    :math:`\tau_i`, full-batch local GD at step ``lr``, from 0 for :func:`rounds_to_converge` rounds, as
    :func:`fixed_point_check`) and put its limit next to

    * the closed-form fixed point at ``lr`` (App. A): ``rel_error``;
    * the paper's :math:`\eta \to 0` point with the problem's :math:`p_i` (:func:`small_lr_limit`: FedAvg's
      :math:`\arg\min\sum_i w_iF_i`, :math:`w_i = p_i\tau_i/\sum_j p_j\tau_j`; FedNova's :math:`x^*` of
      :math:`\sum_i p_iF_i`), and the same point with :math:`p_i = 1/m`, where an implementation that drops
      the :math:`p_i` converges to.

    With :math:`p_i = 1/m` the two points coincide and nothing tells a :math:`p`-dropping implementation
    apart. With unequal :math:`p_i` the simulated limit must be :math:`O(\eta)` from the first: its
    ``target_distance`` is about ten times the closed form's at ``lr / 10`` (``tenth_distance``), where an
    implementation whose limit is another point keeps a distance that does not shrink with :math:`\eta`;
    and it lies nearer the first point than the second (``target_distance < uniform_distance``).

    ``local_steps`` (the (m,) :math:`\tau_i`), ``mu`` (FedProx's :math:`\mu`, default 0: name ``"fedprox"`` only
    with ``mu`` > 0) and ``reduction`` (in (0, 1)) are :func:`fixed_point_check`'s.

    Example
    -------
    >>> from fedlib.problems import random_quadratic
    >>> prob = random_quadratic(4, 3, seed=0, p=[0.1, 0.2, 0.3, 0.4])
    >>> checks = weighted_limit_check(prob, [1, 2, 5, 3], 0.01)
    >>> [(c.name, c.rel_error < 1e-10, 9 < c.target_distance / c.tenth_distance < 11,
    ...   c.target_distance < c.uniform_distance) for c in checks]
    [('fedavg', True, True, True), ('fednova', True, True, True)]
    """
    check_instance("problem", problem, QuadraticProblem)
    steps = check_local_steps("local_steps", local_steps, size=problem.num_clients)
    lr = check_positive("lr", lr)
    uniform = np.full(problem.num_clients, 1.0 / problem.num_clients)
    out = []
    for c in fixed_point_check(problem, steps, lr, mu, names=names, reduction=reduction):
        target = small_lr_limit(problem, c.name, steps)
        other = small_lr_limit(problem, c.name, steps, weights=uniform)
        tenth = fixed_point(problem, c.name, lr / 10, steps, mu)
        out.append(WeightedLimitCheck(c.name, c.rounds, c.simulated, c.rel_error, target, other,
                                      float(np.linalg.norm(c.simulated - target)),
                                      float(np.linalg.norm(c.simulated - other)), float(np.linalg.norm(target - other)),
                                      float(np.linalg.norm(tenth - target))))
    return out


class TwoClientPoint(NamedTuple):
    """App. D.1 at one :math:`(\\tau_1, \\tau_2)`: simulated limits and their :math:`\\|\\nabla F\\|^2`.

    ``tau1`` and ``tau2`` are the two clients' step counts; ``rounds``, ``x_limit`` and ``grad_norm_sq`` map each
    algorithm's name to its :math:`T`, its scalar :math:`x^{(T,0)}` and :math:`\\|\\nabla F(x^{(T,0)})\\|^2`
    (:math:`= (x^{(T,0)})^2` here, :func:`two_client_problem`)."""

    tau1: int
    tau2: int
    rounds: dict
    x_limit: dict
    grad_norm_sq: dict


def two_client_sweep(tau1: int, tau2_values: Sequence[int], lr: float, a: float = 1.0,
                     names: Sequence[str] = ("fedavg", "fednova"), reduction: float = 1e-10) -> list[TwoClientPoint]:
    r"""Simulate App. D.1's example from :math:`x = x^* = 0` for each :math:`\tau_2` until the
    round map has contracted by ``reduction``; return :math:`\|\nabla F(x^{(T,0)})\|^2` per algorithm.

    ``tau1`` (:math:`\tau_1`) and each of ``tau2_values`` (:math:`\tau_2`) are whole numbers :math:`\ge 1`; ``lr``
    :math:`\eta > 0` must make every round map contract (a ``ValueError`` naming ``lr`` otherwise); ``a`` > 0 is
    :func:`two_client_problem`'s (default 1). ``names`` holds ``"fedavg"`` and/or ``"fednova"`` (a ``ValueError`` naming
    ``names[k]`` for any other; FedProx's :math:`\mu` would be 0 here); ``reduction`` lies in (0, 1). A diverged run is a
    ``FloatingPointError``."""
    from ..schedules import FixedSteps

    # np.array([True, 2]) is [1, 2]: a bool passed as a step count, unchecked below
    tau1 = check_count("tau1", tau1, minimum=1)
    tau2_values = [check_count(f"tau2_values[{k}]", t, minimum=1)
                   for k, t in enumerate(check_sequence("tau2_values", tau2_values, "step counts"))]
    # else 'fedavg' ran as the names 'f', 'e', ..., FedProx failed as 'mu must be ... > 0' (no parameter here)
    names = check_sequence("names", names, "algorithm names ('fedavg', 'fednova')",
                           empty="names must hold at least one algorithm name")
    for k, name in enumerate(names):
        check_choice(f"names[{k}]", name, ("fedavg", "fednova"))
    problem = two_client_problem(a)
    out = []
    for tau2 in tau2_values:
        steps = np.array([tau1, tau2])
        rounds, xl, g2 = {}, {}, {}
        for name in names:
            rounds[name] = rounds_to_converge(problem, name, lr, steps, reduction=reduction)
            run = run_quadratic(problem, name, lr, FixedSteps(steps), rounds[name])
            if run.diverged:
                raise FloatingPointError(f"{name} diverged ({run.reason})")
            xl[name] = float(run.params[0])
            g2[name] = float(np.sum(problem.global_grad(run.params) ** 2))
        out.append(TwoClientPoint(int(tau1), int(tau2), rounds, xl, g2))
    return out


# ---------------------------------------------------------------- reporting
def loglog_slope(x: Any, y: Any) -> float:
    """Least-squares slope of :math:`\\log y` against :math:`\\log x` (order of convergence); ``x`` needs
    at least two distinct values."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if (x.ndim != 1 or x.shape != y.shape or x.size < 2 or not np.all(np.isfinite(x) & np.isfinite(y))
            or np.any(x <= 0) or np.any(y <= 0)):
        raise ValueError("loglog_slope needs two finite, positive 1-d arrays of the same length >= 2")
    if np.all(x == x[0]):
        raise ValueError(f"loglog_slope needs at least two distinct x values (every x is {x[0]:g}: the slope is "
                         "undefined)")
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


#: Colours and line styles of the algorithms in the chapter's figures.
STYLES = {name: dict(color=ALGORITHM_COLORS[name], ls="--" if name == "fednova" else "-")
          for name in ("fedavg", "fedprox", "vrlsgd", "fednova")}


def plot_distance_panel(ax, runs: Mapping[str, QuadraticRun], title: str, floors: Optional[Mapping[str, float]] = None,
                        ymax: Optional[float] = None) -> None:
    r"""One panel of Figure 2: :math:`\|x^{(t,0)} - x^*\|` vs rounds (log y) per algorithm;
    optional dotted lines at the closed-form distances ``floors``; a run that diverged
    ends with a cross and a note.

    ``ax`` is a matplotlib ``Axes``; ``runs`` maps an algorithm's name (a key of :data:`LABELS` and
    :data:`STYLES`; another name is drawn under itself in the default style) to its :class:`QuadraticRun`;
    ``title`` is the panel's title. ``ymax`` (default ``None``: matplotlib's) caps the y axis, and a diverged run's
    cross is drawn at most that high."""
    for name, run in runs.items():
        st = STYLES.get(name, {})
        t = np.arange(run.distances.size)
        label = LABELS.get(name, name) + (" (diverged)" if run.diverged else "")
        ax.plot(t, run.distances, label=label, lw=1.6, **st)
        if run.diverged:
            top = ymax if ymax else run.distances[-1]
            y = min(run.distances[-1], top) if np.isfinite(run.distances[-1]) else top
            ax.plot([t[-1]], [y], marker="x", ms=10, mew=2, color=st.get("color"), clip_on=False)
            ax.annotate(f"{LABELS.get(name, name)} diverges\n(stopped at round {run.diverged_round})", (t[-1], y),
                        textcoords="offset points", xytext=(10, -24), ha="left", fontsize=8,
                        color=st.get("color"))
    for name, value in (floors or {}).items():
        ax.axhline(value, color=STYLES.get(name, {}).get("color"), ls=":", lw=1)
    ax.set_yscale("log")
    if ymax:
        ax.set_ylim(top=ymax)
    ax.set_title(title)
    ax.set_xlabel("round $t$")
    ax.grid(True, which="major", alpha=0.3)


# ---------------------------------------------------------------- Figure 1: one round in the plane
def figure1_problem() -> QuadraticProblem:
    r"""Paper Figure 1's picture as numbers: two clients in the plane with anisotropic
    quadratics, minima :math:`x_1^* = (2, 1)` and :math:`x_2^* = (-2, 1)`,
    :math:`H_1 = \mathrm{diag}(1, 3)`, :math:`H_2 = \mathrm{diag}(2, 1)`, :math:`p = (\frac12, \frac12)`."""
    H = np.array([np.diag([1.0, 3.0]), np.diag([2.0, 1.0])])
    minima = np.array([[2.0, 1.0], [-2.0, 1.0]])
    e = np.einsum("ijk,ik->ij", H, minima)  # grad F_i(x) = H_i (x - x_i^*)
    return QuadraticProblem(H, e, np.array([0.5, 0.5]))


class OneRound(NamedTuple):
    r"""One round of local gradient descent from ``x0`` and where the server goes.

    ``paths[i]`` is client ``i``'s local trajectory :math:`x_i^{(t,0)}, \dots, x_i^{(t,\tau_i)}`
    (``(tau_i + 1, d)``); ``fedavg`` / ``fednova`` the next global model
    :math:`x^{(t+1,0)}` of each algorithm (taken from a one-round run of the library's
    algorithms); ``fedavg_limit`` / ``fednova_limit`` their closed-form fixed points
    (App. A); ``client_optima`` the :math:`x_i^*`; ``optimum`` :math:`x^*`. ``local_steps`` is the (m,)
    :math:`\tau_i` and ``lr`` the step :math:`\eta` of the round.
    """

    x0: np.ndarray
    local_steps: np.ndarray
    lr: float
    paths: list
    fedavg: np.ndarray
    fednova: np.ndarray
    fedavg_limit: np.ndarray
    fednova_limit: np.ndarray
    client_optima: np.ndarray
    optimum: np.ndarray


def one_round(problem: QuadraticProblem, x0: Any, local_steps: Sequence[int], lr: float) -> OneRound:
    r"""Every client runs :math:`\tau_i` steps of gradient descent from ``x0``; FedAvg
    averages the results with weights :math:`p_i`, FedNova averages the normalised
    updates :math:`\Delta_i/\tau_i` and scales by :math:`\tau_{\text{eff}} = \sum_i p_i\tau_i`
    (eq. 4 with plain SGD, :math:`\|a_i\|_1 = \tau_i`). The next global models come
    from :func:`run_quadratic` (one round); the local paths from :class:`fedlib.solvers.LocalSolver`.

    ``problem`` is a :class:`~fedlib.problems.quadratic.QuadraticProblem` (each :math:`H_i` invertible, for
    :math:`x_i^*`), ``x0`` of shape (d,), ``local_steps`` the (m,) :math:`\tau_i` (whole numbers :math:`\ge 1`) and
    ``lr`` :math:`\eta > 0`, at which both algorithms' rounds must converge (their limits are computed; a
    ``ValueError`` naming ``lr`` otherwise)."""
    from ..schedules import FixedSteps

    check_instance("problem", problem, QuadraticProblem)
    tau = check_local_steps("local_steps", local_steps, size=problem.num_clients)
    lr = check_positive("lr", lr)
    x0 = np.array(x0, dtype=np.float64)
    if x0.shape != (problem.dim,):
        raise ValueError(f"x0 must have shape ({problem.dim},), got {x0.shape}")
    solver = sgd(lr)
    paths = []
    for i in range(problem.num_clients):
        state = solver.init(x0)
        path = [x0]
        for _ in range(int(tau[i])):
            state = solver.update(state, problem.grad(state.params, i))
            path.append(state.params)
        paths.append(np.array(path))
    nxt = {name: run_quadratic(problem, name, lr, FixedSteps(tau), 1, x0=x0).params for name in ("fedavg", "fednova")}
    minima = np.array([np.linalg.solve(problem.H[i], problem.e[i]) for i in range(problem.num_clients)])
    return OneRound(x0, tau, lr, paths, nxt["fedavg"], nxt["fednova"], fixed_point(problem, "fedavg", lr, tau),
                    fixed_point(problem, "fednova", lr, tau), minima, problem.optimum())


def plot_one_round(ax, problem: QuadraticProblem, r: OneRound, span: float = 3.2) -> None:
    """Figure 1 of the paper drawn from :func:`one_round`: level sets of the global
    objective, each client's local path, FedAvg's and FedNova's next global model and
    their limits, the client optima and :math:`x^*` (2-d problems only).

    ``ax`` is a matplotlib ``Axes``; ``problem`` the 2-d problem ``r`` was computed on (another dimension is a
    ``ValueError``); ``r`` the :class:`OneRound`; ``span`` the half-width of the square
    ``[-span, span]``:sup:`2` drawn (default 3.2)."""
    check_instance("problem", problem, QuadraticProblem)
    if problem.dim != 2:
        raise ValueError(f"plot_one_round draws 2-d problems, got dimension {problem.dim}")
    g = np.linspace(-span, span, 161)
    X, Y = np.meshgrid(g, g)
    pts = np.stack([X.ravel(), Y.ravel()], 1)
    Hbar = np.einsum("i,ijk->jk", problem.p, problem.H)
    F = 0.5 * np.einsum("nj,jk,nk->n", pts, Hbar, pts) - pts @ (problem.p @ problem.e)
    ax.contour(X, Y, F.reshape(X.shape), levels=12, colors="0.85", linewidths=0.8)
    colors = ("tab:orange", "tab:green", "tab:purple", "tab:brown")
    for i, path in enumerate(r.paths):
        c = colors[i % len(colors)]
        ax.plot(path[:, 0], path[:, 1], "-o", color=c, ms=3, lw=1.2,
                label=f"client {i + 1}: {int(r.local_steps[i])} local steps")
        ax.plot(*r.client_optima[i], marker="*", color=c, ms=13, ls="none")
        ax.annotate(f"$x_{i + 1}^*$", r.client_optima[i], textcoords="offset points", xytext=(6, 4))
    ax.plot(*r.x0, "ks", ms=6, label="$x^{(t,0)}$")
    avg, nova = ALGORITHM_COLORS["fedavg"], ALGORITHM_COLORS["fednova"]
    ax.plot(*r.fedavg, "o", color=avg, ms=8, label="FedAvg $x^{(t+1,0)}$")
    ax.plot(*r.fednova, "o", color=nova, ms=8, label="FedNova $x^{(t+1,0)}$")
    ax.plot(*r.fedavg_limit, "x", color=avg, ms=10, mew=2, label="FedAvg limit")
    ax.plot(*r.fednova_limit, "x", color=nova, ms=10, mew=2, label="FedNova limit")
    ax.plot(*r.optimum, "k*", ms=14, label="$x^*$")
    ax.set_xlim(-span, span), ax.set_ylim(-span, span)
    ax.set_aspect("equal")
    ax.legend(fontsize=7, loc="lower left", framealpha=0.9)

r"""FedNova combined with acceleration techniques (paper §5, App. H, Table 1's VR and
momentum rows), on quadratic clients where every round is an exact affine map.

Used by chapter 10 ("FedNova with variance reduction and momentum"). A *variant* is an
algorithm of :mod:`fedlib.algorithms` with a local solver (plain or heavy-ball SGD) and
a server optimizer (plain or server momentum, :func:`fedlib.server.momentum`):

=========================  ===========================================================
variant                    what it is
=========================  ===========================================================
``fedavg``, ``fednova``    local GD, plain server
``vrlsgd``                 VRLSGD with heterogeneous steps (§3)
``scaffold``               SCAFFOLD (FedAvg's aggregation, the paper's correction)
``fednova-vr``             FedNova-VR (§5: correction :math:`\sum_j p_j d_j - d_i`)
``fednova-vr-momentum``    FedNova with local momentum and VR (App. H, Alg. 2)
``fedavg-momentum``        FedAvg, local momentum
``fednova-momentum``       FedNova, local momentum
``fedavg-servermom``       FedAvg, server momentum
``fednova-servermom``      FedNova, server momentum
``fedavg-hybrid``          FedAvg, local + server momentum
``fednova-hybrid``         FedNova, local + server momentum ("hybrid", §6's text)
=========================  ===========================================================

Everything is done twice: :func:`run_variant` *runs* the library's algorithm
(:func:`fedlib.engines.reference.run_sequential`, one client and one step at a time),
:func:`variant_round_map` *writes the round down* in closed form
(:func:`fedlib.theory.quadratic_round_map`, :func:`~fedlib.theory.quadratic_vr_round_map`,
:func:`~fedlib.theory.server_momentum_round_map`), and the chapter compares the two.

Example
-------
>>> from fedlib.problems import random_quadratic
>>> from fedlib.schedules import FixedSteps
>>> prob = random_quadratic(3, 2, seed=0)
>>> steps = FixedSteps([1, 3, 6])
>>> run = run_variant(prob, "fednova-vr", 0.05, steps, 300)
>>> bool(run.distances[-1] < 1e-9 * run.distances[0])   # x* itself, no O(lr) term
True
>>> limit = variant_limit(prob, "fednova", 0.05, [1, 3, 6])
>>> bool(np.linalg.norm(limit - prob.optimum()) > 1e-4)   # FedNova alone: O(lr) away
True
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple, Optional, Sequence

import numpy as np

from .._validate import (bool_entry, check_choice, check_finite_array, check_flag, check_in_range, check_instance,
                         check_int, check_local_steps, check_positive, check_probability_vector, check_sequence, plain)
from ..algorithms import FederatedAlgorithm, make_algorithm
from ..engines.batched import run_batched
from ..plotting import ALGORITHM_COLORS
from ..problems.logistic import LogisticProblem
from ..problems.quadratic import QuadraticProblem
from ..schedules import FixedSteps, check_schedule_size, round_local_steps
from ..server import momentum as server_momentum
from ..solvers import momentum_sgd, sgd
from ..theory import (VR_ALGORITHMS, _radius_or_inf, _round_map_terms, _vr_fixed_point_system, _vr_round_map_terms,
                      quadratic_global_optimum, server_momentum_round_map, spectral_radius)
from ..tree import _scaled_norm
from .quadratic import QuadraticRun, run_quadratic
from .surrogate import flat_directions, newton_minimize

__all__ = [
    "Variant",
    "VARIANTS",
    "make_variant",
    "RoundMap",
    "variant_round_map",
    "initial_state",
    "variant_limit",
    "variant_radius",
    "vr_limit",
    "iterate_round_maps",
    "run_variant",
    "measured_rate",
    "Comparison",
    "compare_with_closed_form",
    "RateCheck",
    "ASYMPTOTIC_SQUARINGS",
    "rate_check",
    "limit_distances",
    "ROUNDING_THRESHOLD",
    "limit_distances_to_draw",
    "logistic_losses",
    "LINEARISED_VR",
    "LogisticOptimum",
    "flat_directions",
    "logistic_optimum",
    "linearised_vr_radius",
    "linearised_vr_eigenvalues",
    "linearised_vr_count_outside",
    "linearised_gd_eigenvalues",
    "linearised_vr_matrix",
    "spectrum_summary",
    "read_vr_spectrum",
    "read_vr_count",
    "VR_STEP_SETTINGS",
    "vr_step_settings",
    "vr_count_path",
    "Perturbation",
    "perturbation_growth",
    "STYLES",
]


class Variant(NamedTuple):
    """``label`` for figures; ``algorithm`` (a :data:`fedlib.algorithms.ALGORITHMS` name);
    whether the clients use heavy-ball momentum (``local_momentum``) and the server uses server momentum
    (``server_momentum``), of the coefficients :func:`make_variant` is given."""

    label: str
    algorithm: str
    local_momentum: bool
    server_momentum: bool


#: The variants of the chapter (see the module docstring).
VARIANTS = {
    "fedavg": Variant("FedAvg", "fedavg", False, False),
    "fednova": Variant("FedNova", "fednova", False, False),
    "vrlsgd": Variant("VRLSGD", "vrlsgd", False, False),
    "scaffold": Variant("SCAFFOLD", "scaffold", False, False),
    "fednova-vr": Variant("FedNova-VR", "fednova-vr", False, False),
    "fednova-vr-momentum": Variant("FedNova, momentum + VR", "fednova-vr", True, False),
    "fedavg-momentum": Variant("FedAvg, local momentum", "fedavg", True, False),
    "fednova-momentum": Variant("FedNova, local momentum", "fednova", True, False),
    "fedavg-servermom": Variant("FedAvg, server momentum", "fedavg", False, True),
    "fednova-servermom": Variant("FedNova, server momentum", "fednova", False, True),
    "fedavg-hybrid": Variant("FedAvg, hybrid momentum", "fedavg", True, True),
    "fednova-hybrid": Variant("FedNova, hybrid momentum", "fednova", True, True),
}

#: Colours and line styles of the variants in the chapter's figures.
STYLES = {
    "fedavg": dict(color=ALGORITHM_COLORS["fedavg"], ls="-"),
    "fednova": dict(color=ALGORITHM_COLORS["fednova"], ls="--"),
    "vrlsgd": dict(color=ALGORITHM_COLORS["vrlsgd"], ls="-"),
    "scaffold": dict(color=ALGORITHM_COLORS["scaffold"], ls="-"),
    "fednova-vr": dict(color=ALGORITHM_COLORS["fednova"], ls=":"),
    "fednova-vr-momentum": dict(color="C5", ls=":"),
    "fedavg-momentum": dict(color=ALGORITHM_COLORS["fedavg"], ls="-."),
    "fednova-momentum": dict(color=ALGORITHM_COLORS["fednova"], ls="-."),
    "fedavg-servermom": dict(color="C9", ls="-"),
    "fednova-servermom": dict(color="C6", ls="--"),
    "fedavg-hybrid": dict(color="C7", ls="-"),
    "fednova-hybrid": dict(color="C8", ls="--"),
}


def _variant(name: str, label: str = "name") -> Variant:
    """Variant ``name`` of :data:`VARIANTS`; a ``ValueError`` naming ``label`` (the caller's parameter) otherwise."""
    check_choice(label, name, tuple(VARIANTS))
    return VARIANTS[name]


def _check_coefficients(local_momentum: float, server_beta: float) -> tuple[float, float]:
    rho = check_in_range("local_momentum", local_momentum, 0.0, 1.0)
    beta = check_in_range("server_beta", server_beta, 0.0, 1.0)
    if rho >= 1 or beta >= 1:
        raise ValueError(f"local_momentum and server_beta must be < 1, got {local_momentum!r}, {server_beta!r}")
    return rho, beta


def make_variant(name: str, lr: float, *, local_momentum: float = 0.9, server_beta: float = 0.9) -> FederatedAlgorithm:
    r"""The :class:`~fedlib.algorithms.FederatedAlgorithm` of variant ``name``: local GD at
    step ``lr`` (heavy ball :math:`\rho` = ``local_momentum`` where the variant has local
    momentum), server momentum :math:`\beta` = ``server_beta`` where it has server momentum."""
    v = _variant(name)
    lr = check_positive("lr", lr)
    rho, beta = _check_coefficients(local_momentum, server_beta)
    solver = momentum_sgd(lr, rho) if v.local_momentum and rho > 0 else sgd(lr)
    server = server_momentum(beta) if v.server_momentum else None
    return make_algorithm(v.algorithm, solver, server)


class RoundMap(NamedTuple):
    r"""One round as :math:`s \mapsto Ms + b` on the variant's state :math:`s`: the model
    :math:`x` (``s[:dim]``), then the control variates :math:`c_1..c_m` (VR variants), then
    :math:`x_{t-1}` (server momentum). ``M`` is the (n, n) linear part and ``b`` the (n,) offset, with
    :math:`n = d` (plus :math:`md` with VR, plus :math:`d` with server momentum); ``dim`` is :math:`d`."""

    M: np.ndarray
    b: np.ndarray
    dim: int


def variant_round_map(problem: QuadraticProblem, name: str, lr: float, local_steps: Any, *,
                      local_momentum: float = 0.9, server_beta: float = 0.9) -> RoundMap:
    r"""Closed form of one round of variant ``name`` with the clients' ``local_steps``
    (full participation, full-batch local GD), from :mod:`fedlib.theory`.

    ``problem`` is a :class:`~fedlib.problems.quadratic.QuadraticProblem`, ``name`` a key of :data:`VARIANTS`,
    ``lr`` :math:`\eta > 0` and ``local_steps`` the (m,) :math:`\tau_i` (whole numbers :math:`\ge 1`).
    ``local_momentum`` :math:`\rho` and ``server_beta`` :math:`\beta` (default 0.9 each) must lie in [0, 1); each
    acts only in a variant that has that momentum (:class:`Variant`)."""
    check_instance("problem", problem, QuadraticProblem)
    return _variant_round_map_terms(problem, name, lr, local_steps, local_momentum, server_beta)[0]


def _variant_round_map_terms(problem: QuadraticProblem, name: str, lr: float, local_steps: Any,
                             local_momentum: float = 0.9,
                             server_beta: float = 0.9) -> tuple[RoundMap, np.ndarray, np.ndarray, np.ndarray]:
    r""":func:`variant_round_map`, and ``(M, A, b)`` of the round map without server momentum (at a fixed point
    :math:`x_{t-1} = x_t`, so server momentum moves no fixed point), :math:`A = \sum_i c_i K_i H_i` the
    :math:`x`-block of :math:`I - M` summed apart, which :math:`I - M` cancels at a small ``lr`` (FedAvg's limit
    was 1.6e-9 relative off at :math:`\eta = 10^{-8}` on 4 clients, with server momentum 4.5e-9): the fixed-point
    system is :math:`A` itself, or with control variates ``theory._vr_fixed_point_system(M, A)``."""
    v = _variant(name)
    lr = check_positive("lr", lr)
    rho, beta = _check_coefficients(local_momentum, server_beta)
    rho = rho if v.local_momentum else 0.0
    steps = check_local_steps("local_steps", local_steps, size=problem.num_clients)
    if v.algorithm in VR_ALGORITHMS:
        M, A, b = _vr_round_map_terms(problem.H, problem.e, problem.p, steps, lr, v.algorithm, 0.0, rho, None)
    else:
        M, A, b = _round_map_terms(problem.H, problem.e, problem.p, steps, lr, v.algorithm, 0.0, None, rho)
    if v.server_momentum:
        return RoundMap(*server_momentum_round_map(M, b, beta, dim=problem.dim), problem.dim), M, A, b
    return RoundMap(M, b, problem.dim), M, A, b


def initial_state(problem: QuadraticProblem, name: str, x0: Any = None) -> np.ndarray:
    r"""The state at round 0 of :func:`variant_round_map`: :math:`x_0` (default 0), zero
    variates (the first round is uncorrected, as in :mod:`fedlib.variance`), and
    :math:`x_{-1} = x_0` (server momentum buffer 0). ``x0`` must be a finite vector of the
    problem's dimension (as :func:`run_variant` requires). ``name`` is a key of :data:`VARIANTS`."""
    check_instance("problem", problem, QuadraticProblem)
    v = _variant(name)
    d = problem.dim
    x0 = np.zeros(d) if x0 is None else check_finite_array("x0", x0, shape=(d,))
    parts = [x0]
    if v.algorithm in VR_ALGORITHMS:
        parts.append(np.zeros(d * problem.num_clients))
    if v.server_momentum:
        parts.append(x0)
    return np.concatenate(parts)


def variant_radius(problem: QuadraticProblem, name: str, lr: float, local_steps: Any, **coefficients) -> float:
    """Spectral radius of :func:`variant_round_map` (< 1: the rounds converge, at this rate); ``inf`` when the
    map itself overflows float64 (an ``lr`` far too large). ``problem``, ``name``, ``lr``, ``local_steps`` and the
    ``coefficients`` (``local_momentum``, ``server_beta``) are :func:`variant_round_map`'s."""
    check_instance("problem", problem, QuadraticProblem)
    return _radius_or_inf(variant_round_map(problem, name, lr, local_steps, **coefficients).M)


def variant_limit(problem: QuadraticProblem, name: str, lr: float, local_steps: Any, **coefficients) -> np.ndarray:
    r"""Closed-form limit of :math:`x` under fixed ``local_steps`` (solve :math:`(I-M)s = b` for the round map
    without server momentum, which moves no fixed point, with the :math:`x`-block of :math:`I - M`,
    :math:`\sum_i c_i K_i H_i`, summed apart: :math:`I - M` cancels it at a small ``lr``).

    Raises for ``vrlsgd`` (its limit depends on the start: it conserves
    :math:`\sum_i p_i\tau_i c_i`) and when the round map does not contract (a ``ValueError`` naming ``lr``).
    ``problem``, ``name``, ``lr``, ``local_steps`` and the ``coefficients`` are :func:`variant_round_map`'s."""
    check_instance("problem", problem, QuadraticProblem)
    return _limit_and_radius(problem, name, lr, local_steps, **coefficients)[0]


def vr_limit(problem: QuadraticProblem, name: str, local_steps: Any = None, weights: Any = None) -> np.ndarray:
    r"""Where the model of a variance-reduced variant converges, at every learning rate: full participation,
    full-batch local GD (with or without local momentum), zero initial variates, the weights :math:`p_i` of
    ``weights`` (default ``problem.p``), and a round map that contracts (:func:`variant_radius` < 1; VRLSGD: on
    every direction but its conserved one). ``name`` is a variance-reduced variant (``vrlsgd``, ``scaffold``,
    ``fednova-vr``, ``fednova-vr-momentum``; another is a ``ValueError``).

    * SCAFFOLD and FedNova-VR (``scaffold``, ``fednova-vr``, ``fednova-vr-momentum``): :math:`x^* =
      (\sum_i p_iH_i)^{-1}\sum_i p_ie_i`, the minimiser of :math:`F = \sum_i p_iF_i`. At :math:`x^*` with
      :math:`c_i = \nabla F_i(x^*)` the corrected gradient :math:`\nabla F_i(x) + \sum_j p_jc_j - c_i` is 0 at the
      round's start, so no client moves and every variate stays: that state is a fixed point of every round's map,
      and the limit when the map contracts. The aggregation's weights do not enter; a correction that averaged
      the :math:`c_j` with :math:`1/m` would stop at the minimiser of :math:`\frac1m\sum_j F_j` instead
      (``weights`` = :math:`1/m`).
    * VRLSGD with fixed ``local_steps`` :math:`\tau_i` (its limit depends on the start): its update
      :math:`c_i \leftarrow c_i - (\Delta_i - \sum_j p_j\Delta_j)/(\eta\tau_i)` conserves :math:`\sum_i p_i\tau_ic_i`,
      0 from zero variates, and :math:`\bar c = 0`, so its fixed point (:math:`c_i = \nabla F_i(x)`, no client
      moves) has :math:`\sum_i p_i\tau_i\nabla F_i(x) = 0`: the minimiser of :math:`\sum_i p_i\tau_iF_i`, FedAvg's
      small-:math:`\eta` surrogate (chapter 2).

    Chapter 10 asserts that the library's runs end there (part 2's unequal-weights check, :math:`p_i \propto i`).

    Example
    -------
    Scalar clients :math:`H_i = 1`, :math:`e = (1, -1)`, :math:`p = (3/4, 1/4)`: :math:`x^* = 1/2` for SCAFFOLD,
    :math:`0` with :math:`1/m` weights; VRLSGD with :math:`\tau = (1, 3)` weighs both clients by
    :math:`p_i\tau_i = 3/4` and stops at 0:

    >>> prob = QuadraticProblem(np.ones((2, 1, 1)), np.array([[1.0], [-1.0]]), np.array([0.75, 0.25]))
    >>> vr_limit(prob, "scaffold").tolist(), vr_limit(prob, "scaffold", weights=[0.5, 0.5]).tolist()
    ([0.5], [0.0])
    >>> vr_limit(prob, "vrlsgd", [1, 3]).tolist()
    [0.0]
    """
    check_instance("problem", problem, QuadraticProblem)
    v = _variant(name)
    if v.algorithm not in VR_ALGORITHMS:
        vr = tuple(n for n, x in VARIANTS.items() if x.algorithm in VR_ALGORITHMS)
        raise ValueError(f"name must be a variance-reduced variant {vr}, got {name!r} (variant_limit gives the "
                         "others' limits)")
    if weights is not None:  # QuadraticProblem would name them 'p', which here is problem.p
        weights = check_probability_vector("weights", weights, size=problem.num_clients)
    p = problem.p if weights is None else QuadraticProblem(problem.H, problem.e, weights).p
    if v.algorithm == "vrlsgd":
        if local_steps is None:
            raise ValueError("local_steps: VRLSGD's limit depends on the fixed local steps tau_i; give them")
        p = p * check_local_steps("local_steps", local_steps, size=problem.num_clients)
        p = p / p.sum()
    elif local_steps is not None:
        check_local_steps("local_steps", local_steps, size=problem.num_clients)  # unused, but a wrong one is a mistake
    return quadratic_global_optimum(problem.H, problem.e, p)


def _limit_and_radius(problem: QuadraticProblem, name: str, lr: float, local_steps: Any,
                      **coefficients) -> tuple[np.ndarray, float]:
    """:func:`variant_limit` and :func:`variant_radius` from one round map."""
    state, rho, rm = _fixed_state_and_radius(problem, name, lr, local_steps, **coefficients)
    return state[:rm.dim], rho


def _fixed_state_and_radius(problem: QuadraticProblem, name: str, lr: float, local_steps: Any,
                            **coefficients) -> tuple[np.ndarray, float, RoundMap]:
    """The whole fixed state :math:`s^*` of the round map (model, variates, :math:`x_{t-1} = x^*` with server
    momentum), its spectral radius and the :class:`RoundMap`; a radius >= 1 is a ``ValueError``."""
    variant = _variant(name)
    algorithm = variant.algorithm
    if algorithm == "vrlsgd":
        raise ValueError(f"name: VRLSGD's limit depends on its initial variates, got {name!r}; iterate the round maps "
                         "(iterate_round_maps, run_variant)")
    check_instance("problem", problem, QuadraticProblem)
    rm, M, A, b = _variant_round_map_terms(problem, name, lr, local_steps, **coefficients)
    rho = _radius_or_inf(rm.M)
    if rho >= 1:
        raise ValueError(f"lr: the rounds of {name} do not converge (spectral radius {rho:.4g} >= 1)")
    system = _vr_fixed_point_system(M, A) if algorithm in VR_ALGORITHMS else A
    state = np.linalg.solve(system, b)
    if variant.server_momentum:  # x_{t-1} = x_t at the fixed point
        state = np.concatenate([state, state[:rm.dim]])
    return state, rho, rm


def iterate_round_maps(problem: QuadraticProblem, name: str, lr: float, schedule, rounds: int, *, x0: Any = None,
                       reference: Any = None, stop_above: Optional[float] = None, **coefficients) -> np.ndarray:
    r"""Distances :math:`\|x_t - x_{\text{ref}}\|`, :math:`t = 0..T`, from iterating the
    closed-form round maps with the schedule's :math:`\tau_i^{(t)}` (a new map per round
    when the steps change) — what :func:`run_variant` should measure. With ``stop_above``
    the iteration ends after the first distance above it (as :func:`run_variant` does).
    ``x0`` and ``reference`` must be finite vectors of the problem's dimension, as for
    :func:`run_variant`; ``name``, ``lr`` and the ``coefficients`` are :func:`variant_round_map`'s, and ``rounds``
    :math:`T` is an integer >= 0."""
    return _iterate_round_maps(problem, name, lr, schedule, rounds, x0=x0, reference=reference,
                               stop_above=stop_above, **coefficients)[0]


def _iterate_round_maps(problem: QuadraticProblem, name: str, lr: float, schedule, rounds: int, *, x0: Any = None,
                        reference: Any = None, stop_above: Optional[float] = None, keep_round: Optional[int] = None,
                        **coefficients) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """:func:`iterate_round_maps`' distances and the model :math:`x_t` at round ``keep_round`` (``None`` when not
    asked for or not reached)."""
    check_instance("problem", problem, QuadraticProblem)
    check_schedule_size(schedule, problem.num_clients, "the problem")
    rounds = check_int("rounds", rounds, minimum=0)
    if stop_above is not None:
        stop_above = check_positive("stop_above", stop_above)
    ref = problem.optimum() if reference is None else check_finite_array("reference", reference, shape=(problem.dim,))
    s = initial_state(problem, name, x0)
    d = problem.dim
    out = [float(_scaled_norm(s[:d] - ref))]  # np.linalg.norm's: inf past ~1.3e154, as run_variant's was
    kept = s[:d] if keep_round == 0 else None
    if stop_above is not None and not out[0] <= stop_above:  # run_variant checks the start too
        return np.asarray(out), kept
    cache: dict = {}
    for t in range(rounds):
        steps = round_local_steps(schedule, t, problem.num_clients, "the problem")
        key = steps.tobytes()
        if key not in cache:
            if len(cache) > 256:
                cache.clear()
            cache[key] = variant_round_map(problem, name, lr, steps, **coefficients)
        rm = cache[key]
        with np.errstate(over="ignore", invalid="ignore"):  # a diverging map: inf / NaN distances, as run_variant's
            s = rm.M @ s + rm.b
            out.append(float(_scaled_norm(s[:d] - ref)))
        if t + 1 == keep_round:
            kept = s[:d]
        if stop_above is not None and not out[-1] <= stop_above:
            break
    return np.asarray(out), kept


def run_variant(problem: QuadraticProblem, name: str, lr: float, schedule, rounds: int, *, x0: Any = None,
                reference: Any = None, stop_above: Optional[float] = None, local_momentum: float = 0.9,
                server_beta: float = 0.9) -> QuadraticRun:
    r"""Run variant ``name`` with the library's algorithm (:func:`make_variant` through
    ``fedlib.experiments.quadratic.run_quadratic``); distances to ``reference``
    (default :math:`x^*`) after every round; divergence stops the run and marks it.

    ``problem`` is a :class:`~fedlib.problems.quadratic.QuadraticProblem`, ``name`` a key of :data:`VARIANTS`,
    ``lr`` :math:`\eta > 0`; ``schedule`` gives the :math:`\tau_i^{(t)}` of every round (e.g.
    :class:`~fedlib.schedules.FixedSteps`) over ``rounds`` :math:`T` (an integer >= 0); ``x0`` (default 0) and
    ``stop_above`` are ``run_quadratic``'s. ``local_momentum`` :math:`\rho` and ``server_beta`` :math:`\beta`
    (default 0.9 each, in [0, 1)) are :func:`make_variant`'s."""
    check_instance("problem", problem, QuadraticProblem)
    algo = make_variant(name, lr, local_momentum=local_momentum, server_beta=server_beta)
    return run_quadratic(problem, name, lr, schedule, rounds, x0=x0, reference=reference, stop_above=stop_above,
                         algorithm=algo)


def measured_rate(distances: Sequence[float], start: int, stop: Optional[int] = None) -> float:
    r"""Per-round contraction measured on ``distances[start:stop]``: :math:`e^s`, with :math:`s`
    the least-squares slope of :math:`\log\delta_t` against :math:`t` (a fit rather than the two
    end points, so that the oscillation of complex eigenvalues, e.g. with server momentum,
    averages out). To compare with a spectral radius, take ``start`` past the transient and
    ``stop`` before rounding error, distances to the limit."""
    d = np.asarray(distances, dtype=np.float64)
    if d.ndim != 1:  # a (1, T) array failed in np.polyfit ("expected x and y to have same length")
        raise ValueError(f"distances must be a 1-d sequence (one distance per round), got shape {d.shape}")
    stop = d.size if stop is None else check_int("stop", stop)  # 2.5 failed as a slice index
    start = check_int("start", start, minimum=0)
    if not 0 <= start < stop - 1 <= d.size - 1:
        raise ValueError(f"need 0 <= start < stop - 1 <= {d.size - 1}, got start={start}, stop={stop}")
    window = d[start:stop]
    if not np.all(np.isfinite(window) & (window > 0)):
        raise ValueError(f"distances[{start}:{stop}] must be finite and > 0")
    return float(np.exp(np.polyfit(np.arange(start, stop), np.log(window), 1)[0]))


class Comparison(NamedTuple):
    r"""A run of the library (:func:`run_variant`) next to its closed form
    (:func:`iterate_round_maps`): both distance series and their largest difference.

    ``name`` is the variant; ``max_difference`` and ``max_relative_difference`` are as in
    :func:`compare_with_closed_form` (NaN when a distance is); ``final_relative_difference`` compares the models
    themselves, not their distances: :math:`\|x_T^{\text{run}} - x_T^{\text{closed}}\|` at the last round both
    reached, relative to :math:`\max(\|x^*\|, \|x_T^{\text{closed}} - x^*\|)` (a distance can agree where the
    model does not: any point of the sphere around :math:`x^*`)."""

    name: str
    run: QuadraticRun
    closed: np.ndarray
    max_difference: float
    max_relative_difference: float
    final_relative_difference: float = float("nan")


def compare_with_closed_form(problem: QuadraticProblem, name: str, lr: float, schedule, rounds: int, *,
                             stop_above: Optional[float] = None, **coefficients) -> Comparison:
    r"""Run variant ``name`` and iterate its closed-form round maps over the same rounds
    (distances to :math:`x^*`); ``max_difference`` over the rounds the run completed, and
    ``max_relative_difference``, each round's difference divided by
    :math:`\max(\|x^*\|, \text{distance})` (for runs that grow); ``final_relative_difference``, the last models
    themselves (:class:`Comparison`). ``rounds`` >= 1: with 0 the
    comparison is of the common start alone, a difference of 0 that checks no round map.
    ``problem``, ``lr``, ``schedule``, ``stop_above`` and the ``coefficients`` are :func:`run_variant`'s (the closed
    form stops at the same ``stop_above``)."""
    check_instance("problem", problem, QuadraticProblem)
    rounds = check_int("rounds", rounds, minimum=1)
    run = run_variant(problem, name, lr, schedule, rounds, stop_above=stop_above, **coefficients)
    last = run.distances.size - 1  # run.params is x_t at this round
    closed, closed_x = _iterate_round_maps(problem, name, lr, schedule, rounds, stop_above=stop_above,
                                           keep_round=last, **coefficients)
    n = min(run.distances.size, closed.size)
    x_star = problem.optimum()
    with np.errstate(invalid="ignore", over="ignore"):
        scale = np.linalg.norm(x_star)
        gap = np.abs(run.distances[:n] - closed[:n])
        rel = gap / np.maximum(scale, closed[:n])
        final = float("nan")  # the closed form stopped before the run's last round: no common last model
        if closed_x is not None:
            final = float(_scaled_norm(np.asarray(run.params, dtype=float).ravel() - closed_x)
                          / max(scale, float(_scaled_norm(closed_x - x_star))))
    return Comparison(name, run, closed, float(np.max(gap)), float(np.max(rel)), final)


class RateCheck(NamedTuple):
    r"""The spectral radius of a variant's round map next to the per-round contraction of
    its run towards the closed-form limit (``measured``, on rounds ``window``), and the
    limit's distance to :math:`x^*` (``limit_distance``). ``name`` is the variant.

    ``predicted`` is the contraction of the closed form from the same start on the same window:
    :func:`measured_rate` of :math:`\|[M^t(s_0 - s^*)]_x\|` (:math:`s^*` the fixed state, :math:`[\cdot]_x` the
    model block), which has no rounding floor (:math:`M^t e` is iterated without adding :math:`b`). ``asymptotic``
    is the contraction of that same error over :math:`T = 2^{30}` rounds,
    :math:`(\|[M^T(s_0 - s^*)]_x\| / \|[s_0 - s^*]_x\|)^{1/T}` (Gelfand: it tends to the spectral radius,
    whatever modes share its modulus), with :math:`M^T` from 30 normalised squarings.

    A finite window blends the slowest modes with the next ones (several eigenvalues of the same modulus beat, as
    server momentum's :math:`|r| = \sqrt\beta` do), so ``measured`` may sit a few per cent from ``radius``:
    ``measured`` = ``predicted`` says the run contracts as its closed form does, ``asymptotic`` = ``radius`` that the
    closed form's contraction is the radius (chapter 10, part 3).

    ``closest`` is the run's smallest distance to that limit relative to its first, :math:`\min_t\|x_t - \tilde
    x\| / \|x_0 - \tilde x\|`: the limit is solved from the round map *without* server momentum (which moves no
    fixed point, :func:`variant_limit`), so with server momentum a ``closest`` at rounding level (below ``floor``)
    is the run's own evidence that it ends there, not a property of how the limit was computed."""

    name: str
    radius: float
    measured: float
    window: tuple
    limit_distance: float
    predicted: float
    asymptotic: float
    closest: float = float("nan")


#: The number of squarings behind ``RateCheck.asymptotic``, :math:`\log_2 T` of its :math:`T = 2^{30}` rounds.
ASYMPTOTIC_SQUARINGS = 30


def _closed_form_rates(M: np.ndarray, error: np.ndarray, dim: int, start: int, stop: int) -> tuple[float, float]:
    """``predicted`` and ``asymptotic`` of :class:`RateCheck` for the error ``error`` = :math:`s_0 - s^*`."""
    norms = [_scaled_norm(error[:dim])]
    e = error
    for _ in range(stop - 1):  # distances 0 .. stop - 1, as the run's window reads them
        e = M @ e
        norms.append(_scaled_norm(e[:dim]))
    predicted = measured_rate(norms, start, stop)
    # M^T = exp(log_scale) P, squared and renormalised: no overflow nor underflow however small the radius
    log_scale, P = 0.0, M
    for _ in range(ASYMPTOTIC_SQUARINGS):
        n = float(np.linalg.norm(P))
        P, log_scale = P / n, log_scale + math.log(n)
        P, log_scale = P @ P, 2 * log_scale
    rounds = 2 ** ASYMPTOTIC_SQUARINGS
    end = _scaled_norm((P @ error)[:dim])
    asymptotic = math.exp((log_scale + math.log(end) - math.log(norms[0])) / rounds) if end > 0 else 0.0
    return predicted, asymptotic


def rate_check(problem: QuadraticProblem, name: str, lr: float, local_steps: Any, rounds: int, *,
               floor: float = 1e-12, **coefficients) -> RateCheck:
    r"""Run ``name`` with fixed ``local_steps`` and measure its contraction towards
    :func:`variant_limit`: from the middle of the rounds before the distance fell below
    ``floor`` times the first one (rounding error) to that round; next to it, the closed form's contraction on the
    same window and over :math:`2^{30}` rounds (:class:`RateCheck`). Runs at most ``rounds``
    rounds, and not much more than the spectral radius says the floor needs. ``problem``, ``name``, ``lr``,
    ``local_steps`` and the ``coefficients`` are :func:`variant_limit`'s (a spectral radius of 0 is a ``ValueError``
    naming ``lr``: no rate to measure); ``rounds`` >= 2 and ``floor`` in (0, 1)."""
    check_instance("problem", problem, QuadraticProblem)
    rounds = check_int("rounds", rounds, minimum=2)
    try:  # one message for both ends: 1.0 read 'must lie in [0.0, 1.0)', 0.0 '(0, 1)'
        checked = check_in_range("floor", floor, 0.0, 1.0)
    except ValueError:
        checked = 0.0
    if checked == 0:
        raise ValueError(f"floor must lie in (0, 1), got {plain(floor)!r}")
    floor = checked
    state, radius, rm = _fixed_state_and_radius(problem, name, lr, local_steps, **coefficients)
    limit = state[:rm.dim]
    if radius == 0:
        raise ValueError(f"lr: the round map of {name} has spectral radius 0 (one round reaches the limit): "
                         "there is no rate to measure")
    # no need to run far past the floor: about log(floor)/log(radius) rounds, with a margin for the transient
    rounds = min(rounds, max(20, math.ceil(1.5 * math.log(floor) / math.log(radius)) + 20))
    run = run_variant(problem, name, lr, FixedSteps(local_steps), rounds, reference=limit, **coefficients)
    d = run.distances
    below = np.flatnonzero(d < floor * d[0])
    stop = int(below[0]) + 1 if below.size else d.size
    start = stop // 2
    predicted, asymptotic = _closed_form_rates(rm.M, initial_state(problem, name) - state, rm.dim, start, stop)
    return RateCheck(name, radius, measured_rate(d, start, stop), (start, stop),
                     float(np.linalg.norm(limit - problem.optimum())), predicted, asymptotic, float(np.min(d) / d[0]))


def limit_distances(problem: QuadraticProblem, names: Sequence[str], lrs: Sequence[float], local_steps: Any,
                    **coefficients) -> dict:
    r"""``{name: array}`` of :math:`\|\tilde x(\eta) - x^*\|` over the learning rates ``lrs``
    (closed-form limits, :func:`variant_limit`). ``names`` and ``lrs`` may be any iterables (each is read once).
    ``problem`` and the ``coefficients`` are :func:`variant_limit`'s; ``local_steps``, the (m,) :math:`\tau_i`, is
    the same at every rate."""
    check_instance("problem", problem, QuadraticProblem)
    names = check_sequence("names", names, "variant names")
    for k, n in enumerate(names):  # else refused inside variant_limit as 'name', a parameter this function lacks
        if _variant(n, f"names[{k}]").algorithm == "vrlsgd":
            raise ValueError(f"names[{k}]: VRLSGD's limit depends on its initial variates, got {n!r}; iterate the "
                             "round maps (iterate_round_maps, run_variant)")
    lrs = check_sequence("lrs", lrs, "learning rates")  # read once: a generator gave the second name no rates
    x_star = problem.optimum()
    return {n: np.array([np.linalg.norm(variant_limit(problem, n, lr, local_steps, **coefficients) - x_star)
                         for lr in lrs]) for n in names}


#: Chapter 10's "zero up to rounding" threshold for a distance to :math:`x^*`, relative to
#: :math:`\|x^*\|`: the chapter asserts the VR variants' limits and runs within it, and
#: :func:`limit_distances_to_draw` draws any smaller distance at it.
ROUNDING_THRESHOLD = 1e-10


def limit_distances_to_draw(distances: dict, scale: float, relative_floor: float = ROUNDING_THRESHOLD) -> dict:
    r"""The distances of :func:`limit_distances` as chapter 10 draws them on a log axis: every
    :math:`\|\tilde x(\eta) - x^*\|` below :math:`f\,s` (``relative_floor`` :math:`f`, ``scale``
    :math:`s = \|x^*\|`) is replaced by :math:`f\,s`; larger ones are kept as they are.

    A variant whose limit is :math:`x^*` (SCAFFOLD, FedNova-VR) has a closed-form distance of a
    few :math:`10^{-14}`, the rounding error of solving the limit's linear system. Its last bits
    change with the number of BLAS threads and with any reordering of the arithmetic, and drawn as
    they are they set the log axis' lower end, so the whole figure moved with them. At the floor
    such a curve is flat, and the figure depends only on distances above it.

    Raises ``ValueError`` for a ``scale`` that is not finite and > 0, a ``relative_floor`` outside
    (0, 1), or a distance that is negative or not finite.
    """
    scale = check_positive("scale", scale)
    relative_floor = check_positive("relative_floor", relative_floor)
    if relative_floor >= 1:
        raise ValueError(f"relative_floor must lie in (0, 1), got {relative_floor!r}")
    floor = relative_floor * scale
    drawn = {}
    for name, values in distances.items():
        values = check_finite_array(f"distances[{name!r}]", values)
        if np.any(values < 0):
            raise ValueError(f"distances[{name!r}] must be >= 0 (norms), got {float(values.min())!r}")
        drawn[name] = np.maximum(values, floor)
    return drawn


def logistic_losses(problem, name: str, lr: float, schedule, seeds: Sequence[int], rounds: int, *,
                    batch_size: int = 20, **coefficients) -> np.ndarray:
    r"""Beyond quadratics: variant ``name`` on a :class:`~fedlib.problems.logistic.LogisticProblem`
    (e.g. Synthetic(1,1)) with mini-batches, through the batched engine
    (:func:`fedlib.engines.batched.run_batched`), full participation. Returns the global
    training loss :math:`F(x)` of every seed and round, ``(len(seeds), rounds + 1)``, the
    initial loss first. ``seeds``: a non-empty sequence of integers >= 0 (run seeds). ``problem`` is the
    logistic problem trained; ``lr`` (:math:`\eta > 0`) and the ``coefficients`` are :func:`make_variant`'s;
    ``schedule`` gives the :math:`\tau_i^{(t)}` (e.g. an epoch schedule of the clients' sizes and ``batch_size``),
    ``batch_size`` is :math:`B` (default 20) and ``rounds`` >= 1."""
    check_instance("problem", problem, LogisticProblem)
    rounds = check_int("rounds", rounds, minimum=1)
    seeds = [check_int("seeds", seed) for seed in seeds]
    if not seeds:
        raise ValueError("seeds must hold at least one run seed, got none")
    out = []
    for seed in seeds:
        run = run_batched(make_variant(name, lr, **coefficients), problem, schedule, rounds, batch_size=batch_size,
                          seed=seed)
        out.append([run.initial["train_loss"]] + [h["train_loss"] for h in run.history])
    return np.asarray(out)


# --------------------------------------------------------------------------- linearised VR at x*
class LogisticOptimum(NamedTuple):
    r"""The minimiser :math:`x^*` of :math:`F = \sum_i p_i F_i` of a logistic problem and
    what the VR rounds look like there.

    ``theta``: :math:`x^*` packed and flattened (the bias centred over the classes);
    ``client_grads``: :math:`\nabla F_i(x^*)`, ``(m, P)`` (SCAFFOLD's and FedNova-VR's
    fixed-point variates); ``grad_norm``: :math:`\|\nabla F(x^*)\|`; ``basis``: ``(P, r)``,
    an orthonormal basis of the directions that are not flat (:func:`flat_directions`);
    ``hessians``: :math:`Q^\top\nabla^2 F_i(x^*)Q`, ``(m, r, r)``; ``newton_steps``."""

    theta: np.ndarray
    client_grads: np.ndarray
    grad_norm: float
    basis: np.ndarray
    hessians: np.ndarray
    newton_steps: int


def logistic_optimum(problem, tol: float = 1e-11, max_steps: int = 100) -> LogisticOptimum:
    r""":math:`x^* = \arg\min F` by Newton's method with backtracking, in the coordinates
    orthogonal to the flat directions (where :math:`\nabla^2 F` is positive definite),
    until :math:`\|\nabla F(\theta)\| \le` ``tol`` :math:`\cdot\sum_i p_i\|\nabla F_i(\theta_0)\|`,
    relative to the client gradients at the start :math:`\theta_0` (whose size rounding is
    relative to), so features in other units (the gradient scales with them) stop at the same
    point. Raises if it does not get there in ``max_steps``
    (:func:`~fedlib.experiments.surrogate.newton_minimize` with :math:`w = p`).
    Chapter 10, part 6 (Synthetic(1,1): 21 steps). ``problem`` is a
    :class:`~fedlib.problems.logistic.LogisticProblem` whose every class occurs in the training data (a
    ``ValueError`` otherwise: :func:`~fedlib.experiments.surrogate.unseen_classes`)."""
    from ..problems.logistic import pack_params, unpack_params

    check_instance("problem", problem, LogisticProblem)
    p = np.asarray(problem.p, dtype=np.float64)
    theta, G, Q, steps = newton_minimize(problem, p, tol=tol, max_steps=max_steps, loss=problem.loss,
                                         what="logistic_optimum")
    shape = pack_params(problem.init_params()).shape
    params = unpack_params(theta.reshape(shape))
    hessians = np.array([Q.T @ problem.client_hessian(params, i) @ Q for i in range(problem.num_clients)])
    return LogisticOptimum(theta, G, float(np.linalg.norm(p @ G)), Q, hessians, steps)


#: The VR algorithms whose rounds share the fixed point (x*, grad F_i(x*)) (local GD, full batch).
LINEARISED_VR = ("scaffold", "fednova-vr")


def linearised_vr_radius(problem, optimum: LogisticOptimum, name: str, lr: float, local_steps: Any) -> float:
    r"""Spectral radius of a VR round (``scaffold``, ``fednova-vr``; local GD at step ``lr``,
    fixed ``local_steps``, full participation) linearised at its fixed point
    :math:`(x^*, \nabla F_1(x^*), \dots)`: :func:`fedlib.theory.quadratic_vr_round_operator`
    with :math:`H_i = \nabla^2 F_i(x^*)` (flat directions removed). Above 1, rounds started
    next to :math:`x^*` move away from it (chapter 10, part 6). Near 1, with ill-conditioned
    Hessians, ARPACK can need minutes: the eigenvalues crowd together, and
    :func:`linearised_vr_count_outside` bounds the radius instead.

    ``problem`` gives the :math:`p_i`; ``optimum`` is :func:`logistic_optimum` of it; ``name`` is one of
    :data:`LINEARISED_VR` (another is a ``ValueError``); ``lr`` :math:`\eta > 0`; ``local_steps`` the (m,)
    :math:`\tau_i` (whole numbers :math:`\ge 1`)."""
    from ..theory import quadratic_vr_round_operator

    check_instance("problem", problem, LogisticProblem)
    check_choice("name", name, LINEARISED_VR)
    return spectral_radius(quadratic_vr_round_operator(optimum.hessians, problem.p, local_steps, lr, name))


def linearised_vr_eigenvalues(problem, optimum: LogisticOptimum, name: str, lr: float, local_steps: Any, *,
                              k: int = 4, near: Optional[complex] = None) -> np.ndarray:
    r"""``k`` eigenvalues of the linearised VR round of :func:`linearised_vr_radius`: the largest
    in modulus (``near=None``, :func:`fedlib.theory.leading_eigenvalues`), or those nearest
    ``near`` by shift-invert (:func:`fedlib.theory.quadratic_vr_eigenvalues_near`), which
    finds the crowd next to 1 in seconds where plain Arnoldi takes minutes. Chapter 10, part 6:
    SCAFFOLD's largest are a complex pair outside the unit circle (an oscillation); the
    eigenvalues nearest 1 of both algorithms are :func:`linearised_gd_eigenvalues` at step
    :math:`\eta\bar\tau`. ``problem``, ``optimum``, ``name``, ``lr`` and ``local_steps`` are
    :func:`linearised_vr_radius`'s; ``k`` >= 1."""
    from ..theory import leading_eigenvalues, quadratic_vr_eigenvalues_near, quadratic_vr_round_operator

    check_instance("problem", problem, LogisticProblem)
    check_choice("name", name, LINEARISED_VR)
    if near is None:
        return leading_eigenvalues(quadratic_vr_round_operator(optimum.hessians, problem.p, local_steps, lr, name), k=k)
    return quadratic_vr_eigenvalues_near(optimum.hessians, problem.p, local_steps, lr, name, sigma=near, k=k)


def linearised_vr_count_outside(problem, optimum: LogisticOptimum, name: str, lr: float, local_steps: Any,
                                radius: float, *, deflate: Any = "gradient-descent", max_phase_step: float = 0.4,
                                progress: bool = False):
    r"""How many eigenvalues of the linearised VR round of :func:`linearised_vr_radius` lie
    outside :math:`|\sigma| = r`: :func:`fedlib.theory.quadratic_vr_count_outside` (the argument
    principle on a :math:`2d \times 2d` determinant, no eigensolver) with
    :math:`H_i = \nabla^2 F_i(x^*)`. None outside a circle just above the eigenvalue nearest 1
    pins FedNova-VR's spectral radius, which Arnoldi cannot reach through the crowd of
    eigenvalues next to 1 (chapter 10, part 6; ``scripts/vr_spectrum.py``).

    ``deflate="gradient-descent"`` (the default) hands the count the crowd's approximations,
    gradient descent's eigenvalues at step :math:`\eta\bar\tau`
    (:func:`linearised_gd_eigenvalues`): their phase is followed exactly, which cuts the points
    needed on the circle several-fold (the count is exact for any points); ``None`` or an
    array of points as in :func:`fedlib.theory.quadratic_vr_count_outside`.

    ``problem``, ``optimum``, ``name``, ``lr`` and ``local_steps`` are :func:`linearised_vr_radius`'s; ``radius``
    is :math:`r > 0`. ``max_phase_step`` is the largest change of the determinant's phase, in radians, followed
    between two points of the circle (> 0 and at most 1.5; default 0.4); ``progress`` (``True`` or ``False``) shows a
    progress bar."""
    from ..theory import quadratic_vr_count_outside

    check_instance("problem", problem, LogisticProblem)
    check_choice("name", name, LINEARISED_VR)
    progress = check_flag("progress", progress)  # before the deflation points are computed
    if isinstance(deflate, str):
        check_choice("deflate", deflate, ("gradient-descent",))
        steps = check_local_steps("local_steps", local_steps, size=len(problem.p))
        deflate = linearised_gd_eigenvalues(problem, optimum, lr * float(np.asarray(problem.p) @ steps))
    return quadratic_vr_count_outside(optimum.hessians, problem.p, local_steps, lr, name, radius, deflate=deflate,
                                      max_phase_step=max_phase_step, progress=progress)


def linearised_gd_eigenvalues(problem, optimum: LogisticOptimum, step: float) -> np.ndarray:
    r"""Eigenvalues of gradient descent on :math:`F` at step ``step`` linearised at :math:`x^*`,
    :math:`1 - \text{step}\cdot\lambda_k(\nabla^2F(x^*))` with
    :math:`\nabla^2F = \sum_i p_i\nabla^2F_i` on the non-flat directions, nearest 1 first.

    Chapter 10, part 6 compares them, at step :math:`\eta\bar\tau`
    (:math:`\bar\tau = \sum_ip_i\tau_i`), with the VR rounds' eigenvalues nearest 1. Why they
    should agree: along a direction where :math:`F` is flat the rounds move slowly, last
    round's variates equal this round's mean gradients :math:`\bar g_i` to first order, and
    both SCAFFOLD's step :math:`-\eta\sum_ip_i\tau_i\bar g_i - \eta\sum_ip_i(\bar\tau-\tau_i)c_i`
    and FedNova-VR's :math:`-\eta\bar\tau\sum_ip_i\bar g_i` become
    :math:`-\eta\bar\tau\nabla F`: the one-round lag acts only on the fast modes.

    ``problem`` gives the :math:`p_i` and ``optimum`` (:func:`logistic_optimum`) the Hessians; ``step`` > 0."""
    check_instance("problem", problem, LogisticProblem)
    step = check_positive("step", step)
    hessian = np.einsum("i,ijk->jk", np.asarray(problem.p, dtype=float), optimum.hessians)
    vals = 1.0 - step * np.linalg.eigvalsh(hessian)
    return vals[np.argsort(np.abs(vals - 1.0), kind="stable")]


def linearised_vr_matrix(problem, optimum: LogisticOptimum, name: str, lr: float, local_steps: Any, *,
                         chunk: int = 512) -> np.ndarray:
    r"""The linearised VR round of :func:`linearised_vr_radius` as a dense
    :math:`d(m+1) \times d(m+1)` matrix, formed ``chunk`` columns at a time through the
    operator's block product (17,019 rows, 2.3 GB, about a minute for chapter 10's
    Synthetic(1,1)). For a dense eigensolver: ``scripts/vr_spectrum.py --method dense`` computes
    every eigenvalue of it and writes them for :func:`read_vr_spectrum` (LAPACK did not finish within
    2 h 15 min on 2 cores for that matrix; a 4,743-row one of the same structure takes 44 s on one
    core, so expect hours here, less on a many-core machine). ``problem``, ``optimum``, ``name``, ``lr`` and
    ``local_steps`` are :func:`linearised_vr_radius`'s; ``chunk`` >= 1."""
    from ..theory import quadratic_vr_round_operator

    check_instance("problem", problem, LogisticProblem)
    check_choice("name", name, LINEARISED_VR)
    chunk = check_int("chunk", chunk, minimum=1)
    op = quadratic_vr_round_operator(optimum.hessians, problem.p, local_steps, lr, name)
    n = op.shape[0]
    M = np.empty((n, n))
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        M[:, start:stop] = op.matmat(np.eye(n, stop - start, -start))  # columns start..stop-1 of I
    return M


def spectrum_summary(eigenvalues: Any, *, k: int = 8, slow: float = 0.05) -> dict:
    r"""What chapter 10 reads off a whole spectrum: ``radius`` (largest modulus),
    ``outside_unit_circle`` (how many :math:`|\lambda| > 1`), ``leading`` (the ``k`` largest
    in modulus), ``nearest_one`` (the ``k`` nearest 1), ``slow_count`` (how many lie within
    ``slow`` of 1: the modes that move like gradient descent on :math:`F`) and
    ``fast_radius``, the largest modulus of the others (how fast everything else settles
    or grows per round). Complex numbers as ``[re, im]`` pairs (JSON has none).

    ``eigenvalues``: a non-empty array of finite real or complex numbers (flattened; bools and strings are a
    ``ValueError``); ``k`` >= 1; ``slow`` > 0."""
    # a bool or a string was taken: True as the eigenvalue 1, '0.5' (numpy parses it) as 0.5
    flag = bool_entry(eigenvalues)
    try:
        kind = np.asarray(eigenvalues).dtype.kind
    except (TypeError, ValueError) as exc:  # a ragged list: numpy's "setting an array element with a sequence"
        raise ValueError(f"eigenvalues must be an array of numbers: {exc}") from None
    if flag is not None or kind in "bSUV":
        raise ValueError(f"eigenvalues must be real or complex numbers, got "
                         f"{'the bool ' + repr(bool(flag)) if flag is not None else repr(plain(eigenvalues))}")
    vals = np.asarray(eigenvalues, dtype=complex).reshape(-1)
    if vals.size == 0 or not np.all(np.isfinite(vals)):
        raise ValueError("eigenvalues must be a non-empty array of finite numbers")
    k = check_int("k", k, minimum=1)
    slow = check_positive("slow", slow)
    lead = vals[np.argsort(-np.abs(vals), kind="stable")][:k]
    near = vals[np.argsort(np.abs(vals - 1.0), kind="stable")][:k]
    fast = vals[np.abs(vals - 1.0) >= slow]

    def pairs(z):
        return [[float(v.real), float(v.imag)] for v in z]

    return {"radius": float(np.abs(vals).max()), "outside_unit_circle": int(np.sum(np.abs(vals) > 1.0)),
            "leading": pairs(lead), "nearest_one": pairs(near), "slow": slow,
            "slow_count": int(vals.size - fast.size),
            "fast_radius": float(np.abs(fast).max()) if fast.size else None}


def read_vr_spectrum(folder: Any, name: str) -> tuple[np.ndarray, dict]:
    r"""``(eigenvalues, record)`` written by ``scripts/vr_spectrum.py`` for ``name`` in
    ``folder`` (``<name>.npz`` and its result record ``<name>.json``, with provenance).
    Raises ``ValueError`` if either is missing or they disagree (count, radius)."""
    from pathlib import Path

    from ..results import read_result

    check_choice("name", name, LINEARISED_VR)
    folder = Path(folder)
    record = read_result(folder / f"{name}.json")
    if record.get("kind") != "linearised-spectrum":
        raise ValueError(f"{folder / (name + '.json')}: kind must be 'linearised-spectrum', got {record.get('kind')!r}")
    try:
        with np.load(folder / f"{name}.npz") as npz:
            vals = np.asarray(npz["eigenvalues"], dtype=complex)
    except FileNotFoundError:
        raise ValueError(f"{folder / (name + '.npz')}: file not found (its record is there)") from None
    try:
        rows, radius = record["config"]["rows"], record["summary"]["radius"]
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{folder / (name + '.json')}: not a record of scripts/vr_spectrum.py "
                         f"(no config.rows / summary.radius: {exc!r})") from None
    if vals.size != rows or not math.isclose(float(np.abs(vals).max()), radius, rel_tol=1e-12):
        raise ValueError(f"{folder / (name + '.npz')}: {vals.size} eigenvalues of radius {float(np.abs(vals).max())!r}, "
                         f"but its record says {rows} of radius {radius!r}")
    return vals, record


#: The local-step settings of chapter 10, part 5 (:func:`vr_step_settings`), as ``scripts/vr_spectrum.py --steps``
#: and :func:`read_vr_count` name them.
VR_STEP_SETTINGS = ("e2", "equal", "capped")


def vr_step_settings(num_samples: Any, p: Any, *, batch_size: int = 20, epochs: int = 2,
                     cap: int = 40) -> dict[str, np.ndarray]:
    r"""Chapter 10, part 5's three local-step settings (:data:`VR_STEP_SETTINGS`), fixed per client:

    * ``"e2"``: every client runs ``epochs`` epochs of batch ``batch_size``,
      :math:`\tau_i = E\lceil n_i/B\rceil` (:func:`fedlib.schedules.steps_per_epoch`);
    * ``"equal"``: every client runs the median of those, rounded down. With equal :math:`\tau_i`,
      :math:`\tau_{\text{eff}}p_i/\|a_i\|_1 = p_i` and SCAFFOLD and FedNova-VR are one algorithm;
    * ``"capped"``: ``"e2"``, but the client with the largest :math:`p_i` (the first of them if
      several) stops after :math:`\min(\tau_i, \text{cap})` steps.

    ``num_samples`` are the (m,) :math:`n_i`; ``p`` the (m,) weights (only their argmax is used);
    ``batch_size``, ``epochs`` and ``cap`` integers :math:`\ge 1`. Returns (m,) ``int64`` arrays.

    Example
    -------
    >>> s = vr_step_settings([50, 300, 100], [0.1, 0.6, 0.3], cap=10)
    >>> s["e2"].tolist(), s["equal"].tolist(), s["capped"].tolist()
    ([6, 30, 10], [10, 10, 10], [6, 10, 10])
    """
    from ..schedules import steps_per_epoch

    epochs = check_int("epochs", epochs, minimum=1)
    cap = check_int("cap", cap, minimum=1)
    tau = epochs * steps_per_epoch(np.asarray(num_samples), batch_size)
    p = check_finite_array("p", p)
    if p.shape != tau.shape:
        raise ValueError(f"p must hold one weight per client ({tau.size}), got shape {p.shape}")
    capped = tau.copy()
    big = int(np.argmax(p))
    capped[big] = min(int(tau[big]), cap)
    return {"e2": tau, "equal": np.full(tau.size, int(np.median(tau)), dtype=np.int64), "capped": capped}


def vr_count_path(folder: Any, name: str, steps: str = "e2"):
    """Where ``scripts/vr_spectrum.py --steps <steps>`` writes ``name``'s count in ``folder``:
    ``<name>-count.json`` for ``"e2"``, ``<name>-<steps>-count.json`` for the other
    :data:`VR_STEP_SETTINGS`."""
    from pathlib import Path

    check_choice("name", name, LINEARISED_VR)
    check_choice("steps", steps, VR_STEP_SETTINGS)
    return Path(folder) / (f"{name}-count.json" if steps == "e2" else f"{name}-{steps}-count.json")


def read_vr_count(folder: Any, name: str, steps: str = "e2") -> dict:
    r"""The result record :func:`vr_count_path` written by ``scripts/vr_spectrum.py --method contour``
    in ``folder`` for the local-step setting ``steps`` (:data:`VR_STEP_SETTINGS`; ``config["steps"]``
    must name it, and a record without that field is one of ``"e2"``, the only setting before it):
    ``summary["nearest_one"]`` (the eigenvalue nearest 1, ``[re, im]``),
    ``summary["counts"]`` (per circle: ``radius``, ``outside``, ``inside``, and per phase step
    ``evaluations`` and ``seconds``) and ``summary["radius_bounds"]`` (``[|lambda_1|, r]`` when
    no eigenvalue lies outside the first circle, else ``None``), with provenance. Raises
    ``ValueError`` if it is missing or does not add up."""
    from ..results import read_result

    path = vr_count_path(folder, name, steps)
    record = read_result(path)
    if record.get("kind") != "linearised-count":
        raise ValueError(f"{path}: kind must be 'linearised-count', got {record.get('kind')!r}")
    try:
        rows, summary = record["config"]["rows"], record["summary"]
        counts, nearest, bounds = summary["counts"], summary["nearest_one"], summary["radius_bounds"]
        bad = not counts or any(c["outside"] + c["inside"] != rows or min(c["outside"], c["inside"]) < 0
                                for c in counts)
        first_radius = None if bad else counts[0]["radius"]
        lower = math.hypot(*nearest)
        stored_steps = record["config"].get("steps", "e2")
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a record of scripts/vr_spectrum.py --method contour "
                         f"(a field is missing or of the wrong type: {exc!r})") from None
    if stored_steps != steps:
        raise ValueError(f"{path}: a count for the local steps {stored_steps!r}, not {steps!r}")
    if bad:
        raise ValueError(f"{path}: every count must split the {rows} eigenvalues into outside + inside")
    expected = [lower, first_radius] if counts[0]["outside"] == 0 else None
    if bounds != expected:
        raise ValueError(f"{path}: radius_bounds {summary['radius_bounds']} do not follow from the first count "
                         f"({counts[0]['outside']} outside |sigma| = {counts[0]['radius']})")
    return record


class Perturbation(NamedTuple):
    r"""Rounds of the library started next to :math:`(x^*, \nabla F_i(x^*))`: the distance of
    the state :math:`(x, c_1, \dots, c_m)` to that fixed point after every round (the
    perturbation first) and its per-round growth :func:`measured_rate` on the second half.

    ``name`` is the algorithm; ``distances`` the ``rounds + 1`` distances; ``rate`` the growth per round (> 1: the
    perturbation grows)."""

    name: str
    distances: np.ndarray
    rate: float


def perturbation_growth(problem, optimum: LogisticOptimum, name: str, lr: float, local_steps: Any, rounds: int, *,
                        size: float = 1e-7, seed: int = 0) -> Perturbation:
    r"""Start ``name`` (``scaffold`` or ``fednova-vr``, local GD on each client's full data,
    through :func:`fedlib.engines.reference.run_sequential`) at :math:`x^* + \delta` with the
    fixed-point variates :math:`c_i = \nabla F_i(x^*)`, :math:`\delta` random outside the flat
    directions with :math:`\|\delta\| =` ``size`` (from ``SeedSequence(seed)``), and record how
    the perturbation grows or shrinks over ``rounds`` rounds. Its rate is the measured
    counterpart of :func:`linearised_vr_radius` (while it stays small). Chapter 10, part 6.

    ``problem``, ``optimum``, ``lr`` (:math:`\eta > 0`) and ``local_steps`` are :func:`linearised_vr_radius`'s;
    ``rounds`` >= 2; ``size`` > 0; ``seed`` an integer >= 0."""
    from ..engines.reference import run_sequential
    from ..problems.logistic import pack_params, unpack_params
    from ..variance import control_variates
    from .surrogate import full_batch_grad_fn

    check_instance("problem", problem, LogisticProblem)
    check_choice("name", name, LINEARISED_VR)
    rounds = check_int("rounds", rounds, minimum=2)
    size = check_positive("size", size)
    shape = pack_params(problem.init_params()).shape
    m = problem.num_clients
    steps = check_local_steps("local_steps", local_steps, size=m)
    rng = np.random.default_rng(np.random.SeedSequence(check_int("seed", seed)))
    delta = optimum.basis @ rng.standard_normal(optimum.basis.shape[1])
    algo = make_algorithm(name, sgd(lr))
    variates = control_variates(unpack_params(optimum.client_grads.reshape((m,) + shape)), problem.p, "scaffold")
    state = algo.init(unpack_params((optimum.theta + size * delta / np.linalg.norm(delta)).reshape(shape)), m)
    state = state._replace(variates=variates)
    grad, schedule = full_batch_grad_fn(problem), FixedSteps(steps)

    def distance(s):
        x = pack_params(s.params).ravel() - optimum.theta
        c = pack_params(s.variates.client).reshape(m, -1) - optimum.client_grads
        return math.sqrt(float(x @ x) + float(np.sum(c * c)))

    out = [distance(state)]
    for _ in range(rounds):
        state = run_sequential(algo, None, grad, problem.p, schedule, 1, initial_state=state).state
        out.append(distance(state))
    d = np.asarray(out)
    return Perturbation(name, d, measured_rate(d, rounds // 2))

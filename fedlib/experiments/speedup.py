r"""Theorem 3 (arbitrary local work) and linear speedup, on quadratic clients (chapter 8).

Theorem 3: if client :math:`i` runs any number :math:`\tau_i^{(t)}` of steps of any linear
local solver :math:`a_i^{(t)}` in round :math:`t`, FedNova with
:math:`\eta = \sqrt{m/(\tilde\tau T)}`, :math:`\tilde\tau = \frac1T\sum_t \bar\tau^{(t)}`,
reaches a stationary point of :math:`F = \sum_i p_i F_i` at the rate

.. math::

    \frac1T\sum_{t<T}\mathbb E\,\|\nabla F(x^{(t,0)})\|^2 = \mathcal O\Bigl(\frac{1}{\sqrt{m\tilde\tau T}}\Bigr),

so :math:`\gamma` times more clients need :math:`\gamma` times fewer rounds for the same
error ("linear speedup", §4). FedAvg under the same local work follows the surrogate of
Theorem 1 with weights that change every round; for small :math:`\eta` it averages them,
:math:`w_i \propto p_i\,\mathbb E\|a_i^{(t)}\|_1` (:func:`time_averaged_surrogate`).

Everything here runs :func:`fedlib.engines.quadratic.run_replicas` (tested against the
per-client reference loop) and reports what it measured:

- :func:`consistency_sweep` — full gradients, :math:`T` growing and :math:`\eta` shrinking as
  in Theorem 3: FedNova's distance to :math:`x^*`, FedAvg's distance to :math:`x^*` and to
  the time-averaged surrogate's minimiser :math:`\tilde x`;
- :func:`drawn_weights` — whether the local work actually drawn over :math:`T` rounds gives FedAvg
  the time-averaged weights :math:`\bar w` of :math:`\tilde x`, within :math:`k` standard errors of
  the per-round values;
- :func:`speedup_grid` — noisy gradients, :math:`m` clients made of ``copies`` copies of
  the same base clients (so :math:`F` is the same for every :math:`m`), :math:`T` rounds:
  the left-hand side of Theorem 3 against :math:`m\tilde\tau T`;
- :func:`sampling_grid` — App. G: :math:`q` of the :math:`m` clients per round, sampled
  with replacement :math:`\propto p_i`, :math:`\eta = c\sqrt{q/(\tilde\tau T)}`: the same
  left-hand side against :math:`q\tilde\tau T`, averaged over independent sampling seeds,
  with the effective number of participants
  (:func:`fedlib.sampling.effective_participants`).
- :func:`sampling_step_conditions` — whether a sampling run's step size meets App. G's stated
  step-size conditions (:func:`fedlib.theory.appg_step_conditions`), with the exact :math:`L` and
  :math:`\beta^2` of the quadratic clients.
- :func:`sampling_bias` — full gradients under sampling: where FedNova's averaged iterate
  settles with a fixed :math:`\tau_{\text{eff}}` and with two taken from the sample (the
  library's default and App. H's), against the closed-form limit of
  :func:`fedlib.sampling.expected_server_weights`; :func:`paired_displacement_error` sets a
  choice's displacement from the fixed run of the same seeds against the predicted one.

Example
-------
>>> base, work = base_setup(seed=0)
>>> rows = consistency_sweep(base, work, [50, 200], lr_scale=0.5)
>>> bool(rows[1].fednova_distance < rows[0].fednova_distance)
True
"""
from __future__ import annotations

import math
import time
from typing import Any, Callable, NamedTuple, Optional, Sequence

import numpy as np

from .._validate import (check_choice, check_instance, check_int, check_nonnegative, check_positive,
                         check_probability_vector, check_sequence)
from ..algorithms import make_algorithm
from ..engines.quadratic import client_solvers, noisy_grad_fn, run_replicas
from ..engines.reference import run_sequential
from ..plotting import ALGORITHM_COLORS
from ..problems.quadratic import QuadraticProblem, random_quadratic
from ..rule import AGGREGATIONS
from ..sampling import SAMPLING_SCHEMES, effective_participants, expected_server_weights
from ..schedules import RandomLocalWork, _check_local_work
from ..solvers import LocalSolver, check_shared_lr, decayed_sgd, momentum_sgd, proximal_sgd, sgd
from ..theory import (AppGStepConditions, appg_max_lr, appg_step_conditions, chi_square, quadratic_global_optimum,
                      quadratic_min_beta2, quadratic_smoothness)
from ..tree import _scaled_norm
from . import run_seeds
from .quadratic import surrogate_optimum

__all__ = [
    "SOLVER_NAMES",
    "make_solvers",
    "base_setup",
    "replicate",
    "mean_a_norms",
    "time_averaged_surrogate",
    "DrawnWeights",
    "drawn_weights",
    "theorem3_lr",
    "ConsistencyRow",
    "consistency_sweep",
    "SpeedupRow",
    "speedup_grid",
    "equal_budget_ratios",
    "equal_budget_table",
    "left_out_ratios",
    "left_out_not_above",
    "SamplingRow",
    "participant_mean_steps",
    "population_tau_eff",
    "sampling_grid",
    "SamplingConditions",
    "sampling_step_conditions",
    "TAU_EFF_CHOICES",
    "BiasRow",
    "sampling_bias",
    "bias_row",
    "paired_displacement_error",
    "plot_bias",
    "plot_sampling",
    "sampling_gain",
    "sampling_gain_stderr",
    "sampling_summary",
    "plot_consistency",
    "plot_speedup",
    "summary_markdown",
    "EngineCheck",
    "check_against_reference",
]

#: Labels of the four local solvers of :func:`make_solvers`, in their order.
SOLVER_NAMES = ("SGD", "momentum 0.5", "prox mu=1", "decayed 0.9^k")
BASE_LOW = (1, 2, 4, 8)
BASE_HIGH = (4, 6, 12, 16)


def make_solvers(lr: float, momentum: float = 0.5, mu: float = 1.0, gamma: float = 0.9) -> list[LocalSolver]:
    r"""The four local solvers a client picks from each round (:data:`SOLVER_NAMES`):
    SGD, heavy-ball momentum :math:`\rho`, proximal SGD :math:`\mu`, and SGD with step
    sizes :math:`\eta\gamma^k` — four different :math:`a_i` for the same :math:`\tau_i`. ``lr`` is their shared base
    learning rate :math:`\eta > 0`; ``momentum``, ``mu`` and ``gamma`` are :math:`\rho`, :math:`\mu` and
    :math:`\gamma`."""
    return [sgd(lr), momentum_sgd(lr, momentum), proximal_sgd(lr, mu), decayed_sgd(lr, gamma=gamma)]


def base_setup(seed: int = 0, dim: int = 10, spread: float = 1.0) -> tuple[QuadraticProblem, RandomLocalWork]:
    r"""Four quadratic clients (:func:`fedlib.problems.quadratic.random_quadratic`, equal :math:`p_i`)
    and their local work: client :math:`i` takes :math:`\tau_i^{(t)}` uniform on
    ``[BASE_LOW[i], BASE_HIGH[i]]`` = [1,4], [2,6], [4,12], [8,16] and one of the
    :data:`SOLVER_NAMES`, drawn afresh every round (:class:`fedlib.schedules.RandomLocalWork`).

    ``seed`` (an integer >= 0) seeds both the clients and their local work; ``dim`` is :math:`d \ge 1` and
    ``spread`` > 0 the standard deviation of the local optima (:func:`~fedlib.problems.quadratic.random_quadratic`'s
    arguments)."""
    problem = random_quadratic(len(BASE_LOW), dim, seed=seed, spread=spread)
    return problem, RandomLocalWork(BASE_LOW, BASE_HIGH, num_solvers=len(SOLVER_NAMES), seed=seed)


def replicate(problem: QuadraticProblem, work: RandomLocalWork, copies: int) -> tuple[QuadraticProblem, RandomLocalWork]:
    r"""``copies`` copies of every client (weights :math:`p_i/\text{copies}`): the same
    :math:`F`, ``copies`` times more clients, each drawing its own local work. ``problem`` is a
    :class:`~fedlib.problems.quadratic.QuadraticProblem` and ``work`` its clients'
    :class:`~fedlib.schedules.RandomLocalWork`; ``copies`` is an integer >= 1."""
    check_instance("problem", problem, QuadraticProblem)
    copies = check_int("copies", copies, minimum=1)
    _check_work(problem, work)  # local work for as many clients as the problem: else copies of mismatched pairs
    rep = QuadraticProblem(np.tile(problem.H, (copies, 1, 1)), np.tile(problem.e, (copies, 1)),
                           np.tile(problem.p, copies) / copies)
    return rep, RandomLocalWork(np.tile(work.low, copies), np.tile(work.high, copies), work.num_solvers, work.seed)


def _check_counts(name: str, values: Any) -> list[int]:
    """A non-empty sequence of integers >= 1 (rounds :math:`T`, sample sizes :math:`q`), each checked
    by name: ``int()`` would have truncated 50.7 rounds to 50 without a word."""
    values = check_sequence(name, values, "integers", empty=f"{name} must name at least one value")
    return [check_int(f"{name}[{k}]", v, minimum=1) for k, v in enumerate(values)]


def _local_work(work: Any, num_clients: Optional[int] = None) -> RandomLocalWork:
    r"""``work`` must be local work of uniform ranges (:class:`fedlib.schedules.RandomLocalWork`, or an object with
    its ``low``, ``high``, ``num_solvers``, ``num_clients``, ``mean_steps`` and ``draw``): this module's closed forms
    (:math:`\mathbb E\|a_i\|_1`, :math:`\mathbb E\tau_i`) and :func:`replicate` read them. A ``ValueError`` says
    so, and where a schedule of your own runs, instead of an ``AttributeError`` from inside; with ``num_clients``,
    one naming ``work`` when it is for another number of clients. The check is the one
    :func:`fedlib.experiments.bounds.theorem3_check` makes (``fedlib.schedules._check_local_work``)."""
    return _check_local_work(work, ("low", "high", "num_solvers", "num_clients", "mean_steps", "draw"),
                             "fedlib.experiments.speedup's closed forms, E||a_i||_1 and E tau_i, read its uniform "
                             "ranges low, high and num_solvers", "a schedule of your own with local_steps(round) runs "
                             "in fedlib.engines.quadratic.run_replicas with one solver (pass the tau_eff you computed)",
                             num_clients)


def _check_work(problem: QuadraticProblem, work: RandomLocalWork) -> None:
    _local_work(work, problem.num_clients)


def _factory_solvers(solver_factory: Callable[[float], Sequence[LocalSolver]], lr: float, work: Any) -> list:
    """``solver_factory(lr)`` as a list, one solver per solver number ``work`` draws: a ``ValueError`` naming
    ``solver_factory`` otherwise (the run failed inside, as "work.draw(0): solver numbers must be in 0..0")."""
    solvers = list(solver_factory(lr))
    n = _local_work(work).num_solvers
    if len(solvers) != n:
        raise ValueError(f"solver_factory: work draws among {n} solvers, solver_factory({lr:.4g}) gave "
                         f"{len(solvers)}")
    return solvers


def mean_a_norms(work: RandomLocalWork, solvers: Sequence[LocalSolver]) -> np.ndarray:
    r""":math:`\mathbb E\|a_i^{(t)}\|_1` per client: the closed-form :math:`\|a\|_1` averaged over
    the client's uniform :math:`\tau` range and the uniformly drawn solvers (exact). The solvers
    share one base learning rate (:func:`fedlib.solvers.check_shared_lr`), the unit of every
    :math:`\|a\|_1`. ``work`` is a :class:`~fedlib.schedules.RandomLocalWork` (another schedule is a
    ``ValueError``) and ``solvers`` must number its ``num_solvers``."""
    solvers = check_shared_lr("solvers", solvers)
    if len(solvers) != _local_work(work).num_solvers:
        raise ValueError(f"solvers: work draws among {work.num_solvers} solvers, got {len(solvers)}")
    return np.array([np.mean([s.a_norm(tau) for s in solvers for tau in range(lo, hi + 1)])
                     for lo, hi in zip(work.low, work.high)])


def time_averaged_surrogate(problem: QuadraticProblem, work: RandomLocalWork,
                            solvers: Sequence[LocalSolver]) -> tuple[np.ndarray, np.ndarray]:
    r"""FedAvg's small-:math:`\eta` target under random local work: weights
    :math:`w_i = p_i\bar a_i / \sum_j p_j\bar a_j` with :math:`\bar a_i = \mathbb E\|a_i\|_1`
    (:func:`mean_a_norms`), and :math:`\tilde x = \arg\min \sum_i w_i F_i`. Returns ``(w, x_tilde)``.
    ``problem`` gives the :math:`p_i` and :math:`F_i`; ``work`` (for as many clients) and ``solvers`` are
    :func:`mean_a_norms`'s."""
    check_instance("problem", problem, QuadraticProblem)
    _check_work(problem, work)
    w = problem.p * mean_a_norms(work, solvers)
    w = w / w.sum()
    return w, surrogate_optimum(problem, w)


class DrawnWeights(NamedTuple):
    r"""What :func:`drawn_weights` measured over ``rounds`` rounds of local work: ``expected`` is
    :math:`\bar w` (:func:`time_averaged_surrogate`), ``measured`` :math:`\hat w`, ``stderr`` its standard error
    per client, ``k`` the number of standard errors allowed."""

    rounds: int
    expected: np.ndarray
    measured: np.ndarray
    stderr: np.ndarray
    k: float

    @property
    def z(self) -> np.ndarray:
        r""":math:`(\hat w_i - \bar w_i)/\mathrm{se}_i` per client."""
        return (self.measured - self.expected) / self.stderr

    @property
    def holds(self) -> bool:
        r"""Whether :math:`|\hat w_i - \bar w_i| \le k\,\mathrm{se}_i` for every client."""
        return bool(np.all(np.abs(self.measured - self.expected) <= self.k * self.stderr))


def drawn_weights(problem: QuadraticProblem, work: RandomLocalWork, solvers: Sequence[LocalSolver], rounds: int,
                  k: float = 5.0) -> DrawnWeights:
    r"""Do the local work's first ``rounds`` draws average to FedAvg's time-averaged weights :math:`\bar w`?

    Round :math:`t` of FedAvg moves the server by :math:`\tau_{\text{eff}}^{(t)}\sum_i w_i^{(t)}\eta d_i
    = \sum_i p_i A_i^{(t)}\eta d_i` with :math:`A_i^{(t)} = \|a_i^{(t)}\|_1` (``solvers[s].a_norm(tau)`` of
    ``work.draw(t)``'s :math:`\tau_i^{(t)}` and solver :math:`s`, as :func:`fedlib.engines.quadratic.run_replicas`
    computes it), so over the rounds its weights are the :math:`\tau_{\text{eff}}`-weighted average of the
    per-round ones,

    .. math::

        \hat w_i = \frac{\sum_t \tau_{\text{eff}}^{(t)} w_i^{(t)}}{\sum_t \tau_{\text{eff}}^{(t)}}
        = \frac{p_i \bar A_i}{\sum_j p_j \bar A_j}, \qquad \bar A_i = \frac1T\sum_{t<T} A_i^{(t)},

    which tends to :math:`\bar w_i = p_i\,\mathbb E A_i/\sum_j p_j\,\mathbb E A_j` (:func:`time_averaged_surrogate`,
    the weights of FedAvg's :math:`\tilde x`). (The plain mean :math:`\frac1T\sum_t w_i^{(t)}` tends to
    :math:`\mathbb E\,w_i^{(t)}`, a mean of ratios, which is not :math:`\bar w`.) The rounds draw independently,
    so :math:`\hat w_i` is a ratio of two means; to first order (delta method)
    :math:`\hat w_i - \bar w_i \approx \frac1T\sum_t u_i^{(t)}` with the per-round values

    .. math::

        u_i^{(t)} = \frac{p_i A_i^{(t)} - \hat w_i\,\tau_{\text{eff}}^{(t)}}{\bar\tau_{\text{eff}}},
        \qquad \tau_{\text{eff}}^{(t)} = \sum_j p_j A_j^{(t)}, \quad
        \bar\tau_{\text{eff}} = \frac1T\sum_t\tau_{\text{eff}}^{(t)}

    (their mean is 0 by construction), and the standard error is :math:`\mathrm{se}_i = s_i/\sqrt T`, :math:`s_i`
    the sample standard deviation (``ddof=1``) of the :math:`u_i^{(t)}` actually drawn. The check
    (:attr:`DrawnWeights.holds`) is :math:`|\hat w_i - \bar w_i| \le k\,\mathrm{se}_i` for every client: with the
    default :math:`k = 5` a correct draw fails it with probability about :math:`6\cdot10^{-7}` per client
    (normal tails), while a draw whose :math:`\tau_i` or solver frequencies are off, or a :math:`\bar w` of
    the wrong formula, is caught once its error exceeds a few standard errors. Chapter 8 (the table of the
    clients' local work) runs it over part 1's longest run, at its step size. ``rounds`` >= 2; ``k`` > 0;
    ``problem``, ``work`` and ``solvers`` are :func:`time_averaged_surrogate`'s.

    Example
    -------
    Two clients that always run SGD for 1 and 3 steps: no noise, :math:`\hat w = \bar w = (1/4, 3/4)`:

    >>> from fedlib.problems.quadratic import QuadraticProblem
    >>> from fedlib.schedules import RandomLocalWork
    >>> from fedlib.solvers import sgd
    >>> prob = QuadraticProblem(H=np.ones((2, 1, 1)), e=np.zeros((2, 1)), p=np.array([0.5, 0.5]))
    >>> check = drawn_weights(prob, RandomLocalWork([1, 3], [1, 3]), [sgd(0.1)], 10)
    >>> check.measured, check.expected, check.stderr, check.holds
    (array([0.25, 0.75]), array([0.25, 0.75]), array([0., 0.]), True)
    """
    check_instance("problem", problem, QuadraticProblem)
    _check_work(problem, work)
    rounds = check_int("rounds", rounds, minimum=2)  # a standard deviation needs two rounds
    k = check_positive("k", k)
    expected, _ = time_averaged_surrogate(problem, work, solvers)  # checks the solvers against the work
    solvers = list(solvers)
    cache: dict = {}
    A = np.empty((rounds, problem.num_clients))
    for t in range(rounds):
        steps, numbers = work.draw(t)
        A[t] = [_a_norm_of(solvers, cache, int(s), int(tau)) for tau, s in zip(steps, numbers)]
    Y = problem.p * A                   # p_i A_i^(t)
    tau_eff = Y.sum(axis=1)             # FedAvg's tau_eff^(t)
    measured = Y.mean(axis=0) / tau_eff.mean()
    u = (Y - measured * tau_eff[:, None]) / tau_eff.mean()
    stderr = u.std(axis=0, ddof=1) / math.sqrt(rounds)
    return DrawnWeights(rounds, expected, measured, stderr, float(k))


def _a_norm_of(solvers: Sequence[LocalSolver], cache: dict, number: int, tau: int) -> float:
    key = (number, tau)
    if key not in cache:
        cache[key] = float(solvers[number].a_norm(tau))
    return cache[key]


def theorem3_lr(lr_scale: float, num_clients: int, tau_tilde: float, rounds: int) -> float:
    r"""Theorem 3's step size :math:`\eta = c\sqrt{m/(\tilde\tau T)}` (the theorem's
    :math:`\mathcal O` hides the constant :math:`c`). ``lr_scale`` is :math:`c > 0`, ``num_clients`` :math:`m`
    (an integer >= 1), ``tau_tilde`` :math:`\tilde\tau > 0` and ``rounds`` :math:`T` (an integer >= 1)."""
    check_positive("lr_scale", lr_scale)
    check_int("num_clients", num_clients, minimum=1)
    check_positive("tau_tilde", tau_tilde)
    check_int("rounds", rounds, minimum=1)
    return lr_scale * math.sqrt(num_clients / (tau_tilde * rounds))


def _rms_last_half(values: np.ndarray) -> float:
    half = values.shape[0] // 2
    return float(np.sqrt(np.mean(values[half:] ** 2)))


class ConsistencyRow(NamedTuple):
    r"""One :math:`T` of :func:`consistency_sweep`; distances are RMS over the last half of the rounds.

    ``rounds`` is :math:`T` and ``lr`` its :math:`\eta`; ``fednova_distance`` is FedNova's distance to :math:`x^*`,
    ``fedavg_distance`` and ``fedavg_surrogate_distance`` FedAvg's to :math:`x^*` and to :math:`\tilde x`;
    ``fednova_min_grad2`` and ``fedavg_min_grad2`` are :math:`\min_{0\le t\le T}\|\nabla F(x^{(t,0)})\|^2`;
    ``surrogate_gap`` is :math:`\|x^* - \tilde x\|` and ``floor`` :math:`\|\nabla F(\tilde x)\|^2`."""

    rounds: int
    lr: float
    fednova_distance: float        # to x*
    fednova_min_grad2: float       # min_t ||grad F(x_t)||^2
    fedavg_distance: float         # to x*
    fedavg_surrogate_distance: float  # to x_tilde
    fedavg_min_grad2: float
    surrogate_gap: float           # ||x* - x_tilde||
    floor: float                   # ||grad F(x_tilde)||^2


def consistency_sweep(problem: QuadraticProblem, work: RandomLocalWork, rounds_list: Sequence[int], *,
                      lr_scale: float = 0.5, solver_factory: Callable[[float], Sequence[LocalSolver]] = make_solvers,
                      progress: Optional[Callable[[str], None]] = None) -> list[ConsistencyRow]:
    r"""Full gradients, Theorem 3's :math:`\eta = c\sqrt{m/(\tilde\tau T)}` for each :math:`T`:
    where FedNova and FedAvg end up under arbitrary local work (:math:`\tilde\tau` is
    the expected :math:`\bar\tau`, ``work.mean_steps.mean()``).

    ``problem`` and ``work`` are :func:`time_averaged_surrogate`'s; ``rounds_list`` the :math:`T` (integers >= 1);
    ``lr_scale`` :math:`c > 0`; ``solver_factory`` maps :math:`\eta` to the solvers (one per solver number of
    ``work``; default :func:`make_solvers`). ``progress``, if given, is called with ``"T=..."`` after each
    :math:`T`."""
    check_instance("problem", problem, QuadraticProblem)
    _check_work(problem, work)
    rounds_list = _check_counts("rounds_list", rounds_list)
    tau_tilde = float(work.mean_steps.mean())
    x_star = problem.optimum()
    rows = []
    for T in rounds_list:
        lr = theorem3_lr(lr_scale, problem.num_clients, tau_tilde, int(T))
        solvers = _factory_solvers(solver_factory, lr, work)
        _, x_tilde = time_averaged_surrogate(problem, work, solvers)
        nova = run_replicas(problem, "fednova", solvers, work, int(T))
        avg = run_replicas(problem, "fedavg", solvers, work, int(T), surrogate=x_tilde)
        g = problem.global_grad(x_tilde)
        rows.append(ConsistencyRow(int(T), lr, _rms_last_half(nova.distance[:, 0]), float(nova.grad_norm2[:, 0].min()),
                                   _rms_last_half(avg.distance[:, 0]), _rms_last_half(avg.surrogate_distance[:, 0]),
                                   float(avg.grad_norm2[:, 0].min()), float(np.linalg.norm(x_star - x_tilde)),
                                   float(g @ g)))
        if progress:
            progress(f"T={T}")
    return rows


class SpeedupRow(NamedTuple):
    r"""One cell of :func:`speedup_grid`: ``mean_grad2`` is
    :math:`\frac1T\sum_{t<T}\|\nabla F(x^{(t,0)})\|^2` averaged over the replicas, ``stderr``
    its standard error across them; ``budget`` = :math:`m\tilde\tau T` (measured :math:`\tilde\tau`).
    ``algorithm`` is ``"fedavg"`` or ``"fednova"``, ``clients`` :math:`m`, ``rounds`` :math:`T`, ``tau_tilde`` the
    measured :math:`\tilde\tau` and ``lr`` the cell's :math:`\eta`."""

    algorithm: str
    clients: int
    rounds: int
    tau_tilde: float
    lr: float
    mean_grad2: float
    stderr: float

    @property
    def budget(self) -> float:
        return self.clients * self.tau_tilde * self.rounds


def speedup_grid(problem: QuadraticProblem, work: RandomLocalWork, copies_list: Sequence[int],
                 rounds_list: Sequence[int], *, lr_scale: float = 0.1, sigma: float = 3.0, replicas: int = 8,
                 seed: int = 0, algorithms: Sequence[str] = ("fednova",),
                 solver_factory: Callable[[float], Sequence[LocalSolver]] = make_solvers,
                 progress: Optional[Callable[[str], None]] = None) -> list[SpeedupRow]:
    r"""Noisy gradients (:math:`\sigma`), :math:`m = \text{copies}\times` base clients,
    :math:`T` rounds, :math:`\eta = c\sqrt{m/(\tilde\tau T)}`: Theorem 3's left-hand side for
    every (algorithm, :math:`m`, :math:`T`), ``replicas`` runs each: independent gradient noise,
    the same draws of local work for every replica of a cell (the first :math:`m` clients of a larger
    :math:`m` reuse a smaller one's :math:`\tau_i^{(t)}`, not its solver numbers, which
    :class:`fedlib.schedules.RandomLocalWork` draws after all the steps), so the standard error is
    that of the noise.

    ``problem`` and ``work`` are the base clients (:func:`base_setup`); ``copies_list`` and ``rounds_list`` the
    copies and :math:`T` (integers >= 1); ``lr_scale`` :math:`c > 0`; ``sigma`` :math:`\ge 0`; ``seed`` (an
    integer >= 0) seeds the noise of :func:`~fedlib.engines.quadratic.run_replicas` (the local work draws with
    ``work``'s own seed). ``algorithms`` is a non-empty sequence of ``"fedavg"`` and ``"fednova"`` (a single
    string is a ``ValueError``); ``solver_factory`` as in :func:`consistency_sweep`. ``progress``, if given, is
    called after each cell with its algorithm, :math:`m` and :math:`T`."""
    check_instance("problem", problem, QuadraticProblem)
    check_nonnegative("sigma", sigma)
    _check_work(problem, work)
    copies_list = _check_counts("copies_list", copies_list)
    rounds_list = _check_counts("rounds_list", rounds_list)
    if isinstance(algorithms, str):
        raise ValueError(f"algorithms must be a sequence of names, e.g. ({algorithms!r},), got {algorithms!r}")
    algorithms = [check_choice("algorithms", a, AGGREGATIONS) for a in algorithms]
    if not algorithms:
        raise ValueError("algorithms must name at least one algorithm")
    rows = []
    for copies in copies_list:
        prob, w = replicate(problem, work, copies)
        tau_tilde = float(w.mean_steps.mean())
        for T in rounds_list:
            lr = theorem3_lr(lr_scale, prob.num_clients, tau_tilde, int(T))
            for a in algorithms:
                run = run_replicas(prob, a, _factory_solvers(solver_factory, lr, w), w, int(T), sigma=sigma,
                                   replicas=replicas, seed=seed)
                per_replica = run.grad_norm2[:-1].mean(axis=0)
                err = float(per_replica.std(ddof=1) / math.sqrt(replicas)) if replicas > 1 else float("nan")
                rows.append(SpeedupRow(a, prob.num_clients, int(T), run.mean_local_steps, lr,
                                       float(per_replica.mean()), err))
                if progress:
                    progress(f"{a} m={prob.num_clients} T={T}")
    return rows


class SamplingRow(NamedTuple):
    r"""One cell of :func:`sampling_grid`. ``clients`` is :math:`q` (client draws per round,
    the :math:`q` of App. G's rate; a client drawn twice trains once), ``population`` is :math:`m`; ``mean_grad2`` is
    :math:`\frac1T\sum_{t<T}\|\nabla F(x^{(t,0)})\|^2` averaged over ``seeds`` independent
    sampling seeds × replicas, ``stderr`` its standard error across the seeds (replicas of
    one seed share its participants); ``tau_tilde`` is measured over the participants;
    ``effective_clients`` is :func:`fedlib.sampling.effective_participants`. ``algorithm`` is the aggregation,
    ``scheme`` the sampling scheme, ``rounds`` :math:`T`, ``lr`` the cell's :math:`\eta` and ``tau_eff`` FedNova's
    choice of :data:`TAU_EFF_CHOICES` (``"participants"`` for FedAvg)."""

    algorithm: str
    scheme: str
    population: int
    clients: int
    rounds: int
    tau_tilde: float
    lr: float
    mean_grad2: float
    stderr: float
    effective_clients: float
    tau_eff: str = "population"

    @property
    def budget(self) -> float:
        return self.clients * self.tau_tilde * self.rounds


def participant_mean_steps(scheme: str, p: Any, work: RandomLocalWork) -> float:
    r"""App. G's :math:`\tilde\tau` in expectation: the mean :math:`\mathbb E\tau` of a drawn client,
    :math:`\sum_i p_i\,\mathbb E\tau_i` when clients are drawn with replacement :math:`\propto p_i`,
    :math:`\frac1m\sum_i\mathbb E\tau_i` when they are drawn uniformly (without replacement),
    :math:`\mathbb E\tau_i` = ``work.mean_steps``. The step size of :func:`sampling_grid` and
    :func:`sampling_bias`. ``scheme`` is ``"with-replacement"`` or ``"uniform"`` (``"full"`` is a ``ValueError``);
    ``p`` the (m,) weights, summing to 1, of ``work``'s clients."""
    check_choice("scheme", scheme, SAMPLING_SCHEMES)
    if scheme == "full":
        raise ValueError("scheme: participant_mean_steps is for sampled clients ('with-replacement' or 'uniform')")
    p = check_probability_vector("p", p, size=_local_work(work).num_clients)
    return float(p @ work.mean_steps) if scheme == "with-replacement" else float(work.mean_steps.mean())


def population_tau_eff(problem: QuadraticProblem, work: RandomLocalWork, solvers: Sequence[LocalSolver]) -> float:
    r"""FedNova's sample-independent :math:`\tau_{\text{eff}} = \sum_{i=1}^m p_i\,\mathbb E\|a_i\|_1`
    over *all* clients (:func:`mean_a_norms`), for rounds in which only some clients work. ``work`` is a
    :class:`fedlib.schedules.RandomLocalWork`: the closed form reads its uniform ranges (for the built-in step
    schedules, :func:`fedlib.schedules.population_tau_eff`; a schedule of your own is refused by both).
    ``problem`` gives the :math:`p_i`; ``solvers`` are :func:`mean_a_norms`'s."""
    check_instance("problem", problem, QuadraticProblem)
    _check_work(problem, work)
    return float(problem.p @ mean_a_norms(work, solvers))


def sampling_grid(problem: QuadraticProblem, work: RandomLocalWork, copies_list: Sequence[int],
                  clients_per_round: Sequence[int], rounds_list: Sequence[int], *,
                  scheme: str = "with-replacement", lr_scale: float = 0.1, sigma: float = 3.0, replicas: int = 4,
                  seeds: int = 4, seed: int = 0, algorithm: str = "fednova", tau_eff: str = "population",
                  solver_factory: Callable[[float], Sequence[LocalSolver]] = make_solvers,
                  progress: Optional[Callable[[str], None]] = None) -> list[SamplingRow]:
    r"""App. G: FedNova with :math:`q` clients sampled per round out of
    :math:`m = \text{copies}\times` base clients, for every (:math:`m`, :math:`q`, :math:`T`),
    :math:`\eta = c\sqrt{q/(\tilde\tau T)}` with :math:`\tilde\tau` the expected steps of a drawn
    client (:func:`participant_mean_steps`: :math:`\sum_i p_i\mathbb E\tau_i` with replacement
    :math:`\propto p`, :math:`\frac1m\sum_i\mathbb E\tau_i` uniformly).

    Sampling seed :math:`s` of :func:`fedlib.experiments.run_seeds` ``(seed, seeds)`` (``seeds * seed``,
    ..., ``seeds * seed + seeds - 1``: seed 0 runs sampling seeds 0, 1, ..., and no two values of ``seed``
    share one, where ``seed, seed + 1, ...`` gave neighbouring chapter seeds all but one in common) fixes
    the participants of every round and the gradient noise of its ``replicas`` runs; the local work is
    ``work``'s for all.
    ``tau_eff`` (FedNova): ``"population"`` — the fixed :func:`population_tau_eff`, which
    keeps the expected update on :math:`F` — or one taken from each round's sample,
    ``"participants"`` (:math:`\sum_{i\in S}\omega_i\|a_i\|_1`) or ``"selected_p"`` (App. H's
    :math:`\sum_{i\in S}p_i\|a_i\|_1`), which bias it (:func:`sampling_bias`).

    ``problem``, ``work``, ``copies_list``, ``rounds_list``, ``lr_scale`` (:math:`c > 0`), ``sigma``
    (:math:`\ge 0`) and ``solver_factory`` are as in :func:`speedup_grid`; ``clients_per_round`` holds the
    :math:`q` (integers >= 1); ``scheme`` is ``"with-replacement"`` (default) or ``"uniform"`` (``"full"`` is a
    ``ValueError``); ``algorithm`` is ``"fednova"`` (default) or ``"fedavg"``, whose ``tau_eff`` is implicit (recorded
    as ``"participants"``; ``"selected_p"`` is a ``ValueError``). ``progress``, if given, is called after each
    cell with its :math:`m`, :math:`q` and :math:`T`.
    """
    check_instance("problem", problem, QuadraticProblem)
    check_choice("scheme", scheme, SAMPLING_SCHEMES)
    _check_work(problem, work)
    if scheme == "full":
        raise ValueError("scheme: sampling_grid samples clients; use speedup_grid for full participation")
    check_choice("algorithm", algorithm, AGGREGATIONS)
    check_choice("tau_eff", tau_eff, TAU_EFF_CHOICES)
    if tau_eff == "population" and algorithm != "fednova":
        tau_eff = "participants"  # FedAvg's tau_eff is implicit
    check_nonnegative("sigma", sigma)
    seeds = check_int("seeds", seeds, minimum=2)
    copies_list = _check_counts("copies_list", copies_list)
    clients_per_round = _check_counts("clients_per_round", clients_per_round)
    rounds_list = _check_counts("rounds_list", rounds_list)
    rows = []
    for copies in copies_list:
        prob, w = replicate(problem, work, copies)
        tau_expected = participant_mean_steps(scheme, prob.p, w)
        for q in clients_per_round:
            q_eff = effective_participants(scheme, prob.p, q)
            for T in rounds_list:
                lr = theorem3_lr(lr_scale, int(q), tau_expected, int(T))
                solvers = _factory_solvers(solver_factory, lr, work)
                fixed = _replica_tau_eff(tau_eff, population_tau_eff(prob, w, solvers) if tau_eff == "population"
                                         else None)
                per_seed, taus = [], []
                for s in run_seeds(seed, seeds):
                    run = run_replicas(prob, algorithm, solvers, w, int(T), sigma=sigma, replicas=replicas, seed=s,
                                       sampling=scheme, clients_per_round=int(q), tau_eff=fixed)
                    per_seed.append(float(run.grad_norm2[:-1].mean()))
                    taus.append(run.mean_local_steps)
                rows.append(SamplingRow(algorithm, scheme, prob.num_clients, int(q), int(T), float(np.mean(taus)), lr,
                                        float(np.mean(per_seed)), float(np.std(per_seed, ddof=1) / math.sqrt(seeds)),
                                        q_eff, tau_eff))
                if progress:
                    progress(f"m={prob.num_clients} q={q} T={T}")
    return rows


class SamplingConditions(NamedTuple):
    r"""App. G's step-size conditions for one sampling run (:func:`sampling_step_conditions`):
    the step size ``lr`` (:math:`\eta`), ``clients`` (:math:`q`), the exact ``L`` and ``beta2``
    (:math:`\beta^2`), the fixed ``tau_eff``, the conditions themselves
    (:class:`fedlib.theory.AppGStepConditions`) and ``max_lr``, the largest :math:`\eta` that meets
    them with the same :math:`a_i` and :math:`\tau_{\text{eff}}` (:func:`fedlib.theory.appg_max_lr`)."""

    lr: float
    clients: int
    L: float
    beta2: float
    tau_eff: float
    conditions: AppGStepConditions
    max_lr: float


def sampling_step_conditions(problem: QuadraticProblem, work: RandomLocalWork, solvers: Sequence[LocalSolver],
                             clients_per_round: int) -> SamplingConditions:
    r"""Whether FedNova's step size in a :func:`sampling_grid` run (population ``problem``, local work
    ``work``, ``solvers`` at the run's :math:`\eta`, :math:`q` = ``clients_per_round`` draws per round,
    :math:`\tau_{\text{eff}}` fixed to :func:`population_tau_eff`) meets App. G's step-size conditions
    (:func:`fedlib.theory.appg_step_conditions`), with the exact constants of the quadratic clients:
    :math:`L` = :func:`fedlib.theory.quadratic_smoothness` and :math:`\beta^2` =
    :func:`fedlib.theory.quadratic_min_beta2` for the weights :math:`p` — the smallest :math:`\beta^2`
    Assumption 3 admits, where the conditions are loosest: if they fail there, they fail for every
    admissible :math:`\beta^2`. :math:`D`'s max runs over every :math:`a_i` the work can draw (each
    client's :math:`\tau` range × every solver), since any of them can occur in some round and App. G's
    argument needs the conditions in every round. The conditions are sufficient for App. G's bound,
    not necessary: a run that breaks them may still show the rate."""
    check_instance("problem", problem, QuadraticProblem)
    _check_work(problem, work)
    solvers = check_shared_lr("solvers", solvers)
    if len(solvers) != _local_work(work).num_solvers:
        raise ValueError(f"solvers: work draws among {work.num_solvers} solvers, got {len(solvers)}")
    q = check_int("clients_per_round", clients_per_round, minimum=1)
    lr = float(solvers[0].lr)
    L = quadratic_smoothness(problem.H)
    beta2 = quadratic_min_beta2(problem.H, problem.p)
    tau_eff = population_tau_eff(problem, work, solvers)
    a_vectors = [s.a_vector(int(tau)) for lo, hi in zip(work.low, work.high) for tau in range(int(lo), int(hi) + 1)
                 for s in solvers]
    return SamplingConditions(lr, q, L, beta2, tau_eff, appg_step_conditions(lr, L, beta2, q, tau_eff, a_vectors),
                              appg_max_lr(L, beta2, q, tau_eff, a_vectors))


#: FedNova's :math:`\tau_{\text{eff}}` under sampling in :func:`sampling_grid` / :func:`sampling_bias`:
#: ``"population"`` (fixed, :func:`population_tau_eff`), ``"participants"``
#: (:math:`\sum_{i\in S}\omega_i\|a_i\|_1`, the library's default under sampling) and
#: ``"selected_p"`` (App. H's :math:`\sum_{i\in S}p_i\|a_i\|_1`).
TAU_EFF_CHOICES = ("population", "participants", "selected_p")


def _replica_tau_eff(choice: str, population_value: Optional[float]):
    """:func:`run_replicas`' ``tau_eff`` for a :data:`TAU_EFF_CHOICES` entry: the population
    value itself, ``None`` (the participants' default) or ``"selected_p"``."""
    return {"population": population_value, "participants": None, "selected_p": "selected_p"}[choice]


class BiasRow(NamedTuple):
    r"""One (:math:`q`, :math:`T`, :math:`\tau_{\text{eff}}` choice) of :func:`sampling_bias`.

    ``distance`` (± ``stderr`` over seeds) is the mean distance of FedNova's Polyak-averaged
    iterate (``ReplicaRun.mean_params`` of :func:`fedlib.engines.quadratic.run_replicas`) to
    :math:`x^*`; ``predicted`` the distance to :math:`x^*` of the closed-form limit
    :math:`x_c` (the minimiser of :math:`\sum_j c_jF_j`, :math:`c` from
    :func:`fedlib.sampling.expected_server_weights`) and ``off_prediction`` the mean
    distance of the averaged iterate to :math:`x_c`; ``chi2`` is
    :math:`\chi^2_{p\|c/\sum c}` and ``step_scale`` :math:`\sum_jc_j / \sum_jp_j\mathbb E\|a_j\|_1`
    (how much the expected server step shrinks against the fixed population value);
    ``averaged`` holds the seeds' averaged iterates (seeds × d) and ``limit`` :math:`x_c`. ``clients`` is
    :math:`q`, ``rounds`` :math:`T`, ``lr`` the row's :math:`\eta` and ``tau_eff`` the choice."""

    clients: int
    rounds: int
    lr: float
    tau_eff: str
    distance: float
    stderr: float
    predicted: float
    off_prediction: float
    chi2: float
    step_scale: float
    averaged: np.ndarray
    limit: np.ndarray


def sampling_bias(problem: QuadraticProblem, work: RandomLocalWork, clients_per_round: Sequence[int],
                  rounds_list: Sequence[int], *, lr_scale: float = 0.5, seeds: int = 3, seed: int = 0,
                  scheme: str = "with-replacement", tau_effs: Sequence[str] = TAU_EFF_CHOICES,
                  solver_factory: Callable[[float], Sequence[LocalSolver]] = make_solvers) -> list[BiasRow]:
    r"""Where FedNova settles under sampling, full gradients, :math:`\eta = c\sqrt{q/(\tilde\tau T)}`
    (:math:`\tilde\tau` of :func:`participant_mean_steps`), for each :math:`\tau_{\text{eff}}` choice of :data:`TAU_EFF_CHOICES`, measured and predicted.

    With :math:`\tau_{\text{eff}}` taken from the round's sample, the expected server step
    :math:`\mathbb E[\tau_{\text{eff}}\sum_{j\in S}\omega_jd_j] = \sum_jc_jd_j` has
    :math:`c \not\propto p` (:func:`fedlib.sampling.expected_server_weights`); with replacement
    and :math:`\tau_{\text{eff}} = \sum_{i\in S}\omega_i\|a_i\|_1` (:math:`\mathbb E[\omega_i\omega_j]
    = (1 - \frac1q)p_ip_j + \delta_{ij}\frac{p_i}{q}`):

    .. math::

        c_j = \Bigl(1-\frac1q\Bigr)p_j\sum_i p_i\|a_i\|_1 + \frac1q\,p_j\|a_j\|_1 ,

    whose second term is FedAvg's (weights :math:`\propto p_j\|a_j\|_1`): an objective
    inconsistency of weight :math:`1/q` that no step size removes. App. H's
    :math:`\sum_{i\in S}p_i\|a_i\|_1` leans the same way. As :math:`\eta\to 0`,
    :math:`d_j\to\nabla F_j`, so the averaged iterate tends to the minimiser :math:`x_c` of
    :math:`\sum_jc_jF_j` (``predicted``; ``a_norms`` their means over the random local work,
    which is drawn independently of the sample). A fixed :math:`\tau_{\text{eff}}`
    (:func:`population_tau_eff`) gives :math:`c\propto p` and :math:`x_c = x^*`.
    Each seed is one run (its own participants); the averaged iterate removes the wandering. The
    sampling seeds are :func:`fedlib.experiments.run_seeds` ``(seed, seeds)``, as in :func:`sampling_grid`.

    ``problem``, ``work``, ``clients_per_round``, ``rounds_list``, ``lr_scale`` (:math:`c > 0`, default 0.5),
    ``scheme`` and ``solver_factory`` are as in :func:`sampling_grid` (FedNova only, full gradients);
    ``tau_effs`` is a non-empty sequence of :data:`TAU_EFF_CHOICES` entries (default all three).
    """
    check_instance("problem", problem, QuadraticProblem)
    check_choice("scheme", scheme, SAMPLING_SCHEMES)
    _check_work(problem, work)
    if scheme == "full":
        raise ValueError("scheme: sampling_bias samples clients (with full participation every choice is consistent)")
    tau_effs = [check_choice("tau_effs", c, TAU_EFF_CHOICES) for c in tau_effs]
    if not tau_effs:
        raise ValueError("tau_effs must name at least one choice")
    seeds = check_int("seeds", seeds, minimum=2)
    clients_per_round = _check_counts("clients_per_round", clients_per_round)
    rounds_list = _check_counts("rounds_list", rounds_list)
    x_star = problem.optimum()
    tau_tilde = participant_mean_steps(scheme, problem.p, work)
    rows = []
    for q in clients_per_round:
        for T in rounds_list:
            lr = theorem3_lr(lr_scale, int(q), tau_tilde, int(T))
            solvers = _factory_solvers(solver_factory, lr, work)
            a_mean = mean_a_norms(work, solvers)
            fixed = float(problem.p @ a_mean)  # population_tau_eff
            for choice in tau_effs:
                policy = _replica_tau_eff(choice, fixed)
                c = expected_server_weights(scheme, problem.p, a_mean, int(q), fixed if choice == "population" else choice)
                x_c = quadratic_global_optimum(problem.H, problem.e, c / c.sum())
                means = [run_replicas(problem, "fednova", solvers, work, int(T), seed=s, sampling=scheme,
                                      clients_per_round=int(q), tau_eff=policy).mean_params[0]
                         for s in run_seeds(seed, seeds)]
                # distances as run_replicas' (_scaled_norm: np.linalg.norm's value, finite past its ~1.3e154 too)
                dist = [float(_scaled_norm(x - x_star)) for x in means]
                rows.append(BiasRow(int(q), int(T), lr, choice, float(np.mean(dist)),
                                    float(np.std(dist, ddof=1) / math.sqrt(seeds)), float(_scaled_norm(x_c - x_star)),
                                    float(np.mean([_scaled_norm(x - x_c) for x in means])),
                                    chi_square(problem.p, c / c.sum()), float(c.sum() / fixed), np.array(means), x_c))
    return rows


def bias_row(rows: Sequence[BiasRow], clients: int, rounds: int, tau_eff: str) -> BiasRow:
    """The row of :func:`sampling_bias` for (``clients``, ``rounds``, ``tau_eff``) among ``rows`` (its result);
    none is a ``ValueError``."""
    for r in rows:
        if (r.clients, r.rounds, r.tau_eff) == (clients, rounds, tau_eff):
            return r
    raise ValueError(f"no sampling_bias row with q={clients}, T={rounds}, tau_eff={tau_eff!r}")


def paired_displacement_error(rows: Sequence[BiasRow], clients: int, rounds: int, tau_eff: str) -> float:
    r"""How far the sample-dependent ``tau_eff``'s averaged iterates of :func:`sampling_bias` are
    displaced from the fixed run's, against the predicted displacement, relative to its length:

    .. math::

        \frac{\bigl\|\frac1S\sum_s(\bar x_s - \bar x^{\text{fixed}}_s) - (x_c - x^*)\bigr\|}{\|x_c - x^*\|} ,

    where :math:`\bar x_s` and :math:`\bar x^{\text{fixed}}_s` are seed :math:`s`'s ``averaged`` iterates
    in the rows (``clients``, ``rounds``, ``tau_eff``) and (``clients``, ``rounds``, ``"population"``),
    :math:`x_c` the first's ``limit`` and :math:`x^*` the second's (:math:`c \propto p`). In
    :func:`sampling_bias` every choice runs on the same sampling seeds, so the two runs of a seed
    share their participants and local work round by round and much of their wandering cancels in
    the difference. 0: displaced exactly as predicted; 1: not displaced at all (both at the same point).
    Chapter 8 derives why it tends to 0 as :math:`\eta \to 0` when the limit is :math:`x_c`."""
    if tau_eff == "population":
        raise ValueError("tau_eff: the population row is the reference; name a sample-dependent choice "
                         "('participants' or 'selected_p')")
    check_choice("tau_eff", tau_eff, TAU_EFF_CHOICES)
    row, fixed = bias_row(rows, clients, rounds, tau_eff), bias_row(rows, clients, rounds, "population")
    if row.averaged.shape != fixed.averaged.shape:
        raise ValueError(f"the {tau_eff!r} and 'population' rows hold {row.averaged.shape} and "
                         f"{fixed.averaged.shape} averaged iterates: not the same seeds")
    predicted = row.limit - fixed.limit
    size = float(np.linalg.norm(predicted))
    if not size > 0:
        raise ValueError(f"the {tau_eff!r} row's limit is the population's (no predicted displacement)")
    return float(np.linalg.norm(np.mean(row.averaged - fixed.averaged, axis=0) - predicted) / size)


def plot_bias(ax, rows: Sequence[BiasRow], x_star: np.ndarray, clients: int, rounds: int) -> None:
    r"""The seeds' averaged iterates of :func:`sampling_bias` (``clients``, ``rounds``) and the
    closed-form limits :math:`x_c`, in the plane through :math:`x^*` spanned by the limits of
    the two sample-dependent choices (coordinates along an orthonormal basis of it, so the
    distances along the axes are true; the points' components off the plane are dropped).
    Used by chapter 8.

    ``ax`` is a matplotlib ``Axes``; ``rows`` are :func:`sampling_bias`'s, with a sample-dependent row at
    (``clients``, ``rounds``) (a ``ValueError`` otherwise); ``x_star`` is :math:`x^*`, the plot's origin."""
    sel = {r.tau_eff: r for r in rows if (r.clients, r.rounds) == (clients, rounds)}
    dirs = [sel[c].limit - x_star for c in ("participants", "selected_p") if c in sel]
    if not dirs:
        raise ValueError(f"plot_bias needs a sample-dependent tau_eff row with q={clients}, T={rounds}")
    basis, _ = np.linalg.qr(np.stack(dirs, axis=1))  # (d, 1 or 2), orthonormal columns
    basis = basis * np.sign(np.sum(basis * np.stack(dirs, axis=1), axis=0) + 1e-300)  # towards the limits
    if basis.shape[1] == 1:
        basis = np.column_stack([basis[:, 0], np.zeros_like(basis[:, 0])])
    labels = {"population": "fixed (population)", "participants": r"$\sum_{S}\omega_i\|a_i\|_1$ (default)",
              "selected_p": r"$\sum_{S}p_i\|a_i\|_1$ (App. H)"}
    ax.plot(0, 0, marker="*", ms=14, color="k", ls="none", label=r"$x^*$")
    for k, (choice, r) in enumerate(sel.items()):
        pts = (r.averaged - x_star) @ basis
        ax.plot(pts[:, 0], pts[:, 1], marker="o", ls="none", color=f"C{k}", alpha=0.8,
                label=f"{labels.get(choice, choice)}: averaged iterates")
        if choice != "population":
            lim = (r.limit - x_star) @ basis
            ax.plot(lim[0], lim[1], marker="X", ms=11, color=f"C{k}", ls="none", mec="k",
                    label="predicted limit $x_c$ (" + ("default" if choice == "participants" else "App. H") + ")")
    ax.axhline(0, color="0.8", lw=0.6, zorder=0)
    lo, hi = ax.get_xlim()
    ax.set_ylim(-0.35 * (hi - lo), 0.35 * (hi - lo))  # the same scale on both axes, as far as the box allows
    ax.set_xlabel(r"along the default's $x_c - x^*$")
    ax.set_ylabel("orthogonal, towards App. H's")
    ax.set_title(f"q = {clients}, T = {rounds}, full gradients", fontsize=9)
    ax.legend(fontsize=7, loc="lower left")


def _compared(clients: int, rounds: int, min_rounds_per_client: float) -> bool:
    """Whether a cell of ``clients`` :math:`m` (or :math:`q`) and ``rounds`` :math:`T` enters the equal-budget
    comparison: :math:`T \\ge k\\,m`, ``min_rounds_per_client`` :math:`k` (the one place of that rule)."""
    return rounds >= min_rounds_per_client * clients


def equal_budget_ratios(rows: Sequence[SpeedupRow], algorithm: str = "fednova", rtol: float = 0.05,
                        min_rounds_per_client: float = 0.0) -> list[tuple]:
    r"""Groups of cells with the same :math:`m\tilde\tau T` (within ``rtol``; e.g. :math:`4m`
    clients for :math:`T/4` rounds): ``(budget, [(m, T, mean_grad2), ...], max/min)`` for
    every group of two or more — linear speedup says the ratio is close to 1. ``rows`` are :func:`speedup_grid`'s
    (or :func:`sampling_grid`'s, :math:`m` then being :math:`q`); only those of ``algorithm`` (``"fedavg"`` or
    ``"fednova"``) count.

    ``min_rounds_per_client`` :math:`k \ge 0` keeps only the cells with :math:`T \ge k\,m` (default 0: all).
    Linear speedup is a statement about the leading term of Theorem 1's bound (eq. 8) at
    :math:`\eta = \sqrt{m/(\bar\tau T)}`, :math:`\mathcal O(1/\sqrt{m\bar\tau T})`, the same for every cell of a
    group; its other two terms are :math:`\mathcal O(m/(\bar\tau T))` and grow as :math:`m^2` along a group (256
    times from :math:`m = 4, T = 4096` to :math:`m = 64, T = 256`), so "for :math:`T` sufficiently large" (§4.2)
    needs :math:`m/T` bounded. Chapter 8 compares cells with :math:`T \ge 16m`.

    >>> rows = [SpeedupRow("fednova", m, T, 1.0, 0.1, e, 0.0) for m, T, e in
    ...         [(4, 4096, 0.08), (16, 1024, 0.085), (64, 256, 0.13)]]
    >>> [(b, round(r, 3)) for b, _, r in equal_budget_ratios(rows)]
    [(16384.0, 1.625)]
    >>> [(b, round(r, 3)) for b, _, r in equal_budget_ratios(rows, min_rounds_per_client=16)]
    [(16384.0, 1.062)]
    """
    check_choice("algorithm", algorithm, AGGREGATIONS)
    check_nonnegative("rtol", rtol)
    check_nonnegative("min_rounds_per_client", min_rounds_per_client)
    cells = sorted((r for r in rows
                    if r.algorithm == algorithm and _compared(r.clients, r.rounds, min_rounds_per_client)),
                   key=lambda r: r.budget)
    groups: list[list[SpeedupRow]] = []
    for r in cells:
        if groups and abs(r.budget / groups[-1][0].budget - 1) <= rtol:
            groups[-1].append(r)
        else:
            groups.append([r])
    out = []
    for g in groups:
        if len(g) > 1:
            vals = [r.mean_grad2 for r in g]
            out.append((g[0].budget, [(r.clients, r.rounds, r.mean_grad2) for r in g], max(vals) / min(vals)))
    return out


def left_out_ratios(rows: Sequence[SpeedupRow], min_rounds_per_client: float, algorithm: str = "fednova",
                    rtol: float = 0.05) -> list[tuple]:
    r"""For each equal-budget group (:func:`equal_budget_ratios` over all the cells) with both a cell left out of the
    comparison (:math:`T < k\,m`, ``min_rounds_per_client`` :math:`k`) and a compared one:
    ``(budget, [(m, T, mean_grad2), ...], ratio)``, ``ratio`` the smallest left-out error over the largest compared
    one (above 1: every left-out cell lies above every compared cell). ``rows``, ``algorithm`` and ``rtol`` are
    :func:`equal_budget_ratios`'."""
    out = []
    for budget, cells, _ in equal_budget_ratios(rows, algorithm, rtol):
        left_out = [v for m, T, v in cells if not _compared(m, T, min_rounds_per_client)]
        kept = [v for m, T, v in cells if _compared(m, T, min_rounds_per_client)]
        if left_out and kept:
            out.append((budget, cells, min(left_out) / max(kept)))
    return out


def left_out_not_above(rows: Sequence[SpeedupRow], min_rounds_per_client: float, algorithm: str = "fednova",
                       rtol: float = 0.05) -> list[tuple]:
    r"""The equal-budget groups (:func:`equal_budget_ratios` over all the cells) in which a cell left out of the
    comparison (:math:`T < k\,m`, ``min_rounds_per_client`` :math:`k`) is *not* above every compared cell:
    ``(budget, [(m, T, mean_grad2), ...])`` each (:func:`left_out_ratios` at most 1); empty when every left-out cell
    lies above its group's compared cells, as the bound's terms in :math:`m/(\bar\tau T)` (positive, largest for
    the cells left out) predict. Groups with no cell left out, or none compared, are not checked. ``rows``,
    ``algorithm`` and ``rtol`` are :func:`equal_budget_ratios`'; chapter 8 asserts the list empty in parts 2 and 3.

    >>> rows = [SpeedupRow("fednova", m, T, 1.0, 0.1, e, 0.0) for m, T, e in
    ...         [(4, 4096, 0.08), (16, 1024, 0.085), (64, 256, 0.13)]]
    >>> left_out_not_above(rows, 16)
    []
    >>> left_out_not_above(rows[:2] + [rows[2]._replace(mean_grad2=0.082)], 16)
    [(16384.0, [(4, 4096, 0.08), (16, 1024, 0.085), (64, 256, 0.082)])]
    """
    return [(budget, cells) for budget, cells, ratio in left_out_ratios(rows, min_rounds_per_client, algorithm, rtol)
            if ratio <= 1]


def equal_budget_table(rows: Sequence[SpeedupRow], min_rounds_per_client: float, algorithm: str = "fednova",
                       rtol: float = 0.05, label: str = "m") -> list[list]:
    r"""Chapter 8's table of the equal-budget groups: one row ``[budget, cells, ratio over all, ratio compared]``
    per group of :func:`equal_budget_ratios` over all the cells, where ``cells`` lists every cell
    (``"m=4, T=4096: 0.0778"``, ``label`` naming :math:`m`; ``"q"`` for sampling rows), those with
    :math:`T < k\,m` (``min_rounds_per_client`` :math:`k`) marked "not compared", and the last entry is the group's
    ratio over the compared cells (largest / smallest; ``"—"`` where fewer than two are left). ``rows``,
    ``algorithm`` and ``rtol`` are :func:`equal_budget_ratios`'."""
    table = []
    for budget, cells, ratio in equal_budget_ratios(rows, algorithm, rtol):
        text = "; ".join(f"{label}={m}, T={T}: {v:.4g}" + ("" if _compared(m, T, min_rounds_per_client) else
                                                             " (not compared)") for m, T, v in cells)
        kept = [v for m, T, v in cells if _compared(m, T, min_rounds_per_client)]
        table.append([budget, text, ratio, max(kept) / min(kept) if len(kept) > 1 else "—"])
    return table


def plot_consistency(axes, rows: Sequence[ConsistencyRow]) -> None:
    """Left: distances against :math:`\\eta`; right: :math:`\\min_t\\|\\nabla F\\|^2` against :math:`T`
    (``rows``: at least one :class:`ConsistencyRow`, a ``ValueError`` naming ``rows`` otherwise). ``axes`` holds
    the two matplotlib ``Axes``."""
    if len(rows) == 0:
        raise ValueError("rows: plot_consistency needs at least one ConsistencyRow, got none")
    lr = [r.lr for r in rows]
    avg, nova = ALGORITHM_COLORS["fedavg"], ALGORITHM_COLORS["fednova"]
    T = [r.rounds for r in rows]
    ax = axes[0]
    ax.loglog(lr, [r.fednova_distance for r in rows], "o-", color=nova, label=r"FedNova: $\|x - x^*\|$")
    ax.loglog(lr, [r.fedavg_distance for r in rows], "s-", color=avg, label=r"FedAvg: $\|x - x^*\|$")
    ax.loglog(lr, [r.fedavg_surrogate_distance for r in rows], "s--", color=avg, mfc="none",
              label=r"FedAvg: $\|x - \tilde x\|$")
    ax.set_xticks(lr, [f"{v:.2g}" for v in lr])
    ax.minorticks_off()
    ax.set_xlabel(r"$\eta = c\sqrt{m/(\tilde\tau T)}$")
    ax.set_ylabel("RMS distance, last half of the rounds")
    ax.legend(fontsize=8)
    ax = axes[1]
    ax.loglog(T, [r.fednova_min_grad2 for r in rows], "o-", color=nova, label="FedNova")
    ax.loglog(T, [r.fedavg_min_grad2 for r in rows], "s-", color=avg, label="FedAvg")
    ax.axhline(rows[-1].floor, color=avg, ls=":", label=r"$\|\nabla F(\tilde x)\|^2$")
    ax.set_ylim(top=3 * rows[-1].floor)
    ax.set_xlabel("rounds $T$")
    ax.set_ylabel(r"$\min_t \|\nabla F(x^{(t,0)})\|^2$")
    ax.legend(fontsize=8)


def plot_speedup(ax, rows: Sequence[SpeedupRow]) -> None:
    """Theorem 3's left-hand side against :math:`m\\tilde\\tau T`, one line per :math:`m`
    (filled: FedNova, open: FedAvg), with a :math:`(m\\tilde\\tau T)^{-1/2}` guide. ``ax`` is a matplotlib
    ``Axes`` and ``rows`` are :func:`speedup_grid`'s."""
    markers = "osD^v<>"
    for k, m in enumerate(sorted({r.clients for r in rows})):
        for a, style in (("fednova", dict(color=ALGORITHM_COLORS["fednova"])),
                         ("fedavg", dict(color=ALGORITHM_COLORS["fedavg"], mfc="none"))):
            sel = sorted((r for r in rows if r.clients == m and r.algorithm == a), key=lambda r: r.rounds)
            if sel:
                ax.loglog([r.budget for r in sel], [r.mean_grad2 for r in sel], marker=markers[k % len(markers)],
                          ls="-" if a == "fednova" else "--", label=f"{'FedNova' if a == 'fednova' else 'FedAvg'}, m={m}",
                          **style)
    nova = [r for r in rows if r.algorithm == "fednova"]
    if nova:
        b = np.array(sorted(r.budget for r in nova))
        ref = min(nova, key=lambda r: r.budget)
        ax.loglog(b, ref.mean_grad2 * np.sqrt(ref.budget / b), color="k", lw=0.8, ls=":", label=r"$\propto (m\tilde\tau T)^{-1/2}$")
    ax.set_xlabel(r"$m\tilde\tau T$ (local steps of all clients)")
    ax.set_ylabel(r"$\frac{1}{T}\sum_t \|\nabla F(x^{(t,0)})\|^2$")
    ax.legend(fontsize=7, ncol=2)


def plot_sampling(axes, rows: Sequence[SamplingRow], rounds: int) -> None:
    r"""Left: App. G's left-hand side against :math:`q\tilde\tau T` for the largest population,
    one line per :math:`q`, with a :math:`(q\tilde\tau T)^{-1/2}` guide; right: the error at
    ``rounds`` rounds against :math:`q`, one line per population :math:`m` (where sampling with
    replacement stops paying: :math:`q_{\text{eff}}` saturates at :math:`m`). ``rows``: at least one
    :class:`SamplingRow` (a ``ValueError`` naming ``rows`` otherwise). ``axes`` holds the two matplotlib ``Axes``."""
    if len(rows) == 0:
        raise ValueError("rows: plot_sampling needs at least one SamplingRow, got none")
    markers = "osD^v<>"
    big = max(r.population for r in rows)
    sel = [r for r in rows if r.population == big]
    ax = axes[0]
    for k, q in enumerate(sorted({r.clients for r in sel})):
        line = sorted((r for r in sel if r.clients == q), key=lambda r: r.rounds)
        ax.errorbar([r.budget for r in line], [r.mean_grad2 for r in line], yerr=[r.stderr for r in line],
                    marker=markers[k % len(markers)], color=f"C{k + 3}", capsize=2, label=f"q={q}")
    b = np.array(sorted(r.budget for r in sel))
    ref = min(sel, key=lambda r: r.budget)
    ax.plot(b, ref.mean_grad2 * np.sqrt(ref.budget / b), color="k", lw=0.8, ls=":", label=r"$\propto (q\tilde\tau T)^{-1/2}$")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(r"$q\tilde\tau T$ ($q$ draws per round, $\tilde\tau$ local steps per draw)")
    ax.set_ylabel(r"$\frac{1}{T}\sum_t \|\nabla F(x^{(t,0)})\|^2$")
    ax.set_title(f"m = {big} clients, q sampled per round", fontsize=9)
    ax.legend(fontsize=7)
    ax = axes[1]
    for k, m in enumerate(sorted({r.population for r in rows})):
        line = sorted((r for r in rows if r.population == m and r.rounds == rounds), key=lambda r: r.clients)
        if line:
            bars = ax.errorbar([r.clients for r in line], [r.mean_grad2 for r in line], yerr=[r.stderr for r in line],
                               marker=markers[k % len(markers)], capsize=2, label=f"m={m}")
            if m < max(r.clients for r in line):
                ax.axvline(m, color=bars.lines[0].get_color(), lw=0.8, ls=":", label=f"q = m = {m}")
            if m == big:
                q = np.array([r.clients for r in line], dtype=float)
                ax.plot(q, line[0].mean_grad2 * np.sqrt(q[0] / q), color="k", lw=0.8, ls=":",
                        label=r"$\propto q^{-1/2}$ (App. G)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("clients sampled per round $q$ (with replacement)")
    ax.set_ylabel(r"$\frac{1}{T}\sum_t \|\nabla F(x^{(t,0)})\|^2$" + f", T = {rounds}")
    ax.legend(fontsize=7)


def summary_markdown(consistency: Sequence[ConsistencyRow], grid: Sequence[SpeedupRow], slope_fednova: float,
                     slope_fedavg_surrogate: float, slope_speedup: float, groups: Sequence[tuple],
                     check: Optional["EngineCheck"] = None, *, min_rounds_per_client: float = 0.0) -> str:
    r"""Chapter 8's summary, written from the measured rows (nothing typed in by hand).

    ``consistency`` are :func:`consistency_sweep`'s rows (at least one; the first and last are quoted) and
    ``grid`` :func:`speedup_grid`'s; ``slope_fednova`` and ``slope_fedavg_surrogate`` are the log-log slopes
    against the step size of FedNova's distance to :math:`x^*` and FedAvg's to the surrogate's minimiser
    :math:`\tilde x`, and ``slope_speedup`` the log-log slope of FedNova's ``mean_grad2`` (not a distance)
    against the budget :math:`m\tilde\tau T`. ``groups`` are :func:`equal_budget_ratios`' (none: that
    sentence is left out); ``check`` an :class:`EngineCheck` (``None``: its line is left out);
    ``min_rounds_per_client`` the :math:`k` the groups were formed with (cells with :math:`T \ge km`; 0, the default,
    names no condition)."""
    first, last = consistency[0], consistency[-1]
    nova = [r for r in grid if r.algorithm == "fednova"]
    avg = [r for r in grid if r.algorithm == "fedavg"]
    worst = max(groups, key=lambda g: g[2]) if groups else None
    lines = [
        f"- **Theorem 3, arbitrary local work.** With $\\tau_i^{{(t)}}$ and the local solver redrawn for every "
        f"client every round and $\\eta = c\\sqrt{{m/(\\tilde\\tau T)}}$ for $T = {first.rounds}, \\dots, {last.rounds}$, "
        f"FedNova's distance to $x^*$ fell from {first.fednova_distance:.3g} to {last.fednova_distance:.3g} "
        f"(log-log slope {slope_fednova:.2f} in $\\eta$). FedAvg, with the same clients and the same local work, "
        f"stayed {last.fedavg_distance:.3g} from $x^*$ ($\\|x^* - \\tilde x\\| = {last.surrogate_gap:.3g}$) and "
        f"approached $\\tilde x$, the minimiser of the surrogate with time-averaged weights "
        f"$w_i \\propto p_i\\,\\mathbb E\\|a_i\\|_1$ ({first.fedavg_surrogate_distance:.3g} → "
        f"{last.fedavg_surrogate_distance:.3g}, slope {slope_fedavg_surrogate:.2f}: the random weights make it "
        f"wander around $\\tilde x$).",
    ]
    if nova:
        lines.append(
            f"- **Linear speedup.** With noisy gradients, FedNova's $\\frac1T\\sum_t\\|\\nabla F\\|^2$ fell with "
            f"slope {slope_speedup:.3f} against $m\\tilde\\tau T$ over $m = {min(r.clients for r in nova)}, \\dots, "
            f"{max(r.clients for r in nova)}$ and $T = {min(r.rounds for r in nova)}, \\dots, {max(r.rounds for r in nova)}$ "
            f"(Theorem 3: $-1/2$)."
            + (f" Cells with the same $m\\tilde\\tau T${_rounds_condition(min_rounds_per_client, 'm')} — more "
               f"clients, proportionally fewer rounds — agreed within "
               f"a factor {worst[2]:.2f} at worst ({'; '.join(f'm={m}, T={T}: {v:.3g}' for m, T, v in worst[1])}). "
               f"Theorem 3's rate is the bound's leading term for large $T$: with this $\\eta$ its other two terms fall "
               f"as $m/(\\tilde\\tau T)$, faster than $1/\\sqrt{{m\\tilde\\tau T}}$ (App. E's "
               f"$T \\gtrsim (m\\bar\\tau T)^{{3/4}}$ is that condition for FedProx at Corollary 2's $\\alpha$, "
               f"not for FedNova)." if worst else ""))
    if avg:
        top = max(avg, key=lambda r: r.budget)
        lines.append(
            f"- FedAvg gains nothing from more clients or rounds here: {top.mean_grad2:.3g} at the largest budget, "
            f"near $\\|\\nabla F(\\tilde x)\\|^2 = {last.floor:.3g}$: objective inconsistency, which more clients "
            f"and more rounds do not average away.")
    if check is not None:
        lines.append(
            f"- The engine gave the reference loop's numbers (largest difference {check.max_difference:.1e}) "
            f"{check.speedup:.1f} times faster ({check.seconds_engine:.2f} s vs {check.seconds_reference:.2f} s, "
            f"measured in this execution).")
    return "\n".join(lines)


def sampling_gain(rows: Sequence[SamplingRow], population: int, rounds: int, q_from: int, q_to: int) -> float:
    r"""Error at ``q_from`` over error at ``q_to`` participants per round (same :math:`m`, :math:`T`):
    how much more participants bought; App. G's rate predicts :math:`\sqrt{q_{to}/q_{from}}`. ``rows`` are
    :func:`sampling_grid`'s, ``population`` :math:`m` and ``rounds`` :math:`T` pick the cells; a missing cell is a
    ``ValueError``."""
    def cell(q):
        for r in rows:
            if r.population == population and r.rounds == rounds and r.clients == q:
                return r.mean_grad2
        raise ValueError(f"no cell with m={population}, T={rounds}, q={q}")
    return cell(q_from) / cell(q_to)


def sampling_gain_stderr(rows: Sequence[SamplingRow], population: int, rounds: int, q_from: int, q_to: int) -> float:
    r"""Standard error of :func:`sampling_gain` by the delta method: the two cells are independent
    (their own sampling seeds' runs), so the relative errors add in quadrature,
    :math:`\operatorname{se}(g)/g = \sqrt{(s_{from}/e_{from})^2 + (s_{to}/e_{to})^2}`, with
    :math:`e` a cell's ``mean_grad2`` and :math:`s` its ``stderr``. ``rows``, ``population``, ``rounds``,
    ``q_from`` and ``q_to`` are :func:`sampling_gain`'s."""
    def cell(q):
        for r in rows:
            if r.population == population and r.rounds == rounds and r.clients == q:
                return r
        raise ValueError(f"no cell with m={population}, T={rounds}, q={q}")
    a, b = cell(q_from), cell(q_to)
    return (a.mean_grad2 / b.mean_grad2) * math.hypot(a.stderr / a.mean_grad2, b.stderr / b.mean_grad2)


def sampling_summary(big: Sequence[SamplingRow], small: Sequence[SamplingRow], slope: float,
                     groups: Sequence[tuple], gain_big: float, gain_small: float, q_from: int, q_to: int,
                     bias: Sequence[BiasRow] = (), *, slope_eff: Optional[float] = None,
                     min_rounds_per_client: float = 0.0) -> str:
    r"""Chapter 8's summary of the client-sampling part, from the measured rows; with ``bias``
    (:func:`sampling_bias`'s rows), also the distances of the three ``tau_eff`` choices and, at the
    longest :math:`T`, the :func:`paired_displacement_error` of each sample-dependent choice and
    :math:`q` whose rows allow it. ``slope`` is the log-log slope against :math:`q\tilde\tau T`;
    ``slope_eff``, where given, the one against :math:`q_{\text{eff}}\tilde\tau T`, which chapter 8
    asserts (the text then names it as the asserted one). ``groups`` are :func:`equal_budget_ratios` of the rows
    (none: that clause is left out), formed with ``min_rounds_per_client`` :math:`k` (cells with :math:`T \ge kq`;
    0, the default, names no condition).

    ``big`` and ``small`` are :func:`sampling_grid` rows of one population each, sampled with replacement
    (the scheme the text and its :math:`q_{\text{eff}}` formula describe), each with cells at ``q_from``
    and ``q_to`` (whose :math:`q_{\text{eff}}` the text states next to ``gain_big`` and ``gain_small``);
    other rows raise ``ValueError`` (rows without ``q_to`` printed ":math:`q_{\text{eff}}` 3.95 → nan")."""
    m_big = _summary_population("big", big, q_from, q_to)
    m_small = _summary_population("small", small, q_from, q_to)
    worst = max(groups, key=lambda g: g[2]) if groups else None
    eff_small = {r.clients: r.effective_clients for r in small}
    eff_big = {r.clients: r.effective_clients for r in big}
    lines = [
        f"- **Client sampling (App. G).** With $q$ of $m = {m_big}$ clients drawn per round with replacement "
        f"$\\propto p_i$ and $\\eta = c\\sqrt{{q/(\\tilde\\tau T)}}$, FedNova's $\\frac1T\\sum_t\\|\\nabla F\\|^2$ fell with "
        f"slope {slope:.3f} against $q\\tilde\\tau T$"
        + ("" if slope_eff is None else f" and {slope_eff:.3f} against $q_{{\\text{{eff}}}}\\tilde\\tau T$ (the one "
           "asserted above; $q_{\\text{eff}}$: next point)")
        + f" over $q = {min(r.clients for r in big)}, \\dots, "
        f"{max(r.clients for r in big)}$ and $T = {min(r.rounds for r in big)}, \\dots, {max(r.rounds for r in big)}$ "
        f"(App. G: $-1/2$)"
        + (f"; cells with the same $q\\tilde\\tau T${_rounds_condition(min_rounds_per_client, 'q')} agreed within a "
           f"factor {worst[2]:.2f} at worst "
           f"({'; '.join(f'q={q}, T={T}: {v:.3g}' for q, T, v in worst[1])})." if worst else "."),
        f"- **Where the speedup stops.** A client drawn $k$ times trains once, with weight $k/q$ (the proof of App. G "
        f"indexes mini-batches by client), so the average is worth $q_{{\\text{{eff}}}} = q/(1 + (q-1)\\|p\\|_2^2)$ "
        f"independent updates, never more than $m$. Going from $q = {q_from}$ to $q = {q_to}$ lowered the error "
        f"{gain_big:.2f}× with $m = {m_big}$ clients ($q_{{\\text{{eff}}}}$ {eff_big[q_from]:.3g} → "
        f"{eff_big[q_to]:.3g}) but {gain_small:.2f}× with $m = {m_small}$ "
        f"($q_{{\\text{{eff}}}}$ {eff_small[q_from]:.3g} → {eff_small[q_to]:.3g}); "
        f"App. G's rate, read with $q \\ll m$, predicts $\\sqrt{{{q_to}/{q_from}}} = {math.sqrt(q_to / q_from):.2f}$.",
    ]
    if bias:
        q = min(r.clients for r in bias)
        T_short, T_long = min(r.rounds for r in bias), max(r.rounds for r in bias)
        row = {(r.tau_eff, r.rounds): r for r in bias if r.clients == q}
        fixed_short, fixed_long = row.get(("population", T_short)), row.get(("population", T_long))
        parts = []
        for choice, label in (("participants", "$\\sum_{i\\in S}\\omega_i\\|a_i\\|_1$ (the library's default under "
                                               "sampling)"),
                              ("selected_p", "App. H's $\\sum_{i\\in S}p_i\\|a_i\\|_1$")):
            a, b = row.get((choice, T_short)), row.get((choice, T_long))
            if a and b:
                parts.append(f"with {label}, {a.distance:.3g} → {b.distance:.3g} "
                             f"(closed-form limit {b.predicted:.3g}; {b.off_prediction:.3g} from it at $T = {T_long}$)")
        if parts and fixed_short and fixed_long:
            lines.append(
                f"- **FedNova's $\\tau_{{\\text{{eff}}}}$ under sampling must be fixed.** Taken from each round's sample, "
                f"it tilts the expected update towards clients with large $\\|a_i\\|_1$. With $q = {q}$ and full "
                f"gradients, as $\\eta$ fell {fixed_short.lr / fixed_long.lr:.0f}×, the averaged iterate's distance to "
                f"$x^*$ went: " + "; ".join(parts)
                + f"; with the population value $\\sum_i p_i\\,\\mathbb E\\|a_i\\|_1$ (used in all the runs above) "
                f"{fixed_short.distance:.3g} → {fixed_long.distance:.3g}." + _paired_sentence(bias, T_long))
    return "\n".join(lines)


def _rounds_condition(min_rounds_per_client: float, label: str) -> str:
    """The summaries' clause naming the cells an equal-budget comparison kept (none for 0)."""
    return f" and $T \\ge {min_rounds_per_client:g}{label}$" if min_rounds_per_client > 0 else ""


def _summary_population(name: str, rows: Sequence[SamplingRow], q_from: int, q_to: int) -> int:
    r"""The one population :math:`m` of ``rows`` (:func:`sampling_summary`'s ``big`` or ``small``), after
    checking that they are rows of sampling with replacement with a finite :math:`q_{\text{eff}}` at
    ``q_from`` and ``q_to``."""
    rows = list(rows)
    if not rows or not all(isinstance(r, SamplingRow) for r in rows):
        raise ValueError(f"{name} must be a non-empty sequence of SamplingRow (sampling_grid's rows)")
    populations = sorted({r.population for r in rows})
    if len(populations) != 1:
        raise ValueError(f"{name}: rows of one population m, got m = {populations}")
    schemes = sorted({r.scheme for r in rows} - {"with-replacement"})
    if schemes:
        raise ValueError(f"{name}: the summary describes sampling with replacement (q_eff = q / (1 + (q - 1) "
                         f"||p||^2)), got rows of scheme {schemes[0]!r}")
    have = sorted({r.clients for r in rows})
    for q in (q_from, q_to):
        cells = [r for r in rows if r.clients == q]
        if not cells:
            raise ValueError(f"{name}: no row with q = {q} (it has q = {have}): the summary states q_eff at "
                             f"q_from = {q_from} and q_to = {q_to}")
        bad = [r for r in cells if not (math.isfinite(r.effective_clients) and r.effective_clients > 0)]
        if bad:
            raise ValueError(f"{name}: the row with q = {q} has effective_clients {bad[0].effective_clients!r}, "
                             "not a number > 0 (sampling_grid's rows carry effective_participants)")
    return populations[0]


def _paired_sentence(bias: Sequence[BiasRow], rounds: int) -> str:
    """:func:`sampling_summary`'s sentence on :func:`paired_displacement_error` at ``rounds``, for every
    :math:`q` and sample-dependent choice whose rows allow it (both rows, the same seeds, a predicted
    displacement); ``""`` if none does."""
    labels = {"participants": "the library's default", "selected_p": "App. H's"}
    per_q = []
    for q in sorted({r.clients for r in bias}):
        values = []
        for choice, label in labels.items():
            try:
                if len(bias_row(bias, q, rounds, choice).averaged):  # a row without seeds has no mean
                    values.append(f"{paired_displacement_error(bias, q, rounds, choice):.3g} ({label})")
            except ValueError:  # a row missing, other seeds than the fixed run's, or no predicted displacement
                continue
        if values:
            per_q.append(f"$q = {q}$: " + ", ".join(values))
    if not per_q:
        return ""
    return (" Paired with the fixed run of the same seeds (the same participants and local work round by round), "
            "the displacement $\\overline{D}$ of the sample-dependent runs' averaged iterates from the fixed run's, set "
            f"against the predicted $x_c - x^*$ (paired displacement error $\\|\\overline{{D}} - (x_c - x^*)\\|/\\|x_c - x^*\\|$ "
            f"at $T = {rounds}$; 0: displaced as predicted, 1: not at all): " + "; ".join(per_q) + ".")


class EngineCheck(NamedTuple):
    """:func:`check_against_reference`: wall times of both engines on the same runs and
    the largest difference of their final models (``max_difference``, over every replica and coordinate).
    ``seconds_engine`` is the batched engine's and ``seconds_reference`` the reference loop's, in seconds."""

    seconds_engine: float
    seconds_reference: float
    max_difference: float

    @property
    def speedup(self) -> float:
        return self.seconds_reference / self.seconds_engine


def check_against_reference(problem: QuadraticProblem, work: RandomLocalWork, solvers: Sequence[LocalSolver],
                            rounds: int, *, aggregation: str = "fednova", sigma: float = 3.0, replicas: int = 4,
                            seed: int = 0) -> EngineCheck:
    r"""Run the same ``replicas`` noisy runs with :func:`fedlib.engines.quadratic.run_replicas`
    (all at once) and with the per-client reference loop
    (:func:`fedlib.engines.reference.run_sequential`, one replica, client and local step at
    a time, each client with its own solver via ``solver_at``); time both in this call.

    ``problem``, ``work``, ``solvers``, ``rounds`` (:math:`T`), ``sigma``, ``replicas`` and ``seed`` are
    :func:`~fedlib.engines.quadratic.run_replicas`'s; ``aggregation`` is ``"fedavg"`` or ``"fednova"`` (default)."""
    check_instance("problem", problem, QuadraticProblem)
    solvers = list(solvers)
    start = time.perf_counter()
    run = run_replicas(problem, aggregation, solvers, work, rounds, sigma=sigma, replicas=replicas, seed=seed)
    seconds_engine = time.perf_counter() - start
    start = time.perf_counter()
    diff = 0.0
    for r in range(replicas):
        ref = run_sequential(make_algorithm(aggregation, solvers[0]), np.zeros(problem.dim),
                             noisy_grad_fn(problem, sigma, seed, replicas, r, work.local_steps), problem.p, work, rounds,
                             solver_at=client_solvers(work, solvers))
        diff = max(diff, float(np.max(np.abs(ref.state.params - run.params[r]))))
    return EngineCheck(seconds_engine, time.perf_counter() - start, diff)

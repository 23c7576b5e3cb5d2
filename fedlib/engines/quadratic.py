r"""Many independent runs on quadratic clients at once, with noisy gradients and
arbitrary local work (chapter 8: Theorem 3 and linear speedup).

Clients are :math:`F_i(x) = \frac12 x^\top H_i x - e_i^\top x`
(:class:`fedlib.problems.quadratic.QuadraticProblem`); a local step of client :math:`i`
at local step :math:`k` of round :math:`t` sees the stochastic gradient

.. math::

    g_i(x) = H_i x - e_i + \sigma\,\xi^{(r)}_{t,i,k},\qquad \xi \sim N(0, I_d),

independently for every replica :math:`r` (an independent run: its own noise, the same
local work). The noise of a round is one draw ``generator(seed, "gradient_noise", t)``
of shape ``(replicas, |S_t|, max_{i in S_t} tau_i, d)`` for the round's participants
:math:`S_t` in increasing client order (all :math:`m` clients without sampling;
:func:`gradient_noise`), so a replica's run can be repeated alone with
:func:`fedlib.engines.reference.run_sequential` (:func:`noisy_grad_fn`); the tests check
both give the same numbers. Only participants draw noise, so a round with :math:`q \ll m`
sampled clients costs :math:`O(q)`, not :math:`O(m)`.

Each round, :class:`fedlib.schedules.RandomLocalWork` (or any schedule with
``draw(round) -> (steps, solver_numbers)``) gives every client its :math:`\tau_i^{(t)}` and
which of ``solvers`` it runs. Clients are sorted by :math:`\tau_i` so the ones still
running at local step :math:`k` are a prefix; their step is the one of
:class:`fedlib.solvers.LocalSolver` (heavy-ball momentum :math:`\rho_i`, proximal
:math:`\mu_i`, step sizes :math:`\eta s_{i,k}`) with per-client coefficients. The server
step is eq. (4): :math:`x^{(t+1,0)} = x^{(t,0)} + \sum_i c_i\Delta_i` with
:math:`c_i = \tau_{\text{eff}} w_i / \|a_i\|_1` from :func:`fedlib.rule.effective_weights`
and the solvers' closed-form :math:`\|a_i\|_1` (:meth:`fedlib.solvers.LocalSolver.a_norm`).

Example
-------
>>> from fedlib.problems import random_quadratic
>>> from fedlib.schedules import RandomLocalWork
>>> from fedlib.solvers import sgd, momentum_sgd
>>> prob = random_quadratic(4, 3, seed=0)
>>> work = RandomLocalWork([1, 1, 4, 4], [2, 2, 8, 8], num_solvers=2, seed=0)
>>> solvers = [sgd(0.02), momentum_sgd(0.02, 0.5)]
>>> nova = run_replicas(prob, "fednova", solvers, work, 300, sigma=0.1, replicas=4)
>>> avg = run_replicas(prob, "fedavg", solvers, work, 300, sigma=0.1, replicas=4)
>>> nova.distance.shape, float(nova.distance[0, 0]) > 4      # (rounds + 1, replicas); ||x* - 0||
((301, 4), True)
>>> bool(nova.distance[-1].max() < 0.2 < 2.5 < avg.distance[-1].min())   # FedNova near x*, FedAvg not
True
"""
from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Optional, Sequence, Union

import numpy as np

from .._validate import (check_callable, check_choice, check_finite_array, check_instance, check_int, check_int_array,
                         check_nonnegative, check_positive, check_probability_vector)
from ..problems.quadratic import QuadraticProblem
from ..rng import generator
from ..rule import AGGREGATIONS, _effective_weights_checked, aggregation_coefficients, effective_weights
from ..sampling import _sample_clients_again, check_sampling, round_participation
from ..schedules import RandomLocalWork
from ..solvers import LocalSolver, check_builtin_step, check_own_step, check_shared_lr
from ..theory import _round_chi_square
from ..tree import _scaled_norm

__all__ = ["ReplicaRun", "gradient_noise", "noisy_grad_fn", "client_solvers", "run_replicas"]


class ReplicaRun(NamedTuple):
    r"""What :func:`run_replicas` recorded, replica on the last axis.

    ``grad_norm2[t, r]`` is :math:`\|\nabla F(x^{(t,0)})\|^2` of replica ``r`` before round
    ``t`` (row ``rounds`` is after the last round); ``distance[t, r]`` is
    :math:`\|x^{(t,0)} - x^*\|`, ``surrogate_distance[t, r]`` the distance to the point
    passed as ``surrogate`` (``None`` without one); ``tau_eff`` and ``chi2`` are per round
    (the same for every replica: local work is shared); ``mean_local_steps`` is
    :math:`\tilde\tau`, the average of :math:`\bar\tau^{(t)}` over the rounds (under sampling
    §5's (after Theorem 3) :math:`\sum_{i\in\mathcal S^{(t)}}\tau_i^{(t)}/q`, a client drawn :math:`k` times
    with replacement counted :math:`k` times; NaN when ``rounds`` is 0: no round, no average);
    ``params`` is the final ``(replicas, d)``; ``mean_params`` the average of
    :math:`x^{(t,0)}` over the second half of the rounds, :math:`t \ge \lceil T/2\rceil`
    (Polyak averaging: where a run wanders around, without its noise);
    ``surrogate_grad_norm2[t, r]`` is :math:`\|\nabla\widetilde F(x^{(t,0)})\|^2` of the
    surrogate :math:`\widetilde F = \sum_i w_i F_i` whose weights were passed as
    ``surrogate_weights`` (``None`` without them; Theorem 1's left-hand side).

    Example
    -------
    One round of FedAvg on :func:`run_replicas`' two scalar clients (:math:`x^* = 1/2`): the model moves
    from 0 to :math:`0.375`, so the distance goes from :math:`0.5` to :math:`0.125`; :math:`\chi^2` between
    :math:`p = (1/2, 1/2)` and FedAvg's :math:`w = (1/3, 2/3)` is
    :math:`\tfrac{(1/6)^2}{1/3} + \tfrac{(1/6)^2}{2/3} = 1/8`:

    >>> import numpy as np
    >>> from fedlib.problems.quadratic import QuadraticProblem
    >>> from fedlib.schedules import RandomLocalWork
    >>> from fedlib.solvers import sgd
    >>> prob = QuadraticProblem(H=np.ones((2, 1, 1)), e=np.array([[0.0], [1.0]]), p=np.array([0.5, 0.5]))
    >>> work = RandomLocalWork(low=[1, 2], high=[1, 2])      # tau = (1, 2) every round
    >>> run = run_replicas(prob, "fedavg", [sgd(0.5)], work, 1)
    >>> run.distance[:, 0], run.tau_eff, run.chi2, run.mean_local_steps, run.params
    (array([0.5  , 0.125]), array([1.5]), array([0.125]), 1.5, array([[0.375]]))
    """

    grad_norm2: np.ndarray
    distance: np.ndarray
    surrogate_distance: Optional[np.ndarray]
    tau_eff: np.ndarray
    chi2: np.ndarray
    mean_local_steps: float
    params: np.ndarray
    mean_params: np.ndarray
    surrogate_grad_norm2: Optional[np.ndarray] = None


def gradient_noise(seed: int, round_index: int, replicas: int, num_clients: int, max_steps: int, dim: int,
                   sigma: float) -> np.ndarray:
    r""":math:`\sigma\xi` of round ``round_index``: shape ``(replicas, num_clients, max_steps, d)``
    (``num_clients``: the round's participants, in increasing client order), one draw from
    ``generator(seed, "gradient_noise", round_index)`` (zeros when ``sigma == 0``); ``sigma`` must be
    a finite number >= 0, ``seed``, ``round_index`` and the four sizes integers >= 0 (``ValueError`` naming the
    argument). Used by :func:`run_replicas` and :func:`noisy_grad_fn`.

    Example
    -------
    One standard normal draw scaled by :math:`\sigma`, so :math:`\sigma = 2` is exactly twice :math:`\sigma = 1`:

    >>> import numpy as np
    >>> noise = gradient_noise(0, 5, replicas=2, num_clients=3, max_steps=4, dim=1, sigma=2.0)
    >>> noise.shape, bool(np.array_equal(noise, 2 * gradient_noise(0, 5, 2, 3, 4, 1, sigma=1.0)))
    ((2, 3, 4, 1), True)
    >>> bool(gradient_noise(0, 5, 2, 3, 4, 1, sigma=0.0).any())
    False
    """
    check_nonnegative("sigma", sigma)
    seed, round_index = check_int("seed", seed), check_int("round_index", round_index)
    sizes = [check_int(name, value) for name, value in (("replicas", replicas), ("num_clients", num_clients),
                                                         ("max_steps", max_steps), ("dim", dim))]
    return _gradient_noise(seed, round_index, *sizes, sigma)


def _gradient_noise(seed: int, round_index: int, replicas: int, num_clients: int, max_steps: int, dim: int,
                    sigma: float) -> np.ndarray:
    """:func:`gradient_noise` for a ``sigma`` already checked (:func:`run_replicas`, every round)."""
    shape = (replicas, num_clients, max_steps, dim)
    if sigma == 0:
        return np.zeros(shape)
    return sigma * generator(seed, "gradient_noise", round_index).standard_normal(shape)


def noisy_grad_fn(problem: QuadraticProblem, sigma: float, seed: int, replicas: int, replica: int,
                  local_steps: Callable[[int], Any], *, sampling: Any = "full",
                  clients_per_round: Optional[int] = None) -> Callable[[np.ndarray, int, int, int], np.ndarray]:
    r"""``grad_fn(x, client, round, step)`` of replica ``replica`` (``0 <= replica < replicas``) for
    :func:`fedlib.engines.reference.run_sequential`: the same gradients :func:`run_replicas`
    uses (``local_steps(round)``, a callable, gives the round's :math:`\tau_i`, to size the draw;
    ``sampling``/``clients_per_round`` must be those of the run, which fix who draws noise; a sampler
    callable is called once per round, as :func:`run_replicas` calls it).

    ``problem`` is the :class:`~fedlib.problems.quadratic.QuadraticProblem`; ``sigma``, ``seed`` and ``replicas`` must
    be the run's, as :func:`run_replicas` takes them.

    Example
    -------
    Replica 1 of a noisy :func:`run_replicas` run, repeated alone by the per-client loop, lands on the
    same point:

    >>> import numpy as np
    >>> from fedlib.problems.quadratic import QuadraticProblem
    >>> from fedlib.schedules import RandomLocalWork
    >>> from fedlib.solvers import sgd
    >>> prob = QuadraticProblem(H=np.ones((2, 1, 1)), e=np.array([[0.0], [1.0]]), p=np.array([0.5, 0.5]))
    >>> work = RandomLocalWork(low=[1, 2], high=[1, 2])      # tau = (1, 2) every round
    >>> from fedlib.algorithms import make_algorithm
    >>> from fedlib.engines.reference import run_sequential
    >>> batch = run_replicas(prob, "fednova", [sgd(0.5)], work, 3, sigma=0.1, replicas=2, seed=1)
    >>> grad_fn = noisy_grad_fn(prob, sigma=0.1, seed=1, replicas=2, replica=1, local_steps=work.local_steps)
    >>> alone = run_sequential(make_algorithm("fednova", sgd(0.5)), np.zeros(1), grad_fn, prob.p, work, 3)
    >>> bool(np.allclose(alone.state.params, batch.params[1], rtol=0, atol=1e-14))
    True
    """
    check_instance("problem", problem, QuadraticProblem)
    check_sampling(sampling, clients_per_round)
    sigma = check_nonnegative("sigma", sigma)
    seed = check_int("seed", seed)
    replicas = check_int("replicas", replicas, minimum=1)
    if check_int("replica", replica) >= replicas:
        raise ValueError(f"replica must be in 0..{replicas - 1} (one of the run's replicas), got {replica!r}")
    # else "'list' object is not callable" at the first gradient, inside the run
    check_callable("local_steps", local_steps, "round -> (m,) local steps",
                   " (a schedule's method: schedule.local_steps)" if hasattr(local_steps, "local_steps") else "",
                   nargs=1)
    cache: dict = {}

    def grad(x, client, round_index, step):
        if cache.get("round") != round_index:
            part = round_participation(sampling, problem.p, clients_per_round, seed, round_index)
            tau_max = int(np.max(np.asarray(local_steps(round_index))[part.clients]))
            cache["round"] = round_index
            cache["rank"] = {int(c): k for k, c in enumerate(part.clients)}
            cache["noise"] = gradient_noise(seed, round_index, replicas, part.clients.size, tau_max, problem.dim,
                                            sigma)[replica]
        return problem.grad(x, client) + cache["noise"][cache["rank"][client], step]

    return grad


def client_solvers(work, solvers: Sequence[LocalSolver]) -> Callable[[int, int], LocalSolver]:
    """``solver_at(round, client)`` for :func:`fedlib.engines.reference.run_sequential`: the
    solver ``work.draw(round)`` gives the client, as :func:`run_replicas` uses it (the
    round's draw is made once, not once per client). The solvers share one base learning rate
    (:func:`fedlib.solvers.check_shared_lr`). Chapter 8 runs Theorem 3's per-client solvers this way.

    Example
    -------
    >>> from fedlib.schedules import RandomLocalWork
    >>> from fedlib.solvers import momentum_sgd, sgd
    >>> work = RandomLocalWork(low=[1, 1, 1], high=[3, 3, 3], num_solvers=2, seed=0)
    >>> solvers = [sgd(0.1), momentum_sgd(0.1, momentum=0.5)]
    >>> solver_at = client_solvers(work, solvers)
    >>> numbers = work.draw(0)[1]
    >>> all(solver_at(0, client) is solvers[numbers[client]] for client in range(3))
    True
    """
    solvers = check_shared_lr("solvers", solvers)
    cache: dict = {}

    def solver_at(round_index, client):
        if cache.get("round") != round_index:
            cache["round"] = round_index
            cache["numbers"] = work.draw(round_index)[1]
        return solvers[cache["numbers"][client]]

    return solver_at


def run_replicas(problem: QuadraticProblem, aggregation: str, solvers: Sequence[LocalSolver], work, rounds: int, *,
                 sigma: float = 0.0, replicas: int = 1, seed: int = 0, sampling: Any = "full",
                 clients_per_round: Optional[int] = None, tau_eff: Union[None, float, str] = None, x0: Any = None,
                 surrogate: Any = None, surrogate_weights: Any = None,
                 progress: Optional[Callable[[int], None]] = None) -> ReplicaRun:
    r"""Run ``replicas`` independent runs of FedAvg or FedNova (plain server step) at once.

    Parameters
    ----------
    problem : the quadratic clients and their weights :math:`p_i`.
    aggregation : ``"fedavg"`` (:math:`w_i \propto p_i\|a_i\|_1`) or ``"fednova"``
        (:math:`w_i = p_i`, :math:`\tau_{\text{eff}} = \sum_i p_i\|a_i\|_1`).
    solvers : the local solvers a client may run, with one base learning rate :math:`\eta`
        (:func:`fedlib.solvers.check_shared_lr`; per-client step sizes are ``lr_schedule``
        factors of it); no weight decay.
    work : ``draw(round) -> (steps (m,), solver_numbers (m,))``, e.g.
        :class:`fedlib.schedules.RandomLocalWork`; with one solver, any schedule with
        ``local_steps(round) -> (m,)`` steps (e.g. :class:`fedlib.schedules.FixedSteps`, or one of your own),
        every client running ``solvers[0]``. Steps are whole numbers :math:`\ge 0`, :math:`\ge 1` for the round's
        participants (a client a sampler leaves out may do no work, as in the other engines:
        :func:`fedlib.schedules.check_participant_steps`); ``draw``'s steps alike.
    rounds : :math:`T`.
    sigma : gradient noise :math:`\sigma \ge 0` (0: full gradients, every replica the same).
    replicas, seed : number of independent runs; the seed of the noise and sampling streams.
    sampling, clients_per_round : participation (:func:`fedlib.sampling.sample_clients`,
        drawn with ``seed``; the same participants for every replica), or your own sampler
        ``round -> Participation`` (:func:`fedlib.sampling.round_participation`, called once per
        round; ``clients_per_round`` then ``None``). The participants'
        weights :math:`\omega_i` replace :math:`p_i` in eq. (4), as in
        :meth:`fedlib.algorithms.FederatedAlgorithm.apply`; ``mean_local_steps`` then
        averages :math:`\tau_i` over the :math:`q` draws (App. G's :math:`\tilde\tau`; with
        replacement a client drawn twice counts twice; a sampler's participants, distinct, once each).
    tau_eff : FedNova only: a fixed :math:`\tau_{\text{eff}}` for every round (e.g.
        :math:`\sum_i p_i\,\mathbb E\|a_i\|_1` over all clients) instead of
        :math:`\sum_{i\in S}\omega_i\|a_i\|_1` of the round's participants (``None``), or
        ``"selected_p"``: App. H's :math:`\sum_{i\in S}p_i\|a_i\|_1`. Under sampling both
        sample-dependent choices multiply two sample-dependent factors, and
        :math:`\mathbb E[\tau_{\text{eff}}\sum_i\omega_i d_i]` then leans towards clients with
        large :math:`\|a_i\|_1` (:func:`fedlib.sampling.expected_server_weights`); a fixed value
        keeps the expected update on :math:`F` (chapter 8).
    x0 : starting point (default 0).
    surrogate : a point :math:`\tilde x` (e.g. the minimiser of a surrogate objective) whose
        distance to every iterate is recorded too.
    surrogate_weights : weights :math:`w` (``(m,)``, non-negative, summing to 1) of a
        surrogate :math:`\widetilde F = \sum_i w_i F_i` whose squared gradient norm at every
        iterate is recorded too (Theorem 1 bounds it; chapter 7).
    progress : called with the round index after every round (e.g. a progress bar); ``None`` or a callable
        (``ValueError`` otherwise, before the first round).

    Returns
    -------
    :class:`ReplicaRun`. A ``FloatingPointError`` names the round in which an iterate stops being finite.

    Example
    -------
    :func:`fedlib.engines.reference.run_sequential`'s two clients, :math:`F_i(x) = \tfrac12(x - c_i)^2`,
    :math:`c = (0, 1)`, :math:`\tau = (1, 2)`, :math:`\eta = 1/2`, without noise. One round: FedAvg at
    :math:`0.375`, FedNova at :math:`0.28125`; their round maps :math:`x \mapsto \tfrac38 x + \tfrac38` and
    :math:`x \mapsto \tfrac{11}{32} x + \tfrac9{32}` have the fixed points :math:`3/5` and :math:`3/7`:

    >>> import numpy as np
    >>> from fedlib.problems.quadratic import QuadraticProblem
    >>> from fedlib.schedules import RandomLocalWork
    >>> from fedlib.solvers import sgd
    >>> prob = QuadraticProblem(H=np.ones((2, 1, 1)), e=np.array([[0.0], [1.0]]), p=np.array([0.5, 0.5]))
    >>> work = RandomLocalWork(low=[1, 2], high=[1, 2])      # tau = (1, 2) every round
    >>> [float(run_replicas(prob, name, [sgd(0.5)], work, 1).params[0, 0]) for name in ("fedavg", "fednova")]
    [0.375, 0.28125]
    >>> limits = [float(run_replicas(prob, name, [sgd(0.5)], work, 40).params[0, 0]) for name in ("fedavg", "fednova")]
    >>> round(limits[0] * 5, 12), round(limits[1] * 7, 12)
    (3.0, 3.0)
    """
    check_instance("problem", problem, QuadraticProblem)
    check_choice("aggregation", aggregation, AGGREGATIONS)
    solvers = check_shared_lr("solvers", solvers)
    for j, solver in enumerate(solvers):  # its ||a_i||_1 is the closed form a_norm(tau)
        check_builtin_step(f"solvers[{j}]", [solver], "run_replicas' closed-form step does not take: run it "
                           "through fedlib.engines.reference.run_sequential")
        check_own_step(f"solvers[{j}]", solver)
        if solver.weight_decay:
            raise ValueError(f"solvers[{j}]: weight decay is not supported by run_replicas, "
                             f"got {solver.weight_decay!r}")
    rounds = check_int("rounds", rounds, minimum=0)
    drawn = callable(getattr(work, "draw", None))
    if not drawn:  # a step schedule has local_steps, not the solver numbers: enough when there is one solver
        if not callable(getattr(work, "local_steps", None)):
            raise ValueError(f"work must have draw(round) -> (steps, solver_numbers), e.g. "
                             f"fedlib.schedules.RandomLocalWork, or, with one solver, be a schedule with "
                             f"local_steps(round) -> (m,) steps; got {type(work).__name__}")
        if len(solvers) != 1:
            raise ValueError(f"work must have draw(round) -> (steps, solver_numbers), e.g. "
                             f"fedlib.schedules.RandomLocalWork(..., num_solvers={len(solvers)}), to say which of the "
                             f"{len(solvers)} solvers each client runs; {type(work).__name__} has only "
                             "local_steps(round) (enough with one solver)")
    sigma = check_nonnegative("sigma", sigma)
    replicas = check_int("replicas", replicas, minimum=1)
    seed = check_int("seed", seed)
    check_sampling(sampling, clients_per_round)
    if progress is not None:  # else a TypeError after round 0 has run
        check_callable("progress", progress, "round -> None (e.g. a progress bar's update)", nargs=1)
    if tau_eff is not None:
        if aggregation != "fednova":
            raise ValueError("tau_eff: only FedNova takes a tau_eff policy (FedAvg's is implicit)")
        if isinstance(tau_eff, str):
            if tau_eff != "selected_p":
                raise ValueError(f"tau_eff must be None, a number > 0 or 'selected_p', got {tau_eff!r}")
        else:
            tau_eff = check_positive("tau_eff", tau_eff)
    m, d = problem.num_clients, problem.dim
    # RandomLocalWork's own draw hands out int64 steps >= 1 and solver numbers in 0..num_solvers-1, one per client
    # (checked when it was made): for m clients, what the checks of each round would return, so they are not made
    trusted = type(work) is RandomLocalWork and work.num_clients == m
    x = np.zeros((replicas, d)) if x0 is None else np.broadcast_to(
        check_finite_array("x0", x0, shape=(d,)), (replicas, d)).copy()
    p = problem.p
    h_bar = np.einsum("i,ijk->jk", p, problem.H)
    e_bar = p @ problem.e
    x_star = problem.optimum()
    x_tilde = None if surrogate is None else check_finite_array("surrogate", surrogate, shape=(d,))
    if surrogate_weights is not None:
        w_sur = check_probability_vector("surrogate_weights", surrogate_weights, size=m)
        h_sur, e_sur = np.einsum("i,ijk->jk", w_sur, problem.H), w_sur @ problem.e
    rho = np.array([s.momentum for s in solvers])
    mu = np.array([s.mu for s in solvers])
    a_norm_cache: dict = {}
    lr_cache: list = [np.empty((len(solvers), 0))]
    p64 = np.asarray(p, dtype=np.float64)  # what round 0's check of p returns: later rounds draw with it

    grad_norm2 = np.empty((rounds + 1, replicas))
    distance = np.empty((rounds + 1, replicas))
    surrogate_distance = None if x_tilde is None else np.empty((rounds + 1, replicas))
    surrogate_grad_norm2 = None if surrogate_weights is None else np.empty((rounds + 1, replicas))

    def record(row, xs):
        with np.errstate(over="ignore"):  # a run on its way to diverging: inf once a squared norm passes 1.8e308
            g = xs @ h_bar.T - e_bar
            grad_norm2[row] = np.einsum("rd,rd->r", g, g)
            # not np.linalg.norm: its sqrt(x.x) is inf past ~1.3e154, for a distance that is finite
            distance[row] = _scaled_norm(xs - x_star, axis=1)
            if x_tilde is not None:
                surrogate_distance[row] = _scaled_norm(xs - x_tilde, axis=1)
            if surrogate_grad_norm2 is not None:
                gs = xs @ h_sur.T - e_sur
                surrogate_grad_norm2[row] = np.einsum("rd,rd->r", gs, gs)

    tau_eff_rounds = np.empty(rounds)
    chi2 = np.empty(rounds)
    record(0, x)
    average_from = (rounds + 1) // 2
    x_sum = x.copy() if average_from == 0 else np.zeros_like(x)
    total_steps = 0.0
    for t in range(rounds):
        if drawn:
            steps, choice = work.draw(t)
            steps_name = f"work.draw({t}): steps"
            if not trusted:
                steps = check_int_array(steps_name, steps, size=m, minimum=0)
                choice = check_int_array(f"work.draw({t}): solver numbers", choice, size=m, minimum=0)
        else:  # a schedule: every client runs the one solver
            steps_name = f"work.local_steps({t})"
            steps = check_int_array(steps_name, work.local_steps(t), size=m, minimum=0)
            choice = np.zeros(m, dtype=np.int64)
        if (choice >= len(solvers)).any():
            raise ValueError(f"work.draw({t}): solver numbers must be in 0..{len(solvers) - 1}, got {choice!r}")
        if t == 0 or callable(sampling):  # round 0 checks scheme, p and q; they are the same in every round
            part = round_participation(sampling, p, clients_per_round, seed, t)
            q_int = None if clients_per_round is None or callable(sampling) else int(clients_per_round)
        else:
            part = _sample_clients_again(sampling, p64, q_int, seed, t)
        by_steps = np.argsort(-steps[part.clients], kind="stable")  # participants, tau descending
        order, omega = part.clients[by_steps], part.weights[by_steps]
        tau = steps[order]
        if tau[-1] < 1:  # tau descending: a participant without a step (a client out of the round may do none)
            idle = int(part.clients[np.argmax(steps[part.clients] < 1)])
            raise ValueError(f"{steps_name} must be >= 1 for every participant of the round (client {idle} has "
                             f"{int(steps[idle])}: leave a client without work out of the round)")
        sol = choice[order]
        # App. G's tau~: the mean over the q draws; with replacement a client drawn k times counts k times
        # (omega = k / q); otherwise every participant once
        total_steps += float(omega @ tau) if sampling == "with-replacement" else float(tau.mean())
        tau_max = int(tau[0])
        noise = _gradient_noise(seed, t, replicas, order.size, tau_max, d, sigma)[:, by_steps]
        H, e = problem.H[order], problem.e[order]
        lr_table = _step_sizes(solvers, tau_max, lr_cache)[sol, :tau_max]  # (participants, tau_max)
        rho_i, mu_i = rho[sol][None, :, None], mu[sol][None, :, None]
        x_start = x[:, None, :]  # (replicas, 1, d): broadcast over the participants
        xl = np.repeat(x_start, order.size, axis=1)
        u = np.zeros(xl.shape)
        a_norms = np.array([_a_norm(solvers[j], tk, a_norm_cache, j) for j, tk in zip(sol.tolist(), tau.tolist())])
        policy = float(p[order] @ a_norms) if tau_eff == "selected_p" else tau_eff
        if a_norms.min() > 0 and a_norms.max() < math.inf and (policy is None or 0 < policy < math.inf):
            # omega: the round's checked weights (a built-in scheme's, or a sampler's that round_participation
            # checked); a_norms and the policy pass the checks effective_weights would make: not made again
            te, w = _effective_weights_checked(aggregation, omega, a_norms, policy)
        else:  # effective_weights names what is wrong
            te, w = effective_weights(aggregation, omega, a_norms, tau_eff=policy)
        # effective_weights has checked w and a_norms (finite, >= 0, > 0) and te (> 0): only an infinite te is
        # left for aggregation_coefficients to refuse
        c = te * w / a_norms if type(te) is float and te < math.inf else aggregation_coefficients(te, w, a_norms)
        with np.errstate(over="ignore", invalid="ignore"):  # a diverging run is reported below, by round
            _local_steps(xl, u, x_start, H, e, noise, tau, lr_table, rho_i, mu_i)
            x = x + np.einsum("i,rid->rd", c, xl - x_start)
        if not np.isfinite(x).all():
            raise FloatingPointError(f"round {t}: the iterate is not finite (diverged)")
        tau_eff_rounds[t] = te
        chi2[t] = _round_chi_square(omega, w)  # checked weights (a sampler's by round_participation)
        record(t + 1, x)
        if t + 1 >= average_from:
            x_sum += x
        if progress is not None:
            progress(t)
    mean_steps = total_steps / rounds if rounds else math.nan  # no round, no average
    return ReplicaRun(grad_norm2, distance, surrogate_distance, tau_eff_rounds, chi2, mean_steps, x,
                      x_sum / (rounds + 1 - average_from), surrogate_grad_norm2)


def _local_steps(xl, u, x_start, H, e, noise, tau, lr_table, rho_i, mu_i) -> None:
    r"""All local steps of a round, in place on ``xl`` (iterates) and ``u`` (momentum buffers).

    Step :math:`k` runs the :math:`n_k = \#\{i: \tau_i > k\}` clients still running (a prefix: ``tau`` is sorted
    descending), every replica at once: :math:`g = H_i x - e_i + \sigma\xi_{i,k}`, :math:`u \leftarrow \rho_i u + g`,
    :math:`x \leftarrow x - \eta s_{i,k}\,(u + \mu_i (x - x^{(t,0)}))`. The views of a run of steps with the same
    :math:`n_k` are taken once, and each line's sums and products after its first are taken in place: the operations
    of the expressions with temporaries, in their order (a product or sum with its operands swapped is the same
    number; a NaN's payload aside, and a non-finite iterate stops the run), hence the same bits, with half the
    calls per step. ``x_start`` is :math:`x^{(t,0)}` of shape ``(replicas, 1, d)`` or ``(replicas, q, d)``."""
    K = int(tau[0])
    active = np.searchsorted(-tau, -np.arange(K), side="left")  # n_k = #{tau_i > k}, non-increasing
    bounds = [0] + (np.flatnonzero(active[1:] != active[:-1]) + 1).tolist() + [K]  # runs of equal n_k
    lr_cols = lr_table.T[:, None, :, None]  # (K, 1, q, 1): step k's sizes, broadcast over replicas and d
    for k0, k1 in zip(bounds[:-1], bounds[1:]):
        n = int(active[k0])
        xs, us, xs_col = xl[:, :n], u[:, :n], xl[:, :n, :, None]
        Hn, en, rho_n, mu_n, xst, noise_n = H[:n], e[:n], rho_i[:, :n], mu_i[:, :n], x_start[:, :n], noise[:, :n]
        for k in range(k0, k1):
            g = np.matmul(Hn, xs_col)[..., 0]
            g -= en
            g += noise_n[:, :, k]
            us *= rho_n
            us += g
            step = xs - xst
            step *= mu_n
            step += us  # the direction u + mu (x - x_start)
            step *= lr_cols[k, :, :n]
            xs -= step


def _step_sizes(solvers: Sequence[LocalSolver], tau_max: int, cache: list) -> np.ndarray:
    """The table ``(len(solvers), >= tau_max)``: row ``j`` holds ``solvers[j]``'s step sizes ``step_size(k)``,
    ``k = 0, 1, ...``; remembered in ``cache[0]`` and redrawn wider when a round needs more steps."""
    have = cache[0]
    if have.shape[1] < tau_max:
        have = cache[0] = np.array([[solver.step_size(k) for k in range(tau_max)] for solver in solvers])
    return have


def _a_norm(solver: LocalSolver, tau: int, cache: dict, key: int) -> float:
    """``solver.a_norm(tau)``, remembered in ``cache`` per (solver number ``key``, ``tau``)."""
    value = cache.get((key, tau))
    if value is None:
        value = cache[(key, tau)] = solver.a_norm(tau)
    return value

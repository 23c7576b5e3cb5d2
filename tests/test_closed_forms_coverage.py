"""Closed forms that had no test against what the library's code actually does, on random inputs.

An audit of every public closed form (solvers, schedules, sampling, rule, theory, tradeoff,
anatomy) against the tests found these compared only on hand-picked inputs, only with a re-typed
copy of the formula, or not at all. Each test below draws random instances (several seeds) and
compares the closed form with the library's own operational path:

* :meth:`LocalSolver.a_vector` / ``a_norm`` with a random within-round schedule, momentum, prox
  and weight decay, against the real run's change and unit-impulse runs;
* :func:`expected_a_norms` / :func:`population_tau_eff` for the *epoch* schedules, against the
  mean of what real rounds of :func:`run_sequential` report (tolerance: 5 standard errors);
* :meth:`WallClock.seconds_to_finish` as the shortest window in which the clock's own step
  count gives every client its steps, and :meth:`WallClock.round_duration` as the time the
  clients need to finish what the fixed-length round gave them;
* :attr:`RandomLocalWork.mean_steps` against the schedule's draws;
* :func:`weight_moments` and :func:`effective_participants` against the real seeded sampler
  (``rng.choice``; the exhaustive tests replace it by a fixed draw);
* :func:`expected_server_weights` against the mean server step of real sampled FedNova rounds;
* :func:`fedavg_weights`, :func:`fednova_weights` and :func:`aggregation_coefficients` against one
  real round of the engine with heterogeneous solvers, with the clients' changes and
  :math:`\\|a_i\\|_1` measured independently;
* :func:`chi_square` (with :func:`quadratic_kappa2` and :func:`theorem2_bound`): the gradient floor
  :math:`\\chi^2\\kappa^2` attained at the limit of real FedAvg rounds, for any number of clients;
* :func:`theorem1_max_beta2` as the edge of :func:`theorem1_explicit_bound`'s step-size condition;
* :func:`official_inplace_a_vector` against the official in-place dynamics run by the library's
  momentum solver, and bit for bit against its former O(tau^2) loop of one run per entry, and
  :func:`official_counter_a_norm` where it is right (one feature);
* :func:`fedprox_curves` against real proximal-SGD runs (:func:`measured_fedprox_weights`, the solver's counter,
  and :func:`probed_fedprox_weights`, its steps' changes), and
  :func:`closed_form_distances` against real FedProx / FedNova rounds on random quadratics.
"""
from __future__ import annotations

import math
import types

import numpy as np
import pytest

from fedlib import anatomy, theory, tradeoff
from fedlib.algorithms import make_algorithm
from fedlib.engines.reference import run_sequential
from fedlib.problems import random_quadratic
from fedlib.problems.quadratic import QuadraticProblem
from fedlib.rule import aggregate, aggregation_coefficients, fedavg_weights, fednova_weights
from fedlib.sampling import effective_participants, expected_server_weights, sample_clients, weight_moments
from fedlib.schedules import (FixedEpochs, FixedSteps, RandomEpochs, RandomLocalWork, WallClock, expected_a_norms,
                              population_tau_eff)
from fedlib.solvers import LocalSolver, decayed_sgd, momentum_proximal_sgd, momentum_sgd, proximal_sgd, sgd

SEEDS = range(4)


def _within(mean, want, se, k=5.0, atol=1e-12):
    """|mean - want| <= k standard errors (+ atol for draws without spread), elementwise."""
    mean, want, se = (np.asarray(v, dtype=float) for v in (mean, want, se))
    return bool(np.all(np.abs(mean - want) <= k * se + atol))


# ------------------------------------------------------------------ solvers: a_i with schedule, momentum, prox, wd
@pytest.mark.parametrize("seed", range(8))
def test_a_vector_rebuilds_the_real_change_for_random_schedule_momentum_prox_and_weight_decay(seed):
    r"""Random lr, tau, step-size factors s_k, rho, mu and weight decay: the real run on a random
    quadratic moves by -eta G a (G = gradient + lambda x, as recorded), a_vector is the unit-impulse
    response of the real solver, a_norm its sum and the solver's online counter."""
    rng = np.random.default_rng(500 + seed)
    lr, tau, d = float(rng.uniform(0.01, 0.3)), int(rng.integers(1, 25)), 5
    factors = rng.uniform(0.2, 2.0, size=tau) if seed % 4 else None  # seeds 0, 4: no schedule
    top = lr * (1.0 if factors is None else float(factors.max()))
    rho = float(rng.uniform(0, 0.95)) if seed % 3 else 0.0
    mu = float(rng.uniform(0, 1.0 / top)) if seed % 2 else 0.0
    wd = float(rng.uniform(0, 0.3))
    sched = None if factors is None else (lambda k, f=factors: float(f[k]))
    solver = LocalSolver(lr, momentum=rho, mu=mu, weight_decay=wd, lr_schedule=sched)

    Q = rng.standard_normal((d, d))
    A, b = Q @ Q.T / d + 0.3 * np.eye(d), rng.standard_normal(d)
    x0 = rng.standard_normal(d)
    cols = []

    def grad(x, k):
        g = A @ x - b
        cols.append(g + wd * x)
        return g

    state = solver.run(x0, grad, tau)
    a = solver.a_vector(tau)
    np.testing.assert_allclose(state.params - x0, -lr * np.stack(cols, axis=1) @ a, rtol=1e-10, atol=1e-13)

    plain = LocalSolver(lr, momentum=rho, mu=mu, lr_schedule=sched)
    impulses = np.array([-plain.run(np.zeros(1), lambda x, k, j=j: np.array([float(k == j)]), tau).params[0] / lr
                         for j in range(tau)])
    np.testing.assert_allclose(a, impulses, rtol=1e-10, atol=1e-13)
    assert solver.a_norm(tau) == pytest.approx(impulses.sum(), rel=1e-10)
    assert solver.a_norm(tau) == pytest.approx(state.a_norm, rel=1e-10)


# ------------------------------------------------------------------ schedules
@pytest.mark.parametrize("seed", SEEDS)
def test_expected_a_norms_of_epoch_schedules_are_what_real_rounds_report(seed):
    r"""RandomEpochs / FixedEpochs with random n_i, B, epoch range and solver: the mean ||a_i||_1 the
    clients of real FedNova rounds report is expected_a_norms, and the mean tau_eff (FedNova's default
    sum_i p_i ||a_i||_1) is population_tau_eff, within 5 standard errors."""
    rng = np.random.default_rng(600 + seed)
    m, rounds = 3, 800
    p = rng.dirichlet(np.ones(m))
    B = int(rng.integers(2, 6))
    n = rng.integers(1, 3 * B + 1, size=m)
    lo = int(rng.integers(1, 3))
    hi = lo + int(rng.integers(1, 3))
    schedule = FixedEpochs(n, B, lo) if seed == 3 else RandomEpochs(n, B, lo, hi, seed=seed)
    lr = 0.05
    solver = [momentum_sgd(lr, float(rng.uniform(0.1, 0.9))), proximal_sgd(lr, float(rng.uniform(1, 15))),
              momentum_proximal_sgd(lr, float(rng.uniform(0.1, 0.9)), mu=float(rng.uniform(1, 15))),
              decayed_sgd(lr, gamma=float(rng.uniform(0.5, 0.95)))][seed % 4]
    run = run_sequential(make_algorithm("fednova", solver), np.zeros(1), lambda x, i, t, k: np.zeros(1), p,
                         schedule, rounds)
    reported = np.array([dg.a_norms for dg in run.diagnostics])
    want = expected_a_norms(schedule, solver)
    assert _within(reported.mean(0), want, reported.std(0, ddof=1) / math.sqrt(rounds)), (reported.mean(0), want)
    taus = np.array([dg.tau_eff for dg in run.diagnostics])
    assert _within(taus.mean(), population_tau_eff(p, schedule, solver), taus.std(ddof=1) / math.sqrt(rounds))


def _clock_kwargs(rng, seed):
    return dict(jitter=float(rng.uniform(0, 0.5)), straggler_prob=float(rng.uniform(0.1, 0.5)),
                straggler_factor=float(rng.uniform(0.05, 0.5)), seed=seed)


@pytest.mark.parametrize("seed", range(5))
def test_seconds_to_finish_is_the_shortest_window_that_gives_every_client_its_steps(seed):
    r"""A synchronous round that waits for tau_i steps lasts T* = seconds_to_finish(tau, t): the
    clock's own step count (WallClock.local_steps, same speeds) gives every client its tau_i in a
    window T*(1 + 1e-9), and some client falls short in T*(1 - 1e-6)."""
    rng = np.random.default_rng(700 + seed)
    m = int(rng.integers(2, 8))
    speeds = rng.uniform(0.2, 20.0, size=m)
    kw = _clock_kwargs(rng, seed)
    clock = WallClock(speeds, float(rng.uniform(0.5, 3.0)), **kw)
    for t in range(6):
        steps = rng.integers(2, 40, size=m)
        need = clock.seconds_to_finish(steps, t)
        assert np.all(WallClock(speeds, need * (1 + 1e-9), **kw).local_steps(t) >= steps)
        assert np.any(WallClock(speeds, need * (1 - 1e-6), **kw).local_steps(t) < steps)


@pytest.mark.parametrize("seed", range(5))
def test_round_duration_is_the_time_clients_need_for_what_the_round_gave_them(seed):
    r"""A fixed-length round lasts as long as its slowest client needs for the steps it was given
    (at least round_seconds): round_duration(t) = max(T, seconds_to_finish(local_steps(t), t)),
    with slow stragglers forced to one step that take longer than T."""
    rng = np.random.default_rng(800 + seed)
    m = int(rng.integers(3, 9))
    T = float(rng.uniform(0.5, 3.0))
    speeds = rng.uniform(0.3 / T, 30.0, size=m)
    speeds[0] = 0.2 / T  # a client that can rarely finish one step in the window
    clock = WallClock(speeds, T, **_clock_kwargs(rng, seed))
    longer = 0
    for t in range(10):
        real = max(T, clock.seconds_to_finish(clock.local_steps(t), t))
        assert clock.round_duration(t) == pytest.approx(real, rel=1e-12)
        longer += real > T * (1 + 1e-9)
    assert longer > 0  # some rounds outlast the window: the comparison is not only T = T


@pytest.mark.parametrize("seed", range(3))
def test_mean_steps_of_random_local_work_is_the_mean_of_its_draws(seed):
    rng = np.random.default_rng(900 + seed)
    m, n = int(rng.integers(2, 6)), 2000
    low = rng.integers(1, 10, size=m)
    work = RandomLocalWork(low, low + rng.integers(0, 12, size=m), num_solvers=2, seed=seed)
    draws = np.array([work.local_steps(t) for t in range(n)], dtype=float)
    assert _within(draws.mean(0), work.mean_steps, draws.std(0, ddof=1) / math.sqrt(n))


# ------------------------------------------------------------------ sampling
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("scheme", ["with-replacement", "uniform"])
def test_weight_moments_and_q_eff_by_the_real_seeded_sampler(scheme, seed):
    r"""E[omega_i omega_j], E[1{i in S} omega_j] and 1/q_eff = E[sum_i omega_i^2] against the means over
    4,000 rounds of sample_clients (the real seeded rng.choice), within 5 standard errors."""
    rng = np.random.default_rng(1000 + seed)
    m = int(rng.integers(3, 7))
    q = int(rng.integers(2, m + 1)) if scheme == "uniform" else int(rng.integers(2, 2 * m))
    p = rng.dirichlet(np.ones(m))
    n = 4000
    pair, presence = np.empty((n, m, m)), np.empty((n, m, m))
    for t in range(n):
        part = sample_clients(scheme, p, q, seed, t)
        omega = np.zeros(m)
        omega[part.clients] = part.weights
        pair[t] = np.outer(omega, omega)
        presence[t] = np.outer(omega > 0, omega)
    moments = weight_moments(scheme, p, q)
    se = lambda v: v.std(0, ddof=1) / math.sqrt(n)  # noqa: E731
    assert _within(pair.mean(0), moments.pair, se(pair)), (pair.mean(0) - moments.pair) / (se(pair) + 1e-300)
    assert _within(presence.mean(0), moments.presence, se(presence))
    sq = np.einsum("tii->t", pair)
    assert _within(sq.mean(), 1.0 / effective_participants(scheme, p, q), se(sq))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("scheme", ["with-replacement", "uniform"])
def test_expected_server_weights_are_the_mean_step_of_real_sampled_fednova_rounds(scheme, seed):
    r"""Client j's gradient is the constant e_j (so d_j = e_j whatever its solver) and its momentum
    solver has its own ||a_j||_1: coordinate j of the mean server step of 2,000 real sampled FedNova
    rounds (tau_eff from the sample, the engine's default) is -eta c_j; with a fixed tau_eff it is
    -eta tau p_j; App. H's tau_eff = sum_S p_i ||a_i||_1 through the rule's aggregate with the real
    sampler. All within 5 standard errors."""
    rng = np.random.default_rng(1100 + seed)
    m, q, lr, rounds = 4, 2, 0.1, 2000
    p = rng.dirichlet(np.ones(m))
    steps = rng.integers(1, 6, size=m)
    solvers = [momentum_sgd(lr, float(rng.uniform(0.0, 0.9))) for _ in range(m)]
    a = np.array([s.a_norm(int(t)) for s, t in zip(solvers, steps)])
    eye = np.eye(m)

    def mean_step(algorithm):
        run = run_sequential(algorithm, np.zeros(m), lambda x, i, t, k: eye[i], p, FixedSteps(steps), rounds,
                             sampling=scheme, clients_per_round=q, seed=seed, solver_at=lambda t, i: solvers[i],
                             metric_fn=lambda x, t: np.array(x, copy=True))
        c = -np.diff(np.array(run.metrics), axis=0) / lr
        return c.mean(0), c.std(0, ddof=1) / math.sqrt(rounds)

    mean, se = mean_step(make_algorithm("fednova", sgd(lr)))
    want = expected_server_weights(scheme, p, a, q, "participants")
    assert _within(mean, want, se), (mean, want, se)
    mean, se = mean_step(make_algorithm("fednova", sgd(lr), tau_eff=2.5))
    assert _within(mean, expected_server_weights(scheme, p, a, q, 2.5), se)

    deltas = [s.run(np.zeros(m), lambda x, k, j=j: eye[j], int(t)).params for j, (s, t) in enumerate(zip(solvers, steps))]
    c = np.empty((rounds, m))
    for t in range(rounds):
        part = sample_clients(scheme, p, q, seed, t)
        sel = list(part.clients)
        c[t] = -aggregate([deltas[i] for i in sel], part.weights, a[sel], "fednova",
                          tau_eff=float(p[sel] @ a[sel])).change / lr
    want = expected_server_weights(scheme, p, a, q, "selected_p")
    assert _within(c.mean(0), want, c.std(0, ddof=1) / math.sqrt(rounds)), (c.mean(0), want)


# ------------------------------------------------------------------ rule: tau_eff, w_i, c_i of one real round
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name,policy", [("fedavg", None), ("fedprox", None), ("fednova", None),
                                         ("fednova", "local_steps"), ("fednova", 2.7)])
def test_tau_eff_weights_and_coefficients_are_what_a_real_round_does(name, policy, seed):
    r"""Heterogeneous random solvers and tau_i; client i's gradient is the constant e_i. Each client's
    Delta_i comes from its own solver run and ||a_i||_1 from unit impulses (neither from the rule).
    FedAvg / FedProx: the real round is plain averaging sum_i p_i Delta_i, which fedavg_weights writes
    as -eta tau_eff sum_i w_i d_i. FedNova: the real round is -eta tau_eff sum_i p_i d_i with
    fednova_weights' tau_eff. Both: the round's coefficients of Delta_i are aggregation_coefficients."""
    rng = np.random.default_rng(1200 + seed)
    m, lr = 5, float(rng.uniform(0.02, 0.2))
    p = rng.dirichlet(np.ones(m))
    steps = rng.integers(1, 12, size=m)
    solvers = [momentum_proximal_sgd(lr, float(rng.uniform(0, 0.9)) * (i % 2), mu=float(rng.uniform(0.1, 1 / lr)))
               if name == "fedprox" or i % 3 else momentum_sgd(lr, float(rng.uniform(0, 0.9))) for i in range(m)]
    eye = np.eye(m)
    deltas = np.array([s.run(np.zeros(m), lambda x, k, i=i: eye[i], int(t)).params
                       for i, (s, t) in enumerate(zip(solvers, steps))])
    a = np.array([anatomy.probe_a_vector(s, int(t)).sum() for s, t in zip(solvers, steps)])
    d = -deltas / (lr * a[:, None])  # the normalised gradients d_i (= e_i here)
    base = proximal_sgd(lr, 1.0) if name == "fedprox" else sgd(lr)
    algo = make_algorithm(name, base, tau_eff=policy)
    change = run_sequential(algo, np.zeros(m), lambda x, i, t, k: eye[i], p, FixedSteps(steps), 1,
                            solver_at=lambda t, i: solvers[i]).state.params
    if name == "fednova":
        tau_eff, w = fednova_weights(p, a, policy, steps)
        np.testing.assert_array_equal(w, p)
        np.testing.assert_allclose(change, -lr * tau_eff * (p @ d), rtol=1e-12, atol=1e-15)
        want_tau = {None: p @ a, "local_steps": p @ steps}.get(policy, policy)
        assert tau_eff == pytest.approx(want_tau, rel=1e-12)
    else:
        plain = p @ deltas
        np.testing.assert_allclose(change, plain, rtol=1e-12, atol=1e-15)
        tau_eff, w = fedavg_weights(p, a)
        np.testing.assert_allclose(plain, -lr * tau_eff * (w @ d), rtol=1e-12, atol=1e-15)
    coefficients = change / np.diag(deltas)  # x+ - x = sum_i c_i Delta_i, Delta_i along e_i
    np.testing.assert_allclose(aggregation_coefficients(tau_eff, w, a), coefficients, rtol=1e-12)


# ------------------------------------------------------------------ theory: chi^2 and the gradient floor
def _fedavg_limit(problem, steps, lr):
    """Fixed point of real FedAvg rounds (full-batch SGD) on a 1-d quadratic: x -> M x + b from two rounds."""
    def one_round(x):
        return float(run_sequential(make_algorithm("fedavg", sgd(lr)), np.array([x]), problem.grad_fn(), problem.p,
                                    FixedSteps(steps), 1).state.params[0])

    b = one_round(0.0)
    M = one_round(1.0) - b
    return b / (1.0 - M)


@pytest.mark.parametrize("seed", SEEDS)
def test_chi_square_kappa2_is_the_gradient_floor_of_real_fedavg_rounds(seed):
    r"""App. D.1 for m random clients: F_i = (x - e_i)^2 / 2 with e_i = c (p_i - w_i) / w_i + s, where
    w = FedAvg's weights p_i tau_i / sum_j p_j tau_j. Real FedAvg rounds (Richardson-extrapolated
    to eta -> 0) end where ||grad F||^2 = chi^2_{p||w} kappa^2 (kappa^2 of Assumption 3 with beta^2 = 1):
    the floor is attained, half of theorem2_bound's 2 chi^2 kappa^2."""
    rng = np.random.default_rng(1300 + seed)
    m = int(rng.integers(3, 8))
    p = rng.dirichlet(np.ones(m))
    steps = rng.integers(1, 12, size=m)
    steps[0] = steps[1] + 3  # heterogeneous
    _, w = fedavg_weights(p, steps)
    e = float(rng.uniform(0.5, 3.0)) * (p - w) / w + float(rng.normal())
    problem = QuadraticProblem(np.ones((m, 1, 1)), e[:, None], p)
    lr = 2e-4
    x = 2 * _fedavg_limit(problem, steps, lr / 2) - _fedavg_limit(problem, steps, lr)
    grad2 = (x - p @ e) ** 2
    chi2 = theory.chi_square(p, w)
    kappa2 = theory.quadratic_kappa2(problem.H, problem.e, w, 1.0)
    assert grad2 == pytest.approx(chi2 * kappa2, rel=1e-3)
    assert theory.theorem2_bound(chi2, 1.0, kappa2, 0.0) == pytest.approx(2 * grad2, rel=1e-3)


@pytest.mark.parametrize("seed", range(6))
def test_theorem1_max_beta2_is_the_edge_of_the_explicit_bounds_condition(seed):
    r"""Random solvers, tau_i, w and L, and a step with D = 4 eta^2 L^2 C in (0.01, 0.3):
    theorem1_explicit_bound accepts beta^2 = theorem1_max_beta2 and refuses it 1e-6 larger."""
    rng = np.random.default_rng(1400 + seed)
    m = int(rng.integers(2, 6))
    steps = rng.integers(2, 20, size=m)
    solver = [sgd(1.0), momentum_sgd(1.0, float(rng.uniform(0.1, 0.9))), proximal_sgd(1.0, float(rng.uniform(0.05, 0.9)))][seed % 3]
    a = [solver.a_vector(int(t)) for t in steps]
    w = rng.dirichlet(np.ones(m))
    L = float(rng.uniform(0.5, 3.0))
    C = theory.theorem1_constants(w, a, 1.0)[2]
    lr = math.sqrt(float(rng.uniform(0.01, 0.3)) / (4 * L ** 2 * C))
    tau_eff = float(rng.uniform(0.1, 0.5)) / (lr * L)
    b2 = theory.theorem1_max_beta2(lr, L, C)
    common = dict(L=L, sigma2=1.0, kappa2=1.0, initial_gap=1.0, w=w, a_vectors=a, tau_eff=tau_eff)
    theory.theorem1_explicit_bound(lr, 10, beta2=b2, **common)
    with pytest.raises(ValueError, match="D = 4"):
        theory.theorem1_explicit_bound(lr, 10, beta2=b2 * (1 + 1e-6), **common)


# ------------------------------------------------------------------ anatomy: the official code's vectors
@pytest.mark.parametrize("seed", range(6))
def test_official_inplace_a_vector_is_the_in_place_dynamics(seed):
    r"""The official code adds mu (x - x0) into the momentum buffer: that is the library's momentum
    solver fed the gradient g_k + mu (x_k - x0). Its real change on random gradients G is
    -eta G a with a = official_inplace_a_vector."""
    rng = np.random.default_rng(1500 + seed)
    lr, tau, d = float(rng.uniform(0.01, 0.3)), int(rng.integers(1, 30)), 4
    rho, mu = float(rng.uniform(0.05, 0.95)), float(rng.uniform(0, 1.0 / lr))
    G = rng.standard_normal((d, tau))
    x0 = rng.standard_normal(d)
    state = momentum_sgd(lr, rho).run(x0, lambda x, k: G[:, k] + mu * (x - x0), tau)
    np.testing.assert_allclose(state.params - x0, -lr * G @ anatomy.official_inplace_a_vector(tau, lr, rho, mu),
                               rtol=1e-9, atol=1e-12)


def _inplace_a_vector_one_run_per_entry(tau, lr, rho, mu):
    """official_inplace_a_vector as it was (fedlib at 113f0d3): tau runs of tau steps, O(tau^2)."""
    a = np.empty(tau)
    for j in range(tau):
        y = u = 0.0
        for k in range(tau):
            u = rho * u + (1.0 if k == j else 0.0) + mu * y
            y = y - lr * u
        a[j] = -y / lr
    return a


@pytest.mark.parametrize("seed", range(20))
def test_official_inplace_a_vector_is_its_former_loop_bit_for_bit(seed):
    """One run from an impulse at step 0 (the coefficients are the same at every step, and before step j the
    former runs stay at an exact 0.0) gives the same floats as the former run per entry: 0.16 s -> 0.2 ms at
    tau = 1000, identical arrays. Random lr, momentum in [0, 0.99) (0 for every fourth seed), mu with
    lr * mu <= 1 (0 for every fifth seed, lr * mu = 1 for every seventh), tau 1..60."""
    rng = np.random.default_rng(3100 + seed)
    lr, tau = float(rng.uniform(0.01, 1.0)), int(rng.integers(1, 61))
    rho = 0.0 if seed % 4 == 3 else float(rng.uniform(0.0, 0.99))
    mu = 0.0 if seed % 5 == 4 else (1.0 / lr if seed % 7 == 6 else float(rng.uniform(0.0, 1.0)) / lr)
    got = anatomy.official_inplace_a_vector(tau, lr, rho, mu)
    assert got.shape == (tau,) and got.dtype == np.float64
    np.testing.assert_array_equal(got, _inplace_a_vector_one_run_per_entry(tau, lr, rho, mu))


@pytest.mark.parametrize("seed", range(6))
def test_official_counter_is_the_real_a_norm_for_one_feature(seed):
    r"""Momentum alone or prox alone, the official counter is ||a_i||_1 of the real solver (measured
    by unit impulses), for random rho, alpha and tau."""
    rng = np.random.default_rng(1600 + seed)
    lr, tau = float(rng.uniform(0.01, 0.5)), int(rng.integers(1, 40))
    rho, alpha = float(rng.uniform(0.05, 0.95)), float(rng.uniform(0.01, 1.0))
    assert anatomy.official_counter_a_norm(tau, rho, 0.0) == pytest.approx(
        anatomy.probe_a_vector(momentum_sgd(lr, rho), tau).sum(), rel=1e-11)
    assert anatomy.official_counter_a_norm(tau, 0.0, alpha) == pytest.approx(
        anatomy.probe_a_vector(proximal_sgd(lr, alpha / lr * (1 - 1e-15)), tau).sum(), rel=1e-11)


# ------------------------------------------------------------------ tradeoff
@pytest.mark.parametrize("seed", SEEDS)
def test_fedprox_curves_are_those_of_real_proximal_runs(seed):
    r"""tau_eff, chi^2 and slowdown of fedprox_curves on a random alpha grid equal those of FedAvg's rule
    on the ||a_i||_1 that real proximal-SGD runs report (measured_fedprox_weights)."""
    rng = np.random.default_rng(1700 + seed)
    m = int(rng.integers(2, 6))
    p = rng.dirichlet(np.ones(m))
    steps = rng.integers(1, 30, size=m)
    alphas = np.sort(rng.uniform(0.001, 1.0, size=4))
    curves = tradeoff.fedprox_curves(p, steps, alphas)
    problem = random_quadratic(m, 2, seed=seed, p=p)
    for k, alpha in enumerate(alphas):
        tau_eff, w, counted = tradeoff.measured_fedprox_weights(problem, steps, 0.01, float(alpha))
        assert curves.tau_eff[k] == pytest.approx(tau_eff, rel=1e-11)
        assert curves.chi2[k] == pytest.approx(theory.chi_square(p, w), rel=1e-9, abs=1e-15)
        assert curves.slowdown[k] == pytest.approx(steps.mean() / tau_eff, rel=1e-11)
        # the same from the changes the solver's steps make (a_i = -Delta_i / eta on a probe), not its counter
        probed_tau_eff, probed_w, probed = tradeoff.probed_fedprox_weights(p, steps, 0.01, float(alpha))
        np.testing.assert_allclose(probed, counted, rtol=1e-12)
        np.testing.assert_allclose(probed, (1 - (1 - alpha) ** steps) / alpha, rtol=1e-12)
        assert curves.tau_eff[k] == pytest.approx(probed_tau_eff, rel=1e-11)
        np.testing.assert_allclose(probed_w, w, rtol=1e-11)


@pytest.mark.parametrize("seed", range(3))
def test_closed_form_distances_are_those_of_real_rounds(seed):
    """The distances of closed_form_distances (iterated round maps) equal real FedProx and FedNova-prox
    rounds (fedprox_sweep) on random quadratics, tau_i, alpha and T."""
    rng = np.random.default_rng(1800 + seed)
    problem = random_quadratic(3, 3, seed=seed, p=rng.dirichlet(np.ones(3)))
    steps = [int(t) for t in rng.integers(1, 10, size=3)]
    alphas = np.sort(rng.uniform(0.001, 1.0, size=3))
    T = int(rng.integers(2, 9))
    lr = float(rng.uniform(0.005, 0.05))
    sweep = tradeoff.fedprox_sweep(problem, steps, lr, alphas, T)
    np.testing.assert_allclose(tradeoff.closed_form_distances(problem, steps, lr, alphas, [T], "fedprox")[0],
                               sweep.fedprox, rtol=1e-10)
    np.testing.assert_allclose(tradeoff.closed_form_distances(problem, steps, lr, alphas, [T], "fednova",
                                                              "local_steps")[0], sweep.fednova, rtol=1e-10)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("psd", [True, False])
def test_quadratic_smoothness_is_the_lipschitz_constant_of_the_real_gradients(seed, psd):
    """Assumption 1's L of random PSD (QuadraticProblem's gradients) and indefinite (H_i x - e_i, which
    QuadraticProblem refuses) quadratic clients: no pair of points has a gradient-difference ratio above
    it, and power iteration on the clients' real gradient differences reaches it."""
    rng = np.random.default_rng(1900 + seed)
    m, d = int(rng.integers(2, 5)), int(rng.integers(2, 6))
    H = rng.standard_normal((m, d, d))
    H = H @ np.transpose(H, (0, 2, 1)) if psd else H + np.transpose(H, (0, 2, 1))
    e = rng.standard_normal((m, d))
    if psd:
        problem = QuadraticProblem(H, e, rng.dirichlet(np.ones(m)))
    else:
        with pytest.raises(ValueError, match="positive semi-definite"):
            QuadraticProblem(H, e, np.full(m, 1 / m))
        problem = types.SimpleNamespace(H=H, grad=lambda x, i: H[i] @ x - e[i])
    L = theory.quadratic_smoothness(problem.H)
    ratios = []
    for i in range(m):
        for _ in range(20):
            x, y = rng.standard_normal(d), rng.standard_normal(d)
            assert np.linalg.norm(problem.grad(x, i) - problem.grad(y, i)) <= L * np.linalg.norm(x - y) * (1 + 1e-12)
        v = rng.standard_normal(d)
        for _ in range(300):
            v = problem.grad(v, i) - problem.grad(np.zeros(d), i)
            v /= np.linalg.norm(v)
        ratios.append(np.linalg.norm(problem.grad(v, i) - problem.grad(np.zeros(d), i)))
    assert max(ratios) == pytest.approx(L, rel=1e-6)


def test_theorem1_max_beta2_at_the_largest_step_is_a_beta2_the_explicit_bound_takes():
    r"""lr exactly at D = 4 lr^2 L^2 C = 1/3, the largest step theorem1_max_beta2 accepts: its beta^2 is 1 (Assumption
    3's smallest), which theorem1_explicit_bound takes; it was 1 - 4e-16 (rounding), refused there as beta2 < 1."""
    w, a = [0.5, 0.5], [[1.0, 1.0], [1.0, 1.0]]
    C = theory.theorem1_constants(w, a, 1.0)[2]
    for lr in (1 / math.sqrt(12 * C), np.nextafter(1 / math.sqrt(12 * C), 1.0)):
        b2 = theory.theorem1_max_beta2(lr, 1.0, C)
        assert b2 == 1.0
        theory.theorem1_explicit_bound(lr, 4, L=1.0, sigma2=1.0, beta2=b2, kappa2=1.0, initial_gap=1.0, w=w,
                                       a_vectors=a, tau_eff=0.5)


def test_theorem1_explicit_bound_takes_lr_exactly_at_its_first_condition():
    r"""lr = 1/(2 L tau_eff), the largest step of the condition eta L tau_eff <= 1/2: the product rounds to
    0.5000000000000001 for (L, tau_eff) = (0.7, 7), (0.7, 0.7), (3, 0.7), ..., which was refused as 'needs
    eta L tau_eff <= 1/2, got 0.5'. The step 1/(2 L tau_eff) is taken as it is computed (the next float above 1/16 with
    L tau_eff = 8 is still refused, tests/test_mutation_theory.py); a step 1e-9 larger is refused."""
    for L, tau_eff in ((0.7, 7.0), (0.7, 0.7), (3.0, 0.7), (1.0, 2.0)):
        lr = 0.5 / (L * tau_eff)
        common = dict(L=L, sigma2=1.0, beta2=1.0, kappa2=1.0, initial_gap=1.0, w=[1.0], a_vectors=[[1.0]],
                      tau_eff=tau_eff)
        terms = theory.theorem1_explicit_bound(lr, 4, **common)
        assert terms.slowdown_term == pytest.approx(4 / (lr * tau_eff * 4), rel=1e-15)
        with pytest.raises(ValueError, match="eta L tau_eff <= 1/2"):
            theory.theorem1_explicit_bound(lr * (1 + 1e-9), 4, **common)

"""Closed forms against what the library's rounds actually do, on random inputs.

Each test draws its instances at random (several seeds) and compares a closed form of the paper
with the real rounds of :func:`fedlib.engines.reference.run_sequential`:

* Theorem 1's :math:`A` (eq. 8) with the variance of real server changes under gradient noise;
* the :math:`\\eta \\to 0` limits — Lemma 1 (FedAvg, :math:`w_i \\propto p_i\\tau_i`), eq. 7 (FedProx,
  :math:`w_i \\propto p_i[1-(1-\\alpha)^{\\tau_i}]`), App. D.1 (two clients) — with the fixed point of
  the real round map, identified from real rounds (on quadratics a round is affine:
  :math:`x \\mapsto Mx + b`, so :math:`d + 1` rounds from chosen points give :math:`M` and :math:`b`);
* the round map's spectral radius (:func:`fedlib.tradeoff.round_contraction`) with the identified :math:`M`;
* :math:`\\mathbb E\\|a_i\\|_1` and the population :math:`\\tau_{\\text{eff}}` with the average of what
  clients report over many rounds;
"""
from __future__ import annotations

import numpy as np
import pytest

from fedlib.algorithms import make_algorithm
from fedlib.engines.reference import run_sequential
from fedlib.experiments.quadratic import identity_quadratic, surrogate_optimum, tau_weighted_optimum
from fedlib.problems import random_quadratic
from fedlib.rng import generator
from fedlib.schedules import FixedSteps, RandomSteps, expected_a_norms, population_tau_eff
from fedlib.solvers import momentum_proximal_sgd, momentum_sgd, proximal_sgd, sgd
from fedlib.theory import fedprox_weights, lemma1_small_lr_limit, theorem1_constants, two_client_lower_bound
from fedlib.tradeoff import round_contraction

SEEDS = range(4)


# ------------------------------------------------------------------ Theorem 1's A
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", ["fedavg", "fednova"])
def test_theorem1_A_is_the_variance_of_real_server_changes(name, seed):
    r"""Zero Hessians, gradients pure noise :math:`\xi \sim N(0, \sigma^2 I)`: one real round moves the
    server by :math:`-\eta\tau_{\text{eff}}\sum_i w_i G_i a_i/\|a_i\|_1`, whose per-coordinate variance is
    :math:`\eta^2\tau_{\text{eff}} A\sigma^2/m` — measured over 40,000 coordinates, with each client's
    own random solver and :math:`\tau_i`, and the round's own :math:`w` and :math:`\tau_{\text{eff}}`."""
    rng = np.random.default_rng(seed)
    m, d, lr, sigma = 5, 40_000, 0.05, 0.7
    p = rng.dirichlet(np.ones(m))
    steps = rng.integers(1, 9, size=m)
    solvers = [momentum_proximal_sgd(lr, float(rng.uniform(0, 0.9)), mu=float(rng.uniform(0, 10)))
               for _ in range(m)]

    def noise(x, i, t, k):
        return sigma * generator(seed, "batches", t, i, k).standard_normal(d)

    algo = make_algorithm(name, sgd(lr))
    run = run_sequential(algo, np.zeros(d), noise, p, FixedSteps(steps), 1, solver_at=lambda t, i: solvers[i])
    diag = run.diagnostics[0]
    w = np.asarray(diag.weights) / np.sum(diag.weights)
    A, _, _ = theorem1_constants(w, [s.a_vector(int(t)) for s, t in zip(solvers, steps)], float(diag.tau_eff))
    measured = run.state.params.var() * m / (lr ** 2 * float(diag.tau_eff) * sigma ** 2)
    assert measured == pytest.approx(A, rel=0.05)  # sampling error of a variance over 40,000 values: ~0.7 %


# ------------------------------------------------------------------ fixed points of the real rounds
def _round_map(algo, problem, steps, solver=None):
    """(M, b) of one real round x -> Mx + b (full-batch local steps on a quadratic)."""
    d = problem.e.shape[1]
    kw = {} if solver is None else {"solver_at": lambda t, i: solver}

    def one_round(x):
        return run_sequential(algo, x, problem.grad_fn(), problem.p, FixedSteps(steps), 1, **kw).state.params

    b = one_round(np.zeros(d))
    M = np.column_stack([one_round(np.eye(d)[j]) - b for j in range(d)])
    return M, b


def _fixed_point(M, b):
    return np.linalg.solve(np.eye(len(b)) - M, b)


def _limits(make_algo, problem, steps, lrs):
    return [_fixed_point(*_round_map(make_algo(lr), problem, steps)) for lr in lrs]


LRS = (0.004, 0.002, 0.001)


def _first_order(distances):
    """Halving eta halves the distance (O(eta)), to within 15 %."""
    ratios = np.array(distances[:-1]) / np.array(distances[1:])
    return np.all(np.abs(ratios - 2) < 0.3), ratios


@pytest.mark.parametrize("seed", SEEDS)
def test_lemma1_fedavg_limit_of_the_real_rounds(seed):
    """Lemma 1 (H_i = I): FedAvg's limit tends to sum p_i tau_i e_i / sum p_i tau_i at O(eta), not to x*."""
    rng = np.random.default_rng(seed)
    problem = identity_quadratic(4, 3, seed=seed, p=rng.dirichlet(np.ones(4)))
    steps = rng.integers(1, 12, size=4)
    target = lemma1_small_lr_limit(problem.e, problem.p, steps)
    limits = _limits(lambda lr: make_algorithm("fedavg", sgd(lr)), problem, steps, LRS)
    ok, ratios = _first_order([np.linalg.norm(x - target) for x in limits])
    assert ok, ratios
    assert np.linalg.norm(limits[-1] - target) < 0.05 * np.linalg.norm(target - problem.optimum())


@pytest.mark.parametrize("seed", SEEDS)
def test_tau_weighted_limit_for_general_hessians(seed):
    """Lemma 1 for general H_i: FedAvg -> argmin sum_i p_i tau_i F_i / sum_j p_j tau_j at O(eta)."""
    rng = np.random.default_rng(seed)
    problem = random_quadratic(3, 3, seed=seed, p=rng.dirichlet(np.ones(3)))
    steps = rng.integers(1, 12, size=3)
    target = tau_weighted_optimum(problem, steps)
    limits = _limits(lambda lr: make_algorithm("fedavg", sgd(lr)), problem, steps, LRS)
    ok, ratios = _first_order([np.linalg.norm(x - target) for x in limits])
    assert ok, ratios


@pytest.mark.parametrize("seed", SEEDS)
def test_fedprox_weights_give_the_limit_of_real_fedprox_rounds(seed):
    """eq. 7: with alpha = eta mu fixed, FedProx's limit tends to argmin sum_i w_i F_i with
    w_i ∝ p_i [1 - (1 - alpha)^tau_i] (fedprox_weights) at O(eta)."""
    rng = np.random.default_rng(seed)
    problem = random_quadratic(3, 3, seed=10 + seed, p=rng.dirichlet(np.ones(3)))
    steps = rng.integers(1, 15, size=3)
    alpha = float(rng.uniform(0.05, 0.5))
    _, w = fedprox_weights(problem.p, steps, alpha)
    target = surrogate_optimum(problem, w)
    limits = _limits(lambda lr: make_algorithm("fedprox", proximal_sgd(lr, alpha / lr)), problem, steps, LRS)
    ok, ratios = _first_order([np.linalg.norm(x - target) for x in limits])
    assert ok, ratios
    other = surrogate_optimum(problem, problem.p * steps / (problem.p @ steps))  # alpha -> 0 (FedAvg) is not it
    assert np.linalg.norm(limits[-1] - target) < 0.1 * np.linalg.norm(other - target)


@pytest.mark.parametrize("seed", SEEDS)
def test_two_client_example_is_the_limit_of_real_rounds(seed):
    """App. D.1: F_1 = (x - a)^2 / 2, F_2 = (x + a)^2 / 2, p = (1/2, 1/2): FedAvg's limit tends to
    a (tau_1 - tau_2) / (tau_1 + tau_2), and the floor |grad F(x~)|^2 = chi^2 kappa^2 is attained."""
    from fedlib.problems.quadratic import QuadraticProblem

    rng = np.random.default_rng(seed)
    t1, t2 = (int(v) for v in rng.integers(1, 20, size=2))
    a = float(rng.uniform(0.5, 3))
    problem = QuadraticProblem(np.ones((2, 1, 1)), np.array([[a], [-a]]), np.array([0.5, 0.5]))
    ex = two_client_lower_bound(t1, t2, a)
    limits = _limits(lambda lr: make_algorithm("fedavg", sgd(lr)), problem, [t1, t2], LRS)
    dist = [abs(float(x[0]) - ex.x_limit) for x in limits]
    if t1 == t2:
        assert max(dist) < 1e-12
        return
    ok, ratios = _first_order(dist)
    assert ok, ratios
    assert float(limits[-1][0]) ** 2 == pytest.approx(ex.chi2 * ex.kappa2, rel=0.05)  # grad F(x) = x here


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("algorithm,alpha", [("fedprox", 0.3), ("fedavg", 0.0), ("fednova", 0.0)])
def test_round_contraction_is_the_real_rounds_radius(algorithm, alpha, seed):
    """round_contraction (the closed-form map's spectral radius) = that of the map identified from
    real rounds, and the real rounds' distance to their fixed point shrinks at that rate."""
    rng = np.random.default_rng(seed)
    problem = random_quadratic(3, 4, seed=20 + seed, p=rng.dirichlet(np.ones(3)))
    steps = [int(v) for v in rng.integers(1, 10, size=3)]
    lr = 0.05
    rho = round_contraction(problem, steps, lr, alpha, algorithm=algorithm)
    solver = proximal_sgd(lr, alpha / lr) if alpha > 0 else sgd(lr)
    M, b = _round_map(make_algorithm(algorithm, solver), problem, steps)
    assert rho == pytest.approx(float(np.max(np.abs(np.linalg.eigvals(M)))), rel=1e-10)
    x_fix = _fixed_point(M, b)
    run = run_sequential(make_algorithm(algorithm, solver), np.zeros(4), problem.grad_fn(), problem.p,
                         FixedSteps(steps), 60, metric_fn=lambda x, t: np.linalg.norm(x - x_fix))
    err = np.array(run.metrics)
    rate = (err[60] / err[30]) ** (1 / 30)
    assert rate == pytest.approx(rho, rel=0.02)


# ------------------------------------------------------------------ E||a_i||_1 and the population tau_eff
@pytest.mark.parametrize("seed", SEEDS)
def test_expected_a_norms_are_the_mean_of_what_clients_report(seed):
    """RandomSteps with momentum / prox solvers: the mean of the ||a_i||_1 reported by real rounds
    over 3,000 rounds is expected_a_norms, and sum_i p_i of it is population_tau_eff."""
    rng = np.random.default_rng(seed)
    m, rounds = 4, 3000
    p = rng.dirichlet(np.ones(m))
    low = int(rng.integers(1, 5))
    schedule = RandomSteps(m, low, low + int(rng.integers(2, 12)), seed=seed)
    solver = [momentum_sgd(0.01, float(rng.uniform(0.1, 0.9))), proximal_sgd(0.01, float(rng.uniform(1, 50))),
              momentum_proximal_sgd(0.01, 0.5, mu=20.0), sgd(0.01)][seed % 4]
    run = run_sequential(make_algorithm("fednova", solver), np.zeros(1), lambda x, i, t, k: np.zeros(1), p,
                         schedule, rounds)
    reported = np.array([d.a_norms for d in run.diagnostics])
    want = expected_a_norms(schedule, solver)
    spread = reported.std(axis=0) / np.sqrt(rounds)
    assert np.all(np.abs(reported.mean(axis=0) - want) < 4 * spread + 1e-12), (reported.mean(axis=0), want)
    assert population_tau_eff(p, schedule, solver) == pytest.approx(float(p @ want), rel=1e-12)
    taus = np.array([d.tau_eff for d in run.diagnostics])  # FedNova's default tau_eff: sum_i p_i ||a_i||_1
    assert abs(taus.mean() - population_tau_eff(p, schedule, solver)) < 4 * taus.std() / np.sqrt(rounds)


# ------------------------------------------------------------------ a_i entry by entry
@pytest.mark.parametrize("seed", range(12))
def test_a_vector_entries_are_the_solvers_impulse_responses(seed):
    """Random solver, hyper-parameters and tau: entry j of a_vector(tau) is -Delta/eta of a run whose
    only gradient is a unit impulse at local step j (App. B: Delta = -eta G a, column by column)."""
    from fedlib.solvers import decayed_sgd

    rng = np.random.default_rng(100 + seed)
    lr, tau = float(rng.uniform(0.01, 0.5)), int(rng.integers(1, 40))
    rho, mu = float(rng.uniform(0, 0.95)), float(rng.uniform(0, 1.0)) / lr
    solver = [sgd(lr), proximal_sgd(lr, mu), momentum_sgd(lr, rho), momentum_proximal_sgd(lr, rho, mu),
              decayed_sgd(lr, gamma=float(rng.uniform(0.5, 1.0))), sgd(lr, weight_decay=0.0)][seed % 6]
    measured = np.array([-solver.run(np.zeros(1), lambda x, k, j=j: np.array([float(k == j)]), tau).params[0] / lr
                         for j in range(tau)])
    np.testing.assert_allclose(solver.a_vector(tau), measured, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("seed", SEEDS)
def test_time_averaged_surrogate_is_the_limit_of_the_expected_round(seed):
    r"""Theorems 1 and 3 under random local work (chapter 8): each round draws client i's tau_i and
    solver independently of the model, so the mean iterate follows the *expected* round map
    x -> x + sum_i p_i E[Delta_i(x)]. Built here from real local runs (every tau of the client's
    range with every solver, each client's Delta_i identified from single-client rounds), its fixed
    point tends to time_averaged_surrogate's x~ (w_i ∝ p_i E||a_i||_1) at O(eta) — and not to the
    point weighted by E[tau_i], which momentum makes different."""
    from fedlib.experiments.speedup import time_averaged_surrogate
    from fedlib.problems.quadratic import QuadraticProblem
    from fedlib.schedules import RandomLocalWork

    rng = np.random.default_rng(seed)
    problem = random_quadratic(3, 2, seed=30 + seed, p=rng.dirichlet(np.ones(3)))
    low = rng.integers(1, 6, size=3)
    work = RandomLocalWork(low=low, high=low + rng.integers(0, 6, size=3), num_solvers=2, seed=seed)
    d = problem.e.shape[1]
    limits, targets = [], []
    for lr in LRS:
        solvers = [sgd(lr), momentum_sgd(lr, float(rng.uniform(0.5, 0.9)))]
        mean_M, mean_b = np.zeros((d, d)), np.zeros(d)
        for i in range(3):
            client = QuadraticProblem(problem.H[i:i + 1], problem.e[i:i + 1], np.ones(1))
            draws = [(tau, s) for tau in range(int(work.low[i]), int(work.high[i]) + 1) for s in solvers]
            for tau, s in draws:
                M, b = _round_map(make_algorithm("fedavg", s), client, [tau], solver=s)
                mean_M += problem.p[i] * (M - np.eye(d)) / len(draws)
                mean_b += problem.p[i] * b / len(draws)
        limits.append(_fixed_point(np.eye(d) + mean_M, mean_b))
        targets.append(time_averaged_surrogate(problem, work, solvers)[1])
    ok, ratios = _first_order([np.linalg.norm(x - t) for x, t in zip(limits, targets)])
    assert ok, ratios
    mean_tau = (np.asarray(work.low) + np.asarray(work.high)) / 2
    by_tau = surrogate_optimum(problem, problem.p * mean_tau / (problem.p @ mean_tau))
    assert np.linalg.norm(limits[-1] - targets[-1]) < 0.2 * np.linalg.norm(limits[-1] - by_tau)


@pytest.mark.parametrize("seed", range(8))
def test_local_operator_is_the_real_local_run(seed):
    r"""App. A: K_i(eta, mu) (and its momentum version) maps the start gradient to the real local
    run's change, Delta_i = -K_i grad F_i(x0), for random H_i, x0, eta, mu, rho and tau."""
    from fedlib.theory import quadratic_local_operator

    rng = np.random.default_rng(200 + seed)
    problem = random_quadratic(1, 4, seed=seed, eig_range=(0.1, 3.0))
    lr = float(rng.uniform(0.01, 0.3))
    tau = int(rng.integers(1, 30))
    mu = float(rng.uniform(0, 1.0 / lr)) if seed % 2 else 0.0
    rho = float(rng.uniform(0, 0.9)) if seed % 4 >= 2 else 0.0
    solver = momentum_proximal_sgd(lr, rho, mu) if rho else (proximal_sgd(lr, mu) if mu else sgd(lr))
    x0 = rng.normal(size=4)
    delta = solver.run(x0, lambda x, k: problem.grad(x, 0), tau).params - x0
    K = quadratic_local_operator(problem.H[0], tau, lr, mu, momentum=rho)
    np.testing.assert_allclose(delta, -K @ problem.grad(x0, 0), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("name", ["fedavg", "fedprox", "fednova"])
def test_round_map_is_the_real_round(name, seed):
    """quadratic_round_map (App. A, with local momentum and prox) equals the affine map identified
    from the library's real rounds, on random quadratics, weights, tau_i, eta, mu and rho."""
    from fedlib.theory import quadratic_round_map

    rng = np.random.default_rng(300 + seed)
    problem = random_quadratic(3, 3, seed=40 + seed, p=rng.dirichlet(np.ones(3)))
    steps = [int(v) for v in rng.integers(1, 12, size=3)]
    lr = float(rng.uniform(0.01, 0.2))
    rho = float(rng.uniform(0, 0.9)) if seed % 2 else 0.0
    mu = float(rng.uniform(0.1, 1.0 / lr)) if name == "fedprox" or seed % 3 == 0 else 0.0
    solver = momentum_proximal_sgd(lr, rho, mu) if rho else (proximal_sgd(lr, mu) if mu else sgd(lr))
    M, b = _round_map(make_algorithm(name, solver), problem, steps)
    M_cf, b_cf = quadratic_round_map(problem.H, problem.e, problem.p, steps, lr, name, mu=mu, momentum=rho)
    np.testing.assert_allclose(M, M_cf, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(b, b_cf, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_corollary2_constant_is_the_bound_minimiser(seed):
    """Corollary 2 with c = (2 kappa^2)^(1/3) is the alpha that minimises eq. 8 for FedProx (A, B, C
    from the proximal a_i, found numerically), for random m, tau, T, sigma^2, kappa^2 with alpha tau >> 1;
    and it is not the minimiser with c = 1 (the order-only reading)."""
    from fedlib.theory import corollary2_best_alpha
    from fedlib.tradeoff import fedprox_bound_best_alpha

    rng = np.random.default_rng(400 + seed)
    m, tau = int(rng.integers(4, 65)), int(rng.integers(500, 5000))
    sigma2, kappa2 = float(rng.uniform(0.2, 5)), float(rng.uniform(0.2, 5))
    c = (2 * kappa2) ** (1 / 3)
    t_max = (c * np.sqrt(m * tau) / 10) ** 6  # keeps alpha* tau >= 10
    T = int(10 ** rng.uniform(4, np.log10(t_max)))
    numeric = fedprox_bound_best_alpha(m, tau, T, sigma2, kappa2)
    assert numeric * tau >= 9
    assert numeric == pytest.approx(corollary2_best_alpha(m, tau, T, constant=c), rel=0.03)
    if abs(c - 1) > 0.2:
        assert numeric != pytest.approx(corollary2_best_alpha(m, tau, T), rel=0.1)

r"""Paper claims that were checked only on hand-picked inputs, or not at all, checked against what the
library's real solvers and rounds do, on random inputs (several seeds each):

* App. E.1 (Corollary 1): FedAvg + SGD with :math:`p_i = 1/m` has :math:`\tau_{\text{eff}} = \bar\tau`,
  :math:`w_i = \tau_i/\sum_j\tau_j`, :math:`A = 1`, :math:`B = \bar\tau - 1 + \operatorname{var}[\tau]/\bar\tau`,
  :math:`C = \max_i\tau_i(\tau_i-1)` (:func:`fedlib.theory.corollary1_constants`);
* App. E.2: FedProx's :math:`\tau_{\text{eff}}, w, A, B, C` in closed form, their :math:`\alpha \to 0` limit
  (FedAvg) and :math:`\alpha = 1` (:func:`fedlib.theory.fedprox_theorem1_constants`);
* App. A's concrete example at a finite step: :math:`\tilde x = \sum p_i K_i e_i/\sum p_i K_i`,
  :math:`K_i = 1-(1-\eta)^{\tau_i}` (:func:`fedlib.theory.lemma1_fixed_point`);
* §4.2 / Figure 4: as :math:`\alpha` grows FedProx's :math:`\chi^2_{p\|w}` falls, its :math:`\tau_{\text{eff}}`
  falls (the slowdown grows), and :math:`\alpha = 1` is :math:`\bar\tau` times slower than FedAvg;
* §4.1: exponentially decayed steps with :math:`\gamma = 1-\alpha` have FedProx's :math:`\|a_i\|_1`
  (the vector reversed) and :math:`\|a_i\|_1 = (1-\gamma^{\tau})/(1-\gamma)`;
* eq. (6) + Theorem 1 for clients with different, fixed solvers (momentum, decayed steps, momentum +
  prox): FedAvg tends to :math:`\arg\min\sum_i p_i\|a_i\|_1F_i` at :math:`O(\eta)`, FedNova to :math:`x^*`;
* App. E.2's :math:`\tau \gg 1` relaxations (:math:`A \approx 1/2`, :math:`B \approx 1/(2\alpha)`,
  :math:`C \approx 1/\alpha^2`) that Corollary 2's :math:`\alpha^\star` rests on;
* Theorem 1's bound on real noisy runs of FedProx and FedNova-prox (bound_check covers SGD and momentum);
* App. A: FedProx's round is :math:`x \mapsto (I - \sum p_iK_iH_i)x + \sum p_iK_ie_i` and converges
  under the paper's norm condition;
* App. C.6 / G: the step-size condition :math:`D \le 1/(2\beta^2+1)` (resp. :math:`1/(12\beta^2+1)`)
  gives the inequalities the proofs use, at the :math:`\beta^2` that
  :func:`fedlib.theory.theorem1_max_beta2` returns for a real solver's :math:`C`.
"""
from __future__ import annotations

import numpy as np
import pytest

from fedlib.algorithms import make_algorithm
from fedlib.engines.reference import run_sequential
from fedlib.experiments.quadratic import identity_quadratic, surrogate_optimum
from fedlib.problems import random_quadratic
from fedlib.rule import fedavg_weights
from fedlib.schedules import FixedSteps
from fedlib.solvers import decayed_sgd, momentum_proximal_sgd, momentum_sgd, proximal_sgd, sgd
from fedlib.theory import (chi_square, corollary1_constants, fedprox_theorem1_constants, lemma1_fixed_point,
                           lemma1_small_lr_limit, slowdown, theorem1_constants, theorem1_max_beta2)

SEEDS = range(5)


def _seed(*words) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([2020, *words]))


def _probed_a(solver, tau: int) -> np.ndarray:
    """a_i of a real local run: entry j is -x_tau / eta after a unit gradient at step j only (x_0 = 0);
    the closed forms of the solver (a_vector, a_norm) are not used."""
    return np.array([-solver.run(np.zeros(1), lambda x, k, j=j: np.array([float(k == j)]), tau).params[0] / solver.lr
                     for j in range(tau)])


def _real_round(algorithm, p, steps, solvers=None):
    """Diagnostics of one real round (zero gradients: only tau_eff, w and ||a_i||_1 are read)."""
    kw = {} if solvers is None else {"solver_at": lambda t, i: solvers[i]}
    run = run_sequential(algorithm, np.zeros(1), lambda x, i, t, k: np.zeros(1), p, FixedSteps(steps), 1, **kw)
    return run.diagnostics[0]


def _round_map(algorithm, problem, steps, solvers=None):
    """(M, b) of one real round x -> Mx + b on a quadratic (d + 1 real rounds)."""
    d = problem.e.shape[1]
    kw = {} if solvers is None else {"solver_at": lambda t, i: solvers[i]}

    def one_round(x):
        return run_sequential(algorithm, x, problem.grad_fn(), problem.p, FixedSteps(steps), 1, **kw).state.params

    b = one_round(np.zeros(d))
    return np.column_stack([one_round(np.eye(d)[j]) - b for j in range(d)]), b


def _fixed_point(M, b):
    return np.linalg.solve(np.eye(len(b)) - M, b)


# ------------------------------------------------------------------ App. E.1 (Corollary 1)
@pytest.mark.parametrize("seed", SEEDS)
def test_corollary1_constants_are_those_of_a_real_fedavg_round(seed):
    rng = _seed(1, seed)
    m = int(rng.integers(2, 9))
    steps = rng.integers(1, 30, size=m)
    if seed == 0:
        steps[:] = steps[0]                      # homogeneous: var[tau] = 0, B = tau - 1
    lr = float(rng.uniform(0.01, 0.5))
    p = np.full(m, 1.0 / m)
    diag = _real_round(make_algorithm("fedavg", sgd(lr)), p, steps)
    w_real = np.asarray(diag.weights) / np.sum(diag.weights)
    A, B, C = theorem1_constants(w_real, [_probed_a(sgd(lr), int(t)) for t in steps], float(diag.tau_eff))
    c = corollary1_constants(steps)
    assert c.tau_eff == pytest.approx(float(diag.tau_eff), rel=1e-12)
    np.testing.assert_allclose(c.weights, w_real, rtol=1e-12)
    assert (c.A, c.B, c.C) == pytest.approx((A, B, C), rel=1e-12, abs=1e-12)
    tau_bar = steps.mean()
    assert c.B == pytest.approx(tau_bar - 1 + np.var(steps) / tau_bar, rel=1e-12, abs=1e-12)
    if seed == 0:
        assert c.B == pytest.approx(steps[0] - 1.0, abs=1e-12)
    ones = corollary1_constants(np.ones(m, dtype=int))    # tau_i = 1: synchronous SGD
    assert (ones.tau_eff, ones.A, ones.B, ones.C) == (1.0, 1.0, 0.0, 0.0)


# ------------------------------------------------------------------ App. E.2 (FedProx)
@pytest.mark.parametrize("seed", SEEDS)
def test_fedprox_theorem1_constants_are_those_of_real_proximal_rounds(seed):
    rng = _seed(2, seed)
    m = int(rng.integers(2, 7))
    p = rng.dirichlet(np.ones(m))
    steps = rng.integers(1, 25, size=m)
    lr = float(rng.uniform(0.01, 0.3))
    alpha = float(rng.uniform(0.01, 0.99)) if seed else 1.0
    solver = proximal_sgd(lr, alpha / lr)
    diag = _real_round(make_algorithm("fedprox", solver), p, steps)
    w_real = np.asarray(diag.weights) / np.sum(diag.weights)
    probed = [_probed_a(solver, int(t)) for t in steps]
    A, B, C = theorem1_constants(w_real, probed, float(diag.tau_eff))
    c = fedprox_theorem1_constants(p, steps, alpha)
    assert c.tau_eff == pytest.approx(float(diag.tau_eff), rel=1e-10)
    np.testing.assert_allclose(c.weights, w_real, rtol=1e-10)
    assert (c.A, c.B, c.C) == pytest.approx((A, B, C), rel=1e-10, abs=1e-12)
    if alpha == 1.0:                                  # the extreme: consistent, tau_eff = 1, no drift terms
        assert c.tau_eff == 1.0 and c.B == 0.0 and c.C == 0.0
        np.testing.assert_allclose(c.weights, p, rtol=1e-14)


@pytest.mark.parametrize("seed", SEEDS)
def test_fedprox_constants_tend_to_fedavgs_as_alpha_tends_to_zero(seed):
    """App. E.2's L'Hospital limits: FedProx's tau_eff, A, B, C -> FedAvg's (SGD) at O(alpha)."""
    rng = _seed(3, seed)
    m = int(rng.integers(2, 7))
    p = rng.dirichlet(np.ones(m))
    steps = rng.integers(1, 25, size=m)
    te, w = fedavg_weights(p, steps.astype(float))
    fedavg = np.array([te, *theorem1_constants(w, [np.ones(int(t)) for t in steps], te)])
    at0 = fedprox_theorem1_constants(p, steps, 0.0)
    np.testing.assert_allclose([at0.tau_eff, at0.A, at0.B, at0.C], fedavg, rtol=1e-12, atol=1e-12)
    gaps = []
    for alpha in (1e-3, 5e-4, 2.5e-4):
        c = fedprox_theorem1_constants(p, steps, alpha)
        gaps.append(np.abs(np.array([c.tau_eff, c.A, c.B, c.C]) - fedavg).max())
    ratios = np.array(gaps[:-1]) / np.array(gaps[1:])
    assert np.all(np.abs(ratios - 2) < 0.1), ratios   # first order in alpha


# ------------------------------------------------------------------ App. A, concrete example
@pytest.mark.parametrize("seed", SEEDS)
def test_lemma1_fixed_point_at_a_finite_step_is_that_of_real_fedavg_rounds(seed):
    rng = _seed(4, seed)
    m, d = int(rng.integers(2, 6)), int(rng.integers(1, 4))
    problem = identity_quadratic(m, d, seed=seed, p=rng.dirichlet(np.ones(m)))
    steps = rng.integers(1, 12, size=m)
    lr = float(rng.uniform(0.05, 0.95) if seed % 2 else rng.uniform(1.05, 1.9))  # (1 - eta)^tau alternates above 1
    x_real = _fixed_point(*_round_map(make_algorithm("fedavg", sgd(lr)), problem, steps))
    x_closed = lemma1_fixed_point(problem.e, problem.p, steps, lr)
    np.testing.assert_allclose(x_closed, x_real, rtol=1e-9, atol=1e-9 * np.abs(problem.e).max())
    # eta -> 0: the small-step limit (App. A's L'Hospital step)
    tiny = lemma1_fixed_point(problem.e, problem.p, steps, 1e-7)
    lim = lemma1_small_lr_limit(problem.e, problem.p, steps)
    assert np.linalg.norm(tiny - lim) <= 1e-5 * np.linalg.norm(lim)


# ------------------------------------------------------------------ §4.2 / Figure 4
@pytest.mark.parametrize("seed", SEEDS)
def test_fedprox_trade_off_is_monotone_in_alpha_for_random_clients(seed):
    """With ||a_i||_1 measured from real proximal runs (unit gradients): chi^2(p||w) decreases strictly
    and tau_eff decreases strictly as alpha grows (w -> p, slower); alpha = 1: chi^2 = 0 and, for
    p_i = 1/m, a slowdown tau_bar times FedAvg's (alpha = 0)."""
    rng = _seed(5, seed)
    m = int(rng.integers(2, 7))
    p = rng.dirichlet(np.ones(m)) if seed % 2 else np.full(m, 1.0 / m)
    steps = rng.integers(1, 30, size=m)
    steps[0], steps[1] = 1, 30                        # heterogeneous
    lr = 0.1
    chis, taus = [], []
    for alpha in np.linspace(0.0, 1.0, 21):
        solver = sgd(lr) if alpha == 0 else proximal_sgd(lr, alpha / lr)
        norms = np.array([-solver.run(np.zeros(1), lambda x, k: np.ones(1), int(t)).params[0] / lr for t in steps])
        te, w = fedavg_weights(p, norms)
        chis.append(chi_square(p, w))
        taus.append(te)
    chis, taus = np.array(chis), np.array(taus)
    assert np.all(np.diff(chis[:-1]) < 0) and chis[-1] == pytest.approx(0.0, abs=1e-15), chis
    assert np.all(np.diff(taus) < 0) and taus[-1] == pytest.approx(1.0, rel=1e-14), taus
    if seed % 2 == 0:
        assert slowdown(steps, taus[-1]) / slowdown(steps, taus[0]) == pytest.approx(steps.mean(), rel=1e-12)


# ------------------------------------------------------------------ §4.1 decayed learning rate
@pytest.mark.parametrize("seed", SEEDS)
def test_decayed_steps_with_gamma_one_minus_alpha_mirror_fedprox(seed):
    rng = _seed(6, seed)
    lr, tau = float(rng.uniform(0.01, 0.5)), int(rng.integers(1, 30))
    gamma = float(rng.uniform(0.05, 0.99))
    decayed = _probed_a(decayed_sgd(lr, gamma=gamma), tau)
    np.testing.assert_allclose(decayed, gamma ** np.arange(tau), rtol=1e-12)     # a = [1, gamma, ..., gamma^(tau-1)]
    assert decayed.sum() == pytest.approx((1 - gamma ** tau) / (1 - gamma), rel=1e-12)
    prox = _probed_a(proximal_sgd(lr, (1 - gamma) / lr), tau)
    np.testing.assert_allclose(decayed, prox[::-1], rtol=1e-12)
    m = int(rng.integers(2, 6))
    p, steps = rng.dirichlet(np.ones(m)), rng.integers(1, 30, size=m)
    w_dec = fedavg_weights(p, [decayed_sgd(lr, gamma=gamma).a_norm(int(t)) for t in steps])[1]
    w_prox = fedavg_weights(p, [proximal_sgd(lr, (1 - gamma) / lr).a_norm(int(t)) for t in steps])[1]
    np.testing.assert_allclose(w_dec, w_prox, rtol=1e-12)


# ------------------------------------------------------------------ eq. (6) + Theorem 1, mixed solvers
@pytest.mark.parametrize("seed", range(3))
def test_fedavg_with_mixed_solvers_tends_to_the_a_norm_weighted_surrogate(seed):
    """Clients with different fixed solvers (momentum rho_i, decayed gamma_i, momentum + prox with
    alpha = eta mu fixed): FedAvg's limit tends to argmin sum_i p_i ||a_i||_1 F_i at O(eta), FedNova's
    to x* — and the tau-weighted point is not FedAvg's limit."""
    rng = _seed(7, seed)
    m, d = 3, 3
    problem = random_quadratic(m, d, seed=40 + seed, p=rng.dirichlet(np.ones(m)))
    steps = rng.integers(2, 10, size=m)
    rho, gamma, rho2, alpha = (float(rng.uniform(0.3, 0.9)), float(rng.uniform(0.5, 0.95)),
                               float(rng.uniform(0.3, 0.9)), float(rng.uniform(0.05, 0.3)))

    def solvers(lr):
        return [momentum_sgd(lr, rho), decayed_sgd(lr, gamma=gamma), momentum_proximal_sgd(lr, rho2, mu=alpha / lr)]

    dist_avg, dist_nova = [], []
    for lr in (0.004, 0.002, 0.001):
        ss = solvers(lr)
        w = problem.p * np.array([s.a_norm(int(t)) for s, t in zip(ss, steps)])
        target = surrogate_optimum(problem, w / w.sum())
        x_avg = _fixed_point(*_round_map(make_algorithm("fedavg", sgd(lr)), problem, steps, ss))
        x_nova = _fixed_point(*_round_map(make_algorithm("fednova", sgd(lr)), problem, steps, ss))
        dist_avg.append(np.linalg.norm(x_avg - target))
        dist_nova.append(np.linalg.norm(x_nova - problem.optimum()))
    for dist in (dist_avg, dist_nova):
        ratios = np.array(dist[:-1]) / np.array(dist[1:])
        assert np.all(np.abs(ratios - 2) < 0.3), ratios
    by_tau = surrogate_optimum(problem, problem.p * steps / (problem.p @ steps))
    assert dist_avg[-1] < 0.1 * np.linalg.norm(target - by_tau)
    assert dist_nova[-1] < 0.1 * np.linalg.norm(target - problem.optimum())


# ------------------------------------------------------------------ App. C.6 and G
@pytest.mark.parametrize("seed", SEEDS)
def test_step_size_conditions_give_the_inequalities_the_proofs_use(seed):
    rng = _seed(8, seed)
    lr, tau = float(rng.uniform(1e-3, 0.05)), int(rng.integers(2, 20))
    solver = momentum_proximal_sgd(lr, float(rng.uniform(0, 0.9)), mu=float(rng.uniform(0, 5)))
    a = _probed_a(solver, tau)
    C = a.sum() ** 2 - a.sum() * a[-1]
    L = float(np.sqrt(rng.uniform(0.01, 1.0) / (3 * 4 * lr ** 2 * C)))  # a smoothness with D <= 1/3
    D = 4 * lr ** 2 * L ** 2 * C
    beta2 = theorem1_max_beta2(lr, L, C)
    assert D == pytest.approx(1 / (2 * beta2 + 1), rel=1e-12)      # the condition is met with equality
    for b2 in (beta2, float(rng.uniform(1.0, beta2))):
        assert D <= 1 / (2 * b2 + 1) * (1 + 1e-12)
        assert 1 / (1 - D) <= (1 + 1 / (2 * b2)) * (1 + 1e-12)     # App. C.6
        assert D * b2 / (1 - D) <= 0.5 * (1 + 1e-12)
    b2 = float(rng.uniform(1.0, 50.0))                               # App. G: D <= 1/(12 beta^2 + 1)
    for DG in (1 / (12 * b2 + 1), float(rng.uniform(0, 1 / (12 * b2 + 1)))):
        assert 1 / (1 - DG) <= (1 + 1 / (12 * b2)) * (1 + 1e-12) <= 2
        assert 3 * DG * b2 / (1 - DG) <= 0.25 * (1 + 1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_fedprox_constants_for_many_local_steps_are_corollary2s_approximations(seed):
    r"""App. E.2 / Corollary 2 with p_i = 1/m, tau_i = tau and alpha tau >> 1: tau_eff -> 1/alpha,
    A -> 1/(2 - alpha) ~ 1/2, B ~ 1/(2 alpha), C ~ 1/alpha^2 (the relaxations behind alpha*),
    each with a relative error O(alpha) — checked on the constants of a real proximal solver's a_i."""
    rng = _seed(9, seed)
    m = int(rng.integers(1, 6))
    errors = []
    for alpha in (0.04, 0.02, 0.01):
        tau = int(np.ceil(60 / alpha))               # (1 - alpha)^tau < e^-60
        lr = float(rng.uniform(0.01, 0.5))
        a = proximal_sgd(lr, alpha / lr).a_vector(tau)
        A, B, C = theorem1_constants(np.full(m, 1 / m), [a] * m, a.sum())
        c = fedprox_theorem1_constants(np.full(m, 1 / m), [tau] * m, alpha)
        assert (c.A, c.B, c.C) == pytest.approx((A, B, C), rel=1e-9)
        assert A == pytest.approx(1 / (2 - alpha), rel=1e-12)
        errors.append([abs(alpha * a.sum() - 1), abs(2 * A - 1), abs(2 * alpha * B - 1), abs(alpha ** 2 * C - 1)])
    errors = np.array(errors)
    assert np.all(errors[:, 0] < 1e-12)
    ratios = errors[:-1, 1:] / errors[1:, 1:]
    assert np.all(np.abs(ratios - 2) < 0.1), ratios  # the approximations' errors are first order in alpha


# ------------------------------------------------------------------ Theorem 1 for FedProx and FedNova-prox
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("algorithm", ["fedprox", "fednova-prox"])
def test_theorem1_bound_holds_for_real_proximal_runs(algorithm, seed):
    r"""Theorem 1 (App. C's constants) for proximal local SGD — FedProx (w, tau_eff of App. E.2's closed
    form) and FedNova-prox (w = p, tau_eff = sum_i p_i tau_i, §5) — on noisy random quadratics:
    the measured (1/T) sum_t E||grad F~(x^(t,0))||^2 of real runs stays below the bound."""
    from fedlib.engines.quadratic import run_replicas
    from fedlib.experiments.bounds import objective_gap
    from fedlib.schedules import RandomLocalWork
    from fedlib.theory import quadratic_kappa2, quadratic_min_beta2, quadratic_smoothness, theorem1_explicit_bound

    rng = _seed(10, seed)
    m, d, rounds, sigma = 5, 4, 150, 0.5
    problem = random_quadratic(m, d, seed=50 + seed, spread=1.0, p=rng.dirichlet(3 * np.ones(m)))
    steps = rng.integers(1, 12, size=m)
    alpha = float(rng.uniform(0.02, 0.3))
    lr = 0.05 * np.sqrt(m / (steps.mean() * rounds))
    solver = proximal_sgd(lr, alpha / lr)
    a_vectors = [solver.a_vector(int(t)) for t in steps]
    if algorithm == "fedprox":
        c = fedprox_theorem1_constants(problem.p, steps, alpha)
        w, tau_eff, aggregation, fixed_tau = c.weights, c.tau_eff, "fedavg", None
    else:
        w, tau_eff, aggregation = problem.p, float(problem.p @ steps), "fednova"
        fixed_tau = tau_eff
    L = quadratic_smoothness(problem.H)
    C = theorem1_constants(w, a_vectors, tau_eff)[2]
    beta2 = min(theorem1_max_beta2(lr, L, C), 1e12)
    assert beta2 > quadratic_min_beta2(problem.H, w)
    kappa2 = quadratic_kappa2(problem.H, problem.e, w, beta2)
    bound = theorem1_explicit_bound(lr, rounds, L=L, sigma2=sigma ** 2 * d, beta2=beta2, kappa2=kappa2,
                                    initial_gap=objective_gap(problem, w), w=w, a_vectors=a_vectors, tau_eff=tau_eff)
    run = run_replicas(problem, aggregation, [solver], RandomLocalWork(steps, steps, 1, seed), rounds, sigma=sigma,
                       replicas=8, seed=seed, tau_eff=fixed_tau, surrogate_weights=w)
    measured = float(run.surrogate_grad_norm2[:rounds].mean())
    assert 0 < measured <= bound.total, (measured, bound)


# ------------------------------------------------------------------ App. A, FedProx on quadratics
@pytest.mark.parametrize("seed", SEEDS)
def test_fedprox_round_is_app_as_affine_map_and_converges_under_its_norm_condition(seed):
    r"""App. A: one real FedProx round is x -> (I - sum_i p_i K_i H_i) x + sum_i p_i K_i e_i with
    K_i = [I - (I - eta mu I - eta H_i)^tau_i](H_i + mu I)^{-1} (built here from the formula), so after T
    rounds x^(T) - x~ = (I - sum p K H)^T (x^(0) - x~); when ||I - sum p K H||_2 < 1 the real rounds
    converge to x~ = (sum p K H)^{-1} sum p K e at that rate (the code's own test is the spectral radius)."""
    rng = _seed(11, seed)
    m, d = int(rng.integers(2, 5)), int(rng.integers(1, 4))
    problem = random_quadratic(m, d, seed=60 + seed, p=rng.dirichlet(np.ones(m)))
    steps = rng.integers(1, 10, size=m)
    lr, mu = float(rng.uniform(0.02, 0.2)), float(rng.uniform(0.0, 2.0))
    I = np.eye(d)
    K = [(I - np.linalg.matrix_power(I - lr * mu * I - lr * H, int(t))) @ np.linalg.inv(H + mu * I)
         for H, t in zip(problem.H, steps)]
    M_paper = I - sum(pi * Ki @ H for pi, Ki, H in zip(problem.p, K, problem.H))
    b_paper = sum(pi * Ki @ e for pi, Ki, e in zip(problem.p, K, problem.e))
    algo = make_algorithm("fedprox", proximal_sgd(lr, mu))
    M_real, b_real = _round_map(algo, problem, steps)
    np.testing.assert_allclose(M_real, M_paper, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(b_real, b_paper, rtol=1e-10, atol=1e-12)
    norm = np.linalg.norm(M_paper, 2)
    assert norm < 1                                   # the condition holds for these step sizes
    x_tilde = np.linalg.solve(I - M_paper, b_paper)
    x0 = rng.standard_normal(d)
    T = 10
    run = run_sequential(algo, x0, problem.grad_fn(), problem.p, FixedSteps(steps), T)
    want = x_tilde + np.linalg.matrix_power(M_paper, T) @ (x0 - x_tilde)
    np.testing.assert_allclose(run.state.params, want, rtol=1e-9, atol=1e-9 * np.linalg.norm(x_tilde))
    assert np.linalg.norm(run.state.params - x_tilde) <= norm ** T * np.linalg.norm(x0 - x_tilde) * (1 + 1e-9) + 1e-11 * np.linalg.norm(x_tilde)


@pytest.mark.parametrize("call,match", [
    (lambda: corollary1_constants([1, 0]), "local_steps"),
    (lambda: corollary1_constants([1.5, 2]), "local_steps"),
    (lambda: fedprox_theorem1_constants([0.5, 0.5], [1, 2], -0.1), "alpha"),
    (lambda: fedprox_theorem1_constants([0.5, 0.5], [1, 2], 1.5), "alpha"),
    (lambda: fedprox_theorem1_constants([0.5, 0.5], [1, 2], float("nan")), "alpha"),
    (lambda: fedprox_theorem1_constants([0.5, 0.6], [1, 2], 0.1), "p"),
    (lambda: fedprox_theorem1_constants([0.5, 0.5], [1, 2, 3], 0.1), "local_steps"),
    (lambda: lemma1_fixed_point(np.ones((2, 1)), [0.5, 0.5], [1, 2], 2.0), "lr"),
    (lambda: lemma1_fixed_point(np.ones((2, 1)), [0.5, 0.5], [1, 2], 0.0), "lr"),
    (lambda: lemma1_fixed_point(np.ones((2, 1)), [0.5, 0.5], [1, 0], 0.1), "local_steps"),
    (lambda: lemma1_fixed_point(np.array([[np.inf], [1.0]]), [0.5, 0.5], [1, 2], 0.1), "e"),
])
def test_new_closed_forms_refuse_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_new_closed_forms_at_their_edges():
    """A client of weight 0 leaves C alone (as in theorem1_constants); lr = 1 and alpha = 1 exactly."""
    c = fedprox_theorem1_constants([1.0, 0.0], [2, 50], 0.0)
    assert c.C == 2.0 and c.weights[1] == 0.0
    assert fedprox_theorem1_constants([0.3, 0.7], [4, 9], 1.0).tau_eff == 1.0
    np.testing.assert_allclose(lemma1_fixed_point([[1.0], [-1.0]], [0.25, 0.75], [1, 5], 1.0), [-0.5])  # K_i = 1

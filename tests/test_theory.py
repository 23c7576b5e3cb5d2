"""Theory functions: χ², slowdown, Theorem 1's constants, FedProx's weights, App. D.1,
and the closed-form quadratic fixed points checked against simulated rounds; the input checks of Theorem 1's
constants (weights, a vectors) and of quadratic_smoothness."""
from __future__ import annotations

import math

import numpy as np
import pytest

from fedlib import theory as TH
from fedlib.algorithms import make_algorithm
from fedlib.engines.reference import run_sequential
from fedlib.problems import QuadraticProblem, random_quadratic
from fedlib.rule import fedavg_weights
from fedlib.schedules import FixedSteps
from fedlib.solvers import momentum_sgd, proximal_sgd, sgd


# ---------------------------------------------------------------- χ², slowdown
def test_chi_square_hand():
    assert TH.chi_square([0.5, 0.5], [0.25, 0.75]) == pytest.approx(1 / 3, abs=1e-15)
    # 0.1²/0.1 + 0.3²/0.6 + 0.2²/0.3 = 0.1 + 0.15 + 0.1333…
    assert TH.chi_square([0.2, 0.3, 0.5], [0.1, 0.6, 0.3]) == pytest.approx(0.1 + 0.15 + 0.04 / 0.3, abs=1e-15)
    assert TH.chi_square([0.2, 0.3, 0.5], [0.2, 0.3, 0.5]) == 0.0
    assert TH.chi_square([0.5, 0.5, 0.0], [0.5, 0.5, 0.0]) == 0.0   # w_i = 0 with p_i = 0 is fine
    with pytest.raises(ValueError, match=r"^w\b"):
        TH.chi_square([0.5, 0.5], [1.0, 0.0])


def test_slowdown():
    assert TH.slowdown([2, 4, 6], 2.0) == 2.0
    # FedAvg with SGD: τ_eff = Σ p_i τ_i; equal p and τ gives 1
    assert TH.slowdown([5, 5], fedavg_weights([0.5, 0.5], [5, 5])[0]) == 1.0


def test_slowdown_beyond_float64_is_refused():
    """tau_bar / tau_eff = 3 / 1e-310 = 3e310 (was returned as inf, silently)."""
    with pytest.raises(ValueError, match=r"^tau_eff: the slowdown tau_bar / tau_eff = 3.0 / 1e-310 exceeds float64"):
        TH.slowdown([3, 3], 1e-310)
    assert TH.slowdown([3, 3], 1e-300) == pytest.approx(3e300, rel=1e-15)


# ---------------------------------------------------------------- App. D.1
# The paper writes χ² = (τ₂−τ₁)²/(2τ₁τ₂) and κ² = 2w₁w₂a²; evaluating its own definitions gives
# (τ₂−τ₁)²/(4τ₁τ₂) and 4w₁w₂a² (the factors of 2 cancel in χ²κ², which is what D.1 needs).
@pytest.mark.parametrize("t1,t2,a", [(1, 3, 1.0), (2, 10, 0.5), (7, 7, 2.0), (5, 1, 3.0)])
def test_two_client_lower_bound(t1, t2, a):
    ex = TH.two_client_lower_bound(t1, t2, a)
    w1, w2 = t1 / (t1 + t2), t2 / (t1 + t2)
    np.testing.assert_allclose(ex.weights, [w1, w2], rtol=1e-15)
    # χ² by its definition, written out
    chi2_def = (w1 - 0.5) ** 2 / w1 + (w2 - 0.5) ** 2 / w2
    assert ex.chi2 == pytest.approx(chi2_def, rel=1e-13, abs=1e-15)
    assert ex.chi2 == pytest.approx((t2 - t1) ** 2 / (4 * t1 * t2), rel=1e-13, abs=1e-15)
    paper_chi2 = (t2 - t1) ** 2 / (2 * t1 * t2)
    assert ex.chi2 == pytest.approx(paper_chi2 / 2, rel=1e-13, abs=1e-15)
    # κ²: the smallest constant of Assumption 3 with β² = 1, max over x of
    # Σ w_i F_i'(x)² − (Σ w_i F_i'(x))² (constant in x for this pair)
    xs = np.linspace(-5, 5, 11)
    gap = w1 * (xs - a) ** 2 + w2 * (xs + a) ** 2 - (w1 * (xs - a) + w2 * (xs + a)) ** 2
    assert ex.kappa2 == pytest.approx(gap.max(), rel=1e-12, abs=1e-14)
    assert ex.kappa2 == pytest.approx(4 * w1 * w2 * a**2, rel=1e-14)
    # the floor χ²κ² equals ‖∇F(x̃)‖² = x̃² (∇F(x) = x for F = ½F1 + ½F2) — and so does the paper's pair
    assert ex.grad_norm_sq == pytest.approx(ex.chi2 * ex.kappa2, rel=1e-12, abs=1e-15)
    assert ex.grad_norm_sq == pytest.approx(paper_chi2 * 2 * w1 * w2 * a**2, rel=1e-12, abs=1e-15)
    assert ex.grad_norm_sq == pytest.approx(ex.x_limit**2, rel=1e-15, abs=1e-15)
    # the limit is FedAvg's fixed point on F1 = ½(x−a)², F2 = ½(x+a)² as η → 0
    H = np.ones((2, 1, 1))
    e = np.array([[a], [-a]])
    x = TH.quadratic_fixed_point(H, e, [0.5, 0.5], [t1, t2], 1e-6, "fedavg")
    assert x[0] == pytest.approx(ex.x_limit, abs=1e-5 * a)


def test_two_client_hand():
    ex = TH.two_client_lower_bound(1, 3, 1.0)
    # w = (1/4, 3/4): χ² = (1/4)²/(1/4) + (1/4)²/(3/4) = 1/4 + 1/12 = 1/3
    assert ex.chi2 == pytest.approx(1 / 3, abs=1e-15)
    assert ex.kappa2 == pytest.approx(4 * 0.25 * 0.75, abs=1e-15)
    assert ex.x_limit == pytest.approx(-0.5) and ex.grad_norm_sq == pytest.approx(0.25)
    assert ex.chi2 * ex.kappa2 == pytest.approx(0.25, abs=1e-15)


# ---------------------------------------------------------------- FedProx
@pytest.mark.parametrize("alpha", [1e-6, 0.01, 0.2, 0.7])
def test_fedprox_weights_match_prox_solver(alpha):
    p = np.array([0.1, 0.4, 0.2, 0.3])
    steps = np.array([1, 10, 4, 25])
    lr = 0.05
    a = np.array([proximal_sgd(lr, alpha / lr).a_norm(int(t)) for t in steps])
    te, w = TH.fedprox_weights(p, steps, alpha)
    te2, w2 = fedavg_weights(p, a)
    assert te == pytest.approx(te2, rel=1e-12)
    np.testing.assert_allclose(w, w2, rtol=1e-12)


def test_fedprox_limits():
    p = np.array([0.1, 0.4, 0.2, 0.3])
    steps = np.array([1, 10, 4, 25])
    te0, w0 = TH.fedprox_weights(p, steps, 0.0)
    assert te0 == pytest.approx(p @ steps) and np.allclose(w0, p * steps / (p @ steps))
    te_small, w_small = TH.fedprox_weights(p, steps, 1e-12)      # α → 0: FedAvg with SGD
    assert te_small == pytest.approx(te0, rel=1e-9)
    np.testing.assert_allclose(w_small, w0, rtol=1e-9)
    te1, w1 = TH.fedprox_weights(p, steps, 1.0)                   # α = 1: consistent, τ_eff = 1
    assert te1 == 1.0
    np.testing.assert_allclose(w1, p, atol=1e-15)
    # χ² decreases and τ_eff decreases as α grows (Figure 4's trade-off)
    alphas = [0.0, 0.01, 0.1, 0.5, 1.0]
    chis = [TH.chi_square(p, TH.fedprox_weights(p, steps, al)[1]) for al in alphas]
    taus = [TH.fedprox_weights(p, steps, al)[0] for al in alphas]
    assert all(x > y for x, y in zip(chis, chis[1:-1])) and chis[-1] == pytest.approx(0.0, abs=1e-15)
    assert all(x > y for x, y in zip(taus, taus[1:]))


def test_corollary2():
    assert TH.corollary2_best_alpha(4, 16.0, 64) == pytest.approx(2 / (4 * 2))   # √m / (√τ̄ T^{1/6})
    assert TH.corollary2_best_alpha(4, 16.0, 64, constant=2.0) == pytest.approx(0.5)
    assert TH.corollary2_best_alpha(100, 1.0, 1) == 1.0                           # clipped


# ---------------------------------------------------------------- Theorem 1
def test_theorem1_fedavg_sgd_equal_p_gives_A_equal_1():
    rng = np.random.default_rng(0)
    for m in (2, 5, 16):
        steps = rng.integers(1, 40, m)
        p = np.full(m, 1 / m)
        te, w = fedavg_weights(p, steps.astype(float))
        A, B, C = TH.theorem1_constants(w, [np.ones(t) for t in steps], te)
        assert A == pytest.approx(1.0, rel=1e-13)
        assert B == pytest.approx(float(w @ (steps - 1)), rel=1e-13)
        assert C == pytest.approx(float(np.max(steps**2 - steps)), rel=1e-13)


def test_theorem1_hand():
    a = [np.ones(1), np.ones(3)]
    # FedNova, w = p = [.5, .5], τ_eff = 2: A = 2·2·(.25/1 + .25/3), B = .5·0 + .5·2, C = max(0, 6)
    A, B, C = TH.theorem1_constants([0.5, 0.5], a, 2.0)
    assert (A, B, C) == pytest.approx((4 / 3, 1.0, 6.0), rel=1e-14)
    # FedAvg, w = [.25, .75]: A = 4·(.0625 + .5625/3) = 1, B = .75·2
    A, B, C = TH.theorem1_constants([0.25, 0.75], a, 2.0)
    assert (A, B, C) == pytest.approx((1.0, 1.5, 6.0), rel=1e-14)
    # momentum ρ = .5, τ = 3: a = [1.75, 1.5, 1]; ‖a‖₂² = 6.3125, ‖a‖₁ = 4.25
    A, B, C = TH.theorem1_constants([1.0], [momentum_sgd(0.1, 0.5).a_vector(3)], 4.25)
    assert (A, B, C) == pytest.approx((4.25 * 6.3125 / 4.25**2, 5.3125, 4.25**2 - 4.25), rel=1e-14)


def test_theorem1_bound_hand():
    terms = TH.theorem1_bound(4, 2.0, 8, 1.0, 1.0, 2.0, 3.0)
    # √(m τ̄ T) = 8: (2/1)/8, 1/8, 4·2/16, 4·3/16
    assert terms == pytest.approx((0.25, 0.125, 0.5, 0.75))
    assert terms.total == pytest.approx(1.625)
    t2 = TH.theorem1_bound(4, 2.0, 8, 1.0, 1.0, 2.0, 3.0, sigma2=2.0, kappa2=0.0)
    assert t2 == pytest.approx((0.25, 0.25, 1.0, 0.0))


# ---------------------------------------------------------------- quadratics
def test_local_operator_matches_paper_and_solver():
    prob = random_quadratic(1, 5, seed=3)
    H, e = prob.H[0], prob.e[0]
    lr, mu, tau = 0.1, 0.7, 6
    K = TH.quadratic_local_operator(H, tau, lr, mu)
    d = H.shape[0]
    closed = (np.eye(d) - np.linalg.matrix_power(np.eye(d) - lr * mu * np.eye(d) - lr * H, tau)) @ np.linalg.inv(H + mu * np.eye(d))
    np.testing.assert_allclose(K, closed, rtol=1e-12, atol=1e-13)
    x0 = np.random.default_rng(0).standard_normal(d)
    run = proximal_sgd(lr, mu).run(x0, lambda x, k: H @ x - e, tau)
    np.testing.assert_allclose(run.params - x0, -K @ (H @ x0 - e), rtol=1e-12, atol=1e-13)


def test_global_optimum():
    prob = random_quadratic(4, 6, seed=1, p=[0.1, 0.2, 0.3, 0.4])
    x = TH.quadratic_global_optimum(prob.H, prob.e, prob.p)
    assert np.linalg.norm(prob.global_grad(x)) <= 1e-12 * np.linalg.norm(prob.e)
    np.testing.assert_allclose(prob.optimum(), x)


def _instance(seed, m=8, d=10):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.5, 1.5, m)
    p /= p.sum()
    prob = random_quadratic(m, d, seed=seed, eig_range=(1.0, 2.0), p=p)
    steps = rng.integers(1, 9, m)
    assert len(set(steps.tolist())) > 2  # heterogeneous
    return prob, steps


ALGOS = [("fedavg", lambda lr: sgd(lr), 0.0, None), ("fedprox", lambda lr: proximal_sgd(lr, 1.0), 1.0, None),
         ("fednova", lambda lr: sgd(lr), 0.0, None), ("fednova", lambda lr: proximal_sgd(lr, 1.0), 1.0, "local_steps")]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name,make,mu,tau_eff", ALGOS, ids=["fedavg", "fedprox", "fednova", "fednova-prox"])
def test_fixed_point_matches_simulation(seed, name, make, mu, tau_eff):
    prob, steps = _instance(seed)
    lr = 0.1
    M, b = TH.quadratic_round_map(prob.H, prob.e, prob.p, steps, lr, name, mu, tau_eff)
    rho = float(np.max(np.abs(np.linalg.eigvals(M))))
    assert rho < 0.9
    x_fp = TH.quadratic_fixed_point(prob.H, prob.e, prob.p, steps, lr, name, mu, tau_eff)
    x0 = np.zeros(prob.dim)
    rounds = int(math.ceil(math.log(1e-14) / math.log(rho))) + 5
    algo = make_algorithm(name, make(lr), tau_eff=tau_eff)
    run = run_sequential(algo, x0, prob.grad_fn(), prob.p, FixedSteps(steps), rounds,
                         metric_fn=lambda x, t: np.array(x, copy=True) if t <= 1 else None)
    # one simulated round is the affine map x -> M x + b
    np.testing.assert_allclose(run.metrics[1], M @ x0 + b, rtol=1e-12, atol=1e-13)
    x_sim = run.state.params
    assert np.linalg.norm(x_sim - x_fp) <= 1e-10 * np.linalg.norm(x_fp)
    if name == "fedavg":  # heterogeneous steps: FedAvg's point is not x*
        assert np.linalg.norm(x_fp - prob.optimum()) > 1e-3 * np.linalg.norm(prob.optimum())


def test_fednova_fixed_point_independent_of_tau_eff():
    prob, steps = _instance(5)
    pts = [TH.quadratic_fixed_point(prob.H, prob.e, prob.p, steps, 0.05, "fednova", tau_eff=t) for t in (None, "local_steps", 2.0)]
    for x in pts[1:]:
        np.testing.assert_allclose(x, pts[0], rtol=1e-10)


def test_fednova_fixed_point_tends_to_optimum_linearly_in_lr():
    prob, steps = _instance(7)
    x_star = prob.optimum()
    lrs = [0.04, 0.02, 0.01, 0.005, 0.0025]
    err_nova = [np.linalg.norm(TH.quadratic_fixed_point(prob.H, prob.e, prob.p, steps, lr, "fednova") - x_star) for lr in lrs]
    err_avg = [np.linalg.norm(TH.quadratic_fixed_point(prob.H, prob.e, prob.p, steps, lr, "fedavg") - x_star) for lr in lrs]
    ratios = [a / b for a, b in zip(err_nova, err_nova[1:])]
    assert all(1.8 < r < 2.2 for r in ratios), ratios          # error ∝ lr
    assert err_nova[-1] < 0.02 * err_avg[-1]
    # FedAvg's error does not vanish as lr → 0 (objective inconsistency)
    assert err_avg[-1] > 0.5 * err_avg[0]


def test_lemma1_small_lr_limit():
    rng = np.random.default_rng(3)
    m, d = 6, 4
    e = rng.standard_normal((m, d)) * 3
    p = rng.uniform(0.5, 1, m)
    p /= p.sum()
    steps = rng.integers(1, 12, m)
    H = np.broadcast_to(np.eye(d), (m, d, d)).copy()
    lim = TH.lemma1_small_lr_limit(e, p, steps)
    np.testing.assert_allclose(lim, (p * steps) @ e / (p @ steps), rtol=1e-14)
    x = TH.quadratic_fixed_point(H, e, p, steps, 1e-7, "fedavg")
    assert np.linalg.norm(x - lim) <= 1e-5 * np.linalg.norm(lim)
    assert np.linalg.norm(lim - p @ e) > 0.05 * np.linalg.norm(p @ e)   # ≠ x* = Σ p_i e_i
    # equal p: Σ τ_i e_i / Σ τ_i
    q = np.full(m, 1 / m)
    np.testing.assert_allclose(TH.lemma1_small_lr_limit(e, q, steps), steps @ e / steps.sum(), rtol=1e-14)


def _fixed_point_at_60_digits(H, e, p, steps, lr, algorithm, mu=0.0, momentum=0.0):
    """quadratic_fixed_point's point by mpmath at 60 digits, from the local recursion itself:
    U_{k+1} = rho U_k + H_i D_k + I, D_{k+1} = D_k - lr (U_{k+1} + mu D_k), K_i = -D_tau; FedNova's c_i = p_i/||a_i||_1
    with ||a_i||_1 = K_i(H_i = 0)/lr (a constant gradient moves x by -lr ||a_i||_1 g); the point solves
    (sum_i c_i K_i H_i) x = sum_i c_i K_i e_i (c_i = p_i for FedAvg/FedProx; a common factor such as tau_eff cancels)."""
    mp = pytest.importorskip("mpmath")
    with mp.workdps(60):
        d = H.shape[1]
        lr, mu, rho = mp.mpf(lr), mp.mpf(mu), mp.mpf(momentum)

        def local_operator(Hi, tau):
            D, U = mp.zeros(d, d), mp.zeros(d, d)
            for _ in range(tau):
                U = rho * U + Hi * D + mp.eye(d)
                D = D - lr * (U + mu * D)
            return -D

        A, b = mp.zeros(d, d), mp.zeros(d, 1)
        for Hi, ei, pi, tau in zip(H, e, p, steps):
            Hi = mp.matrix(Hi.tolist())
            K = local_operator(Hi, int(tau))
            c = mp.mpf(pi) / (local_operator(mp.zeros(d, d), int(tau))[0, 0] / lr if algorithm == "fednova" else 1)
            A += c * K * Hi
            b += c * K * mp.matrix(ei.tolist())
        return np.array(mp.lu_solve(A, b).tolist(), dtype=np.float64).ravel()


@pytest.mark.parametrize("algorithm, mu, momentum", [("fedavg", 0.0, 0.0), ("fednova", 0.0, 0.0),
                                                     ("fedprox", 0.3, 0.0), ("fednova", 0.0, 0.5)])
@pytest.mark.parametrize("lr", [1e-1, 1e-6, 1e-10, 1e-13, 1e-17])
def test_fixed_point_is_exact_to_rounding_at_any_small_lr(algorithm, mu, momentum, lr):
    """Against the point at 60 digits, rel 1e-14 (measured <= 7.1e-16 over these cases). Solving with I - M lost
    about log10(1/(lr tau)) digits: up to 1.7e-11 relative at lr = 1e-6, 2.6e-7 at 1e-10, 2.8e-4 at 1e-13, and at
    1e-17, where M rounds to I, 'the rounds do not converge'."""
    rng = np.random.default_rng(11)
    m, d = 3, 3
    H = np.array([q @ q.T / d + 0.2 * np.eye(d) for q in rng.standard_normal((m, d, d))])
    e = rng.standard_normal((m, d))
    p, steps = np.array([0.2, 0.3, 0.5]), [2, 5, 9]
    x = TH.quadratic_fixed_point(H, e, p, steps, lr, algorithm, mu=mu, momentum=momentum)
    exact = _fixed_point_at_60_digits(H, e, p, steps, lr, algorithm, mu, momentum)
    assert np.max(np.abs(x - exact)) <= 1e-14 * np.max(np.abs(exact))


def test_fixed_point_raises_when_rounds_diverge():
    prob, steps = _instance(0)
    with pytest.raises(ValueError, match="lr"):
        TH.quadratic_fixed_point(prob.H, prob.e, prob.p, steps, 1.5, "fedavg")



def test_fixed_point_at_an_lr_that_makes_the_round_singular_names_lr_not_H():
    """One client, H = diag(1, 2) (no null direction), tau = 2 steps of lr = 1 = 2/L: along the eigenvalue 2 each
    step multiplies by 1 - 2 = -1, so the client comes back to its start, K H = 1 - (-1)^2 = 0 there and the round
    map has the eigenvalue 1. The lr is to blame (lr = 1 + 1e-7 already says so); H was blamed ('the H_i share a
    null direction'), which is false. Two clients whose K_i H_i cancel (H_i = 1, tau = (1, 2), lr = 3:
    K_i H_i = 3 and -3) likewise. A shared null direction still names H."""
    for H, e, p, steps, lr in (([np.diag([1.0, 2.0])], [[1.0, 1.0]], [1.0], [2], 1.0),
                               ([[[1.0]], [[1.0]]], [[1.0], [-1.0]], [0.5, 0.5], [1, 2], 3.0)):
        with pytest.raises(ValueError, match=r"^lr: the rounds do not converge \(the round map has the eigenvalue 1"):
            TH.quadratic_fixed_point(H, e, p, steps, lr, "fedavg")
    # a client of weight 0 moves nothing: the null direction of the others is shared by those that count
    H = [np.diag([1.0, 0.0]), np.diag([1.0, 1.0])]
    with pytest.raises(ValueError, match=r"^H: sum_i c_i K_i H_i is singular"):
        TH.quadratic_fixed_point(H, np.ones((2, 2)), [1.0, 0.0], [1, 1], 0.1, "fedavg")

def test_quadratic_problem_helpers():
    prob = QuadraticProblem(np.stack([np.eye(2), 2 * np.eye(2)]), np.array([[1.0, 0.0], [0.0, 2.0]]), np.array([0.5, 0.5]))
    x = np.array([1.0, 1.0])
    np.testing.assert_allclose(prob.grad(x, 1), [2.0, 0.0])
    np.testing.assert_allclose(prob.global_grad(x), [0.5 * 0 + 0.5 * 2, 0.5 * 1 + 0.5 * 0])
    assert prob.loss(x) == pytest.approx(0.5 * 1.5 * 2 - (0.5 + 1.0))
    np.testing.assert_allclose(prob.optimum(), [1 / 3, 2 / 3])
    assert prob.num_clients == 2 and prob.dim == 2


# ---------------------------------------------------------------- the closed forms: edge cases
def test_smoothness_is_the_spectral_norm_even_for_an_indefinite_hessian():
    from fedlib.theory import quadratic_smoothness

    assert quadratic_smoothness([[[-5.0, 0.0], [0.0, 1.0]]]) == 5.0
    rng = np.random.default_rng(0)
    H = rng.normal(size=(3, 4, 4))
    H = H + H.transpose(0, 2, 1)  # indefinite
    assert quadratic_smoothness(H) == pytest.approx(max(np.linalg.norm(h, 2) for h in H), rel=1e-12)


def test_smoothness_and_local_operator_refuse_a_non_symmetric_matrix():
    """F_i = x^T H_i x / 2 - e_i^T x has the Hessian (H_i + H_i^T)/2: for H = [[0, 1], [0, 0]] quadratic_smoothness
    gave 0.5 (its docstring's ||H||_2 is 1) and quadratic_local_operator a K of steps along H_i itself; both now
    refuse it, as every function that takes the clients' (H, e, p) does. Rounding-level asymmetry passes."""
    from fedlib.theory import quadratic_local_operator, quadratic_smoothness

    with pytest.raises(ValueError, match=r"H: every H_i must be symmetric; H_1 is not"):
        quadratic_smoothness([np.eye(2), [[0.0, 1.0], [0.0, 0.0]]])
    with pytest.raises(ValueError, match=r"H_i must be symmetric \(max \|H_i - H_i\^T\| = 1\)"):
        quadratic_local_operator([[0.0, 1.0], [0.0, 0.0]], 3, 0.1)
    assert quadratic_smoothness([[[1.0, 1e-17], [0.0, 2.0]]]) == 2.0
    np.testing.assert_allclose(quadratic_local_operator([[2.0, 1e-17], [0.0, 1.0]], 2, 0.1),
                               np.diag([0.1 * (1 + 0.8), 0.1 * (1 + 0.9)]), rtol=1e-12, atol=1e-15)


def test_min_beta2_with_a_singular_average_hessian():
    """H = {diag(1, 0), diag(2, 0)}: Assumption 3 only concerns the first coordinate, where
    w1 h1^2 + w2 h2^2 = 2.5 and (w1 h1 + w2 h2)^2 = 2.25, so beta^2_min = 2.5 / 2.25."""
    from fedlib.theory import quadratic_kappa2, quadratic_min_beta2

    H = np.array([np.diag([1.0, 0.0]), np.diag([2.0, 0.0])])
    assert quadratic_min_beta2(H, [0.5, 0.5]) == pytest.approx(2.5 / 2.25)
    e = np.array([[1.0, 0.0], [0.0, 0.0]])
    assert np.isfinite(quadratic_kappa2(H, e, [0.5, 0.5], 5.0))
    with pytest.raises(ValueError, match="kappa\\^2 would be infinite"):
        quadratic_kappa2(H, e, [0.5, 0.5], 1.05)
    # indefinite clients whose average vanishes in a direction they do not: no beta^2 works
    H2 = np.array([np.diag([1.0, 1.0]), np.diag([1.0, -1.0])])
    assert quadratic_min_beta2(H2, [0.5, 0.5]) == np.inf


SCALES = [1e-13, 1e-6, 1e-2, 1.0, 1e5]


@pytest.mark.parametrize("s", SCALES)
def test_min_beta2_does_not_depend_on_the_units_of_H(s):
    """beta^2_min is a ratio of quadratic forms in H: H -> s H leaves it. Found by mutation testing: absolute
    floors in the tolerances (max(1, ...)) turned the singular examples above into beta^2 = 1 below s ~ 1e-2
    (the null-space test) and s ~ 1e-12 (the range test)."""
    from fedlib.theory import quadratic_min_beta2

    H = np.array([np.diag([1.0, 0.0]), np.diag([2.0, 0.0])])
    assert quadratic_min_beta2(s * H, [0.5, 0.5]) == pytest.approx(2.5 / 2.25, rel=1e-12)
    H2 = np.array([np.diag([1.0, 1e-4]), np.diag([1.0, -1e-4])])   # average singular, squares not
    assert quadratic_min_beta2(s * H2, [0.5, 0.5]) == np.inf
    prob = random_quadratic(4, 5, seed=11, p=[0.1, 0.2, 0.3, 0.4])
    want = quadratic_min_beta2(prob.H, prob.p)
    assert 1.0 < want < np.inf
    assert quadratic_min_beta2(s * prob.H, prob.p) == pytest.approx(want, rel=1e-10)


@pytest.mark.parametrize("s", SCALES)
def test_kappa2_scales_as_the_square_of_the_units(s):
    """Gradients H_i x - e_i scale by s with (H, e) -> (s H, s e) at the same x: kappa^2 by s^2. The old absolute
    floor read every eigenvalue of Q as 0 below s ~ 1e-5 and returned max(0, c) (0.0 here, for 0.88 s^2); a
    tolerance relative to b itself (rounding noise for identical clients) called kappa^2 infinite from s ~ 1e5."""
    from fedlib.theory import quadratic_kappa2

    H = np.array([np.diag([1.0, 2.0]), np.diag([3.0, 0.5])])
    e = np.array([[1.0, 2.0], [-1.0, 0.5]])
    want = quadratic_kappa2(H, e, [0.4, 0.6], 3.0)
    assert want > 0.5
    assert quadratic_kappa2(s * H, s * e, [0.4, 0.6], 3.0) == pytest.approx(s ** 2 * want, rel=1e-10, abs=0)
    # identical clients: kappa^2 = sum_i w_i ||e_i - e_w||^2 at beta^2 = 1 (Q = 0 up to rounding, at any scale)
    same = np.array([np.diag([1.0, 2.0])] * 2)
    spread = 0.4 * 0.6 * np.sum((e[0] - e[1]) ** 2)
    assert quadratic_kappa2(s * same, s * e, [0.4, 0.6], 1.0) == pytest.approx(s ** 2 * spread, rel=1e-10, abs=0)


@pytest.mark.parametrize("s", SCALES)
def test_symmetry_check_does_not_depend_on_the_units_of_H(s):
    """An H_i that is not symmetric is refused at any scale (the old absolute floor let s = 1e-13 through),
    and the message names it; rounding-level asymmetry (1e-14 relative) is accepted."""
    H = s * np.array([np.eye(2), [[1.0, 0.5], [0.0, 1.0]]])
    with pytest.raises(ValueError, match="H_1 is not"):
        TH.quadratic_global_optimum(H, np.ones((2, 2)), [0.5, 0.5])
    H = s * np.array([np.eye(2), [[2.0, 0.5], [0.5 * (1 + 1e-14), 1.0]]])
    np.testing.assert_allclose(TH.quadratic_global_optimum(H, s * np.ones((2, 2)), [0.5, 0.5]),
                               np.linalg.solve(0.5 * (H[0] + H[1]), s * np.ones(2)), rtol=1e-12)


@pytest.mark.parametrize("s", [1e-8, 1.0, 1e7, 1e8])
def test_shift_invert_does_not_depend_on_the_units_of_H(s):
    """H -> s H with lr -> lr/s is the same round map: the same eigenvalues near sigma. The singularity test
    compared the pivots with max |A|, whose blocks carry different units (H against K ~ lr): from s ~ 1e7 (and
    below 1e-8) it called a regular sigma an eigenvalue (found by an audit of unit-dependent results)."""
    H = np.array([[[2.0, 0.5], [0.5, 1.0]], [[1.0, 0.0], [0.0, 3.0]]])
    M, _ = TH.quadratic_vr_round_map(H, np.zeros((2, 2)), [0.5, 0.5], [2, 3], 0.05, "fednova-vr")
    every = np.linalg.eigvals(M)
    want = every[np.argsort(np.abs(every - 0.9))][:2]
    got = TH.quadratic_vr_eigenvalues_near(s * H, [0.5, 0.5], [2, 3], 0.05 / s, "fednova-vr", sigma=0.9, k=2)
    np.testing.assert_allclose(got, want, rtol=1e-9)
    # an eigenvalue itself is still refused at every scale
    with pytest.raises(ValueError, match="is an eigenvalue of the round map"):
        TH.quadratic_vr_shift_invert(s * H, [0.5, 0.5], [2, 3], 0.05 / s, "fednova-vr", want[0].real)


@pytest.mark.parametrize("shape", [(1, 3), (2, 3), (3, 2)])
def test_local_operator_refuses_a_matrix_that_is_not_square(shape):
    """(1, 3) used to return [[lr]] (only H_i's first dimension was read), (2, 3) numpy's broadcasting error."""
    with pytest.raises(ValueError, match=r"^H_i must be a square"):
        TH.quadratic_local_operator(np.ones(shape), 3, 0.1)
    with pytest.raises(ValueError, match=r"^H_i must be a square"):
        TH.quadratic_local_operator(np.ones(shape), 3, 0.1, momentum=0.5)


def test_assumption3_names_w_in_its_errors():
    from fedlib.theory import quadratic_min_beta2

    with pytest.raises(ValueError, match="^w must sum to 1"):
        quadratic_min_beta2(np.array([np.eye(2)] * 2), [0.5, 0.6])


@pytest.mark.parametrize("name", ["A", "B", "C", "sigma2", "kappa2"])
def test_theorem1_bound_refuses_negative_or_nan_constants(name):
    from fedlib.theory import theorem1_bound

    kwargs = dict(A=1.0, B=1.0, C=1.0, sigma2=1.0, kappa2=1.0)
    for bad in (-1.0, float("nan")):
        with pytest.raises(ValueError, match=rf"^{name}\b"):   # "A" alone matched any capital A
            theorem1_bound(10, 5.0, 100, 4.0, **{**kwargs, name: bad})


def test_max_beta2_refuses_a_step_that_admits_no_beta2():
    from fedlib.theory import theorem1_max_beta2

    assert theorem1_max_beta2(1.0, 1.0, 1 / 12) == pytest.approx(1.0)  # D = 1/3: beta^2 = 1 exactly
    with pytest.raises(ValueError, match="too large"):
        theorem1_max_beta2(1.0, 1.0, 1.0)


def test_round_map_refuses_tau_eff_for_fedavg_and_a_prox_step_above_one():
    from fedlib.theory import quadratic_local_operator, quadratic_round_map

    H, e = np.array([np.eye(2), 2 * np.eye(2)]), np.ones((2, 2))
    with pytest.raises(ValueError, match="tau_eff: only fednova"):
        quadratic_round_map(H, e, [0.5, 0.5], [2, 3], 0.1, "fedavg", tau_eff=2.0)
    with pytest.raises(ValueError, match="lr\\*mu must be <= 1"):
        quadratic_local_operator(np.eye(2), 3, 1.0, mu=5.0)


def test_theorem1_constants_ignore_clients_of_weight_zero_in_C():
    """C bounds sum_i w_i (||a_i||_1^2 - ||a_i||_1 a_i,-1): a client of weight 0 adds nothing, so it must not set
    the max (a 50-step client of weight 0 made C 2450 instead of 6 and refused lr 0.1). A and B never saw it;
    A/m, the only way A enters the bound, is unchanged."""
    a = [np.ones(2), np.ones(3)]
    A2, B2, C2 = TH.theorem1_constants([0.5, 0.5], a, 2.5)
    assert (B2, C2) == (pytest.approx(1.5), pytest.approx(6.0))      # C = max(4 - 2, 9 - 3)
    A3, B3, C3 = TH.theorem1_constants([0.5, 0.5, 0.0], a + [np.ones(50)], 2.5)
    assert (B3, C3) == (B2, C2) and A3 / 3 == pytest.approx(A2 / 2)
    common = dict(L=1.0, sigma2=1.0, beta2=1.0, kappa2=1.0, initial_gap=1.0, tau_eff=2.5)
    assert TH.theorem1_explicit_bound(0.1, 100, w=[0.5, 0.5, 0.0], a_vectors=a + [np.ones(50)], **common) == \
        pytest.approx(TH.theorem1_explicit_bound(0.1, 100, w=[0.5, 0.5], a_vectors=a, **common))
    with pytest.raises(ValueError, match="positive weight"):
        TH.theorem1_constants([0.0, 0.0], a, 2.5)


def _theorem1_exact(w, a_vectors, tau_eff):
    """Theorem 1's A, B, C of float inputs in exact rational arithmetic, each rounded once to float64 (inf past its
    range): the closed forms of theorem1_constants' docstring."""
    from fractions import Fraction as F

    def rounded(x):
        try:
            return float(x)
        except OverflowError:
            return math.inf

    w = [F(float(x)) for x in w]
    a = [[F(float(x)) for x in v] for v in a_vectors]
    A = len(w) * F(tau_eff) * sum(wi ** 2 * sum(x * x for x in v) / sum(v) ** 2 for wi, v in zip(w, a))
    B = sum(wi * sum(x * x for x in v[:-1]) for wi, v in zip(w, a))
    C = max(sum(v) ** 2 - sum(v) * v[-1] for wi, v in zip(w, a) if wi > 0)
    return rounded(A), rounded(B), rounded(C)


@pytest.mark.parametrize("exponents", [(-700, -700), (-560, -540), (-1000, -20), (520, 530), (700, 0), (-600, 600)])
def test_theorem1_constants_of_tiny_or_huge_a_vectors_are_the_exact_values_rounded(exponents):
    """Entries below ~1e-162 or above ~1e154 made the squares under- or overflow: A was nan (0/0 or inf/inf; 0.99912
    for 1e-160, 0.0 for 1e-162 where 0.7778 was right) and B, C 0 or inf where the exact value is an ordinary number
    (a = (1e-100, 1e200): B = w 1e-200). Now each a_i is scaled by a power of two: A, B, C are the exact values of
    the inputs rounded to float64, to a few ulps (0 or inf only where the exact value lies past float64's range)."""
    rng = np.random.default_rng(sum(exponents) + 5000)
    a = [rng.random(4) + 0.5, rng.random(3) + 0.5, np.array([1.0])]
    a = [a[0] * 2.0 ** exponents[0], a[1] * 2.0 ** exponents[1], a[2] * 2.0 ** exponents[0]]
    a.append(np.array([1e-100, 3e-101, 1e200]))  # a head far below the last entry: B = w (1e-200 + 9e-202)
    w = np.array([0.25, 0.25, 0.25, 0.25])
    got = TH.theorem1_constants(w, a, 1.5)
    want = _theorem1_exact(w, a, 1.5)
    for g, x in zip(got, want):
        assert g == x or (math.isfinite(x) and g == pytest.approx(x, rel=1e-14, abs=0)), (got, want)
    assert math.isfinite(got[0]) and got[1] > 0


@pytest.mark.parametrize("weight", [5e-324, 1.5e-323, 1e-320, 1e-310, 1e-300, 1e-290])
def test_theorem1_constants_of_a_tiny_weight_and_a_huge_head_are_the_exact_values_rounded(weight):
    """A client of weight below float64's normal range (2.2e-308) whose head lies above 2^100: its term of B,
    w_i ||head||^2, is an ordinary number. It was computed as w_i times the square of the head divided by 2^e, a
    subnormal product rounded to a few bits, then scaled back by 2^(2e): with a head near 2^600, B was 8.507e37 for
    8.059e37 (w = 5e-324), 8.508e38 for 8.922e38 (1.5e-323) and 1e-4 relative off for 1e-320. Now w_i's mantissa and
    exponent are taken apart: A, B, C are the exact values rounded, to a few ulps (normal weights: as before)."""
    rng = np.random.default_rng(int(-math.log10(weight)))
    for head_exponent in (101, 309, 600, 900):
        a = [np.array([1.0]), (rng.random(3) + 0.5) * 2.0 ** head_exponent, rng.random(2) + 0.5]
        w = np.array([0.5, weight, 0.5])
        got, want = TH.theorem1_constants(w, a, 1.5), _theorem1_exact(w, a, 1.5)
        for g, x in zip(got, want):
            assert g == x or (math.isfinite(x) and g == pytest.approx(x, rel=1e-14, abs=0)), (head_exponent, got, want)


def test_theorem1_constants_of_ordinary_a_vectors_are_bit_for_bit_the_unscaled_sums():
    """The scaling leaves ordinary inputs bit for bit as the sums without it gave them: entries 1e-30..1e30 (a_i not
    scaled), also with heads down to 1e-42 (scaled by a power of two: B's and C's products and sums are exact under
    it). An a_i whose largest entry lies outside 2^-100..2^100 is scaled for A, whose l1 ** 2 (numpy's pow) may then
    round 1 ulp otherwise: 5 of 20,000 random cases with entries 1e-45..1e45."""
    def unscaled(w, a_vectors, tau_eff):  # theorem1_constants' loop before the scaling
        A = B = 0.0
        C = -np.inf
        for wi, a in zip(w, a_vectors):
            l1, l2sq = a.sum(), float(np.dot(a, a))
            head = a[:-1]
            A += wi ** 2 * l2sq / l1 ** 2
            B += wi * float(np.dot(head, head))
            if wi > 0:
                C = max(C, float(l1 * head.sum()))
        return float(len(w) * tau_eff * A), float(B), float(C)

    rng = np.random.default_rng(20201)
    for _ in range(300):
        m = int(rng.integers(1, 6))
        w = rng.random(m) + 0.01
        w /= w.sum()
        a = [10.0 ** rng.uniform(-30, 30, size=int(rng.integers(1, 7))) for _ in range(m)]
        if rng.random() < 0.3:  # a head far below the last entry
            a[0][:-1] *= 1e-12
            a[0][-1] = 10.0 ** rng.uniform(0, 30)
        tau_eff = float(rng.uniform(0.5, 20))
        assert TH.theorem1_constants(w, a, tau_eff) == unscaled(w, a, tau_eff)


def _rounded(x) -> float:
    """The Fraction ``x`` rounded to float64, inf past its range."""
    try:
        return float(x)
    except OverflowError:
        return math.inf


def _sqrt_fraction(x):
    """sqrt(x) of a Fraction x > 0 to a relative 2^-120 (math.isqrt on x scaled by a power of four)."""
    from fractions import Fraction

    bits = max(0, (x.denominator.bit_length() - x.numerator.bit_length()) // 2) + 120
    return Fraction(math.isqrt(x.numerator * 4 ** bits // x.denominator), 2 ** bits)


def _theorem1_bound_exact(m, tau_bar, T, tau_eff, A, B, C, sigma2=1.0, kappa2=1.0):
    """Eq. (8)'s four terms of float inputs in rational arithmetic (the square root to 2^-120), each rounded once."""
    from fractions import Fraction as F

    tau_bar, tau_eff, A, B, C, sigma2, kappa2 = map(F, (tau_bar, tau_eff, A, B, C, sigma2, kappa2))
    s = _sqrt_fraction(m * tau_bar * T)
    return tuple(map(_rounded, (tau_bar / tau_eff / s, A * sigma2 / s, m * B * sigma2 / (tau_bar * T),
                                m * C * kappa2 / (tau_bar * T))))


@pytest.mark.parametrize("args", [(4, 3.0, 10 ** 40, 1e-320, 1.0, 1.0, 1.0),
                                  (1, 1e-10, 10 ** 30, 5e-324, 1.0, 1.0, 1.0), (1, 1e300, 10 ** 10, 1.0, 1.0, 1.0, 1.0),
                                  (1, 1e300, 10 ** 20, 1e-10, 1e300, 1e300, 1e300),
                                  (1, 1.0, 10 ** 400, 1.0, 1.0, 1.0, 1.0)])
def test_theorem1_bound_where_float64_over_or_underflows_is_the_value_rounded(args):
    """Eq. (8)'s terms are ordinary numbers where an intermediate is not: a subnormal tau_eff made tau_bar / tau_eff
    inf (first term inf for 8.7e299, m = 4, T = 1e40, tau_eff = 1e-320; inf for 2.0e303 at tau_eff = 5e-324), an
    m tau_bar T beyond float64 made every term 0 (1e145, 1e-155, 1e-310, 1e-310 at tau_bar = 1e300, T = 1e10) or
    nan (inf / inf), and a T beyond float64 raised OverflowError. Now each term is the exact value rounded."""
    got = TH.theorem1_bound(*args)
    want = _theorem1_bound_exact(*args)
    for g, x in zip(got, want):
        assert g == x or (math.isfinite(x) and g == pytest.approx(x, rel=1e-14, abs=0)), (got, want)


def test_theorem1_bound_of_ordinary_inputs_is_bit_for_bit_the_float64_formula():
    """The decimal check leaves ordinary terms as float64 computes them: 300 random cases."""
    rng = np.random.default_rng(88)
    for _ in range(300):
        m, T = int(rng.integers(1, 100)), int(10 ** rng.uniform(0, 6))
        tau_bar, tau_eff = float(10 ** rng.uniform(-1, 3)), float(10 ** rng.uniform(-2, 3))
        A, B, C, sigma2, kappa2 = (float(10 ** rng.uniform(-10, 10)) for _ in range(5))
        s = np.sqrt(m * tau_bar * T)
        plain = (float((tau_bar / tau_eff) / s), float(A * sigma2 / s), float(m * B * sigma2 / (tau_bar * T)),
                 float(m * C * kappa2 / (tau_bar * T)))
        assert tuple(TH.theorem1_bound(m, tau_bar, T, tau_eff, A, B, C, sigma2, kappa2)) == plain


@pytest.mark.parametrize("lr, L, C", [(1e-200, 1.0, 1e300), (1e-100, 1e-100, 1e250), (1e-160, 1.0, 1e300)])
def test_max_beta2_where_eta_l_squared_underflows_is_the_value_rounded(lr, L, C):
    """D = 4 (eta L)^2 C with (eta L)^2 below float64's range but D in it: (eta L)^2 was 0, so D = 0 and
    theorem1_max_beta2 returned inf (lr = 1e-200, C = 1e300: inf for 1.25e99), or a subnormal that kept a few bits
    (lr = 1e-160: 1.2500139161765724e19 for 1.25e19). Now (1/D - 1)/2 of the exact D, to a few ulps."""
    from fractions import Fraction as F

    want = float((1 / (4 * (F(lr) * F(L)) ** 2 * F(C)) - 1) / 2)
    assert TH.theorem1_max_beta2(lr, L, C) == pytest.approx(want, rel=1e-14, abs=0)


def test_step_size_terms_where_float64_over_or_underflows_are_the_values_rounded():
    """App. G's D and Theorem 1's explicit terms where a product leaves float64's range: D was 0 for 8e-100
    (lr = 1e-200, a = (1e150, 1e150)) and inf for 8e100 (lr = 1e200, a = (1e-150, 1e-150)); with lr = tau_eff =
    1e-200 theorem1_explicit_bound raised ZeroDivisionError (lr tau_eff T = 0), and its third and fourth terms were 0
    for 6e-100 and 2.4e-99 ((lr L)^2 = 0 against sigma^2 = kappa^2 = 1e300). Now the exact values rounded."""
    from fractions import Fraction as F

    c = TH.appg_step_conditions(1e-200, 1.0, 1.0, 4, 1.0, [[1e150, 1e150]])
    assert c.D == pytest.approx(float(4 * F(1e-200) ** 2 * 2 * F(1e150) ** 2), rel=1e-14, abs=0) and c.D_holds
    c = TH.appg_step_conditions(1e200, 1.0, 1.0, 4, 1.0, [[1e-150, 1e-150]])
    assert c.D == pytest.approx(float(4 * F(1e200) ** 2 * 2 * F(1e-150) ** 2), rel=1e-14, abs=0) and not c.D_holds
    lr, tau_eff, gap, s2 = 1e-200, 1e-200, 1e-300, 1e300
    got = TH.theorem1_explicit_bound(lr, 4, L=1.0, sigma2=s2, beta2=1.0, kappa2=s2, initial_gap=gap, w=[0.5, 0.5],
                                     a_vectors=[[1.0, 1.0], [1.0, 1.0]], tau_eff=tau_eff)
    A, B, C = TH.theorem1_constants([0.5, 0.5], [[1.0, 1.0], [1.0, 1.0]], tau_eff)
    want = (4 * F(gap) / (F(lr) * F(tau_eff) * 4), 4 * F(lr) * F(s2) * F(A) / 2, 6 * F(lr) ** 2 * F(s2) * F(B),
            12 * F(lr) ** 2 * F(s2) * F(C))
    for g, x in zip(got, want):
        assert g == pytest.approx(float(x), rel=1e-14, abs=0), (got, [float(v) for v in want])


def test_explicit_slowdown_term_beyond_float64_is_inf_where_float64_rounded_its_denominator_up():
    """Theorem 1's explicit first term 4 gap / (eta tau_eff T) is inf where its exact value lies beyond float64,
    though float64 gives a finite one: eta tau_eff = 1e-200 * 1.3e-123 = 1.3e-323 rounds up to the subnormal
    1.48e-323 (3 * 2^-1074), so 4 * 6.175e-16 over it is 1.67e308 for the exact 1.9e308. The decimal check took the
    finite value: its tolerance, 1e-12 times the exact value rounded, was inf."""
    from fractions import Fraction as F

    lr, tau_eff, gap = 1e-200, 1.3e-123, 6.175e-16
    assert 4 * F(gap) / (F(lr) * F(tau_eff)) > F(2) ** 1024  # beyond float64's largest finite value
    assert math.isfinite(4 * gap / (lr * tau_eff))  # float64's own value, of the rounded-up denominator
    got = TH.theorem1_explicit_bound(lr, 1, L=1.0, sigma2=1.0, beta2=1.0, kappa2=1.0, initial_gap=gap, w=[1.0],
                                     a_vectors=[[1.0]], tau_eff=tau_eff)
    assert got.slowdown_term == math.inf and got.total == math.inf
    # an exact value just inside float64's range (gap / 1.2) is its value rounded, not float64's 1.39e308
    got = TH.theorem1_explicit_bound(lr, 1, L=1.0, sigma2=1.0, beta2=1.0, kappa2=1.0, initial_gap=gap / 1.2, w=[1.0],
                                     a_vectors=[[1.0]], tau_eff=tau_eff)
    assert got.slowdown_term == pytest.approx(float(4 * F(gap / 1.2) / (F(lr) * F(tau_eff))), rel=1e-14, abs=0)


def test_theorem1_constants_refuses_weights_that_do_not_sum_to_one():
    """Unnormalised w scaled A (by the square) and B without a word; Theorem 1's weights sum to 1."""
    a = [np.ones(2), np.ones(4)]
    with pytest.raises(ValueError, match="^w must sum to 1"):
        TH.theorem1_constants([1.0, 1.0], a, 3.0)
    with pytest.raises(ValueError, match="^w must sum to 1"):
        TH.theorem1_constants([0.25, 0.25], a, 3.0)
    with pytest.raises(ValueError, match="positive weight"):
        TH.theorem1_constants([0.0, 0.0], a, 3.0)
    ref = TH.theorem1_constants([0.25, 0.75], a, 3.0)
    assert TH.theorem1_constants(np.array([0.25, 0.75], dtype=np.float32), a, 3.0) == pytest.approx(ref)
    assert TH.theorem1_constants(np.array([1, 0]), a, 3.0) == TH.theorem1_constants([1.0, 0.0], a, 3.0)


def test_theorem1_constants_a_vectors_errors_name_the_parameter():
    a = [np.ones(2), np.ones(4)]
    ref = TH.theorem1_constants([0.5, 0.5], a, 3.0)
    assert TH.theorem1_constants([0.5, 0.5], (v for v in a), 3.0) == ref  # any iterable, not only a list
    with pytest.raises(ValueError, match="^a_vectors"):
        TH.theorem1_constants([0.5, 0.5], 1.0, 3.0)
    with pytest.raises(ValueError, match=r"^a_vectors\[1\] contains NaN"):
        TH.theorem1_constants([0.5, 0.5], [np.ones(2), [np.nan, 1.0]], 3.0)


@pytest.mark.parametrize("shape", [(0, 2, 2), (1, 2, 3), (1, 0, 0)])
def test_quadratic_smoothness_names_H_for_a_bad_shape(shape):
    """No clients, non-square or empty H_i raised numpy's own message ('max() arg is an empty sequence')."""
    with pytest.raises(ValueError, match=r"^H must have shape \(m, d, d\)"):
        TH.quadratic_smoothness(np.zeros(shape))


def test_quadratic_maps_refuse_local_steps_none_by_name():
    """local_steps=None passed _check_quadratic's check (None there meant "this caller takes no steps") and every
    function that needs the steps failed deep inside with AttributeError ('NoneType' object has no attribute
    'astype'). A ValueError naming local_steps now; quadratic_global_optimum, which takes none, is unchanged."""
    H, e, p = np.array([np.eye(2), 2 * np.eye(2)]), np.ones((2, 2)), [0.5, 0.5]
    calls = [lambda: TH.quadratic_round_map(H, e, p, None, 0.1, "fedavg"),
             lambda: TH.quadratic_fixed_point(H, e, p, None, 0.1, "fednova"),
             lambda: TH.quadratic_vr_round_map(H, e, p, None, 0.1, "scaffold"),
             lambda: TH.quadratic_vr_round_operator(H, p, None, 0.1, "scaffold"),
             lambda: TH.quadratic_vr_fixed_point(H, e, p, None, 0.1, "scaffold")]
    for call in calls:
        with pytest.raises(ValueError, match="local_steps"):
            call()
    np.testing.assert_allclose(TH.quadratic_global_optimum(H, e, p), [2 / 3, 2 / 3])


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_fixed_points_of_an_overflowing_round_map_are_refused_as_diverging():
    """lr = 1.5 and 2000 local steps on H = 2I: (1 - 3)^2000 overflows float64, so the round map holds inf/NaN.
    quadratic_fixed_point raised numpy's LinAlgError ('SVD did not converge') and quadratic_vr_fixed_point
    'M contains NaN or inf' (an argument the caller never gave); the ValueError of a diverging lr now. At 1000 steps
    (2^1000 ~ 1e301, finite) the spectral radius already says so."""
    H, e, p = np.array([np.eye(2), 2 * np.eye(2)]), np.ones((2, 2)), [0.5, 0.5]
    for call in (lambda: TH.quadratic_fixed_point(H, e, p, [1, 2000], 1.5, "fedavg"),
                 lambda: TH.quadratic_fixed_point(H, e, p, [1, 2000], 1.5, "fednova"),
                 lambda: TH.quadratic_vr_fixed_point(H, e, p, [1, 2000], 1.5, "scaffold")):
        with pytest.raises(ValueError, match="^lr: the rounds do not converge"):
            call()
    with pytest.raises(ValueError, match="^lr: the rounds do not converge \\(spectral radius"):
        TH.quadratic_fixed_point(H, e, p, [1, 1000], 1.5, "fedavg")


@pytest.mark.parametrize("call", [
    lambda H, e, p: TH.quadratic_round_map(H, e, p, [1, 2], 0.1, "fedavg"),
    lambda H, e, p: TH.quadratic_fixed_point(H, e, p, [1, 2], 0.1, "fednova"),
    lambda H, e, p: TH.quadratic_global_optimum(H, e, p),
    lambda H, e, p: TH.quadratic_kappa2(H, e, p, 1.0),
])
def test_quadratic_closed_forms_refuse_dimension_zero(call):
    """The closed forms on quadratics check H as QuadraticProblem does (one check, theory._check_quadratic): d = 0
    is refused naming H. Before: H of shape (2, 0, 0) gave an empty round map, fixed point and optimum ([]) without
    a word, while QuadraticProblem refused it."""
    with pytest.raises(ValueError, match=r"^H must have shape \(m, d, d\) with d >= 1, got \(2, 0, 0\)$"):
        call(np.zeros((2, 0, 0)), np.zeros((2, 0)), np.array([0.5, 0.5]))


@pytest.mark.parametrize("name, call", [
    ("local_steps", lambda n: TH.quadratic_local_operator(np.array([[1.0, 0.5], [0.5, 2.0]]), n, 0.1, 0.2, momentum=0.3)),
    ("tau1", lambda n: TH.two_client_lower_bound(n, 3, 1.5)),
    ("tau2", lambda n: TH.two_client_lower_bound(1, n, 1.5)),
])
def test_scalar_step_counts_are_whole_numbers(name, call):
    """A step count is a whole number, scalar or array (the fedlib docstring's convention): 2.0 is 2, as
    quadratic_round_map's local_steps [2.0, 2.0] and two_client_sweep's tau1=2.0 already were. Before: "local_steps
    must be an integer >= 1, got 2.0" (tau1, tau2 alike). 1.5, True and NaN are still refused."""
    import pickle

    assert pickle.dumps(call(2.0)) == pickle.dumps(call(2))  # the same result, bit for bit
    for bad in (1.5, True, float("nan")):
        with pytest.raises(ValueError, match=rf"^{name} must be a whole number >= 1, got "):
            call(bad)


def test_chi_square_tiny_and_huge_terms():
    """A term whose (p_i - w_i)^2 underflows is kept, and one beyond float64 is refused (audit of extreme inputs).

    Before: p = (1/2, 1/2, 1e-170) against w = (1/2, 1/2, 1e-300) gave 0.0, as if w = p (the exact value is
    (1e-170 - 1e-300)^2 / 1e-300 = 1e-40 to 130 digits); w_2 = 1e-320 against p_2 = 1e-10 needs d^2 / w; and
    w = (1, 1e-310) against p = (1/2, 1/2) returned inf with a RuntimeWarning."""
    from fractions import Fraction

    def exact(p, w):
        return float(sum((Fraction(a) - Fraction(b)) ** 2 / Fraction(b) for a, b in zip(p, w)))

    for p, w in (([0.5, 0.5, 1e-170], [0.5, 0.5, 1e-300]), ([0.5, 0.5 - 1e-10, 1e-10], [0.5, 0.5, 1e-320]),
                 ([0.25, 0.75], [0.75, 0.25])):
        assert TH.chi_square(p, w) == pytest.approx(exact(p, w), rel=1e-14, abs=0.0)
    with pytest.raises(ValueError, match=r"^w: chi-square overflows float64"):
        TH.chi_square([0.5, 0.5], [1.0, 1e-310])


def test_theorem1_constants_last_entry_dominates():
    """B = sum_i w_i (||a_i||_2^2 - a_{i,-1}^2) and C = max_i ||a_i||_1 (||a_i||_1 - a_{i,-1}) when the last entry
    dominates (proximal SGD with alpha = 1 - 1e-12: a = (1e-12, 1) and (1e-24, 1e-12, 1)); audit of extreme inputs.

    Before: B was 0.0 for the exact 1e-24 and C 1.1e-4 relative off (and App. G's D with it): the differences
    cancelled. Now from the entries before the last; against Fraction of the same float vectors, rel 1e-14."""
    from fractions import Fraction

    a_vectors = [proximal_sgd(1.0, 1 - 1e-12).a_vector(tau) for tau in (2, 3)]
    _, B, C = TH.theorem1_constants([0.5, 0.5], a_vectors, tau_eff=1.0)
    exact_B = sum(Fraction(1, 2) * sum(Fraction(x) ** 2 for x in a[:-1]) for a in a_vectors)
    exact_C = max(sum(map(Fraction, a)) * sum(map(Fraction, a[:-1])) for a in a_vectors)
    assert B == pytest.approx(float(exact_B), rel=1e-14, abs=0.0)
    assert C == pytest.approx(float(exact_C), rel=1e-14, abs=0.0)
    D = TH.appg_step_conditions(1e3, 1.0, 1.0, 4, 1e-6, a_vectors).D   # 4 lr^2 L^2 max_i ||a_i||_1 (...)
    assert D == pytest.approx(4e6 * float(exact_C), rel=1e-14, abs=0.0)


@pytest.mark.parametrize("steps,alpha", [([1, 2], 1 - 1e-12), ([2, 3], 0.999999), ([11, 4], 0.9999998363166052),
                                         ([1, 3], 0.5), ([2, 5], 1e-9)])
def test_fedprox_theorem1_constants_alpha_near_one(steps, alpha):
    """App. E.2's B = sum_i w_i (q_i - 1) and C = max_i (s_i^2 - s_i) as alpha -> 1, against the sums
    s_i = sum_{k<tau_i} (1-alpha)^k and q_i = sum_{k<tau_i} (1-alpha)^{2k} in Fraction (alpha the float given);
    audit of extreme inputs. Before: alpha = 1 - 1e-12 gave B = 0.0 for 1e-24 and C 1.1e-4 relative off
    (alpha = 0.9999998363: B 2.8e-3 off): s^2 - s and q - 1 cancelled. Now rel 1e-14."""
    from fractions import Fraction

    c = TH.fedprox_theorem1_constants([0.5, 0.5], steps, alpha)
    r = 1 - Fraction(alpha)
    s = [sum(r ** k for k in range(t)) for t in steps]
    q = [sum(r ** (2 * k) for k in range(t)) for t in steps]
    tau_eff = sum(Fraction(1, 2) * si for si in s)
    exact_B = sum(Fraction(1, 2) * si / tau_eff * (qi - 1) for si, qi in zip(s, q))
    exact_C = max(si * si - si for si in s)
    assert c.tau_eff == pytest.approx(float(tau_eff), rel=1e-14, abs=0.0)
    assert c.B == pytest.approx(float(exact_B), rel=1e-14, abs=0.0)
    assert c.C == pytest.approx(float(exact_C), rel=1e-14, abs=0.0)


def test_two_client_chi_square_close_step_counts():
    """App. D.1's chi^2 = (tau_2 - tau_1)^2 / (4 tau_1 tau_2) for nearly equal step counts (audit of extreme inputs).

    Before: chi_square of the rounded w = tau_i / (tau_1 + tau_2) cancelled in 1/2 - w_i: tau = (1e7, 1e7 + 1) gave
    2.4999997476e-15 for 2.4999997500e-15 (1e-9 relative off), tau = (1e15, 1e15 + 1) 1.1e-2 off. Now from the
    integers, against Fraction, rel 1e-15."""
    from fractions import Fraction

    for t1, t2 in ((10 ** 7, 10 ** 7 + 1), (10 ** 15, 10 ** 15 + 1), (2, 10)):
        exact = Fraction((t2 - t1) ** 2, 4 * t1 * t2)
        assert TH.two_client_lower_bound(t1, t2).chi2 == pytest.approx(float(exact), rel=1e-15, abs=0.0)


@pytest.mark.parametrize("lr", [2 - 1e-10, 2 - 1e-6, 1.5, 1.0])
def test_lemma1_fixed_point_lr_near_two_even_steps(lr):
    """App. A's FedAvg limit sum_i p_i K_i e_i / sum_i p_i K_i, K_i = 1 - (1 - lr)^tau_i, for lr -> 2 and even tau_i
    (audit of extreme inputs): K_i -> 0 and the plain 1 - (1 - lr)^tau_i cancelled. Before: lr = 2 - 1e-10 with
    tau = (2, 4) gave -1/3 to 16 digits for -0.33333333328888887 (1.3e-10 relative off). Against Fraction, rel 1e-14."""
    from fractions import Fraction

    one_minus = 1 - Fraction(lr)
    K = [1 - one_minus ** 2, 1 - one_minus ** 4]
    exact = (K[0] - K[1]) / (K[0] + K[1])
    x = TH.lemma1_fixed_point([[1.0], [-1.0]], [0.5, 0.5], [2, 4], lr)
    assert float(x[0]) == pytest.approx(float(exact), rel=1e-14, abs=0.0)


def test_step_size_conditions_at_an_lr_or_L_beyond_1e154():
    """App. C's and App. G's D = 4 eta^2 L^2 C depends on eta L alone (and the bounds' terms on eta L): an lr or L
    beyond 1.3e154 with a small eta L is fine, one with a large eta L is the step-size ValueError; and App. D.1's
    a^2 beyond float64 is a ValueError naming a.

    Before: lr ** 2 and L ** 2 in Python floats raised OverflowError (34, 'Numerical result out of range') from
    theorem1_max_beta2, theorem1_explicit_bound and appg_step_conditions, and a ** 2 from two_client_lower_bound."""
    # eta L = 1e-160 * 1e155 = 1e-5, C = 2: D = 4e-10 * 2 = 8e-10, beta2 = (1 / 8e-10 - 1) / 2 = 624999999.5
    assert TH.theorem1_max_beta2(1e-160, L=1e155, C=2.0) == pytest.approx(624999999.5, rel=1e-12)
    assert TH.theorem1_max_beta2(1e155, L=1e-160, C=2.0) == pytest.approx(624999999.5, rel=1e-12)
    with pytest.raises(ValueError, match=r"^lr = 0.001 is too large for App. C's condition: D = 4 lr\^2 L\^2 C = inf"):
        TH.theorem1_max_beta2(1e-3, L=1e200, C=1.0)  # eta L = 1e197: D beyond float64, far above 1/3
    # two clients of 2 SGD steps (A = 1, B = 1, C = 2, tau_eff = 2), T = 4, unit sigma2, kappa2, gap:
    # 4 / (1e-160 * 2 * 4) = 5e159, 4 * 1e-5 / 2 = 2e-5, 6 * 1e-10 * 1 = 6e-10, 12 * 1e-10 * 2 = 2.4e-9
    terms = TH.theorem1_explicit_bound(1e-160, 4, L=1e155, sigma2=1.0, beta2=1.0, kappa2=1.0, initial_gap=1.0,
                                       w=[0.5, 0.5], a_vectors=[[1.0, 1.0], [1.0, 1.0]], tau_eff=2.0)
    assert terms == pytest.approx((5e159, 2e-5, 6e-10, 2.4e-9), rel=1e-12)
    # q = 4, tau_eff = 2, a = (1, 1): first 2 * 2 * 1e-5 = 4e-5, second 6 * 2 * 1e-5 * (1 + 1/4) = 1.5e-4, D 8e-10
    for lr, L in ((1e-160, 1e155), (1e155, 1e-160)):
        c = TH.appg_step_conditions(lr, L, 1.0, 4, 2.0, [[1.0, 1.0]])
        assert (c.first, c.second, c.D) == pytest.approx((4e-5, 1.5e-4, 8e-10), rel=1e-12) and c.holds
    # tau = (1, 3), a = 1e154: kappa2 = 4 (1/4)(3/4) a^2 = 7.5e307, x = -a/2, x^2 = 2.5e307
    ex = TH.two_client_lower_bound(1, 3, a=1e154)
    assert (ex.kappa2, ex.x_limit, ex.grad_norm_sq) == pytest.approx((7.5e307, -5e153, 2.5e307), rel=1e-14)
    with pytest.raises(ValueError, match=r"^a: kappa\^2 = 4 w_1 w_2 a\^2 .* beyond float64 for a = 1e\+155"):
        TH.two_client_lower_bound(1, 3, a=1e155)


def test_assumption3_constants_of_huge_or_tiny_quadratics():
    """Assumption 3's beta^2_min does not depend on the scale of H, and kappa^2 scales with e's squared: both are
    computed on H and e rescaled (by powers of two), so squares such as H_i^2 and ||e_i||^2 neither overflow nor
    underflow; a kappa^2 beyond float64 is a ValueError naming e.

    Scalar clients H = (1, 3), e = (2, 0), w = (1/2, 1/2): sum_i w_i H_i^2 = 5, H~^2 = 4, so beta^2_min = 5/4. At
    beta^2 = 2: Q = 5 - 2 * 4 = -3, b = (1/2)(1 * 2) - 2 * 2 * 1 = -3, c = (1/2) 4 - 2 * 1 = 0, so
    kappa^2 = c - b^2 / Q = 0 + 9/3 = 3 (for H scaled by s too: Q s^2, b s), and 3 s^2 for e scaled by s.
    Before: H * 1e155 gave beta^2_min = inf (H_i^2 overflowed: 'no beta^2 bounds it') and kappa^2 an OverflowError;
    H * 1e-300 gave beta^2_min = 1.0 (H_i^2 underflowed to 0) and kappa^2 a ValueError ('beta2 = 2.0: kappa^2 would
    be infinite'); e * 1e155 gave kappa^2 = 0.0, silently (||e_i||^2 = inf, c = inf - inf = nan, max(0, nan))."""
    H, e, w = np.array([[[1.0]], [[3.0]]]), np.array([[2.0], [0.0]]), [0.5, 0.5]
    for s in (1e-300, 1e-160, 1.0, 1e155, 1e300):
        assert TH.quadratic_min_beta2(H * s, w) == pytest.approx(1.25, rel=1e-14)
        assert TH.quadratic_kappa2(H * s, e, w, 2.0) == pytest.approx(3.0, rel=1e-14)
    assert TH.quadratic_kappa2(H, e * 1e150, w, 2.0) == pytest.approx(3e300, rel=1e-14)
    assert TH.quadratic_kappa2(H, e * 1e-150, w, 2.0) == pytest.approx(3e-300, rel=1e-14)
    with pytest.raises(ValueError, match=r"^e: kappa\^2 exceeds float64 \(an entry of e of 2e\+155 is too large"):
        TH.quadratic_kappa2(H, e * 1e155, w, 2.0)  # 3e310

"""Theorem 1 with its constants (App. C): Assumption 3's constants on quadratics against
brute force, the explicit bound against eq. (8)'s form and against real runs; bound_check's momentum."""
import math

import numpy as np
import pytest
from scipy.linalg import eigh
from scipy.optimize import minimize

from fedlib import theory as TH
from fedlib.engines.quadratic import run_replicas
from fedlib.experiments import bounds
from fedlib.problems.quadratic import QuadraticProblem, random_quadratic
from fedlib.schedules import RandomLocalWork
from fedlib.solvers import momentum_sgd, sgd


def _weights(rng, m):
    w = rng.uniform(0.1, 1.0, m)
    return w / w.sum()


def _assumption3_gap(problem, w, beta2, x):
    """sum_i w_i ||grad F_i(x)||^2 - beta^2 ||grad F~(x)||^2, straight from the gradients."""
    grads = np.einsum("ijk,k->ij", problem.H, x) - problem.e
    return float(w @ np.einsum("ij,ij->i", grads, grads) - beta2 * np.sum((w @ grads) ** 2))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_kappa2_is_the_supremum_of_assumption3(seed):
    rng = np.random.default_rng(seed)
    problem = random_quadratic(5, 4, seed=seed, spread=2.0)
    w = _weights(rng, 5)
    beta2 = TH.quadratic_min_beta2(problem.H, w) * rng.uniform(1.05, 3.0)
    kappa2 = TH.quadratic_kappa2(problem.H, problem.e, w, beta2)
    # an upper bound at random points ...
    for _ in range(200):
        x = rng.normal(scale=rng.uniform(0.1, 20.0), size=4)
        assert _assumption3_gap(problem, w, beta2, x) <= kappa2 * (1 + 1e-10) + 1e-10
    # ... and attained: a numerical maximiser finds the same value
    best = minimize(lambda x: -_assumption3_gap(problem, w, beta2, x), np.zeros(4), method="BFGS",
                    options={"gtol": 1e-10})
    assert -best.fun == pytest.approx(kappa2, rel=1e-7)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_min_beta2_is_the_generalised_eigenvalue(seed):
    rng = np.random.default_rng(seed)
    problem = random_quadratic(4, 3, seed=seed)
    w = _weights(rng, 4)
    h_w = np.tensordot(w, problem.H, 1)
    h2_w = sum(wi * H @ H for wi, H in zip(w, problem.H))
    expected = eigh(h2_w, h_w @ h_w, eigvals_only=True)[-1]
    got = TH.quadratic_min_beta2(problem.H, w)
    assert got == pytest.approx(max(1.0, expected), rel=1e-10)
    assert got >= 1.0
    # below it Assumption 3's gap grows without bound along the top direction: no finite kappa^2
    with pytest.raises(ValueError, match="infinite"):
        TH.quadratic_kappa2(problem.H, problem.e, w, got * (1 - 1e-6))
    vals, vecs = eigh(h2_w, h_w @ h_w)
    v = vecs[:, -1]
    beta2 = got * 0.99
    assert _assumption3_gap(problem, w, beta2, 1e4 * v) > 1e6


def test_identical_clients_have_beta2_one_and_kappa2_zero():
    """The paper's remark under Assumption 3: identical local functions give beta^2 = 1, kappa^2 = 0."""
    base = random_quadratic(1, 3, seed=4)
    problem = QuadraticProblem(np.repeat(base.H, 3, axis=0), np.repeat(base.e, 3, axis=0), np.full(3, 1 / 3))
    w = np.array([0.2, 0.3, 0.5])
    assert TH.quadratic_min_beta2(problem.H, w) == pytest.approx(1.0, abs=1e-10)
    for beta2 in (1.01, 2.0, 10.0):
        assert TH.quadratic_kappa2(problem.H, problem.e, w, beta2) == pytest.approx(0.0, abs=1e-9)


def test_smoothness_is_the_largest_eigenvalue():
    problem = random_quadratic(3, 4, seed=2, eig_range=(0.5, 3.0))
    assert TH.quadratic_smoothness(problem.H) == pytest.approx(max(np.linalg.eigvalsh(H)[-1] for H in problem.H))


@pytest.mark.parametrize("lr,L,C", [(0.01, 2.0, 30.0), (0.003, 1.5, 240.0), (0.1, 1.0, 0.5)])
def test_max_beta2_meets_the_condition_with_equality(lr, L, C):
    beta2 = TH.theorem1_max_beta2(lr, L, C)
    assert 4 * lr ** 2 * L ** 2 * C == pytest.approx(1 / (2 * beta2 + 1), rel=1e-12)
    assert TH.theorem1_max_beta2(lr, L, 0.0) == math.inf
    # the largest beta^2 is accepted by the bound despite rounding (C as theorem1_constants gives it)
    a = [np.ones(3), np.ones(2)]
    C_sgd = TH.theorem1_constants([0.5, 0.5], a, 2.5)[2]
    for lr_ in np.geomspace(1e-4, 0.05, 25):
        b2 = TH.theorem1_max_beta2(lr_, L, C_sgd)
        if b2 >= 1 and lr_ * L * 2.5 <= 0.5:
            TH.theorem1_explicit_bound(lr_, 10, L=L, sigma2=1.0, beta2=b2, kappa2=1.0, initial_gap=1.0, w=[0.5, 0.5],
                                       a_vectors=a, tau_eff=2.5)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_explicit_bound_with_theorem_step_is_eq8_times_constants(seed):
    """With eta = sqrt(m / (tau_bar T)) the explicit terms are eq. (8)'s (theorem1_bound) times
    4 gap, 4 L, 6 L^2 and 12 L^2."""
    rng = np.random.default_rng(seed)
    m, T = 4, 5000
    steps = rng.integers(1, 8, size=m)
    w = _weights(rng, m)
    solver = momentum_sgd(1.0, 0.5)
    a = [solver.a_vector(int(t)) for t in steps]
    tau_eff = float(rng.uniform(1.0, 4.0))
    A, B, C = TH.theorem1_constants(w, a, tau_eff)
    tau_bar = float(steps.mean())
    lr = math.sqrt(m / (tau_bar * T))
    L, sigma2, kappa2, gap = 0.3, 2.0, 3.0, 5.0
    got = TH.theorem1_explicit_bound(lr, T, L=L, sigma2=sigma2, beta2=1.0, kappa2=kappa2, initial_gap=gap, w=w,
                                     a_vectors=a, tau_eff=tau_eff)
    ref = TH.theorem1_bound(m, tau_bar, T, tau_eff, A, B, C, sigma2=sigma2, kappa2=kappa2)
    np.testing.assert_allclose(got, [4 * gap * ref.slowdown_term, 4 * L * ref.variance_term,
                                     6 * L ** 2 * ref.local_drift_term, 12 * L ** 2 * ref.heterogeneity_term],
                               rtol=1e-12)


def test_explicit_bound_refuses_a_step_size_outside_its_conditions():
    a = [np.ones(4), np.ones(2)]
    common = dict(L=1.0, sigma2=1.0, kappa2=1.0, initial_gap=1.0, w=[0.5, 0.5], a_vectors=a)
    with pytest.raises(ValueError, match="eta L tau_eff"):
        TH.theorem1_explicit_bound(0.2, 10, beta2=1.0, tau_eff=3.0, **common)
    with pytest.raises(ValueError, match="D = 4 eta"):
        TH.theorem1_explicit_bound(0.15, 10, beta2=5.0, tau_eff=3.0, **common)
    with pytest.raises(ValueError, match="beta2 must be >= 1"):
        TH.theorem1_explicit_bound(0.01, 10, beta2=0.5, tau_eff=3.0, **common)
    TH.theorem1_explicit_bound(0.01, 10, beta2=5.0, tau_eff=3.0, **common)


def test_run_replicas_records_the_surrogate_gradient():
    problem = random_quadratic(3, 4, seed=1)
    steps = np.array([1, 3, 5])
    w = np.array([0.2, 0.3, 0.5])
    run = run_replicas(problem, "fedavg", [sgd(0.05)], RandomLocalWork(steps, steps, 1, 0), 7, sigma=0.3, replicas=3,
                       seed=2, surrogate_weights=w)
    g = run.params @ np.tensordot(w, problem.H, 1).T - w @ problem.e
    np.testing.assert_allclose(run.surrogate_grad_norm2[-1], np.sum(g ** 2, axis=1), rtol=1e-12)
    same = run_replicas(problem, "fedavg", [sgd(0.05)], RandomLocalWork(steps, steps, 1, 0), 7, sigma=0.3,
                        replicas=3, seed=2, surrogate_weights=problem.p)
    np.testing.assert_allclose(same.surrogate_grad_norm2, same.grad_norm2, rtol=1e-12)
    assert run_replicas(problem, "fedavg", [sgd(0.05)], RandomLocalWork(steps, steps, 1, 0), 2).surrogate_grad_norm2 \
        is None
    with pytest.raises(ValueError, match="surrogate_weights"):
        run_replicas(problem, "fedavg", [sgd(0.05)], RandomLocalWork(steps, steps, 1, 0), 2, surrogate_weights=[0.5, 0.5])
    with pytest.raises(ValueError, match="surrogate_weights"):
        run_replicas(problem, "fedavg", [sgd(0.05)], RandomLocalWork(steps, steps, 1, 0), 2,
                     surrogate_weights=[0.5, 0.5, 0.5])


@pytest.mark.parametrize("algorithm", ["fedavg", "fednova"])
@pytest.mark.parametrize("solver", ["sgd", "momentum"])
def test_bound_holds_on_real_runs(algorithm, solver):
    problem, steps = bounds.default_setup(seed=1, dim=4)
    row = bounds.bound_check(problem, steps, algorithm, solver, 200, replicas=8, seed=3)
    assert row.measured <= row.bound.total
    assert row.measured_min <= row.measured
    if algorithm == "fednova":
        np.testing.assert_allclose(row.w, problem.p)
        assert row.true_measured == row.measured and row.true_bound == row.bound


def test_fedavg_breaks_the_bound_read_for_the_true_objective():
    """Long enough runs: FedAvg's ||grad F||^2 stays at its floor, above the bound Theorem 1
    would give if F (weights p) were its objective; its surrogate's bound holds."""
    problem, steps = bounds.default_setup(seed=0, dim=10)
    row = bounds.bound_check(problem, steps, "fedavg", "sgd", 1000, replicas=4)
    assert row.measured <= row.bound.total
    assert row.true_bound is not None and row.true_measured > row.true_bound.total


def test_bound_check_refuses_a_too_large_step():
    problem, steps = bounds.default_setup(seed=0, dim=3)
    with pytest.raises(ValueError, match="too large"):
        bounds.bound_check(problem, steps, "fednova", "sgd", 10, lr_scale=5.0)


def test_theorem3_with_fixed_work_is_theorem1():
    """One solver and the same tau_i every round: Theorem 3's weighted averages are Theorem 1's terms."""
    problem, steps = bounds.default_setup(seed=2, dim=4)
    row1 = bounds.bound_check(problem, steps, "fednova", "momentum", 150, replicas=3, seed=5)
    row3 = bounds.theorem3_check(problem, RandomLocalWork(steps, steps, 1, 0), [momentum_sgd(row1.lr, 0.5)], 150,
                                 replicas=3, seed=5)
    np.testing.assert_allclose(row3.bound, row1.bound, rtol=1e-12)
    assert row3.measured == pytest.approx(row1.measured, rel=1e-12)
    assert row3.beta2 == row1.beta2 and row3.kappa2 == row1.kappa2


def test_theorem3_holds_under_random_local_work():
    from fedlib.experiments import speedup as S
    base, work = S.base_setup(seed=1, dim=4)
    lr = S.theorem3_lr(0.05, base.num_clients, float(work.mean_steps.mean()), 300)
    row = bounds.theorem3_check(base, work, S.make_solvers(lr), 300, replicas=6, seed=2)
    assert row.tau_eff.min() < row.tau_eff.max()  # the local work really changed
    assert row.measured_min <= row.measured <= row.bound.total


def test_theorem3_check_refuses_bad_input():
    from fedlib.experiments import speedup as S
    base, work = S.base_setup(seed=0, dim=3)
    with pytest.raises(ValueError, match="share one base learning rate"):
        bounds.theorem3_check(base, work, [sgd(0.001), sgd(0.002), sgd(0.001), sgd(0.001)], 5)
    with pytest.raises(ValueError, match="draws among 4 solvers"):
        bounds.theorem3_check(base, work, [sgd(0.001)], 5)
    with pytest.raises(ValueError, match="too large for Theorem 3"):
        bounds.theorem3_check(base, work, S.make_solvers(0.2), 5)


def test_theorem3_check_refuses_a_step_schedule_for_work_by_name():
    """theorem3_check reads each round's steps and solver numbers (work.draw, work.num_solvers): a step schedule
    such as FixedSteps is refused as a ValueError naming ``work`` and RandomLocalWork. Before: AttributeError
    ''FixedSteps' object has no attribute 'num_solvers''. Fixed steps as RandomLocalWork(steps, steps) still run."""
    from fedlib.schedules import FixedSteps
    problem = random_quadratic(2, 2, seed=0, spread=1.0)
    with pytest.raises(ValueError, match=r"^work must be a fedlib\.schedules\.RandomLocalWork .*got FixedSteps"):
        bounds.theorem3_check(problem, FixedSteps([1, 2]), [sgd(0.01)], 3, replicas=1)
    row = bounds.theorem3_check(problem, RandomLocalWork([1, 2], [1, 2]), [sgd(0.01)], 3, replicas=1)
    assert row.tau_eff.tolist() == [1.5, 1.5, 1.5]


@pytest.mark.parametrize("seed", [0, 1])
def test_kappa2_at_beta2_one_for_a_common_hessian_is_the_gradient_spread(seed):
    """Common H: sum_i w_i ||grad F_i||^2 - ||grad F~||^2 = sum_i w_i ||e_i - e~||^2 for every x, so
    kappa^2(1) is that constant (the supremum exists at beta^2 = beta^2_min = 1)."""
    rng = np.random.default_rng(seed)
    base = random_quadratic(1, 3, seed=seed)
    e = rng.normal(size=(4, 3))
    problem = QuadraticProblem(np.repeat(base.H, 4, axis=0), e, np.full(4, 0.25))
    w = _weights(rng, 4)
    spread = float(w @ np.sum((e - w @ e) ** 2, axis=1))
    assert TH.quadratic_kappa2(problem.H, problem.e, w, 1.0) == pytest.approx(spread, rel=1e-10)
    for _ in range(20):
        x = rng.normal(scale=5.0, size=3)
        assert _assumption3_gap(problem, w, 1.0, x) == pytest.approx(spread, rel=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_theorem2_holds_pointwise_with_exact_constants(seed):
    """||grad F(x)||^2 <= 2[chi^2 (beta^2 - 1) + 1] ||grad F~(x)||^2 + 2 chi^2 kappa^2 at random x, with FedAvg's
    w for random tau_i and Assumption 3's exact kappa^2(beta^2); and the intermediate step
    ||grad F - grad F~||^2 <= chi^2 [(beta^2 - 1) ||grad F~||^2 + kappa^2]."""
    rng = np.random.default_rng(seed)
    problem = random_quadratic(6, 4, seed=seed, spread=2.0)
    w = problem.p * rng.integers(1, 12, size=6)
    w = w / w.sum()
    chi2 = TH.chi_square(problem.p, w)
    for beta2 in TH.quadratic_min_beta2(problem.H, w) * np.array([1.01, 1.5, 4.0]):
        kappa2 = TH.quadratic_kappa2(problem.H, problem.e, w, beta2)
        for _ in range(50):
            x = rng.normal(scale=rng.uniform(0.1, 10.0), size=4)
            grads = np.einsum("ijk,k->ij", problem.H, x) - problem.e
            g_true, g_sur = problem.p @ grads, w @ grads
            gap2 = float(np.sum((g_true - g_sur) ** 2))
            assert gap2 <= chi2 * ((beta2 - 1) * float(g_sur @ g_sur) + kappa2) * (1 + 1e-10) + 1e-12
            assert float(g_true @ g_true) <= TH.theorem2_bound(chi2, beta2, kappa2, float(g_sur @ g_sur)) * (1 + 1e-10)


def test_theorem2_two_client_example_attains_half_the_floor():
    """App. D.1: at FedAvg's small-eta limit (grad F~ = 0), ||grad F||^2 = chi^2 kappa^2, half of the 2 chi^2 kappa^2
    of Theorem 2 (kappa^2 the smallest for beta^2 = 1)."""
    from fedlib.experiments import quadratic as Q
    for tau2 in (2, 5, 20):
        ex = TH.two_client_lower_bound(1, tau2, 1.5)
        problem = Q.two_client_problem(1.5)
        kappa2 = TH.quadratic_kappa2(problem.H, problem.e, ex.weights, 1.0)
        chi2 = TH.chi_square([0.5, 0.5], ex.weights)
        assert TH.theorem2_bound(chi2, 1.0, kappa2, 0.0) == pytest.approx(2 * ex.grad_norm_sq, rel=1e-12)


def test_theorem1_terms_are_plain_floats():
    """theorem1_bound's first two terms came out as numpy scalars (np.sqrt) and the last two as floats:
    the Theorem1Terms repr on the API page (and in a notebook) read ``slowdown_term=np.float64(0.5), ...,
    local_drift_term=0.09375``. Every term of both bounds is a Python float, whatever number types come in."""
    terms = TH.theorem1_bound(1, np.float64(4.0), 4, np.float64(2.0), np.float64(1.0), 1.5, 6.0)
    assert [type(v) for v in terms] == [float] * 4
    assert repr(terms) == ("Theorem1Terms(slowdown_term=0.5, variance_term=0.25, local_drift_term=0.09375, "
                           "heterogeneity_term=0.375)")
    explicit = TH.theorem1_explicit_bound(np.float64(0.125), 4, L=np.float64(1.0), sigma2=1.0, beta2=1.0, kappa2=1.0,
                                          initial_gap=1.0, w=[0.5, 0.5], a_vectors=[[1.0, 1.0], [1.0, 1.0]],
                                          tau_eff=np.float64(2.0))
    assert [type(v) for v in explicit] == [float] * 4


# --------------------------------------------------------------------------- bound_check: momentum with SGD
def test_bound_check_refuses_momentum_with_sgd():
    """Was: bound_check(..., "sgd", 100, momentum=0.7) ran plain SGD, the momentum dropped (as make_solver refuses)."""
    problem, steps = bounds.default_setup(seed=0, dim=3)
    with pytest.raises(ValueError, match=r"^momentum: solver 'sgd' has no momentum buffer, got momentum = 0\.7 "
                                         r"\(use solver='momentum'\)$"):
        bounds.bound_check(problem, steps, "fednova", "sgd", 100, momentum=0.7, replicas=1)
    with pytest.raises(ValueError, match=r"got momentum = 0\.0 "):  # 0 too: it is no momentum of SGD's
        bounds.bound_check(problem, steps, "fednova", "sgd", 100, momentum=0.0, replicas=1)


def test_bound_check_momentum_default_is_still_half():
    """The heavy ball's default rho = 0.5 (chapter 7 passes none): tau_eff of a_i(rho = 0.5), as given explicitly."""
    problem, steps = bounds.default_setup(seed=0, dim=3)
    row = bounds.bound_check(problem, steps, "fednova", "momentum", 100, lr_scale=0.02, replicas=1)
    given = bounds.bound_check(problem, steps, "fednova", "momentum", 100, lr_scale=0.02, momentum=0.5, replicas=1)
    assert row.measured == given.measured and row.tau_eff == given.tau_eff
    rho = 0.5
    norms = [sum((1 - rho ** (k + 1)) / (1 - rho) for k in range(int(t))) for t in steps]
    assert row.tau_eff == pytest.approx(float(np.mean(norms)), rel=1e-12)
    assert bounds.bound_check(problem, steps, "fednova", "sgd", 100, replicas=1).tau_eff == float(np.mean(steps))

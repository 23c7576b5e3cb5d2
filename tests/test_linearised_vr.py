"""Why SCAFFOLD and FedNova-VR part ways on Synthetic(1,1) (chapter 10, part 6): the
matrix-free VR round operator against the dense round map, the logistic Hessian against
finite differences, the linearisation against real rounds, and the aggregation identities
(SCAFFOLD = FedAvg-weighted fresh gradients + a net correction from last round's variates;
FedNova-VR = the p-weighted fresh gradients alone) against the library's rounds, and the count of
eigenvalues outside a circle (the determinant identity, the argument principle, deflation) against
every eigenvalue of the dense matrix."""
from __future__ import annotations

import dataclasses
import re
import runpy
from pathlib import Path

import numpy as np
import pytest

from fedlib import theory as T
from fedlib.algorithms import make_algorithm
from fedlib.data import synthetic
from fedlib.engines.reference import run_sequential
from fedlib.experiments import acceleration as A
from fedlib.problems import random_quadratic
from fedlib.problems.logistic import LogisticProblem, LogisticRegression, pack_params, unpack_params
from fedlib.schedules import FixedSteps
from fedlib.solvers import sgd
from fedlib.variance import control_variates

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def _rng(*key) -> np.random.Generator:
    """A generator seeded by ``key`` the same way in every process (``hash`` of a string is not)."""
    import zlib

    return np.random.default_rng(zlib.crc32(repr(key).encode()))


# ------------------------------------------------------------------ theory: the operator
@pytest.mark.parametrize("algorithm", T.VR_ALGORITHMS)
@pytest.mark.parametrize("mu,momentum", [(0.0, 0.0), (0.3, 0.0), (0.0, 0.6), (0.2, 0.5)])
def test_round_operator_is_the_dense_round_map(algorithm, mu, momentum):
    rng = _rng(algorithm, mu, momentum)
    p = rng.dirichlet(np.ones(4))
    q = random_quadratic(4, 5, seed=int(rng.integers(100)), p=p)
    steps = rng.integers(1, 30, size=4)
    M, _ = T.quadratic_vr_round_map(q.H, q.e, q.p, steps, 0.04, algorithm, mu=mu, momentum=momentum)
    op = T.quadratic_vr_round_operator(q.H, q.p, steps, 0.04, algorithm, mu=mu, momentum=momentum)
    V = rng.standard_normal((M.shape[0], 3))
    assert np.abs(op.matmat(V) - M @ V).max() < 1e-12 * max(1.0, np.abs(M).max())


def test_round_operator_tau_eff_and_bad_inputs():
    q = random_quadratic(3, 2, seed=1)
    M, _ = T.quadratic_vr_round_map(q.H, q.e, q.p, [1, 2, 3], 0.1, "fednova-vr", tau_eff=5.0)
    op = T.quadratic_vr_round_operator(q.H, q.p, [1, 2, 3], 0.1, "fednova-vr", tau_eff=5.0)
    assert np.allclose(op.matmat(np.eye(8)), M, atol=1e-14)
    with pytest.raises(ValueError, match="algorithm"):
        T.quadratic_vr_round_operator(q.H, q.p, [1, 2, 3], 0.1, "fedavg")
    with pytest.raises(ValueError, match="tau_eff"):
        T.quadratic_vr_round_operator(q.H, q.p, [1, 2, 3], 0.1, "scaffold", tau_eff=2.0)
    with pytest.raises(ValueError, match="local_steps"):
        T.quadratic_vr_round_operator(q.H, q.p, [1, 2], 0.1, "scaffold")
    with pytest.raises(ValueError, match="symmetric"):
        T.quadratic_vr_round_operator(q.H + np.triu(np.ones((2, 2)), 1), q.p, [1, 2, 3], 0.1, "scaffold")


def test_spectral_radius_of_a_large_operator_by_arpack():
    # 6 * 130 = 780 > 600 rows: ARPACK, against all eigenvalues of the dense map
    q = random_quadratic(5, 130, seed=3, eig_range=(0.1, 2.0), p=np.random.default_rng(3).dirichlet(np.ones(5)))
    steps = [1, 4, 9, 30, 2]
    M, _ = T.quadratic_vr_round_map(q.H, q.e, q.p, steps, 0.3, "scaffold")
    op = T.quadratic_vr_round_operator(q.H, q.p, steps, 0.3, "scaffold")
    assert abs(T.spectral_radius(op) / T.spectral_radius(M) - 1) < 1e-8
    with pytest.raises(ValueError, match="tol"):
        T.spectral_radius(op, tol=0)


@pytest.mark.parametrize("algorithm", ["scaffold", "fednova-vr"])
@pytest.mark.parametrize("mu,momentum,tau_eff", [(0.0, 0.0, None), (0.3, 0.0, None), (0.0, 0.6, 7.5),
                                                 (0.2, 0.5, None)])
@pytest.mark.parametrize("sigma", [1.0, 0.93, -0.4, 0.6 + 0.7j])
def test_shift_invert_solves_with_the_dense_round_map(algorithm, mu, momentum, tau_eff, sigma):
    rng = _rng(algorithm, mu, momentum, sigma)
    p = rng.dirichlet(np.ones(4))
    q = random_quadratic(4, 5, seed=int(rng.integers(100)), p=p)
    steps = rng.integers(1, 30, size=4)
    tau_eff = tau_eff if algorithm == "fednova-vr" else None
    M, _ = T.quadratic_vr_round_map(q.H, q.e, q.p, steps, 0.04, algorithm, mu=mu, momentum=momentum, tau_eff=tau_eff)
    S = T.quadratic_vr_shift_invert(q.H, q.p, steps, 0.04, algorithm, sigma, mu=mu, momentum=momentum, tau_eff=tau_eff)
    B = rng.standard_normal((M.shape[0], 3))
    X = S.matmat(B)
    assert (np.iscomplexobj(X)) == (np.imag(sigma) != 0)
    assert np.abs((M - sigma * np.eye(M.shape[0])) @ X - B).max() < 1e-10 * np.abs(X).max()
    near = T.quadratic_vr_eigenvalues_near(q.H, q.p, steps, 0.04, algorithm, sigma, k=5, mu=mu, momentum=momentum,
                                           tau_eff=tau_eff)
    every = np.linalg.eigvals(M)
    expected = every[np.argsort(np.abs(every - sigma))][:5]
    assert np.allclose(np.abs(near - sigma), np.abs(expected - sigma), rtol=1e-8, atol=1e-12)
    assert all(np.abs(every - lam).min() < 1e-8 for lam in near)


def test_eigenvalues_near_by_arpack_on_a_large_operator():
    # 6 * 130 = 780 > 600 rows: ARPACK on the shift-invert operator, against all eigenvalues of the dense map
    q = random_quadratic(5, 130, seed=3, eig_range=(1e-4, 2.0), p=np.random.default_rng(3).dirichlet(np.ones(5)))
    steps = [1, 4, 9, 30, 2]
    for name in ("scaffold", "fednova-vr"):
        M, _ = T.quadratic_vr_round_map(q.H, q.e, q.p, steps, 0.3, name)
        every = np.linalg.eigvals(M)
        for sigma in (1.0, -0.5 + 0.2j):
            near = T.quadratic_vr_eigenvalues_near(q.H, q.p, steps, 0.3, name, sigma, k=4)
            expected = every[np.argsort(np.abs(every - sigma))][:4]
            assert np.allclose(np.abs(near - sigma), np.abs(expected - sigma), rtol=1e-7)
    # the flattest directions: three directions u_k with H_i u_k = eps_ik u_k (eps ~ 1e-6) give both algorithms
    # the eigenvalues nearest 1: 1 - lr tau_bar sum_i p_i eps_ik, up to O((lr tau_i eps_ik)^2)
    rng = np.random.default_rng(5)
    U = np.linalg.qr(rng.standard_normal((130, 130)))[0]
    eps = rng.uniform(1e-6, 3e-6, size=(5, 3))
    H = np.stack([U @ np.diag(np.concatenate([eps[i], rng.uniform(0.1, 2.0, 127)])) @ U.T for i in range(5)])
    tau_bar = float(q.p @ np.asarray(steps))
    flat = np.sort(1 - 0.3 * tau_bar * (q.p @ eps))[::-1]
    for name in ("scaffold", "fednova-vr"):
        near = T.quadratic_vr_eigenvalues_near(H, q.p, steps, 0.3, name, 1.0, k=3)
        assert np.all(np.abs(near - flat) < 1e-4 * (1 - flat)), (name, near, flat)


def test_shift_invert_bad_inputs():
    q = random_quadratic(3, 2, seed=1)
    with pytest.raises(ValueError, match="always an eigenvalue"):
        T.quadratic_vr_shift_invert(q.H, q.p, [1, 2, 3], 0.1, "scaffold", 0.0)
    with pytest.raises(ValueError, match="algorithm"):
        T.quadratic_vr_shift_invert(q.H, q.p, [1, 2, 3], 0.1, "vrlsgd", 1.0)
    with pytest.raises(ValueError, match="finite"):
        T.quadratic_vr_shift_invert(q.H, q.p, [1, 2, 3], 0.1, "scaffold", float("nan"))
    M, _ = T.quadratic_vr_round_map(q.H, q.e, q.p, [1, 2, 3], 0.1, "scaffold")
    lam = np.linalg.eigvals(M)
    lam = lam[np.argmax(np.abs(lam))]
    with pytest.raises(ValueError, match="eigenvalue of the round map"):
        T.quadratic_vr_shift_invert(q.H, q.p, [1, 2, 3], 0.1, "scaffold", lam)
    with pytest.raises(ValueError, match="k must be at most 8"):
        T.quadratic_vr_eigenvalues_near(q.H, q.p, [1, 2, 3], 0.1, "scaffold", 1.0, k=9)
    assert T.quadratic_vr_eigenvalues_near(q.H, q.p, [1, 2, 3], 0.1, "scaffold", 1.0, k=8).shape == (8,)


@pytest.mark.parametrize("tau", [1, 2, 3, 5, 8, 17, 64, 100, 255])
def test_local_operator_by_doubling_is_the_sum(tau):
    rng = np.random.default_rng(tau)
    A_ = rng.standard_normal((4, 4))
    H = A_ @ A_.T / 4
    lr, mu = 0.07, 0.2
    step = np.eye(4) * (1 - lr * mu) - lr * H
    total = np.zeros((4, 4))
    power = np.eye(4)
    for _ in range(tau):
        total += power
        power = power @ step
    assert np.allclose(T.quadratic_local_operator(H, tau, lr, mu), lr * total, rtol=1e-12, atol=1e-14)


# ------------------------------------------------------------------ the logistic Hessian
@pytest.mark.parametrize("l2", [0.0, 0.25])
def test_logistic_hessian_is_the_derivative_of_the_gradient(l2):
    rng = np.random.default_rng(7)
    model = LogisticRegression(4, 3, l2)
    x, y = rng.standard_normal((9, 4)), rng.integers(0, 3, 9)
    theta = rng.standard_normal((5, 3))
    H = model.hessian(unpack_params(theta), x, y)

    def grad(v):
        return pack_params(model.grad(unpack_params(v.reshape(5, 3)), x, y)).ravel()

    h = 1e-6
    fd = np.stack([(grad(theta.ravel() + h * e) - grad(theta.ravel() - h * e)) / (2 * h) for e in np.eye(15)], axis=1)
    assert np.abs(H - fd).max() < 1e-8
    assert np.array_equal(H, H.T)
    assert np.linalg.eigvalsh(H).min() > -1e-12
    problem = LogisticProblem(synthetic(num_clients=2, dim=4, num_classes=3, seed=0), l2=l2)
    flat = A.flat_directions(problem)
    assert flat.shape == (15, 5 if l2 == 0 else 1)
    assert np.allclose(flat.T @ flat, np.eye(flat.shape[1]))
    assert np.abs(H @ flat).max() < 1e-12                     # flat: no curvature there
    assert np.linalg.matrix_rank(H) == 15 - flat.shape[1]      # ... and nowhere else


def test_logistic_hessian_bad_inputs():
    problem = LogisticProblem(synthetic(num_clients=2, dim=4, num_classes=3, seed=0))
    with pytest.raises(ValueError, match="client"):
        problem.client_hessian(problem.init_params(), 2)
    with pytest.raises(ValueError, match="empty"):
        problem.model.hessian(problem.init_params(), np.zeros((0, 4)), np.zeros(0, dtype=int))


# ------------------------------------------------------------------ runs from a chosen state
def test_initial_state_continues_a_run_exactly():
    q = random_quadratic(3, 4, seed=2, p=[0.5, 0.3, 0.2])
    algo = make_algorithm("scaffold", sgd(0.05))
    sched = FixedSteps([2, 5, 9])
    grad = q.grad_fn()
    whole = run_sequential(algo, np.zeros(4), grad, q.p, sched, 3)
    first = run_sequential(algo, np.zeros(4), grad, q.p, sched, 2)
    rest = run_sequential(algo, None, grad, q.p, sched, 1, initial_state=first.state)
    assert np.array_equal(rest.state.params, whole.state.params)
    assert np.array_equal(rest.state.variates.client, whole.state.variates.client)
    with pytest.raises(ValueError, match="params must be None"):
        run_sequential(algo, np.zeros(4), grad, q.p, sched, 1, initial_state=first.state)
    with pytest.raises(ValueError, match="ServerState"):
        run_sequential(algo, None, grad, q.p, sched, 1, initial_state=(np.zeros(4),))
    with pytest.raises(ValueError, match="control variates"):
        run_sequential(make_algorithm("fednova", sgd(0.05)), None, grad, q.p, sched, 1, initial_state=first.state)


def test_control_variates_constructor():
    c = np.arange(6.0).reshape(3, 2)
    cv = control_variates(c, [0.5, 0.25, 0.25])
    assert np.allclose(cv.mean, [1.5, 2.5]) and cv.kind == "scaffold"
    assert np.array_equal(control_variates(c, [0.5, 0.25, 0.25], "vrlsgd").mean, [0.0, 0.0])
    with pytest.raises(ValueError, match=r"^p\b"):
        control_variates(c, [0.5, 0.5])
    with pytest.raises(ValueError, match="kind"):
        control_variates(c, [0.5, 0.25, 0.25], "fednova")
    with pytest.raises(ValueError, match="leading axis"):
        control_variates({"a": np.zeros((3, 2)), "b": np.zeros((2,))}, [0.5, 0.25, 0.25])


# ------------------------------------------------------------------ the aggregation identities
@pytest.mark.parametrize("seed", range(4))
def test_scaffold_carries_a_net_correction_fednova_vr_does_not(seed):
    """With local SGD, Delta_i = -lr tau_i (gbar_i + cbar - c_i), gbar_i the mean raw gradient
    of the (corrected) local run. So SCAFFOLD's change is -lr sum p_i tau_i gbar_i
    - lr sum p_i (tau_bar - tau_i) c_i, FedNova-VR's is -lr tau_bar sum p_i gbar_i, and both
    set c_i <- gbar_i. gbar_i is computed here by an independent loop."""
    rng = np.random.default_rng(seed)
    m, d, lr = 4, 3, 0.05
    p = rng.dirichlet(np.ones(m))
    q = random_quadratic(m, d, seed=seed, p=p)
    steps = rng.integers(1, 12, size=m)
    x0, c = rng.standard_normal(d), rng.standard_normal((m, d))
    cbar = p @ c
    gbar = np.empty((m, d))
    for i in range(m):
        y, total = x0.copy(), np.zeros(d)
        for _ in range(steps[i]):
            g = q.H[i] @ y - q.e[i]
            total += g
            y = y - lr * (g + cbar - c[i])
        gbar[i] = total / steps[i]
    tau_bar = p @ steps
    expected = {"scaffold": -lr * (p * steps) @ gbar - lr * (p * (tau_bar - steps)) @ c,
                "fednova-vr": -lr * tau_bar * p @ gbar}
    for name, change in expected.items():
        algo = make_algorithm(name, sgd(lr))
        state = algo.init(x0.copy(), m)._replace(variates=control_variates(c.copy(), p))
        out = run_sequential(algo, None, q.grad_fn(), p, FixedSteps(steps), 1, initial_state=state).state
        assert np.allclose(out.params - x0, change, rtol=1e-12, atol=1e-13), name
        assert np.allclose(out.variates.client, gbar, rtol=1e-12, atol=1e-13), name
    if np.ptp(steps) > 0:   # the net correction vanishes only with equal steps (or equal variates)
        assert np.linalg.norm((p * (tau_bar - steps)) @ c) > 1e-6


# ------------------------------------------------------------------ the linearisation at x*
@pytest.fixture(scope="module")
def small_logistic():
    problem = LogisticProblem(synthetic(0, 0, num_clients=3, dim=5, num_classes=3, num_samples=[300, 500, 900], seed=1))
    return problem, A.logistic_optimum(problem)


def test_logistic_optimum(small_logistic):
    problem, opt = small_logistic
    assert opt.grad_norm < 1e-12
    assert np.linalg.norm(problem.p @ opt.client_grads) < 1e-12
    assert np.abs(A.flat_directions(problem).T @ opt.theta).max() < 1e-12   # canonical representative
    assert opt.basis.shape == (18, 12) and opt.hessians.shape == (3, 12, 12)
    assert np.linalg.eigvalsh(np.tensordot(problem.p, opt.hessians, 1)).min() > 0


@pytest.mark.parametrize("s", [1e-3, 1e3, 1e6])
def test_logistic_optimum_does_not_depend_on_the_units_of_the_features(small_logistic, s):
    """Features times s: the optimum's weights are W*/s (the bias unchanged), reached in the same Newton steps.
    The stopping test was an absolute |grad F| <= 1e-11, while the gradient and its rounding floor grow with
    s: from s = 1e3 it raised after 100 steps (found by an audit of unit-dependent results)."""
    problem, opt = small_logistic
    ds = problem.dataset
    scaled = dataclasses.replace(ds, train_x=[s * x for x in ds.train_x], test_x=[s * x for x in ds.test_x])
    got = A.logistic_optimum(LogisticProblem(scaled))
    theta = got.theta.reshape(6, 3).copy()     # 5 features and the bias, 3 classes
    theta[:-1] *= s
    np.testing.assert_allclose(theta.ravel(), opt.theta, rtol=0, atol=1e-12 * np.abs(opt.theta).max())
    assert got.newton_steps == opt.newton_steps


@pytest.mark.parametrize("name", ["scaffold", "fednova-vr"])
def test_linearisation_predicts_a_real_round(small_logistic, name):
    """One real round from (x* + eps v, grad F_i(x*) + eps w) moves the state by eps M (v, w)
    + O(eps^2), M the round operator with the Hessians at x* (in the basis of non-flat
    directions)."""
    problem, opt = small_logistic
    m, Q, lr, steps = problem.num_clients, opt.basis, 0.1, [3, 7, 15]
    rng = np.random.default_rng(0)
    v, w = rng.standard_normal(Q.shape[1]), rng.standard_normal((m, Q.shape[1]))
    op = T.quadratic_vr_round_operator(opt.hessians, problem.p, steps, lr, name)
    predicted = op @ np.concatenate([v, w.ravel()])
    shape = pack_params(problem.init_params()).shape
    from fedlib.experiments.surrogate import full_batch_grad_fn

    errors = []
    for eps in (1e-3, 1e-4):
        algo = make_algorithm(name, sgd(lr))
        state = algo.init(unpack_params((opt.theta + eps * Q @ v).reshape(shape)), m)
        c = opt.client_grads + eps * w @ Q.T
        state = state._replace(variates=control_variates(unpack_params(c.reshape((m,) + shape)), problem.p))
        out = run_sequential(algo, None, full_batch_grad_fn(problem), problem.p, FixedSteps(steps), 1,
                             initial_state=state).state
        dx = Q.T @ (pack_params(out.params).ravel() - opt.theta) / eps
        dc = (pack_params(out.variates.client).reshape(m, -1) - opt.client_grads) @ Q / eps
        errors.append(np.linalg.norm(np.concatenate([dx, dc.ravel()]) - predicted) / np.linalg.norm(predicted))
    assert errors[1] < 1e-4 and errors[1] < 0.2 * errors[0], errors   # first order: the error shrinks with eps


def test_perturbation_growth_and_radius(small_logistic):
    problem, opt = small_logistic
    steps = [2, 4, 40]   # lr 1: SCAFFOLD has an isolated eigenvalue outside the unit circle
    radius = A.linearised_vr_radius(problem, opt, "scaffold", 1.0, steps)
    run = A.perturbation_growth(problem, opt, "scaffold", 1.0, steps, 40, size=1e-8, seed=3)
    assert radius > 1.2
    assert run.distances.shape == (41,) and abs(run.distances[0] / 1e-8 - 1) < 1e-6
    assert abs(run.rate / radius - 1) < 0.02, (run.rate, radius)
    # the same setting is stable for FedNova-VR, and the perturbation decays
    assert A.linearised_vr_radius(problem, opt, "fednova-vr", 1.0, steps) < 1
    decay = A.perturbation_growth(problem, opt, "fednova-vr", 1.0, steps, 40, size=1e-8, seed=3)
    assert decay.rate < 1 and decay.distances[-1] < decay.distances[0]
    with pytest.raises(ValueError, match="name"):
        A.linearised_vr_radius(problem, opt, "fedavg", 0.1, steps)
    with pytest.raises(ValueError, match="name"):
        A.perturbation_growth(problem, opt, "vrlsgd", 0.1, steps, 5)


def test_leading_eigenvalues_dense_and_by_arpack():
    q = random_quadratic(5, 130, seed=3, eig_range=(0.1, 2.0), p=np.random.default_rng(3).dirichlet(np.ones(5)))
    steps = [1, 4, 9, 30, 2]
    M, _ = T.quadratic_vr_round_map(q.H, q.e, q.p, steps, 0.3, "scaffold")
    op = T.quadratic_vr_round_operator(q.H, q.p, steps, 0.3, "scaffold")
    exact = np.linalg.eigvals(M)
    exact = exact[np.argsort(-np.abs(exact))]
    dense, arpack = T.leading_eigenvalues(M, k=4), T.leading_eigenvalues(op, k=4, tol=1e-10)
    assert np.allclose(np.abs(dense), np.abs(exact[:4]), rtol=1e-12, atol=0)
    assert np.allclose(np.abs(arpack), np.abs(exact[:4]), rtol=1e-8, atol=0)
    for lam in arpack:   # each one is an eigenvalue of M, not just a modulus
        assert np.abs(exact - lam).min() < 1e-8 * np.abs(lam)
    assert np.all(np.diff(np.abs(arpack)) <= 1e-12)   # largest first
    assert T.spectral_radius(op) == pytest.approx(abs(arpack[0]), rel=1e-6)
    # a rotation by 90 degrees: a pair on the unit circle
    R = np.array([[0.0, -1.0], [1.0, 0.0]])
    assert sorted(T.leading_eigenvalues(R, k=2).imag) == pytest.approx([-1.0, 1.0])
    assert T.spectral_radius(np.zeros((0, 0))) == 0.0
    with pytest.raises(ValueError, match="k must be"):
        T.leading_eigenvalues(R, k=3)
    with pytest.raises(ValueError, match="k must be"):
        T.leading_eigenvalues(op, k=op.shape[0] - 1)
    with pytest.raises(ValueError, match="square"):
        T.leading_eigenvalues(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"^k\b"):
        T.leading_eigenvalues(R, k=0)


def test_linearised_eigenvalues_and_the_slow_modes(small_logistic):
    """The linearised VR rounds' eigenvalues nearest 1 are gradient descent's on F at step
    lr * tau_bar, to first order in lr: the relative error in 1 - lambda shrinks with lr."""
    problem, opt = small_logistic
    steps = np.array([2, 4, 40])
    tau_bar = float(problem.p @ steps)
    for name in ("scaffold", "fednova-vr"):
        errors = []
        for lr in (1e-2, 1e-3):
            near = A.linearised_vr_eigenvalues(problem, opt, name, lr, steps, k=3, near=1.0)
            gd = A.linearised_gd_eigenvalues(problem, opt, lr * tau_bar)[:3]
            assert near.dtype.kind == "f" and np.all(np.abs(near - 1) <= np.abs(near[-1] - 1))
            errors.append(np.abs((near - gd) / (1 - gd)).max())
        assert errors[0] < 1e-3 and 0.05 < errors[1] / errors[0] < 0.15, (name, errors)  # linear in lr
        lead = A.linearised_vr_eigenvalues(problem, opt, name, 1.0, steps, k=2)
        assert abs(lead[0]) == pytest.approx(A.linearised_vr_radius(problem, opt, name, 1.0, steps), rel=1e-12)
    gd = A.linearised_gd_eigenvalues(problem, opt, 0.5)
    H = np.tensordot(problem.p, opt.hessians, 1)
    assert np.allclose(np.sort(gd), np.sort(1 - 0.5 * np.linalg.eigvalsh(H)), atol=1e-14)
    assert np.all(np.diff(np.abs(gd - 1)) >= 0)
    with pytest.raises(ValueError, match="name"):
        A.linearised_vr_eigenvalues(problem, opt, "fedavg", 0.1, steps)
    with pytest.raises(ValueError, match="step"):
        A.linearised_gd_eigenvalues(problem, opt, 0.0)


# ------------------------------------------------------------------ the whole spectrum (dense)
@pytest.mark.parametrize("chunk", [1, 7, 512])
def test_linearised_vr_matrix_is_the_operator(small_logistic, chunk):
    problem, opt = small_logistic
    steps = np.array([2, 4, 40])
    for name in ("scaffold", "fednova-vr"):
        M = A.linearised_vr_matrix(problem, opt, name, 1.0, steps, chunk=chunk)
        op = T.quadratic_vr_round_operator(opt.hessians, problem.p, steps, 1.0, name)
        V = np.random.default_rng(chunk).standard_normal((M.shape[0], 3))
        assert M.shape == (48, 48) and np.abs(M @ V - op.matmat(V)).max() < 1e-12 * np.abs(M).max()
        assert np.abs(np.linalg.eigvals(M)).max() == pytest.approx(
            A.linearised_vr_radius(problem, opt, name, 1.0, steps), rel=1e-12)
    with pytest.raises(ValueError, match="chunk"):
        A.linearised_vr_matrix(problem, opt, "scaffold", 1.0, steps, chunk=0)


def test_spectrum_summary_by_hand():
    vals = np.array([0.5, 0.99, 0.999, 1.2j, -1.2j, 0.0, -0.97, 0.2 + 0.1j])
    s = A.spectrum_summary(vals, k=3, slow=0.05)
    assert s["radius"] == pytest.approx(1.2) and s["outside_unit_circle"] == 2
    assert s["leading"][:2] == [[0.0, 1.2], [0.0, -1.2]] and s["leading"][2] == [0.999, 0.0]
    assert s["nearest_one"] == [[0.999, 0.0], [0.99, 0.0], [0.5, 0.0]]
    assert s["slow_count"] == 2 and s["fast_radius"] == pytest.approx(1.2)
    assert A.spectrum_summary([0.99, 0.98], slow=0.05)["fast_radius"] is None
    for bad in ([], [np.nan], [1.0, np.inf]):
        with pytest.raises(ValueError, match="eigenvalues"):
            A.spectrum_summary(bad)


@pytest.mark.parametrize("eigenvalues, shown", [
    (True, "the bool True"), (np.True_, "True"), ([0.5, True], "the bool True"), (np.array([True, False]),
                                                                                r"array\(\[ True, False\]\)"),
    ("0.5", "'0.5'"), (["0.5", 1.0], r"\['0\.5', 1\.0\]"),
])
def test_spectrum_summary_refuses_bools_and_strings(eigenvalues, shown):
    """Before: True was summarised as the eigenvalue 1 (radius 1.0) and '0.5' as 0.5 (numpy parses the string),
    without a word; a ragged list was numpy's bare ValueError ('setting an array element with a sequence. ...')."""
    with pytest.raises(ValueError, match=f"^eigenvalues must be real or complex numbers, got {shown}$"):
        A.spectrum_summary(eigenvalues)
    with pytest.raises(ValueError, match=r"^eigenvalues must be an array of numbers: setting an array element"):
        A.spectrum_summary([[0.5], [1.0, 2.0]])
    assert A.spectrum_summary([0.5, 1 + 2j])["radius"] == abs(1 + 2j)

def _run_script(name: str, *args: str) -> int:
    """Run ``python scripts/NAME ARGS`` in this process; its exit code."""
    import sys

    script = SCRIPTS / name
    argv = sys.argv
    try:
        sys.argv = [str(script), *args]
        with pytest.raises(SystemExit) as done:
            runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.argv = argv
    return done.value.code


def test_vr_spectrum_script_and_reader(small_logistic, tmp_path):
    """scripts/vr_spectrum.py --smoke (chapter 10's 3-client problem) writes what read_vr_spectrum
    reads: the eigenvalues of the dense matrix, a radius equal to linearised_vr_radius."""
    assert _run_script("vr_spectrum.py", "--smoke", "--method", "dense", "--out", str(tmp_path)) == 0
    problem, opt = small_logistic   # the script's smoke problem
    for name in ("scaffold", "fednova-vr"):
        vals, record = A.read_vr_spectrum(tmp_path, name)
        assert vals.size == record["config"]["rows"] == 48 and record["config"]["local_steps"] == [2, 4, 40]
        assert record["summary"]["radius"] == pytest.approx(
            A.linearised_vr_radius(problem, opt, name, 1.0, [2, 4, 40]), rel=1e-10)
        assert record["provenance"]["command"].endswith("--smoke --method dense --out " + str(tmp_path))
    np.savez_compressed(tmp_path / "scaffold.npz", eigenvalues=vals[:-1])   # a spectrum that is not the record's
    with pytest.raises(ValueError, match="its record says 48"):
        A.read_vr_spectrum(tmp_path, "scaffold")
    with pytest.raises(ValueError, match="file not found"):
        A.read_vr_spectrum(tmp_path / "missing", "scaffold")
    (tmp_path / "fednova-vr.npz").unlink()
    with pytest.raises(ValueError, match="fednova-vr.npz: file not found"):
        A.read_vr_spectrum(tmp_path, "fednova-vr")
    with pytest.raises(ValueError, match="name"):
        A.read_vr_spectrum(tmp_path, "fedavg")


# ------------------------------------------------------------------ counting eigenvalues outside a circle
#: Radii halfway between neighbouring distinct moduli (never on an eigenvalue), as the accuracy script picks them.
_between_moduli = runpy.run_path(str(SCRIPTS / "count_outside_accuracy.py"))["radii_between"]


@pytest.mark.parametrize("algorithm", ["scaffold", "fednova-vr"])
@pytest.mark.parametrize("mu,momentum,tau_eff", [(0.0, 0.0, None), (0.3, 0.0, None), (0.0, 0.6, 7.5),
                                                 (0.2, 0.5, None)])
def test_determinant_identity(algorithm, mu, momentum, tau_eff):
    """det(M - sigma I) = sigma^d det A~(sigma) prod_i det(L_i + (sigma - 1) I), A~ as in the
    docstring of quadratic_vr_count_outside, built here from dense inverses."""
    rng = _rng(algorithm, mu, momentum, "det")
    q = random_quadratic(3, 4, seed=int(rng.integers(100)), p=rng.dirichlet(np.ones(3)))
    steps = rng.integers(1, 12, size=3)
    tau_eff = tau_eff if algorithm == "fednova-vr" else None
    M, _ = T.quadratic_vr_round_map(q.H, q.e, q.p, steps, 0.05, algorithm, mu=mu, momentum=momentum, tau_eff=tau_eff)
    _, coef, a_norms, K, _ = T._vr_round_parts(q.H, q.p, steps, 0.05, algorithm, mu, momentum, tau_eff)
    L = K / (0.05 * a_norms)[:, None, None]
    eye = np.eye(4)
    for sigma in (0.3 + 0.2j, 1.7 - 0.4j, -0.5, 2.0, 0.99j):
        R = np.linalg.inv(L + (sigma - 1) * eye)
        blocks = [[-np.einsum("i,ijk->jk", q.p, R @ L @ q.H), np.einsum("i,ijk->jk", q.p, R)],
                  [(1 - sigma) * eye - np.einsum("i,ijk->jk", coef, K @ (eye - R @ L) @ q.H),
                   -np.einsum("i,ijk->jk", coef, K @ R)]]
        right = sigma ** 4 * np.linalg.det(np.block(blocks)) * np.prod(np.linalg.det(L + (sigma - 1) * eye))
        left = np.linalg.det(M - sigma * np.eye(M.shape[0]))
        assert abs(left - right) < 1e-10 * max(1.0, abs(left)), (sigma, left, right)


@pytest.mark.parametrize("algorithm", ["scaffold", "fednova-vr"])
@pytest.mark.parametrize("mu,momentum,tau_eff", [(0.0, 0.0, None), (0.3, 0.0, None), (0.0, 0.6, 7.5),
                                                 (0.2, 0.5, None)])
def test_count_outside_is_the_dense_count(algorithm, mu, momentum, tau_eff):
    rng = _rng(algorithm, mu, momentum, "count")
    q = random_quadratic(4, 5, seed=int(rng.integers(100)), p=rng.dirichlet(np.ones(4)))
    steps = rng.integers(1, 30, size=4)
    tau_eff = tau_eff if algorithm == "fednova-vr" else None
    lr = float(rng.choice([0.04, 0.3]))   # 0.3: SCAFFOLD usually has eigenvalues outside the unit circle
    M, _ = T.quadratic_vr_round_map(q.H, q.e, q.p, steps, lr, algorithm, mu=mu, momentum=momentum, tau_eff=tau_eff)
    every = np.linalg.eigvals(M)
    for radius in _between_moduli(every):
        c = T.quadratic_vr_count_outside(q.H, q.p, steps, lr, algorithm, radius, mu=mu, momentum=momentum,
                                         tau_eff=tau_eff)
        assert (c.outside, c.rows) == (int(np.sum(np.abs(every) > radius)), 25), (radius, c)
        assert c.inside == 25 - c.outside and c.radius == radius and c.evaluations > 2


def test_count_outside_through_a_crowd_next_to_one():
    """Ill-conditioned clients (eigenvalues down to 1e-6) put a crowd of eigenvalues next to 1,
    as on Synthetic(1,1): the counts still equal the dense ones, on circles through the crowd."""
    rng = np.random.default_rng(11)
    q = random_quadratic(5, 30, seed=4, eig_range=(1e-6, 3.0), p=rng.dirichlet(np.ones(5)))
    steps = [2, 7, 40, 5, 120]
    for name in ("scaffold", "fednova-vr"):
        M, _ = T.quadratic_vr_round_map(q.H, q.e, q.p, steps, 0.2, name)
        every = np.linalg.eigvals(M)
        top = np.sort(np.abs(every))[::-1]
        radii = list(_between_moduli(every, count=4)) + [(top[0] + top[1]) / 2, top[0] + 1e-3 * (1 - top[0])]
        for radius in radii:
            c = T.quadratic_vr_count_outside(q.H, q.p, steps, 0.2, name, radius)
            assert c.outside == int(np.sum(np.abs(every) > radius)), (name, radius, c)


def test_count_outside_on_the_linearised_logistic_rounds(small_logistic):
    problem, opt = small_logistic
    for name in ("scaffold", "fednova-vr"):
        every = np.linalg.eigvals(A.linearised_vr_matrix(problem, opt, name, 1.0, [2, 4, 40]))
        for radius in _between_moduli(every):
            c = A.linearised_vr_count_outside(problem, opt, name, 1.0, [2, 4, 40], radius)
            assert c.outside == int(np.sum(np.abs(every) > radius)), (name, radius, c)


def test_count_outside_bad_inputs():
    H = [[[1.0, 0.0], [0.0, 4.0]]]
    # one client, one step: eigenvalues 0.9, 0.6 (gradient descent) and 0, 0
    assert T.quadratic_vr_count_outside(H, [1.0], [1], 0.1, "scaffold", 0.7).outside == 1
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="radius"):
            T.quadratic_vr_count_outside(H, [1.0], [1], 0.1, "scaffold", bad)
    with pytest.raises(ValueError, match="algorithm"):
        T.quadratic_vr_count_outside(H, [1.0], [1], 0.1, "vrlsgd", 0.7)
    with pytest.raises(ValueError, match="max_phase_step"):
        T.quadratic_vr_count_outside(H, [1.0], [1], 0.1, "scaffold", 0.7, max_phase_step=2.0)
    with pytest.raises(ValueError, match="eigenvalue of the round map"):
        T.quadratic_vr_count_outside(H, [1.0], [1], 0.1, "scaffold", 0.9)   # sigma = 0.9 is an eigenvalue
    # three local steps on h = 1: l = (1 + 0.9 + 0.81) / 3, a pole of the determinant at 1 - l
    with pytest.raises(ValueError, match="pole"):
        T.quadratic_vr_count_outside(H, [1.0], [3], 0.1, "scaffold", 1 - 2.71 / 3)



@pytest.mark.parametrize("value", ["no", 1, None])
def test_count_outside_progress_must_be_true_or_false(capsys, value):
    """Before: progress='no' or 1 (truthy) drew a bar over the half circle and None none, without a word; the
    experiment's form computed its deflation points first. np.bool_ is taken (check_flag), with the same count."""
    H = [[[1.0, 0.0], [0.0, 4.0]]]
    with pytest.raises(ValueError, match=rf"^progress must be True or False, got {value!r}$"):
        T.quadratic_vr_count_outside(H, [1.0], [1], 0.1, "scaffold", 0.7, progress=value)
    with pytest.raises(ValueError, match=rf"^progress must be True or False, got {value!r}$"):
        problem = LogisticProblem(synthetic(num_clients=1, dim=2, num_classes=2, seed=0))
        A.linearised_vr_count_outside(problem, None, "scaffold", 1.0, [1], 0.7, progress=value)  # before the optimum
    assert capsys.readouterr().err == ""
    assert T.quadratic_vr_count_outside(H, [1.0], [1], 0.1, "scaffold", 0.7, progress=np.False_) == \
        T.quadratic_vr_count_outside(H, [1.0], [1], 0.1, "scaffold", 0.7)


def test_vr_spectrum_script_stops_when_the_count_changes_with_the_phase_step(monkeypatch, tmp_path):
    """A count that differs between the phase steps 0.8 and 0.4 (a turn of the argument skipped) stops
    scripts/vr_spectrum.py with the counts and nothing written (mutant SCR16 of test_mutation_build_book.py:
    that SystemExit made a print)."""
    true_count = A.linearised_vr_count_outside

    def skipping(*args, max_phase_step, **kwargs):
        c = true_count(*args, max_phase_step=max_phase_step, **kwargs)
        return c._replace(outside=c.outside + 2) if max_phase_step == 0.8 else c

    monkeypatch.setattr(A, "linearised_vr_count_outside", skipping)
    message = _run_script("vr_spectrum.py", "--smoke", "--algorithms", "fednova-vr", "--out", str(tmp_path))
    found = re.fullmatch(r"fednova-vr: the count at \|sigma\| = .* changed with the phase step \(\[(\d+), (\d+)\] at "
                         r"\[0.8, 0.4\]\); lower it further", str(message))
    assert found, message
    assert int(found[1]) == int(found[2]) + 2
    assert not list(tmp_path.iterdir())


def test_vr_spectrum_script_counts_and_reader(small_logistic, tmp_path):
    """scripts/vr_spectrum.py --smoke --method contour writes what read_vr_count reads: the
    eigenvalue nearest 1 and counts that agree with every eigenvalue of the dense matrix."""
    import json

    assert _run_script("vr_spectrum.py", "--smoke", "--radius", "1.0", "--out", str(tmp_path)) == 0
    problem, opt = small_logistic
    for name in ("scaffold", "fednova-vr"):
        record = A.read_vr_count(tmp_path, name)
        assert record["config"]["steps"] == "e2" and record["config"]["local_steps"] == [2, 4, 40]
        every = np.linalg.eigvals(A.linearised_vr_matrix(problem, opt, name, 1.0, [2, 4, 40]))
        counts = record["summary"]["counts"]
        assert [c["radius"] for c in counts][1:] == [1.0] and record["config"]["rows"] == 48
        assert [c["outside"] for c in counts] == [int(np.sum(np.abs(every) > c["radius"])) for c in counts]
        near = complex(*record["summary"]["nearest_one"])
        assert np.abs(every - near).min() < 1e-10 and abs(near - 1) == pytest.approx(np.abs(every - 1).min())
    bounds = A.read_vr_count(tmp_path, "fednova-vr")["summary"]["radius_bounds"]   # FedNova-VR: pinned
    radius = A.linearised_vr_radius(problem, opt, "fednova-vr", 1.0, [2, 4, 40])  # another process: ulps may differ
    assert bounds[0] * (1 - 1e-12) <= radius <= bounds[1] * (1 + 1e-12)
    assert A.read_vr_count(tmp_path, "scaffold")["summary"]["radius_bounds"] is None   # 4 outside: no bound
    path = tmp_path / "fednova-vr-count.json"
    record = json.loads(path.read_text())
    record["summary"]["counts"][0]["outside"] = 1
    path.write_text(json.dumps(record))
    with pytest.raises(ValueError, match="outside \\+ inside"):
        A.read_vr_count(tmp_path, "fednova-vr")
    record["summary"]["counts"][0]["inside"] = 47
    path.write_text(json.dumps(record))
    with pytest.raises(ValueError, match="radius_bounds"):
        A.read_vr_count(tmp_path, "fednova-vr")
    with pytest.raises(ValueError, match="not found|No such file"):
        A.read_vr_count(tmp_path / "missing", "scaffold")
    with pytest.raises(ValueError, match="name"):
        A.read_vr_count(tmp_path, "fedavg")


@pytest.mark.parametrize("algorithm", ["scaffold", "fednova-vr"])
def test_count_outside_with_deflation_points(algorithm):
    """Deflation changes how the phase is followed, never the count: the eigenvalues themselves,
    perturbed ones, random points inside and outside the circle all give the dense count."""
    rng = np.random.default_rng(7 if algorithm == "scaffold" else 8)
    q = random_quadratic(5, 30, seed=4, eig_range=(1e-6, 3.0), p=rng.dirichlet(np.ones(5)))
    steps = [2, 7, 40, 5, 120]
    M, _ = T.quadratic_vr_round_map(q.H, q.e, q.p, steps, 0.2, algorithm)
    every = np.linalg.eigvals(M)
    slow = every[np.argsort(np.abs(every - 1))[:40]]
    points = {"exact": slow, "perturbed": slow * (1 + 1e-4 * rng.standard_normal(40)),
              "random": rng.uniform(-1.5, 1.5, 30) + 1j * rng.uniform(-1.5, 1.5, 30)}
    top = np.sort(np.abs(every))[::-1]
    for radius in [*_between_moduli(every, count=3), top[0] + 1e-3 * (1 - top[0])]:
        expected = int(np.sum(np.abs(every) > radius))
        plain = T.quadratic_vr_count_outside(q.H, q.p, steps, 0.2, algorithm, radius)
        for label, mu in points.items():
            mu = mu[np.abs(np.abs(mu) - radius) > 1e-6]   # none on the circle
            c = T.quadratic_vr_count_outside(q.H, q.p, steps, 0.2, algorithm, radius, deflate=mu)
            assert c.outside == plain.outside == expected, (label, radius, c, plain.outside, expected)
    with pytest.raises(ValueError, match="deflate"):
        T.quadratic_vr_count_outside(q.H, q.p, steps, 0.2, algorithm, 0.5, deflate=[0.5j])
    with pytest.raises(ValueError, match="deflate"):
        T.quadratic_vr_count_outside(q.H, q.p, steps, 0.2, algorithm, 0.5, deflate=[np.nan])


def test_linearised_count_deflates_gradient_descent(small_logistic):
    problem, opt = small_logistic
    every = np.linalg.eigvals(A.linearised_vr_matrix(problem, opt, "fednova-vr", 1.0, [2, 4, 40]))
    radius = float(np.sort(np.abs(every))[-1]) * (1 + 1e-6)
    counts = [A.linearised_vr_count_outside(problem, opt, "fednova-vr", 1.0, [2, 4, 40], radius, deflate=d)
              for d in ("gradient-descent", None)]
    assert [c.outside for c in counts] == [0, 0]
    with pytest.raises(ValueError, match="deflate"):
        A.linearised_vr_count_outside(problem, opt, "fednova-vr", 1.0, [2, 4, 40], radius, deflate="newton")


def test_vr_spectrum_script_counts_part_5s_controls():
    """--steps picks part 5's local steps on the chapter's problem (the counts themselves take minutes: they are
    data/results/linearised/scaffold-{equal,capped}-count.json, which chapter 10 checks against its own lambda_1)."""
    script = runpy.run_path(str(SCRIPTS / "vr_spectrum.py"), run_name="vr_spectrum")
    for steps, cap, big_steps, described in [("e2", 40, 582, "E = 2, batch 20"), ("equal", 40, 12, "median"),
                                             ("capped", 40, 40, "capped at 40 steps"),
                                             ("capped", 7, 7, "capped at 7 steps")]:
        problem, local_steps, lr, setting = script["chapter_problem"](0.02, steps, cap)
        assert lr == 0.02 and local_steps[int(np.argmax(problem.p))] == big_steps and described in setting, steps
        assert np.array_equal(local_steps, A.vr_step_settings(problem.num_samples, problem.p, cap=cap)[steps])


@pytest.mark.parametrize("args", [["--slack", "0"], ["--slack", "1.5"], ["--radius", "-1"], ["--radius", "nan"],
                                  ["--method", "dense", "--radius", "1.0"], ["--lr", "0"], ["--steps", "equal"],
                                  ["--cap", "5"], ["--steps", "capped", "--cap", "0"], ["--steps", "median"],
                                  ["--method", "dense", "--steps", "capped"]])
def test_vr_spectrum_script_refuses_bad_arguments(args, tmp_path, capsys):
    assert _run_script("vr_spectrum.py", "--smoke", *args, "--out", str(tmp_path)) == 2
    assert "error:" in capsys.readouterr().err and not any(tmp_path.iterdir())


@pytest.mark.parametrize("seed,mu,radius", [(39, 0.3, 0.4145229815), (58, 0.0, 0.4882150515)])
def test_count_outside_near_a_cluster_on_the_circle(seed, mu, radius):
    """Two of the rare cases where steps of up to 0.8 rad skip a whole turn (scripts/count_outside_accuracy.py
    found them): eigenvalues 0.002-0.005 from the circle, 0.06 apart in angle. The default phase step counts right."""
    rng = np.random.default_rng(seed)
    q = random_quadratic(4, 5, seed=int(rng.integers(100)), p=rng.dirichlet(np.ones(4)))
    steps = rng.integers(1, 30, size=4)
    M, _ = T.quadratic_vr_round_map(q.H, q.e, q.p, steps, 0.04, "scaffold", mu=mu)
    expected = int(np.sum(np.abs(np.linalg.eigvals(M)) > radius))
    assert T.quadratic_vr_count_outside(q.H, q.p, steps, 0.04, "scaffold", radius, mu=mu).outside == expected


def test_count_outside_accuracy_script(capsys):
    import json

    assert _run_script("count_outside_accuracy.py", "--seeds", "3", "4") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["counts"] == 64 and report["wrong"]["0.4"] == 0 and report["wrong"]["0.2"] == 0
    assert set(report["wrong_although_agreeing"]) == {"0.8/0.4", "0.4/0.2"}

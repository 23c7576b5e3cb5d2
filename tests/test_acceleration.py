"""§5 combinations on quadratics: the closed-form round maps of fedlib.theory
(variance reduction, local momentum, server momentum) against the library's own rounds,
on random problems, states and local steps; the fixed points they imply; measured_rate's inputs, and those of
iterate_round_maps, initial_state, logistic_losses and perturbation_growth; read_vr_count / read_vr_spectrum
name a missing field; vr_limit (chapter 10's unequal weights), and that an engine whose correction
averages with 1/m goes to its 1/m point."""
from __future__ import annotations

import numpy as np
import pytest

from fedlib import theory as T
from fedlib.algorithms import make_algorithm
from fedlib.data import synthetic
from fedlib.experiments import acceleration as A
from fedlib.experiments.quadratic import run_quadratic
from fedlib.problems import random_quadratic
from fedlib.problems.logistic import LogisticProblem
from fedlib.sampling import sample_clients
from fedlib.schedules import FixedSteps, RandomSteps
from fedlib.solvers import LocalSolver, sgd
from fedlib.variance import ControlVariates


def _random_setting(seed, m=4, d=3):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(m))
    prob = random_quadratic(m, d, seed=seed, p=p)
    steps = rng.integers(1, 8, size=m)
    return prob, steps, rng


def _one_round(algo, prob, x, c, steps, lr):
    """One round of the library's algorithm from the state (x, c), written out as
    run_sequential's loop (so that the variates can start anywhere)."""
    state = algo.init(x, prob.num_clients)
    if c is not None:
        kind = state.variates.kind
        mean = prob.p @ c if kind == "scaffold" else np.zeros(prob.dim)
        state = state._replace(variates=ControlVariates(c.copy(), mean, kind))
    part = sample_clients("full", prob.p, None, 0, 0)
    updates = []
    for i in part.clients:
        s = algo.client_init(state, int(i))
        for _ in range(int(steps[i])):
            s = algo.solver.update(s, prob.grad(s.params, int(i)))
        updates.append(algo.client_final(state, int(i), s))
    new, _ = algo.apply(state, part, updates, lr, prob.p)
    return new


SOLVERS = {
    "sgd": dict(momentum=0.0, mu=0.0),
    "prox": dict(momentum=0.0, mu=0.7),
    "momentum": dict(momentum=0.9, mu=0.0),
    "momentum-prox": dict(momentum=0.6, mu=0.4),
}


@pytest.mark.parametrize("algorithm", T.VR_ALGORITHMS)
@pytest.mark.parametrize("solver", list(SOLVERS))
@pytest.mark.parametrize("seed", [0, 1])
def test_vr_round_map_equals_the_library_round_from_a_random_state(algorithm, solver, seed):
    prob, steps, rng = _random_setting(seed)
    lr = 0.07
    kw = SOLVERS[solver]
    algo = make_algorithm(algorithm, LocalSolver(lr, momentum=kw["momentum"], mu=kw["mu"]))
    x = rng.standard_normal(prob.dim)
    c = rng.standard_normal((prob.num_clients, prob.dim))
    new = _one_round(algo, prob, x, c, steps, lr)
    M, b = T.quadratic_vr_round_map(prob.H, prob.e, prob.p, steps, lr, algorithm, mu=kw["mu"], momentum=kw["momentum"])
    s = M @ np.concatenate([x, c.ravel()]) + b
    np.testing.assert_allclose(s[:prob.dim], new.params, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(s[prob.dim:].reshape(c.shape), new.variates.client, rtol=1e-12, atol=1e-11)


@pytest.mark.parametrize("algorithm", ["fedavg", "fedprox", "fednova"])
@pytest.mark.parametrize("rho", [0.5, 0.9])
def test_round_map_with_local_momentum_equals_the_library_round(algorithm, rho):
    prob, steps, rng = _random_setting(3)
    lr, mu = 0.05, (0.8 if algorithm == "fedprox" else 0.0)
    algo = make_algorithm(algorithm, LocalSolver(lr, momentum=rho, mu=mu))
    x = rng.standard_normal(prob.dim)
    new = _one_round(algo, prob, x, None, steps, lr)
    M, b = T.quadratic_round_map(prob.H, prob.e, prob.p, steps, lr, algorithm, mu=mu, momentum=rho)
    np.testing.assert_allclose(M @ x + b, new.params, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("rho,mu", [(0.0, 0.0), (0.0, 0.5), (0.9, 0.0), (0.7, 0.3)])
def test_local_operator_with_momentum_is_the_solvers_displacement(rho, mu):
    prob, _, rng = _random_setting(5, m=1, d=4)
    lr, tau = 0.1, 7
    x0 = rng.standard_normal(4)
    corr = rng.standard_normal(4)   # a constant added to every gradient (a VR correction)
    final = LocalSolver(lr, momentum=rho, mu=mu).run(x0, lambda x, k: prob.grad(x, 0), tau, corr)
    K = T.quadratic_local_operator(prob.H[0], tau, lr, mu, momentum=rho)
    np.testing.assert_allclose(final.params - x0, -K @ (prob.grad(x0, 0) + corr), rtol=1e-12, atol=1e-13)


def test_local_operator_momentum_zero_is_the_papers_sum():
    prob, _, _ = _random_setting(6, m=1, d=3)
    # the momentum recursion with rho -> 0 and the closed-form sum agree
    a = T.quadratic_local_operator(prob.H[0], 9, 0.1, 0.2, momentum=0.0)
    b = T.quadratic_local_operator(prob.H[0], 9, 0.1, 0.2, momentum=1e-14)
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("algorithm", ["scaffold", "fednova-vr"])
@pytest.mark.parametrize("solver", list(SOLVERS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_vr_fixed_point_is_the_optimum_with_the_local_gradients(algorithm, solver, seed):
    prob, steps, _ = _random_setting(seed)
    kw = SOLVERS[solver]
    x, c = T.quadratic_vr_fixed_point(prob.H, prob.e, prob.p, steps, 0.05, algorithm, **kw)
    x_star = prob.optimum()
    np.testing.assert_allclose(x, x_star, rtol=1e-9, atol=1e-10)
    grads = np.array([prob.grad(x_star, i) for i in range(prob.num_clients)])
    np.testing.assert_allclose(c, grads, rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("algorithm", ["scaffold", "fednova-vr"])
@pytest.mark.parametrize("solver", list(SOLVERS))
@pytest.mark.parametrize("lr", [1e-4, 1e-7, 1e-10])
def test_vr_fixed_point_is_the_optimum_to_rounding_at_a_small_lr(algorithm, solver, lr):
    """The limit is (x*, grad F_i(x*)) for every lr: rel 1e-14 of the largest entry (measured <= 1.7e-15 here).
    Solving with I - M, whose x-block I - (I - sum_i c_i K_i H_i) cancels, lost about log10(1/(lr tau)) digits:
    up to 1.0e-7 relative off at lr = 1e-10 over these cases (23 of the 24 fail before)."""
    prob, steps, _ = _random_setting(5)
    x, c = T.quadratic_vr_fixed_point(prob.H, prob.e, prob.p, steps, lr, algorithm, **SOLVERS[solver])
    x_star = prob.optimum()
    grads = np.array([prob.grad(x_star, i) for i in range(prob.num_clients)])
    assert np.max(np.abs(x - x_star)) <= 1e-14 * np.max(np.abs(x_star))
    assert np.max(np.abs(c - grads)) <= 1e-14 * np.max(np.abs(grads))


@pytest.mark.parametrize("algorithm", ["scaffold", "fednova-vr"])
def test_vr_round_map_forgets_a_common_shift_of_the_variates(algorithm):
    prob, steps, rng = _random_setting(4)
    M, _ = T.quadratic_vr_round_map(prob.H, prob.e, prob.p, steps, 0.05, algorithm)
    v = rng.standard_normal(prob.dim)
    shift = np.concatenate([np.zeros(prob.dim), np.tile(v, prob.num_clients)])
    np.testing.assert_allclose(M @ shift, 0.0, atol=1e-12)


def test_vrlsgd_conserves_the_tau_weighted_variates_and_has_no_unique_limit():
    prob, steps, _ = _random_setting(7)
    M, b = T.quadratic_vr_round_map(prob.H, prob.e, prob.p, steps, 0.05, "vrlsgd")
    d = prob.dim
    w = np.concatenate([np.zeros((d, d))] + [prob.p[i] * steps[i] * np.eye(d) for i in range(prob.num_clients)],
                       axis=1)   # s -> sum_i p_i tau_i c_i
    np.testing.assert_allclose(w @ M, w, atol=1e-12)
    np.testing.assert_allclose(w @ b, 0.0, atol=1e-12)
    assert T.spectral_radius(M) == pytest.approx(1.0, abs=1e-9)
    with pytest.raises(ValueError, match="initial variates"):
        T.quadratic_vr_fixed_point(prob.H, prob.e, prob.p, steps, 0.05, "vrlsgd")


@pytest.mark.parametrize("beta", [0.0, 0.3, 0.9])
def test_server_momentum_radius_is_the_heavy_ball_roots_of_each_eigenvalue(beta):
    prob, steps, _ = _random_setting(8)
    M, b = T.quadratic_round_map(prob.H, prob.e, prob.p, steps, 0.05, "fedavg")
    mus = np.linalg.eigvals(M)   # FedAvg's M is symmetric: real eigenvalues
    assert np.allclose(mus.imag, 0)
    # x_{t+1} = (M + beta I) x_t - beta x_{t-1}: r^2 - (mu + beta) r + beta = 0 per eigenvalue
    expected = max(np.max(np.abs(np.roots([1.0, -(mu + beta), beta]))) for mu in mus.real)
    M2, b2 = T.server_momentum_round_map(M, b, beta)
    assert T.spectral_radius(M2) == pytest.approx(expected, rel=1e-9)
    # same limit, with x_{t-1} = x_t
    s = np.linalg.solve(np.eye(M2.shape[0]) - M2, b2)
    x = T.quadratic_fixed_point(prob.H, prob.e, prob.p, steps, 0.05, "fedavg")
    np.testing.assert_allclose(s[:prob.dim], x, rtol=1e-10)
    np.testing.assert_allclose(s[prob.dim:], x, rtol=1e-10)


@pytest.mark.parametrize("name", list(A.VARIANTS))
@pytest.mark.parametrize("random_steps", [False, True])
def test_every_variant_runs_as_its_closed_form(name, random_steps):
    prob, steps, _ = _random_setting(9, m=5, d=3)
    schedule = RandomSteps(5, 1, 6, seed=2) if random_steps else FixedSteps(steps)
    run = A.run_variant(prob, name, 0.04, schedule, 40, local_momentum=0.8, server_beta=0.6)
    closed = A.iterate_round_maps(prob, name, 0.04, schedule, 40, local_momentum=0.8, server_beta=0.6)
    assert not run.diverged
    np.testing.assert_allclose(run.distances, closed, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["scaffold", "fednova-vr", "fednova-vr-momentum"])
def test_vr_variants_reach_the_optimum_even_with_random_steps(name):
    prob, _, _ = _random_setting(10, m=5, d=3)
    run = A.run_variant(prob, name, 0.05, RandomSteps(5, 1, 8, seed=1), 400)
    assert run.distances[-1] < 1e-11 * np.linalg.norm(prob.optimum())


@pytest.mark.parametrize("plain,accelerated", [("fedavg", "fedavg-servermom"), ("fednova", "fednova-servermom"),
                                               ("fedavg-momentum", "fedavg-hybrid"),
                                               ("fednova-momentum", "fednova-hybrid")])
def test_server_momentum_does_not_move_the_limit(plain, accelerated):
    prob, steps, _ = _random_setting(11)
    a = A.variant_limit(prob, plain, 0.03, steps, local_momentum=0.7)
    for beta in (0.2, 0.5, 0.8):
        b = A.variant_limit(prob, accelerated, 0.03, steps, local_momentum=0.7, server_beta=beta)
        np.testing.assert_allclose(b, a, rtol=1e-10)


def test_variant_limits_of_plain_variants_are_the_theory_fixed_points():
    prob, steps, _ = _random_setting(12)
    for name in ("fedavg", "fednova"):
        np.testing.assert_allclose(A.variant_limit(prob, name, 0.05, steps),
                                   T.quadratic_fixed_point(prob.H, prob.e, prob.p, steps, 0.05, name), rtol=1e-12)
    x = A.variant_limit(prob, "fednova-momentum", 0.05, steps, local_momentum=0.5)
    np.testing.assert_allclose(x, T.quadratic_fixed_point(prob.H, prob.e, prob.p, steps, 0.05, "fednova",
                                                          momentum=0.5), rtol=1e-12)


@pytest.mark.parametrize("name", [n for n in A.VARIANTS if n != "vrlsgd"])
def test_variant_limit_at_a_small_lr_keeps_its_digits(name):
    """At lr = 1e-8 every variant's limit equals quadratic_fixed_point's (exact to rounding at any lr,
    test_theory.py::test_fixed_point_is_exact_to_rounding_at_any_small_lr) with its local momentum, or x* for the
    VR variants, to 1e-14 relative (measured: the same bits, and <= 6.8e-16 for VR). Solving with I - M (server
    momentum's augmented map included) cancelled the x-block I - (I - sum_i c_i K_i H_i): 1.6e-9 relative off for
    FedAvg, 4.5e-9 with server momentum, 1.1e-9 for SCAFFOLD (all 11 fail before)."""
    prob, steps, _ = _random_setting(5)
    v = A.VARIANTS[name]
    x = A.variant_limit(prob, name, 1e-8, steps, local_momentum=0.9, server_beta=0.9)
    if v.algorithm in T.VR_ALGORITHMS:
        expected = prob.optimum()
    else:
        expected = T.quadratic_fixed_point(prob.H, prob.e, prob.p, steps, 1e-8, v.algorithm,
                                           momentum=0.9 if v.local_momentum else 0.0)
    assert np.max(np.abs(x - expected)) <= 1e-14 * np.max(np.abs(expected))


def test_initial_state_layout():
    prob, _, _ = _random_setting(13, m=3, d=2)
    x0 = np.array([1.0, -2.0])
    assert A.initial_state(prob, "fedavg", x0).tolist() == [1.0, -2.0]
    assert A.initial_state(prob, "fednova-servermom", x0).tolist() == [1.0, -2.0, 1.0, -2.0]
    s = A.initial_state(prob, "scaffold", x0)
    assert s.shape == (2 + 6,) and np.all(s[2:] == 0)


def test_measured_rate_hand():
    d = 3.0 * 0.5 ** np.arange(10)
    assert A.measured_rate(d, 2) == pytest.approx(0.5)
    assert A.measured_rate(d, 0, 5) == pytest.approx(0.5)


@pytest.mark.parametrize("call,match", [
    (lambda p: A.make_variant("nope", 0.1), r"^name must be one of"),  # was 'variant', no parameter of it
    (lambda p: A.rate_check(p, "fedavg", 0.05, [1, 2, 3], 50, floor=1.0), r"^floor must lie in \(0, 1\), got 1.0"),
    (lambda p: A.rate_check(p, "fedavg", 0.05, [1, 2, 3], 50, floor=0.0), r"^floor must lie in \(0, 1\), got 0.0"),
    (lambda p: A.rate_check(p, "fedavg", 0.05, [1, 2, 3], 50, floor=True), r"^floor must lie in \(0, 1\), got True"),
    (lambda p: A.initial_state(p, "bogus"), r"^name must be one of"),
    (lambda p: A.variant_limit(p, "vrlsgd", 0.1, [1, 2, 3]), r"^name: VRLSGD"),
    (lambda p: A.limit_distances(p, ["fedavg", "bogus"], [0.1], [1, 2, 3]), r"^names\[1\] must be one of"),
    (lambda p: A.limit_distances(p, ["vrlsgd"], [0.1], [1, 2, 3]), r"^names\[0\]: VRLSGD"),
    (lambda p: A.make_variant("fedavg", 0.1, server_beta=1.0), "server_beta"),
    (lambda p: A.make_variant("fedavg", 0.1, local_momentum=-0.1), "local_momentum"),
    (lambda p: A.variant_limit(p, "vrlsgd", 0.1, [1, 2, 3]), "VRLSGD"),
    (lambda p: A.variant_limit(p, "fedavg", 5.0, [1, 2, 3]), "do not converge"),
    (lambda p: A.initial_state(p, "fedavg", [1.0]), "x0"),
    (lambda p: A.measured_rate([1.0, 0.5], 1), "start"),
    (lambda p: A.measured_rate([1.0, 0.0, 0.0], 0), "finite and > 0"),
    (lambda p: T.server_momentum_round_map(np.eye(2), np.zeros(2), 1.0), "beta"),
    (lambda p: T.server_momentum_round_map(np.eye(2), np.zeros(2), 0.5, dim=3), "dim"),
    (lambda p: T.server_momentum_round_map(np.eye(2), np.zeros(3), 0.5), r"^b\b"),
    (lambda p: T.server_momentum_round_map(np.ones((2, 3)), np.zeros(2), 0.5), r"^M must be square, got shape \(2, 3\)$"),
    (lambda p: T.quadratic_vr_round_map(p.H, p.e, p.p, [1, 2, 3], 0.1, "fedavg"), "algorithm"),
    (lambda p: T.quadratic_vr_round_map(p.H, p.e, p.p, [1, 2, 3], 0.1, "scaffold", tau_eff=2.0), "tau_eff"),
    (lambda p: T.quadratic_local_operator(p.H[0], 3, 0.1, momentum=1.0), "momentum"),
    (lambda p: T.spectral_radius(np.ones((2, 3))), "square"),
    (lambda p: run_quadratic(p, "x", 0.2, FixedSteps([1, 1, 1]), 2, algorithm=make_algorithm("fedavg", sgd(0.1))),
     "lr"),
    (lambda p: run_quadratic(p, "x", 0.1, FixedSteps([1, 1, 1]), 2, algorithm="fedavg"), "FederatedAlgorithm"),
])
def test_bad_inputs(call, match):
    prob = random_quadratic(3, 2, seed=0)
    with pytest.raises(ValueError, match=match):
        call(prob)


def test_rate_check_and_comparison_helpers():
    prob, steps, _ = _random_setting(14, m=4, d=3)
    rc = A.rate_check(prob, "fednova-servermom", 0.05, steps, 400, server_beta=0.5)
    assert rc.measured == pytest.approx(rc.radius, rel=0.03)
    assert rc.limit_distance == pytest.approx(np.linalg.norm(A.variant_limit(prob, "fednova", 0.05, steps)
                                                             - prob.optimum()), rel=1e-10)
    cmp = A.compare_with_closed_form(prob, "scaffold", 0.05, FixedSteps(steps), 30)
    assert cmp.max_difference < 1e-12 and cmp.closed.size == 31
    # the last models themselves: the run's x_30 against the round map iterated by hand from (0, zero variates)
    rm, state = A.variant_round_map(prob, "scaffold", 0.05, steps), A.initial_state(prob, "scaffold")
    for _ in range(30):
        state = rm.M @ state + rm.b
    x_star = prob.optimum()
    by_hand = np.linalg.norm(cmp.run.params - state[:3]) / max(np.linalg.norm(x_star), np.linalg.norm(state[:3] - x_star))
    assert cmp.final_relative_difference == pytest.approx(by_hand, rel=1e-6, abs=1e-15)
    assert cmp.final_relative_difference < 1e-12
    # server momentum: the run ends at the limit of the map without it, to rounding (closest), not only at its distance
    assert rc.closest < 1e-11
    lims = A.limit_distances(prob, ["fednova", "fednova-vr"], [0.01, 0.02], steps)
    assert lims["fednova"][1] > 1.5 * lims["fednova"][0] and np.all(lims["fednova-vr"] < 1e-10)


def test_rate_check_closest_is_the_runs_own_distance_to_the_limit(monkeypatch):
    """closest = min_t ||x_t - limit|| / ||x_0 - limit|| from the run: a limit 1e-3 off the true one in every
    coordinate (a map whose fixed point moved, say) leaves the run's closest near sqrt(3) 1e-3 / ||x_0 - limit||
    (a little below: the run may pass nearer on its way), far from rounding level."""
    prob, steps, _ = _random_setting(14, m=4, d=3)
    true = A.rate_check(prob, "fednova-servermom", 0.05, steps, 400, server_beta=0.5)
    assert true.closest < 1e-11
    fixed = A._fixed_state_and_radius

    def shifted(*args, **kwargs):
        state, radius, rm = fixed(*args, **kwargs)
        return state + 1e-3, radius, rm
    monkeypatch.setattr(A, "_fixed_state_and_radius", shifted)
    off = A.rate_check(prob, "fednova-servermom", 0.05, steps, 400, server_beta=0.5)
    x0_gap = np.linalg.norm(A.variant_limit(prob, "fednova", 0.05, steps) + 1e-3)  # x_0 = 0
    assert 0.5 * 1e-3 * np.sqrt(3) / x0_gap < off.closest <= 1e-3 * np.sqrt(3) / x0_gap * (1 + 1e-6)


def _two_modes():
    """One client, H = diag(1, 2), e = (1, 1): x* = (1, 1/2); FedAvg with lr 0.1 and 3 steps has the round map
    diag(0.9^3, 0.8^3) = diag(0.729, 0.512) towards x* (one client: no drift), and x_0 = 0 starts at error -x*."""
    from fedlib.problems.quadratic import QuadraticProblem

    return QuadraticProblem(H=np.array([np.diag([1.0, 2.0])]), e=np.array([[1.0, 1.0]]), p=np.array([1.0]))


@pytest.mark.parametrize("name,beta", [("fedavg", 0.0), ("fedavg-servermom", 0.5), ("fednova-servermom", 0.9)])
def test_rate_check_predicted_and_asymptotic_by_hand(name, beta):
    """Each mode mu in (0.729, 0.512) of _two_modes with server momentum beta is the heavy ball
    e_{t+1} = (mu + beta) e_t - beta e_{t-1}, e_{-1} = e_0 (empty buffer); its roots r^2 - (mu + beta) r + beta = 0
    are complex for beta = 0.5 and 0.9 (|r| = sqrt(beta) for both modes: they beat), so the run's fitted rate is off
    the radius while the closed form's contraction on the same window (predicted) is the run's, and over 2^30 rounds
    (asymptotic) the radius."""
    prob = _two_modes()
    rc = A.rate_check(prob, name, 0.1, [3], 2000, server_beta=beta)
    mus, e0 = np.array([0.729, 0.512]), np.array([-1.0, -0.5])
    radius = 0.729 if beta == 0 else np.sqrt(beta)
    assert rc.radius == pytest.approx(radius, rel=1e-12)
    assert rc.asymptotic == pytest.approx(radius, rel=1e-9)
    errors, prev, e = [e0], e0, e0
    for _ in range(rc.window[1]):
        prev, e = e, (mus + beta) * e - beta * prev
        errors.append(e)
    hand = A.measured_rate(np.linalg.norm(errors, axis=1), *rc.window)
    assert rc.predicted == pytest.approx(hand, rel=1e-12)
    assert rc.measured == pytest.approx(rc.predicted, rel=1e-5)
    if name == "fedavg-servermom":  # the beats: the window's fit is off the radius by more than the run's rounding
        assert abs(rc.measured / rc.radius - 1) > 1e-3


def test_rate_check_predicted_is_the_closed_form_iteration():
    """On random instances, with a floor (1e-6) far above rounding, the run, the closed-form iteration
    (iterate_round_maps towards the limit) and predicted agree on the window; asymptotic is the radius."""
    for seed in range(3):
        prob, steps, _ = _random_setting(40 + seed, m=5, d=4)
        for name, coefficients in (("fednova", {}), ("scaffold", {}), ("fednova-hybrid", dict(server_beta=0.6))):
            rc = A.rate_check(prob, name, 0.05, steps, 3000, floor=1e-6, **coefficients)
            limit = A.variant_limit(prob, name, 0.05, steps, **coefficients)
            closed = A.iterate_round_maps(prob, name, 0.05, FixedSteps(steps), rc.window[1] - 1, reference=limit,
                                          **coefficients)
            assert rc.predicted == pytest.approx(A.measured_rate(closed, *rc.window), rel=1e-9), (seed, name)
            assert rc.measured == pytest.approx(rc.predicted, rel=1e-7), (seed, name)
            assert rc.asymptotic == pytest.approx(rc.radius, rel=1e-6), (seed, name)


def test_logistic_losses_equal_steps_make_scaffold_and_fednova_vr_one_algorithm():
    from fedlib.data.synthetic import synthetic
    from fedlib.problems.logistic import LogisticProblem

    prob = LogisticProblem(synthetic(1.0, 1.0, num_clients=5, dim=6, num_classes=3, seed=0,
                                     num_samples=[30, 40, 20, 50, 25]))
    equal = A.logistic_losses(prob, "scaffold", 0.02, FixedSteps([3] * 5), [0, 1], 4)
    same = A.logistic_losses(prob, "fednova-vr", 0.02, FixedSteps([3] * 5), [0, 1], 4)
    assert equal.shape == (2, 5) and np.all(np.isfinite(equal))
    np.testing.assert_allclose(same, equal, rtol=1e-12)   # tau_eff p_i / tau_i = p_i: the same rounds
    hetero = A.logistic_losses(prob, "fednova-vr", 0.02, FixedSteps([1, 2, 3, 4, 9]), [0], 4)
    assert not np.allclose(hetero[0], A.logistic_losses(prob, "scaffold", 0.02, FixedSteps([1, 2, 3, 4, 9]), [0], 4)[0])


def test_closed_form_iteration_stops_where_the_run_stops():
    prob = random_quadratic(16, 20, seed=0)   # chapter 10's instance: VRLSGD diverges with random steps
    cmp = A.compare_with_closed_form(prob, "vrlsgd", 0.02, RandomSteps(16, 1, 10, seed=0), 200, stop_above=1e3)
    assert cmp.run.diverged and cmp.closed.size == cmp.run.distances.size
    assert cmp.closed[-1] > 1e3 and np.all(cmp.closed[:-1] <= 1e3) and cmp.max_relative_difference < 1e-9



def test_comparing_a_diverging_run_with_its_closed_form_is_nan_and_says_nothing_else(capfd):
    """FedAvg at lr 50 with 20 local steps diverges: distances 1.36, 2.1e39, 2.2e78, 2.4e117, 2.6e156 .. 3.2e273, and
    the run stops at round 7's FloatingPointError (diverged_round 8) while the closed form goes on, its distances
    finite to round 7 as the run's and inf/NaN after (its iterate overflows). Over the 8 rounds the run completed
    the two agree to 7.9e-15 relative (max_difference 2.5e259, at 3.2e273). Before _scaled_norm, np.linalg.norm's
    sqrt(x.x) overflowed past 1.3e154: both were inf from round 4 on and the comparison NaN (inf - inf). A NaN
    comparison is still reached where both distances pass the float64 maximum: x* = (1.5e308, 1.5e308) is 2.1e308
    from the start, inf for the run and the closed form. Neither says anything: no RuntimeWarning (as errors here)
    and nothing printed. Before, iterate_round_maps had no errstate: numpy's 'overflow encountered in dot' and
    'overflow encountered in matmul' warnings on a diverging map, unlike run_variant's silent inf (fixed with this
    test); and no test reached compare_with_closed_form's own errstate around inf - inf (set to "print", mutant
    EP10 of the negative-assertion pass, it passed the suite)."""
    import warnings

    from fedlib.problems.quadratic import QuadraticProblem

    prob = random_quadratic(2, 2, seed=0)
    far = QuadraticProblem(np.stack([np.eye(2)] * 2), np.full((2, 2), 1.5e308), np.array([0.5, 0.5]))  # x* = e
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cmp = A.compare_with_closed_form(prob, "fedavg", 50.0, FixedSteps([20, 20]), 60)
        overflowing = A.compare_with_closed_form(far, "fedavg", 0.5, FixedSteps([1, 1]), 3)
    assert capfd.readouterr() == ("", "")
    assert cmp.run.diverged and cmp.run.diverged_round == 8 and cmp.run.distances.size == 8
    assert cmp.closed.size == 61 and np.all(np.isfinite(cmp.closed[:8])) and not np.any(np.isfinite(cmp.closed[8:]))
    np.testing.assert_allclose(cmp.run.distances, cmp.closed[:8], rtol=1e-12)
    assert cmp.closed[3] > 1e117 and cmp.closed[7] > 1e273
    assert 0 < cmp.max_difference < np.inf and cmp.max_relative_difference < 1e-12
    assert cmp.final_relative_difference < 1e-12  # the run's last model (round 7) against the closed form's round 7
    assert overflowing.run.distances[0] == overflowing.closed[0] == np.inf and not overflowing.run.diverged
    assert np.isnan(overflowing.max_difference) and np.isnan(overflowing.max_relative_difference)


def test_probe_script_runs(tmp_path):
    """scripts/probe_scaffold_synthetic.py (the numbers behind notes on chapter 10, part 5), smoke-run."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "scripts" / "probe_scaffold_synthetic.py"
    out = subprocess.run([sys.executable, str(script), "--only", "steps", "quadratic", "momentum", "--rounds", "1",
                          "--seeds", "0"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "largest client capped at 40" in out.stdout and "spectral radius" in out.stdout
    assert "fednova-hybrid" in out.stdout


def test_rate_check_names_floor_and_a_zero_radius():
    """floor outside (0, 1) gave 'math domain error' or an unrelated start/stop message; a round map of
    spectral radius 0 (H_i = I, lr 1, one step: one round lands on the limit) has no rate to measure."""
    from fedlib.problems.quadratic import QuadraticProblem

    prob = random_quadratic(3, 2, seed=0)
    for floor in (0.0, -1.0, 2.0, float("nan")):
        with pytest.raises(ValueError, match="floor must lie in"):
            A.rate_check(prob, "fednova", 0.05, [1, 3, 6], 200, floor=floor)
    one = QuadraticProblem(np.array([np.eye(2), np.eye(2)]), np.eye(2), np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match="spectral radius 0"):
        A.rate_check(one, "fedavg", 1.0, [1, 1], 50)


def test_styles_do_not_borrow_another_familys_colour():
    """'One colour per algorithm family in every figure': a style drawn in a family's colour belongs to that
    family (FedNova-VR was drawn in FedProx's orange)."""
    from fedlib.plotting import ALGORITHM_COLORS, algorithm_color

    for name, style in A.STYLES.items():
        if style["color"] in ALGORITHM_COLORS.values():
            assert style["color"] == algorithm_color(name), (name, style)


def test_limit_distances_to_draw_puts_rounding_noise_at_the_floor():
    drawn = A.limit_distances_to_draw({"vr": [3e-14, 0.0, 5e-10], "plain": np.array([0.02, 1.5])}, 4.0)
    np.testing.assert_array_equal(drawn["vr"], [4e-10, 4e-10, 5e-10])   # floor = 1e-10 * ||x*|| = 4e-10
    np.testing.assert_array_equal(drawn["plain"], [0.02, 1.5])          # above the floor: unchanged
    assert A.limit_distances_to_draw({"a": [1e-3]}, 1.0, relative_floor=0.01)["a"][0] == 0.01
    for kwargs, match in [(dict(scale=0.0), "scale"), (dict(scale=np.inf), "scale"),
                          (dict(relative_floor=0.0), "relative_floor"), (dict(relative_floor=1.0), "relative_floor")]:
        with pytest.raises(ValueError, match=match):
            A.limit_distances_to_draw({"a": [1.0]}, **{"scale": 1.0, **kwargs})
    with pytest.raises(ValueError, match=r"distances\['a'\] must be >= 0"):
        A.limit_distances_to_draw({"a": [-1e-3]}, 1.0)
    with pytest.raises(ValueError, match="NaN"):
        A.limit_distances_to_draw({"a": [np.nan]}, 1.0)


_CH10_LIMIT_FIGURE_DATA = """
import numpy as np
from fedlib.experiments import acceleration as A
from fedlib.problems import random_quadratic
from fedlib.rng import generator
problem = random_quadratic(16, 20, seed=0)
steps = generator(0, "fixed_local_steps").integers(1, 11, size=16)
lrs = np.geomspace(1e-3, 0.05, 8)
names = ["fedavg", "fednova", "fednova-momentum", "scaffold", "fednova-vr", "fednova-vr-momentum"]
lims = A.limit_distances(problem, names, lrs, steps, local_momentum=0.9, server_beta=0.9)
drawn = A.limit_distances_to_draw(lims, np.linalg.norm(problem.optimum()))
print({n: drawn[n].tolist() for n in names})
"""


def test_chapter10_limit_figure_data_does_not_depend_on_blas_threads():
    """Chapter 10's ch10_limit_vs_lr (seed 0, its parameters) draws the same numbers with one or two
    BLAS threads. Drawn as np.maximum(lims, 1e-16), the VR variants' rounding noise (~3e-14) did
    not: FedNova-VR + momentum at eta = 0.0031 was 1.50e-14 with one thread and 1.32e-14 with two,
    and it set the log axis, so `PROFILE=full make book` (one thread per kernel on two cores) and
    a plain papermill run of the chapter wrote different figures. The numbers are compared to 1e-12
    relative, not bit for bit: a BLAS may round a product differently with another thread count (numpy
    1.24's OpenBLAS does, in the last digit of FedAvg's 0.4554173161909684 at one thread, ...686 at two;
    numpy 2's gives the same bits), while the noise this test is for differed by 12%."""
    import ast
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    outputs = []
    for threads in ("1", "2"):
        env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": threads,
               "OPENBLAS_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
        outputs.append(subprocess.run([sys.executable, "-c", _CH10_LIMIT_FIGURE_DATA], env=env, cwd=root,
                                      capture_output=True, text=True, check=True).stdout)
    one, two = (ast.literal_eval(out) for out in outputs)
    assert list(one) == list(two)
    for name in one:
        np.testing.assert_allclose(one[name], two[name], rtol=1e-12, atol=0, err_msg=name)


# --------------------------------------------------------------------------- measured_rate's stop and shape
@pytest.mark.parametrize("distances, stop, match", [([1.0, 0.5, 0.25, 0.125], 2.5, "^stop must be an integer"),
                                                    ([1.0, 0.5, 0.25, 0.125], True, "^stop must be an integer"),
                                                    ([[1.0, 0.5, 0.25]], None, "^distances must be a 1-d sequence")])
def test_measured_rate_names_a_bad_stop_or_shape(distances, stop, match):
    """Was: stop=2.5 failed as 'slice indices must be integers or None', a (1, T) array inside np.polyfit
    ('expected x and y to have same length'), and stop=True read as 1."""
    from fedlib.experiments.acceleration import measured_rate

    with pytest.raises(ValueError, match=match):
        measured_rate(distances, 0, stop)
    assert measured_rate([1.0, 0.5, 0.25, 0.125], 0, np.int64(3)) == pytest.approx(0.5)


@pytest.mark.parametrize("reference", [[0.0], 0.0, [[0.0, 0.0]], [np.nan, 0.0]])
def test_iterate_round_maps_checks_reference_as_run_variant_does(reference):
    """A reference of the wrong shape broadcast silently in the closed-form iteration (distances to
    (0, 0) for [0.0]) while run_variant refused it."""
    prob = random_quadratic(3, 2, seed=0)
    with pytest.raises(ValueError, match="reference"):
        A.iterate_round_maps(prob, "fedavg", 0.05, FixedSteps([1, 3, 6]), 3, reference=reference)
    with pytest.raises(ValueError, match="reference"):
        A.run_variant(prob, "fedavg", 0.05, FixedSteps([1, 3, 6]), 3, reference=reference)


def test_iterate_round_maps_distances_are_exact_past_where_the_squared_norm_overflows():
    """Two clients H_i = I, x* = 0, FedAvg at lr 3 with one step: x -> -2x, so from x0 = (3, -4) the distance is
    exactly 5 * 2^t, a float64 to t = 1021, and run_variant's: all 1022 to the bit, and stop_above = 1e200 ends
    after t = 663 (1.91e200, the first above it), where run_variant stops. Before, np.linalg.norm's sqrt(x.x)
    overflowed once 5 * 2^t > 1.3e154: t = 510..1021 (512 of them) were inf, and stop_above = 1e200 ended at 510."""
    import warnings

    from fedlib.problems.quadratic import QuadraticProblem

    prob = QuadraticProblem(np.stack([np.eye(2)] * 2), np.zeros((2, 2)), np.array([0.5, 0.5]))
    exact = [5.0 * 2.0 ** t for t in range(1022)]
    assert A.iterate_round_maps(prob, "fedavg", 3.0, FixedSteps([1, 1]), 1021, x0=[3.0, -4.0]).tolist() == exact
    stopped = A.iterate_round_maps(prob, "fedavg", 3.0, FixedSteps([1, 1]), 1021, x0=[3.0, -4.0], stop_above=1e200)
    assert stopped.tolist() == exact[:664]
    run = A.run_variant(prob, "fedavg", 3.0, FixedSteps([1, 1]), 1021, x0=[3.0, -4.0], stop_above=1e200)
    assert run.diverged_round == 663 and run.distances.tolist() == exact[:664]
    big = np.array([3e200, -4e200])  # a start past 1.3e154: its distance (5e200 to 2 ulps), no overflow warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        start = A.iterate_round_maps(prob, "fedavg", 3.0, FixedSteps([1, 1]), 0, x0=big)
    assert start.size == 1 and abs(start[0] - 5e200) <= 2 * np.spacing(5e200)


def test_closed_form_start_must_be_finite():
    """x0 with NaN gave a NaN distance series from the closed form (run_variant refused it)."""
    prob = random_quadratic(3, 2, seed=0)
    with pytest.raises(ValueError, match="x0 contains NaN"):
        A.iterate_round_maps(prob, "fedavg", 0.05, FixedSteps([1, 3, 6]), 3, x0=[np.nan, 0.0])
    with pytest.raises(ValueError, match="x0 contains NaN"):
        A.initial_state(prob, "scaffold", [np.inf, 0.0])
    assert A.initial_state(prob, "fednova-servermom", [1, 2]).tolist() == [1.0, 2.0, 1.0, 2.0]


@pytest.fixture(scope="module")
def small_logistic():
    return LogisticProblem(synthetic(1.0, 1.0, num_clients=3, dim=3, num_classes=3, seed=0,
                                     num_samples=[20, 30, 25]), l2=0.1)


@pytest.mark.parametrize("seeds,match", [([0.7], "seeds must be an integer"), ([True], "seeds must be an integer"),
                                         ([], "at least one run seed")])
def test_logistic_losses_seeds_are_integers(small_logistic, seeds, match):
    """seed 0.7 was truncated to seed 0 (the same run, silently); no seeds gave an array of shape (0,)
    instead of (len(seeds), rounds + 1)."""
    with pytest.raises(ValueError, match=match):
        A.logistic_losses(small_logistic, "fedavg", 0.05, FixedSteps([2, 2, 2]), seeds, 2, batch_size=5)


def test_perturbation_growth_seed_is_an_integer(small_logistic):
    """seed=1.9 ran seed 1 silently."""
    opt = A.logistic_optimum(small_logistic)
    with pytest.raises(ValueError, match="seed must be an integer"):
        A.perturbation_growth(small_logistic, opt, "scaffold", 0.1, [2, 3, 1], 4, seed=1.9)
    run = A.perturbation_growth(small_logistic, opt, "scaffold", 0.1, [2, 3, 1], 4, seed=np.int64(1))
    assert run.distances.shape == (5,)


@pytest.mark.parametrize("drop", [("summary", "nearest_one"), ("summary", "radius_bounds"), ("config", "rows")])
def test_read_vr_count_names_a_missing_field(tmp_path, drop):
    """A record without one of its fields raised a KeyError (the docstring promises ValueError)."""
    import json
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "data" / "results" / "linearised" / "scaffold-count.json"
    assert A.read_vr_count(src.parent, "scaffold")["kind"] == "linearised-count"  # the stored one reads
    record = json.loads(src.read_text())
    del record[drop[0]][drop[1]]
    (tmp_path / "scaffold-count.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match="a field is missing"):
        A.read_vr_count(tmp_path, "scaffold")


def test_vr_step_settings_are_chapter_10s():
    """Part 5's three settings on the chapter's Synthetic(1,1): E = 2 from 6 to 582 steps (the 582 the largest
    client's), every client the median 12, and E = 2 with the largest client stopped at the cap."""
    from fedlib.experiments.synthetic import make_problem
    from fedlib.schedules import steps_per_epoch

    syn = make_problem()
    s = A.vr_step_settings(syn.num_samples, syn.p)
    assert set(s) == set(A.VR_STEP_SETTINGS) and all(v.dtype == np.int64 for v in s.values())
    big = int(np.argmax(syn.p))
    assert np.array_equal(s["e2"], 2 * steps_per_epoch(syn.num_samples, 20)) and s["e2"][big] == 582
    assert s["equal"].tolist() == [int(np.median(s["e2"]))] * 30 == [12] * 30
    assert s["capped"][big] == 40 and np.array_equal(np.delete(s["capped"], big), np.delete(s["e2"], big))
    assert A.vr_step_settings(syn.num_samples, syn.p, cap=1000)["capped"][big] == 582  # a cap above tau_i: tau_i
    odd = A.vr_step_settings([10, 30, 50], [0.5, 0.2, 0.3], batch_size=10, epochs=3, cap=2)  # by hand
    assert [odd[k].tolist() for k in A.VR_STEP_SETTINGS] == [[3, 9, 15], [9, 9, 9], [2, 9, 15]]


@pytest.mark.parametrize("kwargs,match", [(dict(cap=0), "cap"), (dict(epochs=0), "epochs"),
                                          (dict(batch_size=0), "batch_size"), (dict(cap=2.5), "cap"),
                                          (dict(p=[0.5, 0.5]), "one weight per client"),
                                          (dict(p=[0.5, np.nan, 0.5]), "p")])
def test_vr_step_settings_refuse_bad_input(kwargs, match):
    args = dict(num_samples=[10, 20, 30], p=[0.2, 0.3, 0.5]) | kwargs
    with pytest.raises(ValueError, match=match):
        A.vr_step_settings(**args)


def test_read_vr_count_reads_each_step_setting(tmp_path):
    """A count of part 5's controls lives in <name>-<steps>-count.json and says whose steps it counted; the stored
    E = 2 records predate the field and read as "e2"."""
    import json
    from pathlib import Path

    assert A.vr_count_path(tmp_path, "scaffold").name == "scaffold-count.json"
    assert A.vr_count_path(str(tmp_path), "fednova-vr", "capped") == tmp_path / "fednova-vr-capped-count.json"
    with pytest.raises(ValueError, match="steps must be one of"):
        A.vr_count_path(tmp_path, "scaffold", "E = 2")
    with pytest.raises(ValueError, match="steps must be one of"):
        A.read_vr_count(tmp_path, "scaffold", steps="median")
    stored = Path(__file__).resolve().parents[1] / "data" / "results" / "linearised"
    old = json.loads((stored / "fednova-vr-count.json").read_text())
    assert "steps" not in old["config"] and A.read_vr_count(stored, "fednova-vr")["summary"] == old["summary"]
    record = json.loads(json.dumps(old))
    record["config"]["steps"] = "equal"
    A.vr_count_path(tmp_path, "scaffold", "equal").write_text(json.dumps(record))
    assert A.read_vr_count(tmp_path, "scaffold", "equal")["config"]["steps"] == "equal"
    with pytest.raises(ValueError, match="not found|No such file"):
        A.read_vr_count(tmp_path, "scaffold")  # the e2 file is not there
    A.vr_count_path(tmp_path, "scaffold", "capped").write_text(json.dumps(record))  # a file under another's name
    with pytest.raises(ValueError, match="a count for the local steps 'equal', not 'capped'"):
        A.read_vr_count(tmp_path, "scaffold", "capped")
    A.vr_count_path(tmp_path, "scaffold").write_text(json.dumps(record))
    with pytest.raises(ValueError, match="a count for the local steps 'equal', not 'e2'"):
        A.read_vr_count(tmp_path, "scaffold")
    record["config"]["steps"] = None  # present, so not the old records' "e2"
    A.vr_count_path(tmp_path, "scaffold").write_text(json.dumps(record))
    with pytest.raises(ValueError, match="a count for the local steps None, not 'e2'"):
        A.read_vr_count(tmp_path, "scaffold")


def test_read_vr_spectrum_names_a_missing_field(tmp_path):
    import json
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "data" / "results" / "linearised" / "scaffold-count.json"
    record = json.loads(src.read_text())
    record["kind"] = "linearised-spectrum"
    del record["config"]["rows"]
    (tmp_path / "scaffold.json").write_text(json.dumps(record))
    np.savez(tmp_path / "scaffold.npz", eigenvalues=np.array([0.5 + 0.1j, 0.5 - 0.1j]))
    with pytest.raises(ValueError, match="no config.rows"):
        A.read_vr_spectrum(tmp_path, "scaffold")


def test_limit_distances_reads_names_and_lrs_once_and_checks_each_rate():
    """lrs was iterated once per name: a generator of rates gave the second name an empty array without a word;
    float(lr) took True as lr = 1 and '0.01' as 0.01; lrs=0.01 raised TypeError ("'float' object is not
    iterable") and names='fedavg' was read as the variants 'f', 'e', ..."""
    prob, steps, _ = _random_setting(14, m=4, d=3)
    want = A.limit_distances(prob, ["fedavg", "fednova"], [0.01, 0.02], steps)
    got = A.limit_distances(prob, iter(["fedavg", "fednova"]), (lr for lr in [0.01, 0.02]), steps)
    assert list(got) == ["fedavg", "fednova"] and all(np.array_equal(got[n], want[n]) for n in want)
    for names, lrs, says in ((["fedavg"], [True], "lr must be"), (["fedavg"], ["0.01"], "lr must be"),
                             (["fedavg"], 0.01, "lrs must be a sequence"), ("fedavg", [0.01], "names must be a sequence")):
        with pytest.raises(ValueError, match=says):
            A.limit_distances(prob, names, lrs, steps)


# ---------------------------------------------------------------- vr_limit (chapter 10's unequal-weights check)
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("lr", [0.02, 0.1])
def test_vr_limit_is_the_closed_form_limit_of_every_vr_variant(seed, lr):
    """Unequal p_i (Dirichlet): the limit of the closed-form round map (variant_limit) is vr_limit's x* for SCAFFOLD and
    FedNova-VR (with local momentum too) at every lr; VRLSGD's, iterated from zero variates, is the minimiser of
    sum_i p_i tau_i F_i; with 1/m instead of p_i those points move by far more than the tolerances."""
    prob, steps, _ = _random_setting(seed)
    x_star = prob.optimum()
    for name in ("scaffold", "fednova-vr", "fednova-vr-momentum"):
        np.testing.assert_allclose(A.vr_limit(prob, name), x_star, rtol=0, atol=1e-12 * np.linalg.norm(x_star))
        np.testing.assert_allclose(A.variant_limit(prob, name, lr, steps), A.vr_limit(prob, name, steps),
                                   rtol=0, atol=1e-10 * np.linalg.norm(x_star))
    w = prob.p * steps / (prob.p @ steps)
    surrogate = np.linalg.solve(np.einsum("i,ijk->jk", w, prob.H), w @ prob.e)
    np.testing.assert_allclose(A.vr_limit(prob, "vrlsgd", steps), surrogate, rtol=0,
                               atol=1e-12 * np.linalg.norm(surrogate))
    rm = A.variant_round_map(prob, "vrlsgd", lr, steps)
    s = A.initial_state(prob, "vrlsgd")
    for _ in range(3000):
        s = rm.M @ s + rm.b
    np.testing.assert_allclose(s[:prob.dim], surrogate, rtol=0, atol=1e-9 * np.linalg.norm(surrogate))
    uniform = np.full(prob.num_clients, 1.0 / prob.num_clients)
    for name, steps_ in (("scaffold", None), ("vrlsgd", steps)):
        assert np.linalg.norm(A.vr_limit(prob, name, steps_, weights=uniform) - A.vr_limit(prob, name, steps_)) > 1e-3


def test_a_correction_averaged_with_one_over_m_stops_at_vr_limits_uniform_point(monkeypatch):
    """vr_limit's docstring: a correction sum_j c_j / m instead of sum_j p_j c_j stops at argmin sum_j F_j / m, not at
    x* (the library's engine with that bug injected, for SCAFFOLD and FedNova-VR)."""
    import fedlib.algorithms as algorithms

    prob, steps, _ = _random_setting(3)
    uniform = np.full(prob.num_clients, 1.0 / prob.num_clients)
    real = algorithms.update_control_variates

    def one_over_m(variates, clients, deltas, lr, a_norms, p, *args, **kwargs):
        return real(variates, clients, deltas, lr, a_norms, uniform, *args, **kwargs)

    monkeypatch.setattr(algorithms, "update_control_variates", one_over_m)
    wrong = A.vr_limit(prob, "scaffold", weights=uniform)
    for name in ("scaffold", "fednova-vr"):
        run = A.run_variant(prob, name, 0.05, FixedSteps(steps), 600, reference=wrong)
        assert run.distances[-1] < 1e-9 * np.linalg.norm(wrong), (name, run.distances[-1])
        assert np.linalg.norm(run.params - A.vr_limit(prob, name)) > 1e-2


@pytest.mark.parametrize("call,match", [
    (lambda prob: A.vr_limit(prob, "fednova"), "^name must be a variance-reduced variant"),
    (lambda prob: A.vr_limit(prob, "vrlsgd"), "^local_steps: VRLSGD's limit depends"),
    (lambda prob: A.vr_limit(prob, "scaffold", [1, 2]), "local_steps"),
    (lambda prob: A.vr_limit(prob, "scaffold", weights=[0.5, 0.6, 0.1, 0.1]), "p"),
])
def test_vr_limit_refuses(call, match):
    prob, _, _ = _random_setting(0)
    with pytest.raises(ValueError, match=match):
        call(prob)

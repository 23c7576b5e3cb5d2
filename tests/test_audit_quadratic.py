"""Audit of the quadratic chapter's code (experiments/quadratic, engines/quadratic, the closed forms of
theory): edge inputs that gave a silent wrong result, a bare numpy/math error or a misleading message."""
import numpy as np
import pytest

from fedlib import theory as TH
from fedlib.engines import quadratic as E
from fedlib.experiments import quadratic as Q
from fedlib.problems import random_quadratic
from fedlib.problems.quadratic import QuadraticProblem
from fedlib.schedules import FixedSteps


def _shared_null_direction(seed=0):
    """Two PSD H_i = R diag(., ., 0) R^T sharing a rotated null direction, e_i = H_i x_i^*: every point of
    a line minimises F, and rounding (not the maths) used to pick one of them."""
    rng = np.random.default_rng(seed)
    R, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    H = np.array([R @ np.diag([1.0, 2.0, 0.0]) @ R.T, R @ np.diag([2.0, 0.5, 0.0]) @ R.T])
    H = 0.5 * (H + H.transpose(0, 2, 1))
    return H, np.einsum("ijk,ik->ij", H, rng.standard_normal((2, 3)))


@pytest.mark.parametrize("seed", range(3))
def test_a_singular_average_hessian_is_refused_not_solved_by_rounding(seed):
    H, e = _shared_null_direction(seed)
    with pytest.raises(ValueError, match=r"^H: sum_i p_i H_i is singular.*not unique"):
        TH.quadratic_global_optimum(H, e, [0.5, 0.5])
    with pytest.raises(ValueError, match=r"^H: I - M .* singular.*not unique"):
        TH.quadratic_fixed_point(H, e, [0.5, 0.5], [1, 3], 0.1, "fedavg")
    with pytest.raises(ValueError, match=r"^H: sum_i p_i H_i is singular"):
        QuadraticProblem(H, e, np.array([0.5, 0.5])).optimum()   # numpy's bare LinAlgError for diag(., 0)


def test_singular_checks_leave_regular_problems_alone():
    prob = random_quadratic(4, 3, seed=0)
    x_star = np.linalg.solve(np.tensordot(prob.p, prob.H, 1), prob.p @ prob.e)
    np.testing.assert_allclose(prob.optimum(), x_star, rtol=1e-12)
    # one client, tau = 1, zero weight for the other client: still unique
    H = np.array([np.diag([1.0, 2.0]), np.diag([0.0, 0.0])])
    np.testing.assert_allclose(TH.quadratic_fixed_point(H, [[1.0, 2.0], [5.0, 5.0]], [1.0, 0.0], [1, 4], 0.1,
                                                        "fednova"), [1.0, 1.0], rtol=1e-12)


def test_rounds_to_converge_when_one_round_is_exact_and_checks_reduction():
    two = Q.two_client_problem()   # H_i = 1: lr = 1, tau = (1, 1) lands on x~ = 0 in one round (radius 0)
    assert Q.round_map_radius(two, "fedavg", 1.0, [1, 1]) == 0.0
    assert Q.rounds_to_converge(two, "fedavg", 1.0, [1, 1]) == 1       # was "math domain error"
    for bad in (0, 1, 2.0, float("nan"), -1e-3):
        with pytest.raises(ValueError, match="^reduction must"):
            Q.rounds_to_converge(two, "fedavg", 0.1, [1, 2], reduction=bad)


def test_run_quadratic_checks_x0_and_reference():
    prob = random_quadratic(3, 3, seed=0)
    sched = FixedSteps([1, 2, 3])
    with pytest.raises(ValueError, match=r"^reference must have shape \(3,\)"):   # was broadcast silently
        Q.run_quadratic(prob, "fedavg", 0.05, sched, 3, reference=[0.0])
    with pytest.raises(ValueError, match="^reference contains NaN"):        # was "diverged at round 0"
        Q.run_quadratic(prob, "fedavg", 0.05, sched, 3, reference=[np.nan] * 3, stop_above=10.0)
    with pytest.raises(ValueError, match=r"^x0 must have shape \(3,\)"):
        Q.run_quadratic(prob, "fedavg", 0.05, sched, 3, x0=[1.0])
    with pytest.raises(ValueError, match="^x0 contains NaN"):
        Q.run_quadratic(prob, "fedavg", 0.05, sched, 3, x0=[np.nan, 0.0, 0.0])
    run = Q.run_quadratic(prob, "fedavg", 0.05, sched, 2, x0=[1, 2, 3], reference=[1, 2, 3])  # ints are fine
    assert run.distances[0] == 0.0 and run.params.dtype == np.float64


def test_loglog_slope_refuses_non_finite_values():
    assert Q.loglog_slope([1.0, 2.0, 4.0], [3.0, 6.0, 12.0]) == pytest.approx(1.0)
    for x, y in (([1, 2, np.nan], [1, 2, 3]), ([1, 2, 3], [1, 2, np.inf]), ([[1, 2], [3, 4]], [[1, 2], [3, 5]])):
        with pytest.raises(ValueError, match="^loglog_slope needs"):   # was LinAlgError, nan, TypeError
            Q.loglog_slope(x, y)


def test_fixed_point_check_at_a_zero_fixed_point_is_finite():
    """App. D.1's clients with tau_1 = tau_2: x~ = x* = 0, and ||x_T - x~|| / ||x~|| was 0/0 = nan."""
    checks = Q.fixed_point_check(Q.two_client_problem(1.0), [2, 2], 0.1)
    assert [c.rel_error for c in checks] == [0.0, 0.0]


def test_noise_helpers_check_sigma_and_replica():
    prob = random_quadratic(3, 2, seed=0)
    steps = lambda t: [1, 2, 3]  # noqa: E731
    for sigma in (-0.1, float("nan")):
        with pytest.raises(ValueError, match="^sigma must"):
            E.gradient_noise(0, 0, 1, 1, 1, 2, sigma)
        with pytest.raises(ValueError, match="^sigma must"):
            E.noisy_grad_fn(prob, sigma, 0, 2, 1, steps)
    with pytest.raises(ValueError, match=r"^replica must be in 0\.\.1"):   # was IndexError at the first gradient
        E.noisy_grad_fn(prob, 0.1, 0, 2, 2, steps)
    g = E.noisy_grad_fn(prob, 0.1, 0, 2, 1, steps)(np.zeros(2), 0, 0, 0)
    np.testing.assert_allclose(g, prob.grad(np.zeros(2), 0) + E.gradient_noise(0, 0, 2, 3, 3, 2, 0.1)[1, 0, 0])


def test_engine_docstrings_keep_their_backslashes():
    """A non-raw docstring turned :math:`\\tau_i` into a TAB + 'au_i'; a raw one had \\\\widetilde."""
    assert "\t" not in E.noisy_grad_fn.__doc__ and r"\tau_i" in E.noisy_grad_fn.__doc__
    assert r"\\widetilde" not in E.run_replicas.__doc__


def test_an_indefinite_client_hessian_is_refused():
    """QuadraticProblem said PSD but took H_1 = diag(1, -1): F_1 unbounded below, and optimum() returned
    the saddle of sum_i p_i H_i. A PSD H with a (rounded) zero eigenvalue, at any scale, is still taken."""
    e = np.zeros((2, 2))
    with pytest.raises(ValueError, match=r"^H: every H_i must be positive semi-definite; H_1 has the eigenvalue -1$"):
        QuadraticProblem(np.array([np.eye(2), np.diag([1.0, -1.0])]), e, np.array([0.5, 0.5]))
    H, e3 = _shared_null_direction(0)
    for scale in (1e-13, 1.0, 1e12):
        assert QuadraticProblem(scale * H, e3, np.array([0.5, 0.5])).num_clients == 2

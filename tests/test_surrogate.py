"""fedlib.experiments.surrogate: limits of the real rounds on logistic regression (Theorem 1);
unit_scaled refuses all-zero or huge features."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fedlib.data import synthetic
from fedlib.experiments import surrogate as S
from fedlib.problems.logistic import LogisticProblem, pack_params, unpack_params


@pytest.fixture(scope="module")
def problem():
    data = S.unit_scaled(synthetic(num_clients=3, dim=8, num_classes=3, seed=1, num_samples=[20, 40, 90]))
    return LogisticProblem(data, l2=0.1)


def test_unit_scaled_second_moment(problem):
    X = problem.train_x
    assert np.linalg.eigvalsh(X.T @ X / len(X)).max() == pytest.approx(1.0, rel=1e-12)


def test_round_map_is_one_real_round(problem):
    """Phi applied twice = two rounds of the algorithm's own loop."""
    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd

    phi = S.round_map(problem, "fednova", 0.1, [6, 3, 1])
    v0 = pack_params(problem.init_params()).ravel()
    two = run_sequential(make_algorithm("fednova", sgd(0.1)), problem.init_params(), S.full_batch_grad_fn(problem),
                         problem.p, FixedSteps([6, 3, 1]), 2).state.params
    np.testing.assert_allclose(phi(phi(v0)), pack_params(two).ravel(), rtol=0, atol=1e-14)


def test_fixed_point_is_the_limit_of_the_rounds(problem):
    """The Newton-Krylov fixed point is where plain rounds go (and it is a fixed point),
    up to the flat direction of the bias (compared with it centred)."""
    x, res = S.fixed_point_of_round(problem, "fedavg", 0.1, [6, 3, 1])
    assert res < 1e-12
    phi = S.round_map(problem, "fedavg", 0.1, [6, 3, 1])
    shape = pack_params(problem.init_params()).shape
    v = pack_params(problem.init_params()).ravel()
    for _ in range(2000):
        v = phi(v)
    assert np.linalg.norm(S.canonical(unpack_params(v.reshape(shape))) - S.canonical(x)) < 1e-9


def test_fedavg_goes_to_the_surrogate_fednova_to_F(problem):
    points, info = S.surrogate_sweep(problem, [6, 3, 1], [0.2, 0.1, 0.05])
    np.testing.assert_allclose(info["w"], problem.p * [6, 3, 1] / (problem.p @ [6, 3, 1]), rtol=1e-12)
    assert info["gap"] > 0.1
    by = {(p.algorithm, p.lr): p for p in points}
    for lr_big, lr_small in ((0.2, 0.1), (0.1, 0.05)):
        for name, key in (("fedavg", "dist_to_surrogate_min"), ("fednova", "dist_to_F_min")):
            ratio = getattr(by[name, lr_big], key) / getattr(by[name, lr_small], key)
            assert 1.6 < ratio < 2.5, (name, lr_big, ratio)  # O(lr)
    small = 0.05
    assert by["fedavg", small].dist_to_F_min > 5 * by["fedavg", small].dist_to_surrogate_min
    assert by["fednova", small].dist_to_surrogate_min > 5 * by["fednova", small].dist_to_F_min
    assert all(p.residual < 1e-11 for p in points)


def test_bad_inputs(problem):
    with pytest.raises(ValueError, match="algorithm"):
        S.round_map(problem, "scaffold", 0.1, [1, 1, 1])
    with pytest.raises(ValueError, match="local_steps"):
        S.round_map(problem, "fedavg", 0.1, [1, 1])
    with pytest.raises(ValueError, match="weights"):
        S.weighted_minimizer(problem, [0.5, 0.5, 0.5])


def _scaled(problem, s):
    import dataclasses

    d = problem.dataset
    return LogisticProblem(dataclasses.replace(d, train_x=[np.asarray(x) * s for x in d.train_x]), l2=problem.l2)


@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e3])
def test_weighted_minimizer_in_any_feature_units(problem, scale):
    """Features x 1e3 made the old Newton-Krylov solve (absolute tolerance 1e-13 on the gradient)
    raise 'did not converge': the weighted Hessian has condition ~1e7 there. The Newton solve with exact
    Hessians gets to a point where the weighted gradient is rounding-sized relative to its size at the
    start, and no small step from it lowers sum_i w_i F_i."""
    pr = _scaled(problem, scale)
    w = np.array([0.5, 0.2, 0.3])
    x, g = S.weighted_minimizer(pr, w)
    G0 = S.client_gradients(pr, pr.init_params())
    assert g <= 1e-11 * (w @ np.linalg.norm(G0, axis=1))
    assert np.linalg.norm(w @ S.client_gradients(pr, x)) <= 1e-11 * (w @ np.linalg.norm(G0, axis=1))

    def F(v):
        return sum(w_i * pr.client_loss(unpack_params(v.reshape(pack_params(x).shape)), i) for i, w_i in enumerate(w))

    v = pack_params(x).ravel()
    rng = np.random.default_rng(0)
    for _ in range(5):
        step = rng.normal(size=v.shape) * 1e-4 / max(scale, 1.0)
        assert F(v + step) >= F(v) - 1e-13 * abs(F(v))
    assert abs(x["b"].sum()) < 1e-12  # the bias is returned centred (the flat direction removed)


def test_weighted_minimizer_matches_an_independent_root_solve(problem):
    """In unit-scaled features, the same minimiser as scipy's Newton-Krylov root of the weighted gradient
    (what the function used before), compared in the canonical (bias-centred) coordinates."""
    from scipy.optimize import root

    w = np.array([0.1, 0.6, 0.3])
    shape = pack_params(problem.init_params()).shape
    sol = root(lambda v: w @ S.client_gradients(problem, unpack_params(v.reshape(shape))),
               pack_params(problem.init_params()).ravel(), method="krylov", options={"fatol": 1e-13})
    assert sol.success
    x, _ = S.weighted_minimizer(problem, w)
    np.testing.assert_allclose(S.canonical(x), S.canonical(unpack_params(sol.x.reshape(shape))), rtol=0, atol=1e-10)


def test_weighted_minimizer_ignores_zero_weight_clients(problem):
    """w = (0, 1/2, 1/2) is the minimiser of (F_1 + F_2) / 2: their mean gradient vanishes there,
    client 0's does not. (Client 1 alone has no sample of class 1, so F_1 has no minimiser: its
    bias b_1 decreases it without end, and w = (0, 1, 0) is refused.)"""
    x, g = S.weighted_minimizer(problem, [0.0, 0.5, 0.5])
    G, G0 = S.client_gradients(problem, x), S.client_gradients(problem, problem.init_params())
    start = 0.5 * (np.linalg.norm(G0[1]) + np.linalg.norm(G0[2]))
    assert np.linalg.norm(0.5 * (G[1] + G[2])) <= 1e-11 * start and g <= 1e-11 * start
    assert np.linalg.norm(G[0]) > 1e-3 and np.linalg.norm(G[1]) > 1e-3
    with pytest.raises(ValueError, match=r"class\(es\) \[1\] of 3 never occur"):
        S.weighted_minimizer(problem, [0.0, 1.0, 0.0])


def test_newton_minimize_reports_a_short_budget(problem):
    with pytest.raises(RuntimeError, match=r"weighted minimiser: \|grad\| = .* after 1 Newton steps"):
        S.newton_minimize(problem, problem.p, max_steps=1, tol=1e-15, what="weighted minimiser")
    for bad in ({"tol": 0.0}, {"max_steps": 0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            S.newton_minimize(problem, problem.p, **bad)


def test_fixed_point_solver_breakdown_is_a_runtime_error_naming_the_cause(problem, monkeypatch):
    """With features x 1e3 and a step size 1e-7 (the chapter's eta * ||H||), scipy's inner Krylov solve
    can break down with a ValueError about 'a bug in the Jacobian approximation' (seen with lr =
    0.1 / 1e3**2). Such a breakdown is now a RuntimeError that names the algorithm, the step size and the
    remedy (scipy's exception simulated here: whether it breaks down or stops at maxiter depends on the
    last bits of lr)."""
    import scipy.optimize

    def broken(*args, **kwargs):
        raise ValueError("Jacobian inversion yielded zero vector. This indicates a bug in the Jacobian approximation.")

    monkeypatch.setattr(scipy.optimize, "root", broken)
    with pytest.raises(RuntimeError, match=r"fixed point of fedavg \(lr 0.1\): Newton-Krylov broke down "
                                           r"\(Jacobian inversion.*unit-scaled features"):
        S.fixed_point_of_round(problem, "fedavg", 0.1, [6, 3, 1])


def test_unit_scaled_names_all_zero_features(capfd):
    """All-zero features gave a divide-by-zero warning and then 'client 0 train x contains NaN or inf'. Now the
    ValueError alone, for features too large to square too: no warning and nothing printed. Before this check
    (mutant EP9 of the negative-assertion pass: errstate(over="print", invalid="print") printed numpy's 'Warning:
    overflow encountered in matmul' to the C stderr) the test looked at the error only."""
    import warnings

    ds = synthetic(num_clients=2, dim=3, num_classes=3, seed=0, num_samples=[10, 20])
    zero = dataclasses.replace(ds, train_x=[np.zeros_like(x) for x in ds.train_x])
    huge = dataclasses.replace(ds, train_x=[x * 1e200 for x in ds.train_x])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="every feature is 0"):
            S.unit_scaled(zero)
        with pytest.raises(ValueError, match="too large"):
            S.unit_scaled(huge)
    assert capfd.readouterr() == ("", "")


def test_unseen_classes_refuses_weights_that_are_not_one_per_client():
    """zip(train_y, weights) cut the clients to the weights given: on 5 clients whose labels cover every class
    but 1, weights [1.0] answered from client 0 alone ([0, 1, 2, 4, 6, 7, 8, 9]), 7 weights were taken without a
    word; NaN or negative weights counted as zero."""
    from fedlib.experiments.synthetic import make_problem

    prob = make_problem(num_clients=5)
    assert S.unseen_classes(prob) == S.unseen_classes(prob, [0.2] * 5) == [1]
    for bad in ([1.0], [0, 0, 0, 0, 1, 1, 1], [np.nan] * 5, [-1.0] * 5, 1.0):
        with pytest.raises(ValueError, match="weights"):
            S.unseen_classes(prob, bad)
    assert S.unseen_classes(prob, [0, 0, 0, 0, 1]) == [0, 1, 2, 4, 5, 6, 7, 9]   # client 4 has classes 3 and 8


def test_surrogate_sweep_and_lr_sweep_refuse_lrs_that_are_no_sequence():
    """lrs=0.05 (one step size for a list) raised TypeError ("'float' object is not iterable") naming nothing."""
    from fedlib.experiments import synthetic as SY

    prob = SY.make_problem(num_clients=3)
    for bad in (0.05, None):
        with pytest.raises(ValueError, match="lrs must be a sequence"):
            S.surrogate_sweep(prob, [2, 3, 4], bad)
        with pytest.raises(ValueError, match="lrs must be a sequence"):
            SY.lr_sweep(prob, SY.SETTINGS[0], {"FedAvg": SY.fedavg_sgd}, bad, [0], 1)


def _chapter7(seed):
    """Chapter 7's instance at the ci sizes: Synthetic(1,1), six clients, unit-scaled, l2 = 0.1."""
    raw = synthetic(num_clients=6, seed=seed, num_samples=[40, 80, 120, 200, 300, 500])
    return LogisticProblem(S.unit_scaled(S.observed_classes(raw)), l2=0.1)


CH7_TAU = [20, 12, 8, 4, 2, 1]


def test_fixed_point_from_zeros_that_runs_away_is_refused_not_a_false_root():
    """Chapter 7 at seed 17, FedNova at lr 0.0125: Newton-Krylov from zeros ran away to a bias of 3e13, where a
    round's update is lost to rounding; the residual (4e-16) passed the tolerance (2.6e-15) and the chapter reported
    a distance of 3.5e13 to argmin F. Such a point is now a RuntimeError saying so, never a root."""
    problem = _chapter7(17)
    try:
        x, res = S.fixed_point_of_round(problem, "fednova", 0.0125, CH7_TAU)
    except RuntimeError as exc:
        assert "lost to rounding" in str(exc) or "did not converge" in str(exc), exc
    else:  # a genuine point: near argmin F (0.057 at seed 17), not 3.5e13 away
        x_f, _ = S.weighted_minimizer(problem, problem.p)
        assert np.linalg.norm(S.canonical(x) - S.canonical(x_f)) < 0.1 and res < 1e-13


def test_a_root_where_the_tolerance_is_below_rounding_is_refused(problem, monkeypatch):
    """The guard itself: a 'root' with max|x| = 1e20 (rounding 2e4 per round) whatever its residual."""
    import scipy.optimize

    def fake_root(fun, x0, **kwargs):
        return scipy.optimize.OptimizeResult(x=np.full_like(x0, 1e20), success=True, message="ok")

    monkeypatch.setattr(scipy.optimize, "root", fake_root)
    with pytest.raises(RuntimeError, match=r"fixed point of fedavg \(lr 0.1\): .*max\|x\| = 1e\+20.*lost to "
                                           r"rounding, not a fixed point"):
        S.fixed_point_of_round(problem, "fedavg", 0.1, [6, 3, 1])


def test_sweep_starts_each_solve_at_its_minimiser_and_finds_the_genuine_limit():
    """The same instance through surrogate_sweep: FedNova's solve starts at argmin F (FedAvg's at argmin F~) and finds
    the genuine limit, 0.057 from argmin F (0.117 at lr 0.025: O(lr)); before, from zeros, the false root 3.5e13
    away (then, with the rounding guard, a RuntimeError)."""
    points, info = S.surrogate_sweep(_chapter7(17), CH7_TAU, [0.0125], algorithms=["fednova"])
    (point,) = points
    assert 0.04 < point.dist_to_F_min < 0.08 and point.residual < 1e-13
    assert point.dist_to_surrogate_min == pytest.approx(info["gap"], rel=0.1)


def test_sweep_tol_reaches_the_fixed_point_where_the_default_is_below_rounding():
    """Chapter 7 at seed 1, FedAvg at lr 0.003125: the first round's step is 0.0067, so the default tolerance
    1e-13 x 0.0067 is below the rounding of a round at max|x| = 3.9 (8.7e-16) and the solve is refused, saying so;
    surrogate_sweep's tol=1e-12 reaches the limit, which is O(lr) from argmin F~ (half of its distance at 2 lr)."""
    problem = _chapter7(1)
    with pytest.raises(RuntimeError, match="lost to rounding"):
        S.surrogate_sweep(problem, CH7_TAU, [0.003125], algorithms=["fedavg"])
    points, info = S.surrogate_sweep(problem, CH7_TAU, [0.00625, 0.003125], algorithms=["fedavg"], tol=1e-12)
    big, small = points
    assert small.residual < 1e-13 and big.residual < 1e-13
    assert 0.45 < small.dist_to_surrogate_min / big.dist_to_surrogate_min < 0.55
    with pytest.raises(ValueError, match="tol"):
        S.surrogate_sweep(problem, CH7_TAU, [0.1], tol=0.0)


def test_sweep_tol_of_chapter7_resolves_its_smallest_step_size():
    """Chapter 7 at seed 11, FedAvg at lr 0.00078125 (its smallest step size since the slopes are fitted over the four
    smallest): at max|x| = 4.69 a round rounds to 1.04e-15, above 1e-12 x the first step 0.000871, so the chapter's
    old tol is refused; its tol 1e-11 reaches the limit, O(lr) from argmin F~ (half of its distance at 2 lr)."""
    problem = _chapter7(11)
    with pytest.raises(RuntimeError, match="lost to rounding"):
        S.surrogate_sweep(problem, CH7_TAU, [0.00078125], algorithms=["fedavg"], tol=1e-12)
    points, _ = S.surrogate_sweep(problem, CH7_TAU, [0.0015625, 0.00078125], algorithms=["fedavg"], tol=1e-11)
    big, small = points
    assert small.residual < 1e-11 and big.residual < 1e-11
    assert 0.49 < small.dist_to_surrogate_min / big.dist_to_surrogate_min < 0.51


# scipy's first stopping test computes inf / inf (no step yet) when the start is already a root: harmless
@pytest.mark.filterwarnings("ignore:invalid value encountered in scalar divide:RuntimeWarning")
def test_fixed_point_start_changes_where_the_solve_starts_not_its_tolerance(problem, monkeypatch):
    """start: the same fixed point from the minimiser of F as from zeros; the tolerance stays relative to the first
    round from the initial point (a start at the limit must not shrink it); a start of the wrong shape or with NaN is a
    ValueError."""
    import scipy.optimize

    x_ref, _ = S.fixed_point_of_round(problem, "fednova", 0.1, [6, 3, 1])
    x_f, _ = S.weighted_minimizer(problem, problem.p)
    x, res = S.fixed_point_of_round(problem, "fednova", 0.1, [6, 3, 1], start=x_f)
    assert res < 1e-12
    np.testing.assert_allclose(S.canonical(x), S.canonical(x_ref), rtol=0, atol=1e-10)
    seen = []
    real_root = scipy.optimize.root

    def spy(fun, x0, **kwargs):
        seen.append((np.array(x0), kwargs["options"]["fatol"]))
        return real_root(fun, x0, **kwargs)

    monkeypatch.setattr(scipy.optimize, "root", spy)
    S.fixed_point_of_round(problem, "fednova", 0.1, [6, 3, 1])
    S.fixed_point_of_round(problem, "fednova", 0.1, [6, 3, 1], start=x)
    (zero_start, fatol_zero), (near_start, fatol_near) = seen
    assert fatol_near == fatol_zero > 0
    np.testing.assert_array_equal(zero_start, 0.0)
    np.testing.assert_array_equal(near_start, pack_params(x).ravel())
    with pytest.raises(ValueError, match=r"start must be finite parameters of the model's shape \(9, 3\).*\(8, 3\)"):
        S.fixed_point_of_round(problem, "fednova", 0.1, [6, 3, 1], start={"W": x["W"][1:], "b": x["b"]})
    with pytest.raises(ValueError, match="non-finite"):
        S.fixed_point_of_round(problem, "fednova", 0.1, [6, 3, 1], start={"W": x["W"] * np.nan, "b": x["b"]})
    with pytest.raises(ValueError, match="keys 'W' and 'b'"):
        S.fixed_point_of_round(problem, "fednova", 0.1, [6, 3, 1], start={"W": x["W"]})

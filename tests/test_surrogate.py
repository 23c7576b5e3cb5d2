"""fedlib.experiments.surrogate: limits of the real rounds on logistic regression (Theorem 1)."""
from __future__ import annotations

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

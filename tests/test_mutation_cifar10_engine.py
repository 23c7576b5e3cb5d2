"""Mutation-testing pass on the non-Table-1 parts of ``fedlib/experiments/cifar10.py`` (data,
fingerprint, ``train_runs``, the benchmark helpers, the chapter-5 helpers) and on
``fedlib/problems/quadratic.py``: each test pins behaviour that a surviving mutant changed, with
its expected value worked out independently (by hand, from REFERENCE.md §4, or by a plain
numpy computation). Training tests use tiny synthetic images, width 0.03 and one round."""
import math

import numpy as np
import pytest

from fedlib.experiments import cifar10 as C
from fedlib.problems.quadratic import QuadraticProblem, random_quadratic


# ------------------------------------------------------------------ quadratic.py
@pytest.mark.parametrize("high", [float("nan"), float("inf")])
def test_random_quadratic_refuses_a_non_finite_upper_eigenvalue(high):
    # nan / inf passed the low <= high check and raised numpy's OverflowError from uniform()
    with pytest.raises(ValueError, match=r"^eig_range\[1\] must be a finite number > 0, got "):
        random_quadratic(2, 3, eig_range=(0.5, high))


def test_quadratic_loss_and_gradients_by_hand():
    # F_1 = 1/2 (2 x0^2 + 4 x1^2) - (x0 + x1), F_2 = 1/2 (x0^2 + x1^2) - 2 x1; p = (0.25, 0.75)
    H = np.array([[[2.0, 0.0], [0.0, 4.0]], [[1.0, 0.0], [0.0, 1.0]]])
    e = np.array([[1.0, 1.0], [0.0, 2.0]])
    q = QuadraticProblem(H, e, np.array([0.25, 0.75]))
    x = np.array([1.0, 2.0])
    f1 = 0.5 * (2 * 1 + 4 * 4) - 3.0      # 6
    f2 = 0.5 * (1 + 4) - 4.0              # -1.5
    assert q.loss(x) == pytest.approx(0.25 * f1 + 0.75 * f2)
    assert q.grad(x, 0) == pytest.approx([2 - 1, 8 - 1])
    assert q.grad(x, 1) == pytest.approx([1 - 0, 2 - 2])
    assert q.global_grad(x) == pytest.approx([0.25 * 1 + 0.75 * 1, 0.25 * 7 + 0.75 * 0])
    assert (q.num_clients, q.dim) == (2, 2)


def test_quadratic_grad_refuses_a_vector_of_another_dimension():
    q = QuadraticProblem(np.eye(3)[None], np.zeros((1, 3)), np.ones(1))
    with pytest.raises(ValueError, match=r"^x must be a vector of the problem's dimension 3, got shape \(2,\)$"):
        q.grad(np.zeros(2), 0)


def test_random_quadratic_defaults_are_the_documented_ones():
    # signature: seed=0, eig_range=(0.5, 2.0), spread=5.0, equal weights
    a = random_quadratic(3, 4)
    b = random_quadratic(3, 4, seed=0, eig_range=(0.5, 2.0), spread=5.0, p=[1 / 3] * 3)
    np.testing.assert_array_equal(a.H, b.H)
    np.testing.assert_array_equal(a.e, b.e)
    np.testing.assert_array_equal(a.p, b.p)
    eig = np.linalg.eigvalsh(a.H)
    assert eig.min() >= 0.5 - 1e-12 and eig.max() <= 2.0 + 1e-12
    assert eig.min() < 1.0 < eig.max()  # the range is really used, not a narrower one


def test_random_quadratic_of_one_client():
    q = random_quadratic(1, 2, seed=3)
    assert q.H.shape == (1, 2, 2) and q.p.tolist() == [1.0]


@pytest.mark.parametrize("kwargs, message", [
    (dict(num_clients=0, dim=2), r"^num_clients must be an integer >= 1, got 0$"),
    (dict(num_clients=2, dim=0), r"^dim must be an integer >= 1, got 0$"),
    (dict(num_clients=2, dim=2, eig_range=(0.0, 1.0)), r"^eig_range\[0\] must be a finite number > 0, got 0\.0$"),
    (dict(num_clients=2, dim=2, eig_range=(2.0, 1.0)),
     r"^eig_range must be \(low, high\) with low <= high, got \(2\.0, 1\.0\)$"),
    (dict(num_clients=2, dim=2, spread=0.0), r"^spread must be a finite number > 0, got 0\.0$"),
])
def test_random_quadratic_refuses(kwargs, message):
    with pytest.raises(ValueError, match=message):
        random_quadratic(**kwargs)


def test_random_quadratic_eigenvalues_lie_in_eig_range_and_spread_scales_e():
    q = random_quadratic(4, 5, seed=1, eig_range=(1.0, 3.0))
    eig = np.linalg.eigvalsh(q.H)
    assert eig.min() >= 1.0 - 1e-12 and eig.max() <= 3.0 + 1e-12
    np.testing.assert_allclose(q.H, np.transpose(q.H, (0, 2, 1)), atol=0)
    same = random_quadratic(2, 3, seed=1, eig_range=(1.5, 1.5))  # low == high is allowed: H_i = 1.5 I
    np.testing.assert_allclose(same.H, np.broadcast_to(1.5 * np.eye(3), (2, 3, 3)), atol=1e-12)
    # e_i = H_i x_i* with x_i* = spread * z_i: the same draws, so e is linear in spread
    one, two = random_quadratic(3, 4, seed=2, spread=1.0), random_quadratic(3, 4, seed=2, spread=2.0)
    np.testing.assert_allclose(two.e, 2 * one.e, rtol=1e-12)
    np.testing.assert_array_equal(one.H, two.H)
    assert random_quadratic(1, 1).dim == 1


def test_random_quadratic_local_optima_are_normal_with_sd_spread():
    q = random_quadratic(50, 4, seed=0, spread=3.0)
    x_star = np.linalg.solve(q.H, q.e[..., None])[..., 0] / 3.0  # H_i x_i* = e_i; N(0, 1) after the scaling
    assert 0.85 < x_star.std() < 1.15 and abs(x_star.mean()) < 0.2
    assert np.abs(x_star).max() < 4.5  # 200 standard normal draws; 1 / z would put several far beyond


def _problem(*diagonals):
    H = np.array([np.diag(d) for d in diagonals], dtype=float)
    return QuadraticProblem(H, np.zeros(H.shape[:2]), np.full(len(diagonals), 1.0 / len(diagonals)))


def test_quadratic_problem_accepts_positive_semi_definite_h():
    _problem([0.0, 0.0], [1.0, 2.0])          # a zero H_i is PSD
    _problem([1.0, 0.0], [3.0, 3.0])          # singular PSD
    _problem([1e3, -1e-9], [1.0, 1.0])        # rounding-sized: -1e-9 >= -1e-10 * 1e3


@pytest.mark.parametrize("diagonals, message", [
    (([1.0, 1.0], [-1.0, 2.0]), r"^H: every H_i must be positive semi-definite; H_1 has the eigenvalue -1$"),
    (([1.0, -1.5e-10], [1.0, 1.0]),
     r"^H: every H_i must be positive semi-definite; H_0 has the eigenvalue -1\.5e-10$"),
])
def test_quadratic_problem_refuses_a_negative_eigenvalue(diagonals, message):
    with pytest.raises(ValueError, match=message):
        _problem(*diagonals)


def test_quadratic_problem_stores_float_arrays_of_list_inputs():
    q = QuadraticProblem([[[2, 0], [0, 1]]], [[1, 1]], [1])
    for arr in (q.H, q.e, q.p):
        assert isinstance(arr, np.ndarray) and arr.dtype == np.float64
    assert q.loss(np.array([1.0, 1.0])) == pytest.approx(0.5 * 3 - 2)

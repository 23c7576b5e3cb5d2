"""fedlib.problems.quadratic.QuadraticProblem: a client's gradient, the loss and the global gradient (what
they take and refuse, by hand), every H_i positive semi-definite, and a singular sum_i p_i H_i refused (by
fedlib.theory's optimum and fixed point too) rather than solved by rounding."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from fedlib import theory as TH
from fedlib.problems import random_quadratic
from fedlib.problems.quadratic import QuadraticProblem


@pytest.fixture
def problem():
    return random_quadratic(num_clients=3, dim=4, seed=1)


@pytest.mark.parametrize("client", [-1, 3, 1.0, True, "0", None])
def test_quadratic_grad_refuses_a_client_outside_the_problem(problem, client):
    # -1 was the last client (numpy indexing); 1.0 and "0" failed inside numpy
    with pytest.raises(ValueError, match=r"client must be an integer in \[0, 3\)"):
        problem.grad(np.zeros(4), client)


def test_quadratic_grad_of_each_client_by_hand(problem):
    x = np.arange(4.0)
    for i in range(3):
        assert np.array_equal(problem.grad(x, np.int64(i)), problem.H[i] @ x - problem.e[i])


def test_quadratic_loss_and_global_grad_take_a_list(problem):
    x = [0.5, -1.0, 2.0, 0.25]
    xa = np.array(x)
    by_hand = sum(p * (0.5 * xa @ H @ xa - e @ xa) for p, H, e in zip(problem.p, problem.H, problem.e))
    assert problem.loss(x) == pytest.approx(by_hand, rel=1e-12)
    grad = sum(p * (H @ xa - e) for p, H, e in zip(problem.p, problem.H, problem.e))
    np.testing.assert_allclose(problem.global_grad(x), grad, rtol=1e-12)


@pytest.mark.parametrize("method", ["loss", "global_grad"])
def test_quadratic_loss_and_global_grad_refuse_a_wrong_shape(problem, method):
    with pytest.raises(ValueError, match="dimension 4, got shape \\(5,\\)"):
        getattr(problem, method)(np.zeros(5))


@pytest.mark.parametrize("eig_range", [np.array(0.5), np.array([[0.5], [2.0]]), torch.tensor(1.0)])
def test_random_quadratic_names_an_eig_range_of_another_shape(eig_range):
    """Was: a 0-d array (or tensor) passed the pair check (it has __len__) and len() raised TypeError ('len() of
    unsized object', 'len() of a 0-d tensor'); a (2, 1) array was unpacked into two 1-entry arrays, refused as
    'eig_range[0] must be a finite number > 0, got array([0.5])' (0.5 is one)."""
    with pytest.raises(ValueError, match=r"^eig_range must be a pair \(low, high\) of eigenvalues > 0"):
        random_quadratic(2, 2, eig_range=eig_range)
    assert np.array_equal(random_quadratic(2, 2, eig_range=np.array([0.5, 2.0])).H, random_quadratic(2, 2).H)


def test_random_quadratic_takes_p_as_quadratic_problem_takes_it():
    """Was: np.asarray(p, dtype=float) came first, so a tensor requiring grad raised RuntimeError ("Can't call
    numpy() on Tensor that requires grad"), a bfloat16 one TypeError ('Got unsupported ScalarType BFloat16'),
    [1j, 0.5] TypeError ("float() argument must be ... not 'complex'") and ['a', 'b'] "could not convert string
    to float: 'a'", none naming p; QuadraticProblem itself takes those tensors."""
    plain = random_quadratic(2, 2, p=[0.25, 0.75])
    for p in (torch.tensor([0.25, 0.75], requires_grad=True), torch.tensor([0.25, 0.75], dtype=torch.bfloat16),
              np.array([0.25, 0.75], dtype=np.float32)):
        problem = random_quadratic(2, 2, p=p)
        assert problem.p.dtype == np.float64 and np.array_equal(problem.p, plain.p)
        assert np.array_equal(problem.H, plain.H) and np.array_equal(problem.e, plain.e)
    for p in ([1j, 0.5], ["a", "b"]):
        with pytest.raises(ValueError, match=r"^p must be an array of numbers"):
            random_quadratic(2, 2, p=p)


@pytest.mark.parametrize("method", ["grad", "loss", "global_grad"])
def test_quadratic_methods_take_any_tensor_and_name_an_x_that_is_no_numbers(problem, method):
    """Was: x as a tensor requiring grad raised RuntimeError ("Can't call numpy() on Tensor that requires grad"), in
    bfloat16 TypeError ('Got unsupported ScalarType BFloat16'); x = ['a', 'b', 'c', 'd'] numpy's UFuncTypeError
    ("ufunc 'matmul' did not contain a loop ...") or 'invalid data type for einsum', [None] * 4 "unsupported operand
    type(s) for *", none naming x."""
    call = (lambda x: problem.grad(x, 1)) if method == "grad" else getattr(problem, method)
    x = np.array([0.5, -1.0, 2.0, 0.25])
    for tensor in (torch.tensor(x, requires_grad=True), torch.tensor(x, dtype=torch.bfloat16), torch.tensor(x)):
        assert np.array_equal(call(tensor), call(x))
    for bad in (["a", "b", "c", "d"], [None] * 4):
        with pytest.raises(ValueError, match=r"^x must be a vector of numbers, got dtype"):
            call(bad)


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
    with pytest.raises(ValueError, match=r"^H: sum_i c_i K_i H_i is singular.*not unique"):
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


def test_an_indefinite_client_hessian_is_refused():
    """QuadraticProblem said PSD but took H_1 = diag(1, -1): F_1 unbounded below, and optimum() returned
    the saddle of sum_i p_i H_i. A PSD H with a (rounded) zero eigenvalue, at any scale, is still taken."""
    e = np.zeros((2, 2))
    with pytest.raises(ValueError, match=r"^H: every H_i must be positive semi-definite; H_1 has the eigenvalue -1$"):
        QuadraticProblem(np.array([np.eye(2), np.diag([1.0, -1.0])]), e, np.array([0.5, 0.5]))
    H, e3 = _shared_null_direction(0)
    for scale in (1e-13, 1.0, 1e12):
        assert QuadraticProblem(scale * H, e3, np.array([0.5, 0.5])).num_clients == 2


def test_a_problem_of_dimension_zero_is_refused():
    """QuadraticProblem(H of shape (2, 0, 0), e of shape (2, 0)) is refused naming H. Before: it was taken, an empty
    problem whose optimum() was [] and whose loss was 0.0, without a word."""
    with pytest.raises(ValueError, match=r"^H must have shape \(m, d, d\) with d >= 1, got \(2, 0, 0\)$"):
        QuadraticProblem(np.zeros((2, 0, 0)), np.zeros((2, 0)), np.array([0.5, 0.5]))
    assert QuadraticProblem(np.ones((2, 1, 1)), np.zeros((2, 1)), np.array([0.5, 0.5])).dim == 1

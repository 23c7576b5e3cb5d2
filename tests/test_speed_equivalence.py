"""Fast paths equal the plain computations they replace, bit for bit.

Each optimisation of a hot CPU path keeps the simple form as its reference (in the library,
named ``*_reference``, or written out here) and is checked against it with
``np.array_equal`` — not a tolerance: the chapters' printed numbers must not move.
"""
from __future__ import annotations

import numpy as np
import pytest

from fedlib.problems.logistic import LogisticRegression, _grad, _grad_reference


# ------------------------------------------------------------- logistic full-batch gradient
@pytest.mark.parametrize("classes", [2, 3, 10])
@pytest.mark.parametrize("l2", [0.0, 0.001])
def test_logistic_grad_equals_its_plain_form(classes, l2):
    rng = np.random.default_rng(classes)
    for n, scale in [(1, 1.0), (7, 0.1), (257, 3.0), (1000, 40.0)]:  # 40: logits in the hundreds
        x = rng.standard_normal((n, 6))
        y = rng.integers(0, classes, n)
        W, b = scale * rng.standard_normal((6, classes)), rng.standard_normal(classes)
        fast, plain = _grad(W, b, x, y, l2), _grad_reference(W, b, x, y, l2)
        assert fast.keys() == plain.keys()
        for k in plain:
            assert np.array_equal(fast[k], plain[k]), (n, k)


def test_logistic_grad_equals_its_plain_form_with_ties_and_signed_zeros():
    # ties in the row maximum (max taken column by column: order must not matter) and -0.0 logits
    x = np.array([[1.0, 0.0], [0.0, 0.0], [-1.0, 1.0], [0.0, -0.0]])
    W = np.array([[1.0, 1.0, 0.0], [0.0, 0.0, -0.0]])
    b = np.array([0.0, -0.0, 1.0])
    y = np.array([0, 1, 2, 1])
    fast, plain = _grad(W, b, x, y, 0.0), _grad_reference(W, b, x, y, 0.0)
    for k in plain:
        assert np.array_equal(fast[k], plain[k]) and not np.any(np.isnan(fast[k]))


def test_logistic_grad_keeps_nan_as_the_plain_form_does():
    W = np.array([[np.nan, 0.0], [1.0, 2.0]])
    x, y, b = np.ones((3, 2)), np.array([0, 1, 1]), np.zeros(2)
    fast, plain = _grad(W, b, x, y, 0.0), _grad_reference(W, b, x, y, 0.0)
    for k in plain:
        assert np.array_equal(fast[k], plain[k], equal_nan=True)


def test_model_grad_uses_the_fast_form_on_synthetic_clients():
    from fedlib.experiments.synthetic import make_problem

    problem = make_problem()
    model = problem.model
    assert isinstance(model, LogisticRegression)
    rng = np.random.default_rng(0)
    params = {"W": 0.3 * rng.standard_normal((model.num_features, model.num_classes)),
              "b": rng.standard_normal(model.num_classes)}
    for x, y in zip(problem.dataset.train_x[:8], problem.dataset.train_y[:8]):
        got = model.grad(params, x, y)
        want = _grad_reference(params["W"], params["b"], np.asarray(x, dtype=np.float64), np.asarray(y, np.int64),
                               model.l2)
        for k in want:
            assert np.array_equal(got[k], want[k])

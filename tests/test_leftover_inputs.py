"""Inputs that were accepted with a wrong meaning, or refused deep inside numpy."""
from __future__ import annotations

import numpy as np
import pytest

from fedlib.problems import random_quadratic


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


@pytest.mark.parametrize("every", [-1, 1.5, -2.0, float("inf"), True])
def test_train_runs_and_run_table1_refuse_a_checkpoint_period_that_is_not_a_count(tmp_path, every):
    # train_runs took -1 as "never" and 1.5 as "every third round"; run_table1 took int(1.5) = 1
    from fedlib.experiments.cifar10 import run_table1, train_runs

    with pytest.raises(ValueError, match=r"checkpoint_every must be an integer >= 0"):
        train_runs([], None, [], rounds=1, checkpoint_every=every)
    with pytest.raises(ValueError, match=r"checkpoint_every must be an integer >= 0"):
        run_table1(tmp_path / "results", budget_seconds=0, dry_run=True, checkpoint_every=every)


def test_check_count_takes_a_whole_float_as_its_integer():
    from fedlib._validate import check_count

    assert check_count("n", 2.0) == 2 and type(check_count("n", np.float32(3.0))) is int
    assert check_count("n", np.int64(4), minimum=4) == 4
    with pytest.raises(ValueError, match="n must be an integer >= 1, got 0"):
        check_count("n", 0.0, minimum=1)

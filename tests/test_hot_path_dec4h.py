"""The per-client fast paths added for speed (2026-12-04, session h) refuse what the slow checks refuse."""

import numpy as np
import pytest

from fedlib.algorithms import make_algorithm
from fedlib.solvers import sgd


def _state(m=3):
    algo = make_algorithm("fednova", sgd(lr=0.1))
    return algo, algo.init(np.zeros(2), num_clients=m)


@pytest.mark.parametrize("client", [True, False, -1, 3, 4, 1.5, np.int64(3), np.int64(-1), np.bool_(True), "1", None])
def test_client_init_and_final_refuse_what_check_client_indices_refuses(client):
    algo, state = _state()
    with pytest.raises(ValueError, match="client"):
        algo.client_init(state, client)
    solver_state = algo.solver.update(algo.client_init(state, 0), np.ones(2))
    with pytest.raises(ValueError, match="client"):
        algo.client_final(state, client, solver_state)


@pytest.mark.parametrize("client", [0, 2, np.int64(2), np.int32(0)])
def test_client_init_and_final_take_every_integer_index_in_range(client):
    algo, state = _state()
    solver_state = algo.solver.update(algo.client_init(state, client), np.ones(2))
    update = algo.client_final(state, client, solver_state)
    assert update.client == int(client) and type(update.client) is int
    np.testing.assert_allclose(update.delta, [-0.1, -0.1])


def test_a_state_with_a_numpy_client_count_still_checks_the_range():
    algo, state = _state()
    state = state._replace(num_clients=np.int64(3))
    algo.client_init(state, 2)
    with pytest.raises(ValueError, match="client 3 is not one of the 3 clients"):
        algo.client_init(state, 3)

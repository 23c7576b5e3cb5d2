"""The per-client fast paths added for speed refuse what the slow checks refuse."""

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


# ---------------------------------------------------------------- _validate's array checks, rewritten with
# the array methods (.all(), .min()) instead of np.all / np.any: the same refusals on every kind of array

from fedlib._validate import check_int_array, check_weights  # noqa: E402


@pytest.mark.parametrize("bad, match", [
    ([0.5, -0.0001], "non-negative, got min -0.0001"),
    ([np.nan, 1.0], "NaN or inf"),
    ([1.0, np.inf], "NaN or inf"),
    ([], "must not be empty"),
])
def test_check_weights_refusals(bad, match):
    with pytest.raises(ValueError, match=match):
        check_weights("w", np.array(bad, dtype=float))


def test_check_weights_takes_zero_and_positive_weights():
    np.testing.assert_array_equal(check_weights("w", [0.0, 2.0]), [0.0, 2.0])


@pytest.mark.parametrize("bad, match", [
    (np.array([1, 2 ** 63], dtype=np.uint64), "below 2\\*\\*63"),
    (np.array([1.0, 2.0 ** 63]), "below 2\\*\\*63"),
    (np.array([1.0, -(2.0 ** 64)]), "below 2\\*\\*63"),
    (np.array([1.0, 1.5]), "must hold whole numbers"),
    (np.array([1.0, np.nan]), "must hold whole numbers"),
    (np.array([3, 0]), "client 1 has 0"),
    (np.array([0, 3], dtype=np.uint8), "client 0 has 0"),
])
def test_check_int_array_refusals(bad, match):
    with pytest.raises(ValueError, match=match):
        check_int_array("steps", bad, minimum=1)


def test_check_int_array_takes_the_largest_int64_and_unsigned_counts():
    # an int64 array cannot wrap: it is no longer compared with the float 2.0**63, which 2**63 - 1 rounds to
    big = np.array([1, 2 ** 63 - 1], dtype=np.int64)
    assert check_int_array("steps", big, minimum=1).tolist() == [1, 2 ** 63 - 1]
    assert check_int_array("steps", np.array([1, 7], dtype=np.uint64), minimum=1).tolist() == [1, 7]
    # nor an unsigned one (review of the day's diff: uint64 2**63 - 1 was refused as not below 2**63)
    unsigned = np.array([1, 2 ** 63 - 1], dtype=np.uint64)
    assert check_int_array("steps", unsigned, minimum=1).tolist() == [1, 2 ** 63 - 1]
    assert check_int_array("steps", [1.0, 2.0], minimum=1).dtype == np.int64

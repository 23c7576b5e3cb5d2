"""distributed_apply on a ServerState without num_clients (a state built by hand or read from an
older checkpoint, which apply takes unchecked): the ranks' blocks of clients need m, so it is
refused naming the state's field and the fix, before any collective; a state with it is unchanged."""
import numpy as np
import pytest

from fedlib.algorithms import ClientUpdate, make_algorithm
from fedlib.distributed import LocalCommunicator, distributed_apply
from fedlib.sampling import full_participation
from fedlib.solvers import sgd

UPDATES = [ClientUpdate(0, np.array([-1.0]), a_norm=1.0, local_steps=1),
           ClientUpdate(1, np.array([2.0]), a_norm=2.0, local_steps=2)]


class _NoCollectives(LocalCommunicator):
    """One process; a collective fails the test (the state's error comes before any)."""

    def all_gather_object(self, obj):
        raise AssertionError("a collective ran before the state's check")


@pytest.mark.parametrize("name", ["fedavg", "fednova", "scaffold"])
def test_state_without_num_clients_is_named(name):
    algorithm = make_algorithm(name, sgd(1.0))
    state = algorithm.init(np.zeros(1), num_clients=2)._replace(num_clients=None)
    args = (state, full_participation([0.5, 0.5]), UPDATES, 1.0, [0.5, 0.5])
    algorithm.apply(*args)  # apply takes the state (no range check)
    with pytest.raises(ValueError, match=r"state\.num_clients is None.*_replace\(num_clients=m\)"):
        distributed_apply(_NoCollectives(), algorithm, *args)


@pytest.mark.parametrize("name", ["fedavg", "fednova", "scaffold"])
def test_state_with_num_clients_matches_apply(name):
    algorithm = make_algorithm(name, sgd(1.0))
    state = algorithm.init(np.zeros(1), num_clients=2)
    args = (state, full_participation([0.5, 0.5]), UPDATES, 1.0, [0.5, 0.5])
    split, diag = distributed_apply(LocalCommunicator(), algorithm, *args)
    whole, diag_whole = algorithm.apply(*args)
    assert np.array_equal(split.params, whole.params) and split.num_clients == 2
    assert diag.tau_eff == diag_whole.tau_eff


@pytest.mark.parametrize("comm", [None, object(), "gloo"])
def test_distributed_apply_names_a_comm_that_is_no_communicator(comm):
    """Before: AttributeError ("'NoneType' object has no attribute 'rank'"), after the other checks."""
    algorithm = make_algorithm("fednova", sgd(1.0))
    args = (algorithm.init(np.zeros(1), num_clients=2), full_participation([0.5, 0.5]), UPDATES, 1.0, [0.5, 0.5])
    with pytest.raises(ValueError, match=r"^comm must be a fedlib\.distributed\.Communicator \(LocalCommunicator, "
                                         rf"TorchCommunicator or a subclass\), got {type(comm).__name__}$"):
        distributed_apply(comm, algorithm, *args)


def test_run_batched_names_a_comm_that_is_no_communicator():
    """Before: run_batched(comm=object()) put the data on the backend and raised AttributeError
    ("'object' object has no attribute 'check_clients'"); comm=None (one process) is unchanged."""
    from fedlib.data.synthetic import synthetic
    from fedlib.engines.batched import run_batched
    from fedlib.problems.logistic import LogisticProblem
    from fedlib.schedules import FixedSteps

    prob = LogisticProblem(synthetic(num_clients=2, seed=0, num_samples=[10, 12]))
    algorithm = make_algorithm("fednova", sgd(0.05))
    with pytest.raises(ValueError, match=r"^comm must be a fedlib\.distributed\.Communicator .*got object$"):
        run_batched(algorithm, prob, FixedSteps([1, 2]), 1, batch_size=4, seed=0, comm=object())
    one = run_batched(algorithm, prob, FixedSteps([1, 2]), 1, batch_size=4, seed=0, comm=None)
    local = run_batched(algorithm, prob, FixedSteps([1, 2]), 1, batch_size=4, seed=0, comm=LocalCommunicator())
    assert np.array_equal(one.params["W"], local.params["W"])

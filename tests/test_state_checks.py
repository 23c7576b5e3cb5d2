"""The round entry points check the ``ServerState`` they are given.

A user's own loop builds and keeps the state (README, "Your own training loop"). Before:
``FederatedAlgorithm.apply``, ``fedlib.distributed.distributed_apply``, ``apply_server_optimizer`` and
``FederatedAlgorithm.client_init`` took any state: SCAFFOLD / FedNova-VR / VRLSGD given a state without
control variates ran as FedAvg / FedNova without variance reduction, FedAvg given a state with variates
updated and applied them (it ran as SCAFFOLD), both without a word; a plain server's state under server
momentum failed with ``AttributeError: 'PlainState' object has no attribute 'buffer'``; a tuple or a dict
failed with ``AttributeError``. Now each raises ``ValueError`` naming ``state``.

Every test fails on the code before, except those marked "pinned" (behaviour that must not change).
Also: ``train_clients(test_x=...)`` named a NaN / overflowing / integer ``test_x`` ``test_features``.
"""

import numpy as np
import pytest

from fedlib.algorithms import (ClientUpdate, ServerState, apply_server_optimizer, make_algorithm,
                               server_state_mismatch)
from fedlib.distributed import LocalCommunicator, distributed_apply
from fedlib.sampling import full_participation
from fedlib.server import ServerOptimizer, adam, momentum
from fedlib.solvers import proximal_sgd, sgd

P = [0.5, 0.5]
UPDATES = [ClientUpdate(0, np.array([-1.0]), 1.0, 1), ClientUpdate(1, np.array([2.0]), 2.0, 2)]


def _algo(name, server=None):
    return make_algorithm(name, sgd(1.0), server)


def _state(name, server=None):
    return _algo(name, server).init(np.zeros(1), num_clients=2)


def _apply(algo, state):
    return algo.apply(state, full_participation(P), UPDATES, 1.0, P)


def _distributed(algo, state):
    return distributed_apply(LocalCommunicator(), algo, state, full_participation(P), UPDATES, 1.0, P)


def _client_init(algo, state):
    return algo.client_init(state, 0)


ENTRY_POINTS = [_apply, _distributed, _client_init]


# --------------------------------------------------------------------------- control variates
@pytest.mark.parametrize("entry", ENTRY_POINTS)
@pytest.mark.parametrize("name, runs_as", [("scaffold", "FedAvg"), ("fednova-vr", "FedNova"), ("vrlsgd", "FedAvg")])
def test_a_variance_reduced_algorithm_refuses_a_state_without_variates(entry, name, runs_as):
    """Before: it ran as FedAvg / FedNova (no correction, no variates updated), silently."""
    plain_state = _state("fedavg" if runs_as == "FedAvg" else "fednova")
    with pytest.raises(ValueError, match=rf"^state: {name!r} keeps control variates \('(scaffold|vrlsgd)'\), but "
                                         rf"state\.variates is None .*it would run as {runs_as} without variance "
                                         r"reduction; algorithm\.init\(params, num_clients\) makes them\)$"):
        entry(_algo(name), plain_state)


@pytest.mark.parametrize("entry", ENTRY_POINTS)
@pytest.mark.parametrize("name, vr", [("fedavg", "scaffold"), ("fednova", "fednova-vr"), ("fedprox", "vrlsgd")])
def test_an_algorithm_without_variance_reduction_refuses_a_state_with_variates(entry, name, vr):
    """Before: FedAvg updated the variates in apply and applied their correction in client_init."""
    algo = make_algorithm(name, proximal_sgd(1.0, mu=0.1) if name == "fedprox" else sgd(1.0))
    kind = "vrlsgd" if vr == "vrlsgd" else "scaffold"
    with pytest.raises(ValueError, match=rf"^state: {name!r} keeps no control variates, but state\.variates holds "
                                         rf"{kind!r} ones .*state\._replace\(variates=None\) drops them\)$"):
        entry(algo, _state(vr))


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_variates_of_the_other_kind_are_refused(entry):
    """Before: SCAFFOLD given VRLSGD's variates updated them by VRLSGD's rule (variates.kind decides)."""
    with pytest.raises(ValueError, match=r"^state: 'scaffold' keeps 'scaffold' control variates, but state\.variates "
                                         r"holds 'vrlsgd' ones"):
        entry(_algo("scaffold"), _state("vrlsgd"))
    with pytest.raises(ValueError, match=r"^state: 'vrlsgd' keeps 'vrlsgd' control variates, but state\.variates "
                                         r"holds 'scaffold' ones"):
        entry(_algo("vrlsgd"), _state("fednova-vr"))


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_variates_that_are_no_control_variates_are_refused(entry):
    state = _state("scaffold")
    state = state._replace(variates=dict(state.variates._asdict()))
    with pytest.raises(ValueError, match=r"^state\.variates must be None or a fedlib\.variance\.ControlVariates, "
                                         r"got dict$"):
        entry(_algo("scaffold"), state)


def test_the_distributed_round_refuses_the_state_before_any_collective():
    """Every rank holds the same state: each raises before the first collective instead of one rank waiting."""
    class Recording(LocalCommunicator):
        calls = 0

        def all_gather_object(self, obj):
            Recording.calls += 1
            return super().all_gather_object(obj)

    with pytest.raises(ValueError, match=r"^state: 'scaffold' keeps control variates"):
        distributed_apply(Recording(), _algo("scaffold"), _state("fedavg"), full_participation(P), UPDATES, 1.0, P)
    assert Recording.calls == 0


# --------------------------------------------------------------------------- server optimizer state
SERVER_CASES = [  # (server of the state, server of the algorithm, state's kind, kind kept)
    (None, momentum(0.9), "PlainState", "MomentumState"),
    (None, adam(), "PlainState", "AdamState"),
    (momentum(0.9), None, "MomentumState", "PlainState"),
    (adam(), momentum(0.5), "AdamState", "MomentumState"),
]


@pytest.mark.parametrize("entry", [_apply, _distributed])
@pytest.mark.parametrize("saved, server, has, keeps", SERVER_CASES)
def test_a_round_refuses_a_server_state_of_another_server_optimizer(entry, saved, server, has, keeps):
    """Before: AttributeError "'PlainState' object has no attribute 'buffer'" (momentum), "... 'm'" (adam); a
    momentum state under the plain server was dropped without a word (PlainState(state.count + 1))."""
    algo = _algo("fednova", server)
    with pytest.raises(ValueError, match=rf"^state: its server optimizer state \(state\.server\) is a {has}, but the "
                                         rf"algorithm's server optimizer keeps a {keeps} \({algo.server.name!r}; a state "
                                         r"of another server optimizer\? algorithm\.init\(params, num_clients\)"):
        entry(algo, _state("fednova", saved))


@pytest.mark.parametrize("saved, server, has, keeps", SERVER_CASES)
def test_apply_server_optimizer_refuses_a_server_state_of_another_server_optimizer(saved, server, has, keeps):
    server = server or _algo("fedavg").server
    with pytest.raises(ValueError, match=rf"^state: its server optimizer state \(state\.server\) is a {has}, but the "
                                         rf"server optimizer keeps a {keeps} \({server.name!r};"):
        apply_server_optimizer(server, np.ones(1), _state("fedavg", saved), 1.0)


def test_a_server_optimizer_of_your_own_is_checked_against_its_own_init():
    class MineState(tuple):
        pass

    mine = ServerOptimizer(lambda params: MineState((0,)), lambda c, s, params, lr: (params + c, MineState((s[0] + 1,))),
                           "mine")
    with pytest.raises(ValueError, match=r"^state: its server optimizer state \(state\.server\) is a PlainState, but "
                                         r"the algorithm's server optimizer keeps a MineState \('mine';"):
        _apply(_algo("fedavg", mine), _state("fedavg"))


# --------------------------------------------------------------------------- not a ServerState
def _final(algo, state):
    run = algo.solver.update(algo.client_init(_state("fedavg"), 0), np.ones(1))
    return algo.client_final(state, 0, run)


def _server_step(algo, state):
    return apply_server_optimizer(algo.server, np.ones(1), state, 1.0)


@pytest.mark.parametrize("entry", ENTRY_POINTS + [_final, _server_step])
@pytest.mark.parametrize("convert, got, hint", [
    (tuple, "tuple", r" \(ServerState\(\*state\) if it holds params, server, variates, round, num_clients in this "
                     r"order\)"),
    (lambda s: dict(s._asdict()), "dict", r" \(ServerState\(\*\*state\) if it holds params, server, variates, round "
                                          r"and num_clients\)"),
    (lambda s: s.params, "ndarray", "")])
def test_a_state_that_is_no_server_state_is_named(entry, convert, got, hint):
    """Before: AttributeError "'tuple' object has no attribute 'num_clients'" (or 'server', 'params')."""
    with pytest.raises(ValueError, match=r"^state must be a fedlib\.algorithms\.ServerState \(algorithm\.init\(params, "
                                         rf"num_clients\), then what apply returns\), got {got}{hint}$"):
        entry(_algo("fedavg"), convert(_state("fedavg")))


# --------------------------------------------------------------------------- pinned: what must not change
@pytest.mark.parametrize("name, server", [("fedavg", None), ("fednova", momentum(0.9)), ("scaffold", adam()),
                                          ("fednova-vr", momentum(0.5)), ("vrlsgd", None)])
def test_pinned_a_state_of_the_algorithm_runs_as_before(name, server):
    """Pinned (passes before and after): the checks refuse nothing that fits; apply and distributed_apply agree."""
    algo = _algo(name, server)
    state = algo.init(np.zeros(1), num_clients=2)
    for _ in range(3):
        algo.client_init(state, 1)
        new, _ = _apply(algo, state)
        split, _ = _distributed(algo, state)
        np.testing.assert_array_equal(new.params, split.params)
        state = new
    assert state.round == 3 and type(state.server) is type(algo.server.init(state.params))


def test_pinned_a_server_optimizer_of_your_own_with_a_state_of_any_kind_runs():
    """Pinned: init returning None, an int, or the model's own kind of array (numpy here, torch there) still
    runs, with init called once per kind of model, not every round (no second buffer allocated per round)."""
    torch = pytest.importorskip("torch")
    calls = []

    def zeros(params):
        calls.append(type(params))
        return params * 0

    own = [ServerOptimizer(lambda params: None, lambda c, s, params, lr: (params + c, s), "none"),
           ServerOptimizer(lambda params: 0, lambda c, s, params, lr: (params + c, s + 1), "count"),
           ServerOptimizer(zeros, lambda c, s, params, lr: (params + c, s + c), "sum")]
    for server in own:
        algo = _algo("fedavg", server)
        for params in (np.zeros(1), torch.zeros(1, dtype=torch.float64)):
            state = algo.init(params, num_clients=2)
            updates = [u._replace(delta=torch.as_tensor(u.delta) if torch.is_tensor(params) else u.delta)
                       for u in UPDATES]
            for _ in range(4):
                state, _ = algo.apply(state, full_participation(P), updates, 1.0, P)
            assert float(state.params[0]) == 2.0
    assert calls.count(np.ndarray) <= 2 and calls.count(torch.Tensor) <= 2  # algo.init + at most one look


def test_pinned_server_state_mismatch_says_what_it_said():
    """Pinned: the resume message is unchanged (its sentence is now shared with the round's)."""
    saved = _state("fedavg")
    assert server_state_mismatch(_algo("fedavg", momentum(0.9)), saved) == (
        "the saved server optimizer state is a PlainState, but the algorithm's server optimizer keeps a MomentumState "
        "('momentum'; written with another server optimizer?)")
    assert server_state_mismatch(_algo("fedavg"), saved) is None


def test_pinned_a_server_state_subclass_and_a_state_without_num_clients_are_taken():
    """Pinned: a subclass of ServerState, and a 4-field state (an old checkpoint's), pass the checks."""
    class Mine(ServerState):
        pass

    algo = _algo("scaffold")
    state = algo.init(np.zeros(1), num_clients=2)
    algo.client_init(Mine(*state), 0)
    _apply(algo, Mine(*state))
    old = ServerState(state.params, state.server, state.variates, 0)
    algo.client_init(old, 1)
    _apply(algo, old)


# --------------------------------------------------------------------------- train_clients' test_x
def _clients():
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(n, 6, generator=g) for n in (5, 7)]
    return xs, [torch.randint(0, 3, (n,), generator=g) for n in (5, 7)]


def _test_x(kind):
    import torch

    if kind == "nan":
        x = torch.randn(4, 6)
        x[2, 1] = float("nan")
    elif kind == "overflow":
        x = torch.randn(4, 6, dtype=torch.float64)
        x[3, 0] = 1e39
    else:
        x = torch.ones(4, 6, dtype=torch.int64)
    return x


@pytest.mark.parametrize("kind, message", [
    ("nan", r"^test_x holds NaN or inf \(sample 2\)$"),
    ("overflow", r"^test_x overflows torch\.float32: finite as torch\.float64, inf once cast \(sample 3\)$"),
    ("int", r"^test_x must be a float tensor, got torch\.int64$")])
def test_train_clients_names_a_bad_test_x_test_x(kind, message):
    """Before: 'test_features must be finite floats, got torch.float32 with NaN/inf or not float' and
    'test_features: row 3 overflows torch.float32: ...' (TensorEngine's argument, not train_clients')."""
    import torch
    from torch import nn

    from fedlib.experiments.custom import train_clients

    xs, ys = _clients()
    with pytest.raises(ValueError, match=message):
        train_clients(nn.Linear(6, 3), xs, ys, rounds=1, test_x=_test_x(kind), test_y=torch.tensor([0, 1, 2, 0]),
                      dtype=torch.float32)


# ---------------------------------------------------------------- resume: the same rule as a round's check


def _lazy_buffer_server():
    """A server optimizer of one's own whose state is None until its first update makes a buffer."""
    from fedlib.server import ServerOptimizer

    def update(change, state, params, lr=None):
        buffer = change if state is None else 0.5 * state + change
        return params + buffer, buffer

    return ServerOptimizer(init=lambda params: None, update=update, name="lazy-buffer")


def test_a_resume_continues_a_server_optimizer_whose_state_changes_type():
    from fedlib.algorithms import server_state_mismatch
    from fedlib.engines.reference import run_sequential
    from fedlib.problems import random_quadratic
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd as _sgd

    problem = random_quadratic(num_clients=3, dim=2, seed=0)
    algo = make_algorithm("fednova", _sgd(0.05), _lazy_buffer_server())
    args = (algo, problem.grad_fn(), problem.p, FixedSteps([1, 2, 3]))
    whole = run_sequential(algo, np.zeros(2), *args[1:], rounds=4)
    half = run_sequential(algo, np.zeros(2), *args[1:], rounds=2)
    assert isinstance(half.state.server, np.ndarray)             # None at init, an array after an update
    assert server_state_mismatch(algo, half.state) is None
    # rounds count from 0 again: 2 more rounds (fixed steps, full gradients: rounds 2-3 are rounds 0-1 again)
    resumed = run_sequential(algo, None, *args[1:], rounds=2, initial_state=half.state)
    np.testing.assert_array_equal(resumed.state.params, whole.state.params)


def test_a_resume_still_refuses_fedlib_server_states_of_another_kind():
    from fedlib.algorithms import server_state_mismatch
    from fedlib.server import momentum

    plain_state = make_algorithm("fedavg", sgd(0.1)).init(np.zeros(1), 2)
    assert "PlainState" in server_state_mismatch(make_algorithm("fedavg", sgd(0.1), momentum(0.9)), plain_state)
    # a state of fedlib's under a server optimizer of one's own, and the other way round
    assert "PlainState" in server_state_mismatch(make_algorithm("fedavg", sgd(0.1), _lazy_buffer_server()), plain_state)
    lazy = make_algorithm("fedavg", sgd(0.1), _lazy_buffer_server()).init(np.zeros(1), 2)
    assert "NoneType" in server_state_mismatch(make_algorithm("fedavg", sgd(0.1), momentum(0.9)), lazy)

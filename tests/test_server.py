"""Server optimizers: plain, official server momentum (gmf), FedAdam — hand-computed rounds;
apply_server_optimizer's checks and a server optimizer of your own (malformed, NaN, another array kind);
a server momentum of 0 stays 0 (command line, Table 1 cell)."""
from __future__ import annotations

import math

import dataclasses

import numpy as np
import pytest
import torch

from fedlib import server as SV

X0 = np.array([1.0, 2.0])
D1 = np.array([-0.2, 0.4])   # aggregated change x^{t+1} - x^t of round 1 (= -descent)
D2 = np.array([0.1, 0.1])


def test_plain_hand():
    opt = SV.plain(0.5)
    st = opt.init(X0)
    x1, st = opt.update(D1, st, X0)
    np.testing.assert_allclose(x1, [0.9, 2.2], atol=1e-15)
    x2, st = opt.update(D2, st, x1)
    np.testing.assert_allclose(x2, [0.95, 2.25], atol=1e-15)
    assert st.count == 2
    np.testing.assert_array_equal(X0, [1.0, 2.0])  # not in place
    # server_lr = 1 is eq. (4) itself
    x, _ = SV.plain().update(D1, SV.plain().init(X0), X0)
    np.testing.assert_array_equal(x, X0 + D1)


def test_momentum_hand_three_rounds():
    """Official gmf with descent D = -change: u ← βu + D/η, x ← x − η u (u = D/η in round 1)."""
    opt = SV.momentum(0.9)
    st = opt.init(X0)
    x1, st = opt.update(D1, st, X0, 0.1)
    np.testing.assert_allclose(st.buffer, [2.0, -4.0], atol=1e-14)       # -D1/0.1
    np.testing.assert_allclose(x1, [0.8, 2.4], atol=1e-14)               # = plain in round 1
    x2, st = opt.update(D2, st, x1, 0.1)
    np.testing.assert_allclose(st.buffer, [0.8, -4.6], atol=1e-14)       # 0.9*[2,-4] - [1,1]
    np.testing.assert_allclose(x2, [0.72, 2.86], atol=1e-14)             # x1 - 0.1*u2
    # round 3: no new change, the buffer alone keeps moving the model; lr decayed to 0.05
    x3, st = opt.update(np.zeros(2), st, x2, 0.05)
    np.testing.assert_allclose(st.buffer, [0.72, -4.14], atol=1e-14)
    np.testing.assert_allclose(x3, [0.684, 3.067], atol=1e-14)
    assert st.count == 3


def test_momentum_persists_and_beta_zero_is_plain():
    rng = np.random.default_rng(0)
    changes = [rng.standard_normal(3) for _ in range(4)]
    lrs = [0.1, 0.1, 0.05, 0.01]

    def run(opt):
        x = np.zeros(3)
        st = opt.init(x)
        xs = []
        for c, lr in zip(changes, lrs):
            x, st = opt.update(c, st, x, lr)
            xs.append(x)
        return xs

    plain = run(SV.plain())
    zero = run(SV.momentum(0.0))
    mom = run(SV.momentum(0.9))
    for a, b in zip(zero, plain):
        np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(mom[0], plain[0], rtol=1e-14)             # round 1: identical
    assert np.linalg.norm(mom[1] - plain[1]) > 0.1                        # round 2: the buffer acts


def test_momentum_torch_tree():
    opt = SV.momentum(0.5)
    x0 = {"w": torch.tensor([1.0, 2.0], dtype=torch.float64)}
    st = opt.init(x0)
    x1, st = opt.update({"w": torch.tensor([-0.2, 0.4], dtype=torch.float64)}, st, x0, 0.1)
    x2, st = opt.update({"w": torch.tensor([0.1, 0.1], dtype=torch.float64)}, st, x1, 0.1)
    # u1 = [2, -4]; u2 = 0.5 u1 - [1, 1] = [0, -3]; x2 = [0.8, 2.4] - 0.1 u2
    torch.testing.assert_close(x2["w"], torch.tensor([0.8, 2.7], dtype=torch.float64))


def test_adam_hand_two_steps():
    lr, b1, b2, eps = 0.1, 0.9, 0.99, 1e-3
    opt = SV.adam(lr, b1, b2, eps)
    st = opt.init(X0)
    x1, st = opt.update(D1, st, X0)
    # m1 = 0.1*D1 = [-0.02, 0.04]; v1 = 0.01*D1^2 = [4e-4, 1.6e-3]; sqrt(v1) = [0.02, 0.04]
    np.testing.assert_allclose(st.m, [-0.02, 0.04], atol=1e-16)
    np.testing.assert_allclose(st.v, [4e-4, 1.6e-3], atol=1e-16)
    exp1 = np.array([1.0 + 0.1 * (-0.02) / 0.021, 2.0 + 0.1 * 0.04 / 0.041])
    np.testing.assert_allclose(x1, exp1, rtol=0, atol=1e-14)
    x2, st = opt.update(D2, st, x1)
    # m2 = 0.9 m1 + 0.1 D2 = [-0.008, 0.046]; v2 = 0.99 v1 + 0.01 D2^2 = [4.96e-4, 1.684e-3]
    np.testing.assert_allclose(st.m, [-0.008, 0.046], atol=1e-16)
    np.testing.assert_allclose(st.v, [4.96e-4, 1.684e-3], atol=1e-16)
    exp2 = exp1 + 0.1 * np.array([-0.008 / (math.sqrt(4.96e-4) + 1e-3), 0.046 / (math.sqrt(1.684e-3) + 1e-3)])
    np.testing.assert_allclose(x2, exp2, rtol=0, atol=1e-14)
    assert st.count == 2
    # torch leaves work too
    xt, _ = opt.update(torch.as_tensor(D1), opt.init(torch.as_tensor(X0)), torch.as_tensor(X0))
    np.testing.assert_allclose(xt.numpy(), exp1, atol=1e-14)


def test_make_server_optimizer():
    assert SV.make_server_optimizer("plain").name == "plain"
    assert SV.make_server_optimizer("momentum", beta=0.5).name == "momentum"
    assert SV.make_server_optimizer("adam", server_lr=0.1).name == "adam"
    x, _ = SV.make_server_optimizer("plain", server_lr=2.0).update(D1, SV.PlainState(0), X0)
    np.testing.assert_allclose(x, X0 + 2 * D1)
    # states are NamedTuples (checkpointable)
    assert SV.momentum(0.9).init(X0)._fields == ("buffer", "count")


# --------------------------------------------------------------------------- your own server optimizer
def test_a_server_optimizer_of_your_own_that_returns_nan_is_named():
    """A ServerOptimizer(init, update, name) whose update returned a NaN model passed apply's checks; the
    clients then trained from NaN and the run stopped one round later with 'round 1: the aggregated update
    is not finite (diverged)', blaming the clients' updates."""
    import numpy as np

    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.problems import random_quadratic
    from fedlib.schedules import FixedSteps
    from fedlib.server import ServerOptimizer
    from fedlib.solvers import sgd

    problem = random_quadratic(num_clients=3, dim=4, seed=0)

    def run(update, name):
        algo = make_algorithm("fednova", sgd(0.01), server=ServerOptimizer(lambda params: None, update, name))
        return run_sequential(algo, np.zeros(4), problem.grad_fn(), problem.p, FixedSteps([1, 2, 3]), rounds=3)

    with pytest.raises(FloatingPointError, match=r"^round 0: server optimizer 'halves-badly' returned a model that "
                                                 r"is not finite from a finite aggregated update"):
        run(lambda change, state, params, lr: (params + change * np.nan, state), "halves-badly")
    # a correct one of your own runs as before: x + D, the plain step
    mine = run(lambda change, state, params, lr: (params + change, state), "mine")
    plain = run_sequential(make_algorithm("fednova", sgd(0.01)), np.zeros(4), problem.grad_fn(), problem.p,
                           FixedSteps([1, 2, 3]), rounds=3)
    np.testing.assert_array_equal(mine.state.params, plain.state.params)


# ----------------------------------------------------------- your own server optimizer: malformed, another array kind
@pytest.mark.parametrize("init, update, name, message", [
    (None, "ok", "mine", r"^server\.init must be callable, init\(params\) -> state, got NoneType"),
    ("ok", 3, "mine", r"^server\.update must be callable, update\(change, state, params, lr\)"),
    ("ok", "ok", 5, r"^server\.name must be a non-empty string \(it labels results\), got 5"),
    ("ok", "ok", "", r"^server\.name must be a non-empty string")])
def test_make_algorithm_refuses_a_malformed_server_optimizer(init, update, name, message):
    """ServerOptimizer(None, update, 'mine') was taken by make_algorithm and failed at algo.init with TypeError
    "'NoneType' object is not callable"; a non-callable update failed in round 0, a name of 5 labelled results."""
    from fedlib.algorithms import make_algorithm
    from fedlib.server import PlainState, ServerOptimizer
    from fedlib.solvers import sgd

    init = (lambda params: PlainState(0)) if init == "ok" else init
    update = (lambda change, state, params, lr: (params + change, state)) if update == "ok" else update
    with pytest.raises(ValueError, match=message):
        make_algorithm("fednova", sgd(0.1), ServerOptimizer(init, update, name))


@pytest.mark.parametrize("init, update, message", [
    (lambda: 0, None, r"^server\.init must be callable as init\(params\) -> state, taking 1 positional argument: "
                      r"init\(\) does not \(too many positional arguments\)"),
    (None, lambda change, state: (change, state),
     r"^server\.update must be callable as update\(change, state, params, lr\) -> \(new_params, new_state\), taking 4 "
     r"positional arguments: update\(change, state\) does not \(too many positional arguments\)")])
def test_make_algorithm_refuses_a_server_optimizer_of_the_wrong_signature(init, update, message):
    """A server optimizer of your own whose init or update cannot take the arguments fedlib passes is refused by
    make_algorithm, naming the part and the expected call; one with defaults or *args is taken. Before: Python's
    "<lambda>() takes 2 positional arguments but 4 were given" from inside the first round."""
    from fedlib.algorithms import make_algorithm
    from fedlib.server import PlainState, ServerOptimizer
    from fedlib.solvers import sgd

    init = init or (lambda params: PlainState(0))
    update = update or (lambda change, state, params, lr: (params + change, state))
    with pytest.raises(ValueError, match=message):
        make_algorithm("fednova", sgd(0.1), ServerOptimizer(init, update, "mine"))
    make_algorithm("fednova", sgd(0.1), ServerOptimizer(lambda *a: PlainState(0), lambda c, s, p, lr=None, x=1: (p, s),
                                                       "mine"))


def test_server_optimizer_returning_another_array_kind_says_so():
    """A server optimizer returning a torch tensor for a numpy model was refused with 'got leaf shapes [(2,)] for
    [(2,)]', two equal shapes and no word of the kinds that differ."""
    import numpy as np
    import torch

    from fedlib.algorithms import apply_server_optimizer, make_algorithm
    from fedlib.server import PlainState, ServerOptimizer
    from fedlib.solvers import sgd

    to_torch = ServerOptimizer(lambda params: PlainState(0),
                               lambda change, state, params, lr: (torch.as_tensor(params + change), state), "to-torch")
    state = make_algorithm("fednova", sgd(0.1), to_torch).init(np.zeros(2), 2)
    with pytest.raises(ValueError, match=r"\(leaf 0 is torch tensors, state\.params holds numpy arrays\)$"):
        apply_server_optimizer(to_torch, np.ones(2), state, 0.1)


# --------------------------------------------------------------------------- apply_server_optimizer's lr and change
@pytest.mark.parametrize("lr", [float("nan"), float("inf"), -1.0, 0.0, True])
def test_apply_server_optimizer_checks_lr(lr):
    """Was: apply_server_optimizer(plain(), change, state, nan) returned the moved model (the plain
    server does not use lr), so a NaN client rate went unnoticed where apply would refuse it."""
    from fedlib.algorithms import apply_server_optimizer, make_algorithm
    from fedlib.server import plain
    from fedlib.solvers import sgd

    state = make_algorithm("fedavg", sgd(0.1)).init(np.ones(1), 2)
    with pytest.raises(ValueError, match="^lr must be a finite number > 0"):
        apply_server_optimizer(plain(), np.array([-2.0]), state, lr)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_apply_server_optimizer_refuses_a_non_finite_change(bad):
    """Was: the plain server (and momentum, adam) turned a NaN aggregate into a NaN model without a word:
    apply_server_optimizer(plain(), [nan], state, 0.1) returned (array([nan]), ...)."""
    from fedlib.algorithms import apply_server_optimizer, make_algorithm
    from fedlib.server import plain
    from fedlib.solvers import sgd

    state = make_algorithm("fedavg", sgd(0.1)).init(np.ones(1), 2)
    with pytest.raises(FloatingPointError, match="aggregated update is not finite"):
        apply_server_optimizer(plain(), np.array([bad]), state, 0.1)
    params, _ = apply_server_optimizer(plain(), np.array([-2.0]), state, 0.1)
    assert params.tolist() == [-1.0]


def test_cli_server_momentum_zero_is_zero_not_point_nine():
    """--server-momentum 0 ran server momentum 0.9 (``beta or 0.9``) while the result's config said 0.0;
    beta = 0 is plain averaging (the buffer is -D/lr every round)."""
    from fedlib.cli import build_parser
    from fedlib.cli.common import build_algorithm

    base = ["run", "synthetic", "--server", "momentum", "--out", "x.json"]
    change, lr = np.array([1.0, -2.0]), 0.1
    for beta in ("0", "0.5"):
        args = build_parser(("run", "synthetic")).parse_args(base + ["--server-momentum", beta])
        server = build_algorithm(args).server
        state = server.init(np.zeros(2))
        _, state = server.update(change, state, np.zeros(2), lr)
        _, state = server.update(change, state, np.zeros(2), lr)
        np.testing.assert_allclose(state.buffer, -(1 + float(beta)) * change / lr)


def test_table1_cell_momentum_zero_is_kept():
    """Cell(server_momentum=0.0) / Cell(momentum=0.0) became 0.9 (``or 0.9``). A local momentum solver with
    momentum 0 is now refused by make_solver (it would be plain SGD under the name 'momentum'): still not 0.9."""
    from fedlib.experiments.cifar10 import Cell

    cell = Cell("x", "momentum", "2", "FedNova", "fednova", "momentum", 0.02, momentum=0.0, server="momentum",
                server_momentum=0.0)
    with pytest.raises(ValueError, match=r"^momentum must be > 0 for solver 'momentum', got 0\.0"):
        cell.make_algorithm()
    algo = dataclasses.replace(cell, momentum=0.3).make_algorithm()
    assert algo.solver.momentum == 0.3
    _, state = algo.server.update(np.array([1.0]), algo.server.init(np.zeros(1)), np.zeros(1), 0.1)
    _, state = algo.server.update(np.array([1.0]), state, np.zeros(1), 0.1)
    np.testing.assert_allclose(state.buffer, [-10.0])


def test_the_factories_word_an_unknown_name_as_the_cli_flag_of_that_choice():
    """make_solver, make_algorithm and make_server_optimizer all take ``name``; each refuses an unknown one with the
    word of the CLI's flag for that choice (--solver, --algorithm, --server), as their docstrings say. Before:
    make_server_optimizer's read "server optimizer must be one of ...", a word of no flag, config key or argument."""
    import argparse

    from fedlib.algorithms import make_algorithm
    from fedlib.cli.common import add_algorithm_args
    from fedlib.solvers import make_solver, sgd

    parser = argparse.ArgumentParser()
    add_algorithm_args(parser)
    flags = {option for action in parser._actions for option in action.option_strings}
    for word, factory in (("solver", lambda: make_solver("adam", 0.1)),
                          ("algorithm", lambda: make_algorithm("fedopt", sgd(0.1))),
                          ("server", lambda: SV.make_server_optimizer("sgd"))):
        assert f"--{word}" in flags
        with pytest.raises(ValueError, match=rf"^{word} must be one of \[.*\], got '"):
            factory()


def test_make_server_optimizer_names_an_array_given_for_the_name():
    """Was: an array of several (or no) entries raised numpy's 'The truth value of an array ... is ambiguous' from
    `name in SERVER_OPTIMIZERS`, naming nothing (check_choice's arrays, commit 9177345, for this choice too)."""
    for name in (np.zeros((2, 2)), np.array([]), np.array(["plain", "adam"])):
        with pytest.raises(ValueError, match=r"^server must be one of \['plain', 'momentum', 'adam'\], got "):
            SV.make_server_optimizer(name)
        with pytest.raises(ValueError, match=r"^server must be one of"):
            SV.make_server_optimizer(name, beta=0.5)


def test_own_server_update_of_another_structure_or_order_is_named():
    """A server optimizer of your own whose update returned the model's leaves in a list for a dict model was refused
    with 'got leaf shapes [(2,)] for [(2,)]' (equal shapes: nothing said what differed), and one returning
    (new_state, new_params) with only 'got leaf shapes [()] for [(2,)]'. Now the message adds the structures
    ('a dict (keys ['w']) is paired with a list, not a dict') and, for the swapped pair, 'the pair in another order?'."""
    from fedlib.algorithms import apply_server_optimizer, make_algorithm
    from fedlib.solvers import sgd

    state = make_algorithm("fedavg", sgd(0.1)).init({"w": np.zeros(2)}, 2)
    change = {"w": np.ones(2)}
    as_list = SV.ServerOptimizer(lambda p: SV.PlainState(0), lambda c, s, p, lr: ([p["w"] + c["w"]], s), "mine")
    with pytest.raises(ValueError, match=r"got leaf shapes \[\(2,\)\] for \[\(2,\)\] \(tree structures differ: a dict "
                                         r"\(keys \['w'\]\) is paired with a list, not a dict\)$"):
        apply_server_optimizer(as_list, change, state, 0.1)
    swapped = SV.ServerOptimizer(lambda p: SV.PlainState(0), lambda c, s, p, lr: (s, {"w": p["w"] + c["w"]}), "mine")
    with pytest.raises(ValueError, match=r"got leaf shapes \[\(\)\] for \[\(2,\)\] \(tree structures differ: .*\) \(the "
                                         r"pair in another order\? update returns the model first, \(new_params, "
                                         r"new_state\)\)$"):
        apply_server_optimizer(swapped, change, state, 0.1)
    wrong_shape = SV.ServerOptimizer(lambda p: SV.PlainState(0), lambda c, s, p, lr: ({"w": np.zeros(3)}, s), "mine")
    with pytest.raises(ValueError, match=r"got leaf shapes \[\(3,\)\] for \[\(2,\)\]$"):  # shapes alone say it
        apply_server_optimizer(wrong_shape, change, state, 0.1)


def test_own_server_update_returning_a_state_of_another_kind_is_named_at_once():
    """A server optimizer of your own keeping fedlib's PlainState whose update returned None as its state ran the round
    and was refused in the next with 'state: its server optimizer state (state.server) is a NoneType, but the
    algorithm's server optimizer keeps a PlainState (...; a state of another server optimizer? ...)', blaming a state
    the user never gave. Now the round that returned it names update."""
    from fedlib.algorithms import apply_server_optimizer, make_algorithm
    from fedlib.solvers import sgd

    state = make_algorithm("fedavg", sgd(0.1)).init({"w": np.zeros(2)}, 2)
    bad = SV.ServerOptimizer(lambda p: SV.PlainState(0), lambda c, s, p, lr: ({"w": p["w"] + c["w"]}, None), "mine")
    with pytest.raises(ValueError, match=r"^server optimizer 'mine': update must return \(new_params, new_state\) with "
                                         r"new_state of the kind its init makes, a PlainState, got NoneType$"):
        apply_server_optimizer(bad, {"w": np.ones(2)}, state, 0.1)
    own = SV.ServerOptimizer(lambda p: None, lambda c, s, p, lr: ({"w": p["w"] + c["w"]}, 1.0), "own")  # own kinds
    own_state = make_algorithm("fedavg", sgd(0.1), own).init({"w": np.zeros(2)}, 2)
    assert apply_server_optimizer(own, {"w": np.ones(2)}, own_state, 0.1)[1] == 1.0  # may change type

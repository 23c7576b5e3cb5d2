"""A user-journey audit (Dec 4): an outside researcher following README.md and the docstrings with
their own small model, data, solvers and schedules. Each test failed on the code before its fix."""
from __future__ import annotations

import pytest

from fedlib.schedules import step_decay_lr


# --------------------------------------------------------------------------- step_decay_lr
@pytest.mark.parametrize("factor", [0, -1, float("nan"), 10, True])
def test_step_decay_lr_refuses_a_factor_outside_0_1(factor):
    """step_decay_lr(0.1, 60, 100, factor=10) returned 10.0 (the rate raised tenfold by a user who read
    "divided by 10"), factor=0 a rate of 0, factor=-1 a negative rate, factor=nan a NaN rate: each was
    refused only later, by an engine's check of "lr", which does not name the factor."""
    with pytest.raises(ValueError, match=r"^factor must lie in \(0, 1\]"):
        step_decay_lr(0.1, 60, 100, factor=factor)


@pytest.mark.parametrize("milestones, where", [((1.5,), r"milestones\[0\]"), ((0.5, -1), r"milestones\[1\]"),
                                               ((float("nan"),), r"milestones\[0\]"), (0.5, "milestones"),
                                               ("0.5", "milestones")])
def test_step_decay_lr_refuses_milestones_that_are_no_fractions(milestones, where):
    """A milestone of 1.5 never decayed within the run, -1 decayed from round 1, NaN failed with numpy's
    "cannot convert float NaN to integer", and a bare 0.5 with "'float' object is not iterable"."""
    with pytest.raises(ValueError, match=rf"^{where} must be"):
        step_decay_lr(0.1, 60, 100, milestones=milestones)


def test_step_decay_lr_valid_inputs_unchanged():
    assert step_decay_lr(0.1, 60, 100) == pytest.approx(0.01, rel=1e-15)
    assert step_decay_lr(0.1, 80, 100, milestones=[0.5, 0.75], factor=1) == 0.1
    assert step_decay_lr(0.1, 1, 100, milestones=(0.0,), factor=0.5) == 0.05
    assert step_decay_lr(0.1, 99, 100, milestones=()) == 0.1


# --------------------------------------------------------------------------- make_solver / train_clients
@pytest.mark.parametrize("name", ["sgd", "momentum"])
def test_make_solver_refuses_mu_for_a_solver_without_prox(name):
    """make_solver("momentum", 0.1, mu=0.5) returned plain heavy-ball momentum (mu=0.0): the proximal
    term the user asked for (FedNova with momentum + prox) was dropped without a word."""
    from fedlib.solvers import make_solver

    with pytest.raises(ValueError, match=rf"^mu: solver '{name}' has no proximal term, got mu = 0.5"):
        make_solver(name, 0.1, mu=0.5)


@pytest.mark.parametrize("name, kwargs", [("sgd", {}), ("prox", {"mu": 0.5})])
def test_make_solver_refuses_momentum_for_a_solver_without_a_buffer(name, kwargs):
    """make_solver("sgd", 0.1, momentum=0.5) returned plain SGD (momentum=0.0), the momentum dropped."""
    from fedlib.solvers import make_solver

    with pytest.raises(ValueError, match=rf"^momentum: solver '{name}' has no momentum buffer, got momentum = 0.5"):
        make_solver(name, 0.1, momentum=0.5, **kwargs)


def test_make_solver_non_numeric_mu_is_a_value_error():
    """make_solver("prox", 0.1, mu="0.5") raised TypeError ('<=' not supported ...), not a ValueError naming mu."""
    from fedlib.solvers import make_solver

    with pytest.raises(ValueError, match=r"^mu must be > 0 for the proximal solver, got '0\.5'"):
        make_solver("prox", 0.1, mu="0.5")


def test_make_solver_defaults_unchanged():
    from fedlib.solvers import make_solver, momentum_proximal_sgd, momentum_sgd, proximal_sgd, sgd

    assert make_solver("sgd", 0.1, mu=0.0) == sgd(0.1)
    assert make_solver("momentum", 0.1) == momentum_sgd(0.1, 0.9)
    assert make_solver("momentum", 0.1, momentum=0.3) == momentum_sgd(0.1, 0.3)
    assert make_solver("momentum-prox", 0.1, mu=0.5) == momentum_proximal_sgd(0.1, 0.9, 0.5)
    assert make_solver("prox", 0.1, mu=0.5, weight_decay=1e-4) == proximal_sgd(0.1, 0.5, 1e-4)


@pytest.mark.parametrize("solver, mu", [("sgd", 0.0), ("prox", 0.5)])
def test_train_clients_refuses_momentum_for_a_solver_without_a_buffer(solver, mu):
    """train_clients(..., solver="sgd", momentum=0.5) trained plain SGD: the momentum was dropped (mu was
    already refused this way)."""
    import torch
    from torch import nn

    from fedlib.experiments.custom import train_clients

    xs = [torch.randn(8, 4), torch.randn(6, 4)]
    ys = [torch.randint(0, 3, (8,)), torch.randint(0, 3, (6,))]
    with pytest.raises(ValueError, match=rf"^momentum: solver '{solver}' has no momentum buffer"):
        train_clients(nn.Linear(4, 3), xs, ys, rounds=1, solver=solver, mu=mu, momentum=0.5)


# --------------------------------------------------------------------------- run_sequential(initial_state=...)
def _sequential(server=None, rounds=2, **kwargs):
    import numpy as np

    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd

    def grad(x, i, t, k):
        return x - np.array([1.0, -1.0]) * (i + 1)

    params = None if "initial_state" in kwargs else np.zeros(2)
    return run_sequential(make_algorithm("fednova", sgd(0.1), server), params, grad, [0.5, 0.5], FixedSteps([1, 2]),
                          rounds, **kwargs)


def test_run_sequential_refuses_a_state_of_another_server_optimizer():
    """A state saved under server momentum resumed under the plain server ran on: the plain server's update
    turned the MomentumState into PlainState(count=4), the saved buffer dropped without a word; the other
    way round failed with AttributeError: 'PlainState' object has no attribute 'buffer'. The other resumes
    (run_batched, the stacked engines) refuse both with server_state_mismatch."""
    from fedlib.server import adam, momentum

    with_momentum = _sequential(momentum(0.9)).state
    plain_state = _sequential().state
    with pytest.raises(ValueError, match=r"^initial_state: the saved server optimizer state is a MomentumState"):
        _sequential(initial_state=with_momentum)
    for server in (momentum(0.9), adam()):
        with pytest.raises(ValueError, match=r"^initial_state: the saved server optimizer state is a PlainState"):
            _sequential(server, initial_state=plain_state)
    resumed = _sequential(momentum(0.9), initial_state=with_momentum).state   # the same optimizer continues
    assert resumed.round == 4 and type(resumed.server).__name__ == "MomentumState"


def test_run_sequential_refuses_a_non_finite_initial_state():
    """initial_state with a NaN model failed in round 0 with FloatingPointError 'the aggregated update is not
    finite (diverged)': a divergence that never happened (algorithm.init refuses such params by name)."""
    import numpy as np

    state = _sequential().state._replace(params=np.array([np.nan, 0.0]))
    with pytest.raises(ValueError, match=r"^initial_state\.params hold NaN or inf"):
        _sequential(initial_state=state)


# --------------------------------------------------------------------------- FederatedAlgorithm in your own loop
def _own_loop_round(name="fednova"):
    import numpy as np

    from fedlib.algorithms import ClientUpdate, make_algorithm
    from fedlib.sampling import full_participation
    from fedlib.solvers import sgd

    algo = make_algorithm(name, sgd(0.1))
    state = algo.init(np.zeros(2), 3)
    updates = [ClientUpdate(i, np.ones(2) * (i + 1), 2.0, 2) for i in range(3)]
    return algo, state, full_participation([0.2, 0.3, 0.5]), updates


@pytest.mark.parametrize("p, message", [([0.5, 0.5], r"p must have 3 entries"), ([2, 3, 5], r"p must sum to 1"),
                                        ([float("nan"), 0.5, 0.5], r"p contains NaN")])
@pytest.mark.parametrize("name", ["fedavg", "fednova"])
def test_apply_checks_p_for_every_algorithm(name, p, message):
    """The README's loop passes p to apply; without variance reduction a p of counts, of NaN or for another
    number of clients was ignored without a word (with VR the same p was refused)."""
    algo, state, part, updates = _own_loop_round(name)
    with pytest.raises(ValueError, match=rf"^{message}"):
        algo.apply(state, part, updates, 0.1, p)
    algo.apply(state, part, updates, 0.1, [0.2, 0.3, 0.5])   # a right one, or none, passes
    algo.apply(state, part, updates, 0.1)


def test_distributed_apply_checks_p_for_every_algorithm():
    from fedlib.distributed import LocalCommunicator, distributed_apply

    algo, state, part, updates = _own_loop_round()
    with pytest.raises(ValueError, match=r"^p must sum to 1"):
        distributed_apply(LocalCommunicator(), algo, state, part, updates, 0.1, [2, 3, 5])


@pytest.mark.parametrize("client", [1.5, True, "1", 1.0])
def test_client_init_and_final_refuse_a_client_that_is_no_integer(client):
    """client_init(state, 1.5) returned client 1's start without a word (VR algorithms refused it) and
    client_final(state, 1.5, run) labelled the update client 1 (int() truncated it)."""
    import numpy as np

    algo, state, _, _ = _own_loop_round()
    run = algo.solver.run(state.params, lambda x, k: np.ones(2), 1)
    with pytest.raises(ValueError, match=r"^client must be an integer index"):
        algo.client_init(state, client)
    with pytest.raises(ValueError, match=r"^client must be an integer index"):
        algo.client_final(state, client, run)
    assert algo.client_final(state, np.int64(2), run).client == 2


# --------------------------------------------------------------------------- lr_at
@pytest.mark.parametrize("value", [0.0, -0.1, float("nan"), None, "0.1"])
def test_run_sequential_names_lr_at_when_it_returns_no_learning_rate(value):
    """run_sequential(..., lr_at=lambda t: 0.0) failed with 'lr must be a finite number > 0, got 0.0' (the
    solver's parameter, not the callable the user passed); lr_at returning None with a TypeError."""
    with pytest.raises(ValueError, match=r"^lr_at\(0\) must return the round's client learning rate"):
        _sequential(lr_at=lambda t: value)


def test_run_batched_names_lr_at_when_it_returns_no_learning_rate():
    from fedlib.algorithms import make_algorithm
    from fedlib.data import synthetic
    from fedlib.engines.batched import run_batched
    from fedlib.problems.logistic import LogisticProblem
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd

    problem = LogisticProblem(synthetic(num_clients=2, dim=3, num_classes=2, num_samples=[10, 20], seed=0))
    with pytest.raises(ValueError, match=r"^lr_at\(1\) must return the round's client learning rate, a finite number "
                                         r"> 0, got -0\.1"):
        run_batched(make_algorithm("fednova", sgd(0.1)), problem, FixedSteps([1, 2]), 2, batch_size=5,
                    lr_at=lambda t: 0.1 if t == 0 else -0.1)
    run = run_batched(make_algorithm("fednova", sgd(0.1)), problem, FixedSteps([1, 2]), 2, batch_size=5,
                      lr_at=lambda t: 0.05)
    assert [h["lr"] for h in run.history] == [0.05, 0.05]


def test_stacked_engine_names_the_runs_lr_at():
    import numpy as np
    import torch
    from torch import nn

    from fedlib.algorithms import make_algorithm
    from fedlib.engines.stacked import RunSpec
    from fedlib.experiments.custom import TensorEngine
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd

    x, y = torch.randn(12, 4, dtype=torch.float64), torch.arange(12) % 3
    run = RunSpec(make_algorithm("fednova", sgd(0.1)), [np.arange(4), np.arange(4, 12)], FixedSteps([1, 2]),
                  lr_at=lambda t: 0.0)
    with pytest.raises(ValueError, match=r"^runs\[0\]\.lr_at\(0\) must return the round's client learning rate"):
        TensorEngine(nn.Linear(4, 3).double(), x, y, [run], rounds=1, batch_size=4).train()


# --------------------------------------------------------------------------- fedlib.rule.aggregate
def test_aggregate_refuses_a_mapping_of_clients():
    """aggregate({0: delta_0, 1: delta_1}, p, a_norms) aggregated the dict's keys 0 and 1 as if they were the
    changes and returned the number 0.375, not a model change."""
    import numpy as np

    from fedlib.rule import aggregate

    deltas = {0: np.ones(2), 1: np.ones(2)}
    with pytest.raises(ValueError, match=r"^deltas must be a sequence of the clients' changes.*got a dict"):
        aggregate(deltas, [0.5, 0.5], [1, 2])
    assert aggregate(list(deltas.values()), [0.5, 0.5], [1, 2]).change.tolist() == [1.125, 1.125]


@pytest.mark.parametrize("algorithm", ["fedavg", "fednova"])
def test_aggregate_checks_local_steps_whenever_given(algorithm):
    """local_steps=[0, -3] (or of another length) passed without a word unless tau_eff='local_steps'."""
    import numpy as np

    from fedlib.rule import aggregate

    with pytest.raises(ValueError, match=r"^local_steps must be >= 1 for every client \(client 0 has 0\)"):
        aggregate([np.ones(2)] * 2, [0.5, 0.5], [1, 2], algorithm, local_steps=[0, -3])
    with pytest.raises(ValueError, match=r"^local_steps must have 2 entries"):
        aggregate([np.ones(2)] * 2, [0.5, 0.5], [1, 2], algorithm, local_steps=[1, 2, 3])
    aggregate([np.ones(2)] * 2, [0.5, 0.5], [1, 2], algorithm, local_steps=[1, 2])


@pytest.mark.parametrize("seed", ["abc", -1, 1.5, None])
def test_run_sequential_checks_its_seed_under_full_participation(seed):
    """run_sequential(..., seed='abc') (or -1, 1.5, None) ran with full participation, which draws nothing;
    run_batched and run_replicas refuse the same seed."""
    with pytest.raises(ValueError, match=r"^seed must be an integer >= 0"):
        _sequential(seed=seed)


def test_run_sequential_checks_sampling_before_the_first_round():
    """sampling='bogus' passed when rounds=0 (only each round's draw looked at it)."""
    with pytest.raises(ValueError, match=r"^sampling must be one of"):
        _sequential(rounds=0, sampling="bogus")


# --------------------------------------------------------------------------- train_clients' test set
@pytest.mark.parametrize("test_x_shape, test_y_len, message", [
    ((3, 5), 3, r"^test_x must be \(n, \*feature_shape\) with the clients' feature shape \(4,\), got shape \(3, 5\)"),
    ((3, 4), 2, r"^test_y must hold one label per row of test_x \(3\), got shape \(2,\)")])
def test_train_clients_names_test_x_and_test_y(test_x_shape, test_y_len, message):
    """A test set of the wrong feature shape, or with too few labels, was refused as 'test_features /
    test_labels must match the training features' shape': TensorEngine's parameters, which a caller of
    train_clients never passed."""
    import torch
    from torch import nn

    from fedlib.experiments.custom import train_clients

    xs = [torch.randn(8, 4), torch.randn(6, 4)]
    ys = [torch.randint(0, 3, (8,)), torch.randint(0, 3, (6,))]
    with pytest.raises(ValueError, match=message):
        train_clients(nn.Linear(4, 3), xs, ys, rounds=1, test_x=torch.randn(*test_x_shape),
                      test_y=torch.zeros(test_y_len, dtype=torch.long))


# --------------------------------------------------------------------------- checkpoint / resume in your own loop
def _own_torch_round(algo, server, model, opt):
    import torch
    import torch.nn.functional as F

    from fedlib.sampling import full_participation

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(4, 3, generator=g, dtype=torch.float64), torch.randint(0, 2, (4,), generator=g)
    updates = []
    for i in range(2):
        opt.begin(algo.client_init(server, i))
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
        updates.append(algo.client_final(server, i, opt.solver_state))
    return algo.apply(server, full_participation([0.5, 0.5]), updates, opt.lr, [0.5, 0.5])[0]


def _updates_of(algo, server, model, opt):
    """(participation, updates, lr, p) of one round from ``server`` (a valid torch state)."""
    from fedlib.sampling import full_participation

    updates = []
    for i in range(2):
        opt.begin(algo.client_init(server, i))
        opt.zero_grad()
        model(torch_ones(model)).sum().backward()
        opt.step()
        updates.append(algo.client_final(server, i, opt.solver_state))
    return full_participation([0.5, 0.5]), updates, opt.lr, [0.5, 0.5]


def torch_ones(model):
    import torch

    return torch.ones(1, model.in_features, dtype=torch.float64)


@pytest.mark.parametrize("variance", [False, True])
def test_resume_an_own_loop_from_a_checkpoint(tmp_path, variance):
    """The optim docstring says to checkpoint the server state between rounds; the state comes back as numpy,
    and resuming a ClientOptimizer loop failed: begin refused the numpy params pointing at parameters_of, and
    with the params alone turned into tensors apply failed deep in the server optimizer with TypeError
    "unsupported operand type(s) for -: 'numpy.ndarray' and 'Tensor'". Now to_torch_tree turns the whole state
    back, and a state of mixed kinds is refused by name."""
    import torch

    from fedlib.algorithms import make_algorithm
    from fedlib.checkpoint import load_checkpoint, save_checkpoint, to_torch_tree
    from fedlib.optim import ClientOptimizer, parameters_of
    from fedlib.server import momentum
    from fedlib.solvers import momentum_sgd

    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2).double()
    algo = make_algorithm("fednova-vr" if variance else "fednova", momentum_sgd(0.05), momentum(0.9))
    opt = ClientOptimizer(model.parameters(), algo.solver)
    server = _own_torch_round(algo, algo.init(parameters_of(model), 2), model, opt)
    path = save_checkpoint(tmp_path / "run.ckpt", config={}, round_done=1, state=server, history=[{}])
    saved = load_checkpoint(path)["state"]
    with pytest.raises(ValueError, match=r"to_torch_tree\(state, like=parameters_of\(model\)\)"):
        opt.begin(algo.client_init(saved, 0))
    half = saved._replace(params=[torch.as_tensor(v) for v in saved.params])
    mixed = (r"^solver_state\.correction must be a list of tensors.*to_torch_tree" if variance   # begin sees it first
             else r"^state\.server holds numpy arrays but state\.params holds torch tensors")
    with pytest.raises(ValueError, match=mixed):
        _own_torch_round(algo, half, model, opt)
    with pytest.raises(ValueError, match=r"^state\.server holds numpy arrays but state\.params holds torch tensors"):
        algo.apply(half, *_updates_of(algo, server, model, opt))
    straight = _own_torch_round(algo, server, model, opt)
    resumed = _own_torch_round(algo, to_torch_tree(saved, like=parameters_of(model)), model, opt)
    for a, b in zip(straight.params, resumed.params):
        assert torch.equal(a, b)
    assert torch.equal(straight.server.buffer[0], resumed.server.buffer[0])


def test_to_torch_tree_refuses_a_like_without_tensors():
    import numpy as np

    from fedlib.checkpoint import to_torch_tree

    with pytest.raises(ValueError, match=r"^like must be a torch tensor or a list of them"):
        to_torch_tree([np.zeros(1)], like=[np.zeros(1)])


# --------------------------------------------------------------------------- your own server optimizer
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


@pytest.mark.parametrize("kwargs, message", [
    ({"solver_at": "solver"}, r"^solver_at must be a callable \(round, client\) -> LocalSolver, got LocalSolver "
                              r"\(one solver for every client: make_algorithm\(name, solver\)\)"),
    ({"lr_at": 0.1}, r"^lr_at must be a callable round -> client lr, got float"),
    ({"metric_fn": "loss"}, r"^metric_fn must be a callable \(params, round\) -> value, got str")])
def test_run_sequential_names_a_hook_that_is_not_callable(kwargs, message):
    """solver_at=sgd(0.1) (a solver, not a function of round and client) failed in round 0 with TypeError
    "'LocalSolver' object is not callable"; lr_at=0.1 with "'float' object is not callable"."""
    from fedlib.solvers import sgd

    if kwargs.get("solver_at") == "solver":
        kwargs = {"solver_at": sgd(0.1)}
    with pytest.raises(ValueError, match=message):
        _sequential(**kwargs)

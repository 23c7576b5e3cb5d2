"""fedlib.engines.reference.run_sequential (the per-client loop): what it checks before the first round:
the resumed state, the seed, the sampling scheme, the hooks (lr_at, solver_at, metric_fn) and what
lr_at returns; a list of tau_i as the schedule."""
from __future__ import annotations

import numpy as np
import pytest

from fedlib.solvers import sgd


# --------------------------------------------------------------------------- run_sequential
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


@pytest.mark.parametrize("value", [0.0, -0.1, float("nan"), None, "0.1"])
def test_run_sequential_names_lr_at_when_it_returns_no_learning_rate(value):
    """run_sequential(..., lr_at=lambda t: 0.0) failed with 'lr must be a finite number > 0, got 0.0' (the
    solver's parameter, not the callable the user passed); lr_at returning None with a TypeError."""
    with pytest.raises(ValueError, match=r"^lr_at\(0\) must return the round's client learning rate"):
        _sequential(lr_at=lambda t: value)


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


@pytest.mark.parametrize("kwargs, message", [
    ({"grad_fn": lambda x, client: x}, r"^grad_fn must be a callable \(params, client, round, step\) -> grads, taking 4 "
                                        r"positional arguments: grad_fn\(x, client\) does not \(too many positional"),
    ({"metric_fn": lambda params: 0.0}, r"^metric_fn must be a callable \(params, round\) -> value, taking 2 "
                                        r"positional arguments: metric_fn\(params\) does not"),
    ({"lr_at": lambda round, client: 0.1}, r"^lr_at must be a callable round -> client lr, taking 1 positional "
                                           r"argument: lr_at\(round, client\) does not \(missing a required argument")])
def test_run_sequential_names_a_hook_of_the_wrong_signature(kwargs, message):
    """A grad_fn (metric_fn, lr_at) that cannot take the arguments run_sequential passes is refused before the first
    round, naming it and the expected call. Before: Python's "<lambda>() takes 2 positional arguments but 4 were
    given" from inside round 0."""
    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.schedules import FixedSteps

    grad = kwargs.pop("grad_fn", lambda x, i, t, k: x)
    with pytest.raises(ValueError, match=message):
        run_sequential(make_algorithm("fedavg", sgd(0.1)), np.zeros(1), grad, [0.5, 0.5], FixedSteps([1, 2]), 1,
                       **kwargs)


def test_run_sequential_takes_a_grad_fn_whose_signature_binds_or_cannot_be_read():
    """*args, a partial, defaults and a wrapper (functools.wraps of a function of other arguments) are taken, and
    give the plain function's numbers."""
    import functools

    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.schedules import FixedSteps

    def plain(x, i, t, k):
        return x - (i + 1.0)

    def wrapper(f):
        @functools.wraps(f)
        def inner(*args):
            return f(args[0], args[1])
        return inner

    grads = [plain, lambda *args: args[0] - (args[1] + 1.0), functools.partial(lambda c, x, i, t, k: x - (i + c), 1.0),
             lambda x, i, t, k=0, extra=None: x - (i + 1.0), wrapper(lambda x, i: x - (i + 1.0))]
    runs = [run_sequential(make_algorithm("fednova", sgd(0.1)), np.zeros(1), g, [0.5, 0.5], FixedSteps([1, 2]),
                           2).state.params for g in grads]
    for params in runs[1:]:
        np.testing.assert_array_equal(params, runs[0])


def test_run_sequential_with_a_list_of_local_steps_as_schedule():
    """A list of tau_i in place of a schedule object raised AttributeError "'list' object has no
    attribute 'local_steps'" from inside the loop; now a ValueError names schedule and FixedSteps."""
    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.schedules import FixedSteps

    algo = make_algorithm("fednova", sgd(0.1))
    grad = lambda x, i, t, k: x - i  # noqa: E731
    with pytest.raises(ValueError, match=r"schedule must be an object with local_steps.*FixedSteps\(\[1, 3\]\)"):
        run_sequential(algo, np.zeros(1), grad, [0.5, 0.5], [1, 3], rounds=1)
    # FedNova on F_i = (x - i)^2 / 2 from 0, tau = (1, 3), lr 0.1: d_0 = 0, d_1 = -(1 - 0.9^3)/(0.1*3)
    run = run_sequential(algo, np.zeros(1), grad, [0.5, 0.5], FixedSteps([1, 3]), rounds=1)
    assert run.state.params[0] == pytest.approx(2.0 * 0.5 * (1 - 0.9 ** 3) / 3)


def test_run_sequential_initial_state_for_another_number_of_clients():
    """initial_state from a 5-client run continued with 4 clients' p was accepted without VR,
    and the returned state still said num_clients=5 (client index 4 would then pass apply's
    check); now refused, pointing at params=initial_state.params."""
    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.schedules import FixedSteps

    algo = make_algorithm("fednova", sgd(0.05))
    grad = lambda x, i, t, k: x - i  # noqa: E731
    first = run_sequential(algo, np.zeros(2), grad, np.full(5, 0.2), FixedSteps([3] * 5), rounds=1)
    with pytest.raises(ValueError, match="initial_state is a server state for 5 clients but p has 4"):
        run_sequential(algo, None, grad, np.full(4, 0.25), FixedSteps([3] * 4), rounds=1, initial_state=first.state)
    again = run_sequential(algo, None, grad, np.full(5, 0.2), FixedSteps([3] * 5), rounds=1, initial_state=first.state)
    assert again.state.round == 2 and again.state.num_clients == 5
    warm = run_sequential(algo, first.state.params, grad, np.full(4, 0.25), FixedSteps([3] * 4), rounds=1)
    assert warm.state.num_clients == 4


@pytest.mark.parametrize("name, server", [("fednova", "momentum"), ("scaffold", None), ("fedavg", None)])
def test_first_round_continues_a_run_bit_for_bit(name, server):
    """A run split in two calls (rounds 0-2, then first_round=3 from the state the first ended on) gives
    one 7-round call's model, state and diagnostics exactly, with random participation, random local
    steps (RandomSteps draws per round), a decaying lr_at and server momentum; first_round defaults to
    initial_state.round. Before first_round the second call counted from round 0 again: it drew round 0's
    clients and steps and lr a second time (while its state.round went on from 3)."""
    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.schedules import RandomSteps
    from fedlib.server import momentum

    rng = np.random.default_rng(3)
    centres, scales = rng.normal(size=(5, 3)), rng.uniform(0.5, 2.0, size=5)
    seen = []

    def grad(x, i, t, k):
        seen.append((t, i, k))
        return scales[i] * (x - centres[i])

    def run(rounds, **kwargs):
        algo = make_algorithm(name, sgd(0.05), momentum(0.5) if server else None)
        return run_sequential(algo, kwargs.pop("params", np.zeros(3)), grad, np.full(5, 0.2), RandomSteps(5, 1, 4, seed=7),
                              rounds, sampling="uniform", clients_per_round=3, seed=11,
                              lr_at=lambda t: 0.05 / (1 + t), metric_fn=lambda x, t: (t, float(x @ x)), **kwargs)

    whole = run(7)
    seen_whole, seen[:] = list(seen), []
    first = run(3)
    rest = run(4, params=None, initial_state=first.state, first_round=3)
    assert seen == seen_whole and {t for t, _, _ in seen} == set(range(7))
    np.testing.assert_array_equal(rest.state.params, whole.state.params)
    assert rest.state.round == whole.state.round == 7
    assert len(first.diagnostics + rest.diagnostics) == len(whole.diagnostics) == 7
    for split, one in zip(first.diagnostics + rest.diagnostics, whole.diagnostics):
        assert split._fields == one._fields
        for a, b in zip(split, one):
            np.testing.assert_array_equal(np.asarray(a, dtype=object), np.asarray(b, dtype=object))
    assert first.metrics + rest.metrics[1:] == whole.metrics and rest.metrics[0] == first.metrics[-1] == whole.metrics[3]
    by_default = run(4, params=None, initial_state=first.state)       # first_round defaults to the state's round
    np.testing.assert_array_equal(by_default.state.params, whole.state.params)
    assert by_default.metrics == rest.metrics
    restarted = run(4, params=None, initial_state=first.state, first_round=0)  # the old behaviour: round 0 again
    assert not np.array_equal(restarted.state.params, whole.state.params)
    assert restarted.metrics[0] == (0, whole.metrics[3][1])


@pytest.mark.parametrize("value", [-1, 1.5, "3", True])
def test_first_round_must_be_a_round_index(value):
    with pytest.raises(ValueError, match=r"^first_round must be"):
        _sequential(first_round=value)
    state = _sequential().state
    with pytest.raises(ValueError, match=r"^initial_state\.round must be"):   # the default comes from the state
        _sequential(initial_state=state._replace(round=value))


@pytest.mark.parametrize("params", [np.zeros(2), [np.zeros(2), np.zeros(3)], {"w": np.zeros(2)}])
def test_run_sequential_names_a_grad_fn_that_returns_none(params):
    """A grad_fn without a return statement: before, a bare array model failed with "grads: a leaf has shape ()
    but the parameter has (2,)" (naming neither grad_fn nor the call, nor None); now the message says grad_fn
    returned None, with the client, round and step of the call."""
    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.schedules import FixedSteps

    def forgot_return(x, client, round_index, step):
        if client == 1 and step == 1:
            return None
        return x

    with pytest.raises(ValueError, match=r"^grad_fn returned None \(grad_fn\(params, client=1, round=0, step=1\); "
                                         r"a missing return statement\?\)"):
        run_sequential(make_algorithm("fedavg", sgd(0.1)), params, forgot_return, [0.5, 0.5], FixedSteps([1, 2]), 2)


@pytest.mark.parametrize("params, grads, cause", [
    (np.zeros(2), 0.0, r"grads: a leaf has shape \(\) but the parameter has \(2,\)"),
    ([np.zeros(2)], np.zeros(2), "grads .or correction. must have the structure of params"),
    ([np.zeros(2)], [np.zeros((2, 1))], r"grads: a leaf has shape \(2, 1\)")])
def test_run_sequential_names_grad_fn_when_its_gradients_do_not_fit(params, grads, cause):
    """Before: the solver's message alone ("grads: a leaf has shape () but the parameter has (2,)"), not saying
    that it came from grad_fn, nor from which call; now it starts with grad_fn and names the call."""
    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.schedules import FixedSteps

    with pytest.raises(ValueError, match=r"^grad_fn must return a tree like params: grad_fn\(params, client=0, "
                                         r"round=0, step=0\) returned \w+ gradients that do not fit \(" + cause):
        run_sequential(make_algorithm("fedavg", sgd(0.1)), params, lambda x, i, t, k: grads, [0.5, 0.5],
                       FixedSteps([1, 2]), 1)


def _torch_grad_fns():
    import torch

    weight = torch.full((3, 3), 0.1, dtype=torch.float64, requires_grad=True)  # e.g. a model's parameter

    def from_a_parameter(x, client, round_index, step):
        return [weight @ x[0]]

    def create_graph(x, client, round_index, step):
        w = x[0].detach().requires_grad_()
        (g,) = torch.autograd.grad((w ** 2).sum(), w, create_graph=True)
        return [g]

    def in_place(x, client, round_index, step):
        x[0].requires_grad_()
        (g,) = torch.autograd.grad((x[0] ** 2).sum(), x[0])
        return [g]

    return from_a_parameter, create_graph, in_place


@pytest.mark.parametrize("which, message", [
    (0, r"^grad_fn returned gradients that require grad \(grad_fn\(params, client=0, round=0, step=0\), leaf 0: "),
    (1, r"^grad_fn returned gradients that require grad \(grad_fn\(params, client=0, round=0, step=0\), leaf 0: "),
    (2, r"^grad_fn made params require grad \(grad_fn\(params, client=0, round=0, step=0\): leaf 0 of the params "
        r"it was given requires grad after the call")])
def test_run_sequential_refuses_a_grad_fn_that_builds_an_autograd_graph(which, message):
    """Torch gradients that require grad (from a model's parameter, or torch.autograd.grad(create_graph=True)), or
    params made to require grad in place: before, the run went on, each local step extending one autograd graph
    through every later step, client and round (after 3 rounds state.params[0] required grad, its grad_fn
    chaining all of them: memory without bound). Now the first such step is refused, naming grad_fn and the call;
    detached gradients of the same values still run (and give the numpy run's model)."""
    import torch

    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.schedules import FixedSteps

    def run(grad_fn, params):
        return run_sequential(make_algorithm("fednova", sgd(0.1)), params, grad_fn, [0.5, 0.5], FixedSteps([2, 3]), 3)

    grad_fn = _torch_grad_fns()[which]
    with pytest.raises(ValueError, match=message + r".* autograd graph that grows over the steps and rounds"):
        run(grad_fn, [torch.ones(3, dtype=torch.float64)])
    if which == 2:
        return
    detached = run(lambda *a: [g.detach() for g in grad_fn(*a)], [torch.ones(3, dtype=torch.float64)])
    assert not detached.state.params[0].requires_grad
    expected = run(lambda x, *_: [(np.full((3, 3), 0.1) @ x[0]) if which == 0 else 2 * x[0]], [np.ones(3)])
    np.testing.assert_allclose(detached.state.params[0].numpy(), expected.state.params[0], rtol=1e-14)


@pytest.mark.parametrize("part", ["params", "variates"])
def test_run_sequential_refuses_an_initial_state_that_requires_grad(part):
    """An initial_state whose tensors require grad (algorithm.init refuses such params, this path did not): before,
    every round's update was recorded in an autograd graph hanging off it; now refused, naming the part."""
    import torch

    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.schedules import FixedSteps

    algo = make_algorithm("scaffold", sgd(0.1))
    state = algo.init([torch.ones(2, dtype=torch.float64)], 2)
    if part == "params":
        state = state._replace(params=[state.params[0].clone().requires_grad_()])
    else:
        state = state._replace(variates=state.variates._replace(
            mean=[state.variates.mean[0].clone().requires_grad_()]))
    with pytest.raises(ValueError, match=rf"^initial_state\.{part}: leaf \d is a tensor that requires grad"):
        run_sequential(algo, None, lambda x, *_: [g.clone() for g in x], [0.5, 0.5], FixedSteps([1, 2]), 1,
                       initial_state=state)


def test_a_participant_without_local_steps_is_named_with_its_round():
    """A schedule giving a participant 0 steps in round 2 failed in client_final with 'local_steps: client 1 took no
    local step (...)', without the round or the schedule; run_batched said 'schedule: round 2 gives a participant 0
    local steps'. Now run_sequential names both, before the round trains; a non-participant may have 0 steps."""
    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.sampling import Participation

    class Idle:
        def local_steps(self, t):
            return np.array([1, 0]) if t == 2 else np.array([1, 2])

    algo = make_algorithm("fednova", sgd(0.1))
    with pytest.raises(ValueError, match=r"^schedule: round 2 gives participant client 1 0 local steps \(need >= 1"):
        run_sequential(algo, np.zeros(2), lambda x, i, t, k: x, [0.5, 0.5], Idle(), 4)
    only_client_0 = lambda t: Participation(np.array([0]), np.array([1.0]))  # noqa: E731
    run = run_sequential(algo, np.zeros(2), lambda x, i, t, k: x - 1.0, [0.5, 0.5], Idle(), 4, sampling=only_client_0)
    assert run.state.round == 4 and [d.clients.tolist() for d in run.diagnostics] == [[0]] * 4

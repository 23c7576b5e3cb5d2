"""``fedlib.optim.ClientOptimizer``: a local solver inside a user's own PyTorch loop.

Checked against torch's own optimizer (the same steps), against the closed forms of
:math:`\\|a_i\\|_1` (App. B) and against :func:`fedlib.engines.reference.run_sequential` on the
same mini-batches (whole federated runs, every algorithm family). The optim docstring's loop leaves the
global model in the model, resumes from a checkpoint, and what ``begin`` / ``copy_into`` refuse is named
(a client solver with another base lr, a server state aliasing the model); named_parameters and
average_buffers' input; the steps are torch's multi-tensor SGD's."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fedlib.algorithms import make_algorithm
from fedlib.engines.reference import run_sequential
from fedlib.optim import ClientOptimizer, average_buffers, buffers_of, copy_into, parameters_of
from fedlib.rng import generator
from fedlib.sampling import full_participation, sample_clients
from fedlib.schedules import FixedSteps
from fedlib.server import momentum as server_momentum
from fedlib.solvers import LocalSolver, decayed_sgd, momentum_proximal_sgd, momentum_sgd, proximal_sgd, sgd

D = torch.float64
#: the CUDA cases run on a GPU machine (scripts/gpu_run.sh runs this file with -m cuda)
DEVICES = ["cpu"] + ([pytest.param("cuda", marks=pytest.mark.cuda)] if torch.cuda.is_available() else [])


def _model(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3)).to(D)


def _data(m=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    xs = [torch.randn(n, 5, generator=g, dtype=D) + torch.randn(5, generator=g, dtype=D) for n in (9, 14, 25)[:m]]
    return xs, [(x[:, :3] * torch.tensor([1.0, -1.0, 0.5], dtype=D)).argmax(1) for x in xs]


def _batch(xs, ys, client, t, k, b=4):
    """The mini-batch of (client, round, step), from its own seeded stream."""
    idx = torch.as_tensor(generator(7, "batches", t, client, k).choice(len(xs[client]), size=b, replace=False))
    return xs[client][idx], ys[client][idx]


def _max_diff(a, b):
    return max(float((u.detach() - v.detach()).abs().max()) for u, v in zip(a, b))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("momentum,weight_decay", [(0.0, 0.0), (0.9, 1e-3), (0.5, 0.0)])
def test_same_steps_as_torch_sgd(momentum, weight_decay, device):
    """SGD / heavy ball with weight decay: the steps of torch.optim.SGD (dampening 0, no Nesterov)."""
    model = _model().to(device)
    twin = copy.deepcopy(model)
    solver = momentum_sgd(0.1, momentum, weight_decay) if momentum else sgd(0.1, weight_decay)
    opt = ClientOptimizer(model.parameters(), solver)
    ref = torch.optim.SGD(twin.parameters(), lr=0.1, momentum=momentum, weight_decay=weight_decay)
    opt.begin(solver.init(parameters_of(model)))
    xs, ys = _data()
    for k in range(8):
        x, y = (v.to(device) for v in _batch(xs, ys, 2, 0, k))
        for net, o in ((model, opt), (twin, ref)):
            o.zero_grad()
            F.cross_entropy(net(x), y).backward()
            o.step()
    assert _max_diff(model.parameters(), twin.parameters()) < 1e-13
    assert opt.local_steps == 8


@pytest.mark.parametrize("trial", range(6))
def test_a_norm_is_the_closed_form(trial):
    """The optimizer's online ||a_i||_1 after tau steps equals the solver's closed form (App. B)."""
    rng = np.random.default_rng(trial)
    lr, rho, mu, tau = 0.05, float(rng.uniform(0, 0.95)), float(rng.uniform(0, 5)), int(rng.integers(1, 30))
    solver = [sgd(lr), proximal_sgd(lr, mu), momentum_sgd(lr, rho), momentum_proximal_sgd(lr, rho, mu),
              decayed_sgd(lr, gamma=0.9), momentum_proximal_sgd(lr, rho, mu, weight_decay=0.01)][trial]
    model = _model(trial)
    opt = ClientOptimizer(model.parameters(), solver)
    opt.begin(solver.init(parameters_of(model)))
    xs, ys = _data()
    for k in range(tau):
        opt.zero_grad()
        x, y = _batch(xs, ys, 1, 0, k)
        F.cross_entropy(model(x), y).backward()
        opt.step()
    assert opt.a_norm == pytest.approx(solver.a_norm(tau), rel=1e-12)
    assert opt.a_norm == pytest.approx(float(solver.a_vector(tau).sum()), rel=1e-12)


def _user_loop(algo, model, xs, ys, steps, rounds, p, *, sampling="full", q=None, lrs=None):
    """What a user writes: their model, their loss, ClientOptimizer + algorithm.apply."""
    server = algo.init(parameters_of(model), len(xs))
    opt = ClientOptimizer(model.parameters(), algo.solver)
    diags = []
    for t in range(rounds):
        if lrs is not None:
            opt.param_groups[0]["lr"] = lrs(t)  # what an lr scheduler stepped once per round does
        part = full_participation(p) if sampling == "full" else sample_clients(sampling, p, q, 0, t)
        updates = []
        for i in part.clients:
            opt.begin(algo.client_init(server, int(i)))
            for k in range(steps[i]):
                x, y = _batch(xs, ys, int(i), t, k)
                opt.zero_grad()
                F.cross_entropy(model(x), y).backward()
                opt.step()
            updates.append(algo.client_final(server, int(i), opt.solver_state))
        server, diag = algo.apply(server, part, updates, opt.lr, p)
        diags.append(diag)
    return server, diags


def _reference(algo, model, xs, ys, steps, rounds, p, **kw):
    names = [n for n, _ in model.named_parameters()]
    plain = copy.deepcopy(model)

    def loss(prm, x, y):
        return F.cross_entropy(torch.func.functional_call(plain, dict(zip(names, prm)), (x,)), y)

    grad = torch.func.grad(loss)

    def grad_fn(prm, client, t, k):
        return list(grad(list(prm), *_batch(xs, ys, client, t, k)))

    return run_sequential(algo, parameters_of(model), grad_fn, p, FixedSteps(steps), rounds, **kw)


@pytest.mark.parametrize("name,solver,server", [
    ("fedavg", momentum_sgd(0.05, 0.9, weight_decay=1e-3), None),
    ("fednova", momentum_sgd(0.05, 0.9, weight_decay=1e-3), None),
    ("fednova", momentum_proximal_sgd(0.05, 0.6, mu=0.5), None),
    ("fedprox", proximal_sgd(0.05, mu=1.0), None),
    ("scaffold", sgd(0.05), None),
    ("fednova-vr", momentum_sgd(0.05, 0.5), None),
    ("fednova", sgd(0.05), server_momentum(0.9)),
])
def test_federated_run_equals_the_reference_loop(name, solver, server):
    """Whole runs (heterogeneous tau_i, 4 rounds): the user's loop ends where run_sequential ends."""
    xs, ys = _data()
    p = np.array([len(x) for x in xs], dtype=float)
    p /= p.sum()
    steps = [2, 5, 11]
    algo = make_algorithm(name, solver, server)
    got, diags = _user_loop(algo, _model(), xs, ys, steps, 4, p)
    want = _reference(algo, _model(), xs, ys, steps, 4, p)
    assert _max_diff(got.params, want.state.params) < 1e-12
    for d, e in zip(diags, want.diagnostics):
        np.testing.assert_allclose(d.a_norms, e.a_norms, rtol=1e-14)
        assert d.chi2 == pytest.approx(e.chi2, abs=1e-14)
    if name.startswith("fednova") and server is None:
        assert all(abs(d.chi2) < 1e-12 for d in diags)


def test_lr_between_rounds_and_sampling():
    """A learning rate set between rounds (a scheduler) and sampled clients: as run_sequential's lr_at."""
    xs, ys = _data()
    p = np.array([len(x) for x in xs], dtype=float)
    p /= p.sum()
    steps = [3, 4, 6]
    algo = make_algorithm("fednova", momentum_sgd(0.05, 0.9))
    lrs = lambda t: 0.05 * 0.5 ** t  # noqa: E731
    got, _ = _user_loop(algo, _model(), xs, ys, steps, 3, p, sampling="with-replacement", q=2, lrs=lrs)
    want = _reference(algo, _model(), xs, ys, steps, 3, p, sampling="with-replacement", clients_per_round=2,
                      lr_at=lrs)
    assert _max_diff(got.params, want.state.params) < 1e-12


def test_missing_gradient_is_a_zero_gradient():
    """A parameter unused by the loss still takes the step (weight decay acts), unlike torch.optim.SGD."""
    model = _model()
    solver = sgd(0.1, weight_decay=0.5)
    opt = ClientOptimizer(model.parameters(), solver)
    start = parameters_of(model)
    opt.begin(solver.init(start))
    opt.zero_grad()
    model[0](torch.ones(1, 5, dtype=D)).sum().backward()  # the last layer gets no gradient
    opt.step()
    for p, s in zip(list(model.parameters())[2:], start[2:]):
        torch.testing.assert_close(p.detach(), s * (1 - 0.1 * 0.5), rtol=1e-15, atol=0)


def test_closure_and_copy_into():
    model = _model()
    solver = sgd(0.1)
    opt = ClientOptimizer(model.parameters(), solver)
    start = parameters_of(model)
    opt.begin(solver.init(start))
    xs, ys = _data()

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(model(xs[0]), ys[0])
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert torch.is_tensor(loss) and opt.local_steps == 1
    assert _max_diff(model.parameters(), start) > 0
    copy_into(model.parameters(), start)
    assert _max_diff(model.parameters(), start) == 0
    # begin() copies the start and never aliases it: the caller's tensors stay as they were
    before = [s.clone() for s in start]
    opt.begin(solver.init(start))
    opt.step(closure)
    assert _max_diff(start, before) == 0


def test_bad_use_is_refused():
    model = _model()
    params = parameters_of(model)
    solver = momentum_sgd(0.1, 0.9)
    with pytest.raises(ValueError, match="LocalSolver"):
        ClientOptimizer(model.parameters(), torch.optim.SGD)
    with pytest.raises(ValueError, match="one parameter group"):
        ClientOptimizer([{"params": model[0].parameters()}, {"params": model[2].parameters()}], solver)
    with pytest.raises(ValueError, match="weight_decay"):
        ClientOptimizer([{"params": model.parameters(), "weight_decay": 0.1}], solver)
    opt = ClientOptimizer(model.parameters(), solver)
    with pytest.raises(ValueError, match="one parameter group"):
        opt.add_param_group({"params": [torch.zeros(2, requires_grad=True)]})
    with pytest.raises(RuntimeError, match="begin"):
        opt.step()
    with pytest.raises(RuntimeError, match="begin"):
        opt.solver_state  # noqa: B018 - reading the property is what raises
    with pytest.raises(ValueError, match="SolverState"):
        opt.begin(params)
    with pytest.raises(ValueError, match="has 3 tensors but there are 4"):
        opt.begin(solver.init(params[:3]))
    with pytest.raises(ValueError, match=r"solver_state.params\[0\] is torch.float32"):
        opt.begin(solver.init([p.float() for p in params]))
    with pytest.raises(ValueError, match="list of tensors"):
        opt.begin(solver.init({"w": params[0]}))
    state = solver.init(params)
    with pytest.raises(ValueError, match="step 0"):
        opt.begin(state._replace(step=2))
    opt.begin(state)
    opt.param_groups[0]["lr"] = 0.01  # a scheduler stepped within the round
    with pytest.raises(ValueError, match="changed within a round"):
        opt.step()
    with pytest.raises(NotImplementedError, match="server state"):
        opt.state_dict()
    with pytest.raises(ValueError, match="Module"):
        parameters_of(params[0])
    frozen = _model()
    frozen[0].weight.requires_grad_(False)
    with pytest.raises(ValueError, match=r"params\[0\] does not require grad"):
        ClientOptimizer(frozen.parameters(), solver)
    trainable = [p for p in frozen.parameters() if p.requires_grad]
    opt = ClientOptimizer(trainable, solver)
    opt.begin(solver.init(parameters_of(trainable)))  # the trainable subset on both sides
    assert opt.local_steps == 0


@pytest.mark.parametrize("solver", [sgd(0.1), sgd(0.1, weight_decay=0.1), momentum_proximal_sgd(0.1, 0.5, mu=1.0),
                                    momentum_sgd(0.1, 0.9, weight_decay=0.1), decayed_sgd(0.1, gamma=0.8)])
@pytest.mark.parametrize("device", DEVICES)
def test_in_place_step_is_the_solver_update(solver, device):
    """Random parameters, gradients and a VR correction: the in-place multi-tensor step equals
    LocalSolver.update step for step, and the caller's gradients are never written."""
    g = torch.Generator().manual_seed(3)
    shapes = [(4, 3), (3,), (2, 2, 2)]
    params = [nn.Parameter(torch.randn(s, generator=g, dtype=D).to(device)) for s in shapes]
    start = [p.detach().clone() for p in params]
    corr = [torch.randn(s, generator=g, dtype=D).to(device) for s in shapes]
    kept = [s.clone() for s in start]
    opt = ClientOptimizer(params, solver)
    opt.begin(solver.init(start, corr))
    want = solver.init(start, corr)
    for k in range(5):
        grads = [torch.randn(s, generator=g, dtype=D).to(device) for s in shapes]
        for p, gr in zip(params, grads):
            p.grad = gr.clone()
        opt.step()
        want = solver.update(want, grads)
        assert _max_diff([p.grad for p in params], grads) == 0
        assert _max_diff(params, want.params) < 1e-14
        assert opt.a_norm == want.a_norm and opt.local_steps == want.step == k + 1
    assert _max_diff(start, kept) == 0  # the round's start (the prox anchor) was never written


def test_batchnorm_buffers_are_averaged_not_normalised():
    """A BatchNorm model in the user's loop: parameters through ClientOptimizer and the rule,
    running statistics handed out at each client's start and averaged with p after the round."""
    from fedlib.optim import average_buffers, buffers_of

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 7), nn.BatchNorm1d(7), nn.ReLU(), nn.Linear(7, 3)).to(D)
    xs, ys = _data()
    p = np.array([len(x) for x in xs], dtype=float)
    p /= p.sum()
    steps = [2, 3, 5]
    algo = make_algorithm("fednova", momentum_sgd(0.05, 0.9))
    server = algo.init(parameters_of(model), 3)
    global_buffers = buffers_of(model)
    opt = ClientOptimizer(model.parameters(), algo.solver)
    for t in range(2):
        updates, client_buffers = [], []
        for i in range(3):
            copy_into(model.buffers(), global_buffers)
            opt.begin(algo.client_init(server, i))
            for k in range(steps[i]):
                x, y = _batch(xs, ys, i, t, k)
                opt.zero_grad()
                F.cross_entropy(model(x), y).backward()
                opt.step()
            updates.append(algo.client_final(server, i, opt.solver_state))
            client_buffers.append(buffers_of(model))
        server, diag = algo.apply(server, full_participation(p), updates, opt.lr, p)
        global_buffers = average_buffers(client_buffers, p)
        for k, b in enumerate(global_buffers):
            if b.is_floating_point():
                want = sum(pi * cb[k] for pi, cb in zip(p, client_buffers))
                torch.testing.assert_close(b, want, rtol=1e-12, atol=1e-14)
            else:  # num_batches_tracked: every client saw t * ... + steps[i] batches; the p-weighted mean, rounded
                assert int(b) == round(sum(pi * int(cb[k]) for pi, cb in zip(p, client_buffers)))
        assert abs(diag.chi2) < 1e-12
    # the running variance stays a variance (positive): no division by ||a_i||_1 anywhere
    assert bool(torch.all(global_buffers[1] > 0))
    with pytest.raises(ValueError, match="^weights has 2 clients but client_buffers has 3$"):
        average_buffers(client_buffers, [0.5, 0.5])
    with pytest.raises(ValueError, match=r"client_buffers\[1\] has 2 tensors but there are 3 buffers"):
        average_buffers([client_buffers[0], client_buffers[1][:2]], [0.5, 0.5])
    with pytest.raises(ValueError, match=r"client_buffers\[1\]\[0\] is .* but buffer 0 is"):
        average_buffers([client_buffers[0], [b.float() for b in client_buffers[1]], client_buffers[2]], p)
    with pytest.raises(ValueError, match="weights must be 3 numbers, got None"):  # was torch's bare TypeError
        average_buffers(client_buffers, None)


# ---------------------------------------------------------------- the user-facing API: inputs and aliasing
def _one_param():
    return torch.nn.Parameter(torch.ones(3, dtype=torch.float64))


def test_a_client_solver_given_to_begin_does_not_leak_into_the_next_round():
    from fedlib.solvers import LocalSolver, sgd

    w = _one_param()
    opt = ClientOptimizer([w], sgd(0.1))
    start = sgd(0.1).init([torch.zeros(3, dtype=torch.float64)])
    own = LocalSolver(lr=0.1, lr_schedule=lambda k: 5.0)  # the client's step size 0.5, as a factor of the shared lr
    opt.begin(start, solver=own)
    assert opt.solver is own
    w.grad = torch.ones(3, dtype=torch.float64)
    opt.step()
    assert opt.a_norm == 5.0
    assert torch.allclose(w.detach(), torch.full((3,), -0.5, dtype=torch.float64))
    opt.begin(start)  # no solver: the constructor's, at the group's lr
    assert opt.lr == 0.1 and opt.param_groups[0]["lr"] == 0.1 and opt.solver.lr_schedule is None
    opt.step()
    assert opt.a_norm == 1.0
    assert torch.allclose(w.detach(), torch.full((3,), -0.1, dtype=torch.float64))


@pytest.mark.filterwarnings("ignore:optimizer contains a parameter group with duplicate parameters")
def test_a_parameter_listed_twice_is_refused():
    from fedlib.solvers import sgd

    w = _one_param()
    with pytest.raises(ValueError, match="listed twice"):
        ClientOptimizer([w, w], sgd(0.1))


def test_a_group_lr_other_than_the_solvers_is_refused():
    from fedlib.solvers import sgd

    with pytest.raises(ValueError, match="differs from solver.lr"):
        ClientOptimizer([{"params": [_one_param()], "lr": 0.5}], sgd(0.1))


def test_freezing_a_parameter_after_construction_is_caught_at_the_step():
    from fedlib.solvers import sgd

    w = _one_param()
    opt = ClientOptimizer([w], sgd(0.1, weight_decay=0.1))
    opt.begin(sgd(0.1).init([torch.zeros(3, dtype=torch.float64)]))
    w.requires_grad_(False)
    with pytest.raises(ValueError, match="frozen"):
        opt.step()


def test_the_optimizer_cannot_be_copied_or_pickled():
    import copy
    import pickle

    from fedlib.solvers import sgd

    opt = ClientOptimizer([_one_param()], sgd(0.1))
    for how in (copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError, match="cannot be copied or pickled"):
            how(opt)


# -------------------------------- your own loop: the global model, a client without data, what begin / copy_into take
def test_the_optim_docstring_loop_leaves_the_global_model_in_the_model():
    """fedlib.optim's 'A round, in user code' loop, run as written: afterwards ``model`` held the last
    client's local model x_i^(t, tau_i), not the global model ``server.params`` a user then evaluates or
    saves (chapter 6 copies it back; the docstring and README did not)."""
    import importlib

    import torch

    import fedlib.optim
    from test_docstring_recipes import _fixtures_optim_round, literal_blocks, public_index

    (code,) = [text for intro, text in literal_blocks(fedlib.optim.__doc__)
               if intro == "A round, in user code (chapter 6 runs it)::"]
    ns = {**public_index(), **{k: v for k, v in vars(importlib.import_module("fedlib.optim")).items()
                               if not k.startswith("__")}}
    ns.update(_fixtures_optim_round())
    exec(compile(code, "<fedlib.optim round>", "exec"), ns)
    model, server = ns["model"], ns["server"]
    assert server.round == 2
    for mine, glob in zip(model.parameters(), server.params):
        assert torch.equal(mine.detach(), glob), "model does not hold the global model after the loop"


def test_a_client_that_took_no_step_is_told_what_to_do():
    """In the optim docstring's loop a client with 0 samples (an empty DataLoader) reached client_final,
    which said only 'local_steps: client 3 took no local step'; apply's own check says to leave it out."""
    import numpy as np
    import torch

    from fedlib.algorithms import make_algorithm
    from fedlib.optim import ClientOptimizer, parameters_of
    from fedlib.sampling import Participation
    from fedlib.solvers import sgd

    model = torch.nn.Linear(2, 2)
    algo = make_algorithm("fednova", sgd(0.1))
    server = algo.init(parameters_of(model), num_clients=2)
    opt = ClientOptimizer(model.parameters(), algo.solver)
    opt.begin(algo.client_init(server, 1))  # client 1: no batches, no step
    with pytest.raises(ValueError, match=r"client 1 took no local step \(a client without samples or with tau_i = 0 "
                                         r"has no update to aggregate: leave it out of the round"):
        algo.client_final(server, 1, opt.solver_state)
    # what the message says works: the round with client 0 alone
    opt.begin(algo.client_init(server, 0))
    opt.zero_grad()
    model(torch.ones(1, 2)).sum().backward()
    opt.step()
    new, diag = algo.apply(server, Participation(np.array([0]), np.array([1.0])),
                           [algo.client_final(server, 0, opt.solver_state)], opt.lr)
    assert list(diag.clients) == [0] and new.round == 1


def test_client_optimizer_names_numpy_arrays_and_dicts_it_cannot_take():
    """A server state built from numpy arrays (``algo.init([p.numpy() ...])``) or from
    ``model.state_dict()`` was refused by ``opt.begin`` with '... must be a list of tensors ..., got list'
    (it is a list) or 'got OrderedDict'; the message now names what is wrong with it."""
    import torch

    from fedlib.algorithms import make_algorithm
    from fedlib.optim import ClientOptimizer, copy_into, parameters_of
    from fedlib.solvers import sgd

    model = torch.nn.Linear(3, 2)
    algo = make_algorithm("fednova", sgd(0.1))
    opt = ClientOptimizer(model.parameters(), algo.solver)
    as_numpy = algo.init([p.numpy() for p in parameters_of(model)], 2)
    with pytest.raises(ValueError, match=r"solver_state\.params must be a list of tensors, .* got list whose entry 0 "
                                         r"is a numpy\.ndarray \(a checkpoint stores the server state as numpy "
                                         r"arrays: fedlib\.checkpoint\.to_torch_tree\(state, like=parameters_of\(model\)\) "
                                         r"turns it back into tensors\)$"):
        opt.begin(algo.client_init(as_numpy, 0))
    by_name = algo.init(model.state_dict(), 2)
    with pytest.raises(ValueError, match=r"got OrderedDict \(keyed by name; give the tensors as a list in the model's "
                                         r"parameter order\)$"):
        opt.begin(algo.client_init(by_name, 0))
    with pytest.raises(ValueError, match=r"^values must be a list of tensors, .* got tuple whose entry 1 is a builtins\.float$"):
        copy_into(model.parameters(), (torch.zeros(2, 3), 0.0))
    copy_into(model.parameters(), parameters_of(model))  # the list it asks for is taken


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


def _opposite_gradients_round(own):
    """Two clients, p = (1/2, 1/2), constant gradients +1 and -1, two steps each; client 1 runs
    ``own``. The p-weighted mean gradient is 0, so FedNova must not move."""
    p = np.array([0.5, 0.5])
    w = nn.Parameter(torch.zeros(1, dtype=D))
    algo = make_algorithm("fednova", sgd(0.1))
    server = algo.init(parameters_of([w]), 2)
    opt = ClientOptimizer([w], algo.solver)
    updates = []
    for i, g in ((0, 1.0), (1, -1.0)):
        opt.begin(algo.client_init(server, i), solver=own if i == 1 else None)
        for _ in range(2):
            w.grad = torch.tensor([g], dtype=D)
            opt.step()
        updates.append(algo.client_final(server, i, opt.solver_state))
    server, diag = algo.apply(server, full_participation(p), updates, opt.lr, p)
    return float(server.params[0]), diag


def test_begin_refuses_a_client_solver_with_another_base_lr():
    """||a_i||_1 is counted in units of the solver's lr: a client solver with lr 0.3 among clients at
    0.1 reported ||a_i||_1 = 2 for a change 3x as large, and FedNova moved by +0.2 (chi2 = 0)."""
    with pytest.raises(ValueError, match=r"solver\[0\] has lr 0.3, but the clients share one base learning rate"):
        _opposite_gradients_round(sgd(0.3))
    # the same client step size as a factor of the shared lr: counted, and FedNova stays put
    change, diag = _opposite_gradients_round(LocalSolver(lr=0.1, lr_schedule=lambda k: 3.0))
    np.testing.assert_allclose(diag.a_norms, [2.0, 6.0], rtol=1e-15)
    assert abs(change) < 1e-15


def test_named_parameters_are_accepted_like_torch_sgd():
    """torch.optim.SGD(model.named_parameters(), ...) works; the drop-in was refused with a message
    about momentum, mu and weight_decay (torch's 'param_names' key)."""
    torch.manual_seed(0)
    a = nn.Linear(4, 3).to(D)
    b = copy.deepcopy(a)
    solver = momentum_sgd(0.1, 0.9, weight_decay=0.01)
    opts = [ClientOptimizer(a.named_parameters(), solver), ClientOptimizer(b.parameters(), solver)]
    x = torch.randn(5, 4, dtype=D)
    for net, opt in zip((a, b), opts):
        opt.begin(solver.init(parameters_of(net)))
        for _ in range(3):
            opt.zero_grad()
            net(x).pow(2).sum().backward()
            opt.step()
    for u, v in zip(a.parameters(), b.parameters()):
        assert torch.equal(u, v)
    assert opts[0].a_norm == opts[1].a_norm == pytest.approx(solver.a_norm(3), rel=1e-14)
    with pytest.raises(ValueError, match=r"the group sets \['momentum'\]"):
        ClientOptimizer([{"params": a.parameters(), "momentum": 0.9}], solver)


def test_average_buffers_refuses_what_is_not_a_list_of_clients():
    """One model's buffers given as if they were the clients' (a flat list of tensors) were averaged
    row by row (or failed with torch's TypeError); a first client of non-tensors failed with an
    AttributeError."""
    with pytest.raises(ValueError, match=r"client_buffers\[0\] must be one client's buffers"):
        average_buffers([torch.zeros(2), torch.ones(2)], [0.5, 0.5])  # returned [0.5, 0.5]
    with pytest.raises(ValueError, match=r"client_buffers\[0\] must be one client's buffers"):
        average_buffers(buffers_of(nn.BatchNorm1d(4)), [0.2, 0.3, 0.5])
    with pytest.raises(ValueError, match=r"client_buffers\[0\] must be a list of tensors"):
        average_buffers([[np.zeros(3)]], [1.0])
    with pytest.raises(ValueError, match=r"client_buffers\[1\] must be one client's buffers"):
        average_buffers([[torch.zeros(2)], None], [0.5, 0.5])
    bn = nn.BatchNorm1d(3).to(D)
    out = average_buffers([buffers_of(bn), (torch.ones(3, dtype=D), torch.ones(3, dtype=D), torch.tensor(4))], [1, 3])
    torch.testing.assert_close(out[0], torch.full((3,), 0.75, dtype=D))
    assert int(out[2]) == 3


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_steps_are_torch_sgds_multi_tensor_ones_on_the_cpu(dtype):
    """The docstring's claim, made precise: bit for bit torch.optim.SGD(foreach=True) in any dtype
    (torch's CPU default, the per-tensor loop, agrees in float32/float64 only)."""
    torch.manual_seed(0)
    a = nn.Linear(6, 4).to(dtype)
    b = copy.deepcopy(a)
    solver = momentum_sgd(0.1, 0.9, weight_decay=0.01)
    opt = ClientOptimizer(a.parameters(), solver)
    opt.begin(solver.init(parameters_of(a)))
    ref = torch.optim.SGD(b.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01, foreach=True)
    for _ in range(6):
        x = torch.randn(3, 6).to(dtype)
        for net, o in ((a, opt), (b, ref)):
            o.zero_grad()
            net(x).float().pow(2).sum().backward()
            o.step()
    for u, v in zip(a.parameters(), b.parameters()):
        assert torch.equal(u, v)


@pytest.mark.parametrize("live, match", [
    (lambda net: list(net.parameters()), r"^params: leaf 0 is a tensor that requires grad"),  # algo.init refuses it
    (lambda net: [p.detach() for p in net.parameters()], r"solver_state.params\[0\] shares memory with the model's")])
def test_client_optimizer_refuses_a_server_state_aliasing_the_model(live, match):
    """algo.init(list(model.parameters()), m) (or p.detach(), which shares memory) instead of
    parameters_of(model): the server's x^(t,0) WAS the model, so each client's training moved it
    and Delta_i = x_i - x^(t,0) came out wrong — FedNova's round differed from the right one by
    0.05 in a small MLP, silently. ClientOptimizer.begin now refuses such a state (and algo.init the live
    parameters themselves, which require grad)."""
    import torch.nn.functional as F
    from torch import nn

    from fedlib.algorithms import make_algorithm
    from fedlib.optim import ClientOptimizer, parameters_of

    torch.manual_seed(0)
    net, x, y = nn.Linear(4, 3), torch.randn(8, 4), torch.randint(0, 3, (8,))
    algo = make_algorithm("fednova", sgd(0.1))
    opt = ClientOptimizer(net.parameters(), algo.solver)
    with pytest.raises(ValueError, match=match):
        opt.begin(algo.client_init(algo.init(live(net), 2), 0))
    server = algo.init(parameters_of(net), 2)
    start = [t.clone() for t in server.params]
    opt.begin(algo.client_init(server, 0))
    for _ in range(3):
        opt.zero_grad()
        F.cross_entropy(net(x), y).backward()
        opt.step()
    update = algo.client_final(server, 0, opt.solver_state)
    assert all(torch.equal(a, b) for a, b in zip(server.params, start))  # x^(t,0) untouched by training
    assert all(torch.allclose(d, p.detach() - s) for d, p, s in zip(update.delta, net.parameters(), start))


def _own_step_solver(result):
    """A LocalSolver subclass with its own ``update`` (builtin_step false), the plain SGD step, that returns
    ``result(state, new)`` on torch tensors (and ``new``, the step with ``step`` advanced, on the numpy
    vectors ``check_own_step`` probes it with at construction)."""
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Own(LocalSolver):
        def update(self, state, grads):
            if isinstance(state.params, np.ndarray):  # check_own_step's probe
                return super().update(state, grads)
            x = [p - self.lr * g for p, g in zip(state.params, grads)]
            return result(state, state._replace(params=x, step=state.step + 1))

        def counter_step(self, k, counter):
            return counter[0] + 1.0, counter[1]

        def a_vector(self, tau):
            return np.ones(tau)

    return Own(0.1)


@pytest.mark.parametrize("result, match", [
    (lambda state, new: tuple(new), r"^solver\.update: Own\.update must return a SolverState, got tuple$"),
    (lambda state, new: new._replace(step=state.step), r"^Own\.update must advance state\.step by one \(0 -> 1\), got 0$"),
    (lambda state, new: new._replace(step=state.step + 2), r"^Own\.update must advance state\.step by one \(0 -> 1\), got 2$"),
])
def test_an_own_step_that_breaks_the_contract_is_named(result, match):
    """ClientOptimizer takes a subclass's own ``update`` only if it returns a SolverState with ``step``
    advanced by one (the docstring's contract). The construction's probe (numpy vectors) cannot see an
    update that breaks it on tensors only; the step refuses it, naming the class, and leaves the parameters
    as they were. The same subclass keeping the contract takes its step (x - 0.1 g)."""
    model = _model()
    start = parameters_of(model)
    x = torch.ones(2, 5, dtype=D)
    bad = _own_step_solver(result)
    assert not bad.builtin_step
    opt = ClientOptimizer(model.parameters(), bad)
    opt.begin(bad.init(start))
    model(x).sum().backward()
    with pytest.raises(ValueError, match=match):
        opt.step()
    for p, s in zip(model.parameters(), start):
        assert torch.equal(p.detach(), s)
    good = _own_step_solver(lambda state, new: new)
    opt = ClientOptimizer(model.parameters(), good)
    opt.begin(good.init(start))
    grads = [p.grad.detach().clone() for p in model.parameters()]
    opt.step()
    for p, s, g in zip(model.parameters(), start, grads):
        torch.testing.assert_close(p.detach(), s - 0.1 * g, rtol=1e-15, atol=0)
    assert opt.solver_state.step == 1


def test_average_buffers_refuses_client_buffers_given_as_a_dict():
    """The clients' buffers given as a dict keyed by client ({i: buffers_of(model_i)}) are refused as a dict, with the
    list that was meant. Before: its keys were taken as the clients, refused as 'client_buffers[0] must be one client's
    buffers, a list of tensors (buffers_of(model)), got int'. A list averages as before: (0, 0) and (1, 2) with weights
    (1, 3) give (0.75, 1.5)."""
    client_0, client_1 = [torch.tensor([0.0, 0.0])], [torch.tensor([1.0, 2.0])]
    with pytest.raises(ValueError, match=r"^client_buffers must list the clients' buffers \(one buffers_of\(model\) per "
                                         r"client\), got a dict; pass a list in the order of weights, e\.g\. "
                                         r"\[client_buffers\[k\] for k in sorted\(client_buffers\)\]$"):
        average_buffers({0: client_0, 1: client_1}, [1, 3])
    assert average_buffers([client_0, client_1], [1, 3])[0].tolist() == [0.75, 1.5]


def test_client_optimizer_and_copy_into_name_a_model_given_for_its_parameters():
    """ClientOptimizer(model, solver) and copy_into(model, values) failed with Python's TypeError "'Linear' object
    is not iterable"; copy_into(model.weight, values) iterated the tensor's rows ("values has 2 tensors but there
    are 1 parameters"); copy_into(5, values) "'int' object is not iterable". Now a ValueError naming params."""
    model = nn.Linear(2, 1).to(D)
    values = parameters_of(model)
    with pytest.raises(ValueError, match=r"^params must be the model's parameters \(model\.parameters\(\)\), got the "
                                         r"model itself, a Linear$"):
        ClientOptimizer(model, sgd(0.1))
    with pytest.raises(ValueError, match=r"^params must be the model's parameters .* a Linear$"):
        copy_into(model, values)
    for bad, name in ((model.weight, "Parameter"), (5, "int")):
        with pytest.raises(ValueError, match=rf"^params must be an iterable of the model's parameters "
                                             rf"\(model\.parameters\(\), or \[w\] for one tensor w\), got {name}$"):
            copy_into(bad, values)
    with pytest.raises(ValueError, match=r"^params must be an iterable .* got Parameter$"):
        ClientOptimizer(model.weight, sgd(0.1))
    copy_into(model.parameters(), values)       # the right calls still work
    ClientOptimizer(model.parameters(), sgd(0.1))


def test_parameters_of_names_a_state_dict_or_named_parameters():
    """parameters_of(model.state_dict()) and parameters_of(model.named_parameters()) said only 'model: an iterable
    of parameters must hold tensors only' (the dict iterated over its names, named_parameters gave pairs), with no
    hint of what to pass. Now the message names the mapping or the (name, parameter) pairs and what to pass."""
    model = nn.Linear(2, 1).to(D)
    for given, name in ((model.state_dict(), "an OrderedDict"), (dict(model.named_parameters()), "a dict")):
        with pytest.raises(ValueError, match=rf"^model: an iterable of parameters must hold tensors only, got {name} "
                                             r"keyed by name \(a state_dict also holds the buffers\): pass the model, "
                                             r"model\.parameters\(\), or a subset in the model's order, \[p for name, "
                                             r"p in model\.named_parameters\(\) if \.\.\.\]$"):
            parameters_of(given)
    with pytest.raises(ValueError, match=r"^model: an iterable of parameters must hold tensors only, got \(name, "
                                         r"parameter\) pairs \(model\.named_parameters\(\)\): pass model\.parameters\(\)"):
        parameters_of(model.named_parameters())
    with pytest.raises(ValueError, match=r"^model: .* tensors only, but entry 1 is a str$"):
        parameters_of([model.weight, "bias"])
    subset = parameters_of([p for name, p in model.named_parameters() if name == "weight"])
    assert len(subset) == 1 and torch.equal(subset[0], model.weight.detach())


@pytest.mark.parametrize("algorithm_solver,optimizer_solver,match", [
    (proximal_sgd(0.1, mu=1.0), sgd(0.1),
     r"^solver_state has a proximal anchor \(a solver with mu > 0 made it.*the optimizer's solver "
     r"LocalSolver\(name='sgd', mu=0\.0\) keeps none: it would run its own step, without that term; build the "
     r"optimizer with the algorithm's solver, ClientOptimizer\(model\.parameters\(\), algorithm\.solver\)"),
    (momentum_sgd(0.1, 0.9), sgd(0.1),
     r"^solver_state has a momentum buffer \(a solver with momentum > 0 made it.*LocalSolver\(name='sgd', "
     r"momentum=0\.0\) keeps none"),
    (sgd(0.1), momentum_proximal_sgd(0.1, 0.5, mu=0.5),
     r"^solver_state has no proximal anchor \(a solver with mu = 0 made it.*name='momentum-prox', mu=0\.5\) "
     r"keeps one: it would run its own step, with that term"),
], ids=["fedprox-with-sgd", "momentum-with-sgd", "sgd-with-momentum-prox"])
def test_begin_refuses_a_round_start_made_by_another_kind_of_solver(algorithm_solver, optimizer_solver, match):
    """One optimizer reused across algorithms: begin() steps with the optimizer's solver, so FedProx's start
    (algorithm.client_init, with its proximal anchor) on an optimizer built with plain SGD ran FedAvg, bit for
    bit, and a momentum solver's start ran without momentum, without a word. A start whose anchor or momentum
    buffer the optimizer's solver does not keep (or the reverse) is now refused; a solver given to begin()
    replaces the round's solver as before."""
    name = "fedprox" if algorithm_solver.mu > 0 and algorithm_solver.momentum == 0 else "fednova"
    algo = make_algorithm(name, algorithm_solver)
    model = _model()
    server = algo.init(parameters_of(model), 2)
    opt = ClientOptimizer(model.parameters(), optimizer_solver)
    before = parameters_of(model)
    with pytest.raises(ValueError, match=match):
        opt.begin(algo.client_init(server, 0))
    assert _max_diff(parameters_of(model), before) == 0 and opt.local_steps == 0  # nothing started
    opt.begin(algo.client_init(server, 0), solver=optimizer_solver)  # given explicitly: this client's own solver
    assert opt.solver is optimizer_solver
    matching = ClientOptimizer(model.parameters(), algo.solver)  # the README's optimizer
    matching.begin(algo.client_init(server, 1))
    assert matching.solver.mu == algorithm_solver.mu and matching.solver.momentum == algorithm_solver.momentum


def test_a_step_after_solver_state_was_read_needs_the_next_begin():
    """Reading ``solver_state`` (for client_final) ends the client's round: a step before the next begin is refused.
    Before: a forgotten ``begin`` for client 1 continued client 0's round without a word. By hand, SGD lr 0.1 on
    F_i(w) = (w - c_i)^2 / 2, c = (1, -1), one step for client 0 (w: 0 -> 0.1), then 3 steps for client 1 from
    x^(t,0) = 0: w = -0.1, -0.19, -0.271, so Delta_1 = -0.271 with ||a_1||_1 = 3; without begin client 1 started from
    0.1 (0.1 -> -0.01 -> -0.109 -> -0.1981) and reported Delta_1 = -0.1981 with ||a_1||_1 = 4 (client 0's step too)."""
    w = torch.nn.Parameter(torch.zeros(1, dtype=D))
    algo = make_algorithm("fednova", sgd(0.1))
    server = algo.init(parameters_of([w]), num_clients=2)
    opt = ClientOptimizer([w], algo.solver)

    def local_steps(target, steps):
        for _ in range(steps):
            opt.zero_grad()
            (0.5 * (w - target) ** 2).sum().backward()
            opt.step()

    opt.begin(algo.client_init(server, 0))
    local_steps(1.0, 1)
    first = algo.client_final(server, 0, opt.solver_state)
    assert opt.solver_state.step == 1  # reading it again is fine
    with pytest.raises(RuntimeError, match=r"^step: the round of 1 step\(s\) ended when solver_state was read "
                                           r"\(algorithm\.client_final\); call begin\(algorithm\.client_init\(server, "
                                           r"i\)\) before the next client's first step"):
        local_steps(-1.0, 3)
    assert w.tolist() == pytest.approx([0.1], abs=1e-15) and opt.local_steps == 1  # the refused step moved nothing
    opt.begin(algo.client_init(server, 1))
    local_steps(-1.0, 3)
    second = algo.client_final(server, 1, opt.solver_state)
    assert first.delta[0].tolist() == pytest.approx([0.1], abs=1e-15)
    assert second.delta[0].tolist() == pytest.approx([-0.271], abs=1e-15) and second.a_norm == 3.0
    # the next round: the global model copied back into w is no begin either
    server, _ = algo.apply(server, full_participation([0.5, 0.5]), [first, second], opt.lr, [0.5, 0.5])
    copy_into([w], server.params)
    with pytest.raises(RuntimeError, match=r"^step: the round of 3 step\(s\) ended"):
        local_steps(1.0, 1)

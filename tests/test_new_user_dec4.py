"""A new user's journeys through README.md, the module docstrings and ``--help`` (helper C, Dec 4):
what misled them, what failed without saying what to do, what gave a silent wrong result."""
from __future__ import annotations

import urllib.error

import pytest


# --------------------------------------------------------------------------- CIFAR-10 without network
def test_cifar10_download_without_network_says_what_to_do(tmp_path, monkeypatch):
    """load_cifar10(root, download=True) on a machine without access to the CIFAR mirror raised
    torchvision's bare ``URLError: <urlopen error [Errno -2] Name or service not known>`` (and the CLI
    printed just that); it now names the address, the folder and how to install the archive by hand."""
    import torchvision

    from fedlib.data import cifar10 as cifar

    def offline(*args, **kwargs):
        raise urllib.error.URLError("[Errno -2] Name or service not known")

    monkeypatch.setattr(torchvision.datasets, "CIFAR10", type("CIFAR10", (), {
        "url": "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz", "__new__": offline}))
    with pytest.raises(OSError) as info:
        cifar.load_cifar10(tmp_path, download=True)
    message = str(info.value)
    assert "Name or service not known" in message  # the cause is kept
    assert "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz" in message
    assert f"tar -xzf cifar-10-python.tar.gz -C {tmp_path}" in message
    assert str(tmp_path / "cifar-10-batches-py") in message
    assert isinstance(info.value.__cause__, urllib.error.URLError)


def test_cifar10_download_failure_on_the_command_line(tmp_path, monkeypatch, capsys):
    """The same through ``python -m fedlib run cifar10 --download``: one line that says what to do, exit 1."""
    import torchvision

    from fedlib.cli import main

    def offline(*args, **kwargs):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(torchvision.datasets, "CIFAR10", type("CIFAR10", (), {"__new__": offline}))
    code = main(["run", "cifar10", "--data-root", str(tmp_path), "--download", "--rounds", "1", "--width", "0.05",
                 "--out", str(tmp_path / "c.json")])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "CIFAR-10 download into" in err and "extract it into" in err, err
    assert not (tmp_path / "c.json").exists()


# --------------------------------------------------------------------------- your own loop: the global model
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


# --------------------------------------------------------------------------- train_clients / reference_differences
def _clients():
    import torch

    g = torch.Generator().manual_seed(0)
    sizes = (5, 12, 9)
    xs = [torch.randn(n, 6, generator=g, dtype=torch.float64) for n in sizes]
    ys = [torch.randint(0, 3, (n,), generator=g) for n in sizes]
    return xs, ys


def test_train_clients_one_dimensional_features_are_named_as_such():
    """client_x[i] of shape (n_i,) (one feature per sample, without the feature axis) was refused with
    'needs n_i >= 1 samples and one label per sample, got (5,) / (5,)': both hold 5, so the message
    pointed at the wrong thing."""
    from torch import nn

    from fedlib.experiments.custom import train_clients

    xs, ys = _clients()
    with pytest.raises(ValueError, match=r"client_x\[1\] must be \(n_i, \*feature_shape\), samples first, got shape "
                                         r"\(12,\); one feature per sample: client_x\[i\]\[:, None\]"):
        train_clients(nn.Linear(1, 3), [x[:, :1] for x in xs[:1]] + [xs[1][:, 0], xs[2][:, :1]], ys, rounds=1)


def test_reference_differences_refuses_a_model_that_is_not_the_runs_initial_model():
    """reference_differences(model, result) with another model (a fresh one of the same architecture)
    returned a relative difference of order 1 as if the engine disagreed with
    the per-client loop; it now says that the model is not the one given to train_clients. The model
    given to train_clients, in either dtype, still passes and agrees to rounding."""
    import torch
    from torch import nn

    from fedlib.experiments.custom import reference_differences, train_clients

    xs, ys = _clients()
    gen = torch.Generator().manual_seed(1)

    def mlp():
        net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
        with torch.no_grad():
            for prm in net.parameters():
                prm.copy_(torch.randn(prm.shape, generator=gen) * 0.3)
        return net

    model = mlp()
    result = train_clients(model, xs, ys, rounds=2, batch_size=4, dtype=torch.float64)
    same = reference_differences(model, result)
    assert set(same) == {"fedavg", "fednova"} and max(same.values()) < 1e-10, same
    assert max(reference_differences(model.double(), result).values()) < 1e-10
    with pytest.raises(ValueError, match=r"model's parameters are not the initial model of run 'fedavg'"):
        reference_differences(mlp(), result)
    with torch.no_grad():  # the same module, changed after train_clients (e.g. trained further)
        next(model.parameters()).add_(1e-3)
    with pytest.raises(ValueError, match=r"not the initial model"):
        reference_differences(model, result)


# --------------------------------------------------------------------------- your own loop: a client without data
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


def test_tau_eff_population_in_code_points_to_population_tau_eff():
    """``--tau-eff population`` is on the command line; make_algorithm("fednova", solver, tau_eff="population")
    said only "must be one of ['a_norm', 'local_steps']", not how to get the population value in code."""
    from fedlib.algorithms import make_algorithm
    from fedlib.schedules import FixedSteps, population_tau_eff
    from fedlib.solvers import sgd

    with pytest.raises(ValueError, match=r"tau_eff='population' .*=fedlib\.schedules\.population_tau_eff\(p, schedule, "
                                         r"solver\)"):
        make_algorithm("fednova", sgd(0.1), tau_eff="population")
    value = population_tau_eff([0.5, 0.5], FixedSteps([2, 4]), sgd(0.1))  # the advice, followed
    assert make_algorithm("fednova", sgd(0.1), tau_eff=value).tau_eff == value == pytest.approx(3.0)


# --------------------------------------------------------------------------- the command line
def test_table1_summary_outside_the_repository_root_says_where_it_looked(tmp_path, monkeypatch, capsys):
    """README: ``python -m fedlib table1 --summary  # (from the repository root)``. From another folder the
    default --results data/results/cifar10 was 'no such folder', without saying it is relative to the
    current folder nor what to do."""
    from fedlib.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["table1", "--summary"]) == 2
    err = capsys.readouterr().err
    assert (f"--results data/results/cifar10: no such folder (relative to the current folder {tmp_path}: run from "
            "the repository root, or give --results the folder of the result files)") in err, err
    assert main(["table1", "--summary", "--results", str(tmp_path / "none")]) == 2  # absolute: as before
    assert capsys.readouterr().err.rstrip().endswith(f"--results {tmp_path / 'none'}: no such folder")


# --------------------------------------------------------------------------- your own loop: what begin / copy_into take
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


# --------------------------------------------------------------------------- your own local solver: closed forms
def _nesterov_class():
    """Nesterov momentum written from "Extending fedlib" alone (update + counter_step, no closed forms):
    u_{k+1} = rho u_k + g_k, x_{k+1} = x_k - eta (g_k + rho u_{k+1})."""
    import dataclasses

    from fedlib.solvers import LocalSolver
    from fedlib.tree import tree_map

    @dataclasses.dataclass(frozen=True)
    class Nesterov(LocalSolver):
        def update(self, state, grads):
            rho = self.momentum
            mom = tree_map(lambda u, g: rho * u + g, state.momentum, grads)
            params = tree_map(lambda x, g, u: x - self.lr * (g + rho * u), state.params, grads, mom)
            shadow = self.counter_step(state.step, state.shadow)
            return state._replace(params=params, momentum=mom, step=state.step + 1, shadow=shadow, a_norm=shadow[0])

        def counter_step(self, k, counter):
            a, u = counter
            u = self.momentum * u + 1.0
            return (a + 1.0 + self.momentum * u, u)

    return Nesterov


def test_an_own_step_solver_without_closed_forms_gets_those_of_its_own_step():
    """Such a solver ran (its clients reported the right ||a_i||_1 online), but its inherited
    a_norm(tau) / a_vector(tau) were heavy-ball's formulas: population_tau_eff, the tau_eff a user passes
    to FedNova under sampling, was silently that of another solver (about 22 % low at tau = 5, rho = 0.9).
    a_j of Nesterov, by hand: 1 + rho (1 - rho^{n+1}) / (1 - rho), n = tau - 1 - j."""
    import numpy as np

    from fedlib.algorithms import make_algorithm
    from fedlib.schedules import FixedSteps, population_tau_eff
    from fedlib.solvers import momentum_sgd

    rho, tau = 0.9, 5
    solver = _nesterov_class()(lr=0.01, momentum=rho, name="nesterov")
    make_algorithm("fednova", solver)  # check_own_step accepts it
    n = np.arange(tau - 1, -1, -1)
    by_hand = 1 + rho * (1 - rho ** (n + 1)) / (1 - rho)
    np.testing.assert_allclose(solver.a_vector(tau), by_hand, rtol=1e-12)
    assert solver.a_norm(tau) == pytest.approx(by_hand.sum(), rel=1e-12)
    assert solver.a_norm(tau) == pytest.approx(solver.online_a_norms(tau)[-1], rel=0, abs=0)
    heavy_ball = momentum_sgd(0.01, momentum=rho).a_norm(tau)
    assert abs(heavy_ball - by_hand.sum()) > 0.2 * by_hand.sum()  # what it returned before: another solver's
    assert population_tau_eff([0.25, 0.75], FixedSteps([tau, 2]), solver) == pytest.approx(
        0.25 * by_hand.sum() + 0.75 * solver.a_vector(2).sum(), rel=1e-12)
    # a built-in solver keeps its formulas, bit for bit
    hb = momentum_sgd(0.01, momentum=rho)
    assert hb.builtin_step and hb.a_norm(tau) == heavy_ball


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


def test_run_cifar10_split_failure_does_not_advise_a_flag_that_does_not_exist(tmp_path, capsys):
    """``run cifar10 --sample --num-clients 1000`` said '... (lower min_size or num_clients)': the command
    line has no --min-size; it now says what the command line can change."""
    from fedlib.cli import main

    assert main(["run", "cifar10", "--sample", "--width", "0.05", "--rounds", "1", "--num-clients", "1000",
                 "--out", str(tmp_path / "c.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m fedlib run cifar10: error: --num-clients / --partition-alpha: min_size=10 cannot "
                          "be met: 1000 clients x 10 samples > 2000 samples"), err
    assert err.rstrip().endswith("(the command line keeps the official min_size = 10 images per client: use fewer "
                                 "--num-clients, a larger --partition-alpha or more data)"), err
    assert not (tmp_path / "c.json").exists()


# --------------------------------------------------------------------------- your own data set
def test_federated_dataset_says_how_to_write_an_empty_test_set():
    """FederatedDataset's docstring: 'A client's test set may be empty'. Written as ``[]`` it was refused
    with 'test x must be 2-d (samples, features), got shape (0,)', without saying what an empty one is;
    the form the message gives is accepted."""
    import numpy as np

    from fedlib.data.clients import FederatedDataset

    rng = np.random.default_rng(0)
    train_x = [rng.normal(size=(n, 4)) for n in (3, 5)]
    train_y = [rng.integers(0, 3, n) for n in (3, 5)]
    with pytest.raises(ValueError, match=r"client 0 test x must be 2-d \(samples, features\), got shape \(0,\); an "
                                         r"empty test set is np\.zeros\(\(0, d\)\) with labels np\.zeros\(0, dtype=int\)$"):
        FederatedDataset(train_x, train_y, [[], []], [[], []], 3)
    ds = FederatedDataset(train_x, train_y, [np.zeros((0, 4))] * 2, [np.zeros(0, dtype=int)] * 2, 3)
    assert ds.num_clients == 2
    with pytest.raises(ValueError, match=r"got shape \(3, 4, 1\)$"):  # a non-empty wrong shape: no such advice
        FederatedDataset([x[:, :, None] for x in train_x], train_y, [np.zeros((0, 4))] * 2,
                         [np.zeros(0, dtype=int)] * 2, 3)


def test_train_clients_refuses_training_behaviour_the_engine_would_silently_drop():
    """The engine runs the model in eval mode and replaces only nn.Dropout layers by seeded masks. A model
    with functional dropout, F.dropout(x, p, self.training), trained without any dropout: its losses were
    those of the same model without the dropout line, bit for bit. It is now refused; nn.Dropout still runs
    (and changes the losses), and the model's train/eval flags and torch's global random state are left as
    they were."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    from fedlib.experiments.custom import train_clients

    xs, ys = _clients()
    xs = [x.float() for x in xs]

    class Functional(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(6, 3)

        def forward(self, x):
            return self.lin(F.dropout(x, 0.5, self.training))

    class Module(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.drop = nn.Linear(6, 3), nn.Dropout(0.5)

        def forward(self, x):
            return self.lin(self.drop(x))

    class Plain(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(6, 3)

        def forward(self, x):
            return self.lin(x)

    gen = torch.Generator().manual_seed(2)
    weight, bias = torch.randn(3, 6, generator=gen), torch.randn(3, generator=gen)

    def build(cls):
        net = cls()
        with torch.no_grad():
            net.lin.weight.copy_(weight)
            net.lin.bias.copy_(bias)
        return net

    functional = build(Functional).eval()
    rng = torch.get_rng_state()
    with pytest.raises(ValueError, match=r"model computes something else in training mode than in eval mode, besides "
                                         r"its nn\.Dropout layers \(e\.g\. F\.dropout\(x, p, self\.training\)"):
        train_clients(functional, xs, ys, rounds=1, batch_size=4)
    assert not functional.training and not functional.lin.training
    assert torch.equal(torch.get_rng_state(), rng)
    loss = {cls.__name__: train_clients(build(cls), xs, ys, rounds=2, batch_size=4)["fednova"][-1]["train_loss"]
            for cls in (Module, Plain)}
    assert loss["Module"] != loss["Plain"], loss  # nn.Dropout is applied (seeded masks)

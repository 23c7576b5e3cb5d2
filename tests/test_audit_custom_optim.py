"""Found by an audit of the "your own model" path: ``fedlib.optim``, ``FederatedAlgorithm.apply``
and ``fedlib.experiments.custom.train_clients``. Each test failed before its fix (except the last,
which pins a corrected docstring claim)."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn

from fedlib.algorithms import ClientUpdate, make_algorithm
from fedlib.optim import ClientOptimizer, average_buffers, buffers_of, parameters_of
from fedlib.sampling import full_participation
from fedlib.solvers import LocalSolver, momentum_sgd, sgd

D = torch.float64


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


def test_apply_refuses_deltas_of_another_shape_and_foreign_inputs():
    """A client change of shape (3,) on a (3, 1) model was broadcast: the new global model was (3, 3)."""
    algo = make_algorithm("fednova", sgd(0.1))
    p = np.array([0.5, 0.5])
    for params, delta in (([torch.zeros(3, 1)], [torch.ones(3)]), (np.zeros((3, 1)), np.ones(3)),
                          ([torch.zeros(3), torch.zeros(2)], [torch.ones(3)])):
        server = algo.init(params, 2)
        ups = [ClientUpdate(i, delta, 2.0, 2) for i in range(2)]
        with pytest.raises(ValueError, match="structure and leaf shapes of state.params"):
            algo.apply(server, full_participation(p), ups, 0.1, p)
    server = algo.init([torch.zeros(3)], 2)
    ups = [ClientUpdate(i, [torch.ones(3)], 2.0, 2) for i in range(2)]
    new, _ = algo.apply(server, full_participation(p), ups, 0.1, p)  # the same shapes still go through
    torch.testing.assert_close(new.params[0], torch.ones(3))
    with pytest.raises(ValueError, match=r"updates\[0\] must be a ClientUpdate"):
        algo.apply(server, full_participation(p), [tuple(u) for u in ups], 0.1, p)
    with pytest.raises(ValueError, match="participation must be a fedlib.sampling.Participation"):
        algo.apply(server, p, ups, 0.1, p)


def test_train_clients_refuses_mu_for_a_solver_without_prox():
    """train_clients(solver='sgd', mu=0.5) ran plain SGD: mu was dropped without a word."""
    from fedlib.experiments.custom import train_clients

    torch.manual_seed(0)
    xs = [torch.randn(n, 4) for n in (5, 9)]
    ys = [torch.randint(0, 3, (n,)) for n in (5, 9)]
    for solver in ("sgd", "momentum"):
        with pytest.raises(ValueError, match=f"mu: solver '{solver}' has no proximal term"):
            train_clients(nn.Linear(4, 3), xs, ys, rounds=1, solver=solver, mu=0.5)
    runs = train_clients(nn.Linear(4, 3), xs, ys, rounds=1, solver="prox", mu=0.5, epochs="1",
                         algorithms=("fedprox",))
    assert runs["engine"].runs[0].algorithm.solver.mu == 0.5


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

"""FederatedAlgorithm: validation (client indices, p, tau_eff), one round by hand through client_init/final and
apply, divergence detection, and SCAFFOLD / FedNova-VR runs on a quadratic; what apply refuses (client changes of
another shape or array kind than the model, a hand-built participation, a ClientUpdate with no local step) and
init (params that are not arrays)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from fedlib import algorithms as AL
from fedlib import server as SV
from fedlib.algorithms import ClientUpdate, make_algorithm
from fedlib.engines.reference import run_sequential
from fedlib.problems import random_quadratic
from fedlib.rule import aggregate
from fedlib.sampling import Participation, full_participation
from fedlib.schedules import FixedSteps
from fedlib.solvers import momentum_sgd, proximal_sgd, sgd
from fedlib.theory import chi_square


def test_validation():
    with pytest.raises(ValueError, match="algorithm"):
        AL.FederatedAlgorithm("fedsgd", sgd(0.1))
    with pytest.raises(ValueError, match="algorithm"):
        AL.make_algorithm("FedAvg", sgd(0.1))
    with pytest.raises(ValueError, match="solver"):
        AL.FederatedAlgorithm("fedavg", "sgd")
    with pytest.raises(ValueError, match=r"^mu\b"):
        AL.FederatedAlgorithm("fedprox", sgd(0.1))
    with pytest.raises(ValueError, match="tau_eff"):
        AL.FederatedAlgorithm("fedavg", sgd(0.1), tau_eff=2.0)
    with pytest.raises(ValueError, match="tau_eff"):
        AL.FederatedAlgorithm("scaffold", sgd(0.1), tau_eff="local_steps")
    a = AL.make_algorithm("fednova-vr", momentum_sgd(0.1), tau_eff="local_steps")
    assert (a.aggregation, a.variance, a.server.name) == ("fednova", "scaffold", "plain")
    assert AL.make_algorithm("fedprox", proximal_sgd(0.1, 0.1)).aggregation == "fedavg"
    assert AL.make_algorithm("vrlsgd", sgd(0.1)).variance == "vrlsgd"
    assert set(AL.ALGORITHMS) == {"fedavg", "fedprox", "fednova", "scaffold", "vrlsgd", "fednova-vr"}


def _one_round(name, solver, steps, grads, p, server=None):
    algo = AL.make_algorithm(name, solver, server)
    x0 = np.array([1.0, -1.0])
    state = algo.init(x0, len(steps))
    ups = []
    for i, tau in enumerate(steps):
        s = algo.client_init(state, i)
        for _ in range(tau):
            s = solver.update(s, grads[i])
        ups.append(algo.client_final(state, i, s))
    return algo, state, ups


def test_round_by_hand_fedavg_and_fednova():
    """Two SGD clients, constant gradients g_1 = [1, 0], g_2 = [0, 1], τ = (1, 3), η = 0.1, p = (½, ½)."""
    grads = [np.array([1.0, 0.0]), np.array([0.0, 1.0])]
    p = np.array([0.5, 0.5])
    for name, expected, w in (("fedavg", [-0.05, -0.15], [0.25, 0.75]), ("fednova", [-0.1, -0.1], [0.5, 0.5])):
        algo, state, ups = _one_round(name, sgd(0.1), [1, 3], grads, p)
        np.testing.assert_allclose(ups[0].delta, [-0.1, 0.0], atol=1e-15)
        np.testing.assert_allclose(ups[1].delta, [0.0, -0.3], atol=1e-15)
        assert [u.a_norm for u in ups] == pytest.approx([1.0, 3.0], rel=1e-15) and [u.local_steps for u in ups] == [1, 3]
        new, diag = algo.apply(state, full_participation(p), ups, 0.1, p)
        # FedAvg: ½Δ₁ + ½Δ₂; FedNova: τ_eff = 2, x − 2·0.1·½(g₁ + g₂)
        np.testing.assert_allclose(new.params - state.params, expected, atol=1e-15)
        assert new.round == 1 and diag.tau_eff == pytest.approx(2.0)
        np.testing.assert_allclose(diag.weights, w)
        assert diag.chi2 == pytest.approx(chi_square(p, w), abs=1e-15)
        np.testing.assert_array_equal(diag.local_steps, [1, 3])
        np.testing.assert_array_equal(state.params, [1.0, -1.0])  # old state untouched


def test_apply_uses_the_server_optimizer():
    grads = [np.array([1.0, 0.0]), np.array([0.0, 1.0])]
    p = np.array([0.5, 0.5])
    algo, state, ups = _one_round("fednova", sgd(0.1), [1, 3], grads, p, SV.momentum(0.9))
    new, _ = algo.apply(state, full_participation(p), ups, 0.1, p)
    np.testing.assert_allclose(new.server.buffer, [1.0, 1.0])   # −D/η with D = [−0.1, −0.1]
    assert new.server.count == 1
    # second round from the new state: the buffer persists
    ups2 = []
    for i, tau in enumerate([1, 3]):
        s = algo.client_init(new, i)
        for _ in range(tau):
            s = algo.solver.update(s, grads[i])
        ups2.append(algo.client_final(new, i, s))
    newer, _ = algo.apply(new, full_participation(p), ups2, 0.1, p)
    np.testing.assert_allclose(newer.server.buffer, [1.9, 1.9])
    np.testing.assert_allclose(newer.params - new.params, [-0.19, -0.19], atol=1e-15)


def test_apply_raises_on_non_finite_aggregate():
    algo = AL.make_algorithm("fednova", sgd(0.1))
    state = algo.init(np.zeros(2), 2)
    p = np.array([0.5, 0.5])
    ok = [AL.ClientUpdate(0, np.array([0.1, 0.0]), 1.0, 1), AL.ClientUpdate(1, np.array([0.0, 0.1]), 1.0, 1)]
    state, _ = algo.apply(state, full_participation(p), ok, 0.1)
    for bad_value in (np.nan, np.inf):
        bad = [ok[0], AL.ClientUpdate(1, np.array([0.0, bad_value]), 1.0, 1)]
        with pytest.raises(FloatingPointError, match="round 1"):
            algo.apply(state, full_participation(p), bad, 0.1)
    # torch trees too
    tstate = algo.init({"w": torch.zeros(2)}, 2)
    tbad = [AL.ClientUpdate(0, {"w": torch.tensor([float("nan"), 0.0])}, 1.0, 1), AL.ClientUpdate(1, {"w": torch.zeros(2)}, 1.0, 1)]
    with pytest.raises(FloatingPointError, match="round 0"):
        algo.apply(tstate, full_participation(p), tbad, 0.1)


def test_apply_input_checks():
    algo = AL.make_algorithm("scaffold", sgd(0.1))
    state = algo.init(np.zeros(2), 2)
    p = np.array([0.5, 0.5])
    ups = [AL.ClientUpdate(1, np.zeros(2), 1.0, 1), AL.ClientUpdate(0, np.zeros(2), 1.0, 1)]
    with pytest.raises(ValueError, match="updates"):
        algo.apply(state, full_participation(p), ups, 0.1, p)
    with pytest.raises(ValueError, match=r"^p\b"):
        algo.apply(state, full_participation(p), ups[::-1], 0.1)
    with pytest.raises(ValueError, match="lr"):
        algo.apply(state, full_participation(p), ups[::-1], 0.0, p)
    with pytest.raises(ValueError, match="local_steps"):
        algo.client_final(state, 0, algo.client_init(state, 0))


def test_sampled_round_diagnostics():
    """Uniform sampling weights ω = p m/q: FedAvg's coefficients are ω; diag.chi2 compares normalised ω and w."""
    algo = AL.make_algorithm("fedavg", sgd(0.1))
    p = np.array([0.1, 0.2, 0.3, 0.4])
    state = algo.init(np.zeros(1), 4)
    part = Participation(np.array([1, 3]), p[[1, 3]] * 4 / 2)
    ups = [AL.ClientUpdate(1, np.array([-0.2]), 2.0, 2), AL.ClientUpdate(3, np.array([-0.5]), 5.0, 5)]
    new, diag = algo.apply(state, part, ups, 0.1)
    np.testing.assert_allclose(new.params, [0.4 * -0.2 + 0.8 * -0.5])
    ref = aggregate([u.delta for u in ups], part.weights, [2.0, 5.0], "fedavg")
    assert diag.tau_eff == ref.tau_eff
    omega = part.weights / part.weights.sum()
    assert diag.chi2 == pytest.approx(chi_square(omega, ref.weights / ref.weights.sum()))


def _err_after(name, solver, prob, steps, rounds, **kw):
    algo = AL.make_algorithm(name, solver, **kw)
    run = run_sequential(algo, np.zeros(prob.dim), prob.grad_fn(), prob.p, FixedSteps(steps), rounds)
    x_star = prob.optimum()
    return np.linalg.norm(run.state.params - x_star) / np.linalg.norm(x_star), run


@pytest.mark.parametrize("name,solver", [("scaffold", sgd(0.05)), ("fednova-vr", sgd(0.05)),
                                         ("fednova-vr", momentum_sgd(0.02, 0.5))], ids=["scaffold", "fednova-vr", "fednova-vr-momentum"])
def test_variance_reduced_algorithms_run_to_the_optimum(name, solver):
    """With full-batch gradients and heterogeneous τ_i, x* is a fixed point of the VR algorithms
    (the correction cancels every client's drift), unlike FedAvg's."""
    prob = random_quadratic(6, 4, seed=5, eig_range=(1.0, 2.0), p=[0.3, 0.1, 0.2, 0.1, 0.2, 0.1])
    steps = [1, 7, 3, 9, 2, 5]
    err_vr, run = _err_after(name, solver, prob, steps, 120)
    err_avg, _ = _err_after("fedavg", solver, prob, steps, 120)
    assert np.isfinite(err_vr) and err_vr < 1e-6, err_vr
    assert err_avg > 1e-2
    assert run.state.variates is not None and run.state.round == 120
    assert all(np.isfinite(d.tau_eff) for d in run.diagnostics)


def test_server_optimizer_is_checked_when_the_algorithm_is_built():
    """make_algorithm('fedavg', sgd(0.1), 'momentum') built, then failed at init with
    AttributeError: 'str' object has no attribute 'init'."""

    with pytest.raises(ValueError, match=r"server must be a fedlib.server.ServerOptimizer, got str .*"
                                         r"make_server_optimizer\('momentum'\)"):
        AL.make_algorithm("fedavg", sgd(0.1), "momentum")
    with pytest.raises(ValueError, match="server must be a fedlib.server.ServerOptimizer, got int"):
        AL.FederatedAlgorithm("fednova", sgd(0.1), 3)
    assert AL.make_algorithm("fedavg", sgd(0.1), SV.make_server_optimizer("momentum")).server.name


# --------------------------------------------------------------------------- tau_eff='population' in code
def test_tau_eff_population_in_code_points_to_population_tau_eff():
    """``--tau-eff population`` is on the command line; make_algorithm("fednova", solver, tau_eff="population")
    said only "must be one of ['a_norm', 'local_steps']", not how to get the population value in code."""
    from fedlib.algorithms import make_algorithm
    from fedlib.schedules import FixedSteps, population_tau_eff

    with pytest.raises(ValueError, match=r"tau_eff='population' .*=fedlib\.schedules\.population_tau_eff\(p, schedule, "
                                         r"solver\)"):
        make_algorithm("fednova", sgd(0.1), tau_eff="population")
    value = population_tau_eff([0.5, 0.5], FixedSteps([2, 4]), sgd(0.1))  # the advice, followed
    assert make_algorithm("fednova", sgd(0.1), tau_eff=value).tau_eff == value == pytest.approx(3.0)


# --------------------------------------------------------------------------- FederatedAlgorithm in your own loop
def _own_loop_round(name="fednova"):
    import numpy as np

    from fedlib.algorithms import ClientUpdate, make_algorithm
    from fedlib.sampling import full_participation

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


def test_client_init_and_final_name_arguments_given_in_another_order():
    """client_final(state, run, i) (the solver state where the index goes) failed with numpy's "setting an array
    element with a sequence. The requested array has an inhomogeneous shape after 1 dimensions...", naming no
    argument (client_init(state, run) the same); client_final(run, i, state) advised "ServerState(*state) if it
    holds params, server, ...", which a client's solver state never does. Now both say the arguments are in
    another order."""
    import numpy as np

    algo, state, _, _ = _own_loop_round()
    run = algo.solver.run(state.params, lambda x, k: np.ones(2), 1)
    swapped = r"^client must be one integer index, got a SolverState \(arguments in another order\? "
    with pytest.raises(ValueError, match=swapped + r"algorithm\.client_init\(state, client\) and client_final\(state, "
                                               r"client, solver_state\) take the client's index second\)$"):
        algo.client_final(state, run, 0)
    with pytest.raises(ValueError, match=swapped):
        algo.client_init(state, run)
    with pytest.raises(ValueError, match=r"^state must be a fedlib\.algorithms\.ServerState .*, got SolverState \(a "
                                         r"client's solver state: arguments in another order\? the server state comes "
                                         r"first, algorithm\.client_final\(state, client, solver_state\)\)$"):
        algo.client_final(run, 0, state)


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


# --------------------------------------------------------------------------- client indices that are no integers
@pytest.mark.parametrize("clients, num_clients, match", [
    ([float("nan"), 1], 3, "^client must be an integer index"),
    ([0.5, 2], 3, "^client must be an integer index"),
    ([True], 3, "^client must be an integer index"),
    ([1], float("nan"), "^num_clients must be an integer >= 1"),
    ([1], 2.5, "^num_clients must be an integer >= 1"),
])
def test_check_client_indices_refuses_non_integer_indices(clients, num_clients, match):
    """Was: NaN and 0.5 passed both range comparisons (nan < 0 and nan >= 3 are False), so
    check_client_indices([nan, 1], 3) returned None; num_clients = nan let every index through."""
    from fedlib.algorithms import check_client_indices

    with pytest.raises(ValueError, match=match):
        check_client_indices(clients, num_clients)


def test_check_client_indices_still_takes_integer_and_empty_indices():
    from fedlib.algorithms import check_client_indices

    check_client_indices(np.array([0, 2]), np.int64(3))
    check_client_indices(np.array([], dtype=float), 3)   # a rank without clients (distributed_apply)
    check_client_indices([0, 7], None)                     # no range check without num_clients (documented)
    with pytest.raises(ValueError, match="^client must be an integer index, got 0.5"):
        check_client_indices([0.5], None)                  # but an index is an integer even then


def test_client_init_refuses_a_fractional_client():
    """Was: FedAvg (no variates) started a solver for 'client 1.5' without a word."""
    from fedlib.algorithms import make_algorithm

    algo = make_algorithm("fedavg", sgd(0.1))
    state = algo.init(np.zeros(1), 3)
    with pytest.raises(ValueError, match="^client must be an integer index"):
        algo.client_init(state, 1.5)
    algo.client_init(state, np.int64(2))


@pytest.mark.parametrize("client, match", [(1.5, "^client must be an integer index"),
                                           (float("nan"), "^client must be an integer index"),
                                           (True, "^client must be an integer index"),
                                           (7, "^client 7 is not one of the 3 clients")])
def test_client_final_checks_the_client_index(client, match):
    """Was: client_final(state, 1.5, ...) packaged ClientUpdate(client=1) (int() truncated it), 7 of 3
    clients passed, and nan failed as 'cannot convert float NaN to integer'."""
    from fedlib.algorithms import make_algorithm

    algo = make_algorithm("fedavg", sgd(0.1))
    state = algo.init(np.zeros(1), 3)
    done = sgd(0.1).update(algo.client_init(state, 1), np.ones(1))
    with pytest.raises(ValueError, match=match):
        algo.client_final(state, client, done)
    assert algo.client_final(state, np.int64(1), done).client == 1


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


@pytest.mark.parametrize("delta_kind", ["torch", "numpy"])
def test_apply_refuses_deltas_of_another_kind_than_the_model(delta_kind):
    """A server built on numpy params fed torch deltas (or the reverse) failed in the server
    optimizer with "Concatenation operation is not implemented for NumPy arrays" (or a torch
    TypeError); now apply names the mismatch."""
    from fedlib.algorithms import ClientUpdate, make_algorithm

    algo = make_algorithm("fednova", sgd(1.0))
    params = np.zeros(1) if delta_kind == "torch" else torch.zeros(1, dtype=torch.float64)
    make = (lambda v: torch.tensor([v], dtype=torch.float64)) if delta_kind == "torch" else (lambda v: np.array([v]))
    state = algo.init(params, 2)
    updates = [ClientUpdate(0, make(-2.0), 2.0, 2), ClientUpdate(1, make(-6.0), 6.0, 6)]
    with pytest.raises(ValueError, match="deltas are .* but state.params"):
        algo.apply(state, full_participation([0.5, 0.5]), updates, 1.0)
    # the same kind works: FedNova's x - tau_eff * sum p_i d_i = -(4 * 1)
    same = [ClientUpdate(u.client, torch.as_tensor(u.delta) if delta_kind == "numpy" else np.asarray(u.delta),
                         u.a_norm, u.local_steps) for u in updates]
    new, _ = algo.apply(state, full_participation([0.5, 0.5]), same, 1.0)
    assert float(new.params[0]) == -4.0


def test_apply_checks_a_hand_built_participation():
    """A Participation built by hand: with a repeated client FedNova/FedAvg summed the same update
    twice (SCAFFOLD refused it deep in the variates), with one weight too many the error blamed
    a_norms; a missing update said only 'order'. Now each names participation / the clients."""
    from fedlib.algorithms import ClientUpdate, make_algorithm
    from fedlib.sampling import Participation

    algo = make_algorithm("fednova", sgd(1.0))
    state = algo.init(np.zeros(1), 3)
    up = lambda i, v, a: ClientUpdate(i, np.array([v]), a, int(a))  # noqa: E731
    with pytest.raises(ValueError, match="participation: clients must be distinct"):
        algo.apply(state, Participation([0, 0], [0.5, 0.5]), [up(0, -1.0, 1), up(0, -1.0, 1)], 1.0)
    with pytest.raises(ValueError, match="participation: clients and weights must be 1-d with one weight per client"):
        algo.apply(state, Participation([0, 1], [0.2, 0.3, 0.5]), [up(0, -1.0, 1), up(1, -2.0, 2)], 1.0)
    with pytest.raises(ValueError, match=r"updates are for clients \[0, 1\], participation.clients is \[0, 1, 2\]"):
        algo.apply(state, full_participation([0.2, 0.3, 0.5]), [up(0, -1.0, 1), up(1, -2.0, 2)], 1.0)
    # distinct clients as lists: x - tau_eff * sum_i w_i d_i with d_i = 1, tau_eff = 0.5 * 1 + 0.5 * 2
    new, diag = algo.apply(state, Participation([0, 2], [0.5, 0.5]), [up(0, -1.0, 1), up(2, -2.0, 2)], 1.0)
    assert new.params.tolist() == [-1.5] and diag.tau_eff == 1.5


@pytest.mark.parametrize("params", [None, "weights", {"w": None}])
def test_init_refuses_params_that_are_not_arrays(params):
    """algo.init(None, m) (e.g. a forgotten model) died in numpy's isfinite with "ufunc 'isfinite'
    not supported for the input types"; now a ValueError names params."""
    from fedlib.algorithms import make_algorithm

    with pytest.raises(ValueError, match="params must be a tree"):
        make_algorithm("fednova", sgd(0.1)).init(params, 2)


@pytest.mark.parametrize("copy", [lambda net: [t.clone() for t in net.parameters()],
                                  lambda net: __import__("copy").deepcopy(list(net.parameters()))])
def test_init_refuses_tensors_that_require_grad(copy):
    """A server state built from [t.clone() for t in model.parameters()] or a deepcopy of them (tensors that require
    grad) instead of parameters_of(model). Before: accepted, and every round's update was recorded in an autograd graph
    hanging off the server state: after 3 rounds of SCAFFOLD with server momentum in a ClientOptimizer loop the global
    model, the control variates and the momentum buffer all required grad (params[0].grad_fn a SubBackward0 chaining
    every round), a graph that grows without bound. Now algo.init names the leaf and points to parameters_of."""
    import torch
    import torch.nn.functional as F

    from fedlib.algorithms import make_algorithm
    from fedlib.optim import ClientOptimizer, copy_into, parameters_of
    from fedlib.sampling import full_participation
    from fedlib.server import momentum

    torch.manual_seed(0)
    net, p = torch.nn.Linear(3, 2), [0.5, 0.5]
    algo = make_algorithm("scaffold", sgd(0.05), momentum(0.9))
    with pytest.raises(ValueError, match=r"^params: leaf 0 is a tensor that requires grad \(a model's parameter, or a "
                                         r"copy made with .clone\(\) or copy.deepcopy\); .*parameters_of\(model\)"):
        algo.init(copy(net), 2)
    with pytest.raises(ValueError, match=r"^params: leaf 1 is a tensor that requires grad"):
        algo.init([torch.zeros(2, 3), torch.zeros(2, requires_grad=True)], 2)
    server = algo.init(parameters_of(net), 2)  # detached copies: the loop keeps no graph
    opt = ClientOptimizer(net.parameters(), algo.solver)
    data = [(torch.randn(8, 3), torch.randint(0, 2, (8,))) for _ in p]
    for _ in range(2):
        updates = []
        for i, (x, y) in enumerate(data):
            opt.begin(algo.client_init(server, i))
            opt.zero_grad()
            F.cross_entropy(net(x), y).backward()
            opt.step()
            updates.append(algo.client_final(server, i, opt.solver_state))
        server, _ = algo.apply(server, full_participation(p), updates, opt.lr, p)
        copy_into(net.parameters(), server.params)
    leaves = list(server.params) + list(server.variates.client) + list(server.server.buffer)
    assert not any(t.requires_grad for t in leaves)


@pytest.mark.parametrize("distributed", [False, True])
@pytest.mark.parametrize("field, a_norm, steps", [("local_steps", 1.0, 0), ("local_steps", 2.0, -1),
                                                  ("local_steps", 2.0, 1.5), ("a_norm", 0.0, 1),
                                                  ("a_norm", -1.0, 1), ("a_norm", float("nan"), 1),
                                                  ("a_norm", float("inf"), 1)])
def test_apply_refuses_a_client_update_with_no_local_step(distributed, field, a_norm, steps):
    """A hand-built ClientUpdate claiming 0 (or -1, 1.5) local steps passed apply and was aggregated
    (fednova moved x by 1.125 instead of refusing; only vrlsgd's variates noticed); a_norm 0, < 0 or
    not finite was refused as 'a_norms must be > 0 ... (client 0 ...)', naming the position in the
    round rather than the client (3). Now both name the client and the field."""
    from fedlib.algorithms import ClientUpdate, make_algorithm
    from fedlib.distributed import LocalCommunicator, distributed_apply
    from fedlib.sampling import Participation

    algo = make_algorithm("fednova", sgd(1.0))
    state = algo.init(np.zeros(1), 6)
    part = Participation(np.array([3, 5]), np.array([0.5, 0.5]))
    ups = [ClientUpdate(3, np.array([-2.0]), a_norm, steps), ClientUpdate(5, np.array([-6.0]), 6.0, 6)]
    apply = ((lambda u: distributed_apply(LocalCommunicator(), algo, state, part, u, 1.0, None)) if distributed
             else (lambda u: algo.apply(state, part, u, 1.0)))
    with pytest.raises(ValueError, match=f"client 3 has {field} = "):
        apply(ups)
    good = [ClientUpdate(3, np.array([-2.0]), 2.0, np.int64(2)), ups[1]]
    assert apply(good)[0].params.tolist() == [-4.0]


@pytest.mark.parametrize("steps", ["two", None, [1, 2]])
def test_an_update_whose_local_steps_is_no_number_is_named(steps):
    """``local_steps`` that ``float()`` cannot convert (a string, None, a list) is reported as a bad
    step count of that client, like 0 or 1.5, not as a TypeError from inside the check."""
    got = AL.client_update_problem(ClientUpdate(3, np.zeros(1), a_norm=2.0, local_steps=steps))
    assert got == (f"updates: client 3 has local_steps = {steps!r} (it must be a whole number >= 1: a client that "
                   "took no local step has no update to aggregate; leave it out of the round)")


@pytest.mark.parametrize("field, a_norm, steps", [("a_norm", "2", 2), ("a_norm", b"2", 2), ("a_norm", True, 1),
                                                  ("a_norm", np.True_, 1), ("a_norm", torch.tensor(True), 1),
                                                  ("local_steps", 2.0, "2"), ("local_steps", 1.0, np.True_),
                                                  ("a_norm", torch.tensor([1.0, 2.0]), 2)])
def test_an_update_whose_counts_are_strings_or_bools_is_named(field, a_norm, steps):
    """A hand-built ClientUpdate (the "Extending fedlib" route: your own ||a_i||_1) whose a_norm or local_steps is a
    string or a bool is refused, naming the client and the field, as one of 0 or NaN is. Before: float() took them,
    so a_norm '2' (read from a text file, say) aggregated as 2.0, True as an ||a_i||_1 of 1.0, np.True_ as one local
    step, without a word. A two-element tensor stays refused; numbers, numpy scalars and one-element tensors pass as
    before."""
    from fedlib.algorithms import make_algorithm
    from fedlib.sampling import Participation

    got = AL.client_update_problem(ClientUpdate(3, np.zeros(1), a_norm=a_norm, local_steps=steps))
    assert got is not None and got.startswith(f"updates: client 3 has {field} = ")
    algo = make_algorithm("fednova", sgd(1.0))
    state = algo.init(np.zeros(1), 6)
    part = Participation(np.array([3, 5]), np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match=f"^updates: client 3 has {field} = "):
        algo.apply(state, part, [ClientUpdate(3, np.array([-2.0]), a_norm, steps),
                                 ClientUpdate(5, np.array([-6.0]), 6.0, 6)], 1.0)
    for good_a, good_steps in ((2.0, 2), (np.float32(2.0), np.int64(2)), (torch.tensor(2.0), torch.tensor(2))):
        assert AL.client_update_problem(ClientUpdate(3, np.zeros(1), a_norm=good_a, local_steps=good_steps)) is None


def test_client_final_names_a_solver_state_that_is_not_one():
    """client_final given the ClientOptimizer itself (for opt.solver_state) or the parameters is refused naming
    solver_state. Before: the optimizer's bound method step met 'step < 1': Python's TypeError "'<' not supported
    between instances of 'method' and 'int'"; a list AttributeError "'list' object has no attribute 'step'"."""
    from fedlib.optim import ClientOptimizer, parameters_of

    model = torch.nn.Linear(2, 2).double()
    algo = make_algorithm("fednova", sgd(0.1))
    server = algo.init(parameters_of(model), 2)
    opt = ClientOptimizer(model.parameters(), algo.solver)
    opt.begin(algo.client_init(server, 0))
    model(torch.ones(1, 2, dtype=torch.float64)).sum().backward()
    opt.step()
    with pytest.raises(ValueError, match=r"^solver_state must be the client's finished fedlib\.solvers\.SolverState "
                                         r"\(what solver\.update returned\), got ClientOptimizer \(with ClientOptimizer: "
                                         r"opt\.solver_state\)$"):
        algo.client_final(server, 0, opt)
    with pytest.raises(ValueError, match=r"^solver_state must be .*, got list$"):
        algo.client_final(server, 0, parameters_of(model))
    update = algo.client_final(server, 0, opt.solver_state)
    assert (update.client, update.local_steps, update.a_norm) == (0, 1, 1.0)


def test_client_init_names_a_solver_that_is_not_a_local_solver():
    """client_init(state, i, solver) with a solver name or another object is refused naming solver. Before:
    Python's AttributeError "'str' object has no attribute 'init'"."""
    algo = make_algorithm("scaffold", sgd(0.1))
    state = algo.init(np.zeros(2), 2)
    for bad, kind in (("sgd", "str"), (0.1, "float")):
        with pytest.raises(ValueError, match=rf"^solver must be a fedlib\.solvers\.LocalSolver \(or None: the "
                                             rf"algorithm's\), got {kind}$"):
            algo.client_init(state, 1, bad)
    assert algo.client_init(state, 1, momentum_sgd(0.1, 0.5)).momentum is not None
    assert algo.client_init(state, 1).momentum is None


@pytest.mark.parametrize("client", [[], [1], np.array([1]), (1,)])
def test_client_init_and_client_final_refuse_a_client_that_is_not_one_index(client):
    """A list, tuple or 1-element array for the client index is refused by both. Before: client_init of an
    algorithm without control variates took it (the index is unused there), and client_final raised Python's
    TypeError from int(): "int() argument must be a string, a bytes-like object or a real number, not 'list'" /
    "only 0-dimensional arrays can be converted to Python scalars"."""
    algo = make_algorithm("fedavg", sgd(0.1))
    state = algo.init(np.zeros(2), 2)
    run = algo.solver.update(algo.client_init(state, 1), np.ones(2))
    for call in (lambda: algo.client_init(state, client), lambda: algo.client_final(state, client, run)):
        with pytest.raises(ValueError, match=r"^client must be one integer index, got "):
            call()
    assert algo.client_final(state, np.int64(1), run).client == 1


def test_apply_names_updates_that_are_no_sequence():
    """Before: apply(state, participation, None, lr) raised Python's TypeError "'NoneType' object is not iterable"
    (a number: "'float' object is not iterable")."""
    algo = make_algorithm("fednova", sgd(0.1))
    state = algo.init(np.zeros(2), 2)
    for bad in (None, 0.5):
        with pytest.raises(ValueError, match=rf"^updates must be a sequence of ClientUpdate \(algorithm\.client_final\("
                                             rf"state, i, solver_state\)\), got {bad!r}$"):
            algo.apply(state, full_participation([0.5, 0.5]), bad, 0.1)
    updates = (algo.client_final(state, i, algo.solver.update(algo.client_init(state, i), np.ones(2))) for i in (0, 1))
    assert algo.apply(state, full_participation([0.5, 0.5]), updates, 0.1)[0].params.tolist() == [-0.1, -0.1]


def test_init_points_a_model_or_its_parameter_iterator_to_parameters_of():
    """algorithm.init(model, m) and algorithm.init(model.parameters(), m) said only "params must be a tree (dict /
    list / tuple) of numpy arrays, torch tensors or numbers, got Linear leaves" ("generator leaves"); now the
    message also says how to pass a model: algo.init(fedlib.optim.parameters_of(model), num_clients)."""
    import torch


    algo = make_algorithm("fedavg", sgd(0.1))
    model = torch.nn.Linear(2, 1)
    for params, name in ((model, "Linear"), (model.parameters(), "generator")):
        with pytest.raises(ValueError, match=rf"^params must be a tree .* got {name} leaves \(a model or an iterator "
                                             r"of its parameters: .*algo\.init\(fedlib\.optim\.parameters_of\(model\), "
                                             r"num_clients\)\)$"):
            algo.init(params, 2)
    with pytest.raises(ValueError, match=r"got NoneType leaves$"):   # other non-trees keep the plain message
        algo.init(None, 2)


def test_init_and_run_sequential_share_one_requires_grad_check():
    """algorithm.init's loop over tree_leaves and run_sequential's _requires_grad were two copies of one check (the
    first leaf that is a tensor requiring grad); now run_sequential imports init's. Both name the same leaf of a
    nested tree, a dict and a flat list, and take numpy leaves and detached tensors."""
    from fedlib.engines import reference
    from fedlib.schedules import FixedSteps
    from fedlib.tree import tree_map

    assert reference._requires_grad is AL._requires_grad
    w = torch.ones(2, requires_grad=True)
    algo = make_algorithm("fedavg", sgd(0.1))
    for tree, k in (([np.zeros(1), [torch.zeros(1), w]], 2), ({"a": torch.zeros(1), "b": w}, 1), ([w], 0)):
        with pytest.raises(ValueError, match=rf"^params: leaf {k} is a tensor that requires grad"):
            algo.init(tree, 2)
        state = algo.init(tree_map(lambda t: t.detach() if hasattr(t, "detach") else t, tree), 2)
        with pytest.raises(ValueError, match=rf"^initial_state\.params: leaf {k} is a tensor that requires grad"):
            run_sequential(algo, None, lambda x, i, t, s: x, [0.5, 0.5], FixedSteps([1, 1]), 1,
                           initial_state=state._replace(params=tree))
    assert AL._requires_grad([np.zeros(1), torch.zeros(1), 2.0]) is None


def test_apply_names_the_clients_whose_change_is_not_finite():
    """A non-finite aggregated update is a FloatingPointError that names the participating clients whose change
    holds NaN or inf (a NaN in a client's data, a learning rate too large for it) and says what to look at. Before,
    it said only "round 0: the aggregated update is not finite (diverged)", the same for one client's NaN sample
    as for a learning rate that overflowed every client. The message's start is kept; changes that are each finite
    but overflow when summed keep the message as it was."""
    algo = make_algorithm("fednova", sgd(0.1))
    state = algo.init(np.zeros(2), num_clients=4)
    p = np.full(4, 0.25)
    ups = [ClientUpdate(0, np.zeros(2), 1.0, 1), ClientUpdate(1, np.array([np.nan, 0.0]), 1.0, 1),
           ClientUpdate(2, np.ones(2), 2.0, 2), ClientUpdate(3, np.array([0.0, -np.inf]), 1.0, 1)]
    with pytest.raises(FloatingPointError) as info:
        algo.apply(state, full_participation(p), ups, 0.1, p)
    assert str(info.value) == ("round 0: the aggregated update is not finite (diverged): the change of 2 of the 4 "
                               "participating clients, [1, 3], holds NaN or inf (NaN or inf in their data or loss, "
                               "or a learning rate too large for them)")
    big = make_algorithm("fednova", sgd(0.1), tau_eff=1e300)  # c_i = 1e300 / 4: finite changes of 1e10 overflow
    huge = [ClientUpdate(i, np.full(2, 1e10), 1.0, 1) for i in range(4)]
    with pytest.raises(FloatingPointError) as info, np.errstate(over="ignore"):
        big.apply(big.init(np.zeros(2), num_clients=4), full_participation(p), huge, 0.1, p)
    assert str(info.value) == "round 0: the aggregated update is not finite (diverged)"

"""A researcher using fedlib as a library on their own model and data: unusual-but-valid and
invalid inputs to the public API (rule, algorithms, sampling, schedules), each found to fail
or misbehave before its fix."""
import numpy as np
import pytest
import torch

from fedlib.rule import fednova_weights
from fedlib.sampling import full_participation, sample_clients
from fedlib.schedules import RandomEpochs, population_tau_eff
from fedlib.solvers import sgd
from fedlib.theory import chi_square


def test_client_weights_as_a_torch_tensor():
    """p = n / n.sum() computed in torch (a user's per-client tensors) is accepted wherever p is:
    it raised TypeError "Cannot interpret 'torch.float32' as a data type"."""
    p = torch.tensor([1.0, 3.0]) / 4.0
    assert fednova_weights(p, [2.0, 6.0])[0] == pytest.approx(5.0)
    assert full_participation(p).weights.tolist() == [0.25, 0.75]
    assert sample_clients("uniform", p, 1, 0, 0).clients.size == 1
    assert population_tau_eff(p, RandomEpochs([4, 8], 2, 1, 3), sgd(0.1)) == pytest.approx(7.0)
    assert chi_square(p, [0.25, 0.75]) == pytest.approx(0.0)
    assert fednova_weights(torch.tensor([0.25, 0.75], requires_grad=True), [1.0, 1.0])[1].tolist() == [0.25, 0.75]
    # float32 rounding of 1/3 is tolerated as for a numpy float32 p; a wrong sum is still refused
    fednova_weights(torch.full((3,), 1 / 3), [1.0, 2.0, 3.0])
    fednova_weights(torch.full((3,), 1 / 3, dtype=torch.bfloat16), [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="p must sum to 1"):
        fednova_weights(torch.tensor([0.5, 0.6]), [1.0, 1.0])


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


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_grad_fn_returning_a_list_for_an_array_parameter(momentum):
    """grad_fn(params, ...) -> list(...) for a numpy-array model: plain SGD died in ``lr * list``
    ("can't multiply sequence by non-int of type 'float'") while momentum silently converted
    it; both now refuse it, naming grads."""
    from fedlib.solvers import LocalSolver

    solver = LocalSolver(lr=0.1, momentum=momentum)
    state = solver.init(np.zeros(3))
    with pytest.raises(ValueError, match="grads must have the structure of params"):
        solver.update(state, [1.0, 2.0, 3.0])
    assert solver.update(state, np.ones(3)).params.tolist() == [-0.1, -0.1, -0.1]


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


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_aggregate_dtype_does_not_depend_on_client_order(kind):
    """Clients reporting in different precisions: the sum was cast in place to the FIRST client's
    dtype, so [float32, float64] gave float32 (the float64 client's digits lost) and the reverse
    order float64; [float32 array, int64 array] likewise. Now the widest dtype, in any order."""
    from fedlib.rule import aggregate

    if kind == "numpy":
        lo, hi, integer = (np.array([1.0], np.float32), np.array([1.0 + 1e-12]), np.array([1], np.int64))
        f64 = np.float64
    else:
        lo, hi, integer = (torch.tensor([1.0]), torch.tensor([1.0 + 1e-12], dtype=torch.float64),
                           torch.tensor([1], dtype=torch.int64))
        f64 = torch.float64
    for deltas in ([lo, hi], [hi, lo]):
        change = aggregate(deltas, [0.5, 0.5], [1.0, 1.0], "fednova").change
        assert change.dtype == f64
        assert float(change[0]) == 1.0 + 0.5e-12  # sum p_i Delta_i (equal a_i): the float64 client's digits kept
    a = aggregate([lo, integer], [0.5, 0.5], [1.0, 1.0]).change
    b = aggregate([integer, lo], [0.5, 0.5], [1.0, 1.0]).change
    assert a.dtype == b.dtype
    same = aggregate([lo, lo], [0.5, 0.5], [1.0, 1.0]).change  # one precision: kept as before
    assert same.dtype == lo.dtype


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


def test_solver_refuses_gradients_of_another_kind_than_the_parameters():
    """A numpy model with a torch gradient died in ``x - lr * g`` ("unsupported operand type(s) for
    -: 'numpy.ndarray' and 'Tensor'"); a float32 torch model with a numpy gradient silently became
    a float64 tensor. Both now refused, naming grads."""
    solver = sgd(0.1)
    with pytest.raises(ValueError, match="grads: a leaf is a torch tensor but the parameter is a numpy array"):
        solver.update(solver.init(np.zeros(2)), torch.ones(2))
    with pytest.raises(ValueError, match="grads: a leaf is a numpy array but the parameter is a torch tensor"):
        solver.update(solver.init(torch.zeros(2)), np.ones(2))
    out = solver.update(solver.init(torch.zeros(2)), torch.ones(2)).params
    assert out.dtype == torch.float32 and out.tolist() == pytest.approx([-0.1, -0.1])
    assert solver.update(solver.init(0.0), 1.0).params == pytest.approx(-0.1)  # a number is a leaf too


def test_wallclock_steps_that_overflow_int64_are_refused():
    """speeds * round_seconds past 2**63 (or inf) was cast to int64 silently: WallClock([1e300], 1e10)
    gave -9223372036854775808 local steps (with numpy RuntimeWarnings only)."""
    from fedlib.schedules import WallClock

    with pytest.raises(ValueError, match="speeds: client 1 would take"):
        WallClock([1.0, 1e300], 1e10).local_steps(0)
    with pytest.raises(ValueError, match="speeds: client 0 would take"):
        WallClock([1e19], 1.0).local_steps(0)
    assert WallClock([0.29, 1e6], 100.0).local_steps(0).tolist() == [29, 10 ** 8]


@pytest.mark.parametrize("dtype", ["float64", torch.int64, np.float64])
def test_train_clients_names_a_bad_dtype(dtype):
    """train_clients(..., dtype="float64") failed with RuntimeError "Invalid device string: 'float64'"
    (the features were cast with .to(dtype) before any check), and dtype=torch.int64 was blamed on
    the features ("features must be a float tensor"); now both name dtype."""
    from torch import nn

    from fedlib.experiments.custom import train_clients

    xs, ys = [torch.randn(3, 4), torch.randn(2, 4)], [torch.tensor([0, 1, 2]), torch.tensor([1, 0])]
    with pytest.raises(ValueError, match="dtype must be torch.float32 or torch.float64"):
        train_clients(nn.Linear(4, 3), xs, ys, rounds=1, dtype=dtype)


@pytest.mark.parametrize("live", [lambda net: list(net.parameters()), lambda net: [p.detach() for p in net.parameters()]])
def test_client_optimizer_refuses_a_server_state_aliasing_the_model(live):
    """algo.init(list(model.parameters()), m) (or p.detach(), which shares memory) instead of
    parameters_of(model): the server's x^(t,0) WAS the model, so each client's training moved it
    and Delta_i = x_i - x^(t,0) came out wrong — FedNova's round differed from the right one by
    0.05 in a small MLP, silently. ClientOptimizer.begin now refuses such a state."""
    import torch.nn.functional as F
    from torch import nn

    from fedlib.algorithms import make_algorithm
    from fedlib.optim import ClientOptimizer, parameters_of

    torch.manual_seed(0)
    net, x, y = nn.Linear(4, 3), torch.randn(8, 4), torch.randint(0, 3, (8,))
    algo = make_algorithm("fednova", sgd(0.1))
    opt = ClientOptimizer(net.parameters(), algo.solver)
    with pytest.raises(ValueError, match=r"solver_state.params\[0\] shares memory with the model's parameters"):
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


def test_run_replicas_names_work_without_draw():
    """run_replicas with a step schedule (FixedSteps) as ``work`` raised AttributeError "'FixedSteps'
    object has no attribute 'draw'" from inside the round loop; now a ValueError names work."""
    from fedlib.engines.quadratic import run_replicas
    from fedlib.problems import random_quadratic
    from fedlib.schedules import FixedSteps, RandomLocalWork

    prob = random_quadratic(2, 2, seed=0)
    with pytest.raises(ValueError, match=r"work must have draw\(round\)"):
        run_replicas(prob, "fednova", [sgd(0.01)], FixedSteps([1, 2]), 3)
    run = run_replicas(prob, "fednova", [sgd(0.01)], RandomLocalWork([1, 2], [1, 2]), 3)
    assert run.tau_eff.tolist() == [1.5, 1.5, 1.5]  # sum_i p_i tau_i with p = (1/2, 1/2), SGD


def test_distributed_apply_refuses_deltas_of_another_kind_than_the_model():
    """distributed_apply (one process: LocalCommunicator) with torch deltas onto a numpy model died in
    the server optimizer with numpy's 'Concatenation operation is not implemented'; now the rank's
    update check names the client (raised on every rank, after the first collective)."""
    from fedlib.algorithms import ClientUpdate, make_algorithm
    from fedlib.distributed import LocalCommunicator, distributed_apply

    algo = make_algorithm("fednova", sgd(1.0))
    state = algo.init(np.zeros(1), 2)
    t = lambda v: torch.tensor([v], dtype=torch.float64)  # noqa: E731
    updates = [ClientUpdate(0, t(-2.0), 2.0, 2), ClientUpdate(1, t(-6.0), 6.0, 6)]
    with pytest.raises(ValueError, match="client 0's delta holds torch tensors but state.params holds numpy arrays"):
        distributed_apply(LocalCommunicator(), algo, state, full_participation([0.5, 0.5]), updates, 1.0, None)
    same = [u._replace(delta=u.delta.numpy()) for u in updates]
    new, _ = distributed_apply(LocalCommunicator(), algo, state, full_participation([0.5, 0.5]), same, 1.0, None)
    assert new.params.tolist() == [-4.0]


@pytest.mark.parametrize("a_norms", [torch.tensor([2.0, 6.0], dtype=torch.bfloat16),
                                     torch.tensor([2.0, 6.0], requires_grad=True)])
def test_aggregate_takes_a_norms_as_any_torch_tensor(a_norms):
    """a_norms as a bfloat16 tensor or one requiring grad passed the checks but then failed in
    np.asarray ("Got unsupported ScalarType BFloat16", "Can't call numpy() on Tensor that requires
    grad"); eq. 4 on deltas (-2, -6), p = (1/2, 1/2), ||a|| = (2, 6): tau_eff 4, change -4."""
    from fedlib.rule import aggregate, aggregate_stacked

    deltas = [np.array([-2.0]), np.array([-6.0])]
    assert aggregate(deltas, [0.5, 0.5], a_norms, "fednova").change.tolist() == [-4.0]
    assert aggregate_stacked(np.stack(deltas), [0.5, 0.5], a_norms, "fedavg").change.tolist() == [-4.0]


@pytest.mark.parametrize("rho", [0.99999, 0.999999, 1 - 1e-9, 1 - 1e-12])
def test_momentum_a_norm_closed_form_for_momentum_near_one(rho):
    """||a_i||_1 = [tau - rho(1 - rho^tau)/(1 - rho)]/(1 - rho) cancels for rho near 1: at
    rho = 1 - 1e-9, tau = 2 the closed form was 33 % off (2 instead of 2 + rho), and run_replicas /
    population_tau_eff use it. Exact: sum_{k<tau} (tau - k) rho^k, in rationals."""
    from fractions import Fraction

    from fedlib.solvers import momentum_sgd

    solver = momentum_sgd(0.1, rho)
    for tau in (1, 2, 3, 10, 100):
        exact = float(sum((tau - k) * Fraction(rho) ** k for k in range(tau)))
        assert solver.a_norm(tau) == pytest.approx(exact, rel=1e-13)
        assert solver.a_vector(tau).sum() == pytest.approx(exact, rel=1e-13)
        assert solver.online_a_norms(tau)[-1] == pytest.approx(exact, rel=1e-13)


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


@pytest.mark.parametrize("model", [torch.nn.Identity(), torch.nn.ReLU()])
def test_train_clients_refuses_a_model_without_parameters(model):
    """nn.Identity() / nn.ReLU() on 3 features and 3 classes ran every round and trained nothing
    (the same train loss, 1.1105 / 1.0647, in every round for fedavg and fednova); now refused."""
    from fedlib.experiments.custom import train_clients

    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(8, 3, generator=g) for _ in range(2)]
    ys = [torch.randint(0, 3, (8,), generator=g) for _ in range(2)]
    with pytest.raises(ValueError, match=f"model has no parameters \\({type(model).__name__}\\)"):
        train_clients(model, xs, ys, rounds=1, epochs="1")


@pytest.mark.parametrize("rho", [0.9, 0.99, 1 - 1e-6, 1 - 1e-9])
@pytest.mark.parametrize("alpha", [1e-6, 1e-3, 0.05, 0.5])
def test_momentum_prox_a_norm_closed_form_for_momentum_near_one(rho, alpha):
    """Momentum + prox: ||a_i||_1 = [q(1 - q^tau)/alpha - rho(1 - rho^tau)/(1 - rho)]/(q - rho), q = 1 - alpha,
    took 1 - rho^tau as a plain difference, which loses ~|log10(1 - rho)| digits: 1.4e-8 relative off at
    rho = 1 - 1e-9, alpha = 0.05, tau = 5 (1.5e-10 at rho = 1 - 1e-6, tau = 2). Exact: the sum of
    p_n = q p_{n-1} + rho^n, p_0 = 1 (a_vector reversed), in rationals."""
    from fractions import Fraction

    from fedlib.solvers import momentum_proximal_sgd

    solver = momentum_proximal_sgd(1.0, rho, alpha)
    q, r = 1 - Fraction(solver.alpha), Fraction(rho)
    p, rk = [Fraction(1)], Fraction(1)
    for _ in range(1, 200):
        rk *= r
        p.append(q * p[-1] + rk)
    for tau in (1, 2, 5, 20, 200):
        exact = sum(p[:tau])
        assert solver.a_norm(tau) == pytest.approx(float(exact), rel=1e-13)
        assert solver.a_vector(tau) == pytest.approx([float(v) for v in p[tau - 1::-1]], rel=1e-13)
        assert solver.online_a_norms(tau)[-1] == pytest.approx(float(exact), rel=1e-13)

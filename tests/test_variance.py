"""Control variates: SCAFFOLD / FedNova-VR (c̄ − c_i, c_i the raw normalised gradient,
c̄ over all clients with weights p) and VRLSGD (= SCAFFOLD for equal τ_i and SGD); a bool
num_clients and non-finite variates are refused; integer initial params and float32 are kept; VRLSGD equals
SCAFFOLD only under full participation."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from fedlib import variance as V
from fedlib.algorithms import ClientUpdate, make_algorithm
from fedlib.engines.reference import run_sequential
from fedlib.problems import random_quadratic
from fedlib.sampling import full_participation
from fedlib.schedules import FixedSteps, RandomSteps
from fedlib.solvers import momentum_sgd, sgd

P3 = np.array([0.5, 0.25, 0.25])
C3 = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]])


def _state(kind="scaffold"):
    mean = P3 @ C3 if kind == "scaffold" else np.zeros(2)
    return V.ControlVariates(C3.copy(), mean, kind)


def test_init_and_correction_shapes():
    st = V.init_control_variates({"w": np.ones((2, 3)), "b": torch.ones(4, dtype=torch.float64)}, 5)
    assert st.client["w"].shape == (5, 2, 3) and st.client["b"].shape == (5, 4)
    assert isinstance(st.client["b"], torch.Tensor) and st.kind == "scaffold"
    corr = V.correction(st, 4)
    assert np.all(corr["w"] == 0) and torch.all(corr["b"] == 0)


def test_scaffold_hand_example():
    st = _state()
    np.testing.assert_allclose(st.mean, [1.0, 0.75])
    np.testing.assert_allclose(V.correction(st, 0), [0.0, 0.75])     # c̄ − c_0
    np.testing.assert_allclose(V.correction(st, 2), [-1.0, -1.25])
    lr = 0.1
    deltas = [np.array([-0.2, 0.0]), np.array([0.4, -0.8])]          # d_0 = [1, 0], d_2 = [-1, 2]
    new = V.update_control_variates(st, [0, 2], deltas, lr, [2.0, 4.0], P3)
    # raw normalised gradient = d_i − (c̄ − c_i)
    np.testing.assert_allclose(new.client[0], [1.0, -0.75], atol=1e-15)
    np.testing.assert_allclose(new.client[1], [0.0, 1.0], atol=0)     # did not participate
    np.testing.assert_allclose(new.client[2], [0.0, 3.25], atol=1e-15)
    # mean over ALL clients with p: 0.5[1,-.75] + .25[0,1] + .25[0,3.25]
    np.testing.assert_allclose(new.mean, [0.5, 0.6875], atol=1e-15)
    sampled_only = (0.5 * new.client[0] + 0.25 * new.client[2]) / 0.75
    assert np.linalg.norm(new.mean - sampled_only) > 0.1
    # the input state is not modified
    np.testing.assert_array_equal(st.client, C3)
    np.testing.assert_allclose(st.mean, [1.0, 0.75])


def test_vrlsgd_hand_example():
    st = V.ControlVariates(C3.copy(), np.zeros(2), "vrlsgd")
    np.testing.assert_allclose(V.correction(st, 1), [0.0, -1.0])      # c̄ = 0: correction = −c_i
    lr = 0.1
    deltas = [np.array([-0.2, 0.0]), np.array([0.4, -0.8])]
    server_change = np.array([0.1, -0.2])
    new = V.update_control_variates(st, [0, 2], deltas, lr, [2.0, 4.0], P3, local_steps=[2, 4],
                                    server_change=server_change)
    # c_i ← c_i − (Δ_i − Δ)/(η τ_i)
    np.testing.assert_allclose(new.client[0], [2.5, -1.0], atol=1e-14)
    np.testing.assert_allclose(new.client[2], [1.25, 3.5], atol=1e-14)
    np.testing.assert_array_equal(new.client[1], [0.0, 1.0])
    np.testing.assert_array_equal(new.mean, [0.0, 0.0])
    with pytest.raises(ValueError, match="local_steps"):
        V.update_control_variates(st, [0], deltas[:1], lr, [1.0], P3)


def test_torch_variates_update():
    # torch.tensor copies (torch.as_tensor shared C3's memory, so "the input is unchanged" compared C3 with itself
    # and could not fail: an update written into the caller's state passed the whole suite)
    st = V.ControlVariates(torch.tensor(C3), torch.tensor(P3 @ C3), "scaffold")
    new = V.update_control_variates(st, [0, 2], [torch.tensor([-0.2, 0.0], dtype=torch.float64),
                                                 torch.tensor([0.4, -0.8], dtype=torch.float64)], 0.1, [2.0, 4.0], P3)
    np.testing.assert_allclose(new.mean.numpy(), [0.5, 0.6875], atol=1e-15)
    np.testing.assert_array_equal(st.client.numpy(), C3)


def test_variates_are_raw_normalised_gradients_in_a_run():
    """Run 2 rounds with partial participation and momentum; check c_i = G_i^raw a / ‖a‖₁ for
    the participants of the last round, untouched for the others, and c̄ = Σ_j p_j c_j over all."""
    prob = random_quadratic(5, 3, seed=4, p=[0.1, 0.3, 0.2, 0.15, 0.25])
    solver = momentum_sgd(0.05, 0.5)
    steps = FixedSteps([2, 5, 3, 4, 1])
    raw = {}

    def grad_fn(x, i, t, k):
        g = prob.grad(x, i)
        raw.setdefault((t, i), []).append(g)
        return g

    for name in ("scaffold", "fednova-vr"):
        raw.clear()
        algo = make_algorithm(name, solver)
        run = run_sequential(algo, np.zeros(3), grad_fn, prob.p, steps, 2, sampling="uniform", clients_per_round=2, seed=3)
        cv = run.state.variates
        last = set(run.diagnostics[1].clients.tolist())
        first = set(run.diagnostics[0].clients.tolist())
        for i in range(5):
            t = 1 if i in last else (0 if i in first else None)
            if t is None:
                np.testing.assert_array_equal(cv.client[i], 0.0)
                continue
            G = np.stack(raw[(t, i)], axis=1)
            a = solver.a_vector(G.shape[1])
            np.testing.assert_allclose(cv.client[i], G @ a / a.sum(), rtol=1e-11, atol=1e-12)
        np.testing.assert_allclose(cv.mean, prob.p @ cv.client, rtol=1e-14, atol=1e-15)


def _history(name, prob, schedule, rounds, lr=0.05):
    algo = make_algorithm(name, sgd(lr))
    run = run_sequential(algo, np.zeros(prob.dim), prob.grad_fn(), prob.p, schedule, rounds,
                         metric_fn=lambda x, t: np.array(x, copy=True))
    return np.array(run.metrics)


def test_vrlsgd_equals_scaffold_for_equal_steps():
    prob = random_quadratic(6, 4, seed=11, p=[0.1, 0.2, 0.3, 0.1, 0.2, 0.1])
    sc = _history("scaffold", prob, FixedSteps([4] * 6), 8)
    vr = _history("vrlsgd", prob, FixedSteps([4] * 6), 8)
    assert np.linalg.norm(sc[-1] - sc[1]) > 1e-2  # the runs move
    assert np.max(np.abs(sc - vr)) <= 1e-12 * np.max(np.abs(sc))
    # and both differ from plain FedAvg after round 1 (the corrections act)
    avg = _history("fedavg", prob, FixedSteps([4] * 6), 8)
    np.testing.assert_allclose(sc[1], avg[1], rtol=1e-13)
    assert np.linalg.norm(sc[3] - avg[3]) > 1e-4


def test_vrlsgd_differs_from_scaffold_for_random_steps():
    prob = random_quadratic(6, 4, seed=11)
    sched = RandomSteps(6, 1, 10, seed=2)
    sc = _history("scaffold", prob, sched, 8)
    vr = _history("vrlsgd", prob, sched, 8)
    assert np.linalg.norm(sc[-1] - vr[-1]) > 1e-3 * np.linalg.norm(sc[-1])


@pytest.mark.parametrize("name", ["scaffold", "fednova-vr"])
def test_one_client_has_no_correction_and_is_plain_local_sgd(name):
    """m = 1: the mean variate is the client's own, so the correction c_bar - c_1 is 0 every round and
    the VR algorithm is its plain counterpart (FedAvg / FedNova), round for round."""
    st = V.init_control_variates(np.zeros(2), 1)
    assert st.client.shape == (1, 2)
    cv = V.control_variates(np.array([[3.0, -1.0]]), [1.0])
    np.testing.assert_array_equal(cv.mean, [3.0, -1.0])
    np.testing.assert_array_equal(V.correction(cv, 0), [0.0, 0.0])
    problem = random_quadratic(1, 3, seed=4)
    plain = {"scaffold": "fedavg", "fednova-vr": "fednova"}[name]
    runs = [run_sequential(make_algorithm(n, sgd(0.05)), np.zeros(3), problem.grad_fn(), problem.p,
                           RandomSteps(1, 1, 6, seed=2), 5) for n in (name, plain)]
    np.testing.assert_allclose(runs[0].state.params, runs[1].state.params, rtol=1e-13, atol=1e-15)


# --------------------------------------------------------------------------- a bool num_clients, non-finite variates
def test_init_control_variates_refuses_a_bool_num_clients():
    """Was: True is an int, so init_control_variates(params, True) made variates for 1 client."""
    from fedlib.variance import init_control_variates

    with pytest.raises(ValueError, match=r"^num_clients must be an integer >= 1, got True"):
        init_control_variates(np.zeros(2), True)
    assert init_control_variates(np.zeros(2), np.int64(2)).client.shape == (2, 2)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_control_variates_refuses_non_finite_variates(bad):
    """Was: control_variates(np.array([[nan], [-1.0]]), [0.5, 0.5]) returned mean [nan], so every
    client's correction (mean - c_i) was NaN from the first round."""
    from fedlib.variance import control_variates

    with pytest.raises(ValueError, match="^client: the variates hold NaN or inf"):
        control_variates(np.array([[bad], [-1.0]]), [0.5, 0.5])
    assert control_variates(np.array([[3.0], [-1.0]]), [0.5, 0.5]).mean.tolist() == [1.0]


@pytest.mark.parametrize("name", ["scaffold", "vrlsgd", "fednova-vr"])
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_integer_initial_params_do_not_truncate_the_control_variates(name, backend):
    """init(np.array([0, 0, 0])) stacked the c_i as int64: every update was truncated towards 0
    (c_0 = [0, -1, -1] instead of [0.02, -1.47, -1.63] for SCAFFOLD) and the run drifted
    (FedAvg-style algorithms are fine with integer params: the change is float)."""
    from fedlib.engines.reference import run_sequential
    from fedlib.schedules import FixedSteps

    if backend == "torch":
        torch = pytest.importorskip("torch")
        e = torch.tensor([[0.3, 1.7, 2.2], [-1.4, 0.5, 0.9], [2.6, -0.8, 0.1]], dtype=torch.float64)
        starts = (torch.zeros(3, dtype=torch.float64), torch.zeros(3, dtype=torch.int64))
    else:
        e = np.array([[0.3, 1.7, 2.2], [-1.4, 0.5, 0.9], [2.6, -0.8, 0.1]])
        starts = (np.zeros(3), np.array([0, 0, 0]))
    p = np.full(3, 1 / 3)
    runs = [run_sequential(make_algorithm(name, sgd(0.1)), x0, lambda x, i, t, k: x - e[i], p,
                           FixedSteps([1, 2, 3]), 4).state for x0 in starts]
    assert np.asarray(runs[1].variates.client).dtype.kind == "f"
    tol = 1e-12 if backend == "numpy" else 1e-5  # torch: integer leaves become the default float (float32)
    np.testing.assert_allclose(np.asarray(runs[1].variates.client), np.asarray(runs[0].variates.client), rtol=0,
                               atol=tol)
    np.testing.assert_allclose(np.asarray(runs[1].params), np.asarray(runs[0].params), rtol=0, atol=tol)


def test_vrlsgd_equals_scaffold_only_with_full_participation():
    """The docstring said 'with equal tau_i and SGD this is exactly SCAFFOLD'; under client sampling
    the two differ (SCAFFOLD's c_bar also moves the correction of clients left out)."""
    import fedlib.variance
    from fedlib.engines.reference import run_sequential
    from fedlib.schedules import FixedSteps

    p = np.array([0.2, 0.3, 0.5])
    e = np.array([[0.3, 1.7, 2.2], [-1.4, 0.5, 0.9], [2.6, -0.8, 0.1]])

    def final(name, sampling, q):
        return run_sequential(make_algorithm(name, sgd(0.1)), np.zeros(3), lambda x, i, t, k: x - e[i], p,
                              FixedSteps([3, 3, 3]), 6, sampling=sampling, clients_per_round=q).state.params

    assert np.max(np.abs(final("scaffold", "full", None) - final("vrlsgd", "full", None))) <= 1e-12
    assert np.max(np.abs(final("scaffold", "uniform", 2) - final("vrlsgd", "uniform", 2))) > 1e-2
    doc = " ".join(fedlib.variance.__doc__.split())
    assert "SGD and full participation this is exactly SCAFFOLD" in doc


def test_stacked_weighted_sum_keeps_a_float32_stack_float32():
    """c_bar = sum_j p_j c_j of float32 numpy variates came back float64 (tree_weighted_sum and torch kept float32)."""
    from fedlib.tree import tree_stacked_weighted_sum

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = tree_stacked_weighted_sum(x, [0.25, 0.75])
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.array([2.25, 3.25, 4.25], dtype=np.float32))
    assert tree_stacked_weighted_sum(np.arange(6).reshape(2, 3), [0.5, 0.5]).dtype == np.float64  # ints: float
    algo = make_algorithm("scaffold", sgd(0.1))
    p = np.full(2, 0.5)
    state = algo.init(np.zeros(3, np.float32), 2)
    ups = [ClientUpdate(i, np.full(3, i + 1.0, np.float32), 1.0, 1) for i in range(2)]
    state, _ = algo.apply(state, full_participation(p), ups, 0.1, p)
    assert state.params.dtype == state.variates.client.dtype == state.variates.mean.dtype == np.float32


def test_update_control_variates_refuses_a_change_shaped_unlike_the_model():
    """A model of 3 entries: a change of shape (1,) or a number was broadcast over the whole row (SCAFFOLD's c_i came
    back [-2, -2, -2] from deltas [ones(1), ones(1)], lr 0.5, ||a|| 1), a (3, 1) one raised numpy's 'could not
    broadcast' without naming deltas, and VRLSGD broadcast a server_change of shape (1,) alike. ValueErrors naming them."""
    state = V.init_control_variates(np.zeros(3), 2)
    for deltas in ([np.ones(1), np.ones(1)], [np.ones(3), 2.0], [np.ones((3, 1)), np.ones(3)]):
        with pytest.raises(ValueError, match=r"deltas\[[01]\] must have the structure and leaf shapes of the model"):
            V.update_control_variates(state, [0, 1], deltas, 0.5, [1.0, 1.0], [0.5, 0.5])
    vr = V.init_control_variates(np.zeros(3), 2, kind="vrlsgd")
    with pytest.raises(ValueError, match="server_change must have the structure"):
        V.update_control_variates(vr, [0, 1], [np.ones(3), np.ones(3)], 0.5, [1.0, 1.0], [0.5, 0.5], local_steps=[1, 1],
                                server_change=np.ones(1))
    ok = V.update_control_variates(state, [0, 1], [np.ones(3), -np.ones(3)], 0.5, [1.0, 1.0], [0.5, 0.5])
    np.testing.assert_array_equal(ok.client, [[-2.0] * 3, [2.0] * 3])   # c_i = -Delta_i / (lr ||a_i||)


def test_updated_client_variates_no_participant_is_an_unchanged_copy():
    """A rank of distributed_apply with no participant this round passes no clients (and no a_norms):
    allowed, an unchanged copy (the checks refuse an empty a_norms only in update_control_variates)."""
    st = V.control_variates(np.array([[3.0], [-1.0]]), [0.5, 0.5])
    out = V.updated_client_variates(st, [], [], 0.5, [])
    np.testing.assert_array_equal(out, st.client)
    assert out is not st.client
    vr = V.init_control_variates(np.zeros(1), num_clients=2, kind="vrlsgd")
    np.testing.assert_array_equal(V.updated_client_variates(vr, [], [], 0.5, [], [], np.zeros(1)), vr.client)


def test_vrlsgd_control_variates_of_a_torch_stack_keep_a_torch_mean():
    """control_variates(torch stack, p, kind="vrlsgd") makes c_bar = 0 as a tensor of the stack's dtype, so the
    corrections and a run from such a state work. Before: the mean was np.zeros_like(x[0]), a numpy array, and
    correction(state, 0) (and run_sequential from a state holding it) raised numpy's "TypeError: unsupported operand
    type(s) for -: 'numpy.ndarray' and 'Tensor'" (SCAFFOLD's mean was a tensor already).

    By hand: c = (3, -1), c_bar = 0, so client 0 adds -3 and client 1 adds +1. One VRLSGD round with SGD, lr 0.1,
    p = (1/2, 1/2), tau = (1, 2), gradients x + 1 (client 0) and x - 1 (client 1) from x = 0: client 0 steps with
    1 - 3 = -2 to Delta_0 = 0.2; client 1's corrected gradient is 0 at every step, Delta_1 = 0; Delta = 0.1, so x = 0.1,
    c_0 = 3 - (0.2 - 0.1)/(0.1 * 1) = 2, c_1 = -1 - (0 - 0.1)/(0.1 * 2) = -0.5."""
    c = torch.tensor([[3.0], [-1.0]], dtype=torch.float64)
    state = V.control_variates(c, [0.5, 0.5], kind="vrlsgd")
    assert isinstance(state.mean, torch.Tensor) and state.mean.dtype == torch.float64
    assert torch.equal(state.mean, torch.zeros(1, dtype=torch.float64))
    corr = [V.correction(state, i) for i in range(2)]
    assert all(isinstance(x, torch.Tensor) for x in corr)
    assert [x.item() for x in corr] == [-3.0, 1.0]
    algo = make_algorithm("vrlsgd", sgd(lr=0.1))
    start = algo.init(torch.zeros(1, dtype=torch.float64), 2)._replace(variates=state)
    run = run_sequential(algo, None, lambda x, i, t, k: x + (1.0 if i == 0 else -1.0), [0.5, 0.5], FixedSteps([1, 2]),
                         1, initial_state=start)
    assert isinstance(run.state.params, torch.Tensor)
    np.testing.assert_allclose(run.state.params.numpy(), [0.1], rtol=1e-14)
    np.testing.assert_allclose(run.state.variates.client.numpy()[:, 0], [2.0, -0.5], rtol=1e-13)
    assert isinstance(run.state.variates.mean, torch.Tensor)


@pytest.mark.parametrize("name", ["scaffold", "vrlsgd", "fednova-vr"])
def test_a_float32_scalar_leaf_keeps_float32_variates_and_model(name):
    """A 0-d float32 leaf of a numpy model (a scalar bias) gets float32 control variates and stays float32, as the
    other leaves and FedAvg's model do. Before: init_control_variates stacked 0-d leaves as
    np.result_type(x, float64), float64 for a float32 scalar, and the float64 corrections turned that leaf of the
    model into float64 in round 0 without a word.

    By hand, one round from 0 with SGD, lr 0.1, p = (1/2, 1/2), tau = (1, 2), gradient x - i on client i and no
    correction yet: client 0 stays at 0, client 1 steps to 0.1 then 0.1 + 0.1 * 0.9 = 0.19, so the bias moves to
    FedAvg's 0.5 * 0.19 = 0.095 (SCAFFOLD, VRLSGD) or, with ||a_i||_1 = tau_i and tau_eff = 1.5, FedNova's
    1.5 * 0.5 * 0.19 / 2 = 0.07125 (FedNova-VR)."""
    algo = make_algorithm(name, sgd(0.1))
    x0 = {"w": np.zeros(2, np.float32), "b": np.zeros((), np.float32)}
    state = algo.init(x0, 2)
    assert state.variates.client["b"].dtype == np.float32 and state.variates.mean["b"].dtype == np.float32
    run = run_sequential(algo, x0, lambda x, i, t, k: {"w": x["w"] - np.float32(i), "b": x["b"] - np.float32(i)},
                         [0.5, 0.5], FixedSteps([1, 2]), 1)
    b = run.state.params["b"]
    assert b.dtype == np.float32 and run.state.params["w"].dtype == np.float32
    assert run.state.variates.client["b"].dtype == np.float32
    np.testing.assert_allclose(b, 0.07125 if name == "fednova-vr" else 0.095, rtol=1e-6)

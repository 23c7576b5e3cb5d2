"""Audit of the distributed round, the control variates and the server optimizers.

Two ranks are simulated in one process: each rank runs in its own thread and the
collectives meet at a barrier (no process group, no sockets)."""
import threading

import numpy as np
import pytest

from fedlib.algorithms import ClientUpdate, make_algorithm
from fedlib.distributed import LocalCommunicator, distributed_apply, owned_clients
from fedlib.sampling import full_participation, sample_clients
from fedlib.server import adam, momentum, plain
from fedlib.solvers import sgd
from thread_ranks import Hub, ThreadComm, on_ranks


# ---------------------------------------------------------------- two ranks = one process
@pytest.mark.parametrize("name", ["fedavg", "fednova", "scaffold", "vrlsgd", "fednova-vr"])
def test_two_ranks_equal_one_process_for_every_sampling_and_server(name):
    """Every sampling scheme (with-replacement: distinct sorted clients, weights counts/q) and
    server optimizer; uniform q = 2 of 5 leaves a rank without participants in some rounds."""
    m, p = 5, np.array([0.1, 0.15, 0.2, 0.25, 0.3])
    empty_rank_rounds = 0
    for server in (plain(0.5), momentum(0.9), adam(0.1)):
        for sampling, q in (("full", None), ("with-replacement", 4), ("uniform", 2)):
            algo = make_algorithm(name, sgd(0.1), server)
            rng = np.random.default_rng(0)
            one = algo.init(np.zeros(3), m)
            ranks = [one, one]
            for t in range(3):
                part = sample_clients(sampling, p, q, 3, t)
                ups = {int(c): ClientUpdate(int(c), rng.normal(size=3), float(rng.uniform(1, 5)),
                                            int(rng.integers(1, 6))) for c in part.clients}
                one, d1 = algo.apply(one, part, [ups[int(c)] for c in part.clients], 0.1, p)
                empty_rank_rounds += any(not set(owned_clients(m, 2, r).tolist()) & set(ups) for r in range(2))

                def step(comm, ranks=ranks, part=part, ups=ups):
                    own = set(owned_clients(m, 2, comm.rank).tolist())
                    return distributed_apply(comm, algo, ranks[comm.rank], part,
                                             [u for c, u in ups.items() if c in own], 0.1, p)

                res = on_ranks(2, step)
                ranks = [s for s, _ in res]
                for r, (s, d) in enumerate(res):
                    np.testing.assert_allclose(s.params, one.params, rtol=0, atol=1e-13)
                    assert abs(d.tau_eff - d1.tau_eff) <= 1e-13 and np.allclose(d.weights, d1.weights, rtol=0,
                                                                                  atol=1e-15)
                    if one.variates is not None:  # each rank holds its own clients' c_i
                        own = owned_clients(m, 2, r)
                        np.testing.assert_allclose(s.variates.client[own], one.variates.client[own], rtol=0,
                                                   atol=1e-13)
                        np.testing.assert_allclose(s.variates.mean, one.variates.mean, rtol=0, atol=1e-13)
    assert empty_rank_rounds > 0


# ---------------------------------------------------------------- findings
def test_distributed_apply_refuses_deltas_of_another_shape_like_apply():
    """Deltas of shape (3, 1) for a (3,) model: apply refuses them; distributed_apply broadcast
    x + change into a (3, 3) model without a word."""
    p = np.full(2, 0.5)
    algo = make_algorithm("fednova", sgd(0.1))
    state = algo.init(np.zeros(3), 2)
    ups = [ClientUpdate(i, np.ones((3, 1)), 1.0, 1) for i in range(2)]
    with pytest.raises(ValueError, match="structure and leaf shapes of state.params"):
        algo.apply(state, full_participation(p), ups, 0.1, p)
    with pytest.raises(ValueError, match=r"updates: client 0's delta must have the structure and leaf shapes"):
        distributed_apply(LocalCommunicator(), algo, state, full_participation(p), ups, 0.1, p)


def test_allreduce_sum_keeps_a_float32_array_float32():
    """A numpy float32 model came out of a 2-rank round as float64 (one process keeps float32)."""
    p = np.full(4, 0.25)
    algo = make_algorithm("fednova", sgd(0.1), momentum(0.9))
    state = algo.init(np.zeros(3, np.float32), 4)
    rng = np.random.default_rng(0)
    ups = [ClientUpdate(i, rng.normal(size=3).astype(np.float32), float(i + 1), i + 1) for i in range(4)]
    want, _ = algo.apply(state, full_participation(p), ups, 0.1, p)
    res = on_ranks(2, lambda c: distributed_apply(
        c, algo, state, full_participation(p), [u for u in ups if u.client in owned_clients(4, 2, c.rank)], 0.1, p))
    for s, _ in res:
        assert s.params.dtype == want.params.dtype == np.float32
        assert s.server.buffer.dtype == np.float32
        np.testing.assert_allclose(s.params, want.params, rtol=1e-6)
    assert LocalCommunicator().allreduce_sum(np.ones(2, np.float32)).dtype == np.float32


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
    """Cell(server_momentum=0.0) / Cell(momentum=0.0) became 0.9 (``or 0.9``)."""
    from fedlib.experiments.cifar10 import Cell

    cell = Cell("x", "momentum", "2", "FedNova", "fednova", "momentum", 0.02, momentum=0.0, server="momentum",
                server_momentum=0.0)
    algo = cell.make_algorithm()
    assert algo.solver.momentum == 0.0
    _, state = algo.server.update(np.array([1.0]), algo.server.init(np.zeros(1)), np.zeros(1), 0.1)
    _, state = algo.server.update(np.array([1.0]), state, np.zeros(1), 0.1)
    np.testing.assert_allclose(state.buffer, [-10.0])


def test_a_bad_update_on_one_rank_raises_on_every_rank():
    """Rank 0's check raised on rank 0 alone while rank 1 waited in the first collective (with gloo until
    the process group's 600 s timeout); the error now travels with that collective to every rank."""
    m = 4
    p = np.full(m, 0.25)
    algo = make_algorithm("fednova", sgd(0.1))
    state = algo.init(np.zeros(3), m)
    hub, errors = Hub(2), [None, None]
    hub.barrier = threading.Barrier(2, timeout=3)

    def target(r):
        comm = ThreadComm(hub, r)
        own = owned_clients(m, 2, r)
        shape = (3, 1) if r == 0 else (3,)  # rank 0 hands in changes of another shape
        ups = [ClientUpdate(int(c), np.ones(shape), 1.0, 1) for c in own]
        try:
            distributed_apply(comm, algo, state, full_participation(p), ups, 0.1, p)
        except BaseException as exc:  # noqa: BLE001 - inspected below
            errors[r] = exc

    threads = [threading.Thread(target=target, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(isinstance(e, ValueError) for e in errors), errors
    assert str(errors[0]) == str(errors[1]) and "client 0's delta must have the structure" in str(errors[1])


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

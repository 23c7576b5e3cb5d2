"""Fast paths equal the plain computations they replace, bit for bit.

Each optimisation of a hot CPU path keeps the simple form as its reference (written out here,
or the library's own unmemoised function) and is checked against it with
``np.array_equal`` — not a tolerance: the chapters' printed numbers must not move.
"""
from __future__ import annotations

import numpy as np
import pytest

from fedlib.problems.logistic import LogisticRegression, _grad


# ------------------------------------------------------------- logistic full-batch gradient


def _grad_reference(W, b, x, y, l2):
    """fedlib.problems.logistic._grad written plainly (the reference its fast form is tested against)."""
    n = y.shape[0]
    z = x @ W + b
    z -= z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(n), y] -= 1.0
    p /= n
    gW = x.T @ p
    if l2:
        gW += l2 * W
    return {"W": gW, "b": p.sum(axis=0)}


@pytest.fixture(params=["columns", "reduce", "as shipped"])
def column_max_from(request, monkeypatch):
    """_grad's two ways to the row maxima: column by column from every batch size, never, or
    from the library's own threshold."""
    import fedlib.problems.logistic as logistic

    value = {"columns": 1, "reduce": 10 ** 9, "as shipped": logistic._COLUMN_MAX_FROM}[request.param]
    monkeypatch.setattr(logistic, "_COLUMN_MAX_FROM", value)
    return value


@pytest.mark.usefixtures("column_max_from")
@pytest.mark.parametrize("classes", [2, 3, 10])
@pytest.mark.parametrize("l2", [0.0, 0.001])
def test_logistic_grad_equals_its_plain_form(classes, l2):
    rng = np.random.default_rng(classes)
    for n, scale in [(1, 1.0), (7, 0.1), (257, 3.0), (1000, 40.0)]:  # 40: logits in the hundreds
        x = rng.standard_normal((n, 6))
        y = rng.integers(0, classes, n)
        W, b = scale * rng.standard_normal((6, classes)), rng.standard_normal(classes)
        fast, plain = _grad(W, b, x, y, l2), _grad_reference(W, b, x, y, l2)
        assert fast.keys() == plain.keys()
        for k in plain:
            assert np.array_equal(fast[k], plain[k]), (n, k)


@pytest.mark.usefixtures("column_max_from")
@pytest.mark.parametrize("classes", [2, 10])
def test_logistic_mean_loss_equals_its_plain_form(classes):
    """The training loss every engine evaluates after every round (_mean_log_softmax_loss: bias in place, one
    buffer, row maxima column by column from _COLUMN_MAX_FROM rows) is the plain mean cross-entropy bit for bit."""
    from fedlib.problems.logistic import _log_softmax_loss, _mean_log_softmax_loss

    rng = np.random.default_rng(100 + classes)
    for n, scale in [(1, 1.0), (7, 0.1), (257, 3.0), (1000, 40.0)]:
        x, y = rng.standard_normal((n, 6)), rng.integers(0, classes, n)
        W, b = scale * rng.standard_normal((6, classes)), rng.standard_normal(classes)
        plain = float(_log_softmax_loss(x @ W + b, y).mean())
        assert _mean_log_softmax_loss(x, W, b, y) == plain, n


@pytest.mark.usefixtures("column_max_from")
def test_logistic_grad_equals_its_plain_form_with_ties_and_signed_zeros():
    # ties in the row maximum (max taken column by column: order must not matter) and -0.0 logits
    x = np.array([[1.0, 0.0], [0.0, 0.0], [-1.0, 1.0], [0.0, -0.0]])
    W = np.array([[1.0, 1.0, 0.0], [0.0, 0.0, -0.0]])
    b = np.array([0.0, -0.0, 1.0])
    y = np.array([0, 1, 2, 1])
    fast, plain = _grad(W, b, x, y, 0.0), _grad_reference(W, b, x, y, 0.0)
    for k in plain:
        assert np.array_equal(fast[k], plain[k]) and not np.any(np.isnan(fast[k]))


@pytest.mark.usefixtures("column_max_from")
def test_logistic_grad_keeps_nan_as_the_plain_form_does():
    W = np.array([[np.nan, 0.0], [1.0, 2.0]])
    x, y, b = np.ones((3, 2)), np.array([0, 1, 1]), np.zeros(2)
    fast, plain = _grad(W, b, x, y, 0.0), _grad_reference(W, b, x, y, 0.0)
    for k in plain:
        assert np.array_equal(fast[k], plain[k], equal_nan=True)


@pytest.mark.usefixtures("column_max_from")
def test_model_grad_uses_the_fast_form_on_synthetic_clients():
    from fedlib.experiments.synthetic import make_problem

    problem = make_problem()
    model = problem.model
    assert isinstance(model, LogisticRegression)
    rng = np.random.default_rng(0)
    params = {"W": 0.3 * rng.standard_normal((model.num_features, model.num_classes)),
              "b": rng.standard_normal(model.num_classes)}
    for x, y in zip(problem.dataset.train_x[:8], problem.dataset.train_y[:8]):
        got = model.grad(params, x, y)
        want = _grad_reference(params["W"], params["b"], np.asarray(x, dtype=np.float64), np.asarray(y, np.int64),
                               model.l2)
        for k in want:
            assert np.array_equal(got[k], want[k])


# ------------------------------------------------------------- memoised local operators K_i
def test_memoised_local_operator_is_the_computed_one():
    from fedlib import theory
    from fedlib.problems import random_quadratic

    H = random_quadratic(3, 5, seed=1).H
    theory._LOCAL_OPERATOR_MEMO.clear()
    for i in range(3):
        for tau in (1, 2, 7):
            for lr, mu, rho in [(0.1, 0.0, 0.0), (0.05, 0.5, 0.0), (0.02, 0.0, 0.9), (0.02, 1.0, 0.5)]:
                want = theory.quadratic_local_operator(H[i], tau, lr, mu, rho)
                first = theory._local_operator(H[i], tau, lr, mu, rho)
                again = theory._local_operator(H[i].copy(), np.int64(tau), np.float64(lr), mu, rho)
                assert again is first and np.array_equal(first, want) and not first.flags.writeable
    with pytest.raises(ValueError):
        first[0, 0] = 1.0  # read-only: a caller cannot change what the next one gets
    # another H_i with the same shape is another key
    other = H[0] + 1e-12 * np.eye(5)
    assert not np.array_equal(theory._local_operator(other, 2, 0.1), theory._local_operator(H[0], 2, 0.1))


def test_memo_is_cleared_when_full_and_never_changes_a_result(monkeypatch):
    from fedlib import theory
    from fedlib.problems import random_quadratic

    H = random_quadratic(2, 4, seed=2).H
    # room for three entries: each holds its K_i and, in its key, a copy of H_i's bytes
    monkeypatch.setattr(theory, "_LOCAL_OPERATOR_MEMO_LIMIT", 3 * 2 * H[0].nbytes)
    theory._LOCAL_OPERATOR_MEMO.clear()
    monkeypatch.setattr(theory, "_local_operator_memo_bytes", 0)
    for tau in range(1, 10):
        assert np.array_equal(theory._local_operator(H[1], tau, 0.1, 0.0, 0.3),
                              theory.quadratic_local_operator(H[1], tau, 0.1, 0.0, 0.3))
        assert len(theory._LOCAL_OPERATOR_MEMO) <= 3
        assert theory._local_operator_memo_bytes == sum(K.nbytes + len(key[1])
                                                        for key, K in theory._LOCAL_OPERATOR_MEMO.items())


def _plain_round_map(H, e, p, steps, lr, algorithm, mu=0.0, momentum=0.0):
    """quadratic_round_map with a fresh quadratic_local_operator per client (the code before the memo)."""
    from fedlib import theory

    a_norms = theory._local_a_norms(np.asarray(steps), lr, mu, momentum)
    if algorithm == "fednova":
        te, w = theory.fednova_weights(p, a_norms, None, np.asarray(steps))
        coef = te * w / a_norms
    else:
        coef = p
    M, b = np.eye(H.shape[1]), np.zeros(H.shape[1])
    for i in range(H.shape[0]):
        K = theory.quadratic_local_operator(H[i], int(steps[i]), lr, mu, momentum)
        M -= coef[i] * K @ H[i]
        b += coef[i] * K @ e[i]
    return M, b


@pytest.mark.parametrize("algorithm,mu,momentum", [("fedavg", 0.0, 0.0), ("fednova", 0.0, 0.9), ("fedprox", 0.5, 0.0)])
def test_round_maps_with_the_memo_equal_the_plain_ones(algorithm, mu, momentum):
    from fedlib import theory
    from fedlib.problems import random_quadratic

    prob = random_quadratic(5, 6, seed=3)
    rng = np.random.default_rng(0)
    for _ in range(4):  # repeated step counts: hits and misses
        steps = rng.integers(1, 4, size=5)
        got = theory.quadratic_round_map(prob.H, prob.e, prob.p, steps, 0.05, algorithm, mu=mu, momentum=momentum)
        want = _plain_round_map(prob.H, prob.e, prob.p, steps, 0.05, algorithm, mu, momentum)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_vr_round_map_with_the_memo_equals_a_fresh_computation(monkeypatch):
    from fedlib import theory
    from fedlib.problems import random_quadratic

    prob = random_quadratic(4, 5, seed=4)
    steps = np.array([1, 3, 3, 8])
    for algorithm in ("scaffold", "fednova-vr", "vrlsgd"):
        theory._LOCAL_OPERATOR_MEMO.clear()
        warm = [theory.quadratic_vr_round_map(prob.H, prob.e, prob.p, steps, 0.03, algorithm, momentum=0.5)
                for _ in range(2)]
        with monkeypatch.context() as mp:  # no memo at all: every K_i computed afresh
            mp.setattr(theory, "_local_operator", theory.quadratic_local_operator)
            cold = theory.quadratic_vr_round_map(prob.H, prob.e, prob.p, steps, 0.03, algorithm, momentum=0.5)
        for got in warm:
            assert np.array_equal(got[0], cold[0]) and np.array_equal(got[1], cold[1])


# ------------------------------------------------------------- remembered random local steps
def test_random_steps_memo_gives_the_draws_of_fresh_streams():
    from fedlib.rng import generator
    from fedlib.schedules import RandomSteps, _random_steps

    _random_steps.cache_clear()
    sched = RandomSteps(6, 2, 9, seed=5)
    for t in [0, 3, 3, 0, 1000, 3]:
        want = np.array([generator(5, "local_steps", t, i).integers(2, 10) for i in range(6)], dtype=np.int64)
        got = sched.local_steps(t)
        assert got.dtype == np.int64 and np.array_equal(got, want)
        got[0] = -1  # the caller's own array: the memo is untouched
    assert np.array_equal(sched.local_steps(3)[:1], [generator(5, "local_steps", 3, 0).integers(2, 10)])
    assert not np.array_equal(RandomSteps(6, 2, 9, seed=6).local_steps(0), sched.local_steps(0))
    with pytest.raises(ValueError):
        sched.local_steps(-1)


# ------------------------------------------------------------- LocalSolver.update on a bare array
def _solvers():
    from fedlib.solvers import LocalSolver

    return [LocalSolver(0.1), LocalSolver(0.05, momentum=0.9), LocalSolver(0.02, mu=3.0),
            LocalSolver(0.03, momentum=0.5, mu=1.0, weight_decay=1e-3),
            LocalSolver(0.04, momentum=0.7, lr_schedule=lambda k: 1.0 / (k + 1))]


@pytest.mark.parametrize("with_correction", [False, True])
def test_solver_steps_on_a_bare_array_equal_the_tree_path(with_correction):
    # the same vector as the only leaf of a list goes through tree_map (the general path)
    rng = np.random.default_rng(7)
    H, e = rng.standard_normal((6, 6)), rng.standard_normal(6)
    x0 = rng.standard_normal(6)
    corr = rng.standard_normal(6) if with_correction else None
    for solver in _solvers():
        bare = solver.init(x0.copy(), corr)
        tree = solver.init([x0.copy()], None if corr is None else [corr])
        for _ in range(9):
            bare = solver.update(bare, H @ bare.params - e)
            tree = solver.update(tree, [H @ tree.params[0] - e])
            assert np.array_equal(bare.params, tree.params[0])
            assert (bare.momentum is None) == (tree.momentum is None)
            if bare.momentum is not None:
                assert np.array_equal(bare.momentum, tree.momentum[0])
            assert (bare.step, bare.shadow, bare.a_norm) == (tree.step, tree.shadow, tree.a_norm)
            assert (bare.anchor is None) == (tree.anchor is None) and (bare.correction is None) == (tree.correction is None)


def test_solver_update_on_a_bare_array_refuses_a_gradient_of_another_shape():
    from fedlib.solvers import LocalSolver

    state = LocalSolver(0.1).init(np.zeros(3))
    with pytest.raises(ValueError, match=r"grads: a leaf has shape \(3, 1\) but the parameter has \(3,\)"):
        LocalSolver(0.1).update(state, np.zeros((3, 1)))
    with pytest.raises(ValueError, match="grads: a leaf is a torch tensor|must have the structure"):
        LocalSolver(0.1).update(state, [np.zeros(3)])


def test_quadratic_runs_are_the_same_through_the_tree_path():
    # a whole run_sequential of FedNova with momentum: bare arrays vs the same vector as a one-leaf list
    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.problems import random_quadratic
    from fedlib.schedules import RandomSteps
    from fedlib.solvers import momentum_sgd

    prob = random_quadratic(5, 4, seed=0)
    for name in ("fednova", "scaffold"):
        algo = make_algorithm(name, momentum_sgd(0.02, 0.9))
        sched = RandomSteps(5, 1, 6, seed=1)
        bare = run_sequential(algo, np.zeros(4), prob.grad_fn(), prob.p, sched, 30)
        tree = run_sequential(algo, [np.zeros(4)], lambda x, i, t, k: [prob.grad(x[0], i)], prob.p, sched, 30)
        assert np.array_equal(bare.state.params, tree.state.params[0])


# ------------------------------------------------------------- QuadraticProblem.grad's quick checks
def test_quadratic_grad_quick_checks_keep_values_and_errors():
    from fedlib.problems import random_quadratic

    prob = random_quadratic(4, 3, seed=0)
    x = np.array([0.3, -1.0, 2.0])
    for client in (0, 3, np.int64(2), np.int32(1)):
        want = prob.H[int(client)] @ x - prob.e[int(client)]
        assert np.array_equal(prob.grad(x, client), want)
        assert np.array_equal(prob.grad(list(x), client), want)  # a list still goes through np.asarray
    for bad in (-1, 4, True, 1.0, "0", None):
        with pytest.raises(ValueError, match=r"client must be an integer in \[0, 4\)"):
            prob.grad(x, bad)
    for bad_x in (np.zeros(4), np.zeros((3, 1)), [1.0, 2.0]):
        with pytest.raises(ValueError, match="x must be a vector of the problem's dimension 3"):
            prob.grad(bad_x, 0)


def test_random_local_work_memo_gives_the_draws_of_a_fresh_stream():
    from fedlib.rng import generator
    from fedlib.schedules import RandomLocalWork, _random_local_work

    _random_local_work.cache_clear()
    work = RandomLocalWork([1, 2, 5], [3, 2, 9], num_solvers=3, seed=4)
    for t in [0, 7, 7, 0, 123]:
        g = generator(4, "local_work", t)
        lo = np.array([1, 2, 5])
        want_steps = lo + g.integers(0, np.array([3, 2, 9]) - lo + 1)
        want_numbers = g.integers(0, 3, size=3)
        steps, numbers = work.draw(t)
        assert steps.dtype == numbers.dtype == np.int64
        assert np.array_equal(steps, want_steps) and np.array_equal(numbers, want_numbers)
        assert np.array_equal(work.local_steps(t), want_steps) and np.array_equal(work.solver_numbers(t), want_numbers)
        steps[:] = -1  # the caller's own arrays: the memo is untouched
        numbers[:] = -1
    assert np.array_equal(work.draw(7)[0], RandomLocalWork([1, 2, 5], [3, 2, 9], num_solvers=3, seed=4).draw(7)[0])
    assert work.draw(7)[0].min() >= 1
    with pytest.raises(ValueError):
        work.draw(-1)


def test_random_epochs_memo_gives_the_draws_of_fresh_streams():
    from fedlib.rng import generator
    from fedlib.schedules import RandomEpochs, _random_steps, steps_per_epoch

    _random_steps.cache_clear()
    sizes = [30, 41, 100, 7]
    sched = RandomEpochs(sizes, 10, 2, 5, seed=3)
    for t in [0, 9, 9, 0, 77]:
        want = np.array([generator(3, "local_steps", t, i).integers(2, 6) for i in range(4)], dtype=np.int64)
        epochs = sched.epochs_of(t)
        assert epochs.dtype == np.int64 and np.array_equal(epochs, want)
        assert np.array_equal(sched.local_steps(t), want * steps_per_epoch(np.array(sizes), 10))
        epochs[:] = 0  # the caller's copy
    assert sched.epochs_of(9).min() >= 2


# ------------------------------------------------------------- batched engine: single-client SGD steps, one-hot labels
def _one_client_batches(rng, K, B, D, C, scale):
    X = rng.standard_normal((K, B, D))
    X[..., -1] = 1.0  # the bias column
    counts = rng.integers(1, B + 1, K)
    w = (np.arange(B)[None, :] < counts[:, None]) / counts[:, None]  # 1/count, 0 on padding
    Yw = np.eye(C)[rng.integers(0, C, (K, B))] * w[..., None]
    return scale * X, Yw, w


@pytest.mark.parametrize("C", [2, 10])
@pytest.mark.parametrize("l2", [0.0, 0.001])
@pytest.mark.parametrize("start", ["zero", "random", "nan"])
def test_packed_sgd_steps_one_are_the_kernel_step_by_step(C, l2, start):
    """fedlib.problems.logistic._packed_sgd_steps_numpy_one (the batched engine's single-client SGD loop: argmax for
    the batch maximum, the softmax scale copied over Z's shape, 0-d step sizes) gives, step after step, the bits of
    _packed_grad_numpy_one then ``G *= lr``, ``theta -= G`` with float step sizes: parameters, row sums and the last
    ``lr * grad``. ``zero``: every logit 0 (maximum 0) in the first step; ``nan``: a NaN weight."""
    from fedlib.problems.logistic import _ones, _packed_grad_numpy_one, _packed_sgd_steps_numpy_one

    rng = np.random.default_rng(C + int(1000 * l2))
    K, B, D = 40, 7, 5
    for scale in (0.3, 5.0):
        X, Yw, w = _one_client_batches(rng, K, B, D, C, scale)
        theta0 = {"zero": np.zeros((D, C)), "random": rng.standard_normal((D, C)), "nan": rng.standard_normal((D, C))}
        theta0 = theta0[start]
        if start == "nan":
            theta0[1, 2 % C] = np.nan
        lrs = [0.05 * 0.97 ** k for k in range(K)]
        _ones(C)
        want, want_sums, G = theta0.copy(), np.empty((K, B)), np.empty((D, C))
        Z, s = np.empty((B, C)), np.empty(B)
        with np.errstate(all="ignore"):
            for k in range(K):
                _packed_grad_numpy_one(want, X[k], X[k].T, Yw[k], w[k], Z, G, s, s[:, None], np.empty(()), l2,
                                       want_sums[k])
                G *= lrs[k]
                want -= G
            got, got_sums, G2 = theta0.copy(), np.empty((K, B)), np.empty((D, C))
            s2 = np.empty(B)
            lr0 = [np.array(lr) for lr in lrs]
            _packed_sgd_steps_numpy_one(got, X, Yw, w, lr0, np.empty((B, C)), G2, s2, s2[:, None], l2, got_sums,
                                        np.empty((B, C)))
        for a, b in ((got, want), (got_sums, want_sums), (G2, G)):
            assert a.tobytes() == b.tobytes() or (start == "nan" and np.array_equal(a, b, equal_nan=True))
        if start == "nan":
            assert np.isnan(got).all()


@pytest.mark.parametrize("l2", [0.0, 0.5])
def test_packed_grad_one_scratch_gives_the_broadcast_bits(l2):
    """_packed_grad_numpy_one with the (B, C) scratch S (the scale copied over Z's shape, then a plain multiply) and
    without it (a broadcasting multiply): the same gradient, bit for bit, with and without the row sums kept."""
    from fedlib.problems.logistic import _ones, _packed_grad_numpy_one

    rng = np.random.default_rng(5)
    B, D, C = 9, 4, 3
    X, Yw, w = _one_client_batches(rng, 1, B, D, C, 2.0)
    theta = rng.standard_normal((D, C))
    _ones(C)
    for sums in (None, np.empty(B)):
        out = []
        for S in (None, np.empty((B, C))):
            G, s = np.empty((D, C)), np.empty(B)
            _packed_grad_numpy_one(theta, X[0], X[0].T, Yw[0], w[0], np.empty((B, C)), G, s, s[:, None],
                                   np.empty(()), l2, sums, S)
            out.append(G)
        assert out[0].tobytes() == out[1].tobytes()


@pytest.mark.parametrize("solver", ["sgd", "momentum_prox"])
@pytest.mark.parametrize("gather_bytes", [None, 1])
def test_local_phase_labels_give_the_one_hot_bits(solver, gather_bytes, monkeypatch):
    """The batched engine's local phase with the labels (numpy: one-hot times weight written per window, +0.0 off
    the label) and with the one-hot rows gathered and multiplied (the torch backend's way, and the engine's before):
    the same final parameters and ||a_i||_1, bit for bit, with padded batches (B does not divide n_i), an L2 penalty,
    and windows of every size."""
    from fedlib.data import synthetic
    from fedlib.engines import batched
    from fedlib.problems.logistic import LogisticProblem, _one_hot, pack_params
    from fedlib.solvers import momentum_proximal_sgd, sgd

    if gather_bytes is not None:
        monkeypatch.setattr(batched, "GATHER_BYTES", gather_bytes)
    prob = LogisticProblem(synthetic(num_clients=5, seed=2, num_samples=[30, 45, 61, 17, 80]), l2=0.001)
    be = batched._make_backend("numpy", None)
    C, D, B = prob.model.num_classes, prob.model.num_features + 1, 8
    Xall = np.concatenate([prob.train_x, np.ones((prob.train_x.shape[0], 1))], axis=1)
    Yall = _one_hot(prob.train_y, C)
    rng = np.random.default_rng(1)
    theta0 = pack_params({"W": 0.1 * rng.standard_normal((D - 1, C)), "b": rng.standard_normal(C)})
    solv = sgd(0.05) if solver == "sgd" else momentum_proximal_sgd(0.02, 0.8, 0.3, weight_decay=1e-3)
    clients = np.array([4, 2, 1, 0, 3])
    tau = np.array([20, 14, 9, 3, 3])
    for t in range(3):
        args = (be, solv, theta0, None, clients, tau, prob.num_samples, prob.offsets, Xall)
        tail = (B, D, C, prob.l2, 7, t, True)
        want, a_want = batched._local_phase(*args, Yall, *tail, {})
        got, a_got = batched._local_phase(*args, None, *tail, {}, prob.train_y.astype(np.int64))
        assert got.tobytes() == want.tobytes() and a_got.tobytes() == a_want.tobytes()
        theta0 = got[0]

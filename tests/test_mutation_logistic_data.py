"""Tests added from mutation testing of fedlib.problems.logistic, fedlib.data.synthetic and
fedlib.data.partition.

Every expected value is computed independently of the code under test: by hand, by
finite differences, from the written-out formulas of the module docstrings (softmax
cross-entropy, the FedProx Synthetic(alpha, beta) generator, the Dirichlet split
algorithm with scripted random draws).

Mutants of pack_params / unpack_params (fedlib/problems/logistic.py), of the 37-mutant input-check run (described
in tests/README.md, Mutation passes):
  killed here: L1, L4 (the tests' docstrings say which change).

Mutants of 8bd9827.., ``fedlib.data.synthetic`` (class scores that overflow) (pass described in tests/README.md,
Mutation passes).

Mutants of efe3bcd..52ae29d, fedlib/data/partition.py (pass described in tests/README.md, Mutation passes):
  P1 dirichlet_partition_generator default seed 1.
  killed by the suite.

Mutants of 37f92d9..28127ce (third, the changed hunks of fedlib/problems/logistic.py and fedlib/data/*.py)
(pass described in tests/README.md, Mutation passes):
  LG1 / LG2 a complex tensor / array let through _real_array; LG3 pack_params with a numpy b beside a tensor W;
  LG4 unpack_params of a list; LG5 _mean_log_softmax_loss subtracts half the true logit; LG6 divides by n - 1;
  LG7 the column maxima skip the last column; LG8 no max subtracted; LG9 a bool label let through; LG10 / LG11
  mask / params by np.asarray again. DP1 partition's NaN draws not counted; DS1 synthetic ``>= 2**63`` -> ``>``;
  DS2 iid by bool(); DC1 a 0-d train_x; DC2 data that requires grad; DL1 load_leaf of a device; DL2 save_leaf's
  drop_test unchecked; DL3 client_order by ``in``; DK1 load_cifar10's download unchecked. all killed by the suite.

Mutants of 2e0d04d..fb2fbe6 (fedlib/problems/logistic.py: pack_params refuses a torch b beside a numpy W) (pass
described in tests/README.md, Mutation passes): K1 the check dropped; K3 only a b that requires grad refused (K2:
tests/test_mutation_batched_reference.py). killed by the suite: both.

Mutants of the 8996bdf pass: 61c3eb9, 37d4fb6, 8996bdf, dc4cc69, f432e05 (fedlib/data/partition.py, dc4cc69 and f432e05:
_dirichlet_split's NaN note and errstate) (pass described in tests/README.md, Mutation passes):
  DP1 ``nan_draws == max_attempts`` -> ``nan_draws`` (the old test); DP2 ``>=``; DP3 ``== max_attempts - 1``; DP4 the
  note never; DP5 the note always (also '0 of the 20 attempts'); DP6 errstate(over=) for invalid=; DP7 every
  degenerate attempt counted as NaN; DP8 the note's total _attempt; DP9 the note's why dropped.
  killed by the suite: DP1, DP3, DP4, DP6, DP7, DP8. killed here: DP5, DP9.
  equivalent: DP2 (an attempt ends at its first degenerate class, so nan_draws counts at most one per attempt and
  never exceeds max_attempts).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from fedlib.data.clients import FederatedDataset
from fedlib.data.partition import (
    _dirichlet_split,
    class_counts,
    dirichlet_partition,
    dirichlet_partition_generator,
    iid_partition,
)
from fedlib.data.synthetic import synthetic, synthetic_covariance_diagonal
from fedlib.problems import logistic as lg
from fedlib.problems.logistic import LogisticProblem, LogisticRegression, pack_params, packed_grad_
from fedlib.rng import generator


# --------------------------------------------------------------------------- helpers
def _softmax(z):
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max(axis=-1, keepdims=True))  # row-wise shift: the textbook stable form
    return e / e.sum(axis=-1, keepdims=True)


def _ref_loss(W, b, x, y, l2=0.0):
    """Mean over samples of log(sum_c exp z_c) - z_y, plus l2/2 ||W||^2 (module docstring)."""
    z = x @ W + b
    m = z.max(axis=1)
    lse = m + np.log(np.exp(z - m[:, None]).sum(axis=1))
    return float(np.mean(lse - z[np.arange(len(y)), y]) + 0.5 * l2 * np.sum(W * W))


def _ref_grad(W, b, x, y, l2=0.0):
    """nabla_W = X^T (P - Y)/n + l2 W, nabla_b = 1^T (P - Y)/n (module docstring)."""
    n, C = len(y), W.shape[1]
    R = (_softmax(x @ W + b) - np.eye(C)[y]) / n
    return x.T @ R + l2 * W, R.sum(axis=0)


def _fd_hessian(W, b, x, y, l2, eps=1e-5):
    """Dense Hessian in packed order (Theta = [W; b], index j*C + c) by central differences
    of the reference gradient."""
    theta = np.concatenate([W, b[None]], axis=0)
    D, C = theta.shape
    P = D * C
    H = np.zeros((P, P))

    def g(t):
        gW, gb = _ref_grad(t[:-1], t[-1], x, y, l2)
        return np.concatenate([gW, gb[None]], axis=0).ravel()

    for i in range(P):
        up, dn = theta.copy().ravel(), theta.copy().ravel()
        up[i] += eps
        dn[i] -= eps
        H[:, i] = (g(up.reshape(D, C)) - g(dn.reshape(D, C))) / (2 * eps)
    return H


# --------------------------------------------------------------------------- logistic
def test_loss_hand_worked_example_with_penalty():
    # d = 1, C = 2, W = [[1, -1]], b = 0, x = [[1]], y = [0]: z = (1, -1),
    # loss = log(e + 1/e) - 1 = log(1 + e^-2); penalty l2/2 * (1 + 1) = l2.
    model = LogisticRegression(1, 2, l2=0.25)
    params = {"W": np.array([[1.0, -1.0]]), "b": np.zeros(2)}
    expected = math.log(1 + math.exp(-2)) + 0.25
    assert model.loss(params, np.array([[1.0]]), np.array([0])) == pytest.approx(expected, rel=1e-14)
    # the gradient: p = (1/(1+e^-2), e^-2/(1+e^-2)), p - y = (p0 - 1, p1) = (-p1, p1)
    p1 = math.exp(-2) / (1 + math.exp(-2))
    g = model.grad(params, np.array([[1.0]]), np.array([0]))
    np.testing.assert_allclose(g["W"], [[-p1 + 0.25, p1 - 0.25]], rtol=1e-14)
    np.testing.assert_allclose(g["b"], [-p1, p1], rtol=1e-14)
    loss, g2 = model.loss_and_grad(params, np.array([[1.0]]), np.array([0]))
    assert loss == pytest.approx(expected, rel=1e-14)
    np.testing.assert_allclose(g2["W"], g["W"])


@pytest.mark.parametrize("l2", [0.0, 0.2])
def test_hessian_matches_finite_differences_of_gradient(l2):
    rng = np.random.default_rng(11)
    d, C, n = 3, 3, 6
    W, b = rng.standard_normal((d, C)), rng.standard_normal(C)
    x, y = rng.standard_normal((n, d)), rng.integers(0, C, n)
    H = LogisticRegression(d, C, l2).hessian({"W": W, "b": b}, x, y)
    assert H.shape == ((d + 1) * C, (d + 1) * C)
    np.testing.assert_allclose(H, _fd_hessian(W, b, x, y, l2), atol=1e-7)
    np.testing.assert_array_equal(H, H.T)


def test_hessian_with_huge_logits_is_finite_and_correct():
    # logits ~ 1000: exp overflows without the max shift; the softmax rows are then
    # (almost) one-hot, so the exact Hessian is computed from the stable softmax.
    d, C = 2, 3
    W = np.array([[1000.0, 999.0, 990.0], [0.0, 1.0, 2.0]])
    b = np.zeros(C)
    x = np.array([[1.0, 0.5], [1.0, -0.5]])
    y = np.array([0, 1])
    H = LogisticRegression(d, C).hessian({"W": W, "b": b}, x, y)
    xa = np.concatenate([x, np.ones((2, 1))], axis=1)
    P = _softmax(x @ W + b)
    ref = sum(np.kron(np.outer(xa[s], xa[s]), np.diag(P[s]) - np.outer(P[s], P[s])) for s in range(2)) / 2
    assert np.all(np.isfinite(H))
    np.testing.assert_allclose(H, ref, atol=1e-12)


def test_hessian_and_grad_reject_empty_batch():
    model = LogisticRegression(2, 2)
    with pytest.raises(ValueError, match="empty"):
        model.hessian(model.init_params(), np.zeros((0, 2)), np.zeros(0, dtype=np.int64))
    with pytest.raises(ValueError, match="empty"):
        model.grad(model.init_params(), np.zeros((0, 2)), np.zeros(0, dtype=np.int64))
    with pytest.raises(ValueError, match="no samples"):
        model.loss(model.init_params(), np.zeros((0, 2)), np.zeros(0, dtype=np.int64))


def test_batch_validation():
    model = LogisticRegression(2, 3)
    p = model.init_params()
    x = np.zeros((2, 2))
    with pytest.raises(ValueError, match="y must be integer"):
        model.loss(p, x, np.array([0.0, 1.0]))           # float labels
    with pytest.raises(ValueError, match="^y has 3 labels but x has 2 rows$"):
        model.loss(p, x, np.array([0, 1, 2]))            # wrong length
    with pytest.raises(ValueError, match="labels must lie"):
        model.loss(p, x, np.array([-1, 0]))
    with pytest.raises(ValueError, match="labels must lie"):
        model.loss(p, x, np.array([0, 3]))
    assert model.loss(p, x, np.array([0, 2])) == pytest.approx(math.log(3))  # top label valid
    with pytest.raises(ValueError, match="x must have shape"):
        model.loss(p, np.zeros((2, 3)), np.array([0, 1]))
    with pytest.raises(ValueError, match="x must have shape"):
        model.loss(p, np.zeros(2), np.array([0, 1]))
    with pytest.raises(ValueError, match="params"):
        model.loss({"W": np.zeros((2, 3))}, x, np.array([0, 1]))
    with pytest.raises(ValueError, match="params"):
        model.loss([np.zeros((2, 3)), np.zeros(3)], x, np.array([0, 1]))
    with pytest.raises(ValueError, match="params"):
        model.loss({"W": np.zeros((2, 3)), "b": np.zeros(2)}, x, np.array([0, 1]))
    with pytest.raises(ValueError, match="num_classes"):
        LogisticRegression(2, 1)
    with pytest.raises(ValueError, match="num_features"):
        LogisticRegression(0, 2)
    assert repr(LogisticRegression(4, 3, 0.5)) == "LogisticRegression(num_features=4, num_classes=3, l2=0.5)"


def test_logits_and_accuracy_by_hand():
    model = LogisticRegression(2, 2)
    params = {"W": np.array([[1.0, 0.0], [0.0, 1.0]]), "b": np.array([0.0, 0.5])}
    x = np.array([[2.0, 0.0], [0.0, 0.0], [1.0, 1.0]])
    # z = (2, 0.5), (0, 0.5), (1, 1.5): predictions 0, 1, 1
    np.testing.assert_array_equal(model.logits(params, x), [[2.0, 0.5], [0.0, 0.5], [1.0, 1.5]])
    assert model.accuracy(params, x, np.array([0, 1, 0])) == pytest.approx(2 / 3)
    assert math.isnan(model.accuracy(params, np.zeros((0, 2)), np.zeros(0, dtype=np.int64)))


@pytest.mark.parametrize("l2", [0.0, 0.3])
def test_stacked_with_mask_matches_reference(l2):
    rng = np.random.default_rng(3)
    q, B, d, C = 3, 4, 2, 3
    W, b = rng.standard_normal((q, d, C)), rng.standard_normal((q, C))
    x, y = rng.standard_normal((q, B, d)), rng.integers(0, C, (q, B))
    mask = np.array([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]], dtype=float)
    loss, g = LogisticRegression(d, C, l2).loss_and_grad_stacked({"W": W, "b": b}, x, y, mask)
    for j in range(q):
        r = mask[j] > 0
        assert loss[j] == pytest.approx(_ref_loss(W[j], b[j], x[j][r], y[j][r], l2), rel=1e-12)
        gW, gb = _ref_grad(W[j], b[j], x[j][r], y[j][r], l2)
        np.testing.assert_allclose(g["W"][j], gW, atol=1e-13)
        np.testing.assert_allclose(g["b"][j], gb, atol=1e-13)
    with pytest.raises(ValueError, match="client 1 has an empty batch"):
        LogisticRegression(d, C).loss_and_grad_stacked({"W": W, "b": b}, x, y, mask * [[1], [0], [1]])
    with pytest.raises(ValueError, match="mask must have shape"):
        LogisticRegression(d, C).loss_and_grad_stacked({"W": W, "b": b}, x, y, np.ones((q, B + 1)))
    with pytest.raises(ValueError, match="mask must have shape"):
        LogisticRegression(d, C).loss_and_grad_stacked({"W": W, "b": b}, x, y, np.ones((q, 1)))


def _packed_inputs(rng, q, B, d, C, scale=1.0):
    theta = scale * rng.standard_normal((q, d + 1, C))
    x = rng.standard_normal((q, B, d))
    y = rng.integers(0, C, (q, B))
    xa = np.concatenate([x, np.ones((q, B, 1))], axis=-1)
    w = np.full((q, B, 1), 1.0 / B)
    return theta, x, y, xa, w


def _ref_packed(theta, x, y, l2):
    gW, gb = _ref_grad(theta[:-1], theta[-1], x, y, l2)
    return np.concatenate([gW, gb[None]], axis=0)


@pytest.mark.parametrize("l2", [0.0, 0.7])
def test_packed_grad_numpy_and_torch_match_formula(l2):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    q, B, d, C = 2, 5, 3, 4
    theta, x, y, xa, w = _packed_inputs(rng, q, B, d, C)
    Yw = np.eye(C)[y] * w
    ref = np.stack([_ref_packed(theta[j], x[j], y[j], l2) for j in range(q)])
    G = np.empty_like(theta)
    packed_grad_(theta, xa, Yw, w, np.empty((q, B, C)), G, l2)
    np.testing.assert_allclose(G, ref, atol=1e-13)
    T = [torch.tensor(a) for a in (theta, xa, Yw, w)]
    Gt = torch.empty_like(T[0])
    packed_grad_(T[0], T[1], T[2], T[3], torch.empty((q, B, C), dtype=torch.float64), Gt, l2)
    np.testing.assert_allclose(Gt.numpy(), ref, atol=1e-13)
    # pack_params on torch tensors: [W; b]
    Wt, bt = torch.tensor(theta[0, :-1]), torch.tensor(theta[0, -1])
    np.testing.assert_array_equal(pack_params({"W": Wt, "b": bt}).numpy(), theta[0])


@pytest.mark.parametrize("l2", [0.0, 0.7])
@pytest.mark.parametrize("huge", [False, True])
@pytest.mark.parametrize("with_sums", [False, True])
def test_packed_grad_single_client_kernel(l2, huge, with_sums):
    """The 2-d kernel of the batched engine against the formula; ``huge`` makes one row's
    logits lie > 800 below the batch maximum, so its shifted row sum underflows."""
    rng = np.random.default_rng(6)
    B, d, C = 4, 2, 3
    theta, x, y, xa, w = _packed_inputs(rng, 1, B, d, C)
    theta, x, y, xa, w = theta[0], x[0], y[0], xa[0], w[0, :, 0]
    if huge:
        theta[0] = [900.0, 850.0, 800.0]
        x[:, 0] = [1.0, -1.0, 0.2, 0.0]
        xa[:, 0] = x[:, 0]
    ref = _ref_packed(theta, x, y, l2)
    lg._ones(C)
    Z, G, s = np.empty((B, C)), np.empty((d + 1, C)), np.empty(B)
    sums = np.empty(B) if with_sums else None
    with np.errstate(all="ignore"):  # an underflowed row sum divides by zero (caller redoes it)
        lg._packed_grad_numpy_one(theta, xa, xa.T, np.eye(C)[y] * w[:, None], w, Z, G, s, s[:, None],
                                  np.empty(()), l2, sums)
    if with_sums:
        shifted = xa @ theta - (xa @ theta).max()
        np.testing.assert_allclose(sums, np.exp(shifted).sum(axis=1), rtol=1e-12)
        if huge:  # the caller must redo this step: the row sum underflowed
            assert sums.min() < lg._UNDERFLOW
            return
    assert np.all(np.isfinite(G))
    np.testing.assert_allclose(G, ref, atol=1e-12)


def test_packed_grad_numpy_underflow_fallback_without_client_axis():
    B, C = 2, 3
    theta = np.array([[900.0, 850.0, 800.0], [0.0, 0.5, 0.0], [0.1, 0.0, -0.1]])
    x = np.array([[1.0, 0.0], [-1.0, 1.0]])
    y = np.array([2, 0])
    xa = np.concatenate([x, np.ones((B, 1))], axis=1)
    w = np.full((B, 1), 1.0 / B)
    G = np.empty_like(theta)
    packed_grad_(theta, xa, np.eye(C)[y] * w, w, np.empty((B, C)), G, 0.5)
    np.testing.assert_allclose(G, _ref_packed(theta, x, y, 0.5), atol=1e-12)


def _tiny_dataset():
    x = [np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), np.array([[2.0, -1.0], [0.5, 0.5]])]
    y = [np.array([0, 1, 2]), np.array([1, 0])]
    tx = [np.array([[1.0, 2.0]]), np.zeros((0, 2))]
    ty = [np.array([2]), np.zeros(0, dtype=np.int64)]
    return FederatedDataset(x, y, tx, ty, num_classes=3), x, y


def test_logistic_problem_on_hand_made_dataset():
    ds, x, y = _tiny_dataset()
    with pytest.raises(ValueError, match="dataset must be a FederatedDataset"):
        LogisticProblem("not a dataset")
    with pytest.raises(ValueError, match="num_classes"):
        LogisticProblem(ds, num_classes=2)
    prob = LogisticProblem(ds, l2=0.1, num_classes=4)
    assert prob.model.num_classes == 4 and prob.num_clients == 2 and prob.l2 == 0.1
    np.testing.assert_array_equal(prob.offsets, [0, 3, 5])
    np.testing.assert_allclose(prob.p, [0.6, 0.4])
    rng = np.random.default_rng(8)
    params = {"W": rng.standard_normal((2, 4)), "b": rng.standard_normal(4)}
    allx, ally = np.concatenate(x), np.concatenate(y)
    assert prob.loss(params) == pytest.approx(_ref_loss(params["W"], params["b"], allx, ally, 0.1), rel=1e-12)
    assert prob.client_loss(params, 1) == pytest.approx(
        _ref_loss(params["W"], params["b"], x[1], y[1], 0.1), rel=1e-12)
    H = prob.client_hessian(params, 1)
    np.testing.assert_allclose(H, _fd_hessian(params["W"], params["b"], x[1], y[1], 0.1), atol=1e-7)
    prob.client_hessian(params, 0)
    for bad in (-1, 2):  # client_loss(-1) used to be the last client's loss, client_loss(2) an IndexError
        for method in (prob.client_hessian, prob.client_loss):
            with pytest.raises(ValueError, match="client"):
                method(params, bad)
    # test set: the single sample (1, 2) of class 2
    pred = int(np.argmax(np.array([1.0, 2.0]) @ params["W"] + params["b"]))
    assert prob.test_accuracy(params) == float(pred == 2)
    m = prob.metrics(params)
    assert m["test_accuracy"] == float(pred == 2) and m["train_loss"] == pytest.approx(prob.loss(params))
    # full-batch grad_fn: the gradient of the client's whole training set (any order)
    gfn = prob.grad_fn(seed=0, batch_size=10)
    for i in (0, 1):
        g = gfn(params, i, 0, 0)
        gW, gb = _ref_grad(params["W"], params["b"], x[i], y[i], 0.1)
        np.testing.assert_allclose(g["W"], gW, atol=1e-13)
        np.testing.assert_allclose(g["b"], gb, atol=1e-13)


def test_logistic_regression_defaults_are_fedprox_mclr():
    model = LogisticRegression()
    assert (model.num_features, model.num_classes, model.l2) == (60, 10, 0.0)
    p = model.init_params()
    assert p["W"].shape == (60, 10) and p["b"].shape == (10,)
    assert not np.any(p["W"]) and not np.any(p["b"])


# --------------------------------------------------------------------------- synthetic
def _ref_synthetic(alpha, beta, m, d, C, seed, tf, iid=False, sizes=None):
    """The generator of the fedlib.data.synthetic docstring, written out from the text:
    n_k = floor(LogNormal(4, 2)) + 50 from stream "data_sizes"; client k's u_k, B_k, W_k,
    b_k, v_k, x and shuffle, in that order, from stream ("data", k); iid: shared W, b from
    "data_shared"; x ~ N(v_k, diag(j^-1.2)); y = argmax(x W + b); the first
    max(1, floor(tf n_k)) shuffled samples train."""
    if sizes is None:
        sizes = np.floor(generator(seed, "data_sizes").lognormal(4.0, 2.0, size=m)).astype(int) + 50
    std = np.array([j ** -0.6 for j in range(1, d + 1)])
    if iid:
        sh = generator(seed, "data_shared")
        Ws, bs = sh.standard_normal((d, C)), sh.standard_normal(C)
    out = []
    for k in range(m):
        g = generator(seed, "data", k)
        n = int(sizes[k])
        if iid:
            u = Bk = 0.0
            W, b, v = Ws, bs, np.zeros(d)
        else:
            u = alpha * g.standard_normal()
            Bk = beta * g.standard_normal()
            W = u + g.standard_normal((d, C))
            b = u + g.standard_normal(C)
            v = Bk + g.standard_normal(d)
        x = v + std * g.standard_normal((n, d))
        y = np.array([int(np.argmax(row @ W + b)) for row in x])
        o = g.permutation(n)
        x, y = x[o], y[o]
        nt = max(1, math.floor(tf * n))
        out.append((x[:nt], y[:nt], x[nt:], y[nt:], u, Bk, n))
    return out


@pytest.mark.parametrize("alpha,beta,iid,seed,tf", [(1.0, 1.0, False, 0, 0.9), (0.5, 2.0, False, 3, 0.75),
                                                   (0.0, 0.0, False, 1, 0.5), (1.0, 1.0, True, 2, 0.9)])
def test_synthetic_matches_written_out_generator(alpha, beta, iid, seed, tf):
    m, d, C = 4, 5, 3
    ds = synthetic(alpha, beta, num_clients=m, dim=d, num_classes=C, seed=seed, train_fraction=tf, iid=iid)
    ref = _ref_synthetic(alpha, beta, m, d, C, seed, tf, iid)
    assert ds.num_clients == m and ds.num_features == d and ds.num_classes == C
    for k, (trx, try_, tex, tey, u, Bk, n) in enumerate(ref):
        np.testing.assert_allclose(ds.train_x[k], trx, rtol=1e-13, atol=1e-13)
        np.testing.assert_array_equal(ds.train_y[k], try_)
        np.testing.assert_allclose(ds.test_x[k], tex, rtol=1e-13, atol=1e-13)
        np.testing.assert_array_equal(ds.test_y[k], tey)
        assert ds.train_y[k].dtype == np.int64 and ds.train_x[k].dtype == np.float64
        assert ds.meta["u"][k] == pytest.approx(u, abs=1e-15) and ds.meta["B"][k] == pytest.approx(Bk, abs=1e-15)
        assert ds.meta["total_samples"][k] == n
    assert ds.name == ("synthetic_iid" if iid else f"synthetic({alpha:g},{beta:g})")
    assert ds.meta["sizes"] == "lognormal(4,2)+50"
    assert ds.meta["iid"] is iid and ds.meta["train_fraction"] == tf
    assert ds.meta["users"] == [f"f_{k:05d}" for k in range(m)]
    assert (ds.meta["alpha"], ds.meta["beta"], ds.meta["seed"], ds.meta["dim"]) == (alpha, beta, seed, d)
    assert (ds.meta["num_clients"], ds.meta["num_classes"], ds.meta["generator"]) == (m, C, "fedprox-synthetic")


def test_synthetic_fixed_sizes():
    ds = synthetic(num_clients=3, dim=4, num_classes=2, seed=5, num_samples=[1, 2, 10], train_fraction=0.5)
    ref = _ref_synthetic(1.0, 1.0, 3, 4, 2, 5, 0.5, sizes=[1, 2, 10])
    # floor(0.5 * n) with at least one training sample: n = 1 -> 1/0, 2 -> 1/1, 10 -> 5/5
    assert [len(y) for y in ds.train_y] == [1, 1, 5] and [len(y) for y in ds.test_y] == [0, 1, 5]
    for k in range(3):
        np.testing.assert_allclose(ds.train_x[k], ref[k][0], rtol=1e-13, atol=1e-13)
    assert ds.meta["sizes"] == "fixed" and ds.meta["total_samples"] == [1, 2, 10]
    same = synthetic(num_clients=2, dim=3, seed=0, num_samples=np.int64(7), train_fraction=0.99)
    assert [len(y) for y in same.train_y] == [6, 6]  # floor(0.99 * 7) = 6, not rounded to 7
    assert same.meta["total_samples"] == [7, 7]


def test_synthetic_covariance_diagonal_by_hand():
    np.testing.assert_allclose(synthetic_covariance_diagonal(3), [1.0, 2 ** -1.2, 3 ** -1.2], rtol=1e-15)
    np.testing.assert_allclose(synthetic_covariance_diagonal(1), [1.0])
    with pytest.raises(ValueError, match="dim"):
        synthetic_covariance_diagonal(0)


@pytest.mark.parametrize("kwargs,name", [
    ({"train_fraction": 0.0}, "train_fraction"), ({"train_fraction": 1.0}, "train_fraction"),
    ({"train_fraction": True}, "train_fraction"), ({"train_fraction": "0.5"}, "train_fraction"),
    ({"iid": 1}, "iid"), ({"iid": "yes"}, "iid"),
    ({"num_samples": True}, "num_samples"), ({"num_samples": "12"}, "num_samples"), ({"num_samples": 2.5}, "num_samples"),
    ({"num_samples": [5, 5]}, "num_samples"), ({"num_samples": [5, 0, 5]}, "num_samples"),
    ({"num_samples": 0}, "num_samples"), ({"alpha": -0.1}, "alpha"), ({"beta": -1.0}, "beta"),
    ({"num_clients": 0}, "num_clients"), ({"dim": 0}, "dim"), ({"num_classes": 1}, "num_classes"),
    ({"seed": -1}, "seed"),
])
def test_synthetic_rejects_bad_parameters(kwargs, name):
    args = dict(num_clients=3, dim=2, num_samples=5)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        synthetic(**args)


def test_synthetic_accepts_boundary_parameters():
    ds = synthetic(alpha=0.0, beta=0.0, num_clients=1, dim=1, num_classes=2, seed=0, num_samples=[1],
                   iid=np.bool_(False), train_fraction=0.01)
    assert ds.num_clients == 1 and len(ds.train_y[0]) == 1 and ds.meta["iid"] is False


# --------------------------------------------------------------------------- partition
class _Scripted:
    """A random source with scripted Dirichlet draws and a shuffle that reverses in place,
    recording the calls."""

    def __init__(self, draws):
        self.draws = [np.asarray(q, dtype=float) for q in draws]
        self.calls = []

    def shuffle(self, a):
        self.calls.append(("shuffle", list(a)))
        a[:] = list(a)[::-1]

    def dirichlet(self, conc):
        self.calls.append(("dirichlet", list(conc)))
        return self.draws.pop(0)


def _split(y, m, draws, min_size=0, num_classes=None, max_attempts=5, alpha=0.3):
    y = np.asarray(y)
    src = _Scripted(draws)
    K = num_classes if num_classes is not None else int(y.max()) + 1
    parts = _dirichlet_split(y, m, alpha, min_size, K, max_attempts, src.shuffle, src.dirichlet)
    return [p.tolist() for p in parts], src


def test_dirichlet_split_hand_worked():
    # class 0 = indices [0, 1] (shuffled -> [1, 0]), q = (.5, .5): cut at floor(.5*2) = 1
    # class 1 = indices [2, 3] (-> [3, 2]), q = (.25, .75): cut at floor(.25*2) = 0
    # clients [1] and [0, 3, 2]; final shuffles reverse them.
    parts, src = _split([0, 0, 1, 1], 2, [[0.5, 0.5], [0.25, 0.75]])
    assert parts == [[1], [2, 3, 0]]
    assert [c[0] for c in src.calls] == ["shuffle", "dirichlet"] * 2 + ["shuffle"] * 2
    assert src.calls[1] == ("dirichlet", [0.3, 0.3])


def test_dirichlet_split_caps_clients_holding_their_fair_share():
    # n = 6, m = 2: fair share 3. Class 0 (-> [2, 1, 0]) all to client 0, which is then full
    # (3 < 3 is false): class 1's draw (.9, .1) becomes (0, 1) and client 1 gets all of it.
    parts, _ = _split([0, 0, 0, 1, 1, 1], 2, [[1.0, 0.0], [0.9, 0.1]])
    assert parts == [[0, 1, 2], [3, 4, 5]]
    # below the fair share the draw is only renormalised: (.125, .375) / .5 = (.25, .75)
    parts, _ = _split([0, 0, 0, 0, 1, 1, 1, 1], 2, [[0.5, 0.5], [0.125, 0.375]])
    # class 0 [3,2,1,0] cut at 2 -> [3,2] | [1,0]; class 1 [7,6,5,4] cut at floor(.25*4) = 1
    assert parts == [[7, 2, 3], [4, 5, 6, 0, 1]]


def test_dirichlet_split_min_size_repeats_and_degenerate_attempts():
    draws = [[0.5, 0.5], [0.25, 0.75], [0.5, 0.5], [0.5, 0.5]]
    # attempt 1 gives sizes (1, 3): enough for min_size 1, not for min_size 2
    assert _split([0, 0, 1, 1], 2, draws, min_size=1)[0] == [[1], [2, 3, 0]]
    parts, src = _split([0, 0, 1, 1], 2, draws, min_size=2)
    assert sorted(map(len, parts)) == [2, 2] and sorted(sum(parts, [])) == [0, 1, 2, 3]
    assert sum(c[0] == "dirichlet" for c in src.calls) == 4
    with pytest.raises(ValueError, match="max_attempts=1"):
        _split([0, 0, 1, 1], 2, draws, min_size=2, max_attempts=1)
    # class 0 fills client 0; class 1 draws (1, 0): the only open client drew zero -> the
    # attempt is degenerate and repeated (not divided by zero), even with min_size 0
    parts, src = _split([0, 0, 1, 1], 2, [[1.0, 0.0], [1.0, 0.0], [0.5, 0.5], [0.5, 0.5]])
    assert sorted(map(len, parts)) == [2, 2]
    assert sum(c[0] == "dirichlet" for c in src.calls) == 4
    with pytest.raises(ValueError, match="1 of the 1 attempts drew a Dirichlet share of NaN"):  # a NaN draw: named
        _split([0, 0, 1, 1], 2, [[1.0, 0.0], [np.nan, np.nan]], max_attempts=1)
    with pytest.raises(ValueError, match="no partition"):  # a zero share, no NaN
        _split([0, 0, 1, 1], 2, [[1.0, 0.0], [1.0, 0.0]], max_attempts=1)
    # a degenerate class ends its attempt at once: class 2's draw is not made in attempt 1
    # (2 draws), attempt 2 makes all three (5 in all) and gets exactly its scripted draws
    parts, src = _split([0, 0, 1, 1, 2, 2], 2, [[0.5, 0.5], [0.0, 0.0]] + [[0.5, 0.5]] * 3 + [[1.0, 0.0]] * 2)
    assert sum(c[0] == "dirichlet" for c in src.calls) == 5
    assert sorted(map(len, parts)) == [3, 3]


def test_dirichlet_split_empty_class_consumes_draws_and_hands_out_nothing():
    parts, src = _split([0, 0, 2, 2], 2, [[0.5, 0.5], [0.9, 0.1], [0.5, 0.5]], num_classes=3)
    assert parts == [[3, 1], [2, 0]]
    assert sum(c[0] == "dirichlet" for c in src.calls) == 3


def test_partition_validation_boundaries():
    y = np.array([0, 1, 1, 0, 2, 2])
    parts = dirichlet_partition(y, 3, 1.0, seed=2**32 - 1, min_size=2)   # 3 x 2 == 6 samples: allowed
    assert sorted(map(len, parts)) == [2, 2, 2]
    with pytest.raises(ValueError, match=r"seed must be < 2\*\*32"):
        dirichlet_partition(y, 3, 1.0, seed=2**32, min_size=0)
    with pytest.raises(ValueError, match="min_size=3 cannot be met"):
        dirichlet_partition(y, 3, 1.0, min_size=3)
    with pytest.raises(ValueError, match="labels must be a 1-d array"):
        dirichlet_partition([[0], [0, 1]], 1, 1.0, min_size=0)
    with pytest.raises(ValueError, match="alpha"):
        dirichlet_partition(y, 3, 0.0, min_size=0)
    with pytest.raises(ValueError, match="max_attempts must be an integer >= 1"):
        dirichlet_partition(y, 3, 1.0, min_size=0, max_attempts=0)
    with pytest.raises(ValueError, match="num_clients"):
        dirichlet_partition(y, 0, 1.0, min_size=0)
    with pytest.raises(ValueError, match=">= 0"):
        dirichlet_partition([0, -1, 1], 1, 1.0, min_size=0)
    with pytest.raises(ValueError, match="num_classes=2"):
        dirichlet_partition(y, 1, 1.0, min_size=0, num_classes=2)
    assert len(dirichlet_partition(y, 1, 1.0, min_size=0, num_classes=3)[0]) == 6
    for bad in ([], [[0, 1]], [0.0, 1.0], ["a"]):
        with pytest.raises(ValueError, match="labels"):
            dirichlet_partition(bad, 1, 1.0, min_size=0)
    with pytest.raises(ValueError, match="RandomState"):
        dirichlet_partition_generator(y, 2, 1.0, np.random.RandomState(0), min_size=0)
    g1, g2 = np.random.default_rng(4), np.random.default_rng(4)
    a = dirichlet_partition_generator(y, 2, 1.0, g1, min_size=0)
    b = dirichlet_partition_generator(y, 2, 1.0, g2, min_size=0)
    assert [p.tolist() for p in a] == [p.tolist() for p in b]
    c = dirichlet_partition_generator(y, 2, 1.0, 7, min_size=0)
    d = dirichlet_partition_generator(y, 2, 1.0, generator(7, "partition"), min_size=0)
    assert [p.tolist() for p in c] == [p.tolist() for p in d]


def test_iid_partition_block_sizes_and_stream():
    parts = iid_partition(10, 3, 5)
    assert [len(p) for p in parts] == [4, 3, 3]     # first 10 mod 3 = 1 block one larger
    perm = generator(5, "partition").permutation(10)
    assert [p.tolist() for p in parts] == [perm[:4].tolist(), perm[4:7].tolist(), perm[7:].tolist()]
    assert all(p.dtype == np.int64 for p in parts)
    assert [len(p) for p in iid_partition(3, 3, 0)] == [1, 1, 1]
    assert [len(p) for p in iid_partition(5, 1, 0)] == [5]
    with pytest.raises(ValueError, match="exceeds"):
        iid_partition(3, 4, 0)
    with pytest.raises(ValueError, match="num_clients must be an integer >= 1"):
        iid_partition(3, 0, 0)
    with pytest.raises(ValueError, match="seed"):
        iid_partition(3, 1, np.random.RandomState(0))
    with pytest.raises(ValueError, match="seed"):
        iid_partition(3, 1, -1)


def test_class_counts_by_hand():
    y = [0, 1, 1, 2]
    np.testing.assert_array_equal(class_counts(y, [[0, 1], [2, 3], []]), [[1, 1, 0], [0, 1, 1], [0, 0, 0]])
    np.testing.assert_array_equal(class_counts(y, [[3, 3]], num_classes=4), [[0, 0, 2, 0]])
    for bad in ([[-1]], [[4]], [[0.0]]):
        with pytest.raises(ValueError, match="parts"):
            class_counts(y, bad)
    np.testing.assert_array_equal(class_counts(y, [[0], [3]]), [[1, 0, 0], [0, 0, 1]])


def test_logistic_problem_explicit_two_classes():
    x = [np.array([[1.0], [-1.0]])]
    y = [np.array([1, 0])]
    ds = FederatedDataset(x, y, [np.zeros((0, 1))], [np.zeros(0, dtype=np.int64)], num_classes=2)
    prob = LogisticProblem(ds, num_classes=2)
    assert prob.model.num_classes == 2 and prob.l2 == 0.0
    params = {"W": np.array([[-1.0, 1.0]]), "b": np.zeros(2)}
    # z = (-1, 1) for y = 1 and (1, -1) for y = 0: both losses log(1 + e^-2), no penalty by default
    assert prob.loss(params) == pytest.approx(math.log(1 + math.exp(-2)), rel=1e-14)


def test_synthetic_defaults_are_fedprox_synthetic_1_1():
    ds = synthetic(num_samples=3)
    assert (ds.num_clients, ds.num_features, ds.num_classes, ds.name) == (30, 60, 10, "synthetic(1,1)")
    m = ds.meta
    assert (m["alpha"], m["beta"], m["seed"], m["train_fraction"], m["iid"]) == (1.0, 1.0, 0, 0.9, False)
    explicit = synthetic(1.0, 1.0, num_clients=2, dim=3, num_classes=10, seed=0, train_fraction=0.9,
                         iid=False, num_samples=20)
    implicit = synthetic(num_clients=2, dim=3, num_samples=20)
    for a, b in zip(explicit.train_x + explicit.test_x, implicit.train_x + implicit.test_x):
        np.testing.assert_array_equal(a, b)


class _ZeroDirichlet(np.random.Generator):
    """A Generator whose Dirichlet draws are all zero: every attempt is degenerate."""

    def dirichlet(self, alpha, size=None):
        return np.zeros(len(alpha))


def test_partition_defaults():
    # 16 clients x min_size 10 = 160 > 100 samples
    with pytest.raises(ValueError, match="min_size=10 cannot be met: 16 clients"):
        dirichlet_partition(np.arange(100) % 10)
    with pytest.raises(ValueError, match="min_size=10 cannot be met: 2 clients"):
        dirichlet_partition_generator(np.arange(15) % 3, 2, 1.0, 0)
    y = np.arange(400) % 10
    a = dirichlet_partition(y)
    b = dirichlet_partition(y, 16, 0.1, 2020, 10, num_classes=10, max_attempts=10_000)
    assert [p.tolist() for p in a] == [p.tolist() for p in b]
    with pytest.raises(ValueError, match="max_attempts=10000 attempts"):
        dirichlet_partition_generator(np.array([0, 1, 0, 1]), 2, 1.0, _ZeroDirichlet(np.random.PCG64(0)), 0)


# ----------------------------------------------------------- logistic.pack_params: the input checks' mutants
def test_pack_params_refuses_extra_keys():
    """Mutant L1: ``set(params) != {"W", "b"}`` -> ``not set(params) >= {"W", "b"}``: a dict with a
    third key (a typo such as ``"B"`` next to ``"b"``) was packed silently, the extra entry dropped."""
    params = {"W": np.zeros((2, 3)), "b": np.zeros(3), "B": np.ones(3)}
    with pytest.raises(ValueError, match=r"^params must be a dict with keys 'W' and 'b', got \['B', 'W', 'b'\]$"):
        pack_params(params)


@pytest.mark.parametrize("w_shape, b_shape", [((3, 4), (2, 4)), ((2, 3, 4), (4,)), ((2, 3, 4), (5, 4))])
def test_pack_params_refuses_a_bias_whose_leading_axes_differ(w_shape, b_shape):
    """Mutant L4: ``b_shape != w_shape[:-2] + w_shape[-1:]`` -> ``b_shape[-1:] != w_shape[-1:]``
    (only C compared): a bias with other leading (client) axes than W reached numpy's concatenate
    and failed there with a message that names neither W nor b."""
    with pytest.raises(ValueError, match=r"^params: W must have shape \(\.\.\., d, C\) and b \(\.\.\., C\)"):
        pack_params({"W": np.zeros(w_shape), "b": np.zeros(b_shape)})


# ----------------------------------------------- synthetic, class scores that overflow: mutants of 8bd9827..
def test_synthetic_refuses_beta_whose_inputs_fit_but_class_scores_overflow():
    """One client, d = 1, C = 2, alpha = 0, seed 19: the stream (19, "data", 0) draws Z0 (u = 0 Z0), Z1
    (B = beta Z1), Z2, Z3 (W = [Z2, Z3]), Z4, Z5 (b), Z6 (v), Z7, Z8 (x). With beta = 1.2e308,
    x_i = beta Z1 + O(1) ~ 1.43e308 is finite, but x_i Z3 (|Z3| = 1.64) passes the largest double:
    a class score is -inf and the labels would be an argmax over it."""
    from fedlib.data.synthetic import synthetic
    from fedlib.rng import generator

    z = generator(19, "data", 0).standard_normal(9)
    top = np.finfo(np.float64).max
    x_max = 1.2e308 * z[1] + z[6] + max(z[7], z[8])
    assert 0 < x_max < top and top / abs(z[3]) < 1.2e308 * z[1] - 10  # the inputs fit, a score does not
    with np.errstate(all="raise"):
        with pytest.raises(ValueError, match=r"^alpha=0\.0, beta=1\.2e\+308 are too large: client 0's class scores "
                                             r"x\^T W_k \+ b_k .* overflow float64 \(inf or NaN\)"):
            synthetic(0.0, 1.2e308, num_clients=1, dim=1, num_classes=2, seed=19, num_samples=2)


# ------------------------------------- mutants of the 8996bdf pass (dc4cc69: the min_size error's NaN note)
def test_the_min_size_error_has_no_nan_note_without_nan_draws_and_the_nan_error_says_why():
    """2 classes over 4 clients at alpha = 1e-4: each class goes whole to one client, so min_size = 1 is never met.
    Generator.dirichlet draws no NaN: the min_size error ends at its advice, with no '(0 of the 20 attempts drew ...)'
    note; numpy's legacy Dirichlet at alpha = 1e-6 draws NaN in all 20 attempts, and the error says why (its gamma
    draws all underflow to 0). Mutants of the 8996bdf pass: DP5 (the note even for 0 NaN draws), DP9 (the why
    dropped from the note)."""
    y = np.repeat(np.arange(2), 20)
    with pytest.raises(ValueError, match=r"^no partition with min_size=1 found in max_attempts=20 attempts \(4 clients, "
                                         r"40 samples, alpha=0\.0001\); lower min_size or raise alpha\Z"):
        dirichlet_partition_generator(y, 4, 1e-4, 0, min_size=1, max_attempts=20)
    with pytest.raises(ValueError, match=r"^alpha=1e-06 is too small for this random source: 20 of the 20 attempts drew "
                                         r"a Dirichlet share of NaN \(numpy's legacy RandomState\.dirichlet, the "
                                         r"official code's stream, divides gamma draws that all underflow to 0\); "
                                         r"raise alpha, or use dirichlet_partition_generator, whose "
                                         r"Generator\.dirichlet handles small alpha\Z"):
        dirichlet_partition(y, 4, 1e-6, min_size=0, max_attempts=20)

"""Multinomial logistic regression: gradients vs finite differences, stacked = per client,
global loss and accuracy, one-hot labels without a C x C identity; a stacked mask of 0 and 1 only, x of the model's
shape (fedlib.problems.logistic)."""
from __future__ import annotations

import numpy as np
import pytest

from fedlib.data import synthetic
from fedlib.data.clients import FederatedDataset
from fedlib.problems.logistic import LogisticProblem, LogisticRegression, pack_params, packed_grad_, unpack_params


def _params(rng, d, c, scale=0.5):
    return {"W": scale * rng.standard_normal((d, c)), "b": scale * rng.standard_normal(c)}


def _fd_grad(f, params, eps=1e-6):
    out = {}
    for k, v in params.items():
        g = np.zeros_like(v)
        for idx in np.ndindex(v.shape):
            up = {kk: vv.copy() for kk, vv in params.items()}
            dn = {kk: vv.copy() for kk, vv in params.items()}
            up[k][idx] += eps
            dn[k][idx] -= eps
            g[idx] = (f(up) - f(dn)) / (2 * eps)
        out[k] = g
    return out


@pytest.mark.parametrize("l2", [0.0, 0.001, 0.3])
def test_gradient_matches_finite_differences(l2):
    rng = np.random.default_rng(0)
    d, c, n = 5, 4, 7
    model = LogisticRegression(d, c, l2)
    x = rng.standard_normal((n, d))
    y = rng.integers(0, c, n)
    params = _params(rng, d, c)
    loss, g = model.loss_and_grad(params, x, y)
    fd = _fd_grad(lambda p: model.loss(p, x, y), params)
    for k in ("W", "b"):
        np.testing.assert_allclose(g[k], fd[k], rtol=1e-6, atol=1e-8)
    assert loss == pytest.approx(model.loss(params, x, y))
    assert np.allclose(model.grad(params, x, y)["W"], g["W"])


def test_loss_at_zero_is_log_classes_and_penalty_only_on_w():
    model = LogisticRegression(3, 5, l2=0.5)
    x = np.ones((4, 3))
    y = np.array([0, 1, 2, 3])
    zero = model.init_params()
    assert model.loss(zero, x, y) == pytest.approx(np.log(5))
    p = {"W": np.zeros((3, 5)), "b": np.full(5, 2.0)}  # the bias is not penalised
    assert model.loss(p, x, y) == pytest.approx(np.log(5))
    p = {"W": np.ones((3, 5)), "b": np.zeros(5)}  # uniform logits, penalty 0.5/2 * 15
    assert model.loss(p, x, y) == pytest.approx(np.log(5) + 0.25 * 15)


@pytest.mark.parametrize("l2", [0.0, 0.01])
def test_stacked_equals_per_client_with_padding(l2):
    rng = np.random.default_rng(1)
    q, B, d, c = 4, 6, 5, 3
    model = LogisticRegression(d, c, l2)
    W = rng.standard_normal((q, d, c))
    b = rng.standard_normal((q, c))
    x = rng.standard_normal((q, B, d))
    y = rng.integers(0, c, (q, B))
    counts = np.array([6, 1, 4, 6])  # real samples per client; the rest is padding
    mask = (np.arange(B)[None, :] < counts[:, None]).astype(float)
    loss, g = model.loss_and_grad_stacked({"W": W, "b": b}, x, y, mask)
    assert g["W"].shape == (q, d, c) and g["b"].shape == (q, c)
    for j in range(q):
        n = counts[j]
        lj, gj = model.loss_and_grad({"W": W[j], "b": b[j]}, x[j, :n], y[j, :n])
        assert loss[j] == pytest.approx(lj, rel=1e-12)
        np.testing.assert_allclose(g["W"][j], gj["W"], rtol=1e-11, atol=1e-14)
        np.testing.assert_allclose(g["b"][j], gj["b"], rtol=1e-11, atol=1e-14)


def test_stacked_gradient_matches_finite_differences():
    rng = np.random.default_rng(2)
    q, B, d, c = 2, 3, 3, 3
    model = LogisticRegression(d, c, 0.1)
    params = {"W": rng.standard_normal((q, d, c)), "b": rng.standard_normal((q, c))}
    x = rng.standard_normal((q, B, d))
    y = rng.integers(0, c, (q, B))
    _, g = model.loss_and_grad_stacked(params, x, y)
    fd = _fd_grad(lambda p: float(model.loss_and_grad_stacked(p, x, y)[0].sum()), params)
    for k in ("W", "b"):
        np.testing.assert_allclose(g[k], fd[k], rtol=1e-6, atol=1e-8)


def test_packed_kernel_is_stable_for_huge_logits():
    """Per-client shift + per-row fallback: no overflow, no 0/0 when rows differ by > 700."""
    d, c, B = 2, 3, 2
    model = LogisticRegression(d, c)
    params = {"W": np.array([[900.0, 850.0, 800.0], [0.0, 0.0, 0.0]]), "b": np.zeros(c)}
    x = np.array([[1.0, 0.0], [-1.0, 0.0]])  # row 2's logits are all >= 800 below row 1's max
    y = np.array([2, 0])
    _, g = model.loss_and_grad(params, x, y)
    theta = pack_params(params)[None]
    xa = np.concatenate([x, np.ones((B, 1))], axis=1)[None]
    w = np.full((1, B, 1), 1 / B)
    G = np.empty_like(theta)
    packed_grad_(theta, xa, np.eye(c)[y][None] * w, w, np.empty((1, B, c)), G)
    assert np.all(np.isfinite(G))
    np.testing.assert_allclose(unpack_params(G[0])["W"], g["W"], atol=1e-12)
    np.testing.assert_allclose(unpack_params(G[0])["b"], g["b"], atol=1e-12)


def test_pack_unpack_roundtrip():
    rng = np.random.default_rng(4)
    p = _params(rng, 4, 3)
    theta = pack_params(p)
    assert theta.shape == (5, 3)
    back = unpack_params(theta)
    assert np.array_equal(back["W"], p["W"]) and np.array_equal(back["b"], p["b"])


def test_problem_global_loss_is_weighted_client_mean_and_accuracy_on_union():
    ds = synthetic(num_clients=4, seed=0, num_samples=[30, 60, 90, 20])
    prob = LogisticProblem(ds, l2=0.01)
    rng = np.random.default_rng(5)
    params = _params(rng, 60, 10, 0.1)
    expected = sum(p * prob.client_loss(params, i) for i, p in enumerate(prob.p))
    assert prob.loss(params) == pytest.approx(expected, rel=1e-12)
    xs = np.concatenate(ds.test_x)
    ys = np.concatenate(ds.test_y)
    acc = np.mean(np.argmax(xs @ params["W"] + params["b"], axis=1) == ys)
    assert prob.test_accuracy(params) == pytest.approx(acc)
    assert prob.metrics(prob.init_params())["train_loss"] == pytest.approx(np.log(10))


def test_problem_without_test_data_reports_none():
    x = [np.ones((3, 2)), np.zeros((2, 2))]
    y = [np.array([0, 1, 0]), np.array([1, 1])]
    ds = FederatedDataset(x, y, [np.zeros((0, 2))] * 2, [np.zeros(0, dtype=np.int64)] * 2, num_classes=2)
    prob = LogisticProblem(ds)
    assert prob.metrics(prob.init_params())["test_accuracy"] is None


def test_bad_inputs_name_the_argument():
    model = LogisticRegression(3, 2)
    with pytest.raises(ValueError, match="params"):
        model.loss({"W": np.zeros((2, 2)), "b": np.zeros(2)}, np.zeros((1, 3)), np.zeros(1, dtype=int))
    with pytest.raises(ValueError, match=r"^y\b"):
        model.loss(model.init_params(), np.zeros((1, 3)), np.array([5]))
    with pytest.raises(ValueError, match="l2"):
        LogisticRegression(3, 2, l2=-1)
    with pytest.raises(ValueError, match="mask"):
        model.loss_and_grad_stacked({"W": np.zeros((1, 3, 2)), "b": np.zeros((1, 2))}, np.zeros((1, 2, 3)),
                                    np.zeros((1, 2), dtype=int), np.zeros((1, 2)))



@pytest.mark.parametrize("method", ["grad", "loss_and_grad", "hessian", "loss"])
@pytest.mark.parametrize("y", [[[0], [1, 0]], [0, [1]]])
def test_a_ragged_y_is_named(method, y):
    """Before: a ragged y was numpy's bare ValueError ('setting an array element with a sequence. The requested array
    has an inhomogeneous shape ...'), naming no argument."""
    model = LogisticRegression(3, 2)
    with pytest.raises(ValueError, match=r"^y must be an array of integer labels: setting an array element with a "
                                         r"sequence"):
        getattr(model, method)(model.init_params(), np.zeros((2, 3)), y)
    assert model.grad(model.init_params(), np.zeros((2, 3)), [0, 1])["b"].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("method", ["grad", "loss_and_grad", "hessian", "loss"])
@pytest.mark.parametrize("y", [[0, True], (False, 1), [np.True_, 0]])
def test_a_bool_among_the_labels_is_named(method, y):
    """Before: y=[0, True] was the labels [0, 1] (np.asarray makes the bool the number 1), without a word; a bool
    array was already refused by its dtype."""
    model = LogisticRegression(3, 2)
    with pytest.raises(ValueError, match=r"^y must be integer labels, got the bool (True|False) among them"):
        getattr(model, method)(model.init_params(), np.zeros((2, 3)), y)

# --------------------------------------------------------------------------- one-hot labels
def test_one_hot_labels_take_no_identity_matrix():
    """The stacked logistic gradient and the batched engine built one-hot labels as
    ``np.eye(C)[y]``: a C x C temporary (800 MB at 10,000 classes, 74.5 GiB at 100,001: the out of
    memory of ``run synthetic`` on LEAF labels up to 10**5). Now ``y.size x C``: the same array."""
    import tracemalloc

    from fedlib.problems.logistic import _one_hot

    y = np.array([[0, 2999, 5], [7, 7, 1]])
    np.testing.assert_array_equal(_one_hot(y, 3000), np.eye(3000)[y])
    assert _one_hot(y, 3000).dtype == np.float64
    tracemalloc.start()
    try:
        _one_hot(y, 3000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10 * y.size * 3000 * 8, peak  # np.eye(3000) alone is 72 MB


def test_the_engines_build_one_hot_labels_in_sample_memory(monkeypatch):
    """Neither the stacked gradient nor the batched engine calls np.eye with the class count."""
    import fedlib.engines.batched as batched
    from fedlib.algorithms import make_algorithm
    from fedlib.problems.logistic import LogisticProblem
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd

    C = 5000
    ds = synthetic(1.0, 1.0, num_clients=2, seed=0, num_samples=[6, 8], num_classes=10)
    ds = type(ds)(ds.train_x, ds.train_y, ds.test_x, ds.test_y, num_classes=C, name="wide")
    prob = LogisticProblem(ds, l2=0.0)
    real_eye, sizes = np.eye, []

    def eye(n, *a, **k):
        sizes.append(n)
        return real_eye(n, *a, **k)

    monkeypatch.setattr(np, "eye", eye)
    x0 = prob.model.init_params()
    params = {k: np.stack([v, v]) for k, v in x0.items()}
    prob.model.loss_and_grad_stacked(params, np.stack([ds.train_x[0][:4]] * 2), np.stack([ds.train_y[0][:4]] * 2))
    batched.run_batched(make_algorithm("fedavg", sgd(0.1)), prob, FixedSteps([2, 2]), rounds=1, batch_size=4, seed=0,
                        evaluate=False)
    assert C not in sizes, sizes


@pytest.mark.parametrize("bad", [[1.0, np.nan], [1.0, 0.5], [2.0, -1.0]])
def test_stacked_mask_must_be_zero_or_one(bad):
    # a mask of other values gave a weighted mean (documented: the mean over the real samples) or NaN
    model = LogisticRegression(3, 2)
    params = {"W": np.zeros((1, 3, 2)), "b": np.zeros((1, 2))}
    x, y = np.ones((1, 2, 3)), np.array([[0, 1]])
    with pytest.raises(ValueError, match="mask must hold only 0"):
        model.loss_and_grad_stacked(params, x, y, np.array([bad]))
    model.loss_and_grad_stacked(params, x, y, np.array([[True, False]]))  # a boolean mask is fine


@pytest.mark.parametrize("x", [np.ones((4, 5)), np.ones(3), np.ones((1, 4, 3))])
def test_logits_checks_the_shape_of_x(x):
    # a wrong feature count was a bare matmul error; a 1-d x silently gave shape (C,), not (n, C)
    model = LogisticRegression(3, 2)
    with pytest.raises(ValueError, match=r"x must have shape \('n', 3\)"):
        model.logits(model.init_params(), x)


def test_pack_params_names_a_numpy_bias_beside_a_tensor_w():
    """Was: pack_params({"W": tensor, "b": numpy array or list}) raised AttributeError ("'numpy.ndarray' object has
    no attribute 'unsqueeze'") from torch.cat's argument; W a tensor makes Theta a tensor, so b must be one."""
    import torch

    for b in (np.zeros(3), [0.0, 0.0, 0.0]):
        with pytest.raises(ValueError, match=r"^params: W is a torch tensor, so b must be one too, got "):
            pack_params({"W": torch.zeros(2, 3), "b": b})
    theta = pack_params({"W": torch.zeros(2, 3), "b": torch.ones(3)})
    assert torch.equal(theta, torch.tensor([[0.0] * 3, [0.0] * 3, [1.0] * 3]))


def test_pack_params_names_a_tensor_bias_beside_a_numpy_w():
    """The other way round: pack_params({"W": numpy, "b": tensor}) went through np.asarray(b) and packed to numpy (a
    CUDA b or one requiring grad failed deep in numpy: "can't convert cuda:0 device type tensor to numpy", "Can't
    call numpy() on Tensor that requires grad"); now a ValueError naming params, as for a tensor W. A list b beside a
    numpy W is still packed. run_batched packs its checked float64 arrays, so a mixed params still starts it."""
    import torch

    from fedlib.algorithms import make_algorithm
    from fedlib.engines.batched import run_batched
    from fedlib.schedules import FixedEpochs
    from fedlib.solvers import sgd

    for W in (np.zeros((2, 3)), [[0.0] * 3] * 2):
        for b in (torch.ones(3), torch.ones(3, requires_grad=True)):
            with pytest.raises(ValueError, match=r"^params: b is a torch tensor, so W must be one too, got "):
                pack_params({"W": W, "b": b})
    assert pack_params({"W": np.zeros((2, 3)), "b": [1.0, 1.0, 1.0]}).tolist() == [[0.0] * 3, [0.0] * 3, [1.0] * 3]

    prob = LogisticProblem(synthetic(num_clients=3, seed=0))
    x = prob.init_params()
    x = {"W": x["W"] + 0.01, "b": x["b"] - 0.02}
    runs = [run_batched(make_algorithm("fedavg", sgd(0.02)), prob, FixedEpochs(prob.num_samples, 20, 1), 1,
                        batch_size=20, evaluate=False, params=params).params
            for params in (x, {"W": x["W"], "b": torch.as_tensor(x["b"])},
                           {"W": torch.as_tensor(x["W"]), "b": torch.as_tensor(x["b"])})]
    for other in runs[1:]:
        np.testing.assert_array_equal(other["W"], runs[0]["W"])
        np.testing.assert_array_equal(other["b"], runs[0]["b"])


def test_unpack_params_names_a_theta_that_is_no_array():
    """Was: unpack_params of a nested list (or tuple) raised TypeError ('list indices must be integers or slices, not
    tuple') from theta[..., :-1, :]; W and b are views of theta, which a list cannot give."""
    for theta in ([[0.0] * 3] * 3, ((0.0, 1.0), (2.0, 3.0))):
        with pytest.raises(ValueError, match=r"^theta must be a numpy array or torch tensor"):
            unpack_params(theta)


def test_logistic_regression_takes_any_tensor_and_refuses_complex_numbers_by_name():
    """Was: W, b or x as a tensor requiring grad raised RuntimeError ("Can't call numpy() on Tensor that requires
    grad"), in bfloat16 TypeError ('Got unsupported ScalarType BFloat16'); complex x or W lost their imaginary part
    with only a ComplexWarning (the loss of x + 1j was that of x, 1.0986 here), the scalar 1j raised TypeError
    ("float() argument must be a string or a real number, not 'complex'"); strings in W "could not convert string
    to float", naming nothing."""
    import warnings

    import torch

    model = LogisticRegression(num_features=2, num_classes=3)
    params = {"W": np.array([[0.5, 0.0, -0.5], [0.25, 1.0, 0.0]]), "b": np.array([0.0, 0.5, -0.25])}
    x, y = np.array([[1.0, 2.0], [0.5, -1.0]]), np.array([0, 2])
    loss, grads = model.loss_and_grad(params, x, y)
    for convert in (lambda a: torch.tensor(a, requires_grad=True), lambda a: torch.tensor(a, dtype=torch.bfloat16)):
        tensor_params = {k: convert(v) for k, v in params.items()}
        got_loss, got = model.loss_and_grad(tensor_params, convert(x), torch.tensor(y))
        assert got_loss == loss and np.array_equal(got["W"], grads["W"]) and np.array_equal(got["b"], grads["b"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for bad_x in (x + 1j, torch.tensor(x + 1j), 1j):
            with pytest.raises(ValueError, match=r"^x must (hold real numbers|be an array of real numbers)"):
                model.loss(params, bad_x, y)
        with pytest.raises(ValueError, match=r"^params\['W'\] must hold real numbers"):
            model.grad({**params, "W": params["W"] * (1 + 1j)}, x, y)
        with pytest.raises(ValueError, match=r"^params\['b'\] must be an array of real numbers"):
            model.logits({**params, "b": ["a", "b", "c"]}, x)
        with pytest.raises(ValueError, match=r"^mask must hold real numbers"):
            model.loss_and_grad_stacked({k: v[None] for k, v in params.items()}, x[None], y[None], mask=[[1j, 1]])

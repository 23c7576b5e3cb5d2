"""The stacked-client engine (grouped and vmap paths) against the plain per-client loop.

Everything in float64 on the CPU with a tiny VGG-11 (width 1/32) and a handful of
images per client: both paths must equal ``fedlib.engines.reference.run_sequential``
(driven by ``torch.func.grad`` of the plain model on the very same batches, crops, flips
and dropout masks) to 1e-10, for every local solver and algorithm, with several runs
stacked in one engine.

A user's own image model: training-only behaviour is refused, a model that cannot take the images is
named, the engine (and train_clients) trains in the model's dtype, and the grouped path refuses an
nn.Sequential subclass with its own forward.
"""
from __future__ import annotations

import contextlib
import re
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fedlib.algorithms import make_algorithm
from fedlib.data.cifar10 import CIFAR10_MEAN, CIFAR10_STD, load_cifar10_sample
from fedlib.engines.augment import (crop_flip_gather, crop_flip_params, dropout_key, normalize, pad_images,
                                    random_crop_flip, seeded_dropout_mask)
from fedlib.engines.grouped import GroupedNetwork
from fedlib.engines.reference import run_sequential
from fedlib.engines.stacked import (RunSpec, StackedEngine, client_augment_params, client_batch_plan,
                                    max_relative_difference, online_a_norms, reference_run)
from fedlib.models import vgg11
from fedlib.schedules import FixedEpochs, FixedSteps, RandomEpochs, step_decay_lr
from fedlib.server import momentum as server_momentum
from fedlib.solvers import momentum_proximal_sgd, momentum_sgd, proximal_sgd, sgd
from torch_threads import one_torch_thread  # noqa: F401 (autouse fixture)

B = 4
ROUNDS = 3
WIDTH = 1 / 32
#: the engine variants every equality test covers: the grouped network with cuDNN-style grouped
#: convolutions, the same network with im2col + batched matrix products, and torch.func.vmap
VARIANTS = {"grouped": dict(path="grouped"), "gemm": dict(path="grouped", conv="gemm"), "vmap": dict(path="vmap")}


class _Data:
    def __init__(self, d, n_test=40):
        self.train_images, self.train_labels = d.train_images, d.train_labels
        self.test_images, self.test_labels = d.test_images[:n_test], d.test_labels[:n_test]


@pytest.fixture(scope="module")
def data():
    return _Data(load_cifar10_sample())


@pytest.fixture(scope="module")
def model():
    return vgg11(width=WIDTH, seed=0)


def _clients(offset, sizes):
    out, start = [], offset
    for n in sizes:
        out.append(np.arange(start, start + n) * 7 % 2000)  # mixed classes
        start += n
    return out


def _params64(seed):
    return {n: p.detach().double().clone() for n, p in vgg11(width=WIDTH, seed=seed).named_parameters()}


def _runs():
    """Nine runs: every solver, every algorithm, unequal sizes, partial batches, random epochs."""
    sizes = [5, 9, 3]
    wd = 1e-4
    specs = [
        ("fedavg-sgd", make_algorithm("fedavg", sgd(0.05)), FixedEpochs(sizes, B, 1), {}),
        ("fedavg-momentum", make_algorithm("fedavg", momentum_sgd(0.02, 0.9)), FixedEpochs(sizes, B, 2), {}),
        ("fedprox", make_algorithm("fedprox", proximal_sgd(0.05, mu=0.5)), RandomEpochs(sizes, B, 1, 2, seed=3), {}),
        ("fedavg-momentum-prox-wd", make_algorithm("fedavg", momentum_proximal_sgd(0.02, 0.9, mu=0.5, weight_decay=wd)),
         FixedEpochs(sizes, B, 1), {}),
        ("fednova-momentum-wd", make_algorithm("fednova", momentum_sgd(0.02, 0.9, weight_decay=wd)),
         RandomEpochs(sizes, B, 1, 2, seed=4), {}),
        ("scaffold", make_algorithm("scaffold", sgd(0.05, weight_decay=wd)), FixedEpochs(sizes, B, 1), {}),
        ("fednova-vr-momentum", make_algorithm("fednova-vr", momentum_sgd(0.02, 0.9)), RandomEpochs(sizes, B, 1, 2, seed=5),
         {"lr_at": lambda t: 0.02 * (0.5 ** t)}),
        ("fednova-server-momentum", make_algorithm("fednova", sgd(0.05, weight_decay=wd), server_momentum(0.9),
                                                   tau_eff="local_steps"), FixedEpochs(sizes, B, 1), {}),
        ("fedavg-sampled", make_algorithm("fedavg", sgd(0.05)), FixedEpochs(sizes, B, 1),
         {"sampling": "uniform", "clients_per_round": 2}),
    ]
    runs = []
    for r, (name, algo, sched, kw) in enumerate(specs):
        runs.append(RunSpec(algo, _clients(37 * r, sizes), sched, seed=10 + r, params=_params64(r), name=name, **kw))
    return runs


# ---------------------------------------------------------------- the reference
def _reference(model, data, run, *, augment, dropout, rounds=ROUNDS, engine_rounds=ROUNDS):
    """The plain per-client loop on the engine's batches, crops, flips and dropout masks."""
    return reference_run(model, data, run, rounds=rounds, engine_rounds=engine_rounds, batch_size=B,
                         augment=augment, dropout=dropout)


def _max_rel(a, b):
    return max(float((a[n] - b[n]).abs().max() / b[n].abs().max().clamp_min(1e-300)) for n in b)


def _global_rel(a, b):
    """||a - b|| / ||b|| over all parameters of the model flattened together."""
    num = sum(float(((a[n] - b[n]) ** 2).sum()) for n in b)
    den = sum(float((b[n] ** 2).sum()) for n in b)
    return (num / den) ** 0.5


@pytest.fixture(scope="module")
def references(model, data):
    runs = _runs()
    return runs, [_reference(model, data, run, augment=True, dropout=True) for run in runs]


@pytest.fixture(scope="module")
def engines(model, data, references):
    runs, _ = references
    out = {}
    for path in VARIANTS:
        eng = StackedEngine(model, data, runs, rounds=ROUNDS, **VARIANTS[path], dtype=torch.float64, batch_size=B,
                            eval_batch_size=25)
        eng.train()
        out[path] = eng
    return out


# ---------------------------------------------------------------- equality with the reference
@pytest.mark.parametrize("path", list(VARIANTS))
def test_engine_equals_sequential_reference(path, engines, references):
    runs, refs = references
    eng = engines[path]
    assert eng.max_models == 27 and eng.round_index == ROUNDS
    for r, (run, ref) in enumerate(zip(runs, refs)):
        got, want = eng.states[r], ref.state
        assert _max_rel(got.params, want.params) < 1e-10, run.name
        # the run really moved away from its start
        assert _max_rel(got.params, run.params) > 1e-6, run.name
        for t in range(ROUNDS):
            d_eng, d_ref = eng.history[t][r].diagnostics, ref.diagnostics[t]
            np.testing.assert_array_equal(d_eng.clients, d_ref.clients)
            np.testing.assert_array_equal(d_eng.local_steps, d_ref.local_steps)
            np.testing.assert_allclose(d_eng.a_norms, d_ref.a_norms, rtol=1e-14)
            np.testing.assert_allclose(d_eng.weights, d_ref.weights, rtol=1e-14)
        if want.variates is not None:
            assert _max_rel(got.variates.client, want.variates.client) < 1e-9, run.name
        if run.algorithm.server.name == "momentum":
            assert _max_rel(got.server.buffer, want.server.buffer) < 1e-10


def test_schedules_really_vary(engines):
    """The test setup exercises shrinking prefixes, partial batches and partial participation."""
    eng = engines["grouped"]
    steps = [rec.diagnostics.local_steps for rnd in eng.history for rec in rnd]
    assert len({s for st in steps for s in st.tolist()}) >= 4
    assert any(len(rec.diagnostics.clients) == 2 for rnd in eng.history for rec in rnd)


@pytest.mark.parametrize("other", ["vmap", "gemm"])
def test_grouped_equals_the_other_variants(engines, other):
    g, v = engines["grouped"], engines[other]
    for r in range(g.num_runs):
        assert _max_rel(g.states[r].params, v.states[r].params) < 1e-11
        for t in range(ROUNDS):
            a, b = g.history[t][r], v.history[t][r]
            assert a.test_accuracy == b.test_accuracy
            assert abs(a.test_loss - b.test_loss) < 1e-10 and abs(a.train_loss - b.train_loss) < 1e-10


def test_batched_evaluation_matches_plain_model(engines, model, data):
    eng = engines["grouped"]
    acc, loss = eng.evaluate()
    x = normalize(torch.as_tensor(data.test_images), torch.tensor(CIFAR10_MEAN, dtype=torch.float64),
                  torch.tensor(CIFAR10_STD, dtype=torch.float64), torch.float64).permute(0, 3, 1, 2)
    y = torch.as_tensor(data.test_labels)
    for r in (0, 4, 7):
        plain = vgg11(width=WIDTH).double().eval()
        plain.load_state_dict(eng.params(r))
        with torch.no_grad():
            logits = plain(x)
        assert acc[r] == pytest.approx(float((logits.argmax(1) == y).double().mean()), abs=0)
        assert loss[r] == pytest.approx(float(F.cross_entropy(logits, y)), rel=1e-10)
        assert eng.history[-1][r].test_accuracy == acc[r]


def test_float32_without_augmentation_or_dropout(model, data):
    """float32, no augmentation, no dropout: both paths agree with each other and with the reference."""
    sizes = [6, 3]
    algo = make_algorithm("fednova", momentum_sgd(0.02, 0.9, weight_decay=1e-4))
    run = RunSpec(algo, _clients(5, sizes), FixedEpochs(sizes, B, 2), seed=7, params=_params64(3))
    ref = _reference(model, data, run, augment=False, dropout=False, rounds=2, engine_rounds=2)
    for path in VARIANTS:
        eng = StackedEngine(model, data, [run], rounds=2, **VARIANTS[path], batch_size=B, augment=False,
                            dropout=False, eval_batch_size=30)
        eng.train()
        got = {n: t.double() for n, t in eng.params(0).items()}
        assert eng.params(0)["0.weight"].dtype == torch.float32
        assert _max_rel(got, ref.state.params) < 1e-5


# ---------------------------------------------------------------- prefix views
def test_prefix_slices_are_views(model):
    net = GroupedNetwork(model, 5, device="cpu", dtype=torch.float64)
    for name, full in net.params.items():
        for a in (1, 3, 5):
            v = full[:a]
            leaf = v.detach().requires_grad_()
            assert v.data_ptr() == full.data_ptr() == leaf.data_ptr(), f"params[{name!r}][:{a}] is not a view"
    w = net.params["0.weight"]  # (M, out, in, 3, 3), storage (M, out, 3, 3, in)
    for a in (1, 2, 5):
        g = w[:a].reshape((a * w.shape[1],) + tuple(w.shape[2:]))
        assert g.data_ptr() == w.data_ptr() and g.is_contiguous(memory_format=torch.channels_last)
        assert g.untyped_storage().data_ptr() == w.untyped_storage().data_ptr()


@pytest.mark.parametrize("conv", ["cudnn", "gemm"])
def test_grouped_forward_matches_plain_models(conv):
    torch.manual_seed(0)
    models = [vgg11(width=WIDTH, seed=s).double() for s in range(3)]
    net = GroupedNetwork(models[0], 3, device="cpu", dtype=torch.float64, conv=conv)
    for j, m in enumerate(models):
        for n, p in m.named_parameters():
            net.params[n][j].copy_(p)
    x = torch.randn(3, 4, 32, 32, 3, dtype=torch.float64)  # (a, B, H, W, C)
    xg = net.image_input(x[:2].permute(1, 2, 3, 0, 4).contiguous())
    out = net.forward(net.prefix(2), xg, 2)
    for j in range(2):
        ref = models[j].eval()(x[j].permute(0, 3, 1, 2))
        assert torch.allclose(out[j], ref, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- convolutions as batched matrix products
@pytest.mark.parametrize("kernel, padding, bias", [((3, 3), (1, 1), True), ((1, 1), (0, 0), True),
                                                   ((5, 3), (2, 0), False), ((2, 2), (1, 1), True)])
def test_stacked_conv2d_is_each_models_conv2d(kernel, padding, bias):
    """im2col + bmm (fedlib.engines.im2col) = F.conv2d of every model on its own batch, and its
    hand-written backward (col2im) passes torch.autograd.gradcheck."""
    from fedlib.engines.im2col import stacked_conv2d

    g = torch.Generator().manual_seed(sum(kernel) * 10 + sum(padding))
    a, b, h, w, c, out = 3, 2, 7, 6, 4, 5
    x = torch.randn(a, b, h, w, c, dtype=torch.float64, generator=g, requires_grad=True)
    wt = torch.randn(a, out, *kernel, c, dtype=torch.float64, generator=g, requires_grad=True)  # (a, out, kh, kw, in)
    bs = torch.randn(a, out, dtype=torch.float64, generator=g, requires_grad=True) if bias else None
    y = stacked_conv2d(x, wt, bs, padding)
    for j in range(a):
        ref = F.conv2d(x[j].permute(0, 3, 1, 2), wt[j].permute(0, 3, 1, 2), None if bs is None else bs[j],
                       padding=padding).permute(0, 2, 3, 1)
        assert y[j].shape == ref.shape and torch.allclose(y[j], ref, rtol=1e-12, atol=1e-12)
    inputs = (x, wt) + ((bs,) if bias else ())
    assert torch.autograd.gradcheck(lambda *t: stacked_conv2d(t[0], t[1], t[2] if bias else None, padding), inputs)


def test_stacked_conv2d_refuses_what_it_cannot_do():
    """Double backward raises (the saved im2col columns carry no graph: second derivatives came out
    silently wrong, 49% relative error against F.conv2d's); an int padding means the same on both axes;
    a bad padding or pooling kind is refused by name (kind "min" ran avg-pooling)."""
    from fedlib.engines.im2col import stacked_conv2d, stacked_pool2d

    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 2, 5, 5, 3, dtype=torch.float64, generator=g, requires_grad=True)
    wt = torch.randn(2, 4, 3, 3, 3, dtype=torch.float64, generator=g, requires_grad=True)
    y = stacked_conv2d(x, wt, None, (1, 1))
    with pytest.raises(RuntimeError, match="no second derivatives"):
        torch.autograd.grad(y.square().sum(), x, create_graph=True)
    gx, = torch.autograd.grad(y.square().sum(), x)  # first derivatives as before
    assert gx.shape == x.shape and not gx.requires_grad
    assert torch.equal(stacked_conv2d(x, wt, None, 1), y)
    for bad in ((1,), (1, -1), "same", (1.5, 1), None):
        with pytest.raises(ValueError, match="padding must be"):
            stacked_conv2d(x, wt, None, bad)
    with pytest.raises(ValueError, match="kind must be 'max' or 'avg'"):
        stacked_pool2d(y, "min", kernel_size=2)


def test_random_crop_flip_refuses_channels_first_images():
    """random_crop_flip takes (N, H, W, C) uint8; an (N, 3, 32, 32) batch was read as 3 rows of 32 channels
    and came back 81% zeros without an error."""
    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (4, 32, 32, 3), dtype=torch.uint8, generator=g)
    assert random_crop_flip(images, g).shape == images.shape
    with pytest.raises(ValueError, match=r"channels-last.*permute\(0, 2, 3, 1\)"):
        random_crop_flip(images.permute(0, 3, 1, 2), g)
    with pytest.raises(ValueError, match="uint8"):
        random_crop_flip(images.float(), g)


def test_stacked_conv2d_bf16_autocast_and_pooling():
    """Under autocast the products run in bf16 (output bf16, close to float32) and the float32
    inputs get float32 gradients; stacked pooling is each model's pooling."""
    from fedlib.engines.im2col import stacked_conv2d, stacked_pool2d

    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 3, 8, 8, 6, generator=g, requires_grad=True)
    wt = torch.randn(2, 4, 3, 3, 6, generator=g, requires_grad=True)
    bs = torch.randn(2, 4, generator=g, requires_grad=True)
    ref = stacked_conv2d(x, wt, bs, (1, 1)).detach()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = stacked_conv2d(x, wt, bs, (1, 1))
    assert y.dtype == torch.bfloat16 and ref.dtype == torch.float32
    rel = float((y.detach().float() - ref).norm() / ref.norm())
    assert 0 < rel < 2e-2, rel
    y.float().square().sum().backward()
    assert x.grad.dtype == wt.grad.dtype == bs.grad.dtype == torch.float32
    for kind, fn in (("max", F.max_pool2d), ("avg", F.avg_pool2d)):
        got = stacked_pool2d(ref, kind, kernel_size=2, stride=2)
        for j in range(2):
            want = fn(ref[j].permute(0, 3, 1, 2), kernel_size=2, stride=2).permute(0, 2, 3, 1)
            assert torch.equal(got[j], want)


def test_gemm_network_with_image_dropout_avgpool_and_no_bias_matches_cudnn():
    """A network with every layer kind the gemm forward handles (dropout before Flatten, average
    pooling, a convolution without bias): same logits and gradients as the grouped convolutions."""
    torch.manual_seed(2)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, bias=False), nn.ReLU(), nn.Dropout(0.3),
                          nn.Conv2d(4, 6, 3, padding=(0, 1)), nn.AvgPool2d(2), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Dropout(0.2), nn.Linear(6 * 1 * 2, 5))
    a, bsz = 3, 2
    nets = {c: GroupedNetwork(model, a, device="cpu", dtype=torch.float64, conv=c) for c in ("cudnn", "gemm")}
    for n, t in nets["cudnn"].params.items():
        t.copy_(torch.randn_like(t))
        nets["gemm"].params[n].copy_(t)
    x = torch.randn(bsz, 6, 9, a, 3, dtype=torch.float64)
    keys = torch.tensor([11, 12, 13])
    out = {}
    for c, net in nets.items():
        leaves = {n: t.detach().requires_grad_() for n, t in net.params.items()}
        y = net.forward(leaves, net.image_input(x), a, keys, torch.tensor(4))
        out[c] = (y, torch.autograd.grad(y.square().sum(), [leaves[n] for n in net.names]))
    assert torch.allclose(out["gemm"][0], out["cudnn"][0], rtol=1e-12, atol=1e-12)
    plain = nets["gemm"].forward(nets["gemm"].params, nets["gemm"].image_input(x), a)  # no dropout
    assert not torch.allclose(plain, out["gemm"][0])  # the dropout masks really dropped something
    for g1, g2 in zip(out["gemm"][1], out["cudnn"][1]):
        assert g1.shape == g2.shape and g1.stride() == g2.stride()  # updates run on matching layouts
        assert torch.allclose(g1, g2, rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("layers, match", [
    ([nn.Conv2d(3, 4, 3), nn.Flatten(), nn.Conv2d(4, 4, 1)], "Conv2d after Flatten"),
    ([nn.Conv2d(3, 4, 3, groups=1, padding_mode="reflect"), nn.Flatten(), nn.Linear(4, 2)], "padding_mode='zeros'"),
    ([nn.Conv2d(3, 4, 3), nn.Linear(4, 2), nn.Flatten()], "Linear before Flatten"),
    ([nn.Conv2d(3, 4, 3), nn.Flatten(), nn.MaxPool2d(2), nn.Linear(4, 2)], "pooling after Flatten"),
    ([nn.Conv2d(3, 4, 3), nn.MaxPool2d(2, return_indices=True), nn.Flatten(), nn.Linear(4, 2)], "return_indices"),
    ([nn.Conv2d(3, 4, 3), nn.Flatten(), nn.Flatten(), nn.Linear(4, 2)], "only one Flatten"),
    ([nn.Conv2d(3, 4, 3), nn.Flatten(start_dim=2), nn.Linear(4, 2)], "only one Flatten"),
    ([nn.Conv2d(3, 4, 3), nn.ReLU()], "ends with Flatten"),
    ([nn.Flatten(), nn.Linear(12, 2)], "must contain a Conv2d before Flatten"),
    ([nn.Conv2d(3, 4, 3), nn.Tanh(), nn.Flatten(), nn.Linear(4, 2)], "Tanh; the grouped path supports only"),
    ([nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4, 2)], r"has buffers \['1.running_mean'"),
])
def test_grouped_network_refuses_layouts_it_cannot_stack(layers, match):
    """Every network the grouped path cannot turn into grouped layers is refused by name at construction
    (never mis-stacked), each with the offending layer and what to do."""
    with pytest.raises(ValueError, match=match):
        GroupedNetwork(nn.Sequential(*layers), 2, device="cpu")
    with pytest.raises(ValueError, match="num_models must be an integer >= 1"):
        GroupedNetwork(nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten(), nn.Linear(4, 2)), 0, device="cpu")


def test_grouped_parameters_outside_the_layers_are_refused():
    """A parameter the grouped layers do not carry (here one registered on the container) would silently
    stay untrained: refused by name."""
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten(), nn.Linear(4, 2))
    model.register_parameter("scale", nn.Parameter(torch.ones(1)))
    with pytest.raises(ValueError, match=r"parameters \['scale'\] are not covered"):
        GroupedNetwork(model, 2, device="cpu")


@pytest.mark.parametrize("conv", ["cudnn", "gemm"])
def test_grouped_linear_without_bias_is_each_models_linear(conv):
    """Linear layers without bias (the bmm branch) give each model's own logits."""
    g = torch.Generator().manual_seed(4)
    models = [nn.Sequential(nn.Conv2d(3, 2, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(2 * 5 * 4, 6, bias=False),
                            nn.ReLU(), nn.Linear(6, 3, bias=False)).double() for _ in range(3)]
    net = GroupedNetwork(models[0], 3, device="cpu", dtype=torch.float64, conv=conv)
    _assert_grouped_is_each_model(net, models, g)


def _assert_grouped_is_each_model(net, models, g):
    """Random weights for each model, copied into ``net``'s rows; on a random batch of 2 images of 5x4x3 per
    model, ``net``'s logits are each model's own (float64, 1e-12)."""
    for j, m in enumerate(models):
        for n, p in m.named_parameters():
            with torch.no_grad():
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64))
            net.params[n][j].copy_(p.detach())
    a = len(models)
    x = torch.randn(a, 2, 5, 4, 3, dtype=torch.float64, generator=g)  # (a, B, H, W, C)
    out = net.forward(net.params, net.image_input(x.permute(1, 2, 3, 0, 4).contiguous()), a)
    for j, m in enumerate(models):
        assert torch.allclose(out[j], m(x[j].permute(0, 3, 1, 2)), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("conv", ["cudnn", "gemm"])
def test_grouped_network_passes_identity_layers_through(conv):
    """nn.Identity layers (one among the image layers, one among the vector layers) are accepted by the
    grouped path and change nothing: each model's logits are its plain forward's; the layer list holds no
    entry for them."""
    g = torch.Generator().manual_seed(5)
    models = [nn.Sequential(nn.Conv2d(3, 2, 3, padding=1), nn.Identity(), nn.ReLU(), nn.Flatten(), nn.Identity(),
                            nn.Linear(2 * 5 * 4, 3)).double() for _ in range(2)]
    net = GroupedNetwork(models[0], 2, device="cpu", dtype=torch.float64, conv=conv)
    assert [layer.kind for layer in net.layers] == ["conv", "relu", "flatten", "linear"]
    _assert_grouped_is_each_model(net, models, g)


def test_gemm_refuses_what_it_cannot_compute(model, data):
    run = RunSpec(make_algorithm("fedavg", sgd(0.05)), _clients(0, [4, 4]), FixedEpochs([4, 4], B, 1))
    with pytest.raises(ValueError, match="conv must be one of"):
        GroupedNetwork(model, 2, device="cpu", conv="winograd")
    with pytest.raises(ValueError, match="channels_last=True"):
        GroupedNetwork(model, 2, device="cpu", conv="gemm", channels_last=False)
    strided = nn.Sequential(nn.Conv2d(3, 4, 3, stride=2), nn.Flatten(), nn.Linear(4 * 15 * 15, 10))
    with pytest.raises(ValueError, match="stride 1.*use conv='cudnn'"):
        GroupedNetwork(strided, 2, device="cpu", conv="gemm")
    GroupedNetwork(strided, 2, device="cpu")  # fine with the grouped convolutions
    with pytest.raises(ValueError, match="setting of path='grouped'"):
        StackedEngine(model, data, [run], rounds=1, batch_size=B, path="vmap", conv="gemm")


# ---------------------------------------------------------------- augmentation & dropout
def test_augmentation_deterministic_and_seeded():
    a = client_augment_params(0, 1, 2, 5, 8)
    b = client_augment_params(0, 1, 2, 5, 8)
    c = client_augment_params(1, 1, 2, 5, 8)
    d = client_augment_params(0, 2, 2, 5, 8)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not all(torch.equal(x, y) for x, y in zip(a, c))
    assert not all(torch.equal(x, y) for x, y in zip(a, d))
    dy, dx, fl = a
    assert dy.min() >= 0 and dy.max() <= 8 and set(fl.unique().tolist()) <= {0, 1}
    imgs = torch.randint(0, 256, (6, 32, 32, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    g1, g2, g3 = (torch.Generator().manual_seed(s) for s in (5, 5, 6))
    assert torch.equal(random_crop_flip(imgs, g1), random_crop_flip(imgs, g2))
    assert not torch.equal(random_crop_flip(imgs, torch.Generator().manual_seed(5)), random_crop_flip(imgs, g3))


def test_crop_flip_matches_torch_ops():
    imgs = torch.randint(0, 256, (4, 32, 32, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    dy, dx, fl = crop_flip_params(torch.Generator().manual_seed(2), (4,), 4)
    out = crop_flip_gather(pad_images(imgs, 4), torch.arange(4), dy, dx, fl, (32, 32))
    padded = F.pad(imgs.permute(0, 3, 1, 2), (4, 4, 4, 4))  # zero padding, NCHW
    for n in range(4):
        crop = padded[n, :, dy[n]:dy[n] + 32, dx[n]:dx[n] + 32]
        if fl[n]:
            crop = crop.flip(-1)
        assert torch.equal(out[n], crop.permute(1, 2, 0))
    # (B, M) samples laid out (B, H, W, M, C) equals the plain layout permuted
    idx = torch.tensor([[0, 1, 2], [3, 2, 1]])
    dy2, dx2, fl2 = crop_flip_params(torch.Generator().manual_seed(3), (2, 3), 4)
    a = crop_flip_gather(pad_images(imgs, 4), idx, dy2, dx2, fl2, (32, 32), batch_last=True)
    b = crop_flip_gather(pad_images(imgs, 4), idx, dy2, dx2, fl2, (32, 32))
    assert torch.equal(a, b.permute(0, 2, 3, 1, 4))



@pytest.mark.parametrize("value", ["no", 1, None])
def test_crop_flip_gather_batch_last_must_be_true_or_false(value):
    """Before: batch_last='no' (truthy) laid the result out (B, H, W, M, C) and 0 or None the plain way, without a
    word. np.bool_ is taken (check_flag), with the same images."""
    imgs = torch.randint(0, 256, (4, 8, 8, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    idx = torch.tensor([[0, 1, 2], [3, 2, 1]])
    dy, dx, fl = crop_flip_params(torch.Generator().manual_seed(3), (2, 3), 2)
    with pytest.raises(ValueError, match=rf"^batch_last must be True or False, got {value!r}$"):
        crop_flip_gather(pad_images(imgs, 2), idx, dy, dx, fl, (8, 8), batch_last=value)
    for flag in (True, False):
        assert torch.equal(crop_flip_gather(pad_images(imgs, 2), idx, dy, dx, fl, (8, 8), batch_last=np.bool_(flag)),
                           crop_flip_gather(pad_images(imgs, 2), idx, dy, dx, fl, (8, 8), batch_last=flag))

def test_seeded_dropout_mask():
    keys = torch.tensor([dropout_key(0, 0, c) for c in range(3)])
    m = seeded_dropout_mask(keys, 4, 0, (32, 512), 0.5, torch.float64)
    assert m.shape == (3, 32, 512)
    assert set(m.unique().tolist()) == {0.0, 2.0}
    assert abs(float((m == 0).double().mean()) - 0.5) < 0.01
    assert not torch.equal(m[0], m[1])
    assert torch.equal(m, seeded_dropout_mask(keys, torch.tensor(4), 0, (32, 512), 0.5, torch.float64))
    assert not torch.equal(m, seeded_dropout_mask(keys, 5, 0, (32, 512), 0.5, torch.float64))
    assert not torch.equal(m, seeded_dropout_mask(keys, 4, 1, (32, 512), 0.5, torch.float64))
    single = seeded_dropout_mask(keys[1], 4, 0, (32, 512), 0.5, torch.float64)
    assert torch.equal(single, m[1])
    vm = torch.func.vmap(lambda k: seeded_dropout_mask(k, torch.tensor(4), 0, (32, 512), 0.5, torch.float64))(keys)
    assert torch.equal(vm, m)


def test_batch_plan():
    pos, counts = client_batch_plan(3, 1, 2, 10, 7, 4)  # spe 3, epochs needed 3
    assert pos.shape == (7, 4) and counts.tolist() == [4, 4, 2, 4, 4, 2, 4]
    for e in range(2):
        ep = np.concatenate([pos[3 * e + b, :counts[3 * e + b]] for b in range(3)])
        assert sorted(ep.tolist()) == list(range(10))
    assert not np.array_equal(pos[:3], pos[3:6])
    assert np.array_equal(client_batch_plan(3, 1, 2, 10, 7, 4)[0], pos)
    assert not np.array_equal(client_batch_plan(3, 2, 2, 10, 7, 4)[0], pos)
    assert np.array_equal(client_batch_plan(3, 1, 2, 10, 4, 4)[0], pos[:4])


def test_online_a_norms_match_closed_forms():
    s = momentum_proximal_sgd(0.05, 0.9, mu=0.3)
    a = online_a_norms(s, 12)
    np.testing.assert_allclose(a, [s.a_norm(k) for k in range(1, 13)], rtol=1e-12)



@pytest.mark.parametrize("solver", ["sgd", 0.05, None])
def test_online_a_norms_names_a_solver_that_is_no_local_solver(solver):
    """Before: online_a_norms("sgd", 3) was Python's AttributeError ("'str' object has no attribute
    'online_a_norms'"), naming no argument; the message is the one FederatedAlgorithm gives."""
    with pytest.raises(ValueError, match=rf"^solver must be a fedlib\.solvers\.LocalSolver, got {type(solver).__name__}$"):
        online_a_norms(solver, 3)
    assert online_a_norms(sgd(0.1), 3).tolist() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize("got, want, message", [
    ([1.0], {"a": torch.ones(2)}, r"got must be a mapping of parameter name -> torch\.Tensor, got list"),
    ({"a": torch.ones(2)}, torch.ones(2), r"want must be a mapping of parameter name -> torch\.Tensor, got Tensor"),
    ({"a": torch.ones(2)}, {}, r"want is empty: it must name at least one tensor"),
    ({"b": torch.ones(2)}, {"a": torch.ones(2)}, r"got lacks the tensor\(s\) \['a'\] of want \(every name of want "
                                                 r"must be in got\)"),
    ({"a": np.ones(2)}, {"a": torch.ones(2)}, r"got\['a'\] must be a torch\.Tensor, got ndarray"),
    ({"a": torch.ones(2)}, {"a": 1.0}, r"want\['a'\] must be a torch\.Tensor, got float"),
    ({"a": torch.ones(1)}, {"a": torch.ones(2)}, r"got\['a'\] has shape \(1,\), want\['a'\] \(2,\)"),
    ({"a": torch.ones(3)}, {"a": torch.ones(2)}, r"got\['a'\] has shape \(3,\), want\['a'\] \(2,\)"),
])
def test_max_relative_difference_names_arguments_of_another_type(got, want, message):
    """Before: a list was Python's TypeError ('list indices must be integers or slices, not str'), a missing name a
    bare KeyError ('a'; a tensor want: KeyError tensor(1.)), a numpy array an AttributeError ("'numpy.ndarray' object
    has no attribute 'to'"), a float ("'float' object has no attribute 'device'"), an empty want "max() arg is an
    empty sequence", a (3,) got torch's broadcasting RuntimeError, and a (1,) got was broadcast against every entry
    of want without a word."""
    with pytest.raises(ValueError, match=f"^{message}$"):
        max_relative_difference(got, want)
    got, want = {"a": torch.tensor([1.0, 2.1], dtype=torch.float64)}, {"a": torch.tensor([1.0, 2.0], dtype=torch.float64)}
    assert max_relative_difference(got, want) == pytest.approx(0.05, rel=1e-12)

# ---------------------------------------------------------------- guards
def test_clear_errors(model, data):
    run = RunSpec(make_algorithm("fedavg", sgd(0.05)), _clients(0, [4, 4]), FixedEpochs([4, 4], B, 1))
    with pytest.raises(ValueError, match="precision"):
        StackedEngine(model, data, [run], rounds=1, batch_size=B, precision="fp16")
    with pytest.raises(ValueError, match="bf16.*float32"):
        StackedEngine(model, data, [run], rounds=1, batch_size=B, precision="bf16", dtype=torch.float64)
    with pytest.raises(ValueError, match="cuda_graph.*CUDA"):
        StackedEngine(model, data, [run], rounds=1, batch_size=B, cuda_graph=True)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            StackedEngine(model, data, [run], rounds=1, batch_size=B, device="cuda")
    with pytest.raises(ValueError, match="path"):
        StackedEngine(model, data, [run], rounds=1, batch_size=B, path="fast")
    bn = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                       nn.Flatten(), nn.Linear(4, 10))
    for path in ("grouped", "vmap"):
        with pytest.raises(ValueError, match="BatchNorm|buffers"):
            StackedEngine(bn, data, [run], rounds=1, batch_size=B, path=path)
    with pytest.raises(ValueError, match="AdaptiveAvgPool2d.*vmap"):
        StackedEngine(nn.Sequential(nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 10)),
                      data, [run], rounds=1, batch_size=B)


def test_divergence_names_round_and_run(model, data):
    ok = RunSpec(make_algorithm("fedavg", sgd(0.01)), _clients(0, [8, 8]), FixedEpochs([8, 8], B, 2), name="fine")
    bad = RunSpec(make_algorithm("fedavg", sgd(1e12)), _clients(0, [8, 8]), FixedEpochs([8, 8], B, 2), name="blowup")
    eng = StackedEngine(model, data, [ok, bad], rounds=2, batch_size=B, augment=False)
    with pytest.raises(FloatingPointError, match=r"round [01], run 1 \(blowup\)"):
        eng.train()


class _CustomNet(nn.Module):
    """Not a Sequential: only the vmap path can train it."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 5, stride=4)
        self.drop = nn.Dropout(0.3)
        self.fc = nn.Linear(4 * 7 * 7, 10)

    def forward(self, x):
        return self.fc(self.drop(torch.tanh(self.conv(x)).flatten(1)))


def test_vmap_path_trains_any_module(data):
    torch.manual_seed(0)
    net = _CustomNet()
    sizes = [5, 9]
    run = RunSpec(make_algorithm("scaffold", momentum_sgd(0.05, 0.9)), _clients(3, sizes), FixedEpochs(sizes, B, 1),
                  seed=2, params={n: p.detach().double() for n, p in net.named_parameters()})
    with pytest.raises(ValueError, match="Sequential"):
        StackedEngine(net, data, [run], rounds=2, batch_size=B)
    eng = StackedEngine(net, data, [run], rounds=2, path="vmap", dtype=torch.float64, batch_size=B)
    eng.train()

    def fwd(params, x, key, step):  # the same module with the engine's dropout masks
        h = torch.tanh(F.conv2d(x, params["conv.weight"], params["conv.bias"], stride=4)).flatten(1)
        h = h * seeded_dropout_mask(key, step, 0, h.shape, 0.3, h.dtype)
        return F.linear(h, params["fc.weight"], params["fc.bias"])

    imgs, labels = torch.as_tensor(data.train_images), torch.as_tensor(data.train_labels)
    padded = pad_images(imgs, 4)
    mean, std = torch.tensor(CIFAR10_MEAN, dtype=torch.float64), torch.tensor(CIFAR10_STD, dtype=torch.float64)
    grad = torch.func.grad(lambda p, x, y, k, s: F.cross_entropy(fwd(p, x, k, s), y))

    def grad_fn(params, client, t, k):
        tau = int(run.schedule.local_steps(t)[client])
        pos, counts = client_batch_plan(run.seed, t, client, sizes[client], tau, B)
        dy, dx, fl = (a[k, :counts[k]] for a in client_augment_params(run.seed, t, client, tau, B, 4))
        idx = torch.as_tensor(run.clients[client][pos[k, :counts[k]]])
        x = normalize(crop_flip_gather(padded, idx, dy, dx, fl, (32, 32)), mean, std, torch.float64)
        key = torch.tensor(dropout_key(run.seed, t, client))
        return grad(params, x.permute(0, 3, 1, 2), labels[idx], key, torch.tensor(k))

    p = np.array(sizes) / sum(sizes)
    ref = run_sequential(run.algorithm, dict(run.params), grad_fn, p, run.schedule, 2,
                         lr_at=lambda t: step_decay_lr(0.05, t, 2))
    assert _max_rel(eng.params(0), ref.state.params) < 1e-10
    # the library's reference does the same for any module, with dropout and without
    assert _max_rel(eng.params(0), reference_run(net, data, run, rounds=2, batch_size=B).state.params) < 1e-10
    plain = StackedEngine(net, data, [run], rounds=2, path="vmap", dtype=torch.float64, batch_size=B, dropout=False)
    plain.train()
    ref = reference_run(net, data, run, rounds=2, batch_size=B, dropout=False)
    assert _max_rel(plain.params(0), ref.state.params) < 1e-10
    assert _max_rel(plain.params(0), eng.params(0)) > 1e-6  # dropout really changed the engine's run


class _Unbounded:
    """A schedule the engine knows no bound for (its step tables must grow)."""

    def __init__(self, inner):
        self.inner = inner

    def local_steps(self, t):
        return self.inner.local_steps(t) + t  # grows every round


@pytest.mark.parametrize("bounded", [True, False])
def test_cuda_graph_bookkeeping_with_fake_graphs(monkeypatch, model, data, bounded):
    """The graph path's control flow on the CPU: fake graphs whose capture records the step
    without executing it (state snapshot + restore, like a real capture) and whose replay
    runs it. Must equal the eager engine bitwise; with a bounded schedule one capture per
    prefix size, reused across rounds; growing tables drop and recapture graphs."""
    sizes = [9, 5, 3, 6]
    sched = RandomEpochs(sizes, B, 1, 3, seed=1)
    run = RunSpec(make_algorithm("fednova", momentum_sgd(0.02, 0.9, weight_decay=1e-4)), _clients(11, sizes),
                  sched if bounded else _Unbounded(sched), seed=4, params=_params64(2))
    kw = dict(rounds=3, path="grouped", dtype=torch.float64, batch_size=B, graph_min_steps=2)
    eager = StackedEngine(model, data, [run], **kw)
    eager.train()
    eng = StackedEngine(model, data, [run], **kw)
    eng.cuda_graph = True
    real_step = eng._step
    captures, current = [], {"graph": None}

    def tensors():
        out = list(eng.x.values()) + list((eng.u or {}).values()) + [eng._loss_sum, eng._k]
        return out

    class Graph:
        a = None

        def replay(self):
            real_step(self.a)

    class Capture:
        def __init__(self, g, pool=None, stream=None):
            self.g = g

        def __enter__(self):
            self.snap = [t.clone() for t in tensors()]
            current["graph"] = self.g
            captures.append(self.g)

        def __exit__(self, *exc):
            for t, s in zip(tensors(), self.snap):
                t.copy_(s)
            current["graph"] = None

    class Stream:
        def wait_stream(self, other):
            pass

    def step(a):
        if current["graph"] is not None:
            current["graph"].a = a
        real_step(a)

    eng._step = step
    monkeypatch.setattr(torch.cuda, "CUDAGraph", Graph)
    monkeypatch.setattr(torch.cuda, "graph", Capture)
    monkeypatch.setattr(torch.cuda, "Stream", lambda device=None: Stream())
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: Stream())
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "graph_pool_handle", lambda: None)
    eng.train()
    for n in eng.names:
        assert torch.equal(eng.params(0)[n], eager.params(0)[n])
    if bounded:
        assert len(captures) == len(eng._graphs) >= 2  # captured once per prefix size, reused across rounds
    else:
        assert len(captures) > len(eng._graphs) >= 1 and eng._tau_cap >= 3 * 3 + 2
    assert all(g.a is not None for g in captures)
    sizes_used = {a for rnd in range(3) for a, n in eng._plan(rnd).segments if n >= 2}
    assert set(eng._graphs) <= sizes_used


# ---------------------------------------------------------------- devices (CUDA parts run only on a GPU)
# the CUDA cases carry the `cuda` mark: `pytest -m cuda` runs just them (scripts/gpu_run.sh)
DEVICES = ["cpu"] + ([pytest.param("cuda", marks=pytest.mark.cuda)] if torch.cuda.is_available() else [])


def _device_runs():
    sizes = [9, 5, 3, 6]
    return [
        RunSpec(make_algorithm("fednova", momentum_sgd(0.02, 0.9, weight_decay=1e-4)), _clients(3, sizes),
                RandomEpochs(sizes, B, 1, 3, seed=1), seed=4, params=_params64(2)),
        RunSpec(make_algorithm("scaffold", proximal_sgd(0.05, mu=0.1)), _clients(50, sizes),
                FixedEpochs(sizes, B, 2), seed=5, params=_params64(3)),
    ]


@pytest.mark.parametrize("path", list(VARIANTS))
@pytest.mark.parametrize("device", DEVICES)
def test_device_and_cuda_graph_match_cpu(device, path, model, data):
    """float64: the engine on ``device`` (eager, and with CUDA graphs on a GPU) equals the CPU engine."""
    kw = dict(rounds=3, **VARIANTS[path], dtype=torch.float64, batch_size=B, eval_batch_size=20)
    cpu = StackedEngine(model, data, _device_runs(), **kw)
    cpu.train()
    for extra in [{}] + ([{"cuda_graph": True}] if device == "cuda" else []):
        eng = StackedEngine(model, data, _device_runs(), device=device, **kw, **extra)
        eng.train()
        for r in range(2):
            got = {n: t.cpu() for n, t in eng.params(r).items()}
            assert _max_rel(got, cpu.params(r)) < 1e-9, (device, extra, r)
            assert eng.history[-1][r].test_accuracy == cpu.history[-1][r].test_accuracy
        if extra:
            assert len(eng._graphs) >= 2


@pytest.mark.parametrize("path", list(VARIANTS))
@pytest.mark.parametrize("device", DEVICES)
def test_bf16_autocast_near_float32(device, path, model, data):
    """bf16 autocast (Table 1's GPU mode; on the CPU too, so CI runs the path): float32
    master parameters, finite, within bf16 rounding of the float32 engine after 2 rounds;
    on a GPU also float32 eager = float32 CUDA graph and bf16 eager = bf16 CUDA graph."""
    kw = dict(rounds=2, **VARIANTS[path], device=device, batch_size=B, eval_batch_size=20)
    runs = _device_runs()
    eager = StackedEngine(model, data, runs, **kw)
    eager.train()
    bf16 = StackedEngine(model, data, runs, precision="bf16", **kw)
    bf16.train()
    for r in range(2):
        ref = {n: t.double() for n, t in eager.params(r).items()}
        half = {n: t.double() for n, t in bf16.params(r).items()}
        assert all(t.dtype == torch.float32 for t in bf16.params(r).values())
        assert all(torch.isfinite(t).all() for t in half.values())
        rel = _global_rel(half, ref)
        assert 0 < rel < 1e-2, rel  # bf16 really ran (not bit-equal) and stayed close
        assert np.isfinite(bf16.history[-1][r].test_loss)
        assert abs(bf16.history[-1][r].train_loss - eager.history[-1][r].train_loss) < 0.05
    if device == "cuda":
        graph = StackedEngine(model, data, runs, cuda_graph=True, **kw)
        graph.train()
        bf16_graph = StackedEngine(model, data, runs, cuda_graph=True, precision="bf16", **kw)
        bf16_graph.train()
        for r in range(2):
            ref = {n: t.double() for n, t in eager.params(r).items()}
            assert _max_rel({n: t.double() for n, t in graph.params(r).items()}, ref) < 1e-4
            half = {n: t.double() for n, t in bf16.params(r).items()}
            assert _global_rel({n: t.double() for n, t in bf16_graph.params(r).items()}, half) < 1e-2


# ---------------------------------------------------------------- the library's reference, as chapter 5 uses it
def test_engine_against_reference_helper_of_chapter_5():
    """fedlib.experiments.cifar10.engine_against_reference: every engine variant, every run,
    the same models as the per-client loop (float64), the same tau_eff and weights, and the
    runs moved."""
    from fedlib.experiments.cifar10 import ENGINE_VARIANTS, engine_against_reference

    out = engine_against_reference(width=WIDTH, rounds=1, clients=2, samples_per_client=10, batch_size=4)
    assert {(r["engine"], r["run"]) for r in out["rows"]} == {(e, n) for e in ENGINE_VARIANTS for n in (
        "FedAvg, momentum", "FedNova, momentum", "FedNova-VR, SGD")}
    for r in out["rows"]:
        assert r["param_rel"] < 1e-10 and r["tau_eff_rel"] < 1e-12 and r["weights_diff"] < 1e-12, r
        assert r["moved"] > 1e-4, r
    assert out["sizes"] == [10, 10] and set(out["seconds"]) == {"per-client loop", *ENGINE_VARIANTS}


def test_reference_run_refuses_bad_inputs(model, data):
    run = RunSpec(make_algorithm("fedavg", sgd(0.05)), _clients(0, [4, 4]), FixedEpochs([4, 4], B, 1))
    with pytest.raises(ValueError, match="RunSpec"):
        reference_run(model, data, "run", rounds=1)
    with pytest.raises(ValueError, match="nn.Module"):
        reference_run(lambda x: x, data, run, rounds=1)
    with pytest.raises(ValueError, match="engine_rounds"):
        reference_run(model, data, run, rounds=3, engine_rounds=2)
    with pytest.raises(ValueError, match="Dropout2d"):
        reference_run(nn.Sequential(nn.Conv2d(3, 2, 3), nn.Dropout2d(0.1), nn.Flatten(), nn.Linear(2 * 30 * 30, 10)),
                      data, run, rounds=1)

    class Floats:
        train_images = np.zeros((8, 32, 32, 3), dtype=np.float32)
        train_labels = np.zeros(8, dtype=np.int64)

    with pytest.raises(ValueError, match="uint8"):
        reference_run(model, Floats, run, rounds=1)


def test_inputs_that_would_be_truncated_or_mismatched_are_refused(model, data):
    """Float client indices (truncated), a boolean mask (read as 0/1), float labels (truncated),
    a test label count that differs from the test images: refused at construction."""
    algo = make_algorithm("fedavg", sgd(0.05))
    clients = _clients(0, [4, 4])
    for bad in ([c.astype(float) + 0.7 for c in clients], [np.ones(8, dtype=bool)] * 2):
        run = RunSpec(algo, bad, FixedEpochs([4, 4], B, 1))
        with pytest.raises(ValueError, match=r"runs\[0\].clients\[0\] must hold integer sample indices"):
            StackedEngine(model, data, [run], rounds=1, batch_size=B)
    run = RunSpec(algo, clients, FixedEpochs([4, 4], B, 1))

    class Odd(_Data):
        pass

    odd = Odd(load_cifar10_sample())
    odd.train_labels = odd.train_labels.astype(float) + 0.5
    with pytest.raises(ValueError, match="data.train_labels must hold integer class labels"):
        StackedEngine(model, odd, [run], rounds=1, batch_size=B)
    odd = Odd(load_cifar10_sample())
    odd.test_labels = odd.test_labels[:-1]
    with pytest.raises(ValueError, match="data.test_labels must hold one label per test image"):
        StackedEngine(model, odd, [run], rounds=1, batch_size=B)


def test_a_checkpoint_of_another_algorithms_state_is_refused(model, data):
    clients = _clients(0, [4, 4])
    plain = RunSpec(make_algorithm("fedavg", sgd(0.05)), clients, FixedEpochs([4, 4], B, 1))
    vr = RunSpec(make_algorithm("scaffold", sgd(0.05)), clients, FixedEpochs([4, 4], B, 1))
    eng = StackedEngine(model, data, [plain], rounds=2, dtype=torch.float64, batch_size=B)
    eng.run_round()
    with pytest.raises(ValueError, match="keeps control variates but the checkpoint has none"):
        StackedEngine(model, data, [vr], rounds=2, dtype=torch.float64, batch_size=B).load_state_dict(eng.state_dict())


def test_a_checkpoint_of_other_runs_or_another_length_is_refused(model, data):
    """load_state_dict ignored the saved run names and the number of rounds: [a, b] loaded into an
    engine of [b, a] swapped the states, and a 4-round checkpoint in a 2-round engine continued on
    another learning-rate schedule."""
    clients = _clients(0, [4, 4])

    def spec(name):
        return RunSpec(make_algorithm("fedavg", sgd(0.05)), clients, FixedEpochs([4, 4], B, 1), name=name)

    eng = StackedEngine(model, data, [spec("a"), spec("b")], rounds=4, dtype=torch.float64, batch_size=B)
    eng.run_round()
    state = eng.state_dict()
    with pytest.raises(ValueError, match=r"runs are \['a', 'b'\], the engine's \['b', 'a'\]"):
        StackedEngine(model, data, [spec("b"), spec("a")], rounds=4, dtype=torch.float64,
                      batch_size=B).load_state_dict(state)
    with pytest.raises(ValueError, match="a 4-round run, the engine runs 2 rounds"):
        StackedEngine(model, data, [spec("a"), spec("b")], rounds=2, dtype=torch.float64,
                      batch_size=B).load_state_dict(state)
    same = StackedEngine(model, data, [spec("a"), spec("b")], rounds=4, dtype=torch.float64, batch_size=B)
    same.load_state_dict(state)
    assert same.round_index == 1


def test_train_runs_refuses_unknown_precision_and_lr_decay(data):
    from fedlib.experiments.cifar10 import train_runs

    runs = [{"algorithm": make_algorithm("fedavg", sgd(0.05)), "epochs": "1", "seed": 0, "name": "a"}]
    for kwargs, name in ((dict(precision="fp16"), "precision"), (dict(lr_decay="Step"), "lr_decay")):
        with pytest.raises(ValueError, match=name):
            train_runs(runs, data, _clients(0, [4, 4]), rounds=1, width=WIDTH, **kwargs)


def test_participation_and_schedule_errors_come_at_construction(model, data):
    clients = _clients(0, [4, 4])
    bad = [RunSpec(make_algorithm("fedavg", sgd(0.05)), clients, FixedEpochs([4, 4], B, 1), clients_per_round=1),
           RunSpec(make_algorithm("fedavg", sgd(0.05)), clients, FixedEpochs([4, 4], B, 1), sampling="uniform",
                   clients_per_round=3),
           RunSpec(make_algorithm("fedavg", sgd(0.05)), clients, FixedSteps([1, 1, 1]))]
    for run, message in zip(bad, (r"runs\[0\]: clients_per_round", r"runs\[0\]: .*clients_per_round",
                                  r"^runs\[0\]\.schedule is for 3 clients but runs\[0\]\.clients has 2$")):
        with pytest.raises(ValueError, match=message):
            StackedEngine(model, data, [run], rounds=1, batch_size=B)


class _OfflineSteps:
    """Clients online in alternate rounds; a client offline in a round does no work (0 steps), as the
    "Extending fedlib" contract of a schedule allows for clients out of the round."""

    def __init__(self, m, as_float=False):
        self.m, self.as_float = m, as_float

    def online(self, t):
        return np.array([(t + i) % 2 == 0 for i in range(self.m)])

    def local_steps(self, t):
        steps = np.where(self.online(t), 1 + np.arange(self.m) % 3, 0)
        return [float(s) for s in steps] if self.as_float else steps


@pytest.mark.parametrize("as_float", [False, True], ids=["ints", "whole floats"])
def test_a_schedule_giving_clients_out_of_the_round_no_work_runs_as_the_reference(data, as_float):
    """A schedule may give 0 steps to a client the sampler leaves out (and whole numbers as floats): the reference
    loop and run_batched take it, the stacked engine refused it at construction ('runs[0].schedule.local_steps(0)
    must give 4 integers >= 1, got array([1, 0, 3, 0])'). It now checks the schedule as they do and equals the
    reference; a participant given 0 steps is still refused, naming it."""
    from fedlib.sampling import Participation

    sizes = [5, 4, 6, 3]
    schedule = _OfflineSteps(len(sizes), as_float)

    def online_clients(t):
        c = np.flatnonzero(schedule.online(t))
        return Participation(c, np.full(c.size, 1.0 / c.size))

    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 10)).double()
    run = RunSpec(make_algorithm("fednova", momentum_sgd(0.05, 0.5)), _clients(0, sizes), schedule, seed=1,
                  lr_at=lambda t: 0.05, sampling=online_clients)
    reference = reference_run(model, data, run, rounds=3, batch_size=B, augment=False, dropout=False)
    engine = StackedEngine(model, data, [run], rounds=3, path="vmap", dtype=torch.float64, batch_size=B,
                           augment=False)
    records = [engine.run_round()[0] for _ in range(3)]
    assert [r.diagnostics.clients.tolist() for r in records] == [[0, 2], [1, 3], [0, 2]]
    assert [r.diagnostics.local_steps.tolist() for r in records] == [[1, 3], [2, 1], [1, 3]]
    assert _max_rel(engine.states[0].params, reference.state.params) < 1e-12
    everyone = RunSpec(run.algorithm, run.clients, schedule, seed=1, lr_at=lambda t: 0.05)
    with pytest.raises(ValueError, match=re.escape("runs[0].schedule: round 0 gives participant client 1 0 local "
                                                   "steps (need >= 1: leave a client without work out of the round)")):
        StackedEngine(model, data, [everyone], rounds=1, path="vmap", dtype=torch.float64, batch_size=B)


class _SharedGradient(nn.Module):
    """x @ (w + dw).T: autograd hands w and dw one gradient tensor."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.w = nn.Parameter(torch.randn(10, 3 * 32 * 32, generator=g) * 0.01)
        self.dw = nn.Parameter(torch.randn(10, 3 * 32 * 32, generator=g) * 0.01)

    def forward(self, x):
        return x.flatten(1) @ (self.w + self.dw).t()


@pytest.mark.parametrize("solver", [sgd(0.05, weight_decay=0.1), proximal_sgd(0.05, mu=0.5)], ids=["wd", "prox"])
def test_vmap_path_with_a_gradient_shared_by_two_parameters(data, solver):
    """The vmap path updated gradient buffers in place (g += wd x, + mu (x - x0)); with one tensor as the
    gradient of w and dw, w's term leaked into dw's: 4.7e-3 (weight decay) and 7.4e-3 (prox) relative
    error against the per-client reference. Overlapping gradients are now copied first."""
    from fedlib.engines.stacked import _overlapping

    m = _SharedGradient()
    sizes = [6, 5]
    run = RunSpec(make_algorithm("fedavg" if solver.mu == 0 else "fedprox", solver), _clients(0, sizes),
                  FixedEpochs(sizes, B, 1), seed=1, params={n: p.detach().double() for n, p in m.named_parameters()})
    reference = reference_run(m, data, run, rounds=1, batch_size=B)
    engine = StackedEngine(m, data, [run], rounds=1, path="vmap", dtype=torch.float64, batch_size=B)
    engine.train()
    assert _max_rel(engine.states[0].params, reference.state.params) < 1e-13
    # the overlap test itself: one tensor twice, overlapping views, disjoint views of one buffer
    flat = torch.zeros(10)
    assert _overlapping({"a": flat, "b": flat}) == {"a", "b"}
    assert _overlapping({"a": flat[:6], "b": flat[4:], "c": torch.zeros(3)}) == {"a", "b"}
    assert _overlapping({"a": flat[:5], "b": flat[5:]}) == set()
    assert _overlapping({"a": flat[:8], "b": flat[1:2], "c": flat[5:6]}) == {"a", "b", "c"}


def test_train_stacked_trains_and_leaves_the_callers_parameters_alone(model, data):
    """train_stacked returns an engine that has run every round; the RunSpec's starting parameters are
    copied onto the engine (training does not write into the caller's tensors)."""
    from fedlib.engines.stacked import train_stacked

    sizes = [5, 4]
    start = _params64(2)
    kept = {n: t.clone() for n, t in start.items()}
    run = RunSpec(make_algorithm("fedavg", sgd(0.05)), _clients(0, sizes), FixedEpochs(sizes, B, 1), seed=2,
                  params=start)
    engine = train_stacked(model, data, [run], 2, dtype=torch.float64, batch_size=B, eval_batch_size=25)
    assert engine.round_index == 2 and len(engine.history) == 2  # one list of run records per round
    assert all(torch.equal(start[n], kept[n]) for n in kept)
    assert _max_rel(engine.states[0].params, kept) > 0  # it did train


@pytest.mark.parametrize("kwargs,match", [
    ({"rounds": 0}, "rounds must be an integer >= 1"),
    ({"rounds": 2, "engine_rounds": 1}, "engine_rounds must be an integer >= 2"),
    ({"rounds": 1, "batch_size": 0}, "batch_size must be an integer >= 1"),
    ({"rounds": 1, "padding": -1}, "padding must be an integer >= 0"),
    # checked as the engine checks them. Before: a short mean failed in the first batch as torch's "The size of
    # tensor a (3) must match the size of tensor b (2)"; a 1-entry std (or a number) was broadcast over the channels
    # (the engine refuses it), a 0 or NaN std made the images inf / NaN ("round 0: ... not finite (diverged)")
    ({"rounds": 1, "mean": (0.5, 0.5)}, r"^mean/std must have 3 entries \(one per channel\)"),
    ({"rounds": 1, "std": (0.5,)}, r"^mean/std must have 3 entries \(one per channel\)"),
    ({"rounds": 1, "mean": 0.5}, r"^mean/std must have 3 entries \(one per channel\)"),
    ({"rounds": 1, "std": (0.2, 0.0, 0.2)}, r"^std must be 3 finite numbers > 0 \(one per channel\)"),
    ({"rounds": 1, "mean": (0.5, float("nan"), 0.5)}, r"^mean must be 3 finite numbers \(one per channel\)"),
])
def test_reference_run_refuses_bad_arguments(model, data, kwargs, match):
    run = RunSpec(make_algorithm("fedavg", sgd(0.05)), _clients(0, [4, 4]), FixedEpochs([4, 4], B, 1))
    with pytest.raises(ValueError, match=match):
        reference_run(model, data, run, **kwargs)


@pytest.mark.parametrize("features", [np.zeros((2000, 5), dtype=np.int64), np.zeros(2000), np.zeros((1999, 5))],
                         ids=["integers", "1-d", "one row short"])
def test_reference_run_refuses_features_that_do_not_fit(model, data, features):
    """Precomputed features must be floats (N, ...) with one row per training label."""
    class WithFeatures(_Data):
        pass

    d = WithFeatures(load_cifar10_sample())
    d.train_features = features
    run = RunSpec(make_algorithm("fedavg", sgd(0.05)), _clients(0, [4, 4]), FixedEpochs([4, 4], B, 1))
    with pytest.raises(ValueError, match=r"data.train_features must be floats \(N, \.\.\.\) with one row per label"):
        reference_run(nn.Linear(5, 10), d, run, rounds=1, batch_size=B)


@pytest.mark.parametrize("path", sorted(VARIANTS))
def test_step_size_schedule_within_the_round_equals_the_reference(model, data, path):
    """A solver whose step size changes within the round (decayed SGD, eta_k = eta gamma^k, §4.1; and a
    per-round lr_at on top): every engine takes eta_k at step k and reports ||a_i||_1 = (1 - gamma^tau)/(1 - gamma),
    as the per-client loop does (the engine's per-step lr table had no test with a schedule)."""
    from fedlib.solvers import decayed_sgd

    sizes = [6, 3]
    solver = decayed_sgd(0.05, gamma=0.7, weight_decay=1e-4)
    run = RunSpec(make_algorithm("fednova", solver), _clients(11, sizes), RandomEpochs(sizes, B, 1, 2, seed=8), seed=3,
                  params=_params64(5), lr_at=lambda t: 0.05 * 0.5 ** t)
    ref = _reference(model, data, run, augment=True, dropout=True, rounds=2, engine_rounds=2)
    eng = StackedEngine(model, data, [run], rounds=2, **VARIANTS[path], batch_size=B, dtype=torch.float64)
    eng.train()
    assert _max_rel(eng.params(0), ref.state.params) < 1e-11
    for t in range(2):
        diag = eng.history[t][0].diagnostics
        a_norms = (1 - 0.7 ** diag.local_steps) / 0.3
        np.testing.assert_allclose(diag.a_norms, a_norms, rtol=1e-12)
        assert diag.tau_eff == pytest.approx(float(run_p(run) @ a_norms), rel=1e-12)
    constant = RunSpec(make_algorithm("fednova", sgd(0.05, weight_decay=1e-4)), run.clients, run.schedule, seed=3,
                       params=_params64(5), lr_at=run.lr_at)
    other = StackedEngine(model, data, [constant], rounds=1, **VARIANTS[path], batch_size=B, dtype=torch.float64)
    other.train()
    assert _max_rel(other.params(0), eng.states[0].params) > 1e-6  # the schedule changed the steps


def run_p(run):
    sizes = np.array([len(c) for c in run.clients], dtype=float)
    return sizes / sizes.sum()


def _one_run(**change):
    spec = dict(algorithm=make_algorithm("fedavg", sgd(0.05)), clients=_clients(0, [4, 4]),
                schedule=FixedEpochs([4, 4], B, 1))
    spec.update(change)
    return RunSpec(**spec)


class _Images:
    def __init__(self, data, **change):
        self.train_images, self.train_labels = data.train_images[:50], data.train_labels[:50]
        self.test_images, self.test_labels = data.test_images[:10], data.test_labels[:10]
        self.__dict__.update(change)


@pytest.mark.parametrize("case, match", [
    (dict(device="tpu:0"), "device: not a torch device"),
    (dict(dtype=torch.float16), "dtype must be torch.float32 or torch.float64"),
    (dict(model="vgg11"), "model must be a torch.nn.Module"),
    (dict(runs=[]), "runs must be a non-empty list of RunSpec"),
    (dict(runs=["fedavg"]), "runs must be a non-empty list of RunSpec"),
    (dict(data=dict(train_labels=np.zeros(49, np.int64))), "train_labels must hold one label per image"),
    (dict(data=dict(test_labels=np.zeros(9, np.int64))), "test_labels must hold one label per test image"),
    (dict(data=dict(test_images=np.zeros((10, 32, 32, 3), np.float32))), "test_images must be uint8"),
    (dict(mean=(0.5, 0.5)), "mean/std must have 3 entries"),
    (dict(std=(0.2, 0.0, 0.2)), r"^std must be 3 finite numbers > 0"),  # before: accepted, images inf
    (dict(std=(0.2, float("inf"), 0.2)), r"^std must be 3 finite numbers > 0"),
    (dict(mean=("a", 0.5, 0.5)), r"^mean must be 3 finite numbers"),  # before: torch's "too many dimensions 'str'"
    (dict(run=dict(algorithm="fedavg")), r"runs\[0\].algorithm must be a FederatedAlgorithm"),
    (dict(run=dict(clients=[])), r"runs\[0\].clients must list at least one client"),
    (dict(run=dict(clients=[np.arange(4), np.zeros(0, np.int64)])), r"runs\[0\].clients\[1\] is empty"),
    (dict(run=dict(clients=[np.arange(4), np.array([3, 50])])), r"runs\[0\].clients\[1\] has indices outside 0..49"),
    (dict(run=dict(params="weights")), r"runs\[0\].params must be None, an nn.Module or a mapping"),
    (dict(run=dict(params={"0.weight": torch.zeros(1)})), r"runs\[0\].params: parameter names differ"),
    (dict(run=dict(shape=True)), r"runs\[0\].params: parameter '0.weight' has shape"),
    (dict(model=nn.Sequential(nn.Conv2d(1, 4, 3), nn.Flatten(), nn.Linear(4 * 30 * 30, 10))),
     "model expects 1 input channels, images have 3"),
])
def test_stacked_engine_refuses_bad_construction(model, data, case, match):
    """Each check of StackedEngine's constructor names what is wrong before anything is trained (these
    branches had no test)."""
    case = dict(case)
    run_change = case.pop("run", {})
    if run_change.pop("shape", False):
        params = {n: t.clone() for n, t in _params64(0).items()}
        params["0.weight"] = params["0.weight"][:1]
        run_change["params"] = params
    kwargs = dict(model=model, data=_Images(data, **case.pop("data", {})), runs=[_one_run(**run_change)], rounds=1,
                  batch_size=B)
    kwargs.update(case)
    StackedEngine(model, _Images(data), [_one_run()], rounds=1, batch_size=B)  # the unchanged case is fine
    with pytest.raises(ValueError, match=match):
        StackedEngine(**kwargs)


def test_stacked_engine_names_one_run_a_constant_lr_at_or_a_schedule_without_local_steps(model, data):
    """runs given as one RunSpec, a run's lr_at given as a number and a schedule that is no schedule are refused
    by name when the engine is built. Before: Python's TypeError "'RunSpec' object is not iterable", TypeError
    "'float' object is not callable" (from the first round's plan) and AttributeError "'list' object has no
    attribute 'local_steps'"."""
    def build(runs):
        return StackedEngine(model, _Images(data), runs, rounds=1, batch_size=B)

    with pytest.raises(ValueError, match=r"^runs must be a non-empty list of RunSpec, got one RunSpec \(a list of one: "
                                         r"\[run\]\)$"):
        build(_one_run())
    with pytest.raises(ValueError, match=r"^runs must be a non-empty list of RunSpec, got NoneType$"):
        build(None)
    with pytest.raises(ValueError, match=r"^runs\[1\]\.lr_at must be a callable round -> client lr, got float \(a "
                                         r"constant rate: lr_at=lambda t: lr; None: the step decay of the solver's lr\)$"):
        build([_one_run(), _one_run(lr_at=0.05)])
    with pytest.raises(ValueError, match=r"^runs\[0\]\.schedule must have a local_steps\(round\) method \(see "
                                         r"fedlib\.schedules\), got list$"):
        build([_one_run(schedule=[1, 1])])
    assert build([_one_run(lr_at=lambda t: 0.05)]).run_round()[0].lr == 0.05


def test_stacked_engine_train_refuses_a_callback_that_is_not_callable_before_a_round(model, data):
    """train(callback=5) is refused before any round runs. Before: round 0 trained (round_index went to 1), then
    Python's TypeError "'int' object is not callable"."""
    engine = StackedEngine(model, _Images(data), [_one_run()], rounds=2, batch_size=B)
    with pytest.raises(ValueError, match=r"^callback must be a callable records -> None, got int$"):
        engine.train(callback=5)
    assert engine.round_index == 0
    seen = []
    engine.train(callback=seen.append)
    assert engine.round_index == 2 and [records[0].round for records in seen] == [0, 1]


def test_stacked_engine_refuses_a_hook_of_the_wrong_signature_before_a_round(model, data):
    """A run's lr_at and train's callback that cannot take the one argument they are called with are refused before
    any round. Before: Python's "<lambda>() takes 0 positional arguments but 1 was given" (callback: after round 0
    had trained)."""
    with pytest.raises(ValueError, match=r"^runs\[0\]\.lr_at must be a callable round -> client lr, taking 1 "
                                         r"positional argument: runs\[0\]\.lr_at\(\) does not"):
        StackedEngine(model, _Images(data), [_one_run(lr_at=lambda: 0.05)], rounds=2, batch_size=B)
    engine = StackedEngine(model, _Images(data), [_one_run()], rounds=2, batch_size=B)
    with pytest.raises(ValueError, match=r"^callback must be a callable records -> None, taking 1 positional "
                                         r"argument: callback\(records, extra\) does not"):
        engine.train(callback=lambda records, extra: None)
    assert engine.round_index == 0


def test_stacked_engine_names_data_without_the_image_attributes(model, data):
    """data given as a dict (or another object without train_images / train_labels) is refused by name. Before:
    Python's AttributeError "'dict' object has no attribute 'train_images'"."""
    small = _Images(data)
    as_dict = {"train_images": small.train_images, "train_labels": small.train_labels}
    with pytest.raises(ValueError, match=r"^data must be an object with the attributes train_images \(uint8 \(N, H, W, "
                                         r"C\)\) and train_labels \(N,\), e\.g\. fedlib\.data\.cifar10\.load_cifar10\(\.\.\.\); "
                                         r"got dict without train_images and train_labels; a dict of them: "
                                         r"types\.SimpleNamespace\(\*\*data\)$"):
        StackedEngine(model, as_dict, [_one_run()], rounds=1, batch_size=B)
    with pytest.raises(ValueError, match=r"^data must be .*; got SimpleNamespace without train_labels$"):
        StackedEngine(model, SimpleNamespace(train_images=small.train_images), [_one_run()], rounds=1, batch_size=B)
    StackedEngine(model, SimpleNamespace(**as_dict), [_one_run()], rounds=1, batch_size=B)


def test_stacked_engine_refuses_a_flat_index_array_for_clients(model, data):
    """RunSpec.clients is one index array per client; a flat array of indices (or a list of numbers) is refused.
    Before: np.asarray(entry).ravel() made every number a client of one sample, so clients=np.arange(8) with a
    schedule for 8 clients trained 8 one-sample clients (p_i = 1/8) without a word, where one client of 8 samples
    (clients=[np.arange(8)]) was meant."""
    with pytest.raises(ValueError, match=r"^runs\[0\]\.clients\[0\] must be an array of sample indices \(one array "
                                         r"per client\), got the number 0; one client holding these samples: "
                                         r"clients=\[indices\]$"):
        StackedEngine(model, _Images(data), [_one_run(clients=np.arange(8), schedule=FixedSteps([1] * 8))], rounds=1,
                      batch_size=B)
    engine = StackedEngine(model, _Images(data), [_one_run(clients=[np.arange(8)], schedule=FixedSteps([1]))],
                           rounds=1, batch_size=B)
    assert engine.p(0).tolist() == [1.0]


def test_stacked_engine_refuses_clients_given_as_a_dict_by_name(model, data):
    """RunSpec.clients given as a dict keyed by client ({0: indices_0, 1: indices_1}) is refused as a dict, with the list
    that was meant. Before: its keys were taken as the clients, refused as 'runs[0].clients[0] must be an array of
    sample indices ..., got the number 0; one client holding these samples: clients=[indices]' (for string keys 'got
    the number 'a''), a hint at another mistake. A single value in a client's place is still refused, a string named
    as a value, not a number."""
    for clients in ({0: np.arange(4), 1: np.arange(4, 8)}, {"a": np.arange(4), "b": np.arange(4, 8)}):
        with pytest.raises(ValueError, match=r"^runs\[0\]\.clients must be a list with one array of sample indices per "
                                             r"client, got a dict \(iterating it gives its keys\); pass \[clients\[k\] "
                                             r"for k in sorted\(clients\)\]$"):
            StackedEngine(model, _Images(data), [_one_run(clients=clients, schedule=FixedSteps([1, 1]))], rounds=1,
                          batch_size=B)
    with pytest.raises(ValueError, match=r"^runs\[0\]\.clients\[1\] must be an array of sample indices \(one array "
                                         r"per client\), got the single value 'b'; one client"):
        StackedEngine(model, _Images(data), [_one_run(clients=[np.arange(4), "b"], schedule=FixedSteps([1, 1]))],
                      rounds=1, batch_size=B)
    engine = StackedEngine(model, _Images(data), [_one_run(clients=[np.arange(4), np.arange(4, 8)],
                                                           schedule=FixedSteps([1, 1]))], rounds=1, batch_size=B)
    assert engine.p(0).tolist() == [0.5, 0.5]


def test_stacked_engine_names_a_number_given_for_mean_or_std(model, data):
    """mean / std given as one number (or a 0-d array) are refused as a wrong number of entries. Before:
    Python's TypeError "object of type 'float' has no len()" ("len() of unsized object" for a 0-d array)."""
    for mean, std in ((0.5, (0.25, 0.25, 0.25)), ((0.5, 0.5, 0.5), np.array(0.25)), (torch.tensor(0.5), 0.25)):
        with pytest.raises(ValueError, match=r"^mean/std must have 3 entries \(one per channel\), got mean="):
            StackedEngine(model, _Images(data), [_one_run()], rounds=1, batch_size=B, mean=mean, std=std)
    StackedEngine(model, _Images(data), [_one_run()], rounds=1, batch_size=B, mean=np.full(3, 0.5), std=[0.25] * 3)


@pytest.mark.parametrize("name, value", [("local_steps", 1.5), ("local_steps", True), ("local_steps", 0),
                                         ("batch_size", 2.7), ("batch_size", None)])
def test_client_augment_params_checks_its_counts_as_client_batch_plan_does(name, value):
    """Before: crop_flip_params' int() cut local_steps=1.5 to 1 row and batch_size=2.7 to 2 columns without a word,
    took True as 1, gave an empty draw for local_steps=0 (which client_batch_plan refuses) and raised int()'s
    TypeError for None."""
    from fedlib.engines.stacked import client_augment_params

    args = dict(seed=0, round_index=0, client=1, local_steps=3, batch_size=2, padding=4)
    what = "a whole number" if name == "local_steps" else "an integer"  # a step count takes 2.0; batch_size does not
    with pytest.raises(ValueError, match=rf"^{name} must be {what} >= 1, got {value!r}$"):
        client_augment_params(**{**args, name: value})
    dy, dx, flip = client_augment_params(**{**args, "local_steps": np.int64(3)})
    assert all(torch.equal(a, b) for a, b in zip((dy, dx, flip), client_augment_params(**args)))
    assert tuple(dy.shape) == (3, 2)


def test_reference_run_checks_the_clients_as_the_engine_does(model, data):
    """reference_run refuses the clients StackedEngine refuses, by the same words. Before: np.asarray(c,
    dtype=np.int64) cut float indices [0.5, 1.7, 2.2] to [0, 1, 2] and trained on them (weights 3/11, 8/11), took a
    flat index array as one-sample clients, and an index past the data raised IndexError from the gather."""
    small = _Images(data)
    cases = [([np.array([0.5, 1.7, 2.2]), np.arange(4, 12)], r"run\.clients\[0\] must hold integer sample indices, "
                                                              r"got dtype float64"),
             (np.arange(8), r"run\.clients\[0\] must be an array of sample indices \(one array per client\), got the "
                            r"number 0"),
             ([np.arange(4), np.array([3, 50])], r"run\.clients\[1\] has indices outside 0\.\.49")]
    for clients, match in cases:
        run = _one_run(clients=clients, schedule=FixedSteps([1] * (8 if match.find("number") > 0 else 2)))
        with pytest.raises(ValueError, match=rf"^{match}"):
            reference_run(model, small, run, rounds=1, batch_size=B)


# ------------------------------------------------------- a user's own image model: training-only behaviour, its dtype
TRAINING_MODE = r"model computes something else in training mode than in eval mode, besides its nn\.Dropout layers"


def _images(n=24, size=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return SimpleNamespace(train_images=torch.randint(0, 256, (n, size, size, 3), dtype=torch.uint8, generator=g),
                           train_labels=torch.randint(0, 3, (n,), generator=g))


class _Conv(nn.Module):
    """A user's image model (not an nn.Sequential: the vmap path); ``functional`` drops out with
    F.dropout(x, p, self.training) instead of an nn.Dropout layer."""

    def __init__(self, functional: bool):
        super().__init__()
        self.functional = functional
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.drop = nn.Dropout(0.5)
        self.lin = nn.Linear(4 * 6 * 6, 3)

    def forward(self, x):
        h = F.relu(self.conv(x)).flatten(1)
        h = F.dropout(h, 0.5, self.training) if self.functional else self.drop(h)
        return self.lin(h)


def _run():
    return RunSpec(make_algorithm("fednova", sgd(lr=0.1)), [np.arange(0, 12), np.arange(12, 24)],
                   FixedSteps([2, 3]), seed=0)


def test_stacked_engine_refuses_training_only_behaviour_of_an_image_model():
    data = _images()
    with torch.random.fork_rng():
        torch.manual_seed(torch.Generator().manual_seed(3).initial_seed())
        functional, module = _Conv(True), _Conv(False)
    module.load_state_dict(functional.state_dict())
    functional.eval()
    rng = torch.get_rng_state()
    with pytest.raises(ValueError, match=TRAINING_MODE):
        StackedEngine(functional, data, [_run()], rounds=1, path="vmap", batch_size=4, augment=False)
    assert torch.equal(torch.get_rng_state(), rng)  # the check's draws leave torch's global RNG as it was
    assert not any(m.training for m in functional.modules())  # training flags restored
    engine = StackedEngine(module, data, [_run()], rounds=1, path="vmap", batch_size=4, augment=False)
    assert module.training  # restored as given
    engine.run_round()      # nn.Dropout: seeded masks, accepted


class _Noisy(nn.Module):
    """Gaussian noise of std 1e-3 on the features in training mode only (noise injection)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6 * 6 * 3, 3)

    def forward(self, x):
        x = x.flatten(1)
        return self.lin(x + 1e-3 * torch.randn_like(x) if self.training else x)


def test_stacked_engine_refuses_small_training_only_noise():
    """The comparison allows rounding (64 eps of the logits' scale), not a noise of std 1e-3."""
    with pytest.raises(ValueError, match=TRAINING_MODE):
        StackedEngine(_Noisy(), _images(), [_run()], rounds=1, path="vmap", batch_size=4, augment=False)
    for dtype in (torch.float32, torch.float64):  # the same model without the noise passes in both dtypes
        plain = nn.Sequential(nn.Flatten(), nn.Linear(6 * 6 * 3, 3, dtype=dtype))
        StackedEngine(plain, _images(), [_run()], rounds=1, path="vmap", batch_size=4, augment=False)


def test_stacked_engine_names_a_model_that_cannot_take_the_images():
    model = nn.Sequential(nn.Flatten(), nn.Linear(5, 3))  # images give 6*6*3 features
    with pytest.raises(ValueError, match=r"model could not be applied to 8 training inputs of shape \(3, 6, 6\)"):
        StackedEngine(model, _images(), [_run()], rounds=1, path="vmap", batch_size=4, augment=False)


def _small_net(num_classes):
    """A grouped-path network (so both paths take it) with nn.Dropout: 6x6 images -> (B, num_classes)."""
    g = torch.Generator().manual_seed(5)
    net = nn.Sequential(nn.Conv2d(3, 2, 3), nn.ReLU(), nn.Dropout(0.5), nn.Flatten(), nn.Linear(32, num_classes))
    with torch.no_grad():
        for prm in net.parameters():
            prm.copy_(0.3 * torch.randn(prm.shape, generator=g))
    return net.double()


@pytest.mark.parametrize("where", ["train", "test"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_stacked_engine_names_labels_the_model_has_no_logit_for(variant, where):
    """Labels 0..4 for a model with 3 logits: the engine took them and the first round failed inside torch with
    'Target 3 is out of bounds' (grouped) / 'index 3 is out of bounds for dimension 2 with size 3' (vmap), a
    device-side assert on CUDA that poisons the context, naming neither the labels nor K. Now refused at
    construction, by name, with TensorEngine's message; K is read without a random draw (torch's global state is
    untouched, the model's training flags are kept) and a valid run still lands on the per-client loop."""
    data = _images()
    good, bad = data.train_labels, torch.arange(24) % 5
    data.train_labels = bad if where == "train" else good
    data.test_images, data.test_labels = data.train_images[:10], (bad if where == "test" else good)[:10]
    name = "data.train_labels" if where == "train" else "data.test_labels"
    model = _small_net(3)
    model[2].eval()  # a submodule in another mode than its parent: both flags are kept
    rng = torch.get_rng_state()
    with pytest.raises(ValueError, match=rf"^{name}: labels must lie in 0\.\.2 \(the model has 3 logits\), got 0\.\.4$"):
        StackedEngine(model, data, [_run()], rounds=2, batch_size=4, dtype=torch.float64, **VARIANTS[variant])
    assert torch.equal(rng, torch.get_rng_state()) and model.training and not model[2].training
    with pytest.raises(ValueError, match=r"^data\.train_labels: labels must lie in 0\.\.2 \(the model has 3 logits\)"):
        reference_run(model, SimpleNamespace(train_images=data.train_images, train_labels=bad), _run(), rounds=1,
                      batch_size=4)
    assert torch.equal(rng, torch.get_rng_state()) and model.training and not model[2].training

    five = _small_net(5)  # five logits: the same labels train, exactly as the per-client loop does
    rng = torch.get_rng_state()  # building the layers drew their default initialisation
    engine = StackedEngine(five, data, [_run()], rounds=2, batch_size=4, dtype=torch.float64, **VARIANTS[variant])
    assert torch.equal(rng, torch.get_rng_state()) and five.training
    records = engine.run_round()
    assert np.isfinite(records[0].train_loss) and np.isfinite(records[0].test_loss)
    loop = reference_run(five, data, _run(), rounds=1, engine_rounds=2, batch_size=4)
    assert max_relative_difference(engine.params(0), loop.state.params) < 1e-10


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_subclass_with_its_own_train_batch_has_its_first_batchs_labels_checked(variant):
    """A subclass that feeds its own labels through train_batch (K unknown at construction: its inputs are not the
    images) has the labels of its first batch checked against K when the first round starts. Before: labels 0..4 (0..3
    in the first batch) for a model with 3 logits failed inside torch in the first step, 'Target 3 is out of bounds'
    (grouped) / 'index 3 is out of bounds for dimension 2 with size 3' (vmap), a device-side assert on CUDA, naming
    neither train_batch nor K.
    The check draws nothing: with valid labels the subclass trains bit for bit as the engine itself."""
    data = _images()

    class OwnLabels(StackedEngine):
        own = None

        def train_batch(self, a):
            x, _, mask = super().train_batch(a)
            idx, _ = self.step_indices(a)
            return x, self.own[idx].t(), mask

    kwargs = dict(rounds=2, batch_size=4, dtype=torch.float64, **VARIANTS[variant])
    OwnLabels.own = torch.arange(24) % 5
    engine = OwnLabels(_small_net(3), data, [_run()], **kwargs)
    with pytest.raises(ValueError, match=r"^OwnLabels\.train_batch's labels y \(its first batch\): labels must lie in "
                                         r"0\.\.2 \(the model has 3 logits\), got 0\.\.3$"):
        engine.run_round()
    OwnLabels.own = torch.as_tensor(data.train_labels)
    mine, plain = OwnLabels(_small_net(3), data, [_run()], **kwargs), StackedEngine(_small_net(3), data, [_run()],
                                                                                    **kwargs)
    mine.train()
    plain.train()
    assert all(torch.equal(mine.params(0)[n], plain.params(0)[n]) for n in plain.params(0))


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_subclass_may_pad_its_first_batch_with_the_ignore_index(variant):
    """PyTorch's convention for padding labels is -100 (F.cross_entropy's ignore_index). A subclass whose train_batch
    puts -100 where the mask is 0 was refused by the first-batch label check ('labels must lie in 0..2 ..., got
    -100..2'), though the engine's loss gives such an entry 0 and its gradient 0. Now only a -100 under mask 0 passes:
    the run is the engine's own, bit for bit; -100 where the mask is 1, or -5 under mask 0, is still refused."""
    data = _images()
    # client 0 holds 3 samples, batch 4: its first batch has one padding entry
    run = lambda: RunSpec(make_algorithm("fednova", sgd(lr=0.1)), [np.arange(0, 3), np.arange(3, 24)],  # noqa: E731
                          FixedSteps([2, 3]), seed=0)

    class Padded(StackedEngine):
        pad, where, filled = -100, "padding", []

        def train_batch(self, a):
            x, y, mask = super().train_batch(a)
            hole = mask == 0 if self.where == "padding" else torch.zeros_like(mask, dtype=torch.bool)
            if self.where == "first":  # a sample the mask keeps
                hole[mask != 0] = torch.arange(int((mask != 0).sum())) == 0
            self.filled.append(int(hole.sum()))
            return x, torch.where(hole, torch.full_like(y, self.pad), y), mask

    kwargs = dict(rounds=2, batch_size=4, dtype=torch.float64, **VARIANTS[variant])
    mine, plain = Padded(_small_net(3), data, [run()], **kwargs), StackedEngine(_small_net(3), data, [run()], **kwargs)
    mine.train()
    plain.train()
    assert mine.filled[0] >= 1  # the first batch (the one checked) has padding, now -100
    assert all(torch.equal(mine.params(0)[n], plain.params(0)[n]) for n in plain.params(0))
    for pad, where in ((-100, "first"), (-5, "padding")):
        Padded.pad, Padded.where, Padded.filled = pad, where, []
        with pytest.raises(ValueError, match=rf"^Padded\.train_batch's labels y \(its first batch\): labels must lie "
                                             rf"in 0\.\.2 \(the model has 3 logits\), got {pad}\.\.[0-2]$"):
            Padded(_small_net(3), data, [run()], **kwargs).run_round()
        assert Padded.filled[0] >= 1


def test_clients_that_share_samples_are_each_ones_data_set():
    """RunSpec.clients need not partition the training set (its docstring): samples 8..11 in both clients' arrays and
    sample 0 twice in client 0's are part of each data set, n = (13, 16), p = (13/29, 16/29), and the engine lands
    where the per-client loop does on the same arrays."""
    data = _images()
    clients = [np.concatenate([[0], np.arange(0, 12)]), np.arange(8, 24)]
    run = RunSpec(make_algorithm("fednova", sgd(lr=0.1)), clients, FixedSteps([2, 3]), seed=0)
    engine = StackedEngine(_small_net(3), data, [run], rounds=2, batch_size=4, dtype=torch.float64, path="vmap")
    engine.train()
    assert engine.history[0][0].diagnostics.weights.tolist() == pytest.approx([13 / 29, 16 / 29], rel=1e-15)  # FedNova: p
    loop = reference_run(_small_net(3), data, run, rounds=2, batch_size=4)
    assert max_relative_difference(engine.params(0), loop.state.params) < 1e-10


def test_reference_run_names_labels_of_features_the_model_has_no_logit_for():
    """reference_run refuses labels as the engine does, for images above and for train_features here (a
    float label, which it cut to an integer before, included)."""
    features = torch.randn(24, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    model = nn.Linear(6, 3).double()
    data = SimpleNamespace(train_features=features, train_labels=torch.arange(24) % 4)
    with pytest.raises(ValueError, match=r"^data\.train_labels: labels must lie in 0\.\.2 \(the model has 3 logits\), "
                                         r"got 0\.\.3$"):
        reference_run(model, data, _run(), rounds=1, batch_size=4)
    data.train_labels = (torch.arange(24) % 3).double()
    with pytest.raises(ValueError, match=r"^data\.train_labels must hold integer class labels, got torch\.float64$"):
        reference_run(model, data, _run(), rounds=1, batch_size=4)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_stacked_engine_names_a_model_without_logits_for_the_images(variant):
    """A model that cannot take the images (grouped: VGG-11's five poolings on 6x6 images) or whose output is not
    (B, K) (vmap: (B, 2, 5), which cross_entropy read as a 2-class problem over 5 positions): refused at
    construction, where the first round failed inside torch."""
    if variant == "vmap":
        model = nn.Sequential(nn.Flatten(), nn.Linear(108, 10), nn.Unflatten(1, (2, 5)))
        match = r"^model must map a batch \(B, \*feature_shape\) to logits \(B, K\), got \(8, 2, 5\) for B = 8$"
    else:
        model = vgg11(width=WIDTH, seed=0)
        match = r"^model could not be applied to 1 training input of shape \(3, 6, 6\) \(RuntimeError: "
    with pytest.raises(ValueError, match=match):
        StackedEngine(model, _images(), [_run()], rounds=1, batch_size=4, augment=False, **VARIANTS[variant])


def _two_clients(seed=0):
    g = torch.Generator().manual_seed(seed)
    xs = [torch.randn(n, 5, generator=g) for n in (6, 10)]
    return xs, [torch.randint(0, 3, (x.shape[0],), generator=g) for x in xs]


def _linear(dtype):
    net = nn.Linear(5, 3, dtype=dtype)
    with torch.no_grad():
        g = torch.Generator().manual_seed(1)
        net.weight.copy_(torch.randn(3, 5, generator=g))
        net.bias.zero_()
    return net


def test_train_clients_trains_in_the_models_dtype_by_default():
    from fedlib.experiments.custom import train_clients

    xs, ys = _two_clients()
    out = {}
    for dtype in (torch.float32, torch.float64):
        run = train_clients(_linear(dtype), xs, ys, rounds=2, batch_size=4, algorithms=("fednova",))
        engine = run["engine"]
        assert engine.dtype is dtype and all(t.dtype is dtype for t in engine.params(0).values())
        out[dtype] = run["fednova"][-1]["train_loss"]
    explicit = train_clients(_linear(torch.float64), xs, ys, rounds=2, batch_size=4, algorithms=("fednova",),
                             dtype=torch.float64)
    assert explicit["fednova"][-1]["train_loss"] == out[torch.float64]  # default = the model's dtype
    cast = train_clients(_linear(torch.float32), xs, ys, rounds=1, batch_size=4, algorithms=("fednova",),
                         dtype=torch.float64)  # an explicit dtype still casts (chapter 6's float64 check)
    assert cast["engine"].dtype is torch.float64
    with pytest.raises(ValueError, match=r"^dtype: the model's parameters are torch\.bfloat16; .*give "
                                         r"dtype=torch\.float32 or dtype=torch\.float64"):
        train_clients(_linear(torch.bfloat16), xs, ys, rounds=1, batch_size=4)
    mixed = nn.Sequential(nn.Linear(5, 4), nn.Linear(4, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"^dtype: the model's parameters are torch\.float32, torch\.float64"):
        train_clients(mixed, xs, ys, rounds=1, batch_size=4)
    with pytest.raises(ValueError, match=r"^model must be a torch\.nn\.Module, got function"):
        train_clients(lambda x: x, xs, ys, rounds=1)


def test_stacked_engine_trains_in_the_models_dtype_by_default():
    model = nn.Sequential(nn.Flatten(), nn.Linear(6 * 6 * 3, 3)).double()
    engine = StackedEngine(model, _images(), [_run()], rounds=1, path="vmap", batch_size=4, augment=False)
    assert engine.dtype is torch.float64 and engine.params(0)["1.weight"].dtype is torch.float64
    engine = StackedEngine(model, _images(), [_run()], rounds=1, path="vmap", batch_size=4, augment=False,
                           dtype=torch.float32)
    assert engine.dtype is torch.float32


def test_grouped_path_refuses_a_sequential_with_its_own_forward():
    """The grouped path rebuilds the network from its leaf layers: a subclass of nn.Sequential
    whose forward does more (here it scales the input) would silently lose it."""

    class Scaled(nn.Sequential):
        def forward(self, x):
            return super().forward(2.0 * x)

    class Named(nn.Sequential):  # a subclass that keeps Sequential's forward is fine
        pass

    layers = lambda: [nn.Conv2d(3, 2, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(2 * 6 * 6, 3)]  # noqa: E731
    with pytest.raises(ValueError, match=r"^'model' is a Scaled, an nn\.Sequential with its own forward"):
        StackedEngine(Scaled(*layers()), _images(), [_run()], rounds=1, path="grouped", batch_size=4, augment=False)
    with pytest.raises(ValueError, match=r"^'1' is a Scaled"):
        StackedEngine(nn.Sequential(nn.Identity(), Scaled(*layers())), _images(), [_run()], rounds=1,
                      path="grouped", batch_size=4, augment=False)
    StackedEngine(Named(*layers()), _images(), [_run()], rounds=1, path="grouped", batch_size=4, augment=False)
    StackedEngine(Scaled(*layers()), _images(), [_run()], rounds=1, path="vmap", batch_size=4, augment=False)


def test_batchnorm_without_running_statistics_is_refused_by_name():
    """A BatchNorm layer with ``track_running_stats=False`` has no buffers, so the buffer check lets it
    through; the vmap path still refuses it, naming the layer (batch statistics would mix in the padded
    samples of a short client batch)."""
    bn = nn.Sequential(nn.Conv2d(3, 2, 3, padding=1), nn.BatchNorm2d(2, track_running_stats=False), nn.Flatten(),
                       nn.Linear(2 * 6 * 6, 3))
    assert not list(bn.buffers())
    with pytest.raises(ValueError, match=r"^layer '1' is a BatchNorm2d: BatchNorm is not supported"):
        StackedEngine(bn, _images(), [_run()], rounds=1, path="vmap", batch_size=4, augment=False)


def test_train_calls_back_each_round_and_refuses_rounds_past_the_end():
    """``train(callback=...)`` calls ``callback(records)`` once after each round, with that round's records
    (rounds 0, 1 of a 2-round engine: the very lists ``train`` returns); a round past the last is refused."""
    model = nn.Sequential(nn.Flatten(), nn.Linear(6 * 6 * 3, 3)).double()
    engine = StackedEngine(model, _images(), [_run()], rounds=2, path="vmap", batch_size=4, augment=False)
    seen = []
    out = engine.train(callback=seen.append)
    assert len(out) == 2 and len(seen) == 2
    assert all(a is b for a, b in zip(seen, out))
    assert [recs[0].round for recs in seen] == [0, 1]
    with pytest.raises(ValueError, match="^all 2 rounds are done$"):
        engine.run_round()


def test_train_refuses_more_rounds_than_are_left_before_training():
    """``train(rounds=n)`` with more than the rounds left is refused before any round trains, naming ``rounds``.
    Before, a 2-round engine asked for 3 trained its 2 rounds, then raised 'all 2 rounds are done' from run_round,
    and the records of the 2 rounds it trained never came back. With 1 round done, 1 more is still taken."""
    model = nn.Sequential(nn.Flatten(), nn.Linear(6 * 6 * 3, 3)).double()
    engine = StackedEngine(model, _images(), [_run()], rounds=2, path="vmap", batch_size=4, augment=False)
    with pytest.raises(ValueError, match=r"^rounds=3: only 2 of the engine's 2 rounds are left "):
        engine.train(rounds=3)
    assert engine.round_index == 0 and engine.history == []
    engine.run_round()
    with pytest.raises(ValueError, match=r"^rounds=2: only 1 of the engine's 2 rounds are left "):
        engine.train(rounds=2)
    assert engine.round_index == 1
    assert [recs[0].round for recs in engine.train(rounds=1)] == [1]


def test_a_checkpoint_with_another_number_of_runs_or_an_impossible_round_is_refused():
    """load_state_dict refuses a state of another number of runs (2 in the checkpoint, 1 in the engine) and a
    round outside 0..rounds (-1 and 3 for a 2-round engine); 0 and 2 (nothing done, all done) are loaded."""
    model = nn.Sequential(nn.Flatten(), nn.Linear(6 * 6 * 3, 3)).double()

    def engine():
        return StackedEngine(model, _images(), [_run()], rounds=2, path="vmap", batch_size=4, augment=False)

    state = engine().state_dict()
    with pytest.raises(ValueError, match=r"^state: 2 runs in the checkpoint, the engine has 1$"):
        engine().load_state_dict(dict(state, num_runs=2))
    for rnd in (-1, 3):
        with pytest.raises(ValueError, match=rf"^state: round {rnd} outside 0\.\.2$"):
            engine().load_state_dict(dict(state, round=rnd))
    for rnd in (0, 2):
        e = engine()
        e.load_state_dict(dict(state, round=rnd))
        assert e.round_index == rnd


def test_stacked_engine_refuses_a_run_name_that_is_not_a_str(model, data):
    """RunSpec(name=5) is refused by name when the engine is built. Before: accepted, the records and the
    checkpoint's run_names held 5, and a diverging run's FloatingPointError message raised Python's TypeError
    ('can only concatenate str (not "int") to str')."""
    def build(runs):
        return StackedEngine(model, _Images(data), runs, rounds=1, batch_size=B)

    for name in (5, None, b"a"):
        with pytest.raises(ValueError, match=r"^runs\[1\]\.name must be a str \(the run's label; '' leaves it "
                                             rf"empty\), got {re.escape(repr(name))}$"):
            build([_one_run(), _one_run(name=name)])
    assert [r.name for r in build([_one_run(), _one_run(name="b")]).run_round()] == ["", "b"]


@pytest.mark.parametrize("flag, value", [("augment", "no"), ("dropout", 0.5), ("cuda_graph", None),
                                         ("channels_last", 1)])
def test_stacked_engine_flags_must_be_true_or_false(model, data, flag, value):
    """Before: any truthy value was True: augment='no' cropped and flipped, dropout=0.5 applied the dropout layers,
    without a word (the engine kept bool(value)); reference_run and GroupedNetwork's channels_last likewise.
    np.bool_ is taken (check_flag), with the same numbers."""
    def build(**flags):
        return StackedEngine(model, _Images(data), [_one_run()], rounds=1, batch_size=B, **flags)

    with pytest.raises(ValueError, match=rf"^{flag} must be True or False, got {value!r}$"):
        build(**{flag: value})
    if flag in ("augment", "dropout"):
        with pytest.raises(ValueError, match=rf"^{flag} must be True or False, got {value!r}$"):
            reference_run(model, _Images(data), _one_run(), rounds=1, batch_size=B, **{flag: value})
    if flag == "channels_last":
        with pytest.raises(ValueError, match=r"^channels_last must be True or False, got 1$"):
            GroupedNetwork(model, 2, device="cpu", channels_last=1)
    plain, numpy = build(augment=False, dropout=True), build(augment=np.False_, dropout=np.True_)
    plain.train()
    numpy.train()
    assert (numpy.augment, numpy.dropout) == (False, True) and type(numpy.augment) is bool
    assert all(torch.equal(plain.params(0)[n], numpy.params(0)[n]) for n in plain.params(0))


def test_load_state_dict_refuses_unnamed_runs_in_another_order(data):
    """Run names may be left empty, and then the checkpoint's run_names ('', '') matched any order: a FedAvg and
    a FedNova run given in the other order on resume each continued from the other's state, without a word.
    state_dict now stores each run's algorithm, solver, server optimizer, seed and client sizes, and
    load_state_dict refuses a run that differs, naming it and what differs."""
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 10)).double()
    sizes = [5, 4]

    def runs(order):
        specs = {name: RunSpec(make_algorithm(name, sgd(0.05)), _clients(0, sizes), FixedSteps([1, 2]), seed=1,
                               lr_at=lambda t: 0.05) for name in ("fedavg", "fednova")}
        return [specs[name] for name in order]

    def engine(order):
        return StackedEngine(model, data, runs(order), rounds=2, path="vmap", dtype=torch.float64, batch_size=B,
                             augment=False)

    first = engine(("fedavg", "fednova"))
    first.run_round()
    saved = first.state_dict()
    with pytest.raises(ValueError, match=re.escape("state: run 0 of the checkpoint is not the engine's run 0 (they "
                                                   "differ in algorithm: algorithm 'fedavg' vs 'fednova'); give the "
                                                   "engine the same runs in the same order")):
        engine(("fednova", "fedavg")).load_state_dict(saved)
    same = engine(("fedavg", "fednova"))
    same.load_state_dict(saved)
    first.run_round(), same.run_round()
    assert all(_max_rel(a.params, b.params) == 0 for a, b in zip(first.states, same.states))
    older = {k: v for k, v in saved.items() if k != "run_specs"}  # a checkpoint written before run_specs
    engine(("fedavg", "fednova")).load_state_dict(older)


@pytest.mark.parametrize("count", [49, 51])
def test_reference_run_refuses_labels_that_are_not_one_per_image(model, data, count):
    """reference_run compared its clients' indices with the number of labels only: 51 labels for 50 images (labels
    and images out of step) ran without a word where StackedEngine refuses the same data, and 49 were named as
    'run.clients[1] has indices outside 0..48'. It says what StackedEngine says now."""
    from fedlib.engines.stacked import reference_run

    reference_run(model, _Images(data), _one_run(), rounds=1, batch_size=B, dtype=torch.float64)  # unchanged: runs
    with pytest.raises(ValueError, match=rf"^data\.train_labels must hold one label per image, got shape \({count},\)$"):
        reference_run(model, _Images(data, train_labels=np.zeros(count, np.int64)), _one_run(), rounds=1, batch_size=B)


def test_stacked_pool2d_takes_numpy_integer_sizes_as_torch_pooling_does():
    """A pooling layer built with numpy integers (``nn.MaxPool2d(np.int64(2))``, sizes computed with numpy) pools on
    the gemm path as torch's pooling and the cudnn path do. Before the fix, stacked_pool2d's per-step size check
    took Python ints only: the gemm forward of such a model raised "kernel_size must be an integer >= 1 (or a pair
    of them), got np.int64(2)" while F.max_pool2d, the cudnn path and the code before the check ran it; numpy bools
    stay refused."""
    from fedlib.engines.im2col import stacked_pool2d

    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, 3, 8, 8, 5, generator=g)  # (a, B, H, W, C)
    for kind, fn in (("max", F.max_pool2d), ("avg", F.avg_pool2d)):
        got = stacked_pool2d(x, kind, kernel_size=np.int64(2), stride=(np.int32(2), 2), padding=np.int64(1))
        for j in range(2):  # model j: (B, H, W, C) -> NCHW -> pooled with Python ints -> back
            want = fn(x[j].permute(0, 3, 1, 2), kernel_size=2, stride=2, padding=1).permute(0, 2, 3, 1)
            assert got[j].shape == (3, 5, 5, 5) and torch.equal(got[j], want)  # (8 + 2*1 - 2) // 2 + 1 = 5
    with pytest.raises(ValueError, match="^kernel_size must be an integer >= 1"):
        stacked_pool2d(x, "max", kernel_size=np.bool_(True))
    torch.manual_seed(5)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(np.int64(2)), nn.Flatten(),
                          nn.Linear(4 * 4 * 4, 2))
    images = torch.randn(5, 8, 8, 2, 3, generator=g)  # (B, H, W, a, C)
    params = {n: torch.stack([p.detach()] * 2) for n, p in model.named_parameters()}
    logits = {}
    for conv in ("cudnn", "gemm"):
        net = GroupedNetwork(model, 2, device="cpu", conv=conv)
        logits[conv] = net.forward(params, net.image_input(images), 2)
    with torch.no_grad():
        want = torch.stack([model(images[:, :, :, j].permute(0, 3, 1, 2)) for j in range(2)])
    torch.testing.assert_close(logits["gemm"], want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(logits["cudnn"], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("call", [
    lambda n: client_batch_plan(3, 1, 2, 10, n, 4),
    lambda n: tuple(t.numpy() for t in client_augment_params(3, 1, 2, n, 4, padding=4)),
    lambda n: online_a_norms(momentum_sgd(0.1, momentum=0.5), n),
], ids=["client_batch_plan", "client_augment_params", "online_a_norms"])
def test_scalar_step_counts_are_whole_numbers(call):
    """local_steps (steps) is a step count, a whole number as the schedules' local_steps arrays (the fedlib
    docstring's convention): 7.0 is 7. Before: "local_steps must be an integer >= 1, got 7.0". The draws are the same,
    bit for bit; 1.5, True and NaN are still refused."""
    got, want = call(7.0), call(7)
    got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
    assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(got, want, strict=True))
    for bad in (1.5, True, float("nan")):
        with pytest.raises(ValueError, match=r"^(local_steps|steps) must be a whole number >= [01], got "):
            call(bad)


@pytest.mark.parametrize("path", ["grouped", "vmap"])
def test_evaluate_checks_the_models_it_is_given(path):
    """``evaluate(params)`` takes a list of models with the model's parameter names and shapes. Before, a weight of
    the wrong shape was broadcast into the stack by ``copy_`` and evaluated as another model without a word (the
    first row of a (3, 32) weight given as (1, 32) scored every class with that row), a missing
    name was a bare ``KeyError``, one model not in a list was refused as 'at most 1 models', and an empty list failed
    inside torch's convolution or ``groups`` check. Numpy arrays and modules are accepted, with the tensors' numbers."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(3, 2, 3), nn.Flatten(), nn.Linear(2 * 4 * 4, 3)).double()
    data = _images()
    data.test_images, data.test_labels = data.train_images[:10], data.train_labels[:10]
    engine = StackedEngine(model, data, [_run()], rounds=1, path=path, batch_size=4, augment=False)
    own = {n: t.detach().clone() for n, t in model.named_parameters()}
    acc, loss = engine.evaluate([own])
    with torch.no_grad():  # by hand: the plain model on the normalised test images
        x = normalize(data.test_images, torch.tensor(CIFAR10_MEAN, dtype=torch.float64),
                      torch.tensor(CIFAR10_STD, dtype=torch.float64), torch.float64).permute(0, 3, 1, 2)
        logits = model(x)
    assert acc[0] == float((logits.argmax(1) == data.test_labels).double().mean())
    assert loss[0] == pytest.approx(float(F.cross_entropy(logits, data.test_labels)), rel=1e-12)
    with pytest.raises(ValueError, match=r"^params\[0\]: parameter '2\.weight' has shape \(1, 32\), the model's "
                                         r"is \(3, 32\)$"):
        engine.evaluate([dict(own, **{"2.weight": own["2.weight"][:1]})])
    with pytest.raises(ValueError, match=r"^params\[0\]: parameter names differ from the model's: \['2\.bias'\]$"):
        engine.evaluate([{n: t for n, t in own.items() if n != "2.bias"}])
    with pytest.raises(ValueError, match=r"^params must be a list of models .* got a dict; one model: \[params\]$"):
        engine.evaluate(own)
    with pytest.raises(ValueError, match=r"^params must list at least one model"):
        engine.evaluate([])
    for given in ([{n: t.numpy() for n, t in own.items()}], [model]):
        got = engine.evaluate(given)
        assert got[0][0] == acc[0] and got[1][0] == loss[0]


def test_normalize_takes_the_cifar_constants_and_names_a_wrong_channel_count():
    """``normalize`` takes ``mean`` / ``std`` as the tuples :data:`fedlib.data.cifar10.CIFAR10_MEAN` / ``CIFAR10_STD``
    are, with the tensors' numbers: pixel 0 gives -mean / std, pixel 255 (1 - mean) / std per channel. Before, the
    tuples failed as "'tuple' object has no attribute 'to'", and a mean of 2 entries for 3 channels failed inside
    torch's broadcasting ("The size of tensor a (3) must match ...") without naming mean."""
    imgs = torch.tensor([[[[0, 255, 0]], [[255, 0, 255]]]], dtype=torch.uint8)  # (1, 2, 1, 3)
    got = normalize(imgs, CIFAR10_MEAN, CIFAR10_STD, torch.float64)
    m, s = CIFAR10_MEAN, CIFAR10_STD
    want = torch.tensor([[[[-m[0] / s[0], (1 - m[1]) / s[1], -m[2] / s[2]]],
                          [[(1 - m[0]) / s[0], -m[1] / s[1], (1 - m[2]) / s[2]]]]], dtype=torch.float64)
    assert got.dtype == torch.float64 and torch.allclose(got, want, rtol=1e-15, atol=1e-15)
    as_tensors = normalize(imgs, torch.tensor(m, dtype=torch.float64), torch.tensor(s, dtype=torch.float64),
                           torch.float64)
    assert torch.equal(got, as_tensors)
    with pytest.raises(ValueError, match=r"^mean must hold one number per channel \(3, the images' last axis\), got "
                                         r"shape \(2,\)$"):
        normalize(imgs, m[:2], s)
    with pytest.raises(ValueError, match=r"^std must hold one number per channel \(3, .*got shape \(1, 3\)$"):
        normalize(imgs, m, torch.tensor([s]))

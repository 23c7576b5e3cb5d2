"""``fedlib.experiments.custom``: a user-defined module on per-client tensors through the stacked engine.

And what train_clients, TensorEngine and reference_differences refuse: training-only behaviour (the
training-mode check), non-finite or float32-overflowing models and features, runs of one name, a model that
is not the runs' initial model, flags a solver does not take, a test set of another shape, mu for a solver without a
proximal term, a bad dtype, a model without parameters; a StackedEngine subclass that feeds its own data."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from torch import nn

from fedlib.algorithms import make_algorithm
from fedlib.engines.stacked import RunSpec
from fedlib.experiments.custom import TensorEngine, reference_differences, train_clients
from fedlib.schedules import FixedSteps
from fedlib.solvers import sgd


def _clients(seed=0):
    g = torch.Generator().manual_seed(seed)
    teacher = torch.randn(6, 3, generator=g)
    xs = [torch.randn(n, 6, generator=g) + torch.randn(6, generator=g) for n in (5, 17, 40)]
    return xs, [(x @ teacher).argmax(1) for x in xs]


def test_fedavg_vs_fednova_on_an_mlp():
    torch.manual_seed(0)
    xs, ys = _clients()
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Dropout(0.1), nn.Linear(8, 3))
    out = train_clients(model, xs, ys, rounds=4, lr=0.1, epochs="1-3", batch_size=4, test_x=xs[2], test_y=ys[2])
    p = np.array([5, 17, 40]) / 62
    for r in out["fednova"]:
        assert r["chi2"] == pytest.approx(0, abs=1e-12)
        assert r["tau_eff"] == pytest.approx(float(p @ np.array(r["local_steps"])))
    assert all(r["chi2"] > 0 for r in out["fedavg"])
    for a in ("fedavg", "fednova"):
        assert out[a][-1]["train_loss"] < out[a][0]["train_loss"]
        assert 0 <= out[a][-1]["test_accuracy"] <= 1
    # same initial model and the same local steps for both runs
    assert [r["local_steps"] for r in out["fedavg"]] == [r["local_steps"] for r in out["fednova"]]


def test_buffers_and_bad_tensors_refused():
    xs, ys = _clients()
    with pytest.raises(ValueError, match="buffers"):
        train_clients(nn.Sequential(nn.Linear(6, 3), nn.BatchNorm1d(3)), xs, ys, rounds=1)
    with pytest.raises(ValueError, match="same clients"):
        train_clients(nn.Linear(6, 3), xs, ys[:2], rounds=1)
    with pytest.raises(ValueError, match=r"^client_y\[1\] has 3 labels but client_x\[1\] has 17 samples$"):
        train_clients(nn.Linear(6, 3), xs, [ys[0], ys[1][:3], ys[2]], rounds=1)


@pytest.mark.parametrize("option", ["path", "augment", "padding", "mean", "std", "channels_last", "conv"])
def test_tensor_engine_refuses_image_options(option):
    """TensorEngine is the vmap path on feature rows: image options are refused by name."""
    from fedlib.algorithms import make_algorithm
    from fedlib.engines.stacked import RunSpec
    from fedlib.experiments.custom import TensorEngine
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd

    run = RunSpec(make_algorithm("fednova", sgd(0.1)), [np.arange(4), np.arange(4, 8)], FixedSteps([1, 1]))
    with pytest.raises(ValueError, match=f"does not take '{option}'"):
        TensorEngine(nn.Linear(6, 3), torch.randn(8, 6), torch.arange(8) % 3, [run], rounds=1, **{option: None})


@pytest.mark.parametrize("case,match", [
    ("frozen", "requires_grad=False"), ("repeated", "repeat"), ("string", "sequence of names"),
    ("lr_decay", "lr_decay"), ("label range", r"client_y\[1\]: labels must lie in 0..2"),
    ("float labels", "integer class labels"), ("feature shape", "client 2: features of shape"),
    ("test labels", "test_y"), ("not logits", "logits"), ("nan features", "NaN or inf"),
])
def test_bad_inputs_are_refused_before_training(case, match):
    """Each of these used to train silently (a frozen layer changed, two runs merged into one
    history, an unknown lr_decay ran as constant, float labels were truncated) or failed deep
    inside torch."""
    xs, ys = _clients()
    frozen = nn.Linear(6, 3)
    frozen.bias.requires_grad_(False)
    calls = {
        "frozen": lambda: train_clients(frozen, xs, ys, rounds=1),
        "repeated": lambda: train_clients(nn.Linear(6, 3), xs, ys, rounds=1, algorithms=("fedavg", "fedavg")),
        "string": lambda: train_clients(nn.Linear(6, 3), xs, ys, rounds=1, algorithms="fednova"),
        "lr_decay": lambda: train_clients(nn.Linear(6, 3), xs, ys, rounds=1, lr_decay="cosine"),
        "label range": lambda: train_clients(nn.Linear(6, 3), xs, [ys[0], ys[1] + 3, ys[2]], rounds=1),
        "float labels": lambda: train_clients(nn.Linear(6, 3), xs, [y.float() for y in ys], rounds=1),
        "feature shape": lambda: train_clients(nn.Linear(6, 3), xs[:2] + [torch.randn(4, 7)], ys[:2] + [ys[2][:4]],
                                               rounds=1),
        "test labels": lambda: train_clients(nn.Linear(6, 3), xs, ys, rounds=1, test_x=xs[0], test_y=ys[0] - 1),
        "not logits": lambda: train_clients(nn.Sequential(nn.Linear(6, 3), nn.Flatten(0)), xs, ys, rounds=1),
        "nan features": lambda: train_clients(nn.Linear(6, 3), [xs[0], xs[1].clone().fill_(float("nan")), xs[2]],
                                              ys, rounds=1),
    }
    with pytest.raises(ValueError, match=match):
        calls[case]()


def test_evaluation_equals_the_plain_model():
    """The engine's batched evaluation (through the test_batches hook, in chunks) gives each
    run's global model the accuracy and loss of a plain forward pass."""
    xs, ys = _clients(1)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    test_x, test_y = torch.cat(xs), torch.cat(ys)
    out = train_clients(model, xs, ys, rounds=2, lr=0.1, epochs="1-2", batch_size=4, test_x=test_x, test_y=test_y)
    engine = out["engine"]
    engine.eval_batch_size = 7  # several chunks, the last one partial
    acc, loss = engine.evaluate()
    for r, name in enumerate(("fedavg", "fednova")):
        plain = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
        plain.load_state_dict({n: t for n, t in engine.params(r).items()})
        with torch.no_grad():
            logits = plain(test_x)
        assert acc[r] == pytest.approx(float((logits.argmax(1) == test_y).double().mean()), abs=1e-12)
        assert loss[r] == pytest.approx(float(nn.functional.cross_entropy(logits, test_y)), rel=1e-5)
        assert out[name][-1]["test_accuracy"] == pytest.approx(acc[r], abs=1e-12)


def test_reference_differences_is_summation_noise_in_float64():
    """reference_differences: the engine's final models against the per-client loop on the same
    batches and dropout masks — 1e-16-ish in float64, larger (but small) in float32; anything
    but train_clients' result is refused."""
    from fedlib.experiments.custom import reference_differences

    xs, ys = _clients()
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Dropout(0.3), nn.Linear(8, 3))
    out64 = train_clients(model, xs, ys, rounds=2, batch_size=4, dtype=torch.float64)
    d64 = reference_differences(model, out64)
    assert set(d64) == {"fedavg", "fednova"} and max(d64.values()) < 1e-12, d64
    d32 = reference_differences(model, train_clients(model, xs, ys, rounds=2, batch_size=4))
    assert 0 < max(d32.values()) < 1e-4, d32
    with pytest.raises(ValueError, match="what train_clients returned"):
        reference_differences(model, {"fedavg": []})


# ---------------------------------------------------------------- found by audits of the engines' inputs
class _Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(6, 6), nn.Linear(6, 6)
        self.b.weight = self.a.weight
        self.head = nn.Linear(6, 3)

    def forward(self, x):
        return self.head(torch.relu(self.b(torch.relu(self.a(x)))))


def test_train_clients_names_client_lists_and_algorithms_that_are_no_sequences():
    """client_x / client_y that are no sequence and algorithms that is not iterable are refused by name. Before:
    Python's TypeError "object of type 'NoneType' has no len()" (client_x=None), "object of type 'int' has no len()"
    (client_y=5) and "'int' object is not iterable" (algorithms=5). A generator of client tensors, which had no
    len() either, now trains like the list."""
    xs, ys = _clients()
    with pytest.raises(ValueError, match=r"^client_x must be a sequence of feature tensors \(n_i, \.\.\.\), one per "
                                         r"client, got None$"):
        train_clients(nn.Linear(6, 3), None, ys, rounds=1)
    with pytest.raises(ValueError, match=r"^client_y must be a sequence of label tensors \(n_i,\), one per client, "
                                         r"got 5$"):
        train_clients(nn.Linear(6, 3), xs, 5, rounds=1)
    with pytest.raises(ValueError, match=r"^algorithms must be a non-empty sequence of names, e\.g\. \('fedavg', "
                                         r"'fednova'\), got 5$"):
        train_clients(nn.Linear(6, 3), xs, ys, rounds=1, algorithms=5)
    torch.manual_seed(0)
    model = nn.Linear(6, 3)
    listed = train_clients(model, xs, ys, rounds=1, algorithms=("fedavg",))
    generated = train_clients(model, (x for x in xs), iter(ys), rounds=1, algorithms=("fedavg",))
    assert listed["fedavg"][0]["train_loss"] == generated["fedavg"][0]["train_loss"]


@pytest.mark.parametrize("kind", ["tensor", "numpy"])
def test_train_clients_names_one_clients_tensor_given_instead_of_a_list_of_clients(kind):
    """One client's features (n, d) and labels (n,) given as client_x / client_y instead of a list of clients:
    before, "client_x[0] must be (n_i, *feature_shape), samples first, got shape (6,); one feature per sample:
    client_x[i][:, None]" (the tensor's first row taken for a client), and for features listed but the labels
    not, "client_x and client_y must list the same clients (got 1 and 5)". Now each names the argument that
    must list the clients. A stacked tensor (m, n, d) of equally sized clients still lists them."""
    xs, ys = _clients()
    x, y = (xs[0], ys[0]) if kind == "tensor" else (xs[0].numpy(), ys[0].numpy())
    with pytest.raises(ValueError, match=r"^client_x must list the clients, one feature tensor \(n_i, "
                                         r"\*feature_shape\) per client, got one \w+ of shape \(5, 6\)"):
        train_clients(nn.Linear(6, 3), x, y, rounds=1)
    with pytest.raises(ValueError, match=r"^client_y must list the clients, one label tensor \(n_i,\) per client, "
                                         r"got one \w+ of shape \(5,\) \(the data of a single client\? "
                                         r"client_x=\[x\], client_y=\[y\]"):
        train_clients(nn.Linear(6, 3), [x], y, rounds=1)
    torch.manual_seed(0)
    model = nn.Linear(6, 3)
    stacked = train_clients(model, torch.stack([xs[2][:20], xs[2][20:]]), torch.stack([ys[2][:20], ys[2][20:]]),
                            rounds=1, algorithms=("fedavg",))
    listed = train_clients(model, [xs[2][:20], xs[2][20:]], [ys[2][:20], ys[2][20:]], rounds=1, algorithms=("fedavg",))
    assert stacked["fedavg"][0]["train_loss"] == listed["fedavg"][0]["train_loss"]


def test_tied_parameters_are_refused_not_untied():
    xs, ys = _clients()
    with pytest.raises(ValueError, match="'b.weight' is tied to 'a.weight'"):
        train_clients(_Tied(), xs, ys, rounds=1)


def test_a_reused_layer_is_refused_by_the_grouped_path():
    from fedlib.engines.grouped import leaf_layers

    relu = nn.ReLU()
    with pytest.raises(ValueError, match="same module object.*path='vmap'"):
        leaf_layers(nn.Sequential(nn.Linear(6, 6), relu, nn.Linear(6, 3), relu))


def test_float64_features_are_not_rounded_through_float32():
    xs, ys = _clients()
    xs = [x.double() + 1e-12 for x in xs]
    out = train_clients(nn.Sequential(nn.Linear(6, 3)), xs, ys, rounds=1, batch_size=4, dtype=torch.float64)
    assert torch.equal(out["engine"]._features, torch.cat(xs))


@pytest.mark.parametrize("kwargs, message", [
    (dict(test_y=torch.zeros(3, dtype=torch.int64)), "test_x and test_y go together"),
    (dict(test_x=torch.zeros(3, 6)), "test_x and test_y go together"),
])
def test_test_x_and_test_y_go_together(kwargs, message):
    xs, ys = _clients()
    with pytest.raises(ValueError, match=message):
        train_clients(nn.Sequential(nn.Linear(6, 3)), xs, ys, rounds=1, **kwargs)


def test_client_checks_come_before_the_model_is_called():
    xs, ys = _clients()
    xs[0], ys[0] = xs[0][:0], ys[0][:0]
    with pytest.raises(ValueError, match="client 0: needs n_i >= 1 samples"):
        train_clients(nn.Sequential(nn.Linear(6, 3)), xs, ys, rounds=1)
    xs, ys = _clients()
    xs[1] = xs[1].clone()
    xs[1][4, 2] = float("nan")
    with pytest.raises(ValueError, match=r"client_x\[1\] holds NaN or inf \(sample 4\)"):
        train_clients(nn.Sequential(nn.Linear(6, 3)), xs, ys, rounds=1)
    xs, ys = _clients()
    with pytest.raises(ValueError, match="must be a float tensor"):
        train_clients(nn.Sequential(nn.Linear(6, 3)), [x.long() for x in xs], ys, rounds=1)
    with pytest.raises(ValueError, match="same clients"):  # one stacked tensor is not a list of clients
        train_clients(nn.Sequential(nn.Linear(6, 3)), torch.zeros(0, 5, 6), ys, rounds=1)


def test_progress_bar_counts_rounds_on_stderr(capsys):
    """progress=True: a tqdm bar on stderr that reaches rounds/rounds and shows each algorithm's last train
    loss; the default prints nothing."""
    xs, ys = _clients()
    model = nn.Sequential(nn.Linear(6, 3))
    quiet = train_clients(model, xs, ys, rounds=2, lr=0.1, epochs="1", batch_size=4, dropout=False)
    assert capsys.readouterr().err == ""
    loud = train_clients(model, xs, ys, rounds=2, lr=0.1, epochs="1", batch_size=4, dropout=False, progress=True)
    err = capsys.readouterr().err
    assert "train_clients" in err and "2/2" in err and "fedavg=" in err and "fednova=" in err
    assert [r["train_loss"] for r in loud["fednova"]] == [r["train_loss"] for r in quiet["fednova"]]


@pytest.mark.parametrize("value", ["no", 1, None])
def test_train_clients_progress_must_be_true_or_false(capsys, value):
    """Before: progress='no' or 1 (truthy) drew a bar and None none, without a word. np.bool_ is taken (check_flag),
    with the same numbers; dropout is the engine's check (StackedEngine)."""
    xs, ys = _clients()
    model = nn.Sequential(nn.Linear(6, 3))
    with pytest.raises(ValueError, match=rf"^progress must be True or False, got {value!r}$"):
        train_clients(model, xs, ys, rounds=1, epochs="1", batch_size=4, progress=value)
    with pytest.raises(ValueError, match=r"^dropout must be True or False, got 'no'$"):
        train_clients(model, xs, ys, rounds=1, epochs="1", batch_size=4, dropout="no")
    assert capsys.readouterr().err == ""
    plain = train_clients(model, xs, ys, rounds=1, epochs="1", batch_size=4, dropout=False, progress=False)
    numpy = train_clients(model, xs, ys, rounds=1, epochs="1", batch_size=4, dropout=np.False_, progress=np.False_)
    assert [r["train_loss"] for r in numpy["fednova"]] == [r["train_loss"] for r in plain["fednova"]]

# --------------------------------------------------------------------------- a NaN initial model
def _engine_with(model, params):
    run = RunSpec(make_algorithm("fednova", sgd(0.1)), [np.arange(0, 4), np.arange(4, 8)], FixedSteps([1, 2]), seed=0,
                  params=params)
    torch.manual_seed(0)
    return TensorEngine(model, torch.randn(8, 6, dtype=torch.float64), torch.arange(8) % 3, [run], rounds=1,
                        batch_size=2, dropout=False, dtype=torch.float64)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_stacked_engine_names_the_run_and_parameter_of_a_non_finite_initial_model(bad):
    """Was: 'params hold NaN or inf (the initial model must be finite)', without runs[r] or the parameter."""
    model = nn.Linear(6, 3).double()
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    params["bias"][1] = bad
    with pytest.raises(ValueError, match=r"^runs\[0\]\.params: parameter 'bias' holds NaN or inf \(the initial model "
                                         r"must be finite\)$"):
        _engine_with(model, params)
    with torch.no_grad():
        model.weight[0, 0] = bad
    with pytest.raises(ValueError, match=r"^model: parameter 'weight' holds NaN or inf"):  # params=None: the model
        _engine_with(model, None)


# --------------------------------------------------------------------------- float64 -> float32 overflow
def _run(params=None):
    return RunSpec(make_algorithm("fednova", sgd(0.1)), [np.arange(0, 4), np.arange(4, 8)], FixedSteps([1, 2]), seed=0,
                   params=params)


def _features(bad_row=None):
    torch.manual_seed(0)
    x = torch.randn(8, 6, dtype=torch.float64)
    if bad_row is not None:
        x[bad_row, 2] = 1e39  # finite in float64, beyond float32's 3.4e38
    return x


_OVERFLOW = r"overflows torch\.float32: finite as torch\.float64, inf once cast"


def test_initial_model_that_overflows_float32_is_named_so():
    """Was: 'runs[0].params: parameter 'bias' holds NaN or inf (the initial model must be finite)'."""
    model = nn.Linear(6, 3)
    params = {n: p.detach().double().clone() for n, p in model.named_parameters()}
    params["bias"][1] = 1e39
    with pytest.raises(ValueError, match=rf"^runs\[0\]\.params: parameter 'bias' {_OVERFLOW} \(the initial model must "
                                         r"be finite\)$"):
        TensorEngine(model, _features(), torch.arange(8) % 3, [_run(params)], rounds=1, batch_size=2, dropout=False,
                     dtype=torch.float32)
    params["bias"][1] = float("inf")  # a real inf: the old message
    with pytest.raises(ValueError, match=r"^runs\[0\]\.params: parameter 'bias' holds NaN or inf \(the initial model"):
        TensorEngine(model, _features(), torch.arange(8) % 3, [_run(params)], rounds=1, batch_size=2, dropout=False,
                     dtype=torch.float32)


@pytest.mark.parametrize("which", ["features", "test_features"])
def test_tensor_engine_refuses_features_that_overflow_float32(which):
    """Was: accepted, the engine's float32 features holding inf (training on them gives NaN)."""
    good, bad = _features(), _features(bad_row=5)
    kwargs = dict(rounds=1, batch_size=2, dropout=False, dtype=torch.float32)
    feats, tests = (bad, good) if which == "features" else (good, bad)
    with pytest.raises(ValueError, match=rf"^{which}: row 5 {_OVERFLOW}$"):
        TensorEngine(nn.Linear(6, 3), feats, torch.arange(8) % 3, [_run()], test_features=tests,
                     test_labels=torch.arange(8) % 3, **kwargs)
    # float64 engine: 1e39 is a feature like any other
    engine = TensorEngine(nn.Linear(6, 3).double(), feats, torch.arange(8) % 3, [_run()], test_features=tests,
                          test_labels=torch.arange(8) % 3, **{**kwargs, "dtype": torch.float64})
    assert engine._features.dtype == torch.float64 and math.isfinite(float(engine._features.abs().max()))


def test_train_clients_names_the_client_whose_features_overflow_float32():
    """Was: 'features hold NaN or inf (row 5)' — TensorEngine's argument and row, not client_x[1]'s sample 1."""
    x = _features(bad_row=5)
    ys = [torch.arange(4) % 3, torch.arange(4) % 3]
    with pytest.raises(ValueError, match=rf"^client_x\[1\] {_OVERFLOW} \(sample 1\)$"):
        train_clients(nn.Linear(6, 3), [x[:4], x[4:]], ys, rounds=1, lr=0.1, batch_size=2, dtype=torch.float32)
    x[5, 2] = float("nan")
    with pytest.raises(ValueError, match=r"^client_x\[1\] holds NaN or inf \(sample 1\)$"):  # as before
        train_clients(nn.Linear(6, 3), [x[:4], x[4:]], ys, rounds=1, lr=0.1, batch_size=2, dtype=torch.float32)


def test_reversed_numpy_views_train_as_their_copies():
    """Numpy views with a negative stride (``x[::-1]``: a reversed or flipped data set) were refused by train_clients
    with "client_x[0] must be a tensor or array (At least one stride in the given numpy array is negative ...)", and
    made StackedEngine and reference_run fail inside torch (``data.train_images[:, :, ::-1]``, a horizontally
    flipped image set). They are copied now: the histories equal those of contiguous copies, bit for bit."""
    from types import SimpleNamespace

    from fedlib.engines.stacked import StackedEngine

    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((16, 6))[::-1], (np.arange(16) % 3)[::-1]
    assert x.strides[0] < 0 and y.strides[0] < 0
    runs = []
    for xs, ys in (([x[:6], x[6:]], [y[:6], y[6:]]),
                   ([np.ascontiguousarray(x[:6]), np.ascontiguousarray(x[6:])], [y[:6].copy(), y[6:].copy()])):
        torch.manual_seed(0)
        out = train_clients(nn.Linear(6, 3).double(), xs, ys, rounds=2, lr=0.1, batch_size=4, algorithms=("fednova",))
        runs.append([{k: v for k, v in rec.items() if k != "time_s"} for rec in out["fednova"]])
    assert repr(runs[0]) == repr(runs[1])  # NaN test metrics (no test set): compared as text, floats exactly

    images = rng.integers(0, 256, (12, 4, 4, 3), dtype=np.uint8)
    losses = []
    for imgs in (images[:, :, ::-1], np.ascontiguousarray(images[:, :, ::-1])):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(3, 2, 3), nn.Flatten(), nn.Linear(8, 2)).double()
        run = RunSpec(make_algorithm("fednova", sgd(0.1)), [np.arange(4), np.arange(4, 12)], FixedSteps([1, 2]))
        engine = StackedEngine(model, SimpleNamespace(train_images=imgs, train_labels=np.arange(12) % 2), [run],
                               rounds=1, batch_size=4, augment=False, dropout=False)
        losses.append(engine.run_round()[0].client_losses.tolist())
    assert losses[0] == losses[1]


# --------------------------------------------------------------------------- TensorEngine's training-mode check
class _Encoder(nn.Module):
    """A small Transformer classifier: (B, S, d) -> (B, K)."""

    def __init__(self, dropout: float):
        super().__init__()
        self.enc = nn.TransformerEncoderLayer(8, 2, 16, dropout=dropout, batch_first=True)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(self.enc(x).mean(1))


def _sequence_clients(dtype=torch.float64):
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(12, 5, 8, generator=g, dtype=dtype) for _ in range(2)]
    ys = [torch.randint(0, 3, (12,), generator=g) for _ in range(2)]
    return xs, ys


@pytest.mark.filterwarnings("ignore:There is a performance drop:UserWarning")  # vmap over CPU attention
def test_a_transformer_without_dropout_is_not_refused_by_the_training_mode_check():
    """The check ran the model under ``torch.no_grad()``, where an eval-mode TransformerEncoderLayer /
    MultiheadAttention takes torch's fused inference path, which rounds differently from the training
    path: a dropout-free Transformer (trained exactly by the engine at d562d43, reference difference
    ~1e-16) was refused as 'computes something else in training mode'. The check now runs with
    gradients on, as the engine does."""
    from fedlib.experiments.custom import reference_differences, train_clients

    torch.manual_seed(0)
    model = _Encoder(dropout=0.0).double()
    xs, ys = _sequence_clients()
    result = train_clients(model, xs, ys, rounds=1, epochs="1", batch_size=4, dtype=torch.float64)
    diffs = reference_differences(model, result)
    assert set(diffs) == {"fedavg", "fednova"} and max(diffs.values()) < 1e-10, diffs


def test_a_transformer_with_attention_dropout_is_still_refused():
    """MultiheadAttention's attention dropout is functional (``dropout_p if self.training``), not an
    ``nn.Dropout`` layer: the engine would run it silently off, so the check must still refuse it."""
    from fedlib.experiments.custom import train_clients

    torch.manual_seed(0)
    xs, ys = _sequence_clients()
    with pytest.raises(ValueError, match="something else in training mode than in eval mode"):
        train_clients(_Encoder(dropout=0.3).double(), xs, ys, rounds=1, epochs="1", batch_size=4,
                      dtype=torch.float64)


def test_the_training_mode_check_names_a_model_that_does_not_return_a_tensor():
    """A model returning a tuple was told it 'computes something else in training mode than in eval
    mode' (the outputs were equal); the check now says what is wrong: logits must be a tensor."""
    from fedlib.engines.stacked import _check_training_mode

    class Pair(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 3)

        def forward(self, x):
            return self.lin(x), x

    with pytest.raises(ValueError, match=r"logits \(B, K\), a tensor; got a tuple"):
        _check_training_mode(Pair(), torch.randn(8, 4))


# ------------------------------------------------------------------------- a StackedEngine subclass with its own data
def _feature_engine_class():
    """A subclass that feeds its own data through the documented input hooks (train_batch /
    test_batches), as the stacked engine's docstring invites, without TensorEngine's private probe."""
    from types import SimpleNamespace

    import torch

    from fedlib.engines.stacked import StackedEngine

    class FeatureEngine(StackedEngine):
        def __init__(self, model, x, y, runs, **kw):
            stub = SimpleNamespace(train_images=torch.zeros((x.shape[0], 1, 1, 1), dtype=torch.uint8), train_labels=y)
            super().__init__(model, stub, runs, path="vmap", augment=False, padding=0, mean=(0.0,), std=(1.0,), **kw)
            self._feat = x.to(self.device, self.dtype)

        def train_batch(self, a):
            idx, mask = self.step_indices(a)
            idx = idx.t()
            return self._feat[idx], self._train_labels[idx], mask

        def test_batches(self):
            return iter(())

    return FeatureEngine


def _feature_problem():
    import torch

    from fedlib.algorithms import make_algorithm
    from fedlib.engines.stacked import RunSpec
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd

    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 6, generator=g)
    y = torch.randint(0, 3, (64,), generator=g)
    parts = [torch.arange(0, 32).numpy(), torch.arange(32, 64).numpy()]
    runs = [RunSpec(make_algorithm("fedavg", sgd(0.1)), parts, FixedSteps([2, 3]), seed=0)]
    return x, y, runs


def test_subclass_with_its_own_data_is_not_refused_for_the_placeholder_images():
    """8f5fb65 ran the vmap path's training-mode check on the stored images at construction: a
    subclass bringing its own data (train_batch) had only placeholders there, and a model for its
    features was refused ('could not be applied'). The check now runs on its first batch."""
    import math

    import pytest
    import torch
    from torch import nn

    FeatureEngine = _feature_engine_class()
    x, y, runs = _feature_problem()
    torch.manual_seed(0)
    engine = FeatureEngine(nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)), x, y, runs, rounds=2,
                           batch_size=8)
    engine.train()
    assert len(engine.history) == 2 and all(math.isfinite(rec.train_loss) for r in engine.history for rec in r)

    class NoisyInTraining(nn.Module):  # training-only behaviour the engine would silently drop
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(6, 3)

        def forward(self, z):
            z = self.lin(z)
            return z + torch.randn_like(z) if self.training else z

    engine = FeatureEngine(NoisyInTraining(), x, y, runs, rounds=2, batch_size=8)  # its data is not known yet
    for _ in range(2):  # refused again on the next call, not trained without the check
        with pytest.raises(ValueError, match="training mode than in eval mode"):
            engine.run_round()
    assert engine.round_index == 0 and not engine.history


# --------------------------------------------------------------------------- runs of one name
PARTS = [np.arange(0, 4), np.arange(4, 8)]


def _named_run(name: str, seed: int = 0) -> RunSpec:
    return RunSpec(make_algorithm("fednova", sgd(0.1)), PARTS, FixedSteps([1, 2]), seed=seed, name=name,
                   lr_at=lambda t: 0.1)


def _named_engine(runs):
    torch.manual_seed(0)
    return TensorEngine(nn.Linear(6, 3).double(), torch.randn(8, 6, dtype=torch.float64), torch.arange(8) % 3, runs,
                        rounds=1, batch_size=2, dropout=False, dtype=torch.float64)


def test_stacked_engine_refuses_two_runs_of_one_name():
    """Two runs named alike were accepted: their records, the checkpoint's run_names order check and results keyed
    by name (reference_differences) could not tell them apart (one silently replaced the other)."""
    with pytest.raises(ValueError, match=r"\['fednova'\] are given to more than one run"):
        _named_engine([_named_run("fednova", 0), _named_run("fednova", 1)])


def test_stacked_engine_still_takes_unnamed_and_distinct_runs():
    """The default empty name may repeat (scripts/measure_host_planning.py, train_runs without names)."""
    assert _named_engine([_named_run(""), _named_run("")]).num_runs == 2
    assert _named_engine([_named_run("a"), _named_run("b")]).num_runs == 2


def test_reference_differences_refuses_runs_without_distinct_names():
    """Keyed by run name: two unnamed runs gave one entry (the second run's difference replaced the first's)."""
    engine = _named_engine([_named_run("", 0), _named_run("", 1)])
    engine.train()
    torch.manual_seed(0)
    model = nn.Linear(6, 3).double()
    with pytest.raises(ValueError, match="distinct names"):
        reference_differences(model, {"engine": engine})


# --------------------------------------------------------------------------- train_clients / reference_differences
def _three_clients():
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

    xs, ys = _three_clients()
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

    xs, ys = _three_clients()
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

    xs, ys = _three_clients()
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


# ---------------------------------------------------------------- train_clients' momentum and test set, a run's lr_at
@pytest.mark.parametrize("solver, mu", [("sgd", 0.0), ("prox", 0.5)])
def test_train_clients_refuses_momentum_for_a_solver_without_a_buffer(solver, mu):
    """train_clients(..., solver="sgd", momentum=0.5) trained plain SGD: the momentum was dropped (mu was
    already refused this way)."""
    import torch
    from torch import nn

    from fedlib.experiments.custom import train_clients

    xs = [torch.randn(8, 4), torch.randn(6, 4)]
    ys = [torch.randint(0, 3, (8,)), torch.randint(0, 3, (6,))]
    with pytest.raises(ValueError, match=rf"^momentum: solver '{solver}' has no momentum buffer"):
        train_clients(nn.Linear(4, 3), xs, ys, rounds=1, solver=solver, mu=mu, momentum=0.5)


def test_stacked_engine_names_the_runs_lr_at():
    import numpy as np
    import torch
    from torch import nn

    from fedlib.algorithms import make_algorithm
    from fedlib.engines.stacked import RunSpec
    from fedlib.experiments.custom import TensorEngine
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd

    x, y = torch.randn(12, 4, dtype=torch.float64), torch.arange(12) % 3
    run = RunSpec(make_algorithm("fednova", sgd(0.1)), [np.arange(4), np.arange(4, 12)], FixedSteps([1, 2]),
                  lr_at=lambda t: 0.0)
    with pytest.raises(ValueError, match=r"^runs\[0\]\.lr_at\(0\) must return the round's client learning rate"):
        TensorEngine(nn.Linear(4, 3).double(), x, y, [run], rounds=1, batch_size=4).train()


@pytest.mark.parametrize("test_x_shape, test_y_len, message", [
    ((3, 5), 3, r"^test_x must be \(n, \*feature_shape\) with the clients' feature shape \(4,\), got shape \(3, 5\)"),
    ((3, 4), 2, r"^test_y must hold one label per row of test_x \(3\), got shape \(2,\)")])
def test_train_clients_names_test_x_and_test_y(test_x_shape, test_y_len, message):
    """A test set of the wrong feature shape, or with too few labels, was refused as 'test_features /
    test_labels must match the training features' shape': TensorEngine's parameters, which a caller of
    train_clients never passed."""
    import torch
    from torch import nn

    from fedlib.experiments.custom import train_clients

    xs = [torch.randn(8, 4), torch.randn(6, 4)]
    ys = [torch.randint(0, 3, (8,)), torch.randint(0, 3, (6,))]
    with pytest.raises(ValueError, match=message):
        train_clients(nn.Linear(4, 3), xs, ys, rounds=1, test_x=torch.randn(*test_x_shape),
                      test_y=torch.zeros(test_y_len, dtype=torch.long))


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


def test_train_clients_docstring_documents_every_parameter_and_the_rate_schedules_it_names():
    """train_clients' docstring names each of its parameters, and what it says of ``lr_decay`` holds: ``"constant"``
    (default) keeps ``lr`` every round, ``"step"`` divides it by 10 after 50 % and by 100 after 75 % of the rounds, and
    a RunSpec built by hand for TensorEngine (the route it points to for a solver object) has the step decay unless
    given ``lr_at``. Before: ``rounds``, ``batch_size``, ``seed``, ``device`` and ``dropout`` were not described and
    ``lr_decay`` only named ('it would clash with lr, momentum, mu, weight_decay and lr_decay'), so a user moving to
    ``RunSpec(make_algorithm(name, solver), ...)`` got the step decay without a word."""
    import inspect
    import re

    doc = train_clients.__doc__
    missing = [p for p in inspect.signature(train_clients).parameters if not re.search(rf"``[^`]*\b{p}\b[^`]*``", doc)]
    assert missing == [], missing
    xs, ys = _clients()
    lr, rounds = 0.05, 4
    constant = train_clients(nn.Linear(6, 3), xs, ys, rounds=rounds, lr=lr, epochs="1", dropout=False)
    step = train_clients(nn.Linear(6, 3), xs, ys, rounds=rounds, lr=lr, epochs="1", lr_decay="step", dropout=False)
    assert [h["lr"] for h in constant["fednova"]] == [lr] * 4
    assert [h["lr"] for h in step["fednova"]] == pytest.approx([lr, lr, lr / 10, lr / 100], rel=1e-15)  # rounds 2, 3
    parts = [np.arange(0, 5), np.arange(5, 22), np.arange(22, 62)]
    by_hand = [RunSpec(make_algorithm("fednova", sgd(lr)), parts, FixedSteps([1, 1, 1]), name="default"),
               RunSpec(make_algorithm("fednova", sgd(lr)), parts, FixedSteps([1, 1, 1]), name="constant",
                       lr_at=lambda t: lr)]
    engine = TensorEngine(nn.Linear(6, 3), torch.cat(xs), torch.cat(ys), by_hand, rounds=rounds, dropout=False)
    records = engine.train()
    assert [rec[0].lr for rec in records] == pytest.approx([lr, lr, lr / 10, lr / 100], rel=1e-15)
    assert [rec[1].lr for rec in records] == [lr] * 4


def test_features_that_carry_an_autograd_graph_are_taken_as_data():
    """Features computed by a frozen encoder without torch.no_grad() (the library's advice for a frozen part:
    precompute its features) carry an autograd graph. Before: the engine kept it, every local step differentiated
    through it too (3 rounds of a 64-64-10 MLP on 1,400 samples: 3.6 s instead of 0.2 s), and
    reference_differences' per-client loop chained one graph through all its steps and warned 'Converting a
    tensor with requires_grad=True to a scalar'. Now the features are detached: the same result, no graph, no
    warning, and the encoder gets no gradient."""
    import warnings

    torch.manual_seed(0)
    xs, ys = _clients()
    encoder = nn.Linear(6, 6).double()
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)).double()
    encoded = [encoder(x.double()) for x in xs]
    test_x = encoder(xs[2].double())
    assert all(x.requires_grad for x in encoded)
    kwargs = dict(rounds=2, lr=0.1, epochs="1-3", batch_size=4, test_y=ys[2])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = train_clients(model, encoded, ys, test_x=test_x, **kwargs)
        differences = reference_differences(model, out)
    assert max(differences.values()) < 1e-10, differences
    engine = out["engine"]
    assert not engine._features.requires_grad and not engine._test_features.requires_grad
    assert encoder.weight.grad is None
    plain = train_clients(model, [x.detach() for x in encoded], ys, test_x=test_x.detach(), **kwargs)
    for name in ("fedavg", "fednova"):
        assert out[name] == plain[name]
    direct = TensorEngine(model, torch.cat(encoded), torch.cat(ys), [RunSpec(make_algorithm("fednova", sgd(0.1)),
                          [np.arange(5), np.arange(5, 22)], FixedSteps([1, 2]))], rounds=1, dtype=torch.float64)
    assert not direct._features.requires_grad


@pytest.mark.parametrize("where", ["labels", "test_labels"])
def test_tensor_engine_names_labels_the_model_has_no_logit_for(where):
    """Labels 0..4 for a model with 3 logits: TensorEngine took them and the first round failed with torch's
    'index 3 is out of bounds for dimension 2 with size 3' (a device-side assert on CUDA), naming neither the
    labels nor K (train_clients checked them, TensorEngine did not). Now refused at construction, by name."""
    labels = torch.arange(8) % 3
    bad = torch.arange(8) % 5
    kwargs = {"test_features": _features(), "test_labels": bad if where == "test_labels" else labels}
    with pytest.raises(ValueError, match=rf"^{where}: labels must lie in 0\.\.2 \(the model has 3 logits\), got 0\.\.4$"):
        TensorEngine(nn.Linear(6, 3).double(), _features(), bad if where == "labels" else labels, [_run()], rounds=1,
                     batch_size=2, **kwargs)
    engine = TensorEngine(nn.Linear(6, 5).double(), _features(), bad, [_run()], rounds=1, batch_size=2,
                          test_features=_features(), test_labels=bad)  # five logits: the same labels train
    assert np.isfinite(engine.run_round()[0].test_loss)


@pytest.mark.parametrize("seed, epochs", [("0", "2"), (-1, "2"), (1.5, "1-3"), (None, "1-3")])
def test_train_clients_names_its_seed(seed, epochs):
    """train_clients(..., seed=<not an integer >= 0>) is a ValueError naming ``seed``, the caller's argument.
    Before, it was refused (for a fixed epoch count) as "runs[0].seed must be an integer >= 0": the engine's
    RunSpec, which a caller of train_clients never built, and only after the model had been probed."""
    xs, ys = _clients()
    with pytest.raises(ValueError, match=rf"^seed must be an integer >= 0, got {re.escape(repr(seed))}$"):
        train_clients(nn.Linear(6, 3), xs, ys, rounds=1, epochs=epochs, seed=seed)


@pytest.mark.parametrize("shape_of, message", [
    (lambda y: nn.functional.one_hot(y, 3), r"^client_y\[0\] must be a 1-d tensor of n_i integer class labels, got "
                                            r"shape \(5, 3\) \(one-hot rows\? give y\.argmax\(1\)\)$"),
    (lambda y: y[:, None], r"^client_y\[0\] must be a 1-d tensor of n_i integer class labels, got shape \(5, 1\) "
                           r"\(a column\? give y\[:, 0\]\)$"),
    (lambda y: y[None, None, :], r"^client_y\[0\] must be a 1-d tensor of n_i integer class labels, got shape "
                                 r"\(1, 1, 5\)$")])
def test_train_clients_names_labels_that_are_not_one_per_sample(shape_of, message):
    """Labels of a client given one-hot, as a column or with more dimensions are a ValueError naming client_y[i],
    its shape and the usual repair. Before, all three were 'client 0: needs n_i >= 1 samples and one label per
    sample, got (5, 6) / (5, 3)': a client with samples, named by number, with no hint at what was wrong."""
    xs, ys = _clients()
    with pytest.raises(ValueError, match=message):
        train_clients(nn.Linear(6, 3), xs, [shape_of(ys[0])] + ys[1:], rounds=1)


def test_train_clients_suggests_no_repair_for_labels_of_no_column():
    """Labels of shape (n_i, 0) are refused naming client_y[i] and the shape with no repair: neither hint applies
    (y[:, 0] and y.argmax(1) both raise on an empty second dimension). Before, they got "(one-hot rows? give
    y.argmax(1))", the hint for rows of several columns."""
    xs, ys = _clients()
    with pytest.raises(ValueError, match=r"^client_y\[0\] must be a 1-d tensor of n_i integer class labels, got "
                                         r"shape \(5, 0\)$"):
        train_clients(nn.Linear(6, 3), xs, [ys[0][:, None][:, :0]] + ys[1:], rounds=1)
    with pytest.raises(IndexError):  # the hint's repair would not run
        ys[0][:, None][:, :0].argmax(1)


def test_train_clients_docstring_says_its_server_optimizer_is_plain_and_the_route_to_another():
    """train_clients' runs use the plain server optimizer (eq. 4 as written), and its docstring says so and how to
    run server momentum on one's own model (a RunSpec whose algorithm has it, in TensorEngine, which trains). Before,
    the docstring named the route for a local solver object and a sampler but was silent on the server: a user
    looking for server momentum could not tell whether train_clients had it."""
    from fedlib.server import momentum
    from fedlib.solvers import momentum_sgd

    doc = " ".join(train_clients.__doc__.split())
    assert "The server optimizer is plain" in doc
    assert "RunSpec(make_algorithm(name, solver, fedlib.server.momentum(0.9)), ...)" in doc
    xs, ys = _clients()
    runs = train_clients(nn.Linear(6, 3), xs, ys, rounds=1, epochs="1")
    assert [run.algorithm.server.name for run in runs["engine"].runs] == ["plain", "plain"]
    parts = [np.arange(0, 5), np.arange(5, 22), np.arange(22, 62)]
    spec = RunSpec(make_algorithm("fednova", momentum_sgd(0.05), momentum(0.9)), parts, FixedSteps([1, 2, 3]),
                   lr_at=lambda t: 0.05)
    engine = TensorEngine(nn.Linear(6, 3), torch.cat(xs), torch.cat(ys), [spec], rounds=2)
    assert len(engine.train()) == 2 and engine.runs[0].algorithm.server.name == "momentum"

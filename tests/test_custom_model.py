"""``fedlib.experiments.custom``: a user-defined module on per-client tensors through the stacked engine."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from fedlib.experiments.custom import train_clients


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
    with pytest.raises(ValueError, match="client 1"):
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

"""Second pass over what tests/test_new_user_dec4.py left: a new user's own image model through
StackedEngine, the dtype train_clients trains in, population weights given as counts, a bounded
CIFAR-10 download, and messages (plain numbers; a bool is no step count)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fedlib.algorithms import make_algorithm
from fedlib.engines.stacked import RunSpec, StackedEngine
from fedlib.schedules import FixedSteps
from fedlib.solvers import sgd
from torch_threads import one_torch_thread  # noqa: F401 (autouse fixture)

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


def _clients(seed=0):
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

    xs, ys = _clients()
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


def test_population_weights_given_as_counts_are_refused_with_the_fix():
    from fedlib.engines.reference import run_sequential
    from fedlib.problems import random_quadratic
    from fedlib.rule import aggregate, fedavg_weights
    from fedlib.sampling import full_participation

    problem = random_quadratic(num_clients=3, dim=2, seed=0)
    n = np.array([10, 30, 60])
    algo = make_algorithm("fednova", sgd(lr=0.01))
    fix = r"counts such as the clients' sample numbers n give p = n / n\.sum\(\)"
    with pytest.raises(ValueError, match=r"^p must sum to 1 \(within 1e-09\), got sum 100\.0: .*" + fix):
        run_sequential(algo, np.zeros(2), problem.grad_fn(), n, FixedSteps([1, 2, 3]), rounds=1)
    for call in (lambda: fedavg_weights(n, [1, 2, 3]), lambda: full_participation(n)):
        with pytest.raises(ValueError, match=r"^p must sum to 1 .*" + fix):
            call()
    run = run_sequential(algo, np.zeros(2), problem.grad_fn(), n / n.sum(), FixedSteps([1, 2, 3]), rounds=1)
    assert np.all(np.isfinite(run.state.params))
    # aggregate takes sampling weights too, which need not sum to 1: counts are taken as such and
    # scale the change (documented), never refused: FedAvg's by n, FedNova's by n**2 (tau_eff and w)
    deltas = [np.array([1.0, -2.0]), np.array([0.5, 0.0]), np.array([-1.0, 3.0])]
    for algorithm, power in (("fedavg", 1), ("fednova", 2)):
        by_count = aggregate(deltas, n, [1.0, 2.0, 4.0], algorithm).change
        by_p = aggregate(deltas, n / n.sum(), [1.0, 2.0, 4.0], algorithm).change
        np.testing.assert_allclose(by_count, n.sum() ** power * by_p, rtol=1e-12)


def test_messages_show_plain_numbers_and_a_bool_is_no_step_count():
    from fedlib._validate import check_int, check_positive
    from fedlib.rule import aggregate, fednova_weights

    deltas = [np.ones(1), np.ones(1)]
    with pytest.raises(ValueError) as info:
        aggregate(deltas, [0.5, 0.5], np.array([1.0, 0.0]))
    assert str(info.value) == "a_norms must be > 0 for every client (client 1 has 0.0)"
    with pytest.raises(ValueError) as info:
        aggregate(deltas, [0.5, 0.5], np.array([1.0, -2.0]))
    assert str(info.value) == "a_norms must be non-negative, got min -2.0"
    with pytest.raises(ValueError) as info:
        check_positive("lr", np.float64(-0.5))
    assert str(info.value) == "lr must be a finite number > 0, got -0.5"
    with pytest.raises(ValueError) as info:
        check_int("rounds", np.int64(-3))
    assert str(info.value) == "rounds must be an integer >= 0, got -3"
    for bad in ([True, 2], (3, np.bool_(True))):
        with pytest.raises(ValueError, match=r"^steps must hold integers, got the bool True at index [01]"):
            FixedSteps(bad)
        with pytest.raises(ValueError, match=r"^local_steps must hold integers, got the bool True"):
            fednova_weights([0.5, 0.5], [2.0, 6.0], tau_eff="local_steps", local_steps=bad)
    with pytest.raises(ValueError, match="^local_steps must hold integers, got dtype bool"):  # as before
        fednova_weights([0.5, 0.5], [2.0, 6.0], tau_eff="local_steps", local_steps=[True, True])
    for bad in (True, np.bool_(True)):
        with pytest.raises(ValueError, match="^rounds must be an integer >= 1, got True"):
            check_int("rounds", bad, minimum=1)
    assert FixedSteps([1, 2]).steps == (1, 2) and FixedSteps(np.array([2, 3])).steps == (2, 3)


def test_load_cifar10_download_gives_up_on_a_server_that_never_answers(tmp_path, monkeypatch):
    """A loopback server that accepts connections and never sends a byte (a network dropping
    packets): the download ends with an OSError naming the timeout, and socket's default timeout
    is what it was before."""
    import socket
    import threading

    import torchvision

    from fedlib.data.cifar10 import load_cifar10

    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)  # the kernel completes the handshakes; nobody ever reads or writes
    # without the timeout the download would wait for ever: closing the listener after 30 s resets the
    # connection in its queue, so such a regression fails this test instead of hanging the suite
    watchdog = threading.Timer(30.0, server.close)
    watchdog.start()
    try:
        url = f"http://127.0.0.1:{server.getsockname()[1]}/cifar-10-python.tar.gz"
        monkeypatch.setattr(torchvision.datasets.CIFAR10, "url", url)
        before = socket.getdefaulttimeout()
        with pytest.raises(OSError, match=r"no answer within timeout=0\.2 s.*Without network access to "
                                          + url.replace(".", r"\.")):
            load_cifar10(tmp_path / "data", download=True, timeout=0.2)
        assert socket.getdefaulttimeout() == before
    finally:
        watchdog.cancel()
        server.close()
    for bad in (0, -1.0, float("inf"), True, "60"):
        with pytest.raises(ValueError, match=r"^timeout must be None or a number of seconds > 0"):
            load_cifar10(tmp_path / "data", download=True, timeout=bad)


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

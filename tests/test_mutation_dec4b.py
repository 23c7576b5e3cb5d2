r"""Tests written from a mutation-testing pass (2026-12-04, second) over the code changed between
d562d43 and c3b27eb: the stacked engine's training-mode check (its tolerance, NaN logits, output
shapes), ``reference_differences``' check of the model it is given, ``check_int_array``'s refusal
of a bool among floats, and the bounded CIFAR-10 download. Each test checks a documented behaviour
that a surviving mutant showed the rest of the suite left unchecked; expected values are worked by
hand (the comments show the arithmetic), never stored outputs."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from fedlib.algorithms import make_algorithm
from fedlib.engines.stacked import RunSpec, StackedEngine
from fedlib.schedules import FixedSteps
from fedlib.solvers import sgd
from torch_threads import one_torch_thread  # noqa: F401 (autouse fixture)

TRAINING_MODE = r"model computes something else in training mode than in eval mode, besides its nn\.Dropout layers"


def _images(n=16, size=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    return SimpleNamespace(train_images=torch.randint(0, 256, (n, size, size, 3), dtype=torch.uint8, generator=g),
                           train_labels=torch.randint(0, 3, (n,), generator=g))


def _run():
    return RunSpec(make_algorithm("fedavg", sgd(lr=0.1)), [np.arange(0, 8), np.arange(8, 16)],
                   FixedSteps([1, 2]), seed=0)


def _engine(model, dtype=None):
    return StackedEngine(model, _images(), [_run()], rounds=1, path="vmap", batch_size=4, augment=False, dtype=dtype)


class _Offset(nn.Module):
    """Zero logits ``(B, 3)`` in eval mode; in training mode ``offset`` added to every logit."""

    def __init__(self, offset: float, dtype=torch.float32):
        super().__init__()
        self.lin = nn.Linear(2 * 2 * 3, 3, dtype=dtype)
        nn.init.zeros_(self.lin.weight)
        nn.init.zeros_(self.lin.bias)
        self.offset = offset

    def forward(self, x):
        z = self.lin(x.flatten(1))
        return z + self.offset if self.training else z


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_training_mode_tolerance_is_64_epsilons_of_a_scale_of_at_least_one(dtype):
    """The outputs are compared up to 64 machine epsilons of max(1, max |eval logits|): here the
    eval logits are all 0, so the scale is 1 and the tolerance 64 eps (float32: 64 * 2^-23 =
    7.63e-6; float64: 64 * 2^-52 = 1.42e-14). Half of it passes (rounding), twice of it is refused
    (a scale of 0 instead of the floor 1 would refuse the first; a looser tolerance would pass the
    second)."""
    eps = torch.finfo(dtype).eps
    tol = 64 * eps * 1.0
    _engine(_Offset(0.5 * tol, dtype), dtype)
    with pytest.raises(ValueError, match=TRAINING_MODE):
        _engine(_Offset(2.0 * tol, dtype), dtype)
    with pytest.raises(ValueError, match=TRAINING_MODE):  # 1e-4 is far above 64 eps in float32
        _engine(_Offset(1e-4, dtype), dtype)


class _NaNColumn(nn.Module):
    """Logits whose last column is NaN in both modes (e.g. a log of a negative number): the same in
    training and eval mode, so not a training-only behaviour."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2 * 2 * 3, 3)

    def forward(self, x):
        z = self.lin(x.flatten(1))
        return torch.cat([z[:, :2], torch.full_like(z[:, 2:], float("nan"))], dim=1)


def test_training_mode_check_counts_nan_logits_in_both_modes_as_equal():
    """NaN where both modes give NaN is no difference between the modes (equal_nan): the model is not
    refused as computing 'something else in training mode' (its NaN loss is another matter)."""
    _engine(_NaNColumn())


class _NarrowInTraining(nn.Module):
    """Zero logits, (B, 3) in eval mode but (B, 1) in training mode (a branch on self.training)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2 * 2 * 3, 3)
        nn.init.zeros_(self.lin.weight)
        nn.init.zeros_(self.lin.bias)

    def forward(self, x):
        z = self.lin(x.flatten(1))
        return z[:, :1] if self.training else z


def test_training_mode_check_refuses_other_output_shapes_even_where_they_broadcast():
    """Zeros (8, 1) and zeros (8, 3) are allclose by broadcasting; the shapes differ, so refused."""
    with pytest.raises(ValueError, match=TRAINING_MODE):
        _engine(_NarrowInTraining())


def test_reference_differences_refuses_a_model_with_other_parameters_than_the_runs():
    """A model holding the runs' initial parameters under the same names plus an extra layer, or
    only some of them, is not the model given to train_clients: refused by name, not a KeyError or
    a reference loop run on another network."""
    from fedlib.experiments.custom import reference_differences, train_clients

    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(n, 5, generator=g, dtype=torch.float64) for n in (4, 6)]
    ys = [torch.randint(0, 3, (x.shape[0],), generator=g) for x in xs]
    model = nn.Sequential(nn.Linear(5, 3, dtype=torch.float64))
    result = train_clients(model, xs, ys, rounds=1, batch_size=2, algorithms=("fedavg",))
    assert max(reference_differences(model, result).values()) < 1e-10  # the model itself passes
    bigger = nn.Sequential(nn.Linear(5, 3, dtype=torch.float64), nn.Linear(3, 3, dtype=torch.float64))
    bigger[0].load_state_dict(model[0].state_dict())  # same "0.weight", "0.bias"; extra "1.weight", "1.bias"
    smaller = nn.Sequential(nn.Linear(5, 3, bias=False, dtype=torch.float64))
    with torch.no_grad():
        smaller[0].weight.copy_(model[0].weight)  # "0.weight" only
    for other in (bigger, smaller):
        with pytest.raises(ValueError, match=r"model's parameters are not the initial model of run 'fedavg'"):
            reference_differences(other, result)


def test_a_bool_among_whole_floats_is_no_step_count():
    """np.asarray([True, 2.0]) is the float array [1.0, 2.0], whose whole floats check_int_array
    accepts: the bool must be found in the list itself, for float lists as for int lists."""
    from fedlib._validate import check_int_array

    for bad, at in (([True, 2.0], 0), ((3.0, np.bool_(False)), 1)):
        with pytest.raises(ValueError, match=rf"^steps must hold integers, got the bool (True|False) at index {at}$"):
            check_int_array("steps", bad)
        with pytest.raises(ValueError, match=rf"^steps must hold integers, got the bool (True|False) at index {at}"):
            FixedSteps(bad)
    assert check_int_array("steps", [1.0, 2.0]).tolist() == [1, 2]  # whole floats without a bool: accepted


class _FakeCifar10:
    """Stands in for torchvision.datasets.CIFAR10: records socket's default timeout when the download
    starts and fails as ``error`` (no network is touched)."""

    url = "https://example.invalid/cifar-10-python.tar.gz"
    seen: list = []
    error: Exception = OSError("unreachable")

    def __init__(self, root, train=True, download=False):
        import socket

        type(self).seen.append(socket.getdefaulttimeout())
        raise type(self).error


def test_load_cifar10_bounds_both_downloads_and_restores_the_timeout(tmp_path, monkeypatch):
    """The timeout is socket's default during the first download (no folder yet) and during the
    download that completes an interrupted extraction (a batch folder lacking files), and afterwards
    the default is what it was, also when the download fails."""
    import socket
    import urllib.error

    import torchvision

    from fedlib.data.cifar10 import BATCH_FOLDER, TRAIN_FILES, load_cifar10

    monkeypatch.setattr(torchvision.datasets, "CIFAR10", _FakeCifar10)
    monkeypatch.setattr(_FakeCifar10, "seen", [])
    before = socket.getdefaulttimeout()
    partial = tmp_path / "partial"
    (partial / BATCH_FOLDER).mkdir(parents=True)
    (partial / BATCH_FOLDER / TRAIN_FILES[0]).write_bytes(b"")  # an interrupted extraction
    for root in (tmp_path / "fresh", partial):
        with pytest.raises(OSError, match=r"CIFAR-10 download into .* failed \(OSError: unreachable\)"):
            load_cifar10(root, download=True, timeout=0.25)
        assert socket.getdefaulttimeout() == before
    assert _FakeCifar10.seen == [0.25, 0.25]

    # a timeout torchvision reports as a URLError whose reason is a TimeoutError names the timeout
    monkeypatch.setattr(_FakeCifar10, "error", urllib.error.URLError(TimeoutError("timed out")))
    with pytest.raises(OSError, match=r"no answer within timeout=0\.25 s"):
        load_cifar10(tmp_path / "fresh", download=True, timeout=0.25)
    # a corrupt archive (torchvision: RuntimeError, md5 mismatch) gets the message on installing it by hand
    monkeypatch.setattr(_FakeCifar10, "error", RuntimeError("File not found or corrupted."))
    with pytest.raises(OSError, match=r"failed \(RuntimeError: File not found or corrupted\.\)\. Without network "
                                      r"access to https://example\.invalid/cifar-10-python\.tar\.gz"):
        load_cifar10(tmp_path / "fresh", download=True, timeout=0.25)
    assert socket.getdefaulttimeout() == before


class _InfColumnNoisy(_Offset):
    """Logits with an infinite last column in both modes, and ``offset`` added in training mode."""

    def forward(self, x):
        z = super().forward(x)
        return torch.cat([z[:, :2], torch.full_like(z[:, 2:], float("inf"))], dim=1)


def test_an_infinite_logit_does_not_widen_the_training_mode_tolerance():
    """The scale is the largest finite |logit| (inf counts as 0): an infinite column would otherwise
    make the tolerance infinite and pass any training-only offset; 1e-4 is far above 64 eps."""
    _engine(_InfColumnNoisy(0.0))  # inf in both modes, nothing else different: accepted
    with pytest.raises(ValueError, match=TRAINING_MODE):
        _engine(_InfColumnNoisy(1e-4))

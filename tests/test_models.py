"""VGG-11 of the official FedNova code: size, layout, output, seeded init."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from fedlib.models import VGG11_NUM_PARAMETERS, count_parameters, scaled_width, vgg11


@pytest.fixture(scope="module")
def full():
    return vgg11(seed=0)


def _same(a: nn.Module, b: nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_parameter_count(full):
    assert count_parameters(full) == VGG11_NUM_PARAMETERS == 9_750_922


def test_flat_layout(full):
    assert isinstance(full, nn.Sequential) and len(full) == 29
    kinds = [type(m).__name__ for m in full]
    assert kinds[21:] == ["Flatten", "Dropout", "Linear", "ReLU", "Dropout", "Linear", "ReLU", "Linear"]
    convs = [m for m in full if isinstance(m, nn.Conv2d)]
    assert [c.out_channels for c in convs] == [64, 128, 256, 256, 512, 512, 512, 512]
    assert all(c.kernel_size == (3, 3) and c.padding == (1, 1) for c in convs)
    assert sum(isinstance(m, nn.MaxPool2d) for m in full) == 5
    assert all(not any(True for _ in m.children()) for m in full)  # only leaf layers


def test_init_distribution(full):
    for m in full:
        if isinstance(m, nn.Conv2d):
            assert torch.count_nonzero(m.bias) == 0
            expected = math.sqrt(2.0 / (9 * m.out_channels))
            assert abs(m.weight.std().item() / expected - 1) < 0.05
        elif isinstance(m, nn.Linear):
            bound = 1 / math.sqrt(m.in_features)
            assert m.weight.abs().max().item() <= bound and m.bias.abs().max().item() <= bound


def test_output_shape():
    model = vgg11(width=0.125, seed=0).eval()
    out = model(torch.randn(3, 3, 32, 32, generator=torch.Generator().manual_seed(0)))
    assert out.shape == (3, 10) and torch.all(torch.isfinite(out))
    assert vgg11(num_classes=7, width=0.125, seed=0)(torch.zeros(2, 3, 32, 32)).shape == (2, 7)


def test_seeded_determinism_without_global_rng():
    state = torch.get_rng_state()
    a, b, c = vgg11(width=0.25, seed=3), vgg11(width=0.25, seed=3), vgg11(width=0.25, seed=4)
    assert torch.equal(torch.get_rng_state(), state)
    assert _same(a, b) and not _same(a, c)
    g1, g2 = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    assert _same(vgg11(width=0.25, seed=g1), vgg11(width=0.25, seed=g2))


def test_unseeded_uses_global_rng():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        a = vgg11(width=0.125)
        torch.manual_seed(5)
        b = vgg11(width=0.125)
    assert _same(a, b)


def test_small_width():
    small = vgg11(width=0.125, seed=0)
    convs = [m for m in small if isinstance(m, nn.Conv2d)]
    assert [c.out_channels for c in convs] == [8, 16, 32, 32, 64, 64, 64, 64]
    assert [m.out_features for m in small if isinstance(m, nn.Linear)] == [64, 64, 10]
    assert count_parameters(small) < 200_000
    assert scaled_width(64, 0.001) == 1


@pytest.mark.parametrize("channels, width, bad", [
    (64, 0.0, "width"), (64, -1.0, "width"), (64, float("nan"), "width"), (64, float("inf"), "width"),
    (-5, 1.0, "channels"), (0, 1.0, "channels"), (64.7, 1.0, "channels"), (True, 1.0, "channels"),
])
def test_scaled_width_refuses_what_vgg11_refuses(channels, width, bad):
    """A width <= 0 gave 1 channel per layer without a word (vgg11 refuses it), nan and inf numpy's
    'cannot convert' errors, a float channel count a rounded one: the public helper checks its inputs."""
    with pytest.raises(ValueError, match=bad):
        scaled_width(channels, width)


def test_scaled_width_names_a_width_past_float_s_range():
    """Was: scaled_width(512, 1e307) (and vgg11(width=1e307)) raised OverflowError ('cannot convert float infinity
    to integer') from int(round(inf)), scaled_width(10**400, 0.5) OverflowError ('int too large to convert to
    float'), naming neither argument."""
    for channels, width in ((512, 1e307), (64, 1e308), (10 ** 400, 0.5)):
        with pytest.raises(ValueError, match=r"^width: channels \* width = .* is past float's range"):
            scaled_width(channels, width)
    with pytest.raises(ValueError, match=r"^width: channels \* width"):
        vgg11(width=1e307)
    assert scaled_width(512, 1e300) == int(round(512 * 1e300)) and scaled_width(10 ** 20, 0.5) == 5 * 10 ** 19


def test_count_parameters_trainable_only():
    model = vgg11(width=0.125, seed=0)
    total = count_parameters(model)
    model[0].weight.requires_grad_(False)
    assert count_parameters(model, trainable_only=True) == total - model[0].weight.numel()
    with pytest.raises(ValueError, match="module"):
        count_parameters("not a module")
    # numpy's booleans are flags too (check_flag, as every other flag of fedlib); they were refused
    assert count_parameters(model, trainable_only=np.True_) == total - model[0].weight.numel()
    assert count_parameters(model, trainable_only=np.False_) == total


def test_validation():
    with pytest.raises(ValueError, match="width"):
        vgg11(width=0)
    with pytest.raises(ValueError, match="num_classes"):
        vgg11(num_classes=0)
    with pytest.raises(ValueError, match="seed"):
        vgg11(seed=-1)
    with pytest.raises(ValueError, match="dropout"):
        vgg11(dropout=1.0)
    for bad in (None, "0.3", True, float("nan")):  # None and "0.3" gave bare TypeErrors from float() / nn.Dropout
        with pytest.raises(ValueError, match="dropout must lie in"):
            vgg11(width=0.0625, dropout=bad)


@pytest.mark.parametrize("width, seed", [(1.0, 0), (0.125, 3), (0.03, 1)])
def test_weights_are_those_of_skip_init_layers(width, seed):
    """The layers are allocated without torch.nn.utils.skip_init's to_empty (its meta-tensor path imported
    sympy, ~0.3 s a process), and every value is then drawn as before: the same weights bit for bit as layers
    made by skip_init, float32 CPU parameters that require gradients, and the global RNG untouched."""
    import fedlib.models as models

    before = torch.random.get_rng_state()
    net = vgg11(width=width, seed=seed)
    assert torch.equal(torch.random.get_rng_state(), before)
    original = models._uninitialised
    models._uninitialised = nn.utils.skip_init
    try:
        reference = vgg11(width=width, seed=seed)
    finally:
        models._uninitialised = original
    assert [n for n, _ in net.named_parameters()] == [n for n, _ in reference.named_parameters()]
    for p, q in zip(net.parameters(), reference.parameters()):
        assert p.device.type == "cpu" and p.dtype == torch.float32 and p.requires_grad and torch.equal(p, q)


def test_building_the_model_does_not_import_sympy():
    """What made the first vgg11 of a process slow: skip_init's meta-tensor path imported sympy (torch's
    symbolic shapes). Checked in a fresh interpreter."""
    import subprocess
    import sys

    code = "import sys, fedlib.models as m; m.vgg11(width=0.03, seed=0); print('sympy' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "False", proc.stdout + proc.stderr

r"""VGG-11 (no BatchNorm) as in the official FedNova CIFAR-10 experiment.

Chapter 5 (Table 1) trains this network (the official code's VGG-11, paper §6).  Architecture, with
``M`` a 2x2 max-pool of stride 2 and every number a 3x3 convolution (padding 1) of that
many output channels followed by ReLU::

    64, M, 128, M, 256, 256, M, 512, 512, M, 512, 512, M       (32x32x3 -> 1x1x512)
    Dropout(0.5), Linear(512, 512), ReLU, Dropout(0.5), Linear(512, 512), ReLU, Linear(512, 10)

9,750,922 parameters.  Initialisation as the official code: convolution weights
:math:`\mathcal N(0, 2 / (3 \cdot 3 \cdot c_\text{out}))` (He, fan-out), convolution
biases 0, linear layers PyTorch's default (weights
:math:`\mathcal U(-1/\sqrt{f_\text{in}}, 1/\sqrt{f_\text{in}})` via
``kaiming_uniform_(a=sqrt(5))``, biases :math:`\mathcal U(-1/\sqrt{f_\text{in}}, 1/\sqrt{f_\text{in}})`).

Layout
------
:func:`vgg11` returns ONE flat :class:`torch.nn.Sequential` of standard layers only, so
other code can walk it layer by layer (for instance to turn it into a grouped-convolution
network that trains many clients at once).  Indices at ``width=1``::

     0 Conv2d(3, 64)     1 ReLU   2 MaxPool2d
     3 Conv2d(64, 128)   4 ReLU   5 MaxPool2d
     6 Conv2d(128, 256)  7 ReLU   8 Conv2d(256, 256)  9 ReLU  10 MaxPool2d
    11 Conv2d(256, 512) 12 ReLU  13 Conv2d(512, 512) 14 ReLU  15 MaxPool2d
    16 Conv2d(512, 512) 17 ReLU  18 Conv2d(512, 512) 19 ReLU  20 MaxPool2d
    21 Flatten
    22 Dropout(0.5)     23 Linear(512, 512)  24 ReLU
    25 Dropout(0.5)     26 Linear(512, 512)  27 ReLU
    28 Linear(512, 10)

(``state_dict`` keys are therefore ``"0.weight"``, ``"23.bias"``, ... instead of the
official ``features.N`` / ``classifier.N``.)  ReLUs are not in-place (numerically the
same, friendlier to ``torch.func`` transforms).  Inputs must be 32x32: five pools leave
1x1 pixels, so the flattened feature vector has exactly the last channel count.

Seeded initialisation
---------------------
Layers are created without initialisation (as :func:`torch.nn.utils.skip_init` does) and then
initialised in layer order from one :class:`torch.Generator`, so ``vgg11(seed=s)`` gives
the same weights for the same ``s`` on every call and never touches torch's global RNG
(every client starts from the same model, as in the official code; the paper's text does not state the
initialisation).  The weights have
the official distribution but are not bitwise the official ones (those come from torch's
global RNG, including the default init each layer draws on construction).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from ._validate import check_flag, check_in_range, check_int, check_positive
from .rng import torch_generator

__all__ = ["vgg11", "count_parameters", "scaled_width", "VGG11_CFG", "VGG11_NUM_PARAMETERS"]

#: VGG-11's layers, configuration "A" of Simonyan & Zisserman — channel counts and ``"M"`` pools.
VGG11_CFG = (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")
#: Parameter count of :func:`vgg11` at ``width=1`` with 10 classes (as in the official code).
VGG11_NUM_PARAMETERS = 9_750_922

_HIDDEN = 512
_DROPOUT = 0.5


def scaled_width(channels: int, width: float) -> int:
    r"""Channel count ``max(1, round(channels * width))`` used by :func:`vgg11`.

    Python's :func:`round` (ties to even).  Exposed so that code rebuilding the network
    (e.g. a grouped-convolution version) computes the same sizes.

    Example
    -------
    At ``width=0.125``: :math:`64 \to 8`, :math:`512 \to 64`; :math:`20 \cdot 0.125 = 2.5` rounds to the even
    2 and :math:`28 \cdot 0.125 = 3.5` to 4; a width that rounds to 0 channels keeps 1:

    >>> scaled_width(64, 0.125), scaled_width(512, 0.125), scaled_width(20, 0.125), scaled_width(28, 0.125)
    (8, 64, 2, 4)
    >>> scaled_width(64, 0.001)
    1

    ``channels`` must be an integer >= 1 and ``width`` a finite number > 0, as :func:`vgg11` requires
    (a width of 0 would otherwise give one channel per layer without a word):

    >>> scaled_width(64, 0.0)
    Traceback (most recent call last):
    ...
    ValueError: width must be a finite number > 0, got 0.0
    """
    channels = check_int("channels", channels, minimum=1)
    width = check_positive("width", width)
    try:
        scaled = channels * width
    except OverflowError:  # an int channel count past float's range
        scaled = math.inf
    if not math.isfinite(scaled):
        raise ValueError(f"width: channels * width = {channels!r} * {width!r} is past float's range, not a channel count")
    return max(1, int(round(scaled)))


def _resolve_generator(seed) -> torch.Generator | None:
    if seed is None:
        return None
    if isinstance(seed, torch.Generator):
        return seed
    return torch_generator(check_int("seed", seed, minimum=0), "init")


def _uninitialised(module_cls, *args, **kwargs) -> nn.Module:
    """``module_cls(*args, **kwargs)`` with its parameters allocated on the CPU but not initialised, as
    :func:`torch.nn.utils.skip_init` makes it, without its ``to_empty``: that goes through torch's meta-tensor
    machinery, which imports sympy on its first call (~0.3 s in every process that builds a model). Built on
    the meta device, each parameter is replaced by an empty tensor of its shape, dtype and ``requires_grad``;
    :func:`vgg11` then draws every value."""
    module = module_cls(*args, device="meta", **kwargs)
    for name, param in list(module.named_parameters(recurse=False)):
        setattr(module, name, nn.Parameter(torch.empty(param.shape, dtype=param.dtype),
                                           requires_grad=param.requires_grad))
    return module


def _init_conv(conv: nn.Conv2d, gen: torch.Generator | None) -> None:
    """Official FedNova init: N(0, sqrt(2 / (kh * kw * out_channels))), bias 0."""
    fan_out = conv.kernel_size[0] * conv.kernel_size[1] * conv.out_channels
    nn.init.normal_(conv.weight, mean=0.0, std=math.sqrt(2.0 / fan_out), generator=gen)
    if conv.bias is not None:
        nn.init.zeros_(conv.bias)


def _init_linear(linear: nn.Linear, gen: torch.Generator | None) -> None:
    """PyTorch's default ``nn.Linear.reset_parameters``, drawing from ``gen``."""
    nn.init.kaiming_uniform_(linear.weight, a=math.sqrt(5), generator=gen)
    if linear.bias is not None:
        bound = 1.0 / math.sqrt(linear.in_features) if linear.in_features > 0 else 0.0
        nn.init.uniform_(linear.bias, -bound, bound, generator=gen)


def vgg11(num_classes: int = 10, width: float = 1.0, seed=None, *, dropout: float = _DROPOUT) -> nn.Sequential:
    r"""VGG-11 without BatchNorm for 32x32 RGB inputs, as one flat ``nn.Sequential``.

    See the module docstring for the architecture, the layer indices and the
    initialisation.

    Parameters
    ----------
    num_classes:
        Outputs of the last linear layer (10 for CIFAR-10).
    width:
        Width multiplier ``w > 0``: every convolution gets ``max(1, round(c * w))``
        channels and the two hidden linear layers ``max(1, round(512 * w))`` units.
        ``width=1`` is the paper's network (9,750,922 parameters); small widths (e.g.
        0.125, 153,530 parameters) make CPU tests and demos cheap.
    seed:
        ``None``: initialise from torch's global RNG (like ``torch.nn`` layers do).
        An ``int``: draw from ``fedlib.rng.torch_generator(seed, "init")`` — same seed,
        same weights, global RNG untouched.  A ``torch.Generator``: draw from it
        (advancing it).
    dropout:
        Drop probability of the two Dropout layers (0.5 officially).

    Returns
    -------
    torch.nn.Sequential
        On the CPU in float32; move it with ``.to(device)``.

    Example
    -------
    At ``width=0.125`` the channels are 8, 16, 32, 32, 64, 64, 64, 64 and the hidden layers 64 wide:
    convolutions :math:`(3 \cdot 8 + 8 \cdot 16 + 16 \cdot 32 + 32 \cdot 32 + 32 \cdot 64 + 3 \cdot 64 \cdot 64)
    \cdot 9 + 8 + 16 + 2 \cdot 32 + 4 \cdot 64 = 144{,}560` parameters, linear layers
    :math:`2\,(64 \cdot 64 + 64) + 64 \cdot 10 + 10 = 8{,}970`, 153,530 in all (the same sums at
    ``width=1`` give :data:`VGG11_NUM_PARAMETERS`). Two 32x32 images give two rows of 10 logits, and
    the same seed the same weights:

    >>> import torch
    >>> net = vgg11(width=0.125, seed=0)
    >>> count_parameters(net), len(net)
    (153530, 29)
    >>> net[0]
    Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))
    >>> net[28]
    Linear(in_features=64, out_features=10, bias=True)
    >>> with torch.no_grad():
    ...     logits = net.eval()(torch.zeros(2, 3, 32, 32))
    >>> tuple(logits.shape)
    (2, 10)
    >>> again = vgg11(width=0.125, seed=0)
    >>> all(torch.equal(a, b) for a, b in zip(net.parameters(), again.parameters()))
    True
    """
    num_classes = check_int("num_classes", num_classes, minimum=1)
    width = check_positive("width", width)
    dropout = check_in_range("dropout", dropout, 0.0, 1.0)
    gen = _resolve_generator(seed)

    layers: list[nn.Module] = []
    in_channels = 3
    for item in VGG11_CFG:
        if item == "M":
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
        else:
            out_channels = scaled_width(item, width)
            layers.append(_uninitialised(nn.Conv2d, in_channels, out_channels, kernel_size=3, padding=1))
            layers.append(nn.ReLU())
            in_channels = out_channels
    hidden = scaled_width(_HIDDEN, width)
    layers += [
        nn.Flatten(),
        nn.Dropout(dropout),
        _uninitialised(nn.Linear, in_channels, hidden),
        nn.ReLU(),
        nn.Dropout(dropout),
        _uninitialised(nn.Linear, hidden, hidden),
        nn.ReLU(),
        _uninitialised(nn.Linear, hidden, num_classes),
    ]
    with torch.no_grad():
        for layer in layers:
            if isinstance(layer, nn.Conv2d):
                _init_conv(layer, gen)
            elif isinstance(layer, nn.Linear):
                _init_linear(layer, gen)
    return nn.Sequential(*layers)


def count_parameters(module: nn.Module, trainable_only: bool = False) -> int:
    r"""Number of scalar parameters of ``module`` (shared tensors counted once).

    With ``trainable_only`` only parameters with ``requires_grad`` are counted.

    Example
    -------
    ``Linear(3, 2)`` has :math:`3 \cdot 2 + 2 = 8` parameters; the same layer twice in a
    ``Sequential`` is still 8; with its bias frozen, 6 are trainable:

    >>> layer = nn.Linear(3, 2)
    >>> count_parameters(layer), count_parameters(nn.Sequential(layer, layer))
    (8, 8)
    >>> _ = layer.bias.requires_grad_(False)
    >>> count_parameters(layer, trainable_only=True)
    6
    """
    if not isinstance(module, nn.Module):
        raise ValueError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    trainable_only = check_flag("trainable_only", trainable_only)  # "no" is truthy: it would count the trainable only
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)

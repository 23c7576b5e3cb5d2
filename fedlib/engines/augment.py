r"""Device-side randomness of the CIFAR-10 engine: crop + flip augmentation and seeded dropout.

Augmentation (the official code's: ``RandomCrop(32, padding=4)``, ``RandomHorizontalFlip``,
then ``Normalize(mean, std)``) is split in two parts:

* the *random parameters* — a crop offset ``(dy, dx)`` in ``0..2*padding`` and a flip bit
  per sample — drawn from a seeded :class:`torch.Generator`
  (:func:`crop_flip_params`; the engine uses one CPU generator
  ``fedlib.rng.torch_generator(seed, "augment", round, client)`` per client and round, so a
  run's augmentation does not depend on the device, on the other clients or on how many
  runs are stacked);
* the *pixel work* — one gather from the zero-padded ``uint8`` NHWC images
  (:func:`pad_images`, :func:`crop_flip_gather`) and the normalisation
  (:func:`normalize`) — done where the images live (on the GPU in the engine).

Zero padding in ``uint8`` is what torchvision's ``RandomCrop(padding=4)`` does before
``ToTensor``: a padded pixel becomes :math:`-\text{mean}/\text{std}` after normalising.

Dropout masks (:func:`seeded_dropout_mask`) come from a counter-based integer hash of
``(key, step, layer, position)`` computed with ``int64`` tensor ops — no generator state,
so the same mask is produced on the CPU and the GPU, inside ``torch.func.vmap``, and
inside a captured CUDA graph (the step index is a device tensor). ``key`` is
:func:`dropout_key` ``(seed, round, client)``: every client of every run has its own
stream, independent of the stacking.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch

from .._validate import _is_finite_number, _is_int_at_least, check_flag, check_int
from ..rng import seed_sequence

__all__ = [
    "pad_images",
    "crop_flip_params",
    "crop_flip_gather",
    "normalize",
    "random_crop_flip",
    "dropout_key",
    "seeded_dropout_mask",
]


# --------------------------------------------------------------------------- augmentation
def pad_images(images: torch.Tensor, padding: int) -> torch.Tensor:
    """Zero-pad ``(N, H, W, C)`` images by ``padding`` pixels on each side of H and W."""
    padding = check_int("padding", padding)
    if images.ndim != 4:
        raise ValueError(f"images must be (N, H, W, C), got shape {tuple(images.shape)}")
    if padding == 0:
        return images.contiguous()
    n, h, w, c = images.shape
    out = images.new_zeros((n, h + 2 * padding, w + 2 * padding, c))
    out[:, padding:padding + h, padding:padding + w] = images
    return out


def _dims(name: str, shape, *, minimum: int = 0, length: int | None = None) -> tuple:
    """``shape`` as a tuple of Python ints, each an integer >= ``minimum`` (``length`` of them when given). Python
    numbers only (a torch.Size, a tuple of ints): no tensor is read, so no device waits."""
    try:
        dims = tuple(shape)
    except TypeError:
        dims = None
    if dims is None or (length is not None and len(dims) != length) or not all(
            _is_int_at_least(d, minimum) for d in dims):
        count = f"{length} " if length is not None else "a tuple of "
        raise ValueError(f"{name} must be {count}integers >= {minimum}, got {shape!r}")
    return tuple(int(d) for d in dims)


def crop_flip_params(generator: torch.Generator, shape: Sequence[int], padding: int = 4):
    """Random crop offsets and flip bits for ``shape`` samples, drawn from ``generator``.

    Returns ``(dy, dx, flip)``, int64 tensors of ``shape`` on the generator's device:
    ``dy, dx`` uniform on ``0..2*padding`` (offset of the crop inside the padded image)
    and ``flip`` in ``{0, 1}``. Draw order (part of the reproducibility contract): one
    ``randint`` of shape ``(*shape, 2)`` for the offsets, then one of ``shape`` for the flips.
    """
    padding = check_int("padding", padding)
    shape = _dims("shape", shape)  # int() cut 1.5 to 1; -1 failed as torch's "negative dimension"
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator (fedlib.rng.torch_generator), got "
                         f"{type(generator).__name__}")
    dev = generator.device
    off = torch.randint(0, 2 * padding + 1, shape + (2,), generator=generator, device=dev)
    flip = torch.randint(0, 2, shape, generator=generator, device=dev)
    return off[..., 0], off[..., 1], flip


def crop_flip_gather(padded: torch.Tensor, index: torch.Tensor, dy: torch.Tensor, dx: torch.Tensor,
                     flip: torch.Tensor, size: Sequence[int], *, batch_last: bool = False) -> torch.Tensor:
    """Crop (and flip) samples out of padded ``(N, H+2p, W+2p, C)`` images with one gather.

    ``index, dy, dx, flip`` share a shape ``S``: image number, crop offsets, flip bit of
    each output sample. Returns ``S + (H, W, C)`` (same dtype as ``padded``). With
    ``batch_last=True`` and ``S = (B, M)`` the result is laid out ``(B, H, W, M, C)`` — the
    memory order of a channels-last grouped input ``(B, M*C, H, W)`` — without a copy.
    The flip is folded into the column index: column ``w`` reads ``dx + w`` or
    ``dx + W - 1 - w``.

    ``size`` is the crop's ``(H, W)``.
    """
    batch_last = check_flag("batch_last", batch_last)  # "no" is truthy: it would lay the result out (B, H, W, M, C)
    h, w = _dims("size", size, minimum=1, length=2)  # (H, W) numbers only: the tensors are not checked (per step)
    dev = padded.device
    ar_h = torch.arange(h, device=dev)
    ar_w = torch.arange(w, device=dev)
    if batch_last:
        if index.ndim != 2:
            raise ValueError("batch_last=True needs (B, M) index arrays")
        # (B, H, 1, M), (B, 1, W, M), (B, 1, 1, M)
        rows = dy[:, None, None, :] + ar_h[None, :, None, None]
        fl = flip[:, None, None, :]
        cols = dx[:, None, None, :] + torch.where(fl.bool(), (w - 1) - ar_w[None, None, :, None], ar_w[None, None, :, None])
        return padded[index[:, None, None, :], rows, cols]
    rows = dy[..., None, None] + ar_h[:, None]
    fl = flip[..., None, None]
    cols = dx[..., None, None] + torch.where(fl.bool(), (w - 1) - ar_w[None, :], ar_w[None, :])
    return padded[index[..., None, None], rows, cols]


def normalize(images: torch.Tensor, mean: torch.Tensor, std: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """``(x / 255 - mean) / std`` over the last (channel) axis, as ``ToTensor`` + ``Normalize``.

    ``images`` holds 0..255 pixel values with channels last; ``mean`` and ``std`` are per-channel, of the [0, 1] scale:
    tensors or sequences of one number per channel (e.g. :data:`fedlib.data.cifar10.CIFAR10_MEAN`), a ``ValueError``
    naming them otherwise; ``dtype`` is the result's (default ``torch.float32``). Their values are checked too, in
    ``dtype``, where they are given as numbers, sequences, numpy arrays or CPU tensors (read on the host, before they
    move to the images' device): ``mean`` finite, ``std`` finite and > 0, a ``ValueError`` naming them otherwise. A
    ``mean`` or ``std`` already on another device (a CUDA tensor) has its shape checked, not its values: reading
    them would read from the device (a synchronisation; none is allowed while a CUDA graph is captured), so a 0,
    negative or non-finite ``std`` there still gives inf or NaN images (:class:`fedlib.engines.stacked.StackedEngine`
    checks its own once, on the host)."""
    channels = images.shape[-1] if images.ndim else None
    checked = []
    for name, v in (("mean", mean), ("std", std)):
        on_host = not (torch.is_tensor(v) and v.device.type != "cpu")
        # a tuple such as CIFAR10_MEAN failed as "'tuple' object has no attribute 'to'", a wrong length deep in
        # torch's broadcasting; as_tensor of a tensor already of this dtype and device is that tensor (no copy, CUDA
        # graphs)
        v = torch.as_tensor(v, dtype=dtype, device="cpu" if on_host else images.device)
        if v.ndim != 1 or v.shape[0] != channels:
            raise ValueError(f"{name} must hold one number per channel ({channels}, the images' last axis), got "
                             f"shape {tuple(v.shape)}")
        if on_host:  # a std of 0 gave -inf/inf, a negative one flipped the channel, a NaN or inf one NaN/0, silently
            bad = next(((i, x) for i, x in enumerate(v.tolist())
                        if not (math.isfinite(x) and (name == "mean" or x > 0))), None)
            if bad is not None:
                what = "finite numbers > 0" if name == "std" else "finite numbers"
                raise ValueError(f"{name} must hold {what} (one per channel, as {dtype}), got {name}[{bad[0]}] = "
                                 f"{bad[1]:.6g}")
        checked.append(torch.as_tensor(v, device=images.device))
    mean, std = checked
    return (images.to(dtype) / 255.0).sub_(mean).div_(std)


def random_crop_flip(images: torch.Tensor, generator: torch.Generator, padding: int = 4) -> torch.Tensor:
    """Convenience: augment ``(N, H, W, C)`` uint8 images (random crop with zero padding + flip).

    Parameters come from :func:`crop_flip_params` on ``generator`` (moved to the images'
    device if they differ); the same generator state gives the same images.
    """
    if images.ndim != 4 or images.dtype != torch.uint8:
        raise ValueError(f"images must be uint8 (N, H, W, C), got {images.dtype} {tuple(images.shape)}")
    if images.shape[1] in (1, 3, 4) and images.shape[3] not in (1, 3, 4):
        raise ValueError(f"images must be channels-last (N, H, W, C), got shape {tuple(images.shape)}, which looks "
                         "like (N, C, H, W): pass images.permute(0, 2, 3, 1)")
    n, h, w, _ = images.shape
    dy, dx, flip = crop_flip_params(generator, (n,), padding)
    dy, dx, flip = dy.to(images.device), dx.to(images.device), flip.to(images.device)
    index = torch.arange(n, device=images.device)
    return crop_flip_gather(pad_images(images, padding), index, dy, dx, flip, (h, w))


# --------------------------------------------------------------------------- seeded dropout
_M32 = 0xFFFFFFFF
_MUL = 0x45D9F3B          # < 2**31: (x < 2**32) * _MUL < 2**63, no int64 overflow
_STEP_MUL = 0x9E3779B1 & 0x7FFFFFFF


def _mix32(h: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer finaliser (int64 tensor in [0, 2**32) -> same range)."""
    h = (((h >> 16) ^ h) * _MUL) & _M32
    h = (((h >> 16) ^ h) * _MUL) & _M32
    return (h >> 16) ^ h


def dropout_key(seed: int, round_index: int, client: int) -> int:
    """The 32-bit dropout key of ``client`` in round ``round_index`` of run ``seed``
    (from ``fedlib.rng.seed_sequence(seed, "dropout", round, client)``)."""
    # checked by name here: seed_sequence knows them only as its 'key's
    round_index, client = check_int("round_index", round_index), check_int("client", client)
    return int(seed_sequence(seed, "dropout", round_index, client).generate_state(1, dtype=np.uint32)[0])


def _check_integer_tensor(name: str, value) -> None:
    """``value`` must be a tensor of an integer dtype (bool aside): its dtype is read, never its values."""
    if not torch.is_tensor(value) or value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool:
        got = f"a {value.dtype} tensor" if torch.is_tensor(value) else type(value).__name__
        raise ValueError(f"{name} must be an integer tensor (int64 keys from dropout_key), got {got}")


def seeded_dropout_mask(keys: torch.Tensor, step, layer: int, shape: Sequence[int], p: float,
                        dtype=torch.float32) -> torch.Tensor:
    """Inverted-dropout mask ``K + shape`` (values 0 or ``1/(1-p)``) for int64 ``keys`` of shape ``K``.

    Element at flat position ``q`` of ``shape`` (row-major, e.g. ``q = n*F + f`` for a
    ``(B, F)`` activation) is dropped when the top 24 bits of ``mix(mix(base + mix(q)) ^ base)``,
    ``base = mix(key ^ mix(step*c + layer + 1))`` (sums mod ``2**32``), fall below ``p * 2**24``. ``step`` is
    an int or an int64 tensor (0-d, possibly on the device, as in a CUDA graph). Works
    under ``torch.func.vmap`` (``keys`` batched) and gives the same bits on every device.

    ``dtype`` is the mask's (default ``torch.float32``).
    """
    # Python numbers only (it runs every step): the tensors keys and step are not read, so no device waits
    if not _is_finite_number(p) or not 0.0 <= p < 1.0:
        raise ValueError(f"p must lie in [0, 1), got {p!r}")
    layer = check_int("layer", layer)  # a float failed as torch's '"bitwise_and_cpu" not implemented for 'Float''
    shape = _dims("shape", shape)
    # dtypes only (no value is read): float keys were cut to int64 (2.7 hashed as 2), a float step tensor too
    _check_integer_tensor("keys", keys)
    dev = keys.device
    if not torch.is_tensor(step):
        step = torch.tensor(check_int("step", step), dtype=torch.int64, device=dev)  # int() cut 1.5, read '3'
    else:
        _check_integer_tensor("step", step)
    base = _mix32(keys.to(torch.int64) ^ _mix32((step.to(torch.int64) * _STEP_MUL + (layer + 1)) & _M32))
    base = base.reshape(tuple(keys.shape) + (1,) * len(shape))
    pos = _mix32(torch.arange(math.prod(shape), device=dev, dtype=torch.int64).view(shape))
    h = _mix32((base + pos) & _M32)
    h = _mix32(h ^ base)
    threshold = int(round(p * (1 << 24)))
    keep = (h >> 8) >= threshold
    return keep.to(dtype) * (1.0 / (1.0 - p))

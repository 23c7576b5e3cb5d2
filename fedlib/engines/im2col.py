r"""Convolutions of ``a`` independent models as batched matrix products (im2col + ``bmm``).

A speed candidate for :class:`~fedlib.engines.grouped.GroupedNetwork` (``conv="gemm"``):
cuDNN runs the engine's grouped channels-last convolutions group by group (a profile on an
H200 counted about one ``nhwcSliceCKernel`` and one small GEMM per stacked model and
convolution, ``data/results/bench/NOTES.md``). Here model :math:`j`'s convolution is

.. math::

    y_j = P(x_j)\,W_j^\top + b_j, \qquad P(x_j) \in \mathbb R^{(B H' W') \times (k_h k_w C)},

where :math:`P` gathers the :math:`k_h \times k_w` patches of the zero-padded input (im2col)
and :math:`W_j \in \mathbb R^{C_\text{out} \times (k_h k_w C)}` is the weight in
``(out, kh, kw, in)`` order; all models at once this is one ``torch.baddbmm`` over the model
axis. Activations are model-major channels-last, ``(a, B, H, W, C)``. The backward pass is
two more batched products, :math:`\partial P = \partial y\,W_j` and
:math:`\partial W_j = \partial y^\top P`, and the col2im sum of :math:`\partial P`'s
:math:`k_h k_w` shifted slices into the padded input's gradient.

The cost is memory: :math:`P` holds :math:`k_h k_w` copies of the input (kept for the
weight gradient). Only stride 1 and dilation 1 are supported (VGG's 3×3, padding 1).
Whether it is faster than cuDNN's grouped kernels is measured, not assumed:
``python -m fedlib bench cifar10 --compare conv=gemm`` on the GPU.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
import torch.nn.functional as F

from .._validate import _is_int_at_least

__all__ = ["stacked_conv2d", "stacked_pool2d", "im2col"]


def _autocast_dtype(t: torch.Tensor) -> Optional[torch.dtype]:
    dev = t.device.type
    if torch.is_autocast_enabled(dev):
        return torch.get_autocast_dtype(dev)
    return None


def im2col(x: torch.Tensor, kernel: Tuple[int, int], padding: Tuple[int, int]) -> torch.Tensor:
    """Patches ``(a, B*H'*W', kh*kw*C)`` of ``x`` ``(a, B, H, W, C)`` zero-padded by
    ``padding``, in ``(kh, kw, C)`` order; ``H' = H + 2 p_h - k_h + 1`` (stride 1). One copy.

    ``kernel`` is ``(kh, kw)`` and ``padding`` ``(p_h, p_w)``; a kernel that does not fit the padded input is a
    ``ValueError``."""
    a, b, h, w, c = x.shape
    kh, kw = kernel
    ph, pw = padding
    xp = F.pad(x, (0, 0, pw, pw, ph, ph)) if (ph or pw) else x.contiguous()
    ho, wo = h + 2 * ph - kh + 1, w + 2 * pw - kw + 1
    if ho < 1 or wo < 1:
        raise ValueError(f"a {kh}x{kw} kernel with padding {padding} does not fit a {h}x{w} input")
    sa, sb, sh, sw, sc = xp.stride()
    patches = xp.as_strided((a, b, ho, wo, kh, kw, c), (sa, sb, sh, sw, sh, sw, sc))
    return patches.reshape(a, b * ho * wo, kh * kw * c)


class _StackedConv(torch.autograd.Function):
    """``y = baddbmm(bias, im2col(x), W^T)`` with an explicit col2im backward."""

    @staticmethod
    def forward(ctx, x, w, bias, padding):
        a, b, h, wd, c = x.shape
        _, out, kh, kw, cin = w.shape
        cols = im2col(x, (kh, kw), padding)
        wm = w.reshape(a, out, kh * kw * cin)
        if bias is None:
            y = torch.bmm(cols, wm.transpose(1, 2))
        else:
            y = torch.baddbmm(bias.unsqueeze(1), cols, wm.transpose(1, 2))
        ho, wo = h + 2 * padding[0] - kh + 1, wd + 2 * padding[1] - kw + 1
        ctx.save_for_backward(cols, wm)
        ctx.meta = (x.shape, (kh, kw), padding, (ho, wo), bias is not None)
        return y.view(a, b, ho, wo, out)

    @staticmethod
    def backward(ctx, gy):
        if torch.is_grad_enabled():  # create_graph=True: the saved columns carry no graph
            raise RuntimeError("stacked_conv2d has no second derivatives (backward with create_graph=True): its "
                               "im2col columns are saved without their graph; use F.conv2d (conv='cudnn') there")
        cols, wm = ctx.saved_tensors
        (a, b, h, wd, c), (kh, kw), (ph, pw), (ho, wo), has_bias = ctx.meta
        out = wm.shape[1]
        gy = gy.reshape(a, b * ho * wo, out)
        gx = gw = gb = None
        if ctx.needs_input_grad[0]:
            gcols = torch.bmm(gy, wm).view(a, b, ho, wo, kh, kw, c)
            # col2im: every patch position adds into its input pixel; summed in float32 at
            # least (as cuDNN accumulates), rounded once to the input's dtype
            acc = torch.promote_types(gcols.dtype, torch.float32)
            gxp = torch.zeros((a, b, h + 2 * ph, wd + 2 * pw, c), device=gy.device, dtype=acc)
            for i in range(kh):
                for j in range(kw):
                    gxp[:, :, i:i + ho, j:j + wo, :] += gcols[:, :, :, :, i, j, :]
            gx = gxp[:, :, ph:ph + h, pw:pw + wd, :].to(gcols.dtype)
        if ctx.needs_input_grad[1]:
            gw = torch.bmm(gy.transpose(1, 2), cols).view(a, out, kh, kw, c)
        if has_bias and ctx.needs_input_grad[2]:
            gb = gy.sum(1)
        return gx, gw, gb, None


def _pair_of_paddings(padding) -> Tuple[int, int]:
    """``(p_h, p_w)`` from a pair or one int, both integers >= 0 (Python's or numpy's, never a bool: ``True`` was
    padding 1). Python-number checks only: a tensor or its entries (``__index__`` reads one, a device wait) are refused."""
    try:
        pair = tuple(padding) if hasattr(padding, "__len__") else (padding,) * 2
    except TypeError:  # a 0-d array or tensor: len() and iteration raise
        pair = ()
    if len(pair) != 2 or not all(_is_int_at_least(p, 0) for p in pair):
        raise ValueError(f"padding must be (p_h, p_w) of integers >= 0 (or one int), got {padding!r}")
    return int(pair[0]), int(pair[1])


def stacked_conv2d(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                   padding: Tuple[int, int]) -> torch.Tensor:
    r"""``a`` independent 2-d convolutions (stride 1, dilation 1) as batched matrix products.

    Returns ``(a, B, H', W', out)``: ``y[j]`` equals ``conv2d(x[j], weight[j])`` (NCHW
    permuted) up to the summation order. Under ``torch.autocast`` the inputs are cast to its
    dtype first (so the matrix products run in bf16 with float32 accumulation, as cuDNN's).

    Parameters
    ----------
    x : ``(a, B, H, W, C)`` — model ``j``'s batch in ``x[j]``, channels last.
    weight : ``(a, out, kh, kw, C)`` — model ``j``'s ``Conv2d`` weight permuted to
        ``(out, kh, kw, in)`` (any strides; the engine's stacked storage is already in this order).
    bias : ``(a, out)`` or ``None``.
    padding : ``(p_h, p_w)`` zeros on each side (an int: the same on both axes).
    """
    dt = _autocast_dtype(x)
    if dt is not None:
        x, weight = x.to(dt), weight.to(dt)
        bias = bias.to(dt) if bias is not None else None
    return _StackedConv.apply(x, weight, bias, _pair_of_paddings(padding))


def stacked_pool2d(x: torch.Tensor, kind: str, **options) -> torch.Tensor:
    """``max_pool2d`` / ``avg_pool2d`` (``kind`` ``"max"`` or ``"avg"``) of ``x``, ``(a, B, H, W, C)``
    activations, per model and channel; returns ``(a, B, H', W', C)``.

    ``options`` go to torch's pooling function (``kernel_size``, ``stride``, ...)."""
    if kind not in ("max", "avg"):
        raise ValueError(f"kind must be 'max' or 'avg', got {kind!r}")
    for name, low in (("kernel_size", 1), ("stride", 1), ("padding", 0)):  # Python numbers: no device wait
        value = options.get(name)
        # numpy integers too (nn.MaxPool2d(np.int64(2)): torch's pooling and the cudnn path take them), never a bool
        if value is not None and not all(_is_int_at_least(v, low)
                                         for v in (value if isinstance(value, (tuple, list)) else (value,))):
            raise ValueError(f"{name} must be an integer >= {low} (or a pair of them), got {value!r}")
    a, b, h, w, c = x.shape
    nchw = x.reshape(a * b, h, w, c).permute(0, 3, 1, 2)  # a channels-last view
    y = (F.max_pool2d if kind == "max" else F.avg_pool2d)(nchw, **options)
    return y.permute(0, 2, 3, 1).reshape(a, b, y.shape[2], y.shape[3], c)

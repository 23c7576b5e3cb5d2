r"""M copies of a network of standard layers written as ONE network (grouped convolutions).

The fast path of :mod:`fedlib.engines.stacked`. A network built from ``Conv2d``,
``Linear``, ``ReLU``, ``MaxPool2d``, ``AvgPool2d``, ``Dropout``, ``Flatten`` and
``Identity`` (a flat or nested :class:`torch.nn.Sequential`, e.g. :func:`fedlib.models.vgg11`)
is turned into a network that trains ``M`` independent copies at once:

* activations before ``Flatten`` are ``(B, M*C, H, W)``: model ``j``'s batch sits in
  channel group ``j`` (channels ``j*C .. j*C+C-1``); a convolution is
  ``conv2d(x, W.reshape(M*out, in, kh, kw), groups=M)``, a pool or a ReLU acts per
  channel, so the models never mix. The input is channels-last: memory order
  ``(B, H, W, M, C)``;
* after ``Flatten`` activations are ``(M, B, F)`` and a ``Linear`` is one
  ``torch.baddbmm(bias, x, W^T)`` over the model axis.

Parameters are stored stacked, ``(M, *shape)`` per parameter of the plain network (same
names as its ``named_parameters()``). A convolution weight's storage is
``(M, out, kh, kw, in)`` and the stacked tensor is its permuted view
``(M, out, in, kh, kw)``, so ``W[:a].reshape(a*out, in, kh, kw)`` is a *view* with
channels-last strides (what cuDNN wants for channels-last inputs): the first ``a``
models — the active prefix when clients are sorted by :math:`\tau_i` descending — are
trained by slicing, never by copying.

Every model's result equals the plain network's on that model's batch, up to the
floating-point summation order of the grouped kernels.
"""
from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional

import torch
import torch.nn.functional as F
from torch import nn

from .._validate import a_type, check_flag, check_instance, check_int
from .augment import seeded_dropout_mask
from .im2col import stacked_conv2d, stacked_pool2d

__all__ = ["GroupedNetwork", "GROUPED_LAYERS", "CONV_IMPLEMENTATIONS", "leaf_layers", "registered_hooks",
           "refuse_global_hooks_added_later"]

#: How :class:`GroupedNetwork` computes its convolutions.
CONV_IMPLEMENTATIONS = ("cudnn", "gemm")

#: Layer types the grouped network can express.
GROUPED_LAYERS = (nn.Conv2d, nn.Linear, nn.ReLU, nn.MaxPool2d, nn.AvgPool2d, nn.Dropout, nn.Flatten, nn.Identity)


class _Layer(NamedTuple):
    kind: str                    # conv, linear, relu, maxpool, avgpool, dropout, flatten
    weight: Optional[str] = None
    bias: Optional[str] = None
    options: dict = {}


def leaf_layers(model: nn.Module) -> list:
    """``(name, module)`` of the leaf layers of a flat or nested ``nn.Sequential`` in forward order.

    Raises ``ValueError`` if any container is not an ``nn.Sequential`` (or is one with its own
    ``forward``), or if one module object is used twice. :class:`GroupedNetwork` builds its layers from it.

    Example
    -------
    >>> from torch import nn
    >>> model = nn.Sequential(nn.Conv2d(3, 2, 3), nn.Sequential(nn.ReLU(), nn.Flatten()), nn.Linear(8, 2))
    >>> [(name, type(layer).__name__) for name, layer in leaf_layers(model)]
    [('0', 'Conv2d'), ('1.0', 'ReLU'), ('1.1', 'Flatten'), ('2', 'Linear')]
    >>> leaf_layers(nn.Linear(2, 2))
    Traceback (most recent call last):
    ...
    ValueError: the grouped path needs an nn.Sequential of standard layers, got Linear; use path='vmap' for other modules
    """
    if not isinstance(model, nn.Sequential):
        raise ValueError(f"the grouped path needs an nn.Sequential of standard layers, got {type(model).__name__}; "
                         "use path='vmap' for other modules")
    first_name: dict = {}
    for name, mod in model.named_modules(remove_duplicate=False):
        first = first_name.setdefault(id(mod), name)
        if first != name:
            raise ValueError(f"layer {name!r} is the same module object as {first!r}: the grouped path builds one "
                             "layer per module object, so a reused layer would be skipped; give each use its own "
                             "layer, or use path='vmap'")
    out = []
    for name, mod in model.named_modules():
        children = list(mod.children())
        if children:
            if not isinstance(mod, nn.Sequential):
                raise ValueError(f"the grouped path needs nested nn.Sequential containers only, but {name or 'model'!r} "
                                 f"is {a_type(mod)}; use path='vmap'")
            if type(mod).forward is not nn.Sequential.forward:  # the grouped network chains the leaf layers only
                raise ValueError(f"{name or 'model'!r} is {a_type(mod)}, an nn.Sequential with its own "
                                 "forward: the grouped path rebuilds the network from its layers in order, so that "
                                 "forward would silently not run; use path='vmap'")
            continue
        out.append((name, mod))
    return out


#: The hook tables of an ``nn.Module`` (``register_forward_pre_hook`` & co.) and the kind of hook each holds.
_HOOK_TABLES = (("_forward_pre_hooks", "forward pre-hook"), ("_forward_hooks", "forward hook"),
                ("_backward_pre_hooks", "backward pre-hook"), ("_backward_hooks", "backward hook"))


def registered_hooks(model: nn.Module) -> list:
    """``(module name, module type, hook kind, hook name)`` of every hook registered on ``model`` or one of
    its submodules (``register_forward_pre_hook``, ``register_forward_hook``, ``register_full_backward_pre_hook``,
    ``register_full_backward_hook``, ``register_backward_hook``), in ``named_modules()`` order; the model itself
    is named ``"model"``. Hooks registered for all modules at once (``torch.nn.modules.module.register_module_*``,
    which run on this model too) come last, named ``"all modules"`` with module type ``"global"``.

    Example
    -------
    >>> import torch
    >>> from torch import nn
    >>> model = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    >>> def clip(module, inputs, output):
    ...     return output.clamp(-1, 1)
    >>> handle = model[0].register_forward_hook(clip)
    >>> registered_hooks(model)
    [('0', 'Linear', 'forward hook', 'clip')]
    >>> handle.remove()
    >>> handle = torch.nn.modules.module.register_module_forward_hook(clip)
    >>> registered_hooks(model)
    [('all modules', 'global', 'forward hook', 'clip')]
    >>> handle.remove()
    >>> registered_hooks(model)
    []
    """
    check_instance("model", model, nn.Module)
    out = []
    for name, mod in model.named_modules(remove_duplicate=False):
        for table, kind in _HOOK_TABLES:
            for hook in getattr(mod, table, {}).values():
                out.append((name or "model", type(mod).__name__, kind, _hook_name(hook)))
    return out + _global_hooks()


def _global_hooks() -> list:
    """:func:`registered_hooks`' rows of the hooks registered for all modules at once."""
    return [("all modules", "global", kind, _hook_name(hook)) for table, kind in _HOOK_TABLES
            for hook in getattr(torch.nn.modules.module, f"_global{table}", {}).values()]


def refuse_global_hooks_added_later(path: str) -> None:
    """Refuse a hook registered for all modules (``torch.nn.modules.module.register_module_*``) after a stacked
    engine was built: on the grouped path any such hook would silently not run, on the vmap path a backward hook
    would make torch.func fail deep inside a round. :class:`fedlib.engines.stacked.StackedEngine` calls it at the
    start of every round and of ``evaluate``; hooks present when the engine is built are refused then.

    Example
    -------
    >>> import torch
    >>> handle = torch.nn.modules.module.register_module_forward_hook(lambda module, inputs, output: None)
    >>> refuse_global_hooks_added_later("vmap")  # the vmap path calls the modules: their forward hooks run
    >>> refuse_global_hooks_added_later("grouped")
    Traceback (most recent call last):
    ...
    ValueError: a forward hook (<lambda>) was registered for all modules after the engine was built: the grouped path never calls the modules, so it would silently not run; remove it (handle.remove())
    >>> handle.remove()
    >>> refuse_global_hooks_added_later("grouped")
    """
    for _, _, kind, hook in _global_hooks():
        if kind.startswith("backward"):
            why = "the stacked engines run no backward hooks (torch.func refuses them)"
        elif path == "grouped":
            why = "the grouped path never calls the modules, so it would silently not run"
        else:
            continue
        raise ValueError(f"a {kind} ({hook}) was registered for all modules after the engine was built: {why}; "
                         "remove it (handle.remove())")


def _hook_name(hook) -> str:
    return getattr(hook, "__qualname__", None) or type(hook).__name__


def _hook_owner(name: str, kind_of_module: str) -> str:
    """How an error message names the owner of a hook listed by :func:`registered_hooks`."""
    if kind_of_module == "global":
        return "every module (a global hook: torch.nn.modules.module.register_module_*)"
    return f"{'the model' if name == 'model' else f'layer {name!r}'} ({kind_of_module})"


def _refuse_hooks(model: nn.Module) -> None:
    """The grouped path computes every layer from its weights and never calls the modules, so a hook on
    any of them would silently not run: refuse it, naming the module and the path that honours it. A
    backward hook is named first: the vmap path, which the message for a forward hook points to, refuses it."""
    hooks = sorted(registered_hooks(model), key=lambda h: not h[2].startswith("backward"))  # stable: in order
    for name, kind_of_module, kind, hook in hooks:
        where = f"{_hook_owner(name, kind_of_module)} has a {kind} ({hook})"
        if kind.startswith("forward"):
            raise ValueError(f"{where}: the grouped path rebuilds the network from the layers' weights and never "
                             "calls the modules, so the hook would silently not run and a different model would be "
                             "trained; use path='vmap' (or fedlib.experiments.custom.TensorEngine), which calls the "
                             "model with its forward hooks and pre-hooks, or remove the hook")
        raise ValueError(f"{where}: the stacked engines run no backward hooks (the grouped path never calls the "
                         "modules, the vmap path differentiates with torch.func, which refuses them); remove the "
                         "hook, or train in your own loop with fedlib.optim.ClientOptimizer")


class GroupedNetwork:
    """``num_models`` copies of ``model`` as one grouped network with stacked parameters: the
    ``path="grouped"`` network of :class:`fedlib.engines.stacked.StackedEngine` (chapter 5's Table 1 runs).

    Parameters
    ----------
    model : nn.Sequential of :data:`GROUPED_LAYERS` (only its structure is used).
    num_models : number of stacked copies ``M``.
    device, dtype : where and in which precision the stacked parameters live.
    channels_last : store convolution weights (and expect inputs) channels-last.
    conv : ``"cudnn"`` (default): each convolution is one grouped ``F.conv2d`` on the
        ``(B, M*C, H, W)`` layout above; ``"gemm"``: activations are model-major
        ``(a, B, H, W, C)`` before ``Flatten`` and each convolution is an im2col + batched
        matrix product (:func:`fedlib.engines.im2col.stacked_conv2d`; stride 1 and
        dilation 1 only; needs ``channels_last=True``, the weights' storage order). Same
        results up to the summation order; which is faster is for ``bench cifar10
        --compare conv=gemm`` to say.

    Attributes
    ----------
    params : dict name -> stacked tensor ``(M, *shape)`` (uninitialised; the engine fills it).
    num_dropout : number of ``Dropout`` layers (their ids are 0, 1, ... in forward order).
    in_channels : channels of one model's input image.

    Example
    -------
    Two differently initialised copies of a small network, stacked: model ``j``'s logits from the grouped
    network are the plain model ``j``'s on its own images (channel group ``j`` of the input), to rounding:

    >>> import torch
    >>> from torch import nn
    >>> _ = torch.manual_seed(0)
    >>> plain = [nn.Sequential(nn.Conv2d(3, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8, 2)).double() for _ in range(2)]
    >>> net = GroupedNetwork(plain[0], num_models=2, device="cpu", dtype=torch.float64)
    >>> {name: tuple(stacked.shape) for name, stacked in net.params.items()}
    {'0.weight': (2, 2, 3, 3, 3), '0.bias': (2, 2), '3.weight': (2, 2, 8), '3.bias': (2, 2)}
    >>> for j, model in enumerate(plain):
    ...     for name, value in model.named_parameters():
    ...         _ = net.params[name][j].copy_(value.detach())
    >>> images = torch.randn(5, 4, 4, 2, 3, dtype=torch.float64)     # (B, H, W, M, C)
    >>> logits = net.forward(net.params, net.image_input(images), 2)  # (M, B, classes)
    >>> tuple(logits.shape)
    (2, 5, 2)
    >>> [bool(torch.allclose(logits[j], model(images[:, :, :, j].permute(0, 3, 1, 2)), rtol=0, atol=1e-14))
    ...  for j, model in enumerate(plain)]
    [True, True]
    """

    def __init__(self, model: nn.Module, num_models: int, *, device, dtype=torch.float32, channels_last: bool = True,
                 conv: str = "cudnn"):
        check_instance("model", model, nn.Module)
        num_models = check_int("num_models", num_models, minimum=1)  # np.int64(2) too; True refused (torch's zeros())
        if conv not in CONV_IMPLEMENTATIONS:
            raise ValueError(f"conv must be one of {CONV_IMPLEMENTATIONS}, got {conv!r}")
        channels_last = check_flag("channels_last", channels_last)  # "no" is truthy: it stored channels-last
        if conv == "gemm" and not channels_last:
            raise ValueError("conv='gemm' reads the convolution weights in their channels-last storage order "
                             "(out, kh, kw, in): leave channels_last=True")
        self.conv = conv
        self.num_models = num_models
        try:  # checked once, at construction
            self.device = torch.device(device)
        except (RuntimeError, TypeError) as exc:  # torch's "Invalid device string: 'gpu0'"
            raise ValueError(f"device: not a torch device: {device!r} ({exc})") from None
        self.dtype = dtype
        self.channels_last = channels_last
        buffers = [n for n, _ in model.named_buffers()]
        if buffers:
            raise ValueError(f"model has buffers {buffers[:3]} (e.g. BatchNorm running statistics): the stacked "
                             "engines refuse them, since averaging/normalising running statistics as if they were "
                             "gradient progress is wrong; use GroupNorm or LayerNorm")
        _refuse_hooks(model)
        self.layers: List[_Layer] = []
        self.params: Dict[str, torch.Tensor] = {}
        self.shapes: Dict[str, tuple] = {}
        stage = "image"
        self.in_channels = None
        n_drop = 0
        for name, mod in leaf_layers(model):
            prefix = f"{name}." if name else ""
            if type(mod) not in GROUPED_LAYERS:
                raise ValueError(f"layer {name!r} is {a_type(mod)}; the grouped path supports only "
                                 f"{', '.join(t.__name__ for t in GROUPED_LAYERS)} — use path='vmap'")
            if isinstance(mod, nn.Conv2d):
                if stage != "image":
                    raise ValueError(f"layer {name!r}: Conv2d after Flatten is not supported")
                if mod.groups != 1 or mod.padding_mode != "zeros":
                    raise ValueError(f"layer {name!r}: only Conv2d with groups=1 and padding_mode='zeros' is supported")
                if conv == "gemm" and (tuple(mod.stride) != (1, 1) or tuple(mod.dilation) != (1, 1)
                                       or isinstance(mod.padding, str)):
                    raise ValueError(f"layer {name!r}: conv='gemm' supports stride 1, dilation 1 and integer padding "
                                     f"(got stride {mod.stride}, dilation {mod.dilation}, padding {mod.padding!r}); "
                                     "use conv='cudnn'")
                if self.in_channels is None:
                    self.in_channels = mod.in_channels
                w = prefix + "weight"
                self._alloc(w, tuple(mod.weight.shape), conv=True)
                b = None
                if mod.bias is not None:
                    b = prefix + "bias"
                    self._alloc(b, tuple(mod.bias.shape))
                self.layers.append(_Layer("conv", w, b, dict(stride=mod.stride, padding=mod.padding,
                                                            dilation=mod.dilation, out=mod.out_channels)))
            elif isinstance(mod, nn.Linear):
                if stage != "vector":
                    raise ValueError(f"layer {name!r}: Linear before Flatten is not supported (add nn.Flatten)")
                w = prefix + "weight"
                self._alloc(w, tuple(mod.weight.shape))
                b = None
                if mod.bias is not None:
                    b = prefix + "bias"
                    self._alloc(b, tuple(mod.bias.shape))
                self.layers.append(_Layer("linear", w, b))
            elif isinstance(mod, nn.ReLU):
                self.layers.append(_Layer("relu"))
            elif isinstance(mod, (nn.MaxPool2d, nn.AvgPool2d)):
                if stage != "image":
                    raise ValueError(f"layer {name!r}: pooling after Flatten is not supported")
                if isinstance(mod, nn.MaxPool2d):
                    if mod.return_indices:
                        raise ValueError(f"layer {name!r}: MaxPool2d(return_indices=True) is not supported")
                    opts = dict(kernel_size=mod.kernel_size, stride=mod.stride, padding=mod.padding,
                                dilation=mod.dilation, ceil_mode=mod.ceil_mode)
                    self.layers.append(_Layer("maxpool", options=opts))
                else:
                    opts = dict(kernel_size=mod.kernel_size, stride=mod.stride, padding=mod.padding,
                                ceil_mode=mod.ceil_mode, count_include_pad=mod.count_include_pad,
                                divisor_override=mod.divisor_override)
                    self.layers.append(_Layer("avgpool", options=opts))
            elif isinstance(mod, nn.Dropout):
                if mod.p > 0:
                    self.layers.append(_Layer("dropout", options=dict(p=float(mod.p), id=n_drop, stage=stage)))
                n_drop += 1
            elif isinstance(mod, nn.Flatten):
                if stage != "image" or mod.start_dim != 1 or mod.end_dim != -1:
                    raise ValueError(f"layer {name!r}: only one Flatten(start_dim=1, end_dim=-1) is supported")
                stage = "vector"
                self.layers.append(_Layer("flatten"))
            # Identity: nothing
        if stage != "vector":
            raise ValueError("the grouped path needs a network that ends with Flatten + Linear layers (logits per model)")
        if self.in_channels is None:
            raise ValueError("the grouped path needs image inputs: the network must contain a Conv2d before Flatten")
        self.num_dropout = n_drop
        names = [n for n, _ in model.named_parameters()]
        if sorted(names) != sorted(self.params):
            raise ValueError(f"parameters {sorted(set(names) ^ set(self.params))} are not covered by the grouped layers")
        self.names = names

    # ------------------------------------------------------------------ storage
    def _alloc(self, name: str, shape: tuple, conv: bool = False) -> None:
        m = self.num_models
        if conv and self.channels_last:
            out, cin, kh, kw = shape
            t = torch.zeros((m, out, kh, kw, cin), device=self.device, dtype=self.dtype).permute(0, 1, 4, 2, 3)
        else:
            t = torch.zeros((m,) + shape, device=self.device, dtype=self.dtype)
        self.params[name] = t
        self.shapes[name] = shape

    def prefix(self, a: int) -> Dict[str, torch.Tensor]:
        """Views ``{name: params[name][:a]}`` of the first ``a`` models (no copies)."""
        return {n: t[:a] for n, t in self.params.items()}

    # ------------------------------------------------------------------ input layout
    def image_input(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, H, W, a, C)`` images -> grouped input ``(B, a*C, H, W)`` (channels-last view
        when ``x`` is contiguous; a contiguous NCHW copy when ``channels_last=False``);
        with ``conv="gemm"`` the model-major ``(a, B, H, W, C)`` (a copy)."""
        if self.conv == "gemm":
            return x.permute(3, 0, 1, 2, 4).contiguous()
        b, h, w, a, c = x.shape
        out = x.reshape(b, h, w, a * c).permute(0, 3, 1, 2)
        return out if self.channels_last else out.contiguous()

    # ------------------------------------------------------------------ forward
    def forward(self, params: Dict[str, torch.Tensor], x: torch.Tensor, a: int,
                dropout_keys: Optional[torch.Tensor] = None, step=None) -> torch.Tensor:
        """Logits ``(a, B, K)`` of the first ``a`` models.

        ``params`` maps names to ``(a, *shape)`` tensors (e.g. :meth:`prefix` views or leaves
        made from them); ``x`` is the grouped input ``(B, a*C, H, W)`` (:meth:`image_input`;
        ``(a, B, H, W, C)`` with ``conv="gemm"``). Dropout is applied
        with :func:`~fedlib.engines.augment.seeded_dropout_mask` when ``dropout_keys``
        (int64 ``(a,)``) and ``step`` are given, and skipped otherwise (evaluation).
        """
        gemm = self.conv == "gemm"
        bsz = x.shape[1] if gemm else x.shape[0]
        for layer in self.layers:
            k = layer.kind
            if k == "conv":
                w, o = params[layer.weight], layer.options
                bias = params[layer.bias] if layer.bias is not None else None
                if gemm:  # weight as (a, out, kh, kw, in): its storage order
                    x = stacked_conv2d(x, w.permute(0, 1, 3, 4, 2), bias, o["padding"])
                else:
                    w4 = w.reshape((a * w.shape[1],) + tuple(w.shape[2:]))
                    x = F.conv2d(x, w4, None if bias is None else bias.reshape(-1), o["stride"], o["padding"],
                                 o["dilation"], a)
            elif k == "linear":
                w = params[layer.weight]
                if layer.bias is not None:
                    x = torch.baddbmm(params[layer.bias].unsqueeze(1), x, w.transpose(1, 2))
                else:
                    x = torch.bmm(x, w.transpose(1, 2))
            elif k == "relu":
                x = F.relu(x)
            elif k in ("maxpool", "avgpool"):
                if gemm:
                    x = stacked_pool2d(x, k[:3], **layer.options)
                else:
                    x = (F.max_pool2d if k == "maxpool" else F.avg_pool2d)(x, **layer.options)
            elif k == "flatten":  # to (a, B, C*H*W), flattened in the plain model's (C, H, W) order
                if gemm:
                    x = x.permute(0, 1, 4, 2, 3).reshape(a, bsz, -1)
                else:
                    x = x.unflatten(1, (a, x.shape[1] // a)).permute(1, 0, 2, 3, 4).reshape(a, bsz, -1)
            elif k == "dropout":
                if dropout_keys is None:
                    continue
                o = layer.options
                if o["stage"] == "vector":
                    mask = seeded_dropout_mask(dropout_keys[:a], step, o["id"], x.shape[1:], o["p"], x.dtype)
                else:  # one (B, C, H, W) mask per model, laid out as the activations
                    if gemm:
                        _, _, h, w_, c = x.shape
                    else:
                        _, ac, h, w_ = x.shape
                        c = ac // a
                    mask = seeded_dropout_mask(dropout_keys[:a], step, o["id"], (bsz, c, h, w_), o["p"], x.dtype)
                    mask = (mask.permute(0, 1, 3, 4, 2) if gemm
                            else mask.permute(1, 0, 2, 3, 4).reshape(bsz, a * c, h, w_))
                x = x * mask
        return x

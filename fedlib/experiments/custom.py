r"""Your own model and your own per-client tensors through the stacked engine.

:func:`train_clients` is the short entry point of the "Your own model" chapter::

    from fedlib.experiments.custom import train_clients
    runs = train_clients(model, client_x, client_y, rounds=20, lr=0.05, epochs="1-5")
    runs["fednova"][-1]["chi2"], runs["fedavg"][-1]["train_loss"]

``model`` is any ``torch.nn.Module`` without buffers (no BatchNorm — see
:class:`~fedlib.engines.stacked.StackedEngine`) mapping a batch ``(B, *feature_shape)`` to
class logits ``(B, K)``, and whose training mode differs from its eval mode only through its
``nn.Dropout`` layers (the engine runs the model in eval mode with those layers replaced by seeded
per-client masks; ``F.dropout(x, p, self.training)``, noise injection and other training-only
behaviour are refused, as they would be silently off); ``client_x[i]`` / ``client_y[i]`` are client ``i``'s float
features ``(n_i, *feature_shape)`` and integer labels ``(n_i,)``. All runs (one per
algorithm) start from ``model``'s parameters and train together in one
:class:`TensorEngine` — the stacked engine's ``vmap`` path with feature tensors instead
of images (no augmentation, no normalisation). Weights :math:`p_i = n_i / n`,
:math:`\tau_i = E_i \lceil n_i / B \rceil`, mini-batches, lr schedule, aggregation,
diagnostics: exactly as for CIFAR-10. :func:`reference_differences` checks a result against
the plain per-client loop on the same mini-batches (run it with ``dtype=torch.float64``).

Used by chapter 6 (:func:`train_clients`, :func:`reference_differences`).
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Dict, Iterable, Optional, Sequence

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from .._validate import a_type, check_agree, check_choice, check_flag, check_int, check_sequence
from ..engines.stacked import (RunSpec, StackedEngine, _check_int_labels, _check_labels, _non_finite, _num_classes,
                               _resolve_dtype, _torch_readable, max_relative_difference, reference_run)

__all__ = ["TensorEngine", "train_clients", "reference_differences"]


def _as_tensor(t, what: str) -> torch.Tensor:
    """``t`` as a tensor, detached: features and labels are data, and features that carry an autograd graph
    (the output of an encoder computed without ``torch.no_grad()``) made every local step differentiate through
    that graph as well (18x slower) and the reference loop chain one graph through all its steps."""
    try:
        return torch.as_tensor(_torch_readable(t)).detach()
    except Exception as exc:
        raise ValueError(f"{what} must be a tensor or array ({exc})") from None


def _first_bad_row(x: torch.Tensor) -> int:
    """The first row (sample) of ``x`` ``(n, ...)`` that holds NaN or inf (one exists: the error path only)."""
    return int((~torch.isfinite(x)).flatten(1).any(1).nonzero()[0])


def _cast_finite(x: torch.Tensor, dtype: torch.dtype, what: str) -> torch.Tensor:
    """``x`` in ``dtype``, refused (naming ``what`` and the sample) when the cast holds NaN or inf: a value that
    was not finite, or a finite float64 one that overflows float32 (:func:`train_clients`' inputs)."""
    out = x.to(dtype)
    if not bool(torch.isfinite(out).all()):
        raise ValueError(f"{what} {_non_finite(x, dtype)} (sample {_first_bad_row(out)})")
    return out


def _cast_features(x: torch.Tensor, device, dtype: torch.dtype, what: str) -> torch.Tensor:
    """Finite features ``x`` in the engine's ``dtype``; a narrowing cast (float64 -> float32) is checked once,
    since a finite 1e39 is inf in float32."""
    out = x.to(device, dtype)
    if torch.finfo(x.dtype).max > torch.finfo(dtype).max and not bool(torch.isfinite(out).all()):
        raise ValueError(f"{what}: row {_first_bad_row(out)} {_non_finite(x, dtype)}")
    return out


class TensorEngine(StackedEngine):
    """:class:`~fedlib.engines.stacked.StackedEngine` (``path="vmap"``) on feature tensors instead of uint8 images.

    ``features`` ``(N, *shape)`` float, ``labels`` ``(N,)`` int; optional ``test_features`` /
    ``test_labels`` (both or neither); every label in ``0..K-1``, ``K`` the model's logits (``ValueError`` naming
    ``labels`` / ``test_labels`` otherwise). Everything else — runs,
    clients as index arrays, schedules, solver update, aggregation, evaluation — is the
    parent's; only the two input hooks differ: :meth:`train_batch` gathers feature rows and
    :meth:`test_batches` yields the test features (the way to feed any data to the engine).

    ``rounds`` is the number of rounds of the run (as :class:`~fedlib.engines.stacked.StackedEngine`'s).
    """

    _train_labels_name = "labels"  # how the parent's label errors name them

    def __init__(self, model: nn.Module, features, labels, runs: Sequence[RunSpec], *, rounds: int,
                 test_features=None, test_labels=None, **options):
        for bad in ("path", "augment", "padding", "mean", "std", "channels_last", "conv"):
            if bad in options:
                raise ValueError(f"TensorEngine does not take {bad!r} (vmap path, no image processing)")
        x = _as_tensor(features, "features")
        y = _as_tensor(labels, "labels")
        if not x.is_floating_point() or x.ndim < 2:
            raise ValueError(f"features must be a float tensor (N, ...), got {x.dtype} {tuple(x.shape)}")
        if not bool(torch.isfinite(x).all()):
            raise ValueError(f"features hold NaN or inf (row {_first_bad_row(x)})")
        if y.ndim != 1 or y.is_floating_point():
            raise ValueError(f"labels must be {x.shape[0]} integers, got {y.dtype} {tuple(y.shape)}")
        # either may be the wrong one: 'labels must be 6 integers' blamed labels for a row too many in features
        check_agree("labels", y.shape[0], "features", x.shape[0], "entries", ref_what="rows")
        if (test_features is None) != (test_labels is None):
            raise ValueError("test_features and test_labels go together: give both (evaluation) or neither")
        self._probe = x[:8]  # what the parent's training-mode check runs the model on (_training_mode_sample)
        # the parent validates and stores images; give it a 1-pixel placeholder per sample
        stub = SimpleNamespace(train_images=torch.zeros((x.shape[0], 1, 1, 1), dtype=torch.uint8), train_labels=y)
        super().__init__(model, stub, runs, rounds=rounds, path="vmap", augment=False, padding=0, mean=(0.0,),
                         std=(1.0,), **options)
        self._features = _cast_features(x, self.device, self.dtype, "features")
        # the parent refused labels the logits cannot index (as "labels"), with the K its training-mode check read
        # on the first feature rows; before, the first round failed with "index 3 is out of bounds for dimension 2
        # with size 3" (a device-side assert on CUDA), naming neither the labels nor K
        # each run's initial global model, for reference_differences' check of the model it is given
        self._initial = [{n: t.detach().cpu().clone() for n, t in st.params.items()} for st in self.states]
        self._test_features = None
        if test_features is not None:
            tx, ty = _as_tensor(test_features, "test_features"), _as_tensor(test_labels, "test_labels")
            if tuple(tx.shape[1:]) != tuple(x.shape[1:]) or ty.shape != (tx.shape[0],):
                raise ValueError("test_features / test_labels must match the training features' shape")
            if not tx.is_floating_point() or not bool(torch.isfinite(tx).all()):
                raise ValueError(f"test_features must be finite floats, got {tx.dtype} with NaN/inf or not float")
            _check_int_labels(ty, "test_labels")  # a float label would be truncated, a negative one fail in evaluate
            _check_labels(ty, self._num_classes, "test_labels")
            self._test_features = _cast_features(tx, self.device, self.dtype, "test_features")
            self._test_feature_labels = ty.to(self.device, torch.int64)

    def _training_mode_sample(self, images: torch.Tensor) -> torch.Tensor:
        """The first feature rows (the placeholder ``images`` carry no data)."""
        return self._probe

    def train_batch(self, a: int):
        """Rows of the feature tensor for the current local step: ``(a, B, *shape)``."""
        idx, mask = self.step_indices(a)
        idx = idx.t()  # (a, B)
        return self._features[idx], self._train_labels[idx], mask

    def test_batches(self):
        """The test features in chunks of ``eval_batch_size`` rows (nothing without them)."""
        if self._test_features is None:
            return
        for s in range(0, self._test_features.shape[0], self.eval_batch_size):
            yield (self._test_features[s:s + self.eval_batch_size],
                   self._test_feature_labels[s:s + self.eval_batch_size])


def _is_zero(value) -> bool:
    """``value`` is a number (Python, numpy or a one-element tensor) equal to 0."""
    try:
        return float(value) == 0
    except (TypeError, ValueError, RuntimeError):
        return False


def _refuse_one_client(name: str, value: Any, ndim: int, what: str) -> None:
    """``ValueError`` naming ``name`` when it is one tensor or array of at most ``ndim`` dimensions: one client's
    data, not a list of clients (iterating it gives its rows, which no client's data can be: before, one client's
    features ``(n, d)`` were refused as "client_x[0] must be (n_i, *feature_shape) ..., got shape (d,)"). A stacked
    tensor of equally many samples per client, ``(m, n, ...)``, lists its clients and is taken."""
    if (isinstance(value, torch.Tensor) or isinstance(value, np.ndarray)) and value.ndim <= ndim:
        raise ValueError(f"{name} must list the clients, one {what} per client, got one {type(value).__name__} of "
                         f"shape {tuple(value.shape)} (the data of a single client? client_x=[x], client_y=[y]; "
                         "several clients: one tensor each, e.g. list(torch.split(x, sizes)))")


def train_clients(model: nn.Module, client_x: Sequence[Any], client_y: Sequence[Any], *, rounds: int = 20,
                  lr: float = 0.05, epochs="1-5", batch_size: int = 32, algorithms=("fedavg", "fednova"),
                  solver: str = "sgd", momentum: Optional[float] = None, mu: float = 0.0, weight_decay: float = 0.0,
                  lr_decay: str = "constant", seed: int = 0, test_x=None, test_y=None, device="cpu",
                  dropout: bool = True, dtype: Optional[torch.dtype] = None, progress: bool = False) -> Dict[str, list]:
    """Train ``model`` federatedly on per-client tensors with each of ``algorithms``.

    Returns ``{algorithm: history}``, a history being one dict per round with ``round``,
    ``train_loss`` (the clients' mean mini-batch loss during the round, weighted by
    :math:`p_i`), ``test_accuracy`` / ``test_loss`` (on ``test_x, test_y``; NaN without),
    ``tau_eff``, ``chi2``, ``clients`` (the participants), ``local_steps``, ``lr``; plus ``"engine"``: the trained
    :class:`TensorEngine` (``engine.states[r].params`` are the final global models).
    ``client_x`` / ``client_y``: one feature tensor ``(n_i, ...)`` / label tensor ``(n_i,)`` per client, in a
    list or any iterable but a mapping (anything else is a ``ValueError`` naming it: also one client's tensor,
    ``(n, d)`` features or ``(n,)`` labels, given instead of a list of clients).
    ``rounds``: communication rounds; ``lr``: the client learning rate :math:`\\eta`; ``lr_decay``: ``"constant"``
    (default: ``lr`` every round) or ``"step"`` (÷10 after 50 % and ÷100 after 75 % of the rounds,
    :func:`fedlib.schedules.step_decay_lr`: the paper's CIFAR-10 schedule, ``run cifar10``'s default).
    ``epochs``: ``"2"`` or an inclusive range ``"1-5"`` drawn per client and round; ``batch_size``: :math:`B`.
    ``seed``: the runs' seed (mini-batches, random epochs, dropout masks); ``device``: a torch device;
    ``dropout``: ``False`` turns the model's ``nn.Dropout`` layers off (identity) in training too.
    ``solver``: ``"sgd"``, ``"prox"``, ``"momentum"`` or ``"momentum-prox"``
    (:func:`fedlib.solvers.make_solver`); ``mu`` is refused with a solver without a proximal term, and
    ``momentum`` (default 0.9) with one without a momentum buffer.
    A :class:`fedlib.solvers.LocalSolver` object is refused (it would clash with ``lr``, ``momentum``,
    ``mu``, ``weight_decay`` and ``lr_decay``): build the runs yourself,
    ``RunSpec(make_algorithm(name, solver), ...)`` in :class:`TensorEngine` (a solver with the built-in
    step; give it ``lr_at=lambda t: lr`` for this function's constant rate: a ``RunSpec``'s default is the step
    decay), or your own loop with :class:`fedlib.optim.ClientOptimizer` (any solver; chapter 6).
    Participation is full every round (your own sampler: ``RunSpec(..., sampling=sampler)``). The server optimizer
    is plain (eq. 4 as written); server momentum or FedAdam on your own model:
    ``RunSpec(make_algorithm(name, solver, fedlib.server.momentum(0.9)), ...)`` in :class:`TensorEngine`, or your own
    loop with :class:`fedlib.optim.ClientOptimizer`.
    ``dtype``: of the parameters and features, ``torch.float32`` or ``torch.float64`` (for
    :func:`reference_differences`), the model's parameters cast to it; ``None`` (default): the
    model's own dtype (a float64 model trains in float64; a float16 or bfloat16 model is refused,
    naming its dtype: give ``dtype``).
    ``progress``: a tqdm bar on stderr, one tick per round, with each algorithm's last train loss.
    """
    from ..algorithms import make_algorithm
    from ..schedules import make_epoch_schedule, step_decay_lr
    from ..solvers import make_solver
    from .cifar10 import history_record

    if not isinstance(solver, str):
        raise ValueError(f"solver must be a name, 'sgd', 'prox', 'momentum' or 'momentum-prox' (train_clients builds it "
                         f"from lr, momentum, mu and weight_decay), got {a_type(solver)}; to train with your own "
                         "LocalSolver, build RunSpec(make_algorithm(name, solver), ...) for "
                         "fedlib.experiments.custom.TensorEngine (solvers with the built-in step) or use "
                         "fedlib.optim.ClientOptimizer in your own loop (any solver, chapter 6)")
    message = f"algorithms must be a non-empty sequence of names, e.g. ('fedavg', 'fednova'), got {algorithms!r}"
    if isinstance(algorithms, str) or not isinstance(algorithms, Iterable):  # tuple(5): "'int' object is not iterable"
        raise ValueError(message)
    algorithms = tuple(algorithms)
    if not algorithms:
        raise ValueError(message)
    if len(set(algorithms)) != len(algorithms):
        raise ValueError(f"algorithms must not repeat a name (one history per name), got {algorithms}")
    check_choice("lr_decay", lr_decay, ("constant", "step"))
    seed = check_int("seed", seed)  # else named as the engine's runs[0].seed, which the caller never built
    progress = check_flag("progress", progress)  # "no" is truthy: it drew a bar (dropout: the engine checks it)
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if next(iter(model.parameters()), None) is None:  # ran and trained nothing
        raise ValueError(f"model has no parameters ({type(model).__name__}): there is nothing to train; give a model "
                         "with trainable layers, e.g. nn.Sequential(nn.Flatten(), nn.Linear(d, K))")
    dtype = _resolve_dtype(model, dtype)  # features are cast with it before the engine checks
    if solver in ("sgd", "momentum") and not _is_zero(mu):
        raise ValueError(f"mu: solver {solver!r} has no proximal term, got mu = {mu!r} (FedProx: solver='prox' or "
                         "'momentum-prox')")
    if solver in ("sgd", "prox") and momentum is not None:
        raise ValueError(f"momentum: solver {solver!r} has no momentum buffer, got momentum = {momentum!r} (local "
                         "momentum: solver='momentum' or 'momentum-prox')")
    _refuse_one_client("client_x", client_x, 2, "feature tensor (n_i, *feature_shape)")
    _refuse_one_client("client_y", client_y, 1, "label tensor (n_i,)")
    client_x = check_sequence("client_x", client_x, "feature tensors (n_i, ...), one per client")
    client_y = check_sequence("client_y", client_y, "label tensors (n_i,), one per client")
    if len(client_x) != len(client_y) or len(client_x) == 0:
        raise ValueError(f"client_x and client_y must list the same clients (got {len(client_x)} and {len(client_y)})")
    if (test_x is None) != (test_y is None):
        raise ValueError("test_x and test_y go together: give both (evaluation) or neither")
    xs = [_as_tensor(x, f"client_x[{i}]") for i, x in enumerate(client_x)]
    ys = [_as_tensor(y, f"client_y[{i}]") for i, y in enumerate(client_y)]
    cast = []  # the features in the run's dtype: float64 features are not rounded, nor checked before an overflow
    for i, (x, y) in enumerate(zip(xs, ys)):
        if x.ndim < 2:  # a 1-d tensor of n values: n samples of one feature, or one sample of n features?
            raise ValueError(f"client_x[{i}] must be (n_i, *feature_shape), samples first, got shape {tuple(x.shape)}; "
                             "one feature per sample: client_x[i][:, None]")
        if y.ndim != 1:  # was "client 0: needs n_i >= 1 samples and one label per sample, got (5, 6) / (5, 3)"
            hint = ""
            if y.ndim == 2 and y.shape[1] > 0:  # (n, 0): neither repair applies (argmax of no entries raises)
                hint = " (a column? give y[:, 0])" if y.shape[1] == 1 else " (one-hot rows? give y.argmax(1))"
            raise ValueError(f"client_y[{i}] must be a 1-d tensor of n_i integer class labels, got shape "
                             f"{tuple(y.shape)}{hint}")
        if x.shape[0] == 0:
            raise ValueError(f"client {i}: needs n_i >= 1 samples and one label per sample, got {tuple(x.shape)} / "
                             f"{tuple(y.shape)}")
        # '... one label per sample, got (4, 2) / (3,)' named neither argument
        check_agree(f"client_y[{i}]", y.shape[0], f"client_x[{i}]", x.shape[0], "labels", ref_what="samples")
        if x.shape[1:] != xs[0].shape[1:]:
            raise ValueError(f"client {i}: features of shape {tuple(x.shape[1:])}, client 0 has {tuple(xs[0].shape[1:])}")
        if not x.is_floating_point():
            raise ValueError(f"client_x[{i}] must be a float tensor, got {x.dtype}")
        cast.append(_cast_finite(x, dtype, f"client_x[{i}]"))
    num_classes = _num_classes(model, xs[0], "client_x[0]")
    for i, y in enumerate(ys):
        _check_labels(y, num_classes, f"client_y[{i}]")
    if test_y is not None:
        tx, ty = _as_tensor(test_x, "test_x"), _as_tensor(test_y, "test_y")
        if tx.ndim < 2 or tx.shape[1:] != xs[0].shape[1:]:  # else the engine's message names its own test_features
            raise ValueError(f"test_x must be (n, *feature_shape) with the clients' feature shape "
                             f"{tuple(xs[0].shape[1:])}, got shape {tuple(tx.shape)}")
        if ty.ndim != 1 or ty.shape[0] != tx.shape[0]:
            raise ValueError(f"test_y must hold one label per row of test_x ({tx.shape[0]}), got shape {tuple(ty.shape)}")
        _check_labels(ty, num_classes, "test_y")
        if not tx.is_floating_point():  # as client_x: the engine's own messages name its test_features
            raise ValueError(f"test_x must be a float tensor, got {tx.dtype}")
        test_x = _cast_finite(tx, dtype, "test_x")
    sizes = [int(x.shape[0]) for x in xs]
    offsets = np.cumsum([0] + sizes)
    parts = [np.arange(offsets[i], offsets[i + 1]) for i in range(len(sizes))]
    feats = torch.cat(cast)
    labels = torch.cat([y.long() for y in ys])
    runs = []
    for name in algorithms:
        local = make_solver(solver, lr, momentum=momentum, mu=mu if solver in ("prox", "momentum-prox") else 0.0,
                            weight_decay=weight_decay)
        lr_at = (lambda t, lr=lr: step_decay_lr(lr, t, rounds)) if lr_decay == "step" else (lambda t, lr=lr: lr)
        runs.append(RunSpec(make_algorithm(name, local), parts, make_epoch_schedule(sizes, batch_size, epochs, seed=seed),
                            seed=seed, lr_at=lr_at, name=name))
    engine = TensorEngine(model, feats, labels, runs, rounds=rounds, test_features=test_x, test_labels=test_y,
                          device=device, batch_size=batch_size, dropout=dropout, dtype=dtype)
    out: Dict[str, Any] = {name: [] for name in algorithms}
    with tqdm(total=rounds, desc="train_clients", unit="round", disable=not progress) as bar:
        for _ in range(rounds):
            for rec in engine.run_round():
                out[rec.name].append(history_record(rec))
            bar.set_postfix({name: f"{out[name][-1]['train_loss']:.4g}" for name in algorithms}, refresh=False)
            bar.update(1)
    out["engine"] = engine
    return out


def reference_differences(model: nn.Module, result: Dict[str, Any]) -> Dict[str, float]:
    r"""How far :func:`train_clients`' final global models are from the plain per-client loop.

    Each run of ``result["engine"]`` is trained again by
    :func:`fedlib.engines.stacked.reference_run` — one client after another, one local step
    after another, the gradient of ``model`` itself on the same mini-batches and dropout
    masks — for as many rounds as the engine trained; returns ``{algorithm: max over
    parameters of max |x - x_ref| / max |x_ref|}``. With ``train_clients(...,
    dtype=torch.float64)`` this is summation-order noise (chapter 6 asserts it below
    1e-10); in float32 it grows with the rounds. ``model`` must be the one given to
    :func:`train_clients` (its parameters are the runs' initial model; ``ValueError`` when they are
    not: another model would give a large difference that says nothing about the engine).
    """
    engine = result.get("engine") if isinstance(result, dict) else None
    if not isinstance(engine, TensorEngine):
        raise ValueError("result must be what train_clients returned (a dict with its 'engine')")
    names = [run.name for run in engine.runs]
    if len(set(names)) != len(names):  # the result is keyed by name: one run's difference would replace another's
        raise ValueError(f"the engine's runs must have distinct names (the differences are keyed by name), got {names}")
    mine = {n: t.detach().cpu().to(engine.dtype) for n, t in model.named_parameters()}
    for r, run in enumerate(engine.runs):
        if run.params is not None:  # the reference starts from the run's own initial model
            continue
        start = engine._initial[r]
        if mine.keys() != start.keys() or any(mine[n].shape != t.shape or not torch.equal(mine[n], t)
                                              for n, t in start.items()):
            raise ValueError(f"model's parameters are not the initial model of run {run.name!r}: give "
                             "reference_differences the model given to train_clients, unchanged (the reference "
                             "loop starts from its parameters)")
    data = SimpleNamespace(train_features=engine._features.cpu(), train_labels=engine._train_labels.cpu())
    out = {}
    for r, run in enumerate(engine.runs):
        ref = reference_run(model, data, run, rounds=engine.round_index, engine_rounds=engine.rounds,
                            batch_size=engine.batch_size, dropout=engine.dropout, dtype=engine.dtype).state.params
        out[run.name] = max_relative_difference(engine.params(r), ref)
    return out

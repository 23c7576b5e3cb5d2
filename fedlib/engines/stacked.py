r"""The stacked-client torch engine: all clients of a round (of several runs) trained together.

Used by chapter 6 (:func:`max_relative_difference`), and through :mod:`fedlib.experiments.cifar10` by
chapter 5, the CIFAR-10 / VGG-11 chapter (Table 1, paper §6, the official setup). Every local
step of every client of every stacked run is one forward/backward of one network:

``path="grouped"`` (fast)
    the network (an ``nn.Sequential`` of standard layers, e.g. :func:`fedlib.models.vgg11`)
    is rewritten as ONE network of grouped convolutions (``groups=M``, channels-last) and
    batched matmuls (:class:`fedlib.engines.grouped.GroupedNetwork`).
``path="vmap"`` (generic)
    any ``nn.Module`` without buffers, through ``torch.func.functional_call`` /
    ``vmap`` / ``grad_and_value`` over the stacked parameters.

Both paths share everything else, and both are tested against the plain per-client loop
:func:`fedlib.engines.reference.run_sequential` to 1e-10 in float64, fed the very same
batches, crops, flips and dropout masks by :func:`reference_run` (chapter 5 runs that check
in the book).

A round
-------
1. *Plan (host).* For every run: its client lr (:func:`fedlib.schedules.step_decay_lr`
   by default), participants (:func:`fedlib.sampling.round_participation`), local steps
   :math:`\tau_i` (its schedule; :math:`E\lceil n_i/B\rceil` for CIFAR). All participating
   (run, client) pairs become the ``M_t`` rows of the stack, **sorted by** :math:`\tau`
   **descending**, so the models still running at local step ``k`` are a prefix
   ``[:a_k]`` and slicing the stacked parameters is a view. Mini-batches:
   :func:`client_batch_plan` (a fresh permutation per epoch from
   ``generator(seed, "batches", round, client)``, last partial batch kept, padded to
   ``B`` with a 0/1 mask); augmentation parameters: :func:`client_augment_params`
   (``torch_generator(seed, "augment", round, client)``, CPU); dropout key:
   :func:`~fedlib.engines.augment.dropout_key`. :math:`\|a_i\|_1` comes from the solver's
   online counter (the same scalar recursion as :meth:`~fedlib.solvers.LocalSolver.update`).
2. *Load (device).* One copy of the round's index/mask/offset/lr tables into static
   buffers; rows of the stacked parameters set to their run's global model, momentum
   zeroed, VR corrections :math:`\bar c - c_i` written.
3. *Local steps.* Step ``k`` with ``a_k`` active models: gather + crop/flip + normalise
   the batch on the device; forward, loss = per-model mean cross-entropy over its real
   samples (padding masked) summed over models (models are independent, so each gets
   exactly its own gradient); backward; the solver update as in-place tensor ops on the
   prefix views (exactly :class:`fedlib.solvers.LocalSolver`'s rule, per-model
   coefficients):
   :math:`\tilde g = g + \lambda x + c`, :math:`u \leftarrow \rho u + \tilde g`,
   :math:`x \leftarrow x - \eta_k(u + \mu(x - x_0))` (prox outside the buffer);
   per-model losses accumulate on the device — no host sync inside the round.
4. *Aggregate.* Non-finite loss of any model -> ``FloatingPointError`` naming round,
   run and clients. The stacked parameters become :math:`\Delta_i` in place, and each
   run's :meth:`~fedlib.algorithms.FederatedAlgorithm.apply` receives ``ClientUpdate``\ s whose deltas are
   views of the stack (so VR, FedNova, server momentum... come from the library).
5. *Evaluate.* The R new global models go to rows ``0..R-1`` and are evaluated together
   (same grouped/vmap network, no dropout) on the full test set.

Several runs stacked
--------------------
``StackedEngine(model, data, [RunSpec(...), RunSpec(...), ...])`` trains R runs as
``M = sum of their participants`` models: same architecture, each run with its own
initial model, algorithm (solver, aggregation, VR, server optimizer), seed, schedule,
client split, lr schedule and sampling. Coefficients that differ between runs
(:math:`\eta_k, \lambda, \rho, \mu`) are per-model vectors; the buffers that exist only
for some solvers (momentum, prox anchor, VR correction) are allocated when any run
needs them, and a zero coefficient makes a run's step identical to its own solver's.

CUDA graphs (``cuda_graph=True``, CUDA only)
--------------------------------------------
The whole local step — gather/augment, forward, backward, update, loss accumulation and
the step counter ``k += 1`` — reads only *static* device buffers (the round tables are
indexed by the on-device counter ``k``; the lr is a table too), so a captured step is
replayed with no host input at all. A graph is captured per **distinct prefix size**
``a`` (shapes differ), lazily, the first time ``a`` runs for at least
``graph_min_steps`` steps of a round (shorter segments run eagerly), after one real
eager step of size ``a`` on the capture stream as warm-up (cuDNN/cuBLAS initialisation);
graphs are cached across rounds (keyed by ``a``), so with fixed :math:`E` the capture
cost is paid once, and with random :math:`E` at most ``M`` graphs exist. All graphs
share one memory pool: every tensor allocated during a capture is a temporary freed
before the capture ends, so replays in any order cannot clobber each other. Autocast
runs with ``cache_enabled=False`` (required inside graphs). The step tables are
allocated for the schedules' largest possible :math:`\tau` (:func:`max_local_steps`;
``E_max * max_i ceil(n_i/B)`` for the epoch schedules), so graphs are never recaptured;
with a schedule of unknown bound they grow by 1.5x when a round needs more steps, and
the graphs are dropped and recaptured then. Graphs hold no host state: the round's
data, lr, coefficients and dropout keys are copied into the static buffers before the
first step of the round.

Example
-------
Table 1's momentum row, FedAvg and FedNova, three seeds each, as one stack of
6 runs x 16 clients = 96 models on one GPU::

    from fedlib.algorithms import make_algorithm
    from fedlib.data.cifar10 import load_cifar10
    from fedlib.data.partition import dirichlet_partition
    from fedlib.models import vgg11
    from fedlib.schedules import make_epoch_schedule
    from fedlib.solvers import momentum_sgd

    cifar = load_cifar10("path/to/data")   # the folder holding cifar-10-batches-py
    parts = dirichlet_partition(cifar.train_labels, 16, 0.1)      # official split, seed 2020
    sizes = [len(c) for c in parts]
    runs = [RunSpec(make_algorithm(a, momentum_sgd(0.02, 0.9, weight_decay=1e-4)), parts,
                    make_epoch_schedule(sizes, 32, "2-5", seed=s), seed=s, params=vgg11(seed=s),
                    name=f"{a}-s{s}")
            for a in ("fedavg", "fednova") for s in (0, 1, 2)]
    engine = StackedEngine(vgg11(), cifar, runs, rounds=100, device="cuda",
                           precision="bf16", cuda_graph=True)
    for records in engine.train():        # one list of RoundRecord (one per run) per round
        print([f"{r.name} {r.test_accuracy:.3f}" for r in records])

``engine.run_round()`` trains a single round; ``engine.states[r]`` is run ``r``'s
:class:`~fedlib.algorithms.ServerState` (global model, server momentum, variates),
``engine.history`` all records, ``engine.last_timing`` the last round's timing.

Precision: ``dtype`` (by default the model's own, float32 or float64; float64 for exactness
tests) is the dtype of the parameters, solver state and update; ``precision="bf16"`` runs forward and backward
under ``torch.autocast(device_type, bfloat16)`` with float32 master parameters (the
GPU mode of Table 1; on a CPU it runs too, slowly, which is how CI checks that path).

Buffers: modules with buffers (BatchNorm running statistics) and BatchNorm layers are
refused — normalising running statistics as if they were gradient progress is wrong
(a known mistake), and batch statistics would also mix in the padded samples.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import itertools
import math
import time
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .._validate import a_type, check_callable, check_choice, check_count, check_flag, check_int, round_lr
from ..algorithms import ClientUpdate, FederatedAlgorithm, RoundDiagnostics, ServerState, server_state_mismatch
from ..data.cifar10 import CIFAR10_MEAN, CIFAR10_STD
from ..rng import generator, torch_generator
from ..sampling import check_sampling, round_participation
from ..schedules import (FixedEpochs, FixedSteps, RandomEpochs, RandomSteps, check_epoch_schedule,
                         check_participant_steps, check_schedule_size, round_local_steps, step_decay_lr, steps_per_epoch)
from ..solvers import LocalSolver, check_builtin_step
from ..tree import tree_map
from .augment import crop_flip_gather, crop_flip_params, dropout_key, normalize, pad_images, seeded_dropout_mask
from .grouped import GroupedNetwork, _hook_owner, refuse_global_hooks_added_later, registered_hooks
from .reference import SequentialRun, run_sequential

__all__ = [
    "reference_run",
    "max_relative_difference",
    "RunSpec",
    "RoundRecord",
    "RoundTiming",
    "StackedEngine",
    "train_stacked",
    "client_batch_plan",
    "client_augment_params",
    "online_a_norms",
    "max_local_steps",
    "PATHS",
    "PRECISIONS",
]

#: How the stacked client models are computed — grouped convolutions or ``torch.func.vmap``.
PATHS = ("grouped", "vmap")
#: Training precisions — float32, or bfloat16 autocast.
PRECISIONS = ("fp32", "bf16")


# =========================================================================== public helpers
def client_batch_plan(seed: int, round_index: int, client: int, num_samples: int, local_steps: int,
                      batch_size: int):
    r"""Mini-batches of one client in one round: ``(positions, counts)``.

    Epoch ``e`` is a fresh permutation of ``0..n-1`` drawn from
    ``fedlib.rng.generator(seed, "batches", round, client)`` (epochs in order, one
    generator per round and client), cut into :math:`\lceil n/B\rceil` batches with the
    last partial batch kept; local step ``k`` uses batch ``k mod spe`` of epoch
    ``k // spe``. ``positions`` is ``(local_steps, B)`` int64 (positions in the client's
    sample list; the tail of a partial batch repeats its first entry, as padding) and
    ``counts`` ``(local_steps,)`` the number of real samples of each batch. The real samples are
    those of :func:`fedlib.engines.batched.minibatch_indices` with the same generator (only the padding
    differs: 0 there).

    Example
    -------
    :math:`n = 5`, :math:`B = 2`: batches of 2, 2, 1 per epoch; the partial batch is padded with its own
    first entry:

    >>> import numpy as np
    >>> from fedlib.engines.batched import minibatch_indices
    >>> from fedlib.rng import generator
    >>> positions, counts = client_batch_plan(0, round_index=0, client=1, num_samples=5, local_steps=4, batch_size=2)
    >>> counts, bool(positions[2, 1] == positions[2, 0])
    (array([2, 2, 1, 2]), True)
    >>> idx, _ = minibatch_indices(5, 2, 4, generator(0, "batches", 0, 1))
    >>> all(np.array_equal(positions[k, :c], idx[k, :c]) for k, c in enumerate(counts))
    True
    """
    n = check_int("num_samples", num_samples, minimum=1)
    tau = check_count("local_steps", local_steps, minimum=1)
    b = check_int("batch_size", batch_size, minimum=1)
    spe = -(-n // b)
    epochs = -(-tau // spe)
    # checked by name here: generator knows them only as its 'key's
    g = generator(seed, "batches", check_int("round_index", round_index), check_int("client", client))
    last = n - (spe - 1) * b
    pos = np.empty((epochs, spe * b), dtype=np.int64)
    for e in range(epochs):
        perm = g.permutation(n)
        pos[e, :n] = perm
        pos[e, n:] = perm[(spe - 1) * b]
    counts = np.full(spe, b, dtype=np.int64)
    counts[-1] = last
    return pos.reshape(epochs * spe, b)[:tau], np.tile(counts, epochs)[:tau]


def client_augment_params(seed: int, round_index: int, client: int, local_steps: int, batch_size: int,
                          padding: int = 4):
    r"""Crop offsets and flip bits ``(dy, dx, flip)``, each ``(local_steps, B)`` int64 on the CPU,
    from ``torch_generator(seed, "augment", round, client)`` (see
    :func:`fedlib.engines.augment.crop_flip_params`): offsets on ``0..2*padding`` (a crop of the
    image padded by ``padding`` on every side; ``padding`` is the centre), flips in ``{0, 1}``. ``local_steps`` is a
    whole number >= 1 and ``batch_size`` an integer >= 1 (``ValueError`` otherwise, as for :func:`client_batch_plan`).

    Example
    -------
    >>> dy, dx, flip = client_augment_params(0, round_index=0, client=1, local_steps=3, batch_size=2, padding=4)
    >>> tuple(dy.shape), bool(dy.min() >= 0 and dx.max() <= 8), sorted(set(flip.flatten().tolist())) <= [0, 1]
    ((3, 2), True, True)
    """
    # checked as client_batch_plan checks them: crop_flip_params' int() cut local_steps=1.5 to 1 step, took True as 1
    shape = (check_count("local_steps", local_steps, minimum=1), check_int("batch_size", batch_size, minimum=1))
    g = torch_generator(seed, "augment", check_int("round_index", round_index), check_int("client", client))
    return crop_flip_params(g, shape, padding)


def online_a_norms(solver: LocalSolver, steps: int) -> np.ndarray:
    r""":math:`\|a^{(k)}\|_1` after ``k = 1..steps`` local steps, by the solver's own online
    counter (:meth:`~fedlib.solvers.LocalSolver.online_a_norms`); entry ``tau - 1`` is the
    :math:`\|a_i\|_1` a client of :math:`\tau_i = \tau` steps reports.

    Example
    -------
    Heavy-ball momentum :math:`\rho = 1/2`: :math:`\|a^{(k)}\|_1 = \sum_{j<k}(1 - \rho^{k-j})/(1-\rho)`, i.e.
    :math:`1`, :math:`1 + 1.5 = 2.5`, :math:`1 + 1.5 + 1.75 = 4.25`:

    >>> from fedlib.solvers import momentum_sgd
    >>> online_a_norms(momentum_sgd(0.1, momentum=0.5), 3)
    array([1.  , 2.5 , 4.25])
    """
    if not isinstance(solver, LocalSolver):  # else "'str' object has no attribute 'online_a_norms'"
        raise ValueError(f"solver must be a fedlib.solvers.LocalSolver, got {type(solver).__name__}")
    return solver.online_a_norms(steps)


def max_local_steps(schedule) -> Optional[int]:
    r"""Upper bound of ``schedule.local_steps(t)`` over all rounds for the schedules of
    :mod:`fedlib.schedules` with one (``None`` otherwise). :class:`StackedEngine` sizes its step tables
    (and CUDA graphs) with it.

    Example
    -------
    One to two epochs of :math:`B = 5` on :math:`n_i = (9, 18, 36)`: at most :math:`2\lceil 36/5\rceil = 16` steps:

    >>> from fedlib.schedules import FixedSteps, RandomEpochs
    >>> max_local_steps(FixedSteps([2, 4, 8])), max_local_steps(RandomEpochs([9, 18, 36], 5, 1, 2))
    (8, 16)
    >>> max_local_steps(object()) is None
    True
    """
    if isinstance(schedule, FixedSteps):
        return max(schedule.steps)
    if isinstance(schedule, RandomSteps):
        return schedule.high
    if isinstance(schedule, (FixedEpochs, RandomEpochs)):
        spe = int(steps_per_epoch(np.asarray(schedule.num_samples), schedule.batch_size).max())
        return spe * (schedule.epochs if isinstance(schedule, FixedEpochs) else schedule.high)
    return None


# =========================================================================== specs & records
@dataclasses.dataclass
class RunSpec:
    r"""One federated run of a stack.

    Attributes
    ----------
    algorithm : the :class:`~fedlib.algorithms.FederatedAlgorithm` (solver, aggregation,
        VR, server optimizer, tau_eff).
    clients : one int array per client: its indices into the engine's training set (a number in its place is a
        ``ValueError``: a flat index array is not read as one client per sample).
        :math:`p_i = n_i / \sum_j n_j`. The arrays need not partition the training set, and are not checked to: a
        sample in several clients' arrays (a shared subset, a split of your own) belongs to each one's data set
        :math:`\mathcal{D}_i` and counts in each :math:`n_i`, an index repeated within a client counts twice there
        (the paper's :math:`F = \sum_i p_i F_i` needs no disjoint :math:`\mathcal{D}_i`); the splits of
        :mod:`fedlib.data.partition` are disjoint.
    schedule : object with ``local_steps(round) -> (m,) ints`` (``fedlib.schedules``): whole numbers >= 0,
        >= 1 for the round's participants (:func:`fedlib.schedules.round_local_steps`,
        :func:`fedlib.schedules.check_participant_steps`: a client left out of the round may do no work; for CIFAR ``make_epoch_schedule(sizes, 32, "2")`` or ``"2-5"``; an epoch schedule must
        count with the clients' sizes and the engine's ``batch_size``, a ``ValueError`` otherwise).
    seed : the run's seed (batches, augmentation, dropout, sampling streams).
    params : initial global model: ``None`` (the engine's ``model``), an ``nn.Module``
        of the same architecture, or a mapping name -> tensor.
    lr_at : ``round -> client lr``; default :func:`fedlib.schedules.step_decay_lr` of the
        solver's lr over the engine's ``rounds`` (÷10 at 50 %, ÷100 at 75 %).
    sampling, clients_per_round : participation (:func:`fedlib.sampling.sample_clients`), or your own
        sampler ``round -> Participation`` (:func:`fedlib.sampling.round_participation`; draw from
        ``fedlib.rng.generator(seed, "sampling", round)`` so that a resumed run draws the same;
        ``clients_per_round`` then ``None``).
    name : label used in messages and records; unique among the engine's runs (several may leave it empty).

    Example
    -------
    >>> import numpy as np
    >>> from fedlib.algorithms import make_algorithm
    >>> from fedlib.schedules import FixedSteps
    >>> from fedlib.solvers import sgd
    >>> run = RunSpec(make_algorithm("fednova", sgd(0.1)), [np.arange(4), np.arange(4, 12)], FixedSteps([1, 2]),
    ...               seed=3, name="fednova-s3")
    >>> run.name, run.seed, run.sampling, run.lr_at is None
    ('fednova-s3', 3, 'full', True)
    """

    algorithm: FederatedAlgorithm
    clients: Sequence[Any]
    schedule: Any
    seed: int = 0
    params: Any = None
    lr_at: Optional[Callable[[int], float]] = None
    sampling: Any = "full"
    clients_per_round: Optional[int] = None
    name: str = ""


class RoundRecord(NamedTuple):
    r"""What one run did in one round.

    ``test_accuracy`` / ``test_loss`` of the new global model on the full test set (NaN
    without test data); ``train_loss`` the participation-weighted mean of the clients'
    mean mini-batch losses during the round, ``client_losses`` those means (in
    participation order); ``diagnostics`` from :meth:`~fedlib.algorithms.FederatedAlgorithm.apply`.

    ``run`` and ``name`` are the run's position in the engine's runs and its :class:`RunSpec` name, ``round`` the round
    (from 0) and ``lr`` the client learning rate the run used in it.

    Example
    -------
    Two clients holding 4 and 8 of 12 tiny 4x4 images (:math:`p = (1/3, 2/3)`), :math:`\tau = (1, 2)` steps of
    :math:`B = 4`, a float64 convolution + linear layer: FedNova's
    :math:`\tau_{\text{eff}} = \tfrac13 + \tfrac23 \cdot 2 = 5/3`, and ``train_loss`` is :math:`p^\top` ``client_losses``:

    >>> import numpy as np, torch
    >>> from types import SimpleNamespace
    >>> from torch import nn
    >>> from fedlib.algorithms import make_algorithm
    >>> from fedlib.schedules import FixedSteps
    >>> from fedlib.solvers import sgd
    >>> images = np.random.default_rng(0).integers(0, 256, (12, 4, 4, 3), dtype=np.uint8)
    >>> data = SimpleNamespace(train_images=images, train_labels=np.arange(12) % 2)
    >>> _ = torch.manual_seed(0)
    >>> model = nn.Sequential(nn.Conv2d(3, 2, 3), nn.Flatten(), nn.Linear(8, 2)).double()
    >>> run = RunSpec(make_algorithm("fednova", sgd(0.1)), [np.arange(4), np.arange(4, 12)], FixedSteps([1, 2]))
    >>> engine = StackedEngine(model, data, [run], rounds=2, batch_size=4, augment=False, dropout=False)
    >>> record = engine.run_round()[0]
    >>> record.round, record.lr, round(record.diagnostics.tau_eff * 3, 12), bool(np.isnan(record.test_accuracy))
    (0, 0.1, 5.0, True)
    >>> bool(np.isclose(record.train_loss, engine.p(0) @ record.client_losses, rtol=1e-12, atol=0))
    True
    """

    run: int
    name: str
    round: int
    lr: float
    test_accuracy: float
    test_loss: float
    train_loss: float
    client_losses: np.ndarray
    diagnostics: RoundDiagnostics


class RoundTiming(NamedTuple):
    r"""Wall-clock of the last round: local training (incl. host planning and loading),
    aggregation, evaluation; ``images`` = real training samples processed,
    ``steps`` = number of stacked steps, ``graphs`` = number of cached CUDA graphs.
    ``engine.last_timing`` holds it (:class:`StackedEngine`).

    ``train_seconds``, ``aggregate_seconds`` and ``eval_seconds`` are those three times in seconds.

    Example
    -------
    Two clients holding 4 and 8 of 12 tiny 4x4 images (:math:`p = (1/3, 2/3)`), :math:`\tau = (1, 2)` steps of
    :math:`B = 4`, a float64 convolution + linear layer: :math:`4 + 2 \cdot 4 = 12` images in
    :math:`\max_i\tau_i = 2` stacked steps:

    >>> import numpy as np, torch
    >>> from types import SimpleNamespace
    >>> from torch import nn
    >>> from fedlib.algorithms import make_algorithm
    >>> from fedlib.schedules import FixedSteps
    >>> from fedlib.solvers import sgd
    >>> images = np.random.default_rng(0).integers(0, 256, (12, 4, 4, 3), dtype=np.uint8)
    >>> data = SimpleNamespace(train_images=images, train_labels=np.arange(12) % 2)
    >>> _ = torch.manual_seed(0)
    >>> model = nn.Sequential(nn.Conv2d(3, 2, 3), nn.Flatten(), nn.Linear(8, 2)).double()
    >>> run = RunSpec(make_algorithm("fednova", sgd(0.1)), [np.arange(4), np.arange(4, 12)], FixedSteps([1, 2]))
    >>> engine = StackedEngine(model, data, [run], rounds=1, batch_size=4, augment=False, dropout=False)
    >>> _ = engine.run_round()
    >>> engine.last_timing.images, engine.last_timing.steps, engine.last_timing.graphs
    (12, 2, 0)
    """

    train_seconds: float
    aggregate_seconds: float
    eval_seconds: float
    images: int
    steps: int
    graphs: int


# =========================================================================== the vmap network
_BATCHNORM = (nn.modules.batchnorm._BatchNorm, nn.SyncBatchNorm)
_OTHER_DROPOUT = (nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout, nn.FeatureAlphaDropout)


class _SeededDropoutModule:
    """A buffer-free ``model`` as a template for ``functional_call`` (a copy on the ``meta``
    device, eval mode) whose ``nn.Dropout`` layers multiply by
    :func:`~fedlib.engines.augment.seeded_dropout_mask` for the (key, step) of the current
    call — layer ids 0, 1, ... in ``modules()`` order, as the grouped path numbers them —
    and do nothing in a call without one. The vmap path and :func:`reference_run` share it,
    so both draw exactly the grouped path's masks. BatchNorm, buffers and other dropout
    variants are refused."""

    def __init__(self, model: nn.Module):
        buffers = [n for n, _ in model.named_buffers()]
        if buffers:
            raise ValueError(f"model has buffers {buffers[:3]} (e.g. BatchNorm running statistics): the stacked "
                             "engines refuse them, since averaging/normalising running statistics as if they were "
                             "gradient progress is wrong; use GroupNorm or LayerNorm")
        for name, mod in model.named_modules():
            if isinstance(mod, _BATCHNORM):
                raise ValueError(f"layer {name!r} is {a_type(mod)}: BatchNorm is not supported by the stacked "
                                 "engines (batch statistics would mix in padded samples; running statistics must not "
                                 "be averaged as gradient progress)")
            if isinstance(mod, _OTHER_DROPOUT):
                raise ValueError(f"layer {name!r} is {a_type(mod)}: only nn.Dropout is supported (the engine "
                                 "replaces it by seeded per-client masks)")
        backward = [h for h in registered_hooks(model) if h[2].startswith("backward")]
        if backward:
            name, kind_of_module, kind, hook = backward[0]
            raise ValueError(f"{_hook_owner(name, kind_of_module)} has a {kind} "
                             f"({hook}): the vmap path differentiates with torch.func, which does not take backward "
                             "hooks (forward hooks do run); remove the hook, or train in your own loop with "
                             "fedlib.optim.ClientOptimizer")
        first_name: dict = {}
        for name, t in model.named_parameters(remove_duplicate=False):
            first = first_name.setdefault(id(t), name)
            if first != name:
                raise ValueError(f"parameter {name!r} is tied to {first!r} (one tensor, two names): the stacked "
                                 "engines give every name its own per-client copy, which would untie them; untie "
                                 "the weights or train the model with fedlib.optim.ClientOptimizer")
        self.template = copy.deepcopy(model).to("meta").eval()
        self._ctx = None
        drop = [m for m in self.template.modules() if type(m) is nn.Dropout]
        for i, mod in enumerate(drop):
            mod.register_forward_hook(self._hook(i, float(mod.p)))
        self.num_dropout = len(drop)

    def _hook(self, layer: int, p: float):
        def hook(module, inputs, output):
            if self._ctx is None or p == 0.0:
                return None
            key, step = self._ctx
            return output * seeded_dropout_mask(key, step, layer, output.shape, p, output.dtype)

        return hook

    def __call__(self, params, x, key=None, step=None):
        """Logits of the module with ``params`` (a name -> tensor mapping) on ``x``; dropout
        masks of (``key``, ``step``) when ``key`` is given."""
        self._ctx = None if key is None else (key, step)
        try:
            return torch.func.functional_call(self.template, params, (x,))
        finally:
            self._ctx = None


class _VmapNetwork:
    """M copies of any buffer-free module through ``torch.func`` over stacked parameters.

    The module is run through :class:`_SeededDropoutModule` (a ``meta``-device template for
    ``functional_call`` whose ``nn.Dropout`` layers apply :func:`seeded_dropout_mask` with
    the current model's key: masks per client, seeded, identical to the grouped path's).
    Other dropout variants and BatchNorm are refused.
    """

    def __init__(self, model: nn.Module, num_models: int, *, device, dtype):
        from torch.func import grad_and_value, vmap

        module = _SeededDropoutModule(model)
        self.device = torch.device(device)
        self.dtype = dtype
        self.names = [n for n, _ in model.named_parameters()]
        self.shapes = {n: tuple(p.shape) for n, p in model.named_parameters()}
        self.params = {n: torch.zeros((num_models,) + s, device=self.device, dtype=dtype) for n, s in self.shapes.items()}
        self.num_dropout = module.num_dropout

        def mean_loss(logits, y, mask):
            ce = F.cross_entropy(logits.float() if logits.dtype == torch.bfloat16 else logits, y, reduction="none")
            return (ce * mask).sum() / mask.sum()

        def loss_one(params, x, y, mask, key, step):
            return mean_loss(module(params, x, key, step), y, mask)

        def loss_one_nodrop(params, x, y, mask):
            return mean_loss(module(params, x), y, mask)

        self._grad = vmap(grad_and_value(loss_one), in_dims=(0, 0, 0, 0, 0, None))
        self._grad_nodrop = vmap(grad_and_value(loss_one_nodrop), in_dims=(0, 0, 0, 0))
        self._logits = vmap(lambda p, x: module(p, x), in_dims=(0, None))

    def prefix(self, a: int):
        return {n: t[:a] for n, t in self.params.items()}

    def loss_and_grads(self, a, x, y, mask, keys, step):
        """x ``(a, B, C, H, W)``, y/mask ``(a, B)`` -> (grads dict, per-model loss (a,))."""
        if keys is None:
            return self._grad_nodrop(self.prefix(a), x, y, mask)
        return self._grad(self.prefix(a), x, y, mask, keys[:a], step)

    def logits(self, a, x):
        """Shared input ``(N, C, H, W)`` -> ``(a, N, K)``."""
        return self._logits(self.prefix(a), x)


def _on_model(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``x`` on the device and in the dtype of the model's parameters (the CPU and float32 without any)."""
    ref = next(iter(model.parameters()), None)
    return x.to(ref.device, ref.dtype) if ref is not None else x.to(torch.device("cpu"), torch.float32)


@contextlib.contextmanager
def _probing(model: nn.Module, device: torch.device):
    """Around a probe forward of ``model`` (:func:`_check_training_mode`, :func:`_num_classes`): its random draws
    are made inside ``torch.random.fork_rng`` (on ``device`` too when it is a GPU), so torch's global random state
    is left as it was, and every module's training flag is restored afterwards, even after an exception."""
    cuda = [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" else []
    modes = {m: m.training for m in model.modules()}
    try:
        with torch.random.fork_rng(devices=cuda):
            yield
    finally:
        for m, mode in modes.items():
            m.training = mode


def _check_training_mode(model: nn.Module, x: torch.Tensor) -> int:
    """Refuse a model whose output on ``x`` in training mode (its ``nn.Dropout`` layers off) is not its
    eval-mode output: the vmap path runs the model in eval mode, replacing only ``nn.Dropout`` by seeded
    masks, so any other training-only behaviour (``F.dropout(x, p, self.training)``, added noise, a
    branch on ``self.training``) would silently not happen. :class:`StackedEngine` (``path="vmap"``,
    hence also :class:`fedlib.experiments.custom.TensorEngine`) calls it on the first training inputs,
    at construction (a subclass that brings its own data through
    :meth:`~fedlib.engines.stacked.StackedEngine.train_batch`: on its first batch, in the first round);
    the grouped path needs no check (it takes only layers of fixed types, whose training mode differs
    only in ``nn.Dropout``). The random draws of such a model in the probe are made inside
    ``torch.random.fork_rng`` without seeding it: they decide only the check, and torch's global random
    state is left as it was. The modules' training flags are restored. The outputs are compared up to
    rounding (64 machine epsilons of their scale), so a difference below that goes unnoticed. Returns ``K``,
    the width of the logits ``(b, K)`` (any other output shape is refused: the engine's loss takes ``(B, K)``)."""
    sample = _on_model(model, x)
    try:
        # with gradients on, as the engine trains: under no_grad an eval-mode nn.MultiheadAttention /
        # nn.TransformerEncoderLayer takes torch's fused inference path, which rounds differently
        with torch.enable_grad(), _probing(model, sample.device):
            model.train()
            for m in model.modules():
                if type(m) is nn.Dropout:
                    m.eval()
            trained = model(sample)
            model.eval()
            evaluated = model(sample)
    except Exception as exc:
        raise ValueError(f"model could not be applied to {sample.shape[0]} training inputs of shape "
                         f"{tuple(sample.shape[1:])} ({type(exc).__name__}: {exc})") from None
    if not isinstance(trained, torch.Tensor) or not isinstance(evaluated, torch.Tensor):
        got = type(trained if not isinstance(trained, torch.Tensor) else evaluated).__name__
        raise ValueError(f"model must map a batch (B, *feature_shape) to logits (B, K), a tensor; got a {got}")
    if evaluated.ndim != 2 or evaluated.shape[0] != sample.shape[0]:  # else torch's message in the first round
        raise ValueError(f"model must map a batch (B, *feature_shape) to logits (B, K), got {tuple(evaluated.shape)} "
                         f"for B = {sample.shape[0]}")
    trained, evaluated = trained.detach(), evaluated.detach()
    same = trained.shape == evaluated.shape and trained.dtype == evaluated.dtype
    if same and trained.is_floating_point() and trained.numel():
        # equal up to rounding (a GPU may pick other kernels for the second call): 64 eps of the output's
        # scale, 8e-6 in float32; a training-only dropout or noise changes the logits by far more
        scale = max(1.0, float(evaluated.abs().nan_to_num(0.0, 0.0, 0.0).max()))
        tol = 64 * torch.finfo(trained.dtype).eps * scale
        same = bool(torch.allclose(trained, evaluated, rtol=0.0, atol=tol, equal_nan=True))
    elif same:
        same = bool(torch.equal(trained, evaluated))
    if not same:
        raise ValueError("model computes something else in training mode than in eval mode, besides its nn.Dropout "
                         "layers (e.g. F.dropout(x, p, self.training), added noise or a branch on self.training): the "
                         "stacked engine runs the model in eval mode with only nn.Dropout layers replaced by seeded "
                         "per-client masks, so that behaviour would silently be off; use nn.Dropout modules, or train "
                         "in your own loop with fedlib.optim.ClientOptimizer")
    return int(evaluated.shape[1])


# =========================================================================== the engine
def _resolve_dtype(model: nn.Module, dtype: Optional[torch.dtype]) -> torch.dtype:
    """The dtype the engines train ``model`` in: ``dtype`` (float32 or float64) when given, the
    model's parameters are then cast to it; ``None``: the dtype of the model's parameters (float32
    for a model without any), refused unless it is one float32 or float64 for all of them."""
    if dtype is not None:
        if not any(dtype is d for d in (torch.float32, torch.float64)):
            raise ValueError(f"dtype must be torch.float32 or torch.float64 (or None: the model's), got {dtype!r}")
        return dtype
    found = sorted({str(p.dtype) for p in model.parameters()})
    if not found:
        return torch.float32
    own = next(iter(model.parameters())).dtype
    if len(found) > 1 or own not in (torch.float32, torch.float64):
        raise ValueError(f"dtype: the model's parameters are {', '.join(found)}; the engine trains in float32 or "
                         "float64, give dtype=torch.float32 or dtype=torch.float64 (the parameters are cast to it; "
                         "bfloat16 compute: dtype=torch.float32 with precision='bf16')")
    return own


def _refuse_non_integer_labels(y: torch.Tensor, name: str) -> None:
    """Class labels must be integers (a float label would be truncated by the cast, a bool read as 0/1)."""
    if y.is_floating_point() or y.is_complex() or y.dtype == torch.bool:
        raise ValueError(f"{name} must hold integer class labels, got {y.dtype}")


def _check_int_labels(y: torch.Tensor, name: str) -> None:
    """Labels must be non-negative integers (a float label would be truncated by the cast)."""
    _refuse_non_integer_labels(y, name)
    if y.numel() and int(y.min()) < 0:
        raise ValueError(f"{name} holds a negative label ({int(y.min())})")


def _check_labels(y: torch.Tensor, num_classes: int, what: str, mask: Optional[torch.Tensor] = None) -> None:
    """Labels must be integers in ``0..num_classes-1``: a label the logits cannot index failed only in the first
    round, as torch's "Target 11 is out of bounds" (a device-side assert on CUDA), naming neither ``what`` nor K.
    With the batch's ``mask``, a padding entry (mask 0) may also hold -100, ``F.cross_entropy``'s ``ignore_index``
    (its loss and gradient are 0; another out-of-range label fails inside torch all the same)."""
    _refuse_non_integer_labels(y, what)
    if mask is not None:
        y = y[(mask != 0) | (y != -100)]
    if y.numel() and (int(y.min()) < 0 or int(y.max()) >= num_classes):
        raise ValueError(f"{what}: labels must lie in 0..{num_classes - 1} (the model has {num_classes} logits), "
                         f"got {int(y.min())}..{int(y.max())}")


def _num_classes(model: nn.Module, x: torch.Tensor, what: str) -> int:
    """K of the model's logits ``(B, K)``: one forward of ``model`` on the first sample of ``x`` (named ``what``
    in the error), in the dtype and on the device of its parameters, in eval mode (one sample: BatchNorm in
    training mode would refuse it) under ``torch.no_grad()``; random draws of the model are made inside
    ``torch.random.fork_rng``, so torch's global random state is left as it was, and every module's training
    flag is restored. Its forward hooks run (once)."""
    sample = _on_model(model, x[:1])
    try:
        with torch.no_grad(), _probing(model, sample.device):
            model.eval()
            out = model(sample)
    except Exception as exc:
        raise ValueError(f"model could not be applied to one sample of {what}, shape {tuple(sample.shape)} "
                         f"({type(exc).__name__}: {exc})") from None
    if not isinstance(out, torch.Tensor) or out.ndim != 2 or out.shape[0] != 1:
        raise ValueError(f"model must map a batch (B, *feature_shape) to logits (B, K), got "
                         f"{tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__} for B = 1")
    return int(out.shape[1])


def _as_torch(x) -> torch.Tensor:
    """A tensor from a tensor, a numpy array or a nested list (no copy where none is needed)."""
    return x if torch.is_tensor(x) else torch.as_tensor(_torch_readable(np.asarray(x)))


def _torch_readable(x):
    """``x``, copied when it is a numpy array with a negative stride (a reversed view such as ``x[::-1]``, which
    ``torch.as_tensor`` refuses with "At least one stride in the given numpy array is negative")."""
    return np.ascontiguousarray(x) if isinstance(x, np.ndarray) and any(s < 0 for s in x.strides) else x


def _length(value) -> Optional[int]:
    """``len(value)``, or ``None`` for a value without one (a number, a 0-d array or tensor)."""
    try:
        return len(value)
    except TypeError:
        return None


def _mean_std(mean, std, channels: int, dtype: torch.dtype, device) -> tuple:
    """``mean`` and ``std`` as tensors, checked once (not per batch): one finite number per channel each, ``std`` > 0
    (a short one was broadcast, or failed as a torch size mismatch in the first batch; a 0 or NaN ``std`` made the
    images inf or NaN)."""
    if any(_length(v) != channels for v in (mean, std)):  # len(0.5) was Python's TypeError
        raise ValueError(f"mean/std must have {channels} entries (one per channel), got mean={mean!r}, std={std!r}")
    values = []
    for name, v in (("mean", mean), ("std", std)):
        try:
            arr = np.asarray(v.detach().cpu() if isinstance(v, torch.Tensor) else v, dtype=np.float64)
        except (TypeError, ValueError):
            arr = None
        if arr is None or arr.ndim != 1 or not np.isfinite(arr).all() or (name == "std" and not (arr > 0).all()):
            what = "finite numbers > 0" if name == "std" else "finite numbers"
            raise ValueError(f"{name} must be {channels} {what} (one per channel), got {v!r}")
        values.append(torch.tensor(arr, device=device, dtype=dtype))
    return tuple(values)


def _client_indices(where: str, clients, num_train: int) -> List[np.ndarray]:
    """A run's ``clients`` (one array of sample indices per client) as int64 index arrays, each checked: integers
    (a float array would be truncated, a bool mask read as 0/1), one array per client (a number in its place: a
    flat index array would be read as one client per sample), non-empty and inside ``0..num_train-1``; a
    ``ValueError`` naming ``where.clients[i]`` otherwise. :class:`StackedEngine` and :func:`reference_run` take the
    same clients."""
    if isinstance(clients, Mapping):  # iterating it gave its keys, refused as 'the number 0' (or 'a')
        raise ValueError(f"{where}.clients must be a list with one array of sample indices per client, got "
                         f"{a_type(clients)} (iterating it gives its keys); pass [clients[k] for k in "
                         "sorted(clients)]")
    cl = [np.asarray(c) for c in clients]
    for i, c in enumerate(cl):
        if c.ndim == 0:
            what = "the number" if c.dtype.kind in "biufc" else "the single value"
            raise ValueError(f"{where}.clients[{i}] must be an array of sample indices (one array per client), got "
                             f"{what} {c.item()!r}; one client holding these samples: clients=[indices]")
        if c.size and c.dtype.kind not in "iu":
            raise ValueError(f"{where}.clients[{i}] must hold integer sample indices, got dtype {c.dtype}")
    cl = [c.astype(np.int64).ravel() for c in cl]
    if not cl:
        raise ValueError(f"{where}.clients must list at least one client")
    for i, c in enumerate(cl):
        if c.size == 0:
            raise ValueError(f"{where}.clients[{i}] is empty (every client needs data)")
        if c.min() < 0 or c.max() >= num_train:
            raise ValueError(f"{where}.clients[{i}] has indices outside 0..{num_train - 1}")
    return cl


def _check_image_data(data) -> None:
    """``data`` must have ``train_images`` and ``train_labels`` attributes (a ``ValueError`` naming ``data`` and
    what it lacks, where the first read would fail as an ``AttributeError``; a dict of them is no such object)."""
    missing = [name for name in ("train_images", "train_labels") if not hasattr(data, name)]
    if missing:  # else Python's AttributeError "'dict' object has no attribute 'train_images'"
        hint = "; a dict of them: types.SimpleNamespace(**data)" if isinstance(data, Mapping) else ""
        raise ValueError(f"data must be an object with the attributes train_images (uint8 (N, H, W, C)) and "
                         f"train_labels (N,), e.g. fedlib.data.cifar10.load_cifar10(...); got {type(data).__name__} "
                         f"without {' and '.join(missing)}{hint}")


def _train_images(data) -> torch.Tensor:
    """``data.train_images`` as a uint8 ``(N, H, W, C)`` tensor, or ``ValueError`` (also when ``data`` has no
    ``train_images`` or ``train_labels`` attribute: :func:`_check_image_data`)."""
    _check_image_data(data)
    images = _as_torch(data.train_images)
    if images.dtype != torch.uint8 or images.ndim != 4:
        raise ValueError(f"data.train_images must be uint8 (N, H, W, C), got {images.dtype} {tuple(images.shape)}")
    return images


def _grouped_num_classes(net: GroupedNetwork, images: torch.Tensor) -> int:
    """K of the grouped network's logits ``(1, 1, K)`` on one normalised image ``(1, H, W, C)`` (on the network's
    device, in its dtype): one forward of its first model under ``torch.no_grad()``, without dropout (no random
    draws); the network calls no module, so no hook runs and nothing else changes."""
    try:
        with torch.no_grad():
            logits = net.forward(net.prefix(1), net.image_input(images.unsqueeze(3)), 1)
    except Exception as exc:
        shape = (images.shape[3], images.shape[1], images.shape[2])
        raise ValueError(f"model could not be applied to 1 training input of shape {shape} "
                         f"({type(exc).__name__}: {exc})") from None
    return int(logits.shape[-1])


def _non_finite(source: torch.Tensor, dtype: torch.dtype) -> str:
    """What is wrong with ``source`` whose cast to ``dtype`` holds NaN or inf (the error path only): a finite
    ``source`` overflowed the cast (float64's 1e39 is inf in float32), which the message says."""
    if source.dtype != dtype and bool(torch.isfinite(source).all()):
        return f"overflows {dtype}: finite as {source.dtype}, inf once cast"
    return "holds NaN or inf"


def _as_param_dict(obj, names, shapes, device, dtype, what) -> Dict[str, torch.Tensor]:
    if isinstance(obj, nn.Module):
        obj = dict(obj.named_parameters())
    if not isinstance(obj, Mapping):
        raise ValueError(f"{what} must be None, an nn.Module or a mapping name -> tensor, got {type(obj).__name__}")
    if sorted(obj) != sorted(names):
        raise ValueError(f"{what}: parameter names differ from the model's: {sorted(set(obj) ^ set(names))[:5]}")
    out = {}
    for n in names:
        t = torch.as_tensor(_torch_readable(obj[n]))
        if tuple(t.shape) != shapes[n]:
            raise ValueError(f"{what}: parameter {n!r} has shape {tuple(t.shape)}, the model's is {shapes[n]}")
        out[n] = t.detach().to(device=device, dtype=dtype).clone()
        if not bool(torch.isfinite(out[n]).all()):  # was caught by algorithm.init, without the run or parameter
            raise ValueError(f"{what}: parameter {n!r} {_non_finite(t, dtype)} (the initial model must be finite)")
    return out


class _RunInfo(NamedTuple):
    clients: List[np.ndarray]
    sizes: np.ndarray
    p: np.ndarray


class _Plan(NamedTuple):
    rows: list            # (run, client, tau) per row, sorted by tau descending
    taus: np.ndarray
    segments: list        # (a, n_steps)
    participations: list  # per run
    lrs: list             # per run
    solvers: list         # per run
    a_norms: np.ndarray   # per row


class StackedEngine:
    r"""Train R federated runs × their clients as one stacked network on one device.

    Parameters
    ----------
    model : ``nn.Module`` (the architecture; its parameters are the default initial model).
        ``path="grouped"`` needs an ``nn.Sequential`` of standard layers; ``"vmap"`` any
        module without buffers. Only ``nn.Dropout`` randomness is supported (seeded): on the vmap path a
        model that computes anything else in training mode than in eval mode (``F.dropout(x, p,
        self.training)``, noise, a branch on ``self.training``) is refused when the engine is built.
        Forward hooks and pre-hooks of the model and its submodules run on the vmap path (those registered
        before the engine is built: it calls a copy of the model); the grouped path never calls the modules,
        so it refuses a model with any hook (:func:`fedlib.engines.grouped.registered_hooks`, hooks registered
        for all modules included), and both paths refuse backward hooks and gradient hooks on parameter tensors
        (``Tensor.register_hook``: they differentiate copies of the parameters). A hook registered for all modules
        after the engine is built is refused when the next round starts where it would not run
        (:func:`fedlib.engines.grouped.refuse_global_hooks_added_later`).
    data : object with ``train_images`` ``(N, H, W, C)`` uint8, ``train_labels`` ``(N,)``,
        and optionally ``test_images`` / ``test_labels`` (e.g.
        :func:`fedlib.data.cifar10.load_cifar10`); numpy or torch. Moved to ``device`` once. The labels are
        integers in ``0..K-1``, ``K`` the width of the model's logits ``(B, K)`` (any other output shape is
        refused), else a ``ValueError`` naming ``data.train_labels`` / ``data.test_labels`` and ``K``. ``K`` is read
        at construction, leaving every random state as it was: on the vmap path from the eval-mode output of the
        training-mode check (see ``model``; its forwards on the first 8 training images, no extra one), on the
        grouped path from one forward of the grouped network on one image, without dropout (it calls no
        module, so no hook runs). A subclass that feeds its own inputs (:meth:`train_batch` without
        ``_training_mode_sample``) has the labels of its first batch checked against ``K`` when the first round
        starts (a ``ValueError`` naming its ``train_batch``); the labels of its later batches are its own to check
        (a check of every step would stop the device each step).
    runs : list of :class:`RunSpec` (R >= 1); a run's ``lr_at`` must be ``None`` or callable and its ``schedule``
        have ``local_steps`` (``ValueError`` naming ``runs[r]`` otherwise).
    rounds : total number of rounds (sets the default step-decay lr schedule).
    path : ``"grouped"`` or ``"vmap"``.
    device : ``"cpu"``, ``"cuda"``, ``"cuda:1"``...
    dtype : parameter/solver dtype, ``torch.float32`` or ``torch.float64`` (exactness tests); the
        model's parameters are cast to it. ``None`` (default): the dtype of the model's parameters
        (float32 for :func:`fedlib.models.vgg11`); a model in another dtype (float16, bfloat16, or
        parameters of mixed dtypes) is then refused, naming them.
    precision : ``"fp32"`` or ``"bf16"`` (autocast with float32 master parameters; meant
        for GPUs, also runs on a CPU).
    cuda_graph : capture local steps in CUDA graphs (CUDA only; see module docstring).
    graph_min_steps : shortest prefix segment worth capturing (shorter ones run eagerly).
    augment : random crop (``padding``) + horizontal flip of training images.
    padding : zero pixels added on each side of a training image before the random crop (an integer
        :math:`\ge 0`, default 4; the crop's offsets lie in ``0..2*padding``).
    dropout : apply the model's ``nn.Dropout`` layers (seeded per client) in training.
    batch_size : :math:`B` (32 in the paper).
    mean, std : normalisation (CIFAR-10's by default): one finite entry per channel each, ``std``'s > 0 (``ValueError``
        otherwise, also for a number); applied in ``dtype``, ``(x / 255 - mean) / std``: a float64 run normalises with
        the float64 numbers, not with float32-rounded ones.
    channels_last : grouped path memory format. ``cuda_graph``, ``augment``, ``dropout`` and ``channels_last`` are
        ``True`` or ``False`` (a ``ValueError`` naming one otherwise).
    conv : grouped path convolutions, ``"cudnn"`` (grouped ``F.conv2d``) or ``"gemm"``
        (im2col + batched matrix products, :mod:`fedlib.engines.im2col`); see
        :class:`~fedlib.engines.grouped.GroupedNetwork`.
    eval_batch_size : test images per evaluation batch (per stacked run).

    Example
    -------
    Two clients holding 4 and 8 of 12 tiny 4x4 images (:math:`p = (1/3, 2/3)`), :math:`\tau = (1, 2)` steps of
    :math:`B = 4`, a float64 convolution + linear layer. Two rounds of the stack land where the plain per-client
    loop lands (:func:`reference_run`, the check chapter 5 runs on VGG-11), and the default learning rate
    follows :func:`fedlib.schedules.step_decay_lr` over ``rounds = 2`` (divided by 10 from round 1):

    >>> import numpy as np, torch
    >>> from types import SimpleNamespace
    >>> from torch import nn
    >>> from fedlib.algorithms import make_algorithm
    >>> from fedlib.schedules import FixedSteps
    >>> from fedlib.solvers import sgd
    >>> images = np.random.default_rng(0).integers(0, 256, (12, 4, 4, 3), dtype=np.uint8)
    >>> data = SimpleNamespace(train_images=images, train_labels=np.arange(12) % 2)
    >>> _ = torch.manual_seed(0)
    >>> model = nn.Sequential(nn.Conv2d(3, 2, 3), nn.Flatten(), nn.Linear(8, 2)).double()
    >>> run = RunSpec(make_algorithm("fednova", sgd(0.1)), [np.arange(4), np.arange(4, 12)], FixedSteps([1, 2]))
    >>> engine = StackedEngine(model, data, [run], rounds=2, batch_size=4, augment=False, dropout=False)
    >>> [round(records[0].lr, 12) for records in engine.train()]
    [0.1, 0.01]
    >>> loop = reference_run(model, data, run, rounds=2, batch_size=4, augment=False, dropout=False)
    >>> max_relative_difference(engine.params(0), loop.state.params) < 1e-12
    True
    """

    #: how the label errors name the training labels (TensorEngine takes them as ``labels``)
    _train_labels_name = "data.train_labels"

    def __init__(self, model: nn.Module, data: Any, runs: Sequence[RunSpec], *, rounds: int, path: str = "grouped",
                 device="cpu", dtype: Optional[torch.dtype] = None, precision: str = "fp32", cuda_graph: bool = False,
                 graph_min_steps: int = 2, augment: bool = True, padding: int = 4, dropout: bool = True,
                 batch_size: int = 32, mean: Sequence[float] = CIFAR10_MEAN, std: Sequence[float] = CIFAR10_STD,
                 channels_last: bool = True, conv: str = "cudnn", eval_batch_size: int = 1000):
        check_choice("path", path, PATHS)
        check_choice("precision", precision, PRECISIONS)
        self.rounds = check_int("rounds", rounds, minimum=1)
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        self.padding = check_int("padding", padding)
        self.graph_min_steps = check_int("graph_min_steps", graph_min_steps, minimum=1)
        self.eval_batch_size = check_int("eval_batch_size", eval_batch_size, minimum=1)
        # "no" is truthy: augment="no" would have cropped and flipped, dropout=0.5 applied the dropout layers
        cuda_graph, augment, dropout = (check_flag("cuda_graph", cuda_graph), check_flag("augment", augment),
                                        check_flag("dropout", dropout))
        channels_last = check_flag("channels_last", channels_last)
        try:
            dev = torch.device(device)
        except (RuntimeError, TypeError) as exc:
            raise ValueError(f"device: not a torch device: {device!r} ({exc})") from None
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device={device!r} but CUDA is not available on this machine (torch {torch.__version__}, "
                             f"built with CUDA {torch.version.cuda}); use device='cpu'")
        if dev.type == "cuda" and dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
        if cuda_graph and dev.type != "cuda":
            raise ValueError(f"cuda_graph=True needs a CUDA device, got device={str(dev)!r}; use cuda_graph=False")
        if not isinstance(model, nn.Module):
            raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        dtype = _resolve_dtype(model, dtype)
        if precision == "bf16" and dtype != torch.float32:
            raise ValueError("precision='bf16' keeps float32 master parameters: use dtype=torch.float32")
        if isinstance(runs, RunSpec):  # list() of it raised "'RunSpec' object is not iterable"
            raise ValueError("runs must be a non-empty list of RunSpec, got one RunSpec (a list of one: [run])")
        try:
            runs = list(runs)
        except TypeError:
            raise ValueError(f"runs must be a non-empty list of RunSpec, got {type(runs).__name__}") from None
        if not runs or not all(isinstance(r, RunSpec) for r in runs):
            raise ValueError("runs must be a non-empty list of RunSpec")
        for r, run in enumerate(runs):  # else Python's "'float' object is not callable" from the first round's plan
            if not isinstance(run.name, str):  # it labels the records, the checkpoint's runs and error messages
                raise ValueError(f"runs[{r}].name must be a str (the run's label; '' leaves it empty), got {run.name!r}")
            if run.lr_at is not None:
                check_callable(f"runs[{r}].lr_at", run.lr_at, "round -> client lr",
                               " (a constant rate: lr_at=lambda t: lr; None: the step decay of the solver's lr)",
                               nargs=1)
            if not callable(getattr(run.schedule, "local_steps", None)):
                raise ValueError(f"runs[{r}].schedule must have a local_steps(round) method (see fedlib.schedules), "
                                 f"got {type(run.schedule).__name__}")
        names = [r.name for r in runs]
        twice = sorted({n for n in names if n and names.count(n) > 1}, key=str)
        if twice:  # records, checkpoints (run_names) and per-name results tell the runs apart by name
            raise ValueError(f"runs: the name(s) {twice} are given to more than one run (run names must be unique, "
                             "or left empty: they label the records, the checkpoint's runs and results keyed by name)")
        self.device, self.dtype, self.path, self.precision = dev, dtype, path, precision
        self.cuda_graph, self.augment, self.dropout = cuda_graph, augment, dropout
        self.runs = runs

        # ------------------------------------------------------------- data
        tr_x = _train_images(data)
        tr_y = _as_torch(data.train_labels)
        if tr_y.ndim != 1 or tr_y.shape[0] != tr_x.shape[0]:
            raise ValueError(f"data.train_labels must hold one label per image, got shape {tuple(tr_y.shape)}")
        _check_int_labels(tr_y, self._train_labels_name)
        self.num_train = int(tr_x.shape[0])
        self.image_size = (int(tr_x.shape[1]), int(tr_x.shape[2]))
        self.channels = int(tr_x.shape[3])
        self._mean, self._std = _mean_std(mean, std, self.channels, dtype, dev)
        self._train = pad_images(tr_x.to(dev), self.padding)
        self._train_labels = tr_y.to(device=dev, dtype=torch.int64)
        te_x = getattr(data, "test_images", None)
        te_y = getattr(data, "test_labels", None)
        if te_x is not None and te_y is not None:
            te_y = _as_torch(te_y)
            if te_y.ndim != 1 or te_y.shape[0] != _as_torch(te_x).shape[0]:
                raise ValueError(f"data.test_labels must hold one label per test image, got shape {tuple(te_y.shape)}")
            _check_int_labels(te_y, "data.test_labels")
            self._test = _as_torch(te_x).to(dev)
            self._test_labels = te_y.to(dev, torch.int64)
            if self._test.dtype != torch.uint8 or tuple(self._test.shape[1:]) != tuple(tr_x.shape[1:]):
                raise ValueError("data.test_images must be uint8 with the training images' (H, W, C)")
        else:
            self._test = self._test_labels = None

        # ------------------------------------------------------------- runs
        self._info: List[_RunInfo] = []
        for r, run in enumerate(runs):
            if not isinstance(run.algorithm, FederatedAlgorithm):
                raise ValueError(f"runs[{r}].algorithm must be a FederatedAlgorithm")
            check_builtin_step(f"runs[{r}].algorithm.solver", [run.algorithm.solver],
                               "the stacked engine's fused step does not take: run it through "
                               "fedlib.engines.reference.run_sequential (or your own loop with ClientOptimizer)")
            cl = _client_indices(f"runs[{r}]", run.clients, self.num_train)
            sizes = np.array([c.size for c in cl], dtype=np.int64)
            check_int(f"runs[{r}].seed", run.seed)
            check_sampling(run.sampling, run.clients_per_round, where=f"runs[{r}].")
            self._info.append(_RunInfo(cl, sizes, sizes / sizes.sum()))
        self.max_models = sum(len(i.clients) for i in self._info)

        # ------------------------------------------------------------- network + stacked state
        frozen = [n for n, prm in model.named_parameters() if not prm.requires_grad]
        if frozen:
            raise ValueError(f"model has parameters with requires_grad=False {frozen[:3]}: the stacked engines train "
                             "every parameter, so a frozen layer would silently change; make the frozen part a "
                             "constant of the model (e.g. precompute its features) or unfreeze it")
        # a hook on a parameter tensor (a gradient mask or clip) was silently skipped: the engines differentiate
        # stacked copies of the parameters, so the engine and reference_run trained as if it were not there
        hooked = [n for n, prm in model.named_parameters()
                  if prm._backward_hooks or getattr(prm, "_post_accumulate_grad_hooks", None)]
        if hooked:
            raise ValueError(f"model has parameters with gradient hooks {hooked[:3]} (Tensor.register_hook or "
                             "register_post_accumulate_grad_hook): the stacked engines differentiate copies of the "
                             "parameters, so such a hook would silently not run; remove it (handle.remove()), or "
                             "train in your own loop with fedlib.optim.ClientOptimizer, where backward() runs it")
        M = self.max_models
        self._mode_check_model: Optional[nn.Module] = None  # set when the training-mode check waits for run_round
        # a subclass that feeds its own inputs (train_batch) has only placeholders in data.train_images
        own_data = (type(self).train_batch is not StackedEngine.train_batch
                    and type(self)._training_mode_sample is StackedEngine._training_mode_sample)
        self._own_labels_unchecked = own_data  # its labels against K on its first batch, in run_round
        num_classes: Optional[int] = None  # K, the width of the logits; unknown here for a subclass's own inputs
        if path == "grouped":
            self.net = GroupedNetwork(model, M, device=dev, dtype=dtype, channels_last=channels_last, conv=conv)
            if self.net.in_channels != self.channels:
                raise ValueError(f"model expects {self.net.in_channels} input channels, images have {self.channels}")
            if not own_data:  # the grouped network never calls the modules (hooks are refused): no side effects
                num_classes = _grouped_num_classes(self.net, normalize(tr_x[:1].to(dev), self._mean, self._std, dtype))
        else:
            if conv != "cudnn":
                raise ValueError(f"conv={conv!r} is a setting of path='grouped' (the vmap path convolves with "
                                 "torch.func.vmap)")
            self.net = _VmapNetwork(model, M, device=dev, dtype=dtype)
            if own_data:  # a subclass's own inputs (train_batch) are not the images: checked on its first batch
                self._mode_check_model = model
            else:  # after BatchNorm is refused by name; K from the logits of the check's eval-mode forward
                num_classes = _check_training_mode(model, self._training_mode_sample(tr_x[:8]))
        if num_classes is not None:  # else "Target 11 is out of bounds" in the first round (a device-side assert on CUDA)
            _check_labels(tr_y, num_classes, self._train_labels_name)
            if self._test_labels is not None:
                _check_labels(te_y, num_classes, "data.test_labels")
        self._num_classes = num_classes
        self.names = list(self.net.names)
        shapes = dict(self.net.shapes)
        default = {n: p for n, p in model.named_parameters()}
        self.states: List[ServerState] = []
        for r, run in enumerate(runs):
            init = default if run.params is None else run.params
            params = _as_param_dict(init, self.names, shapes, dev, dtype,
                                    "model" if run.params is None else f"runs[{r}].params")
            self.states.append(run.algorithm.init(params, len(self._info[r].clients)))
        solvers = [run.algorithm.solver for run in runs]
        self._any_momentum = any(s.momentum > 0 for s in solvers)
        self._any_prox = any(s.mu > 0 for s in solvers)
        self._any_wd = any(s.weight_decay > 0 for s in solvers)
        self._any_vr = any(run.algorithm.variance is not None for run in runs)
        self.x = self.net.params  # name -> (M, ...) stacked parameters (views for grouped conv weights)

        def like(t):
            return torch.zeros_like(t)  # keeps the (channels-last) strides

        self.u = {n: like(t) for n, t in self.x.items()} if self._any_momentum else None
        self.x0 = {n: like(t) for n, t in self.x.items()} if self._any_prox else None
        self.c = {n: like(t) for n, t in self.x.items()} if self._any_vr else None
        self._coef = torch.zeros((3, M), device=dev, dtype=dtype)  # wd, rho, mu per row
        self._keys = torch.zeros(M, device=dev, dtype=torch.int64)
        self._loss_sum = torch.zeros(M, device=dev, dtype=torch.float64 if dtype == torch.float64 else torch.float32)
        self._k = torch.zeros(1, device=dev, dtype=torch.int64)
        self._tau_cap = 0
        self._graphs: Dict[int, Any] = {}
        self._graph_pool = None
        self._stream = None
        self.round_index = 0
        self.last_timing: Optional[RoundTiming] = None
        self.history: List[List[RoundRecord]] = []
        for r, (run, info) in enumerate(zip(self.runs, self._info)):
            check_schedule_size(run.schedule, len(info.clients), f"runs[{r}].clients", name=f"runs[{r}].schedule")
            check_epoch_schedule(run.schedule, info.sizes, self.batch_size, name=f"runs[{r}].schedule")
        self._plan(0)  # participation and schedule settings that cannot work fail here, not after the data moved

    # ------------------------------------------------------------------ accessors
    @property
    def num_runs(self) -> int:
        return len(self.runs)

    def params(self, run: int = 0) -> Dict[str, torch.Tensor]:
        """Current global model of ``run`` (name -> tensor), loadable with ``model.load_state_dict``."""
        return self.states[run].params

    def p(self, run: int = 0) -> np.ndarray:
        """Client weights :math:`p_i = n_i/n` of ``run``."""
        return self._info[run].p.copy()

    def _run_rows(self, plan: "_Plan", r: int):
        """Index tensor of run ``r``'s rows in the stack (``None`` when it has no participant)."""
        rows_r = [j for j, row in enumerate(plan.rows) if row[0] == r]
        return torch.tensor(rows_r, device=self.device, dtype=torch.int64) if rows_r else None

    def _global_rows(self, plan: "_Plan"):
        """``(run, its rows, parameter name, the run's global tensor expanded to those rows)``
        for every run with participants and every parameter."""
        for r in range(self.num_runs):
            rt = self._run_rows(plan, r)
            if rt is None:
                continue
            g = self.states[r].params
            for n in self.names:
                yield r, rt, n, g[n].unsqueeze(0).expand((rt.numel(),) + tuple(g[n].shape))

    # ------------------------------------------------------------------ host planning
    def _plan(self, t: int) -> _Plan:
        rows, parts, lrs, solvers = [], [], [], []
        for r, (run, info) in enumerate(zip(self.runs, self._info)):
            lr = (round_lr(f"runs[{r}].lr_at", run.lr_at, t, 0.0) if run.lr_at is not None
                  else step_decay_lr(run.algorithm.solver.lr, t, self.rounds))
            solver = run.algorithm.solver.with_lr(lr)
            try:
                part = round_participation(run.sampling, info.p, run.clients_per_round, run.seed, t)
            except ValueError as exc:
                raise ValueError(f"runs[{r}]: {exc}") from None
            try:  # whole numbers >= 0 (integer-valued floats too), >= 1 for the participants: the reference loop's
                steps = round_local_steps(run.schedule, t, len(info.clients), f"runs[{r}].clients")  # rule (a client out of the round
                check_participant_steps(steps, part.clients, t)  # may do no work), so reference_run runs it too
            except ValueError as exc:
                raise ValueError(f"runs[{r}].{exc}") from None
            for i in part.clients:
                rows.append((r, int(i), int(steps[i])))
            parts.append(part)
            lrs.append(lr)
            solvers.append(solver)
        rows.sort(key=lambda x: (-x[2], x[0], x[1]))
        taus = np.array([row[2] for row in rows], dtype=np.int64)
        # a_norm per row from each run's online counter
        cache: Dict[int, np.ndarray] = {}
        a_norms = np.empty(len(rows))
        for j, (r, _, tau) in enumerate(rows):
            if r not in cache:
                cache[r] = online_a_norms(solvers[r], int(max(tt for rr, _, tt in rows if rr == r)))
            a_norms[j] = cache[r][tau - 1]
        segments = []
        for k in range(int(taus[0])):
            a = int(np.sum(taus > k))
            if segments and segments[-1][0] == a:
                segments[-1][1] += 1
            else:
                segments.append([a, 1])
        return _Plan(rows, taus, [tuple(s) for s in segments], parts, lrs, solvers, a_norms)

    def _ensure_tables(self, tau_max: int) -> None:
        if tau_max <= self._tau_cap:
            return
        # capacity: the schedules' bound when every run has one (graphs are then never
        # recaptured), else 1.5x growth (each growth drops the captured graphs)
        bounds = [max_local_steps(run.schedule) for run in self.runs]
        cap = max(tau_max, int(math.ceil(1.5 * self._tau_cap)))
        if all(b is not None for b in bounds):
            cap = max(tau_max, max(bounds))
        M, B, dev = self.max_models, self.batch_size, self.device
        self._idx = torch.zeros((cap, B, M), device=dev, dtype=torch.int64)
        self._dy = torch.full((cap, B, M), self.padding, device=dev, dtype=torch.int64)
        self._dx = torch.full((cap, B, M), self.padding, device=dev, dtype=torch.int64)
        self._flip = torch.zeros((cap, B, M), device=dev, dtype=torch.int64)
        self._mask = torch.zeros((cap, B, M), device=dev, dtype=self.dtype)
        self._lr = torch.zeros((cap, M), device=dev, dtype=self.dtype)
        self._tau_cap = cap
        self._graphs.clear()  # they read the old tables

    def _load(self, plan: _Plan, t: int) -> None:
        Mt = len(plan.rows)
        tau_max = int(plan.taus[0])
        B = self.batch_size
        self._ensure_tables(tau_max)
        idx = np.zeros((tau_max, B, Mt), dtype=np.int64)
        mask = np.zeros((tau_max, B, Mt))
        lr = np.zeros((tau_max, Mt))
        coef = np.zeros((3, Mt))
        keys = np.zeros(Mt, dtype=np.int64)
        dy = dx = flip = None
        if self.augment:
            dy = torch.full((tau_max, B, Mt), self.padding, dtype=torch.int64)
            dx = dy.clone()
            flip = torch.zeros((tau_max, B, Mt), dtype=torch.int64)
        for j, (r, i, tau) in enumerate(plan.rows):
            run, info, solver = self.runs[r], self._info[r], plan.solvers[r]
            pos, counts = client_batch_plan(run.seed, t, i, int(info.sizes[i]), tau, B)
            idx[:tau, :, j] = info.clients[i][pos]
            mask[:tau, :, j] = np.arange(B)[None, :] < counts[:, None]
            if solver.lr_schedule is None:
                lr[:tau, j] = solver.lr
            else:
                lr[:tau, j] = [solver.step_size(k) for k in range(tau)]
            coef[:, j] = (solver.weight_decay, solver.momentum, solver.mu)
            keys[j] = dropout_key(run.seed, t, i)
            if self.augment:
                a_dy, a_dx, a_fl = client_augment_params(run.seed, t, i, tau, B, self.padding)
                dy[:tau, :, j], dx[:tau, :, j], flip[:tau, :, j] = a_dy, a_dx, a_fl
        with torch.no_grad():
            self._idx[:tau_max, :, :Mt].copy_(torch.from_numpy(idx))
            self._mask[:tau_max, :, :Mt].copy_(torch.from_numpy(mask))
            self._lr[:tau_max, :Mt].copy_(torch.from_numpy(lr))
            if self.augment:
                self._dy[:tau_max, :, :Mt].copy_(dy)
                self._dx[:tau_max, :, :Mt].copy_(dx)
                self._flip[:tau_max, :, :Mt].copy_(flip)
            self._coef[:, :Mt].copy_(torch.from_numpy(coef))
            self._keys[:Mt].copy_(torch.from_numpy(keys))
            self._loss_sum.zero_()
            self._k.zero_()
            # rows <- their run's global model (and anchor); VR corrections; momentum 0
            for _, rt, n, src in self._global_rows(plan):
                self.x[n].index_put_((rt,), src)
                if self.x0 is not None:
                    self.x0[n].index_put_((rt,), src)
            if self.c is not None:
                for r in range(self.num_runs):
                    rt = self._run_rows(plan, r)
                    if rt is None:
                        continue
                    var = self.states[r].variates
                    if var is None:
                        for n in self.names:
                            self.c[n].index_fill_(0, rt, 0.0)
                        continue
                    cl = torch.tensor([plan.rows[j][1] for j in rt.tolist()], device=self.device, dtype=torch.int64)
                    for n in self.names:
                        self.c[n].index_put_((rt,), var.mean[n].unsqueeze(0) - var.client[n].index_select(0, cl))
            if self.u is not None:
                for n in self.names:
                    self.u[n].zero_()

    # ------------------------------------------------------------------ one local step
    def _autocast(self):
        if self.precision == "bf16":
            return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16, cache_enabled=False)
        return torch.autocast(device_type=self.device.type, enabled=False)

    # ------------------------------------------------------------------ inputs (override points)
    def _at_step(self, table: torch.Tensor, a: int) -> torch.Tensor:
        """Row ``k`` (the device step counter) of a step table, first ``a`` models:
        ``(cap, B, M) -> (B, a)`` or ``(cap, M) -> (a,)``, with no host sync."""
        return table.index_select(0, self._k).squeeze(0)[..., :a]

    def step_indices(self, a: int):
        """Training-set indices ``(B, a)`` (int64) and sample mask ``(a, B)`` (1 = real
        sample, 0 = padding of a last partial batch) of the current local step for the
        first ``a`` models. Read from the device step counter, so it can be captured in a
        CUDA graph; for subclasses that bring their own data (:meth:`train_batch`)."""
        return self._at_step(self._idx, a), self._at_step(self._mask, a).t()

    def _training_mode_sample(self, images: torch.Tensor) -> torch.Tensor:
        """Inputs in the plain model's layout for the training-mode check: the first training
        ``images`` (uint8 ``(b, H, W, C)``), normalised, NCHW."""
        return normalize(images.to(self.device), self._mean, self._std, self.dtype).permute(0, 3, 1, 2)

    def train_batch(self, a: int):
        """Inputs of the current local step for the first ``a`` models: ``(x, y, mask)``.

        ``x`` in the network's layout — grouped path ``(B, a*C, H, W)`` (channels-last),
        vmap path ``(a, B, *input_shape)`` —, labels ``y`` and ``mask`` ``(a, B)``. The
        default gathers the uint8 images on the device with this step's crop offsets and
        flips and normalises them. Override it (with :meth:`test_batches`) to feed other
        data, as :class:`fedlib.experiments.custom.TensorEngine` does; it must read only
        device state (:meth:`step_indices`) to work inside CUDA graphs. Labels are class
        indices ``0..K-1``; where ``mask`` is 0 (padding) a label may also be -100, the
        ignore index of ``F.cross_entropy`` (the first batch's labels are checked so).
        """
        idx, mask = self.step_indices(a)
        imgs = crop_flip_gather(self._train, idx, self._at_step(self._dy, a), self._at_step(self._dx, a),
                                self._at_step(self._flip, a), self.image_size, batch_last=True)  # (B, H, W, a, C)
        x = normalize(imgs, self._mean, self._std, self.dtype)
        y = self._train_labels[idx].t()   # (a, B)
        if self.path == "grouped":
            return self.net.image_input(x), y, mask
        return x.permute(3, 0, 4, 1, 2), y, mask  # (a, B, C, H, W)

    def test_batches(self):
        """Yield the test set as ``(x, y)`` chunks of at most ``eval_batch_size`` samples,
        ``x`` in the plain model's input layout ``(b, *input_shape)`` (NCHW images,
        normalised) and ``y`` int64 labels; nothing without test data. Override point,
        with :meth:`train_batch`."""
        if self._test is None:
            return
        for s in range(0, self._test.shape[0], self.eval_batch_size):
            imgs = self._test[s:s + self.eval_batch_size]
            xb = normalize(imgs, self._mean, self._std, self.dtype)  # (b, H, W, C)
            yield xb.permute(0, 3, 1, 2), self._test_labels[s:s + self.eval_batch_size]

    def _step(self, a: int) -> None:
        x, y, mask = self.train_batch(a)
        keys = self._keys if self.dropout and self.net.num_dropout else None
        step = self._k.squeeze(0)
        if self.path == "grouped":
            leaves = {n: t[:a].detach().requires_grad_() for n, t in self.x.items()}
            with self._autocast():
                logits = self.net.forward(leaves, x, a, keys, step)
                bsz = logits.shape[1]
                ce = F.cross_entropy(logits.reshape(a * bsz, -1).float() if logits.dtype == torch.bfloat16
                                     else logits.reshape(a * bsz, -1), y.reshape(-1), reduction="none")
            per = (ce.view(a, bsz).to(mask.dtype) * mask).sum(1) / mask.sum(1)
            grads = torch.autograd.grad(per.sum(), [leaves[n] for n in self.names])
            grads = dict(zip(self.names, grads))
        else:
            with self._autocast():
                grads, per = self.net.loss_and_grads(a, x, y, mask, keys, step)
        with torch.no_grad():
            self._update(a, grads)
            self._loss_sum[:a] += per.detach().to(self._loss_sum.dtype)
            self._k += 1

    def _update(self, a: int, grads: Dict[str, torch.Tensor]) -> None:
        r"""LocalSolver's step on the first ``a`` rows, in place, per-model coefficients.

        Works in place on the (fresh) gradient buffers; with momentum and weight decay a
        leaf costs three fused element-wise passes (``g += wd x``; ``u = g + rho u``;
        ``x += -lr_k u``) and no temporaries. Same arithmetic as
        :meth:`~fedlib.solvers.LocalSolver.update`: :math:`\tilde g = g + \lambda x + c`,
        :math:`u = \rho u + \tilde g`, :math:`x - \eta_k(u + \mu(x - x_0))`.
        """
        neg_lr = -self._at_step(self._lr, a)
        wd, rho, mu = self._coef[0, :a], self._coef[1, :a], self._coef[2, :a]
        # autograd may hand two parameters of a generic module one gradient tensor (the grouped
        # network computes each parameter's gradient into its own buffer)
        shared = _overlapping(grads) if self.path != "grouped" else ()
        for n in self.names:
            x = self.x[n][:a]
            shape = (a,) + (1,) * (x.ndim - 1)
            g = grads[n]
            if g.dtype != x.dtype:
                g = g.to(x.dtype)
            elif n in shared or any(st == 0 and sz > 1 for st, sz in zip(g.stride(), g.shape)):
                g = g.clone()  # an expanded or shared gradient cannot be updated in place
            if self._any_wd:
                g.addcmul_(x, wd.view(shape))                        # g + wd * x
            if self.c is not None:
                g.add_(self.c[n][:a])                                # + VR correction
            if self.u is not None:
                u = self.u[n][:a]
                torch.addcmul(g, u, rho.view(shape), out=u)          # u <- rho u + g
                d = u
            else:
                d = g
            if self.x0 is not None:                                  # prox outside the buffer
                diff = x - self.x0[n][:a]
                d = d.addcmul_(diff, mu.view(shape)) if d is g else torch.addcmul(d, diff, mu.view(shape))
            x.addcmul_(d, neg_lr.view(shape))                        # x <- x - lr_k d

    # ------------------------------------------------------------------ CUDA graphs
    def _run_segment_graph(self, a: int, n: int) -> None:
        if a not in self._graphs and n < self.graph_min_steps:
            for _ in range(n):
                self._step(a)
            return
        if self._stream is None:
            self._stream = torch.cuda.Stream(device=self.device)
            self._graph_pool = torch.cuda.graph_pool_handle()
        if a not in self._graphs:
            s = self._stream
            s.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(s):
                self._step(a)  # a real step, doubling as the warm-up before capture
            torch.cuda.current_stream(self.device).wait_stream(s)
            n -= 1
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self._graph_pool, stream=s):
                self._step(a)
            self._graphs[a] = g
        g = self._graphs[a]
        for _ in range(n):
            g.replay()

    # ------------------------------------------------------------------ a round
    def run_round(self) -> List[RoundRecord]:
        """Train one round of every run; return one :class:`RoundRecord` per run."""
        t = self.round_index
        if t >= self.rounds:
            raise ValueError(f"all {self.rounds} rounds are done")
        refuse_global_hooks_added_later(self.path)
        sync = torch.cuda.synchronize if self.device.type == "cuda" else (lambda *a: None)
        t0 = time.perf_counter()
        plan = self._plan(t)
        self._load(plan, t)
        if self._own_labels_unchecked and plan.segments:  # a subclass's own data: its first batch
            a0 = plan.segments[0][0]
            x0, y0, mask0 = self.train_batch(a0)
            if self._mode_check_model is not None:  # vmap: K from the training-mode check's eval-mode logits
                num_classes = _check_training_mode(self._mode_check_model, x0[0, :8])
            else:  # grouped: one forward of the first a0 models without dropout (no random draws, no hooks)
                with torch.no_grad():
                    num_classes = int(self.net.forward(self.net.prefix(a0), x0, a0).shape[-1])
            # else a label the logits cannot index failed in the first step as "index 3 is out of bounds for
            # dimension 2 with size 3" (a device-side assert on CUDA)
            _check_labels(y0, num_classes, f"{type(self).__name__}.train_batch's labels y (its first batch)", mask0)
            self._mode_check_model = None  # passed (a refused model or batch stays refused on the next call)
            self._own_labels_unchecked = False
        for a, n in plan.segments:
            if self.cuda_graph:
                self._run_segment_graph(a, n)
            else:
                for _ in range(n):
                    self._step(a)
        Mt = len(plan.rows)
        loss_sum = self._loss_sum[:Mt].double().cpu().numpy()  # the round's one host sync
        sync()
        t1 = time.perf_counter()
        client_loss = loss_sum / plan.taus
        bad = ~np.isfinite(client_loss)
        if bad.any():
            r = plan.rows[int(np.flatnonzero(bad)[0])][0]
            clients = [plan.rows[j][1] for j in np.flatnonzero(bad) if plan.rows[j][0] == r]
            raise FloatingPointError(f"round {t}, run {r}{' (' + self.runs[r].name + ')' if self.runs[r].name else ''}: "
                                     f"training loss is not finite for client(s) {clients} (diverged; try a smaller lr)")
        records_partial = []
        with torch.no_grad():
            # stacked params -> Delta_i in place
            for _, rt, n, src in self._global_rows(plan):
                self.x[n].index_put_((rt,), -src, accumulate=True)
            for r, run in enumerate(self.runs):
                part = plan.participations[r]
                where = {plan.rows[j][1]: j for j in range(Mt) if plan.rows[j][0] == r}
                updates = []
                for i in part.clients:
                    j = where[int(i)]
                    updates.append(ClientUpdate(int(i), {n: self.x[n][j] for n in self.names}, float(plan.a_norms[j]),
                                                int(plan.taus[j])))
                try:
                    state, diag = run.algorithm.apply(self.states[r], part, updates, plan.lrs[r], self._info[r].p)
                except FloatingPointError as exc:
                    raise FloatingPointError(f"run {r}{' (' + run.name + ')' if run.name else ''}: {exc}") from exc
                self.states[r] = state
                cl = np.array([client_loss[where[int(i)]] for i in part.clients])
                w = part.weights / part.weights.sum()
                records_partial.append((r, run.name, t, plan.lrs[r], float(np.dot(w, cl)), cl, diag))
        sync()
        t2 = time.perf_counter()
        acc, tloss = self.evaluate()
        t3 = time.perf_counter()
        records = [RoundRecord(r, nm, tt, lr, float(acc[r]), float(tloss[r]), trl, cl, diag)
                   for (r, nm, tt, lr, trl, cl, diag) in records_partial]
        self.last_timing = RoundTiming(t1 - t0, t2 - t1, t3 - t2, self._real_images(plan), int(plan.taus[0]),
                                       len(self._graphs))
        self.round_index += 1
        self.history.append(records)
        return records

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        """What the next round depends on: the round index, every run's
        :class:`~fedlib.algorithms.ServerState` (global model, server optimizer state,
        control variates; tensors copied to the CPU) and the records so far. All other
        buffers (local momentum, anchors, VR corrections, batch tables) are rebuilt at the
        start of each round, and every random draw comes from (seed, round, client) streams."""
        from ..checkpoint import to_numpy_tree

        def cpu(x):
            return x.detach().cpu().clone() if torch.is_tensor(x) else x

        return {"round": int(self.round_index), "num_runs": self.num_runs, "rounds": int(self.rounds),
                "run_names": [r.name for r in self.runs], "run_specs": self._run_specs(),
                "states": [tree_map(cpu, s) for s in self.states],
                "history": to_numpy_tree([list(h) for h in self.history])}

    def _run_specs(self) -> list:
        """What tells the runs apart besides their names (which may be empty): each run's algorithm, local solver,
        server optimizer, seed and client sizes, as :meth:`state_dict` stores them for :meth:`load_state_dict`."""
        return [{"algorithm": run.algorithm.name, "solver": run.algorithm.solver.name,
                 "server": run.algorithm.server.name, "seed": int(run.seed),
                 "client_sizes": [int(n) for n in info.sizes]} for run, info in zip(self.runs, self._info)]

    def load_state_dict(self, state: Mapping) -> None:
        """Restore :meth:`state_dict` (tensors moved to this engine's device and dtype). The runs must
        be the same, in the same order (their names, and each run's algorithm, local solver, server optimizer,
        seed and client sizes: ``ValueError`` naming the run otherwise), and so must the number of rounds (it sets
        the learning-rate schedule of the remaining rounds).

        ``state`` is a mapping as :meth:`state_dict` returns it."""
        if int(state.get("num_runs", -1)) != self.num_runs:
            raise ValueError(f"state: {state.get('num_runs')} runs in the checkpoint, the engine has {self.num_runs}")
        names = [r.name for r in self.runs]
        if "run_names" in state and list(state["run_names"]) != names:
            raise ValueError(f"state: the checkpoint's runs are {list(state['run_names'])}, the engine's {names} "
                             "(the same runs in the same order, or each state lands on another run)")
        if "rounds" in state and int(state["rounds"]) != self.rounds:
            raise ValueError(f"state: the checkpoint is of a {int(state['rounds'])}-round run, the engine runs "
                             f"{self.rounds} rounds (its learning-rate schedule would differ)")
        rnd = int(state["round"])
        if not 0 <= rnd <= self.rounds:
            raise ValueError(f"state: round {rnd} outside 0..{self.rounds}")

        def to_device(obj):
            if isinstance(obj, np.ndarray):
                obj = torch.from_numpy(np.array(obj, copy=True))
            if torch.is_tensor(obj):
                return obj.to(device=self.device, dtype=self.dtype if obj.is_floating_point() else obj.dtype).clone()
            return obj

        for r, (run, s) in enumerate(zip(self.runs, state["states"])):
            has, wants = getattr(s, "variates", None) is not None, run.algorithm.variance is not None
            if has != wants:
                raise ValueError(f"state: run {r} ({run.name}) "
                                 + ("has control variates in the checkpoint but its algorithm keeps none" if has else
                                    "keeps control variates but the checkpoint has none (another algorithm's state)"))
            why = server_state_mismatch(run.algorithm, s)
            if why is not None:
                raise ValueError(f"state: run {r} ({run.name}): {why}")
        if "run_specs" in state:  # unnamed runs in another order passed the names' check: each state on another run
            for r, (saved, own) in enumerate(zip(state["run_specs"], self._run_specs())):
                if dict(saved) != own:
                    diff = sorted(k for k in set(saved) | set(own) if saved.get(k) != own.get(k))
                    values = ", ".join(f"{k} {saved.get(k)!r} vs {own.get(k)!r}" for k in diff)
                    raise ValueError(f"state: run {r} of the checkpoint is not the engine's run {r} (they differ in "
                                     f"{', '.join(diff)}: {values}); give the engine the same runs in the same order")
        self.states = [tree_map(to_device, s) for s in state["states"]]
        self.round_index = rnd
        self.history = [list(h) for h in state.get("history", [])]

    def _real_images(self, plan: _Plan) -> int:
        total = 0
        for r, i, tau in plan.rows:
            n, b = int(self._info[r].sizes[i]), self.batch_size
            spe = -(-n // b)
            full, rest = divmod(tau, spe)
            total += full * n + min(rest * b, n)
        return total

    def train(self, rounds: Optional[int] = None, callback: Optional[Callable[[List[RoundRecord]], Any]] = None):
        """Run ``rounds`` more rounds (default: all remaining); ``callback(records)`` after each.
        Returns the list of per-round record lists. A ``callback`` that is not callable, or ``rounds`` more than the
        rounds left, is a ``ValueError`` before any round runs."""
        left = self.rounds - self.round_index
        n = left if rounds is None else check_int("rounds", rounds)
        if n > left:  # else the rounds left trained, then 'all N rounds are done' and their records lost
            raise ValueError(f"rounds={n}: only {left} of the engine's {self.rounds} rounds are left (rounds, the total, "
                             "is set when the engine is built: it sets the default learning-rate decay)")
        if callback is not None:  # else a TypeError after a round has trained
            check_callable("callback", callback, "records -> None", nargs=1)
        out = []
        for _ in range(n):
            rec = self.run_round()
            out.append(rec)
            if callback is not None:
                callback(rec)
        return out

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def evaluate(self, params: Optional[Sequence[Mapping[str, torch.Tensor]]] = None):
        """Test accuracy and mean loss of each run's global model (or of ``params``, a list of
        R models) on the full test set, all runs in one batched forward. NaN without test data.

        Each model of ``params`` is a mapping name -> tensor (or an ``nn.Module``) with the model's parameter names
        and shapes; a ``ValueError`` naming ``params[r]`` otherwise (and for an empty list, or one model not in a
        list)."""
        refuse_global_hooks_added_later(self.path)  # also when called on its own: the grouped path would skip it
        models = [s.params for s in self.states] if params is None else self._eval_models(params)
        R = len(models)
        if R > self.max_models:
            raise ValueError(f"can evaluate at most {self.max_models} models at once")
        batches = iter(self.test_batches())
        first = next(batches, None)
        if first is None:  # no test data: nothing to copy or run
            return np.full(R, np.nan), np.full(R, np.nan)
        for r, g in enumerate(models):
            for n in self.names:
                self.x[n][r].copy_(g[n])
        correct = torch.zeros(R, device=self.device, dtype=torch.int64)
        loss = torch.zeros(R, device=self.device, dtype=torch.float64)
        count = 0
        for xb, y in itertools.chain([first], batches):
            with self._autocast():
                if self.path == "grouped":  # (b, C, H, W) -> grouped (b, R*C, H, W), channels-last
                    b, c, h, w = xb.shape
                    xg = xb.permute(0, 2, 3, 1).unsqueeze(3).expand(b, h, w, R, c).contiguous()
                    logits = self.net.forward(self.net.prefix(R), self.net.image_input(xg), R)
                else:
                    logits = self.net.logits(R, xb)
            logits = logits.float() if logits.dtype == torch.bfloat16 else logits
            correct += (logits.argmax(-1) == y.unsqueeze(0)).sum(1)
            yy = y.unsqueeze(0).expand(R, -1)
            loss += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), yy.reshape(-1),
                                    reduction="none").view(R, -1).sum(1).double()
            count += int(y.shape[0])
        # divide on the host: CUDA divides a tensor by a number through its reciprocal (1 ulp off,
        # 0.07500000000000001 for 3/40), the host division is exact and the same on every device
        return correct.cpu().numpy() / count, loss.cpu().numpy() / count

    def _eval_models(self, params) -> list:
        """:meth:`evaluate`'s ``params`` checked: a non-empty list of models (mappings name -> tensor, or modules),
        each with the model's parameter names and shapes (``copy_`` broadcast a wrong shape into the stack, so a
        ``(1, ...)`` weight was evaluated as a wrong model without a word; a missing name was a bare ``KeyError``)."""
        if isinstance(params, (Mapping, nn.Module)):  # list() of one model gave its parameter names
            raise ValueError(f"params must be a list of models (one mapping name -> tensor each), got {a_type(params)}; "
                             "one model: [params]")
        try:
            models = list(params)
        except TypeError:
            raise ValueError(f"params must be a list of models, got {a_type(params)}") from None
        if not models:
            raise ValueError("params must list at least one model (None: every run's global model)")
        out = []
        for r, m in enumerate(models):
            if isinstance(m, nn.Module):
                m = dict(m.named_parameters())
            if not isinstance(m, Mapping):
                raise ValueError(f"params[{r}] must be a mapping name -> tensor or an nn.Module, got {a_type(m)}")
            if sorted(m) != sorted(self.names):
                raise ValueError(f"params[{r}]: parameter names differ from the model's: "
                                 f"{sorted(set(m) ^ set(self.names))[:5]}")
            tensors = {n: torch.as_tensor(_torch_readable(m[n])) for n in self.names}
            for n, t in tensors.items():
                if tuple(t.shape) != tuple(self.net.shapes[n]):
                    raise ValueError(f"params[{r}]: parameter {n!r} has shape {tuple(t.shape)}, the model's is "
                                     f"{tuple(self.net.shapes[n])}")
            out.append(tensors)
        return out


def _overlapping(grads: Mapping[str, torch.Tensor]) -> set:
    """Names of the gradients whose memory overlaps another's. Autograd may return one tensor (or
    overlapping views) as the gradient of two parameters, e.g. of ``w`` and ``dw`` in
    ``x @ (w + dw).T``; updating one in place (weight decay, a prox or VR term) would then change
    the other before it is read. Disjoint views of one buffer do not overlap."""
    by_storage: dict = {}  # storage -> (first byte, end byte, name) of the gradients in it
    for name, g in grads.items():
        if g.numel() == 0:
            continue
        size = g.element_size()
        start = g.storage_offset() * size
        extent = (1 + sum((n - 1) * abs(st) for n, st in zip(g.shape, g.stride()))) * size
        by_storage.setdefault(g.untyped_storage().data_ptr(), []).append((start, start + extent, name))
    out: set = set()
    for group in by_storage.values():  # usually one gradient per storage: nothing to compare
        group.sort()
        for i, (start1, _, n1) in enumerate(group):
            for _, end0, n0 in group[:i]:
                if start1 < end0:
                    out.update((n0, n1))
    return out


def train_stacked(model: nn.Module, data: Any, runs: Sequence[RunSpec], rounds: int, *,
                  callback: Optional[Callable] = None, **options) -> StackedEngine:
    r"""Build a :class:`StackedEngine`, train all ``rounds`` and return it (``engine.history``
    holds the records, ``engine.states`` the final server states). Keyword arguments go to
    :class:`StackedEngine`.

    ``model`` and ``data`` are :class:`StackedEngine`'s, ``runs`` its sequence of :class:`RunSpec` and ``rounds`` the
    number of rounds; ``callback``, if given, is called after every round with its records, one :class:`RoundRecord`
    per run (:meth:`StackedEngine.train`).

    Example
    -------
    The vmap path on :class:`StackedEngine`'s example ends where the grouped path does:

    >>> import numpy as np, torch
    >>> from types import SimpleNamespace
    >>> from torch import nn
    >>> from fedlib.algorithms import make_algorithm
    >>> from fedlib.schedules import FixedSteps
    >>> from fedlib.solvers import sgd
    >>> images = np.random.default_rng(0).integers(0, 256, (12, 4, 4, 3), dtype=np.uint8)
    >>> data = SimpleNamespace(train_images=images, train_labels=np.arange(12) % 2)
    >>> _ = torch.manual_seed(0)
    >>> model = nn.Sequential(nn.Conv2d(3, 2, 3), nn.Flatten(), nn.Linear(8, 2)).double()
    >>> run = RunSpec(make_algorithm("fednova", sgd(0.1)), [np.arange(4), np.arange(4, 12)], FixedSteps([1, 2]))
    >>> options = dict(batch_size=4, augment=False, dropout=False)
    >>> vmap = train_stacked(model, data, [run], 2, path="vmap", **options)
    >>> grouped = train_stacked(model, data, [run], 2, path="grouped", **options)
    >>> len(vmap.history), max_relative_difference(vmap.params(0), grouped.params(0)) < 1e-12
    (2, True)
    """
    engine = StackedEngine(model, data, runs, rounds=rounds, **options)
    engine.train(callback=callback)
    return engine


def reference_run(model: nn.Module, data: Any, run: RunSpec, *, rounds: int, engine_rounds: Optional[int] = None,
                  batch_size: int = 32, augment: bool = True, padding: int = 4, dropout: bool = True,
                  mean: Sequence[float] = CIFAR10_MEAN, std: Sequence[float] = CIFAR10_STD,
                  dtype: torch.dtype = torch.float64) -> SequentialRun:
    r"""``run`` through the plain per-client loop, on exactly the data :class:`StackedEngine` feeds it.

    Client :math:`i`'s local step :math:`k` of round :math:`t` uses the engine's mini-batch
    (:func:`client_batch_plan`; the real samples of a last partial batch only), crop offsets
    and flips (:func:`client_augment_params`; the centre crop without ``augment``) and
    dropout masks (:func:`~fedlib.engines.augment.dropout_key`,
    :func:`~fedlib.engines.augment.seeded_dropout_mask`), and its gradient is
    ``torch.func.grad`` of the plain ``model``'s mean cross-entropy on them; the rounds are
    :func:`fedlib.engines.reference.run_sequential` — one client after another, one step
    after another, the solver, aggregation, variance reduction and server optimizer of
    ``run.algorithm``. So an engine built with the same ``data``, ``batch_size``,
    ``augment``, ``padding``, ``dropout``, ``mean``, ``std`` and ``dtype`` must end where
    this run ends, up to floating-point summation order (the tests ask 1e-10 in float64;
    chapter 5 checks it in the book).

    ``data`` holds ``train_labels`` and either ``train_images`` (uint8 ``(N, H, W, C)``, as
    for :class:`StackedEngine`) or ``train_features`` (float ``(N, ...)``, as for
    :class:`fedlib.experiments.custom.TensorEngine`: the batch is those rows, no
    augmentation). ``engine_rounds`` is the engine's ``rounds`` (it sets the default
    step-decay lr schedule when ``run.lr_at`` is None; default ``rounds``). Any module the engine takes works
    (``nn.Dropout`` layers get the engine's masks; other dropout variants are refused, as by
    the engine; ``run.clients`` are checked as the engine checks them; the labels must be integers in ``0..K-1``, ``K``
    the width of the model's logits ``(B, K)``, read from one forward of ``model`` on the first sample in eval mode
    under ``torch.no_grad()`` (its forward hooks run once more; torch's random state is left as it was); a
    ``ValueError`` naming ``data.train_labels`` and ``K`` otherwise, as from the engine; ``mean`` and ``std`` are checked as
    the engine checks them and applied in ``dtype``, as the engine applies them). Slow by design (one small
    forward/backward per step): a check, not a trainer.

    Returns
    -------
    :class:`fedlib.engines.reference.SequentialRun`, whose ``state.params`` maps each parameter name to a tensor in ``dtype``.

    Example
    -------
    Two clients holding 4 and 8 of 12 tiny 4x4 images (:math:`p = (1/3, 2/3)`), :math:`\tau = (1, 2)` steps of
    :math:`B = 4`, a float64 convolution + linear layer (:class:`StackedEngine`'s example compares the engine with it): the
    loop's one round reports :math:`\|a\|_1 = \tau` and :math:`\tau_{\text{eff}} = 5/3`:

    >>> import numpy as np, torch
    >>> from types import SimpleNamespace
    >>> from torch import nn
    >>> from fedlib.algorithms import make_algorithm
    >>> from fedlib.schedules import FixedSteps
    >>> from fedlib.solvers import sgd
    >>> images = np.random.default_rng(0).integers(0, 256, (12, 4, 4, 3), dtype=np.uint8)
    >>> data = SimpleNamespace(train_images=images, train_labels=np.arange(12) % 2)
    >>> _ = torch.manual_seed(0)
    >>> model = nn.Sequential(nn.Conv2d(3, 2, 3), nn.Flatten(), nn.Linear(8, 2)).double()
    >>> run = RunSpec(make_algorithm("fednova", sgd(0.1)), [np.arange(4), np.arange(4, 12)], FixedSteps([1, 2]))
    >>> loop = reference_run(model, data, run, rounds=1, batch_size=4, augment=False, dropout=False)
    >>> loop.diagnostics[0].a_norms, round(loop.diagnostics[0].tau_eff * 3, 12), sorted(loop.state.params)
    (array([1., 2.]), 5.0, ['0.bias', '0.weight', '2.bias', '2.weight'])
    """
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(run, RunSpec):
        raise ValueError(f"run must be a RunSpec, got {type(run).__name__}")
    rounds = check_int("rounds", rounds, minimum=1)
    engine_rounds = rounds if engine_rounds is None else check_int("engine_rounds", engine_rounds, minimum=rounds)
    b = check_int("batch_size", batch_size, minimum=1)
    padding = check_int("padding", padding)
    augment, dropout = check_flag("augment", augment), check_flag("dropout", dropout)  # as the engine checks them
    plain = _SeededDropoutModule(model)
    labels = _as_torch(data.train_labels)
    features = getattr(data, "train_features", None)
    if features is not None:
        features = torch.as_tensor(_torch_readable(features))
        if not features.is_floating_point() or features.ndim < 2 or features.shape[0] != labels.shape[0]:
            raise ValueError(f"data.train_features must be floats (N, ...) with one row per label, got "
                             f"{features.dtype} {tuple(features.shape)}")
        features = features.to(dtype)
        sample, where = features, "data.train_features"
    else:
        images = _train_images(data)
        if labels.ndim != 1 or labels.shape[0] != images.shape[0]:  # as the engine says it (else an index error later)
            raise ValueError(f"data.train_labels must hold one label per image, got shape {tuple(labels.shape)}")
        size = (int(images.shape[1]), int(images.shape[2]))
        padded = pad_images(images, padding)
        mean_t, std_t = _mean_std(mean, std, int(images.shape[3]), dtype, "cpu")  # as the engine checks them
        sample, where = normalize(images[:1], mean_t, std_t, dtype).permute(0, 3, 1, 2), "data.train_images"
    # refused as the engine refuses them: a label the logits cannot index failed in the first step ("Target 11 is
    # out of bounds"), a float label was cut to an integer
    _check_labels(labels, _num_classes(model, sample, where), "data.train_labels")
    labels = labels.to(torch.int64)
    # checked as the engine checks them: np.asarray(c, dtype=np.int64) cut float indices [0.5, 1.7] to [0, 1]
    clients = _client_indices("run", run.clients, int(labels.shape[0]))
    sizes = [len(c) for c in clients]
    check_schedule_size(run.schedule, len(clients), "run.clients", name="run.schedule")  # as the engine checks it
    check_epoch_schedule(run.schedule, sizes, b, name="run.schedule")
    init = dict(model.named_parameters()) if run.params is None else (
        dict(run.params.named_parameters()) if isinstance(run.params, nn.Module) else dict(run.params))
    params = {n: torch.as_tensor(_torch_readable(v)).detach().to(dtype).clone() for n, v in init.items()}

    def loss(prm, x, y, key, step):
        return F.cross_entropy(plain(prm, x, key, step) if dropout else plain(prm, x), y)

    grad = torch.func.grad(loss)
    plans: Dict[tuple, tuple] = {}

    def grad_fn(prm, client, t, k):
        if (t, client) not in plans:  # the whole round's plan of this client, as the engine draws it
            tau = int(np.asarray(run.schedule.local_steps(t))[client])
            pos, counts = client_batch_plan(run.seed, t, client, sizes[client], tau, b)
            aug = client_augment_params(run.seed, t, client, tau, b, padding) if augment and features is None else None
            plans[(t, client)] = (pos, counts, aug)
        pos, counts, aug = plans[(t, client)]
        c = int(counts[k])
        idx = torch.as_tensor(clients[client][pos[k, :c]])
        key = torch.tensor(dropout_key(run.seed, t, client), dtype=torch.int64)
        if features is not None:
            return grad(prm, features[idx], labels[idx], key, torch.tensor(k, dtype=torch.int64))
        if aug is None:
            centre = torch.full((c,), padding, dtype=torch.int64)
            dy, dx, fl = centre, centre, torch.zeros(c, dtype=torch.int64)
        else:
            dy, dx, fl = (v[k, :c] for v in aug)
        x = normalize(crop_flip_gather(padded, idx, dy, dx, fl, size), mean_t, std_t, dtype).permute(0, 3, 1, 2)
        return grad(prm, x, labels[idx], key, torch.tensor(k, dtype=torch.int64))

    lr_at = run.lr_at or (lambda t: step_decay_lr(run.algorithm.solver.lr, t, engine_rounds))
    p = np.array(sizes, dtype=float) / sum(sizes)
    return run_sequential(run.algorithm, params, grad_fn, p, run.schedule, rounds, sampling=run.sampling,
                          clients_per_round=run.clients_per_round, seed=run.seed, lr_at=lr_at)


def max_relative_difference(got: Mapping[str, torch.Tensor], want: Mapping[str, torch.Tensor]) -> float:
    r"""``max`` over the tensors of ``want`` of ``max |got - want| / max |want|`` (``got`` moved
    to ``want``'s device): how far an engine's model is from :func:`reference_run`'s (chapters 5
    and 6 report it; every name of ``want`` must be in ``got``).

    Example
    -------
    ``w`` is off by 0.1 where its largest entry is 2 (0.05); ``b`` is exact:

    >>> import torch
    >>> got = {"w": torch.tensor([1.0, 2.1], dtype=torch.float64), "b": torch.zeros(1, dtype=torch.float64)}
    >>> want = {"w": torch.tensor([1.0, 2.0], dtype=torch.float64), "b": torch.zeros(1, dtype=torch.float64)}
    >>> round(max_relative_difference(got, want), 12)
    0.05
    """
    # else a list was "list indices must be integers or slices, not str", a missing name a bare KeyError, a numpy
    # array "'numpy.ndarray' object has no attribute 'to'", an empty want "max() arg is an empty sequence"
    for what, value in (("got", got), ("want", want)):
        if not isinstance(value, Mapping):
            raise ValueError(f"{what} must be a mapping of parameter name -> torch.Tensor, got {type(value).__name__}")
    if not want:
        raise ValueError("want is empty: it must name at least one tensor")
    missing = [n for n in want if n not in got]
    if missing:
        raise ValueError(f"got lacks the tensor(s) {missing[:3]} of want (every name of want must be in got)")
    for n in want:
        for what, value in (("got", got[n]), ("want", want[n])):
            if not isinstance(value, torch.Tensor):
                raise ValueError(f"{what}[{n!r}] must be a torch.Tensor, got {type(value).__name__}")
        if got[n].shape != want[n].shape:  # else broadcast: a (1,) got was compared with every entry of want
            raise ValueError(f"got[{n!r}] has shape {tuple(got[n].shape)}, want[{n!r}] {tuple(want[n].shape)}")
    return max(float((got[n].to(want[n].device) - want[n]).abs().max() / want[n].abs().max().clamp_min(1e-300))
               for n in want)

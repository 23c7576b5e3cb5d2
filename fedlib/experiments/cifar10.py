r"""CIFAR-10 / VGG-11 (paper §6, Table 1): the cells, the paper's values, the runner, the benchmark.

Everything the ``run cifar10`` / ``table1`` / ``bench cifar10`` commands and the Table 1
chapter need, as library code:

* :data:`PAPER` — the official setup (the authors' code, github.com/JYWa/FedNova): 16 clients, Dir(0.1) partition with
  seed 2020, batch 32, 100 rounds, client lr ÷10 at 50 % and ÷100 at 75 % of the rounds,
  weight decay 1e-4, momentum 0.9.
* :data:`CELLS` — the Table 1 cells in the order they are run, each a :class:`Cell`
  (algorithm, local solver, E, lr, μ, server optimizer). Hyper-parameters from paper
  App. I: lr 0.02 with momentum (local *or* server momentum — our reading for the two
  server-momentum cells), 0.05 otherwise; μ = 0.005 for E = 2 and 0.001 for E ~ U(2, 5);
  local and server momentum 0.9. FedNova-prox uses ``tau_eff="local_steps"``.
* :data:`PAPER_VALUES`, :data:`RERUN_VALUES` — published numbers with their source tag
  (``confirmed`` / ``unconfirmed``); never produced by this code.
* :func:`train_runs` — several runs stacked in one :class:`~fedlib.engines.stacked.StackedEngine`,
  returning one history (list of per-round dicts) per run.
* :func:`run_table1` — the budgeted runner behind ``python -m fedlib table1``: one result
  file ``{cell_id}__seed{s}.json`` per (cell, seed), skipping present ones, never starting
  a run that its time estimate says cannot finish within the budget.
* :func:`bench_cifar10` — per-client eager loop vs the engine on the real round structure.
* :func:`table1_summary` — mean ± std over the seeds with results, for the chapter.
* Chapter 5's checks on the runs that exist: :func:`fednova_gaps` (FedNova's lead per
  pair), :func:`repeat_differences` (same-seed runs: the noise floor),
  :func:`check_recorded_diagnostics` (recorded :math:`\tau_{\text{eff}}`, :math:`\chi^2`
  against the closed forms), :func:`rounds_to_match` (App. I, Figure 7) and
  :func:`summary_lines`.
* ``run_table1(..., continue_later=S)`` lets a group span two device calls of one GPU
  session (pause with a checkpoint, resume in the next call).
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import hashlib
import json
import math
import os
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np

from .._validate import a_type, check_choice, check_count, check_flag, check_int, check_sequence

__all__ = ["PAPER", "Cell", "CELLS", "CELL_IDS", "PAPER_VALUES", "RERUN_VALUES", "EPOCH_SETTINGS", "load_data",
           "official_partition", "mean_epochs", "round_work", "trained_images", "train_runs", "history_record", "result_name", "plan_table1", "run_table1",
           "load_table1_results", "table1_summary", "bench_cifar10", "format_bench", "PROFILES", "MIN_MEASURED_ROUNDS",
           "cudnn_benchmark", "BENCH_VARIANTS", "parse_bench_variant", "parse_bench_variants"]

#: The official setup (the authors' code, github.com/JYWa/FedNova).
PAPER = dict(num_clients=16, partition_alpha=0.1, partition_seed=2020, batch_size=32, rounds=100,
             weight_decay=1e-4, momentum=0.9, server_momentum=0.9, lr_momentum=0.02, lr_sgd=0.05,
             mu={"2": 0.005, "2-5": 0.001}, num_train=50000, num_test=10000)

#: Column labels of the two epoch settings (E = 2 for all; E_i ~ U{2..5} per client and round, inclusive).
EPOCH_SETTINGS = {"2": "E=2", "2-5": "E~U(2,5)"}


@dataclasses.dataclass(frozen=True)
class Cell:
    r"""One Table 1 cell: ``row`` (solver row), ``epochs`` (``"2"`` / ``"2-5"``), ``method``
    (column: FedAvg / FedNova / ...), and the run's algorithm, local solver and server optimizer.

    ``id`` names the cell (``"sgd-e2-fedavg"``; its result files are ``<id>__seed<s>.json``); ``lr`` is the client
    learning rate before the step decay; ``mu`` the proximal :math:`\mu` (0 but for the proximal row);
    ``momentum`` the local heavy-ball factor (``None``: none); ``server_momentum`` the server's :math:`\beta`
    (``None`` with the plain server); ``tau_eff`` FedNova's policy (``None``: the default; ``"local_steps"`` for
    the proximal row)."""

    id: str
    row: str
    epochs: str
    method: str
    algorithm: str
    solver: str
    lr: float
    mu: float = 0.0
    momentum: Optional[float] = None
    server: str = "plain"
    server_momentum: Optional[float] = None
    tau_eff: Any = None

    def make_algorithm(self, weight_decay: float = PAPER["weight_decay"]):
        r"""The :class:`~fedlib.algorithms.FederatedAlgorithm` of this cell, its local solver with weight decay
        ``weight_decay`` (:math:`\lambda \ge 0`, default the paper's 1e-4)."""
        from ..algorithms import make_algorithm
        from ..server import make_server_optimizer
        from ..solvers import make_solver

        solver = make_solver(self.solver, self.lr, momentum=self.momentum, mu=self.mu,
                             weight_decay=weight_decay)
        server = make_server_optimizer(self.server, beta=self.server_momentum)
        return make_algorithm(self.algorithm, solver, server, self.tau_eff)

    def config(self) -> dict:
        return dataclasses.asdict(self)


def _cells() -> List[Cell]:
    m, lr_m, lr_s = PAPER["momentum"], PAPER["lr_momentum"], PAPER["lr_sgd"]
    beta = PAPER["server_momentum"]
    out = []
    for ep in ("2", "2-5"):
        tag = "e2" if ep == "2" else "u25"
        out += [Cell(f"sgd-{tag}-fedavg", "SGD", ep, "FedAvg", "fedavg", "sgd", lr_s),
                Cell(f"sgd-{tag}-fednova", "SGD", ep, "FedNova", "fednova", "sgd", lr_s)]
        out += [Cell(f"momentum-{tag}-fedavg", "momentum", ep, "FedAvg", "fedavg", "momentum", lr_m, momentum=m),
                Cell(f"momentum-{tag}-fednova", "momentum", ep, "FedNova", "fednova", "momentum", lr_m, momentum=m)]
    order = ["sgd-e2", "momentum-e2", "sgd-u25", "momentum-u25"]
    out.sort(key=lambda c: order.index(c.id.rsplit("-", 1)[0]))
    for ep in ("2", "2-5"):
        tag = "e2" if ep == "2" else "u25"
        mu = PAPER["mu"][ep]
        out += [Cell(f"prox-{tag}-fedprox", "proximal", ep, "FedProx", "fedprox", "prox", lr_s, mu=mu),
                Cell(f"prox-{tag}-fednova", "proximal", ep, "FedNova", "fednova", "prox", lr_s, mu=mu,
                     tau_eff="local_steps")]
    out += [Cell("vr-u25-scaffold", "VR", "2-5", "SCAFFOLD", "scaffold", "sgd", lr_s),
            Cell("vr-u25-fednova", "VR", "2-5", "FedNova", "fednova-vr", "sgd", lr_s),
            Cell("momentum-vr-u25-fednova", "momentum + VR", "2-5", "FedNova", "fednova-vr", "momentum", lr_m,
                 momentum=m),
            Cell("hybrid-u25-fednova", "hybrid momentum", "2-5", "FedNova", "fednova", "momentum", lr_m, momentum=m,
                 server="momentum", server_momentum=beta),
            Cell("servermom-u25-fednova", "server momentum", "2-5", "FedNova", "fednova", "sgd", lr_m,
                 server="momentum", server_momentum=beta)]
    return out


#: The Table 1 cells, in run order (within one seed).
CELLS: List[Cell] = _cells()
#: The ids of :data:`CELLS`, in the same order.
CELL_IDS = [c.id for c in CELLS]
_BY_ID = {c.id: c for c in CELLS}

#: Paper values (test accuracy %, mean over 3 seeds; ``std`` where the text gives one) with their source tag.
#: ``value=None`` = the paper has a number we could not confirm.
PAPER_VALUES: Dict[str, dict] = {
    "sgd-e2-fedavg": dict(value=60.68, source="paper Table 1", status="confirmed"),
    "sgd-e2-fednova": dict(value=66.31, source="paper Table 1", status="confirmed"),
    "momentum-e2-fedavg": dict(value=65.26, source="paper Table 1", status="confirmed"),
    "momentum-e2-fednova": dict(value=73.32, source="paper Table 1", status="confirmed"),
    "sgd-u25-fedavg": dict(value=64.22, source="paper Table 1", status="confirmed"),
    "sgd-u25-fednova": dict(value=73.22, source="paper Table 1", status="confirmed"),
    "momentum-u25-fedavg": dict(value=70.44, source="paper Table 1", status="confirmed"),
    "momentum-u25-fednova": dict(value=77.07, source="paper Table 1", status="confirmed"),
    "prox-e2-fedprox": dict(value=60.4, source="paper Table 1 (approximate)", status="unconfirmed"),
    "prox-e2-fednova": dict(value=69.9, source="paper Table 1 (approximate)", status="unconfirmed"),
    "prox-u25-fedprox": dict(value=63.7, source="paper Table 1 (approximate)", status="unconfirmed"),
    "prox-u25-fednova": dict(value=73.4, source="paper Table 1 (approximate)", status="unconfirmed"),
    "vr-u25-scaffold": dict(value=74.72, source="paper Table 1", status="confirmed"),
    "vr-u25-fednova": dict(value=None, source="paper Table 1", status="unconfirmed"),
    "momentum-vr-u25-fednova": dict(value=79.19, source="paper Table 1", status="confirmed"),
    "hybrid-u25-fednova": dict(value=81.15, std=0.38, source="paper §6 text", status="confirmed"),
    "servermom-u25-fednova": dict(value=77.49, std=0.25, source="paper §6 text", status="confirmed"),
}

#: A later independent re-run of the official setup (its E in {2,3,4} for the random-epoch row).
RERUN_VALUES: Dict[str, dict] = {
    "sgd-e2-fedavg": dict(value=62.35, source="independent re-run"),
    "sgd-e2-fednova": dict(value=67.04, source="independent re-run"),
    "momentum-e2-fedavg": dict(value=70.78, source="independent re-run"),
    "momentum-e2-fednova": dict(value=73.01, source="independent re-run"),
    "sgd-u25-fedavg": dict(value=64.30, source="independent re-run, E in {2,3,4}"),
    "sgd-u25-fednova": dict(value=70.54, source="independent re-run, E in {2,3,4}"),
}

#: Sizes of the chapter's demo run (FedAvg vs FedNova, E ~ U(2,5), the shipped sample, CPU):
#: ``ci`` a tiny width for a few rounds (seconds, 1 thread); ``full`` a wider network for longer.
#: Table 1 itself comes from the result files in ``data/results/cifar10`` in both profiles.
PROFILES = {
    "ci": dict(demo_width=0.03, demo_rounds=4, demo_lr=0.05, demo_epochs="2-5", threads=1,
               reference_width=1 / 32, reference_rounds=2, reference_clients=4, reference_samples=24,
               reference_batch=8),
    "full": dict(demo_width=0.125, demo_rounds=20, demo_lr=0.05, demo_epochs="2-5", threads=None,
                 reference_width=1 / 8, reference_rounds=3, reference_clients=16, reference_samples=64,
                 reference_batch=32),
}


# ============================================================================ data
def load_data(data_root=None, *, sample: bool = False, download: bool = False):
    """CIFAR-10 arrays: the shipped sample (``sample=True``) or the batch folder under ``data_root``.

    Raises ``FileNotFoundError`` (path + how to get the data) or ``ValueError`` (corrupt
    file, named) from :mod:`fedlib.data.cifar10`; ``ValueError`` for a ``sample`` that is not a bool.
    ``download=True`` fetches the official archive into ``data_root`` when its folder is missing or incomplete
    (:func:`fedlib.data.cifar10.load_cifar10`); ignored with ``sample=True``."""
    from ..data.cifar10 import load_cifar10, load_cifar10_sample

    check_flag("sample", sample)  # "no" is truthy: the sample was loaded for data_root's data
    if sample:
        return load_cifar10_sample()
    if data_root is None:
        raise ValueError("no CIFAR-10 location given: pass data_root (the folder containing cifar-10-batches-py) "
                         "or sample=True")
    return load_cifar10(data_root, download=download)


def official_partition(labels, num_clients: int = PAPER["num_clients"], alpha: float = PAPER["partition_alpha"],
                       seed: int = PAPER["partition_seed"]):
    """The official Dir(alpha) split of ``labels`` (:func:`fedlib.data.partition.dirichlet_partition`) over
    ``num_clients`` clients (default 16), drawn with ``seed`` (default the official 2020)."""
    from ..data.partition import dirichlet_partition

    return dirichlet_partition(labels, num_clients, alpha, seed)


def result_name(cell_id: str, seed: int) -> str:
    """The file name of Table 1 cell ``cell_id``'s run with ``seed``: ``<cell_id>__seed<seed>.json``
    (``seed`` an integer >= 0, ``cell_id`` a string; ``ValueError`` otherwise)."""
    if not isinstance(cell_id, str):
        raise ValueError(f"cell_id must be a string (a Table 1 cell id), got {cell_id!r}")
    return f"{cell_id}__seed{check_int('seed', seed)}.json"


# ============================================================================ training
def history_record(rec) -> dict:
    """A :class:`~fedlib.engines.stacked.RoundRecord` as a result-file history entry; ``clients`` names the
    round's participants in the order of ``local_steps`` (as ``run synthetic``'s history does), so that a run
    with client sampling says whose steps they are. ``rec`` is one run's record of a round (its diagnostics
    included)."""
    d = rec.diagnostics
    return {"round": int(rec.round), "train_loss": float(rec.train_loss), "test_accuracy": float(rec.test_accuracy),
            "test_loss": float(rec.test_loss), "tau_eff": float(d.tau_eff), "chi2": float(d.chi2),
            "clients": [int(c) for c in d.clients], "local_steps": [int(s) for s in d.local_steps],
            "lr": float(rec.lr)}


def resolve_device(device: Optional[str]) -> str:
    """``device`` as given, or ``"cuda"`` when it is ``None`` and torch sees a GPU (``"cpu"`` otherwise)."""
    import torch

    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    return str(device)


@contextlib.contextmanager
def cudnn_benchmark(enabled: bool):
    """``torch.backends.cudnn.benchmark = enabled`` inside the block, restored after it.

    On, cuDNN times its convolution algorithms for every new input shape (once per shape
    and process; the engine's shrinking prefix of active clients makes a few dozen shapes)
    and keeps the fastest, instead of choosing by heuristics. A speed candidate for the
    grouped channels-last convolutions (``data/results/bench/NOTES.md``: cuDNN's
    ``nhwcSliceCKernel`` took 13 % of a profiled round); ``bench cifar10
    --compare cudnn-benchmark`` measures it against the heuristics in one run. No effect
    off CUDA."""
    import torch

    enabled = check_flag("enabled", enabled)  # "no" is truthy: it would have switched the search on
    before = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = enabled
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark = before


def data_fingerprint(data, parts) -> dict:
    """What a checkpoint of :func:`train_runs` must have been trained on: the sizes and a SHA-256
    of the images and labels (train and test; ~0.14 s for the full CIFAR-10) and of the client
    split. A resume on other data (``--sample`` against the real set, another folder, another
    partition, random pixels with the real labels) is then refused instead of continuing. ``parts`` is the client
    split, one array of training-sample indices per client."""
    import hashlib

    def as_bytes(arr) -> np.ndarray:  # hashed through its buffer: the same bytes as tobytes(), without a copy
        if hasattr(arr, "detach"):
            arr = arr.detach().cpu().numpy()
        return np.ascontiguousarray(np.asarray(arr))

    digest = hashlib.sha256()
    for name in ("train_images", "train_labels", "test_images", "test_labels"):
        arr = getattr(data, name, None)
        digest.update(name.encode())
        if arr is not None:
            digest.update(repr(tuple(np.shape(arr))).encode())
            digest.update(as_bytes(arr))
    split = hashlib.sha256()
    for part in parts:
        split.update(np.asarray(part, dtype=np.int64).tobytes())
        split.update(b"|")
    return {"num_train": int(len(data.train_labels)), "num_test": int(len(data.test_labels)),
            "sha256": digest.hexdigest()[:20], "split_sha256": split.hexdigest()[:20]}


def _closure_numbers(fn) -> dict:
    """The numbers a function closes over by name (a :class:`~fedlib.server.ServerOptimizer`'s
    hyper-parameters: ``beta``, ``server_lr``, ``b1``, ...)."""
    cells = getattr(fn, "__closure__", None) or ()
    names = getattr(getattr(fn, "__code__", None), "co_freevars", ())
    return {n: c.cell_contents for n, c in zip(names, cells)
            if isinstance(c.cell_contents, (int, float)) and not isinstance(c.cell_contents, bool)}


def run_setup(run: Mapping) -> dict:
    r"""What a run of :func:`train_runs` trains with, as a checkpoint's config records it: the
    algorithm, its local solver's hyper-parameters (:math:`\eta`, :math:`\rho`, :math:`\mu`,
    weight decay, a within-round schedule by name), its server optimizer's name and
    hyper-parameters, :math:`\tau_{\text{eff}}`, the epochs as ``[low, high]`` and the participation."""
    from ..schedules import parse_epochs

    if not isinstance(run, Mapping):  # else "'NoneType' object is not subscriptable"
        raise ValueError(f"run must be a mapping, one of train_runs' runs (algorithm, epochs, ...), got {type(run).__name__}")
    alg, epochs = run["algorithm"], run["epochs"]
    lo, hi = parse_epochs(epochs) if isinstance(epochs, str) else \
        (tuple(epochs) if isinstance(epochs, (tuple, list)) else (epochs, epochs))
    solver = alg.solver
    schedule = solver.lr_schedule
    return {"algorithm": alg.name,
            "solver": {"name": solver.name, "lr": solver.lr, "momentum": solver.momentum, "mu": solver.mu,
                       "weight_decay": solver.weight_decay,
                       "lr_schedule": None if schedule is None else getattr(schedule, "__qualname__", repr(schedule))},
            "server": {"name": alg.server.name, **_closure_numbers(alg.server.update)},
            "tau_eff": alg.tau_eff, "epochs": [int(lo), int(hi)], "sampling": run.get("sampling", "full"),
            "clients_per_round": run.get("clients_per_round")}


# what table1 says of a group checkpoint written by another configuration
_TABLE1_RESUME_HINT = "run with the checkpoint's settings to finish that group, or delete the file to train it afresh"


def train_runs(runs: Sequence[dict], data, parts, *, rounds: int, width: float = 1.0, device: Optional[str] = None,
               precision: str = "fp32", path: str = "grouped", cuda_graph: bool = False, conv: str = "cudnn",
               batch_size: int = PAPER["batch_size"], lr_decay: str = "step",
               callback: Optional[Callable[[int, list, float], Any]] = None, checkpoint=None,
               checkpoint_every: int = 1, checkpoint_config: Optional[dict] = None,
               save_on_stop: bool = False, call_info: Optional[dict] = None, who: str = "table1",
               resume_from: Optional[dict] = None) -> dict:
    """Train several runs stacked in one engine.

    ``runs``: dicts with ``algorithm`` (a FederatedAlgorithm), ``epochs`` (``"2"``,
    ``"2-5"`` or a ``(low, high)`` pair), ``seed``, ``name`` and optionally ``sampling`` /
    ``clients_per_round``. Every run starts from ``vgg11(width, seed=run seed)`` (so FedAvg
    and FedNova of one seed share their initial model). ``precision``: ``fp32``,
    ``bf16`` (autocast; meant for GPUs) or ``fp64``; ``conv``: the grouped path's convolutions
    (:class:`~fedlib.engines.stacked.StackedEngine`). ``callback(round, records, seconds_so_far)`` after every
    round; returning ``False`` stops training (the histories so far are returned with
    ``stopped=True``). Returns ``{"histories", "seconds", "round_seconds", "stopped",
    "device", "resumed_from", "seconds_before", "started"}``: ``seconds`` is this call's
    training time, ``seconds_before`` the training time a resumed checkpoint had already
    spent, ``started`` the ``time.time()`` of the group's first start (this call's, or the
    checkpoint's). Non-finite losses raise ``FloatingPointError`` naming round and run.

    ``checkpoint``: a file written atomically every ``checkpoint_every`` rounds (0: never
    periodically), and when the callback stops training if ``save_on_stop``
    (:meth:`fedlib.engines.stacked.StackedEngine.state_dict` + the histories + the time spent,
    :mod:`fedlib.checkpoint`); when it exists the group resumes from it instead of starting
    over (refused if its ``checkpoint_config`` — default: the run names and seeds, each run's
    :func:`run_setup` (algorithm, solver and server hyper-parameters, epochs, participation; keyed
    by the run's index), rounds, width, precision, batch size, lr decay, the engine's path and
    convolutions — differs, or the data it was trained on (:func:`data_fingerprint`, computed here unless
    ``checkpoint_config`` holds it as ``"data"``, as :func:`run_table1`'s does), or whether
    cuDNN's algorithm search (``torch.backends.cudnn.benchmark``, :func:`cudnn_benchmark`) was
    on: with it cuDNN may pick other convolution algorithms, which round differently; a
    checkpoint written before this was recorded is not checked for it). CUDA graphs replay the
    eager step's kernels, so a group may be resumed with or without them: each call that trained
    it is recorded in the checkpoint (``extra["calls"]``: the caller's ``call_info`` with
    ``cuda_graph`` and the ``rounds`` ``[first, end)`` it trained) and returned as
    ``calls_before``. ``who`` starts the checkpoint's error messages (the command or flag that resumes: ``"table1"``,
    ``"--checkpoint"`` for ``run cifar10``). ``resume_from`` is the file at ``checkpoint`` as the caller read it
    already (:func:`fedlib.checkpoint.load_checkpoint` with ``kind="table1"``; ``run cifar10 --resume`` checks its
    rounds first, :func:`run_table1` a paused group's settings): resumed from as if read here (its config checked
    the same way), without a second read of the file; ``resume_from`` without ``checkpoint``, or anything but such
    a checkpoint, is a ``ValueError``.

    ``data`` holds the images and labels and ``parts`` the client split (one array of training-sample indices per
    client, as :func:`official_partition` returns); ``batch_size`` is :math:`B` (default 32); ``lr_decay`` is
    ``"step"`` (default: the paper's ÷10 at 50 % and ÷100 at 75 % of the rounds) or ``"constant"``.
    """
    import torch

    from ..engines.stacked import RunSpec, StackedEngine
    from ..models import vgg11
    from ..schedules import make_epoch_schedule, step_decay_lr

    check_choice("precision", precision, ("fp32", "bf16", "fp64"))
    check_choice("lr_decay", lr_decay, ("step", "constant"))
    # "no" is truthy: save_on_stop="no" saved a checkpoint when the callback stopped training
    cuda_graph, save_on_stop = check_flag("cuda_graph", cuda_graph), check_flag("save_on_stop", save_on_stop)
    # -1 meant "never" and 1.5 "every third round" without a word
    checkpoint_every = check_count("checkpoint_every", checkpoint_every, minimum=0)
    if resume_from is not None:  # a checkpoint read by the caller (a ValueError for anything else)
        from ..checkpoint import FORMAT

        if checkpoint is None:
            raise ValueError("resume_from needs checkpoint, the file it was read from (the run's later checkpoints "
                             "replace it)")
        if not isinstance(resume_from, dict) or resume_from.get("format") != FORMAT \
                or resume_from.get("kind") != "table1":
            got = (f"a dict of format {resume_from.get('format')!r} and kind {resume_from.get('kind')!r}"
                   if isinstance(resume_from, dict) else a_type(resume_from))
            raise ValueError("resume_from must be a checkpoint of train_runs as fedlib.checkpoint.load_checkpoint("
                             f"checkpoint, kind='table1') returns it, got {got}")
    device = resolve_device(device)
    dtype = torch.float64 if precision == "fp64" else torch.float32
    prec = "bf16" if precision == "bf16" else "fp32"
    sizes = [len(c) for c in parts]
    specs = []
    for r in runs:
        alg = r["algorithm"]
        if lr_decay == "step":
            lr_at = (lambda t, lr=alg.solver.lr: step_decay_lr(lr, t, rounds))
        else:
            lr_at = (lambda t, lr=alg.solver.lr: lr)
        specs.append(RunSpec(alg, parts, make_epoch_schedule(sizes, batch_size, r["epochs"], seed=r["seed"]),
                             seed=r["seed"], params=vgg11(width=width, seed=r["seed"]), lr_at=lr_at,
                             sampling=r.get("sampling", "full"), clients_per_round=r.get("clients_per_round"),
                             name=r.get("name", "")))
    engine = StackedEngine(vgg11(width=width, seed=0), data, specs, rounds=rounds, path=path, device=device,
                           dtype=dtype, precision=prec, cuda_graph=cuda_graph, conv=conv, batch_size=batch_size)
    histories: List[list] = [[] for _ in specs]
    calls_before: List[dict] = []  # call_info of the calls that trained this group before (from its checkpoint)
    resumed_from = 0
    seconds_before, started = 0.0, time.time()
    ck_config = dict(checkpoint_config) if checkpoint_config is not None else {
        "runs": [r.get("name", "") for r in runs], "seeds": [r["seed"] for r in runs],
        "setup": {str(j): run_setup(r) for j, r in enumerate(runs)}, "rounds": rounds, "width": width,
        "precision": precision, "batch_size": batch_size, "lr_decay": lr_decay, "path": path, "conv": conv}
    if checkpoint is not None:  # the data trained on and cuDNN's mode, where the caller's config lacks them
        if "data" not in ck_config:  # (table1 passes the fingerprint it computed already: ~0.14 s for CIFAR-10)
            ck_config["data"] = data_fingerprint(data, parts)
        ck_config.setdefault("cudnn_benchmark", bool(torch.backends.cudnn.benchmark))
    if resume_from is not None or (checkpoint is not None and Path(checkpoint).is_file()):
        from ..checkpoint import check_config, load_checkpoint

        doc = resume_from if resume_from is not None else load_checkpoint(checkpoint, kind="table1", who=who)
        # a checkpoint of an earlier commit does not say whether cuDNN's search was on: not checked then
        current = {k: v for k, v in ck_config.items() if k != "cudnn_benchmark" or k in doc["config"]}
        check_config(checkpoint, doc["config"], current, who=who,
                     hint=_TABLE1_RESUME_HINT if who == "table1" else "run with the checkpoint's settings to "
                          "continue it, or start afresh with another --checkpoint (or delete the file)")
        engine.load_state_dict(doc["state"])
        histories = [list(h) for h in doc["extra"]["histories"]]
        resumed_from = engine.round_index
        seconds_before = float(doc["extra"].get("seconds", 0.0))
        started = float(doc["extra"].get("started", started))
        calls_before = list(doc["extra"].get("calls", []))
    round_seconds = []
    t0 = time.perf_counter()
    stopped = False

    def save(round_done):
        from ..checkpoint import save_checkpoint

        save_checkpoint(checkpoint, config=ck_config, round_done=round_done, state=engine.state_dict(), history=[],
                        seed=None, kind="table1", who=who,
                        extra={"histories": histories, "seconds": seconds_before + time.perf_counter() - t0,
                               "started": started,
                               "calls": calls_before + [dict(call_info or {}, cuda_graph=bool(cuda_graph),
                                                             rounds=[resumed_from, round_done])]})

    for t in range(resumed_from, rounds):
        ts = time.perf_counter()
        records = engine.run_round()
        round_seconds.append(time.perf_counter() - ts)
        for rec in records:
            histories[rec.run].append(history_record(rec))
        saved = False
        if checkpoint is not None and checkpoint_every > 0 and ((t + 1) % checkpoint_every == 0 or t + 1 == rounds):
            save(t + 1)
            saved = True
        if callback is not None and callback(t, records, time.perf_counter() - t0) is False:
            stopped = t + 1 < rounds
            if stopped and save_on_stop and checkpoint is not None and not saved:
                save(t + 1)
            break
    return {"histories": histories, "seconds": time.perf_counter() - t0, "round_seconds": round_seconds,
            "stopped": stopped, "device": device, "resumed_from": resumed_from, "seconds_before": seconds_before,
            "started": started, "calls_before": calls_before}


# ============================================================================ Table 1 runner
def plan_table1(results_dir, seeds: Sequence[int] = (0, 1, 2), cells: Optional[Sequence[str]] = None) -> List[dict]:
    """Every (cell, seed) in run order — all cells of the first seed, then the next seed —
    with its result file and whether it is already present. ``results_dir`` is the folder of the result files;
    ``seeds`` are distinct integers >= 0 and ``cells`` distinct ids of :data:`CELL_IDS` (default all), each a
    ``ValueError`` otherwise."""
    results_dir = Path(results_dir)
    # a seed 0.5 or True was filed as "__seed0.5.json" / "__seedTrue.json" and trained as seed 0 / 1
    seeds = [check_int(f"seeds[{i}]", s) for i, s in enumerate(check_sequence("seeds", seeds, "run seeds"))]
    # a string is no list of cells: "sgd-e2-fedavg" was taken as its letters (unknown cells 's', 'g', ...)
    ids = check_sequence("cells", cells, "Table 1 cell ids") if cells is not None else CELL_IDS
    unknown = [c for c in ids if not isinstance(c, str) or c not in _BY_ID]
    if unknown:
        raise ValueError(f"unknown Table 1 cell(s) {unknown}; known: {CELL_IDS}")
    twice = sorted({c for c in ids if ids.count(c) > 1}) + [f"seed {s}" for s in sorted(set(seeds))
                                                            if list(seeds).count(s) > 1]
    if twice:
        raise ValueError(f"listed twice: {', '.join(map(str, twice))} (each run would be trained twice, stacked, "
                         "and its result file written twice)")
    out = []
    for s in seeds:
        for cid in ids:
            path = results_dir / result_name(cid, s)
            out.append({"cell": _BY_ID[cid], "seed": int(s), "path": path, "present": path.is_file()})
    return out


class OtherSetupError(ValueError):
    """A result file in the Table 1 folder that is not a run of the requested setup."""


def cell_setup_problems(doc: Mapping, *, history: bool = True) -> List[str]:
    """What makes result ``doc`` not a run of its Table 1 cell as this code defines it: an
    unknown ``cell_id``, a recorded cell (algorithm, solver, lr, mu, momentum, server,
    tau_eff) other than :data:`CELLS`' one, another batch size, weight decay, lr schedule,
    number of clients or partition (alpha, seed), or (``history``) a history that does not
    list one local-step count per client. ``[]`` if none."""
    history = check_flag("history", history)  # "no" is truthy: the history would have been checked
    cfg = doc.get("config") or {}
    cid = cfg.get("cell_id")
    if cid not in _BY_ID:
        return [f"unknown cell {cid!r}"]
    out = []
    recorded, wanted = cfg.get("table1_cell"), _BY_ID[cid].config()
    if recorded != wanted:
        diff = sorted(k for k in set(wanted) | set(recorded or {}) if (recorded or {}).get(k) != wanted.get(k))
        out.append("cell " + ", ".join(f"{k} {(recorded or {}).get(k)!r} (now {wanted.get(k)!r})" for k in diff))
    data = cfg.get("data") or {}
    for key, found, want in (("batch_size", cfg.get("batch_size"), PAPER["batch_size"]),
                             ("weight_decay", cfg.get("weight_decay"), PAPER["weight_decay"]),
                             ("lr_decay", cfg.get("lr_decay"), "step"),
                             ("num_clients", data.get("num_clients"), PAPER["num_clients"]),
                             ("partition_alpha", data.get("partition_alpha"), PAPER["partition_alpha"]),
                             ("partition_seed", data.get("partition_seed"), PAPER["partition_seed"])):
        if found != want:
            out.append(f"{key} {found!r} (the official {want!r})")
    bad = sum(len(h.get("local_steps") or ()) != PAPER["num_clients"] for h in (doc.get("history") or ()
                                                                              if history else ()))
    if bad:
        out.append(f"local_steps of {bad} round(s) do not list {PAPER['num_clients']} clients")
    return out


def _name_problems(doc: Mapping, name: str) -> List[str]:
    """Whether result ``doc``, filed as ``name``, is the run its name says: ``config.cell_id``
    and ``config.seed`` must give :func:`result_name` ``== name`` (a copied or renamed file, or
    ``seed00`` next to ``seed0``, would otherwise count as another cell's or seed's run)."""
    cfg = doc.get("config") or {}
    cid, seed = cfg.get("cell_id"), cfg.get("seed")
    if (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0 or not isinstance(cid, str)
            or result_name(cid, seed) != name):
        return [f"its config says cell {cid!r} seed {seed!r}, not the run its name {name!r} says"]
    return []


def _check_present(present: Sequence[dict], *, rounds: int, width: Optional[float] = None,
                   num_train: Optional[int] = None) -> None:
    """A result file counts as done only if it is a run of the requested setup: refuse one
    of other rounds, width or training-set size (a quick ``--sample --rounds 2`` call into
    the same folder would otherwise stand in for the real run), one whose config names
    another cell or seed than its file name (:func:`_name_problems`), or one of another
    setup (:func:`cell_setup_problems`), naming the file."""
    for p in present:
        try:
            doc = json.loads(Path(p["path"]).read_text())
            cfg = doc["config"]
            found = {"rounds": cfg["rounds"], "width": cfg["engine"]["width"], "num_train": cfg["data"]["num_train"]}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise OtherSetupError(f"{p['path']}: present but not a readable Table 1 result ({exc!r}); "
                             "move it away to run the cell") from None
        wanted = {"rounds": rounds, "width": width, "num_train": num_train}
        diff = [f"{k} {found[k]!r} (requested {v!r})" for k, v in wanted.items() if v is not None and found[k] != v]
        diff += _name_problems(doc, Path(p["path"]).name) + cell_setup_problems(doc, history=False)
        if diff:
            raise OtherSetupError(f"{p['path']}: present, but a run of another setup: {', '.join(diff)}; use another "
                             "--results folder (or move the file away) to run this one")


def mean_epochs(epochs: str) -> float:
    """Expected local epochs per client and round of an epoch setting: ``"2"`` -> 2,
    ``"2-5"`` (uniform on 2..5 inclusive) -> 3.5."""
    from ..schedules import parse_epochs

    low, high = parse_epochs(epochs)
    return (low + high) / 2.0


def round_work(epochs: str, num_train: int, num_test: int) -> float:
    r"""Work of one round of one run, in training-image equivalents: every epoch passes
    all ``num_train`` images once (last partial batches kept), so
    :math:`\bar E\,N_{train}`, plus the evaluation's forward pass over the test set
    (about a third of a training step per image). The unit of Table 1's time estimates.
    ``num_train`` must be an integer >= 1, ``num_test`` one >= 0 (``ValueError`` otherwise); ``epochs`` is the
    setting, Table 1's ``"2"`` or ``"2-5"`` or any other text :func:`fedlib.schedules.parse_epochs` reads
    (:func:`mean_epochs`)."""
    num_train = check_int("num_train", num_train, minimum=1)
    num_test = check_int("num_test", num_test)
    return mean_epochs(epochs) * float(num_train) + float(num_test) / 3.0


def trained_images(history: Sequence[Mapping], sizes, batch_size: int) -> Optional[int]:
    r"""The training images a run's ``history`` really processed: per round and client,
    :math:`\lfloor\tau_i/s_i\rfloor n_i + \min((\tau_i \bmod s_i) B, n_i)` with
    :math:`s_i = \lceil n_i/B\rceil` (a last partial batch counts its real samples), from the
    recorded ``local_steps``; ``None`` when a round does not list one step count per client.
    With random epochs (``"2-5"``) this is the drawn work, not :func:`round_work`'s expectation. ``sizes`` are the
    clients' :math:`n_i` and ``batch_size`` is :math:`B`."""
    from ..schedules import steps_per_epoch

    sizes = np.asarray(sizes, dtype=np.int64)
    spe = steps_per_epoch(sizes, batch_size)
    total = 0
    for h in history:
        tau = np.asarray(h.get("local_steps", ()), dtype=np.int64)
        if tau.shape != sizes.shape:
            return None
        full, rest = np.divmod(tau, spe)
        total += int((full * sizes + np.minimum(rest * int(batch_size), sizes)).sum())
    return total


def _previous_rate(results_dir: Path, key: dict, stacked: Optional[int] = None) -> Optional[float]:
    """Seconds per unit of :func:`round_work`: the median of the rates (``images_per_second``)
    that earlier results with the same engine settings measured (``stacked``: only those
    trained with that many runs stacked; a result trained partly with CUDA graphs and partly
    without is left out; ``None`` if there are none)."""
    return _previous_rate_and_files(results_dir, key, stacked)[0]


def _previous_rate_and_files(results_dir: Path, key: dict, stacked: Optional[int] = None):
    """``_previous_rate`` and the names of the result files it took the rates from."""
    rates, files = [], []
    for f in sorted(Path(results_dir).glob("*__seed*.json")):
        try:
            doc = json.loads(f.read_text())
            eng = doc["config"]["engine"]
            ips = float(doc["summary"]["images_per_second"])
            mixed = bool((doc.get("provenance", {}).get("resumed") or {}).get("cuda_graph_changed"))
        except Exception:
            continue
        if mixed:  # trained partly with CUDA graphs and partly without: the rate of neither
            continue
        # both ways for the settings recorded only when not the default (a gemm or cuDNN-search
        # result must not set a default call's pace), and the same number of runs stacked
        # (1 run measured ~59k images/s, 2 stacked ~72k: more than the safety margin apart)
        same = (all(eng.get(k) == v for k, v in key.items() if k not in ("conv", "cudnn_benchmark"))
                and eng.get("conv", "cudnn") == key.get("conv", "cudnn")
                and bool(eng.get("cudnn_benchmark", False)) == bool(key.get("cudnn_benchmark", False))
                and (stacked is None or eng.get("stacked_runs") == stacked))
        if same and ips > 0:
            rates.append(1.0 / ips)
            files.append(f.name)
    return (float(np.median(rates)) if rates else None), files


def _engine_key(*, width, precision, path, cuda_graph, device, num_train, cudnn_bench, conv) -> dict:
    """The engine settings that a Table 1 result records (``config.engine``, less ``stacked_runs``) and that
    ``_previous_rate`` matches."""
    key = {"width": width, "precision": precision, "path": path, "cuda_graph": cuda_graph,
           "device_type": device.split(":")[0], "num_train": int(num_train)}
    if cudnn_bench:  # recorded only when on, so that earlier results (without the key) still match when off
        key["cudnn_benchmark"] = True
    if conv != "cudnn":  # likewise
        key["conv"] = conv
    return key


def _first_rate(results_dir: Path, engine_key: dict, *, stacked: int, images_per_second: Optional[float]):
    """The rate (seconds per unit of :func:`round_work`) a Table 1 call starts with and where it comes
    from: ``(rate, files)`` from earlier results with the same engine settings (those trained with
    ``stacked`` runs stacked, else any number), else ``(1 / images_per_second, None)``, else
    ``(None, None)``."""
    rate, files = _previous_rate_and_files(results_dir, engine_key, stacked=stacked)
    if rate is None:
        rate, files = _previous_rate_and_files(results_dir, engine_key)
    if rate is not None:
        return rate, files
    if images_per_second is not None:
        if not images_per_second > 0:
            raise ValueError(f"images_per_second must be > 0, got {images_per_second!r}")
        return 1.0 / float(images_per_second), None
    return None, None


def _run_names(group) -> List[str]:
    return [f"{p['cell'].id}__seed{p['seed']}" for p in group]


def _run_line(p) -> str:
    """A dry run's name of run ``p``: its cell, seed and result path."""
    return f"{p['cell'].id} seed {p['seed']} -> {p['path']}"


def _next_group(todo, work, rate, remaining, paused, *, stack, rounds, safety, later):
    """How a Table 1 call goes on with the runs ``todo`` (in order), ``remaining`` seconds
    left in this call and ``later`` in a later one: ``(k, done, rate, stop)``: the next
    group is ``todo[:k]``, resumed after round ``done``, estimated at ``rate`` (updated from a
    paused group's own measurement); ``stop`` is ``None``, or ``(why, line)`` when nothing
    more is started (``why``: ``"budget"`` or ``"later"``, the next call starts it).
    ``paused`` is the paused group in ``todo`` as ``(k, rounds done, seconds spent)`` or
    ``(0, 0, None)``; ``work(p)`` is :func:`round_work` of run ``p``. Shared by the call
    and its dry run, so that both start the same groups."""
    k = min(stack, len(todo))
    k_resume, done, spent = paused
    if k_resume:
        k = k_resume
        resume_work = sum(work(p) for p in todo[:k])
        # the rate this group measured before its pause, warm-up included: after fewer than
        # MIN_MEASURED_ROUNDS rounds the warm-up (CUDA-graph captures; cuDNN search if on) dominates
        # it, so an earlier estimate, when there is one, is the better guess
        if spent and done and (done >= MIN_MEASURED_ROUNDS or rate is None):
            rate = float(spent) / (done * resume_work)
        # In the session's last call (no later call) a paused group left alone is lost with the
        # machine, so its own rate, measured over several rounds, is trusted without the margin:
        # the in-training check still stops it if its pace will not finish by the deadline.
        measured = bool(spent) and done >= MIN_MEASURED_ROUNDS
        margin = 1.0 if measured and not later else safety
        need = None if rate is None else margin * rate * (rounds - done) * resume_work
        if need is not None and need > remaining + later:
            return k, done, rate, ("budget", (
                f"budget: {remaining:.0f} s left (+{later:.0f} s later), the paused group "
                f"{', '.join(_run_names(todo[:k]))} needs ~{need:.0f} s for its last {rounds - done} rounds; "
                "stopping"))
    elif rate is not None:
        fits = 0
        while fits < k and safety * rate * rounds * sum(work(p) for p in todo[:fits + 1]) <= remaining + later:
            fits += 1
        if fits < 1:
            return 0, done, rate, ("budget", (
                f"budget: {remaining:.0f} s left" + (f" (+{later:.0f} s later)" if later else "") +
                f", the next run needs ~{safety * rate * rounds * work(todo[0]):.0f} s; stopping"))
        k = fits
        per_round = rate * sum(work(p) for p in todo[:k])
        if later and remaining < MIN_MEASURED_ROUNDS * per_round:
            # it would pause after its warm-up round, and a rate measured on that alone is
            # far too slow: the next call starts it instead
            return k, done, rate, ("later", (
                f"{remaining:.0f} s left in this call, under {MIN_MEASURED_ROUNDS} rounds "
                f"(~{per_round:.1f} s each) of {', '.join(_run_names(todo[:k]))}: it starts in the next call"))
    return k, done, rate, None


#: A log line every this many rounds while a Table 1 group trains.
PROGRESS_EVERY = 10

#: Rounds a group must have trained before its own measured rate replaces an earlier estimate
#: when it is resumed, and the fewest rounds of its estimated time a call with
#: ``continue_later`` must have left to start a group.
MIN_MEASURED_ROUNDS = 3


def run_table1(results_dir, *, budget_seconds: float, seeds: Sequence[int] = (0, 1, 2), data=None, data_source="",
               width: float = 1.0, rounds: int = PAPER["rounds"], device: Optional[str] = None,
               precision: str = "fp32", path: str = "grouped", cuda_graph: bool = False, stack: int = 1,
               cells: Optional[Sequence[str]] = None, safety: float = 1.15, dry_run: bool = False,
               images_per_second: Optional[float] = None, checkpoint_every: int = 1,
               continue_later: float = 0.0, cudnn_bench: bool = False, conv: str = "cudnn",
               num_train: Optional[int] = None, log: Callable[[str], Any] = print) -> dict:
    """Run the missing Table 1 (cell, seed) results that fit in ``budget_seconds``.

    Runs are taken in :func:`plan_table1` order, up to ``stack`` at a time in one engine.
    Time estimates count work in training-image equivalents (:func:`round_work`: a
    U(2,5) run does 1.75x the work of an E = 2 run) times a rate in seconds per image,
    taken from (first that exists) the groups measured in this call, earlier results with
    the same engine settings, ``1 / images_per_second`` (a hint, e.g. the engine rate of
    ``bench cifar10`` on the same device); without any, the first group is started and
    measured. A group is the longest prefix of the remaining runs (at most ``stack``)
    whose estimate times ``safety`` fits in the remaining budget; when not even the next
    run fits, nothing more is started (runs are never taken out of order). While
    training, a group whose projected finish passes the deadline is stopped and writes
    nothing, and the next group is sized with the rate it measured. With
    ``checkpoint_every = n > 0`` each group checkpoints every ``n`` rounds to
    ``results_dir/.ckpt__<names>.pkl`` (removed once its results are written): a group
    killed mid-way (crash, ``kill -9``, preemption) resumes from there on the next call
    instead of starting over; 0 writes no checkpoints (each costs a copy of every run's
    model to the host). A group with a checkpoint in ``results_dir`` (killed, or paused
    as below) is resumed first, its estimate counting only its remaining rounds.

    ``continue_later = S > 0`` says that another call on the same machine follows with
    about ``S`` more seconds (a GPU session's calls share ``/tmp``): groups are sized to
    fit the remaining budget plus ``S``, and a group that reaches this call's deadline
    saves a checkpoint after its last whole round and *pauses*; the next call (with
    ``continue_later = 0`` if it is the last) resumes it. ``cudnn_bench`` trains with
    :func:`cudnn_benchmark` on, ``conv="gemm"`` with the im2col convolutions (each recorded
    in the results' engine settings when not the default; a group paused under another
    precision, path, convolution or cuDNN search is refused, :func:`train_runs`). A group's
    checkpoint is compared with this call's settings (runs, seeds, rounds, width, precision, batch
    size, lr decay, cells, path, convolution) as soon as it is found, a dry run's too: one of other settings is a
    :class:`fedlib.checkpoint.CheckpointError` naming the differing keys before the group is
    announced or its estimate made (the data and cuDNN's search are compared by
    :func:`train_runs` when it resumes the group, from the checkpoint read when it was found: the file is read
    once). A group may
    be resumed with CUDA graphs switched on or off (the same kernels): its result's
    ``provenance.resumed`` then has ``cuda_graph_changed`` and lists each call's setting and
    rounds (``earlier_calls``), and its rate is not used for later estimates. A call with
    ``continue_later`` starts no group with less than :data:`MIN_MEASURED_ROUNDS` rounds of
    its estimated time left (it would pause after its warm-up round); a group resumed after
    fewer rounds than that is sized with the earlier estimate, not with the rate of its
    warm-up. Returns ``{"written": [...],
    "skipped": [...], "not_started": [...], "aborted": [...], "paused": [...]}``.

    A present result counts as done only if it was trained on as many images as ``data``
    holds; ``num_train`` gives that number when ``data`` is ``None`` (a dry run without
    the data: the command line passes the full 50,000, and the sample itself with
    ``--sample``). A dry run's time estimates are at the size of ``data``, else at ``num_train`` training images
    (the paper's 50,000 when it is ``None``) and the paper's test set.

    ``results_dir``, ``seeds`` and ``cells`` are :func:`plan_table1`'s. ``dry_run=True`` trains nothing: it logs
    where its rate comes from (the earlier results' files, or the hint) and each missing run, as ``would run``
    (with its estimated time when there is a rate) or ``beyond the budget``, by the same rate, groups and budget
    decisions as the call, each group taking its estimated time (without a rate, the first group is listed as
    ``would run`` and the rest as ``would run if time is left``, sized with the rate the first group measures);
    it returns every missing run as ``not_started``.
    ``width`` is VGG-11's width factor (default 1; a present result of another width is refused);
    ``cuda_graph`` (``True`` or ``False``) trains with CUDA graphs (a CUDA device only); ``data_source`` is the
    text recorded as the results' ``config.data.source``; ``log`` receives every progress line (default
    ``print``).
    """
    from ..results import _command, _utc, git_commit, make_provenance, make_result, write_result

    # not numbers: None failed as float()'s TypeError, "5" passed float() and failed later comparing str with float,
    # True was one second
    for name, value, what in (("budget_seconds", budget_seconds, "a finite number >= 0 of seconds"),
                              ("continue_later", continue_later, "a finite number >= 0 of seconds"),
                              ("safety", safety, "a finite factor > 0")):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise ValueError(f"{name} must be {what}, got {value!r}")
    # a NaN budget passed every deadline comparison (a group without a rate trained all its rounds),
    # stack 0 stopped at once with "the next run needs ~N s" whatever the budget
    if not float(budget_seconds) >= 0:
        raise ValueError(f"budget_seconds must be >= 0, got {budget_seconds!r}")
    if not math.isfinite(float(budget_seconds)):
        raise ValueError(f"budget_seconds must be a finite number of seconds, got {budget_seconds!r}; for no "
                         "practical limit give one longer than the runs (e.g. 1e9)")
    if not (float(continue_later) >= 0 and math.isfinite(float(continue_later))):
        raise ValueError(f"continue_later must be a finite number >= 0 of seconds, got {continue_later!r}")
    stack = check_int("stack", stack, minimum=1)
    checkpoint_every = check_count("checkpoint_every", checkpoint_every, minimum=0)  # int(1.5) was 1
    # "no" is truthy: dry_run="no" listed instead of training, cuda_graph="no" went into the results' engine key
    cuda_graph, dry_run, cudnn_bench = (check_flag("cuda_graph", cuda_graph), check_flag("dry_run", dry_run),
                                        check_flag("cudnn_bench", cudnn_bench))
    if not (np.isfinite(safety) and safety > 0):
        raise ValueError(f"safety must be a finite factor > 0, got {safety!r}")
    git_start = git_commit()  # the code of this call (a change during the call is flagged at the end)
    start = time.time()
    deadline = start + float(budget_seconds)
    results_dir = Path(results_dir)
    plan = plan_table1(results_dir, seeds, cells)
    skipped = [p for p in plan if p["present"]]
    todo = [p for p in plan if not p["present"]]
    _check_present(skipped, rounds=rounds, width=width,
                   num_train=num_train if data is None else int(len(data.train_labels)))
    out = {"written": [], "skipped": [str(p["path"]) for p in skipped], "not_started": [], "aborted": [],
           "paused": []}
    for p in skipped:
        log(f"present: {p['path'].name}")
    if not todo:
        return out
    if data is None and not dry_run:
        raise ValueError("data is required unless dry_run=True")
    # the sizes of data, else (a dry run without it) num_train and the paper's test set
    test_labels = getattr(data, "test_labels", None)
    if data is None:
        n_train, n_test = int(PAPER["num_train"] if num_train is None else num_train), int(PAPER["num_test"])
    else:
        n_train, n_test = int(len(data.train_labels)), (0 if test_labels is None else int(len(test_labels)))
    device = resolve_device(device)
    engine_key = _engine_key(width=width, precision=precision, path=path, cuda_graph=cuda_graph, device=device,
                             num_train=n_train, cudnn_bench=cudnn_bench, conv=conv)
    # seconds per unit of round_work: results stacked as this call stacks, else any number stacked, else the hint
    rate, rate_files = _first_rate(results_dir, engine_key, stacked=min(stack, len(todo)),
                                   images_per_second=images_per_second)

    def work(p):
        return round_work(p["cell"].epochs, n_train, n_test)

    def ckpt_path(names):
        name = ".ckpt__" + "+".join(names) + ".pkl"
        # a file name holds at most 255 bytes, and atomic_write's temporary file adds 14 to it: a
        # large --stack (e.g. 12) names its group by a digest instead (shorter names are unchanged)
        if len(name.encode()) > 241:
            digest = hashlib.sha256("+".join(names).encode()).hexdigest()[:16]
            name = f".ckpt__{names[0]}+{len(names) - 1}-more-{digest}.pkl"
        return results_dir / name

    paused_read = {}  # the checkpoint paused_group() read last, {path: document}: train_runs resumes from it

    def paused_group():
        """The longest prefix of ``todo`` with a checkpoint (a paused or killed group), the
        rounds it has done and the training seconds they took (``None`` if not recorded),
        or ``(0, 0, None)``. The checkpoint read is kept in ``paused_read`` (its file is not read again to resume
        it: ~40 MB per stacked run at full width, more with control variates)."""
        from ..checkpoint import CheckpointError, check_config, load_checkpoint

        paused_read.clear()
        for j in range(len(todo), 0, -1):
            f = ckpt_path(_run_names(todo[:j]))
            if f.is_file():
                try:
                    doc = load_checkpoint(f, kind="table1", who="table1")
                except CheckpointError as exc:  # train_runs would refuse it too, after loading the data
                    raise CheckpointError(f"table1: the group checkpoint {f} cannot be resumed ({exc}); delete it "
                                          "(or move it away) to train this group from round 0") from None
                # the settings it records (rounds, width, cells, ...) are compared here, before "training ...
                # resuming after round N" and the estimates that read its round; train_runs checks the whole config
                # again (a key it lacks: path or conv off their defaults; the data and cuDNN's mode, added to it)
                current = group_config(todo[:j])
                saved = {k: v for k, v in doc["config"].items() if k in current}
                check_config(f, saved, {k: current[k] for k in saved}, who="table1", hint=_TABLE1_RESUME_HINT)
                paused_read[f] = doc
                return j, int(doc["round"]), doc.get("extra", {}).get("seconds")
        return 0, 0, None

    def group_config(group):
        """The checkpoint config of ``group`` (the call adds the data's fingerprint, train_runs cuDNN's mode): the
        cells' definitions are part of the setup, so a group paused under other ones is not resumed; another commit may
        resume it (a session commits between its calls), and the result names every call's commit and command
        (provenance.resumed.earlier_calls)."""
        config = {"runs": _run_names(group), "seeds": [p["seed"] for p in group], "rounds": rounds, "width": width,
                  "precision": precision, "batch_size": PAPER["batch_size"], "lr_decay": "step",
                  "cells": [p["cell"].config() for p in group]}
        # another path or convolution rounds differently (a group resumed on it is neither run); set only when not
        # the default, so that a checkpoint of an earlier commit on the defaults resumes
        config.update({k: v for k, v, default in (("path", path, "grouped"), ("conv", conv, "cudnn")) if v != default})
        return config

    later = float(continue_later)
    plan_next = functools.partial(_next_group, work=work, stack=stack, rounds=rounds, safety=safety, later=later)
    if dry_run:
        # the call's own plan (_first_rate, _next_group), each group taking its estimated time
        if rate is not None:
            where = (f"earlier results with the same engine settings in {results_dir}: {', '.join(rate_files)}"
                     if rate_files is not None else
                     f"--images-per-second (hint; no earlier result with the same engine settings in {results_dir})")
            log(f"estimate: {1 / rate:.0f} images/s from {where}")
        all_todo, remaining, total, stop = todo, float(budget_seconds), 0.0, None
        while todo:
            if remaining <= 0:
                stop = ("budget", "budget: no time left in this call; stopping")
                break
            k, done, rate, stop = plan_next(todo, rate=rate, remaining=remaining, paused=paused_group())
            if stop is not None:
                break
            group, todo = todo[:k], todo[k:]
            if rate is None:  # measured while it trains: what follows depends on the rate it measures
                for p in group:
                    log(f"would run: {_run_line(p)}  (no estimate: no earlier result with the same engine settings "
                        "and no --images-per-second; measured while it trains)")
                for p in todo:
                    log(f"would run if time is left: {_run_line(p)}  (sized with the rate the first group measures)")
                todo = []
                break
            group_secs = rate * (rounds - done) * sum(work(p) for p in group)
            pauses = later > 0 and group_secs > remaining
            for p in group:
                secs = rate * (rounds - done) * work(p)
                total += secs
                log(f"would run: {_run_line(p)}  (~{secs:.0f} s at {1 / rate:.0f} images/s; {total:.0f} s in all up to here"
                    + (f"; {k} run(s) stacked" if k > 1 else "") + (f"; resumed after round {done}" if done else "")
                    + ("; pauses at this call's budget for the next call" if pauses else "") + ")")
            if pauses:
                stop = ("later", f"budget: the group pauses at this call's budget ({remaining:.0f} s left)")
                break
            remaining -= group_secs
        if stop is not None:
            log(stop[1])
        for p in todo:
            line = f"beyond the budget: {_run_line(p)}"
            if rate is not None:
                secs = rate * rounds * work(p)
                total += secs
                line += (f"  (~{secs:.0f} s at {1 / rate:.0f} images/s; {total:.0f} s in all up to here; "
                         + (f"over --budget-seconds {budget_seconds:g} with the x{safety} safety margin"
                            if stop[0] == "budget" else "starts in a later call") + ")")
            log(line)
        out["not_started"] = [str(p["path"]) for p in all_todo]
        return out
    if rate_files is not None:
        log(f"estimate: {1 / rate:.0f} images/s from earlier results with the same engine settings")
    elif rate is not None:
        log(f"estimate: {images_per_second:.0f} images/s (hint) until a group is measured")
    parts = official_partition(data.train_labels)
    # what the results were trained on, in their config (the sizes alone do not tell a copy carried in parts, or
    # random pixels with the real labels, from the real images)
    fingerprint = data_fingerprint(data, parts)  # also each group checkpoint's "data" (train_runs computed it again)
    trained_on = {k: v for k, v in fingerprint.items() if k in ("sha256", "split_sha256")}

    while todo:
        remaining = deadline - time.time()
        if remaining <= 0:  # without a rate yet, a group would still start (and train a round) to measure one
            log("budget: no time left in this call; stopping")
            break
        k, done, rate, stop = plan_next(todo, rate=rate, remaining=remaining, paused=paused_group())
        if stop is not None:
            log(stop[1])
            break
        group = todo[:k]
        names = _run_names(group)
        group_work = sum(work(p) for p in group)
        est = f" (estimate {rate * (rounds - done) * group_work:.0f} s)" if rate is not None else ""
        log(f"training {len(group)} run(s) stacked{est}: {', '.join(names)}"
            + (f", resuming after round {done}" if done else ""))
        runs = [{"algorithm": p["cell"].make_algorithm(), "epochs": p["cell"].epochs, "seed": p["seed"], "name": name}
                for p, name in zip(group, names)]
        started = time.time()
        state = {"reason": None, "paused": False}

        marks = [0.0]

        def check(t, records, elapsed, group_work=group_work, marks=marks, state=state):  # this group's, bound
            # round 0 carries the warm-up (CUDA-graph captures; cuDNN search if on): the
            # projection uses the later rounds once there are any
            marks.append(elapsed)
            durations = np.diff(marks)
            if (t + 1) % PROGRESS_EVERY == 0:  # a line in the log now and then: a group runs for minutes
                acc = ", ".join(f"{r.test_accuracy:.3f}" for r in records)
                log(f"  round {t + 1}/{rounds} after {elapsed:.0f} s in this call; test accuracy {acc}")
            if t + 1 >= rounds:
                return True
            now = time.time()
            if len(durations) == 1:  # the first round of this call (round 0, or the first after a resume)
                per = durations[0]
                if now + per * (rounds - t - 1) / 3 <= deadline + later and now + per <= deadline:
                    return True  # even at a third of the warm-up round's time it may fit: measure more
            else:
                per = float(np.mean(durations[1:]))
            projected = now + per * (rounds - t - 1) * (safety if t < 3 else 1.0)
            if projected > deadline + later:
                state["reason"] = (f"after round {t} ({elapsed:.1f} s): projected finish "
                                   f"{projected - deadline - later:.0f} s past the budget")
                state["rate"] = per / group_work
                return False
            if later and now + per > deadline:  # the next round would end past this call: pause here
                state["paused"], state["round_done"] = True, t + 1
                state["reason"] = f"after round {t} ({elapsed:.1f} s in this call)"
                return False
            return True

        ckpt = ckpt_path(names)  # resumes an interrupted or paused group
        use_ckpt = checkpoint_every > 0 or later > 0 or ckpt.is_file()
        try:
            with cudnn_benchmark(cudnn_bench):
                ck_config = {**group_config(group), "data": fingerprint}
                res = train_runs(runs, data, parts, rounds=rounds, width=width, device=device, precision=precision,
                                 path=path, cuda_graph=cuda_graph, conv=conv, callback=check,
                                 checkpoint=ckpt if use_ckpt else None, checkpoint_every=checkpoint_every,
                                 checkpoint_config=ck_config, save_on_stop=later > 0,
                                 resume_from=paused_read.pop(ckpt, None) if use_ckpt else None,
                                 call_info={"git_commit": git_start[0], "git_dirty": git_start[1],
                                            "command": _command(), "started_utc": _utc(start)})
        except FloatingPointError as exc:
            raise FloatingPointError(f"table1 cells {names}: {exc} (no result written for this group)") from exc
        finished = time.time()
        if res["stopped"] and state["paused"]:  # continues in the next call, from the checkpoint
            out["paused"] += names
            log(f"paused {', '.join(names)} {state['reason']}: checkpoint {ckpt.name} "
                f"(round {state['round_done']} of {rounds}); the next call resumes it")
            break
        if res["stopped"]:  # a polite stop by the budget writes nothing (a crash leaves ckpt to resume from)
            ckpt.unlink(missing_ok=True)
            rate = state["rate"]
            out["aborted"] += names
            log(f"stopped {', '.join(names)} {state['reason']}; nothing written")
            if len(group) == 1:
                break
            continue
        trained_rounds = rounds - res.get("resumed_from", 0)
        if trained_rounds > 0:  # a checkpoint of a finished group (killed before its results were written)
            rate = res["seconds"] / (trained_rounds * group_work)  # trains nothing and measures no rate
            log(f"measured {1 / rate:.0f} images/s (training + evaluation, {len(group)} run(s) stacked)")
        group_seconds = res["seconds"] + res.get("seconds_before", 0.0)
        # images/s of the work really done: the drawn epochs of a U(2,5) run differ from round_work's
        # expected 3.5 (seed 0: 1.1% fewer images), and a rate must count what was trained
        sizes = [len(c) for c in parts]
        done = [trained_images(h, sizes, PAPER["batch_size"]) for h in res["histories"]]
        work_done = (sum(done) + len(done) * rounds * n_test / 3.0 if all(d is not None for d in done)
                     else rounds * group_work)
        per_run_round = group_seconds / (rounds * len(group))
        # wall_time_s: this call's share; a group resumed from a checkpoint also says when it first
        # started and how many seconds of training earlier calls did (not the time in between)
        prov = make_provenance(started, finished, device, git_start=git_start)
        if res.get("resumed_from"):
            earlier = list(res.get("calls_before", []))
            prov["resumed"] = {"from_round": int(res["resumed_from"]), "first_started_utc": _utc(res["started"]),
                               "training_seconds_before": float(res.get("seconds_before", 0.0)),
                               "earlier_calls": earlier}
            # CUDA graphs replay the eager kernels, so a group may switch (gpu_run.sh falls back to eager when
            # the graphs fail): the result says so, and its rate mixes both (_previous_rate leaves it out)
            if any("cuda_graph" in c and bool(c["cuda_graph"]) != bool(cuda_graph) for c in earlier):
                prov["resumed"]["cuda_graph_changed"] = True
                log(f"note: {', '.join(names)} trained rounds with CUDA graphs {'off' if cuda_graph else 'on'} in "
                    "an earlier call (provenance.resumed.earlier_calls)")
        for p, hist in zip(group, res["histories"]):
            cell = p["cell"]
            config = {"problem": "cifar10-vgg11", "table1_cell": cell.config(), "cell_id": cell.id, "seed": p["seed"],
                      "data": {"source": data_source, "num_train": int(len(data.train_labels)),
                               "num_test": int(len(data.test_labels)), "num_clients": PAPER["num_clients"],
                               "partition_alpha": PAPER["partition_alpha"],
                               "partition_seed": PAPER["partition_seed"], **trained_on},
                      "rounds": rounds, "batch_size": PAPER["batch_size"], "weight_decay": PAPER["weight_decay"],
                      "lr_decay": "step", "engine": {**engine_key, "stacked_runs": len(group)}}
            last = hist[-1]
            summary = {"final_test_accuracy": last["test_accuracy"], "final_train_loss": last["train_loss"],
                       "best_test_accuracy": max(h["test_accuracy"] for h in hist),
                       "rounds": len(hist), "group_seconds": group_seconds, "runs_in_group": len(group),
                       "seconds_per_run": group_seconds / len(group), "seconds_per_run_round": per_run_round,
                       "images_per_second": work_done / group_seconds}  # over all calls of the group
            if res.get("resumed_from"):
                summary["resumed_after_round"] = int(res["resumed_from"])
            write_result(p["path"], make_result(config, hist, prov, summary=summary))
            out["written"].append(str(p["path"]))
            log(f"wrote {p['path']} (final test accuracy {last['test_accuracy']:.4f})")
        if res.get("resumed_from"):
            log(f"resumed {', '.join(names)} from round {res['resumed_from']} ({ckpt.name})")
        ckpt.unlink(missing_ok=True)
        todo = todo[len(group):]
    # a run stopped with a larger group may have been written by a smaller one afterwards: one count each
    written = {Path(w).stem for w in out["written"]}
    out["aborted"] = [n for n in dict.fromkeys(out["aborted"]) if n not in written and n not in out["paused"]]
    out["not_started"] = [str(p["path"]) for p in todo
                          if str(p["path"]) not in out["written"] and p["path"].stem not in out["paused"]
                          and p["path"].stem not in out["aborted"]]
    return out


# ============================================================================ the chapter's table
def load_table1_results(results_dir) -> Dict[str, Dict[int, dict]]:
    """``{cell_id: {seed: result}}`` of the result files ``{cell_id}__seed{s}.json`` present.

    Unreadable files raise ``ValueError``. A file that is not the run its name says (its
    ``config.cell_id`` / ``config.seed``: a FedNova result copied to FedAvg's name, ``seed00``
    next to ``seed0``, a ``__seed0__tag`` repeat in this folder) or not a run of its cell
    in the official setup (:func:`cell_setup_problems`: another lr, μ, batch size, weight
    decay, lr schedule, number of clients or partition) raises :class:`OtherSetupError`
    naming it, instead of entering Table 1. Other sizes (width, rounds, training images,
    precision) are allowed: :func:`table1_summary` lists them as deviations. A ``results_dir`` that is not a
    folder gives ``{}``."""
    from ..results import read_result

    out: Dict[str, Dict[int, dict]] = {}
    folder = Path(results_dir)
    if not folder.is_dir():
        return out
    for cid in CELL_IDS:
        for f in sorted(folder.glob(f"{cid}__seed*.json")):
            doc = read_result(f)
            problems = _name_problems(doc, f.name) or cell_setup_problems(doc, history=False)
            if problems:
                raise OtherSetupError(f"{f}: not a Table 1 result of this setup: {', '.join(problems)}; move it "
                                      "out of the Table 1 folder")
            out.setdefault(cid, {})[int(doc["config"]["seed"])] = doc
    return out


def run_seconds(result: dict) -> Optional[float]:
    """Device time of one Table 1 run: its share of its stacked group's wall time
    (``summary.seconds_per_run``, else provenance wall time / runs stacked); ``None`` when ``result`` (one
    result document) records neither."""
    if not isinstance(result, Mapping):  # else "'NoneType' object has no attribute 'get'"
        raise ValueError(f"result must be a result document (a mapping, e.g. fedlib.results.read_result(path)), "
                         f"got {type(result).__name__}")
    summary = result.get("summary") or {}
    if summary.get("seconds_per_run") is not None:
        return float(summary["seconds_per_run"])
    wall = (result.get("provenance") or {}).get("wall_time_s")
    runs = ((result.get("config") or {}).get("engine") or {}).get("stacked_runs") or 1
    return None if wall is None else float(wall) / int(runs)


def table1_summary(results: Dict[str, Dict[int, dict]]) -> List[dict]:
    """One row per cell: final test accuracy (%) mean ± std over the seeds with results
    (``None`` when not yet run), the mean best accuracy over the rounds, number of seeds,
    device time per run and the devices, paper and re-run values."""
    rows = []
    for c in CELLS:
        done = [r for r in results.get(c.id, {}).values()
                if r.get("history") and r["history"][-1]["test_accuracy"] is not None]
        accs = 100 * np.array([r["history"][-1]["test_accuracy"] for r in done], dtype=float)
        best = 100 * np.array([max(h["test_accuracy"] for h in r["history"]) for r in done], dtype=float)
        secs = [t for t in (run_seconds(r) for r in done) if t is not None]
        devices = sorted({str((r.get("provenance") or {}).get("device", "?")) for r in done})
        paper = PAPER_VALUES.get(c.id, {})
        rerun = RERUN_VALUES.get(c.id, {})
        deviations = set()
        for r in results.get(c.id, {}).values():
            cfg = r.get("config", {})
            eng, data = cfg.get("engine", {}), cfg.get("data", {})
            if eng.get("width", 1.0) != 1.0:
                deviations.add(f"width {eng.get('width')}")
            if cfg.get("rounds", PAPER["rounds"]) != PAPER["rounds"]:
                deviations.add(f"{cfg.get('rounds')} rounds")
            if data.get("num_train", PAPER["num_train"]) != PAPER["num_train"]:
                deviations.add(f"{data.get('num_train')} training images")
            if eng.get("precision", "fp32") != "fp32":  # the official runs are float32
                deviations.add(f"{eng.get('precision')} autocast")
        rows.append({"cell": c.id, "row": c.row, "setting": EPOCH_SETTINGS[c.epochs], "method": c.method,
                     "n_seeds": int(accs.size), "mean": float(accs.mean()) if accs.size else None,
                     "std": float(accs.std(ddof=1)) if accs.size > 1 else (0.0 if accs.size else None),
                     "best": float(best.mean()) if best.size else None,
                     "seconds_per_run": float(np.mean(secs)) if secs else None, "devices": devices,
                     "paper": paper.get("value"), "paper_std": paper.get("std"),
                     "paper_status": paper.get("status"), "rerun": rerun.get("value"),
                     "rerun_source": rerun.get("source"), "deviations": sorted(deviations)})
    return rows


#: Column headers of :func:`format_summary_rows`.
SUMMARY_HEADERS = ["row", "E", "method", "this repository (final)", "best round", "seeds", "minutes per run",
                   "paper", "independent re-run"]


def format_final(row: dict, omit_deviations: Sequence[str] = ()) -> str:
    """A :func:`table1_summary` row's final accuracy as text: ``not yet run``, the value of a
    single seed (no ``± 0.00``: one seed has no spread to show), or ``mean ± std``; with the
    ways the results differ from the paper's setup, if any, except ``omit_deviations`` (those
    that a note under the table states once, :func:`shared_deviations`)."""
    ours = ("not yet run" if row["mean"] is None else f"{row['mean']:.2f}" if row["n_seeds"] == 1
            else f"{row['mean']:.2f} ± {row['std']:.2f}")
    deviations = [d for d in row.get("deviations") or () if d not in omit_deviations]
    if deviations:
        ours += f" (not the paper's setup: {', '.join(deviations)})"
    return ours


def shared_deviations(rows: List[dict]) -> List[str]:
    """The ways in which every :func:`table1_summary` row with results differs from the paper's
    setup (e.g. ``["bf16 autocast"]`` when all runs used it): said once in a note under the table
    instead of in every row (``format_summary_rows(rows, omit_deviations=...)``); ``[]`` when no
    row has results."""
    done = [set(r.get("deviations") or ()) for r in rows if r["n_seeds"]]
    return sorted(set.intersection(*done)) if done else []


def format_summary_rows(rows: List[dict], omit_deviations: Sequence[str] = ()) -> List[list]:
    """Rows of strings for a markdown table (:data:`SUMMARY_HEADERS`); missing results are
    ``not yet run``; the time column names the device(s). ``omit_deviations``: as in
    :func:`format_final`. ``rows`` are :func:`table1_summary`'s."""
    out = []
    for r in rows:
        ours = format_final(r, omit_deviations)
        if r["paper"] is None:
            paper = "[unconfirmed]" if r["paper_status"] == "unconfirmed" else "—"
        else:
            paper = f"{r['paper']:.2f}" + (f" ± {r['paper_std']:.2f}" if r["paper_std"] else "")
            if r["paper_status"] == "unconfirmed":
                paper = f"≈{r['paper']:.1f} [unconfirmed]"
        rerun = "—" if r["rerun"] is None else f"{r['rerun']:.2f}" + (" (E∈{2,3,4})" if "2,3,4" in r["rerun_source"] else "")
        best = "—" if r.get("best") is None else f"{r['best']:.2f}"
        minutes = ("—" if r.get("seconds_per_run") is None
                   else f"{r['seconds_per_run'] / 60:.1f} ({', '.join(r.get('devices') or [])})")
        out.append([r["row"], r["setting"], r["method"], ours, best, str(r["n_seeds"]), minutes, paper, rerun])
    return out


def load_benchmarks(folder, prefix: str = "cifar10") -> List[dict]:
    """The benchmark result files ``folder/<prefix>*.json`` (``bench cifar10 --json``) as
    table rows: device, width, precision, CUDA graph, runs stacked, images/s of the
    sequential loop and of the engine, their ratio, torch version, commit, file name, and
    ``variants`` (``--compare``: each variant's name, images/s and gain over the engine, or
    ``error`` for one that failed). A ``folder`` that does not exist is a ``FileNotFoundError`` naming it (a
    mistyped path read as no benchmark)."""
    from ..results import read_result

    if not Path(folder).is_dir():
        raise FileNotFoundError(f"{folder}: no such folder (relative to the working folder {os.getcwd()})")
    rows = []
    for f in sorted(Path(folder).glob(f"{prefix}*.json")):
        doc = read_result(f)
        if doc.get("kind") != "bench":
            continue
        cfg, s, prov = doc["config"], doc["summary"], doc["provenance"]
        rows.append({"file": f.name, "device": prov.get("device"), "width": cfg.get("width"),
                     "precision": cfg.get("precision"), "cuda_graph": bool(cfg.get("cuda_graph")),
                     "runs": int(cfg.get("runs", 1)), "steps": cfg.get("steps"),
                     "sequential_images_per_s": s["sequential_images_per_s"],
                     "engine_images_per_s": s["engine_images_per_s"], "ratio": s["ratio"],
                     "torch": prov.get("torch"), "commit": str(prov.get("git_commit", ""))[:10],
                     "variants": [{"variant": v["variant"], "engine_images_per_s": v.get("engine_images_per_s"),
                                   "gain": v.get("gain"), "error": v.get("error")} for v in s.get("variants", ())]})
    return rows


#: Header of :func:`format_benchmark_rows` (one entry per field of a :func:`load_benchmarks` row);
#: chapter 5 lays the table out transposed (:func:`fedlib.report.transposed_markdown_table`), one
#: column per benchmark file, since eleven columns do not fit the page.
BENCHMARK_HEADERS = ["device", "width", "precision", "CUDA graph", "runs stacked", "sequential loop (images/s)",
                     "engine (images/s)", "ratio", "variants, same run (gain over the engine)", "torch", "commit",
                     "file"]


def format_benchmark_rows(rows: List[dict]) -> List[list]:
    """Rows of strings for a markdown table (:data:`BENCHMARK_HEADERS`) of :func:`load_benchmarks`
    rows: rates with thousands separators, the ratio and each ``--compare`` variant's gain as
    ``x.xx×`` (``failed`` for a variant that failed, ``—`` for none).

    >>> row = {"device": "cpu", "width": 0.03, "precision": "fp32", "cuda_graph": False, "runs": 1,
    ...        "sequential_images_per_s": 4897.2, "engine_images_per_s": 9915.0, "ratio": 2.0246,
    ...        "variants": [{"variant": "eager", "gain": 0.9, "error": None}], "torch": "2.4.0",
    ...        "commit": "bf44de20b6", "file": "cifar10_cpu.json"}
    >>> for name, cell in zip(BENCHMARK_HEADERS, format_benchmark_rows([row])[0]):
    ...     print(f"{name}: {cell}")
    device: cpu
    width: 0.03
    precision: fp32
    CUDA graph: no
    runs stacked: 1
    sequential loop (images/s): 4,897
    engine (images/s): 9,915
    ratio: 2.02×
    variants, same run (gain over the engine): eager 0.900×
    torch: 2.4.0
    commit: bf44de20b6
    file: cifar10_cpu.json
    """
    return [[str(b["device"]), str(b["width"]), str(b["precision"]), "yes" if b["cuda_graph"] else "no", str(b["runs"]),
             f"{b['sequential_images_per_s']:,.0f}", f"{b['engine_images_per_s']:,.0f}", f"{b['ratio']:.2f}×",
             ", ".join(f"{v['variant']} " + ("failed" if v["error"] else f"{v['gain']:.3f}×")
                       for v in b["variants"]) or "—",
             str(b["torch"]), str(b["commit"]), str(b["file"])] for b in rows]


__all__ += ["BENCHMARK_HEADERS", "format_benchmark_rows"]


__all__ += ["data_fingerprint", "run_setup", "format_summary_rows", "resolve_device", "run_seconds", "SUMMARY_HEADERS", "load_benchmarks",
            "OtherSetupError", "cell_setup_problems", "format_final", "shared_deviations"]


# ============================================================================ benchmark
def _round_steps(sizes, batch_size: int, epochs: int, steps: Optional[int]) -> np.ndarray:
    """tau_i = E ceil(n_i / B) of the split, scaled so the longest client does ``steps``
    (the shrinking-prefix shape of the round kept); ``None`` = the full round."""
    from ..schedules import steps_per_epoch

    tau = epochs * steps_per_epoch(np.asarray(sizes), batch_size)
    if steps is None:
        return tau.astype(np.int64)
    return np.maximum(1, np.round(tau * (steps / tau.max()))).astype(np.int64)


#: Precisions of the benchmark's engine (those of :class:`~fedlib.engines.stacked.StackedEngine`).
PRECISION_CHOICES = ("fp32", "bf16")
#: Convolution implementations of the grouped path (:data:`fedlib.engines.grouped.CONV_IMPLEMENTATIONS`).
CONV_CHOICES = ("cudnn", "gemm")

#: What a ``bench cifar10 --compare`` variant may change in the engine (one ``+``-joined
#: variant may change several): ``cudnn-benchmark`` (cuDNN's algorithm search on),
#: ``channels-first`` (grouped convolutions on NCHW tensors instead of channels-last),
#: ``eager`` (no CUDA graphs), ``cuda-graph`` (CUDA graphs on), ``runs=N`` (N runs stacked),
#: ``precision=fp32|bf16``, ``conv=gemm|cudnn`` (:mod:`fedlib.engines.im2col`'s batched matrix
#: products instead of cuDNN's grouped convolutions); ``base`` alone is the base engine again
#: (a fresh one, timed in its turn): the spread of the comparison itself.
BENCH_VARIANTS = ("base", "cudnn-benchmark", "channels-first", "eager", "cuda-graph", "runs=N", "precision=P",
                  "conv=C")


def parse_bench_variant(text: str, *, runs: int, precision: str, cuda_graph: bool, path: str, cudnn_bench: bool,
                        cuda: bool, conv: str = "cudnn") -> dict:
    """The engine settings of one ``bench cifar10 --compare`` variant, relative to the base
    engine's: a dict with the keys ``runs``, ``precision``, ``cuda_graph``, ``channels_last``,
    ``cudnn_benchmark`` and ``conv``. ``text`` joins one or more of :data:`BENCH_VARIANTS` with
    ``+`` (``"cudnn-benchmark+runs=8"``). Raises ``ValueError`` for an unknown token, two
    tokens that change the same setting, or one that changes nothing (``eager`` of an eager base,
    ``runs=4`` with ``runs=4``...) — a variant is there to be measured against the base —, and for a base setting
    that :func:`bench_cifar10` refuses (``runs`` an integer >= 1; ``precision``, ``path``, ``conv`` one of its
    choices).

    >>> parse_bench_variant("cudnn-benchmark+runs=8", runs=4, precision="bf16", cuda_graph=True,
    ...                     path="grouped", cudnn_bench=False, cuda=True)["runs"]
    8
    """
    # "no" is truthy: bool("no") switched the base engine's CUDA graphs (or cuDNN's search) on
    cuda_graph, cudnn_bench, cuda = (check_flag("cuda_graph", cuda_graph), check_flag("cudnn_bench", cudnn_bench),
                                     check_flag("cuda", cuda))
    # the base engine's settings, checked as bench_cifar10 checks them: runs=nan came back in the settings, and
    # "runs=4" of a base runs=4.0 was "already the base engine's setting"
    runs = check_int("runs", runs, minimum=1)
    check_choice("precision", precision, PRECISION_CHOICES)
    from ..engines.stacked import PATHS

    check_choice("path", path, PATHS)
    check_choice("conv", conv, CONV_CHOICES)
    settings = {"runs": runs, "precision": precision, "cuda_graph": cuda_graph, "channels_last": True,
                "cudnn_benchmark": cudnn_bench, "conv": conv}
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"a variant must be a non-empty string, got {text!r}")
    if text == "base":
        return settings
    changed = set()
    for token in text.split("+"):
        key = token.split("=", 1)[0]
        if token == "cudnn-benchmark":
            change = ("cudnn_benchmark", True)
        elif token == "channels-first":
            if path != "grouped":
                raise ValueError(f"variant {text!r}: channels-first is a setting of the grouped path, not {path!r}")
            change = ("channels_last", False)
        elif token in ("eager", "cuda-graph"):
            if token == "cuda-graph" and not cuda:
                raise ValueError(f"variant {text!r}: CUDA graphs need a CUDA device")
            change = ("cuda_graph", token == "cuda-graph")
        elif key == "runs":
            value = token[5:]
            if not value.isdecimal() or int(value) < 1:  # isdigit() is true of '²', which int() refuses
                raise ValueError(f"variant {text!r}: runs=N needs a whole number N >= 1, got {value!r}")
            change = ("runs", int(value))
        elif key == "conv":
            if path != "grouped":
                raise ValueError(f"variant {text!r}: conv is a setting of the grouped path, not {path!r}")
            if token[5:] not in CONV_CHOICES:
                raise ValueError(f"variant {text!r}: conv must be one of {CONV_CHOICES}, got {token[5:]!r}")
            change = ("conv", token[5:])
        elif key == "precision":
            if token[10:] not in PRECISION_CHOICES:
                raise ValueError(f"variant {text!r}: precision must be one of {PRECISION_CHOICES}, got {token[10:]!r}")
            change = ("precision", token[10:])
        else:
            raise ValueError(f"variant {text!r}: unknown {token!r}; choose from {', '.join(BENCH_VARIANTS)} "
                             "(all but base may be joined with '+')")
        name, value = change
        if name in changed:
            raise ValueError(f"variant {text!r}: changes {name} twice")
        changed.add(name)
        if settings[name] == value:
            raise ValueError(f"variant {text!r}: {token!r} is already the base engine's setting")
        settings[name] = value
    if settings["conv"] == "gemm" and not settings["channels_last"]:
        raise ValueError(f"variant {text!r}: conv=gemm reads the weights in their channels-last order; "
                         "it cannot be combined with channels-first")
    return settings


def parse_bench_variants(compare: Sequence[str], **base) -> List[tuple]:
    """``[(variant, settings), ...]`` for a list of ``--compare`` variants
    (:func:`parse_bench_variant` with the base engine's settings ``base``); ``ValueError`` for a
    string instead of a list or a variant listed twice."""
    if isinstance(compare, str):
        raise ValueError(f"compare must be a list of variants, got the string {compare!r} (use [{compare!r}])")
    compare = list(compare)
    if len(set(compare)) != len(compare):
        raise ValueError(f"compare lists a variant twice: {compare}")
    return [(v, parse_bench_variant(v, **base)) for v in compare]


def _train_only(data):
    """``data``'s training images and labels alone (an engine built on it does not evaluate)."""
    from types import SimpleNamespace

    return SimpleNamespace(train_images=data.train_images, train_labels=data.train_labels)


def bench_cifar10(data, *, width: float = 1.0, steps: Optional[int] = 20, device: Optional[str] = None,
                  precision: str = "fp32", cuda_graph: bool = False, path: str = "grouped", repeat: int = 2,
                  epochs: int = 2, batch_size: int = PAPER["batch_size"], seed: int = 0, runs: int = 1,
                  profile: bool = False, cudnn_bench: bool = False, conv: str = "cudnn", compare: Sequence[str] = (),
                  progress: Optional[Callable[[str], Any]] = None,
                  on_partial: Optional[Callable[[dict], Any]] = None) -> dict:
    """Images/s of the sequential per-client eager loop and of the stacked engine on one round.

    The round: official Dir(0.1) split of ``data``'s labels over 16 clients, ``E = 2``,
    :math:`\\tau_i = E\\lceil n_i/32\\rceil` scaled so the longest client takes ``steps``
    local steps (``None``: the whole round). *Sequential*: one ``vgg11(width)``, one
    ``torch.optim.SGD(lr=0.05, weight_decay=1e-4)``, clients one after another, each
    starting from the global weights, batches of 32 gathered, cropped/flipped and
    normalised on the device (dropout on). *Engine*: :class:`~fedlib.engines.stacked.StackedEngine` (``path``,
    ``precision``, ``cuda_graph``) training the same 16 clients, FedAvg with local SGD,
    its time is the round's local training (host planning and loading included; aggregation
    and evaluation excluded: the sequential loop does neither); with ``runs = R > 1``, R such runs (seeds ``seed .. seed+R-1``)
    stacked in one engine as Table 1 does (R x 16 models; the sequential loop's rate does
    not depend on R: it trains one model at a time). Each side runs one warm-up round,
    then ``repeat`` timed rounds; the median is reported. Real images counted (last
    partial batch included); ``ratio`` = engine images/s over sequential images/s.
    ``profile=True`` adds one more engine round under :mod:`torch.profiler` (not timed)
    and returns its operator table (top 30 by device time, or CPU time on a CPU) as
    ``out["profile"]``: where the step's time goes, for the next optimisation.
    ``cudnn_bench`` times both sides with :func:`cudnn_benchmark` on; ``conv`` is the engine's
    convolution implementation (``"cudnn"`` or ``"gemm"``, :mod:`fedlib.engines.im2col`).

    ``compare`` lists speed candidates (:func:`parse_bench_variant`: ``"cudnn-benchmark"``,
    ``"channels-first"``, ``"runs=8"``, ``"cudnn-benchmark+runs=8"``, ``"base"``...), each timed after
    the base engine, in the same process on the same round, as a fresh engine (one warm-up
    round — CUDA graph captures, cuDNN's search — then ``repeat`` timed rounds, median).
    ``out["results"]["variants"]`` holds one entry per variant: its settings,
    ``engine_seconds``, ``engine_images_per_s`` and ``gain`` = its images/s over the base
    engine's (images/s, not seconds: ``runs=N`` changes the work of a round). This is how a
    change is kept or dropped: measured against the baseline of the same call, with
    ``"base"`` (the base engine once more) showing how far a gain of 1 spreads in that call.
    A variant that raises (out of memory, a kernel the device lacks...) is recorded with its
    ``error`` instead of rates, and the next one runs. ``on_partial(out)``, when given and there are variants, receives what is measured so far
    (``out["results"]["partial"] = True``) after the base engine and after each variant but
    the last: a caller that writes it keeps the finished measurements of a call cut short
    (a device call's time limit).

    ``epochs`` (:math:`E`) is a whole number >= 1 and ``batch_size`` (:math:`B`) an integer >= 1 (defaults 2 and 32,
    the values above); ``steps`` a whole number >= 1 or ``None``. ``progress``, if given, is called with a line after
    every timed or warm-up round and failed variant.
    """
    runs = check_int("runs", runs, minimum=1)  # np.int64(2) too, as parse_bench_variant takes it; a bool refused
    repeat = check_int("repeat", repeat, minimum=1)  # 0: only the warm-up, a median of nothing
    # "no" is truthy: profile="no" profiled a round, cudnn_bench="no" timed with cuDNN's search on
    cuda_graph, profile, cudnn_bench = (check_flag("cuda_graph", cuda_graph), check_flag("profile", profile),
                                        check_flag("cudnn_bench", cudnn_bench))
    # checked before anything is timed: steps <= 0 (or a float, a bool) timed a round of one step per client
    # in silence, and epochs 0, another path or CUDA graphs on a CPU were refused only by the engine,
    # after the sequential loop's rounds had been timed (seconds of device time)
    if steps is not None:
        steps = check_count("steps", steps, minimum=1)
    epochs = check_count("epochs", epochs, minimum=1)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    from ..engines.stacked import PATHS

    check_choice("path", path, PATHS)
    check_choice("precision", precision, PRECISION_CHOICES)
    check_choice("conv", conv, CONV_CHOICES)
    cuda = resolve_device(device).startswith("cuda")
    if cuda_graph and not cuda:
        raise ValueError(f"cuda_graph=True needs a CUDA device, got device={resolve_device(device)!r}")
    variants = parse_bench_variants(compare, runs=runs, precision=precision, cuda_graph=cuda_graph, path=path,
                                    cudnn_bench=cudnn_bench, cuda=cuda, conv=conv)
    with cudnn_benchmark(cudnn_bench):
        return _bench_cifar10(data, width=width, steps=steps, device=device, precision=precision,
                              cuda_graph=cuda_graph, path=path, repeat=repeat, epochs=epochs, batch_size=batch_size,
                              seed=seed, runs=runs, profile=profile, cudnn_bench=cudnn_bench, conv=conv,
                              variants=variants, progress=progress, on_partial=on_partial)


def _bench_cifar10(data, *, width, steps, device, precision, cuda_graph, path, repeat, epochs, batch_size, seed,
                   runs, profile, cudnn_bench, conv, variants, progress, on_partial) -> dict:
    import torch

    from ..algorithms import make_algorithm
    from ..engines.augment import crop_flip_gather, normalize, pad_images
    from ..data.cifar10 import CIFAR10_MEAN, CIFAR10_STD
    from ..engines.stacked import RunSpec, StackedEngine, _check_image_data
    from ..models import vgg11
    from ..schedules import FixedSteps, steps_per_epoch
    from ..solvers import sgd

    _check_image_data(data)  # after the arguments, before anything is timed

    device = resolve_device(device)
    dev = torch.device(device)
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
    say = progress or (lambda s: None)
    parts = official_partition(data.train_labels)
    sizes = np.array([len(c) for c in parts])
    tau = _round_steps(sizes, batch_size, epochs, steps)
    spe = steps_per_epoch(sizes, batch_size)
    images_round = 0
    for n, t, s in zip(sizes, tau, spe):
        full, rest = divmod(int(t), int(s))
        images_round += full * int(n) + min(rest * batch_size, int(n))

    config = {"benchmark": "cifar10-vgg11", "width": width, "steps": steps, "epochs": epochs,
              "batch_size": batch_size, "device": device, "precision": precision, "cuda_graph": cuda_graph,
              "path": path, "repeat": repeat, "runs": runs, "num_clients": len(parts), "num_train": int(len(data.train_labels)),
              "cudnn_benchmark": bool(cudnn_bench), "conv": conv, "compare": [name for name, _ in variants],
              "client_sizes": sizes.tolist(), "local_steps": tau.tolist(),
              "threads": torch.get_num_threads()}

    # --------------------------------------------------------------- sequential eager loop
    model = vgg11(width=width, seed=seed).to(dev)
    if dev.type == "cuda":
        model = model.to(memory_format=torch.channels_last)
    global_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    opt = torch.optim.SGD(model.parameters(), lr=0.05, weight_decay=1e-4)
    padded = pad_images(torch.as_tensor(data.train_images).to(dev), 4)
    labels = torch.as_tensor(data.train_labels).to(dev, torch.int64)
    mean = torch.tensor(CIFAR10_MEAN, device=dev)
    std = torch.tensor(CIFAR10_STD, device=dev)
    client_idx = [torch.as_tensor(c, device=dev) for c in parts]
    from ..rng import seed_sequence, torch_generator

    gen = torch_generator(seed, "batches", device=dev)
    autocast = (lambda: torch.autocast(dev.type, dtype=torch.bfloat16)) if precision == "bf16" else None

    def sequential_round():
        model.train()
        for i, idx in enumerate(client_idx):
            model.load_state_dict(global_state)
            n = idx.numel()
            perm = torch.randperm(n, generator=gen, device=dev)
            for k in range(int(tau[i])):
                b = k % int(spe[i])
                sel = idx[perm[b * batch_size:(b + 1) * batch_size]]
                m = sel.numel()
                dy = torch.randint(0, 9, (m,), generator=gen, device=dev)
                dx = torch.randint(0, 9, (m,), generator=gen, device=dev)
                fl = torch.randint(0, 2, (m,), generator=gen, device=dev)
                x = crop_flip_gather(padded, sel, dy, dx, fl, (32, 32))
                x = normalize(x, mean, std).permute(0, 3, 1, 2)
                if autocast is not None:
                    with autocast():
                        loss = torch.nn.functional.cross_entropy(model(x), labels[sel])
                else:
                    loss = torch.nn.functional.cross_entropy(model(x), labels[sel])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
        sync()

    seq_times = []
    # the loop's dropout layers draw from torch's global RNG: a forked copy, seeded from the run's stream,
    # so the caller's global state is left as it was and the loop is the same every time
    with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []):
        torch.manual_seed(int(seed_sequence(seed, "dropout").generate_state(1)[0]))
        for r in range(repeat + 1):
            sync()
            t0 = time.perf_counter()
            sequential_round()
            seq_times.append(time.perf_counter() - t0)
            say(f"sequential round {r}: {seq_times[-1]:.2f} s" + (" (warm-up)" if r == 0 else ""))
    model = opt = None  # free the sequential model before the engine allocates

    # --------------------------------------------------------------- the engine
    alg = make_algorithm("fedavg", sgd(0.05, weight_decay=1e-4))

    def make_engine(extra_rounds, *, runs=runs, precision=precision, cuda_graph=cuda_graph, channels_last=True,
                    conv=conv):
        specs = [RunSpec(alg, parts, FixedSteps(tau), seed=seed + r, params=vgg11(width=width, seed=seed + r),
                         name=f"bench{r}") for r in range(runs)]
        return StackedEngine(vgg11(width=width, seed=seed), _train_only(data), specs, rounds=repeat + 1 + extra_rounds,
                             path=path, device=device, precision=precision, cuda_graph=cuda_graph,
                             batch_size=batch_size, channels_last=channels_last, conv=conv)

    def time_engine(engine, label):
        times = []
        for r in range(repeat + 1):
            engine.run_round()
            times.append(engine.last_timing.train_seconds)
            say(f"{label} round {r}: {times[-1]:.2f} s" + (" (warm-up)" if r == 0 else ""))
        return times

    engine = make_engine(int(profile))
    eng_times = time_engine(engine, "engine")
    profile_table = None
    if profile:
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as torch_profile

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
        with torch_profile(activities=activities) as prof:
            engine.run_round()
        sort = "self_cuda_time_total" if dev.type == "cuda" else "self_cpu_time_total"
        profile_table = prof.key_averages().table(sort_by=sort, row_limit=30)
        say(f"profiled one engine round ({engine.last_timing.train_seconds:.2f} s under the profiler)")
    seq = float(np.median(seq_times[1:]))
    eng = float(np.median(eng_times[1:]))
    results = {"sequential_images_per_s": images_round / seq, "engine_images_per_s": runs * images_round / eng,
               "ratio": runs * seq / eng, "sequential_seconds": seq, "engine_seconds": eng, "runs_stacked": runs,
               "images_per_round": int(images_round), "max_local_steps": int(tau.max()),
               "sum_local_steps": int(tau.sum()), "prefix_efficiency": float(tau.sum() / (len(tau) * tau.max()))}
    if variants:
        results["variants"] = []
    for name, settings in variants:
        if on_partial is not None:
            on_partial({"config": dict(config), "results": {**results, "variants": list(results["variants"]),
                                                            "partial": True}})
        engine = None  # free the previous engine (and its CUDA graphs) before the next allocates
        gc.collect()
        if dev.type == "cuda":
            torch.cuda.empty_cache()
        try:
            with cudnn_benchmark(settings["cudnn_benchmark"]):
                other = make_engine(0, runs=settings["runs"], precision=settings["precision"],
                                    cuda_graph=settings["cuda_graph"], channels_last=settings["channels_last"],
                                    conv=settings["conv"])
                secs = float(np.median(time_engine(other, f"engine, {name}")[1:]))
        except Exception as exc:  # noqa: BLE001 — one failed candidate must not cost the others' device time
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)  # a device-side error surfaces here rather than in the next variant
            say(f"engine, {name}: failed: {type(exc).__name__}: {exc}")
            results["variants"].append({"variant": name, "settings": settings,
                                        "error": f"{type(exc).__name__}: {exc}"[:500]})
            continue
        finally:
            other = None
        rate = settings["runs"] * images_round / secs
        results["variants"].append({"variant": name, "settings": settings, "engine_seconds": secs,
                                    "engine_images_per_s": rate, "gain": rate / results["engine_images_per_s"]})
    out = {"config": config, "results": results}
    if profile_table is not None:
        out["profile"] = profile_table
    return out


def format_bench(results: dict) -> str:
    """:func:`bench_cifar10`'s result as the command line prints it: images per second of the
    sequential per-client loop and of the stacked engine, their ratio, and one line per
    ``--compare`` variant (its rate and gain over the base engine, or why it failed). ``results`` is the
    ``"results"`` entry of its return."""
    text = (f"sequential per-client loop: {results['sequential_images_per_s']:10.0f} images/s\n"
            f"stacked engine:             {results['engine_images_per_s']:10.0f} images/s\n"
            f"ratio (engine / sequential): {results['ratio']:.2f}x   "
            f"({results.get('runs_stacked', 1)} run(s) stacked, "
            f"{results['images_per_round']} images per round per run, max tau {results['max_local_steps']}, "
            f"prefix efficiency {results['prefix_efficiency']:.2f})")
    variants = results.get("variants", ())
    base = next((v for v in variants if v["variant"] == "base" and "error" not in v), None)
    spread = None if base is None else abs(base["gain"] - 1.0)
    for v in variants:
        if "error" in v:
            text += f"\nvariant {v['variant']}: failed ({v['error']})"
            continue
        text += (f"\nvariant {v['variant']}: {v['engine_images_per_s']:10.0f} images/s "
                 f"({v['gain']:.3f}x the base engine, same call)")
        if spread is not None and v is not base and abs(v["gain"] - 1.0) <= spread:
            text += f" — within the base engine's own spread (±{spread:.3f}): no measured change"
    return text


# ============================================================================ chapter helpers
def demo_run(*, width: float, rounds: int, seed: int = 0, lr: float = 0.05, epochs: str = "2-5",
             algorithms: Sequence[str] = ("fedavg", "fednova"), device: str = "cpu", lr_decay: str = "constant",
             data=None) -> dict:
    """FedAvg and FedNova (local SGD, weight decay 1e-4) from the same initial model on the
    shipped sample split by the official Dir(0.1) partition, stacked in one engine.
    Returns ``{name: history}`` plus ``"seconds"`` and ``"sizes"``.

    ``algorithms`` are distinct :func:`fedlib.algorithms.make_algorithm` names (default FedAvg and FedNova);
    ``lr`` is the client learning rate (default 0.05), ``epochs`` the setting (``"2"``, or ``"2-5"`` by default),
    ``lr_decay`` ``"constant"`` (default) or ``"step"`` (:func:`train_runs`); ``width`` is VGG-11's width factor,
    ``rounds`` the rounds, ``seed`` the runs' seed (initial model and epochs drawn; default 0) and ``device``
    the torch device (default ``"cpu"``). ``data``: default the shipped sample (:func:`load_data`)."""
    from ..algorithms import make_algorithm
    from ..solvers import sgd

    algorithms = list(algorithms)
    twice = sorted({a for a in algorithms if algorithms.count(a) > 1})
    if twice:  # the histories are returned keyed by name: a repeated one would replace the other's
        raise ValueError(f"algorithms: {twice} listed twice (one history per name)")
    data = load_data(sample=True) if data is None else data
    parts = official_partition(data.train_labels)
    runs = [{"algorithm": make_algorithm(a, sgd(lr, weight_decay=PAPER["weight_decay"])), "epochs": epochs,
             "seed": seed, "name": a} for a in algorithms]
    res = train_runs(runs, data, parts, rounds=rounds, width=width, device=device, lr_decay=lr_decay)
    out = {a: h for a, h in zip(algorithms, res["histories"])}
    out["seconds"] = res["seconds"]
    out["sizes"] = [len(c) for c in parts]
    return out


def mean_curves(results: Dict[str, Dict[int, dict]], key: str = "test_accuracy") -> Dict[str, dict]:
    """Per cell with results: rounds, mean and standard deviation over seeds of ``key`` per
    round (common rounds only; a missing evaluation, ``None``, is left out of its round). The
    standard deviation is the sample one (``ddof=1``), as in :func:`table1_summary`, so that a
    curve's band at the last round is the table's ``± std``; 0 where a round has one value."""
    out = {}
    for cid, by_seed in results.items():
        hs = [r["history"] for r in by_seed.values() if r.get("history")]
        if not hs:
            continue
        n = min(len(h) for h in hs)
        vals = np.array([[np.nan if h[t][key] is None else h[t][key] for t in range(n)] for h in hs], dtype=float)
        counts = np.sum(~np.isnan(vals), axis=0)
        dev = np.where(np.isnan(vals), 0.0, vals - np.nanmean(vals, 0))
        std = np.sqrt((dev ** 2).sum(0) / np.maximum(counts - 1, 1))  # 0 where one value (dev = 0)
        out[cid] = {"round": np.arange(n), "mean": np.nanmean(vals, 0), "std": std, "n_seeds": len(hs)}
    return out


__all__ += ["demo_run", "mean_curves"]

#: The engine variants that chapter 5 checks against the per-client loop (name to StackedEngine options).
ENGINE_VARIANTS = {"grouped convolutions": {"path": "grouped"},
                   "im2col + batched matmul": {"path": "grouped", "conv": "gemm"},
                   "torch.func.vmap": {"path": "vmap"}}


def engine_against_reference(*, width: float, rounds: int, clients: int, samples_per_client: int,
                             batch_size: int, seed: int = 0, data=None,
                             variants: Optional[Mapping[str, dict]] = None) -> dict:
    r"""Chapter 5: the stacked engine against the plain per-client loop, in float64.

    Three runs stacked in each engine — FedAvg and FedNova with local momentum and weight
    decay (Table 1's momentum rows) and FedNova-VR with local SGD —, each with
    :math:`E_i^{(t)} \sim \mathcal U(2, 5)`, augmentation and dropout, on the first
    ``clients`` clients of the official split of the shipped sample (their first
    ``samples_per_client`` images), run ``r`` from ``vgg11(width, s_r)`` with run seed
    :math:`s_r` = ``run_seeds(seed, 3)[r]`` (:math:`3\,\text{seed} + r`: seed 0 runs 0, 1, 2, and no
    two chapter seeds share a run seed, where ``seed + r`` gave seeds 0 and 1 two in common). Every engine of
    ``variants`` (default :data:`ENGINE_VARIANTS`) trains the three runs for ``rounds``
    rounds; :func:`fedlib.engines.stacked.reference_run` trains each run alone, one client
    and one step after another, on the same batches, crops, flips and dropout masks.
    Returns ``{"rows": [...], "seconds": {...}}``: per (engine, run) the largest relative
    difference of any final global parameter (``max |x - x_ref| / max |x_ref|`` per tensor)
    and of the recorded :math:`\tau_\text{eff}` and weights :math:`w_i` over the rounds, and
    ``moved`` = :math:`\|x_T - x_0\| / \|x_0\|` of the reference (the runs really trained).
    ``batch_size`` is :math:`B`, of both the epochs and the batches. ``clients`` (at most the split's 16) and
    ``samples_per_client`` are integers >= 1 (a ``ValueError`` naming them otherwise; a client holding fewer images
    keeps them all).
    """
    import torch

    from ..algorithms import make_algorithm
    from ..engines.stacked import RunSpec, StackedEngine, max_relative_difference, reference_run
    from ..models import vgg11
    from ..schedules import RandomEpochs
    from ..solvers import momentum_sgd, sgd
    from . import run_seeds

    # checked before the data are read: clients=nan failed in the slice, clients=-1 silently left the last client out
    # and 1000 took the 16 there are
    clients = check_int("clients", clients, minimum=1)
    samples_per_client = check_int("samples_per_client", samples_per_client, minimum=1)
    data = load_data(sample=True) if data is None else data
    split = official_partition(data.train_labels)
    if clients > len(split):
        raise ValueError(f"clients must be at most {len(split)} (the clients of the official split), got {clients}")
    parts = [np.asarray(c)[:samples_per_client] for c in split[:clients]]
    sizes = [len(c) for c in parts]
    wd = PAPER["weight_decay"]
    algorithms = [("FedAvg, momentum", make_algorithm("fedavg", momentum_sgd(0.02, 0.9, weight_decay=wd))),
                  ("FedNova, momentum", make_algorithm("fednova", momentum_sgd(0.02, 0.9, weight_decay=wd))),
                  ("FedNova-VR, SGD", make_algorithm("fednova-vr", sgd(0.05, weight_decay=wd)))]

    seeds = run_seeds(seed, len(algorithms))

    def params(r):
        return {n: p.detach().double() for n, p in vgg11(width=width, seed=seeds[r]).named_parameters()}

    runs = [RunSpec(alg, parts, RandomEpochs(sizes, batch_size, 2, 5, seed=seeds[r]), seed=seeds[r],
                    params=params(r), name=name) for r, (name, alg) in enumerate(algorithms)]

    train = _train_only(data)
    model = vgg11(width=width, seed=seed)
    seconds = {}
    t0 = time.perf_counter()
    refs = [reference_run(model, train, run, rounds=rounds, batch_size=batch_size) for run in runs]
    seconds["per-client loop"] = time.perf_counter() - t0
    rows = []
    for label, options in (ENGINE_VARIANTS if variants is None else variants).items():
        t0 = time.perf_counter()
        engine = StackedEngine(model, train, runs, rounds=rounds, dtype=torch.float64, batch_size=batch_size,
                               **options)
        engine.train()
        seconds[label] = time.perf_counter() - t0
        for r, (run, ref) in enumerate(zip(runs, refs)):
            want = ref.state.params
            param_rel = max_relative_difference(engine.params(r), want)
            diag = [rec[r].diagnostics for rec in engine.history]
            tau_rel = max(abs(d.tau_eff - w.tau_eff) / abs(w.tau_eff) for d, w in zip(diag, ref.diagnostics))
            w_diff = max(float(np.abs(np.asarray(d.weights) - np.asarray(w.weights)).max())
                         for d, w in zip(diag, ref.diagnostics))
            moved = (sum(float(((want[n] - run.params[n]) ** 2).sum()) for n in want)
                     / sum(float((run.params[n] ** 2).sum()) for n in want)) ** 0.5
            rows.append({"engine": label, "run": run.name, "param_rel": param_rel, "tau_eff_rel": tau_rel,
                         "weights_diff": w_diff, "moved": moved})
    return {"rows": rows, "seconds": seconds, "sizes": sizes}


__all__ += ["ENGINE_VARIANTS", "engine_against_reference"]


def rounds_to_match(results: Dict[str, Dict[int, dict]]) -> List[dict]:
    """Paper App. I, Figure 7: "FedNova only requires about half of the total rounds to
    achieve the same test accuracy as FedAvg". For every Table 1 pair (same row and epoch
    setting, FedAvg/FedProx/SCAFFOLD vs FedNova) and every seed that both have: FedAvg's
    final test accuracy, the first round (1-based count) at which FedNova reaches it
    (``None`` if it never does), and that count as a fraction of FedAvg's rounds. ``results`` is
    :func:`load_table1_results`'s ``{cell_id: {seed: result}}``."""
    rows = []
    for c, nova in _pairs():
        base, ours = results.get(c.id, {}), results.get(nova.id, {})
        for seed in sorted(set(base) & set(ours)):
            hb, hn = base[seed]["history"], ours[seed]["history"]
            target = hb[-1]["test_accuracy"]
            hit = next((t + 1 for t, h in enumerate(hn) if h["test_accuracy"] >= target), None)
            rows.append({"row": c.row, "setting": EPOCH_SETTINGS[c.epochs], "baseline": c.method, "seed": seed,
                         "baseline_final": target, "baseline_rounds": len(hb), "fednova_rounds": hit,
                         "fraction": None if hit is None else hit / len(hb)})
    return rows


#: Column headers of :func:`format_match_rows`.
MATCH_HEADERS = ["row", "E", "baseline", "seed", "baseline final (%)", "FedNova reaches it at round",
                 "fraction of rounds"]


def format_match_rows(rows: List[dict]) -> List[list]:
    """Rows of strings for a markdown table (:data:`MATCH_HEADERS`) of :func:`rounds_to_match`'s ``rows``."""
    return [[m["row"], m["setting"], m["baseline"], m["seed"], f"{100 * m['baseline_final']:.2f}",
             "never" if m["fednova_rounds"] is None else m["fednova_rounds"],
             "—" if m["fraction"] is None else f"{m['fraction']:.2f}"] for m in rows]


__all__ += ["rounds_to_match", "MATCH_HEADERS", "format_match_rows"]


def _pairs():
    """``(baseline cell, FedNova cell)`` of every Table 1 row and epoch setting that has both."""
    for c in CELLS:
        if c.method == "FedNova":
            continue
        nova = next((d for d in CELLS if d.method == "FedNova" and d.row == c.row and d.epochs == c.epochs), None)
        if nova is not None:
            yield c, nova


def fednova_gaps(results: Dict[str, Dict[int, dict]]) -> List[dict]:
    """The paper's claim in numbers: for every Table 1 pair (FedAvg/FedProx/SCAFFOLD vs
    FedNova, same row and epoch setting) with results for common seeds, the final test
    accuracies (%, mean over those seeds), FedNova's lead in points (mean and per seed) and
    the paper's lead (``None`` where a paper value is missing or unconfirmed)."""
    rows = []
    for c, nova in _pairs():
        base, ours = results.get(c.id, {}), results.get(nova.id, {})
        seeds = sorted(set(base) & set(ours))
        if not seeds:
            continue
        b = np.array([100 * base[s]["history"][-1]["test_accuracy"] for s in seeds])
        n = np.array([100 * ours[s]["history"][-1]["test_accuracy"] for s in seeds])
        pb, pn = PAPER_VALUES.get(c.id, {}), PAPER_VALUES.get(nova.id, {})
        confirmed = all(p.get("value") is not None and p.get("status") != "unconfirmed" for p in (pb, pn))
        rows.append({"row": c.row, "setting": EPOCH_SETTINGS[c.epochs], "baseline": c.method, "seeds": seeds,
                     "baseline_final": float(b.mean()), "fednova_final": float(n.mean()),
                     "gap": float((n - b).mean()), "gap_per_seed": (n - b).tolist(),
                     "paper_gap": (pn["value"] - pb["value"]) if confirmed else None})
    return rows


#: Column headers of :func:`format_gap_rows`.
GAP_HEADERS = ["row", "E", "baseline", "seed(s)", "baseline final (%)", "FedNova final (%)",
               "FedNova's lead (points)", "paper's lead"]


def format_gap_rows(rows: List[dict]) -> List[list]:
    """Rows of strings for a markdown table (:data:`GAP_HEADERS`) of :func:`fednova_gaps`'s ``rows``."""
    return [[g["row"], g["setting"], g["baseline"], ", ".join(map(str, g["seeds"])), f"{g['baseline_final']:.2f}",
             f"{g['fednova_final']:.2f}", f"{g['gap']:+.2f}",
             "—" if g["paper_gap"] is None else f"{g['paper_gap']:+.2f}"] for g in rows]


def repeat_differences(results: Dict[str, Dict[int, dict]], repeats_dir) -> List[dict]:
    """Runs made twice with the same cell, seed and settings: every file
    ``repeats_dir/<cell>__seed<s>__<tag>.json`` next to the Table 1 result of that cell and
    seed. Per pair: both final test accuracies (%), their difference and the largest
    per-round difference (points), and the numbers of runs stacked in each engine — how far
    apart bf16 autocast and non-deterministic GPU kernels put two runs that the seeds make
    identical in exact arithmetic (the scale below which a difference in Table 1 means nothing).

    A repeat must be a run of the cell and seed its name says (its ``config.cell_id`` and ``config.seed``), in the
    official setup (:func:`cell_setup_problems`), with the Table 1 run's rounds, width and
    training-set size and as many recorded rounds: otherwise :class:`OtherSetupError` naming
    the file (another cell's run, or a short test run, made a "noise floor" out of a
    different experiment). ``results`` is :func:`load_table1_results`'s; a repeat without a Table 1 result
    there is skipped, and so is a ``repeats_dir`` that is not a folder."""
    from ..results import read_result

    rows = []
    folder = Path(repeats_dir)
    if not folder.is_dir():
        return rows
    for f in sorted(folder.glob("*__seed*__*.json")):
        cid, rest = f.stem.split("__seed", 1)
        seed_text, tag = rest.split("__", 1)
        if cid not in _BY_ID or not seed_text.isdecimal() or int(seed_text) not in results.get(cid, {}):
            continue
        seed = int(seed_text)
        a, b = results[cid][seed], read_result(f)
        ha, hb = a["history"], b["history"]
        problems = _name_problems(b, result_name(cid, seed)) or cell_setup_problems(b, history=False)
        ca, cb = a.get("config") or {}, b.get("config") or {}
        for key, va, vb in (("rounds", ca.get("rounds"), cb.get("rounds")),
                            ("width", (ca.get("engine") or {}).get("width"), (cb.get("engine") or {}).get("width")),
                            ("num_train", (ca.get("data") or {}).get("num_train"),
                             (cb.get("data") or {}).get("num_train")),
                            ("recorded rounds", len(ha), len(hb))):
            if va != vb:
                problems.append(f"{key} {vb!r} (the Table 1 run's {va!r})")
        if problems:
            raise OtherSetupError(f"{f}: not a repeat of {result_name(cid, seed)}: {', '.join(problems)}; move it "
                                  "out of the repeats folder")
        n = len(ha)
        per_round = [100 * abs(ha[t]["test_accuracy"] - hb[t]["test_accuracy"]) for t in range(n)]
        rows.append({"cell": cid, "seed": seed, "tag": tag, "final": 100 * ha[-1]["test_accuracy"],
                     "repeat_final": 100 * hb[-1]["test_accuracy"],
                     "difference": 100 * (hb[-1]["test_accuracy"] - ha[-1]["test_accuracy"]),
                     "max_round_difference": max(per_round) if per_round else None,
                     "stacked": (a["config"].get("engine") or {}).get("stacked_runs"),
                     "repeat_stacked": (b["config"].get("engine") or {}).get("stacked_runs"),
                     "device": (b.get("provenance") or {}).get("device")})
    return rows


__all__ += ["fednova_gaps", "GAP_HEADERS", "format_gap_rows", "repeat_differences"]


def check_recorded_diagnostics(results: Dict[str, Dict[int, dict]], train_labels) -> List[dict]:
    r"""The diagnostics a Table 1 run recorded, against the paper's closed forms.

    For every result and round: rebuild the official split of ``train_labels`` here
    (:math:`p_i = n_i / n`), take the recorded local steps :math:`\tau_i` and the round's
    learning rate, compute :math:`\|a_i\|_1` from the closed form of the cell's local
    solver (:meth:`fedlib.solvers.LocalSolver.a_norm`; the engine uses the running
    counter instead), then eq. 4's :math:`\tau_{\text{eff}}` and :math:`w`
    (:func:`fedlib.rule.effective_weights`) and :math:`\chi^2_{p\|w} = \sum_i (p_i-w_i)^2/w_i`
    (:func:`fedlib.theory.chi_square`). Per result: the largest relative error of
    :math:`\tau_{\text{eff}}` and absolute error of :math:`\chi^2` over the rounds, the
    first round's recorded values, and ``epochs_drawn``, the distinct local epochs
    :math:`E_i^{(t)} = \tau_i / \lceil n_i/B\rceil` of all clients and rounds. A recorded
    :math:`\tau_i` that is not :math:`E\lceil n_i/B\rceil` with a whole :math:`E` of the cell's
    setting (``"2"``: 2; ``"2-5"``: 2..5) raises ``ValueError``: :math:`\tau_{\text{eff}}` and
    :math:`\chi^2` are recomputed from the recorded steps, so without this a run of other epochs
    (E = 3 filed as E = 2) would pass. Whether every epoch of a range was drawn (the official
    code's draw from {2, 3, 4} for "2 to 5" never gives 5) is left to the caller, from
    ``epochs_drawn``. Full participation only (every Table 1 cell). ``results`` is
    :func:`load_table1_results`'s ``{cell_id: {seed: result}}``."""
    from ..rule import effective_weights
    from ..schedules import parse_epochs, steps_per_epoch
    from ..theory import chi_square

    sizes = np.array([len(c) for c in official_partition(np.asarray(train_labels))], dtype=np.float64)
    p = sizes / sizes.sum()
    spe = steps_per_epoch(sizes.astype(np.int64), PAPER["batch_size"])
    rows = []
    for cid, by_seed in results.items():
        alg = _BY_ID[cid].make_algorithm()
        low, high = parse_epochs(_BY_ID[cid].epochs)
        for seed, res in sorted(by_seed.items()):
            err_tau, err_chi = 0.0, 0.0
            drawn = set()
            for h in res["history"]:
                steps = np.asarray(h["local_steps"], dtype=np.int64)
                if steps.size != p.size:
                    raise ValueError(f"{cid} seed {seed} round {h['round']}: {steps.size} clients recorded, "
                                     f"the official split has {p.size}")
                epochs, rest = np.divmod(steps, spe)
                if rest.any() or epochs.min() < low or epochs.max() > high:
                    raise ValueError(f"{cid} seed {seed} round {h['round']}: local steps {steps.tolist()} are not "
                                     f"E * ceil(n_i / {PAPER['batch_size']}) = E * {spe.tolist()} with a whole E "
                                     f"in {low}..{high} (the cell's epochs {_BY_ID[cid].epochs!r})")
                drawn.update(int(e) for e in epochs)
                solver = alg.solver.with_lr(float(h["lr"]))
                a = np.array([solver.a_norm(int(t)) for t in steps])
                tau_eff, w = effective_weights(alg.aggregation, p, a, alg.tau_eff, steps)
                err_tau = max(err_tau, abs(h["tau_eff"] - tau_eff) / tau_eff)
                err_chi = max(err_chi, abs(h["chi2"] - chi_square(p, w / w.sum())))
            first = res["history"][0]
            rows.append({"cell": cid, "seed": seed, "rounds": len(res["history"]), "tau_eff": first["tau_eff"],
                         "chi2": first["chi2"], "tau_eff_rel_error": err_tau, "chi2_abs_error": err_chi,
                         "epochs_drawn": sorted(drawn)})
    return rows


__all__ += ["check_recorded_diagnostics"]


def summary_lines(summary: List[dict], gaps: List[dict], checks: List[dict], match: List[dict],
                  repeats: List[dict], bench: List[dict]) -> List[str]:
    """Chapter 5's closing summary as markdown bullet points, from what
    :func:`table1_summary`, :func:`fednova_gaps`, :func:`check_recorded_diagnostics`,
    :func:`rounds_to_match`, :func:`repeat_differences` and :func:`load_benchmarks`
    return (``summary``, ``gaps``, ``checks``, ``match``, ``repeats`` and ``bench``, in that order): it says what
    was measured and nothing else. Of ``bench`` only the CUDA-graph measurements are quoted."""
    devices = sorted({d for r in summary for d in r["devices"]})
    lines = [f"- {sum(r['n_seeds'] > 0 for r in summary)} of {len(summary)} Table 1 cells have results "
             f"({sum(r['n_seeds'] for r in summary)} runs; devices: {', '.join(devices) or 'none'})."]
    for g in gaps:
        paper = "—" if g["paper_gap"] is None else f"{g['paper_gap']:+.2f}"
        lines.append(f"- {g['row']}, {g['setting']}: FedNova {g['fednova_final']:.2f} % vs {g['baseline']} "
                     f"{g['baseline_final']:.2f} % ({g['gap']:+.2f} points over {len(g['seeds'])} seed(s); "
                     f"the paper: {paper}).")
    if checks:
        baselines = sorted({f"{c['chi2']:.3f}" for c in checks if c["chi2"] > 0})
        lines.append(f"- The τ_eff and χ² that the {len(checks)} run(s) recorded in every round equal the closed "
                     f"forms on the official split (largest errors {max(c['tau_eff_rel_error'] for c in checks):.0e} "
                     f"relative, {max(c['chi2_abs_error'] for c in checks):.0e} absolute)"
                     + (f"; χ² of the baselines: {', '.join(baselines)}" if baselines else "") + "; FedNova's: 0.")
    for m in match:
        if m["fraction"] is not None:
            lines.append(f"- FedNova reaches {m['baseline']}'s final accuracy ({m['row']}, {m['setting']}, "
                         f"seed {m['seed']}) after {m['fednova_rounds']} of {m['baseline_rounds']} rounds "
                         "(the paper: about half).")
    for r in repeats:
        in_round = ("" if r.get("max_round_difference") is None
                    else f", and up to {r['max_round_difference']:.2f} points apart in a round")
        lines.append(f"- The same run made twice ({r['cell']}, seed {r['seed']}) ends {abs(r['difference']):.2f} "
                     f"points apart{in_round}: differences of that size between cells mean nothing.")
    if repeats and gaps:  # chapter 5's claim cell asserts every lead above this (the same maximum)
        noise = max(max(abs(r["difference"]), r.get("max_round_difference") or 0.0) for r in repeats)
        lines.append(f"- Every FedNova lead above is asserted to exceed the largest difference of a repeat, final or "
                     f"in any round: {noise:.2f} points.")
    for b in bench:  # two measurements on one device (e.g. call 5's --compare file) are told apart by their file
        if b["cuda_graph"]:
            source = ", ".join(str(b[k]) for k in ("precision", "file") if b.get(k))
            where = f"{b['device']} ({source})" if source else b["device"]
            lines.append(f"- Speed on {where}: the stacked engine {b['engine_images_per_s']:,.0f} images/s, "
                         f"{b['ratio']:.1f}× the per-client loop ({b['runs']} runs stacked).")
    return lines


__all__ += ["summary_lines"]

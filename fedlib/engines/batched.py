r"""The batched in-memory engine: all participating clients of a round advance together.

For problems whose data fit in memory (Synthetic, LEAF; :class:`fedlib.problems.logistic.LogisticProblem`)
a round of any algorithm of :mod:`fedlib.algorithms` runs as array operations over a
leading *client axis* — there is no Python loop over clients inside a local step:

1. participants :math:`S` (:func:`fedlib.sampling.sample_clients`) and their
   :math:`\tau_i` (the schedule) are drawn; the clients are sorted by :math:`\tau_i`
   descending, so the clients still running at local step :math:`k` are a **shrinking
   prefix** ``[:a_k]`` of the stack (slice views; finished clients cost nothing);
2. every client's mini-batches of the round are drawn up front
   (:func:`minibatch_indices`: a fresh permutation per epoch from
   ``generator(seed, "batches", round, client)``, :math:`\lceil n_i/B\rceil` batches per
   epoch, the last partial batch kept) and gathered step-major into one array, padded to
   ``B`` with per-sample weights :math:`1/|\text{batch}|` (0 on padding), so each
   client's loss is the mean over its real samples;
3. each local step is one batched gradient (:func:`fedlib.problems.logistic.packed_grad_`,
   batched matmul on packed parameters :math:`\Theta=[W;b]`, shape ``(q, d+1, C)``)
   followed by the local solver's step on the stack — weight decay, the stacked VR
   correction :math:`\bar c - c_i`, heavy-ball momentum, the proximal term and
   :math:`\eta_k`, element-wise exactly as :meth:`fedlib.solvers.LocalSolver.update`
   (whose online counter gives :math:`\|a_i\|_1`; it is the same for every client at
   the same step). ``fast=False`` calls ``LocalSolver.update`` itself on the stacked
   arrays instead (slower, same numbers). With numpy, the steps where a single client is
   left (the critical path on skewed data) run on 2-d views
   (``fedlib.problems.logistic._packed_grad_numpy_one``, and for plain SGD its loop
   ``_packed_sgd_steps_numpy_one``: the same bits with fewer and cheaper calls);
4. the clients' changes go to :meth:`fedlib.algorithms.FederatedAlgorithm.apply`
   (aggregation, control variates, server optimizer), then the global training loss
   :math:`F(x)` and the test accuracy are evaluated.

:func:`run_reference` runs the *same* algorithm the way common simulators do — for each
client, for each local step: gradient, update — through
:func:`fedlib.engines.reference.run_sequential` with a gradient function that draws the
same batches (:class:`EpochBatcher`); the tests check both give the same numbers.

Backends: ``"numpy"`` (default, float64 on the CPU) and ``"torch"`` (float64 tensors
on ``device``; ``None`` picks CUDA when torch sees a GPU) — the same code, only the
gradient kernel differs.

Used by chapters 4 and 9 (:func:`run_batched`: FedNova's fixed-length rounds checked against eq. (4) in chapter 9;
chapter 4 checks it ran the momentum and proximal solvers' own steps against :func:`run_reference`); through
:mod:`fedlib.experiments` also by chapter 10.

Divergence: a non-finite aggregated update or a non-finite model from a server optimizer of your own
(``apply`` raises ``FloatingPointError``),
a non-finite training loss, or a ``FloatingPointError`` raised by an own solver step stops the run with
:class:`DivergenceError`, whose ``round`` attribute (and message) names the round (counted from 0).

Example
-------
>>> from fedlib.data import synthetic
>>> from fedlib.problems.logistic import LogisticProblem
>>> from fedlib.algorithms import make_algorithm
>>> from fedlib.solvers import sgd
>>> from fedlib.schedules import FixedEpochs
>>> prob = LogisticProblem(synthetic(num_clients=5, seed=0))
>>> sched = FixedEpochs(prob.num_samples, 20, 1)
>>> run = run_batched(make_algorithm("fednova", sgd(0.02)), prob, sched, 3, batch_size=20)
>>> len(run.history), run.history[-1]["train_loss"] < run.initial["train_loss"]
(3, True)
"""
from __future__ import annotations

import re
import time
from bisect import bisect_left, bisect_right
from typing import Callable, NamedTuple, Optional

import numpy as np

from .._validate import (check_callable, check_choice, check_count, check_flag, check_int, check_int_array,
                         check_memory, round_lr)
from ..algorithms import ClientUpdate, FederatedAlgorithm, ServerState, server_state_mismatch
from ..problems.logistic import _UNDERFLOW, LogisticProblem, _one_hot, _ones, pack_params, unpack_params
from ..problems.logistic import _packed_grad_numpy_one as _grad_one
from ..problems.logistic import _packed_sgd_steps_numpy_one as _sgd_steps_one
from ..rng import generator
from ..sampling import check_sampling, round_participation
from ..schedules import check_epoch_schedule, check_participant_steps, check_schedule_size, round_local_steps
from ..solvers import LocalSolver, OwnStepChecks, SolverState, check_builtin_step
from .reference import run_sequential

__all__ = ["BACKENDS", "DivergenceError", "EngineRun", "minibatch_indices", "EpochBatcher", "run_batched",
           "run_reference", "run_engine", "resolve_device"]

#: Array backends of the batched engine — numpy (float64, CPU) or torch (float64 tensors).
BACKENDS = ("numpy", "torch")
ENGINES = ("batched", "reference")

#: Bytes of gathered mini-batches held at once (a window of steps; cache-sized is fastest).
GATHER_BYTES = 2 ** 19


class DivergenceError(FloatingPointError):
    """The run diverged in round ``round`` (counted from 0): NaN/inf loss or update.

    Raised by :func:`run_batched` and :func:`run_reference` (a ``FloatingPointError``, so code that
    catches those still catches it); the CLI (``fedlib.cli.main``) reports it as an error with exit
    status 2, naming the round.

    ``round_index`` is the round, an integer >= -1 (-1: the loss at the starting point, before round 0; kept as
    ``round``; ``ValueError`` naming it otherwise); ``detail`` says what diverged and ends the message.

    Example
    -------
    >>> err = DivergenceError(3, "the training loss is inf (lower the learning rate)")
    >>> err.round, str(err)
    (3, 'diverged in round 3: the training loss is inf (lower the learning rate)')
    >>> isinstance(err, FloatingPointError)
    True
    """

    def __init__(self, round_index: int, detail: str):
        # int() cut 1.5 to round 1 and failed on inf / NaN ("cannot convert float infinity to integer")
        self.round = check_int("round_index", round_index, minimum=-1)  # -1: the starting point, before round 0
        super().__init__(f"diverged in round {self.round}: {detail}")


class EngineRun(NamedTuple):
    r"""What :func:`run_batched` and :func:`run_reference` return: final ``params`` (``{"W", "b"}``,
    numpy), the final server ``state`` (its parameters packed :math:`\Theta = [W; b]` for the batched
    engine, a dict for the reference one), ``initial`` (the metrics before the first round; empty with
    ``evaluate=False``), and ``history``, one record per round (keys listed in :func:`run_batched`).

    Example
    -------
    Two classes and zero parameters: every softmax is :math:`(1/2, 1/2)`, so the initial training loss
    is :math:`\ln 2`:

    >>> import math
    >>> from fedlib.algorithms import make_algorithm
    >>> from fedlib.data import synthetic
    >>> from fedlib.problems.logistic import LogisticProblem
    >>> from fedlib.schedules import FixedSteps
    >>> from fedlib.solvers import sgd
    >>> prob = LogisticProblem(synthetic(num_clients=2, dim=3, num_classes=2, num_samples=[10, 20], seed=0))
    >>> run = run_batched(make_algorithm("fedavg", sgd(0.1)), prob, FixedSteps([1, 2]), 2, batch_size=5)
    >>> run.params["W"].shape, run.state.params.shape, len(run.history), run.history[1]["round"]
    ((3, 2), (4, 2), 2, 1)
    >>> math.isclose(run.initial["train_loss"], math.log(2), rel_tol=1e-12)
    True
    """

    params: dict
    state: ServerState
    initial: dict
    history: list


# ----------------------------------------------------------------------------- batches
def minibatch_indices(num_samples: int, batch_size: int, steps: int, rng: np.random.Generator):
    r"""Sample indices of ``steps`` consecutive mini-batches of one client.

    Epoch after epoch, a fresh permutation ``rng.permutation(num_samples)`` is cut into
    :math:`\lceil n/B\rceil` batches (the last one partial when :math:`B \nmid n`);
    step ``k`` uses batch ``k mod ceil(n/B)`` of epoch ``k // ceil(n/B)``.

    Returns ``(idx, counts)``: ``idx`` ``(steps, B)`` int64 (padding entries are 0) and
    ``counts`` ``(steps,)`` the real batch sizes. :func:`run_batched` draws each client's batches
    of round :math:`t` with ``rng = generator(seed, "batches", t, client)`` (:func:`fedlib.rng.generator`).

    ``num_samples`` is the client's :math:`n \ge 1`, ``batch_size`` :math:`B \ge 1`, ``steps`` a whole number
    :math:`\ge 0` and ``rng`` a :class:`numpy.random.Generator` (the engines pass
    ``fedlib.rng.generator(seed, "batches", round, client)``).

    Example
    -------
    :math:`n = 5`, :math:`B = 2`: :math:`\lceil 5/2\rceil = 3` batches per epoch of sizes 2, 2, 1, so 4 steps
    take one whole epoch (every sample once) and the first batch of the next:

    >>> import numpy as np
    >>> idx, counts = minibatch_indices(5, 2, 4, np.random.default_rng(0))
    >>> idx.shape, counts
    ((4, 2), array([2, 2, 1, 2]))
    >>> sorted(np.concatenate([idx[0], idx[1], idx[2, :1]]).tolist()), int(idx[2, 1])
    ([0, 1, 2, 3, 4], 0)
    """
    n = check_int("num_samples", num_samples, minimum=1)
    b = check_int("batch_size", batch_size, minimum=1)
    steps = check_count("steps", steps, minimum=0)
    if not callable(getattr(rng, "permutation", None)):  # else "'int' object has no attribute 'permutation'"
        raise ValueError(f"rng must be a numpy random Generator (e.g. fedlib.rng.generator(seed, 'batches', round, "
                         f"client)), got {type(rng).__name__}")
    return _minibatch_indices(n, b, steps, rng)


def _minibatch_indices(n: int, b: int, steps: int, rng: np.random.Generator):
    """:func:`minibatch_indices` without the argument checks (python ints)."""
    spe = -(-n // b)
    epochs = -(-steps // spe) if steps else 0
    flat = np.zeros((epochs, spe * b), dtype=np.int64)
    for e in range(epochs):
        flat[e, :n] = rng.permutation(n)
    idx = flat.reshape(epochs * spe, b)[:steps]
    last = n - (spe - 1) * b
    counts = np.full(epochs * spe, b, dtype=np.int64)
    counts[spe - 1::spe] = last
    return idx, counts[:steps]


class EpochBatcher:
    """Mini-batches like a data loader, for the per-client loop: ``batch(round, client, step)``
    returns the sample indices of that step (the same as :func:`minibatch_indices` with
    ``generator(seed, "batches", round, client)``), drawing one permutation per epoch
    lazily. Only the current round is cached. :func:`run_reference` draws its batches with it,
    which is why it matches :func:`run_batched`. ``num_samples`` holds one whole number >= 1 per client (``ValueError``
    naming it otherwise); ``batch`` takes an integer ``step >= 0`` and ``client`` in ``0..m-1`` (likewise).

    Example
    -------
    Client 1 holds :math:`n_1 = 3` samples, :math:`B = 2`: batches of 2, 1, then the next epoch's 2, the
    rows of :func:`minibatch_indices` with the same generator:

    >>> import numpy as np
    >>> from fedlib.rng import generator
    >>> batcher = EpochBatcher([5, 3], batch_size=2, seed=7)
    >>> idx, counts = minibatch_indices(3, 2, 3, generator(7, "batches", 0, 1))
    >>> counts
    array([2, 1, 2])
    >>> all(np.array_equal(batcher.batch(0, 1, k), idx[k, :counts[k]]) for k in range(3))
    True
    """

    def __init__(self, num_samples, batch_size: int, seed: int):
        # checked: np.asarray(..., dtype=np.int64) cut 5.7 samples to 5, took 0 (a client without samples) and a
        # number (an IndexError at the first batch)
        self.num_samples = check_int_array("num_samples", num_samples, minimum=1).astype(np.int64)
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        self.seed = check_int("seed", seed)
        self._round = None
        self._cache: dict = {}

    def batch(self, round_index: int, client: int, step: int) -> np.ndarray:
        # a plain int in range passes without an isinstance chain (this runs every local step): step -1 was the last
        # drawn epoch's last batch (or an IndexError), 1.5 a slicing TypeError, True step 1; client m an IndexError,
        # -1 the generator's "key must be an integer >= 0"
        if not (type(step) is int and step >= 0):
            step = check_int("step", step)
        if not (type(client) is int and 0 <= client < self.num_samples.shape[0]) and (
                isinstance(client, bool) or not isinstance(client, (int, np.integer))
                or not 0 <= client < self.num_samples.shape[0]):
            raise ValueError(f"client must be an integer in [0, {self.num_samples.shape[0]}), got {client!r}")
        if round_index != self._round:
            self._round, self._cache = round_index, {}
        entry = self._cache.get(client)
        if entry is None:
            entry = self._cache[client] = (generator(self.seed, "batches", round_index, client), [])
        rng, perms = entry
        n = int(self.num_samples[client])
        spe = -(-n // self.batch_size)
        epoch, j = divmod(step, spe)
        while len(perms) <= epoch:
            perms.append(rng.permutation(n))
        return perms[epoch][j * self.batch_size:(j + 1) * self.batch_size]


# ----------------------------------------------------------------------------- backends
def resolve_device(backend: str, device: Optional[str]) -> str:
    """The device a run uses: ``"cpu"`` for numpy; for torch ``device`` or, if ``None``,
    ``"cuda"`` when torch sees a GPU, else ``"cpu"``. A device the backend cannot use (numpy on a GPU,
    CUDA without one, a string torch does not parse) is a ``ValueError``.

    Example
    -------
    >>> resolve_device("numpy", None)
    'cpu'
    >>> resolve_device("numpy", "cuda")
    Traceback (most recent call last):
    ...
    ValueError: device: the numpy backend runs on the CPU only, got 'cuda' (use backend='torch')
    """
    check_choice("backend", backend, BACKENDS)
    if backend == "numpy":
        if device not in (None, "cpu"):
            raise ValueError(f"device: the numpy backend runs on the CPU only, got {device!r} (use backend='torch')")
        return "cpu"
    import torch

    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device: not a torch device: {device!r} ({exc})") from None
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device: {device!r} requested but torch sees no GPU")
    return str(device)


class _Numpy:
    name = "numpy"

    def __init__(self, device):
        self.device = "cpu"

    def asarray(self, x):
        return np.ascontiguousarray(x, dtype=np.float64) if np.asarray(x).dtype.kind == "f" else np.asarray(x)

    def empty(self, shape):
        return np.empty(shape)

    def zeros(self, shape):
        return np.zeros(shape)

    def to_numpy(self, x):
        return x

    @staticmethod
    def mul(a, s, out):
        return np.multiply(a, s, out=out)

    @staticmethod
    def sub(a, b, out):
        return np.subtract(a, b, out=out)

    @staticmethod
    def take(src, rows, out):
        """``out[...] = src[rows]`` (rows of ``src`` indexed by an integer array)."""
        src.take(rows, 0, out, "clip")  # np.take's method, without its wrapper; "raise" would buffer the output


class _Torch:
    name = "torch"

    def __init__(self, device):
        import torch

        self.torch = torch
        self.device = torch.device(device)

    def asarray(self, x):
        x = np.asarray(x)
        dtype = self.torch.float64 if x.dtype.kind == "f" else self.torch.int64
        return self.torch.as_tensor(x, dtype=dtype, device=self.device)

    def empty(self, shape):
        return self.torch.empty(shape, dtype=self.torch.float64, device=self.device)

    def zeros(self, shape):
        return self.torch.zeros(shape, dtype=self.torch.float64, device=self.device)

    def to_numpy(self, x):
        return x.detach().cpu().numpy()

    def mul(self, a, s, out):
        return self.torch.mul(a, s, out=out)

    def sub(self, a, b, out):
        return self.torch.sub(a, b, out=out)

    def take(self, src, rows, out):
        idx = self.torch.as_tensor(np.ascontiguousarray(rows).reshape(-1), device=self.device)
        self.torch.index_select(src, 0, idx, out=out.view(-1, src.shape[1]))


def _make_backend(backend: str, device: Optional[str]):
    dev = resolve_device(backend, device)
    return _Numpy(dev) if backend == "numpy" else _Torch(dev)


# ----------------------------------------------------------------------------- checks
def _check_common(algorithm, problem, schedule, rounds, batch_size, sampling, clients_per_round, seed):
    if not isinstance(algorithm, FederatedAlgorithm):
        raise ValueError(f"algorithm must be a fedlib FederatedAlgorithm, got {type(algorithm).__name__}")
    if not isinstance(problem, LogisticProblem):
        raise ValueError(f"problem must be a LogisticProblem, got {type(problem).__name__}")
    rounds = check_int("rounds", rounds, minimum=0)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    seed = check_int("seed", seed)
    check_sampling(sampling, clients_per_round)
    m = problem.num_clients
    check_schedule_size(schedule, m, "the problem")
    check_epoch_schedule(schedule, problem.num_samples, batch_size)
    if callable(sampling):
        pass  # the user's sampler chooses the participants (fedlib.sampling.round_participation)
    elif sampling != "full":
        if clients_per_round is None:
            raise ValueError(f"clients_per_round is required with sampling={sampling!r}")
        clients_per_round = check_int("clients_per_round", clients_per_round, minimum=1)
        if sampling == "uniform" and clients_per_round > m:
            raise ValueError(f"clients_per_round: cannot sample {clients_per_round} of {m} clients without replacement")
    elif clients_per_round is not None:
        raise ValueError(f"clients_per_round: full participation takes every client, so q = {clients_per_round} "
                         "would be ignored; give it only with sampling 'with-replacement' or 'uniform'")
    return rounds, batch_size, seed, clients_per_round


_HOOKS = {"lr_at": "round -> client lr", "callback": "record -> None",
          "on_round_end": "(state, history, initial) -> None"}
_HOOK_ARGS = {"lr_at": 1, "callback": 1, "on_round_end": 3}  # the positional arguments each is called with


def _check_hooks(**hooks) -> None:
    """Each hook given (not ``None``) must be callable: a ``ValueError`` naming it before any round runs, not
    Python's ``'float' object is not callable`` after the first round, as
    :func:`fedlib.engines.reference.run_sequential` refuses its own."""
    for name, fn in hooks.items():
        if fn is not None:
            check_callable(name, fn, _HOOKS[name], " (a constant rate: lr_at=None uses the solver's lr)"
                           if name == "lr_at" else "", nargs=_HOOK_ARGS[name])


def _round_lr(algorithm, lr_at, t) -> float:
    return round_lr("lr_at", lr_at, t, algorithm.solver.lr)


def _record(t, lr, diag, metrics, seconds) -> dict:
    rec = {
        "round": int(t),
        "lr": float(lr),
        "train_loss": metrics.get("train_loss"),
        "test_accuracy": metrics.get("test_accuracy"),
        "tau_eff": float(diag.tau_eff),
        "chi2": float(diag.chi2),
        "clients": [int(c) for c in diag.clients],
        "local_steps": [int(s) for s in diag.local_steps],
        "a_norms": [float(a) for a in diag.a_norms],
        "weights": [float(w) for w in diag.weights],
        "time_s": float(seconds),
    }
    return rec


def _metrics(problem: LogisticProblem, params: dict, t: int, evaluate: bool) -> dict:
    if not evaluate:
        return {}
    with np.errstate(all="ignore"):
        m = problem.metrics(params)
    if not np.isfinite(m["train_loss"]):
        raise DivergenceError(t, f"the training loss is {m['train_loss']} (lower the learning rate)")
    return m


# ----------------------------------------------------------------------------- the batched engine
def run_batched(algorithm: FederatedAlgorithm, problem: LogisticProblem, schedule, rounds: int, *, batch_size: int,
                seed: int = 0, sampling="full", clients_per_round: Optional[int] = None,
                lr_at: Optional[Callable[[int], float]] = None, params: Optional[dict] = None,
                backend: str = "numpy", device: Optional[str] = None, evaluate: bool = True, fast: bool = True,
                callback: Optional[Callable[[dict], None]] = None, comm=None, resume: Optional[dict] = None,
                on_round_end: Optional[Callable[[ServerState, list, dict], None]] = None) -> EngineRun:
    r"""Run ``rounds`` rounds of ``algorithm`` on ``problem`` with all participants batched (chapter 4's
    Synthetic(alpha, beta) runs, through :mod:`fedlib.experiments.synthetic`, and ``python -m fedlib run synthetic``).

    Parameters
    ----------
    algorithm : a :class:`~fedlib.algorithms.FederatedAlgorithm` (any solver, VR, server optimizer).
    problem : :class:`~fedlib.problems.logistic.LogisticProblem`.
    schedule : ``local_steps(round) -> (m,)`` :math:`\tau_i` (:mod:`fedlib.schedules`;
        an epoch schedule must use ``batch_size`` and ``problem.num_samples``).
    rounds : the number of rounds :math:`T` to run (an integer :math:`\ge 0`).
    batch_size : :math:`B`.
    seed : run seed: batches, sampling (and the schedule's own seed for random epochs).
    sampling, clients_per_round : participation (``"full"``, ``"with-replacement"``, ``"uniform"``, or
        your own sampler ``round -> Participation``, :func:`fedlib.sampling.round_participation`).
    lr_at : ``round -> client lr`` (default: the solver's lr every round). A solver with its own step is probed
        (:func:`fedlib.solvers.check_own_step`) at each other round lr once, as the algorithm probed it at its own: a
        step that ignores ``self.lr`` is refused in the first round that takes another lr.
    params : starting parameters ``{"W", "b"}`` (default: zeros).
    backend, device : ``"numpy"`` or ``"torch"`` (device ``None`` = CUDA if available).
    evaluate : compute ``train_loss`` / ``test_accuracy`` after every round (``evaluate`` and ``fast`` are
        ``True`` or ``False``, a ``ValueError`` naming one otherwise).
    fast : fused in-place solver step (default) or :meth:`~fedlib.solvers.LocalSolver.update` on the stack.
        The fused step is :class:`~fedlib.solvers.LocalSolver`'s own; a solver subclass with its own
        ``update`` (:attr:`~fedlib.solvers.LocalSolver.builtin_step` false) needs ``fast=False``
        (``ValueError`` otherwise), and keeps ``LocalSolver.init``: the stacked state is built as it does.
    callback : called with each round's record.
    comm : a :class:`fedlib.distributed.Communicator` (``None``: one process; anything else a
        ``ValueError`` naming ``comm``, before the data is put on the backend). Each rank
        then trains only the participants it owns and the aggregation runs with
        collectives (:func:`fedlib.distributed.distributed_apply`); every rank ends each
        round with the same global model. A rank updates the control variates :math:`c_i` of its own
        clients only: the returned state and the one ``on_round_end`` receives hold every client's
        (gathered with :func:`fedlib.distributed.gather_variates`, a collective, after every round when
        ``on_round_end`` is given: give it on every rank or on none), so that a checkpoint of it resumes the
        run, on any number of processes.
        An error of one rank's own per-round code (its clients' local training, ``lr_at``, ``sampling``, the
        schedule, the metrics, ``callback``, ``on_round_end``) reaches the other ranks in the next collective they
        all make: the round's first (:func:`fedlib.distributed.distributed_apply`'s) or, after the last round, one
        the run makes at its end. The failing rank raises its own error there, the others
        :class:`fedlib.distributed.RankStopped` naming it, the round and the error. Until then the failing rank
        makes the collectives the others make: after a failed ``callback`` it still hands the round to
        ``on_round_end`` (the round itself is whole), whose own collectives, if any, it thus joins. After a failed
        metric it has no record of the round and skips ``on_round_end``: a hook with collectives of its own then
        meets, in its first one, that rank's hand-off (an ``all_gather_object``) instead of its own call; the
        command line's checkpoint hook makes an ``all_gather_object`` and recognises it.
    resume : ``{"state", "history", "initial"}`` of a checkpoint (:mod:`fedlib.checkpoint`):
        continue after round ``len(history) - 1`` with that server state.
    on_round_end : ``(state, history, initial)`` after every round (checkpointing).
        ``lr_at``, ``callback`` and ``on_round_end`` are callables or ``None`` (``ValueError`` naming one
        otherwise, before the first round).

    Returns
    -------
    :class:`EngineRun`
        Each history record has ``round`` (from 0), ``lr``, ``train_loss`` (:math:`F(x)` after the
        round), ``test_accuracy``, ``tau_eff``, ``chi2``, ``clients``, ``local_steps``
        (:math:`\tau_i`), ``a_norms``, ``weights`` (:math:`w_i`) and ``time_s``.

    Example
    -------
    Three clients with :math:`n_i = (9, 18, 36)` training samples (:math:`p = (1, 2, 4)/7`), one epoch of
    :math:`B = 5`: :math:`\tau_i = \lceil n_i/5\rceil = (2, 4, 8)`, with SGD :math:`\|a_i\|_1 = \tau_i` and
    FedNova's :math:`\tau_{\text{eff}} = (2 + 8 + 32)/7 = 6`. The per-client loop
    (:func:`run_reference`) gives the same model to rounding:

    >>> import numpy as np
    >>> from fedlib.algorithms import make_algorithm
    >>> from fedlib.data import synthetic
    >>> from fedlib.problems.logistic import LogisticProblem
    >>> from fedlib.schedules import FixedEpochs
    >>> from fedlib.solvers import sgd
    >>> prob = LogisticProblem(synthetic(num_clients=3, dim=4, num_classes=2, num_samples=[10, 20, 40], seed=0))
    >>> prob.num_samples
    array([ 9, 18, 36])
    >>> algo, sched = make_algorithm("fednova", sgd(0.1)), FixedEpochs(prob.num_samples, 5, 1)
    >>> batched = run_batched(algo, prob, sched, 2, batch_size=5)
    >>> batched.history[0]["local_steps"], batched.history[0]["a_norms"], batched.history[0]["tau_eff"]
    ([2, 4, 8], [2.0, 4.0, 8.0], 6.0)
    >>> reference = run_reference(algo, prob, sched, 2, batch_size=5)
    >>> bool(np.allclose(batched.params["W"], reference.params["W"], rtol=0, atol=1e-14))
    True
    """
    rounds, batch_size, seed, clients_per_round = _check_common(
        algorithm, problem, schedule, rounds, batch_size, sampling, clients_per_round, seed)
    _check_hooks(lr_at=lr_at, callback=callback, on_round_end=on_round_end)
    # "no" is truthy: evaluate="no" would have evaluated every round, fast=0.5 taken the fused step
    evaluate, fast = check_flag("evaluate", evaluate), check_flag("fast", fast)
    if fast:
        check_builtin_step("algorithm.solver", [algorithm.solver],
                           "the fused step of run_batched (fast=True) does not take: pass fast=False, which steps "
                           "the stack with the solver's own update")
    elif type(algorithm.solver).init is not LocalSolver.init:  # the stacked state is built as LocalSolver.init does
        raise ValueError(f"algorithm.solver: {type(algorithm.solver).__name__} overrides LocalSolver.init, but "
                         "run_batched builds the clients' stacked state as LocalSolver.init does (anchor only with "
                         "mu > 0, a momentum buffer only with momentum > 0): run it through "
                         "fedlib.engines.reference.run_sequential or run_reference")
    if comm is not None:
        from ..distributed import _check_communicator

        _check_communicator(comm)
    be = _make_backend(backend, device)
    x0 = problem.init_params() if params is None else params
    W0, b0 = problem.model._check_params(x0, stacked=False)  # float64 numpy arrays, whatever kinds params held
    theta0 = pack_params({"W": W0, "b": b0})
    p = problem.p
    m = problem.num_clients
    n_i = problem.num_samples
    # A batch never holds more than a client's n_i samples: above the largest n_i every batch
    # is the client's whole (permuted) data, with the same draws, so the buffers need no more
    # width than max n_i (a --batch-size of 10**7 must not allocate for 10**7 rows).
    B = min(batch_size, int(n_i.max()))
    D = problem.model.num_features + 1
    C = problem.model.num_classes
    l2 = problem.l2

    # data on the backend: features with a trailing 1 (bias), one-hot labels
    check_memory(problem.train_x.shape[0] * D * 8, f"the batched engine's copy of the training features "
                 f"({problem.train_x.shape[0]:,} samples, with a column of ones)")
    xa_np = np.concatenate([problem.train_x, np.ones((problem.train_x.shape[0], 1))], axis=1)
    Xall = be.asarray(xa_np)
    # numpy: the labels alone (each window's one-hot labels times the weights are written from them: _local_phase)
    labels = np.ascontiguousarray(problem.train_y, dtype=np.int64) if be.name == "numpy" else None
    Yall = None if labels is not None else be.asarray(_one_hot(problem.train_y, C))

    if comm is not None:
        comm.check_clients(m)
    if resume is None:
        state = algorithm.init(be.asarray(theta0), m)
        initial = _metrics(problem, _to_dict(be, state.params), -1, evaluate) if evaluate else {}
        history = []
    else:
        _check_resume(algorithm, resume, rounds, m, theta0.shape)
        state = _state_to_backend(be, resume["state"])
        initial, history = dict(resume.get("initial") or {}), [dict(h) for h in resume["history"]]
    # each rank updates only the c_i of its own clients: the full stack is gathered (a collective) for
    # on_round_end after every round, and for the returned state
    gather = comm is not None and comm.world_size > 1 and state.variates is not None
    if gather:
        from ..distributed import gather_variates
    cache: dict = {}  # per learning rate: local step sizes and online counters
    own_step_checks = OwnStepChecks()  # a round lr's solver, once per distinct lr (its own step, if any)
    # several ranks: an error of this rank's own per-round code (everything but the collectives) is handed to the
    # others in the next collective they all make, the round's first one (distributed_apply's) or, after the last
    # round, one at the end of the run; raised alone, it left them waiting in that collective (the group's timeout)
    together = comm is not None and comm.world_size > 1
    if together:
        from ..distributed import RankStopped
    failed = None  # (round, error) of this rank, not yet handed on
    for t in range(len(history), rounds):
        start = time.perf_counter()
        if failed is None:
            try:
                lr = _round_lr(algorithm, lr_at, t)
                solver = algorithm.solver.with_lr(lr)
                own_step_checks.check_round_lr(algorithm.solver, solver, t, correction=algorithm.variance is not None)
                part = round_participation(sampling, p, clients_per_round, seed, t)
                steps_all = round_local_steps(schedule, t, m, "the problem")
                tau_all = check_participant_steps(steps_all, part.clients, t)
                mine = part.clients if comm is None else part.clients[comm.owns(part.clients, m)]
                tau = tau_all if comm is None else steps_all[mine]
                order = np.argsort(-tau, kind="stable")
                sorted_clients = mine[order]
                tau_s = tau[order]
                theta0 = state.params
                corr = None
                if state.variates is not None:  # stacked c_bar - c_i, in sorted order
                    idx = be.asarray(sorted_clients) if be.name == "torch" else sorted_clients
                    corr = state.variates.mean[None] - state.variates.client[idx]
                inv = np.empty_like(order)
                inv[order] = np.arange(order.size)
                # NaN/inf are caught by apply and by the training loss; a FloatingPointError of an own step
                # (fast=False) is the round's DivergenceError too, as run_reference makes it (it went through without
                # a round before)
                with np.errstate(all="ignore"):
                    try:
                        if mine.size:
                            finals, a_norms_s = _local_phase(be, solver, theta0, corr, sorted_clients, tau_s, n_i,
                                                             problem.offsets, Xall, Yall, B, D, C, l2, seed, t, fast,
                                                             cache, labels)
                            deltas = finals - theta0[None]
                        else:  # this rank owns no participant of the round
                            a_norms_s, deltas = np.empty(0), None
                    except FloatingPointError as exc:
                        raise DivergenceError(t, str(exc).split(": ", 1)[-1]) from None
                updates = [ClientUpdate(int(c), deltas[int(inv[j])], float(a_norms_s[inv[j]]), int(tau[j]))
                           for j, c in enumerate(mine)]
            except Exception as exc:  # noqa: BLE001 - handed to the other ranks, then raised here
                if not together or isinstance(exc, RankStopped):
                    raise
                failed = (t, exc)
        if failed is not None:  # in the collective the others make first: they raise RankStopped, this rank exc
            from ..distributed import _stop_round

            _stop_round(comm, failed)
        with np.errstate(all="ignore"):
            try:
                if comm is None:
                    state, diag = algorithm.apply(state, part, updates, lr, p)
                else:
                    from ..distributed import distributed_apply

                    state, diag = distributed_apply(comm, algorithm, state, part, updates, lr, p)
            except FloatingPointError as exc:
                raise DivergenceError(t, str(exc).split(": ", 1)[-1]) from None
        # every rank now holds the same model; an error of this rank's metrics, callback or on_round_end is handed
        # on at the next round's first collective (or the run's last one). Until then the rank makes the collectives
        # the others make: the gather below and, when it recorded the round, on_round_end's own (the CLI shares a
        # checkpoint write's error there)
        recorded = False
        try:
            met = _metrics(problem, _to_dict(be, state.params), t, evaluate)
            rec = _record(t, lr, diag, met, time.perf_counter() - start)
            history.append(rec)
            recorded = True
            if callback is not None:
                callback(rec)
        except Exception as exc:  # noqa: BLE001 - handed to the other ranks, then raised here
            if not together or isinstance(exc, RankStopped):
                raise
            failed = (t, exc)
        if on_round_end is not None:
            if gather:  # the state handed out is the run's whole state (a checkpoint of it resumes the run)
                state = state._replace(variates=gather_variates(comm, state.variates, m))
            if recorded:  # a round whose record this rank could not make is not checkpointed
                try:
                    on_round_end(state, history, initial)
                except Exception as exc:  # noqa: BLE001 - handed to the other ranks, then raised here
                    # RankStopped: another rank's error reached this one in a collective of the hook (the CLI's
                    # checkpoint round); that rank has stopped, so it is raised at once, not handed on
                    if not together or isinstance(exc, RankStopped):
                        raise
                    failed = failed or (t, exc)
    if gather and on_round_end is None:  # with on_round_end, gathered after the last round already
        state = state._replace(variates=gather_variates(comm, state.variates, m))
    if together:  # an error of the last round's callback or on_round_end: the run's one collective of its own
        from ..distributed import _stop_round

        _stop_round(comm, failed)
    return EngineRun(_to_dict(be, state.params, copy=True), state, initial, history)


def _check_resume(algorithm: FederatedAlgorithm, resume, rounds: int, m: int, packed_shape: tuple) -> None:
    """``resume`` must continue this run: a server state of this algorithm (control variates
    exactly when it uses them), for these ``m`` clients and this model, after ``len(history)``
    rounds, no more than ``rounds``."""
    if not isinstance(resume, dict) or "state" not in resume or "history" not in resume:
        raise ValueError("resume must be a dict with 'state', 'history' (and 'initial'), as a checkpoint holds")
    state, history = resume["state"], resume["history"]
    if not isinstance(state, ServerState):
        raise ValueError(f"resume['state'] must be a fedlib.algorithms.ServerState, got {type(state).__name__}")
    if not isinstance(history, (list, tuple)):
        raise ValueError(f"resume['history'] must be a list of round records, got {type(history).__name__}")
    if (state.variates is None) != (algorithm.variance is None):
        raise ValueError(f"resume: {algorithm.name!r} needs "
                         f"{'control variates' if algorithm.variance else 'no control variates'}, but the saved "
                         f"state {'has none' if state.variates is None else 'has them'} (written by another algorithm?)")
    if state.num_clients is None:
        raise ValueError(f"resume: the saved state does not say its number of clients (num_clients is None: built by "
                         f"hand, or read from a checkpoint older than the field); if it is this problem's {m}, give "
                         f"state._replace(num_clients={m})")
    if state.num_clients != m:
        raise ValueError(f"resume: the saved state is for {state.num_clients} clients, the problem has {m}")
    why = server_state_mismatch(algorithm, state)
    if why is not None:
        raise ValueError(f"resume: {why}")
    if state.round != len(history):
        raise ValueError(f"resume: the saved state is after round {state.round} but the history has "
                         f"{len(history)} round{'' if len(history) == 1 else 's'}")
    if len(history) > rounds:
        raise ValueError(f"resume: the checkpoint has {len(history)} rounds done, more than rounds = {rounds}")
    params = state.params
    shape = tuple(params.shape) if hasattr(params, "shape") else None
    if shape != tuple(packed_shape):
        got = f"shape {shape}" if shape is not None else type(params).__name__
        raise ValueError(f"resume: the saved parameters must be the packed array of shape {tuple(packed_shape)} that "
                         f"run_batched keeps, got {got} (a run_sequential state holds a dict {{'W', 'b'}}: pack it "
                         f"with fedlib.problems.logistic.pack_params)")


def _state_to_backend(be, state: ServerState) -> ServerState:
    """A (checkpointed, numpy) server state with every array moved to the backend."""
    from ..tree import tree_map

    def conv(x):
        if isinstance(x, np.ndarray) or hasattr(x, "detach"):
            x = x.detach().cpu().numpy() if hasattr(x, "detach") else x
            return be.asarray(np.array(x, copy=True))
        return x

    def conv_tuple(obj):
        if obj is None:
            return None
        if isinstance(obj, tuple) and hasattr(obj, "_fields"):
            return type(obj)(*[conv_tuple(v) for v in obj])
        if isinstance(obj, (np.ndarray,)) or hasattr(obj, "detach"):
            return conv(obj)
        if isinstance(obj, (dict, list)):
            return tree_map(conv, obj)
        return obj

    return ServerState(conv(state.params), conv_tuple(state.server), conv_tuple(state.variates), int(state.round),
                       state.num_clients)


def _to_dict(be, theta, copy: bool = False) -> dict:
    arr = be.to_numpy(theta)
    if copy:
        arr = np.array(arr, copy=True)
    return unpack_params(arr)


def _local_phase(be, solver, theta0, corr, clients, tau, n_i, offsets, Xall, Yall, B, D, C, l2, seed, t, fast,
                 cache=None, labels=None):
    """Run the local steps of the sorted participants; return (final params stacked, a_norms).

    ``Yall``: the one-hot training labels on the backend, gathered with the features; or, with ``labels`` (numpy:
    the int64 training labels; ``Yall`` is then unused), each window's one-hot labels times the sample weights are
    written directly, the weight at the sample's label and +0.0 elsewhere: the bits of ``one_hot * w``
    (``1.0 * w = w``, ``0.0 * w = +0.0`` for the weights ``1/count >= 0``) without gathering the one-hot rows."""
    q = clients.size
    K = int(tau[0])
    # clients still running at step k: #{tau_j > k}, a prefix since tau is sorted descending
    active = np.searchsorted(-tau, -np.arange(K), side="left")
    off = np.concatenate([[0], np.cumsum(active)])
    R = int(off[-1])
    idx_all, cnt_all = [], []
    for c, tj in zip(clients.tolist(), tau.tolist()):
        idx, cnt = _minibatch_indices(int(n_i[c]), B, tj, generator(seed, "batches", t, c))
        idx_all.append(idx)
        cnt_all.append(cnt)
    # client j's step k is row off[k] + j (every row is some client's step)
    rows = off[np.arange(R) - np.repeat(np.cumsum(tau) - tau, tau)] + np.repeat(np.arange(q), tau)
    gidx = np.empty((R, B), dtype=np.int64)
    gidx[rows] = np.concatenate(idx_all) + np.repeat(offsets[clients], tau)[:, None]
    cnts = np.empty((R, 1), dtype=np.int64)
    cnts[rows, 0] = np.concatenate(cnt_all)
    wts = ((np.arange(B)[None, :] < cnts) / cnts)[:, :, None]

    # step sizes and the online counter ||a^(k)||_1 (the same for every client at step k;
    # entry k depends on k only, so a run computes them once per learning rate)
    cached = None if cache is None else cache.get(solver.lr)
    if cached is None or len(cached[0]) < K:
        sizes = [solver.step_size(k) for k in range(K)]
        cached = (sizes, solver.online_a_norms(K), _scalars(sizes))
        if cache is not None:
            cache[solver.lr] = cached
    # numpy: the step sizes as 0-d float64 arrays (the same values; a Python float is converted at every multiply)
    lrs = cached[2] if be.name == "numpy" else cached[0]
    a_norms = cached[1][tau - 1]

    theta = be.empty((q, D, C))
    theta[...] = theta0
    mom = be.zeros((q, D, C)) if solver.momentum > 0 else None
    kernel = _grad_kernel(be)
    generic = None
    if not fast:
        generic = [SolverState(theta, theta0 if solver.mu > 0 else None, mom, corr, 0, (0.0, 0.0), 0.0), q]

    active_list = active.tolist()
    # windows of steps whose gathered mini-batches fit in GATHER_BYTES (cache-sized, reused buffers)
    max_rows = min(max(int(GATHER_BYTES // (B * (D + C + 1) * 8)), q), R)
    Xbuf, Ybuf = be.empty((max_rows, B, D)), be.empty((max_rows, B, C))
    if labels is not None:  # every row's labels; positions of a window's labels in its flat Ybuf
        ylab = labels.take(gidx)
        ybase = np.arange(max_rows * B, dtype=np.int64) * C
        ypos = np.empty(max_rows * B, dtype=np.int64)
        wflat = wts.reshape(-1)
    Wbuf = None if be.name == "numpy" else be.empty((max_rows, B, 1))  # numpy: views of wts
    # scratch: Z, G, solver temporary; single-client steps: row sums (B, 1) and per step
    # (max_rows, B), a 0-d for the batch maximum and (B, C) for the softmax scale (numpy only)
    bufs = (be.empty((q, B, C)), be.empty((q, D, C)), be.empty((q, D, C)), be.empty((B, 1)), be.empty((max_rows, B)),
            be.empty(()), np.empty((B, C)) if be.name == "numpy" else None)
    k0 = 0
    offs = off.tolist()  # python ints: the windows' bounds by bisect (np.searchsorted on a numpy scalar costs more)
    while k0 < K:
        k1 = bisect_right(offs, offs[k0] + max_rows) - 1
        k1 = min(max(k1, k0 + 1), K)
        r0, r1 = offs[k0], offs[k1]
        n = r1 - r0
        Xw, Yw = Xbuf[:n], Ybuf[:n]
        be.take(Xall, gidx[r0:r1], Xw)
        if Wbuf is None:
            ww = wts[r0:r1]
        else:
            ww = Wbuf[:n]
            ww[...] = be.asarray(wts[r0:r1])
        if labels is not None:  # Yw = one_hot * w: w at each sample's label, +0.0 elsewhere
            Yw.fill(0.0)
            pos = ypos[:n * B]
            np.add(ybase[:n * B], ylab[r0:r1].reshape(-1), out=pos)
            Yw.reshape(-1)[pos] = wflat[r0 * B:r1 * B]
        else:
            be.take(Yall, gidx[r0:r1], Yw)
            Yw *= ww
        window = (k0, k1, active_list, (off[k0:k1 + 1] - r0).tolist(), lrs, Xw, Yw, ww)
        if fast:
            _steps_fast(be, kernel, solver, theta, theta0, mom, corr, bufs, l2, window)
        else:
            _steps_generic(kernel, solver, theta, generic, bufs, l2, window)
        k0 = k1
    if not fast:
        state, width = generic
        theta[:width] = state.params[:width]
    return theta, a_norms


def _negative(v):
    return -v


def _scalars(values) -> list:
    """``values`` as read-only 0-d float64 arrays (numpy multiplies by one without converting a Python float)."""
    out = []
    for v in values:
        a = np.array(v, dtype=np.float64)
        a.flags.writeable = False
        out.append(a)
    return out


def _grad_kernel(be):
    from ..problems import logistic

    return logistic._packed_grad_torch if be.name == "torch" else logistic._packed_grad_numpy


def _steps_fast(be, kernel, solver, theta, theta0, mom, corr, bufs, l2, window):
    """Local steps k0..k1-1 in place on the stack: LocalSolver's step, element-wise in the
    same order of operations (hence the same bits).

    numpy: once a single client is left (the critical path: most steps on skewed data),
    the steps run on 2-d views with ``fedlib.problems.logistic._packed_grad_numpy_one``
    (the same operations, fewer and cheaper calls); plain SGD steps in one call of its loop,
    ``_packed_sgd_steps_numpy_one`` (the same bits, no Python call per step). The step sizes
    ``lrs`` are 0-d float64 arrays with numpy (the same values, no conversion at each multiply)."""
    k0, k1, active, off, lrs, Xw, Yw, ww = window
    Zb, Gb, Tb = bufs[:3]
    rho, mu, wd = solver.momentum, solver.mu, solver.weight_decay
    plain = not (rho > 0 or mu > 0 or wd or corr is not None)
    k_one = k1
    if be.name == "numpy" and active[k1 - 1] == 1:  # active is non-increasing: steps [k_one, k1) run one client
        k_one = bisect_left(active, -1, k0, k1 - 1, key=_negative)  # the first of them: active[k] <= 1
    for k in range(k0, k_one):
        a = active[k]
        s0 = off[k - k0]
        s1 = s0 + a
        th = theta[:a]
        g = Gb[:a]
        kernel(th, Xw[s0:s1], Yw[s0:s1], ww[s0:s1], Zb[:a], g, l2)
        if plain:  # x <- x - lr_k * g
            g *= lrs[k]
            th -= g
            continue
        _solver_step(be, th, g, Tb[:a], None if mom is None else mom[:a], None if corr is None else corr[:a],
                     theta0, rho, mu, wd, lrs[k])
    if k_one == k1:
        return
    r0 = off[k_one - k0]
    r1 = r0 + (k1 - k_one)
    th, g, Z, tmp, s_col, sums, mx, S = theta[0], Gb[0], Zb[0], Tb[0], bufs[3], bufs[4][:r1 - r0], bufs[5], bufs[6]
    s = s_col[:, 0]
    _ones(Z.shape[1])
    Xs = Xw[r0:r1]
    rows = (Xs, Xs.swapaxes(1, 2), Yw[r0:r1], ww[r0:r1, :, 0], lrs[k_one:k1])
    if plain:
        # the underflow check once for these steps: the row sums are kept and checked at
        # the end; if one underflowed (or is NaN), the steps are redone from a copy with
        # the check at every step
        start = th.copy()
        _sgd_steps_one(th, Xs, rows[2], rows[3], rows[4], Z, g, s, s_col, l2, sums, S)
        if np.minimum.reduce(sums, axis=None) >= _UNDERFLOW:
            return
        th[...] = start
        for X1, XT1, Y1, w1, lr in zip(*rows):
            _grad_one(th, X1, XT1, Y1, w1, Z, g, s, s_col, mx, l2, None, S)
            g *= lr
            th -= g
        return
    m1 = None if mom is None else mom[0]
    c1 = None if corr is None else corr[0]
    for X1, XT1, Y1, w1, lr in zip(*rows):
        _grad_one(th, X1, XT1, Y1, w1, Z, g, s, s_col, mx, l2, None, S)
        _solver_step(be, th, g, tmp, m1, c1, theta0, rho, mu, wd, lr)


def _solver_step(be, th, g, tmp, mom, corr, theta0, rho, mu, wd, lr):
    """The non-plain in-place step (weight decay, correction, momentum, proximal term)."""
    if wd:
        g += be.mul(th, wd, tmp)
    if corr is not None:
        g += corr
    if rho > 0:
        direction = mom
        direction *= rho
        direction += g
    else:
        direction = g
    if mu > 0:
        prox = be.sub(th, theta0, tmp)
        prox *= mu
        prox += direction
        direction = prox
    th -= be.mul(direction, lr, tmp)


def _steps_generic(kernel, solver, theta, generic, bufs, l2, window):
    """Local steps k0..k1-1 with :meth:`~fedlib.solvers.LocalSolver.update` on the stacked arrays (out of
    place); rows of clients that finish are copied back into ``theta``."""
    k0, k1, active, off, lrs, Xw, Yw, ww = window
    Zb, Gb = bufs[:2]
    state, width = generic
    for k in range(k0, k1):
        a = active[k]
        if a < width:  # clients [a:width] finished: keep their rows, shrink the views
            theta[a:width] = state.params[a:width]
            state = SolverState(state.params[:a], _head(state.anchor, a), _head(state.momentum, a),
                                _head(state.correction, a), state.step, state.shadow, state.a_norm)
            width = a
        s0 = off[k - k0]
        kernel(state.params, Xw[s0:s0 + a], Yw[s0:s0 + a], ww[s0:s0 + a], Zb[:a], Gb[:a], l2)
        state = solver.update(state, Gb[:a])
    generic[0], generic[1] = state, width


def _head(x, a):
    if x is None:
        return None
    if getattr(x, "ndim", 0) >= 3:  # stacked (clients first); the shared anchor x^(t,0) is 2-d
        return x[:a]
    return x


# ----------------------------------------------------------------------------- the per-client loop
_ROUND_RE = re.compile(r"round (\d+)")


def run_reference(algorithm: FederatedAlgorithm, problem: LogisticProblem, schedule, rounds: int, *,
                  batch_size: int, seed: int = 0, sampling="full", clients_per_round: Optional[int] = None,
                  lr_at: Optional[Callable[[int], float]] = None, params: Optional[dict] = None,
                  backend: str = "numpy", device: Optional[str] = None, evaluate: bool = True, fast: bool = True,
                  callback: Optional[Callable[[dict], None]] = None, comm=None, resume: Optional[dict] = None,
                  on_round_end: Optional[Callable[[ServerState, list, dict], None]] = None) -> EngineRun:
    r"""The same run as :func:`run_batched`, one client after another and one step after
    another (:func:`fedlib.engines.reference.run_sequential` with
    :meth:`~fedlib.problems.logistic.LogisticProblem.grad_fn`): the way common simulators train. Same arguments
    and records; ``backend``, ``device`` and ``fast`` only choose how :func:`run_batched` computes, so they are
    accepted and ignored here (numpy, float64). ``comm``, ``resume`` and ``on_round_end`` (several processes,
    checkpoints) are :func:`run_batched`'s alone: anything but ``None`` is refused, never silently dropped.
    The tests compare the two engines' numbers (chapter 4 relies on them); :func:`run_batched`'s example
    does it on three clients.

    The arguments are :func:`run_batched`'s: ``algorithm`` a :class:`~fedlib.algorithms.FederatedAlgorithm`,
    ``problem`` a :class:`~fedlib.problems.logistic.LogisticProblem`, ``schedule`` an object with
    ``local_steps(round)``, ``rounds`` the number of rounds, ``sampling`` and ``clients_per_round`` the participation,
    ``lr_at`` ``round -> client lr`` (default the solver's), ``params`` the starting ``{"W", "b"}`` (default:
    ``problem.init_params()``), ``evaluate`` whether to compute the metrics after every round, ``callback`` called with
    each round's record as the round ends (as :func:`run_batched` calls it).

    Example
    -------
    >>> from fedlib.algorithms import make_algorithm
    >>> from fedlib.data import synthetic
    >>> from fedlib.problems.logistic import LogisticProblem
    >>> from fedlib.schedules import FixedSteps
    >>> from fedlib.solvers import sgd
    >>> prob = LogisticProblem(synthetic(num_clients=2, dim=3, num_classes=2, num_samples=[10, 20], seed=0))
    >>> run = run_reference(make_algorithm("fednova", sgd(0.1)), prob, FixedSteps([1, 3]), 1, batch_size=5)
    >>> run.history[0]["local_steps"], run.history[0]["tau_eff"]
    ([1, 3], 2.3333333333333335)
    >>> run_reference(make_algorithm("fednova", sgd(0.1)), prob, FixedSteps([1, 3]), 1, batch_size=5,
    ...               resume={})  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    ValueError: resume: run_reference does not support it (several processes and checkpoints are
    run_batched's); use engine='batched'
    """
    check_choice("backend", backend, BACKENDS)
    for name, value in (("comm", comm), ("resume", resume), ("on_round_end", on_round_end)):
        if value is not None:
            raise ValueError(f"{name}: run_reference does not support it (several processes and checkpoints are "
                             "run_batched's); use engine='batched'")
    rounds, batch_size, seed, clients_per_round = _check_common(
        algorithm, problem, schedule, rounds, batch_size, sampling, clients_per_round, seed)
    _check_hooks(lr_at=lr_at, callback=callback)
    evaluate = check_flag("evaluate", evaluate)  # as run_batched checks them ("no" is truthy)
    check_flag("fast", fast)
    x0 = problem.init_params() if params is None else params
    problem.model._check_params(x0, stacked=False)
    state = algorithm.init(x0, problem.num_clients)
    initial = _metrics(problem, state.params, -1, evaluate)
    grad_fn = problem.grad_fn(seed, batch_size)  # one batcher for the run: its permutations are drawn lazily
    history: list = []
    clock = time.perf_counter()
    for t in range(rounds):  # one round per call: run_sequential continues a state bit for bit (its first_round)
        try:
            with np.errstate(all="ignore"):  # NaN/inf are caught by apply and the loss check
                run = run_sequential(algorithm, None, grad_fn, problem.p, schedule, 1, sampling=sampling,
                                     clients_per_round=clients_per_round, seed=seed, lr_at=lr_at, initial_state=state,
                                     first_round=t)
        except FloatingPointError as exc:
            mt = _ROUND_RE.search(str(exc))
            raise DivergenceError(int(mt.group(1)) if mt else t, str(exc).split(": ", 1)[-1]) from None
        state = run.state
        met = _metrics(problem, state.params, t, evaluate)
        now = time.perf_counter()
        rec = _record(t, _round_lr(algorithm, lr_at, t), run.diagnostics[0], met, now - clock)
        clock = now
        history.append(rec)
        if callback is not None:  # as run_batched: as each round ends
            callback(rec)
    params_out = {k: np.array(v, copy=True) for k, v in state.params.items()}
    return EngineRun(params_out, state, initial, history)


def run_engine(engine: str, *args, **kwargs) -> EngineRun:
    """:func:`run_batched` (``engine="batched"``) or :func:`run_reference` (``"reference"``), with the
    same arguments; the CLI's ``--engine`` (one of ``ENGINES``). Any other name is a ``ValueError``.

    Example
    -------
    >>> from fedlib.algorithms import make_algorithm
    >>> from fedlib.data import synthetic
    >>> from fedlib.problems.logistic import LogisticProblem
    >>> from fedlib.schedules import FixedSteps
    >>> from fedlib.solvers import sgd
    >>> prob = LogisticProblem(synthetic(num_clients=2, dim=3, num_classes=2, num_samples=[10, 20], seed=0))
    >>> args = (make_algorithm("fedavg", sgd(0.1)), prob, FixedSteps([1, 2]), 1)
    >>> [len(run_engine(engine, *args, batch_size=5).history) for engine in ENGINES]
    [1, 1]
    >>> run_engine("loop", *args, batch_size=5)
    Traceback (most recent call last):
    ...
    ValueError: engine must be one of ['batched', 'reference'], got 'loop'
    """
    check_choice("engine", engine, ENGINES)
    return (run_batched if engine == "batched" else run_reference)(*args, **kwargs)

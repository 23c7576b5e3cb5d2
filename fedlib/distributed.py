r"""The batched engine on several processes (``torch.distributed``): clients split across ranks.

Launch any ``python -m fedlib run synthetic ...`` command with ``torchrun`` (it sets
``WORLD_SIZE`` / ``RANK``; ``--distributed`` forces the mode)::

    torchrun --nproc_per_node 2 -m fedlib run synthetic --rounds 100 --out run.json
    # two machines, one process each (run the same line on both):
    torchrun --nnodes 2 --nproc_per_node 1 --rdzv_backend c10d --rdzv_endpoint HOST:29500 \
        -m fedlib run synthetic --rounds 100 --out run.json

Backend: gloo on the CPU, NCCL when the run's device is a GPU. Every rank loads the
same data and follows the same seeded streams (:mod:`fedlib.rng`), so every rank draws
the same participants and the same :math:`\tau_i`; rank ``r`` *owns* the clients of
block ``r`` of ``np.array_split(range(m), world_size)`` (it holds their control
variates :math:`c_i`) and trains only the participants it owns, with the same
vectorised engine (:func:`fedlib.engines.batched.run_batched`). A round then ends with
collectives (:func:`distributed_apply`), as the official FedNova code did on 16 machines:

1. ``all_gather`` of the owned participants' :math:`\|a_i\|_1` and :math:`\tau_i`:
   every rank computes the same :math:`\tau_{\text{eff}}`, :math:`w_i`, :math:`\chi^2`
   (:func:`fedlib.rule.effective_weights`);
2. the aggregated change :math:`\sum_i c_i \Delta_i`, :math:`c_i=\tau_{\text{eff}} w_i/\|a_i\|_1`,
   as an all-reduce of each rank's partial sum over its own participants;
3. variance reduction: each rank updates its clients' :math:`c_i`; the mean
   :math:`\bar c=\sum_j p_j c_j` is an all-reduce of the ranks' partial sums;
4. the server optimizer (momentum, Adam) runs on every rank on identical inputs, so
   every rank ends the round with the same global model and server state.

The all-reduce is done as ``all_gather`` + a sum in rank order (:meth:`Communicator.allreduce_sum`):
the result is bitwise identical on every rank and does not depend on the collective's
internal algorithm; it differs from one process only by the order of the floating-point
additions (about 1e-16 relative in float64). Only rank 0 writes the result file.

:class:`LocalCommunicator` is the one-process communicator (world size 1); with one process
(either communicator) a round is :meth:`~fedlib.algorithms.FederatedAlgorithm.apply`'s bit for bit, so a
plain run and ``torchrun --nproc_per_node 1`` resume each other's checkpoints exactly. The tests compare
1, 2 and 3 gloo processes. A run's returned state has every client's control variate on
every rank (:func:`gather_variates` at the end of :func:`fedlib.engines.batched.run_batched`).

A rank whose own per-round code fails (its clients' local training, the ``lr_at`` / sampler / schedule hooks, the
round's metrics, ``callback`` or ``on_round_end``) does not stop alone, which would leave the other ranks waiting in
their next collective until the process group's timeout (10 minutes), or dying with gloo's "Connection closed by
peer" once its process exits: :func:`fedlib.engines.batched.run_batched` hands the error on in the next collective
that every rank makes anyway (the first one of :func:`distributed_apply`; after the last round, one small collective
per run). The failing rank raises its own error there, every other rank a :class:`RankStopped` naming the rank, the
round and the error.
"""
from __future__ import annotations

import atexit
import os
from typing import Optional, Sequence

import numpy as np

from ._validate import check_int, check_positive, check_probability_vector, tensor_as_float64
from .algorithms import (FederatedAlgorithm, RoundDiagnostics, ServerState, _check_round_state, _check_state_kinds,
                         _run_server_optimizer, check_client_indices, client_update_problem)
from .rule import effective_weights
from .sampling import Participation, as_participation
from .theory import _round_chi_square
from .tree import (leaf_kind, tree_all_finite, tree_index, tree_kind_mismatch, tree_leaves, tree_map,
                   tree_stacked_weighted_sum, tree_structure_equal, tree_weighted_sum)
from .variance import ControlVariates, updated_client_variates

__all__ = ["Communicator", "LocalCommunicator", "TorchCommunicator", "under_torchrun", "init_from_env",
           "owned_clients", "distributed_apply", "RankStopped"]


def under_torchrun(environ=None) -> bool:
    """True when the process was started by ``torchrun`` (``WORLD_SIZE`` and ``RANK`` set in ``environ``,
    default ``os.environ``): the CLI then runs distributed.

    Example
    -------
    >>> under_torchrun({"WORLD_SIZE": "2", "RANK": "1"}), under_torchrun({"RANK": "1"})
    (True, False)
    """
    env = os.environ if environ is None else environ
    return "WORLD_SIZE" in env and "RANK" in env


def owned_clients(num_clients: int, world_size: int, rank: int) -> np.ndarray:
    r"""Clients of rank ``rank``: block ``rank`` of ``np.array_split(range(m), world_size)``.

    The first :math:`m \bmod W` ranks of :math:`W` own :math:`\lceil m/W\rceil` clients, the others
    :math:`\lfloor m/W\rfloor`. ``num_clients`` and ``world_size`` must be integers >= 1, ``rank`` one of
    ``0 .. world_size - 1``, and every rank needs a client (``world_size <= num_clients``): a ``ValueError``
    otherwise (a rank of -1 is not the last one).

    Example
    -------
    Five clients on two ranks: :math:`5 \bmod 2 = 1` rank of 3 clients, then one of 2:

    >>> [owned_clients(5, 2, rank).tolist() for rank in range(2)]
    [[0, 1, 2], [3, 4]]
    >>> owned_clients(5, 2, 2)
    Traceback (most recent call last):
    ...
    ValueError: rank must be in 0..1 (one of the 2 processes), got 2
    """
    num_clients = check_int("num_clients", num_clients, minimum=1)
    world_size = check_int("world_size", world_size, minimum=1)
    rank = check_int("rank", rank)
    if rank >= world_size:
        raise ValueError(f"rank must be in 0..{world_size - 1} (one of the {world_size} processes), got {rank!r}")
    if world_size > num_clients:
        raise ValueError(f"world size: {world_size} processes but only {num_clients} clients "
                         f"(every rank needs at least one client; use at most {num_clients} processes)")
    try:  # 2**70 was numpy's "Maximum allowed size exceeded", naming no argument; 2**63 an empty float array
        clients, why = np.arange(num_clients), ""
    except ValueError as exc:
        clients, why = None, f" ({exc})"
    if clients is None or clients.size != num_clients:
        raise ValueError(f"num_clients={num_clients} is too many: numpy cannot make an array of that many client "
                         f"indices{why}")
    return np.array_split(clients, world_size)[rank]


class Communicator:
    """Rank, world size and the three collectives the engine needs (numpy in, numpy out).

    A subclass provides ``all_gather_object`` and ``all_gather_array`` (one entry per rank, in rank
    order); :meth:`owns`, :meth:`allreduce_sum` and ``check_clients`` are built on them and on
    :func:`owned_clients`. :class:`LocalCommunicator` (one process) and :class:`TorchCommunicator`
    (``torch.distributed``) are the two fedlib has.

    Example
    -------
    With one process every client is this rank's and the sum over ranks is the array itself (its
    dtype kept):

    >>> import numpy as np
    >>> comm = LocalCommunicator()
    >>> comm.owns([0, 3], num_clients=4), comm.allreduce_sum(np.array([1.0, 2.0], dtype=np.float32))
    (array([ True,  True]), array([1., 2.], dtype=float32))
    """

    rank: int = 0
    world_size: int = 1

    def all_gather_object(self, obj) -> list:  # pragma: no cover - interface
        raise NotImplementedError

    def all_gather_array(self, x: np.ndarray) -> list:  # pragma: no cover - interface
        raise NotImplementedError

    # ------------------------------------------------------------------ derived
    def check_clients(self, num_clients: int) -> None:
        owned_clients(num_clients, self.world_size, self.rank)

    def owns(self, clients: np.ndarray, num_clients: int) -> np.ndarray:
        """Boolean mask of ``clients`` owned by this rank; ``clients`` are integer indices in
        ``0 .. num_clients - 1`` (a ``ValueError`` otherwise, as ``check_client_indices`` raises it)."""
        mine = owned_clients(num_clients, self.world_size, self.rank)
        check_client_indices(clients, num_clients)
        return np.isin(np.asarray(clients), mine)

    def allreduce_sum(self, x):
        """:math:`\\sum_r x_r` over ranks, summed in rank order (identical bits on every rank).
        ``x`` is a numpy array or a torch tensor of real or complex floating-point numbers (what the engine
        sums: weighted sums of the clients' changes), returned as the same kind and dtype; the sum is taken
        in float64 (a complex one part by part, as ``complex128`` adds). Integers and bools are a
        ``ValueError`` naming ``x``: their float64 sum would not come back as they are (numpy integers and
        bools as float64, a torch integer rounded past 2**53, torch bools OR-ed)."""
        is_torch = hasattr(x, "detach")
        arr = x if is_torch else np.asarray(x)
        if not ((x.is_floating_point() or x.is_complex()) if is_torch else arr.dtype.kind in "fc"):
            raise ValueError(f"x must be a numpy array or torch tensor of real or complex floats (allreduce_sum "
                             f"adds the ranks' parts in float64 and returns x's dtype), got dtype {arr.dtype}")
        complex_ = bool(x.is_complex()) if is_torch else arr.dtype.kind == "c"
        # a complex leaf travels as its real and imaginary parts, stacked: one collective, float64 sums
        if is_torch:
            import torch

            # exact for every dtype (bfloat16 has no numpy dtype); a complex tensor as its two parts, first
            send = (np.moveaxis(tensor_as_float64(torch.view_as_real(x.detach().resolve_conj())), -1, 0) if complex_
                    else tensor_as_float64(x))
        else:
            send = np.stack([arr.real, arr.imag]) if complex_ else arr
        parts = self.all_gather_array(np.ascontiguousarray(send, dtype=np.float64))
        total = parts[0].copy()
        for part in parts[1:]:
            total += part
        total = total.reshape(send.shape)  # ascontiguousarray makes a 0-d leaf 1-d
        if complex_:  # the parts set, not re + 1j * im: 1j * inf has a NaN real part
            parts_sum, total = total, np.empty(send.shape[1:], dtype=np.complex128)
            total.real, total.imag = parts_sum[0], parts_sum[1]
        if is_torch:
            return torch.as_tensor(total, dtype=x.dtype, device=x.device)
        # a float32 leaf came back float64 (one process keeps float32): the model changed dtype
        return total.astype(arr.dtype)

    def barrier(self) -> None:
        pass


def _check_communicator(comm) -> None:
    """``ValueError`` naming ``comm`` unless it is a :class:`Communicator` (it was an ``AttributeError``
    on ``comm.rank`` or ``comm.check_clients``)."""
    if not isinstance(comm, Communicator):
        raise ValueError(f"comm must be a fedlib.distributed.Communicator (LocalCommunicator, TorchCommunicator or "
                         f"a subclass), got {type(comm).__name__}")


class LocalCommunicator(Communicator):
    """One process, world size 1 (the collectives are identities): what ``comm=None`` means for
    :func:`fedlib.engines.batched.run_batched`, and the tests' reference for 2 and 3 processes.

    Example
    -------
    >>> import numpy as np
    >>> comm = LocalCommunicator()
    >>> comm.rank, comm.world_size, comm.all_gather_object({"a_norm": 2.0}), comm.all_gather_array(np.ones(2))
    (0, 1, [{'a_norm': 2.0}], [array([1., 1.])])
    """

    def all_gather_object(self, obj) -> list:
        return [obj]

    def all_gather_array(self, x: np.ndarray) -> list:
        return [np.array(x, copy=True)]


class TorchCommunicator(Communicator):
    """Collectives of an initialised ``torch.distributed`` process group (:func:`init_from_env` makes
    the group under ``torchrun`` and returns one). ``device`` is where ``all_gather_array`` puts its
    tensors: ``"cpu"`` for gloo, the rank's GPU for NCCL.

    Example
    -------
    A group of one process (an in-memory store instead of torchrun's rendezvous); with ``N``
    processes each list has ``N`` entries in rank order, the same on every rank:

    >>> import numpy as np
    >>> import torch.distributed as dist
    >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    >>> comm = TorchCommunicator()
    >>> comm.rank, comm.world_size, comm.all_gather_object({"tau": 4}), comm.allreduce_sum(np.arange(3.0))
    (0, 1, [{'tau': 4}], array([0., 1., 2.]))
    >>> dist.destroy_process_group()
    """

    def __init__(self, device: str = "cpu"):
        import torch
        import torch.distributed as dist

        if not dist.is_initialized():
            raise RuntimeError("torch.distributed is not initialised (use init_from_env)")
        self.dist, self.torch = dist, torch
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.device = torch.device(device)

    def all_gather_object(self, obj) -> list:
        out = [None] * self.world_size
        self.dist.all_gather_object(out, obj)
        return out

    def all_gather_array(self, x: np.ndarray) -> list:
        t = self.torch.as_tensor(x, device=self.device)
        out = [self.torch.empty_like(t) for _ in range(self.world_size)]
        self.dist.all_gather(out, t)
        return [o.cpu().numpy() for o in out]

    def barrier(self) -> None:
        self.dist.barrier()


def init_from_env(device: str = "cpu", backend: Optional[str] = None, timeout_s: float = 600.0) -> TorchCommunicator:
    """Initialise the process group from torchrun's environment (``env://``: ``WORLD_SIZE``, ``RANK``,
    ``MASTER_ADDR``, ``MASTER_PORT``) and return its :class:`TorchCommunicator`; gloo for a CPU run,
    NCCL for a GPU run (``backend`` overrides; a ``"cuda"`` device becomes ``cuda:LOCAL_RANK``). A group
    already initialised is kept. Raises ``ValueError`` outside torchrun (no ``WORLD_SIZE`` / ``RANK``).

    ``timeout_s`` is the process group's timeout for a collective, in seconds (default 600), set only when this call
    initialises the group.

    Example
    -------
    In a script launched with ``torchrun --nproc_per_node 2 script.py`` (what ``--distributed`` does)::

        comm = init_from_env()                                # rank 0 or 1, world size 2
        mine = owned_clients(16, comm.world_size, comm.rank)  # this rank's 8 of 16 clients

    Here, torchrun's environment for one process, set by hand (port 0: any free port):

    >>> import os
    >>> from unittest import mock
    >>> import torch.distributed as dist
    >>> one_process = {"WORLD_SIZE": "1", "RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "0"}
    >>> with mock.patch.dict(os.environ, one_process):
    ...     comm = init_from_env()
    >>> comm.rank, comm.world_size, comm.all_gather_object("round 1")
    (0, 1, ['round 1'])
    >>> dist.destroy_process_group()
    """
    import datetime

    import torch
    import torch.distributed as dist

    if not dist.is_available():
        raise ValueError("--distributed: this torch build has no torch.distributed")
    if not under_torchrun():
        raise ValueError("--distributed: WORLD_SIZE / RANK are not set; launch with torchrun "
                         "(torchrun --nproc_per_node N -m fedlib run synthetic ...)")
    if backend is None:
        backend = "nccl" if str(device).startswith("cuda") else "gloo"
    if str(device).startswith("cuda"):
        local = int(os.environ.get("LOCAL_RANK", "0"))
        device = f"cuda:{local}"
        torch.cuda.set_device(local)
    if not dist.is_initialized():
        dist.init_process_group(backend, init_method="env://", timeout=datetime.timedelta(seconds=timeout_s))
        # a group still alive when the interpreter shuts down is torn down by C++ destructors with its
        # threads running: once in a while a rank then died with "terminate called without an active
        # exception" (SIGABRT, exit status -6) after its work was done. Destroy it first (registered
        # once, however many groups a process initialises and destroys in turn).
        atexit.unregister(_destroy_process_group)
        atexit.register(_destroy_process_group)
    return TorchCommunicator(device)


def _destroy_process_group() -> None:
    """At exit: destroy the default process group if nobody did (the CLI does it itself)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


class RankStopped(RuntimeError):
    r"""What the other ranks of a distributed run raise when one rank's own per-round code failed (its clients'
    local training, a hook, the progress bar): the failing rank raises its own error, the others this one, at the
    collective where the error reached them (:func:`fedlib.engines.batched.run_batched`).

    ``stops`` lists ``(rank, round, error)`` for each rank that stopped, in rank order: ``rank`` and ``round``
    integers >= 0, ``error`` the rank's error as text (``"TypeName: message"``; a ``ValueError``, an input problem,
    by its message alone); kept as ``stops``, with the ranks in ``ranks``. A ``ValueError`` naming
    ``stops`` if it is empty or its entries are not such triples.

    Example
    -------
    >>> err = RankStopped([(1, 7, "FloatingPointError: overflow in client 5's step")])
    >>> print(err)
    a rank stopped in round 7 (rank 1: FloatingPointError: overflow in client 5's step); every rank stops
    >>> err.ranks, isinstance(err, RuntimeError)
    ([1], True)
    >>> print(RankStopped([(0, 3, "OSError: disk full"), (2, 4, "KeyError: 'x'")]))
    ranks stopped in rounds 3, 4 (rank 0 in round 3: OSError: disk full; rank 2 in round 4: KeyError: 'x'); every rank stops
    """

    def __init__(self, stops):
        try:
            entries = [(check_int("rank", r, minimum=0), check_int("round", t, minimum=0), str(e)) for r, t, e in stops]
        except (TypeError, ValueError) as exc:
            raise ValueError(f"stops must be (rank, round, error) triples of integers >= 0 and a text ({exc})") \
                from None
        if not entries:
            raise ValueError("stops must name at least one rank that stopped, got none")
        #: ``(rank, round, error)`` of each rank that stopped, in rank order.
        self.stops = sorted(entries)
        #: The ranks that stopped.
        self.ranks = [r for r, _, _ in self.stops]
        rounds = sorted({t for _, t, _ in self.stops})
        if len(rounds) == 1:
            told = "; ".join(f"rank {r}: {e}" for r, _, e in self.stops)
            where = f"round {rounds[0]}"
        else:
            told = "; ".join(f"rank {r} in round {t}: {e}" for r, t, e in self.stops)
            where = "rounds " + ", ".join(map(str, rounds))
        who = "a rank" if len(self.stops) == 1 else "ranks"
        super().__init__(f"{who} stopped in {where} ({told}); every rank stops")


def _failure_text(failed: BaseException) -> str:
    """A rank's error as the other ranks are told of it: a ``ValueError`` (an input problem) by its message, any
    other error as ``"TypeName: message"``."""
    return str(failed) if isinstance(failed, ValueError) else f"{type(failed).__name__}: {failed}"


def _stop_entry(gathered: dict):
    return gathered.get("stopped") if isinstance(gathered, dict) else None


def _raise_if_stopped(gathered: list) -> None:
    """:class:`RankStopped` if a rank's entry of a gather says it stopped (``_stop_round``)."""
    stops = [(r, *entry) for r, entry in enumerate(map(_stop_entry, gathered)) if entry is not None]
    if stops:
        raise RankStopped(stops)


def _stop_round(comm: Communicator, failed: Optional[tuple]) -> None:
    """Hand this rank's per-round error to every rank, ``failed`` being ``(round, error)`` (``None``: none), in
    the collective that :func:`distributed_apply` makes first (the same ``all_gather_object``: a rank that stopped
    meets the others in their next round's aggregation) or at the end of a run, where every rank calls this. Then
    raise: this rank its own error, the others :class:`RankStopped` naming every rank that stopped, the round its
    error came from and the error."""
    stopped = None if failed is None else (int(failed[0]), _failure_text(failed[1]))
    gathered = comm.all_gather_object({"error": None, "round": None, "info": {}, "stopped": stopped})
    if failed is not None:
        raise failed[1]
    _raise_if_stopped(gathered)


def _updates_problem(rank: int, updates: list, mine: dict, owned, params) -> Optional[str]:
    """Why this rank's ``updates`` cannot enter the round (``None`` if they can): each of its own
    participants once, changes with the structure and leaf shapes of the model (``x + change``
    would broadcast, e.g. ``(d, 1)`` onto ``(d,)``)."""
    owned = set(np.asarray(owned).tolist())
    if len(mine) != len(updates) or not set(mine) <= owned:
        return (f"updates: rank {rank} must report each of its own participants once (it owns clients "
                f"{sorted(owned)}), got clients {[int(u.client) for u in updates]}")
    for u in updates:
        problem = client_update_problem(u)
        if problem:
            return problem
        if not tree_structure_equal(u.delta, params):
            return (f"updates: client {int(u.client)}'s delta must have the structure and leaf shapes of "
                    f"state.params (leaf shapes {[tuple(np.shape(v)) for v in tree_leaves(u.delta)]} vs "
                    f"{[tuple(np.shape(v)) for v in tree_leaves(params)]})")
        k = tree_kind_mismatch(u.delta, params)
        if k is not None:
            return (f"updates: client {int(u.client)}'s delta holds {leaf_kind(tree_leaves(u.delta)[k])} but "
                    f"state.params holds {leaf_kind(tree_leaves(params)[k])} (use one kind for the model and the "
                    "clients)")
    return None


def distributed_apply(comm: Communicator, algorithm: FederatedAlgorithm, state: ServerState,
                      participation: Participation, updates: Sequence, lr: float, p) -> tuple:
    r""":meth:`~fedlib.algorithms.FederatedAlgorithm.apply` with the participants split across ranks.

    ``updates`` are this rank's :class:`~fedlib.algorithms.ClientUpdate` (its owned
    participants, any order). Returns ``(state, diagnostics)``: the model, the server optimizer
    state, :math:`\bar c` and the diagnostics are identical on every rank, but of the stacked control
    variates each rank updates only its own clients' rows (the other rows stay as in ``state``), which
    is all its next round reads; :func:`gather_variates` (a collective: every rank calls it) assembles
    the whole stack, e.g. before a checkpoint is written.
    Updates a rank cannot hand in (another rank's client, one twice, a change of another
    shape than the model) raise the same ``ValueError`` on every rank, after the first
    collective, rather than on that rank alone while the others wait in it; so do ranks whose ``state``
    is of different rounds (one resumed from a checkpoint, another started afresh). A ``state`` that is no
    :class:`~fedlib.algorithms.ServerState` of ``algorithm`` (control variates or server optimizer
    state of another kind) raises ``ValueError`` naming ``state`` before any collective, as
    :meth:`~fedlib.algorithms.FederatedAlgorithm.apply` does (every rank holds the same state), and so
    do a ``state`` whose control variates or server optimizer state hold another kind of array than its
    model (numpy arrays next to torch tensors, as ``apply`` refuses them) and a ``state`` whose ``num_clients`` is ``None`` (the ranks own blocks of the :math:`m` clients,
    :func:`owned_clients`; ``apply`` takes such a state, unchecked). ``comm`` must be a
    :class:`Communicator` (a ``ValueError`` naming it otherwise).
    A rank whose own part of the round failed before it had updates to hand in (its clients' local training in
    :func:`fedlib.engines.batched.run_batched`) meets the others in this first collective with its error instead:
    it raises that error, every other rank :class:`RankStopped` naming it, the round and the error.

    ``participation`` is the round's :class:`~fedlib.sampling.Participation`, the same on every rank; ``lr`` the
    round's client learning rate :math:`\eta` (finite, > 0); ``p`` the weights :math:`p_i` of all clients (the
    variance-reduction means).

    Example
    -------
    With one process it is :meth:`~fedlib.algorithms.FederatedAlgorithm.apply`: the two clients of
    :class:`~fedlib.algorithms.FederatedAlgorithm`'s example (:math:`\Delta = (-1, 2)`,
    :math:`\|a\|_1 = (1, 2)`, :math:`p = (1/2, 1/2)`, :math:`\eta = 1`): FedAvg moves to
    :math:`\tfrac12(-1 + 2) = 0.5`, FedNova's :math:`d = (1, -1)` average to 0:

    >>> import numpy as np
    >>> from fedlib.algorithms import ClientUpdate, make_algorithm
    >>> from fedlib.sampling import full_participation
    >>> from fedlib.solvers import sgd
    >>> updates = [ClientUpdate(0, np.array([-1.0]), a_norm=1.0, local_steps=1),
    ...            ClientUpdate(1, np.array([2.0]), a_norm=2.0, local_steps=2)]
    >>> for name in ("fedavg", "fednova"):
    ...     algorithm = make_algorithm(name, sgd(1.0))
    ...     state = algorithm.init(np.zeros(1), num_clients=2)
    ...     args = (state, full_participation([0.5, 0.5]), updates, 1.0, [0.5, 0.5])
    ...     split, diagnostics = distributed_apply(LocalCommunicator(), algorithm, *args)
    ...     whole, _ = algorithm.apply(*args)
    ...     print(name, split.params, bool(np.array_equal(split.params, whole.params)), diagnostics.tau_eff)
    fedavg [0.5] True 1.5
    fednova [0.] True 1.5
    """
    _check_communicator(comm)
    _check_round_state(algorithm, state)  # as apply; the same state on every rank, so every rank raises it
    _check_state_kinds(state)  # as apply: numpy variates or server state with a torch model
    if state.num_clients is None:  # the ranks' blocks of clients are blocks of range(m): m must be known
        raise ValueError("state.num_clients is None (a state built by hand or read from a checkpoint older than "
                         "the field): distributed_apply splits the clients across ranks by their number m; "
                         "give it, state._replace(num_clients=m)")
    lr = check_positive("lr", lr)
    participation = as_participation(participation)  # as apply takes it (one of lists failed at weights.sum())
    clients = participation.clients
    check_client_indices(clients, state.num_clients)
    if state.variates is not None and p is None:
        raise ValueError("p (weights of all clients) is required with variance reduction")
    if p is not None:  # as apply: checked for every algorithm when given (counts, NaN, another m)
        p = check_probability_vector("p", p, size=state.num_clients)
    updates = list(updates)
    mine = {int(u.client): u for u in updates}
    # this rank's own checks; the error travels with the first collective so that every rank raises it
    # (a rank raising alone would leave the others waiting in that collective until the group's timeout)
    error = _updates_problem(comm.rank, updates, mine, owned_clients(state.num_clients, comm.world_size, comm.rank),
                             state.params)
    gathered = comm.all_gather_object({"error": error, "round": int(state.round),
                                       "info": {} if error else {c: (float(u.a_norm), int(u.local_steps))
                                                                 for c, u in mine.items()}})
    _raise_if_stopped(gathered)  # a rank whose own round failed came with its error instead of updates (_stop_round)
    errors = [g["error"] for g in gathered if g["error"]]
    if errors:
        raise ValueError("; ".join(errors))
    rounds = [g["round"] for g in gathered]
    if len(set(rounds)) > 1:  # e.g. one rank resumed from a checkpoint, another started afresh
        raise ValueError(f"state: the ranks hold the server states of different rounds ({rounds}, in rank order); "
                         "every rank must hold the same state (the same resume)")
    info = [g["info"] for g in gathered]
    merged: dict = {}
    for part in info:
        merged.update(part)
    if sorted(merged) != sorted(clients.tolist()):  # a Participation built by hand may list them in any order
        raise RuntimeError(f"distributed round: ranks reported clients {sorted(merged)}, expected "
                           f"{sorted(clients.tolist())}")
    a_norms = np.array([merged[int(c)][0] for c in clients])
    steps = np.array([merged[int(c)][1] for c in clients], dtype=np.int64)
    tau, w = effective_weights(algorithm.aggregation, participation.weights, a_norms, algorithm.tau_eff, steps)
    coef = tau * w / a_norms
    index = {int(c): j for j, c in enumerate(clients)}
    own = [int(c) for c in clients if int(c) in mine]  # in participation order
    template = state.params
    if own:
        partial = tree_weighted_sum([mine[c].delta for c in own], [coef[index[c]] for c in own])
    else:
        partial = tree_map(lambda x: x * 0.0, template)
    change = tree_map(comm.allreduce_sum, partial)
    if not tree_all_finite(change):
        raise FloatingPointError(f"round {state.round}: the aggregated update is not finite (diverged)")
    variates = state.variates
    if variates is not None:
        variates = _update_variates(comm, variates, own, mine, lr, p, change)
    params, server_state = _run_server_optimizer(algorithm.server, change, state, lr)  # lr, change checked
    diag = RoundDiagnostics(clients, steps, a_norms, tau, w, _round_chi_square(participation.weights, w))
    return ServerState(params, server_state, variates, state.round + 1, state.num_clients), diag


def _update_variates(comm, variates: ControlVariates, own, mine, lr, p, change) -> ControlVariates:
    """Each rank updates the :math:`c_i` of its own participants (element-wise as
    :func:`fedlib.variance.update_control_variates`, leaf by leaf); :math:`\\bar c` is all-reduced."""
    cs = updated_client_variates(variates, own, [mine[i].delta for i in own], lr, [mine[i].a_norm for i in own],
                                 [mine[i].local_steps for i in own], change)
    if variates.kind != "scaffold":  # vrlsgd: c_bar stays 0
        return ControlVariates(cs, variates.mean, variates.kind)
    p = np.asarray(p, dtype=np.float64)
    if comm.world_size == 1:  # one process owns the whole stack: apply's sum (update_control_variates), bit for bit
        return ControlVariates(cs, tree_stacked_weighted_sum(cs, p), variates.kind)
    owned = owned_clients(p.size, comm.world_size, comm.rank)
    part = tree_weighted_sum([tree_index(cs, int(j)) for j in owned], p[owned])
    return ControlVariates(cs, tree_map(comm.allreduce_sum, part), variates.kind)


def gather_variates(comm: Optional[Communicator], variates: Optional[ControlVariates], num_clients: int):
    r"""Every rank's own rows of the stacked :math:`c_i` assembled into the full stack
    (for a checkpoint); ``None`` passes through, and so does everything with one process (``comm``
    ``None`` or of world size 1), where the stack is already whole. ``num_clients`` must be an integer >= 1 and
    every leaf of the stack have ``num_clients`` rows, with one process too (a ``ValueError`` naming
    ``num_clients`` otherwise).

    Example
    -------
    >>> import numpy as np
    >>> from fedlib.algorithms import make_algorithm
    >>> from fedlib.solvers import sgd
    >>> variates = make_algorithm("scaffold", sgd(0.1)).init(np.zeros(1), num_clients=2).variates
    >>> gather_variates(LocalCommunicator(), variates, 2) is variates, gather_variates(None, None, 2)
    (True, None)
    """
    # checked with one process too (no collective needed): a bad num_clients passed there and failed only when the
    # same code ran on several processes
    num_clients = check_int("num_clients", num_clients, minimum=1)
    if variates is None:
        return variates
    rows_of = {np.shape(cs)[0] if np.ndim(cs) else None for cs in tree_leaves(variates.client)}
    if rows_of != {num_clients}:  # other rows than clients: an IndexError, or fewer rows gathered in silence
        raise ValueError(f"num_clients: the stacked c_i have {sorted(rows_of, key=str)} rows, got num_clients="
                         f"{num_clients}")
    if comm is None or comm.world_size == 1:
        return variates

    def gather(cs):
        arr = cs.detach().cpu().numpy() if hasattr(cs, "detach") else np.asarray(cs)
        parts = comm.all_gather_array(np.ascontiguousarray(arr))
        full = np.array(arr, copy=True)
        for r, part in enumerate(parts):
            rows = owned_clients(num_clients, comm.world_size, r)
            full[rows] = part[rows]
        if hasattr(cs, "detach"):
            import torch

            full = torch.as_tensor(full, dtype=cs.dtype, device=cs.device)
        return full

    return ControlVariates(tree_map(gather, variates.client), variates.mean, variates.kind)


__all__ += ["gather_variates"]

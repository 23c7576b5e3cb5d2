r"""Federated algorithms as ``init`` / client ``init``-``step``-``final`` / server ``apply``
(fedjax style), all instances of the general update rule (eq. 4).

========================  ===============  =======================  ================================
name                      aggregation      variance reduction       notes
========================  ===============  =======================  ================================
``fedavg``                FedAvg (eq. 6)   —                        any local solver
``fedprox``               FedAvg (eq. 6)   —                        needs a solver with :math:`\mu>0`
``fednova``               FedNova (§5)     —                        ``tau_eff`` policy
``scaffold``              FedAvg           SCAFFOLD variates
``vrlsgd``                FedAvg           VRLSGD variates          heterogeneous :math:`\tau_i` (§3)
``fednova-vr``            FedNova          SCAFFOLD-style (§5, H)   with momentum: Alg. 2 of App. H
========================  ===============  =======================  ================================

A round::

    state = algo.init(params, num_clients)
    updates = []
    for i in participants:
        s = algo.client_init(state, i)                 # solver state at x^(t,0) (+ VR correction)
        for k in range(tau_i): s = algo.solver.update(s, grad(s.params))
        updates.append(algo.client_final(state, i, s))  # Delta_i, ||a_i||_1 (tracked online), tau_i
    state, diag = algo.apply(state, participation, updates, lr, p)  # p: all clients' weights (VR)

Engines (:mod:`fedlib.engines`) run many clients at once but call the same
``apply``; :func:`fedlib.engines.reference.run_sequential` is the plain loop above.

Used by chapters 6 and 9 (:func:`make_algorithm`; chapter 9 checks FedNova's fixed-length rounds with it); most
experiment modules of :mod:`fedlib.experiments` run it too.
"""
from __future__ import annotations

import dataclasses
import weakref
from typing import Any, NamedTuple, Optional, Sequence

import numpy as np

from ._validate import (a_type, bool_entry, check_choice, check_instance, check_int, is_bool, check_positive, check_probability_vector,
                        check_sequence, positional_mismatch)
from .rule import aggregate, check_tau_eff
from .sampling import Participation, as_participation
from .server import ServerOptimizer, plain
from .solvers import LocalSolver, SolverState, check_own_step
from .theory import _round_chi_square
from .tree import _promoted_dtype, leaf_kind, tree_all_finite, tree_kind_mismatch, tree_leaves, tree_map, tree_structure_equal, tree_sub
from .variance import ControlVariates, correction, init_control_variates, update_control_variates

__all__ = ["ALGORITHMS", "ServerState", "ClientUpdate", "RoundDiagnostics", "FederatedAlgorithm", "make_algorithm",
           "client_update_problem", "check_client_indices", "server_state_mismatch", "apply_server_optimizer"]

#: name -> (aggregation, variance reduction)
ALGORITHMS = {
    "fedavg": ("fedavg", None),
    "fedprox": ("fedavg", None),
    "fednova": ("fednova", None),
    "scaffold": ("fedavg", "scaffold"),
    "vrlsgd": ("fedavg", "vrlsgd"),
    "fednova-vr": ("fednova", "scaffold"),
}


class ServerState(NamedTuple):
    """Global model, server-optimizer state, control variates (or None), round index and
    the number of clients :math:`m` given to :meth:`FederatedAlgorithm.init` (``None`` in a
    state built by hand or read from a checkpoint older than this field: then client indices
    are not checked against it).

    Example
    -------
    Round 0 of FedAvg with plain SGD on a one-number model and 2 clients: no variates, the plain
    server's counter at 0:

    >>> import numpy as np
    >>> from fedlib.solvers import sgd
    >>> make_algorithm("fedavg", sgd(lr=0.1)).init(np.zeros(1), num_clients=2)
    ServerState(params=array([0.]), server=PlainState(count=0), variates=None, round=0, num_clients=2)
    """

    params: Any
    server: Any
    variates: Optional[ControlVariates]
    round: int
    num_clients: Optional[int] = None


def server_state_mismatch(algorithm: "FederatedAlgorithm", state: ServerState) -> Optional[str]:
    """Why ``state`` (a saved :class:`ServerState`, e.g. from a checkpoint) cannot continue under
    ``algorithm``'s server optimizer, or ``None``: its server state must be of the kind that
    optimizer keeps (a momentum buffer for server momentum, Adam's moments for FedAdam, a counter for
    the plain server), else a resume crashes or silently drops the saved buffer. Kinds are told apart by
    type where the saved state or the one ``init`` makes is fedlib's (:mod:`fedlib.server`); the state of
    a server optimizer of your own may change type after ``init`` (``None`` until its first update), as a
    round's check of the state allows too: two of your own with different state classes pass here, and
    where your ``update`` then fails on the other's state, its error carries a note naming both classes.

    Example
    -------
    A state saved by a run with the plain server cannot continue under server momentum:

    >>> import numpy as np
    >>> from fedlib.server import momentum
    >>> from fedlib.solvers import sgd
    >>> saved = make_algorithm("fedavg", sgd(0.1)).init(np.zeros(1), 2)
    >>> server_state_mismatch(make_algorithm("fedavg", sgd(0.1)), saved) is None
    True
    >>> server_state_mismatch(make_algorithm("fedavg", sgd(0.1), momentum(0.9)), saved)
    "the saved server optimizer state is a PlainState, but the algorithm's server optimizer keeps a MomentumState ..."
    """
    check_instance("algorithm", algorithm, FederatedAlgorithm, " (fedlib.algorithms.make_algorithm(...))")
    if not isinstance(state, ServerState):
        _refuse_state(state)
    saved, kept = type(state.server), type(algorithm.server.init(state.params))
    if not _kinds_differ(saved, kept):
        return None
    return _server_kind_message(algorithm.server, saved, kept, "the saved server optimizer state",
                                "the algorithm's server optimizer", "written with another server optimizer?")


_SERVER_MODULE = ServerOptimizer.__module__  # "fedlib.server", where fedlib's server states live


def _kinds_differ(saved: type, kept: type) -> bool:
    """Whether a server state of type ``saved`` is of another kind than ``kept`` (the type ``init`` makes): only
    where one of them is fedlib's (:mod:`fedlib.server`'s ``PlainState``, ``MomentumState``, ``AdamState``); the
    state of a server optimizer of your own may change type from what its ``init`` makes (``None`` until the
    first update makes a buffer; a ``float`` that becomes a ``numpy.float64``)."""
    return saved is not kept and _SERVER_MODULE in (saved.__module__, kept.__module__)


def _server_kind_message(server: ServerOptimizer, saved: type, kept: type, what: str, owner: str, hint: str) -> str:
    """The sentence of :func:`server_state_mismatch`, for a saved state or one given to a round."""
    return f"{what} is a {saved.__name__}, but {owner} keeps a {kept.__name__} ({server.name!r}; {hint})"


#: ``server.init`` -> {type of the model: type of the state that init makes for it}, filled on first use
_KEPT_STATE_TYPE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_UNKNOWN = object()


def _kept_state_type(server: ServerOptimizer, params: Any) -> Optional[type]:
    """The type of the state ``server.init`` makes for a model like ``params`` (what
    :func:`server_state_mismatch` compares with), found by one ``init`` per init function and model type
    and then looked up: a round must not allocate a second momentum buffer or Adam's moments to check its
    state. ``None`` (nothing to compare with) when that ``init`` fails."""
    init, key = server.init, type(params)
    try:
        kinds = _KEPT_STATE_TYPE.get(init)
        if kinds is None:
            kinds = _KEPT_STATE_TYPE[init] = {}
    except TypeError:  # an init that is unhashable or takes no weak reference (operator.itemgetter): asked every time
        kinds = {}
    kept = kinds.get(key, _UNKNOWN)
    if kept is _UNKNOWN:
        try:
            kept = type(init(params))
        except Exception:  # its own problem, met where the state is built (algorithm.init)
            kept = None
        kinds[key] = kept
    return kept


def _check_server_kind(server: ServerOptimizer, state: "ServerState", owner: str) -> None:
    """``ValueError`` naming ``state`` unless ``state.server`` is of the kind ``server`` keeps (O(1) a round;
    :func:`_kinds_differ`: a round must not refuse what a server optimizer of your own returned the round before)."""
    kept = _kept_state_type(server, state.params)
    saved = type(state.server)
    if kept is not None and _kinds_differ(saved, kept):
        raise ValueError("state: " + _server_kind_message(
            server, saved, kept, "its server optimizer state (state.server)", owner,
            "a state of another server optimizer? algorithm.init(params, num_clients) builds one for this algorithm; "
            "a saved state continues only under the server optimizer that wrote it"))


def _note_server_kind(exc: Exception, server: ServerOptimizer, state: "ServerState") -> None:
    """Add a note to ``exc``, raised by ``server.update``, where ``state.server`` is not of the type ``server.init``
    makes: two server optimizers of your own, each with its own state class, are not told apart before a round
    (:func:`_kinds_differ`), so a checkpoint of one resumed under the other fails inside your update (an
    ``AttributeError`` on a field the other state lacks) and the note says why. Nothing where ``init`` makes
    ``None`` (a state that becomes a buffer later) or the types agree, nor where either is no state class (a
    NamedTuple, as :mod:`fedlib.server` asks an own state to be): a ``float`` state that becomes a
    ``numpy.float64`` is an own state changing type as allowed, and its update's error has another cause;
    Python 3.10 has no ``add_note``."""
    kept = _kept_state_type(server, state.params)
    saved = type(state.server)
    if (kept is None or saved is kept or not hasattr(kept, "_fields") or not hasattr(saved, "_fields")
            or not hasattr(exc, "add_note")):
        return
    exc.add_note(f"fedlib: state.server is a {saved.__name__}, but server optimizer {server.name!r} makes a "
                 f"{kept.__name__} in its init: a state written by another server optimizer (a checkpoint of "
                 "another run?) continues only under the server optimizer that wrote it")


def _refuse_state(state: Any) -> None:
    """The ``ValueError`` for a ``state`` that is no :class:`ServerState` (a tuple, a dict...)."""
    hint = ""
    if isinstance(state, SolverState):  # a tuple too, but ServerState(*state) is no advice for a client's state
        hint = (" (a client's solver state: arguments in another order? the server state comes first, "
                "algorithm.client_final(state, client, solver_state))")
    elif isinstance(state, tuple):
        hint = " (ServerState(*state) if it holds params, server, variates, round, num_clients in this order)"
    elif isinstance(state, dict):
        hint = " (ServerState(**state) if it holds params, server, variates, round and num_clients)"
    raise ValueError(f"state must be a fedlib.algorithms.ServerState (algorithm.init(params, num_clients), then what "
                     f"apply returns), got {type(state).__name__}{hint}")


_AGGREGATION_NAMES = {"fedavg": "FedAvg", "fednova": "FedNova"}


def _check_state(algorithm: "FederatedAlgorithm", state: Any) -> None:
    """``ValueError`` naming ``state`` unless it is a :class:`ServerState` whose control variates fit
    ``algorithm``: present (and of its kind) with variance reduction, absent without. Without this a
    SCAFFOLD state given to FedAvg had its variates updated and applied (FedAvg ran as SCAFFOLD), and a
    FedAvg state given to SCAFFOLD ran as FedAvg, both without a word. Only O(1) checks: it runs every
    round and, in :meth:`FederatedAlgorithm.client_init`, once per client."""
    if not isinstance(state, ServerState):
        _refuse_state(state)
    variates, kind = state.variates, algorithm.variance
    if variates is None:
        if kind is not None:
            raise ValueError(f"state: {algorithm.name!r} keeps control variates ({kind!r}), but state.variates is None "
                             f"(a state of another algorithm, or built by hand? without them it would run as "
                             f"{_AGGREGATION_NAMES[algorithm.aggregation]} without variance reduction; "
                             "algorithm.init(params, num_clients) makes them)")
        return
    if not isinstance(variates, ControlVariates):
        raise ValueError(f"state.variates must be None or a fedlib.variance.ControlVariates, got "
                         f"{type(variates).__name__}")
    if kind is None:
        raise ValueError(f"state: {algorithm.name!r} keeps no control variates, but state.variates holds "
                         f"{variates.kind!r} ones (a state of a variance-reduced algorithm? {algorithm.name!r} would "
                         "update and apply them, running with variance reduction; state._replace(variates=None) "
                         "drops them)")
    if variates.kind != kind:
        raise ValueError(f"state: {algorithm.name!r} keeps {kind!r} control variates, but state.variates holds "
                         f"{variates.kind!r} ones (a state of another algorithm: the two kinds are updated "
                         "differently)")


def _check_round_state(algorithm: "FederatedAlgorithm", state: Any) -> None:
    """The state a round starts from (:meth:`FederatedAlgorithm.apply`, :func:`fedlib.distributed.distributed_apply`):
    :func:`_check_state`, then the server optimizer state's kind (:func:`_check_server_kind`)."""
    _check_state(algorithm, state)
    _check_server_kind(algorithm.server, state, "the algorithm's server optimizer")


class ClientUpdate(NamedTuple):
    r"""What a client sends: its change :math:`\Delta_i`, :math:`\|a_i\|_1` and :math:`\tau_i`
    (enough for eq. 4: :math:`d_i = -\Delta_i/(\eta\|a_i\|_1)`).

    Example
    -------
    Client 1 takes 2 SGD steps of gradient :math:`-1` with :math:`\eta = 1` from 0: :math:`\Delta_1 = 2`,
    :math:`\|a_1\|_1 = \tau_1 = 2`:

    >>> import numpy as np
    >>> from fedlib.solvers import sgd
    >>> algo = make_algorithm("fedavg", sgd(lr=1.0))
    >>> state = algo.init(np.zeros(1), num_clients=2)
    >>> run = algo.solver.run(state.params, lambda x, k: np.array([-1.0]), local_steps=2)
    >>> algo.client_final(state, 1, run)
    ClientUpdate(client=1, delta=array([2.]), a_norm=2.0, local_steps=2)
    """

    client: int
    delta: Any
    a_norm: float
    local_steps: int


class RoundDiagnostics(NamedTuple):
    """Per-round eq.-4 quantities: participants, their :math:`\\tau_i`, :math:`\\|a_i\\|_1`,
    :math:`\\tau_{\\text{eff}}`, weights :math:`w_i` and :math:`\\chi^2` between the
    (normalised) sampling weights and :math:`w` (= :math:`\\chi^2_{p\\|w}` with full participation).

    They describe the aggregated change :math:`-\\tau_{\\text{eff}}\\sum_i w_i\\eta d_i` of eq. (4), the
    input of the server optimizer: with server momentum, Adam or a server learning rate other
    than 1, the step actually taken is that optimizer's output, not this change. Under
    client sampling ``weights`` are the unbiased :math:`\\omega_i`-based weights, which need not
    sum to 1 (FedNova: :math:`w_i = \\omega_i = p_i m / q` for uniform sampling).

    Fields: ``clients``, the participants' indices in the order of ``participation.clients`` (sorted as fedlib's
    samplers give them; :meth:`FederatedAlgorithm.apply` keeps a hand-made order); ``local_steps``, their
    :math:`\\tau_i`; ``a_norms``, their :math:`\\|a_i\\|_1`; ``tau_eff``, the round's :math:`\\tau_{\\text{eff}}`;
    ``weights``, the :math:`w_i`; ``chi2``, the :math:`\\chi^2` above (0 for FedNova, whose :math:`w` are the sampling
    weights). Arrays are in the order of ``clients``.

    Example
    -------
    FedAvg's round of :class:`FederatedAlgorithm`'s example (:math:`\\tau = (1, 2)`, SGD, :math:`p = (1/2, 1/2)`):
    :math:`\\tau_{\\text{eff}} = \\tfrac12 \\cdot 1 + \\tfrac12 \\cdot 2 = 1.5`, :math:`w = (1/3, 2/3)` and
    :math:`\\chi^2 = (1/6)^2/(1/3) + (1/6)^2/(2/3) = 1/12 + 1/24 = 1/8`:

    >>> import numpy as np
    >>> from fedlib.sampling import full_participation
    >>> from fedlib.solvers import sgd
    >>> algo = make_algorithm("fedavg", sgd(lr=1.0))
    >>> state = algo.init(np.zeros(1), num_clients=2)
    >>> updates = [ClientUpdate(0, np.array([-1.0]), 1.0, 1), ClientUpdate(1, np.array([2.0]), 2.0, 2)]
    >>> _, diag = algo.apply(state, full_participation([0.5, 0.5]), updates, lr=1.0)
    >>> diag.tau_eff, np.round(diag.weights * 3, 12), round(diag.chi2, 12)
    (1.5, array([1., 2.]), 0.125)
    """

    clients: np.ndarray
    local_steps: np.ndarray
    a_norms: np.ndarray
    tau_eff: float
    weights: np.ndarray
    chi2: float


def _count_value(x: Any) -> float:
    """``x`` as a float if it is a number (a numpy scalar, a one-element tensor), else NaN: a string (``float("2")``
    is 2.0) or a bool (``float(True)`` is 1.0) is no count of steps and no ||a_i||_1."""
    if isinstance(x, (str, bytes)) or is_bool(x):
        return float("nan")
    try:
        return float(x)
    except (TypeError, ValueError, RuntimeError):
        return float("nan")


def client_update_problem(update: Any) -> Optional[str]:
    r"""Why ``update``'s counts cannot enter eq. 4 (``None`` if they can): :math:`\tau_i` must be a
    whole number >= 1 and :math:`\|a_i\|_1` finite and > 0. A client that took no local step has
    :math:`a_i = 0` and :math:`d_i = \Delta_i / \|a_i\|_1` is undefined; every engine's own updates
    (always >= 1 step) pass.

    Example
    -------
    >>> import numpy as np
    >>> client_update_problem(ClientUpdate(0, np.zeros(1), a_norm=2.0, local_steps=2)) is None
    True
    >>> client_update_problem(ClientUpdate(0, np.zeros(1), a_norm=0.0, local_steps=0))
    'updates: client 0 has local_steps = 0 (it must be a whole number >= 1: ...)'
    """
    client = update.client
    steps = _count_value(update.local_steps)
    if not np.isfinite(steps) or not steps.is_integer() or steps < 1:
        return (f"updates: client {client} has local_steps = {update.local_steps!r} (it must be a whole number "
                ">= 1: a client that took no local step has no update to aggregate; leave it out of the round)")
    a = _count_value(update.a_norm)
    if not np.isfinite(a) or a <= 0:
        return (f"updates: client {client} has a_norm = {update.a_norm!r} (||a_i||_1 must be finite and > 0: "
                "d_i = delta_i / ||a_i||_1)")
    return None


def check_client_indices(clients: Any, num_clients: Optional[int]) -> None:
    """Raise ``ValueError`` unless every entry of ``clients`` is an integer index (not a bool or a
    float such as ``1.5``, which ``int`` would truncate to another client) lying in
    ``0..num_clients-1`` (no range check when ``num_clients`` is ``None``).

    Example
    -------
    >>> check_client_indices([0, 2], 3)
    >>> check_client_indices([0, 3], 3)
    Traceback (most recent call last):
    ...
    ValueError: client 3 is not one of the 3 clients given to init (indices 0..2)
    >>> check_client_indices([1.5], 3)
    Traceback (most recent call last):
    ...
    ValueError: client must be an integer index, got 1.5
    """
    raw = clients
    flag = bool_entry(raw)  # np.asarray([0, True]) is the integer array [0, 1]
    if flag is not None:
        raise ValueError(f"client must be an integer index, got {bool(flag)!r}")
    clients = np.asarray(clients).reshape(-1)
    if clients.size and clients.dtype.kind not in "iu":  # an empty list (a rank without participants) is float
        bad = next((c for c in clients.tolist() if isinstance(c, bool) or not isinstance(c, int)), raw)
        raise ValueError(f"client must be an integer index, got {bad!r}")
    if num_clients is None:
        return
    num_clients = check_int("num_clients", num_clients, minimum=1)
    bad = clients[(clients < 0) | (clients >= num_clients)]
    if bad.size:
        raise ValueError(f"client {int(bad[0])} is not one of the {num_clients} clients given to init "
                         f"(indices 0..{num_clients - 1})")


def _check_one_client(client: Any, num_clients: Any) -> None:
    """``check_client_indices([client], num_clients)``, without its array work for a plain in-range ``int``
    (``client_init`` / ``client_final`` run once per client and round: 16 µs of checks each made up 5 % of
    chapter 10's single-threaded time). A bool is no ``int`` here (``type(True) is bool``)."""
    if type(client) is int and type(num_clients) is int and 0 <= client < num_clients:
        return
    if isinstance(client, (SolverState, ServerState)):  # arguments swapped: np.ndim failed on the ragged tuple
        raise ValueError(f"client must be one integer index, got {a_type(client)} (arguments in another "
                         "order? algorithm.client_init(state, client) and client_final(state, client, solver_state) "
                         "take the client's index second)")
    if np.ndim(client) != 0:  # [1], np.array([1]), []: check_client_indices flattens them, int() then failed
        raise ValueError(f"client must be one integer index, got {client!r}")
    check_client_indices([client], num_clients)


@dataclasses.dataclass(frozen=True)
class FederatedAlgorithm:
    r"""One algorithm of the table above, with its local solver and server optimizer.

    ``p``, the weights of all clients (:math:`p_i = n_i/n`), is an argument of :meth:`apply` (the
    variance-reduction means need it), not of the algorithm. ``tau_eff`` is FedNova's policy (``None``,
    ``"a_norm"``, ``"local_steps"`` or a number). With client sampling only a number
    keeps FedNova consistent: the policies compute :math:`\tau_{\text{eff}}` from the
    round's participants, and :math:`\mathbb E[\tau_{\text{eff}}\sum_{i\in S}\omega_i d_i]`
    then carries FedAvg's weights :math:`p_j\|a_j\|_1` with weight :math:`1/q` under sampling with
    replacement, and a term :math:`\propto p_j^2\|a_j\|_1` under uniform sampling (FedAvg's weights with
    weight :math:`(m-q)/(q(m-1))` when every :math:`p_i = 1/m`) (App. H's
    :math:`\sum_{i\in S}p_i\|a_i\|_1` leans the same way;
    :func:`fedlib.sampling.expected_server_weights` gives both in closed form, chapter 8 measures them;
    :func:`fedlib.schedules.population_tau_eff` gives the population value).

    Example
    -------
    One round on two clients with :math:`p = (1/2, 1/2)`, plain SGD, :math:`\eta = 1`: client 0 takes
    :math:`\tau_0 = 1` step of gradient :math:`+1` (:math:`\Delta_0 = -1`), client 1 takes :math:`\tau_1 = 2`
    steps of gradient :math:`-1` (:math:`\Delta_1 = 2`). The mean gradient is 0, so a consistent
    algorithm should not move. FedAvg moves to :math:`\tfrac12(-1) + \tfrac12 \cdot 2 = 0.5`, towards the
    client with more steps; FedNova averages :math:`d = (1, -1)` to 0 and stays at 0:

    >>> import numpy as np
    >>> from fedlib.sampling import full_participation
    >>> from fedlib.solvers import sgd
    >>> def one_round(name):
    ...     algo = FederatedAlgorithm(name, sgd(lr=1.0))
    ...     state = algo.init(np.zeros(1), num_clients=2)
    ...     updates = []
    ...     for i, (grad, steps) in enumerate([(1.0, 1), (-1.0, 2)]):
    ...         run = algo.client_init(state, i)
    ...         for _ in range(steps):
    ...             run = algo.solver.update(run, np.array([grad]))
    ...         updates.append(algo.client_final(state, i, run))
    ...     state, diag = algo.apply(state, full_participation([0.5, 0.5]), updates, lr=1.0)
    ...     return state.params
    >>> one_round("fedavg"), one_round("fednova")
    (array([0.5]), array([0.]))
    """

    name: str
    solver: LocalSolver
    server: ServerOptimizer = dataclasses.field(default_factory=plain)
    tau_eff: Any = None

    def __post_init__(self):
        check_choice("algorithm", self.name, tuple(ALGORITHMS))
        if not isinstance(self.solver, LocalSolver):
            raise ValueError(f"solver must be a fedlib.solvers.LocalSolver, got {type(self.solver).__name__}")
        check_own_step("solver", self.solver, correction=self.variance is not None)
        if not isinstance(self.server, ServerOptimizer):
            hint = (f" (for a server optimizer by name use fedlib.server.make_server_optimizer({self.server!r}))"
                    if isinstance(self.server, str) else "")
            raise ValueError(f"server must be a fedlib.server.ServerOptimizer, got {type(self.server).__name__}{hint}")
        contracts = {"init": "init(params) -> state",
                     "update": "update(change, state, params, lr) -> (new_params, new_state)"}
        for part, contract in contracts.items():  # a NamedTuple takes anything: refuse a malformed one here
            if not callable(getattr(self.server, part)):
                raise ValueError(f"server.{part} must be callable, {contract}, got "
                                 f"{type(getattr(self.server, part)).__name__}")
            nargs = 1 if part == "init" else 4
            why = positional_mismatch(getattr(self.server, part), nargs)  # else a bare TypeError in the first round
            if why is not None:
                raise ValueError(f"server.{part} must be callable as {contract}, taking {nargs} positional argument"
                                 f"{'' if nargs == 1 else 's'}: {part}{why[0]} does not ({why[1]})")
        if not isinstance(self.server.name, str) or not self.server.name:
            raise ValueError(f"server.name must be a non-empty string (it labels results), got {self.server.name!r}")
        if self.name == "fedprox" and self.solver.mu <= 0:
            raise ValueError("mu must be > 0 for fedprox (use a proximal solver)")
        if self.tau_eff is not None and self.aggregation != "fednova":
            raise ValueError(f"tau_eff can only be set for FedNova-based algorithms, not {self.name!r}")
        check_tau_eff(self.tau_eff)

    @property
    def aggregation(self) -> str:
        return ALGORITHMS[self.name][0]

    @property
    def variance(self) -> Optional[str]:
        return ALGORITHMS[self.name][1]

    # -------------------------------------------------------------- server init
    def init(self, params: Any, num_clients: int) -> ServerState:
        """Server state at round 0 for ``num_clients`` clients. A torch tensor of ``params`` that requires grad
        (a model's parameter, or a copy made with ``.clone()`` / ``copy.deepcopy``) is refused with a ``ValueError``
        naming it: every round's update would be recorded in an autograd graph that grows without bound; give
        detached copies, :func:`fedlib.optim.parameters_of`."""
        num_clients = check_int("num_clients", num_clients, minimum=1)
        k = _requires_grad(params)
        if k is not None:
            raise ValueError(f"params: leaf {k} is a tensor that requires grad (a model's parameter, or a copy made "
                             "with .clone() or copy.deepcopy); the server state would record every round's update "
                             "in an autograd graph that grows without bound: give detached copies, "
                             "algo.init(fedlib.optim.parameters_of(model), num_clients)")
        try:
            finite = tree_all_finite(params)
        except TypeError:  # None, a string, an object array...: np.isfinite refuses it
            hint = ""
            if hasattr(params, "parameters") or hasattr(params, "__next__"):  # a torch model, model.parameters()
                hint = (" (a model or an iterator of its parameters: give detached copies as a list, "
                        "algo.init(fedlib.optim.parameters_of(model), num_clients))")
            raise ValueError("params must be a tree (dict / list / tuple) of numpy arrays, torch tensors or numbers, "
                             f"got {type(params).__name__} leaves{hint}") from None
        if not finite:
            raise ValueError("params hold NaN or inf (the initial model must be finite)")
        variates = init_control_variates(params, num_clients, self.variance) if self.variance else None
        return ServerState(params, self.server.init(params), variates, 0, num_clients)

    # -------------------------------------------------------------- client side
    def client_init(self, state: ServerState, client: int, solver: Optional[LocalSolver] = None) -> SolverState:
        """Solver state of ``client`` at :math:`x^{(t,0)}`, with its VR correction if any (``ValueError`` naming
        ``state`` when it is no :class:`ServerState` or its control variates do not fit the algorithm; naming
        ``solver`` when one is given that is no :class:`~fedlib.solvers.LocalSolver`)."""
        if solver is not None and not isinstance(solver, LocalSolver):  # else "'str' object has no attribute 'init'"
            raise ValueError(f"solver must be a fedlib.solvers.LocalSolver (or None: the algorithm's), got "
                             f"{type(solver).__name__}")
        solver = solver or self.solver
        # fast path (once per client and round): a ServerState without variates for an algorithm that keeps none
        if type(state) is not ServerState or state.variates is not None or self.variance is not None:
            _check_state(self, state)
        _check_one_client(client, state.num_clients)
        corr = correction(state.variates, client) if state.variates is not None else None
        return solver.init(state.params, corr)

    def client_final(self, state: ServerState, client: int, solver_state: SolverState) -> ClientUpdate:
        """Package a finished local run: :math:`\\Delta_i = x_i^{(t,\\tau_i)} - x^{(t,0)}` (``ValueError`` naming
        ``state`` when it is no :class:`ServerState`, naming ``solver_state`` when it has no ``params``, ``step`` and
        ``a_norm``: e.g. the :class:`fedlib.optim.ClientOptimizer` itself instead of its ``solver_state``).

        ``client`` is the client's index in ``0..m-1`` (one integer; a bool or an index out of range is a
        ``ValueError``); ``solver_state`` must have taken at least one step (``ValueError`` naming ``local_steps``
        otherwise)."""
        if not isinstance(state, ServerState):
            _refuse_state(state)
        _check_one_client(client, state.num_clients)
        if type(solver_state) is not SolverState and (  # else "'<' not supported between 'method' and 'int'"
                not all(hasattr(solver_state, f) for f in ("params", "step", "a_norm")) or callable(solver_state.step)):
            hint = " (with ClientOptimizer: opt.solver_state)" if hasattr(solver_state, "solver_state") else ""
            raise ValueError(f"solver_state must be the client's finished fedlib.solvers.SolverState (what "
                             f"solver.update returned), got {type(solver_state).__name__}{hint}")
        if solver_state.step < 1:
            raise ValueError(f"local_steps: client {client} took no local step (a client without samples or with "
                             "tau_i = 0 has no update to aggregate: leave it out of the round; in your own loop, out of the "
                             "updates and of the Participation given to apply; in an engine, a schedule or sampler must "
                             "not give a participant 0 steps)")
        return ClientUpdate(int(client), tree_sub(solver_state.params, state.params), float(solver_state.a_norm),
                            int(solver_state.step))

    # -------------------------------------------------------------- server side
    def apply(self, state: ServerState, participation: Participation, updates: Sequence[ClientUpdate], lr: float,
              p: Any = None) -> tuple[ServerState, RoundDiagnostics]:
        """Aggregate ``updates`` (in the order of ``participation.clients``, which may be any order: the result is
        the same, the diagnostics list the clients in it) with eq. 4,
        update the variates, then apply the server optimizer. ``lr`` is this round's
        client learning rate; ``p`` (all clients' weights) is required with VR and, when given, checked
        for every algorithm (:math:`m` probabilities summing to 1; ``ValueError`` naming ``p``). Each
        ``updates[k].delta`` must have the structure and leaf shapes of ``state.params``
        (``ValueError`` otherwise: :math:`x + \\sum_i c_i\\Delta_i` would broadcast). ``state`` must be a
        :class:`ServerState` of this algorithm: control variates with variance reduction (of its kind), none
        without, and the server optimizer state of ``self.server``'s kind (``ValueError`` naming ``state``; fedlib's
        server states are told apart by type, a server optimizer of your own keeps what its update returns)."""
        _check_round_state(self, state)
        lr = check_positive("lr", lr)
        if p is not None:  # unused without VR, but a wrong one (counts, NaN, another m) is a mistake all the same
            p = check_probability_vector("p", p, size=state.num_clients)
        participation = as_participation(participation)
        updates = check_sequence("updates", updates, "ClientUpdate (algorithm.client_final(state, i, solver_state))")
        for k, u in enumerate(updates):
            if not all(hasattr(u, f) for f in ClientUpdate._fields):
                raise ValueError(f"updates[{k}] must be a ClientUpdate (algorithm.client_final(state, i, "
                                 f"solver_state)), got {type(u).__name__}")
            problem = client_update_problem(u)
            if problem:
                raise ValueError(problem)
        clients = np.asarray([u.client for u in updates])
        if not np.array_equal(clients, participation.clients):
            raise ValueError(f"updates must come in the order of participation.clients (updates are for clients "
                             f"{clients.tolist()}, participation.clients is {participation.clients.tolist()})")
        check_client_indices(clients, state.num_clients)
        a_norms = np.array([u.a_norm for u in updates])
        steps = np.array([u.local_steps for u in updates], dtype=np.int64)
        deltas = [u.delta for u in updates]
        agg = aggregate(deltas, participation.weights, a_norms, self.aggregation, self.tau_eff, steps)
        if not tree_structure_equal(agg.change, state.params):  # x + change would broadcast, e.g. (d,) onto (d, 1)
            raise ValueError("updates: the clients' deltas must have the structure and leaf shapes of state.params "
                             f"(leaf shapes {[tuple(np.shape(v)) for v in tree_leaves(deltas[0])]} vs "
                             f"{[tuple(np.shape(v)) for v in tree_leaves(state.params)]})")
        k = tree_kind_mismatch(agg.change, state.params)  # numpy + torch fails deep in the server optimizer
        if k is not None:
            raise ValueError(f"updates: the clients' deltas are {leaf_kind(tree_leaves(agg.change)[k])} but "
                             f"state.params holds {leaf_kind(tree_leaves(state.params)[k])} (leaf {k}); use one kind "
                             "for the model and the clients (e.g. algo.init(parameters_of(model), m) with "
                             "ClientOptimizer)")
        if not tree_all_finite(agg.change):
            raise FloatingPointError(f"round {state.round}: the aggregated update is not finite (diverged)"
                                     f"{_non_finite_changes(updates)}")
        _check_state_kinds(state)
        variates = state.variates
        if variates is not None:
            if p is None:
                raise ValueError("p (weights of all clients) is required with variance reduction")
            variates = update_control_variates(variates, clients, deltas, lr, a_norms, p, steps, agg.change)
        params, server_state = _run_server_optimizer(self.server, agg.change, state, lr)  # lr, change checked
        chi2 = _round_chi_square(participation.weights, agg.weights)  # both checked by aggregate
        diag = RoundDiagnostics(clients, steps, a_norms, agg.tau_eff, agg.weights, chi2)
        return ServerState(params, server_state, variates, state.round + 1, state.num_clients), diag


def _non_finite_changes(updates: Sequence[ClientUpdate]) -> str:
    """The end of apply's message for a non-finite aggregated update: which participants' changes hold NaN or inf
    (at most 8 listed), ``""`` when each change is finite (the weighted sum overflowed). Before, one client's NaN
    sample and a learning rate that overflowed every client were both only "the aggregated update is not finite"."""
    bad = [int(u.client) for u in updates if not tree_all_finite(u.delta)]
    if not bad:
        return ""
    shown = ", ".join(map(str, bad[:8])) + (", ..." if len(bad) > 8 else "")
    return (f": the change of {len(bad)} of the {len(updates)} participating clients, [{shown}], holds NaN or inf (NaN "
            "or inf in their data or loss, or a learning rate too large for them)")


def _check_state_kinds(state: ServerState) -> None:
    """Refuse a server state whose optimizer state or control variates hold another kind of array than its
    model (numpy + torch fails deep inside the server optimizer with a TypeError): e.g. a checkpoint's state,
    stored as numpy, whose params alone were turned back into tensors."""
    model = [x for x in tree_leaves(state.params) if hasattr(x, "shape")]
    if not model:
        return
    kind = leaf_kind(model[0])
    for part in ("server", "variates"):
        for x in tree_leaves(getattr(state, part)):
            if (isinstance(x, np.ndarray) or hasattr(x, "add_")) and leaf_kind(x) != kind:
                raise ValueError(f"state.{part} holds {leaf_kind(x)} but state.params holds {kind}: use one kind for "
                                 "the whole server state (a checkpoint stores numpy arrays: continue a torch run with "
                                 "fedlib.checkpoint.to_torch_tree(state, like=parameters_of(model)))")


def apply_server_optimizer(server: ServerOptimizer, change: Any, state: ServerState, lr: float) -> tuple:
    """``server.update(change, state.server, state.params, lr)`` checked where fedlib receives it: a
    ``(new_params, new_state)`` pair whose model has the structure, leaf shapes and array kind of
    ``state.params`` (a wrongly shaped model would broadcast every later client's change). The model a
    server optimizer of your own returns must also be finite (``FloatingPointError`` naming it otherwise:
    a NaN it made would surface one round later as a non-finite aggregate of the clients' updates) and keep the
    dtypes of ``state.params``, or take those of ``state.params + change`` where the change is wider (``ValueError``
    otherwise).

    ``lr`` must be a finite number > 0 and ``change`` finite (as :meth:`FederatedAlgorithm.apply`
    checks them): fedlib's own server optimizers would turn a NaN into the model without a word.
    ``state`` must be a :class:`ServerState` whose ``server`` is of the kind ``server.init`` makes
    (``ValueError`` naming ``state``: a plain server's counter has no momentum buffer; fedlib's server states
    are told apart by type, the state of a server optimizer of your own may change type from what its
    ``init`` makes).

    Example
    -------
    The plain server moves :math:`x = 1` by the aggregate :math:`-2` to :math:`-1`; a server optimizer
    of your own that returns a model of another shape is refused:

    >>> import numpy as np
    >>> from fedlib.server import PlainState, ServerOptimizer, plain
    >>> from fedlib.solvers import sgd
    >>> state = make_algorithm("fedavg", sgd(0.1)).init(np.ones(1), 2)
    >>> apply_server_optimizer(plain(), np.array([-2.0]), state, 0.1)
    (array([-1.]), PlainState(count=1))
    >>> wrong = ServerOptimizer(lambda params: PlainState(0), lambda c, s, params, lr: (np.zeros(2), s), "wrong")
    >>> apply_server_optimizer(wrong, np.array([-2.0]), state, 0.1)
    Traceback (most recent call last):
    ...
    ValueError: server optimizer 'wrong': update must return (new_params, new_state) with new_params ... got leaf shapes [(2,)] for [(1,)]
    """
    if not isinstance(state, ServerState):
        _refuse_state(state)
    _check_server_kind(server, state, "the server optimizer")
    lr = check_positive("lr", lr)
    if not tree_all_finite(change):
        raise FloatingPointError(f"round {state.round}: the aggregated update is not finite (diverged)")
    return _run_server_optimizer(server, change, state, lr)


def _run_server_optimizer(server: ServerOptimizer, change: Any, state: ServerState, lr: float) -> tuple:
    """:func:`apply_server_optimizer` for a caller that has checked ``lr`` and the finite ``change`` itself
    (:meth:`FederatedAlgorithm.apply`, :func:`fedlib.distributed.distributed_apply`): the checks of what the
    server optimizer returns, without a second pass over the change every round."""
    try:
        out = server.update(change, state.server, state.params, lr)
    except Exception as exc:
        _note_server_kind(exc, server, state)
        raise
    if not isinstance(out, tuple) or len(out) != 2:
        raise ValueError(f"server optimizer {server.name!r}: update(change, state, params, lr) must return "
                         f"(new_params, new_state), got {type(out).__name__}")
    params = out[0]
    try:  # None: the model fits; -1: another structure or leaf shapes; k >= 0: leaf k is another array kind
        k = tree_kind_mismatch(params, state.params) if tree_structure_equal(params, state.params) else -1
    except (TypeError, ValueError):
        k = -1
    if k is not None:
        got = [tuple(np.shape(v)) for v in tree_leaves(params)] if not np.isscalar(params) else type(params).__name__
        kinds = "" if k < 0 else (f" (leaf {k} is {leaf_kind(tree_leaves(params)[k])}, state.params holds "
                                  f"{leaf_kind(tree_leaves(state.params)[k])})")
        if k < 0:  # equal leaf shapes in another structure read 'got leaf shapes [(2,)] for [(2,)]'
            try:
                tree_map(lambda a, b: None, state.params, params)
            except ValueError as exc:
                kinds = f" ({exc})"
            if _fits(out[1], state.params):
                kinds += " (the pair in another order? update returns the model first, (new_params, new_state))"
        raise ValueError(f"server optimizer {server.name!r}: update must return (new_params, new_state) with "
                         "new_params of the structure and leaf shapes of state.params (and its array kind), got "
                         f"leaf shapes {got} for {[tuple(np.shape(v)) for v in tree_leaves(state.params)]}{kinds}")
    kept = _kept_state_type(server, state.params)  # a lookup: refused here, not as next round's 'state: ...'
    if kept is not None and _kinds_differ(type(out[1]), kept):
        raise ValueError(f"server optimizer {server.name!r}: update must return (new_params, new_state) with new_state "
                         f"of the kind its init makes, a {kept.__name__}, got {type(out[1]).__name__}")
    own = getattr(server.update, "__module__", None) != "fedlib.server"  # fedlib's are tested; yours is checked
    if own:  # a float32 model for float64 params went on in float32 without a word
        _check_kept_dtypes(server, params, state.params, change)
    if own and not tree_all_finite(params):
        raise FloatingPointError(f"round {state.round}: server optimizer {server.name!r} returned a model that is not "
                                 "finite from a finite aggregated update (diverged, or its update is wrong)")
    return out


def _check_kept_dtypes(server: ServerOptimizer, params: Any, old_params: Any, change: Any) -> None:
    """An own server's ``new_params`` keep the dtypes of ``state.params``, or take the dtype of ``params + change``
    where the aggregated change is wider (float64 gradients of a float32 model: the clients' models, the change and
    fedlib's own servers' models are float64 there; refusing the own server blamed it for the widening it did not
    make). Leaves without a dtype (Python numbers) are not compared."""
    changes = tree_leaves(change)
    olds = tree_leaves(old_params)
    if len(changes) != len(olds):
        changes = [None] * len(olds)
    for k, (new, old, chg) in enumerate(zip(tree_leaves(params), olds, changes)):
        new_dtype, old_dtype = getattr(new, "dtype", None), getattr(old, "dtype", None)
        if new_dtype is None or old_dtype is None or new_dtype == old_dtype:
            continue
        chg_dtype = getattr(chg, "dtype", None)
        wider = None if chg_dtype is None else _promoted_dtype(old_dtype, chg_dtype)
        if wider is not None and new_dtype == wider:
            continue
        also = "" if wider is None or wider == old_dtype else f" (or {wider}, that of state.params + change)"
        raise ValueError(f"server optimizer {server.name!r}: update must return new_params in the dtypes of "
                         f"state.params: leaf {k} is {new_dtype}, state.params holds {old_dtype}{also} (the run "
                         "would go on in the other precision without a word)")


def _requires_grad(tree: Any) -> Optional[int]:
    """The index of the first leaf of ``tree`` that is a tensor requiring grad, or ``None``. Checked by
    :meth:`FederatedAlgorithm.init` and after every local step of a torch model in ``run_sequential``: a flat list, tuple or dict of tensors is read directly (0.5 µs for three leaves,
    :func:`fedlib.tree.tree_leaves` takes 4 µs: 10 % of a small model's step)."""
    items = tree if type(tree) is list or type(tree) is tuple else tree.values() if type(tree) is dict else None
    if items is not None:
        try:
            for k, leaf in enumerate(items):
                if leaf.requires_grad:
                    return k
            return None
        except AttributeError:  # a nested tree, or numbers: the leaves before it were tensors, so k counts leaves
            pass
    for k, leaf in enumerate(tree_leaves(tree)):
        if getattr(leaf, "requires_grad", False):
            return k
    return None


def _fits(tree: Any, params: Any) -> bool:
    """Whether ``tree`` has the structure and leaf shapes of ``params`` (False for anything :mod:`fedlib.tree` refuses)."""
    try:
        return tree_structure_equal(tree, params)
    except (TypeError, ValueError):
        return False


def make_algorithm(name: str, solver: LocalSolver, server: Optional[ServerOptimizer] = None,
                   tau_eff: Any = None) -> FederatedAlgorithm:
    r"""Convenience constructor: ``make_algorithm("fednova", momentum_sgd(0.02))`` (``server`` ``None``:
    :func:`fedlib.server.plain`, eq. 4 as written).

    ``name`` is a key of :data:`ALGORITHMS` (``"fedavg"``, ``"fedprox"``, ``"fednova"``, ``"scaffold"``, ``"vrlsgd"``,
    ``"fednova-vr"``); ``solver`` a :class:`fedlib.solvers.LocalSolver` (``"fedprox"`` needs one with :math:`\mu > 0`);
    ``tau_eff`` FedNova's policy or number (:func:`fedlib.rule.check_tau_eff`) for ``"fednova"`` and ``"fednova-vr"``,
    ``None`` for the others.
    :class:`FederatedAlgorithm` checks them all with a ``ValueError`` (an unknown ``name`` is reported as
    ``algorithm must be one of ...``, the word of the CLI's flag ``--algorithm``; a FedProx solver without a proximal
    term as ``mu must be > 0 for fedprox``).

    Example
    -------
    FedNova takes a :math:`\tau_{\text{eff}}` policy or number (§5: any value > 0 keeps it
    consistent); FedAvg's is implicit (eq. 6), so one given to it is refused:

    >>> from fedlib.solvers import sgd
    >>> algo = make_algorithm("fednova", sgd(0.1), tau_eff=2.0)
    >>> algo.aggregation, algo.tau_eff, algo.server.name
    ('fednova', 2.0, 'plain')
    >>> make_algorithm("fedavg", sgd(0.1), tau_eff=2.0)
    Traceback (most recent call last):
    ...
    ValueError: tau_eff can only be set for FedNova-based algorithms, not 'fedavg'
    """
    return FederatedAlgorithm(name, solver, server or plain(), tau_eff)

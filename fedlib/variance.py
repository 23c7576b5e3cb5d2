r"""Cross-client variance reduction: control variates added to every local gradient.

Client :math:`i` uses :math:`g_i(x) + c_i^{\text{corr}}` at every local step of round
:math:`t` (passed to :meth:`fedlib.solvers.LocalSolver.init` as ``correction``), with

.. math::

    c_i^{\text{corr}} = \bar c - c_i .

* **SCAFFOLD** (Karimireddy et al. 2020, option II) and **FedNova-VR** (paper §5,
  App. H): :math:`c_i` is client :math:`i`'s *normalised raw gradient* of its last
  round, :math:`c_i \leftarrow d_i - c_i^{\text{corr}} = G_i a_i/\|a_i\|_1` (the correction
  itself removed; equals SCAFFOLD's :math:`c_i - c + (x - y_i)/(K\eta)` for SGD), and
  :math:`\bar c = \sum_{j=1}^m p_j c_j` over **all** clients (not only the sampled
  ones). So the correction is the paper's
  :math:`\sum_j p_j d_j^{(t-1)} - d_i^{(t-1)}`. The two algorithms differ only in the
  aggregation (FedAvg vs FedNova weights).
* **VRLSGD** (Liang et al. 2019) with heterogeneous steps, as paper §3 describes
  ("replace the same local steps :math:`\tau` in VRLSGD by different :math:`\tau_i`'s"):
  :math:`\bar c = 0` and :math:`c_i \leftarrow c_i - (\Delta_i - \Delta)/(\eta\tau_i)`,
  :math:`\Delta = \sum_j p_j\Delta_j` the FedAvg change. With equal :math:`\tau_i`, SGD and
  full participation this is exactly SCAFFOLD (under client sampling it is not: SCAFFOLD's
  :math:`\bar c` moves the correction of the clients left out, VRLSGD's does not); with
  random :math:`\tau_i` it is not consistent.

State is kept *stacked*: every leaf has a leading axis of length :math:`m` (the
variates are one model per client, as in SCAFFOLD; there is no way around that).
Used by the quadratic chapter (VRLSGD), the CIFAR-10 Table 1 chapter (its VR rows) and chapter 10
(SCAFFOLD, FedNova-VR and VRLSGD combined with momentum, run and in closed form).
"""
from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import numpy as np

from ._validate import (check_agree, check_choice, check_instance, check_int, check_local_steps, check_positive,
                        check_probability_vector, check_weights)
from .tree import (tree_all_finite, tree_leaves, tree_map, tree_stacked_weighted_sum, tree_structure_equal,
                   tree_zeros_like)

__all__ = ["VARIANCE_REDUCTIONS", "ControlVariates", "init_control_variates", "control_variates", "correction",
           "update_control_variates", "updated_client_variates"]

#: The control-variate kinds, SCAFFOLD / FedNova-VR (``"scaffold"``) and ``"vrlsgd"``.
VARIANCE_REDUCTIONS = ("scaffold", "vrlsgd")


class ControlVariates(NamedTuple):
    r"""``client``: stacked :math:`c_i` (leading axis m); ``mean``: :math:`\bar c`; ``kind``
    (:data:`VARIANCE_REDUCTIONS`). Client :math:`i` adds :math:`\bar c - c_i` to each local gradient
    (paper §5, *Combination with Acceleration Techniques*: the correction
    :math:`\sum_j p_j d_j^{(t-1)} - d_i^{(t-1)}`).

    Example
    -------
    :math:`c = (3, -1)` with :math:`p = (1/2, 1/2)`: :math:`\bar c = 1`, the leading axis is the client:

    >>> import numpy as np
    >>> state = control_variates(np.array([[3.0], [-1.0]]), [0.5, 0.5])
    >>> state.client[:, 0], state.mean, state.kind
    (array([ 3., -1.]), array([1.]), 'scaffold')
    """

    client: Any
    mean: Any
    kind: str


def _float_copy(x: Any) -> Any:
    """A copy of ``x`` with a floating dtype (integer leaves become float64 / torch's default
    float): the variates hold gradients, and assigning one into an integer stack truncated it."""
    if hasattr(x, "clone"):
        if x.is_floating_point() or x.is_complex():
            return x.clone()
        import torch

        return x.to(torch.get_default_dtype())
    x = np.asarray(x)
    return x.copy() if x.dtype.kind in "fc" else x.astype(np.float64)


def _stack_zeros(params: Any, m: int) -> Any:
    def z(x):
        x = _float_copy(x)
        if hasattr(x, "new_zeros"):
            return x.new_zeros((m,) + tuple(x.shape))
        # x's own dtype, 0-d too (floating after _float_copy): result_type(x, float64) made a float32 scalar's
        # variates float64, and its corrections then turned that leaf of the model into float64
        return np.zeros((m,) + np.shape(x), dtype=x.dtype)

    return tree_map(z, params)


def init_control_variates(params: Any, num_clients: int, kind: str = "scaffold") -> ControlVariates:
    r"""All-zero variates (first round uncorrected), one per client.

    ``params`` is a tree of the model's parameters (numpy or torch; only its structure, shapes and dtypes are used:
    integer leaves get float64 variates, integer tensors torch's default float). ``num_clients`` is :math:`m \ge 1`.
    ``kind`` is ``"scaffold"`` (SCAFFOLD and FedNova-VR, the default) or ``"vrlsgd"`` (:data:`VARIANCE_REDUCTIONS`);
    anything else is a ``ValueError``.

    Example
    -------
    Three clients of a model with a weight vector of 2 and a scalar bias: each leaf of ``client``
    gets a leading axis of 3, ``mean`` has the model's shapes:

    >>> import numpy as np
    >>> state = init_control_variates({"w": np.zeros(2), "b": 0.0}, num_clients=3)
    >>> state.client["w"].shape, state.client["b"].shape, state.mean["w"].shape, state.kind
    ((3, 2), (3,), (2,), 'scaffold')
    """
    check_choice("kind", kind, VARIANCE_REDUCTIONS)
    num_clients = check_int("num_clients", num_clients, minimum=1)  # a bool is no count (True made 1 client)
    return ControlVariates(_stack_zeros(params, num_clients), tree_zeros_like(tree_map(_float_copy, params)), kind)


def control_variates(client: Any, p: Any, kind: str = "scaffold") -> ControlVariates:
    r"""Variates with given values: ``client`` is the stacked :math:`c_i` (every leaf with a
    leading axis of length :math:`m`), ``p`` the weights of all clients; the mean is
    :math:`\bar c = \sum_i p_i c_i` (ignored by VRLSGD, which keeps :math:`\bar c = 0`).
    E.g. :math:`c_i = \nabla F_i(x^*)`, the fixed point of SCAFFOLD and FedNova-VR (chapter 10).

    Example
    -------
    :math:`c = (3, -1)`: SCAFFOLD's mean is :math:`\tfrac12 \cdot 3 + \tfrac12(-1) = 1` with
    :math:`p = (1/2, 1/2)` and :math:`\tfrac34 \cdot 3 + \tfrac14(-1) = 2` with :math:`p = (3/4, 1/4)`;
    VRLSGD's is 0 whatever :math:`p`:

    >>> import numpy as np
    >>> c = np.array([[3.0], [-1.0]])
    >>> control_variates(c, [0.5, 0.5]).mean, control_variates(c, [0.75, 0.25]).mean
    (array([1.]), array([2.]))
    >>> control_variates(c, [0.75, 0.25], kind="vrlsgd").mean
    array([0.])
    """
    check_choice("kind", kind, VARIANCE_REDUCTIONS)
    leaves = tree_leaves(client)
    if not leaves:
        raise ValueError("client: no arrays")
    m = int(np.shape(leaves[0])[0]) if np.ndim(leaves[0]) else 0
    if m < 1 or any(np.ndim(x) < 1 or np.shape(x)[0] != m for x in leaves):
        raise ValueError("client: every leaf must have the same leading axis (one entry per client)")
    if not tree_all_finite(client):  # a NaN row made the mean NaN, and every client's correction with it
        raise ValueError("client: the variates hold NaN or inf (they must be finite)")
    p = check_probability_vector("p", p)
    # either may be the wrong one: 'p must have 3 entries' blamed p for a row too many in client
    check_agree("p", p.size, "client", m, "entries", ref_what="rows")
    if kind == "vrlsgd":  # zeros of the stack's kind: np.zeros_like(x[0]) made a numpy mean for a torch stack
        return ControlVariates(client, tree_zeros_like(tree_map(lambda x: x[0], client)), kind)
    return ControlVariates(client, tree_stacked_weighted_sum(client, p), kind)


def _num_clients(state: ControlVariates) -> int:
    check_instance("state", state, ControlVariates, " (control_variates(...) or init_control_variates(...))")
    leaves = tree_leaves(state.client)
    return int(np.shape(leaves[0])[0]) if leaves else 0


def _check_client(name: str, client: Any, m: int) -> int:
    if isinstance(client, bool) or not isinstance(client, (int, np.integer)) or not 0 <= client < m:
        raise ValueError(f"{name} must be a client index in [0, {m}), got {client!r}")
    return int(client)


def correction(state: ControlVariates, client: int) -> Any:
    r"""The term :math:`\bar c - c_i` that client ``client`` adds to each gradient.

    Example
    -------
    :math:`c = (3, -1)`, :math:`\bar c = 1`: client 0 adds :math:`1 - 3 = -2`, client 1 adds
    :math:`1 + 1 = 2`. If the clients' gradients are 3 and :math:`-1`, both corrected gradients are
    the mean gradient 1:

    >>> import numpy as np
    >>> state = control_variates(np.array([[3.0], [-1.0]]), [0.5, 0.5])
    >>> correction(state, 0), correction(state, 1)
    (array([-2.]), array([2.]))
    """
    client = _check_client("client", client, _num_clients(state))
    return tree_map(lambda cm, cs: cm - cs[client], state.mean, state.client)


def update_control_variates(state: ControlVariates, clients: Sequence[int], deltas: Sequence[Any], lr: float,
                            a_norms: Any, p: Any, local_steps: Any = None, server_change: Any = None) -> ControlVariates:
    r"""Update the variates after a round.

    ``clients`` participated with changes ``deltas`` (:math:`\Delta_i`), solver norms
    ``a_norms`` and the corrections they used (``correction(state, i)``); ``p`` are the
    weights of **all** :math:`m` clients. VRLSGD also needs ``local_steps``
    (:math:`\tau_i` of the participants) and ``server_change`` (:math:`\sum_j p_j \Delta_j`).
    Every change (and ``server_change``) must have the model's structure and leaf shapes, those of
    ``state.mean`` (``ValueError`` otherwise). Returns a new state (inputs are not modified).

    Example
    -------
    Two clients, :math:`p = (1/2, 1/2)`, :math:`\eta = 1/2`, variates all zero in the first round.
    Client 0 takes 2 SGD steps of gradient 3 (:math:`\Delta_0 = -3`, :math:`d_0 = 3`), client 1 one
    step of gradient :math:`-1` (:math:`\Delta_1 = 1/2`, :math:`d_1 = -1`).
    SCAFFOLD / FedNova-VR store :math:`c = d = (3, -1)` and :math:`\bar c = 1`, so next round client 0
    adds :math:`-2` and client 1 adds :math:`+2` (:func:`correction`):

    >>> import numpy as np
    >>> deltas = [np.array([-3.0]), np.array([0.5])]
    >>> state = init_control_variates(np.zeros(1), num_clients=2)
    >>> new = update_control_variates(state, [0, 1], deltas, lr=0.5, a_norms=[2, 1], p=[0.5, 0.5])
    >>> new.client[:, 0], new.mean
    (array([ 3., -1.]), array([1.]))

    VRLSGD with the FedAvg change :math:`\Delta = \tfrac12(-3) + \tfrac12 \cdot \tfrac12 = -5/4`:
    :math:`c_0 = -(-3 + 5/4)/(\tfrac12 \cdot 2) = 1.75`, :math:`c_1 = -(1/2 + 5/4)/(\tfrac12 \cdot 1) = -3.5`,
    :math:`\bar c` stays 0:

    >>> vr = init_control_variates(np.zeros(1), num_clients=2, kind="vrlsgd")
    >>> new = update_control_variates(vr, [0, 1], deltas, lr=0.5, a_norms=[2, 1], p=[0.5, 0.5],
    ...                               local_steps=[2, 1], server_change=np.array([-1.25]))
    >>> new.client[:, 0], new.mean
    (array([ 1.75, -3.5 ]), array([0.]))
    """
    lr, clients, deltas = _checked_participants(state, clients, deltas, lr)
    a = _checked_a_norms(a_norms, clients)
    p = check_probability_vector("p", p, size=_num_clients(state))
    if state.kind == "scaffold":
        new_client = _updated_rows(state, clients, deltas, lr, a, None, None)
        return ControlVariates(new_client, tree_stacked_weighted_sum(new_client, p), state.kind)
    steps = _checked_vrlsgd(state, clients, local_steps, server_change)
    return ControlVariates(_updated_rows(state, clients, deltas, lr, a, steps, server_change), state.mean, state.kind)


def updated_client_variates(state: ControlVariates, clients: Sequence[int], deltas: Sequence[Any], lr: float,
                            a_norms: Any, local_steps: Any = None, server_change: Any = None) -> Any:
    r"""A copy of ``state.client`` with the rows of ``clients`` updated, :math:`\bar c` left
    alone (the step of :func:`update_control_variates` before the mean, with its checks of these inputs):
    SCAFFOLD / FedNova-VR's raw normalised gradient
    :math:`c_i \leftarrow d_i - (\bar c - c_i)` with :math:`d_i = -\Delta_i/(\eta\|a_i\|_1)`,
    VRLSGD's :math:`c_i \leftarrow c_i - (\Delta_i - \sum_j p_j\Delta_j)/(\eta\tau_i)`.
    :func:`fedlib.distributed.distributed_apply` calls it for each rank's own clients.

    ``state`` is the current :class:`ControlVariates` (its ``kind`` picks the formula), ``clients`` the indices of the
    clients that trained, and ``deltas`` their :math:`\Delta_i`, in the same order. ``lr`` is :math:`\eta`. ``a_norms``
    holds their :math:`\|a_i\|_1` (read by ``"scaffold"``); ``local_steps`` their :math:`\tau_i` and ``server_change``
    the aggregate :math:`\sum_j p_j\Delta_j` (a tree like one :math:`\Delta_i`; read by ``"vrlsgd"`` only, which needs
    both).
    ``clients`` may be empty (a rank of :func:`fedlib.distributed.distributed_apply` with no participant this round:
    an unchanged copy). A ``clients`` entry that is no index in :math:`[0, m)` or repeats, ``deltas`` (or ``a_norms``,
    ``local_steps``) of another length or shape, an ``lr`` that is not a finite number > 0 and an ``a_norms`` entry
    <= 0 each raise a ``ValueError`` naming the parameter.

    Example
    -------
    With :math:`c = (3, -1)`, :math:`\bar c = 1`, client 0 (gradient 3) runs 2 steps of
    :math:`\eta = 1/2` corrected by :math:`-2`: its gradient reads 1, :math:`\Delta_0 = -1`,
    :math:`d_0 = 1`. Its new variate removes the correction again,
    :math:`c_0 \leftarrow d_0 - (\bar c - c_0) = 1 + 2 = 3`: its raw gradient. Client 1's row and the
    mean are left alone:

    >>> import numpy as np
    >>> state = control_variates(np.array([[3.0], [-1.0]]), [0.5, 0.5])
    >>> updated_client_variates(state, [0], [np.array([-1.0])], 0.5, [2])[:, 0]
    array([ 3., -1.])
    """
    lr, clients, deltas = _checked_participants(state, clients, deltas, lr)
    if state.kind == "scaffold":
        a_norms = _checked_a_norms(a_norms, clients) if clients else []
    else:
        local_steps = _checked_vrlsgd(state, clients, local_steps, server_change)
    return _updated_rows(state, clients, deltas, lr, a_norms, local_steps, server_change)


def _checked_participants(state: ControlVariates, clients: Any, deltas: Any, lr: Any) -> tuple:
    lr = check_positive("lr", lr)
    m = _num_clients(state)
    clients = [_check_client("clients", c, m) for c in np.asarray(clients).ravel().tolist()]
    if len(set(clients)) != len(clients):
        raise ValueError(f"clients must be distinct, got {clients}")
    deltas = list(deltas)
    if len(deltas) != len(clients):
        raise ValueError(f"deltas has {len(deltas)} entries but clients has {len(clients)}")
    for k, d in enumerate(deltas):  # a (1,) change or a number was broadcast over every entry of the row
        if not tree_structure_equal(d, state.mean):
            raise ValueError(f"deltas[{k}] must have the structure and leaf shapes of the model (of state.mean)")
    return lr, clients, deltas


def _checked_a_norms(a_norms: Any, clients: list) -> np.ndarray:
    a = check_weights("a_norms", a_norms, size=len(clients))
    if np.any(a <= 0):
        raise ValueError(f"a_norms must be > 0 for every client, got {a.tolist()}")
    return a


def _checked_vrlsgd(state: ControlVariates, clients: list, local_steps: Any, server_change: Any) -> Any:
    if local_steps is None or server_change is None:
        raise ValueError("local_steps and server_change are required for VRLSGD")
    steps = check_local_steps("local_steps", local_steps, size=len(clients)) if clients else []
    if not tree_structure_equal(server_change, state.mean):
        raise ValueError("server_change must have the structure and leaf shapes of the model (of state.mean)")
    return steps


def _updated_rows(state: ControlVariates, clients: list, deltas: list, lr: float, a_norms: Any, local_steps: Any,
                  server_change: Any) -> Any:
    """:func:`updated_client_variates` on checked inputs."""
    new_client = tree_map(_float_copy, state.client)  # integer variates (given by hand) would truncate
    if state.kind == "scaffold":
        for i, d, an in zip(clients, deltas, a_norms):
            def upd(cs, dl, cm, i=i, an=an):
                cs[i] = -dl / (lr * an) - (cm - cs[i])
                return cs

            new_client = tree_map(upd, new_client, d, state.mean)
        return new_client
    for i, d, tau in zip(clients, deltas, local_steps):
        def upd(cs, dl, sc, i=i, tau=tau):
            cs[i] = cs[i] - (dl - sc) / (lr * tau)
            return cs

        new_client = tree_map(upd, new_client, d, server_change)
    return new_client

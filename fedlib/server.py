r"""Server optimizers applied to the aggregated change of eq. (4) (paper §5).

FedNova "is used to update the server momentum buffer instead of directly updating the
server model": the server receives :math:`D^{(t)} = -\tau_{\text{eff}}\sum_i w_i\eta d_i`
(the output of :func:`fedlib.rule.aggregate`) and turns it into the model change.

Each factory returns a :class:`ServerOptimizer` ``(init, update)`` pair (optax style):
``state = opt.init(params)``; ``params, state = opt.update(change, state, params, lr)``
where ``lr`` is the current client learning rate :math:`\eta` (used by server momentum).
States are NamedTuples so they can be checkpointed.

*Your own server optimizer* (e.g. FedYogi) is a ``ServerOptimizer(init, update, name)`` built the
same way: ``init(params) -> state`` (a NamedTuple of trees like ``params`` and numbers, defined at
module level so that :mod:`fedlib.checkpoint` can pickle it) and ``update(change, state, params, lr)
-> (new_params, new_state)``, with ``change`` the aggregate :math:`D` (a tree like ``params``) and
``new_params`` of the structure, leaf shapes and array kind of ``params`` (and its dtypes, or those of
``params + change`` where the change is wider);
:meth:`fedlib.algorithms.FederatedAlgorithm.apply` refuses any other result with a ``ValueError``
(:func:`fedlib.algorithms.apply_server_optimizer`). Use :mod:`fedlib.tree` (``tree_map``,
``tree_zeros_like``) so it works on numpy and torch trees alike. A resume refuses a state of one of
fedlib's kinds under another kind (:func:`fedlib.algorithms.server_state_mismatch`); two server
optimizers of your own are not told apart before a round (your state may change type after ``init``),
so where your ``update`` fails on the other one's state, its error carries a note naming both state
classes (Python 3.11+).
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

import numpy as np

from ._validate import check_in_range, check_positive, is_choice
from .tree import tree_map, tree_zeros_like

__all__ = ["ServerOptimizer", "PlainState", "MomentumState", "AdamState", "plain", "momentum", "adam", "make_server_optimizer", "SERVER_OPTIMIZERS"]


class ServerOptimizer(NamedTuple):
    r"""An ``(init, update)`` pair; ``name`` labels results.

    ``init(params) -> state``; ``update(change, state, params, lr) -> (new_params, new_state)`` with
    ``change`` the aggregate :math:`D = -\tau_{\text{eff}}\sum_i w_i \eta d_i` of eq. (4).

    Example
    -------
    A server optimizer of your own that takes half of each aggregate,
    :math:`x \leftarrow x + D/2`: from :math:`x = 1` with :math:`D = -2` it lands on 0:

    >>> import numpy as np
    >>> half = ServerOptimizer(init=lambda params: PlainState(0),
    ...                        update=lambda change, state, params, lr=None: (params + 0.5 * change,
    ...                                                                       PlainState(state.count + 1)),
    ...                        name="half")
    >>> half.update(np.array([-2.0]), half.init(np.array([1.0])), np.array([1.0]), 0.1)
    (array([0.]), PlainState(count=1))
    """

    init: Callable[[Any], Any]
    update: Callable[..., tuple]
    name: str


class PlainState(NamedTuple):
    """State of :func:`plain`: ``count`` rounds applied so far (nothing else to remember).

    Example
    -------
    >>> import numpy as np
    >>> plain().init(np.zeros(2))
    PlainState(count=0)
    """

    count: int


class MomentumState(NamedTuple):
    r"""State of :func:`momentum`: the buffer :math:`u` (a tree like the parameters, 0 before the first
    round) and ``count`` rounds applied.

    Example
    -------
    >>> import numpy as np
    >>> momentum().init(np.zeros(2))
    MomentumState(buffer=array([0., 0.]), count=0)
    """

    buffer: Any
    count: int


class AdamState(NamedTuple):
    r"""State of :func:`adam`: the first and second moments :math:`m`, :math:`v` of the aggregates
    (trees like the parameters, 0 before the first round) and ``count`` rounds applied.

    Example
    -------
    >>> import numpy as np
    >>> adam().init(np.zeros(1))
    AdamState(m=array([0.]), v=array([0.]), count=0)
    """

    m: Any
    v: Any
    count: int


def plain(server_lr: float = 1.0) -> ServerOptimizer:
    r"""Apply the aggregate directly: :math:`x \leftarrow x + \eta_g D` (:math:`\eta_g = 1`: eq. 4).

    Example
    -------
    :math:`\eta_g = 1/2`, :math:`x = 1`, :math:`D = -2`: :math:`x \leftarrow 1 + \tfrac12(-2) = 0`
    (the client learning rate, last argument, is not used):

    >>> import numpy as np
    >>> opt = plain(server_lr=0.5)
    >>> opt.update(np.array([-2.0]), opt.init(np.array([1.0])), np.array([1.0]), 0.1)
    (array([0.]), PlainState(count=1))
    """
    server_lr = check_positive("server_lr", server_lr)

    def init(params):
        return PlainState(0)

    def update(change, state, params, lr=None):
        new = tree_map(lambda x, d: x + server_lr * d, params, change)
        return new, PlainState(state.count + 1)

    return ServerOptimizer(init, update, "plain")


def momentum(beta: float = 0.9) -> ServerOptimizer:
    r"""Server momentum as the official ``gmf`` (github.com/JYWa/FedNova):

    .. math::

        u \leftarrow \beta u - D/\eta, \qquad x \leftarrow x - \eta u,

    with :math:`u = 0` before the first round (so the first buffer is :math:`-D/\eta`).
    The buffer persists across rounds (re-creating it every round silently disables
    momentum, a mistake found in existing implementations). With :math:`\beta = 0` it equals :func:`plain`.

    Example
    -------
    :math:`\beta = 1/2`, :math:`\eta = 0.1`, the same aggregate :math:`D = -0.1` twice from :math:`x = 1`.
    Round 1: :math:`u = -D/\eta = 1`, :math:`x = 1 - 0.1 = 0.9` (as :func:`plain` would).
    Round 2: :math:`u = \tfrac12 \cdot 1 + 1 = 1.5`, :math:`x = 0.9 - 0.15 = 0.75`: the buffer,
    kept from round 1, makes the second step 1.5 times the first.

    >>> import numpy as np
    >>> opt = momentum(beta=0.5)
    >>> x = np.array([1.0])
    >>> state = opt.init(x)
    >>> for _ in range(2):
    ...     x, state = opt.update(np.array([-0.1]), state, x, 0.1)
    ...     print(np.round(x, 12), state.buffer)
    [0.9] [1.]
    [0.75] [1.5]
    """
    beta = check_in_range("beta", beta, 0.0, 1.0)

    def init(params):
        return MomentumState(tree_zeros_like(params), 0)

    def update(change, state, params, lr):
        lr = check_positive("lr", lr)
        buf = tree_map(lambda u, d: beta * u - d / lr, state.buffer, change)
        new = tree_map(lambda x, u: x - lr * u, params, buf)
        return new, MomentumState(buf, state.count + 1)

    return ServerOptimizer(init, update, "momentum")


def adam(server_lr: float = 0.01, b1: float = 0.9, b2: float = 0.99, eps: float = 1e-3) -> ServerOptimizer:
    r"""FedAdam (Reddi et al., *Adaptive Federated Optimization*, 2021, Alg. 2):

    .. math::

        m \leftarrow \beta_1 m + (1-\beta_1) D,\quad
        v \leftarrow \beta_2 v + (1-\beta_2) D^2,\quad
        x \leftarrow x + \eta_g\, m / (\sqrt{v} + \epsilon),

    element-wise, without bias correction (as in that paper), :math:`D` the aggregate.

    ``server_lr`` is :math:`\eta_g > 0` (default 0.01), ``b1`` and ``b2`` are :math:`\beta_1, \beta_2 \in [0, 1)`
    (defaults 0.9 and 0.99) and ``eps`` is :math:`\epsilon > 0` (default 1e-3, Reddi et al.'s :math:`\tau`), added to
    :math:`\sqrt v` in the denominator; each is checked here (``ValueError`` naming it).

    Example
    -------
    :math:`\beta_1 = 1/2`, :math:`\beta_2 = 3/4`, :math:`\eta_g = 0.1`, first aggregate :math:`D = 2` from
    :math:`x = 0`: :math:`m = \tfrac12 \cdot 2 = 1`, :math:`v = \tfrac14 \cdot 4 = 1` (no bias correction:
    not :math:`D` and :math:`D^2`), so :math:`x = 0.1 \cdot 1/(1 + \epsilon) \approx 0.1`:

    >>> import numpy as np
    >>> opt = adam(server_lr=0.1, b1=0.5, b2=0.75)
    >>> x, state = opt.update(np.array([2.0]), opt.init(np.zeros(1)), np.zeros(1))
    >>> state
    AdamState(m=array([1.]), v=array([1.]), count=1)
    >>> np.round(x, 3)
    array([0.1])
    """
    server_lr = check_positive("server_lr", server_lr)
    b1 = check_in_range("b1", b1, 0.0, 1.0)
    b2 = check_in_range("b2", b2, 0.0, 1.0)
    eps = check_positive("eps", eps)

    def _sqrt(x):
        return x.sqrt() if hasattr(x, "sqrt") else np.sqrt(x)

    def init(params):
        return AdamState(tree_zeros_like(params), tree_zeros_like(params), 0)

    def update(change, state, params, lr=None):
        m = tree_map(lambda a, d: b1 * a + (1 - b1) * d, state.m, change)
        v = tree_map(lambda a, d: b2 * a + (1 - b2) * d * d, state.v, change)
        new = tree_map(lambda x, a, b: x + server_lr * a / (_sqrt(b) + eps), params, m, v)
        return new, AdamState(m, v, state.count + 1)

    return ServerOptimizer(init, update, "adam")


#: The server optimizers :func:`make_server_optimizer` builds by name.
SERVER_OPTIMIZERS = ("plain", "momentum", "adam")


def make_server_optimizer(name: str, *, server_lr: Optional[float] = None,
                          beta: Optional[float] = None) -> ServerOptimizer:
    r"""Build a server optimizer by name (``plain``, ``momentum``, ``adam``). ``server_lr``
    ``None`` keeps each optimizer's own default (:func:`plain`'s 1, :func:`adam`'s 0.01: one
    FedAdam step is about ``server_lr`` in size, so 1 would be a 100x larger step); server
    momentum has no server learning rate (its step is the client lr), so one given is refused.
    ``beta`` is server momentum's :math:`\beta` (``None``: 0.9); the other two have none, so one
    given to them is refused rather than ignored. (Paper §5, *Combination with Acceleration
    Techniques*: the aggregate of eq. (4) may feed a server momentum buffer or an adaptive optimizer.)
    An unknown ``name`` is a ``ValueError`` that lists :data:`SERVER_OPTIMIZERS` and calls the choice ``server``,
    as the CLI's flag ``--server`` and :func:`fedlib.algorithms.make_algorithm`'s ``server`` do:
    ``server must be one of [...], got 'sgd'``.

    Example
    -------
    >>> make_server_optimizer("momentum", beta=0.5).name
    'momentum'
    >>> make_server_optimizer("plain", beta=0.5)
    Traceback (most recent call last):
    ...
    ValueError: beta: only server momentum has a momentum factor, got beta=0.5 for 'plain'
    """
    if not is_choice(name, SERVER_OPTIMIZERS):  # an array is none (not numpy's 'truth value ... ambiguous')
        raise ValueError(f"server must be one of {list(SERVER_OPTIMIZERS)}, got {name!r}")
    if name != "momentum" and beta is not None:
        raise ValueError(f"beta: only server momentum has a momentum factor, got beta={beta!r} for {name!r}")
    if name == "plain":
        return plain() if server_lr is None else plain(server_lr)
    if name == "momentum":
        if server_lr is not None:
            raise ValueError("server_lr: server momentum has no server learning rate (its step is the client lr)")
        return momentum(0.9 if beta is None else beta)
    return adam() if server_lr is None else adam(server_lr)

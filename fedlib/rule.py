r"""The general update rule of the paper (eq. 4) and its aggregators.

Paper §4, eq. (4):

.. math::

    x^{(t+1,0)} - x^{(t,0)} = -\tau_{\text{eff}} \sum_{i=1}^m w_i\, \eta\, d_i^{(t)},
    \qquad d_i = \frac{G_i a_i}{\|a_i\|_1} = -\frac{\Delta_i}{\eta \|a_i\|_1},
    \qquad \sum_i w_i = 1.

================================  ==============================================  ==================================================
algorithm                         :math:`\tau_{\text{eff}}`                        :math:`w_i`
================================  ==============================================  ==================================================
FedAvg / FedProx (eq. 6)          :math:`\sum_i p_i\|a_i\|_1`                      :math:`p_i\|a_i\|_1 / \sum_j p_j\|a_j\|_1`
FedNova (§5)                      default :math:`\sum_i p_i\|a_i\|_1`; or          :math:`p_i`
                                  :math:`\sum_i p_i\tau_i`; or any number > 0
================================  ==============================================  ==================================================

Implementation: the server change is a *single* weighted sum of the client changes,

.. math::

    x^{(t+1,0)} - x^{(t,0)} = \sum_i c_i \Delta_i, \qquad c_i = \frac{\tau_{\text{eff}} w_i}{\|a_i\|_1},

so no normalised copy :math:`d_i` of any model is ever materialised (for FedAvg
:math:`c_i = p_i`: plain weighted averaging). ``tau_eff`` is the *scale* of the
step, never a weight inside a normalised mean (a mistake found in existing implementations).

With client sampling (App. G) the weights :math:`p_i` are replaced by the unbiased
sampling weights :math:`\omega_i` of :mod:`fedlib.sampling` (they sum to one in
expectation only); the formulas above are otherwise unchanged. FedAvg's change
:math:`\sum_{i\in S}\omega_i\Delta_i` is then unbiased. FedNova's default
:math:`\tau_{\text{eff}} = \sum_{i\in S}\omega_i\|a_i\|_1` is estimated from the same
sample as the direction :math:`\sum_{i\in S}\omega_i d_i`, and the product of the two is
*not* unbiased: with uniform sampling and one large client it overshoots badly (the
Synthetic chapter measures it). Pass a number instead — e.g. the population value
:math:`\sum_{i=1}^m p_i\,\mathbb E\|a_i\|_1` — for an unbiased step; the paper allows
any positive :math:`\tau_{\text{eff}}`.

Used by chapter 1 ("The general update rule").
"""
from __future__ import annotations

import numbers
from typing import Any, Mapping, NamedTuple, Sequence, Union

import numpy as np

from ._validate import (a_type, check_choice, check_finite_array, check_local_steps, check_positive, check_probability_vector,
                        check_weights, plain)
from .tree import tree_map, tree_stacked_weighted_sum, tree_weighted_sum

__all__ = [
    "AGGREGATIONS",
    "TAU_EFF_POLICIES",
    "check_tau_eff",
    "normalized_update",
    "fedavg_weights",
    "fednova_weights",
    "effective_weights",
    "aggregation_coefficients",
    "Aggregate",
    "aggregate",
    "aggregate_stacked",
]

#: The aggregations of eq. (4) — FedAvg's implicit weights (also FedProx's) and FedNova's.
AGGREGATIONS = ("fedavg", "fednova")
#: FedNova's named :math:`\tau_{\text{eff}}` policies, :math:`\sum_i p_i\|a_i\|_1` and :math:`\sum_i p_i\tau_i`
#: (:func:`fednova_weights`; a number > 0 is taken as is).
TAU_EFF_POLICIES = ("a_norm", "local_steps")

TauEff = Union[None, str, float]


def _check_a_norms(a_norms: Any, size: int, weights: str) -> np.ndarray:
    a = check_weights("a_norms", a_norms)
    if a.size != size:  # name both: the wrong one may be the weights (check_weights' message blamed a_norms alone)
        raise ValueError(f"a_norms and {weights} must have one entry per client, got {a.size} a_norms and "
                         f"{size} {weights}")
    if a.min() <= 0:
        bad = int(np.flatnonzero(a <= 0)[0])
        raise ValueError(f"a_norms must be > 0 for every client (client {bad} has {plain(a[bad])!r})")
    return a


def normalized_update(delta: Any, lr: float, a_norm: float) -> Any:
    r"""The normalised gradient :math:`d_i = -\Delta_i / (\eta \|a_i\|_1)` (paper eq. 4).

    Works on any tree of arrays or tensors; returns a new tree. ``lr`` and ``a_norm`` are checked (each finite and
    > 0, and their product > 0: ``ValueError`` where it underflows); the
    tree's entries are not (a NaN in :math:`\Delta_i` gives a NaN in :math:`d_i`, as in any arithmetic):
    :meth:`fedlib.algorithms.FederatedAlgorithm.apply` raises ``FloatingPointError`` on a non-finite aggregated change.

    ``delta`` is the client's change :math:`\Delta_i = x_i^{(t,\tau_i)} - x^{(t,0)}`, ``lr`` the client learning
    rate :math:`\eta` and ``a_norm`` the solver's :math:`\|a_i\|_1` (the ``a_norm`` of a
    :class:`fedlib.algorithms.ClientUpdate`; :math:`\tau_i` for plain SGD, not a step count in general).

    Example
    -------
    Client 1 takes :math:`\tau_1 = 1` SGD step, client 2 takes :math:`\tau_2 = 2`, with
    :math:`\eta = 1` and a constant gradient of :math:`+1` for client 1 and :math:`-1` for
    client 2: :math:`\Delta_1 = -1`, :math:`\Delta_2 = +2`. Dividing by
    :math:`\eta\|a_i\|_1 = \tau_i` recovers each client's gradient, :math:`d_1 = 1`,
    :math:`d_2 = -1`, whatever the number of steps:

    >>> import numpy as np
    >>> normalized_update(np.array([-1.0]), lr=1.0, a_norm=1.0), normalized_update(np.array([2.0]), lr=1.0, a_norm=2.0)
    (array([1.]), array([-1.]))
    """
    lr = check_positive("lr", lr)
    a_norm = check_positive("a_norm", a_norm)
    step = lr * a_norm
    if step == 0:  # both > 0, but the product underflows (subnormal numbers): -1.0 / 0.0 raised ZeroDivisionError
        raise ValueError(f"lr * a_norm underflows to 0 (lr = {lr!r}, a_norm = {a_norm!r}: subnormal numbers?)")
    scale = -1.0 / step
    return tree_map(lambda x: x * scale, delta)


def fedavg_weights(p: Any, a_norms: Any) -> tuple[float, np.ndarray]:
    r"""FedAvg/FedProx's implicit :math:`(\tau_{\text{eff}}, w)` (paper eq. 6).

    .. math::

        \tau_{\text{eff}} = \sum_i p_i \|a_i\|_1, \qquad w_i = \frac{p_i\|a_i\|_1}{\sum_j p_j\|a_j\|_1}.

    Parameters
    ----------
    p : (m,) client weights :math:`p_i = n_i/n` (non-negative, summing to 1).
    a_norms : (m,) :math:`\|a_i\|_1 > 0` of each client's local solver.

    Returns
    -------
    (tau_eff, w)

    Example
    -------
    >>> tau_eff, w = fedavg_weights([0.5, 0.5], [2.0, 6.0])
    >>> tau_eff, w.tolist()
    (4.0, [0.25, 0.75])
    """
    p = check_probability_vector("p", p)
    a = _check_a_norms(a_norms, p.size, "p")
    return _fedavg(p, a)


def _positive_tau_eff(tau_eff: float, p: np.ndarray) -> float:
    """``sum_i p_i ||a_i||_1``, refused where it is not > 0: all-zero weights, or ``a_norms`` so small
    (subnormal) that the products underflow to 0; and where it overflows to inf (sampling weights need not
    sum to 1, so huge ones pass their check; FedAvg's weights were then inf / inf = NaN)."""
    if 0 < tau_eff < np.inf:
        return tau_eff
    if tau_eff == np.inf:
        raise ValueError("a_norms: sum_i p_i ||a_i||_1 overflows to inf (client weights or a_norms too large: "
                         "weights are p_i = n_i / n or sampling weights omega_i)")
    if not np.any(p > 0):
        raise ValueError("p: the client weights are all zero")
    raise ValueError("a_norms: sum_i p_i ||a_i||_1 underflows to 0 (a_norms too small: subnormal numbers?)")


def _fedavg(p: np.ndarray, a: np.ndarray) -> tuple[float, np.ndarray]:
    pa = p * a
    tau_eff = _positive_tau_eff(float(pa.sum()), p)
    return tau_eff, pa / tau_eff


def check_tau_eff(tau_eff: TauEff) -> TauEff:
    r"""``tau_eff`` as FedNova takes it: ``None``, a policy of ``TAU_EFF_POLICIES``, or
    a finite number > 0 (returned as ``float``); ``ValueError`` otherwise.

    :math:`\tau_{\text{eff}}` scales the step of eq. (4); the paper lets FedNova choose any value
    > 0 (§5), so a zero or negative one is refused rather than clipped.

    Example
    -------
    A number comes back as a float, a policy name unchanged, and 0 is refused:

    >>> check_tau_eff(3), check_tau_eff("local_steps"), check_tau_eff(None)
    (3.0, 'local_steps', None)
    >>> check_tau_eff(0)
    Traceback (most recent call last):
    ...
    ValueError: tau_eff must be a finite number > 0, got 0
    """
    if tau_eff is None:
        return None
    if isinstance(tau_eff, str):
        if tau_eff == "population":  # the CLI's --tau-eff population is a number computed from the schedule
            raise ValueError("tau_eff='population' is a setting of the command line; in code compute the number, "
                             "tau_eff=fedlib.schedules.population_tau_eff(p, schedule, solver), and pass it")
        return check_choice("tau_eff", tau_eff, TAU_EFF_POLICIES)
    if isinstance(tau_eff, numbers.Real) and not isinstance(tau_eff, bool):
        return check_positive("tau_eff", tau_eff)
    raise ValueError(f"tau_eff must be None, 'a_norm', 'local_steps' or a number > 0, got {tau_eff!r}")


def _tau_eff_value(tau_eff: TauEff, p: np.ndarray, a: np.ndarray, local_steps: Any) -> float:
    return _checked_tau_eff_value(check_tau_eff(tau_eff), p, a, local_steps)


def _checked_tau_eff_value(tau_eff: TauEff, p: np.ndarray, a: np.ndarray, local_steps: Any) -> float:
    """:func:`_tau_eff_value` of a policy :func:`check_tau_eff` has passed."""
    if tau_eff is None or tau_eff == "a_norm":
        return _positive_tau_eff(float((p * a).sum()), p)  # bit-identical to FedAvg's tau_eff
    if tau_eff == "local_steps":
        if local_steps is None:
            raise ValueError("local_steps is required when tau_eff='local_steps'")
        steps = check_local_steps("local_steps", local_steps, size=p.size, size_of="p")
        return float(np.dot(p, steps))
    return tau_eff


def fednova_weights(p: Any, a_norms: Any, tau_eff: TauEff = None, local_steps: Any = None) -> tuple[float, np.ndarray]:
    r"""FedNova's :math:`(\tau_{\text{eff}}, w)` (paper §5): :math:`w_i = p_i`.

    ``tau_eff`` policy: ``None`` or ``"a_norm"`` gives the default
    :math:`\sum_i p_i \|a_i\|_1`; ``"local_steps"`` gives :math:`\sum_i p_i \tau_i`
    (suggested with proximal solvers, needs ``local_steps``); a number is used as is.
    With full participation every positive value keeps the objective consistent; it only
    scales the step. Under client sampling only a value that does not depend on the sample
    does (chapter 8, :func:`fedlib.experiments.speedup.sampling_bias`).

    ``p`` is the (m,) vector of client weights :math:`p_i = n_i/n`: non-negative and summing to 1 (within 1e-9, or the
    rounding of float32 input; counts are refused, pass ``n / n.sum()``). ``a_norms`` holds the (m,) :math:`\|a_i\|_1`
    of the clients' solvers, each > 0 (``ValueError`` naming the client otherwise). ``local_steps`` is the (m,)
    :math:`\tau_i`, whole numbers :math:`\ge 1`, checked whenever given (as :func:`fedlib.rule.effective_weights`
    checks it) and read by ``tau_eff="local_steps"`` only (which refuses ``None``).
    Returns ``(tau_eff, w)`` with ``w`` the checked ``p`` as a new float64 array (float32 weights accepted at their
    own precision come back divided by their sum).

    Example
    -------
    >>> fednova_weights([0.5, 0.5], [2.0, 6.0])[0]
    4.0
    """
    p = check_probability_vector("p", p)
    a = _check_a_norms(a_norms, p.size, "p")
    if local_steps is not None:  # read by tau_eff="local_steps" only; [-1, 'x'] passed silently with any other policy
        local_steps = check_local_steps("local_steps", local_steps, size=p.size, size_of="p")
    return _tau_eff_value(tau_eff, p, a, local_steps), p.copy()


def effective_weights(algorithm: str, client_weights: Any, a_norms: Any, tau_eff: TauEff = None,
                      local_steps: Any = None) -> tuple[float, np.ndarray]:
    r""":math:`(\tau_{\text{eff}}, w)` of ``algorithm`` for (possibly sampled) weights :math:`\omega_i`.

    Same formulas as :func:`fedavg_weights` / :func:`fednova_weights` with :math:`p`
    replaced by the unbiased weights :math:`\omega` (which need not sum to one).
    ``tau_eff`` overrides are only meaningful for FedNova.

    ``algorithm`` is ``"fedavg"`` (also FedProx) or ``"fednova"``. ``client_weights`` is the (m,) vector of :math:`p_i`
    or sampling weights :math:`\omega_i`: finite, non-negative, not all zero; its sum is not checked. ``a_norms`` holds
    the (m,) :math:`\|a_i\|_1`, each > 0. ``tau_eff`` is FedNova's policy (:func:`fednova_weights`); FedAvg refuses any
    value but ``None``. ``local_steps`` is the (m,) :math:`\tau_i`, checked whenever given (whole numbers
    :math:`\ge 1`, one per client) and needed by ``tau_eff="local_steps"``.

    Example
    -------
    Two sampled clients with weights :math:`\omega = (1, 0.5)` (they sum to 1.5, not 1) and
    :math:`\|a\|_1 = (2, 6)`: FedNova keeps :math:`w = \omega` and
    :math:`\tau_{\text{eff}} = 1\cdot 2 + 0.5\cdot 6 = 5`; FedAvg's weights are
    :math:`\omega_i\|a_i\|_1 / 5 = (2/5, 3/5)`:

    >>> tau_eff, w = effective_weights("fednova", [1.0, 0.5], [2.0, 6.0])
    >>> tau_eff, w.tolist()
    (5.0, [1.0, 0.5])
    >>> tau_eff, w = effective_weights("fedavg", [1.0, 0.5], [2.0, 6.0])
    >>> tau_eff, w.tolist()
    (5.0, [0.4, 0.6])
    """
    check_choice("algorithm", algorithm, AGGREGATIONS)
    w = check_weights("client_weights", client_weights)
    if w.sum() <= 0:
        raise ValueError("client_weights must not all be zero")
    a = _check_a_norms(a_norms, w.size, "client_weights")
    if local_steps is not None:  # used by tau_eff="local_steps" only, but a wrong one is a mistake all the same
        local_steps = check_local_steps("local_steps", local_steps, size=w.size, size_of="client_weights")
    if algorithm == "fedavg":
        if tau_eff is not None:
            raise ValueError("tau_eff: FedAvg's tau_eff is implicit (sum_i p_i ||a_i||_1); use algorithm='fednova' to set it")
        return _fedavg(w, a)
    return _tau_eff_value(tau_eff, w, a, local_steps), w.copy()


def _effective_weights_checked(algorithm: str, w: np.ndarray, a: np.ndarray,
                               tau_eff: float | None) -> tuple[float, np.ndarray]:
    """:func:`effective_weights` once its checks have passed elsewhere: ``algorithm`` one of ``AGGREGATIONS``,
    ``w`` float64 weights (finite, >= 0, positive sum), ``a`` float64 ``a_norms`` of the same size (finite, > 0),
    ``tau_eff`` ``None`` or a finite ``float`` > 0 (FedNova only). The same operations, hence the same bits
    (:func:`fedlib.engines.quadratic.run_replicas`, every round)."""
    if algorithm == "fedavg":
        return _fedavg(w, a)
    return _checked_tau_eff_value(tau_eff, w, a, None), w.copy()


def aggregation_coefficients(tau_eff: float, weights: Any, a_norms: Any) -> np.ndarray:
    r"""Coefficients :math:`c_i = \tau_{\text{eff}} w_i / \|a_i\|_1` with
    :math:`x^{(t+1,0)} - x^{(t,0)} = \sum_i c_i \Delta_i` (eq. 4 rewritten).

    ``tau_eff`` is the step scale :math:`\tau_{\text{eff}}` (a finite number > 0), ``weights`` the (m,) :math:`w_i`
    (finite, non-negative; the sum is not checked) and ``a_norms`` the (m,) :math:`\|a_i\|_1`, each > 0. Returns the
    (m,) array :math:`c` (``ValueError`` where a :math:`c_i` is beyond float64).

    Example
    -------
    FedNova with :math:`w = (1/2, 1/2)`, :math:`\|a\|_1 = (2, 6)` and its default
    :math:`\tau_{\text{eff}} = 4`: :math:`c = (4/2 \cdot 1/2,\ 4/6 \cdot 1/2) = (1, 1/3)`, so the
    client with three times as many steps counts a third as much per unit of change. (FedAvg's
    :math:`w_i = p_i\|a_i\|_1/\tau_{\text{eff}}` gives :math:`c_i = p_i`.)

    >>> from fractions import Fraction
    >>> [Fraction(c).limit_denominator() for c in aggregation_coefficients(4.0, [0.5, 0.5], [2.0, 6.0])]
    [Fraction(1, 1), Fraction(1, 3)]
    """
    tau_eff = check_positive("tau_eff", tau_eff)
    w = check_weights("weights", weights)
    a = _check_a_norms(a_norms, w.size, "weights")
    with np.errstate(over="ignore"):
        c = tau_eff * w / a
        if not np.isfinite(c).all():  # tau_eff * w_i overflowed first (1e300 * 1e10 / 1e10 is 1e300): the other order
            c = np.where(np.isfinite(c), c, tau_eff * (w / a))
    if not np.isfinite(c).all():  # was returned as inf
        i = int(np.argmin(np.isfinite(c)))
        raise ValueError(f"tau_eff: the coefficient c_{i} = tau_eff w_{i} / ||a_{i}||_1 = {tau_eff!r} * "
                         f"{float(w[i])!r} / {float(a[i])!r} exceeds float64")
    return c


class Aggregate(NamedTuple):
    """Result of one server aggregation.

    ``change`` is :math:`x^{(t+1,0)} - x^{(t,0)}` before any server optimizer,
    ``tau_eff`` and ``weights`` the eq.-4 quantities, ``coefficients`` the
    :math:`c_i` multiplying :math:`\\Delta_i`.

    Example
    -------
    What :func:`aggregate` returns for FedAvg on two clients with :math:`p = (1/2, 1/2)` and
    :math:`\\|a\\|_1 = (2, 6)` (:math:`\\tau_{\\text{eff}} = 4`, :math:`w = (1/4, 3/4)`, :math:`c_i = p_i`):

    >>> import numpy as np
    >>> result = aggregate([np.array([-2.0]), np.array([-6.0])], [0.5, 0.5], [2, 6], "fedavg")
    >>> result.change, result.tau_eff, result.weights.tolist(), result.coefficients.tolist()
    (array([-4.]), 4.0, [0.25, 0.75], [0.5, 0.5])
    """

    change: Any
    tau_eff: float
    weights: np.ndarray
    coefficients: np.ndarray


def aggregate(deltas: Sequence[Any], client_weights: Any, a_norms: Any, algorithm: str = "fednova",
              tau_eff: TauEff = None, local_steps: Any = None) -> Aggregate:
    r"""Aggregate client changes :math:`\Delta_i` with the general rule (eq. 4).

    Parameters
    ----------
    deltas : sequence of trees :math:`\Delta_i = x_i^{(t,\tau_i)} - x^{(t,0)}` (numpy or torch), one per
        client in the order of ``client_weights`` (a mapping client -> tree is refused: iterating it gives its keys).
        Their entries are not checked (a NaN passes into the change, as in any weighted sum);
        :meth:`fedlib.algorithms.FederatedAlgorithm.apply` raises ``FloatingPointError`` on a non-finite aggregated change.
    client_weights : (m,) :math:`p_i` (full participation) or sampling weights :math:`\omega_i`.
        Sampling weights need not sum to 1, so no sum is checked here: counts :math:`n_i` given
        for :math:`p_i` scale FedAvg's change by :math:`n = \sum_i n_i` and FedNova's (default
        :math:`\tau_{\text{eff}}`, itself a sum over the weights) by :math:`n^2`; pass
        ``n / n.sum()``.
    a_norms : (m,) :math:`\|a_i\|_1` reported by the local solvers.
    algorithm : ``"fedavg"`` (also FedProx) or ``"fednova"``.
    tau_eff : FedNova's policy (see :func:`fednova_weights`).
    local_steps : (m,) :math:`\tau_i`, needed for ``tau_eff="local_steps"`` (checked whenever given:
        whole numbers >= 1, one per client).

    Example
    -------
    >>> import numpy as np
    >>> deltas = [np.array([-2.0]), np.array([-6.0])]   # tau = 2 and 6 SGD steps of gradient 1, lr 1
    >>> aggregate(deltas, [0.5, 0.5], [2, 6], "fedavg").change
    array([-4.])
    >>> aggregate(deltas, [0.5, 0.5], [2, 6], "fednova").change   # tau_eff * mean(d_i) = 4 * 1
    array([-4.])
    """
    if isinstance(deltas, Mapping):
        raise ValueError(f"deltas must be a sequence of the clients' changes, one tree per client in the order of "
                         f"client_weights, got {a_type(deltas)} (its keys would be aggregated); pass "
                         "[deltas[i] for i in clients]")
    try:
        deltas = list(deltas)
    except TypeError:  # None, a number: "'NoneType' object is not iterable"
        raise ValueError(f"deltas must be a sequence of the clients' changes, one tree per client in the order of "
                         f"client_weights, got {a_type(deltas)}") from None
    tau, w = effective_weights(algorithm, client_weights, a_norms, tau_eff, local_steps)
    if len(deltas) != w.size:
        raise ValueError(f"deltas has {len(deltas)} clients but client_weights has {w.size}")
    c = tau * w / check_finite_array("a_norms", a_norms)  # checked above; torch tensors (bf16, grad) too
    try:
        change = tree_weighted_sum(deltas, c)
    except ValueError as exc:  # structure or leaf-shape mismatch between clients
        raise ValueError(f"deltas: the clients' changes differ in structure or shape ({exc})") from None
    return Aggregate(change, tau, w, c)


def aggregate_stacked(deltas: Any, client_weights: Any, a_norms: Any, algorithm: str = "fednova",
                      tau_eff: TauEff = None, local_steps: Any = None) -> Aggregate:
    r""":func:`aggregate` for a tree whose leaves stack the clients on axis 0 (eq. 4).

    The arguments are those of :func:`aggregate`, except ``deltas``: one tree (numpy or torch) whose every leaf has the
    clients on axis 0, in the order of ``client_weights`` (a leaf whose axis 0 does not match is a ``ValueError``
    naming ``deltas``). ``client_weights`` is the (m,) :math:`p_i` or :math:`\omega_i`, ``a_norms`` the (m,)
    :math:`\|a_i\|_1 > 0`, ``algorithm`` ``"fedavg"`` or ``"fednova"`` (the default), ``tau_eff`` FedNova's policy
    (:func:`fednova_weights`) and ``local_steps`` the (m,) :math:`\tau_i` that ``tau_eff="local_steps"`` needs.

    Example
    -------
    The toy of :func:`normalized_update`: client 1 takes 1 step of gradient :math:`+1`
    (:math:`\Delta_1 = -1`), client 2 takes 2 steps of gradient :math:`-1` (:math:`\Delta_2 = 2`),
    :math:`\eta = 1`, :math:`p = (1/2, 1/2)`. The true mean gradient is 0. FedAvg moves by
    :math:`\tfrac12(-1) + \tfrac12(2) = 1/2`, pulled towards the client with more steps; FedNova
    averages :math:`d = (1, -1)` to 0 and moves by :math:`\tau_{\text{eff}} \cdot 0 = 0`:

    >>> import numpy as np
    >>> stacked = {"x": np.array([[-1.0], [2.0]])}          # clients on axis 0
    >>> aggregate_stacked(stacked, [0.5, 0.5], [1, 2], "fedavg").change
    {'x': array([0.5])}
    >>> aggregate_stacked(stacked, [0.5, 0.5], [1, 2], "fednova").change
    {'x': array([0.])}
    """
    tau, w = effective_weights(algorithm, client_weights, a_norms, tau_eff, local_steps)
    c = tau * w / check_finite_array("a_norms", a_norms)  # checked above; torch tensors (bf16, grad) too
    try:
        change = tree_stacked_weighted_sum(deltas, c)
    except ValueError as exc:
        raise ValueError(f"deltas: {exc}") from None
    return Aggregate(change, tau, w, c)

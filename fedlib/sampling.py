r"""Client sampling that keeps the update rule unbiased (paper §4 and App. G).

A sampler returns a :class:`Participation`: the distinct participating clients and
weights :math:`\omega_i` such that, for any client quantities :math:`z_i`,

.. math::

    \mathbb E\Bigl[\sum_{i \in S} \omega_i z_i\Bigr] = \sum_{i=1}^m p_i z_i .

* **full**: :math:`S = \{1..m\}`, :math:`\omega = p`.
* **with replacement** (scheme i): :math:`q` draws :math:`l_1..l_q \sim p`; simple
  average, so a client drawn :math:`k` times gets :math:`\omega_i = k/q` (it trains once).
* **uniform without replacement** (scheme ii): :math:`q` distinct clients uniformly;
  :math:`\omega_i = p_i m / q` (the weights sum to one only in expectation).

Every draw comes from ``fedlib.rng.generator(seed, "sampling", round)``.
Used by chapters 4, 6, 8 and 9: chapter 4's partial-participation panel (Synthetic, Figure 5;
:func:`expected_server_weights` for where FedNova settles when :math:`\tau_{\text{eff}}` is taken
from the sample), chapter 6's :func:`full_participation` and chapter 8's check of the with-replacement
weights (:func:`sample_clients`); chapter 8's client-sampling part (App. G) uses it through
:mod:`fedlib.experiments.speedup` too (:func:`effective_participants`, :func:`expected_server_weights`);
chapter 9 runs a round with one client alone in it (a sampler returning a :class:`Participation`) to read its change.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._validate import (bool_entry, check_agree, check_callable, check_choice, check_finite_array, check_int, check_positive,
                        check_probability_vector)
from .rng import generator, seed_sequence

__all__ = ["SAMPLING_SCHEMES", "SAMPLE_TAU_EFF", "Participation", "as_participation", "check_sampling", "full_participation", "sample_with_replacement",
           "sample_uniform_without_replacement", "sample_clients", "round_participation", "effective_participants", "WeightMoments",
           "weight_moments", "expected_server_weights"]

#: The participation schemes of :func:`sample_clients` — every client, scheme (i), scheme (ii).
SAMPLING_SCHEMES = ("full", "with-replacement", "uniform")

#: FedNova's :math:`\tau_{\text{eff}}` taken from a round's sample :math:`S`:
#: ``"participants"`` :math:`\sum_{i\in S}\omega_i\|a_i\|_1` (eq. 4 with :math:`\omega`
#: in place of :math:`p`, the library's default under sampling) and ``"selected_p"``
#: :math:`\sum_{i\in S}p_i\|a_i\|_1` (App. H's choice).
SAMPLE_TAU_EFF = ("participants", "selected_p")


class Participation(NamedTuple):
    r"""Distinct client indices and their unbiased weights :math:`\omega_i`
    (:math:`\mathbb E[\sum_{i\in S}\omega_i z_i] = \sum_i p_i z_i`, paper §4 and App. G), ``weights[k]``
    that of ``clients[k]``. fedlib's samplers give the clients sorted ascending; any order is taken and means
    the same participation: :meth:`fedlib.algorithms.FederatedAlgorithm.apply` keeps a hand-made order (its
    diagnostics list the clients in it), :func:`round_participation` sorts a sampler's (the engines' order).

    Example
    -------
    Scheme (ii) with :math:`m = 3` equal clients and :math:`q = 2`: each of the three possible pairs
    has weights :math:`\tfrac13 \cdot 3/2 = \tfrac12`. Averaged over the pairs, every client is in
    2 of 3 and :math:`\mathbb E[\sum_{i\in S}\omega_i z_i] = \tfrac23 \cdot \tfrac12 (z_0 + z_1 + z_2)`,
    the plain mean: for :math:`z = (3, 6, 9)` it is 6.

    >>> import numpy as np
    >>> z = np.array([3.0, 6.0, 9.0])
    >>> pairs = [Participation(np.array(c), np.array([0.5, 0.5])) for c in ([0, 1], [0, 2], [1, 2])]
    >>> float(np.mean([part.weights @ z[part.clients] for part in pairs]))
    6.0
    """

    clients: np.ndarray
    weights: np.ndarray


def as_participation(participation) -> Participation:
    r"""``participation`` (a :class:`Participation`, or any object with its fields, e.g. of plain
    lists) as one of numpy arrays: at least one client, distinct integer indices, one finite weight
    :math:`\omega_i \ge 0` each with a positive sum; ``ValueError`` naming ``participation`` for anything else. What
    :meth:`fedlib.algorithms.FederatedAlgorithm.apply` and
    :func:`fedlib.distributed.distributed_apply` take.

    Example
    -------
    >>> as_participation(Participation([0, 2], [0.5, 1.5]))
    Participation(clients=array([0, 2]), weights=array([0.5, 1.5]))
    >>> as_participation(Participation([2, 2], [0.5, 0.5]))
    Traceback (most recent call last):
    ...
    ValueError: participation: clients must be distinct (a client drawn twice trains once, ...), got [2, 2]
    """
    if not all(hasattr(participation, f) for f in Participation._fields):
        raise ValueError(f"participation must be a fedlib.sampling.Participation (full_participation(p), "
                         f"sample_clients(...)), got {type(participation).__name__}")
    return _as_participation(participation, "participation")


def _as_participation(participation, name: str) -> Participation:
    """:func:`as_participation` of an object with the fields, its messages starting with ``name`` (``"sampling(4)"``
    for what a user's sampler returned in round 4)."""
    raw = participation.clients
    if bool_entry(raw) is not None:  # np.asarray([0, True]) is the integer array [0, 1]: True would be client 1
        raise ValueError(f"{name}: clients must be integer indices, got {raw!r}")
    clients = np.asarray(raw)
    given = participation.weights
    if getattr(given, "requires_grad", False):  # np.asarray raised torch's "Can't call numpy() on Tensor ..."
        raise ValueError(f"{name}: weights must be numbers, got a tensor that requires grad (sampling weights are "
                         "data, not parameters: pass weights.detach())")
    if not isinstance(given, np.ndarray) or given.dtype.kind in "USa":  # numpy read '0.5' as the number 0.5
        text = [v for v in np.asarray(given, dtype=object).reshape(-1).tolist() if isinstance(v, (str, bytes))]
        if text:
            raise ValueError(f"{name}: weights must be numbers, got the text {text[0]!r}")
    weights = np.asarray(given, dtype=float)
    if clients.ndim != 1 or weights.shape != clients.shape:
        raise ValueError(f"{name}: clients and weights must be 1-d with one weight per client, got shapes "
                         f"{clients.shape} and {weights.shape}")
    if clients.size == 0 or clients.dtype.kind not in "iu":  # 1.0 passed as client 1; 0.5 failed as 'updates
        # must come in the order of participation.clients'
        raise ValueError(f"{name} must name at least one client by integer index, got clients {clients.tolist()!r}")
    if np.unique(clients).size != clients.size:  # a client trains once per round; a repeat draw raises its weight
        raise ValueError(f"{name}: clients must be distinct (a client drawn twice trains once, with the summed "
                         f"weight, as sample_with_replacement gives it), got {clients.tolist()}")
    if not np.all(np.isfinite(weights)) or np.any(weights < 0) or weights.sum() <= 0:  # aggregate's message named
        # its own argument, client_weights
        raise ValueError(f"{name}: weights must be finite and >= 0 with a positive sum, got {weights.tolist()}")
    return Participation(clients, weights)


def full_participation(p) -> Participation:
    r"""All clients, :math:`\omega = p` (eq. 4 as written).

    Example
    -------
    >>> full_participation([0.25, 0.75])
    Participation(clients=array([0, 1]), weights=array([0.25, 0.75]))
    """
    p = check_probability_vector("p", p)
    return Participation(np.arange(p.size), p.copy())


def _refuse_q_with_full(q) -> None:
    """The ``ValueError`` for a ``q`` given with full participation, which takes every client (:func:`sample_clients`,
    and the closed forms :func:`effective_participants`, :func:`weight_moments`, :func:`expected_server_weights`)."""
    if q is not None:
        raise ValueError(f"clients_per_round: full participation takes every client, so q = {q} would be ignored; "
                         "give clients_per_round only with sampling 'with-replacement' or 'uniform'")


def _check_q(q, m, *, replace: bool) -> int:
    if q is None:  # the default of clients_per_round: "must be an integer >= 1, got None" read as a wrong value
        scheme = "with-replacement" if replace else "uniform"
        raise ValueError(f"clients_per_round is required with sampling {scheme!r} (the number q of clients drawn each "
                         "round), got None")
    q = check_int("clients_per_round", q, minimum=1)
    if not replace and q > m:
        raise ValueError(f"clients_per_round: cannot sample {q} clients without replacement from {m}")
    return q


def _check_rng(rng) -> None:
    """``rng`` must draw as a :class:`numpy.random.Generator` does (a ``choice`` method): a seed given in its place
    failed inside the draw with "'int' object has no attribute 'choice'", naming no argument."""
    if not callable(getattr(rng, "choice", None)):
        raise ValueError(f"rng must be a numpy random Generator (e.g. fedlib.rng.generator(seed, 'sampling', round), "
                         f"or sample_clients(scheme, p, q, seed, round_index) for a seed), got {type(rng).__name__}")


def sample_with_replacement(p, q: int, rng: np.random.Generator) -> Participation:
    r"""Scheme (i): :math:`q` draws with probabilities :math:`p`, equal weights :math:`1/q` per draw
    (paper §4 and App. G); a client drawn :math:`k` times trains once with :math:`\omega_i = k/q`.

    ``p`` is the (m,) client weights (summing to 1), ``q`` the number of draws (an integer :math:`\ge 1`, may
    exceed :math:`m`), ``rng`` the :class:`numpy.random.Generator` drawn from (:func:`sample_clients` gives
    ``fedlib.rng.generator(seed, "sampling", round)``; a seed in its place is a ``ValueError`` naming ``rng``).

    Example
    -------
    With :math:`p = (0, 1, 0)` every one of the :math:`q = 3` draws is client 1, which takes part once
    with weight :math:`3/3 = 1`; with two equal clients and :math:`q = 4` draws the weights are
    counts over 4 and sum to 1:

    >>> import numpy as np
    >>> sample_with_replacement([0.0, 1.0, 0.0], 3, np.random.default_rng(0))
    Participation(clients=array([1]), weights=array([1.]))
    >>> part = sample_with_replacement([0.5, 0.5], 4, np.random.default_rng(0))
    >>> float(part.weights.sum()), bool(np.all((4 * part.weights) % 1 == 0))
    (1.0, True)
    """
    p = check_probability_vector("p", p)
    q = _check_q(q, p.size, replace=True)
    _check_rng(rng)
    return _draw_with_replacement(p, q, rng)


def _draw_with_replacement(p: np.ndarray, q: int, rng: np.random.Generator) -> Participation:
    """:func:`sample_with_replacement`'s draw, for a checked float64 ``p`` and int ``q``. The drawn clients and
    their counts come from one ``bincount`` over the ``m`` clients: the arrays ``np.unique(draws, return_counts=True)``
    gives, without its sort of the draws (the whole draw took 1.5 times as long with it, for tens of clients)."""
    # p sums to 1 within 1e-9, as numpy's choice needs: check_probability_vector divides weights it accepted only
    # at their own precision (float32, bfloat16) by their sum
    draws = rng.choice(p.size, size=q, replace=True, p=p)
    counts = np.bincount(draws, minlength=p.size)
    clients = np.flatnonzero(counts)
    return Participation(clients, counts[clients] / q)


def sample_uniform_without_replacement(p, q: int, rng: np.random.Generator) -> Participation:
    r"""Scheme (ii): :math:`q` distinct clients uniformly, weights :math:`p_i m/q`.

    Refuses a ``p`` with at least :math:`q` zero entries: a round could then draw only clients
    of weight 0, whose update (:math:`\sum_{i\in S}\omega_i\Delta_i = 0`) has no
    :math:`\tau_{\text{eff}}` or weights to report (drop those clients, or sample with replacement,
    which draws by :math:`p`). The refusal comes in every round, so a run stops at round 0.
    (Paper §4, scheme (ii); App. G analyses scheme (i) only.)

    ``p`` is the (m,) client weights (summing to 1), ``q`` the number of clients, :math:`1 \le q \le m`, ``rng`` the
    :class:`numpy.random.Generator` drawn from (:func:`sample_clients` gives
    ``fedlib.rng.generator(seed, "sampling", round)``; a seed in its place is a ``ValueError`` naming ``rng``).

    Example
    -------
    4 equal clients, :math:`q = 2`: whichever two are drawn, each weighs :math:`\tfrac14 \cdot 4/2 = \tfrac12`;
    with :math:`p = (0.1, 0.2, 0.3, 0.4)` the weights are :math:`2p_i` of the two drawn:

    >>> import numpy as np
    >>> sample_uniform_without_replacement([0.25] * 4, 2, np.random.default_rng(0)).weights
    array([0.5, 0.5])
    >>> p = np.array([0.1, 0.2, 0.3, 0.4])
    >>> part = sample_uniform_without_replacement(p, 2, np.random.default_rng(0))
    >>> bool(np.allclose(part.weights, 2 * p[part.clients]))
    True
    """
    p = check_probability_vector("p", p)
    q = _check_q(q, p.size, replace=False)
    _check_rng(rng)
    zero = int(np.sum(p == 0))
    if zero >= q:
        raise ValueError(f"p: {zero} client(s) have weight 0, so uniform sampling of {q} client(s) per round could draw "
                         "only them (a round without weight); drop them or use sampling 'with-replacement'")
    return _draw_uniform(p, q, rng)


def _draw_uniform(p: np.ndarray, q: int, rng: np.random.Generator) -> Participation:
    """:func:`sample_uniform_without_replacement`'s draw, for a checked float64 ``p`` and int ``q``."""
    clients = np.sort(rng.choice(p.size, size=q, replace=False))
    return Participation(clients, p[clients] * p.size / q)


def sample_clients(scheme: str, p, q: int | None, seed: int, round_index: int) -> Participation:
    r"""Participants of round ``round_index`` under ``scheme`` (seeded per (seed, round)):
    :func:`full_participation`, :func:`sample_with_replacement` (scheme i) or
    :func:`sample_uniform_without_replacement` (scheme ii) of paper §4 (App. G analyses scheme i only).

    ``scheme`` is one of :data:`SAMPLING_SCHEMES`; ``p`` the (m,) client weights :math:`p_i` (summing to 1); ``q`` the
    clients (or draws) per round, ``None`` for ``"full"`` (a ``ValueError`` otherwise); ``seed`` and ``round_index``
    integers :math:`\ge 0` (below :math:`2^{128}` and :math:`2^{32}`, :func:`fedlib.rng.seed_sequence`), checked
    for ``"full"`` too, which draws nothing.

    Example
    -------
    The same (seed, round) always gives the same participants; full participation takes no ``q``:

    >>> a = sample_clients("uniform", [0.25] * 4, 2, seed=0, round_index=3)
    >>> b = sample_clients("uniform", [0.25] * 4, 2, seed=0, round_index=3)
    >>> bool((a.clients == b.clients).all()), a.weights.tolist()
    (True, [0.5, 0.5])
    >>> sample_clients("full", [0.25, 0.75], None, seed=0, round_index=3).weights.tolist()
    [0.25, 0.75]
    """
    check_choice("sampling", scheme, SAMPLING_SCHEMES)
    round_index = check_int("round_index", round_index)
    if scheme == "full":
        _refuse_q_with_full(q)
        if not (type(seed) is int and 0 <= seed < 2 ** 128 and round_index < 2 ** 32):  # plain in-range ints pass
            seed_sequence(seed, "sampling", round_index)  # its ValueError, as the sampled schemes' draw raises it
        return full_participation(p)
    rng = generator(seed, "sampling", round_index)
    if scheme == "with-replacement":
        return sample_with_replacement(p, q, rng)
    return sample_uniform_without_replacement(p, q, rng)


def _sample_clients_again(scheme: str, p: np.ndarray, q: int | None, seed: int, round_index: int) -> Participation:
    """:func:`sample_clients` for a later round of a run whose round 0 went through it: ``scheme``, ``p`` (the
    float64 array its check returned), ``q`` (``int``) and ``seed`` do not change from round to round, so
    their checks passed then and are not repeated; the same draws (the shared ``_draw_*`` helpers)."""
    if scheme == "full":
        return Participation(np.arange(p.size), p.copy())
    rng = generator(seed, "sampling", round_index)
    if scheme == "with-replacement":
        return _draw_with_replacement(p, q, rng)
    return _draw_uniform(p, q, rng)


def check_sampling(sampling, clients_per_round: int | None = None, where: str = "") -> None:
    """``sampling`` is a scheme name of :data:`SAMPLING_SCHEMES` or your own sampler, a callable of one argument,
    the round (:func:`round_participation`; another signature is a ``ValueError``), which chooses the participants
    itself: ``clients_per_round`` must then be ``None``. ``where`` prefixes the argument names in the
    ``ValueError`` (e.g. ``"runs[0]."``).

    Example
    -------
    >>> check_sampling("uniform", 2)
    >>> check_sampling("uniformly")
    Traceback (most recent call last):
    ...
    ValueError: sampling must be one of ['full', 'uniform', 'with-replacement'], got 'uniformly'
    >>> check_sampling(lambda t: None, 2, where="runs[0].")
    Traceback (most recent call last):
    ...
    ValueError: runs[0].clients_per_round: a sampler callable chooses the participants itself, ...
    """
    if not callable(sampling):
        check_choice(f"{where}sampling", sampling, SAMPLING_SCHEMES)
        return
    # the engines call it with the round alone: else Python's "<lambda>() missing 1 required positional argument"
    check_callable(f"{where}sampling", sampling, "round -> Participation (your own sampler)", nargs=1)
    if clients_per_round is not None:
        raise ValueError(f"{where}clients_per_round: a sampler callable chooses the participants itself, so "
                         f"q = {clients_per_round} would be ignored; leave clients_per_round None")


def round_participation(sampling, p, q: int | None, seed: int, round_index: int) -> Participation:
    r"""Participants of round ``round_index`` as :func:`fedlib.engines.reference.run_sequential`,
    :func:`fedlib.engines.batched.run_batched`, :func:`fedlib.engines.quadratic.run_replicas` and the
    stacked engines (:class:`fedlib.engines.stacked.RunSpec`) draw them: ``sampling`` is a scheme name of
    :func:`sample_clients` (with ``q`` = ``clients_per_round``), or your own sampler, a callable
    ``round_index -> Participation`` (draw from ``fedlib.rng.generator(seed, "sampling", round_index)``
    so a run is reproducible; ``q`` must then be ``None``).

    A sampler's :class:`Participation` must hold distinct client indices in ``0..m-1`` and
    finite weights :math:`\omega_i \ge 0` with a positive sum, chosen so that
    :math:`\mathbb E[\sum_{i\in S}\omega_i z_i] = \sum_i p_i z_i` (e.g. Horvitz–Thompson
    :math:`\omega_i = p_i/\pi_i` with inclusion probabilities :math:`\pi_i`); ``ValueError`` otherwise. Its
    clients may come in any order: they are returned sorted ascending, each with its weight, as the built-in
    schemes give them (the engines' order: e.g. :func:`fedlib.engines.quadratic.gradient_noise` gives the
    participants its rows in increasing client order, so ``[2, 0]`` and ``[0, 2]`` are one run).

    ``p`` is the (m,) client weights :math:`p_i` (summing to 1); a sampler's clients must lie in ``0..m-1``. ``seed``
    is read by the named schemes only (a sampler of your own keeps its own).

    Example
    -------
    A sampler of one client in turn among 3 equal ones: it is in the sample a third of the time,
    so :math:`\omega = p_i/\pi_i = (1/3)/(1/3) = 1`. Unsorted clients come back sorted, each with its weight:

    >>> round_participation(lambda t: Participation([t % 3], [1.0]), [1/3] * 3, None, seed=0, round_index=4)
    Participation(clients=array([1]), weights=array([1.]))
    >>> round_participation(lambda t: Participation([2, 0], [1.0, 2.0]), [1/3] * 3, None, seed=0, round_index=4)
    Participation(clients=array([0, 2]), weights=array([2., 1.]))
    """
    if not callable(sampling):
        return sample_clients(sampling, p, q, seed, round_index)
    check_sampling(sampling, q)
    p = check_probability_vector("p", p)
    got = sampling(round_index)
    name = f"sampling({round_index})"
    if not all(hasattr(got, f) for f in Participation._fields):  # 'participation must be ...' named no sampler
        hint = " (a missing return statement?)" if got is None else ""
        if isinstance(got, tuple) and len(got) == 2:
            hint = " (a pair: return Participation(clients, weights))"
        raise ValueError(f"{name}: a sampler must return a fedlib.sampling.Participation(clients, weights), got "
                         f"{type(got).__name__}{hint}")
    part = _as_participation(got, name)
    clients, weights = part.clients, part.weights
    if np.any(clients < 0) or np.any(clients >= p.size):
        raise ValueError(f"{name}: clients must lie in 0..{p.size - 1} (p has {p.size} clients), got {clients.tolist()}")
    if np.any(np.diff(clients) < 0):  # the engines' order: run_replicas' noise rows are the participants, ascending
        order = np.argsort(clients, kind="stable")
        return Participation(clients[order], weights[order])
    return part


def effective_participants(scheme: str, p, q: int | None = None) -> float:
    r"""How many equally weighted, independent client updates the scheme's average is worth:

    .. math::

        q_{\text{eff}} = \frac{1}{\mathbb E\bigl[\sum_{i\in S}\omega_i^2\bigr]},

    so that independent zero-mean client noise :math:`\xi_i` of variance :math:`\sigma^2`
    reaches the server as :math:`\operatorname{Var}\sum_{i\in S}\omega_i\xi_i = \sigma^2/q_{\text{eff}}`.
    Closed forms (:math:`\|p\|_2^2 = \sum_i p_i^2`):

    * full: :math:`1/\|p\|_2^2` (Kish's effective sample size; :math:`m` for equal weights);
    * with replacement: a client drawn :math:`k_i` times trains once with weight
      :math:`k_i/q`, and :math:`\mathbb E\sum_i k_i^2 = q + q(q-1)\|p\|_2^2`, so
      :math:`q_{\text{eff}} = q / (1 + (q-1)\|p\|_2^2)` — below :math:`q`, and bounded by
      :math:`1/\|p\|_2^2` however large :math:`q` grows;
    * uniform without replacement: :math:`\mathbb E\sum_{i\in S}(p_i m/q)^2 = (m/q)\|p\|_2^2`,
      so :math:`q_{\text{eff}} = q/(m\|p\|_2^2)` (:math:`q` for equal weights).

    App. G states FedNova's rate as :math:`\mathcal O(1/\sqrt{q\tilde\tau T})`; its proof
    indexes mini-batches by client, so a client drawn twice contributes one local run, and
    :math:`q` is only the number of independent updates while :math:`q \ll 1/\|p\|_2^2`
    (chapter 8 measures where the speedup stops).

    ``scheme``, ``p`` and ``q`` are those of :func:`weight_moments` (``q`` ``None`` for ``"full"``).

    Example
    -------
    >>> effective_participants("with-replacement", [0.25] * 4, 4)   # 4 / (1 + 3/4)
    2.2857142857142856
    """
    check_choice("sampling", scheme, SAMPLING_SCHEMES)
    p = check_probability_vector("p", p)
    p2 = float(p @ p)
    if scheme == "full":
        _refuse_q_with_full(q)
        return 1.0 / p2
    q = _check_q(q, p.size, replace=scheme == "with-replacement")
    if scheme == "with-replacement":
        return q / (1.0 + (q - 1) * p2)
    return q / (p.size * p2)


class WeightMoments(NamedTuple):
    r"""Second moments of a scheme's weights over its random sample :math:`S`
    (:math:`\omega_i = 0` for :math:`i \notin S`): ``pair[i, j]`` :math:`= \mathbb E[\omega_i\omega_j]`
    and ``presence[i, j]`` :math:`= \mathbb E[\mathbb 1\{i\in S\}\,\omega_j]` (:func:`weight_moments`).

    Example
    -------
    Full participation with :math:`p = (1/4, 3/4)`: :math:`\omega = p` always, so ``pair`` is
    :math:`pp^\top` (:math:`1/16, 3/16, 9/16`) and every row of ``presence`` is :math:`p`:

    >>> moments = weight_moments("full", [0.25, 0.75])
    >>> moments.pair.tolist(), moments.presence.tolist()
    ([[0.0625, 0.1875], [0.1875, 0.5625]], [[0.25, 0.75], [0.25, 0.75]])
    """

    pair: np.ndarray
    presence: np.ndarray


def weight_moments(scheme: str, p, q: int | None = None) -> WeightMoments:
    r"""Exact :math:`\mathbb E[\omega_i\omega_j]` and :math:`\mathbb E[\mathbb 1\{i\in S\}\omega_j]`.

    * full: :math:`\omega = p` always: :math:`pp^\top` and :math:`p_j`.
    * with replacement (:math:`k_i` of the :math:`q` draws on client :math:`i`,
      :math:`\omega_i = k_i/q`, multinomial counts):
      :math:`\mathbb E[\omega_i\omega_j] = (1-\frac1q)p_ip_j + \delta_{ij}\frac{p_i}{q}`; for
      :math:`i\ne j`, :math:`\mathbb E[\mathbb 1\{i\in S\}\omega_j] = p_j - P(i\notin S)\,
      \mathbb E[\omega_j \mid i\notin S] = p_j\bigl(1-(1-p_i)^{q-1}\bigr)` (given :math:`i` is
      never drawn, the draws follow :math:`p_j/(1-p_i)`), and :math:`p_j` on the diagonal.
    * uniform without replacement (:math:`\omega_i = p_i m/q`, :math:`P(i\in S) = q/m`,
      :math:`P(i,j\in S) = \frac{q(q-1)}{m(m-1)}`): :math:`\mathbb E[\omega_i\omega_j] =
      p_ip_j\frac{m(q-1)}{q(m-1)}` for :math:`i\ne j` and :math:`p_i^2\frac mq` on the diagonal;
      :math:`\mathbb E[\mathbb 1\{i\in S\}\omega_j] = p_j\frac{q-1}{m-1}` for :math:`i\ne j`.

    Tested against every outcome of the samplers' own code (``tests/test_sampling.py``).

    ``scheme`` is one of :data:`SAMPLING_SCHEMES`, ``p`` the (m,) client weights (summing to 1) and ``q`` the clients
    (or draws) per round: ``None`` for ``"full"`` (a ``ValueError`` otherwise, as :func:`sample_clients` refuses it), an
    integer :math:`\ge 1` otherwise (:math:`\le m` without replacement).

    Example
    -------
    >>> weight_moments("with-replacement", [0.5, 0.5], 2).pair.tolist()   # (1 - 1/2)/4 + 1/4 on the diagonal
    [[0.375, 0.125], [0.125, 0.375]]
    """
    check_choice("sampling", scheme, SAMPLING_SCHEMES)
    p = check_probability_vector("p", p)
    m = p.size
    if scheme == "full":
        _refuse_q_with_full(q)
        return WeightMoments(np.outer(p, p), np.broadcast_to(p, (m, m)).copy())
    q = _check_q(q, m, replace=scheme == "with-replacement")
    if scheme == "with-replacement":
        pair = (1.0 - 1.0 / q) * np.outer(p, p) + np.diag(p) / q
        # 1 - (1 - p_i)^(q-1) by expm1/log1p: the plain difference cancels for small p_i (0 for p_i < 1.1e-16,
        # 1e-4 relative off at p_i = 1e-12); p_i = 1 gives log1p(-1) = -inf and 1 for q >= 2 (q = 1: 0)
        with np.errstate(divide="ignore"):
            drawn = -np.expm1((q - 1) * np.log1p(-p)) if q > 1 else np.zeros(m)
        presence = p[None, :] * drawn[:, None]
    else:
        both = 0.0 if m == 1 else (q - 1) / (m - 1)  # P(j in S | i in S), i != j
        pair = np.outer(p, p) * (m / q) * both
        np.fill_diagonal(pair, p * p * m / q)
        presence = np.broadcast_to(p * both, (m, m)).copy()
    np.fill_diagonal(presence, p)
    return WeightMoments(pair, presence)


def expected_server_weights(scheme: str, p, a_norms, q: int | None = None, tau_eff="participants") -> np.ndarray:
    r"""The weights :math:`c_j` of FedNova's expected server step under client sampling,

    .. math::

        \mathbb E\Bigl[\tau_{\text{eff}}(S)\sum_{j\in S}\omega_j d_j\Bigr] = \sum_{j=1}^m c_j d_j ,

    for client directions :math:`d_j` and norms :math:`\|a_j\|_1` that do not depend on the
    sample (full gradients at a given point; or random local work drawn independently of
    the sample, with ``a_norms`` its means :math:`\mathbb E\|a_j\|_1`). By ``tau_eff``:

    * a number :math:`\tau` (fixed): :math:`c_j = \tau p_j` — the expected step is along
      :math:`\sum_j p_j d_j`, FedNova's consistent direction;
    * ``"participants"``, :math:`\tau_{\text{eff}} = \sum_{i\in S}\omega_i\|a_i\|_1`:
      :math:`c_j = \sum_i \|a_i\|_1\,\mathbb E[\omega_i\omega_j]`; with replacement
      :math:`(1-\frac1q)\,p_j\sum_ip_i\|a_i\|_1 + \frac1q\,p_j\|a_j\|_1` — a FedAvg-like term
      of weight :math:`1/q` (with :math:`q = 1`, FedAvg in expectation);
    * ``"selected_p"`` (App. H), :math:`\tau_{\text{eff}} = \sum_{i\in S}p_i\|a_i\|_1`:
      :math:`c_j = \sum_i p_i\|a_i\|_1\,\mathbb E[\mathbb 1\{i\in S\}\omega_j]`; with
      replacement :math:`p_j\bigl[\sum_i p_i\|a_i\|_1\pi_i + p_j\|a_j\|_1(1-p_j)^{q-1}\bigr]`,
      :math:`\pi_i = 1-(1-p_i)^{q-1}`: a smaller step and again more weight on clients
      with large :math:`\|a_j\|_1`.

    With full gradients and :math:`\eta \to 0`, :math:`d_j \to \nabla F_j(x)`, so the
    averaged iterate settles at the stationary point of :math:`\sum_j c_j F_j` (for
    quadratics :func:`fedlib.theory.quadratic_global_optimum` with weights :math:`c/\sum c`)
    and the objective inconsistency is :math:`\chi^2_{p\|c/\sum c}`; chapter 8 measures both.
    With full participation every choice gives :math:`c = p\sum_ip_i\|a_i\|_1` (or
    :math:`\tau p`).

    ``scheme``, ``p`` and ``q`` are those of :func:`weight_moments`; ``a_norms`` the (m,) :math:`\|a_j\|_1` (or their
    means), each > 0; ``tau_eff`` a number > 0 or one of :data:`SAMPLE_TAU_EFF` (default ``"participants"``).

    Example
    -------
    >>> c = expected_server_weights("with-replacement", [0.5, 0.5], [1.0, 3.0], 2)
    >>> (c / c.sum()).tolist()   # c_j = 0.5 + 0.25 ||a_j||_1: more than p_j = 1/2 for ||a||_1 = 3
    [0.375, 0.625]
    """
    moments = weight_moments(scheme, p, q)
    p = check_probability_vector("p", p)  # as weight_moments checked it: np.asarray failed on a bfloat16 tensor or one with grad
    a = check_finite_array("a_norms", a_norms)
    if a.ndim != 1:
        raise ValueError(f"a_norms must have shape {p.shape}, got {a.shape}")
    check_agree("a_norms", a.size, "p", p.size)  # either may be the wrong one
    if np.any(a <= 0):
        raise ValueError("a_norms must be > 0")
    if isinstance(tau_eff, str):
        check_choice("tau_eff", tau_eff, SAMPLE_TAU_EFF)
        if tau_eff == "participants":
            return a @ moments.pair
        return (p * a) @ moments.presence
    return check_positive("tau_eff", tau_eff) * p

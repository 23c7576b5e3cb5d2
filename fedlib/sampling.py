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
Used by the Synthetic (Figure 5) chapter's partial-participation panel and chapter 8's
client-sampling part (App. G; :func:`effective_participants`).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._validate import check_choice, check_int, check_probability_vector
from .rng import generator

__all__ = ["SAMPLING_SCHEMES", "Participation", "full_participation", "sample_with_replacement",
           "sample_uniform_without_replacement", "sample_clients", "effective_participants"]

SAMPLING_SCHEMES = ("full", "with-replacement", "uniform")


class Participation(NamedTuple):
    """Sorted distinct client indices and their unbiased weights :math:`\\omega_i`."""

    clients: np.ndarray
    weights: np.ndarray


def full_participation(p) -> Participation:
    """All clients, :math:`\\omega = p`."""
    p = check_probability_vector("p", p)
    return Participation(np.arange(p.size), p.copy())


def _check_q(q, m, *, replace: bool) -> int:
    q = check_int("clients_per_round", q, minimum=1)
    if not replace and q > m:
        raise ValueError(f"clients_per_round: cannot sample {q} clients without replacement from {m}")
    return q


def sample_with_replacement(p, q: int, rng: np.random.Generator) -> Participation:
    r"""Scheme (i): :math:`q` draws with probabilities :math:`p`, equal weights :math:`1/q` per draw."""
    p = check_probability_vector("p", p)
    q = _check_q(q, p.size, replace=True)
    draws = rng.choice(p.size, size=q, replace=True, p=p)
    clients, counts = np.unique(draws, return_counts=True)
    return Participation(clients, counts / q)


def sample_uniform_without_replacement(p, q: int, rng: np.random.Generator) -> Participation:
    r"""Scheme (ii): :math:`q` distinct clients uniformly, weights :math:`p_i m/q`."""
    p = check_probability_vector("p", p)
    q = _check_q(q, p.size, replace=False)
    clients = np.sort(rng.choice(p.size, size=q, replace=False))
    return Participation(clients, p[clients] * p.size / q)


def sample_clients(scheme: str, p, q: int | None, seed: int, round_index: int) -> Participation:
    """Participants of round ``round_index`` under ``scheme`` (seeded per (seed, round))."""
    check_choice("sampling", scheme, SAMPLING_SCHEMES)
    round_index = check_int("round_index", round_index)
    if scheme == "full":
        return full_participation(p)
    rng = generator(seed, "sampling", round_index)
    if scheme == "with-replacement":
        return sample_with_replacement(p, q, rng)
    return sample_uniform_without_replacement(p, q, rng)


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

    Example
    -------
    >>> effective_participants("with-replacement", [0.25] * 4, 4)   # 4 / (1 + 3/4)
    2.2857142857142856
    """
    check_choice("sampling", scheme, SAMPLING_SCHEMES)
    p = check_probability_vector("p", p)
    p2 = float(p @ p)
    if scheme == "full":
        return 1.0 / p2
    q = _check_q(q, p.size, replace=scheme == "with-replacement")
    if scheme == "with-replacement":
        return q / (1.0 + (q - 1) * p2)
    return q / (p.size * p2)

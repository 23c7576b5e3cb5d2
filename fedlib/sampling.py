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
Used by the Synthetic (Figure 5) chapter's partial-participation panel.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._validate import check_choice, check_int, check_probability_vector
from .rng import generator

__all__ = ["SAMPLING_SCHEMES", "Participation", "full_participation", "sample_with_replacement",
           "sample_uniform_without_replacement", "sample_clients"]

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

"""Experiment helpers shared by the book's chapters (one module per chapter family).

The package itself (:func:`profile_sizes`, :func:`run_seeds`) is used by
chapters 2, 4, 5, 6, 7, 8, 9 and 10.

- :mod:`fedlib.experiments.quadratic` — quadratic clients: simulated limits vs closed
  forms, Lemma 1, Figure 2, the two-client example of App. D.1.
- :mod:`fedlib.experiments.speedup` — Theorem 3 under arbitrary local work, linear
  speedup (chapter 8).
- :mod:`fedlib.experiments.bounds` — Theorems 1 and 3 with App. C's constants against
  measured runs on noisy quadratics (chapters 7 and 8).
- the others: :mod:`~fedlib.experiments.synthetic`, :mod:`~fedlib.experiments.cifar10`,
  :mod:`~fedlib.experiments.custom`, :mod:`~fedlib.experiments.surrogate`,
  :mod:`~fedlib.experiments.stragglers`, :mod:`~fedlib.experiments.acceleration`.
"""

from typing import Any, Mapping

from .._validate import check_choice, check_int

__all__ = ["profile_sizes", "run_seeds"]


def profile_sizes(profile: Any, table: Mapping[str, Mapping[str, Any]], **given: Any) -> dict:
    r"""``table[profile]`` (a chapter's sizes, e.g. ``{"ci": {"rounds": 20}, "full": {"rounds": 100}}``)
    with every value of ``given`` that is not ``None`` in its place.

    A chapter's parameter cell takes ``None`` for "the profile's value"; any other value is kept as
    given — ``0`` and ``()`` included, for the experiment function to refuse by name — where the
    chapters' ``given or default`` silently ran the profile's value instead. Raises ``ValueError`` for
    a profile that ``table`` lacks (``KeyError: 'foo'`` before) and ``TypeError`` for a name of
    ``given`` that is not one of the profile's sizes, or a ``table`` that is no mapping of mappings.

    >>> profile_sizes("ci", {"ci": {"rounds": 20, "seeds": 3}, "full": {"rounds": 100, "seeds": 5}}, rounds=0)
    {'rounds': 0, 'seeds': 3}
    """
    if not isinstance(table, Mapping) or not all(isinstance(sizes, Mapping) for sizes in table.values()):
        raise TypeError(f"profile_sizes: table must map each profile to its sizes (a dict of dicts), got "
                        f"{type(table).__name__}" + (f" of {sorted({type(v).__name__ for v in table.values()})}"
                                                     if isinstance(table, Mapping) else ""))
    if not isinstance(profile, str):
        raise TypeError(f"profile must be a string, one of {sorted(table)}; got {type(profile).__name__}")
    check_choice("profile", profile, tuple(table))
    sizes = dict(table[profile])
    unknown = sorted(set(given) - set(sizes))
    if unknown:
        raise TypeError(f"profile_sizes: {unknown} are not sizes of profile {profile!r} (it has {sorted(sizes)})")
    sizes.update({name: value for name, value in given.items() if value is not None})
    return sizes


def run_seeds(seed: Any, count: Any) -> tuple:
    r"""The ``count`` run seeds of a chapter executed with ``seed``: :math:`(ns, ns + 1, \dots, ns + n - 1)`
    for :math:`n` = ``count``, :math:`s` = ``seed``.

    The blocks :math:`\{ns, \dots, ns + n - 1\}` of different chapter seeds are disjoint (for the same
    :math:`n`), so a chapter re-run "with another seed" repeats none of its runs; seed 0 keeps the runs
    :math:`0, \dots, n - 1`. The former ``(seed, seed + 1, seed + 2)`` shared two of its three runs with
    the neighbouring chapter seed (seeds 0 and 1: runs 1 and 2 in both). Disjointness needs the same
    ``count``: seed 1 with 3 runs, ``(3, 4, 5)``, meets seed 0 with 4 runs, ``(0, 1, 2, 3)``.

    >>> run_seeds(0, 3), run_seeds(1, 3), run_seeds(2, 3)
    ((0, 1, 2), (3, 4, 5), (6, 7, 8))
    """
    seed = check_int("seed", seed, minimum=0)
    count = check_int("count", count, minimum=1)
    return tuple(range(count * seed, count * seed + count))

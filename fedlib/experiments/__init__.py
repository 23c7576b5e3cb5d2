"""Experiment helpers shared by the book's chapters (one module per chapter family).

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

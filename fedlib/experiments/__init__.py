"""Experiment helpers shared by the book's chapters (one module per chapter family).

- :mod:`fedlib.experiments.quadratic` — quadratic clients: simulated limits vs closed
  forms, Lemma 1, Figure 2, the two-client example of App. D.1.
- :mod:`fedlib.experiments.speedup` — Theorem 3 under arbitrary local work, linear
  speedup (chapter 8).
"""

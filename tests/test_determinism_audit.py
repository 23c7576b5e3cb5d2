"""Determinism and seeding audit: every random draw comes from a stream of the user's seed, and
streams meant to be independent (per run, round, client, purpose) are different streams."""
from __future__ import annotations

import numpy as np

from fedlib import anatomy


def test_softmax_clients_of_one_seed_draw_their_own_minibatches():
    """Two clients of the same size and seed (chapter 1 traces several clients with one seed) drew the
    same sample positions at every local step: the batch stream was (seed, "batches", step), with no
    client in it. Client i's batches now come from (seed, "batches", client, step)."""
    rng = np.random.default_rng(0)
    n, d, C, B = 40, 3, 4, 5
    xs = [rng.standard_normal((n, d)) for _ in range(2)]
    y = rng.integers(0, C, n)
    w = rng.standard_normal((d + 1) * C)
    c0 = anatomy.SoftmaxRegressionClient(xs[0], y, C, B, 7, client=0)
    c1 = anatomy.SoftmaxRegressionClient(xs[0], y, C, B, 7, client=1)   # the same data: only the stream differs
    same = [np.array_equal(c0.grad(w, k), c1.grad(w, k)) for k in range(6)]
    assert not any(same)
    # same (seed, client): the same batches; another seed: others
    assert np.array_equal(c0.grad(w, 3), anatomy.SoftmaxRegressionClient(xs[0], y, C, B, 7, client=0).grad(w, 3))
    assert not np.array_equal(c0.grad(w, 3), anatomy.SoftmaxRegressionClient(xs[0], y, C, B, 8, client=0).grad(w, 3))
    # the initial point is the global model, shared by the clients of a seed
    assert np.array_equal(c0.init_params(), c1.init_params())

"""Seeded streams: one per (seed, purpose, keys); no collisions of the seed+client+round
kind (REFERENCE §5) and no use of numpy's or torch's global RNG."""
from __future__ import annotations

import numpy as np
import torch

from fedlib import rng
from fedlib.problems import random_quadratic
from fedlib.sampling import sample_clients
from fedlib.schedules import RandomEpochs, RandomSteps, WallClock


def _draw(g, n=4):
    return g.integers(0, 2**62, size=n).tolist()


def test_neighbouring_keys_differ():
    """(round t, client c) vs (round t-1, client c+1): a seed+client+round scheme collides here."""
    for t in range(1, 6):
        for c in range(5):
            assert _draw(rng.generator(0, "local_steps", t, c)) != _draw(rng.generator(0, "local_steps", t - 1, c + 1))
            if t != c:  # keys are ordered: (round t, client c) is not (round c, client t)
                assert _draw(rng.generator(0, "local_steps", t, c)) != _draw(rng.generator(0, "local_steps", c, t))
    # and seed s, round t vs seed s+1, round t-1
    assert _draw(rng.generator(1, "sampling", 3)) != _draw(rng.generator(2, "sampling", 2))


def test_same_key_identical_other_keys_differ():
    assert _draw(rng.generator(5, "batches", 2, 7)) == _draw(rng.generator(5, "batches", 2, 7))
    draws = {tuple(_draw(rng.generator(s, "batches", 2, 7))) for s in range(10)}
    assert len(draws) == 10                                   # different seeds differ
    assert _draw(rng.generator(5, "batches", 2, 7)) != _draw(rng.generator(5, "sampling", 2, 7))  # purposes
    assert _draw(rng.generator(5, "batches", 2)) != _draw(rng.generator(5, "batches", 2, 0))      # key length
    ss = rng.seed_sequence(5, "batches", 2, 7)
    assert ss.entropy == 5 and ss.spawn_key[1:] == (2, 7)


def test_torch_generator_seeded():
    a = torch.rand(5, generator=rng.torch_generator(3, "init", 1))
    b = torch.rand(5, generator=rng.torch_generator(3, "init", 1))
    c = torch.rand(5, generator=rng.torch_generator(3, "init", 2))
    d = torch.rand(5, generator=rng.torch_generator(4, "init", 1))
    assert torch.equal(a, b) and not torch.equal(a, c) and not torch.equal(a, d)


def test_no_global_rng_use():
    np_state = np.random.get_state()
    torch_state = torch.get_rng_state()
    np.random.seed(12345)
    before = np.random.get_state()
    rng.generator(0, "data", 1).standard_normal(10)
    rng.torch_generator(0, "init")
    for t in range(3):
        sample_clients("with-replacement", np.full(5, 0.2), 3, 0, t)
        sample_clients("uniform", np.full(5, 0.2), 3, 0, t)
        RandomEpochs([10, 20], 4, 2, 5, seed=1).local_steps(t)
        RandomSteps(3, 1, 4).local_steps(t)
        WallClock([1.0, 2.0], 3.0, jitter=0.5, straggler_prob=0.5).local_steps(t)
    random_quadratic(3, 4, seed=2)
    after = np.random.get_state()
    assert before[0] == after[0] and np.array_equal(before[1], after[1]) and before[2:] == after[2:]
    assert torch.equal(torch.get_rng_state(), torch_state)
    np.random.set_state(np_state)


def test_global_seed_does_not_change_fedlib_draws():
    np.random.seed(0)
    a = sample_clients("uniform", np.full(8, 0.125), 3, 9, 4).clients
    np.random.seed(1)
    b = sample_clients("uniform", np.full(8, 0.125), 3, 9, 4).clients
    np.testing.assert_array_equal(a, b)

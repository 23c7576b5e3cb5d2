"""Seeded streams: one per (seed, purpose, keys); no collisions of the seed+client+round
kind (REFERENCE §5) and no use of numpy's or torch's global RNG; keys and seeds that would alias are
refused; the anatomy's clients, chapter 6's data and initial model and scripts/count_outside_accuracy.py draw
from streams of their own."""
from __future__ import annotations

import numpy as np
import torch

from fedlib import anatomy, rng
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


def _chapter6_data_cell() -> str:
    import json
    from pathlib import Path

    cells = json.loads((Path(__file__).resolve().parents[1] / "book" / "06_your_own_model.ipynb").read_text())["cells"]
    (src,) = ["".join(c["source"]) for c in cells if c["cell_type"] == "code" and "teacher = torch.randn" in "".join(c["source"])]
    return src.split("runs = train_clients(")[0]   # the data and the initial model, not the training


def test_chapter6_data_and_initial_model_come_from_different_streams(monkeypatch):
    """Chapter 6 drew its data from torch.Generator().manual_seed(seed) and seeded nn.Linear's init with
    torch.manual_seed(seed): the same Mersenne-Twister stream, so the first layer's initial weights were
    the very uniforms behind the teacher's normals. The data now come from torch_generator(seed, "data"),
    the init from stream (seed, "init")."""
    import torch

    from fedlib.rng import torch_generator

    seen = []
    real = torch.manual_seed
    monkeypatch.setattr(torch, "manual_seed", lambda s: (seen.append(int(s)), real(s))[1])
    ns = {"seed": 3, "torch": torch}
    exec(compile(_chapter6_data_cell(), "chapter6", "exec"), ns)
    assert len(seen) == 1
    data_seed, init_seed = ns["g"].initial_seed(), seen[0]
    assert data_seed != init_seed
    assert data_seed == torch_generator(3, "data").initial_seed()
    assert init_seed == torch_generator(3, "init").initial_seed()
    # the model's first weights are not the uniforms of the data stream
    w = ns["model"][0].weight.detach().flatten()[:16]
    bound = 1 / 20 ** 0.5
    u = torch.rand(16, generator=torch.Generator().manual_seed(data_seed), dtype=w.dtype)
    assert not torch.allclose(w, bound * (2 * u - 1), atol=1e-6)


def test_streams_do_not_alias_through_multi_word_keys_or_seeds():
    """numpy's SeedSequence turns an int >= 2**32 into several 32-bit words and pads a seed only up to
    4 words, so (key 2**32) was the stream of keys (0, 1) and a seed of 2**128 or more could run into
    the purpose and key words: generator(0, p, 2**32) == generator(0, p, 0, 1), and
    instance_seed(5, 2**32) == the draw of stream (5, "instances", 0, 1). Such keys and seeds are
    now refused, so (seed, purpose, keys) -> stream is one-to-one (purposes apart)."""
    import pytest

    from fedlib.experiments.quadratic import instance_seed
    from fedlib.rng import generator, seed_sequence, torch_generator

    for bad in (lambda: generator(0, "local_steps", 2 ** 32), lambda: seed_sequence(0, "batches", 1, 2 ** 40),
                lambda: torch_generator(0, "augment", 2 ** 32, 0), lambda: instance_seed(5, 2 ** 32)):
        with pytest.raises(ValueError, match="key"):
            bad()
    with pytest.raises(ValueError, match="seed"):
        generator(2 ** 128, "sampling", 3)
    # the largest allowed values still work, and give their own streams
    a = generator(2 ** 128 - 1, "local_steps", 2 ** 32 - 1).integers(1 << 62)
    b = generator(2 ** 128 - 1, "local_steps", 0, 1).integers(1 << 62)
    assert a != b
    assert generator(0, "local_steps", 3, 5).integers(1 << 62) == generator(0, "local_steps", 3, 5).integers(1 << 62)


def test_softmax_client_batches_are_not_an_engine_batch_stream():
    """With keys (client, step) under purpose "batches", anatomy client c's step k would have drawn from
    the engines' stream of round c, client k (seed, "batches", round, client); the anatomy now has its
    own purpose, "anatomy_batches"."""
    from fedlib.rng import generator

    rng = np.random.default_rng(1)
    n, C, B = 30, 3, 4
    x, y = rng.standard_normal((n, 2)), rng.integers(0, C, n)
    client = anatomy.SoftmaxRegressionClient(x, y, C, B, 5, client=2)
    w = rng.standard_normal(3 * C)
    k = 4
    mine = generator(5, "anatomy_batches", 2, k).choice(n, size=B, replace=False)
    engines = generator(5, "batches", 2, k).choice(n, size=B, replace=False)
    assert not np.array_equal(np.sort(mine), np.sort(engines))
    np.testing.assert_array_equal(client.grad(w, k), client.full_grad(w, mine))


def test_count_outside_accuracy_seeds_give_distinct_quadratics():
    """scripts/count_outside_accuracy.py drew each seed's quadratic seed from 0..99, so the 200 seeds behind
    fedlib.theory's documented miscount rate held only 83 distinct quadratics (seeds 0 and 1, say, could
    share H and e). The quadratic's seed is now drawn from the full 63-bit range."""
    import runpy
    from pathlib import Path

    script = runpy.run_path(str(Path(__file__).resolve().parents[1] / "scripts" / "count_outside_accuracy.py"))
    cases = [script["draw_case"](s) for s in range(200)]
    assert len({q.H.tobytes() for q, _, _ in cases}) == 200
    q, steps, lr = script["draw_case"](7)
    q2, steps2, lr2 = script["draw_case"](7)
    assert np.array_equal(q.H, q2.H) and np.array_equal(steps, steps2) and lr == lr2


def test_purposes_of_one_crc32_share_streams_and_fedlib_s_own_have_distinct_ones():
    """A purpose enters a stream as its CRC-32 (rng._purpose_key), so the comment above _SEED_LIMIT's claim that every
    (seed, purpose, keys) has its own stream was false for two strings of one CRC-32: these two draw the same
    numbers. fedlib's purposes (and scripts/count_outside_accuracy.py's) must not collide so."""
    import zlib

    assert zlib.crc32(b"p_gnyijstj") == zlib.crc32(b"p_etislvlf")
    assert _draw(rng.generator(0, "p_gnyijstj", 1)) == _draw(rng.generator(0, "p_etislvlf", 1))
    purposes = rng.PURPOSES + ("count_outside_cases",)
    assert len({zlib.crc32(p.encode()) for p in purposes}) == len(purposes)

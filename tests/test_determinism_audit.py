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

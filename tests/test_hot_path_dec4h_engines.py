"""The engines' per-round fast paths (2026-12-04, session h, engines) refuse what the slow checks refuse,
and give the same numbers: a bad input reaching an entry point is still named."""

import numpy as np
import pytest

from fedlib.rng import generator, seed_sequence

# ---------------------------------------------------------------- seed_sequence: plain in-range ints skip check_int


@pytest.mark.parametrize("seed, keys, match", [
    (-1, (0,), "seed must be an integer >= 0"),
    (True, (0,), "seed must be an integer >= 0"),
    (1.0, (0,), "seed must be an integer >= 0"),
    (2 ** 128, (0,), "seed must be below 2\\*\\*128"),
    (0, (-1,), "key must be an integer >= 0"),
    (0, (True,), "key must be an integer >= 0"),
    (0, (np.bool_(True),), "key must be an integer >= 0"),
    (0, (2.0,), "key must be an integer >= 0"),
    (0, (2 ** 32,), "key must be below 2\\*\\*32"),
    (0, (1, 2 ** 32), "key must be below 2\\*\\*32"),
    (0, (np.int64(2) ** 32,), "key must be below 2\\*\\*32"),
    (0, ("1",), "key must be an integer >= 0"),
])
def test_seed_sequence_refuses_what_it_refused(seed, keys, match):
    with pytest.raises(ValueError, match=match):
        seed_sequence(seed, "batches", *keys)
    with pytest.raises(ValueError, match=match):
        generator(seed, "batches", *keys)


@pytest.mark.parametrize("purpose", ["", None, 3, b"batches"])
def test_seed_sequence_refuses_a_bad_purpose_every_time(purpose):
    for _ in range(2):  # the second call would find a remembered key, if one had been remembered
        with pytest.raises(ValueError, match="purpose must be a non-empty string"):
            seed_sequence(0, purpose, 1)


def test_seed_sequence_numpy_and_python_ints_give_the_same_stream():
    class Purpose(str):
        pass

    want = seed_sequence(7, "batches", 3, 5).generate_state(4).tolist()
    assert seed_sequence(np.int64(7), "batches", np.int32(3), np.uint8(5)).generate_state(4).tolist() == want
    assert seed_sequence(7, Purpose("batches"), 3, 5).generate_state(4).tolist() == want
    assert seed_sequence(2 ** 128 - 1, "x", 2 ** 32 - 1).spawn_key[1:] == (2 ** 32 - 1,)
    assert seed_sequence(7, "batches").spawn_key == seed_sequence(7, "batches").spawn_key
    assert generator(7, "batches", 3, 5).integers(0, 2 ** 62) == generator(np.int64(7), "batches", 3, 5).integers(0, 2 ** 62)

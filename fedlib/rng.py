"""Seeded random streams: one independent generator per (run seed, purpose, round, client).

Every random draw of :mod:`fedlib`'s runs comes from a generator built here. A stream is
identified by the user's ``seed``, a *purpose* (``"local_steps"``, ``"sampling"``,
``"batches"``, ``"init"``, ...) and integer keys such as ``(round, client)``.  The
keys go into :class:`numpy.random.SeedSequence`'s ``spawn_key`` as a tuple, so
``(client c, round t)`` and ``(client c+1, round t-1)`` are different streams —
unlike ``seed + client + round`` schemes, which collide — and no
global RNG is ever reseeded for good.

Three functions draw from a generator of their own, each seeded by their ``seed`` argument
alone: :func:`fedlib.data.partition.dirichlet_partition` (``numpy.random.RandomState(seed)``,
2020 by default, called exactly as the official code calls numpy's global generator, so the
split is the official one), :func:`fedlib.data.cifar10.cifar10_random_images`
(``numpy.random.default_rng(seed)``, placeholder pixels) and
:func:`fedlib.experiments.acceleration.perturbation_growth`
(``numpy.random.default_rng(SeedSequence(seed))``, the perturbation's direction). The
per-client reference loop of :func:`fedlib.experiments.cifar10.bench_cifar10` seeds torch's
global RNG for its dropout layers from stream ``(seed, "dropout")`` inside
``torch.random.fork_rng``, which restores the caller's state afterwards. The check that
:class:`fedlib.engines.stacked.StackedEngine` (``path="vmap"``, so also
:class:`fedlib.experiments.custom.TensorEngine`) makes of a model's training mode runs the model on a few
inputs in training and in eval mode inside ``torch.random.fork_rng`` without seeding it: what a model draws
there decides only the check.

Used by chapters 6, 9 and 10 (:func:`generator`, :func:`torch_generator`; chapter 9 redraws the clock's speeds).

Example
-------
>>> g1 = generator(0, "local_steps", 3, 5)
>>> g2 = generator(0, "local_steps", 4, 4)
>>> int(g1.integers(1 << 30)) != int(g2.integers(1 << 30))
True
"""
from __future__ import annotations

import zlib

import numpy as np

from ._validate import check_int

__all__ = ["seed_sequence", "generator", "torch_generator", "PURPOSES"]

#: Purposes used inside fedlib; any other string works too. A purpose enters a stream as its CRC-32, so two
#: strings of the same CRC-32 (``"p_gnyijstj"`` and ``"p_etislvlf"``, say) name the same streams; these
#: purposes have distinct ones (a test checks it).
PURPOSES = ("local_steps", "local_work", "sampling", "batches", "init", "partition", "data", "data_sizes", "data_shared",
            "augment", "dropout", "gradient_noise", "client_speeds", "round_speeds", "instances", "fixed_local_steps",
            "anatomy_batches")


#: purpose -> its CRC-32, remembered for plain ``str`` purposes (at most 1024: any string is a purpose)
_PURPOSE_KEYS: dict = {}


def _purpose_key(purpose: str) -> int:
    """The CRC-32 of ``purpose`` (a non-empty string; ``ValueError`` otherwise), the first word of the spawn key."""
    key = _PURPOSE_KEYS.get(purpose) if type(purpose) is str else None  # a str subclass may hash differently
    if key is not None:
        return key
    if not isinstance(purpose, str) or not purpose:
        raise ValueError(f"purpose must be a non-empty string, got {purpose!r}")
    key = zlib.crc32(purpose.encode("utf-8"))
    if type(purpose) is str and len(_PURPOSE_KEYS) < 1024:
        _PURPOSE_KEYS[purpose] = key
    return key


#: Seeds are below 2**128 and keys below 2**32: numpy pads a seed to 4 words and splits larger
#: ints into several 32-bit words, so a key of 2**32 would be the keys (0, 1) and a longer seed
#: would run into the purpose and key words. Within these bounds every (seed, CRC-32 of the purpose, keys)
#: gives its own word sequence, hence its own stream (purposes of one CRC-32 share theirs: :data:`PURPOSES`).
_SEED_LIMIT, _KEY_LIMIT = 2 ** 128, 2 ** 32


def seed_sequence(seed: int, purpose: str, *keys: int) -> np.random.SeedSequence:
    """The :class:`~numpy.random.SeedSequence` of stream ``(seed, purpose, *keys)``
    (``0 <= seed < 2**128``, each key ``0 <= key < 2**32``; a ``ValueError`` otherwise): entropy ``seed``,
    ``spawn_key`` the CRC-32 of ``purpose`` followed by the keys.

    Example
    -------
    >>> import zlib
    >>> sequence = seed_sequence(7, "batches", 3, 5)
    >>> sequence.entropy, sequence.spawn_key == (zlib.crc32(b"batches"), 3, 5)
    (7, True)
    >>> seed_sequence(7, "batches", 2 ** 32)
    Traceback (most recent call last):
    ...
    ValueError: key must be below 2**32 (a larger one would share its stream with a pair of keys), got 4294967296
    """
    if type(seed) is int and 0 <= seed < _SEED_LIMIT and all(type(k) is int and 0 <= k < _KEY_LIMIT for k in keys):
        # plain in-range ints (the engines' seed, round and client, once per client and round): what the
        # checks below return unchanged, without their 3 check_int calls (a bool is no int here)
        return np.random.SeedSequence(entropy=seed, spawn_key=(_purpose_key(purpose),) + keys)
    seed = check_int("seed", seed, minimum=0)
    if seed >= _SEED_LIMIT:
        raise ValueError(f"seed must be below 2**128, got {seed}")
    ks = tuple(check_int("key", k, minimum=0) for k in keys)
    if any(k >= _KEY_LIMIT for k in ks):
        raise ValueError(f"key must be below 2**32 (a larger one would share its stream with a pair of keys), "
                         f"got {max(ks)}")
    return np.random.SeedSequence(entropy=seed, spawn_key=(_purpose_key(purpose),) + ks)


def generator(seed: int, purpose: str, *keys: int) -> np.random.Generator:
    """A fresh :class:`numpy.random.Generator` (PCG64) for stream ``(seed, purpose, *keys)``: the same
    stream always draws the same numbers, another purpose or key other numbers. The engines draw client
    ``i``'s mini-batches of round ``t`` from ``generator(seed, "batches", t, i)``.

    Example
    -------
    >>> import numpy as np
    >>> first, again = generator(0, "batches", 2, 1), generator(0, "batches", 2, 1)
    >>> bool(np.array_equal(first.permutation(10), again.permutation(10)))
    True
    >>> other = generator(0, "sampling", 2, 1)
    >>> bool(np.array_equal(generator(0, "batches", 2, 1).permutation(10), other.permutation(10)))
    False
    """
    return np.random.Generator(np.random.PCG64(seed_sequence(seed, purpose, *keys)))


def torch_generator(seed: int, purpose: str, *keys: int, device="cpu"):
    """A :class:`torch.Generator` on ``device`` seeded from stream ``(seed, purpose, *keys)``: with the first
    two 32-bit words :math:`s_0, s_1` of the stream's state, the seed is ``s0 << 31 ^ s1``. The stacked
    engine's crops and flips come from ``torch_generator(seed, "augment", round, client)`` (chapter 5).

    Example
    -------
    >>> import torch
    >>> draws = [torch.randint(0, 9, (4,), generator=torch_generator(0, "augment", 1, 2)) for _ in range(2)]
    >>> bool(torch.equal(draws[0], draws[1]))
    True
    >>> words = seed_sequence(0, "augment", 1, 2).generate_state(2)
    >>> torch_generator(0, "augment", 1, 2).initial_seed() == int(words[0]) << 31 ^ int(words[1])
    True
    """
    import torch

    state = seed_sequence(seed, purpose, *keys).generate_state(2, dtype=np.uint32)
    try:
        g = torch.Generator(device=device)
    except (RuntimeError, TypeError) as exc:
        if "Invalid device string" not in str(exc) and not isinstance(exc, TypeError):
            raise  # a real device torch cannot open (no driver ...): its own message
        raise ValueError(f"device: not a torch device: {device!r} ({exc})") from None
    g.manual_seed(int(state[0]) << 31 ^ int(state[1]))
    return g

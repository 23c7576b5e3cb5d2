r"""How many local steps :math:`\tau_i^{(t)}` each client takes in round :math:`t`.

Paper §2: with :math:`E` local epochs of batch :math:`B`, :math:`\tau_i = E\lceil n_i/B\rceil`
here (the official code keeps the last partial batch; the paper writes
:math:`\lfloor E n_i/B \rfloor`); with a fixed wall-clock round, :math:`\tau_i` is the
number of steps finished in the window. Every schedule is an object with
``local_steps(round) -> (m,) int64`` (and ``epochs(round)`` where it applies), and
every random draw comes from ``fedlib.rng.generator(seed, purpose, round, client)`` —
independent per (run, round, client), never a reseeded global RNG. The purpose is
``"local_steps"`` for drawn step or epoch counts and ``"round_speeds"`` for
:class:`WallClock`'s per-round speeds, so a clock and a random schedule with the same
seed draw from different streams (not the same numbers, which would correlate them).

Used by chapters 1, 2, 3, 4, 5 and 10.
"""
from __future__ import annotations

import dataclasses
import functools

import math
from typing import Sequence

import numpy as np

from ._validate import (_is_number, bool_entry, check_count, check_finite_array, check_int, check_int_array, check_local_steps,
                        check_nonnegative, check_positive, is_bool, plain)
from .rng import generator

__all__ = ["steps_per_epoch", "FixedSteps", "RandomSteps", "FixedEpochs", "RandomEpochs", "WallClock", "whole_steps", "round_local_steps", "check_schedule_size", "check_participant_steps", "RandomLocalWork", "parse_epochs", "make_epoch_schedule",
           "check_epoch_schedule"]


def steps_per_epoch(num_samples, batch_size: int) -> np.ndarray:
    r""":math:`\lceil n_i / B \rceil` mini-batches per epoch (last partial batch kept; paper §2 writes
    :math:`\tau_i = \lfloor E n_i/B \rfloor`, the official code keeps the partial batch).

    ``num_samples`` is the (m,) integer array of :math:`n_i`, each :math:`\ge 1` (a client without data is a
    ``ValueError``); ``batch_size`` is :math:`B`, an integer :math:`\ge 1`. Returns an (m,) ``int64`` array.

    Example
    -------
    :math:`B = 32`: 64 samples make 2 full batches, 65 make 2 and a partial one (3), 10 make 1:

    >>> import numpy as np
    >>> steps_per_epoch(np.array([64, 65, 10]), 32)
    array([2, 3, 1])
    """
    if bool_entry(num_samples) is not None:  # np.asarray([True, 64]) is [1, 64]: one sample (an array's dtype tells)
        raise ValueError(f"num_samples must hold integers, got the bool {plain(bool_entry(num_samples))!r} in "
                         f"{plain(num_samples)!r}")
    n = np.asarray(num_samples)
    if n.ndim != 1 or n.size == 0 or n.dtype.kind not in "iu":
        raise ValueError(f"num_samples must be a non-empty 1-d integer array, got {n!r}")
    if np.any(n < 1):
        raise ValueError(f"num_samples: client {int(np.flatnonzero(n < 1)[0])} has no data")
    b = check_int("batch_size", batch_size, minimum=1)
    # np.int64(b): a batch size past 64 bits raises OverflowError on every numpy (numpy 1.x would compute with
    # a Python int into an object array, numpy 2 raises)
    return -(-n.astype(np.int64) // np.int64(b))


@dataclasses.dataclass(frozen=True)
class FixedSteps:
    r"""The same :math:`\tau_i` every round (e.g. the quadratic chapter's fixed panel).

    ``steps`` holds the :math:`\tau_i`, whole numbers :math:`\ge 1`, one per client.

    Example
    -------
    >>> schedule = FixedSteps([2, 4, 8])
    >>> schedule.local_steps(0), schedule.local_steps(7), schedule.num_clients
    (array([2, 4, 8]), array([2, 4, 8]), 3)
    """

    steps: tuple

    def __init__(self, steps):
        object.__setattr__(self, "steps", tuple(int(s) for s in check_local_steps("steps", steps)))

    @property
    def num_clients(self) -> int:
        return len(self.steps)

    def local_steps(self, round_index: int) -> np.ndarray:
        return np.array(self.steps, dtype=np.int64)


@dataclasses.dataclass(frozen=True)
class RandomSteps:
    r""":math:`\tau_i^{(t)}` uniform on the inclusive range ``[low, high]``, per client and round.

    ``num_clients`` is an integer :math:`\ge 1`; ``low`` and ``high`` are whole numbers
    :math:`1 \le` ``low`` :math:`\le` ``high``; ``seed`` is an integer :math:`\ge 0` (client :math:`i`'s steps of
    round :math:`t` come from ``generator(seed, "local_steps", t, i)``).

    Example
    -------
    The draws are fixed by ``(seed, round, client)``: asking for a round again gives the same
    steps, and both ends of the range occur:

    >>> import numpy as np
    >>> schedule = RandomSteps(num_clients=4, low=2, high=5, seed=0)
    >>> bool(np.array_equal(schedule.local_steps(3), schedule.local_steps(3)))
    True
    >>> drawn = np.concatenate([schedule.local_steps(t) for t in range(50)])
    >>> sorted(set(drawn.tolist()))
    [2, 3, 4, 5]
    """

    num_clients: int
    low: int
    high: int
    seed: int = 0

    def __post_init__(self):
        check_int("num_clients", self.num_clients, minimum=1)
        object.__setattr__(self, "low", check_count("low", self.low, minimum=1))  # 2.0: the int 2, as FixedSteps
        object.__setattr__(self, "high", check_count("high", self.high, minimum=1))
        if self.high < self.low:
            raise ValueError(f"high must be >= low, got low={self.low}, high={self.high}")
        # here, as RandomEpochs and WallClock check theirs: seed=1.5 or -1 was kept and refused only at local_steps
        object.__setattr__(self, "seed", check_int("seed", self.seed))

    def local_steps(self, round_index: int) -> np.ndarray:
        round_index = check_int("round_index", round_index)
        return _random_steps(self.seed, self.num_clients, self.low, self.high, round_index).copy()


@functools.lru_cache(maxsize=4096)
def _random_steps(seed: int, num_clients: int, low: int, high: int, round_index: int) -> np.ndarray:
    """:meth:`RandomSteps.local_steps`, remembered (a read-only int64 array; the method hands out
    copies): every client's draw comes from its own stream ``generator(seed, "local_steps",
    round_index, i)``, and building those streams (a ``SeedSequence`` each) is most of the cost;
    a run and its closed form (chapter 10) and the variants of an experiment ask for the same
    rounds again. The draws are those of a fresh call, whatever was asked before."""
    steps = np.array([generator(seed, "local_steps", round_index, i).integers(low, high + 1)
                      for i in range(num_clients)], dtype=np.int64)
    steps.flags.writeable = False
    return steps


@dataclasses.dataclass(frozen=True)
class FixedEpochs:
    r""":math:`\tau_i = E \lceil n_i/B \rceil` with the same :math:`E` for everyone, every round (paper §2).

    ``num_samples`` holds the clients' :math:`n_i` (integers :math:`\ge 1`), ``batch_size`` is :math:`B \ge 1` and
    ``epochs`` is :math:`E`, a whole number :math:`\ge 1`.

    Example
    -------
    :math:`E = 2`, :math:`B = 32`: 64 samples take :math:`2 \cdot 2 = 4` steps, 65 take
    :math:`2 \cdot 3 = 6` (the partial batch counts):

    >>> FixedEpochs([64, 65], batch_size=32, epochs=2).local_steps(0)
    array([4, 6])
    """

    num_samples: tuple
    batch_size: int
    epochs: int

    def __init__(self, num_samples, batch_size: int, epochs: int):
        spe = steps_per_epoch(num_samples, batch_size)  # as given: it refuses a bool entry np.asarray makes 1
        object.__setattr__(self, "num_samples", tuple(int(n) for n in num_samples))
        object.__setattr__(self, "batch_size", int(batch_size))
        object.__setattr__(self, "epochs", check_count("epochs", epochs, minimum=1))
        object.__setattr__(self, "_spe", spe)

    @property
    def num_clients(self) -> int:
        return len(self.num_samples)

    def epochs_of(self, round_index: int) -> np.ndarray:
        return np.full(self.num_clients, self.epochs, dtype=np.int64)

    def local_steps(self, round_index: int) -> np.ndarray:
        return np.int64(self.epochs) * self._spe  # epochs past 64 bits: OverflowError on every numpy, as above


@dataclasses.dataclass(frozen=True)
class RandomEpochs:
    r""":math:`E_i^{(t)}` uniform on the **inclusive** range ``[low, high]`` (default 2..5,
    not numpy's exclusive ``{2,3,4}`` of the official code); :math:`\tau_i = E_i^{(t)}\lceil n_i/B\rceil`
    (paper §6: :math:`E_i \sim \mathcal U(2, 5)`).

    ``num_samples`` holds the clients' :math:`n_i` (integers :math:`\ge 1`) and ``batch_size`` is :math:`B \ge 1`;
    ``low`` and ``high`` are whole numbers :math:`1 \le` ``low`` :math:`\le` ``high``. ``seed`` (an integer
    :math:`\ge 0`) fixes the draws: client :math:`i`'s epochs of round :math:`t` come from
    ``generator(seed, "local_steps", t, i)``, the streams of :class:`RandomSteps`.

    Example
    -------
    Whatever epochs are drawn, each client's steps are its epochs times its batches per epoch
    (2 for 64 samples, 1 for 32), and every epoch count lies in 2..5:

    >>> import numpy as np
    >>> schedule = RandomEpochs([64, 32], batch_size=32, seed=0)
    >>> epochs = schedule.epochs_of(0)
    >>> bool(np.array_equal(schedule.local_steps(0), epochs * [2, 1])), bool(np.all((2 <= epochs) & (epochs <= 5)))
    (True, True)
    """

    num_samples: tuple
    batch_size: int
    low: int = 2
    high: int = 5
    seed: int = 0

    def __init__(self, num_samples, batch_size: int, low: int = 2, high: int = 5, seed: int = 0):
        spe = steps_per_epoch(num_samples, batch_size)  # as given: it refuses a bool entry np.asarray makes 1
        low = check_count("low", low, minimum=1)  # whole numbers, as make_epoch_schedule's epochs
        high = check_count("high", high, minimum=1)
        if high < low:
            raise ValueError(f"high must be >= low, got low={low}, high={high}")
        object.__setattr__(self, "num_samples", tuple(int(n) for n in num_samples))
        object.__setattr__(self, "batch_size", int(batch_size))
        object.__setattr__(self, "low", int(low))
        object.__setattr__(self, "high", int(high))
        object.__setattr__(self, "seed", check_int("seed", seed))
        object.__setattr__(self, "_spe", spe)

    @property
    def num_clients(self) -> int:
        return len(self.num_samples)

    def epochs_of(self, round_index: int) -> np.ndarray:
        round_index = check_int("round_index", round_index)
        # the same per-client streams as RandomSteps' draws on [low, high] (remembered there)
        return _random_steps(self.seed, self.num_clients, self.low, self.high, round_index).copy()

    def local_steps(self, round_index: int) -> np.ndarray:
        return self.epochs_of(round_index) * self._spe


def check_participant_steps(steps: np.ndarray, clients: np.ndarray, round_index: int) -> np.ndarray:
    r"""``steps[clients]``, the local steps of round ``round_index``'s participants, after checking that each
    takes :math:`\tau_i \ge 1` (a participant without a step has no update to aggregate); the ``ValueError``
    names the first participant without one. ``steps``: one count per client
    (:func:`round_local_steps`); ``clients``: the round's participants, at least one (a round without any is a
    ``ValueError`` naming ``clients``, as :func:`fedlib.sampling.round_participation` refuses one). The reference,
    batched and benchmark loops check their rounds with it, before any client of the round trains.

    Example
    -------
    >>> check_participant_steps(np.array([2, 0, 3]), np.array([0, 2]), 4)   # client 1 sits the round out
    array([2, 3])
    >>> check_participant_steps(np.array([2, 0, 3]), np.array([0, 1]), 4)
    Traceback (most recent call last):
    ...
    ValueError: schedule: round 4 gives participant client 1 0 local steps (need >= 1: leave a client without work out of the round)
    """
    # the engines' int arrays pass at the cost of a few attribute reads and a minimum; anything else is checked by
    # name (a float NaN count was returned as a participant's steps, client -1 read the last client's, a short steps
    # failed in numpy as IndexError). The minimum: a negative count of a client out of the round passed here but
    # not as a list ('steps must be >= 0')
    if not (type(steps) is np.ndarray and steps.ndim == 1 and steps.dtype.kind in "iu" and steps.size
            and steps.min() >= 0):
        steps = check_int_array("steps", steps, minimum=0)
    # an empty int array is refused as an empty list is (it returned an empty array, where [] was 'clients must be
    # a non-empty 1-d array of integers')
    if not (type(clients) is np.ndarray and clients.ndim == 1 and clients.dtype.kind in "iu" and clients.size):
        clients = check_int_array("clients", clients, minimum=0)
    if clients.min() < 0 or clients.max() >= steps.shape[0]:
        raise ValueError(f"clients must be indices into steps (0..{steps.shape[0] - 1}, one count per client), got "
                         f"{plain(clients.min())}..{plain(clients.max())}")
    own = steps[clients]
    if (own < 1).any():
        k = int(np.argmax(own < 1))
        raise ValueError(f"schedule: round {round_index} gives participant client {int(clients[k])} {int(own[k])} "
                         "local steps (need >= 1: leave a client without work out of the round)")
    return own


def _check_has_local_steps(schedule, name: str = "schedule") -> None:
    if not callable(getattr(schedule, "local_steps", None)):
        if callable(schedule):  # 'FixedSteps(<function ...>)' was no advice for a function round -> counts
            hint = ("a function is no schedule: give an object whose method local_steps(round) returns the counts, "
                    "e.g. an instance of class S: def local_steps(self, round): ...")
        else:
            hint = f"fedlib.schedules: FixedSteps({schedule!r}) for fixed counts"
        raise ValueError(f"{name} must be an object with local_steps(round) -> (m,) ints ({hint}), got "
                         f"{type(schedule).__name__}")


def check_schedule_size(schedule, num_clients: int, owner: str = "p", name: str = "schedule") -> None:
    r"""Refuse, before any round runs, a ``schedule`` that is not one (no ``local_steps(round)`` method) or one built
    for another number of clients than the run's ``num_clients`` :math:`m` (its ``num_clients`` attribute, which
    every schedule of this module has; a schedule of your own without one is checked round by round, by
    :func:`round_local_steps`). ``owner`` names where the run's :math:`m` comes from (``"p"``, ``"the problem"``),
    ``name`` the parameter the schedule came in as.

    Example
    -------
    >>> check_schedule_size(FixedSteps([2, 4]), 2)
    >>> check_schedule_size(FixedSteps([2, 4]), 3, owner="the problem")
    Traceback (most recent call last):
    ...
    ValueError: schedule is for 2 clients but the problem has 3
    """
    _check_has_local_steps(schedule, name)
    k = getattr(schedule, "num_clients", None)
    if isinstance(k, (int, np.integer)) and not is_bool(k) and int(k) != num_clients:
        raise ValueError(f"{name} is for {int(k)} clients but {owner} has {num_clients}")


def round_local_steps(schedule, round_index: int, num_clients: int, owner: str = "p") -> np.ndarray:
    r"""``schedule.local_steps(round_index)`` checked, as the engines use it: one whole number
    :math:`\tau_i \ge 0` per client (int64; integer-valued floats accepted, ``2.9`` refused
    rather than cut to 2). Participants need :math:`\tau_i \ge 1` (:func:`check_participant_steps`).
    ``owner`` names where the run's number of clients ``num_clients`` comes from, in the message (default ``"p"``).

    Example
    -------
    >>> round_local_steps(FixedSteps([2, 4]), 0, num_clients=2)
    array([2, 4])
    >>> round_local_steps(FixedSteps([2, 4]), 0, num_clients=3)
    Traceback (most recent call last):
    ...
    ValueError: schedule.local_steps(0) must give one step count per client (3 clients in p), got shape (2,)
    """
    # by name, first: a bad num_clients was reported as the schedule's fault ('(nan clients in p)'), a bad
    # round_index passed on to the schedule (FixedSteps ignores it)
    round_index = check_int("round_index", round_index)
    num_clients = check_int("num_clients", num_clients, minimum=1)
    _check_has_local_steps(schedule)
    name = f"schedule.local_steps({round_index})"
    raw = schedule.local_steps(round_index)
    if type(raw) is np.ndarray:  # FixedSteps, RandomSteps, ...: every round, so no other test first
        if raw.shape != (num_clients,):
            raise ValueError(f"{name} must give one step count per client ({num_clients} clients in {owner}), got shape "
                             f"{raw.shape}")
        return check_int_array(name, raw, size=num_clients, minimum=0)
    if raw is None or isinstance(raw, (dict, str, bytes)) or hasattr(raw, "__next__"):  # np.asarray: a 0-d object
        hint = " (a missing return statement?)" if raw is None else ""
        raise ValueError(f"{name} must give one step count per client ({num_clients} clients in {owner}), got "
                         f"{type(raw).__name__}{hint}")
    given = raw
    if isinstance(raw, (list, tuple)):  # converted once (np.shape converts a list too), unless an entry is a bool:
        types = set(map(type, raw))  # np.asarray([True, 2]) would read the bool True as 1 step
        if bool not in types and np.bool_ not in types:
            try:
                given = np.asarray(raw)
            except ValueError:  # a ragged list: check_int_array names it
                pass
    try:
        shape = np.shape(given)
    except ValueError:  # a ragged list: check_int_array names it
        shape = None
    if shape is not None and shape != (num_clients,):
        raise ValueError(f"{name} must give one step count per client ({num_clients} clients in {owner}), got shape {shape}")
    return check_int_array(name, given, size=num_clients, minimum=0)


def whole_steps(work) -> np.ndarray:
    r""":math:`\lfloor x\rfloor` of a number of steps :math:`x = T s` computed in floating point,
    forgiving the few ulps by which a product that is a whole number in decimal falls below it
    (``100 * 0.29`` is ``28.999999999999996``: 29 steps, as ``1 * 29.0`` and ``1e5 * 0.29e-3`` give),
    so the count does not depend on the time unit.

    ``work`` must be finite and >= 0 (a step count; ``ValueError`` otherwise, also for a bool).

    Example
    -------
    29 steps from 100 s at 0.29 steps/s, where ``np.floor`` alone gives 28:

    >>> import numpy as np
    >>> float(np.floor(100 * 0.29)), float(whole_steps(100 * 0.29)), float(whole_steps(2.5))
    (28.0, 29.0, 2.0)
    """
    if is_bool(work) or bool_entry(work) is not None:
        raise ValueError(f"work must be a number of steps, not a bool, got {plain(work)!r}")  # True gave 1 step
    work = check_finite_array("work", work)  # NaN gave NaN steps, -2.5 gave -3
    if np.any(work < 0):
        raise ValueError(f"work must be >= 0 (a number of steps), got min {plain(work.min())!r}")
    # never past ceil(work): from 2**49 on, 8 eps * work is a step or more, and the nudge alone turned a whole
    # 1e15 into 1e15 + 1 and 2**60 into 2**60 + 2048 (WallClock's counts go up to 2**63)
    return np.minimum(np.floor(work * (1.0 + 8.0 * np.finfo(np.float64).eps)), np.ceil(work))


@dataclasses.dataclass(frozen=True)
class WallClock:
    r"""Fixed-length rounds: client :math:`i` runs at ``speeds[i]`` steps per second for
    ``round_seconds``; each round its speed is multiplied by a lognormal slowdown
    :math:`e^{\sigma Z}` (``jitter`` :math:`=\sigma`) and, with probability
    ``straggler_prob``, by ``straggler_factor`` (a straggler). It contributes the steps it
    finished, :math:`\tau_i^{(t)} = \max(1, \lfloor T s_i^{(t)} \rfloor)` — stragglers
    are included with their partial work, and every client finishes at least one step.
    :meth:`~fedlib.schedules.WallClock.rates` gives the round's speeds,
    :meth:`~fedlib.schedules.WallClock.round_duration` how long a fixed-length round really
    lasts and :meth:`~fedlib.schedules.WallClock.seconds_to_finish` how long a round that
    waits for every client lasts; chapter 9 (stragglers) runs both kinds of round. (Paper §2: with
    rounds of a fixed wall-clock length, :math:`\tau_i` is the number of local iterations client
    :math:`i` completes in it.)

    ``speeds`` are the clients' base speeds in steps per second (finite, > 0); ``round_seconds`` is :math:`T > 0`;
    ``jitter`` :math:`\sigma \ge 0` (default 0: no jitter); ``straggler_prob`` lies in :math:`[0, 1]` (default 0: no
    straggler) and ``straggler_factor`` in :math:`(0, 1]` (default 0.1). ``seed`` (an integer :math:`\ge 0`) fixes
    the draws of :meth:`rates`.

    Example
    -------
    Speeds 10 and 2.5 steps/s, rounds of :math:`T = 1` s, no jitter: :math:`\tau = (10, 2)`
    (:math:`\lfloor 2.5 \rfloor = 2`). A round that waits for both to do 10 steps lasts
    :math:`\max(10/10, 10/2.5) = 4` s. A client at 0.5 steps/s still does one step, so its round
    lasts :math:`1/0.5 = 2` s:

    >>> clock = WallClock(speeds=[10.0, 2.5], round_seconds=1.0)
    >>> clock.local_steps(0), clock.seconds_to_finish(10, 0)
    (array([10,  2]), 4.0)
    >>> slow = WallClock(speeds=[10.0, 0.5], round_seconds=1.0)
    >>> slow.local_steps(0), slow.round_duration(0)
    (array([10,  1]), 2.0)
    """

    speeds: tuple
    round_seconds: float
    jitter: float = 0.0
    straggler_prob: float = 0.0
    straggler_factor: float = 0.1
    seed: int = 0

    def __init__(self, speeds, round_seconds: float, jitter: float = 0.0, straggler_prob: float = 0.0,
                 straggler_factor: float = 0.1, seed: int = 0):
        s = check_finite_array("speeds", speeds, ndim=1)
        if s.size == 0 or np.any(s <= 0):
            raise ValueError("speeds must be a non-empty array of steps/second > 0")
        object.__setattr__(self, "speeds", tuple(float(v) for v in s))
        object.__setattr__(self, "round_seconds", check_positive("round_seconds", round_seconds))
        object.__setattr__(self, "jitter", check_nonnegative("jitter", jitter))
        if not _is_number(straggler_prob) or not 0 <= straggler_prob <= 1:  # True was 1.0, "a" a TypeError
            raise ValueError(f"straggler_prob must lie in [0, 1], got {plain(straggler_prob)!r}")
        object.__setattr__(self, "straggler_prob", float(straggler_prob))
        if not _is_number(straggler_factor) or not 0 < straggler_factor <= 1:
            raise ValueError(f"straggler_factor must lie in (0, 1], got {plain(straggler_factor)!r}")
        object.__setattr__(self, "straggler_factor", float(straggler_factor))
        object.__setattr__(self, "seed", check_int("seed", seed))

    @property
    def num_clients(self) -> int:
        return len(self.speeds)

    def rates(self, round_index: int) -> np.ndarray:
        r"""Every client's speed :math:`s_i^{(t)}` in round ``round_index`` (steps per second,
        jitter and straggling included); one stream per (seed, round, client),
        ``generator(seed, "round_speeds", round, client)``: first :math:`Z` of the jitter
        :math:`e^{\sigma Z}`, then the uniform that decides whether the client straggles."""
        round_index = check_int("round_index", round_index)
        out = np.empty(self.num_clients)
        for i, s in enumerate(self.speeds):
            g = generator(self.seed, "round_speeds", round_index, i)
            rate = s * np.exp(self.jitter * g.standard_normal())
            if g.random() < self.straggler_prob:
                rate *= self.straggler_factor
            out[i] = rate
        return out

    def local_steps(self, round_index: int) -> np.ndarray:
        return self._steps_at(self.rates(round_index))

    def _steps_at(self, rates: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            work = self.round_seconds * rates  # inf past float64 range: named below, not by whole_steps
            steps = np.maximum(1, whole_steps(np.minimum(work, 2.0 ** 64)))
        if not np.all(steps < 2.0 ** 63):  # the int64 cast would wrap (inf -> -2**63) silently
            bad = int(np.flatnonzero(~(steps < 2.0 ** 63))[0])
            raise ValueError(f"speeds: client {bad} would take {plain(np.floor(work[bad]))!r} steps in round_seconds = "
                             f"{self.round_seconds!r} (not a step count below 2**63)")
        return steps.astype(np.int64)

    def round_duration(self, round_index: int) -> float:
        r"""How long fixed-length round ``round_index`` really lasts: ``round_seconds``, or
        longer when a client too slow for one step in the window still finishes it,
        :math:`\max(T_r, \max_i \tau_i^{(t)}/s_i^{(t)})` (one draw of the round's speeds)."""
        rates = self.rates(round_index)
        # tau_i / s_i <= T unless tau_i is the one step forced on a client slower than 1/T
        return max(self.round_seconds, float(np.max(1.0 / rates)))

    def seconds_to_finish(self, steps, round_index: int) -> float:
        r"""How long round ``round_index`` lasts if every client must finish ``steps``
        local steps (a whole number, or one per client) at this round's speeds:
        :math:`\max_i \tau_i / s_i^{(t)}` — the synchronous round that waits for the slowest
        client (paper §1), against the fixed ``round_seconds`` of ``local_steps``."""
        if not isinstance(steps, (list, tuple)):  # a list as given: np.asarray([True, 2]) is [1, 2], where
            steps = np.asarray(steps)  # check_local_steps refuses the bool (as FixedSteps does)
            if steps.ndim == 0:
                steps = np.full(self.num_clients, steps)  # a bool scalar stays a bool array: refused
        steps = check_local_steps("steps", steps, size=self.num_clients)
        return float(np.max(steps / self.rates(round_index)))


@dataclasses.dataclass(frozen=True)
class RandomLocalWork:
    r"""Arbitrary local work per client and round (Theorem 3): client :math:`i` takes
    :math:`\tau_i^{(t)}` steps, uniform on its own inclusive range ``[low[i], high[i]]``,
    with local solver number :math:`s_i^{(t)}`, uniform on ``0 .. num_solvers-1`` — so both
    :math:`\tau_i` and :math:`a_i` change from round to round, and clients differ in how
    much they do on average.

    One stream per round, ``generator(seed, "local_work", round)``: the steps of all
    clients are drawn first, then the solver numbers. Used by chapter 8 with
    :func:`fedlib.engines.quadratic.run_replicas` and the ``solver_at`` hook of
    :func:`fedlib.engines.reference.run_sequential`.

    Example
    -------
    >>> work = RandomLocalWork(low=[1, 5], high=[2, 10], num_solvers=3, seed=0)
    >>> steps, solvers = work.draw(0)
    >>> bool(1 <= steps[0] <= 2 and 5 <= steps[1] <= 10), bool(set(solvers) <= {0, 1, 2})
    (True, True)
    """

    low: tuple
    high: tuple
    num_solvers: int = 1
    seed: int = 0

    def __init__(self, low, high, num_solvers: int = 1, seed: int = 0):
        lo = check_local_steps("low", low)
        hi = check_local_steps("high", high)
        if hi.size != lo.size:  # either may be the wrong one: name both
            raise ValueError(f"low and high must have one entry per client each, got {lo.size} low and {hi.size} high")
        if np.any(hi < lo):
            bad = int(np.flatnonzero(hi < lo)[0])
            raise ValueError(f"high must be >= low for every client (client {bad}: low {lo[bad]}, high {hi[bad]})")
        object.__setattr__(self, "low", tuple(int(v) for v in lo))
        object.__setattr__(self, "high", tuple(int(v) for v in hi))
        object.__setattr__(self, "num_solvers", check_int("num_solvers", num_solvers, minimum=1))
        object.__setattr__(self, "seed", check_int("seed", seed))

    @property
    def num_clients(self) -> int:
        return len(self.low)

    @property
    def mean_steps(self) -> np.ndarray:
        r""":math:`\mathbb E[\tau_i^{(t)}] = (\text{low}_i + \text{high}_i)/2` per client."""
        return (np.array(self.low, dtype=np.float64) + np.array(self.high, dtype=np.float64)) / 2

    def draw(self, round_index: int) -> tuple[np.ndarray, np.ndarray]:
        """``(steps, solver_numbers)`` of round ``round_index``, each ``(m,)`` int64."""
        round_index = check_int("round_index", round_index)
        steps, numbers = _random_local_work(self.seed, self.low, self.high, self.num_solvers, round_index)
        return steps.copy(), numbers.copy()

    def local_steps(self, round_index: int) -> np.ndarray:
        return self.draw(round_index)[0]

    def solver_numbers(self, round_index: int) -> np.ndarray:
        return self.draw(round_index)[1]


def _check_local_work(work, needs: Sequence[str], reads: str, hint: str, num_clients: int | None = None):
    """``work`` as :class:`RandomLocalWork` for a caller that reads its attributes ``needs`` (``reads`` says what
    for, ``hint`` what to do instead), and for ``num_clients`` clients (a problem's; not checked when ``None``):
    a ``ValueError`` naming ``work``, :class:`RandomLocalWork` and every attribute it lacks (in the order of
    ``needs``), not an ``AttributeError`` from inside. Returns ``work``. The one check of
    :mod:`fedlib.experiments.speedup` (its closed forms) and :func:`fedlib.experiments.bounds.theorem3_check`."""
    missing = [a for a in needs if not hasattr(work, a)]
    if missing:
        raise ValueError(f"work must be a fedlib.schedules.RandomLocalWork ({reads}), got {type(work).__name__}, "
                         f"which has no {', '.join(missing)}; {hint}")
    if num_clients is not None and work.num_clients != num_clients:
        raise ValueError(f"work: local work for {work.num_clients} clients, the problem has {num_clients}")
    return work


@functools.lru_cache(maxsize=4096)
def _random_local_work(seed: int, low: tuple, high: tuple, num_solvers: int,
                       round_index: int) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`RandomLocalWork.draw`, remembered (read-only arrays; the method hands out copies):
    one stream ``generator(seed, "local_work", round_index)`` per round, steps first, then the
    solver numbers. Chapter 8 runs the same seeds' rounds once per :math:`\\tau_{\\text{eff}}`
    choice, learning rate and participant count."""
    g = generator(seed, "local_work", round_index)
    lo = np.array(low, dtype=np.int64)
    steps = (lo + g.integers(0, np.array(high, dtype=np.int64) - lo + 1)).astype(np.int64)
    numbers = g.integers(0, num_solvers, size=lo.size).astype(np.int64)
    steps.flags.writeable = False
    numbers.flags.writeable = False
    return steps, numbers


def parse_epochs(text: str) -> tuple[int, int]:
    """Parse ``"2"`` -> (2, 2) or an inclusive range ``"2-5"`` -> (2, 5); a whole number ``n`` >= 1 gives (n, n)
    (``2.5`` or ``True`` is refused, not cut to 2 or taken as 1).

    ``text`` is a string (``"2"``, ``"2-5"``) or a whole number; anything else, a range with low < 1 or high < low,
    or a count from 2**63 on (past int64, as :func:`make_epoch_schedule` refuses), is a ``ValueError``.

    Example
    -------
    >>> parse_epochs("2"), parse_epochs("2-5")
    ((2, 2), (2, 5))
    >>> parse_epochs("5-2")
    Traceback (most recent call last):
    ...
    ValueError: epochs range must satisfy 1 <= low <= high, got '5-2'
    """
    if not isinstance(text, str):  # a number: whole, >= 1 (int() cut 2.9 to 2 epochs, took True as 1, overflowed on inf)
        lo = hi = check_count("epochs", text, minimum=1)
        return lo, hi
    try:
        if "-" in str(text):
            lo, hi = (int(v) for v in str(text).split("-", 1))
        else:
            lo = hi = int(text)
    except ValueError:
        raise ValueError(f"epochs must be an integer like '2' or an inclusive range like '2-5', got {text!r}") from None
    if lo < 1 or hi < lo:
        raise ValueError(f"epochs range must satisfy 1 <= low <= high, got {text!r}")
    check_count("epochs", hi, minimum=1)  # below 2**63, as a number is: named epochs, not the schedule's low or high
    return lo, hi


def make_epoch_schedule(num_samples, batch_size: int, epochs, seed: int = 0):
    """:class:`FixedEpochs` for ``"2"`` (or a whole number ``2``), :class:`RandomEpochs` for ``"2-5"`` (or a (low, high)
    pair of whole numbers); anything else is a ``ValueError`` naming ``epochs``, ``low`` or ``high``.

    Example
    -------
    >>> make_epoch_schedule([64, 32], 32, "2")
    FixedEpochs(num_samples=(64, 32), batch_size=32, epochs=2)
    >>> make_epoch_schedule([64, 32], 32, (2, 5), seed=1)
    RandomEpochs(num_samples=(64, 32), batch_size=32, low=2, high=5, seed=1)
    """
    if isinstance(epochs, str):
        lo, hi = parse_epochs(epochs)
    elif isinstance(epochs, tuple):
        if len(epochs) != 2:  # else "too many values to unpack (expected 2)"
            raise ValueError(f"epochs must be a count, a string like '2' or '2-5', or a (low, high) pair, got {epochs!r}")
        # each checked here: (1, True) compared equal (True == 1) and went on to FixedEpochs as 1 epoch
        lo, hi = check_count("low", epochs[0], minimum=1), check_count("high", epochs[1], minimum=1)
        if hi < lo:  # as '5-2' is (RandomEpochs' "high must be >= low" named no argument of the caller)
            raise ValueError(f"epochs range must satisfy 1 <= low <= high, got {epochs!r}")
    else:  # a number: named as epochs (NaN != NaN went on to RandomEpochs' 'low must be an integer >= 1, got nan')
        lo = hi = check_count("epochs", epochs, minimum=1)
    if lo == hi:
        return FixedEpochs(num_samples, batch_size, lo)
    return RandomEpochs(num_samples, batch_size, lo, hi, seed)


def check_epoch_schedule(schedule, num_samples, batch_size: int, name: str = "schedule") -> None:
    r"""Refuse an epoch schedule (one with ``num_samples`` / ``batch_size``: :class:`FixedEpochs`,
    :class:`RandomEpochs`) counted for other client sizes or another batch size than the engine's:
    its :math:`\tau_i = E_i\lceil n_i/B\rceil` would make every client run part of an extra epoch
    (or miss samples) without a word. Other schedules (steps, wall clock) pass. Used by the
    batched, reference and stacked engines.

    ``num_samples`` and ``batch_size`` are the engine's client sizes :math:`n_i` and :math:`B`; ``name`` is the
    parameter the schedule came in as, named in the message (default ``"schedule"``).

    Example
    -------
    A schedule counted for clients of 64 and 32 samples passes for those clients and is refused for
    a client of 40 (it would run :math:`\lceil 40/32 \rceil = 2` batches per epoch, not 1):

    >>> schedule = FixedEpochs([64, 32], batch_size=32, epochs=2)
    >>> check_epoch_schedule(schedule, [64, 32], 32)
    >>> check_epoch_schedule(schedule, [64, 40], 32)
    Traceback (most recent call last):
    ...
    ValueError: schedule counts steps for other client sizes (client 1: 32 samples, the run's client has 40); ...
    """
    sb = getattr(schedule, "batch_size", None)
    if sb is not None and sb != batch_size:
        raise ValueError(f"batch_size: {name} counts steps with batch size {sb}, the engine's is {batch_size}")
    sn = getattr(schedule, "num_samples", None)
    if sn is None:
        return
    # whole counts by name: a NaN failed in int() ('cannot convert float NaN to integer'), 'x' or None blamed the
    # schedule ('counts steps for other client sizes')
    sn, n = np.asarray(sn), check_int_array("num_samples", num_samples, minimum=0)
    if sn.shape != n.shape:
        where = f"{sn.size} clients, the run has {n.size}"
    elif not np.array_equal(sn, n):
        bad = int(np.flatnonzero(sn != n)[0])
        where = f"client {bad}: {int(sn[bad])} samples, the run's client has {int(n[bad])}"
    else:
        return
    raise ValueError(f"{name} counts steps for other client sizes ({where}); build it from the clients' sizes")

def step_decay_lr(base_lr: float, round_index: int, total_rounds: int, milestones=(0.5, 0.75), factor: float = 0.1) -> float:
    r"""Client learning rate of round ``round_index`` (from 0): divided by ``1/factor`` after
    each milestone fraction of ``total_rounds`` (paper §6: decayed "by a constant factor after finishing
    50% and 75% of the communication rounds"; the factor is the official code's: ÷10 at 50%, ÷100 at 75%,
    with 100 rounds at rounds 50 and 75). A milestone
    :math:`f` is round :math:`\max(1, \lfloor fT + \tfrac12\rfloor)` (halves round up, and
    round 0 always has the base rate).

    ``base_lr`` is the rate :math:`\eta_0` of round 0 (finite, > 0), ``total_rounds`` the :math:`T \ge 1` the
    milestones are fractions of, and ``round_index`` an integer :math:`\ge 0` (past ``total_rounds`` the last rate
    stays).

    Example
    -------
    :math:`T = 4` rounds, milestones at :math:`0.5 \cdot 4 = 2` and :math:`0.75 \cdot 4 = 3`, ``factor``
    1/2: the rate halves at round 2 and again at round 3:

    >>> [step_decay_lr(1.0, t, total_rounds=4, factor=0.5) for t in range(4)]
    [1.0, 1.0, 0.5, 0.25]

    ``factor`` must lie in :math:`(0, 1]` (it multiplies the rate: ``factor=10`` meant as "÷10" would
    raise it tenfold) and each milestone in :math:`[0, 1]` (a fraction of ``total_rounds``); ``ValueError``
    naming the argument otherwise:

    >>> step_decay_lr(1.0, 3, total_rounds=4, factor=10)
    Traceback (most recent call last):
    ...
    ValueError: factor must lie in (0, 1] (the rate is multiplied by it at each milestone; factor=0.1 divides it by 10), got 10
    """
    base_lr = check_positive("base_lr", base_lr)
    check_int("round_index", round_index)
    total = check_int("total_rounds", total_rounds, minimum=1)
    if not _is_number(factor) or not 0 < factor <= 1:
        raise ValueError("factor must lie in (0, 1] (the rate is multiplied by it at each milestone; factor=0.1 "
                         f"divides it by 10), got {plain(factor)!r}")
    if isinstance(milestones, (str, bytes)) or not hasattr(milestones, "__iter__"):
        raise ValueError(f"milestones must be a sequence of fractions of total_rounds in [0, 1], got {milestones!r}")
    milestones = list(milestones)
    for k, f in enumerate(milestones):
        if not _is_number(f) or not 0 <= f <= 1:
            raise ValueError(f"milestones[{k}] must be a fraction of total_rounds in [0, 1], got {plain(f)!r}")
    passed = sum(round_index >= max(1, math.floor(f * total + 0.5)) for f in milestones)
    return base_lr * factor ** passed


__all__ += ["step_decay_lr"]


def expected_a_norms(schedule, solver) -> np.ndarray:
    r""":math:`\mathbb E\|a_i\|_1` of every client under ``schedule`` for a local ``solver``
    (its closed form ``solver.a_norm(tau)``, averaged over the schedule's uniform draws):

    * :class:`FixedSteps` / :class:`FixedEpochs`: :math:`\|a(\tau_i)\|_1`;
    * :class:`RandomSteps`: the mean of :math:`\|a(\tau)\|_1` over :math:`\tau \in [\text{low}, \text{high}]`;
    * :class:`RandomEpochs`: the mean of :math:`\|a(E\lceil n_i/B\rceil)\|_1` over
      :math:`E \in [\text{low}, \text{high}]`.

    :math:`\sum_i p_i\,\mathbb E\|a_i\|_1` is FedNova's sample-independent
    :math:`\tau_{\text{eff}}` under client sampling (the CLI's ``--tau-eff population``;
    chapter 8 shows why one taken from the sample is biased). ``solver`` is any object with
    ``a_norm(tau)``, e.g. a :class:`fedlib.solvers.LocalSolver` (whose :math:`\|a\|_1` uses
    its own learning rate: a round-level learning-rate decay changes it only for solvers
    whose :math:`a_i` depends on :math:`\eta`, such as the proximal ones). A
    :class:`WallClock` has no closed form (its :math:`\tau_i` depend on simulated speeds).

    What it needs from ``schedule`` is the distribution of every client's :math:`\tau_i`, which it knows
    for the four schedules above only (a subclass that keeps its base class's ``local_steps`` and
    ``epochs_of`` is read as that class; one that overrides either draws other :math:`\tau_i` than the
    closed form assumes, so it is refused): a schedule of your own
    (``local_steps(round)``, the contract every engine needs) gives one round's draw, not the
    distribution, so it is refused (``ValueError``). For one, compute
    :math:`\sum_i p_i\,\mathbb E\|a_i\|_1` yourself (``solver.a_norm(tau)`` averaged over each client's
    :math:`\tau` distribution) and pass it as ``tau_eff`` to :func:`fedlib.algorithms.make_algorithm`.

    Example
    -------
    >>> from fedlib.solvers import sgd
    >>> expected_a_norms(RandomEpochs([64, 32], 32, 2, 5), sgd(0.1)).tolist()   # E[E] * ceil(n_i / 32)
    [7.0, 3.5]
    """
    if not callable(getattr(solver, "a_norm", None)):
        raise ValueError(f"solver must have an a_norm(tau) method, got {type(solver).__name__}")
    _check_closed_form_subclass(schedule)
    if isinstance(schedule, FixedSteps):
        taus = [[s] for s in schedule.steps]
    elif isinstance(schedule, RandomSteps):
        taus = [range(schedule.low, schedule.high + 1)] * schedule.num_clients
    elif isinstance(schedule, FixedEpochs):
        taus = [[schedule.epochs * int(s)] for s in schedule._spe]
    elif isinstance(schedule, RandomEpochs):
        taus = [[e * int(s) for e in range(schedule.low, schedule.high + 1)] for s in schedule._spe]
    elif isinstance(schedule, RandomLocalWork):  # its solver numbers are drawn too: E over both, with the solvers
        raise ValueError("schedule: RandomLocalWork draws each client's solver as well as its tau_i, so one solver's "
                         "E||a_i||_1 is not its clients'; fedlib.experiments.speedup.mean_a_norms(work, solvers) "
                         "averages over both (and speedup.population_tau_eff(problem, work, solvers) gives "
                         "sum_i p_i E||a_i||_1)")
    else:
        raise ValueError(f"schedule: no closed-form E||a_i||_1 for {type(schedule).__name__}: it needs the "
                         "distribution of every client's tau_i, known only for FixedSteps, RandomSteps, FixedEpochs "
                         "and RandomEpochs (a schedule's local_steps(round) gives one round's draw); for a schedule "
                         "of your own compute sum_i p_i E||a_i||_1 (solver.a_norm(tau) averaged over each client's "
                         "tau distribution) and pass it as make_algorithm(..., tau_eff=...)")
    return np.array([np.mean([solver.a_norm(int(t)) for t in ts]) for ts in taus])


def _check_closed_form_subclass(schedule) -> None:
    r"""Refuse a subclass of one of the four schedules :func:`expected_a_norms` knows that overrides ``local_steps``
    or ``epochs_of``: its closed form reads the base class's attributes (``steps``, ``low``/``high``, the batches per
    epoch), so a subclass drawing other :math:`\tau_i` got the base class's :math:`\mathbb E\|a_i\|_1` without a
    word."""
    cls = type(schedule)
    base = next((b for b in (FixedSteps, RandomSteps, FixedEpochs, RandomEpochs) if isinstance(schedule, b)), None)
    if base is None or cls is base:
        return
    changed = [name for name in ("local_steps", "epochs_of")
               if hasattr(base, name) and getattr(cls, name) is not getattr(base, name)]
    if changed:
        raise ValueError(f"schedule: {cls.__name__} overrides {' and '.join(changed)} of {base.__name__}, so its "
                         f"tau_i need not follow the closed-form E||a_i||_1 of {base.__name__}; compute sum_i p_i "
                         "E||a_i||_1 for it yourself (solver.a_norm(tau) averaged over each client's tau "
                         "distribution) and pass it as make_algorithm(..., tau_eff=...)")


def population_tau_eff(p, schedule, solver) -> float:
    r"""FedNova's sample-independent :math:`\tau_{\text{eff}} = \sum_{i=1}^m p_i\,\mathbb E\|a_i\|_1`
    over *all* clients (:func:`expected_a_norms`): pass it as ``tau_eff`` to
    :func:`fedlib.algorithms.make_algorithm` when clients are sampled (the CLI's
    ``--tau-eff population``; chapter 8 shows that a value taken from each round's sample
    is biased). ``schedule`` must be one of the four schedules :func:`expected_a_norms` knows the
    :math:`\tau_i` distribution of (a schedule of your own is refused: compute the sum for it yourself).

    ``p`` is the (m,) vector of client weights :math:`p_i = n_i/n` (summing to 1, one per client of ``schedule``);
    ``solver`` the :class:`fedlib.solvers.LocalSolver` whose :math:`\|a_i\|_1` the clients' steps give.

    Example
    -------
    >>> from fedlib.solvers import sgd
    >>> population_tau_eff([0.75, 0.25], RandomEpochs([64, 32], 32, 2, 5), sgd(0.1))   # 0.75 * 7 + 0.25 * 3.5
    6.125
    """
    from ._validate import check_probability_vector

    a = expected_a_norms(schedule, solver)
    p = check_probability_vector("p", p, size=a.size)
    return float(p @ a)


__all__ += ["expected_a_norms", "population_tau_eff"]

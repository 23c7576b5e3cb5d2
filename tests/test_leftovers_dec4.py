"""Leftovers from earlier reviews (2026-12-04): one test per fix, each failing on the code before it."""
from __future__ import annotations

import numpy as np
import pytest

from fedlib.rng import PURPOSES, generator
from fedlib.schedules import RandomSteps, WallClock


# ---------------------------------------------------------------- WallClock's own stream

def test_wallclock_speeds_come_from_their_own_stream():
    r"""rates(t)[i] = s_i e^{sigma Z}, times the straggling factor when U < straggler_prob, with Z
    then U the first two draws of generator(seed, "round_speeds", t, i)."""
    assert "round_speeds" in PURPOSES
    clock = WallClock([2.0, 8.0], round_seconds=1.0, jitter=0.5, straggler_prob=0.5, straggler_factor=0.25,
                      seed=7)
    for t in (0, 3):
        for i, s in enumerate((2.0, 8.0)):
            g = generator(7, "round_speeds", t, i)
            expected = s * np.exp(0.5 * g.standard_normal())
            if g.random() < 0.5:
                expected *= 0.25
            assert clock.rates(t)[i] == expected


def test_wallclock_speeds_are_independent_of_a_random_schedule_with_the_same_seed():
    """The clock drew its jitter from generator(seed, "local_steps", t, i), the stream of
    RandomSteps' step counts: with one seed for both, both were read from the same first 64-bit
    word. The ziggurat takes Z's sign from bit 8 of that word, and a step count uniform on
    [1, 2**32 - 1] is (almost) its low 32 bits, so bit 8 of the step count gave the sign of the
    jitter in 1,995 of 2,000 rounds. From independent streams they agree about half the time
    (binomial(2000, 1/2): 1,000 +- 22)."""
    rounds = 2000
    steps_of = RandomSteps(num_clients=1, low=1, high=2 ** 32 - 1, seed=3)
    clock = WallClock([10.0], round_seconds=1.0, jitter=1.0, seed=3)
    bit8 = np.array([(int(steps_of.local_steps(t)[0]) >> 8) & 1 for t in range(rounds)])
    slowed = np.array([clock.rates(t)[0] < 10.0 for t in range(rounds)])  # Z < 0
    agree = int(np.sum(bit8 == slowed))
    assert 900 < agree < 1100, agree


# ---------------------------------------------------------------- table1 --budget-seconds inf

def _main(argv) -> tuple:
    """``(exit status, stdout, stderr)`` of ``python -m fedlib argv``, run in this process."""
    import contextlib
    import io

    from fedlib.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code
    return rc, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("flags, message", [
    (["--budget-seconds", "inf"], "--budget-seconds must be a finite number of seconds, got inf; for no practical "
                                  "limit give one longer than the runs (e.g. 1e9)"),
    (["--budget-seconds", "1", "--continue-later", "inf"], "--continue-later must be a finite number of seconds, "
                                                           "got inf"),
])
def test_table1_refuses_an_infinite_budget(tmp_path, flags, message):
    """--budget-seconds inf (and --continue-later inf) had no documented meaning and was taken as
    "no limit": a dry run listed the runs, a real call would have trained every missing cell."""
    res = tmp_path / "results"
    rc, out, err = _main(["table1", "--results", str(res), "--dry-run", "--cells", "sgd-e2-fedavg", "--seeds", "0",
                          *flags])
    assert (rc, out) == (2, ""), (rc, out, err)
    assert err.startswith(f"python -m fedlib table1: error: {message}"), err
    assert not res.exists()


@pytest.mark.parametrize("kw, message", [
    ({"budget_seconds": float("inf")}, "budget_seconds must be a finite number of seconds, got inf"),
    ({"budget_seconds": 1.0, "continue_later": float("inf")},
     "continue_later must be a finite number >= 0 of seconds, got inf"),
])
def test_run_table1_refuses_an_infinite_budget(tmp_path, kw, message):
    import fedlib.experiments.cifar10 as C

    lines = []
    with pytest.raises(ValueError, match="^" + message):
        C.run_table1(tmp_path, seeds=(0,), cells=["sgd-e2-fedavg"], dry_run=True, log=lines.append, **kw)
    assert lines == []

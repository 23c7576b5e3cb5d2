"""Local-step schedules: τ_i = E·ceil(n_i/B), inclusive random epochs seeded per
(seed, round, client), wall-clock rounds with stragglers, step-decayed client lr, whole_steps;
and their bad inputs (NaN, inf, bool, factors and milestones out of range, wall-clock steps past int64)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fedlib import schedules as SC
from fedlib.rng import PURPOSES, generator
from fedlib.schedules import RandomSteps, WallClock, step_decay_lr, whole_steps

N = [100, 32, 33, 1, 64, 65]


def test_steps_per_epoch_and_fixed_epochs():
    np.testing.assert_array_equal(SC.steps_per_epoch(np.array(N), 32), [4, 1, 2, 1, 2, 3])
    fe = SC.FixedEpochs(N, 32, 2)
    np.testing.assert_array_equal(fe.local_steps(0), [8, 2, 4, 2, 4, 6])
    np.testing.assert_array_equal(fe.local_steps(99), fe.local_steps(0))
    np.testing.assert_array_equal(fe.epochs_of(3), [2] * 6)
    assert fe.num_clients == 6 and fe.local_steps(0).dtype == np.int64
    # the official CIFAR-10 case: n_i = 3125 images, batch 32, E = 2 -> 2 * 98 = 196
    assert SC.FixedEpochs([3125], 32, 2).local_steps(0)[0] == 196


def test_fixed_and_random_steps():
    fs = SC.FixedSteps([3, 1, 7])
    np.testing.assert_array_equal(fs.local_steps(5), [3, 1, 7])
    assert fs.num_clients == 3
    rs = SC.RandomSteps(50, 2, 4, seed=1)
    seen = np.concatenate([rs.local_steps(t) for t in range(10)])
    assert set(seen.tolist()) == {2, 3, 4}
    np.testing.assert_array_equal(rs.local_steps(3), SC.RandomSteps(50, 2, 4, seed=1).local_steps(3))


def test_random_epochs_inclusive_bounds():
    re = SC.RandomEpochs([10] * 20, 5, 2, 5, seed=0)   # 2 steps per epoch
    epochs = np.concatenate([re.epochs_of(t) for t in range(25)])  # 500 draws
    counts = {e: int(np.sum(epochs == e)) for e in range(0, 8)}
    assert counts[2] > 0 and counts[5] > 0 and counts[3] > 0 and counts[4] > 0
    assert counts[1] == 0 and counts[6] == 0 and epochs.min() >= 2 and epochs.max() <= 5
    for t in (0, 7):
        np.testing.assert_array_equal(re.local_steps(t), 2 * re.epochs_of(t))
    # roughly uniform over the four values
    assert all(abs(counts[e] / 500 - 0.25) < 0.08 for e in (2, 3, 4, 5))


def test_random_epochs_seeded_per_round_and_client():
    re = SC.RandomEpochs([40] * 30, 8, 2, 5, seed=3)
    a, b = re.epochs_of(4), SC.RandomEpochs([40] * 30, 8, 2, 5, seed=3).epochs_of(4)
    np.testing.assert_array_equal(a, b)                   # same args -> identical
    assert not np.array_equal(re.epochs_of(4), re.epochs_of(5))   # rounds differ
    assert not np.array_equal(re.epochs_of(4), SC.RandomEpochs([40] * 30, 8, 2, 5, seed=4).epochs_of(4))
    # client c's draw comes from the (seed, "local_steps", round, c) stream
    for c in (0, 17):
        assert re.epochs_of(4)[c] == generator(3, "local_steps", 4, c).integers(2, 6)
    # (client c, round t) is not (client c+1, round t-1): the sequences are not shifted copies
    rows = np.array([re.epochs_of(t) for t in range(6)])
    assert not all(np.array_equal(rows[t, :-1], rows[t - 1, 1:]) for t in range(1, 6))


def test_make_epoch_schedule_and_parse():
    assert SC.parse_epochs("2") == (2, 2)
    assert SC.parse_epochs("2-5") == (2, 5)
    assert SC.parse_epochs(3) == (3, 3)
    assert isinstance(SC.make_epoch_schedule(N, 32, "2"), SC.FixedEpochs)
    r = SC.make_epoch_schedule(N, 32, "2-5", seed=1)
    assert isinstance(r, SC.RandomEpochs) and (r.low, r.high, r.seed) == (2, 5, 1)
    assert isinstance(SC.make_epoch_schedule(N, 32, (1, 3)), SC.RandomEpochs)
    assert SC.make_epoch_schedule(N, 32, 2).epochs == 2
    for bad in ("5-2", "0", "abc", "", "2-", "1.5"):
        with pytest.raises(ValueError, match="epochs"):
            SC.parse_epochs(bad)


def test_make_epoch_schedule_names_epochs_for_nan_and_a_pair_of_three():
    """make_epoch_schedule (train_clients' epochs) names epochs for a NaN and a tuple that is not a pair. Before:
    NaN != NaN sent (nan, nan) on to RandomEpochs, whose 'low must be an integer >= 1, got nan' named no argument
    of the caller; (1, 2, 3) raised Python's 'too many values to unpack (expected 2)'."""
    with pytest.raises(ValueError, match=r"^epochs must be a whole number >= 1, got nan$"):
        SC.make_epoch_schedule(N, 32, float("nan"))
    with pytest.raises(ValueError, match=r"^epochs must be a count, a string like '2' or '2-5', or a \(low, high\) "
                                         r"pair, got \(1, 2, 3\)$"):
        SC.make_epoch_schedule(N, 32, (1, 2, 3))
    for bad in (2.5, True, 0, None):  # refused as before (FixedEpochs named epochs too); 2.0 is 2 (whole numbers)
        with pytest.raises(ValueError, match=r"^epochs must be a whole number >= 1, got "):
            SC.make_epoch_schedule(N, 32, bad)
    assert SC.make_epoch_schedule(N, 32, np.int64(2)) == SC.FixedEpochs(N, 32, 2)
    assert SC.make_epoch_schedule(N, 32, (2, 2)) == SC.FixedEpochs(N, 32, 2)


def test_make_epoch_schedule_names_epochs_for_a_reversed_pair():
    """A (low, high) pair with low > high is refused as the string '5-2' is, naming epochs: "epochs range must
    satisfy 1 <= low <= high, got (5, 2)". Before, it went on to RandomEpochs, whose "high must be >= low, got low=5,
    high=2" named no argument of train_clients' caller (who passed epochs)."""
    with pytest.raises(ValueError, match=r"^epochs range must satisfy 1 <= low <= high, got \(5, 2\)$"):
        SC.make_epoch_schedule(N, 32, (5, 2))
    assert SC.make_epoch_schedule(N, 32, (2, 5), seed=1) == SC.RandomEpochs(N, 32, 2, 5, 1)


def test_wall_clock():
    speeds = [10.0, 5.0, 1.0, 0.01]
    wc = SC.WallClock(speeds, round_seconds=2.0)
    np.testing.assert_array_equal(wc.local_steps(0), [20, 10, 2, 1])   # floor(T s), at least 1
    slow = SC.WallClock(speeds, 2.0, straggler_prob=1.0, straggler_factor=0.25)
    np.testing.assert_array_equal(slow.local_steps(0), [5, 2, 1, 1])
    mixed = SC.WallClock([100.0] * 40, 1.0, jitter=0.1, straggler_prob=0.3, straggler_factor=0.1, seed=5)
    steps = np.concatenate([mixed.local_steps(t) for t in range(5)])
    assert steps.min() >= 1
    assert np.sum(steps < 30) > 10 and np.sum(steps > 60) > 50   # stragglers take ~10x fewer steps
    np.testing.assert_array_equal(mixed.local_steps(2), SC.WallClock([100.0] * 40, 1.0, 0.1, 0.3, 0.1, seed=5).local_steps(2))
    assert not np.array_equal(mixed.local_steps(2), mixed.local_steps(3))
    assert wc.num_clients == 4


def test_wall_clock_rates_and_synchronous_round():
    """By hand: no jitter, every client straggles (factor 1/4): rates are speeds / 4; a round in
    which everyone must finish tau steps lasts max_i tau_i / rate_i."""
    wc = SC.WallClock([10.0, 5.0, 1.0], 2.0, straggler_prob=1.0, straggler_factor=0.25)
    np.testing.assert_allclose(wc.rates(3), [2.5, 1.25, 0.25])
    assert wc.seconds_to_finish(4, 3) == pytest.approx(16.0)          # the slowest: 4 / 0.25
    assert wc.seconds_to_finish([10, 5, 1], 3) == pytest.approx(4.0)  # 10/2.5 = 5/1.25 = 1/0.25
    mixed = SC.WallClock([3.0, 8.0, 20.0, 1.5], 1.5, jitter=0.3, straggler_prob=0.4, straggler_factor=0.1, seed=2)
    for t in range(20):
        r = mixed.rates(t)
        np.testing.assert_array_equal(mixed.local_steps(t), np.maximum(1, np.floor(1.5 * r)).astype(int))
        # finishing what the fixed-length round gave takes at most the round (and the 1-step floor)
        assert mixed.seconds_to_finish(mixed.local_steps(t), t) <= max(1.5, float(np.max(1 / r))) + 1e-12
        assert mixed.seconds_to_finish(2, t) == pytest.approx(float(np.max(2 / r)))
    with pytest.raises(ValueError, match="steps"):
        mixed.seconds_to_finish([1, 2], 0)
    with pytest.raises(ValueError, match="steps"):
        mixed.seconds_to_finish(0, 0)
    with pytest.raises(ValueError, match="round"):
        mixed.rates(-1)


def test_step_decay_lr():
    lr = 0.05
    assert SC.step_decay_lr(lr, 0, 100) == lr
    assert SC.step_decay_lr(lr, 49, 100) == lr
    assert SC.step_decay_lr(lr, 50, 100) == pytest.approx(lr / 10, rel=1e-14)
    assert SC.step_decay_lr(lr, 74, 100) == pytest.approx(lr / 10, rel=1e-14)
    assert SC.step_decay_lr(lr, 75, 100) == pytest.approx(lr / 100, rel=1e-14)
    assert SC.step_decay_lr(lr, 99, 100) == pytest.approx(lr / 100, rel=1e-14)
    assert SC.step_decay_lr(1.0, 10, 20, milestones=(0.5,), factor=0.5) == 0.5


# ----------------------------------------------------------------------------- expected_a_norms
def test_expected_a_norms_by_hand_for_every_schedule():
    from fedlib.schedules import FixedEpochs, FixedSteps, RandomEpochs, RandomSteps, expected_a_norms
    from fedlib.solvers import momentum_sgd, sgd

    plain, heavy = sgd(0.1), momentum_sgd(0.1, 0.5)
    # momentum 0.5: ||a(tau)||_1 = sum_{k<tau} (1 - 0.5^(k+1)) / 0.5 -> tau=1: 1, tau=2: 2.5, tau=3: 4.25
    np.testing.assert_allclose(expected_a_norms(FixedSteps([1, 3]), heavy), [1.0, 4.25], rtol=1e-15)
    np.testing.assert_allclose(expected_a_norms(RandomSteps(2, 1, 3), heavy), [2.5833333333333335] * 2, rtol=1e-15)
    # ceil(n / 4) = 3, 1, 2 steps per epoch
    np.testing.assert_array_equal(expected_a_norms(FixedEpochs([9, 4, 5], 4, 2), plain), [6.0, 2.0, 4.0])
    np.testing.assert_allclose(expected_a_norms(RandomEpochs([9, 4, 5], 4, 1, 2), plain), [4.5, 1.5, 3.0], rtol=1e-15)
    # the mean of the real draws approaches it (RandomEpochs draws E per client and round)
    sched = RandomEpochs([9, 4, 5], 4, 1, 3, seed=3)
    drawn = np.mean([sched.local_steps(t) for t in range(4000)], axis=0)
    np.testing.assert_allclose(drawn, expected_a_norms(sched, plain), rtol=0.03)
    with pytest.raises(ValueError, match="closed-form"):
        expected_a_norms(SC.WallClock([1.0, 2.0], 1.0), plain)
    with pytest.raises(ValueError, match="a_norm"):
        expected_a_norms(FixedSteps([1]), object())


def test_expected_a_norms_of_random_local_work_points_to_its_closed_form():
    """RandomLocalWork draws each client's solver number as well as its tau_i, so one solver's E||a_i||_1 is not its
    clients': expected_a_norms refuses it and names fedlib.experiments.speedup.mean_a_norms, which averages over both
    (here two solvers, sgd and momentum 0.5, tau in 1..2: (1 + 2 + 1 + 2.5) / 4 = 1.625). Before: "no closed-form
    E||a_i||_1 for RandomLocalWork", though speedup has one (noted by a helper's audit)."""
    from fedlib.experiments.speedup import mean_a_norms
    from fedlib.solvers import momentum_sgd, sgd

    work = SC.RandomLocalWork([1, 1], [2, 2], num_solvers=2, seed=0)
    with pytest.raises(ValueError, match=r"^schedule: RandomLocalWork draws each client's solver as well as its "
                                         r"tau_i.*fedlib\.experiments\.speedup\.mean_a_norms\(work, solvers\)"):
        SC.expected_a_norms(work, sgd(0.1))
    np.testing.assert_allclose(mean_a_norms(work, [sgd(0.1), momentum_sgd(0.1, 0.5)]), [1.625, 1.625], rtol=1e-15)


def test_population_tau_eff_of_a_schedule_of_your_own_says_what_it_needs():
    """A schedule of your own (local_steps(round), the contract of the engines) is refused by population_tau_eff and
    expected_a_norms with what they need (each client's tau distribution, which only the four built-in schedules
    give) and what to do instead (compute it, pass tau_eff=). Before: "schedule: no closed-form E||a_i||_1 for
    MySchedule (FixedSteps, RandomSteps, FixedEpochs or RandomEpochs)", which named neither."""
    from fedlib.schedules import population_tau_eff
    from fedlib.solvers import sgd

    class MySchedule:
        def local_steps(self, round_index):
            return np.array([1, 2])

    with pytest.raises(ValueError, match=r"^schedule: no closed-form E\|\|a_i\|\|_1 for MySchedule: it needs the "
                                         r"distribution of every client's tau_i.*local_steps\(round\) gives one "
                                         r"round's draw.*make_algorithm\(\.\.\., tau_eff=\.\.\.\)$"):
        population_tau_eff([0.5, 0.5], MySchedule(), sgd(0.1))


def test_expected_a_norms_refuses_a_subclass_that_draws_other_steps():
    """A subclass of a built-in schedule that overrides local_steps (or RandomEpochs' epochs_of) draws other tau_i
    than the closed form of its base class assumes. Before: read as the base class, so population_tau_eff returned
    FixedSteps([4, 8])'s E||a_i||_1 = (4, 8) for a schedule that halves the work (2, 4) from round 10, and
    RandomEpochs' mean over E in 2..5 for one that always runs 5 epochs, without a word. A subclass that keeps both
    methods is still read as its base class."""
    from fedlib.schedules import FixedSteps, RandomEpochs, expected_a_norms, population_tau_eff
    from fedlib.solvers import sgd

    class Halved(FixedSteps):
        def local_steps(self, round_index):
            steps = super().local_steps(round_index)
            return steps if round_index < 10 else np.maximum(1, steps // 2)

    class FiveEpochs(RandomEpochs):
        def epochs_of(self, round_index):
            return np.full(self.num_clients, 5)

    class Named(FixedSteps):  # keeps local_steps: the closed form holds
        def describe(self):
            return "fixed"

    with pytest.raises(ValueError, match=r"^schedule: Halved overrides local_steps of FixedSteps, so its tau_i need "
                                         r"not follow the closed-form E\|\|a_i\|\|_1 of FixedSteps; .*"
                                         r"make_algorithm\(\.\.\., tau_eff=\.\.\.\)$"):
        population_tau_eff([0.5, 0.5], Halved([4, 8]), sgd(0.1))
    with pytest.raises(ValueError, match=r"^schedule: FiveEpochs overrides epochs_of of RandomEpochs\b"):
        expected_a_norms(FiveEpochs([64, 32], 32, 2, 5), sgd(0.1))
    np.testing.assert_array_equal(expected_a_norms(Named([4, 8]), sgd(0.1)), [4.0, 8.0])


def test_population_tau_eff_by_hand_and_errors():
    from fedlib.schedules import FixedEpochs, population_tau_eff
    from fedlib.solvers import sgd

    # ceil(n / 4) = 3, 1, 2; E = 2: ||a||_1 = 6, 2, 4
    assert population_tau_eff([0.5, 0.25, 0.25], FixedEpochs([9, 4, 5], 4, 2), sgd(0.1)) == pytest.approx(4.5)
    with pytest.raises(ValueError, match=r"^p\b"):
        population_tau_eff([0.5, 0.5], FixedEpochs([9, 4, 5], 4, 2), sgd(0.1))
    with pytest.raises(ValueError, match=r"^p\b"):
        population_tau_eff([0.5, 0.25, 0.5], FixedEpochs([9, 4, 5], 4, 2), sgd(0.1))


def test_degenerate_random_ranges_are_fixed_and_the_default_is_the_papers_u25():
    """low == high is allowed and gives the fixed schedule; RandomEpochs' default range is the paper's
    E ~ U(2, 5), inclusive (REFERENCE §4)."""
    n = [10, 33, 64]
    for t in range(3):
        np.testing.assert_array_equal(SC.RandomSteps(3, 4, 4, seed=1).local_steps(t), [4, 4, 4])
        np.testing.assert_array_equal(SC.RandomEpochs(n, 8, 3, 3, seed=1).local_steps(t),
                                      SC.FixedEpochs(n, 8, 3).local_steps(t))
        steps, solvers = SC.RandomLocalWork([2, 5], [2, 5], num_solvers=1).draw(t)
        np.testing.assert_array_equal(steps, [2, 5])
        np.testing.assert_array_equal(solvers, [0, 0])
    default = SC.RandomEpochs([40] * 200, 8)
    assert (default.low, default.high) == (2, 5)
    epochs = np.concatenate([default.epochs_of(t) for t in range(5)])
    assert set(epochs.tolist()) == {2, 3, 4, 5}


def test_step_decay_milestones_round_half_up_and_never_at_round_zero():
    lr = 0.1
    assert [SC.step_decay_lr(lr, t, 1) for t in range(1)] == [lr]  # one round: the base rate
    assert [round(SC.step_decay_lr(lr, t, 5) / lr, 12) for t in range(5)] == [1, 1, 1, 0.1, 0.01]  # 2.5 -> 3, 3.75 -> 4
    assert [round(SC.step_decay_lr(lr, t, 4) / lr, 12) for t in range(4)] == [1, 1, 0.1, 0.01]


@pytest.mark.parametrize("round_seconds,speed", [(0.29, 100.0), (29.0, 1.0), (0.29e-3, 1e5), (2.9e4, 1e-3)])
def test_wall_clock_steps_do_not_depend_on_the_time_unit(round_seconds, speed):
    """29 steps however the round is measured: 100 * 0.29 is 28.999999999999996 in floating point, and a plain
    floor gave 28 (found by an audit of unit-dependent results); round_duration stays the round."""
    clock = SC.WallClock([speed, 2 * speed], round_seconds)
    np.testing.assert_array_equal(clock.local_steps(0), [29, 58])
    assert clock.round_duration(0) == round_seconds


def test_whole_steps_forgives_ulps_only():
    """A few ulps below a whole number count as it; anything visibly below does not."""
    assert SC.whole_steps(np.nextafter(29.0, 0.0)) == 29.0
    assert SC.whole_steps(29.0 * (1 - 1e-14)) == 28.0
    np.testing.assert_array_equal(SC.whole_steps([0.0, 0.5, 0.9999999, 3.0]), [0.0, 0.0, 0.0, 3.0])
    # the 1-step floor still makes a slow client's round last 1/rate
    slow = SC.WallClock([0.5, 10.0], 1.0)
    np.testing.assert_array_equal(slow.local_steps(0), [1, 10])
    assert slow.round_duration(0) == 2.0


# --------------------------------------------------------------------------- WallClock's own stream
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


# --------------------------------------------------------------------------- whole_steps of a bool
@pytest.mark.parametrize("work", [True, False, np.True_, np.array(True), np.array([True, False]), [2.0, True],
                                  torch.tensor(True)])
def test_whole_steps_refuses_a_bool(work):
    """Was: whole_steps(True) == 1.0 and whole_steps([2.0, True]) == [2, 1]: a bool is no amount of work."""
    with pytest.raises(ValueError, match=r"^work must be a number of steps, not a bool, got "):
        whole_steps(work)
    assert whole_steps([2.5, 1]).tolist() == [2.0, 1.0] and whole_steps(np.int64(3)) == 3.0  # numbers still pass


# --------------------------------------------------------------------------- step_decay_lr's factor and milestones
@pytest.mark.parametrize("factor", [0, -1, float("nan"), 10, True])
def test_step_decay_lr_refuses_a_factor_outside_0_1(factor):
    """step_decay_lr(0.1, 60, 100, factor=10) returned 10.0 (the rate raised tenfold by a user who read
    "divided by 10"), factor=0 a rate of 0, factor=-1 a negative rate, factor=nan a NaN rate: each was
    refused only later, by an engine's check of "lr", which does not name the factor."""
    with pytest.raises(ValueError, match=r"^factor must lie in \(0, 1\]"):
        step_decay_lr(0.1, 60, 100, factor=factor)


@pytest.mark.parametrize("milestones, where", [((1.5,), r"milestones\[0\]"), ((0.5, -1), r"milestones\[1\]"),
                                               ((float("nan"),), r"milestones\[0\]"), (0.5, "milestones"),
                                               ("0.5", "milestones")])
def test_step_decay_lr_refuses_milestones_that_are_no_fractions(milestones, where):
    """A milestone of 1.5 never decayed within the run, -1 decayed from round 1, NaN failed with numpy's
    "cannot convert float NaN to integer", and a bare 0.5 with "'float' object is not iterable"."""
    with pytest.raises(ValueError, match=rf"^{where} must be"):
        step_decay_lr(0.1, 60, 100, milestones=milestones)


def test_step_decay_lr_valid_inputs_unchanged():
    assert step_decay_lr(0.1, 60, 100) == pytest.approx(0.01, rel=1e-15)
    assert step_decay_lr(0.1, 80, 100, milestones=[0.5, 0.75], factor=1) == 0.1
    assert step_decay_lr(0.1, 1, 100, milestones=(0.0,), factor=0.5) == 0.05
    assert step_decay_lr(0.1, 99, 100, milestones=()) == 0.1


# ---------------------------------------------------- step_decay_lr, whole_steps, WallClock: NaN, inf, negative, bool
@pytest.mark.parametrize("factor", [float("nan"), float("inf"), -1.0, 0.0, True, 10.0])
def test_step_decay_lr_refuses_a_non_finite_or_out_of_range_factor(factor):
    """Was: factor = nan gave lr nan after the first milestone, -1 a negative lr, 0 a zero lr, 10 a
    growing one."""
    from fedlib.schedules import step_decay_lr

    with pytest.raises(ValueError, match="^factor must"):
        step_decay_lr(1.0, 3, total_rounds=4, factor=factor)


@pytest.mark.parametrize("milestones, match", [((float("nan"),), r"milestones\[0\]"), ((0.5, -5.0), r"milestones\[1\]"),
                                               ((1.5,), r"milestones\[0\]"), (0.5, "^milestones must be a sequence"),
                                               ("ab", "^milestones must be a sequence")])
def test_step_decay_lr_refuses_bad_milestones(milestones, match):
    """Was: a NaN milestone failed in math.floor ('cannot convert float NaN to integer'), a negative one
    decayed from round 1, a bare number failed with "'float' object is not iterable"."""
    from fedlib.schedules import step_decay_lr

    with pytest.raises(ValueError, match=match):
        step_decay_lr(1.0, 3, total_rounds=4, milestones=milestones)


def test_step_decay_lr_valid_edges_still_accepted():
    from fedlib.schedules import step_decay_lr

    assert step_decay_lr(1.0, 3, 4, factor=1.0) == 1.0       # no decay
    assert step_decay_lr(1.0, 3, 4, milestones=()) == 1.0    # no milestone
    assert step_decay_lr(1.0, 3, 4, milestones=[0.0, 1.0], factor=0.5) == 0.5   # round max(1, 0) and round 4
    assert math.isclose(step_decay_lr(0.2, 75, 100), 0.002)


@pytest.mark.parametrize("work", [float("nan"), float("inf"), -2.5, [1.0, float("nan")], "a"])
def test_whole_steps_refuses_non_finite_or_negative_work(work):
    """Was: whole_steps(nan) was nan, whole_steps(inf) inf and whole_steps(-2.5) -3.0 steps."""
    from fedlib.schedules import whole_steps

    with pytest.raises(ValueError, match="^work (must|contains)"):
        whole_steps(work)
    assert whole_steps([0.0, 100 * 0.29]).tolist() == [0.0, 29.0]


@pytest.mark.parametrize("kw", [dict(straggler_prob=True), dict(straggler_prob="a"),
                                dict(straggler_factor=True), dict(straggler_factor="a")])
def test_wall_clock_refuses_bool_or_text_probabilities(kw):
    """Was: WallClock(..., straggler_prob=True) made every client a straggler every round (True == 1.0),
    straggler_factor=True meant no slowdown; straggler_prob='a' failed with "'<=' not supported"."""
    from fedlib.schedules import WallClock

    with pytest.raises(ValueError, match=f"^{next(iter(kw))} must lie in"):
        WallClock([10.0, 2.5], 1.0, **kw)
    assert WallClock([10.0], 1.0, straggler_prob=np.float64(0.5), straggler_factor=1).straggler_prob == 0.5


def test_wallclock_steps_that_overflow_int64_are_refused(capfd):
    """speeds * round_seconds past 2**63 (or inf) was cast to int64 silently: WallClock([1e300], 1e10)
    gave -9223372036854775808 local steps (with numpy RuntimeWarnings only). Now the ValueError alone: no warning,
    nothing printed (errstate(over="print"), mutant EP21 of the negative-assertion pass, printed numpy's 'Warning:
    overflow encountered in multiply' to the C stderr and passed before)."""
    import warnings

    from fedlib.schedules import WallClock

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="speeds: client 1 would take"):
            WallClock([1.0, 1e300], 1e10).local_steps(0)
    assert capfd.readouterr() == ("", "")
    with pytest.raises(ValueError, match="speeds: client 0 would take"):
        WallClock([1e19], 1.0).local_steps(0)
    assert WallClock([0.29, 1e6], 100.0).local_steps(0).tolist() == [29, 10 ** 8]


@pytest.mark.parametrize("bad", [2.5, 2.9, True, float("inf"), float("nan"), None, 0])
def test_parse_epochs_refuses_a_number_that_is_not_a_whole_count(bad):
    """A number goes through (parse_epochs(3) == (3, 3)); int() cut 2.5 and 2.9 to (2, 2) epochs and took True as
    (1, 1) without a word (bench_synthetic(epochs=2.5) ran 2 epochs and recorded 2.5), raised OverflowError on inf
    and int()'s TypeError on None. All are a ValueError naming epochs now; a whole 2.0 is still 2."""
    with pytest.raises(ValueError, match="epochs"):
        SC.parse_epochs(bad)
    assert SC.parse_epochs(2.0) == (2, 2)


def test_whole_steps_never_adds_a_step_to_a_whole_count():
    """The nudge of 8 eps * work is a step or more from 2**49 on: whole_steps(1e15) was 1e15 + 1, whole_steps(2**60)
    2**60 + 2048 and 2**62 + 8192, and WallClock([2**60], 1.0) ran 2048 steps more than 2**60 (its counts go up to
    2**63). A whole count is itself now; a few ulps below one still counts as it."""
    for x in (1e15, 2.0 ** 53, 1e17, 2.0 ** 60, 2.0 ** 62):
        assert SC.whole_steps(x) == x
    assert SC.whole_steps(np.nextafter(2.0 ** 40, 0.0)) == 2.0 ** 40
    assert SC.WallClock([2.0 ** 60], 1.0).local_steps(0).tolist() == [2 ** 60]


def test_round_local_steps_names_what_a_users_schedule_returned():
    """A user's schedule whose local_steps returned None (no return statement), a dict or a generator was refused
    with 'schedule.local_steps(0) must give one step count per client (2 clients in p), got shape ()'; a list with a
    bool, [True, 2], ran client 0 for 1 step; a plain function given as the schedule was told to use
    'FixedSteps(<function <lambda> at 0x...>) for fixed counts'. Now the type is named (None with 'a missing return
    statement?'), the bool is refused as check_int_array refuses it, and a function is told to become an object with
    a local_steps(round) method."""
    class Own:
        def __init__(self, out):
            self.out = out

        def local_steps(self, round_index):
            return self.out

    for out, shown in ((None, r"NoneType \(a missing return statement\?\)"), ({0: 2, 1: 3}, "dict"),
                       ((k for k in (2, 3)), "generator")):
        with pytest.raises(ValueError, match=rf"^schedule\.local_steps\(0\) must give one step count per client "
                                             rf"\(2 clients in p\), got {shown}$"):
            SC.round_local_steps(Own(out), 0, 2)
    with pytest.raises(ValueError, match=r"^schedule\.local_steps\(0\) must hold whole numbers, got the bool True at index 0$"):
        SC.round_local_steps(Own([True, 2]), 0, 2)
    with pytest.raises(ValueError, match=r"^schedule must be an object with local_steps\(round\) -> \(m,\) ints \(a "
                                         r"function is no schedule: give an object whose method local_steps\(round\) "
                                         r"returns the counts, .*\), got function$"):
        SC.round_local_steps(lambda t: [2, 3], 0, 2)
    with pytest.raises(ValueError, match=r"got shape \(1,\)$"):
        SC.round_local_steps(Own([2]), 0, 2)
    for out in ([2, 3], (2, 3), [2.0, 3.0], np.array([2, 3]), torch.tensor([2, 3])):
        assert SC.round_local_steps(Own(out), 0, 2).tolist() == [2, 3]


def test_round_local_steps_scans_a_listed_schedule_without_a_python_loop():
    """round_local_steps runs once per round: a schedule returning its counts as a Python list had every entry
    scanned for a bool by a generator (and the list converted twice), 3.5 times the old time for 100 counts. Now
    the entries' types are read in one pass (no generator resumed per entry), with the same counts and the same
    refusals (a bool anywhere, a ragged list, another length)."""
    import sys

    class Own:
        def __init__(self, out):
            self.out = out

        def local_steps(self, round_index):
            return self.out

    calls = []

    def count(frame, event, arg):  # every call and C call, with the function it happens in
        calls.append(frame.f_code.co_name)

    listed = Own([2] * 999 + [3])
    sys.setprofile(count)
    try:
        got = SC.round_local_steps(listed, 0, 1000)
    finally:
        sys.setprofile(None)
    assert got.tolist() == [2] * 999 + [3] and got.dtype == np.int64
    assert len(calls) < 300, sorted(set(calls))  # before: an isinstance call per entry, in a generator
    for out in ([2, np.bool_(True)], (2, False)):
        with pytest.raises(ValueError, match=r"must hold whole numbers, got the bool (True|False) at index 1$"):
            SC.round_local_steps(Own(out), 0, 2)
    with pytest.raises(ValueError, match=r"^schedule\.local_steps\(0\) must be a 1-d array of whole numbers"):
        SC.round_local_steps(Own([2, [3, 4]]), 0, 2)
    with pytest.raises(ValueError, match=r"got shape \(3,\)$"):
        SC.round_local_steps(Own(np.array([2, 3, 4])), 0, 2)


def test_check_participant_steps_fast_path_refuses_a_negative_count_as_the_checked_path_does():
    """check_participant_steps checks anything but a 1-d int array with check_int_array (steps >= 0), and lets the
    engines' int arrays through a fast path. Before: the fast path took a negative count of a client out of the
    round (np.array([-1, 2]) with participant 1 returned [2]) that the same counts as a list were refused for
    ('steps must be >= 0 for every client (client 0 has -1)'). Now refused alike; counts >= 0 pass as before."""
    for steps in (np.array([-1, 2]), [-1, 2], np.array([-1, 2], dtype=np.int32)):
        with pytest.raises(ValueError, match=r"^steps must be >= 0 for every client \(client 0 has -1\)$"):
            SC.check_participant_steps(steps, np.array([1]), 0)
    # a client out of the round may have 0 steps, on either path: participant 1's 2 steps come back
    for steps in (np.array([0, 2]), [0, 2], np.array([0, 2], dtype=np.uint8)):
        got = SC.check_participant_steps(steps, np.array([1]), 0)
        assert got.tolist() == [2]


@pytest.mark.parametrize("name, call", [
    ("epochs", lambda n: SC.FixedEpochs(N, 32, n)),
    ("epochs", lambda n: SC.make_epoch_schedule(N, 32, n)),
    ("low", lambda n: SC.make_epoch_schedule(N, 32, (n, 5), seed=1)),
    ("high", lambda n: SC.make_epoch_schedule(N, 32, (1, n), seed=1)),
    ("low", lambda n: RandomSteps(num_clients=4, low=n, high=5, seed=1)),
    ("high", lambda n: RandomSteps(num_clients=4, low=1, high=n, seed=1)),
    ("low", lambda n: SC.RandomEpochs(N, 32, n, 5, seed=1)),
    ("high", lambda n: SC.RandomEpochs(N, 32, 1, n, seed=1)),
], ids=["FixedEpochs", "make_epoch_schedule", "make_epoch_schedule low", "make_epoch_schedule high",
        "RandomSteps low", "RandomSteps high", "RandomEpochs low", "RandomEpochs high"])
def test_scalar_step_and_epoch_counts_are_whole_numbers(name, call):
    """A step or epoch count is a whole number, scalar or array (the fedlib docstring's convention): 2.0 is 2, as
    parse_epochs(2.0), FixedSteps([2.0, 3.0]) and RandomLocalWork's low/high arrays already took it. Before:
    make_epoch_schedule(N, 32, 2.0) and FixedEpochs(N, 32, 2.0) raised "epochs must be an integer >= 1, got 2.0",
    RandomSteps / RandomEpochs "low must be an integer >= 1, got 2.0". The schedule is the same, bit for bit
    (a Python int field, the same draws); 1.5, True and NaN are still refused."""
    import pickle

    got, want = call(2.0), call(2)
    assert got == want and repr(got) == repr(want) and pickle.dumps(got) == pickle.dumps(want)
    for t in (0, 3):
        assert np.array_equal(got.local_steps(t), want.local_steps(t))
    for bad in (1.5, True, float("nan")):
        with pytest.raises(ValueError, match=rf"^{name} must be a whole number >= 1, got "):
            call(bad)


@pytest.mark.parametrize("seed", [1.5, -1, True, "0", None])
def test_random_steps_checks_its_seed_when_built(seed):
    """RandomSteps refuses a seed that is no integer >= 0 when it is built, as RandomEpochs, WallClock and
    RandomLocalWork do. Before: RandomSteps(3, 1, 2, seed=1.5) was built (its repr showing seed=1.5) and used by
    expected_a_norms / population_tau_eff, which never read the seed, and only its local_steps(0), in a run's first
    round, said 'seed must be an integer >= 0'. An integer seed draws as before (a numpy integer is stored as int)."""
    with pytest.raises(ValueError, match=r"^seed must be an integer >= 0, got "):
        RandomSteps(3, 1, 2, seed=seed)
    built = RandomSteps(3, 1, 5, seed=np.int64(4))
    assert type(built.seed) is int and built == RandomSteps(3, 1, 5, seed=4)
    expected = [int(generator(4, "local_steps", 2, i).integers(1, 6)) for i in range(3)]
    assert built.local_steps(2).tolist() == expected

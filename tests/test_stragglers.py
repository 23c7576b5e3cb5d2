"""Chapter 9's strategies (fixed-length rounds vs waiting for the slowest client): the clock
accounting by hand, the runs against the engine called directly, and the measures, with what they
refuse (negative or NaN times and targets, end fractions outside (0, 1], curves of other seeds, sync_steps a
fixed-length strategy would ignore)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fedlib.algorithms import make_algorithm
from fedlib.engines.batched import run_batched
from fedlib.experiments import stragglers as ST
from fedlib.experiments.synthetic import make_problem
from fedlib.schedules import FixedSteps, WallClock
from fedlib.solvers import sgd
from fedlib.theory import chi_square


@pytest.fixture(scope="module")
def problem():
    return make_problem(num_clients=6)


def test_make_clock_speeds_and_sync_steps():
    clock = ST.make_clock(9, seed=4, median_speed=10.0, spread=0.5, round_seconds=2.0)
    assert clock.num_clients == 9 and clock.round_seconds == 2.0 and clock.seed == 4
    np.testing.assert_array_equal(clock.speeds, ST.make_clock(9, seed=4, median_speed=10.0, spread=0.5).speeds)
    assert not np.array_equal(clock.speeds, ST.make_clock(9, seed=5, median_speed=10.0, spread=0.5).speeds)
    flat = ST.make_clock(5, spread=0.0, median_speed=7.5, round_seconds=2.0)
    np.testing.assert_allclose(flat.speeds, 7.5)
    assert ST.sync_steps_of(flat) == 15
    assert ST.sync_steps_of(WallClock([0.1, 0.2], 1.0)) == 1
    # the median client's 100 * 0.29 = 28.999999999999996 steps are 29, as 1 * 29 (not 28)
    assert ST.sync_steps_of(WallClock([100.0], 0.29)) == ST.sync_steps_of(WallClock([1.0], 29.0)) == 29
    with pytest.raises(ValueError, match="median_speed"):
        ST.make_clock(3, median_speed=0.0)
    with pytest.raises(ValueError, match="spread"):
        ST.make_clock(3, spread=-1.0)


def test_runs_are_the_engine_with_the_clock(problem):
    clock = ST.make_clock(problem.num_clients, seed=1, median_speed=6.0, round_seconds=1.0, straggler_prob=0.3)
    rounds, seeds = 4, (2, 3)
    runs = ST.run_strategies(problem, clock, rounds, seeds, lr=0.05)
    assert list(runs) == list(ST.STRATEGIES)
    tau = ST.sync_steps_of(clock)
    for strategy, c in runs.items():
        assert c.losses.shape == (2, rounds + 1) and c.seconds.shape == (2, rounds + 1) and c.chi2.shape == (2, rounds)
        assert np.all(c.seconds[:, 0] == 0) and np.all(np.diff(c.seconds, axis=1) > 0)
        for k, s in enumerate(seeds):
            run_clock = dataclasses.replace(clock, seed=s)
            if strategy == "wait-for-all":
                schedule, agg = FixedSteps([tau] * problem.num_clients), "fedavg"
                durations = [float(np.max(tau / run_clock.rates(t))) for t in range(rounds)]
            else:
                schedule, agg = run_clock, strategy.split("-")[0]
                durations = [max(1.0, float(np.max(run_clock.local_steps(t) / run_clock.rates(t)))) for t in range(rounds)]
            run = run_batched(make_algorithm(agg, sgd(0.05)), problem, schedule, rounds, batch_size=20, seed=s)
            np.testing.assert_allclose(c.losses[k], [run.initial["train_loss"]] + [h["train_loss"] for h in run.history],
                                       rtol=1e-12)
            np.testing.assert_allclose(c.seconds[k, 1:], np.cumsum(durations), rtol=1e-12)
            np.testing.assert_allclose(c.chi2[k], [chi_square(problem.p, np.array(h["weights"])) for h in run.history],
                                       atol=1e-12)
    assert np.all(runs["wait-for-all"].chi2 < 1e-12) and np.all(runs["fednova-fixed-time"].chi2 < 1e-12)
    assert np.all(runs["fedavg-fixed-time"].chi2 > 0)
    assert runs["wait-for-all"].mean_steps[0] == tau
    assert runs["fedavg-fixed-time"].label == ST.LABELS["fedavg-fixed-time"]


def test_bad_inputs(problem):
    clock = ST.make_clock(problem.num_clients)
    with pytest.raises(ValueError, match="strategy"):
        ST.run_strategy(problem, clock, "fedprox-fixed-time", 2, [0])
    with pytest.raises(ValueError, match="clock"):
        ST.run_strategy(problem, ST.make_clock(3), "wait-for-all", 2, [0])
    with pytest.raises(ValueError, match="sync_steps"):
        ST.run_strategy(problem, clock, "wait-for-all", 2, [0], sync_steps=0)
    with pytest.raises(ValueError, match="rounds"):
        ST.run_strategy(problem, clock, "wait-for-all", 0, [0])


def _curves(losses, seconds, strategy="wait-for-all"):
    losses, seconds = np.atleast_2d(losses).astype(float), np.atleast_2d(seconds).astype(float)
    return ST.StragglerCurves(strategy, tuple(range(len(losses))), losses, seconds,
                              np.zeros((len(losses), losses.shape[1] - 1)), np.ones(len(losses)))


def test_loss_at_time_to_reach_and_end_loss_by_hand():
    c = _curves([[2.0, 1.5, 1.2, 1.0, 0.9], [2.0, 1.8, 1.1, 1.05, 1.0]], [[0, 1, 3, 6, 10], [0, 2, 4, 6, 8]])
    np.testing.assert_array_equal(ST.loss_at(c, 0.5), [2.0, 2.0])
    np.testing.assert_array_equal(ST.loss_at(c, 3.0), [1.2, 1.8])   # a round finished at 3 s counts
    np.testing.assert_array_equal(ST.loss_at(c, 100), [0.9, 1.0])
    np.testing.assert_array_equal(ST.time_to_reach(c, 1.1), [6.0, 4.0])
    np.testing.assert_array_equal(ST.time_to_reach(c, 0.95), [10.0, np.inf])
    np.testing.assert_array_equal(ST.smoothed_end_loss(c, fraction=0.5), [0.95, 1.025])
    np.testing.assert_array_equal(ST.smoothed_end_loss(c, fraction=0.01), [0.9, 1.0])


def test_last_lead_round_by_hand():
    rounds = np.arange(1, 101)
    ahead = _curves(np.concatenate([[3.0], np.where(rounds <= 40, 1.0, 2.0)]), np.arange(101))
    behind = _curves(np.concatenate([[3.0], np.full(100, 1.5)]), np.arange(101))
    assert ST.last_lead_round(ahead, behind, window=1).tolist() == [40]
    assert ST.last_lead_round(behind, ahead, window=1).tolist() == [100]
    never = _curves(np.concatenate([[3.0], np.full(100, 2.0)]), np.arange(101))
    assert ST.last_lead_round(never, behind, window=5).tolist() == [0]


def test_summary_uses_the_numbers():
    wait = _curves([[2.0, 1.0, 0.5]], [[0, 10, 20]])
    avg = _curves([[2.0, 0.9, 0.8]], [[0, 1, 2]], "fedavg-fixed-time")._replace(chi2=np.array([[0.5, 0.7]]))
    nova = _curves([[2.0, 0.8, 0.6]], [[0, 1, 2]], "fednova-fixed-time")
    runs = {"wait-for-all": wait, "fedavg-fixed-time": avg, "fednova-fixed-time": nova}
    ends = {k: c.losses[:, -1] for k, c in runs.items()}
    times = {"wait-for-all": np.array([20.0]), "fedavg-fixed-time": np.array([np.inf]), "fednova-fixed-time": np.array([2.0])}
    text = ST.summary_markdown(runs, 2.0, 0.6, times, ends, np.array([0]))
    for needle in ("10.0 s", "1.00 s", "At 2 s", "2.000", "0.600", "10.0×", "0.600 on average", "0.8000", "0.6000",
                   "from the first rounds"):
        assert needle in text, needle
    text = ST.summary_markdown(runs, 2.0, 0.6, times, ends, np.array([120]))
    assert "until round 120" in text and "running mean over 25 rounds" in text
    text = ST.summary_markdown(runs, 2.0, 0.6, times, ends, np.array([120]), lead_window=7)
    assert "running mean over 7 rounds" in text  # the window last_lead_round used, not always 25


def _seeded_curves(losses, seconds, seeds=None, strategy="wait-for-all"):
    losses, seconds = np.atleast_2d(losses).astype(float), np.atleast_2d(seconds).astype(float)
    seeds = tuple(range(len(losses))) if seeds is None else tuple(seeds)
    return ST.StragglerCurves(strategy, seeds, losses, seconds, np.zeros((len(losses), losses.shape[1] - 1)),
                              np.ones(len(losses)))


def test_loss_at_refuses_a_negative_or_nan_time():
    """A time before the start (or NaN) gave the *last* round's loss: searchsorted(...) - 1 = -1 (NaN sorts last)."""
    c = _seeded_curves([[2.0, 1.5, 1.2, 1.0, 0.9]], [[0, 1, 3, 6, 10]])
    for bad in (-1.0, -1e-9, float("nan"), "3"):
        with pytest.raises(ValueError, match="seconds"):
            ST.loss_at(c, bad)
    np.testing.assert_array_equal(ST.loss_at(c, 0), [2.0])          # the start: the initial loss
    np.testing.assert_array_equal(ST.loss_at(c, np.inf), [0.9])     # after every round: the last one
    np.testing.assert_array_equal(ST.loss_at(c, np.int64(3)), [1.2])


def test_time_to_reach_refuses_a_nan_target():
    """A NaN target read as 'never reached' (inf for every seed)."""
    c = _seeded_curves([[2.0, 1.5, 1.2]], [[0, 1, 3]])
    with pytest.raises(ValueError, match="target"):
        ST.time_to_reach(c, float("nan"))
    np.testing.assert_array_equal(ST.time_to_reach(c, 1.5), [1.0])


def test_smoothed_end_loss_fraction_must_lie_in_0_1():
    """fraction 2.0 took the median over every loss *including the initial one* (1.2 here instead of at most
    the rounds' losses); fraction <= 0 silently meant the last round; NaN failed with a bare int() error."""
    c = _seeded_curves([[2.0, 1.5, 1.2, 1.0, 0.9]], [[0, 1, 3, 6, 10]])
    for bad in (0.0, -0.5, 1.5, 2.0, float("nan"), None):
        with pytest.raises(ValueError, match="fraction"):
            ST.smoothed_end_loss(c, bad)
    np.testing.assert_array_equal(ST.smoothed_end_loss(c, 1.0), [1.1])  # the 4 rounds, not the start
    np.testing.assert_array_equal(ST.smoothed_end_loss(c), [0.9])


def test_last_lead_round_compares_the_same_seeds():
    """zip() cut a 2-seed run to the 1 seed of the other, and runs of different seeds were compared as if paired."""
    ahead = _seeded_curves([[2.0, 1, 1, 1, 1], [2.0, 3, 3, 3, 3]], [[0, 1, 2, 3, 4]] * 2)
    behind = _seeded_curves([[2.0, 2, 2, 2, 2]], [[0, 1, 2, 3, 4]])
    with pytest.raises(ValueError, match="seeds"):
        ST.last_lead_round(ahead, behind, window=1)
    with pytest.raises(ValueError, match="seeds"):
        ST.last_lead_round(_seeded_curves([[2.0, 1, 1]], [[0, 1, 2]], seeds=(0,)),
                           _seeded_curves([[2.0, 2, 2]], [[0, 1, 2]], seeds=(7,)), window=1)
    both = _seeded_curves([[2.0, 2, 2, 2, 2]] * 2, [[0, 1, 2, 3, 4]] * 2)
    assert ST.last_lead_round(ahead, both, window=1).tolist() == [4, 0]


@pytest.fixture(scope="module")
def small_problem():
    return make_problem(num_clients=4)


def test_run_strategy_refuses_sync_steps_it_would_ignore(small_problem):
    """sync_steps is the tau of 'wait-for-all' only; a fixed-length strategy silently ran the clock's steps."""
    clock = ST.make_clock(small_problem.num_clients, seed=0, median_speed=4.0, round_seconds=1.0)
    for strategy in ("fedavg-fixed-time", "fednova-fixed-time"):
        with pytest.raises(ValueError, match="sync_steps"):
            ST.run_strategy(small_problem, clock, strategy, 1, [0], sync_steps=7)
    # run_strategies still takes it, for 'wait-for-all' alone
    runs = ST.run_strategies(small_problem, clock, 1, [0], sync_steps=7)
    assert runs["wait-for-all"].mean_steps.tolist() == [7.0]
    expected = np.mean(clock.local_steps(0))
    assert runs["fednova-fixed-time"].mean_steps.tolist() == [expected] != [7.0]


def test_summary_names_the_fraction_the_end_losses_came_from():
    """summary_markdown wrote "the last 5% of rounds" whatever fraction gave ``ends``."""
    c = {k: ST.StragglerCurves(k, (0,), np.array([[2.0, 1.0, 0.5]]), np.array([[0.0, 1.0, 2.0]]),
                               np.array([[0.1, 0.2]]), np.array([3.0]))
         for k in ST.STRATEGIES}
    ends = {k: ST.smoothed_end_loss(v, 0.5) for k, v in c.items()}
    times = {k: np.array([1.0]) for k in c}
    assert "last 5% of rounds" in ST.summary_markdown(c, 2.0, 0.6, times, ends, None)
    assert "last 50% of rounds" in ST.summary_markdown(c, 2.0, 0.6, times, ends, None, end_fraction=0.5)
    with pytest.raises(ValueError, match="end_fraction"):
        ST.summary_markdown(c, 2.0, 0.6, times, ends, None, end_fraction=0.0)


def test_plot_loss_vs_time_draws_every_seed_without_the_start():
    """Left: each seed's losses against its simulated seconds, right: against rounds 1..T, both without the
    initial point (time 0 has no place on the log axis); one colour per strategy, only the first seed
    labelled (one legend entry per strategy) and drawn stronger than the others."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    losses = np.array([[2.0, 1.0, 0.5], [2.0, 1.2, 0.7]])
    seconds = np.array([[0.0, 3.0, 6.0], [0.0, 4.0, 8.0]])
    runs = {s: ST.StragglerCurves(s, (0, 1), losses + k, seconds * (k + 1), np.zeros((2, 2)), np.ones(2))
            for k, s in enumerate(("wait-for-all", "fednova-fixed-time"))}
    fig, axes = plt.subplots(1, 2)
    ST.plot_loss_vs_time(axes, runs)
    left, right = axes[0].get_lines(), axes[1].get_lines()
    assert len(left) == len(right) == 4
    assert [list(line.get_xdata()) for line in left] == [[3.0, 6.0], [4.0, 8.0], [6.0, 12.0], [8.0, 16.0]]
    assert [list(line.get_ydata()) for line in left] == [[1.0, 0.5], [1.2, 0.7], [2.0, 1.5], [2.2, 1.7]]
    assert all(list(line.get_xdata()) == [1, 2] for line in right)
    assert [line.get_color() for line in left] == ["C2", "C2", "C3", "C3"]
    assert [line.get_alpha() for line in left] == [0.9, 0.35, 0.9, 0.35]
    labels = [t.get_text() for t in axes[0].get_legend().get_texts()]
    assert labels == [runs["wait-for-all"].label, runs["fednova-fixed-time"].label]
    assert axes[0].get_xscale() == "log" and axes[1].get_xscale() == "linear"
    plt.close(fig)


def test_loss_at_and_time_to_reach_take_any_real_number():
    """np.isnan(x), the NaN test, raised TypeError ("ufunc 'isnan' not supported for the input types") for an
    int from 2**64 on and for a Fraction, numbers that _is_number lets through and the comparisons take."""
    from fractions import Fraction

    c = _curves([[2.0, 1.5, 1.2, 1.0, 0.9], [2.0, 1.8, 1.1, 1.05, 1.0]], [[0, 1, 3, 6, 10], [0, 2, 4, 6, 8]])
    np.testing.assert_array_equal(ST.loss_at(c, 10 ** 20), [0.9, 1.0])        # after every round
    np.testing.assert_array_equal(ST.loss_at(c, Fraction(7, 2)), [1.2, 1.8])  # 3.5 s: rounds done at 3 s, 2 s
    np.testing.assert_array_equal(ST.time_to_reach(c, 10 ** 20), [0.0, 0.0])  # the initial loss is below it
    np.testing.assert_array_equal(ST.time_to_reach(c, Fraction(3, 2)), [1.0, 4.0])   # as for 1.5
    for bad in (float("nan"), np.float32("nan"), -(10 ** 20)):
        with pytest.raises(ValueError, match="seconds"):
            ST.loss_at(c, bad)
    with pytest.raises(ValueError, match="target"):
        ST.time_to_reach(c, np.float32("nan"))


def test_run_strategies_reads_the_seeds_once_and_run_strategy_names_them(small_problem):
    """run_strategy read seeds for every strategy: with a generator the first strategy ran and the second raised
    'seeds must name at least one run seed'; seeds=0 raised TypeError ("'int' object is not iterable")."""
    clock = ST.make_clock(small_problem.num_clients, seed=0, median_speed=4.0, round_seconds=1.0)
    runs = ST.run_strategies(small_problem, clock, 1, (s for s in [0, 1]))
    want = ST.run_strategies(small_problem, clock, 1, [0, 1])
    assert [r.seeds for r in runs.values()] == [(0, 1)] * 3
    assert all(np.array_equal(runs[k].losses, want[k].losses) for k in want)
    for bad in (0, None, "01"):
        with pytest.raises(ValueError, match="seeds must be a sequence"):
            ST.run_strategy(small_problem, clock, "wait-for-all", 1, bad)


def test_run_strategy_sync_steps_is_a_whole_number(small_problem):
    """sync_steps is a step count, a whole number (the fedlib docstring's convention): 2.0 runs the 2 steps of 2.
    Before: "sync_steps must be an integer >= 1, got 2.0". The run is the same, bit for bit; 1.5, True and NaN are
    still refused."""
    clock = ST.make_clock(small_problem.num_clients, seed=0, median_speed=4.0, round_seconds=1.0)
    got, want = (ST.run_strategy(small_problem, clock, "wait-for-all", 1, [0], sync_steps=n) for n in (2.0, 2))
    for a, b, field in zip(got, want, want._fields, strict=True):
        assert np.array_equal(a, b) and np.asarray(a).dtype == np.asarray(b).dtype, field
    assert want.mean_steps.tolist() == [2.0]
    for bad in (1.5, True, float("nan")):
        with pytest.raises(ValueError, match=r"^sync_steps must be a whole number >= 1, got "):
            ST.run_strategy(small_problem, clock, "wait-for-all", 1, [0], sync_steps=bad)


def test_smoothed_loss_at_is_the_median_of_the_last_rounds_finished_by_then():
    """The median over the last ``fraction`` of the rounds finished by ``seconds`` (at least one; the initial loss
    before the first): a one-round spike (9.0 at 3 s) no longer decides what loss_at reads; at ``inf`` it is
    smoothed_end_loss."""
    c = _curves([[3.0, 2.0, 1.0, 9.0, 1.5, 0.5], [3.0, 2.5, 2.0, 1.5, 1.0, 0.5]], [[0, 1, 2, 3, 4, 5]] * 2)
    np.testing.assert_array_equal(ST.loss_at(c, 3.5), [9.0, 1.5])
    assert ST.rounds_finished(c, 3.5).tolist() == [3, 3] and ST.rounds_finished(c, 3.0).tolist() == [3, 3]
    assert ST.rounds_finished(c, 0.5).tolist() == [0, 0] and ST.rounds_finished(c, np.inf).tolist() == [5, 5]
    np.testing.assert_array_equal(ST.smoothed_loss_at(c, 3.5, fraction=1.0), [2.0, 2.0])   # rounds 1-3
    np.testing.assert_array_equal(ST.smoothed_loss_at(c, 3.5, fraction=0.5), [5.0, 1.75])  # round(1.5) = 2: 2-3
    np.testing.assert_array_equal(ST.smoothed_loss_at(c, 4.0, fraction=0.5), [5.25, 1.25])  # rounds 3-4
    np.testing.assert_array_equal(ST.smoothed_loss_at(c, 3.5, fraction=0.01), [9.0, 1.5])  # the last round alone
    np.testing.assert_array_equal(ST.smoothed_loss_at(c, 0.5, fraction=1.0), [3.0, 3.0])   # none yet: the start
    for f in (0.05, 0.4, 1.0):
        np.testing.assert_array_equal(ST.smoothed_loss_at(c, np.inf, f), ST.smoothed_end_loss(c, f))
    with pytest.raises(ValueError, match="seconds"):
        ST.smoothed_loss_at(c, -1.0)
    with pytest.raises(ValueError, match="fraction"):
        ST.smoothed_loss_at(c, 3.0, fraction=0.0)


def test_run_strategy_records_mean_weights_and_the_tail_averaged_models_client_losses(small_problem):
    """``weights``: the rounds' w^(t) averaged, each by its tau_eff^(t) (p for wait-for-all and FedNova); ``end_client_losses``: F_i at the
    mean of the parameters after each of the last ``end_fraction`` of the rounds, from the engine run directly."""
    from fedlib.problems.logistic import unpack_params

    clock = ST.make_clock(small_problem.num_clients, seed=1, median_speed=6.0, round_seconds=1.0)
    rounds, p = 4, small_problem.p

    def keeper():  # a list and an on_round_end that appends every round's parameters to it
        kept = []
        return kept, lambda state, history, initial: kept.append(np.array(state.params))
    for strategy in ST.STRATEGIES:
        c = ST.run_strategy(small_problem, clock, strategy, rounds, [3], lr=0.05, end_fraction=0.5)
        run_clock = dataclasses.replace(clock, seed=3)
        schedule = FixedSteps([ST.sync_steps_of(clock)] * 4) if strategy == "wait-for-all" else run_clock
        kept, hook = keeper()
        run = run_batched(make_algorithm("fednova" if "nova" in strategy else "fedavg", sgd(0.05)), small_problem,
                          schedule, rounds, batch_size=20, seed=3, on_round_end=hook)
        mean = unpack_params((kept[2] + kept[3]) / 2)  # the last 2 of 4 rounds
        np.testing.assert_allclose(c.end_client_losses[0], [small_problem.client_loss(mean, i) for i in range(4)],
                                   rtol=1e-12)
        assert c.end_rounds == 2
        if strategy == "fedavg-fixed-time":
            # each round's w^(t) = p tau^(t) / (p . tau^(t)) counted by its tau_eff^(t) = p . tau^(t): the steps summed
            steps = np.sum([h["local_steps"] for h in run.history], axis=0)
            np.testing.assert_allclose(c.weights[0], p * steps / (p @ steps), rtol=1e-12)
            assert np.max(np.abs(c.weights[0] - p)) > 1e-3
            # not the plain mean of the rounds' w^(t), which differs where tau_eff^(t) varies between rounds
            assert np.max(np.abs(c.weights[0] - np.mean([h["weights"] for h in run.history], axis=0))) > 1e-6
        else:
            np.testing.assert_allclose(c.weights[0], p, rtol=1e-12)
        last = ST.run_strategy(small_problem, clock, strategy, rounds, [3], lr=0.05, end_fraction=0.01)
        np.testing.assert_allclose(last.end_client_losses[0],
                                   [small_problem.client_loss(run.params, i) for i in range(4)], rtol=1e-12)
        assert last.end_rounds == 1  # 1% of 4 rounds: at least the last one
    with pytest.raises(ValueError, match="end_fraction"):
        ST.run_strategy(small_problem, clock, "wait-for-all", 2, [0], end_fraction=0.0)


def _ends(client_losses, weights, seeds=None, strategy="fedavg-fixed-time"):
    client_losses = np.atleast_2d(np.asarray(client_losses, dtype=float))
    seeds = tuple(range(len(client_losses))) if seeds is None else tuple(seeds)
    return _seeded_curves([[1.0, 0.5]] * len(client_losses), [[0, 1]] * len(client_losses), seeds, strategy)._replace(
        weights=np.atleast_2d(np.asarray(weights, dtype=float)), end_client_losses=client_losses)


def test_objective_shift_and_its_spread_by_hand():
    """p = (1/2, 1/2), FedAvg's mean weights (3/4, 1/4): sum_i (p_i - w_i)(F_i(x_avg) - F_i(x_nova)) with F(avg) =
    (1, 3) and F(nova) = (2, 2) is (-1/4)(-1) + (1/4)(1) = 1/2, = [F(x_avg) - F(x_nova)] - [F~(x_avg) - F~(x_nova)];
    a FedAvg that favours the client it weights more is positive, the mirror image negative. The spread: the same
    sum between two runs of one strategy, the largest in magnitude."""
    p = np.array([0.5, 0.5])
    avg = _ends([[1.0, 3.0], [1.0, 2.0]], [[0.75, 0.25], [0.5, 0.5]])
    nova = _ends([[2.0, 2.0], [2.0, 2.0]], [p, p], strategy="fednova-fixed-time")
    np.testing.assert_allclose(ST.objective_shift(avg, nova, p), [0.5, 0.0], atol=1e-15)
    w = np.array([0.75, 0.25])
    gap = (p @ [1.0, 3.0] - p @ [2.0, 2.0]) - (w @ [1.0, 3.0] - w @ [2.0, 2.0])
    assert ST.objective_shift(avg, nova, p)[0] == pytest.approx(gap, abs=1e-15)
    mirror = _ends([[3.0, 1.0]], [[0.75, 0.25]])
    assert ST.objective_shift(mirror, _ends([[2.0, 2.0]], [p], strategy="fednova-fixed-time"), p)[0] == -0.5
    # spread: seeds 0, 1 of FedAvg differ by (0, 1): |(-1/4)(0) + (1/4)(-1)| from seed 0's weights, 0 from seed 1's
    # (its weights are p); FedNova's two runs agree
    assert ST.objective_shift_spread(avg, nova, p) == pytest.approx(0.25, abs=1e-15)
    nova2 = _ends([[2.0, 2.0], [2.0, 1.0]], [p, p], strategy="fednova-fixed-time")
    assert ST.objective_shift_spread(avg, nova2, p) == pytest.approx(0.25, abs=1e-15)
    nova3 = _ends([[2.0, 2.0], [3.0, 1.0]], [p, p], strategy="fednova-fixed-time")  # (-1/4)(-1) + (1/4)(1), seed 0
    assert ST.objective_shift_spread(avg, nova3, p) == pytest.approx(0.5, abs=1e-15)


def test_objective_shift_refuses_what_it_cannot_compare():
    p = np.array([0.5, 0.5])
    avg = _ends([[1.0, 3.0], [1.0, 2.0]], [[0.75, 0.25], [0.5, 0.5]])
    nova = _ends([[2.0, 2.0], [2.0, 2.0]], [p, p], strategy="fednova-fixed-time")
    with pytest.raises(ValueError, match="fedavg: curves without end_client_losses"):
        ST.objective_shift(avg._replace(end_client_losses=None), nova, p)
    with pytest.raises(ValueError, match="fednova: curves without end_client_losses"):
        ST.objective_shift(avg, nova._replace(weights=None), p)
    with pytest.raises(ValueError, match="seeds"):
        ST.objective_shift(avg, nova._replace(seeds=(0, 5)), p)
    with pytest.raises(ValueError, match="p: "):
        ST.objective_shift(avg, nova, np.array([0.2, 0.3, 0.5]))
    with pytest.raises(ValueError, match="at least two seeds"):
        ST.objective_shift_spread(_ends([[1.0, 3.0]], [[0.75, 0.25]]), _ends([[2.0, 2.0]], [p]), p)
    # models averaged over other windows are not compared (the chapter runs both strategies with one end_fraction)
    with pytest.raises(ValueError, match="last 10 rounds, fedavg's over 20"):
        ST.objective_shift(avg._replace(end_rounds=20), nova._replace(end_rounds=10), p)
    assert ST.objective_shift(avg._replace(end_rounds=20), nova._replace(end_rounds=20), p).tolist() == \
        ST.objective_shift(avg, nova, p).tolist()


def test_summary_writes_the_shift_and_the_lead_to_the_end():
    c = {k: ST.StragglerCurves(k, (0, 1), np.array([[2.0, 1.0, 0.5]] * 2), np.array([[0.0, 1.0, 2.0]] * 2),
                               np.array([[0.1, 0.2]] * 2), np.array([3.0] * 2))
         for k in ST.STRATEGIES}
    ends = {k: ST.smoothed_end_loss(v) for k, v in c.items()}
    times = {k: np.array([1.0, 1.0]) for k in c}
    text = ST.summary_markdown(c, 2.0, 0.6, times, ends, np.array([2, 0]), shift=np.array([0.1234, 0.05]),
                               spread=0.0071)
    assert "was 0.1234, 0.0500 per seed, against at most 0.0071 between two runs" in text
    # at 2.0 s each strategy has finished 2 rounds (the window of the median, 5 % of them, is the last one)
    assert "its loss was 0.500 after 2 rounds, against 0.500 for FedNova with fixed-length rounds after 2 (" in text
    # the window the models were averaged over, as the curves record it (run_strategy's end_rounds)
    averaged = {k: v._replace(end_rounds=20) for k, v in c.items()}
    assert "per seed (each model averaged over its last 20 rounds), against at most 0.0071" in ST.summary_markdown(
        averaged, 2.0, 0.6, times, ends, None, shift=np.array([0.1234, 0.05]), spread=0.0071)
    assert "until round 2, 0 (per seed; 0: never, 2: to the end)" in text
    assert "against at most" not in ST.summary_markdown(c, 2.0, 0.6, times, ends, None, shift=np.array([0.1, 0.2]))
    assert "drifts towards its surrogate" not in ST.summary_markdown(c, 2.0, 0.6, times, ends, None)

"""Audit of chapter 9's measures (fedlib.experiments.stragglers) and of fedlib.anatomy's softmax client:
bad arguments that used to give a silently wrong number now raise a ValueError naming them."""
import numpy as np
import pytest

from fedlib import anatomy
from fedlib.experiments import stragglers as ST
from fedlib.experiments.synthetic import make_problem


def _curves(losses, seconds, seeds=None, strategy="wait-for-all"):
    losses, seconds = np.atleast_2d(losses).astype(float), np.atleast_2d(seconds).astype(float)
    seeds = tuple(range(len(losses))) if seeds is None else tuple(seeds)
    return ST.StragglerCurves(strategy, seeds, losses, seconds, np.zeros((len(losses), losses.shape[1] - 1)),
                              np.ones(len(losses)))


def test_loss_at_refuses_a_negative_or_nan_time():
    """A time before the start (or NaN) gave the *last* round's loss: searchsorted(...) - 1 = -1 (NaN sorts last)."""
    c = _curves([[2.0, 1.5, 1.2, 1.0, 0.9]], [[0, 1, 3, 6, 10]])
    for bad in (-1.0, -1e-9, float("nan"), "3"):
        with pytest.raises(ValueError, match="seconds"):
            ST.loss_at(c, bad)
    np.testing.assert_array_equal(ST.loss_at(c, 0), [2.0])          # the start: the initial loss
    np.testing.assert_array_equal(ST.loss_at(c, np.inf), [0.9])     # after every round: the last one
    np.testing.assert_array_equal(ST.loss_at(c, np.int64(3)), [1.2])


def test_time_to_reach_refuses_a_nan_target():
    """A NaN target read as 'never reached' (inf for every seed)."""
    c = _curves([[2.0, 1.5, 1.2]], [[0, 1, 3]])
    with pytest.raises(ValueError, match="target"):
        ST.time_to_reach(c, float("nan"))
    np.testing.assert_array_equal(ST.time_to_reach(c, 1.5), [1.0])


def test_smoothed_end_loss_fraction_must_lie_in_0_1():
    """fraction 2.0 took the median over every loss *including the initial one* (1.2 here instead of at most
    the rounds' losses); fraction <= 0 silently meant the last round; NaN failed with a bare int() error."""
    c = _curves([[2.0, 1.5, 1.2, 1.0, 0.9]], [[0, 1, 3, 6, 10]])
    for bad in (0.0, -0.5, 1.5, 2.0, float("nan"), None):
        with pytest.raises(ValueError, match="fraction"):
            ST.smoothed_end_loss(c, bad)
    np.testing.assert_array_equal(ST.smoothed_end_loss(c, 1.0), [1.1])  # the 4 rounds, not the start
    np.testing.assert_array_equal(ST.smoothed_end_loss(c), [0.9])


def test_last_lead_round_compares_the_same_seeds():
    """zip() cut a 2-seed run to the 1 seed of the other, and runs of different seeds were compared as if paired."""
    ahead = _curves([[2.0, 1, 1, 1, 1], [2.0, 3, 3, 3, 3]], [[0, 1, 2, 3, 4]] * 2)
    behind = _curves([[2.0, 2, 2, 2, 2]], [[0, 1, 2, 3, 4]])
    with pytest.raises(ValueError, match="seeds"):
        ST.last_lead_round(ahead, behind, window=1)
    with pytest.raises(ValueError, match="seeds"):
        ST.last_lead_round(_curves([[2.0, 1, 1]], [[0, 1, 2]], seeds=(0,)),
                           _curves([[2.0, 2, 2]], [[0, 1, 2]], seeds=(7,)), window=1)
    both = _curves([[2.0, 2, 2, 2, 2]] * 2, [[0, 1, 2, 3, 4]] * 2)
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


def test_softmax_client_checks_params_and_samples():
    """params one entry short of num_params gave a gradient of another length (its bias broadcast); a client
    without samples, or an empty idx, gave a zero gradient for an undefined mean."""
    rng = np.random.default_rng(0)
    client = anatomy.SoftmaxRegressionClient(rng.standard_normal((10, 3)), rng.integers(0, 2, 10), 2)
    assert client.num_params == 8
    for bad in (np.zeros(7), np.zeros(9), np.zeros((8, 1))):
        with pytest.raises(ValueError, match="params"):
            client.full_grad(bad)
    with pytest.raises(ValueError, match="params"):
        client.grad(np.zeros(7), 0)
    with pytest.raises(ValueError, match="idx"):
        client.full_grad(np.zeros(8), idx=np.array([], dtype=int))
    with pytest.raises(ValueError, match="at least one sample"):
        anatomy.SoftmaxRegressionClient(np.zeros((0, 3)), np.zeros(0, dtype=int), 2)
    assert client.full_grad(np.zeros(8)).shape == (8,)
    np.testing.assert_allclose(client.full_grad(list(np.zeros(8))), client.full_grad(np.zeros(8)))


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

"""Argument checks of the speedup, bounds and stragglers experiments: each bad argument raises a ValueError
naming it (local work for another number of clients, weights, a running-mean window, an empty seed list)."""
import numpy as np
import pytest

from fedlib.experiments import bounds
from fedlib.experiments import speedup as S
from fedlib.experiments import stragglers as ST
from fedlib.schedules import RandomLocalWork


def _curves(losses):
    losses = np.atleast_2d(np.asarray(losses, dtype=float))
    return ST.StragglerCurves("fedavg-fixed-time", (0,), losses, np.zeros_like(losses),
                              np.zeros((1, losses.shape[1] - 1)), np.ones(1))


def test_local_work_for_another_number_of_clients_is_refused_by_name():
    base, _ = S.base_setup(seed=0)
    work5 = RandomLocalWork([1] * 5, [4] * 5, num_solvers=4, seed=0)
    solvers = S.make_solvers(0.001)
    with pytest.raises(ValueError, match="^work: local work for 5 clients, the problem has 4"):
        bounds.theorem3_check(base, work5, solvers, 10, replicas=1)
    for call in (lambda: S.time_averaged_surrogate(base, work5, solvers),
                 lambda: S.population_tau_eff(base, work5, solvers),
                 lambda: S.consistency_sweep(base, work5, [10]),
                 lambda: S.speedup_grid(base, work5, [1], [10], replicas=2),
                 lambda: S.sampling_grid(base, work5, [1], [2], [10], replicas=1, seeds=2),
                 lambda: S.sampling_bias(base, work5, [2], [10], seeds=2)):
        with pytest.raises(ValueError, match="^work: "):
            call()


def test_objective_gap_names_its_weights():
    problem, _ = bounds.default_setup(seed=0)
    for bad in (np.ones(8), np.r_[-1.0, 2.0, np.zeros(6)], np.ones(3) / 3):
        with pytest.raises(ValueError, match="^weights"):
            bounds.objective_gap(problem, bad)


def test_last_lead_round_window_is_checked():
    a = _curves(np.r_[5.0, np.linspace(1.0, 2.0, 10)])
    b = _curves(np.r_[5.0, np.full(10, 1.5)])
    assert ST.last_lead_round(a, b, window=5).tolist() == [7]
    for bad in (0, -1, 11, 25):
        with pytest.raises(ValueError, match="window"):
            ST.last_lead_round(a, b, window=bad)


def test_run_strategy_needs_a_seed():
    from fedlib.experiments.synthetic import make_problem
    problem = make_problem()
    with pytest.raises(ValueError, match="seeds"):
        ST.run_strategy(problem, ST.make_clock(problem.num_clients), "fednova-fixed-time", 2, [])

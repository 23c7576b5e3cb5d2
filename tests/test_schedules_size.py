"""A schedule built for another number of clients is refused before any round runs, naming where the run's
number of clients comes from (fedlib.schedules.check_schedule_size). Before, run_quadratic and the acceleration
experiments reported it after round 0's draw as 'schedule.local_steps(0) must give one step count per client
(3 clients in p)', naming a p the caller never gave (run_quadratic takes p from the problem), and
iterate_round_maps, which read schedule.local_steps itself, said 'local_steps must have 3 entries' or failed
with an AttributeError on a list."""
from __future__ import annotations

import numpy as np
import pytest

from fedlib.algorithms import make_algorithm
from fedlib.engines.reference import run_sequential
from fedlib.experiments import acceleration as A
from fedlib.experiments.quadratic import run_quadratic
from fedlib.problems import random_quadratic
from fedlib.schedules import (FixedEpochs, FixedSteps, RandomEpochs, RandomSteps, WallClock, check_schedule_size,
                              round_local_steps)
from fedlib.solvers import sgd
from torch_threads import one_torch_thread  # noqa: F401 (autouse fixture)


class _Counted:
    """A schedule of the user's own that calls itself for some number of clients, or not (None)."""

    def __init__(self, steps, num_clients=None):
        self.steps = np.asarray(steps)
        if num_clients is not None:
            self.num_clients = num_clients

    def local_steps(self, round_index):
        self.calls = getattr(self, "calls", 0) + 1
        return self.steps


@pytest.fixture(scope="module")
def problem():
    return random_quadratic(num_clients=3, dim=4, seed=0)


@pytest.mark.parametrize("schedule", [FixedSteps([2, 3]), RandomSteps(num_clients=2, low=1, high=3, seed=0),
                                      FixedEpochs([4, 6], batch_size=2, epochs=1),
                                      RandomEpochs([4, 6], batch_size=2, low=1, high=2, seed=0),
                                      WallClock([1.0, 2.0], 3.0)],
                         ids=["FixedSteps", "RandomSteps", "FixedEpochs", "RandomEpochs", "WallClock"])
def test_every_schedule_of_fedlib_is_checked_by_its_size(schedule):
    check_schedule_size(schedule, 2)
    with pytest.raises(ValueError, match=r"^schedule is for 2 clients but p has 3$"):
        check_schedule_size(schedule, 3)
    with pytest.raises(ValueError, match=r"^runs\[1\]\.schedule is for 2 clients but the problem has 1$"):
        check_schedule_size(schedule, 1, "the problem", name="runs[1].schedule")


def test_a_schedule_without_a_size_is_left_to_the_rounds():
    """Only an integer num_clients is compared (a bool or a string is not a count the schedule claims); a schedule
    with none passes, and round_local_steps checks what it returns, naming the owner it is given."""
    for k in (None, True, "2", 2.0):
        check_schedule_size(_Counted([2, 3], k), 3)
    check_schedule_size(_Counted([2, 3], np.int64(3)), 3)
    with pytest.raises(ValueError, match=r"^schedule is for 2 clients but p has 3$"):
        check_schedule_size(_Counted([2, 3], np.int64(2)), 3)
    with pytest.raises(ValueError, match=r"\(3 clients in the problem\), got shape \(2,\)$"):
        round_local_steps(_Counted([2, 3]), 0, 3, "the problem")
    with pytest.raises(ValueError, match=r"^schedule must be an object with local_steps\(round\)"):
        check_schedule_size([2, 3, 4], 3)


def test_run_quadratic_names_the_problem_before_any_round(problem):
    schedule = _Counted([2, 3], num_clients=2)
    with pytest.raises(ValueError, match=r"^schedule is for 2 clients but the problem has 3$"):
        run_quadratic(problem, "fednova", 0.01, schedule, 3)
    assert not hasattr(schedule, "calls")  # refused before round 0 drew its steps
    # a schedule without a size still fails at round 0, now naming the problem's clients... through run_sequential,
    # whose p is the problem's
    with pytest.raises(ValueError, match=r"\(3 clients in p\), got shape \(2,\)$"):
        run_quadratic(problem, "fednova", 0.01, _Counted([2, 3]), 3)


@pytest.mark.parametrize("fn", [A.iterate_round_maps, A.run_variant, A.compare_with_closed_form],
                         ids=lambda f: f.__name__)
def test_the_acceleration_experiments_name_the_problem(problem, fn):
    with pytest.raises(ValueError, match=r"^schedule is for 2 clients but the problem has 3$"):
        fn(problem, "fednova", 0.01, FixedSteps([2, 3]), 3)


def test_iterate_round_maps_checks_what_the_schedule_returns(problem):
    """iterate_round_maps read schedule.local_steps itself: a list failed with an AttributeError, 2.9 steps were
    passed on; it now goes through round_local_steps as the engines do."""
    with pytest.raises(ValueError, match=r"^schedule must be an object with local_steps\(round\)"):
        A.iterate_round_maps(problem, "fednova", 0.01, [2, 3, 4], 3)
    with pytest.raises(ValueError, match=r"^schedule\.local_steps\(0\) must hold whole numbers"):
        A.iterate_round_maps(problem, "fednova", 0.01, _Counted([2, 2.9, 3]), 3)
    with pytest.raises(ValueError, match=r"\(3 clients in the problem\), got shape \(2,\)$"):
        A.iterate_round_maps(problem, "fednova", 0.01, _Counted([2, 3]), 3)
    # the closed form still agrees with the run on a valid schedule
    cmp = A.compare_with_closed_form(problem, "fednova", 0.01, FixedSteps([2, 3, 4]), 5)
    assert cmp.max_relative_difference < 1e-12


def test_run_sequential_checks_the_size_up_front(problem):
    schedule = _Counted([2, 3], num_clients=2)
    with pytest.raises(ValueError, match=r"^schedule is for 2 clients but p has 3$"):
        run_sequential(make_algorithm("fedavg", sgd(0.01)), np.zeros(4), problem.grad_fn(), problem.p, schedule, 2)
    assert not hasattr(schedule, "calls")


def test_stacked_engine_names_the_runs_clients():
    from fedlib.data.cifar10 import load_cifar10_sample
    from fedlib.engines.stacked import RunSpec, StackedEngine
    from fedlib.models import vgg11

    d = load_cifar10_sample()
    run = RunSpec(make_algorithm("fedavg", sgd(0.05)), [np.arange(4), np.arange(4, 8)], FixedSteps([1, 1, 1]))
    with pytest.raises(ValueError, match=r"^runs\[0\]\.schedule is for 3 clients but runs\[0\]\.clients has 2$"):
        StackedEngine(vgg11(width=1 / 32, seed=0), d, [run], rounds=1, batch_size=4)
    run = RunSpec(make_algorithm("fedavg", sgd(0.05)), [np.arange(4), np.arange(4, 8)], _Counted([1, 1, 1]))
    with pytest.raises(ValueError, match=r"^runs\[0\]\.schedule\.local_steps\(0\) must give one step count per "
                                         r"client \(2 clients in runs\[0\]\.clients\), got shape \(3,\)$"):
        StackedEngine(vgg11(width=1 / 32, seed=0), d, [run], rounds=1, batch_size=4)

"""Argument checks of the speedup, bounds and stragglers experiments: each bad argument raises a ValueError
naming it (local work for another number of clients, weights, a running-mean window, an empty seed list,
rounds and sample sizes that are not integers, empty lists, algorithms given as one string, objective_gap's
starting point, equal_budget_ratios' algorithm and rtol)."""
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



def test_theorem3_check_and_the_speedup_closed_forms_refuse_work_with_one_check():
    """bounds.theorem3_check and speedup's closed forms check ``work`` with one function
    (``fedlib.schedules._check_local_work``): a step schedule is refused by both in one form, 'work must be a
    fedlib.schedules.RandomLocalWork (<what the caller reads>), got <type>, which has no <attributes>; <what to do>',
    each naming the attributes it reads that the schedule lacks, and local work for another number of clients in the
    same words. Before, each module had its own copy of the check, and speedup's message had another form ('...
    RandomLocalWork: this module's closed forms ... which FixedSteps does not have (no low, ...)')."""
    from fedlib.problems import random_quadratic
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd

    problem = random_quadratic(2, 2, seed=0, spread=1.0)
    calls = {"bounds": lambda w: bounds.theorem3_check(problem, w, [sgd(0.01)], 2, replicas=1),
             "speedup": lambda w: S.replicate(problem, w, 2)}
    reads = {"bounds": (r"each round's steps and solver numbers", "draw, num_solvers",
                        r"fixed steps tau_i are RandomLocalWork\(steps, steps\)"),
             "speedup": (r"fedlib\.experiments\.speedup's closed forms, E\|\|a_i\|\|_1 and E tau_i, read its uniform "
                         r"ranges low, high and num_solvers", "low, high, num_solvers, mean_steps, draw",
                         r"a schedule of your own with local_steps\(round\) runs in "
                         r"fedlib\.engines\.quadratic\.run_replicas with one solver \(pass the tau_eff you computed\)")}
    for name, call in calls.items():
        what, missing, hint = reads[name]
        with pytest.raises(ValueError, match=rf"^work must be a fedlib\.schedules\.RandomLocalWork \({what}\), got "
                                             rf"FixedSteps, which has no {missing}; {hint}$"):
            call(FixedSteps([1, 2]))
        with pytest.raises(ValueError, match=r"^work: local work for 3 clients, the problem has 2$"):
            call(RandomLocalWork([1, 1, 1], [2, 2, 2], 1, 0))

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


def test_a_solver_factory_with_too_few_solvers_is_refused_by_name(setup):
    """Every sweep that builds its solvers with solver_factory(lr) needs one solver per solver number the work draws
    (4 in base_setup's): a factory giving one is refused naming solver_factory. Before: speedup_grid, sampling_grid
    and sampling_bias failed inside the run as "work.draw(0): solver numbers must be in 0..0", consistency_sweep
    said "solvers: ...", an argument it does not have (noted by a helper's audit)."""
    from fedlib.solvers import sgd

    problem, work = setup
    one = {"solver_factory": lambda lr: [sgd(lr)]}
    said = r"^solver_factory: work draws among 4 solvers, solver_factory\([0-9.]+\) gave 1$"
    for call in (lambda: S.speedup_grid(problem, work, [1], [2], replicas=1, **one),
                 lambda: S.consistency_sweep(problem, work, [1], **one),
                 lambda: S.sampling_grid(problem, work, [1], [2], [2], **one),
                 lambda: S.sampling_bias(problem, work, [2], [2], **one)):
        with pytest.raises(ValueError, match=said):
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


@pytest.fixture(scope="module")
def setup():
    return S.base_setup(seed=0, dim=3)


@pytest.mark.parametrize("bad", [50.7, 50.0, 0, -3, "50", None])
def test_rounds_must_be_integers(setup, bad):
    base, work = setup
    calls = {
        "consistency_sweep": lambda: S.consistency_sweep(base, work, [10, bad]),
        "speedup_grid": lambda: S.speedup_grid(base, work, [1], [10, bad], replicas=2),
        "sampling_grid": lambda: S.sampling_grid(base, work, [1], [2], [bad], replicas=1, seeds=2),
        "sampling_bias": lambda: S.sampling_bias(base, work, [2], [bad], seeds=2),
    }
    for call in calls.values():
        with pytest.raises(ValueError, match=r"^rounds_list\[\d\] must be an integer >= 1"):
            call()


@pytest.mark.parametrize("bad", [2.9, 0])
def test_sampling_bias_clients_per_round_must_be_integers(setup, bad):
    base, work = setup
    with pytest.raises(ValueError, match=r"^clients_per_round\[0\] must be an integer >= 1"):
        S.sampling_bias(base, work, [bad], [10], seeds=2)


def test_empty_lists_are_refused(setup):
    base, work = setup
    for name, call in {
        "rounds_list": lambda: S.consistency_sweep(base, work, []),
        "copies_list": lambda: S.speedup_grid(base, work, [], [10], replicas=2),
        "algorithms": lambda: S.speedup_grid(base, work, [1], [10], replicas=2, algorithms=()),
        "clients_per_round": lambda: S.sampling_grid(base, work, [1], [], [10], replicas=1, seeds=2),
    }.items():
        with pytest.raises(ValueError, match=f"^{name} must "):
            call()


def test_algorithms_given_as_one_string_is_refused_by_name(setup):
    base, work = setup
    with pytest.raises(ValueError, match="^algorithms must be a sequence of names"):
        S.speedup_grid(base, work, [1], [10], replicas=2, algorithms="fednova")


def test_valid_integer_types_still_run(setup):
    base, work = setup
    rows = S.speedup_grid(base, work, (np.int64(1),), np.array([12]), replicas=2)
    assert [(r.clients, r.rounds) for r in rows] == [(4, 12)]
    assert isinstance(rows[0].rounds, int)


def test_objective_gap_checks_its_starting_point():
    problem, _ = bounds.default_setup(seed=0, dim=3)
    ones = bounds.objective_gap(problem, problem.p, np.ones(3))
    assert bounds.objective_gap(problem, problem.p, [1, 1, 1]) == ones  # ints are fine
    for bad in (1.0, np.ones(4), np.ones((3, 1)), np.ones((1, 3)), [np.nan] * 3):
        with pytest.raises(ValueError, match="^x0"):
            bounds.objective_gap(problem, problem.p, bad)


def test_equal_budget_ratios_checks_algorithm_and_rtol():
    rows = [S.SpeedupRow("fednova", 4, 100, 5.0, 0.1, 1.0, 0.0), S.SpeedupRow("fednova", 16, 25, 5.0, 0.1, 1.2, 0.0)]
    assert S.equal_budget_ratios(rows)[0][2] == pytest.approx(1.2)
    with pytest.raises(ValueError, match="^algorithm"):
        S.equal_budget_ratios(rows, algorithm="fednvoa")
    with pytest.raises(ValueError, match="^rtol"):
        S.equal_budget_ratios(rows, rtol=-0.1)


def test_plot_consistency_refuses_no_rows_by_name():
    """Before: an IndexError ('list index out of range', from rows[-1].floor) after the left panel was drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2)
    try:
        with pytest.raises(ValueError, match="^rows: plot_consistency needs at least one ConsistencyRow, got none$"):
            S.plot_consistency(axes, [])
    finally:
        plt.close(fig)


def test_plot_sampling_refuses_no_rows_by_name():
    """Before: max()'s ValueError 'max() arg is an empty sequence', naming nothing."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2)
    try:
        with pytest.raises(ValueError, match="^rows: plot_sampling needs at least one SamplingRow, got none$"):
            S.plot_sampling(axes, [], 16)
    finally:
        plt.close(fig)


def test_plot_loss_vs_time_names_unknown_strategies_and_the_wrong_number_of_axes():
    """Before: a key of runs outside STRATEGIES was a bare KeyError ('other') and one axis an IndexError
    ('list index out of range') after the left panel was drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = _curves([[1.0, 0.5, 0.25]])
    fig, axes = plt.subplots(1, 2)
    try:
        with pytest.raises(ValueError, match=r"^runs: keys must be among STRATEGIES .*, got \['other'\]$"):
            ST.plot_loss_vs_time(axes, {"other": curves})
        with pytest.raises(ValueError, match=r"^axes: plot_loss_vs_time draws two panels \(seconds, rounds\), got 1 axes$"):
            ST.plot_loss_vs_time(axes[:1], {"fedavg-fixed-time": curves})
        assert all(not ax.lines for ax in axes)
    finally:
        plt.close(fig)

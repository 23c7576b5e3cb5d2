"""fedlib.experiments.synthetic (chapter 4's Synthetic(1,1) runs): make_problem forwards every
parameter of the generator and refuses unknown ones, run_setting's batch size reaches FedNova's population
tau_eff, and the FedProx factory takes the lr that lr_sweep passes."""
from __future__ import annotations

import numpy as np
import pytest

from fedlib.data.synthetic import synthetic
from fedlib.experiments import synthetic as S
from fedlib.solvers import sgd


def test_make_problem_forwards_every_synthetic_parameter_and_refuses_unknown():
    # dim, num_classes and iid were silently dropped (only alpha, beta, num_clients reached synthetic())
    prob = S.make_problem(num_clients=3, dim=5, num_classes=3, iid=True)
    assert (prob.model.num_features, prob.model.num_classes, prob.dataset.name) == (5, 3, "synthetic_iid")
    prob = S.make_problem(num_clients=2, num_samples=[60, 70], train_fraction=0.5)
    assert prob.num_samples.tolist() == [30, 35]
    with pytest.raises(ValueError, match="overrides: alpah"):
        S.make_problem(num_clients=2, alpah=3.0)
    with pytest.raises(ValueError, match="overrides: seed .*data_seed"):
        S.make_problem(num_clients=2, seed=3)
    # the defaults are still the chapter's Synthetic(1,1)
    a, b = S.make_problem(data_seed=1, num_clients=3), synthetic(1.0, 1.0, num_clients=3, seed=1)
    assert all(np.array_equal(x, y) for x, y in zip(a.dataset.train_x, b.train_x))


def test_run_setting_batch_size_reaches_fednovas_population_tau_eff():
    # FedNova's population tau_eff was computed for batch 20 whatever batch_size run_setting ran
    prob = S.make_problem(num_clients=6)
    partial = S.Setting("partial", "3 of 6", (1, 5), "uniform", 3)
    curves = S.run_setting(prob, partial, S.fednova_sgd, [0], 1, batch_size=5)
    want = S.population_tau_eff(prob, partial, sgd(0.02), batch_size=5)
    assert want > 3 * S.population_tau_eff(prob, partial, sgd(0.02))
    assert curves.tau_eff[0, 0] == pytest.approx(want, rel=1e-12)
    # a setting may carry its batch size; run_setting's default is the setting's
    small = S.Setting("partial", "3 of 6", (1, 5), "uniform", 3, batch_size=5)
    assert S.run_setting(prob, small, S.fednova_sgd, [0], 1).tau_eff[0, 0] == curves.tau_eff[0, 0]


def test_fedprox_factory_takes_the_lr_of_lr_sweep():
    # lr_sweep calls factory(problem, setting, lr); fedprox's factory took two arguments (TypeError)
    prob = S.make_problem(num_clients=3)
    algo = S.fedprox(1.0)(prob, S.SETTINGS[0], 0.01)
    assert algo.solver.lr == 0.01 and algo.solver.mu == 1.0
    assert S.fedprox(1.0)(prob, S.SETTINGS[0]).solver.lr == S.PAPER["lr"]
    out = S.lr_sweep(prob, S.SETTINGS[0], {"FedProx": S.fedprox(1.0)}, [0.04], [0], 2)
    assert out[0.04, "FedProx"].losses.shape == (1, 2)


def _curves(losses, chi2, tau_eff):
    losses, chi2, tau_eff = (np.asarray(a, dtype=float) for a in (losses, chi2, tau_eff))
    zero = np.zeros_like(chi2)
    return S.Curves((0, 1), losses, zero, chi2, tau_eff, zero, np.zeros(len(losses)))


def test_plot_losses_and_diagnostics_draw_the_seed_means():
    """plot_losses: per setting and label, the mean loss over seeds against rounds 0..T with the min-max
    band, the family's colour, solid for the plain label and dashed for a variant ('FedNova (own
    lr)'); plot_diagnostics: the seed means of chi^2 and tau_eff against rounds 1..T, later labels thinner."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    setting = S.Setting("a", "setting A", (2, 2))
    grid = {("a", "FedAvg"): _curves([[4.0, 2.0, 1.0], [2.0, 2.0, 3.0]], [[0.5, 0.1], [0.3, 0.3]], [[2, 3], [4, 5]]),
            ("a", "FedNova (own lr)"): _curves([[1.0, 1.0, 1.0], [3.0, 3.0, 3.0]], [[0, 0], [0, 0]], [[1, 1], [3, 3]])}
    labels = ["FedAvg", "FedNova (own lr)"]
    fig = S.plot_losses(grid, [setting], labels)
    (ax,) = fig.axes
    avg, nova = ax.get_lines()
    assert list(avg.get_xdata()) == [0, 1, 2] and list(avg.get_ydata()) == [3.0, 2.0, 2.0]
    assert list(nova.get_ydata()) == [2.0, 2.0, 2.0]
    assert (avg.get_color(), avg.get_linestyle(), nova.get_color(), nova.get_linestyle()) == ("C0", "-", "C3", "--")
    band = ax.collections[0].get_paths()[0].vertices  # fill_between: the max (upper) and min (lower) curves
    assert {(x, y) for x, y in band} >= {(0.0, 2.0), (0.0, 4.0), (2.0, 1.0), (2.0, 3.0)}
    assert ax.get_title() == "setting A" and ax.get_yscale() == "log"
    fig = S.plot_diagnostics(grid, [setting], labels)
    top, bottom = fig.axes
    assert [list(line.get_ydata()) for line in top.get_lines()] == [[0.4, 0.2], [0.0, 0.0]]
    assert [list(line.get_ydata()) for line in bottom.get_lines()] == [[3.0, 4.0], [2.0, 2.0]]
    assert all(list(line.get_xdata()) == [1, 2] for line in top.get_lines())
    assert [line.get_linewidth() for line in top.get_lines()] == pytest.approx([2.6, 1.8])
    plt.close("all")


@pytest.mark.parametrize("plot", ["plot_losses", "plot_diagnostics"])
def test_plots_refuse_no_settings_and_missing_curves_before_making_a_figure(plot):
    """Before: no settings was matplotlib's 'Number of columns must be a positive integer, not 0' and a
    (setting, label) missing from grid a KeyError ('(\'a\', \'FedNova\')'), each leaving an open figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    setting = S.Setting("a", "setting A", (2, 2))
    grid = {("a", "FedAvg"): _curves([[4.0, 2.0, 1.0]], [[0.5, 0.1]], [[2, 3]])}
    open_before = plt.get_fignums()
    with pytest.raises(ValueError, match=r"^settings: no setting to draw \(one panel per setting\), got none$"):
        getattr(S, plot)(grid, [], ["FedAvg"])
    with pytest.raises(ValueError, match=r"^grid: no curves for \[\('a', 'FedNova'\)\] \(keys are"):
        getattr(S, plot)(grid, [setting], ["FedAvg", "FedNova"])
    assert plt.get_fignums() == open_before


@pytest.mark.parametrize("value", ["no", 1, None])
def test_plot_losses_logy_must_be_true_or_false(value):
    """Before: logy='no' or 1 (truthy) drew a log scale and None a linear one, without a word. np.bool_ is taken
    (check_flag); the check comes before a figure is made."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    setting = S.Setting("a", "setting A", (2, 2))
    grid = {("a", "FedAvg"): _curves([[4.0, 2.0, 1.0]], [[0.5, 0.1]], [[2, 3]])}
    open_before = plt.get_fignums()
    with pytest.raises(ValueError, match=rf"^logy must be True or False, got {value!r}$"):
        S.plot_losses(grid, [setting], ["FedAvg"], logy=value)
    assert plt.get_fignums() == open_before
    assert [S.plot_losses(grid, [setting], ["FedAvg"], logy=flag).axes[0].get_yscale()
            for flag in (np.True_, np.False_)] == ["log", "linear"]
    plt.close("all")

def test_run_grid_and_lr_sweep_read_the_seeds_once():
    """run_setting checked (and so read) seeds for every setting and algorithm: with a generator of seeds the
    first run trained and the second raised 'seeds must name at least one run seed, got none'."""
    prob = S.make_problem(num_clients=3)
    algos = {"FedAvg": S.fedavg_sgd, "FedNova": S.fednova_sgd}
    grid = S.run_grid(prob, S.SETTINGS[:1], algos, (s for s in [0, 1]), 1)
    want = S.run_grid(prob, S.SETTINGS[:1], algos, [0, 1], 1)
    assert [c.seeds for c in grid.values()] == [(0, 1), (0, 1)]
    assert all(np.array_equal(grid[k].losses, want[k].losses) for k in want)
    sweep = S.lr_sweep(prob, S.SETTINGS[0], algos, [0.04, 0.02], iter([0, 1]), 2)
    assert [c.seeds for c in sweep.values()] == [(0, 1)] * 4
    with pytest.raises(TypeError, match="seeds"):   # _check_seeds' refusal, before any run
        S.run_grid(prob, S.SETTINGS[:1], algos, 0, 1)


def _losses(*rows, seeds=None):
    losses = np.array(rows, dtype=float)
    return S.Curves(tuple(range(len(rows))) if seeds is None else seeds, losses, *[None] * 5)


def test_rounds_to_reach_counts_rounds_not_the_initial_loss():
    c = _losses([1.0, 2.0, 1.5, 1.0, 0.9], [2.0, 1.9, 1.8, 1.7, 1.6])
    # seed 0: the initial loss 1.0 is not a round's; rounds 1..4 are 2.0, 1.5, 1.0, 0.9: at or below 1.0 from round 3
    np.testing.assert_array_equal(S.rounds_to_reach(c, [1.0, 1.65]), [3, 4])
    np.testing.assert_array_equal(S.rounds_to_reach(c, 1.5), [2, np.inf])  # a scalar for every seed; never: inf
    np.testing.assert_array_equal(S.rounds_to_reach(c, 5.0), [1, 1])


def test_rounds_to_best_loss_by_hand_and_it_tells_slower_from_faster():
    """Chapter 4's "FedNova converges significantly faster than FedAvg": the rounds each needs to reach FedAvg's lowest
    training loss of the run, seed by seed (curves by hand)."""
    avg = _losses([2.3, 1.4, 1.3, 1.2, 1.17, 1.16, 1.18], [2.3, 1.5, 1.25, 1.3, 1.2, 1.21, 1.19])
    nova = _losses([2.3, 1.4, 1.05, 0.9, 0.8, 0.7, 0.6], [2.3, 1.6, 1.3, 1.22, 1.1, 0.9, 0.8])
    rows = S.rounds_to_best_loss({("fixed", "FedAvg"): avg, ("fixed", "FedNova"): nova}, ["fixed"])
    r = rows["fixed"]
    np.testing.assert_array_equal(r.threshold, [1.16, 1.19])  # FedAvg's lowest loss over rounds 1..6, per seed
    np.testing.assert_array_equal(r.worse_rounds, [5, 6])  # ... reached at its minimum
    np.testing.assert_array_equal(r.better_rounds, [2, 4])  # FedNova: 1.05 <= 1.16 at round 2; 1.1 <= 1.19 at round 4
    assert not np.all(r.better_rounds <= 0.5 * r.worse_rounds)  # seed 1: 4 of 6 rounds, not at most half
    # the other way round: FedAvg never reaches FedNova's lowest loss (inf), FedNova at its own minimum (round 6)
    back = S.rounds_to_best_loss({("fixed", "FedAvg"): avg, ("fixed", "FedNova"): nova}, ["fixed"], better="FedAvg",
                                 worse="FedNova")["fixed"]
    np.testing.assert_array_equal(back.threshold, [0.6, 0.8])
    np.testing.assert_array_equal(back.worse_rounds, [6, 6])
    np.testing.assert_array_equal(back.better_rounds, [np.inf, np.inf])
    with pytest.raises(ValueError, match="seeds"):
        S.rounds_to_best_loss({("s", "FedAvg"): avg, ("s", "FedNova"): _losses([2, 1], [2, 1], seeds=(3, 4))}, ["s"])
    with pytest.raises(ValueError, match="no round"):
        S.rounds_to_best_loss({("s", "FedAvg"): _losses([2.0]), ("s", "FedNova"): _losses([2.0])}, ["s"])

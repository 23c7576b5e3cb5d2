"""Chapter 8's figures from ``fedlib.experiments.speedup``: what each plot draws from the rows it is given
(the lines, their labels and the guides' values, worked out by hand from the rows)."""
from __future__ import annotations

import numpy as np
import pytest

from fedlib.experiments.speedup import ConsistencyRow, SamplingRow, SpeedupRow, plot_consistency, plot_sampling, plot_speedup


@pytest.fixture
def plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    yield plt
    plt.close("all")


def _lines(ax):
    return {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}


def test_plot_speedup_draws_one_line_per_m_and_algorithm_and_the_guide(plt):
    """Theorem 3's left-hand side against m tau T: FedNova solid, FedAvg dashed with open markers, a pair
    without rows draws nothing, and the dotted guide through FedNova's smallest budget falls as
    (m tau T)^(-1/2): budgets 20 and 40 (m tau T = 1*2*10, 2*2*10) give 1.0 and 1/sqrt(2)."""
    rows = [SpeedupRow("fednova", 1, 10, 2.0, 0.1, 1.0, 0.0), SpeedupRow("fednova", 2, 10, 2.0, 0.1, 0.8, 0.0),
            SpeedupRow("fedavg", 1, 10, 2.0, 0.1, 2.0, 0.0)]
    fig, ax = plt.subplots()
    plot_speedup(ax, rows)
    lines = _lines(ax)
    guide = r"$\propto (m\tilde\tau T)^{-1/2}$"
    assert sorted(lines) == sorted(["FedNova, m=1", "FedNova, m=2", "FedAvg, m=1", guide])
    assert (list(lines["FedNova, m=2"].get_xdata()), list(lines["FedNova, m=2"].get_ydata())) == ([40.0], [0.8])
    assert lines["FedNova, m=1"].get_linestyle() == "-" and lines["FedAvg, m=1"].get_linestyle() == "--"
    assert lines["FedAvg, m=1"].get_markerfacecolor() == "none"
    assert list(lines[guide].get_xdata()) == [20.0, 40.0]
    np.testing.assert_allclose(lines[guide].get_ydata(), [1.0, 1 / np.sqrt(2)], rtol=1e-15)
    assert ax.get_xscale() == ax.get_yscale() == "log"


def test_plot_sampling_marks_where_q_passes_the_population(plt):
    """Left: the largest population (m = 16) only, one line per q against q tau T, and the guide
    (q tau T)^(-1/2) through its smallest budget (2*1*10 = 20: at 40, 80, 160 the guide is 1/sqrt(2), 1/2,
    1/sqrt(8)). Right: the error at ``rounds`` = 20 against q per population; m = 4 < q = 8 gets a dotted
    vertical line at q = 4, m = 16 the guide q^(-1/2) from its first point (q = 2, 0.5; at q = 8: 0.25)."""
    rows = [SamplingRow("fednova", "replace", m, q, T, 1.0, 0.1, v, 0.01, float(min(q, m)))
            for m, q, T, v in [(16, 2, 10, 1.0), (16, 2, 20, 0.5), (16, 8, 10, 0.6), (16, 8, 20, 0.3),
                               (4, 2, 20, 0.7), (4, 8, 20, 0.6)]]
    fig, axes = plt.subplots(1, 2)
    plot_sampling(axes, rows, rounds=20)
    left, right = _lines(axes[0]), _lines(axes[1])
    guide = r"$\propto (q\tilde\tau T)^{-1/2}$"
    np.testing.assert_array_equal(left[guide].get_xdata(), [20.0, 40.0, 80.0, 160.0])
    np.testing.assert_allclose(left[guide].get_ydata(), [1.0, 1 / np.sqrt(2), 0.5, 1 / np.sqrt(8)], rtol=1e-15)
    assert axes[0].get_title() == "m = 16 clients, q sampled per round"
    assert sorted(t.get_text() for t in axes[0].get_legend().get_texts()) == sorted([guide, "q=2", "q=8"])
    vertical = right["q = m = 4"]
    assert list(vertical.get_xdata()) == [4, 4]
    assert "q = m = 16" not in right
    q_guide = right[r"$\propto q^{-1/2}$ (App. G)"]
    np.testing.assert_array_equal(q_guide.get_xdata(), [2.0, 8.0])
    np.testing.assert_allclose(q_guide.get_ydata(), [0.5, 0.25], rtol=1e-15)


def test_plot_consistency_draws_the_distances_and_the_floor(plt):
    """Left: the three distances against eta (log-log); right: min ||grad F||^2 against T, with FedAvg's
    floor ||grad F(x~)||^2 of the last row as a dotted line and the y axis cut at 3 times it."""
    rows = [ConsistencyRow(10, 0.2, 1.0, 0.1, 2.0, 0.5, 0.2, 1.5, 0.05),
            ConsistencyRow(40, 0.1, 0.5, 0.01, 2.0, 0.3, 0.1, 1.5, 0.04)]
    fig, axes = plt.subplots(1, 2)
    plot_consistency(axes, rows)
    left, right = _lines(axes[0]), _lines(axes[1])
    assert list(left[r"FedNova: $\|x - x^*\|$"].get_ydata()) == [1.0, 0.5]
    assert list(left[r"FedAvg: $\|x - \tilde x\|$"].get_ydata()) == [0.5, 0.3]
    assert list(right["FedNova"].get_xdata()) == [10, 40] and list(right["FedAvg"].get_ydata()) == [0.2, 0.1]
    assert list(right[r"$\|\nabla F(\tilde x)\|^2$"].get_ydata()) == [0.04, 0.04]
    assert axes[1].get_ylim()[1] == pytest.approx(0.12, rel=1e-12)


def test_summary_markdown_leaves_out_the_bullets_of_an_algorithm_without_rows():
    """Chapter 8's summary says only what was measured: a grid of FedAvg cells alone gets no 'Linear
    speedup' bullet (and FedAvg's bullet quotes its largest budget, 2*2*20 = 80: 0.6); a grid of FedNova
    cells alone and no equal-budget groups gets the speedup bullet without the groups' sentence, and no
    FedAvg bullet."""
    from fedlib.experiments.speedup import summary_markdown

    cons = [ConsistencyRow(10, 0.2, 1.0, 0.1, 2.0, 0.5, 0.2, 1.5, 0.05),
            ConsistencyRow(40, 0.1, 0.5, 0.01, 2.0, 0.3, 0.1, 1.5, 0.04)]
    avg = [SpeedupRow("fedavg", 1, 10, 2.0, 0.1, 0.7, 0.0), SpeedupRow("fedavg", 2, 20, 2.0, 0.1, 0.6, 0.0)]
    nova = [SpeedupRow("fednova", 1, 10, 2.0, 0.1, 0.3, 0.0), SpeedupRow("fednova", 4, 20, 2.0, 0.1, 0.1, 0.0)]
    lines = summary_markdown(cons, avg, -0.5, -0.4, -0.5, []).splitlines()
    assert len(lines) == 2 and lines[0].startswith("- **Theorem 3, arbitrary local work.**")
    assert lines[1].startswith("- FedAvg gains nothing from more clients or rounds here: 0.6 at the largest budget")
    lines = summary_markdown(cons, nova, -0.5, -0.4, -0.5, []).splitlines()
    assert len(lines) == 2 and lines[1].startswith("- **Linear speedup.**")
    assert "$m = 1, \\dots, 4$ and $T = 10, \\dots, 20$ (Theorem 3: $-1/2$)." in lines[1]
    assert lines[1].endswith("(Theorem 3: $-1/2$).")


def test_a_schedule_of_your_own_is_refused_by_the_closed_forms_saying_what_they_need():
    """speedup's closed forms (population_tau_eff, mean_a_norms, replicate, participant_mean_steps and every grid)
    need RandomLocalWork's uniform ranges: a step schedule (FixedSteps, or one of your own with local_steps(round)) is
    refused naming what it lacks and where it runs instead. Before: "AttributeError: 'FixedSteps' object has no
    attribute 'num_solvers'" (a schedule of your own: 'num_clients') from inside."""
    from fedlib.experiments import speedup as S
    from fedlib.schedules import FixedSteps

    class MySchedule:
        def local_steps(self, round_index):
            return np.array([1, 2, 3, 4])

    problem, work = S.base_setup(seed=0)
    solvers = S.make_solvers(0.01)
    expected = S.population_tau_eff(problem, work, solvers)
    message = (r"^work must be a fedlib\.schedules\.RandomLocalWork \(fedlib\.experiments\.speedup's closed forms, "
               r"E\|\|a_i\|\|_1 and E tau_i, read its uniform ranges low, high and num_solvers\), got {}, which has no "
               r"{}; a schedule of your own with local_steps\(round\) runs in fedlib\.engines\.quadratic\.run_replicas "
               r"with one solver \(pass the tau_eff you computed\)$")
    for schedule, missing in [(MySchedule(), "low, high, num_solvers, num_clients, mean_steps, draw"),
                              (FixedSteps([1, 2, 3, 4]), "low, high, num_solvers, mean_steps, draw")]:
        for call in (lambda w: S.population_tau_eff(problem, w, solvers), lambda w: S.mean_a_norms(w, solvers),
                     lambda w: S.replicate(problem, w, 2), lambda w: S.participant_mean_steps("uniform", problem.p, w),
                     lambda w: S.speedup_grid(problem, w, [1], [10], replicas=2)):
            with pytest.raises(ValueError, match=message.format(type(schedule).__name__, missing)):
                call(schedule)
    assert S.population_tau_eff(problem, work, solvers) == expected

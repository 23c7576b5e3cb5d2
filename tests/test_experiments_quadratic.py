"""fedlib.experiments.quadratic: simulated limits, divergence marking, App. D.1 helpers, and their
inputs (quadratic_algorithm's mu, two_client_sweep's step counts, rounds_to_converge's reduction,
run_quadratic's x0 and reference, loglog_slope's values); the fixed-point check at a zero fixed point; the
small-eta limits and the unequal-weights check of chapter 2 (and that it catches an engine that drops p_i)."""
import numpy as np
import pytest

from fedlib import theory
from fedlib.experiments import quadratic as Q
from fedlib.problems import random_quadratic
from fedlib.problems.quadratic import QuadraticProblem
from fedlib.schedules import FixedSteps, RandomSteps


@pytest.fixture(scope="module")
def small():
    prob = random_quadratic(4, 3, seed=1)
    return prob, np.array([1, 3, 5, 2])


@pytest.mark.parametrize("name,mu", [("fedavg", 0.0), ("fedprox", 1.0), ("fednova", 0.0)])
def test_simulated_limit_matches_closed_form(small, name, mu):
    prob, tau = small
    (check,) = Q.fixed_point_check(prob, tau, 0.05, mu, names=(name,))
    assert check.rel_error < 1e-10
    assert check.rounds == Q.rounds_to_converge(prob, name, 0.05, tau, mu)


def test_vrlsgd_fixed_heterogeneous_steps_reaches_tau_weighted_optimum(small):
    prob, tau = small
    target = Q.tau_weighted_optimum(prob, tau)
    run = Q.run_quadratic(prob, "vrlsgd", 0.05, FixedSteps(tau), 600, reference=target)
    assert not run.diverged and run.distances[-1] < 1e-8 * np.linalg.norm(target)


def test_divergence_is_marked_not_raised():
    prob = random_quadratic(8, 4, seed=0)
    run = Q.run_quadratic(prob, "vrlsgd", 0.01, RandomSteps(8, 1, 10, seed=0), 300, stop_above=1e4)
    assert run.diverged and run.diverged_round == run.distances.size - 1
    assert run.distances[-1] > 1e4 and np.all(np.isfinite(run.params))



def test_a_run_that_overflows_is_marked_by_its_floating_point_error_and_says_nothing_else(capfd):
    """Without stop_above, FedAvg at lr 50 with 20 local steps overflows: round 7's aggregated update is not finite,
    so the run is marked diverged at x^(8,0) (diverged_round 8, distances[0..7]) with that FloatingPointError's
    message as its reason, and keeps the last finite iterate (about 3e273; its distance, 3.2e273, is recorded: it
    was inf, with distances[4..7], before np.linalg.norm's overflow past 1.3e154 was scaled away). Nothing else: no RuntimeWarning (as errors here) and nothing printed. Before this test no test reached the
    overflow that run_quadratic's errstate guards (test_divergence_is_marked_not_raised stops at 1e4): errstate(...,
    "print") there (mutant EP11 of the negative-assertion pass: numpy's 'Warning: overflow encountered in ...' on the
    C stderr) passed the suite."""
    import warnings

    prob = random_quadratic(2, 2, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run = Q.run_quadratic(prob, "fedavg", 50.0, FixedSteps([20, 20]), 60)
    assert capfd.readouterr() == ("", "")
    assert run.diverged and run.diverged_round == 8 and run.distances.size == 8
    assert run.reason == ("round 7: the aggregated update is not finite (diverged): the change of 1 of the 2 "
                          "participating clients, [1], holds NaN or inf (NaN or inf in their data or loss, or a "
                          "learning rate too large for them)")
    assert np.all(np.isfinite(run.params)) and np.max(np.abs(run.params)) > 1e270
    assert np.all(np.isfinite(run.distances)) and run.distances[3] > 1e117 and run.distances[7] > 1e273


def _doubling_problem():
    """Two clients F_i(x) = |x|^2 / 2 (H_i = I, x* = 0): FedAvg at lr 3 with one local step maps x to -2x, so from
    x0 = (3, -4) the distance at x^(t,0) is exactly 5 * 2^t (a float64 up to t = 1021)."""
    return QuadraticProblem(np.stack([np.eye(2)] * 2), np.zeros((2, 2)), np.array([0.5, 0.5]))


def test_a_diverging_runs_distances_are_exact_past_where_the_squared_norm_overflows():
    """distances[t] = ||x^(t,0) - x*|| = 5 * 2^t to the bit for every finite iterate, up to round 1021, whose
    update is not finite. Before, np.linalg.norm's sqrt(x.x) overflowed once 5 * 2^t > 1.3e154: distances[510..1021]
    (512 of the 1022) were inf for iterates that were finite."""
    run = Q.run_quadratic(_doubling_problem(), "fedavg", 3.0, FixedSteps([1, 1]), 1100, x0=[3.0, -4.0])
    assert run.diverged and run.diverged_round == 1022 and run.distances.size == 1022
    assert run.distances.tolist() == [5.0 * 2.0 ** t for t in range(1022)]


def test_stop_above_past_the_squared_norms_overflow_stops_at_the_first_distance_above_it():
    """stop_above = 1e200 stops at the first x^(t,0) with 5 * 2^t > 1e200: t = 663 (1.91e200; 5 * 2^662 is 9.6e199).
    Before, the distance was inf already at t = 510 (truly 1.68e154), which 'exceeded' 1e200: diverged_round 510."""
    from fractions import Fraction

    run = Q.run_quadratic(_doubling_problem(), "fedavg", 3.0, FixedSteps([1, 1]), 700, x0=[3.0, -4.0],
                          stop_above=1e200)
    first = next(t for t in range(700) if 5 * 2 ** t > Fraction(1e200))
    assert first == 663
    assert run.diverged and run.diverged_round == first and run.reason == "distance > 1e+200"
    assert run.distances.tolist() == [5.0 * 2.0 ** t for t in range(first + 1)]

def test_tau_weighted_optimum_is_lemma1_limit_for_identity_hessians():
    prob = Q.identity_quadratic(5, 3, seed=2)
    tau = np.array([1, 2, 3, 4, 5])
    np.testing.assert_allclose(Q.tau_weighted_optimum(prob, tau), theory.lemma1_small_lr_limit(prob.e, prob.p, tau),
                               rtol=1e-12)
    np.testing.assert_array_equal(prob.H[0], np.eye(3))


def test_two_client_helpers():
    prob = Q.two_client_problem(2.0)
    assert np.allclose(prob.optimum(), 0.0)
    w = np.array([0.25, 0.75])
    assert theory.quadratic_kappa2(prob.H, prob.e, w, 1.0) == pytest.approx(4 * w.prod() * 4.0, rel=1e-12)
    (pt,) = Q.two_client_sweep(1, [4], 1e-2, a=2.0, reduction=1e-8)
    ex = theory.two_client_lower_bound(1, 4, 2.0)
    assert pt.grad_norm_sq["fedavg"] == pytest.approx(ex.grad_norm_sq, rel=0.05)
    assert pt.grad_norm_sq["fednova"] < 1e-2 * ex.grad_norm_sq


def test_reporting_helpers():
    x = np.logspace(-3, -1, 5)
    assert Q.loglog_slope(x, 3 * x ** 2) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        Q.quadratic_algorithm("fedprox", 0.1, 0.0)


def test_one_round_matches_the_update_rule_by_hand():
    """Figure 1: the next global models of a one-round run equal eq. (4) computed by hand from
    the clients' local paths; FedAvg's limit strays towards the busier client's optimum, FedNova's
    tends to x* like O(lr)."""
    from fedlib.experiments.quadratic import figure1_problem, one_round

    prob = figure1_problem()
    np.testing.assert_allclose(prob.optimum(), [-2 / 3, 1.0], atol=1e-12)
    r = one_round(prob, [0.0, -2.0], [10, 2], 0.05)
    ends = np.array([path[-1] for path in r.paths])
    assert [len(path) for path in r.paths] == [11, 3]
    np.testing.assert_allclose(r.fedavg, 0.5 * ends.sum(0), atol=1e-12)
    tau_eff = 0.5 * (10 + 2)
    np.testing.assert_allclose(r.fednova, r.x0 + tau_eff * 0.5 * ((ends[0] - r.x0) / 10 + (ends[1] - r.x0) / 2),
                               atol=1e-12)
    np.testing.assert_allclose(r.client_optima, [[2, 1], [-2, 1]], atol=1e-12)
    busy = r.client_optima[0]
    assert np.linalg.norm(r.fedavg_limit - busy) < np.linalg.norm(r.optimum - busy)
    gaps = [np.linalg.norm(one_round(prob, [0.0, -2.0], [10, 2], lr).fednova_limit - r.optimum)
            for lr in (0.04, 0.02, 0.01)]
    assert gaps[0] > gaps[1] > gaps[2] and 1.8 < gaps[0] / gaps[1] < 2.2 and 1.8 < gaps[1] / gaps[2] < 2.2
    with pytest.raises(ValueError, match="x0"):
        one_round(prob, [0.0], [10, 2], 0.05)
    with pytest.raises(ValueError, match="local_steps"):
        one_round(prob, [0.0, 0.0], [10], 0.05)


def test_plot_one_round_draws_2d_only():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fedlib.experiments.quadratic import figure1_problem, one_round, plot_one_round

    prob = figure1_problem()
    fig, ax = plt.subplots()
    plot_one_round(ax, prob, one_round(prob, [0.0, -2.0], [10, 2], 0.05))
    labels = [line.get_label() for line in ax.get_lines()]
    assert "FedNova limit" in labels and "client 1: 10 local steps" in labels
    with pytest.raises(ValueError, match="2-d"):
        plot_one_round(ax, random_quadratic(2, 3, seed=0), one_round(prob, [0.0, -2.0], [10, 2], 0.05))
    plt.close(fig)


def test_fedprox_closed_forms_need_mu_like_the_runs():
    """FedProx at mu = 0 (FedAvg) is refused by quadratic_algorithm; the closed forms accepted it, so
    fixed_point_check() with its defaults always raised, after simulating FedAvg. Now the closed forms
    refuse it too, and the default names leave FedProx out when mu = 0."""
    prob = random_quadratic(4, 3, seed=0)
    steps = [1, 2, 3, 4]
    for fn in (Q.fixed_point, Q.round_map_radius, Q.rounds_to_converge):
        with pytest.raises(ValueError, match="^mu must be"):
            fn(prob, "fedprox", 0.05, steps)
    assert [c.name for c in Q.fixed_point_check(prob, steps, 0.05)] == ["fedavg", "fednova"]
    with pytest.raises(ValueError, match="^mu must be"):
        Q.fixed_point_check(prob, steps, 0.05, names=("fednova", "fedprox"))
    with pytest.raises(ValueError, match="name"):
        Q.fixed_point_check(prob, steps, 0.05, names=("fedavg", "scaffold"))
    # mu > 0: all three, and mu is ignored by FedAvg and FedNova
    checks = Q.fixed_point_check(prob, steps, 0.05, mu=0.1)
    assert [c.name for c in checks] == ["fedavg", "fedprox", "fednova"] and max(c.rel_error for c in checks) < 1e-10
    np.testing.assert_array_equal(Q.fixed_point(prob, "fedavg", 0.05, steps, mu=0.1), Q.fixed_point(prob, "fedavg", 0.05, steps))


# ----------------------------------------------------------- quadratic_algorithm's mu, two_client_sweep's step counts
@pytest.mark.parametrize("mu", [float("nan"), float("inf"), -1.0, "a"])
def test_quadratic_algorithm_checks_mu_even_where_it_is_unused(mu):
    """Was: quadratic_algorithm('fednova', 0.1, mu=nan) (or mu='a', mu=-1) returned plain SGD without a word;
    a finite mu >= 0 is still ignored there (documented)."""
    from fedlib.experiments.quadratic import quadratic_algorithm

    with pytest.raises(ValueError, match="^mu must be a finite number >= 0"):
        quadratic_algorithm("fednova", 0.1, mu)
    assert quadratic_algorithm("fednova", 0.1, 7.0).solver.mu == 0.0


@pytest.mark.parametrize("tau1, tau2_values, name", [(True, [2], "tau1"), (1, [True], r"tau2_values\[0\]"),
                                                     (1, [2, 2.5], r"tau2_values\[1\]")])
def test_two_client_sweep_refuses_bool_step_counts(tau1, tau2_values, name):
    """Was: np.array([True, 2]) is [1, 2], so two_client_sweep(True, [2], 0.1) ran tau1 = 1 and recorded
    TwoClientPoint(tau1=1, ...); a step count of 2.5 failed as 'local_steps must hold integers'."""
    from fedlib.experiments.quadratic import two_client_sweep

    with pytest.raises(ValueError, match=f"^{name} must be a whole number >= 1"):
        two_client_sweep(tau1, tau2_values, 0.1, reduction=1e-3)
    assert two_client_sweep(1, [2.0], 0.1, reduction=1e-3)[0].tau2 == 2


@pytest.mark.parametrize("names, match", [
    (("fedprox",), r"^names\[0\] must be one of \['fedavg', 'fednova'\], got 'fedprox'"),  # was 'mu must be ... > 0'
    (("fedavg", "scaffold"), r"^names\[1\] must be one of"),          # was 'name must be one of ...'
    ("fedavg", r"^names must be a sequence"),                        # was run as the names 'f', 'e', ...
    ((), r"^names must hold at least one"),
])
def test_two_client_sweep_names_its_names_argument(names, match):
    from fedlib.experiments.quadratic import two_client_sweep

    with pytest.raises(ValueError, match=match):
        two_client_sweep(1, [2], 0.1, names=names, reduction=1e-3)
    assert set(two_client_sweep(1, [2], 0.1, names=["fednova"], reduction=1e-3)[0].rounds) == {"fednova"}


def test_rounds_to_converge_when_one_round_is_exact_and_checks_reduction():
    two = Q.two_client_problem()   # H_i = 1: lr = 1, tau = (1, 1) lands on x~ = 0 in one round (radius 0)
    assert Q.round_map_radius(two, "fedavg", 1.0, [1, 1]) == 0.0
    assert Q.rounds_to_converge(two, "fedavg", 1.0, [1, 1]) == 1       # was "math domain error"
    for bad in (0, 1, 2.0, float("nan"), -1e-3):
        with pytest.raises(ValueError, match="^reduction must"):
            Q.rounds_to_converge(two, "fedavg", 0.1, [1, 2], reduction=bad)


def test_run_quadratic_checks_x0_and_reference():
    prob = random_quadratic(3, 3, seed=0)
    sched = FixedSteps([1, 2, 3])
    with pytest.raises(ValueError, match=r"^reference must have shape \(3,\)"):   # was broadcast silently
        Q.run_quadratic(prob, "fedavg", 0.05, sched, 3, reference=[0.0])
    with pytest.raises(ValueError, match="^reference contains NaN"):        # was "diverged at round 0"
        Q.run_quadratic(prob, "fedavg", 0.05, sched, 3, reference=[np.nan] * 3, stop_above=10.0)
    with pytest.raises(ValueError, match=r"^x0 must have shape \(3,\)"):
        Q.run_quadratic(prob, "fedavg", 0.05, sched, 3, x0=[1.0])
    with pytest.raises(ValueError, match="^x0 contains NaN"):
        Q.run_quadratic(prob, "fedavg", 0.05, sched, 3, x0=[np.nan, 0.0, 0.0])
    run = Q.run_quadratic(prob, "fedavg", 0.05, sched, 2, x0=[1, 2, 3], reference=[1, 2, 3])  # ints are fine
    assert run.distances[0] == 0.0 and run.params.dtype == np.float64


def test_loglog_slope_refuses_non_finite_values():
    assert Q.loglog_slope([1.0, 2.0, 4.0], [3.0, 6.0, 12.0]) == pytest.approx(1.0)
    for x, y in (([1, 2, np.nan], [1, 2, 3]), ([1, 2, 3], [1, 2, np.inf]), ([[1, 2], [3, 4]], [[1, 2], [3, 5]])):
        with pytest.raises(ValueError, match="^loglog_slope needs"):   # was LinAlgError, nan, TypeError
            Q.loglog_slope(x, y)


def test_fixed_point_check_at_a_zero_fixed_point_is_finite():
    """App. D.1's clients with tau_1 = tau_2: x~ = x* = 0, and ||x_T - x~|| / ||x~|| was 0/0 = nan."""
    checks = Q.fixed_point_check(Q.two_client_problem(1.0), [2, 2], 0.1)
    assert [c.rel_error for c in checks] == [0.0, 0.0]


def test_plot_distance_panel_marks_a_diverged_run_and_draws_the_floors():
    """Figure 2's panel: each run's distances against the rounds (log y), a diverged run labelled so and ended
    by a cross at its last round, clipped to ``ymax`` (1e6 -> 100), with a note naming the round it stopped at,
    and one dotted horizontal line per closed-form floor."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = np.zeros(2)
    runs = {"fednova": Q.QuadraticRun("fednova", x, np.array([1.0, 0.5, 0.25]), False, None, ""),
            "fedavg": Q.QuadraticRun("fedavg", x, np.array([1.0, 10.0, 1e6]), True, 2, "distance > 1000")}
    fig, ax = plt.subplots()
    Q.plot_distance_panel(ax, runs, "panel", floors={"fedavg": 0.3}, ymax=100.0)
    lines = {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}
    assert sorted(lines) == ["FedAvg (diverged)", "FedNova"]
    assert list(lines["FedNova"].get_xdata()) == [0, 1, 2] and list(lines["FedNova"].get_ydata()) == [1.0, 0.5, 0.25]
    assert list(lines["FedAvg (diverged)"].get_ydata()) == [1.0, 10.0, 1e6]
    crosses = [line for line in ax.get_lines() if line.get_marker() == "x"]
    assert len(crosses) == 1 and list(crosses[0].get_xdata()) == [2] and list(crosses[0].get_ydata()) == [100.0]
    (note,) = ax.texts
    assert note.get_text() == "FedAvg diverges\n(stopped at round 2)" and tuple(note.xy) == (2, 100.0)
    floors = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert len(floors) == 1 and list(floors[0].get_ydata()) == [0.3, 0.3]
    assert ax.get_yscale() == "log" and ax.get_ylim()[1] == 100.0 and ax.get_title() == "panel"
    plt.close(fig)


def test_identity_quadratic_takes_p_as_quadratic_problem_does():
    """np.asarray(p, dtype=float) before QuadraticProblem's check: a tensor with grad raised RuntimeError
    ("Can't call numpy() on Tensor that requires grad"), a bfloat16 one TypeError ('Got unsupported ScalarType
    BFloat16'), ['a', 'b'] and [1j, 0.5] numpy's or float()'s errors, none naming p (random_quadratic: 47cfaa0)."""
    torch = pytest.importorskip("torch")
    want = Q.identity_quadratic(2, 3, seed=1, p=[0.25, 0.75])
    for p in (torch.tensor([0.25, 0.75], requires_grad=True), torch.tensor([0.25, 0.75], dtype=torch.bfloat16)):
        got = Q.identity_quadratic(2, 3, seed=1, p=p)
        assert got.p.dtype == np.float64 and np.array_equal(got.p, [0.25, 0.75])
        assert np.array_equal(got.H, want.H) and np.array_equal(got.e, want.e)
    for p in (["a", "b"], [1j, 0.5]):
        with pytest.raises(ValueError, match="p must be an array of numbers"):
            Q.identity_quadratic(2, 3, p=p)


def test_round_map_radius_of_an_overflowing_map_is_inf():
    """With lr = 1e100 the round map's entries overflow to inf / NaN: round_map_radius and tradeoff's
    round_contraction raised numpy's LinAlgError ('Array must not contain infs or NaNs'), rounds_to_converge the
    same instead of its 'do not converge', acceleration's variant_radius / variant_limit 'M contains NaN or inf'
    (an M the caller never gave), as quadratic_fixed_point did before d1f16ce."""
    import warnings

    from fedlib import tradeoff
    from fedlib.experiments import acceleration as A

    prob = random_quadratic(3, 2, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # the overflow itself
        assert Q.round_map_radius(prob, "fedavg", 1e100, [2, 3, 4]) == np.inf
        assert tradeoff.round_contraction(prob, [2, 3, 4], 1e100, 0.0) == np.inf
        assert A.variant_radius(prob, "scaffold", 1e100, [2, 3, 4]) == np.inf
        for call in (lambda: Q.rounds_to_converge(prob, "fedavg", 1e100, [2, 3, 4]),
                     lambda: A.variant_limit(prob, "fedavg", 1e100, [2, 3, 4])):
            with pytest.raises(ValueError, match=r"lr: the rounds of fedavg do not converge \(spectral radius inf"):
                call()
    # a finite map: the eigenvalues as before (1e30 overflows nothing)
    M, _ = theory.quadratic_round_map(prob.H, prob.e, prob.p, [2, 3, 4], 1e30, "fedavg")
    assert Q.round_map_radius(prob, "fedavg", 1e30, [2, 3, 4]) == float(np.max(np.abs(np.linalg.eigvals(M))))


@pytest.mark.parametrize("seed", range(6))
def test_round_map_radii_are_the_largest_eigenvalue_modulus_to_the_bit(seed):
    """tradeoff.round_contraction, round_map_radius and acceleration.variant_radius (one shared guard,
    theory._radius_or_inf, since 2026-12-05; before, two of them computed max |eigvals(M)| themselves and the
    third called spectral_radius) give max |eigvals(M)| of their round map bit for bit, on random problems, step
    sizes and local steps, including maps with complex eigenvalues (SCAFFOLD's)."""
    from fedlib import tradeoff
    from fedlib.experiments import acceleration as A

    rng = np.random.default_rng(seed)
    prob = random_quadratic(3, 4, seed=seed)
    steps = [int(k) for k in rng.integers(1, 6, size=3)]
    lr = float(rng.uniform(0.005, 0.2))

    def plain(M):
        return float(np.max(np.abs(np.linalg.eigvals(M))))

    M, _ = theory.quadratic_round_map(prob.H, prob.e, prob.p, steps, lr, "fedavg")
    assert Q.round_map_radius(prob, "fedavg", lr, steps) == plain(M)
    assert tradeoff.round_contraction(prob, steps, lr, 0.0) == plain(M)
    M, _ = theory.quadratic_round_map(prob.H, prob.e, prob.p, steps, lr, "fedprox", tradeoff.mu_for_alpha(0.1, lr))
    assert tradeoff.round_contraction(prob, steps, lr, 0.1) == plain(M)
    for name in ("fednova", "scaffold"):
        M = A.variant_round_map(prob, name, lr, steps).M
        assert A.variant_radius(prob, name, lr, steps) == plain(M)


# ---------------------------------------------------------------- unequal weights (chapter 2)
@pytest.fixture(scope="module")
def unequal():
    """Unequal p_i (proportional to 1..5) on a random instance with heterogeneous tau_i."""
    p = np.arange(1, 6) / 15
    return random_quadratic(5, 3, seed=4, p=p), np.array([1, 4, 2, 7, 3])


@pytest.mark.parametrize("name", ["fedavg", "fedprox", "fednova"])
def test_small_lr_limit_is_where_the_fixed_point_goes(unequal, name):
    """The closed-form fixed point at eta = 1e-6 (FedProx at mu = 1: alpha = 1e-6) is within 1e-4 of the limit,
    and the limit written out: argmin sum_i w_i F_i = (sum_i w_i H_i)^-1 sum_i w_i e_i with
    w_i = p_i tau_i / sum_j p_j tau_j (FedAvg, FedProx) or p_i (FedNova)."""
    prob, tau = unequal
    limit = Q.small_lr_limit(prob, name, tau)
    w = prob.p if name == "fednova" else prob.p * tau / (prob.p @ tau)
    written = np.linalg.solve(np.einsum("i,ijk->jk", w, prob.H), w @ prob.e)
    np.testing.assert_allclose(limit, written, rtol=0, atol=1e-12 * np.linalg.norm(written))
    near = Q.fixed_point(prob, name, 1e-6, tau, mu=1.0 if name == "fedprox" else 0.0)
    assert np.linalg.norm(near - limit) < 1e-4 * np.linalg.norm(limit)


def test_small_lr_limit_with_other_weights_is_that_problems_limit(unequal):
    prob, tau = unequal
    uniform = np.full(5, 0.2)
    same = QuadraticProblem(prob.H, prob.e, uniform)
    for name in ("fedavg", "fednova"):
        np.testing.assert_array_equal(Q.small_lr_limit(prob, name, tau, weights=uniform),
                                      Q.small_lr_limit(same, name, tau))
        # with these p_i the two points are far apart: the check below can tell them apart
        assert np.linalg.norm(Q.small_lr_limit(prob, name, tau) - Q.small_lr_limit(same, name, tau)) > 0.5
    with pytest.raises(ValueError, match="name"):
        Q.small_lr_limit(prob, "vrlsgd", tau)
    with pytest.raises(ValueError, match="local_steps"):
        Q.small_lr_limit(prob, "fedavg", tau[:4])
    with pytest.raises(ValueError, match="p"):
        Q.small_lr_limit(prob, "fedavg", tau, weights=[0.5, 0.5, 0.5, 0.5, 0.5])


def test_weighted_limit_check_passes_on_the_library(unequal):
    prob, tau = unequal
    checks = Q.weighted_limit_check(prob, tau, 0.01)
    assert [c.name for c in checks] == ["fedavg", "fednova"]
    for c in checks:
        assert c.rel_error < 1e-10 and 9 < c.target_distance / c.tenth_distance < 11, c
        assert c.target_distance < 0.2 * c.uniform_distance, c
        assert c.separation == pytest.approx(np.linalg.norm(c.target - c.uniform_target), rel=1e-15)
        assert c.rounds == Q.rounds_to_converge(prob, c.name, 0.01, tau)


def test_weighted_limit_check_catches_an_engine_that_drops_p(unequal, monkeypatch):
    """The engine averaging with 1/m instead of p_i: the simulated limit leaves the closed form and lands O(eta) from
    the 1/m point, whose distance to the p_i point does not shrink with eta (the ratio to the lr / 10 closed form is
    far from 10)."""
    prob, tau = unequal
    real = Q.run_sequential

    def uniform_engine(algorithm, params, grad_fn, p, *args, **kwargs):
        return real(algorithm, params, grad_fn, np.full(len(p), 1.0 / len(p)), *args, **kwargs)

    monkeypatch.setattr(Q, "run_sequential", uniform_engine)
    for c in Q.weighted_limit_check(prob, tau, 0.01):
        assert c.rel_error > 1e-3, c
        assert c.target_distance / c.tenth_distance > 20 and c.uniform_distance < c.target_distance, c


@pytest.mark.parametrize("name, call", [("low", lambda n: Q.fixed_local_steps(0, 1, 5, n, 6)),
                                        ("high", lambda n: Q.fixed_local_steps(0, 1, 5, 1, n))])
def test_fixed_local_steps_bounds_are_whole_numbers(name, call):
    """low and high bound step counts, whole numbers as two_client_sweep's tau1 and the local_steps arrays: 2.0 is 2.
    Before: "low must be an integer >= 1, got 2.0". The draw is the same, bit for bit; 1.5, True and NaN are still
    refused."""
    got, want = call(2.0), call(2)
    assert got.dtype == want.dtype and np.array_equal(got, want)
    for bad in (1.5, True, float("nan")):
        with pytest.raises(ValueError, match=rf"^{name} must be a whole number >= 1, got "):
            call(bad)


def test_two_client_lower_bound_takes_the_step_counts_two_client_sweep_takes():
    """two_client_sweep(2.0, [3.0], ...) ran while theory.two_client_lower_bound(2.0, 3.0) refused the same counts
    ("tau1 must be an integer >= 1, got 2.0"): both take whole numbers now, with the same result as for ints."""
    assert repr(theory.two_client_lower_bound(2.0, 3.0)) == repr(theory.two_client_lower_bound(2, 3))

"""Mutation-testing pass on fedlib.experiments.synthetic and fedlib.experiments.surrogate.

Each test pins behaviour that mutants of these two modules changed without any other test
failing (constants of the paper's setup, the per-round diagnostics of run_setting, the
summaries final_losses / end_loss / claim_holds, the flat directions and the Newton solve of
the surrogate chapter). Expected values are worked out by hand or with plain numpy from the
paper's formulas, never copied from the functions' output.

Mutants of a33e916..37f92d9, Setting.epochs' annotation and docstring (pass described in tests/README.md,
Mutation passes): 4 mutants, one at a time, ``pytest -x`` on test_experiments_synthetic.py, test_lint.py,
test_setting_and_table_inputs.py, test_api_page.py and this file: 2 killed by the suite, 2 equivalent.
  S1 ``epochs: tuple`` again (Tuple, Union imported for nothing: ruff F401), S2 Tuple, Union not imported
  (ruff F821 in the annotation): killed by test_lint.py.
  S3 the docstring's ``(2, 5)`` -> ``(5, 2)``: prose, no behaviour (what it says, "1-5" -> (1, 5), is
  test_setting_and_table_inputs.py's); S4 ``Tuple[int, int]`` -> ``Tuple[int, ...]``: equivalent (the
  module's annotations are strings, never evaluated; the API page that shows them is checked only on a
  built book).

Mutants of 37f92d9..d2bb791 (the changed hunks of fedlib/experiments/synthetic.py) (pass described in
tests/README.md, Mutation passes): 10 mutants, one at a time, ``pytest -x`` on test_experiments_synthetic.py,
this file, test_chapter_seeds.py and ``tests/test_doctests.py -k fedlib.experiments.synthetic``: 7 killed by the
suite (SN1 rounds_to_reach counts round 0, SN2 ``<=`` -> ``<``, SN4 the seeds compared by number, SN5 a run of
no round let through, SN7 plot_diagnostics without _check_plotted, SN8 run_grid's seeds read twice, SN10
``bool(logy)``), 3 here (SN3 the threshold over round 0 too, SN6 ``' ...'`` after three missing curves, SN9
lr_sweep's rates without check_sequence), 0 equivalent.

Mutants of 37f92d9..28127ce (third, the changed hunks of fedlib/experiments/surrogate.py)
(pass described in tests/README.md, Mutation passes):
  SU1 unseen_classes' weights by np.asarray again: killed by the suite.

Review and mutants of f9b9704..2e0d04d (fedlib/experiments/synthetic.py: make_problem's data_seed, _grid_curves,
claim_holds, rounds_to_best_loss, rounds_to_reach's threshold) (pass described in tests/README.md, Mutation passes):
  review fix (81a5076, its test in tests/test_setting_and_table_inputs.py): an unhashable setting or label was
  reported as 'grid must be a mapping ..., got dict'.
  E14 data_seed unchecked; E15 ``t.ndim > 1`` -> ``> 2``; E16 ``!= seeds`` -> ``> seeds``; E17 strings not
  refused; E18 ``if not labels`` negated; E19 labels looked up by ``k[1]``; E20 claim_holds names ``worse`` for
  better; E21 claim_holds' settings unchecked; E22 the Mapping test dropped (the fix undone); E23 KeyError and
  TypeError caught alike; E24 rounds_to_best_loss' settings unchecked; E25 numpy's ValueError not caught. killed by
  the suite: E14, E18, E19, E20, E22 (the fix's test), E23. killed here: E15, E16, E17, E21, E24, E25.
"""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

from fedlib.data.synthetic import synthetic
from fedlib.experiments import surrogate as SU
from fedlib.experiments import synthetic as S
from fedlib.solvers import sgd


# ----------------------------------------------------------------------------- synthetic: setup
@pytest.fixture(scope="module")
def small():
    """3 clients, 4 features, 3 classes: tiny enough for one-round runs in well under a second."""
    return S.make_problem(num_clients=3, dim=4, num_classes=3, num_samples=[30, 50, 80])


def _ceil20(problem):
    return np.array([math.ceil(int(n) / 20) for n in problem.num_samples], dtype=float)


def test_paper_constants_and_settings():
    # paper App. I / §6: Synthetic(1,1), 30 clients, batch 20, client lr 0.02
    assert S.PAPER == {"alpha": 1.0, "beta": 1.0, "num_clients": 30, "batch_size": 20, "lr": 0.02}
    fixed, random_, partial = S.SETTINGS
    assert (fixed.name, fixed.epochs, fixed.sampling, fixed.clients_per_round) == ("fixed", (2, 2), "full", None)
    assert (random_.name, random_.epochs, random_.sampling, random_.clients_per_round) == ("random", (1, 5), "full",
                                                                                          None)
    assert (partial.name, partial.epochs, partial.sampling, partial.clients_per_round) == ("partial", (1, 5),
                                                                                          "uniform", 10)
    assert [s.batch_size for s in S.SETTINGS] == [20, 20, 20]
    assert S.Setting("x", "x", (1, 1)).batch_size == 20


def test_make_problem_defaults_are_synthetic_one_one_with_30_clients():
    # labels depend on alpha (the model mean), features on beta: compare both, and the client count
    prob = S.make_problem(dim=3, num_classes=2)
    assert prob.num_clients == 30
    ref = synthetic(1.0, 1.0, num_clients=30, dim=3, num_classes=2, seed=0)
    assert all(np.array_equal(a, b) for a, b in zip(prob.dataset.train_y, ref.train_y))
    assert all(np.array_equal(a, b) for a, b in zip(prob.dataset.test_x, ref.test_x))
    assert prob.l2 == 0.0
    assert S.make_problem(l2=0.25, num_clients=2, dim=3).l2 == 0.25


def test_expected_a_norms_and_population_tau_eff_by_hand(small):
    # plain SGD: ||a_i||_1 = tau_i = E * ceil(n_i / B); E ~ U{1..5} has mean 3
    spe = _ceil20(small)
    fixed, random_, partial = S.SETTINGS
    np.testing.assert_allclose(fixed.expected_a_norms(small, sgd(0.02)), 2 * spe, rtol=0, atol=0)
    np.testing.assert_allclose(random_.expected_a_norms(small, sgd(0.02)), 3 * spe, rtol=0, atol=0)
    spe7 = np.array([math.ceil(int(n) / 7) for n in small.num_samples], dtype=float)
    np.testing.assert_allclose(random_.expected_a_norms(small, sgd(0.02), batch_size=7), 3 * spe7, rtol=0, atol=0)
    assert S.population_tau_eff(small, partial, sgd(0.02)) == pytest.approx(float(small.p @ (3 * spe)), rel=1e-14)
    assert S.population_tau_eff(small, fixed, sgd(0.02), batch_size=7) == pytest.approx(float(small.p @ (2 * spe7)),
                                                                                        rel=1e-14)


def test_with_solver_fixes_tau_eff_only_for_fednova_under_sampling(small):
    fixed, _, partial = S.SETTINGS
    spe = _ceil20(small)
    assert S.with_solver("fednova", sgd(0.02))(small, fixed).tau_eff is None   # full participation: from the round
    assert S.with_solver("fedavg", sgd(0.02))(small, partial).tau_eff is None
    nova = S.with_solver("fednova", sgd(0.02))(small, partial)
    assert nova.name == "fednova" and nova.tau_eff == pytest.approx(float(small.p @ (3 * spe)), rel=1e-14)
    assert S.fednova_sgd(small, partial).tau_eff == pytest.approx(float(small.p @ (3 * spe)), rel=1e-14)
    assert S.fednova_sgd(small, fixed, lr=0.05).solver.lr == 0.05
    avg = S.fedavg_sgd(small, partial)
    assert (avg.name, avg.solver.lr, avg.tau_eff) == ("fedavg", 0.02, None)
    assert S.fedavg_sgd(small, partial, lr=0.3).solver.lr == 0.3


def test_run_setting_diagnostics_by_hand(small):
    """Full participation, E = 2 for everyone: tau_i = 2 ceil(n_i/20) every round.
    FedAvg: tau_eff = sum p_i tau_i, w_i = p_i tau_i / tau_eff, c_i = tau_eff w_i / tau_i = p_i.
    FedNova: the same tau_eff, w = p (chi2 = 0), c_i = tau_eff p_i / tau_i."""
    fixed = S.SETTINGS[0]
    p, tau = small.p, 2 * _ceil20(small)
    tau_eff = float(p @ tau)
    w = p * tau / tau_eff
    chi2 = float(np.sum((p - w) ** 2 / w))
    C = small.model.num_classes
    avg = S.run_setting(small, fixed, S.fedavg_sgd, [0, 1], 2)
    assert avg.seeds == (0, 1)
    assert avg.losses.shape == (2, 3) and avg.accuracy.shape == avg.chi2.shape == avg.tau_eff.shape == (2, 2)
    assert avg.max_coef.shape == (2, 2) and avg.seconds.shape == (2,) and np.all(avg.seconds >= 0)
    np.testing.assert_allclose(avg.losses[:, 0], math.log(C), rtol=1e-12)   # zero model: uniform softmax
    assert np.all(avg.losses[:, 1:] < math.log(C))
    np.testing.assert_allclose(avg.tau_eff, tau_eff, rtol=1e-12)
    np.testing.assert_allclose(avg.chi2, chi2, rtol=1e-9)
    np.testing.assert_allclose(avg.max_coef, p.max(), rtol=1e-12)
    assert np.all((avg.accuracy >= 0) & (avg.accuracy <= 1))   # the problem has test data: never NaN
    nova = S.run_setting(small, fixed, S.fednova_sgd, [0], 2)
    np.testing.assert_allclose(nova.tau_eff, tau_eff, rtol=1e-12)
    np.testing.assert_allclose(nova.chi2, 0.0, atol=1e-12)
    np.testing.assert_allclose(nova.max_coef, tau_eff * np.max(p / tau), rtol=1e-12)


def test_run_setting_seeds_are_the_runs_seeds(small):
    """Seed s of run_setting is run_batched(..., seed=s) on the setting's schedule for seed s:
    the per-seed losses of a two-seed call equal two one-seed calls, and the seeds differ."""
    random_ = S.SETTINGS[1]
    both = S.run_setting(small, random_, S.fedavg_sgd, [3, 4], 2)
    for k, s in enumerate((3, 4)):
        np.testing.assert_array_equal(both.losses[k], S.run_setting(small, random_, S.fedavg_sgd, [s], 2).losses[0])
    assert not np.array_equal(both.losses[0], both.losses[1])


def test_run_setting_batch_size_replaces_the_settings(small):
    """batch_size=7 runs tau_i = 2 ceil(n_i/7) (FedAvg's tau_eff = sum p_i tau_i shows it);
    batch_size equal to the setting's changes nothing."""
    fixed = S.SETTINGS[0]
    tau7 = 2 * np.array([math.ceil(int(n) / 7) for n in small.num_samples], dtype=float)
    run = S.run_setting(small, fixed, S.fedavg_sgd, [0], 1, batch_size=7)
    assert run.tau_eff[0, 0] == pytest.approx(float(small.p @ tau7), rel=1e-12)
    same = S.run_setting(small, fixed, S.fedavg_sgd, [0], 1, batch_size=20)
    np.testing.assert_array_equal(same.losses, S.run_setting(small, fixed, S.fedavg_sgd, [0], 1).losses)


def test_run_grid_keys_and_progress(small):
    lines = []
    grid = S.run_grid(small, S.SETTINGS[:2], {"FedAvg": S.fedavg_sgd, "FedNova": S.fednova_sgd}, [0], 1,
                      progress=lines.append)
    assert list(grid) == [("fixed", "FedAvg"), ("fixed", "FedNova"), ("random", "FedAvg"), ("random", "FedNova")]
    assert len(lines) == 4 and lines[0].startswith("fixed    FedAvg ") and lines[-1].endswith(" s")
    assert S.run_grid(small, S.SETTINGS[:1], {"FedAvg": S.fedavg_sgd}, [0], 1, progress=None).keys() == {
        ("fixed", "FedAvg")}


def test_lr_sweep_keeps_eta_times_rounds(small):
    """rounds * 0.02 / lr rounds at lr: 4 rounds at 0.02 -> 8 at 0.01, 2 at 0.04, 1 at 0.08;
    at lr = 1, round(0.08) = 0 is raised to one round."""
    seen = []

    def factory(problem, setting, lr):
        seen.append(lr)
        return S.fedavg_sgd(problem, setting, lr)

    out = S.lr_sweep(small, S.SETTINGS[0], {"A": factory}, [0.01, 0.02, 0.04, 0.08, 1.0], [0], 4)
    assert {lr: c.losses.shape[1] - 1 for (lr, _), c in out.items()} == {0.01: 8, 0.02: 4, 0.04: 2, 0.08: 1, 1.0: 1}
    assert seen == [0.01, 0.02, 0.04, 0.08, 1.0]
    with pytest.raises(ValueError, match=r"^lrs must be a finite number > 0, got 0\.0"):
        S.lr_sweep(small, S.SETTINGS[0], {"A": factory}, [0.02, 0.0], [0], 1)


def _curves(losses):
    losses = np.asarray(losses, dtype=float)
    z = np.zeros((losses.shape[0], losses.shape[1] - 1))
    return S.Curves(tuple(range(losses.shape[0])), losses, z, z, z, z, np.zeros(losses.shape[0]))


def test_final_losses_end_loss_and_claim_holds_by_hand():
    a = _curves([[3.0, 2.0, 1.0, 0.5], [3.0, 2.5, 0.9, 1.5]])
    b = _curves([[3.0, 1.0, 0.8, 0.6], [3.0, 1.0, 1.1, 1.0]])
    rows = S.final_losses({("fixed", "A"): a, ("fixed", "B"): b})
    # finals A: 0.5, 1.5 -> mean 1.0, population std 0.5; B: 0.6, 1.0 -> 0.8, 0.2
    assert [r[:2] for r in rows] == [("fixed", "A"), ("fixed", "B")]
    assert rows[0][2:4] == pytest.approx((1.0, 0.5)) and rows[1][2:4] == pytest.approx((0.8, 0.2))
    assert rows[0][4] == [0.5, 1.5] and rows[1][4] == [0.6, 1.0]
    np.testing.assert_array_equal(S.end_loss(a), [0.5, 1.5])
    # median of the last 2 / last 3 rounds: A (0.75, 1.2) and (1.0, 1.5); B (0.7, 1.05) and (0.8, 1.0)
    np.testing.assert_allclose(S.end_loss(a, 2), [0.75, 1.2])
    np.testing.assert_allclose(S.end_loss(a, 3), [1.0, 1.5])
    grid = {("s", "A"): a, ("s", "B"): b}
    assert S.claim_holds(grid, ["s"], better="A", worse="B") == {"s": [True, False]}   # finals 0.5 < 0.6, 1.5 > 1.0
    assert S.claim_holds(grid, ["s"], better="B", worse="A") == {"s": [False, True]}
    assert S.claim_holds(grid, ["s"], better="A", worse="B", tail=3) == {"s": [False, False]}  # 1.0 > 0.8, 1.5 > 1.0
    equal = {("s", "FedNova"): a, ("s", "FedAvg"): a}
    assert S.claim_holds(equal, ["s"]) == {"s": [False, False]}   # "below" is strict


def test_run_setting_seconds_are_the_runs_durations(small):
    """Each seconds entry is a perf_counter difference inside the call: non-negative and, summed,
    no more than the call itself took on the same clock (no threshold on speed)."""
    import time

    t0 = time.perf_counter()
    run = S.run_setting(small, S.SETTINGS[0], S.fedavg_sgd, [0, 1], 1)
    elapsed = time.perf_counter() - t0
    assert np.all(run.seconds >= 0) and run.seconds.sum() <= elapsed


# ----------------------------------------------------------------------------- surrogate
def _dataset(scale=1.0):
    """2 clients, 2 features, 2 classes. Pooled training X = [[2,0],[0,1],[0,1],[2,0]] * scale:
    X^T X / 4 = diag(8, 2) / 4 * scale^2 = diag(2, 0.5) scale^2, so lambda_max = 2 scale^2."""
    from fedlib.data.clients import FederatedDataset

    tx = [np.array([[2.0, 0.0], [0.0, 1.0]]) * scale, np.array([[0.0, 1.0], [2.0, 0.0]]) * scale]
    return FederatedDataset(train_x=tx, train_y=[np.array([0, 1]), np.array([1, 1])],
                            test_x=[np.array([[4.0, 6.0]]) * scale, np.zeros((0, 2))],
                            test_y=[np.array([0]), np.zeros(0, dtype=np.int64)], num_classes=2, name="hand")


@pytest.mark.parametrize("scale", [1.0, 0.1])
def test_unit_scaled_by_hand(scale):
    """Train and test features alike are divided by sqrt(lambda_max) = sqrt(2) * scale
    (lambda_max = 0.02 < 1 in the second case must be scaled too, not refused)."""
    ds = _dataset(scale)
    out = SU.unit_scaled(ds)
    s = math.sqrt(2.0) * scale
    for a, b in zip(out.train_x, ds.train_x):
        np.testing.assert_allclose(a, b / s, rtol=1e-14)
    np.testing.assert_allclose(out.test_x[0], [[4 / math.sqrt(2), 6 / math.sqrt(2)]], rtol=1e-14)
    assert out.test_x[1].shape == (0, 2)
    np.testing.assert_array_equal(out.train_y[1], [1, 1])


@pytest.fixture(scope="module")
def hand():
    from fedlib.problems.logistic import LogisticProblem

    return LogisticProblem(SU.unit_scaled(_dataset()), l2=0.1)


def _at_rest():
    """All features 0 and each client's labels balanced: every client gradient at the zero model
    is 0 (W: X^T(...) = 0; bias: mean(softmax) - label frequencies = 1/2 - 1/2), so the zero
    model is already every algorithm's fixed point and every weighted minimiser."""
    from fedlib.data.clients import FederatedDataset
    from fedlib.problems.logistic import LogisticProblem

    ds = FederatedDataset(train_x=[np.zeros((2, 2)), np.zeros((4, 2))],
                          train_y=[np.array([0, 1]), np.array([0, 1, 1, 0])],
                          test_x=[np.zeros((0, 2))] * 2, test_y=[np.zeros(0, dtype=np.int64)] * 2, num_classes=2)
    return LogisticProblem(ds, l2=0.1)


def test_canonical_centres_the_bias_of_a_copy():
    W, b = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([1.0, 3.0])
    params = {"W": W, "b": b}
    # packed [W; b] = [[1, 2], [3, 4], [1, 3]]; the bias row minus its mean 2 -> [-1, 1]
    np.testing.assert_array_equal(SU.canonical(params), [1.0, 2.0, 3.0, 4.0, -1.0, 1.0])
    np.testing.assert_array_equal(params["b"], [1.0, 3.0])   # the caller's parameters are untouched
    np.testing.assert_array_equal(params["W"], [[1.0, 2.0], [3.0, 4.0]])


def test_fixed_point_tolerance_is_relative_to_the_first_step(hand):
    """Docstring: the solve stops when ||Phi(x) - x||_inf <= tol * ||Phi(x0) - x0||_2, so the
    returned 2-norm residual is at most sqrt(P) times that (P = 6 parameters here); a small
    lr (first step ~1e-3) must not loosen the bound."""
    from fedlib.problems.logistic import pack_params

    phi = SU.round_map(hand, "fedavg", 1e-3, [2, 3])
    x0 = pack_params(hand.init_params()).ravel()
    scale = float(np.linalg.norm(phi(x0) - x0))
    assert 0 < scale < 1e-2
    _, res = SU.fixed_point_of_round(hand, "fedavg", 1e-3, [2, 3], tol=1e-4)
    assert res <= 1e-4 * scale * math.sqrt(6)


def test_fixed_point_refuses_a_non_positive_tol(hand):
    for bad in (0.0, -1e-9):
        with pytest.raises(ValueError, match=r"^tol must be a finite number > 0, got " + re.escape(repr(bad))):
            SU.fixed_point_of_round(hand, "fedavg", 0.1, [2, 3], tol=bad)


def test_fixed_point_not_converged_is_a_runtime_error(hand, monkeypatch):
    """scipy's root giving up (success False) is reported, not returned as if it were the limit."""
    import scipy.optimize

    def gives_up(fun, x0, **kwargs):
        return scipy.optimize.OptimizeResult(x=np.asarray(x0), success=False, message="maxiter reached")

    monkeypatch.setattr(scipy.optimize, "root", gives_up)
    with pytest.raises(RuntimeError, match=r"^fixed point of fednova \(lr 0.1\): Newton-Krylov did not converge "
                                           r"to 1e-13 x .*\(maxiter reached\)"):
        SU.fixed_point_of_round(hand, "fednova", 0.1, [2, 3])


def test_already_at_the_limit_and_at_the_minimiser():
    """Zero gradients at the start: the fixed point is the start with residual 0 (no solve), and
    Newton stops at step 0 with |grad| = 0 <= tol * 0."""
    prob = _at_rest()
    x, res = SU.fixed_point_of_round(prob, "fedavg", 0.1, [2, 3])
    assert res == 0.0 and not np.any(x["W"]) and not np.any(x["b"])
    theta, G, _, steps = SU.newton_minimize(prob, prob.p)
    assert steps == 0 and not np.any(theta) and not np.any(G)
    xm, g = SU.weighted_minimizer(prob, [0.3, 0.7])
    assert g == 0.0 and not np.any(xm["W"]) and not np.any(xm["b"])


def test_flat_directions_by_hand(hand):
    """P = (d+1) C = 3 * 2: without a penalty each row of Theta = [W; b] is flat (k = 3 columns,
    1/sqrt(2) on the row's two entries); with one only the bias row (k = 1)."""
    from fedlib.problems.logistic import LogisticProblem

    r = 1 / math.sqrt(2)
    want = np.array([[r, 0, 0], [r, 0, 0], [0, r, 0], [0, r, 0], [0, 0, r], [0, 0, r]])
    np.testing.assert_array_equal(SU.flat_directions(LogisticProblem(hand.dataset, l2=0.0)), want)
    np.testing.assert_array_equal(SU.flat_directions(hand), want[:, 2:])


def test_newton_minimize_counts_its_steps_and_returns_the_quotient_basis(hand):
    """steps is the number of Newton steps taken: a budget of exactly that many succeeds, one
    fewer raises. Q is an orthonormal basis of the complement of the flat (bias) direction and
    theta has no flat component (its bias is centred)."""
    theta, G, Q, steps = SU.newton_minimize(hand, [0.3, 0.7])
    assert steps >= 2
    SU.newton_minimize(hand, [0.3, 0.7], max_steps=steps)
    with pytest.raises(RuntimeError, match=rf"^newton_minimize: \|grad\| = .* after {steps - 1} Newton steps"):
        SU.newton_minimize(hand, [0.3, 0.7], max_steps=steps - 1)
    assert Q.shape == (6, 5)
    np.testing.assert_allclose(Q.T @ Q, np.eye(5), atol=1e-14)
    np.testing.assert_allclose(Q.T @ SU.flat_directions(hand), 0.0, atol=1e-14)
    assert abs(theta[4] + theta[5]) < 1e-15
    g0 = np.linalg.norm(SU.client_gradients(hand, hand.init_params()), axis=1)
    assert np.linalg.norm(np.array([0.3, 0.7]) @ G) <= 1e-11 * float(np.array([0.3, 0.7]) @ g0)


def _newton_direction(problem, w):
    """The projected Newton direction at the zero model in plain numpy: the gradient and Hessian of
    sum_i w_i F_i, restricted to the complement of the flat bias direction f (P = I - f f^T)."""
    from fedlib.problems.logistic import pack_params

    params = problem.init_params()
    g = sum(w_i * pack_params(problem.model.grad(params, problem.dataset.train_x[i], problem.dataset.train_y[i]))
            .ravel() for i, w_i in enumerate(w))
    H = sum(w_i * problem.client_hessian(params, i) for i, w_i in enumerate(w))
    f = np.zeros(g.size)
    f[-2:] = 1 / math.sqrt(2)
    P = np.eye(g.size) - np.outer(f, f)
    d = -P @ np.linalg.pinv(P @ H @ P) @ (P @ g)
    return g, d


@pytest.mark.parametrize("case", ["full step", "halve once"])
def test_newton_line_search_is_armijo_from_the_full_step(hand, case):
    """Backtracking as documented: try t = 1 (the full Newton step) first, halve t until
    loss(theta + t d) <= loss(theta) + 1e-4 t g.d. A scripted loss (recording the trial t) decides:
    'full step': a decrease of 1.5e-4 |g.d| at t = 1 is enough (one trial);
    'halve once': an increase at t = 1 is refused, then a decrease of 0.75e-4 |g.d| at t = 1/2
    (more than 1e-4 * 1/2 * |g.d|) is taken: trials 1, 1/2."""
    from fedlib.problems.logistic import pack_params

    w = [0.3, 0.7]
    g, d = _newton_direction(hand, w)
    gd = float(g @ d)
    assert gd < 0
    trials = []

    def loss(params):
        v = pack_params(params).ravel()
        if not np.any(v):
            return 1.0   # the start
        t = round(float(v @ d / (d @ d)), 9)
        np.testing.assert_allclose(v, t * d, rtol=1e-9, atol=1e-15)   # a trial is on the Newton direction
        trials.append(t)
        if case == "halve once" and t == 1.0:
            return 1.0 + 0.5e-4 * abs(gd)
        return 1.0 + 1.5e-4 * t * gd

    with pytest.raises(RuntimeError, match=r"^newton_minimize: \|grad\| = .* after 1 Newton steps"):
        SU.newton_minimize(hand, w, loss=loss, max_steps=1)
    assert trials == ([1.0] if case == "full step" else [1.0, 0.5])


def _numpy_newton(problem, w, steps=8):
    """Plain full Newton steps (no line search) from the zero model on sum_i w_i F_i, projected off
    the flat bias direction (P = I - f f^T), in numpy: the minimiser of a well-conditioned problem."""
    from fedlib.problems.logistic import pack_params, unpack_params

    shape = pack_params(problem.init_params()).shape
    v = np.zeros(int(np.prod(shape)))
    f = np.zeros(v.size)
    f[-shape[1]:] = 1 / math.sqrt(shape[1])
    P = np.eye(v.size) - np.outer(f, f)
    for _ in range(steps):
        params = unpack_params(v.reshape(shape))
        g = sum(w_i * pack_params(problem.model.grad(params, problem.dataset.train_x[i],
                                                     problem.dataset.train_y[i])).ravel() for i, w_i in enumerate(w))
        H = sum(w_i * problem.client_hessian(params, i) for i, w_i in enumerate(w))
        v = v - P @ np.linalg.pinv(P @ H @ P) @ (P @ g)
    return v


@pytest.mark.parametrize("a", [0.25, 0.95])
def test_newton_minimize_does_not_stall_on_rounding_near_the_minimiser(hand, a):
    """w = (0.25, 0.75) and (0.95, 0.05) on this 6-parameter problem (Hessian condition ~10) raised
    'after 100 Newton steps' with |grad| ~3e-11 against a stop of ~8e-12: after five full steps the
    Armijo decrease 1e-4 t g.d (~1e-20) is below the rounding of the loss, the comparison failed on
    noise, t shrank to ~2e-7 and theta stopped moving. The minimiser is the limit of plain full
    Newton steps (no line search, numpy; the problem is well conditioned): compare with 8 of them."""
    w = np.array([a, 1 - a])
    theta, G, _, steps = SU.newton_minimize(hand, w)
    # |grad| <= 1e-11 * ~0.8 at the stop and ||H^-1|| ~ 10 on the quotient: theta is within ~1e-10
    np.testing.assert_allclose(theta, _numpy_newton(hand, w), rtol=0, atol=1e-9)
    g0 = np.linalg.norm(SU.client_gradients(hand, hand.init_params()), axis=1)
    assert np.linalg.norm(w @ G) <= 1e-11 * float(w @ g0) and steps <= 10


def test_surrogate_sweep_info_by_hand(hand):
    """p = (1/2, 1/2), tau = (2, 3): FedAvg's w = p tau / p.tau = (0.4, 0.6); F_min and surrogate_min
    are the numpy Newton minimisers for p and w (bias centred) and gap is their distance; info's p is
    a copy. No algorithms: no fixed points to solve for (no step sizes is refused: chapter 7 fits a
    slope over them)."""
    from fedlib.problems.logistic import pack_params

    points, info = SU.surrogate_sweep(hand, [2, 3], [0.1], algorithms=())
    assert points == []
    np.testing.assert_allclose(info["w"], [0.4, 0.6], rtol=1e-15)
    vp, vw = _numpy_newton(hand, hand.p), _numpy_newton(hand, [0.4, 0.6])
    # both within ~1e-10 of the minimisers (the relative gradient stop 1e-11, ||H^-1|| ~ 10)
    np.testing.assert_allclose(pack_params(info["F_min"]).ravel(), vp, rtol=0, atol=1e-9)
    np.testing.assert_allclose(pack_params(info["surrogate_min"]).ravel(), vw, rtol=0, atol=1e-9)
    assert np.linalg.norm(vp - vw) > 0.05
    assert info["gap"] == pytest.approx(float(np.linalg.norm(vp - vw)), abs=1e-8)
    np.testing.assert_array_equal(info["p"], [0.5, 0.5])
    info["p"][0] = 0.0
    np.testing.assert_array_equal(hand.p, [0.5, 0.5])
    with pytest.raises(ValueError, match=r"^local_steps must have 2 entries \(one per client\), got 3"):
        SU.surrogate_sweep(hand, [2, 3, 4], [0.1])


@pytest.mark.parametrize("tail, match", [
    (0, r"^tail must be an integer >= 1, got 0"), (-1, r"^tail must be an integer >= 1, got -1"),
    (2.0, r"^tail must be an integer >= 1, got 2\.0"),
    (4, r"^tail: the median over the last 4 rounds of a 3-round run would take in the initial loss")])
def test_end_loss_refuses_a_tail_outside_the_rounds(tail, match):
    """Losses (initial 9; rounds 3, 2, 1): tail = 0 gave the median of the whole curve (2.5, the
    initial loss included, as if tail were 4), tail = -1 the median of [3, 2, 1], tail = 4 took in
    the initial loss, and tail = 2.0 a TypeError from the slice; claim_holds passes tail through."""
    c = _curves([[9.0, 3.0, 2.0, 1.0]])
    with pytest.raises(ValueError, match=match):
        S.end_loss(c, tail)
    with pytest.raises(ValueError, match=match):
        S.claim_holds({("s", "FedNova"): c, ("s", "FedAvg"): c}, ["s"], tail=tail)
    np.testing.assert_array_equal(S.end_loss(c, 3), [2.0])   # every round, not the initial loss
    np.testing.assert_array_equal(S.end_loss(c, np.int64(1)), [1.0])


def test_end_loss_mean_counts_every_round_of_the_window():
    """Rounds 3, 1, 8, 1 after an initial 9 (a burst in the third): the median over the last 3 rounds is 1 whatever
    the burst, the mean is 10/3; over all 4 rounds 1.0 and 13/4 (the initial 9 never enters). A mean taken as the
    median, or over the initial loss, would give other numbers."""
    c = _curves([[9.0, 3.0, 1.0, 8.0, 1.0], [9.0, 2.0, 2.0, 2.0, 2.0]])
    np.testing.assert_array_equal(S.end_loss(c, 3), [1.0, 2.0])
    np.testing.assert_allclose(S.end_loss(c, 3, statistic="mean"), [10 / 3, 2.0], rtol=1e-15)
    np.testing.assert_allclose(S.end_loss(c, 4, statistic="mean"), [13 / 4, 2.0], rtol=1e-15)
    np.testing.assert_array_equal(S.end_loss(c, statistic="mean"), [1.0, 2.0])   # tail None: the final loss
    with pytest.raises(ValueError, match=r"^tail: the mean over the last 5 rounds of a 4-round run would take in"):
        S.end_loss(c, 5, statistic="mean")
    for bad in ("average", "Mean", None, 1):
        with pytest.raises(ValueError, match=r"^statistic must be one of \['mean', 'median'\], got "):
            S.end_loss(c, 2, statistic=bad)


# ------------------------------------------------------------------------ mutants of 37f92d9..d2bb791
def _c(*rows):
    """Curves of one seed (0,) with the training losses ``rows`` (round 0 first)."""
    return S.Curves((0,), np.array(rows, dtype=float), *[None] * 5)


def test_rounds_to_best_loss_takes_the_lowest_loss_of_the_rounds_not_the_initial_one():
    """The threshold is ``worse``'s lowest loss over rounds 1..T (``L* = min_{1<=t<=T}``), not over the initial
    loss too: a run whose loss rises from 1.0 to 2.0 and settles at 1.5 has L* = 1.5, reached at round 2 by it
    and at round 1 by a run at 1.4 (mutant SN3, the minimum over round 0 too: L* = 1.0, which no round of either
    run reaches, inf rounds both)."""
    rows = S.rounds_to_best_loss({("s", "A"): _c([1.0, 2.0, 1.5, 1.6]), ("s", "B"): _c([1.0, 1.4, 1.3, 1.2])},
                                 ["s"], better="B", worse="A")["s"]
    assert rows.threshold.tolist() == [1.5]
    assert rows.worse_rounds.tolist() == [2.0] and rows.better_rounds.tolist() == [1.0]


def test_plots_list_three_missing_curves_without_an_ellipsis():
    """The message lists at most three missing (setting, label) pairs and adds ' ...' only when more are missing:
    three missing are listed whole (mutant SN6, ``> 3`` -> ``>= 3``: ' ...' after the whole list)."""
    setting = S.Setting("a", "setting A", (2, 2))
    for plot in (S.plot_losses, S.plot_diagnostics):
        with pytest.raises(ValueError) as three:
            plot({}, [setting], ["FedAvg", "FedProx", "FedNova"])
        assert str(three.value) == ("grid: no curves for [('a', 'FedAvg'), ('a', 'FedProx'), ('a', 'FedNova')] "
                                    "(keys are (setting.name, label))")
        with pytest.raises(ValueError) as four:
            plot({}, [setting], ["FedAvg", "FedProx", "FedNova", "SCAFFOLD"])
        assert str(four.value) == ("grid: no curves for [('a', 'FedAvg'), ('a', 'FedProx'), ('a', 'FedNova')] ... "
                                   "(keys are (setting.name, label))")


@pytest.mark.parametrize("lrs, got", [(0.02, "got 0.02"), ({0.02: "a"}, "got a dict")])
def test_lr_sweep_refuses_one_number_or_a_mapping_for_lrs_by_name(small, lrs, got):
    """``lrs`` is a sequence of learning rates: one number (a TypeError, 'float object is not iterable') or a
    mapping (its keys taken as the rates) is refused naming ``lrs``, before any run (mutant SN9, the rates read
    without ``check_sequence``)."""
    with pytest.raises(ValueError, match=rf"^lrs must be a sequence of learning rates, {got}"):
        S.lr_sweep(small, None, {}, lrs, [0], 10)


# ====================================================================== f9b9704..HEAD: rounds_to_reach's threshold,
# claim_holds / rounds_to_best_loss's settings
_C2 = lambda *rows: S.Curves((0, 1), np.array(rows, dtype=float), *[None] * 5)  # noqa: E731
_GRID2 = {("s", "A"): _C2([2, 1.5, 1.2], [2, 1.4, 1.0]), ("s", "B"): _C2([2, 1.3, 1.0], [2, 1.2, 0.9])}


@pytest.mark.parametrize("threshold", [[1.3], [[1.3, 1.3]], "1.3", b"1.3", [1.3, [1.0, 2.0]]])
def test_rounds_to_reach_takes_a_number_or_exactly_one_per_seed(threshold):
    """Two seeds: a threshold is one number or two. One of length 1 (numpy would broadcast it to both seeds), a
    2-d one, a numeric string (np.asarray('1.3', float64) is 1.3) and a ragged list (numpy's ValueError 'setting an
    array element with a sequence') are refused by name. Kills the mutants that take a shorter list (``!=`` ->
    ``>``), a 2-d one (``ndim > 1`` -> ``> 2``), strings, and that let numpy's ValueError through."""
    with pytest.raises(ValueError, match=r"^threshold must be a number or one number per seed \(2\), got "):
        S.rounds_to_reach(_GRID2["s", "A"], threshold)
    # by hand: seed 0 reaches 1.5 at round 1, seed 1 reaches 1.0 at round 2
    assert S.rounds_to_reach(_GRID2["s", "A"], [1.5, 1.0]).tolist() == [1.0, 2.0]


@pytest.mark.parametrize("call", [lambda: S.claim_holds(_GRID2, "s", better="B", worse="A"),
                                  lambda: S.rounds_to_best_loss(_GRID2, "s", better="B", worse="A")])
def test_grid_helpers_refuse_one_setting_given_as_a_string(call):
    """settings is a sequence of setting names: 's' alone is refused by name (iterated, 'st' would be read as the
    settings 's' and 't'). Kills the mutants that iterate settings unchecked."""
    with pytest.raises(ValueError, match=r"^settings must be a sequence of setting names, got 's'$"):
        call()

"""Mutation-testing pass on ``fedlib/experiments/quadratic.py`` and ``fedlib/experiments/custom.py``:
each test pins behaviour that the rest of the suite left free (an AST mutant of the module survived
every test that runs the function). Expected values come from the paper's formulas, small hand
computations (in the comments) or plain numpy loops, never from the functions' own output.

Mutants of d562d43..c3b27eb, ``reference_differences``' check of the model it is given
(fedlib/experiments/custom.py) (pass described in tests/README.md, Mutation passes).

Mutants of efe3bcd..52ae29d, fedlib/experiments/quadratic.py and custom.train_clients (pass described in
tests/README.md, Mutation passes):
  Q1-Q4 quadratic: tau1 unchecked, tau2 >= 0, mu unchecked, tau2_values not checked to be a sequence.
  CU1-CU5 custom.train_clients: momentum check, test_x feature shape, test_y length, mu passed through, ndim.
  killed here: Q4, CU1; equivalent: CU5 (a 1-d test_x has shape[1:] == (), which differs from the clients'
  feature shape unless client_x itself is 1-d, which train_clients refuses earlier).

Mutants of 86c5527..90cbd4d (experiments/custom.py) (pass described in tests/README.md, Mutation passes):
experiments/custom.py: CF1 ``>`` -> ``<``; CF2 drop the isfinite test (always raises); CF5 ``any(1)`` -> ``any(0)``;
  CF6 ``_non_finite`` of the cast; CF7 / CF8 features / test features not checked; CF9 ``test_features`` named
  ``features``; TC1 client features not cast; TC2 / TC8 ``_non_finite`` of the cast; TC3 an integer test_x let
  through; TC4 test_x not cast; TC7 test_x's finite check dropped; TC9 the sample row from the uncast features:
  killed by the suite. TC5 the first non-finite test_x row -> the last: killed here.
  CF3 ``finfo(x).max > finfo(dtype).max`` -> ``>=`` and CF4 drop that comparison (every cast checked): equivalent
  (TensorEngine refuses non-finite features and test features before the cast, so a cast that does not narrow is
  finite; only the cost differs). TC6 ``torch.cat(cast)`` -> ``torch.cat(xs)``: equivalent (the engine casts the
  concatenation to the same dtype: float16/32/64 values go up to float64 exactly and are rounded once, as by the
  direct cast, and every value was checked finite in that dtype; only the memory differs).

Mutants of 37f92d9..d2bb791 (the changed hunks of fedlib/experiments/quadratic.py: round_map_radius,
small_lr_limit, weighted_limit_check) (pass described in tests/README.md, Mutation passes): 8 mutants, one at a
time, ``pytest -x`` on test_experiments_quadratic.py, this file, test_closed_forms_simulated.py and
``tests/test_doctests.py -k fedlib.experiments.quadratic``: 7 killed by the suite (QE1 eigvals of an overflowing
map, QE2 FedProx's limit taken as x*, QE3 ``weights`` ignored, QE4 the tenth at lr / 100, QE6 ``separation`` as
``||target||``, QE7 the uniform point with the problem's p, QE8 ``name`` unchecked), 1 here (QE5 the fixed point
at lr / 10 without ``mu``), 0 equivalent.

Mutants of 37f92d9..28127ce (third, the changed hunks of fedlib/experiments/custom.py)
(pass described in tests/README.md, Mutation passes):
  CU1 _refuse_one_client ``<=`` -> ``<``; CU2 features not detached; CU3 test_labels not checked against K; CU4
  an algorithms that is no iterable let through. all killed by the suite.

Mutants of f9b9704..2e0d04d (fedlib/experiments/quadratic.py: two_client_sweep's names, surrogate_optimum /
small_lr_limit's weights) (pass described in tests/README.md, Mutation passes):
  E9 fedprox among the choices; E10 ``names or`` before check_sequence; E11 surrogate_optimum's weights unchecked;
  E12 small_lr_limit's weights unchecked (as ``pass``); E13 ``names[k]`` -> ``names``. killed by the suite: E9-E13.

Mutants of 0571233~1..165a974 (fedlib/experiments/quadratic.py: fixed_local_steps' low/high by check_count) (pass
described in tests/README.md, Mutation passes):
  Q1 low by check_int; Q2 high by check_int; Q3 high's minimum 1, not low. killed by the suite: Q1-Q3.

Mutants of 41ab8e8..3aae5f7 (fedlib/experiments/custom.py, 9ac4aae and 49333ae: train_clients' seed and label
checks) (pass described in tests/README.md, Mutation passes): 6 mutants (ids as drafted: gaps are drafts not run),
one at a time, ``pytest -x -q`` on test_custom_model.py and this file; survivors re-run against test_bad_inputs.py,
test_bad_inputs_core.py, test_mismatched_arguments.py and the doctests of fedlib.experiments.custom: 3 killed by the
suite, 2 by a test of the pass, 1 equivalent.
  CU2 seed's minimum 1; CU3 ``y.ndim > 1`` (a 0-d label tensor let through); CU4 the hints for ``y.ndim >= 2``; CU5
  the column hint for ``y.shape[1] <= 1``; CU6 ``x.shape[0] < 0`` (an empty client let through); CU8 (of the fix
  16f0ee6) its ``and y.shape[1] > 0`` dropped. killed by the suite: CU2, CU4, CU6. killed here: CU3
  (test_train_clients_names_a_label_tensor_of_no_dimension); CU8 by the fix's test
  (tests/test_custom_model.py::test_train_clients_suggests_no_repair_for_labels_of_no_column).
  equivalent: CU5 since 16f0ee6, which it showed: labels of shape (n, 0) got the one-hot hint, ``y.argmax(1)``,
  which raises on them; now they get no hint, and for ``y.shape[1] > 0`` ``<= 1`` is ``== 1``.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from fedlib.experiments import quadratic as Q
from fedlib.experiments.custom import train_clients
from fedlib.plotting import ALGORITHM_COLORS
from fedlib.rng import generator
from fedlib.schedules import FixedSteps


# ---------------------------------------------------------------- quadratic: module tables
def test_labels_closed_form_and_styles_tables():
    assert Q.LABELS == {"fedavg": "FedAvg", "fedprox": "FedProx", "vrlsgd": "VRLSGD", "fednova": "FedNova"}
    assert Q.CLOSED_FORM == ("fedavg", "fedprox", "fednova")
    assert set(Q.STYLES) == {"fedavg", "fedprox", "vrlsgd", "fednova"}
    for name, style in Q.STYLES.items():   # FedNova dashed, the others solid, the library's colours
        assert style == {"color": ALGORITHM_COLORS[name], "ls": "--" if name == "fednova" else "-"}


# ---------------------------------------------------------------- quadratic_algorithm
def test_quadratic_algorithm_names_and_mu():
    with pytest.raises(ValueError, match=r"^mu must be a finite number > 0, got 0\.0"):   # the default mu
        Q.quadratic_algorithm("fedprox", 0.1)
    with pytest.raises(ValueError, match=r"^name must be one of \['fedavg', 'fednova', 'fedprox', 'vrlsgd'\]"):
        Q.quadratic_algorithm("scaffold", 0.1)
    prox = Q.quadratic_algorithm("fedprox", 0.1, 0.5)
    assert (prox.name, prox.solver.lr, prox.solver.mu) == ("fedprox", 0.1, 0.5)
    nova = Q.quadratic_algorithm("fednova", 0.2, mu=7.0)   # mu is ignored: plain SGD
    assert (nova.name, nova.solver.lr, nova.solver.mu) == ("fednova", 0.2, 0.0)


# ---------------------------------------------------------------- run_quadratic
def test_run_quadratic_default_mu_refuses_fedprox():
    prob = Q.two_client_problem()
    with pytest.raises(ValueError, match="^mu must be a finite number > 0"):
        Q.run_quadratic(prob, "fedprox", 0.1, FixedSteps([1, 1]), 1)


def test_run_quadratic_zero_rounds_records_the_start_only():
    prob = Q.two_client_problem(2.0)   # x* = 0
    x0 = np.array([3.0])
    run = Q.run_quadratic(prob, "fedavg", 0.1, FixedSteps([1, 2]), 0, x0=x0)
    np.testing.assert_array_equal(run.distances, [3.0])
    np.testing.assert_array_equal(run.params, [3.0])
    assert not np.shares_memory(run.params, x0)   # the caller's x0 is copied, not aliased
    assert (run.diverged, run.diverged_round, run.reason) == (False, None, "")
    with pytest.raises(ValueError, match="^rounds must be an integer >= 0"):
        Q.run_quadratic(prob, "fedavg", 0.1, FixedSteps([1, 2]), -1)


def test_run_quadratic_stop_above_is_inclusive():
    """``stop_above``: a distance equal to it is kept, only a larger one stops the run."""
    prob = Q.two_client_problem()
    # two clients, H = 1, e = (a, -a), lr = 0.5, tau = (1, 1): x -> mean_i (x - 0.5 (x -+ a)) = x / 2
    run = Q.run_quadratic(prob, "fedavg", 0.5, FixedSteps([1, 1]), 3, x0=[4.0], stop_above=4.0)
    np.testing.assert_allclose(run.distances, [4.0, 2.0, 1.0, 0.5], rtol=0, atol=1e-15)
    assert not run.diverged
    run = Q.run_quadratic(prob, "fedavg", 0.5, FixedSteps([1, 1]), 3, x0=[4.0], stop_above=3.999)
    assert (run.diverged, run.diverged_round, run.reason) == (True, 0, "distance > 3.999")
    np.testing.assert_array_equal(run.distances, [4.0])


def test_run_quadratic_marks_a_non_finite_aggregate_as_divergence():
    """A huge lr overflows the local steps to +-inf; their mean is nan and the algorithm raises
    FloatingPointError in round 0. The run is marked (not raised), stopped at round 1, and keeps
    the last finite iterate (x0)."""
    prob = Q.two_client_problem()
    # client 1 from x = 0: x1 = lr * a = 1e200, x2 = (1 - lr) x1 + lr a ~ -1e400 = -inf; client 2: +inf
    run = Q.run_quadratic(prob, "fedavg", 1e200, FixedSteps([2, 2]), 5)
    assert run.diverged and run.diverged_round == 1
    assert run.reason.startswith("round 0: the aggregated update is not finite")
    np.testing.assert_array_equal(run.distances, [0.0])
    np.testing.assert_array_equal(run.params, [0.0])


# ---------------------------------------------------------------- rounds_to_converge
@pytest.mark.parametrize("lr,rho", [(2.0, 1.0), (2.5, 1.5)])
def test_rounds_to_converge_refuses_a_radius_of_one_or_more(lr, rho):
    # H_i = 1, tau = (1, 1): each client maps x -> (1 - lr) x + lr e_i, so the round map's M = 1 - lr
    prob = Q.two_client_problem()
    assert Q.round_map_radius(prob, "fedavg", lr, [1, 1]) == rho
    with pytest.raises(ValueError, match=rf"^lr: the rounds of fedavg do not converge \(spectral radius {rho:g} >= 1\)"):
        Q.rounds_to_converge(prob, "fedavg", lr, [1, 1])


def test_rounds_to_converge_is_the_smallest_t_with_rho_to_the_t_below_reduction():
    prob = Q.two_client_problem()
    # lr = 0.5, tau = (1, 1): M = 1/2. 2^-9 = 1.95e-3 > 1e-3 >= 2^-10 = 9.8e-4: T = 10
    assert Q.rounds_to_converge(prob, "fedavg", 0.5, [1, 1], reduction=1e-3) == 10
    # reduction 0.6 >= 0.5 = rho: one round is enough
    assert Q.rounds_to_converge(prob, "fedavg", 0.5, [1, 1], reduction=0.6) == 1


# ---------------------------------------------------------------- tau_weighted_optimum
def test_tau_weighted_optimum_checks_local_steps_by_name():
    prob = Q.two_client_problem()
    with pytest.raises(ValueError, match="^local_steps must have 2 entries"):
        Q.tau_weighted_optimum(prob, [1, 2, 3])


# ---------------------------------------------------------------- problems
def test_identity_quadratic_defaults_follow_the_documented_stream():
    """Defaults seed 0 and spread 5: e_i = 5 * N(0, I) from stream (0, "data", i); H_i = I, p_i = 1/m."""
    prob = Q.identity_quadratic(3, 2)
    for i in range(3):
        np.testing.assert_array_equal(prob.e[i], 5.0 * generator(0, "data", i).standard_normal(2))
    np.testing.assert_array_equal(prob.H, [np.eye(2)] * 3)
    np.testing.assert_array_equal(prob.p, [1 / 3] * 3)
    other = Q.identity_quadratic(2, 4, seed=7, spread=0.5, p=[0.25, 0.75])
    np.testing.assert_array_equal(other.e[1], 0.5 * generator(7, "data", 1).standard_normal(4))
    np.testing.assert_array_equal(other.p, [0.25, 0.75])


def test_identity_quadratic_sizes_and_spread_are_checked():
    one = Q.identity_quadratic(1, 1)   # one client, one dimension: the smallest problem
    assert (one.num_clients, one.dim) == (1, 1) and one.p.tolist() == [1.0]
    with pytest.raises(ValueError, match="^num_clients must be an integer >= 1, got 0"):
        Q.identity_quadratic(0, 2)
    with pytest.raises(ValueError, match="^dim must be an integer >= 1, got 0"):
        Q.identity_quadratic(2, 0)
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match="^spread must be a finite number > 0"):
            Q.identity_quadratic(2, 2, spread=bad)


def test_two_client_problem_default_and_checks():
    prob = Q.two_client_problem()   # a = 1: F_1 = (x - 1)^2 / 2, F_2 = (x + 1)^2 / 2
    np.testing.assert_array_equal(prob.H, np.ones((2, 1, 1)))
    np.testing.assert_array_equal(prob.e, [[1.0], [-1.0]])
    np.testing.assert_array_equal(prob.p, [0.5, 0.5])
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match="^a must be a finite number > 0"):
            Q.two_client_problem(bad)


def test_instance_seed_is_a_31_bit_seed_per_stream():
    seeds = [Q.instance_seed(3, k) for k in range(200)]
    assert all(isinstance(s, int) and 0 <= s < 2 ** 31 for s in seeds)
    # uniform on [0, 2^31): 200 draws all below 2^30 has probability 2^-200, all below 62 even less
    assert max(seeds) >= 2 ** 30 and len(set(seeds)) == 200
    assert Q.instance_seed(3, 5) == Q.instance_seed(3, 5, purpose="instances") != Q.instance_seed(3, 5, "figure2")
    assert Q.instance_seed(3, 5) != Q.instance_seed(4, 5)
    with pytest.raises(ValueError, match="^index must be an integer >= 0"):
        Q.instance_seed(0, -1)


def test_fixed_local_steps_is_uniform_on_the_inclusive_range():
    tau = Q.fixed_local_steps(0, 0, 200, 1, 2)
    assert tau.shape == (200,) and set(tau.tolist()) == {1, 2}   # both ends drawn, nothing else
    np.testing.assert_array_equal(Q.fixed_local_steps(0, 1, 5, 3, 3), [3] * 5)   # low = high: fixed
    np.testing.assert_array_equal(Q.fixed_local_steps(2, 1, 1, 4, 9), Q.fixed_local_steps(2, 1, 1, 4, 9))
    assert Q.fixed_local_steps(0, 0, 1, 1, 5).shape == (1,)


@pytest.mark.parametrize("args,message", [
    ((0, 4, 1), r"^num_clients must be an integer >= 1, got 0"),
    ((3, 0, 4), r"^low must be a whole number >= 1, got 0"),
    ((3, 5, 4), r"^high must be a whole number >= 5, got 4"),
])
def test_fixed_local_steps_checks_its_range(args, message):
    with pytest.raises(ValueError, match=message):
        Q.fixed_local_steps(0, 0, *args)


# ---------------------------------------------------------------- fixed_point_check
def test_fixed_point_check_checks_every_name_before_anything_runs(monkeypatch):
    """Documented: "every name is checked before anything runs" — FedAvg is not simulated when a
    later name (FedProx at mu = 0) is refused."""
    calls = []
    monkeypatch.setattr(Q, "run_quadratic", lambda *a, **k: calls.append(a[1]))
    with pytest.raises(ValueError, match="^mu must be a finite number > 0"):
        Q.fixed_point_check(Q.two_client_problem(), [1, 2], 0.1, names=("fedavg", "fedprox"))
    with pytest.raises(ValueError, match=r"^name must be one of \['fedavg', 'fednova', 'fedprox'\]"):
        Q.fixed_point_check(Q.two_client_problem(), [1, 2], 0.1, names=("fednova", "vrlsgd"))
    assert calls == []


def test_fixed_point_check_checks_local_steps_by_name():
    with pytest.raises(ValueError, match="^local_steps must have 2 entries"):
        Q.fixed_point_check(Q.two_client_problem(), [1, 2, 3], 0.1)


def _scalar_round_maps(e, lr, tau):
    """Two scalar clients F_i = (x - e_i)^2 / 2 (H_i = 1), p = (1/2, 1/2): one round of FedAvg and of
    FedNova as affine maps x -> (slope, shift), by hand. Client i after tau_i GD steps from x is
    e_i + q_i (x - e_i), q_i = (1 - lr)^tau_i; FedAvg averages that; FedNova moves x by
    tau_eff * sum_i p_i (x_i - x) / tau_i (eq. 4, ||a_i||_1 = tau_i), tau_eff = sum_i p_i tau_i."""
    q = [(1 - lr) ** t for t in tau]
    avg = (0.5 * (q[0] + q[1]), 0.5 * ((1 - q[0]) * e[0] + (1 - q[1]) * e[1]))
    teff = 0.5 * (tau[0] + tau[1])
    g = [teff * 0.5 * (1 - q[i]) / tau[i] for i in range(2)]   # x_new = x + sum_i g_i (e_i - x)
    nova = (1 - g[0] - g[1], g[0] * e[0] + g[1] * e[1])
    return {"fedavg": avg, "fednova": nova}


def _rounds_for(rho, reduction):
    t = 1
    while rho ** t > reduction:
        t += 1
    return t


def test_fixed_point_check_numbers_on_a_scalar_example():
    """Clients with optima 3 and 1 (x* = 2), tau = (1, 2), lr = 0.1, stopped early (reduction 0.5) so
    that the simulated point is still visibly off the fixed point. By hand: FedAvg x -> 0.855 x + 0.245,
    x~ = 49/29; FedNova x -> 0.85375 x + 0.29625, x~ = 79/39. From x = 0 the error after T rounds is
    rho^T |x~|, so rel_error = rho^T; dist_to_opt = |x~ - 2|."""
    from fedlib.problems.quadratic import QuadraticProblem

    prob = QuadraticProblem(np.ones((2, 1, 1)), np.array([[3.0], [1.0]]), np.array([0.5, 0.5]))
    maps = _scalar_round_maps([3.0, 1.0], 0.1, [1, 2])
    assert maps["fedavg"] == pytest.approx((0.855, 0.245)) and maps["fednova"] == pytest.approx((0.85375, 0.29625))
    checks = Q.fixed_point_check(prob, [1, 2], 0.1, reduction=0.5)
    assert [c.name for c in checks] == ["fedavg", "fednova"]
    for c, x_fixed in zip(checks, (49 / 29, 79 / 39)):
        slope, shift = maps[c.name]
        T = _rounds_for(slope, 0.5)   # 5 for both
        x = 0.0
        for _ in range(T):
            x = slope * x + shift
        assert (c.rounds, T) == (T, 5)
        assert c.radius == pytest.approx(slope, rel=1e-12)
        np.testing.assert_allclose(c.closed_form, [x_fixed], rtol=1e-12)
        np.testing.assert_allclose(c.simulated, [x], rtol=1e-12)
        assert c.rel_error == pytest.approx(slope ** T, rel=1e-9)
        assert c.dist_to_opt == pytest.approx(abs(x_fixed - 2.0), rel=1e-9)


def test_fixed_point_check_raises_when_a_run_diverges(monkeypatch):
    bad = Q.QuadraticRun("fedavg", np.zeros(1), np.array([0.0, np.inf]), True, 1, "distance > 1")
    monkeypatch.setattr(Q, "run_quadratic", lambda *a, **k: bad)
    with pytest.raises(FloatingPointError, match=r"^fedavg diverged \(distance > 1\)"):
        Q.fixed_point_check(Q.two_client_problem(), [1, 2], 0.1, names=("fedavg",))
    with pytest.raises(FloatingPointError, match=r"^fedavg diverged \(distance > 1\)"):
        Q.two_client_sweep(1, [2], 0.1, names=("fedavg",))


# ---------------------------------------------------------------- two_client_sweep
def test_two_client_sweep_defaults_by_hand():
    """Defaults a = 1, reduction 1e-10, App. D.1 with tau = (1, 2), lr = 0.1. By hand (see
    _scalar_round_maps): FedAvg x -> 0.855 x - 0.045, x~ = -9/29; FedNova x -> 0.85375 x + 0.00375,
    x~ = 1/39; grad F(x) = x, so ||grad F||^2 = x~^2 up to the remaining rho^T |x~|."""
    (pt,) = Q.two_client_sweep(1, [2], 0.1)
    maps = _scalar_round_maps([1.0, -1.0], 0.1, [1, 2])
    assert maps["fedavg"] == pytest.approx((0.855, -0.045)) and maps["fednova"] == pytest.approx((0.85375, 0.00375))
    assert (pt.tau1, pt.tau2) == (1, 2)
    for name, x_fixed in (("fedavg", -9 / 29), ("fednova", 1 / 39)):
        slope, shift = maps[name]
        T = _rounds_for(slope, 1e-10)   # 147 for FedAvg (2e-10 would give 143)
        x = 0.0
        for _ in range(T):
            x = slope * x + shift
        assert pt.rounds[name] == T
        assert pt.x_limit[name] == pytest.approx(x, rel=1e-9) and x == pytest.approx(x_fixed, rel=1e-9)
        assert pt.grad_norm_sq[name] == pytest.approx(x * x, rel=1e-9)
    assert pt.rounds["fedavg"] == 147


# ---------------------------------------------------------------- loglog_slope, markdown_table
def test_loglog_slope_edges():
    assert Q.loglog_slope([1.0, 4.0], [2.0, 32.0]) == pytest.approx(2.0)   # two points: log 16 / log 4
    for x, y in (([1.0], [1.0]), ([], []), ([0.0, 1.0, 2.0], [1.0, 2.0, 3.0]), ([1.0, 2.0, 3.0], [0.0, 2.0, 3.0]),
                 ([1.0, 2.0], [1.0, 2.0, 3.0])):
        with pytest.raises(ValueError, match="^loglog_slope needs two finite, positive 1-d arrays"):
            Q.loglog_slope(x, y)


# ---------------------------------------------------------------- Figure 1
def test_figure1_problem_is_the_documented_pair():
    """H_1 = diag(1, 3), H_2 = diag(2, 1), minima (2, 1) and (-2, 1), p = (1/2, 1/2); e_i = H_i x_i^*
    by hand: e_1 = (1*2, 3*1) = (2, 3), e_2 = (2*-2, 1*1) = (-4, 1)."""
    prob = Q.figure1_problem()
    np.testing.assert_array_equal(prob.H, [np.diag([1.0, 3.0]), np.diag([2.0, 1.0])])
    np.testing.assert_array_equal(prob.e, [[2.0, 3.0], [-4.0, 1.0]])
    np.testing.assert_array_equal(prob.p, [0.5, 0.5])


# ---------------------------------------------------------------- custom: TensorEngine used directly
def _engine_parts():
    import torch
    from torch import nn

    from fedlib.algorithms import make_algorithm
    from fedlib.engines.stacked import RunSpec
    from fedlib.solvers import sgd

    run = RunSpec(make_algorithm("fednova", sgd(0.1)), [np.arange(4), np.arange(4, 8)], FixedSteps([1, 1]))
    return nn.Linear(6, 3), torch.arange(8) % 3, [run]


def test_tensor_engine_refuses_bad_features_and_labels():
    """TensorEngine is public: its own checks (train_clients checks the same things earlier)."""
    import torch

    from fedlib.experiments.custom import TensorEngine

    model, y, runs = _engine_parts()
    x = torch.randn(8, 6)
    nan = x.clone()
    nan[3, 1] = float("nan")
    cases = [
        (dict(features="not numbers"), r"^features must be a tensor or array \("),
        (dict(features=torch.ones(8, 6, dtype=torch.int64)), r"^features must be a float tensor \(N, \.\.\.\), got torch\.int64"),
        (dict(features=torch.randn(8)), r"^features must be a float tensor \(N, \.\.\.\), got torch\.float32 \(8,\)"),
        (dict(features=nan), r"^features hold NaN or inf \(row 3\)"),
        (dict(labels=y.float()), r"^labels must be 8 integers, got torch\.float32"),
        (dict(labels=y[:7]), r"^labels has 7 entries but features has 8 rows$"),
        (dict(labels=y.reshape(8, 1)), r"^labels must be 8 integers, got torch\.int64 \(8, 1\)"),
    ]
    for kwargs, message in cases:
        args = dict(features=x, labels=y) | kwargs
        with pytest.raises(ValueError, match=message):
            TensorEngine(model, args["features"], args["labels"], runs, rounds=1)
    engine = TensorEngine(model, x, y, runs, rounds=1)
    assert engine.augment is False and engine.padding == 0   # feature rows: no image augmentation


def test_tensor_engine_checks_test_features_and_labels():
    import torch

    from fedlib.experiments.custom import TensorEngine

    model, y, runs = _engine_parts()
    x = torch.randn(8, 6)
    for tx, ty in ((torch.randn(3, 5), torch.tensor([0, 1, 2])),      # features of another shape
                   (torch.randn(3, 6), torch.tensor([0, 1]))):        # one label short
        with pytest.raises(ValueError, match="^test_features / test_labels must match the training features' shape"):
            TensorEngine(model, x, y, runs, rounds=1, test_features=tx, test_labels=ty)
    nan = torch.randn(3, 6)
    nan[1, 2] = float("inf")
    for tx in (torch.ones(3, 6, dtype=torch.int64), nan):
        with pytest.raises(ValueError, match="^test_features must be finite floats, got torch"):
            TensorEngine(model, x, y, runs, rounds=1, test_features=tx, test_labels=torch.tensor([0, 1, 2]))


def test_tensor_engine_refuses_float_negative_or_lone_test_labels():
    """Bug: TensorEngine truncated float test labels (0.7, 1.9, 2.2 were scored as classes 0, 1, 2),
    took a negative label until evaluate() failed with torch's IndexError, and ignored test_labels
    given without test_features (no evaluation, NaN accuracy, no word). Its training labels and
    StackedEngine's test labels were refused in these cases already."""
    import torch

    from fedlib.experiments.custom import TensorEngine

    model, y, runs = _engine_parts()
    x, tx = torch.randn(8, 6), torch.randn(3, 6)
    with pytest.raises(ValueError, match=r"^test_labels must hold integer class labels, got torch\.float32"):
        TensorEngine(model, x, y, runs, rounds=1, test_features=tx, test_labels=torch.tensor([0.7, 1.9, 2.2]))
    with pytest.raises(ValueError, match=r"^test_labels holds a negative label \(-1\)"):
        TensorEngine(model, x, y, runs, rounds=1, test_features=tx, test_labels=torch.tensor([-1, 0, 1]))
    with pytest.raises(ValueError, match="^test_features and test_labels go together"):
        TensorEngine(model, x, y, runs, rounds=1, test_labels=torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="^test_features and test_labels go together"):
        TensorEngine(model, x, y, runs, rounds=1, test_features=tx)
    # its training labels are named as given, ``labels`` (were 'data.train_labels', the parent's internal name)
    with pytest.raises(ValueError, match=r"^labels holds a negative label \(-1\)$"):
        TensorEngine(model, x, torch.tensor([-1] + [0] * 7), runs, rounds=1)
    # integer labels of any integer dtype are fine, and scored as given
    engine = TensorEngine(model, x, y, runs, rounds=1, test_features=tx, test_labels=np.array([2, 0, 1], dtype=np.int32))
    with torch.no_grad():
        plain = model(tx).argmax(1)
    acc, _ = engine.evaluate()
    assert acc[0] == pytest.approx(float((plain == torch.tensor([2, 0, 1])).double().mean()), abs=1e-12)


# ---------------------------------------------------------------- custom: train_clients
def _tiny_clients():
    import torch

    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(n, 6, generator=g) for n in (5, 9)]
    return xs, [torch.arange(x.shape[0]) % 3 for x in xs]


def test_train_clients_defaults():
    """Documented defaults: 20 rounds (the module's example) at lr 0.05, epochs "1-5" per client and
    round (n_i <= B = 32: tau_i = E_i), FedAvg and FedNova, plain SGD (momentum None: 0.9 with a momentum solver),
    no weight decay, seed 0, dropout on, the model's dtype (float32 here), no progress bar. Two rounds are trained; the round
    count is read from the signature (20 rounds of training would be slow here)."""
    import inspect

    import torch
    from torch import nn

    from fedlib.experiments.custom import train_clients

    defaults = {k: v.default for k, v in inspect.signature(train_clients).parameters.items()
                if v.default is not inspect.Parameter.empty}
    assert defaults == dict(rounds=20, lr=0.05, epochs="1-5", batch_size=32, algorithms=("fedavg", "fednova"),
                            solver="sgd", momentum=None, mu=0.0, weight_decay=0.0, lr_decay="constant", seed=0,
                            test_x=None, test_y=None, device="cpu", dropout=True, dtype=None,
                            progress=False)
    torch.manual_seed(0)
    xs, ys = _tiny_clients()
    out = train_clients(nn.Linear(6, 3), xs, ys, rounds=2)
    assert set(out) == {"fedavg", "fednova", "engine"}
    engine = out["engine"]
    assert (engine.batch_size, engine.dropout, engine.dtype) == (32, True, torch.float32)
    for r, name in enumerate(("fedavg", "fednova")):
        hist = out[name]
        assert [h["round"] for h in hist] == [0, 1] and all(h["lr"] == pytest.approx(0.05) for h in hist)
        assert all(1 <= s <= 5 for h in hist for s in h["local_steps"])
        solver = engine.runs[r].algorithm.solver
        assert (engine.runs[r].seed, engine.runs[r].name, solver.momentum, solver.mu, solver.weight_decay) == (
            0, name, 0.0, 0.0, 0.0)
    momentum = train_clients(nn.Linear(6, 3), xs, ys, rounds=1, solver="momentum")["engine"]
    assert momentum.runs[0].algorithm.solver.momentum == 0.9


def test_train_clients_model_checks_on_one_sample():
    import torch
    from torch import nn

    from fedlib.experiments.custom import train_clients

    xs, ys = _tiny_clients()
    with pytest.raises(ValueError, match=r"^model could not be applied to one sample of client_x\[0\], shape \(1, 6\) "
                                         r"\(RuntimeError: "):
        train_clients(nn.Linear(5, 3), xs, ys, rounds=1)
    # the sample is cast to the model's own dtype: a float64 model takes float32 features
    out = train_clients(nn.Linear(6, 3).double(), xs, ys, rounds=1, dtype=torch.float64)
    assert out["engine"].dtype == torch.float64
    # labels must lie in 0..K-1: K itself is refused
    with pytest.raises(ValueError, match=r"^client_y\[1\]: labels must lie in 0\.\.2 \(the model has 3 logits\), got 0\.\.3"):
        train_clients(nn.Linear(6, 3), xs, [ys[0], torch.tensor([0, 1, 2, 3, 0, 1, 2, 0, 1])], rounds=1)


def test_train_clients_client_list_checks():
    import torch
    from torch import nn

    from fedlib.experiments.custom import train_clients

    xs, ys = _tiny_clients()
    one = train_clients(nn.Linear(6, 3), xs[:1], ys[:1], rounds=1, algorithms=["fednova"])   # one client is fine
    assert set(one) == {"fednova", "engine"} and one["fednova"][0]["local_steps"][0] >= 1
    with pytest.raises(ValueError, match=r"^client_x and client_y must list the same clients \(got 0 and 0\)"):
        train_clients(nn.Linear(6, 3), [], [], rounds=1)
    with pytest.raises(ValueError, match=r"^client_x\[0\] must be \(n_i, \*feature_shape\), samples first, got shape \(5,\)"):
        train_clients(nn.Linear(6, 3), [xs[0][:, 0], xs[1]], ys, rounds=1)   # 1-d features
    with pytest.raises(ValueError, match=r"^client 1: features of shape \(7,\), client 0 has \(6,\)"):
        train_clients(nn.Linear(6, 3), [xs[0], torch.randn(9, 7)], ys, rounds=1)


def test_train_clients_step_decay():
    """lr_decay="step" (paper §6): /10 from 50% of the rounds, /100 from 75%. With 4 rounds by hand:
    milestones max(1, floor(0.5 * 4 + 1/2)) = 2 and floor(0.75 * 4 + 1/2) = 3."""
    from torch import nn

    from fedlib.experiments.custom import train_clients

    xs, ys = _tiny_clients()
    out = train_clients(nn.Linear(6, 3), xs, ys, rounds=4, lr=0.05, lr_decay="step", algorithms=["fedavg"])
    assert [h["lr"] for h in out["fedavg"]] == pytest.approx([0.05, 0.05, 0.005, 0.0005], rel=1e-12)


def test_loglog_slope_refuses_a_single_x_value():
    """Bug: with every x equal the least-squares slope is undefined, and loglog_slope returned an
    arbitrary number (0.396 for x = (2, 2), y = (1, 3): numpy's minimum-norm fit) with only a
    RankWarning. Two distinct x values are enough."""
    for x, y in (([2.0, 2.0], [1.0, 3.0]), ([5.0, 5.0, 5.0], [1.0, 2.0, 4.0])):
        with pytest.raises(ValueError, match=r"^loglog_slope needs at least two distinct x values"):
            Q.loglog_slope(x, y)
    # log y = 2 log x + log 3 at x = 1 and 2 (twice): slope 2
    assert Q.loglog_slope([1.0, 2.0, 2.0], [3.0, 12.0, 12.0]) == pytest.approx(2.0, rel=1e-12)


def test_train_clients_refuses_a_numpy_or_torch_mu_without_prox():
    """Bug: the 'no proximal term' refusal only looked at Python ints and floats, so mu = np.float32(0.1),
    np.int64(1) (e.g. from a numpy grid) or torch.tensor(0.1) with solver='sgd' / 'momentum' ran plain
    SGD (solver mu 0) without a word, while mu = 0.1 was refused. Zero of any numeric type still runs."""
    import torch
    from torch import nn

    from fedlib.experiments.custom import train_clients

    xs, ys = _tiny_clients()
    for solver in ("sgd", "momentum"):
        for mu in (np.float32(0.1), np.int64(1), torch.tensor(0.1), "0.1", [0.1]):   # a list: not a number
            with pytest.raises(ValueError, match=rf"^mu: solver '{solver}' has no proximal term, got mu = "):
                train_clients(nn.Linear(6, 3), xs, ys, rounds=1, solver=solver, mu=mu)
    for zero in (np.float32(0.0), np.int64(0), torch.tensor(0.0)):
        out = train_clients(nn.Linear(6, 3), xs, ys, rounds=1, mu=zero, algorithms=["fedavg"])
        assert out["engine"].runs[0].algorithm.solver.mu == 0.0


# -------------------------------------------------------- reference_differences: mutants of d562d43..c3b27eb
def test_reference_differences_refuses_a_model_with_other_parameters_than_the_runs():
    """A model holding the runs' initial parameters under the same names plus an extra layer, or
    only some of them, is not the model given to train_clients: refused by name, not a KeyError or
    a reference loop run on another network."""
    from fedlib.experiments.custom import reference_differences, train_clients

    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(n, 5, generator=g, dtype=torch.float64) for n in (4, 6)]
    ys = [torch.randint(0, 3, (x.shape[0],), generator=g) for x in xs]
    model = nn.Sequential(nn.Linear(5, 3, dtype=torch.float64))
    result = train_clients(model, xs, ys, rounds=1, batch_size=2, algorithms=("fedavg",))
    assert max(reference_differences(model, result).values()) < 1e-10  # the model itself passes
    bigger = nn.Sequential(nn.Linear(5, 3, dtype=torch.float64), nn.Linear(3, 3, dtype=torch.float64))
    bigger[0].load_state_dict(model[0].state_dict())  # same "0.weight", "0.bias"; extra "1.weight", "1.bias"
    smaller = nn.Sequential(nn.Linear(5, 3, bias=False, dtype=torch.float64))
    with torch.no_grad():
        smaller[0].weight.copy_(model[0].weight)  # "0.weight" only
    for other in (bigger, smaller):
        with pytest.raises(ValueError, match=r"model's parameters are not the initial model of run 'fedavg'"):
            reference_differences(other, result)


# -------------------------------------------------------------------- review and mutants of efe3bcd..52ae29d
def test_train_clients_refuses_momentum_before_looking_at_the_data():
    # mutant CU1 (train_clients' own check dropped): make_solver refused it later, after the data checks, so a
    # momentum with 'sgd' and mismatched client lists named the lists, and the hint was make_solver's
    from torch import nn

    from fedlib.experiments.custom import train_clients

    with pytest.raises(ValueError, match=r"^momentum: solver 'sgd' has no momentum buffer, got momentum = 0\.9 "
                                         r"\(local momentum: solver='momentum' or 'momentum-prox'\)"):
        train_clients(nn.Linear(2, 2), [torch.zeros(3, 2)], [], solver="sgd", momentum=0.9)


@pytest.mark.parametrize("tau2_values", [5, None])
def test_two_client_sweep_names_tau2_values_that_are_no_sequence(tau2_values):
    # mutant Q4 (check_sequence dropped): enumerate(5) failed with "'int' object is not iterable"
    from fedlib.experiments.quadratic import two_client_sweep

    with pytest.raises(ValueError, match=r"^tau2_values must be a sequence of step counts"):
        two_client_sweep(1, tau2_values, 1e-3)


# ------------------------------------------------------------------------------- mutants of 86c5527..90cbd4d
def test_train_clients_names_the_first_bad_row_of_test_x():  # TC5
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(n, 6, generator=g) for n in (5, 7)]
    ys = [torch.randint(0, 3, (n,), generator=g) for n in (5, 7)]
    test_x = torch.randn(4, 6)
    test_x[1, 0] = test_x[3, 5] = float("nan")
    with pytest.raises(ValueError, match=r"^test_x holds NaN or inf \(sample 1\)$"):
        train_clients(nn.Linear(6, 3), xs, ys, rounds=1, test_x=test_x, test_y=torch.tensor([0, 1, 2, 0]),
                      dtype=torch.float32)


# ------------------------------------------------------------------------ mutants of 37f92d9..d2bb791
def test_weighted_limit_check_of_fedprox_measures_the_tenth_step_with_its_mu():
    """``tenth_distance`` is the closed-form fixed point's distance to the eta -> 0 point at ``lr / 10``, for the
    algorithm checked, FedProx with its ``mu`` included (App. A's map with alpha = eta mu): it is
    ``||fixed_point(fedprox, lr / 10, mu) - small_lr_limit||`` (mutant QE5, the fixed point at lr / 10 without
    ``mu``: FedProx was refused, 'mu must be a finite number > 0, got 0.0', though the check was given mu = 2)."""
    from fedlib.problems import random_quadratic

    prob = random_quadratic(4, 3, seed=0, p=[0.1, 0.2, 0.3, 0.4])
    steps, lr, mu = [1, 2, 5, 3], 0.01, 2.0
    (check,) = Q.weighted_limit_check(prob, steps, lr, names=("fedprox",), mu=mu)
    target = Q.small_lr_limit(prob, "fedprox", steps)
    np.testing.assert_allclose(check.target, target, rtol=1e-14)
    expected = np.linalg.norm(Q.fixed_point(prob, "fedprox", lr / 10, steps, mu) - target)
    assert check.tenth_distance == expected


def test_train_clients_names_a_label_tensor_of_no_dimension():
    """A client's labels given as one 0-d tensor (a single class for the whole client) are a ValueError naming
    client_y[i] and the shape (), as other label tensors that are not 1-d are. Testing ``y.ndim > 1`` only (mutant
    CU3 of 41ab8e8..) let it through to an IndexError ('tuple index out of range') at y.shape[0]."""
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(n, 6, generator=g) for n in (5, 17)]
    ys = [torch.tensor(1), torch.randint(0, 3, (17,), generator=g)]
    with pytest.raises(ValueError, match=r"^client_y\[0\] must be a 1-d tensor of n_i integer class labels, got "
                                         r"shape \(\)$"):
        train_clients(nn.Linear(6, 3), xs, ys, rounds=1)

"""Tests written from a mutation-testing pass over ``fedlib.rule``, ``fedlib.server`` and
``fedlib.variance``: each one checks a documented behaviour that the rest of the fast suite
left unchecked (a surviving mutant pointed at it). Expected values come from the
docstrings, from the paper's formulas (eq. 4, eq. 6, §5, App. H), from hand-checkable
arithmetic or from the library's per-client reference loop
(:func:`fedlib.engines.reference.run_sequential`), never from a stored output.

Mutants of efe3bcd..52ae29d, fedlib/rule.py and fedlib/variance.py (pass described in tests/README.md, Mutation
passes):
  RU1-RU3, RU5-RU6 rule (no RU4): Mapping refusal dropped / a dict's values aggregated; local_steps
        unchecked / without size; a_norms size != -> >.
  VA1-VA3 variance: NaN check dropped / on p; init_control_variates minimum 0.
  all killed by the suite.

Mutants of 86c5527..90cbd4d (rule.py) (pass described in tests/README.md, Mutation passes):
rule.py: R1 ``a.min() <= 0`` -> ``< 0``; R2 ``min`` -> ``max``: killed by the suite.

Mutants of 37f92d9..28127ce (third, the changed hunks of fedlib/rule.py, server.py, variance.py)
(pass described in tests/README.md, Mutation passes):
  RL1 normalized_update without the underflow refusal; RL2 tau_eff = inf taken; RL3 its overflow message dropped;
  RL4 ``-1 / (lr a)`` -> ``+``; RL5 ``-1 / lr``. SV1 make_server_optimizer without is_choice (an unknown name gave
  Adam); SV2 beta refused for 'plain' only; SV3 Adam's server_lr ignored. VA1 update_control_variates without the
  changes' structure check; VA2 without server_change's; VA3 only deltas[0] checked. all killed by the suite.

Mutants of 2e0d04d..fb2fbe6 (fedlib/variance.py: updated_client_variates' checks, the helpers shared with
update_control_variates; fedlib/server.py: make_server_optimizer's word) (pass described in tests/README.md, Mutation
passes):
  V1 updated_client_variates without _checked_participants; V2 its a_norms unchecked; V3 its VRLSGD inputs
  unchecked; V4 local_steps checked for no client too (empty clients refused); V5 ``a <= 0`` -> ``a < 0``; V6 the
  distinct check ``!=`` -> ``>``; V7 the deltas count ``!=`` -> ``<``; V8 local_steps ``or`` server_change -> ``and``.
  W1 "server must" -> "server optimizer must"; W2 the list of SERVER_OPTIMIZERS cut. killed by the suite: all.

Mutants of 113f0d3..a655138 (fedlib/rule.py: aggregation_coefficients' other-order retry and its refusal beyond
float64) (pass described in tests/README.md, Mutation passes):
  AC1 the errstate dropped; AC2 the other order dropped; AC3 every coefficient recomputed in the other order; AC4
  np.where's branches swapped; AC5 the retry's test negated; AC6 the refusal dropped; AC7 the message's index by
  argmax; AC8 the message's index 0; AC9 the retry in the usual order ``(tau_eff * w) / a``; AC10 the retry as
  ``(tau_eff / a) * w``; AC11 refused only where every c_i is inf; AC12 the other order first.
  killed by the suite: AC6, AC7, AC11. killed here: AC1, AC3, AC8, AC10, AC12 (new tests) and AC2, AC4, AC5, AC9 (by
  test_aggregation_coefficients_beyond_float64_are_refused_and_a_finite_one_is_kept with its case corrected: w_0 =
  10 gave 1e301 * 10 = 1e302, no overflow, so the other order was never tried). AC8 is killed by
  tests/test_rule.py::test_a_coefficient_beyond_float64_is_named_with_its_plain_numbers too (the fix of the message's
  NumPy 2 reprs, 'np.float64(0.5)', found by this pass).

Mutants of the 8996bdf pass: 61c3eb9, 37d4fb6, 8996bdf, dc4cc69, f432e05 (fedlib/rule.py, 8996bdf:
fednova_weights checks local_steps whenever given) (pass described in tests/README.md, Mutation passes):
  FW1 the check dropped; FW2 checked under tau_eff='local_steps' only; FW3 the size unchecked; FW4 minimum 0; FW5
  size_of 'a_norms'; FW6 checked, but the unchecked value passed on; FW7 checked only with a tau_eff given.
  killed by the suite: FW1-FW5, FW7. equivalent: FW6 (_tau_eff_value reads local_steps under tau_eff='local_steps'
  only, where it checks it again with the same check_local_steps; the other policies do not read it).

Mutants of 38cf0bd..f929b39 (fedlib/variance.py, b5da37b: control_variates' VRLSGD mean of the stack's kind;
8b6e1f5: _stack_zeros keeping a 0-d leaf's dtype) (pass described in tests/README.md, Mutation passes):
  CV1 ``np.zeros_like(x[0])`` again; CV2 zeros of the whole stack; CV3 a float64 mean for a torch stack; CV4
  ``np.result_type(x, np.float64)`` for 0-d leaves again; CV5 ``np.result_type(x.dtype, np.float32)``; CV6 float64
  for every numpy leaf; CV7 ``kind == "vrlsgd"`` -> ``kind != "scaffold"``; CV8 the mean on the CPU. killed by the
  suite: CV1, CV2, CV4, CV6. killed here: CV3, CV5. equivalent: CV7 (check_choice leaves only "scaffold" and
  "vrlsgd"). left alive without a test: CV8 (on the CPU it is the stack's device; a meta stack is refused by the
  finiteness check first; only a CUDA run, not available to the pass, tells it apart).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from fedlib import rule as R
from fedlib import server as SV
from fedlib import variance as V

P2 = np.array([0.5, 0.5])


# ====================================================================== fedlib.rule
@pytest.mark.parametrize("bad", [[0.0, 1.0], [1.0, -0.5]])
def test_a_norms_must_be_strictly_positive(bad):
    """'a_norms: ||a_i||_1 > 0' — zero is refused too (it would divide Δ_i by zero in c_i)."""
    for call in (lambda: R.fedavg_weights(P2, bad), lambda: R.fednova_weights(P2, bad),
                 lambda: R.effective_weights("fednova", P2, bad),
                 lambda: R.aggregation_coefficients(1.0, P2, bad),
                 lambda: R.aggregate([np.ones(1), np.ones(1)], P2, bad)):
        with pytest.raises(ValueError, match="^a_norms"):
            call()


def test_normalized_update_checks_lr_and_a_norm_by_name():
    """d_i = -Δ_i/(η ||a_i||_1) needs η > 0 and ||a_i||_1 > 0; a negative value would silently
    flip the sign of d_i. The message starts with the parameter's name (fedlib._validate)."""
    with pytest.raises(ValueError, match="^lr"):
        R.normalized_update(np.ones(2), -0.1, 4.0)
    with pytest.raises(ValueError, match="^a_norm"):
        R.normalized_update(np.ones(2), 0.1, -4.0)
    with pytest.raises(ValueError, match="^a_norm"):
        R.normalized_update(np.ones(2), 0.1, 0.0)


def test_weights_with_small_a_norms():
    """eq. 6 with ||a_i||_1 < 1 (any positive value is allowed): τ_eff = Σ p_i ||a_i||_1 = 0.5."""
    tau_eff, w = R.fedavg_weights(P2, [0.25, 0.75])
    assert tau_eff == 0.5 and w.tolist() == [0.25, 0.75]
    tau_eff, w = R.effective_weights("fedavg", [0.5, 0.25], [1.0, 1.0])     # sampled ω, sum 0.75
    assert tau_eff == 0.75 and w.tolist() == pytest.approx([2 / 3, 1 / 3])
    assert R.fednova_weights(P2, [0.25, 0.75])[0] == 0.5


def test_tau_eff_policy_names():
    """TAU_EFF_POLICIES are exactly the two documented policy names; check_tau_eff returns them,
    None, or a float; anything else is a ValueError naming tau_eff."""
    assert R.TAU_EFF_POLICIES == ("a_norm", "local_steps")
    assert R.AGGREGATIONS == ("fedavg", "fednova")
    assert R.check_tau_eff(None) is None
    assert R.check_tau_eff("a_norm") == "a_norm" and R.check_tau_eff("local_steps") == "local_steps"
    assert R.check_tau_eff(3) == 3.0 and isinstance(R.check_tau_eff(3), float)
    for bad in ("harmonic", -1.0, 0, float("nan"), True, [2.0]):
        with pytest.raises(ValueError, match="^tau_eff"):
            R.check_tau_eff(bad)


@pytest.mark.parametrize("bad", [-1.0, 0.0, "harmonic", True])
def test_fednova_and_effective_weights_validate_tau_eff(bad):
    with pytest.raises(ValueError, match="^tau_eff"):
        R.fednova_weights(P2, [2.0, 6.0], bad)
    with pytest.raises(ValueError, match="^tau_eff"):
        R.effective_weights("fednova", P2, [2.0, 6.0], bad)
    with pytest.raises(ValueError, match="^tau_eff"):
        R.aggregate([np.ones(1), np.ones(1)], P2, [2.0, 6.0], "fednova", tau_eff=bad)


def test_local_steps_policy_needs_valid_local_steps():
    """tau_eff='local_steps' gives Σ p_i τ_i (τ_i integers >= 1, one per client)."""
    assert R.fednova_weights(P2, [2.0, 6.0], "local_steps", [1, 5])[0] == 3.0
    with pytest.raises(ValueError, match="^local_steps"):
        R.fednova_weights(P2, [2.0, 6.0], "local_steps")
    with pytest.raises(ValueError, match="^local_steps"):
        R.fednova_weights(P2, [2.0, 6.0], "local_steps", [0, 5])
    with pytest.raises(ValueError, match="^local_steps"):
        R.effective_weights("fednova", P2, [2.0, 6.0], "local_steps", [1, 2, 3])


def test_effective_weights_returns_a_copy_and_refuses_all_zero_weights():
    omega = np.array([0.6, 0.9])
    tau, w = R.effective_weights("fednova", omega, [2.0, 3.0])
    assert tau == pytest.approx(0.6 * 2 + 0.9 * 3) and w is not omega
    w[0] = 99.0
    assert omega[0] == 0.6  # the caller's weights are not aliased
    agg = R.aggregate([np.ones(1), np.ones(1)], omega, [2.0, 3.0], "fednova")
    assert agg.weights is not omega
    for alg in R.AGGREGATIONS:
        with pytest.raises(ValueError, match="^client_weights"):
            R.effective_weights(alg, [0.0, 0.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="^algorithm"):
        R.effective_weights("fedprox", P2, [1.0, 1.0])


def test_aggregation_coefficients_checks_its_inputs():
    """c_i = τ_eff w_i/||a_i||_1 with τ_eff > 0 ('any number > 0') and non-negative weights."""
    np.testing.assert_allclose(R.aggregation_coefficients(4.0, P2, [2.0, 6.0]), [1.0, 1 / 3], rtol=1e-15)
    for bad in (0.0, -4.0, float("inf")):
        with pytest.raises(ValueError, match="^tau_eff"):
            R.aggregation_coefficients(bad, P2, [2.0, 6.0])
    with pytest.raises(ValueError, match="^weights"):
        R.aggregation_coefficients(4.0, [-0.5, 1.5], [2.0, 6.0])


def test_aggregation_coefficients_beyond_float64_are_refused_and_a_finite_one_is_kept():
    """tau_eff = 1e300, w = (1/2, 1/2), ||a||_1 = (1e-10, 1): c_0 = 5e309 is beyond float64 (was returned as inf,
    silently), refused naming c_0; ||a||_1 = (1e10, 1e10) with w = (1e10, 1e-300): tau_eff * w_0 = 1e301 * 1e10
    overflows while c_0 = 1e301 does not (was inf too), computed in the other order. (The case was w = (10, 1e-300)
    until the pass of 113f0d3..a655138: 1e301 * 10 = 1e302 does not overflow, so it never reached the other order.)"""
    with pytest.raises(ValueError, match=r"^tau_eff: the coefficient c_0 = .* exceeds float64"):
        R.aggregation_coefficients(1e300, P2, [1e-10, 1.0])
    c = R.aggregation_coefficients(1e301, [1e10, 1e-300], [1e10, 1e10])
    assert c[0] == pytest.approx(1e301, rel=1e-15) and c[1] == pytest.approx(1e-9, rel=1e-15)


def test_aggregate_defaults_to_fednova():
    """algorithm='fednova' by default: with a_norms 2 and 6 and p = (1/2, 1/2) FedNova's
    coefficients are τ_eff p_i/||a_i||_1 = 4 * (1/4, 1/12), FedAvg's would be p."""
    deltas = [np.array([-2.0]), np.array([-6.0])]
    for agg in (R.aggregate(deltas, P2, [2.0, 6.0]), R.aggregate_stacked(np.array([[-2.0], [-6.0]]), P2, [2.0, 6.0])):
        np.testing.assert_allclose(agg.coefficients, [1.0, 1 / 3], rtol=1e-15)
        np.testing.assert_array_equal(agg.weights, P2)
        np.testing.assert_allclose(agg.change, [-4.0], rtol=1e-15)


def test_aggregate_client_count_and_shape_errors_name_deltas():
    with pytest.raises(ValueError, match="^deltas has 3 clients but client_weights has 2"):
        R.aggregate([np.ones(2)] * 3, P2, [1.0, 1.0])
    with pytest.raises(ValueError, match="^deltas has 1 clients"):
        R.aggregate([np.ones(2)], P2, [1.0, 1.0])
    with pytest.raises(ValueError, match="^deltas"):
        R.aggregate([np.ones(2), np.ones(3)], P2, [1.0, 1.0])
    with pytest.raises(ValueError, match="^deltas"):
        R.aggregate_stacked(np.ones((3, 2)), P2, [1.0, 1.0])



# ------------------------------------------------------------------------ mutants of 113f0d3..a655138 (rule.py)
def test_a_coefficient_whose_product_overflows_first_is_exact_in_the_other_order(capfd):
    """c_i = tau_eff (w_i / ||a_i||_1) where tau_eff w_i overflows first, the other coefficients as usual, without a
    RuntimeWarning (the errstate covers the first try; the refusal is the ValueError alone). tau_eff = 1e300, w =
    (1e10, 1/2), ||a||_1 = (1e10, 2): 1e300 * 1e10 overflows, w_0 / a_0 = 1 exactly, so c_0 = 1e300; c_1 = 1e300 / 4,
    exact (powers of 2). tau_eff = 2, w_0 = ||a_0||_1 = 1.5e308: c_0 = 2 exactly (in Fraction too). Mutants of
    113f0d3..a655138: AC1 (the errstate dropped: 'overflow encountered in multiply'), AC2 (the other order dropped:
    refused), AC4 (np.where's branches swapped), AC5 (the retry's test negated), AC9 (the retry in the usual order),
    AC10 (the retry as (tau_eff / a_i) w_i: 2 / 1.5e308 is subnormal, and c_0 2.0000000000000004). Nothing is printed
    either: errstate(over="print") (mutant EP2 of the negative-assertion pass) wrote numpy's 'Warning: overflow
    encountered in multiply' to the C stderr, which the warnings filter does not see, and passed."""
    import warnings
    from fractions import Fraction

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = R.aggregation_coefficients(1e300, [1e10, 0.5], [1e10, 2.0])
        assert c.tolist() == [1e300, float(Fraction(1e300) / 4)]
        assert R.aggregation_coefficients(2.0, [1.5e308], [1.5e308]).tolist() == [2.0]
        with pytest.raises(ValueError, match=r"^tau_eff: the coefficient c_1 = "):
            R.aggregation_coefficients(1e300, [0.5, 0.5], [1.0, 1e-10])
    assert capfd.readouterr() == ("", "")


def test_finite_coefficients_keep_the_bits_of_aggregates():
    """aggregation_coefficients gives aggregate's coefficients bit for bit (tau_eff w_i / ||a_i||_1, in that order,
    which run_replicas' fast path computes too), also where another client's product overflows and is taken in the
    other order (the draws have entries whose two orders differ in the last bit: checked). Mutants of
    113f0d3..a655138: AC3 (every coefficient recomputed in the other order once one overflows) and AC12 (the other
    order first)."""
    rng = np.random.default_rng(0)
    p, a = rng.dirichlet(np.ones(6)), rng.uniform(1.0, 10.0, 6)
    agg = R.aggregate([np.ones(1)] * 6, p, a, "fednova", tau_eff=1e300)
    w = agg.weights
    assert (agg.tau_eff * w / a != agg.tau_eff * (w / a)).sum() >= 2
    assert np.array_equal(R.aggregation_coefficients(agg.tau_eff, w, a), agg.coefficients)
    c = R.aggregation_coefficients(agg.tau_eff, np.append(w, 1e10), np.append(a, 1e10))
    assert np.array_equal(c, np.append(agg.coefficients, 1e300))


# ====================================================================== fedlib.server
X0 = np.array([1.0, 2.0])
D1 = np.array([-0.2, 0.4])
D2 = np.array([0.1, 0.1])


def _two_rounds(opt, lr=0.1):
    st = opt.init(X0)
    x1, st = opt.update(D1, st, X0, lr)
    x2, st = opt.update(D2, st, x1, lr)
    return x1, x2, st


def test_states_count_rounds_from_zero():
    for opt in (SV.plain(), SV.momentum(), SV.adam()):
        st = opt.init(X0)
        assert st.count == 0
        _, st = opt.update(D1, st, X0, 0.1)
        assert st.count == 1


def test_momentum_default_beta_is_0_9():
    """u1 = -D1/η = [2, -4]; u2 = 0.9 u1 - D2/η = [0.8, -4.6]; x2 = x1 - η u2 (REFERENCE §4)."""
    x1, x2, st = _two_rounds(SV.momentum())
    np.testing.assert_allclose(x1, [0.8, 2.4], atol=1e-14)
    np.testing.assert_allclose(st.buffer, [0.8, -4.6], atol=1e-14)
    np.testing.assert_allclose(x2, [0.72, 2.86], atol=1e-14)


def test_adam_defaults_hand_step():
    """adam() = FedAdam with η_g = 0.01, β1 = 0.9, β2 = 0.99, ε = 1e-3 (its signature):
    m1 = 0.1 D1, v1 = 0.01 D1², x1 = x0 + 0.01 m1/(√v1 + ε)."""
    x1, _, st = _two_rounds(SV.adam())
    np.testing.assert_allclose(st.m, 0.9 * 0.1 * D1 + 0.1 * D2, atol=1e-16)
    np.testing.assert_allclose(st.v, 0.99 * 0.01 * D1 ** 2 + 0.01 * D2 ** 2, atol=1e-16)
    np.testing.assert_allclose(x1, [1.0 + 0.01 * -0.02 / 0.021, 2.0 + 0.01 * 0.04 / 0.041], rtol=0, atol=1e-15)


def test_server_hyperparameter_ranges():
    """β, β1, β2 in [0, 1) (0 allowed: momentum(0) is plain); η_g, ε and the client lr > 0."""
    SV.momentum(0.0), SV.adam(0.1, b1=0.0, b2=0.0)
    for call, name in [(lambda: SV.momentum(1.0), "beta"), (lambda: SV.momentum(-0.1), "beta"),
                       (lambda: SV.adam(0.1, b1=1.0), "b1"), (lambda: SV.adam(0.1, b1=-0.1), "b1"),
                       (lambda: SV.adam(0.1, b2=1.0), "b2"), (lambda: SV.adam(0.1, b2=-0.1), "b2"),
                       (lambda: SV.adam(0.1, eps=-1e-3), "eps"), (lambda: SV.adam(-0.1), "server_lr"),
                       (lambda: SV.plain(-1.0), "server_lr"),
                       (lambda: SV.momentum(0.9).update(D1, SV.momentum(0.9).init(X0), X0, -0.1), "lr")]:
        with pytest.raises(ValueError, match="^" + name):
            call()


def test_make_server_optimizer_passes_its_arguments():
    assert SV.SERVER_OPTIMIZERS == ("plain", "momentum", "adam")
    for name in SV.SERVER_OPTIMIZERS:
        assert SV.make_server_optimizer(name).name == name
    # plain: default server_lr = 1 is eq. (4); server_lr is passed on
    for kw, scale in (({}, 1.0), ({"server_lr": 2.0}, 2.0)):
        opt = SV.make_server_optimizer("plain", **kw)
        np.testing.assert_allclose(opt.update(D1, opt.init(X0), X0)[0], X0 + scale * D1, atol=1e-15)
    # momentum: default beta 0.9, beta passed on (beta = 0.5: u2 = 0.5 [2, -4] - [1, 1] = [0, -3])
    np.testing.assert_allclose(_two_rounds(SV.make_server_optimizer("momentum"))[1], [0.72, 2.86], atol=1e-14)
    np.testing.assert_allclose(_two_rounds(SV.make_server_optimizer("momentum", beta=0.5))[1], [0.8, 2.7], atol=1e-14)
    # adam: server_lr passed on as η_g
    x1 = _two_rounds(SV.make_server_optimizer("adam", server_lr=0.1))[0]
    np.testing.assert_allclose(x1, [1.0 + 0.1 * -0.02 / 0.021, 2.0 + 0.1 * 0.04 / 0.041], atol=1e-14)
    with pytest.raises(ValueError, match="server must be one of"):
        SV.make_server_optimizer("sgd")


# ====================================================================== fedlib.variance
CV3 = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]])
P3 = np.array([0.5, 0.25, 0.25])


def test_init_control_variates_zeros_keep_the_model_dtype():
    st = V.init_control_variates({"a": np.ones(3, dtype=np.float32), "s": 0, "t": torch.ones(2)}, 4)
    assert st.client["a"].shape == (4, 3) and st.client["a"].dtype == np.float32
    assert st.client["s"].shape == (4,) and st.client["s"].dtype == np.float64  # a 0-d int leaf: float variates
    assert st.client["t"].dtype == torch.float32
    assert not np.any(st.client["a"]) and not np.any(st.client["s"])
    assert st.mean["a"].shape == (3,)


@pytest.mark.parametrize("bad", [0, -1, 2.0, "3"])
def test_init_control_variates_num_clients(bad):
    assert V.init_control_variates(np.zeros(2), 1).client.shape == (1, 2)
    assert V.init_control_variates(np.zeros(2), np.int64(2)).client.shape == (2, 2)
    with pytest.raises(ValueError, match="^num_clients"):
        V.init_control_variates(np.zeros(2), bad)


def test_kind_is_checked():
    assert V.VARIANCE_REDUCTIONS == ("scaffold", "vrlsgd")
    assert V.init_control_variates(np.zeros(2), 2).kind == "scaffold"
    assert V.control_variates(CV3, P3).kind == "scaffold"
    with pytest.raises(ValueError, match="^kind"):
        V.init_control_variates(np.zeros(2), 2, "mime")
    with pytest.raises(ValueError, match="^kind"):
        V.control_variates(CV3, P3, "mime")


def test_control_variates_means():
    """c̄ = Σ p_i c_i for SCAFFOLD; VRLSGD keeps c̄ = 0 (also for one client)."""
    np.testing.assert_allclose(V.control_variates(CV3, P3).mean, [1.0, 0.75], atol=1e-15)
    vr = V.control_variates(CV3, P3, "vrlsgd")
    np.testing.assert_array_equal(vr.mean, [0.0, 0.0])
    np.testing.assert_allclose(V.correction(vr, 2), [-2.0, -2.0])
    one = V.control_variates(np.array([[3.0, -1.0]]), [1.0], "vrlsgd")
    np.testing.assert_array_equal(one.mean, [0.0, 0.0])


def test_control_variates_leading_axis_checks():
    with pytest.raises(ValueError, match="^client: every leaf"):
        V.control_variates({"a": np.ones((3, 2)), "b": np.ones((2, 2))}, P3)
    with pytest.raises(ValueError, match="^client: every leaf"):
        V.control_variates({"a": np.ones((3, 2)), "b": np.float64(1.0)}, P3)
    with pytest.raises(ValueError, match="^client: every leaf"):
        V.control_variates(np.float64(1.0), [1.0])
    with pytest.raises(ValueError, match="^client: no arrays"):
        V.control_variates({}, P3)
    with pytest.raises(ValueError, match=r"^p\b"):
        V.control_variates(CV3, P2)


@pytest.mark.parametrize("bad", [3, -1, True, 1.0])
def test_correction_client_index(bad):
    """client must be an index in [0, m); m - 1 is the last one; bools are not indices."""
    cv = V.control_variates(CV3, P3)
    np.testing.assert_allclose(V.correction(cv, 2), [-1.0, -1.25])
    np.testing.assert_allclose(V.correction(cv, np.int64(0)), [0.0, 0.75])
    with pytest.raises(ValueError, match="^client must be a client index"):
        V.correction(cv, bad)


def test_update_control_variates_input_checks():
    cv = V.control_variates(CV3, P3)
    d = [np.ones(2), np.ones(2)]
    for call, msg in [(lambda: V.update_control_variates(cv, [0, 0], d, 0.1, [1.0, 1.0], P3), "^clients must be distinct"),
                      (lambda: V.update_control_variates(cv, [0, 3], d, 0.1, [1.0, 1.0], P3), "^clients must be a client"),
                      (lambda: V.update_control_variates(cv, [0, 1], d[:1], 0.1, [1.0, 1.0], P3), "^deltas has 1"),
                      (lambda: V.update_control_variates(cv, [0, 1], d, 0.1, [0.0, 1.0], P3), "^a_norms"),
                      (lambda: V.update_control_variates(cv, [0, 1], d, -0.1, [1.0, 1.0], P3), "^lr"),
                      (lambda: V.update_control_variates(cv, [0, 1], d, 0.1, [1.0, 1.0], P2), r"^p\b"),
                      (lambda: V.update_control_variates(cv, [0, 1], d, 0.1, [1.0, 1.0], [0.5, 0.5, 0.5]), r"^p\b")]:
        with pytest.raises(ValueError, match=msg):
            call()
    vr = V.control_variates(CV3, P3, "vrlsgd")
    for kw in ({"local_steps": [1, 1]}, {"server_change": np.zeros(2)}):
        with pytest.raises(ValueError, match="local_steps and server_change"):
            V.update_control_variates(vr, [0, 1], d, 0.1, [1.0, 1.0], P3, **kw)
    with pytest.raises(ValueError, match="^local_steps"):
        V.update_control_variates(vr, [0, 1], d, 0.1, [1.0, 1.0], P3, local_steps=[1, 0], server_change=np.zeros(2))


def test_control_variates_accept_scalar_parameters():
    """A 0-d model parameter has (m,)-shaped variates (as init_control_variates builds them):
    one leading axis per leaf is all that is required. c̄_b = 0.5*1 + 0.25*2 + 0.25*3."""
    cv = V.control_variates({"w": CV3, "b": np.array([1.0, 2.0, 3.0])}, P3)
    np.testing.assert_allclose(cv.mean["b"], 1.75, rtol=1e-15)
    np.testing.assert_allclose(V.correction(cv, 2)["b"], -1.25, rtol=1e-15)
    st = V.init_control_variates({"w": np.zeros(2), "b": np.float64(0.0)}, 3)
    assert V.control_variates(st.client, P3).mean["b"] == 0.0


def test_torch_update_does_not_write_into_the_input_state():
    """'Returns a new state (inputs are not modified)' — with torch leaves that own their memory."""
    client = torch.tensor(CV3)
    st = V.ControlVariates(client, torch.tensor(P3 @ CV3), "scaffold")
    new = V.update_control_variates(st, [0, 2], [torch.tensor([-0.2, 0.0], dtype=torch.float64),
                                                 torch.tensor([0.4, -0.8], dtype=torch.float64)], 0.1, [2.0, 4.0], P3)
    np.testing.assert_array_equal(st.client.numpy(), CV3)   # unchanged
    np.testing.assert_allclose(new.client[0].numpy(), [1.0, -0.75], atol=1e-15)  # d_0 - (c̄ - c_0)
    vr = V.ControlVariates(torch.tensor(CV3), torch.zeros(2, dtype=torch.float64), "vrlsgd")
    V.update_control_variates(vr, [1], [torch.ones(2, dtype=torch.float64)], 0.1, [1.0], P3, local_steps=[2],
                              server_change=torch.zeros(2, dtype=torch.float64))
    np.testing.assert_array_equal(vr.client.numpy(), CV3)


# ====================================================================== found by this pass, fixed
def test_subnormal_a_norms_are_refused_naming_a_norms():
    """||a_i||_1 of 5e-324: p_i ||a_i||_1 underflows to 0. FedAvg blamed p ("the client weights are all zero"),
    FedNova returned tau_eff = 0 and so a silently zero update."""
    for fn in (R.fedavg_weights, R.fednova_weights):
        with pytest.raises(ValueError, match="^a_norms: .* underflows to 0"):
            fn([0.5, 0.5], [5e-324, 5e-324])
    with pytest.raises(ValueError, match="^client_weights must not all be zero"):
        R.effective_weights("fedavg", [0.0, 0.0], [1.0, 2.0])


def test_make_server_optimizer_keeps_each_optimizers_default_lr():
    """make_server_optimizer("adam") used server_lr = 1, not adam()'s 0.01: a first step of about 1 instead of
    about 0.01 (-0.952 against -0.0095 for a change of -0.2). A server_lr for server momentum, which has none,
    is refused instead of ignored."""
    change, x = np.array([-0.2]), np.zeros(1)
    by_name = SV.make_server_optimizer("adam")
    own = SV.adam()
    step = by_name.update(change, by_name.init(x), x)[0]
    assert step == pytest.approx(own.update(change, own.init(x), x)[0], rel=0, abs=0)
    assert -0.02 < float(step[0]) < 0
    plain = SV.make_server_optimizer("plain")
    assert plain.update(change, plain.init(x), x)[0] == pytest.approx(change)
    with pytest.raises(ValueError, match="^server_lr"):
        SV.make_server_optimizer("momentum", server_lr=0.5)


def test_make_server_optimizer_refuses_beta_it_would_ignore():
    """beta was a default 0.9 that plain and adam silently ignored: make_server_optimizer("plain", beta=0.5)
    ran plain averaging. Only server momentum takes it now; None still means 0.9 there."""
    for name in ("plain", "adam"):
        assert SV.make_server_optimizer(name, beta=None).name == name
        with pytest.raises(ValueError, match="beta: only server momentum"):
            SV.make_server_optimizer(name, beta=0.5)
    np.testing.assert_allclose(_two_rounds(SV.make_server_optimizer("momentum", beta=None))[1], [0.72, 2.86], atol=1e-14)
    np.testing.assert_allclose(_two_rounds(SV.make_server_optimizer("momentum", beta=0.0))[1],
                               _two_rounds(SV.make_server_optimizer("plain"))[1], atol=1e-14)


# ------------------------------------------- the variates' dtypes: mutants of 38cf0bd..f929b39 (b5da37b, 8b6e1f5)
def test_vrlsgd_mean_of_a_float32_torch_stack_is_float32_zeros():
    """control_variates(stack, p, kind="vrlsgd") makes c_bar = 0 of the stack's kind, dtype and device (b5da37b): a
    float32 torch stack c = (3, -1) gets a float32 tensor mean of zeros (as SCAFFOLD's p-weighted mean, 1, is float32
    too), and the corrections c_bar - c_i = (-3, 1) stay float32. Mutant CV3 of 38cf0bd..f929b39 (a float64 mean for
    a torch stack)."""
    c = torch.tensor([[3.0], [-1.0]], dtype=torch.float32)
    vr = V.control_variates(c, [0.5, 0.5], kind="vrlsgd")
    assert isinstance(vr.mean, torch.Tensor) and vr.mean.dtype == torch.float32 and vr.mean.tolist() == [0.0]
    assert [V.correction(vr, i).dtype for i in range(2)] == [torch.float32] * 2
    assert [V.correction(vr, i).item() for i in range(2)] == [-3.0, 1.0]
    scaffold = V.control_variates(c, [0.5, 0.5])
    assert scaffold.mean.dtype == torch.float32 and scaffold.mean.tolist() == [1.0]


def test_init_control_variates_keep_a_float16_and_a_complex64_leaf_s_dtype():
    """init_control_variates gives every floating leaf variates of its own dtype, 0-d leaves too (8b6e1f5): float16
    stays float16 (n-d and 0-d), complex64 complex64; integer and Python-number leaves get float64. Mutant CV5 of
    38cf0bd..f929b39 (``np.result_type(x.dtype, np.float32)``: float16 leaves' variates float32)."""
    params = {"w": np.zeros(2, np.float16), "b": np.zeros((), np.float16), "z": np.zeros((), np.complex64),
              "k": np.zeros(2, np.int32), "s": 0.0}
    state = V.init_control_variates(params, num_clients=3)
    kinds = {n: (state.client[n].dtype, state.client[n].shape, state.mean[n].dtype) for n in params}
    assert kinds == {"w": (np.float16, (3, 2), np.float16), "b": (np.float16, (3,), np.float16),
                     "z": (np.complex64, (3,), np.complex64), "k": (np.float64, (3, 2), np.float64),
                     "s": (np.float64, (3,), np.float64)}

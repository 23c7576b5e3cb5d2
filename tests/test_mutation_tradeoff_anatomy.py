"""Mutation-testing pass on fedlib.anatomy and fedlib.tradeoff: checks that the existing tests left open
(argument checks that were never exercised, list inputs, the scale of the softmax client's start), each
against numbers that can be worked out by hand or from the paper's closed forms (eq. 7, eq. 8).

Mutants of 8bd9827.., ``anatomy.solver_family`` (every solver gets the weight decay) (pass described in
tests/README.md, Mutation passes).

Mutants of 37f92d9..28127ce (third, the changed hunks of fedlib/tradeoff.py)
(pass described in tests/README.md, Mutation passes):
  TR1 _check_alphas without bool_entry; TR2 np.asarray instead of check_finite_array; TR3 closed_form_distances'
  rounds without check_sequence; TR4 round_contraction by ``np.linalg.eigvals`` again; TR5 fedprox_bound takes
  alpha = 0. killed by the suite: TR1-TR3, TR5. killed here: TR4.

Mutants of f9b9704..2e0d04d (fedlib/tradeoff.py: fedprox_sweep's local_steps) (pass described in tests/README.md,
Mutation passes): E26 without ``size=``; E27 unchecked. killed by the suite: E26, E27.

Mutants of 0571233~1..165a974 (fedlib/anatomy.py and fedlib/tradeoff.py: scalar step counts by check_count) (pass
described in tests/README.md, Mutation passes):
  AN1-AN7 check_int again in trace_local_run, a_norm_curves (max_steps), probe_a_vector, official_counter_a_norm,
  official_counter_excess, official_inplace_a_vector, momentum_prox_a_table; TR1 fedprox_bound's tau_bar by
  check_int. killed by the suite: AN1-AN7, TR1.

Mutants of a655138..81203bf (fedlib/anatomy.py, 51ac35b: official_inplace_a_vector by one run from an impulse at
step 0) (pass described in tests/README.md, Mutation passes):
  OI1 the impulse at step 1; OI2 the entries not reversed (``a[k]``); OI3 ``-y * (1 / lr)``; OI4 y stepped before
  u; OI5 the prox term's sign; OI6 one step short (a[0] left unset); OI7 u starts at 1; OI8 the sign of a.
  killed by the suite: all (test_closed_forms_coverage.py).
"""
import numpy as np
import pytest

from fedlib import anatomy, solvers, tradeoff
from fedlib.rng import generator


# --------------------------------------------------------------------------- fedlib.anatomy
def test_delta_from_rule_by_hand_and_from_lists():
    # Delta = -eta G a: G = [[1, 2], [3, 4]], a = [1, 1], eta = 0.5 -> -0.5 * [3, 7]
    assert np.array_equal(anatomy.delta_from_rule([[1, 2], [3, 4]], [1, 1], 0.5), [-1.5, -3.5])
    assert np.array_equal(anatomy.delta_from_rule(np.eye(3), [1.0, 0.5, 0.25], 2.0), [-2.0, -1.0, -0.5])


@pytest.mark.parametrize("lr", [0.0, -0.5, float("nan")])
def test_delta_from_rule_refuses_a_step_size_that_is_not_positive(lr):
    with pytest.raises(ValueError, match="lr must be a finite number > 0"):
        anatomy.delta_from_rule(np.eye(2), [1.0, 1.0], lr)


def test_probe_a_vector_refuses_zero_steps():
    with pytest.raises(ValueError, match="local_steps"):
        anatomy.probe_a_vector(solvers.sgd(0.1), 0)
    assert np.array_equal(anatomy.probe_a_vector(solvers.sgd(0.1), 1), [1.0])


@pytest.mark.parametrize("kwargs", [dict(lr=0.0), dict(lr=-0.1), dict(mu=-1.0)])
def test_official_inplace_a_vector_refuses_bad_lr_or_mu(kwargs):
    args = dict(local_steps=3, lr=0.1, momentum=0.5, mu=1.0) | kwargs
    with pytest.raises(ValueError, match="lr|mu"):
        anatomy.official_inplace_a_vector(**args)


def test_official_inplace_a_vector_by_hand():
    # tau = 2, eta = 0.1, rho = 0.5, mu = 1: a_1 = 1 (the last gradient is applied once);
    # a_0: u1 = 1, y1 = -0.1; u2 = 0.5 + 1 * (-0.1) = 0.4, y2 = -0.1 - 0.04 = -0.14 -> a_0 = 1.4
    assert np.allclose(anatomy.official_inplace_a_vector(2, 0.1, 0.5, 1.0), [1.4, 1.0], rtol=1e-14, atol=0)


def test_softmax_client_takes_lists():
    """x and y given as lists are stored as arrays (y as int64): full_grad indexes them with an array of rows."""
    client = anatomy.SoftmaxRegressionClient([[1.0, 0.0], [0.0, 1.0]], [0, 1], 2, batch_size=2)
    assert isinstance(client.x, np.ndarray) and client.x.dtype == np.float64
    assert isinstance(client.y, np.ndarray) and client.y.dtype == np.int64
    # at W = 0, b = 0 every class has probability 1/2: prob - onehot = [[-1/2, 1/2], [1/2, -1/2]] / 2 rows
    g = client.full_grad(np.zeros(client.num_params))
    assert np.allclose(g, [-0.25, 0.25, 0.25, -0.25, 0.0, 0.0], rtol=0, atol=1e-15)
    assert np.allclose(client.grad(np.zeros(client.num_params), 0), g, rtol=0, atol=1e-15)  # batch = all rows
    assert anatomy.SoftmaxRegressionClient(np.ones((2, 2)), np.array([0, 1], dtype=np.int32), 2).y.dtype == np.int64


def test_softmax_client_init_is_small():
    """init_params is 0.01 times a standard normal draw from stream (seed, "init")."""
    client = anatomy.SoftmaxRegressionClient(np.ones((3, 99)), [0, 1, 2], 10, seed=4)
    start = client.init_params()
    assert start.shape == (1000,)
    assert np.array_equal(start, 0.01 * generator(4, "init").standard_normal(1000))
    assert 0.009 < float(np.std(start)) < 0.011


# --------------------------------------------------------------------------- fedlib.tradeoff
def _scalar_problem():
    r"""Two clients, F_i(x) = x^2/2 - e_i x with e = (1, -1), p = (1/2, 1/2): x* = 0. At eta = 1/2 and
    tau = (1, 3), local GD moves x0 by -(1 - (1/2)^tau_i)(x0 - e_i): factors K = (1/2, 7/8). With
    FedProx's alpha = eta*mu = 1/2 (mu = 1) every local step lands on x0 - (x0 - e_i)/2: K = (1/2, 1/2)."""
    from fedlib.problems.quadratic import QuadraticProblem

    return QuadraticProblem(np.ones((2, 1, 1)), np.array([[1.0], [-1.0]]), np.array([0.5, 0.5]))


def test_round_contraction_at_alpha_0_is_fedavg():
    pb = _scalar_problem()
    # FedAvg: M = 1 - (1/2)(1/2 + 7/8) = 5/16 (FedNova's rule would give 1 - (1/2 + (7/8)/3) = 5/24)
    assert tradeoff.round_contraction(pb, [1, 3], 0.5, 0.0) == pytest.approx(5 / 16, rel=1e-14)
    assert tradeoff.round_contraction(pb, [1, 3], 0.5, 0.0, "fednova") == pytest.approx(5 / 24, rel=1e-14)
    # FedProx at alpha = 1/2: M = 1 - (1/2)(1/2 + 1/2) = 1/2
    assert tradeoff.round_contraction(pb, [1, 3], 0.5, 0.5) == pytest.approx(0.5, rel=1e-14)


def test_sweep_by_hand():
    """One round from 0: x = sum_i c_i K_i e_i. FedAvg c = p: 1/4 - 7/16 = -3/16; FedProx (alpha = 1/2):
    1/4 - 1/4 = 0; FedNova-prox with tau_eff = sum p_i tau_i = 2 and ||a|| = (1, 7/4): c = (1, 4/7),
    1/2 - (4/7)(1/2) = 3/14."""
    pb = _scalar_problem()
    sweep = tradeoff.fedprox_sweep(pb, [1, 3], 0.5, [0.5], 1)
    assert sweep.fedavg == pytest.approx(3 / 16, rel=1e-14)
    assert sweep.fedprox[0] == pytest.approx(0.0, abs=1e-15)
    assert sweep.fednova[0] == pytest.approx(3 / 14, rel=1e-14)
    exact = tradeoff.closed_form_distances(pb, [1, 3], 0.5, [0.0, 0.5], [1])
    assert np.allclose(exact, [[3 / 16, 0.0]], rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("lr", [0.0, -0.5])
def test_mu_for_alpha_refuses_a_step_size_that_is_not_positive(lr):
    with pytest.raises(ValueError, match="lr must be a finite number > 0"):
        tradeoff.mu_for_alpha(0.5, lr)


def test_mu_for_alpha_refuses_a_step_size_whose_mu_overflows():
    """With lr = 1e-310, 1/lr overflowed to inf and the nudge loop stepped it down to the largest float:
    mu_for_alpha(1.0, 1e-310) returned 1.8e308, an eta*mu of 0.018 where alpha = 1 was asked for."""
    with pytest.raises(ValueError, match="overflows"):
        tradeoff.mu_for_alpha(1.0, 1e-310)
    assert tradeoff.mu_for_alpha(1e-10, 1e-300) == pytest.approx(1e290, rel=1e-12)
    for lr in (0.007, 0.1, 0.3, 2.5):
        assert lr * tradeoff.mu_for_alpha(1.0, lr) == pytest.approx(1.0, rel=1e-15)


def test_measured_fedprox_weights_names_local_steps():
    pb = _scalar_problem()
    with pytest.raises(ValueError, match="local_steps"):
        tradeoff.measured_fedprox_weights(pb, [1, 0], 0.5, 0.5)
    # eq. 7 with alpha = 1/2, tau = (1, 3): ||a|| = (1, 7/4), tau_eff = 11/8, w = (4/11, 7/11)
    te, w, a = tradeoff.measured_fedprox_weights(pb, [1, 3], 0.5, 0.5)
    assert te == pytest.approx(11 / 8, rel=1e-14) and np.allclose(w, [4 / 11, 7 / 11], rtol=1e-14)
    assert np.allclose(a, [1.0, 1.75], rtol=1e-14)


# -------------------------------------------------- anatomy, chapter 1's solver family: mutants of 8bd9827..
def test_chapter1_solver_family_gives_every_solver_the_weight_decay():
    """weight_decay is part of G_i for every solver of the family (chapter 1 compares them at one lambda):
    each of the five has it, with lr = 0.05, mu = alpha / lr = 1 (prox), rho = 0.9 (momentum)."""
    from fedlib import anatomy

    family = anatomy.solver_family(0.05, 0.9, 0.05, 0.95, weight_decay=1e-3)
    assert {name: s.weight_decay for name, s in family.items()} == dict.fromkeys(family, 1e-3)
    assert {name: s.lr for name, s in family.items()} == dict.fromkeys(family, 0.05)
    assert [family[n].momentum for n in family] == [0.0, 0.0, 0.0, 0.9, 0.9]
    assert [family[n].mu for n in family] == [0.0, 0.0, 0.05 / 0.05, 0.0, 0.05 / 0.05]
    assert family["decayed SGD"].step_size(2) == pytest.approx(0.05 * 0.95 ** 2, rel=1e-15)


# ------------------------------------------------------------------------ mutants of 37f92d9..28127ce (third)
def test_round_contraction_is_inf_for_an_overflowing_map_and_the_radius_otherwise():
    """round_contraction is the round map's spectral radius, ``inf`` when the map overflows float64 (mutant TR4,
    the old ``np.linalg.eigvals`` of M: numpy's LinAlgError on the inf / NaN entries). H = (I, 2I), p = (1/2, 1/2),
    tau = (1, 2000), lr = 1.5: (1 - 3)^2000 overflows. At tau = (1, 2), lr = 0.1 (FedAvg, alpha = 0):
    K_1 = 0.1, K_2 = 0.1 (1 + 0.8) = 0.18, M = 1 - (0.5 * 0.1 * 1 + 0.5 * 0.18 * 2) = 0.77 on both axes."""
    from fedlib.problems.quadratic import QuadraticProblem

    prob = QuadraticProblem(np.array([np.eye(2), 2 * np.eye(2)]), np.ones((2, 2)), np.array([0.5, 0.5]))
    with np.errstate(over="ignore", invalid="ignore"):
        assert tradeoff.round_contraction(prob, [1, 2000], 1.5, 0.0) == float("inf")
    assert tradeoff.round_contraction(prob, [1, 2], 0.1, 0.0) == pytest.approx(0.77, rel=1e-12)

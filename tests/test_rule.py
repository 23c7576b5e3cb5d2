"""The general update rule (eq. 4): hand-computed aggregates, FedAvg = plain averaging,
FedNova = FedAvg when nothing is heterogeneous, τ_eff is a scale (REFERENCE §5); what aggregate and
the weights refuse (a mapping of clients, counts for p, bad local_steps, lengths that differ); p and a_norms as
torch tensors, an aggregate's dtype independent of the clients' order."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from fedlib import rule as R
from fedlib import solvers as S
from fedlib.algorithms import make_algorithm
from fedlib.rule import fednova_weights
from fedlib.sampling import full_participation, sample_clients
from fedlib.schedules import FixedSteps, RandomEpochs, population_tau_eff
from fedlib.solvers import sgd
from fedlib.theory import chi_square
from fedlib.tree import tree_leaves, tree_stack

# Three clients, hand example: Δ_i = −η ‖a_i‖₁ d_i with η = 1.
P = np.array([0.2, 0.3, 0.5])
A = np.array([1.0, 2.0, 2.5])          # ‖a_i‖₁ (e.g. proximal solvers)
TAU = np.array([1, 3, 4])               # local steps
D = [np.array([1.0, 0.0]), np.array([2.0, -1.0]), np.array([0.5, 4.0])]
DELTAS = [np.array([-1.0, 0.0]), np.array([-4.0, 2.0]), np.array([-1.25, -10.0])]


def test_hand_example_deltas_are_consistent():
    for d, a, delta in zip(D, A, DELTAS):
        np.testing.assert_allclose(R.normalized_update(delta, 1.0, a), d, rtol=0, atol=1e-15)


def test_hand_fedavg():
    agg = R.aggregate(DELTAS, P, A, "fedavg")
    # Σ p_i Δ_i = 0.2[-1,0] + 0.3[-4,2] + 0.5[-1.25,-10]
    np.testing.assert_allclose(agg.change, [-2.025, -4.4], rtol=0, atol=1e-14)
    assert agg.tau_eff == pytest.approx(2.05, abs=1e-15)   # 0.2*1 + 0.3*2 + 0.5*2.5
    np.testing.assert_allclose(agg.weights, np.array([0.2, 0.6, 1.25]) / 2.05, atol=1e-15)
    np.testing.assert_allclose(agg.coefficients, P, atol=1e-15)


@pytest.mark.parametrize("policy,tau_eff,expected", [
    (None, 2.05, [-2.1525, -3.485]),            # Σ p_i ‖a_i‖₁ = 2.05; Σ p_i d_i = [1.05, 1.7]
    ("a_norm", 2.05, [-2.1525, -3.485]),
    ("local_steps", 3.1, [-3.255, -5.27]),      # Σ p_i τ_i = 0.2 + 0.9 + 2.0
    (3.0, 3.0, [-3.15, -5.1]),
])
def test_hand_fednova(policy, tau_eff, expected):
    agg = R.aggregate(DELTAS, P, A, "fednova", tau_eff=policy, local_steps=TAU)
    np.testing.assert_allclose(agg.change, expected, rtol=0, atol=1e-14)
    assert agg.tau_eff == pytest.approx(tau_eff, abs=1e-15)
    np.testing.assert_array_equal(agg.weights, P)
    np.testing.assert_allclose(agg.coefficients, tau_eff * P / A, atol=1e-15)
    np.testing.assert_allclose(R.aggregation_coefficients(agg.tau_eff, agg.weights, A), agg.coefficients, atol=0)


def test_two_client_example_and_weights():
    tau_eff, w = R.fedavg_weights([0.5, 0.5], [2.0, 6.0])
    assert tau_eff == 4.0 and w.tolist() == [0.25, 0.75]
    tau_eff, w = R.fednova_weights([0.5, 0.5], [2.0, 6.0])
    assert tau_eff == 4.0 and w.tolist() == [0.5, 0.5]
    assert R.fednova_weights([0.5, 0.5], [2.0, 6.0], "local_steps", [3, 9])[0] == 6.0
    assert R.fednova_weights([0.5, 0.5], [2.0, 6.0], 7)[0] == 7.0
    p = np.array([0.5, 0.5])
    assert R.fednova_weights(p, [1.0, 1.0])[1] is not p


def test_tau_eff_is_a_scale_not_a_weight():
    """REFERENCE §5's first mistake: τ_eff inside a normalised mean → harmonic mean of ‖a_i‖₁.

    Two SGD clients with τ = 2 and 6, every gradient = 1, η = 1: d_i = 1, so FedNova's
    step is τ_eff · Σ p_i d_i = Σ p_i τ_i = 4, while the harmonic mean would give 3.
    """
    deltas = [np.array([-2.0]), np.array([-6.0])]
    agg = R.aggregate(deltas, [0.5, 0.5], [2.0, 6.0], "fednova")
    harmonic = 1.0 / (0.5 / 2.0 + 0.5 / 6.0)
    assert harmonic == pytest.approx(3.0)
    assert agg.change[0] == pytest.approx(-4.0, abs=1e-15)
    # a mistaken normalised mean sum(c_i Δ_i) / sum(c_i) would give -3
    c = agg.coefficients
    assert (c @ np.array([-2.0, -6.0])) / c.sum() == pytest.approx(-3.0)
    assert c.sum() != pytest.approx(1.0)
    # the change scales linearly with τ_eff
    for t in (0.5, 4.0, 10.0):
        assert R.aggregate(deltas, [0.5, 0.5], [2.0, 6.0], "fednova", tau_eff=t).change[0] == pytest.approx(-t, abs=1e-14)


def _random_deltas(rng, m, shape=(4, 3)):
    return [rng.standard_normal(shape) for _ in range(m)]


@pytest.mark.parametrize("solver", [S.sgd(0.1), S.momentum_sgd(0.1, 0.9), S.proximal_sgd(0.1, 0.5),
                                    S.momentum_proximal_sgd(0.1, 0.5, 2.0)], ids=lambda s: s.name)
def test_fednova_equals_fedavg_when_homogeneous(solver):
    rng = np.random.default_rng(0)
    m = 7
    p = rng.random(m)
    p /= p.sum()
    a = np.full(m, solver.a_norm(5))
    deltas = _random_deltas(rng, m)
    avg = R.aggregate(deltas, p, a, "fedavg").change
    nova = R.aggregate(deltas, p, a, "fednova").change
    assert np.max(np.abs(avg - nova)) <= 1e-14 * np.max(np.abs(avg))
    # FedNova's weights are p, FedAvg's equal p only in this homogeneous case
    np.testing.assert_allclose(R.fedavg_weights(p, a)[1], p, rtol=1e-14)


def test_fedavg_is_plain_weighted_averaging_and_eq4():
    rng = np.random.default_rng(1)
    m, lr = 9, 0.03
    p = rng.random(m)
    p /= p.sum()
    a = rng.uniform(1, 30, m)
    deltas = _random_deltas(rng, m)
    plain = sum(pi * d for pi, d in zip(p, deltas))
    for alg in ("fedavg", "fednova"):
        agg = R.aggregate(deltas, p, a, alg)
        # eq. 4 written out with the normalised gradients d_i
        tau_eff, w = (R.fedavg_weights if alg == "fedavg" else R.fednova_weights)(p, a)
        eq4 = -tau_eff * sum(wi * lr * R.normalized_update(d, lr, ai) for wi, d, ai in zip(w, deltas, a))
        assert np.linalg.norm(agg.change - eq4) <= 1e-14 * np.linalg.norm(eq4)
        if alg == "fedavg":
            assert np.linalg.norm(agg.change - plain) <= 1e-14 * np.linalg.norm(plain)
        else:
            assert np.linalg.norm(agg.change - plain) > 1e-3 * np.linalg.norm(plain)


def test_normalized_update_numpy_torch_and_trees():
    delta = {"w": np.array([[-0.4, 0.2]]), "b": (np.array([0.8]),)}
    d = R.normalized_update(delta, 0.1, 4.0)
    np.testing.assert_allclose(d["w"], [[1.0, -0.5]], atol=1e-15)
    np.testing.assert_allclose(d["b"][0], [-2.0], atol=1e-15)
    assert delta["w"][0, 0] == -0.4  # input untouched
    t = R.normalized_update(torch.tensor([-0.4, 0.2], dtype=torch.float64), 0.1, 4.0)
    assert isinstance(t, torch.Tensor)
    torch.testing.assert_close(t, torch.tensor([1.0, -0.5], dtype=torch.float64))


@pytest.mark.parametrize("alg,policy", [("fedavg", None), ("fednova", None), ("fednova", "local_steps"), ("fednova", 2.5)])
def test_torch_dict_tuple_trees_match_numpy(alg, policy):
    rng = np.random.default_rng(2)
    m = 4
    p = rng.random(m)
    p /= p.sum()
    a = rng.uniform(1, 10, m)
    steps = rng.integers(1, 12, m)
    np_trees = [{"conv": rng.standard_normal((2, 3)), "head": (rng.standard_normal(5), rng.standard_normal(()))} for _ in range(m)]
    t_trees = [{"conv": torch.as_tensor(t["conv"]), "head": tuple(torch.as_tensor(x) for x in t["head"])} for t in np_trees]
    ref = R.aggregate(np_trees, p, a, alg, policy, steps)
    got = R.aggregate(t_trees, p, a, alg, policy, steps)
    assert isinstance(got.change["head"], tuple) and isinstance(got.change["conv"], torch.Tensor)
    for x, y in zip(tree_leaves(got.change), tree_leaves(ref.change)):
        np.testing.assert_allclose(x.numpy(), y, rtol=1e-14, atol=1e-15)
    # stacked variant (leading client axis) equals the list variant, numpy and torch
    for trees in (np_trees, t_trees):
        st = R.aggregate_stacked(tree_stack(trees), p, a, alg, policy, steps)
        for x, y in zip(tree_leaves(st.change), tree_leaves(ref.change)):
            np.testing.assert_allclose(np.asarray(x), y, rtol=1e-13, atol=1e-14)
        assert st.tau_eff == ref.tau_eff
        np.testing.assert_array_equal(st.coefficients, ref.coefficients)
    # the clients' trees were not modified
    for t, tt in zip(np_trees, t_trees):
        np.testing.assert_array_equal(t["conv"], tt["conv"].numpy())


def test_sampled_weights_need_not_sum_to_one():
    """With uniform sampling ω_i = p_i m / q: FedAvg's coefficients are ω, FedNova's τ_eff ω_i/‖a_i‖₁."""
    omega = np.array([0.6, 0.9])
    a = np.array([2.0, 3.0])
    tau, w = R.effective_weights("fedavg", omega, a)
    assert tau == pytest.approx(0.6 * 2 + 0.9 * 3)
    agg = R.aggregate([np.ones(1), np.ones(1)], omega, a, "fedavg")
    np.testing.assert_allclose(agg.coefficients, omega, atol=1e-15)
    agg = R.aggregate([np.ones(1), np.ones(1)], omega, a, "fednova", tau_eff=2.0)
    np.testing.assert_allclose(agg.coefficients, 2.0 * omega / a, atol=1e-15)
    with pytest.raises(ValueError, match="tau_eff"):
        R.effective_weights("fedavg", omega, a, tau_eff=3.0)


# --------------------------------------------------------------------------- population weights given as counts
def test_population_weights_given_as_counts_are_refused_with_the_fix():
    from fedlib.engines.reference import run_sequential
    from fedlib.problems import random_quadratic
    from fedlib.rule import aggregate, fedavg_weights
    from fedlib.sampling import full_participation

    problem = random_quadratic(num_clients=3, dim=2, seed=0)
    n = np.array([10, 30, 60])
    algo = make_algorithm("fednova", sgd(lr=0.01))
    fix = r"counts such as the clients' sample numbers n give p = n / n\.sum\(\)"
    with pytest.raises(ValueError, match=r"^p must sum to 1 \(within 1e-09\), got sum 100\.0: .*" + fix):
        run_sequential(algo, np.zeros(2), problem.grad_fn(), n, FixedSteps([1, 2, 3]), rounds=1)
    for call in (lambda: fedavg_weights(n, [1, 2, 3]), lambda: full_participation(n)):
        with pytest.raises(ValueError, match=r"^p must sum to 1 .*" + fix):
            call()
    run = run_sequential(algo, np.zeros(2), problem.grad_fn(), n / n.sum(), FixedSteps([1, 2, 3]), rounds=1)
    assert np.all(np.isfinite(run.state.params))
    # aggregate takes sampling weights too, which need not sum to 1: counts are taken as such and
    # scale the change (documented), never refused: FedAvg's by n, FedNova's by n**2 (tau_eff and w)
    deltas = [np.array([1.0, -2.0]), np.array([0.5, 0.0]), np.array([-1.0, 3.0])]
    for algorithm, power in (("fedavg", 1), ("fednova", 2)):
        by_count = aggregate(deltas, n, [1.0, 2.0, 4.0], algorithm).change
        by_p = aggregate(deltas, n / n.sum(), [1.0, 2.0, 4.0], algorithm).change
        np.testing.assert_allclose(by_count, n.sum() ** power * by_p, rtol=1e-12)


# --------------------------------------------------------------------------- aggregate of a mapping, local_steps
def test_aggregate_refuses_a_mapping_of_clients():
    """aggregate({0: delta_0, 1: delta_1}, p, a_norms) aggregated the dict's keys 0 and 1 as if they were the
    changes and returned the number 0.375, not a model change."""
    import numpy as np

    from fedlib.rule import aggregate

    deltas = {0: np.ones(2), 1: np.ones(2)}
    with pytest.raises(ValueError, match=r"^deltas must be a sequence of the clients' changes.*got a dict"):
        aggregate(deltas, [0.5, 0.5], [1, 2])
    assert aggregate(list(deltas.values()), [0.5, 0.5], [1, 2]).change.tolist() == [1.125, 1.125]


@pytest.mark.parametrize("algorithm", ["fedavg", "fednova"])
def test_aggregate_checks_local_steps_whenever_given(algorithm):
    """local_steps=[0, -3] (or of another length) passed without a word unless tau_eff='local_steps'."""
    import numpy as np

    from fedlib.rule import aggregate

    with pytest.raises(ValueError, match=r"^local_steps must be >= 1 for every client \(client 0 has 0\)"):
        aggregate([np.ones(2)] * 2, [0.5, 0.5], [1, 2], algorithm, local_steps=[0, -3])
    with pytest.raises(ValueError, match=r"^local_steps has 3 clients but client_weights has 2"):
        aggregate([np.ones(2)] * 2, [0.5, 0.5], [1, 2], algorithm, local_steps=[1, 2, 3])
    aggregate([np.ones(2)] * 2, [0.5, 0.5], [1, 2], algorithm, local_steps=[1, 2])



@pytest.mark.parametrize("tau_eff", [None, "a_norm", 3.0])
def test_fednova_weights_checks_local_steps_whenever_given(tau_eff):
    """fednova_weights(p, a_norms, tau_eff, local_steps) read local_steps under tau_eff='local_steps' only: with any
    other policy [0, -3], [1, 2, 3] or ['x', None] came back as (1.5, [0.5, 0.5]) without a word, while
    effective_weights, the same formulas for sampled weights, refused them."""
    from fedlib.rule import fednova_weights

    with pytest.raises(ValueError, match=r"^local_steps must be >= 1 for every client \(client 0 has 0\)"):
        fednova_weights([0.5, 0.5], [1, 2], tau_eff, [0, -3])
    with pytest.raises(ValueError, match=r"^local_steps has 3 clients but p has 2"):
        fednova_weights([0.5, 0.5], [1, 2], tau_eff, [1, 2, 3])
    with pytest.raises(ValueError, match=r"^local_steps must hold whole numbers"):
        fednova_weights([0.5, 0.5], [1, 2], tau_eff, ["x", None])
    assert fednova_weights([0.5, 0.5], [1, 2], tau_eff, [1, 2])[0] == (1.5 if tau_eff != 3.0 else 3.0)

# --------------------------------------------------------------------------- a_norms of another length
def test_a_norms_length_mismatch_names_both_arguments():
    """Was: effective_weights('fednova', [1.0], [2.0, 6.0]) said 'a_norms must have 1 entries (one per
    client), got 2', blaming a_norms when the short one was client_weights."""
    from fedlib.rule import aggregate, aggregation_coefficients, effective_weights, fedavg_weights

    with pytest.raises(ValueError, match="^a_norms and client_weights must have one entry per client, got 2 a_norms "
                                         "and 1 client_weights"):
        effective_weights("fednova", [1.0], [2.0, 6.0])
    with pytest.raises(ValueError, match="^a_norms and client_weights must have one entry per client"):
        aggregate([np.ones(1)] * 2, [0.5, 0.25, 0.25], [1.0, 2.0])
    with pytest.raises(ValueError, match="^a_norms and weights must have one entry per client, got 2 a_norms and 3"):
        aggregation_coefficients(4.0, [0.5, 0.25, 0.25], [2.0, 6.0])
    with pytest.raises(ValueError, match="^a_norms and p must have one entry per client"):
        fedavg_weights([0.5, 0.5], [2.0])



def test_a_coefficient_beyond_float64_is_named_with_its_plain_numbers():
    """c_1 = 1e300 * 0.5 / 1e-10 = 5e309 is beyond float64 (c_0 = 5e299 fits): refused naming c_1 and the numbers
    that give it. Before, NumPy 2's repr of the array's entries showed 'np.float64(0.5) / np.float64(1e-10)'."""
    with pytest.raises(ValueError) as info:
        R.aggregation_coefficients(1e300, [0.5, 0.5], [1.0, 1e-10])
    assert str(info.value) == ("tau_eff: the coefficient c_1 = tau_eff w_1 / ||a_1||_1 = 1e+300 * 0.5 / 1e-10 exceeds "
                               "float64")

def test_client_weights_as_a_torch_tensor():
    """p = n / n.sum() computed in torch (a user's per-client tensors) is accepted wherever p is:
    it raised TypeError "Cannot interpret 'torch.float32' as a data type"."""
    p = torch.tensor([1.0, 3.0]) / 4.0
    assert fednova_weights(p, [2.0, 6.0])[0] == pytest.approx(5.0)
    assert full_participation(p).weights.tolist() == [0.25, 0.75]
    assert sample_clients("uniform", p, 1, 0, 0).clients.size == 1
    assert population_tau_eff(p, RandomEpochs([4, 8], 2, 1, 3), sgd(0.1)) == pytest.approx(7.0)
    assert chi_square(p, [0.25, 0.75]) == pytest.approx(0.0)
    assert fednova_weights(torch.tensor([0.25, 0.75], requires_grad=True), [1.0, 1.0])[1].tolist() == [0.25, 0.75]
    # float32 rounding of 1/3 is tolerated as for a numpy float32 p; a wrong sum is still refused
    fednova_weights(torch.full((3,), 1 / 3), [1.0, 2.0, 3.0])
    fednova_weights(torch.full((3,), 1 / 3, dtype=torch.bfloat16), [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="p must sum to 1"):
        fednova_weights(torch.tensor([0.5, 0.6]), [1.0, 1.0])


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_aggregate_dtype_does_not_depend_on_client_order(kind):
    """Clients reporting in different precisions: the sum was cast in place to the FIRST client's
    dtype, so [float32, float64] gave float32 (the float64 client's digits lost) and the reverse
    order float64; [float32 array, int64 array] likewise. Now the widest dtype, in any order."""
    from fedlib.rule import aggregate

    if kind == "numpy":
        lo, hi, integer = (np.array([1.0], np.float32), np.array([1.0 + 1e-12]), np.array([1], np.int64))
        f64 = np.float64
    else:
        lo, hi, integer = (torch.tensor([1.0]), torch.tensor([1.0 + 1e-12], dtype=torch.float64),
                           torch.tensor([1], dtype=torch.int64))
        f64 = torch.float64
    for deltas in ([lo, hi], [hi, lo]):
        change = aggregate(deltas, [0.5, 0.5], [1.0, 1.0], "fednova").change
        assert change.dtype == f64
        assert float(change[0]) == 1.0 + 0.5e-12  # sum p_i Delta_i (equal a_i): the float64 client's digits kept
    a = aggregate([lo, integer], [0.5, 0.5], [1.0, 1.0]).change
    b = aggregate([integer, lo], [0.5, 0.5], [1.0, 1.0]).change
    assert a.dtype == b.dtype
    same = aggregate([lo, lo], [0.5, 0.5], [1.0, 1.0]).change  # one precision: kept as before
    assert same.dtype == lo.dtype


@pytest.mark.parametrize("a_norms", [torch.tensor([2.0, 6.0], dtype=torch.bfloat16),
                                     torch.tensor([2.0, 6.0], requires_grad=True)])
def test_aggregate_takes_a_norms_as_any_torch_tensor(a_norms):
    """a_norms as a bfloat16 tensor or one requiring grad passed the checks but then failed in
    np.asarray ("Got unsupported ScalarType BFloat16", "Can't call numpy() on Tensor that requires
    grad"); eq. 4 on deltas (-2, -6), p = (1/2, 1/2), ||a|| = (2, 6): tau_eff 4, change -4."""
    from fedlib.rule import aggregate, aggregate_stacked

    deltas = [np.array([-2.0]), np.array([-6.0])]
    assert aggregate(deltas, [0.5, 0.5], a_norms, "fednova").change.tolist() == [-4.0]
    assert aggregate_stacked(np.stack(deltas), [0.5, 0.5], a_norms, "fedavg").change.tolist() == [-4.0]


def test_nan_in_a_change_passes_the_rule_and_apply_raises_on_it():
    """As normalized_update's and aggregate's docstrings say: the entries of the changes are not checked (a NaN
    goes through the arithmetic), and FederatedAlgorithm.apply raises FloatingPointError on the non-finite
    aggregated change."""
    from fedlib.algorithms import ClientUpdate

    bad = np.array([np.nan])
    assert np.isnan(R.normalized_update(bad, lr=1.0, a_norm=1.0)).all()
    p = np.array([0.5, 0.5])
    for name in ("fedavg", "fednova"):
        assert np.isnan(R.aggregate([bad, np.array([2.0])], p, [1.0, 2.0], name).change).all()
        algo = make_algorithm(name, S.sgd(1.0))
        updates = [ClientUpdate(0, bad, 1.0, 1), ClientUpdate(1, np.array([2.0]), 2.0, 2)]
        with pytest.raises(FloatingPointError, match="aggregated update is not finite"):
            algo.apply(algo.init(np.zeros(1), 2), full_participation(p), updates, 1.0, p)


def test_aggregate_stacked_refuses_a_number_leaf_by_name():
    """aggregate_stacked of a stack whose leaf is a number or 0-d array (no client axis) failed with AttributeError
    ('float' object has no attribute 'shape') or IndexError (tuple index out of range); it is a ValueError of deltas."""
    from fedlib.rule import aggregate_stacked

    for deltas in ([1.0, 2.0], np.array(0.5), {"w": np.ones((2, 1)), "n": 3.0}):
        with pytest.raises(ValueError, match="deltas: stacked leaf must have a leading axis of 2 clients"):
            aggregate_stacked(deltas, [0.5, 0.5], [1.0, 1.0], "fedavg")


@pytest.mark.parametrize("lr, a_norm", [(0.5, 5e-324), (5e-324, 0.5), (1e-200, 1e-200)])
def test_normalized_update_refuses_lr_times_a_norm_underflowing(lr, a_norm):
    """lr and a_norm each > 0 passed the checks, but their product is 0 in float64 (0.5 * 5e-324 rounds to 0), and
    -1.0 / (lr * a_norm) raised ZeroDivisionError ('float division by zero'); a ValueError naming both now."""
    with pytest.raises(ValueError, match="lr \\* a_norm underflows to 0"):
        R.normalized_update(np.array([1.0]), lr=lr, a_norm=a_norm)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # numpy's, before the ValueError
def test_weights_whose_tau_eff_overflows_are_refused():
    """Sampling weights need not sum to 1, so [1e308, 1e308] pass check_weights; sum_i w_i ||a_i||_1 with
    ||a|| = (2, 6) overflows to inf. FedAvg's weights were then inf / inf: effective_weights returned (inf, [nan, nan])
    and aggregate a NaN change (FedNova's an inf one) without a word; a ValueError now, as for an underflow to 0."""
    for algorithm in ("fedavg", "fednova"):
        with pytest.raises(ValueError, match="overflows to inf"):
            R.effective_weights(algorithm, [1e308, 1e308], [2.0, 6.0])
        with pytest.raises(ValueError, match="overflows to inf"):
            R.aggregate([np.ones(1), np.ones(1)], [1e308, 1e308], [2.0, 6.0], algorithm)
    assert R.effective_weights("fedavg", [1e300, 1e300], [2.0, 6.0])[1].tolist() == [0.25, 0.75]  # large, finite

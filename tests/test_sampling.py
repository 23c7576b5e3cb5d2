"""Client sampling (paper §4, App. G): both schemes unbiased — exhaustively for small m,
and by Monte Carlo with the real seeded sampler — plus seeded reproducibility."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from fedlib import rule as R
from fedlib import sampling as SA
from fedlib._validate import check_probability_vector
from fedlib.rng import generator
from fedlib.tree import tree_leaves

P4 = np.array([0.1, 0.2, 0.3, 0.4])
A4 = np.array([2.0, 5.0, 1.0, 3.5])     # ‖a_i‖₁ of the clients (heterogeneous)


class _FixedDraw:
    """Stands in for a numpy Generator: ``choice`` returns a prescribed draw."""

    def __init__(self, draw):
        self.draw = np.asarray(draw)

    def choice(self, m, size, replace, p=None):
        assert len(self.draw) == size
        return self.draw.copy()


def _client_changes(m, seed=0):
    rng = np.random.default_rng(seed)
    return [{"w": rng.standard_normal((2, 3)), "b": rng.standard_normal(2)} for _ in range(m)]


def _enumerate(scheme, p, q):
    """All outcomes of a sampler with their exact probabilities, weights from the real sampler code."""
    m = len(p)
    if scheme == "with-replacement":
        for draw in itertools.product(range(m), repeat=q):
            yield float(np.prod(p[list(draw)])), SA.sample_with_replacement(p, q, _FixedDraw(draw))
    else:
        subsets = list(itertools.combinations(range(m), q))
        for sub in subsets:
            yield 1.0 / len(subsets), SA.sample_uniform_without_replacement(p, q, _FixedDraw(sub[::-1]))


def _flat(tree):
    return np.concatenate([np.ravel(x) for x in tree_leaves(tree)])


@pytest.mark.parametrize("scheme", ["with-replacement", "uniform"])
@pytest.mark.parametrize("q", [1, 2, 3])
def test_exhaustive_unbiased_fedavg_aggregate(scheme, q):
    deltas = _client_changes(4)
    full = _flat(R.aggregate(deltas, P4, A4, "fedavg").change)
    expected = np.zeros_like(full)
    expected_fixed_nova = np.zeros_like(full)
    total_prob = 0.0
    for prob, part in _enumerate(scheme, P4, q):
        assert np.all(np.diff(part.clients) > 0)  # sorted, distinct
        sub = [deltas[i] for i in part.clients]
        expected += prob * _flat(R.aggregate(sub, part.weights, A4[part.clients], "fedavg").change)
        expected_fixed_nova += prob * _flat(R.aggregate(sub, part.weights, A4[part.clients], "fednova", tau_eff=2.5).change)
        total_prob += prob
    assert total_prob == pytest.approx(1.0, abs=1e-14)
    assert np.max(np.abs(expected - full)) <= 1e-12
    # FedNova with a fixed τ_eff is linear in ω, hence unbiased too
    full_nova = _flat(R.aggregate(deltas, P4, A4, "fednova", tau_eff=2.5).change)
    assert np.max(np.abs(expected_fixed_nova - full_nova)) <= 1e-12


def test_exhaustive_weights_hand():
    # with replacement, q = 2, draw (3, 3): client 3 trains once with weight 1
    part = SA.sample_with_replacement(P4, 2, _FixedDraw([3, 3]))
    assert part.clients.tolist() == [3] and part.weights.tolist() == [1.0]
    part = SA.sample_with_replacement(P4, 3, _FixedDraw([2, 0, 2]))
    assert part.clients.tolist() == [0, 2]
    np.testing.assert_allclose(part.weights, [1 / 3, 2 / 3])
    # uniform: ω_i = p_i m / q
    part = SA.sample_uniform_without_replacement(P4, 2, _FixedDraw([3, 1]))
    assert part.clients.tolist() == [1, 3]
    np.testing.assert_allclose(part.weights, [0.2 * 4 / 2, 0.4 * 4 / 2])
    full = SA.full_participation(P4)
    assert full.clients.tolist() == [0, 1, 2, 3] and full.weights.tolist() == P4.tolist()
    assert SA.sample_clients("full", P4, None, 0, 5).weights.tolist() == P4.tolist()


@pytest.mark.parametrize("scheme", ["with-replacement", "uniform"])
def test_monte_carlo_unbiased_real_sampler(scheme):
    """20 000 rounds of ``sample_clients``; every coordinate of the mean within 5 standard errors."""
    m, q, n = 6, 3, 20_000
    p = np.array([0.05, 0.1, 0.15, 0.2, 0.2, 0.3])
    z = np.random.default_rng(1).standard_normal((m, 4))
    z = np.hstack([z, np.eye(m)])  # also E[ω_i] = p_i for every client
    target = p @ z
    draws = np.empty((n, z.shape[1]))
    for t in range(n):
        part = SA.sample_clients(scheme, p, q, 123, t)
        draws[t] = part.weights @ z[part.clients]
    mean = draws.mean(0)
    se = draws.std(0, ddof=1) / math.sqrt(n)
    assert np.all(se > 0)
    assert np.all(np.abs(mean - target) <= 5 * se), (mean - target) / se
    # a biased variant (uniform sampling with weights p_i / Σ_S p_j) is caught by the same test
    if scheme == "uniform":
        biased = np.empty_like(draws)
        for t in range(n // 4):
            part = SA.sample_clients(scheme, p, q, 123, t)
            wb = p[part.clients] / p[part.clients].sum()
            biased[t] = wb @ z[part.clients]
        b = biased[: n // 4]
        assert np.any(np.abs(b.mean(0) - target) > 5 * b.std(0, ddof=1) / math.sqrt(len(b)))


def test_seeded_reproducibility():
    p = np.full(10, 0.1)
    for scheme in ("with-replacement", "uniform"):
        a = SA.sample_clients(scheme, p, 4, 7, 3)
        b = SA.sample_clients(scheme, p, 4, 7, 3)
        np.testing.assert_array_equal(a.clients, b.clients)
        np.testing.assert_array_equal(a.weights, b.weights)
        rounds = {tuple(SA.sample_clients(scheme, p, 4, 7, t).clients) for t in range(20)}
        assert len(rounds) > 5  # different rounds differ
        seeds = [tuple(SA.sample_clients(scheme, p, 4, s, 3).clients) for s in range(20)]
        assert len(set(seeds)) > 5  # different seeds differ (no global reseeding)


@pytest.mark.parametrize("scheme, q", [("full", None), ("with-replacement", 1), ("uniform", 1)])
@pytest.mark.parametrize("seed, round_index, message", [
    (-1, 0, r"^seed must be an integer >= 0, got -1$"), (True, 0, r"^seed must be an integer >= 0, got True$"),
    (1.5, 0, r"^seed must be an integer >= 0"), (2 ** 128, 0, r"^seed must be below 2\*\*128"),
    (0, 2 ** 32, r"^key must be below 2\*\*32")])
def test_every_scheme_checks_seed_and_round_alike(scheme, q, seed, round_index, message):
    """Full participation draws nothing, but its seed and round are the same arguments: before, sample_clients("full",
    p, None, -1, 0) returned every client while the sampled schemes refused seed -1 (and 2**128, True, 1.5, a round
    of 2**32) in their draw."""
    with pytest.raises(ValueError, match=message):
        SA.sample_clients(scheme, [0.5, 0.5], q, seed, round_index)


@pytest.mark.parametrize("closed_form", [
    lambda q: SA.weight_moments("full", P4, q), lambda q: SA.effective_participants("full", P4, q),
    lambda q: SA.expected_server_weights("full", P4, A4, q)])
def test_closed_forms_refuse_a_q_with_full_participation_as_sample_clients_does(closed_form):
    """Before, weight_moments("full", p, 3) (and effective_participants, expected_server_weights) ignored q = 3 while
    sample_clients("full", p, 3, 0, 0) refused it; q = None is full participation's."""
    for q in (3, -1):
        with pytest.raises(ValueError, match=rf"^clients_per_round: full participation takes every client, so q = {q} "):
            closed_form(q)
    closed_form(None)
    with pytest.raises(ValueError, match="clients_per_round: full participation"):
        SA.sample_clients("full", P4, 3, 0, 0)


def test_uniform_all_clients_is_full_participation():
    part = SA.sample_clients("uniform", P4, 4, 0, 0)
    assert part.clients.tolist() == [0, 1, 2, 3]
    np.testing.assert_allclose(part.weights, P4)


# ------------------------------------------------------------------ effective_participants
@pytest.mark.parametrize("scheme", ["with-replacement", "uniform"])
@pytest.mark.parametrize("q", [1, 2, 3, 4])
def test_effective_participants_exhaustive(scheme, q):
    """1 / E[sum_i omega_i^2], exactly, over every outcome of the real sampler code."""
    expected = sum(prob * float(part.weights @ part.weights) for prob, part in _enumerate(scheme, P4, q))
    assert SA.effective_participants(scheme, P4, q) == pytest.approx(1.0 / expected, rel=1e-12)


def test_effective_participants_noise_variance_monte_carlo():
    """The variance of sum_i omega_i xi_i over seeded rounds is sigma^2 / q_eff (within 4 s.e.)."""
    rng = np.random.default_rng(5)
    p = rng.dirichlet(np.ones(12))
    for scheme, q in [("with-replacement", 8), ("with-replacement", 40), ("uniform", 5)]:
        sums = []
        for t in range(6000):
            part = SA.sample_clients(scheme, p, q, seed=3, round_index=t)
            sums.append(part.weights @ rng.standard_normal(part.clients.size))
        sums = np.array(sums)
        var, se = sums.var(), sums.var() * math.sqrt(2 / (sums.size - 1))
        assert abs(var - 1 / SA.effective_participants(scheme, p, q)) < 4 * se, scheme


def test_effective_participants_limits_and_errors():
    p = np.full(16, 1 / 16)
    assert SA.effective_participants("full", p) == pytest.approx(16)
    assert SA.effective_participants("uniform", p, 5) == pytest.approx(5)
    assert SA.effective_participants("with-replacement", p, 1) == pytest.approx(1)
    # with replacement saturates at 1 / ||p||^2 = m however many draws
    assert SA.effective_participants("with-replacement", p, 10**6) == pytest.approx(16, rel=1e-4)
    assert SA.effective_participants("full", [0.5, 0.25, 0.25]) == pytest.approx(1 / 0.375)
    with pytest.raises(ValueError, match="clients_per_round"):
        SA.effective_participants("uniform", p, 17)
    with pytest.raises(ValueError, match="sampling"):
        SA.effective_participants("poisson", p, 2)


# ------------------------------------------------------------------ weight moments, FedNova's expected step
@pytest.mark.parametrize("scheme", ["with-replacement", "uniform"])
@pytest.mark.parametrize("q", [1, 2, 3, 4])
def test_weight_moments_exhaustive(scheme, q):
    """E[omega_i omega_j] and E[1{i in S} omega_j] over every outcome of the real sampler code."""
    m = P4.size
    pair, presence = np.zeros((m, m)), np.zeros((m, m))
    for prob, part in _enumerate(scheme, P4, q):
        omega = np.zeros(m)
        omega[part.clients] = part.weights
        chosen = np.zeros(m)
        chosen[part.clients] = 1.0
        pair += prob * np.outer(omega, omega)
        presence += prob * np.outer(chosen, omega)
    got = SA.weight_moments(scheme, P4, q)
    np.testing.assert_allclose(got.pair, pair, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(got.presence, presence, rtol=1e-12, atol=1e-15)


def test_weight_moments_full_and_by_hand():
    full = SA.weight_moments("full", P4)
    np.testing.assert_array_equal(full.pair, np.outer(P4, P4))
    np.testing.assert_array_equal(full.presence, np.tile(P4, (4, 1)))
    # two equal clients, q = 2 draws with replacement: S = {0} w.p. 1/4 (omega_0 = 1),
    # {1} w.p. 1/4, {0, 1} w.p. 1/2 (omega = 1/2 each)
    wr = SA.weight_moments("with-replacement", [0.5, 0.5], 2)
    np.testing.assert_allclose(wr.pair, [[0.25 + 0.125, 0.125], [0.125, 0.375]], rtol=1e-15)
    np.testing.assert_allclose(wr.presence, [[0.5, 0.25], [0.25, 0.5]], rtol=1e-15)  # E[1{0 in S} omega_1] = 1/2 * 1/2
    one = SA.weight_moments("uniform", [1.0], 1)
    np.testing.assert_array_equal(one.pair, [[1.0]])
    with pytest.raises(ValueError, match="clients_per_round"):
        SA.weight_moments("uniform", P4, 5)
    with pytest.raises(ValueError, match="sampling"):
        SA.weight_moments("poisson", P4, 2)


@pytest.mark.parametrize("scheme", ["full", "with-replacement", "uniform"])
@pytest.mark.parametrize("tau_eff", ["participants", "selected_p", 3.25])
def test_expected_server_weights_equal_the_aggregate_averaged_over_samples(scheme, tau_eff):
    """E[server change] of the rule's own aggregate (FedNova, tau_eff of the sample or fixed), every
    outcome enumerated, equals sum_j c_j d_j with d_j = Delta_j / ||a_j||_1."""
    q = 3
    deltas = _client_changes(4, seed=2)
    d = [_flat(x) / a for x, a in zip(deltas, A4)]
    outcomes = [(1.0, SA.full_participation(P4))] if scheme == "full" else _enumerate(scheme, P4, q)
    expected = np.zeros_like(d[0])
    for prob, part in outcomes:
        sel = list(part.clients)
        if tau_eff == "selected_p":
            policy = float(P4[sel] @ A4[sel])
        elif tau_eff == "participants":
            policy = None  # the rule's default: sum_i omega_i ||a_i||_1
        else:
            policy = tau_eff
        agg = R.aggregate([deltas[i] for i in sel], part.weights, A4[sel], "fednova", policy)
        expected += prob * _flat(agg.change)
    c = SA.expected_server_weights(scheme, P4, A4, None if scheme == "full" else q, tau_eff)
    np.testing.assert_allclose(sum(cj * dj for cj, dj in zip(c, d)), expected, rtol=1e-12, atol=1e-14)


def test_expected_server_weights_by_hand_and_errors():
    # with replacement: c_j = (1 - 1/q) p_j sum_i p_i a_i + p_j a_j / q
    c = SA.expected_server_weights("with-replacement", P4, A4, 3, "participants")
    np.testing.assert_allclose(c, (2 / 3) * P4 * (P4 @ A4) + P4 * A4 / 3, rtol=1e-14)
    # App. H: p_j [sum_i p_i a_i pi_i + p_j a_j (1 - p_j)^(q-1)], pi_i = 1 - (1 - p_i)^(q-1)
    pi = 1 - (1 - P4) ** 2
    c = SA.expected_server_weights("with-replacement", P4, A4, 3, "selected_p")
    np.testing.assert_allclose(c, P4 * ((P4 * A4) @ pi + P4 * A4 * (1 - P4) ** 2), rtol=1e-14)
    # full participation: every choice is consistent
    for policy in ("participants", "selected_p"):
        np.testing.assert_allclose(SA.expected_server_weights("full", P4, A4, tau_eff=policy), P4 * (P4 @ A4), rtol=1e-14)
    np.testing.assert_allclose(SA.expected_server_weights("uniform", P4, A4, 2, 2.0), 2 * P4, rtol=1e-15)
    with pytest.raises(ValueError, match="tau_eff"):
        SA.expected_server_weights("uniform", P4, A4, 2, "sample")
    with pytest.raises(ValueError, match="tau_eff"):
        SA.expected_server_weights("uniform", P4, A4, 2, 0.0)
    with pytest.raises(ValueError, match="a_norms"):
        SA.expected_server_weights("uniform", P4, A4[:3], 2)
    with pytest.raises(ValueError, match="a_norms"):
        SA.expected_server_weights("uniform", P4, -A4, 2)


def test_expected_server_weights_limits():
    """q = m without replacement is full participation. One draw with replacement (client j
    with probability p_j, weight 1) makes FedNova with the sample's tau_eff = ||a_j||_1 exactly
    FedAvg in expectation (c_j = p_j ||a_j||_1); App. H's tau_eff = p_j ||a_j||_1 gives
    c_j = p_j^2 ||a_j||_1. Many draws approach the consistent c = p sum_i p_i ||a_i||_1."""
    full = SA.expected_server_weights("full", P4, A4)
    np.testing.assert_allclose(SA.expected_server_weights("with-replacement", P4, A4, 1, "participants"), P4 * A4,
                               rtol=1e-14)
    np.testing.assert_allclose(SA.expected_server_weights("with-replacement", P4, A4, 1, "selected_p"),
                               P4 ** 2 * A4, rtol=1e-14)
    for policy in ("participants", "selected_p"):
        np.testing.assert_allclose(SA.expected_server_weights("uniform", P4, A4, 4, policy), full, rtol=1e-14)
        many = SA.expected_server_weights("with-replacement", P4, A4, 10_000, policy)
        np.testing.assert_allclose(many, full, rtol=1e-3)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("scheme", ["with-replacement", "uniform"])
def test_sampling_moments_by_enumeration_on_random_p(scheme, seed):
    """weight_moments, effective_participants and expected_server_weights against every outcome of
    the real sampler code (with its probability), for random p, a and q (the tests above use P4)."""
    rng = np.random.default_rng(seed)
    m = int(rng.integers(3, 6))
    q = int(rng.integers(2, m))
    p = rng.dirichlet(np.ones(m))
    a = rng.uniform(1, 20, size=m)
    outcomes = list(_enumerate(scheme, p, q))
    assert sum(pr for pr, _ in outcomes) == pytest.approx(1, abs=1e-12)
    mean_w, pair, presence, sum_sq = np.zeros(m), np.zeros((m, m)), np.zeros((m, m)), 0.0
    c_part, c_sel = np.zeros(m), np.zeros(m)
    for pr, part in outcomes:
        omega = np.zeros(m)
        omega[part.clients] = part.weights
        mean_w += pr * omega
        pair += pr * np.outer(omega, omega)
        chosen = omega > 0
        presence += pr * np.outer(chosen.astype(float), omega)
        sum_sq += pr * float(omega @ omega)
        tau_part = float(omega @ a)  # the library's default: sum_S omega_i ||a_i||_1
        tau_sel = float(p[chosen] @ a[chosen])  # App. H: sum_S p_i ||a_i||_1
        c_part += pr * tau_part * omega
        c_sel += pr * tau_sel * omega
    np.testing.assert_allclose(mean_w, p, rtol=1e-12)  # both schemes are unbiased: E[omega] = p (App. G)
    moments = SA.weight_moments(scheme, p, q)
    np.testing.assert_allclose(moments.pair, pair, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(moments.presence, presence, rtol=1e-12, atol=1e-15)
    assert SA.effective_participants(scheme, p, q) == pytest.approx(1 / sum_sq, rel=1e-12)
    # E[tau_eff sum_S omega_i d_i] = sum_i c_i d_i: the coefficient of client i's d_i
    np.testing.assert_allclose(SA.expected_server_weights(scheme, p, a, q, "participants"), c_part, rtol=1e-12)
    np.testing.assert_allclose(SA.expected_server_weights(scheme, p, a, q, "selected_p"), c_sel, rtol=1e-12)


# ---------------------------------------------------------------- found by a metamorphic audit
def test_uniform_sampling_refuses_a_sample_that_could_have_no_weight():
    """p_i = 0 gives omega_i = 0 under uniform sampling; with q no larger than the number of such clients a
    round could draw only them (FedNova then crashed in round 3 with 'client_weights must not all
    be zero'). Now the first round refuses, naming the fix; q above that number, and sampling by p, run."""
    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.problems import random_quadratic
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd

    prob = random_quadratic(3, 2, seed=0, p=[0.5, 0.5, 0.0])
    algo = make_algorithm("fednova", sgd(0.05))

    def run(sampling, q):
        return run_sequential(algo, np.zeros(2), prob.grad_fn(), prob.p, FixedSteps([1, 2, 3]), 10,
                              sampling=sampling, clients_per_round=q)

    with pytest.raises(ValueError, match=r"1 client\(s\) have weight 0, so uniform sampling of 1 client"):
        run("uniform", 1)
    assert run("uniform", 2).state.round == 10
    out = run("with-replacement", 1)
    assert out.state.round == 10 and all(2 not in d.clients for d in out.diagnostics)
    with pytest.raises(ValueError, match="weight 0"):
        SA.sample_clients("uniform", [0.0, 0.0, 1.0], 2, 0, 0)
    assert SA.sample_clients("uniform", [0.0, 0.0, 1.0], 3, 0, 0).weights.tolist() == [0.0, 0.0, 1.0]


def test_float32_weights_are_judged_at_float32_precision():
    """float32 1/3 sums to 1 + 3e-8: refused by a 1e-9 test the float64 value would pass, while aggregate took it.
    The tolerance follows the input's type (16 eps); float64 inputs keep 1e-9."""
    p32 = np.full(3, 1 / 3, dtype=np.float32)
    tau_eff, w = R.fedavg_weights(p32, [1.0, 2.0, 3.0])
    assert tau_eff == pytest.approx(2.0, rel=1e-7)
    assert SA.sample_clients("uniform", p32, 2, 0, 0).clients.size == 2
    with pytest.raises(ValueError, match="must sum to 1"):
        R.fedavg_weights(np.array([0.5, 0.5 + 1e-5], dtype=np.float32), [1.0, 2.0])
    with pytest.raises(ValueError, match="must sum to 1"):
        R.fedavg_weights(np.array([0.5, 0.5 + 1e-8]), [1.0, 2.0])
    assert R.fedavg_weights([0.5, 0.5 + 1e-10], [1.0, 2.0])[0] == pytest.approx(1.5)


@pytest.mark.parametrize("p", [torch.tensor([0.5, 0.5], requires_grad=True), torch.tensor([0.5, 0.5], dtype=torch.bfloat16)])
def test_expected_server_weights_takes_p_as_any_torch_tensor(p):
    """p as a tensor requiring grad or a bfloat16 one passed weight_moments' check, then np.asarray(p) raised RuntimeError
    ("Can't call numpy() on Tensor that requires grad") or TypeError ("Got unsupported ScalarType BFloat16").
    With replacement, q = 2, ||a|| = (1, 3): c_j = (1 - 1/2) p_j (1/2 + 3/2) + p_j ||a_j|| / 2 = (0.75, 1.25)."""
    np.testing.assert_allclose(SA.expected_server_weights("with-replacement", p, [1.0, 3.0], 2), [0.75, 1.25])


@pytest.mark.parametrize("p", [np.full(3, 1 / 3, dtype=np.float32), torch.full((3,), 1 / 3),
                               torch.full((7,), 1 / 7, dtype=torch.bfloat16)])
def test_sampling_with_replacement_draws_from_weights_accepted_at_their_precision(p):
    """float32 1/3 sums to 1 + 2.98e-8 and bfloat16 1/7 to 1 - 0.00195: check_probability_vector accepts them at
    their own precision (and uniform sampling drew with them), but sample_with_replacement and
    sample_clients('with-replacement') failed in numpy's choice with 'Probabilities do not sum to 1', naming no
    argument. They draw now: q = 4 draws, weights counts / 4 summing to 1."""
    for part in (SA.sample_with_replacement(p, 4, np.random.default_rng(0)),
                 SA.sample_clients("with-replacement", p, 4, seed=0, round_index=0)):
        assert part.weights.sum() == 1.0 and np.all((4 * part.weights) % 1 == 0)


def test_as_participation_refuses_weights_given_as_text():
    """A Participation (a sampler's, or one built for apply) whose weights are strings is refused, naming them. Before:
    ``np.asarray(weights, dtype=float)`` read '0.5' as 0.5, so the round went on without a word. Number weights, in a
    list, tuple, numpy array or tensor, are read as before."""
    with pytest.raises(ValueError, match=r"^participation: weights must be numbers, got the text '0\.5'$"):
        SA.as_participation(SA.Participation([0, 1], ["0.5", "0.5"]))
    with pytest.raises(ValueError, match=r"^sampling\(0\)|^participation: weights must be numbers"):
        SA.round_participation(lambda t: SA.Participation([0, 1], [0.5, "0.5"]), [0.5, 0.5], None, seed=0,
                               round_index=0)
    for weights in ([0.5, 0.5], (0.5, 0.5), np.array([0.5, 0.5]), torch.tensor([0.5, 0.5], dtype=torch.float64)):
        assert SA.as_participation(SA.Participation([0, 1], weights)).weights.tolist() == [0.5, 0.5]


def test_as_participation_refuses_weights_that_require_grad():
    """Weights given as a tensor that requires grad (e.g. learned sampling weights) failed in numpy with torch's
    RuntimeError "Can't call numpy() on Tensor that requires grad", naming neither the weights nor the sampler and
    round. Now a ValueError names them and says what to pass; the detached tensor is read as before."""
    weights = torch.tensor([0.25, 0.75], dtype=torch.float64, requires_grad=True)
    with pytest.raises(ValueError, match=r"^participation: weights must be numbers, got a tensor that requires grad "
                                         r"\(.*pass weights\.detach\(\)\)$"):
        SA.as_participation(SA.Participation([0, 1], weights))
    with pytest.raises(ValueError, match=r"^sampling\(2\): weights must be numbers, got a tensor that requires grad"):
        SA.round_participation(lambda t: SA.Participation([0, 1], weights), [0.5, 0.5], None, seed=0, round_index=2)
    assert SA.as_participation(SA.Participation([0, 1], weights.detach())).weights.tolist() == [0.25, 0.75]


@pytest.mark.parametrize("clients, weights, why", [
    ([0.0, 1.0], [0.5, 0.5], "must name at least one client by integer index, got clients [0.0, 1.0]"),
    ([0.5], [1.0], "must name at least one client by integer index, got clients [0.5]"),
    ([], [], "must name at least one client by integer index, got clients []"),
    ([0, 1], [-0.5, 1.5], ": weights must be finite and >= 0 with a positive sum, got [-0.5, 1.5]"),
    ([0, 1], [0.0, 0.0], ": weights must be finite and >= 0 with a positive sum, got [0.0, 0.0]"),
    ([0, 1], [np.nan, 1.0], ": weights must be finite and >= 0 with a positive sum, got [nan, 1.0]")])
def test_as_participation_refuses_what_a_sampler_is_refused(clients, weights, why):
    """as_participation (what apply and distributed_apply take) refuses what round_participation refuses of a user's
    sampler: float client indices passed (1.0 as client 1), client 0.5 failed as 'updates must come in the order of
    participation.clients', bad weights named aggregate's own argument, client_weights."""
    with pytest.raises(ValueError) as err:
        SA.as_participation(SA.Participation(clients, weights))
    assert str(err.value) == "participation" + (why if why.startswith(":") else " " + why)
    assert SA.as_participation(SA.Participation([0, 1], [0.0, 2.0])).weights.tolist() == [0.0, 2.0]


def test_a_sampler_returning_no_participation_is_named():
    """A user's sampler that returned None (no return statement), a (clients, weights) tuple or an array was refused
    with 'participation must be a fedlib.sampling.Participation (full_participation(p), sample_clients(...)), got
    NoneType', and a Participation with a repeated client with 'participation: clients must be distinct ...': neither
    named the sampler nor the round. Now the messages start with 'sampling(3)', as its other checks did."""
    p = [0.25] * 4
    for got, shown in ((None, r"NoneType \(a missing return statement\?\)"),
                       (([0, 1], [0.5, 0.5]), r"tuple \(a pair: return Participation\(clients, weights\)\)"),
                       (np.array([0, 1]), "ndarray"), ([0, 1], "list")):
        with pytest.raises(ValueError, match=rf"^sampling\(3\): a sampler must return a fedlib\.sampling\."
                                             rf"Participation\(clients, weights\), got {shown}$"):
            SA.round_participation(lambda t, got=got: got, p, None, seed=0, round_index=3)
    with pytest.raises(ValueError, match=r"^sampling\(3\): clients must be distinct .* got \[1, 1\]$"):
        SA.round_participation(lambda t: SA.Participation([1, 1], [0.5, 0.5]), p, None, seed=0, round_index=3)
    with pytest.raises(ValueError, match=r"^sampling\(3\): clients and weights must be 1-d with one weight per client"):
        SA.round_participation(lambda t: SA.Participation([0, 1], [1.0]), p, None, seed=0, round_index=3)
    with pytest.raises(ValueError, match=r"^participation: clients must be distinct"):  # apply's argument keeps its name
        SA.as_participation(SA.Participation([1, 1], [0.5, 0.5]))


@pytest.mark.parametrize("p", [np.array([0.1, 0.2, 0.3, 0.4], dtype=np.float32),
                               torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.bfloat16)])
def test_low_precision_weights_draw_with_replacement_as_their_float64_sum_one_version(p):
    """float32 / bfloat16 p are accepted at their own precision (float32 (0.1, 0.2, 0.3, 0.4) sums to 1 + 2.2e-8 in
    float64; numpy's choice refuses a p off by more than ~1e-8): the draw uses p divided by its sum, for both the first
    round (sample_clients) and the later ones (_sample_clients_again, which takes the checked array)."""
    exact = np.array([float(v) for v in p]) / sum(float(v) for v in p)
    for t in range(20):
        first = SA.sample_clients("with-replacement", p, 3, seed=5, round_index=t)
        again = SA._sample_clients_again("with-replacement", check_probability_vector("p", p), 3, 5, t)
        ref = SA.sample_with_replacement(exact, 3, generator(5, "sampling", t))
        for part in (first, again):
            assert part.clients.tolist() == ref.clients.tolist() and part.weights.tolist() == ref.weights.tolist()


def test_presence_with_replacement_small_weights():
    """E[1{i in S} w_j] = p_j (1 - (1 - p_i)^(q-1)) for clients of tiny weight (audit of extreme inputs).

    Before: the plain 1 - (1 - p_i)^(q-1) gave 0 for p_i = 1e-20 and 1e-300 (exact: (q-1) p_i p_j to 20 digits) and
    was 1e-5 relative off at p_i = 1e-12; now -expm1((q-1) log1p(-p_i)). Compared with Fraction, rel 1e-14, where the
    exact value is a normal float (above 2.2e-308)."""
    from fractions import Fraction

    p = np.array([1e-300, 1e-20, 1e-12, 1e-6, 0.5])
    p[-1] = 1 - p[:-1].sum()
    for q in (2, 10, 1000):
        presence = SA.weight_moments("with-replacement", p, q).presence
        for i in range(p.size):
            for j in range(p.size):
                exact = Fraction(p[j]) * (1 - (1 - Fraction(p[i])) ** (q - 1)) if i != j else Fraction(p[j])
                if exact > Fraction(2.3e-308):
                    assert presence[i, j] == pytest.approx(float(exact), rel=1e-14, abs=0.0), (q, i, j)
    # a client of weight 1 is in every sample of 2 or more draws; with one draw the other never is
    assert SA.weight_moments("with-replacement", [1.0, 0.0], 3).presence.tolist() == [[1.0, 0.0], [0.0, 0.0]]
    assert SA.weight_moments("with-replacement", [1.0, 0.0], 1).presence.tolist() == [[1.0, 0.0], [0.0, 0.0]]


@pytest.mark.parametrize("sampler", [SA.sample_with_replacement, SA.sample_uniform_without_replacement])
@pytest.mark.parametrize("rng", [0, None, "0"])
def test_a_seed_given_for_rng_is_refused_by_name(sampler, rng):
    """A seed (or None) passed as ``rng`` is a ValueError naming rng. Before: the draw failed deep inside with
    "AttributeError: 'int' object has no attribute 'choice'" ('NoneType', 'str'), naming no argument. A Generator
    (and any object with a ``choice`` method, as _FixedDraw) is taken as before."""
    with pytest.raises(ValueError, match=r"^rng must be a numpy random Generator .*got (int|NoneType|str)$"):
        sampler(P4, 2, rng)
    part = sampler(P4, 2, generator(0, "sampling", 3))
    same = SA.sample_clients("with-replacement" if sampler is SA.sample_with_replacement else "uniform", P4, 2, 0, 3)
    assert np.array_equal(part.clients, same.clients) and np.array_equal(part.weights, same.weights)


@pytest.mark.parametrize("scheme", ["uniform", "with-replacement"])
def test_a_sampled_scheme_without_clients_per_round_says_it_is_required(scheme):
    """A sampled scheme given no q (clients_per_round left at its default None: sample_clients, round_participation,
    RunSpec(sampling="uniform")) says that the scheme needs it, as the CLI's "--clients-per-round is required with
    --sampling uniform" does. Before: "clients_per_round must be an integer >= 1, got None", as if None had been a
    wrong value given on purpose. A wrong q keeps its message."""
    p = np.full(4, 0.25)
    message = (rf"^clients_per_round is required with sampling '{scheme}' \(the number q of clients drawn each "
               r"round\), got None$")
    with pytest.raises(ValueError, match=message):
        SA.sample_clients(scheme, p, None, 0, 0)
    with pytest.raises(ValueError, match=message):
        SA.round_participation(scheme, p, None, seed=0, round_index=0)
    with pytest.raises(ValueError, match=r"^clients_per_round must be an integer >= 1, got 0$"):
        SA.sample_clients(scheme, p, 0, 0, 0)

"""Chapter 2's FedProx-versus-FedAvg asserts: which are theorems and which are facts of an instance.

Chapter 2 asserts on its (seeded) quadratic instances that FedProx's round map contracts more
slowly than FedAvg's and that FedProx's closed-form fixed point lies closer to x* than FedAvg's.
The first is a theorem (proof below, checked on random instances), so its small margin on the
chapter's instance (about 1 %) does not matter. The second is not: it fails on instances built
by hand, so the chapter keeps it as the paper's §3 observation about its Figure 2 ("FedProx can
slightly improve on the optimality gap of FedAvg"), not as a general claim.
"""
import numpy as np
import pytest

from fedlib.experiments import quadratic as Q
from fedlib.problems import random_quadratic
from fedlib.problems.quadratic import QuadraticProblem


def test_fedprox_round_map_contracts_more_slowly_than_fedavg_on_random_instances():
    r"""Theorem. The round map of FedAvg/FedProx is :math:`M = I - \sum_i p_iS_i` with
    :math:`S_i = K_iH_i = s(H_i)`, :math:`s(h) = h\,g(h + \mu)`,
    :math:`g(u) = [1 - (1 - \eta u)^{\tau_i}]/u = \eta\sum_{k<\tau_i}(1 - \eta u)^k`. For
    :math:`\eta(L + \mu) \le 1` every term of :math:`g` is non-increasing in :math:`u`, strictly
    when :math:`\tau_i \ge 2`, so :math:`S_i(\mu) \preceq S_i(0)` (both are functions of the same
    :math:`H_i`), strictly for :math:`\tau_i \ge 2` and :math:`H_i \succ 0`; the eigenvalues of
    :math:`S_i` lie in :math:`(0, 1]`, so :math:`M \succeq 0` and
    :math:`\rho(M) = 1 - \lambda_{\min}(\sum_ip_iS_i)`, which by Weyl grows with :math:`\mu`,
    strictly when some :math:`\tau_i \ge 2`. With every :math:`\tau_i = 1`, :math:`S_i = \eta H_i`
    for every :math:`\mu`: the radii are equal."""
    rng = np.random.default_rng(20261204)
    for k in range(60):
        m, d = int(rng.integers(2, 9)), int(rng.integers(1, 7))
        prob = random_quadratic(m, d, seed=5000 + k)  # eigenvalues in [0.5, 2]: L <= 2
        tau = rng.integers(1, 11, size=m)
        tau[rng.integers(m)] = max(2, tau.max())  # some tau_i >= 2
        for lr, mu in ((0.05, 1.0), (0.01, 5.0), (0.1, 8.0)):  # the chapter's two, and eta (L + mu) = 1
            assert lr * (2.0 + mu) <= 1 + 1e-12
            r_avg = Q.round_map_radius(prob, "fedavg", lr, tau)
            r_prox = Q.round_map_radius(prob, "fedprox", lr, tau, mu)
            assert r_prox > r_avg, (k, m, d, tau, lr, mu, r_avg, r_prox)
            ones = np.ones(m, dtype=int)
            assert Q.round_map_radius(prob, "fedprox", lr, ones, mu) == pytest.approx(
                Q.round_map_radius(prob, "fedavg", lr, ones), rel=1e-12)


def test_fedprox_fixed_point_is_not_always_closer_to_x_star():
    """Not a theorem: two clients on the line, F_1 = (x - 1)^2 / 2 with tau_1 = 8 and
    F_2 = (x + 1)^2 with tau_2 = 10, eta = 0.05, mu = 1 (chapter 2's fixed-point settings).
    FedAvg's tau-bias (towards client 2) and its curvature saturation (eta h_2 tau_2 = 1: client 2's
    steps shrink, away from client 2) nearly cancel; FedProx's proximal term upsets the balance and
    its limit is about twice as far from x* = -1/3."""
    prob = QuadraticProblem(H=np.array([[[1.0]], [[2.0]]]), e=np.array([[1.0], [-2.0]]), p=np.array([0.5, 0.5]))
    x_star = prob.optimum()
    assert x_star == pytest.approx([-1 / 3])
    d_avg = float(np.linalg.norm(Q.fixed_point(prob, "fedavg", 0.05, [8, 10]) - x_star))
    d_prox = float(np.linalg.norm(Q.fixed_point(prob, "fedprox", 0.05, [8, 10], 1.0) - x_star))
    assert d_prox > 1.5 * d_avg, (d_avg, d_prox)
    # ... while the round-map ordering of the theorem above holds here too
    assert Q.round_map_radius(prob, "fedprox", 0.05, [8, 10], 1.0) > Q.round_map_radius(prob, "fedavg", 0.05, [8, 10])

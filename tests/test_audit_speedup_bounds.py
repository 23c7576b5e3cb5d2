"""Audit of fedlib.experiments.speedup / bounds (chapter 8): arguments that used to be accepted silently.

- rounds T and sample sizes q given as non-integers were truncated by ``int()`` (T = 50.7 ran 50 rounds,
  q = 2.9 sampled 2 clients) and empty lists gave no rows at all;
- ``objective_gap`` broadcast a scalar ``x0`` to the all-equal point, returned NaN for a NaN ``x0`` and
  failed with bare numpy errors for a point of the wrong size;
- ``equal_budget_ratios`` returned ``[]`` for a misspelt algorithm or a negative ``rtol`` (so a
  caller's ``all(ratio < 1.5 for ...)`` passed vacuously).
"""
import numpy as np
import pytest

from fedlib.experiments import bounds
from fedlib.experiments import speedup as S


@pytest.fixture(scope="module")
def setup():
    return S.base_setup(seed=0, dim=3)


@pytest.mark.parametrize("bad", [50.7, 50.0, 0, -3, "50", None])
def test_rounds_must_be_integers(setup, bad):
    base, work = setup
    calls = {
        "consistency_sweep": lambda: S.consistency_sweep(base, work, [10, bad]),
        "speedup_grid": lambda: S.speedup_grid(base, work, [1], [10, bad], replicas=2),
        "sampling_grid": lambda: S.sampling_grid(base, work, [1], [2], [bad], replicas=1, seeds=2),
        "sampling_bias": lambda: S.sampling_bias(base, work, [2], [bad], seeds=2),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError, match=r"^rounds_list\[\d\] must be an integer >= 1"):
            call()


@pytest.mark.parametrize("bad", [2.9, 0])
def test_sampling_bias_clients_per_round_must_be_integers(setup, bad):
    base, work = setup
    with pytest.raises(ValueError, match=r"^clients_per_round\[0\] must be an integer >= 1"):
        S.sampling_bias(base, work, [bad], [10], seeds=2)


def test_empty_lists_are_refused(setup):
    base, work = setup
    for name, call in {
        "rounds_list": lambda: S.consistency_sweep(base, work, []),
        "copies_list": lambda: S.speedup_grid(base, work, [], [10], replicas=2),
        "algorithms": lambda: S.speedup_grid(base, work, [1], [10], replicas=2, algorithms=()),
        "clients_per_round": lambda: S.sampling_grid(base, work, [1], [], [10], replicas=1, seeds=2),
    }.items():
        with pytest.raises(ValueError, match=f"^{name} must "):
            call()


def test_algorithms_given_as_one_string_is_refused_by_name(setup):
    base, work = setup
    with pytest.raises(ValueError, match="^algorithms must be a sequence of names"):
        S.speedup_grid(base, work, [1], [10], replicas=2, algorithms="fednova")


def test_valid_integer_types_still_run(setup):
    base, work = setup
    rows = S.speedup_grid(base, work, (np.int64(1),), np.array([12]), replicas=2)
    assert [(r.clients, r.rounds) for r in rows] == [(4, 12)]
    assert isinstance(rows[0].rounds, int)


def test_objective_gap_checks_its_starting_point():
    problem, _ = bounds.default_setup(seed=0, dim=3)
    ones = bounds.objective_gap(problem, problem.p, np.ones(3))
    assert bounds.objective_gap(problem, problem.p, [1, 1, 1]) == ones  # ints are fine
    for bad in (1.0, np.ones(4), np.ones((3, 1)), np.ones((1, 3)), [np.nan] * 3):
        with pytest.raises(ValueError, match="^x0"):
            bounds.objective_gap(problem, problem.p, bad)


def test_equal_budget_ratios_checks_algorithm_and_rtol():
    rows = [S.SpeedupRow("fednova", 4, 100, 5.0, 0.1, 1.0, 0.0), S.SpeedupRow("fednova", 16, 25, 5.0, 0.1, 1.2, 0.0)]
    assert S.equal_budget_ratios(rows)[0][2] == pytest.approx(1.2)
    with pytest.raises(ValueError, match="^algorithm"):
        S.equal_budget_ratios(rows, algorithm="fednvoa")
    with pytest.raises(ValueError, match="^rtol"):
        S.equal_budget_ratios(rows, rtol=-0.1)


def _unequal_setup():
    from fedlib.problems.quadratic import random_quadratic
    from fedlib.schedules import RandomLocalWork
    problem = random_quadratic(4, 3, seed=0, spread=1.0, p=[0.55, 0.25, 0.15, 0.05])
    return problem, RandomLocalWork([1, 2, 4, 8], [4, 6, 12, 16], num_solvers=4, seed=0)


def test_uniform_sampling_step_size_uses_the_participants_mean_steps():
    """App. G: eta = c sqrt(q / (tau~ T)), tau~ the participants' average local steps. Drawn uniformly,
    a participant takes (1/m) sum_i E tau_i = 6.625 steps on average, not sum_i p_i E tau_i = 4.175 (the
    value for draws proportional to p, which the uniform scheme used too: eta 1.26x too large)."""
    problem, work = _unequal_setup()
    assert S.participant_mean_steps("uniform", problem.p, work) == pytest.approx(6.625)
    assert S.participant_mean_steps("with-replacement", problem.p, work) == pytest.approx(4.175)
    with pytest.raises(ValueError, match="^scheme"):
        S.participant_mean_steps("full", problem.p, work)
    q, T, c = 2, 50, 0.1
    for scheme, tau in (("uniform", 6.625), ("with-replacement", 4.175)):
        row = S.sampling_grid(problem, work, [1], [q], [T], scheme=scheme, lr_scale=c, replicas=1, seeds=2,
                              sigma=1.0)[0]
        assert row.lr == pytest.approx(c * np.sqrt(q / (tau * T)), rel=1e-12)
        bias = S.sampling_bias(problem, work, [q], [T], lr_scale=c, seeds=2, scheme=scheme,
                               tau_effs=("population",))[0]
        assert bias.lr == pytest.approx(c * np.sqrt(q / (tau * T)), rel=1e-12)
    # the participants' measured average is the uniform mean, which the step size now assumes
    row = S.sampling_grid(problem, work, [1], [q], [200], scheme="uniform", replicas=1, seeds=2, sigma=1.0)[0]
    assert abs(row.tau_tilde / 6.625 - 1) < 0.1


def test_summary_does_not_give_fedprox_condition_as_theorem3s():
    """App. E's T >~ (m tau T)^(3/4) belongs to FedProx with Corollary 2's alpha; Theorem 3's other terms
    fall as m / (tau~ T) with eta = sqrt(m / (tau~ T)). The summary used to ascribe App. E's condition to FedNova."""
    cons = [S.ConsistencyRow(100, 0.1, 0.2, 0.01, 0.5, 0.3, 0.3, 0.6, 0.7),
            S.ConsistencyRow(400, 0.05, 0.1, 0.005, 0.5, 0.2, 0.3, 0.6, 0.7)]
    grid = [S.SpeedupRow("fednova", 4, 100, 5.0, 0.1, 1.0, 0.0), S.SpeedupRow("fednova", 16, 25, 5.0, 0.1, 1.1, 0.0)]
    text = S.summary_markdown(cons, grid, 1.0, 0.5, -0.5, S.equal_budget_ratios(grid))
    assert "fall as $m/(\\tilde\\tau T)$" in text
    assert "for FedProx at Corollary 2's $\\alpha$, not for FedNova" in text


def test_run_replicas_tau_tilde_counts_every_draw_with_replacement():
    """App. G: tau~ = sum_t sum_{i in S(t)} tau_i / (qT), S(t) the q draws. Drawn with replacement, a client
    drawn k times counts k times; run_replicas counted each distinct participant once (p = (.9, .1), q = 3,
    tau = (1, 5), T = 40, seed 5: 1.40 where the draws average 1.27)."""
    from fedlib.engines.quadratic import run_replicas
    from fedlib.problems.quadratic import random_quadratic
    from fedlib.sampling import sample_clients
    from fedlib.schedules import RandomLocalWork
    from fedlib.solvers import sgd

    p, q, T, seed = np.array([0.9, 0.1]), 3, 40, 5
    problem = random_quadratic(2, 2, seed=0, p=p)
    work = RandomLocalWork([1, 5], [1, 5])  # fixed steps: client 0 one, client 1 five
    run = run_replicas(problem, "fednova", [sgd(0.01)], work, T, seed=seed, sampling="with-replacement",
                       clients_per_round=q)
    draws = []  # every round's q draws, rebuilt from the participants and their counts k_i = q omega_i
    for t in range(T):
        part = sample_clients("with-replacement", p, q, seed, t)
        draws += [int(c) for c, w in zip(part.clients, part.weights) for _ in range(int(round(w * q)))]
    assert len(draws) == q * T
    expected = np.mean(np.where(np.array(draws) == 0, 1.0, 5.0))
    assert run.mean_local_steps == pytest.approx(expected, rel=1e-12)
    # uniform sampling without replacement: every participant once
    run = run_replicas(problem, "fednova", [sgd(0.01)], work, T, seed=seed, sampling="uniform", clients_per_round=1)
    picked = [int(sample_clients("uniform", p, 1, seed, t).clients[0]) for t in range(T)]
    assert run.mean_local_steps == pytest.approx(np.mean(np.where(np.array(picked) == 0, 1.0, 5.0)), rel=1e-12)

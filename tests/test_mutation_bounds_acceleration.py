"""Mutation pass on fedlib.experiments.bounds and fedlib.experiments.acceleration: tests that pin
what the mutants that survived the older tests changed. Every expected number is computed here
from the paper's formulas (Theorem 1/3 with App. C's constants; the rounds written out step by
step with plain numpy loops), never from the module under test.

Mutants of efe3bcd..52ae29d, acceleration.measured_rate (pass described in tests/README.md, Mutation passes):
  AC1-AC3 measured_rate: ndim unchecked / > 2; stop unchecked.
  all killed by the suite.

Mutants of 86c5527..90cbd4d (experiments/bounds.py) (pass described in tests/README.md, Mutation passes):
experiments/bounds.py ``_momentum_of``: B2 drop the refusal; B3 0.5 for sgd too; B4 0.5 -> 0.9; B5 a given momentum
  dropped: killed by the suite. B1 ``momentum is not None`` -> ``momentum`` (0.0 reaches make_solver, whose message
  offers 'momentum-prox', no solver of bound_check's): killed here. B6 ``solver == "sgd"`` -> ``solver !=
  "momentum"``: equivalent (bound_check's solvers are ("sgd", "momentum"), checked before).

Mutants of 1112cf7..24d535b (fedlib/experiments/acceleration.py: iterate_round_maps; fedlib/experiments/quadratic.py:
run_quadratic) (pass described in tests/README.md, Mutation passes):
  AC1 iterate_round_maps' check_schedule_size dropped; AC2 schedule.local_steps read by np.asarray again (the code
  before); AC3 its rounds' owner 'p'; AC4 the size checked only when rounds > 0. QE1 run_quadratic's check dropped;
  QE2 its owner 'p'. killed by the suite: AC1-AC3, QE1, QE2. killed here: AC4.

Mutants of a655138..81203bf (fedlib/experiments/acceleration.py, 6c59177: _variant_round_map_and_system,
_limit_and_radius; theory.py's VL9-VL15 in tests/test_mutation_theory.py) (pass described in tests/README.md, Mutation
passes):
  VL1 the VR system I - M again; VL2 the plain system I - M again; VL3 the system's b with server momentum's
  augmented b; VL4 _round_map_terms' tau_eff and momentum swapped; VL5 the VR variants without local momentum; VL6
  _limit_and_radius solving (I - M) s = b again (the code before); VL7 _limit_and_radius's check_instance dropped;
  VL8 variant_round_map's check_instance dropped; VL16 server momentum dropped from variant_round_map.
  killed by the suite: VL1-VL6, VL16. killed here: VL8. equivalent: VL7 (_limit_and_radius is private and both its
  callers, variant_limit and rate_check, check problem first).

Mutants of f929b39..780545c (fedlib/experiments/bounds.py, 6d54dec: theorem3_check's work check) (pass
described in tests/README.md, Mutation passes):
  TW1 the check dropped; TW2 "draw" not looked for; TW3 "num_clients" not looked for; TW4 refused only when all
  three are missing; TW5 only the first missing one named. killed by the suite: TW1, TW4. killed here: TW2, TW3,
  TW5.

Mutants of 652fbe7..0e9da1f (fedlib/experiments/bounds.py, f7cc0a2: theorem3_check's ``_check_local_work``; the
pass's LW mutants of fedlib/schedules.py in test_mutation_solvers_schedules_sampling.py) (pass described in
tests/README.md, Mutation passes): 2 mutants, run as those: 2 killed by the suite.
  LW6 the problem's client count not passed (None: unchecked); LW7 "num_clients" not among the attributes looked
  for. killed by the suite: LW6 (test_speedup_bounds_stragglers_inputs.py), LW7 (this file's
  test_theorem3_check_names_every_attribute_of_local_work_that_work_lacks).

Mutants of 0e9da1f..c5aa211 (fedlib/experiments/bounds.py, 1a9a977: ``bound_check``'s ``closed_form_gap``) (pass
described in tests/README.md, Mutation passes): 8 mutants, one at a time, ``pytest -x -q`` on test_bounds.py, this
file and test_speedup_bounds_stragglers_inputs.py: none killed by the suite (only chapter 7 read the gap), 8 killed
here, 0 equivalent.
  BD1 the round map without momentum; BD2 min(T, 1) rounds; BD3 the gap's run with the noise; BD4 the distance not
  divided by the closed form's norm; BD5 the closed form one round short; BD6 FedAvg's map for every algorithm; BD7
  the gap not recorded (NaN); BD8 two noiseless replicas, the second read (the same gap, one more replica's work).
  killed here: BD1, BD3, BD5-BD7 (test_bound_checks_runs_are_the_closed_form_round_maps_of_its_algorithm), BD2,
  BD4, BD8 (test_closed_form_gap_is_the_relative_distance_after_min_t_10_noiseless_rounds: the noiseless call's
  rounds, sigma and replicas, and the gap of a known offset).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from fedlib.engines.quadratic import run_replicas
from fedlib.experiments import acceleration as A
from fedlib.experiments import bounds
from fedlib.problems.quadratic import QuadraticProblem, random_quadratic
from fedlib.schedules import FixedSteps, RandomLocalWork, RandomSteps
from fedlib.solvers import momentum_sgd, sgd


# ----------------------------------------------------------------------------- helpers (paper formulas)

def _a_vector(tau, rho):
    """§4.1: local SGD a = 1_tau; heavy ball a = [1 - rho^tau, ..., 1 - rho] / (1 - rho)."""
    if rho == 0:
        return np.ones(tau)
    return np.array([(1 - rho ** (tau - k)) / (1 - rho) for k in range(tau)])


def _constants(w, a_vectors, tau_eff):
    """A = m tau_eff sum_i w_i^2 |a_i|_2^2/|a_i|_1^2, B = sum_i w_i (|a_i|_2^2 - a_{i,-1}^2),
    C = max_i (|a_i|_1^2 - |a_i|_1 a_{i,-1})."""
    m = len(w)
    A = m * tau_eff * sum(wi ** 2 * (a @ a) / a.sum() ** 2 for wi, a in zip(w, a_vectors))
    B = sum(wi * (a @ a - a[-1] ** 2) for wi, a in zip(w, a_vectors))
    C = max(a.sum() ** 2 - a.sum() * a[-1] for a in a_vectors)
    return A, B, C


def _kappa2(problem, w, beta2):
    """sup_x sum_i w_i |H_i x - e_i|^2 - beta^2 |H~ x - e~|^2 (a concave quadratic: solve for its maximiser)."""
    H, e = problem.H, problem.e
    Hw, ew = np.tensordot(w, H, 1), w @ e
    Q = sum(wi * Hi @ Hi for wi, Hi in zip(w, H)) - beta2 * Hw @ Hw
    r = sum(wi * Hi @ ei for wi, Hi, ei in zip(w, H, e)) - beta2 * Hw @ ew
    c = sum(wi * ei @ ei for wi, ei in zip(w, e)) - beta2 * ew @ ew
    assert np.all(np.linalg.eigvalsh(Q) < 0)
    return float(c - r @ np.linalg.solve(Q, r))


def _gap(problem, w):
    """F~(0) - min F~ = 1/2 x~' H~ x~, x~ = H~^{-1} e~."""
    Hw, ew = np.tensordot(w, problem.H, 1), w @ problem.e
    x = np.linalg.solve(Hw, ew)
    return 0.5 * float(x @ Hw @ x)


def _terms(lr, T, L, sigma2, kappa2, gap, tau_eff, m, A, B, C):
    """Theorem 1 (App. C): 4 gap/(eta tau_eff T), 4 eta L sigma^2 A/m, 6 eta^2 L^2 sigma^2 B, 12 eta^2 L^2 kappa^2 C."""
    return np.array([4 * gap / (lr * tau_eff * T), 4 * lr * L * sigma2 * A / m, 6 * lr ** 2 * L ** 2 * sigma2 * B,
                     12 * lr ** 2 * L ** 2 * kappa2 * C])


# ----------------------------------------------------------------------------- bounds

def test_default_setup_is_chapter7s_setting():
    """Chapter 7: eight clients, d = 10, p_i = 1/8, tau_i = 1, 2, 3, 4, 6, 8, 12, 16, eigenvalues in [0.5, 2]."""
    assert bounds.DEFAULT_STEPS == (1, 2, 3, 4, 6, 8, 12, 16)
    problem, steps = bounds.default_setup(seed=3)
    assert steps.tolist() == [1, 2, 3, 4, 6, 8, 12, 16] and steps.dtype == np.int64
    assert problem.num_clients == 8 and problem.dim == 10
    np.testing.assert_allclose(problem.p, np.full(8, 1 / 8))
    eig = np.linalg.eigvalsh(problem.H)
    assert eig.min() >= 0.5 - 1e-12 and eig.max() <= 2.0 + 1e-12
    assert bounds.default_setup(seed=3, dim=4)[0].dim == 4


@pytest.mark.parametrize("algorithm,solver", [("fedavg", "sgd"), ("fedavg", "momentum"), ("fednova", "momentum")])
def test_bound_check_terms_from_the_papers_formulas(algorithm, solver):
    """Every field of bound_check's row recomputed from Theorem 1 / App. C: eta = c sqrt(m/(tau_bar T)),
    a_i of §4.1, FedAvg's w_i = p_i |a_i|_1 / sum_j p_j |a_j|_1 (FedNova: p), the largest beta^2 with
    4 eta^2 L^2 C = 1/(2 beta^2 + 1), kappa^2 the supremum of Assumption 3, sigma^2 = sigma_0^2 d."""
    problem, steps = bounds.default_setup(seed=1, dim=4)
    T, c, rho, sigma, reps, seed = 60, 0.03, 0.3, 0.4, 2, 5
    row = bounds.bound_check(problem, steps, algorithm, solver, T, lr_scale=c,
                             momentum=rho if solver == "momentum" else None, sigma=sigma, replicas=reps, seed=seed)
    m, d, p = 8, 4, problem.p
    lr = c * math.sqrt(m / (steps.mean() * T))
    assert row.lr == pytest.approx(lr, rel=1e-14) and row.rounds == T and row.replicas == reps
    a = [_a_vector(int(t), rho if solver == "momentum" else 0.0) for t in steps]
    norms = np.array([v.sum() for v in a])
    tau_eff = float(p @ norms)
    w = p * norms / tau_eff if algorithm == "fedavg" else p
    assert row.tau_eff == pytest.approx(tau_eff, rel=1e-12)
    np.testing.assert_allclose(row.w, w, rtol=1e-12)
    L = max(np.linalg.eigvalsh(H).max() for H in problem.H)
    sigma2 = sigma ** 2 * d
    A_, B_, C_ = _constants(w, a, tau_eff)
    beta2 = (1 / (4 * lr ** 2 * L ** 2 * C_) - 1) / 2
    assert row.beta2 == pytest.approx(beta2, rel=1e-10)
    kappa2 = _kappa2(problem, w, beta2)
    assert row.kappa2 == pytest.approx(kappa2, rel=1e-8)
    np.testing.assert_allclose(row.bound, _terms(lr, T, L, sigma2, kappa2, _gap(problem, w), tau_eff, m, A_, B_, C_),
                               rtol=1e-8)
    # the same bound read for F = sum_i p_i F_i (weights p, the algorithm's tau_eff and a_i)
    A_p, B_p, _ = _constants(p, a, tau_eff)
    np.testing.assert_allclose(row.true_bound, _terms(lr, T, L, sigma2, _kappa2(problem, p, beta2), _gap(problem, p),
                                                      tau_eff, m, A_p, B_p, C_), rtol=1e-8)
    # the measured side: the replica engine's squared gradient norms, mean over replicas, then rounds
    local = momentum_sgd(lr, rho) if solver == "momentum" else sgd(lr)
    run = run_replicas(problem, algorithm, [local], RandomLocalWork(steps, steps, 1, seed), T, sigma=sigma,
                       replicas=reps, seed=seed, surrogate_weights=w)
    per_round = run.surrogate_grad_norm2[:T].mean(axis=1)
    assert row.measured == pytest.approx(per_round.mean(), rel=1e-12)
    assert row.measured_min == pytest.approx(per_round.min(), rel=1e-12)
    assert row.true_measured == pytest.approx(run.grad_norm2[:T].mean(axis=1).mean(), rel=1e-12)
    chi2 = float(np.sum((p - w) ** 2 / w))
    assert row.chi2 == pytest.approx(chi2, rel=1e-10, abs=1e-15)
    assert row.ratio == pytest.approx(row.bound.total / row.measured, rel=1e-14)


def test_bound_check_theorem2_bound_is_the_smallest_over_beta2():
    """Theorem 2 holds for every beta^2 > beta^2_min (with its kappa^2): the row's value is one of them
    (at least the infimum over a fine grid) and near that infimum (bound_check takes the best of a coarse
    grid: 1.6% above it here)."""
    problem, steps = bounds.default_setup(seed=2, dim=3)
    row = bounds.bound_check(problem, steps, "fedavg", "sgd", 50, replicas=1)
    w, p, S = row.w, problem.p, row.bound.total
    chi2 = float(np.sum((p - w) ** 2 / w))
    Hw = np.tensordot(w, problem.H, 1)
    H2w = sum(wi * H @ H for wi, H in zip(w, problem.H))
    # smallest beta^2 of Assumption 3: the largest generalised eigenvalue of (sum w_i H_i^2, H~^2), at least 1
    hinv = np.linalg.inv(np.linalg.cholesky(Hw @ Hw))
    bmin = max(1.0, float(np.linalg.eigvalsh(hinv @ H2w @ hinv.T).max()))
    values = [2 * (chi2 * (b - 1) + 1) * S + 2 * chi2 * _kappa2(problem, w, b)
              for b in bmin * np.geomspace(1.0005, 2000.0, 300)]
    assert min(values) * (1 - 1e-9) <= row.theorem2_bound <= 1.05 * min(values)


@pytest.mark.parametrize("sigma", [0.0, 0.3])
def test_theorem3_check_terms_from_the_papers_formulas(sigma):
    """Theorem 3 recomputed: per-round a_i^{(t)} from the drawn steps and solvers, tau_eff^{(t)} = sum_i
    p_i |a_i^{(t)}|_1, beta^2 from max_t C_t, first term 4 gap/(eta sum_t tau_eff^{(t)}), the others
    tau_eff-weighted averages over the rounds; measured the tau_eff-weighted mean of |grad F|^2."""
    problem = random_quadratic(3, 3, seed=4, p=np.array([0.2, 0.3, 0.5]))
    work = RandomLocalWork([1, 2, 3], [3, 5, 6], 2, seed=7)
    lr, rho, T, reps = 0.01, 0.6, 12, 2
    solvers = [sgd(lr), momentum_sgd(lr, rho)]
    row = bounds.theorem3_check(problem, work, solvers, T, sigma=sigma, replicas=reps, seed=3)
    p, m, d = problem.p, 3, 3
    a_rounds = []
    for t in range(T):
        steps, numbers = work.draw(t)
        a_rounds.append([_a_vector(int(s), rho if j == 1 else 0.0) for s, j in zip(steps, numbers)])
    te = np.array([sum(pi * a.sum() for pi, a in zip(p, a_vecs)) for a_vecs in a_rounds])
    assert te.min() < te.max()
    np.testing.assert_allclose(row.tau_eff, te, rtol=1e-12)
    L = max(np.linalg.eigvalsh(H).max() for H in problem.H)
    consts = [_constants(p, a_vecs, t_) for a_vecs, t_ in zip(a_rounds, te)]
    C_max = max(C for _, _, C in consts)
    beta2 = (1 / (4 * lr ** 2 * L ** 2 * C_max) - 1) / 2
    assert row.beta2 == pytest.approx(beta2, rel=1e-10)
    kappa2 = _kappa2(problem, p, beta2)
    assert row.kappa2 == pytest.approx(kappa2, rel=1e-8)
    sigma2, gap = sigma ** 2 * d, _gap(problem, p)
    weighted = sum(t_ * _terms(lr, T, L, sigma2, kappa2, gap, t_, m, *c_)[1:] for t_, c_ in zip(te, consts)) / te.sum()
    expected = np.concatenate([[4 * gap / (lr * te.sum())], weighted])
    np.testing.assert_allclose(row.bound, expected, rtol=1e-9, atol=1e-300)
    run = run_replicas(problem, "fednova", solvers, work, T, sigma=sigma, replicas=reps, seed=3)
    per_round = run.grad_norm2[:T].mean(axis=1)
    assert row.measured == pytest.approx(float(te @ per_round / te.sum()), rel=1e-12)
    assert row.measured_min == pytest.approx(float(per_round.min()), rel=1e-12)
    assert row.rounds == T and row.lr == lr and row.replicas == reps
    assert row.ratio == pytest.approx(row.bound.total / row.measured, rel=1e-14)


def test_theorem3_check_step_condition_is_eta_L_max_tau_eff_at_most_half():
    """eta L max_t tau_eff^{(t)} <= 1/2 (Theorem 1's first condition in every round): one step with L = 1,
    tau_eff = 1: eta = 0.5 is allowed (boundary), eta = 0.5001 is not."""
    problem = QuadraticProblem(np.array([np.eye(2), np.eye(2)]), np.array([[1.0, 0.0], [0.0, 1.0]]),
                               np.array([0.5, 0.5]))
    work = RandomLocalWork([1, 1], [1, 1], 1, seed=0)
    row = bounds.theorem3_check(problem, work, [sgd(0.5)], 3, replicas=1)
    np.testing.assert_allclose(row.tau_eff, 1.0)
    with pytest.raises(ValueError, match="too large for Theorem 3"):
        bounds.theorem3_check(problem, work, [sgd(0.5001)], 3, replicas=1)



def test_objective_gap_from_a_start_other_than_zero():
    """F~(x0) - min F~ = 1/2 (x0 - x~)' H~ (x0 - x~), x~ = H~^{-1} sum_i w_i e_i: evaluated straight from the F_i."""
    problem = random_quadratic(3, 2, seed=8)
    w = np.array([0.2, 0.5, 0.3])
    x0 = np.array([1.5, -0.7])

    def f(x):
        return sum(wi * (0.5 * x @ H @ x - e @ x) for wi, H, e in zip(w, problem.H, problem.e))

    x_opt = np.linalg.solve(np.tensordot(w, problem.H, 1), w @ problem.e)
    assert bounds.objective_gap(problem, w, x0) == pytest.approx(f(x0) - f(x_opt), rel=1e-10)
    assert bounds.objective_gap(problem, w) == pytest.approx(f(np.zeros(2)) - f(x_opt), rel=1e-10)
    assert bounds.objective_gap(problem, w, x_opt) == pytest.approx(0.0, abs=1e-14)


def test_bound_check_with_one_replica():
    """replicas = 1 is allowed (chapter 7 calls it so)."""
    problem = random_quadratic(2, 2, seed=1)
    row = bounds.bound_check(problem, [1, 3], "fedavg", "sgd", 30, replicas=1)
    assert row.replicas == 1 and np.isfinite(row.measured)
    problem3 = random_quadratic(2, 2, seed=6)
    row3 = bounds.theorem3_check(problem3, RandomLocalWork([1, 2], [2, 3], 1, seed=0), [sgd(0.01)], 5, replicas=1)
    assert row3.replicas == 1 and np.isfinite(row3.measured)


def test_default_setup_local_optima_are_standard_normal():
    """default_setup's clients are random_quadratic's with local optima ~ N(0, I) (spread 1), eigenvalues in [0.5, 2]."""
    problem, _ = bounds.default_setup(seed=5, dim=3)
    ref = random_quadratic(8, 3, seed=5, spread=1.0, eig_range=(0.5, 2.0))
    np.testing.assert_array_equal(problem.H, ref.H)
    np.testing.assert_array_equal(problem.e, ref.e)


def test_bound_check_defaults():
    """bound_check's defaults: c = 0.05 and sigma_0 = 0.5 (chapter 7's setting), heavy ball rho = 0.5,
    32 replicas, noise seed 0."""
    problem = random_quadratic(2, 2, seed=1)
    steps, T = np.array([1, 3]), 30
    row = bounds.bound_check(problem, steps, "fednova", "momentum", T)
    assert row.replicas == 32
    assert row.lr == pytest.approx(0.05 * math.sqrt(2 / (2.0 * T)), rel=1e-14)
    a = [_a_vector(1, 0.5), _a_vector(3, 0.5)]
    assert row.tau_eff == pytest.approx(0.5 * (1.0 + 4.25), rel=1e-12)
    explicit = bounds.bound_check(problem, steps, "fednova", "momentum", T, lr_scale=0.05, momentum=0.5, sigma=0.5,
                                  replicas=32, seed=0)
    assert row.measured == explicit.measured and row.bound == explicit.bound
    L = max(np.linalg.eigvalsh(H).max() for H in problem.H)
    A_, _, _ = _constants(problem.p, a, row.tau_eff)
    assert row.bound.variance_term == pytest.approx(4 * row.lr * L * 0.25 * 2 * A_ / 2, rel=1e-10)


def test_theorem3_check_defaults():
    """sigma_0 = 0.5, 32 replicas, noise seed 0."""
    problem = random_quadratic(2, 2, seed=6)
    work = RandomLocalWork([1, 2], [2, 3], 1, seed=0)
    row = bounds.theorem3_check(problem, work, [sgd(0.01)], 5)
    explicit = bounds.theorem3_check(problem, work, [sgd(0.01)], 5, sigma=0.5, replicas=32, seed=0)
    assert row.replicas == 32 and row.measured == explicit.measured and row.bound == explicit.bound


@pytest.mark.parametrize("kw,match", [(dict(algorithm="fedprox"), "algorithm"), (dict(solver="adam"), "solver"),
                                      (dict(solver="prox"), "solver must be one of"),
                                      (dict(solver="momentum-prox"), "solver must be one of"),
                                      (dict(rounds=0), "rounds"), (dict(lr_scale=0.0), "lr_scale"),
                                      (dict(sigma=-0.1), "sigma"), (dict(replicas=0), "replicas"),
                                      (dict(local_steps=[1, 2, 3]), "local_steps")])
def test_bound_check_names_a_bad_argument(kw, match):
    problem, steps = bounds.default_setup(seed=0, dim=3)
    args = dict(local_steps=steps, algorithm="fednova", solver="sgd", rounds=100)
    args.update(kw)
    extra = {k: args.pop(k) for k in ("lr_scale", "sigma", "replicas") if k in args}
    with pytest.raises(ValueError, match=match):
        bounds.bound_check(problem, args["local_steps"], args["algorithm"], args["solver"], args["rounds"], **extra)


@pytest.mark.parametrize("kw,match", [(dict(rounds=0), "rounds"), (dict(sigma=-1.0), "sigma"),
                                      (dict(replicas=0), "replicas")])
def test_theorem3_check_names_a_bad_argument(kw, match):
    problem = random_quadratic(2, 2, seed=6)
    work = RandomLocalWork([1, 2], [2, 3], 1, seed=0)
    rounds = kw.pop("rounds", 3)
    with pytest.raises(ValueError, match=match):
        bounds.theorem3_check(problem, work, [sgd(0.01)], rounds, **kw)


# ----------------------------------------------------------------------------- acceleration

# name -> (aggregation, variance reduction, local momentum, server momentum), from the module docstring's table
TABLE = {
    "fedavg": ("fedavg", None, False, False),
    "fednova": ("fednova", None, False, False),
    "vrlsgd": ("fedavg", "vrlsgd", False, False),
    "scaffold": ("fedavg", "scaffold", False, False),
    "fednova-vr": ("fednova", "scaffold", False, False),
    "fednova-vr-momentum": ("fednova", "scaffold", True, False),
    "fedavg-momentum": ("fedavg", None, True, False),
    "fednova-momentum": ("fednova", None, True, False),
    "fedavg-servermom": ("fedavg", None, False, True),
    "fednova-servermom": ("fednova", None, False, True),
    "fedavg-hybrid": ("fedavg", None, True, True),
    "fednova-hybrid": ("fednova", None, True, True),
}


def _simulate(problem, name, lr, steps_of_round, rounds, rho, beta, x0=None, variates=None):
    """The rounds written out with loops: heavy-ball local GD (buffer reset every round) on
    grad F_i + (c_bar - c_i); FedAvg x + sum_i p_i Delta_i or FedNova x + tau_eff sum_i p_i Delta_i/|a_i|_1
    (tau_eff = sum_i p_i |a_i|_1); SCAFFOLD / FedNova-VR variates c_i <- d_i - correction,
    d_i = -Delta_i/(eta |a_i|_1), c_bar = sum_j p_j c_j; VRLSGD c_bar = 0, c_i <- c_i - (Delta_i - Delta)/(eta tau_i);
    server momentum u <- beta u + D/eta, x <- x - eta u (D = x - aggregated model, u = 0 at the start).
    Returns the models x_0..x_T."""
    agg, vr, local_mom, server_mom = TABLE[name]
    rho = rho if local_mom else 0.0
    m, d = problem.num_clients, problem.dim
    p, H, e = problem.p, problem.H, problem.e
    x = np.zeros(d) if x0 is None else np.array(x0, dtype=float)
    c = np.zeros((m, d)) if variates is None else np.array(variates, dtype=float)
    u = np.zeros(d)
    xs = [x.copy()]
    for t in range(rounds):
        steps = steps_of_round(t)
        cbar = p @ c if vr == "scaffold" else np.zeros(d)
        deltas, norms = [], []
        for i in range(m):
            corr = cbar - c[i]
            y, buf = x.copy(), np.zeros(d)
            for _ in range(int(steps[i])):
                buf = rho * buf + (H[i] @ y - e[i] + corr)
                y = y - lr * buf
            deltas.append(y - x)
            norms.append(sum((1 - rho ** (steps[i] - k)) / (1 - rho) for k in range(int(steps[i]))))
        deltas, norms = np.array(deltas), np.array(norms)
        if agg == "fedavg":
            new = x + p @ deltas
        else:
            new = x + (p @ norms) * (p @ (deltas / norms[:, None]))
        if vr == "scaffold":
            c = np.array([-deltas[i] / (lr * norms[i]) - (cbar - c[i]) for i in range(m)])
        elif vr == "vrlsgd":
            mean = p @ deltas
            c = np.array([c[i] - (deltas[i] - mean) / (lr * steps[i]) for i in range(m)])
        if server_mom:
            u = beta * u + (x - new) / lr
            new = x - lr * u
        x = new
        xs.append(x.copy())
    return np.array(xs)


@pytest.mark.parametrize("name", list(TABLE))
def test_every_variant_is_the_papers_algorithm_written_out(name):
    """Both the library's run (run_variant) and the closed form (iterate_round_maps) against the rounds written
    out by hand, with steps that change every round (so a VARIANTS entry with a wrong flag fails)."""
    assert set(A.VARIANTS) == set(TABLE)
    agg, vr, local_mom, server_mom = TABLE[name]
    v = A.VARIANTS[name]
    assert (v.algorithm, v.local_momentum, v.server_momentum) == (
        vr if vr and agg == "fedavg" else ("fednova-vr" if vr else agg), local_mom, server_mom)
    prob = random_quadratic(3, 2, seed=21, p=np.array([0.5, 0.2, 0.3]))
    sched = RandomSteps(3, 1, 6, seed=2)
    lr, rho, beta, T = 0.06, 0.7, 0.4, 12
    xs = _simulate(prob, name, lr, sched.local_steps, T, rho, beta)
    expected = np.linalg.norm(xs - prob.optimum(), axis=1)
    closed = A.iterate_round_maps(prob, name, lr, sched, T, local_momentum=rho, server_beta=beta)
    np.testing.assert_allclose(closed, expected, rtol=1e-10, atol=1e-13)
    run = A.run_variant(prob, name, lr, sched, T, local_momentum=rho, server_beta=beta)
    np.testing.assert_allclose(run.distances, expected, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("name", ["fedavg-hybrid", "fednova-hybrid", "fednova-vr-momentum"])
def test_default_coefficients_are_momentum_and_server_beta_0_9(name):
    """local_momentum = 0.9 (App. I's momentum factor) and server_beta = 0.9 by default, the same in the run,
    the closed form, the round map and the limit."""
    prob = random_quadratic(3, 2, seed=22)
    sched = RandomSteps(3, 1, 5, seed=4)
    lr, T = 0.03, 8
    expected = np.linalg.norm(_simulate(prob, name, lr, sched.local_steps, T, 0.9, 0.9) - prob.optimum(), axis=1)
    np.testing.assert_allclose(A.iterate_round_maps(prob, name, lr, sched, T), expected, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(A.run_variant(prob, name, lr, sched, T).distances, expected, rtol=1e-10, atol=1e-13)
    steps = [2, 3, 1]
    rm = A.variant_round_map(prob, name, lr, steps)
    rm9 = A.variant_round_map(prob, name, lr, steps, local_momentum=0.9, server_beta=0.9)
    np.testing.assert_array_equal(rm.M, rm9.M)
    assert A.variant_radius(prob, name, lr, steps) == A.variant_radius(prob, name, lr, steps, local_momentum=0.9,
                                                                        server_beta=0.9)
    algo = A.make_variant(name, lr)
    assert algo.solver.momentum == 0.9


@pytest.mark.parametrize("kw", [dict(local_momentum=1.0), dict(server_beta=1.0), dict(local_momentum=1.5),
                                dict(server_beta=-0.1)])
def test_coefficients_must_lie_in_0_1(kw):
    """Heavy ball and server momentum need a coefficient in [0, 1): 1 is refused by every entry point."""
    prob = random_quadratic(3, 2, seed=0)
    for call in (lambda: A.make_variant("fednova-hybrid", 0.05, **kw),
                 lambda: A.variant_round_map(prob, "fednova-hybrid", 0.05, [1, 2, 3], **kw),
                 lambda: A.run_variant(prob, "fednova-hybrid", 0.05, FixedSteps([1, 2, 3]), 2, **kw)):
        with pytest.raises(ValueError, match="local_momentum|server_beta"):
            call()


def test_zero_coefficients_give_the_plain_algorithms():
    """local_momentum = 0 makes the momentum variants plain local GD, server_beta = 0 removes server momentum."""
    prob = random_quadratic(3, 2, seed=23)
    sched = FixedSteps([2, 5, 1])
    for plain, other in (("fednova", "fednova-momentum"), ("fedavg", "fedavg-servermom"), ("fednova", "fednova-hybrid"),
                         ("fednova-vr", "fednova-vr-momentum")):
        a = A.run_variant(prob, plain, 0.05, sched, 6).distances
        b = A.run_variant(prob, other, 0.05, sched, 6, local_momentum=0.0, server_beta=0.0).distances
        c = A.iterate_round_maps(prob, other, 0.05, sched, 6, local_momentum=0.0, server_beta=0.0)
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(c, a, rtol=1e-12, atol=1e-14)
    assert A.make_variant("fednova-momentum", 0.05, local_momentum=0.0).solver.momentum == 0.0


def test_default_setup_seed_defaults_to_zero():
    a, _ = bounds.default_setup()
    b, _ = bounds.default_setup(seed=0, dim=10)
    np.testing.assert_array_equal(a.H, b.H)
    np.testing.assert_array_equal(a.e, b.e)
    assert not np.array_equal(bounds.default_setup(seed=1)[0].e, a.e)


@pytest.mark.parametrize("name", ["fedavg", "fednova-momentum", "fedavg-hybrid", "fednova-servermom"])
def test_variant_limit_is_a_fixed_point_of_the_written_out_round(name):
    """One hand-written round from the limit (x_{-1} = x: empty server buffer) returns it."""
    prob = random_quadratic(3, 2, seed=24)
    steps = np.array([1, 4, 2])
    x = A.variant_limit(prob, name, 0.05, steps, local_momentum=0.6, server_beta=0.5)
    xs = _simulate(prob, name, 0.05, lambda t: steps, 1, 0.6, 0.5, x0=x)
    np.testing.assert_allclose(xs[1], x, rtol=1e-12, atol=1e-13)
    assert np.linalg.norm(x - prob.optimum()) > 1e-4   # not x*: the fixed point has an O(lr) error here


@pytest.mark.parametrize("name", ["scaffold", "fednova-vr", "fednova-vr-momentum"])
def test_vr_limit_is_the_optimum_and_a_fixed_point_with_the_local_gradients(name):
    prob = random_quadratic(3, 2, seed=25)
    steps = np.array([1, 4, 2])
    x = A.variant_limit(prob, name, 0.05, steps, local_momentum=0.5)
    np.testing.assert_allclose(x, prob.optimum(), rtol=1e-10, atol=1e-12)
    grads = np.array([prob.H[i] @ x - prob.e[i] for i in range(3)])
    xs = _simulate(prob, name, 0.05, lambda t: steps, 1, 0.5, 0.0, x0=x, variates=grads)
    np.testing.assert_allclose(xs[1], x, rtol=1e-12, atol=1e-12)


def test_closed_form_iteration_stops_only_above_stop_above():
    """'the iteration ends after the first distance above it': a distance equal to stop_above goes on (x stays at
    x* = 0 exactly, the reference is 5 away); stop_above must be > 0, rounds >= 0."""
    H = np.array([np.eye(2), 2 * np.eye(2)])
    prob = QuadraticProblem(H, np.zeros((2, 2)), np.array([0.5, 0.5]))
    ref = np.array([3.0, 4.0])
    out = A.iterate_round_maps(prob, "fednova", 0.1, FixedSteps([1, 2]), 4, reference=ref, stop_above=5.0)
    np.testing.assert_array_equal(out, np.full(5, 5.0))
    out = A.iterate_round_maps(prob, "fednova", 0.1, FixedSteps([1, 2]), 0, reference=ref)
    np.testing.assert_array_equal(out, [5.0])
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match="stop_above"):
            A.iterate_round_maps(prob, "fednova", 0.1, FixedSteps([1, 2]), 4, stop_above=bad)
    with pytest.raises(ValueError, match="rounds"):
        A.iterate_round_maps(prob, "fednova", 0.1, FixedSteps([1, 2]), -1)


def test_measured_rate_window_limits():
    """start < stop - 1 <= len - 1: two points are the least a slope needs; stop may be the length."""
    d = 2.0 * 0.8 ** np.arange(6)
    assert A.measured_rate(d, 4) == pytest.approx(0.8, rel=1e-12)        # two points, stop = len
    assert A.measured_rate(d, 0, 2) == pytest.approx(0.8, rel=1e-12)
    assert A.measured_rate(d, 3, 6) == pytest.approx(0.8, rel=1e-12)
    assert A.measured_rate(list(d), 0) == pytest.approx(0.8, rel=1e-12)
    # the least-squares slope of log d, not the end points: 1, 2, 1, 2 has slope 1/5 * log 2 ... computed by hand
    z = np.array([1.0, 2.0, 1.0, 2.0])
    t = np.arange(4)
    slope = np.sum((t - t.mean()) * (np.log(z) - np.log(z).mean())) / np.sum((t - t.mean()) ** 2)
    assert A.measured_rate(z, 0) == pytest.approx(math.exp(slope), rel=1e-12)
    for start, stop in ((5, None), (0, 7), (3, 4), (-1, None), (2, 2)):
        with pytest.raises(ValueError, match="start"):
            A.measured_rate(d, start, stop)
    for bad in (np.inf, np.nan, -1.0):
        e = d.copy()
        e[2] = bad
        with pytest.raises(ValueError, match="finite and > 0"):
            A.measured_rate(e, 0)
        assert A.measured_rate(e, 3) == pytest.approx(0.8, rel=1e-12)   # outside the window: fine


def test_theorem3_check_step_condition_uses_L_times_eta():
    """L = 2, one step, eta = 0.3: eta L tau_eff = 0.6 > 1/2 is refused by theorem3_check itself."""
    problem = QuadraticProblem(np.array([2 * np.eye(2), 2 * np.eye(2)]), np.array([[1.0, 0.0], [0.0, 1.0]]),
                               np.array([0.5, 0.5]))
    work = RandomLocalWork([1, 1], [1, 1], 1, seed=0)
    with pytest.raises(ValueError, match="too large for Theorem 3: eta L max_t tau_eff = 0.6 > 1/2"):
        bounds.theorem3_check(problem, work, [sgd(0.3)], 3, replicas=1)
    bounds.theorem3_check(problem, work, [sgd(0.25)], 3, replicas=1)   # 0.5: allowed


def _two_scales():
    """H_1 = I, H_2 = 10 I, p = (1/2, 1/2): Assumption 3 needs beta^2 > sum_i p_i h_i^2 / (sum_i p_i h_i)^2 = 50.5/30.25."""
    return QuadraticProblem(np.array([np.eye(2), 10 * np.eye(2)]), np.array([[1.0, 2.0], [-3.0, 5.0]]),
                            np.array([0.5, 0.5]))


def test_a_step_whose_beta2_is_below_assumption3s_is_refused_by_name():
    """Two local SGD steps (C = 2, tau_eff = 2, L = 10): eta = 0.0186 gives beta^2_max = (1/(800 eta^2) - 1)/2 = 1.30,
    which meets eta L tau_eff <= 1/2 and D <= 1/3 but is below Assumption 3's 50.5/30.25 = 1.67."""
    problem = _two_scales()
    lr = 0.0186
    assert (1 / (800 * lr ** 2) - 1) / 2 < 50.5 / 30.25
    with pytest.raises(ValueError, match="too large for Theorem 3 with these weights"):
        bounds.theorem3_check(problem, RandomLocalWork([2, 2], [2, 2], 1, seed=0), [sgd(lr)], 5, replicas=1)
    T = 100   # eta = c sqrt(m / (tau_bar T)) = c / 10
    with pytest.raises(ValueError, match="too large for Theorem 1 with these weights"):
        bounds.bound_check(problem, [2, 2], "fednova", "sgd", T, lr_scale=10 * lr, replicas=1)
    row = bounds.bound_check(problem, [2, 2], "fednova", "sgd", T, lr_scale=5 * lr, replicas=1)
    assert row.beta2 == pytest.approx((1 / (800 * (lr / 2) ** 2) - 1) / 2, rel=1e-12)


def test_closed_form_from_another_start_and_reference():
    """x0 and reference other than 0 and x*: distance 0 is |x0 - ref|, the series the written-out rounds'."""
    prob = random_quadratic(3, 2, seed=26)
    x0, ref = np.array([0.7, -1.2]), np.array([0.1, 0.4])
    for name in ("fednova", "scaffold", "fedavg-servermom"):
        xs = _simulate(prob, name, 0.05, lambda t: np.array([2, 1, 3]), 5, 0.9, 0.9, x0=x0)
        closed = A.iterate_round_maps(prob, name, 0.05, FixedSteps([2, 1, 3]), 5, x0=x0, reference=ref)
        np.testing.assert_allclose(closed, np.linalg.norm(xs - ref, axis=1), rtol=1e-10, atol=1e-13)
        assert closed[0] == pytest.approx(np.linalg.norm(x0 - ref), rel=1e-15)
        np.testing.assert_allclose(A.initial_state(prob, name, x0)[:2], x0)


@pytest.mark.parametrize("call,match", [
    (lambda p: A.make_variant("fedavg", 0.0), "lr"),
    (lambda p: A.make_variant("fedavg", -0.1), "lr"),
    (lambda p: A.variant_round_map(p, "fedavg", 0.0, [1, 2, 3]), "lr"),
    (lambda p: A.variant_round_map(p, "fedavg", float("nan"), [1, 2, 3]), "lr"),
    (lambda p: A.variant_round_map(p, "fedavg", 0.1, [1, 2]), "local_steps"),
    (lambda p: A.variant_round_map(p, "fedavg", 0.1, [1, 0, 2]), "local_steps"),
    (lambda p: A.variant_limit(p, "fedavg", 3.9, [1, 1, 1]), "do not converge"),   # radius |1 - 3.9 lambda| in (1, 2)
    (lambda p: A.measured_rate([1.0, 0.5, 0.25], 0.5), "start"),
    (lambda p: A.rate_check(p, "fednova", 0.05, [1, 3, 6], 1), "rounds"),
    (lambda p: A.rate_check(p, "fednova", 0.05, [1, 3, 6], 50, floor=1.0), "floor must lie in"),
])
def test_more_bad_inputs(call, match):
    prob = random_quadratic(3, 2, seed=0, eig_range=(0.5, 0.7))
    with pytest.raises(ValueError, match=match):
        call(prob)


def test_a_round_map_with_spectral_radius_one_has_no_limit():
    """A flat direction (H_i = diag(1, 0)) keeps x_2 where it is: radius exactly 1, no unique limit."""
    H = np.array([np.diag([1.0, 0.0]), np.diag([2.0, 0.0])])
    prob = QuadraticProblem(H, np.array([[1.0, 0.0], [2.0, 0.0]]), np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match="do not converge"):
        A.variant_limit(prob, "fednova", 0.1, [1, 2])


def test_compare_with_closed_form_differences_are_computed_from_both_series():
    """A schedule that answers differently on every call makes the run and the closed form differ: max_difference
    is max_t |run_t - closed_t| and max_relative_difference max_t |run_t - closed_t| / max(|x*|, closed_t)."""
    class Drifting:
        def __init__(self):
            self.calls = 0

        def local_steps(self, t):
            self.calls += 1
            return np.array([1 + self.calls % 4, 2, 1])

    prob = random_quadratic(3, 2, seed=27)
    cmp = A.compare_with_closed_form(prob, "fednova", 0.05, Drifting(), 6)
    run, closed = cmp.run.distances, cmp.closed
    gap = np.abs(run - closed)
    assert gap.max() > 1e-6
    assert cmp.max_difference == gap.max()
    rel = gap / np.maximum(np.linalg.norm(prob.optimum()), closed)
    assert cmp.max_relative_difference == pytest.approx(rel.max(), rel=1e-14)


@pytest.mark.parametrize("lr,first", [(0.03, 230), (0.2, 33)])
def test_rate_check_window(lr, first):
    """The window runs from the middle of the rounds to the first round below floor * distance_0 (inclusive) and
    the rate is measured_rate on it. The rounds contract at r = 0.94 (lr 0.03) and 0.66 (lr 0.2), so the floor 1e-6
    takes about log(1e-6)/log(r) = 230 and 33 rounds: a run capped at 0.75 log(floor)/log(r) + 20 rounds (the first)
    or 1.5 log(floor)/log(r) - 20 (the second) would stop before it."""
    prob = random_quadratic(3, 2, seed=28)
    steps, floor = [1, 3, 2], 1e-6
    rc = A.rate_check(prob, "fednova", lr, steps, 5000, floor=floor)
    limit = A.variant_limit(prob, "fednova", lr, steps)
    d = np.linalg.norm(_simulate(prob, "fednova", lr, lambda t: np.array(steps), first + 20, 0.0, 0.0) - limit, axis=1)
    assert int(np.flatnonzero(d < floor * d[0])[0]) == first
    assert not np.any(np.abs(d / d[0] - floor) < 1e-2 * floor)   # no round sits on the threshold
    assert rc.window == ((first + 1) // 2, first + 1)
    assert rc.measured == pytest.approx(A.measured_rate(d, (first + 1) // 2, first + 1), rel=1e-6)
    one = (lambda x: _simulate(prob, "fednova", lr, lambda t: np.array(steps), 1, 0.0, 0.0, x0=x)[1])
    M = np.column_stack([one(np.eye(2)[k]) - one(np.zeros(2)) for k in range(2)])   # the round's linear part
    assert rc.radius == pytest.approx(np.abs(np.linalg.eigvals(M)).max(), rel=1e-9)
    assert rc.limit_distance == pytest.approx(np.linalg.norm(limit - prob.optimum()), rel=1e-12)


def test_rate_check_defaults_and_two_rounds():
    """floor 1e-12 by default; two rounds are enough to run."""
    prob = random_quadratic(3, 2, seed=28)
    steps = [1, 3, 2]
    default = A.rate_check(prob, "fednova", 0.1, steps, 5000)
    explicit = A.rate_check(prob, "fednova", 0.1, steps, 5000, floor=1e-12)
    assert default.window == explicit.window and default.measured == explicit.measured
    short = A.rate_check(prob, "fednova", 0.1, steps, 2)
    assert short.window == (1, 3)


def test_logistic_losses_batch_size_and_rounds():
    """Mini-batches of 20 by default (the paper's synthetic batch size); rounds >= 1 (one round gives two losses)."""
    from fedlib.data.synthetic import synthetic
    from fedlib.problems.logistic import LogisticProblem

    prob = LogisticProblem(synthetic(1.0, 1.0, num_clients=3, dim=4, num_classes=3, seed=0, num_samples=[45, 30, 60]))
    sched = FixedSteps([2, 2, 2])
    default = A.logistic_losses(prob, "fedavg", 0.05, sched, [0], 1)
    assert default.shape == (1, 2)
    np.testing.assert_array_equal(default, A.logistic_losses(prob, "fedavg", 0.05, sched, [0], 1, batch_size=20))
    assert not np.array_equal(default, A.logistic_losses(prob, "fedavg", 0.05, sched, [0], 1, batch_size=7))
    with pytest.raises(ValueError, match="rounds"):
        A.logistic_losses(prob, "fedavg", 0.05, sched, [0], 0)


def test_one_round_is_enough():
    """T = 1 is a valid number of rounds for both checks (one local step each: C = 0, any beta^2)."""
    problem = random_quadratic(2, 2, seed=1)
    row = bounds.bound_check(problem, [1, 1], "fedavg", "sgd", 1, replicas=1)
    assert row.rounds == 1 and row.bound.heterogeneity_term == 0.0
    row3 = bounds.theorem3_check(problem, RandomLocalWork([1, 1], [1, 1], 1, seed=0), [sgd(0.05)], 1, replicas=1)
    assert row3.rounds == 1 and row3.tau_eff.shape == (1,)


def test_closed_form_started_above_stop_above_ends_where_the_run_ends():
    """'the iteration ends after the first distance above it (as run_variant does)': a start already farther than
    stop_above ends both series at distance 0 (the closed form used to iterate one round more: [5, 5] vs [5])."""
    H = np.array([np.eye(2), 2 * np.eye(2)])
    prob = QuadraticProblem(H, np.zeros((2, 2)), np.array([0.5, 0.5]))
    ref = np.array([3.0, 4.0])
    out = A.iterate_round_maps(prob, "fednova", 0.1, FixedSteps([1, 2]), 4, reference=ref, stop_above=4.0)
    run = A.run_variant(prob, "fednova", 0.1, FixedSteps([1, 2]), 4, reference=ref, stop_above=4.0)
    assert run.diverged and run.distances.tolist() == [5.0]
    np.testing.assert_array_equal(out, [5.0])


@pytest.mark.parametrize("name", ["fedavg-hybrid", "fednova-servermom"])
def test_make_variant_default_server_beta_is_0_9(name):
    """make_variant alone (no coefficients) runs with rho = 0.9 and beta = 0.9."""
    from fedlib.experiments.quadratic import run_quadratic

    prob = random_quadratic(3, 2, seed=29)
    sched = FixedSteps([2, 1, 3])
    run = run_quadratic(prob, name, 0.03, sched, 6, algorithm=A.make_variant(name, 0.03))
    xs = _simulate(prob, name, 0.03, sched.local_steps, 6, 0.9, 0.9)
    np.testing.assert_allclose(run.distances, np.linalg.norm(xs - prob.optimum(), axis=1), rtol=1e-10, atol=1e-13)


# ------------------------------------------------------------------------------- mutants of 86c5527..90cbd4d
def test_bound_check_refuses_a_zero_momentum_with_sgd_in_its_own_words():  # B1
    problem, steps = bounds.default_setup(seed=0, dim=3)
    with pytest.raises(ValueError, match=r"^momentum: solver 'sgd' has no momentum buffer, got momentum = 0\.0 \(use "
                                         r"solver='momentum'\)$"):
        bounds.bound_check(problem, steps, "fednova", "sgd", 100, momentum=0.0, replicas=1)


# -------------------------------------------------------------------- mutants of 1112cf7..24d535b (acceleration)
@pytest.mark.parametrize("rounds", [0, 2])
def test_iterate_round_maps_refuses_a_schedule_of_another_size_even_with_no_round_to_run(rounds):
    """rounds = 0 iterates no map (the start's distance only), but a schedule for 2 clients of a 3-client problem is
    refused all the same, before anything is computed. Mutant AC4 of 1112cf7..24d535b: the size checked only when
    a round runs."""
    problem = random_quadratic(num_clients=3, dim=4, seed=0)
    with pytest.raises(ValueError, match=r"^schedule is for 2 clients but the problem has 3$"):
        A.iterate_round_maps(problem, "fednova", 0.01, FixedSteps([2, 3]), rounds)


# -------------------------------------------------------------------- mutants of a655138..81203bf (acceleration)
@pytest.mark.parametrize("name", ["fedavg", "scaffold", "fedavg-servermom"])
def test_variant_round_map_refuses_what_is_no_quadratic_problem_by_name(name):
    """variant_round_map given something that is no QuadraticProblem names ``problem`` (variant_radius,
    variant_limit, rate_check and iterate_round_maps check it themselves before they call it). Mutant VL8 of
    a655138..81203bf: its check dropped when it became a front of _variant_round_map_and_system (an AttributeError,
    "'object' object has no attribute 'num_clients'")."""
    with pytest.raises(ValueError, match=r"^problem must be a fedlib\.problems\.quadratic\.QuadraticProblem, got "
                                         r"object$"):
        A.variant_round_map(object(), name, 0.1, [1, 2])


# ------------------------------------------ theorem3_check's work: mutants of f929b39..780545c (bounds.py, 6d54dec)
class _PartWork:
    """Local work of 2 clients and 1 solver with some of RandomLocalWork's attributes: ``without`` names the ones it
    lacks (its draw gives tau_i = (1, 2) and solver 0)."""

    def __init__(self, without):
        self.num_solvers, self.num_clients = 1, 2
        self.draw = lambda t: (np.array([1, 2]), np.array([0, 0]))
        for name in without:
            delattr(self, name)


@pytest.mark.parametrize("without", [("draw",), ("num_clients",), ("num_solvers", "num_clients")])
def test_theorem3_check_names_every_attribute_of_local_work_that_work_lacks(without):
    """theorem3_check reads work.draw, work.num_solvers and work.num_clients: work without any one of them (or two)
    is the ValueError naming work, RandomLocalWork and each missing one, in that order, not an AttributeError from
    inside; with all three it runs (tau_eff = (1/2) 1 + (1/2) 2 = 1.5 every round). Mutants of f929b39..780545c: TW2
    ("draw" not looked for), TW3 ("num_clients" not looked for), TW4 (refused only when all three are missing), TW5
    (only the first missing one named)."""
    problem = random_quadratic(2, 2, seed=0, spread=1.0)
    with pytest.raises(ValueError, match=r"^work must be a fedlib\.schedules\.RandomLocalWork \(each round's steps and "
                                         rf"solver numbers\), got _PartWork, which has no {', '.join(without)}; fixed "
                                         r"steps tau_i are RandomLocalWork\(steps, steps\)$"):
        bounds.theorem3_check(problem, _PartWork(without), [sgd(0.01)], 2, replicas=1)
    row = bounds.theorem3_check(problem, _PartWork(()), [sgd(0.01)], 2, replicas=1)
    assert row.tau_eff.tolist() == [1.5, 1.5]


def _hand_rounds(problem, steps, lr, algorithm, rho, rounds):
    """``rounds`` noiseless rounds from x = 0 written out: each client's tau_i heavy-ball steps (v = rho v + g,
    y -= lr v, v from 0; rho = 0 is SGD), then FedAvg's sum_i p_i Delta_i or FedNova's
    tau_eff sum_i p_i Delta_i / ||a_i||_1 with ||a_i||_1 = sum_{k=1..tau_i} (1 - rho^k) / (1 - rho) (tau_i for SGD)
    and tau_eff = sum_i p_i ||a_i||_1."""
    norms = np.array([sum(sum(rho ** j for j in range(k)) for k in range(1, t + 1)) for t in steps])
    tau_eff = float(problem.p @ norms)
    x = np.zeros(problem.dim)
    for _ in range(rounds):
        deltas = []
        for H, e, t in zip(problem.H, problem.e, steps):
            y, v = x.copy(), np.zeros_like(x)
            for _ in range(t):
                v = rho * v + (H @ y - e)
                y = y - lr * v
            deltas.append(x - y)
        if algorithm == "fedavg":
            x = x - sum(p * d for p, d in zip(problem.p, deltas))
        else:
            x = x - tau_eff * sum(p * d / n for p, d, n in zip(problem.p, deltas, norms))
    return x


@pytest.mark.parametrize("algorithm", ["fedavg", "fednova"])
@pytest.mark.parametrize("solver", ["sgd", "momentum"])
def test_bound_checks_runs_are_the_closed_form_round_maps_of_its_algorithm(algorithm, solver):
    """BD1, BD3, BD5-BD7 (0e9da1f..c5aa211): ``Theorem1Row.closed_form_gap`` is rounding error (below 1e-9; chapter
    7 asserts it) for each algorithm and local solver: the noiseless engine run is the closed-form round map of the
    same algorithm and momentum. The mutants made it O(1): the map without momentum (BD1), the gap's run with the
    noise (BD3), the map one round short (BD5), FedAvg's map for FedNova (BD6), or left it NaN (BD7)."""
    problem, steps = bounds.default_setup(seed=1, dim=4)
    row = bounds.bound_check(problem, steps, algorithm, solver, 4, lr_scale=0.005, replicas=2, seed=2)
    assert 0.0 <= row.closed_form_gap < 1e-9, row.closed_form_gap


@pytest.mark.parametrize("algorithm, solver, rounds", [("fednova", "momentum", 12), ("fedavg", "sgd", 3)])
def test_closed_form_gap_is_the_relative_distance_after_min_t_10_noiseless_rounds(monkeypatch, algorithm, solver,
                                                                                  rounds):
    """BD2, BD4 (0e9da1f..c5aa211): the gap's engine call is one replica without noise over min(T, 10) rounds, and
    the gap its distance to the closed form relative to the closed form's norm. Here that call's parameters are
    moved by delta = 1e-3 (1, ..., 1), so the gap is ||delta|| / ||x_R||, x_R the R = min(T, 10) rounds written
    out by hand (``_hand_rounds``). BD2 (min(T, 1) rounds: the gap still rounding error, but the call's rounds 1 and
    ||delta|| / ||x_1||) and BD4 (the distance not divided by ||x_R||) give other numbers."""
    calls = []
    real = bounds.run_replicas
    delta = np.full(4, 1e-3)

    def moved_when_noiseless(*args, **kwargs):
        run = real(*args, **kwargs)
        calls.append((args[4], kwargs["sigma"], kwargs["replicas"]))
        return run._replace(params=run.params + delta) if kwargs["sigma"] == 0 else run

    monkeypatch.setattr(bounds, "run_replicas", moved_when_noiseless)
    problem, steps = bounds.default_setup(seed=1, dim=4)
    row = bounds.bound_check(problem, steps, algorithm, solver, rounds, lr_scale=0.01, replicas=2, seed=2)
    R = min(rounds, 10)
    assert calls == [(rounds, 0.5, 2), (R, 0.0, 1)]
    x = _hand_rounds(problem, steps, row.lr, algorithm, 0.5 if solver == "momentum" else 0.0, R)
    assert row.closed_form_gap == pytest.approx(np.linalg.norm(delta) / np.linalg.norm(x), rel=1e-9)

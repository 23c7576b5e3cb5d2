"""Tests written to kill the surviving mutants of a mutation-testing pass over ``fedlib.theory``,
``fedlib.tradeoff`` and ``fedlib.anatomy``.

Every check compares a closed form with an independent computation (a simulated recursion, dense
linear algebra, a brute-force search, a number worked out by hand in a comment) or with what the
docstring / the paper specifies; none of them freezes the library's current output.

Mutants of f37e303..6eb7195, the plain floats of ``theory.theorem1_bound`` / ``theorem1_explicit_bound`` (pass
described in tests/README.md, Mutation passes):
  equivalent:
- TH3, TH4 (``float()`` dropped from theorem1_bound's last two terms) and TH6, TH7, TH8 (from
  theorem1_explicit_bound's last three): every factor is already a Python float or int there
  (check_positive / check_nonnegative / check_int return ``float`` / ``int``, theorem1_constants returns
  floats), so ``float()`` is a guard for a future change, not an observable difference. The first terms'
  ``float()`` (TH1, TH2, TH5) are needed (``np.sqrt``, an unchecked numpy ``tau_eff``) and are killed by
  tests/test_bounds.py::test_theorem1_terms_are_plain_floats.

Mutants of 8bd9827.., ``fedlib.theory`` (App. G's conditions) (pass described in tests/README.md, Mutation passes).

Mutants of 86c5527..90cbd4d (theory.py) (pass described in tests/README.md, Mutation passes):
theory.py: Th1 ``.any()`` -> ``.all()``; Th2 drop chi_square's infinite check: killed by the suite.

Mutants of 37f92d9..28127ce (third, the changed hunks of fedlib/theory.py)
(pass described in tests/README.md, Mutation passes):
  TH1 theorem1_max_beta2 without ``max(1.0, ...)``; TH2 theorem1_explicit_bound without the ``lr > 0.5 / (L
  tau_eff)`` guard; TH3 that guard ``>`` -> ``>=``; TH4 no d == 0 refusal; TH5 _check_quadratic without the symmetry
  check; TH6 ``local_steps=None`` let through again; TH7 the symmetry tolerance 1e-10 -> 1e-6; TH8 the H_i message
  on ``name == "H"``; TH9 quadratic_smoothness / TH10 quadratic_local_operator without _check_symmetric; TH11
  _check_finite_round_map looks at M only; TH12 / TH13 quadratic_fixed_point / quadratic_vr_fixed_point without
  it; TH14 _radius_or_inf without the finite test; TH15 quadratic_vr_count_outside's progress unchecked.
  killed by the suite: TH1-TH10, TH12-TH14. killed here: TH11, TH15.

Mutants of 0571233~1..165a974 (fedlib/theory.py: two_client_lower_bound's tau1/tau2, quadratic_local_operator's
local_steps by check_count) (pass described in tests/README.md, Mutation passes):
  TH1 tau1 by check_int; TH2 tau2 by check_int; TH3 local_steps by check_int; TH4 tau2 minimum 0. killed by the
  suite: TH1-TH4.

Mutants of 8fc7fcd..0bee57f (fedlib/theory.py: chi_square / _chi_square's underflow-safe terms and overflow
refusal, theorem1_constants and _appg_inputs from the entries before the last, fedprox_theorem1_constants' s_head /
q_head, two_client_lower_bound's chi2 in integers, lemma1_fixed_point's even/odd tau for lr >= 1) (pass described in
tests/README.md, Mutation passes):
  CS1 ``d * (d / w)`` -> ``d ** 2 / w`` (the old underflowing term); CS2 the ``big`` fallback dropped; CS3 the
  overflow refusal dropped (inf returned); CS4 the errstate around ``d * (d / w)`` dropped; CS5 the errstate around
  _chi_square in chi_square dropped; CS6 ``chi2 == np.inf`` -> ``chi2 > 1e308``; CS7 ``np.abs(d) * (d / w)``.
  TC1 ``head = a[:-2]``; TC2 B from ``l2sq - a[-1] ** 2`` again; TC3 C from ``l1 ** 2 - l1 * a[-1]`` again; TC4
  ``head = a[1:]``; TC5 C = ``head.sum() ** 2``. AP1 _appg_inputs' C from ``l1 - a[-1]`` again; AP2 ``a[1:]``.
  FP1 B = ``w @ (q - 1)`` again; FP2 C from ``s ** 2 - s`` again; FP3 s_head's exponent tau_i, not tau_i - 1; FP4
  q_head with one factor (1 - alpha); FP5 q_head's exponent tau_i - 1, not 2 (tau_i - 1); FP6 s_head from
  ``log1p(alpha)``; FP7 alpha = 0: s_head = q_head = tau_i; FP8 alpha = 1: s_head = q_head = tau_i - 1 (alpha = 0's);
  FP9 q_head divided by alpha, not alpha (2 - alpha). TW1 chi2's denominator 4 (tau_1 + tau_2); TW2 chi_square of
  the rounded w again; TW3 ``/ 4 / t1 / t2``; TW4 in floats (``float(t2 - t1) ** 2 / (4.0 * t1 * t2)``). LM1 K = 1 -
  (1 - lr)^tau again; LM2 the even/odd branches swapped; LM3 ``log1p(lr - 1)``; LM4 odd tau ``1 - (lr - 1)^tau``;
  LM5 ``lr < 1`` -> ``lr <= 1``; LM6 the errstate around the np.where dropped.
  killed by the suite: CS1-CS3, CS7, TC1-TC5, AP1, AP2, FP1-FP9, TW1, TW2, LM1-LM4. killed here: CS4 (through
  _round_chi_square, which calls _chi_square without chi_square's errstate), CS5, CS6, TW3, TW4, LM5, LM6.

Mutants of 113f0d3..a655138 (fedlib/theory.py: quadratic_fixed_point solved with A = sum_i c_i K_i H_i from
_round_map_terms and its contraction read from A's eigenvalues; _chi_square's errstate on the second try; slowdown's
refusal beyond float64; quadratic_vr_fixed_point with _vr_round_map_terms' x-block) (pass described in tests/README.md,
Mutation passes):
  FP1 ``A += KH`` -> ``A -= KH``; FP2 solved with I - M again; FP3 the uniqueness check on I - M again; FP4 ``lam[0]
  > 0`` -> ``>= 0``; FP5 ``lam[-1] < 2`` -> ``<= 2``; FP6 the lower bound dropped; FP7 the upper bound dropped; FP8
  the message's radius from min |1 - lambda|; FP9 eigvalsh(A) without (A + A^T) / 2; FP10 the lower bound on
  ``lam[-1]``; FP11 the radius max |lambda(A)|; FP12 KH without c_i; FP13 quadratic_round_map returns A as M; FP14
  _check_finite_round_map(A, b); FP15 A starts at I; FP16 the contraction check dropped; FP17 solve(A^T, b); FP18 M
  = I - A after the loop (not client by client); FP19 the uniqueness check dropped. CH1 the second try's errstate
  dropped; CH2 ``over=`` -> ``divide=``; CH3 ``over="raise"``; CH4 the second try as d * (d / w) again. SL1 the
  refusal dropped; SL2 ``ratio == inf`` -> ``ratio > 1e308``; SL3 ``ratio >= finfo.max``; SL4 returned as
  ``float(np.float64(tau_bar) / tau_eff)``; SL5 tau_bar a numpy float64 (no ``float()``); SL6 the message's tau_bar
  and tau_eff swapped; SL7 ``not np.isfinite(ratio)``. VF1 the x-block not replaced (I - M again); VF2 the x-block
  ``+x_step``; VF3 d = M's rows // 2; VF4 ``x_x = I - x_step``; VF5 the system M - I; VF6 d = np.shape(e)[1]; VF7 the
  x-block transposed; VF8 quadratic_vr_round_map returns (M, A); VF9 ``system[:d, :d] += x_block``; VF10 the x-block
  I - M's again; VF11 x_step weighted by p, not c_i; VF12 the spectral-radius check dropped.
  killed by the suite: FP1, FP2, FP6, FP12, FP13, FP15, FP16, FP19, CH1-CH4, SL1, SL5, SL6, VF1-VF5, VF8-VF12.
  killed here: FP3, FP5, FP7, FP8, FP10, FP11, FP18, SL2, SL3.
  equivalent: FP4 (lambda_min(A) = 0 exactly only for an A singular to working precision, which the uniqueness check
  refuses first: its rank tolerance sigma_max d eps is above eigvalsh's rounding); FP9 (A is symmetric to rounding,
  each K_i a polynomial in H_i: the eigenvalues move by O(eps ||A||), which decides nothing but an eigenvalue within
  rounding of 2, a radius of 1 to rounding either way); FP14 (A and I - M sum the same terms, negation is exact and
  the diagonal's 1 is far below an ulp where a sum overflows: A is finite iff M is); FP17 (A symmetric: the same
  solution to rounding); SL4 (the same IEEE division of the same two doubles); SL7 (a finite float by a finite
  positive one is never NaN or -inf); VF6 (e is checked (m, d) inside _vr_round_map_terms, the x-block is (d, d));
  VF7 (the x-block is symmetric in exact arithmetic: the same solution to rounding).

Mutants of a655138..81203bf (fedlib/theory.py, 6c59177: _vr_fixed_point_system and _vr_round_map_terms'
return order (M, A, b); the acceleration side, VL1-VL8 and VL16, in tests/test_mutation_bounds_acceleration.py) (pass
described in tests/README.md, Mutation passes):
  VL9 the system's x-block -A; VL10 the x-block A^T; VL11 I - M^T; VL12 quadratic_vr_round_map unpacking the old
  order (M, b, _); VL13 the x-block returned as I - (I - A) (eye_d - x_x); VL14 quadratic_vr_fixed_point solving
  with I - M again; VL15 d = x_block's rows - 1.
  killed by the suite: VL9, VL11-VL15. equivalent: VL10 (A = sum_i c_i K_i H_i is symmetric in exact arithmetic,
  each K_i a polynomial in H_i: the transposed block moves the solution by rounding only; VF7 of 113f0d3..a655138
  again).

Mutants of the 8996bdf pass: 61c3eb9, 37d4fb6, 8996bdf, dc4cc69, f432e05 (fedlib/theory.py, 37d4fb6: quadratic_fixed_point's
H-vs-lr singular message) (pass described in tests/README.md, Mutation passes):
  FS1 ``p_arr > 0`` -> ``>= 0``; FS2 the stack's rank ``<= d`` (H always named); FS3 ``< d - 1``; FS4 the stack's
  test negated (the messages swapped); FS5 the rank of sum_i H_i; FS6 the stack reshaped (d, -1); FS7 the first
  client's H_i only; FS8 every client's H_i (p_i = 0 too); FS9 the outer rank test ``if True``; FS10 the lr message's
  prefix 'H:'; FS11 the H message whatever the stack; FS12 the rank of sum_i p_i H_i; FS13 the outer test ``< d - 1``.
  killed by the suite: FS1-FS4, FS6, FS8, FS10, FS11, FS13. killed here: FS5, FS7, FS12.
  equivalent: FS9 (_check_unique_solution raises on the outer test's own condition, rank A < d with d >= 1 from
  _check_quadratic: the mutant only builds the message for a nonsingular A too).

Mutants of 652fbe7..0e9da1f (fedlib/theory.py, 834501f: ``_step_d`` and Theorem 1's terms from eta L,
two_client_lower_bound's ``a * a``; 00f8e99: ``_power_of_two_scale`` and the rescaled quadratic_min_beta2 /
quadratic_kappa2) (pass described in tests/README.md, Mutation passes): 14 mutants (ids as drafted: TD2, TD8, TD17
not run), one at a time, ``pytest -x -q`` on test_theory.py, this file, test_appg_conditions.py and test_bounds.py:
11 killed by the suite, 2 killed here, 1 equivalent.
  TD1 ``_step_d`` without its C == 0 branch; TD3 4 -> 2; TD4, TD5 Theorem 1's third / fourth term with eta L for
  (eta L)^2; TD6 two_client_lower_bound's overflow refusal dropped; TD7 a for a^2; TD9 tiny arrays not rescaled
  (``2**-100 <=`` dropped); TD10 ``frexp(top)[1] - 1`` -> ``frexp(top)[1]`` (a power of two above max|x|); TD11 the
  ``top == 0`` test dropped; TD12 quadratic_min_beta2's H not rescaled; TD13 kappa^2 times e's scale once; TD14,
  TD15 quadratic_kappa2's H / e not rescaled; TD16 kappa^2's overflow refusal dropped.
  killed by the suite: TD3-TD7, TD9, TD12-TD16 (test_theory.py). killed here: TD1, TD10.
  equivalent: TD11 (an all-zero x gives 0.5 for 1: zeros divided by 0.5 are the same zeros, and the kappa^2 of an
  all-zero e, 0, times 0.25 is 0; an infinite kappa^2 is refused before the scale is put back either way).
Mutants of c5aa211..361d535 (fedlib/theory.py, 4f35114: theorem1_constants' power-of-two scaling, ``_exponent``,
``_ldexp``) (pass described in tests/README.md, Mutation passes): 10 mutants, one at a time, ``pytest -x -q`` on
test_theory.py, this file, test_bounds.py, test_bad_inputs_core.py and test_closed_forms_coverage.py: 8 killed by the
suite, 1 killed here, 1 equivalent.
  TH1 ``_exponent`` one too large; TH2 ``_ldexp`` without its k == 0 branch; TH3 0 for inf past the range; TH4 B
  scaled back by k, not 2k; TH5 C by twice a's exponent; TH6 the head scaled by a's scale; TH7 the head divided by
  a's scale; TH8 ``a.sum() < 0`` (an all-zero a_i taken); TH9 C not scaled back; TH10 w_i applied after B's term is
  scaled back.
  killed by the suite: TH1, TH3-TH9 (test_theory.py, this file). killed here: TH10
  (test_theorem1_constants_B_weighs_a_head_before_scaling_it_back). equivalent: TH2 (``math.ldexp(x, 0)`` is x).
Mutants of 41ab8e8..3aae5f7 (fedlib/theory.py: the 40-digit decimal checks, ``_DECIMAL`` and ``_checked``, of
theorem1_bound, _step_d, appg_step_conditions, appg_max_lr, _appg_inputs' decimal C and theorem1_explicit_bound;
theorem1_constants' frexp of w_i) (pass described in tests/README.md, Mutation passes): 44 mutants (ids as drafted:
gaps are drafts not run), one at a time, ``pytest -x -q`` on test_theory.py, this file, test_appg_conditions.py and
test_bounds.py; survivors re-run against test_docstring_truth.py, test_paper_claims.py,
test_closed_forms_coverage.py, test_anatomy_tradeoff.py, test_bad_inputs_core.py,
test_speedup_bounds_stragglers_inputs.py and the doctests of fedlib.theory (none killed there): 27 killed by the
suite, 11 killed here or by the fix's test, 6 equivalent.
  TC1 the frexp never taken (the old B); TC2 the frexp taken for unscaled heads too; TC4 w_i's exponent subtracted;
  TC5 w_i's exponent dropped. DC1 ``prec=16``; DC3 the context's default traps. CK1 the NaN branch dropped; CK2 the
  tolerance 1e-3; CK3 ``abs`` dropped; CK4 ``value == rounded or`` dropped; CK5 ``math.isfinite(value) and``
  dropped (at 3aae5f7; after 079e23d, ``math.isfinite(rounded) and``); CK6 the decimal value returned within the
  tolerance. TB1 ``except ZeroDivisionError``; TB2 the OverflowError fallback 0.0 for nan; TB3 the exact second term
  with kappa^2; TB4 the exact third term without m; TB5 s without m; TB6 the exact fourth term with sigma^2; TB9
  theorem1_bound's errstate dropped. SD1 the ``C_exact == 0`` branch dropped; SD2 ``C == 0`` tested on the float;
  SD3 D's exact value from the float C; SD4 its factor 2; SD5 the given C_exact replaced by Decimal(C). AS1 the first
  quantity unchecked; AS2 the exact second without q; AS3 the second unchecked; AS4 _step_d without C_exact; AS5 the
  exact first without L. AI1 the errstate around the sums dropped; AI2 ``x <= math.inf`` (the float sum always);
  AI3 C_exact from ||a||_1^2; AI4 the head's sum over the whole of a; AI6 C_exact starting at 1. AM1 1 / denominator
  unguarded; AM2 ``C > 0`` for ``C_exact > 0``; AM3 appg_max_lr's errstate dropped; AM5 the exact second bound
  without q; AM6 the exact third bound without the + 1. EB1 ``except OverflowError`` only; EB2 the exact second term
  without / m; EB3 the third with eta L once; EB4 the fourth with sigma^2; EB5 the first without tau_eff.
  killed by the suite: TC1, TC4, TC5, CK2, CK3, CK6, TB1, TB3-TB6, SD4, AS2, AS5, AI2-AI4, AI6, AM1, AM2, AM5, AM6,
  EB1-EB5. killed here: DC1 (test_values_the_decimals_take_over_are_correctly_rounded), TB9, AI1, AM3
  (test_decimal_checked_results_beyond_float64_raise_no_warning), SD2, SD3, SD5, AS4
  (test_appg_d_where_c_leaves_float64_is_the_value_rounded), AS1, AS3
  (test_appg_first_and_second_where_float64_products_over_or_underflow_are_the_values_rounded); CK5 by the test of
  the bug it showed (079e23d: a finite float64 value stood against an exact one beyond float64, the tolerance
  1e-12 * inf being inf; at 3aae5f7 the mutant was equivalent, as the clause it dropped was the wrong one), in
  tests/test_theory.py:
  test_explicit_slowdown_term_beyond_float64_is_inf_where_float64_rounded_its_denominator_up.
  equivalent: TC2 (for a head of scale 1, w_i's mantissa times ||head||^2 rounds to w_i ||head||^2's significand and
  the ldexp back is exact, unless the term is below 2^-1022, i.e. w_i < 2^-822, where the mutant rounds twice, to 53
  bits then to the subnormal grid, and differs only where the first rounding lands on a tie of the second); DC3 (the
  default traps, InvalidOperation, DivisionByZero and Overflow, never fire: the inputs are finite (checked), the
  divisors positive, and no product of float64s and a whole number in memory reaches 10^MAX_EMAX); CK1 (the exact
  value is never NaN for the same reason); CK4 (every quantity is >= 0: a value equal to the rounded one also passes
  the tolerance where that is finite, and where both are inf the rounded one is the value); TB2 (a fallback value
  stands only within the tolerance of the exact one, and 0.0 is within it only where the exact value rounds to 0.0);
  SD1 (C = 0 makes the exact D 0, and the float 4 x^2 C is 0, or nan for an infinite x, both giving way to 0.0).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fedlib import anatomy as AN
from fedlib import theory as TH
from fedlib import tradeoff as TR
from fedlib.algorithms import make_algorithm
from fedlib.engines.reference import run_sequential
from fedlib.problems import random_quadratic
from fedlib.schedules import FixedSteps
from fedlib.solvers import LocalSolver, momentum_sgd, proximal_sgd, sgd


# ====================================================================== helpers (brute force)
def _prox_a_by_simulation(tau: int, alpha: float) -> np.ndarray:
    """a of proximal GD, read off its impulse response: x_{k+1} = x_k - eta (g_k + mu (x_k - x_0))
    on a tau-dimensional probe whose gradient at step k is e_k (eta = 1, mu = alpha)."""
    x = np.zeros(tau)
    for k in range(tau):
        x = x - (np.eye(tau)[k] + alpha * x)
    return -x


def _eq8_brute(alpha: float, m: int, tau: int, T: int, sigma2: float, kappa2: float) -> np.ndarray:
    """Eq. (8) with unit constants for FedProx, p_i = 1/m, tau_i = tau: A, B, C from their definitions
    with the simulated a, tau_eff = ||a||_1, eta = sqrt(m / (tau T))."""
    a = _prox_a_by_simulation(tau, alpha)
    l1, l2sq, last = a.sum(), a @ a, a[-1]
    w = np.full(m, 1.0 / m)
    A = m * l1 * np.sum(w ** 2 * l2sq / l1 ** 2)
    B = np.sum(w * (l2sq - last ** 2))
    C = l1 ** 2 - l1 * last
    s = np.sqrt(m * tau * T)
    return np.array([(tau / l1) / s, A * sigma2 / s, m * B * sigma2 / (tau * T), m * C * kappa2 / (tau * T)])


# ====================================================================== fedlib.tradeoff
@pytest.mark.parametrize("seed", range(4))
def test_fedprox_bound_is_eq8_with_the_simulated_proximal_a(seed):
    rng = np.random.default_rng(seed)
    m, tau, T = int(rng.integers(1, 9)), int(rng.integers(1, 30)), int(rng.integers(1, 500))
    alpha, sigma2, kappa2 = float(rng.uniform(0.01, 1.0)), float(rng.uniform(0.2, 3)), float(rng.uniform(0.2, 3))
    got = TR.fedprox_bound(alpha, m, tau, T, sigma2, kappa2)
    np.testing.assert_allclose(got, _eq8_brute(alpha, m, tau, T, sigma2, kappa2), rtol=1e-10, atol=0)
    # the defaults are theorem1_bound's unit constants sigma^2 = kappa^2 = 1
    np.testing.assert_allclose(TR.fedprox_bound(alpha, m, tau, T), _eq8_brute(alpha, m, tau, T, 1.0, 1.0),
                               rtol=1e-10, atol=0)


def test_fedprox_bound_hand_values():
    # alpha = 1: a = [0, ..., 0, 1], tau_eff = 1, A = 1, B = C = 0; sqrt(m tau T) = sqrt(2*8*4) = 8
    assert TR.fedprox_bound(1.0, 2, 8, 4) == pytest.approx((8 / 8, 1 / 8, 0.0, 0.0), abs=1e-15)
    # tau = 1: a = [1] whatever alpha; one client: sqrt(1*1*9) = 3
    assert TR.fedprox_bound(0.5, 1, 1, 9) == pytest.approx((1 / 3, 1 / 3, 0.0, 0.0), abs=1e-15)
    for kwargs in (dict(alpha=0.0), dict(alpha=1.5), dict(m=0), dict(tau_bar=0)):
        args = {**dict(alpha=0.5, m=2, tau_bar=3, rounds=4), **kwargs}
        with pytest.raises(ValueError, match=rf"^{next(iter(kwargs))}\b"):
            TR.fedprox_bound(**args)


@pytest.mark.parametrize("m,tau,T", [(4, 40, 200), (50, 3, 2)])
def test_fedprox_bound_best_alpha_is_the_grid_minimiser(m, tau, T):
    """The numerical minimiser against a fine log-grid of the brute-force eq. (8) (default unit
    constants); the second case has its minimum at alpha = 1 (Corollary 2's clipping)."""
    grid = np.exp(np.linspace(np.log(1e-9), 0.0, 1500))
    totals = np.array([_eq8_brute(a, m, tau, T, 1.0, 1.0).sum() for a in grid])
    best = TR.fedprox_bound_best_alpha(m, tau, T)
    assert 1e-9 <= best <= 1.0
    assert _eq8_brute(best, m, tau, T, 1.0, 1.0).sum() <= totals.min() * (1 + 1e-6)
    assert best == pytest.approx(grid[np.argmin(totals)], rel=0.03)


def _simulated_distances(problem, steps, lr, alpha, algorithm, rounds):
    solver = sgd(lr) if alpha == 0 else proximal_sgd(lr, alpha / lr)
    algo = make_algorithm("fedavg" if (alpha == 0 and algorithm == "fedprox") else algorithm, solver)
    x_star = problem.optimum()
    run = run_sequential(algo, np.zeros(problem.dim), problem.grad_fn(), problem.p, FixedSteps(steps), max(rounds),
                         metric_fn=lambda x, t: float(np.linalg.norm(x - x_star)))
    return np.array([run.metrics[t] for t in rounds])


@pytest.mark.parametrize("algorithm", ["fedprox", "fednova"])
def test_closed_form_distances_are_the_real_rounds(algorithm):
    """Several round counts in any order, alpha = 0 included (FedAvg's / FedNova's SGD rounds)."""
    problem = random_quadratic(3, 2, seed=4, p=[0.2, 0.3, 0.5])
    steps, lr, rounds, alphas = [1, 4, 7], 0.05, [3, 0, 6, 1], [0.0, 0.2]
    got = TR.closed_form_distances(problem, steps, lr, alphas, rounds, algorithm)
    want = np.stack([_simulated_distances(problem, steps, lr, a, algorithm, rounds) for a in alphas], axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_fedprox_sweep_one_round_and_its_guards():
    problem = random_quadratic(2, 2, seed=1)
    sweep = TR.fedprox_sweep(problem, [2, 3], 0.1, [0.5], 1)
    assert sweep.fedprox[0] == pytest.approx(_simulated_distances(problem, [2, 3], 0.1, 0.5, "fedprox", [1])[0],
                                             rel=1e-12)
    with pytest.raises(ValueError, match="alphas"):
        TR.fedprox_sweep(problem, [2, 3], 0.1, [0.0, 0.5], 1)
    with pytest.raises(ValueError, match="rounds"):
        TR.fedprox_sweep(problem, [2, 3], 0.1, [0.5], 0)


def test_fedprox_curves_alpha_grid_guards():
    p, steps = [0.5, 0.5], [1, 3]
    one = TR.fedprox_curves(p, steps, [0.5])  # a single alpha is a grid
    # alpha = 1/2: ||a_i||_1 = 2 (1 - 2^-tau_i) = (1, 1.75); tau_eff = 1.375, slowdown = 2 / 1.375
    assert one.tau_eff[0] == pytest.approx(1.375) and one.slowdown[0] == pytest.approx(2 / 1.375)
    for bad in ([1.5], [-0.1], [float("nan")], [], [[0.5]]):
        with pytest.raises(ValueError, match="alphas"):
            TR.fedprox_curves(p, steps, bad)


def test_mu_for_alpha_keeps_an_exact_product():
    # eta * mu = 1 exactly needs no nudge (only a product that rounds above 1 does)
    assert TR.mu_for_alpha(1.0, 0.5) == 2.0
    assert TR.mu_for_alpha(0.25, 0.5) == 0.5


def test_mu_for_alpha_refuses_alpha_outside_0_1():
    for bad in (1.0 + 1e-15, float("nan"), -0.5):  # 1 + 1e-15: returns quickly when unguarded
        with pytest.raises(ValueError, match="alpha"):
            TR.mu_for_alpha(bad, 1.0)


# ====================================================================== fedlib.anatomy
def test_relative_error_hand_values():
    assert AN.relative_error([3.0, 4.0], [0.0, 0.0]) == 5.0               # r = 0: the plain norm
    assert AN.relative_error([1.0, 1.0], [0.0, 0.5]) == pytest.approx(np.sqrt(1.25) / 0.5)  # ||r|| < 1
    assert AN.relative_error([3.0, 6.0], [0.0, 2.0]) == pytest.approx(5.0 / 2.0)
    with pytest.raises(ValueError, match=r"^x has shape \(3, 1\) but reference has \(3,\)$"):
        AN.relative_error(np.ones((3, 1)), np.ones(3))   # would broadcast to (3, 3)


@dataclasses.dataclass(frozen=True)
class _WrongClosedNorm(LocalSolver):
    """SGD whose closed-form ||a||_1 is (deliberately) twice the truth."""

    def a_norm(self, tau: int) -> float:
        return 2.0 * tau


def test_check_update_rule_reports_a_relative_a_norm_error():
    check = AN.check_update_rule(_WrongClosedNorm(0.1), np.ones(3), lambda x, k: x - k, 4)
    # online ||a||_1 = 4, closed form 8: relative error |4 - 8| / 8
    assert check.a_norm_error == pytest.approx(0.5) and check.a_norm == 8.0
    assert check.delta_error < 1e-12


def test_trace_one_step_and_guards():
    s = sgd(0.1, weight_decay=0.5)
    x0 = np.array([1.0, -2.0])
    tr = AN.trace_local_run(s, x0, lambda x, k: np.array([3.0, 1.0]), 1)
    # G's column: g + lambda x0 = (3.5, 0); delta = -0.1 * that
    np.testing.assert_allclose(tr.G[:, 0], [3.5, 0.0])
    np.testing.assert_allclose(tr.delta, [-0.35, 0.0])
    assert tr.a_norm == 1.0
    with pytest.raises(ValueError, match="params"):
        AN.trace_local_run(s, np.ones((2, 2)), lambda x, k: x, 2)
    with pytest.raises(ValueError, match="local_steps"):
        AN.trace_local_run(s, x0, lambda x, k: x, 0)
    with pytest.raises(ValueError, match="local_steps"):
        AN.probe_a_vector(s, 0)


def test_delta_from_rule_shapes():
    assert AN.delta_from_rule(np.eye(2), np.array([1.0, 2.0]), 0.5) == pytest.approx([-0.5, -1.0])
    with pytest.raises(ValueError, match="G must be"):
        AN.delta_from_rule(np.ones((3, 4)), np.ones(5), 0.1)     # G fine, a the wrong length
    with pytest.raises(ValueError, match="G must be"):
        AN.delta_from_rule(np.ones(4), np.ones(4), 0.1)          # G not 2-d


def test_a_norm_curves():
    s = momentum_sgd(0.1, 0.5)
    taus, closed, probed = AN.a_norm_curves(s, 5)
    np.testing.assert_array_equal(taus, [1, 2, 3, 4, 5])
    # heavy ball, rho = 1/2: ||a||_1 = (tau - rho (1 - rho^tau)/(1 - rho)) / (1 - rho)
    want = [(t - 0.5 * (1 - 0.5 ** t) / 0.5) / 0.5 for t in range(1, 6)]
    np.testing.assert_allclose(closed, want, rtol=1e-14)
    np.testing.assert_allclose(probed, want, rtol=1e-12)
    np.testing.assert_array_equal(AN.a_norm_curves(sgd(0.1), 3)[1], [1.0, 2.0, 3.0])


def test_official_counters_hand_values_and_guards():
    assert AN.official_counter_a_norm(5, 0.0, 0.0) == 5.0     # plain SGD: one per step
    with pytest.raises(ValueError, match="momentum"):
        AN.official_counter_a_norm(3, 1.0, 0.1)
    with pytest.raises(ValueError, match="alpha"):
        AN.official_counter_a_norm(3, 0.5, 1.5)
    with pytest.raises(ValueError, match="momentum"):
        AN.official_inplace_a_vector(3, 0.1, 1.0, 0.5)
    # two steps by hand: u1 = g0, x1 = -eta g0; u2 = rho g0 + g1 + mu x1, x2 = x1 - eta u2
    # => a = [1 + rho - eta mu, 1]
    np.testing.assert_allclose(AN.official_inplace_a_vector(2, 0.1, 0.6, 2.0), [1 + 0.6 - 0.2, 1.0], rtol=1e-14)


@pytest.mark.parametrize("tau", [1, 3, 8])
def test_official_inplace_reduces_to_each_solver_alone(tau):
    """Without prox the in-place dynamics are heavy ball, without momentum proximal SGD."""
    np.testing.assert_allclose(AN.official_inplace_a_vector(tau, 0.1, 0.7, 0.0), momentum_sgd(0.1, 0.7).a_vector(tau),
                               rtol=1e-13)
    np.testing.assert_allclose(AN.official_inplace_a_vector(tau, 0.1, 0.0, 3.0), _prox_a_by_simulation(tau, 0.3),
                               rtol=1e-13)


def test_softmax_client_shapes_init_and_large_logits():
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((6, 3)), rng.integers(0, 4, 6)
    client = AN.SoftmaxRegressionClient(x, y, 4)
    assert client.batch_size == 20                              # the paper's batch size
    w0 = client.init_params()
    assert w0.shape == (16,) and np.abs(w0).max() < 0.1         # "small random start"
    with pytest.raises(ValueError, match="x must be"):
        AN.SoftmaxRegressionClient(x[:, 0], y, 4)
    with pytest.raises(ValueError, match="x must be"):
        AN.SoftmaxRegressionClient(x, y[:5], 4)
    # logits in the thousands: the gradient stays finite and is softmax(z) - onehot, averaged
    w = 500.0 * rng.standard_normal(16)
    z = x @ w[:12].reshape(3, 4) + w[12:]
    prob = np.exp(z - z.max(axis=1, keepdims=True))
    prob /= prob.sum(axis=1, keepdims=True)
    prob[np.arange(6), y] -= 1.0
    want = np.concatenate([(x.T @ prob / 6).ravel(), prob.sum(axis=0) / 6])
    got = client.full_grad(w)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_anatomy_step_count_guards_and_one_step():
    s = momentum_sgd(0.1, 0.5)
    np.testing.assert_array_equal(AN.probe_a_vector(s, 1), [1.0])          # one step: a = [1] for any solver
    taus, closed, probed = AN.a_norm_curves(s, 1)
    assert list(taus) == [1] and closed[0] == pytest.approx(1.0) and probed[0] == pytest.approx(1.0)
    assert AN.official_inplace_a_vector(1, 0.1, 0.5, 2.0) == pytest.approx([1.0])
    # proximal alone, alpha = 1: a = [0, ..., 0, 1], ||a||_1 = 1 (the counter is right for prox alone)
    assert AN.official_counter_a_norm(4, 0.0, 1.0) == pytest.approx(1.0)
    for call in (lambda: AN.a_norm_curves(s, 0), lambda: AN.official_counter_a_norm(0, 0.5, 0.1),
                 lambda: AN.official_inplace_a_vector(0, 0.1, 0.5, 1.0)):
        with pytest.raises(ValueError, match="steps"):
            call()


def test_softmax_client_batches():
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((6, 3)), rng.integers(0, 2, 6)
    w = rng.standard_normal(8)
    # a batch at least as large as the data set is the whole data set (in some order)
    full = AN.SoftmaxRegressionClient(x, y, 2).full_grad(w)
    np.testing.assert_allclose(AN.SoftmaxRegressionClient(x, y, 2).grad(w, 0), full, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(AN.SoftmaxRegressionClient(x, y, 2, batch_size=6).grad(w, 3), full, rtol=1e-12,
                               atol=1e-15)
    # batch of one: the gradient of one of the rows
    one = AN.SoftmaxRegressionClient(x, y, 2, batch_size=1)
    rows = [one.full_grad(w, [r]) for r in range(6)]
    assert min(np.abs(one.grad(w, 5) - g).max() for g in rows) < 1e-15
    for kwargs, name in ((dict(num_classes=1), "num_classes"), (dict(batch_size=0), "batch_size")):
        with pytest.raises(ValueError, match=name):
            AN.SoftmaxRegressionClient(x, y, **{"num_classes": 2, **kwargs})


# ====================================================================== fedlib.theory
def test_two_client_example_default_a_is_one():
    # tau = (1, 3), a = 1: w = (1/4, 3/4), kappa^2 = 4 w1 w2 = 3/4, x = (1 - 3)/4 = -1/2
    ex = TH.two_client_lower_bound(1, 3)
    assert ex.kappa2 == pytest.approx(0.75) and ex.x_limit == pytest.approx(-0.5)
    assert ex.grad_norm_sq == pytest.approx(0.25)


def _rotation(d, seed):
    q, r = np.linalg.qr(np.random.default_rng(seed).standard_normal((d, d)))
    return q * np.sign(np.diag(r))


@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e6])
def test_min_beta2_is_scale_invariant_with_a_singular_average(scale):
    """Assumption 3 is homogeneous in the gradients: beta^2_min(c H) = beta^2_min(H). H_i = Q diag(h_i, 0) Q^T
    with a random rotation Q (the zero eigenvalue is then zero only up to rounding): only the first
    direction counts, (w1 h1^2 + w2 h2^2) / (w1 h1 + w2 h2)^2 = 2.5 / 2.25 for h = (1, 2), w = (1/2, 1/2)."""
    Q = _rotation(3, 0)
    H = np.array([scale * Q @ np.diag([h, 3.0, 0.0]) @ Q.T for h in (1.0, 2.0)])
    # the second direction is common (ratio 1); the third is null for both clients
    assert TH.quadratic_min_beta2(H, [0.5, 0.5]) == pytest.approx(2.5 / 2.25, rel=1e-8)


def test_vr_fixed_point_refuses_a_diverging_round():
    # one client, one local step: x moves as gradient descent, 1 - 2.5 * 1 = -1.5: no contraction
    with pytest.raises(ValueError, match="do not converge"):
        TH.quadratic_vr_fixed_point([[[1.0]]], [[1.0]], [1.0], [1], 2.5, "scaffold")
    # H_i = diag(h_i, 0): the second coordinate of x is an eigenvector for the eigenvalue 1 exactly
    H = np.array([np.diag([1.0, 0.0]), np.diag([2.0, 0.0])])
    for algorithm in ("scaffold", "fednova-vr"):
        with pytest.raises(ValueError, match="do not converge"):
            TH.quadratic_vr_fixed_point(H, np.ones((2, 2)), [0.5, 0.5], [1, 2], 0.1, algorithm)


@pytest.mark.parametrize("algorithm", ["scaffold", "fednova-vr"])
def test_vr_fixed_point_with_defaults_is_the_optimum_and_its_gradients(algorithm):
    """Plain local GD (the defaults mu = 0, momentum = 0): (x*, grad F_i(x*)), x* by a dense solve."""
    prob = random_quadratic(3, 2, seed=6, p=[0.2, 0.3, 0.5])
    x, c = TH.quadratic_vr_fixed_point(prob.H, prob.e, prob.p, [1, 3, 5], 0.05, algorithm)
    x_star = np.linalg.solve(np.einsum("i,ijk->jk", prob.p, prob.H), prob.p @ prob.e)
    np.testing.assert_allclose(x, x_star, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(c, np.einsum("ijk,k->ij", prob.H, x_star) - prob.e, rtol=1e-9, atol=1e-10)


def test_count_outside_refuses_a_deflation_point_on_the_circle():
    H = [[[1.0, 0.0], [0.0, 4.0]]]
    with pytest.raises(ValueError, match="deflate"):
        TH.quadratic_vr_count_outside(H, [1.0], [1], 0.1, "scaffold", 0.7, deflate=[0.7j])


def test_local_operator_refuses_momentum_one():
    with pytest.raises(ValueError, match="momentum"):
        TH.quadratic_local_operator(np.eye(2), 3, 0.1, momentum=1.0)


def test_fedprox_weights_at_alpha_one_without_warnings():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")      # no log(0) on the way to ||a_i||_1 = 1
        te, w = TH.fedprox_weights([0.3, 0.7], [2, 9], 1.0)
    assert te == 1.0 and w == pytest.approx([0.3, 0.7])


def test_leading_eigenvalues_defaults_and_shape():
    M = np.diag([3.0, -5.0, 1.0])
    vals = TH.leading_eigenvalues(M)                  # k = 1 by default
    assert vals.shape == (1,) and vals[0] == -5.0
    from scipy.sparse.linalg import aslinearoperator

    for bad in (np.ones((2, 3)), aslinearoperator(np.ones((2, 3)))):
        with pytest.raises(ValueError, match="square"):
            TH.leading_eigenvalues(bad)


def test_vr_eigenvalues_near_defaults():
    """One client, one local step of lr 0.1 on H = diag(-5, 4, 2): x moves as gradient descent,
    eigenvalues 1 - 0.1 h = 1.5, 0.6, 0.8, and the variate is exact after a round (three zeros).
    Defaults: the k = 6 eigenvalues nearest sigma = 1, nearest first."""
    got = TH.quadratic_vr_eigenvalues_near([np.diag([-5.0, 4.0, 2.0])], [1.0], [1], 0.1, "scaffold")
    np.testing.assert_allclose(got, [0.8, 0.6, 1.5, 0.0, 0.0, 0.0], atol=1e-12)
    one = TH.quadratic_vr_eigenvalues_near([np.diag([-5.0, 4.0, 2.0])], [1.0], [1], 0.1, "scaffold", sigma=1.4, k=1)
    np.testing.assert_allclose(one, [1.5], atol=1e-12)
    with pytest.raises(ValueError, match="k must"):
        TH.quadratic_vr_eigenvalues_near([np.diag([-5.0, 4.0, 2.0])], [1.0], [1], 0.1, "scaffold", k=0)


def test_fixed_point_refuses_a_round_map_with_radius_exactly_one():
    """H_i = diag(1, 0): the second coordinate never moves, the round map has the eigenvalue 1 exactly
    (no contraction, and A = I - M = sum_i c_i K_i H_i is singular): refused as a non-unique fixed point, naming H
    (no lr helps)."""
    H = np.array([np.diag([1.0, 0.0]), np.diag([2.0, 0.0])])
    with pytest.raises(ValueError, match=r"^H: sum_i c_i K_i H_i is singular .* not unique"):
        TH.quadratic_fixed_point(H, np.ones((2, 2)), [0.5, 0.5], [1, 2], 0.1, "fedavg")


def test_max_beta2_refuses_every_step_above_the_one_third_limit():
    # D = 4 lr^2 L^2 C = 4 * 0.1 = 0.4 > 1/3: beta^2 would be (1/0.4 - 1)/2 = 0.75 < 1 (Assumption 3 needs >= 1)
    with pytest.raises(ValueError, match="too large"):
        TH.theorem1_max_beta2(1.0, 1.0, 0.1)


def test_theorem1_bound_one_client_hand_values():
    # m = 1, tau_bar = 4, T = 4, tau_eff = 2, A = B = C = 1: sqrt(m tau_bar T) = 4
    # terms (4/2)/4, 1/4, 1*1/16, 1*1/16
    assert TH.theorem1_bound(1, 4.0, 4, 2.0, 1.0, 1.0, 1.0) == pytest.approx((0.5, 0.25, 1 / 16, 1 / 16))


def test_theorem1_explicit_bound_checks_D_against_2beta2_plus_1():
    """a = 1_3 (local SGD, three steps), w = [1], L = 1: C = 9 - 3 = 6, tau_eff = 3. lr = 0.144 keeps
    eta L tau_eff = 0.432 <= 1/2 but D = 4 lr^2 * 6 = 0.498 > 1/(2 beta^2 + 1) = 1/3 for beta^2 = 1."""
    common = dict(L=1.0, sigma2=1.0, beta2=1.0, kappa2=1.0, initial_gap=1.0, w=[1.0], a_vectors=[np.ones(3)],
                  tau_eff=3.0)
    with pytest.raises(ValueError, match="D = 4"):
        TH.theorem1_explicit_bound(0.144, 10, **common)
    with pytest.raises(ValueError, match="rounds"):
        TH.theorem1_explicit_bound(0.01, 0, **common)
    # lr = 0.1: D = 0.24 <= 1/3; the four terms by hand: 4/(0.1*3*10), 4*0.1*A, 6*0.01*B, 12*0.01*C
    # with A = 1 * 3 * 3/9 = 1, B = 3 - 1 = 2, C = 6
    got = TH.theorem1_explicit_bound(0.1, 10, **common)
    assert got == pytest.approx((4 / 3, 0.4, 0.12, 0.72))


def test_corollary2_one_client_and_guards():
    assert TH.corollary2_best_alpha(1, 4.0, 64) == pytest.approx(1 / (2 * 2))   # sqrt(1) / (sqrt(4) 64^(1/6))
    for kwargs in (dict(m=0), dict(rounds=0)):
        with pytest.raises(ValueError, match=rf"^{next(iter(kwargs))}\b"):
            TH.corollary2_best_alpha(**{**dict(m=2, tau_bar=1.0, rounds=10), **kwargs})
    with pytest.raises(ValueError, match="tau2"):
        TH.two_client_lower_bound(1, 0)


def test_count_outside_reports_the_determinants_it_evaluated(monkeypatch):
    """``evaluations`` is the number of determinants: count the calls of numpy's slogdet."""
    calls = []
    slogdet = np.linalg.slogdet
    monkeypatch.setattr(np.linalg, "slogdet", lambda a: calls.append(1) or slogdet(a))
    res = TH.quadratic_vr_count_outside([np.diag([1.0, 4.0])], [1.0], [1], 0.1, "scaffold", 0.7)
    assert res.outside == 1 and res.inside == 3 and res.rows == 4      # eigenvalues 0.9 | 0.6, 0, 0
    assert res.evaluations == len(calls) > 0


def test_assumption3_for_linear_clients():
    """Zero Hessians (F_i = -e_i^T x, constant gradients): Assumption 3 holds with its smallest allowed
    beta^2 = 1, and then kappa^2 = sum_i w_i ||e_i||^2 - ||sum_i w_i e_i||^2 (the spread of the gradients)."""
    H = np.zeros((3, 2, 2))
    e = np.array([[1.0, 0.0], [0.0, 2.0], [-1.0, 1.0]])
    w = np.array([0.2, 0.3, 0.5])
    assert TH.quadratic_min_beta2(H, w) == 1.0
    spread = float(w @ np.sum(e ** 2, axis=1) - np.sum((w @ e) ** 2))
    assert TH.quadratic_kappa2(H, e, w, 1.0) == pytest.approx(spread, rel=1e-12)


def test_theorem1_constants_with_a_last_entry_other_than_one():
    """Solvers with a within-round step-size schedule end on a_{i,-1} != 1. a = [2, 1/2], w = [1], tau_eff = 2.5:
    A = 1 * 2.5 * 4.25 / 6.25 = 1.7, B = 4.25 - 0.25 = 4, C = 6.25 - 2.5 * 0.5 = 5."""
    A, B, C = TH.theorem1_constants([1.0], [np.array([2.0, 0.5])], 2.5)
    assert (A, B, C) == pytest.approx((1.7, 4.0, 5.0), rel=1e-14)
    # against the definitions, on random non-negative a_i of random lengths
    rng = np.random.default_rng(11)
    a = [rng.uniform(0, 2, int(n)) for n in rng.integers(1, 8, 4)]
    w = rng.dirichlet(np.ones(4))
    A, B, C = TH.theorem1_constants(w, a, 3.0)
    l1 = np.array([v.sum() for v in a])
    l2 = np.array([v @ v for v in a])
    last = np.array([v[-1] for v in a])
    assert A == pytest.approx(4 * 3.0 * np.sum(w ** 2 * l2 / l1 ** 2), rel=1e-13)
    assert B == pytest.approx(np.sum(w * (l2 - last ** 2)), rel=1e-13)
    assert C == pytest.approx(np.max(l1 ** 2 - l1 * last), rel=1e-13)


@pytest.mark.parametrize("dim", [1, 2, None])
def test_server_momentum_round_map_is_heavy_ball_on_the_rounds(dim):
    """Iterate the augmented map and, by hand, s' = M s + b followed by x_{t+1} = x_t + D_t + beta (x_t - x_{t-1})
    on the first ``dim`` entries (D_t the round's change of them; the rest of s as the round leaves it)."""
    rng = np.random.default_rng(dim or 0)
    n, beta = 3, 0.6
    M, b = 0.4 * rng.standard_normal((n, n)), rng.standard_normal(n)
    k = n if dim is None else dim
    M2, b2 = TH.server_momentum_round_map(M, b, beta, dim)
    assert M2.shape == (n + k, n + k)
    s = rng.standard_normal(n)
    aug = np.concatenate([s, s[:k]])                 # x_{-1} = x_0
    prev = s[:k].copy()
    for _ in range(5):
        new = M @ s + b
        x_next = s[:k] + (new[:k] - s[:k]) + beta * (s[:k] - prev)
        prev, s = s[:k].copy(), np.concatenate([x_next, new[k:]])
        aug = M2 @ aug + b2
        np.testing.assert_allclose(aug, np.concatenate([s, prev]), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="dim"):
        TH.server_momentum_round_map(M, b, beta, 0)


def test_theorem2_bound_hand_value():
    # 2 [chi2 (beta2 - 1) + 1] g + 2 chi2 kappa2 = 2 (0.5 * 2 + 1) 4 + 2 * 0.5 * 2 = 18
    assert TH.theorem2_bound(0.5, 3.0, 2.0, 4.0) == pytest.approx(18.0)
    # chi2 = 0 (w = p): ||grad F||^2 <= 2 ||grad F~||^2 whatever beta2, kappa2
    assert TH.theorem2_bound(0.0, 7.0, 5.0, 1.5) == pytest.approx(3.0)


# ====================================================================== fedlib.theory, second pass
_ONE_STEP = dict(L=2.0, sigma2=1.0, beta2=1.0, kappa2=1.0, initial_gap=1.0, w=[1.0], a_vectors=[np.ones(1)])


def test_theorem1_explicit_bound_step_condition_boundary():
    """eta L tau_eff <= 1/2 is inclusive, with L and tau_eff both factors. One step (a = [1]): C = 0, so D = 0
    and only this condition can fail. lr = 1/16, L = 2, tau_eff = 4: eta L tau_eff = 1/2 exactly, accepted,
    with A = m tau_eff w^2 ||a||_2^2/||a||_1^2 = 4, B = C = 0: terms 4/(0.0625*4*1) = 16,
    4*0.0625*2*1*4/1 = 2, 0, 0."""
    got = TH.theorem1_explicit_bound(0.0625, 1, tau_eff=4.0, **_ONE_STEP)
    assert got == pytest.approx((16.0, 2.0, 0.0, 0.0), rel=1e-14, abs=0)
    with pytest.raises(ValueError, match="eta L tau_eff"):      # 0.075 * 2 * 4 = 0.6 > 1/2
        TH.theorem1_explicit_bound(0.075, 1, tau_eff=4.0, **_ONE_STEP)
    with pytest.raises(ValueError, match="eta L tau_eff"):      # the next float above 1/2
        TH.theorem1_explicit_bound(np.nextafter(0.0625, 1.0), 1, tau_eff=4.0, **_ONE_STEP)


def test_theorem1_explicit_bound_D_condition_uses_beta2():
    """D <= 1/(2 beta^2 + 1) with beta^2 = 2: 1/5. a = 1_3, w = [1], L = 1: C = 9 - 3 = 6, D = 24 lr^2.
    lr = 0.1: D = 0.24 > 0.2, refused (eta L tau_eff = 0.3 is fine); lr = 0.09: D = 0.1944 <= 0.2, accepted."""
    common = dict(L=1.0, sigma2=1.0, beta2=2.0, kappa2=1.0, initial_gap=1.0, w=[1.0], a_vectors=[np.ones(3)],
                  tau_eff=3.0)
    with pytest.raises(ValueError, match="D = 4"):
        TH.theorem1_explicit_bound(0.1, 10, **common)
    # accepted: A = 3 * 3/9 = 1, B = 3 - 1 = 2, C = 6; 4/(0.09*3*10), 4*0.09, 6*0.0081*2, 12*0.0081*6
    got = TH.theorem1_explicit_bound(0.09, 10, **common)
    assert got == pytest.approx((4 / 2.7, 0.36, 0.0972, 0.5832), rel=1e-12)


def test_theorem1_constants_refuses_an_all_zero_a():
    """||a_i||_1 = 0 (no gradient used at all) makes A = ||a||_2^2/||a||_1^2 undefined."""
    with pytest.raises(ValueError, match="positive entry"):
        TH.theorem1_constants([0.5, 0.5], [np.ones(2), np.zeros(3)], 2.0)
    # the neighbour a = [0, 1] (proximal SGD at alpha = 1) is fine: A = 1 * 1 * 1/1, B = 1 - 1, C = 1 - 1
    assert TH.theorem1_constants([1.0], [np.array([0.0, 1.0])], 1.0) == pytest.approx((1.0, 0.0, 0.0), abs=0)


def test_local_operator_defaults_are_plain_gradient_descent():
    """Defaults mu = 0, momentum = 0: K = eta sum_{k<tau} (I - eta H)^k, summed term by term here."""
    rng = np.random.default_rng(21)
    B = rng.standard_normal((3, 3))
    H, lr, tau = B @ B.T, 0.07, 6
    step, power, want = np.eye(3) - lr * H, np.eye(3), np.zeros((3, 3))
    for _ in range(tau):
        want += lr * power
        power = power @ step
    np.testing.assert_allclose(TH.quadratic_local_operator(H, tau, lr), want, rtol=1e-12, atol=1e-14)


def test_min_beta2_is_inf_when_the_weighted_hessian_cancels():
    """H_2 = -(3/7) H_1, w = (0.3, 0.7): sum_i w_i H_i = 0 in exact arithmetic (only rounding is left), while
    sum_i w_i H_i^2 = (0.3 + 0.7 * 9/49) H_1^2 != 0: no beta^2 bounds sum_i w_i ||H_i x||^2 by beta^2 * 0."""
    Q = _rotation(3, 1)
    H1 = Q @ np.diag([1.0, 2.0, 0.5]) @ Q.T
    assert TH.quadratic_min_beta2(np.array([H1, -(3 / 7) * H1]), [0.3, 0.7]) == float("inf")


@pytest.mark.parametrize("beta2", [1.5, 3.0])
def test_kappa2_is_homogeneous_and_rotation_invariant(beta2):
    """kappa^2 = sup_x [sum_i w_i ||H_i x - e_i||^2 - beta^2 ||H~ x - e~||^2]: scaling H_i, e_i by c scales it
    by c^2, rotating both leaves it. Two clients with a common null direction (the third coordinate; after the
    rotation it is null only up to rounding). The reference: the stationary point of the concave quadratic by
    least squares in the unrotated coordinates, the objective evaluated from its definition."""
    rng = np.random.default_rng(5)
    hs = np.array([[1.0, 2.0, 0.0], [3.0, 0.5, 0.0]])
    e = rng.standard_normal((2, 3))
    e[:, 2] = 0.0
    w = np.array([0.4, 0.6])
    H = np.array([np.diag(h) for h in hs])
    Hw, ew = np.tensordot(w, H, 1), w @ e

    def objective(x):
        return float(w @ np.sum((H @ x - e) ** 2, axis=1) - beta2 * np.sum((Hw @ x - ew) ** 2))

    # the gradient of the objective vanishes where (sum_i w_i H_i^2 - beta^2 Hw^2) x = sum_i w_i H_i e_i - beta^2 Hw ew
    grad_matrix = np.einsum("i,ijk,ikl->jl", w, H, H) - beta2 * Hw @ Hw
    grad_rhs = np.einsum("i,ijk,ik->j", w, H, e) - beta2 * Hw @ ew
    want = objective(np.linalg.lstsq(grad_matrix, grad_rhs, rcond=None)[0])
    Q = _rotation(3, 2)
    for c in (1.0, 1e3):
        Hc = np.array([c * Q @ np.diag(h) @ Q.T for h in hs])
        assert TH.quadratic_kappa2(Hc, c * e @ Q.T, w, beta2) == pytest.approx(c ** 2 * want, rel=1e-9)


def test_symmetry_check_is_relative_to_the_size_of_H():
    """An asymmetry of 1e-9 next to an entry of 1e6 is rounding (1e-15 relative): accepted, and the optimum
    is the solve with H as given."""
    H = np.array([[[1e6, 0.0], [1e-9, 1.0]]])
    e = np.array([[2e6, 3.0]])
    np.testing.assert_allclose(TH.quadratic_global_optimum(H, e, [1.0]), np.linalg.solve(H[0], e[0]), rtol=1e-14)
    with pytest.raises(ValueError, match="symmetric"):
        TH.quadratic_global_optimum(np.array([[[1e6, 0.0], [1.0, 1.0]]]), e, [1.0])


def test_shift_invert_refuses_every_eigenvalue_of_the_round_map():
    """sigma at each nonzero eigenvalue of the dense round map (numpy's, so exact up to rounding)."""
    q = random_quadratic(2, 2, seed=3, p=[0.4, 0.6])
    M, _ = TH.quadratic_vr_round_map(q.H, q.e, q.p, [2, 3], 0.05, "scaffold")
    ev = np.linalg.eigvals(M)
    ev = ev[np.abs(ev) > 1e-8]
    assert ev.size == 4
    for s in ev:
        with pytest.raises(ValueError, match="is an eigenvalue of the round map"):
            TH.quadratic_vr_shift_invert(q.H, q.p, [2, 3], 0.05, "scaffold", s.real if s.imag == 0 else s)


def test_count_outside_with_large_local_operators():
    """Long rounds on nearly flat directions: ||K_i|| ~ 1.7e3 (lr tau h << 1 gives K ~ lr tau). The count
    against every eigenvalue of the dense round map (moduli 0.9996, 0.9995, 0.994, then < 0.07)."""
    Q = _rotation(3, 4)
    H = np.array([Q @ np.diag([1e-6, 0.5, 1.0]) @ Q.T, Q @ np.diag([2e-6, 1.0, 0.3]) @ Q.T])
    p, steps = [0.5, 0.5], [3000, 5000]
    M, _ = TH.quadratic_vr_round_map(H, np.zeros((2, 3)), p, steps, 1.0, "fednova-vr")
    want = int(np.sum(np.abs(np.linalg.eigvals(M)) > 0.97))
    assert want == 3
    assert TH.quadratic_vr_count_outside(H, p, steps, 1.0, "fednova-vr", 0.97).outside == want


def test_count_outside_tolerances_are_relative_to_the_radius():
    """On |sigma| = 100 a point or pole 1e-14 (relative) off the circle is on it up to rounding."""
    H = [np.diag([1.0, 4.0])]                  # eigenvalues 0.9, 0.6, 0, 0: all inside radius 100
    r = 100.0
    with pytest.raises(ValueError, match="deflate"):
        TH.quadratic_vr_count_outside(H, [1.0], [1], 0.1, "scaffold", r, deflate=[r * (1 + 1e-14) * np.exp(0.3j)])
    assert TH.quadratic_vr_count_outside(H, [1.0], [1], 0.1, "scaffold", r, deflate=[1.5 * r]).outside == 0
    # d = 1, h = -200, two steps of lr 1: K = 1 + 201 = 202, ||a||_1 = 2, l = 101: the pole 1 - l = -100;
    # x+ = (1 + 202 * 200) x = 40401 x, the variate's eigenvalue is 0
    with pytest.raises(ValueError, match="a pole of the determinant"):
        TH.quadratic_vr_count_outside([[[-200.0]]], [1.0], [2], 1.0, "scaffold", r * (1 + 1e-14))
    assert TH.quadratic_vr_count_outside([[[-200.0]]], [1.0], [2], 1.0, "scaffold", 2 * r).outside == 1


def test_count_outside_max_phase_step_limit_is_inclusive():
    H = [np.diag([1.0, 4.0])]                  # eigenvalues 0.9 | 0.6, 0, 0 around radius 0.7
    assert TH.quadratic_vr_count_outside(H, [1.0], [1], 0.1, "scaffold", 0.7, max_phase_step=1.5).outside == 1
    with pytest.raises(ValueError, match="at most 1.5"):
        TH.quadratic_vr_count_outside(H, [1.0], [1], 0.1, "scaffold", 0.7, max_phase_step=np.nextafter(1.5, 2.0))


def test_count_outside_progress_bar(monkeypatch):
    """No bar by default; progress=True: one bar whose updates fill its total exactly, 1000 per mille of the half
    circle (it used to end at 999 when rounding left theta just below pi)."""
    bars = []

    class FakeBar:
        def __init__(self, total, **kwargs):
            self.total, self.updates, self.closed = total, [], False
            bars.append(self)

        def update(self, n):
            self.updates.append(n)

        def close(self):
            self.closed = True

    monkeypatch.setattr("tqdm.auto.tqdm", FakeBar)
    H = [np.diag([1.0, 4.0])]
    assert TH.quadratic_vr_count_outside(H, [1.0], [1], 0.1, "scaffold", 0.7).outside == 1
    assert bars == []
    assert TH.quadratic_vr_count_outside(H, [1.0], [1], 0.1, "scaffold", 0.7, progress=True).outside == 1
    (bar,) = bars
    assert bar.total == 1000 and sum(bar.updates) == 1000 and min(bar.updates) >= 0 and bar.closed


def test_leading_eigenvalues_default_tolerance_by_arpack():
    """601 rows (ARPACK): the default relative tolerance 1e-6 against numpy's dense eigenvalues of a random
    matrix (the top of its spectrum is a crowded circle of radius ~1, where a loose tolerance shows)."""
    from scipy.sparse.linalg import aslinearoperator

    A = np.random.default_rng(0).standard_normal((601, 601)) / np.sqrt(601)
    every = np.linalg.eigvals(A)
    top = every[np.argmax(np.abs(every))]
    got = TH.leading_eigenvalues(aslinearoperator(A))
    assert got.shape == (1,) and abs(got[0] - top) <= 1e-6 * abs(top)


def test_leading_eigenvalues_dense_up_to_600_rows_arpack_above():
    """Up to 600 rows the operator is formed (any k up to n); above, ARPACK, which needs k < n - 1 and a
    Krylov space of more than k + 1 vectors (k = 301 of 601 rows)."""
    from scipy.sparse.linalg import aslinearoperator

    d = np.linspace(1.0, 2.0, 601) * np.where(np.arange(601) % 2, 1.0, -1.0)   # distinct moduli
    order = np.argsort(-np.abs(d))
    got = TH.leading_eigenvalues(aslinearoperator(np.diag(d[:600])), k=599)
    np.testing.assert_allclose(got, d[:600][np.argsort(-np.abs(d[:600]))][:599], rtol=1e-14)
    op = aslinearoperator(np.diag(d))
    got = TH.leading_eigenvalues(op, k=301)
    np.testing.assert_allclose(np.abs(got), np.abs(d[order[:301]]), rtol=1e-10)
    with pytest.raises(ValueError, match="below 600"):
        TH.leading_eigenvalues(op, k=600)


def test_leading_eigenvalues_names_a_non_square_M():
    """The library's own message (naming M), not numpy's LinAlgError."""
    with pytest.raises(ValueError, match="^M must be square"):
        TH.leading_eigenvalues(np.ones((2, 3)))


def test_kappa2_at_the_smallest_beta2_needs_b_in_the_range_of_Q():
    """H_1 = I, H_2 = diag(3, 1), w = (1/2, 1/2): beta^2 = 1.25 makes Q_11 = 5 - 1.25 * 4 = 0 exactly.
    e = ((1, 0), (3, 0)): the gradients are (x1 - 1, x2) and (3 (x1 - 1), x2), so the bracket is
    5 (x1-1)^2 + x2^2 - 1.25 (4 (x1-1)^2 + x2^2) = -x2^2 / 4, whose sup is 0.
    e = ((1, 0), (0, 0)): the bracket is 1.5 x1 + 0.1875 - x2^2 / 4, unbounded in x1: kappa^2 is infinite."""
    H = np.array([np.eye(2), np.diag([3.0, 1.0])])
    assert TH.quadratic_kappa2(H, [[1.0, 0.0], [3.0, 0.0]], [0.5, 0.5], 1.25) == pytest.approx(0.0, abs=1e-15)
    with pytest.raises(ValueError, match="infinite"):
        TH.quadratic_kappa2(H, [[1.0, 0.0], [0.0, 0.0]], [0.5, 0.5], 1.25)


# --------------------------------------------------------- theory, App. G's conditions: mutants of 8bd9827..
def test_appg_first_condition_holds_at_equality():
    """eta L <= 1/(2 tau_eff): with tau_eff = 2, L = 1, eta = 1/4, 2 tau_eff eta L = 1 exactly: met."""
    from fedlib.theory import appg_step_conditions

    c = appg_step_conditions(0.25, 1.0, 1.0, 1, 2.0, [[1.0]])
    assert c.first == 1.0 and c.first_holds
    assert c.second == 6.0 and not c.second_holds  # 6 * 2 * 0.25 * (1 + 1/1) = 6 > 1/2
    assert not appg_step_conditions(0.25 * (1 + 1e-9), 1.0, 1.0, 1, 2.0, [[1.0]]).first_holds


@pytest.mark.parametrize("value", ["ab", b"\x01\x02"])
def test_appg_refuses_a_string_of_a_vectors_by_name(value):
    """A str or bytes is iterable (bytes into small integers) but is not one vector per client."""
    from fedlib.theory import appg_max_lr

    with pytest.raises(ValueError, match=r"^a_vectors must be a sequence of one vector per client, got "):
        appg_max_lr(1.0, 1.0, 1, 1.0, value)


# ------------------------------------------------------------------------ mutants of 37f92d9..28127ce (third)
def test_fixed_point_refuses_a_round_map_whose_offset_overflows():
    """_check_finite_round_map refuses a map with a non-finite offset b, not only a non-finite M (mutant TH11,
    ``np.isfinite(M).all() and np.isfinite(b).all()`` -> ``np.isfinite(M).all()``: the fixed point came back as
    [inf]). One client H = 1e-3, e = 1e306, lr = 1, 1000 local steps: K = sum_{k<1000} 0.999^k = 1000 (1 - 0.999^1000)
    ~ 632, so M = 1 - K H ~ 0.37 is finite (and contracts) while b = K e ~ 6.3e308 is past float64's 1.8e308."""
    H, e = np.array([[[1e-3]]]), np.array([[1e306]])
    with np.errstate(over="ignore"):
        M, b = TH.quadratic_round_map(H, e, [1.0], [1000], 1.0, "fedavg")
        assert M[0, 0] == pytest.approx(0.999 ** 1000, rel=1e-9) and np.isinf(b).all()
        # the message names e, not lr: the map contracts, only the offset is past float64
        with pytest.raises(ValueError, match=r"^e: the round map's offset sum_i p_i K_i e_i overflows float64 \(its "
                                             r"linear part is finite\)"):
            TH.quadratic_fixed_point(H, e, [1.0], [1000], 1.0, "fedavg")


def test_vr_count_outside_refuses_a_progress_that_is_no_bool():
    """quadratic_vr_count_outside's ``progress`` is True or False: the string 'no' (truthy) is refused by name
    (mutant TH15, its check_flag dropped: 'no' drew a progress bar)."""
    H = np.array([np.eye(2), 2 * np.eye(2)])
    with pytest.raises(ValueError, match="^progress must be True or False"):
        TH.quadratic_vr_count_outside(H, [0.5, 0.5], [1, 2], 0.1, "scaffold", radius=1.0, progress="no")


# ------------------------------------------------------------------------ mutants of 8fc7fcd..0bee57f
def test_chi_square_keeps_a_finite_value_just_below_the_float64_maximum():
    """chi_square refuses only an infinite sum, not a large finite one (mutant CS6, ``chi2 == np.inf`` -> ``chi2 >
    1e308``). p = (1/2, 1/2), w = (1, 1.6e-309) (a subnormal; the sum is 1.0 in float64): d_1 / w_1 = 3.1e308
    overflows, so the term is d_1^2 / w_1 = 0.25 / 1.6e-309 = 1.5625e308, finite; the exact sum, in Fraction of
    the floats given, is 0.25 + (1/2 - w_1)^2 / w_1 ~ 1.5625e308."""
    from fractions import Fraction

    p, w = [0.5, 0.5], [1.0, 1.6e-309]
    exact = sum((Fraction(a) - Fraction(b)) ** 2 / Fraction(b) for a, b in zip(p, w))
    assert 1e308 < float(exact) < 1.7e308
    assert TH.chi_square(p, w) == pytest.approx(float(exact), rel=1e-14, abs=0.0)


def test_chi_square_of_huge_terms_raises_no_runtime_warning(capfd):
    """A term whose d_i / w_i overflows (then d_i^2 / w_i) is summed without numpy's overflow RuntimeWarning, and a
    sum beyond float64 is the ValueError alone (before 8fc7fcd: inf with a RuntimeWarning). Mutant CS5 of
    8fc7fcd..0bee57f (the errstate around _chi_square in chi_square dropped: 'overflow encountered in divide' on the
    way to a finite 1e300, and the fallback d^2 / w = 0.25 / 1e-310 overflows with a warning), a RuntimeWarning
    raised here. Expected values: the sum in Fraction of the floats given (~1e300: w_2 = 1e-320 is
    a subnormal, 9.99989e-321).
    Nothing is printed either (capfd): numpy's errstate(..., "print") (mutants EP15, EP16 of the negative-assertion
    pass)
    writes its 'Warning: ...' to the C stderr, which the warnings filter does not see, and passed before."""
    import warnings
    from fractions import Fraction

    p, w = [0.5, 0.5 - 1e-10, 1e-10], [0.5, 0.5, 1e-320]
    exact = sum((Fraction(a) - Fraction(b)) ** 2 / Fraction(b) for a, b in zip(p, w))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert TH.chi_square(p, w) == pytest.approx(float(exact), rel=1e-14, abs=0.0)
        with pytest.raises(ValueError, match=r"^w: chi-square overflows float64"):
            TH.chi_square([0.5, 0.5], [1.0, 1e-310])
    assert capfd.readouterr() == ("", "")


def test_a_rounds_chi_square_with_an_overflowing_ratio_raises_no_runtime_warning(capfd):
    """A round's chi^2 (_round_chi_square, which every round of FederatedAlgorithm.apply computes) calls _chi_square
    without chi_square's errstate: a term whose d_i / w_i overflows while d_i^2 / w_i is finite is summed without
    numpy's 'overflow encountered in divide' (mutant CS4 of 8fc7fcd..0bee57f, the errstate around d * (d / w)
    dropped; through chi_square the outer errstate hides it). omega = (1/2, 1/2 - 2^-30, 2^-30), w = (1/2, 1/2,
    2^-1064), both of sum 1 in float64: d_3 / w_3 ~ 2^1034 overflows, d_3^2 / w_3 ~ 2^1004 does not; expected: the sum
    in Fraction of those floats.
    Nothing is printed either (capfd): numpy's errstate(..., "print") (mutant EP15 of the negative-assertion pass)
    writes its 'Warning: ...' to the C stderr, which the warnings filter does not see, and passed before."""
    import warnings
    from fractions import Fraction

    omega, w = np.array([0.5, 0.5 - 2.0 ** -30, 2.0 ** -30]), np.array([0.5, 0.5, 2.0 ** -1064])
    exact = sum((Fraction(a) - Fraction(b)) ** 2 / Fraction(b) for a, b in zip(omega.tolist(), w.tolist()))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert TH._round_chi_square(omega, w) == pytest.approx(float(exact), rel=1e-14, abs=0.0)
    assert capfd.readouterr() == ("", "")


def test_a_rounds_chi_square_beyond_float64_is_inf_without_a_warning(capfd):
    """omega = (1/2, 1/2), w = (1, 1e-310) (sum 1 in float64): the second term (1/2)^2 / 1e-310 = 2.5e309 is beyond
    float64. A round records it as inf, silently (before: numpy's 'overflow encountered in divide' from the second
    try, d^2 / w, every such round); chi_square itself still refuses it.
    Nothing is printed either (capfd): numpy's errstate(..., "print") (mutant EP16 of the negative-assertion pass)
    writes its 'Warning: ...' to the C stderr, which the warnings filter does not see, and passed before."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert TH._round_chi_square(np.array([0.5, 0.5]), np.array([1.0, 1e-310])) == np.inf
    assert capfd.readouterr() == ("", "")
    with pytest.raises(ValueError, match=r"^w: chi-square overflows float64"):
        TH.chi_square([0.5, 0.5], [1.0, 1e-310])


@pytest.mark.parametrize("t1,t2", [(3, 11), (5, 7), (10 ** 15 + 1, 10 ** 15 + 2), (10 ** 15 + 2, 10 ** 15 + 5)])
def test_two_client_chi_square_is_correctly_rounded(t1, t2):
    """App. D.1's chi^2 = (tau_2 - tau_1)^2 / (4 tau_1 tau_2) is the float64 nearest the exact fraction (one
    integer division, correctly rounded, as its comment says), not within an ulp of it. Mutants TW3 (``/ 4 / t1 /
    t2``: three roundings; (3, 11) gives 64/132's neighbour) and TW4 (in floats: ``float(t2 - t1) ** 2 / (4.0 * t1 *
    t2)``, 4 tau_1 tau_2 ~ 4e30 rounded first; (1e15 + 1, 1e15 + 2) is an ulp off); both within the 1e-15 of
    tests/test_theory.py. Expected: float(Fraction), correctly rounded."""
    from fractions import Fraction

    assert TH.two_client_lower_bound(t1, t2).chi2 == float(Fraction((t2 - t1) ** 2, 4 * t1 * t2))


def test_lemma1_fixed_point_at_lr_one_raises_no_runtime_warning(capfd):
    """lr = 1: K_i = 1 - 0^tau_i = 1 for every tau_i, so the limit is sum_i p_i e_i = 0.25 - 0.75 = -0.5, and the
    log1p(lr - 2) = log1p(-1) = -inf of the even branch is taken without numpy's divide-by-zero RuntimeWarning.
    Mutants LM5 (``lr < 1`` -> ``lr <= 1``: -expm1(tau log1p(-1)) = 1 alike, with the warning) and LM6 (the errstate
    around the np.where dropped).
    Nothing is printed either (capfd): numpy's errstate(..., "print") (mutant EP20 of the negative-assertion pass)
    writes its 'Warning: ...' to the C stderr, which the warnings filter does not see, and passed before."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = TH.lemma1_fixed_point([[1.0], [-1.0]], [0.25, 0.75], [2, 3], 1.0)
    assert capfd.readouterr() == ("", "")
    assert x.tolist() == [-0.5]


# ------------------------------------------------------------------------ mutants of 113f0d3..a655138
@pytest.mark.parametrize("lr", [1e-17, 1e-20])
def test_fixed_point_at_an_lr_that_leaves_the_round_map_the_identity(lr):
    """H = (1, 2), e = (1, 1), p = (1/2, 1/2), tau = (1, 3): at these lr the round map's M is exactly 1 in float64
    (I - M = 0), while A = sum_i p_i K_i H_i ~ 3.5 lr is not: the rounds contract, slowly, to the point, which is
    solved from A. Mutant FP3 of 113f0d3..a655138 (the uniqueness check on I - M again: 'singular'); the d = 3 case of
    tests/test_theory.py at 1e-17 leaves M a rounding away from I, which passes a relative rank test. Expected: the
    point in Fraction of the floats, sum_i p_i K_i e_i / sum_i p_i K_i H_i with K_i H_i = 1 - (1 - lr h_i)^tau_i
    (~ 4/7)."""
    from fractions import Fraction

    H, e, p, steps = [[[1.0]], [[2.0]]], [[1.0], [1.0]], [0.5, 0.5], [1, 3]
    M, _ = TH.quadratic_round_map(H, e, p, steps, lr, "fedavg")
    assert M.tolist() == [[1.0]]
    eta = Fraction(lr)
    kh = [1 - (1 - eta * h) ** tau for h, tau in ((1, 1), (2, 3))]
    exact = (kh[0] / 1 + kh[1] / 2) / (kh[0] + kh[1])  # p_i = 1/2 cancels; K_i e_i = K_i H_i / h_i with e_i = 1
    assert TH.quadratic_fixed_point(H, e, p, steps, lr, "fedavg")[0] == pytest.approx(float(exact), rel=1e-15,
                                                                                       abs=0.0)


@pytest.mark.parametrize("H, steps, lr, radius", [
    ([[[1.0]]], [1], 2.0, "1"),                             # A = lr h = 2: M = -1, on the boundary
    ([np.diag([1.0, 6.0])], [1], 0.5, "2"),                 # A = diag(0.5, 3): M = diag(0.5, -2)
    ([np.diag([1.0, 0.1])], [2], 3.0, "4"),                 # A = 1 - (1 - 3 h)^2 = diag(-3, 0.51): M = diag(4, 0.49)
])
def test_fixed_point_refuses_a_round_map_leaving_the_unit_disc_either_side(H, steps, lr, radius):
    """One client, d = 1 or 2, K H = 1 - (1 - lr h)^tau by hand: the rounds contract iff every eigenvalue of A lies in
    (0, 2), and the message gives the radius max |1 - lambda(A)| (checked against numpy's eigenvalues of M). Mutants
    of 113f0d3..a655138: FP5 (``lam[-1] < 2`` -> ``<= 2``: A = 2 accepted), FP7 (the upper bound dropped: M = -2
    accepted), FP8 (the radius from min |1 - lambda|: '0.5'), FP10 (the lower bound read from the largest eigenvalue:
    A = diag(-3, 0.51) accepted), FP11 (the radius max |lambda(A)|: '3')."""
    M, _ = TH.quadratic_round_map(H, np.ones((1, len(H[0]))), [1.0], steps, lr, "fedavg")
    assert f"{np.max(np.abs(np.linalg.eigvals(M))):.4g}" == radius
    with pytest.raises(ValueError, match=rf"^lr: the rounds do not converge \(spectral radius of the round map "
                                         rf"{radius} >= 1\)$"):
        TH.quadratic_fixed_point(H, np.ones((1, len(H[0]))), [1.0], steps, lr, "fedavg")


@pytest.mark.parametrize("algorithm, mu, momentum", [("fedavg", 0.0, 0.0), ("fedprox", 0.3, 0.0),
                                                     ("fedavg", 0.0, 0.5)])
def test_round_map_subtracts_each_clients_term_from_the_identity_in_turn(algorithm, mu, momentum):
    """quadratic_round_map's M is I - p_1 K_1 H_1 - p_2 K_2 H_2 - p_3 K_3 H_3, subtracted client by client, bit for bit
    (184e6fee kept it so while summing A apart for the fixed point: the committed figures iterate M). Mutant FP18 of
    113f0d3..a655138: M = I - A after the loop (the same to rounding, other bits). Expected: a plain loop over
    quadratic_local_operator."""
    rng = np.random.default_rng(3)
    m, d = 3, 3
    H = np.array([q @ q.T / d + 0.2 * np.eye(d) for q in rng.standard_normal((m, d, d))])
    e, p, steps, lr = rng.standard_normal((m, d)), np.array([0.2, 0.3, 0.5]), [2, 5, 9], 0.05
    M, _ = TH.quadratic_round_map(H, e, p, steps, lr, algorithm, mu=mu, momentum=momentum)
    want = np.eye(d)
    for i in range(m):
        want = want - (p[i] * TH.quadratic_local_operator(H[i], steps[i], lr, mu, momentum)) @ H[i]
    assert np.array_equal(M, want)


def test_slowdown_up_to_the_largest_float64_is_returned():
    """Only a slowdown beyond float64 is refused. tau_bar = 3, tau_eff = 2e-308: 1.5e308, finite (mutant SL2 of
    113f0d3..a655138, ``ratio == inf`` -> ``ratio > 1e308``); tau_bar = 2^53 - 1, tau_eff = 2^-971: exactly the
    largest float64, (2^53 - 1) 2^971 (mutant SL3, ``ratio >= finfo.max``). Expected: Fraction, correctly rounded."""
    from fractions import Fraction

    assert TH.slowdown([3], 2e-308) == float(Fraction(3) / Fraction(2e-308))
    assert TH.slowdown([2 ** 53 - 1], 2.0 ** -971) == float((2 ** 53 - 1) * Fraction(2) ** 971) \
        == np.finfo(np.float64).max


def test_fixed_point_names_h_where_the_small_lr_limit_is_singular_too():
    """Noted by the 8996bdf pass: H = (1, -1), p = (1/2, 1/2), tau = (1, 1) gives K_i = lr, so sum_i c_i K_i H_i =
    lr (1/2 - 1/2) = 0 at every lr (FedAvg and FedNova alike), yet the message named lr ('singular at this lr');
    and H_1 = diag(1, 0), H_2 = diag(0, 1e-13), p = (0.999, 0.001), tau = (1, 1), lr = 0.5: A = diag(0.4995,
    5e-17), singular at numpy's tolerance, as is its small-lr limit sum_i p_i ||a_i||_1 H_i = diag(0.999, 1e-16).
    Now both name H (the small-lr limit sum_i c_i ||a_i||_1 H_i is singular); H = (1, -1) with tau = (2, 1) at
    lr = 1, singular at that lr only (limit 0.5 * 2 - 0.5 = 0.5), still names lr."""
    said = r"^H: sum_i c_i K_i H_i is singular at this lr, and so is its small-lr limit sum_i c_i \|\|a_i\|\|_1 H_i"
    for algorithm in ("fedavg", "fednova"):
        with pytest.raises(ValueError, match=said):
            TH.quadratic_fixed_point([[[1.0]], [[-1.0]]], np.ones((2, 1)), [0.5, 0.5], [1, 1], 0.3, algorithm)
    with pytest.raises(ValueError, match=said):
        TH.quadratic_fixed_point([np.diag([1.0, 0.0]), np.diag([0.0, 1e-13])], np.ones((2, 2)), [0.999, 0.001],
                                 [1, 1], 0.5, "fedavg")
    with pytest.raises(ValueError, match=r"^lr: the rounds do not converge \(the round map has the eigenvalue 1"):
        TH.quadratic_fixed_point([[[1.0]], [[-1.0]]], np.ones((2, 1)), [0.5, 0.5], [2, 1], 1.0, "fedavg")
    # the small-lr limit's weights c_i ||a_i||_1 (mutants SL2, SL5 of the 61d072d..a064864 pass): FedNova's are
    # p_i (tau_eff aside), so H = (1, -1), tau = (2, 1) cancel for FedNova (sum_i p_i H_i = 0; A = -0.375 lr^2
    # rounds to 0 at lr = 1e-17) though sum_i p_i ||a_i||_1 H_i = 0.5 does not (SL2 weighted FedNova by ||a_i||_1
    # too: named lr); with local momentum 0.5, ||a_i||_1 = (1 + 1.5, 1) = (2.5, 1), not tau_i = (2, 1): FedAvg's
    # H_1 = I, H_2 = diag(0, -2.5) cancel along x_2 (0.5 * 2.5 - 0.5 * 2.5 = 0) where tau_i's weights would not
    # (1 - 1.25; SL5 used tau_i: named lr)
    with pytest.raises(ValueError, match=said):
        TH.quadratic_fixed_point([[[1.0]], [[-1.0]]], np.ones((2, 1)), [0.5, 0.5], [2, 1], 1e-17, "fednova")
    with pytest.raises(ValueError, match=said):
        TH.quadratic_fixed_point([np.eye(2), np.diag([0.0, -2.5])], np.ones((2, 2)), [0.5, 0.5], [2, 1], 1e-17,
                                 "fedavg", momentum=0.5)


# ---------------------------------------------------- mutants of the 8996bdf pass (37d4fb6: the singular message)
def test_fixed_point_names_lr_when_no_null_direction_is_shared_by_all_the_clients_that_count():
    """quadratic_fixed_point names H only where the H_i of the clients with p_i > 0 share a null direction (their
    stack has a null vector), checked over every such client, not the first, and not on a sum of the H_i. By hand,
    FedAvg (c_i = p_i): H = (1, -1) (no shared null direction; they sum to 0), tau = (2, 1), lr = 1: K_1 H_1 =
    1 - (1 - 1)^2 = 1, K_2 H_2 = 1 - (1 + 1) = -1, so A = 0.5 - 0.5 = 0 at this lr only (lr = 0.5 gives
    0.5 (0.75 - 0.5) = 0.125). H_1 = diag(1, 0), H_2 = diag(0, 1), tau = (2, 1), lr = 2: client 1 comes back to its
    start along x_1 ((1 - 2)^2 = 1), which client 2 does not move: A = diag(0, 0.5 * 2); H_1 alone has a null
    direction that H_2 does not. Mutants of the 8996bdf pass: FS5 (the rank of sum_i H_i), FS7 (the first client's
    H_i only), FS12 (the rank of sum_i p_i H_i)."""
    lr_named = r"^lr: the rounds do not converge \(the round map has the eigenvalue 1: sum_i c_i K_i H_i is singular"
    for H, lr in (([[[1.0]], [[-1.0]]], 1.0), ([np.diag([1.0, 0.0]), np.diag([0.0, 1.0])], 2.0)):
        d = np.shape(H)[1]
        with pytest.raises(ValueError, match=lr_named):
            TH.quadratic_fixed_point(H, np.ones((2, d)), [0.5, 0.5], [2, 1], lr, "fedavg")
    M, b = TH.quadratic_round_map([[[1.0]], [[-1.0]]], [[1.0], [1.0]], [0.5, 0.5], [2, 1], 0.5, "fedavg")
    assert float(1 - M[0, 0]) == 0.125


def test_theorem1_max_beta2_with_c_zero_is_unbounded_however_large_eta_l():
    """TD1: D = 4 eta^2 L^2 C is 0 where C = 0, whatever eta L, so no beta^2 bound (inf), even where (eta L)^2 is
    beyond float64 (eta = L = 1e160: (eta L)^2 = 1e640): inf * 0 there gave NaN, and max(1, NaN) = 1."""
    assert TH.theorem1_max_beta2(1e160, 1e160, 0.0) == float("inf")
    assert TH.theorem1_max_beta2(0.1, 1.0, 0.0) == float("inf")


def test_assumption3_constants_of_quadratics_near_the_top_of_float64():
    """TD10: the scale divided out is a power of two at most max|H| (2**1023 for max|H| = 1.5e308); 2**1024, above
    it, is beyond float64 (an OverflowError). H = (1, 3) * 0.5e308, e = (2, 0), w = (1/2, 1/2): beta^2_min = 5/4 and
    kappa^2 at beta^2 = 2 is 3 by hand (tests/test_theory.py's test_assumption3_constants_of_huge_or_tiny_quadratics),
    whatever H's scale; e = (1.5e308, 0), scaled the same way, gives kappa^2 = 3 * (1.5e308 / 2)^2, beyond float64:
    the ValueError naming e."""
    H, e, w = np.array([[[1.0]], [[3.0]]]) * 0.5e308, np.array([[2.0], [0.0]]), [0.5, 0.5]
    assert TH.quadratic_min_beta2(H, w) == pytest.approx(1.25, rel=1e-14)
    assert TH.quadratic_kappa2(H, e, w, 2.0) == pytest.approx(3.0, rel=1e-14)
    with pytest.raises(ValueError, match=r"^e: kappa\^2 exceeds float64 \(an entry of e of 1\.5e\+308"):
        TH.quadratic_kappa2(H, np.array([[1.5e308], [0.0]]), w, 2.0)


def test_theorem1_constants_B_weighs_a_head_before_scaling_it_back():
    """B = sum_i w_i ||a_i's head||^2 where a head's squared norm lies past float64 but its weighted share does not:
    ||(2e154)||^2 = 4e308 > 1.8e308, w_0 4e308 = 1e308, so B is that finite number rounded (C = ||a_0||_1 times the
    head's sum, 4e308, is inf as its exact value is). Mutant of c5aa211..361d535: TH10 (w_i applied after the scale
    is put back: inf)."""
    import math
    from fractions import Fraction

    w, a = [0.25, 0.75], [np.array([2e154, 1.0]), np.array([1.0, 2.0])]
    _, B, C = TH.theorem1_constants(w, a, 1.0)
    exact = Fraction(0.25) * Fraction(2e154) ** 2 + Fraction(0.75) * 1
    assert math.isfinite(B) and B == pytest.approx(float(exact), rel=1e-15, abs=0)
    assert C == math.inf


# ====================================================================== 41ab8e8.. (the 40-digit decimal checks)
def _round_fraction(x) -> float:
    """The Fraction ``x`` >= 0 rounded to float64 once (Fraction.__float__ rounds correctly), inf past its range."""
    try:
        return float(x)
    except OverflowError:
        return float("inf")


def _fraction_sqrt(x):
    """sqrt(x) of a Fraction x > 0 to a relative 2^-120 (math.isqrt of x scaled by a power of four)."""
    import math
    from fractions import Fraction

    bits = max(0, (x.denominator.bit_length() - x.numerator.bit_length()) // 2) + 120
    return Fraction(math.isqrt(x.numerator * 4 ** bits // x.denominator), 2 ** bits)


@pytest.mark.parametrize("lr, L, tau_eff", [(1e10, 1e-300, 1e300), (1e-300, 1e300, 1e-300)])
def test_appg_first_and_second_where_float64_products_over_or_underflow_are_the_values_rounded(lr, L, tau_eff):
    """App. G's first and second quantities, 2 tau_eff eta L and 6 tau_eff eta L (1 + beta^2/q), are the exact values
    rounded where float64's left-to-right product leaves its range: 2 * 1e300 * 1e10 is inf before L = 1e-300 brings
    it back (2e10 exactly, 6e10 * 1.75 = 1.05e11 for beta^2 = 3, q = 4), 2 * 1e-300 * 1e-300 is 0 before L = 1e300
    (2e-300; 1.05e-299). The unchecked products gave inf and 0 (mutants AS1, AS3)."""
    from fractions import Fraction as F

    c = TH.appg_step_conditions(lr, L, 3.0, 4, tau_eff, [[1.0, 1.0]])
    first = 2 * F(tau_eff) * F(lr) * F(L)
    assert c.first == pytest.approx(float(first), rel=1e-14, abs=0)
    assert c.second == pytest.approx(float(3 * first * (1 + F(3, 4))), rel=1e-14, abs=0)
    assert c.first_holds == (first <= 1) and c.second_holds == (3 * first * F(7, 4) <= 1)


@pytest.mark.parametrize("lr, entry", [(1e-250, 1e200), (1e150, 1e-200)])
def test_appg_d_where_c_leaves_float64_is_the_value_rounded(lr, entry):
    """App. G's D = 4 (eta L)^2 C with C = ||a||_1 (||a||_1 - a_-1) itself beyond float64: a = (1e200, 1e200) gives
    C = 2e400 (inf in float64), a = (1e-200, 1e-200) C = 2e-400 (0 in float64), and with lr = 1e-250 and 1e150 (L =
    1) D is 4e-500 * 2e400 = 8e-100 and 4e300 * 2e-400 = 8e-100, which holds (<= 1/13). D from the float C gave inf
    and 0 (mutants AS4, SD3, SD5: _step_d given the float C only; SD2: C == 0 tested on the float)."""
    from fractions import Fraction as F

    c = TH.appg_step_conditions(lr, 1.0, 1.0, 4, 1.0, [[entry, entry]])
    want = 4 * F(lr) ** 2 * (2 * F(entry)) * F(entry)
    assert c.D == pytest.approx(float(want), rel=1e-14, abs=0) and c.D_holds


def test_decimal_checked_results_beyond_float64_raise_no_warning(capfd):
    """Where float64's intermediates leave its range, theorem1_bound, appg_max_lr and appg_step_conditions give the
    values rounded without a numpy RuntimeWarning: inf / inf in theorem1_bound's first term (tau_bar / tau_eff =
    1e310 over sqrt(1e320)), a sum of a_i's entries beyond float64 (three entries of 1e308), and 1 / 0 where 2 L
    sqrt((12 beta^2 + 1) C) underflows (L = 1e-300, C = 2e-100: appg_max_lr is then its second bound, 1 / (12 * 1e-300
    * 1.25) = 6.67e298). Mutants TB9, AI1, AM3 drop the errstate that keeps them quiet.
    Nothing is printed either (capfd): numpy's errstate(..., "print") (mutants EP17, EP18, EP19 of the
    negative-assertion pass) writes its 'Warning: ...' to the C stderr, which the warnings filter does not see, and
    passed before."""
    import warnings
    from fractions import Fraction as F

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        terms = TH.theorem1_bound(1, 1e300, 10 ** 20, 1e-10, 1e300, 1e300, 1e300)
        big = TH.appg_max_lr(1.0, 1.0, 4, 1.0, [[1e308, 1e308, 1e308]])
        small = TH.appg_max_lr(1e-300, 1.0, 4, 1.0, [[1e-50, 1e-50]])
    assert capfd.readouterr() == ("", "")
    # 1e300 / 1e-10 / sqrt(1e320) = 1e150; C = (3 * 1e308)(2 * 1e308) = 6e616: the third bound 1 / (2 sqrt(13 C)),
    # 5.66e-310, below the second, 1 / (12 * 1.25)
    assert terms.slowdown_term == pytest.approx(1e150, rel=1e-14, abs=0)
    assert big == _round_fraction(1 / (2 * _fraction_sqrt(13 * (3 * F(1e308)) * (2 * F(1e308)))))
    assert small == pytest.approx(float(1 / (12 * F(1e-300) * F(5, 4))), rel=1e-14, abs=0)


def test_values_the_decimals_take_over_are_correctly_rounded():
    """Where float64's intermediates leave its range, the 40-digit decimals give the exact value rounded once to
    float64 (the same float as the exact rational value rounded; 40 digits leave a double rounding only within
    1e-40 of a tie): theorem1_bound's four terms at T = 1e400 and at a subnormal tau_eff, appg_max_lr's two bounds,
    App. G's D and the explicit bound's terms at lr = tau_eff = 1e-200. 16 digits (mutant DC1) are off in the last
    bit. (a_i's sums are float64's where finite: the cases' sums are exact.)"""
    from fractions import Fraction as F

    def bound_exact(m, tau_bar, T, tau_eff, A, B, C):
        tau_bar, tau_eff, A, B, C = map(F, (tau_bar, tau_eff, A, B, C))
        s = _fraction_sqrt(m * tau_bar * T)
        return tuple(map(_round_fraction, (tau_bar / tau_eff / s, A / s, m * B / (tau_bar * T),
                                           m * C / (tau_bar * T))))

    # every term from the decimals at T = 1e400 (OverflowError) and at m tau_bar T = 7e320 (inf); the first alone at
    # tau_eff = 1e-320 (tau_bar / tau_eff inf), the other three there are float64's, a few ulps off
    for args, terms in [((3, 7.0, 10 ** 400, 1.0, 3.0, 5.0, 11.0), 4), ((4, 3.0, 10 ** 40, 1e-320, 1.0, 1.0, 1.0), 1),
                        ((7, 1e300, 10 ** 20, 3e-10, 1e300, 3e299, 7e299), 4)]:
        assert tuple(TH.theorem1_bound(*args))[:terms] == bound_exact(*args)[:terms], args
    for L, beta2, q, tau_eff, a in [(1e-300, 3.0, 7, 1e-300, [1.0, 3.0]), (3.0, 5.0, 3, 7.0, [1e200, 1e200]),
                                    (1e300, 1.0, 4, 1e10, [1.0, 1.0])]:
        C = sum(map(F, a)) * sum(map(F, a[:-1]))
        want = min(1 / (12 * F(tau_eff) * F(L) * (1 + F(beta2) / q)),
                   1 / (2 * F(L) * _fraction_sqrt((12 * F(beta2) + 1) * C)))
        assert TH.appg_max_lr(L, beta2, q, tau_eff, [a]) == _round_fraction(want), (L, tau_eff, a)
    c = TH.appg_step_conditions(3e-200, 1.0, 1.0, 4, 1.0, [[1e150, 1e150]])
    assert c.D == _round_fraction(4 * F(3e-200) ** 2 * (2 * F(1e150)) * F(1e150))
    lr, tau_eff, gap, s2, k2 = 3e-200, 1e-200, 7e-300, 1e300, 3e299
    got = TH.theorem1_explicit_bound(lr, 3, L=1.0, sigma2=s2, beta2=1.0, kappa2=k2, initial_gap=gap, w=[0.5, 0.5],
                                     a_vectors=[[1.0, 1.0], [1.0, 1.0]], tau_eff=tau_eff)
    # a_i = (1, 1), w = (1/2, 1/2): A = m tau_eff sum_i w_i^2 ||a_i||^2 / ||a_i||_1^2 = tau_eff / 2, B = 1, C = 2
    A, B, C = F(tau_eff) / 2, 1, 2
    want = (4 * F(gap) / (F(lr) * F(tau_eff) * 3), 4 * F(lr) * F(s2) * A / 2, 6 * F(lr) ** 2 * F(s2) * B,
            12 * F(lr) ** 2 * F(k2) * C)
    assert tuple(got) == tuple(map(_round_fraction, want))

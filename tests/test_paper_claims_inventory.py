r"""An inventory of the paper's checkable claims, what in the repository checks each, and checks for the gaps.

Read end to end: ``/work/shared/paper/fednova-paper.txt`` (main text, App. A-I; the extracted text lacks the
displayed equations, so eq. numbers follow the arXiv v1 layout that ``fedlib.theory`` documents). Status
**before** this file: CHECKED (a test or a chapter ``assert`` that fails if the claim or the code were wrong),
WEAK (checked at one point, by a tolerance that cannot fail, by the code's own output, or only through a
consequence), MISSING; GPU (Table 1's CIFAR-10 numbers: chapter 5 reads result files, nothing here runs them).
"ch N" is an ``assert`` cell of ``book/NN_*.ipynb``; test names are in ``tests/``.

Columns: id, the claim, what checks it, status before, status after (where it changed).

**Set-up and update rules**
E1    eq. (1): :math:`F = \sum_i p_iF_i`, :math:`p_i = n_i/n`          test_docstring_truth::...p_weighted_mean...; QuadraticProblem  CHECKED
E2    eq. (2): FedAvg :math:`x \leftarrow x + \sum_i p_i\Delta_i`       test_rule::test_fedavg_is_plain_weighted_averaging_and_eq4     CHECKED
E3    §1-2: :math:`\tau_i = \lfloor En_i/B\rfloor`                    deviation on purpose: library and official code use
                                                                     :math:`E\lceil n_i/B\rceil` (schedules.py docstring); test_schedules  CHECKED
E4    Lemma 1: FedAvg :math:`\to \sum\tau_ie_i/\sum\tau_i`             test_closed_forms_simulated::test_lemma1_fedavg_limit...; ch 2 (slope 1 +- 0.05)  CHECKED
E5    App. A: :math:`K_i(\eta,\mu)`, FedProx's round and limit under   test_paper_claims::test_fedprox_round_is_app_as_affine_map...;
      :math:`\|I-\sum p_iK_iH_i\| < 1`; finite-:math:`\eta` example   test_docstring_truth::test_local_operator_is_the_papers_closed_form  CHECKED
E6    eq. (4): :math:`x \leftarrow x - \tau_{\text{eff}}\sum w_i\eta d_i`; client sends :math:`-\eta d_i`  test_rule hand examples; ch 1 (1e-12)  CHECKED
E7    eq. (6): FedAvg's implicit :math:`\tau_{\text{eff}}, w_i`      test_closed_forms_coverage::test_tau_eff_weights_and_coefficients...  CHECKED
E8    eq. (7): FedProx :math:`a_i, \|a_i\|_1, w_i`; :math:`\alpha = 0` is FedAvg; :math:`w \to p` and
      :math:`\tau_{\text{eff}}` falls as :math:`\alpha` grows       test_docstring_truth::test_fedprox_weights_eq7_by_fractions;
                                                                     test_paper_claims::test_fedprox_trade_off_is_monotone...  CHECKED
E9    §4.1: decayed steps :math:`a_i = [1,\gamma,..]`, :math:`\|a\|_1 = (1-\gamma^\tau)/(1-\gamma)`, like :math:`1-\alpha`
                                                                     test_paper_claims::test_decayed_steps_with_gamma...  CHECKED
E10   §4.1 / App. B.2: momentum :math:`a_i`, :math:`\|a_i\|_1`      test_docstring_truth::test_solver_table...; impulse responses  CHECKED
E11   §4.1: ":math:`w_i \ne p_i` whenever clients have different :math:`\|a_i\|_1`" — and only
      then (the length :math:`\tau_i` of :math:`a_i` does not matter)  mixed-solver test had unequal norms only          WEAK    CHECKED (G2)
E12   §4 / App. G: sampling (i) with replacement by :math:`p_i`, equal weights; (ii) uniform, :math:`p_im/q`: unbiased
                                                                     test_sampling (exhaustive enumeration, Monte Carlo)  CHECKED
E13   Assumption 3: identical :math:`F_i` give :math:`\beta^2 = 1, \kappa^2 = 0`  test_bounds::test_identical_clients_have_beta2_one...  CHECKED
**Theorems, lemmas, corollaries**
T1    Theorem 1: rule (4) converges to a stationary point of :math:`\widetilde F = \sum w_iF_i`
                                                                     ch 7 (logistic fixed points, O(eta)); test_paper_claims::
                                                                     test_fedavg_with_mixed_solvers...; test_theory::test_fixed_point_matches_simulation  CHECKED
T2    Theorem 1 bound (eq. 8), :math:`A, B, C`, :math:`\eta = \sqrt{m/\bar\tau T}`  test_bounds::test_bound_holds_on_real_runs; ch 7  CHECKED
T3    App. C: explicit bound, :math:`D`, C.6 (:math:`D \le 1/(2\beta^2+1)`), C.7 step conditions
                                                                     test_paper_claims::test_step_size_conditions...; test_bounds  CHECKED
T4    Theorem 2 (eq. 10)                                             test_bounds::test_theorem2_holds_pointwise_with_exact_constants  CHECKED
T5    App. D: :math:`\|\nabla F-\nabla\widetilde F\|^2 \le \chi^2\sum w_i\|\nabla F_i\|^2` (Cauchy-Schwarz), so the
      factor :math:`\chi^2` is the right one                        only through Theorem 2's final form                 WEAK    CHECKED (G4)
T6    §4.2: same :math:`\tau` and solver give :math:`p = w`, :math:`\chi^2 = 0`  test_rule::test_fednova_equals_fedavg_when_homogeneous; ch 2  CHECKED
T7    §4.2: identical local functions: no inconsistency, whatever the :math:`\tau_i` ("only in these two
      special cases")                                               only the constants (E13), never the rounds        WEAK    CHECKED (G1)
T8    §4.2 / App. D.1: :math:`\lim\min\|\nabla F\|^2 = \Omega(\chi^2\kappa^2)`; two-client example: :math:`w_i`,
      :math:`\chi^2 = (\tau_2-\tau_1)^2/(4\tau_1\tau_2)` (paper: /2), :math:`\kappa^2 = 4w_1w_2a^2` (paper: 2),
      :math:`F_2 = \frac12(x+a)^2` (paper: :math:`(w+a)^2`), limit, floor attained
                                                                     test_docstring_truth::test_two_client_example_by_fractions;
                                                                     test_closed_forms_simulated::test_two_client_example...; ch 2  CHECKED
T9    §4.2 / Fig. 4: larger :math:`\alpha` lowers :math:`\chi^2`, raises the slowdown; :math:`\alpha = 1`:
      :math:`\tau_{\text{eff}} = 1`, :math:`\bar\tau` times slower  test_paper_claims::test_fedprox_trade_off...; ch 3  CHECKED
T10   Corollary 2: :math:`\alpha^\star = O(m^{1/2}\bar\tau^{-1/2}T^{-1/6})` minimises eq. (8)  test_closed_forms_simulated::
                                                                     test_corollary2_constant_is_the_bound_minimiser; ch 3  CHECKED
T11   Corollary 2 / §4.2: the rate at :math:`\alpha^\star` is :math:`O(1/\sqrt{m\bar\tau T} + 1/T^{2/3})`   —  MISSING CHECKED (G5)
T12   App. E.2: :math:`T \ge O(K^{3/4}m^{3/4})` rounds for the first term to dominate   —       MISSING CHECKED (G6), a limit found
T13   App. E.2: :math:`\tau \gg 1` relaxations :math:`A \approx \frac12, B \approx \frac1{2\alpha}, C \approx \frac1{\alpha^2}`
                                                                     test_paper_claims::test_fedprox_constants_for_many_local_steps...  CHECKED
T14   App. E.2: FedProx's :math:`\tau_{\text{eff}}, A, B, C \to` FedAvg's as :math:`\alpha \to 0` (text's typo:
      "FedProx is equivalent to FedProx")                            test_paper_claims::test_fedprox_constants_tend_to_fedavgs...  CHECKED
T15   Corollary 1 (App. E.1): surrogate :math:`\sum\tau_iF_i/\sum\tau_i`, :math:`A = 1`, :math:`B` with var[tau],
      :math:`C`; :math:`\tau_i = \tau` gives var 0; :math:`\tau_i = 1` synchronous SGD   test_paper_claims::test_corollary1...  CHECKED
T16   §4.2: linear speedup, :math:`T/\gamma` rounds with :math:`\gamma` times the clients  ch 8 (slope -0.5 +- 0.1; equal-budget ratio < 1.5)  CHECKED
T17   Theorem 3: FedNova :math:`\to` stationary point of :math:`F` with any :math:`\tau_i(t), a_i(t)`,
      :math:`O(1/\sqrt{m\tilde\tau T})`, bound with averaged constants  ch 8; test_bounds::test_theorem3_holds_under_random_local_work  CHECKED
T18   App. G corollary: :math:`q` clients with replacement, :math:`O(1/\sqrt{q\tilde\tau T})`, limit :math:`x^*`
                                                                     ch 8 (slope_sampling_eff); test_closed_forms_coverage::test_expected_server_weights...  CHECKED
T19   App. G: :math:`D \le 1/(12\beta^2+1)` gives :math:`1/(1-D) \le 2`, :math:`3D\beta^2/(1-D) \le 1/4`  test_paper_claims::test_step_size_conditions...  CHECKED
T20   App. G: step conditions :math:`\eta L \le 1/(2\tau_{\text{eff}})`, :math:`6\tau_{\text{eff}}\eta L(1+\beta^2/q) \le \frac12`,
      :math:`D \le 1/(12\beta^2+1)` (``fedlib.theory.appg_step_conditions``, ``appg_max_lr``)
                                                                     test_appg_conditions (plain computations, the largest step
                                                                     as the boundary, how q and beta^2 enter); ch 8 prints whether
                                                                     its sampling step sizes meet them (ci, seed 0: 1 of 7 cells;
                                                                     sufficient conditions, not necessary)  MISSING CHECKED
T21   App. G: the explicit sampled bound; Lemma 5                    not implemented: the extracted text lacks both (display math
                                                                     lost); only the rate (T18) and the conditions (T20)  MISSING MISSING
**FedNova (§5, App. H)**
F1    §5: :math:`w_i = p_i`, default :math:`\tau_{\text{eff}} = \sum p_i\|a_i\|_1`  test_rule::test_hand_fednova; test_closed_forms_coverage  CHECKED
F2    §1: with SGD FedNova averages :math:`(x_i^{(t,\tau_i)} - x^{(t,0)})/\tau_i`  ch 2 (Figure 1 cell, 1e-12)   CHECKED
F3    §5: prox + :math:`\tau_{\text{eff}} = \sum p_i\tau_i` "alleviates the slowdown" (vs the default)
                                                                     ch 3 compares with FedProx, not with the default  MISSING CHECKED (G3)
F4    §5: VR correction :math:`\sum_j p_jd_j^{(t-1)} - d_i^{(t-1)}`; App. H Alg. 2 (momentum + VR)  ch 10 (closed forms 1e-9); test_acceleration  CHECKED
F5    §5: server momentum / adaptive server on :math:`-\tau_{\text{eff}}\sum p_i\eta d_i`
                                                                     test_docstring_truth::test_server_momentum_and_fedadam_formulas  CHECKED
F6    App. H: :math:`\tau_{\text{eff}} = \sum_{i\in S_t}p_i\|a_i\|_1` under sampling  test_docstring_truth::test_sampled_tau_eff...; ch 8  CHECKED
**Figures and experiments**
Q1    Fig. 1: with more local steps at client 1 FedAvg strays towards :math:`x_1^*`  ch 2; test_experiments_quadratic  CHECKED
Q2    Fig. 2 / §3: FedProx slightly improves FedAvg's gap but converges slower; FedNova reaches :math:`x^*`  ch 2 (round radii, distances)  CHECKED
Q3    §3 / Fig. 2: VRLSGD with :math:`\tau_i` in place of :math:`\tau` diverges with random local steps  ch 2, ch 10 (``diverged``)  CHECKED
Q4    §6 / Fig. 5: FedNova faster and best on Synthetic(1,1) in three settings  ch 4: best (final loss), 3 seeds x 3 settings,
      every seed; "faster" was prose only: now FedNova reaches FedAvg's lowest loss in <= half its rounds, every seed,
      with full participation (partial participation printed: early overshoot)  WEAK    CHECKED
Q5    §6, App. I: Synthetic(1,1), power-law sizes, batch 20, lr 0.02  test_data_synthetic; test_experiments_synthetic (lr); CLI defaults in test_docstring_recipes  CHECKED
Q6    §1, §5: fixed-length rounds handle stragglers without inconsistency  ch 9                                  CHECKED
Q7    §6, App. I: CIFAR-10 set-up (16 clients, Dir(0.1), VGG-11, batch 32, lr decay at 50 %/75 %, lr 0.02/0.05,
      :math:`\mu` 0.005/0.001, momentum 0.9, 3 seeds, FedNova with FedAvg's lr)  test_table1, test_cifar_data, test_models  CHECKED
Q8    Table 1 and its text: +6-9 % FedNova over FedAvg (SGD, momentum), ~+10 % FedNova-prox over FedProx,
      momentum +3-7 % over SGD, VR keeps the accuracy, momentum + VR highest, hybrid 81.15 +- 0.38 vs server
      momentum 77.49 +- 0.25; Fig. 6-7: FedNova faster, about half the rounds  ch 5 reads GPU result files   GPU     GPU

Counts (Q8 is GPU-only and not counted): before — 38 CHECKED, 4 WEAK, 5 MISSING; after — 46 CHECKED, 0 WEAK,
1 MISSING (T21: App. G's explicit sampled bound and Lemma 5, absent from the extracted text). Proof-internal
inequalities (Jensen, :math:`2\langle a, b\rangle = \|a\|^2+\|b\|^2-\|a-b\|^2`, :math:`\|a\|_2 \le \|a\|_1`) are facts
of analysis, not claims about the library, and are not listed.

The checks below (G1-G6), each against an independent computation:

* G1 (T7): identical local objectives, heterogeneous :math:`\tau_i` (1 to 40) and solvers (SGD, momentum, prox):
  FedAvg's real rounds reach :math:`x^* = H^{-1}e` at a finite step (to :math:`10^{-10}`) though
  :math:`w \ne p`; different :math:`e_i` leave a gap (> :math:`10^{-3}`).
* G2 (E11): :math:`a_i` of lengths 4, 3, 5 with :math:`\|a_i\|_1 = 4` (SGD; momentum :math:`\rho = \sqrt2-1`;
  decay with :math:`1+\gamma+..+\gamma^4 = 4`, solved by hand): the real round weights by :math:`p` and the limit
  tends to :math:`x^*` at :math:`O(\eta)` (distance ratio 0.45-0.55 per halving); :math:`\rho = 1/2`
  (:math:`\|a\|_1 = 4.25`) tends to the :math:`w`-weighted optimum instead.
* G3 (F3): FedNova-prox's real rounds equal App. A's map by hand (:math:`10^{-10}`) for both :math:`\tau_{\text{eff}}`;
  same limit; :math:`\sum p_i\tau_i` has the smaller spectral radius and ends closer after 30 rounds.
* G4 (T5): Cauchy-Schwarz holds at random points and is attained with equality
  (:math:`(\chi^2)^2\|v\|^2`) by gradients :math:`\propto (p_i-w_i)/w_i`.
* G5 (T11): at the numerical best :math:`\alpha`, :math:`T^{2/3}` (slowdown + heterogeneity terms) is
  :math:`\frac32(2\kappa^2)^{1/3}` and the variance term :math:`\sigma^2/(2\sqrt{m\bar\tau T})`, worked by hand (3 %).
* G6 (T12): :math:`T = (mK)^{3/4} \Leftrightarrow T = (m\bar\tau)^3 \Leftrightarrow \alpha^\star\bar\tau = c`
  (exact). So in the regime the paper's condition asks for, Corollary 2's :math:`\alpha^\star` lies outside its own
  :math:`\alpha\bar\tau \gg 1` relaxations, and the numerical minimiser of eq. (8) falls far below it (measured
  26 times at :math:`m = 4`, :math:`\bar\tau = 1000`); documented in :func:`fedlib.theory.corollary2_best_alpha`.
"""
from __future__ import annotations

import numpy as np
import pytest

from fedlib.algorithms import make_algorithm
from fedlib.engines.reference import run_sequential
from fedlib.problems import QuadraticProblem, random_quadratic
from fedlib.schedules import FixedSteps
from fedlib.solvers import decayed_sgd, momentum_sgd, proximal_sgd, sgd
from fedlib.theory import chi_square

# ---------------------------------------------------------------- helpers
SEEDS = range(5)


def _seed(*words) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([2020, 77, *words]))


def _real_affine_round(algorithm, problem, steps, solvers=None):
    r"""The round of ``algorithm`` as the affine map :math:`x \mapsto Rx + b` it is on a quadratic with
    exact gradients, read off :math:`d + 1` real rounds of :func:`run_sequential` (from :math:`0` and from
    each unit vector); nothing of :mod:`fedlib.theory` is used."""
    kw = {} if solvers is None else {"solver_at": lambda t, i: solvers[i]}
    d = problem.dim

    def one_round(x0):
        run = run_sequential(algorithm, np.array(x0, dtype=float), problem.grad_fn(), problem.p,
                             FixedSteps(steps), 1, **kw)
        return np.asarray(run.state.params), run.diagnostics[0]

    b, diag = one_round(np.zeros(d))
    R = np.column_stack([one_round(np.eye(d)[j])[0] - b for j in range(d)])
    return R, b, diag


def _limit_of(R, b):
    """Fixed point of x -> Rx + b (the rounds converge to it when the spectral radius is < 1)."""
    assert np.max(np.abs(np.linalg.eigvals(R))) < 1, "the real rounds do not converge here"
    return np.linalg.solve(np.eye(len(b)) - R, b)


def _x_star(problem):
    """argmin of sum_i p_i F_i by plain numpy."""
    return np.linalg.solve(np.einsum("i,ijk->jk", problem.p, problem.H), problem.p @ problem.e)


# ------------------------------------------------------------------ §4.2 discussion: identical clients
@pytest.mark.parametrize("seed", SEEDS)
def test_identical_local_objectives_leave_no_inconsistency_even_with_heterogeneous_local_work(seed):
    r"""§4.2, after Theorem 2: with identical local objectives (:math:`\beta^2 = 1`, :math:`\kappa^2 = 0`) there
    is no objective inconsistency, whatever the :math:`\tau_i` and solvers: FedAvg's real rounds, clients with
    SGD, momentum and proximal SGD and :math:`\tau_i` from 1 to 40, converge to :math:`x^* = H^{-1}e` itself —
    at a finite step size, not only as :math:`\eta \to 0` (:math:`x^*` zeroes every client's gradient, so it is
    a fixed point of every local run). The same clients with different :math:`e_i` (non-identical objectives)
    leave a gap: the check can fail."""
    rng = _seed(1, seed)
    m, d = 4, 3
    lr = float(rng.uniform(0.005, 0.02))
    steps = np.concatenate([[1], rng.integers(2, 41, size=m - 1)])
    common = random_quadratic(1, d, seed=1000 + seed)
    p = rng.dirichlet(np.ones(m))
    same = QuadraticProblem(np.repeat(common.H, m, axis=0), np.repeat(common.e, m, axis=0), p)
    solvers = [sgd(lr), momentum_sgd(lr, float(rng.uniform(0.3, 0.9))), proximal_sgd(lr, float(rng.uniform(0.5, 5))),
               sgd(lr)]
    fedavg = make_algorithm("fedavg", sgd(lr))
    R, b, diag = _real_affine_round(fedavg, same, steps, solvers)
    w = np.asarray(diag.weights) / np.sum(diag.weights)
    assert chi_square(p, w) > 0.05                           # FedAvg's weights are far from p ...
    x_hat = _limit_of(R, b)
    x_star = np.linalg.solve(common.H[0], common.e[0])
    assert np.linalg.norm(x_hat - x_star) <= 1e-10 * np.linalg.norm(x_star)  # ... yet no bias: kappa^2 = 0
    e = same.e + rng.normal(0.0, 1.0, size=same.e.shape)   # non-identical objectives: a gap appears
    other = QuadraticProblem(same.H, e, p)
    x_hat2 = _limit_of(*_real_affine_round(fedavg, other, steps, solvers)[:2])
    assert np.linalg.norm(x_hat2 - _x_star(other)) > 1e-3 * np.linalg.norm(_x_star(other))


# ------------------------------------------------------------------ §4.1: only ||a_i||_1 sets w_i
def _momentum_for_a_norm_4_at_tau_3():
    r""":math:`\|a\|_1 = [3 - \rho(1-\rho^3)/(1-\rho)]/(1-\rho) = 4` :math:`\Leftrightarrow`
    :math:`(\rho - 1)(\rho^2 + 2\rho - 1) = 0`: :math:`\rho = \sqrt2 - 1`."""
    return float(np.sqrt(2.0) - 1.0)


def _gamma_for_a_norm_4_at_tau_5():
    r""":math:`1 + \gamma + \gamma^2 + \gamma^3 + \gamma^4 = 4`, the root in :math:`(0, 1)` (numpy's roots)."""
    roots = np.roots([1.0, 1.0, 1.0, 1.0, -3.0])
    return float(next(r.real for r in roots if abs(r.imag) < 1e-12 and 0 < r.real < 1))


@pytest.mark.parametrize("seed", SEEDS)
def test_fedavg_is_consistent_when_the_a_norms_agree_though_the_a_vectors_differ(seed):
    r"""§4.1: ":math:`w_i \neq p_i` whenever clients have different :math:`\|a_i\|_1`" — and only then: it is
    :math:`\|a_i\|_1`, not the length :math:`\tau_i` of :math:`a_i`, that sets eq. (6)'s weights. Three clients
    with :math:`a_i` of lengths 4, 3 and 5 — SGD (:math:`\tau = 4`), momentum :math:`\rho = \sqrt2 - 1`
    (:math:`\tau = 3`) and decayed steps with :math:`1+\gamma+\dots+\gamma^4 = 4` (:math:`\tau = 5`), the
    parameters solved by hand — all have :math:`\|a_i\|_1 = 4`; FedAvg's real rounds then weight them by
    :math:`p` and tend to :math:`x^*` at :math:`O(\eta)` (halving :math:`\eta` halves the distance), while with
    :math:`\rho = 1/2` (:math:`\|a\|_1 = 4.25`) they tend to :math:`\tilde x = \arg\min\sum_i w_iF_i`,
    :math:`w_i \propto 4.25^{[i=2]}p_i` (by numpy), and the distance to :math:`x^*` stays."""
    rng = _seed(2, seed)
    problem = random_quadratic(3, 3, seed=2000 + seed, p=rng.dirichlet(np.ones(3)))
    steps = [4, 3, 5]
    x_star = _x_star(problem)

    def distance(lr, rho):
        solvers = [sgd(lr), momentum_sgd(lr, rho), decayed_sgd(lr, gamma=_gamma_for_a_norm_4_at_tau_5())]
        R, b, diag = _real_affine_round(make_algorithm("fedavg", sgd(lr)), problem, steps, solvers)
        return np.linalg.norm(_limit_of(R, b) - x_star), diag

    lr = 0.01
    d1, diag = distance(lr, _momentum_for_a_norm_4_at_tau_3())
    np.testing.assert_allclose(diag.a_norms, [4.0, 4.0, 4.0], rtol=1e-12)
    np.testing.assert_allclose(np.asarray(diag.weights) / np.sum(diag.weights), problem.p, rtol=1e-12)
    d2, _ = distance(lr / 2, _momentum_for_a_norm_4_at_tau_3())
    d3, _ = distance(lr / 4, _momentum_for_a_norm_4_at_tau_3())
    assert 0.45 < d2 / d1 < 0.55 and 0.45 < d3 / d2 < 0.55, (d1, d2, d3)   # O(eta): consistent
    u1, diag_u = distance(lr, 0.5)
    u3, _ = distance(lr / 4, 0.5)
    assert diag_u.a_norms[1] == pytest.approx((3 - 0.5 * (1 - 0.5 ** 3) / 0.5) / 0.5, rel=1e-12)  # 4.25
    w = problem.p * np.array([4.0, 4.25, 4.0])
    w /= w.sum()                                                          # eq. (6)'s weights, by hand
    x_tilde = np.linalg.solve(np.einsum("i,ijk->jk", w, problem.H), w @ problem.e)
    floor = np.linalg.norm(x_tilde - x_star)
    assert abs(u3 - floor) < 0.5 * abs(u1 - floor) and u3 > 10 * d3, (u1, u3, floor, d3)  # unequal: a floor


# ------------------------------------------------------------------ §5: FedNova-prox's tau_eff
def _fednova_prox_round_by_hand(problem, steps, lr, mu, tau_eff):
    r"""App. A's FedProx local run, :math:`\Delta_i = -K_i(H_ix - e_i)`,
    :math:`K_i = [I - (I - \eta\mu I - \eta H_i)^{\tau_i}](H_i + \mu I)^{-1}`, aggregated by FedNova:
    :math:`x \mapsto x + \tau_{\text{eff}}\sum_i p_i\Delta_i/\|a_i\|_1`,
    :math:`\|a_i\|_1 = (1-(1-\alpha)^{\tau_i})/\alpha`, :math:`\alpha = \eta\mu` — as :math:`x \mapsto Rx + b`."""
    d = problem.dim
    alpha = lr * mu
    R, b = np.eye(d), np.zeros(d)
    for p_i, H_i, e_i, t in zip(problem.p, problem.H, problem.e, steps):
        K = (np.eye(d) - np.linalg.matrix_power(np.eye(d) - alpha * np.eye(d) - lr * H_i, int(t))) @ \
            np.linalg.inv(H_i + mu * np.eye(d))
        a_norm = (1 - (1 - alpha) ** int(t)) / alpha
        R -= tau_eff * p_i / a_norm * K @ H_i
        b += tau_eff * p_i / a_norm * K @ e_i
    return R, b


@pytest.mark.parametrize("seed", SEEDS)
def test_fednova_prox_with_tau_eff_sum_p_tau_has_the_smaller_slowdown_and_the_same_limit(seed):
    r"""§5: for FedNova with proximal local SGD, ":math:`\tau_{\text{eff}} = \sum_i p_i\tau_i` instead of its
    default :math:`\sum_i p_i[1-(1-\alpha)^{\tau_i}]/\alpha` ... can help alleviate the slowdown". On random
    quadratics the real rounds of both choices are App. A's maps computed here by hand (to :math:`10^{-10}`),
    share one limit (:math:`w = p` either way), and the :math:`\sum_i p_i\tau_i` rounds contract faster
    (smaller spectral radius) and end closer to it after 30 rounds from the same start."""
    rng = _seed(3, seed)
    m = 4
    problem = random_quadratic(m, 3, seed=3000 + seed, p=rng.dirichlet(np.ones(m)))
    steps = rng.integers(5, 61, size=m)
    lr, mu = 0.01, float(rng.uniform(1.0, 5.0))
    alpha = lr * mu
    default_tau = float(problem.p @ ((1 - (1 - alpha) ** steps) / alpha))
    steps_tau = float(problem.p @ steps)
    assert steps_tau > 1.2 * default_tau                    # the default's slowdown is real here
    runs = {}
    for policy, tau_eff in ((None, default_tau), ("local_steps", steps_tau)):
        algorithm = make_algorithm("fednova", proximal_sgd(lr, mu), tau_eff=policy)
        R, b, diag = _real_affine_round(algorithm, problem, steps)
        R_hand, b_hand = _fednova_prox_round_by_hand(problem, steps, lr, mu, tau_eff)
        assert float(diag.tau_eff) == pytest.approx(tau_eff, rel=1e-12)
        np.testing.assert_allclose(R, R_hand, rtol=0, atol=1e-10)
        np.testing.assert_allclose(b, b_hand, rtol=0, atol=1e-10 * np.abs(b_hand).max())
        x0 = rng.normal(0.0, 5.0, size=3) if policy is None else runs[None]["x0"]
        run = run_sequential(algorithm, x0.copy(), problem.grad_fn(), problem.p, FixedSteps(steps), 30)
        runs[policy] = dict(x0=x0, limit=_limit_of(R, b), radius=np.max(np.abs(np.linalg.eigvals(R))),
                            end=np.asarray(run.state.params))
    slow, fast = runs[None], runs["local_steps"]
    np.testing.assert_allclose(fast["limit"], slow["limit"], rtol=1e-9)
    assert fast["radius"] < slow["radius"]
    assert np.linalg.norm(fast["end"] - fast["limit"]) < np.linalg.norm(slow["end"] - slow["limit"])


# ------------------------------------------------------------------ App. D: the Cauchy-Schwarz step
@pytest.mark.parametrize("seed", SEEDS)
def test_app_d_cauchy_schwarz_step_holds_and_is_attained(seed):
    r"""App. D (proof of Theorem 2): :math:`\|\nabla F(x) - \nabla\widetilde F(x)\|^2 =
    \|\sum_i (p_i - w_i)\nabla F_i(x)\|^2 \le \chi^2_{p\|w}\sum_i w_i\|\nabla F_i(x)\|^2` (Cauchy–Schwarz), at
    random points of random quadratics with random :math:`p, w` (:func:`fedlib.theory.chi_square`, the
    problem's own gradients); and it is attained — the factor :math:`\chi^2` of Theorem 2 cannot be lowered —
    by gradients :math:`\nabla F_i = \frac{p_i - w_i}{w_i}v` (:math:`H_i = I`, chosen :math:`e_i`, at
    :math:`x = 0`), where :math:`\sum_i(p_i-w_i)\nabla F_i = \chi^2 v` and both sides equal
    :math:`(\chi^2)^2\|v\|^2` exactly."""
    rng = _seed(4, seed)
    m, d = int(rng.integers(2, 7)), 3
    p, w = rng.dirichlet(np.ones(m)), rng.dirichlet(np.ones(m))
    problem = random_quadratic(m, d, seed=4000 + seed, p=p)
    chi2 = chi_square(p, w)
    for _ in range(5):
        x = rng.normal(0.0, 5.0, size=d)
        g = np.array([problem.grad(x, i) for i in range(m)])
        lhs = np.linalg.norm(problem.global_grad(x) - w @ g) ** 2
        assert lhs <= chi2 * float(w @ np.sum(g * g, axis=1)) * (1 + 1e-12)
    v = rng.normal(size=d)
    e = -((p - w) / w)[:, None] * v[None, :]
    attained = QuadraticProblem(np.repeat(np.eye(d)[None], m, axis=0), e, p)
    g = np.array([attained.grad(np.zeros(d), i) for i in range(m)])
    lhs = np.linalg.norm(attained.global_grad(np.zeros(d)) - w @ g) ** 2
    exact = float(np.sum((p - w) ** 2 / w)) ** 2 * float(v @ v)          # (chi^2)^2 ||v||^2, by hand
    assert lhs == pytest.approx(exact, rel=1e-12)
    assert chi2 * float(w @ np.sum(g * g, axis=1)) == pytest.approx(exact, rel=1e-12)


# ------------------------------------------------------------------ Corollary 2: the rate at alpha*, and its T condition
@pytest.mark.parametrize("seed", SEEDS)
def test_corollary2_rate_at_the_best_alpha_is_one_over_T_to_two_thirds(seed):
    r"""§4.2 / Corollary 2: at the best :math:`\alpha`, FedProx's bound (eq. 8, :math:`p_i = 1/m`,
    :math:`\tau_i = \bar\tau`, :math:`A, B, C` of the real proximal :math:`a_i`) is
    :math:`O(1/\sqrt{m\bar\tau T} + 1/T^{2/3})`. Worked by hand from App. E.2's relaxations
    (:math:`\tau_{\text{eff}} \approx 1/\alpha`, :math:`A \approx \frac12`, :math:`C \approx 1/\alpha^2`) at
    :math:`\alpha^\star = c\,m^{1/2}\bar\tau^{-1/2}T^{-1/6}`, :math:`c = (2\kappa^2)^{1/3}`: the slowdown term is
    :math:`c/T^{2/3}`, the heterogeneity term :math:`\kappa^2/(c^2T^{2/3})`, together
    :math:`\frac32(2\kappa^2)^{1/3}/T^{2/3}`, and the variance term :math:`\sigma^2/(2\sqrt{m\bar\tau T})`.
    The numerical minimiser's terms are these to 3 % (random :math:`m, \bar\tau, T, \sigma^2, \kappa^2` with
    :math:`\alpha^\star\bar\tau \ge 10`; measured: within 1.1 % and 1.6 %)."""
    from fedlib.tradeoff import fedprox_bound, fedprox_bound_best_alpha

    rng = _seed(5, seed)
    m, tau = int(rng.integers(4, 65)), int(rng.integers(500, 5000))
    sigma2, kappa2 = float(rng.uniform(0.2, 5)), float(rng.uniform(0.2, 5))
    c = (2 * kappa2) ** (1 / 3)
    T = int(10 ** rng.uniform(4, np.log10((c * np.sqrt(m * tau) / 10) ** 6)))   # alpha* tau >= 10
    alpha = fedprox_bound_best_alpha(m, tau, T, sigma2, kappa2)
    terms = fedprox_bound(alpha, m, tau, T, sigma2, kappa2)
    assert alpha * tau >= 9
    assert T ** (2 / 3) * (terms.slowdown_term + terms.heterogeneity_term) == pytest.approx(1.5 * c, rel=0.03)
    assert terms.variance_term == pytest.approx(sigma2 / (2 * np.sqrt(m * tau * T)), rel=0.03)


def test_corollary2_communication_condition_is_where_its_relaxations_end():
    r"""App. E.2's proof of Corollary 2: "the total communication rounds :math:`T = K/\bar\tau` should be greater
    than :math:`O(K^{3/4}m^{3/4})`" (:math:`K = \bar\tau T`). By exact arithmetic,
    :math:`T = (mK)^{3/4} = (m\bar\tau T)^{3/4} \Leftrightarrow T = (m\bar\tau)^3`, and there
    :math:`\alpha^\star\bar\tau = c\,(m\bar\tau)^{1/2}T^{-1/6} = c`: from the paper's :math:`T` on,
    :math:`\alpha^\star\bar\tau \le c`, outside the :math:`\alpha\bar\tau \gg 1` relaxations
    (:math:`(1-\alpha)^{\bar\tau} \approx 0`) the corollary's :math:`\alpha^\star` is derived from — a limit of
    the paper's statement, not of the code. Checked: :func:`fedlib.theory.corollary2_best_alpha` at
    :math:`T = (m\bar\tau)^3` gives :math:`\alpha^\star\bar\tau = c`; and well inside the paper's condition
    (:math:`\sigma^2 = \kappa^2 = 1`, :math:`m = 4`, :math:`\bar\tau = 1000`, :math:`T` ten times the point
    where :math:`\frac32 c/T^{2/3}` falls to the variance term :math:`1/(2\sqrt{m\bar\tau T})`) the numerical
    minimiser of eq. (8) is far below :math:`\alpha^\star` (measured: :math:`\alpha\bar\tau = 0.009`,
    :math:`\alpha^\star/\alpha = 26`), while at :math:`10^{-3}` of that :math:`T` the two are within a factor 2."""
    from fractions import Fraction

    from fedlib.theory import corollary2_best_alpha
    from fedlib.tradeoff import fedprox_bound_best_alpha

    # T = (m tau T)^(3/4)  <=>  T^(1 - 3/4) = (m tau)^(3/4)  <=>  T = (m tau)^((3/4) / (1/4))
    assert Fraction(3, 4) / (1 - Fraction(3, 4)) == 3                   # T = (m tau)^3
    assert Fraction(1, 2) - Fraction(1, 6) * 3 == 0                     # alpha* tau = c (m tau)^(1/2 - 3/6) = c
    for m, tau, kappa2 in ((4, 50, 1.0), (9, 20, 2.5), (16, 12, 0.3)):
        c = (2 * kappa2) ** (1 / 3)
        T = (m * tau) ** 3
        assert corollary2_best_alpha(m, tau, T, constant=c) * tau == pytest.approx(c, rel=1e-12)
    m, tau, c = 4, 1000, 2 ** (1 / 3)
    crossover = (3 * c) ** 6 * (m * tau) ** 3          # 1.5 c / T^(2/3) = 1 / (2 sqrt(m tau T))
    far = fedprox_bound_best_alpha(m, tau, int(10 * crossover))
    assert far * tau < 0.1 and corollary2_best_alpha(m, tau, int(10 * crossover), constant=c) > 10 * far
    near = fedprox_bound_best_alpha(m, tau, int(1e-3 * crossover))
    assert 0.5 < corollary2_best_alpha(m, tau, int(1e-3 * crossover), constant=c) / near < 2

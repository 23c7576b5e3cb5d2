r"""App. G (client sampling, the corollary of Theorem 3): the step-size conditions the extracted text states.

"When :math:`\eta L \le 1/(2\tau_{\text{eff}})` and :math:`6\tau_{\text{eff}}\eta L + 6\tau_{\text{eff}}\eta
L\beta^2/q \le \frac12` ..." and ":math:`D = 4\eta^2L^2\max_i\{\|a_i\|_1(\|a_i\|_1 - a_{i,-1})\} < 1`. If
:math:`D \le 1/(12\beta^2+1)` then :math:`1/(1-D) \le 1 + 1/(12\beta^2) \le 2` and :math:`3D\beta^2/(1-D) \le
1/4`" (``/work/shared/paper/fednova-paper.txt``, Appendix G). :func:`fedlib.theory.appg_step_conditions` and
:func:`fedlib.theory.appg_max_lr` against plain computations of each inequality on seeded random inputs and on
the :math:`a_i` of the library's real solvers; then chapter 8's sampling step sizes against the same
conditions, with :math:`L`, :math:`\beta^2` and :math:`a_i` computed here without :mod:`fedlib.theory`. The
explicit sampled bound and Lemma 5 are not in the extracted text and are not checked (T21 of
``test_paper_claims_inventory.py``; the conditions are its T20).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import scipy.linalg

from fedlib.solvers import decayed_sgd, momentum_proximal_sgd, momentum_sgd, proximal_sgd, sgd
from fedlib.theory import AppGStepConditions, appg_max_lr, appg_step_conditions
from bookutil import require_book_module

ROOT = Path(__file__).resolve().parents[1]
SEEDS = range(6)


def _rng(*words) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([2020, 7, *words]))


def _real_a_vectors(rng, lr, count):
    """``count`` closed-form :math:`a_i` of the library's solvers (random kind, parameters and :math:`\\tau`)."""
    makers = [lambda: sgd(lr), lambda: momentum_sgd(lr, float(rng.uniform(0.1, 0.95))),
              lambda: proximal_sgd(lr, float(rng.uniform(0.1, 5.0))),
              lambda: decayed_sgd(lr, gamma=float(rng.uniform(0.5, 0.99))),
              lambda: momentum_proximal_sgd(lr, float(rng.uniform(0.1, 0.9)), mu=float(rng.uniform(0.1, 5.0)))]
    return [makers[int(rng.integers(len(makers)))]().a_vector(int(rng.integers(1, 25))) for _ in range(count)]


def _plain(lr, L, beta2, q, tau_eff, a_vectors):
    """Each side of App. G's three conditions, written out with plain Python floats."""
    worst = 0.0
    for a in a_vectors:
        l1 = sum(float(v) for v in a)
        worst = max(worst, l1 * (l1 - float(a[len(a) - 1])))
    first = lr * L                                      # <= 1 / (2 tau_eff)
    second = 6 * tau_eff * lr * L + 6 * tau_eff * lr * L * beta2 / q   # <= 1/2
    D = 4 * lr * lr * L * L * worst                     # <= 1 / (12 beta^2 + 1)
    return first, second, D, worst


def _plain_max_lr(L, beta2, q, tau_eff, worst):
    """Each condition solved for eta by hand (the first is implied by the second)."""
    return min(1 / (2 * tau_eff * L), 0.5 / (6 * tau_eff * L * (1 + beta2 / q)),
               np.inf if worst == 0 else np.sqrt(1 / ((12 * beta2 + 1) * 4 * L * L * worst)))


def _random_case(rng):
    L, beta2 = float(10 ** rng.uniform(-1, 1)), float(rng.uniform(1.0, 20.0))
    q, tau_eff = int(rng.integers(1, 65)), float(rng.uniform(1.0, 30.0))
    a_vectors = _real_a_vectors(rng, 0.01, int(rng.integers(1, 6)))
    return L, beta2, q, tau_eff, a_vectors


# ---------------------------------------------------------------- the conditions, term by term
@pytest.mark.parametrize("seed", SEEDS)
def test_conditions_are_the_texts_inequalities(seed):
    """Random L, beta^2 >= 1, q, tau_eff, real a_i and step sizes on both sides of the plain boundary:
    every reported side equals the plain computation and every verdict is the plain inequality's; the draws
    include steps that meet all conditions and steps that break each of the second and third."""
    rng = _rng(1, seed)
    verdicts = []
    for _ in range(40):
        L, beta2, q, tau_eff, a_vectors = _random_case(rng)
        worst = _plain(1.0, L, beta2, q, tau_eff, a_vectors)[3]
        lr = _plain_max_lr(L, beta2, q, tau_eff, worst) * float(10 ** rng.uniform(-1, 1))
        first, second, D, _ = _plain(lr, L, beta2, q, tau_eff, a_vectors)
        c = appg_step_conditions(lr, L, beta2, q, tau_eff, a_vectors)
        assert isinstance(c, AppGStepConditions)
        assert c.first == pytest.approx(2 * tau_eff * first, rel=1e-12)
        assert c.second == pytest.approx(second, rel=1e-12)
        assert c.D == pytest.approx(D, rel=1e-12, abs=0)
        assert c.D_threshold == pytest.approx(1 / (12 * beta2 + 1), rel=1e-12)
        plain = (first <= 1 / (2 * tau_eff), second <= 0.5, D <= 1 / (12 * beta2 + 1))
        assert (c.first_holds, c.second_holds, c.D_holds) == plain
        assert c.holds == all(plain)
        verdicts.append(plain)
    verdicts = np.array(verdicts)
    assert verdicts.all(axis=1).any() and not verdicts[:, 1].all() and not verdicts[:, 2].all()


def test_D_uses_the_last_entry_of_each_a_i_and_the_largest_client():
    r"""Momentum's :math:`a_i` runs from its largest entry down to :math:`a_{i,-1} = 1`, so using another entry
    would change :math:`D`; with two clients the larger :math:`\|a_i\|_1(\|a_i\|_1 - a_{i,-1})` sets it, and a
    client with one step (:math:`\|a\|_1 = a_{i,-1}`) adds 0."""
    a = momentum_sgd(0.01, 0.9).a_vector(6)
    assert a[-1] == pytest.approx(1.0) and a[0] > 4 * a[-1]
    lr, L = 0.001, 2.0
    expected = 4 * lr ** 2 * L ** 2 * a.sum() * (a.sum() - 1.0)
    for vectors in ([a], [a, np.ones(3)], [np.ones(3), a, [5.0]]):
        assert appg_step_conditions(lr, L, 1.0, 1, 1.0, vectors).D == pytest.approx(expected, rel=1e-12)
    assert appg_step_conditions(lr, L, 1.0, 1, 1.0, [[5.0], [1.0]]).D == 0.0


@pytest.mark.parametrize("seed", SEEDS)
def test_second_condition_implies_the_first(seed):
    r""":math:`6\tau_{\text{eff}}\eta L(1 + \beta^2/q) \le \frac12` gives :math:`2\tau_{\text{eff}}\eta L \le
    1/(6(1+\beta^2/q)) < 1`: whenever the second holds so does the first, which therefore never binds
    :func:`appg_max_lr`."""
    rng = _rng(2, seed)
    for _ in range(40):
        L, beta2, q, tau_eff, a_vectors = _random_case(rng)
        lr = float(10 ** rng.uniform(-4, 0))
        c = appg_step_conditions(lr, L, beta2, q, tau_eff, a_vectors)
        assert not c.second_holds or c.first_holds
        assert c.first == pytest.approx(c.second / (3 * (1 + beta2 / q)), rel=1e-12)
        top = appg_step_conditions(appg_max_lr(L, beta2, q, tau_eff, a_vectors), L, beta2, q, tau_eff, a_vectors)
        assert top.first < 1


# ---------------------------------------------------------------- the largest step size
@pytest.mark.parametrize("seed", SEEDS)
def test_max_lr_is_the_boundary(seed):
    """At ``appg_max_lr`` every condition holds and one of the second and third with equality (to rounding);
    a step 1e-9 larger breaks that one, 1e-9 smaller meets all. It is the plain minimum of the conditions
    solved for eta; both the second and the third bind in some draws."""
    rng = _rng(3, seed)
    binding = set()
    for _ in range(30):
        L, beta2, q, tau_eff, a_vectors = _random_case(rng)
        top = appg_max_lr(L, beta2, q, tau_eff, a_vectors)
        worst = _plain(1.0, L, beta2, q, tau_eff, a_vectors)[3]
        assert top == pytest.approx(_plain_max_lr(L, beta2, q, tau_eff, worst), rel=1e-12)
        at = appg_step_conditions(top, L, beta2, q, tau_eff, a_vectors)
        assert at.holds
        tight = [name for name, side, bound in (("second", at.second, 0.5), ("D", at.D, at.D_threshold))
                 if side == pytest.approx(bound, rel=1e-12)]
        assert tight, at
        binding.update(tight)
        above = appg_step_conditions(top * (1 + 1e-9), L, beta2, q, tau_eff, a_vectors)
        assert not above.holds
        assert not (above.second_holds if tight[0] == "second" else above.D_holds)
        assert appg_step_conditions(top * (1 - 1e-9), L, beta2, q, tau_eff, a_vectors).holds
    assert binding == {"second", "D"}


def test_one_step_clients_leave_only_the_second_condition():
    """Every a_i of length 1 (one local step), or zero but for its last entry: D = 0 for any eta, so the
    largest step is the second condition's, 1 / (12 tau_eff L (1 + beta^2 / q))."""
    L, beta2, q, tau_eff = 3.0, 2.0, 4, 1.0
    top = appg_max_lr(L, beta2, q, tau_eff, [[1.0], [1.0]])
    assert top == pytest.approx(1 / (12 * tau_eff * L * (1 + beta2 / q)), rel=1e-12)
    assert appg_step_conditions(10.0, L, beta2, q, tau_eff, [[1.0]]).D == 0.0
    # the max is 0 too when every a_i puts all its weight on its last entry (longer than one step)
    assert appg_max_lr(L, beta2, q, tau_eff, [[0.0, 0.0, 2.0], [1.0]]) == top


# ---------------------------------------------------------------- what the text derives from D <= 1/(12 beta^2 + 1)
@pytest.mark.parametrize("seed", SEEDS)
def test_D_threshold_gives_the_inequalities_the_proof_uses(seed):
    r"""D from real solvers' :math:`a_i`: where ``D_holds``, :math:`D < 1`, :math:`1/(1-D) \le 1 + 1/(12\beta^2)
    \le 2` and :math:`3D\beta^2/(1-D) \le 1/4`; at the threshold the last is an equality, and just above it
    (D still < 1) it fails — the threshold is exactly where :math:`3D\beta^2/(1-D) = 1/4`."""
    rng = _rng(4, seed)
    sides = set()
    for _ in range(40):
        lr = float(10 ** rng.uniform(-3, -1))
        a_vectors = _real_a_vectors(rng, lr, int(rng.integers(1, 5)))
        if max(len(a) for a in a_vectors) == 1:
            continue
        L, beta2 = float(10 ** rng.uniform(-1, 1)), float(rng.uniform(1.0, 30.0))
        c = appg_step_conditions(lr, L, beta2, 1, 1.0, a_vectors)
        scale = np.sqrt(c.D_threshold / c.D)         # the step at which D meets its threshold exactly
        for factor in (float(rng.uniform(0.05, 1.0)), 1.0, 1 + 1e-6, float(rng.uniform(1.0, 1 / np.sqrt(c.D_threshold)))):
            cc = appg_step_conditions(lr * scale * factor, L, beta2, 1, 1.0, a_vectors)
            D = cc.D
            if D >= 1:
                continue
            lhs = 3 * D * beta2 / (1 - D)
            if cc.D_holds:
                sides.add("in")
                assert 1 / (1 - D) <= (1 + 1 / (12 * beta2)) * (1 + 1e-12) <= 2
                assert lhs <= 0.25 * (1 + 1e-9)
                if factor == 1.0:
                    assert lhs == pytest.approx(0.25, rel=1e-9)
            else:
                sides.add("out")
                assert lhs > 0.25
    assert sides == {"in", "out"}


# ---------------------------------------------------------------- how q and beta^2 enter
@pytest.mark.parametrize("seed", SEEDS)
def test_more_sampled_clients_loosen_only_the_second_condition(seed):
    r"""A larger :math:`q` lowers :math:`6\tau_{\text{eff}}\eta L(1 + \beta^2/q)` towards
    :math:`6\tau_{\text{eff}}\eta L`, leaves the first condition and :math:`D` unchanged, and never lowers the
    largest step; with one-step clients (no :math:`D`) a step that breaks the second condition at :math:`q = 1`
    meets it for a large enough :math:`q`. A larger :math:`\beta^2` tightens the second and third."""
    rng = _rng(5, seed)
    L, beta2, _, tau_eff, a_vectors = _random_case(rng)
    lr = float(10 ** rng.uniform(-4, -2))
    qs = [1, 2, 4, 16, 64, 1024]
    cs = [appg_step_conditions(lr, L, beta2, q, tau_eff, a_vectors) for q in qs]
    assert all(b.second < a.second for a, b in zip(cs, cs[1:]))
    assert cs[-1].second == pytest.approx(6 * tau_eff * lr * L * (1 + beta2 / 1024), rel=1e-12)
    assert len({c.first for c in cs}) == 1 and len({c.D for c in cs}) == 1 and len({c.D_threshold for c in cs}) == 1
    tops = [appg_max_lr(L, beta2, q, tau_eff, a_vectors) for q in qs]
    assert all(b >= a for a, b in zip(tops, tops[1:]))
    ones = [[1.0]] * 3
    q1 = 0.5 / (6 * tau_eff * L * (1 + beta2))             # the q = 1 edge, by hand
    step = q1 * (1 + float(rng.uniform(0.05, 0.5)) * beta2)   # well below 1 / (12 tau_eff L): a large q meets it
    assert not appg_step_conditions(step, L, beta2, 1, tau_eff, ones).second_holds
    assert any(appg_step_conditions(step, L, beta2, q, tau_eff, ones).second_holds for q in qs[1:])
    tighter = appg_step_conditions(lr, L, beta2 + 1.0, 4, tau_eff, a_vectors)
    base = appg_step_conditions(lr, L, beta2, 4, tau_eff, a_vectors)
    assert tighter.second > base.second and tighter.D_threshold < base.D_threshold and tighter.D == base.D


# ---------------------------------------------------------------- bad inputs
@pytest.mark.parametrize("kwargs, name", [
    (dict(q=0), "q"), (dict(q=1.5), "q"), (dict(q=True), "q"), (dict(lr=0.0), "lr"), (dict(lr=-0.1), "lr"),
    (dict(lr=float("nan")), "lr"), (dict(L=0.0), "L"), (dict(L=float("inf")), "L"), (dict(beta2=0.5), "beta2"),
    (dict(tau_eff=0.0), "tau_eff"), (dict(a_vectors=[]), "a_vectors"), (dict(a_vectors="ab"), "a_vectors"),
    (dict(a_vectors=5), "a_vectors"), (dict(a_vectors=[[1.0, -0.5]]), r"a_vectors\[0\]"),
    (dict(a_vectors=[[1.0], [0.0, 0.0]]), "a_vectors"), (dict(a_vectors=[[1.0, np.nan]]), r"a_vectors\[0\]"),
])
def test_bad_inputs_are_refused_by_name(kwargs, name):
    args = dict(lr=0.01, L=1.0, beta2=1.0, q=4, tau_eff=2.0, a_vectors=[[1.0, 1.0]])
    args.update(kwargs)
    with pytest.raises(ValueError, match="^" + name):
        appg_step_conditions(**args)
    if "lr" not in kwargs:
        args.pop("lr")
        with pytest.raises(ValueError, match="^" + name):
            appg_max_lr(**args)


# ---------------------------------------------------------------- chapter 8's sampling runs
def _chapter8_setup():
    """Chapter 8's parameter cell and its set-up cell, executed as the chapter executes them (ci profile)."""
    require_book_module("IPython")  # the set-up cell displays with it
    cells = json.loads((ROOT / "book" / "08_theorem3_speedup.ipynb").read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    assert "parameters" in next(c for c in cells if c["cell_type"] == "code")["metadata"].get("tags", [])
    namespace: dict = {}
    exec(code[0], namespace)   # noqa: S102  the parameters
    exec(code[1], namespace)   # noqa: S102  imports, sizes, base, work
    return namespace, code


def _plain_a_vector(kind, lr, tau):
    r"""App. B's :math:`a` of chapter 8's four solvers (``make_solvers``' defaults), written out."""
    n = np.arange(tau - 1, -1, -1.0)
    return {"SGD": np.ones(tau), "momentum 0.5": (1 - 0.5 ** (n + 1)) / 0.5, "prox mu=1": (1 - lr * 1.0) ** n,
            "decayed 0.9^k": 0.9 ** np.arange(tau)}[kind]


def _plain_chapter_cell(problem, work, lr, q):
    """App. G's conditions for one sampling cell, every constant computed here without fedlib.theory."""
    from fedlib.experiments.speedup import SOLVER_NAMES

    L = max(np.linalg.eigvalsh(h).max() for h in problem.H)          # positive definite H_i
    h = np.einsum("i,ijk->jk", problem.p, problem.H)
    h2 = np.einsum("i,ijk,ikl->jl", problem.p, problem.H, problem.H)
    beta2 = max(1.0, scipy.linalg.eigh(h2, h @ h, eigvals_only=True).max())   # sum p H^2 <= beta^2 H~^2
    vectors = [_plain_a_vector(k, lr, tau) for lo, hi in zip(work.low, work.high) for tau in range(lo, hi + 1)
               for k in SOLVER_NAMES]
    mean_norms = [np.mean([_plain_a_vector(k, lr, tau).sum() for k in SOLVER_NAMES for tau in range(lo, hi + 1)])
                  for lo, hi in zip(work.low, work.high)]
    tau_eff = float(problem.p @ np.array(mean_norms))                # sum_i p_i E||a_i||_1 over the drawn work
    first, second, D, _ = _plain(lr, L, beta2, q, tau_eff, vectors)
    return L, beta2, tau_eff, (first <= 1 / (2 * tau_eff), second <= 0.5, D <= 1 / (12 * beta2 + 1)), D


def test_chapter8_sampling_step_sizes_against_app_g_conditions():
    """Every cell of chapter 8's client-sampling grid (ci profile: the large population's q and T, and the four
    clients with q = 1, 4, 16 at the middle T): ``sampling_step_conditions`` at the cell's step size reports
    the exact L, the smallest beta^2 for p, FedNova's fixed tau_eff and the verdicts of the plain computation
    (L from eigenvalues, beta^2 as a generalised eigenvalue, a_i written out). Which cells meet the conditions
    is whatever they compute; the chapter prints it (the conditions are sufficient, not necessary)."""
    from fedlib.experiments import speedup as S

    ns, code = _chapter8_setup()
    base, work, sizes = ns["base"], ns["work"], ns["sizes"]
    big = [(sizes["population_copies"], q, T) for q in sizes["clients_per_round"] for T in sizes["rounds_speedup"]]
    rounds_sat = sorted(sizes["rounds_speedup"])[len(sizes["rounds_speedup"]) // 2]
    small = [(1, q, rounds_sat) for q in (1, 4, 16)]
    for copies, q, T in big + small:
        problem, w = S.replicate(base, work, copies)
        lr = S.theorem3_lr(ns["lr_scale_speedup"], q, S.participant_mean_steps("with-replacement", problem.p, w), T)
        got = S.sampling_step_conditions(problem, w, S.make_solvers(lr), q)
        L, beta2, tau_eff, plain, D = _plain_chapter_cell(problem, w, lr, q)
        assert (got.lr, got.clients) == (lr, q)
        assert got.L == pytest.approx(L, rel=1e-10) and got.beta2 == pytest.approx(beta2, rel=1e-8)
        assert got.tau_eff == pytest.approx(tau_eff, rel=1e-12)
        assert got.conditions.D == pytest.approx(D, rel=1e-10)
        assert (got.conditions.first_holds, got.conditions.second_holds, got.conditions.D_holds) == plain
        assert (lr <= got.max_lr) == all(plain)
    # the chapter's table covers exactly these cells, from the rows its sampling grids returned
    cell = next(c for c in code if "sampling_step_conditions" in c)
    assert "for r in sampling_big + sampling_small" in cell and "S.make_solvers(r.lr), r.clients" in cell


def test_sampling_step_conditions_refuses_mismatched_inputs():
    from fedlib.experiments import speedup as S

    base, work = S.base_setup(seed=0, dim=3)
    with pytest.raises(ValueError, match="^clients_per_round"):
        S.sampling_step_conditions(base, work, S.make_solvers(0.01), 0)
    with pytest.raises(ValueError, match="^solvers"):
        S.sampling_step_conditions(base, work, S.make_solvers(0.01)[:2], 4)
    with pytest.raises(ValueError, match="^solvers"):
        S.sampling_step_conditions(base, work, [S.sgd(0.01), S.sgd(0.02), S.sgd(0.01), S.sgd(0.01)], 4)
    with pytest.raises(ValueError, match="^work"):
        S.sampling_step_conditions(S.replicate(base, work, 2)[0], work, S.make_solvers(0.01), 4)


def _appg_max_lr_exact(L, beta2, q, tau_eff, a_vectors) -> float:
    """appg_max_lr's closed form of float inputs in rational arithmetic (square root by math.isqrt to a relative
    2^-120), rounded once to float64 (inf past its range)."""
    from fractions import Fraction as F

    def sqrt(x):
        bits = max(0, (x.denominator.bit_length() - x.numerator.bit_length()) // 2) + 120
        return F(math.isqrt(x.numerator * 4 ** bits // x.denominator), 2 ** bits)

    L, beta2, tau_eff = F(L), F(beta2), F(tau_eff)
    C = max(sum(map(F, a)) * sum(map(F, a[:-1])) for a in a_vectors)
    best = 1 / (12 * tau_eff * L * (1 + beta2 / q))
    if C > 0:
        best = min(best, 1 / (2 * L * sqrt((12 * beta2 + 1) * C)))
    try:
        return float(best)
    except OverflowError:
        return math.inf


@pytest.mark.parametrize("args", [(1e-300, 1.0, 4, 1e-300, [[1.0, 1.0]]), (1e-300, 1e300, 1, 1e-300, [[1.0, 1.0]]),
                                  (1e300, 1.0, 4, 1e10, [[1.0, 1.0]]), (1.0, 1.0, 4, 1e-300, [[1e200, 1e200]]),
                                  (1.0, 1.0, 4, 1e-250, [[1e-200, 1e-200]]),
                                  (1.0, 1.0, 4, 1.0, [[1e308, 1e308, 1e308]])])
def test_appg_max_lr_where_float64_over_or_underflows_is_the_value_rounded(args):
    """App. G's largest step where an intermediate leaves float64's range: tau_eff L below ~1e-308 raised
    ZeroDivisionError (tau_eff = L = 1e-300: 9.8e298; L = 1e-300, beta2 = 1e300: 1.02e149), tau_eff L = 1e310 gave 0
    for the subnormal 6.7e-312, a C = ||a||_1 (||a||_1 - a_-1) beyond float64 gave 0 (a = (1e200, 1e200): 9.8e-202;
    a sum of entries 1e308 too: 5.7e-310), and one below it a third term inf, so the second was returned (a =
    (1e-200, 1e-200), tau_eff = 1e-250: 6.7e248 for 9.8e198). Now the exact value rounded, to a few ulps."""
    got, want = appg_max_lr(*args), _appg_max_lr_exact(*args)
    assert got == want or (np.isfinite(want) and got == pytest.approx(want, rel=1e-14, abs=0)), (got, want)


def test_appg_max_lr_of_ordinary_inputs_is_bit_for_bit_the_float64_formula():
    """The decimal check leaves ordinary steps as float64 computes them: 300 random cases."""
    rng = np.random.default_rng(99)
    for _ in range(300):
        L, tau_eff = float(10 ** rng.uniform(-5, 5)), float(10 ** rng.uniform(-2, 3))
        beta2, q = float(1 + 10 ** rng.uniform(-3, 3)), int(rng.integers(1, 50))
        a_vectors = [rng.random(int(rng.integers(1, 6))) * 10 ** rng.uniform(-3, 3) + 1e-3
                     for _ in range(int(rng.integers(1, 4)))]
        C = max(float(a.sum()) * float(a[:-1].sum()) for a in a_vectors)
        third = float("inf") if C == 0 else 1 / (2 * L * np.sqrt((12 * beta2 + 1) * C))
        plain = float(min(1 / (12 * tau_eff * L * (1 + beta2 / q)), third))
        assert appg_max_lr(L, beta2, q, tau_eff, a_vectors) == plain

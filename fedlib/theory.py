r"""Theory quantities of the paper as functions: weights, :math:`\chi^2`, slowdown,
Theorem 1's :math:`A, B, C` and its bound with App. C's constants (with Assumption 1 and
3's :math:`L, \beta^2, \kappa^2` of quadratic clients), App. G's step-size conditions under client
sampling, FedProx's closed forms, Corollary 2,
the two-client lower bound (App. D.1), the closed-form fixed points on quadratics (Lemma 1,
App. A) and, on the same quadratics, the exact round maps of the paper's §5 combinations:
cross-client variance reduction (SCAFFOLD, FedNova-VR, VRLSGD), local momentum and server
momentum.

Used by chapters 1, 2, 3, 4, 8 and 10, and through :mod:`fedlib.experiments.bounds` and
:mod:`fedlib.experiments.surrogate` by chapter 7.
"""
from __future__ import annotations

import decimal
import math
from decimal import Decimal
from typing import Any, NamedTuple, Sequence

import numpy as np

from ._validate import (check_agree, check_choice, check_count, check_finite_array, check_flag, check_int,
                        check_local_steps, check_nonnegative, check_positive, check_probability_vector, check_sequence,
                        check_weights)
from .rule import fedavg_weights, fednova_weights
from .solvers import LocalSolver

__all__ = [
    "fedavg_weights",
    "fednova_weights",
    "chi_square",
    "slowdown",
    "theorem1_constants",
    "Theorem1Terms",
    "theorem1_bound",
    "theorem1_max_beta2",
    "theorem1_explicit_bound",
    "theorem2_bound",
    "AppGStepConditions",
    "appg_step_conditions",
    "appg_max_lr",
    "ClosedFormConstants",
    "corollary1_constants",
    "fedprox_theorem1_constants",
    "fedprox_weights",
    "corollary2_best_alpha",
    "TwoClientExample",
    "two_client_lower_bound",
    "quadratic_smoothness",
    "quadratic_min_beta2",
    "quadratic_kappa2",
    "quadratic_global_optimum",
    "quadratic_local_operator",
    "quadratic_round_map",
    "quadratic_fixed_point",
    "lemma1_small_lr_limit",
    "lemma1_fixed_point",
    "quadratic_vr_round_map",
    "quadratic_vr_round_operator",
    "quadratic_vr_shift_invert",
    "quadratic_vr_eigenvalues_near",
    "EigenvalueCount",
    "quadratic_vr_count_outside",
    "quadratic_vr_fixed_point",
    "server_momentum_round_map",
    "spectral_radius",
    "leading_eigenvalues",
]


# ---------------------------------------------------------------- inconsistency
def chi_square(p: Any, w: Any) -> float:
    r"""Chi-square divergence :math:`\chi^2_{p\|w} = \sum_i (p_i - w_i)^2 / w_i` (Theorem 2).

    Zero iff :math:`w = p` (no objective inconsistency). Raises if some :math:`w_i = 0`
    while :math:`p_i > 0` (the divergence is infinite), and if it is finite but beyond float64 (a :math:`w_i`
    below about :math:`10^{-308}` where :math:`p_i` is of order 1).

    >>> chi_square([0.5, 0.5], [0.25, 0.75])
    0.3333333333333333
    """
    p = check_probability_vector("p", p)
    w = check_probability_vector("w", w, size=p.size, size_of="p")
    with np.errstate(over="ignore"):
        chi2 = _chi_square(p, w)
    if chi2 == np.inf:  # was returned as inf, with numpy's RuntimeWarning
        raise ValueError("w: chi-square overflows float64 (some w_i is so small against p_i that "
                         "(p_i - w_i)^2 / w_i exceeds 1.8e308)")
    return chi2


def _chi_square(p: np.ndarray, w: np.ndarray) -> float:
    """:func:`chi_square` of two float64 probability vectors of one size that the caller has already checked.
    Each term is :math:`d_i (d_i / w_i)`, :math:`d_i = p_i - w_i`: :math:`d_i^2` underflowed to 0 for
    :math:`|d_i| < 10^{-162}`, so p = (1/2, 1/2, 1e-170), w = (1/2, 1/2, 1e-300) gave 0 (w = p) for 1e-40. Where
    :math:`d_i / w_i` alone overflows (then :math:`|d_i| > 10^{-15}`, so :math:`d_i^2` does not underflow) the term is
    :math:`d_i^2 / w_i`, inf only where it is beyond float64 itself."""
    zero = w == 0
    if (zero & (p > 0)).any():
        raise ValueError("w: chi-square is infinite (w_i = 0 where p_i > 0)")
    keep = ~zero
    d, wk = p[keep] - w[keep], w[keep]
    with np.errstate(over="ignore"):
        terms = d * (d / wk)
    big = terms == np.inf
    if big.any():
        with np.errstate(over="ignore"):  # inf, without numpy's warning, where the term is beyond float64 itself
            terms[big] = d[big] ** 2 / wk[big]
    return float(np.sum(terms))


def _round_chi_square(omega: np.ndarray, w: np.ndarray) -> float:
    """A round's :math:`\\chi^2` of its participants' weights ``omega`` and aggregation weights ``w``, each divided
    by its sum, both checked already (finite, >= 0, positive sum: :func:`fedlib.rule.effective_weights`): normalised
    by a finite sum they are probabilities and :func:`chi_square`'s checks are skipped; a sum that overflowed still
    meets them (:meth:`fedlib.algorithms.FederatedAlgorithm.apply`, :func:`fedlib.distributed.distributed_apply`,
    :func:`fedlib.engines.quadratic.run_replicas`, every round). A :math:`\\chi^2` beyond float64 (a :math:`w_i` below
    about :math:`10^{-308}` where :math:`\\omega_i` is of order 1) is recorded as ``inf``, without a warning: it is the
    round's diagnostic, and the round itself is sound, so it is not refused as :func:`chi_square` refuses it."""
    omega_sum, w_sum = omega.sum(), w.sum()
    p, q = omega / omega_sum, w / w_sum
    return (_chi_square if omega_sum < np.inf and w_sum < np.inf else chi_square)(p, q)


def slowdown(local_steps: Any, tau_eff: float) -> float:
    r"""The slowdown :math:`\bar\tau / \tau_{\text{eff}}`, :math:`\bar\tau = \frac1m\sum_i \tau_i` (§4).

    ``local_steps`` is the (m,) :math:`\tau_i` (whole numbers :math:`\ge 1`) and ``tau_eff`` a finite number > 0
    (``ValueError`` where the ratio is beyond float64).

    Example
    -------
    Two clients of 3 proximal steps with :math:`\alpha = 1/2`: :math:`\|a_i\|_1 = (1 - 1/8)/(1/2) = 7/4`,
    so FedProx's :math:`\tau_{\text{eff}} = 7/4` and the slowdown is :math:`3/(7/4) = 12/7`:

    >>> from fractions import Fraction
    >>> Fraction(slowdown([3, 3], tau_eff=1.75)).limit_denominator()
    Fraction(12, 7)
    """
    steps = check_local_steps("local_steps", local_steps)
    tau_bar, tau_eff = float(steps.mean()), check_positive("tau_eff", tau_eff)
    ratio = tau_bar / tau_eff
    if ratio == np.inf:  # a tau_eff below about 1e-308 * tau_bar: was returned as inf
        raise ValueError(f"tau_eff: the slowdown tau_bar / tau_eff = {tau_bar!r} / {tau_eff!r} exceeds float64")
    return ratio


# ---------------------------------------------------------------- Theorem 1
def theorem1_constants(w: Any, a_vectors: Sequence[Any], tau_eff: float) -> tuple[float, float, float]:
    r"""Theorem 1's constants for weights :math:`w`, solver vectors :math:`a_i` and :math:`\tau_{\text{eff}}`:

    .. math::

        A = m\,\tau_{\text{eff}} \sum_i w_i^2 \frac{\|a_i\|_2^2}{\|a_i\|_1^2},\qquad
        B = \sum_i w_i\bigl(\|a_i\|_2^2 - a_{i,-1}^2\bigr),\qquad
        C = \max_i\bigl\{\|a_i\|_1^2 - \|a_i\|_1 a_{i,-1}\bigr\},

    :math:`a_{i,-1}` the last entry of :math:`a_i`. (The extracted paper text lacks
    the display; these are the arXiv v1 definitions, consistent with App. C's
    :math:`D = 4\eta^2L^2\max_i\{\|a_i\|_1(\|a_i\|_1 - a_{i,-1})\}` and with App. E.1:
    for FedAvg with SGD and :math:`p_i = 1/m`, :math:`A = 1`.) The max in :math:`C` runs over
    the clients with :math:`w_i > 0`: it bounds App. C's :math:`\sum_i w_i(\cdot)_i`, to which a
    client of weight 0 adds nothing (counting it would only loosen :math:`D` and refuse valid steps).
    :math:`w` must sum to 1, as Theorem 1's weights do (a ``ValueError`` otherwise). Each :math:`a_i` (and the
    entries before its last) is divided by a power of two near its largest entry where that lies outside
    :math:`[2^{-100}, 2^{100}]`, so that no square under- or overflows: entries of any finite magnitude give
    :math:`A` to rounding, and :math:`B`, :math:`C` their values rounded (0 or ``inf`` only past float64's range);
    a scaled head's term of :math:`B` is :math:`w_i`'s mantissa times the scaled square, so a subnormal :math:`w_i`
    keeps its precision too.

    ``w`` is the (m,) weights :math:`w_i` (non-negative, summing to 1); ``a_vectors`` holds one :math:`a_i` per client
    (non-negative, finite, each with a positive entry; lengths may differ); ``tau_eff`` is a finite number > 0.

    Example
    -------
    FedAvg with SGD, :math:`p = (1/2, 1/2)`, :math:`\tau = (1, 3)`: :math:`a_1 = (1)`, :math:`a_2 = (1, 1, 1)`,
    :math:`w = (1/4, 3/4)`, :math:`\tau_{\text{eff}} = 2`. Then
    :math:`A = 2 \cdot 2\,(\tfrac1{16}\cdot\tfrac11 + \tfrac9{16}\cdot\tfrac39) = 1`,
    :math:`B = \tfrac14(1 - 1) + \tfrac34(3 - 1) = 1.5`, :math:`C = \max(1 - 1, 9 - 3) = 6`
    (App. E.1: :func:`corollary1_constants` gives the same):

    >>> theorem1_constants([0.25, 0.75], [[1.0], [1.0, 1.0, 1.0]], tau_eff=2.0)
    (1.0, 1.5, 6.0)
    """
    given = w
    w = check_weights("w", w)
    if not w.sum() > 0:
        raise ValueError("w: at least one client needs a positive weight")
    w = check_probability_vector("w", given)  # Theorem 1's weights sum to 1 (unnormalised w scaled A and B)
    a_vectors = check_sequence("a_vectors", a_vectors, "one vector per client")
    if len(a_vectors) != w.size:
        raise ValueError(f"a_vectors has {len(a_vectors)} clients but w has {w.size}")
    tau_eff = check_positive("tau_eff", tau_eff)
    m = w.size
    A = B = 0.0
    C = -np.inf
    for i, (wi, a) in enumerate(zip(w, a_vectors)):
        a = check_weights(f"a_vectors[{i}]", a)
        if not a.sum() > 0:
            raise ValueError("a_vectors: every a_i needs a positive entry")
        # B and C from the entries before the last: ||a||_2^2 - a_{-1}^2 and ||a||_1 - a_{-1} cancelled where the
        # last entry dominates (proximal SGD with alpha -> 1: B was 0 for 1e-24, C 1e-4 relative off)
        # a and its head are divided by powers of two near their largest entries (1 for entries within 2^-100..2^100:
        # ordinary inputs' results are bit for bit as they were), and B's and C's terms scaled back in one ldexp:
        # the squares of entries below ~1e-162 or above ~1e154 under- or overflowed, and A was nan (0/0, inf/inf)
        scale, head_scale = _power_of_two_scale(a), _power_of_two_scale(a[:-1])
        a, head = a / scale, a[:-1] / head_scale
        l1, l2sq = a.sum(), float(np.dot(a, a))
        A += wi ** 2 * l2sq / l1 ** 2
        # a scaled head's term as w_i's mantissa times the scaled square, w_i's exponent put back with the head's:
        # w_i * ||head / 2^e||^2 fell below float64's normal range for a subnormal w_i (< 2.2e-308), rounding the
        # term to a few bits (B 10% off for w_i = 1.5e-323, a head of 1e93) before 2^(2e) scaled it back up
        w_mantissa, w_exponent = math.frexp(wi) if head_scale != 1 else (wi, 0)
        B += _ldexp(w_mantissa * float(np.dot(head, head)), 2 * _exponent(head_scale) + w_exponent)
        if wi > 0:
            C = max(C, _ldexp(float(l1 * head.sum()), _exponent(scale) + _exponent(head_scale)))
    return float(m * tau_eff * A), float(B), float(C)


def _exponent(scale: float) -> int:
    """``k`` of ``scale`` = :math:`2^k` (a scale of ``_power_of_two_scale``)."""
    return math.frexp(scale)[1] - 1


def _ldexp(x: float, k: int) -> float:
    r""":math:`x \cdot 2^k` rounded once (to a subnormal or 0 below float64's range), ``inf`` above it (``math.ldexp``
    raises ``OverflowError`` there); ``x`` itself for ``k = 0``."""
    if k == 0:
        return x
    try:
        return math.ldexp(x, k)
    except OverflowError:
        return math.inf


#: 40 significant digits and exponents to 10^(+-999999999999999999): every product, quotient and square root of
#: float64 values (and of whole numbers beyond them, such as a number of rounds) without over- or underflow
_DECIMAL = decimal.Context(prec=40, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[])


def _checked(value: float, exact: Decimal) -> float:
    r"""``value``, a quantity computed in float64, where it lies within a relative :math:`10^{-12}` of ``exact``,
    the same quantity in 40-digit decimals (``_DECIMAL``); else ``exact`` rounded to float64 (``inf`` past its
    range, a subnormal or 0 below it). Ordinary results, a few ulps from ``exact``, stay bit for bit as float64
    gives them; one whose intermediates over- or underflowed (``inf``, ``nan``, 0, or a subnormal that kept a few
    bits) gives way to the value rounded. ``value`` itself where ``exact`` is undefined (``nan``). An ``exact``
    beyond float64 is ``inf`` whatever ``value`` is (a relative tolerance of ``inf`` took any finite ``value``)."""
    if exact.is_nan():
        return float(value)
    rounded = float(exact)
    if value == rounded or (math.isfinite(rounded) and abs(value - rounded) <= 1e-12 * rounded):
        return float(value)
    return rounded


class Theorem1Terms(NamedTuple):
    r"""The four terms of Theorem 1's bound (eq. 8; constants of the O(.) set to 1 by
    :func:`theorem1_bound`, App. C's by :func:`theorem1_explicit_bound`); ``total`` is their sum.

    Fields, in the order of eq. (8): ``slowdown_term`` (the :math:`\bar\tau/\tau_{\text{eff}}` term), ``variance_term``
    (:math:`A\sigma^2`), ``local_drift_term`` (:math:`B\sigma^2`) and ``heterogeneity_term`` (:math:`C\kappa^2`).

    Example
    -------
    >>> Theorem1Terms(0.5, 0.25, 0.125, 0.125).total
    1.0
    """

    slowdown_term: float
    variance_term: float
    local_drift_term: float
    heterogeneity_term: float

    @property
    def total(self) -> float:
        return self.slowdown_term + self.variance_term + self.local_drift_term + self.heterogeneity_term


def theorem1_bound(m: int, tau_bar: float, rounds: int, tau_eff: float, A: float, B: float, C: float,
                   sigma2: float = 1.0, kappa2: float = 1.0) -> Theorem1Terms:
    r"""Theorem 1 (eq. 8) with :math:`\eta = \sqrt{m/(\bar\tau T)}` and unit constants:

    .. math::

        \frac{\bar\tau/\tau_{\text{eff}}}{\sqrt{m\bar\tau T}} + \frac{A\sigma^2}{\sqrt{m\bar\tau T}}
        + \frac{m B\sigma^2}{\bar\tau T} + \frac{m C \kappa^2}{\bar\tau T}.

    ``m`` is the number of clients (an integer :math:`\ge 1`), ``tau_bar`` :math:`\bar\tau > 0`, ``rounds``
    :math:`T \ge 1` (an integer), ``tau_eff`` :math:`\tau_{\text{eff}} > 0`; ``A``, ``B``, ``C``
    (:func:`theorem1_constants`), ``sigma2`` :math:`\sigma^2` and ``kappa2`` :math:`\kappa^2` are :math:`\ge 0`
    (``sigma2`` and ``kappa2`` default to 1). Each term is its value rounded to float64 (``inf`` only past its
    range): computed in float64 and checked against 40-digit decimals, which take over where an intermediate
    over- or underflows (a subnormal :math:`\tau_{\text{eff}}`, an :math:`m\bar\tau T` beyond float64).

    Example
    -------
    :math:`m = 1`, :math:`\bar\tau = 4`, :math:`T = 4` (so :math:`\sqrt{m\bar\tau T} = 4`,
    :math:`\bar\tau T = 16`), :math:`\tau_{\text{eff}} = 2`, :math:`A, B, C = 1, 1.5, 6`: the terms are
    :math:`(4/2)/4 = 0.5`, :math:`1/4`, :math:`1.5/16 = 0.09375` and :math:`6/16 = 0.375`:

    >>> terms = theorem1_bound(1, 4.0, 4, 2.0, A=1.0, B=1.5, C=6.0)
    >>> terms
    Theorem1Terms(slowdown_term=0.5, variance_term=0.25, local_drift_term=0.09375, heterogeneity_term=0.375)
    >>> terms.total
    1.21875
    """
    m = check_int("m", m, minimum=1)
    tau_bar = check_positive("tau_bar", tau_bar)
    T = check_int("rounds", rounds, minimum=1)
    tau_eff = check_positive("tau_eff", tau_eff)
    A, B, C = (check_nonnegative(n, v) for n, v in (("A", A), ("B", B), ("C", C)))
    sigma2, kappa2 = check_nonnegative("sigma2", sigma2), check_nonnegative("kappa2", kappa2)
    with np.errstate(all="ignore"):  # inf / inf: replaced by the decimal value below
        try:
            s = np.sqrt(m * tau_bar * T)
            terms = ((tau_bar / tau_eff) / s, A * sigma2 / s, m * B * sigma2 / (tau_bar * T),
                     m * C * kappa2 / (tau_bar * T))
        except OverflowError:  # a T beyond float64: 'int too large to convert to float'
            terms = (math.nan,) * 4
    # float64 alone: a tau_bar / tau_eff beyond float64 (tau_eff = 1e-320) made the first term inf where it is
    # 8.7e299, an m tau_bar T beyond it every term 0 (or nan), and a T beyond it raised OverflowError
    with decimal.localcontext(_DECIMAL):
        m_, tau_bar_, T_, tau_eff_ = Decimal(m), Decimal(tau_bar), Decimal(T), Decimal(tau_eff)
        s_ = (m_ * tau_bar_ * T_).sqrt()
        A_, B_, C_, sigma2_, kappa2_ = map(Decimal, (A, B, C, sigma2, kappa2))
        exact = ((tau_bar_ / tau_eff_) / s_, A_ * sigma2_ / s_, m_ * B_ * sigma2_ / (tau_bar_ * T_),
                 m_ * C_ * kappa2_ / (tau_bar_ * T_))
    return Theorem1Terms(*(_checked(float(value), x) for value, x in zip(terms, exact)))


def _check_beta2(beta2: float) -> float:
    beta2 = check_positive("beta2", beta2)
    if beta2 < 1:
        raise ValueError(f"beta2 must be >= 1 (Assumption 3), got {beta2!r}")
    return beta2


def _step_d(lr: float, L: float, C: float, C_exact: Decimal | None = None) -> float:
    r"""App. C's and App. G's :math:`D = 4\eta^2L^2C` from the dimensionless :math:`\eta L` (float arguments,
    already checked): ``lr ** 2 * L ** 2`` raised Python's ``OverflowError`` (34, 'Numerical result out of range')
    for an ``lr`` or ``L`` beyond 1.3e154 even where :math:`\eta L` is small (``lr = 1e-160``, ``L = 1e155``), and
    in place of the step-size ``ValueError`` where it is not. 0 where :math:`C = 0`, whatever :math:`\eta L`.
    ``C_exact``: :math:`C` in decimals where the float ``C`` may have over- or underflowed (``_appg_inputs``).

    :math:`D` rounded to float64: ``4 * x * x * C`` (:math:`x = \eta L`) checked against 40-digit decimals
    (``_checked``). Alone, :math:`x^2` underflowed below :math:`x \approx 10^{-162}` (:math:`x = 10^{-200}`,
    :math:`C = 10^{300}`: :math:`D = 0` for :math:`4\cdot10^{-100}`, so :math:`\beta^2_{\max} = \infty`), kept
    few bits near it (:math:`x = 10^{-160}`: :math:`D` 1e-5 relative off) and overflowed above
    :math:`10^{154}` (:math:`x = 10^{200}`, :math:`C = 10^{-300}`: ``inf`` for :math:`4\cdot10^{100}`)."""
    if C_exact is None:
        C_exact = Decimal(C)
    if C_exact == 0:
        return 0.0
    x = lr * L
    with decimal.localcontext(_DECIMAL):
        exact = 4 * (Decimal(lr) * Decimal(L)) ** 2 * C_exact
    return _checked(4 * x * x * C, exact)


def theorem1_max_beta2(lr: float, L: float, C: float) -> float:
    r"""The largest :math:`\beta^2` that App. C's step-size condition admits,
    :math:`D \le 1/(2\beta^2 + 1)` with :math:`D = 4\eta^2L^2 C`:
    :math:`\beta^2 = (1/D - 1)/2` (``inf`` when :math:`C = 0`, i.e. one local step). A
    ``ValueError`` when :math:`D > 1/3`: then no :math:`\beta^2 \ge 1` (Assumption 3) qualifies,
    the step is too large.

    Assumption 3 holds for every :math:`\beta^2` above its smallest value, with a
    :math:`\kappa^2(\beta^2)` that decreases in :math:`\beta^2`
    (:func:`quadratic_kappa2`), so this is the :math:`\beta^2` that makes
    :func:`theorem1_explicit_bound` smallest.

    Example
    -------
    :math:`\eta = 1/8`, :math:`L = 1`, :math:`C = 2`: :math:`D = 4 \cdot \tfrac1{64} \cdot 2 = 1/8`, so
    :math:`\beta^2 = (8 - 1)/2 = 3.5`; one local step (:math:`C = 0`) admits every :math:`\beta^2`;
    :math:`\eta = 1/2` gives :math:`D = 2 > 1/3`:

    >>> theorem1_max_beta2(0.125, L=1.0, C=2.0), theorem1_max_beta2(0.125, L=1.0, C=0.0)
    (3.5, inf)
    >>> theorem1_max_beta2(0.5, L=1.0, C=2.0)
    Traceback (most recent call last):
    ...
    ValueError: lr = 0.5 is too large for App. C's condition: D = 4 lr^2 L^2 C = 2 > 1/3 admits no beta^2 >= 1
    """
    lr = check_positive("lr", lr)
    L = check_positive("L", L)
    C = check_nonnegative("C", C)
    D = _step_d(lr, L, C)
    if D > (1 + 1e-12) / 3:
        raise ValueError(f"lr = {lr:.4g} is too large for App. C's condition: D = 4 lr^2 L^2 C = {D:.4g} > 1/3 "
                         "admits no beta^2 >= 1")
    # max with 1: a D within the rounding slack above 1/3 (lr exactly at the edge) gave 1 - 4e-16, which
    # theorem1_explicit_bound refused as beta2 < 1
    return float("inf") if D == 0 else max(1.0, float((1 / D - 1) / 2))


def theorem1_explicit_bound(lr: float, rounds: int, *, L: float, sigma2: float, beta2: float, kappa2: float,
                            initial_gap: float, w: Any, a_vectors: Sequence[Any], tau_eff: float) -> Theorem1Terms:
    r"""Theorem 1 with its constants (App. C, the version that keeps :math:`\eta`):

    .. math::

        \frac1T\sum_{t<T}\mathbb E\,\|\nabla\widetilde F(x^{(t,0)})\|^2 \le
        \frac{4[\widetilde F(x^{(0,0)}) - \widetilde F_{\inf}]}{\eta\,\tau_{\text{eff}}T}
        + \frac{4\eta L\sigma^2 A}{m} + 6\eta^2L^2\sigma^2 B + 12\eta^2L^2\kappa^2 C

    (so :math:`\min_t` too), with :math:`A, B, C` of :func:`theorem1_constants`, for
    :math:`\eta L\tau_{\text{eff}} \le 1/2` and
    :math:`D = 4\eta^2L^2\max_i\|a_i\|_1(\|a_i\|_1 - a_{i,-1}) \le 1/(2\beta^2+1)`
    (checked: a :class:`ValueError` says which fails). :math:`L`: Assumption 1,
    :math:`\sigma^2`: Assumption 2 (:math:`\mathbb E\|g - \nabla F_i\|^2 \le \sigma^2`),
    :math:`\beta^2 \ge 1, \kappa^2`: Assumption 3 for the weights :math:`w`.
    With :math:`\eta = \sqrt{m/(\bar\tau T)}` the four terms are those of eq. (8)
    (:func:`theorem1_bound`, the same :math:`\sigma^2, \kappa^2`) times
    :math:`4[\widetilde F(x^{(0,0)}) - \widetilde F_{\inf}]`, :math:`4L`, :math:`6L^2` and :math:`12L^2`
    (4, 4, 6 and 12 with :math:`L` and the initial gap 1).

    The extracted paper text states both conditions (App. C.4, C.6) and :math:`D`, but not the
    final display: its constants 4, 4, 6, 12 are recalled from the arXiv version (unconfirmed
    here) and match eq. (8) term by term.
    For local SGD (:math:`a_i = \mathbf 1_{\tau_i}`) it follows from this argument, which
    gives smaller constants: :math:`L`-smoothness of :math:`\widetilde F` and
    :math:`\eta L\tau_{\text{eff}} \le 1/2` give
    :math:`\|\nabla\widetilde F\|^2 \le 2\,\Delta\widetilde F/(\eta\tau_{\text{eff}})
    + 2\eta L\sigma^2 A/m + \mathbb E\|\nabla\widetilde F - \sum_i w_i h_i\|^2` per round
    (:math:`h_i` the combination :math:`a_i/\|a_i\|_1` of full gradients along client
    :math:`i`'s path); the last term is at most :math:`L^2\sum_i w_i Q_i`,
    :math:`Q_i = \frac1{\tau_i}\sum_k\mathbb E\|x_{i,k} - x\|^2
    \le [\eta^2\sigma^2(\tau_i - 1) + 2\eta^2\tau_i(\tau_i-1)\|\nabla F_i(x)\|^2]/(1 - D/2)`,
    and Assumption 3 with :math:`D\beta^2/(2-D) \le 1/2` absorbs half of
    :math:`\|\nabla\widetilde F\|^2`: the constants come out as 4, 4, 3 and 6. For other
    :math:`a_i` the chapter measures whether the bound holds. Used by chapter 7.

    ``lr`` is :math:`\eta > 0`, ``rounds`` :math:`T \ge 1` (an integer); ``L`` > 0, ``sigma2`` and ``kappa2``
    :math:`\ge 0`, ``beta2`` :math:`\ge 1`, ``initial_gap``
    :math:`\widetilde F(x^{(0,0)}) - \widetilde F_{\inf} \ge 0`; ``w``, ``a_vectors`` and ``tau_eff`` as in
    :func:`theorem1_constants`.

    Example
    -------
    Two clients of 2 SGD steps, :math:`w = (1/2, 1/2)`, :math:`\tau_{\text{eff}} = 2`: :math:`A = 1`,
    :math:`B = 1`, :math:`C = 2` (:func:`theorem1_constants`). With :math:`\eta = 1/8`, :math:`L = 1`
    (:math:`\eta L\tau_{\text{eff}} = 1/4 \le 1/2`, :math:`D = 1/8 \le 1/3`), :math:`T = 4` and unit
    :math:`\sigma^2, \kappa^2`, gap: :math:`4/(\tfrac18 \cdot 2 \cdot 4) = 4`,
    :math:`4 \cdot \tfrac18 / 2 = 0.25`, :math:`6/64 = 0.09375`, :math:`12 \cdot 2/64 = 0.375`:

    >>> theorem1_explicit_bound(0.125, 4, L=1.0, sigma2=1.0, beta2=1.0, kappa2=1.0, initial_gap=1.0,
    ...                         w=[0.5, 0.5], a_vectors=[[1.0, 1.0], [1.0, 1.0]], tau_eff=2.0)
    Theorem1Terms(slowdown_term=4.0, variance_term=0.25, local_drift_term=0.09375, heterogeneity_term=0.375)
    """
    lr = check_positive("lr", lr)
    T = check_int("rounds", rounds, minimum=1)
    L = check_positive("L", L)
    sigma2 = check_nonnegative("sigma2", sigma2)
    beta2 = _check_beta2(beta2)
    kappa2 = check_nonnegative("kappa2", kappa2)
    initial_gap = check_nonnegative("initial_gap", initial_gap)
    w = check_probability_vector("w", w)
    A, B, C = theorem1_constants(w, a_vectors, tau_eff)
    # the product rounds: lr = 1/(2 L tau_eff) itself gave 0.5000000000000001 (L = 0.7, tau_eff = 7) and was refused
    if lr * L * tau_eff > 0.5 and lr > 0.5 / (L * tau_eff):
        raise ValueError(f"lr: Theorem 1 needs eta L tau_eff <= 1/2, got {lr * L * tau_eff:.4g}")
    D = _step_d(lr, L, C)
    if D > (1 + 1e-12) / (2 * beta2 + 1):  # (rounding: theorem1_max_beta2 meets it with equality)
        raise ValueError(f"lr: Theorem 1 needs D = 4 eta^2 L^2 C <= 1/(2 beta^2 + 1) = {1 / (2 * beta2 + 1):.4g}, "
                         f"got {D:.4g}")
    m = w.size
    x = lr * L  # not lr ** 2 * L ** 2: OverflowError past 1.3e154 (_step_d)
    try:
        terms = (4 * initial_gap / (lr * tau_eff * T), 4 * lr * L * sigma2 * A / m, 6 * x * x * sigma2 * B,
                 12 * x * x * kappa2 * C)
    except (OverflowError, ZeroDivisionError):  # a T beyond float64; an lr tau_eff T below it
        terms = (math.nan,) * 4
    # float64 alone, as in _step_d: x * x underflowed (lr L = 1e-200, sigma2 B = 1e300: the third term 0 for
    # 6e-100), lr tau_eff T = 0 raised ZeroDivisionError (lr = tau_eff = 1e-200)
    with decimal.localcontext(_DECIMAL):
        lr_, L_, T_ = Decimal(lr), Decimal(L), Decimal(T)
        x_ = lr_ * L_
        exact = (4 * Decimal(initial_gap) / (lr_ * Decimal(tau_eff) * T_), 4 * x_ * Decimal(sigma2) * Decimal(A) / m,
                 6 * x_ * x_ * Decimal(sigma2) * Decimal(B), 12 * x_ * x_ * Decimal(kappa2) * Decimal(C))
    return Theorem1Terms(*(_checked(float(value), e) for value, e in zip(terms, exact)))


def theorem2_bound(chi2: float, beta2: float, kappa2: float, surrogate_grad2: float) -> float:
    r"""Theorem 2 (App. D), the bound on the true objective's gradient from the surrogate's:

    .. math::

        \|\nabla F(x)\|^2 \le 2\bigl[\chi^2_{p\|w}(\beta^2 - 1) + 1\bigr]\,\|\nabla\widetilde F(x)\|^2
        + 2\chi^2_{p\|w}\kappa^2

    for every :math:`x` (so also for averages of expectations, with Theorem 1's bound for
    :math:`\|\nabla\widetilde F\|^2`). It follows from
    :math:`\nabla F - \nabla\widetilde F = \sum_i (p_i - w_i)(\nabla F_i - \nabla\widetilde F)`,
    Cauchy–Schwarz, Assumption 3 with the weights :math:`w` and
    :math:`\|u + v\|^2 \le 2\|u\|^2 + 2\|v\|^2`. ``surrogate_grad2`` is
    :math:`\|\nabla\widetilde F\|^2` (or a bound on it). Chapter 2 states the theorem and shows its
    :math:`\chi^2\kappa^2` floor attained (:func:`two_client_lower_bound`); chapter 7 evaluates this bound
    (through :func:`fedlib.experiments.bounds.bound_check`).

    ``chi2`` is :math:`\chi^2_{p\|w} \ge 0` (:func:`chi_square`), ``beta2`` :math:`\beta^2 \ge 1` and ``kappa2``
    :math:`\kappa^2 \ge 0`; each is checked (``ValueError`` naming it).

    Example
    -------
    At a stationary point of the surrogate (:math:`\|\nabla\widetilde F\|^2 = 0`) only the floor
    :math:`2\chi^2\kappa^2` is left: :math:`2 \cdot \tfrac18 \cdot 1 = 0.25`. With :math:`\beta^2 = 3` and
    :math:`\|\nabla\widetilde F\|^2 = 1` (so :math:`\beta^2 - 1 = 2`): :math:`2(\tfrac18 \cdot 2 + 1) + 0.25 = 2.75`:

    >>> theorem2_bound(0.125, beta2=1.0, kappa2=1.0, surrogate_grad2=0.0)
    0.25
    >>> theorem2_bound(0.125, beta2=3.0, kappa2=1.0, surrogate_grad2=1.0)
    2.75
    """
    chi2 = check_nonnegative("chi2", chi2)
    beta2 = _check_beta2(beta2)
    kappa2 = check_nonnegative("kappa2", kappa2)
    surrogate_grad2 = check_nonnegative("surrogate_grad2", surrogate_grad2)
    return float(2 * (chi2 * (beta2 - 1) + 1) * surrogate_grad2 + 2 * chi2 * kappa2)


# ---------------------------------------------------------------- App. G: client sampling
class AppGStepConditions(NamedTuple):
    r"""App. G's step-size conditions (:func:`appg_step_conditions`): each left-hand side and whether it holds.

    ``first`` is :math:`2\tau_{\text{eff}}\eta L` (:math:`\eta L \le 1/(2\tau_{\text{eff}})` iff it is
    :math:`\le 1`), ``second`` :math:`6\tau_{\text{eff}}\eta L(1 + \beta^2/q)` (:math:`\le \frac12`),
    ``D`` :math:`4\eta^2L^2\max_i\|a_i\|_1(\|a_i\|_1 - a_{i,-1})` and ``D_threshold``
    :math:`1/(12\beta^2+1)`.

    ``first_holds``, ``second_holds`` and ``D_holds`` say whether each condition is met (within a relative
    :math:`10^{-12}`).

    Example
    -------
    :math:`\eta = 0.01`, :math:`L = \beta^2 = 1`, :math:`q = 4`, :math:`\tau_{\text{eff}} = 2`, one client with
    :math:`a = (1, 1)`: ``first`` :math:`= 2 \cdot 2 \cdot 0.01 = 0.04`, ``second``
    :math:`= 6 \cdot 2 \cdot 0.01 \cdot (1 + 1/4) = 0.15`, ``D`` :math:`= 4 \cdot 10^{-4} \cdot 2(2 - 1) = 0.0008`
    against :math:`1/13`:

    >>> c = appg_step_conditions(0.01, 1.0, 1.0, 4, 2.0, [[1.0, 1.0]])
    >>> round(c.first, 12), round(c.second, 12), round(c.D, 12), round(13 * c.D_threshold, 12), c.holds
    (0.04, 0.15, 0.0008, 1.0, True)
    """

    first: float
    second: float
    D: float
    D_threshold: float
    first_holds: bool
    second_holds: bool
    D_holds: bool

    @property
    def holds(self) -> bool:
        """All three conditions hold."""
        return self.first_holds and self.second_holds and self.D_holds


def _appg_inputs(L, beta2, q, tau_eff, a_vectors) -> tuple[float, float, int, float, float, Decimal]:
    r""":math:`L, \beta^2, q, \tau_{\text{eff}}` checked, and :math:`C = \max_i\|a_i\|_1(\|a_i\|_1 - a_{i,-1})`
    over every given :math:`a_i`, in float64 and in 40-digit decimals (``_DECIMAL``: the float64 product over- or
    underflows for entries beyond about :math:`10^{\pm 154}`)."""
    L = check_positive("L", L)
    beta2 = _check_beta2(beta2)
    q = check_int("q", q, minimum=1)
    tau_eff = check_positive("tau_eff", tau_eff)
    a_vectors = check_sequence("a_vectors", a_vectors, "one vector per client",
                               empty="a_vectors must hold at least one client's a_i")
    C = 0.0
    C_exact = Decimal(0)
    for i, a in enumerate(a_vectors):
        a = check_weights(f"a_vectors[{i}]", a)
        with np.errstate(over="ignore"):  # a sum beyond float64: summed in decimals below
            l1, head_sum = float(a.sum()), float(a[:-1].sum())
        if l1 <= 0:
            raise ValueError("a_vectors: every a_i needs a positive entry")
        C = max(C, l1 * head_sum)  # not l1 - a_{-1}, which cancels where the last entry dominates
        with decimal.localcontext(_DECIMAL):
            sums = [Decimal(x) if x < math.inf else sum(map(Decimal, v.tolist()), Decimal(0))
                    for x, v in ((l1, a), (head_sum, a[:-1]))]
            C_exact = max(C_exact, sums[0] * sums[1])
    return L, beta2, q, tau_eff, C, C_exact


def appg_step_conditions(lr: float, L: float, beta2: float, q: int, tau_eff: float,
                         a_vectors: Sequence[Any]) -> AppGStepConditions:
    r"""The step-size conditions of App. G (FedNova with :math:`q` clients sampled per round with
    replacement, the corollary of Theorem 3), as the extracted paper text states them:

    .. math::

        \eta L \le \frac{1}{2\tau_{\text{eff}}},\qquad
        6\tau_{\text{eff}}\eta L + 6\tau_{\text{eff}}\eta L\frac{\beta^2}{q} \le \frac12,\qquad
        D = 4\eta^2L^2\max_i\bigl\{\|a_i\|_1(\|a_i\|_1 - a_{i,-1})\bigr\} \le \frac{1}{12\beta^2+1},

    :math:`a_{i,-1}` the last entry of :math:`a_i`, the max over every client that can be sampled
    (every given :math:`a_i`). The last gives :math:`D < 1`, :math:`1/(1-D) \le 1 + 1/(12\beta^2) \le 2`
    and :math:`3D\beta^2/(1-D) \le 1/4`, the facts the proof uses. :math:`L`: Assumption 1,
    :math:`\beta^2 \ge 1`: Assumption 3 (the larger :math:`\beta^2`, the stricter the second and third
    condition; a larger :math:`q` loosens the second); :math:`q \ge 1` the number of draws per round.
    The second condition implies the first (:math:`6(1 + \beta^2/q) > 1`); both are reported. A
    condition counts as met within a relative :math:`10^{-12}` (rounding: :func:`appg_max_lr`'s step meets
    the binding one with equality).

    The text states these conditions and :math:`D`, not the explicit sampled bound they lead to
    nor Lemma 5 (lost with the displayed equations); App. G's rate with
    :math:`\eta = \sqrt{q/(\tilde\tau T)}` is measured in chapter 8, which also prints whether its
    sampling runs' step sizes meet these conditions
    (:func:`fedlib.experiments.speedup.sampling_step_conditions`).

    ``lr`` is :math:`\eta > 0`, ``L`` > 0, ``beta2`` :math:`\beta^2 \ge 1`, ``q`` an integer :math:`\ge 1`,
    ``tau_eff`` a finite number > 0 and ``a_vectors`` one non-empty :math:`a_i` per client (non-negative, each with a
    positive entry; at least one client).

    >>> c = appg_step_conditions(0.01, 1.0, 1.0, 4, 2.0, [[1.0, 1.0]])
    >>> round(c.second, 12), c.holds
    (0.15, True)
    """
    lr = check_positive("lr", lr)
    L, beta2, q, tau_eff, C, C_exact = _appg_inputs(L, beta2, q, tau_eff, a_vectors)
    with decimal.localcontext(_DECIMAL):  # (products that leave float64's range: _step_d)
        first_ = 2 * Decimal(tau_eff) * Decimal(lr) * Decimal(L)
        first = _checked(2 * tau_eff * lr * L, first_)
        second = _checked(6 * tau_eff * lr * L * (1 + beta2 / q), 3 * first_ * (1 + Decimal(beta2) / q))
    D = _step_d(lr, L, C, C_exact)
    threshold = 1 / (12 * beta2 + 1)
    slack = 1 + 1e-12
    return AppGStepConditions(float(first), float(second), float(D), float(threshold), bool(first <= slack),
                              bool(second <= 0.5 * slack), bool(D <= threshold * slack))


def appg_max_lr(L: float, beta2: float, q: int, tau_eff: float, a_vectors: Sequence[Any]) -> float:
    r"""The largest :math:`\eta` that meets all of :func:`appg_step_conditions` (App. G) for the given
    :math:`L, \beta^2, q, \tau_{\text{eff}}` and :math:`a_i` held fixed:

    .. math::

        \eta_{\max} = \min\Bigl\{\frac{1}{12\tau_{\text{eff}}L(1 + \beta^2/q)},\;
        \frac{1}{2L\sqrt{(12\beta^2+1)\max_i\|a_i\|_1(\|a_i\|_1 - a_{i,-1})}}\Bigr\}

    (the first condition, :math:`\eta \le 1/(2\tau_{\text{eff}}L)`, is never the binding one; the
    second term is ``inf`` when the max is 0, e.g. when every :math:`a_i` has one entry). Where :math:`a_i` and
    :math:`\tau_{\text{eff}}` themselves depend on :math:`\eta` (proximal SGD's :math:`\alpha = \eta\mu`),
    they must be recomputed at the returned step and checked again.

    ``L``, ``beta2``, ``q``, ``tau_eff`` and ``a_vectors`` are checked as in
    :func:`fedlib.theory.appg_step_conditions`. The result is :math:`\eta_{\max}` rounded to float64 (``inf`` only
    past its range): computed in float64 and checked against 40-digit decimals, which take over where an
    intermediate over- or underflows (:math:`\tau_{\text{eff}}L` or :math:`C` beyond about :math:`10^{\pm 308}`).

    >>> appg_max_lr(1.0, 1.0, 4, 2.0, [[1.0, 1.0]])
    0.03333333333333333
    """
    L, beta2, q, tau_eff, C, C_exact = _appg_inputs(L, beta2, q, tau_eff, a_vectors)
    with np.errstate(divide="ignore"):  # 1 / 0: replaced by the decimal value below
        denominator = 12 * tau_eff * L * (1 + beta2 / q)
        second = 1 / denominator if denominator > 0 else math.inf
        third = math.inf if C == 0 else 1 / (2 * L * np.sqrt((12 * beta2 + 1) * C))
    # float64 alone: a tau_eff L below ~2e-325, where 12 tau_eff L underflows to 0, raised ZeroDivisionError
    # (tau_eff = L = 1e-300), one above ~1e308 gave 0 for a subnormal step, and a C that over- or underflowed (a_i
    # entries of 1e200 or 1e-200) gave a third term 0 or inf
    with decimal.localcontext(_DECIMAL):
        L_, beta2_ = Decimal(L), Decimal(beta2)
        exact = 1 / (12 * Decimal(tau_eff) * L_ * (1 + beta2_ / q))
        if C_exact > 0:
            exact = min(exact, 1 / (2 * L_ * ((12 * beta2_ + 1) * C_exact).sqrt()))
    return _checked(float(min(second, third)), exact)


# ---------------------------------------------------------------- FedProx
def fedprox_weights(p: Any, local_steps: Any, alpha: float) -> tuple[float, np.ndarray]:
    r"""FedProx's implicit :math:`(\tau_{\text{eff}}, w)` as a function of :math:`\alpha = \eta\mu` (eq. 7):

    .. math::

        \tau_{\text{eff}} = \sum_i p_i \frac{1-(1-\alpha)^{\tau_i}}{\alpha},\qquad
        w_i = \frac{p_i[1-(1-\alpha)^{\tau_i}]}{\sum_j p_j[1-(1-\alpha)^{\tau_j}]},

    with the :math:`\alpha \to 0` limit (FedAvg: :math:`\|a_i\|_1 = \tau_i`) at :math:`\alpha = 0`.
    :math:`\alpha = 1` gives :math:`\tau_{\text{eff}} = 1`, :math:`w = p` (consistent, slowest).

    ``p`` is the (m,) client weights (summing to 1), ``local_steps`` the (m,) :math:`\tau_i` (whole numbers
    :math:`\ge 1`) and ``alpha`` :math:`\alpha = \eta\mu \in [0, 1]`.

    Example
    -------
    :math:`p = (1/2, 1/2)`, :math:`\tau = (1, 3)`, :math:`\alpha = 1/2`: :math:`\|a\|_1 = (1, 7/4)`,
    :math:`\tau_{\text{eff}} = 11/8 = 1.375` and :math:`w = (1/2, 7/8)/(11/8) = (4/11, 7/11)`, between
    FedAvg's :math:`(1/4, 3/4)` at :math:`\alpha = 0` and :math:`p` at :math:`\alpha = 1`:

    >>> from fractions import Fraction
    >>> tau_eff, w = fedprox_weights([0.5, 0.5], [1, 3], alpha=0.5)
    >>> tau_eff, [Fraction(x).limit_denominator() for x in w]
    (1.375, [Fraction(4, 11), Fraction(7, 11)])
    >>> fedprox_weights([0.5, 0.5], [1, 3], alpha=0.0), fedprox_weights([0.5, 0.5], [1, 3], alpha=1.0)
    ((2.0, array([0.25, 0.75])), (1.0, array([0.5, 0.5])))
    """
    p = check_probability_vector("p", p)
    steps = check_local_steps("local_steps", local_steps, size=p.size, size_of="p").astype(np.float64)
    alpha = check_nonnegative("alpha", alpha)
    if alpha > 1:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha!r}")
    return fedavg_weights(p, _prox_a_norms(steps, alpha))


class ClosedFormConstants(NamedTuple):
    r"""An algorithm's implicit :math:`(\tau_{\text{eff}}, w)` (eq. 6) and Theorem 1's :math:`A, B, C` in closed form.

    Example
    -------
    FedAvg with 2 SGD steps on each of two equal clients (App. E.1): :math:`\tau_{\text{eff}} = 2`,
    :math:`w = p`, :math:`A = 1`, :math:`B = \tau - 1 = 1`, :math:`C = \tau(\tau - 1) = 2`:

    >>> corollary1_constants([2, 2])
    ClosedFormConstants(tau_eff=2.0, weights=array([0.5, 0.5]), A=1.0, B=1.0, C=2.0)
    """

    tau_eff: float
    weights: np.ndarray
    A: float
    B: float
    C: float


def corollary1_constants(local_steps: Any) -> ClosedFormConstants:
    r"""App. E.1 (Corollary 1): FedAvg with local SGD and :math:`p_i = 1/m`, in closed form:

    .. math::

        \tau_{\text{eff}} = \bar\tau,\quad w_i = \frac{\tau_i}{\sum_j\tau_j},\quad A = 1,\quad
        B = \bar\tau - 1 + \frac{\operatorname{var}[\tau]}{\bar\tau},\quad C = \max_i \tau_i(\tau_i - 1),

    :math:`\operatorname{var}[\tau] = \sum_i\tau_i^2/m - \bar\tau^2` (the paper's variance of the
    local steps). The surrogate is :math:`\widetilde F = \sum_i\tau_i F_i/\sum_i\tau_i`; with
    :math:`\tau_i = \tau` the variance vanishes (:math:`B = \tau - 1`, the homogeneous results) and with
    :math:`\tau_i = 1` :math:`B = C = 0` (synchronous SGD, :math:`1/\sqrt{mT}`). The extracted text lacks
    eq. (125)'s display: :math:`A, B, C` here are :func:`theorem1_constants` of
    :math:`a_i = \mathbf 1_{\tau_i}` evaluated by hand, :math:`B = \sum_i\tau_i(\tau_i-1)/\sum_j\tau_j`.

    ``local_steps`` is the (m,) :math:`\tau_i`, whole numbers :math:`\ge 1`.

    >>> c = corollary1_constants([1, 3])
    >>> c.tau_eff, c.A, c.B, c.C
    (2.0, 1.0, 1.5, 6.0)
    """
    steps = check_local_steps("local_steps", local_steps).astype(np.float64)
    tau_bar = float(steps.mean())
    var = float(np.mean(steps ** 2) - tau_bar ** 2)
    return ClosedFormConstants(tau_bar, steps / steps.sum(), 1.0, tau_bar - 1.0 + var / tau_bar,
                               float(np.max(steps * (steps - 1.0))))


def fedprox_theorem1_constants(p: Any, local_steps: Any, alpha: float) -> ClosedFormConstants:
    r"""App. E.2: FedProx's (proximal SGD, :math:`\alpha = \eta\mu`, FedAvg's aggregation)
    :math:`\tau_{\text{eff}}, w` and Theorem 1's :math:`A, B, C` in closed form. With
    :math:`a_i = [(1-\alpha)^{\tau_i-1}, \dots, 1-\alpha, 1]` (App. B.1),
    :math:`s_i = \|a_i\|_1 = [1-(1-\alpha)^{\tau_i}]/\alpha`,
    :math:`q_i = \|a_i\|_2^2 = [1-(1-\alpha)^{2\tau_i}]/[\alpha(2-\alpha)]` and :math:`a_{i,-1} = 1`:

    .. math::

        \tau_{\text{eff}} = \sum_i p_i s_i,\quad w_i = \frac{p_i s_i}{\tau_{\text{eff}}},\quad
        A = \frac{m\sum_i p_i^2 q_i}{\tau_{\text{eff}}},\quad B = \sum_i w_i (q_i - 1),\quad
        C = \max_{i:\,p_i>0} (s_i^2 - s_i).

    At :math:`\alpha = 0` (the L'Hospital limits of App. E.2) :math:`s_i = q_i = \tau_i`: FedAvg's
    constants (:func:`corollary1_constants` when :math:`p_i = 1/m`); at :math:`\alpha = 1`
    :math:`s_i = q_i = 1`: :math:`\tau_{\text{eff}} = 1`, :math:`w = p`, :math:`B = C = 0`. The
    extracted text lacks the display (eq. 127); these are :func:`theorem1_constants` of App. B.1's
    :math:`a_i` summed in closed form.

    ``p`` is the (m,) client weights (summing to 1), ``local_steps`` the (m,) :math:`\tau_i` (whole numbers
    :math:`\ge 1`) and ``alpha`` :math:`\alpha = \eta\mu \in [0, 1]`.

    >>> c = fedprox_theorem1_constants([0.5, 0.5], [1, 3], 0.0)
    >>> c.tau_eff, c.A, c.B, c.C
    (2.0, 1.0, 1.5, 6.0)
    """
    p = check_probability_vector("p", p)
    steps = check_local_steps("local_steps", local_steps, size=p.size, size_of="p").astype(np.float64)
    alpha = check_nonnegative("alpha", alpha)
    if alpha > 1:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha!r}")
    s = _prox_a_norms(steps, alpha)
    # s_i - 1 and q_i - 1 as sums of their own (the entries before the last, sum_{k=1}^{tau_i-1} (1-alpha)^k and
    # (1-alpha)^{2k}): s^2 - s and q - 1 cancelled as alpha -> 1 (alpha = 1 - 1e-12: B 0.0 for 1e-24, C 1e-4 off)
    if alpha == 0:
        q = steps.copy()
        s_head = q_head = steps - 1.0
    elif alpha < 1:
        q = -np.expm1(2 * steps * np.log1p(-alpha)) / (alpha * (2 - alpha))
        r = 1.0 - alpha
        s_head = r * -np.expm1((steps - 1.0) * np.log1p(-alpha)) / alpha
        q_head = r * r * -np.expm1(2 * (steps - 1.0) * np.log1p(-alpha)) / (alpha * (2 - alpha))
    else:
        q = np.ones(steps.size)
        s_head = q_head = np.zeros(steps.size)
    tau_eff = float(p @ s)
    w = p * s / tau_eff
    A = p.size * float(p ** 2 @ q) / tau_eff
    B = float(w @ q_head)
    C = float(np.max((s * s_head)[p > 0]))
    return ClosedFormConstants(tau_eff, w, A, B, C)


def corollary2_best_alpha(m: int, tau_bar: float, rounds: int, constant: float = 1.0) -> float:
    r"""Corollary 2: :math:`\alpha^\star = c\, m^{1/2} / (\bar\tau^{1/2} T^{1/6})` minimises FedProx's
    bound, clipped to :math:`[0, 1]`.

    The paper gives the order only, and the default ``constant`` :math:`c = 1` is that order
    alone. With :func:`theorem1_bound`'s unit constants,
    :math:`p_i = 1/m`, :math:`\tau_i = \bar\tau` and :math:`\alpha\bar\tau \gg 1` (so
    :math:`(1-\alpha)^{\bar\tau} \approx 0`): :math:`\tau_{\text{eff}} \approx 1/\alpha`,
    :math:`A \approx \frac12`, :math:`B \approx 1/(2\alpha)`, :math:`C \approx 1/\alpha^2`; the
    slowdown term :math:`\alpha\bar\tau/\sqrt{m\bar\tau T}` against the heterogeneity term
    :math:`m\kappa^2/(\alpha^2\bar\tau T)` gives :math:`c = (2\kappa^2)^{1/3}` (the :math:`B` term is
    smaller by a factor :math:`\alpha\sigma^2/(2\kappa^2)`) — :math:`c = 2^{1/3}` at
    :func:`theorem1_bound`'s default :math:`\kappa^2 = 1`. Chapter 3 and the tests compare that
    with the numerical minimiser :func:`fedlib.tradeoff.fedprox_bound_best_alpha`.

    A limit of the paper's statement: App. E.2 asks for :math:`T \ge O((m\bar\tau T)^{3/4})`, i.e.
    :math:`T \ge O((m\bar\tau)^3)`, for the :math:`1/\sqrt{m\bar\tau T}` term to dominate; there
    :math:`\alpha^\star\bar\tau = c\,(m\bar\tau)^{1/2}T^{-1/6} \le O(c)`, outside the
    :math:`\alpha\bar\tau \gg 1` relaxations this :math:`\alpha^\star` is derived from, and the
    numerical minimiser drifts far below it (``tests/test_paper_claims_inventory.py``).

    ``m`` is the number of clients (an integer :math:`\ge 1`), ``tau_bar`` :math:`\bar\tau > 0`, ``rounds``
    :math:`T \ge 1` (an integer) and ``constant`` :math:`c > 0`.

    Example
    -------
    :math:`m = 4`, :math:`\bar\tau = 16`, :math:`T = 64`: :math:`\alpha^\star = 2/(4 \cdot 2) = 1/4`; with
    :math:`m = 100`, :math:`\bar\tau = T = 1` the order is 10, clipped to 1:

    >>> round(corollary2_best_alpha(4, 16.0, 64), 12), corollary2_best_alpha(100, 1.0, 1)
    (0.25, 1.0)
    """
    m = check_int("m", m, minimum=1)
    tau_bar = check_positive("tau_bar", tau_bar)
    T = check_int("rounds", rounds, minimum=1)
    c = check_positive("constant", constant)
    return float(min(1.0, c * np.sqrt(m) / (np.sqrt(tau_bar) * T ** (1.0 / 6.0))))


# ---------------------------------------------------------------- App. D.1
class TwoClientExample(NamedTuple):
    r"""App. D.1's example (:func:`two_client_lower_bound`): FedAvg's weights, :math:`\chi^2_{p\|w}`,
    :math:`\kappa^2`, the limit :math:`\tilde x` and :math:`\|\nabla F(\tilde x)\|^2`, which equals the
    :math:`\chi^2\kappa^2` floor.

    Fields: ``weights`` (FedAvg's :math:`w`), ``chi2`` (:math:`\chi^2_{p\|w}`), ``kappa2`` (:math:`\kappa^2`),
    ``x_limit`` (:math:`\tilde x`) and ``grad_norm_sq`` (:math:`\|\nabla F(\tilde x)\|^2 = \tilde x^2`).

    Example
    -------
    >>> ex = two_client_lower_bound(1, 3)
    >>> ex.grad_norm_sq, round(ex.chi2 * ex.kappa2, 12)
    (0.25, 0.25)
    """

    weights: np.ndarray
    chi2: float
    kappa2: float
    x_limit: float
    grad_norm_sq: float


def two_client_lower_bound(tau1: int, tau2: int, a: float = 1.0) -> TwoClientExample:
    r"""Two clients, :math:`F_1 = \frac12(x-a)^2`, :math:`F_2 = \frac12(x+a)^2` (the paper's text writes
    :math:`\frac12(w+a)^2`, a typo for :math:`x`), :math:`p = (\frac12, \frac12)`,
    FedAvg with :math:`\tau_1, \tau_2` local GD steps as :math:`\eta \to 0` (App. D.1).

    :math:`w_i = \tau_i/(\tau_1+\tau_2)`, :math:`\chi^2_{p\|w} = (\tau_2-\tau_1)^2/(4\tau_1\tau_2)`
    (the definition evaluated; the paper writes :math:`/(2\tau_1\tau_2)`), :math:`\kappa^2 = 4 w_1 w_2 a^2`
    (the smallest :math:`\kappa^2` of Assumption 3 with :math:`\beta^2 = 1`, since
    :math:`\sum_i w_i (x \mp a)^2 - (\sum_i w_i (x \mp a))^2 = 4w_1w_2a^2`; the paper writes
    :math:`2w_1w_2a^2` — the two factors of 2 cancel), limit
    :math:`\tilde x = a(\tau_1-\tau_2)/(\tau_1+\tau_2)` and
    :math:`\|\nabla F(\tilde x)\|^2 = \tilde x^2 = \chi^2\kappa^2`: the floor is attained.

    ``tau1`` and ``tau2`` are :math:`\tau_1, \tau_2`, whole numbers :math:`\ge 1`; ``a`` > 0 (default 1), below about
    :math:`1.3 \cdot 10^{154}` (:math:`a^2` beyond float64 is a ``ValueError`` naming ``a``).

    Example
    -------
    :math:`\tau = (1, 3)`, :math:`a = 1`: :math:`w = (1/4, 3/4)`, :math:`\chi^2 = 2^2/(4 \cdot 3) = 1/3`,
    :math:`\kappa^2 = 4 \cdot \tfrac3{16} = 3/4`, :math:`\tilde x = (1 - 3)/4 = -1/2` and
    :math:`\|\nabla F(\tilde x)\|^2 = 1/4 = \chi^2\kappa^2`:

    >>> two_client_lower_bound(1, 3)
    TwoClientExample(weights=array([0.25, 0.75]), chi2=0.333..., kappa2=0.75, x_limit=-0.5, grad_norm_sq=0.25)
    """
    t1 = check_count("tau1", tau1, minimum=1)
    t2 = check_count("tau2", tau2, minimum=1)
    a = check_positive("a", a)
    w = np.array([t1, t2], dtype=np.float64) / (t1 + t2)
    # in integers, correctly rounded: chi_square of the rounded w cancelled in 1/2 - w_i (tau = (1e7, 1e7 + 1): 1e-9 off)
    chi2 = (t2 - t1) ** 2 / (4 * t1 * t2)
    a2 = a * a  # a ** 2 raised Python's OverflowError (34, 'Numerical result out of range') from a = 1.35e154 on
    if a2 == np.inf:
        raise ValueError(f"a: kappa^2 = 4 w_1 w_2 a^2 and the floor are of order a^2, beyond float64 for a = {a!r} "
                         "(a must be below about 1.3e154)")
    kappa2 = 4 * w[0] * w[1] * a2
    x = a * (t1 - t2) / (t1 + t2)
    return TwoClientExample(w, chi2, float(kappa2), float(x), float(x * x))


# ---------------------------------------------------------------- quadratics
#: :func:`_check_quadratic`'s default for a caller that takes no step counts (``None`` given for them is checked)
_NO_STEPS = object()


def _check_quadratic(H, e, p, local_steps=_NO_STEPS, weights_name: str = "p"):
    H = check_finite_array("H", H, ndim=3)
    m, d, d2 = H.shape
    if d != d2:
        raise ValueError(f"H must have shape (m, d, d), got {H.shape}")
    if d == 0:  # an empty problem: its fixed points, round maps and optimum were [] without a word
        raise ValueError(f"H must have shape (m, d, d) with d >= 1, got {H.shape}")
    # H's own shape is checked first and gives m and d: the others are measured against it, each message naming
    # both ("e must have shape (3, 2)" blamed e when H had the client too many)
    e = check_finite_array("e", e)
    if e.ndim != 2:
        raise ValueError(f"e must have shape {(m, d)}, got {e.shape}")
    check_agree("e", e.shape[0], "H", m, "clients (rows)")
    check_agree("e", e.shape[1], "H", d, "columns (d)")
    p = check_probability_vector(weights_name, p, size=m, size_of="H")
    _check_symmetric("H", H)
    # a caller that takes local_steps needs them: None was let through and failed deep inside as
    # AttributeError ('NoneType' object has no attribute 'astype')
    steps = None if local_steps is _NO_STEPS else check_local_steps("local_steps", local_steps, size=m, size_of="H")
    return H, e, p, steps


def _check_symmetric(name: str, H: np.ndarray) -> None:
    r"""Refuse a stack ``H`` (m, d, d) with a non-symmetric matrix: :math:`F_i = \frac12 x^\top H_i x - e_i^\top x` has
    the Hessian :math:`(H_i + H_i^\top)/2`, not :math:`H_i`, so a formula in :math:`H_i` would silently be another
    problem's. The test is relative to each :math:`H_i`'s own size (rounding leaves ~1e-16 of it), so any scale of
    ``H`` is judged alike."""
    asymmetry = np.abs(H - np.transpose(H, (0, 2, 1))).max(axis=(1, 2), initial=0.0)
    bad = np.flatnonzero(asymmetry > 1e-10 * np.abs(H).max(axis=(1, 2), initial=0.0))
    if bad.size:
        gap = f"max |{name} - {name}^T| = {asymmetry[bad[0]]:.3g}"
        raise ValueError(f"{name} must be symmetric ({gap})" if name == "H_i" else
                         f"{name}: every H_i must be symmetric; {name}_{bad[0]} is not ({gap})")


def quadratic_smoothness(H: Any) -> float:
    r"""Assumption 1's :math:`L = \max_i \|H_i\|_2 = \max_i \max|\lambda(H_i)|` of quadratic
    clients (:math:`\|\nabla F_i(x) - \nabla F_i(y)\| = \|H_i(x-y)\| \le L\|x-y\|`; for positive
    semi-definite :math:`H_i` the largest eigenvalue). Each :math:`H_i` must be symmetric (``ValueError`` otherwise).

    ``H`` is the (m, d, d) stack of symmetric :math:`H_i`, :math:`m, d \ge 1`.

    Example
    -------
    :math:`H_1 = \mathrm{diag}(1, 4)` and :math:`H_2 = \begin{pmatrix}2 & 1\\ 1 & 2\end{pmatrix}`
    (eigenvalues 1 and 3, not its largest entry): :math:`L = \max(4, 3) = 4`:

    >>> quadratic_smoothness([[[1.0, 0.0], [0.0, 4.0]], [[2.0, 1.0], [1.0, 2.0]]])
    4.0
    """
    H = check_finite_array("H", H, ndim=3)
    if 0 in H.shape or H.shape[1] != H.shape[2]:
        raise ValueError(f"H must have shape (m, d, d) with m, d >= 1, got {H.shape}")
    _check_symmetric("H", H)  # [[0, 1], [0, 0]] gave 0.5, neither its ||H||_2 = 1 nor max |lambda| = 0
    return float(max(np.abs(np.linalg.eigvalsh(0.5 * (h + h.T))).max() for h in H))


def _assumption3_scales(H: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, float, float]:
    r""":math:`\|H_i\|_2` and the bounds :math:`\sum_i w_i\|H_i\|_2 \ge \|\widetilde H\|_2` and
    :math:`\sum_i w_i\|H_i\|_2^2 \ge \|\sum_i w_i H_i^2\|_2`: the sizes that rounding in those sums is
    relative to (0 only when every weighted H_i is 0)."""
    norms = np.linalg.norm(H, 2, axis=(1, 2))
    return norms, float(w @ norms), float(w @ norms ** 2)


def _power_of_two_scale(x: np.ndarray) -> float:
    r"""A power of two near :math:`\max|x|` where that lies outside :math:`[2^{-100}, 2^{100}]`, else 1 (and 1 for an
    all-zero ``x``): dividing by it is exact (but for entries that become subnormal, negligible beside the largest)
    and leaves ordinary inputs' results bit for bit as they were. Assumption 3's :math:`\beta^2_{\min}` does not
    depend on the scale of :math:`H` and :math:`\kappa^2` scales with :math:`e` squared: computed on the rescaled
    arrays, squares such as :math:`H_i^2` and :math:`\|e_i\|^2` neither overflow nor underflow."""
    top = float(np.abs(x).max(initial=0.0))
    if top == 0 or 2.0 ** -100 <= top <= 2.0 ** 100:
        return 1.0
    return math.ldexp(1.0, math.frexp(top)[1] - 1)  # <= top: 2**1024 itself is beyond float64


def _assumption3_parts(H, e, w):
    H, e, w, _ = _check_quadratic(H, e, w, weights_name="w")
    h_w = np.tensordot(w, H, 1)
    return H, e, w, h_w, w @ e, np.einsum("i,ijk,ikl->jl", w, H, H)


def quadratic_min_beta2(H: Any, w: Any) -> float:
    r"""The smallest :math:`\beta^2` for which Assumption 3,
    :math:`\sum_i w_i\|\nabla F_i(x)\|^2 \le \beta^2\|\sum_i w_i\nabla F_i(x)\|^2 + \kappa^2`,
    holds with a finite :math:`\kappa^2` on quadratic clients: the quadratic parts must
    satisfy :math:`\sum_i w_i H_i^2 \preceq \beta^2 \widetilde H^2`,
    :math:`\widetilde H = \sum_i w_i H_i`, so
    :math:`\beta^2_{\min} = \lambda_{\max}(\widetilde H^{+}(\sum_i w_i H_i^2)\widetilde H^{+})`
    (:math:`\ge 1`; :math:`\kappa^2` is finite for every larger :math:`\beta^2`), with the
    pseudo-inverse on :math:`\widetilde H`'s range when :math:`\widetilde H` is singular — which
    is all there is when :math:`\sum_i w_i H_i^2` vanishes on its null space (always, for positive
    semi-definite :math:`H_i`); otherwise no :math:`\beta^2` bounds that direction and the
    result is ``inf``. :math:`\beta^2_{\min}` does not depend on the scale of :math:`H`: it is computed on
    :math:`H` rescaled by a power of two, so a finite :math:`H` of any magnitude (:math:`10^{-300}` to
    :math:`10^{300}`) gives the same result.

    Example
    -------
    Scalar clients :math:`H = (1, 3)`, :math:`w = (1/2, 1/2)`: :math:`\sum_i w_i H_i^2 = 5`,
    :math:`\widetilde H^2 = 4`, so :math:`\beta^2_{\min} = 5/4`; identical clients give 1:

    >>> quadratic_min_beta2([[[1.0]], [[3.0]]], [0.5, 0.5]), quadratic_min_beta2([[[2.0]], [[2.0]]], [0.5, 0.5])
    (1.25, 1.0)
    """
    H = check_finite_array("H", H, ndim=3)
    H, _, w, _ = _check_quadratic(H, np.zeros(H.shape[:2]), w, weights_name="w")
    # H's scale cancels: H_i^2 overflowed from 1.3e154 on (H = (1, 3) * 1e155 gave inf, 'no beta^2') and underflowed
    # below 1e-154 (* 1e-300 gave 1.0, not 5/4)
    H, _, w, h_w, _, h2_w = _assumption3_parts(H / _power_of_two_scale(H), np.zeros(H.shape[:2]), w)
    _, h_scale, h2_scale = _assumption3_scales(H, w)
    lam, V = np.linalg.eigh(0.5 * (h_w + h_w.T))
    rng = np.abs(lam) > 1e-12 * h_scale
    null = V[:, ~rng]
    if null.size and np.abs(null.T @ h2_w @ null).max() > 1e-10 * h2_scale:
        return float("inf")
    inv = (V[:, rng] / lam[rng]) @ V[:, rng].T
    sandwich = inv @ h2_w @ inv
    return float(max(1.0, np.linalg.eigvalsh(0.5 * (sandwich + sandwich.T))[-1]))


def quadratic_kappa2(H: Any, e: Any, w: Any, beta2: float) -> float:
    r"""The smallest :math:`\kappa^2` of Assumption 3 for a given :math:`\beta^2` on quadratic
    clients :math:`F_i = \frac12 x^\top H_i x - e_i^\top x`:

    .. math::

        \kappa^2(\beta^2) = \sup_x \Bigl[\sum_i w_i\|H_i x - e_i\|^2 - \beta^2\|\widetilde H x - \tilde e\|^2\Bigr]
        = c - b^\top Q^{+} b,

    :math:`Q = \sum_i w_i H_i^2 - \beta^2\widetilde H^2 \preceq 0`,
    :math:`b = \sum_i w_i H_i e_i - \beta^2\widetilde H\tilde e`,
    :math:`c = \sum_i w_i\|e_i\|^2 - \beta^2\|\tilde e\|^2` (attained at :math:`x = Q^{+}b`;
    :math:`Q^+` the pseudo-inverse). The supremum is finite for every :math:`\beta^2` above
    :func:`quadratic_min_beta2`, and at that value only when :math:`b` has no component in
    :math:`Q`'s null space (e.g. clients with a common Hessian at :math:`\beta^2 = 1`, where
    :math:`\kappa^2 = \sum_i w_i\|\nabla F_i - \nabla\widetilde F\|^2` does not depend on
    :math:`x`; chapter 2's App. D.1 example); otherwise a :class:`ValueError`. Identical
    clients give 0 for every :math:`\beta^2 \ge 1`. It is computed on :math:`H` and :math:`e` rescaled by
    powers of two, so :math:`H` may be of any finite magnitude and :math:`e` of any whose :math:`\kappa^2`
    fits in float64; a :math:`\kappa^2` beyond it (entries of :math:`e` from about :math:`10^{154}`) is a
    :class:`ValueError` naming ``e``.

    Example
    -------
    App. D.1's clients with :math:`a = 1` (:math:`H_i = 1`, :math:`e = (1, -1)`, :math:`w = (1/2, 1/2)`) at
    :math:`\beta^2 = 1`: :math:`\kappa^2 = \sum_i w_i\|e_i - \tilde e\|^2 = 1`, i.e. :math:`4w_1w_2a^2`
    (:func:`two_client_lower_bound`; the paper's App. D.1 writes :math:`2w_1w_2a^2`):

    >>> quadratic_kappa2([[[1.0]], [[1.0]]], [[1.0], [-1.0]], [0.5, 0.5], beta2=1.0)
    1.0
    """
    H, e, w, _ = _check_quadratic(H, e, w, weights_name="w")
    beta2 = check_positive("beta2", beta2)
    # kappa^2 does not depend on H's scale and scales with e's squared: computed on both rescaled (powers of two),
    # then e's scale put back. e = (2, 0) * 1e155 gave 0.0 (||e_i||^2 inf, c = inf - inf, max(0, nan)), H 1e155 an
    # OverflowError
    e_scale = _power_of_two_scale(e)
    H, e, w, h_w, e_w, h2_w = _assumption3_parts(H / _power_of_two_scale(H), e / e_scale, w)
    Q = h2_w - beta2 * h_w @ h_w
    lam, V = np.linalg.eigh(0.5 * (Q + Q.T))
    b = np.einsum("i,ijk,ik->j", w, H, e) - beta2 * h_w @ e_w
    c = float(w @ np.einsum("ij,ij->i", e, e) - beta2 * e_w @ e_w)
    # tolerances relative to the sizes of the terms that cancel in Q and b (not to Q or b, which may be
    # rounding noise, nor to 1, which would make the answer depend on the units of H and e)
    norms, h_scale, h2_scale = _assumption3_scales(H, w)
    tol = 1e-10 * (h2_scale + beta2 * h_scale ** 2)
    b_scale = float(w @ (norms * np.linalg.norm(e, axis=1)) + beta2 * h_scale * np.linalg.norm(e_w))
    coords = V.T @ b
    null = np.abs(lam) <= tol
    if np.any(lam > tol) or np.any(np.abs(coords[null]) > 1e-8 * b_scale):
        smallest = quadratic_min_beta2(H, w)
        raise ValueError(f"beta2 = {beta2!r}: kappa^2 would be infinite (Assumption 3 needs beta^2 above "
                         f"quadratic_min_beta2 = {smallest!r}, or at it with b in the range of Q)")
    neg = ~null
    kappa2 = max(0.0, c - float(np.sum(coords[neg] ** 2 / lam[neg]))) * e_scale * e_scale
    if kappa2 == np.inf:
        raise ValueError(f"e: kappa^2 exceeds float64 (an entry of e of {float(np.abs(e).max()) * e_scale:.3g} is too "
                         "large to square; rescale the problem)")
    return kappa2


def quadratic_global_optimum(H: Any, e: Any, p: Any) -> np.ndarray:
    r""":math:`x^* = \bar H^{-1}\bar e`, :math:`\bar H = \sum_i p_i H_i`, :math:`\bar e = \sum_i p_i e_i`
    for :math:`F = \sum_i p_i(\frac12 x^\top H_i x - e_i^\top x)` (App. A). Raises if :math:`\bar H` is
    singular to working precision (rank below its size at numpy's default tolerance): then :math:`x^*` is not unique.

    Example
    -------
    Scalar clients :math:`H = (1, 3)`, :math:`e = (2, 0)` (local optima 2 and 0), :math:`p = (1/2, 1/2)`:
    :math:`x^* = (\tfrac12 \cdot 2)/(\tfrac12 \cdot 1 + \tfrac12 \cdot 3) = 1/2`:

    >>> quadratic_global_optimum([[[1.0]], [[3.0]]], [[2.0], [0.0]], [0.5, 0.5])
    array([0.5])
    """
    H, e, p, _ = _check_quadratic(H, e, p)
    h_bar = np.tensordot(p, H, 1)
    _check_unique_solution(h_bar, "H: sum_i p_i H_i is singular (the H_i of the clients with p_i > 0 share a "
                                  "null direction), so x* is not unique")
    return np.linalg.solve(h_bar, p @ e)


def _check_finite_round_map(M: np.ndarray, b: np.ndarray) -> None:
    """Refuse a round map that overflowed float64 (a large ``lr`` over many local steps: ``(1 - lr h)**tau``
    past 1e308) as diverging, the ``ValueError`` of a spectral radius >= 1, not numpy's ``LinAlgError`` ('SVD did
    not converge') or a complaint about ``M``, an argument the caller never gave."""
    if not np.isfinite(M).all():
        raise ValueError("lr: the rounds do not converge (the round map overflows float64: the local steps blow up)")
    if not np.isfinite(b).all():  # M is finite: the offset K_i e_i overflowed, from e (1e306), not from the steps
        raise ValueError("e: the round map's offset sum_i p_i K_i e_i overflows float64 (its linear part is finite): "
                         "the e_i are too large to compute with; rescale the problem")


def _check_unique_solution(A: np.ndarray, message: str) -> None:
    r"""Raise ``ValueError(message)`` if the square ``A`` is singular to working precision (rank below
    its size at ``numpy.linalg.matrix_rank``'s tolerance :math:`\sigma_{\max} d\,\epsilon`): a solve would
    return a point fixed by rounding along the null direction, or numpy's bare ``LinAlgError``."""
    if A.shape[0] and np.linalg.matrix_rank(A) < A.shape[0]:
        smallest = np.linalg.svd(A, compute_uv=False)[-1]
        raise ValueError(f"{message} (smallest singular value {smallest:.3g})")


def quadratic_local_operator(H_i: Any, local_steps: int, lr: float, mu: float = 0.0,
                             momentum: float = 0.0) -> np.ndarray:
    r"""The paper's :math:`K_i(\eta,\mu) = \eta\sum_{k=0}^{\tau_i-1}(I - \eta\mu I - \eta H_i)^k
    = [I-(I-\eta\mu I-\eta H_i)^{\tau_i}](H_i+\mu I)^{-1}` (App. A): full-batch local GD
    with prox gives :math:`\Delta_i = -K_i \nabla F_i(x^{(t,0)})`. Computed by the sum, doubling
    its number of terms (O(log tau_i) matrix products; no inverse, so singular :math:`H_i` are fine;
    :math:`H_i` must be symmetric, the Hessian of :math:`F_i`: ``ValueError`` otherwise).

    With ``momentum`` :math:`\rho > 0` (the local heavy ball of
    :func:`fedlib.solvers.momentum_proximal_sgd`, buffer 0 at the start of the round,
    prox outside the buffer) the round is still linear in :math:`g = \nabla F_i(x^{(t,0)})`
    (plus any constant added to every gradient, e.g. a VR correction):
    :math:`\Delta_i = -K_i g` with :math:`K_i = -D_{\tau_i}` from the matrix recursion
    :math:`U_{k+1} = \rho U_k + H_i D_k + I`, :math:`D_{k+1} = D_k - \eta(U_{k+1} + \mu D_k)`,
    :math:`D_0 = U_0 = 0`.

    ``H_i`` is one symmetric (d, d) Hessian, ``local_steps`` :math:`\tau_i` (a whole number :math:`\ge 1`), ``lr``
    :math:`\eta > 0`, ``mu`` :math:`\mu \ge 0` with :math:`\eta\mu \le 1` and ``momentum``
    :math:`\rho \in [0, 1)` (defaults 0).

    Example
    -------
    :math:`H_i = 1`, :math:`\eta = 1/2`, :math:`\tau_i = 2`: :math:`K_i = \tfrac12(1 + \tfrac12) = 3/4 = 1 - (1/2)^2`;
    with :math:`\mu = 1` the step factor :math:`1 - \eta\mu - \eta H_i` is 0, so :math:`K_i = \tfrac12 = (1 - 0)/(1 + 1)`:

    >>> quadratic_local_operator([[1.0]], 2, 0.5), quadratic_local_operator([[1.0]], 2, 0.5, mu=1.0)
    (array([[0.75]]), array([[0.5]]))
    """
    H_i = check_finite_array("H_i", H_i, ndim=2)
    if H_i.shape[0] != H_i.shape[1]:
        raise ValueError(f"H_i must be a square (d, d) matrix, got shape {H_i.shape}")
    _check_symmetric("H_i", H_i[None])  # the steps of GD on F_i move by (H_i + H_i^T)/2, not by H_i
    tau = check_count("local_steps", local_steps, minimum=1)
    lr = check_positive("lr", lr)
    mu = check_nonnegative("mu", mu)
    if lr * mu > 1:
        raise ValueError(f"mu: lr*mu must be <= 1 (the proximal step), got {lr * mu!r}")
    rho = check_nonnegative("momentum", momentum)
    if rho >= 1:
        raise ValueError(f"momentum must be in [0, 1), got {momentum!r}")
    d = H_i.shape[0]
    if rho == 0:
        # S_n = sum_{k<n} A^k and P_n = A^n by doubling over the bits of tau:
        # S_2n = S_n + P_n S_n, P_2n = P_n^2; S_n+1 = S_n + P_n, P_n+1 = P_n A (O(log tau) products)
        step = np.eye(d) - lr * mu * np.eye(d) - lr * H_i
        K = np.zeros((d, d))
        P = np.eye(d)
        for bit in bin(tau)[2:]:
            K = K + P @ K
            P = P @ P
            if bit == "1":
                K = K + P
                P = P @ step
        return lr * K
    D = np.zeros((d, d))
    U = np.zeros((d, d))
    for _ in range(tau):
        U = rho * U + H_i @ D + np.eye(d)
        D = D - lr * (U + mu * D)
    return -D


#: Memo of :func:`_local_operator`: exact inputs -> read-only :math:`K_i`; cleared whole when
#: its matrices and keys (each key holds a copy of :math:`H_i`'s bytes) pass this many bytes, so a
#: long run over many step counts cannot grow it. 256 MiB holds chapter 10's linearised rounds at once
#: (30 clients' 549 x 549 operators, 72 MB, and as much in keys), which every eigenvalue call rebuilds
#: otherwise.
_LOCAL_OPERATOR_MEMO: dict = {}
_LOCAL_OPERATOR_MEMO_LIMIT = 256 * 2 ** 20
_local_operator_memo_bytes = 0


def _local_operator(H_i: np.ndarray, local_steps: int, lr: float, mu: float = 0.0, momentum: float = 0.0) -> np.ndarray:
    r""":func:`quadratic_local_operator`, remembered: the round maps of a run with random
    :math:`\tau_i^{(t)}` (chapter 10: a new map every round, 8 variants at the same :math:`H_i`
    and :math:`\rho`) ask for the same :math:`K_i(\tau)` over and over — 160 distinct ones among
    8,000 per run of 500 rounds. The key is the exact input (the bytes of ``H_i``, ``float`` of
    the scalars, as the function converts them), so a hit returns the very array a call would
    compute; it is read-only (callers only read it). ``H_i``: a float64 ``(d, d)`` array."""
    if not isinstance(H_i, np.ndarray) or H_i.dtype != np.float64 or H_i.ndim != 2:
        raise ValueError(f"H_i must be a float64 (d, d) numpy array, got {type(H_i).__name__} "
                         f"{getattr(H_i, 'dtype', '')} {np.shape(H_i)}")
    key = (H_i.shape, H_i.tobytes(), int(local_steps), float(lr), float(mu), float(momentum))
    global _local_operator_memo_bytes
    K = _LOCAL_OPERATOR_MEMO.get(key)
    if K is None:
        K = quadratic_local_operator(H_i, local_steps, lr, mu, momentum)
        K.flags.writeable = False
        size = K.nbytes + len(key[1])  # the key holds a copy of H_i's bytes too
        if _local_operator_memo_bytes + size > _LOCAL_OPERATOR_MEMO_LIMIT:
            _LOCAL_OPERATOR_MEMO.clear()
            _local_operator_memo_bytes = 0
        _LOCAL_OPERATOR_MEMO[key] = K
        _local_operator_memo_bytes += size
    return K


def _local_a_norms(steps: np.ndarray, lr: float, mu: float, momentum: float) -> np.ndarray:
    r""":math:`\|a_i\|_1` of (proximal, momentum) SGD for each client's ``steps``."""
    alpha = lr * mu
    if alpha > 1:
        raise ValueError(f"mu: lr*mu must be <= 1, got {alpha!r}")
    if momentum > 0:  # the solver's own closed form (tested against its steps)
        solver = LocalSolver(lr, momentum=momentum, mu=mu)
        return np.array([solver.a_norm(int(t)) for t in steps])
    return _prox_a_norms(steps, alpha)


def _prox_a_norms(steps: np.ndarray, alpha: float) -> np.ndarray:
    r""":math:`\|a_i\|_1 = (1 - (1-\alpha)^{\tau_i})/\alpha` of proximal SGD (eq. 7), without
    cancellation for small :math:`\alpha`; :math:`\tau_i` at :math:`\alpha = 0`, 1 at :math:`\alpha = 1`."""
    if alpha == 0:
        return steps.astype(np.float64)
    if alpha < 1:
        return -np.expm1(steps * np.log1p(-alpha)) / alpha
    return np.ones(steps.size)


def quadratic_round_map(H: Any, e: Any, p: Any, local_steps: Any, lr: float, algorithm: str,
                        mu: float = 0.0, tau_eff: Any = None, momentum: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    r"""One round as an affine map :math:`x \mapsto M x + b` (full participation, full-batch GD).

    FedAvg/FedProx: :math:`x^+ = x - \sum_i p_i K_i(H_i x - e_i)`; FedNova:
    :math:`x^+ = x - \tau_{\text{eff}}\sum_i p_i K_i (H_i x - e_i)/\|a_i\|_1` with the
    (proximal, momentum) SGD :math:`\|a_i\|_1` and ``tau_eff`` as in :func:`fednova_weights`;
    :math:`K_i` from :func:`quadratic_local_operator` (``momentum``: local heavy ball).
    ``"fedavg"`` and ``"fedprox"`` are the same aggregation: the local solver (``mu``) makes
    the difference, as in the paper (FedProx = FedAvg with proximal local steps); ``tau_eff``
    is FedNova's alone (FedAvg's is implicit) and refused for them.

    ``H`` is the (m, d, d) stack of symmetric Hessians :math:`H_i`, ``p`` the (m,) client weights :math:`p_i` (summing
    to 1), ``local_steps`` the (m,) :math:`\tau_i` (whole numbers :math:`\ge 1`) and ``lr`` :math:`\eta > 0`. ``e`` is
    the (m, d) stack of :math:`e_i` (:math:`\nabla F_i(x) = H_i x - e_i`). ``algorithm`` is ``"fedavg"``, ``"fedprox"``
    or ``"fednova"``; ``mu`` and ``momentum`` (defaults 0) are the local solver's :math:`\mu` and :math:`\rho`. Returns
    ``(M, b)``, of shapes (d, d) and (d,).

    Example
    -------
    Scalar clients :math:`H_i = 1`, :math:`e = (1, -1)`, :math:`p = (1/2, 1/2)`, :math:`\tau = (1, 2)`,
    :math:`\eta = 1/2`: :math:`K = (1/2, 3/4)`. FedAvg: :math:`M = 1 - \tfrac12(\tfrac12 + \tfrac34) = 0.375`,
    :math:`b = \tfrac12(\tfrac12 - \tfrac34) = -0.125`. FedNova (:math:`\tau_{\text{eff}} = 1.5`,
    :math:`c = (0.75, 0.375)`): :math:`M = 1 - 0.375 - 0.28125 = 0.34375`, :math:`b = 0.375 - 0.28125 = 0.09375`:

    >>> H, e = [[[1.0]], [[1.0]]], [[1.0], [-1.0]]
    >>> quadratic_round_map(H, e, [0.5, 0.5], [1, 2], 0.5, "fedavg")
    (array([[0.375]]), array([-0.125]))
    >>> quadratic_round_map(H, e, [0.5, 0.5], [1, 2], 0.5, "fednova")
    (array([[0.34375]]), array([0.09375]))
    """
    M, _, b = _round_map_terms(H, e, p, local_steps, lr, algorithm, mu, tau_eff, momentum)
    return M, b


def _round_map_terms(H: Any, e: Any, p: Any, local_steps: Any, lr: float, algorithm: str, mu: float,
                     tau_eff: Any, momentum: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r""":func:`quadratic_round_map`'s :math:`M = I - A` and :math:`b`, with :math:`A = \sum_i c_i K_i H_i` summed
    apart: at a small ``lr``, :math:`A` is :math:`O(\eta\tau)` and :math:`I - M` recovers it with about
    :math:`\log_{10}(1/\eta\tau)` digits fewer (:func:`quadratic_fixed_point`, solving with :math:`I - M`, was up to
    2.8e-4 relative off at :math:`\eta = 10^{-13}` in tests/test_theory.py's cases). Returns ``(M, A, b)``."""
    H, e, p, steps = _check_quadratic(H, e, p, local_steps)
    check_choice("algorithm", algorithm, ("fedavg", "fedprox", "fednova"))
    if tau_eff is not None and algorithm != "fednova":
        raise ValueError(f"tau_eff: only fednova takes a tau_eff policy, {algorithm}'s is implicit; got {tau_eff!r}")
    lr = check_positive("lr", lr)
    mu = check_nonnegative("mu", mu)
    a_norms = _local_a_norms(steps, lr, mu, check_nonnegative("momentum", momentum))
    if algorithm == "fednova":
        te, w = fednova_weights(p, a_norms, tau_eff, steps)
        coef = te * w / a_norms
    else:
        coef = p
    m, d, _ = H.shape
    M = np.eye(d)
    A = np.zeros((d, d))
    b = np.zeros(d)
    for i in range(m):
        K = _local_operator(H[i], int(steps[i]), lr, mu, momentum)
        KH = coef[i] * K @ H[i]
        M -= KH
        A += KH
        b += coef[i] * K @ e[i]
    return M, A, b


def quadratic_fixed_point(H: Any, e: Any, p: Any, local_steps: Any, lr: float, algorithm: str,
                          mu: float = 0.0, tau_eff: Any = None, momentum: float = 0.0) -> np.ndarray:
    r"""Closed-form limit of ``algorithm``'s rounds on :math:`F_i = \frac12 x^\top H_i x - e_i^\top x`
    (App. A), full participation and full-batch local GD:

    .. math::

        \tilde x = \Bigl(\sum_i c_i K_i H_i\Bigr)^{-1} \sum_i c_i K_i e_i,

    :math:`c_i = p_i` for FedAvg/FedProx (``mu`` > 0 for FedProx) and
    :math:`c_i = p_i/\|a_i\|_1` for FedNova (any :math:`\tau_{\text{eff}}` gives the same
    point; ``momentum``: local heavy ball, see :func:`quadratic_local_operator`). FedAvg's is
    :math:`(\sum p_i M_i)^{-1}\sum p_i M_i x_i^*` with
    :math:`M_i = I-(I-\eta H_i)^{\tau_i}`; FedNova's tends to :math:`x^*` as :math:`\eta\to 0`.
    Raises if a round does not contract (spectral radius of the round map >= 1): then
    the iterates do not converge to the point; and if :math:`\sum_i c_i K_i H_i` is singular to
    working precision: where the :math:`H_i` of the clients with :math:`p_i > 0` share a null direction the limit
    depends on the start (a ``ValueError`` naming ``H``); so it does where its small-lr limit
    :math:`\sum_i c_i\|a_i\|_1 H_i` is singular too (indefinite :math:`H_i` that cancel, e.g. :math:`H = (1, -1)`,
    :math:`\tau = (1, 1)`: :math:`\sum_i c_i K_i H_i = 0` at every :math:`\eta`; naming ``H``); otherwise the ``lr``
    makes it singular (one client with :math:`\eta h = 2` on an eigenvalue :math:`h` of :math:`H_i` and an even
    :math:`\tau_i` comes back to its start along that direction; a ``ValueError`` naming ``lr``).

    The arguments are :func:`quadratic_round_map`'s: ``H`` the (m, d, d) stack of symmetric :math:`H_i`, ``e`` the
    (m, d) stack of :math:`e_i`, ``p`` the (m,) :math:`p_i`, ``local_steps`` the (m,) :math:`\tau_i` (whole numbers
    :math:`\ge 1`), ``lr`` :math:`\eta > 0` and ``tau_eff`` FedNova's policy or number (refused for the others). Rounds
    that do not converge (spectral radius :math:`\ge 1`) are a ``ValueError`` naming ``lr``.

    Example
    -------
    The clients of :func:`quadratic_round_map`'s example (:math:`x^* = 0`): FedAvg settles at
    :math:`b/(1 - M) = -0.125/0.625 = -1/5` (:func:`lemma1_fixed_point`), FedNova at
    :math:`0.09375/0.65625 = 1/7`, an :math:`O(\eta)` error that shrinks with :math:`\eta` (FedAvg's tends
    to :math:`-1/3`, :func:`lemma1_small_lr_limit`):

    >>> from fractions import Fraction
    >>> H, e = [[[1.0]], [[1.0]]], [[1.0], [-1.0]]
    >>> [Fraction(float(quadratic_fixed_point(H, e, [0.5, 0.5], [1, 2], 0.5, name)[0])).limit_denominator(100)
    ...  for name in ("fedavg", "fednova")]
    [Fraction(-1, 5), Fraction(1, 7)]
    >>> abs(float(quadratic_fixed_point(H, e, [0.5, 0.5], [1, 2], 0.01, "fednova")[0])) < 0.003
    True
    """
    M, A, b = _round_map_terms(H, e, p, local_steps, lr, algorithm, mu, tau_eff, momentum)
    _check_finite_round_map(M, b)
    d = A.shape[0]
    if np.linalg.matrix_rank(A) < d:
        # the H_i of the clients with p_i > 0 (c_i > 0) share a null direction iff their stack has a null vector;
        # otherwise the lr made A singular: (1 - lr h)^tau_i = 1 (lr h = 2, tau_i even) or clients' K_i H_i of
        # opposite signs cancelling (lr h > 2). One client, H = diag(1, 2), tau = 2, lr = 1 blamed H
        H_arr, _, p_arr, steps = _check_quadratic(H, e, p, local_steps)
        # A = lr L + O(lr^2) with L = sum_i c_i ||a_i||_1 H_i (K_i -> lr ||a_i||_1 I), i.e. sum_i p_i ||a_i||_1 H_i for
        # FedAvg / FedProx and, up to tau_eff, sum_i p_i H_i for FedNova: a singular L is the H_i's doing at every
        # small lr (indefinite H_i that cancel: H = (1, -1), tau = (1, 1) gives A = 0 at any lr, and named lr)
        a_norms = _local_a_norms(steps, lr, mu, momentum)
        weights = p_arr if algorithm == "fednova" else p_arr * a_norms
        if np.linalg.matrix_rank(H_arr[p_arr > 0].reshape(-1, d)) < d:
            message = ("H: sum_i c_i K_i H_i is singular (a direction no client with p_i > 0 moves: the H_i share a "
                       "null direction), so the fixed point is not unique")
        elif np.linalg.matrix_rank(np.tensordot(weights, H_arr, 1)) < d:
            message = ("H: sum_i c_i K_i H_i is singular at this lr, and so is its small-lr limit sum_i c_i ||a_i||_1 "
                       "H_i (along a direction the H_i of the clients with p_i > 0 cancel or nearly vanish, though they "
                       "share no null direction), so no small lr gives a unique fixed point")
        else:
            message = ("lr: the rounds do not converge (the round map has the eigenvalue 1: sum_i c_i K_i H_i is "
                       "singular at this lr, though the H_i of the clients with p_i > 0 share no null direction)")
        _check_unique_solution(A, message)
    # A is symmetric (each K_i is a polynomial in H_i), so M = I - A has the eigenvalues 1 - lambda_k(A): the rounds
    # contract iff 0 < lambda_k(A) < 2. Read from A, not from M: at an lr so small that M rounds to I the rounds still
    # contract (slowly) to the point solved for below.
    lam = np.linalg.eigvalsh((A + A.T) / 2)
    if not (lam[0] > 0 and lam[-1] < 2):
        rho = float(np.max(np.abs(1.0 - lam)))
        raise ValueError(f"lr: the rounds do not converge (spectral radius of the round map {rho:.4g} >= 1)")
    return np.linalg.solve(A, b)


def lemma1_small_lr_limit(e: Any, p: Any, local_steps: Any) -> np.ndarray:
    r"""Lemma 1 (:math:`H_i = I`, :math:`\eta \to 0`): FedAvg converges to
    :math:`\tilde x = \sum_i p_i\tau_i e_i / \sum_i p_i\tau_i` (with :math:`p_i = 1/m`:
    :math:`\sum_i\tau_i e_i/\sum_i\tau_i`), while :math:`x^* = \sum_i p_i e_i`.

    ``e`` is the (m, d) stack of client optima :math:`e_i`, ``p`` the (m,) client weights (summing to 1) and
    ``local_steps`` the (m,) :math:`\tau_i` (whole numbers :math:`\ge 1`).

    Example
    -------
    :math:`e = (1, -1)`, :math:`p = (1/2, 1/2)`, :math:`\tau = (1, 2)`: :math:`\tilde x = (1 - 2)/3 = -1/3`
    instead of :math:`x^* = 0`, pulled towards the client with more steps:

    >>> lemma1_small_lr_limit([[1.0], [-1.0]], [0.5, 0.5], [1, 2]).round(6)
    array([-0.333333])
    """
    e = check_finite_array("e", e, ndim=2)
    p = check_probability_vector("p", p, size=e.shape[0], size_of="e")
    steps = check_local_steps("local_steps", local_steps, size=e.shape[0], size_of="e").astype(np.float64)
    wt = p * steps
    return wt @ e / wt.sum()


def lemma1_fixed_point(e: Any, p: Any, local_steps: Any, lr: float) -> np.ndarray:
    r"""App. A's concrete example at a finite step (:math:`H_i = I`, :math:`\mu = 0`): FedAvg's
    rounds converge to

    .. math::

        \tilde x(\eta) = \frac{\sum_i p_i K_i e_i}{\sum_i p_i K_i},\qquad K_i = 1 - (1-\eta)^{\tau_i},

    for every :math:`0 < \eta < 2` (the round is :math:`x \mapsto (1 - \sum_i p_i K_i)x + \sum_i p_i K_i e_i`
    and :math:`0 < \sum_i p_i K_i < 2`). As :math:`\eta \to 0`, :math:`K_i/\eta \to \tau_i`
    (L'Hospital): :func:`lemma1_small_lr_limit`. The paper states it with :math:`p_i = 1/m`.

    ``e`` is the (m, d) stack of client optima :math:`e_i`, ``p`` the (m,) client weights (summing to 1),
    ``local_steps`` the (m,) :math:`\tau_i` (whole numbers :math:`\ge 1`) and ``lr`` :math:`\eta \in (0, 2)` (the
    rounds diverge from 2 on: ``ValueError``).

    >>> lemma1_fixed_point([[1.0], [-1.0]], [0.5, 0.5], [1, 2], 0.5)
    array([-0.2])
    """
    e = check_finite_array("e", e, ndim=2)
    p = check_probability_vector("p", p, size=e.shape[0], size_of="e")
    steps = check_local_steps("local_steps", local_steps, size=e.shape[0], size_of="e").astype(np.float64)
    lr = check_positive("lr", lr)
    if lr >= 2:
        raise ValueError(f"lr must lie in (0, 2) for the rounds to converge, got {lr!r}")
    # below 1 without cancellation for small lr; above 1, (1 - lr)^tau alternates in sign: 1 + (lr - 1)^tau for odd
    # tau, and 1 - (lr - 1)^tau = -expm1(tau log1p(lr - 2)) for even tau, which cancelled as lr -> 2 (lr = 2 - 1e-10,
    # tau = (2, 4): 1.3e-10 relative off; lr - 2 and lr - 1 are exact from lr = 1 on)
    if lr < 1:
        K = -np.expm1(steps * np.log1p(-lr))
    else:
        with np.errstate(divide="ignore"):  # lr = 1: log1p(-1) = -inf, K = 1
            K = np.where(steps % 2 == 0, -np.expm1(steps * np.log1p(lr - 2.0)), 1.0 + (lr - 1.0) ** steps)
    wt = p * K
    return wt @ e / wt.sum()


# ---------------------------------------------------------------- §5 combinations on quadratics
def spectral_radius(M: Any, tol: float = 1e-6) -> float:
    r""":math:`\max_k |\lambda_k(M)|`: a round map :math:`s \mapsto Ms + b` converges
    (geometrically, at this rate per round asymptotically) from every start iff it is < 1.

    ``M``: a square array (all eigenvalues, exactly), or a ``scipy.sparse.linalg.LinearOperator``
    such as :func:`quadratic_vr_round_operator` (the largest-magnitude eigenvalue by
    ARPACK to relative tolerance ``tol``, :func:`leading_eigenvalues`; raises if ARPACK does
    not converge; operators with at most 600 rows are formed and solved exactly).

    Example
    -------
    A triangular matrix has its eigenvalues on the diagonal, 0.5 and :math:`-0.8`:

    >>> import numpy as np
    >>> spectral_radius(np.array([[0.5, 1.0], [0.0, -0.8]]))
    0.8
    """
    if np.shape(M) == (0, 0):
        return 0.0
    return float(np.abs(leading_eigenvalues(M, k=1, tol=tol)[0]))


def _radius_or_inf(M: np.ndarray) -> float:
    """:func:`spectral_radius` of a dense round map, ``inf`` when it has inf / NaN entries: ``H``, ``e`` and
    ``p`` are finite, so such a map overflowed float64 (an ``lr`` far too large over many local steps), and
    its rounds do not converge. :func:`spectral_radius` itself refuses it ('M contains NaN or inf'), naming an
    ``M`` the caller of :func:`fedlib.tradeoff.round_contraction`,
    :func:`fedlib.experiments.quadratic.round_map_radius` or :func:`fedlib.experiments.acceleration.variant_radius`
    never gave."""
    return spectral_radius(M) if np.all(np.isfinite(M)) else float("inf")


def leading_eigenvalues(M: Any, k: int = 1, tol: float = 1e-6) -> np.ndarray:
    r"""The ``k`` eigenvalues of :math:`M` largest in modulus, largest first (complex; ties in
    modulus in the order ``numpy``/ARPACK return them). ``M`` as in :func:`spectral_radius`:
    a square array (exact), or a ``LinearOperator`` (ARPACK, implicitly restarted Arnoldi, to
    relative tolerance ``tol``, on a Krylov space of at least 120 vectors for the clusters next
    to 1 that ill-conditioned :math:`H_i` make; formed and solved exactly up to 600 rows).
    Chapter 10, part 6: SCAFFOLD's unstable linearised round has a complex pair on top, an
    oscillation.

    >>> leading_eigenvalues(np.array([[0.0, -2.0], [2.0, 0.0]]), k=2)   # a rotation, scaled by 2
    array([0.+2.j, 0.-2.j])
    """
    from scipy.sparse.linalg import LinearOperator

    k = check_int("k", k, minimum=1)
    tol = check_positive("tol", tol)
    if isinstance(M, LinearOperator):
        if M.shape[0] != M.shape[1]:
            raise ValueError(f"M must be square, got shape {M.shape}")
        # a wide Krylov space for the clusters next to 1
        vals = _largest_modulus(M, k, tol, min_ncv=120, maxiter=20 * M.shape[0], what="leading_eigenvalues")
    else:
        M = check_finite_array("M", M, ndim=2)
        if M.shape[0] != M.shape[1]:
            raise ValueError(f"M must be square, got shape {M.shape}")
        if k > M.shape[0]:
            raise ValueError(f"k must be at most {M.shape[0]} (the size of M), got {k}")
        vals = np.linalg.eigvals(M)
    vals = vals.astype(complex)
    return vals[np.argsort(-np.abs(vals), kind="stable")][:k]


def _largest_modulus(op, k: int, tol: float, *, min_ncv: int, maxiter=None, what: str) -> np.ndarray:
    """Eigenvalues of the square ``LinearOperator`` ``op`` including its ``k`` largest in modulus
    (unsorted): all of them from the formed matrix up to 600 rows, else ``k`` by ARPACK."""
    from scipy.sparse.linalg import ArpackNoConvergence, eigs

    n = op.shape[0]
    if n <= 600:
        if k > n:
            raise ValueError(f"k must be at most {n} (the operator has {n} rows), got {k}")
        return np.linalg.eigvals(op.matmat(np.eye(n, dtype=op.dtype)))
    if k >= n - 1:
        raise ValueError(f"k must be below {n - 1} for ARPACK (the operator has {n} rows), got {k}")
    try:
        return eigs(op, k=k, which="LM", tol=tol, ncv=min(n - 1, max(min_ncv, 2 * k + 1)), maxiter=maxiter,
                    v0=np.ones(n, dtype=op.dtype) / np.sqrt(n), return_eigenvectors=False)
    except ArpackNoConvergence as err:
        raise RuntimeError(f"{what}: ARPACK did not converge ({err})") from None


VR_ALGORITHMS = ("scaffold", "fednova-vr", "vrlsgd")


def _vr_round_parts(H, p, steps, lr, algorithm, mu, momentum, tau_eff):
    r"""What every VR round map needs: the server coefficients :math:`c_i` of
    :math:`x^+ = x + \sum_i c_i\Delta_i`, :math:`\|a_i\|_1`, the local operators :math:`K_i` and
    the correction matrix :math:`Z` (:math:`z_i = \sum_j Z_{ij}c_j`)."""
    check_choice("algorithm", algorithm, VR_ALGORITHMS)
    lr = check_positive("lr", lr)
    mu = check_nonnegative("mu", mu)
    rho = check_nonnegative("momentum", momentum)
    a_norms = _local_a_norms(steps, lr, mu, rho)
    m = H.shape[0]
    if algorithm == "fednova-vr":
        te, w = fednova_weights(p, a_norms, tau_eff, steps)
        coef = te * w / a_norms
    else:
        if tau_eff is not None:
            raise ValueError(f"tau_eff can only be set for fednova-vr, not {algorithm!r}")
        coef = p
    K = np.stack([_local_operator(H[i], int(steps[i]), lr, mu, rho) for i in range(m)])
    Z = p[None, :] - np.eye(m) if algorithm != "vrlsgd" else -np.eye(m)
    return lr, coef, a_norms, K, Z


def quadratic_vr_round_map(H: Any, e: Any, p: Any, local_steps: Any, lr: float, algorithm: str,
                           mu: float = 0.0, momentum: float = 0.0,
                           tau_eff: Any = None) -> tuple[np.ndarray, np.ndarray]:
    r"""One round of a variance-reduced algorithm as an affine map on the stacked state
    :math:`s = (x, c_1, \dots, c_m)` (length :math:`d(m+1)`): :math:`s^+ = Ms + b`.

    Full participation, full-batch local (proximal, momentum) GD, the control variates of
    :mod:`fedlib.variance`. Client :math:`i` adds :math:`z_i = \bar c - c_i` to every
    gradient, so :math:`\Delta_i = -K_i(H_i x - e_i + z_i)` (:func:`quadratic_local_operator`).

    * ``scaffold`` / ``fednova-vr`` (§5: the correction :math:`\sum_j p_j d_j^{(t-1)} - d_i^{(t-1)}`):
      :math:`\bar c = \sum_j p_j c_j`, :math:`c_i^+ = d_i - z_i` with
      :math:`d_i = -\Delta_i/(\eta\|a_i\|_1)`; the server takes :math:`x^+ = x + \sum_i p_i\Delta_i`
      (SCAFFOLD, FedAvg's aggregation) or
      :math:`x^+ = x - \eta\tau_{\text{eff}}\sum_i p_i d_i` (FedNova-VR, App. H).
    * ``vrlsgd`` (§3, heterogeneous steps): :math:`\bar c = 0`,
      :math:`c_i^+ = c_i - (\Delta_i - \sum_j p_j\Delta_j)/(\eta\tau_i)`, FedAvg's aggregation.

    For ``scaffold`` and ``fednova-vr`` every round map, whatever the :math:`\tau_i`, solver or
    :math:`\tau_{\text{eff}}`, fixes :math:`(x^*, \nabla F_1(x^*), \dots, \nabla F_m(x^*))`: the
    corrected local gradient :math:`\nabla F_i(x) + \bar c - c_i` vanishes there, so no client
    moves (see :func:`quadratic_vr_fixed_point`). Used by chapter 10.

    ``H`` is the (m, d, d) stack of symmetric Hessians :math:`H_i`, ``p`` the (m,) client weights :math:`p_i` (summing
    to 1), ``local_steps`` the (m,) :math:`\tau_i` (whole numbers :math:`\ge 1`) and ``lr`` :math:`\eta > 0`. ``e`` is
    the (m, d) stack of :math:`e_i` (:math:`\nabla F_i(x) = H_i x - e_i`). ``algorithm`` is ``"scaffold"``,
    ``"fednova-vr"`` or ``"vrlsgd"``; ``mu`` :math:`\mu \ge 0` and ``momentum`` :math:`\rho \in [0, 1)` (defaults 0)
    are the local solver's proximal and heavy-ball factors; ``tau_eff`` is ``fednova-vr``'s policy or number
    (:func:`fedlib.rule.fednova_weights`; the other two refuse any value but ``None``).

    Example
    -------
    One scalar client (:math:`H = 1`, :math:`e = 1`), one step of :math:`\eta = 1/2`, SCAFFOLD: with one client
    :math:`z = \bar c - c = 0`, :math:`\Delta = -\tfrac12(x - 1)`, so :math:`x^+ = \tfrac12 x + \tfrac12` and
    :math:`c^+ = -\Delta/(\eta\cdot 1) = x - 1`; on :math:`s = (x, c)`:

    >>> quadratic_vr_round_map([[[1.0]]], [[1.0]], [1.0], [1], 0.5, "scaffold")
    (array([[0.5, 0. ],
           [1. , 0. ]]), array([ 0.5, -1. ]))
    """
    M, _, b = _vr_round_map_terms(H, e, p, local_steps, lr, algorithm, mu, momentum, tau_eff)
    return M, b


def _vr_round_map_terms(H: Any, e: Any, p: Any, local_steps: Any, lr: float, algorithm: str, mu: float,
                        momentum: float, tau_eff: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r""":func:`quadratic_vr_round_map`'s :math:`M` and :math:`b`, and the :math:`x`-block of :math:`I - M`,
    :math:`A = -\sum_i c_i D^X_i = \sum_i c_i K_i H_i`, summed apart: at a small ``lr`` it is :math:`O(\eta\tau)`, and
    :math:`I - M` recovers it with about :math:`\log_{10}(1/\eta\tau)` digits fewer (the other blocks of
    :math:`I - M` are :math:`O(1)` or not differences; ``_vr_fixed_point_system`` puts it back). Returns
    ``(M, A, b)``."""
    H, e, p, steps = _check_quadratic(H, e, p, local_steps)
    lr, coef, a_norms, K, Z = _vr_round_parts(H, p, steps, lr, algorithm, mu, momentum, tau_eff)
    m, d, _ = H.shape
    # Delta_i = DX_i x + sum_j W_ij c_j + DB_i, with z_i = sum_j Z_ij c_j and W_ij = -Z_ij K_i
    DX = -K @ H                                    # (m, d, d)
    DB = np.einsum("ikl,il->ik", K, e)             # (m, d)
    W = -Z[:, :, None, None] * K[:, None]          # (m, m, d, d)
    eye_d = np.eye(d)
    # the server: x+ = x + sum_i coef_i Delta_i
    x_step = np.einsum("i,ikl->kl", coef, DX)
    x_x = eye_d + x_step
    x_c = np.einsum("i,ijkl->jkl", coef, W)
    b_x = coef @ DB
    if algorithm == "vrlsgd":
        # c_i+ = c_i - (Delta_i - sum_l p_l Delta_l) / (lr tau_i)
        scale = 1.0 / (lr * steps)
        c_x = -scale[:, None, None] * (DX - np.einsum("l,lkn->kn", p, DX))
        c_c = np.eye(m)[:, :, None, None] * eye_d - scale[:, None, None, None] * (W - np.einsum("l,ljkn->jkn", p, W))
        b_c = -scale[:, None] * (DB - p @ DB)
    else:
        # c_i+ = d_i - z_i = -Delta_i / (lr ||a_i||_1) - z_i
        scale = 1.0 / (lr * a_norms)
        c_x = -scale[:, None, None] * DX
        c_c = -scale[:, None, None, None] * W - Z[:, :, None, None] * eye_d
        b_c = -scale[:, None] * DB
    # assemble the blocks (rows x, c_1..c_m; columns x, c_1..c_m)
    blocks = np.empty((m + 1, m + 1, d, d))
    blocks[0, 0], blocks[0, 1:], blocks[1:, 0], blocks[1:, 1:] = x_x, x_c, c_x, c_c
    M = blocks.transpose(0, 2, 1, 3).reshape(d * (m + 1), d * (m + 1))
    return M, -x_step, np.concatenate([b_x, b_c.ravel()])


def _vr_fixed_point_system(M: np.ndarray, x_block: np.ndarray) -> np.ndarray:
    """:math:`I - M` of a VR round map (state :math:`(x, c_1, \\dots, c_m)`) with its :math:`x`-block ``x_block``
    from ``_vr_round_map_terms``, which keeps the digits that :math:`I - (I - A)` cancels at a small ``lr``."""
    d = x_block.shape[0]
    system = np.eye(M.shape[0]) - M
    system[:d, :d] = x_block
    return system


def quadratic_vr_round_operator(H: Any, p: Any, local_steps: Any, lr: float, algorithm: str,
                                mu: float = 0.0, momentum: float = 0.0, tau_eff: Any = None):
    r"""The linear part :math:`M` of :func:`quadratic_vr_round_map` as a
    ``scipy.sparse.linalg.LinearOperator`` on :math:`(x, c_1, \dots, c_m)`, applied without
    forming the :math:`d(m+1) \times d(m+1)` matrix (:math:`O(md^2)` per product instead of
    :math:`O(m^2d^2)` memory): for the round maps of real models, whose :math:`d` is in the
    hundreds.

    With :math:`z_i = \bar c - c_i` (``vrlsgd``: :math:`-c_i`) and
    :math:`\Delta_i = -K_i(H_i x + z_i)`, it returns
    :math:`x^+ = x + \sum_i c_i\Delta_i` and :math:`c_i^+ = -\Delta_i/(\eta\|a_i\|_1) - z_i`
    (``vrlsgd``: :math:`c_i - (\Delta_i - \sum_j p_j\Delta_j)/(\eta\tau_i)`), the server
    coefficients :math:`c_i` as in :func:`quadratic_vr_round_map`. Its
    :func:`spectral_radius` says whether the rounds converge.

    **Linearisation.** At a consistent fixed point :math:`(x^*, \nabla F_i(x^*))` of a smooth
    non-quadratic problem, a round of SCAFFOLD or FedNova-VR is, to first order, this map
    with :math:`H_i = \nabla^2 F_i(x^*)`: its spectral radius decides whether rounds started
    near :math:`x^*` stay there (chapter 10, part 6).

    ``H`` is the (m, d, d) stack of symmetric Hessians :math:`H_i`, ``p`` the (m,) client weights :math:`p_i` (summing
    to 1), ``local_steps`` the (m,) :math:`\tau_i` (whole numbers :math:`\ge 1`) and ``lr`` :math:`\eta > 0`.
    ``algorithm`` is ``"scaffold"``, ``"fednova-vr"`` or ``"vrlsgd"``; ``mu`` :math:`\mu \ge 0` and ``momentum``
    :math:`\rho \in [0, 1)` (defaults 0) are the local solver's proximal and heavy-ball factors; ``tau_eff`` is
    ``fednova-vr``'s policy or number (:func:`fedlib.rule.fednova_weights`; the other two refuse any value but
    ``None``).

    Example
    -------
    Applied to the identity it gives the matrix of :func:`quadratic_vr_round_map`'s example; its
    eigenvalues are 0.5 and 0:

    >>> import numpy as np
    >>> op = quadratic_vr_round_operator([[[1.0]]], [1.0], [1], 0.5, "scaffold")
    >>> op.matmat(np.eye(2)), spectral_radius(op)
    (array([[0.5, 0. ],
           [1. , 0. ]]), 0.5)
    """
    from scipy.sparse.linalg import LinearOperator

    H = check_finite_array("H", H, ndim=3)
    H, _, p, steps = _check_quadratic(H, np.zeros(H.shape[:2]), p, local_steps)
    m, d, _ = H.shape
    lr, coef, a_norms, K, Z = _vr_round_parts(H, p, steps, lr, algorithm, mu, momentum, tau_eff)
    KHK = np.concatenate([K @ H, K], axis=2)
    vrlsgd = algorithm == "vrlsgd"
    scale = 1.0 / (lr * (steps if vrlsgd else a_norms))

    def matmat(S):
        S = np.asarray(S, dtype=np.float64)
        k = S.shape[1]
        x, c = S[:d], S[d:].reshape(m, d, k)
        z = np.einsum("ij,jdk->idk", Z, c)
        # Delta_i = -[K_i H_i, K_i] (x; z_i): one batched product over the clients
        delta = -(KHK @ np.concatenate([np.broadcast_to(x, (m, d, k)), z], axis=1))
        x_new = x + np.einsum("i,idk->dk", coef, delta)
        if vrlsgd:
            c_new = c - scale[:, None, None] * (delta - np.einsum("i,idk->dk", p, delta))
        else:
            c_new = -scale[:, None, None] * delta - z
        return np.concatenate([x_new, c_new.reshape(m * d, k)])

    def matvec(s):
        return matmat(np.asarray(s, dtype=np.float64).reshape(-1, 1))[:, 0]

    n = d * (m + 1)
    return LinearOperator((n, n), matvec=matvec, matmat=matmat, dtype=np.float64)


def quadratic_vr_shift_invert(H: Any, p: Any, local_steps: Any, lr: float, algorithm: str, sigma: complex,
                              mu: float = 0.0, momentum: float = 0.0, tau_eff: Any = None):
    r""":math:`(M - \sigma I)^{-1}` for the round operator :math:`M` of
    :func:`quadratic_vr_round_operator` (``scaffold``, ``fednova-vr``), as a
    ``scipy.sparse.linalg.LinearOperator``: exact solves in :math:`O(md^2)` each after an
    :math:`O(md^3)` set-up, never forming the :math:`d(m+1)`-square matrix. With ARPACK it
    finds the eigenvalues of :math:`M` nearest :math:`\sigma` (:func:`quadratic_vr_eigenvalues_near`),
    where the plain Krylov iteration behind :func:`spectral_radius` crawls: ill-conditioned
    :math:`H_i` put hundreds of eigenvalues within :math:`10^{-2}` of 1.

    **The elimination** (a derivation of this library). With :math:`L_i = K_i/(\eta\|a_i\|_1)`,
    a round is :math:`c_i^+ = L_i(H_i x + z_i) - z_i`, :math:`x^+ = x - \sum_i \gamma_i K_i(H_i x + z_i)`
    with :math:`z_i = s - c_i`, :math:`s = \sum_j p_j c_j` and the server coefficients :math:`\gamma_i`.
    Solving :math:`(M - \sigma I)(x, c) = (b_x, b_c)`: the :math:`c_i` rows give
    :math:`z_i = R_i(b_{c,i} - L_iH_i x + \sigma s)`, :math:`R_i = (L_i + (\sigma - 1)I)^{-1}`;
    :math:`\sum_i p_i z_i = 0` and the :math:`x` row leave a :math:`2d \times 2d` system in
    :math:`(x, s)`:

    .. math::
        \begin{pmatrix} -\sum_i p_iR_iL_iH_i & \sigma\sum_i p_iR_i \\
        (1-\sigma)I - \sum_i\gamma_iK_i(I - R_iL_i)H_i & -\sigma\sum_i\gamma_iK_iR_i \end{pmatrix}
        \begin{pmatrix} x \\ s\end{pmatrix} =
        \begin{pmatrix} -\sum_i p_iR_ib_{c,i} \\ b_x + \sum_i\gamma_iK_iR_ib_{c,i}\end{pmatrix},

    then :math:`c_i = s - z_i`. ``sigma`` may be complex (the operator is then complex).
    Raises ``ValueError`` where the elimination breaks down: :math:`\sigma = 0` (every round
    forgets a common shift of the variates, so 0 is always an eigenvalue), :math:`1-\sigma`
    an eigenvalue of some :math:`L_i`, or :math:`\sigma` an eigenvalue of :math:`M`.
    Chapter 10, part 6.

    ``H`` is the (m, d, d) stack of symmetric Hessians :math:`H_i`, ``p`` the (m,) client weights :math:`p_i` (summing
    to 1), ``local_steps`` the (m,) :math:`\tau_i` (whole numbers :math:`\ge 1`) and ``lr`` :math:`\eta > 0`.
    ``algorithm`` is ``"scaffold"`` or ``"fednova-vr"``; ``mu`` and ``momentum`` (defaults 0) are the local solver's
    :math:`\mu` and :math:`\rho`; ``tau_eff`` is ``fednova-vr``'s policy or number (``None`` for ``"scaffold"``).

    Example
    -------
    For :func:`quadratic_vr_round_map`'s example :math:`M = \begin{pmatrix}0.5 & 0\\ 1 & 0\end{pmatrix}` and
    :math:`\sigma = 2`: :math:`(M - 2I)v = (1, 0)` gives :math:`v_1 = 1/(-1.5) = -2/3` and
    :math:`v_2 = v_1/2 = -1/3`:

    >>> import numpy as np
    >>> inverse = quadratic_vr_shift_invert([[[1.0]]], [1.0], [1], 0.5, "scaffold", sigma=2.0)
    >>> (3 * inverse.matvec(np.array([1.0, 0.0]))).round(12)
    array([-2., -1.])
    """
    import scipy.linalg as sla
    from scipy.sparse.linalg import LinearOperator

    check_choice("algorithm", algorithm, ("scaffold", "fednova-vr"))
    sigma = complex(sigma)
    if not np.isfinite(sigma):
        raise ValueError(f"sigma must be finite, got {sigma!r}")
    if sigma == 0:
        raise ValueError("sigma: 0 is always an eigenvalue of a VR round (a common shift of the variates is "
                         "forgotten in one round); shift elsewhere")
    sigma = sigma.real if sigma.imag == 0 else sigma
    H = check_finite_array("H", H, ndim=3)
    H, _, p, steps = _check_quadratic(H, np.zeros(H.shape[:2]), p, local_steps)
    m, d, _ = H.shape
    lr, coef, a_norms, K, _ = _vr_round_parts(H, p, steps, lr, algorithm, mu, momentum, tau_eff)
    eye = np.eye(d)
    L = K / (lr * a_norms)[:, None, None]
    try:
        R = np.linalg.inv(L + (sigma - 1) * eye)
    except np.linalg.LinAlgError:
        raise ValueError(f"sigma: 1 - sigma = {1 - sigma} is an eigenvalue of some client's "
                         "L_i = K_i/(lr ||a_i||_1); shift elsewhere") from None
    LH = L @ H
    RLH = R @ LH
    KR = K @ R
    A = np.block([[-np.einsum("i,ijk->jk", p, RLH), sigma * np.einsum("i,ijk->jk", p, R)],
                  [(1 - sigma) * eye - np.einsum("i,ijk->jk", coef, K @ H - KR @ LH),
                   -sigma * np.einsum("i,ijk->jk", coef, KR)]])
    # equilibrate rows, then columns (by powers of 2: exact) before the singularity test: the blocks carry
    # different units (top left ~ H, bottom right ~ K ~ lr), so H -> s H, lr -> lr/s (the same round map)
    # would otherwise shrink the pivots like 1/s^2 against |A|.max() and call a regular sigma singular
    def powers_of_two(v):
        return 2.0 ** np.round(np.log2(np.where(v > 0, v, 1.0)))

    row = powers_of_two(np.abs(A).max(axis=1))
    col = powers_of_two(np.abs(A / row[:, None]).max(axis=0))
    A = A / row[:, None] / col[None, :]
    lu = sla.lu_factor(A, check_finite=True)
    if np.min(np.abs(np.diag(lu[0]))) <= 1e-12 * np.abs(A).max():  # ~1e-14 at eigenvalues numpy computed
        raise ValueError(f"sigma = {sigma} is an eigenvalue of the round map (M - sigma I is singular)")
    dtype = np.result_type(A.dtype, np.float64)

    def solve(b):
        b = np.asarray(b).reshape(-1)
        bx, bc = b[:d], b[d:].reshape(m, d)
        Rb = np.einsum("ijk,ik->ij", R, bc)
        rhs = np.concatenate([-(p @ Rb), bx + coef @ np.einsum("ijk,ik->ij", K, Rb)])
        xs = sla.lu_solve(lu, rhs / row) / col
        x, s = xs[:d], xs[d:]
        z = Rb - np.einsum("ijk,k->ij", RLH, x) + sigma * np.einsum("ijk,k->ij", R, s)
        return np.concatenate([x, (s[None] - z).ravel()])

    n = d * (m + 1)
    return LinearOperator((n, n), matvec=solve, dtype=dtype)


def quadratic_vr_eigenvalues_near(H: Any, p: Any, local_steps: Any, lr: float, algorithm: str,
                                  sigma: complex = 1.0, k: int = 6, mu: float = 0.0, momentum: float = 0.0,
                                  tau_eff: Any = None, tol: float = 1e-12) -> np.ndarray:
    r"""The ``k`` eigenvalues of the VR round operator :math:`M` (:func:`quadratic_vr_round_operator`)
    nearest ``sigma``, nearest first: ARPACK on :func:`quadratic_vr_shift_invert`
    (:math:`\mu = 1/(\lambda - \sigma)`, so the eigenvalues nearest :math:`\sigma` are the
    largest in modulus and well apart). Operators with at most 600 rows are solved densely.
    Raises if ARPACK does not converge. A ``k`` that cuts through a complex-conjugate pair
    returns one member of it (ask for ``k + 1`` to see both).

    Chapter 10, part 6: on Synthetic(1,1) linearised at :math:`x^*` the eigenvalues nearest 1
    of both SCAFFOLD and FedNova-VR are :math:`1 - \eta\bar\tau\lambda_k(\nabla^2F(x^*))`, the
    flattest directions of :math:`F` moving as under gradient descent with step
    :math:`\eta\bar\tau`.

    ``H`` is the (m, d, d) stack of symmetric Hessians :math:`H_i`, ``p`` the (m,) client weights :math:`p_i` (summing
    to 1), ``local_steps`` the (m,) :math:`\tau_i` (whole numbers :math:`\ge 1`) and ``lr`` :math:`\eta > 0`.
    ``algorithm``, ``mu``, ``momentum`` and ``tau_eff`` are those of :func:`quadratic_vr_shift_invert` (``"scaffold"``
    or ``"fednova-vr"``). ``tol`` is ARPACK's relative accuracy (> 0, default 1e-12).

    One client, one local step of lr 0.1 on :math:`H = \mathrm{diag}(1, 4)`: the variate is
    exact after a round, and :math:`x` moves as gradient descent, :math:`1 - 0.1\cdot\{1, 4\}`:

    >>> quadratic_vr_eigenvalues_near([[[1.0, 0.0], [0.0, 4.0]]], [1.0], [1], 0.1, "scaffold", k=2)
    array([0.9, 0.6])
    """
    k = check_int("k", k, minimum=1)
    tol = check_positive("tol", tol)
    op = quadratic_vr_shift_invert(H, p, local_steps, lr, algorithm, sigma, mu, momentum, tau_eff)
    inv = _largest_modulus(op, k, tol, min_ncv=40, what="quadratic_vr_eigenvalues_near")
    lam = complex(sigma) + 1.0 / inv
    lam = lam[np.argsort(np.abs(lam - sigma), kind="stable")][:k]
    return lam.real if np.all(lam.imag == 0) else lam


class EigenvalueCount(NamedTuple):
    r"""How many eigenvalues of a round operator lie outside the circle :math:`|\sigma| = r`
    (:func:`quadratic_vr_count_outside`): ``outside`` + ``inside`` = ``rows``; ``evaluations``
    is the number of determinants it took.

    ``radius`` is the :math:`r` counted against.

    Example
    -------
    One client, one step of :math:`\eta = 0.1` on :math:`H = \mathrm{diag}(1, 4)`: the 4 eigenvalues are
    0.9, 0.6, 0, 0, so one lies outside :math:`|\sigma| = 0.7`:

    >>> count = quadratic_vr_count_outside([[[1.0, 0.0], [0.0, 4.0]]], [1.0], [1], 0.1, "scaffold", 0.7)
    >>> count.outside, count.inside, count.rows
    (1, 3, 4)
    """

    radius: float
    outside: int
    inside: int
    rows: int
    evaluations: int


def quadratic_vr_count_outside(H: Any, p: Any, local_steps: Any, lr: float, algorithm: str, radius: float,
                               mu: float = 0.0, momentum: float = 0.0, tau_eff: Any = None, *, deflate: Any = None,
                               max_phase_step: float = 0.4, progress: bool = False) -> EigenvalueCount:
    r"""Count the eigenvalues :math:`\lambda` of the VR round operator :math:`M`
    (:func:`quadratic_vr_round_operator`; ``scaffold``, ``fednova-vr``) with :math:`|\lambda| > r`,
    without forming :math:`M` or computing its eigenvalues: with no eigenvalue outside
    :math:`r` the spectral radius is at most :math:`r`, where Arnoldi cannot say so because
    hundreds of eigenvalues crowd next to 1. Chapter 10, part 6 (``scripts/vr_spectrum.py``).

    **The determinant** (a derivation of this library; the elimination of
    :func:`quadratic_vr_shift_invert`). With :math:`L_i = K_i/(\eta\|a_i\|_1)`,
    :math:`R_i = (L_i + (\sigma-1)I)^{-1}` and the server coefficients :math:`\gamma_i`,

    .. math::
        \det(M - \sigma I) = \sigma^d \det\tilde A(\sigma) \prod_{i=1}^m \det(L_i + (\sigma - 1)I),
        \qquad \tilde A(\sigma) = \begin{pmatrix} -\sum_i p_iR_iL_iH_i & \sum_i p_iR_i \\
        (1-\sigma)I - \sum_i\gamma_iK_i(I - R_iL_i)H_i & -\sum_i\gamma_iK_iR_i \end{pmatrix},

    a :math:`2d \times 2d` matrix (tested against the dense determinant). :math:`\sigma^d` is the
    common shift of the variates that every round forgets; the zeros of the product are
    :math:`1 - \ell_{ik}` for the eigenvalues :math:`\ell_{ik}` of :math:`L_i`, known exactly.
    By the argument principle the number of eigenvalues inside :math:`|\sigma| = r` is

    .. math::
        d + \#\{(i, k): |1 - \ell_{ik}| < r\} + \frac{1}{2\pi}\Delta_{|\sigma| = r}\arg\det\tilde A(\sigma).

    :math:`K_i` and :math:`L_i` are polynomials in :math:`H_i`, so in the eigenbases of the
    :math:`H_i` each block of :math:`\tilde A` is :math:`\sum_{i,k} w_{ik}(\sigma)\,q_{ik}q_{ik}^\top`:
    one matrix product of :math:`O(md^3)` per point :math:`\sigma`. The phase is followed along
    the upper half circle (:math:`M` is real, so the lower half mirrors it) with steps that keep
    every change of :math:`\arg\det\tilde A` below ``max_phase_step`` radians (and of
    :math:`\log|\det\tilde A|` below four times that) and stay within half the distance to the
    nearest :math:`1 - \ell_{ik}`. A phase that winds by a whole turn within one step would be
    missed: two eigenvalues close to the circle and to each other can do that when the steps
    are long. ``scripts/count_outside_accuracy.py --seeds 0 200`` counts on 12,800 circles of
    random 25-row round maps against every eigenvalue of the dense matrix: 2 wrong at
    ``max_phase_step=0.8``, none at 0.4 (the default) or 0.2, and no wrong count on which two
    phase steps agreed. So count twice, at two phase steps, when it matters
    (``scripts/vr_spectrum.py`` does).

    **Deflation.** A crowd of eigenvalues next to the circle makes the phase turn fast there
    (thousands of points). ``deflate`` takes points :math:`\mu_k` (approximate eigenvalues):
    the phase of :math:`\sigma^c/\prod_k(\sigma - \mu_k)` (:math:`c` of them inside the
    circle) is added exactly, arc by arc, and only the rest is followed by sampling. The count
    stays exact for *any* points off the circle; points close to eigenvalues make the rest
    smooth and the steps long (chapter 10: gradient descent's eigenvalues,
    :func:`fedlib.experiments.acceleration.linearised_vr_count_outside`).

    Raises ``ValueError`` if an eigenvalue of :math:`M` or some :math:`1 - \ell_{ik}` lies on
    the circle or within about :math:`10^{-13}` of it, or a deflation point on it (choose another
    ``radius``), ``RuntimeError`` if the count comes out inconsistent (a turn of the phase
    missed). ``progress=True`` shows a bar over the half circle.

    ``H`` is the (m, d, d) stack of symmetric Hessians :math:`H_i`, ``p`` the (m,) client weights :math:`p_i` (summing
    to 1), ``local_steps`` the (m,) :math:`\tau_i` (whole numbers :math:`\ge 1`) and ``lr`` :math:`\eta > 0`.
    ``algorithm`` is ``"scaffold"`` or ``"fednova-vr"``; ``mu`` and ``momentum`` (defaults 0) are the local solver's
    :math:`\mu` and :math:`\rho`; ``tau_eff`` is ``fednova-vr``'s policy or number.

    One client, one local step of lr 0.1 on :math:`H = \mathrm{diag}(1, 4)`: the eigenvalues
    are 0.9, 0.6 (as gradient descent) and 0, 0 (the variate's two coordinates):

    >>> quadratic_vr_count_outside([[[1.0, 0.0], [0.0, 4.0]]], [1.0], [1], 0.1, "scaffold", 0.7).outside
    1
    """
    check_choice("algorithm", algorithm, ("scaffold", "fednova-vr"))
    radius = check_positive("radius", radius)
    progress = check_flag("progress", progress)  # "no" is truthy: it drew a bar
    max_phase_step = check_positive("max_phase_step", max_phase_step)
    if max_phase_step > 1.5:
        raise ValueError(f"max_phase_step must be at most 1.5 radians (larger steps can skip a turn of the "
                         f"phase), got {max_phase_step}")
    points = np.zeros(0, dtype=complex) if deflate is None else np.asarray(deflate, dtype=complex).reshape(-1)
    if not np.all(np.isfinite(points)):
        raise ValueError("deflate must hold finite numbers")
    if np.any(np.abs(np.abs(points) - radius) <= 1e-12 * radius):
        raise ValueError(f"deflate: a point lies on the circle |sigma| = {radius}; choose another radius")
    H = check_finite_array("H", H, ndim=3)
    H, _, p, steps = _check_quadratic(H, np.zeros(H.shape[:2]), p, local_steps)
    m, d, _ = H.shape
    lr, coef, a_norms, K, _ = _vr_round_parts(H, p, steps, lr, algorithm, mu, momentum, tau_eff)
    h, Q = np.linalg.eigh(H)
    QtKQ = np.swapaxes(Q, 1, 2) @ K @ Q
    kappa = np.einsum("ikk->ik", QtKQ)
    if np.abs(QtKQ - kappa[:, :, None] * np.eye(d)).max() > 1e-9 * max(1.0, np.abs(kappa).max()):
        raise RuntimeError("K_i is not diagonal in the eigenbasis of H_i")  # cannot happen: K_i = poly(H_i)
    ell = (kappa / (lr * a_norms)[:, None]).ravel()
    poles = 1.0 - ell
    if np.any(np.abs(np.abs(poles) - radius) <= 1e-12 * radius):
        raise ValueError(f"radius: {radius} is |1 - l| for an eigenvalue l of some L_i = K_i/(lr ||a_i||_1) "
                         "(a pole of the determinant lies on the circle); choose another radius")
    Q_all = np.ascontiguousarray(Q.transpose(1, 0, 2).reshape(d, m * d))  # columns q_ik, (i, k) as in ell
    Q_allT = np.ascontiguousarray(Q_all.T)
    hf, kf = h.ravel(), kappa.ravel()
    pw, gw = np.repeat(p, d), np.repeat(coef, d)
    fixed = [pw * ell * hf, pw, gw * kf * ell * hf, gw * kf]  # times r_ik(sigma) = 1/(l_ik + sigma - 1)
    KH = np.einsum("i,ijk->jk", coef, K @ H)
    eye = np.eye(d)
    buffer = np.empty((2 * d, m * d))
    evaluations = 0

    def log_det(sigma: complex) -> tuple[float, float]:
        nonlocal evaluations
        evaluations += 1
        r = 1.0 / (ell + (sigma - 1.0))
        S = []
        for w in fixed:
            wr = w * r
            np.multiply(Q_all, wr.real, out=buffer[:d])
            np.multiply(Q_all, wr.imag, out=buffer[d:])
            both = buffer @ Q_allT
            S.append(both[:d] + 1j * both[d:])
        A = np.block([[-S[0], S[1]], [(1 - sigma) * eye - KH + S[2], -S[3]]])
        sign, logabs = np.linalg.slogdet(A)
        if sign == 0 or not np.isfinite(logabs):
            raise ValueError(f"radius: sigma = {sigma} on the circle is an eigenvalue of the round map "
                             "(or within rounding of one); choose another radius")
        return float(np.angle(sign)), float(logabs)

    inner = np.abs(points) < radius
    compensate = int(inner.sum())  # sigma^c / prod_k (sigma - mu_k): no winding of its own
    singular = np.concatenate([poles, points])

    def known_turn(theta_a: float, theta_b: float) -> float:
        """The exact change of sum_k arg(sigma - mu_k) - c arg(sigma) along the arc theta_a -> theta_b (<= pi)."""
        turn = np.angle((radius * np.exp(1j * theta_b) - points) / (radius * np.exp(1j * theta_a) - points))
        turn = np.where(inner & (turn < 0), turn + 2 * np.pi, turn)  # inside: arg grows monotonically, (0, 2 pi)
        return float(turn.sum()) - compensate * (theta_b - theta_a)

    def known_log(theta: float) -> float:
        return float(np.log(np.abs(radius * np.exp(1j * theta) - points)).sum())

    def singular_gap(theta: float) -> float:
        """Distance from the point at angle theta to the nearest 1 - l_ik or deflation point, in angle."""
        return float(np.abs(radius * np.exp(1j * theta) - singular).min()) / radius

    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=1000, desc=f"{algorithm}: |sigma| = {radius:.8g}", unit="‰", leave=False)
    theta, phase, logabs = 0.0, *log_det(radius)
    logabs -= known_log(0.0)
    turned, step = 0.0, 1e-6  # small first: after it a step at most doubles
    shown = 0  # per mille of the half circle the bar shows
    try:
        while theta < np.pi:
            step = min(step, np.pi - theta, 0.5 * singular_gap(theta))
            while True:
                new_phase, new_logabs = log_det(radius * np.exp(1j * (theta + step)))
                new_logabs -= known_log(theta + step)
                known = known_turn(theta, theta + step)
                d_rest = (new_phase - phase - known + np.pi) % (2 * np.pi) - np.pi  # what the points do not explain
                d_log = abs(new_logabs - logabs)
                if abs(d_rest) <= max_phase_step and d_log <= 4 * max_phase_step:
                    break
                step /= 3
                if step < 1e-13:
                    raise ValueError(f"radius: the phase of the determinant cannot be followed near angle {theta:.6g}: "
                                     "an eigenvalue of the round map lies on the circle or within ~1e-13 of it; "
                                     "choose another radius")
            if bar is not None:
                done = min(999, int(1000 * (theta + step) / np.pi))  # the last one after the loop
                bar.update(done - shown)
                shown = done
            theta += step
            turned += d_rest + known  # the change of arg det A~ itself
            phase, logabs = new_phase, new_logabs
            step *= min(2.0, 0.8 * max_phase_step / max(abs(d_rest), d_log / 4, 1e-3 * max_phase_step))
        if bar is not None:
            bar.update(1000 - shown)  # theta reached pi (rounding in theta + step may leave it at 999.99...)
    finally:
        if bar is not None:
            bar.close()
    winding = turned / np.pi  # the whole circle turns twice the upper half; both ends are real
    if abs(winding - round(winding)) > 1e-6:
        raise RuntimeError(f"the phase turned by {turned!r} on the half circle, not a multiple of pi")
    n = d * (m + 1)
    inside = d + int(np.sum(np.abs(poles) < radius)) + int(round(winding))
    if not 0 <= inside <= n:
        raise RuntimeError(f"the count came out as {inside} eigenvalues inside of {n}: a turn of the phase was missed; "
                           "lower max_phase_step")
    return EigenvalueCount(radius, n - inside, inside, n, evaluations)


def quadratic_vr_fixed_point(H: Any, e: Any, p: Any, local_steps: Any, lr: float, algorithm: str,
                             mu: float = 0.0, momentum: float = 0.0,
                             tau_eff: Any = None) -> tuple[np.ndarray, np.ndarray]:
    r"""Limit :math:`(x, (c_i)_i)` of :func:`quadratic_vr_round_map`'s rounds (``scaffold`` or
    ``fednova-vr``), by solving :math:`(I - M)s = b`.

    The variates are determined up to a common shift (:math:`z_i` ignores it, and every
    round forgets it: :math:`M` maps :math:`(0, v, \dots, v)` to 0), so the solution is
    unique once the map contracts. By the argument in :func:`quadratic_vr_round_map` it is
    :math:`x = x^*` and :math:`c_i = \nabla F_i(x^*)` for every :math:`\eta`, :math:`\tau_i`
    and solver: unlike FedAvg, FedProx and FedNova (:func:`quadratic_fixed_point`), no
    :math:`O(\eta)` term. VRLSGD is excluded: it conserves :math:`\sum_i p_i\tau_i c_i`, so its
    limit depends on the start (:math:`I - M` is singular). Raises if the map does not contract.

    ``H`` is the (m, d, d) stack of symmetric Hessians :math:`H_i`, ``p`` the (m,) client weights :math:`p_i` (summing
    to 1), ``local_steps`` the (m,) :math:`\tau_i` (whole numbers :math:`\ge 1`) and ``lr`` :math:`\eta > 0`. ``e`` is
    the (m, d) stack of :math:`e_i` (:math:`\nabla F_i(x) = H_i x - e_i`). ``algorithm`` is ``"scaffold"`` or
    ``"fednova-vr"`` (``"vrlsgd"`` is refused: its limit depends on its initial variates); ``mu``, ``momentum`` and
    ``tau_eff`` are as in :func:`quadratic_vr_round_map`. Rounds that do not converge are a ``ValueError`` naming
    ``lr``.

    Example
    -------
    The clients of :func:`quadratic_round_map`'s example (:math:`H_i = 1`, :math:`e = (1, -1)`,
    :math:`\tau = (1, 2)`, :math:`\eta = 1/2`), where FedAvg stops at :math:`-1/5` and FedNova at :math:`1/7`:
    SCAFFOLD reaches :math:`x^* = 0` with :math:`c_i = \nabla F_i(0) = -e_i = (-1, 1)`:

    >>> H, e = [[[1.0]], [[1.0]]], [[1.0], [-1.0]]
    >>> x, c = quadratic_vr_fixed_point(H, e, [0.5, 0.5], [1, 2], 0.5, "scaffold")
    >>> abs(float(x[0])) < 1e-12, c.round(12).tolist()
    (True, [[-1.0], [1.0]])
    """
    if algorithm == "vrlsgd":
        raise ValueError("algorithm: VRLSGD's limit depends on its initial variates (it conserves "
                         "sum_i p_i tau_i c_i); iterate quadratic_vr_round_map instead")
    M, x_block, b = _vr_round_map_terms(H, e, p, local_steps, lr, algorithm, mu, momentum, tau_eff)
    _check_finite_round_map(M, b)
    rho = spectral_radius(M)
    if rho >= 1:
        raise ValueError(f"lr: the rounds do not converge (spectral radius of the round map {rho:.4g} >= 1)")
    d = x_block.shape[0]
    s = np.linalg.solve(_vr_fixed_point_system(M, x_block), b)
    return s[:d], s[d:].reshape(-1, d)


def server_momentum_round_map(M: Any, b: Any, beta: float, dim: Any = None) -> tuple[np.ndarray, np.ndarray]:
    r"""A round map :math:`s^+ = Ms + b` followed by server momentum
    (:func:`fedlib.server.momentum`: :math:`u \leftarrow \beta u - D/\eta`, :math:`x \leftarrow x - \eta u`,
    which is :math:`x_{t+1} = x_t + D_t + \beta(x_t - x_{t-1})`, heavy ball on the rounds, while the
    client learning rate :math:`\eta` stays the same — a decay from :math:`\eta_{t-1}` to :math:`\eta_t`
    scales the momentum term by :math:`\eta_t/\eta_{t-1}`), as an affine map on :math:`(s_t, x_{t-1})`.

    :math:`x` is the first ``dim`` entries of :math:`s` (default: all; with VR the variates
    are updated from the clients' changes and do not feel the server momentum). Start from
    :math:`x_{-1} = x_0` (the buffer is 0 before the first round). Every fixed point of
    :math:`s \mapsto Ms + b` gives one of this map with :math:`x_{t-1} = x_t`: momentum changes
    how fast the rounds get there, not where. Returns ``(M2, b2)`` of size ``n + dim``.

    ``M`` is the square (n, n) linear part of the round map, ``b`` its (n,) offset and ``beta`` the server
    momentum factor :math:`\beta \in [0, 1)`.

    Example
    -------
    A slow scalar round :math:`x^+ = 0.9x + 0.1` (fixed point 1) with :math:`\beta = 1/2`:
    :math:`x_{t+1} = 1.4x_t - 0.5x_{t-1} + 0.1`. Its eigenvalues solve :math:`\lambda^2 - 1.4\lambda + 0.5 = 0`,
    a complex pair of modulus :math:`\sqrt{0.5} \approx 0.707 < 0.9`: faster, to the same point :math:`(1, 1)`:

    >>> import numpy as np
    >>> M2, b2 = server_momentum_round_map(np.array([[0.9]]), np.array([0.1]), beta=0.5)
    >>> M2, b2
    (array([[ 1.4, -0.5],
           [ 1. ,  0. ]]), array([0.1, 0. ]))
    >>> round(spectral_radius(M2), 4), np.linalg.solve(np.eye(2) - M2, b2).round(12)
    (0.7071, array([1., 1.]))
    """
    M = check_finite_array("M", M, ndim=2)
    n = M.shape[0]
    if M.shape != (n, n):
        raise ValueError(f"M must be square, got shape {M.shape}")
    b = check_finite_array("b", b)
    if b.ndim != 1:
        raise ValueError(f"b must have shape {(n,)}, got {b.shape}")
    check_agree("b", b.size, "M", n, "entries", ref_what="rows")  # either may be the wrong one
    beta = check_nonnegative("beta", beta)
    if beta >= 1:
        raise ValueError(f"beta must be in [0, 1), got {beta!r}")
    k = n if dim is None else check_int("dim", dim, minimum=1)
    if k > n:
        raise ValueError(f"dim must be <= {n}, got {k}")
    P = np.eye(k, n)
    M2 = np.zeros((n + k, n + k))
    M2[:n, :n] = M + beta * P.T @ P
    M2[:n, n:] = -beta * P.T
    M2[n:, :n] = P
    return M2, np.concatenate([b, np.zeros(k)])

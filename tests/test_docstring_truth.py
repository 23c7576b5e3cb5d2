"""Do the docstrings tell the truth? Each claim a public docstring makes — a formula, a paper
equation, a closed form, what the API page shows — checked against an independent
computation (numpy, :mod:`fractions`) or against what the code does, not against the code's own
output echoed back."""
from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import numpy as np
import pytest
from bookutil import require_book_module

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ the API page
def _autodoc_modules():
    """The modules book/api.md renders with ``:members:``."""
    text = (ROOT / "book" / "api.md").read_text()
    return sorted(set(re.findall(r"\.\. automodule:: ([\w.]+)\n\s*:members:", text)))


def _attribute_docs(name):
    """Names of the module-level assignments with a ``#:`` comment (or a docstring after them),
    the only data autodoc shows without ``:undoc-members:``."""
    require_book_module("sphinx")
    from sphinx.pycode import ModuleAnalyzer

    analyzer = ModuleAnalyzer.for_module(name)
    analyzer.analyze()
    return {attr for (_, attr) in analyzer.attr_docs}


def test_api_page_shows_every_exported_name():
    """``automodule :members:`` (no ``:undoc-members:``) lists a module's ``__all__`` — or its public
    names when it has none — and silently drops every function or class without a docstring and
    every constant without a ``#:`` comment: such a name is exported but absent from book/api.md."""
    missing = []
    modules = _autodoc_modules()
    assert len(modules) > 30
    for name in modules:
        module = importlib.import_module(name)
        exported = getattr(module, "__all__", None)
        if exported is None:
            exported = [k for k, v in vars(module).items()
                        if not k.startswith("_") and getattr(v, "__module__", None) == name]
        documented_data = _attribute_docs(name)
        for attr in exported:
            value = getattr(module, attr)
            if inspect.isfunction(value) or inspect.isclass(value):
                if not inspect.getdoc(value):
                    missing.append(f"{name}.{attr} (no docstring)")
            elif attr not in documented_data and getattr(value, "__module__", name) == name:
                missing.append(f"{name}.{attr} (constant without a #: comment)")
    assert not missing, "exported but not on the API page: " + ", ".join(missing)


def test_public_functions_and_classes_are_exported():
    """A module with ``__all__`` shows only those names on the API page: a public (no underscore)
    function or class defined there but left out of ``__all__`` is documented nowhere."""
    left_out = []
    for name in _autodoc_modules():
        module = importlib.import_module(name)
        exported = getattr(module, "__all__", None)
        if exported is None:
            continue
        for attr, value in vars(module).items():
            if attr.startswith("_") or getattr(value, "__module__", None) != name:
                continue
            if (inspect.isfunction(value) or inspect.isclass(value)) and attr not in exported:
                left_out.append(f"{name}.{attr}")
    assert not left_out, "public but not in __all__ (so not on the API page): " + ", ".join(left_out)


# ------------------------------------------------------------------ helpers
def _rng(seed):
    return np.random.default_rng(10_000 + seed)


def _simplex(rng, m):
    p = rng.random(m) + 0.05
    return p / p.sum()


def _fraction_a_vector(solver_kind, tau, alpha=0, rho=0):
    """The solvers module's table of :math:`a_{i,j}` (entry j weighs step j's gradient, n = tau-1-j),
    in exact arithmetic: SGD 1, proximal (1-α)^n, momentum (1-ρ^(n+1))/(1-ρ), momentum + prox
    Σ_{k<=n} (1-α)^(n-k) ρ^k."""
    from fractions import Fraction as Fr

    alpha, rho = Fr(alpha), Fr(rho)
    out = []
    for j in range(tau):
        n = tau - 1 - j
        if solver_kind == "sgd":
            out.append(Fr(1))
        elif solver_kind == "prox":
            out.append((1 - alpha) ** n)
        elif solver_kind == "momentum":
            out.append((1 - rho ** (n + 1)) / (1 - rho))
        else:
            out.append(sum((1 - alpha) ** (n - k) * rho ** k for k in range(n + 1)))
    return out


# ------------------------------------------------------------------ solvers: the table of a_i
@pytest.mark.parametrize("kind, alpha, rho", [("sgd", 0, 0), ("prox", "1/7", 0), ("momentum", 0, "3/5"),
                                              ("momentum-prox", "1/10", "1/2"), ("momentum-prox", "1/3", "2/3")])
def test_solver_table_a_vector_and_a_norm(kind, alpha, rho):
    r"""The module table's :math:`a_{i,j}` and its :math:`\|a_i\|_1` column, exactly: the sum of the
    entries equals the closed form (SGD τ, prox (1-(1-α)^τ)/α, momentum [τ - ρ(1-ρ^τ)/(1-ρ)]/(1-ρ),
    momentum + prox [(1-α)(1-(1-α)^τ)/α - ρ(1-ρ^τ)/(1-ρ)]/(1-α-ρ)), and the code gives both."""
    from fractions import Fraction as Fr

    from fedlib.solvers import LocalSolver

    a, r = Fr(alpha), Fr(rho)
    lr = Fr(1, 10)
    solver = LocalSolver(float(lr), momentum=float(r), mu=float(a / lr))
    for tau in (1, 2, 5, 11):
        vec = _fraction_a_vector(kind, tau, a, r)
        if kind == "sgd":
            norm = Fr(tau)
        elif kind == "prox":
            norm = (1 - (1 - a) ** tau) / a
        elif kind == "momentum":
            norm = (tau - r * (1 - r ** tau) / (1 - r)) / (1 - r)
        elif 1 - a == r:  # the docstring's special case: p_n = (n+1) rho^n
            assert vec == [(tau - j) * r ** (tau - 1 - j) for j in range(tau)]
            norm = sum(vec)
        else:
            norm = ((1 - a) * (1 - (1 - a) ** tau) / a - r * (1 - r ** tau) / (1 - r)) / (1 - a - r)
        assert sum(vec) == norm
        np.testing.assert_allclose(solver.a_vector(tau), [float(v) for v in vec], rtol=1e-12)
        assert solver.a_norm(tau) == pytest.approx(float(norm), rel=1e-12)
        assert solver.online_a_norms(tau)[-1] == pytest.approx(float(norm), rel=1e-12)


# ------------------------------------------------------------------ theory: Theorem 1 and 2
@pytest.mark.parametrize("seed", range(4))
def test_theorem1_constants_are_the_docstring_sums(seed):
    r""":math:`A = m\tau_{\text{eff}}\sum_i w_i^2\|a_i\|_2^2/\|a_i\|_1^2`,
    :math:`B = \sum_i w_i(\|a_i\|_2^2 - a_{i,-1}^2)`, :math:`C = \max_{i: w_i > 0}(\|a_i\|_1^2 - \|a_i\|_1 a_{i,-1})`
    on random vectors, one client of weight 0 with the largest vector (left out of C)."""
    from fedlib.theory import theorem1_constants

    rng = _rng(seed)
    m = 5
    w = _simplex(rng, m)
    w[0] = 0.0
    w /= w.sum()
    a = [rng.random(int(t)) + 0.1 for t in rng.integers(1, 9, size=m)]
    a[0] = np.full(40, 3.0)
    tau_eff = float(rng.random() * 5 + 0.5)
    A = m * tau_eff * sum(w[i] ** 2 * np.sum(a[i] ** 2) / np.sum(a[i]) ** 2 for i in range(m))
    B = sum(w[i] * (np.sum(a[i] ** 2) - a[i][-1] ** 2) for i in range(m))
    C = max(np.sum(a[i]) ** 2 - np.sum(a[i]) * a[i][-1] for i in range(1, m))
    got = theorem1_constants(w, a, tau_eff)
    np.testing.assert_allclose(got, (A, B, C), rtol=1e-12)


def test_corollary1_and_fedprox_closed_forms_are_theorem1_constants_of_the_vectors():
    r"""App. E.1 / E.2: the closed forms equal the definitions of A, B, C evaluated exactly on
    :math:`a_i = \mathbf 1_{\tau_i}` and :math:`a_i = [(1-\alpha)^{\tau_i-1}, \dots, 1]`
    (fractions), with :math:`\tau_{\text{eff}} = \sum_i p_i\|a_i\|_1` and :math:`w_i = p_i\|a_i\|_1/\tau_{\text{eff}}`;
    and Corollary 1's :math:`B = \bar\tau - 1 + \operatorname{var}[\tau]/\bar\tau`."""
    from fractions import Fraction as Fr

    from fedlib.theory import corollary1_constants, fedprox_theorem1_constants

    def exact(p, vectors):
        norms = [sum(v) for v in vectors]
        tau_eff = sum(pi * n for pi, n in zip(p, norms))
        w = [pi * n / tau_eff for pi, n in zip(p, norms)]
        m = len(p)
        A = m * tau_eff * sum(wi ** 2 * sum(x * x for x in v) / n ** 2 for wi, v, n in zip(w, vectors, norms))
        B = sum(wi * (sum(x * x for x in v) - v[-1] ** 2) for wi, v in zip(w, vectors))
        C = max(n * n - n * v[-1] for pi, v, n in zip(p, vectors, norms) if pi > 0)
        return tau_eff, w, A, B, C

    steps = [1, 3, 4, 7]
    m = len(steps)
    tau_eff, w, A, B, C = exact([Fr(1, m)] * m, [_fraction_a_vector("sgd", t) for t in steps])
    tau_bar = Fr(sum(steps), m)
    var = Fr(sum(t * t for t in steps), m) - tau_bar ** 2
    assert (tau_eff, A, B) == (tau_bar, 1, tau_bar - 1 + var / tau_bar)
    got = corollary1_constants(steps)
    np.testing.assert_allclose([got.tau_eff, got.A, got.B, got.C], [float(x) for x in (tau_eff, A, B, C)], rtol=1e-13)
    np.testing.assert_allclose(got.weights, [float(x) for x in w], rtol=1e-13)

    p = [Fr(1, 10), Fr(2, 5), Fr(3, 10), Fr(1, 5)]
    for alpha in (Fr(0), Fr(1, 20), Fr(1, 3), Fr(1)):
        vecs = [_fraction_a_vector("prox", t, alpha) for t in steps]
        tau_eff, w, A, B, C = exact(p, vecs)
        got = fedprox_theorem1_constants([float(x) for x in p], steps, float(alpha))
        np.testing.assert_allclose([got.tau_eff, got.A, got.B, got.C], [float(x) for x in (tau_eff, A, B, C)],
                                   rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(got.weights, [float(x) for x in w], rtol=1e-12)


def test_theorem1_bound_terms_are_eq8_with_unit_constants():
    r"""eq. (8) with :math:`\eta = \sqrt{m/(\bar\tau T)}`: the four terms of the docstring, by hand."""
    from fedlib.theory import theorem1_bound

    m, tau_bar, T, tau_eff, A, B, C, s2, k2 = 4, 6.0, 100, 3.0, 0.7, 2.5, 11.0, 0.3, 1.7
    s = np.sqrt(m * tau_bar * T)  # sqrt(2400)
    want = [(tau_bar / tau_eff) / s, A * s2 / s, m * B * s2 / (tau_bar * T), m * C * k2 / (tau_bar * T)]
    got = theorem1_bound(m, tau_bar, T, tau_eff, A, B, C, s2, k2)
    np.testing.assert_allclose(list(got), want, rtol=1e-14)
    assert got.total == pytest.approx(sum(want), rel=1e-14)


def test_theorem1_explicit_bound_terms_and_conditions():
    r"""App. C's four terms :math:`4\Delta/(\eta\tau_{\text{eff}}T)`, :math:`4\eta L\sigma^2A/m`,
    :math:`6\eta^2L^2\sigma^2B`, :math:`12\eta^2L^2\kappa^2C`, and its two refusals:
    :math:`\eta L\tau_{\text{eff}} > 1/2` and :math:`D = 4\eta^2L^2C > 1/(2\beta^2+1)`."""
    from fedlib.theory import theorem1_constants, theorem1_explicit_bound

    w = [0.25, 0.75]
    a = [np.ones(2), np.ones(4)]                     # SGD, tau = 2 and 4
    tau_eff = 3.5
    A, B, C = theorem1_constants(w, a, tau_eff)
    # by hand: A = 2*3.5*(1/16*2/4 + 9/16*4/16) = 7*(1/32 + 9/64) = 77/64; B = 1/4*1 + 3/4*3 = 2.5; C = 16 - 4 = 12
    assert (A, B, C) == pytest.approx((77 / 64, 2.5, 12.0), rel=1e-14)
    lr, T, L, s2, b2, k2, gap = 0.01, 50, 2.0, 0.4, 3.0, 0.9, 1.3
    got = theorem1_explicit_bound(lr, T, L=L, sigma2=s2, beta2=b2, kappa2=k2, initial_gap=gap, w=w, a_vectors=a,
                                  tau_eff=tau_eff)
    want = [4 * gap / (lr * tau_eff * T), 4 * lr * L * s2 * A / 2, 6 * lr ** 2 * L ** 2 * s2 * B,
            12 * lr ** 2 * L ** 2 * k2 * C]
    np.testing.assert_allclose(list(got), want, rtol=1e-14)
    with pytest.raises(ValueError, match="eta L tau_eff"):   # 0.08 * 2 * 3.5 = 0.56 > 1/2
        theorem1_explicit_bound(0.08, T, L=L, sigma2=s2, beta2=b2, kappa2=k2, initial_gap=gap, w=w, a_vectors=a,
                                tau_eff=tau_eff)
    # D = 4 * 0.06^2 * 4 * 12 = 0.6912 > 1/7 while eta L tau_eff = 0.42 <= 1/2
    with pytest.raises(ValueError, match="D = 4 eta"):
        theorem1_explicit_bound(0.06, T, L=L, sigma2=s2, beta2=b2, kappa2=k2, initial_gap=gap, w=w, a_vectors=a,
                                tau_eff=tau_eff)


@pytest.mark.parametrize("seed", range(3))
def test_theorem2_bound_holds_at_every_point_of_a_quadratic(seed):
    r"""Theorem 2's docstring: :math:`\|\nabla F(x)\|^2 \le 2[\chi^2(\beta^2-1)+1]\|\nabla\widetilde F(x)\|^2 + 2\chi^2\kappa^2`
    for every :math:`x`, with :math:`\beta^2, \kappa^2` of Assumption 3 for :math:`w`
    (:func:`quadratic_min_beta2`, :func:`quadratic_kappa2`), checked at random points; the formula
    itself by hand."""
    from fedlib.theory import chi_square, quadratic_kappa2, quadratic_min_beta2, theorem2_bound

    assert theorem2_bound(0.5, 3.0, 2.0, 4.0) == pytest.approx(2 * (0.5 * 2 + 1) * 4 + 2 * 0.5 * 2)
    rng = _rng(seed)
    m, d = 4, 3
    Q = rng.normal(size=(m, d, d))
    H = np.einsum("mij,mkj->mik", Q, Q) + 0.3 * np.eye(d)
    e = rng.normal(size=(m, d))
    p, w = _simplex(rng, m), _simplex(rng, m)
    chi2 = chi_square(p, w)
    beta2 = quadratic_min_beta2(H, w) * 1.5
    kappa2 = quadratic_kappa2(H, e, w, beta2)
    for x in rng.normal(size=(50, d)) * 3:
        grads = np.einsum("mij,j->mi", H, x) - e
        true = p @ grads
        surrogate = w @ grads
        bound = theorem2_bound(chi2, beta2, kappa2, float(surrogate @ surrogate))
        assert true @ true <= bound * (1 + 1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_assumption3_constants_of_quadratics(seed):
    r""":func:`quadratic_min_beta2` is the smallest :math:`\beta^2` with :math:`\sum_i w_iH_i^2 \preceq \beta^2\widetilde H^2`
    (a generalised eigenvalue, computed here by Cholesky of :math:`\widetilde H^2`), and
    :func:`quadratic_kappa2` is :math:`\sup_x[\sum_i w_i\|H_ix-e_i\|^2 - \beta^2\|\widetilde Hx-\tilde e\|^2]`:
    never exceeded at random points and attained (to rounding) at the maximiser, found here by
    solving the stationarity equation of the concave quadratic with numpy."""
    from fedlib.theory import quadratic_kappa2, quadratic_min_beta2

    rng = _rng(seed)
    m, d = 3, 4
    Q = rng.normal(size=(m, d, d))
    H = np.einsum("mij,mkj->mik", Q, Q) + 0.2 * np.eye(d)
    e = rng.normal(size=(m, d))
    w = _simplex(rng, m)
    h = np.tensordot(w, H, 1)
    h2 = np.einsum("i,ijk,ikl->jl", w, H, H)
    Lc = np.linalg.cholesky(h @ h)
    Li = np.linalg.inv(Lc)
    want = np.linalg.eigvalsh(Li @ h2 @ Li.T)[-1]
    assert quadratic_min_beta2(H, w) == pytest.approx(max(1.0, want), rel=1e-9)

    beta2 = 1.3 * want
    kappa2 = quadratic_kappa2(H, e, w, beta2)

    def excess(x):
        g = np.einsum("mij,j->mi", H, x) - e
        s = w @ g
        return float(w @ np.sum(g * g, axis=1) - beta2 * s @ s)

    # excess(x) = x^T Qx - 2 b^T x + c with Q = h2 - beta2 h^2: maximiser solves Q x = b
    Qm = h2 - beta2 * h @ h
    b = np.einsum("i,ijk,ik->j", w, H, e) - beta2 * h @ (w @ e)
    x_star = np.linalg.solve(Qm, b)
    assert excess(x_star) == pytest.approx(kappa2, rel=1e-8)
    assert max(excess(x) for x in rng.normal(size=(200, d)) * 2) <= kappa2 * (1 + 1e-12)


# ------------------------------------------------------------------ theory: closed forms by fractions
def test_two_client_example_by_fractions():
    r"""App. D.1: :math:`w_i = \tau_i/(\tau_1+\tau_2)`, :math:`\chi^2 = (\tau_2-\tau_1)^2/(4\tau_1\tau_2)` (not the
    paper's :math:`/(2\tau_1\tau_2)`), :math:`\kappa^2 = 4w_1w_2a^2`, :math:`\tilde x = a(\tau_1-\tau_2)/(\tau_1+\tau_2)`,
    and the floor attained: :math:`\tilde x^2 = \chi^2\kappa^2`."""
    from fractions import Fraction as Fr

    from fedlib.theory import two_client_lower_bound

    for t1, t2, a in ((1, 3, Fr(1)), (2, 7, Fr(3, 2)), (5, 5, Fr(2))):
        w = [Fr(t1, t1 + t2), Fr(t2, t1 + t2)]
        chi2 = sum((Fr(1, 2) - wi) ** 2 / wi for wi in w)
        assert chi2 == Fr((t2 - t1) ** 2, 4 * t1 * t2)
        kappa2 = 4 * w[0] * w[1] * a * a
        x = a * (t1 - t2) / (t1 + t2)
        assert x * x == chi2 * kappa2
        got = two_client_lower_bound(t1, t2, float(a))
        np.testing.assert_allclose(got.weights, [float(v) for v in w], rtol=1e-15)
        np.testing.assert_allclose([got.chi2, got.kappa2, got.x_limit, got.grad_norm_sq],
                                   [float(chi2), float(kappa2), float(x), float(x * x)], rtol=1e-13, atol=1e-16)


def test_fedprox_weights_eq7_by_fractions():
    r"""eq. (7): :math:`\tau_{\text{eff}} = \sum_i p_i[1-(1-\alpha)^{\tau_i}]/\alpha`,
    :math:`w_i \propto p_i[1-(1-\alpha)^{\tau_i}]`; :math:`\alpha = 0` FedAvg, :math:`\alpha = 1` gives :math:`(1, p)`."""
    from fractions import Fraction as Fr

    from fedlib.theory import fedprox_weights

    p = [Fr(1, 6), Fr(1, 2), Fr(1, 3)]
    steps = [2, 9, 4]
    for alpha in (Fr(1, 50), Fr(1, 4), Fr(9, 10)):
        s = [1 - (1 - alpha) ** t for t in steps]
        tau_eff = sum(pi * si for pi, si in zip(p, s)) / alpha
        w = [pi * si / sum(pj * sj for pj, sj in zip(p, s)) for pi, si in zip(p, s)]
        got_tau, got_w = fedprox_weights([float(x) for x in p], steps, float(alpha))
        assert got_tau == pytest.approx(float(tau_eff), rel=1e-13)
        np.testing.assert_allclose(got_w, [float(x) for x in w], rtol=1e-13)
    tau0, w0 = fedprox_weights([float(x) for x in p], steps, 0.0)
    assert tau0 == pytest.approx(float(sum(pi * t for pi, t in zip(p, steps))))
    tau1, w1 = fedprox_weights([float(x) for x in p], steps, 1.0)
    assert tau1 == 1.0
    np.testing.assert_allclose(w1, [float(x) for x in p], rtol=1e-15)


def test_lemma1_fixed_point_by_fractions_and_its_round():
    r"""App. A, :math:`H_i = I`: :math:`\tilde x(\eta) = \sum_i p_iK_ie_i/\sum_i p_iK_i`,
    :math:`K_i = 1-(1-\eta)^{\tau_i}` — the fixed point of :math:`x \mapsto (1-\sum_ip_iK_i)x + \sum_ip_iK_ie_i`,
    also for :math:`1 < \eta < 2` where :math:`(1-\eta)^{\tau}` alternates in sign."""
    from fractions import Fraction as Fr

    from fedlib.theory import lemma1_fixed_point

    e = [[Fr(3)], [Fr(-1)], [Fr(1, 2)]]
    p = [Fr(1, 5), Fr(1, 2), Fr(3, 10)]
    steps = [1, 4, 2]
    for lr in (Fr(1, 100), Fr(1, 2), Fr(3, 2)):
        K = [1 - (1 - lr) ** t for t in steps]
        x = sum(pi * Ki * ei[0] for pi, Ki, ei in zip(p, K, e)) / sum(pi * Ki for pi, Ki in zip(p, K))
        s = sum(pi * Ki for pi, Ki in zip(p, K))
        assert (1 - s) * x + sum(pi * Ki * ei[0] for pi, Ki, ei in zip(p, K, e)) == x  # a fixed point of the round
        got = lemma1_fixed_point([[float(v[0])] for v in e], [float(v) for v in p], steps, float(lr))
        assert got[0] == pytest.approx(float(x), rel=1e-13)


@pytest.mark.parametrize("seed", range(3))
def test_local_operator_is_the_papers_closed_form(seed):
    r""":math:`K_i(\eta,\mu) = [I-(I-\eta\mu I-\eta H_i)^{\tau_i}](H_i+\mu I)^{-1}` (App. A) and, with momentum,
    the matrix recursion of the docstring — evaluated here with numpy's matrix power / a plain loop
    of the local heavy-ball steps on :math:`F_i` from :math:`x^{(t,0)}`."""
    from fedlib.theory import quadratic_local_operator

    rng = _rng(seed)
    d = 3
    Q = rng.normal(size=(d, d))
    H = Q @ Q.T / d + 0.1 * np.eye(d)
    lr, mu, tau = 0.1, 0.7, int(rng.integers(1, 12))
    A = np.eye(d) - lr * mu * np.eye(d) - lr * H
    want = (np.eye(d) - np.linalg.matrix_power(A, tau)) @ np.linalg.inv(H + mu * np.eye(d))
    np.testing.assert_allclose(quadratic_local_operator(H, tau, lr, mu), want, rtol=1e-10, atol=1e-13)
    # momentum: Delta = -K g for the gradient g = H x0 - e at the round's start
    rho = 0.6
    x0, e = rng.normal(size=d), rng.normal(size=d)
    x, u = x0.copy(), np.zeros(d)
    for _ in range(tau):
        u = rho * u + (H @ x - e)
        x = x - lr * (u + mu * (x - x0))
    K = quadratic_local_operator(H, tau, lr, mu, momentum=rho)
    np.testing.assert_allclose(x - x0, -K @ (H @ x0 - e), rtol=1e-10, atol=1e-13)


# ------------------------------------------------------------------ server optimizers
def test_server_momentum_and_fedadam_formulas():
    r""":func:`fedlib.server.momentum`: :math:`u \leftarrow \beta u - D/\eta`, :math:`x \leftarrow x - \eta u` with
    :math:`u_0 = 0`; :math:`\beta = 0` is :func:`plain`. :func:`adam`: :math:`m \leftarrow \beta_1m+(1-\beta_1)D`,
    :math:`v \leftarrow \beta_2v+(1-\beta_2)D^2`, :math:`x \leftarrow x+\eta_g m/(\sqrt v+\epsilon)`, no bias correction."""
    from fedlib.server import adam, momentum, plain

    rng = _rng(0)
    changes = rng.normal(size=(4, 3))
    lrs = [0.1, 0.1, 0.05, 0.01]
    beta = 0.8
    opt = momentum(beta)
    x, state = np.zeros(3), opt.init(np.zeros(3))
    xr, u = np.zeros(3), np.zeros(3)
    for D, lr in zip(changes, lrs):
        x, state = opt.update(D, state, x, lr)
        u = beta * u - D / lr
        xr = xr - lr * u
        np.testing.assert_allclose(x, xr, rtol=1e-13, atol=1e-15)
    no_momentum = momentum(0.0)
    xm, _ = no_momentum.update(changes[0], no_momentum.init(np.ones(3)), np.ones(3), 0.3)
    xp, _ = plain().update(changes[0], plain().init(np.ones(3)), np.ones(3))
    np.testing.assert_allclose(xm, xp, rtol=1e-15)

    lr_g, b1, b2, eps = 0.05, 0.9, 0.99, 1e-3
    opt = adam(lr_g, b1, b2, eps)
    x, state = np.zeros(3), opt.init(np.zeros(3))
    xr, m, v = np.zeros(3), np.zeros(3), np.zeros(3)
    for D in changes:
        x, state = opt.update(D, state, x)
        m = b1 * m + (1 - b1) * D
        v = b2 * v + (1 - b2) * D * D
        xr = xr + lr_g * m / (np.sqrt(v) + eps)
        np.testing.assert_allclose(x, xr, rtol=1e-13, atol=1e-15)


# ------------------------------------------------------------------ sampling: the docstrings' closed forms
@pytest.mark.parametrize("seed", range(3))
def test_sampling_closed_forms_by_enumeration(seed):
    r"""Every outcome of both schemes enumerated exactly (multinomial counts for scheme (i), all
    :math:`q`-subsets for scheme (ii)): :math:`q_{\text{eff}} = 1/\mathbb E\sum\omega_i^2` against the docstring's
    closed forms :math:`q/(1+(q-1)\|p\|_2^2)` and :math:`q/(m\|p\|_2^2)`, and
    :func:`expected_server_weights`' with-replacement formulas
    :math:`(1-\frac1q)p_j\sum_ip_i\|a_i\|_1 + \frac1qp_j\|a_j\|_1` and
    :math:`p_j[\sum_ip_i\|a_i\|_1\pi_i + p_j\|a_j\|_1(1-p_j)^{q-1}]`, :math:`\pi_i = 1-(1-p_i)^{q-1}`,
    against :math:`\mathbb E[\tau_{\text{eff}}(S)\,\omega_j]` over the outcomes."""
    import itertools
    from math import comb, factorial

    from fedlib.sampling import effective_participants, expected_server_weights

    rng = _rng(seed)
    m, q = 4, 3
    p = _simplex(rng, m)
    a = rng.random(m) * 5 + 0.5
    p2 = p @ p
    # scheme (i): q draws with replacement; omega_i = k_i / q
    e_sq = 0.0
    c_part = np.zeros(m)
    c_sel = np.zeros(m)
    for counts in itertools.product(range(q + 1), repeat=m):
        if sum(counts) != q:
            continue
        k = np.array(counts)
        prob = factorial(q) / np.prod([factorial(c) for c in counts]) * np.prod(p ** k)
        omega = k / q
        present = k > 0
        e_sq += prob * omega @ omega
        c_part += prob * (omega @ a) * omega
        c_sel += prob * (p[present] @ a[present]) * omega
    assert effective_participants("with-replacement", p, q) == pytest.approx(1 / e_sq, rel=1e-12)
    assert effective_participants("with-replacement", p, q) == pytest.approx(q / (1 + (q - 1) * p2), rel=1e-12)
    np.testing.assert_allclose(expected_server_weights("with-replacement", p, a, q), c_part, rtol=1e-12)
    closed = (1 - 1 / q) * p * (p @ a) + p * a / q
    np.testing.assert_allclose(c_part, closed, rtol=1e-12)
    pi = 1 - (1 - p) ** (q - 1)
    closed_sel = p * ((p * a) @ pi + p * a * (1 - p) ** (q - 1))
    np.testing.assert_allclose(c_sel, closed_sel, rtol=1e-12)
    np.testing.assert_allclose(expected_server_weights("with-replacement", p, a, q, tau_eff="selected_p"), c_sel,
                               rtol=1e-12)
    # scheme (ii): q distinct clients uniformly, omega_i = p_i m / q
    e_sq = 0.0
    c_part = np.zeros(m)
    for subset in itertools.combinations(range(m), q):
        omega = np.zeros(m)
        omega[list(subset)] = p[list(subset)] * m / q
        e_sq += omega @ omega / comb(m, q)
        c_part += (omega @ a) * omega / comb(m, q)
    assert effective_participants("uniform", p, q) == pytest.approx(1 / e_sq, rel=1e-12)
    assert effective_participants("uniform", p, q) == pytest.approx(q / (m * p2), rel=1e-12)
    np.testing.assert_allclose(expected_server_weights("uniform", p, a, q), c_part, rtol=1e-12)
    assert effective_participants("full", p) == pytest.approx(1 / p2, rel=1e-14)


def test_step_decay_milestones():
    r""":func:`fedlib.schedules.step_decay_lr`: ÷10 from round :math:`\max(1, \lfloor fT+\frac12\rfloor)` for each
    milestone :math:`f` (0.5, 0.75): rounds 50 and 75 of 100 (the official code); of 3 rounds both at
    round 2 (:math:`\lfloor 2\rfloor`, :math:`\lfloor 2.75\rfloor`); of 2 rounds at 1 and 2
    (:math:`\lfloor 1.5\rfloor`, :math:`\lfloor 2\rfloor`); never at round 0."""
    from fedlib.schedules import step_decay_lr

    rates = [step_decay_lr(1.0, t, 100) for t in range(100)]
    assert rates[:50] == [1.0] * 50
    assert rates[50:75] == pytest.approx([0.1] * 25, rel=1e-15)
    assert rates[75:] == pytest.approx([0.01] * 25, rel=1e-15)
    assert [step_decay_lr(1.0, t, 3) for t in range(3)] == pytest.approx([1.0, 1.0, 0.01], rel=1e-15)
    assert [step_decay_lr(0.2, t, 2) for t in range(2)] == pytest.approx([0.2, 0.02], rel=1e-15)
    assert step_decay_lr(1.0, 0, 1) == 1.0   # one round: both milestones at round 1 (floor 1, floor 1.25), past it


# ------------------------------------------------------------------ control variates
def test_vrlsgd_is_scaffold_with_equal_steps_sgd_and_full_participation():
    r""":mod:`fedlib.variance`: "With equal :math:`\tau_i`, SGD and full participation [VRLSGD] is exactly
    SCAFFOLD" (and the SCAFFOLD variate is option II's :math:`c_i - c + (x - y_i)/(K\eta)`, replayed here by
    hand); with unequal :math:`\tau_i` the two differ. Quadratic clients with per-step gradient noise."""
    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd

    rng = _rng(7)
    m, d, K, lr, rounds = 3, 2, 4, 0.05, 6
    H = np.stack([np.diag(rng.random(d) + 0.5) for _ in range(m)])
    e = rng.normal(size=(m, d))
    noise = rng.normal(size=(rounds, m, 10, d)) * 0.1
    p = np.array([0.2, 0.5, 0.3])

    def grad_fn(x, client, round_index, step):
        return H[client] @ x - e[client] + noise[round_index, client, step]

    finals = {name: run_sequential(make_algorithm(name, sgd(lr)), np.zeros(d), grad_fn, p, FixedSteps([K] * m),
                                   rounds).state.params for name in ("scaffold", "vrlsgd")}
    np.testing.assert_allclose(finals["vrlsgd"], finals["scaffold"], rtol=1e-12, atol=1e-14)

    x, c_i = np.zeros(d), np.zeros((m, d))            # SCAFFOLD (option II), FedAvg aggregation, server lr 1
    for t in range(rounds):
        c = p @ c_i
        ys = []
        for i in range(m):
            y = x.copy()
            for k in range(K):
                y = y - lr * (grad_fn(y, i, t, k) + c - c_i[i])
            ys.append(y)
        new_c = np.array([c_i[i] - c + (x - ys[i]) / (K * lr) for i in range(m)])
        x = x + p @ (np.array(ys) - x)
        c_i = new_c
    np.testing.assert_allclose(finals["scaffold"], x, rtol=1e-12, atol=1e-14)

    unequal = {name: run_sequential(make_algorithm(name, sgd(lr)), np.zeros(d), grad_fn, p, FixedSteps([1, 4, 9]),
                                    rounds).state.params for name in ("scaffold", "vrlsgd")}
    assert np.abs(unequal["vrlsgd"] - unequal["scaffold"]).max() > 1e-6


# ------------------------------------------------------------------ logistic regression
def _softmax_regression_loss(W, b, x, y, l2):
    """The module docstring's :math:`F_i`, written out: mean of log-sum-exp minus the true logit,
    plus :math:`\\frac\\lambda2\\|W\\|_F^2`."""
    z = x @ W + b
    top = z.max(axis=1, keepdims=True)
    lse = np.log(np.exp(z - top).sum(axis=1)) + top[:, 0]
    return float(np.mean(lse - z[np.arange(len(y)), y]) + 0.5 * l2 * np.sum(W * W))


@pytest.mark.parametrize("l2", [0.0, 0.3])
def test_logistic_loss_gradient_and_hessian_are_the_docstrings(l2):
    r""":mod:`fedlib.problems.logistic`: the loss formula, its gradient (central differences of the
    formula), :meth:`hessian` in ``pack_params`` order (differences of the gradient), and its
    claimed flat directions: :math:`d+1` of them without penalty, only the bias one with."""
    from fedlib.problems.logistic import LogisticRegression, pack_params

    rng = _rng(11)
    n, d, C = 9, 3, 4
    x = rng.normal(size=(n, d))
    y = rng.integers(0, C, size=n)
    W, b = rng.normal(size=(d, C)), rng.normal(size=C)
    model = LogisticRegression(d, C, l2=l2)
    params = {"W": W, "b": b}
    assert model.loss(params, x, y) == pytest.approx(_softmax_regression_loss(W, b, x, y, l2), rel=1e-13)

    theta = pack_params(params).ravel()

    def loss_at(t):
        T = t.reshape(d + 1, C)
        return _softmax_regression_loss(T[:d], T[d], x, y, l2)

    def grad_at(t):
        T = t.reshape(d + 1, C)
        g = model.grad({"W": T[:d], "b": T[d]}, x, y)
        return pack_params(g).ravel()

    h = 1e-6
    basis = np.eye(theta.size)
    fd_grad = np.array([(loss_at(theta + h * u) - loss_at(theta - h * u)) / (2 * h) for u in basis])
    np.testing.assert_allclose(grad_at(theta), fd_grad, rtol=1e-6, atol=1e-8)
    fd_hess = np.array([(grad_at(theta + h * u) - grad_at(theta - h * u)) / (2 * h) for u in basis])
    hess = model.hessian(params, x, y)
    np.testing.assert_allclose(hess, fd_hess, rtol=1e-6, atol=1e-8)
    eig = np.linalg.eigvalsh(hess)
    flat = int(np.sum(np.abs(eig) < 1e-10 * eig.max()))
    assert flat == (d + 1 if l2 == 0 else 1)


def test_logistic_problem_loss_is_the_p_weighted_mean_of_the_clients():
    r""":class:`LogisticProblem`: :math:`F = \sum_i p_i F_i`, :math:`p_i = n_i/n` (the mean loss over all
    training samples)."""
    from fedlib.data import synthetic
    from fedlib.problems.logistic import LogisticProblem

    prob = LogisticProblem(synthetic(num_clients=4, dim=5, num_classes=3, seed=2, num_samples=[60, 7, 23, 51]),
                           l2=0.01)
    rng = _rng(3)
    params = {"W": rng.normal(size=(5, 3)), "b": rng.normal(size=3)}
    n = np.array([len(y) for y in prob.dataset.train_y], dtype=float)
    want = sum(n[i] / n.sum() * prob.client_loss(params, i) for i in range(4))
    assert prob.loss(params) == pytest.approx(want, rel=1e-13)


def test_unit_scaled_smoothness_numbers():
    r""":func:`fedlib.experiments.surrogate.unit_scaled`: the pooled second moment's largest eigenvalue
    becomes 1; the smoothness bound :math:`\frac12\lambda_{\max}(\frac1n\sum\tilde x\tilde x^\top)` is at most
    1 and bounds the Hessian's norm at random parameters; the quoted Synthetic(1,1), seed 0 values
    (0.78 pooled, 1.0 to 5.8 per client)."""
    from fedlib.data import synthetic
    from fedlib.experiments.surrogate import unit_scaled
    from fedlib.problems.logistic import LogisticRegression

    ds = unit_scaled(synthetic(1.0, 1.0, seed=0))
    X = np.concatenate(ds.train_x)
    Y = np.concatenate(ds.train_y)
    assert np.linalg.eigvalsh(X.T @ X / len(X))[-1] == pytest.approx(1.0, rel=1e-12)

    def bound(x):
        xa = np.c_[x, np.ones(len(x))]
        return 0.5 * np.linalg.eigvalsh(xa.T @ xa / len(x))[-1]

    pooled = bound(X)
    clients = [bound(x) for x in ds.train_x]
    assert pooled <= 1.0 and round(pooled, 2) == 0.78
    assert (round(min(clients), 1), round(max(clients), 1)) == (1.0, 5.8)
    model = LogisticRegression(X.shape[1], ds.num_classes)
    rng = _rng(5)
    for _ in range(2):
        params = {"W": rng.normal(size=(X.shape[1], ds.num_classes)), "b": rng.normal(size=ds.num_classes)}
        assert np.linalg.eigvalsh(model.hessian(params, X, Y))[-1] <= pooled * (1 + 1e-12)


def test_server_momentum_is_heavy_ball_on_the_rounds_while_lr_is_constant():
    r""":func:`fedlib.theory.server_momentum_round_map`'s docstring: server momentum is
    :math:`x_{t+1} = x_t + D_t + \beta(x_t - x_{t-1})` (:math:`x_{-1} = x_0`) for a constant client
    :math:`\eta`; when :math:`\eta` changes the momentum term is scaled by :math:`\eta_t/\eta_{t-1}`."""
    from fedlib.server import momentum

    rng = _rng(9)
    D = rng.normal(size=(6, 2))
    beta = 0.7
    for lrs in ([0.1] * 6, [0.1, 0.1, 0.1, 0.01, 0.01, 0.001]):
        opt = momentum(beta)
        x, state = np.zeros(2), opt.init(np.zeros(2))
        xs = [x]
        for d, lr in zip(D, lrs):
            x, state = opt.update(d, state, x, lr)
            xs.append(x)
        prev, cur = xs[0], xs[0]
        for t, d in enumerate(D):
            ratio = 1.0 if t == 0 else lrs[t] / lrs[t - 1]
            nxt = cur + d + beta * ratio * (cur - prev)
            np.testing.assert_allclose(xs[t + 1], nxt, rtol=1e-12, atol=1e-14)
            prev, cur = cur, nxt


def test_random_sources_outside_fedlib_rng_are_the_documented_ones():
    """:mod:`fedlib.rng`'s docstring says every random draw comes from its streams but for three
    functions (and one forked torch RNG) it names: any other numpy/torch generator built or seeded
    in the library (a call found in the source's syntax tree) would make that false."""
    import ast

    import fedlib
    import fedlib.rng

    wanted = {"np.random.RandomState", "np.random.default_rng", "np.random.seed", "numpy.random.RandomState",
              "numpy.random.default_rng", "numpy.random.seed", "torch.manual_seed", "torch.cuda.manual_seed",
              "torch.cuda.manual_seed_all", "random.seed"}
    found = set()
    root = Path(fedlib.__file__).parent
    for path in sorted(root.rglob("*.py")):
        if path.name == "rng.py":
            continue
        module = "fedlib." + ".".join(path.relative_to(root).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = ast.unparse(node.func)
                if name in wanted:
                    found.add((module, name))
    assert found == {("fedlib.data.partition", "np.random.RandomState"),
                     ("fedlib.data.cifar10", "np.random.default_rng"),
                     ("fedlib.experiments.acceleration", "np.random.default_rng"),
                     ("fedlib.experiments.cifar10", "torch.manual_seed")}, found
    doc = fedlib.rng.__doc__
    for name in ("dirichlet_partition", "cifar10_random_images", "perturbation_growth", "bench_cifar10"):
        assert name in doc


def test_sampled_tau_eff_leans_towards_fedavg_as_the_algorithm_docstring_says():
    r""":class:`fedlib.algorithms.FederatedAlgorithm`: with :math:`\tau_{\text{eff}} = \sum_{i\in S}\omega_i\|a_i\|_1`
    the expected server weights are :math:`(1-w)\,p_j\sum_ip_i\|a_i\|_1 + w\,p_j\|a_j\|_1` with :math:`w = 1/q` with
    replacement and, for equal :math:`p_i`, :math:`w = (m-q)/(q(m-1))` uniformly without replacement; for unequal
    :math:`p_i` the uniform scheme's extra term is :math:`\propto p_j^2\|a_j\|_1` (every outcome enumerated)."""
    import itertools
    from math import comb

    from fedlib.sampling import expected_server_weights

    m, q = 5, 2
    a = np.array([1.0, 2.0, 4.0, 7.0, 3.0])
    p = np.full(m, 1 / m)
    for scheme, w in (("with-replacement", 1 / q), ("uniform", (m - q) / (q * (m - 1)))):
        want = (1 - w) * p * (p @ a) + w * p * a
        np.testing.assert_allclose(expected_server_weights(scheme, p, a, q), want, rtol=1e-13)
    p = np.array([0.1, 0.4, 0.2, 0.25, 0.05])
    kappa = m * (q - 1) / (q * (m - 1))
    c = np.zeros(m)
    for subset in itertools.combinations(range(m), q):
        omega = np.zeros(m)
        omega[list(subset)] = p[list(subset)] * m / q
        c += (omega @ a) * omega / comb(m, q)
    np.testing.assert_allclose(c, kappa * p * (p @ a) + (m / q - kappa) * p ** 2 * a, rtol=1e-13)


def test_constant_comments_render_as_descriptions():
    """napoleon reads the first line of a ``#:`` comment as ``type: description`` when it has a colon
    outside code: ``#: The aggregations of eq. (4): FedAvg's ...`` rendered with the type 'The
    aggregations of eq. (4)' (three unresolved references, which fail the book's ``-n -W`` render) and
    only the text after the colon as its description. Every documented constant of the API page must
    come out of napoleon (with the book's settings) as the comment itself, with no ``:type:``."""
    require_book_module("sphinx")
    from sphinx.ext.napoleon import Config
    from sphinx.ext.napoleon.docstring import GoogleDocstring
    from sphinx.pycode import ModuleAnalyzer

    config = Config(napoleon_use_rtype=False, napoleon_use_param=False)
    wrong, raw = [], []
    checked = 0
    for name in _autodoc_modules():
        for (_, attr), lines in ModuleAnalyzer.for_module(name).find_attr_docs().items():
            if attr.startswith("_"):
                continue  # not on the page
            rendered = str(GoogleDocstring(list(lines), config, what="data", name=f"{name}.{attr}"))
            checked += 1
            if ":type:" in rendered:
                wrong.append(f"{name}.{attr}: {lines[0]!r}")
            # autodoc shows the value's repr after the name: TeX ($...$) or escapes (\\n) there are
            # shown raw on the page (tests/test_browser.py::test_math_is_typeset), unless hidden
            shown = repr(getattr(importlib.import_module(name), attr, None))
            if ("$" in shown or "\\" in shown) and ":meta hide-value:" not in "\n".join(lines):
                raw.append(f"{name}.{attr} = {shown[:60]}")
    assert checked > 40
    assert not wrong, "napoleon splits these at a colon (type: description): " + "; ".join(wrong)
    assert not raw, "values shown raw on the API page (add ':meta hide-value:'): " + "; ".join(raw)

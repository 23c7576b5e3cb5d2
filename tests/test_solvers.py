"""Local solvers (paper §4.1, App. B): Δ = −η G a with the *effective* gradients,
the online ‖a‖₁ counter, hand-checked a vectors, momentum + prox vs the official counter; make_solver's
arguments, and a solver with its own step (its closed forms, its a vector, the built-in step's refusal);
gradients of another kind than the parameters (or a list for an array); the momentum (+ prox) ‖a‖₁ closed
forms for momentum near 1."""
from __future__ import annotations

import dataclasses
import tracemalloc
import zlib

import numpy as np
import pytest
import torch

from fedlib import solvers as S
from fedlib.solvers import LocalSolver, check_builtin_step, sgd
from fedlib.tree import tree_leaves

LR = 0.1


def _flat(tree) -> np.ndarray:
    out = []
    for leaf in tree_leaves(tree):
        if isinstance(leaf, torch.Tensor):
            leaf = leaf.detach().cpu().numpy()
        out.append(np.asarray(leaf, dtype=np.float64).ravel())
    return np.concatenate(out)


def _schedule(k: int) -> float:  # a custom within-round step-size factor
    return 1.0 / (1.0 + 0.3 * k) if k % 3 else 0.7


# (id, builder(weight_decay) -> solver); lr*mu stays <= 1 for every step.
BUILDERS = [
    ("sgd", lambda wd: S.sgd(LR, weight_decay=wd)),
    ("decayed-gamma", lambda wd: S.decayed_sgd(LR, gamma=0.8, weight_decay=wd)),
    ("custom-schedule", lambda wd: S.decayed_sgd(LR, schedule=_schedule, weight_decay=wd)),
    ("prox", lambda wd: S.proximal_sgd(LR, mu=3.0, weight_decay=wd)),
    ("momentum", lambda wd: S.momentum_sgd(LR, 0.7, weight_decay=wd)),
    ("momentum-prox", lambda wd: S.momentum_proximal_sgd(LR, 0.6, mu=2.5, weight_decay=wd)),
    ("momentum-prox-degenerate", lambda wd: S.momentum_proximal_sgd(LR, 0.5, mu=(0.5 + 1e-9) / LR, weight_decay=wd)),
    ("momentum-prox-schedule", lambda wd: S.LocalSolver(LR, momentum=0.8, mu=1.5, weight_decay=wd,
                                                        lr_schedule=_schedule, name="mps")),
]
BUILDER_IDS = [b[0] for b in BUILDERS]


class _Problem:
    """Gradient oracles on a flat vector of size d: random per step, quadratic, logistic."""

    def __init__(self, kind: str, d: int, seed: int):
        self.kind = kind
        rng = np.random.default_rng(seed)
        self.rng = rng
        if kind == "quadratic":
            Q = rng.standard_normal((d, d))
            self.A = Q @ Q.T / d + 0.5 * np.eye(d)
            self.b = rng.standard_normal(d)
        elif kind == "logistic":
            self.X = rng.standard_normal((40, d))
            self.y = (rng.random(40) < 0.5).astype(np.float64)

    def grad(self, x: np.ndarray) -> np.ndarray:
        if self.kind == "random":
            return self.rng.standard_normal(x.shape)
        if self.kind == "quadratic":
            return self.A @ x - self.b
        z = self.X @ x
        return self.X.T @ (1.0 / (1.0 + np.exp(-z)) - self.y) / len(self.y)


def _measure(solver, x0_tree, unflatten, grad_flat, tau, correction=None):
    """Run ``tau`` steps; return Δ (flat) and the stacked effective gradients G (d, tau)."""
    wd = solver.weight_decay
    corr_flat = None if correction is None else _flat(correction)
    cols = []

    def grad_fn(params, k):
        x = _flat(params)
        g = grad_flat(x)
        eff = g + wd * x
        if corr_flat is not None:
            eff = eff + corr_flat
        cols.append(eff)
        return unflatten(g)

    state = solver.run(x0_tree, grad_fn, tau, correction)
    return _flat(state.params) - _flat(x0_tree), np.stack(cols, axis=1), state


def _rel(a, b):
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300)


@pytest.mark.parametrize("name,build", BUILDERS, ids=BUILDER_IDS)
@pytest.mark.parametrize("kind", ["random", "quadratic", "logistic"])
@pytest.mark.parametrize("wd,with_corr", [(0.0, False), (0.05, False), (0.0, True), (0.03, True)])
def test_delta_equals_minus_eta_G_a_numpy(name, build, kind, wd, with_corr):
    d, tau = 6, 9
    solver = build(wd)
    prob = _Problem(kind, d, seed=zlib.crc32(repr((name, kind, wd, with_corr)).encode()))
    x0 = prob.rng.standard_normal(d)
    x0_copy = x0.copy()
    corr = prob.rng.standard_normal(d) if with_corr else None
    delta, G, state = _measure(solver, x0, lambda v: v, prob.grad, tau, corr)
    a = solver.a_vector(tau)
    assert G.shape == (d, tau) and a.shape == (tau,)
    assert _rel(delta, -solver.lr * G @ a) <= 1e-12
    # online counter == closed form == sum of the vector
    assert abs(state.a_norm - solver.a_norm(tau)) <= 1e-12 * solver.a_norm(tau)
    assert abs(a.sum() - solver.a_norm(tau)) <= 1e-12 * solver.a_norm(tau)
    assert state.step == tau
    np.testing.assert_array_equal(x0, x0_copy)  # the start point is never modified in place


def test_weight_decay_and_correction_change_the_run():
    """Sanity: the effective-gradient terms really enter (else the test above is vacuous)."""
    prob = _Problem("quadratic", 5, 1)
    x0 = np.ones(5)
    base = S.momentum_sgd(LR, 0.5).run(x0, lambda x, k: prob.grad(x), 6).params
    wd = S.momentum_sgd(LR, 0.5, weight_decay=0.1).run(x0, lambda x, k: prob.grad(x), 6).params
    vr = S.momentum_sgd(LR, 0.5).run(x0, lambda x, k: prob.grad(x), 6, correction=np.full(5, 0.3)).params
    assert np.linalg.norm(base - wd) > 1e-3 and np.linalg.norm(base - vr) > 1e-3


@pytest.mark.parametrize("name,build", BUILDERS, ids=BUILDER_IDS)
@pytest.mark.parametrize("wd,with_corr", [(0.0, False), (0.02, True)])
def test_delta_equals_minus_eta_G_a_torch_dict(name, build, wd, with_corr):
    """Same identity on a dict pytree of float64 torch tensors."""
    solver = build(wd)
    g = torch.Generator().manual_seed(7)
    x0 = {"w": torch.randn(3, 2, generator=g, dtype=torch.float64), "b": torch.randn(2, generator=g, dtype=torch.float64)}
    x0_copy = {k: v.clone() for k, v in x0.items()}
    corr = ({"w": torch.randn(3, 2, generator=g, dtype=torch.float64), "b": torch.randn(2, generator=g, dtype=torch.float64)}
            if with_corr else None)

    def unflatten(v):
        t = torch.as_tensor(v, dtype=torch.float64)
        return {"w": t[:6].reshape(3, 2).clone(), "b": t[6:].clone()}

    prob = _Problem("quadratic", 8, 3)
    tau = 7
    delta, G, state = _measure(solver, x0, unflatten, prob.grad, tau, corr)
    assert isinstance(state.params["w"], torch.Tensor) and state.params["w"].dtype == torch.float64
    assert _rel(delta, -solver.lr * G @ solver.a_vector(tau)) <= 1e-12
    assert abs(state.a_norm - solver.a_norm(tau)) <= 1e-12 * solver.a_norm(tau)
    for k in x0:
        assert torch.equal(x0[k], x0_copy[k])


def test_tuple_pytree_with_python_float_leaf():
    solver = S.momentum_proximal_sgd(LR, 0.3, mu=1.0)
    x0 = (np.array([1.0, -2.0]), 0.5)
    grads = [(np.array([0.2, 0.1]), -0.4), (np.array([-0.3, 0.5]), 0.1), (np.array([1.0, 0.0]), 0.2)]
    state = solver.run(x0, lambda x, k: grads[k], 3)
    G = np.stack([np.append(g[0], g[1]) for g in grads], axis=1)
    delta = np.append(state.params[0], state.params[1]) - np.append(x0[0], x0[1])
    assert isinstance(state.params, tuple)
    assert _rel(delta, -LR * G @ solver.a_vector(3)) <= 1e-12


# ------------------------------------------------------------------ online ‖a‖₁ counter
def _check_counter(solver, taus=50):
    state = solver.init(np.zeros(1))
    for k in range(1, taus + 1):
        state = solver.update(state, np.ones(1))
        closed = solver.a_norm(k)
        vec = solver.a_vector(k)
        assert vec.shape == (k,) and np.all(vec >= 0)
        assert abs(state.a_norm - closed) <= 1e-12 * closed, (k, state.a_norm, closed)
        assert abs(vec.sum() - closed) <= 1e-12 * closed, (k, vec.sum(), closed)
        # with a unit gradient and x0 = 0 the counter is also the measured -Δ/η
        assert abs(-state.params[0] / solver.lr - closed) <= 1e-12 * closed


def _random_hparams(seed):
    rng = np.random.default_rng(seed)
    lr = float(rng.uniform(0.01, 1.0))
    rho = float(rng.uniform(0.0, 0.99))
    alpha = float(1.0 - rng.random())  # in (0, 1]
    mu = alpha / lr
    while lr * mu > 1.0:
        mu = np.nextafter(mu, 0.0)
    return lr, rho, mu


@pytest.mark.parametrize("seed", range(12))
def test_online_counter_random_hyperparameters(seed):
    lr, rho, mu = _random_hparams(seed)
    for solver in (S.sgd(lr), S.proximal_sgd(lr, mu), S.momentum_sgd(lr, rho), S.momentum_proximal_sgd(lr, rho, mu),
                   S.decayed_sgd(lr, gamma=0.5 + rho / 2)):
        _check_counter(solver)


@pytest.mark.parametrize("delta", [0.0, 1e-12, -1e-9, 1e-6, -1e-4, 1e-3, 9.99e-3, -1.001e-2, 2e-2])
@pytest.mark.parametrize("rho", [0.3, 0.9])
def test_online_counter_near_degenerate(rho, delta):
    """1 − α ≈ ρ: the closed form's denominator 1 − α − ρ vanishes."""
    lr = 0.5
    alpha = 1.0 - rho + delta
    _check_counter(S.momentum_proximal_sgd(lr, rho, mu=alpha / lr))


@pytest.mark.parametrize("alpha", [1e-9, 1e-7, 1e-5, 1.0])
def test_online_counter_extreme_alpha(alpha):
    """Tiny α (e.g. CIFAR's μ = 0.001, η = 0.02: α = 2e-5) and α = 1 exactly."""
    lr = 0.5
    _check_counter(S.proximal_sgd(lr, alpha / lr))
    _check_counter(S.momentum_proximal_sgd(lr, 0.9, alpha / lr))


def test_closed_form_table():
    """‖a‖₁ against the closed forms of REFERENCE §1 written out independently."""
    for tau in (1, 2, 5, 17):
        rho, alpha, gamma = 0.6, 0.25, 0.9
        assert S.sgd(0.1).a_norm(tau) == tau
        assert S.momentum_sgd(0.1, rho).a_norm(tau) == pytest.approx((tau - rho * (1 - rho**tau) / (1 - rho)) / (1 - rho), rel=1e-13)
        assert S.proximal_sgd(0.5, alpha / 0.5).a_norm(tau) == pytest.approx((1 - (1 - alpha) ** tau) / alpha, rel=1e-13)
        assert S.decayed_sgd(0.1, gamma=gamma).a_norm(tau) == pytest.approx((1 - gamma**tau) / (1 - gamma), rel=1e-13)
        q = 1 - alpha
        mp = ((q * (1 - q**tau) / alpha) - rho * (1 - rho**tau) / (1 - rho)) / (q - rho)
        assert S.momentum_proximal_sgd(0.5, rho, alpha / 0.5).a_norm(tau) == pytest.approx(mp, rel=1e-13)


# ------------------------------------------------------------------ hand-checked vectors
def test_hand_vectors():
    np.testing.assert_allclose(S.momentum_sgd(0.1, 0.5).a_vector(3), [1.75, 1.5, 1.0], rtol=0, atol=1e-15)
    assert S.momentum_sgd(0.1, 0.5).a_norm(3) == pytest.approx(4.25, abs=1e-15)
    np.testing.assert_allclose(S.proximal_sgd(0.5, 1.0).a_vector(3), [0.25, 0.5, 1.0], rtol=0, atol=1e-15)
    assert S.proximal_sgd(0.5, 1.0).a_norm(3) == pytest.approx(1.75, abs=1e-15)
    np.testing.assert_array_equal(S.sgd(0.3).a_vector(4), [1, 1, 1, 1])
    np.testing.assert_allclose(S.decayed_sgd(0.1, gamma=0.5).a_vector(3), [1.0, 0.5, 0.25], atol=1e-15)
    # momentum + prox, τ = 2 by hand: x2 = -η[(1 + ρ - α) g0 + g1]
    rho, alpha = 0.3, 0.2
    np.testing.assert_allclose(S.momentum_proximal_sgd(1.0, rho, alpha).a_vector(2), [1 + rho - alpha, 1.0], atol=1e-15)
    # ρ = 1 − α = 0.5: p_n = (n+1) ρ^n -> a = [0.75, 1, 1]
    np.testing.assert_allclose(S.momentum_proximal_sgd(0.5, 0.5, 1.0).a_vector(3), [0.75, 1.0, 1.0], atol=1e-15)


def _official_counter(rho: float, alpha: float, tau: int) -> float:
    """The official FedNova optimizer's running normaliser: c ← ρc + 1; S ← (S + c)(1−α) + 1."""
    c = s = 0.0
    for _ in range(tau):
        c = rho * c + 1.0
        s = (s + c) * (1.0 - alpha) + 1.0
    return s


def test_official_counter_matches_for_single_features():
    """For momentum alone / prox alone the official counter is right (c and S separately)."""
    for tau in (1, 3, 8):
        c = s = 0.0
        for _ in range(tau):
            c = 0.7 * c + 1
            s += c
        assert S.momentum_sgd(0.1, 0.7).a_norm(tau) == pytest.approx(s, rel=1e-13)
        s = 0.0
        for _ in range(tau):
            s = s * (1 - 0.3) + 1
        assert S.proximal_sgd(0.1, 3.0).a_norm(tau) == pytest.approx(s, rel=1e-13)


@pytest.mark.parametrize("rho,alpha,tau", [(0.5, 0.5, 3), (0.9, 0.1, 10), (0.2, 0.7, 4), (0.9, 0.02, 25)])
def test_momentum_prox_is_not_the_official_counter(rho, alpha, tau):
    lr = 0.5
    solver = S.momentum_proximal_sgd(lr, rho, alpha / lr)
    # measured ‖a‖₁: one impulse per step, scalar model
    measured = np.empty(tau)
    for j in range(tau):
        st = solver.run(np.zeros(1), lambda x, k, j=j: np.array([1.0 if k == j else 0.0]), tau)
        measured[j] = -st.params[0] / lr
    np.testing.assert_allclose(solver.a_vector(tau), measured, rtol=1e-12)
    ours = solver.run(np.zeros(1), lambda x, k: np.ones(1), tau).a_norm
    assert ours == pytest.approx(measured.sum(), rel=1e-12)
    assert solver.a_norm(tau) == pytest.approx(measured.sum(), rel=1e-12)
    official = _official_counter(rho, alpha, tau)
    assert abs(official - measured.sum()) > 1e-3 * measured.sum()
    if (rho, alpha, tau) == (0.5, 0.5, 3):
        assert measured.sum() == pytest.approx(2.75, abs=1e-14) and official == pytest.approx(3.125, abs=1e-14)


def test_momentum_buffer_not_touched_by_prox():
    """u_{k+1} = ρ u_k + g_k exactly, even with μ > 0 (REFERENCE §5: prox added into the buffer)."""
    rho = 0.8
    solver = S.momentum_proximal_sgd(0.1, rho, mu=4.0)
    rng = np.random.default_rng(0)
    state = solver.init(rng.standard_normal(4))
    u = np.zeros(4)
    for _ in range(6):
        g = rng.standard_normal(4)
        state = solver.update(state, g)
        u = rho * u + g
        np.testing.assert_array_equal(state.momentum, u)
    # the model moved away from the anchor, so a prox term into the buffer would have shown
    assert np.linalg.norm(state.params - state.anchor) > 0.1


def test_momentum_buffer_reset_each_round():
    solver = S.momentum_sgd(0.1, 0.9)
    s = solver.run(np.zeros(3), lambda x, k: np.ones(3), 4)
    fresh = solver.init(s.params)
    np.testing.assert_array_equal(fresh.momentum, np.zeros(3))
    assert fresh.a_norm == 0.0 and fresh.step == 0


def test_solver_misc():
    s = S.momentum_proximal_sgd(0.2, 0.5, mu=2.0)
    assert s.alpha == pytest.approx(0.4)
    s2 = s.with_lr(0.1)
    assert s2.lr == 0.1 and s2.momentum == 0.5 and s2.mu == 2.0 and s.lr == 0.2
    assert S.decayed_sgd(0.2, gamma=0.5).step_size(3) == pytest.approx(0.2 * 0.125)
    assert S.sgd(0.2).step_size(10) == 0.2
    assert S.make_solver("sgd", 0.1).name == "sgd"
    assert S.make_solver("prox", 0.1, mu=0.5).mu == 0.5
    assert S.make_solver("momentum", 0.1, momentum=0.3).momentum == 0.3
    m = S.make_solver("momentum-prox", 0.1, momentum=0.3, mu=0.5, weight_decay=1e-4)
    assert (m.momentum, m.mu, m.weight_decay) == (0.3, 0.5, 1e-4)
    assert set(S.SOLVERS) == {"sgd", "prox", "momentum", "momentum-prox"}
    # a frozen dataclass: hyper-parameters cannot be changed behind the counter's back
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.lr = 1.0


def test_gradient_shape_mismatch_is_rejected():
    """A (d, 1) gradient would broadcast a (d,) model into (d, d) silently."""
    solver = S.sgd(0.1)
    state = solver.init(np.zeros(3))
    with pytest.raises(ValueError, match="grads"):
        solver.update(state, np.zeros((3, 1)))
    with pytest.raises(ValueError, match="grads"):
        solver.update(solver.init({"a": np.zeros(2)}), {"b": np.zeros(2)})
    with pytest.raises(ValueError, match="correction"):
        solver.init(np.zeros(3), correction=np.zeros((3, 1)))


def test_defaults_are_plain_sgd_and_the_papers_momentum():
    """LocalSolver(lr) is plain SGD (no momentum, prox or weight decay: a_i = 1, x - lr g), and the
    factories' default heavy-ball factor is the paper's rho = 0.9 (REFERENCE §4)."""
    from fedlib.solvers import LocalSolver, make_solver, momentum_proximal_sgd
    plain = LocalSolver(lr=0.1)
    np.testing.assert_array_equal(plain.a_vector(4), np.ones(4))
    state = plain.update(plain.init(np.array([1.0, -2.0])), np.array([0.5, 0.5]))
    np.testing.assert_allclose(state.params, [0.95, -2.05], rtol=0, atol=1e-15)
    assert make_solver("momentum", 0.1).momentum == 0.9
    assert make_solver("momentum-prox", 0.1, mu=0.01).momentum == 0.9
    assert momentum_proximal_sgd(0.1).momentum == 0.9 and momentum_proximal_sgd(0.1).mu == 0.0


def test_alpha_one_is_allowed_and_is_the_papers_extreme_case():
    """lr*mu = 1 (alpha = 1, §4.2: FedProx becomes consistent with tau_eff = 1) is a valid proximal step:
    a_i = e_last, ||a_i||_1 = 1, and every step lands on x0 - lr g; just above 1 it is refused."""
    from fedlib.solvers import decayed_sgd, proximal_sgd
    solver = proximal_sgd(0.25, 4.0)
    assert solver.alpha == 1.0
    np.testing.assert_array_equal(solver.a_vector(5), [0, 0, 0, 0, 1])
    assert solver.a_norm(5) == 1.0
    state = solver.init(np.array([1.0, 2.0]))
    for g in ([1.0, 0.0], [0.0, 4.0]):
        state = solver.update(state, np.array(g))
        np.testing.assert_allclose(state.params, np.array([1.0, 2.0]) - 0.25 * np.array(g), atol=1e-15)
    with pytest.raises(ValueError, match=r"^mu\b"):
        proximal_sgd(0.25, 4.0 * (1 + 1e-9))
    sched = decayed_sgd(0.25, schedule=lambda k: 1.0 if k == 0 else 2.0)
    sched_prox = S.LocalSolver(lr=0.25, mu=4.0, lr_schedule=sched.lr_schedule)
    sched_prox.step_size(0)
    with pytest.raises(ValueError, match="lr\\*factor\\*mu"):
        sched_prox.step_size(1)
    with pytest.raises(ValueError, match="finite factor > 0"):
        S.LocalSolver(lr=0.25, lr_schedule=lambda k: 0.0).step_size(0)


def test_run_takes_a_single_step_and_refuses_zero():
    solver = S.momentum_sgd(0.1, 0.9)
    state = solver.run(np.array([1.0]), lambda x, k: 2.0 * x, 1)
    np.testing.assert_allclose(state.params, [0.8], rtol=0, atol=1e-15)
    assert state.step == 1 and state.a_norm == 1.0
    with pytest.raises(ValueError, match="local_steps"):
        solver.run(np.array([1.0]), lambda x, k: x, 0)


def test_gamma_one_is_plain_sgd_and_zero_steps_have_no_counter():
    """decayed_sgd's gamma lies in (0, 1]: gamma = 1 is allowed and is SGD (a_i = 1, the same steps);
    online_a_norms(0) is empty (a client that took no step reports nothing)."""
    flat, plain = S.decayed_sgd(0.1, gamma=1.0), S.sgd(0.1)
    np.testing.assert_array_equal(flat.a_vector(5), plain.a_vector(5))
    grad = lambda x, k: x - k  # noqa: E731
    np.testing.assert_array_equal(flat.run(np.array([2.0]), grad, 4).params, plain.run(np.array([2.0]), grad, 4).params)
    with pytest.raises(ValueError, match="gamma"):
        S.decayed_sgd(0.1, gamma=1.0 + 1e-9)
    assert plain.online_a_norms(0).shape == (0,)
    np.testing.assert_array_equal(plain.online_a_norms(3), [1.0, 2.0, 3.0])


# --------------------------------------------------------------------------- the built-in step's refusal
@dataclasses.dataclass(frozen=True)
class _OwnLeafStep(LocalSolver):
    """Overrides only the leaf step: not the built-in step, though init / update / counter_step are."""

    def _direction_and_params(self, x, g, u, x0, corr, lr_k, wd):
        return x - 2 * lr_k * g, u


def test_builtin_step_refusal_names_the_method_the_subclass_overrides():
    """``builtin_step`` also looks at ``_direction_and_params``, but the refusal said the subclass
    overrides "init / update / counter_step", none of which it does."""
    solver = _OwnLeafStep(lr=0.1)
    assert not solver.builtin_step and sgd(0.1).builtin_step
    with pytest.raises(ValueError, match=r"overrides LocalSolver's step \(_direction_and_params\), which"):
        check_builtin_step("algorithm.solver", [solver], "the fused step does not take")


# --------------------------------------------------------------------------- an own step's a_vector
def test_an_own_step_a_vector_does_not_build_a_tau_by_tau_identity():
    """a_vector of a solver with its own step probed it with the rows of np.eye(tau): tau^2 floats
    (72 MB at tau = 3000; the one-hot labels no longer use np.eye for that reason). It
    now feeds a fresh e_k per step: memory O(tau), the same a_i (heavy ball's closed form)."""
    from fedlib.solvers import LocalSolver, momentum_sgd

    @dataclasses.dataclass(frozen=True)
    class SameStep(LocalSolver):  # LocalSolver's own step, overridden: a_vector comes from the probe
        def update(self, state, grads):
            return super().update(state, grads)

    tau = 3000
    solver = SameStep(lr=0.1, momentum=0.5)
    assert not solver.builtin_step
    tracemalloc.start()
    try:
        a = solver.a_vector(tau)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < tau * tau * 8 / 8, peak  # an identity alone is tau^2 * 8 bytes
    np.testing.assert_allclose(a, momentum_sgd(0.1, 0.5).a_vector(tau), rtol=1e-12)


# --------------------------------------------------------------------------- your own local solver: closed forms
def _nesterov_class():
    """Nesterov momentum written from "Extending fedlib" alone (update + counter_step, no closed forms):
    u_{k+1} = rho u_k + g_k, x_{k+1} = x_k - eta (g_k + rho u_{k+1}); its update adds weight decay and the
    correction to the gradient, as the contract asks (:func:`_nesterov_adding`)."""
    return _nesterov_adding(weight_decay=True, correction=True)


def test_an_own_step_solver_without_closed_forms_gets_those_of_its_own_step():
    """Such a solver ran (its clients reported the right ||a_i||_1 online), but its inherited
    a_norm(tau) / a_vector(tau) were heavy-ball's formulas: population_tau_eff, the tau_eff a user passes
    to FedNova under sampling, was silently that of another solver (about 22 % low at tau = 5, rho = 0.9).
    a_j of Nesterov, by hand: 1 + rho (1 - rho^{n+1}) / (1 - rho), n = tau - 1 - j."""
    import numpy as np

    from fedlib.algorithms import make_algorithm
    from fedlib.schedules import FixedSteps, population_tau_eff
    from fedlib.solvers import momentum_sgd

    rho, tau = 0.9, 5
    solver = _nesterov_class()(lr=0.01, momentum=rho, name="nesterov")
    make_algorithm("fednova", solver)  # check_own_step accepts it
    n = np.arange(tau - 1, -1, -1)
    by_hand = 1 + rho * (1 - rho ** (n + 1)) / (1 - rho)
    np.testing.assert_allclose(solver.a_vector(tau), by_hand, rtol=1e-12)
    assert solver.a_norm(tau) == pytest.approx(by_hand.sum(), rel=1e-12)
    assert solver.a_norm(tau) == pytest.approx(solver.online_a_norms(tau)[-1], rel=0, abs=0)
    heavy_ball = momentum_sgd(0.01, momentum=rho).a_norm(tau)
    assert abs(heavy_ball - by_hand.sum()) > 0.2 * by_hand.sum()  # what it returned before: another solver's
    assert population_tau_eff([0.25, 0.75], FixedSteps([tau, 2]), solver) == pytest.approx(
        0.25 * by_hand.sum() + 0.75 * solver.a_vector(2).sum(), rel=1e-12)
    # a built-in solver keeps its formulas, bit for bit
    hb = momentum_sgd(0.01, momentum=rho)
    assert hb.builtin_step and hb.a_norm(tau) == heavy_ball


# -------------------------------------------------------------- make_solver: mu and momentum of a solver without them
@pytest.mark.parametrize("name", ["sgd", "momentum"])
def test_make_solver_refuses_mu_for_a_solver_without_prox(name):
    """make_solver("momentum", 0.1, mu=0.5) returned plain heavy-ball momentum (mu=0.0): the proximal
    term the user asked for (FedNova with momentum + prox) was dropped without a word."""
    from fedlib.solvers import make_solver

    with pytest.raises(ValueError, match=rf"^mu: solver '{name}' has no proximal term, got mu = 0.5"):
        make_solver(name, 0.1, mu=0.5)


@pytest.mark.parametrize("name, kwargs", [("sgd", {}), ("prox", {"mu": 0.5})])
def test_make_solver_refuses_momentum_for_a_solver_without_a_buffer(name, kwargs):
    """make_solver("sgd", 0.1, momentum=0.5) returned plain SGD (momentum=0.0), the momentum dropped."""
    from fedlib.solvers import make_solver

    with pytest.raises(ValueError, match=rf"^momentum: solver '{name}' has no momentum buffer, got momentum = 0.5"):
        make_solver(name, 0.1, momentum=0.5, **kwargs)


@pytest.mark.parametrize("name, kwargs, plain_name", [("momentum", {}, "sgd"), ("momentum-prox", {"mu": 0.5}, "prox")])
def test_make_solver_refuses_a_momentum_solver_without_momentum(name, kwargs, plain_name):
    """make_solver("momentum", 0.1, momentum=0.0) (and train_clients(solver="momentum", momentum=0.0), the CLI's
    --solver momentum --momentum 0) ran plain SGD under the name 'momentum'. A positive momentum still builds."""
    import torch

    from fedlib.experiments.custom import train_clients
    from fedlib.solvers import make_solver

    for zero in (0, 0.0, np.float64(0.0)):
        with pytest.raises(ValueError, match=rf"^momentum must be > 0 for solver '{name}', got 0(\.0)? \(without "
                                             rf"momentum use '{plain_name}'\)$"):
            make_solver(name, 0.1, momentum=zero, **kwargs)
    assert make_solver(name, 0.1, momentum=0.3, **kwargs).momentum == 0.3
    with pytest.raises(ValueError, match=r"^momentum must be > 0 for solver 'momentum'"):
        train_clients(torch.nn.Linear(3, 2), [torch.zeros(2, 3)], [torch.zeros(2, dtype=torch.long)],
                      algorithms=("fedavg",), rounds=1, lr=0.1, solver="momentum", momentum=0.0)


def test_make_solver_non_numeric_mu_is_a_value_error():
    """make_solver("prox", 0.1, mu="0.5") raised TypeError ('<=' not supported ...), not a ValueError naming mu."""
    from fedlib.solvers import make_solver

    with pytest.raises(ValueError, match=r"^mu must be > 0 for the proximal solver, got '0\.5'"):
        make_solver("prox", 0.1, mu="0.5")


def test_make_solver_defaults_unchanged():
    from fedlib.solvers import make_solver, momentum_proximal_sgd, momentum_sgd, proximal_sgd, sgd

    assert make_solver("sgd", 0.1, mu=0.0) == sgd(0.1)
    assert make_solver("momentum", 0.1) == momentum_sgd(0.1, 0.9)
    assert make_solver("momentum", 0.1, momentum=0.3) == momentum_sgd(0.1, 0.3)
    assert make_solver("momentum-prox", 0.1, mu=0.5) == momentum_proximal_sgd(0.1, 0.9, 0.5)
    assert make_solver("prox", 0.1, mu=0.5, weight_decay=1e-4) == proximal_sgd(0.1, 0.5, 1e-4)


# ---------------------------------------------------------------------- make_solver('prox') of a mu that is no number
@pytest.mark.parametrize("mu", ["a", None, [0.5]])
def test_make_solver_prox_names_a_mu_that_is_no_number(mu):
    """Was: make_solver('prox', 0.5, mu='a') failed with "'<=' not supported between instances of 'str'
    and 'int'" (None and a list alike), not naming mu."""
    from fedlib.solvers import make_solver

    with pytest.raises(ValueError, match="^mu must be > 0 for the proximal solver"):
        make_solver("prox", 0.5, mu=mu)
    assert make_solver("prox", 0.5, mu=np.float64(0.5)).mu == 0.5


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_grad_fn_returning_a_list_for_an_array_parameter(momentum):
    """grad_fn(params, ...) -> list(...) for a numpy-array model: plain SGD died in ``lr * list``
    ("can't multiply sequence by non-int of type 'float'") while momentum silently converted
    it; both now refuse it, naming grads."""
    from fedlib.solvers import LocalSolver

    solver = LocalSolver(lr=0.1, momentum=momentum)
    state = solver.init(np.zeros(3))
    with pytest.raises(ValueError, match="grads must have the structure of params"):
        solver.update(state, [1.0, 2.0, 3.0])
    assert solver.update(state, np.ones(3)).params.tolist() == [-0.1, -0.1, -0.1]


def test_solver_refuses_gradients_of_another_kind_than_the_parameters():
    """A numpy model with a torch gradient died in ``x - lr * g`` ("unsupported operand type(s) for
    -: 'numpy.ndarray' and 'Tensor'"); a float32 torch model with a numpy gradient silently became
    a float64 tensor. Both now refused, naming grads."""
    solver = sgd(0.1)
    with pytest.raises(ValueError, match="grads: a leaf is a torch tensor but the parameter is a numpy array"):
        solver.update(solver.init(np.zeros(2)), torch.ones(2))
    with pytest.raises(ValueError, match="grads: a leaf is a numpy array but the parameter is a torch tensor"):
        solver.update(solver.init(torch.zeros(2)), np.ones(2))
    out = solver.update(solver.init(torch.zeros(2)), torch.ones(2)).params
    assert out.dtype == torch.float32 and out.tolist() == pytest.approx([-0.1, -0.1])
    assert solver.update(solver.init(0.0), 1.0).params == pytest.approx(-0.1)  # a number is a leaf too


@pytest.mark.parametrize("rho", [0.99999, 0.999999, 1 - 1e-9, 1 - 1e-12])
def test_momentum_a_norm_closed_form_for_momentum_near_one(rho):
    """||a_i||_1 = [tau - rho(1 - rho^tau)/(1 - rho)]/(1 - rho) cancels for rho near 1: at
    rho = 1 - 1e-9, tau = 2 the closed form was 33 % off (2 instead of 2 + rho), and run_replicas /
    population_tau_eff use it. Exact: sum_{k<tau} (tau - k) rho^k, in rationals."""
    from fractions import Fraction

    from fedlib.solvers import momentum_sgd

    solver = momentum_sgd(0.1, rho)
    for tau in (1, 2, 3, 10, 100):
        exact = float(sum((tau - k) * Fraction(rho) ** k for k in range(tau)))
        assert solver.a_norm(tau) == pytest.approx(exact, rel=1e-13)
        assert solver.a_vector(tau).sum() == pytest.approx(exact, rel=1e-13)
        assert solver.online_a_norms(tau)[-1] == pytest.approx(exact, rel=1e-13)


@pytest.mark.parametrize("rho", [0.9, 0.99, 1 - 1e-6, 1 - 1e-9])
@pytest.mark.parametrize("alpha", [1e-6, 1e-3, 0.05, 0.5])
def test_momentum_prox_a_norm_closed_form_for_momentum_near_one(rho, alpha):
    """Momentum + prox: ||a_i||_1 = [q(1 - q^tau)/alpha - rho(1 - rho^tau)/(1 - rho)]/(q - rho), q = 1 - alpha,
    took 1 - rho^tau as a plain difference, which loses ~|log10(1 - rho)| digits: 1.4e-8 relative off at
    rho = 1 - 1e-9, alpha = 0.05, tau = 5 (1.5e-10 at rho = 1 - 1e-6, tau = 2). Exact: the sum of
    p_n = q p_{n-1} + rho^n, p_0 = 1 (a_vector reversed), in rationals."""
    from fractions import Fraction

    from fedlib.solvers import momentum_proximal_sgd

    solver = momentum_proximal_sgd(1.0, rho, alpha)
    q, r = 1 - Fraction(solver.alpha), Fraction(rho)
    p, rk = [Fraction(1)], Fraction(1)
    for _ in range(1, 200):
        rk *= r
        p.append(q * p[-1] + rk)
    for tau in (1, 2, 5, 20, 200):
        exact = sum(p[:tau])
        assert solver.a_norm(tau) == pytest.approx(float(exact), rel=1e-13)
        assert solver.a_vector(tau) == pytest.approx([float(v) for v in p[tau - 1::-1]], rel=1e-13)
        assert solver.online_a_norms(tau)[-1] == pytest.approx(float(exact), rel=1e-13)


def test_update_on_a_tree_refuses_a_gradient_leaf_of_another_shape():
    """On a tree of parameters (a dict here, not a bare array), a gradient leaf of shape (3, 1) for a
    parameter of shape (3,) is refused, naming both shapes: numpy would broadcast ``x - lr * g`` to a
    (3, 3) parameter without a word."""
    solver = sgd(0.1)
    state = solver.init({"w": np.zeros(3), "b": np.zeros(1)})
    with pytest.raises(ValueError, match=r"^grads: a leaf has shape \(3, 1\) but the parameter has \(3,\)$"):
        solver.update(state, {"w": np.zeros((3, 1)), "b": np.zeros(1)})
    new = solver.update(state, {"w": np.ones(3), "b": np.ones(1)})  # the right shapes: x - 0.1 g
    assert new.params["w"].tolist() == [-0.1] * 3 and new.params["b"].tolist() == [-0.1]


def test_init_refuses_a_correction_of_another_structure_with_leaves_of_the_same_shapes():
    """A correction whose leaves have the parameters' shapes but under other keys ({'b': ...} for
    {'a': ...}) is refused as a correction of another structure (the shapes alone agree)."""
    solver = sgd(0.1)
    with pytest.raises(ValueError, match="^correction must be a tree with the structure and leaf shapes of params$"):
        solver.init({"a": np.zeros(3)}, correction={"b": np.zeros(3)})
    state = solver.init({"a": np.zeros(3)}, correction={"a": np.full(3, 2.0)})
    new = solver.update(state, {"a": np.ones(3)})  # x - lr (g + c) = -0.1 * 3
    np.testing.assert_allclose(new.params["a"], [-0.3] * 3, rtol=1e-15)


def test_check_shared_lr_refuses_one_solver_or_a_number_by_name():
    """A LocalSolver given where a sequence of them is asked (run_replicas(prob, "fednova", sgd(0.1), ...)) is a
    ValueError naming the argument. Before: list(solvers) raised Python's TypeError "'LocalSolver' object is not
    iterable" (run_replicas, client_solvers, the speedup and bounds experiments), a number "'float' object is not
    iterable"."""
    from fedlib.engines.quadratic import client_solvers, run_replicas
    from fedlib.problems.quadratic import random_quadratic
    from fedlib.schedules import RandomLocalWork

    with pytest.raises(ValueError, match=r"^solvers must be a non-empty sequence of LocalSolver, got one LocalSolver "
                                         r"\(a list of one: \[solver\]\)$"):
        S.check_shared_lr("solvers", sgd(0.1))
    for bad, kind in ((0.1, "float"), (None, "NoneType"), (np.array(2), "ndarray")):
        with pytest.raises(ValueError, match=rf"^solvers must be a non-empty sequence of LocalSolver, got {kind}$"):
            S.check_shared_lr("solvers", bad)
    work = RandomLocalWork([1, 2], [1, 2])
    with pytest.raises(ValueError, match=r"^solvers must be a non-empty sequence of LocalSolver, got one LocalSolver"):
        run_replicas(random_quadratic(2, 2, seed=0), "fednova", sgd(0.1), work, 1)
    with pytest.raises(ValueError, match=r"^solvers must be a non-empty sequence of LocalSolver, got one LocalSolver"):
        client_solvers(work, sgd(0.1))
    assert S.check_shared_lr("solvers", (sgd(0.1),)) == [sgd(0.1)]  # any sequence still is one


# -------------------------------------------------------------- your own step: weight decay and the VR correction
def _nesterov_adding(weight_decay: bool, correction: bool):
    """Nesterov momentum whose update adds weight_decay * x and the correction to the gradient, or leaves them out."""
    from fedlib.tree import tree_map

    @dataclasses.dataclass(frozen=True)
    class Nesterov(LocalSolver):
        def update(self, state, grads):
            if weight_decay and self.weight_decay:
                grads = tree_map(lambda g, x: g + self.weight_decay * x, grads, state.params)
            if correction and state.correction is not None:
                grads = tree_map(lambda g, c: g + c, grads, state.correction)
            rho = self.momentum
            mom = tree_map(lambda u, g: rho * u + g, state.momentum, grads)
            params = tree_map(lambda x, g, u: x - self.lr * (g + rho * u), state.params, grads, mom)
            shadow = self.counter_step(state.step, state.shadow)
            return state._replace(params=params, momentum=mom, step=state.step + 1, shadow=shadow, a_norm=shadow[0])

        def counter_step(self, k, counter):
            a, u = counter
            u = self.momentum * u + 1.0
            return (a + 1.0 + self.momentum * u, u)

    return Nesterov


def test_an_own_step_that_leaves_out_weight_decay_or_the_correction_is_refused():
    """An own ``update`` must add ``weight_decay * x`` and ``state.correction`` to the gradient (they belong to G_i);
    one that leaves out a weight decay it is given, or the correction of an algorithm with control variates, is
    refused where fedlib receives it. Before: accepted, and the run silently trained without them: on the two
    clients F_i = h_i (x - c_i)^2 / 2 below, Nesterov(weight_decay=0.5) ended where weight_decay=0 ends, and SCAFFOLD
    / FedNova-VR with it ended where no variates would (FedNova-VR exactly at FedNova's point). One that adds them
    passes, and the built-in step is unchanged."""
    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.optim import ClientOptimizer, parameters_of
    from fedlib.schedules import FixedSteps

    forgets_both, adds_both = _nesterov_adding(False, False), _nesterov_adding(True, True)
    with pytest.raises(ValueError, match=r"solver: Nesterov is given weight_decay = 0.5, but its update leaves it "
                                         r"out: one step from x = 1.0 with a zero gradient gives 1.0, not 0.985"):
        make_algorithm("fednova", forgets_both(lr=0.02, momentum=0.5, weight_decay=0.5))  # 1 - 0.02 * 1.5 * 0.5
    for name in ("scaffold", "vrlsgd", "fednova-vr"):
        with pytest.raises(ValueError, match=r"solver: Nesterov is given a control-variate correction .* gives 0.0, "
                                             r"not -0.03; .* must add state.correction to grads"):
            make_algorithm(name, forgets_both(lr=0.02, momentum=0.5))  # 0 - 0.02 * 1.5 * 1
    make_algorithm("fednova", forgets_both(lr=0.02, momentum=0.5))  # no weight decay, no variates: nothing to add

    class NoCorrectionInit(adds_both):
        def init(self, params):
            return super().init(params)

    with pytest.raises(ValueError, match=r"solver: NoCorrectionInit.init raised TypeError: .* while check_own_step"):
        make_algorithm("scaffold", NoCorrectionInit(lr=0.02, momentum=0.5))
    model = torch.nn.Linear(2, 1)
    vr = make_algorithm("scaffold", adds_both(lr=0.02, momentum=0.5))
    opt = ClientOptimizer(model.parameters(), forgets_both(lr=0.02, momentum=0.5))
    with pytest.raises(ValueError, match="is given a control-variate correction"):
        opt.begin(vr.client_init(vr.init(parameters_of(model), 2), 0))
    with pytest.raises(ValueError, match=r"solver_at\(0, 0\): Nesterov is given a control-variate correction"):
        run_sequential(vr, np.zeros(1), lambda x, i, t, k: x, [0.5, 0.5], FixedSteps([1, 1]), 1,
                       solver_at=lambda t, i: forgets_both(lr=0.02, momentum=0.5))

    # one that adds both: one round of SCAFFOLD from x = 0 with chosen variates, by hand
    h, c, lr, rho, wd = np.array([1.0, 4.0]), np.array([1.0, -1.0]), 0.02, 0.5, 0.5
    from fedlib.variance import control_variates
    algo = make_algorithm("scaffold", adds_both(lr=lr, momentum=rho, weight_decay=wd))
    state = algo.init(np.zeros(1), 2)._replace(variates=control_variates(np.array([[1.0], [3.0]]), [0.5, 0.5]))
    run = run_sequential(algo, None, lambda x, i, t, k: h[i] * (x - c[i]), [0.5, 0.5], FixedSteps([2, 2]), 1,
                         initial_state=state)
    deltas = []
    for i, corr in enumerate([2.0 - 1.0, 2.0 - 3.0]):  # c_bar - c_i, c_bar = (1 + 3) / 2
        x, u = 0.0, 0.0
        for _ in range(2):
            g = h[i] * (x - c[i]) + wd * x + corr
            u = rho * u + g
            x = x - lr * (g + rho * u)
        deltas.append(x)
    assert float(run.state.params[0]) == pytest.approx(0.5 * deltas[0] + 0.5 * deltas[1], rel=1e-13)  # FedAvg
    assert S.check_own_step("solver", S.momentum_sgd(0.1, 0.9, weight_decay=0.5), correction=True).builtin_step


def test_make_solver_momentum_prox_needs_mu_as_prox_does():
    """make_solver("momentum-prox", lr) without mu (or with mu = 0) is refused by name, as "prox" is and as the command
    line's --solver momentum-prox is ('--mu: --solver momentum-prox needs a proximal coefficient --mu > 0'). Before: it
    returned heavy-ball momentum named 'momentum-prox' (mu = 0.0), so train_clients(..., solver="momentum-prox") without
    mu trained plain momentum without a word. With mu > 0 it is momentum_proximal_sgd, unchanged."""
    from fedlib.solvers import make_solver, momentum_proximal_sgd

    for mu in (0.0, 0, -0.0):
        with pytest.raises(ValueError, match=r"^mu must be > 0 for the momentum \+ proximal solver, got -?0(\.0)? \(without "
                                             r"a proximal term use 'momentum'\)$"):
            make_solver("momentum-prox", 0.1, mu=mu)
    with pytest.raises(ValueError, match=r"^mu must be > 0 for the momentum \+ proximal solver, got -0.5"):
        make_solver("momentum-prox", 0.1, mu=-0.5)
    with pytest.raises(ValueError, match=r"^mu must be > 0 for the momentum \+ proximal solver, got '0.5'"):
        make_solver("momentum-prox", 0.1, mu="0.5")
    assert make_solver("momentum-prox", 0.1, momentum=0.3, mu=0.5) == momentum_proximal_sgd(0.1, 0.3, 0.5)
    from fedlib.experiments.custom import train_clients
    xs, ys = [torch.zeros(4, 3)], [torch.zeros(4, dtype=torch.int64)]
    with pytest.raises(ValueError, match=r"^mu must be > 0 for the momentum \+ proximal solver"):
        train_clients(torch.nn.Linear(3, 2), xs, ys, rounds=1, solver="momentum-prox")


# -------------------------------------------------------------- your own step: linear in the gradients
def _elementwise_step(direction, name):
    """A solver with its own ``update`` x <- x - lr * direction(g) and SGD's counter (its unit-gradient probe reads
    a_i = (1, ..., 1) whenever direction(e_k) = e_k)."""
    from fedlib.tree import tree_map

    def update(self, state, grads):
        lr = self.step_size(state.step)
        params = tree_map(lambda x, g: x - lr * direction(g), state.params, grads)
        shadow = self.counter_step(state.step, state.shadow)
        return state._replace(params=params, step=state.step + 1, shadow=shadow, a_norm=shadow[0])

    return dataclasses.dataclass(frozen=True)(type(name, (LocalSolver,), {"update": update}))


def test_an_own_step_that_is_not_linear_in_the_gradients_is_refused():
    """check_own_step's docstring promised to refuse a solver that is not linear in its gradients, but it probed
    with unit gradients e_k only, where sign-SGD and x <- x - lr g|g| agree with SGD: both were accepted by
    make_algorithm, ClientOptimizer and solver_at, and FedNova normalised sign-SGD's change by ||a_i||_1 = tau
    (two steps of gradient (100, 0.001) gave d_i = (1, 1)). A probe with gradients of mixed signs and sizes now
    refuses them by name; a linear own step (Nesterov) still passes."""
    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.optim import ClientOptimizer
    from fedlib.schedules import FixedSteps

    sign_sgd, squared = _elementwise_step(np.sign, "SignSGD"), _elementwise_step(lambda g: g * abs(g), "Squared")
    for cls in (sign_sgd, squared):
        message = rf"^solver: {cls.__name__}'s update is not linear in the gradients: 5 steps with the gradients G = "
        with pytest.raises(ValueError, match=message):
            S.check_own_step("solver", cls(lr=0.1))
        with pytest.raises(ValueError, match=message):
            make_algorithm("fednova", cls(lr=0.1))
        with pytest.raises(ValueError, match=message):
            ClientOptimizer(torch.nn.Linear(2, 1).parameters(), cls(lr=0.1))
    with pytest.raises(ValueError, match=r"move x from 0 to \[-0.1, -0.1\], not to -lr G a_i = \[-3.58, 0.7\]"):
        S.check_own_step("solver", sign_sgd(lr=0.1))  # 0.1 * (3 - 0.5 + 40 - 7 + 0.3), -0.1 * (0.25 + 6 - 2 + ...)
    with pytest.raises(ValueError, match=r"^solver_at\(0, 1\): SignSGD's update is not linear"):
        run_sequential(make_algorithm("fednova", sgd(0.1)), np.zeros(1), lambda x, i, t, k: x, [0.5, 0.5],
                       FixedSteps([1, 1]), 1, solver_at=lambda t, i: sign_sgd(lr=0.1) if i else sgd(0.1))
    nesterov = _nesterov_class()(lr=0.1, momentum=0.9)
    assert S.check_own_step("solver", nesterov) is nesterov
    assert S.check_own_step("solver", _elementwise_step(lambda g: g, "Plain")(lr=0.1, weight_decay=0.0)) is not None


def test_the_linearity_probe_has_a_column_for_every_probed_step():
    """_probe_linear takes the first tau columns of LINEARITY_PROBE for the largest tau of OWN_STEP_PROBES: a probe
    step count beyond its width would be reported as the solver's update failing (a review note)."""
    from fedlib.solvers import LINEARITY_PROBE, OWN_STEP_PROBES

    assert max(OWN_STEP_PROBES) <= LINEARITY_PROBE.shape[1]


# -------------------------------------------------------------- your own step: probed once per distinct solver per run
def _counted_sgd(counts):
    """SGD written as a solver of its own whose update counts its calls in ``counts[name]`` (the probe's and the run's)."""
    from fedlib.tree import tree_map

    @dataclasses.dataclass(frozen=True)
    class CountedSGD(LocalSolver):
        def update(self, state, grads):
            counts[self.name] = counts.get(self.name, 0) + 1
            if state.correction is not None:
                grads = tree_map(lambda g, c: g + c, grads, state.correction)
            params = tree_map(lambda x, g: x - self.lr * g, state.params, grads)
            shadow = self.counter_step(state.step, state.shadow)
            return state._replace(params=params, step=state.step + 1, shadow=shadow, a_norm=shadow[0])

    return CountedSGD


#: update calls of one check_own_step of a solver without weight decay (unit probes 1 + 2 + 5, linearity probe 5)
PROBE_UPDATES = sum(S.OWN_STEP_PROBES) + S.LINEARITY_PROBE.shape[1]


def test_run_sequential_probes_each_distinct_own_step_solver_once_per_run():
    """run_sequential ran check_own_step (13 updates of the solver with the linearity probe of 1225d47) for every
    client in every round: a solver_at handing out the same own-step solvers took 1.29x the time it took before
    that probe, most of it in the probes. Now each run probes each distinct solver once (the same object, or a fresh
    copy with equal fields), a second run probes again, and the run's numbers are unchanged."""
    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.schedules import FixedSteps

    counts: dict = {}
    cls = _counted_sgd(counts)
    same, fresh = cls(lr=0.1, name="same"), cls(lr=0.1, name="fresh")
    rounds, tau = 4, [2, 3, 1]

    def solver_at(t, i):
        return same if i != 1 else dataclasses.replace(fresh)  # a new but equal object every call

    def run():
        return run_sequential(make_algorithm("fednova", sgd(0.1)), np.zeros(2), lambda x, i, t, k: x - i, [0.2, 0.5, 0.3],
                              FixedSteps(tau), rounds, solver_at=solver_at).state.params

    got = run()
    assert counts == {"same": PROBE_UPDATES + rounds * (2 + 1), "fresh": PROBE_UPDATES + rounds * 3}
    expected = run_sequential(make_algorithm("fednova", sgd(0.1)), np.zeros(2), lambda x, i, t, k: x - i,
                              [0.2, 0.5, 0.3], FixedSteps(tau), rounds).state.params
    np.testing.assert_allclose(got, expected, rtol=1e-14, atol=0)  # SGD of its own is SGD
    run()  # nothing remembered across runs
    assert counts == {"same": 2 * (PROBE_UPDATES + rounds * (2 + 1)), "fresh": 2 * (PROBE_UPDATES + rounds * 3)}


def test_run_sequential_still_refuses_a_bad_solver_where_it_first_appears():
    """With the probes remembered per run, a solver_at that returns good own-step solvers and, at round 3 for client
    1 only, one that is not linear (sign-SGD) or one of the same class as a good one but with a weight decay its
    update leaves out, is refused there, with check_own_step's message naming solver_at(3, 1)."""
    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.schedules import FixedSteps

    forgets = _nesterov_adding(weight_decay=False, correction=False)
    good = _nesterov_class()(lr=0.1, momentum=0.5)
    for bad, message in ((_elementwise_step(np.sign, "SignSGD")(lr=0.1),
                          r"^solver_at\(3, 1\): SignSGD's update is not linear in the gradients"),
                         (forgets(lr=0.1, momentum=0.5, weight_decay=0.5),
                          r"^solver_at\(3, 1\): Nesterov is given weight_decay = 0.5, but its update leaves it out")):
        seen = []

        def solver_at(t, i, bad=bad, seen=seen):
            seen.append((t, i))
            if (t, i) == (3, 1):
                return bad
            return good if i == 0 else forgets(lr=0.1, momentum=0.5)  # a fresh copy every call; no weight decay

        with pytest.raises(ValueError, match=message):
            run_sequential(make_algorithm("fednova", sgd(0.1)), np.zeros(1), lambda x, i, t, k: x, [0.5, 0.5],
                           FixedSteps([2, 2]), 5, solver_at=solver_at)
        assert seen[-1] == (3, 1)


def test_own_step_checks_keys_by_fields_and_class_else_by_identity():
    """OwnStepChecks (one per run) remembers a solver by its class and the type and value of each field when those
    are all it holds; by the object itself otherwise (kept alive, so its id is not reused). A built-in solver is
    never probed; a solver whose fields change in place is probed again; correction=True is a check of its own."""
    counts: dict = {}
    cls = _counted_sgd(counts)
    checks = S.OwnStepChecks()
    assert checks.check("s", sgd(0.1)).lr == 0.1 and len(checks) == 0
    for solver in (cls(lr=0.1, name="a"), cls(lr=0.1, name="a"), cls(lr=0.1, name="b"), cls(lr=0.2, name="b"),
                   cls(lr=1, name="b")):  # the value's type is in the key, but lr 1 (int) is stored as 1.0
        checks.check("s", solver)
    checks.check("s", cls(lr=1.0, name="b"))  # so this one shares lr 1's key
    assert len(checks) == 4 and counts == {"a": PROBE_UPDATES, "b": 3 * PROBE_UPDATES}
    checks.check("s", cls(lr=0.1, name="a"), correction=True)
    assert len(checks) == 5 and counts["a"] == 2 * PROBE_UPDATES + 1
    moved = cls(lr=0.1, name="a")
    object.__setattr__(moved, "lr", 0.3)  # a frozen dataclass changed in place: a new key
    checks.check("s", moved)
    assert counts["a"] == 3 * PROBE_UPDATES + 1
    odd = cls(lr=0.1, name="odd")
    object.__setattr__(odd, "extra", 1)  # state outside the fields: keyed by identity
    checks.check("s", odd)
    checks.check("s", odd)
    assert S._behaviour_key(odd) == ("id", id(odd)) and counts["odd"] == PROBE_UPDATES
    unhashable = cls(lr=0.1, name="u", lr_schedule=_Unhashable())
    assert S._behaviour_key(unhashable) == ("id", id(unhashable))
    small = S.OwnStepChecks()
    small.MAX_REMEMBERED = 2
    for lr in (0.1, 0.2, 0.3, 0.1):  # 0.1 forgotten when 0.3 came, so probed again
        small.check("s", cls(lr=lr, name="cap"))
    assert len(small) == 2 and counts["cap"] == 4 * PROBE_UPDATES


class _Unhashable:
    __hash__ = None

    def __call__(self, k):
        return 1.0


def test_client_optimizer_begin_probes_each_distinct_solver_once():
    """ClientOptimizer.begin(solver_state, solver) ran check_own_step for every client in every round, and with control
    variates once more (correction=True) for its own solver; now once per distinct solver per optimizer, and a bad
    solver is still refused at the begin that first gets it."""
    from fedlib.optim import ClientOptimizer

    counts: dict = {}
    cls = _counted_sgd(counts)
    w = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    opt = ClientOptimizer([w], cls(lr=0.1, name="base"))
    assert counts == {"base": PROBE_UPDATES}  # the constructor's check
    client = cls(lr=0.1, name="client")
    for _ in range(3):
        opt.begin(client.init([torch.zeros(2, dtype=torch.float64)]), dataclasses.replace(client))
    assert counts == {"base": PROBE_UPDATES, "client": PROBE_UPDATES}
    with_correction = client.init([torch.zeros(2, dtype=torch.float64)], [torch.ones(2, dtype=torch.float64)])
    for _ in range(3):
        opt.begin(with_correction)
    assert counts["base"] == 2 * PROBE_UPDATES + 1  # + its correction probe, once
    with pytest.raises(ValueError, match=r"^solver: SignSGD's update is not linear in the gradients"):
        opt.begin(client.init([torch.zeros(2, dtype=torch.float64)]), _elementwise_step(np.sign, "SignSGD")(lr=0.1))


def test_own_step_probe_keeps_state_held_outside_the_fields():
    """check_own_step probed dataclasses.replace(solver, weight_decay=0.0), a new instance without what the solver holds
    outside its fields: a solver with an attribute set after construction failed the probe as if its step could not
    take numpy arrays. Without weight decay it is probed as it is (accepted); with some, the message says why."""
    import dataclasses

    from fedlib.solvers import LocalSolver, check_own_step

    @dataclasses.dataclass(frozen=True)
    class Scaled(LocalSolver):
        def update(self, state, grads):
            return super().update(state, self.scale * grads)

    solver = Scaled(lr=0.5)
    object.__setattr__(solver, "scale", 1.0)  # set after construction: not a field
    assert check_own_step("solver", solver) is solver
    decayed = Scaled(lr=0.5, weight_decay=0.1)
    object.__setattr__(decayed, "scale", 1.0)
    with pytest.raises(ValueError, match=r"^solver: Scaled.update raised AttributeError: .*keeps only the dataclass "
                                         r"fields: an attribute set after construction is not in it; make it a field\.$"):
        check_own_step("solver", decayed)


@pytest.mark.parametrize("solver", [sgd(0.1), S.momentum_proximal_sgd(0.1, 0.5, 0.3),
                                    S.decayed_sgd(0.1, gamma=0.5)], ids=["sgd", "momentum-prox", "decayed"])
@pytest.mark.parametrize("name, call", [
    ("steps", lambda s, n: s.online_a_norms(n)),
    ("local_steps", lambda s, n: s.run(np.array([1.0, -2.0]), lambda x, k: x + k, n)),
    ("tau", lambda s, n: s.a_vector(n)),
    ("tau", lambda s, n: s.a_norm(n)),
], ids=["online_a_norms", "run", "a_vector", "a_norm"])
def test_scalar_step_counts_are_whole_numbers(solver, name, call):
    """A step count is a whole number, scalar or array (the fedlib docstring's convention): 2.0 is 2, as the
    local_steps arrays [2.0, 3.0] of the engines already were. Before: "tau must be an integer >= 1, got 2.0"
    (steps, local_steps alike). 1.5, True and NaN are still refused."""
    import pickle

    assert pickle.dumps(call(solver, 3.0)) == pickle.dumps(call(solver, 3))  # the same result, bit for bit
    for bad in (1.5, True, float("nan")):
        with pytest.raises(ValueError, match=rf"^{name} must be a whole number >= [01], got "):
            call(solver, bad)


@pytest.mark.parametrize("lib, tree", [("numpy", False), ("numpy", True), ("torch", True)])
def test_gradients_that_would_widen_the_models_dtype_are_refused(lib, tree):
    """Before: float64 gradients on a float32 model were taken, and numpy's and torch's promotion made the model
    float64 after the first step, without a word (run_sequential with a grad_fn computing in float64 went on in
    float64). Gradients that keep the parameters' dtype pass: float32 ones on float64 parameters; an integer
    starting point still becomes float. numpy without a tree is the fast path of a single array."""
    def leaf(values, dtype):
        out = np.asarray(values, dtype=dtype)
        out = torch.tensor(out) if lib == "torch" else out
        return {"w": out} if tree else out

    def dtype_of(params):
        return str((params["w"] if tree else params).dtype)

    solver = S.momentum_sgd(0.1, momentum=0.5)
    with pytest.raises(ValueError, match=r"^grads: a leaf is (torch\.)?float64 but the parameter is (torch\.)?float32: "
                                         r"the step would turn the model into (torch\.)?float64"):
        solver.update(solver.init(leaf([0.0, 1.0], np.float32)), leaf([1.0, 1.0], np.float64))
    assert dtype_of(solver.update(solver.init(leaf([0.0, 1.0], np.float64)), leaf([1.0, 1.0], np.float32)).params) \
        .endswith("float64")
    assert dtype_of(solver.update(solver.init(leaf([0.0, 1.0], np.float32)), leaf([1.0, 1.0], np.float32)).params) \
        .endswith("float32")
    if lib == "numpy":
        assert dtype_of(solver.update(solver.init(leaf([0, 1], np.int64)), leaf([1.0, 1.0], np.float64)).params) \
            == "float64"


def test_integer_gradients_that_would_widen_the_model_are_refused():
    """An integer or bool gradient is multiplied by the Python-float step size: numpy makes that float64, torch its
    default dtype. Before, int8 or bool gradients on a float32 numpy model passed the dtype check (float32 and int8
    promote to float32) and the model became float64 without a word; a torch float16 model with int8 gradients
    became float32. On float64 (numpy) and float32 (torch) models they keep the dtype and pass."""
    solver = S.sgd(0.1)
    for x, g, to in ((np.zeros(2, np.float32), np.ones(2, np.int8), "float64"),
                     (np.zeros(2, np.float32), np.ones(2, bool), "float64"),
                     ({"w": torch.zeros(2, dtype=torch.float16)}, {"w": torch.ones(2, dtype=torch.int8)},
                      "torch.float32")):
        with pytest.raises(ValueError, match=rf"^grads: a leaf is .* but the parameter is .*: the step would turn the "
                                             rf"model into {to};"):
            solver.update(solver.init(x), g)
    assert solver.update(solver.init(np.zeros(2)), np.ones(2, np.int8)).params.dtype == np.float64
    assert solver.update(solver.init({"w": torch.zeros(2)}), {"w": torch.ones(2, dtype=torch.int8)}).params["w"].dtype \
        == torch.float32


@pytest.mark.parametrize("field", ["lr", "momentum", "mu", "weight_decay"])
def test_numpy_float64_hyperparameters_keep_a_float32_models_dtype(field):
    """Before: a hyperparameter given as a numpy float64 (an lr from np.logspace, a momentum read from an array) was
    stored as given, and NumPy 2 keeps a numpy scalar's dtype, so every step of a float32 numpy model (a FedAvg loop
    of algo.solver.update, LocalSolver.run) made it float64 without a word: Delta_i and the global model after apply
    too. Now the solver stores Python floats: the same float32 steps as with 0.1, 0.5, ..."""
    given = {"lr": 0.1, "momentum": 0.5, "mu": 0.5, "weight_decay": 0.01}
    plain = S.LocalSolver(**given)
    solver = S.LocalSolver(**{**given, field: np.float64(given[field])})
    assert type(getattr(solver, field)) is float
    grad = np.array([1.0, -2.0], np.float32)
    ref = plain.run(np.array([0.5, 1.0], np.float32), lambda x, k: grad, local_steps=3)
    got = solver.run(np.array([0.5, 1.0], np.float32), lambda x, k: grad, local_steps=3)
    assert got.params.dtype == np.float32 and got.momentum.dtype == np.float32
    assert np.array_equal(got.params, ref.params)
    assert type(solver.with_lr(np.float64(0.2)).lr) is float


@pytest.mark.parametrize("lr,mu", [(1.0, 1e-12), (0.001, 1e-9), (1.0, 1e-6), (1.0, 0.3), (0.5, 1.0)])
def test_proximal_a_vector_many_steps(lr, mu):
    """a_i = (1 - alpha)^n, n = tau - 1 - j, for tau = 10^6 steps (audit of extreme inputs): (1.0 - alpha) ** n raised
    the rounded 1 - alpha, off by n * 1e-16 relative (before: 4.4e-11 at alpha = 1e-12, 5.8e-11 at alpha = 1e-6 for
    n = 10^6 - 1, and sum(a_vector) 2.2e-11 away from a_norm). Against mpmath's exp(n log1p(-alpha)) at 40 digits
    (alpha the float lr * mu), rel 1e-14; the sum against a_norm (expm1/log1p), rel 1e-14."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    solver = S.proximal_sgd(lr, mu)
    tau = 10 ** 6
    a = solver.a_vector(tau)
    for j in (0, tau // 2, tau - 2):
        exact = mpmath.exp((tau - 1 - j) * mpmath.log1p(-mpmath.mpf(solver.alpha)))
        if exact > mpmath.mpf("1e-300"):
            assert a[j] == pytest.approx(float(exact), rel=1e-14, abs=0.0), j
    assert float(a.sum()) == pytest.approx(solver.a_norm(tau), rel=1e-14, abs=0.0)


@pytest.mark.parametrize("rho, alpha, tau", [
    (0.9, 0.05, 5000),             # 1 - alpha far from rho: (q^(n+1) - rho^(n+1)) / (q - rho), 2.2e-13 off before
    (0.999, 0.0005, 5000),         # close: the recursion p_{n+1} = q p_n + rho^(n+1), 2.0e-13 off before
    (0.99, 1e-6, 5000),            # far, tiny alpha (1.5e-13 before)
    (0.99999, 1e-5, 10 ** 6),      # 1 - alpha = rho to rounding, a million steps
    (0.999, 2e-3, 10 ** 6),        # rho > 1 - alpha
    (0.5, 0.5, 40),                # 1 - alpha = rho exactly: (n + 1) rho^n
    (0.9, 1.0, 40),                # alpha = 1: rho^n
    (0.979920798669594, 1.0513409746708662e-09, 1),  # a_norm's closed form at one step: 1 + 1.1e-14 before
    (0.9, 0.05, 3),                # and at three: 1.2e-15 relative before
])
def test_momentum_prox_a_vector_is_exact_to_rounding(rho, alpha, tau):
    """Momentum + prox: a_j = p_n = sum_{k<=n} (1 - alpha)^(n-k) rho^k, n = tau - 1 - j, against mpmath at 50 digits
    ((q^(n+1) - rho^(n+1)) / (q - rho) with the exact q = 1 - alpha of the float alpha = lr * mu; (n + 1) rho^n where
    q = rho), rel 2e-15, and a_norm against the exact sum of the vector's own entries. Before, both forms raised the
    rounded q = 1 - alpha to the n-th power: errors grew as n * 1e-16 (up to 2.2e-13 relative at tau = 5000, the
    cases marked above; a_norm 7.6e-14 where it sums the vector, and its closed form, which subtracts two sums, up to
    1.1e-14 at a few steps: it now sums the exact vector up to 2**16 steps)."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 50
    solver = S.momentum_proximal_sgd(1.0, rho, alpha)
    q, r = 1 - mpmath.mpf(solver.alpha), mpmath.mpf(rho)
    a = solver.a_vector(tau)
    assert a[-1] == 1.0
    for j in sorted({0, 1, tau // 3, tau // 2, tau - 3, tau - 2} & set(range(tau))):
        n = tau - 1 - j
        exact = (n + 1) * r ** n if q == r else (q ** (n + 1) - r ** (n + 1)) / (q - r)
        if exact > mpmath.mpf("1e-300"):
            assert a[j] == pytest.approx(float(exact), rel=2e-15, abs=0.0), j
    if tau <= 5000:  # the sum in closed form: sum_n p_n over n < tau
        total = (q * (1 - q ** tau) / (1 - q) - r * (1 - r ** tau) / (1 - r)) / (q - r) if q != r else \
            mpmath.fsum((n + 1) * r ** n for n in range(tau))
        assert solver.a_norm(tau) == pytest.approx(float(total), rel=2e-15, abs=0.0)


def test_a_local_solver_built_directly_is_named_by_its_fields():
    """LocalSolver's name defaults to the factory name its fields describe (a subclass with its own step: its class
    name); a given name is kept, and with_lr keeps it. Before: "sgd" whatever the fields, so
    LocalSolver(lr, momentum=0.9) was labelled sgd in results and figures (and bench.run_simulator took
    LocalSolver(lr, lr_schedule=...) for plain SGD by that name)."""

    class OwnUpdate(S.LocalSolver):
        def update(self, state, grads):
            return super().update(state, grads)

    cases = {"sgd": S.LocalSolver(0.1), "momentum": S.LocalSolver(0.1, momentum=0.9),
             "prox": S.LocalSolver(0.1, mu=1.0), "momentum-prox": S.LocalSolver(0.1, momentum=0.5, mu=1.0),
             "decayed-sgd": S.LocalSolver(0.1, lr_schedule=lambda k: 0.5), "OwnUpdate": OwnUpdate(0.1)}
    for name, solver in cases.items():
        assert solver.name == name and solver.with_lr(0.2).name == name, (name, solver)
    factories = (S.sgd(0.1), S.momentum_sgd(0.1, 0.9), S.proximal_sgd(0.1, 1.0), S.momentum_proximal_sgd(0.1, 0.5, 1.0),
                 S.decayed_sgd(0.1, gamma=0.5))
    for made in factories:  # the factories' names are the same words
        assert S.LocalSolver(made.lr, made.momentum, made.mu, lr_schedule=made.lr_schedule).name == made.name
    assert S.LocalSolver(0.1, momentum=0.9, name="heavy ball").name == "heavy ball"


@pytest.mark.parametrize("field, value, message", [
    ("momentum", "0.9", r"^momentum must lie in \[0\.0, 1\.0\), got '0\.9'$"),
    ("momentum", None, r"^momentum must lie in \[0\.0, 1\.0\), got None$"),
    ("momentum", [0.5], r"^momentum must lie in \[0\.0, 1\.0\), got \[0\.5\]$"),
    ("mu", "1", r"^mu must be a finite number >= 0, got '1'$"),
    ("mu", None, r"^mu must be a finite number >= 0, got None$"),
])
def test_a_local_solver_without_a_name_checks_its_fields_before_naming_itself(field, value, message):
    """LocalSolver(0.1, momentum="0.9") (or None, a list; mu "1" or None) without a name is the ValueError naming the
    field, as with a name given. Before: the default name was worked out from the unchecked fields first, and
    failed as TypeError "'>' not supported between instances of 'str' and 'int'" (found in the f929b39..780545c
    mutation pass, reading LN*)."""
    for name in (None, "given"):
        with pytest.raises(ValueError, match=message):
            S.LocalSolver(0.1, name=name, **{field: value})


@pytest.mark.parametrize("mu, tau", [(5e-4, 10 ** 5), (2e-6, 10 ** 5), (2e-9, 10 ** 6)])
def test_momentum_prox_a_norm_beyond_2_16_steps_divides_by_the_exact_q_minus_rho(mu, tau):
    """Momentum + prox beyond 2**16 local steps: a_norm's closed form
    [q(1 - q^tau)/alpha - rho(1 - rho^tau)/(1 - rho)] / (q - rho) divides by q - rho = 1 - alpha - rho rounded once, so
    at rho = 0.985 (|q - rho| >= 1e-2: no sum) it is within 5e-16 relative of mpmath's sum at 50 digits. Before, the
    divisor was the rounded q = 1 - alpha minus rho, whose rounding error e of q (up to 5.5e-17) left a relative error
    of about e * rho / |q - rho|: 3.8e-15, 3.6e-15 and 3.6e-15 at these three cases."""
    mpmath = pytest.importorskip("mpmath")
    rho = 0.985
    solver = S.momentum_proximal_sgd(1.0, rho, mu)
    with mpmath.workdps(50):
        q, r = 1 - mpmath.mpf(solver.alpha), mpmath.mpf(rho)
        exact = (q * (1 - q ** tau) / (1 - q) - r * (1 - r ** tau) / (1 - r)) / (q - r)
    assert tau > 2 ** 16 and abs(1 - solver.alpha - rho) >= 1e-2
    assert solver.a_norm(tau) == pytest.approx(float(exact), rel=5e-16, abs=0.0)


def test_decayed_sgd_names_a_decay_factor_that_underflows():
    """gamma = 1/2 and 10**4 local steps: gamma**1075 is 0.0 in float64, and the message blamed the schedule the
    library built itself ('lr_schedule(1075) must be a finite factor > 0, got 0.0'). Step 1074's factor is still
    one (2**-1074, the smallest subnormal), so a_norm(1075) is the closed form 2 - 2**-1074 = 2.0 in float64."""
    solver = S.decayed_sgd(lr=0.1, gamma=0.5)
    assert solver.lr_schedule(1074) == 2.0 ** -1074
    assert solver.a_norm(1075) == 2.0
    for call in (lambda: solver.a_norm(10 ** 4), lambda: solver.step_size(1075)):
        with pytest.raises(ValueError, match=r"^decayed_sgd: the step size factor gamma\*\*k = 0\.5\*\*1075 "
                                             r"underflows float64 to 0 at this local step: take fewer local steps "
                                             r"or a gamma closer to 1$"):
            call()


# --------------------------------------------------------------------------- a within-round schedule with momentum / prox
def _old_impulse_response(solver, tau):
    """The O(tau^2) loop a_vector used before (fedlib at 113f0d3): one scalar run of tau steps per entry, the
    gradient a unit impulse at step j."""
    a = np.empty(tau)
    for j in range(tau):
        y = v = 0.0
        for k in range(tau):
            y, v = solver._direction_and_params(y, 1.0 if k == j else 0.0, v, 0.0, None, solver.step_size(k), 0.0)
        a[j] = -y / solver.lr
    return a


def _random_schedule_solver(seed):
    """lr in (0.01, 1), momentum in [0, 0.99) (0 for every fourth seed), a random positive factor per step and
    mu with lr * s_k * mu <= 1 (0 for every fifth seed, exactly 1 at the largest step for every seventh)."""
    rng = np.random.default_rng(2000 + seed)
    tau = int(rng.integers(1, 61))
    lr = float(rng.uniform(0.01, 1.0))
    rho = 0.0 if seed % 4 == 3 else float(rng.uniform(0.0, 0.99))
    s = rng.uniform(0.05, 3.0, size=tau)
    top = float(lr * s.max())
    mu = 0.0 if seed % 5 == 4 else (1.0 / top if seed % 7 == 6 else float(rng.uniform(0.0, 1.0)) / top)
    if rho == 0 and mu == 0:
        rho = 0.5  # a schedule alone is s itself, not the recursion
    factors = s.tolist()
    return LocalSolver(lr=lr, momentum=rho, mu=mu, lr_schedule=lambda k: factors[k], name="random"), tau


@pytest.mark.parametrize("seed", range(40))
def test_schedule_with_momentum_or_prox_a_vector_is_the_impulse_response(seed):
    """A schedule with momentum or prox: a_vector(tau) was tau scalar runs of tau steps (O(tau^2) Python, ~100 s at
    tau = 10^4); it is now one backward (adjoint) pass. Against tau steps of update on the gradients e_k from 0 (a
    tau-vector, weight decay 0: the run moves it by -lr a) and against the old loop: max |diff| / max |a| measured
    <= 7e-16 over these 40 seeds (tau 1..60); held to 1e-12. a_norm is still the sum, and the online counter
    agrees."""
    solver, tau = _random_schedule_solver(seed)
    a = solver.a_vector(tau)
    assert a.shape == (tau,) and a.dtype == np.float64
    stepped = -solver.run(np.zeros(tau), lambda x, k: np.eye(1, tau, k)[0], tau).params / solver.lr
    scale = np.max(np.abs(stepped))
    assert np.max(np.abs(a - stepped)) <= 1e-12 * scale, (a, stepped)
    assert np.max(np.abs(a - _old_impulse_response(solver, tau))) <= 1e-12 * scale
    assert solver.a_norm(tau) == float(np.sum(a))
    assert solver.a_norm(tau) == pytest.approx(solver.online_a_norms(tau)[-1], rel=1e-12)


def test_schedule_with_momentum_and_prox_a_vector_calls_each_step_size_once_in_order():
    """The old loop called step_size(k) tau^2 + tau times (8 s of a 9 s a_vector at tau = 3000); now once per step,
    k = 0, 1, ..., so the first bad step is the one named, as before (the old code also took all tau factors in
    order before its loop)."""
    calls = []

    def schedule(k):
        calls.append(k)
        return 1.0 / (1.0 + k)

    solver = LocalSolver(lr=0.01, momentum=0.9, mu=0.5, lr_schedule=schedule)
    solver.a_vector(50)
    assert calls == list(range(50))
    calls.clear()
    solver.a_norm(7)
    assert calls == list(range(7))


@pytest.mark.parametrize("momentum,mu", [(0.5, 0.0), (0.0, 1.0), (0.9, 1.0)])
def test_schedule_with_momentum_or_prox_raises_for_the_first_bad_step(momentum, mu):
    """A factor that breaks lr * s_k * mu <= 1 at step 7 and one that is not > 0 at step 9: the error names step 7
    (with prox; without, step 9's), for a_vector and a_norm alike, as the old code's ordered pass did; a decayed_sgd
    schedule with momentum (and prox) still names the step whose gamma**k underflows (1075 for gamma = 1/2)."""
    factors = {7: 20.0, 9: -1.0}
    solver = LocalSolver(lr=0.1, momentum=momentum, mu=mu, lr_schedule=lambda k: factors.get(k, 1.0))
    want = (r"^mu: lr\*factor\*mu must be <= 1 at step 7, got 2\.0" if mu else
            r"^lr_schedule\(9\) must be a finite factor > 0, got -1\.0$")
    for call in (solver.a_vector, solver.a_norm):
        with pytest.raises(ValueError, match=want):
            call(12)
        call(7)  # steps 0..6 are fine
    decayed = dataclasses.replace(S.decayed_sgd(lr=0.1, gamma=0.5), momentum=momentum, mu=mu)
    assert decayed.a_norm(1075) == pytest.approx(decayed.online_a_norms(1075)[-1], rel=1e-12)
    for call in (decayed.a_vector, decayed.a_norm):
        with pytest.raises(ValueError, match=r"^decayed_sgd: the step size factor gamma\*\*k = 0\.5\*\*1075 "
                                             r"underflows float64 to 0"):
            call(2000)

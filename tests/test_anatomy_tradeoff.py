"""fedlib.anatomy and fedlib.tradeoff (chapters "The general update rule" and "FedProx's alpha trade-off"),
and chapter 1's use of them: its parameters checked by name, its traced clients, its momentum + prox table;
the softmax client's checks of its params and samples."""

import json
from pathlib import Path

import numpy as np
import pytest

from fedlib import anatomy, solvers, theory, tradeoff
from fedlib.problems import random_quadratic
from fedlib.problems.quadratic import QuadraticProblem
from fedlib.report import markdown_table

ALL = [solvers.sgd(0.1, 1e-3), solvers.decayed_sgd(0.1, gamma=0.9), solvers.proximal_sgd(0.1, 0.5),
       solvers.momentum_sgd(0.1, 0.9, 1e-3), solvers.momentum_proximal_sgd(0.1, 0.9, 0.5, 1e-3)]


@pytest.mark.parametrize("solver", ALL, ids=lambda s: s.name)
def test_delta_rebuilt_from_rule(solver):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 4))
    client = anatomy.SoftmaxRegressionClient(x, rng.integers(0, 3, 50), 3, batch_size=10)
    check = anatomy.check_update_rule(solver, client.init_params(), client.grad, 12)
    assert check.delta_error < 1e-12 and check.a_norm_error < 1e-12
    assert np.allclose(anatomy.probe_a_vector(solver, 12), solver.a_vector(12), rtol=1e-12, atol=0)


def test_softmax_gradient_matches_finite_differences():
    rng = np.random.default_rng(1)
    client = anatomy.SoftmaxRegressionClient(rng.standard_normal((8, 3)), rng.integers(0, 4, 8), 4)
    w = rng.standard_normal(client.num_params)

    def loss(v):
        z = client.x @ v[:12].reshape(3, 4) + v[12:]
        z = z - z.max(axis=1, keepdims=True)
        return float(np.mean(np.log(np.exp(z).sum(axis=1)) - z[np.arange(8), client.y]))

    eps = 1e-6
    fd = np.array([(loss(w + eps * e) - loss(w - eps * e)) / (2 * eps) for e in np.eye(w.size)])
    assert np.allclose(client.full_grad(w), fd, atol=1e-8)


def test_official_counter():
    # one step: the official chained counter gives 2 - alpha, the true value is 1
    assert anatomy.official_counter_a_norm(1, 0.9, 0.05) == pytest.approx(1.95)
    # alone, each counter is right
    assert anatomy.official_counter_a_norm(7, 0.9, 0.0) == pytest.approx(solvers.momentum_sgd(0.1, 0.9).a_norm(7))
    assert anatomy.official_counter_a_norm(7, 0.0, 0.05) == pytest.approx(solvers.proximal_sgd(0.1, 0.5).a_norm(7))
    # the official in-place dynamics tend to 1/alpha
    assert anatomy.official_inplace_a_vector(400, 0.05, 0.9, 1.0).sum() == pytest.approx(20.0, rel=1e-6)


def test_fedprox_curves_and_measured_weights():
    p = np.array([0.1, 0.2, 0.3, 0.4])
    steps = np.array([3, 10, 5, 40])
    c = tradeoff.fedprox_curves(p, steps, [0.0, 0.01, 0.1, 1.0])
    assert np.all(np.diff(c.chi2) <= 0) and np.all(np.diff(c.slowdown) > 0)
    assert c.chi2[-1] == 0 and c.tau_eff[-1] == 1
    pb = random_quadratic(4, 3, seed=0, p=p)
    te, w, _ = tradeoff.measured_fedprox_weights(pb, steps, 0.01, 0.1)
    te2, w2 = theory.fedprox_weights(p, steps, 0.1)
    assert te == pytest.approx(te2, rel=1e-12) and np.allclose(w, w2, rtol=1e-12)


def test_sweep_matches_round_map():
    pb = random_quadratic(3, 2, seed=0)
    steps, grid = [2, 5, 9], np.array([1e-3, 0.1, 1.0])
    sweep = tradeoff.fedprox_sweep(pb, steps, 0.01, grid, 7)
    exact = tradeoff.closed_form_distances(pb, steps, 0.01, grid, [7, 0], "fedprox")
    assert np.allclose(sweep.fedprox, exact[0], rtol=1e-10)
    assert np.allclose(exact[1], np.linalg.norm(pb.optimum()))
    nova = tradeoff.closed_form_distances(pb, steps, 0.01, grid, [7], "fednova", "local_steps")[0]
    assert np.allclose(sweep.fednova, nova, rtol=1e-10)
    assert 0 < tradeoff.round_contraction(pb, steps, 0.01, 0.1) < 1


def test_sweep_and_closed_form_distances_are_exact_past_where_the_squared_norm_overflows():
    """Two clients H_i = I, x* = 0, lr 3 with one local step: FedAvg, FedProx (its proximal term is 0 at the first
    step) and FedNova (tau_eff = 1) all map x to -2x, so from (3, -4) the distance after T rounds is exactly 5 * 2^T:
    6.7e154 at T = 512, finite and to the bit from both, with no overflow warning. Before, np.linalg.norm's
    sqrt(x.x) overflowed once 5 * 2^T > 1.3e154: fedprox_sweep gave inf for all three, closed_form_distances inf
    from T = 510 on, and 'overflow encountered in dot' warnings."""
    import warnings

    pb = QuadraticProblem(np.stack([np.eye(2)] * 2), np.zeros((2, 2)), np.array([0.5, 0.5]))
    x0 = np.array([3.0, -4.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sweep = tradeoff.fedprox_sweep(pb, [1, 1], 3.0, [1.0], 512, params=x0)
        closed = tradeoff.closed_form_distances(pb, [1, 1], 3.0, [0.0, 1.0], [0, 509, 510, 512], params=x0)
    assert sweep.fedavg == sweep.fedprox[0] == sweep.fednova[0] == 5.0 * 2.0 ** 512
    assert closed.tolist() == [[5.0 * 2.0 ** t] * 2 for t in (0, 509, 510, 512)]


def test_mu_for_alpha_and_table():
    assert 0.007 * tradeoff.mu_for_alpha(1.0, 0.007) <= 1.0
    assert markdown_table(["a"], [[1.5]]).splitlines()[-1] == "| 1.5 |"
    # a string the caller formatted is kept (chapter 4's mu column read "0.0100" under a ".4f" spec)
    assert markdown_table(["mu", "loss"], [["0.01", 0.5]], ".4f").splitlines()[-1] == "| 0.01 | 0.5000 |"
    with pytest.raises(ValueError):
        markdown_table(["a", "b"], [[1]])


def test_softmax_client_refuses_labels_outside_the_classes():
    """A label -1 was read as the last class (numpy's negative index), a label C failed later with a bare
    IndexError; float labels are refused too."""
    for y in ([0, 1, -1, 2], [0, 1, 3, 2], [0.0, 1.0, 2.0, 1.0]):
        with pytest.raises(ValueError, match=r"y must hold integer labels in \[0, 3\)"):
            anatomy.SoftmaxRegressionClient(np.ones((4, 2)), np.array(y), 3)
    assert anatomy.SoftmaxRegressionClient(np.ones((4, 2)), np.array([0, 1, 2, 1]), 3).y.dtype == np.int64


def test_fmt_formats_numpy_integers_as_integers():
    """fmt keeps integers as integers (its docstring: fmt(3, '.4f') == '3'), numpy integers included
    (np.int64(12345) came out as '1.23e+04'); numpy booleans print as True/False, not 1."""
    from fedlib.report import fmt

    assert fmt(np.int64(12345)) == fmt(12345) == "12345"
    assert fmt(np.int32(3), ".4f") == "3" and fmt(np.bool_(True)) == "True" and fmt(False) == "False"
    assert fmt(np.float64(0.5), ".2f") == "0.50"
    assert markdown_table(["n"], [[np.int64(17019)]]).splitlines()[-1] == "| 17019 |"


# --------------------------------------------------------------------------- chapter 1's parameters
BOOK = Path(__file__).resolve().parents[1] / "book"


def _cell_sources(name):
    nb = json.loads((BOOK / name).read_text())
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


GOOD = dict(lr=0.05, momentum=0.9, alpha=0.05, gamma=0.95, weight_decay=1e-3)


@pytest.mark.parametrize("name, value, message", [
    ("lr", 0, "lr must be a finite number > 0, got 0"),          # was ZeroDivisionError at mu = alpha / lr
    ("lr", -0.1, "lr must be a finite number > 0, got -0.1"),
    ("momentum", 1.0, "momentum must lie in [0.0, 1.0), got 1.0"),
    ("alpha", 0.0, "alpha must be a finite number > 0, got 0.0"),
    ("alpha", -0.1, "alpha must be a finite number > 0, got -0.1"),  # was 'mu must be ... >= 0, got -2.0'
    ("alpha", 1.5, "alpha must lie in (0, 1] (alpha = lr * mu), got 1.5"),  # was 'mu: lr*mu must be <= 1'
    ("gamma", 0.0, "gamma must be a finite number > 0, got 0.0"),
    ("gamma", 1.5, "gamma must lie in (0, 1] (a per-step decay), got 1.5"),
    ("weight_decay", -1e-3, "weight_decay must be a finite number >= 0, got -0.001"),
])
def test_chapter1_solver_family_refuses_each_parameter_by_name(name, value, message):
    kwargs = dict(GOOD, **{name: value})
    with pytest.raises(ValueError) as info:
        anatomy.solver_family(**kwargs)
    assert str(info.value) == message


def test_chapter1_solver_family_builds_the_five_solvers():
    s = anatomy.solver_family(**GOOD)
    assert list(s) == ["SGD", "decayed SGD", "proximal", "momentum", "momentum + prox"]
    assert s["proximal"].mu == pytest.approx(1.0, rel=1e-15)  # alpha / lr = 0.05 / 0.05
    assert s["momentum + prox"].mu == pytest.approx(1.0, rel=1e-15) and s["momentum + prox"].momentum == 0.9
    # alpha = lr * mu = 1: one proximal step lands on the anchor, a_i = [0, ..., 0, 1]
    s1 = anatomy.solver_family(0.5, 0.0, 1.0, 0.5)
    assert np.array_equal(anatomy.probe_a_vector(s1["proximal"], 3), [0.0, 0.0, 1.0])
    # gamma = 0.5: a_i = [1, 1/2, 1/4]
    assert np.allclose(anatomy.probe_a_vector(s1["decayed SGD"], 3), [1.0, 0.5, 0.25], rtol=1e-15, atol=0)


def test_chapter1_uses_the_checked_solver_family_and_clients():
    code = "\n".join(_cell_sources("01_update_rule.ipynb"))
    assert "anatomy.solver_family(lr, momentum, alpha, gamma, weight_decay)" in code
    assert "alpha / lr" not in code.replace("# alpha / lr", "")
    assert "anatomy.traced_clients(data, num_traced_clients, batch_size, seed)" in code


class _Data:
    def __init__(self, m):
        rng = np.random.default_rng(0)
        self.train_x = [rng.standard_normal((5, 3)) for _ in range(m)]
        self.train_y = [np.arange(5) % 2 for _ in range(m)]
        self.num_classes = 2


@pytest.mark.parametrize("n, message", [
    (0, "num_traced_clients must be an integer >= 1, got 0"),
    (-1, "num_traced_clients must be an integer >= 1, got -1"),
    (4, "num_traced_clients must be at most the 3 clients of the data set, got 4"),
])
def test_chapter1_traced_clients_refuses_a_bad_count(n, message):
    with pytest.raises(ValueError) as info:
        anatomy.traced_clients(_Data(3), n, 2, 0)
    assert str(info.value) == message


def test_chapter1_traced_clients_are_the_first_clients_with_their_own_streams():
    data = _Data(3)
    clients = anatomy.traced_clients(data, 2, 2, 7)
    assert [c.client for c in clients] == [0, 1]
    assert all(c.seed == 7 and c.batch_size == 2 for c in clients)
    assert np.array_equal(clients[1].x, data.train_x[1])


def test_chapter1_momentum_prox_table_holds_at_one_minus_alpha_equal_to_rho():
    """The chapter's table wrote a_j = ((1 - alpha)^(n+1) - rho^(n+1)) / (1 - alpha - rho): at alpha = 0.1,
    rho = 0.9 (1 - 0.1 - 0.9 == 0.0 in float64) every entry was 0/0 = nan and the chapter's assert failed
    for a valid pair of parameters. As the sum it equals: n = 2, 1, 0 at q = 1 - alpha = rho = 1/2 gives
    3/4, 1, 1; at q = 3/4, rho = 1/2: q^2 + q rho + rho^2 = 19/16, q + rho = 5/4, 1."""
    assert 1 - 0.1 - 0.9 == 0.0
    assert anatomy.momentum_prox_a_table(3, 0.5, 0.5).tolist() == [0.75, 1.0, 1.0]
    assert anatomy.momentum_prox_a_table(3, 0.5, 0.25).tolist() == [1.1875, 1.25, 1.0]
    s = anatomy.solver_family(0.05, 0.9, 0.1, 0.95)["momentum + prox"]  # q = rho = 0.9
    assert anatomy.relative_error(anatomy.probe_a_vector(s, 20), anatomy.momentum_prox_a_table(20, 0.9, 0.1)) <= 1e-12
    n = np.arange(20)[::-1]
    assert np.allclose(anatomy.momentum_prox_a_table(20, 0.9, 0.1), (n + 1) * 0.9 ** n, rtol=1e-13, atol=0)
    code = "\n".join(_cell_sources("01_update_rule.ipynb"))
    assert "/ (1 - alpha - momentum)" not in code
    assert "anatomy.momentum_prox_a_table(local_steps, momentum, alpha)" in code


def test_softmax_client_checks_params_and_samples():
    """params one entry short of num_params gave a gradient of another length (its bias broadcast); a client
    without samples, or an empty idx, gave a zero gradient for an undefined mean."""
    rng = np.random.default_rng(0)
    client = anatomy.SoftmaxRegressionClient(rng.standard_normal((10, 3)), rng.integers(0, 2, 10), 2)
    assert client.num_params == 8
    for bad in (np.zeros(7), np.zeros(9), np.zeros((8, 1))):
        with pytest.raises(ValueError, match="params"):
            client.full_grad(bad)
    with pytest.raises(ValueError, match="params"):
        client.grad(np.zeros(7), 0)
    with pytest.raises(ValueError, match="idx"):
        client.full_grad(np.zeros(8), idx=np.array([], dtype=int))
    with pytest.raises(ValueError, match="at least one sample"):
        anatomy.SoftmaxRegressionClient(np.zeros((0, 3)), np.zeros(0, dtype=int), 2)
    assert client.full_grad(np.zeros(8)).shape == (8,)
    np.testing.assert_allclose(client.full_grad(list(np.zeros(8))), client.full_grad(np.zeros(8)))


@pytest.mark.parametrize("alpha", [True, "0.5", None, [0.5], np.array([0.5, 0.5]), 0.0, 1.5, float("nan")])
def test_fedprox_bound_refuses_a_bad_alpha_by_name(alpha):
    """float(alpha) took True as alpha = 1 and '0.5' as 0.5 without a word; None, a list or an array raised
    float()'s TypeError naming nothing."""
    with pytest.raises(ValueError, match="alpha"):
        tradeoff.fedprox_bound(alpha, 4, 3, 10)


def test_fedprox_bound_of_a_good_alpha_is_unchanged():
    a = 0.5 ** np.arange(2, -1, -1)   # tau_bar = 3: a = (1/4, 1/2, 1), tau_eff = 7/4
    A, B, C = theory.theorem1_constants(np.full(4, 0.25), [a] * 4, 1.75)
    assert tradeoff.fedprox_bound(0.5, 4, 3, 10) == theory.theorem1_bound(4, 3.0, 10, 1.75, A, B, C, 1.0, 1.0)
    assert tradeoff.fedprox_bound(np.float64(0.5), 4, 3, 10) == tradeoff.fedprox_bound(0.5, 4, 3, 10)


@pytest.mark.parametrize("rounds", [7, 7.0, None, "7", np.float64(7.0)])
def test_closed_form_distances_refuses_rounds_that_are_no_sequence(rounds):
    """rounds is a sequence of T here (fedprox_sweep's is one T): closed_form_distances(..., rounds=7) raised
    TypeError ("'int' object is not iterable") naming nothing."""
    pb = random_quadratic(3, 2, seed=0)
    with pytest.raises(ValueError, match="rounds"):
        tradeoff.closed_form_distances(pb, [2, 3, 4], 0.01, [0.5], rounds)
    exact = tradeoff.closed_form_distances(pb, [2, 3, 4], 0.01, [0.5], (t for t in [7, 0]))
    assert np.array_equal(exact, tradeoff.closed_form_distances(pb, [2, 3, 4], 0.01, [0.5], [7, 0]))


@pytest.mark.parametrize("alpha", [1e-9, 1e-12, 1e-15, 1e-90, 5e-324])
def test_official_counter_excess_keeps_its_digits_for_a_small_alpha(alpha):
    """(1 - (1 - alpha)^tau)/alpha lost the digits of alpha that 1 - alpha rounds away: at tau = 10, rho = 0.5
    the excess was 9.99999970 for 9.99999994 at alpha = 1e-9, 9.99978 for 9.99999999994 at 1e-12, and 1.5e-90
    (or 0) for about 10 from alpha = 1e-16 on, where 1 - alpha is 1.0. Against D_t = beta D_(t-1) + 1 - alpha m_t
    (the docstring's recursion, m_t = (1 - rho^t)/(1 - rho)) and the counter minus the true ||a_i||_1."""
    rho, d = 0.5, 0.0
    for t in range(1, 11):
        d = (1.0 - alpha) * d + 1.0 - alpha * (1.0 - rho ** t) / (1.0 - rho)
    got = anatomy.official_counter_excess(10, rho, alpha)
    assert got == pytest.approx(d, rel=1e-14)
    assert got == pytest.approx(anatomy.official_counter_a_norm(10, rho, alpha)
                                - anatomy.momentum_prox_a_table(10, rho, alpha).sum(), rel=1e-14)


def test_official_counter_excess_of_alpha_from_0_01_is_the_plain_closed_form():
    for tau, rho, alpha in [(20, 0.9, 0.05), (7, 0.5, 0.01), (3, 0.3, 1.0), (100, 0.9, 0.5)]:
        beta, t = 1.0 - alpha, np.arange(1, tau + 1, dtype=np.float64)
        plain = ((1.0 - alpha - rho) * (1.0 - beta ** tau) / alpha
                 + alpha * float(np.sum(beta ** (tau - t) * rho ** t))) / (1.0 - rho)
        assert anatomy.official_counter_excess(tau, rho, alpha) == plain   # the same bits


@pytest.mark.parametrize("alphas, message", [(["0.5"], "got strings"), ([True], "got a bool"),
                                             (np.array([False, True]), "got a bool"), ([0.5, True], "got a bool")])
def test_alphas_are_numbers_not_text_or_bools(alphas, message):
    """The alpha grid went through np.asarray(..., dtype=float64), which took ["0.5"] as 0.5 and [True] as alpha = 1;
    both are refused by name now, as check_finite_array refuses strings and all-bool arrays (this check also refuses
    a bool mixed with numbers, [0.5, True], which check_finite_array takes as a float array)."""
    with pytest.raises(ValueError, match=f"^alphas must .*{message}"):
        tradeoff.fedprox_curves([0.5, 0.5], [2, 5], alphas)
    assert tradeoff.fedprox_curves([0.5, 0.5], [2, 5], [0.5]).tau_eff.tolist() == \
        tradeoff.fedprox_curves([0.5, 0.5], [2, 5], np.array([0.5], dtype=np.float32)).tau_eff.tolist()


@pytest.mark.parametrize("bad,match", [(None, r"^local_steps must be a non-empty 1-d array of whole numbers, got shape \(\)$"),
                                       ([1], r"^local_steps must have 2 entries \(one per client\), got 1$")])
def test_fedprox_sweep_names_local_steps(bad, match):
    """Was 'steps must be a non-empty 1-d array of integers' (FixedSteps' name) for None, and for one count too few
    'schedule.local_steps(0) must give one step count per client (2 clients in p), got shape (1,)' after the setup."""
    problem = random_quadratic(2, 2, seed=0)
    with pytest.raises(ValueError, match=match):
        tradeoff.fedprox_sweep(problem, bad, 0.01, [0.1], 2)


_MP = solvers.momentum_proximal_sgd(0.1, 0.5, 0.3)


@pytest.mark.parametrize("name, call", [
    ("local_steps", lambda n: anatomy.trace_local_run(_MP, np.array([1.0, -2.0]), lambda x, k: x + k, n)),
    ("local_steps", lambda n: anatomy.check_update_rule(_MP, np.array([1.0, -2.0]), lambda x, k: x + k, n)),
    ("max_steps", lambda n: anatomy.a_norm_curves(_MP, n)),
    ("local_steps", lambda n: anatomy.probe_a_vector(_MP, n)),
    ("local_steps", lambda n: anatomy.official_counter_a_norm(n, 0.5, 0.1)),
    ("local_steps", lambda n: anatomy.official_counter_excess(n, 0.5, 0.1)),
    ("local_steps", lambda n: anatomy.official_inplace_a_vector(n, 0.1, 0.5, 0.3)),
    ("local_steps", lambda n: anatomy.momentum_prox_a_table(n, 0.5, 0.25)),
    ("tau_bar", lambda n: tradeoff.fedprox_bound(0.5, 4, n, 10)),
], ids=["trace_local_run", "check_update_rule", "a_norm_curves", "probe_a_vector", "official_counter_a_norm",
        "official_counter_excess", "official_inplace_a_vector", "momentum_prox_a_table", "fedprox_bound"])
def test_scalar_step_counts_are_whole_numbers(name, call):
    """A step count is a whole number, scalar or array (the fedlib docstring's convention): 2.0 is 2, as the
    local_steps arrays [2.0, 3.0] of tradeoff's and theory's round maps already were. Before: "local_steps must be
    an integer >= 1, got 3.0" (max_steps, tau_bar alike). 1.5, True and NaN are still refused."""
    import pickle

    got, want = call(3.0), call(3)
    if isinstance(got, anatomy.LocalTrace):  # its solver state holds the solver, whose pickle is no question here
        got, want = (got.G, got.delta, got.a_norm), (want.G, want.delta, want.a_norm)
    assert pickle.dumps(got) == pickle.dumps(want)  # the same result, bit for bit
    for bad in (1.5, True, float("nan")):
        with pytest.raises(ValueError, match=rf"^{name} must be a whole number >= 1, got "):
            call(bad)


@pytest.mark.parametrize("name", ["fedavg", "fednova"])
def test_check_server_step_is_eq4_written_out_and_catches_a_step_the_weights_do_not_show(name, monkeypatch):
    """One round through the library equals eq. 4 from the recorded G_i and closed-form a_i for all five solvers
    (weight decay included), with eq. 6's tau_eff and w (FedAvg) or w = p (FedNova). A server that reports the same
    weights but applies other coefficients is caught, the step off by far more than rounding: FedNova's
    p_i / ||a_i||_1 normalised to sum to 1 (the harmonic-mean mistake of other implementations), FedAvg's unweighted
    mean of the changes."""
    from fedlib import rule
    from fedlib.data import synthetic
    from fedlib.schedules import FixedEpochs

    data = synthetic(1.0, 1.0, seed=3)
    clients = anatomy.traced_clients(data, 5, 20, 3)
    n = np.array(data.num_samples[:5])
    p, taus = n / n.sum(), FixedEpochs(n, 20, 1).local_steps(0)
    assert len(set(taus.tolist())) > 1  # heterogeneous: FedAvg's w differs from p
    x0 = clients[0].init_params()
    for solver in anatomy.solver_family(0.05, 0.9, 0.05, 0.95, 1e-3).values():
        check = anatomy.check_server_step(name, solver, clients, taus, p, x0)
        assert check.relative_error < 1e-12, (solver, check.relative_error)
        norms = np.array([solver.a_norm(int(t)) for t in taus])
        assert check.tau_eff == pytest.approx(p @ norms, rel=1e-12)
        np.testing.assert_allclose(check.weights, p * norms / (p @ norms) if name == "fedavg" else p, rtol=1e-12)
    summed = rule.tree_weighted_sum
    if name == "fednova":  # c_i = tau_eff p_i / ||a_i||_1 normalised to sum to 1 (FedAvg's c_i = p_i sum to 1)
        def mistaken(deltas, c):
            return summed(deltas, np.asarray(c) / np.sum(c))
    else:  # an unweighted mean of the changes, c_i = 1/m
        def mistaken(deltas, c):
            return summed(deltas, np.full(len(c), 1 / len(c)))
    monkeypatch.setattr(rule, "tree_weighted_sum", mistaken)
    wrong = anatomy.check_server_step(name, anatomy.solver_family(0.05, 0.9, 0.05, 0.95, 0.0)["SGD"], clients, taus,
                                      p, x0)
    assert wrong.relative_error > 0.1, wrong.relative_error


def test_check_server_step_refuses_what_it_cannot_run():
    from fedlib.data import synthetic
    from fedlib.solvers import sgd

    clients = anatomy.traced_clients(synthetic(1.0, 1.0, seed=0), 2, 20, 0)
    x0 = clients[0].init_params()
    with pytest.raises(ValueError, match="^name must be 'fedavg' or 'fednova', got 'scaffold'"):
        anatomy.check_server_step("scaffold", sgd(0.1), clients, [1, 2], [0.5, 0.5], x0)
    with pytest.raises(ValueError, match="^local_steps: 1 step counts for 2 clients"):
        anatomy.check_server_step("fedavg", sgd(0.1), clients, [1], [0.5, 0.5], x0)
    with pytest.raises(ValueError, match=r"^local_steps\[1\]"):
        anatomy.check_server_step("fedavg", sgd(0.1), clients, [1, 0], [0.5, 0.5], x0)
    with pytest.raises(ValueError, match="^params must be a flat 1-d vector"):
        anatomy.check_server_step("fedavg", sgd(0.1), clients, [1, 2], [0.5, 0.5], x0[None])
    with pytest.raises(ValueError, match="^solver"):
        anatomy.check_server_step("fedavg", "sgd", clients, [1, 2], [0.5, 0.5], x0)

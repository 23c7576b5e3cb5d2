"""fedlib.anatomy and fedlib.tradeoff (chapters "The general update rule" and "FedProx's alpha trade-off")."""
import numpy as np
import pytest

from fedlib import anatomy, solvers, theory, tradeoff
from fedlib.problems import random_quadratic
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

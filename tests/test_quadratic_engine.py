"""fedlib.engines.quadratic (many runs at once, arbitrary local work), RandomLocalWork,
run_sequential's solver_at hook, and fedlib.experiments.speedup (chapter 8: its sampling summary, the
sampling gain's standard error and the chapter's assert on it, the uniform scheme's step size from the
participants' mean steps, tau~ counting every draw); the noise helpers' checks and run_replicas' work."""
import json
import math
from pathlib import Path

import numpy as np
import pytest

from fedlib.algorithms import make_algorithm
from fedlib.engines import quadratic as E
from fedlib.engines.quadratic import client_solvers, gradient_noise, noisy_grad_fn, run_replicas
from fedlib.engines.reference import run_sequential
from fedlib.experiments import speedup as S
from fedlib.experiments.quadratic import surrogate_optimum, tau_weighted_optimum
from fedlib.problems import random_quadratic
from fedlib.problems.quadratic import QuadraticProblem
from fedlib.schedules import FixedSteps, RandomLocalWork
from fedlib.solvers import LocalSolver, decayed_sgd, momentum_proximal_sgd, momentum_sgd, proximal_sgd, sgd
from fedlib.theory import chi_square

ALL_SOLVERS = [sgd(0.03), momentum_sgd(0.03, 0.5), proximal_sgd(0.03, 2.0), decayed_sgd(0.03, gamma=0.9),
               momentum_proximal_sgd(0.03, 0.3, 1.0)]


class _Fixed:
    """Local work with fixed steps and solver numbers (hand-checkable cases)."""

    def __init__(self, steps, choice):
        self.steps, self.choice = np.asarray(steps), np.asarray(choice)

    def draw(self, t):
        return self.steps.copy(), self.choice.copy()


# ------------------------------------------------------------------ RandomLocalWork
def test_random_local_work_ranges_streams_and_errors():
    work = RandomLocalWork([1, 3, 5], [2, 3, 9], num_solvers=4, seed=5)
    draws = [work.draw(t) for t in range(300)]
    steps = np.array([d[0] for d in draws])
    choice = np.array([d[1] for d in draws])
    assert steps.dtype == np.int64 and choice.dtype == np.int64
    assert steps[:, 0].min() == 1 and steps[:, 0].max() == 2 and np.all(steps[:, 1] == 3)
    assert steps[:, 2].min() == 5 and steps[:, 2].max() == 9  # inclusive range
    assert set(np.unique(choice)) == {0, 1, 2, 3}
    np.testing.assert_allclose(steps.mean(axis=0), work.mean_steps, rtol=0.05)
    # the same stream every time; another seed, another stream
    assert all(np.array_equal(a, b) for a, b in zip(work.draw(7), RandomLocalWork([1, 3, 5], [2, 3, 9], 4, 5).draw(7)))
    assert not np.array_equal(steps[:, 2], np.array([RandomLocalWork([1, 3, 5], [2, 3, 9], 4, 6).draw(t)[0][2]
                                                     for t in range(300)]))
    assert np.array_equal(work.local_steps(3), work.draw(3)[0]) and np.array_equal(work.solver_numbers(3), work.draw(3)[1])
    with pytest.raises(ValueError, match="high must be >= low.*client 1"):
        RandomLocalWork([1, 4], [2, 3])
    with pytest.raises(ValueError, match="low"):
        RandomLocalWork([0, 1], [2, 3])
    with pytest.raises(ValueError, match="low and high must have one entry per client each, got 2 low and 3 high"):
        RandomLocalWork([1, 1], [2, 3, 4])
    with pytest.raises(ValueError, match="num_solvers"):
        RandomLocalWork([1], [2], num_solvers=0)


# ------------------------------------------------------------------ the reference loop's solver_at
def test_solver_at_same_solver_is_plain_run_and_errors():
    prob = random_quadratic(3, 2, seed=0)
    algo = make_algorithm("fednova", sgd(0.05))
    sched = FixedSteps([1, 2, 3])
    plain = run_sequential(algo, np.zeros(2), prob.grad_fn(), prob.p, sched, 5)
    hooked = run_sequential(algo, np.zeros(2), prob.grad_fn(), prob.p, sched, 5, solver_at=lambda t, i: sgd(0.05))
    np.testing.assert_array_equal(plain.state.params, hooked.state.params)
    with pytest.raises(ValueError, match="cannot be combined"):
        run_sequential(algo, np.zeros(2), prob.grad_fn(), prob.p, sched, 1, solver_at=lambda t, i: sgd(0.05),
                       lr_at=lambda t: 0.1)
    with pytest.raises(ValueError, match=r"solver_at\(0, 0\) must return a LocalSolver"):
        run_sequential(algo, np.zeros(2), prob.grad_fn(), prob.p, sched, 1, solver_at=lambda t, i: "sgd")


def test_solver_at_reports_each_clients_own_a_norm():
    """Two clients, one SGD and one momentum: tau_eff = sum_i p_i ||a_i||_1 of *their* solvers."""
    prob = random_quadratic(2, 2, seed=1)
    mom = momentum_sgd(0.05, 0.5)
    run = run_sequential(make_algorithm("fednova", sgd(0.05)), np.zeros(2), prob.grad_fn(), prob.p, FixedSteps([3, 4]),
                         1, solver_at=lambda t, i: [sgd(0.05), mom][i])
    d = run.diagnostics[0]
    # momentum 0.5, 4 steps: a = [1.875, 1.75, 1.5, 1] -> ||a||_1 = 6.125
    np.testing.assert_allclose(d.a_norms, [3.0, 6.125], rtol=1e-15)
    assert d.tau_eff == pytest.approx(0.5 * 3 + 0.5 * 6.125, rel=1e-15)


# ------------------------------------------------------------------ run_replicas vs the reference loop
@pytest.mark.parametrize("aggregation", ["fedavg", "fednova"])
@pytest.mark.parametrize("sigma,sampling", [(0.0, "full"), (0.7, "full"), (0.7, "with-replacement"), (0.7, "uniform")])
def test_run_replicas_equals_reference_loop(aggregation, sigma, sampling):
    prob = random_quadratic(5, 3, seed=2, p=[0.1, 0.3, 0.2, 0.25, 0.15])
    work = RandomLocalWork([1, 1, 2, 3, 5], [2, 4, 6, 8, 9], num_solvers=len(ALL_SOLVERS), seed=3)
    replicas, rounds = 3, 12
    q = None if sampling == "full" else 3
    x0 = np.array([0.5, -1.0, 2.0])
    run = run_replicas(prob, aggregation, ALL_SOLVERS, work, rounds, sigma=sigma, replicas=replicas, seed=7, x0=x0,
                       sampling=sampling, clients_per_round=q)
    x_star = prob.optimum()
    for r in range(replicas):
        ref = run_sequential(make_algorithm(aggregation, ALL_SOLVERS[0]), x0, noisy_grad_fn(prob, sigma, 7, replicas, r,
                                                                                            work.local_steps,
                                                                                            sampling=sampling,
                                                                                            clients_per_round=q),
                             prob.p, work, rounds, solver_at=client_solvers(work, ALL_SOLVERS),
                             metric_fn=lambda x, t: x.copy(), sampling=sampling, clients_per_round=q, seed=7)
        np.testing.assert_allclose(run.params[r], ref.state.params, rtol=0, atol=1e-12)
        xs = np.array(ref.metrics)
        grads = xs @ np.einsum("i,ijk->jk", prob.p, prob.H).T - prob.p @ prob.e
        np.testing.assert_allclose(run.grad_norm2[:, r], np.sum(grads ** 2, axis=1), rtol=1e-10)
        np.testing.assert_allclose(run.distance[:, r], np.linalg.norm(xs - x_star, axis=1), rtol=1e-10)
        np.testing.assert_allclose(run.tau_eff, [d.tau_eff for d in ref.diagnostics], rtol=1e-13)
        np.testing.assert_allclose(run.chi2, [d.chi2 for d in ref.diagnostics], atol=1e-13)
    if sigma == 0:
        assert np.all(run.params == run.params[0])  # no noise: every replica is the same run
    else:
        assert np.ptp(run.params, axis=0).max() > 1e-3
    assert run.surrogate_distance is None
    taus = [d.local_steps for d in ref.diagnostics]  # the participants' steps
    assert run.mean_local_steps == pytest.approx(np.mean([np.mean(s) for s in taus]))
    if sampling != "full":
        assert min(len(s) for s in taus) < 5


def test_run_replicas_by_hand():
    """Fixed work: tau = (1, 3), SGD for both, one round from 0 on F_i = |x - x_i*|^2 / 2 (H = I)."""
    from fedlib.problems.quadratic import QuadraticProblem

    prob = QuadraticProblem(np.ones((2, 1, 1)), np.array([[1.0], [-1.0]]), np.array([0.5, 0.5]))
    work = _Fixed([1, 3], [0, 0])
    lr = 0.5
    # client 0: 1 step: x = 0.5; client 1: 3 steps towards -1: -0.5, -0.75, -0.875
    avg = run_replicas(prob, "fedavg", [sgd(lr)], work, 1)
    assert avg.params[0, 0] == pytest.approx(0.5 * 0.5 + 0.5 * -0.875)
    assert avg.tau_eff[0] == pytest.approx(2.0) and avg.chi2[0] == pytest.approx(chi_square([0.5, 0.5], [0.25, 0.75]))
    nova = run_replicas(prob, "fednova", [sgd(lr)], work, 1, surrogate=[1.0])
    # tau_eff = 2, d_1 = 0.5 / (0.5 * 1), d_2 = -0.875 / (0.5 * 3): x = 2 * 0.5 * (d_1 + d_2) * 0.5
    assert nova.params[0, 0] == pytest.approx(2 * 0.5 * (0.5 / 1 + -0.875 / 3))
    assert nova.chi2[0] == 0
    assert nova.surrogate_distance[1, 0] == pytest.approx(abs(nova.params[0, 0] - 1.0))
    assert nova.grad_norm2[0, 0] == 0.0  # x* = 0 is the start


def test_gradient_noise_names_a_bad_size_or_round():
    """gradient_noise's seed, round_index and four sizes are checked by name. Before: replicas=-1 gave numpy's
    'negative dimensions are not allowed', dim=2.0 "'float' object cannot be interpreted as an integer", True
    'an integer is required', round_index=-1 the generator's 'key must be
    an integer >= 0, got -1'."""
    good = dict(seed=0, round_index=0, replicas=1, num_clients=2, max_steps=2, dim=2, sigma=0.1)
    for name, bad in (("replicas", -1), ("num_clients", 2.0), ("max_steps", True), ("dim", None), ("round_index", -1),
                      ("seed", 1.5)):
        for sigma in (0.0, 0.1):
            with pytest.raises(ValueError, match=rf"^{name} must be an integer >= 0, got {bad!r}$"):
                gradient_noise(**{**good, name: bad, "sigma": sigma})
    assert gradient_noise(**{**good, "replicas": 0}).shape == (0, 2, 2, 2)  # an empty draw is still one
    assert np.array_equal(gradient_noise(**{**good, "dim": np.int64(2)}), gradient_noise(**good))


def test_noisy_grad_fn_refuses_local_steps_that_are_not_callable():
    """local_steps is checked when the gradient function is built. Before: local_steps=[1, 2] (the steps, not
    the schedule's method) or the schedule itself was taken, and the run failed at its first gradient, inside
    run_sequential, with Python's TypeError "'list' object is not callable"."""
    prob, work = random_quadratic(2, 2, seed=0), RandomLocalWork([1, 2], [1, 2])
    with pytest.raises(ValueError, match=r"^local_steps must be a callable round -> \(m,\) local steps, got list$"):
        noisy_grad_fn(prob, 0.1, 0, 2, 0, local_steps=[1, 2])
    with pytest.raises(ValueError, match=r"^local_steps must be a callable .*, got RandomLocalWork \(a schedule's "
                                         r"method: schedule\.local_steps\)$"):
        noisy_grad_fn(prob, 0.1, 0, 2, 0, local_steps=work)
    grad = noisy_grad_fn(prob, 0.1, 0, 2, 0, local_steps=work.local_steps)
    assert grad(np.zeros(2), 1, 0, 1).shape == (2,)


def test_run_replicas_refuses_a_progress_that_is_not_callable_before_a_round():
    """progress=True is refused before round 0. Before: round 0 ran, then Python's TypeError "'bool' object is not
    callable"."""
    prob, work = random_quadratic(2, 2, seed=0), RandomLocalWork([1, 2], [1, 2])
    with pytest.raises(ValueError, match=r"^progress must be a callable round -> None \(e\.g\. a progress bar's "
                                         r"update\), got bool$"):
        run_replicas(prob, "fednova", [sgd(0.1)], work, 2, progress=True)
    seen = []
    run_replicas(prob, "fednova", [sgd(0.1)], work, 2, progress=seen.append)
    assert seen == [0, 1]


def test_noisy_grad_fn_and_run_replicas_refuse_a_hook_of_the_wrong_signature():
    """local_steps (noisy_grad_fn) and progress (run_replicas) that cannot take the one round index they are called
    with are refused before any round. Before: Python's "<lambda>() takes 0 positional arguments but 1 was given"
    at the first gradient (progress: after round 0 ran)."""
    prob, work = random_quadratic(2, 2, seed=0), RandomLocalWork([1, 2], [1, 2])
    with pytest.raises(ValueError, match=r"^local_steps must be a callable round -> \(m,\) local steps, taking 1 "
                                         r"positional argument: local_steps\(round, client\) does not"):
        noisy_grad_fn(prob, 0.1, 0, 2, 0, local_steps=lambda round, client: [1, 2])
    with pytest.raises(ValueError, match=r"^progress must be a callable round -> None .*, taking 1 positional "
                                         r"argument: progress\(\) does not"):
        run_replicas(prob, "fednova", [sgd(0.1)], work, 2, progress=lambda: None)


def test_gradient_noise_stream():
    a = gradient_noise(3, 4, 2, 3, 5, 2, 0.5)
    b = gradient_noise(3, 4, 2, 3, 5, 2, 1.0)
    assert a.shape == (2, 3, 5, 2)
    np.testing.assert_array_equal(2 * a, b)
    assert not np.array_equal(a, gradient_noise(3, 5, 2, 3, 5, 2, 0.5))
    assert np.all(gradient_noise(3, 4, 2, 3, 5, 2, 0.0) == 0)


def test_a_diverging_run_of_replicas_is_the_floating_point_error_alone(capfd):
    """A run that diverges (lr = 50, 20 local steps) stops with FloatingPointError naming its round, and says nothing
    else: no numpy RuntimeWarning and nothing printed on the way to inf (the errstate of the recorded gradient norm and
    of the local steps). Before this test, errstate(..., "print") there (mutants EP3, EP4 of the negative-assertion
    pass: numpy's 'Warning: overflow encountered in ...' on the C stderr) passed the suite."""
    import warnings

    prob = random_quadratic(2, 2, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(FloatingPointError, match=r"^round \d+: the iterate is not finite \(diverged\)$"):
            run_replicas(prob, "fednova", [sgd(50.0)], _Fixed([20, 20], [0, 0]), 50)
    assert capfd.readouterr() == ("", "")


def test_a_diverging_runs_distances_are_exact_past_where_the_squared_norm_overflows():
    """Two clients H_i = I, x* = 0, FedAvg at lr 3 with one step: x -> -2x, so from x0 = (3, -4) the iterate is
    exactly (-2)^t (3, -4), finite to t = 1021: distance[t] = 5 * 2^t to the bit, the distance to x~ = (3, 4) within
    2 ulps of the exact one (isqrt of the integer sum of squares), in both replicas. grad_norm2 = 25 * 4^t is inf
    exactly where that passes the float64 maximum (t >= 510): a squared norm that is itself too large. Before,
    np.linalg.norm's sqrt(x.x) overflowed there too: distance and surrogate_distance were inf for t = 510..1021 (512
    rows of 1022) while the iterate was finite."""
    import math
    from fractions import Fraction

    prob = QuadraticProblem(np.stack([np.eye(2)] * 2), np.zeros((2, 2)), np.array([0.5, 0.5]))
    run = run_replicas(prob, "fedavg", [sgd(3.0)], FixedSteps([1, 1]), 1021, x0=[3.0, -4.0], replicas=2,
                       surrogate=[3.0, 4.0])
    assert run.distance.tolist() == [[5.0 * 2.0 ** t] * 2 for t in range(1022)]
    for t in range(1022):
        a, b = 3 * (-2) ** t - 3, -4 * (-2) ** t - 4
        exact = float(Fraction(math.isqrt((a * a + b * b) << 200), 1 << 100))
        assert np.all(np.abs(run.surrogate_distance[t] - exact) <= 2 * np.spacing(exact)), t
    too_large = np.array([25 * 4 ** t > Fraction(np.finfo(np.float64).max) for t in range(1022)])
    assert too_large.argmax() == 510 and np.array_equal(np.isinf(run.grad_norm2), np.stack([too_large] * 2, axis=1))


def test_run_replicas_bad_inputs():
    prob = random_quadratic(2, 2, seed=0)
    work = _Fixed([1, 2], [0, 0])
    with pytest.raises(ValueError, match="aggregation"):
        run_replicas(prob, "scaffold", [sgd(0.1)], work, 1)
    with pytest.raises(ValueError, match="solvers must be"):
        run_replicas(prob, "fednova", [], work, 1)
    with pytest.raises(ValueError, match="weight decay"):
        run_replicas(prob, "fednova", [sgd(0.1, weight_decay=0.1)], work, 1)
    with pytest.raises(ValueError, match="solver numbers"):
        run_replicas(prob, "fednova", [sgd(0.1)], _Fixed([1, 2], [0, 1]), 1)
    with pytest.raises(ValueError, match="steps"):
        run_replicas(prob, "fednova", [sgd(0.1)], _Fixed([0, 2], [0, 0]), 1)
    with pytest.raises(ValueError, match="x0"):
        run_replicas(prob, "fednova", [sgd(0.1)], work, 1, x0=np.zeros(3))
    with pytest.raises(ValueError, match="sigma"):
        run_replicas(prob, "fednova", [sgd(0.1)], work, 1, sigma=-1)
    with pytest.raises(FloatingPointError, match="round"):
        run_replicas(prob, "fednova", [sgd(50.0)], _Fixed([20, 20], [0, 0]), 50)


# ------------------------------------------------------------------ fedlib.experiments.speedup
def test_mean_a_norms_and_time_averaged_surrogate():
    base, work = S.base_setup(seed=0, dim=3)
    # SGD only: E||a||_1 = E tau = (low + high) / 2, and x~ is FedAvg's tau-weighted optimum
    one = RandomLocalWork(work.low, work.high, num_solvers=1, seed=0)
    np.testing.assert_allclose(S.mean_a_norms(one, [sgd(0.01)]), one.mean_steps, rtol=1e-15)
    w, x_tilde = S.time_averaged_surrogate(base, one, [sgd(0.01)])
    np.testing.assert_allclose(x_tilde, tau_weighted_optimum(base, 2 * one.mean_steps), rtol=1e-12)  # integers; w is scale-free
    # four solvers: the closed form equals the average over many drawn rounds (law of large numbers)
    solvers = S.make_solvers(0.01)
    draws = [work.draw(t) for t in range(4000)]
    values = np.array([[solvers[c].a_norm(int(s)) for s, c in zip(*d)] for d in draws])
    stderr = values.std(axis=0) / np.sqrt(len(draws))
    assert np.all(np.abs(S.mean_a_norms(work, solvers) - values.mean(axis=0)) < 4 * stderr)
    w, x_tilde = S.time_averaged_surrogate(base, work, solvers)
    np.testing.assert_allclose(x_tilde, surrogate_optimum(base, w), rtol=1e-14)
    assert w.sum() == pytest.approx(1) and np.all(np.diff(w) > 0)  # longer ranges, larger weight
    with pytest.raises(ValueError, match="solvers"):
        S.mean_a_norms(work, solvers[:2])


class _Scripted(RandomLocalWork):
    """Two SGD clients on the ranges 1..2 and 2..2 whose draws follow a script: client 0's tau of round t is
    ``script[t % len(script)]``, client 1's is 2 (hand-checkable drawn_weights)."""

    def __init__(self, script):
        super().__init__([1, 2], [2, 2], num_solvers=1)
        object.__setattr__(self, "script", tuple(script))

    def draw(self, round_index):
        return np.array([self.script[round_index % len(self.script)], 2]), np.zeros(2, dtype=np.int64)


def test_drawn_weights_by_hand_and_fails_on_biased_draws():
    r"""drawn_weights (chapter 8's check that the local work drawn averages to FedAvg's w-bar), by hand: p = (1/2, 1/2),
    SGD (||a||_1 = tau), client 0's tau uniform on {1, 2}, client 1's 2: E||a||_1 = (3/2, 2), w-bar = (3/7, 4/7)."""
    prob = QuadraticProblem(H=np.ones((2, 1, 1)), e=np.zeros((2, 1)), p=np.array([0.5, 0.5]))
    solvers = [sgd(0.1)]
    # fair draws 1, 2, 2, 1: tau_eff^(t) = 1.5, 2, 2, 1.5 (mean 7/4), w^ = (3/4) / (7/4) = 3/7 = w-bar; the per-round
    # values u_0 = (tau_0 / 2 - (3/7) tau_eff) / (7/4) are -4/49, 4/49, 4/49, -4/49 (u_1 = -u_0): sample std
    # sqrt(4 (4/49)^2 / 3) = 8 / (49 sqrt 3), standard error that / sqrt 4 = 4 / (49 sqrt 3)
    fair = S.drawn_weights(prob, _Scripted([1, 2, 2, 1]), solvers, 4)
    se = 4 / (49 * math.sqrt(3))
    np.testing.assert_allclose(fair.expected, [3 / 7, 4 / 7], rtol=1e-14)
    np.testing.assert_allclose(fair.measured, [3 / 7, 4 / 7], rtol=1e-14)
    np.testing.assert_allclose(fair.stderr, [se, se], rtol=1e-12)
    assert fair.rounds == 4 and fair.k == 5 and fair.holds and np.allclose(fair.z, 0, atol=1e-12)
    # the tau_eff-weighted average, not the plain mean of the per-round weights (1/3, 1/2, 1/2, 1/3: 5/12)
    assert abs(fair.measured[0] - 5 / 12) > 0.01
    # biased draws 1, 1, 1, 2 (E tau_0 = 5/4, not 3/2): w^_0 = (5/8) / (13/8) = 5/13, off w-bar by 4/91; the per-round
    # values are -8/169 (three times) and 24/169: sample std 16/169, standard error 8/169, so z = -(4/91) / (8/169)
    biased = S.drawn_weights(prob, _Scripted([1, 1, 1, 2]), solvers, 4)
    np.testing.assert_allclose(biased.measured, [5 / 13, 8 / 13], rtol=1e-14)
    np.testing.assert_allclose(biased.stderr, [8 / 169, 8 / 169], rtol=1e-12)
    np.testing.assert_allclose(biased.z, [-(4 / 91) / (8 / 169), (4 / 91) / (8 / 169)], rtol=1e-12)
    assert biased.holds  # four rounds: the bias is within the noise (|z| = 0.93) ...
    long = S.drawn_weights(prob, _Scripted([1, 1, 1, 2]), solvers, 400)
    # ... 400 rounds: the same bias, standard error sqrt(100 * 768 / 169^2 / 399) / 20
    np.testing.assert_allclose(long.stderr, [math.sqrt(100 * 768 / 169**2 / 399) / 20] * 2, rtol=1e-12)
    assert not long.holds and np.all(np.abs(long.z) > 10)
    assert S.drawn_weights(prob, _Scripted([1, 2, 2, 1]), solvers, 400).holds
    assert not S.drawn_weights(prob, _Scripted([1, 1, 1, 2]), solvers, 400, k=10.0).holds  # |z| = 10.7
    assert S.drawn_weights(prob, _Scripted([1, 1, 1, 2]), solvers, 400, k=11.0).holds
    for bad in ({"rounds": 1}, {"rounds": 4, "k": 0.0}):
        with pytest.raises(ValueError, match=list(bad)[-1]):
            S.drawn_weights(prob, _Scripted([1, 2]), solvers, **{"rounds": 4, **bad})


def test_drawn_weights_of_chapter8s_local_work_and_of_skewed_solver_draws():
    """Chapter 8's clients and local work: 1600 drawn rounds average to w-bar within 5 standard errors (they are
    3.9 of them off at most, seed 0); the same ranges and solvers, each still drawn, with a solver draw skewed
    towards the decayed steps (the larger of two uniform numbers: P(decayed) = 7/16 instead of 1/4, whose
    ||a||_1 saturates at 10, so the long clients lose weight) do not (7.2 standard errors). A skew that scales
    every client's E||a||_1 alike (towards SGD) leaves w-bar nearly where it is: the check cannot see it, nor
    should it."""
    base, work = S.base_setup(seed=0)
    solvers = S.make_solvers(0.01)
    check = S.drawn_weights(base, work, solvers, 1600)
    assert check.holds and np.max(np.abs(check.z)) < 4.5
    np.testing.assert_allclose(check.expected, S.time_averaged_surrogate(base, work, solvers)[0], rtol=1e-15)

    class Skewed(RandomLocalWork):
        def draw(self, round_index):
            steps, numbers = super().draw(round_index)
            return steps, np.maximum(numbers, super().draw(round_index + 10**6)[1])

    skewed = S.drawn_weights(base, Skewed(work.low, work.high, work.num_solvers, work.seed), solvers, 1600)
    assert not skewed.holds and np.max(np.abs(skewed.z)) > 6


def test_replicate_keeps_the_objective():
    base, work = S.base_setup(seed=1, dim=3)
    rep, rwork = S.replicate(base, work, 3)
    assert rep.num_clients == 12 and rwork.num_clients == 12 and rep.p.sum() == pytest.approx(1)
    np.testing.assert_allclose(rep.optimum(), base.optimum(), rtol=1e-12)
    x = np.array([0.3, -0.2, 1.0])
    np.testing.assert_allclose(rep.global_grad(x), base.global_grad(x), rtol=1e-12)
    np.testing.assert_allclose(rwork.mean_steps, np.tile(work.mean_steps, 3))
    steps = rwork.local_steps(0)
    assert not np.array_equal(steps[:4], steps[4:8]) or not np.array_equal(rwork.local_steps(1)[:4], rwork.local_steps(1)[4:8])


def test_theorem3_lr():
    assert S.theorem3_lr(0.5, 16, 4.0, 100) == pytest.approx(0.5 * math.sqrt(16 / 400))
    with pytest.raises(ValueError, match="rounds"):
        S.theorem3_lr(0.5, 16, 4.0, 0)


def test_consistency_sweep_small():
    base, work = S.base_setup(seed=0, dim=4)
    rows = S.consistency_sweep(base, work, [100, 400])
    assert [r.rounds for r in rows] == [100, 400]
    assert rows[1].lr == pytest.approx(rows[0].lr / 2)
    assert rows[1].fednova_distance < rows[0].fednova_distance < rows[0].fedavg_distance
    assert rows[1].fedavg_min_grad2 > 10 * rows[1].fednova_min_grad2


def test_speedup_grid_and_equal_budget_groups():
    base, work = S.base_setup(seed=0, dim=3)
    rows = S.speedup_grid(base, work, [1, 2], [40, 80], sigma=1.0, replicas=3, algorithms=("fednova", "fedavg"))
    assert [(r.algorithm, r.clients, r.rounds) for r in rows][:4] == [("fednova", 4, 40), ("fedavg", 4, 40),
                                                                      ("fednova", 4, 80), ("fedavg", 4, 80)]
    assert all(r.mean_grad2 > 0 and r.stderr > 0 for r in rows)
    r = rows[-1]
    assert r.budget == pytest.approx(r.clients * r.tau_tilde * r.rounds)
    assert r.lr == pytest.approx(S.theorem3_lr(0.1, 8, float(np.mean(np.tile(work.mean_steps, 2))), 80))
    with pytest.raises(ValueError, match="algorithms"):
        S.speedup_grid(base, work, [1], [10], algorithms=("scaffold",))


def test_equal_budget_ratios_groups_by_budget():
    rows = [S.SpeedupRow("fednova", 4, 400, 5.0, 0.1, 0.2, 0.01), S.SpeedupRow("fednova", 16, 100, 5.02, 0.1, 0.25, 0.01),
            S.SpeedupRow("fednova", 4, 100, 5.0, 0.1, 0.4, 0.01), S.SpeedupRow("fedavg", 16, 100, 5.0, 0.1, 9.0, 0.1)]
    groups = S.equal_budget_ratios(rows)
    assert len(groups) == 1
    budget, cells, ratio = groups[0]
    assert budget == pytest.approx(8000) and [c[:2] for c in cells] == [(4, 400), (16, 100)]
    assert ratio == pytest.approx(1.25)


def test_summary_markdown_uses_the_numbers():
    cons = [S.ConsistencyRow(100, 0.04, 0.15, 0.016, 0.46, 0.26, 0.18, 0.59, 0.70),
            S.ConsistencyRow(400, 0.02, 0.086, 0.005, 0.54, 0.17, 0.29, 0.59, 0.71)]
    grid = [S.SpeedupRow("fednova", 4, 100, 5.0, 0.1, 0.2, 0.01), S.SpeedupRow("fedavg", 4, 100, 5.0, 0.1, 0.7, 0.01)]
    text = S.summary_markdown(cons, grid, 0.937, 0.475, -0.48, [(2000.0, [(4, 100, 0.2), (16, 25, 0.23)], 1.15)])
    for needle in ("0.15", "0.086", "0.94", "0.47", "-0.480", "1.15", "m=16, T=25", "0.7 at the largest", "0.71"):
        assert needle in text
    assert "times faster" not in text
    text = S.summary_markdown(cons, grid, 0.937, 0.475, -0.48, [], S.EngineCheck(0.1, 1.9, 2e-16))
    assert "19.0 times faster" in text and "2.0e-16" in text and "at worst" not in text


def test_check_against_reference_same_numbers():
    base, work = S.base_setup(seed=2, dim=3)
    prob, w = S.replicate(base, work, 2)
    check = S.check_against_reference(prob, w, S.make_solvers(0.02), 15, replicas=2)
    assert check.max_difference < 1e-12
    assert check.seconds_engine > 0 and check.seconds_reference > 0
    assert check.speedup == pytest.approx(check.seconds_reference / check.seconds_engine)


# ------------------------------------------------------------------ App. G: client sampling
def test_sampled_rounds_draw_noise_for_participants_only():
    """Under sampling a round's noise is one draw for its participants (in client order): the
    gradients a participant sees do not depend on how many clients there are in all."""
    prob = random_quadratic(6, 2, seed=1)
    work = RandomLocalWork([2] * 6, [4] * 6, num_solvers=1, seed=0)
    from fedlib.sampling import sample_clients
    grad = noisy_grad_fn(prob, 0.5, 3, 2, 1, work.local_steps, sampling="uniform", clients_per_round=2)
    part = sample_clients("uniform", prob.p, 2, 3, 0)
    steps = work.local_steps(0)
    noise = gradient_noise(3, 0, 2, 2, int(steps[part.clients].max()), 2, 0.5)[1]
    x = np.array([0.3, -0.2])
    for rank, client in enumerate(part.clients):
        np.testing.assert_allclose(grad(x, int(client), 0, 1) - prob.grad(x, int(client)), noise[rank, 1],
                                   rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="sampling"):
        noisy_grad_fn(prob, 0.5, 3, 2, 1, work.local_steps, sampling="poisson")


def test_sampling_grid_averages_independent_seeds():
    from fedlib.experiments import run_seeds  # seed 5 with 3 seeds: sampling seeds 15, 16, 17

    base, work = S.base_setup(seed=0, dim=3)
    rows = S.sampling_grid(base, work, [2], [2, 4], [30, 60], sigma=1.0, replicas=2, seeds=3, seed=5)
    assert [(r.population, r.clients, r.rounds) for r in rows] == [(8, 2, 30), (8, 2, 60), (8, 4, 30), (8, 4, 60)]
    prob, w = S.replicate(base, work, 2)
    r = rows[1]
    lr = S.theorem3_lr(0.1, 2, float(prob.p @ w.mean_steps), 60)
    assert r.lr == pytest.approx(lr)
    fixed = S.population_tau_eff(prob, w, S.make_solvers(lr))
    assert fixed == pytest.approx(float(prob.p @ S.mean_a_norms(w, S.make_solvers(lr))))
    per_seed = [run_replicas(prob, "fednova", S.make_solvers(lr), w, 60, sigma=1.0, replicas=2, seed=s,
                             sampling="with-replacement", clients_per_round=2, tau_eff=fixed) for s in run_seeds(5, 3)]
    assert np.all(per_seed[0].tau_eff == fixed) and r.tau_eff == "population"
    values = [float(run.grad_norm2[:-1].mean()) for run in per_seed]
    assert r.mean_grad2 == pytest.approx(np.mean(values), rel=1e-12)
    assert r.stderr == pytest.approx(np.std(values, ddof=1) / math.sqrt(3), rel=1e-12)
    assert r.tau_tilde == pytest.approx(np.mean([run.mean_local_steps for run in per_seed]))
    assert len(set(values)) == 3  # the seeds are independent runs
    from fedlib.sampling import effective_participants
    assert r.effective_clients == pytest.approx(effective_participants("with-replacement", prob.p, 2))
    assert r.budget == pytest.approx(2 * r.tau_tilde * 60)
    assert S.sampling_grid(base, work, [2], [2], [30], sigma=1.0, replicas=2, seeds=2, seed=5)[0] == \
        S.sampling_grid(base, work, [2], [2], [30], sigma=1.0, replicas=2, seeds=2, seed=5)[0]
    sample = S.sampling_grid(base, work, [2], [2], [60], sigma=1.0, replicas=2, seeds=2, seed=5, tau_eff="participants")
    plain = [run_replicas(prob, "fednova", S.make_solvers(lr), w, 60, sigma=1.0, replicas=2, seed=s,
                          sampling="with-replacement", clients_per_round=2) for s in run_seeds(5, 2)]
    assert sample[0].tau_eff == "participants"
    assert sample[0].mean_grad2 == pytest.approx(np.mean([float(run.grad_norm2[:-1].mean()) for run in plain]))
    app_h = S.sampling_grid(base, work, [2], [2], [60], sigma=1.0, replicas=2, seeds=2, seed=5, tau_eff="selected_p")
    plain_h = [run_replicas(prob, "fednova", S.make_solvers(lr), w, 60, sigma=1.0, replicas=2, seed=s,
                            sampling="with-replacement", clients_per_round=2, tau_eff="selected_p") for s in run_seeds(5, 2)]
    assert app_h[0].tau_eff == "selected_p"
    assert app_h[0].mean_grad2 == pytest.approx(np.mean([float(run.grad_norm2[:-1].mean()) for run in plain_h]))
    with pytest.raises(ValueError, match="tau_eff"):
        S.sampling_grid(base, work, [1], [2], [10], tau_eff="server")
    with pytest.raises(ValueError, match="scheme"):
        S.sampling_grid(base, work, [1], [2], [10], scheme="full")
    with pytest.raises(ValueError, match="seeds"):
        S.sampling_grid(base, work, [1], [2], [10], seeds=1)
    with pytest.raises(ValueError, match="clients_per_round"):
        S.sampling_grid(base, work, [1], [5], [10], scheme="uniform")


def test_sampling_gain_and_summary_use_the_numbers():
    def row(m, q, T, v, eff):
        return S.SamplingRow("fednova", "with-replacement", m, q, T, 6.5, 0.01, v, 0.01, eff)

    big = [row(256, 4, 1024, 0.2, 3.95), row(256, 16, 1024, 0.1, 15.1), row(256, 16, 256, 0.19, 15.1)]
    small = [row(4, 4, 1024, 0.3, 2.29), row(4, 16, 1024, 0.25, 3.37)]
    assert S.sampling_gain(big, 256, 1024, 4, 16) == pytest.approx(2.0)
    assert S.sampling_gain(small, 4, 1024, 4, 16) == pytest.approx(1.2)
    with pytest.raises(ValueError, match="no cell"):
        S.sampling_gain(big, 256, 4096, 4, 16)
    text = S.sampling_summary(big, small, -0.479, [(2.7e4, [(4, 1024, 0.2), (16, 256, 0.19)], 1.05)], 2.0, 1.2, 4, 16)
    for needle in ("m = 256", "-0.479", "1.05", "q=16, T=256", "2.00×", "1.20×", "3.95 → 15.1", "2.29 → 3.37",
                   "\\sqrt{16/4} = 2.00", "\\tilde\\tau"):
        assert needle in text, needle
    assert "\t" not in text and "\f" not in text
    assert "asserted" not in text  # without slope_eff, no slope is named as the asserted one
    # chapter 8 asserts the slope against q_eff tau T: the summary prints it next to the one against q tau T and names it
    text = S.sampling_summary(big, small, -0.446, [], 2.0, 1.2, 4, 16, slope_eff=-0.476)
    assert ("slope -0.446 against $q\\tilde\\tau T$ and -0.476 against $q_{\\text{eff}}\\tilde\\tau T$ (the one "
            "asserted above; $q_{\\text{eff}}$: next point) over $q = 4") in text
    bias = [S.BiasRow(2, T, lr, c, d, 0.01, pred, off, 0.08, 1.0, np.zeros((2, 3)), np.zeros(3))
            for T, lr, c, d, pred, off in [(1000, 0.0087, "population", 0.064, 0.0, 0.064),
                                           (4000, 0.0043, "population", 0.031, 0.0, 0.031),
                                           (1000, 0.0087, "participants", 0.284, 0.304, 0.086),
                                           (4000, 0.0043, "participants", 0.293, 0.304, 0.033),
                                           (1000, 0.0087, "selected_p", 0.250, 0.261, 0.078),
                                           (4000, 0.0043, "selected_p", 0.253, 0.262, 0.032)]]
    text = S.sampling_summary(big, small, -0.479, [], 2.0, 1.2, 4, 16, bias)
    for needle in ("$q = 2$", "fell 2×", "0.284 → 0.293", "closed-form limit 0.304", "0.033 from it at $T = 4000$",
                   "0.25 → 0.253", "App. H", "0.064 → 0.031"):
        assert needle in text, needle


def test_run_replicas_fixed_tau_eff_equals_reference_loop():
    prob = random_quadratic(5, 3, seed=4, p=[0.1, 0.3, 0.2, 0.25, 0.15])
    work = RandomLocalWork([1, 1, 2, 3, 5], [2, 4, 6, 8, 9], num_solvers=len(ALL_SOLVERS), seed=1)
    run = run_replicas(prob, "fednova", ALL_SOLVERS, work, 10, sigma=0.5, replicas=2, seed=3, sampling="with-replacement",
                       clients_per_round=3, tau_eff=4.25)
    assert np.all(run.tau_eff == 4.25)
    for r in range(2):
        ref = run_sequential(make_algorithm("fednova", ALL_SOLVERS[0], tau_eff=4.25), np.zeros(3),
                             noisy_grad_fn(prob, 0.5, 3, 2, r, work.local_steps, sampling="with-replacement",
                                           clients_per_round=3),
                             prob.p, work, 10, solver_at=client_solvers(work, ALL_SOLVERS), sampling="with-replacement",
                             clients_per_round=3, seed=3)
        np.testing.assert_allclose(run.params[r], ref.state.params, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="tau_eff"):
        run_replicas(prob, "fedavg", ALL_SOLVERS, work, 2, tau_eff=3.0)
    with pytest.raises(ValueError, match="tau_eff"):
        run_replicas(prob, "fednova", ALL_SOLVERS, work, 2, tau_eff=0.0)


def test_mean_params_is_the_average_of_the_second_half():
    prob = random_quadratic(3, 2, seed=0)
    work = RandomLocalWork([1, 2, 3], [2, 3, 5], num_solvers=1, seed=0)
    xs = [run_replicas(prob, "fednova", [sgd(0.05)], work, T, sigma=0.3, replicas=2, seed=1).params for T in range(8)]
    run = run_replicas(prob, "fednova", [sgd(0.05)], work, 7, sigma=0.3, replicas=2, seed=1)
    np.testing.assert_allclose(run.mean_params, np.mean(xs[4:], axis=0), rtol=1e-13)   # t = 4..7
    one = run_replicas(prob, "fednova", [sgd(0.05)], work, 1, sigma=0.3, replicas=2, seed=1)
    np.testing.assert_allclose(one.mean_params, one.params, rtol=1e-15)
    zero = run_replicas(prob, "fednova", [sgd(0.05)], work, 0, replicas=2)
    np.testing.assert_array_equal(zero.mean_params, np.zeros((2, 2)))


def test_sampling_bias_sample_tau_eff_is_biased_where_predicted():
    """q = 2 of the four base clients, full gradients: with either tau_eff taken from the sample
    the averaged iterate stays away from x*, near the closed-form limit x_c; with the population
    tau_eff it is near x* (predicted distance 0, chi2 0, step scale 1)."""
    base, work = S.base_setup(seed=0, dim=4)
    rows = S.sampling_bias(base, work, [2], [1500], seeds=2)
    assert [(r.clients, r.rounds, r.tau_eff) for r in rows] == [(2, 1500, c) for c in S.TAU_EFF_CHOICES]
    fixed = S.bias_row(rows, 2, 1500, "population")
    assert fixed.predicted < 1e-12 and fixed.chi2 < 1e-15 and fixed.step_scale == pytest.approx(1.0)
    assert fixed.off_prediction == pytest.approx(fixed.distance, abs=1e-12)
    for choice in ("participants", "selected_p"):
        r = S.bias_row(rows, 2, 1500, choice)
        assert r.distance > 3 * fixed.distance and r.predicted > 3 * fixed.distance
        assert r.off_prediction < 0.5 * r.predicted and r.chi2 > 0 and r.stderr >= 0
    assert S.bias_row(rows, 2, 1500, "participants").step_scale == pytest.approx(1.0)  # E[sum omega a] = sum p a
    assert S.bias_row(rows, 2, 1500, "selected_p").step_scale < 1.0                  # App. H: a smaller step
    with pytest.raises(ValueError, match="seeds"):
        S.sampling_bias(base, work, [2], [10], seeds=1)
    with pytest.raises(ValueError, match="tau_effs"):
        S.sampling_bias(base, work, [2], [10], tau_effs=["server"])
    with pytest.raises(ValueError, match="scheme"):
        S.sampling_bias(base, work, [2], [10], scheme="full")
    with pytest.raises(ValueError, match="no sampling_bias row"):
        S.bias_row(rows, 4, 1500, "population")


def test_run_replicas_selected_p_tau_eff_is_app_h():
    """tau_eff="selected_p": every round's tau_eff is sum_{i in S} p_i ||a_i||_1 of that round's
    sample (App. H); one round equals a run with that number fixed; under full participation it
    is the default."""
    from fedlib.sampling import sample_clients

    prob = random_quadratic(5, 3, seed=4, p=[0.1, 0.3, 0.2, 0.25, 0.15])
    work = RandomLocalWork([1, 1, 2, 3, 5], [2, 4, 6, 8, 9], num_solvers=1, seed=1)
    solvers = [ALL_SOLVERS[0]]
    run = run_replicas(prob, "fednova", solvers, work, 12, sigma=0.5, replicas=2, seed=3, sampling="with-replacement",
                       clients_per_round=3, tau_eff="selected_p")
    for t in range(12):
        part = sample_clients("with-replacement", prob.p, 3, 3, t)
        steps = work.draw(t)[0][part.clients]
        a = np.array([solvers[0].a_norm(int(k)) for k in steps])
        assert run.tau_eff[t] == pytest.approx(float(prob.p[part.clients] @ a), rel=1e-13)
    one = run_replicas(prob, "fednova", solvers, work, 1, sigma=0.5, replicas=2, seed=3, sampling="with-replacement",
                       clients_per_round=3, tau_eff="selected_p")
    fixed = run_replicas(prob, "fednova", solvers, work, 1, sigma=0.5, replicas=2, seed=3, sampling="with-replacement",
                         clients_per_round=3, tau_eff=float(run.tau_eff[0]))
    np.testing.assert_allclose(one.params, fixed.params, rtol=0, atol=1e-14)
    full = run_replicas(prob, "fednova", solvers, work, 6, sigma=0.5, replicas=2, seed=3, tau_eff="selected_p")
    default = run_replicas(prob, "fednova", solvers, work, 6, sigma=0.5, replicas=2, seed=3)
    np.testing.assert_allclose(full.params, default.params, rtol=0, atol=1e-13)
    with pytest.raises(ValueError, match="tau_eff"):
        run_replicas(prob, "fednova", solvers, work, 2, tau_eff="participants")
    with pytest.raises(ValueError, match="tau_eff"):
        run_replicas(prob, "fedavg", solvers, work, 2, tau_eff="selected_p")


def test_plot_bias_puts_the_limits_where_they_are():
    """plot_bias: x* at the origin, the default's predicted limit on the first axis at its
    true distance, every seed's averaged iterate drawn; a missing (q, T) is refused."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    base, work = S.base_setup(seed=0, dim=4)
    rows = S.sampling_bias(base, work, [2], [300], seeds=2)
    fig, ax = plt.subplots()
    S.plot_bias(ax, rows, base.optimum(), 2, 300)
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    x_c = [lines["predicted limit $x_c$ (default)"], lines["predicted limit $x_c$ (App. H)"]]
    assert lines["$x^*$"].get_xdata()[0] == 0
    default = S.bias_row(rows, 2, 300, "participants")
    assert x_c[0].get_xdata()[0] == pytest.approx(default.predicted, rel=1e-12)
    assert x_c[0].get_ydata()[0] == pytest.approx(0.0, abs=1e-12)
    assert sum(len(ln.get_xdata()) for label, ln in lines.items() if "averaged" in label) == 3 * 2
    with pytest.raises(ValueError, match="plot_bias"):
        S.plot_bias(ax, rows, base.optimum(), 4, 300)
    plt.close(fig)



def test_plot_bias_with_one_sample_dependent_choice_draws_on_one_axis():
    """With only the default's row beside the population's (no App. H row), the plane is the line through
    x* and the default's limit: that limit at its true distance on the first axis, and every point at 0 on
    the second (the components off the line are dropped), with no App. H limit drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    base, work = S.base_setup(seed=0, dim=4)
    rows = [r for r in S.sampling_bias(base, work, [2], [300], seeds=2) if r.tau_eff != "selected_p"]
    assert sorted(r.tau_eff for r in rows) == ["participants", "population"]
    fig, ax = plt.subplots()
    S.plot_bias(ax, rows, base.optimum(), 2, 300)
    lines = {ln.get_label(): ln for ln in ax.get_lines() if not ln.get_label().startswith("_")}
    assert "predicted limit $x_c$ (App. H)" not in lines
    default = S.bias_row(rows, 2, 300, "participants")
    limit = lines["predicted limit $x_c$ (default)"]
    assert limit.get_xdata()[0] == pytest.approx(np.linalg.norm(default.limit - base.optimum()), rel=1e-12)
    averaged = [ln for label, ln in lines.items() if "averaged" in label]
    assert sum(len(ln.get_ydata()) for ln in averaged) == 2 * 2
    assert all(y == 0.0 for ln in averaged + [limit] for y in ln.get_ydata())
    plt.close(fig)

class _TwoSolvers:
    """Both clients take 5 steps; client i runs solver i."""

    def draw(self, t):
        return np.array([5, 5]), np.array([0, 1])


def test_clients_share_one_base_learning_rate():
    """||a_i||_1 is counted in units of each solver's own lr: with sgd(0.01) and sgd(0.03) both clients
    reported 5 for changes three times apart, FedNova went to FedAvg's surrogate (-0.485 instead of near
    x* = 0) and chi2 read 0. Such solver lists are refused by every engine that takes several solvers;
    the same client given its 3x step size as an lr_schedule factor is counted (||a_2||_1 = 15)."""
    from fedlib.solvers import LocalSolver

    prob = QuadraticProblem(np.ones((2, 1, 1)), np.array([[1.0], [-1.0]]), np.array([0.5, 0.5]))
    for call in (lambda: run_replicas(prob, "fednova", [sgd(0.01), sgd(0.03)], _TwoSolvers(), 3),
                 lambda: client_solvers(_TwoSolvers(), [sgd(0.01), sgd(0.03)]),
                 lambda: run_sequential(make_algorithm("fednova", sgd(0.01)), np.zeros(1),
                                        lambda x, i, t, k: prob.grad(x, i), prob.p, FixedSteps([5, 5]), 1,
                                        solver_at=lambda t, i: sgd(0.03))):
        with pytest.raises(ValueError, match=r"lr 0\.03, but the clients share one base learning rate \(0\.01\).*"
                                             r"lr_schedule=lambda k: 3"):
            call()
    # the client is named by solver_at's own arguments: was 'solver_at(0, 1) -> solvers[0] has lr ...', as if client 0
    with pytest.raises(ValueError, match=r"^solver_at\(0, 1\)'s solver has lr 0\.03, but"):
        run_sequential(make_algorithm("fednova", sgd(0.01)), np.zeros(1), lambda x, i, t, k: prob.grad(x, i), prob.p,
                       FixedSteps([5, 5]), 1, solver_at=lambda t, i: sgd(0.03) if i == 1 else sgd(0.01))
    for lr in (0.01, 0.001):
        three = LocalSolver(lr=lr, lr_schedule=lambda k: 3.0, name="sgd x3")
        nova = run_replicas(prob, "fednova", [sgd(lr), three], _TwoSolvers(), int(3 / lr))
        avg = run_replicas(prob, "fedavg", [sgd(lr), three], _TwoSolvers(), int(3 / lr))
        assert nova.tau_eff[-1] == pytest.approx(0.5 * 5 + 0.5 * 15)
        assert abs(nova.params[0, 0]) < 3 * lr           # FedNova: x* = 0 up to O(lr)
        assert nova.chi2[-1] == 0.0
        # FedAvg: w = (5, 15) / 20, the surrogate's minimiser (1 * 1 + 3 * -1) / 4 = -0.5, chi2 = sum (p-w)^2/w = 1/3
        assert avg.params[0, 0] == pytest.approx(-0.5, abs=3 * lr)
        assert avg.chi2[-1] == pytest.approx(1 / 3)


def test_run_replicas_with_no_rounds_has_no_mean_local_steps():
    """rounds = 0 reported tau~ = 0.0, a number no run had: there is no round to average over."""
    prob = QuadraticProblem(np.ones((2, 1, 1)), np.array([[1.0], [-1.0]]), np.array([0.5, 0.5]))
    run = run_replicas(prob, "fednova", [sgd(0.1)], RandomLocalWork([2, 3], [2, 3]), 0, x0=[4.0])
    assert math.isnan(run.mean_local_steps)
    assert run.grad_norm2.shape == (1, 1) and run.grad_norm2[0, 0] == pytest.approx(16.0)
    np.testing.assert_array_equal(run.mean_params, [[4.0]])
    assert run.tau_eff.shape == (0,)
    assert run_replicas(prob, "fednova", [sgd(0.1)], RandomLocalWork([2, 3], [2, 3]), 1).mean_local_steps == 2.5


# --------------------------------------------------------------------------- run_replicas names the bad solver
class _OwnStep(LocalSolver):
    """A subclass with its own ``update`` (the same step): run_replicas' fused step refuses it."""

    def update(self, state, grads):
        return super().update(state, grads)


def test_run_replicas_names_the_index_of_the_bad_solver():
    problem = random_quadratic(3, 2, seed=0)
    work = RandomLocalWork(np.array([1, 2, 3]), np.array([1, 2, 3]), 2, 0)
    with pytest.raises(ValueError, match=r"^solvers\[1\]: _OwnStep overrides LocalSolver's step"):
        run_replicas(problem, "fednova", [sgd(0.05), _OwnStep(lr=0.05)], work, 1)
    with pytest.raises(ValueError, match=r"^solvers\[1\]: weight decay is not supported by run_replicas, got 0.01"):
        run_replicas(problem, "fednova", [sgd(0.05), LocalSolver(0.05, weight_decay=0.01)], work, 1)


# --------------------------------------------------------------------------- sampling_summary's q_eff
def _srow(m, q, value, eff, scheme="with-replacement"):
    from fedlib.experiments import speedup as S

    return S.SamplingRow("fednova", scheme, m, q, 1024, 6.5, 0.01, value, 0.01, eff)


def test_sampling_summary_states_the_rows_q_eff():
    """A guard (held before): consistent rows keep their sentence, with the rows' q_eff."""
    from fedlib.experiments import speedup as S

    big, small = [_srow(256, 4, 0.2, 3.95), _srow(256, 16, 0.1, 15.1)], [_srow(4, 4, 0.3, 2.29), _srow(4, 16, 0.25, 3.4)]
    text = S.sampling_summary(big, small, -0.5, [], 2.0, 1.2, 4, 16)
    assert "($q_{\\text{eff}}$ 3.95 → 15.1)" in text and "($q_{\\text{eff}}$ 2.29 → 3.4)" in text
    assert "nan" not in text


@pytest.mark.parametrize("big, small, message", [
    # rows without q_to: the summary printed "q_eff 3.95 → nan" next to a gain it had no cell for
    ([_srow(256, 4, 0.2, 3.95)], [_srow(4, 4, 0.3, 2.29), _srow(4, 16, 0.25, 3.4)],
     r"^big: no row with q = 16 \(it has q = \[4\]\): the summary states q_eff at q_from = 4 and q_to = 16$"),
    ([_srow(256, 4, 0.2, 3.95), _srow(256, 16, 0.1, 15.1)], [_srow(4, 16, 0.25, 3.4)],
     r"^small: no row with q = 4 \(it has q = \[16\]\)"),
    # a row without q_eff (nan): printed as nan
    ([_srow(256, 4, 0.2, 3.95), _srow(256, 16, 0.1, float("nan"))], [_srow(4, 4, 0.3, 2.29), _srow(4, 16, 0.25, 3.4)],
     r"^big: the row with q = 16 has effective_clients nan, not a number > 0"),
    # uniform rows: the text's 'with replacement' and its q_eff formula would be false
    ([_srow(256, 4, 0.2, 4.0, "uniform"), _srow(256, 16, 0.1, 16.0, "uniform")],
     [_srow(4, 4, 0.3, 2.29), _srow(4, 16, 0.25, 3.4)],
     r"^big: the summary describes sampling with replacement .* got rows of scheme 'uniform'$"),
    # two populations in one list: the q_eff of the other m was printed under m = 256
    ([_srow(256, 4, 0.2, 3.95), _srow(64, 16, 0.1, 12.0)], [_srow(4, 4, 0.3, 2.29), _srow(4, 16, 0.25, 3.4)],
     r"^big: rows of one population m, got m = \[64, 256\]$"),
    ([], [_srow(4, 4, 0.3, 2.29)], r"^big must be a non-empty sequence of SamplingRow"),
])
def test_sampling_summary_refuses_rows_that_do_not_fit_its_text(big, small, message):
    from fedlib.experiments import speedup as S

    with pytest.raises(ValueError, match=message):
        S.sampling_summary(big, small, -0.5, [], 2.0, 1.2, 4, 16)


# ------------------------------------------------------------------------- RandomLocalWork's lengths, the work's draw
@pytest.mark.parametrize("low, high, sizes", [([1, 1, 1], [2, 3], "3 low and 2 high"),
                                              ([1, 1], [2, 3, 4], "2 low and 3 high")])
def test_random_local_work_length_mismatch_names_low_and_high(low, high, sizes):
    """Was: 'high must have 3 entries (one per client), got 2' when low had the extra entry."""
    with pytest.raises(ValueError, match=f"^low and high must have one entry per client each, got {sizes}$"):
        RandomLocalWork(low, high)


class _ShortDraw:
    """A local-work schedule whose draw gives one step count for two clients."""

    def draw(self, round_index):
        return np.array([2]), np.array([0, 0])


def test_run_replicas_names_the_work_draw_when_it_gives_the_wrong_number_of_steps():
    """Was: 'steps must have 2 entries (one per client), got 1' (run_replicas has no argument steps)."""
    prob = QuadraticProblem(np.ones((2, 1, 1)), np.array([[1.0], [-1.0]]), np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match=r"^work\.draw\(0\): steps must have 2 entries \(one per client\), got 1$"):
        run_replicas(prob, "fedavg", [sgd(0.5)], _ShortDraw(), 1)


# --------------------------------------------------------------------------- chapter 8's sampling-gain assert
BOOK = Path(__file__).resolve().parents[1] / "book"


def _cell_sources(name):
    nb = json.loads((BOOK / name).read_text())
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def _row(m, q, T, mean, se):
    from fedlib.experiments.speedup import SamplingRow
    return SamplingRow("fednova", "with-replacement", m, q, T, 5.0, 0.1, mean, se, float(q))


def test_sampling_gain_stderr_is_the_delta_method():
    from fedlib.experiments import speedup as S
    rows = [_row(64, 4, 1024, 0.2, 0.01), _row(64, 16, 1024, 0.1, 0.002), _row(64, 16, 256, 9.0, 9.0)]
    # gain 0.2 / 0.1 = 2, relative errors 5 % and 2 %: se = 2 sqrt(0.05^2 + 0.02^2) = 2 sqrt(0.0029)
    assert S.sampling_gain_stderr(rows, 64, 1024, 4, 16) == pytest.approx(2 * 0.0029 ** 0.5, rel=1e-14)
    assert S.sampling_gain_stderr([_row(4, 4, 8, 3.0, 0.0), _row(4, 16, 8, 1.5, 0.0)], 4, 8, 4, 16) == 0.0
    with pytest.raises(ValueError, match="no cell with m=64, T=512, q=4"):
        S.sampling_gain_stderr(rows, 64, 512, 4, 16)


def test_chapter8_gain_assert_tests_app_g_null_with_its_standard_error():
    """App. G's rate O(1/sqrt(q tau T)) does not depend on m: read for any population it predicts the same
    gain sqrt(16/4) = 2 at m = 4 and m = 64, a ratio of 1. The chapter's claim (repeated draws in a small
    population buy less) is that the ratio exceeds 1 by more than three standard errors; the old threshold
    1.4 had no derivation (seeds 0-7 measured 1.60-1.91, se 0.07-0.12)."""
    code = "\n".join(_cell_sources("08_theorem3_speedup.ipynb"))
    assert "assert gain_big > 1.4 * gain_small" not in code
    assert "assert gain_ratio > 1 + 3 * gain_ratio_se" in code
    assert "gain_ratio = gain_big / gain_small" in code


def test_noise_helpers_check_sigma_and_replica():
    prob = random_quadratic(3, 2, seed=0)
    steps = lambda t: [1, 2, 3]  # noqa: E731
    for sigma in (-0.1, float("nan")):
        with pytest.raises(ValueError, match="^sigma must"):
            E.gradient_noise(0, 0, 1, 1, 1, 2, sigma)
        with pytest.raises(ValueError, match="^sigma must"):
            E.noisy_grad_fn(prob, sigma, 0, 2, 1, steps)
    with pytest.raises(ValueError, match=r"^replica must be in 0\.\.1"):   # was IndexError at the first gradient
        E.noisy_grad_fn(prob, 0.1, 0, 2, 2, steps)
    g = E.noisy_grad_fn(prob, 0.1, 0, 2, 1, steps)(np.zeros(2), 0, 0, 0)
    np.testing.assert_allclose(g, prob.grad(np.zeros(2), 0) + E.gradient_noise(0, 0, 2, 3, 3, 2, 0.1)[1, 0, 0])


def test_engine_docstrings_keep_their_backslashes():
    """A non-raw docstring turned :math:`\\tau_i` into a TAB + 'au_i'; a raw one had \\\\widetilde."""
    assert "\t" not in E.noisy_grad_fn.__doc__ and r"\tau_i" in E.noisy_grad_fn.__doc__
    assert r"\\widetilde" not in E.run_replicas.__doc__


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


def test_run_replicas_names_work_without_draw():
    """run_replicas with a step schedule (FixedSteps) as ``work`` raised AttributeError "'FixedSteps'
    object has no attribute 'draw'" from inside the round loop; now a ValueError names work when there are several
    solvers to choose from (with one, a schedule is enough: the next test), and one with neither method."""
    from fedlib.engines.quadratic import run_replicas
    from fedlib.problems import random_quadratic
    from fedlib.schedules import FixedSteps, RandomLocalWork

    prob = random_quadratic(2, 2, seed=0)
    with pytest.raises(ValueError, match=r"work must have draw\(round\) -> \(steps, solver_numbers\), e\.g\. "
                                         r"fedlib\.schedules\.RandomLocalWork\(\.\.\., num_solvers=2\), to say which of "
                                         r"the 2 solvers each client runs; FixedSteps has only local_steps\(round\)"):
        run_replicas(prob, "fednova", [sgd(0.01), sgd(0.01)], FixedSteps([1, 2]), 3)
    with pytest.raises(ValueError, match=r"work must have draw\(round\) .*or, with one solver, be a schedule with "
                                         r"local_steps\(round\) -> \(m,\) steps; got list"):
        run_replicas(prob, "fednova", [sgd(0.01)], [1, 2], 3)
    run = run_replicas(prob, "fednova", [sgd(0.01)], RandomLocalWork([1, 2], [1, 2]), 3)
    assert run.tau_eff.tolist() == [1.5, 1.5, 1.5]  # sum_i p_i tau_i with p = (1/2, 1/2), SGD


def test_run_replicas_takes_a_schedule_of_local_steps_with_one_solver():
    """With one solver, ``work`` may be any schedule with local_steps(round) (the contract of "Extending fedlib"):
    every client runs that solver, the numbers of RandomLocalWork drawing the same steps (bit for bit, noise and
    sampling included); its steps are checked by name. Before: "work must have draw(round) -> (steps,
    solver_numbers), e.g. fedlib.schedules.RandomLocalWork, got FixedSteps"."""
    from fedlib.engines.quadratic import run_replicas
    from fedlib.problems import random_quadratic
    from fedlib.schedules import RandomLocalWork

    prob = random_quadratic(3, 2, seed=1)
    work = RandomLocalWork([1, 2, 3], [4, 5, 6], seed=2)

    class MySchedule:  # the same steps as work, without draw
        def local_steps(self, round_index):
            return work.draw(round_index)[0]

    for solver, kwargs in [(sgd(0.05), {}), (momentum_sgd(0.05, 0.5),
                                             {"sigma": 0.3, "replicas": 2, "sampling": "uniform", "clients_per_round": 2})]:
        mine = run_replicas(prob, "fednova", [solver], MySchedule(), 4, **kwargs)
        theirs = run_replicas(prob, "fednova", [solver], work, 4, **kwargs)
        np.testing.assert_array_equal(mine.params, theirs.params)
        np.testing.assert_array_equal(mine.tau_eff, theirs.tau_eff)

    class Idle:
        def local_steps(self, round_index):
            return np.array([1, 0, 2])

    with pytest.raises(ValueError, match=r"^work\.local_steps\(0\)"):
        run_replicas(prob, "fedavg", [sgd(0.05)], Idle(), 1)


class _IdleOutOfRound:
    """Local work that gives the clients a sampler leaves out of the round no step: clients 0 and 2 in even rounds,
    1 and 3 in odd ones (steps 2..5, solvers by client), the others 0 steps; ``idle_participant`` gives participant 2
    of round 2 no step instead."""

    def __init__(self, idle_participant=False):
        self.idle_participant = idle_participant

    @staticmethod
    def sampler(t):
        from fedlib.sampling import Participation

        clients = np.array([0, 2]) if t % 2 == 0 else np.array([1, 3])
        return Participation(clients, np.array([0.4, 0.6]))

    def draw(self, t):
        steps = np.array([2, 3, 4, 5])
        steps[np.array([1, 3]) if t % 2 == 0 else np.array([0, 2])] = 0
        if self.idle_participant and t == 2:
            steps[2] = 0
        return steps, np.array([0, 1, 2, 0])

    def local_steps(self, t):
        return self.draw(t)[0]


def test_run_replicas_takes_no_work_for_a_client_out_of_the_round_as_run_sequential_does():
    """A client a sampler leaves out of the round may do no work (tau_i = 0), as in run_sequential and run_batched
    (fedlib.schedules.check_participant_steps); run_replicas lands where run_sequential does, replica by replica,
    noise included. Before: 'work.draw(0): steps must be >= 1 for every client (client 1 has 0)'. A participant
    without a step is still refused, by name."""
    prob = random_quadratic(4, 3, seed=1, p=[0.1, 0.2, 0.3, 0.4])
    solvers = ALL_SOLVERS[:3]
    work, sampler = _IdleOutOfRound(), _IdleOutOfRound.sampler
    run = run_replicas(prob, "fednova", solvers, work, 4, sigma=0.5, replicas=2, seed=3, sampling=sampler)
    for r in range(2):
        ref = run_sequential(make_algorithm("fednova", solvers[0]), np.zeros(3),
                             noisy_grad_fn(prob, 0.5, 3, 2, r, work.local_steps, sampling=sampler), prob.p, work, 4,
                             solver_at=client_solvers(work, solvers), sampling=sampler, seed=3)
        np.testing.assert_allclose(run.params[r], ref.state.params, rtol=0, atol=1e-12)
        np.testing.assert_allclose(run.tau_eff, [d.tau_eff for d in ref.diagnostics], rtol=1e-13)
    assert run.mean_local_steps == 3.5  # the participants' steps: (2 + 4) / 2 and (3 + 5) / 2 in turn
    class OnlySteps:  # a schedule without draw, one solver: clients 1 and 3 never take part
        def local_steps(self, t):
            return np.array([1, 0, 2, 0])

    one = run_replicas(prob, "fednova", [sgd(0.03)], OnlySteps(), 2, sampling=lambda t: _IdleOutOfRound.sampler(0))
    assert one.tau_eff.tolist() == pytest.approx([0.4 * 1 + 0.6 * 2] * 2, rel=1e-15)
    with pytest.raises(ValueError, match=r"^work\.draw\(2\): steps must be >= 1 for every participant of the round "
                                         r"\(client 2 has 0: leave a client without work out of the round\)$"):
        run_replicas(prob, "fednova", solvers, _IdleOutOfRound(idle_participant=True), 4, sampling=sampler)

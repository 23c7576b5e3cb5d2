"""Engine semantics: what the batched engine and the per-client loop could get wrong
*identically* (so comparing the two cannot see it), checked against an independent loop
written from the paper (eq. 4) and REFERENCE, and the schedule/problem consistency check."""
from __future__ import annotations

import numpy as np
import pytest

from fedlib.algorithms import make_algorithm
from fedlib.data import synthetic
from fedlib.engines.batched import run_batched, run_reference
from fedlib.problems.logistic import LogisticProblem
from fedlib.rng import generator
from fedlib.sampling import sample_clients
from fedlib.schedules import FixedEpochs, RandomEpochs
from fedlib.server import momentum
from fedlib.solvers import LocalSolver, sgd

B = 8
TOTAL = [23, 40, 9, 31, 50]  # sizes given to the generator: train + test


@pytest.fixture(scope="module")
def prob():
    return LogisticProblem(synthetic(num_clients=5, seed=1, num_samples=TOTAL), l2=0.001)


# ----------------------------------------------------------------------------- finding
@pytest.mark.parametrize("engine", [run_batched, run_reference])
def test_an_epoch_schedule_for_other_client_sizes_is_refused(prob, engine):
    """tau_i = E ceil(n_i / B) must count the problem's own training sets: a FixedEpochs built
    from the generator's train + test sizes ran E = 1 as 1.0-1.5 epochs, silently."""
    algo = make_algorithm("fedavg", sgd(0.05))
    assert list(prob.num_samples) != TOTAL
    with pytest.raises(ValueError, match="other client sizes"):
        engine(algo, prob, FixedEpochs(TOTAL, B, 1), 1, batch_size=B)
    with pytest.raises(ValueError, match="other client sizes"):
        engine(algo, prob, RandomEpochs(TOTAL, B, 1, 2), 1, batch_size=B)
    engine(algo, prob, FixedEpochs(prob.num_samples, B, 1), 1, batch_size=B)  # its own sizes run


# ----------------------------------------------------------------------------- guards
def _softmax_grad(W, b, x, y, l2):
    z = x @ W + b
    z -= z.max(1, keepdims=True)
    P = np.exp(z)
    P /= P.sum(1, keepdims=True)
    P[np.arange(len(y)), y] -= 1
    P /= len(y)
    return x.T @ P + l2 * W, P.sum(0)


def _a_norm(tau, rho, alpha):
    """||a||_1 by brute force: the response of tau steps (eta = 1) to each unit gradient."""
    total = 0.0
    for j in range(tau):
        y = u = 0.0
        for k in range(tau):
            u = rho * u + (1.0 if k == j else 0.0)
            y -= u + alpha * y
        total -= y
    return total


def _independent(prob, name, lr_at, rho, mu, wd, sched, rounds, seed, sampling, q, beta):
    """One client after another from the paper: E epochs of fresh permutations, the last partial
    batch kept; u <- rho u + g + wd x + (c_bar - c_i), x <- x - eta (u + mu (x - x0)) with u = 0 at
    every round's start; FedNova x <- x - tau_eff sum w_i eta d_i with tau_eff = sum w_i ||a_i||_1
    (FedAvg: sum w_i Delta_i); SCAFFOLD c_i <- d_i - (c_bar - c_i), c_bar = sum over ALL clients
    p_j c_j; server momentum u <- beta u - D / eta, x <- x - eta u, u kept across rounds."""
    m, p = prob.num_clients, prob.p
    xs, ys = prob.dataset.train_x, prob.dataset.train_y
    W = np.zeros((prob.model.num_features, prob.model.num_classes))
    b = np.zeros(prob.model.num_classes)
    vr = name in ("scaffold", "fednova-vr")
    cW, cb = np.zeros((m,) + W.shape), np.zeros((m,) + b.shape)
    buf, losses = None, []
    for t in range(rounds):
        eta = lr_at(t)
        part = sample_clients(sampling, p, q, seed, t)
        taus = sched.local_steps(t)
        cbarW, cbarb = np.tensordot(p, cW, 1), p @ cb
        deltas, norms, new_c = [], [], []
        for i in part.clients:
            rng = generator(seed, "batches", t, int(i))
            n = len(ys[i])
            spe = -(-n // B)
            xw, xb = W.copy(), b.copy()
            uw, ub = np.zeros_like(W), np.zeros_like(b)
            corr = (cbarW - cW[i], cbarb - cb[i]) if vr else (0.0, 0.0)
            for k in range(int(taus[i])):
                if k % spe == 0:
                    perm = rng.permutation(n)
                idx = perm[(k % spe) * B:(k % spe + 1) * B]
                gw, gb = _softmax_grad(xw, xb, np.asarray(xs[i])[idx], np.asarray(ys[i])[idx], prob.l2)
                uw = rho * uw + gw + wd * xw + corr[0]
                ub = rho * ub + gb + wd * xb + corr[1]
                xw, xb = xw - eta * (uw + mu * (xw - W)), xb - eta * (ub + mu * (xb - b))
            deltas.append((xw - W, xb - b))
            norms.append(_a_norm(int(taus[i]), rho, eta * mu))
            if vr:
                d = [-dl / (eta * norms[-1]) for dl in deltas[-1]]
                new_c.append((i, d[0] - corr[0], d[1] - corr[1]))
        om, norms = part.weights, np.array(norms)
        if name.startswith("fednova"):
            tau_eff = om @ norms
            coef = tau_eff * om / norms
        else:
            coef = om
        chW = sum(c * d[0] for c, d in zip(coef, deltas))
        chb = sum(c * d[1] for c, d in zip(coef, deltas))
        for i, c1, c2 in new_c:
            cW[i], cb[i] = c1, c2
        if beta is None:
            W, b = W + chW, b + chb
        else:
            buf = (-chW / eta, -chb / eta) if buf is None else (beta * buf[0] - chW / eta, beta * buf[1] - chb / eta)
            W, b = W - eta * buf[0], b - eta * buf[1]
        losses.append(prob.loss({"W": W, "b": b}))  # evaluated on the global model after aggregation
    return {"W": W, "b": b}, losses


CASES = [  # name, rho, mu, weight decay, sampling, q, server momentum beta
    ("fednova", 0.9, 0.0, 1e-3, "full", None, 0.9),
    ("fednova", 0.8, 0.3, 1e-3, "with-replacement", 4, None),
    ("fedprox", 0.0, 0.5, 0.0, "uniform", 3, None),
    ("scaffold", 0.0, 0.0, 0.0, "uniform", 3, None),
    ("fednova-vr", 0.9, 0.0, 1e-3, "full", None, 0.5),
]


@pytest.mark.parametrize("name,rho,mu,wd,sampling,q,beta", CASES)
def test_both_engines_match_an_independent_loop(prob, name, rho, mu, wd, sampling, q, beta):
    """A round's semantics written out once more, independently of fedlib's solver, rule and
    variance code (lr decayed in round 2, random epochs 1..3)."""
    lr_at = (lambda t: 0.05 * (0.1 if t >= 2 else 1.0))
    sched = RandomEpochs(prob.num_samples, B, 1, 3, seed=4)
    algo = make_algorithm(name, LocalSolver(lr=0.05, momentum=rho, mu=mu, weight_decay=wd),
                          momentum(beta) if beta else None)
    kw = dict(batch_size=B, seed=3, sampling=sampling, clients_per_round=q, lr_at=lr_at)
    want, losses = _independent(prob, name, lr_at, rho, mu, wd, sched, 4, 3, sampling, q, beta)
    for engine in (run_batched, run_reference):
        run = engine(algo, prob, sched, 4, **kw)
        for k in ("W", "b"):
            np.testing.assert_allclose(run.params[k], want[k], rtol=0, atol=1e-12)
        np.testing.assert_allclose([h["train_loss"] for h in run.history], losses, rtol=1e-12)



def test_the_stacked_engine_refuses_an_epoch_schedule_of_other_sizes_or_batch():
    # the stacked engine (and its reference_run) took tau_i from any schedule: an "E = 1" schedule
    # built for other client sizes or another batch size ran partial extra epochs without a word
    from types import SimpleNamespace

    import torch

    from fedlib.engines.stacked import RunSpec, StackedEngine, reference_run
    from fedlib.models import vgg11

    rng = np.random.default_rng(0)
    data = SimpleNamespace(train_images=rng.integers(0, 256, (40, 32, 32, 3), dtype=np.uint8),
                           train_labels=rng.integers(0, 10, 40), test_images=rng.integers(0, 256, (8, 32, 32, 3),
                                                                                         dtype=np.uint8),
                           test_labels=rng.integers(0, 10, 8))
    clients = [np.arange(0, 25), np.arange(25, 40)]
    algo = make_algorithm("fednova", sgd(0.05))
    model = vgg11(width=0.03, seed=0)
    cases = {"other sizes": (FixedEpochs([30, 15], 8, 1), "client 0: 30 samples, the run's client has 25"),
             "other clients": (FixedEpochs([25, 15, 5], 8, 1), r"schedule is for 3 clients but run(s\[0\])?\.clients has 2$"),
             "other batch": (RandomEpochs([25, 15], 4, 1, 2, seed=0), "batch size 4, the engine's is 8")}
    for schedule, message in cases.values():
        run = RunSpec(algo, clients, schedule, seed=0)
        with pytest.raises(ValueError, match=message):
            StackedEngine(model, data, [run], rounds=1, batch_size=8, dtype=torch.float64)
        with pytest.raises(ValueError, match=message):
            reference_run(model, data, run, rounds=1, batch_size=8)
    eng = StackedEngine(model, data, [RunSpec(algo, clients, FixedEpochs([25, 15], 8, 1), seed=0)], rounds=1,
                        batch_size=8, dtype=torch.float64)
    assert eng.num_runs == 1

r"""Differential tests: every engine that claims a configuration runs the same trajectory.

A matrix of configurations — algorithms (FedAvg, FedProx, FedNova with each ``tau_eff``
policy, SCAFFOLD, VRLSGD, FedNova-VR), local solvers (SGD, momentum, prox, momentum + prox
with :math:`1-\alpha = \rho` exactly, a within-round step-size decay, decay + momentum, decay +
prox, decay + momentum + prox, weight decay), server optimizers (plain with a server lr, momentum,
Adam), fixed / random epochs, fixed steps beyond an epoch, random steps and wall-clock rounds with
jitter and stragglers, full participation and both sampling schemes, full and mini-batches, unequal
clients including one with a single sample, and a problem of one client — is run by

* ``reference``: :func:`fedlib.engines.batched.run_reference` (the per-client loop),
* ``batched``, ``batched-generic`` and ``batched-torch``: :func:`fedlib.engines.batched.run_batched`
  (numpy with its fused step; ``fast=False``, ``LocalSolver.update`` on the stack; torch on the CPU),
* ``distributed``: ``run_batched`` on two ranks, numpy and torch (threads meeting in the
  collectives of :class:`fedlib.distributed.Communicator`, no process group); both ranks checked,
* ``stacked``: :class:`fedlib.experiments.custom.TensorEngine` (the stacked engine's ``vmap``
  path, float64) with ``nn.Linear`` — the same multinomial logistic regression, every
  configuration of a problem stacked as one run of a single engine,
* ``client-optimizer``: the user's own torch loop with :class:`fedlib.optim.ClientOptimizer`
  (chapter 6) on ``nn.Linear`` and the same batches,
* the stacked engine's three network paths (``grouped``, ``gemm``, ``vmap``) on a small
  convolutional network and 2x2 images, against :func:`fedlib.engines.stacked.reference_run`
  (the per-client loop on the engine's batches) — a logistic model has no convolution to group,
* ``hand``: eq. (4) of the paper written out here, with numpy only: each client's local
  trajectory gives its gradients :math:`G_i` (weight decay and VR correction included), the
  change is :math:`x \leftarrow x - \tau_{\text{eff}}\sum_i w_i\eta d_i` with
  :math:`d_i = G_i a_i/\|a_i\|_1` and :math:`a_i` from the paper's closed forms — never the
  clients' own :math:`\Delta_i` — then the server optimizer and the control variates by their
  papers' formulas,

and all must end at the same parameters after three rounds (with a learning rate decayed in the
last one), with the same per-round participants, :math:`\tau_i`, :math:`\|a_i\|_1`,
:math:`\tau_{\text{eff}}`, :math:`w_i` and :math:`\chi^2`. The quadratic engine
(:func:`fedlib.engines.quadratic.run_replicas`) is checked the same way against the per-client
loop and eq. (4) by hand on quadratic clients.

Tolerance: everything runs in float64 and the engines differ only in the order of floating-point
additions (batched matrix products, the rank-order all-reduce, one model or a stack). With
parameters and gradients of order one, a few hundred operations per round and three rounds, the
rounding differences are a few 1e-16 (measured: at most 7e-16 on the logistic matrix);
``TOL = 1e-11`` leaves four orders of margin and is still eight orders below the size of one local
step (``lr`` 0.05 times gradients of order 0.1), which any real difference changes. Refusals are
checked to be clear errors, not silent differences.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fedlib.algorithms import make_algorithm
from fedlib.data.clients import FederatedDataset
from fedlib.distributed import LocalCommunicator, owned_clients
from fedlib.engines.batched import EpochBatcher, run_batched, run_reference
from fedlib.engines.quadratic import client_solvers, run_replicas
from fedlib.engines.reference import run_sequential
from fedlib.engines.stacked import RunSpec, StackedEngine, reference_run
from fedlib.experiments.custom import TensorEngine
from fedlib.optim import ClientOptimizer, parameters_of
from fedlib.problems.logistic import LogisticProblem
from fedlib.problems.quadratic import QuadraticProblem
from fedlib.rng import generator
from fedlib.sampling import sample_clients
from fedlib.schedules import FixedEpochs, FixedSteps, RandomEpochs, RandomSteps, WallClock
from fedlib.server import adam, momentum, plain
from fedlib.solvers import LocalSolver
from thread_ranks import on_ranks
from torch_threads import one_torch_thread  # noqa: F401 (autouse fixture)

TOL = 1e-11
ROUNDS = 3
LR = 0.05
D, C = 5, 3
SIZES = {"five": [1, 7, 12, 20, 4], "one": [9]}  # training samples per client


def lr_at(t):
    """The client lr of round ``t``: halved in the last round (server momentum divides by it)."""
    return LR * (0.5 if t >= 2 else 1.0)


# ============================================================================ the problems
def _dataset(key):
    rng = np.random.default_rng(11 if key == "five" else 12)
    xs = [rng.normal(size=(n, D)) for n in SIZES[key]]
    ys = [rng.integers(0, C, n) for n in SIZES[key]]
    m = len(xs)
    return FederatedDataset(xs, ys, [np.zeros((0, D))] * m, [np.zeros(0, dtype=np.int64)] * m, C)


@pytest.fixture(scope="module")
def problems():
    return {key: LogisticProblem(_dataset(key)) for key in SIZES}


_start = np.random.default_rng(5)
W0, B0 = 0.3 * _start.normal(size=(D, C)), 0.3 * _start.normal(size=C)  # a non-zero start


# ============================================================================ the matrix
@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    algorithm: str
    rho: float = 0.0             # local heavy-ball momentum
    mu: float = 0.0              # proximal coefficient
    wd: float = 0.0              # weight decay
    gamma: Optional[float] = None  # within-round step-size decay s_k = gamma^k
    server: str = "plain"        # plain | plain-half | momentum | adam
    schedule: str = "epochs-1"   # epochs-E | random | steps | random-steps | wallclock
    sampling: str = "full"
    q: Optional[int] = None
    tau_eff: object = None
    problem: str = "five"
    batch: int = 4
    seed: int = 3

    def solver(self):
        schedule = None if self.gamma is None else (lambda k, g=self.gamma: g ** k)
        return LocalSolver(LR, momentum=self.rho, mu=self.mu, weight_decay=self.wd, lr_schedule=schedule)

    def server_optimizer(self):
        return {"plain": plain(), "plain-half": plain(0.5), "momentum": momentum(0.9), "adam": adam(0.05)}[self.server]

    def algo(self):
        return make_algorithm(self.algorithm, self.solver(), self.server_optimizer(), tau_eff=self.tau_eff)

    def make_schedule(self, sizes):
        m = len(sizes)
        if self.schedule == "random-steps":
            return RandomSteps(m, 1, 6, seed=6)
        if self.schedule == "wallclock":  # jitter and stragglers: tau_i = max(1, floor(T s_i))
            return WallClock([3.0, 1.0, 2.0, 5.0, 1.5][:m], 2.0, jitter=0.3, straggler_prob=0.3, seed=4)
        if self.schedule == "random":
            return RandomEpochs(sizes, self.batch, 1, 3, seed=9)
        if self.schedule == "steps":  # several epochs of the 1-sample client, part of one of the 20-sample one
            return FixedSteps([3, 1, 4, 2, 5][:len(sizes)])
        return FixedEpochs(sizes, self.batch, int(self.schedule.split("-")[1]))


CASES = [
    Case("fedavg-sgd", "fedavg"),
    Case("fedavg-momentum-random", "fedavg", rho=0.9, schedule="random"),
    Case("fedavg-sgd-server-lr-fixed-steps", "fedavg", server="plain-half", schedule="steps"),
    Case("fedavg-momentum-prox-wd", "fedavg", rho=0.7, mu=0.5, wd=0.01, schedule="random"),
    Case("fedprox-with-replacement", "fedprox", mu=0.5, schedule="random", sampling="with-replacement", q=4),
    Case("fednova-sgd-random", "fednova", schedule="random"),
    Case("fednova-momentum-wd-server-momentum", "fednova", rho=0.9, wd=0.01, server="momentum", schedule="random"),
    Case("fednova-prox-local-steps-uniform", "fednova", mu=0.5, tau_eff="local_steps", schedule="random",
         sampling="uniform", q=3),
    # 1 - alpha = rho exactly (lr 0.05, mu 2): a_j = (n+1) rho^n, the closed form's ratio is 0/0
    Case("fednova-momentum-prox-degenerate", "fednova", rho=0.9, mu=2.0, schedule="epochs-2"),
    Case("fednova-decayed-fixed-tau-eff-uniform", "fednova", gamma=0.8, tau_eff=6.0, schedule="random",
         sampling="uniform", q=2),
    Case("fednova-decayed-momentum-adam", "fednova", rho=0.5, gamma=0.9, server="adam", schedule="random"),
    Case("fedprox-decayed-wallclock", "fedprox", mu=0.5, gamma=0.8, schedule="wallclock"),
    Case("fednova-vr-decayed-momentum-prox-random-steps", "fednova-vr", rho=0.5, mu=0.5, gamma=0.9,
         schedule="random-steps", sampling="uniform", q=4),
    Case("scaffold-sgd", "scaffold", schedule="epochs-2"),
    Case("scaffold-momentum-with-replacement", "scaffold", rho=0.5, schedule="random", sampling="with-replacement",
         q=3),
    Case("vrlsgd-random", "vrlsgd", schedule="random"),
    Case("vrlsgd-wd-uniform", "vrlsgd", wd=0.01, schedule="random", sampling="uniform", q=3),
    Case("fednova-vr-momentum-server-momentum-uniform", "fednova-vr", rho=0.9, server="momentum", schedule="random",
         sampling="uniform", q=3),
    Case("fednova-vr-momentum-prox-wd", "fednova-vr", rho=0.5, mu=0.5, wd=0.01, schedule="random"),
    # full batch (B above every n_i: the batched engine narrows its buffers to max n_i, the stack pads)
    # (tau_i = E_i there: random epochs keep the clients' tau_i apart)
    Case("fednova-momentum-full-batch", "fednova", rho=0.9, schedule="random", batch=64),
    Case("scaffold-prox-full-batch-with-replacement", "scaffold", mu=0.5, schedule="random",
         sampling="with-replacement", q=3, batch=64),
    # batches of one sample: tau_i = n_i
    Case("fednova-momentum-prox-batch-1", "fednova", rho=0.5, mu=0.5, batch=1),
    # one client: FedAvg, FedNova and SCAFFOLD are plain local training, the VR correction stays 0
    Case("one-client-fednova-momentum", "fednova", rho=0.9, wd=0.01, problem="one"),
    Case("one-client-fedavg-with-replacement", "fedavg", schedule="random", sampling="with-replacement", q=2,
         problem="one"),
    Case("one-client-scaffold-server-momentum", "scaffold", server="momentum", schedule="epochs-2", problem="one"),
]
IDS = [c.name for c in CASES]


def _kwargs(case):
    return dict(batch_size=case.batch, seed=case.seed, sampling=case.sampling, clients_per_round=case.q, lr_at=lr_at,
                params={"W": W0.copy(), "b": B0.copy()})


# ============================================================================ eq. (4) by hand
def a_vector(tau, rho, mu_eta, s):
    r"""The paper's :math:`a_i` (entry j weighs the gradient of local step j) for heavy-ball :math:`\rho`,
    prox :math:`\mu` and step sizes :math:`\eta s_k` (``mu_eta`` is :math:`\eta\mu`): a gradient taken at
    step j enters the buffer with weight 1, is :math:`\rho^{k-j}` of it at step k, moves the iterate by
    :math:`-\eta s_k\rho^{k-j}` there, and every later step l shrinks that by :math:`1-\eta s_l\mu`:

    .. math:: a_j = \sum_{k=j}^{\tau-1} s_k\,\rho^{k-j} \prod_{l=k+1}^{\tau-1}(1-\eta s_l\mu),

    i.e. the table of REFERENCE §1 (SGD 1, momentum :math:`(1-\rho^{\tau-j})/(1-\rho)`, prox
    :math:`(1-\alpha)^{\tau-1-j}`, decay :math:`s_j`, momentum + prox
    :math:`\sum_{k=0}^{n}(1-\alpha)^{n-k}\rho^k`, :math:`n = \tau-1-j`)."""
    shrink = [1.0 - mu_eta * s[k] for k in range(tau)]
    return np.array([sum(s[k] * rho ** (k - j) * np.prod(shrink[k + 1:]) for k in range(j, tau)) for j in range(tau)])


def test_a_vector_helper_is_the_papers_table():
    """The helper against REFERENCE §1's table in its ratio forms (tau = 4, rho = 0.5, alpha = 0.2)."""
    tau, rho, alpha = 4, 0.5, 0.2
    j = np.arange(tau)
    n = tau - 1 - j
    np.testing.assert_allclose(a_vector(tau, 0.0, 0.0, [1] * tau), np.ones(tau), rtol=1e-15)
    np.testing.assert_allclose(a_vector(tau, rho, 0.0, [1] * tau), (1 - rho ** (tau - j)) / (1 - rho), rtol=1e-15)
    np.testing.assert_allclose(a_vector(tau, 0.0, alpha, [1] * tau), (1 - alpha) ** n, rtol=1e-15)
    np.testing.assert_allclose(a_vector(tau, rho, alpha, [1] * tau),
                               ((1 - alpha) ** (n + 1) - rho ** (n + 1)) / (1 - alpha - rho), rtol=1e-14)
    # the momentum row's norm: (tau - rho (1 - rho^tau) / (1 - rho)) / (1 - rho) = (4 - 0.9375) / 0.5
    assert a_vector(tau, rho, 0.0, [1] * tau).sum() == pytest.approx(6.125, rel=1e-15)
    # 1 - alpha = rho: a_j = (n + 1) rho^n
    np.testing.assert_allclose(a_vector(tau, 0.9, 0.1, [1] * tau), (n + 1) * 0.9 ** n, rtol=1e-14)
    # decay and prox: a_j = s_j prod_{l > j} (1 - alpha s_l); s = 1, 1/2, 1/4, 1/8, alpha = 0.2
    s = [1, 0.5, 0.25, 0.125]
    np.testing.assert_allclose(a_vector(tau, 0.0, alpha, s), [1 * 0.9 * 0.95 * 0.975, 0.5 * 0.95 * 0.975,
                                                              0.25 * 0.975, 0.125], rtol=1e-15)


def _softmax_grad(theta, x, y):
    """Gradient of the mean cross-entropy of ``x @ W + b`` (``theta = [W; b]``, ``x`` with a column of ones)."""
    z = x @ theta
    z = z - z.max(axis=1, keepdims=True)
    prob = np.exp(z)
    prob /= prob.sum(axis=1, keepdims=True)
    prob[np.arange(len(y)), y] -= 1.0
    return x.T @ prob / len(y)


def _participants(case, p, t):
    """App. G's draws from the run's ``generator(seed, "sampling", round)``: (clients, omega)."""
    m = p.size
    if case.sampling == "full":
        return np.arange(m), p.copy()
    g = generator(case.seed, "sampling", t)
    if case.sampling == "with-replacement":
        clients, counts = np.unique(g.choice(m, size=case.q, replace=True, p=p), return_counts=True)
        return clients, counts / case.q
    clients = np.sort(g.choice(m, size=case.q, replace=False))
    return clients, p[clients] * m / case.q


def hand_run(case, prob):
    """``ROUNDS`` rounds of ``case`` from the paper's formulas (see the module docstring)."""
    xs = [np.concatenate([np.asarray(x), np.ones((len(x), 1))], axis=1) for x in prob.dataset.train_x]
    ys = [np.asarray(y) for y in prob.dataset.train_y]
    p = prob.p
    m = p.size
    sched = case.make_schedule(prob.num_samples)
    theta = np.concatenate([W0, B0[None]])
    c = np.zeros((m,) + theta.shape)     # control variates c_i (SCAFFOLD / VRLSGD)
    u_server = np.zeros_like(theta)      # server momentum buffer
    adam_m, adam_v = np.zeros_like(theta), np.zeros_like(theta)
    vr = case.algorithm in ("scaffold", "fednova-vr", "vrlsgd")
    records = []
    for t in range(ROUNDS):
        eta = lr_at(t)
        clients, omega = _participants(case, p, t)
        taus = np.asarray(sched.local_steps(t))[clients]
        c_bar = np.zeros_like(theta) if case.algorithm == "vrlsgd" else np.tensordot(p, c, 1)
        d, norms, raw_d, deltas = [], [], [], []
        for i, tau in zip(clients, taus):
            n = len(ys[i])
            spe = -(-n // case.batch)
            rng = generator(case.seed, "batches", t, int(i))
            corr = c_bar - c[i] if vr else 0.0
            s = [1.0 if case.gamma is None else case.gamma ** k for k in range(tau)]
            x, u, G, G_raw = theta.copy(), np.zeros_like(theta), [], []
            for k in range(tau):
                if k % spe == 0:
                    perm = rng.permutation(n)
                batch = perm[(k % spe) * case.batch:(k % spe + 1) * case.batch]
                g_raw = _softmax_grad(x, xs[i][batch], ys[i][batch])
                g = g_raw + case.wd * x + corr                    # column k of G_i
                G.append(g)
                G_raw.append(g - corr)                            # what the client's own objective gives
                u = case.rho * u + g                              # only to walk the trajectory
                x = x - eta * s[k] * (u + case.mu * (x - theta))
            a = a_vector(int(tau), case.rho, eta * case.mu, s)
            d.append(np.tensordot(a, np.array(G), 1) / a.sum())  # d_i = G_i a_i / ||a_i||_1
            raw_d.append(np.tensordot(a, np.array(G_raw), 1) / a.sum())
            norms.append(a.sum())
            deltas.append(-eta * a.sum() * d[-1])                 # Delta_i = -eta G_i a_i (VRLSGD's variates)
        norms = np.array(norms)
        if case.algorithm in ("fednova", "fednova-vr"):
            w = omega.copy()
            tau_eff = {None: omega @ norms, "local_steps": omega @ taus}.get(case.tau_eff, case.tau_eff)
        else:  # FedAvg's implicit pair (eq. 6)
            tau_eff = omega @ norms
            w = omega * norms / tau_eff
        change = -tau_eff * eta * np.tensordot(w, np.array(d), 1)   # eq. (4)
        if case.algorithm in ("scaffold", "fednova-vr"):           # c_i <- its raw normalised gradient
            for i, rd in zip(clients, raw_d):
                c[i] = rd
        elif case.algorithm == "vrlsgd":                           # c_i <- c_i - (Delta_i - Delta) / (eta tau_i)
            for i, dl, tau in zip(clients, deltas, taus):
                c[i] = c[i] - (dl - change) / (eta * tau)
        if case.server == "momentum":                              # official gmf: u <- beta u - D / eta
            u_server = 0.9 * u_server - change / eta
            theta = theta - eta * u_server
        elif case.server == "adam":                                # FedAdam, no bias correction
            adam_m = 0.9 * adam_m + 0.1 * change
            adam_v = 0.99 * adam_v + 0.01 * change ** 2
            theta = theta + 0.05 * adam_m / (np.sqrt(adam_v) + 1e-3)
        else:
            theta = theta + (0.5 if case.server == "plain-half" else 1.0) * change
        wn, on = w / w.sum(), omega / omega.sum()
        records.append({"clients": clients.tolist(), "local_steps": taus.tolist(), "a_norms": norms.tolist(),
                        "tau_eff": float(tau_eff), "weights": w.tolist(), "chi2": float(np.sum((on - wn) ** 2 / wn))})
    return {"W": theta[:-1], "b": theta[-1]}, records


# ============================================================================ the engines

def _history(run):
    return [{k: h[k] for k in ("clients", "local_steps", "a_norms", "tau_eff", "weights", "chi2")} for h in run.history]


def _from_stack(engine, r):
    prm = engine.params(r)
    params = {"W": prm["0.weight"].numpy().T.copy(), "b": prm["0.bias"].numpy().copy()}
    hist = []
    for records in engine.history:
        dg = records[r].diagnostics
        hist.append({"clients": dg.clients.tolist(), "local_steps": dg.local_steps.tolist(),
                     "a_norms": dg.a_norms.tolist(), "tau_eff": float(dg.tau_eff), "weights": dg.weights.tolist(),
                     "chi2": float(dg.chi2)})
    return params, hist


@pytest.fixture(scope="module")
def stacks(problems):
    """One TensorEngine per (problem, batch size), every case of it stacked as one run."""
    out = {}
    for key in {(c.problem, c.batch) for c in CASES}:
        prob, cases = problems[key[0]], [c for c in CASES if (c.problem, c.batch) == key]
        features = torch.as_tensor(prob.train_x)
        labels = torch.as_tensor(prob.train_y)
        bounds = prob.offsets
        clients = [np.arange(bounds[i], bounds[i + 1]) for i in range(prob.num_clients)]
        init = {"0.weight": torch.as_tensor(W0.T.copy()), "0.bias": torch.as_tensor(B0.copy())}
        runs = [RunSpec(c.algo(), clients, c.make_schedule(prob.num_samples), seed=c.seed, params=init, lr_at=lr_at,
                        sampling=c.sampling, clients_per_round=c.q, name=c.name) for c in cases]
        engine = TensorEngine(nn.Sequential(nn.Linear(D, C)), features, labels, runs, rounds=ROUNDS,
                              batch_size=key[1], dtype=torch.float64)
        engine.train()
        for r, c in enumerate(cases):
            out[c.name] = _from_stack(engine, r)
    return out


def client_optimizer_run(case, prob):
    """The user's own torch loop of chapter 6: ``nn.Linear``, ``F.cross_entropy(...).backward()``,
    :class:`fedlib.optim.ClientOptimizer` steps on the engines' batches, the round lr set on the
    parameter group between rounds, ``client_init`` / ``client_final`` / ``apply``."""
    model = nn.Linear(D, C).double()
    with torch.no_grad():
        model.weight.copy_(torch.as_tensor(W0.T))
        model.bias.copy_(torch.as_tensor(B0))
    algo, sched = case.algo(), case.make_schedule(prob.num_samples)
    server = algo.init(parameters_of(model), prob.num_clients)
    opt = ClientOptimizer(model.parameters(), algo.solver)
    batches = EpochBatcher(prob.num_samples, case.batch, case.seed)
    xs = [torch.as_tensor(np.asarray(x, dtype=np.float64)) for x in prob.dataset.train_x]
    ys = [torch.as_tensor(np.asarray(y, dtype=np.int64)) for y in prob.dataset.train_y]
    history = []
    for t in range(ROUNDS):
        opt.param_groups[0]["lr"] = lr_at(t)
        part = sample_clients(case.sampling, prob.p, case.q, case.seed, t)
        taus = sched.local_steps(t)
        updates = []
        for i in part.clients.tolist():
            opt.begin(algo.client_init(server, i))
            for k in range(int(taus[i])):
                idx = torch.as_tensor(batches.batch(t, i, k))
                opt.zero_grad()
                F.cross_entropy(model(xs[i][idx]), ys[i][idx]).backward()
                opt.step()
            updates.append(algo.client_final(server, i, opt.solver_state))
        server, dg = algo.apply(server, part, updates, opt.lr, prob.p)
        history.append({"clients": dg.clients.tolist(), "local_steps": dg.local_steps.tolist(),
                        "a_norms": dg.a_norms.tolist(), "tau_eff": float(dg.tau_eff), "weights": dg.weights.tolist(),
                        "chi2": float(dg.chi2)})
    weight, bias = server.params
    return {"W": weight.numpy().T.copy(), "b": bias.numpy().copy()}, history


def _engines(case, prob, stacks):
    algo, sched, kw = case.algo(), case.make_schedule(prob.num_samples), _kwargs(case)
    runs = {"reference": run_reference(algo, prob, sched, ROUNDS, **kw),
            "batched": run_batched(algo, prob, sched, ROUNDS, **kw),
            "batched-generic": run_batched(algo, prob, sched, ROUNDS, fast=False, **kw),
            "batched-torch": run_batched(algo, prob, sched, ROUNDS, backend="torch", device="cpu", **kw)}
    out = {name: (run.params, _history(run)) for name, run in runs.items()}
    if prob.num_clients >= 2:
        for backend in ("numpy", "torch"):
            ranks = on_ranks(2, lambda comm, backend=backend: run_batched(algo, prob, sched, ROUNDS, comm=comm,
                                                                          backend=backend, device="cpu", **kw))
            for r, run in enumerate(ranks):
                out[f"distributed-{backend}-rank-{r}"] = (run.params, _history(run))
    out["stacked"] = stacks[case.name]
    out["client-optimizer"] = client_optimizer_run(case, prob)
    out["hand"] = hand_run(case, prob)
    return out


def _assert_same_history(h1, h2, what):
    assert len(h1) == len(h2) == ROUNDS, what
    for t, (a, b) in enumerate(zip(h1, h2)):
        assert a["clients"] == b["clients"] and a["local_steps"] == b["local_steps"], (what, t)
        np.testing.assert_allclose(a["a_norms"], b["a_norms"], rtol=1e-13, err_msg=f"{what} round {t}")
        np.testing.assert_allclose(a["weights"], b["weights"], rtol=1e-13, err_msg=f"{what} round {t}")
        assert a["tau_eff"] == pytest.approx(b["tau_eff"], rel=1e-13), (what, t)
        assert a["chi2"] == pytest.approx(b["chi2"], rel=1e-10, abs=1e-14), (what, t)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_engine_runs_the_same_rounds(case, problems, stacks):
    prob = problems[case.problem]
    out = _engines(case, prob, stacks)
    want_params, want_hist = out["hand"]
    moved = max(np.abs(want_params["W"] - W0).max(), np.abs(want_params["b"] - B0).max())
    assert moved > 1e-3  # the rounds did something (a silent no-op would agree too)
    for name, (params, hist) in out.items():
        for k in ("W", "b"):
            np.testing.assert_allclose(params[k], want_params[k], rtol=0, atol=TOL,
                                       err_msg=f"{case.name}: {name} vs eq. (4) by hand, {k}")
        _assert_same_history(hist, want_hist, f"{case.name}: {name}")


def test_the_matrix_covers_what_it_claims(problems):
    """Participation really varies, the 1-sample client takes part, and the random schedules vary."""
    five = problems["five"]
    assert min(five.num_samples) == 1
    sampled = [c for c in CASES if c.sampling != "full" and c.problem == "five"]
    seen = {c.sampling: set() for c in sampled}
    repeated = False
    for c in sampled:
        for t in range(ROUNDS):
            clients, omega = _participants(c, five.p, t)
            seen[c.sampling].add(tuple(clients))
            repeated |= c.sampling == "with-replacement" and bool(np.any(omega * c.q > 1))
    assert all(len(v) > 1 for v in seen.values()) and repeated  # a client drawn twice (weight 2/q)
    sched = RandomEpochs(five.num_samples, 4, 1, 3, seed=9)
    assert len({tuple(sched.local_steps(t)) for t in range(ROUNDS)}) == ROUNDS
    # the two-rank runs split the clients 0-2 / 3-4, and in some round of a VR run one rank trains no one
    # (its clients' c_i must still enter c_bar)
    assert owned_clients(5, 2, 0).tolist() == [0, 1, 2] and owned_clients(5, 2, 1).tolist() == [3, 4]
    assert any(not set(_participants(c, five.p, t)[0].tolist()) & set(owned_clients(5, 2, r).tolist())
               for c in sampled if c.algorithm in ("scaffold", "vrlsgd", "fednova-vr")
               for t in range(ROUNDS) for r in range(2))
    # every case of several clients has clients of different tau_i in every round (else FedNova = FedAvg)
    for c in CASES:
        if c.problem == "five":
            sched = c.make_schedule(five.num_samples)
            assert all(np.ptp(sched.local_steps(t)) > 0 for t in range(ROUNDS)), c.name


# ============================================================================ the stacked engine's three paths
IMAGE_PATHS = {"grouped": dict(path="grouped"), "gemm": dict(path="grouped", conv="gemm"), "vmap": dict(path="vmap")}


def _image_net():
    """A small network the grouped path can stack: 2x2 RGB images, a 2x2 convolution, ReLU, a linear head."""
    torch.manual_seed(4)
    return nn.Sequential(nn.Conv2d(3, 4, 2), nn.ReLU(), nn.Flatten(), nn.Linear(4, C)).double()


@pytest.fixture(scope="module")
def images():
    rng = np.random.default_rng(8)
    n = sum(SIZES["five"])
    return dataclasses.make_dataclass("Images", ["train_images", "train_labels"])(
        rng.integers(0, 256, (n, 2, 2, 3), dtype=np.uint8), rng.integers(0, C, n))


def _image_runs(cases, problems):
    runs = []
    for c in cases:
        sizes = problems[c.problem].num_samples
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        clients = [np.arange(bounds[i], bounds[i + 1]) * 3 % bounds[-1] for i in range(len(sizes))]
        runs.append(RunSpec(c.algo(), clients, c.make_schedule(sizes), seed=c.seed, lr_at=lr_at, sampling=c.sampling,
                            clients_per_round=c.q, name=c.name))
    return runs


@pytest.fixture(scope="module")
def image_stacks(images, problems):
    """Per path, per case: the final model of one engine per batch size with every case stacked as a run."""
    out = {path: {} for path in IMAGE_PATHS}
    for batch in sorted({c.batch for c in CASES}):
        cases = [c for c in CASES if c.batch == batch]
        for path, options in IMAGE_PATHS.items():
            engine = StackedEngine(_image_net(), images, _image_runs(cases, problems), rounds=ROUNDS, batch_size=batch,
                                   dtype=torch.float64, augment=False, padding=0, **options)
            engine.train()
            for r, c in enumerate(cases):
                out[path][c.name] = ({n: t.clone() for n, t in engine.params(r).items()},
                                     [records[r].diagnostics for records in engine.history])
    return out


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_grouped_gemm_and_vmap_paths_equal_the_per_client_loop(case, images, problems, image_stacks):
    """The same matrix on the stacked engine's three network paths (one convolutional network, 2x2 RGB
    images, no augmentation) against the per-client loop fed the engine's batches."""
    run = _image_runs([case], problems)[0]
    ref = reference_run(_image_net(), images, run, rounds=ROUNDS, batch_size=case.batch, augment=False, padding=0)
    start = {n: t.detach() for n, t in _image_net().named_parameters()}
    assert max(float((ref.state.params[n] - start[n]).abs().max()) for n in start) > 1e-3
    for path in IMAGE_PATHS:
        params, diags = image_stacks[path][case.name]
        for n, want in ref.state.params.items():
            np.testing.assert_allclose(params[n].numpy(), want.numpy(), rtol=0, atol=TOL,
                                       err_msg=f"{case.name}: {path} vs the per-client loop, {n}")
        for t, (got, want) in enumerate(zip(diags, ref.diagnostics, strict=True)):
            assert got.clients.tolist() == want.clients.tolist(), (case.name, path, t)
            assert got.local_steps.tolist() == want.local_steps.tolist(), (case.name, path, t)
            np.testing.assert_allclose(got.a_norms, want.a_norms, rtol=1e-13, err_msg=f"{case.name} {path} {t}")
            np.testing.assert_allclose(got.weights, want.weights, rtol=1e-13, err_msg=f"{case.name} {path} {t}")
            assert got.tau_eff == pytest.approx(want.tau_eff, rel=1e-13)


# ============================================================================ refusals
def test_refused_configurations_are_clear_errors(problems):
    one, five = problems["one"], problems["five"]
    algo = make_algorithm("fednova", LocalSolver(LR))
    sched = FixedEpochs(one.num_samples, 4, 1)
    # two ranks for one client: every rank refuses before any collective
    with pytest.raises(ValueError, match="2 processes but only 1 clients"):
        on_ranks(2, lambda comm: run_batched(algo, one, sched, 1, batch_size=4, comm=comm))
    # the per-client loop has no collectives: a communicator is refused, not ignored
    with pytest.raises(ValueError, match="comm: run_reference does not support it"):
        run_reference(algo, five, FixedEpochs(five.num_samples, 4, 1), 1, batch_size=4, comm=LocalCommunicator())
    # a world of one rank is the one-process run, bit for bit
    s5 = FixedEpochs(five.num_samples, 4, 1)
    r1 = run_batched(algo, five, s5, 2, batch_size=4, comm=LocalCommunicator())
    r0 = run_batched(algo, five, s5, 2, batch_size=4)
    assert all(np.array_equal(r1.params[k], r0.params[k]) for k in ("W", "b"))


# ============================================================================ the quadratic engine
class _Work:
    """Fixed (or per-round listed) local work: ``draw(t) -> (steps, solver numbers)``."""

    def __init__(self, steps, choice):
        self.steps, self.choice = np.atleast_2d(steps), np.atleast_2d(choice)

    def draw(self, t):
        return self.steps[t % len(self.steps)].copy(), self.choice[t % len(self.choice)].copy()

    def local_steps(self, t):
        return self.draw(t)[0]


def hand_quadratic(prob, aggregation, solvers, work, rounds, x0, sampling="full", q=None, seed=0, tau_eff=None):
    r"""Eq. (4) on :math:`F_i = \frac12 x^\top H_i x - e_i^\top x` with full gradients, :math:`a_i` from
    :func:`a_vector` (each client's own solver; one base lr)."""
    x = np.array(x0, dtype=float)
    draws = Case("quadratic", "fednova", sampling=sampling, q=q, seed=seed)
    for t in range(rounds):
        steps, choice = work.draw(t)
        clients, omega = _participants(draws, prob.p, t)
        d, norms = [], []
        for i in clients:
            sol = solvers[choice[i]]
            tau = int(steps[i])
            s = [sol.step_size(k) / sol.lr for k in range(tau)]
            y, u, G = x.copy(), np.zeros_like(x), []
            for k in range(tau):
                gk = prob.H[i] @ y - prob.e[i]
                G.append(gk)
                u = sol.momentum * u + gk
                y = y - sol.lr * s[k] * (u + sol.mu * (y - x))
            a = a_vector(tau, sol.momentum, sol.lr * sol.mu, s)
            d.append(np.array(G).T @ a / a.sum())
            norms.append(a.sum())
        norms = np.array(norms)
        if aggregation == "fednova":
            w, te = omega, (omega @ norms if tau_eff is None else tau_eff)
        else:
            te = omega @ norms
            w = omega * norms / te
        x = x - te * solvers[0].lr * (w @ np.array(d))
    return x


QUAD_CASES = {
    # name: (m, solvers, steps per round (rows), solver numbers, sampling, q, tau_eff)
    "one-client": (1, [LocalSolver(0.04, momentum=0.9, mu=1.5)], [[6], [3]], [[0]], "full", None, None),
    "degenerate-momentum-prox": (3, [LocalSolver(0.05, momentum=0.9, mu=2.0), LocalSolver(0.05)],
                                 [[5, 2, 7], [1, 4, 3]], [[0, 1, 0], [1, 0, 0]], "full", None, None),
    "momentum-near-one": (3, [LocalSolver(0.01, momentum=0.999), LocalSolver(0.01, momentum=0.5)],
                          [[4, 9, 2]], [[0, 1, 0], [1, 0, 1]], "uniform", 2, None),
    "decayed-momentum": (4, [LocalSolver(0.05, momentum=0.6, lr_schedule=lambda k: 0.8 ** k), LocalSolver(0.05)],
                         [[3, 6, 1, 4], [2, 2, 5, 1]], [[0, 1, 0, 0], [0, 0, 1, 0]], "with-replacement", 3, None),
    "decayed-momentum-prox": (3, [LocalSolver(0.05, momentum=0.4, mu=1.0, lr_schedule=lambda k: 0.85 ** k),
                                  LocalSolver(0.05, mu=3.0)], [[7, 2, 4], [3, 5, 1]], [[0, 1, 0], [1, 0, 0]], "full",
                              None, None),
    "fixed-tau-eff": (4, [LocalSolver(0.05, mu=0.7), LocalSolver(0.05, momentum=0.3)], [[3, 6, 1, 4]],
                      [[1, 0, 1, 0]], "uniform", 3, 2.5),
}


# FedAvg has no tau_eff to fix (refused: test_quadratic_engine_refusals)
QUAD_PARAMS = [(name, aggregation) for name in sorted(QUAD_CASES) for aggregation in ("fedavg", "fednova")
               if aggregation == "fednova" or QUAD_CASES[name][-1] is None]


@pytest.mark.parametrize("name,aggregation", QUAD_PARAMS)
def test_quadratic_engine_equals_the_loop_and_eq4_by_hand(name, aggregation):
    m, solvers, steps, choice, sampling, q, tau_eff = QUAD_CASES[name]
    rng = np.random.default_rng(m)
    A = rng.normal(size=(m, 3, 3))
    H = np.einsum("mij,mkj->mik", A, A) / 3 + 0.5 * np.eye(3)
    prob = QuadraticProblem(H, rng.normal(size=(m, 3)), rng.dirichlet(np.ones(m)) if m > 1 else np.ones(1))
    work, rounds, x0 = _Work(steps, choice), 4, np.array([0.4, -0.3, 1.0])
    eng = run_replicas(prob, aggregation, solvers, work, rounds, x0=x0, seed=2, sampling=sampling, clients_per_round=q,
                       tau_eff=tau_eff)
    loop = run_sequential(make_algorithm(aggregation, solvers[0], tau_eff=tau_eff), x0, prob.grad_fn(), prob.p, work,
                          rounds, solver_at=client_solvers(work, solvers), sampling=sampling, clients_per_round=q,
                          seed=2)
    want = hand_quadratic(prob, aggregation, solvers, work, rounds, x0, sampling, q, seed=2, tau_eff=tau_eff)
    assert np.abs(want - x0).max() > 1e-3
    np.testing.assert_allclose(eng.params[0], want, rtol=0, atol=TOL)
    np.testing.assert_allclose(loop.state.params, want, rtol=0, atol=TOL)
    np.testing.assert_allclose(eng.tau_eff, [dg.tau_eff for dg in loop.diagnostics], rtol=1e-13)
    np.testing.assert_allclose(eng.chi2, [dg.chi2 for dg in loop.diagnostics], rtol=1e-10, atol=1e-14)


def test_quadratic_engine_refusals():
    """What run_replicas does not do is refused by name, never run differently."""
    prob = QuadraticProblem(np.stack([np.eye(2)] * 2), np.ones((2, 2)), np.array([0.5, 0.5]))
    work = _Work([[2, 3]], [[0, 0]])
    with pytest.raises(ValueError, match="weight decay is not supported by run_replicas"):
        run_replicas(prob, "fednova", [LocalSolver(0.1, weight_decay=0.01)], work, 1)
    with pytest.raises(ValueError, match="aggregation.*scaffold"):
        run_replicas(prob, "scaffold", [LocalSolver(0.1)], work, 1)
    with pytest.raises(ValueError, match="tau_eff: only FedNova"):
        run_replicas(prob, "fedavg", [LocalSolver(0.1)], work, 1, tau_eff=2.0)

r"""Speed of the batched engine against per-client Python loops (``python -m fedlib bench synthetic``).

Three engines run the *same* run — same data (Synthetic(1,1), 30 clients, data seed 0),
same algorithm (FedNova with local SGD, lr 0.02, batch 20), same epochs, same
mini-batches (the indices of :func:`fedlib.engines.batched.minibatch_indices`, drawn from
``generator(seed, "batches", round, client)``) — from the same starting point, and must
end with the same parameters (checked to 1e-10 of the largest parameter, float64):

``batched``
    :func:`fedlib.engines.batched.run_batched`: all clients advance together, one
    batched numpy gradient per local step (the engine being measured).
``simulator``
    :func:`run_simulator`: the loop of common simulators (Flower examples, FedML, the
    FedProx/FedNova reference code, LEAF) — for each client a ``torch.nn.Linear(60, 10)``
    (float64) loaded with the global parameters (``load_state_dict``), a fresh
    ``torch.optim.SGD``, and for each local step: the client's mini-batch, forward,
    ``F.cross_entropy``, ``backward()``, ``opt.step()``, ``zero_grad()``; then
    :math:`\Delta_i`, :math:`\tau_i`, and the server aggregation
    (:func:`fedlib.rule.aggregate`, FedNova or FedAvg) in Python. torch uses the threads
    the environment gives it (``OMP_NUM_THREADS``; nothing is forced).
``reference`` (the *lean* loop)
    :func:`fedlib.engines.batched.run_reference`: the same per-client, per-step loop with
    a hand-written numpy gradient (no autograd, no optimizer or module objects) — the
    fastest a per-client Python loop gets here, so the hardest baseline.

Two ratios are reported: ``speedup_vs_simulator_wall`` (batched vs the simulator-style
loop: the answer to "how much faster than the way simulators do it") and
``speedup_wall`` (batched vs the lean numpy loop), each with its CPU-time counterpart.
Each repetition runs ``rounds`` rounds with each engine, alternating, and the round time
of an engine is the mean over its rounds; the reported time is the median over
repetitions (other processes on a shared machine inflate single measurements). Training
only by default (no evaluation of the global loss between rounds: the same cost for all
engines), CPU time is reported next to wall time.

Why the ratio against the lean loop is bounded on this data
-----------------------------------------------------------
A lock-step engine advances all clients one local step at a time, so a round costs
:math:`\max_i \tau_i` batched steps, while a loop costs :math:`\sum_i \tau_i` client
steps. Synthetic's sizes are lognormal(4, 2) + 50: with data seed 0 one client holds
53% of the samples, and :math:`\sum_i\tau_i / \max_i\tau_i \approx 1.9` — the longest
client is the critical path, and most batched steps run a single client. At equal cost
per step that is the most batching can win; against the lean loop (a few µs per step
of pure numpy) the ratio stays near it. Against the simulator-style loop the ratio is
larger because each of its steps also pays the per-step overhead of autograd, the
``nn.Module`` call, the optimizer and the batch indexing (tens of µs against a few µs
of arithmetic on a 20 × 60 batch) — a cost the batched engine pays only once per
lock-step. In numbers, speedup ≈ bound × (loop µs per client step / batched µs per
batched step); the benchmark reports the bound, the per-step costs of each engine and
both ratios (measured results with provenance: ``data/results/bench/``), and
(``equal_sizes=True``) the same total data split equally, where the bound is the number
of clients.

Threads: with ``OMP_NUM_THREADS=2`` torch's OpenMP workers gain nothing on 20 × 60
batches, and on a machine shared with other processes they wait for each other at
every operation: the simulator's rounds then vary by an order of magnitude and its CPU
time exceeds its wall time (its CPU-time ratio is then not meaningful). Its round time
with ``OMP_NUM_THREADS=1`` is the stable, and lower, figure.
"""
from __future__ import annotations

import statistics
import time
from typing import Optional

import numpy as np

from ._validate import check_flag, check_int
from .algorithms import FederatedAlgorithm, make_algorithm
from .data import synthetic
from .engines.batched import EpochBatcher, _check_common, run_batched, run_reference
from .problems.logistic import LogisticProblem
from .rule import aggregate
from .sampling import full_participation
from .schedules import check_participant_steps, make_epoch_schedule, parse_epochs, round_local_steps
from .solvers import sgd

__all__ = ["bench_synthetic", "run_simulator", "format_bench"]

ENGINES = ("batched", "simulator", "reference")


def _time_engine(fn, *args, **kwargs):
    c0, t0 = time.process_time(), time.perf_counter()
    run = fn(*args, **kwargs)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return run, wall, cpu


# ----------------------------------------------------------------------------- the simulator-style loop
def run_simulator(algorithm: FederatedAlgorithm, problem: LogisticProblem, schedule, rounds: int, *,
                  batch_size: int, seed: int = 0, params: Optional[dict] = None, evaluate: bool = False) -> dict:
    r"""The run of :func:`fedlib.engines.batched.run_batched` (full participation, local
    SGD, FedAvg or FedNova, plain server), written the way common simulators write it.

    For each round, for each client: a float64 ``torch.nn.Linear(d, C)`` loaded with the
    global parameters (``load_state_dict``), a fresh ``torch.optim.SGD(lr)``, and per local
    step: the client's mini-batch (the indices of :class:`~fedlib.engines.batched.EpochBatcher`,
    the same as the other engines), forward, ``F.cross_entropy`` (plus
    :math:`\tfrac{\lambda}{2}\|W\|^2` when the problem has ``l2``), ``backward()``,
    ``opt.step()``, ``zero_grad()``. The client reports :math:`\Delta_i` and
    :math:`\tau_i` (:math:`\|a_i\|_1 = \tau_i` for SGD); the server aggregates with
    :func:`fedlib.rule.aggregate` and adds the change (times the plain server's ``server_lr``).
    Returns the final parameters ``{"W", "b"}`` (numpy) and, with ``evaluate``,
    :meth:`fedlib.problems.logistic.LogisticProblem.metrics` per round.

    The arguments are checked as :func:`~fedlib.engines.batched.run_batched` checks them
    (``rounds``, ``batch_size``, ``seed``, the schedule's clients, batch size and whole
    :math:`\tau_i \ge 1`, the starting ``params``).

    ``algorithm`` must be FedAvg or FedNova with plain local SGD (no momentum, proximal term, weight decay,
    ``lr_schedule`` or step of a subclass's own) and the
    plain server optimizer (``ValueError`` otherwise).

    It ends on the batched engine's parameters (same mini-batches, float64):

    >>> from fedlib.algorithms import make_algorithm
    >>> from fedlib.data import synthetic
    >>> from fedlib.schedules import FixedEpochs
    >>> prob = LogisticProblem(synthetic(num_clients=3, seed=0))
    >>> algo, sched = make_algorithm("fednova", sgd(0.02)), FixedEpochs(prob.num_samples, 20, 1)
    >>> sim = run_simulator(algo, prob, sched, 2, batch_size=20)
    >>> fast = run_batched(algo, prob, sched, 2, batch_size=20, evaluate=False)
    >>> sorted(sim), all(np.allclose(sim["params"][k], fast.params[k], rtol=0, atol=1e-12) for k in ("W", "b"))
    (['metrics', 'params'], True)
    """
    import torch
    import torch.nn.functional as F

    rounds, batch_size, seed, _ = _check_common(algorithm, problem, schedule, rounds, batch_size, "full", None, seed)
    evaluate = check_flag("evaluate", evaluate)  # as run_batched checks it ("no" is truthy)
    solver = algorithm.solver
    if algorithm.aggregation not in ("fedavg", "fednova") or algorithm.variance is not None:
        raise ValueError(f"run_simulator runs FedAvg and FedNova only, got {algorithm.name!r}")
    # by the fields, not the name: LocalSolver(lr, lr_schedule=...) was named "sgd", and its schedule ignored; plain
    # SGD under another label (LocalSolver(lr, name="plain")) runs
    if (solver.momentum > 0 or solver.mu > 0 or solver.weight_decay or solver.lr_schedule is not None
            or not solver.builtin_step):
        raise ValueError("run_simulator runs plain local SGD only (no momentum, proximal term, weight decay, "
                         "within-round step-size schedule or step of its own)")
    if algorithm.server.name != "plain":
        raise ValueError("run_simulator applies the aggregate directly (plain server) only")
    lr = float(solver.lr)
    l2 = float(problem.l2)
    d, C = problem.model.num_features, problem.model.num_classes
    # each client's data as tensors once, like a per-client data set
    xs = [torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64).reshape(-1, d)) for x in problem.dataset.train_x]
    ys = [torch.from_numpy(np.asarray(y, dtype=np.int64)) for y in problem.dataset.train_y]
    batcher = EpochBatcher(problem.num_samples, batch_size, seed)
    part = full_participation(problem.p)
    x0 = problem.init_params() if params is None else params
    problem.model._check_params(x0, stacked=False)
    glob = {"W": np.array(x0["W"], dtype=np.float64), "b": np.array(x0["b"], dtype=np.float64)}
    server_state = algorithm.server.init(glob)
    model = torch.nn.Linear(d, C, dtype=torch.float64)
    metrics = []
    for t in range(rounds):
        steps_all = round_local_steps(schedule, t, problem.num_clients, "the problem")
        check_participant_steps(steps_all, part.clients, t)
        global_state = {"weight": torch.from_numpy(np.ascontiguousarray(glob["W"].T)),
                        "bias": torch.from_numpy(glob["b"])}
        deltas, taus = [], []
        for c in part.clients:
            c = int(c)
            model.load_state_dict(global_state)
            opt = torch.optim.SGD(model.parameters(), lr=lr)
            tau = int(steps_all[c])
            for k in range(tau):
                idx = torch.from_numpy(batcher.batch(t, c, k))
                out = model(xs[c][idx])
                loss = F.cross_entropy(out, ys[c][idx])
                if l2:
                    loss = loss + 0.5 * l2 * (model.weight * model.weight).sum()
                loss.backward()
                opt.step()
                opt.zero_grad()
            with torch.no_grad():
                deltas.append({"W": model.weight.detach().numpy().T - glob["W"],
                               "b": model.bias.detach().numpy() - glob["b"]})
            taus.append(tau)
        taus = np.asarray(taus, dtype=np.int64)
        agg = aggregate(deltas, part.weights, taus.astype(np.float64), algorithm.aggregation, algorithm.tau_eff, taus)
        glob, server_state = algorithm.server.update(agg.change, server_state, glob)
        if evaluate:
            metrics.append(problem.metrics(glob))
    return {"params": glob, "metrics": metrics}


def _torch_warmup():
    """One tiny forward/backward/step so torch's lazy initialisation is not timed."""
    import torch
    import torch.nn.functional as F

    m = torch.nn.Linear(3, 2, dtype=torch.float64)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    F.cross_entropy(m(torch.zeros(4, 3, dtype=torch.float64)), torch.zeros(4, dtype=torch.int64)).backward()
    opt.step()
    opt.zero_grad()
    return torch.get_num_threads()


def _params_of(run) -> dict:
    return run["params"] if isinstance(run, dict) else run.params


# ----------------------------------------------------------------------------- the benchmark
def bench_synthetic(*, rounds: int = 5, repeat: int = 3, epochs: str = "2", algorithm: str = "fednova",
                    lr: float = 0.02, batch_size: int = 20, alpha: float = 1.0, beta: float = 1.0,
                    num_clients: int = 30, data_seed: int = 0, seed: int = 0, equal_sizes: bool = False,
                    evaluate: bool = False, progress=None) -> dict:
    r"""Measure the three engines; return ``{"config": ..., "results": ...}`` (see the module docstring).

    The simulator-style loop runs FedAvg and FedNova only; for the other algorithms it is
    skipped (its results are ``None``). ``progress`` (optional) is called with a short
    text after each measurement.

    The run: ``rounds`` (:math:`\ge 1`) timed ``repeat`` (:math:`\ge 1`) times; ``epochs`` a count (``"2"``) or an
    inclusive range (``"2-5"``, random epochs) as :func:`fedlib.schedules.parse_epochs` reads it; ``algorithm`` a name
    of :data:`fedlib.algorithms.ALGORITHMS` with local SGD of step ``lr`` (so ``"fedprox"`` is refused); ``batch_size``
    :math:`B`; Synthetic(``alpha``, ``beta``) with ``num_clients`` clients drawn from ``data_seed``; ``seed`` the run
    seed (batches, random epochs). ``equal_sizes`` splits the same total number of samples equally among the clients;
    ``evaluate`` computes the metrics every round (both flags, default ``False``).

    A quick run (the times depend on the machine; the engines' agreement and the step counts do not):

    >>> out = bench_synthetic(rounds=1, repeat=1, num_clients=3)
    >>> len(out["config"]["engines"]), out["results"]["max_abs_param_diff"] < 1e-12
    (3, True)
    >>> r = out["results"]
    >>> r["client_steps_per_round"], r["max_local_steps"], round(r["critical_path_bound"], 2)
    (22.0, 10.0, 2.2)
    """
    # whole numbers >= 1 (repeat=True ran one repetition and recorded "repeat": true; 2.5 failed in range())
    rounds = check_int("rounds", rounds, minimum=1)
    repeat = check_int("repeat", repeat, minimum=1)
    check_flag("equal_sizes", equal_sizes)  # "no" is truthy: it would have run (and recorded) True
    check_flag("evaluate", evaluate)
    lo, hi = parse_epochs(epochs)
    data_seed = check_int("data_seed", data_seed)  # synthetic() would name it 'seed', the run's own seed here
    ds = synthetic(alpha, beta, num_clients=num_clients, seed=data_seed)
    if equal_sizes:  # the same total number of samples, split equally
        total = int(sum(ds.meta["total_samples"]))
        ds = synthetic(alpha, beta, num_clients=num_clients, seed=data_seed, num_samples=max(1, total // num_clients))
    prob = LogisticProblem(ds)
    sched = make_epoch_schedule(prob.num_samples, batch_size, (lo, hi), seed=seed)
    algo = make_algorithm(algorithm, sgd(lr))  # local SGD (fedprox would need mu > 0: refused)
    kw = dict(batch_size=batch_size, seed=seed, evaluate=evaluate)
    with_sim = algo.aggregation in ("fedavg", "fednova") and algo.variance is None
    engines = [("batched", run_batched), ("reference", run_reference)]
    torch_threads = None
    if with_sim:
        engines.insert(1, ("simulator", run_simulator))
        torch_threads = _torch_warmup()

    per = {name: {"wall": [], "cpu": []} for name, _ in engines}
    diffs = {name: 0.0 for name, _ in engines if name != "batched"}
    size = 0.0  # max |params| of the batched engine's runs
    for r in range(repeat):
        runs = {}
        for name, fn in engines:
            run, wall, cpu = _time_engine(fn, algo, prob, sched, rounds, **kw)
            runs[name] = run
            per[name]["wall"].append(wall / rounds)
            per[name]["cpu"].append(cpu / rounds)
            if progress:
                progress(f"repeat {r + 1}/{repeat}: {name} {1e3 * wall / rounds:.1f} ms/round")
        ref = _params_of(runs["batched"])
        # the check is relative to the parameters' size (summing in another order moves ~1e-16 of it), so it
        # does not depend on the scale lr gives the parameters; the differences are reported as they are
        size = max(size, *(float(np.max(np.abs(ref[k]))) for k in ("W", "b")))
        for name in diffs:
            other = _params_of(runs[name])
            diffs[name] = max(diffs[name], *(float(np.max(np.abs(ref[k] - other[k]))) for k in ("W", "b")))
    for name, diff in diffs.items():
        if not diff <= 1e-10 * size:
            raise AssertionError(f"the engines disagree: max |params difference| batched vs {name} = {diff:g}, "
                                 f"more than 1e-10 of max |params| = {size:g}")
    steps = [h["local_steps"] for h in runs["batched"].history]
    sum_tau = float(np.mean([sum(s) for s in steps]))
    max_tau = float(np.mean([max(s) for s in steps]))

    def med(name, kind="wall"):
        return float(statistics.median(per[name][kind]))

    results = {
        "batched_round_s": med("batched"),
        "reference_round_s": med("reference"),
        "speedup_wall": med("reference") / med("batched"),  # vs the lean numpy loop
        "batched_round_cpu_s": med("batched", "cpu"),
        "reference_round_cpu_s": med("reference", "cpu"),
        "speedup_cpu": med("reference", "cpu") / med("batched", "cpu"),
        "simulator_round_s": med("simulator") if with_sim else None,
        "simulator_round_cpu_s": med("simulator", "cpu") if with_sim else None,
        "speedup_vs_simulator_wall": med("simulator") / med("batched") if with_sim else None,
        "speedup_vs_simulator_cpu": med("simulator", "cpu") / med("batched", "cpu") if with_sim else None,
        "client_steps_per_round": sum_tau,
        "max_local_steps": max_tau,
        "critical_path_bound": sum_tau / max_tau,
        "reference_us_per_client_step": 1e6 * med("reference", "cpu") / sum_tau,
        "simulator_us_per_client_step": 1e6 * med("simulator", "cpu") / sum_tau if with_sim else None,
        "batched_us_per_batched_step": 1e6 * med("batched", "cpu") / max_tau,
        "max_abs_param_diff": max(diffs.values()),
        "max_abs_param_diff_reference": diffs["reference"],
        "max_abs_param_diff_simulator": diffs.get("simulator"),
        "raw": per,
    }
    config = {
        "problem": "synthetic-logistic", "alpha": alpha, "beta": beta, "num_clients": num_clients,
        "data_seed": data_seed, "equal_sizes": bool(equal_sizes), "num_samples": prob.num_samples.tolist(),
        "algorithm": algorithm, "solver": "sgd", "lr": lr, "batch_size": batch_size, "epochs": epochs,
        "rounds": rounds, "repeat": repeat, "seed": seed, "evaluate": bool(evaluate),
        "engines": ["batched (numpy, fast path)"]
        + (["simulator (per client, per step: torch nn.Linear float64, autograd, optim.SGD)"] if with_sim else [])
        + ["reference (lean numpy loop: run_sequential, per client, per step)"],
        "torch_threads": torch_threads,
    }
    return {"config": config, "results": results}


def format_bench(results: dict) -> str:
    """Human-readable lines for the command line, from the ``results`` of :func:`bench_synthetic`
    (the simulator's lines only where it ran).

    >>> r = {"batched_round_s": 0.002, "batched_round_cpu_s": 0.002, "simulator_round_s": None,
    ...      "reference_round_s": 0.003, "reference_round_cpu_s": 0.003, "speedup_wall": 1.5, "speedup_cpu": 1.5,
    ...      "client_steps_per_round": 22.0, "max_local_steps": 10.0, "critical_path_bound": 2.2,
    ...      "reference_us_per_client_step": 136.4, "batched_us_per_batched_step": 200.0, "max_abs_param_diff": 1e-17}
    >>> print(format_bench(r))
    batched engine :     2.00 ms/round (cpu 2.00 ms)
    lean numpy loop:     3.00 ms/round (cpu 3.00 ms; hand-written numpy gradient per step)
    speedup vs lean numpy loop:     1.50x wall, 1.50x cpu
    critical path  : sum tau_i / max tau_i = 22 / 10 = 2.20 (lock-step bound at equal per-step cost)
    per step (cpu) : lean loop 136.4 us per client step, batched 200.0 us per batched step
    same numbers   : max |params difference| = 1.0e-17
    """
    r = results
    lines = [f"batched engine : {1e3 * r['batched_round_s']:8.2f} ms/round (cpu {1e3 * r['batched_round_cpu_s']:.2f} ms)"]
    if r.get("simulator_round_s") is not None:
        lines += [
            f"simulator loop : {1e3 * r['simulator_round_s']:8.2f} ms/round "
            f"(cpu {1e3 * r['simulator_round_cpu_s']:.2f} ms; torch nn.Linear + autograd + optim.SGD per step)",
        ]
    lines += [
        f"lean numpy loop: {1e3 * r['reference_round_s']:8.2f} ms/round "
        f"(cpu {1e3 * r['reference_round_cpu_s']:.2f} ms; hand-written numpy gradient per step)",
    ]
    if r.get("speedup_vs_simulator_wall") is not None:
        lines.append(f"speedup vs simulator loop : {r['speedup_vs_simulator_wall']:8.2f}x wall, "
                     f"{r['speedup_vs_simulator_cpu']:.2f}x cpu")
    lines += [
        f"speedup vs lean numpy loop: {r['speedup_wall']:8.2f}x wall, {r['speedup_cpu']:.2f}x cpu",
        f"critical path  : sum tau_i / max tau_i = {r['client_steps_per_round']:.0f} / {r['max_local_steps']:.0f} "
        f"= {r['critical_path_bound']:.2f} (lock-step bound at equal per-step cost)",
    ]
    step = f"per step (cpu) : lean loop {r['reference_us_per_client_step']:.1f} us per client step"
    if r.get("simulator_us_per_client_step") is not None:
        step += f", simulator {r['simulator_us_per_client_step']:.1f} us per client step"
    step += f", batched {r['batched_us_per_batched_step']:.1f} us per batched step"
    lines += [step, f"same numbers   : max |params difference| = {r['max_abs_param_diff']:.1e}"]
    return "\n".join(lines)

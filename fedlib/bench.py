r"""Speed of the batched engine against the per-client Python loop (``python -m fedlib bench synthetic``).

Both engines run the *same* run — same data (Synthetic(1,1), 30 clients, data seed 0),
same algorithm (FedNova with local SGD, lr 0.02, batch 20), same epochs, same
mini-batches and seeds — from the same starting point, and must end with the same
parameters (checked to 1e-10). Each repetition runs ``rounds`` rounds with each engine,
alternating, and the round time of an engine is the mean over its rounds; the reported
time is the median over repetitions (other processes on a shared machine inflate single
measurements). Training only by default (no evaluation of the global loss between
rounds: the same cost for both engines), CPU time is reported next to wall time.

Why the ratio is bounded on this data
-------------------------------------
A lock-step engine advances all clients one local step at a time, so a round costs
:math:`\max_i \tau_i` batched steps, while the loop costs :math:`\sum_i \tau_i` client
steps. Synthetic's sizes are lognormal(4, 2) + 50: with data seed 0 one client holds
53% of the samples, and :math:`\sum_i\tau_i / \max_i\tau_i \approx 1.9` — the longest
client is the critical path, and most batched steps run a single client. The benchmark
reports this bound, and (``equal_sizes=True``) the same total data split equally,
where the bound is the number of clients.
"""
from __future__ import annotations

import statistics
import time
import numpy as np

from .algorithms import make_algorithm
from .data import synthetic
from .engines.batched import run_batched, run_reference
from .problems.logistic import LogisticProblem
from .schedules import make_epoch_schedule, parse_epochs
from .solvers import sgd

__all__ = ["bench_synthetic"]


def _time_engine(fn, *args, **kwargs):
    c0, t0 = time.process_time(), time.perf_counter()
    run = fn(*args, **kwargs)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return run, wall, cpu


def bench_synthetic(*, rounds: int = 5, repeat: int = 3, epochs: str = "2", algorithm: str = "fednova",
                    lr: float = 0.02, batch_size: int = 20, alpha: float = 1.0, beta: float = 1.0,
                    num_clients: int = 30, data_seed: int = 0, seed: int = 0, equal_sizes: bool = False,
                    evaluate: bool = False, progress=None) -> dict:
    """Measure both engines; return ``{"config": ..., "results": ...}`` (see the module docstring).

    ``progress`` (optional) is called with a short text after each measurement.
    """
    if rounds < 1 or repeat < 1:
        raise ValueError(f"rounds and repeat must be >= 1, got rounds={rounds}, repeat={repeat}")
    lo, hi = parse_epochs(epochs)
    ds = synthetic(alpha, beta, num_clients=num_clients, seed=data_seed)
    if equal_sizes:  # the same total number of samples, split equally
        total = int(sum(ds.meta["total_samples"]))
        ds = synthetic(alpha, beta, num_clients=num_clients, seed=data_seed, num_samples=max(1, total // num_clients))
    prob = LogisticProblem(ds)
    sched = make_epoch_schedule(prob.num_samples, batch_size, (lo, hi), seed=seed)
    algo = make_algorithm(algorithm, sgd(lr))  # local SGD (fedprox would need mu > 0: refused)
    kw = dict(batch_size=batch_size, seed=seed, evaluate=evaluate)

    per = {"batched": {"wall": [], "cpu": []}, "reference": {"wall": [], "cpu": []}}
    max_diff = 0.0
    for r in range(repeat):
        runs = {}
        for name, fn in (("batched", run_batched), ("reference", run_reference)):
            run, wall, cpu = _time_engine(fn, algo, prob, sched, rounds, **kw)
            runs[name] = run
            per[name]["wall"].append(wall / rounds)
            per[name]["cpu"].append(cpu / rounds)
            if progress:
                progress(f"repeat {r + 1}/{repeat}: {name} {1e3 * wall / rounds:.1f} ms/round")
        max_diff = max(max_diff, *(float(np.max(np.abs(runs["batched"].params[k] - runs["reference"].params[k])))
                                   for k in ("W", "b")))
    if not max_diff <= 1e-10:
        raise AssertionError(f"the engines disagree: max |params difference| = {max_diff:g}")
    steps = [h["local_steps"] for h in runs["batched"].history]
    sum_tau = float(np.mean([sum(s) for s in steps]))
    max_tau = float(np.mean([max(s) for s in steps]))

    def med(xs):
        return float(statistics.median(xs))

    results = {
        "batched_round_s": med(per["batched"]["wall"]),
        "reference_round_s": med(per["reference"]["wall"]),
        "speedup_wall": med(per["reference"]["wall"]) / med(per["batched"]["wall"]),
        "batched_round_cpu_s": med(per["batched"]["cpu"]),
        "reference_round_cpu_s": med(per["reference"]["cpu"]),
        "speedup_cpu": med(per["reference"]["cpu"]) / med(per["batched"]["cpu"]),
        "client_steps_per_round": sum_tau,
        "max_local_steps": max_tau,
        "critical_path_bound": sum_tau / max_tau,
        "reference_us_per_client_step": 1e6 * med(per["reference"]["cpu"]) / sum_tau,
        "batched_us_per_batched_step": 1e6 * med(per["batched"]["cpu"]) / max_tau,
        "max_abs_param_diff": max_diff,
        "raw": per,
    }
    config = {
        "problem": "synthetic-logistic", "alpha": alpha, "beta": beta, "num_clients": num_clients,
        "data_seed": data_seed, "equal_sizes": bool(equal_sizes), "num_samples": prob.num_samples.tolist(),
        "algorithm": algorithm, "solver": "sgd", "lr": lr, "batch_size": batch_size, "epochs": epochs,
        "rounds": rounds, "repeat": repeat, "seed": seed, "evaluate": bool(evaluate),
        "engines": ["batched (numpy, fast path)", "reference (run_sequential, per client, per step)"],
    }
    return {"config": config, "results": results}


def format_bench(results: dict) -> str:
    """Human-readable lines for the command line."""
    r = results
    return "\n".join([
        f"batched engine : {1e3 * r['batched_round_s']:8.2f} ms/round (cpu {1e3 * r['batched_round_cpu_s']:.2f} ms)",
        f"per-client loop: {1e3 * r['reference_round_s']:8.2f} ms/round "
        f"(cpu {1e3 * r['reference_round_cpu_s']:.2f} ms)",
        f"speedup        : {r['speedup_wall']:8.2f}x wall, {r['speedup_cpu']:.2f}x cpu",
        f"critical path  : sum tau_i / max tau_i = {r['client_steps_per_round']:.0f} / {r['max_local_steps']:.0f} "
        f"= {r['critical_path_bound']:.2f} (lock-step bound at equal per-step cost)",
        f"per step (cpu) : loop {r['reference_us_per_client_step']:.1f} us per client step, batched "
        f"{r['batched_us_per_batched_step']:.1f} us per batched step",
        f"same numbers   : max |params difference| = {r['max_abs_param_diff']:.1e}",
    ])


__all__ += ["format_bench"]

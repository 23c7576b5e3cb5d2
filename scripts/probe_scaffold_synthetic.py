"""Probes behind chapter 10, part 5 (SCAFFOLD vs FedNova-VR on Synthetic(1,1) with the
paper's E = 2): which change makes SCAFFOLD's rounds fail or recover. Prints tables; the
numbers quoted in notes come from this script. Chapter 10, part 6 explains what these probes
find (the round linearised at the optimum: SCAFFOLD's net correction is one round stale).

    python scripts/probe_scaffold_synthetic.py                   # all probes (~5 min on 2 cores)
    python scripts/probe_scaffold_synthetic.py --only steps l2   # some of them
    python scripts/probe_scaffold_synthetic.py --rounds 2 --seeds 0 --full-batch-rounds 1   # smoke test

Probes:
  steps       the real tau_i (6..582), the largest client capped at 78 / 40 steps, doubled
  l2          the same with l2 = 0.01 (every local objective strongly convex, bounded below)
  full-batch  exact gradients through the reference loop (no mini-batch noise), real tau_i
  quadratic   spectral radii of the closed-form round maps on quadratics with the same p_i, tau_i
  momentum    local momentum 0.9 (FedAvg, FedNova, momentum + VR, hybrid), random epochs 1..5
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from fedlib.algorithms import make_algorithm
from fedlib.cli.common import int_at_least, positive_float
from fedlib.engines.reference import run_sequential
from fedlib.experiments import acceleration as A
from fedlib.experiments import synthetic as S
from fedlib.problems import random_quadratic
from fedlib.problems.logistic import _grad
from fedlib.schedules import FixedSteps, steps_per_epoch
from fedlib.solvers import sgd

PROBES = ("steps", "l2", "full-batch", "quadratic", "momentum")


def step_cases(problem, cap_low: int = 40, cap_high: int = 78) -> dict:
    tau = 2 * steps_per_epoch(problem.num_samples, 20)
    big = tau == tau.max()
    return {"E = 2": tau, f"all capped at {cap_high}": np.minimum(tau, cap_high),
            f"largest client capped at {cap_low}": np.where(big, cap_low, tau),
            "largest client doubled": np.where(big, 2 * tau.max(), tau)}


def end_losses(problem, steps, names, lr, seeds, rounds) -> dict:
    tail = max(1, rounds // 10)
    return {n: float(np.median(A.logistic_losses(problem, n, lr, FixedSteps(steps), seeds, rounds)[:, -tail:],
                               axis=1).mean()) for n in names}


def probe_steps(l2: float, args) -> None:
    problem = S.make_problem(l2=l2)
    for label, steps in step_cases(problem).items():
        out = end_losses(problem, steps, ("fedavg", "scaffold", "fednova-vr"), args.lr, args.seeds, args.rounds)
        print(f"l2={l2:g}  {label:32s}", "  ".join(f"{k} {v:.3f}" for k, v in out.items()), flush=True)


def probe_full_batch(args) -> None:
    problem = S.make_problem()
    xs = [np.asarray(x, dtype=np.float64) for x in problem.dataset.train_x]
    ys = [np.asarray(y, dtype=np.int64) for y in problem.dataset.train_y]

    def grad(params, client, round_index, step):
        return _grad(params["W"], params["b"], xs[client], ys[client], problem.l2)

    steps = 2 * steps_per_epoch(problem.num_samples, 20)
    for name in ("scaffold", "fednova-vr"):
        t0 = time.perf_counter()
        run = run_sequential(make_algorithm(name, sgd(args.lr)), problem.init_params(), grad, problem.p,
                             FixedSteps(steps), args.full_batch_rounds, metric_fn=lambda x, t: problem.loss(x))
        every = max(1, args.full_batch_rounds // 5)
        print(f"full batch  {name:10s} loss every {every} rounds:", [round(v, 3) for v in run.metrics[::every]],
              f"({time.perf_counter() - t0:.0f} s)", flush=True)


def probe_quadratic(args) -> None:
    problem = S.make_problem()
    steps = 2 * steps_per_epoch(problem.num_samples, 20)
    for eig in ((0.05, 0.5), (0.1, 1.0), (0.5, 2.0)):
        q = random_quadratic(problem.num_clients, 5, seed=0, p=problem.p, eig_range=eig)
        for lr in (0.005, 0.02):
            radii = {n: A.variant_radius(q, n, lr, steps) for n in ("fedavg", "fednova", "scaffold", "fednova-vr")}
            print(f"quadratic eig {eig} lr {lr}: spectral radius", "  ".join(f"{k} {v:.4f}" for k, v in radii.items()))


def probe_momentum(args) -> None:
    problem = S.make_problem()
    setting = next(s for s in S.SETTINGS if s.name == "random")
    for name in ("fedavg-momentum", "fednova-momentum", "fednova-vr-momentum", "fednova-hybrid"):
        L = np.array([A.logistic_losses(problem, name, args.lr, setting.schedule(problem, seed), [seed], args.rounds)[0]
                      for seed in args.seeds])
        print(f"momentum 0.9, random epochs 1..5, {name:20s} final losses", np.round(L[:, -1], 3).tolist(), flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # bad values were tracebacks (--rounds 0, --seeds -1) or ran silently (--lr -1 or nan, --full-batch-rounds 0)
    ap.add_argument("--only", nargs="+", choices=PROBES, default=list(PROBES))
    ap.add_argument("--lr", type=positive_float, default=0.02,
                    help="client learning rate of steps, l2, full-batch and momentum (default 0.02; the quadratic "
                         "probe uses its own 0.005 and 0.02)")
    ap.add_argument("--rounds", type=int_at_least(1), default=60,
                    help="rounds of the mini-batch probes steps, l2 and momentum (default 60)")
    ap.add_argument("--seeds", type=int_at_least(0), nargs="+", default=[0, 1], help="run seeds (default 0 1)")
    ap.add_argument("--full-batch-rounds", type=int_at_least(1), default=25,
                    help="rounds of the full-batch probe (default 25)")
    args = ap.parse_args(argv)
    if "steps" in args.only:
        probe_steps(0.0, args)
    if "l2" in args.only:
        probe_steps(1e-2, args)
    if "full-batch" in args.only:
        probe_full_batch(args)
    if "quadratic" in args.only:
        probe_quadratic(args)
    if "momentum" in args.only:
        probe_momentum(args)


if __name__ == "__main__":
    main()

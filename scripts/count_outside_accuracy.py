"""How often ``fedlib.theory.quadratic_vr_count_outside`` miscounts, by phase step: random 25-row
VR round maps (4 clients, d = 5; SCAFFOLD and FedNova-VR; plain, proximal, momentum and both; lr
0.04 or 0.3) counted on circles halfway between neighbouring eigenvalue moduli (8 per map), against
every eigenvalue of the dense matrix. Prints one JSON line: counts, how many were wrong at each
phase step, and how many were wrong although two phase steps agreed.

    python scripts/count_outside_accuracy.py --seeds 0 200      # the numbers in the docstring (~3 min)
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from fedlib import theory as T
from fedlib.problems import random_quadratic
from fedlib.rng import generator

STEPS = (0.8, 0.4, 0.2)
SOLVERS = [(0.0, 0.0, None), (0.3, 0.0, None), (0.0, 0.6, 7.5), (0.2, 0.5, None)]  # mu, momentum, tau_eff


def radii_between(vals: np.ndarray, count: int = 6) -> np.ndarray:
    """Radii halfway between neighbouring distinct moduli of ``vals``, below the smallest and above the largest."""
    mod = np.unique(np.round(np.abs(vals), 9))
    mod = mod[mod > 1e-6]
    mids = (mod[:-1] + mod[1:]) / 2
    picks = np.linspace(0, mids.size - 1, min(count, mids.size)).round().astype(int)
    return np.concatenate([mids[picks], [mod[0] / 2, mod[-1] * 1.1]])


def draw_case(seed: int):
    """Quadratic (4 clients, d = 5), local steps and lr of ``seed``, from stream
    ``fedlib.rng.generator(seed, "count_outside_cases")``. The quadratic's own seed is drawn
    from the full 63-bit range: drawn from 0..99 (as before), the 200 seeds of the docstring's count
    had only 83 distinct quadratics."""
    rng = generator(seed, "count_outside_cases")
    q = random_quadratic(4, 5, seed=int(rng.integers(2 ** 63)), p=rng.dirichlet(np.ones(4)))
    steps = rng.integers(1, 30, size=4)
    return q, steps, float(rng.choice([0.04, 0.3]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs=2, default=[0, 20], metavar=("FIRST", "STOP"))
    args = parser.parse_args(argv)
    if not 0 <= args.seeds[0] < args.seeds[1]:
        parser.error(f"--seeds must be FIRST < STOP, both >= 0, got {args.seeds}")
    wrong = {s: 0 for s in STEPS}
    agreed_wrong = {f"{a}/{b}": 0 for a, b in zip(STEPS, STEPS[1:])}
    counts, cases = 0, []
    for seed in range(*args.seeds):
        for algorithm in ("scaffold", "fednova-vr"):
            for mu, momentum, tau_eff in SOLVERS:
                q, steps, lr = draw_case(seed)   # the same map for every algorithm and solver of a seed
                tau_eff = tau_eff if algorithm == "fednova-vr" else None
                M, _ = T.quadratic_vr_round_map(q.H, q.e, q.p, steps, lr, algorithm, mu=mu, momentum=momentum,
                                                tau_eff=tau_eff)
                every = np.abs(np.linalg.eigvals(M))
                for radius in radii_between(every):
                    truth = int(np.sum(every > radius))
                    got = {s: T.quadratic_vr_count_outside(q.H, q.p, steps, lr, algorithm, radius, mu=mu,
                                                           momentum=momentum, tau_eff=tau_eff,
                                                           max_phase_step=s).outside for s in STEPS}
                    counts += 1
                    for s in STEPS:
                        if got[s] != truth:
                            wrong[s] += 1
                            cases.append({"seed": seed, "algorithm": algorithm, "mu": mu, "momentum": momentum,
                                          "radius": float(radius), "max_phase_step": s, "counted": got[s],
                                          "true": truth})
                    for a, b in zip(STEPS, STEPS[1:]):
                        agreed_wrong[f"{a}/{b}"] += got[a] == got[b] != truth
    print(json.dumps({"seeds": args.seeds, "counts": counts, "wrong": wrong, "wrong_although_agreeing": agreed_wrong,
                      "wrong_cases": cases}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

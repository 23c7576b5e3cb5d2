"""Every eigenvalue of the VR round (SCAFFOLD, FedNova-VR) linearised at the optimum of
Synthetic(1,1): the whole spectrum behind chapter 10, part 6, by a dense eigensolver.

The chapter finds the leading eigenvalues by Arnoldi and those nearest 1 by shift-invert in
seconds; neither bounds FedNova-VR's spectral radius (hundreds of eigenvalues crowd next
to 1). This script forms the operator ``fedlib.theory.quadratic_vr_round_operator`` (17,019
rows for the chapter's problem: 549 non-flat directions x (1 + 30 clients)) as a dense matrix
and asks LAPACK for all its eigenvalues: about 2.3 GB, formed in 31 s; the eigenvalues did not
come within 2 h 15 min on 2 cores here (a 4,743-row matrix of the same structure takes 44 s on
one core: the cost grows as rows cubed, and worse once the matrix leaves the caches), so run it
on a many-core machine. It writes, per algorithm, ``<name>.npz`` (the eigenvalues) and
``<name>.json`` (provenance, the setting, the radius, the leading and the nearest-1 eigenvalues)
into ``--out`` (default ``data/results/linearised/``), for
``fedlib.experiments.acceleration.read_vr_spectrum``.

    python scripts/vr_spectrum.py                          # both algorithms, the chapter's setting (hours)
    python scripts/vr_spectrum.py --algorithms fednova-vr
    python scripts/vr_spectrum.py --lr 0.005 --out /tmp/lr0.005   # for chapter 10 run with synthetic_lrs=[0.005]
    python scripts/vr_spectrum.py --smoke --out /tmp/s     # a 3-client problem in seconds
"""
from __future__ import annotations

import argparse
import io
import sys
import time
from pathlib import Path

import numpy as np

from fedlib._io import atomic_write
from fedlib.experiments import acceleration as A
from fedlib.results import make_provenance, make_result, write_result


def chapter_problem(lr: float):
    """Chapter 10, part 6: Synthetic(1,1), 30 clients, local GD for E = 2 epochs of batch 20 at ``lr``."""
    from fedlib.experiments.synthetic import make_problem
    from fedlib.schedules import steps_per_epoch

    problem = make_problem()
    return problem, 2 * steps_per_epoch(problem.num_samples, 20), lr, "Synthetic(1,1), data seed 0, E = 2, batch 20"


def smoke_problem():
    """Chapter 10's small Synthetic(0,0) problem: 3 clients, d = 5, 3 classes (seconds)."""
    from fedlib.data import synthetic
    from fedlib.problems.logistic import LogisticProblem

    problem = LogisticProblem(synthetic(0, 0, num_clients=3, dim=5, num_classes=3, num_samples=[300, 500, 900], seed=1))
    return problem, np.array([2, 4, 40]), 1.0, "Synthetic(0,0), 3 clients (smoke test)"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algorithms", nargs="+", default=["fednova-vr", "scaffold"],
                        choices=["scaffold", "fednova-vr"])
    parser.add_argument("--lr", type=float, default=0.02,
                        help="client learning rate (default 0.02: chapter 10's synthetic_lrs[-1] in both profiles)")
    parser.add_argument("--out", type=Path, default=Path("data/results/linearised"))
    parser.add_argument("--smoke", action="store_true", help="a 3-client Synthetic(0,0) problem (seconds)")
    args = parser.parse_args(argv)
    if not (args.lr > 0 and np.isfinite(args.lr)):
        parser.error(f"--lr must be a finite number > 0, got {args.lr}")
    if args.smoke and args.lr != 0.02:
        parser.error("--smoke runs the 3-client problem at its own lr 1.0; drop --lr")
    problem, steps, lr, setting = smoke_problem() if args.smoke else chapter_problem(args.lr)
    t0 = time.perf_counter()
    optimum = A.logistic_optimum(problem)
    print(f"x*: {optimum.newton_steps} Newton steps in {time.perf_counter() - t0:.1f} s; "
          f"{optimum.basis.shape[1]} non-flat directions", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.algorithms:
        started = time.time()
        M = A.linearised_vr_matrix(problem, optimum, name, lr, steps)
        formed = time.time()
        print(f"{name}: matrix {M.shape[0]} x {M.shape[1]} formed in {formed - started:.1f} s; eigenvalues ...",
              flush=True)
        vals = np.linalg.eigvals(M)
        del M
        finished = time.time()
        summary = A.spectrum_summary(vals)
        print(f"{name}: eigenvalues in {finished - formed:.0f} s; radius {summary['radius']:.10f}", flush=True)
        buffer = io.BytesIO()
        np.savez_compressed(buffer, eigenvalues=vals)
        atomic_write(args.out / f"{name}.npz", buffer.getvalue())
        config = {"algorithm": name, "lr": lr, "local_steps": np.asarray(steps).tolist(), "problem": setting,
                  "rows": int(vals.size)}
        summary |= {"matrix_seconds": round(formed - started, 3), "eigvals_seconds": round(finished - formed, 3)}
        write_result(args.out / f"{name}.json", make_result(config, None, make_provenance(started, finished),
                                                             kind="linearised-spectrum", summary=summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())

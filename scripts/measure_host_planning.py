"""Host time of the stacked engine's round set-up: ``StackedEngine._plan`` + ``_load``.

Table 1's split (the shipped labels of all 50,000 images, random pixels), ``--runs`` runs of 16
clients, the benchmark's round (E = 2, the longest client ``--steps`` local steps), a tiny width on
the CPU: the numpy planning (batch plans, crop offsets, dropout keys, step tables) that a GPU
round waits for before its first step. Prints milliseconds per round.

    python scripts/measure_host_planning.py --runs 4 --rounds 3
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from fedlib.algorithms import make_algorithm
from fedlib.data.cifar10 import cifar10_random_images
from fedlib.engines.stacked import RunSpec, StackedEngine
from fedlib.experiments.cifar10 import _round_steps, _train_only, official_partition
from fedlib.models import vgg11
from fedlib.schedules import FixedSteps
from fedlib.solvers import momentum_sgd


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=4, help="runs stacked (default 4)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds planned and loaded (default 3)")
    parser.add_argument("--steps", type=int, default=100, help="local steps of the longest client (default 100)")
    args = parser.parse_args()
    for name in ("runs", "rounds", "steps"):  # --steps 0 or less planned a round of one step per client in silence
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    data = cifar10_random_images()
    parts = official_partition(data.train_labels)
    tau = _round_steps(np.array([len(c) for c in parts]), 32, 2, args.steps)
    algo = make_algorithm("fedavg", momentum_sgd(0.02, weight_decay=1e-4))
    specs = [RunSpec(algo, parts, FixedSteps(tau), seed=r, params=vgg11(width=0.03, seed=r)) for r in range(args.runs)]
    engine = StackedEngine(vgg11(width=0.03, seed=0), _train_only(data), specs, rounds=args.rounds, device="cpu")
    print(f"{args.runs} runs x 16 clients, local steps {tau.min()}..{tau.max()}")
    for t in range(args.rounds):
        t0 = time.perf_counter()
        plan = engine._plan(t)
        t1 = time.perf_counter()
        engine._load(plan, t)
        t2 = time.perf_counter()
        print(f"round {t}: plan {1e3 * (t1 - t0):.1f} ms, load {1e3 * (t2 - t1):.1f} ms")


if __name__ == "__main__":
    main()

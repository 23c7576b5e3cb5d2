"""Time one local step of ``fedlib.optim.ClientOptimizer`` against ``torch.optim.SGD`` in the same run.

Both take the same step (heavy ball, weight decay) on copies of one model; only ``opt.step()`` is
timed (forward and backward are the same for both), as the median over ``--steps`` steps, in
alternating repeats. Prints the two medians and their ratio (ClientOptimizer / torch.optim.SGD).

    python scripts/bench_client_optimizer.py --width 0.5 --steps 20 --repeat 2
"""
from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch
import torch.nn.functional as F

from fedlib.models import vgg11
from fedlib.optim import ClientOptimizer, parameters_of
from fedlib.rng import seed_sequence, torch_generator
from fedlib.solvers import momentum_sgd


def median_step_seconds(opt, net, x, y, steps: int) -> float:
    times = []
    for _ in range(steps):
        opt.zero_grad()
        F.cross_entropy(net(x), y).backward()
        t0 = time.perf_counter()
        opt.step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)  # sorted(times)[steps // 2] was the upper middle value (the max at 2 steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--width", type=float, default=0.5, help="VGG-11 width multiplier (default 0.5)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per repeat (default 20)")
    parser.add_argument("--repeat", type=int, default=2, help="repeats, each timing both optimizers (default 2)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the model, the batch and dropout (default 0)")
    args = parser.parse_args()
    for name in ("steps", "repeat", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if not 0 < args.width < float("inf"):
        parser.error(f"--width must be a finite number > 0, got {args.width}")
    if args.seed < 0:
        parser.error(f"--seed must be >= 0, got {args.seed}")
    torch.set_num_threads(args.threads)
    with torch.random.fork_rng(devices=[]):  # dropout draws from the global RNG: a forked copy, seeded from the run
        torch.manual_seed(int(seed_sequence(args.seed, "dropout").generate_state(1)[0]))
        run(args)


def run(args) -> None:
    net = vgg11(width=args.width, seed=args.seed)
    print(f"VGG-11 width {args.width}: {sum(p.numel() for p in net.parameters()):,} parameters, batch 32, "
          f"{args.threads} threads, torch {torch.__version__}")
    g = torch_generator(args.seed, "bench-batch")
    x, y = torch.randn(32, 3, 32, 32, generator=g), torch.randint(0, 10, (32,), generator=g)
    solver = momentum_sgd(0.02, 0.9, weight_decay=1e-4)
    ours, theirs = copy.deepcopy(net), copy.deepcopy(net)
    opt = ClientOptimizer(ours.parameters(), solver)
    opt.begin(solver.init(parameters_of(ours)))
    ref = torch.optim.SGD(theirs.parameters(), lr=0.02, momentum=0.9, weight_decay=1e-4)
    for r in range(args.repeat):
        a = median_step_seconds(opt, ours, x, y, args.steps)
        b = median_step_seconds(ref, theirs, x, y, args.steps)
        print(f"repeat {r}: ClientOptimizer.step {a * 1e3:.2f} ms, torch.optim.SGD.step {b * 1e3:.2f} ms, "
              f"ratio {a / b:.2f}")


if __name__ == "__main__":
    main()

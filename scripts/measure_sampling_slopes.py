"""Chapter 8, part 3 (client sampling): the numbers of the comment under its slope asserts, over problem seeds.

    PYTHONPATH=. .venv/bin/python scripts/measure_sampling_slopes.py        # ci sizes, problem seeds 0-9

Per problem seed s (also the chapter seed: base_setup(seed=s), sampling seeds run_seeds(s, seeds)), the
chapter's sampling_big cells (m = 4 * copies, q in --clients, T in --rounds) and the log-log slopes of
(1/T) sum ||grad F||^2 against q tau T and against q_eff tau T, each with its standard error propagated from
the cells' standard errors: a least-squares slope is sum_k w_k log e_k with w_k = (l_k - mean l) / sum (l - mean l)^2,
l_k the log budget, so its variance is sum_k w_k^2 (se_k / e_k)^2. Also the asserts on the equal budgets q tau T:
the largest / smallest error among the cells with T >= k q (--min-rounds-per-client, the chapter's 16), the same
over all cells, and the cells left out against the largest compared one of their budget. The full profile's sizes:
--copies 64 --clients 4 16 64 --rounds 256 1024 4096 --seeds 4 --replicas 8 (about a minute a problem seed).
"""
from __future__ import annotations

import argparse

import numpy as np

from fedlib.cli.common import int_at_least, nonneg_float
from fedlib.experiments import speedup as S
from fedlib.experiments.quadratic import loglog_slope


def slope_stderr(budgets, rows) -> float:
    """Standard error of the log-log slope against ``budgets`` from the cells' relative standard errors."""
    logs = np.log(np.asarray(budgets, dtype=float))
    weights = (logs - logs.mean()) / np.sum((logs - logs.mean()) ** 2)
    relative = np.array([r.stderr / r.mean_grad2 for r in rows])
    return float(np.sqrt(np.sum((weights * relative) ** 2)))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem-seeds", type=int_at_least(0), nargs="+", default=list(range(10)))
    ap.add_argument("--copies", type=int_at_least(1), default=16, help="the chapter's population_copies (m = 4 * copies)")
    ap.add_argument("--clients", type=int_at_least(1), nargs="+", default=[4, 16], help="the chapter's clients_per_round")
    ap.add_argument("--rounds", type=int_at_least(1), nargs="+", default=[256, 1024], help="the chapter's rounds_speedup")
    ap.add_argument("--seeds", type=int_at_least(2), default=3, help="the chapter's sampling_seeds")
    ap.add_argument("--replicas", type=int_at_least(1), default=4)
    ap.add_argument("--min-rounds-per-client", type=nonneg_float, default=16.0,
                    help="the chapter's min_rounds_per_client k: equal budgets compared among the cells with T >= k q")
    args = ap.parse_args(argv)
    if len(set(args.clients)) < 2 and len(set(args.rounds)) < 2:  # a slope needs two budgets q tau T
        ap.error(f"--clients {' '.join(map(str, args.clients))} and --rounds {' '.join(map(str, args.rounds))}: "
                 f"give two different q or two different T (a slope needs two budgets)")
    found, groups = [], []
    for ps in args.problem_seeds:
        base, work = S.base_setup(seed=ps, dim=10, spread=1.0)
        rows = S.sampling_grid(base, work, [args.copies], args.clients, args.rounds, sigma=3.0, lr_scale=0.1,
                               replicas=args.replicas, seeds=args.seeds, seed=ps)
        budget = [r.budget for r in rows]
        budget_eff = [r.effective_clients * r.tau_tilde * r.rounds for r in rows]
        errors = [r.mean_grad2 for r in rows]
        found.append((loglog_slope(budget, errors), slope_stderr(budget, rows),
                      loglog_slope(budget_eff, errors), slope_stderr(budget_eff, rows)))
        k = args.min_rounds_per_client
        compared = [ratio for _, _, ratio in S.equal_budget_ratios(rows, min_rounds_per_client=k)]
        every = [ratio for _, _, ratio in S.equal_budget_ratios(rows)]
        left_out = [ratio for _, _, ratio in S.left_out_ratios(rows, k)]
        groups.append((max(compared, default=np.nan), max(every, default=np.nan), min(left_out, default=np.nan)))
        print(f"problem seed {ps}: slope {found[-1][0]:.4f} (s.e. {found[-1][1]:.4f}) against q tau T, "
              f"{found[-1][2]:.4f} (s.e. {found[-1][3]:.4f}) against q_eff tau T; at an equal q tau T, largest / "
              f"smallest {groups[-1][0]:.4g} with T >= {k:g} q (asserted < 1.5), {groups[-1][1]:.4g} over all "
              f"cells; cells with T < {k:g} q over the largest compared one of their budget: at least "
              f"{groups[-1][2]:.4g} (asserted > 1; nan: none left out)", flush=True)
    a = np.array(found)
    print(f"against q tau T: {a[:, 0].min():.3f} to {a[:, 0].max():.3f} (flatter than -1/2 at "
          f"{int(np.sum(a[:, 0] > -0.5))} of {len(a)}); against q_eff tau T: {a[:, 2].min():.3f} to {a[:, 2].max():.3f}; "
          f"largest standard error {a[:, 1].max():.3f} / {a[:, 3].max():.3f}")
    g = np.array(groups)

    def over_seeds(stat, column):  # nan where every seed's value is nan (nothing compared, or nothing left out)
        values = g[np.isfinite(g[:, column]), column]
        return stat(values) if values.size else np.nan

    print(f"equal q tau T, largest / smallest: with T >= {args.min_rounds_per_client:g} q at most "
          f"{over_seeds(np.max, 0):.3f} (median {over_seeds(np.median, 0):.3f}), over all cells at most "
          f"{over_seeds(np.max, 1):.3f}; left-out cells at least {over_seeds(np.min, 2):.3f} times the largest "
          f"compared one")


if __name__ == "__main__":
    main()

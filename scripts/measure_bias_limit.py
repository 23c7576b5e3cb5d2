"""Chapter 8, "Why FedNova's tau_eff must not come from the sample": the numbers quoted in the comments of its
paired displacement check, over problem seeds (each problem seed s also the chapter seed: sampling seeds
fedlib.experiments.run_seeds(s, seeds), as chapter 8 runs them).

    PYTHONPATH=. .venv/bin/python scripts/measure_bias_limit.py                     # ci: T 500 2000, 3 seeds, problem seeds 0-9
    PYTHONPATH=. .venv/bin/python scripts/measure_bias_limit.py --rounds 1000 4000 --seeds 4 --problem-seeds 0 1 2   # full

Per (q, tau_eff choice), over the problem seeds: the paired displacement error at each T
(fedlib.experiments.speedup.paired_displacement_error; in how many cases it is smaller at the longer T);
off_prediction / predicted at the longest T; the ratio off_prediction(T_long) / off_prediction(T_short), how many
standard errors below 1 it is and the exponent s of a fit off_prediction ~ eta^s; in how many cases the distance to
x* lies below |x_c - x*| at T_long; the cosine between the fixed run's mean offset from x* and x_c - x*; the
distance to x* and off_prediction at T_long over the fixed run's distance to x*; and, for the fixed choice, the
problem seeds whose distance to x* is larger at T_long than at T_short (by how many standard errors).
"""
from __future__ import annotations

import argparse
import math

import numpy as np

from fedlib.cli.common import int_at_least, positive_float
from fedlib.experiments import speedup as S


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int_at_least(1), nargs=2, default=(500, 2000), metavar=("T_SHORT", "T_LONG"))
    ap.add_argument("--seeds", type=int_at_least(2), default=3, help="sampling seeds per problem seed (the chapter's bias_seeds)")
    ap.add_argument("--problem-seeds", type=int_at_least(0), nargs="+", default=list(range(10)))
    ap.add_argument("--lr-scale", type=positive_float, default=0.5, help="the chapter's lr_scale_consistency")
    args = ap.parse_args(argv)
    t_short, t_long = sorted(args.rounds)
    if t_short == t_long:
        ap.error("--rounds: give two different T")
    stats: dict = {}
    fixed_larger: dict = {2: [], 4: []}
    for ps in args.problem_seeds:
        base, work = S.base_setup(seed=ps, dim=10)
        rows = S.sampling_bias(base, work, (2, 4), (t_short, t_long), lr_scale=args.lr_scale, seeds=args.seeds, seed=ps)
        x_star = base.optimum()
        for q in (2, 4):
            fixed = S.bias_row(rows, q, t_long, "population")
            fixed_short = S.bias_row(rows, q, t_short, "population")
            if fixed.distance > fixed_short.distance:
                fixed_larger[q].append((ps, (fixed.distance - fixed_short.distance)
                                        / math.hypot(fixed.stderr, fixed_short.stderr)))
            for choice in ("participants", "selected_p"):
                st = stats.setdefault((q, choice), {k: [] for k in ("pe_s", "pe_l", "off_p", "ratio", "se_below",
                                                                    "s", "below", "cos", "farther",
                                                                    "off_fixed")})
                st["pe_s"].append(S.paired_displacement_error(rows, q, t_short, choice))
                st["pe_l"].append(S.paired_displacement_error(rows, q, t_long, choice))
                long, short = S.bias_row(rows, q, t_long, choice), S.bias_row(rows, q, t_short, choice)
                o_l = np.linalg.norm(long.averaged - long.limit, axis=1)
                o_s = np.linalg.norm(short.averaged - short.limit, axis=1)
                n = len(o_l)
                r = o_l.mean() / o_s.mean()
                r_se = r * math.hypot(o_l.std(ddof=1) / math.sqrt(n) / o_l.mean(), o_s.std(ddof=1) / math.sqrt(n) / o_s.mean())
                st["off_p"].append(long.off_prediction / long.predicted)
                st["ratio"].append(r)
                st["se_below"].append((1 - r) / r_se)
                st["s"].append(math.log(r) / math.log(long.lr / short.lr))
                st["below"].append(long.distance < long.predicted)
                offset = (fixed.averaged - x_star).mean(axis=0)
                st["cos"].append(float(offset @ (long.limit - x_star) / (np.linalg.norm(offset) * long.predicted)))
                st["farther"].append(long.distance / fixed.distance)
                st["off_fixed"].append(long.off_prediction / fixed.distance)
        print(f"problem seed {ps} done", flush=True)
    rng = lambda v: f"{min(v):.3g} to {max(v):.3g}"
    for (q, choice), st in stats.items():
        n = len(st["pe_l"])
        print(f"q = {q}, {choice}: paired error at T = {t_short}: {rng(st['pe_s'])}, at T = {t_long}: {rng(st['pe_l'])} "
              f"(smaller at T = {t_long} in {sum(a < b for a, b in zip(st['pe_l'], st['pe_s']))} of {n}); "
              f"off_prediction / predicted at T = {t_long}: {rng(st['off_p'])}; off_prediction ratio {rng(st['ratio'])}, "
              f"{rng(st['se_below'])} s.e. below 1, fitted s {rng(st['s'])}; distance to x* below |x_c - x*| in "
              f"{sum(st['below'])} of {n}; cosine(fixed run's offset, x_c - x*) {rng(st['cos'])}; at T = {t_long} "
              f"over the fixed run's distance to x*: distance {rng(st['farther'])}, off_prediction {rng(st['off_fixed'])}")
    for q, cases in fixed_larger.items():
        print(f"q = {q}, population: distance to x* larger at T = {t_long} than at T = {t_short} for problem seeds "
              + (", ".join(f"{ps} (by {se:.2f} s.e.)" for ps, se in cases) or "none"))


if __name__ == "__main__":
    main()

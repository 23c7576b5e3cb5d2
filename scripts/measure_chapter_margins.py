"""The seed sweeps behind chapters 2's, 4's and 9's comments on their asserts' margins, over chapter seeds.

    PYTHONPATH=. .venv/bin/python scripts/measure_chapter_margins.py ch02 --seeds 0 1999                 # ci sizes
    PYTHONPATH=. .venv/bin/python scripts/measure_chapter_margins.py ch02 --seeds 0 299 --profile full
    PYTHONPATH=. .venv/bin/python scripts/measure_chapter_margins.py ch04 --seeds 0 299                  # ci sizes
    PYTHONPATH=. .venv/bin/python scripts/measure_chapter_margins.py ch09 --seeds 0 399                  # ci sizes

The setup is the chapter's own: its parameters cell and the cell that sizes the profile are executed from the
notebook for every seed, so the script follows an edited chapter. For each quantity an assert compares with a
threshold it prints the median over the seeds and the worst seeds (largest, or smallest where a small value is the
risk); the thresholds themselves stay in the chapter.

ch02: the closed-form side of the asserts (App. A's fixed points and round maps; the simulations the chapter checks
them against agree to 1e-10, so they are not run): the fixed-point section's distances to x* (per instance and summed
over the instances), Lemma 1's slopes, the unequal-weights limits and Figure 2's closed forms and radii.
ch04: the sampling-with-replacement section (the asserts of its two tables): under scheme (i) FedNova (population and
sampled tau_eff) against FedAvg, under scheme (ii) the sampled tau_eff against the population one, each the mean over
the run seeds of the mean loss over the last half of the rounds, and the learning-rate sweep's smallest rate (the
largest FedNova / FedAvg of a run seed; its first rate, the paper's 0.02 in both profiles, repeats the (i) runs). The
sweep's 8x longer runs are most of its time: about a minute a seed at ci on one core, ten seconds with
``--no-lr-sweep``.
ch09: claim 2's FedAvg drift towards its surrogate against its noise between runs of one strategy, the smallest
of the seeds' shift / spread (the chapter asserts every shift > 2 x spread), from the chapter's FedAvg and FedNova
runs with fixed-length rounds (``run_strategy``).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path

import numpy as np

from fedlib.cli.common import int_at_least

BOOK = Path(__file__).resolve().parents[1] / "book"
NOTEBOOKS = {"ch02": "02_quadratic_inconsistency.ipynb", "ch04": "04_synthetic_logistic.ipynb",
             "ch09": "09_stragglers.ipynb"}


def chapter_setup(chapter: str, seed: int, profile: str, cells: int) -> dict:
    """The namespace of the chapter's first ``cells`` code cells (parameters first) run with ``seed`` and
    ``profile`` set after its parameters cell, as papermill sets them; their printing is dropped."""
    nb = json.loads((BOOK / NOTEBOOKS[chapter]).read_text())
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"][:cells]
    ns: dict = {}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(code[0], ns)  # noqa: S102 - the repository's own notebook
        ns.update(seed=seed, profile=profile)
        for source in code[1:]:
            exec(source, ns)  # noqa: S102
    return ns


def ch02_quantities(seed: int, profile: str) -> dict:
    """Chapter 2's asserted ratios at ``seed`` from the closed forms (larger is closer to failing, except
    ``radius min``)."""
    from fedlib import theory
    from fedlib.experiments import quadratic as Q
    from fedlib.problems import random_quadratic

    ns = chapter_setup("ch02", seed, profile, cells=2)
    norm = np.linalg.norm
    lo, hi = ns["tau_low"], ns["tau_high"]
    out = {}
    # fixed-point section (cells 8-9): distances of the fixed points to x*, per instance and summed
    dists = []
    for k in range(ns["fp_instances"]):
        prob = random_quadratic(ns["fp_clients"], ns["fp_dim"], seed=Q.instance_seed(seed, k))
        tau = Q.fixed_local_steps(seed, k, ns["fp_clients"], lo, hi)
        x_star = prob.optimum()
        dists.append([norm(Q.fixed_point(prob, n, ns["fp_lr"], tau, ns["fp_mu"] if n == "fedprox" else 0.0) - x_star)
                      for n in ("fedavg", "fedprox", "fednova")])
    d = np.array(dists)
    out["fixed points: sum d_nova / sum d_avg"] = d[:, 2].sum() / d[:, 0].sum()
    out["fixed points: sum d_prox / sum d_avg"] = d[:, 1].sum() / d[:, 0].sum()
    out["fixed points: largest d_nova / d_avg of an instance"] = float(np.max(d[:, 2] / d[:, 0]))
    out["fixed points: largest d_prox / d_avg of an instance"] = float(np.max(d[:, 1] / d[:, 0]))
    # Lemma 1 (cells 12-14): slopes over the smaller half of the learning rates, and FedAvg's bias
    lemma_prob = Q.identity_quadratic(ns["lemma_clients"], ns["lemma_dim"], seed)
    lemma_tau = Q.fixed_local_steps(seed, 0, ns["lemma_clients"], lo, hi, purpose="lemma1_steps")
    x_star = lemma_prob.optimum()
    x_lemma = theory.lemma1_small_lr_limit(lemma_prob.e, lemma_prob.p, lemma_tau)
    gen_prob = random_quadratic(ns["fp_clients"], ns["fp_dim"], seed=Q.instance_seed(seed, 0))
    gen_tau = Q.fixed_local_steps(seed, 0, ns["fp_clients"], lo, hi)
    lrs = np.logspace(np.log10(ns["lemma_lr_min"]), np.log10(ns["lemma_lr_max"]), ns["lemma_points"])
    half = ns["lemma_points"] // 2 + 1

    def curve(prob, name, tau, ref):
        return np.array([norm(Q.fixed_point(prob, name, lr, tau) - ref) for lr in lrs])
    curves = [curve(lemma_prob, "fedavg", lemma_tau, x_lemma), curve(lemma_prob, "fednova", lemma_tau, x_star),
              curve(gen_prob, "fedavg", gen_tau, Q.tau_weighted_optimum(gen_prob, gen_tau)),
              curve(gen_prob, "fednova", gen_tau, gen_prob.optimum())]
    out["Lemma 1: largest |slope - 1|"] = max(abs(Q.loglog_slope(lrs[:half], c[:half]) - 1) for c in curves)
    out["Lemma 1: |FedAvg's bias / ||x_lemma - x*|| - 1|"] = abs(
        norm(Q.fixed_point(lemma_prob, "fedavg", lrs[0], lemma_tau) - x_star) / norm(x_lemma - x_star) - 1)
    # unequal weights (cells 17-18), the closed form at eta standing for the simulated limit
    m = ns["weights_clients"]
    p = np.arange(1, m + 1) / (m * (m + 1) / 2)
    wprob = random_quadratic(m, ns["weights_dim"], seed=Q.instance_seed(seed, 0, purpose="unequal_weights"), p=p)
    wtau = Q.fixed_local_steps(seed, 0, m, lo, hi, purpose="unequal_weights_steps")
    for n in ("fedavg", "fednova"):
        limit, target = Q.fixed_point(wprob, n, ns["weights_lr"], wtau), Q.small_lr_limit(wprob, n, wtau)
        at_lr = norm(limit - target)
        out[f"unequal p: {n} |d(eta) / d(eta / 10) - 10|"] = abs(
            at_lr / norm(Q.fixed_point(wprob, n, ns["weights_lr"] / 10, wtau) - target) - 10)
        out[f"unequal p: {n} d(target) / d(p = 1/m point)"] = at_lr / norm(
            limit - Q.small_lr_limit(wprob, n, wtau, weights=np.full(m, 1 / m)))
    # Figure 2 (cells 20, 24-25): closed-form distances and the round maps' radii
    fprob = random_quadratic(ns["fig2_clients"], ns["fig2_dim"], seed=Q.instance_seed(seed, 0, purpose="figure2"))
    ftau = Q.fixed_local_steps(seed, 0, ns["fig2_clients"], lo, hi, purpose="figure2_steps")
    x_star = fprob.optimum()
    closed, radii = {}, []
    mus = {n: ns["fig2_mu"] if n == "fedprox" else 0.0 for n in Q.CLOSED_FORM}
    for key, steps in (("equal", np.full(ns["fig2_clients"], ns["tau_equal"])), ("fixed", ftau)):
        closed[key] = {n: norm(Q.fixed_point(fprob, n, ns["fig2_lr"], steps, mus[n]) - x_star) for n in Q.CLOSED_FORM}
        radii += [Q.round_map_radius(fprob, n, ns["fig2_lr"], steps, mus[n]) for n in Q.CLOSED_FORM]
    out["Figure 2: largest equal-tau distance / FedAvg's fixed-tau distance"] = (
        max(closed["equal"].values()) / closed["fixed"]["fedavg"])
    out["Figure 2: FedNova / FedAvg, fixed tau"] = closed["fixed"]["fednova"] / closed["fixed"]["fedavg"]
    out["Figure 2: FedProx / FedAvg, fixed tau"] = closed["fixed"]["fedprox"] / closed["fixed"]["fedavg"]
    out["Figure 2: radius max"] = max(radii)
    out["Figure 2: radius min"] = min(radii)
    return out


def ch04_quantities(seed: int, profile: str, lr_sweep: bool = True) -> dict:
    """Chapter 4's sampling-with-replacement asserts at ``seed``: ratios of the mean loss over the last half of the
    rounds (means over the run seeds; the chapter asserts each ``> 1`` or ``> 2``, and the smallest rate's per-seed
    ratios ``< 1``)."""
    import dataclasses

    from fedlib.experiments import synthetic as S
    from fedlib.solvers import sgd

    ns = chapter_setup("ch04", seed, profile, cells=3)
    prob, seeds, rounds = ns["prob"], ns["seeds"], ns["rounds"]
    _, _, partial = S.SETTINGS
    with_repl = dataclasses.replace(partial, name="partial-wr", sampling="with-replacement")

    def sampled_tau(problem, setting):  # the library's default under sampling: tau_eff from the sample
        return S.make_algorithm("fednova", sgd(S.PAPER["lr"]))

    runs = S.run_grid(prob, [with_repl], {"FedAvg": S.fedavg_sgd, "FedNova": S.fednova_sgd}, seeds, rounds)
    runs.update(S.run_grid(prob, [partial, with_repl], {"sampled": sampled_tau}, seeds, rounds))
    runs.update(S.run_grid(prob, [partial], {"FedNova": S.fednova_sgd}, seeds, rounds))
    half = max(1, rounds // 2)
    later = {k: S.end_loss(c, half, statistic="mean").mean() for k, c in runs.items()}
    wr, ii = (lambda a: later["partial-wr", a]), (lambda a: later["partial", a])
    out = {"(i): FedNova / FedAvg (asserted > 1)": wr("FedNova") / wr("FedAvg"),
           "(i): sampled tau_eff / FedAvg (asserted > 1)": wr("sampled") / wr("FedAvg"),
           "(ii): sampled / population tau_eff (asserted > 2)": ii("sampled") / ii("FedNova")}
    if lr_sweep:
        lr = tuple(ns["replacement_lrs"])[-1]
        sweep = S.lr_sweep(prob, with_repl, {"FedAvg": S.fedavg_sgd, "FedNova": S.fednova_sgd}, [lr], seeds, rounds)
        swept_half = max(1, (sweep[lr, "FedAvg"].losses.shape[1] - 1) // 2)
        ends = {a: S.end_loss(sweep[lr, a], swept_half, statistic="mean") for a in ("FedAvg", "FedNova")}
        out[f"lr {lr:g}: largest FedNova / FedAvg of a run seed (asserted < 1)"] = float(
            np.max(ends["FedNova"] / ends["FedAvg"]))
    return out


def ch09_quantities(seed: int, profile: str) -> dict:
    """Chapter 9's claim 2 at ``seed``: the smallest of the seeds' drift over the spread between runs of one strategy
    (small is closer to failing)."""
    from fedlib.experiments import stragglers as ST

    ns = chapter_setup("ch09", seed, profile, cells=2)
    runs = {s: ST.run_strategy(ns["problem"], ns["clock"], s, ns["rounds"], ns["seeds"], lr=ns["lr"],
                               end_fraction=ns["model_average_fraction"])
            for s in ("fedavg-fixed-time", "fednova-fixed-time")}
    p = ns["problem"].p
    avg, nova = runs["fedavg-fixed-time"], runs["fednova-fixed-time"]
    shift, spread = ST.objective_shift(avg, nova, p), ST.objective_shift_spread(avg, nova, p)
    return {"claim 2: min shift / spread": float(np.min(shift) / spread)}


SMALL_IS_WORSE = ("radius min", "min shift / spread", "(asserted > 1)", "(asserted > 2)")


def summarise(per_seed: dict) -> list[str]:
    """One line per quantity: the median over the seeds and the five worst seeds with their values."""
    lines = []
    for name in next(iter(per_seed.values())):
        values = {s: q[name] for s, q in per_seed.items()}
        worst_first = sorted(values, key=values.get, reverse=not name.endswith(SMALL_IS_WORSE))
        worst = ", ".join(f"{values[s]:.4g} (seed {s})" for s in worst_first[:5])
        lines.append(f"{name}: median {np.median(list(values.values())):.4g}; worst {worst}")
    return lines


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("chapter", choices=sorted(NOTEBOOKS))
    ap.add_argument("--seeds", type=int_at_least(0), nargs=2, default=[0, 99], metavar=("FIRST", "LAST"),
                    help="the chapter seeds FIRST..LAST (default 0 99)")
    ap.add_argument("--profile", choices=("ci", "full"), default="ci")
    ap.add_argument("--no-lr-sweep", action="store_true",
                    help="ch04: leave out the learning-rate sweep's smallest rate (most of the time)")
    args = ap.parse_args(argv)
    first, last = args.seeds
    if last < first:
        ap.error(f"--seeds {first} {last}: LAST must be >= FIRST")
    if args.no_lr_sweep and args.chapter != "ch04":
        ap.error(f"--no-lr-sweep: only chapter 4 has a learning-rate sweep, not {args.chapter}")
    measure = {"ch02": ch02_quantities, "ch09": ch09_quantities,
               "ch04": lambda seed, profile: ch04_quantities(seed, profile, lr_sweep=not args.no_lr_sweep)}
    from tqdm.auto import tqdm

    seeds = tqdm(range(first, last + 1), desc=args.chapter, unit="seed", file=sys.stderr,
                 disable=not sys.stderr.isatty())
    per_seed = {seed: measure[args.chapter](seed, args.profile) for seed in seeds}
    print(f"{args.chapter}, {args.profile} profile, chapter seeds {first}-{last}:")
    for line in summarise(per_seed):
        print(f"  {line}")


if __name__ == "__main__":
    main()

"""The seed sweeps behind chapters 2's, 4's, 7's, 8's, 9's and 10's comments on their asserts' margins, over seeds.

    PYTHONPATH=. .venv/bin/python scripts/measure_chapter_margins.py ch02 --seeds 0 1999                 # ci sizes
    PYTHONPATH=. .venv/bin/python scripts/measure_chapter_margins.py ch02 --seeds 0 299 --profile full
    PYTHONPATH=. .venv/bin/python scripts/measure_chapter_margins.py ch04 --seeds 0 299                  # ci sizes
    PYTHONPATH=. .venv/bin/python scripts/measure_chapter_margins.py ch04 --seeds 0 99 --figure5 --no-lr-sweep
    PYTHONPATH=. .venv/bin/python scripts/measure_chapter_margins.py ch07 --seeds 0 499 --no-bounds      # ci sizes
    PYTHONPATH=. .venv/bin/python scripts/measure_chapter_margins.py ch08 --seeds 0 999                  # ci sizes
    PYTHONPATH=. .venv/bin/python scripts/measure_chapter_margins.py ch08 --seeds 0 999 --speedup
    PYTHONPATH=. .venv/bin/python scripts/measure_chapter_margins.py ch09 --seeds 0 399                  # ci sizes
    PYTHONPATH=. .venv/bin/python scripts/measure_chapter_margins.py ch10 --seeds 0 199                  # ci sizes
    PYTHONPATH=. .venv/bin/python scripts/measure_chapter_margins.py ch10 --seeds 0 9 --profile full --perturbation-only

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
``--no-lr-sweep``. ``--figure5`` adds Figure 5's claims (FedNova against FedAvg and FedProx per setting, its rounds to
FedAvg's end, the tuned mu inside its grid) and the local-solver comparison, about 25 s more a seed.
ch07: the limits' log-log slopes over the four smallest step sizes (their room to the band (0.9, 1.2) at both ends)
and the ratios of distances at the smallest step size; with the bounds (Theorem 1 and 2 runs, about 70 s a seed at ci;
``--no-bounds`` leaves them out, about 6 s a seed) the smallest bound / measured and FedAvg's floor above the bound
read for F at the largest T.
ch08: part 1 (arbitrary local work, full gradients): FedNova's log-log slope to x* in eta (its room to the band
(0.8, 1.2) at both ends), FedAvg's to x~, and at the smallest eta FedAvg's distance to x* against |x* - x~| and
against FedNova's, and the two min ||grad F||^2; about 5 s a seed at ci. ``--speedup`` measures part 2 instead (noisy
gradients, m clients, T rounds): FedNova's slope against m tau T (its room to the band (-0.6, -0.4)), the ratios at
an equal budget, and at the largest budget both algorithms against FedAvg's floor; about 2 s a seed at ci.
ch09: claim 2's FedAvg drift towards its surrogate against its noise between runs of one strategy, the smallest
of the seeds' shift / spread (the chapter asserts every shift > 2 x spread), from the chapter's FedAvg and FedNova
runs with fixed-length rounds (``run_strategy``).
ch10: the asserts of parts 5 and 6 that change with the chapter seed (its run seeds and perturbations): the
Synthetic(1,1) end losses' ratios (largest or smallest over the run seeds), SCAFFOLD's and FedNova-VR's loss rises,
and the perturbation runs' growth per round; about 45 s a seed at ci (the logistic optimum is solved once).
``--perturbation-only`` runs part 6's perturbations alone, about 35 s a seed at ci, 45 s at full (190 s with part 5).
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
             "ch07": "07_surrogate_logistic.ipynb", "ch08": "08_theorem3_speedup.ipynb", "ch09": "09_stragglers.ipynb",
             "ch10": "10_acceleration.ipynb"}


def chapter_setup(chapter: str, seed: int, profile: str, cells: int | tuple[int, ...]) -> dict:
    """The namespace of the chapter's first ``cells`` code cells (parameters first), or of the code cells at the
    positions ``cells`` (counting code cells from 0, the parameters cell, which must come first), run with ``seed``
    and ``profile`` set after its parameters cell, as papermill sets them; their printing is dropped."""
    nb = json.loads((BOOK / NOTEBOOKS[chapter]).read_text())
    every = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    if isinstance(cells, int):
        cells = tuple(range(cells))
    if not cells or cells[0] != 0:
        raise ValueError(f"cells {cells}: the parameters cell (0) comes first")
    code = [every[k] for k in cells]
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


def ch04_quantities(seed: int, profile: str, lr_sweep: bool = True, figure5: bool = False) -> dict:
    """Chapter 4's sampling-with-replacement asserts at ``seed``: ratios of the mean loss over the last half of the
    rounds (means over the run seeds; the chapter asserts each ``> 1`` or ``> 2``, and the smallest rate's per-seed
    ratios ``< 1``). With ``figure5`` first Figure 5's claims (:func:`ch04_figure5_quantities`)."""
    import dataclasses

    from fedlib.experiments import synthetic as S
    from fedlib.solvers import sgd

    # parameters, sizes, the problem; with figure5 also the mu sweep and Figure 5's runs
    ns = chapter_setup("ch04", seed, profile, cells=5 if figure5 else 3)
    out = ch04_figure5_quantities(ns) if figure5 else {}
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
    out.update({"(i): FedNova / FedAvg (asserted > 1)": wr("FedNova") / wr("FedAvg"),
                "(i): sampled tau_eff / FedAvg (asserted > 1)": wr("sampled") / wr("FedAvg"),
                "(ii): sampled / population tau_eff (asserted > 2)": ii("sampled") / ii("FedNova")})
    if lr_sweep:
        lr = tuple(ns["replacement_lrs"])[-1]
        sweep = S.lr_sweep(prob, with_repl, {"FedAvg": S.fedavg_sgd, "FedNova": S.fednova_sgd}, [lr], seeds, rounds)
        swept_half = max(1, (sweep[lr, "FedAvg"].losses.shape[1] - 1) // 2)
        ends = {a: S.end_loss(sweep[lr, a], swept_half, statistic="mean") for a in ("FedAvg", "FedNova")}
        out[f"lr {lr:g}: largest FedNova / FedAvg of a run seed (asserted < 1)"] = float(
            np.max(ends["FedNova"] / ends["FedAvg"]))
    return out


def ch04_figure5_quantities(ns: dict) -> dict:
    """Chapter 4's Figure 5 claims from ``ns``, the namespace of its first five code cells at a chapter seed
    (:func:`chapter_setup`: the chapter's own FedProx mu sweep and grid of runs): per setting the smallest FedAvg /
    FedNova of a run seed's median loss over the last quarter of the rounds, FedProx's against FedNova's (means over
    the run seeds), FedNova's rounds to FedAvg's end under full participation (with equal epochs against FedAvg's own
    rounds to it); the tuned mu's place in its grid; and
    the local-solver comparison's per-seed ratios (momentum over the last half of the rounds, proximal over the last
    quarter)."""
    from fedlib.experiments import synthetic as S
    from fedlib.solvers import momentum_sgd, proximal_sgd

    grid, rounds, mu, mu_grid = ns["grid"], ns["rounds"], ns["mu"], tuple(ns["mu_grid"])
    place = mu_grid.index(mu)
    out = {"FedProx's mu: grid steps from the grid's ends (asserted > 0)": min(place, len(mu_grid) - 1 - place)}
    tail = max(1, rounds // 4)
    for setting in S.SETTINGS:
        s = setting.name
        end = {a: S.end_loss(grid[s, a], tail) for a in ("FedAvg", "FedProx", "FedNova")}
        out[f"Figure 5, {s}: smallest FedAvg / FedNova of a run seed (asserted > 1)"] = np.min(
            end["FedAvg"] / end["FedNova"])
        out[f"Figure 5, {s}: FedProx / FedNova (asserted > 1)"] = end["FedProx"].mean() / end["FedNova"].mean()
        nova_rounds = S.rounds_to_reach(grid[s, "FedNova"], end["FedAvg"])
        if setting.sampling == "full":
            out[f"Figure 5, {s}: FedNova's largest rounds to FedAvg's end / rounds (asserted <= 0.5)"] = np.max(
                nova_rounds) / rounds
        if s == "fixed":  # equal epochs: FedNova against FedAvg's own rounds to FedAvg's end, per run seed
            out["Figure 5, fixed: largest FedNova / FedAvg rounds to FedAvg's end (asserted <= 0.5)"] = np.max(
                nova_rounds / S.rounds_to_reach(grid[s, "FedAvg"], end["FedAvg"]))
    _, random_, _ = S.SETTINGS  # the local-solver comparison (the chapter's code cell 9, without its figure)
    lr, rho = ns["momentum_lr"], ns["momentum"]
    solvers = {"FedAvg momentum": S.with_solver("fedavg", momentum_sgd(lr, rho)),
               "FedNova momentum": S.with_solver("fednova", momentum_sgd(lr, rho)),
               "FedProx": S.with_solver("fedavg", proximal_sgd(S.PAPER["lr"], mu)),
               "FedNova prox": S.with_solver("fednova", proximal_sgd(S.PAPER["lr"], mu))}
    solver_rounds = ns["solver_rounds"]
    runs = S.run_grid(ns["prob"], [random_], solvers, ns["seeds"], solver_rounds)

    def ratio(a, b, window):
        return S.end_loss(runs["random", a], window) / S.end_loss(runs["random", b], window)
    out["local momentum: largest FedNova / FedAvg of a run seed, last half (asserted < 1)"] = np.max(
        ratio("FedNova momentum", "FedAvg momentum", max(1, solver_rounds // 2)))
    out["proximal: largest FedNova / FedProx of a run seed, last quarter (asserted < 1)"] = np.max(
        ratio("FedNova prox", "FedProx", max(1, solver_rounds // 4)))
    return out


def ch07_quantities(seed: int, profile: str, bounds: bool = True) -> dict:
    """Chapter 7's asserts at ``seed``: the limits' log-log slopes over the four smallest step sizes (their room to
    the asserted band's ends), the distances at the smallest step size, and, with ``bounds``, Theorem 1's and
    2's bounds against the measured gradients and FedAvg's floor at the largest ``T``."""
    ns = chapter_setup("ch07", seed, profile, cells=2)  # cell 2 computes the limits
    points, info, lrs = ns["points"], ns["info"], ns["lrs"]
    fit_lrs = sorted(lrs)[:4]  # the chapter's fit

    def slope(name, key):
        pts = [p for p in points if p.algorithm == name and p.lr in fit_lrs]
        return float(np.polyfit(np.log([p.lr for p in pts]), np.log([getattr(p, key) for p in pts]), 1)[0])

    small = {p.algorithm: p for p in points if p.lr == min(lrs)}
    out = {"largest fixed-point residual (asserted < 1e-10)": max(p.residual for p in points)}
    for name, key, shown in (("fedavg", "dist_to_surrogate_min", "FedAvg's slope to argmin F~"),
                             ("fednova", "dist_to_F_min", "FedNova's slope to argmin F")):
        s = slope(name, key)
        out[f"{shown} - 0.9 (asserted > 0)"], out[f"1.2 - {shown} (asserted > 0)"] = s - 0.9, 1.2 - s
    out["smallest eta: FedAvg's distance to argmin F / the minimisers' gap (asserted > 0.5)"] = (
        small["fedavg"].dist_to_F_min / info["gap"])
    out["smallest eta: FedAvg's distance to argmin F / to argmin F~ (asserted > 5)"] = (
        small["fedavg"].dist_to_F_min / small["fedavg"].dist_to_surrogate_min)
    out["smallest eta: FedNova's distance to argmin F~ / to argmin F (asserted > 5)"] = (
        small["fednova"].dist_to_surrogate_min / small["fednova"].dist_to_F_min)
    if bounds:
        from fedlib.experiments import bounds as B

        quad, steps = B.default_setup(seed=seed)
        rows = [B.bound_check(quad, steps, a, solver, T, replicas=ns["bound_replicas"], seed=seed)
                for a in ("fedavg", "fednova") for solver in ("sgd", "momentum") for T in ns["bound_rounds"]]
        out["Theorem 1: smallest bound / measured (asserted > 1)"] = min(r.ratio for r in rows)
        out["Theorem 2: smallest bound / measured E||grad F||^2 (asserted > 1)"] = min(
            r.theorem2_bound / r.true_measured for r in rows)
        out["largest T: FedAvg's smallest E||grad F||^2 / the bound read for F (asserted > 1)"] = min(
            r.true_measured / r.true_bound.total for r in rows
            if r.algorithm == "fedavg" and r.rounds == max(ns["bound_rounds"]))
        out["largest gap between a run and its closed-form round map (asserted < 1e-9)"] = max(
            r.closed_form_gap for r in rows)
    return out


def ch08_quantities(seed: int, profile: str) -> dict:
    """Chapter 8's part 1 at ``seed``: the asserted slopes in eta (FedNova's room to both ends of its band) and, at
    the smallest eta, FedAvg's distances and min ||grad F||^2 against their references."""
    from fedlib.experiments import speedup as S
    from fedlib.experiments.quadratic import loglog_slope

    ns = chapter_setup("ch08", seed, profile, cells=2)  # parameters; setup (sizes, base, work)
    cons = S.consistency_sweep(ns["base"], ns["work"], ns["rounds_consistency"], lr_scale=ns["lr_scale_consistency"])
    lrs, last = [r.lr for r in cons], cons[-1]
    nova = loglog_slope(lrs, [r.fednova_distance for r in cons])
    return {"FedNova's slope to x* - 0.8 (asserted > 0)": nova - 0.8,
            "1.2 - FedNova's slope to x* (asserted > 0)": 1.2 - nova,
            "largest FedNova distance at the next T / at this T (asserted < 1)": max(
                b.fednova_distance / a.fednova_distance for a, b in zip(cons, cons[1:])),
            "FedAvg's slope to x~ (asserted > 0.25)": loglog_slope(lrs, [r.fedavg_surrogate_distance for r in cons]),
            "smallest eta: FedAvg's distance to x* / |x* - x~| (asserted > 0.75)": (
                last.fedavg_distance / last.surrogate_gap),
            "smallest eta: FedAvg's distance to x* / FedNova's (asserted > 10)": (
                last.fedavg_distance / last.fednova_distance),
            "FedAvg's min ||grad F||^2 / FedNova's (asserted > 10)": last.fedavg_min_grad2 / last.fednova_min_grad2}


def ch08_speedup_quantities(seed: int, profile: str) -> dict:
    """Chapter 8's part 2 at ``seed``: FedNova's slope against m tau T (its room to both ends of its band), the
    largest ratio at an equal budget (among the cells with T >= k m, k the chapter's min_rounds_per_client, as
    asserted; and among all, to show what that condition leaves out), and at the largest budget FedNova's and
    FedAvg's errors against FedAvg's floor ||grad F(x~)||^2 (x~ at part 1's smallest eta, as the chapter's
    ``last.floor``)."""
    from fedlib.experiments import speedup as S
    from fedlib.experiments.quadratic import loglog_slope

    ns = chapter_setup("ch08", seed, profile, cells=2)  # parameters; setup (sizes, base, work)
    base, work = ns["base"], ns["work"]
    lr_small = S.theorem3_lr(ns["lr_scale_consistency"], base.num_clients, float(work.mean_steps.mean()),
                             max(ns["rounds_consistency"]))
    _, x_tilde = S.time_averaged_surrogate(base, work, S.make_solvers(lr_small))
    g = base.global_grad(x_tilde)
    floor = float(g @ g)
    grid = S.speedup_grid(base, work, ns["copies"], ns["rounds_speedup"], lr_scale=ns["lr_scale_speedup"],
                          sigma=ns["sigma"], replicas=ns["replicas"], seed=seed, algorithms=("fednova", "fedavg"))
    nova = [r for r in grid if r.algorithm == "fednova"]
    slope = loglog_slope([r.budget for r in nova], [r.mean_grad2 for r in nova])
    k = ns["min_rounds_per_client"]  # the equal-budget comparison's T >= k m
    left_out = S.left_out_ratios(grid, k)
    top = max(nova, key=lambda r: r.budget)
    nova_top = top.mean_grad2
    fedavg_top = max((r for r in grid if r.algorithm == "fedavg"), key=lambda r: r.budget).mean_grad2
    return {"FedNova's slope against m tau T + 0.6 (asserted > 0)": slope + 0.6,
            "-0.4 - FedNova's slope against m tau T (asserted > 0)": -0.4 - slope,
            "largest / smallest error at an equal m tau T, cells with T >= k m (asserted < 1.5)": max(
                ratio for _, _, ratio in S.equal_budget_ratios(grid, min_rounds_per_client=k)),
            "largest / smallest error at an equal m tau T, all cells (not asserted)": max(
                ratio for _, _, ratio in S.equal_budget_ratios(grid)),
            **({"cells with T < k m: smallest / largest compared cell of their budget (asserted > 1)": min(
                ratio for _, _, ratio in left_out)} if left_out else {}),  # none at ci: every cell has T >= 16 m
            "largest budget: (floor - FedNova) / FedNova's standard error (asserted > 3)": (
                floor - nova_top) / top.stderr,
            "largest budget: FedAvg / floor (asserted > 0.85)": fedavg_top / floor,
            "largest budget: (FedAvg - 1.1 floor) / FedNova (asserted < 1)": (fedavg_top - 1.1 * floor) / nova_top,
            "floor ||grad F(x~)||^2 / FedNova at the largest budget": floor / nova_top}


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


def ch10_quantities(seed: int, profile: str, synthetic: bool = True) -> dict:
    """Chapter 10's asserts that depend on run seeds (parts 5 and 6): the Synthetic(1,1) end losses of the four
    algorithms under its three step schedules (largest or smallest ratio over the run seeds, per rate), SCAFFOLD's and
    FedNova-VR's loss rises, and the perturbation runs' growth per round and end / start. Parts 1-4 (the quadratic's
    closed forms) are measured in the chapter's own comments. ``synthetic=False``: part 6's perturbation runs only,
    on the local steps of ``acceleration.vr_step_settings`` with the chapter's cap (those the chapter takes)."""
    from fedlib.experiments import acceleration as A

    if synthetic:
        ns = chapter_setup("ch10", seed, profile, cells=(0, 1, 15))  # parameters, setup, the Synthetic(1,1) runs
        out = _ch10_synthetic(ns)
        syn, steps = ns["syn"], ns["step_settings"]
    else:
        from fedlib.experiments.synthetic import make_problem

        ns = chapter_setup("ch10", seed, profile, cells=(0, 1))  # parameters, setup
        out, syn = {}, make_problem()
        steps = A.vr_step_settings(syn.num_samples, syn.p, cap=ns["big_cap"])
    lr_plot, opt = ns["synthetic_lrs"][-1], _logistic_optimum(syn)
    names = {"e2": "E = 2", "equal": "equal steps", "capped": "capped"}
    for sk, n in [("e2", "scaffold"), ("e2", "fednova-vr"), ("equal", "scaffold"), ("capped", "scaffold")]:
        run = A.perturbation_growth(syn, opt, n, lr_plot, steps[sk], ns["linearised_rounds"], size=1e-7, seed=seed)
        label = f"perturbation, {names[sk]}, {A.VARIANTS[n].label}"
        sign = ">" if (sk, n) == ("e2", "scaffold") else "<"  # SCAFFOLD's E = 2 rounds leave x*, the others return
        out[f"{label}: growth per round (asserted {sign} 1)"] = run.rate
        if sk == "e2":
            out[f"{label}: end / start (asserted {sign} 1)"] = run.distances[-1] / run.distances[0]
        else:  # the controls' transient
            out[f"{label}: largest distance / start (asserted > 1)"] = run.distances.max() / run.distances[0]
    return out


def _ch10_synthetic(ns: dict) -> dict:
    """Part 5's quantities from the chapter's Synthetic(1,1) runs (the namespace of its cells)."""
    syn_runs, syn_end = ns["syn_runs"], ns["syn_end"]
    hetero, equal, capped = list(ns["syn_schedules"])
    out = {}
    for lr in ns["synthetic_lrs"]:
        e = {n: syn_end[lr, hetero, n] for n in ns["syn_names"]}
        out[f"lr {lr:g}, E = 2: largest FedNova-VR / FedAvg (asserted < 1)"] = np.max(e["fednova-vr"] / e["fedavg"])
        out[f"lr {lr:g}, E = 2: largest FedNova-VR / SCAFFOLD (asserted < 1)"] = np.max(e["fednova-vr"] / e["scaffold"])
        out[f"lr {lr:g}, E = 2: largest FedNova-VR / FedNova (asserted < 1.05)"] = np.max(
            e["fednova-vr"] / e["fednova"])
        out[f"lr {lr:g}, equal steps: largest SCAFFOLD / FedAvg (asserted < 1)"] = np.max(
            syn_end[lr, equal, "scaffold"] / syn_end[lr, equal, "fedavg"])
        out[f"lr {lr:g}, capped: largest |SCAFFOLD / FedNova-VR - 1| (asserted < 0.05)"] = np.max(
            np.abs(syn_end[lr, capped, "scaffold"] / syn_end[lr, capped, "fednova-vr"] - 1))
    lr_plot = ns["synthetic_lrs"][-1]
    out[f"lr {lr_plot:g}, E = 2: smallest SCAFFOLD / FedAvg (asserted > 1)"] = np.min(
        syn_end[lr_plot, hetero, "scaffold"] / syn_end[lr_plot, hetero, "fedavg"])
    median = {n: np.median(syn_runs[lr_plot, hetero, n], axis=0) for n in ("scaffold", "fednova-vr")}
    rises = {n: np.diff(c) / c[:-1] for n, c in median.items()}
    out["SCAFFOLD's rounds whose median loss rises by > 10 % (asserted >= 3)"] = int(np.sum(rises["scaffold"] > 0.1))
    out["FedNova-VR's largest rise of its median loss in a round (asserted <= 0.1)"] = float(rises["fednova-vr"].max())
    return out


_OPTIMA: dict = {}


def _logistic_optimum(problem):
    """``acceleration.logistic_optimum(problem)``, solved once per training set (chapter 10's problem is the same at
    every chapter seed)."""
    from fedlib.experiments import acceleration as A

    key = (problem.l2, problem.p.tobytes(), problem.train_x.tobytes(), problem.train_y.tobytes())
    if key not in _OPTIMA:
        _OPTIMA[key] = A.logistic_optimum(problem)
    return _OPTIMA[key]


SMALL_IS_WORSE = ("radius min", "min shift / spread", "(asserted > 0)", "(asserted > 0.25)", "(asserted > 0.5)",
                  "(asserted > 0.75)", "(asserted > 0.85)", "(asserted > 1)", "(asserted > 2)", "(asserted > 3)",
                  "(asserted > 5)", "(asserted > 10)", "(asserted >= 3)", "at the largest budget")


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
    ap.add_argument("--figure5", action="store_true",
                    help="ch04: also Figure 5's claims and the local-solver comparison (about 30 s a seed at ci)")
    ap.add_argument("--speedup", action="store_true",
                    help="ch08: part 2 (linear speedup) instead of part 1 (about 2 s a seed at ci)")
    ap.add_argument("--no-bounds", action="store_true",
                    help="ch07: leave out the Theorem 1 and 2 runs (most of the time)")
    ap.add_argument("--perturbation-only", action="store_true",
                    help="ch10: part 6's perturbation runs only, not part 5's Synthetic(1,1) runs (most of the time)")
    args = ap.parse_args(argv)
    first, last = args.seeds
    if last < first:
        ap.error(f"--seeds {first} {last}: LAST must be >= FIRST")
    if args.no_lr_sweep and args.chapter != "ch04":
        ap.error(f"--no-lr-sweep: only chapter 4 has a learning-rate sweep, not {args.chapter}")
    if args.figure5 and args.chapter != "ch04":
        ap.error(f"--figure5: only chapter 4 has Figure 5, not {args.chapter}")
    if args.speedup and args.chapter != "ch08":
        ap.error(f"--speedup: only chapter 8 has part 2's linear speedup, not {args.chapter}")
    if args.no_bounds and args.chapter != "ch07":
        ap.error(f"--no-bounds: only chapter 7 runs the bounds, not {args.chapter}")
    if args.perturbation_only and args.chapter != "ch10":
        ap.error(f"--perturbation-only: only chapter 10 has part 6's perturbation runs, not {args.chapter}")
    measure = {"ch02": ch02_quantities, "ch09": ch09_quantities,
               "ch10": lambda seed, profile: ch10_quantities(seed, profile, synthetic=not args.perturbation_only),
               "ch08": ch08_speedup_quantities if args.speedup else ch08_quantities,
               "ch04": lambda seed, profile: ch04_quantities(seed, profile, lr_sweep=not args.no_lr_sweep,
                                                               figure5=args.figure5),
               "ch07": lambda seed, profile: ch07_quantities(seed, profile, bounds=not args.no_bounds)}
    from tqdm.auto import tqdm

    seeds = tqdm(range(first, last + 1), desc=args.chapter, unit="seed", file=sys.stderr,
                 disable=not sys.stderr.isatty())
    per_seed = {seed: measure[args.chapter](seed, args.profile) for seed in seeds}
    print(f"{args.chapter}, {args.profile} profile, chapter seeds {first}-{last}:")
    for line in summarise(per_seed):
        print(f"  {line}")


if __name__ == "__main__":
    main()

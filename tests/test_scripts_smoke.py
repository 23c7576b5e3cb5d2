"""The measurement scripts quoted in the notes run (tiny sizes) and print what the notes quote."""
from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_bench_client_optimizer_prints_a_ratio(capsys):
    """Run as ``__main__`` in this process (as the tests below): a second interpreter only started torch again (and
    torch.optim.SGD's first use imports torch._dynamo), ~10 of its ~16 s without a bytecode cache."""
    _run_in_process("bench_client_optimizer.py", "--width", "0.03", "--steps", "3", "--repeat", "1", "--threads", "1")
    text = capsys.readouterr().out
    assert "ClientOptimizer.step" in text and "ratio" in text


def _run_in_process(script, *argv):
    import torch  # the scripts set torch's thread count: give the test worker its own back

    saved, threads = sys.argv, torch.get_num_threads()
    sys.argv = [script, *argv]
    try:
        runpy.run_path(str(ROOT / "scripts" / script), run_name="__main__")
    finally:
        sys.argv = saved
        torch.set_num_threads(threads)


@pytest.mark.parametrize("flag,value", [("--steps", "0"), ("--repeat", "0"), ("--threads", "0"),
                                        ("--width", "0"), ("--width", "inf"), ("--seed", "-1")])
def test_bench_client_optimizer_refuses_bad_arguments(flag, value, capsys):
    """--steps 0 used to print the median of no steps (an IndexError), --width inf was vgg11's
    ValueError traceback ('width must be a finite number > 0, got inf'); each bad value is an argparse
    error naming the flag, before any model is built."""
    with pytest.raises(SystemExit) as exit_info:
        _run_in_process("bench_client_optimizer.py", flag, value)
    assert exit_info.value.code == 2
    assert flag in capsys.readouterr().err


def test_bench_client_optimizer_leaves_the_global_rng_alone():
    """The script seeds dropout in a forked copy of torch's global RNG and draws its batch from its own
    generator: running it leaves the caller's global stream where it was."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    _run_in_process("bench_client_optimizer.py", "--width", "0.03", "--steps", "1", "--repeat", "1", "--threads", "1")
    assert torch.equal(torch.rand(3), expected)


def test_measure_host_planning_prints_each_round(capsys):
    """In this process, as ``__main__`` (no second start of torch)."""
    _run_in_process("measure_host_planning.py", "--runs", "1", "--rounds", "2", "--steps", "5")
    text = capsys.readouterr().out
    assert "round 0: plan" in text and "round 1: plan" in text and "load" in text


# --------------------------------------------------------------------------- scripts/measure_sampling_slopes.py
def test_measure_sampling_slopes_script_runs_tiny(capsys):
    """scripts/measure_sampling_slopes.py (the numbers of chapter 8's comment on the sampling slopes)."""
    import runpy

    main = runpy.run_path(str(Path(__file__).resolve().parents[1] / "scripts" / "measure_sampling_slopes.py"),
                          run_name="measure_sampling_slopes")["main"]
    main(["--problem-seeds", "0", "--copies", "1", "--clients", "2", "4", "--rounds", "16", "32", "--seeds", "2",
          "--replicas", "1"])
    out = capsys.readouterr().out
    assert out.startswith("problem seed 0: slope -") and "against q_eff tau T" in out
    assert "(flatter than -1/2 at " in out and "of 1); against q_eff tau T: " in out
    # the equal budgets: with T >= 16 q (the default) no two cells share a budget here (q = 2, 4; T = 16, 32: T < 16 q
    # for all but q = 2, T = 32), so nothing is compared; over all cells q = 2, T = 32 and q = 4, T = 16 are
    assert "largest / smallest nan with T >= 16 q" in out and "equal q tau T, largest / smallest: with T >= 16 q" in out
    main(["--problem-seeds", "0", "--copies", "1", "--clients", "2", "4", "--rounds", "16", "32", "--seeds", "2",
          "--replicas", "1", "--min-rounds-per-client", "4"])
    out = capsys.readouterr().out  # T >= 4 q: q = 2, T = 16 and 32; q = 4, T = 16 and 32: the one group compared
    assert "with T >= 4 q (asserted < 1.5)" in out and "largest / smallest nan" not in out


# --------------------------------------------------------------------------- scripts/measure_chapter_margins.py
def _margins():
    """scripts/measure_chapter_margins.py as a module (the numbers of chapters 2's, 4's, 7's, 8's, 9's and 10's margin
    comments)."""
    return runpy.run_path(str(Path(__file__).resolve().parents[1] / "scripts" / "measure_chapter_margins.py"),
                          run_name="measure_chapter_margins")


def _printed_medians(capsys) -> dict:
    """The medians main() printed, by quantity (one seed: the seed's own values, to 4 significant digits)."""
    lines = capsys.readouterr().out.splitlines()[1:]
    return {name: float(rest.split(";")[0]) for name, rest in (line.strip().split(": median ") for line in lines)}


def test_measure_chapter_margins_takes_the_chapter_setup_from_its_notebook():
    """The parameters cell and the sizing cell run with the seed and profile set as papermill sets them."""
    setup = _margins()["chapter_setup"]
    ci, full = setup("ch02", 3, "ci", cells=2), setup("ch02", 3, "full", cells=2)
    assert (ci["seed"], ci["fp_instances"], ci["fp_clients"], ci["fp_dim"]) == (3, 10, 8, 10)
    assert (full["fp_clients"], full["fp_dim"], full["fig2_rounds"]) == (16, 20, 1000)
    ch09 = setup("ch09", 5, "ci", cells=2)
    assert ch09["rounds"] == 200 and ch09["clock"].seed == 5 and ch09["problem"].num_clients == 30
    ch04 = setup("ch04", 3, "ci", cells=3)   # parameters, sizes, the problem
    assert (ch04["seeds"], ch04["rounds"], tuple(ch04["replacement_lrs"])) == ((9, 10, 11), 60, (0.02, 0.0025))
    assert ch04["prob"].num_clients == 30 and setup("ch04", 3, "full", cells=3)["rounds"] == 200
    ch10 = setup("ch10", 4, "full", cells=(0, 1))  # code cells by position
    assert (ch10["seed"], ch10["synthetic_rounds"], ch10["synthetic_lrs"]) == (4, 200, [0.005, 0.02])
    for cells in ((1, 2), ()):
        with pytest.raises(ValueError, match="the parameters cell"):
            setup("ch10", 4, "ci", cells=cells)


def test_measure_chapter_margins_ch02_matches_the_chapters_simulated_distances(capsys):
    """Its closed-form distances are the chapter's fixed-point check (the simulated limits, to 1e-10) summed over the
    instances; printed with the median and the worst seeds."""
    import numpy as np

    from fedlib.experiments import quadratic as Q
    from fedlib.problems import random_quadratic

    m = _margins()
    q = m["ch02_quantities"](1, "ci")
    total = dict.fromkeys(Q.CLOSED_FORM, 0.0)
    for k in range(10):
        prob = random_quadratic(8, 10, seed=Q.instance_seed(1, k))
        for c in Q.fixed_point_check(prob, Q.fixed_local_steps(1, k, 8, 1, 10), 0.05, 1.0):
            total[c.name] += c.dist_to_opt
    assert q["fixed points: sum d_nova / sum d_avg"] == pytest.approx(total["fednova"] / total["fedavg"], rel=1e-8)
    assert q["fixed points: sum d_prox / sum d_avg"] == pytest.approx(total["fedprox"] / total["fedavg"], rel=1e-8)
    assert 0.9 < q["Figure 2: radius min"] <= q["Figure 2: radius max"] < 1 and np.isfinite(list(q.values())).all()
    m["main"](["ch02", "--seeds", "1", "2"])
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "ch02, ci profile, chapter seeds 1-2:" and len(out) == 1 + len(q)
    assert out[1].startswith("  fixed points: sum d_nova / sum d_avg: median ") and "(seed 1)" in out[1]


@pytest.mark.slow
def test_measure_chapter_margins_ch04_figure5_is_the_chapters_claims(capsys):
    """At chapter seed 59 (ci) the chapter printed FedAvg / FedNova at the end 2.95 2.99 2.94 (fixed), 3.63 3.63 3.71
    (random), 1.46 2.75 3.50 (partial), FedProx's mu = 1 (the grid 0.01, 0.1, 1, 10), and FedNova reaching FedAvg's end
    in 2 of 60 rounds at every run seed with full participation; with equal epochs FedAvg itself got there at round 52 or
    later, so FedNova / FedAvg is at most 2 / 52 (the chapter's new assert: at most 1/2)."""
    _margins()["main"](["ch04", "--seeds", "59", "59", "--figure5", "--no-lr-sweep"])
    median = _printed_medians(capsys)
    assert median["FedProx's mu: grid steps from the grid's ends (asserted > 0)"] == 1
    for setting, smallest in (("fixed", 2.94), ("random", 3.63), ("partial", 1.46)):
        shown = median[f"Figure 5, {setting}: smallest FedAvg / FedNova of a run seed (asserted > 1)"]
        assert shown == pytest.approx(smallest, abs=0.005), (setting, shown)
    for setting in ("fixed", "random"):
        assert median[f"Figure 5, {setting}: FedNova's largest rounds to FedAvg's end / rounds (asserted <= 0.5)"] == (
            pytest.approx(2 / 60, abs=1e-4))
    assert median["Figure 5, fixed: largest FedNova / FedAvg rounds to FedAvg's end (asserted <= 0.5)"] == (
        pytest.approx(2 / 52, abs=1e-4))
    assert 0 < median["local momentum: largest FedNova / FedAvg of a run seed, last half (asserted < 1)"] < 1
    assert len(median) == 12 + 3  # Figure 5 and the solvers, then the sampling-with-replacement tables


def test_measure_chapter_margins_ch07_is_the_chapters_slopes_and_bounds():
    """Without the bounds: at chapter seed 444 (ci) the chapter printed the slopes 0.997 (FedAvg to argmin F~) and 0.982
    (FedNova to argmin F; fitted over 0.003125-0.025 before, 0.885 failed the band's 0.9). The bounds' quantities are
    those of the library's rows (here with T = 250, 500 and 2 replicas in place of the chapter's sizes)."""
    import numpy as np

    from fedlib.experiments import bounds

    m = _margins()
    q = m["ch07_quantities"](444, "ci", bounds=False)
    assert q["FedAvg's slope to argmin F~ - 0.9 (asserted > 0)"] + 0.9 == pytest.approx(0.997, abs=5e-4)
    assert q["FedNova's slope to argmin F - 0.9 (asserted > 0)"] + 0.9 == pytest.approx(0.982, abs=5e-4)
    assert q["1.2 - FedNova's slope to argmin F (asserted > 0)"] == pytest.approx(1.2 - 0.982, abs=5e-4)
    assert q["largest fixed-point residual (asserted < 1e-10)"] < 1e-10 and len(q) == 8
    chapter_setup = m["ch07_quantities"].__globals__["chapter_setup"]

    def smaller(*args, **kwargs):
        return {**chapter_setup(*args, **kwargs), "bound_rounds": (250, 500), "bound_replicas": 2}
    m["ch07_quantities"].__globals__["chapter_setup"] = smaller
    q = m["ch07_quantities"](3, "ci")
    quad, steps = bounds.default_setup(seed=3)
    rows = [bounds.bound_check(quad, steps, a, s, T, replicas=2, seed=3)
            for a in ("fedavg", "fednova") for s in ("sgd", "momentum") for T in (250, 500)]
    assert q["Theorem 1: smallest bound / measured (asserted > 1)"] == min(r.ratio for r in rows)
    floor = [r.true_measured / r.true_bound.total for r in rows if r.algorithm == "fedavg" and r.rounds == 500]
    assert q["largest T: FedAvg's smallest E||grad F||^2 / the bound read for F (asserted > 1)"] == min(floor)
    assert len(floor) == 2 and len(q) == 12 and np.isfinite(list(q.values())).all()


def test_measure_chapter_margins_ch08_is_the_chapters_part_1(capsys):
    """At chapter seed 0 (ci, T = 100 to 6400) the chapter printed the slopes 0.943 (FedNova to x*) and 0.543 (FedAvg
    to x~), FedAvg 0.978 of |x* - x~| from x* and 26.8 times farther than FedNova at the smallest eta."""
    q = _margins()["ch08_quantities"](0, "ci")
    assert q["FedNova's slope to x* - 0.8 (asserted > 0)"] + 0.8 == pytest.approx(0.943, abs=5e-4)
    assert q["1.2 - FedNova's slope to x* (asserted > 0)"] == pytest.approx(1.2 - 0.943, abs=5e-4)
    assert q["FedAvg's slope to x~ (asserted > 0.25)"] == pytest.approx(0.543, abs=5e-4)
    assert q["smallest eta: FedAvg's distance to x* / |x* - x~| (asserted > 0.75)"] == pytest.approx(0.978, abs=5e-4)
    assert q["smallest eta: FedAvg's distance to x* / FedNova's (asserted > 10)"] == pytest.approx(26.8, abs=0.05)
    assert q["largest FedNova distance at the next T / at this T (asserted < 1)"] < 1 and len(q) == 7
    _margins()["main"](["ch08", "--seeds", "0", "0"])
    assert _printed_medians(capsys)["FedAvg's slope to x~ (asserted > 0.25)"] == pytest.approx(0.543, abs=5e-4)


def test_measure_chapter_margins_ch08_speedup_is_the_chapters_part_2(capsys):
    """At chapter seed 0 (ci) the chapter printed FedNova's slope -0.480 against m tau T, 1.03 at its one equal budget,
    and at the largest budget FedAvg 0.717, FedNova 0.06916 +- 0.001439 against the floor ||grad F(x~)||^2 = 0.725."""
    _margins()["main"](["ch08", "--seeds", "0", "0", "--speedup"])
    q = _printed_medians(capsys)
    assert q["FedNova's slope against m tau T + 0.6 (asserted > 0)"] == pytest.approx(0.6 - 0.480, abs=5e-4)
    assert q["-0.4 - FedNova's slope against m tau T (asserted > 0)"] == pytest.approx(0.480 - 0.4, abs=5e-4)
    for cells in ("cells with T >= k m (asserted < 1.5)", "all cells (not asserted)"):  # ci: every T >= 16 m
        assert q[f"largest / smallest error at an equal m tau T, {cells}"] == pytest.approx(1.03, abs=5e-3)
    assert q["largest budget: (floor - FedNova) / FedNova's standard error (asserted > 3)"] == pytest.approx(
        (0.725 - 0.06916) / 0.001439, rel=2e-3)
    assert q["largest budget: FedAvg / floor (asserted > 0.85)"] == pytest.approx(0.717 / 0.725, rel=2e-3)
    assert q["largest budget: (FedAvg - 1.1 floor) / FedNova (asserted < 1)"] == pytest.approx(
        (0.717 - 1.1 * 0.725) / 0.0692, abs=0.02)
    assert q["floor ||grad F(x~)||^2 / FedNova at the largest budget"] == pytest.approx(0.725 / 0.0692, rel=2e-3)
    assert len(q) == 8


@pytest.mark.slow
def test_measure_chapter_margins_ch10_is_the_chapters_parts_5_and_6(capsys):
    """At chapter seed 99 (ci) the chapter's table of end losses (E = 2, three run seeds) printed FedNova-VR 0.372 /
    0.370 / 0.374 against FedAvg 1.145 / 1.142 / 1.142, FedNova 0.383 / 0.385 / 0.387, SCAFFOLD 1.903 / 1.870 / 1.957;
    its perturbation runs grew by 1.0918 (SCAFFOLD) and 0.9947 (FedNova-VR) per round, 0.9882 and 0.9612 in the
    controls (equal steps, capped)."""
    _margins()["main"](["ch10", "--seeds", "99", "99"])
    median = _printed_medians(capsys)
    ratio = pytest.approx  # of losses printed to 3 decimals
    assert median["lr 0.02, E = 2: largest FedNova-VR / FedAvg (asserted < 1)"] == ratio(0.374 / 1.142, rel=3e-3)
    assert median["lr 0.02, E = 2: largest FedNova-VR / FedNova (asserted < 1.05)"] == ratio(0.372 / 0.383, rel=3e-3)
    assert median["lr 0.02, E = 2: smallest SCAFFOLD / FedAvg (asserted > 1)"] == ratio(1.870 / 1.142, rel=3e-3)
    rates = {"E = 2, SCAFFOLD": 1.0918, "E = 2, FedNova-VR": 0.9947, "equal steps, SCAFFOLD": 0.9882,
             "capped, SCAFFOLD": 0.9612}
    for label, rate in rates.items():
        shown = next(k for k in median if k.startswith(f"perturbation, {label}: growth per round"))
        assert median[shown] == pytest.approx(rate, abs=6e-4), (label, median[shown])  # printed to 4 digits
    assert len(median) == 16


@pytest.mark.slow
def test_measure_chapter_margins_ch10_perturbation_only_is_part_6_alone(capsys):
    """--perturbation-only: the same four perturbation runs at chapter seed 99 (ci), without part 5's losses."""
    _margins()["main"](["ch10", "--seeds", "99", "99", "--perturbation-only"])
    median = _printed_medians(capsys)
    rates = {"E = 2, SCAFFOLD": 1.0918, "E = 2, FedNova-VR": 0.9947, "equal steps, SCAFFOLD": 0.9882,
             "capped, SCAFFOLD": 0.9612}
    for label, rate in rates.items():
        shown = f"perturbation, {label}: growth per round (asserted {'>' if label == 'E = 2, SCAFFOLD' else '<'} 1)"
        assert median[shown] == pytest.approx(rate, abs=6e-4), (label, median[shown])
    assert len(median) == 8 and all(k.startswith("perturbation, ") for k in median)


def test_measure_chapter_margins_orders_the_worst_seeds():
    """Largest first, but smallest first for the quantities whose small values are the risk."""
    summarise = _margins()["summarise"]
    lines = summarise({0: {"a ratio": 0.2, "radius min": 0.95}, 1: {"a ratio": 0.4, "radius min": 0.93}})
    assert lines == ["a ratio: median 0.3; worst 0.4 (seed 1), 0.2 (seed 0)",
                     "radius min: median 0.94; worst 0.93 (seed 1), 0.95 (seed 0)"]


@pytest.mark.slow
def test_measure_chapter_margins_ch09_is_the_chapters_claim_2(capsys):
    """At chapter seed 98 (ci) the chapter printed shifts 0.1015, 0.1108, 0.0931 and a spread of 0.0105."""
    _margins()["main"](["ch09", "--seeds", "98", "98"])
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("  claim 2: min shift / spread: median 8.8") and out[1].endswith("(seed 98)"), out


@pytest.mark.slow
def test_measure_chapter_margins_ch04_is_the_chapters_comparison_under_sampling(capsys):
    """At chapter seed 82 (ci) the chapter's first table printed mean losses over the last 30 rounds of 1.3447 (FedAvg),
    4.0794 (FedNova) and 3.6557 (sampled tau_eff) with replacement, 0.5201 and 105.2920 under scheme (ii): ratios 3.034,
    2.719 and 202.4 (the final losses asserted before had FedNova below FedAvg there, 1.2762 against 1.3334)."""
    _margins()["main"](["ch04", "--seeds", "82", "82", "--no-lr-sweep"])
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "ch04, ci profile, chapter seeds 82-82:" and len(out) == 4, out
    assert out[1].startswith("  (i): FedNova / FedAvg (asserted > 1): median 3.034"), out
    assert out[2].startswith("  (i): sampled tau_eff / FedAvg (asserted > 1): median 2.719"), out
    assert out[3].startswith("  (ii): sampled / population tau_eff (asserted > 2): median 202.4"), out

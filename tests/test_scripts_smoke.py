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


# --------------------------------------------------------------------------- scripts/measure_chapter_margins.py
def _margins():
    """scripts/measure_chapter_margins.py as a module (the numbers of chapters 2's, 4's and 9's margin comments)."""
    return runpy.run_path(str(Path(__file__).resolve().parents[1] / "scripts" / "measure_chapter_margins.py"),
                          run_name="measure_chapter_margins")


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

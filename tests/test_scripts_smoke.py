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

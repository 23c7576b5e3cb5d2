"""Mutation-testing pass on ``scripts/gpu_run.sh``: each test pins a behaviour that a surviving mutant changed
without any other test failing. A stub ``PYTHON`` plays every Python step (nothing is trained); run on the CPU
through tests/gpu_script.py's ``gpu_run``.

Mutants of c5aa211..361d535 (scripts/gpu_run.sh: BUDGET read in decimal, db0a87c; the 0.5 s wait for table1 with packing
every 5 s, c4efc8d; torch's CUDA check left to table1 when it is the call's only Python step, 38d0a01) (pass described
in tests/README.md, Mutation passes):
  G1 ``BUDGET=$(( BUDGET ))`` (octal); G2 ``sleep 5`` in the wait; G3 packing every 100 ticks (50 s); G4 TICKS not
  advanced (packing every 0.5 s); G5 the SKIP_TABLE1 test inverted; G6 RUN_CUDA_TESTS unset read as 0; G7
  SKIP_BENCH unset read as 1; G8 never packed during the run. 8 mutants, one at a time, ``pytest -x -q`` on
  test_gpu_script.py's leading-zero, packing and CUDA-check tests: 2 killed by the suite, 4 here, 1 equivalent, 1
  left alive.
  killed by the suite: G1, G5 (test_gpu_script.py). killed here: G3, G8
  (test_a_result_is_packed_while_table1_still_runs); G6, G7 by the cases with a setting left unset added to
  test_gpu_script.py::test_torchs_cuda_check_is_left_to_table1_only_when_it_is_the_calls_only_python_step.
  equivalent: G4 (pack_new every 0.5 s packs the same files; only the work of looking changes).
  left alive then: G2 (table1's end noticed within 5 s instead of 0.5 s: the same output, later); killed since by
  test_table1s_end_is_looked_for_every_half_second (a stub ``sleep`` records the waits asked for).

Mutants of 361d535..3ffdca4 (scripts/gpu_run.sh: 0 refused for the counts, CUDA_TESTS_LIMIT and BENCH_LIMIT < 15,
de85337; every whole-number setting read in decimal once, leading zeros off, at most 9 digits, 69d34a7; every step's
timeout capped by ``fit LIMIT FLOOR`` at what is left of the budget less 10 s, 5 s of kill grace, 0eb588b) (pass
described in tests/README.md, Mutation passes):
  GS1 CUDA_TESTS_LIMIT, GS2 BENCH_RUNS, GS3 IMAGES_PER_SECOND left out of WHOLE_NUMBERS; GS4 PROFILE_STEPS left out
  of the at-least-1 list; GS5 ``break`` for ``continue`` on an unset setting; GS6 one leading zero off
  (``${value#0}``); GS7 9 digits refused (``-ge 9``); GS8 10 digits accepted (``-gt 10``); GS9 all zeros left empty
  (``${value}`` for ``${value:-0}``); GS10 the count's 0 compared as ``00``; GS11 CUDA_TESTS_LIMIT=0 never refused;
  GS12 BENCH_LIMIT=15 refused (``-le``); GS13 14 accepted (``-lt 14``); GS14 the 9 digits counted on the value as
  typed (leading zeros in); GF1 the cap a second higher (``- MARGIN + 1``), GF2 a second lower; GF3 the floor not
  lowered to the step's own limit (``floor=$2``); GF4 ``$1 <= cap``; GF5 a step at its floor skipped (``-gt``); GF6
  the floor ignored (only ``-ge 1``); GF7 ``-ge 1`` dropped; GF8 ``GRACE=0``; GF9 ``MARGIN=5``; GF10 nvidia-smi's
  30 s, GF14 torch's 120 s, GF15 pytest's import 30 s, GF17 the engine's tests' CUDA_TESTS_LIMIT, GF19
  ClientOptimizer's ``-k 5 30``, GF21 bench's BENCH_LIMIT, GF22 the rate read's 30 s (``fit`` dropped), GF25 the
  profile's BENCH_LIMIT, each uncapped; GF11 nvidia-smi's fit inverted; GF12 torch's floor 1; GF13 no exit 3 when
  torch's check does not fit; GF16 the engine's tests' floor 1; GF18 ClientOptimizer's floor 5; GF20
  ClientOptimizer's ``timeout`` without -k; GF23 a bench step's floor 1; GF24 bench_step's fit inverted (``||``);
  GF26 BENCH_MODES ignored; GF27 table1's ``timeout`` without -k; GF28 nvidia-smi's floor 10; GF29 pytest's import's
  floor 10. 43 mutants, one at a time, ``pytest -x -q`` on test_gpu_script_settings.py, test_gpu_rehearsal.py,
  test_gpu_script_budget.py, this file's tests of the earlier pass and test_gpu_script.py (its first-call and
  split-call tests only for GS1-GF4): 23 killed by the suite, 18 here, 2 equivalent.
  killed by the suite: GS1-GS6, GS8-GS14 (test_gpu_script_settings.py), GF1, GF9, GF21 (test_gpu_rehearsal.py's
  call 5), GF10, GF13, GF14, GF17 (test_gpu_script_budget.py's small budgets), GF11 (test_gpu_rehearsal.py's calls
  3 and 4), GF24, GF26 (test_gpu_script_settings.py's leading zeros). killed here: GS7
  (test_a_whole_number_of_nine_digits_is_accepted), GF2, GF8, GF15, GF19, GF20, GF22, GF25
  (test_every_step_is_capped_at_the_budget_left_less_10_s_with_5_s_of_kill_grace), GF3, GF5, GF6, GF12, GF16, GF18,
  GF23, GF28, GF29 (test_a_step_runs_down_to_its_floor_and_is_skipped_below_it), GF27
  (test_table1_is_killed_10_s_before_the_budget_with_5_s_of_kill_grace).
  equivalent: GF4 (LIMIT is the same number when ``$1`` equals the cap), GF7 (the floor is at least 1: the least
  own limits are CUDA_TESTS_LIMIT >= 1 and BENCH_LIMIT >= 15, the least floor 5).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tarfile

import pytest
from gpu_script import gpu_run, gpu_run_call, stub_timeouts, write_clock_stubs

pytestmark = pytest.mark.slow


def test_a_result_is_packed_while_table1_still_runs(tmp_path):
    """The new result files are packed while table1 runs (every 5 s), so that they come back even if the call is
    cut short, not only once table1 has ended. The stub table1 writes a result, then waits for the packed file to
    appear (up to 40 s, eight times the packing period) and exits 4 when it does, 5 when it never does.
    Mutants G3 (packed every 50 s), G8 (never packed during the run)."""
    out = tmp_path / "out"
    tar = out / "cifar10-results.tar.gz"
    stub = tmp_path / "python"
    stub.write_text('#!/bin/sh\nwhile [ "$#" -gt 0 ]; do [ "$1" = --results ] && R=$2; shift; done\n'
                    'echo "{}" > "$R/a__seed0.json"\ni=0\n'
                    f'while [ ! -f "{tar}" ]; do\n'
                    '    i=$((i + 1)); [ "$i" -gt 400 ] && exit 5\n    sleep 0.1\ndone\nexit 4\n')
    stub.chmod(0o755)
    results = tmp_path / "results"
    results.mkdir()
    proc = gpu_run(out, results, budget=100, SKIP_BENCH="1", PYTHON=str(stub))
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "table1 exit status 4" in proc.stdout and "packed 1 new result file(s)" in proc.stdout, proc.stdout
    with tarfile.open(tar) as packed:
        assert packed.getnames() == ["a__seed0.json"]


def test_table1s_end_is_looked_for_every_half_second(tmp_path):
    """While table1 runs, the script looks every 0.5 s whether it has ended (a ``sleep 5`` kept the call, on the
    device's time, waiting up to 5 s after table1's end). A stub ``sleep`` first on PATH records each wait it is
    asked for, then sleeps it; the stub table1 runs 1.5 s (the real ``sleep``, by its path).
    Mutant G2 (``sleep 5``)."""
    real_sleep = shutil.which("sleep")
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    waits = tmp_path / "waits.txt"
    (stubs / "sleep").write_text(f'#!/bin/sh\necho "$*" >> {waits}\nexec {real_sleep} "$@"\n')
    (stubs / "sleep").chmod(0o755)
    stub = tmp_path / "python"
    stub.write_text(f"#!/bin/sh\n{real_sleep} 1.5\nexit 0\n")
    stub.chmod(0o755)
    proc = gpu_run(tmp_path / "out", tmp_path / "results", budget=100, SKIP_BENCH="1", PYTHON=str(stub),
                   PATH=f"{stubs}{os.pathsep}{os.environ['PATH']}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    asked = waits.read_text().split()
    assert asked and set(asked) == {"0.5"}, asked


# ------------------------------------------------ de85337, 69d34a7, 0eb588b: the caps, on a frozen virtual clock
#: ``date +%s`` reads the virtual clock $CLOCK, which moves only when a step spends time (the other stubs:
#: tests/gpu_script.py's write_clock_stubs, first on PATH)
_DATE = '#!/bin/bash\nif [ "$*" = +%s ]; then cat "$CLOCK"; else exec REAL_DATE "$@"; fi\n'

#: each step by the words of its command line (the first that matches)
_STEPS = [("table1", " table1 "), ("smi", "nvidia-smi"), ("torch", "import torch"), ("pytest", "import pytest"),
          ("stacked", "test_stacked_engine"), ("optim", "test_optim"), ("profile", "--profile"),
          ("compare", "--compare"), ("graph", "--cuda-graph"), ("eager", " bench "), ("rate", "import json")]


def _on_the_clock(tmp, budget, steps="", **settings):
    """Run gpu_run.sh with DEVICE=cuda on the frozen clock: (exit status, output, [(second, grace, limit, step)])
    of every ``timeout -k GRACE LIMIT`` it ran (grace None when it had no -k)."""
    tmp.mkdir()
    stubs = write_clock_stubs(tmp / "stubs", _DATE)
    (tmp / "clock").write_text("1000000\n")
    (tmp / "timeouts.txt").write_text("")
    cmd, env = gpu_run_call(tmp / "out", tmp / "results", budget=budget, DEVICE="cuda", PYTHON=str(stubs / "python"),
                            PATH=f"{stubs}{os.pathsep}{os.environ['PATH']}", CLOCK=str(tmp / "clock"),
                            STUB_TIMEOUTS=str(tmp / "timeouts.txt"), STUB_STEPS=steps, **settings)
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    calls = []
    for at, grace, limit, words in stub_timeouts(tmp / "timeouts.txt"):
        command = f" {' '.join(words)} "
        step = next(name for name, pattern in _STEPS if pattern in command)
        calls.append((at - 1000000, grace, limit, step))
    return proc.returncode, proc.stdout + proc.stderr, calls


def test_every_step_is_capped_at_the_budget_left_less_10_s_with_5_s_of_kill_grace(tmp_path):
    """A 35-s budget whose steps all end at once: each step's own limit (nvidia-smi 30 s, torch's check 120, pytest's
    import 30, the CUDA tests 90 and 30, the four bench steps BENCH_LIMIT=30, the rate read from the bench's file
    30) is over 35 − 10 = 25, so every ``timeout`` gets ``-k 5 25``. Mutants of 0eb588b: GF2 (the cap a second
    lower), GF8 (no kill grace), GF15, GF19, GF22, GF25 (a step's own limit, not capped), GF20 (one ``timeout``
    without -k)."""
    status, out, calls = _on_the_clock(tmp_path / "call", 35, BENCH_LIMIT="30", SKIP_TABLE1="1",
                                       BENCH_MODES="graph eager profile compare")
    assert status == 0, out
    steps = ["smi", "torch", "pytest", "stacked", "optim", "graph", "eager", "profile", "compare", "rate"]
    assert calls == [(0, 5, 25, step) for step in steps], (calls, out)


GPU = dict(RUN_CUDA_TESTS="0")  # the GPU check alone (a budget under 90 s has no bench)
TESTS = dict(SKIP_BENCH="1")  # the GPU check and the CUDA tests
BENCH = dict(RUN_CUDA_TESTS="0", BENCH_LIMIT="30")  # the GPU check and the four bench steps
SMI, TORCH = (0, 5, 30, "smi"), (0, 5, 90, "torch")


@pytest.mark.parametrize("budget, steps, settings, status, expected, logged", [
    # nvidia-smi's floor (5 s), then torch's check's (10 s): no time for the check is exit 3
    (15, "", GPU, 3, [(0, 5, 5, "smi")], "no time for the GPU check, stopping"),
    (14, "", GPU, 3, [], "no nvidia-smi"),
    (20, "", GPU, 0, [(0, 5, 10, "smi"), (0, 5, 10, "torch")], "budget too small for the benchmark"),
    (19, "", GPU, 3, [(0, 5, 9, "smi")], "no time for the GPU check, stopping"),
    # the CUDA tests after a torch check of 70 to 86 s: pytest's import (5 s), the engine's tests (10 s, or
    # CUDA_TESTS_LIMIT if less; hanging: their limit plus the 5-s grace), ClientOptimizer's (10 s)
    (100, "*import torch*=70;*test_stacked*=hang", dict(TESTS, CUDA_TESTS_LIMIT="5"), 0,
     [SMI, TORCH, (70, 5, 20, "pytest"), (70, 5, 5, "stacked"), (80, 5, 10, "optim")],
     "CUDA tests of ClientOptimizer, limit 10s"),
    (100, "*import torch*=71;*test_stacked*=hang", dict(TESTS, CUDA_TESTS_LIMIT="5"), 0,
     [SMI, TORCH, (71, 5, 19, "pytest"), (71, 5, 5, "stacked")], "CUDA tests of ClientOptimizer skipped"),
    (100, "*import torch*=80;*test_stacked*=hang", TESTS, 0,
     [SMI, TORCH, (80, 5, 10, "pytest"), (80, 5, 10, "stacked")], "CUDA tests of ClientOptimizer skipped"),
    (100, "*import torch*=81", TESTS, 0, [SMI, TORCH, (81, 5, 9, "pytest")],
     "CUDA tests of the stacked engine skipped"),
    (100, "*import torch*=85", TESTS, 0, [SMI, TORCH, (85, 5, 5, "pytest")],
     "CUDA tests of the stacked engine skipped"),
    (100, "*import torch*=86", TESTS, 0, [SMI, TORCH], "no pytest or no time left"),
    # the bench steps (15 s), then the rate read from the first bench's file (5 s)
    (100, "*--cuda-graph*=60;* bench *--json*=15;*--profile*=1", BENCH, 0,
     [SMI, TORCH, (0, 5, 30, "graph"), (60, 5, 30, "eager"), (75, 5, 15, "profile"), (76, 5, 14, "rate")],
     "the compare bench skipped"),
    (100, "*--cuda-graph*=60;* bench *--json*=16", BENCH, 0,
     [SMI, TORCH, (0, 5, 30, "graph"), (60, 5, 30, "eager"), (76, 5, 14, "rate")], "the profile skipped"),
    (100, "*--cuda-graph*=60;* bench *--json*=15;*--profile*=10", BENCH, 0,
     [SMI, TORCH, (0, 5, 30, "graph"), (60, 5, 30, "eager"), (75, 5, 15, "profile"), (85, 5, 5, "rate")],
     "the compare bench skipped"),
    (100, "*--cuda-graph*=60;* bench *--json*=15;*--profile*=11", BENCH, 0,
     [SMI, TORCH, (0, 5, 30, "graph"), (60, 5, 30, "eager"), (75, 5, 15, "profile")], "the compare bench skipped"),
])
def test_a_step_runs_down_to_its_floor_and_is_skipped_below_it(tmp_path, budget, steps, settings, status, expected,
                                                               logged):
    """Each step runs while what is left of the budget less 10 s is at least its floor (5 s for nvidia-smi, pytest's
    import and the rate read from the bench's file; 10 s for torch's check and the CUDA tests, or CUDA_TESTS_LIMIT if
    that is less; 15 s for a bench step), with that as its limit, and is skipped one second below it (logged; torch's
    check skipped is exit 3). Mutants of 0eb588b: GF3 (the floor not lowered to CUDA_TESTS_LIMIT), GF5 (a step at
    its floor skipped), GF6 (the floors ignored), GF12, GF16, GF18, GF23, GF28, GF29 (one step's floor changed)."""
    found, out, calls = _on_the_clock(tmp_path / "call", budget, steps, SKIP_TABLE1="1",
                                      BENCH_MODES="graph eager profile compare", **settings)
    assert found == status and calls == expected, (calls, out)
    assert logged in out, out


def test_a_whole_number_of_nine_digits_is_accepted(tmp_path):
    """At most 9 digits, counted without the leading zeros: 999999999 and 0999999999 both reach table1 as
    999999999. A stub PYTHON records the command lines fedlib would get. Mutant of 69d34a7: GS7 (9 digits
    refused)."""
    calls = tmp_path / "calls.txt"
    stub = tmp_path / "python"
    stub.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexit 0\n')
    stub.chmod(0o755)
    for rounds in ("999999999", "0999999999"):
        proc = gpu_run(tmp_path / rounds, tmp_path / "results", PYTHON=str(stub), SKIP_BENCH="1", TABLE1_ROUNDS=rounds)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    table1 = [line for line in calls.read_text().splitlines() if " table1 " in line]
    assert len(table1) == 2 and all("--rounds 999999999 " in line for line in table1), table1


def test_table1_is_killed_10_s_before_the_budget_with_5_s_of_kill_grace(tmp_path):
    """Table 1 runs under ``timeout -k 5`` at what is left less 10 s (100 − 10 = 90; its own budget 100 − 45 = 55),
    so that it ends 5 s before the call's budget at the latest. SKIP_BENCH=1 RUN_CUDA_TESTS=0: nvidia-smi and
    table1 are the only steps. Mutant of 0eb588b: GF27 (table1's ``timeout`` without -k)."""
    status, out, calls = _on_the_clock(tmp_path / "call", 100, SKIP_BENCH="1", RUN_CUDA_TESTS="0")
    assert status == 0 and calls == [(0, 5, 30, "smi"), (0, 5, 90, "table1")], (calls, out)
    assert "table1 --budget-seconds 55 (hard limit 90s)" in out, out

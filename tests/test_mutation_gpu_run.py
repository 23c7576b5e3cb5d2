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
  (test_a_result_is_packed_while_table1_still_runs), G6, G7
  (test_torchs_cuda_check_runs_where_a_default_adds_a_python_step).
  equivalent: G4 (pack_new every 0.5 s packs the same files; only the work of looking changes).
  left alive: G2 (table1's end noticed within 5 s instead of 0.5 s: the same output, later; only a test on wall
  time would tell).
"""
from __future__ import annotations

import tarfile

import pytest
from gpu_script import gpu_run

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


@pytest.mark.parametrize("settings", [dict(SKIP_BENCH="1"), dict(RUN_CUDA_TESTS="0")])
def test_torchs_cuda_check_runs_where_a_default_adds_a_python_step(tmp_path, settings):
    """The CUDA check is left to table1 only where table1 is the call's only Python step; a setting left unset takes
    its default: RUN_CUDA_TESTS unset runs the CUDA tests (default 1), SKIP_BENCH unset the benchmark (default 0),
    so torch's check runs first. A stub PYTHON records how it is started (``-c``: the check, which passes).
    Mutants G6 (RUN_CUDA_TESTS unset read as 0), G7 (SKIP_BENCH unset read as 1)."""
    calls = tmp_path / "calls.txt"
    stub = tmp_path / "python"
    stub.write_text(f'#!/bin/sh\necho "$1 $2 $3" | tr "\\n" " " >> {calls}\necho >> {calls}\nexit 0\n')
    stub.chmod(0o755)
    proc = gpu_run(tmp_path / "out", tmp_path / "results", budget=100, PYTHON=str(stub), DEVICE="cuda",
                   BENCH_MODES="graph", **settings)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = calls.read_text().splitlines()
    assert any(line.startswith("-c") and "import torch" in line for line in lines), lines
    assert "CUDA check left to table1" not in proc.stdout, proc.stdout

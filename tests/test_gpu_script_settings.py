"""scripts/gpu_run.sh's whole-number settings, checked before anything runs: a value that passes the check
must mean what it says in the script's header, and one that does not stops the call at once (exit 2, no log).
A stub PYTHON (it only exits 0) stands in for fedlib, so each call takes a second or so."""
from __future__ import annotations

import pytest
from gpu_script import gpu_run


@pytest.fixture
def stub(tmp_path):
    path = tmp_path / "python"
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return str(path)


COUNTS = ["TABLE1_STACK", "TABLE1_ROUNDS", "BENCH_RUNS", "BENCH_STEPS", "BENCH_REPEAT", "PROFILE_STEPS",
          "IMAGES_PER_SECOND"]


@pytest.mark.parametrize("env, message", [
    *[({name: "0"}, f"{name} must be at least 1, got '0'") for name in COUNTS],
    (dict(TABLE1_STACK="000"), "TABLE1_STACK must be at least 1, got '000'"),
    (dict(CUDA_TESTS_LIMIT="0"), "RUN_CUDA_TESTS=0 skips the tests"),
    (dict(CUDA_TESTS_LIMIT="00"), "CUDA_TESTS_LIMIT must be at least 1"),
    (dict(BENCH_LIMIT="0"), "BENCH_LIMIT must be at least 15"),
    (dict(BENCH_LIMIT="14"), "SKIP_BENCH=1 skips the benchmark"),
])
def test_a_zero_count_or_limit_stops_the_call_at_once(tmp_path, stub, env, message):
    """0 passed the whole-number check: table1 or bench refused it only after the GPU check, the CUDA tests and the
    benchmark had run, and CUDA_TESTS_LIMIT=0 ran the CUDA tests under `timeout 0`, i.e. with no limit at all."""
    proc = gpu_run(tmp_path / "out", tmp_path / "results", PYTHON=stub, **env)
    assert proc.returncode == 2 and message in proc.stderr, proc.stdout + proc.stderr
    assert not (tmp_path / "out" / "log.txt").exists()


@pytest.mark.parametrize("env", [dict(CONTINUE_LATER_SECONDS="0"), dict(BENCH_LIMIT="15"), dict(CUDA_TESTS_LIMIT="1"),
                                 {name: "1" for name in COUNTS}])
def test_the_smallest_meaningful_values_are_accepted(tmp_path, stub, env):
    proc = gpu_run(tmp_path / "out", tmp_path / "results", PYTHON=stub, **env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "table1 exit status 0" in (tmp_path / "out" / "log.txt").read_text()

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
    *[({name: "0"}, f"{name} must be at least 1, got 0") for name in COUNTS],
    (dict(TABLE1_STACK="000"), "TABLE1_STACK must be at least 1, got 0"),
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


def test_whole_numbers_with_leading_zeros_are_read_in_decimal(tmp_path):
    """Only BUDGET_SECONDS was read in decimal (db0a87c): CONTINUE_LATER_SECONDS=00 compared != 0 as a string and
    demanded a RESULTS folder outside the tree, and the other settings reached fedlib, or bash's arithmetic, as typed
    (08 and 09 are no octal numbers). A stub PYTHON records the command lines fedlib would get."""
    calls = tmp_path / "calls.txt"
    stub = tmp_path / "python"
    stub.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexit 0\n')
    stub.chmod(0o755)
    settings = dict(CONTINUE_LATER_SECONDS="00", TABLE1_STACK="08", TABLE1_ROUNDS="09", IMAGES_PER_SECOND="0800",
                    BENCH_LIMIT="090", BENCH_STEPS="010", BENCH_RUNS="02", BENCH_REPEAT="01", PROFILE_STEPS="0003",
                    CUDA_TESTS_LIMIT="060")
    proc = gpu_run(tmp_path / "out", "data/results/cifar10", budget=600, PYTHON=str(stub), **settings)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    log = (tmp_path / "out" / "log.txt").read_text()
    assert "continue_later=0 images_per_second=800 " in log and "stack=8 rounds=9 " in log, log
    assert "bench cifar10 eager, limit 90s" in log, log
    lines = calls.read_text().splitlines()
    bench = [line for line in lines if " bench " in line and "--profile" not in line]
    profile = [line for line in lines if "--profile" in line]
    table1 = [line for line in lines if " table1 " in line]
    assert len(bench) == len(profile) == len(table1) == 1, lines
    assert "--steps 10 --repeat 1 --runs 2 " in bench[0] and "--steps 3 --repeat 1 --runs 2 " in profile[0]
    assert "--images-per-second 800 " in table1[0] and "--stack 8 --rounds 9 " in table1[0]
    assert table1[0].endswith("--continue-later 0"), table1[0]


def test_a_whole_number_of_ten_digits_stops_the_call(tmp_path, stub):
    """Ten digits are a typo, and bash's 64-bit arithmetic would wrap a long one (2**64 reads as 0)."""
    proc = gpu_run(tmp_path / "out", tmp_path / "results", PYTHON=stub, TABLE1_ROUNDS="1234567890")
    assert proc.returncode == 2 and "TABLE1_ROUNDS must be at most 999999999" in proc.stderr, proc.stderr
    proc = gpu_run(tmp_path / "out", tmp_path / "results", PYTHON=stub, TABLE1_ROUNDS="0000000000001", SKIP_BENCH="1")
    assert proc.returncode == 0, proc.stdout + proc.stderr

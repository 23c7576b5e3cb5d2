"""scripts/gpu_run.sh and scripts/import_gpu_results.py, run on the CPU (DEVICE=cpu, the
shipped sample, tiny width): the glue that a scarce GPU session depends on works before
any GPU time is spent on it. The calls that pause and resume, or are cut short, are in
tests/test_gpu_script_resume.py (a second file, so that ``make test``'s two processes share
the work)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile

import pytest
from gpu_script import CELLS, ROOT, gpu_run, import_results

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def first_call(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gpu_run")
    proc = gpu_run(tmp / "out", tmp / "results", budget=600)  # a ceiling: the bench and the profile get 100 s each (they need ~4-20 s; 40 s of a 240-s budget ran out on a loaded machine)
    return tmp, proc


def test_script_benchmarks_runs_table1_and_packs(first_call):
    tmp, proc = first_call
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = tmp / "out"
    assert sorted(p.name for p in out.iterdir()) == ["bench_cifar10_eager.json", "cifar10-results.tar.gz", "log.txt",
                                                     "profile_eager.txt"]
    assert "Self CPU" in (out / "profile_eager.txt").read_text()  # the profiler's operator table
    bench = json.loads((out / "bench_cifar10_eager.json").read_text())
    assert bench["config"]["runs"] == 2 and bench["config"]["precision"] == "bf16"
    log = (out / "log.txt").read_text()
    assert "80% of the benchmark's engine rate" in log and "table1 exit status 0" in log
    with tarfile.open(out / "cifar10-results.tar.gz") as tar:
        assert sorted(tar.getnames()) == sorted(f"{c}__seed0.json" for c in CELLS)
    # results land in RESULTS (a later call skips them) and say how they were made
    doc = json.loads((tmp / "results" / "sgd-e2-fedavg__seed0.json").read_text())
    assert doc["config"]["engine"]["precision"] == "bf16" and doc["summary"]["seconds_per_run"] > 0


def test_second_call_skips_present_results(first_call):
    tmp, _ = first_call
    proc = gpu_run(tmp / "out2", tmp / "results", SKIP_BENCH="1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    log = (tmp / "out2" / "log.txt").read_text()
    assert "no new Table 1 result" in log and "3 already present" in proc.stdout
    assert "SKIP_BENCH=1: no benchmark" in log and not (tmp / "out2" / "bench_cifar10_eager.json").exists()
    assert not (tmp / "out2" / "cifar10-results.tar.gz").exists()


def test_import_files_results_and_refuses_bad_ones(first_call, tmp_path):
    tmp, _ = first_call
    repo = tmp_path / "repo"
    proc = import_results(tmp / "out", repo)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (repo / "data/results/cifar10").iterdir()) == sorted(f"{c}__seed0.json" for c in CELLS)
    assert sorted(p.name for p in (repo / "data/results/bench").iterdir()) == [
        "cifar10_cpu-smoke_bf16_r2.json", "profile_eager_cpu-smoke.txt"]
    assert len(list((repo / "data/results/gpu-logs").iterdir())) == 1
    assert "final test accuracy" in proc.stdout and "ratio" in proc.stdout
    # again: existing files are kept
    proc = import_results(tmp / "out", repo)
    assert proc.returncode == 0 and "kept existing data/results/cifar10/sgd-e2-fedavg__seed0.json" in proc.stdout
    # a result renamed to another cell, or a broken archive: refused, nothing written
    bad = tmp_path / "bad"
    bad.mkdir()
    with tarfile.open(bad / "cifar10-results.tar.gz", "w:gz") as tar:
        tar.add(tmp / "results" / "sgd-e2-fedavg__seed0.json", arcname="momentum-e2-fedavg__seed0.json")
    proc = import_results(bad, tmp_path / "repo2")
    assert proc.returncode == 2 and "its config says cell 'sgd-e2-fedavg'" in proc.stderr
    assert not any((tmp_path / "repo2").iterdir())
    (bad / "cifar10-results.tar.gz").write_bytes(b"not a tar file")
    proc = import_results(bad, tmp_path / "repo2")
    assert proc.returncode == 2 and "nothing written" in proc.stderr
    # without --smoke, a CPU run on the sample is not filed as Table 1 (table1 would refuse it later)
    proc = import_results(tmp / "out", tmp_path / "repo3", smoke=False)
    assert proc.returncode == 2 and "not a run of the paper's setup" in proc.stderr, proc.stderr
    assert "width 0.03 (the paper's: 1.0)" in proc.stderr and "device cpu" in proc.stderr
    assert not any((tmp_path / "repo3").iterdir())


@pytest.mark.parametrize("env, message", [
    (dict(SKIP_BENCH="yes"), "SKIP_BENCH must be 0 or 1"),
    (dict(BENCH_LIMIT="95s"), "BENCH_LIMIT must be a whole number"),
    (dict(TABLE1_CELL="sgd-e2-fedavg"), "unknown setting TABLE1_CELL"),
    (dict(SEED_RESULTS_FROM="data/result/cifar10"), "holds no *__seed*.json result files"),
    (dict(CONTINUE_LATER_SECONDS="60", RESULTS="./data/results/cifar10"), "needs RESULTS outside the tree"),
    (dict(FEDLIB_GIT_COMMIT="4f66826"), "FEDLIB_GIT_COMMIT must be a full 40-hex-digit commit"),
])
def test_a_mistyped_setting_stops_the_call_at_once(tmp_path, env, message):
    """A typo must cost seconds, not a device call spent doing something else."""
    results = env.pop("RESULTS", tmp_path / "results")
    proc = gpu_run(tmp_path / "out", results, **env)
    assert proc.returncode == 2 and message in proc.stderr, proc.stdout + proc.stderr
    assert not (tmp_path / "out" / "log.txt").exists()


def test_split_calls_bench_on_random_images_then_table1_with_the_hint(tmp_path):
    """The device calls that carry the CIFAR-10 parts one by one: the first benchmarks the
    real split with random pixels (no Table 1), the last runs Table 1 with the rate handed on.
    (float32 and no profile: on the CPU bf16 rounds take ~3x longer, and the fixture's call
    covers the default precision and the profile.)"""
    fast = dict(PRECISION="fp32", RUN_CUDA_TESTS="0")
    first = gpu_run(tmp_path / "a", tmp_path / "results", budget=600, data="random-images", SKIP_TABLE1="1",
                    BENCH_MODES="eager compare", BENCH_COMPARE="base runs=3", **fast)
    assert first.returncode == 0, first.stdout + first.stderr
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["bench_cifar10_compare.json", "bench_cifar10_eager.json",
                                                                  "log.txt"]
    bench = json.loads((tmp_path / "a" / "bench_cifar10_eager.json").read_text())
    assert bench["config"]["num_train"] == 50000 and "random images" in bench["config"]["data"]
    assert "SKIP_TABLE1=1: no Table 1 runs" in (tmp_path / "a" / "log.txt").read_text()
    compare = json.loads((tmp_path / "a" / "bench_cifar10_compare.json").read_text())
    assert [v["variant"] for v in compare["summary"]["variants"]] == ["base", "runs=3"]
    imported = import_results(tmp_path / "a", tmp_path / "repo")
    assert imported.returncode == 0, imported.stderr
    assert "base " in imported.stdout and "runs=3 " in imported.stdout
    assert (tmp_path / "repo/data/results/bench/cifar10_cpu-smoke_fp32_r2_compare.json").is_file()
    # a variant the bench refuses (runs=2 is the base) is logged and the script goes on
    refused = gpu_run(tmp_path / "e", tmp_path / "results", budget=240, data="random-images", SKIP_TABLE1="1",
                      BENCH_MODES="compare", BENCH_COMPARE="runs=2", **fast)
    assert refused.returncode == 0, refused.stdout + refused.stderr
    log = (tmp_path / "e" / "log.txt").read_text()
    assert "compare bench exit status 2" in log and "already the base engine's setting" in log
    last = gpu_run(tmp_path / "b", tmp_path / "results", SKIP_BENCH="1", IMAGES_PER_SECOND="1000",
                   TABLE1_CELLS="sgd-e2-fedavg", **fast)
    assert last.returncode == 0, last.stdout + last.stderr
    assert "estimate: 1000 images/s (hint)" in last.stdout
    with tarfile.open(tmp_path / "b" / "cifar10-results.tar.gz") as tar:
        assert tar.getnames() == ["sgd-e2-fedavg__seed0.json"]
    # a later call on the same machine with RESULTS outside the (re-sent) tree, seeded from the
    # committed folder: what is committed or was written by the earlier call is not trained again
    committed = tmp_path / "committed"
    committed.mkdir()
    # (FedAvg's result relabelled as FedNova's: a file's config must name the cell its name says)
    from fedlib.experiments import cifar10 as table1

    doc = json.loads((tmp_path / "results" / "sgd-e2-fedavg__seed0.json").read_text())
    doc["config"]["cell_id"] = "sgd-e2-fednova"
    doc["config"]["table1_cell"] = table1._BY_ID["sgd-e2-fednova"].config()
    (committed / "sgd-e2-fednova__seed0.json").write_text(json.dumps(doc))
    again = gpu_run(tmp_path / "d", tmp_path / "results", SKIP_BENCH="1", IMAGES_PER_SECOND="1000",
                    TABLE1_CELLS="sgd-e2-fedavg,sgd-e2-fednova", SEED_RESULTS_FROM=str(committed), **fast)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "2 already present" in again.stdout and "no new Table 1 result" in (tmp_path / "d" / "log.txt").read_text()
    # random pixels never train Table 1; a rate must be a number
    for extra, msg in (({}, "SKIP_TABLE1=1"), ({"SKIP_TABLE1": "1", "IMAGES_PER_SECOND": "1e5"}, "whole number")):
        proc = gpu_run(tmp_path / "c", tmp_path / "results", data="random-images", **extra)
        assert proc.returncode == 2 and msg in proc.stderr


def test_script_refuses_bad_arguments(tmp_path):
    script = str(ROOT / "scripts" / "gpu_run.sh")
    for args, msg in ((["x"], "usage"), ([str(tmp_path), "sample", "ten"], "whole number"),
                      ([str(tmp_path), str(tmp_path / "nodata"), "10"], "does not exist")):
        proc = subprocess.run(["bash", script, *args], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and msg in proc.stderr
    proc = gpu_run(tmp_path / "o", tmp_path / "r", CONV="fft")
    assert proc.returncode == 2 and "CONV must be cudnn or gemm" in proc.stderr


def test_import_refuses_a_result_of_another_cell_definition_or_commit(tmp_path):
    """audit-e: import checks the recorded cell against CELLS and the commit against this repository."""
    import copy

    base = json.loads((ROOT / "data/results/cifar10/momentum-e2-fednova__seed0.json").read_text())
    cases = [(lambda d: d["config"]["table1_cell"].update(lr=0.5), "cell lr 0.5 (now 0.02)"),
             (lambda d: d["provenance"].update(git_commit="unknown"), "names no commit"),
             (lambda d: d["provenance"].update(git_commit="f" * 40), "is not in this repository"),
             (lambda d: (d["history"][-1].update(test_accuracy=None), d["summary"].update(final_test_accuracy=None)),
              "no final test accuracy")]
    for i, (mutate, message) in enumerate(cases):
        d = copy.deepcopy(base)
        mutate(d)
        folder = tmp_path / str(i)
        folder.mkdir()
        f = tmp_path / f"{i}.json"
        f.write_text(json.dumps(d))
        with tarfile.open(folder / "cifar10-results.tar.gz", "w:gz") as tar:
            tar.add(f, arcname="momentum-e2-fednova__seed0.json")
        proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "import_gpu_results.py"), str(folder),
                               "--repo", str(ROOT)], capture_output=True, text=True)
        assert proc.returncode == 2 and message in proc.stderr and "nothing written" in proc.stderr, proc.stderr


@pytest.mark.parametrize("budget", ["0600", "0099"])
def test_a_budget_with_leading_zeros_is_read_in_decimal(tmp_path, budget):
    """BUDGET_SECONDS passed the whole-number check with leading zeros, then bash's arithmetic read it in octal:
    0600 gave Table 1 ~339 s instead of ~555 s, and 0099 stopped the script with 'value too great for base'. A stub
    PYTHON (it only exits 0) shows the budget table1 is given, at once."""
    stub = tmp_path / "python"
    stub.write_text("#!/bin/sh\nexit 0\n")
    stub.chmod(0o755)
    proc = gpu_run(tmp_path / "out", tmp_path / "results", budget=budget, SKIP_BENCH="1", PYTHON=str(stub))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    inner = int(re.search(r"table1 --budget-seconds (\d+) ", proc.stdout).group(1))
    assert int(budget) - 45 - 5 <= inner <= int(budget) - 45, proc.stdout


def test_results_written_while_table1_runs_are_packed_and_its_status_kept(tmp_path):
    """The loop that waits for table1 (it looks every 0.5 s, packs every 5 s) still packs every result written,
    the last ones after table1's end, and passes table1's exit status on. A stub PYTHON plays table1: it writes
    one result, later a second, and exits 4."""
    stub = tmp_path / "python"
    stub.write_text('#!/bin/sh\nwhile [ "$#" -gt 0 ]; do [ "$1" = --results ] && R=$2; shift; done\n'
                    'echo "{}" > "$R/a__seed0.json"; sleep 1; echo "{}" > "$R/b__seed0.json"; exit 4\n')
    stub.chmod(0o755)
    results = tmp_path / "results"
    results.mkdir()
    (results / "old__seed0.json").write_text("{}")  # present before the call: not packed
    proc = gpu_run(tmp_path / "out", results, budget=100, SKIP_BENCH="1", PYTHON=str(stub))
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "table1 exit status 4" in proc.stdout and "packed 2 new result file(s)" in proc.stdout, proc.stdout
    with tarfile.open(tmp_path / "out" / "cifar10-results.tar.gz") as tar:
        assert sorted(tar.getnames()) == ["a__seed0.json", "b__seed0.json"]


@pytest.mark.parametrize("settings, checked", [
    (dict(SKIP_BENCH="1", RUN_CUDA_TESTS="0"), False),  # table1 alone: it checks the device itself
    (dict(SKIP_BENCH="1", RUN_CUDA_TESTS="1"), True),
    (dict(SKIP_BENCH="0", RUN_CUDA_TESTS="0"), True),
    (dict(SKIP_BENCH="1", RUN_CUDA_TESTS="0", SKIP_TABLE1="1"), True),
    # a setting left unset takes its default: RUN_CUDA_TESTS 1 (the CUDA tests run), SKIP_BENCH 0 (the benchmark
    # runs), so torch's check runs (mutants G6, G7 of tests/test_mutation_gpu_run.py: unset read as 0 / as 1)
    (dict(SKIP_BENCH="1"), True),
    (dict(RUN_CUDA_TESTS="0"), True),
])
def test_torchs_cuda_check_is_left_to_table1_only_when_it_is_the_calls_only_python_step(tmp_path, settings, checked):
    """On a GPU (DEVICE=cuda) the script starts torch once to check CUDA before anything else, except in a call
    whose only Python step is table1 (the next session's calls 3 and 4), which refuses a missing GPU at once
    itself. A stub PYTHON records how it is started (``-c``: the check, which passes here)."""
    calls = tmp_path / "calls.txt"
    stub = tmp_path / "python"
    stub.write_text(f'#!/bin/sh\necho "$1 $2 $3" | tr "\\n" " " >> {calls}\necho >> {calls}\nexit 0\n')
    stub.chmod(0o755)
    proc = gpu_run(tmp_path / "out", tmp_path / "results", budget=100, PYTHON=str(stub), DEVICE="cuda",
                   BENCH_MODES="graph", **settings)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = calls.read_text().splitlines()
    torch_check = [line for line in lines if line.startswith("-c") and "import torch" in line]
    assert bool(torch_check) == checked, lines
    assert ("-m fedlib table1 " in lines) == (settings.get("SKIP_TABLE1") != "1"), lines
    assert ("CUDA check left to table1" in proc.stdout) == (not checked), proc.stdout

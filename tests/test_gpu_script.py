"""scripts/gpu_run.sh and scripts/import_gpu_results.py, run on the CPU (DEVICE=cpu, the
shipped sample, tiny width): the glue that a scarce GPU session depends on works before
any GPU time is spent on it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

# the script's steps run under wall-clock budgets: a second test process on the same cores
# would make them time out (make test runs these alone, after the parallel part)
pytestmark = pytest.mark.serial

ROOT = Path(__file__).resolve().parents[1]
CELLS = ["sgd-e2-fedavg", "sgd-e2-fednova", "sgd-u25-fedavg"]


def _gpu_run(out, results, budget=100, data="sample", **extra):
    env = dict(os.environ, DEVICE="cpu", WIDTH="0.03", TABLE1_ROUNDS="1", TABLE1_SEEDS="0",
               TABLE1_CELLS=",".join(CELLS), BENCH_STEPS="2", BENCH_RUNS="2", RESULTS=str(results),
               PYTHON=sys.executable, OMP_NUM_THREADS="1", PROFILE_STEPS="2")
    env.update(extra)
    return subprocess.run(["bash", str(ROOT / "scripts" / "gpu_run.sh"), str(out), data, str(budget)], env=env,
                          capture_output=True, text=True, timeout=300)


def _import(folder, repo, *extra):
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "import_gpu_results.py"), str(folder),
                           "--repo", str(repo), "--tag", "cpu-smoke", *extra],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


@pytest.fixture(scope="module")
def first_call(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gpu_run")
    proc = _gpu_run(tmp / "out", tmp / "results", budget=150)  # the bench and the profile get 25 s each
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
    proc = _gpu_run(tmp / "out2", tmp / "results", SKIP_BENCH="1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    log = (tmp / "out2" / "log.txt").read_text()
    assert "no new Table 1 result" in log and "3 already present" in proc.stdout
    assert "SKIP_BENCH=1: no benchmark" in log and not (tmp / "out2" / "bench_cifar10_eager.json").exists()
    assert not (tmp / "out2" / "cifar10-results.tar.gz").exists()


def test_import_files_results_and_refuses_bad_ones(first_call, tmp_path):
    tmp, _ = first_call
    repo = tmp_path / "repo"
    proc = _import(tmp / "out", repo)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (repo / "data/results/cifar10").iterdir()) == sorted(f"{c}__seed0.json" for c in CELLS)
    assert sorted(p.name for p in (repo / "data/results/bench").iterdir()) == [
        "cifar10_cpu-smoke_bf16_r2.json", "profile_eager_cpu-smoke.txt"]
    assert len(list((repo / "data/results/gpu-logs").iterdir())) == 1
    assert "final test accuracy" in proc.stdout and "ratio" in proc.stdout
    # again: existing files are kept
    proc = _import(tmp / "out", repo)
    assert proc.returncode == 0 and "kept existing data/results/cifar10/sgd-e2-fedavg__seed0.json" in proc.stdout
    # a result renamed to another cell, or a broken archive: refused, nothing written
    bad = tmp_path / "bad"
    bad.mkdir()
    with tarfile.open(bad / "cifar10-results.tar.gz", "w:gz") as tar:
        tar.add(tmp / "results" / "sgd-e2-fedavg__seed0.json", arcname="momentum-e2-fedavg__seed0.json")
    proc = _import(bad, tmp_path / "repo2")
    assert proc.returncode == 2 and "its config says cell 'sgd-e2-fedavg'" in proc.stderr
    assert not (tmp_path / "repo2").exists()
    (bad / "cifar10-results.tar.gz").write_bytes(b"not a tar file")
    proc = _import(bad, tmp_path / "repo2")
    assert proc.returncode == 2 and "nothing written" in proc.stderr


def test_split_calls_bench_on_random_images_then_table1_with_the_hint(tmp_path):
    """The device calls that carry the CIFAR-10 parts one by one: the first benchmarks the
    real split with random pixels (no Table 1), the last runs Table 1 with the rate handed on."""
    first = _gpu_run(tmp_path / "a", tmp_path / "results", data="random-images", SKIP_TABLE1="1",
                     BENCH_MODES="eager profile", PROFILE_STEPS="2")
    assert first.returncode == 0, first.stdout + first.stderr
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["bench_cifar10_eager.json", "log.txt",
                                                                  "profile_eager.txt"]
    bench = json.loads((tmp_path / "a" / "bench_cifar10_eager.json").read_text())
    assert bench["config"]["num_train"] == 50000 and "random images" in bench["config"]["data"]
    assert "SKIP_TABLE1=1: no Table 1 runs" in (tmp_path / "a" / "log.txt").read_text()
    last = _gpu_run(tmp_path / "b", tmp_path / "results", SKIP_BENCH="1", RUN_CUDA_TESTS="0",
                    IMAGES_PER_SECOND="1000", TABLE1_CELLS="sgd-e2-fedavg")
    assert last.returncode == 0, last.stdout + last.stderr
    assert "estimate: 1000 images/s (hint)" in last.stdout
    with tarfile.open(tmp_path / "b" / "cifar10-results.tar.gz") as tar:
        assert tar.getnames() == ["sgd-e2-fedavg__seed0.json"]
    # a later call on the same machine with RESULTS outside the (re-sent) tree, seeded from the
    # committed folder: what is committed or was written by the earlier call is not trained again
    committed = tmp_path / "committed"
    committed.mkdir()
    (committed / "sgd-e2-fednova__seed0.json").write_bytes((tmp_path / "results" / "sgd-e2-fedavg__seed0.json").read_bytes())
    again = _gpu_run(tmp_path / "d", tmp_path / "results", SKIP_BENCH="1", RUN_CUDA_TESTS="0",
                     IMAGES_PER_SECOND="1000", TABLE1_CELLS="sgd-e2-fedavg,sgd-e2-fednova",
                     SEED_RESULTS_FROM=str(committed))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "2 already present" in again.stdout and "no new Table 1 result" in (tmp_path / "d" / "log.txt").read_text()
    # random pixels never train Table 1; a rate must be a number
    for extra, msg in (({}, "SKIP_TABLE1=1"), ({"SKIP_TABLE1": "1", "IMAGES_PER_SECOND": "1e5"}, "whole number")):
        proc = _gpu_run(tmp_path / "c", tmp_path / "results", data="random-images", **extra)
        assert proc.returncode == 2 and msg in proc.stderr


def test_a_group_paused_in_one_call_is_finished_by_the_next(tmp_path):
    """CONTINUE_LATER_SECONDS: the call's Table 1 time ends inside a group, which pauses with a
    checkpoint in RESULTS (outside the tree, as /tmp on the device); the next call on the same
    machine resumes it and writes the results, packed by that call."""
    kw = dict(SKIP_BENCH="1", RUN_CUDA_TESTS="0", IMAGES_PER_SECOND="5000", TABLE1_ROUNDS="30",
              TABLE1_CELLS="sgd-e2-fedavg,sgd-e2-fednova", PRECISION="fp32")
    # 66 s: 21 s for Table 1 after the script's reserve, less than the 30 rounds take (1 to 3.5 s each on
    # the CPUs we have measured) and more than 3 rounds at the hinted rate (1.7 s each), so that the group
    # starts in this call. The second call's 300 s cover the rest at 3.5 s a round with room to spare.
    first = _gpu_run(tmp_path / "a", tmp_path / "results", budget=66, CONTINUE_LATER_SECONDS="1200", **kw)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "paused sgd-e2-fedavg__seed0, sgd-e2-fednova__seed0" in first.stdout, first.stdout
    assert "2 paused for the next call" in first.stdout
    assert list((tmp_path / "results").glob(".ckpt__*.pkl")) and not (tmp_path / "a" / "cifar10-results.tar.gz").exists()
    second = _gpu_run(tmp_path / "b", tmp_path / "results", budget=300, **kw)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "resuming after round" in second.stdout and "2 written" in second.stdout
    assert not list((tmp_path / "results").glob(".ckpt__*.pkl"))
    with tarfile.open(tmp_path / "b" / "cifar10-results.tar.gz") as tar:
        assert sorted(tar.getnames()) == ["sgd-e2-fedavg__seed0.json", "sgd-e2-fednova__seed0.json"]
        doc = json.loads(tar.extractfile("sgd-e2-fednova__seed0.json").read())
    assert doc["summary"]["resumed_after_round"] > 0 and len(doc["history"]) == 30
    # the checkpoint has to survive the next call's fresh tree
    proc = _gpu_run(tmp_path / "c", "data/results/cifar10", CONTINUE_LATER_SECONDS="60", **kw)
    assert proc.returncode == 2 and "outside the tree" in proc.stderr


def test_script_refuses_bad_arguments(tmp_path):
    script = str(ROOT / "scripts" / "gpu_run.sh")
    for args, msg in ((["x"], "usage"), ([str(tmp_path), "sample", "ten"], "whole number"),
                      ([str(tmp_path), str(tmp_path / "nodata"), "10"], "does not exist")):
        proc = subprocess.run(["bash", script, *args], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and msg in proc.stderr


def test_results_come_back_when_the_call_is_cut_short(tmp_path):
    """A device call cut at its time limit returns what is under OUT: the finished results
    are packed as soon as they exist, not only at the end. Kill the whole script (SIGKILL)
    right after the first pack and read the archive."""
    import signal
    import time

    out = tmp_path / "out"
    env = dict(os.environ, DEVICE="cpu", WIDTH="0.03", TABLE1_ROUNDS="2", TABLE1_SEEDS="0,1",
               TABLE1_CELLS=",".join(CELLS), SKIP_BENCH="1", RESULTS=str(tmp_path / "results"),
               PYTHON=sys.executable, OMP_NUM_THREADS="1", PROFILE_STEPS="2")
    proc = subprocess.Popen(["bash", str(ROOT / "scripts" / "gpu_run.sh"), str(out), "sample", "200"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    archive = out / "cifar10-results.tar.gz"
    deadline = time.time() + 240
    try:
        while time.time() < deadline and not archive.exists() and proc.poll() is None:
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    assert archive.exists()
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        assert names and all(n.endswith(".json") for n in names)
        for member in tar.getmembers():
            assert json.loads(tar.extractfile(member).read())["kind"] == "run"

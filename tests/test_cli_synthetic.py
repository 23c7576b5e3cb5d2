"""``python -m fedlib run synthetic`` / ``bench synthetic``: end to end on a tiny LEAF data set
written in tmp_path, and every bad input (exit status 2, the message names the flag or
file, no output file); --alpha's bound and its help; an integer past 64 bits, running out of memory and a
failed write are one-line errors, not tracebacks."""
from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fedlib.engines.batched
from fedlib.cli import main
from fedlib.data import save_leaf, synthetic
from fedlib.results import HISTORY_KEYS, PROVENANCE_KEYS, read_result

from cliutil import cli_exit

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def leaf_dir(tmp_path_factory):
    """A tiny LEAF folder (train/ and test/) with 4 clients."""
    folder = tmp_path_factory.mktemp("leaf") / "tiny"
    save_leaf(synthetic(num_clients=4, seed=0, num_samples=[30, 40, 25, 50]), folder)
    return folder


@pytest.fixture(scope="module")
def leaf_file(tmp_path_factory):
    """A single LEAF .json file (training data only)."""
    path = tmp_path_factory.mktemp("leaf1") / "train.json"
    save_leaf(synthetic(num_clients=3, seed=1, num_samples=[20, 30, 25]), path, drop_test=True)
    return path


def _subprocess(*args):
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "fedlib", *args], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=300)


def _cli(capsys, *args):
    """Run the CLI in-process: (exit status, stdout, stderr)."""
    try:
        code = main(list(args))
    except SystemExit as exc:  # argparse errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


# ----------------------------------------------------------------------------- end to end
def test_run_synthetic_end_to_end_subprocess(leaf_dir, tmp_path):
    out = tmp_path / "res.json"
    proc = _subprocess("run", "synthetic", "--data", str(leaf_dir), "--algorithm", "fednova", "--rounds", "3",
                       "--batch-size", "10", "--epochs", "1-3", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "final training loss" in proc.stdout and str(out) in proc.stdout
    doc = json.loads(out.read_text())
    assert read_result(out) == doc
    assert doc["kind"] == "run"
    for key in ("config", "provenance", "history"):
        assert key in doc
    cfg = doc["config"]
    assert cfg["algorithm"] == "fednova" and cfg["rounds"] == 3 and cfg["epochs"] == "1-3"
    assert cfg["data"]["source"] == str(leaf_dir) and cfg["data"]["num_clients"] == 4
    prov = doc["provenance"]
    for key in PROVENANCE_KEYS:
        assert key in prov
    assert prov["command"].startswith("python -m fedlib run synthetic")
    assert prov["device"] == "cpu" and prov["wall_time_s"] >= 0
    assert len(doc["history"]) == 3
    for i, rec in enumerate(doc["history"]):
        for key in HISTORY_KEYS:
            assert key in rec
        assert rec["round"] == i and len(rec["local_steps"]) == 4
        assert 0 <= rec["test_accuracy"] <= 1 and np.isfinite(rec["train_loss"])
    assert doc["history"][-1]["train_loss"] < doc["initial"]["train_loss"]


def test_run_synthetic_generated_data_in_process(capsys, tmp_path):
    out = tmp_path / "r.json"
    code, stdout, err = _cli(capsys, "run", "synthetic", "--num-clients", "5", "--rounds", "2", "--algorithm",
                             "fedprox", "--mu", "0.1", "--sampling", "with-replacement", "--clients-per-round", "3",
                             "--server", "momentum", "--out", str(out), "--progress")
    assert code == 0, err
    doc = read_result(out)
    assert doc["config"]["solver"] == "prox" and doc["config"]["mu"] == 0.1
    assert doc["config"]["server_momentum"] == 0.9 and doc["config"]["data"]["generator"] == "synthetic"
    assert len(doc["history"]) == 2 and len(doc["history"][0]["clients"]) <= 3
    assert "round" in err  # the tqdm bar (forced by --progress)


def test_tau_eff_population_and_the_sampling_warning(capsys, tmp_path, leaf_dir):
    """--tau-eff population: sum_i p_i E||a_i||_1 over all clients, by hand from the training
    sizes (27, 36, 22, 45: the train split of the 30, 40, 25, 50 samples), batch 10,
    E ~ U{1..3}, local SGD (||a||_1 = tau): E[E] ceil(n_i/10) = 2 * (3, 4, 3, 5), p = n / 130.
    Every round uses it; a FedNova run that samples with a tau_eff from the sample warns (only then)."""
    common = ["run", "synthetic", "--data", str(leaf_dir), "--algorithm", "fednova", "--rounds", "3", "--batch-size",
              "10", "--epochs", "1-3", "--sampling", "with-replacement", "--clients-per-round", "2", "--quiet"]
    out = tmp_path / "pop.json"
    code, _, err = _cli(capsys, *common, "--tau-eff", "population", "--out", str(out))
    assert code == 0, err
    assert "warning" not in err
    doc = read_result(out)
    n = np.array([27, 36, 22, 45])
    expected = float(n / n.sum() @ (2.0 * np.array([3, 4, 3, 5])))  # 1032 / 130
    assert doc["config"]["tau_eff"] == "population"
    assert doc["config"]["tau_eff_value"] == pytest.approx(expected, rel=1e-14)
    assert [h["tau_eff"] for h in doc["history"]] == pytest.approx([expected] * 3, rel=1e-14)
    code, _, err = _cli(capsys, *common, "--out", str(tmp_path / "sample.json"))
    assert code == 0 and "warning: fednova with --sampling with-replacement" in err and "--tau-eff population" in err
    taus = [h["tau_eff"] for h in read_result(tmp_path / "sample.json")["history"]]
    assert len(set(taus)) > 1  # taken from each round's sample
    code, _, err = _cli(capsys, *common, "--tau-eff", "12.5", "--out", str(tmp_path / "fixed.json"))
    assert code == 0 and "warning" not in err
    code, _, err = _cli(capsys, *common[:-5], "--quiet", "--out", str(tmp_path / "full.json"))  # full participation
    assert code == 0 and "warning" not in err
    code, _, err = _cli(capsys, *common, "--algorithm", "fedavg", "--tau-eff", "population")
    assert code == 2 and "--tau-eff" in err


def test_reference_engine_gives_the_same_history(capsys, tmp_path, leaf_file):
    res = []
    for engine in ("batched", "reference"):
        out = tmp_path / f"{engine}.json"
        code, _, err = _cli(capsys, "run", "synthetic", "--data", str(leaf_file), "--rounds", "2", "--engine",
                            engine, "--solver", "momentum", "--algorithm", "fednova", "--batch-size", "8",
                            "--quiet", "--out", str(out))
        assert code == 0, err
        res.append(read_result(out))
    a, b = (r["history"] for r in res)
    assert [h["train_loss"] for h in a] == pytest.approx([h["train_loss"] for h in b], abs=1e-10)
    assert a[0]["test_accuracy"] is None  # a single file has no test data
    assert res[0]["config"]["momentum"] == 0.9


def test_bench_synthetic_writes_json(capsys, tmp_path):
    out = tmp_path / "bench.json"
    code, stdout, err = _cli(capsys, "bench", "synthetic", "--rounds", "1", "--repeat", "1", "--json", str(out))
    assert code == 0, err
    assert "speedup" in stdout
    doc = read_result(out)
    assert doc["kind"] == "bench" and doc["summary"]["max_abs_param_diff"] <= 1e-10
    assert doc["summary"]["speedup_wall"] > 0 and doc["config"]["num_clients"] == 30


def test_help_documents_flags_and_defaults(capsys):
    code, out, _ = _cli(capsys, "run", "synthetic", "--help")
    assert code == 0
    for flag in ("--algorithm", "--solver", "--lr", "--mu", "--momentum", "--weight-decay", "--tau-eff", "--server",
                 "--server-momentum", "--server-lr", "--rounds", "--epochs", "--batch-size", "--clients-per-round",
                 "--sampling", "--seed", "--data", "--alpha", "--beta", "--num-clients", "--out", "--quiet"):
        assert flag in out
    assert "(default: 0.02)" in out and "(default: 20)" in out


@pytest.mark.parametrize("command", [("run", "synthetic"), ("bench", "synthetic"), ("run", "cifar10"),
                                     ("bench", "cifar10"), ("table1",), ("rerun",)])
def test_help_reads_as_plain_text(capsys, command):
    """No reST markup in the help, and a flag's help mentions only choices it offers."""
    code, out, _ = _cli(capsys, *command, "--help")
    assert code == 0 and "``" not in out
    if "--precision {fp32,bf16}" in out:
        assert "fp64" not in out


# ----------------------------------------------------------------------------- bad input
BAD = [
    # (args, text the message must contain)
    (["--data", "{missing}"], "{missing}"),
    (["--data", "{malformed}"], "{malformed}"),
    (["--sampling", "uniform", "--clients-per-round", "50"], "--clients-per-round"),
    (["--sampling", "with-replacement"], "--clients-per-round"),
    (["--clients-per-round", "2"], "--clients-per-round"),
    (["--algorithm", "fedprox"], "--mu"),
    (["--algorithm", "fedprox", "--mu", "0"], "--mu"),
    (["--algorithm", "fedprox", "--solver", "sgd", "--mu", "1"], "--solver"),
    (["--solver", "sgd", "--mu", "0.1"], "--mu"),
    (["--solver", "sgd", "--momentum", "0.5"], "--momentum"),
    (["--algorithm", "fedavg", "--tau-eff", "3"], "--tau-eff"),
    (["--tau-eff", "sample"], "--tau-eff"),
    (["--server-momentum", "0.5"], "--server-momentum"),
    (["--epochs", "2-x"], "--epochs"),
    (["--epochs", "5-2"], "--epochs"),
    (["--epochs", "0"], "--epochs"),
    (["--lr", "-1"], "--lr"),
    (["--momentum", "1.5", "--solver", "momentum"], "--momentum"),
    (["--rounds", "0"], "--rounds"),
    (["--out", "{nofolder}"], "--out"),
    (["--device", "cuda"], "--device"),  # the numpy backend runs on the CPU
    (["--engine", "reference", "--backend", "torch"], "--engine reference"),
    (["--no-such-flag"], "--no-such-flag"),
]


@pytest.mark.parametrize("args,needle", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_exits_2_names_the_problem_and_writes_nothing(capsys, tmp_path, leaf_dir, args, needle):
    paths = {"missing": str(tmp_path / "nope.json"), "malformed": str(tmp_path / "bad.json"),
             "nofolder": str(tmp_path / "no" / "dir" / "r.json")}
    (tmp_path / "bad.json").write_text('{"users": ["a"], "num_samples": [1], "user_data": ')
    args = [a.format(**paths) for a in args]
    needle = needle.format(**paths)
    out = tmp_path / "out.json"
    extra = [] if "--data" in args else ["--data", str(leaf_dir)]
    if "--out" not in args:
        extra += ["--out", str(out)]
    code, stdout, err = _cli(capsys, "run", "synthetic", "--rounds", "2", *extra, *args) if "--rounds" not in args \
        else _cli(capsys, "run", "synthetic", *extra, *args)
    assert code == 2
    assert needle in err, err
    if "usage:" not in err:   # our checks after parsing name the sub-command too
        assert err.startswith("python -m fedlib run synthetic: error:"), err
    assert not out.exists() and not Path(paths["nofolder"]).exists()
    assert list(tmp_path.glob(".*.tmp")) == []


def test_bad_data_file_subprocess_exit_status(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text("not json")
    out = tmp_path / "out.json"
    proc = _subprocess("run", "synthetic", "--data", str(bad), "--out", str(out))
    assert proc.returncode == 2
    assert str(bad) in proc.stderr and "not valid JSON" in proc.stderr
    assert not out.exists() and proc.stdout == ""


def test_divergence_names_the_round_and_writes_nothing(capsys, tmp_path, leaf_dir):
    out = tmp_path / "out.json"
    out_existing = tmp_path / "keep.json"
    out_existing.write_text("old")
    for target, before in ((out, None), (out_existing, "old")):
        # with an L2 penalty a huge lr blows up geometrically (plain softmax gradients are bounded)
        code, _, err = _cli(capsys, "run", "synthetic", "--data", str(leaf_dir), "--lr", "1e6", "--l2", "0.001",
                            "--rounds", "20", "--out", str(target))
        assert code == 2
        assert "diverged in round" in err and "nothing written" in err
        assert (target.read_text() if target.exists() else None) == before


# --------------------------------------------------------------------------- --alpha above ALPHA_MAX
def test_cli_alpha_above_alpha_max_names_the_flag():
    rc, _, err = cli_exit(["run", "synthetic", "--alpha", "1e9", "--rounds", "1"])
    assert rc == 2
    assert "error: --alpha must be at most ALPHA_MAX" in err and "error: alpha" not in err


# --------------------------------------------------------------------------- --alpha's help
def test_cli_alpha_help_states_the_bound(capsys):
    """--help said the data 'do not depend on' alpha at any size; alpha above 2**26 is now refused."""
    from fedlib.cli import main
    with pytest.raises(SystemExit):
        main(["run", "synthetic", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "so the labels do not depend on it; at most 2**26, above which float64 rounding would change them" in text


RUN = ["run", "synthetic", "--num-clients", "3", "--quiet"]


def test_out_of_memory_is_a_clean_error(tmp_path, monkeypatch, capsys):
    """--epochs 1000000000 asked numpy for 37 GiB and ended in a MemoryError traceback (exit 1)."""
    def too_big(*args, **kwargs):
        raise MemoryError("Unable to allocate 37.3 GiB")

    monkeypatch.setattr(fedlib.engines.batched, "run_engine", too_big)
    out = tmp_path / "r.json"
    assert main(RUN + ["--rounds", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "error: out of memory (Unable to allocate 37.3 GiB)" in err and "Traceback" not in err
    assert not out.exists()


def test_a_run_whose_data_do_not_fit_in_memory_is_refused_before_it_starts(tmp_path, monkeypatch, capsys):
    """--num-clients 100000 (44.5 M samples, 20 GiB of features, held 3 times) generated data for minutes and was
    then killed by the operating system (exit 137, no message) on a 23 GiB machine: refused now at once, exit 2, the
    sizes named. Here with the memory available set to what 3 copies of 4 clients' data need, less one byte."""
    import importlib

    import fedlib.data
    from fedlib import _validate

    S = importlib.import_module("fedlib.data.synthetic")  # the module (fedlib.data.synthetic is also the function)
    need = 3 * int(S._client_sizes(0, 4, None).sum()) * 61 * 8
    monkeypatch.setattr(_validate, "memory_room", lambda: (need - 1, "machine"))
    monkeypatch.setattr(fedlib.data, "synthetic", lambda *a, **k: pytest.fail("generated the data"))
    out = tmp_path / "r.json"
    assert main(TINY + ["--out", str(out)]) == 2
    err = capsys.readouterr().err
    total = int(S._client_sizes(0, 4, None).sum())
    assert (f"error: out of memory (--num-clients 4: the Synthetic data ({total:,} samples), held 3 times (the data "
            f"set, the problem's copy, the engine's), need {need / 2**30:.1f} GiB, more than the "
            f"{(need - 1) / 2**30:.1f} GiB of memory available on this machine); the flags ask for more than this "
            "machine holds (") in err, err
    assert not out.exists()
    monkeypatch.undo()
    assert main(TINY + ["--out", str(out)]) == 0


def test_a_refusal_in_a_container_names_its_limit_not_the_machine(tmp_path, monkeypatch, capsys):
    """The room under a container's or batch job's memory limit, when less than the machine's free memory, is what a
    run is refused for (fedlib._validate.cgroup_available_memory); the line said 'more than the ... GiB of memory
    available); the flags ask for more than this machine holds' all the same, wrong in a 2 GiB container on a 128 GiB
    machine. Now it names the container's or batch job's limit; one line."""
    import importlib

    from fedlib import _validate

    S = importlib.import_module("fedlib.data.synthetic")
    need = 3 * int(S._client_sizes(0, 4, None).sum()) * 61 * 8
    monkeypatch.setattr(_validate, "cgroup_available_memory", lambda: need - 1)  # far under any machine's memory
    out = tmp_path / "r.json"
    assert main(TINY + ["--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "this machine" not in err, err
    assert (f"more than the {(need - 1) / 2**30:.1f} GiB of memory available to this process under its container's "
            "or batch job's limit); the flags ask for more than this process's container or batch job allows (") in err
    assert not out.exists()


def test_each_copy_of_the_data_checks_the_memory_it_takes(monkeypatch):
    """The library's own copies check their size first too (an allocation made client by client grows until the
    process is killed): synthetic(), LogisticProblem, run_batched; with unknown memory (None) nothing is checked."""
    from fedlib import _validate
    from fedlib.algorithms import make_algorithm
    from fedlib.data import synthetic
    from fedlib.engines.batched import run_batched
    from fedlib.problems.logistic import LogisticProblem
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd

    ds = synthetic(num_clients=2, num_samples=[10, 20], seed=0)
    assert _validate.available_memory() > 0
    monkeypatch.setattr(_validate, "memory_room", lambda: (1, "machine"))
    with pytest.raises(MemoryError, match=r"^the Synthetic data \(30 samples of 2 clients, dim 60\) need 0\.0 GiB"):
        synthetic(num_clients=2, num_samples=[10, 20], seed=0)
    with pytest.raises(MemoryError, match=r"^LogisticProblem's copy of .* \(30 samples\) need "):
        LogisticProblem(ds)
    monkeypatch.setattr(_validate, "memory_room", lambda: (None, None))
    problem = LogisticProblem(ds)
    monkeypatch.setattr(_validate, "memory_room", lambda: (1, "cgroup"))
    with pytest.raises(MemoryError, match=r"^the batched engine's copy of the training features \(27 samples, "):
        run_batched(make_algorithm("fedavg", sgd(0.1)), problem, FixedSteps([1, 1]), 1, batch_size=5)


TINY = ["run", "synthetic", "--rounds", "1", "--num-clients", "4", "--quiet"]


def test_a_write_failure_after_training_is_a_one_line_error_not_a_traceback(tmp_path, monkeypatch, capsys):
    # e.g. the disk filled up during the run: the result cannot be staged next to --out (fedlib._io's temporary file
    # only: the check before the run, which makes one too, found room)
    import types

    import fedlib._io as io

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(io, "tempfile", types.SimpleNamespace(mkstemp=full))
    out = tmp_path / "r.json"
    rc = main([*TINY, "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 1
    assert "No space left on device" in err and "Traceback" not in err
    assert err.strip().count("\n") == 0 and err.startswith("python -m fedlib run synthetic: error:")
    assert not out.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("flags, says", [
    (["--batch-size", "9" * 20], "too large for the 64-bit integers"),
    (["--epochs", "9" * 20], "argument --epochs: epochs must be a whole number below 2**63 (an int64), got " + "9" * 20),
    (["--epochs", "2-" + "9" * 20], "argument --epochs: epochs must be a whole number below 2**63 (an int64), got "
     + "9" * 20),
    (["--sampling", "with-replacement", "--clients-per-round", "9" * 20], "too large for the 64-bit integers")])
def test_an_integer_past_64_bits_is_bad_input_not_a_crash(tmp_path, capsys, flags, says):
    """--batch-size / --epochs / --clients-per-round of 10**20 passed the parser and crashed with an OverflowError
    traceback (exit 1, the status of an internal error); it is bad input: exit 2, one line, nothing written. --epochs
    is refused by the parser, by name, as the epoch counts are checked below 2**63 (it was the OverflowError's line, and
    with the counts' cap alone 'low must be a whole number below 2**63', the schedule's name)."""
    out = tmp_path / "o.json"
    code, _, err = _cli(capsys, "run", "synthetic", "--num-clients", "3", "--rounds", "1", "--quiet", "--tau-eff", "1",
                        "--out", str(out), *flags)
    assert code == 2 and says in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("typed, recorded", [("2", "2"), ("02", "2"), ("2-2", "2"), ("02-05", "2-5"), ("2-5", "2-5")])
def test_epochs_are_recorded_in_one_spelling_per_setting(typed, recorded):
    """--epochs was recorded as typed: 2-2 and 2 (the same run) gave configs that compare_results called different,
    and --resume refused a checkpoint written under the other spelling."""
    from fedlib.cli import build_parser

    for command in ("synthetic", "cifar10"):
        assert build_parser().parse_args(["run", command, "--epochs", typed]).epochs == recorded

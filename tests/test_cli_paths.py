"""Command-line guards found by an audit: outputs that would destroy an input, flags that a
data source ignores, devices, and Table 1 result folders of another setup."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedlib.cli import main
from fedlib.data import save_leaf, synthetic

RUN = ["run", "synthetic", "--num-clients", "4", "--rounds", "2", "--quiet"]


def _err(capsys, argv) -> str:
    assert main(argv) == 2
    return capsys.readouterr().err


def test_the_checkpoint_may_not_be_the_result_or_the_data(tmp_path, capsys):
    out = tmp_path / "r.json"
    out.write_text("{}")
    err = _err(capsys, RUN + ["--out", str(out), "--checkpoint-every", "1", "--checkpoint", str(out)])
    assert "is the --out file" in err and out.read_text() == "{}"
    data = tmp_path / "leaf.json"
    save_leaf(synthetic(num_clients=3, seed=0, num_samples=60), data, drop_test=True)
    before = data.read_bytes()
    err = _err(capsys, ["run", "synthetic", "--data", str(data), "--rounds", "1", "--quiet", "--out",
                        str(tmp_path / "o.json"), "--checkpoint-every", "1", "--checkpoint", str(data)])
    assert "is the --data file" in err
    err = _err(capsys, ["run", "synthetic", "--data", str(data), "--rounds", "1", "--quiet", "--out", str(data)])
    assert "--out" in err and "is the --data file" in err and data.read_bytes() == before


def test_synthetic_flags_with_data_are_refused_and_the_data_path_is_absolute(tmp_path, capsys, monkeypatch):
    data = tmp_path / "leaf.json"
    save_leaf(synthetic(num_clients=3, seed=0, num_samples=60), data, drop_test=True)
    monkeypatch.chdir(tmp_path)
    err = _err(capsys, ["run", "synthetic", "--data", "leaf.json", "--alpha", "3", "--num-clients", "9", "--rounds", "1"])
    assert "--alpha, --num-clients: describe the generated Synthetic data" in err
    assert main(["run", "synthetic", "--data", "leaf.json", "--rounds", "1", "--quiet", "--out", "o.json"]) == 0
    assert json.loads((tmp_path / "o.json").read_text())["config"]["data"]["source"] == str(data.resolve())


@pytest.mark.parametrize("flags, message", [
    (["--backend", "torch", "--device", "tpu"], "--device: not a torch device: 'tpu'"),
    (["--device", "meta:0", "--backend", "numpy"], "(use --backend torch)"),
])
def test_device_errors_are_one_line(capsys, flags, message):
    err = _err(capsys, RUN + flags)
    assert message in err and "Traceback" not in err


def test_the_bias_warning_is_not_printed_when_everyone_takes_part(capsys):
    assert main(RUN + ["--sampling", "uniform", "--clients-per-round", "4"]) == 0
    assert "warning" not in capsys.readouterr().err
    assert main(RUN + ["--sampling", "uniform", "--clients-per-round", "3"]) == 0
    assert "biases the expected update" in capsys.readouterr().err


def test_sample_with_download_is_refused(capsys):
    err = _err(capsys, ["run", "cifar10", "--sample", "--download", "--rounds", "1"])
    assert "--download" in err and "--sample" in err


def _fake_result(path, rounds=100, width=1.0, num_train=50000):
    """The committed sgd-e2-fedavg seed-0 result as if run with other rounds, width or data size."""
    root = Path(__file__).resolve().parents[1]
    doc = json.loads((root / "data" / "results" / "cifar10" / "sgd-e2-fedavg__seed0.json").read_text())
    doc["config"]["rounds"] = rounds
    doc["config"]["engine"]["width"] = width
    doc["config"]["data"]["num_train"] = num_train
    path.write_text(json.dumps(doc))


def test_table1_refuses_a_present_result_of_another_setup(tmp_path, capsys):
    """A quick demo into the results folder must not stand in for the real run."""
    _fake_result(tmp_path / "sgd-e2-fedavg__seed0.json", rounds=2)
    err = _err(capsys, ["table1", "--results", str(tmp_path), "--budget-seconds", "0", "--dry-run", "--seeds", "0"])
    assert "sgd-e2-fedavg__seed0.json: present, but a run of another setup: rounds 2 (requested 100)" in err
    assert main(["table1", "--results", str(tmp_path), "--budget-seconds", "0", "--dry-run", "--seeds", "0",
                 "--rounds", "2"]) == 0
    err = _err(capsys, ["table1", "--results", str(tmp_path), "--budget-seconds", "60", "--seeds", "0",
                        "--rounds", "2", "--sample", "--width", "0.03", "--cells", "sgd-e2-fedavg,sgd-e2-fednova",
                        "--device", "cpu"])
    assert "width 1.0 (requested 0.03)" in err and "num_train 50000 (requested 2000)" in err


def test_table1_dry_run_marks_what_is_beyond_the_budget(tmp_path, capsys):
    assert main(["table1", "--results", str(tmp_path), "--budget-seconds", "300", "--dry-run", "--seeds", "0",
                 "--cells", "sgd-e2-fedavg,sgd-e2-fednova,sgd-u25-fedavg", "--images-per-second", "50000"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "seed 0" in ln]
    assert [ln.split(":")[0] for ln in lines] == ["would run", "beyond the budget", "beyond the budget"], lines


def test_table1_summary_of_a_missing_folder_is_an_error(tmp_path, capsys):
    err = _err(capsys, ["table1", "--summary", "--results", str(tmp_path / "typo")])
    assert "no such folder" in err


def test_cifar10_batch_larger_than_every_client_is_refused(capsys):
    err = _err(capsys, ["run", "cifar10", "--sample", "--width", "0.03", "--rounds", "1", "--batch-size", "100000",
                        "--device", "cpu"])
    assert "--batch-size 100000 is larger than the largest client" in err


def test_table1_logs_progress_while_a_group_trains(tmp_path, capsys):
    assert main(["table1", "--results", str(tmp_path), "--budget-seconds", "300", "--seeds", "0", "--cells",
                 "sgd-e2-fedavg", "--rounds", "10", "--sample", "--width", "0.03", "--device", "cpu",
                 "--stack", "1"]) == 0
    out = capsys.readouterr().out
    assert "  round 10/10 after " in out and "test accuracy 0." in out
    prov = json.loads((tmp_path / "sgd-e2-fedavg__seed0.json").read_text())["provenance"]
    assert prov["git_changed_during_run"] is False and "resumed" not in prov


def test_cifar10_out_may_not_land_in_the_data(tmp_path, capsys):
    """run cifar10 --out inside the batch folder replaced data_batch_1 with JSON (exit 0; the next run
    failed with 'not a readable CIFAR-10 batch file'); the same for the shipped sample. Refused before
    any data is read; a result next to the batch folder is fine."""
    import pickle

    import numpy as np

    from fedlib.data.cifar10 import DEFAULT_SAMPLE_PATH, TEST_FILE, TRAIN_FILES

    batches = tmp_path / "cifar-10-batches-py"
    batches.mkdir()
    for name in TRAIN_FILES + (TEST_FILE,):
        with open(batches / name, "wb") as fh:
            pickle.dump({"data": np.zeros((4, 3072), np.uint8), "labels": [0, 1, 2, 3]}, fh)
    before = (batches / "data_batch_1").read_bytes()
    base = ["run", "cifar10", "--width", "0.03", "--rounds", "1", "--quiet"]
    for root in (tmp_path, batches):
        err = _err(capsys, base + ["--data-root", str(root), "--out", str(batches / "data_batch_1")])
        assert "lies inside the --data-root batch folder" in err
    assert (batches / "data_batch_1").read_bytes() == before
    sample = DEFAULT_SAMPLE_PATH.read_bytes()
    err = _err(capsys, base + ["--sample", "--out", str(DEFAULT_SAMPLE_PATH)])
    assert "lies inside the shipped --sample folder" in err and DEFAULT_SAMPLE_PATH.read_bytes() == sample

"""``run synthetic --data F`` records a SHA-256 of the data's contents (``config.data.sha256``):
a ``--resume`` and a ``rerun`` on a LEAF file rewritten with other values of the same sizes are
refused. Before, the data was identified by its path and sizes only, and the resumed run went on
training, without a word, on data it had not started with."""
from __future__ import annotations

import json

import numpy as np
import pytest

import fedlib.checkpoint
from fedlib.cli import main
from fedlib.data import FederatedDataset
from fedlib.data.leaf import save_leaf
from fedlib.data.synthetic import synthetic
from fedlib.results import read_result

from cliutil import ctrl_c_after_saving


def _one_value_changed(path):
    """The same file with one feature of client 0's first sample changed (sizes unchanged)."""
    doc = json.loads(path.read_text())
    user = doc["users"][0]
    doc["user_data"][user]["x"][0][0] += 0.5
    path.write_text(json.dumps(doc))


def _two(x0, y1=(1,)):
    return FederatedDataset([np.array([[x0, 0.0]]), np.array([[1.0, 2.0]])], [np.array([0]), np.array(list(y1))],
                            [np.zeros((0, 2)), np.zeros((0, 2))], [np.zeros(0, np.int64), np.zeros(0, np.int64)], 2)


def test_sha256_changes_with_any_value_label_or_shape_and_not_with_the_name():
    base = _two(0.0)
    assert base.sha256() == _two(0.0).sha256() and len(base.sha256()) == 20
    assert base.sha256() != _two(1e-300).sha256()          # one feature, by the smallest amount
    assert base.sha256() != _two(0.0, y1=(0,)).sha256()    # one label
    flat = FederatedDataset([np.array([[0.0, 0.0]]), np.array([[1.0, 2.0]])], [np.array([0]), np.array([1])],
                            [np.zeros((0, 2))] * 2, [np.zeros(0, np.int64)] * 2, 2, name="another name")
    assert flat.sha256() == base.sha256()                  # the name is not the contents
    # the same bytes split otherwise between the clients are other data
    moved = FederatedDataset([np.array([[0.0, 0.0], [1.0, 2.0]]), np.array([[1.0, 2.0]])],
                             [np.array([0, 1]), np.array([1])], [np.zeros((0, 2))] * 2, [np.zeros(0, np.int64)] * 2, 2)
    assert moved.sha256() != base.sha256()


def test_resume_and_rerun_refuse_a_data_file_rewritten_with_the_same_sizes(tmp_path, monkeypatch, capsys):
    leaf = tmp_path / "leaf.json"
    save_leaf(synthetic(num_clients=3, seed=0), leaf, drop_test=True)
    argv = ["run", "synthetic", "--rounds", "3", "--quiet", "--checkpoint-every", "1", "--data", str(leaf),
            "--out", str(tmp_path / "r.json")]
    real_save = ctrl_c_after_saving(monkeypatch)
    assert main(argv) == 130
    monkeypatch.setattr(fedlib.checkpoint, "save_checkpoint", real_save)
    original = leaf.read_text()
    _one_value_changed(leaf)
    capsys.readouterr()
    assert main(argv + ["--resume"]) == 2
    err = capsys.readouterr().err
    assert "was written by another configuration; differing keys: data.sha256 (checkpoint '" in err
    # the file as it was: the resume goes on and the finished result records the digest
    leaf.write_text(original)
    assert main(argv + ["--resume"]) == 0
    config = read_result(tmp_path / "r.json")["config"]
    assert len(config["data"]["sha256"]) == 20
    _one_value_changed(leaf)
    capsys.readouterr()
    assert main(["rerun", str(tmp_path / "r.json"), "--quiet"]) == 1
    assert "config.data.sha256: " in capsys.readouterr().out


@pytest.mark.parametrize("name", ["leaf.json", "leaf-folder"])
def test_the_recorded_digest_is_that_of_the_data_the_run_read(tmp_path, name):
    """A single file (training data only) and a folder with train/ and test/ (the test arrays count)."""
    from fedlib.data.leaf import load_leaf

    leaf = tmp_path / name
    save_leaf(synthetic(num_clients=3, seed=1), leaf, drop_test=name.endswith(".json"))
    assert main(["run", "synthetic", "--rounds", "1", "--quiet", "--data", str(leaf),
                 "--out", str(tmp_path / "r.json")]) == 0
    assert read_result(tmp_path / "r.json")["config"]["data"]["sha256"] == load_leaf(leaf).sha256()

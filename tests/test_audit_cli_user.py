"""Audit of the command line as a user meets it (run synthetic, checkpoints, rerun): one test per fix."""
import json
from pathlib import Path

import pytest

from fedlib.cli import main
from fedlib.data.leaf import save_leaf
from fedlib.data.synthetic import synthetic

RUN = ["run", "synthetic", "--num-clients", "3", "--quiet"]


@pytest.fixture(scope="module")
def leaf_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("leaf") / "train.json"
    save_leaf(synthetic(num_clients=3, seed=1, num_samples=[20, 30, 25]), path, drop_test=True)
    return path


# ----------------------------------------------------------------------------- Synthetic flags with --data
@pytest.mark.parametrize("flag,value", [("--num-clients", "30"), ("--alpha", "1.0"), ("--beta", "1"),
                                        ("--data-seed", "0")])
def test_a_synthetic_flag_with_data_is_refused_even_at_its_default(leaf_file, tmp_path, capsys, flag, value):
    """--num-clients 29 with --data was refused, but --num-clients 30 (the default) was accepted and ignored."""
    out = tmp_path / "r.json"
    assert main(["run", "synthetic", "--data", str(leaf_file), flag, value, "--rounds", "1", "--quiet",
                 "--out", str(out)]) == 2
    assert f"{flag}: describes the generated Synthetic data" in capsys.readouterr().err
    assert not out.exists()


def test_synthetic_defaults_still_apply_without_data(tmp_path):
    out = tmp_path / "r.json"
    assert main(["run", "synthetic", "--rounds", "1", "--quiet", "--out", str(out)]) == 0
    data = json.loads(out.read_text())["config"]["data"]
    assert (data["alpha"], data["beta"], data["data_seed"], data["num_clients"]) == (1.0, 1.0, 0, 30)

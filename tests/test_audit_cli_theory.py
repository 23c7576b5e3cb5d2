"""Audit of the command line (table1, bench cifar10) and of fedlib.theory's input checks: each case
failed silently (or named no parameter) before its fix."""
import json
from pathlib import Path

import numpy as np
import pytest

import fedlib.theory as TH
from fedlib.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _err(capsys, argv):
    assert main(argv) == 2
    return capsys.readouterr().err


# ----------------------------------------------------------------------------- table1
def test_table1_dry_run_checks_the_requested_width(tmp_path, capsys):
    """The dry run said 'present' for a width-1 result under --width 0.03 (the CLI did not pass --width), and the
    real call then refused to start."""
    doc = json.loads((ROOT / "data" / "results" / "cifar10" / "sgd-e2-fedavg__seed0.json").read_text())
    assert doc["config"]["engine"]["width"] == 1.0
    (tmp_path / "sgd-e2-fedavg__seed0.json").write_text(json.dumps(doc))
    argv = ["table1", "--results", str(tmp_path), "--budget-seconds", "0", "--dry-run", "--seeds", "0",
            "--cells", "sgd-e2-fedavg"]
    err = _err(capsys, argv + ["--width", "0.03"])
    assert "width 1.0 (requested 0.03)" in err
    assert main(argv + ["--width", "1"]) == 0
    assert "present: sgd-e2-fedavg__seed0.json" in capsys.readouterr().out


@pytest.mark.parametrize("cells", ["", ",", " , "])
def test_table1_empty_cells_is_refused(tmp_path, capsys, cells):
    """--cells ',' ran nothing and exited 0; --cells '' silently meant every cell."""
    err = _err(capsys, ["table1", "--results", str(tmp_path), "--budget-seconds", "0", "--dry-run", "--cells", cells])
    assert "--cells" in err and "Traceback" not in err


# ----------------------------------------------------------------------------- bench cifar10
@pytest.mark.parametrize("extra", [[], ["--random-images"]])
def test_bench_cifar10_download_needs_a_data_root(capsys, monkeypatch, extra):
    """--download without --data-root was blamed on --sample (not given), or ignored with --random-images."""
    import fedlib.data.cifar10 as D
    import fedlib.experiments.cifar10 as C

    def started(*args, **kwargs):
        raise AssertionError("bench cifar10 went on to load data / benchmark")

    monkeypatch.setattr(C, "bench_cifar10", started)
    monkeypatch.setattr(D, "cifar10_random_images", started)
    err = _err(capsys, ["bench", "cifar10", "--download", "--width", "0.03", "--quiet"] + extra)
    if extra:  # it was told to add --data-root, which --random-images then refused
        assert "--random-images makes its images and reads no data set; --download is not used" in err
        assert "--data-root" not in err
    else:
        assert "--download" in err and "--data-root" in err and "--sample needs none" not in err


# ----------------------------------------------------------------------------- theory
def test_theorem1_constants_refuses_weights_that_do_not_sum_to_one():
    """Unnormalised w scaled A (by the square) and B without a word; Theorem 1's weights sum to 1."""
    a = [np.ones(2), np.ones(4)]
    with pytest.raises(ValueError, match="^w must sum to 1"):
        TH.theorem1_constants([1.0, 1.0], a, 3.0)
    with pytest.raises(ValueError, match="^w must sum to 1"):
        TH.theorem1_constants([0.25, 0.25], a, 3.0)
    with pytest.raises(ValueError, match="positive weight"):
        TH.theorem1_constants([0.0, 0.0], a, 3.0)
    ref = TH.theorem1_constants([0.25, 0.75], a, 3.0)
    assert TH.theorem1_constants(np.array([0.25, 0.75], dtype=np.float32), a, 3.0) == pytest.approx(ref)
    assert TH.theorem1_constants(np.array([1, 0]), a, 3.0) == TH.theorem1_constants([1.0, 0.0], a, 3.0)


def test_theorem1_constants_a_vectors_errors_name_the_parameter():
    a = [np.ones(2), np.ones(4)]
    ref = TH.theorem1_constants([0.5, 0.5], a, 3.0)
    assert TH.theorem1_constants([0.5, 0.5], (v for v in a), 3.0) == ref  # any iterable, not only a list
    with pytest.raises(ValueError, match="^a_vectors"):
        TH.theorem1_constants([0.5, 0.5], 1.0, 3.0)
    with pytest.raises(ValueError, match=r"^a_vectors\[1\] contains NaN"):
        TH.theorem1_constants([0.5, 0.5], [np.ones(2), [np.nan, 1.0]], 3.0)


@pytest.mark.parametrize("shape", [(0, 2, 2), (1, 2, 3), (1, 0, 0)])
def test_quadratic_smoothness_names_H_for_a_bad_shape(shape):
    """No clients, non-square or empty H_i raised numpy's own message ('max() arg is an empty sequence')."""
    with pytest.raises(ValueError, match=r"^H must have shape \(m, d, d\)"):
        TH.quadratic_smoothness(np.zeros(shape))

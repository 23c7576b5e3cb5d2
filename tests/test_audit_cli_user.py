"""Audit of the command line as a user meets it (run synthetic, checkpoints, rerun): one test per fix."""
import json
import pickle
from pathlib import Path

import pytest

import fedlib.checkpoint
import fedlib.engines.batched
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


# ----------------------------------------------------------------------------- checkpoints not overwritten
def _stop_after(round_done):
    real = fedlib.checkpoint.save_checkpoint

    def save_then_maybe_interrupt(*args, **kwargs):
        real(*args, **kwargs)
        if kwargs["round_done"] >= round_done:
            raise KeyboardInterrupt

    return save_then_maybe_interrupt


def test_a_fresh_run_does_not_overwrite_an_unfinished_checkpoint(tmp_path, monkeypatch, capsys):
    """After Ctrl-C the message says to --resume; the same command without --resume used to restart
    from round 0 and replace the checkpoint at its first save, losing the rounds done."""
    out = tmp_path / "r.json"
    ckpt = Path(str(out) + ".ckpt")
    argv = RUN + ["--rounds", "6", "--checkpoint-every", "1", "--out", str(out)]
    real = fedlib.checkpoint.save_checkpoint
    monkeypatch.setattr(fedlib.checkpoint, "save_checkpoint", _stop_after(4))
    assert main(argv) == 130
    assert pickle.loads(ckpt.read_bytes())["round"] == 4
    capsys.readouterr()

    monkeypatch.setattr(fedlib.checkpoint, "save_checkpoint", _stop_after(1))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"--checkpoint {ckpt}: holds an unfinished run (4 of 6 rounds done)" in err and "--resume" in err
    assert pickle.loads(ckpt.read_bytes())["round"] == 4 and not out.exists()

    monkeypatch.setattr(fedlib.checkpoint, "save_checkpoint", real)
    assert main(argv + ["--resume"]) == 0
    assert len(json.loads(out.read_text())["history"]) == 6
    assert main(argv) == 0  # the checkpoint of a finished run may be replaced


def test_a_fresh_run_does_not_overwrite_a_file_that_is_not_a_checkpoint(tmp_path, capsys):
    other = tmp_path / "notes.json"
    other.write_text('{"keep": true}')
    out = tmp_path / "r.json"
    assert main(RUN + ["--rounds", "2", "--checkpoint-every", "1", "--checkpoint", str(other),
                       "--out", str(out)]) == 2
    assert "is not a synthetic checkpoint" in capsys.readouterr().err
    assert other.read_text() == '{"keep": true}' and not out.exists()


def test_ctrl_c_does_not_offer_an_earlier_runs_checkpoint(tmp_path, monkeypatch, capsys):
    """Interrupted before its first checkpoint, a run named the finished checkpoint of another
    configuration at <out>.ckpt as 'kept: run the same command with --resume', which then refused it."""
    out = tmp_path / "r.json"
    argv = RUN + ["--rounds", "2", "--checkpoint-every", "1", "--out", str(out)]
    assert main(argv + ["--lr", "0.05"]) == 0
    capsys.readouterr()

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(fedlib.engines.batched, "run_engine", interrupt)
    assert main(argv) == 130
    err = capsys.readouterr().err
    assert "interrupted (nothing written)" in err and "--resume" not in err


def test_divergence_after_a_checkpoint_names_it(tmp_path, capsys):
    """A run that diverged after writing checkpoints said '(nothing written)' although its checkpoint
    stayed, and the next fresh run at the same --out is (rightly) refused because of it."""
    out = tmp_path / "r.json"
    ckpt = Path(str(out) + ".ckpt")
    # with an L2 penalty a huge lr blows up geometrically; round 0 is finite, later ones are not
    argv = RUN + ["--lr", "30", "--l2", "1", "--rounds", "40", "--checkpoint-every", "1", "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "diverged in round" in err and ckpt.is_file() and not out.exists()
    assert "nothing written" not in err and f"checkpoint {ckpt}" in err and "--checkpoint" in err
    # without checkpoints the message is unchanged
    assert main(RUN + ["--lr", "30", "--l2", "1", "--rounds", "40", "--out", str(tmp_path / "s.json")]) == 2
    assert "(nothing written)" in capsys.readouterr().err


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

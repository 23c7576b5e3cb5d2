"""Checkpoints: kill -9 in the middle of a run, resume, get the uninterrupted run bit for bit; a fresh run over
a damaged or foreign checkpoint says what the file is and runs nothing; to_torch_tree's ``like``."""
import json
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from fedlib.checkpoint import CheckpointError, check_config, config_diff, load_checkpoint, save_checkpoint
from fedlib.cli import main

ROOT = Path(__file__).resolve().parents[1]
FLAGS = ["run", "synthetic", "--num-clients", "20", "--epochs", "1-3", "--algorithm", "fednova-vr", "--server",
         "momentum", "--sampling", "uniform", "--clients-per-round", "8", "--quiet", "--checkpoint-every", "4"]


def _history(path):
    return [{k: v for k, v in rec.items() if k != "time_s"} for rec in json.loads(Path(path).read_text())["history"]]


def test_kill_9_then_resume_equals_uninterrupted(tmp_path):
    rounds = "400"
    full = tmp_path / "full.json"
    assert main(FLAGS + ["--rounds", rounds, "--out", str(full)]) == 0

    out = tmp_path / "killed.json"
    ckpt = tmp_path / "killed.json.ckpt"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "fedlib"] + FLAGS + ["--rounds", rounds, "--out", str(out)],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while not ckpt.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    time.sleep(0.3)  # let it get a few more checkpoints in: kill mid-run, possibly mid-write
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed; make it longer"
    assert not out.exists()  # no partial result
    done = pickle.loads(ckpt.read_bytes())["round"]
    assert 0 < done < int(rounds)

    assert main(FLAGS + ["--rounds", rounds, "--out", str(out), "--resume"]) == 0
    assert _history(out) == _history(full)
    # the result says that this process computed only the rounds after the checkpoint, and who did the rest
    prov = json.loads(out.read_text())["provenance"]
    resumed = prov["resumed"]
    assert resumed["from_round"] == done
    (seg,) = resumed["earlier_segments"]
    assert seg["rounds"] == [0, done] and seg["seconds"] > 0 and seg["git_commit"] == prov["git_commit"]
    assert "resumed" not in json.loads(full.read_text())["provenance"]
    a = pickle.loads(ckpt.read_bytes())
    b = pickle.loads((tmp_path / "full.json.ckpt").read_bytes())
    assert a["round"] == b["round"] == int(rounds)
    assert a["state"].params.tobytes() == b["state"].params.tobytes()
    assert a["state"].variates.client.tobytes() == b["state"].variates.client.tobytes()
    assert a["state"].server[0].tobytes() == b["state"].server[0].tobytes()
    assert a["rng"] == {"seed": 0, "next_round": int(rounds), "note": a["rng"]["note"]}


def test_resume_refuses_another_config(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(FLAGS + ["--rounds", "4", "--out", str(out)]) == 0
    out.unlink()
    assert main(FLAGS + ["--rounds", "4", "--out", str(out), "--resume", "--lr", "0.05"]) == 2
    err = capsys.readouterr().err
    assert "another configuration" in err and "lr (checkpoint 0.02, now 0.05)" in err
    assert not out.exists()


def test_checkpoint_roundtrip_and_errors(tmp_path):
    path = tmp_path / "c.ckpt"
    save_checkpoint(path, config={"a": 1, "b": {"c": 2}}, round_done=3, state={"x": np.arange(3.0)}, history=[],
                    seed=7, kind="synthetic")
    doc = load_checkpoint(path, kind="synthetic")
    assert doc["round"] == 3 and doc["rng"]["seed"] == 7 and np.array_equal(doc["state"]["x"], np.arange(3.0))
    assert config_diff({"a": 1, "b": {"c": 2}}, {"a": 1, "b": {"c": 3}, "d": 0}) == ["b.c", "d"]
    with pytest.raises(CheckpointError, match="differing keys: b.c"):
        check_config(path, {"b": {"c": 2}}, {"b": {"c": 3}})
    with pytest.raises(CheckpointError, match="expected 'table1'"):
        load_checkpoint(path, kind="table1")
    path.write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match="corrupt"):
        load_checkpoint(path)
    with pytest.raises(CheckpointError, match="not found"):
        load_checkpoint(tmp_path / "none.ckpt")


def test_stacked_engine_state_round_trip(tmp_path):
    """train 2 rounds == train 1, state_dict through a checkpoint file, new engine, load, train 1."""
    import torch

    from fedlib.checkpoint import load_checkpoint, save_checkpoint
    from fedlib.experiments import cifar10 as C

    torch.set_num_threads(1)
    data = C.load_data(sample=True)
    parts = C.official_partition(data.train_labels)
    cell = C._BY_ID[C.CELL_IDS[0]]
    runs = [{"algorithm": C.Cell(**{**cell.config(), "algorithm": "fednova-vr", "server": "momentum",
                                    "server_momentum": 0.9}).make_algorithm(),
             "epochs": "2", "seed": 1, "name": "a"}]
    kw = dict(rounds=2, width=0.03, device="cpu", precision="fp64")
    full = C.train_runs(runs, data, parts, **kw)
    ck = tmp_path / "g.pkl"
    stop = C.train_runs(runs, data, parts, **kw, checkpoint=ck, callback=lambda t, r, s: t < 0)  # "crash" after round 0
    assert stop["stopped"] and load_checkpoint(ck, kind="table1")["round"] == 1
    res = C.train_runs(runs, data, parts, **kw, checkpoint=ck)
    assert res["resumed_from"] == 1
    strip = lambda hs: [[{k: v for k, v in r.items() if k != "time_s"} for r in h] for h in hs]  # noqa: E731
    assert strip(res["histories"]) == strip(full["histories"])
    doc = load_checkpoint(ck, kind="table1")
    assert doc["round"] == 2
    # another configuration is refused
    with pytest.raises(CheckpointError, match="differing keys: width"):
        C.train_runs(runs, data, parts, **{**kw, "width": 0.05}, checkpoint=ck)
    # ... and so is other data: table1 resumed a --sample checkpoint on another data folder and wrote
    # a result naming only the new data (one pixel, or the client split, is enough to refuse)
    images = data.train_images.copy()
    images[7, 3, 3, 0] ^= 1
    with pytest.raises(CheckpointError, match=r"differing keys: data\.sha256"):
        C.train_runs(runs, data._replace(train_images=images), parts, **kw, checkpoint=ck)
    with pytest.raises(CheckpointError, match=r"differing keys: data\.split_sha256"):
        C.train_runs(runs, data, [parts[1], parts[0], *parts[2:]], **kw, checkpoint=ck)
    # a pause (Table 1 across two device calls): no periodic checkpoints, one when the callback
    # stops; the resumed call reports the time already spent and the first start
    ck2 = tmp_path / "paused.pkl"
    first = C.train_runs(runs, data, parts, **kw, checkpoint=ck2, checkpoint_every=0, save_on_stop=True,
                         callback=lambda t, r, s: False)
    doc = load_checkpoint(ck2, kind="table1")
    assert first["stopped"] and doc["round"] == 1
    assert 0 < doc["extra"]["seconds"] <= first["seconds"] and doc["extra"]["started"] == first["started"]
    second = C.train_runs(runs, data, parts, **kw, checkpoint=ck2, checkpoint_every=0, save_on_stop=True)
    assert second["resumed_from"] == 1 and second["seconds_before"] == doc["extra"]["seconds"]
    assert second["started"] == first["started"] and not second["stopped"]
    assert strip(second["histories"]) == strip(full["histories"])
    # without save_on_stop and with checkpoint_every=0 nothing is written
    ck3 = tmp_path / "none.pkl"
    C.train_runs(runs, data, parts, **kw, checkpoint=ck3, checkpoint_every=0, callback=lambda t, r, s: False)
    assert not ck3.exists()


def test_config_check_compares_arrays_nan_and_dotted_keys(tmp_path):
    """Config values a user may put in a resumable run: numpy arrays (numpy's 'truth value of an array
    is ambiguous' escaped as a bare ValueError), NaN (never equal to itself: every resume refused),
    keys that contain a dot (the message showed both values as '<missing>')."""
    from fedlib.checkpoint import CheckpointError, check_config, config_diff

    same = {"lrs": np.array([0.1, 0.2]), "clip": float("nan"), "nested": {"w": np.array([np.nan, 1.0])},
            "seq": [np.float64("nan"), 1], "a.b": 3}
    check_config("c", same, {**same, "lrs": np.array([0.1, 0.2])})  # equal: no error
    assert config_diff(same, dict(same)) == []
    assert config_diff({"lrs": np.array([0.1, 0.2])}, {"lrs": np.array([0.1, 0.3])}) == ["lrs"]
    assert config_diff({"lrs": np.array([0.1, 0.2])}, {"lrs": np.array([0.1, 0.2, 0.3])}) == ["lrs"]
    assert config_diff({"x": float("nan")}, {"x": 1.0}) == ["x"]
    with pytest.raises(CheckpointError, match=r"a\.b \(checkpoint 3, now 4\)"):
        check_config("c", {"a.b": 3}, {"a.b": 4})
    with pytest.raises(CheckpointError, match=r"n\.w \(checkpoint array\(\[1\., 2\.\]\), now array\(\[1\., 3\.\]\)\)"):
        check_config("c", {"n": {"w": np.array([1.0, 2.0])}}, {"n": {"w": np.array([1.0, 3.0])}})


@pytest.mark.parametrize("kwargs,match", [({"round_done": 2.9}, "round_done"), ({"round_done": -1}, "round_done"),
                                          ({"seed": -5}, "seed"), ({"seed": 1.5}, "seed"),
                                          ({"config": [("a", 1)]}, "config")])
def test_save_checkpoint_refuses_what_it_would_have_rounded(tmp_path, kwargs, match):
    """round_done = 2.9 was stored as 2 and seed = -5 as given: both are the run's RNG state."""
    from fedlib.checkpoint import save_checkpoint

    args = dict(config={"a": 1}, round_done=2, state={"w": np.zeros(2)}, history=[], seed=0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        save_checkpoint(tmp_path / "x.ckpt", **args)
    assert not (tmp_path / "x.ckpt").exists()


def test_to_numpy_tree_keeps_bf16_values_exactly(tmp_path):
    """numpy has no bfloat16: such a tensor is saved as float32 (exact), and casting it back restores
    the tensor bit for bit; a checkpoint holding one round-trips through save/load."""
    import torch

    from fedlib.checkpoint import load_checkpoint, save_checkpoint, to_numpy_tree

    x = torch.randn(64, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    half = torch.randn(4, generator=torch.Generator().manual_seed(1)).half()
    out = to_numpy_tree({"w": x, "h": half, "i": torch.arange(3)})
    assert out["w"].dtype == np.float32 and out["h"].dtype == np.float16 and out["i"].dtype == np.int64
    assert torch.equal(torch.from_numpy(out["w"]).to(torch.bfloat16), x)
    path = tmp_path / "bf16.ckpt"
    save_checkpoint(path, config={"a": 1}, round_done=1, state={"w": x}, history=[{"round": 0}], seed=0)
    back = load_checkpoint(path, kind="run")["state"]["w"]
    assert torch.equal(torch.as_tensor(back).to(torch.bfloat16), x)


# --------------------------------------------------------------------------- a fresh run over a damaged checkpoint
FRESH = ["run", "synthetic", "--num-clients", "4", "--rounds", "3", "--batch-size", "10", "--quiet",
         "--checkpoint-every", "1"]


def _fresh_over(tmp_path, capsys, content: bytes) -> str:
    from fedlib.cli import main
    out = tmp_path / "r.json"
    ck = Path(str(out) + ".ckpt")
    ck.write_bytes(content)
    capsys.readouterr()
    assert main(FRESH + ["--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert not out.exists() and ck.read_bytes() == content  # nothing run, the file left alone
    assert f"--checkpoint {ck}: exists and is not a synthetic checkpoint of this command: it is " in err
    assert "so nothing was run: delete the file if you do not need it, or give another --checkpoint (or --out)" in err
    return err


@pytest.fixture(scope="module")
def finished_checkpoint(tmp_path_factory):
    """The bytes of the checkpoint of a finished 3-round run."""
    from fedlib.cli import main
    out = tmp_path_factory.mktemp("ck") / "r.json"
    assert main(FRESH + ["--out", str(out)]) == 0
    return Path(str(out) + ".ckpt").read_bytes()


def test_fresh_run_over_a_checkpoint_with_a_wrong_sha256_says_so(tmp_path, capsys, finished_checkpoint):
    from fedlib.checkpoint import FOOTER
    body_end = len(finished_checkpoint) - len(FOOTER) - 64
    damaged = bytearray(finished_checkpoint)
    damaged[body_end // 2] ^= 0x01  # one bit of the pickle; the footer still holds the old SHA-256
    err = _fresh_over(tmp_path, capsys, bytes(damaged))
    assert "it is corrupt: its SHA-256 footer does not match its contents (damaged after it was written)." in err


def test_fresh_run_over_a_truncated_or_empty_checkpoint_says_so(tmp_path, capsys, finished_checkpoint):
    err = _fresh_over(tmp_path, capsys, finished_checkpoint[:len(finished_checkpoint) // 2])
    assert "it is truncated, corrupt or not a fedlib checkpoint: it does not unpickle (" in err
    assert "it is empty (0 bytes)." in _fresh_over(tmp_path, capsys, b"")


def test_fresh_run_over_a_foreign_or_other_kind_checkpoint_says_so(tmp_path, capsys):
    import pickle

    from fedlib.checkpoint import FORMAT
    err = _fresh_over(tmp_path, capsys, pickle.dumps({"a": 1}))
    assert f"it is not a fedlib checkpoint (a pickle without the format tag {FORMAT!r})." in err
    err = _fresh_over(tmp_path, capsys, pickle.dumps({"format": FORMAT, "kind": "cifar10"}))
    assert "it is a fedlib checkpoint of another command (kind 'cifar10')." in err


# --------------------------------------------------------------------------- to_torch_tree's like
def test_to_torch_tree_refuses_a_like_without_tensors():
    import numpy as np

    from fedlib.checkpoint import to_torch_tree

    with pytest.raises(ValueError, match=r"^like must be a torch tensor or a list of them"):
        to_torch_tree([np.zeros(1)], like=[np.zeros(1)])

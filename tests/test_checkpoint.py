"""Checkpoints: kill -9 in the middle of a run, resume, get the uninterrupted run bit for bit; a fresh run over
a damaged or foreign checkpoint says what the file is and runs nothing, nor overwrites an unfinished checkpoint;
Ctrl-C and a divergence name the checkpoint kept (or say nothing was written); an unwritable checkpoint folder is
refused before training; ``--resume`` takes the same data file however its path is typed; to_torch_tree's ``like``."""
import json
import os
import pickle
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import fedlib.checkpoint
import fedlib.engines.batched
from fedlib.checkpoint import CheckpointError, check_config, config_diff, load_checkpoint, save_checkpoint
from fedlib.cli import main
from fedlib.results import read_result

from cliutil import ctrl_c_after_saving
from test_results import umask_fixture  # noqa: F401 (the fixture umask)

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
    # this process's BLAS thread settings, not OMP_NUM_THREADS=1: with numpy 1.24's OpenBLAS on 2 threads the
    # killed run's sums came out in another order than the uninterrupted run's, and the histories differed in
    # their last bits
    env = dict(os.environ, PYTHONPATH=str(ROOT))
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


def test_resume_extends_a_finished_constant_lr_run_bit_for_bit(tmp_path, capsys):
    """A finished run with a constant lr continues to more ``--rounds`` (every draw is keyed by seed, round and
    client, so its first rounds do not depend on how many follow): 4 rounds, then ``--resume --rounds 7``, equal a
    7-round run (history, model, control variates, server momentum) and ``rerun`` reproduces the extended result
    from round 0. Before: refused, 'differing keys: rounds (checkpoint 4, now 7)'. Fewer rounds than the checkpoint
    has done are refused, and so is a step-decay run (its lr depends on the total), with the reason."""
    full, out = tmp_path / "full.json", tmp_path / "r.json"
    assert main(FLAGS + ["--rounds", "7", "--out", str(full)]) == 0
    assert main(FLAGS + ["--rounds", "4", "--out", str(out)]) == 0
    assert main(FLAGS + ["--rounds", "7", "--out", str(out), "--resume"]) == 0
    assert _history(out) == _history(full) and len(_history(out)) == 7
    extended = json.loads(out.read_text())
    assert extended["config"] == json.loads(full.read_text())["config"]
    assert extended["provenance"]["resumed"]["from_round"] == 4
    a = pickle.loads((tmp_path / "r.json.ckpt").read_bytes())
    b = pickle.loads((tmp_path / "full.json.ckpt").read_bytes())
    assert a["round"] == b["round"] == 7 and a["config"] == b["config"]
    assert a["state"].params.tobytes() == b["state"].params.tobytes()
    assert a["state"].variates.client.tobytes() == b["state"].variates.client.tobytes()
    assert a["state"].server[0].tobytes() == b["state"].server[0].tobytes()
    assert main(["rerun", str(out), "--quiet"]) == 0
    capsys.readouterr()

    assert main(FLAGS + ["--rounds", "6", "--out", str(out), "--resume"]) == 2
    assert ("--resume: checkpoint " + str(tmp_path / "r.json.ckpt") + " has 7 rounds done; give --rounds 7 or "
            "more") in capsys.readouterr().err
    step = FLAGS + ["--lr-decay", "step", "--out", str(tmp_path / "s.json")]
    assert main(step + ["--rounds", "4"]) == 0
    assert main(step + ["--rounds", "8", "--resume"]) == 2
    err = capsys.readouterr().err
    assert "differing keys: rounds (checkpoint 4, now 8); --lr-decay step divides the lr after 50% and 75% of " \
           "--rounds" in err


def test_checkpoint_roundtrip_and_errors(tmp_path):
    path = tmp_path / "c.ckpt"
    save_checkpoint(path, config={"a": 1, "b": {"c": 2}}, round_done=3, state={"x": np.arange(3.0)}, history=[],
                    seed=7, kind="synthetic")
    doc = load_checkpoint(path, kind="synthetic")
    assert doc["round"] == 3 and doc["rng"]["seed"] == 7 and np.array_equal(doc["state"]["x"], np.arange(3.0))
    assert config_diff({"a": 1, "b": {"c": 2}}, {"a": 1, "b": {"c": 3}, "d": 0}) == ["b.c", "d"]
    with pytest.raises(CheckpointError, match="differing keys: b.c"):
        check_config(path, {"b": {"c": 2}}, {"b": {"c": 3}})
    with pytest.raises(CheckpointError, match=r"is a checkpoint of run synthetic \(kind 'synthetic'\), not of "
                                              r"run cifar10 / table1 \(kind 'table1'\)$"):
        load_checkpoint(path, kind="table1")
    path.write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match="corrupt"):
        load_checkpoint(path)
    with pytest.raises(CheckpointError, match="not found"):
        load_checkpoint(tmp_path / "none.ckpt")


def test_stacked_engine_state_round_trip(tmp_path):
    """train 2 rounds == train 1, state_dict through a checkpoint file, new engine, load, train 1."""
    import torch

    from fedlib.checkpoint import load_checkpoint
    from fedlib.experiments import cifar10 as C

    torch.set_num_threads(1)
    data = C.load_data(sample=True)
    parts = C.official_partition(data.train_labels)
    cell = C._BY_ID[C.CELL_IDS[0]]
    runs = [{"algorithm": C.Cell(**{**cell.config(), "algorithm": "fednova-vr", "server": "momentum",
                                    "server_momentum": 0.9}).make_algorithm(),
             "epochs": "1", "seed": 1, "name": "a"}]
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


def test_config_diff_compares_torch_tensors_and_names_a_config_that_is_no_mapping():
    """Was: a torch tensor in a config (beside the numpy arrays it takes) made config_diff and check_config raise
    RuntimeError ('Boolean value of Tensor with more than one value is ambiguous') even against an equal
    tensor, so a checkpoint of your own loop with one could never be resumed; a 0-d NaN tensor differed from
    itself; config_diff(None, {}) raised "'NoneType' object is not iterable", config_diff(a tensor, {})
    RuntimeError ('Tensor.__contains__ only supports Tensor or scalar')."""
    import torch

    cfg = {"w": torch.tensor([0.5, 0.25]), "gap": torch.tensor(float("nan")), "n": {"b": torch.ones(2, dtype=torch.bfloat16)}}
    again = {"w": torch.tensor([0.5, 0.25]), "gap": torch.tensor(float("nan")), "n": {"b": torch.ones(2, dtype=torch.bfloat16)}}
    assert config_diff(cfg, again) == []
    check_config("c", cfg, again)
    assert config_diff(cfg, {**again, "w": torch.tensor([0.5, 0.5])}) == ["w"]
    assert config_diff({"w": torch.tensor([0.5, 0.25])}, {"w": np.array([0.5, 0.25])}) == []
    for a, b in ((None, {}), ({}, torch.ones(2)), ([("a", 1)], {"a": 1})):
        with pytest.raises(ValueError, match=r"^a and b must be config mappings"):
            config_diff(a, b)


def test_config_diff_tells_dates_and_durations_from_numbers():
    """A datetime64 or timedelta64 array against a number array differs, without numpy 1.x's
    'elementwise comparison failed' DeprecationWarning (an error under -W error); a timedelta of 1 s
    was also equal to the integer 1. Dates in other units that name the same instant stay equal."""
    import warnings

    day = np.array(["2020-01-01"], dtype="datetime64[D]")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert config_diff({"t": day}, {"t": np.array([1.0])}) == ["t"]
        assert config_diff({"t": np.array([1], dtype="timedelta64[s]")}, {"t": np.array([1])}) == ["t"]
        assert config_diff({"t": np.array([1])}, {"t": np.array([1], dtype="timedelta64[s]")}) == ["t"]
        assert config_diff({"t": day}, {"t": day.astype("datetime64[h]")}) == []
        assert config_diff({"t": day}, {"t": day + np.timedelta64(1, "h")}) == ["t"]


def _odd_config():
    """A config of every kind of value that once differed from itself or from its copy read back from a checkpoint."""
    from decimal import Decimal

    import torch

    return {"set": {float("nan"), 1.0}, "frozen": frozenset({np.float32("nan"), (float("nan"), 2)}),
            "dates": np.array(["NaT", "2020-01-01"], dtype="datetime64[D]"),
            "gaps": np.array([np.timedelta64("NaT"), np.timedelta64(1, "s")]),
            "nat": np.datetime64("NaT"), "nat_list": [np.timedelta64("NaT"), 1], "complex": complex("nan"),
            "decimal": Decimal("NaN"), "signalling": Decimal("sNaN"), "tensor": torch.tensor([float("nan"), 1.0]),
            "nested": {"flag": True, "n": 0, "x": float("nan")}}


def test_config_diff_of_a_config_with_itself_or_its_copy_is_empty():
    """config_diff(x, x) is empty, and so is config_diff(x, x read back through pickle, as a checkpoint's config
    is). Was: ['complex', 'dates', 'decimal', 'gaps', 'nat', 'nat_list'] against itself (NaT is no NaT, a complex or
    Decimal NaN no NaN; Decimal('sNaN') raised InvalidOperation), and 'set' and 'frozen' too against the copy (a set
    finds a NaN only by identity), so a run with such a config could never be resumed."""
    config = _odd_config()
    assert config_diff(config, config) == []
    assert config_diff(config, pickle.loads(pickle.dumps(config))) == []
    assert config_diff(config, _odd_config()) == []
    check_config("c", config, pickle.loads(pickle.dumps(config)))
    # NaN and NaT are still unequal to numbers, dates to durations
    assert config_diff({"a": {float("nan")}, "b": np.datetime64("NaT"), "c": np.array(["NaT"], dtype="M8[D]")},
                       {"a": {1.0}, "b": np.timedelta64("NaT"), "c": np.array(["2020-01-01"], dtype="M8[D]")}) == \
        ["a", "b", "c"]
    assert config_diff({"a": {float("nan"), 1.0}}, {"a": {float("nan"), 2.0}}) == ["a"]


@pytest.mark.parametrize("flag, number", [(True, 1), (False, 0), (True, 1.0), (np.True_, np.int64(1)), ([True], [1]),
                                          ([True, 2], np.array([1, 2])), (np.array([True, False]), np.array([1, 0])),
                                          ({True}, {1}), ((False,), (0.0,))])
def test_config_diff_tells_a_bool_from_a_number(flag, number):
    """A bool and the number it converts to are different settings (an on/off flag against a count or rate). Was:
    config_diff({'x': True}, {'x': 1}) == [] (True == 1 in Python), for numpy's bools, bool arrays and sets alike."""
    import torch

    assert config_diff({"x": flag}, {"x": number}) == ["x"] and config_diff({"x": number}, {"x": flag}) == ["x"]
    with pytest.raises(CheckpointError, match=r"differing keys: x \(checkpoint"):
        check_config("c", {"x": flag}, {"x": number})
    assert config_diff({"x": torch.tensor([True])}, {"x": torch.tensor([1])}) == ["x"]
    # bools of either kind, and the same numbers, as before
    assert config_diff({"x": True, "y": [True, False], "z": 1}, {"x": np.True_, "y": np.array([True, False]),
                                                               "z": 1.0}) == []


@pytest.mark.parametrize("kwargs,match", [({"round_done": 2.9}, "round_done"), ({"round_done": -1}, "round_done"),
                                          ({"seed": -5}, "seed"), ({"seed": 1.5}, "seed"),
                                          ({"config": [("a", 1)]}, "config"),
                                          ({"history": None}, r"history must be a list"),
                                          ({"history": 3}, r"history must be a list"),
                                          ({"history": [3]}, r"history\[0\] must be a mapping"),
                                          ({"history": [{"round": 0}, 3]}, r"history\[1\] must be a mapping"),
                                          ({"initial": 3}, r"initial must be a mapping"),
                                          ({"initial": "ab"}, r"initial must be a mapping"),
                                          ({"extra": "torch"}, r"extra must be a mapping")])
def test_save_checkpoint_refuses_what_it_would_have_rounded(tmp_path, kwargs, match):
    """round_done = 2.9 was stored as 2 and seed = -5 as given: both are the run's RNG state."""
    from fedlib.checkpoint import save_checkpoint

    args = dict(config={"a": 1}, round_done=2, state={"w": np.zeros(2)}, history=[], seed=0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        save_checkpoint(tmp_path / "x.ckpt", **args)
    assert not (tmp_path / "x.ckpt").exists()


def test_save_checkpoint_names_a_history_initial_or_extra_that_is_no_mapping(tmp_path):
    """Was: history=None or 3 raised "'NoneType' / 'int' object is not iterable", history=[3] "cannot convert
    dictionary update sequence element #0 to a sequence", initial=3 "'int' object is not iterable", and a
    tensor given for initial or extra RuntimeError ('Boolean value of Tensor with more than one value is
    ambiguous', from ``initial or {}``), none naming the argument. None (and an empty mapping) are still {}."""
    import torch

    from fedlib.checkpoint import CheckpointError, load_checkpoint, save_checkpoint

    args = dict(config={"a": 1}, round_done=2, state={"w": np.zeros(2)}, history=[], seed=0)
    for name, value in (("initial", torch.ones(2)), ("extra", torch.ones(2)), ("history", torch.ones(2))):
        with pytest.raises(CheckpointError, match=rf"^save_checkpoint: .*x\.ckpt: {name}(\[0\])? must be a"):
            save_checkpoint(tmp_path / "x.ckpt", **{**args, name: value})
    assert not (tmp_path / "x.ckpt").exists()
    save_checkpoint(tmp_path / "x.ckpt", **{**args, "initial": None, "extra": {}, "history": ({"round": 0},)})
    doc = load_checkpoint(tmp_path / "x.ckpt")
    assert doc["initial"] == {} and doc["extra"] == {} and doc["history"] == [{"round": 0}]


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
    assert (f"--checkpoint {ck}: exists and is not a checkpoint of this command, run synthetic (kind 'synthetic'): "
            "it is ") in err
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
    err = _fresh_over(tmp_path, capsys, pickle.dumps({"format": FORMAT, "kind": "table1"}))
    assert "it is a fedlib checkpoint of another command (run cifar10 / table1 (kind 'table1'))." in err


def test_resume_from_the_other_commands_checkpoint_names_both_commands(tmp_path, capsys):
    """run cifar10 --resume given run synthetic's checkpoint said "is a 'synthetic' checkpoint, expected 'table1'",
    table1 being an internal name that run cifar10's user never typed; both commands are named now."""
    from fedlib.cli import main

    out = tmp_path / "r.json"
    assert main(FRESH + ["--out", str(out)]) == 0
    ck = Path(str(out) + ".ckpt")
    capsys.readouterr()
    assert main(["run", "cifar10", "--sample", "--width", "0.03", "--rounds", "3", "--num-clients", "4",
                 "--resume", "--checkpoint", str(ck), "--out", str(tmp_path / "c.json")]) == 2
    err = capsys.readouterr().err
    assert f"--checkpoint: {ck} is a checkpoint of run synthetic (kind 'synthetic'), not of run cifar10 / table1 " \
           "(kind 'table1')" in err, err


# --------------------------------------------------------------------------- to_torch_tree's like
def test_to_torch_tree_refuses_a_like_without_tensors():
    import numpy as np

    from fedlib.checkpoint import to_torch_tree

    with pytest.raises(ValueError, match=r"^like must be a torch tensor or a list of them"):
        to_torch_tree([np.zeros(1)], like=[np.zeros(1)])


def test_to_torch_tree_gives_each_parameter_of_a_mixed_dtype_model_its_own_dtype():
    """A model whose parameters mix dtypes (a float32 layer, then a float64 scale 1 + 1e-12): each list shaped like
    ``like`` (params, the server momentum buffer) takes like's dtypes entry by entry, so the state comes back bit for
    bit and begins a round. Before: every floating array took the first parameter's float32, the scale was rounded to
    1.0 without a word and ClientOptimizer.begin refused the state ('solver_state.params[2] is torch.float32 (1,) on
    cpu but parameter 2 is torch.float64'). Other floating arrays keep their own dtype under a mixed like; integer
    arrays (BatchNorm's num_batches_tracked) theirs, with a like of buffers_of(model) too."""
    import torch

    from fedlib.algorithms import make_algorithm
    from fedlib.checkpoint import to_numpy_tree, to_torch_tree
    from fedlib.optim import ClientOptimizer, buffers_of, parameters_of
    from fedlib.server import momentum
    from fedlib.solvers import sgd

    model = torch.nn.Module()
    model.layer = torch.nn.Linear(2, 1)
    model.scale = torch.nn.Module()
    model.scale.s = torch.nn.Parameter(torch.tensor([1 + 1e-12], dtype=torch.float64))
    model.norm = torch.nn.BatchNorm1d(2, affine=False).double()  # buffers only
    like = parameters_of(model)
    assert [t.dtype for t in like] == [torch.float32, torch.float32, torch.float64]
    algo = make_algorithm("fednova", sgd(0.1), momentum(0.9))
    state = algo.init(like, num_clients=2)
    state = state._replace(server=state.server._replace(buffer=[t + 0.5 for t in state.params]))
    saved = to_numpy_tree({"server": state, "extra": [np.array([1 + 1e-12]), np.array([0.5], dtype=np.float32)],
                           "buffers": buffers_of(model)})
    back = to_torch_tree(saved, like=like)
    for got, want in zip(back["server"].params + back["server"].server.buffer, state.params + state.server.buffer):
        assert got.dtype == want.dtype and torch.equal(got, want)
    assert back["server"].params[2].item() - 1 == pytest.approx(1e-12, rel=1e-3)
    assert [t.dtype for t in back["extra"]] == [torch.float64, torch.float32]
    assert [t.dtype for t in back["buffers"]] == [torch.float64, torch.float64, torch.int64]
    buffers = to_torch_tree(saved["buffers"], like=buffers_of(model))
    assert [t.dtype for t in buffers] == [torch.float64, torch.float64, torch.int64]
    ClientOptimizer(model.parameters(), algo.solver).begin(algo.client_init(back["server"], 0))


RUN = ["run", "synthetic", "--rounds", "2", "--num-clients", "3", "--quiet"]


def test_ctrl_c_after_a_checkpoint_names_it_and_resume_finishes(tmp_path, monkeypatch, capsys, umask):
    umask(0o022)
    out = tmp_path / "r.json"
    argv = RUN[:2] + ["--rounds", "3", "--num-clients", "3", "--quiet", "--checkpoint-every", "1",
                      "--out", str(out)]
    real_save = ctrl_c_after_saving(monkeypatch)
    assert main(argv) == 130
    err = capsys.readouterr().err
    ckpt = Path(str(out) + ".ckpt")
    assert ckpt.is_file() and not out.exists()
    assert str(ckpt) in err and "--resume" in err and "nothing written" not in err
    if os.name == "posix":
        assert stat.S_IMODE(ckpt.stat().st_mode) == 0o644
    monkeypatch.setattr(fedlib.checkpoint, "save_checkpoint", real_save)
    assert main(argv + ["--resume"]) == 0
    assert len(read_result(out)["history"]) == 3


@pytest.mark.parametrize("stop", ["ctrl-c", "divergence"])
def test_a_checkpoint_kept_in_a_folder_full_by_now_is_still_named(stop, tmp_path, monkeypatch, capsys):
    """The folder of a run's checkpoint fills up (or turns read-only) after the checkpoint of round 1 is saved; then
    the run stops (Ctrl-C, or a divergence). Since the output checks create a temporary file in the folder
    (8bb49e8), the handler's look for the checkpoint it kept ran those checks too, failed on the folder, and said
    'interrupted (nothing written)' / '(nothing written)' with the checkpoint on disk; it only names the path now."""
    import fedlib.cli.common as common
    from fedlib.engines.batched import DivergenceError

    out = tmp_path / "r.json"
    argv = RUN[:2] + ["--rounds", "3", "--num-clients", "3", "--quiet", "--checkpoint-every", "1", "--out", str(out)]
    real_save = fedlib.checkpoint.save_checkpoint

    def full_folder(path, folder, flag):
        raise common.CLIError(f"{flag} {path}: folder {folder} is not writable: creating a file there failed "
                              "(No space left on device)")

    def save_then_stop(*args, **kwargs):
        real_save(*args, **kwargs)
        monkeypatch.setattr(common, "_check_can_create", full_folder)  # the folder is full from now on
        if stop == "ctrl-c":
            raise KeyboardInterrupt
        raise DivergenceError(1, "the training loss is inf (lower the learning rate)")

    monkeypatch.setattr(fedlib.checkpoint, "save_checkpoint", save_then_stop)
    assert main(argv) == (130 if stop == "ctrl-c" else 2)
    err = capsys.readouterr().err
    ckpt = Path(str(out) + ".ckpt")
    assert ckpt.is_file() and not out.exists()
    assert f"checkpoint {ckpt}" in err and "nothing written" not in err, err


@pytest.mark.parametrize("extra", [[], ["--checkpoint-every", "1"]])
def test_ctrl_c_before_any_file_says_nothing_written(tmp_path, monkeypatch, capsys, extra):
    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(fedlib.engines.batched, "run_engine", interrupt)
    out = tmp_path / "r.json"
    assert main(RUN + ["--out", str(out), *extra]) == 130
    assert "interrupted (nothing written)" in capsys.readouterr().err
    assert not out.exists() and not Path(str(out) + ".ckpt").exists()


def test_unwritable_checkpoint_folder_is_refused_before_training(tmp_path, monkeypatch, capsys):
    """It trained round 1, then died with PermissionError (exit 1) at the first checkpoint. (As root every folder
    is writable, so os.access is made to say no for this one.)"""
    ro = tmp_path / "ro"
    ro.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == ro else real(p, mode, **kw))
    started = []
    monkeypatch.setattr(fedlib.engines.batched, "run_batched", lambda *a, **k: started.append(1))
    rc = main(RUN + ["--checkpoint-every", "1", "--checkpoint", str(ro / "c.ckpt"), "--out", str(tmp_path / "r.json")])
    assert rc == 2 and not started
    assert f"--checkpoint {ro / 'c.ckpt'}: folder {ro} is not writable" in capsys.readouterr().err


def test_resume_takes_the_same_data_file_however_its_path_is_typed(tmp_path, monkeypatch, capsys):
    """--resume compared data.name, the --data path as typed: the same LEAF file given as an absolute
    path (or from another folder) was refused as 'another configuration'. The data's SHA-256 identifies it
    (test_resume_takes_the_data_file_where_it_moved); another file is still refused."""
    from fedlib.data.leaf import save_leaf
    from fedlib.data.synthetic import synthetic

    save_leaf(synthetic(num_clients=3, seed=0), tmp_path / "leaf.json", drop_test=True)
    save_leaf(synthetic(num_clients=3, seed=1), tmp_path / "other.json", drop_test=True)
    monkeypatch.chdir(tmp_path)
    argv = ["run", "synthetic", "--rounds", "3", "--quiet", "--checkpoint-every", "1", "--out", "r.json"]
    real_save = ctrl_c_after_saving(monkeypatch)
    assert main(argv + ["--data", "leaf.json"]) == 130
    monkeypatch.setattr(fedlib.checkpoint, "save_checkpoint", real_save)
    capsys.readouterr()
    assert main(argv + ["--data", str(tmp_path / "other.json"), "--resume"]) == 2
    assert "data.sha256 (checkpoint" in capsys.readouterr().err
    assert main(argv + ["--data", str(tmp_path / "leaf.json"), "--resume"]) == 0
    assert len(read_result(tmp_path / "r.json")["history"]) == 3


def test_resume_takes_the_data_file_where_it_moved(tmp_path, monkeypatch, capsys):
    """A run interrupted, its LEAF file then moved to another folder: --resume with --data at the new path was refused
    with 'differing keys: data.source (checkpoint '.../leaf.json', now '.../moved/leaf.json')' (only the ranks of a
    distributed run were compared by contents). The same contents now resume, and the run equals the uninterrupted
    one; the result names the path it read (config.data.source)."""
    from fedlib.data.leaf import save_leaf
    from fedlib.data.synthetic import synthetic

    save_leaf(synthetic(num_clients=3, seed=0), tmp_path / "leaf.json", drop_test=True)
    monkeypatch.chdir(tmp_path)
    argv = ["run", "synthetic", "--rounds", "3", "--quiet", "--checkpoint-every", "1"]
    assert main(argv + ["--data", "leaf.json", "--out", "whole.json"]) == 0
    real_save = ctrl_c_after_saving(monkeypatch)
    assert main(argv + ["--data", "leaf.json", "--out", "r.json"]) == 130
    monkeypatch.setattr(fedlib.checkpoint, "save_checkpoint", real_save)
    (tmp_path / "moved").mkdir()
    (tmp_path / "leaf.json").rename(tmp_path / "moved" / "leaf.json")
    capsys.readouterr()
    assert main(argv + ["--data", "moved/leaf.json", "--out", "r.json", "--resume"]) == 0
    resumed, whole = read_result(tmp_path / "r.json"), read_result(tmp_path / "whole.json")
    assert [h["train_loss"] for h in resumed["history"]] == [h["train_loss"] for h in whole["history"]]
    assert resumed["config"]["data"]["source"] == str(tmp_path / "moved" / "leaf.json")
    assert resumed["config"]["data"]["sha256"] == whole["config"]["data"]["sha256"]


RUN_3_CLIENTS = ["run", "synthetic", "--num-clients", "3", "--quiet"]


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
    argv = RUN_3_CLIENTS + ["--rounds", "6", "--checkpoint-every", "1", "--out", str(out)]
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
    assert main(RUN_3_CLIENTS + ["--rounds", "2", "--checkpoint-every", "1", "--checkpoint", str(other),
                       "--out", str(out)]) == 2
    assert "is not a checkpoint of this command, run synthetic (kind 'synthetic')" in capsys.readouterr().err
    assert other.read_text() == '{"keep": true}' and not out.exists()


def test_ctrl_c_does_not_offer_an_earlier_runs_checkpoint(tmp_path, monkeypatch, capsys):
    """Interrupted before its first checkpoint, a run named the finished checkpoint of another
    configuration at <out>.ckpt as 'kept: run the same command with --resume', which then refused it."""
    out = tmp_path / "r.json"
    argv = RUN_3_CLIENTS + ["--rounds", "2", "--checkpoint-every", "1", "--out", str(out)]
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
    argv = RUN_3_CLIENTS + ["--lr", "30", "--l2", "1", "--rounds", "40", "--checkpoint-every", "1", "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "diverged in round" in err and ckpt.is_file() and not out.exists()
    assert "nothing written" not in err and f"checkpoint {ckpt}" in err and "--checkpoint" in err
    # without checkpoints the message is unchanged
    assert main(RUN_3_CLIENTS + ["--lr", "30", "--l2", "1", "--rounds", "40", "--out", str(tmp_path / "s.json")]) == 2
    assert "(nothing written)" in capsys.readouterr().err


def test_load_checkpoint_names_a_kind_that_is_no_string(tmp_path):
    """Was: kind=np.array([]) (or of several entries) raised numpy's 'The truth value of an empty array is
    ambiguous' from `doc.get("kind") != kind`, naming nothing, and kind=3 refused the file as 'a checkpoint of
    another command'."""
    path = save_checkpoint(tmp_path / "c.ckpt", config={}, round_done=0, state={}, history=[])
    for kind in (np.array([]), np.array(["run", "bench"]), 3):
        with pytest.raises(ValueError, match=r"^kind must be None or a string such as 'run', got "):
            load_checkpoint(path, kind=kind)
    assert load_checkpoint(path, kind="run")["kind"] == "run"


def test_checkpoint_errors_name_the_function_when_called_from_python(tmp_path):
    """From Python, load_checkpoint's, save_checkpoint's and check_config's messages start with the function's name;
    the command line passes its flags (who='--resume' / '--checkpoint', table1 'table1'). Before (2026-12-05) they
    named the flags from any caller: load_checkpoint('missing.ckpt') said '--resume: checkpoint missing.ckpt not
    found' to a user who never typed --resume."""
    from fedlib.checkpoint import CheckpointError, check_config, load_checkpoint, save_checkpoint

    missing = tmp_path / "missing.ckpt"
    with pytest.raises(CheckpointError, match=rf"^load_checkpoint: checkpoint {re.escape(str(missing))} not found$"):
        load_checkpoint(missing)
    with pytest.raises(CheckpointError, match=rf"^--resume: checkpoint {re.escape(str(missing))} not found$"):
        load_checkpoint(missing, who="--resume")
    nowhere = tmp_path / "no" / "c.ckpt"
    kw = dict(config={}, round_done=0, state={}, history=[])
    with pytest.raises(CheckpointError, match=rf"^save_checkpoint: {re.escape(str(nowhere))}: folder .* does not exist"):
        save_checkpoint(nowhere, **kw)
    with pytest.raises(CheckpointError, match=rf"^--checkpoint {re.escape(str(nowhere))}: folder .* does not exist"):
        save_checkpoint(nowhere, **kw, who="--checkpoint")
    with pytest.raises(CheckpointError, match=r"^check_config: checkpoint c\.ckpt was written by another configuration"):
        check_config("c.ckpt", {"lr": 0.1}, {"lr": 0.2})


def test_save_checkpoints_arguments_come_back_under_the_names_its_docstring_gives(tmp_path):
    """save_checkpoint's docstring: round_done comes back as ["round"] and ["rng"]["next_round"], seed as
    ["rng"]["seed"], config / history / initial / extra under their own names (a user looked for ["round_done"])."""
    from fedlib.checkpoint import PARTS, load_checkpoint, save_checkpoint

    path = save_checkpoint(tmp_path / "c.ckpt", config={"lr": 0.1}, round_done=3, state={"w": [1.0]},
                           history=[{"round": 0}], initial={"loss": 2.0}, seed=7, extra={"note": "x"})
    doc = load_checkpoint(path)
    assert set(doc) == set(PARTS) and "round_done" not in doc
    assert doc["round"] == doc["rng"]["next_round"] == 3 and doc["rng"]["seed"] == 7
    assert (doc["config"], doc["history"], doc["initial"], doc["extra"]) == ({"lr": 0.1}, [{"round": 0}],
                                                                            {"loss": 2.0}, {"note": "x"})

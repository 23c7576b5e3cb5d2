"""Resuming a Table 1 group (``python -m fedlib table1``) from its checkpoint: cuDNN's algorithm search,
which changes the rounding, must match the paused call's; a switch of CUDA graphs is recorded."""
from __future__ import annotations

from pathlib import Path

from fedlib import checkpoint as ck

from torch_threads import one_torch_thread  # noqa: F401 (autouse fixture)


# ----------------------------------------------------------------------- cuDNN search and CUDA graphs across a resume
def _table1_args(results, *extra):
    return ["table1", "--results", str(results), "--sample", "--width", "0.03", "--rounds", "2", "--device", "cpu",
            "--seeds", "0", "--cells", "sgd-e2-fedavg", "--budget-seconds", "600", *extra]


def _interrupted_after_first_checkpoint(monkeypatch, args) -> Path:
    """Run ``table1`` until its first checkpoint is written, then Ctrl-C (exit 130); the checkpoint."""
    import fedlib.checkpoint
    from cliutil import cli_exit

    real_save = fedlib.checkpoint.save_checkpoint

    def save_then_interrupt(*a, **kw):
        real_save(*a, **kw)
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(fedlib.checkpoint, "save_checkpoint", save_then_interrupt)
        assert cli_exit(args)[0] == 130
    ckpt = Path(args[args.index("--results") + 1]) / ".ckpt__sgd-e2-fedavg__seed0.pkl"
    assert ckpt.is_file()
    return ckpt


def _rewrite(ckpt: Path, edit) -> None:
    doc = ck.load_checkpoint(ckpt)
    edit(doc)
    ck.save_checkpoint(ckpt, config=doc["config"], round_done=doc["round"], state=doc["state"], history=doc["history"],
                       initial=doc["initial"], seed=doc["rng"]["seed"], kind=doc["kind"], extra=doc["extra"])


def test_a_group_paused_under_cudnn_search_resumes_only_under_it(tmp_path, monkeypatch):
    """--cudnn-benchmark lets cuDNN pick other convolution algorithms, which round differently, as
    --conv does (refused): a group checkpointed with it was resumed without it (and the other way
    round), and its result said cudnn_benchmark of the last call only. Now refused like --conv,
    the checkpoint kept; with the flag it resumes. A checkpoint of an earlier commit (no such key)
    is not checked for it."""
    import torch
    from cliutil import cli_exit

    from fedlib.results import read_result

    ckpt = _interrupted_after_first_checkpoint(monkeypatch, _table1_args(tmp_path, "--cudnn-benchmark"))
    assert ck.load_checkpoint(ckpt)["config"]["cudnn_benchmark"] is True
    before = ckpt.read_bytes()
    rc, out, err = cli_exit(_table1_args(tmp_path))
    assert rc == 2 and "cudnn_benchmark (checkpoint True, now False)" in err, (rc, out, err)
    assert ckpt.read_bytes() == before and not (tmp_path / "sgd-e2-fedavg__seed0.json").exists()
    assert torch.backends.cudnn.benchmark is False  # restored after the refused call
    rc, out, err = cli_exit(_table1_args(tmp_path, "--cudnn-benchmark"))
    assert rc == 0, err
    res = read_result(tmp_path / "sgd-e2-fedavg__seed0.json")
    assert res["summary"]["resumed_after_round"] == 1 and res["config"]["engine"]["cudnn_benchmark"] is True
    # a checkpoint written before the key existed resumes under either setting
    other = tmp_path / "other"
    ckpt = _interrupted_after_first_checkpoint(monkeypatch, _table1_args(other, "--cudnn-benchmark"))
    _rewrite(ckpt, lambda doc: doc["config"].pop("cudnn_benchmark"))
    assert cli_exit(_table1_args(other))[0] == 0 and not ckpt.exists()


def test_a_group_resumed_with_cuda_graphs_switched_says_so(tmp_path, monkeypatch):
    """CUDA graphs replay the eager step's kernels, and gpu_run.sh switches a session to eager when
    they fail, so a group may resume with them switched (not refused); but its result said nothing
    (config.engine.cuda_graph was the last call's) and its mixed rate set later estimates. Every call
    is now recorded with its cuda_graph and the rounds it trained; a switch is flagged in
    provenance.resumed, and _previous_rate leaves such a result out. (A call with graphs needs a
    GPU: here the checkpoint's record of the first call says it had them.)"""
    from cliutil import cli_exit

    from fedlib.experiments import cifar10 as C
    from fedlib.results import read_result

    key = {"width": 0.03, "precision": "fp32", "path": "grouped", "cuda_graph": False, "device_type": "cpu",
           "num_train": None}
    for switched in (False, True):
        results = tmp_path / str(switched)
        ckpt = _interrupted_after_first_checkpoint(monkeypatch, _table1_args(results))
        calls = ck.load_checkpoint(ckpt)["extra"]["calls"]
        assert [(c["cuda_graph"], c["rounds"]) for c in calls] == [(False, [0, 1])] and calls[0]["command"]
        if switched:
            _rewrite(ckpt, lambda doc: doc["extra"]["calls"][0].update(cuda_graph=True))
        rc, out, err = cli_exit(_table1_args(results))
        assert rc == 0, err
        res = read_result(results / "sgd-e2-fedavg__seed0.json")
        resumed = res["provenance"]["resumed"]
        assert [(c["cuda_graph"], c["rounds"]) for c in resumed["earlier_calls"]] == [(switched, [0, 1])]
        assert resumed.get("cuda_graph_changed", False) is switched
        assert ("CUDA graphs on in an earlier call" in out) is switched
        key["num_train"] = res["config"]["engine"]["num_train"]
        assert (C._previous_rate(results, key) is None) is switched


def test_a_paused_group_is_read_once_to_resume(tmp_path, monkeypatch):
    """table1 read a paused group's checkpoint twice: to plan the call (paused_group: its round, its settings) and
    again in train_runs to resume it (each read hashes the file, then unpickles it: ~80 MB per stacked run at full
    width). The plan's reading is now handed to train_runs; the resumed result is the one resumed from the file."""
    import fedlib.checkpoint
    from cliutil import cli_exit

    from fedlib.results import read_result

    ckpt = _interrupted_after_first_checkpoint(monkeypatch, _table1_args(tmp_path))
    real_load, reads = fedlib.checkpoint.load_checkpoint, []

    def counted(path, *a, **kw):
        reads.append(Path(path))
        return real_load(path, *a, **kw)

    monkeypatch.setattr(fedlib.checkpoint, "load_checkpoint", counted)
    rc, out, err = cli_exit(_table1_args(tmp_path))
    assert rc == 0, err
    assert reads == [ckpt]
    res = read_result(tmp_path / "sgd-e2-fedavg__seed0.json")
    assert res["summary"]["resumed_after_round"] == 1 and len(res["history"]) == 2

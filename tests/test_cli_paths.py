"""Command-line guards: outputs that would destroy an input (a checkpoint inside the --data folder, bench output
over the shipped sample), flags that a data source ignores (even at their defaults), devices torch does not see or
the engines do not run on, Table 1 result folders of another setup or that cannot be made, and outputs that cannot
be written as asked (--out -, a name too long for its temporary file or default checkpoint, a folder that is a
file or where no file can be created, a leading ~ after --flag=)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedlib.cli import main
from fedlib.data import save_leaf, synthetic

from cliutil import cli_exit

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


def test_bench_profile_must_not_be_the_json_file(tmp_path, capsys):
    out = tmp_path / "x.json"
    assert main(["bench", "cifar10", "--sample", "--json", str(out), "--profile", str(out)]) == 2
    assert "--profile" in capsys.readouterr().err and not out.exists()


def test_table1_results_folder_that_cannot_be_made_is_refused_before_training(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    rc = main(["table1", "--sample", "--device", "cpu", "--budget-seconds", "60", "--results", str(blocker / "sub")])
    assert rc == 2
    assert "cannot create the folder" in capsys.readouterr().err


@pytest.fixture(scope="module")
def leaf_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("leaf") / "train.json"
    save_leaf(synthetic(num_clients=3, seed=1, num_samples=[20, 30, 25]), path, drop_test=True)
    return path


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


TINY = ["run", "synthetic", "--rounds", "1", "--num-clients", "4", "--quiet"]


def test_out_dash_is_refused_rather_than_written_as_a_file_named_dash(tmp_path, monkeypatch, capsys):
    # `--out - | jq ...` wrote a file called '-' into the current folder and printed 'wrote -'
    monkeypatch.chdir(tmp_path)
    assert main([*TINY, "--out", "-"]) == 2
    assert "results are not written to stdout" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_an_out_name_too_long_for_the_temporary_file_is_refused_before_training(tmp_path, monkeypatch, capsys):
    # a 250-byte name is a valid file name, but '.<name>.<8>.tmp' is not: the run trained, then
    # failed to write its result ('File name too long')
    import fedlib.cli.synthetic as S

    out = tmp_path / ("r" * 245 + ".json")
    calls = []
    monkeypatch.setattr(S, "write_result", lambda *a, **k: calls.append(a))
    rc = main([*TINY, "--out", str(out)])
    assert rc == 2 and calls == []
    assert "at most 241 can be written atomically" in capsys.readouterr().err


def test_a_default_checkpoint_name_too_long_is_refused_before_training(tmp_path, capsys):
    # --out of 239 bytes is fine, but its default checkpoint '<out>.ckpt' (244) failed at the first checkpoint
    out = tmp_path / ("r" * 234 + ".json")
    rc = main([*TINY, "--out", str(out), "--checkpoint-every", "1"])
    assert rc == 2 and "--checkpoint" in capsys.readouterr().err and not out.exists()


@pytest.fixture
def leaf_dir(tmp_path):
    folder = tmp_path / "leaf"
    save_leaf(synthetic(num_clients=3, seed=0, num_samples=[30, 40, 25]), folder)
    return folder


def test_the_checkpoint_may_not_lie_inside_the_data_folder(leaf_dir, tmp_path, capsys):
    """A --checkpoint inside the --data folder was written there; named *.json, the next run read the pickle as
    LEAF data and failed."""
    ckpt = leaf_dir / "train" / "ckpt.json"
    err = _err(capsys, ["run", "synthetic", "--data", str(leaf_dir), "--rounds", "1", "--quiet",
                        "--checkpoint-every", "1", "--checkpoint", str(ckpt), "--out", str(tmp_path / "o.json")])
    assert "lies inside the --data folder" in err and "--checkpoint" in err
    assert not ckpt.exists() and not (tmp_path / "o.json").exists()
    assert sorted(p.name for p in leaf_dir.rglob("*") if p.is_file()) == ["test.json", "train.json"]
    # outside the folder it is fine, and the data still load
    assert main(["run", "synthetic", "--data", str(leaf_dir), "--rounds", "1", "--quiet", "--checkpoint-every",
                 "1", "--checkpoint", str(tmp_path / "ckpt.pkl"), "--out", str(tmp_path / "o.json")]) == 0


@pytest.mark.parametrize("flag, where", [("--out", "r.json"), ("--out", "train/r.txt"),
                                         ("--checkpoint", "test/c.ckpt"), ("--checkpoint", "c.json")])
def test_an_output_in_the_data_folder_that_no_run_reads_is_allowed(leaf_dir, tmp_path, capsys, flag, where):
    """--out ds/r.json next to train/ and test/, or --checkpoint ds/test/c.ckpt, was refused with '... the next run
    would read it as data', which was false: a folder with train/ is read only from the .json files of train/ and
    test/. Now it is written, and the next run reads the same data (the same result)."""
    argv = ["run", "synthetic", "--data", str(leaf_dir), "--rounds", "2", "--quiet"]
    target = leaf_dir / where
    out = target if flag == "--out" else tmp_path / "o.json"
    extra = ["--checkpoint-every", "1", "--checkpoint", str(target)] if flag == "--checkpoint" else []
    assert main(argv + ["--out", str(out)] + extra) == 0, capsys.readouterr().err
    assert target.is_file()
    assert main(argv + ["--out", str(tmp_path / "again.json")]) == 0, capsys.readouterr().err
    first, again = ([{k: v for k, v in h.items() if k != "time_s"} for h in json.loads(f.read_text())["history"]]
                    for f in (out, tmp_path / "again.json"))
    assert first == again


@pytest.mark.parametrize("flag", ["--out", "--checkpoint"])
@pytest.mark.parametrize("layout, where", [("split", "train/r.json"), ("split", "test/r.JSON"), ("flat", "r.json")])
def test_an_output_that_the_next_run_would_read_as_data_is_refused(tmp_path, capsys, monkeypatch, layout, where,
                                                                     flag):
    """Refused still, naming the folders read: a .json file (any case) in train/ or test/ of such a folder, or
    directly in a folder of .json files; the README's Troubleshooting row quotes the message."""
    monkeypatch.chdir(tmp_path)
    data = synthetic(num_clients=3, seed=0, num_samples=[30, 40, 25])
    Path("ds").mkdir()
    save_leaf(data, "ds" if layout == "split" else "ds/a.json", drop_test=layout == "flat")
    argv = ["run", "synthetic", "--data", "ds", "--rounds", "1", "--quiet"]
    target = f"ds/{where}"
    if flag == "--out":
        argv += ["--out", target]
    else:
        argv += ["--out", "o.json", "--checkpoint-every", "1", "--checkpoint", target]
    read = "ds/train/ and ds/test/" if layout == "split" else "ds/"
    assert _err(capsys, argv).strip() == (f"python -m fedlib run synthetic: error: {flag} {target}: lies inside the "
                                          f"--data folder ds, among the .json files read from {read}; the next run "
                                          "would read it as data")
    assert not Path(target).exists() and not Path("o.json").exists()
    if (layout, where, flag) == ("split", "train/r.json", "--out"):
        readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
        row = next(ln for ln in readme.splitlines() if ln.startswith("| `--out ds/train/r.json` with `--data ds`"))
        assert f"| `{flag} {target}: lies inside the --data folder ds, among the .json files read from {read}; " \
               "the next run would read it as data` |" in row, row


@pytest.mark.parametrize("flag", ["--json", "--profile"])
def test_bench_cifar10_output_may_not_replace_the_data_it_reads(monkeypatch, capsys, flag):
    """bench cifar10 --json data/cifar10-sample/cifar10-sample.npz benchmarked on the sample and then replaced it
    with the JSON (exit 0; the next --sample run failed). The benchmark is replaced by a stub: before the fix it
    was started (the stub fails the test before anything is written)."""
    import fedlib.experiments.cifar10 as C
    from fedlib.data.cifar10 import DEFAULT_SAMPLE_PATH

    def started(*args, **kwargs):
        raise AssertionError("the benchmark was started")

    monkeypatch.setattr(C, "bench_cifar10", started)
    before = DEFAULT_SAMPLE_PATH.read_bytes()
    err = _err(capsys, ["bench", "cifar10", "--width", "0.03", "--steps", "1", "--repeat", "1", "--quiet",
                        "--device", "cpu", flag, str(DEFAULT_SAMPLE_PATH)])
    assert f"{flag} {DEFAULT_SAMPLE_PATH}: lies inside the shipped --sample folder" in err
    assert DEFAULT_SAMPLE_PATH.read_bytes() == before


def test_a_leading_tilde_in_a_path_flag_is_the_home_folder(tmp_path, monkeypatch, capsys):
    """The shell does not expand ~ after '--flag=': table1 --results=~/t1 created a folder named '~' in the working
    directory, and run synthetic --out=~/r.json failed with 'folder ~ does not exist'."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    assert main(["run", "synthetic", "--num-clients", "3", "--rounds", "1", "--quiet", "--out=~/r.json"]) == 0
    assert (home / "r.json").is_file()
    assert main(["table1", "--results=~/t1", "--budget-seconds", "0", "--sample", "--width", "0.03", "--rounds", "1",
                 "--cells", "sgd-e2-fedavg", "--seeds", "0", "--device", "cpu"]) == 0
    assert (home / "t1").is_dir() and not (cwd / "~").exists()


@pytest.mark.parametrize("argv", [
    ["run", "synthetic", "--backend", "torch", "--num-clients", "3", "--rounds", "1", "--quiet"],
    ["run", "cifar10", "--sample", "--width", "0.03", "--num-clients", "2", "--rounds", "1", "--quiet"],
])
def test_a_gpu_index_torch_does_not_see_is_refused_up_front(monkeypatch, capsys, argv):
    """--device cuda:3 on a one-GPU machine passed the device checks (they only asked whether torch sees a GPU) and
    the run failed at its first tensor with a CUDA 'invalid device ordinal' traceback (exit 1). Here torch is told
    it sees one GPU; the run must stop before it starts."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    err = _err(capsys, argv + ["--device", "cuda:3"])
    assert "--device cuda:3: torch sees 1 GPU(s) on this machine (cuda:0)" in err


@pytest.mark.parametrize("argv", [
    ["run", "synthetic", "--backend", "torch", "--num-clients", "3", "--rounds", "1", "--quiet"],
    ["run", "cifar10", "--sample", "--width", "0.03", "--num-clients", "2", "--rounds", "1", "--quiet"],
])
def test_a_device_type_the_engines_do_not_run_on_is_refused(capsys, argv):
    """--device meta / mps passed the checks and failed in the run with a traceback (exit 1)."""
    err = _err(capsys, argv + ["--device", "meta"])
    assert "--device meta: the engines run on cpu or cuda" in err and "Traceback" not in err


def test_an_output_under_a_file_says_the_folder_is_a_file(tmp_path, capsys):
    """--out r.json/x.json (r.json a file) said 'folder r.json does not exist'."""
    f = tmp_path / "r.json"
    f.write_text("{}")
    run = ["run", "synthetic", "--num-clients", "3", "--rounds", "1", "--quiet"]
    assert f"folder {f} is a file" in _err(capsys, run + ["--out", str(f / "x.json")])
    assert f"folder {f} is a file" in _err(capsys, run + ["--out", str(tmp_path / "o.json"), "--checkpoint-every",
                                                          "1", "--checkpoint", str(f / "c.ckpt")])
    assert "does not exist" in _err(capsys, run + ["--out", str(tmp_path / "no" / "x.json")])


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc, where no file can be created")
@pytest.mark.parametrize("argv, flag, path", [
    (["run", "synthetic", "--num-clients", "3", "--rounds", "1", "--out", "/proc/r.json"], "--out", "/proc/r.json"),
    (["run", "synthetic", "--num-clients", "3", "--rounds", "1", "--checkpoint-every", "1", "--checkpoint",
      "/proc/c.ckpt"], "--checkpoint", "/proc/c.ckpt"),
    (["bench", "synthetic", "--rounds", "1", "--repeat", "1", "--json", "/proc/b.json"], "--json", "/proc/b.json"),
    (["run", "cifar10", "--sample", "--rounds", "1", "--device", "cpu", "--out", "/proc/c.json"], "--out",
     "/proc/c.json"),
    (["rerun", "missing.json", "--out", "/proc/r.json"], "--out", "/proc/r.json"),
])
def test_an_output_folder_where_no_file_can_be_created_is_refused_before_the_run(tmp_path, monkeypatch, argv, flag,
                                                                                 path):
    """A folder that os.access calls writable but where creating a file fails (/proc as root; a read-only file
    system) is refused before anything runs, exit 2, one line naming the flag. Before, as root: ``run synthetic
    --rounds 300 --out /proc/r.json`` trained all 300 rounds (8.7 s), then failed writing the result, exit 1, with
    "[Errno 2] No such file or directory: '/proc/.r.json.b3eiq25h.tmp'" (no flag named); --json, --checkpoint (at
    the first checkpoint, after round 1) and rerun --out the same. os.access is made to say yes for /proc, as it
    does for root, so that the test checks the same thing for any user."""
    import os

    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: True if str(p) == "/proc" else real(p, mode, **kw))
    monkeypatch.chdir(tmp_path)
    rc, out, err = cli_exit(argv)
    assert rc == 2 and out == "", (rc, out, err)
    assert err.count("\n") == 1 and f": error: {flag} {path}: folder /proc is not writable: creating a file there " \
        "failed (" in err, err
    # the check's own file is removed: a run in a writable folder leaves its result and checkpoint alone there
    assert main(RUN + ["--out", str(tmp_path / "r.json"), "--checkpoint-every", "1"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "r.json.ckpt"]


def test_an_output_over_a_checkpoint_is_refused(tmp_path, capsys):
    """``--out`` naming a checkpoint (``<out>.ckpt`` for ``<out>``, a slip of tab completion) replaced the
    checkpoint with the result JSON without a word: the run it held could no longer be resumed."""
    ckpt = tmp_path / "r.json.ckpt"
    assert main(RUN + ["--checkpoint-every", "1", "--checkpoint", str(ckpt)]) == 0
    before = ckpt.read_bytes()
    for argv in (RUN + ["--out", str(ckpt)], ["rerun", str(tmp_path / "missing.json"), "--out", str(ckpt)]):
        err = _err(capsys, argv)
        assert f"--out {ckpt}: is a fedlib checkpoint" in err and "Traceback" not in err
        assert ckpt.read_bytes() == before
    assert main(RUN + ["--checkpoint-every", "1", "--checkpoint", str(ckpt), "--resume", "--rounds", "3"]) == 0


@pytest.mark.parametrize("argv", [
    ["run", "synthetic", "--rounds", "1", "--quiet", "--data="],
    ["run", "synthetic", "--num-clients", "3", "--rounds", "1", "--quiet", "--out="],
    ["run", "synthetic", "--num-clients", "3", "--rounds", "1", "--quiet", "--checkpoint-every", "1",
     "--checkpoint="],
    ["rerun", ""],
])
def test_an_empty_path_flag_is_refused_not_read_as_the_working_folder(leaf_dir, tmp_path, monkeypatch, capsys, argv):
    """An empty path ('--data "$UNSET"') was Path(''), the working folder: run synthetic --data '' run from a LEAF
    folder trained on it without a word (exit 0, config.data.source that folder), --out '' said '--out .: is a
    folder' and rerun '' '.: cannot read'. Now the flag is named with 'an empty string' and nothing runs."""
    monkeypatch.chdir(leaf_dir)  # a folder load_leaf reads: an empty --data would train on it
    rc, _, err = cli_exit(argv)
    assert rc == 2 and "must be a file or folder path, got an empty string" in err
    flag = next((a.split("=")[0] for a in argv if a.endswith("=")), "result")
    assert f"argument {flag}" in err

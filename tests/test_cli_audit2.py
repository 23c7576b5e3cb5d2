"""Second audit of the command line (``python -m fedlib``): each case below was accepted
silently, or printed what it should not, before its fix."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fedlib.cli import main
from fedlib.data import save_leaf, synthetic

from cliutil import cli_exit

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "data" / "results" / "cifar10" / "sgd-e2-fedavg__seed0.json"


def _err(capsys, argv) -> str:
    assert main(argv) == 2
    return capsys.readouterr().err


@pytest.fixture
def leaf_dir(tmp_path):
    folder = tmp_path / "leaf"
    save_leaf(synthetic(num_clients=3, seed=0, num_samples=[30, 40, 25]), folder)
    return folder


# ----------------------------------------------------------------------------- table1 --dry-run
def _sample_result(path: Path) -> None:
    """The committed sgd-e2-fedavg seed-0 result as if made with ``--sample --width 0.03 --rounds 1``."""
    doc = json.loads(COMMITTED.read_text())
    doc["config"]["rounds"] = 1
    doc["config"]["engine"]["width"] = 0.03
    doc["config"]["data"]["num_train"] = 2000
    path.write_text(json.dumps(doc))


def test_table1_dry_run_does_not_count_a_sample_result_as_present(tmp_path, capsys):
    """The dry run listed a --sample result as 'present' for the full data set (it did not know the data size),
    and the real call with --data-root then refused the folder; with --sample it is present."""
    _sample_result(tmp_path / "sgd-e2-fedavg__seed0.json")
    argv = ["table1", "--results", str(tmp_path), "--budget-seconds", "0", "--dry-run", "--seeds", "0",
            "--cells", "sgd-e2-fedavg", "--width", "0.03", "--rounds", "1"]
    err = _err(capsys, argv)
    assert "num_train 2000 (requested 50000)" in err
    assert main(argv + ["--sample"]) == 0
    assert "present: sgd-e2-fedavg__seed0.json" in capsys.readouterr().out


def test_table1_dry_run_with_sample_estimates_at_the_sample_size(tmp_path, capsys):
    """With --sample the dry run estimated each run at 50,000 images (~103 s at 1000 images/s for one E=2
    round) and marked it beyond a budget that the real call, sized on the sample (~4 s), fits it in."""
    argv = ["table1", "--results", str(tmp_path), "--budget-seconds", "50", "--dry-run", "--seeds", "0",
            "--cells", "sgd-e2-fedavg", "--rounds", "1", "--images-per-second", "1000"]
    assert main(argv + ["--sample"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("would run: sgd-e2-fedavg seed 0") and "(~4 s at 1000 images/s" in line, line
    assert main(argv) == 0  # without --sample: the full data set, as before
    line = capsys.readouterr().out.strip()
    assert line.startswith("beyond the budget:") and "(~103 s at 1000 images/s" in line, line


# ----------------------------------------------------------------------------- checkpoint inside --data
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


# ----------------------------------------------------------------------------- rerun --quiet
def test_rerun_quiet_prints_only_the_verdict(tmp_path, capsys):
    """rerun --quiet let the run's sampling-bias warning through on stderr (twice in a shell)."""
    original = tmp_path / "s.json"
    assert main(["run", "synthetic", "--num-clients", "6", "--rounds", "2", "--sampling", "uniform",
                 "--clients-per-round", "3", "--quiet", "--out", str(original)]) == 0
    assert "warning:" in capsys.readouterr().err  # the run itself warns
    assert main(["rerun", str(original), "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out.startswith("match: 2 rounds")
    assert main(["rerun", str(original)]) == 0  # without --quiet the warning is shown
    assert "warning:" in capsys.readouterr().err


def test_rerun_quiet_still_shows_why_the_run_failed(leaf_dir, tmp_path, capsys):
    """With the run's stderr held back under --quiet, a failing rerun must still say why."""
    original = tmp_path / "l.json"
    assert main(["run", "synthetic", "--data", str(leaf_dir), "--rounds", "1", "--quiet", "--out",
                 str(original)]) == 0
    shutil.rmtree(leaf_dir)
    assert main(["rerun", str(original), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--data:" in err and "no such file or folder" in err
    assert "the rerun of the recorded config failed" in err


# ----------------------------------------------------------------------------- table1 --summary
def test_table1_summary_of_a_file_says_it_is_not_a_folder(tmp_path, capsys):
    """--summary --results FILE said 'no such folder' for a file that exists."""
    f = tmp_path / "r.json"
    f.write_text("{}")
    assert "r.json: not a folder" in _err(capsys, ["table1", "--summary", "--results", str(f)])
    assert "typo: no such folder" in _err(capsys, ["table1", "--summary", "--results", str(tmp_path / "typo")])


# ----------------------------------------------------------------------------- bench cifar10 --json / --profile
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


# ----------------------------------------------------------------------------- integers past 64 bits
@pytest.mark.parametrize("flags", [["--batch-size", "9" * 20], ["--epochs", "9" * 20],
                                   ["--sampling", "with-replacement", "--clients-per-round", "9" * 20]])
def test_an_integer_past_64_bits_is_bad_input_not_a_crash(tmp_path, capsys, flags):
    """--batch-size / --epochs / --clients-per-round of 10**20 passed the parser and crashed with an OverflowError
    traceback (exit 1, the status of an internal error); it is bad input: exit 2, one line, nothing written."""
    out = tmp_path / "o.json"
    err = _err(capsys, ["run", "synthetic", "--num-clients", "3", "--rounds", "1", "--quiet", "--tau-eff", "1",
                        "--out", str(out)] + flags)
    assert "too large for the 64-bit integers" in err and "Traceback" not in err
    assert not out.exists()


# ----------------------------------------------------------------------------- ~ in --flag=PATH
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


# ----------------------------------------------------------------------------- --device cuda:N
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


# ----------------------------------------------------------------------------- an output under a file
def test_an_output_under_a_file_says_the_folder_is_a_file(tmp_path, capsys):
    """--out r.json/x.json (r.json a file) said 'folder r.json does not exist'."""
    f = tmp_path / "r.json"
    f.write_text("{}")
    run = ["run", "synthetic", "--num-clients", "3", "--rounds", "1", "--quiet"]
    assert f"folder {f} is a file" in _err(capsys, run + ["--out", str(f / "x.json")])
    assert f"folder {f} is a file" in _err(capsys, run + ["--out", str(tmp_path / "o.json"), "--checkpoint-every",
                                                          "1", "--checkpoint", str(f / "c.ckpt")])
    assert "does not exist" in _err(capsys, run + ["--out", str(tmp_path / "no" / "x.json")])


# ----------------------------------------------------------------------------- --help of run cifar10 --seed
def test_run_cifar10_help_says_the_seed_draws_the_initial_model(capsys):
    """run cifar10 --help said the seed draws 'mini-batches, sampling, random epochs'; it also draws the initial
    model (vgg11(seed=run seed)), augmentation and dropout: two seeds do not share their initial model."""
    with pytest.raises(SystemExit) as exc:
        main(["run", "cifar10", "--help"])
    assert exc.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "run seed: the initial model (the same for every algorithm)" in text


# ----------------------------------------------------------------------------- bench cifar10 --steps / --full-round
class _Steps(Exception):
    pass


@pytest.mark.parametrize("flags, steps", [([], 20), (["--steps", "5"], 5), (["--full-round"], None)])
def test_bench_cifar10_passes_the_steps_it_was_given(monkeypatch, flags, steps):
    """The benchmark is a stub that stops the command with the steps it was asked for: 20 by default,
    --steps as given, None (the whole round) for --full-round."""
    import fedlib.experiments.cifar10 as C

    def record(*args, **kwargs):
        raise _Steps(kwargs["steps"])

    monkeypatch.setattr(C, "bench_cifar10", record)
    with pytest.raises(_Steps) as seen:
        main(["bench", "cifar10", "--width", "0.03", "--repeat", "1", "--quiet", "--device", "cpu", *flags])
    assert seen.value.args == (steps,)


def test_bench_cifar10_refuses_steps_with_full_round(monkeypatch, capsys):
    """--full-round with --steps timed the whole round and dropped --steps without a word."""
    import fedlib.experiments.cifar10 as C

    monkeypatch.setattr(C, "bench_cifar10", lambda *a, **k: pytest.fail("the benchmark was started"))
    err = _err(capsys, ["bench", "cifar10", "--width", "0.03", "--full-round", "--steps", "5", "--device", "cpu"])
    assert "--steps: --full-round times the whole round; give one of the two" in err


# --------------------------------------------------------------------------- arguments a subcommand does not take
@pytest.mark.parametrize("argv, command, message", [
    (["rerun", "a.json", "b.json"], "rerun",
     "unrecognized arguments: b.json; python -m fedlib rerun takes 1 positional argument (result), got 2 (see --help)"),
    (["rerun", "a.json", "--bogus"], "rerun", "unrecognized arguments: --bogus"),
    (["run", "synthetic", "--rounds", "2", "--bogus"], "run synthetic", "unrecognized arguments: --bogus"),
    (["table1", "extra"], "table1",
     "unrecognized arguments: extra; python -m fedlib table1 takes no positional arguments, got 1 (see --help)"),
])
def test_an_argument_a_subcommand_does_not_take_is_reported_by_that_subcommand(argv, command, message):
    """argparse reported them from the top level: 'usage: python -m fedlib [-h] COMMAND ...' and
    'python -m fedlib: error: unrecognized arguments: b.json', naming neither rerun nor what it takes."""
    rc, out, err = cli_exit(argv)
    assert (rc, out) == (2, ""), (rc, out, err)
    lines = err.strip().splitlines()
    assert lines[0].startswith(f"usage: python -m fedlib {command} [-h] "), lines[0]
    assert lines[-1] == f"python -m fedlib {command}: error: {message}"

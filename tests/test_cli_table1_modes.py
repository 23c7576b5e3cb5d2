"""``python -m fedlib table1``'s read-only modes and its result folder: ``--summary`` and
``--list-cells`` refuse the flags they would ignore, an interrupted read-only call names no
checkpoint as kept, and ``--results`` may not lie among the data it trains on; the ``--summary`` /
``--list-cells`` commands the docs quote run, and ``--summary`` outside the repository root says where it
looked; ``--dry-run`` checks the requested width and data size and estimates at the sample's size, and an empty
``--cells`` is refused. Each case was accepted (or printed something untrue) before its fix."""
from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest

import fedlib.experiments.cifar10 as c10
from fedlib.cli import main
from fedlib.cli.cifar10 import add_table1_parser
from fedlib.data.cifar10 import DEFAULT_SAMPLE_PATH

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "data" / "results" / "cifar10" / "sgd-e2-fedavg__seed0.json"
PREFIX = "python -m fedlib table1: error: "

#: A value other than the default for each table1 flag that takes one (store_true flags and
#: flags with choices are handled in the test); a new flag must be added here.
OTHER_VALUE = {"--results": "elsewhere", "--budget-seconds": "5", "--seeds": "0", "--cells": "sgd-e2-fedavg",
               "--rounds": "3", "--stack": "2", "--images-per-second": "100", "--checkpoint-every": "2",
               "--continue-later": "5", "--data-root": "/tmp", "--width": "0.5", "--device": "cpu"}


def _table1_actions():
    sub = argparse.ArgumentParser().add_subparsers()
    return [a for a in add_table1_parser(sub)._actions if a.option_strings and a.dest != "help"]


def _other_argv(action) -> list:
    """The flag with a value that is not its default."""
    flag = action.option_strings[-1]
    if action.nargs == 0:  # store_true
        return [flag]
    if action.choices:
        return [flag, next(c for c in action.choices if c != action.default)]
    return [flag, OTHER_VALUE[flag]]


def _error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(PREFIX), err
    return err[len(PREFIX):].strip()


@pytest.fixture
def results(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    shutil.copy(COMMITTED, folder / COMMITTED.name)
    return folder


def test_other_value_covers_every_flag_that_takes_a_value():
    """Otherwise the refusal test below would skip a flag added later."""
    valued = {a.option_strings[-1] for a in _table1_actions() if a.nargs != 0 and not a.choices}
    assert valued == set(OTHER_VALUE)


@pytest.mark.parametrize("mode", ["--summary", "--list-cells"])
def test_read_only_modes_refuse_every_flag_they_ignore(mode, results, capsys):
    used = {"--summary": {"--results", "--summary", "--list-cells"}, "--list-cells": {"--list-cells"}}[mode]
    head = "--summary takes only --results; " if mode == "--summary" else "--list-cells takes no other flag; "
    checked = 0
    for action in _table1_actions():
        flag = action.option_strings[-1]
        if flag in used:
            continue
        argv = ["table1", mode, "--results", str(results)] if mode == "--summary" else ["table1", mode]
        assert _error(capsys, argv + _other_argv(action)) == f"{head}{flag} is not used by it", flag
        checked += 1
    assert checked == len(_table1_actions()) - len(used) >= 18  # every data, engine and run flag of table1


def test_summary_and_list_cells_together_are_refused(results, capsys):
    assert _error(capsys, ["table1", "--summary", "--list-cells", "--results", str(results)]) \
        == "--list-cells takes no other flag; --results, --summary are not used by it"


def test_summary_with_seeds_names_the_flag_not_a_filtered_table(results, capsys):
    """``--summary --seeds 1`` printed the seed-0 result as if it had been filtered by seed."""
    assert _error(capsys, ["table1", "--summary", "--results", str(results), "--seeds", "1", "--cells", "x"]) \
        == "--summary takes only --results; --seeds, --cells are not used by it"


def test_read_only_modes_still_run_with_their_own_flags_and_defaults_spelled_out(results, capsys):
    assert main(["table1", "--summary", "--results", str(results), "--seeds", "0,1,2", "--rounds", "100"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("| row | E | method |") and "| SGD | E=2 | FedAvg | 58.82" in out
    assert main(["table1", "--list-cells"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(c10.CELLS) and lines[0].startswith("sgd-e2-fedavg ")


@pytest.mark.parametrize("mode", [["--summary"], ["--dry-run", "--budget-seconds", "0"]])
def test_an_interrupted_read_only_call_names_no_checkpoint_as_kept(mode, results, capsys, monkeypatch):
    """A paused group's checkpoint in --results is not the summary's or the dry run's: Ctrl-C there said
    'checkpoint(s) ... kept: run the same command again to continue from them', and the same read-only
    command continues nothing."""
    ckpt = results / ".ckpt__sgd-e2-fednova__seed0.pkl"
    ckpt.write_bytes(b"a paused group")

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(c10, "load_table1_results", interrupt)
    monkeypatch.setattr(c10, "run_table1", interrupt)
    assert main(["table1", "--results", str(results), *mode]) == 130
    assert capsys.readouterr().err == "python -m fedlib table1: interrupted (nothing written)\n"
    assert ckpt.read_bytes() == b"a paused group"


def test_results_inside_the_shipped_sample_folder_is_refused_before_the_folder_is_made(capsys):
    inside = DEFAULT_SAMPLE_PATH.parent / "t1-results"
    assert not inside.exists()
    try:
        err = _error(capsys, ["table1", "--results", str(inside), "--sample", "--budget-seconds", "0",
                              "--device", "cpu"])
        assert err.startswith(f"--results {inside}: lies inside the shipped --sample folder "
                              f"{DEFAULT_SAMPLE_PATH.parent};")
        assert not inside.exists()
    finally:  # a failing run (the old code) made the folder in the repository: do not leave it there
        shutil.rmtree(inside, ignore_errors=True)


def test_results_inside_the_batch_folder_of_data_root_is_refused(tmp_path, capsys):
    batches = tmp_path / "root" / "cifar-10-batches-py"
    batches.mkdir(parents=True)
    inside = batches / "runs"
    err = _error(capsys, ["table1", "--results", str(inside), "--data-root", str(tmp_path / "root"),
                          "--budget-seconds", "0", "--device", "cpu"])
    assert err.startswith(f"--results {inside}: lies inside the --data-root batch folder {batches};")
    assert not inside.exists()
    # next to the batch folder is fine: the call goes on to read the (here missing) data
    beside = tmp_path / "root" / "runs"
    err = _error(capsys, ["table1", "--results", str(beside), "--data-root", str(tmp_path / "root"),
                          "--budget-seconds", "0", "--device", "cpu"])
    assert err.startswith("--data-root: ")


# ------------------------------------------------------------------- the documented --summary / --list-cells commands
def _documented_table1_modes():
    """``python -m fedlib table1 ... --summary`` / ``--list-cells`` commands the Markdown docs quote (inline spans
    and ```bash lines), whitespace joined."""
    import re
    import shlex

    from gpu_script import ROOT

    out = []
    for path in [ROOT / "README.md", *sorted(ROOT.glob("book/*.md")), *sorted(ROOT.glob("data/**/*.md"))]:
        text = path.read_text()
        fenced = re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S)
        spans = [line.split(" #", 1)[0] for block in fenced for line in block.replace("\\\n", " ").splitlines()]
        spans += re.findall(r"`([^`]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
        for span in spans:
            if "fedlib table1" not in " ".join(span.split()):
                continue
            tokens = shlex.split(" ".join(span.split()))
            if "fedlib" in tokens and tokens[tokens.index("fedlib") + 1:][:1] == ["table1"] \
                    and {"--summary", "--list-cells"} & set(tokens):
                out.append(pytest.param(tokens[tokens.index("fedlib") + 1:],
                                        id=f"{path.relative_to(ROOT)}: {' '.join(tokens)}"))
    return out


@pytest.mark.parametrize("argv", _documented_table1_modes())
def test_the_documented_table1_modes_run(argv, monkeypatch):
    """data/results/cifar10/README.md listed the cells with `table1 --budget-seconds 0 --list-cells`, which
    --list-cells refuses since it takes no other flag (exit 2); the docs' --summary / --list-cells commands run."""
    from cliutil import cli_exit
    from gpu_script import ROOT

    monkeypatch.chdir(ROOT)
    rc, out, err = cli_exit(argv)
    assert rc in (0, None), err
    assert out.strip()


def test_the_docs_quote_table1_modes():
    assert any("--list-cells" in p.values[0] for p in _documented_table1_modes())


# --------------------------------------------------------------------------- --summary outside the repository root
def test_table1_summary_outside_the_repository_root_says_where_it_looked(tmp_path, monkeypatch, capsys):
    """README: ``python -m fedlib table1 --summary  # (from the repository root)``. From another folder the
    default --results data/results/cifar10 was 'no such folder', without saying it is relative to the
    current folder nor what to do."""
    from fedlib.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["table1", "--summary"]) == 2
    err = capsys.readouterr().err
    assert (f"--results data/results/cifar10: no such folder (relative to the current folder {tmp_path}: run from "
            "the repository root, or give --results the folder of the result files)") in err, err
    assert main(["table1", "--summary", "--results", str(tmp_path / "none")]) == 2  # absolute: as before
    assert capsys.readouterr().err.rstrip().endswith(f"--results {tmp_path / 'none'}: no such folder")


def _err(capsys, argv):
    assert main(argv) == 2
    return capsys.readouterr().err


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
    line = capsys.readouterr().out.strip().splitlines()[-1]  # after the line naming the rate's source
    assert line.startswith("would run: sgd-e2-fedavg seed 0") and "(~4 s at 1000 images/s" in line, line
    assert main(argv) == 0  # without --sample: the full data set, as before
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("beyond the budget:") and "(~103 s at 1000 images/s" in line, line


def test_table1_summary_of_a_file_says_it_is_not_a_folder(tmp_path, capsys):
    """--summary --results FILE said 'no such folder' for a file that exists."""
    f = tmp_path / "r.json"
    f.write_text("{}")
    assert "r.json: not a folder" in _err(capsys, ["table1", "--summary", "--results", str(f)])
    assert "typo: no such folder" in _err(capsys, ["table1", "--summary", "--results", str(tmp_path / "typo")])


def _started(out: str, prefix: str) -> list:
    """The cell ids of the lines of ``out`` that start with ``prefix`` (``would run:``, ``wrote``)."""
    return [Path(line.split()[1] if prefix == "wrote" else line.split(" -> ")[1].split()[0]).stem.split("__")[0]
            for line in out.splitlines() if line.startswith(prefix)]


@pytest.mark.parametrize("earlier", [True, False], ids=["earlier-result", "no-earlier-result"])
def test_table1_dry_run_starts_what_the_real_call_starts(tmp_path, capsys, earlier):
    """The dry run estimated at --images-per-second always: with an earlier result of the same engine settings
    (13,000 images/s) it said 'beyond the budget ... ~4167 s at 1 images/s' for a run that the real call,
    estimating at the earlier result's rate as --images-per-second's help says, then started and wrote; without the
    hint it showed no estimate although that rate was there. Now it takes its rate, groups and budget decisions
    from the real call's code and names the rate's source."""
    if earlier:
        _sample_result(tmp_path / "sgd-e2-fedavg__seed0.json")
        doc = json.loads((tmp_path / "sgd-e2-fedavg__seed0.json").read_text())
        doc["config"]["engine"] = {"width": 0.03, "precision": "fp32", "path": "grouped", "cuda_graph": False,
                                   "device_type": "cpu", "num_train": 2000, "stacked_runs": 1}
        doc["summary"]["images_per_second"] = 13000.0
        (tmp_path / "sgd-e2-fedavg__seed0.json").write_text(json.dumps(doc))
    argv = ["table1", "--sample", "--results", str(tmp_path), "--budget-seconds", "60", "--width", "0.03",
            "--rounds", "1", "--cells", "sgd-e2-fedavg,momentum-e2-fedavg", "--seeds", "0", "--device", "cpu",
            "--checkpoint-every", "0"]
    hint = ["--images-per-second", "1"]
    assert main(argv + hint + ["--dry-run"]) == 0
    dry = capsys.readouterr().out
    if earlier:
        assert (f"estimate: 13000 images/s from earlier results with the same engine settings in {tmp_path}: "
                "sgd-e2-fedavg__seed0.json\n") in dry, dry
        assert "(~0 s at 13000 images/s; 0 s in all up to here)" in dry, dry
        assert main(argv + ["--dry-run"]) == 0  # without the hint: the same estimate
        assert capsys.readouterr().out == dry
    else:
        assert f"estimate: 1 images/s from --images-per-second (hint; no earlier result with the same engine " \
               f"settings in {tmp_path})\n" in dry, dry
        assert "budget: 60 s left, the next run needs ~4792 s; stopping" in dry, dry
    assert main(argv + hint) == 0
    real = capsys.readouterr().out
    assert _started(dry, "would run:") == _started(real, "wrote") == (["momentum-e2-fedavg"] if earlier else []), \
        (dry, real)

"""Mutation-testing pass on ``fedlib/cli/cifar10.py`` (``run cifar10``, ``bench cifar10``, ``table1``)
and ``fedlib/cli/__init__.py`` (``main``, its exit statuses on Ctrl-C / a closed pipe / too large
values, ``_kept_checkpoints``): each test pins behaviour that a mutant of these modules changed
without any other test failing -- an exit status, the text of an error message naming the flag,
which files are written (or not), what is printed, a resolved default.

Expected values are read off the input or worked out by hand in the comments, never taken from the
code under test. Everything runs in process through ``fedlib.cli.main``; nothing here trains a
network: the training, benchmark and Table 1 functions are replaced by fakes that record what the
command line handed them.

Mutants of fb91484..97fac41 (fedlib/cli/cifar10.py: _table1_settings and the dry run's call) (pass described in
tests/README.md, Mutation passes): 4 mutants, one at a time, ``pytest -x`` on test_mutation_table1.py,
test_cli_table1_modes.py, this file, test_table1_resume.py, test_gpu_rehearsal.py and test_table1.py: 2 killed by the
suite, 1 here, 1 equivalent.
  killed by the suite: TS1 the default stack 2 on CUDA too; TS2 continue_later not passed.
  killed here: TS3 the dry run's device ``args.device or "cpu"`` (a GPU machine planned for the CPU).
  equivalent: TS4 the dry run's ``except CheckpointError`` dropped: CheckpointError is a ValueError, which main
  reports with the same words and status 2 as the CLIError made of it.

Mutants of f929b39..780545c (fedlib/cli/cifar10.py, fbcc566: run cifar10's _checkpoint_plan, provenance.resumed
and summary; fedlib/cli/common.py: add_checkpoint_args(more_rounds=)) (pass described in tests/README.md, Mutation
passes; train_runs' who: test_mutation_cifar10_experiments.py):
  CK1 (None, 0, 1) without flags; CK2 a fresh run's check_fresh_checkpoint dropped; CK3 the finished run's file not
  deleted; CK4 checked as a "synthetic" checkpoint; CK5 a fresh run's every ``or args.rounds``; CK6 / CK7 a resume's
  every ``or 1`` / ``or 0``; CK8 the resumed round 0; CK9 the --rounds check dropped; CK10 the load's who "table1";
  CK11 checkpoint_saved False; CK12 the checkpoint named on a divergence without ``is_file()``; CK13
  seconds_per_round of this call's training; CK14 ``resumed_from > 1``; CK15 first_started_utc this call's; CK16
  training_seconds_before this call's; CK17 earlier_calls empty; CK18 resumed_after_round dropped; CK19 the bar from
  0; CK20 train_runs' who "table1"; CK21 checkpoint_every=1; CK22 call_info the command only; CK23 run cifar10's
  parser with more_rounds; CK24 the two --resume helps swapped; CK25 from_round the plan's round; CK26 the last
  earlier call only; CK27 the fresh branch on ``--checkpoint-every`` for ``not --resume``.
  killed by the suite: CK1, CK2, CK4, CK9, CK11, CK17, CK18, CK21, CK27. killed here: CK3, CK6-CK8, CK10, CK12-CK16,
  CK19, CK20, CK22-CK24, CK26. equivalent: CK5 (without --resume, resolve_checkpoint gives a path only with
  --checkpoint-every, so ``or args.rounds`` never decides), CK25 (the plan's round and train_runs' resumed_from are
  the round of the same file, read twice).
Mutants of cdf6ee0..fcc8b56 (fedlib/cli/__init__.py, 475f1ad: _one_line_warnings and main's catch_warnings;
fedlib/cli/cifar10.py, 983fe92 and 2ed6763: run cifar10's config.data sha256 / split_sha256 and its --checkpoint
among the data files) (pass described in tests/README.md, Mutation passes; run_table1's fingerprint:
test_mutation_cifar10_experiments.py):
  OW1 the package's folder without its trailing separator; OW2 fedlib/cli/ taken for the package; OW3 the
  repository's folder taken for it; OW4 the test inverted; OW5 the file given ignored; OW6 printed to stdout; OW7 the
  message's repr; OW8 flush dropped; OW9 file and line swapped for the other warnings; OW10 file and line not passed
  on; OW11 the catch_warnings dropped (main's display left in place); OW12 the display not installed; OW13 the file
  name not made absolute; OW14 any path naming "fedlib"; OW15 the category printed too. CF1 split_sha256 left out;
  CF2 the whole fingerprint (num_train, num_test too); CF3 the split fingerprinted in reverse; CF4 no fingerprint;
  CF8 the --checkpoint check dropped; CF9 --out checked twice instead; CF10 each client's indices sorted first.
  killed by the suite: OW2, OW4, OW6, OW7, OW10, OW12, OW15 (test_provenance.py), CF1, CF3, CF4, CF8-CF10
  (test_cli_cifar10.py). killed here: OW1, OW3, OW5, OW9, OW11, OW14. equivalent: OW8 (the warnings machinery calls
  the display with file None, and stderr is line-buffered (Python >= 3.9), so the line, ending in a newline, is
  written at once either way), OW13 (a warning's file name is its code's, absolute since Python 3.9 whatever the
  sys.path entry it was imported from), CF2 (data_fingerprint's num_train and num_test are len() of the same
  labels, the values config.data already holds).
Mutants of c5aa211..361d535 (fedlib/cli/__init__.py, 239feab: the out-of-memory line's limit; fedlib/cli/cifar10.py,
5f59a90: bench cifar10's --width by the device; d91c06e: _checkpoint_plan's checkpoint handed to train_runs) (pass
described in tests/README.md, Mutation passes; train_runs' resume_from: test_mutation_cifar10_experiments.py):
  CL1 the line with check_memory's words; CL2 a plain MemoryError read as the machine's; CL3 "this machine holds"
  for a plain MemoryError; CL4 only the machine's limit named. W1 the two widths swapped; W2 ``device == "cuda"``
  (cuda:0 got 0.03); W3 an explicit --width replaced; W4 bench's parser default 0.03; W5 run cifar10's default
  None; W6 bench's --width help the run's example. CP1 _checkpoint_plan's document not returned; CP2 run_cifar10's
  resume_from None.
  killed by the suite: CL1-CL4 (test_cli_synthetic.py, this file), W1-W5 (test_cli_cifar10.py, this file), CP1,
  CP2. killed here: W6 (test_width_help_gives_each_commands_default).
Mutants of c28e9dd, the error paths (fedlib/cli/cifar10.py: every ``except``, clean-up and exit status of run
cifar10, bench cifar10 and table1; main's in test_mutation_cli.py) (pass described in tests/README.md, Mutation
passes): 29 mutants (CIF30 drafted, not run), one at a time, ``pytest -x -q`` on this file, test_cli_cifar10.py,
test_cli_table1_modes.py, test_table1.py and test_cli_paths.py (3 runs each for the unmakeable --results folder):
23 killed by the suite, 2 killed here, 4 equivalent.
  CIF1, CIF2 ``load_data_from_args``' FileNotFoundError / ValueError not caught; CIF3, CIF4 ``_check_device``
  without RuntimeError / TypeError; CIF5 a finished run's checkpoint not deleted; CIF6 the partition's ValueError;
  CIF7, CIF8 the divergence's FloatingPointError and its kept checkpoint; CIF9 run cifar10's bar not closed; CIF10,
  CIF11 bench's --compare and --random-images errors; CIF12-CIF14 bench's KeyboardInterrupt, its re-raise, its 130;
  CIF15 --seeds; CIF16, CIF18, CIF21, CIF29 table1's statuses 0 -> 1; CIF17, CIF19, CIF20, CIF26-CIF28 table1's
  OtherSetupError / CheckpointError / FloatingPointError; CIF22 --results' mkdir OSError; CIF23 the clean-up's
  ``except CLIError``; CIF24 no ``rmdir``; CIF25 ``break`` -> ``continue``.
  killed by the suite: CIF1, CIF3, CIF5-CIF8, CIF10-CIF19, CIF21-CIF24, CIF26, CIF27, CIF29.
  killed here: CIF2 (test_table1_refused_for_an_unreadable_data_root_names_it_and_leaves_no_results_folder: the
  tests gave a missing --data-root only), CIF9
  (test_run_cifar10_closes_its_progress_bar_before_the_error_of_a_diverged_run); also main's MAI22 (test_a_closed_pipe_exits_141_quietly_where_no_file_can_be_opened). Each 3 of 3
  runs, and the tests pass 3 of 3 on the code.
  equivalent:
  * CIF4 -- ``torch.device`` of a string (``resolve_device`` returns ``str(device)``) raises RuntimeError only.
  * CIF20, CIF28 -- CheckpointError is a ValueError: main prints ``str(exc)`` with exit status 2 either way.
  * CIF25 -- a folder whose ``rmdir`` failed is still in its parent, whose ``rmdir`` then fails too.
"""
from __future__ import annotations

import argparse
import sys

import pytest

import fedlib.cli as cli
from cliutil import cli_exit


# ----------------------------------------------------------------------------- fedlib.cli: commands
def test_load_skips_a_command_module_that_does_not_exist():
    assert cli._load("fedlib.cli.no_such_command:add_parser") is None


def test_load_raises_a_broken_import_inside_a_command_module():
    # what is missing is not the command module itself (its package is): a bug to show, not a command to skip
    with pytest.raises(ModuleNotFoundError) as info:
        cli._load("fedlib.no_such_package.cmd:add_parser")
    assert info.value.name == "fedlib.no_such_package"


def test_no_command_and_no_target_are_argparse_errors():
    rc, out, err = cli_exit([])
    assert (rc, out) == (2, "")
    assert err.splitlines()[-1] == "python -m fedlib: error: the following arguments are required: COMMAND"
    rc, out, err = cli_exit(["run"])
    assert (rc, out) == (2, "")
    assert err.splitlines()[-1] == "python -m fedlib run: error: the following arguments are required: TARGET"


def _commands(parser) -> dict:
    """``{command: sorted targets}`` of a parser from :func:`fedlib.cli.build_parser` (``[]`` for a
    top-level command such as ``table1``)."""
    top = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)][0]
    out = {}
    for name, sub in top.choices.items():
        inner = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]
        out[name] = sorted(inner[0].choices) if inner else []
    return out


def test_build_parser_holds_every_registered_command():
    # read off COMMANDS: run / bench x synthetic / cifar10, and the top-level table1 and rerun
    assert _commands(cli.build_parser()) == {"run": ["cifar10", "synthetic"], "bench": ["cifar10", "synthetic"],
                                             "table1": [], "rerun": []}


@pytest.mark.parametrize("only, commands", [
    (("run", "cifar10"), {"run": ["cifar10"]}),
    (("bench", "synthetic"), {"bench": ["synthetic"]}),
    (("", "table1"), {"table1": []}),
    (("", "rerun"), {"rerun": []}),
])
def test_build_parser_for_one_command_holds_only_that_one(only, commands):
    assert _commands(cli.build_parser(only)) == commands


@pytest.mark.parametrize("argv, requested", [
    (["run", "cifar10", "--sample"], ("run", "cifar10")),
    (["bench", "synthetic"], ("bench", "synthetic")),
    (["table1", "--summary"], ("", "table1")),
    (["rerun"], ("", "rerun")),
    (["run"], None),                 # no target yet
    (["run", "mnist"], None),        # not a registered target
    (["cifar10", "run"], None),      # the order matters
    (["", "table1"], None),          # "" is the top level's key, not a command
    ([], None),
])
def test_requested_names_a_registered_command_only(argv, requested):
    assert cli._requested(argv) == requested


# ----------------------------------------------------------------------------- parsers: defaults and ranges
def _parse(argv) -> argparse.Namespace:
    only = (argv[0], argv[1]) if argv[0] in ("run", "bench") else ("", argv[0])
    return cli.build_parser(only).parse_args(argv)


def _refused(argv) -> str:
    """The last stderr line of an argparse refusal (exit status 2)."""
    rc, out, err = cli_exit(argv)
    assert (rc, out) == (2, ""), (rc, err)
    return err.splitlines()[-1]


def test_run_cifar10_defaults_are_the_papers_setup():
    # cifar10.DESCRIPTION: 16 clients, Dir(0.1) split with seed 2020, batch 32, 100 rounds, E = 2, step decay,
    # weight decay 1e-4, lr 0.05, FedNova; the engine at full width in fp32 on the grouped path with cuDNN
    a = _parse(["run", "cifar10"])
    got = {k: getattr(a, k) for k in ("num_clients", "partition_alpha", "partition_seed", "batch_size", "rounds",
                                      "epochs", "lr_decay", "weight_decay", "lr", "algorithm", "width", "precision",
                                      "path", "conv", "cuda_graph", "cudnn_benchmark", "sample", "download",
                                      "data_root")}
    assert got == {"num_clients": 16, "partition_alpha": 0.1, "partition_seed": 2020, "batch_size": 32,
                   "rounds": 100, "epochs": "2", "lr_decay": "step", "weight_decay": 1e-4, "lr": 0.05,
                   "algorithm": "fednova", "width": 1.0, "precision": "fp32", "path": "grouped", "conv": "cudnn",
                   "cuda_graph": False, "cudnn_benchmark": False, "sample": False, "download": False,
                   "data_root": None}


def test_run_cifar10_ranges_of_the_data_flags():
    assert _parse(["run", "cifar10", "--num-clients", "1"]).num_clients == 1
    assert _refused(["run", "cifar10", "--num-clients", "0"]) == (
        "python -m fedlib run cifar10: error: argument --num-clients: must be >= 1, got 0")
    assert _parse(["run", "cifar10", "--partition-seed", "0"]).partition_seed == 0
    assert _parse(["run", "cifar10", "--partition-seed", str(2 ** 32 - 1)]).partition_seed == 4294967295
    assert _refused(["run", "cifar10", "--partition-seed", str(2 ** 32)]) == (
        "python -m fedlib run cifar10: error: argument --partition-seed: must be an integer in [0, 4294967295], "
        "got 4294967296")
    assert _refused(["run", "cifar10", "--partition-seed", "-1"]) == (
        "python -m fedlib run cifar10: error: argument --partition-seed: must be an integer in [0, 4294967295], "
        "got -1")
    assert _parse(["run", "cifar10", "--partition-alpha", "0.5"]).partition_alpha == 0.5
    assert _refused(["run", "cifar10", "--partition-alpha", "0"]) == (
        "python -m fedlib run cifar10: error: argument --partition-alpha: must be a finite number > 0, got '0'")
    assert _refused(["run", "cifar10", "--width", "0"]) == (
        "python -m fedlib run cifar10: error: argument --width: must be a finite number > 0, got '0'")


def test_run_cifar10_engine_choices():
    assert _parse(["run", "cifar10", "--precision", "fp64"]).precision == "fp64"
    assert _parse(["run", "cifar10", "--path", "vmap"]).path == "vmap"
    assert _parse(["run", "cifar10", "--conv", "gemm"]).conv == "gemm"
    a = _parse(["run", "cifar10", "--cuda-graph", "--cudnn-benchmark", "--download"])
    assert (a.cuda_graph, a.cudnn_benchmark, a.download) == (True, True, True)


def test_bench_cifar10_defaults_and_ranges():
    # BENCH_DESCRIPTION: --steps 20 when not given (resolved later), one warm-up then --repeat 2, one run,
    # --width by the device (resolved later: 0.03 on the CPU, 1 on a GPU; test_cli_cifar10.py::
    # test_bench_cifar10_width_default_follows_the_device); fp64 is not a benchmark precision
    a = _parse(["bench", "cifar10"])
    got = {k: getattr(a, k) for k in ("steps", "repeat", "runs", "width", "full_round", "random_images", "json",
                                      "profile", "compare", "quiet", "precision")}
    assert got == {"steps": None, "repeat": 2, "runs": 1, "width": None, "full_round": False,
                   "random_images": False, "json": None, "profile": None, "compare": [], "quiet": False,
                   "precision": "fp32"}
    assert not hasattr(a, "num_clients")  # the split is the official one: no --num-clients
    for flag in ("--steps", "--repeat", "--runs"):
        assert _parse(["bench", "cifar10", flag, "1"]).__dict__[flag[2:]] == 1
        assert _refused(["bench", "cifar10", flag, "0"]) == (
            f"python -m fedlib bench cifar10: error: argument {flag}: must be >= 1, got 0")
    assert _refused(["bench", "cifar10", "--precision", "fp64"]).startswith(
        "python -m fedlib bench cifar10: error: argument --precision: invalid choice: 'fp64'")


def test_table1_defaults_and_ranges():
    from pathlib import Path

    a = _parse(["table1"])
    got = {k: getattr(a, k) for k in ("results", "budget_seconds", "seeds", "cells", "rounds", "stack",
                                      "images_per_second", "checkpoint_every", "continue_later", "dry_run",
                                      "summary", "list_cells", "width", "precision")}
    assert got == {"results": Path("data/results/cifar10"), "budget_seconds": None, "seeds": "0,1,2",
                   "cells": None, "rounds": 100, "stack": None, "images_per_second": None, "checkpoint_every": 1,
                   "continue_later": 0.0, "dry_run": False, "summary": False, "list_cells": False, "width": 1.0,
                   "precision": "fp32"}
    assert _parse(["table1", "--checkpoint-every", "0"]).checkpoint_every == 0
    assert _refused(["table1", "--checkpoint-every", "-1"]) == (
        "python -m fedlib table1: error: argument --checkpoint-every: must be >= 0, got -1")
    assert _parse(["table1", "--stack", "1", "--rounds", "1"]).stack == 1
    for flag in ("--stack", "--rounds"):
        assert _refused(["table1", flag, "0"]) == f"python -m fedlib table1: error: argument {flag}: must be >= 1, got 0"
    assert _refused(["table1", "--images-per-second", "0"]) == (
        "python -m fedlib table1: error: argument --images-per-second: must be a finite number > 0, got '0'")


# ----------------------------------------------------------------------------- run cifar10 (training faked)
TINY = ["--sample", "--width", "0.03", "--device", "cpu"]


def _history(rounds: int, clients: int = 16) -> list:
    return [{"round": t, "train_loss": 2.5 - 0.25 * t, "test_accuracy": 0.125 * (t + 1), "test_loss": 2.0,
             "tau_eff": 4.0, "chi2": 1.0, "local_steps": [2] * clients, "lr": 0.05} for t in range(rounds)]


@pytest.fixture
def fake_training(monkeypatch):
    """``train_runs`` replaced: records its arguments, calls the round callback, returns a fixed
    history (losses 2.5, 2.25, ...; accuracies 0.125, 0.25, ...) that took 3 s per round."""
    import fedlib.experiments.cifar10 as C

    calls = []

    def train_runs(runs, data, parts, *, rounds, callback=None, **kw):
        calls.append({"runs": runs, "parts": parts, "rounds": rounds, **kw})
        hist = _history(rounds, len(parts))
        for t in range(rounds):
            if callback is not None:
                rec = argparse.Namespace(train_loss=hist[t]["train_loss"], test_accuracy=hist[t]["test_accuracy"])
                callback(t, [rec], 1.0)
        return {"histories": [hist], "seconds": 3.0 * rounds}

    monkeypatch.setattr(C, "train_runs", train_runs)
    return calls


def _sample_parts(num_clients=16, alpha=0.1, seed=2020):
    from fedlib.data.partition import dirichlet_partition
    from fedlib.experiments.cifar10 import load_data

    return dirichlet_partition(load_data(sample=True).train_labels, num_clients, alpha, seed)


def test_run_cifar10_records_the_setup_and_prints_the_last_round(tmp_path, fake_training):
    from fedlib.results import read_result

    out = tmp_path / "r.json"
    rc, stdout, err = cli_exit(["run", "cifar10", *TINY, "--rounds", "4", "--algorithm", "fedavg", "--seed", "3",
                                "--out", str(out)])
    assert (rc, err) == (0, ""), err
    # round 3 (the 4th): loss 2.5 - 0.75 = 1.75, accuracy 0.125 * 4 = 0.5
    assert stdout.startswith("fedavg: final training loss 1.7500, test accuracy 0.5000 after 4 rounds (")
    assert stdout.endswith(f" s); wrote {out}\n")
    (call,) = fake_training
    assert call["rounds"] == 4 and call["width"] == 0.03 and call["device"] == "cpu"
    assert call["runs"][0]["name"] == "fedavg seed 3" and call["runs"][0]["seed"] == 3
    assert call["runs"][0]["epochs"] == (2, 2)
    doc = read_result(out)
    assert doc["summary"]["rounds"] == 4
    assert doc["summary"]["seconds_per_round"] == 3.0          # 12 s over 4 rounds
    assert doc["summary"]["final_train_loss"] == 1.75 and doc["summary"]["final_test_accuracy"] == 0.5
    cfg = doc["config"]
    assert cfg["problem"] == "cifar10-vgg11"
    assert cfg["data"]["num_train"] == 2000 and cfg["data"]["num_test"] == 500  # the shipped sample's sizes
    assert cfg["data"]["num_clients"] == 16 and sum(cfg["data"]["num_samples"]) == 2000
    # recorded only when asked for
    assert "cudnn_benchmark" not in cfg and "conv" not in cfg and "tau_eff_value" not in cfg


def test_run_cifar10_records_cudnn_benchmark_gemm_and_a_tau_eff_value(tmp_path, fake_training):
    from fedlib.results import read_result

    out = tmp_path / "r.json"
    rc, stdout, err = cli_exit(["run", "cifar10", *TINY, "--rounds", "1", "--cudnn-benchmark", "--conv", "gemm",
                                "--tau-eff", "population", "--out", str(out), "--quiet"])
    assert (rc, stdout, err) == (0, "", "")
    cfg = read_result(out)["config"]
    assert (cfg["cudnn_benchmark"], cfg["conv"]) == (True, "gemm")
    assert fake_training[0]["conv"] == "gemm"
    # local SGD: ||a_i||_1 = tau_i = E * ceil(n_i / B) up to the weight decay's (1 - lr * 1e-4)^k factors
    sizes = [len(c) for c in _sample_parts()]
    expected = sum(n / 2000 * 2 * -(-n // 32) for n in sizes)
    assert cfg["tau_eff_value"] == pytest.approx(expected, rel=1e-3)
    assert fake_training[0]["runs"][0]["algorithm"].tau_eff == cfg["tau_eff_value"]


def test_run_cifar10_without_out_prints_and_writes_nothing(tmp_path, fake_training, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, stdout, err = cli_exit(["run", "cifar10", *TINY, "--rounds", "2"])
    assert (rc, err) == (0, "")
    assert stdout.startswith("fednova: final training loss 2.2500, test accuracy 0.2500 after 2 rounds (")
    assert stdout.endswith(" s)\n") and "wrote" not in stdout
    assert list(tmp_path.iterdir()) == []


def test_run_cifar10_progress_bar_counts_the_rounds(tmp_path, fake_training):
    rc, stdout, err = cli_exit(["run", "cifar10", *TINY, "--rounds", "3", "--progress"])
    assert rc == 0
    assert "3/3" in err and "acc=0.375" in err  # the bar reached the 3rd round; its accuracy 0.125 * 3


def test_run_cifar10_batch_size_up_to_the_largest_client(tmp_path, fake_training):
    largest = max(len(c) for c in _sample_parts())
    rc, _, err = cli_exit(["run", "cifar10", *TINY, "--rounds", "1", "--quiet", "--batch-size", str(largest)])
    assert (rc, err) == (0, "")
    assert fake_training[0]["batch_size"] == largest
    out = tmp_path / "r.json"
    rc, _, err = cli_exit(["run", "cifar10", *TINY, "--rounds", "1", "--batch-size", str(largest + 1), "--out", str(out)])
    assert rc == 2 and not out.exists()
    assert err == (f"python -m fedlib run cifar10: error: --batch-size {largest + 1} is larger than the largest client "
                   f"({largest} images); --batch-size {largest} already trains every client on all its images per "
                   "step\n")
    assert len(fake_training) == 1


def test_run_cifar10_partition_flags_reach_the_split(tmp_path, fake_training):
    rc, _, err = cli_exit(["run", "cifar10", *TINY, "--rounds", "1", "--quiet", "--num-clients", "4",
                           "--partition-alpha", "0.5", "--partition-seed", "7"])
    assert (rc, err) == (0, "")
    assert [list(p) for p in fake_training[0]["parts"]] == [list(p) for p in _sample_parts(4, 0.5, 7)]


def test_run_cifar10_a_diverged_run_names_itself_and_writes_nothing(tmp_path, monkeypatch):
    import fedlib.experiments.cifar10 as C

    def diverge(*a, **k):
        raise FloatingPointError("training loss is nan at round 2")

    monkeypatch.setattr(C, "train_runs", diverge)
    out = tmp_path / "r.json"
    rc, stdout, err = cli_exit(["run", "cifar10", *TINY, "--algorithm", "fedavg", "--seed", "4", "--out", str(out)])
    assert (rc, stdout) == (2, "") and not out.exists()
    assert err == ("python -m fedlib run cifar10: error: run cifar10 (fedavg seed 4): training loss is nan at round 2; "
                   "nothing written\n")


# ----------------------------------------------------------------------------- main: exit statuses and messages
def _handler_raising(monkeypatch, exc, before=None):
    """``run cifar10``'s handler replaced by one that (runs ``before(args)`` and) raises ``exc``."""
    import fedlib.cli.cifar10 as c10

    def handler(args):
        if before is not None:
            before(args)
        raise exc

    monkeypatch.setattr(c10, "run_cifar10", handler)


def test_a_handler_returning_none_exits_0(monkeypatch):
    import fedlib.cli.cifar10 as c10

    monkeypatch.setattr(c10, "run_cifar10", lambda args: None)
    assert cli_exit(["run", "cifar10"]) == (0, "", "")
    monkeypatch.setattr(c10, "run_cifar10", lambda args: 3)
    assert cli_exit(["run", "cifar10"]) == (3, "", "")


@pytest.mark.parametrize("exc, message", [
    (ValueError("data.npz: not a LEAF file"), "python -m fedlib run cifar10: error: data.npz: not a LEAF file\n"),
    (MemoryError("Unable to allocate 37.3 GiB"),
     "python -m fedlib run cifar10: error: out of memory (Unable to allocate 37.3 GiB); the flags ask for more than "
     "this process could allocate (local steps = epochs x ceil(n_i / batch size), clients, classes): use smaller values "
     "(nothing written)\n"),
    (OverflowError("Python int too large to convert to C long"),
     "python -m fedlib run cifar10: error: a value is too large for the 64-bit integers it is computed with (Python "
     "int too large to convert to C long); use smaller values (nothing written)\n"),
])
def test_bad_input_errors_exit_2_with_the_message(monkeypatch, exc, message):
    _handler_raising(monkeypatch, exc)
    assert cli_exit(["run", "cifar10"]) == (2, "", message)


def test_a_divergence_without_a_checkpoint_says_nothing_was_written(monkeypatch):
    from fedlib.engines.batched import DivergenceError

    _handler_raising(monkeypatch, DivergenceError(3, "loss is nan"))
    assert cli_exit(["run", "cifar10"]) == (
        2, "", "python -m fedlib run cifar10: error: diverged in round 3: loss is nan (nothing written)\n")


def test_a_divergence_after_a_checkpoint_names_it(tmp_path, monkeypatch):
    from fedlib.engines.batched import DivergenceError

    ckpt = tmp_path / "r.json.ckpt"

    def saved(args):
        ckpt.write_bytes(b"rounds before")
        args.checkpoint_saved = True

    _handler_raising(monkeypatch, DivergenceError(5, "update is inf"), saved)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", _with_checkpoint_flags(tmp_path))
    assert cli_exit(["run", "cifar10"]) == (
        2, "", f"python -m fedlib run cifar10: error: diverged in round 5: update is inf (no result written; "
               f"checkpoint {ckpt} of the rounds before it kept: delete it or give another --checkpoint to start "
               "again, e.g. with a smaller --lr)\n")


def _with_checkpoint_flags(tmp_path):
    """``parse_args`` that adds a run's checkpoint flags (``run cifar10`` has none of its own): ``--out
    <tmp>/r.json --checkpoint-every 1``, the checkpoint thus ``<tmp>/r.json.ckpt``."""
    real = argparse.ArgumentParser.parse_args

    def parse_args(self, argv=None, namespace=None):
        args = real(self, argv, namespace)
        args.out, args.checkpoint_every, args.checkpoint, args.resume = tmp_path / "r.json", 1, None, False
        return args

    return parse_args


def test_ctrl_c_after_a_checkpoint_names_it(tmp_path, monkeypatch):
    ckpt = tmp_path / "r.json.ckpt"

    def saved(args):
        ckpt.write_bytes(b"rounds before")
        args.checkpoint_saved = True

    _handler_raising(monkeypatch, KeyboardInterrupt(), saved)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", _with_checkpoint_flags(tmp_path))
    assert cli_exit(["run", "cifar10"]) == (
        130, "", f"python -m fedlib run cifar10: interrupted; checkpoint {ckpt} kept: run the same command with "
                 "--resume to continue from it\n")


def test_ctrl_c_before_any_checkpoint_says_nothing_was_written(tmp_path, monkeypatch):
    _handler_raising(monkeypatch, KeyboardInterrupt())
    assert cli_exit(["run", "cifar10"]) == (130, "", "python -m fedlib run cifar10: interrupted (nothing written)\n")


def test_a_closed_pipe_exits_141_quietly(monkeypatch):
    _handler_raising(monkeypatch, BrokenPipeError())
    monkeypatch.setattr(sys, "stdout", sys.stdout)  # main points it at os.devnull: restored after the test
    assert cli_exit(["run", "cifar10"]) == (141, "", "")


# ----------------------------------------------------------------------------- _kept_checkpoints
def _table1_args(results, **modes):
    return argparse.Namespace(results=results, **{"summary": False, "list_cells": False, "dry_run": False, **modes})


def test_kept_checkpoints_of_table1_are_its_group_files_sorted(tmp_path):
    for name in (".ckpt__b.pkl", ".ckpt__a.pkl", "sgd-e2-fedavg__seed0.json", "ckpt__c.pkl", ".ckpt__d.json"):
        (tmp_path / name).write_bytes(b"")
    assert cli._kept_checkpoints(_table1_args(tmp_path)) == [tmp_path / ".ckpt__a.pkl", tmp_path / ".ckpt__b.pkl"]
    for mode in ("summary", "list_cells", "dry_run"):  # these only read: the files are not theirs
        assert cli._kept_checkpoints(_table1_args(tmp_path, **{mode: True})) == []


def _run_args(tmp_path, **kw):
    return argparse.Namespace(**{"out": tmp_path / "r.json", "checkpoint_every": 1, "checkpoint": None,
                                 "resume": False, **kw})


def test_kept_checkpoints_of_a_run_only_when_it_wrote_or_resumed_it(tmp_path):
    ckpt = tmp_path / "r.json.ckpt"
    assert cli._kept_checkpoints(_run_args(tmp_path, checkpoint_saved=True)) == []  # not there
    ckpt.write_bytes(b"")
    assert cli._kept_checkpoints(_run_args(tmp_path)) == []  # an earlier run's
    assert cli._kept_checkpoints(_run_args(tmp_path, checkpoint_saved=True)) == [ckpt]
    assert cli._kept_checkpoints(_run_args(tmp_path, checkpoint_every=None, resume=True)) == [ckpt]
    # flags without --resume at all: neither resumed nor written by this run
    assert cli._kept_checkpoints(argparse.Namespace(out=tmp_path / "r.json", checkpoint_every=1, checkpoint=None)) \
        == []
    # no checkpoint flags at all (run cifar10, bench): nothing, whatever lies at <out>.ckpt
    assert cli._kept_checkpoints(argparse.Namespace(out=tmp_path / "r.json", checkpoint_saved=True)) == []
    assert cli._kept_checkpoints(argparse.Namespace(json=None)) == []
    # impossible flags (--checkpoint without --checkpoint-every / --resume): stopped before writing one
    assert cli._kept_checkpoints(_run_args(tmp_path, checkpoint_every=None, checkpoint=ckpt,
                                           checkpoint_saved=True)) == []


def test_main_without_argv_reads_sys_argv(monkeypatch):
    import fedlib.cli.cifar10 as c10

    seen = []
    monkeypatch.setattr(c10, "run_cifar10", lambda args: seen.append(args.rounds) or 0)
    monkeypatch.setattr(sys, "argv", ["/x/fedlib/__main__.py", "run", "cifar10", "--rounds", "7"])
    assert cli_exit(None) == (0, "", "")
    assert seen == [7]


def test_a_registered_command_whose_module_is_missing_shows_what_exists(monkeypatch):
    monkeypatch.setitem(cli.COMMANDS["run"], "mnist", "fedlib.cli.no_such_module:add_run_parser")
    assert cli._requested(["run", "mnist"]) == ("run", "mnist")
    # the whole parser is built instead: "run" exists, "mnist" is not one of its targets
    assert _refused(["run", "mnist"]).startswith(
        "python -m fedlib run: error: argument TARGET: invalid choice: 'mnist'")


def test_an_unknown_command_is_an_argparse_error():
    assert _refused(["mnist"]).startswith("python -m fedlib: error: argument COMMAND: invalid choice: 'mnist'")


# ----------------------------------------------------------------------------- data and device flags
def _error(argv) -> str:
    """The whole stderr of a refused command (exit status 2, nothing on stdout)."""
    rc, out, err = cli_exit(argv)
    assert (rc, out) == (2, ""), (rc, out, err)
    return err


@pytest.mark.parametrize("flags, message", [
    (["--sample", "--data-root", "/nowhere"], "--sample and --data-root exclude each other"),
    (["--sample", "--download"],
     "--download fetches the full data set into --data-root; the shipped --sample needs none"),
    ([], "no data: pass --data-root DIR (the folder containing cifar-10-batches-py; add --download to fetch it) or "
         "--sample for the shipped sample"),
])
def test_run_cifar10_data_flag_refusals(tmp_path, fake_training, flags, message):
    out = tmp_path / "r.json"
    assert _error(["run", "cifar10", "--device", "cpu", "--rounds", "1", "--out", str(out), *flags]) == (
        f"python -m fedlib run cifar10: error: {message}\n")
    assert not out.exists() and fake_training == []


def test_run_cifar10_device_refusals(tmp_path, fake_training, monkeypatch):
    import torch

    base = ["run", "cifar10", "--sample", "--rounds", "1"]
    assert _error([*base, "--device", "cpu", "--cuda-graph"]) == (
        "python -m fedlib run cifar10: error: --cuda-graph needs a CUDA GPU, but the device is cpu; drop --cuda-graph\n")
    assert _error([*base, "--device", "cpu", "--path", "vmap", "--conv", "gemm"]) == (
        "python -m fedlib run cifar10: error: --conv gemm is a setting of --path grouped (the vmap path convolves "
        "with vmap)\n")
    assert _error([*base, "--device", "nodevice"]).startswith(
        "python -m fedlib run cifar10: error: --device: not a torch device: 'nodevice' (")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert _error([*base, "--device", "cuda"]) == (
        "python -m fedlib run cifar10: error: --device cuda: torch sees no CUDA GPU on this machine; use --device "
        "cpu\n")
    assert fake_training == []
    # the resolved default without a GPU is the CPU, and --path vmap with the default --conv goes on
    assert cli_exit([*base, "--quiet", "--path", "vmap"])[0] == 0
    assert (fake_training[0]["device"], fake_training[0]["path"]) == ("cpu", "vmap")


# ----------------------------------------------------------------------------- bench cifar10 (benchmark faked)
def _bench_results(variants=()):
    return {"sequential_images_per_s": 100.0, "engine_images_per_s": 400.0, "ratio": 4.0, "runs_stacked": 1,
            "images_per_round": 2000, "max_local_steps": 20, "prefix_efficiency": 0.5, "variants": list(variants)}


@pytest.fixture
def fake_bench(monkeypatch):
    """``bench_cifar10`` replaced: records its keyword arguments; hands one finished variant to
    ``on_partial`` when given ``compare``; returns fixed rates (a profile table when asked)."""
    import fedlib.experiments.cifar10 as C

    calls = []

    def bench(data, **kw):
        calls.append({"data": data, **kw})
        if kw["progress"] is not None:
            kw["progress"]("timing the engine")
        out = {"config": {"width": kw["width"]}, "results": _bench_results()}
        if kw["profile"]:
            out["profile"] = "operator table"
        return out

    monkeypatch.setattr(C, "bench_cifar10", bench)
    return calls


def test_bench_cifar10_without_data_flags_times_the_sample_and_prints(tmp_path, fake_bench):
    rc, stdout, err = cli_exit(["bench", "cifar10", "--device", "cpu", "--width", "0.03"])
    assert rc == 0 and err == "timing the engine\n"
    assert stdout.startswith("sequential per-client loop:        100 images/s\n")
    (call,) = fake_bench
    assert len(call["data"].train_labels) == 2000  # the shipped sample (2,000 training images)
    assert (call["steps"], call["repeat"], call["runs"], call["device"]) == (20, 2, 1, "cpu")


def test_bench_cifar10_quiet_prints_nothing(tmp_path, fake_bench):
    assert cli_exit(["bench", "cifar10", "--device", "cpu", "--quiet"]) == (0, "", "")
    assert fake_bench[0]["progress"] is None


def test_bench_cifar10_writes_json_and_profile(tmp_path, fake_bench):
    from fedlib.results import read_result

    js, prof = tmp_path / "b.json", tmp_path / "p.txt"
    rc, stdout, err = cli_exit(["bench", "cifar10", "--device", "cpu", "--json", str(js), "--profile", str(prof)])
    assert rc == 0
    assert stdout.splitlines()[0] == f"wrote {prof}" and stdout.splitlines()[-1] == f"wrote {js}"
    assert prof.read_text() == "operator table\n"
    doc = read_result(js)
    assert doc["config"]["data"] == fake_bench[0]["data"].source and doc["summary"]["ratio"] == 4.0
    assert "profile" not in doc["summary"] and fake_bench[0]["profile"] is True
    # --quiet: the files, no lines
    js.unlink(), prof.unlink()
    assert cli_exit(["bench", "cifar10", "--device", "cpu", "--json", str(js), "--profile", str(prof), "--quiet"]) \
        == (0, "", "")
    assert js.is_file() and prof.read_text() == "operator table\n"


def test_bench_cifar10_without_profile_asks_for_none(tmp_path, fake_bench):
    assert cli_exit(["bench", "cifar10", "--device", "cpu", "--quiet"])[0] == 0
    assert fake_bench[0]["profile"] is False and fake_bench[0]["on_partial"] is None


@pytest.mark.parametrize("flags, message", [
    (["--download"], "--download fetches the full data set into --data-root; pass --data-root DIR with it"),
    (["--random-images", "--data-root", "/nowhere"], "--random-images excludes --sample and --data-root"),
    (["--random-images", "--sample"], "--random-images excludes --sample and --data-root"),
    (["--steps", "5", "--full-round"], "--steps: --full-round times the whole round; give one of the two"),
])
def test_bench_cifar10_flag_refusals(tmp_path, fake_bench, flags, message):
    js = tmp_path / "b.json"
    assert _error(["bench", "cifar10", "--device", "cpu", "--json", str(js), *flags]) == (
        f"python -m fedlib bench cifar10: error: {message}\n")
    assert not js.exists() and fake_bench == []


def test_bench_cifar10_profile_may_not_be_the_json_file(tmp_path, fake_bench):
    js = tmp_path / "b.json"
    assert _error(["bench", "cifar10", "--device", "cpu", "--json", str(js), "--profile", str(js)]) == (
        f"python -m fedlib bench cifar10: error: --profile {js}: is the --json file; give the profile its own name\n")
    assert fake_bench == []


def test_bench_cifar10_ctrl_c_before_any_variant_writes_nothing(tmp_path, monkeypatch):
    import fedlib.experiments.cifar10 as C

    def interrupted(data, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(C, "bench_cifar10", interrupted)
    js = tmp_path / "b.json"
    assert cli_exit(["bench", "cifar10", "--device", "cpu", "--json", str(js), "--compare", "base"]) == (
        130, "", "python -m fedlib bench cifar10: interrupted (nothing written)\n")
    assert not js.exists()


def test_bench_cifar10_ctrl_c_after_two_variants_keeps_them(tmp_path, monkeypatch):
    import fedlib.experiments.cifar10 as C
    from fedlib.results import read_result

    def two_then_interrupted(data, **kw):
        for n in (1, 2):
            variants = [{"variant": "base", "engine_images_per_s": 400.0, "gain": 1.0}] * n
            kw["on_partial"]({"config": {"width": kw["width"]}, "results": _bench_results(variants)})
        raise KeyboardInterrupt

    monkeypatch.setattr(C, "bench_cifar10", two_then_interrupted)
    js = tmp_path / "b.json"
    assert cli_exit(["bench", "cifar10", "--device", "cpu", "--json", str(js), "--compare", "base", "runs=2"]) == (
        130, "", f"python -m fedlib bench cifar10: interrupted; {js} keeps the base engine and the 2 variant(s) "
                 "finished before\n")
    doc = read_result(js)
    assert len(doc["summary"]["variants"]) == 2
    assert doc["config"]["data"].endswith("cifar10-sample.npz")  # the shipped sample, read by default


# ----------------------------------------------------------------------------- table1 (the runner faked)
def test_table1_list_cells_prints_one_line_per_cell():
    rc, stdout, err = cli_exit(["table1", "--list-cells"])
    assert (rc, err) == (0, "")
    lines = stdout.splitlines()
    assert len(lines) == 17  # TABLE1_DESCRIPTION: 2 x 3 x 2 + 3 VR + hybrid + server momentum
    # id padded to 26, algorithm to 10, solver to 8, E to 3; beta / tau_eff only where set
    assert lines[0] == "sgd-e2-fedavg              fedavg     solver=sgd      E=2   lr=0.05 mu=0.0 server=plain"
    assert lines[9] == ("prox-e2-fednova            fednova    solver=prox     E=2   lr=0.05 mu=0.005 server=plain "
                        "tau_eff=local_steps")
    assert lines[15] == ("hybrid-u25-fednova         fednova    solver=momentum E=2-5 lr=0.02 mu=0.0 server=momentum "
                         "beta=0.9")


@pytest.fixture
def fake_table1(monkeypatch):
    """``run_table1`` replaced: records its arguments and reports 2 runs written, 1 present, 3 not started."""
    import fedlib.experiments.cifar10 as C

    calls = []

    def run_table1(results_dir, **kw):
        calls.append({"results_dir": results_dir, **kw})
        return {"written": ["a", "b"], "skipped": ["c"], "not_started": ["d", "e", "f"], "aborted": [], "paused": []}

    monkeypatch.setattr(C, "run_table1", run_table1)
    return calls


def test_table1_runs_and_reports_what_it_did(tmp_path, fake_table1):
    res = tmp_path / "new" / "results"
    rc, stdout, err = cli_exit(["table1", "--results", str(res), "--budget-seconds", "60", "--sample", "--width", "0.03",
                                "--device", "cpu", "--seeds", "2,0", "--cells", "sgd-e2-fedavg, sgd-e2-fednova"])
    assert (rc, err) == (0, "")
    assert stdout == "table1: 2 written, 1 already present, 3 not started, 0 stopped for the budget\n"
    assert res.is_dir()  # made before training
    (call,) = fake_table1
    assert call["results_dir"] == res and call["budget_seconds"] == 60.0
    assert call["seeds"] == [2, 0] and call["cells"] == ["sgd-e2-fedavg", "sgd-e2-fednova"]
    assert call["stack"] == 2 and call["device"] == "cpu"  # the CPU default (--stack's help: 2 on the CPU)
    assert call["checkpoint_every"] == 1 and call["continue_later"] == 0.0 and call["rounds"] == 100
    assert len(call["data"].train_labels) == 2000 and call["data_source"] == call["data"].source


def test_table1_stacks_six_on_cuda_and_reports_paused_groups(tmp_path, monkeypatch):
    import fedlib.cli.cifar10 as c10
    import fedlib.experiments.cifar10 as C

    calls = []

    def run_table1(results_dir, **kw):
        calls.append(kw)
        return {"written": [], "skipped": [], "not_started": [], "aborted": ["g"], "paused": ["h", "i"]}

    monkeypatch.setattr(C, "run_table1", run_table1)
    monkeypatch.setattr(c10, "_check_device", lambda args: "cuda:0")
    rc, stdout, err = cli_exit(["table1", "--results", str(tmp_path), "--budget-seconds", "0", "--sample"])
    assert (rc, err) == (0, "")
    assert stdout == ("table1: 0 written, 0 already present, 0 not started, 1 stopped for the budget, 2 paused for "
                      "the next call\n")
    assert calls[0]["stack"] == 6  # --stack's help: 6 on CUDA
    rc, _, _ = cli_exit(["table1", "--results", str(tmp_path), "--budget-seconds", "0", "--sample", "--stack", "3"])
    assert rc == 0 and calls[1]["stack"] == 3


@pytest.mark.parametrize("flags, message", [
    ([], "--budget-seconds is required (the wall-clock budget; 0 with --dry-run lists what is missing)"),
    (["--budget-seconds", "-1"], "--budget-seconds must be >= 0, got -1.0"),
    (["--budget-seconds", "nan"], "--budget-seconds must be >= 0, got nan"),
    (["--budget-seconds", "1", "--continue-later", "-5"], "--continue-later must be >= 0 seconds, got -5.0"),
    (["--budget-seconds", "1", "--seeds", "0,x"], "--seeds: expected comma-separated integers like 0,1,2, got '0,x'"),
    (["--budget-seconds", "1", "--seeds", ","], "--seeds: expected distinct integers >= 0, got ','"),
    (["--budget-seconds", "1", "--seeds", "1,-1"], "--seeds: expected distinct integers >= 0, got '1,-1'"),
    (["--budget-seconds", "1", "--seeds", "3,1,3"], "--seeds: expected distinct integers >= 0, got '3,1,3'"),
    (["--budget-seconds", "1", "--cells", " , "],
     "--cells: expected comma-separated cell ids, got ' , '; omit --cells for all"),
    (["--budget-seconds", "1", "--cells", "sgd-e2-fedavg,sgd-e3"], "--cells: unknown cell(s) ['sgd-e3']; known: "),
    (["--budget-seconds", "1", "--cells", "sgd-e2-fednova,sgd-e2-fedavg,sgd-e2-fednova"],
     "--cells: sgd-e2-fednova listed twice (the run would be trained twice)"),
])
def test_table1_flag_refusals(tmp_path, fake_table1, flags, message):
    res = tmp_path / "results"
    err = _error(["table1", "--results", str(res), "--sample", "--device", "cpu", *flags])
    assert err.startswith(f"python -m fedlib table1: error: {message}")
    assert fake_table1 == [] and not res.exists()


def test_table1_seed_zero_and_blank_entries_are_accepted(tmp_path, fake_table1):
    assert cli_exit(["table1", "--results", str(tmp_path), "--budget-seconds", "0", "--sample", "--device", "cpu",
                     "--seeds", "0,,5,", "--width", "0.03"])[0] == 0
    assert fake_table1[0]["seeds"] == [0, 5] and fake_table1[0]["cells"] is None


def test_table1_results_that_is_a_file_is_refused(tmp_path, fake_table1):
    f = tmp_path / "results.txt"
    f.write_text("x")
    for extra in ([], ["--dry-run"]):
        assert _error(["table1", "--results", str(f), "--budget-seconds", "1", "--sample", *extra]) == (
            f"python -m fedlib table1: error: --results {f}: not a folder\n")
    assert _error(["table1", "--results", str(f), "--summary"]) == (
        f"python -m fedlib table1: error: --results {f}: not a folder\n")
    assert _error(["table1", "--results", str(tmp_path / "none"), "--summary"]) == (
        f"python -m fedlib table1: error: --results {tmp_path / 'none'}: no such folder\n")
    assert f.read_text() == "x" and fake_table1 == []


def test_table1_dry_run_reads_no_data_without_sample_and_makes_no_folder(tmp_path, fake_table1):
    res = tmp_path / "results"
    assert cli_exit(["table1", "--results", str(res), "--budget-seconds", "0", "--dry-run", "--rounds", "3"]) == (
        0, "", "")
    (call,) = fake_table1
    assert call["dry_run"] is True and call["data"] is None and call["rounds"] == 3
    assert call["num_train"] == 50000  # the full training set's size (the paper's)
    assert not res.exists()
    assert cli_exit(["table1", "--results", str(res), "--budget-seconds", "0", "--dry-run", "--sample"])[0] == 0
    assert len(fake_table1[1]["data"].train_labels) == 2000


@pytest.mark.parametrize("flags, message", [
    (["--summary", "--seeds", "0"], "--summary takes only --results; --seeds is not used by it"),
    (["--summary", "--rounds", "5", "--sample"], "--summary takes only --results; --rounds, --sample are not used by it"),
    (["--list-cells", "--results", "x"], "--list-cells takes no other flag; --results is not used by it"),
])
def test_table1_read_only_modes_refuse_other_flags(flags, message):
    assert _error(["table1", *flags]) == f"python -m fedlib table1: error: {message}\n"


# ----------------------------------------------------------------------------- output paths checked before the work
def test_run_cifar10_out_in_a_missing_folder_is_refused_before_training(tmp_path, fake_training):
    out = tmp_path / "none" / "r.json"
    assert _error(["run", "cifar10", *TINY, "--rounds", "1", "--out", str(out)]) == (
        f"python -m fedlib run cifar10: error: --out {out}: folder {tmp_path / 'none'} does not exist\n")
    assert fake_training == []


@pytest.mark.parametrize("flag", ["--json", "--profile"])
def test_bench_cifar10_output_in_a_missing_folder_is_refused_before_timing(tmp_path, fake_bench, flag):
    out = tmp_path / "none" / "b.txt"
    assert _error(["bench", "cifar10", "--device", "cpu", flag, str(out)]) == (
        f"python -m fedlib bench cifar10: error: {flag} {out}: folder {tmp_path / 'none'} does not exist\n")
    assert fake_bench == []


def test_run_cifar10_participation_is_checked_against_num_clients(tmp_path, fake_training):
    base = ["run", "cifar10", *TINY, "--rounds", "1", "--num-clients", "4"]
    assert _error([*base, "--clients-per-round", "2"]) == (
        "python -m fedlib run cifar10: error: --clients-per-round 2 needs --sampling with-replacement or uniform "
        "(with --sampling full all 4 clients take part)\n")
    assert _error([*base, "--sampling", "uniform", "--clients-per-round", "5"]) == (
        "python -m fedlib run cifar10: error: --clients-per-round 5 is larger than the number of clients (4); "
        "--sampling uniform draws distinct clients\n")
    assert fake_training == []


def test_run_cifar10_a_split_that_cannot_be_made_names_the_flags(tmp_path, fake_training):
    # 2,000 sample images cannot give 500 clients the partition's minimum of 10 images each
    err = _error(["run", "cifar10", *TINY, "--rounds", "1", "--num-clients", "500"])
    assert err.startswith("python -m fedlib run cifar10: error: --num-clients / --partition-alpha: min_size=10 cannot "
                          "be met: 500 clients x 10 samples > 2000 samples")
    err = _error(["run", "cifar10", *TINY, "--rounds", "1", "--partition-alpha", "1e308"])
    assert err.startswith("python -m fedlib run cifar10: error: --num-clients / --partition-alpha: alpha=1e+308 is "
                          "too large")
    assert fake_training == []


def test_table1_summary_of_an_empty_folder_is_the_table_alone(tmp_path):
    rc, stdout, err = cli_exit(["table1", "--summary", "--results", str(tmp_path)])
    assert (rc, err) == (0, "")
    lines = stdout.splitlines()
    assert len(lines) == 2 + 17 and "" not in lines  # header, separator, a row per cell; no other table
    assert lines[2].startswith("| SGD | E=2 | FedAvg | not yet run |")


def test_table1_summary_adds_the_lead_and_match_tables_for_pairs(tmp_path):
    import shutil
    from pathlib import Path

    committed = Path(__file__).resolve().parents[1] / "data" / "results" / "cifar10"
    for name in ("sgd-e2-fedavg__seed0.json", "sgd-e2-fednova__seed0.json"):
        shutil.copy(committed / name, tmp_path / name)
    rc, stdout, err = cli_exit(["table1", "--summary", "--results", str(tmp_path)])
    assert (rc, err) == (0, "")
    summary, gaps, match = stdout.rstrip("\n").split("\n\n")
    assert len(summary.splitlines()) == 19
    # one pair (SGD, E=2): FedAvg's and FedNova's final accuracies, as the summary table shows them
    # 'seed(s)' lists the paired seeds' ids (0 here), where the summary's 'seeds' counts runs: under one header
    # 'seeds' the 0 read as no seeds at all
    assert gaps.splitlines()[0].startswith("| row | E | baseline | seed(s) |")
    assert len(gaps.splitlines()) == 3 and gaps.splitlines()[2].startswith("| SGD | E=2 | FedAvg | 0 |")
    assert len(match.splitlines()) == 3 and match.splitlines()[2].startswith("| SGD | E=2 | FedAvg | 0 |")
    assert match.splitlines()[0].startswith("| row | E | baseline | seed | baseline final (%) | FedNova reaches it")


def test_table1_ctrl_c_names_every_group_checkpoint(tmp_path, monkeypatch):
    import fedlib.experiments.cifar10 as C

    def checkpoint_then_interrupted(results_dir, **kw):
        for name in (".ckpt__g2.pkl", ".ckpt__g1.pkl"):
            (results_dir / name).write_bytes(b"group state")
        raise KeyboardInterrupt

    monkeypatch.setattr(C, "run_table1", checkpoint_then_interrupted)
    rc, stdout, err = cli_exit(["table1", "--results", str(tmp_path), "--budget-seconds", "9", "--sample", "--device",
                                "cpu"])
    assert (rc, stdout) == (130, "")
    assert err == (f"python -m fedlib table1: interrupted; checkpoint(s) {tmp_path / '.ckpt__g1.pkl'}, "
                   f"{tmp_path / '.ckpt__g2.pkl'} kept: run the same command again to continue from them\n")


def test_table1_ctrl_c_before_any_checkpoint_says_nothing_was_written(tmp_path, monkeypatch):
    import fedlib.experiments.cifar10 as C

    def interrupted(results_dir, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(C, "run_table1", interrupted)
    assert cli_exit(["table1", "--results", str(tmp_path), "--budget-seconds", "9", "--sample", "--device", "cpu"]) == (
        130, "", "python -m fedlib table1: interrupted (nothing written)\n")


def _table1_raising(monkeypatch, exc):
    import fedlib.experiments.cifar10 as C

    def run_table1(results_dir, **kw):
        raise exc

    monkeypatch.setattr(C, "run_table1", run_table1)


def _setup_errors():
    from fedlib.checkpoint import CheckpointError
    from fedlib.experiments.cifar10 import OtherSetupError

    return [(FloatingPointError("group 1 diverged in round 4"), "group 1 diverged in round 4"),
            (OtherSetupError("x.json was trained at width 0.5"), "--results: x.json was trained at width 0.5"),
            (CheckpointError(".ckpt__g.pkl is of another configuration"), ".ckpt__g.pkl is of another configuration")]


@pytest.mark.parametrize("k", range(3))
def test_table1_runner_errors_are_bad_input(tmp_path, monkeypatch, k):
    exc, message = _setup_errors()[k]
    _table1_raising(monkeypatch, exc)
    assert cli_exit(["table1", "--results", str(tmp_path), "--budget-seconds", "9", "--sample", "--device", "cpu"]) == (
        2, "", f"python -m fedlib table1: error: {message}\n")


def test_table1_dry_run_results_of_another_setup_name_the_flag(tmp_path, monkeypatch):
    exc, message = _setup_errors()[1]
    _table1_raising(monkeypatch, exc)
    assert cli_exit(["table1", "--results", str(tmp_path), "--budget-seconds", "9", "--dry-run"]) == (
        2, "", f"python -m fedlib table1: error: {message}\n")


def test_table1_summary_of_results_of_another_setup_names_the_flag(tmp_path, monkeypatch):
    import fedlib.experiments.cifar10 as C

    exc, message = _setup_errors()[1]

    def load(results_dir):
        raise exc

    monkeypatch.setattr(C, "load_table1_results", load)
    assert cli_exit(["table1", "--results", str(tmp_path), "--summary"]) == (
        2, "", f"python -m fedlib table1: error: {message}\n")


def test_precision_help_names_fp64_only_where_it_is_a_choice():
    rc, out, _ = cli_exit(["run", "cifar10", "--help"])
    assert rc == 0 and "exactness checks" in " ".join(out.split())
    rc, out, _ = cli_exit(["bench", "cifar10", "--help"])
    assert rc == 0 and "exactness" not in out and "{fp32,bf16}" in out


def test_bench_cifar10_an_unknown_variant_is_refused_before_the_data_is_read(tmp_path, fake_bench, monkeypatch):
    import fedlib.cli.cifar10 as c10

    monkeypatch.setattr(c10, "load_data_from_args", lambda args: pytest.fail("the data was read"))
    err = _error(["bench", "cifar10", "--device", "cpu", "--compare", "warp-speed"])
    assert err.startswith("python -m fedlib bench cifar10: error: --compare: ") and "warp-speed" in err
    assert fake_bench == []


def test_bench_cifar10_random_images_without_their_labels_names_the_flag(fake_bench, monkeypatch):
    import fedlib.data.cifar10 as D

    def missing():
        raise FileNotFoundError("labels file data/cifar10-labels.npz not found")

    monkeypatch.setattr(D, "cifar10_random_images", missing)
    assert _error(["bench", "cifar10", "--device", "cpu", "--random-images"]) == (
        "python -m fedlib bench cifar10: error: --random-images: labels file data/cifar10-labels.npz not found\n")
    assert fake_bench == []


def test_bench_cifar10_reads_the_data_root_it_is_given(tmp_path, fake_bench):
    missing = tmp_path / "nowhere"
    err = _error(["bench", "cifar10", "--device", "cpu", "--data-root", str(missing)])
    assert err.startswith("python -m fedlib bench cifar10: error: --data-root: ")  # not the sample's
    assert fake_bench == []


def test_table1_refused_for_its_data_leaves_no_results_folder(tmp_path, fake_table1):
    """A bug found in this pass: table1 made the --results folder (and its missing parents) before it read the
    data, and a refused call (exit 2, e.g. a --data-root without CIFAR-10) left the empty folders behind."""
    (tmp_path / "kept").mkdir()
    res = tmp_path / "kept" / "new" / "results"
    err = _error(["table1", "--results", str(res), "--budget-seconds", "1", "--device", "cpu", "--data-root",
                  str(tmp_path / "nowhere")])
    assert err.startswith("python -m fedlib table1: error: --data-root: CIFAR-10 not found")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["kept"]  # the folder that was there stays
    assert fake_table1 == []


def test_table1_results_folder_that_cannot_be_written_is_refused_before_the_data(tmp_path, fake_table1, monkeypatch):
    import os

    res = tmp_path / "results"
    res.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if str(p) == str(res) else real(p, mode, **kw))
    assert _error(["table1", "--results", str(res), "--budget-seconds", "1", "--sample", "--device", "cpu"]) == (
        f"python -m fedlib table1: error: --results {res / 'result.json'}: folder {res} is not writable\n")
    assert fake_table1 == [] and res.is_dir()  # a folder that was there is left alone


# ------------------------------------------------------- mutants of fb91484..97fac41 (table1 --dry-run's settings)
def test_table1_dry_run_resolves_the_device_as_the_call_does(tmp_path, fake_table1, monkeypatch):
    """Without --device, on a machine whose torch sees a GPU, the dry run plans for 'cuda' and its default stack of
    6, as the real call trains (--stack's help: 6 on CUDA); mutant TS3: the dry run planned for the CPU (stack 2)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert cli_exit(["table1", "--results", str(tmp_path), "--budget-seconds", "0", "--dry-run"])[0] == 0
    (call,) = fake_table1
    assert call["dry_run"] is True and (call["device"], call["stack"]) == ("cuda", 6)



# ------------------------------------------------- run cifar10's checkpoints: mutants of f929b39..780545c (fbcc566)
def _table1_checkpoint(path, round_done, rounds):
    """A train_runs checkpoint (kind "table1") of ``round_done`` of ``rounds`` rounds: what _checkpoint_plan reads."""
    from fedlib.checkpoint import save_checkpoint

    save_checkpoint(path, config={"rounds": rounds}, round_done=round_done, state={}, history=[], kind="table1")


def _plan_args(tmp_path, **kw):
    return argparse.Namespace(**{"out": tmp_path / "r.json", "checkpoint_every": None, "checkpoint": None,
                                 "resume": False, "rounds": 4, **kw})


def test_checkpoint_plan_of_run_cifar10_fresh_and_resumed(tmp_path):
    """_checkpoint_plan's (path, every, resumed round): a fresh run deletes a finished run's checkpoint (train_runs
    would resume it and train nothing) and writes every --checkpoint-every rounds; --resume continues from the
    checkpoint's round, writing every --checkpoint-every rounds or, without it, the last round's checkpoint only
    (every = --rounds); a file that is no checkpoint is refused naming --checkpoint. Mutants of f929b39..780545c:
    CK3 (the finished run's file not deleted), CK4 (checked as a "synthetic" checkpoint: a table1 file refused), CK6
    / CK7 (a resume without --checkpoint-every writes every round / never), CK8 (the resumed round 0), CK10 (the
    load's message named "table1")."""
    from fedlib.checkpoint import CheckpointError
    from fedlib.cli.cifar10 import _checkpoint_plan

    ckpt = tmp_path / "r.json.ckpt"
    _table1_checkpoint(ckpt, 4, 4)  # a finished run's
    assert _checkpoint_plan(_plan_args(tmp_path, checkpoint_every=2)) == (ckpt, 2, 0, None)
    assert not ckpt.exists()
    _table1_checkpoint(ckpt, 1, 4)
    path, every, done, doc = _checkpoint_plan(_plan_args(tmp_path, resume=True))
    assert (path, every, done, doc["round"], doc["kind"]) == (ckpt, 4, 1, 1, "table1")  # the file, read once
    assert _checkpoint_plan(_plan_args(tmp_path, resume=True, checkpoint_every=3))[:3] == (ckpt, 3, 1)
    ckpt.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match=rf"^--checkpoint: checkpoint {ckpt} is corrupt or not a fedlib"):
        _checkpoint_plan(_plan_args(tmp_path, resume=True))


def test_run_cifar10_resumed_records_where_it_resumed_and_the_earlier_calls(tmp_path, monkeypatch):
    """run cifar10 --resume hands train_runs the checkpoint, its every and who="--checkpoint", with this call's
    git commit, command and start; its result records provenance.resumed as train_runs returns it (from round 1:
    first_started_utc of the first call's start 1.7e9 + 0.25 s, 2023-11-14T22:13:20.25Z, 2 s of training before,
    both earlier calls) and summary.resumed_after_round 1, seconds_per_round (6 + 2) s / 4 rounds over every call's
    training; the progress bar starts at round 1 and ends at 4/4. Mutants of f929b39..780545c: CK13 (seconds_per_round
    of this call's training only), CK14 (``resumed_from > 1``), CK15 (first_started_utc this call's), CK16
    (training_seconds_before this call's), CK19 (the bar from 0: 3/4), CK20 (who "table1"), CK22 (call_info the
    command only), CK26 (the last earlier call only)."""
    import fedlib.experiments.cifar10 as C
    from fedlib.results import read_result

    calls, before = [], [{"command": "first", "rounds": [0, 1]}, {"command": "second", "rounds": [1, 1]}]

    def resumed(runs, data, parts, *, rounds, callback=None, **kw):
        calls.append(kw)
        hist = _history(rounds, len(parts))
        for t in range(1, rounds):
            callback(t, [argparse.Namespace(train_loss=hist[t]["train_loss"],
                                            test_accuracy=hist[t]["test_accuracy"])], 1.0)
        return {"histories": [hist], "seconds": 6.0, "resumed_from": 1, "seconds_before": 2.0,
                "started": 1.7e9 + 0.25, "calls_before": before}

    monkeypatch.setattr(C, "train_runs", resumed)
    out, ckpt = tmp_path / "r.json", tmp_path / "r.json.ckpt"
    _table1_checkpoint(ckpt, 1, 4)
    rc, _, err = cli_exit(["run", "cifar10", *TINY, "--rounds", "4", "--out", str(out), "--resume", "--progress"])
    assert rc == 0, err
    assert "4/4" in err  # initial 1, then rounds 1..3
    (kw,) = calls
    assert (kw["checkpoint"], kw["checkpoint_every"], kw["who"]) == (ckpt, 4, "--checkpoint")
    assert kw["resume_from"]["round"] == 1  # the checkpoint as _checkpoint_plan read it: not read again
    assert sorted(kw["call_info"]) == ["command", "git_commit", "git_dirty", "started_utc"]
    assert "--resume" in kw["call_info"]["command"]
    doc = read_result(out)
    assert doc["provenance"]["resumed"] == {"from_round": 1, "first_started_utc": "2023-11-14T22:13:20.250000Z",
                                            "training_seconds_before": 2.0, "earlier_calls": before}
    assert doc["summary"]["resumed_after_round"] == 1 and doc["summary"]["seconds_per_round"] == 2.0


def test_run_cifar10_a_divergence_names_the_checkpoint_only_when_there_is_one(tmp_path, monkeypatch):
    """A run with --checkpoint-every that diverges before its first checkpoint says "nothing written"; after one
    (the file there), that the checkpoint of the rounds before it is kept. Mutant CK12 of f929b39..780545c (the
    checkpoint named whenever the flags give one, the file there or not)."""
    import fedlib.experiments.cifar10 as C

    out, ckpt = tmp_path / "r.json", tmp_path / "r.json.ckpt"
    saved = []  # [True]: the run wrote its round-1 checkpoint before diverging

    def diverge(*a, checkpoint=None, **k):
        if saved:
            _table1_checkpoint(checkpoint, 1, 4)
        raise FloatingPointError("training loss is nan at round 2")

    monkeypatch.setattr(C, "train_runs", diverge)
    flags = ["run", "cifar10", *TINY, "--rounds", "4", "--seed", "4", "--out", str(out), "--checkpoint-every", "1"]
    for said in ("nothing written", f"no result written; checkpoint {ckpt} of the rounds before it kept"):
        rc, stdout, err = cli_exit(flags)
        assert (rc, stdout) == (2, "") and not out.exists()
        assert err == ("python -m fedlib run cifar10: error: run cifar10 (fednova seed 4): training loss is nan at "
                       f"round 2; {said}\n")
        ckpt.unlink(missing_ok=True)
        saved.append(True)


def test_resume_help_of_run_cifar10_keeps_the_rounds_and_of_run_synthetic_not():
    """--resume's help: run cifar10 continues with the same --rounds (its lr decay is laid out over them), run
    synthetic with a constant lr may take more rounds. Mutants of f929b39..780545c: CK23 (run cifar10's parser built
    with more_rounds), CK24 (the two helps swapped)."""
    def resume_help(target):
        rc, out, _ = cli_exit(["run", target, "--help"])
        assert rc == 0
        return " ".join(out.split())

    cifar, synthetic = resume_help("cifar10"), resume_help("synthetic")
    assert "--rounds too), as the unbroken run would" in cifar and "--rounds may differ" not in cifar
    assert "--rounds may differ: a finished run continues to more rounds" in synthetic and "--rounds too" not in \
        synthetic


# ------------------------------------------ main's one-line warnings: mutants of cdf6ee0..fcc8b56 (475f1ad)
def test_one_line_warnings_are_fedlibs_own_and_the_others_keep_their_file_and_line():
    """_one_line_warnings' display prints a warning raised in a file of the fedlib package as 'warning: MESSAGE', to
    the file it is handed (else stderr), and hands any other, its file and source line in their places, to the
    display it replaced: a file of the repository outside fedlib/ (a script, numpy in a virtual environment kept in
    the checkout), of a folder beside it whose name starts with 'fedlib', of any path naming fedlib. Mutants of
    cdf6ee0..fcc8b56: OW1 (the package's folder without its trailing separator), OW3 (the repository's folder taken
    for the package's), OW5 (the file handed ignored), OW9 (file and line swapped), OW14 (any path naming fedlib)."""
    import io
    import os

    package = os.path.dirname(os.path.dirname(os.path.abspath(cli.__file__)))  # .../fedlib
    shown = []
    show = cli._one_line_warnings(lambda *a: shown.append(a))
    outside = [os.path.join(os.path.dirname(package), "scripts", "import_gpu_results.py"),
               os.path.join(os.path.dirname(package), ".venv", "lib", "numpy", "core.py"),
               os.path.join(package + "_plugins", "x.py"), "/home/u/fedlib-env/lib/torch/nn.py"]
    for i, filename in enumerate(outside):
        stream = io.StringIO()
        show(UserWarning("w"), UserWarning, filename, 7, stream, "source line")
        assert len(shown) == i + 1 and shown[-1][1:] == (UserWarning, filename, 7, stream, "source line"), filename
        assert stream.getvalue() == ""
    stream = io.StringIO()
    show(UserWarning("the git checkout changed"), UserWarning, os.path.join(package, "results.py"), 288, stream, "x")
    assert stream.getvalue() == "warning: the git checkout changed\n" and len(shown) == len(outside)


def test_main_shows_warnings_as_one_line_only_while_its_command_runs(monkeypatch):
    """main replaces warnings.showwarning while the command runs and puts the caller's back after (a test, a
    notebook or a script calling main keeps Python's format for its own warnings). Mutant of cdf6ee0..fcc8b56: OW11
    (the catch_warnings around the handler dropped: main's display left in place)."""
    import warnings

    import fedlib.cli.cifar10 as c10

    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)  # put back at teardown, whatever main leaves
    before = warnings.showwarning
    during = []
    monkeypatch.setattr(c10, "run_cifar10", lambda args: during.append(warnings.showwarning))
    assert cli_exit(["run", "cifar10"]) == (0, "", "")
    assert during[0] is not before and during[0].__name__ == "showwarning"
    assert warnings.showwarning is before


def test_width_help_gives_each_commands_default():
    """--width's help gives the command's own default: bench cifar10's by its --device (0.03 on the CPU, 1 on a
    GPU: its default is resolved by the command, so the parser's shows none), run cifar10's the CPU tests' example
    (its default is 1). Mutant of c5aa211..361d535: W6 (bench's help the run's example)."""
    def width_help(command):
        rc, out, _ = cli_exit([command, "cifar10", "--help"])
        assert rc == 0
        text = " ".join(out.split())
        start = text.rindex("--width WIDTH")  # the option, after the usage line
        return text[start:text.index("--precision", start)]

    bench, run = width_help("bench"), width_help("run")
    assert "9.75 M parameters; default 0.03 when --device is the CPU, 1 on a GPU)" in bench and "e.g." not in bench
    assert "9.75 M parameters; e.g. 0.03 for CPU tests) (default: 1.0)" in run and "--device" not in run


def test_a_closed_pipe_exits_141_quietly_where_no_file_can_be_opened(monkeypatch):
    """A closed pipe met when the process has no file descriptor left (EMFILE: ``os.open`` and ``open`` of
    os.devnull fail) still exits 141 with nothing on stderr: stdout is left as it is. Mutant: the ``except OSError``
    around ``open(os.devnull, "w")`` -> ``except ZeroDivisionError``: the EMFILE went out of main as a traceback
    (no test made that open fail: it never fails short of the descriptor limit)."""
    import errno

    def no_descriptor_left(*args, **kwargs):
        raise OSError(errno.EMFILE, "Too many open files")

    def out_of_descriptors(args):  # from the handler on: the parser's imports open files
        monkeypatch.setattr(cli.os, "open", no_descriptor_left)
        monkeypatch.setattr(cli, "open", no_descriptor_left, raising=False)  # main's lookup of the builtin

    _handler_raising(monkeypatch, BrokenPipeError(), out_of_descriptors)
    monkeypatch.setattr(sys, "stdout", sys.stdout)  # main points it elsewhere where it can: restored below
    try:
        got = cli_exit(["run", "cifar10"])
    finally:
        monkeypatch.undo()
    assert got == (141, "", "")


def test_table1_refused_for_an_unreadable_data_root_names_it_and_leaves_no_results_folder(tmp_path, fake_table1):
    """A --data-root whose batch files are no CIFAR-10 batches (``load_cifar10``'s ValueError) is refused naming
    the flag, as a missing one is, and the --results folders this call made are removed: the ValueError becomes
    the CLIError that table1's clean-up catches (mutant: ``except ValueError`` in ``load_data_from_args`` ->
    ``except ZeroDivisionError``: main reported the bare ValueError, without '--data-root: ', and the empty
    folders stayed; only the missing-folder FileNotFoundError was tested)."""
    batches = tmp_path / "root" / "cifar-10-batches-py"
    batches.mkdir(parents=True)
    for name in ("batches.meta", *(f"data_batch_{i}" for i in range(1, 6)), "test_batch"):
        (batches / name).write_bytes(b"not a pickle")
    (tmp_path / "kept").mkdir()
    res = tmp_path / "kept" / "new" / "results"
    err = _error(["table1", "--results", str(res), "--budget-seconds", "1", "--device", "cpu", "--data-root",
                  str(tmp_path / "root")])
    assert err.startswith("python -m fedlib table1: error: --data-root: "), err
    assert "not a readable CIFAR-10 batch file" in err
    assert not (tmp_path / "kept" / "new").exists()  # the folder that was there stays, the ones made go
    assert fake_table1 == []


def test_run_cifar10_closes_its_progress_bar_before_the_error_of_a_diverged_run(tmp_path, monkeypatch):
    """A run that diverges after some rounds under --progress closes its bar (tqdm's last line ends) before main
    prints the error, so the error starts a line of its own. Mutant: the ``finally`` closing the bar dropped: the
    error was written after the bar's last carriage return, on the bar's line (only the successful bar was tested,
    which tqdm's garbage collection closed soon enough)."""
    import fedlib.experiments.cifar10 as C

    def diverge(runs, data, parts, *, rounds, callback=None, **kw):
        callback(0, [argparse.Namespace(train_loss=2.5, test_accuracy=0.125)], 1.0)
        raise FloatingPointError("training loss is nan at round 1")

    monkeypatch.setattr(C, "train_runs", diverge)
    rc, stdout, err = cli_exit(["run", "cifar10", *TINY, "--rounds", "3", "--algorithm", "fedavg", "--progress"])
    assert (rc, stdout) == (2, "")
    bar, error = err.rsplit("\n", 2)[:2]
    assert "1/3" in bar and "acc=0.125" in bar  # the bar's last state, then the line it ends
    assert error == ("python -m fedlib run cifar10: error: run cifar10 (fedavg seed 0): training loss is nan at "
                     "round 1; nothing written")

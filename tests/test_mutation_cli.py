"""Mutation-testing pass on the command line (``fedlib/cli/common.py``, ``fedlib/cli/synthetic.py``,
``fedlib/cli/rerun.py``): each test pins behaviour that a mutant of these modules changed without
any other test failing (an argument check's boundary, the text of an error message naming the flag,
a resolved default, what is printed, which file is written).

Expected values are read off the input or worked out by hand in the comments. Everything runs in
process (``fedlib.cli.main`` or the helpers directly), on tiny generated data sets.

Mutants of a33e916..37f92d9, the unrecognised-positional message of ``fedlib/cli/__init__.py``
(``_value_names``, and the review's ``_value_range`` for positionals of no fixed count) (pass described
in tests/README.md, Mutation passes): 16 mutants, one at a time, ``pytest -x`` on test_cli_usage.py and
this file: 14 killed by the suite, 2 killed here, 0 equivalent.
  C1 '?' taken as (0, None), C2 '+' as (0, None), C3 another nargs ('*') as (1, None), C4 nargs=N counted 1,
  C5 ``low == high`` -> ``high is not None`` ('?' named by no value), C6 one name for nargs=N, C7 the dest
  for the usage form, C8 the names as before the review (a choices positional by its dest), C9 no limit
  summed as 0, C10 the fewest values counted as the names, C12 'at most' for the wrong case, C13 always
  plural, C14 one name per positional, C15 ``fewest == most`` -> ``most is not None``: killed by the suite
  (tests/test_cli_usage.py; C1-C3, C5, C7-C10, C12, C13, C15 by the review's test there).
  C11 "got" as the names + 1, C16 the extra positionals counted as one: killed here
  (test_an_unrecognised_positional_count_is_of_every_extra_value_not_the_options).

Mutants of 37f92d9..d2bb791 (the changed hunks of fedlib/cli/__init__.py, fedlib/cli/rerun.py and
fedlib/cli/synthetic.py) (pass described in tests/README.md, Mutation passes): 33 mutants, one at a time,
``pytest -x`` on test_cli_usage.py, this file, test_bad_inputs.py, test_rerun.py (rerun),
test_mutation_distributed.py and test_checkpoint.py (run synthetic) and ``tests/test_doctests.py -k <module>``;
the survivors of run synthetic re-run against test_distributed.py and test_resume_differential.py: 20 killed by
the suite, 9 by a test of the pass, 4 equivalent.
killed by the suite: CL1 '+' as (0, None); CL4 the word after ``--x=v`` taken as its value; CL5 ``i and``
  dropped (the first extra read as the value of the last); CL6 cutoff 0.75 -> 0.5; CL8 the guesses compared with
  their dashes; CL9 ``fewest == most`` -> ``most is not None``; CL10 always plural; CL11 torchrun's ``several > 1``
  -> ``> 0``; CL12 every ``run`` command let through under torchrun; RR4 ``dirty is True`` -> ``is not False``;
  SY2 _by_contents drops ``name``, not ``source``; SY4 'unknown' commits compared; SY5 unknown dirty states
  compared; SY6, SY7 no comparison of the dirty states / versions; SY9 the constant-lr resume keeps the
  checkpoint's rounds; SY11 the --data paths compared by contents only from 3 ranks; SY12 checkpoint_every not
  compared across ranks; SY13 no last checkpoint on a resume without --checkpoint-every and SY15 load_checkpoint
  without ``who="--resume"`` (test_resume_differential.py).
killed by a test of the pass: CL2 ``'-'`` taken as an option, CL3 a negative number taken as an option: they
  survived because the message left every word starting with '-' out of its count, '-' and '-1' too (fixed
  with test_cli_usage.py::test_a_dash_or_a_negative_number_among_the_unrecognised_words_is_counted_as_a_positional,
  which kills both). Here: CL7 the short 'did you mean --out?' for one guess among two unknown options; CL13 a
  WORLD_SIZE that is no integer read as 2, CL14 WORLD_SIZE read without RANK; RR1 ``device.startswith("cuda")``
  -> ``== "cuda"``; RR3 ``git_dirty is True`` -> ``is not False``; SY8 ``args.rounds < done`` -> ``<=``; SY10
  the step-decay hint only when the new command decays in steps.
equivalent:
  * RR2 -- the GPU refusal without ``backend == "torch"``: the numpy backend records ``config.device`` 'cpu'
    always (``resolve_device`` refuses any other), so no result a run writes has a numpy backend on cuda.
  * SY1 -- ``_by_contents`` drops ``data.source`` without checking for ``sha256``: a data config without
    ``sha256`` is the generated data's (generator, alpha, beta, data_seed), which has no ``source``.
  * SY3 -- ``_data_by_contents`` compares by contents when either side (not both) names a file: then one side
    has no ``--data`` file and the resume is refused either way, naming ``data.sha256`` and the generator's
    keys; only whether ``data.source`` is among the listed keys differs.
  * SY14 -- ``on_round_end`` handed to the engine without a checkpoint to write: it returns at once, so the
    results are the same; only a distributed VR run gathers the c_i after every round (a collective), which
    the comment says the condition avoids (a cost, not a result).

Mutants of fb91484..97fac41 (fedlib/cli/common.py: check_output_path's refusal of a checkpoint,
_is_fedlib_checkpoint) (pass described in tests/README.md, Mutation passes): 4 mutants (ids as drafted), one at a
time, ``pytest -x`` on test_cli_paths.py, this file, test_checkpoint.py, test_results.py and
test_mutation_results_validate.py: 1 killed by the suite, 3 killed here, 0 equivalent.
  killed by the suite: CP1 the refusal dropped (test_cli_paths.py).
  killed here: CP2 ``fh.tell() < size`` -> ``<=`` (a file of exactly the footer let through); CP5 an unreadable
  file taken for a checkpoint (``except OSError: return True``); CP6 the message naming '--out' for --json and
  --profile.

Mutants of c94cc84..457d1a7 (fedlib/cli/rerun.py: ``rerun --data``, ``_data_source_flags``,
``compare_results(data_elsewhere=)``; fedlib/cli/synthetic.py: ``--resume`` by the --data contents in one process)
(pass described in tests/README.md, Mutation passes): 25 mutants, one at a time, ``pytest -x -q`` on test_rerun.py,
test_checkpoint.py, this file, test_leaf_content_fingerprint.py, test_cli_synthetic.py, test_bad_inputs.py,
test_cli_paths.py, test_data_leaf.py and test_mutation_distributed.py -k "data or resume": 16 killed by the suite,
6 killed here, 3 equivalent.
  killed by the suite: RD1 --data ignored; RD2 the generated-data refusal dropped; RD3 the no-sha256 refusal
  dropped; RD4 the replaced flag inserted, the recorded --data kept after it; RD7 the existence check inverted;
  RD9 the missing-source refusal dropped; RD10 ``exists()`` -> ``is_file()`` (a LEAF folder refused); RD11
  ``data_elsewhere`` not passed; RD12 data.name skipped instead of data.source; RD13 sha256 skipped with the
  source; RD16 ``args.data`` not handed to ``_data_source_flags`` (all tests/test_rerun.py); SD1
  ``_data_by_contents`` only when distributed again; SD2 ``_by_contents`` drops sha256, not source; SD3 no
  ``_data_by_contents``; SD5 the current config compared with itself; SD6 ``config`` (with data.name) as the
  current side (tests/test_checkpoint.py).
  killed here: RD5 the flags after --data from ``at + 2`` (--num-classes dropped); RD6 the --data flags not
  returned at once (a missing copy refused as config.data.source); RD8 the existence check without
  ``expanduser``; RD14 data.source skipped without ``data_elsewhere``; RD15 ``and`` -> ``or`` between the two
  sides' data checks; RD17 rerun's ``--data`` of ``type=Path`` (no '~' expansion).
equivalent:
  * RD18 -- the replaced flag's config path (used only to name a flag ``_check_argv``'s parse refuses) as
    'config.data.sha256': run synthetic's --data is ``user_path``, which refuses only an empty path or a '~user'
    it cannot expand, and rerun's own ``--data`` (``user_path`` too) has expanded the path before it is passed on.
  * SD4 -- ``_data_by_contents`` with ``any`` for ``all`` (SY3 of 37f92d9..d2bb791): one side without a --data
    file is refused either way; only whether data.source is among the listed keys differs.
  * SD7 -- ``_by_contents`` applied to both sides when not both name a file by SHA-256: ``_by_contents`` leaves a
    side without sha256 as it is, so as SD4 only the listed keys of a refused resume differ (a generated side has
    no source; an older checkpoint without sha256 differs in sha256 either way).

Mutants of f929b39..780545c (fedlib/cli/common.py, a5fcb73: user_path refuses an empty text) (pass described in
tests/README.md, Mutation passes):
  UP1 ``not text`` -> ``text is None``; UP2 ``not text.strip()`` (blank names refused); UP3 a ValueError for the
  ArgumentTypeError (argparse's 'invalid user_path value'); UP4 the check never true. killed by the suite: UP1, UP3,
  UP4 (test_cli_paths.py). killed here: UP2.
Mutants of cdf6ee0..fcc8b56 (fedlib/cli/rerun.py, a8a4c5d: _data_mismatch, the data's SHA-256 compared before the
rerun runs) (pass described in tests/README.md, Mutation passes):
  RD1 the sha256 test dropped (any data dict checked); RD2 ``isinstance(sha256, str)`` -> ``is not None``; RD3 checked
  only when argv holds --data; RD4 OSError not caught; RD5 ValueError not caught; RD6 ``==`` -> ``!=``; RD7 the two
  digests swapped in the message; RD8 the check's answer ignored; RD9 checked against an empty config; RD10 exit 2;
  RD11 the --out clause inverted; RD12 the whole parser for ``run synthetic``'s; RD13 printed to stderr; RD14 checked
  only with rerun's own --data; RD15 'nothing was rerun' reworded.
  killed by the suite: RD1, RD6-RD11, RD13-RD15 (test_rerun.py). killed here: RD4. equivalent: RD2 (no run writes a
  sha256 that is not a text; a hand-edited one is a MISMATCH naming config.data.sha256, exit 1, either way: only
  whether the run is spent first differs), RD3 (a result that records config.data.sha256 is a LEAF result, whose
  flags always hold --data=...), RD5 (load_dataset turns load_leaf's ValueError into a CLIError, itself a ValueError,
  and nothing else in the try raises one), RD12 (the whole parser parses ``run synthetic``'s arguments alike; only
  the other commands' modules are imported too).
Mutants of 652fbe7..0e9da1f (fedlib/cli/common.py, 8bb49e8: _check_can_create and its two callers;
fedlib/cli/__init__.py and rerun.py, 0e9da1f: _nested, an interrupted rerun reported once; with the review fix
12386b6, rerun's --out named when its run wrote it) (pass described in tests/README.md, Mutation passes): 15 mutants
(ids as drafted: CC9, NS6, RW3 not run), one at a time, ``pytest -x -q`` on test_cli_paths.py and this file (CC),
test_rerun.py and this file (NS, RW): 12 killed by the suite, 2 killed here, 1 equivalent.
  CC1 check_output_path's create test dropped; CC2 resolve_checkpoint's dropped; CC3 the temporary file not removed;
  CC4 its descriptor not closed; CC5 the message naming the file as the folder; CC6 the whole OSError for its
  strerror; CC7 only PermissionError caught; CC8 --checkpoint's refusal naming --out; NS1 the nested run reports its
  own interruption (``raise`` dropped); NS2 ``_NESTED.reset(token)`` -> ``_NESTED.set(False)``; NS3 ``_nested``
  sets False; NS4 no ``finally`` (not reset when the KeyboardInterrupt leaves); NS5 rerun's run not in
  ``_nested()``; RW1 ``!= before`` -> ``==``; RW2 ``args.written`` never set.
  killed by the suite: CC1-CC3, CC5, CC7, CC8 (test_cli_paths.py); NS1, NS3, NS5
  (test_an_interrupted_rerun_says_so_once), NS4 (the same test's own run afterwards re-raised the KeyboardInterrupt,
  which stopped pytest: exit 2); RW1, RW2 (test_a_rerun_interrupted_after_its_run_wrote_out_names_the_file, the
  review fix's test). killed here: CC4, CC6.
  equivalent: NS2 (reset and set(False) differ only where ``_nested()`` is entered while already nested; rerun's
  inner command is ``run synthetic``, which nests nothing).

Mutants of 0e9da1f..c5aa211 (fedlib/cli/__init__.py: ``_escaping_stdout``, b4b6e3b; rerun's --out named when
interrupted after its run wrote it, 12386b6: ``main``'s message, fedlib/cli/rerun.py ``_file_state``;
``_kept_checkpoints`` and ``resolve_checkpoint(for_writing=False)``, 434c08a) (pass described in tests/README.md,
Mutation passes): 27 mutants, one at a time, ``pytest -x -q`` on test_cli_usage.py, this file and test_rerun.py (ES,
WR), test_checkpoint.py, test_cli_paths.py, this file and test_rerun.py (KC, RC): 15 killed by the suite, 10 killed
here, 3 equivalent.
  ES1 ``errors == "strict"`` -> ``!=``; ES2 ``not utf`` -> ``utf``; ES3 the error handler not put back; ES4
  'replace' for 'backslashreplace'; ES5 only 'utf-8' read as UTF; ES6 a stream without an encoding taken for
  ASCII; ES7 an unknown encoding taken for UTF; ES8 no ``reconfigure`` test; ES9 a failed reconfigure raised; ES10
  the restore's failure not suppressed; ES11 ``main()`` without argv not escaped; ES12 'strict' put back for the
  saved handler; ES13 stderr's handler changed for stdout's. WR1 ``written is not None`` -> ``is None``; WR2
  ``!= before`` -> ``==``; WR3 ``args.out is not None and`` dropped; WR4 ``_file_state`` the size alone; WR5 its
  TypeError not caught; WR6 ``before = None``; WR7 the resolved path written; WR8 ``args.written`` never read. KC1
  ``_kept_checkpoints`` with ``for_writing`` (the default); RC1 ``writes = every is not None``; RC2 ``writes =
  for_writing``; RC3 the ``os.access`` check for any --checkpoint-every; RC4 the name-length check for any
  --checkpoint-every; RC5 ``_check_can_create`` for any --checkpoint-every; RC6 ``for_writing`` False by default.
  killed by the suite: ES1-ES4, ES13 (test_cli_usage.py); WR1, WR2, WR5-WR8 (test_rerun.py); KC1, RC1, RC5, RC6
  (test_checkpoint.py). killed here: ES5-ES10
  (test_the_stdout_error_handler_is_changed_only_for_a_strict_non_utf_stream_that_takes_it), ES11, WR4, RC2, RC3.
  equivalent:
  * ES12 -- the handler is changed only where it was 'strict', so 'strict' is the saved one.
  * WR3 -- ``_file_state(None)`` is None before and after: without --out ``args.written`` is never set either way.
  * RC4 -- a --checkpoint-every run with a name over 241 bytes is refused before it runs, so no checkpoint it kept
    has one; without --checkpoint-every nothing is checked either way.

Mutants of c28e9dd, the error paths (fedlib/cli/__init__.py: every ``except`` of ``main``, ``_load``, ``_is_option``,
``_torchrun_world_size``, ``_kept_checkpoints``, ``_escaping_stdout``, ``_nested`` and every exit status;
fedlib/cli/__main__.py; fedlib/cli/common.py, rerun.py, synthetic.py: their ``except`` clauses, clean-ups and exit
statuses) (pass described in tests/README.md, Mutation passes; fedlib/cli/cifar10.py's in
test_mutation_cli_cifar10.py): 77 mutants, one at a time, ``pytest -x -q`` on the files that name the code (3
runs each where a test uses a pipe, a signal or a file system failure): 68 killed by the suite, 4 killed by a test
of the pass, 4 equivalent, 1 left alive without a test (SYN12).
  MAI1 ``_load`` without ``except ModuleNotFoundError``; MAI2 every ModuleNotFoundError read as the command's own;
  MAI3 ``_is_option`` a non-number False; MAI4-MAI17, MAI23, MAI25 each ``except`` of main -> ``except
  ZeroDivisionError`` or its exit status changed (torchrun guard, WORLD_SIZE, DivergenceError, CLIError/ValueError,
  MemoryError, OverflowError, KeyboardInterrupt and ``_NESTED``, 130, 141, OSError's 1); MAI18 no BrokenPipeError
  handler; MAI19 no ``os.dup2`` onto os.devnull; MAI20 its ``except (OSError, ValueError)`` narrowed; MAI21 no
  ``sys.stdout`` swap; MAI22 the swap's ``except OSError`` narrowed; MAI24 no OSError handler; MAI26 main's
  ``sys.stdout.flush()`` dropped; MAI27-MAI30 ``_escaping_stdout``'s LookupError, reconfigure and restore; MAI31
  ``_nested`` not reset; MAI32 ``__main__`` without ``sys.exit``; MAI34 MAI19 and MAI21 together. COM1-COM13
  common's argparse types, ``check_fresh_checkpoint``, ``build_algorithm``, ``resolve_epochs``,
  ``_check_can_create`` (its ``except OSError``, unlink, close), ``emit_bench``'s status. RER1-RER16 rerun's
  ``_check_argv``, ``_data_mismatch``, ``_file_state``, the nested run's SystemExit and status, its
  KeyboardInterrupt, ``args.written`` and the statuses 0 / 1. SYN1-SYN15 run synthetic's data, device and
  WORLD_SIZE errors, the per-rank ``except Exception`` and its re-raises, the checkpoint write's, RankStopped,
  ``destroy_process_group``, the statuses and the bar's ``close``.
  killed by the suite: MAI1-MAI18, MAI20, MAI23-MAI25, MAI27-MAI32 (MAI1, MAI2 by test_mutation_cli_cifar10.py's
  ``_load`` tests; MAI15, MAI31 let the KeyboardInterrupt stop pytest: exit 2), COM1-COM13, RER1, RER2, RER5-RER16,
  SYN1-SYN11, SYN13, SYN14 (SYN11 by test_distributed.py's progress-bar test).
  killed here: MAI26 (test_output_still_buffered_when_the_reader_has_gone_exits_141_quietly: the closed-pipe test
  of test_table1.py fails while printing, before main's flush), MAI34
  (test_lines_flushed_into_a_closed_pipe_exit_141_quietly and the test above: table1 --dry-run prints without
  flushing, so its failed write left nothing buffered, and the pipeline's status it read was head's), SYN15
  (test_run_synthetic_closes_its_progress_bar_before_the_error_of_a_diverged_run); MAI22 in
  test_mutation_cli_cifar10.py (test_a_closed_pipe_exits_141_quietly_where_no_file_can_be_opened). Each 3 of 3
  runs, and the tests pass 3 of 3 on the code.
  equivalent:
  * MAI19, MAI21 -- either redirection alone keeps Python's flush at exit quiet (CPython 3.11: the original
    stdout, no longer ``sys.stdout``, is not flushed at exit); the two together are MAI34.
  * RER3 -- ``load_dataset``'s ValueErrors are CLIErrors (as RD5 of c94cc84..457d1a7), so ``except (CLIError,
    OSError)`` catches them all; RER4 -- CLIError is a ValueError, so ``except (ValueError, OSError)`` catches it.
  left alive: SYN12 (run synthetic's ``dist.destroy_process_group()`` dropped): ``init_from_env``'s exit handler
  destroys the group when the process ends, so only a caller that goes on in the same process after a
  ``--distributed`` run (a second one) would meet the group still there; not tested (test_distributed.py passed
  whole). Killed since (2026-12-06) by test_distributed.py's
  ``test_run_synthetic_distributed_destroys_its_group_before_it_returns``: two runs in one process, each followed by
  ``dist.is_initialized()`` (True after both on the mutant; the test passes on the code).
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest

from fedlib.cli import common
from fedlib.cli.common import CLIError
from cliutil import cli_exit, edited_result

SYN = ["run", "synthetic", "--num-clients", "3", "--rounds", "2"]


def _error(argv) -> str:
    """The text after ``<prog>: error: `` of a refused command line (exit status 2)."""
    rc, _, err = cli_exit(argv)
    assert rc == 2, (rc, err)
    lines = [ln for ln in err.splitlines() if ": error: " in ln]
    assert lines, err
    return lines[-1].split(": error: ", 1)[1]


# ----------------------------------------------------------------------------- argparse types
@pytest.mark.parametrize("parse, text, message", [
    (common.positive_float, "abc", "must be a number, got 'abc'"),
    (common.positive_float, "0", "must be a finite number > 0, got '0'"),
    (common.positive_float, "inf", "must be a finite number > 0, got 'inf'"),
    (common.positive_float, "nan", "must be a finite number > 0, got 'nan'"),
    (common.nonneg_float, "-0.5", "must be a finite number >= 0, got '-0.5'"),
    (common.nonneg_float, "inf", "must be a finite number >= 0, got 'inf'"),
    (common.unit_interval, "1", "must lie in [0, 1), got '1'"),
    (common.unit_interval, "-0.1", "must lie in [0, 1), got '-0.1'"),
    (common.int_at_least(1), "0", "must be >= 1, got 0"),
    (common.int_at_least(1), "1.5", "must be an integer, got '1.5'"),
    (common.int_between(2, 5), "1", "must be an integer in [2, 5], got 1"),
    (common.int_between(2, 5), "6", "must be an integer in [2, 5], got 6"),
    (common._tau_eff, "0", "must be a finite number > 0, got '0'"),
    (common._tau_eff, "inf", "must be a finite number > 0, got 'inf'"),
    (common._tau_eff, "steps", "must be 'a_norm', 'local_steps', 'population' or a number > 0, got 'steps'"),
    (common.user_path, "~nosuchuser-fedlib-zz9/r.json", "cannot expand '~nosuchuser-fedlib-zz9/r.json': "),
])
def test_argument_types_refuse_with_a_message(parse, text, message):
    with pytest.raises(argparse.ArgumentTypeError) as info:
        parse(text)
    assert str(info.value).startswith(message), str(info.value)


@pytest.mark.parametrize("parse, text, value", [
    (common.positive_float, "1e-300", 1e-300),   # the smallest numbers > 0 are fine
    (common.nonneg_float, "0", 0.0),             # the boundary 0 belongs to ">= 0"
    (common.unit_interval, "0", 0.0),
    (common.unit_interval, "0.999", 0.999),
    (common.int_at_least(1), "1", 1),
    (common.int_at_least(0), "0", 0),
    (common.int_between(2, 5), "2", 2),          # both ends are inside [low, high]
    (common.int_between(2, 5), "5", 5),
    (common._tau_eff, "a_norm", "a_norm"),
    (common._tau_eff, "local_steps", "local_steps"),
    (common._tau_eff, "population", "population"),
    (common._tau_eff, "2.5", 2.5),
    (common._epochs, "2-5", "2-5"),              # kept as text (parsed again by resolve_epochs)
])
def test_argument_types_accept(parse, text, value):
    got = parse(text)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("text", ["0", "5-2"])  # E = 0 local epochs, a range whose low end is above its high end
def test_epochs_type_refuses_what_parse_epochs_refuses(text):
    with pytest.raises(argparse.ArgumentTypeError) as info:
        common._epochs(text)
    assert str(info.value) == f"epochs range must satisfy 1 <= low <= high, got '{text}'"


def test_user_path_expands_the_home_folder():
    assert common.user_path("~/r.json") == Path.home() / "r.json"


def test_user_path_refuses_the_empty_string_only():
    """user_path refuses an empty text (Path('') is the working folder, a5fcb73) and nothing else: a name of blanks
    is a file name like any other (' ' and ' r.json' are files a shell can make, and kept as given). Mutant UP2 of
    f929b39..780545c (``not text.strip()``: blank names refused as empty)."""
    with pytest.raises(argparse.ArgumentTypeError, match=r"^must be a file or folder path, got an empty string$"):
        common.user_path("")
    assert common.user_path(" ") == Path(" ") and common.user_path(" r.json") == Path(" r.json")


@pytest.mark.parametrize("flag, value, message", [
    ("--lr", "0", "argument --lr: must be a finite number > 0, got '0'"),
    ("--lr", "abc", "argument --lr: must be a number, got 'abc'"),
    ("--mu", "-1", "argument --mu: must be a finite number >= 0, got '-1'"),
    ("--rounds", "0", "argument --rounds: must be >= 1, got 0"),
    ("--batch-size", "0", "argument --batch-size: must be >= 1, got 0"),
    ("--clients-per-round", "0", "argument --clients-per-round: must be >= 1, got 0"),
    ("--seed", "-1", "argument --seed: must be >= 0, got -1"),
    ("--checkpoint-every", "0", "argument --checkpoint-every: must be >= 1, got 0"),
    ("--num-classes", "1", "argument --num-classes: must be >= 2, got 1"),
    ("--num-clients", "0", "argument --num-clients: must be >= 1, got 0"),
    ("--data-seed", "-1", "argument --data-seed: must be >= 0, got -1"),
    ("--l2", "-1", "argument --l2: must be a finite number >= 0, got '-1'"),
    ("--tau-eff", "-2", "argument --tau-eff: must be a finite number > 0, got '-2'"),
])
def test_run_synthetic_names_the_flag_of_a_bad_value(flag, value, message):
    assert _error(SYN + [flag, value]).startswith(message)


def test_help_shows_defaults_but_not_none_or_false():
    """``(default: X)`` is shown where X is a value, not for None (the help says what happens) or False
    (a switch)."""
    rc, out, _ = cli_exit(["run", "synthetic", "--help"])
    assert rc == 0
    text = " ".join(out.split())  # the help is wrapped at the terminal width
    assert "communication rounds (default: 100)" in text
    assert "mini-batch size per client (default: 20)" in text
    assert "(default: None)" not in text and "(default: False)" not in text


def _parse(argv):
    from fedlib.cli import build_parser

    return build_parser(tuple(argv[:2])).parse_args(argv)


def test_run_synthetic_defaults():
    """The defaults the description and the help promise (paper settings: batch 20, lr 0.02, E = 2)."""
    args = _parse(["run", "synthetic"])
    expected = dict(algorithm="fednova", solver=None, lr=0.02, lr_decay="constant", mu=None, momentum=None,
                    weight_decay=0.0, tau_eff=None, server="plain", server_momentum=None, server_lr=None,
                    rounds=100, epochs="2", batch_size=20, sampling="full", clients_per_round=None, seed=0,
                    engine="batched", backend="numpy", device=None, out=None, quiet=False, progress=False,
                    checkpoint_every=None, checkpoint=None, resume=False, distributed=False, data=None,
                    alpha=None, beta=None, num_clients=None, data_seed=None, num_classes=None, l2=0.0)
    assert {k: getattr(args, k) for k in expected} == expected


def test_run_synthetic_accepts_the_lower_bounds():
    args = _parse(["run", "synthetic", "--rounds", "1", "--batch-size", "1", "--clients-per-round", "1",
                   "--seed", "0", "--checkpoint-every", "1", "--num-classes", "2", "--num-clients", "1",
                   "--data-seed", "0", "--mu", "0", "--momentum", "0", "--server-momentum", "0",
                   "--weight-decay", "0", "--alpha", "0", "--beta", "0", "--l2", "0"])
    assert (args.rounds, args.batch_size, args.clients_per_round, args.seed, args.checkpoint_every,
            args.num_classes, args.num_clients, args.data_seed) == (1, 1, 1, 0, 1, 2, 1, 0)
    assert (args.mu, args.momentum, args.server_momentum, args.weight_decay, args.alpha, args.beta,
            args.l2) == (0.0,) * 7


def test_add_checkpoint_args_without_distributed():
    """``--distributed`` only where asked for (run synthetic); the group title says so."""
    p = argparse.ArgumentParser()
    g = common.add_checkpoint_args(p)
    assert g.title == "checkpoints"
    assert "--distributed" not in p.format_help()
    assert p.parse_args(["--checkpoint-every", "1"]).checkpoint_every == 1
    p2 = argparse.ArgumentParser()
    assert common.add_checkpoint_args(p2, distributed=True).title == "checkpoints and processes"
    assert p2.parse_args(["--distributed"]).distributed is True


# ----------------------------------------------------------------------------- devices
@pytest.fixture
def gpus(monkeypatch):
    """Pretend torch sees ``n`` GPUs: ``gpus(n)``."""
    import torch

    def set_count(n):
        monkeypatch.setattr(torch.cuda, "device_count", lambda: n)

    return set_count


@pytest.mark.parametrize("device", ["cpu", "cpu:0", "cuda"])
def test_check_torch_device_accepts_cpu_and_an_unnumbered_cuda(gpus, device):
    gpus(0)  # plain "cuda" without a GPU is resolve_device's to refuse (it names --backend torch)
    common.check_torch_device(device)


@pytest.mark.parametrize("count, device, message", [
    # cuda:N needs N < count: cuda:1 is the second GPU
    (1, "cuda:1", "--device cuda:1: torch sees 1 GPU(s) on this machine (cuda:0)"),
    (0, "cuda:0", "--device cuda:0: torch sees 0 GPU(s) on this machine"),
    (3, "cuda:3", "--device cuda:3: torch sees 3 GPU(s) on this machine (cuda:0 .. cuda:2)"),
])
def test_check_torch_device_refuses_a_gpu_torch_does_not_see(gpus, count, device, message):
    gpus(count)
    with pytest.raises(CLIError) as info:
        common.check_torch_device(device)
    assert str(info.value) == message


def test_check_torch_device_accepts_the_last_gpu_and_names_other_types(gpus):
    gpus(2)
    common.check_torch_device("cuda:1")  # the second of two
    with pytest.raises(CLIError) as info:
        common.check_torch_device("meta", "--gpu")
    assert str(info.value) == "--gpu meta: the engines run on cpu or cuda (cuda:N), not meta"


# ----------------------------------------------------------------------------- checkpoint paths
def _ckpt_args(**kw):
    base = dict(checkpoint_every=None, checkpoint=None, resume=False, out=None, data=None)
    return argparse.Namespace(**{**base, **kw})


def _cli_error(fn, *args) -> str:
    with pytest.raises(CLIError) as info:
        fn(*args)
    return str(info.value)


def test_resolve_checkpoint_unused_is_none(tmp_path):
    assert common.resolve_checkpoint(_ckpt_args(out=tmp_path / "r.json")) is None
    # a command without checkpoint flags at all (run cifar10): unused, even when <out>.ckpt exists
    (tmp_path / "r.json.ckpt").write_bytes(b"")
    assert common.resolve_checkpoint(argparse.Namespace(out=tmp_path / "r.json")) is None


def test_resolve_checkpoint_defaults_to_out_dot_ckpt(tmp_path):
    assert common.resolve_checkpoint(_ckpt_args(checkpoint_every=2, out=tmp_path / "r.json")) \
        == tmp_path / "r.json.ckpt"


def test_resolve_checkpoint_refusals(tmp_path):
    (tmp_path / "folder").mkdir()
    assert _cli_error(common.resolve_checkpoint, _ckpt_args(checkpoint=tmp_path / "c.ckpt")) \
        == "--checkpoint needs --checkpoint-every K or --resume"
    assert _cli_error(common.resolve_checkpoint, _ckpt_args(checkpoint_every=1)) \
        == "--checkpoint-every / --resume need --checkpoint PATH or --out (default: <out>.ckpt)"
    assert _cli_error(common.resolve_checkpoint, _ckpt_args(resume=True)) \
        == "--checkpoint-every / --resume need --checkpoint PATH or --out (default: <out>.ckpt)"
    assert _cli_error(common.resolve_checkpoint, _ckpt_args(checkpoint_every=1, checkpoint=tmp_path / "folder")) \
        == f"--checkpoint {tmp_path / 'folder'}: is a folder, give a file name"
    assert _cli_error(common.resolve_checkpoint, _ckpt_args(resume=True, checkpoint=tmp_path / "none.ckpt")) \
        == f"--resume: checkpoint {tmp_path / 'none.ckpt'} not found"
    assert _cli_error(common.resolve_checkpoint, _ckpt_args(checkpoint_every=1, checkpoint=tmp_path / "no" / "c")) \
        == f"--checkpoint {tmp_path / 'no' / 'c'}: folder {tmp_path / 'no'} does not exist"
    out = tmp_path / "r.json"
    assert _cli_error(common.resolve_checkpoint, _ckpt_args(checkpoint_every=1, checkpoint=out, out=out)) \
        == f"--checkpoint {out}: is the --out file; give the checkpoint its own name"


def test_run_synthetic_resume_without_a_checkpoint_exits_2(tmp_path):
    out = tmp_path / "r.json"
    assert _error(SYN + ["--quiet", "--out", str(out), "--resume"]) \
        == f"--resume: checkpoint {out}.ckpt not found"
    assert not out.exists()


# ----------------------------------------------------------------------------- algorithm flags
@pytest.mark.parametrize("flags, message", [
    (["--algorithm", "fedprox", "--solver", "sgd"],
     "--solver: fedprox needs a proximal local solver (prox or momentum-prox), got sgd"),
    (["--algorithm", "fedprox"], "--mu: fedprox needs a proximal coefficient --mu > 0"),
    (["--algorithm", "fedprox", "--mu", "0"], "--mu: fedprox needs a proximal coefficient --mu > 0, got 0"),
    (["--solver", "prox"], "--mu: --solver prox needs a proximal coefficient --mu > 0"),
    (["--solver", "momentum-prox", "--mu", "0"],
     "--mu: --solver momentum-prox needs a proximal coefficient --mu > 0, got 0"),
    (["--mu", "0.1"], "--mu is only used by the prox solvers (prox, momentum-prox), not by --solver sgd"),
    (["--momentum", "0.5"], "--momentum is only used by the momentum solvers, not by --solver sgd"),
    (["--solver", "momentum", "--momentum", "0"],   # 0 is a value, not "unset" (which would give 0.9), and refused
     "--momentum: momentum must be > 0 for solver 'momentum', got 0.0 (without momentum use 'sgd')"),
    (["--solver", "prox", "--mu", "1", "--momentum", "0.5"],
     "--momentum is only used by the momentum solvers, not by --solver prox"),
    (["--algorithm", "fedavg", "--tau-eff", "2"],
     "--tau-eff can only be set for fednova and fednova-vr, not fedavg (its tau_eff is implicit)"),
    (["--server-momentum", "0.5"], "--server-momentum needs --server momentum, got --server plain"),
    (["--server", "adam", "--server-momentum", "0.5"], "--server-momentum needs --server momentum, got --server adam"),
    (["--server", "momentum", "--server-lr", "0.5"],
     "--server-lr is not used by --server momentum (its step is the client lr)"),
])
def test_impossible_algorithm_flags_exit_2_naming_the_flag(tmp_path, flags, message):
    out = tmp_path / "r.json"
    assert _error(SYN + ["--quiet", "--out", str(out)] + flags) == message
    assert not out.exists()


def _alg_args(**kw):
    base = dict(algorithm="fednova", solver=None, lr=0.1, mu=None, momentum=None, weight_decay=0.0, tau_eff=None,
                server="plain", server_momentum=None, server_lr=None)
    return argparse.Namespace(**{**base, **kw})


@pytest.mark.parametrize("given, resolved", [
    # (flags given, (solver, momentum, server_momentum, server_lr) filled in by build_algorithm)
    ({}, ("sgd", None, None, 1.0)),
    ({"algorithm": "fedprox", "mu": 0.5}, ("prox", None, None, 1.0)),
    ({"solver": "momentum"}, ("momentum", 0.9, None, 1.0)),
    ({"solver": "momentum", "momentum": 0.5}, ("momentum", 0.5, None, 1.0)),
    ({"solver": "momentum-prox", "mu": 0.5, "momentum": 0.3}, ("momentum-prox", 0.3, None, 1.0)),
    ({"server": "momentum"}, ("sgd", None, 0.9, None)),
    ({"server": "momentum", "server_momentum": 0.0}, ("sgd", None, 0.0, None)),
    ({"server": "adam"}, ("sgd", None, None, 0.01)),
    ({"server": "adam", "server_lr": 0.5}, ("sgd", None, None, 0.5)),
    ({"server_lr": 2.0}, ("sgd", None, None, 2.0)),
])
def test_build_algorithm_fills_in_the_resolved_defaults(given, resolved):
    args = _alg_args(**given)
    alg = common.build_algorithm(args)
    assert (args.solver, args.momentum, args.server_momentum, args.server_lr) == resolved
    assert alg.solver.lr == 0.1


@pytest.mark.parametrize("given, solver, tau_eff", [
    # (flags, (name, lr, momentum, mu, weight_decay) of the local solver, the algorithm's tau_eff)
    ({"algorithm": "fedprox", "mu": 0.5, "weight_decay": 0.01}, ("prox", 0.1, 0.0, 0.5, 0.01), None),
    ({"solver": "momentum", "momentum": 0.3}, ("momentum", 0.1, 0.3, 0.0, 0.0), None),
    ({"tau_eff": 2.0}, ("sgd", 0.1, 0.0, 0.0, 0.0), 2.0),
    ({"tau_eff": "local_steps"}, ("sgd", 0.1, 0.0, 0.0, 0.0), "local_steps"),
    ({"tau_eff": "population"}, ("sgd", 0.1, 0.0, 0.0, 0.0), None),  # set by resolve_tau_eff once n_i are known
])
def test_build_algorithm_passes_the_flags_on(given, solver, tau_eff):
    alg = common.build_algorithm(_alg_args(**given))
    s = alg.solver
    assert (s.name, s.lr, s.momentum, s.mu, s.weight_decay) == solver
    assert alg.tau_eff == tau_eff
    assert alg.name == given.get("algorithm", "fednova")


def test_build_algorithm_names_the_flag_of_a_solver_refusal(tmp_path):
    # lr * mu = 0.5 * 3 = 1.5 > 1: the proximal step is refused by the solver, reported against --mu
    assert _error(SYN + ["--quiet", "--algorithm", "fedprox", "--lr", "0.5", "--mu", "3"]) \
        .startswith("--mu: mu: lr*mu must be <= 1 for a proximal step, got lr*mu = 1.5")


def test_build_algorithm_reports_an_algorithm_refusal_as_a_cli_error():
    # a tau_eff the parser would have refused (a Namespace built by hand): still a CLIError naming --algorithm
    with pytest.raises(CLIError) as info:
        common.build_algorithm(_alg_args(tau_eff=-1.0))
    assert str(info.value).startswith("--algorithm fednova: ")


# ----------------------------------------------------------------------------- tau_eff population / warning
def _tau_args(**kw):
    base = dict(algorithm="fednova", tau_eff=None, sampling="full", clients_per_round=None)
    return argparse.Namespace(**{**base, **kw})


def test_resolve_tau_eff_population_is_the_weighted_mean_of_the_local_steps():
    args = _tau_args(tau_eff="population")
    alg = common.build_algorithm(_alg_args(tau_eff="population"))
    # local SGD: ||a_i||_1 = tau_i = E * ceil(n_i / b); n = (10, 20, 30), b = 10, E = 1: tau = (1, 2, 3),
    # p = (1, 2, 3) / 6, so tau_eff = (1 + 4 + 9) / 6 = 14 / 6
    new, value = common.resolve_tau_eff(args, alg, [10, 20, 30], 10, (1, 1))
    assert value == pytest.approx(14 / 6, rel=1e-12)
    assert new.tau_eff == value
    assert alg.tau_eff is None  # a new algorithm, the given one unchanged


WARNING = ("warning: {alg} with --sampling {s} takes tau_eff from each round's sample ({t}), which biases the "
           "expected update towards clients with large ||a_i||_1 (book, chapter 8); pass --tau-eff population "
           "for a sample-independent value")


@pytest.mark.parametrize("kw, warned", [
    ({"sampling": "uniform", "clients_per_round": 2}, WARNING.format(alg="fednova", s="uniform", t="a_norm")),
    ({"sampling": "with-replacement", "clients_per_round": 3},  # q = m draws with replacement: still a sample
     WARNING.format(alg="fednova", s="with-replacement", t="a_norm")),
    ({"sampling": "uniform", "clients_per_round": 2, "tau_eff": "local_steps"},
     WARNING.format(alg="fednova", s="uniform", t="local_steps")),
    ({"sampling": "uniform", "clients_per_round": 2, "algorithm": "fednova-vr"},
     WARNING.format(alg="fednova-vr", s="uniform", t="a_norm")),
    ({"sampling": "full"}, None),
    ({"sampling": "uniform", "clients_per_round": 3}, None),    # all 3 distinct clients: omega_i = p_i
    ({"sampling": "uniform", "clients_per_round": 2, "tau_eff": 2.0}, None),  # a fixed number
    ({"sampling": "uniform", "clients_per_round": 2, "algorithm": "fedavg"}, None),
])
def test_resolve_tau_eff_warns_about_a_sampled_tau_eff(capsys, kw, warned):
    args = _tau_args(**kw)
    alg = common.build_algorithm(_alg_args(algorithm=args.algorithm, tau_eff=args.tau_eff))
    new, value = common.resolve_tau_eff(args, alg, [10, 20, 30], 10, (1, 1))
    assert new is alg and value is None
    out, err = capsys.readouterr()
    assert out == ""
    assert err == ("" if warned is None else warned + "\n")


def test_resolve_tau_eff_warn_false_is_silent(capsys):
    args = _tau_args(sampling="uniform", clients_per_round=2)
    common.resolve_tau_eff(args, common.build_algorithm(_alg_args()), [10, 20, 30], 10, (1, 1), warn=False)
    assert capsys.readouterr().err == ""


# ----------------------------------------------------------------------------- participation, lr, output
def _part(sampling, q):
    return argparse.Namespace(sampling=sampling, clients_per_round=q)


@pytest.mark.parametrize("sampling, q", [("full", None), ("uniform", 3), ("uniform", 1),
                                         ("with-replacement", 5)])  # q > m draws are fine with replacement
def test_check_participation_accepts(sampling, q):
    common.check_participation(_part(sampling, q), 3)


@pytest.mark.parametrize("sampling, q, message", [
    ("full", 2, "--clients-per-round 2 needs --sampling with-replacement or uniform (with --sampling full all 3 "
                "clients take part)"),
    ("full", 3, "--clients-per-round 3 needs --sampling with-replacement or uniform (with --sampling full all 3 "
                "clients take part)"),
    ("uniform", None, "--clients-per-round is required with --sampling uniform"),
    ("with-replacement", None, "--clients-per-round is required with --sampling with-replacement"),
    ("uniform", 4, "--clients-per-round 4 is larger than the number of clients (3); --sampling uniform draws "
                   "distinct clients"),
])
def test_check_participation_refuses(sampling, q, message):
    assert _cli_error(common.check_participation, _part(sampling, q), 3) == message


def test_run_synthetic_refuses_clients_per_round_with_full_sampling_even_at_the_number_of_clients(tmp_path):
    """q = m with --sampling full passed check_participation, and the engine then refused it, after the data
    were loaded, with a message naming its parameter (clients_per_round), not the flag."""
    out = tmp_path / "r.json"
    assert _error(SYN + ["--quiet", "--out", str(out), "--clients-per-round", "3"]) \
        == "--clients-per-round 3 needs --sampling with-replacement or uniform (with --sampling full all 3 clients " \
           "take part)"
    assert not out.exists()


def test_lr_schedule():
    assert common.lr_schedule(argparse.Namespace(lr_decay="constant", lr=0.1, rounds=100)) is None
    f = common.lr_schedule(argparse.Namespace(lr_decay="step", lr=0.1, rounds=100))
    # /10 from round 50 (50% of 100), /100 from round 75
    assert [f(0), f(49), f(50), f(74), f(75), f(99)] == pytest.approx([0.1, 0.1, 0.01, 0.01, 0.001, 0.001])


def test_check_output_path(tmp_path, monkeypatch):
    common.check_output_path(None)
    common.check_output_path(tmp_path / "new.json")  # a new file in a writable folder
    (tmp_path / "file").write_text("x")
    common.check_output_path(tmp_path / "file")      # an existing file is replaced
    assert _cli_error(common.check_output_path, tmp_path) \
        == f"--out {tmp_path}: is a folder, give a file name like result.json"
    assert _cli_error(common.check_output_path, tmp_path / "file" / "r.json", "--json") \
        == f"--json {tmp_path / 'file' / 'r.json'}: folder {tmp_path / 'file'} is a file"
    assert _cli_error(common.check_output_path, tmp_path / "no" / "r.json") \
        == f"--out {tmp_path / 'no' / 'r.json'}: folder {tmp_path / 'no'} does not exist"
    os.mkfifo(tmp_path / "fifo")
    assert _cli_error(common.check_output_path, tmp_path / "fifo") \
        == f"--out {tmp_path / 'fifo'}: exists and is not a regular file (a FIFO or device); give a file name"
    # a link: the file written is its target, in the target's folder
    (tmp_path / "link.json").symlink_to(tmp_path / "gone" / "r.json")
    assert _cli_error(common.check_output_path, tmp_path / "link.json") \
        == f"--out {tmp_path / 'gone' / 'r.json'}: folder {tmp_path / 'gone'} does not exist"
    monkeypatch.setattr(common.os, "access", lambda path, mode: False)  # root may write anywhere: pretend
    assert _cli_error(common.check_output_path, tmp_path / "new.json") \
        == f"--out {tmp_path / 'new.json'}: folder {tmp_path} is not writable"


def _out_args(quiet=False, progress=False):
    return argparse.Namespace(quiet=quiet, progress=progress)


def test_progress_bar_only_when_asked_or_on_a_terminal(capsys):
    assert common.progress_bar(_out_args(), 10, "x") is None             # stderr is not a terminal here
    assert common.progress_bar(_out_args(quiet=True, progress=True), 10, "x") is None  # --quiet wins
    bar = common.progress_bar(_out_args(progress=True), 10, "fednova")
    assert (bar.total, bar.n, bar.desc) == (10, 0, "fednova")
    bar.close()
    bar = common.progress_bar(_out_args(progress=True), 10, "fednova", initial=4)  # a resumed run: 4 done
    assert bar.n == 4
    bar.close()
    capsys.readouterr()


def test_info_prints_unless_quiet(capsys):
    common.info(_out_args(), "hello")
    common.info(_out_args(quiet=True), "hidden")
    assert capsys.readouterr() == ("hello\n", "")


def test_config_from_args_records_paths_as_strings(tmp_path):
    args = argparse.Namespace(out=tmp_path / "r.json", lr=0.5, seed=None)
    assert common.config_from_args(args, ("out", "lr", "seed", "absent")) \
        == {"out": str(tmp_path / "r.json"), "lr": 0.5, "seed": None, "absent": None}


def test_emit_bench_writes_and_prints(tmp_path, capsys):
    from fedlib.results import read_result

    out = {"config": {"rounds": 1}, "results": {"speedup": 2.0}}
    from fedlib.results import RunClock

    with RunClock() as clock:
        pass
    prov = clock.provenance("cpu")
    fmt = lambda r: f"speedup {r['speedup']}"  # noqa: E731
    path = tmp_path / "b.json"
    assert common.emit_bench(argparse.Namespace(json=path, quiet=False), out, prov, fmt) == 0
    assert capsys.readouterr().out == f"speedup 2.0\nwrote {path}\n"
    doc = read_result(path)
    assert (doc["kind"], doc["config"], doc["summary"]) == ("bench", {"rounds": 1}, {"speedup": 2.0})
    path.unlink()
    assert common.emit_bench(argparse.Namespace(json=None, quiet=False), out, prov, fmt) == 0
    assert capsys.readouterr().out == "speedup 2.0\n" and not path.exists()
    assert common.emit_bench(argparse.Namespace(json=path, quiet=True), out, prov, fmt) == 0
    assert capsys.readouterr().out == "" and path.is_file()


def test_resolve_epochs():
    assert common.resolve_epochs(argparse.Namespace(epochs="2-5")) == (2, 5)
    assert common.resolve_epochs(argparse.Namespace(epochs="3")) == (3, 3)


def test_bench_synthetic_refuses_bad_epochs_before_benchmarking(tmp_path):
    """``bench synthetic --epochs`` is plain text in the parser: resolve_epochs is its only check."""
    path = tmp_path / "b.json"
    assert _error(["bench", "synthetic", "--quiet", "--epochs", "5-2", "--json", str(path)]) \
        == "--epochs: epochs range must satisfy 1 <= low <= high, got '5-2'"
    assert not path.exists()


# ----------------------------------------------------------------------------- run synthetic
@pytest.fixture
def leaf_file(tmp_path):
    from fedlib.data import save_leaf, synthetic

    folder = tmp_path / "leaf"
    save_leaf(synthetic(num_clients=3, seed=0, num_samples=[30, 40, 25]), folder)
    return next((folder / "train").glob("*.json"))


def test_run_synthetic_records_the_synthetic_defaults(tmp_path):
    """Without data flags: Synthetic(1, 1) with 30 clients, data seed 0 and 10 classes (the help's defaults),
    recorded in config.data; the summary line names the algorithm, the rounds and the file."""
    out = tmp_path / "r.json"
    rc, stdout, err = cli_exit(["run", "synthetic", "--rounds", "1", "--out", str(out)])
    assert rc == 0, err
    config = json.loads(out.read_text())["config"]
    data = {k: v for k, v in config["data"].items() if k != "num_samples"}
    assert data == {"generator": "synthetic", "alpha": 1.0, "beta": 1.0, "data_seed": 0, "num_clients": 30,
                    "num_features": 60, "num_classes": 10}
    assert len(config["data"]["num_samples"]) == 30
    assert (config["problem"], config["l2"], config["engine"], config["backend"], config["device"]) \
        == ("synthetic-logistic", 0.0, "batched", "numpy", "cpu")
    assert "tau_eff_value" not in config and "world_size" not in config
    lines = stdout.splitlines()
    assert len(lines) == 1
    import re
    assert re.fullmatch(r"fednova: final training loss \d+\.\d{6}, test accuracy \d\.\d{4} after 1 round "
                        r"\(\d+\.\d s\); wrote " + re.escape(str(out)), lines[0]), lines[0]


def test_run_synthetic_quiet_prints_nothing_and_without_out_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, stdout, err = cli_exit(SYN + ["--quiet"])
    assert (rc, stdout, err) == (0, "", "")
    assert list(tmp_path.iterdir()) == []
    rc, stdout, _ = cli_exit(SYN)
    assert rc == 0 and "wrote" not in stdout and stdout.startswith("fednova: final training loss ")


def test_run_synthetic_on_a_leaf_file(tmp_path, leaf_file):
    out = tmp_path / "r.json"
    assert cli_exit(["run", "synthetic", "--quiet", "--rounds", "1", "--data", str(leaf_file), "--out", str(out),
                     "--tau-eff", "population"])[0] == 0
    config = json.loads(out.read_text())["config"]
    assert config["problem"] == "leaf-logistic"
    assert config["data"]["source"] == str(leaf_file.resolve())
    assert config["data"]["num_samples"] == json.loads(leaf_file.read_text())["num_samples"]  # read off the file
    assert "generator" not in config["data"] and "alpha" not in config["data"]
    assert config["tau_eff"] == "population" and config["tau_eff_value"] > 0


@pytest.mark.parametrize("flags, message", [
    (["--alpha", "1"], "--alpha: describes the generated Synthetic data, not --data {data}; drop it"),
    (["--num-clients", "3", "--data-seed", "0"],
     "--num-clients, --data-seed: describe the generated Synthetic data, not --data {data}; drop them"),
])
def test_run_synthetic_refuses_synthetic_flags_with_data(tmp_path, leaf_file, flags, message):
    assert _error(["run", "synthetic", "--quiet", "--data", str(leaf_file)] + flags) \
        == message.format(data=leaf_file)


def test_run_synthetic_names_data_in_a_bad_data_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert _error(["run", "synthetic", "--quiet", "--data", str(bad)]).startswith("--data: ")


@pytest.mark.parametrize("flags, message", [
    (["--engine", "reference", "--backend", "torch"],
     "--engine reference runs with numpy on the CPU: drop --backend / --device"),
    (["--engine", "reference", "--device", "cuda:0"],
     "--engine reference runs with numpy on the CPU: drop --backend / --device"),
    (["--engine", "reference", "--distributed"], "--distributed runs the batched engine: drop --engine reference"),
    (["--engine", "reference", "--checkpoint-every", "1", "--out", "{tmp}/r.json"],
     "--checkpoint-every / --resume need --engine batched"),
    (["--backend", "torch", "--device", "meta"], "--device meta: the engines run on cpu or cuda (cuda:N), not meta"),
])
def test_run_synthetic_refuses_engine_combinations(tmp_path, flags, message):
    assert _error(SYN + ["--quiet"] + [f.format(tmp=tmp_path) for f in flags]) == message
    assert list(tmp_path.iterdir()) == []


def test_run_synthetic_reference_engine_on_the_cpu_device_runs():
    assert cli_exit(SYN + ["--quiet", "--engine", "reference", "--device", "cpu"])[0] == 0


def test_run_synthetic_refuses_more_processes_than_clients(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")  # 4 processes for 3 clients
    assert _error(SYN + ["--quiet", "--distributed"]) \
        == "--distributed: world size 4 is larger than the number of clients (3); use at most 3 processes"
    monkeypatch.setenv("WORLD_SIZE", "two")
    assert _error(SYN + ["--quiet", "--distributed"]) == "--distributed: WORLD_SIZE='two' is not an integer"


def test_without_data_name_leaves_its_input_alone():
    from fedlib.cli.synthetic import _without_data_name

    config = {"lr": 0.1, "data": {"name": "leaf", "source": "/d"}}
    assert _without_data_name(config) == {"lr": 0.1, "data": {"source": "/d"}}
    assert config == {"lr": 0.1, "data": {"name": "leaf", "source": "/d"}}  # the run's config keeps its name


def test_rank0_of(monkeypatch):
    from fedlib.cli.synthetic import rank0_of

    monkeypatch.delenv("RANK", raising=False)
    assert rank0_of(False) and rank0_of(True)  # RANK unset: the only process
    monkeypatch.setenv("RANK", "1")
    assert rank0_of(False) and not rank0_of(True)
    monkeypatch.setenv("RANK", "0")
    assert rank0_of(True)


def test_segment_end_keeps_the_public_fields(monkeypatch):
    import time

    from fedlib.cli.synthetic import _segment_end, _segment_start

    seg = _segment_start(3)
    assert seg["rounds"] == [3, 3]
    seg["_t0"] = 100.0
    monkeypatch.setattr(time, "perf_counter", lambda: 110.12345678)
    end = _segment_end(seg, 7)
    monkeypatch.undo()
    assert end["rounds"] == [3, 7] and "_t0" not in end
    assert end["seconds"] == 10.123457  # 110.12345678 - 100, to the microsecond
    assert {k: end[k] for k in ("git_commit", "git_dirty", "fedlib", "started_utc")} \
        == {k: seg[k] for k in ("git_commit", "git_dirty", "fedlib", "started_utc")}


def test_run_synthetic_checkpoints_every_k_rounds_and_after_the_last(tmp_path, monkeypatch):
    import fedlib.checkpoint as ckpt

    saved = []
    real = ckpt.save_checkpoint

    def spy(path, **kw):
        saved.append(kw["round_done"])
        return real(path, **kw)

    monkeypatch.setattr(ckpt, "save_checkpoint", spy)
    out = tmp_path / "r.json"
    argv = ["run", "synthetic", "--num-clients", "3", "--rounds", "5", "--quiet", "--out", str(out),
            "--checkpoint-every", "2"]
    assert cli_exit(argv)[0] == 0
    assert saved == [2, 4, 5]  # every 2 rounds, and after the last (5)
    doc = ckpt.load_checkpoint(tmp_path / "r.json.ckpt", kind="synthetic")
    assert doc["round"] == 5
    segs = doc["extra"]["segments"]
    assert len(segs) == 1 and segs[0]["rounds"] == [0, 5] and segs[0]["world_size"] == 1


# ----------------------------------------------------------------------------- rerun: config -> flags
#: the config of `run synthetic --num-clients 3 --rounds 2 --epochs 1` (as recorded; written out as the input)
CONFIG = {"problem": "synthetic-logistic",
          "data": {"generator": "synthetic", "alpha": 1.0, "beta": 1.0, "data_seed": 0, "num_clients": 3,
                   "num_features": 60, "num_classes": 10, "num_samples": [55, 89, 59]},
          "l2": 0.0, "algorithm": "fednova", "solver": "sgd", "lr": 0.02, "lr_decay": "constant", "mu": None,
          "momentum": None, "weight_decay": 0.0, "tau_eff": None, "server": "plain", "server_momentum": None,
          "server_lr": 1.0, "rounds": 2, "epochs": "1", "batch_size": 20, "clients_per_round": None,
          "sampling": "full", "seed": 0, "engine": "batched", "backend": "numpy", "device": "cpu"}


def _config(**changes):
    config = json.loads(json.dumps(CONFIG))
    for key, value in changes.items():
        if key.startswith("data."):
            config["data"][key[5:]] = value
        elif value is KeyError:
            config.pop(key)
        else:
            config[key] = value
    return config


def test_argv_from_config_turns_every_recorded_flag_into_flag_equals_value():
    from fedlib.cli.rerun import argv_from_config

    # data flags first, then the run flags in the order of rerun's _FLAGS; nulls (unused flags) left out;
    # floats by repr, the rest by str
    assert argv_from_config(CONFIG) == [
        "run", "synthetic", "--alpha=1.0", "--beta=1.0", "--num-clients=3", "--data-seed=0", "--num-classes=10",
        "--algorithm=fednova", "--solver=sgd", "--lr=0.02", "--lr-decay=constant", "--weight-decay=0.0",
        "--server=plain", "--server-lr=1.0", "--rounds=2", "--epochs=1", "--batch-size=20", "--sampling=full",
        "--seed=0", "--engine=batched", "--backend=numpy", "--l2=0.0"]


def test_argv_from_config_of_a_leaf_torch_run():
    from fedlib.cli.rerun import argv_from_config

    config = _config(problem="leaf-logistic", backend="torch", device="cuda:1", lr=0.1 + 0.2)
    config["data"] = {"source": "/data/leaf", "name": "leaf", "num_classes": 10}
    argv = argv_from_config(config)
    assert argv[2:4] == ["--data=/data/leaf", "--num-classes=10"]
    assert "--lr=0.30000000000000004" in argv          # repr: the float round-trips exactly
    assert argv[-1] == "--device=cuda:1"               # only recorded flag for --backend torch
    assert "--device=cpu" not in argv_from_config(CONFIG)


@pytest.mark.parametrize("config, message", [
    (_config(problem="cifar10"),
     "config.problem is 'cifar10'; rerun supports ['synthetic-logistic', 'leaf-logistic'] results (CIFAR-10: "
     "rerun the cell with python -m fedlib table1 / run cifar10)"),
    (_config(data=KeyError), "the recorded config lacks config.data, which rerun needs"),
    (_config(data=[1]), "the recorded config is invalid: config.data must be an object, got [1]"),
    (_config(**{"data.beta": None}), "the recorded config is invalid: config.data.beta is null"),
    (_config(lr=[0.1]), "the recorded config is invalid: config.lr must be a string or a number, got [0.1]"),
    (_config(seed=True), "the recorded config is invalid: config.seed must be a string or a number, got True"),
    (_config(rounds=None), "the recorded config is invalid: config.rounds is null"),
    (_config(seed=KeyError),
     "the recorded config lacks config.seed, which rerun needs (run synthetic records every flag, null when unused)"),
    (_config(backend="torch", device=None),
     "the recorded config lacks config.device, which rerun needs for --backend torch"),
])
def test_argv_from_config_refuses_naming_the_key(config, message):
    from fedlib.cli.rerun import argv_from_config

    assert _cli_error(argv_from_config, config) == message


def test_rerun_parser_defaults():
    from fedlib.cli import build_parser

    args = build_parser(("", "rerun")).parse_args(["rerun", "r.json"])
    assert (args.result, args.out, args.tol, args.quiet, args.progress) == (Path("r.json"), None, 1e-12, False, False)


def test_rerun_help_shows_the_whole_description():
    rc, out, _ = cli_exit(["rerun", "--help"])
    text = " ".join(out.split())
    assert rc == 0 and "Exit status 0 when they match; 1 (MISMATCH)" in text


def test_check_argv_reports_a_refusal_that_names_no_flag():
    from fedlib.cli.rerun import _check_argv

    assert _cli_error(_check_argv, ["run", "synthetic", "--bogus=1"], {}) \
        == "the recorded config is invalid: unrecognized arguments: --bogus=1"
    assert _cli_error(_check_argv, ["run", "synthetic", "--lr=-1"], {"--lr": "config.lr"}) \
        == "the recorded config is invalid: config.lr (--lr): must be a finite number > 0, got '-1'"


# ----------------------------------------------------------------------------- rerun: comparison
@pytest.mark.parametrize("a, b, tol, diff", [
    (True, 1, 1e-12, "summary.x: True != 1"),       # a bool is not the number 1
    (1, True, 1e-12, "summary.x: 1 != True"),
    (1, "1", 1e-12, "summary.x: 1 != '1'"),         # a number and a string: compared exactly
    ("1", 1, 1e-12, "summary.x: '1' != 1"),
    ([1], {"k": 1}, 1e-12, "summary.x: [1] != {'k': 1}"),
    ({"k": 1}, [1], 1e-12, "summary.x: {'k': 1} != [1]"),
    ([1, 2], [1], 1e-12, "summary.x: length 2 != 1"),
    ([1, 2], [1, 3], 1e-12, "summary.x[1]: 2 != 3 (difference 1)"),
    ({"k": 1}, {}, 1e-12, "summary.x.k: only in the recorded result (1)"),
    ({}, {"k": 2}, 1e-12, "summary.x.k: only in the rerun (2)"),
    (0.0, 0.5 + 1e-9, 0.5, "summary.x: 0.0 != 0.500000001 (difference 0.5)"),  # just past tol * 1
    (4.0, 6.0 + 1e-9, 0.25, "summary.x: 4.0 != 6.000000001 (difference 2)"),     # past 0.25 * 6 = 1.5
    (float("nan"), 1.0, 1e-12, "summary.x: nan != 1.0 (difference nan)"),
    (None, 0, 1e-12, "summary.x: None != 0"),
])
def test_compare_results_names_the_first_difference(a, b, tol, diff):
    from fedlib.cli.rerun import compare_results

    assert compare_results({"summary": {"x": a}}, {"summary": {"x": b}}, tol) == [diff]


@pytest.mark.parametrize("a, b, tol", [
    (0.0, 0.5, 0.5),              # |a - b| = 0.5 = tol * max(1, 0, 0.5): the bound is inclusive
    (4.0, 5.0, 0.2),              # |a - b| = 1 = 0.2 * max(1, 4, 5): relative above 1
    (1e-13, 0.0, 1e-12),          # absolute near 0
    (float("inf"), float("inf"), 0.0),
    ([1, {"k": "s"}], [1, {"k": "s"}], 0.0),
])
def test_compare_results_matches_within_tol(a, b, tol):
    from fedlib.cli.rerun import compare_results

    assert compare_results({"summary": {"x": a}}, {"summary": {"x": b}}, tol) == []


@pytest.mark.parametrize("old, new, diff", [
    ([{"round": 1, "x": 1}], [{"round": 1, "x": 1, "y": 2}],
     "round 1, field y (history[0].y): only in the rerun's history"),
    ([{"round": 1, "x": 1, "y": 2}], [{"round": 1, "x": 1}],
     "round 1, field y (history[0].y): only in the recorded history"),
    ([{"round": 1, "w": {"b": {"c": 1}}}], [{"round": 1, "w": {}}],   # a message with ": " in the value
     "round 1, field w (history[0].w.b): only in the recorded result ({'c': 1})"),
    ([{"round": 1}, {"round": 2, "x": 1.0}], [{"round": 1}, {"round": 2, "x": 2.0}],
     "round 2, field x (history[1].x): 1.0 != 2.0 (difference 1)"),
    ([{"round": 1}], [{"round": 1}, {"round": 2}], "history: 1 rounds recorded, the rerun has 2"),
    # the wall-clock time_s is not compared, not even when only one side has it
    ([{"round": 1, "time_s": 1.0}], [{"round": 1, "time_s": 2.0}], None),
    ([{"round": 1}], [{"round": 1, "time_s": 2.0}], None),
    ([{"round": 1, "time_s": 2.0}], [{"round": 1}], None),
])
def test_compare_histories(old, new, diff):
    from fedlib.cli.rerun import compare_histories

    assert compare_histories(old, new) == diff


def test_compare_results_default_tol_and_missing_parts():
    from fedlib.cli.rerun import compare_results

    # the default tol is 1e-12: a difference of 1.5e-12 near 0 is one
    assert compare_results({"initial": {"x": 0.0}}, {"initial": {"x": 1.5e-12}}) \
        == ["initial.x: 0.0 != 1.5e-12 (difference 1.5e-12)"]
    assert compare_results({"initial": {"x": 0.0}}, {"initial": {"x": 0.5e-12}}) == []
    assert compare_results({"config": {}, "summary": {}}, {"config": {}}) == ["summary: only in the recorded result"]
    assert compare_results({"config": {}}, {"config": {}, "initial": {}}) == ["initial: only in the rerun"]
    assert compare_results({"config": {}}, {"config": {}}) == []


# ----------------------------------------------------------------------------- rerun: the command
@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A 2-round, 3-client run synthetic result (read it, do not modify it)."""
    path = tmp_path_factory.mktemp("rerun") / "orig.json"
    assert cli_exit(SYN + ["--epochs", "1", "--quiet", "--out", str(path)])[0] == 0
    return path


def test_rerun_refuses_an_out_it_cannot_write(recorded, tmp_path):
    """Before rerunning (not through the run's own refusal, which adds a 'rerun ... failed' line)."""
    out = tmp_path / "no" / "new.json"
    assert cli_exit(["rerun", str(recorded), "--quiet", "--out", str(out)]) \
        == (2, "", f"python -m fedlib rerun: error: --out {out}: folder {tmp_path / 'no'} does not exist\n")


@pytest.mark.parametrize("edit", [lambda d: d.update(kind="bench"),
                                  lambda d: (d.update(history=[]), d["config"].update(rounds=0),
                                             d.pop("summary"))],  # a summary of 2 rounds: refused when read
                         ids=["bench", "empty history"])
def test_rerun_refuses_a_result_that_is_not_a_run(recorded, tmp_path, edit):
    path = edited_result(recorded, tmp_path, edit)
    assert _error(["rerun", str(path), "--quiet"]) == f"{path} is not a run result with a history"


def test_rerun_prints_what_it_reruns_the_commit_note_and_the_verdict(recorded, tmp_path, monkeypatch):
    monkeypatch.setenv("FEDLIB_GIT_COMMIT", "a" * 40)  # this checkout
    path = edited_result(recorded, tmp_path, lambda d: d["provenance"].update(git_commit="b" * 40, command="cmd",
                                                                             git_dirty=False))
    rc, out, err = cli_exit(["rerun", str(path)])
    assert (rc, err) == (0, "")  # no progress bar: stderr is not a terminal and no --progress
    assert out.splitlines() == [
        f"rerunning {path} (seed 0, commit {'b' * 40}, command: cmd)",
        f"note: the result was made at commit {'b' * 40}, this checkout is {'a' * 40}",
        "match: 2 rounds, initial, summary and config equal to 1e-12"]
    # made at this commit (or an unknown one): no note
    for commit in ("a" * 40, "unknown"):
        path = edited_result(recorded, tmp_path,
                       lambda d, commit=commit: d["provenance"].update(git_commit=commit, command="cmd",
                                                                       git_dirty=False))
        rc, out, err = cli_exit(["rerun", str(path)])
        assert rc == 0 and out.splitlines()[1:] == ["match: 2 rounds, initial, summary and config equal to 1e-12"]


def test_rerun_says_when_either_side_ran_uncommitted_code(recorded, tmp_path, monkeypatch):
    """rerun noted another commit but not uncommitted changes, on either side: a mismatch could come from code that no
    commit holds, and nothing said so."""
    import fedlib.results

    match = "match: 2 rounds, initial, summary and config equal to 1e-12"
    path = edited_result(recorded, tmp_path, lambda d: d["provenance"].update(git_commit="a" * 40, git_dirty=True))
    for here in (False, None, True):
        monkeypatch.setattr(fedlib.results, "git_commit", lambda root=None, here=here: ("a" * 40, here))
        rc, out, err = cli_exit(["rerun", str(path)])
        notes = ["note: the result was made with uncommitted changes to tracked files (provenance git_dirty), so its "
                 "code is not exactly its commit's"]
        if here:
            notes.append(f"note: this checkout has uncommitted changes to tracked files (git status), so the rerun's "
                         f"code is not exactly commit {'a' * 40}")
        assert (rc, err) == (0, "") and out.splitlines()[1:] == notes + [match], out


def test_rerun_keeps_the_new_result_with_out(recorded, tmp_path):
    new = tmp_path / "new.json"
    rc, out, err = cli_exit(["rerun", str(recorded), "--quiet", "--out", str(new)])
    assert (rc, err) == (0, "")
    assert out == f"match: 2 rounds, initial, summary and config equal to 1e-12; wrote {new}\n"
    assert json.loads(new.read_text())["config"] == json.loads(recorded.read_text())["config"]


def test_rerun_reports_flags_the_run_refuses_after_the_check(recorded, tmp_path, monkeypatch):
    """Were _check_argv to let a bad value through, run synthetic's argparse exit is still a bad input
    (exit 2, the recorded flags named), with the run's own message shown even under --quiet."""
    import fedlib.cli.rerun as rerun

    monkeypatch.setattr(rerun, "_check_argv", lambda argv, paths: None)
    path = edited_result(recorded, tmp_path, lambda d: d["config"].update(seed=-1))
    rc, out, err = cli_exit(["rerun", str(path), "--quiet"])
    assert rc == 2 and out == ""
    lines = err.splitlines()
    # run synthetic's own message, held back and shown
    assert "python -m fedlib run synthetic: error: argument --seed: must be >= 0, got -1" in lines, err
    assert lines[-1] == (
        "python -m fedlib rerun: error: the recorded config is invalid: run synthetic refused its flags (exit status "
        "2): --alpha=1.0 --beta=1.0 --num-clients=3 --data-seed=0 --num-classes=10 --algorithm=fednova --solver=sgd "
        "--lr=0.02 --lr-decay=constant --weight-decay=0.0 --server=plain --server-lr=1.0 --rounds=2 --epochs=1 "
        "--batch-size=20 --sampling=full --seed=-1 --engine=batched --backend=numpy --l2=0.0")


def test_run_synthetic_distributed_with_as_many_processes_as_clients_goes_on(monkeypatch):
    """3 processes for 3 clients pass the world-size check; outside torchrun (no RANK) the process group
    cannot start, which is the error then."""
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.delenv("RANK", raising=False)
    assert _error(SYN + ["--quiet", "--distributed"]) \
        .startswith("--distributed: WORLD_SIZE / RANK are not set; launch with torchrun")


def _interrupted_run(tmp_path, monkeypatch, commit):
    """A 3-round run stopped (Ctrl-C) right after its round-1 checkpoint, made at ``commit``."""
    import fedlib.checkpoint as ckpt

    real = ckpt.save_checkpoint

    def save_then_stop(path, **kw):
        real(path, **kw)
        raise KeyboardInterrupt

    monkeypatch.setenv("FEDLIB_GIT_COMMIT", commit)
    monkeypatch.setattr(ckpt, "save_checkpoint", save_then_stop)
    out = tmp_path / "r.json"
    argv = ["run", "synthetic", "--num-clients", "3", "--rounds", "3", "--quiet", "--out", str(out),
            "--checkpoint-every", "1"]
    rc, _, err = cli_exit(argv)
    assert (rc, err) == (130, f"python -m fedlib run synthetic: interrupted; checkpoint {out}.ckpt kept: run the "
                              "same command with --resume to continue from it\n")
    monkeypatch.setattr(ckpt, "save_checkpoint", real)
    return argv, out


def test_run_synthetic_resume_records_the_earlier_segment(tmp_path, monkeypatch):
    argv, out = _interrupted_run(tmp_path, monkeypatch, "a" * 40)
    rc, stdout, err = cli_exit(argv + ["--resume"])  # the same commit: no warning
    assert (rc, stdout, err) == (0, "", "")
    prov = json.loads(out.read_text())["provenance"]
    assert prov["resumed"]["from_round"] == 1
    assert [s["rounds"] for s in prov["resumed"]["earlier_segments"]] == [[0, 1]]
    assert prov["resumed"]["earlier_segments"][0]["git_commit"] == "a" * 40
    assert prov["resumed"]["earlier_segments"][0]["world_size"] == 1  # one process, not distributed
    from fedlib.checkpoint import load_checkpoint

    doc = load_checkpoint(f"{out}.ckpt", kind="synthetic")
    assert doc["round"] == 3 and [s["rounds"] for s in doc["extra"]["segments"]] == [[0, 1], [1, 3]]


def test_run_synthetic_resume_at_another_commit_warns(tmp_path, monkeypatch):
    argv, out = _interrupted_run(tmp_path, monkeypatch, "a" * 40)
    monkeypatch.setenv("FEDLIB_GIT_COMMIT", "b" * 40)
    rc, stdout, err = cli_exit(argv + ["--resume"])
    assert (rc, stdout) == (0, "")
    assert err == (f"warning: --resume: rounds before 1 were computed by commit(s) {'a' * 40}, this process runs "
                   f"{'b' * 40} (recorded in the result's provenance.resumed)\n")


def test_run_synthetic_summary_is_the_last_round_and_a_fresh_run_is_not_resumed(tmp_path):
    out = tmp_path / "r.json"
    assert cli_exit(SYN + ["--quiet", "--out", str(out)])[0] == 0
    doc = json.loads(out.read_text())
    last = doc["history"][-1]
    assert doc["summary"] == {"final_train_loss": last["train_loss"], "final_test_accuracy": last["test_accuracy"],
                              "rounds": 2}
    assert doc["history"][0]["train_loss"] != last["train_loss"]  # so that the last round is told apart
    assert "resumed" not in doc["provenance"]


def test_run_synthetic_progress_bar_shows_the_loss():
    import re

    rc, out, err = cli_exit(SYN + ["--progress", "--algorithm", "fedavg"])
    assert rc == 0
    assert re.search(r"fedavg: 100%.* 2/2 .*loss=\d+\.\d{4}\]", err), err  # desc, rounds done, the loss to 4 places
    assert out.startswith("fedavg: final training loss ")


# ----------------------------------------------------------------------------- bench synthetic
def test_bench_synthetic_parser_defaults_and_bounds():
    args = _parse(["bench", "synthetic"])
    assert (args.rounds, args.repeat, args.epochs, args.algorithm, args.data_seed, args.equal_sizes, args.with_eval,
            args.json, args.quiet) == (5, 3, "2", "fednova", 0, False, False, None, False)
    args = _parse(["bench", "synthetic", "--rounds", "1", "--repeat", "1", "--data-seed", "0"])
    assert (args.rounds, args.repeat, args.data_seed) == (1, 1, 0)
    for alg in ("fedavg", "fednova", "scaffold", "vrlsgd", "fednova-vr"):
        assert _parse(["bench", "synthetic", "--algorithm", alg]).algorithm == alg
    assert _error(["bench", "synthetic", "--rounds", "0"]) == "argument --rounds: must be >= 1, got 0"
    assert _error(["bench", "synthetic", "--repeat", "0"]) == "argument --repeat: must be >= 1, got 0"
    assert _error(["bench", "synthetic", "--data-seed", "-1"]) == "argument --data-seed: must be >= 0, got -1"
    assert _error(["bench", "synthetic", "--algorithm", "fedprox"]).startswith("argument --algorithm: invalid choice")


def test_bench_synthetic_help_starts_with_the_bench_module_summary():
    rc, out, _ = cli_exit(["bench", "synthetic", "--help"])
    text = " ".join(out.split())
    assert rc == 0
    assert "Speed of the batched engine against per-client Python loops (python -m fedlib bench synthetic)." in text
    assert "Run with 2 threads: OMP_NUM_THREADS=2" in text


def test_bench_synthetic_passes_its_flags_on(tmp_path, monkeypatch):
    import fedlib.bench as bench

    calls = []

    def fake(**kw):
        calls.append(kw)
        if kw["progress"] is not None:
            kw["progress"]("timing")
        return {"config": {"rounds": kw["rounds"]}, "results": {"speedup": 3.0}}

    monkeypatch.setattr(bench, "bench_synthetic", fake)
    monkeypatch.setattr(bench, "format_bench", lambda r: f"speedup {r['speedup']}")
    path = tmp_path / "b.json"
    rc, out, err = cli_exit(["bench", "synthetic", "--rounds", "2", "--repeat", "4", "--epochs", "1-3", "--algorithm",
                             "scaffold", "--data-seed", "7", "--equal-sizes", "--with-eval", "--json", str(path)])
    assert (rc, out, err) == (0, f"speedup 3.0\nwrote {path}\n", "timing\n")
    kw = dict(calls[0])
    assert callable(kw.pop("progress"))
    assert kw == dict(rounds=2, repeat=4, epochs="1-3", algorithm="scaffold", data_seed=7, equal_sizes=True,
                      evaluate=True)
    assert json.loads(path.read_text())["kind"] == "bench"
    rc, out, err = cli_exit(["bench", "synthetic", "--quiet"])
    assert (rc, out, err) == (0, "", "") and calls[1]["progress"] is None
    assert (calls[1]["equal_sizes"], calls[1]["evaluate"]) == (False, False)
    # an output path that cannot be written is refused before any timing
    assert _error(["bench", "synthetic", "--quiet", "--json", str(tmp_path)]) \
        == f"--json {tmp_path}: is a folder, give a file name like result.json"
    assert len(calls) == 2


# ----------------------------------------------------------------------------- unrecognised positionals
def test_an_unrecognised_positional_count_is_of_every_extra_value_not_the_options():
    """rerun takes 1 positional (result); given a.json b.json c.json --bogus it got 3 values (a.json, and
    b.json and c.json left over; --bogus is not a positional value): "got 3". Kills C11 (got = names + 1)
    and C16 (the extras counted as one). A word right after an unknown option is taken as its value (b.json --bogus
    d.json: "got 2"; it was "got 3" before the value was told apart, as for --outt x.json)."""
    assert _error(["rerun", "a.json", "b.json", "c.json", "--bogus"]) == (
        "unrecognized arguments: b.json c.json --bogus; python -m fedlib rerun takes 1 positional argument "
        "(result), got 3 (see --help)")
    assert _error(["rerun", "a.json", "b.json", "--bogus", "d.json"]) == (
        "unrecognized arguments: b.json --bogus d.json; python -m fedlib rerun takes 1 positional argument "
        "(result), got 2 (see --help)")


# ------------------------------------------------------------------------ mutants of 37f92d9..d2bb791
def test_two_mistyped_options_with_one_close_match_name_the_option_it_is_for():
    """Of two unknown options only ``--outt`` is close to a known one (``--out``; ``--bogus`` to none): the hint
    says which of the two it is for, ``did you mean --out for --outt?``; the short form ``did you mean --out?`` is
    for one unknown option alone (mutant CL7, ``len(guesses) == 1 and len(unknown) == 1`` ->
    ``len(guesses) == 1``: '--out?' read as the fix for --bogus too)."""
    assert _error(SYN + ["--outt", "x.json", "--bogus"]) == \
        "unrecognized arguments: --outt x.json --bogus; did you mean --out for --outt?"
    assert _error(SYN + ["--outt", "x.json"]) == "unrecognized arguments: --outt x.json; did you mean --out?"


@pytest.mark.parametrize("environ", [{"WORLD_SIZE": "two", "RANK": "0"}, {"WORLD_SIZE": "2"}],
                         ids=["WORLD_SIZE no integer", "no RANK"])
def test_the_torchrun_guard_leaves_a_world_size_it_cannot_read_or_no_torchrun_alone(monkeypatch, tmp_path, environ):
    """The guard against running a command once per rank reads ``WORLD_SIZE`` only under torchrun (``WORLD_SIZE``
    and ``RANK`` set), and counts one process for a ``WORLD_SIZE`` that is no integer (``_torchrun_world_size``:
    ``run synthetic --distributed`` names that one): ``rerun`` of a missing file then fails for the file, not for
    torchrun (mutants CL13, the unreadable WORLD_SIZE as 2, and CL14, WORLD_SIZE read without RANK: both refused
    the command with 'started by torchrun with WORLD_SIZE=2')."""
    monkeypatch.delenv("RANK", raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    missing = tmp_path / "no-such-result.json"
    rc, out, err = cli_exit(["rerun", str(missing)])
    assert (rc, out, err) == (2, "", f"python -m fedlib rerun: error: {missing}: file not found\n")


def test_rerun_of_a_result_on_a_numbered_gpu_without_a_gpu_says_so(recorded, tmp_path, monkeypatch):
    """``config.device`` ``cuda:1`` (``run synthetic --backend torch --device cuda:1``) is a GPU as ``cuda`` is: rerun
    on a machine where torch sees none stops before the run, naming the device as recorded (mutant RR1,
    ``device.startswith("cuda")`` -> ``device == "cuda"``: it printed 'rerunning ...' and the run's own
    '--device' error)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    path = edited_result(recorded, tmp_path, lambda d: (d["config"].update(backend="torch", device="cuda:1"),
                                                        d["provenance"].update(device="NVIDIA H100 80GB HBM3")))
    rc, out, err = cli_exit(["rerun", str(path)])
    assert (rc, out) == (2, "")
    assert err == (f"python -m fedlib rerun: error: {path} ran on the GPU (config.device cuda:1, NVIDIA H100 80GB "
                   f"HBM3), but torch sees no GPU on this machine; rerun it where torch sees a CUDA GPU\n")


def test_rerun_says_nothing_of_uncommitted_changes_it_does_not_know_of(recorded, tmp_path, monkeypatch):
    """``provenance.git_dirty`` is ``None`` when the result was made outside a git checkout (nothing known of its
    changes), as ``git_commit`` gives ``None`` here: rerun notes uncommitted changes only when one side says ``True``
    (mutant RR3, ``is True`` -> ``is not False``: a result of unknown state was said to be made with uncommitted
    changes)."""
    import fedlib.results

    monkeypatch.setattr(fedlib.results, "git_commit", lambda root=None: ("a" * 40, None))
    path = edited_result(recorded, tmp_path, lambda d: d["provenance"].update(git_commit="a" * 40, git_dirty=None))
    rc, out, err = cli_exit(["rerun", str(path)])
    assert (rc, err) == (0, "")
    assert out.splitlines()[1:] == ["match: 2 rounds, initial, summary and config equal to 1e-12"]


def _rounds(path):
    """A result file's history without its wall-clock times."""
    return [{k: v for k, v in rec.items() if k != "time_s"} for rec in json.loads(path.read_text())["history"]]


def test_a_constant_lr_resume_may_stop_at_the_round_its_checkpoint_has_done(tmp_path, monkeypatch):
    """A constant-lr run may be resumed with fewer ``--rounds`` than it was started with, down to the rounds its
    checkpoint has done (``give --rounds 2 or more``): a 4-round run interrupted after the checkpoint of round 2,
    resumed with ``--rounds 2``, writes the result of an uninterrupted 2-round run (mutant SY8, ``args.rounds <
    done`` -> ``<=``: refused, saying to give the very --rounds it was given)."""
    import fedlib.checkpoint
    from cliutil import ctrl_c_after_saving

    out, full = tmp_path / "r.json", tmp_path / "full.json"
    flags = ["--quiet", "--checkpoint-every", "2"]
    real_save = ctrl_c_after_saving(monkeypatch)
    assert cli_exit(SYN[:-1] + ["4", *flags, "--out", str(out)])[0] == 130
    monkeypatch.setattr(fedlib.checkpoint, "save_checkpoint", real_save)
    assert cli_exit(SYN[:-1] + ["2", *flags, "--out", str(out), "--resume"]) == (0, "", "")
    assert cli_exit(SYN[:-1] + ["2", *flags, "--out", str(full)])[0] == 0
    assert len(_rounds(out)) == 2 and _rounds(out) == _rounds(full)


def test_resuming_a_step_decay_checkpoint_with_constant_lr_and_other_rounds_gives_the_reason(tmp_path):
    """The hint on another ``--rounds`` is given when either side decays in steps: a step-decay checkpoint
    resumed with ``--lr-decay constant --rounds 8`` is refused naming both keys and why the rounds matter (mutant
    SY10, ``"step" in (args.lr_decay, saved lr_decay)`` -> ``args.lr_decay == "step"``: the reason only when the
    new command decays in steps)."""
    out = tmp_path / "s.json"
    flags = SYN[:-2] + ["--quiet", "--checkpoint-every", "2", "--out", str(out)]
    assert cli_exit(flags + ["--rounds", "4", "--lr-decay", "step"])[0] == 0
    err = _error(flags + ["--rounds", "8", "--resume"])
    assert err.startswith(f"--resume: checkpoint {out}.ckpt was written by another configuration; differing keys: ")
    assert "lr_decay (checkpoint 'step', now 'constant')" in err and "rounds (checkpoint 4, now 8)" in err
    assert err.endswith("; --lr-decay step divides the lr after 50% and 75% of --rounds, so a step-decay run's "
                        "rounds depend on its total: rerun it from round 0 with the new --rounds"), err



# ------------------------------------------ mutants of fb91484..97fac41 (cli/common.py: an output over a checkpoint)
def test_a_file_that_ends_with_the_checkpoint_footer_is_refused_by_the_flag_that_names_it(tmp_path):
    """_is_fedlib_checkpoint reads the file's last len(FOOTER) + 64 bytes: a file of exactly the footer and 64 hex
    digits ends with it (mutant CP2: ``<`` -> ``<=``, such a file let through), and the message names the flag
    given, --json or --profile (mutant CP6: '--out' for every flag). The footer less its first byte is one byte
    too short to be one."""
    from fedlib.checkpoint import FOOTER

    exact = tmp_path / "exact.bin"
    exact.write_bytes(FOOTER + b"0" * 64)
    for flag in ("--json", "--profile"):
        with pytest.raises(CLIError, match=f"^{flag} {exact}: is a fedlib checkpoint \\(written by --checkpoint-every"):
            common.check_output_path(exact, flag)
    short = tmp_path / "short.bin"
    short.write_bytes(FOOTER[1:] + b"0" * 64)
    assert common.check_output_path(short, "--json") is None


def test_a_file_that_cannot_be_read_is_not_taken_for_a_checkpoint(tmp_path, monkeypatch):
    """A file the check cannot open (another user's, write-only) is not known to be a checkpoint: the output is
    checked as any other, and its writable folder lets it through (mutant CP5: an unreadable file was refused as
    a fedlib checkpoint). ``open`` is made to fail (a chmod does not stop root from reading)."""
    result = tmp_path / "r.json"
    result.write_text("{}")

    def unreadable(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(common, "open", unreadable, raising=False)
    assert common._is_fedlib_checkpoint(result) is False
    assert common.check_output_path(result, "--out") is None


# ------------------------------------- mutants of c94cc84..457d1a7 (rerun --data, resume by the --data contents)
@pytest.fixture
def leaf_folder(tmp_path):
    """A 3-client LEAF folder at ``tmp_path / "leaf"`` (labels 0..9 of the generated data)."""
    from leafutil import three_client_leaf

    return three_client_leaf(tmp_path)


def test_rerun_data_keeps_the_other_recorded_data_flags(leaf_folder, tmp_path):
    """--data replaces the recorded ``--data`` flag alone: a LEAF run given ``--num-classes 12`` (the data's labels
    would give 10) and rerun from its moved copy is rerun with ``--num-classes=12`` and matches (mutant RD5, the flags
    after --data taken from ``at + 2``: --num-classes dropped, the rerun's 10 classes a MISMATCH)."""
    import shutil

    result = tmp_path / "r.json"
    assert cli_exit(["run", "synthetic", "--data", str(leaf_folder), "--num-classes", "12", "--rounds", "2",
                     "--quiet", "--out", str(result)])[0] == 0
    assert json.loads(result.read_text())["config"]["data"]["num_classes"] == 12
    moved = tmp_path / "moved"
    shutil.move(leaf_folder, moved)
    assert cli_exit(["rerun", str(result), "--data", str(moved), "--quiet"]) == (
        0, "match: 2 rounds, initial, summary and config equal to 1e-12\n", "")


def test_rerun_data_at_a_missing_path_is_named_as_the_data_flag(leaf_folder, tmp_path):
    """A --data copy that does not exist is refused by rerun before it runs anything, naming the flag the user typed
    (it was the run's own '--data: PATH: no such file or folder' after 'rerunning ...'), not said to be the result's
    config.data.source (mutant RD6, the --data flags not returned at once: the given path was checked as if recorded,
    'r.json read its data from /.../missing (config.data.source)'; since the up-front check, RD6 reaches that check
    only with a path that exists, which it then accepts: equivalent)."""
    result, missing = tmp_path / "r.json", tmp_path / "missing"
    assert cli_exit(["run", "synthetic", "--data", str(leaf_folder), "--rounds", "1", "--quiet",
                     "--out", str(result)])[0] == 0
    rc, out, err = cli_exit(["rerun", str(result), "--data", str(missing), "--quiet"])
    assert (rc, out) == (2, "")
    assert err == f"python -m fedlib rerun: error: --data {missing}: no such file or folder\n", err


def test_rerun_finds_a_recorded_source_under_the_home_folder(leaf_folder, tmp_path, monkeypatch):
    """A config.data.source recorded as ``~/leaf`` (hand-written, or from another user's home) is the file the run
    reads (``--data=~/leaf``, expanded by run synthetic): it exists, so rerun runs it and matches (mutant RD8, the
    existence check without ``expanduser``: '~/leaf' looked up as a folder named '~' and refused as missing)."""
    result = tmp_path / "r.json"
    assert cli_exit(["run", "synthetic", "--data", str(leaf_folder), "--rounds", "2", "--quiet",
                     "--out", str(result)])[0] == 0
    edited = edited_result(result, tmp_path, lambda d: d["config"]["data"].update(source="~/leaf"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)  # no folder named '~' here
    assert cli_exit(["rerun", str(edited), "--quiet"]) == (
        0, "match: 2 rounds, initial, summary and config equal to 1e-12\n", "")


def test_rerun_data_expands_the_home_folder_in_its_message(leaf_folder, tmp_path, monkeypatch):
    """``rerun --data=~/leaf`` (after '=', where the shell does not expand '~') names the file as expanded, as every
    path flag of fedlib does: the refusal for a result without config.data.sha256 names ``<home>/leaf`` (mutant RD17,
    ``type=Path``: it named '~/leaf')."""
    result = tmp_path / "r.json"
    assert cli_exit(["run", "synthetic", "--data", str(leaf_folder), "--rounds", "1", "--quiet",
                     "--out", str(result)])[0] == 0
    older = edited_result(result, tmp_path, lambda d: d["config"]["data"].pop("sha256"))
    monkeypatch.setenv("HOME", str(tmp_path))
    assert _error(["rerun", str(older), "--data=~/leaf"]) == (
        f"--data: {older} records no config.data.sha256 (an older result), so the contents of {leaf_folder} cannot "
        "be checked against its data; rerun it with the file at its config.data.source")


def test_compare_results_skips_the_data_source_only_with_data_elsewhere(tmp_path):
    """compare_results compares config.data.source (resolved) unless ``data_elsewhere`` (``rerun --data``), where the
    same sha256 is the same data (mutant RD14, the source skipped without data_elsewhere: two files at other paths
    matched); a config.data that is not an object on either side is a difference, not an AttributeError (mutant RD15,
    ``and`` -> ``or`` between the two sides' checks)."""
    from fedlib.cli.rerun import compare_results

    data = {"num_classes": 10, "sha256": "ab"}
    a = {"config": {"data": {"source": str(tmp_path / "a" / "leaf"), **data}}}
    b = {"config": {"data": {"source": str(tmp_path / "b" / "leaf"), **data}}}
    assert compare_results(a, b) == [f"config.data.source: '{tmp_path / 'a' / 'leaf'}' != '{tmp_path / 'b' / 'leaf'}'"]
    assert compare_results(a, b, data_elsewhere=True) == []
    null = {"config": {"data": None}}
    assert compare_results(null, b, data_elsewhere=True) == [f"config.data: None != {b['config']['data']!r}"]
    assert compare_results(b, null, data_elsewhere=True) == [f"config.data: {b['config']['data']!r} != None"]


# ------------------------------------- rerun's data SHA-256 before the run: mutants of cdf6ee0..fcc8b56 (a8a4c5d)
def test_rerun_leaves_data_it_cannot_read_to_the_run(tmp_path, capsys, monkeypatch):
    """rerun compares the --data file's SHA-256 with the result's before anything runs, but a file it cannot read
    (an OSError: no permission, a disk error) is left to the run, whose error says why after 'rerunning ...'.
    Mutant of cdf6ee0..fcc8b56: RD4 (the OSError not caught: rerun stopped on the early check's error, the run and
    its failure never named)."""
    import fedlib.data.leaf as leaf
    from fedlib.cli import main
    from leafutil import three_client_leaf

    data = three_client_leaf(tmp_path)
    original = tmp_path / "l.json"
    assert main(["run", "synthetic", "--data", str(data), "--rounds", "1", "--quiet", "--out", str(original)]) == 0

    def unreadable(file, **kw):
        raise PermissionError(13, "Permission denied", str(file))
    monkeypatch.setattr(leaf, "read_json", unreadable)
    capsys.readouterr()
    rc = main(["rerun", str(original)])
    out, err = capsys.readouterr()
    assert rc == 1 and out.startswith(f"rerunning {original} (seed 0, "), (out, err)
    assert "Permission denied" in err and "rerun: the rerun of the recorded config failed (exit status 1" in err, err


def test_the_output_folder_check_leaves_no_file_and_no_open_descriptor(tmp_path):
    """CC3, CC4: check_output_path (--out, --json, ...) and resolve_checkpoint (--checkpoint with
    --checkpoint-every) try the folder by creating a temporary file there: the file is removed and its descriptor
    closed, so neither a '.r.json.*.tmp' is left in the folder nor a descriptor open per check."""
    from fedlib.cli.common import check_output_path, resolve_checkpoint

    fds = len(os.listdir("/proc/self/fd"))
    for _ in range(3):
        check_output_path(tmp_path / "r.json")
        args = argparse.Namespace(checkpoint_every=1, checkpoint=tmp_path / "c.ckpt", resume=False, out=None, data=None)
        assert resolve_checkpoint(args) == tmp_path / "c.ckpt"
    assert list(tmp_path.iterdir()) == [] and len(os.listdir("/proc/self/fd")) == fds


def test_the_output_folder_refusal_names_the_reason_alone(tmp_path, monkeypatch):
    """CC6: a folder where no file can be created is refused with the system's reason alone (strerror), not the
    whole OSError with its temporary file's name ('[Errno 30] Read-only file system: .../.r.json.abcdefgh.tmp')."""
    import errno
    import tempfile

    from fedlib.cli.common import check_output_path

    def read_only(prefix, suffix, dir):
        raise OSError(errno.EROFS, "Read-only file system", os.path.join(dir, prefix + "abcdefgh" + suffix))

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    with pytest.raises(CLIError) as info:
        check_output_path(tmp_path / "r.json")
    assert str(info.value) == (f"--out {tmp_path / 'r.json'}: folder {tmp_path} is not writable: creating a file "
                               "there failed (Read-only file system)")


class _Stdout:
    """A text stream as ``fedlib.cli.main`` may find in ``sys.stdout``: its ``encoding`` and ``errors``, what
    ``reconfigure`` was asked (``fail``: the calls, by number from 1, that raise ValueError as a detached or closed
    stream's does), and what was written."""

    def __init__(self, encoding, errors="strict", fail=()):
        self.encoding, self.errors, self.fail, self.asked, self.text = encoding, errors, fail, [], []

    def write(self, text):
        self.text.append(text)
        return len(text)

    def flush(self):
        pass

    def reconfigure(self, *, errors):
        self.asked.append(errors)
        if len(self.asked) in self.fail:
            raise ValueError("underlying buffer has been detached")
        self.errors = errors


class _StdoutWithoutReconfigure(_Stdout):
    reconfigure = None


@pytest.mark.parametrize("stream, asked", [
    (_Stdout("x-no-such-codec"), ["backslashreplace", "strict"]),
    (_Stdout(None), []),
    (_Stdout("utf-16"), []),
    (_Stdout("ascii", errors="replace"), []),
    (_StdoutWithoutReconfigure("ascii"), []),
    (_Stdout("ascii", fail=(1,)), ["backslashreplace"]),
    (_Stdout("ascii", fail=(2,)), ["backslashreplace", "strict"])])
def test_the_stdout_error_handler_is_changed_only_for_a_strict_non_utf_stream_that_takes_it(monkeypatch, stream,
                                                                                           asked):
    """ES5-ES10 (0e9da1f..c5aa211): ``fedlib.cli.main`` sets stdout's error handler to backslashreplace while a
    command runs only where it is 'strict', the encoding is not a UTF one and the stream has ``reconfigure``, and
    puts 'strict' back after. An encoding Python does not know is taken for one that is not UTF (reconfigured;
    ES7 left it strict); a stream without an encoding for a UTF-8 one (left alone; ES6 took it for ASCII); a
    UTF-16 one is a UTF one (left alone; ES5 read only 'utf-8' as UTF); one already escaping, or without
    ``reconfigure``, is left alone (ES8: an AttributeError); a stream whose reconfigure fails, at the start (ES9) or
    at the end (ES10: a pipe closed by then), runs the command as usual: exit 0, the help printed."""
    import sys

    from fedlib.cli import main

    monkeypatch.setattr(sys, "stdout", stream)
    with pytest.raises(SystemExit) as stop:
        main(["rerun", "--help"])
    assert stop.value.code == 0 and stream.asked == asked
    assert "".join(stream.text).startswith("usage: python -m fedlib rerun")


def test_python_m_fedlib_escapes_on_an_ascii_stdout_without_argv_too(monkeypatch):
    """ES11 (0e9da1f..c5aa211): ``python -m fedlib`` calls ``main()`` without argv (``sys.argv[1:]``); its stdout,
    in ASCII under ``PYTHONIOENCODING=ascii``, gets the em dash of ``rerun --help`` as '\\u2014' too (the mutant
    escaped only for an explicit argv: ``python -m fedlib rerun --help`` failed with a UnicodeEncodeError
    traceback), and its error handler is 'strict' again after."""
    import io
    import sys

    from fedlib.cli import main

    stream = io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors="strict")
    monkeypatch.setattr(sys, "stdout", stream)
    monkeypatch.setattr(sys, "argv", ["fedlib", "rerun", "--help"])
    with pytest.raises(SystemExit) as stop:
        main()
    stream.flush()
    assert stop.value.code == 0 and stream.errors == "strict"
    assert "\\u2014" in stream.buffer.getvalue().decode("ascii")


def test_an_out_file_rewritten_with_the_same_size_counts_as_written(tmp_path):
    """WR4 (0e9da1f..c5aa211): rerun tells an --out file its run wrote from one it left by the file's device, inode,
    modification time and size (``_file_state``): a result rewritten over an earlier one of the same size (a rerun
    repeated into the same --out: the same history, times of as many digits) is atomic_write's new file, another
    inode. The mutant compared the size alone, and its Ctrl-C after such a run said 'interrupted (nothing written)'."""
    from fedlib._io import atomic_write
    from fedlib.cli.rerun import _file_state

    out = tmp_path / "new.json"
    assert _file_state(out) is None and _file_state(None) is None
    atomic_write(out, '{"history": [1.5]}')
    before = _file_state(out)
    atomic_write(out, '{"history": [2.5]}')
    assert _file_state(out) != before and _file_state(out) == _file_state(out)


_SMALL_RUN = ["run", "synthetic", "--num-clients", "3", "--rounds", "3", "--quiet"]


def test_a_checkpoint_kept_in_a_folder_read_only_by_now_is_still_named(tmp_path, monkeypatch, capsys):
    """RC3 (0e9da1f..c5aa211): the folder of a run's checkpoint turns read-only (``os.access`` says so) after round
    1's checkpoint is saved, then the run is interrupted: the handler names the checkpoint kept. It looks the path
    up without the folder checks (``for_writing=False``); the mutant kept the ``os.access`` check for any
    --checkpoint-every, so it said 'interrupted (nothing written)' with the checkpoint on disk."""
    import fedlib.checkpoint
    from fedlib.cli import main

    out = tmp_path / "r.json"
    real_save, real_access = fedlib.checkpoint.save_checkpoint, os.access

    def save_then_stop(*args, **kwargs):
        real_save(*args, **kwargs)
        monkeypatch.setattr(os, "access", lambda path, mode, **kw: (Path(path) != tmp_path or mode != os.W_OK)
                            and real_access(path, mode, **kw))
        raise KeyboardInterrupt

    monkeypatch.setattr(fedlib.checkpoint, "save_checkpoint", save_then_stop)
    assert main(_SMALL_RUN + ["--checkpoint-every", "1", "--out", str(out)]) == 130
    ckpt = Path(str(out) + ".ckpt")
    assert ckpt.is_file() and f"checkpoint {ckpt} kept" in capsys.readouterr().err


def test_a_resume_without_checkpoint_every_reads_from_a_folder_that_takes_no_file(tmp_path, monkeypatch):
    """RC2 (0e9da1f..c5aa211): ``--resume`` without --checkpoint-every only reads the checkpoint, so its folder need
    not take a new file (full, or read-only: here the creation test refused for --checkpoint); the run resumes,
    its --out in another folder. The mutant ran the folder checks for any command that names a checkpoint
    (``writes = for_writing``) and refused the resume: '--checkpoint ...: folder ... is not writable'."""
    import fedlib.checkpoint
    from cliutil import ctrl_c_after_saving
    from fedlib.cli import main
    from fedlib.results import read_result

    (tmp_path / "ckpt").mkdir()
    (tmp_path / "out").mkdir()
    ckpt, out = tmp_path / "ckpt" / "run.ckpt", tmp_path / "out" / "r.json"
    real_save = ctrl_c_after_saving(monkeypatch)
    argv = _SMALL_RUN + ["--checkpoint", str(ckpt), "--out", str(out)]
    assert main(argv + ["--checkpoint-every", "1"]) == 130 and ckpt.is_file()
    monkeypatch.setattr(fedlib.checkpoint, "save_checkpoint", real_save)
    real_check = common._check_can_create

    def full(path, folder, flag):
        if flag == "--checkpoint":
            raise CLIError(f"{flag} {path}: folder {folder} is not writable: creating a file there failed "
                           "(No space left on device)")
        real_check(path, folder, flag)

    monkeypatch.setattr(common, "_check_can_create", full)
    with pytest.raises(CLIError, match="No space left"):
        common.resolve_checkpoint(argparse.Namespace(checkpoint_every=1, checkpoint=ckpt, resume=False, out=out,
                                                     data=None))
    assert main(argv + ["--resume"]) == 0
    assert len(read_result(out)["history"]) == 3


# ----------------------------------------------------------------------------- main: a reader that went away
def _run_into_a_closed_pipe(handler_body: str, *, read_first: bool) -> tuple:
    """``(exit status, stderr)`` of ``python -m fedlib run cifar10`` in a new interpreter (stdout buffered: no
    PYTHONUNBUFFERED, as from a shell) whose handler, ``run_cifar10``, runs ``handler_body`` (given ``args``),
    its stdout a pipe of this process: the test reads the first line (``read_first``) and closes its end, and only
    then closes the child's stdin, for a handler that waits for that (``sys.stdin.read()``)."""
    import subprocess
    import sys
    import textwrap

    code = ("import sys\nimport fedlib.cli as cli\nimport fedlib.cli.cifar10 as c10\n\n"
            "def run_cifar10(args):\n" + textwrap.indent(textwrap.dedent(handler_body), "    ") + "\n"
            "c10.run_cifar10 = run_cifar10\nsys.exit(cli.main(['run', 'cifar10']))\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    try:
        if read_first:
            proc.stdout.readline()
        proc.stdout.close()  # the reader goes away (`| head -1`)
        proc.stdin.close()
        err = proc.stderr.read().decode()
        return proc.wait(timeout=120), err
    finally:
        proc.kill()
        proc.wait()


def test_lines_flushed_into_a_closed_pipe_exit_141_quietly():
    """A command printing line by line with ``flush=True`` (``info``, table1's log) into a pipe whose reader went
    away exits 141 with nothing on stderr. The line that failed stays in stdout's buffer; main's BrokenPipeError
    handler points stdout at os.devnull so that Python's flush at exit does not fail again. Without that (the dup2
    and the ``sys.stdout`` swap both dropped: each alone is enough) Python printed 'Exception ignored in:
    <_io.TextIOWrapper name='<stdout>' ...> BrokenPipeError' and exited 120. test_table1.py's closed-pipe test did
    not show it: table1 --dry-run prints without flushing, so its failed write left nothing buffered, and the
    pipeline's status it reads is head's, not Python's. 20,000 lines of 70 bytes are past any pipe's buffer (1 MiB
    at most by default), so the child still writes after this test has closed its end."""
    status, err = _run_into_a_closed_pipe("""
        for i in range(20000):
            print(f"line {i:05d}" + " x" * 30, flush=True)
        return 0
    """, read_first=True)
    assert (status, err) == (141, "")


def test_output_still_buffered_when_the_reader_has_gone_exits_141_quietly():
    """Output that a command leaves in stdout's buffer (less than its 8 KiB, not flushed) when the pipe's reader
    has gone fails in main's own ``sys.stdout.flush()``, inside its BrokenPipeError handler: exit 141, stderr
    empty. Without that flush the command returned 0 and Python's flush at exit failed: 'Exception ignored ...
    BrokenPipeError', exit 120; no test wrote after the reader had gone (table1 --dry-run's closed-pipe test fails
    while printing, before it). The handler here waits for this test to close its end of the pipe (stdin's end
    of file comes after), so the order is fixed, not a race."""
    status, err = _run_into_a_closed_pipe("""
        sys.stdin.read()  # the reader has gone by now
        print("a few lines, still buffered")
        return 0
    """, read_first=False)
    assert (status, err) == (141, "")


def test_run_synthetic_closes_its_progress_bar_before_the_error_of_a_diverged_run():
    """A run that diverges under --progress closes its bar (its last line ends) before main prints the error, so
    the error starts a line of its own. Mutant: the ``finally``'s ``bar.close()`` dropped: the error was written
    after the bar's last carriage return, on the bar's line (no test ran a failing run with --progress)."""
    # with an L2 penalty a huge lr blows up geometrically (test_cli_synthetic.py's divergence test)
    rc, out, err = cli_exit([*SYN[:-1], "20", "--lr", "1e6", "--l2", "0.001", "--progress"])
    assert (rc, out) == (2, "")
    bar, error = err.rsplit("\n", 2)[:2]
    assert "/20" in bar  # the bar's last state, then the line it ends
    assert error.startswith("python -m fedlib run synthetic: error: ") and "diverged in round" in error, err

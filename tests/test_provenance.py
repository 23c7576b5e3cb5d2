"""Provenance (fedlib.results): the commit is the one the run started with (a change or a tree made dirty
during the run is flagged), a checkout whose commit git cannot read is "unknown" with a warning saying why (a tree
without .git quietly), FEDLIB_GIT_COMMIT must be a full commit, the wall time comes from a clock that
cannot go back, and the recorded command is the one that made the result: shell-quoted, also for
``fedlib.cli.main(argv)``, ``rerun`` and the console script, with the folder a relative command ran in."""
from __future__ import annotations

import json
import shlex
import sys
import warnings
from pathlib import Path

import pytest

import fedlib.results
from fedlib.cli import main
from fedlib.results import RunClock, make_provenance, make_result, recorded_command


RUN = ["run", "synthetic", "--rounds", "2", "--num-clients", "3", "--quiet"]


def _prov(path):
    return json.loads(Path(path).read_text())["provenance"]


@pytest.fixture
def fake_git(monkeypatch):
    """``git_commit`` answers ``state["git"]``; the test changes it mid-run."""
    state = {"git": ("a" * 40, False)}
    monkeypatch.setattr(fedlib.results, "git_commit", lambda root=None: state["git"])
    return state


def test_run_clock_records_the_commit_of_the_start_and_flags_a_change(fake_git):
    with RunClock() as clock:
        fake_git["git"] = ("b" * 40, True)  # a commit (and an edit) while the run runs
    with pytest.warns(UserWarning, match="changed during the run.*a{40}.*b{40}"):
        prov = clock.provenance("cpu", command="cmd")
    assert (prov["git_commit"], prov["git_dirty"]) == ("a" * 40, False)
    assert prov["git_changed_during_run"] is True
    assert (prov["git_commit_end"], prov["git_dirty_end"]) == ("b" * 40, True)
    make_result({}, [], prov)  # still a valid record


def test_run_clock_flags_a_tree_made_dirty_during_the_run(fake_git):
    with RunClock() as clock:
        fake_git["git"] = ("a" * 40, True)
    with pytest.warns(UserWarning, match="changed during the run"):
        prov = clock.provenance()
    assert prov["git_dirty"] is False and prov["git_dirty_end"] is True and prov["git_changed_during_run"]


def test_run_clock_unchanged_checkout_no_warning(fake_git):
    with RunClock() as clock:
        pass
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prov = clock.provenance()
    assert prov["git_commit"] == "a" * 40 and prov["git_changed_during_run"] is False
    assert "git_commit_end" not in prov and "git_dirty_end" not in prov


def test_make_provenance_without_a_start_keeps_its_old_record(fake_git):
    prov = make_provenance(0.0, 1.0, "cpu", "cmd")
    assert prov["git_commit"] == "a" * 40 and "git_changed_during_run" not in prov
    with pytest.warns(UserWarning):
        prov = make_provenance(0.0, 1.0, command="cmd", git_start=("c" * 40, None))
    assert prov["git_commit"] == "c" * 40 and prov["git_commit_end"] == "a" * 40


def test_main_with_argv_records_that_command_quoted(tmp_path):
    out = tmp_path / "a b.json"
    argv = RUN + ["--out", str(out)]
    assert main(argv) == 0
    command = _prov(out)["command"]
    assert command == shlex.join(["python", "-m", "fedlib", *argv])
    assert shlex.split(command)[3:] == argv  # pastes back into a shell as the same arguments
    assert fedlib.results._command() != command  # the block ended with main


def test_rerun_records_the_run_it_performed(tmp_path):
    first = tmp_path / "r.json"
    assert main(RUN + ["--out", str(first)]) == 0
    again = tmp_path / "rr.json"
    assert main(["rerun", str(first), "--out", str(again), "--quiet"]) == 0
    argv = shlex.split(_prov(again)["command"])
    assert argv[:5] == ["python", "-m", "fedlib", "run", "synthetic"] and "rerun" not in argv
    assert argv[argv.index("--out") + 1] == str(again)


def test_main_without_argv_records_sys_argv(tmp_path, monkeypatch):
    out = tmp_path / "x y.json"
    monkeypatch.setattr(sys, "argv", ["/somewhere/fedlib/__main__.py", *RUN, "--out", str(out)])
    assert main() == 0
    assert _prov(out)["command"] == shlex.join(["python", "-m", "fedlib", *RUN, "--out", str(out)])


def test_recorded_command_reads_an_iterator_of_arguments_once():
    """Was: recorded_command(iter([...])) (or a generator, map) used the arguments up in its check that each is a
    string, and recorded the command '' (a provenance make_result then refused as 'provenance.command must be a
    non-empty string'); None raised "'NoneType' object is not iterable"."""
    with recorded_command(a for a in ["python", "-m", "fedlib", "run", "my run"]) as command:
        assert command == "python -m fedlib run 'my run'" == make_provenance(0.0, 1.0)["command"]
    for bad in (None, 3, b"python"):
        with pytest.raises(TypeError, match=r"^recorded_command needs a list of strings"):
            with recorded_command(bad):
                pass


def test_command_is_shell_quoted_and_recorded_command_nests(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/x/fedlib/__main__.py", "run", "synthetic", "--out", "a b.json"])
    plain = "python -m fedlib run synthetic --out 'a b.json'"
    assert fedlib.results._command() == plain
    with recorded_command(["python", "-m", "fedlib", "rerun", "r.json"]) as outer:
        assert fedlib.results._command() == outer == "python -m fedlib rerun r.json"
        with recorded_command(["python", "-m", "fedlib", "run", "synthetic", "--out", "$HOME"]):
            assert fedlib.results._command() == "python -m fedlib run synthetic --out '$HOME'"
        assert fedlib.results._command() == outer
    assert fedlib.results._command() == plain
    with pytest.raises(TypeError, match="list of strings"):
        with recorded_command("python -m fedlib"):
            pass


def test_fedlib_git_commit_must_be_a_full_commit(monkeypatch):
    monkeypatch.setenv("FEDLIB_GIT_COMMIT", "not a sha; rm -rf")
    with pytest.raises(ValueError, match="FEDLIB_GIT_COMMIT must be a full 40-hex-digit commit"):
        fedlib.results.git_commit()
    monkeypatch.setenv("FEDLIB_GIT_COMMIT", "AB" * 20)
    assert fedlib.results.git_commit() == ("ab" * 20, None)


def test_wall_time_comes_from_a_clock_that_cannot_go_back(fake_git, monkeypatch):
    """The wall clock set back by an hour during the run: the duration is still the run's, not negative."""
    import time as real_time

    wall = real_time.time
    with RunClock() as clock:
        monkeypatch.setattr(real_time, "time", lambda: wall() - 3600.0)
    monkeypatch.setattr(real_time, "time", wall)
    prov = clock.provenance("cpu", command="c")
    assert 0 <= prov["wall_time_s"] < 5
    make_result({}, [], prov)


TINY = ["run", "synthetic", "--rounds", "1", "--num-clients", "4", "--quiet"]


def test_provenance_records_the_folder_a_relative_command_ran_in(tmp_path, monkeypatch):
    # `--out r.json` / `--data .` in the recorded command could not be rerun as written from
    # anywhere else: the result did not say which folder they were relative to
    import json
    import shlex

    from fedlib.results import read_result

    monkeypatch.chdir(tmp_path)
    assert main([*TINY, "--out", "r.json"]) == 0
    prov = read_result(tmp_path / "r.json")["provenance"]
    assert prov["cwd"] == str(tmp_path)
    assert shlex.split(prov["command"])[-1] == "r.json"
    assert json.loads((tmp_path / "r.json").read_text())["provenance"]["cwd"] == str(tmp_path)


def test_the_console_script_is_recorded_as_python_m_fedlib(monkeypatch):
    # `fedlib run synthetic ...` (the [project.scripts] entry point) was recorded as
    # 'python /abs/venv/bin/fedlib run synthetic ...', not as the documented 'python -m fedlib ...'
    import sys

    from fedlib.results import make_provenance

    monkeypatch.setattr(sys, "argv", ["/opt/my venv/bin/fedlib", "run", "synthetic", "--out", "a b.json"])
    assert make_provenance(0.0, 1.0)["command"] == "python -m fedlib run synthetic --out 'a b.json'"


def test_cli_prints_a_checkout_changed_during_the_run_as_one_warning_line(monkeypatch, tmp_path, capsys):
    """``run synthetic`` while a commit lands: the notice printed as Python's raw warning, with fedlib's file path,
    line number, 'UserWarning' and the source line (``warnings.warn(...``); now ``warning: the git checkout changed
    during the run: ...`` on one line, as the CLI's other notices. Warnings from outside fedlib keep Python's
    format (file, line, category)."""
    from fedlib.cli import main

    state = {"git": ("a" * 40, False)}
    monkeypatch.setattr(fedlib.results, "git_commit", lambda root=None: state["git"])
    leave = fedlib.results.RunClock.__exit__

    def exit_after_a_commit(clock, *exc):  # the commit lands while the run runs
        state["git"] = ("b" * 40, False)
        return leave(clock, *exc)
    monkeypatch.setattr(fedlib.results.RunClock, "__exit__", exit_after_a_commit)
    capsys.readouterr()
    assert main(["run", "synthetic", "--num-clients", "2", "--rounds", "1", "--quiet", "--out",
                 str(tmp_path / "r.json")]) == 0
    err = capsys.readouterr().err
    assert err == (f"warning: the git checkout changed during the run: commit {'a' * 40} (dirty: False) at the "
                   f"start, {'b' * 40} (dirty: False) at the end; the result records the start and marks "
                   "git_changed_during_run\n"), err
    from fedlib.cli import _one_line_warnings

    shown = []
    show = _one_line_warnings(lambda *a: shown.append(a))
    show(UserWarning("x"), UserWarning, "/elsewhere/numpy/core.py", 3)
    assert shown == [(shown[0][0], UserWarning, "/elsewhere/numpy/core.py", 3, None, None)]


def _checkout_git_cannot_read(monkeypatch, tmp_path, git_script):
    """A checkout (a folder with ``.git``) that ``fedlib.results`` reads the commit of, with ``PATH`` holding only
    ``git_script`` as ``git`` (no git at all where it is None); the warnings given so far forgotten."""
    import os

    (tmp_path / "checkout" / ".git").mkdir(parents=True)
    (tmp_path / "bin").mkdir()
    if git_script is not None:
        git = tmp_path / "bin" / "git"
        git.write_text(git_script)
        git.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.delenv("FEDLIB_GIT_COMMIT", raising=False)
    monkeypatch.setattr(fedlib.results, "_repo_root", lambda: tmp_path / "checkout")
    monkeypatch.setattr(fedlib.results, "_GIT_WARNED", set(), raising=False)
    assert os.environ["PATH"] == str(tmp_path / "bin")
    return tmp_path / "checkout"


@pytest.mark.parametrize("git_script, reason", [
    (None, "no git command on PATH"),
    ("#!/bin/sh\necho \"fatal: detected dubious ownership in repository at '$2'\" >&2\necho hint >&2\nexit 128\n",
     "git exited 128: fatal: detected dubious ownership in repository at '{root}'")])
def test_a_checkout_whose_commit_git_cannot_read_is_recorded_unknown_with_one_warning(monkeypatch, tmp_path, capsys,
                                                                                    git_script, reason):
    """A git checkout on a machine without git on PATH, or one git refuses (a folder of another owner: 'detected
    dubious ownership'), was recorded ``git_commit: "unknown"`` with no word: the user, in a checkout, could not
    tell why the result names no commit. Now ``run synthetic`` says why on one line, once (the commit is read at
    the run's start and end), and still records "unknown"."""
    root = _checkout_git_cannot_read(monkeypatch, tmp_path, git_script)
    out = tmp_path / "r.json"
    capsys.readouterr()
    assert main(["run", "synthetic", "--rounds", "1", "--num-clients", "2", "--quiet", "--out", str(out)]) == 0
    assert capsys.readouterr().err == (f"warning: {root} is a git checkout, but its commit cannot be read "
                                       f"({reason.format(root=root)}): results record git_commit 'unknown'; "
                                       "FEDLIB_GIT_COMMIT=<40-hex-digit commit> names it\n")
    assert (_prov(out)["git_commit"], _prov(out)["git_dirty"]) == ("unknown", None)


def test_a_folder_without_git_is_unknown_without_a_warning(monkeypatch, tmp_path):
    """A tree without ``.git`` (a downloaded zip or tarball) is "unknown" quietly: there is no checkout to read."""
    _checkout_git_cannot_read(monkeypatch, tmp_path, None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fedlib.results.git_commit(tmp_path / "bin") == ("unknown", None)

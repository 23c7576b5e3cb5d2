"""Provenance and file audit: the commit is the one the run started with, the recorded
command is the one that made the result (shell-quoted, also for ``fedlib.cli.main(argv)``
and ``rerun``), written files get the umask's mode, and Ctrl-C names a kept checkpoint."""
from __future__ import annotations

import json
import os
import shlex
import stat
import sys
import warnings
from pathlib import Path

import pytest

import fedlib.checkpoint
import fedlib.engines.batched
import fedlib.results
from fedlib._io import atomic_write
from fedlib.cli import main
from fedlib.results import RunClock, make_provenance, make_result, read_result, recorded_command, write_result

RUN = ["run", "synthetic", "--rounds", "2", "--num-clients", "3", "--quiet"]
posix_only = pytest.mark.skipif(os.name != "posix", reason="file modes and umask are POSIX")


def _prov(path):
    return json.loads(Path(path).read_text())["provenance"]


@pytest.fixture
def fake_git(monkeypatch):
    """``git_commit`` answers ``state["git"]``; the test changes it mid-run."""
    state = {"git": ("a" * 40, False)}
    monkeypatch.setattr(fedlib.results, "git_commit", lambda root=None: state["git"])
    return state


@pytest.fixture
def umask():
    """Set the process umask for one test; restored afterwards."""
    old = os.umask(0o022)
    os.umask(old)

    def set_(mask):
        os.umask(mask)

    yield set_
    os.umask(old)


# ----------------------------------------------------------------------------- 1: commit at the start
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


# ----------------------------------------------------------------------------- 2, 3: the command
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


# ----------------------------------------------------------------------------- 4: file modes
@posix_only
@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_new_files_get_the_umask_mode(tmp_path, umask, mask, mode):
    umask(mask)
    path = atomic_write(tmp_path / "f.txt", "x")
    assert stat.S_IMODE(path.stat().st_mode) == mode
    result = write_result(tmp_path / "r.json", make_result({}, [], make_provenance(0.0, 1.0, command="c")))
    assert stat.S_IMODE(result.stat().st_mode) == mode
    assert os.umask(mask) == mask  # the write left the umask as it was


@posix_only
def test_overwrite_keeps_the_existing_mode(tmp_path, umask):
    umask(0o022)
    path = tmp_path / "f.txt"
    path.write_text("old")
    path.chmod(0o640)
    atomic_write(path, "new")
    assert path.read_text() == "new" and stat.S_IMODE(path.stat().st_mode) == 0o640


# ----------------------------------------------------------------------------- 5: Ctrl-C
def test_ctrl_c_after_a_checkpoint_names_it_and_resume_finishes(tmp_path, monkeypatch, capsys, umask):
    umask(0o022)
    out = tmp_path / "r.json"
    argv = RUN[:2] + ["--rounds", "3", "--num-clients", "3", "--quiet", "--checkpoint-every", "1",
                      "--out", str(out)]
    real_save = fedlib.checkpoint.save_checkpoint

    def save_then_interrupt(*args, **kwargs):
        real_save(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(fedlib.checkpoint, "save_checkpoint", save_then_interrupt)
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


@pytest.mark.parametrize("extra", [[], ["--checkpoint-every", "1"]])
def test_ctrl_c_before_any_file_says_nothing_written(tmp_path, monkeypatch, capsys, extra):
    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(fedlib.engines.batched, "run_engine", interrupt)
    out = tmp_path / "r.json"
    assert main(RUN + ["--out", str(out), *extra]) == 130
    assert "interrupted (nothing written)" in capsys.readouterr().err
    assert not out.exists() and not Path(str(out) + ".ckpt").exists()

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


# ----------------------------------------------------------------------------- 6: what a result may hold
def _good(rounds=3):
    history = [{"round": r, "train_loss": 1.0 / (r + 1), "test_accuracy": None, "tau_eff": 2.0, "chi2": 0.0,
                "local_steps": [2, 2]} for r in range(rounds)]
    return make_result({"rounds": rounds}, history, make_provenance(0.0, 1.0, command="python -m fedlib run"))


def _broken(edit):
    doc = json.loads(json.dumps(_good()))
    edit(doc)
    return doc


BAD_RESULTS = [
    ("NaN in the history", lambda d: d["history"][2].update(train_loss=float("nan")), r"history\[2\].train_loss"),
    ("Infinity in the summary", lambda d: d.update(summary={"best": float("inf")}), r"summary.best: inf"),
    ("a round missing", lambda d: (d["history"].pop(1), d["config"].update(rounds=2)), r"history\[1\].round is 2"),
    ("rounds from 5", lambda d: [h.update(round=h["round"] + 5) for h in d["history"]], r"history\[0\].round is 5"),
    ("fewer records than rounds", lambda d: d["config"].update(rounds=4), "config.rounds is 4 but the history has 3"),
    ("negative wall time", lambda d: d["provenance"].update(wall_time_s=-1.0), "wall_time_s must be a number >= 0"),
    ("wall time null", lambda d: d["provenance"].update(wall_time_s=None), "wall_time_s"),
    ("a short commit", lambda d: d["provenance"].update(git_commit="abc123"), "git_commit must be a 40-hex"),
    ("a commit of other letters", lambda d: d["provenance"].update(git_commit="z" * 40), "git_commit"),
    ("no device", lambda d: d["provenance"].update(device=""), "provenance.device"),
    ("no command", lambda d: d["provenance"].update(command=None), "provenance.command"),
    ("finished before started", lambda d: d["provenance"].update(started_utc="2030-01-01T00:00:00Z"),
     "finished_utc .* is before started_utc"),
    ("a time that is no time", lambda d: d["provenance"].update(started_utc="yesterday"), "ISO 8601"),
    ("negative local steps", lambda d: d["history"][0].update(local_steps=[-3, 2]), "local_steps"),
    ("summary a list", lambda d: d.update(summary=[1, 2]), "'summary' must be an object"),
    ("initial a string", lambda d: d.update(initial="x"), "'initial' must be an object"),
]


@pytest.mark.parametrize("name,edit,message", BAD_RESULTS, ids=[b[0] for b in BAD_RESULTS])
def test_read_result_refuses_what_the_book_must_not_show(tmp_path, name, edit, message):
    """Each was read without a word before (found by an audit): a NaN accuracy or a history with rounds cut out
    reached `table1 --summary` and the chapter's table. The file is written as json.dumps writes (NaN allowed)."""
    path = tmp_path / "r.json"
    path.write_text(json.dumps(_broken(edit)))
    with pytest.raises(ValueError, match=message) as info:
        read_result(path)
    assert str(info.value).startswith(str(path))


def test_the_committed_results_pass_the_checks():
    root = Path(__file__).resolve().parents[1] / "data"
    files = sorted(root.rglob("*.json"))
    assert len(files) >= 10
    for f in files:
        read_result(f)


def test_deep_nesting_is_a_value_error(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(ValueError, match="nested too deeply"):
        read_result(path)


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


@posix_only
def test_atomic_write_follows_a_link_and_refuses_a_fifo(tmp_path):
    target = tmp_path / "run42.json"
    target.write_text("old")
    link = tmp_path / "latest.json"
    link.symlink_to(target.name)
    atomic_write(link, "new")
    assert link.is_symlink() and target.read_text() == "new"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        atomic_write(fifo, "x")
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_save_figure_interrupted_keeps_the_old_pair(tmp_path, monkeypatch):
    """The SVG failing to render (Ctrl-C, a full disk) left a truncated SVG and a new PNG next to it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fedlib import plotting

    monkeypatch.setattr(plotting, "figures_dir", lambda: tmp_path)
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    png, svg = plotting.save_figure(fig, "f")
    old = (png.read_bytes(), svg.read_bytes())
    ax.plot([1, 0])
    real = fig.savefig

    def fail_on_svg(buf, format=None, **kw):
        if format == "svg":
            raise KeyboardInterrupt
        return real(buf, format=format, **kw)

    monkeypatch.setattr(fig, "savefig", fail_on_svg)
    with pytest.raises(KeyboardInterrupt):
        plotting.save_figure(fig, "f")
    assert (png.read_bytes(), svg.read_bytes()) == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.png", "f.svg"]
    plt.close(fig)


# ----------------------------------------------------------------------------- 7: refused before any work
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


def test_resume_takes_the_same_data_file_however_its_path_is_typed(tmp_path, monkeypatch, capsys):
    """--resume compared data.name, the --data path as typed: the same LEAF file given as an absolute
    path (or from another folder) was refused as 'another configuration'. data.source (resolved)
    identifies the file; another file is still refused."""
    from fedlib.data.leaf import save_leaf
    from fedlib.data.synthetic import synthetic

    save_leaf(synthetic(num_clients=3, seed=0), tmp_path / "leaf.json", drop_test=True)
    save_leaf(synthetic(num_clients=3, seed=1), tmp_path / "other.json", drop_test=True)
    monkeypatch.chdir(tmp_path)
    argv = ["run", "synthetic", "--rounds", "3", "--quiet", "--checkpoint-every", "1", "--out", "r.json"]
    real_save = fedlib.checkpoint.save_checkpoint

    def save_then_interrupt(*args, **kwargs):
        real_save(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(fedlib.checkpoint, "save_checkpoint", save_then_interrupt)
    assert main(argv + ["--data", "leaf.json"]) == 130
    monkeypatch.setattr(fedlib.checkpoint, "save_checkpoint", real_save)
    capsys.readouterr()
    assert main(argv + ["--data", str(tmp_path / "other.json"), "--resume"]) == 2
    assert "data.source (checkpoint" in capsys.readouterr().err
    assert main(argv + ["--data", str(tmp_path / "leaf.json"), "--resume"]) == 0
    assert len(read_result(tmp_path / "r.json")["history"]) == 3

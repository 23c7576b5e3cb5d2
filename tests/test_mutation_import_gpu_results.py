"""Mutation-testing pass on ``scripts/import_gpu_results.py``'s commit check (``_commit_problems``): each test pins
a behaviour that a surviving mutant changed without any other test failing. The script is loaded as a module and
``git`` is played by a fake ``subprocess.run`` (no repository is read, nothing waits).

Mutants of c5aa211..361d535 (scripts/import_gpu_results.py, 0bf7a78: git asked to read the checkout first, both calls
with a 30 s timeout, git's own failures a failed check) (pass described in tests/README.md, Mutation passes):
  IG1 rev-parse without ``check=True``; IG2 only OSError caught; IG3 only FileNotFoundError caught; IG4 cat-file
  without its timeout; IG5 rev-parse without ``text=True``; IG6 ``returncode != 0``; IG7 no rev-parse; IG8
  rev-parse without its timeout. 8 mutants, one at a time, ``pytest -x -q`` on test_scripts.py and
  test_gpu_script.py's import test: 5 killed by the suite, 3 here.
  killed by the suite: IG1, IG2, IG5, IG7 (test_import_gpu_results_says_why_it_cannot_check_a_commit), IG6
  (test_gpu_script.py). killed here: IG3, IG4, IG8.
Mutants of c28e9dd, the error paths (scripts/import_gpu_results.py: ``_load``'s ValueError, ``_commit_problems``'
git failures, main's exit statuses and ``except (ImportErrorList, tarfile.TarError)``, ``sys.exit``) (pass described
in tests/README.md, Mutation passes; the other scripts' in test_mutation_build_book.py): 9 mutants, one at a time,
``pytest -x -q`` on test_scripts.py, this file and test_gpu_script.py (its import test): 6 killed by the suite, 3
killed here.
  SCR1 ``_load`` without ``except ValueError``; SCR2, SCR3 the git check without OSError / SubprocessError; SCR4,
  SCR5 the bad --tag's and the missing folder's ``return 2`` -> 1; SCR6 main without TarError; SCR7 the refusal's
  ``return 2`` -> 1; SCR8 ``return 0`` -> 1; SCR9 ``main()`` without ``sys.exit``.
  killed by the suite: SCR2, SCR3, SCR6-SCR9. SCR6 (test_gpu_script.py) showed main's one line for an archive that
  was no gzip file naming no file, and an archive cut short (EOFError) a traceback: fixed in 3d171b1, with
  test_a_file_the_device_call_left_unreadable_is_refused_in_one_line.
  killed here: SCR1 (the same test's unreadable result), SCR4, SCR5
  (test_a_bad_tag_or_a_missing_folder_exits_2_before_anything_is_read). Each 3 of 3 runs.
"""
from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHA = "ab" * 20


def _script():
    spec = importlib.util.spec_from_file_location("_import_gpu_results", ROOT / "scripts" / "import_gpu_results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _problems(tmp_path, monkeypatch, git):
    """``_commit_problems`` of a clean result naming SHA, against a folder with ``.git``, ``git(argv, kwargs)``
    playing each git call."""
    module = _script()
    (tmp_path / ".git").mkdir(exist_ok=True)
    monkeypatch.setattr(subprocess, "run", lambda argv, **kwargs: git(argv, kwargs))
    return module._commit_problems({"provenance": {"git_commit": SHA}}, tmp_path)


@pytest.mark.parametrize("hangs", ["rev-parse", "cat-file"])
def test_a_git_call_that_hangs_is_a_failed_check_after_its_timeout(tmp_path, monkeypatch, hangs):
    """Both git calls of the commit check have a timeout (30 s): a git that never answers (a checkout on a dead
    network mount) fails the check, named, instead of stopping the import for good. The fake git answers at once
    except in the call that hangs, which times out if given a timeout (and fails the test if not: the real call
    would wait forever). Mutants IG4 (cat-file without its timeout), IG8 (rev-parse without its)."""
    calls = []

    def git(argv, kwargs):
        calls.append(argv[3])
        if argv[3] == hangs:
            if kwargs.get("timeout") is None:
                pytest.fail(f"git {hangs} called without a timeout")
            raise subprocess.TimeoutExpired(argv, kwargs["timeout"])
        return subprocess.CompletedProcess(argv, 0, "", "")

    assert _problems(tmp_path, monkeypatch, git) == [
        f"commit {SHA} cannot be checked against this repository (git took over 30 s)"]
    assert calls == ["rev-parse", "cat-file"][:calls.index(hangs) + 1]


def test_a_git_that_cannot_be_run_is_a_failed_check(tmp_path, monkeypatch):
    """Any OSError of starting git is a failed check named by its cause, not a traceback: a git on PATH that is no
    executable (PermissionError), as well as none at all (FileNotFoundError, tests/test_scripts.py). Mutant IG3
    (FileNotFoundError caught only)."""
    def git(argv, kwargs):
        raise PermissionError(13, "Permission denied", "git")

    assert _problems(tmp_path, monkeypatch, git) == [
        f"commit {SHA} cannot be checked against this repository (PermissionError: [Errno 13] Permission denied: "
        "'git')"]


def test_a_commit_git_does_not_hold_is_named_and_one_it_holds_passes(tmp_path, monkeypatch):
    """After git has read the checkout (rev-parse), cat-file's exit status decides: 0 passes, 1 is 'not in this
    repository'; the commit is asked as ``<sha>^{commit}``."""
    for status, want in ((0, []), (1, [f"commit {SHA} is not in this repository"])):
        seen = []

        def git(argv, kwargs, seen=seen, status=status):
            seen.append(argv)
            return subprocess.CompletedProcess(argv, status if argv[3] == "cat-file" else 0, "", "")

        assert _problems(tmp_path, monkeypatch, git) == want
        assert seen == [["git", "-C", str(tmp_path), "rev-parse", "--git-dir"],
                        ["git", "-C", str(tmp_path), "cat-file", "-e", SHA + "^{commit}"]]


# ----------------------------------------------------------------------------- main: files it cannot read
def _truncated_archive() -> bytes:
    """A gzipped tar of one result file, cut after a third of its bytes (a copy a full disk or a killed transfer
    cut short)."""
    import io
    import tarfile

    body = bytes(range(256)) * 1200  # 300 KiB, little to compress
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("sgd-e2-fedavg__seed0.json")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    data = buffer.getvalue()
    return data[:len(data) // 3]


@pytest.mark.parametrize("name, contents, message", [
    ("bench_cifar10.json", b"not json", "bench_cifar10.json: {folder}/bench_cifar10.json: not valid JSON"),
    ("cifar10-results.tar.gz", b"not a gzip file", "cifar10-results.tar.gz: cannot read the archive (not a gzip"),
    ("cifar10-results.tar.gz", _truncated_archive(),
     "cifar10-results.tar.gz: cannot read the archive (Compressed file ended before the end-of-stream marker"),
], ids=["unreadable result", "no gzip archive", "archive cut short"])
def test_a_file_the_device_call_left_unreadable_is_refused_in_one_line(tmp_path, capsys, name, contents, message):
    """A device call's file that does not parse (a truncated copy, a full disk on the device) is refused with one
    line naming it, exit status 2, nothing filed. Before, an archive cut short (gzip's EOFError) left main as a
    traceback, and one that was no gzip file was refused without its name ('import_gpu_results: not a gzip file').
    Mutant: ``_load``'s ``except ValueError`` -> ``except ZeroDivisionError`` (read_result's ValueError left main
    as a traceback: the tests gave readable files only)."""
    folder, repo = tmp_path / "device", tmp_path / "repo"
    folder.mkdir()
    repo.mkdir()
    (folder / name).write_bytes(contents)
    assert _script().main([str(folder), "--repo", str(repo)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("import_gpu_results: ") and err.endswith(" (nothing written)\n")
    assert message.format(folder=folder) in err and err.count("\n") == 1, err
    assert list(repo.iterdir()) == []


@pytest.mark.parametrize("flags, message", [
    (["--tag", "h200 run"], "--tag must be letters, digits and '-', got 'h200 run'"),
    ([], "{folder}: not a folder"),
], ids=["bad tag", "no folder"])
def test_a_bad_tag_or_a_missing_folder_exits_2_before_anything_is_read(tmp_path, capsys, flags, message):
    """A --tag that cannot name files, or a device folder that is not there, is a bad argument: exit status 2 (as
    argparse's), its one line on stderr, nothing filed. Mutants: either ``return 2`` -> ``return 1`` (the tests
    read the message only)."""
    folder, repo = tmp_path / "device", tmp_path / "repo"
    repo.mkdir()
    if flags:
        folder.mkdir()
    assert _script().main([str(folder), "--repo", str(repo), *flags]) == 2
    assert capsys.readouterr() == ("", message.format(folder=folder) + "\n")
    assert list(repo.iterdir()) == []

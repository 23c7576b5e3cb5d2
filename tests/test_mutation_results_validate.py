"""Input checks (fedlib._validate, through the public functions that use them) and result
records (fedlib.results): behaviour that the rest of the suite left unpinned.

Mutants of device_name (fedlib/results.py), of the 37-mutant input-check run (described in tests/README.md,
Mutation passes):
  killed here: R3 (the test's docstring says which change);
  equivalent:
  * R2 -- ``device_name``: ``dev.startswith("cpu:")`` -> ``dev.startswith("cpu")``. It differs only for
    a string that begins with ``"cpu"`` but is neither ``"cpu"`` nor ``"cpu:<n>"`` (``"cpufoo"``), which
    is no torch device (``torch.device("cpufoo")`` raises), so no device a run can use tells the two
    apart. Treated as equivalent; the docstring promises nothing about such strings.

Mutants of d562d43..c3b27eb, ``check_int_array``'s refusal of a bool among floats (fedlib/_validate.py) (pass
described in tests/README.md, Mutation passes).

Mutants of 8bd9827.., ``fedlib.results`` (summary against history) (pass described in tests/README.md, Mutation
passes).

Review and mutants of efe3bcd..52ae29d, fedlib/_validate.py and fedlib/results.py (pass described in
tests/README.md, Mutation passes):
Review fix (its tests first): round_lr took np.True_ / np.array(True) / torch.tensor(True) as lr 1.0.
  V1-V6 _validate.round_lr: lr <= 0 -> < 0; drop isfinite; drop the bool test; catch ValueError only; drop the
        0-d bool dtype test; default returned without float().
  RE1-RE5 results: make_provenance unchecked; history Mapping / str test dropped; _as_dict TypeError only;
        history[k] named 'history'.
  killed here: V3, V5 (mutants of the review fix), RE2; equivalent: V6 (the default is the solver's lr, already a
  float; the stacked engine's 0.0 default is never returned).

Mutants of 86c5527..90cbd4d (_validate.py) (pass described in tests/README.md, Mutation passes):
_validate.py (check_finite_array, check_weights, check_int_array):
  V1 ``isfinite(arr).all()`` -> ``.any()``; V2 drop the finite check; V3 ``min() < 0`` -> ``<= 0``; V4 ``min`` ->
  ``max`` (weights); V6 ``(arr != round(arr)).any()`` -> ``.all()``; V7 drop ``dtype.kind != "i"`` (int64 2**63-1
  refused); V8 ``!= "i"`` -> ``== "f"`` (uint64 2**63 wraps); V9 ``>= 2.0**63`` -> ``>``; V11 ``min`` -> ``max`` in
  the lower bound; V12 drop the lower bound; V13 ``min() < minimum`` -> ``<=``; V14 ``min`` -> ``max``; V15
  ``!= "i"`` -> ``!= "u"``: killed by the suite.
  V5 drop ``not isfinite(arr).all() or`` (an inf step count was 'must hold integers below 2**63'; NaN is still
  refused by ``arr != round(arr)``), V10 ``min() < -(2.0**63)`` -> ``<=`` (-2**63, a valid int64, refused): killed
  here.

Mutants of 37f92d9..d2bb791 (fedlib/_validate.py) (pass described in tests/README.md, Mutation passes):
  V1 a_type's article swapped; V2 _is_finite_number takes a bool; V3 an int past float64 taken as finite; V4
  _other_real's hint inverted; V5 _held_in_array without the np.generic exclusion; V6 check_flag refuses
  numpy's bool; V7 check_callable without the nargs check; V8 positional_mismatch binds nargs + 1; V9 without
  the functools.wraps fallback; V10 check_sequence takes a mapping; V11 _refuse_mapping dropped; V12 _not_real
  without the strings of an object array; V13 without bools; V14 a complex tensor let through; V15 a bool tensor
  let through; V16 check_probability_vector does not divide by the sum; V17 the renormalisation's threshold ``atol`` -> ``1.0`` (then named ``own``); V18
  check_int_array without the float tensor's double(); V19 a ragged list's ValueError not caught; V20 is_choice
  takes an array; V21 check_positive ``<= 0`` -> ``< 0``: killed by the suite (V6 by tests/test_batched_engine.py).

Mutants of 37f92d9..d2bb791 (the changed hunks of fedlib/results.py) (pass described in tests/README.md, Mutation
passes): 9 mutants, one at a time, ``pytest -x`` on test_results.py, test_provenance.py, this file,
test_checkpoint.py and ``tests/test_doctests.py -k fedlib.results``: 6 killed by the suite (RE1 ``>=`` -> ``>``
at the year 10000, RE2 shlex.join of the used-up argv, RE3 keys written alike let through, RE4 a history of no
iterable, RE5 no checkpoint named, RE8 a key written twice let through), 2 here (RE6 a protocol-5 pickle not
named a checkpoint, RE9 the type named without ``a_type``), 1 equivalent:
  * RE7 -- _is_checkpoint's ``length >= size`` -> ``>``: they differ only for a file of exactly the footer and
    its 64 hex digits, with nothing before them; every checkpoint has its pickle (at least two bytes) before
    the footer, so it reads the same.
Mutants of cdf6ee0..fcc8b56 (fedlib/results.py, 176bb35: results_folder, REPOSITORY_RESULTS) (pass described in
tests/README.md, Mutation passes):
  RF1 committed's str test dropped; RF2 the empty-name test dropped; RF3 the one-name test dropped; RF4 a missing
  committed folder returned; RF5 made relative to the unresolved working folder; RF6 always absolute; RF7 ``except
  ValueError`` -> ``except TypeError``; RF8 create inverted; RF9 no parents made; RF10 ``exist_ok`` dropped; RF11
  ``is_dir`` -> ``exists``; RF12 the message's committed folder cut to data/results/; RF13 REPOSITORY_RESULTS
  data/; RF14 ``path is None`` -> ``not path``; RF15 the path given made absolute.
  killed by the suite: RF2-RF4, RF6-RF8, RF13, RF15 (test_results.py). killed here: RF1, RF9-RF12, RF14.
  equivalent: RF5 (Path.cwd is os.getcwd, the working folder's physical path on POSIX, symbolic links resolved,
  as resolve() gives it).

Mutants of 652fbe7..0e9da1f (fedlib/_validate.py, f3fcb2a: available_memory's least of MemAvailable and
cgroup_available_memory, the cgroup reader; with the review fix 472a2f0, v1's total_inactive_file) (pass described
in tests/README.md, Mutation passes): 13 mutants (MV3-MV15; ids as drafted, MV1, MV2, MV16 not run), one at a time,
``pytest -x -q`` on test_validate.py, test_mutation_validation_objects.py and this file: 7 killed by the suite, 6
killed here, 0 equivalent.
  MV3 ``min(known)`` -> ``max``; MV4 the cgroup's room left out of ``known``; MV5 ``_NO_LIMIT = 2**62`` -> ``2**63``
  (v1's no-limit value read as a limit); MV6 the room not floored at 0; MV7 usage less page cache not floored at 0;
  MV8 no page cache counted free; MV9 the group's own inactive_file before total_inactive_file (the review fix
  reverted); MV10 unified/ read on a pure v2 mount too (``not cgroup.controllers`` dropped); MV11 a group path the
  mount does not hold not read at the mount; MV12 the parents not read; MV13 "max" read as 0; MV14 a
  /proc/self/cgroup line without three fields not skipped; MV15 the no-limit test dropped.
  killed by the suite: MV3, MV4 (test_available_memory_is_the_least_of_the_machine_and_the_cgroup_limit), MV6, MV8,
  MV12, MV13 (test_validate.py's cgroup tests), MV9 (the review fix's test). killed here: MV5, MV7, MV10, MV11, MV14,
  MV15.

Mutants of 0e9da1f..c5aa211 (fedlib/results.py: ``git_commit``'s warning and ``_git_failure``, fa3f736;
fedlib/_validate.py: ``_inactive_file``'s total_inactive_file, 472a2f0) (pass described in tests/README.md, Mutation
passes): 16 mutants, one at a time, ``pytest -x -q`` on test_provenance.py, this file and test_results.py (GC),
test_validate.py and this file (IF): 9 killed by the suite, 5 killed here, 2 equivalent.
  GC1 warned at every read (not added to ``_GIT_WARNED``); GC2 ``not in`` -> ``in``; GC3 ``stacklevel=1``; GC4 a
  RuntimeWarning; GC5 no 'no git command on PATH'; GC6 no timeout message; GC7 git's last stderr line; GC8 blank
  stderr lines kept; GC9 ``exc.stderr`` without ``or ""``; GC10 another error by its text alone; GC11 git's exit
  status dropped; GC12 the checkout holding fedlib named for ``root``. IF1 ``inactive_file`` before the total; IF2
  a malformed memory.stat's earlier line kept (``pass`` for ``return 0``); IF3 no fall-back to ``inactive_file``;
  IF4 the first line of a key kept (``setdefault``).
  killed by the suite: GC1, GC2, GC5, GC7, GC11 (test_provenance.py), GC4, GC12
  (test_git_commit_of_a_checkout_git_cannot_read_is_unknown); IF1, IF3 (test_validate.py). killed here: GC6,
  GC8-GC10 (test_git_commit_says_once_why_git_failed), IF2.
  equivalent:
  * GC3 -- the warning's location: ``python -m fedlib`` prints the message alone, and ``_GIT_WARNED`` gives it once a
    process whatever location Python's filters key on.
  * IF4 -- memory.stat lists each key once.
Mutants of c5aa211..361d535 (fedlib/_validate.py, 239feab: ``memory_room``, ``MEMORY_LIMITS`` and check_memory's
``memory_limit``) (pass described in tests/README.md, Mutation passes): 9 mutants, one at a time, ``pytest -x -q`` on
test_validate.py, this file, test_cli_synthetic.py and test_mutation_cli_cifar10.py: 6 killed by the suite, 3 killed
here.
  MR1 a tie named the machine (``<`` for ``<=``); MR2 the larger room taken (``>=``); MR3 a known cgroup room dropped
  where the machine's memory is unknown; MR4 ``(None, "machine")`` where nothing is known; MR5 a cgroup room named
  the machine; MR6 the message with the CLI's words; MR7 ``memory_limit`` always "machine"; MR8 available_memory the
  cgroup's room alone; MR9 the cgroup message without "container's or batch job's".
  killed by the suite: MR2, MR5-MR9 (test_validate.py). killed here: MR1, MR3, MR4
  (test_memory_room_names_the_limit_that_binds).
Mutants of c28e9dd, the error paths (fedlib/_io.py: every ``except`` and clean-up of the atomic writes and
``read_json``; fedlib/results.py: ``write_result``'s refusals, ``read_result``'s checkpoint branch, ``_is_checkpoint``,
``git_commit``'s failures) (pass described in tests/README.md, Mutation passes): 21 mutants, one at a time,
``pytest -x -q`` on test_checkpoint_io.py, test_results.py, test_data_leaf.py, test_checkpoint.py, this file and
test_mutation_cli.py / test_provenance.py where they name the code: 15 killed by the suite, 5 killed here, 1
equivalent.
  IOW1 ``_mode_for`` without FileNotFoundError; IOW2 ``_stage``'s ``except BaseException`` -> ``Exception``; IOW3
  ``_stage``'s unlink dropped; IOW4, IOW5 ``_fsync_folder``'s ``except OSError`` around ``os.open`` / ``os.fsync``
  narrowed; IOW6 the folder's descriptor not closed; IOW7 ``_unlink`` without FileNotFoundError; IOW8
  ``staged = []`` after the renames dropped; IOW9 the ``finally``'s unlink dropped; IOW10-IOW13 ``read_json``'s
  FileNotFoundError, UnicodeDecodeError, RecursionError, OSError; IOW14 ``os.rename`` for ``os.replace``. RES1,
  RES2 ``write_result``'s folder checks; RES3 ``read_result`` without its ValueError branch; RES4 ``_is_checkpoint``
  True on an OSError; RES5 the text not serialised before the disk; RES6, RES7 ``git_commit`` without
  SubprocessError / OSError.
  killed by the suite: IOW1, IOW3, IOW9-IOW14, RES1-RES7.
  killed here: IOW2 (test_an_atomic_write_interrupted_by_ctrl_c_leaves_the_old_file_and_no_temporary_file), IOW4,
  IOW5, IOW6 (test_an_atomic_write_where_the_folder_cannot_be_opened_or_synced_still_writes: on Linux a folder
  opens and syncs, so no test reached the branches), IOW7
  (test_a_failed_second_rename_of_atomic_write_all_raises_its_own_error_and_leaves_no_temporary_file). Each 3 of 3
  runs, and the tests pass 3 of 3 on the code.
  equivalent:
  * IOW8 -- after the renames the temporary names are gone; the ``finally``'s unlink of each is a FileNotFoundError
    that ``_unlink`` passes over.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import types

import numpy as np
import pytest
import torch

from fedlib._validate import check_int_array, round_lr
from fedlib.results import device_name
from fedlib.rule import aggregation_coefficients, fednova_weights
from fedlib.sampling import expected_server_weights
from fedlib.schedules import FixedSteps
from fedlib.tradeoff import fedprox_curves, mu_for_alpha


# ----------------------------------------------------------------------------- fedlib._validate
def test_alpha_one_is_allowed_for_fedprox():
    """alpha lies in [0, 1] *inclusive* (mu = alpha / lr, the strongest proximal term): alpha = 1
    gives mu = 1 / lr, and only values above 1 are refused."""
    assert mu_for_alpha(1.0, 0.5) == 2.0
    assert mu_for_alpha(1, 0.25) == 4.0
    with pytest.raises(ValueError, match=r"^alpha must lie in \[0.0, 1.0\]"):
        mu_for_alpha(1.0 + 1e-12, 0.5)


def test_array_that_is_not_numbers_is_a_value_error_naming_it():
    """An array argument that cannot be read as numbers (text, ragged lists) raises ValueError
    starting with the parameter's name, not a bare error from inside the check."""
    for bad in (["a", "b"], [[1.0], [2.0, 3.0]]):
        with pytest.raises(ValueError, match="^a_norms must be an array of numbers"):
            expected_server_weights("with-replacement", [0.5, 0.5], bad, 2)


def test_empty_weights_are_refused():
    """Weights must hold at least one client: aggregation_coefficients([] , []) is an error,
    not an empty array of coefficients."""
    with pytest.raises(ValueError, match="^weights must not be empty"):
        aggregation_coefficients(1.0, [], [])
    np.testing.assert_allclose(aggregation_coefficients(2.0, [0.25, 0.75], [1.0, 3.0]), [0.5, 0.5])


def test_integer_probability_vector_is_accepted():
    """p may be given as an integer array (a one-hot vector: all weight on one client); only
    floating-point inputs get the looser float-rounding tolerance."""
    tau, w = fednova_weights(np.array([0, 1]), [2.0, 6.0])
    assert tau == 6.0
    np.testing.assert_array_equal(w, [0.0, 1.0])
    with pytest.raises(ValueError, match="^p must sum to 1"):
        fednova_weights(np.array([1, 1]), [2.0, 6.0])


def test_local_steps_accept_whole_floats_and_refuse_fractions():
    """local_steps are integers; whole floats (2.0) count as integers, fractions (2.5) and
    non-finite values are refused with a message naming local_steps."""
    assert fednova_weights([0.5, 0.5], [2.0, 6.0], tau_eff="local_steps", local_steps=[2.0, 6.0])[0] == 4.0
    assert fednova_weights([0.5, 0.5], [2.0, 6.0], tau_eff="local_steps", local_steps=np.array([2, 6]))[0] == 4.0
    for bad in ([2.5, 6.5], [2.5, 6.0], [np.inf, 6.0], [np.nan, 6.0]):
        with pytest.raises(ValueError, match="^local_steps must hold whole numbers"):
            fednova_weights([0.5, 0.5], [2.0, 6.0], tau_eff="local_steps", local_steps=bad)


def test_local_steps_refuse_booleans_and_text():
    """Booleans and strings are not step counts, even though numpy could cast them to int."""
    for bad in ([True, True], ["2", "6"]):
        with pytest.raises(ValueError, match="^local_steps must hold whole numbers, got dtype"):
            fednova_weights([0.5, 0.5], [2.0, 6.0], tau_eff="local_steps", local_steps=bad)


def test_local_steps_must_be_a_non_empty_vector():
    """local_steps (one count per client) must be a non-empty 1-d array even where no client
    count is given to compare with (fedprox_curves)."""
    assert fedprox_curves([0.5, 0.5], [2, 4], [0.5]).tau_eff.shape == (1,)
    for bad in ([], [[2, 4]], 3):
        with pytest.raises(ValueError, match="^local_steps must be a non-empty 1-d array of whole numbers"):
            fedprox_curves([0.5, 0.5], bad, [0.5])


def test_local_steps_below_one_names_the_first_offending_client():
    """A step count < 1 is refused, naming the first client below the minimum and its count."""
    with pytest.raises(ValueError, match=r"^local_steps must be >= 1 for every client \(client 1 has 0\)"):
        fednova_weights([0.5, 0.5], [2.0, 6.0], tau_eff="local_steps", local_steps=[1, 0])
    with pytest.raises(ValueError, match=r"\(client 2 has -1\)"):
        fednova_weights([0.25, 0.25, 0.5], [2.0, 6.0, 1.0], tau_eff="local_steps", local_steps=[3, 1, -1])


# ----------------------------------------------------------------------------- fedlib.results
def _git(root, *args):
    import subprocess

    return subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    import shutil

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    monkeypatch.delenv("FEDLIB_GIT_COMMIT", raising=False)
    _git(tmp_path, "init", "-q")
    (tmp_path / "a.txt").write_text("one\n")
    _git(tmp_path, "add", "a.txt")
    _git(tmp_path, "commit", "-q", "-m", "first")
    return tmp_path


def test_git_commit_of_a_checkout_is_its_head_and_dirty_flag(checkout):
    """In a git checkout, git_commit gives HEAD's full sha and whether tracked files were edited
    (untracked files do not make it dirty); a folder without .git gives ("unknown", None)."""
    from fedlib.results import git_commit

    head = _git(checkout, "rev-parse", "HEAD")
    assert len(head) == 40
    assert git_commit(checkout) == (head, False)
    (checkout / "new.txt").write_text("untracked\n")
    assert git_commit(checkout) == (head, False)
    (checkout / "a.txt").write_text("two\n")
    assert git_commit(checkout) == (head, True)
    assert git_commit(checkout / "missing-sub") == ("unknown", None)


def test_git_commit_defaults_to_the_checkout_holding_fedlib(monkeypatch):
    """Without a root, git_commit reads the checkout that holds the fedlib package (the folder
    above fedlib/), so a run from a clone records the clone's commit."""
    import shutil
    from pathlib import Path

    import fedlib
    from fedlib.results import git_commit

    root = Path(fedlib.__file__).resolve().parent.parent
    if not (root / ".git").exists() or shutil.which("git") is None:
        pytest.skip("fedlib is not imported from a git checkout")
    monkeypatch.delenv("FEDLIB_GIT_COMMIT", raising=False)
    sha, dirty = git_commit()
    assert sha == _git(root, "rev-parse", "HEAD") and isinstance(dirty, bool)


def test_git_commit_of_a_checkout_git_cannot_read_is_unknown(tmp_path, monkeypatch):
    """When git fails in a folder that has .git (no commit yet; a corrupt index), the commit is
    "unknown" with dirty None, never git's error output or a guessed clean flag."""
    import shutil

    from fedlib.results import git_commit

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    monkeypatch.delenv("FEDLIB_GIT_COMMIT", raising=False)
    _git(tmp_path, "init", "-q")
    # each with the warning that says why (fa3f736): it was printed in the suite's warnings summary
    why = rf"^{re.escape(str(tmp_path))} is a git checkout, but its commit cannot be read \(git exited 128: "
    with pytest.warns(UserWarning, match=why):
        assert git_commit(tmp_path) == ("unknown", None)  # HEAD not born yet (git prints "HEAD", exit 128)
    (tmp_path / "a.txt").write_text("one\n")
    _git(tmp_path, "add", "a.txt")
    _git(tmp_path, "commit", "-q", "-m", "first")
    (tmp_path / ".git" / "index").write_text("garbage\n")  # rev-parse still works, status fails
    with pytest.warns(UserWarning, match=why):
        assert git_commit(tmp_path) == ("unknown", None)


def test_device_name_cpu_and_cuda(monkeypatch):
    """Provenance names a CPU device "cpu" without asking torch, and a CUDA device by its GPU's
    name, or by the device string when torch cannot name it; a CUDA run is never called "cpu"."""
    import sys
    import types

    from fedlib.results import device_name

    asked = []

    def get_device_name(dev):
        asked.append(dev)
        if dev == "cuda:7":
            raise RuntimeError("no such device")
        return "Fake GPU 141GB"

    fake = types.SimpleNamespace(device=str, cuda=types.SimpleNamespace(get_device_name=get_device_name))
    monkeypatch.setitem(sys.modules, "torch", fake)  # a torch stand-in: fast, and the same with or without a GPU
    assert device_name("cpu") == "cpu" and device_name() == "cpu" and asked == []
    assert device_name("cuda:0") == "Fake GPU 141GB" and asked == ["cuda:0"]
    assert device_name("cuda:7") == "cuda:7"


def test_provenance_records_the_thread_variables_that_are_set(monkeypatch):
    """provenance.threads holds the number of usable CPUs and exactly those of OMP_NUM_THREADS,
    OPENBLAS_NUM_THREADS, MKL_NUM_THREADS that are set, with their values."""
    from fedlib.results import make_provenance

    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    threads = make_provenance(0.0, 1.0, command="x")["threads"]
    assert threads["OMP_NUM_THREADS"] == "3" and threads["OPENBLAS_NUM_THREADS"] == "2"
    assert "MKL_NUM_THREADS" not in threads
    assert isinstance(threads["cpus_available"], int) and threads["cpus_available"] >= 1


def test_command_of_a_script_names_the_interpreter(monkeypatch):
    """Outside recorded_command, provenance.command is sys.argv shell-quoted: a fedlib entry point
    becomes "python -m fedlib ...", any other script is prefixed with the interpreter's name."""
    import sys
    from pathlib import Path

    from fedlib.results import make_provenance

    monkeypatch.setattr(sys, "argv", ["/x/my script.py", "a b", "c"])
    assert make_provenance(0.0, 1.0)["command"] == f"{Path(sys.executable).name} '/x/my script.py' 'a b' c"
    monkeypatch.setattr(sys, "argv", ["/site/fedlib/__main__.py", "run", "synthetic"])
    assert make_provenance(0.0, 1.0)["command"] == "python -m fedlib run synthetic"


def _prov(**edit):
    from fedlib.results import make_provenance

    prov = make_provenance(10.0, 12.5, command="x")
    prov.update(edit)
    return prov


def _history(n):
    return [{"round": t, "train_loss": 1.0, "test_accuracy": None, "tau_eff": 2.0, "chi2": 0.0,
             "local_steps": [2, 3]} for t in range(n)]


def test_make_result_validates_what_it_assembles():
    """make_result checks the record it builds: a history whose length disagrees with
    config.rounds, or a bad provenance, is a ValueError rather than a record written later."""
    from fedlib.results import make_result

    assert len(make_result({"rounds": 2}, _history(2), _prov())["history"]) == 2
    with pytest.raises(ValueError, match="config.rounds is 2 but the history has 3 records"):
        make_result({"rounds": 2}, _history(3), _prov())
    with pytest.raises(ValueError, match="provenance.git_commit"):
        make_result({"rounds": 2}, _history(2), _prov(git_commit="HEAD"))


def test_nan_inside_a_list_is_refused_with_its_path():
    """NaN or inf anywhere in a record, including inside lists (a list of per-client values in
    config or summary), is refused, naming where it is (JSON stores a missing number as null)."""
    from fedlib.results import SCHEMA, validate_result

    doc = {"schema": SCHEMA, "kind": "bench", "config": {"p": [0.5, float("nan")]}, "provenance": _prov()}
    with pytest.raises(ValueError, match=r"^result\.config\.p\[1\]: nan is not a finite number"):
        validate_result(doc)
    doc = {"schema": SCHEMA, "kind": "bench", "config": {}, "provenance": _prov(),
           "summary": {"curve": [[1.0, 2.0], [3.0, float("inf")]]}}
    with pytest.raises(ValueError, match=r"summary\.curve\[1\]\[1\]: inf"):
        validate_result(doc)


def test_zero_wall_time_is_valid():
    """wall_time_s must be >= 0: a run that took no measurable time (started == finished) makes
    a valid record, a negative duration does not."""
    from fedlib.results import make_result

    res = make_result({"rounds": 1}, _history(1), _prov(wall_time_s=0.0, finished_utc=_prov()["started_utc"]))
    assert res["provenance"]["wall_time_s"] == 0.0
    with pytest.raises(ValueError, match="wall_time_s must be a number >= 0"):
        make_result({"rounds": 1}, _history(1), _prov(wall_time_s=-1e-6))


def _bench(**edit):
    from fedlib.results import SCHEMA

    doc = {"schema": SCHEMA, "kind": "bench", "config": {}, "provenance": _prov()}
    doc.update(edit)
    return doc


def test_provenance_torch_is_a_version_string_or_null():
    """provenance.torch is the installed torch version or null (no torch); an empty string or a
    number is refused."""
    from fedlib.results import validate_result

    assert validate_result(_bench(provenance=_prov(torch=None)))["provenance"]["torch"] is None
    assert validate_result(_bench(provenance=_prov(torch="2.3.1")))["provenance"]["torch"] == "2.3.1"
    for bad in ("", "  ", 3):
        with pytest.raises(ValueError, match="provenance.torch must be a version string or null"):
            validate_result(_bench(provenance=_prov(torch=bad)))


def test_start_and_finish_times_must_both_be_utc():
    """started_utc / finished_utc are compared; one with a time zone and one without is a
    ValueError saying so, not a TypeError."""
    from fedlib.results import validate_result

    prov = _prov(started_utc="2024-01-01T00:00:00", finished_utc="2024-01-01T00:00:01Z")
    with pytest.raises(ValueError, match="started_utc and finished_utc must both be UTC times"):
        validate_result(_bench(provenance=prov))


def test_a_result_that_is_not_an_object_is_a_value_error(tmp_path):
    """A result file holding JSON that is not an object (a list, a number) is refused with a
    ValueError naming the file."""
    from fedlib.results import read_result, validate_result

    for text in ("[1, 2]", "3", '"run"'):
        (tmp_path / "r.json").write_text(text)
        with pytest.raises(ValueError, match=r"r\.json: a result must be a JSON object"):
            read_result(tmp_path / "r.json")
    with pytest.raises(ValueError, match="^result: a result must be a JSON object, got list"):
        validate_result([])


def test_kind_must_be_a_non_empty_string():
    """'kind' names the record ("run", "bench", ...): an empty string or a non-string is refused."""
    from fedlib.results import validate_result

    assert validate_result(_bench())["kind"] == "bench"
    for bad in ("", 3, None):
        with pytest.raises(ValueError, match="'kind' must be a string such as 'run'"):
            validate_result(_bench(kind=bad))


def test_history_records_must_be_objects_with_integer_rounds():
    """Every history record is an object whose round is an int >= 0 (not a float, bool or
    string), even where the value would compare equal to the expected round."""
    from fedlib.results import make_result, validate_result

    for bad in (5, "round", [0]):
        doc = make_result({"rounds": 1}, _history(1), _prov())
        doc["history"][0] = bad
        with pytest.raises(ValueError, match=r"history\[0\] must be an object"):
            validate_result(doc)
    for bad in (1.0, True, "1"):
        doc = make_result({"rounds": 2}, _history(2), _prov())
        doc["history"][1]["round"] = bad
        with pytest.raises(ValueError, match=r"history\[1\]\.round must be an integer >= 0"):
            validate_result(doc)


def test_local_steps_of_a_history_record_may_be_zero():
    """history[i].local_steps are integers >= 0: a client that took no step (0) is allowed,
    a negative count is not."""
    from fedlib.results import make_result, validate_result

    hist = _history(1)
    hist[0]["local_steps"] = [0, 3]
    assert make_result({"rounds": 1}, hist, _prov())["history"][0]["local_steps"] == [0, 3]
    hist[0]["local_steps"] = [-1, 3]
    with pytest.raises(ValueError, match=r"history\[0\]\.local_steps must be a list of integers >= 0"):
        validate_result(_raw_run(hist))


def _raw_run(history):
    from fedlib.results import SCHEMA

    return {"schema": SCHEMA, "kind": "run", "config": {"rounds": len(history)}, "provenance": _prov(),
            "history": history}


def test_write_result_takes_a_str_path_and_returns_a_path(tmp_path):
    """write_result accepts the path as a str (or any os.PathLike) and returns it as a Path;
    read_result reads back the same record."""
    from pathlib import Path

    from fedlib.results import make_result, read_result, write_result

    res = make_result({"rounds": 1}, _history(1), _prov())
    out = write_result(str(tmp_path / "r.json"), res)
    assert isinstance(out, Path) and out == tmp_path / "r.json"
    assert read_result(str(out)) == res


def test_write_result_refuses_an_invalid_record_before_writing(tmp_path):
    """write_result validates first: an invalid record (history shorter than config.rounds) is a
    ValueError naming the file, and neither the file nor a temporary is left behind."""
    from fedlib.results import write_result

    with pytest.raises(ValueError, match=r"r\.json: config.rounds is 3 but the history has 1 records"):
        write_result(tmp_path / "r.json", _raw_run(_history(1)) | {"config": {"rounds": 3}})
    assert list(tmp_path.iterdir()) == []


def test_write_result_onto_a_folder_is_a_value_error(tmp_path):
    """Writing a result where a folder stands is a ValueError naming it; the folder is untouched."""
    from fedlib.results import make_result, write_result

    (tmp_path / "r.json").mkdir()
    with pytest.raises(ValueError, match=r"r\.json: is a folder"):
        write_result(tmp_path / "r.json", make_result({"rounds": 1}, _history(1), _prov()))
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"] and (tmp_path / "r.json").is_dir()


def test_provenance_times_must_carry_the_utc_zone():
    """'_utc' means UTC: two times without a zone, or with another offset, are refused like a mix was
    (they were accepted); Z and +00:00 both pass."""
    from fedlib.results import validate_result

    ok = _prov(started_utc="2024-01-01T00:00:00+00:00", finished_utc="2024-01-01T00:00:01Z")
    assert validate_result(_bench(provenance=ok))["provenance"]["finished_utc"].endswith("Z")
    for start, end in (("2024-01-01T00:00:00", "2024-01-01T00:00:01"),
                       ("2024-01-01T00:00:00+02:00", "2024-01-01T00:00:01+02:00")):
        with pytest.raises(ValueError, match="must both be UTC times"):
            validate_result(_bench(provenance=_prov(started_utc=start, finished_utc=end)))


def test_path_of_an_unknown_users_home_is_a_value_error():
    """'~nosuchuser/...' cannot be expanded: a ValueError naming the parameter (Path.expanduser raised a
    bare RuntimeError)."""
    from fedlib.data.leaf import load_leaf

    with pytest.raises(ValueError, match=r"^path: cannot expand '~nosuchuser_fedlib_test/a\.json'"):
        load_leaf("~nosuchuser_fedlib_test/a.json")


def test_step_counts_too_large_for_int64_are_refused_as_such():
    """1e19 steps would wrap to a negative int64 (numpy warned, and the message quoted the wrapped value)."""
    import warnings

    for bad in ([1e19, 2], np.array([2 ** 64 - 1, 2], dtype=np.uint64)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(ValueError, match=r"^local_steps must hold whole numbers below 2\*\*63"):
                fedprox_curves([0.5, 0.5], bad, [0.5])


# ------------------------------------------------------------ results.device_name: the input checks' mutants
def test_device_name_does_not_ask_torch_about_a_device_that_is_not_cuda(monkeypatch):
    """Mutant R3: ``not dev.startswith("cuda")`` -> ``dev in ("mps", "meta") or
    dev.startswith("xpu")`` (a list of known non-CUDA devices): any other device (``"hpu"``,
    ``"xla:0"``, ``"privateuseone"``) went to ``torch.cuda.get_device_name``. Real torch refuses a
    non-CUDA device there, so the mutant still returned the string; a torch stand-in that names any
    device shows the difference: only a CUDA device is named by torch."""
    asked = []

    def get_device_name(dev):
        asked.append(dev)
        return "Fake GPU"

    fake = types.SimpleNamespace(device=str, cuda=types.SimpleNamespace(get_device_name=get_device_name))
    monkeypatch.setitem(sys.modules, "torch", fake)
    assert [device_name(d) for d in ("hpu", "xla:0", "privateuseone")] == ["hpu", "xla:0", "privateuseone"]
    assert asked == []
    assert device_name("cuda:1") == "Fake GPU" and asked == ["cuda:1"]


# -------------------------------------------------------------- check_int_array: mutants of d562d43..c3b27eb
def test_a_bool_among_whole_floats_is_no_step_count():
    """np.asarray([True, 2.0]) is the float array [1.0, 2.0], whose whole floats check_int_array
    accepts: the bool must be found in the list itself, for float lists as for int lists."""
    from fedlib._validate import check_int_array

    for bad, at in (([True, 2.0], 0), ((3.0, np.bool_(False)), 1)):
        with pytest.raises(ValueError, match=rf"^steps must hold whole numbers, got the bool (True|False) at index {at}$"):
            check_int_array("steps", bad)
        with pytest.raises(ValueError, match=rf"^steps must hold whole numbers, got the bool (True|False) at index {at}"):
            FixedSteps(bad)
    assert check_int_array("steps", [1.0, 2.0]).tolist() == [1, 2]  # whole floats without a bool: accepted


# ---------------------------------------------------- results, summary against history: mutants of 8bd9827..
def test_a_summary_final_value_of_no_history_field_is_not_checked():
    """summary.final_<field> is compared with the last record's <field> where the record has one; a
    summary value of another name (here final_wall_s) is kept, not a KeyError."""
    from fedlib.results import make_provenance, make_result, validate_result

    history = [{"round": t, "train_loss": 1.0 / (t + 1), "test_accuracy": None, "tau_eff": 2.0, "chi2": 0.0,
                "local_steps": [2, 2]} for t in range(2)]
    res = make_result({"rounds": 2}, history, make_provenance(0.0, 1.0),
                      summary={"final_train_loss": 0.5, "final_wall_s": 3.0, "rounds": 2})
    assert validate_result(res)["summary"]["final_wall_s"] == 3.0
    res["summary"]["final_train_loss"] = 1.0  # the first record's, not the last's
    with pytest.raises(ValueError, match=r"summary\.final_train_loss is 1\.0 but the last round \(history\[1\]\)"):
        validate_result(res)


# -------------------------------------------------------------------- review and mutants of efe3bcd..52ae29d
@pytest.mark.parametrize("value", [np.True_, np.array(True), torch.tensor(True)])
def test_round_lr_refuses_numpy_and_torch_bools(value):
    # float() of each is 1.0: an lr_at returning a bool trained at lr 1.0
    with pytest.raises(ValueError, match=r"lr_at\(2\) must return the round's client learning rate"):
        round_lr("lr_at", lambda t: value, 2, 0.1)


@pytest.mark.parametrize("value", [np.float32(0.05), np.array(0.05), torch.tensor(0.05, dtype=torch.float64)])
def test_round_lr_takes_numpy_and_torch_numbers(value):
    assert round_lr("lr_at", lambda t: value, 0, 0.1) == pytest.approx(0.05)


def test_make_result_names_a_mapping_given_as_history():
    # mutant RE2 (Mapping check dropped): a dict history was iterated by its keys, and the error named
    # history[0] ('round' is no mapping) instead of the history
    from fedlib.results import make_provenance, make_result

    provenance = make_provenance(0.0, 1.0, command="x")
    with pytest.raises(ValueError, match=r"^history must be a sequence of per-round mappings, got dict"):
        make_result({"rounds": 1}, {"round": 0, "train_loss": 0.5}, provenance)


# ------------------------------------------------------------------------------- mutants of 86c5527..90cbd4d
@pytest.mark.parametrize("bad", [[1.0, np.inf], [-np.inf, 1.0]])
def test_check_int_array_calls_an_infinite_count_no_integer(bad):  # V5
    with pytest.raises(ValueError, match=r"^steps must hold whole numbers, got array"):
        check_int_array("steps", np.array(bad), minimum=1)


def test_check_int_array_takes_minus_two_to_the_63():  # V10: the lower bound is int64's own
    assert check_int_array("offsets", np.array([-(2.0 ** 63), 0.0])).tolist() == [-(2 ** 63), 0]


# ------------------------------------------------------------------------ mutants of 37f92d9..d2bb791
@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_read_result_names_a_pickle_of_any_protocol_with_a_header_as_a_checkpoint(tmp_path, protocol):
    """A file that starts as a pickle does (``0x80``, then the protocol: 2 to 5, every protocol that writes the
    header) is named as a checkpoint written without the footer, whichever protocol wrote it (mutant RE6, ``2 <=
    head[1] <= 5`` -> ``<= 4``: a protocol-5 pickle got the JSON decoder's 'utf-8' codec error)."""
    import pickle

    from fedlib.results import read_result

    path = tmp_path / "bare.ckpt"
    path.write_bytes(pickle.dumps({"round": 1, "history": []}, protocol=protocol))
    with pytest.raises(ValueError, match=r"^.*bare\.ckpt: is a fedlib checkpoint, not a result file"):
        read_result(path)


def test_to_jsonable_names_what_it_cannot_store_with_its_article():
    """The refusal names the type with its article (``a_type``): 'cannot store an object ...', 'an ellipsis'
    (mutant RE9, ``a {type(obj).__name__}``: 'cannot store a object')."""
    from fedlib.results import to_jsonable

    thing = object()
    with pytest.raises(ValueError) as err:
        to_jsonable({"x": thing})
    assert str(err.value) == f"cannot store an object in a result record: {thing!r}"
    with pytest.raises(ValueError, match=r"^cannot store an ellipsis in a result record: Ellipsis$"):
        to_jsonable([...])


# ------------------------------------------------- results_folder: mutants of cdf6ee0..fcc8b56 (176bb35)
def test_results_folder_makes_nested_folders_and_refuses_a_file_or_a_committed_that_is_no_text(tmp_path,
                                                                                                 monkeypatch):
    """results_folder(path, committed): with create the folder is made with its parents, one that exists is taken
    as it is; without, a path naming a file is no folder (FileNotFoundError naming it, the working folder and the
    committed folder to give instead); "" is a path as given (the working folder), only None the committed folder;
    a committed that is no text is a ValueError naming it. Mutants of cdf6ee0..fcc8b56: RF1 (committed's str test
    dropped: 5 a TypeError), RF9 (no parents made), RF10 (an existing folder refused with create), RF11 (a file
    taken for a folder), RF12 (the committed folder not named), RF14 ("" read as None)."""
    import os
    from pathlib import Path

    from fedlib.results import results_folder

    monkeypatch.chdir(tmp_path)
    assert results_folder("a/b", "cifar10", create=True) == Path("a/b") and (tmp_path / "a" / "b").is_dir()
    assert results_folder("a/b", "cifar10", create=True) == Path("a/b")
    (tmp_path / "r.json").write_text("{}")
    with pytest.raises(FileNotFoundError) as err:
        results_folder("r.json", "linearised")
    assert str(err.value) == (f"r.json: no such folder (relative to the working folder {os.getcwd()}); give the "
                              "folder of the result files, or None for the repository's committed "
                              "data/results/linearised")
    assert results_folder("", "bench") == Path("")
    with pytest.raises(ValueError, match=r"^committed must name one folder under .*, got 5$"):
        results_folder(None, 5)


def _cgroup_files(tmp_path, files: dict, proc: str):
    """A fake cgroup mount under ``tmp_path/cg`` (relative path -> text) and a fake ``/proc/self/cgroup``."""
    root = tmp_path / "cg"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (tmp_path / "proc").write_text(proc)
    return tmp_path / "proc", root


GIB = 2**30


def test_cgroup_memory_takes_the_v1_no_limit_value_as_no_limit(tmp_path):
    """MV5, MV15: cgroup v1 writes "no limit" as 2**63 rounded down to a page, 9223372036854771712 (no real limit
    reaches 2**62): a group with it and no other limit has no room to report, None, not 9223372036854771712 - 1 GiB."""
    from fedlib._validate import cgroup_available_memory

    v1 = {"memory/box/memory.limit_in_bytes": "9223372036854771712\n", "memory/box/memory.usage_in_bytes": f"{GIB}\n"}
    proc, root = _cgroup_files(tmp_path, v1, "4:memory:/box\n")
    assert cgroup_available_memory(proc, root) is None


def test_cgroup_memory_room_is_at_most_the_limit(tmp_path):
    """MV7: the usage and memory.stat are read apart, so the page cache can exceed the usage read before it: usage
    less cache counts as 0, and the room is the limit (4 GiB), never more (4 - (1 - 2) = 5 GiB)."""
    from fedlib._validate import cgroup_available_memory

    v2 = {"cgroup.controllers": "memory\n", "job/memory.max": f"{4 * GIB}\n", "job/memory.current": f"{GIB}\n",
          "job/memory.stat": f"anon 0\ninactive_file {2 * GIB}\n"}
    proc, root = _cgroup_files(tmp_path, v2, "0::/job\n")
    assert cgroup_available_memory(proc, root) == 4 * GIB


def test_cgroup_memory_reads_unified_only_in_the_hybrid_layout(tmp_path):
    """MV10: on a cgroup v2 mount (cgroup.controllers at its root) a group named "unified" is a group like any
    other: the process's group /job (4 GiB, 1 GiB used: 3 GiB of room) is read at the root, not under unified/
    (another group's 1 GiB, unused)."""
    from fedlib._validate import cgroup_available_memory

    v2 = {"cgroup.controllers": "memory\n", "job/memory.max": f"{4 * GIB}\n", "job/memory.current": f"{GIB}\n",
          "unified/memory.max": f"{GIB}\n", "unified/memory.current": "0\n"}
    proc, root = _cgroup_files(tmp_path, v2, "0::/job\n")
    assert cgroup_available_memory(proc, root) == 3 * GIB


def test_cgroup_memory_of_a_hidden_group_path_is_read_at_the_mount_only(tmp_path):
    """MV11: where the mount is the process's group itself (a container without a cgroup namespace of its own:
    /proc/self/cgroup names /docker/abc, which the container's mount does not hold), the mount is read, not the
    folders that happen to lie on the named path: a group 'docker' inside the container (a nested runtime's, 1 GiB,
    unused) is no parent of the process. Room: 3 GiB - 1 GiB = 2 GiB, not 1 GiB."""
    from fedlib._validate import cgroup_available_memory

    v2 = {"cgroup.controllers": "memory\n", "memory.max": f"{3 * GIB}\n", "memory.current": f"{GIB}\n",
          "docker/memory.max": f"{GIB}\n", "docker/memory.current": "0\n"}
    proc, root = _cgroup_files(tmp_path, v2, "0::/docker/abc\n")
    assert cgroup_available_memory(proc, root) == 2 * GIB


def test_cgroup_memory_skips_a_line_it_cannot_read(tmp_path):
    """MV14: a /proc/self/cgroup line that is not 'id:controllers:path' is skipped and the others read (3 GiB of
    room), not a ValueError out of the memory check."""
    from fedlib._validate import cgroup_available_memory

    v2 = {"cgroup.controllers": "memory\n", "job/memory.max": f"{4 * GIB}\n", "job/memory.current": f"{GIB}\n"}
    proc, root = _cgroup_files(tmp_path, v2, "garbage\n\n0::/job\n")
    assert cgroup_available_memory(proc, root) == 3 * GIB


@pytest.mark.parametrize("failure, reason", [
    (subprocess.TimeoutExpired(["git", "rev-parse", "HEAD"], 10), "git took over 10 s"),
    (subprocess.CalledProcessError(128, ["git"], stderr="\n  \nfatal: not a git repository\nhint: run git init\n"),
     "git exited 128: fatal: not a git repository"),
    (subprocess.CalledProcessError(129, ["git"], stderr=None), "git exited 129"),
    (PermissionError(13, "Permission denied"), "PermissionError: [Errno 13] Permission denied")])
def test_git_commit_says_once_why_git_failed(tmp_path, monkeypatch, failure, reason):
    """GC6, GC8-GC10 (0e9da1f..c5aa211): a checkout (``.git`` there) whose git call fails is ("unknown", None)
    with one UserWarning naming the checkout and why: a timeout as 'git took over 10 s' (GC6: 'TimeoutExpired:
    Command ... timed out ...'); git's exit status and the first line of its stderr that is not blank (GC8: the
    blank line, 'git exited 128: '), or the status alone when git gave no stderr (GC9: an AttributeError on None);
    any other OSError by its type and text (GC10: '[Errno 13] Permission denied' without the type). A second read of
    the same checkout warns no more."""
    import warnings

    import fedlib.results

    def fail(*args, **kwargs):
        raise failure

    (tmp_path / ".git").mkdir()
    monkeypatch.delenv("FEDLIB_GIT_COMMIT", raising=False)
    monkeypatch.setattr(fedlib.results, "_GIT_WARNED", set())
    monkeypatch.setattr(fedlib.results.subprocess, "run", fail)
    with pytest.warns(UserWarning) as record:
        assert fedlib.results.git_commit(tmp_path) == ("unknown", None)
    assert [str(w.message) for w in record] == [
        f"{tmp_path} is a git checkout, but its commit cannot be read ({reason}): results record git_commit "
        "'unknown'; FEDLIB_GIT_COMMIT=<40-hex-digit commit> names it"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fedlib.results.git_commit(tmp_path) == ("unknown", None)


@pytest.mark.parametrize("stat, cache", [
    ("inactive_file 4096\ntotal_inactive_file 1x\n", 0), ("total_inactive_file 8192\ninactive_file 4096\n", 8192),
    ("inactive_file 4096\nactive_file 1\n", 4096)])
def test_a_memory_stat_with_an_unreadable_page_cache_counts_none_free(tmp_path, stat, cache):
    """IF2 (0e9da1f..c5aa211): the page cache counted free is memory.stat's ``total_inactive_file`` where listed,
    in whatever order the lines come, else ``inactive_file``; a memory.stat with a value that cannot be read counts
    nothing free (0, 'unknown' in the docstring), not a line read before it (IF2: the group's own 4096 for the
    malformed total)."""
    from fedlib._validate import _inactive_file

    (tmp_path / "memory.stat").write_text(stat, encoding="ascii")
    assert _inactive_file(tmp_path) == cache


def _memory_sources(monkeypatch, machine_kib, sysconf_pages, cgroup):
    """memory_room()'s three sources replaced: /proc/meminfo's MemAvailable (``None``: the file cannot be read),
    ``os.sysconf``'s free pages of 4096 bytes (``None``: not known) and the cgroup room."""
    import io

    from fedlib import _validate

    def fake_open(path, *args, **kwargs):
        assert str(path) == "/proc/meminfo"
        if machine_kib is None:
            raise FileNotFoundError(path)
        return io.StringIO(f"MemTotal: {4 * machine_kib} kB\nMemAvailable: {machine_kib} kB\n")

    def fake_sysconf(name):
        if sysconf_pages is None:
            raise ValueError(name)
        return {"SC_AVPHYS_PAGES": sysconf_pages, "SC_PAGE_SIZE": 4096}[name]

    monkeypatch.setattr(_validate, "open", fake_open, raising=False)  # the module's open: builtins' is left alone
    monkeypatch.setattr(_validate.os, "sysconf", fake_sysconf)
    monkeypatch.setattr(_validate, "cgroup_available_memory", lambda: cgroup)


@pytest.mark.parametrize("machine_kib, sysconf_pages, cgroup, room", [
    (1000, None, 1000 * 1024, (1000 * 1024, "cgroup")),  # a tie: the container's limit binds (memory_room's docs)
    (1000, None, 1000 * 1024 + 1, (1000 * 1024, "machine")),
    (1000, None, 1000 * 1024 - 1, (1000 * 1024 - 1, "cgroup")),
    (None, 10, None, (40960, "machine")),  # no /proc/meminfo: free pages times the page size
    (None, None, 5000, (5000, "cgroup")),  # the machine's memory unknown: the container's room alone
    (None, None, None, (None, None)),  # nothing known: the check passes
])
def test_memory_room_names_the_limit_that_binds(monkeypatch, machine_kib, sysconf_pages, cgroup, room):
    """memory_room() is ``(bytes, limit)``: the least of the machine's free memory and the room under a cgroup's
    limit, ``"cgroup"`` where that room is no larger (a tie included), ``"machine"`` otherwise; the cgroup's room alone
    where the machine's is unknown; ``(None, None)`` where neither is known, and check_memory then passes.
    Mutants of c5aa211..361d535: MR1 (a tie named the machine), MR3 (a known cgroup room dropped where the machine's
    memory is unknown), MR4 (``(None, "machine")`` where nothing is known)."""
    from fedlib import _validate

    _memory_sources(monkeypatch, machine_kib, sysconf_pages, cgroup)
    assert _validate.memory_room() == room
    assert _validate.available_memory() == room[0]
    if room[0] is None:
        _validate.check_memory(2**62, "the thing")
    else:
        with pytest.raises(MemoryError) as info:
            _validate.check_memory(room[0] + 1, "the thing")
        assert info.value.memory_limit == room[1]
        assert str(info.value).endswith(_validate.MEMORY_LIMITS[room[1]][0])


# ----------------------------------------------------------------------------- fedlib._io: atomic writes
def test_an_atomic_write_interrupted_by_ctrl_c_leaves_the_old_file_and_no_temporary_file(tmp_path):
    """A Ctrl-C while a streamed write runs (a checkpoint's pickling: ``KeyboardInterrupt``, no ``Exception``)
    removes the temporary file and leaves the target as it was. Mutant: ``_stage``'s ``except BaseException`` ->
    ``except Exception``: the half-written '.r.json.<8 characters>.tmp' stayed in the folder (only a failing
    ``OSError`` write was tested)."""
    from fedlib._io import atomic_write

    target = tmp_path / "r.json"
    target.write_text("old")

    def interrupted(fh):
        fh.write(b"half a file")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, interrupted)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"] and target.read_text() == "old"


@pytest.mark.parametrize("refused", ["open", "fsync"])
def test_an_atomic_write_where_the_folder_cannot_be_opened_or_synced_still_writes(tmp_path, monkeypatch, refused):
    """Where a folder cannot be opened (Windows) or refuses fsync (some file systems: EINVAL), the write is done
    all the same, the rename being the atomic step, and no descriptor is left open. Mutants: ``_fsync_folder``'s
    ``except OSError`` around ``os.open`` or around ``os.fsync`` -> ``except ZeroDivisionError``: the write
    failed after its rename (on Linux the folder opens and syncs, so no test reached either branch)."""
    import errno
    import stat

    import fedlib._io as io_

    real_open, real_fsync = os.open, os.fsync

    def open_(path, flags, *args, **kwargs):
        if refused == "open" and flags & getattr(os, "O_DIRECTORY", 0):
            raise OSError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    def fsync(fd):
        if refused == "fsync" and stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_fsync(fd)

    monkeypatch.setattr(io_.os, "open", open_)
    monkeypatch.setattr(io_.os, "fsync", fsync)
    before = len(os.listdir("/proc/self/fd"))
    try:
        written = io_.atomic_write(tmp_path / "r.json", "new")
    finally:
        monkeypatch.undo()
    assert written == tmp_path / "r.json" and written.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
    assert len(os.listdir("/proc/self/fd")) == before  # the folder's descriptor closed too


def test_a_failed_second_rename_of_atomic_write_all_raises_its_own_error_and_leaves_no_temporary_file(
        tmp_path, monkeypatch):
    """``atomic_write_all``: when the second rename fails (a disk error), its OSError is what the caller gets and
    no temporary file stays; the clean-up passes over the first file's temporary name, which its rename already
    took. Mutant: ``_unlink``'s ``except FileNotFoundError`` -> ``except ZeroDivisionError``: the clean-up's
    FileNotFoundError for that name replaced the rename's error (the tests failed a single file's rename only)."""
    import errno

    import fedlib._io as io_

    real_replace = os.replace
    calls = []

    def replace(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(errno.EIO, "Input/output error", str(dst))
        return real_replace(src, dst)

    (tmp_path / "b.txt").write_text("old b")
    monkeypatch.setattr(io_.os, "replace", replace)
    with pytest.raises(OSError) as caught:
        io_.atomic_write_all([(tmp_path / "a.txt", "new a"), (tmp_path / "b.txt", "new b")])
    assert caught.value.errno == errno.EIO
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt"]
    assert (tmp_path / "a.txt").read_text() == "new a" and (tmp_path / "b.txt").read_text() == "old b"

"""Result records: schema, provenance, atomic writes, validation (fedlib.results), a summary that disagrees
with its history. Written files get the umask's mode (an overwrite keeps its own); atomic_write follows a link
and refuses a fifo; read_result refuses what the book must not show (NaN, cut histories, a percentage accuracy,
deep nesting, ...), and the committed results pass."""
from __future__ import annotations

import json
import os
import re
import stat
import time
from pathlib import Path

import numpy as np
import pytest

from fedlib import results
from fedlib._io import atomic_write
from fedlib.cli import main
from fedlib.results import (HISTORY_KEYS, PROVENANCE_KEYS, SCHEMA, RunClock, git_commit, make_provenance, make_result,
                            read_result, results_folder, to_jsonable, write_result)


def _history(n=3):
    return [{"round": t, "train_loss": np.float64(1.0 / (t + 1)), "test_accuracy": None, "tau_eff": 2.5,
             "chi2": np.float32(0.1), "local_steps": np.array([2, 3]), "lr": 0.02} for t in range(n)]


def _result(n=3):
    now = time.time()
    return make_result({"algorithm": "fednova", "lr": 0.02}, _history(n), make_provenance(now - 1.5, now),
                       initial={"train_loss": np.log(10)}, summary={"final_train_loss": 1 / n})


def test_make_result_converts_and_has_the_schema():
    res = _result()
    assert res["schema"] == SCHEMA and res["kind"] == "run"
    for key in PROVENANCE_KEYS:
        assert key in res["provenance"]
    assert res["provenance"]["wall_time_s"] == pytest.approx(1.5, abs=1e-3)
    assert res["provenance"]["started_utc"].endswith("Z")
    rec = res["history"][0]
    for key in HISTORY_KEYS:
        assert key in rec
    assert rec["local_steps"] == [2, 3] and isinstance(rec["chi2"], float)
    json.dumps(res, allow_nan=False)  # plain JSON


def test_provenance_git_and_versions(tmp_path, monkeypatch):
    monkeypatch.delenv("FEDLIB_GIT_COMMIT", raising=False)
    prov = make_provenance(0.0, 1.0, command="x")
    assert prov["numpy"] == np.__version__ and prov["command"] == "x" and prov["device"] == "cpu"
    assert prov["git_commit"] == "unknown" or len(prov["git_commit"]) == 40
    assert git_commit(tmp_path) == ("unknown", None)  # not a git checkout
    # a copy without .git (e.g. on a GPU machine) is told its commit
    monkeypatch.setenv("FEDLIB_GIT_COMMIT", "a" * 40)
    assert git_commit(tmp_path) == ("a" * 40, None)
    # ... and so is a copy with a stale .git: the caller's word wins over the checkout's HEAD
    assert git_commit() == ("a" * 40, None)
    assert make_provenance(0.0, 1.0)["git_commit"] == "a" * 40


def test_run_clock():
    with RunClock() as clock:
        pass
    prov = clock.provenance("cpu", command="cmd")
    assert prov["wall_time_s"] >= 0 and prov["command"] == "cmd"


def test_to_jsonable_nonfinite_becomes_null():
    assert to_jsonable({"a": float("nan"), "b": np.inf, "c": [np.int64(3), np.bool_(True)]}) == \
        {"a": None, "b": None, "c": [3, True]}
    with pytest.raises(ValueError, match="cannot store"):
        to_jsonable({"x": object()})


def test_write_then_read_roundtrip(tmp_path):
    path = tmp_path / "r.json"
    res = _result()
    assert write_result(path, res) == path
    assert read_result(path) == res
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary file left


def test_failure_mid_write_leaves_the_target_untouched(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    path.write_text("previous content")

    def broken_fsync(fd):  # the data is half on disk when the failure happens
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="simulated"):
        write_result(path, _result())
    assert path.read_text() == "previous content"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_failure_in_replace_leaves_no_file(tmp_path, monkeypatch):
    path = tmp_path / "new.json"

    def broken_replace(src, dst):
        raise OSError("replace failed (simulated)")

    monkeypatch.setattr(results.os, "replace", broken_replace)
    with pytest.raises(OSError):
        write_result(path, _result())
    assert list(tmp_path.iterdir()) == []


def test_unserialisable_result_never_touches_the_disk(tmp_path):
    path = tmp_path / "r.json"
    res = _result()
    res["config"]["bad"] = object()
    with pytest.raises(ValueError, match="cannot store"):
        write_result(path, res)
    assert list(tmp_path.iterdir()) == []


def test_write_into_missing_folder(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        write_result(tmp_path / "no" / "r.json", _result())


@pytest.mark.parametrize("mutate,needle", [
    (lambda d: d.pop("history"), "history"),
    (lambda d: d.update(schema="other/9"), "schema"),
    (lambda d: d["provenance"].pop("git_commit"), "git_commit"),
    (lambda d: d["history"][1].pop("chi2"), "history[1]"),
    (lambda d: d["history"][1].update(round=0), "increase"),
    (lambda d: d["history"][0].update(local_steps=[1.5]), "local_steps"),
    (lambda d: d["history"][0].update(train_loss="x"), "train_loss"),
    (lambda d: d.update(config=[]), "config"),
])
def test_read_result_validates_and_names_the_file(tmp_path, mutate, needle):
    doc = _result()
    mutate(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="bad.json") as info:
        read_result(path)
    assert needle in str(info.value)


def test_read_result_missing_and_malformed(tmp_path):
    with pytest.raises(ValueError, match="nope.json: file not found"):
        read_result(tmp_path / "nope.json")
    bad = tmp_path / "trunc.json"
    bad.write_text('{"schema": ')
    with pytest.raises(ValueError, match="trunc.json: not valid JSON"):
        read_result(bad)


def test_read_result_of_a_checkpoint_says_it_is_a_checkpoint(tmp_path):
    """A checkpoint given where a result file is expected (``rerun run.json.ckpt``) is named as one, exit status 2
    as before; a pickle without the footer too. Before: "run.json.ckpt: not valid JSON ('utf-8' codec can't decode
    byte 0x80 in position 0: invalid start byte)". The refusal stands alone (``from None``): its traceback shows no
    JSON error 'during handling' of which it was raised; before this check, the ``raise`` without ``from None``
    (mutant RS1 of the negative-assertion pass) passed, the CLI printing the message alone either way."""
    import traceback
    from cliutil import cli_exit

    from fedlib.checkpoint import save_checkpoint

    ckpt = save_checkpoint(tmp_path / "run.json.ckpt", config={"a": 1}, round_done=1, state={"x": np.arange(3.0)},
                           history=[])
    with pytest.raises(ValueError, match=r"run.json.ckpt: is a fedlib checkpoint, not a result file") as info:
        read_result(ckpt)
    assert info.value.__suppress_context__ and info.value.__cause__ is None
    assert "During handling" not in "".join(traceback.format_exception(info.value))
    rc, _, err = cli_exit(["rerun", str(ckpt)])
    assert rc == 2 and "is a fedlib checkpoint, not a result file" in err and "utf-8" not in err
    bare = tmp_path / "bare.ckpt"
    bare.write_bytes(ckpt.read_bytes().rsplit(b"\nfedlib-checkpoint-sha256:", 1)[0])  # without the footer
    with pytest.raises(ValueError, match="bare.ckpt: is a fedlib checkpoint") as info:
        read_result(bare)
    assert info.value.__suppress_context__ and info.value.__cause__ is None
    other = tmp_path / "latin.json"
    other.write_bytes(b"\xe9t\xe9")  # neither JSON nor a checkpoint: the JSON error as before
    with pytest.raises(ValueError, match="latin.json: not valid JSON"):
        read_result(other)


def test_bench_records_need_no_history(tmp_path):
    res = make_result({"x": 1}, None, make_provenance(0, 1), kind="bench", summary={"speedup": 3.0})
    path = write_result(tmp_path / "b.json", res)
    assert read_result(path)["summary"]["speedup"] == 3.0


# -------------------------------------------------------------------------- a summary that disagrees with its history
SHIPPED_RUN = "data/results/cifar10/sgd-e2-fedavg__seed0.json"


def _shipped_run() -> dict:
    import json
    from pathlib import Path

    return json.loads((Path(__file__).resolve().parents[1] / SHIPPED_RUN).read_text())


def test_the_shipped_summary_is_its_history_s_last_round():
    """sgd-e2-fedavg seed 0 (Table 1, H200): final test accuracy 0.5882 in round 99 (1-based 100)."""
    from fedlib.results import validate_result

    doc = validate_result(_shipped_run())
    assert len(doc["history"]) == 100 and doc["summary"]["rounds"] == 100
    assert doc["summary"]["final_test_accuracy"] == doc["history"][99]["test_accuracy"] == 0.5882000000000001


@pytest.mark.parametrize("key, value, message", [
    ("final_test_accuracy", 0.6882, r"summary\.final_test_accuracy is 0\.6882 but the last round \(history\[99\]\) "
                                    r"has test_accuracy 0\.5882000000000001; the summary must be"),
    ("final_train_loss", None, r"summary\.final_train_loss is None but the last round \(history\[99\]\) has "
                               r"train_loss 0\.2467"),
    ("rounds", 99, r"summary\.rounds is 99 but the history has 100 records"),
])
def test_a_summary_that_disagrees_with_the_history_is_refused(tmp_path, key, value, message):
    """Table 1 reads summary.final_test_accuracy, the figures read the history: an edited (or
    mixed-up) file whose two disagree was read without a word."""
    import json

    from fedlib.results import read_result

    doc = _shipped_run()
    doc["summary"][key] = value
    f = tmp_path / "r.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=f"^{re.escape(str(f))}: {message}"):
        read_result(f)


def test_a_final_value_without_any_history_is_refused():
    from fedlib.results import make_result

    prov = _shipped_run()["provenance"]
    with pytest.raises(ValueError, match=r"^result: summary\.final_test_accuracy is 0\.5 but the history is empty"):
        make_result({"rounds": 0}, [], prov, summary={"final_test_accuracy": 0.5})


# ----------------------------------------------------------------------- make_provenance's times, make_result's parts
@pytest.mark.parametrize("started, finished, name", [(float("nan"), 1.0, "started"), (0.0, float("inf"), "finished"),
                                                     (0.0, float("-inf"), "finished"), ("a", 1.0, "started")])
def test_make_provenance_names_a_bad_time(started, finished, name):
    """Was: nan failed inside datetime ('Invalid value NaN (not a number)'), inf with an OverflowError
    about the platform's time_t, a string with "'str' object cannot be interpreted as an integer"."""
    from fedlib.results import make_provenance

    with pytest.raises(ValueError, match=f"^{name} must be a finite number >= 0"):
        make_provenance(started, finished, command="x")
    assert make_provenance(np.float64(10.0), 12.5, command="x")["wall_time_s"] == 2.5


@pytest.mark.parametrize("history", [3, True, 0.5, np.float64(1.0), object()])
def test_make_result_names_a_history_that_is_no_sequence(history):
    """Was: a history that cannot be iterated raised TypeError ("'int' object is not iterable", "'bool' object is
    not iterable", ...) from the loop over its records, not naming it (a string or a mapping was named)."""
    with pytest.raises(ValueError, match=r"^history must be a sequence of per-round mappings, got "):
        make_result({"rounds": 1}, history, make_provenance(0.0, 1.0, command="x"))


@pytest.mark.parametrize("started, finished, name", [(253402300800.0, 253402300800.0, "started"),
                                                     (0.0, 1e12, "finished"), (0.0, 1e17, "finished"),
                                                     (1e308, 1e308, "started"), (0.0, 10 ** 30, "finished")])
def test_make_provenance_names_a_time_past_the_year_9999(started, finished, name):
    """Was: a finite time from the year 10000 on failed inside datetime, naming neither argument: 253402300800
    and 1e12 with ValueError ('year 10000 is out of range'), 1e17 with OSError ('Value too large for defined
    data type'), 1e308 and 10**30 with OverflowError ('timestamp out of range for platform time_t')."""
    with pytest.raises(ValueError, match=rf"^{name} must be a time.time\(\) value before the year 10000"):
        make_provenance(started, finished, command="x")
    assert make_provenance(0.0, 253402300799.5, command="x")["finished_utc"] == "9999-12-31T23:59:59.500000Z"


@pytest.mark.parametrize("field", ["config", "provenance", "summary", "history", "history[0]"])
def test_make_result_names_a_part_that_is_no_mapping(field):
    """Was: make_result('abc', ...) failed with 'dictionary update sequence element #0 has length 1; 2 is
    required' (and summary=3 with "'int' object is not iterable"), not naming the part."""
    from fedlib.results import make_provenance, make_result

    provenance = make_provenance(0.0, 1.0, command="x")
    args = {"config": {"rounds": 1}, "history": [{"round": 0, "train_loss": 0.5}], "provenance": provenance}
    kw = {}
    if field == "summary":
        kw["summary"] = 3
    elif field == "history[0]":
        args["history"] = [3]
    else:
        args[field] = "abc"
    with pytest.raises(ValueError, match=rf"^{field.replace('[', '.').replace(']', '.')} must be a"):
        make_result(args["config"], args["history"], args["provenance"], **kw)


posix_only = pytest.mark.skipif(os.name != "posix", reason="file modes and umask are POSIX")


@pytest.fixture(name="umask")
def umask_fixture():
    """Set the process umask for one test; restored afterwards (``umask(mask)``). Named ``umask_fixture`` so that
    tests/test_checkpoint.py can import it (``from test_results import umask_fixture``) without its ``umask``
    parameters redefining the import."""
    old = os.umask(0o022)
    os.umask(old)

    def set_(mask):
        os.umask(mask)

    yield set_
    os.umask(old)


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
    """Each was read without a word before: a NaN accuracy or a history with rounds cut out
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


TINY = ["run", "synthetic", "--rounds", "1", "--num-clients", "4", "--quiet"]


def test_a_result_with_a_percentage_accuracy_is_refused(tmp_path):
    # e.g. a history typed in (or converted) from a log that prints 70.5 for 70.5 %: the table1
    # summary multiplies by 100 and would show 7050
    import json

    from fedlib.results import read_result, validate_result

    out = tmp_path / "r.json"
    assert main([*TINY, "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    validate_result(doc)
    doc["history"][0]["test_accuracy"] = 70.5
    with pytest.raises(ValueError, match=r"history\[0\]\.test_accuracy must be a fraction in \[0, 1\]"):
        validate_result(doc)
    out.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="not a percentage"):
        read_result(out)


def test_to_jsonable_refuses_keys_that_are_written_alike():
    """Was: {1: "a", "1": "b"} became {"1": "b"} (str(1) == "1", the second entry replaced the first) without a
    word, as did {None: 1, "None": 2} and {True: 1, "True": 2}; a config or history record lost an entry."""
    for mapping, first, second in (({1: "a", "1": "b"}, "1", "'1'"), ({None: 1, "None": 2}, "None", "'None'"),
                                   ({"x": {True: 1, "True": 2}}, "True", "'True'")):
        with pytest.raises(ValueError, match=rf"^cannot store both keys {first} and {second} in a result record"):
            to_jsonable(mapping)
    assert to_jsonable({1: "a", "2": "b", 3.5: "c"}) == {"1": "a", "2": "b", "3.5": "c"}


def test_to_jsonable_stores_a_path_as_its_string():
    """A path (``os.PathLike``) in a result record is stored as the string ``os.fspath`` gives, at any depth."""
    assert to_jsonable({"out": Path("runs") / "a.json", "more": [Path("/tmp/x")]}) == \
        {"out": os.path.join("runs", "a.json"), "more": [os.sep + os.path.join("tmp", "x")]}


def test_read_result_of_a_folder_names_it(tmp_path):
    """A folder given where a result file is expected (read_json's OSError that is not FileNotFoundError,
    here IsADirectoryError) is a ValueError naming the path and why it cannot be read."""
    with pytest.raises(ValueError, match=rf"^{re.escape(str(tmp_path))}: cannot read \(.*Is a directory"):
        read_result(tmp_path)


def test_read_result_refuses_a_key_written_twice(tmp_path):
    """Was: a result file with a key twice in one object (an edited or merged file: '"lr": 0.1, "lr": 0.5', two
    "history" lists) was read as its last copy without a word (config {'lr': 0.5}); LEAF files were already refused so."""
    text = json.dumps(_result())
    out = tmp_path / "r.json"
    for old, new in (('"lr": 0.02', '"lr": 0.02, "lr": 0.5'), ('"schema"', '"kind": "run", "schema"')):
        assert old in text
        out.write_text(text.replace(old, new, 1))
        with pytest.raises(ValueError, match=rf"^{re.escape(str(out))}: key '(lr|kind)' appears twice in one JSON object"):
            read_result(out)
    out.write_text(text)
    assert read_result(out) == json.loads(text)


# ----------------------------------------------------------------------------- results_folder: found from anywhere
def test_results_folder_finds_the_committed_results_whatever_the_working_folder(tmp_path, monkeypatch):
    """Chapters 5 and 10 read data/results/... relative to the working folder: opened in Jupyter (kernel in book/)
    or executed by papermill elsewhere, chapter 5 found no Table 1 result and stopped on an empty benchmark table.
    results_folder(None, name) is the repository's folder from any working folder (relative where it lies inside)."""
    root = results.REPOSITORY_RESULTS.parents[1]
    for where, relative in ((root, True), (root / "book", False), (tmp_path, False)):
        monkeypatch.chdir(where)
        folder = results_folder(None, "bench")
        assert folder.is_dir() and sorted(folder.glob("cifar10*.json")), folder
        assert (folder == Path("data/results/bench")) if relative else folder.is_absolute()
    with pytest.raises(FileNotFoundError, match=r"^mine: no such folder \(relative to the working folder "):
        results_folder("mine", "bench")
    assert results_folder("mine", "cifar10", create=True) == Path("mine") and (tmp_path / "mine").is_dir()
    assert results_folder(str(tmp_path / "mine"), "cifar10") == tmp_path / "mine"
    for bad in ("", "../bench", "a/b", None):
        with pytest.raises(ValueError, match="committed must name one folder under"):
            results_folder(None, bad)
    monkeypatch.setattr(results, "REPOSITORY_RESULTS", tmp_path / "wheel" / "data" / "results")
    with pytest.raises(FileNotFoundError, match=r"no such folder: the committed results are read from the checkout"):
        results_folder(None, "bench")


def test_no_chapter_reads_a_path_relative_to_the_working_folder():
    """No chapter's code names the repository's data/ or results folders by a path relative to the working folder
    (chapter 5's "data/results/cifar10", chapter 10's "data/results/linearised"): they go through results_folder."""
    import nbformat

    book = results.REPOSITORY_RESULTS.parents[1] / "book"
    found = []
    for nb_path in sorted(book.glob("[0-9]*.ipynb")):
        for cell in nbformat.read(nb_path, as_version=4).cells:
            if cell.cell_type == "code":
                found += [f"{nb_path.name}: {m}" for m in re.findall(r"""["'](?:\.\./)?data/[^"']*["']""", cell.source)]
    assert found == []

"""Result records: schema, provenance, atomic writes, validation (fedlib.results), a summary that disagrees
with its history."""
from __future__ import annotations

import json
import os
import re
import time

import numpy as np
import pytest

from fedlib import results
from fedlib.results import (HISTORY_KEYS, PROVENANCE_KEYS, SCHEMA, RunClock, git_commit, make_provenance, make_result,
                            read_result, to_jsonable, write_result)


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

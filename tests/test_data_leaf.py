"""Tests of the LEAF / FedProx JSON reader and writer (an inferred class count included; a key written twice
refused)."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from fedlib.data.clients import FederatedDataset
from fedlib.data.leaf import load_leaf, save_leaf
from fedlib.data.synthetic import synthetic

from leafutil import leaf_doc as _doc, write_leaf as _write


def _good():
    return _doc(["a", "b"], [[[0.0, 1.0], [2.0, 3.0]], [[4.0, 5.0]]], [[0, 1], [2]])


def _assert_same(a: FederatedDataset, b: FederatedDataset):
    assert a.num_clients == b.num_clients and a.num_classes == b.num_classes
    for k in range(a.num_clients):
        for part in ("train_x", "train_y", "test_x", "test_y"):
            u, v = getattr(a, part)[k], getattr(b, part)[k]
            assert u.shape == v.shape and u.dtype == v.dtype
            np.testing.assert_array_equal(u, v)


@pytest.fixture(scope="module")
def small() -> FederatedDataset:
    return synthetic(num_clients=4, seed=0, num_samples=[55, 60, 12, 70])


# ------------------------------------------------------------------ round trips / layouts


def test_round_trip_folder(tmp_path, small):
    files = save_leaf(small, tmp_path / "ds")
    assert sorted(os.path.relpath(f, tmp_path) for f in files) == ["ds/test/test.json", "ds/train/train.json"]
    back = load_leaf(tmp_path / "ds", num_classes=10)
    _assert_same(small, back)
    assert back.meta["users"] == small.meta["users"] and back.meta["has_test"] is True
    assert back.name == str(tmp_path / "ds")
    # no temporary files are left behind
    assert sorted(os.listdir(tmp_path / "ds" / "train")) == ["train.json"]


def test_round_trip_single_file(tmp_path, small):
    with pytest.raises(ValueError, match="test samples"):
        save_leaf(small, tmp_path / "one.json")
    save_leaf(small, tmp_path / "one.json", drop_test=True)
    back = load_leaf(tmp_path / "one.json", num_classes=10, name="mine")
    assert back.name == "mine" and back.meta["has_test"] is False
    for k in range(small.num_clients):
        np.testing.assert_array_equal(back.train_x[k], small.train_x[k])
        np.testing.assert_array_equal(back.train_y[k], small.train_y[k])
        assert back.test_x[k].shape == (0, 60) and back.test_y[k].shape == (0,)
        assert back.test_y[k].dtype == np.int64


def test_save_overwrites_atomically(tmp_path, small):
    target = tmp_path / "one.json"
    target.write_text("old")
    save_leaf(small, target, drop_test=True)
    assert load_leaf(target).num_clients == 4
    assert os.listdir(tmp_path) == ["one.json"]


def test_save_default_user_ids(tmp_path):
    ds = FederatedDataset([np.ones((2, 3))], [np.array([0, 1])], [np.zeros((0, 3))], [np.zeros(0, np.int64)], 2)
    save_leaf(ds, tmp_path / "f.json")
    assert json.loads((tmp_path / "f.json").read_text())["users"] == ["f_00000"]


def test_fedprox_layout_several_files_merged(tmp_path):
    """train/ and test/ with several files; float labels as FedProx writes them."""
    root = tmp_path / "synthetic_1_1" / "data"
    _write(root / "train" / "a.json", _doc(["u1", "u2"], [[[1.0, 2.0]], [[3.0, 4.0]]], [[1.0], [2.0]]))
    _write(root / "train" / "b.json", _doc(["u3", "u1"], [[[5.0, 6.0]], [[7.0, 8.0]]], [[0.0], [3.0]]))
    _write(root / "test" / "t.json", _doc(["u3", "u2", "u1"], [[[9.0, 9.0]], [], [[1.0, 1.0]]], [[4], [], [0]]))
    ds = load_leaf(root)
    assert ds.meta["users"] == ["u1", "u2", "u3"]
    np.testing.assert_array_equal(ds.train_x[0], [[1.0, 2.0], [7.0, 8.0]])
    np.testing.assert_array_equal(ds.train_y[0], [1, 3])
    assert ds.train_y[0].dtype == np.int64
    np.testing.assert_array_equal(ds.test_x[2], [[9.0, 9.0]])
    assert ds.test_x[1].shape == (0, 2)
    assert ds.num_classes == 5  # max label (4, in test) + 1
    assert ds.num_samples.tolist() == [2, 1, 1]


def test_folder_of_json_files_is_train_only(tmp_path):
    _write(tmp_path / "x" / "1.json", _good())
    _write(tmp_path / "x" / "2.json", _doc(["c"], [[[0.5, 0.5]]], [[0]]))
    ds = load_leaf(tmp_path / "x")
    assert ds.meta["users"] == ["a", "b", "c"] and ds.meta["has_test"] is False
    assert ds.num_classes == 3 and ds.test_x[2].shape == (0, 2)


def test_train_folder_without_test_folder(tmp_path):
    _write(tmp_path / "r" / "train" / "1.json", _good())
    ds = load_leaf(tmp_path / "r")
    assert ds.meta["has_test"] is False and ds.num_clients == 2


def test_num_classes_at_least_two(tmp_path):
    f = _write(tmp_path / "z.json", _doc(["a"], [[[1.0]]], [[0]]))
    assert load_leaf(f).num_classes == 2
    assert load_leaf(f, num_classes=7).num_classes == 7


# ------------------------------------------------------------------ errors


def _raises(path, pattern, **kwargs):
    """load_leaf's ValueError, ``pattern`` searched in its message with the test's own tmp folder cut
    out: that folder holds the test's name ("test_ragged_x0"), so "ragged" matched any message."""
    with pytest.raises(ValueError) as info:
        load_leaf(path, **kwargs)
    msg = str(info.value)
    bare = re.sub(r"\S*pytest-of-[^/\s]+/pytest-[^/\s]+/(?:popen-gw\d+/)?[^/\s]+", "<tmp>", msg)  # -n: popen-gwN/
    assert "test_" not in bare and re.search(pattern, bare), (pattern, msg)
    return msg


def _bad_file(tmp_path, doc, pattern, fname="bad.json", **kwargs):
    f = _write(tmp_path / fname, doc)
    msg = _raises(f, pattern, **kwargs)
    assert fname in msg, msg
    return msg


def test_missing_path(tmp_path):
    _raises(tmp_path / "nope.json", r"nope\.json.*no such file")


def test_empty_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    _raises(tmp_path / "empty", r"empty.*no \.json files")


def test_test_folder_without_train(tmp_path):
    _write(tmp_path / "r" / "test" / "1.json", _good())
    _raises(tmp_path / "r", "no train/ subfolder")


def test_not_json(tmp_path):
    _bad_file(tmp_path, "{not json", "not valid JSON")


def test_not_an_object(tmp_path):
    _bad_file(tmp_path, "[1, 2]", "top level")


@pytest.mark.parametrize("key", ["users", "num_samples", "user_data"])
def test_missing_key(tmp_path, key):
    doc = _good()
    del doc[key]
    _bad_file(tmp_path, doc, f"missing key.*{key}")


def test_num_samples_disagree(tmp_path):
    doc = _good()
    doc["num_samples"] = [2, 5]
    _bad_file(tmp_path, doc, r"'b' num_samples = 5 disagrees")


def test_num_samples_wrong_length(tmp_path):
    doc = _good()
    doc["num_samples"] = [2]
    _bad_file(tmp_path, doc, "num_samples")


def test_user_missing_from_user_data(tmp_path):
    doc = _good()
    del doc["user_data"]["b"]
    _bad_file(tmp_path, doc, r"'b' is in 'users' but missing from 'user_data'")


def test_duplicate_user(tmp_path):
    doc = _good()
    doc["users"] = ["a", "a"]
    _bad_file(tmp_path, doc, "listed twice")


def test_user_entry_without_x(tmp_path):
    doc = _good()
    del doc["user_data"]["a"]["x"]
    _bad_file(tmp_path, doc, "keys 'x' and 'y'")


def test_x_y_length_mismatch(tmp_path):
    doc = _good()
    doc["user_data"]["a"]["y"] = [0]
    _bad_file(tmp_path, doc, "2 rows of x but 1 labels")


def test_ragged_x(tmp_path):
    doc = _good()
    doc["user_data"]["a"]["x"] = [[0.0, 1.0], [2.0]]
    _bad_file(tmp_path, doc, "ragged")


def test_feature_dim_differs_between_users(tmp_path):
    doc = _good()
    doc["user_data"]["b"]["x"] = [[4.0, 5.0, 6.0]]
    _bad_file(tmp_path, doc, "3 features")


@pytest.mark.parametrize("value", ['"1.5"', "null", '{"a": 1}'])
def test_non_numeric_x(tmp_path, value):
    text = json.dumps(_good()).replace("5.0", value)
    _bad_file(tmp_path, text, "non-numeric|not a list|rows of numbers")


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_x(tmp_path, value):
    text = json.dumps(_good()).replace("5.0", value)
    _bad_file(tmp_path, text, "NaN or inf")


@pytest.mark.parametrize("label", [1.5, "1", None, True, [1]])
def test_non_integer_label(tmp_path, label):
    doc = _good()
    doc["user_data"]["a"]["y"] = [0, label]
    _bad_file(tmp_path, doc, "not an integer label")


def test_negative_label(tmp_path):
    doc = _good()
    doc["user_data"]["a"]["y"] = [0, -1]
    _bad_file(tmp_path, doc, "negative")


def test_label_out_of_range(tmp_path):
    _bad_file(tmp_path, _good(), re.escape("out of range [0, 2)"), num_classes=2)


def test_bad_num_classes(tmp_path):
    f = _write(tmp_path / "ok.json", _good())
    _raises(f, "num_classes", num_classes=1)


def test_empty_client(tmp_path):
    doc = _doc(["a", "b"], [[[0.0, 1.0]], []], [[0], []])
    msg = _bad_file(tmp_path, doc, r"'b' has no training samples")
    assert "empty client" in msg


def test_no_users(tmp_path):
    _bad_file(tmp_path, _doc([], [], []), "no users")


def test_train_test_users_differ(tmp_path):
    _write(tmp_path / "r" / "train" / "tr.json", _good())
    _write(tmp_path / "r" / "test" / "te.json", _doc(["a", "c"], [[[0.0, 0.0]], [[1.0, 1.0]]], [[0], [1]]))
    msg = _raises(tmp_path / "r", "test users differ from train users")
    # the test folder is named (a bare "test" in msg held anyway: it is in the tmp folder's name)
    assert msg.startswith(f"{tmp_path / 'r' / 'test'}: ")
    assert "tr.json" in msg and "'c'" in msg and "'b'" in msg


def test_error_in_test_file_names_it(tmp_path):
    _write(tmp_path / "r" / "train" / "tr.json", _good())
    bad = _good()
    bad["user_data"]["a"]["y"] = [0, 0.5]
    _write(tmp_path / "r" / "test" / "te.json", bad)
    msg = _raises(tmp_path / "r", "not an integer label")
    assert "te.json" in msg


def test_test_feature_dim_differs(tmp_path):
    _write(tmp_path / "r" / "train" / "tr.json", _good())
    _write(tmp_path / "r" / "test" / "te.json", _doc(["a", "b"], [[[0.0]], [[1.0]]], [[0], [1]]))
    msg = _raises(tmp_path / "r", "features")
    assert "te.json" in msg and "tr.json" in msg


def test_save_rejects_bad_targets(tmp_path, small):
    with pytest.raises(ValueError, match="dataset"):
        save_leaf("not a dataset", tmp_path / "d")
    with pytest.raises(ValueError, match="does not exist"):
        save_leaf(small, tmp_path / "missing" / "f.json", drop_test=True)
    (tmp_path / "plain").write_text("x")
    with pytest.raises(ValueError, match="not a folder"):
        save_leaf(small, tmp_path / "plain")


# ------------------------------------------------------------------ client order, odd labels, odd paths


def test_clients_are_sorted_by_user_id_as_leaf_and_fedprox_read_them(tmp_path):
    """LEAF's and FedProx's ``read_data`` take ``sorted(data.keys())``: client i here is client i
    there. ``client_order="appearance"`` keeps the order of the files' ``users`` lists."""
    root = tmp_path / "d"
    _write(root / "train" / "s_10.json", _doc(["u_c", "u_a"], [[[1.0]], [[2.0]]], [[0], [1]]))
    _write(root / "train" / "s_2.json", _doc(["u_b"], [[[3.0]]], [[1]]))
    ds = load_leaf(root)
    assert ds.meta["users"] == ["u_a", "u_b", "u_c"]
    assert [x[0, 0] for x in ds.train_x] == [2.0, 3.0, 1.0]
    seen = load_leaf(root, client_order="appearance")  # files by name: s_10.json before s_2.json
    assert seen.meta["users"] == ["u_c", "u_a", "u_b"]
    assert [x[0, 0] for x in seen.train_x] == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="client_order"):
        load_leaf(root, client_order="random")


@pytest.mark.parametrize("y, index", [([1, 1e20], 1), ([0, 2**70], 1), ([2**63, 1], 0), ([3, 2.0**62], 1)])
def test_labels_too_large_for_int64_are_named(tmp_path, y, index):
    doc = _doc(["a"], [[[0.0]] * len(y)], [y])
    msg = _bad_file(tmp_path, doc, rf"'a' y\[{index}\] = .* too large for a label")
    assert "-9223372036854775808" not in msg  # not the value after an int64 overflow


@pytest.mark.parametrize("path", [None, "", 3])
def test_path_must_be_a_path(path):
    with pytest.raises(ValueError, match="path must be a file or folder path"):
        load_leaf(path)


def test_federated_dataset_x_must_be_numbers():
    with pytest.raises(ValueError, match="client 0 train x must hold real numbers"):
        FederatedDataset([np.array([["a", "b"]])], [np.array([0])], [np.zeros((0, 2))], [np.zeros(0, np.int64)], 2)
    ints = FederatedDataset([np.ones((2, 3), dtype=np.int64)], [np.array([0, 1])], [np.zeros((0, 3))],
                            [np.zeros(0, np.int64)], 2)
    assert ints.num_features == 3


def test_a_user_in_user_data_but_not_in_users_is_refused(tmp_path):
    """LEAF's and FedProx's readers take the clients from user_data's keys; load_leaf took them from
    'users' and dropped 'u0' without a word, so client i differed from client i there."""
    doc = _good()
    doc["user_data"]["u0"] = {"x": [[9.0, 9.0]], "y": [1]}
    with pytest.raises(ValueError, match=r"user 'u0' is in 'user_data' but not in 'users'"):
        load_leaf(_write(tmp_path / "a.json", doc))


def _unsorted_dataset():
    xs = [np.full((2, 3), float(i)) for i in range(3)]
    ys = [np.array([i, i]) for i in range(3)]
    return FederatedDataset(xs, ys, [np.zeros((1, 3)) + i for i in range(3)], [np.array([i]) for i in range(3)],
                            num_classes=7, meta={"users": ["b", "c", "a"]})


def test_save_then_load_round_trips_as_documented(tmp_path):
    """save_leaf's Notes: with client_order='appearance' and num_classes given, the same data set;
    the default 'sorted' order of the reference readers sorts the ids (here b, c, a -> a, b, c)."""
    ds = _unsorted_dataset()
    save_leaf(ds, tmp_path / "d")
    _assert_same(load_leaf(tmp_path / "d", num_classes=7, client_order="appearance"), ds)
    by_id = load_leaf(tmp_path / "d")
    assert by_id.meta["users"] == ["a", "b", "c"] and by_id.num_classes == 3
    np.testing.assert_array_equal(by_id.train_x[0], ds.train_x[2])


def test_default_user_ids_sort_in_client_order_past_100000_clients():
    """f_100000 sorted before f_99999: a data set of more than 100,000 clients came back permuted."""
    from fedlib.data.leaf import _user_ids

    small = FederatedDataset([np.zeros((1, 1))] * 3, [np.zeros(1, int)] * 3, [np.zeros((0, 1))] * 3,
                             [np.zeros(0, int)] * 3, num_classes=2)
    assert _user_ids(small) == ["f_00000", "f_00001", "f_00002"]  # the FedProx ids, unchanged
    n = 100_001
    big = FederatedDataset([np.zeros((1, 1))] * n, [np.zeros(1, int)] * n, [np.zeros((0, 1))] * n,
                           [np.zeros(0, int)] * n, num_classes=2)
    ids = _user_ids(big)
    assert ids == sorted(ids) and ids[-1] == "f_100000" and ids[0] == "f_000000"


def test_save_leaf_folder_writes_the_pair_or_nothing(tmp_path, monkeypatch):
    """A failure while the test file is written (a full disk, a kill) left a new train.json next to the
    old test.json, which load_leaf reads as one data set when the user ids match. Now both files are
    written in full before either is renamed over its target."""
    import fedlib._io as io

    old = synthetic(num_clients=3, seed=0)
    save_leaf(old, tmp_path / "d")
    before = {p: p.read_bytes() for p in (tmp_path / "d").rglob("*.json")}
    new = synthetic(num_clients=3, seed=1)
    real_stage = io._stage

    def failing_stage(path, data):
        if path.name == "test.json":
            raise OSError(28, "No space left on device")
        return real_stage(path, data)

    monkeypatch.setattr(io, "_stage", failing_stage)
    with pytest.raises(OSError, match="No space"):
        save_leaf(new, tmp_path / "d")
    assert {p: p.read_bytes() for p in (tmp_path / "d").rglob("*.json")} == before
    assert sorted(p.name for p in (tmp_path / "d").rglob("*")) == ["test", "test.json", "train", "train.json"]


def test_load_leaf_paths_expand_home_and_take_any_pathlike(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    _write(tmp_path / "a.json", _good())
    assert load_leaf("~/a.json").num_clients == 2
    entry = next(e for e in os.scandir(tmp_path) if e.name == "a.json")
    assert load_leaf(entry).num_clients == 2
    with pytest.raises(ValueError, match="path must be a file or folder path"):
        load_leaf(b"/tmp/a.json")


def test_atomic_writes_flush_the_folder_after_renaming(tmp_path, monkeypatch):
    """After the renames, each target folder is fsync-ed once (a rename is only durable across a power
    loss once its folder's entries are on disk)."""
    import fedlib._io as io

    synced = []
    monkeypatch.setattr(io, "_fsync_folder", lambda folder: synced.append(folder))
    save_leaf(synthetic(num_clients=2, seed=0), tmp_path / "d")
    assert synced == [tmp_path / "d" / "train", tmp_path / "d" / "test"]
    io.atomic_write_all([(tmp_path / "a.txt", "1"), (tmp_path / "b.txt", "2")])
    assert synced[2:] == [tmp_path]


def _dataset_case(**change):
    """Two clients (train 2 and 3 samples, test 1 each, 3 features, labels in 0..1), with ``change`` applied."""
    parts = dict(train_x=[np.ones((2, 3)), np.ones((3, 3))], train_y=[np.array([0, 1]), np.array([1, 0, 1])],
                 test_x=[np.ones((1, 3)), np.ones((1, 3))], test_y=[np.array([0]), np.array([1])], num_classes=2)
    parts.update(change)
    return parts


@pytest.mark.parametrize("change, match", [
    (dict(train_x=[], train_y=[], test_x=[], test_y=[]), "the data set has no clients"),
    (dict(train_y=[np.array([0, 1])]), "train_y has 1 clients but train_x has 2"),
    (dict(test_x=[np.ones((1, 3))]), "test_x has 1 clients"),
    (dict(test_y=[np.array([0])] * 3), "test_y has 3 clients"),
    (dict(num_classes=1), "num_classes must be an integer >= 2"),
    (dict(num_classes=2.0), "num_classes must be an integer >= 2"),
    (dict(train_x=[np.ones(2), np.ones((3, 3))]), r"client 0 train x must be 2-d"),
    (dict(test_y=[np.array([[0]]), np.array([1])]), r"client 0 test y has shape \(1, 1\), expected \(1,\)"),
    (dict(train_y=[np.array([0, 1]), np.array([1, 0])]), r"client 1 train y has 2 labels but its train x has 3 rows"),
    (dict(train_x=[np.ones((2, 3)), np.ones((0, 3))], train_y=[np.array([0, 1]), np.zeros(0, int)]),
     "client 1 has no training samples"),
    (dict(test_x=[np.ones((1, 3)), np.ones((1, 4))]), "client 1 test x has 4 features but client 1 train x has 3"),
    (dict(train_x=[np.ones((2, 3)), np.full((3, 3), np.nan)]), "client 1 train x contains NaN or inf"),
    (dict(test_y=[np.array([0]), np.array([2])]), r"client 1 test labels must be integers in \[0, 2\)"),
    (dict(train_y=[np.array([0, -1]), np.array([1, 0, 1])]), r"client 0 train labels must be integers in \[0, 2\)"),
    (dict(train_y=[np.array([0.0, 1.0]), np.array([1, 0, 1])]), r"client 0 train labels must be integers .* dtype float64"),
])
def test_federated_dataset_names_what_is_wrong(change, match):
    """Every check of FederatedDataset (a user's own data goes through it) names the data set, the client,
    the part (train/test) and the problem; the unchanged case is accepted."""
    assert FederatedDataset(**_dataset_case(), name="mine").num_clients == 2
    with pytest.raises(ValueError, match=f"^mine: {match}"):
        FederatedDataset(**_dataset_case(**change), name="mine")


# --------------------------------------------------------------------------- an inferred class count
def _leaf_file(folder: Path, labels_b) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"users": ["a", "b"], "num_samples": [2, len(labels_b)],
           "user_data": {"a": {"x": [[0.0, 1.0], [1.0, 0.0]], "y": [0, 1]},
                         "b": {"x": [[0.5, 0.5]] * len(labels_b), "y": list(labels_b)}}}
    path = folder / "d.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("label", [10**6, 10**9, 2**62 - 1])
def test_an_id_for_a_label_is_refused_where_the_class_count_is_inferred(tmp_path, label):
    """num_classes is the largest label plus one when not given: a label like 10**9 (an id, not a
    class number) made a data set of 10**9 + 1 classes, and 2**62 - 1 one of 2**62 classes, which
    failed only in the first model (python -m fedlib run synthetic --data, under ulimit -v 6000000:
    "out of memory (... shape (2, 1000000001) ...) the flags ask for more than this machine holds",
    and numpy's "array is too big" for 2**62 - 1, naming neither the label nor the file). Refused
    at load time now, naming the label, above 1,000,000 classes (the
    bound of dirichlet_partition); with num_classes given it loads."""
    from cliutil import cli_exit

    from fedlib.data import load_leaf

    path = _leaf_file(tmp_path, [1, label])
    want = (f"{path}: user 'b' y[1] = {label} would make num_classes {label + 1} (the largest label plus one; a "
            "model has one output per class), more than the 1000000 inferred at most: labels must be class numbers "
            "0..K-1, not ids; renumber them, or give num_classes")
    with pytest.raises(ValueError) as info:
        load_leaf(path)
    assert str(info.value) == want
    rc, out, err = cli_exit(["run", "synthetic", "--data", str(path), "--rounds", "1", "--quiet"])
    assert rc == 2 and err.rstrip().endswith("error: --data: " + want), err
    assert load_leaf(path, num_classes=label + 1).num_classes == label + 1


def test_the_largest_inferred_class_count_is_one_million(tmp_path):
    from fedlib.data import load_leaf

    assert load_leaf(_leaf_file(tmp_path, [1, 10**6 - 1])).num_classes == 10**6


@pytest.mark.parametrize("text,match", [
    # user 'a' written twice in user_data: the first copy's samples were lost (num_samples agreed with the last)
    ('{"users": ["a", "b"], "num_samples": [2, 1], "user_data": {'
     '"a": {"x": [[1.0, 2.0], [3.0, 4.0]], "y": [0, 1]}, '
     '"b": {"x": [[5.0, 6.0]], "y": [1]}, '
     '"a": {"x": [[7.0, 8.0], [9.0, 10.0]], "y": [1, 0]}}}', r"train\.json: key 'a' appears twice"),
    # a key written twice inside one user's entry
    ('{"users": ["a"], "num_samples": [1], "user_data": {'
     '"a": {"x": [[1.0, 2.0]], "y": [0], "x": [[3.0, 4.0]]}}}', "key 'x' appears twice"),
])
def test_leaf_key_written_twice_is_refused(tmp_path, text, match):
    """JSON keeps only the last of two equal keys, so a key written twice lost its first copy silently."""
    f = tmp_path / "train.json"
    f.write_text(text)
    with pytest.raises(ValueError, match=match):
        load_leaf(f)


def test_leaf_without_duplicates_still_reads(tmp_path):
    text = ('{"users": ["a"], "num_samples": [2], "user_data": {'
            '"a": {"x": [[1.0, 2.0], [3.0, 4.0]], "y": [0, 1]}}}')
    f = tmp_path / "train.json"
    f.write_text(text)
    ds = load_leaf(f)
    assert ds.train_x[0].tolist() == [[1.0, 2.0], [3.0, 4.0]] and ds.train_y[0].tolist() == [0, 1]


def test_load_leaf_names_an_array_given_for_client_order(tmp_path):
    """Was: client_order=np.array([]) (or of several entries) raised numpy's 'The truth value of an empty array is
    ambiguous' from `client_order not in (...)`, naming nothing."""
    for order in (np.array([]), np.array(["sorted", "appearance"])):
        with pytest.raises(ValueError, match=r"^client_order must be 'sorted' or 'appearance', got "):
            load_leaf(tmp_path, client_order=order)


def test_save_leaf_drop_test_must_be_a_bool(tmp_path):
    """Was: any truthy drop_test dropped the test sets of a single-file save ("no", 1, "False" wrote a train-only
    file without a word), any falsy one refused the file; count_parameters' trainable_only is refused the same way."""
    ds = synthetic(num_clients=2, dim=3, num_classes=3, num_samples=[10, 12], seed=0)
    for bad in ("no", "False", 1, 0, None):
        with pytest.raises(ValueError, match=r"^drop_test must be True or False, got "):
            save_leaf(ds, tmp_path / "one.json", drop_test=bad)
    assert not (tmp_path / "one.json").exists()
    assert save_leaf(ds, tmp_path / "one.json", drop_test=np.bool_(True)) == [str(tmp_path / "one.json")]


def test_load_leaf_refuses_a_path_that_is_neither_file_nor_folder(tmp_path):
    """/dev/null (or a FIFO) exists and is no regular file, so it was listed as a folder: iterdir() raised
    NotADirectoryError ('[Errno 20] Not a directory'), which 'run synthetic --data /dev/null' reported with
    exit status 1 (a file system failure) instead of 2 (a bad --data)."""
    from cliutil import cli_exit

    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    for path in (os.devnull, fifo):
        with pytest.raises(ValueError, match="neither a file nor a folder"):
            load_leaf(path)
    rc, _, err = cli_exit(["run", "synthetic", "--rounds", "1", "--quiet", "--data", os.devnull,
                           "--out", str(tmp_path / "r.json")])
    assert rc == 2 and f"--data: {os.devnull}: neither a file nor a folder" in err
    assert not (tmp_path / "r.json").exists()

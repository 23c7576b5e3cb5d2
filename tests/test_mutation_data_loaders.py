"""Tests added from mutation testing of fedlib.data.leaf, fedlib.data.cifar10 and
fedlib.data.clients.

The inputs are tiny hand-written LEAF JSON documents and CIFAR-format batches pickled into
``tmp_path``; every expected value (a label index, a row number, a pixel) can be read off
the input.  Error messages are matched in full from their start (the file name, then the
problem), because ``tmp_path`` holds the test's name and a loose pattern such as
``"ragged"`` would otherwise match the path instead of the message.

Mutants of d562d43..c3b27eb, the bounded CIFAR-10 download (fedlib/data/cifar10.py) (pass described in
tests/README.md, Mutation passes).

Mutants of fb91484..97fac41 (fedlib/data/leaf.py: _is_data_name, _data_folders, _reads_as_data, load_leaf's folders;
fedlib/cli/common.py: check_not_input's message) (pass described in tests/README.md, Mutation passes): 9 mutants
(ids as drafted), one at a time, ``pytest -x`` on test_cli_paths.py, test_data_leaf.py, this file,
test_bad_inputs.py, test_leaf_content_fingerprint.py and test_cli_table1_modes.py: 6 killed by the suite, 3 here, 0
equivalent.
  killed by the suite: LF1 '.JSON' not a data name; LF2 test/ read when missing; LF3 test/ without train/ not
  refused; LF7 ``and`` -> ``or`` (any .json name refused); LF8 the folders compared unresolved; LF11 the message
  naming the --data folder, not train/ and test/.
  killed here: LF4 every output read as data from a folder load_leaf refuses; LF5 a link looked at by its target
  only; LF6 a link looked at by its own name only.

Mutants of 0e9da1f..c5aa211 (fedlib/data/cifar10.py, 53f549c: the offline error's quoted tar command) (pass
described in tests/README.md, Mutation passes): 3 mutants, one at a time, ``pytest -x -q`` on ``test_cifar_data.py -k
download``: 3 killed by the suite (test_cifar10_download_without_network_says_what_to_do), 0 equivalent.
  CF1 the folder bare again; CF2 ``root / BATCH_FOLDER`` quoted for ``root``; CF3 the folder's name alone.
Mutants of c5aa211..361d535 (fedlib/data/cifar10.py, 1d1ee6c: ``_rows_to_nhwc``, ``_read_split`` writing each batch into
its slice) (pass described in tests/README.md, Mutation passes): 9 mutants, one at a time, ``pytest -x -q`` on
test_cifar_data.py (the real CIFAR-10 present), this file and test_bad_inputs.py: 5 killed by the suite, 1 here, 3
equivalent.
  RN1 two colour planes written; RN2 the planes reversed; RN3 ``np.zeros`` for ``np.empty``; RN4 ``start`` not
  advanced; RN5 each batch written from its start to the end; RN6 one batch's labels concatenated (copied) too; RN7
  the images counted by rows; RN8 ``_read_batch`` returning the rows; RN9 the rows read as pixel-interleaved.
  killed by the suite: RN1, RN2, RN4, RN5, RN9 (test_cifar_data.py). killed here: RN8
  (test_read_batch_gives_nhwc_images_pixel_by_pixel; ``_read_batch``, used by no loader since 1d1ee6c, was
  removed since: the test reads the batch through ``_read_split``).
  equivalent: RN3 (every element is written), RN6 (the same labels, copied), RN7 (``_read_batch_rows`` refuses a
  batch whose labels and rows differ in number).
Mutants of 41ab8e8..3aae5f7 (fedlib/data/cifar10.py, 2406589: ``_read_split`` reading one batch at a time, its
result grown or shrunk with ``ndarray.resize``) (pass described in tests/README.md, Mutation passes): 7 mutants (ids
as drafted: gaps are drafts not run), one at a time, ``pytest -x -q`` on test_cifar_data.py and this file; survivors
re-run against test_bad_inputs.py and the doctests of fedlib.data.cifar10: 2 killed by the suite, 2 here, 3
equivalent.
  RS1 ``index == 0 or`` dropped; RS2 ``end >= len(images)``; RS3 room for one batch more; RS4 ``del rows`` dropped;
  RS5 ``start > len(images)`` (the result never shrunk); RS6 the room from this batch alone (``len(rows) *
  (len(names) - index)``, not ``end + ...``); RS7 the first resize with ``refcheck=True``.
  killed by the suite: RS3 (test_cifar_data.py::test_batches_are_read_one_at_a_time), RS5. killed here: RS4
  (test_a_split_holds_one_raw_batch_at_a_time), RS6 (test_a_last_batch_larger_than_the_room_left_grows_the_result).
  equivalent: RS1 (a first batch with rows is resized by ``end > len(images)`` as well, an empty one to 0 rows, a
  no-op); RS2 (a batch that fills the room exactly also grows it, by its size times the batches left, and the last
  resize trims it back: the same arrays; only a transient allocation differs, and not for the official splits, whose
  equal batches fill the room exactly at the last one, with none left); RS7 (numpy refuses the resize only for an
  array with another reference, and none exists: the slice each batch is written into is gone; ``refcheck=False``
  stays for a tracer or debugger holding the frame's locals).
"""
from __future__ import annotations

import pickle
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from fedlib.data import cifar10 as cf
from fedlib.data.clients import FederatedDataset
from fedlib.data.leaf import _user_ids, load_leaf, save_leaf

from leafutil import leaf_doc as _doc, write_leaf as _write


# --------------------------------------------------------------------------- LEAF helpers
def _refused(path, message, **kwargs):
    """load_leaf(path) raises ValueError whose message is ``message`` (a literal) from its start."""
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        load_leaf(path, **kwargs)


def _one_user(tmp_path, x, y, count=None):
    """A single-file data set with the one user ``'a'``; returns the file."""
    return _write(tmp_path / "d.json", _doc(["a"], [x], [y], None if count is None else [count]))


def _fd(train_x, test_x, num_classes=2):
    """A FederatedDataset named 'mine' with the given x arrays and all labels 0."""
    return FederatedDataset(
        [np.asarray(x, dtype=np.float64) for x in train_x],
        [np.zeros(len(x), dtype=np.int64) for x in train_x],
        [np.asarray(x, dtype=np.float64) for x in test_x],
        [np.zeros(len(x), dtype=np.int64) for x in test_x],
        num_classes=num_classes, name="mine",
    )


# --------------------------------------------------------------------------- LEAF: layout
def test_a_folder_reads_only_its_json_files(tmp_path):
    _write(tmp_path / "part.json", _doc(["a"], [[[1.0, 2.0]]], [[1]]))
    (tmp_path / "notes.txt").write_text("not json")
    (tmp_path / "old.json").mkdir()  # a folder named like a file is not a file
    ds = load_leaf(tmp_path)
    assert ds.num_clients == 1 and ds.meta["train_files"] == [str(tmp_path / "part.json")]
    np.testing.assert_array_equal(ds.train_x[0], [[1.0, 2.0]])


# --------------------------------------------------------------------------- LEAF: x
def test_x_that_is_not_a_list_is_named(tmp_path):
    f = _one_user(tmp_path, 5, [0])
    _refused(f, f"{f}: user 'a' x must be a list of rows, got int")


def test_ragged_x_names_the_first_short_row(tmp_path):
    f = _one_user(tmp_path, [[0.0, 1.0], [2.0, 3.0], [4.0]], [0, 1, 0])
    _refused(f, f"{f}: user 'a' x is ragged: row 0 has 2 values, row 2 has 1")


def test_a_row_that_is_not_a_list_is_named(tmp_path):
    f = _one_user(tmp_path, [[0.0, 1.0], 5], [0, 1])
    _refused(f, f"{f}: user 'a' x row 1 is not a list of numbers (got int)")


def test_x_nested_too_deeply_is_refused(tmp_path):
    f = _one_user(tmp_path, [[[0.0, 1.0]], [[2.0, 3.0]]], [0, 1])
    _refused(f, f"{f}: user 'a' x must be a list of rows of numbers (nested too deeply)")


def test_rows_without_features_are_refused(tmp_path):
    f = _one_user(tmp_path, [[], []], [0, 1])
    _refused(f, f"{f}: user 'a' x rows are empty (0 features)")


def test_non_finite_x_names_its_row(tmp_path):
    # NaN in row 2, column 0: the message gives the row (2), not the column (0)
    f = _one_user(tmp_path, [[0.0, 1.0], [2.0, 3.0], [float("nan"), 4.0]], [0, 1, 0])
    _refused(f, f"{f}: user 'a' x contains NaN or inf (row 2)")


# --------------------------------------------------------------------------- LEAF: y
def test_y_that_is_not_a_list_is_named(tmp_path):
    f = _one_user(tmp_path, [[0.0]], 3, count=1)
    _refused(f, f"{f}: user 'a' y must be a list of labels, got int")


def test_negative_label_is_named(tmp_path):
    f = _one_user(tmp_path, [[0.0], [1.0]], [0, -1])
    _refused(f, f"{f}: user 'a' y[1] = -1 is negative")


@pytest.mark.parametrize("y, index", [
    ([-2**63, 2**70], 1),        # the smallest int64 is in range: the too-large one is y[1]
    ([2**63, 2**70], 0),         # 2**63 is one past the largest int64
    ([-200, 2**70], 1),
    ([200, 2**70], 1),
    ([2**62, 2**70], 1),
    ([-2**62 - 1, 2**70], 1),
    ([0, -2**63 - 1], 1),        # one below the smallest int64
    ([0, -2**64], 1),
])
def test_the_first_label_outside_int64_is_named(tmp_path, y, index):
    # integers outside int64 make numpy build an object array; the reader names the first such label
    f = _one_user(tmp_path, [[0.0], [1.0]], y)
    _refused(f, f"{f}: user 'a' y[{index}] = {y[index]!r} is too large for a label")


def test_labels_up_to_two_to_the_62_are_accepted(tmp_path):
    """Up to 2**62 - 1 with num_classes given. Inferred, the class count is the largest label plus
    one, and a label of 2**62 - 1 made a data set of 2**62 classes that failed later, in the first
    model allocation ("array is too big"): an inferred count is at most 1,000,000, as in
    dirichlet_partition (tests/test_data_leaf.py)."""
    big = 2**62 - 1
    assert load_leaf(_one_user(tmp_path / "ok", [[0.0], [1.0]], [0, big]), num_classes=big + 1).num_classes == big + 1
    assert load_leaf(_one_user(tmp_path / "mid", [[0.0], [1.0]], [0, 200])).num_classes == 201
    f = _one_user(tmp_path / "no", [[0.0], [1.0]], [0, 2**62])
    _refused(f, f"{f}: user 'a' y[1] = {2**62} is too large for a label")


# --------------------------------------------------------------------------- LEAF: document
def test_users_must_be_a_list_of_strings(tmp_path):
    doc = _doc(["a", "b"], [[[0.0]], [[1.0]]], [[0], [1]])
    doc["users"] = "ab"  # iterating gives 'a', 'b': a lenient reader would load it
    f = _write(tmp_path / "d.json", doc)
    _refused(f, f"{f}: 'users' must be a list of strings")


def test_the_user_listed_twice_is_named(tmp_path):
    doc = _doc(["a", "b"], [[[0.0]], [[1.0]]], [[0], [1]])
    doc["users"] = ["a", "b", "b"]
    doc["num_samples"] = [1, 1, 1]
    f = _write(tmp_path / "d.json", doc)
    _refused(f, f"{f}: user 'b' is listed twice in 'users'")


def test_user_data_must_be_an_object(tmp_path):
    doc = _doc(["a"], [[[0.0]]], [[0]])
    doc["user_data"] = []
    f = _write(tmp_path / "d.json", doc)
    _refused(f, f"{f}: 'user_data' must be an object mapping user -> {{x, y}}")


@pytest.mark.parametrize("count", [1.0, True])
def test_num_samples_must_be_an_integer(tmp_path, count):
    f = _one_user(tmp_path, [[0.0]], [0], count=count)  # equal to 1, but not an int
    _refused(f, f"{f}: user 'a' num_samples = {count!r} is not an integer")


def test_num_classes_one_is_refused_before_reading(tmp_path):
    f = _one_user(tmp_path, [[0.0]], [0])
    _refused(f, "num_classes must be an integer >= 2, got 1", num_classes=1)


@pytest.mark.parametrize("m, last", [(99_999, "f_99998"), (100_000, "f_99999"), (100_001, "f_100000")])
def test_default_ids_widen_only_past_100000_clients(m, last):
    # five digits while the largest index (m - 1) has at most five; a stand-in with the two
    # attributes read, instead of a data set of 100,000 clients
    ids = _user_ids(SimpleNamespace(meta={}, num_clients=m))
    assert len(ids) == m and ids[0] == "f_" + "0" * (len(last) - 2) and ids[-1] == last


def test_save_leaf_writes_no_nan_json(tmp_path):
    ds = _fd([np.ones((2, 3))], [np.zeros((0, 3))])
    ds.train_x[0][1, 2] = np.inf  # arrays stay writable: changed after the checks
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        save_leaf(ds, tmp_path / "d.json", drop_test=True)
    assert not (tmp_path / "d.json").exists()


def test_feature_dims_differing_within_a_split_name_both_files(tmp_path):
    first = _write(tmp_path / "train" / "1.json", _doc(["a"], [[[0.0, 1.0]]], [[0]]))
    second = _write(tmp_path / "train" / "2.json", _doc(["b"], [[[0.0, 1.0, 2.0]]], [[1]]))
    _refused(tmp_path, f"{second}: user 'b' x has 3 features, but {first} has 2")


# --------------------------------------------------------------------------- FederatedDataset
def test_an_empty_test_set_of_another_width_is_accepted_and_not_the_reference():
    # client 0's test set is (0, 5): empty, so its width neither fails nor becomes the width
    # client 1 is checked against (3, from client 0's training set)
    ds = _fd([np.ones((2, 3)), np.ones((1, 3))], [np.zeros((0, 5)), np.ones((1, 3))])
    assert ds.num_features == 3 and ds.num_clients == 2


def test_a_client_with_zero_features_is_refused_when_others_have_three():
    with pytest.raises(ValueError, match=r"^mine: client 1 train x has 0 features but client 0 train x has 3$"):
        _fd([np.ones((2, 3)), np.ones((2, 0))], [np.zeros((0, 3)), np.zeros((0, 3))])


# --------------------------------------------------------------------------- CIFAR-10 helpers
def _pickle(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        pickle.dump(obj, fh)
    return path


def _batch(path, data, labels):
    return _pickle(path, {"batch_label": "hand-made", "data": data, "labels": labels})


def _rows(values):
    """One CIFAR row per value: every pixel of image k (all three planes) equals values[k]."""
    return np.repeat(np.asarray(values, dtype=np.uint8)[:, None], 3072, axis=1)


def _batch_folder(root, first=0):
    """A full batch folder with two images per batch: batch b (data_batch_1.., then test_batch)
    holds images filled with first + 2b and first + 2b + 1, labelled b and 9 - b."""
    folder = root / cf.BATCH_FOLDER
    for b, name in enumerate(cf.TRAIN_FILES + (cf.TEST_FILE,)):
        _batch(folder / name, _rows([first + 2 * b, first + 2 * b + 1]), [b, 9 - b])
    return folder


# --------------------------------------------------------------------------- CIFAR-10: batches
def test_a_read_error_is_passed_on_as_is(tmp_path, monkeypatch):
    path = _batch(tmp_path / "data_batch_1", _rows([0]), [0])

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(cf, "open", refuse, raising=False)  # the module's open, not the builtin
    with pytest.raises(PermissionError, match="Permission denied"):
        cf._read_split(path.parent, [path.name])


def test_a_dict_without_labels_is_named_with_its_keys(tmp_path):
    path = _pickle(tmp_path / "data_batch_1", {"data": _rows([0, 1]), "fine_labels": [0, 1]})
    with pytest.raises(ValueError, match="^" + re.escape(
            f"{path}: expected a dict with 'data' and 'labels' (a CIFAR-10 batch), got ['data', 'fine_labels']")):
        cf._read_split(path.parent, [path.name])


def test_ragged_labels_are_refused(tmp_path):
    path = _batch(tmp_path / "data_batch_1", _rows([0, 1]), [[0, 1], [2]])
    with pytest.raises(ValueError, match="^" + re.escape(f"{path}: 'labels' is not a list of integers (")):
        cf._read_split(path.parent, [path.name])


def test_float_labels_are_refused(tmp_path):
    path = _batch(tmp_path / "data_batch_1", _rows([0, 1]), [0.0, 1.0])
    with pytest.raises(ValueError, match="^" + re.escape(f"{path}: 'labels' must be integers, got dtype float64")):
        cf._read_split(path.parent, [path.name])


def test_a_last_batch_larger_than_the_room_left_grows_the_result(tmp_path):
    """_read_split sizes its result from the first batch (five batches of 1 image: room for 5) and grows it for a
    batch that does not fit: after four batches of 1 image (rows 0-3), a fifth of 9 needs rows 4-12, so 13 rows.
    Sizing it by the batch alone, 9 times the batches left (mutant RS6), made room for 9 rows only. Image k of the
    fifth batch is filled with 10 + k: rows 0-3 hold 0-3, rows 4-12 hold 10-18."""
    names = [f"data_batch_{b}" for b in range(1, 6)]
    for b, name in enumerate(names[:4]):
        _batch(tmp_path / name, _rows([b]), [b])
    _batch(tmp_path / names[4], _rows(range(10, 19)), [k % 10 for k in range(9)])
    images, labels = cf._read_split(tmp_path, names)
    assert images.shape == (13, 32, 32, 3)
    assert images[:, 0, 0, 0].tolist() == [0, 1, 2, 3] + list(range(10, 19))
    assert bool((images == images[:, :1, :1, :1]).all())  # every pixel and plane of an image: its one value
    assert labels.tolist() == [0, 1, 2, 3] + list(range(9))


def test_a_split_holds_one_raw_batch_at_a_time(tmp_path):
    """While a split is read, one unpickled batch is held besides the result: the train split of five batches of
    1,000 images peaks at its result plus one batch (a test batch of 10 images keeps the test split's part small).
    Keeping the last batch's rows until the next one is unpickled (mutant RS4, no ``del rows``) held two: 2.0 batches
    above the result against 1.0 (the bound here is 1.5)."""
    import tracemalloc

    folder = tmp_path / cf.BATCH_FOLDER
    rng = np.random.default_rng(0)
    for name, n in zip(cf.TRAIN_FILES + (cf.TEST_FILE,), (1000,) * 5 + (10,)):
        _batch(folder / name, rng.integers(0, 256, size=(n, 3072), dtype=np.uint8), [k % 10 for k in range(n)])
    batch_bytes = 1000 * 3072
    tracemalloc.start()
    try:
        got = cf.load_cifar10(tmp_path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    result_bytes = sum(array.nbytes for array in got[:4])
    assert peak < result_bytes + 1.5 * batch_bytes, (peak - result_bytes) / batch_bytes


# --------------------------------------------------------------------------- CIFAR-10: download
def _fake_torchvision(monkeypatch, calls, create=True):
    """A stand-in torchvision whose CIFAR10(root, train, download) records the call and, if
    ``create``, writes a hand-made batch folder into root (as the real one extracts the archive)."""
    def cifar10(root, train, download):
        calls.append((root, train, download))
        if create:
            _batch_folder(Path(root))

    monkeypatch.setitem(sys.modules, "torchvision", SimpleNamespace(datasets=SimpleNamespace(CIFAR10=cifar10)))


def test_download_calls_torchvision_for_the_training_set_into_an_existing_root(tmp_path, monkeypatch):
    calls = []
    _fake_torchvision(monkeypatch, calls)
    got = cf.load_cifar10(tmp_path, download=True)  # tmp_path exists: the root may already be there
    assert calls == [(str(tmp_path), True, True)]
    assert got.source == str(tmp_path / cf.BATCH_FOLDER)
    assert got.train_labels.tolist() == [0, 9, 1, 8, 2, 7, 3, 6, 4, 5] and got.test_labels.tolist() == [5, 4]
    assert got.train_images[:, 0, 0, 0].tolist() == list(range(10)) and got.test_images[:, 5, 7, 2].tolist() == [10, 11]


def test_a_download_that_leaves_no_batch_folder_is_reported(tmp_path, monkeypatch):
    calls = []
    _fake_torchvision(monkeypatch, calls, create=False)
    with pytest.raises(FileNotFoundError, match="^" + re.escape(
            f"download finished but {tmp_path / cf.BATCH_FOLDER} does not exist")):
        cf.load_cifar10(tmp_path, download=True)
    assert len(calls) == 1


def test_download_without_torchvision_says_so(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torchvision", None)  # import torchvision raises ImportError
    with pytest.raises(RuntimeError, match="^download=True needs torchvision installed$"):
        cf.load_cifar10(tmp_path, download=True)


# --------------------------------------------------------------------------- CIFAR-10: .npz files
def _sample_npz(path, train_labels, test_labels, n_train=2, n_test=1):
    np.savez(path, train_images=np.zeros((n_train, 32, 32, 3), np.uint8), train_labels=train_labels,
             test_images=np.zeros((n_test, 32, 32, 3), np.uint8), test_labels=test_labels)
    return path


def test_sample_labels_must_match_the_images_in_number(tmp_path):
    f = _sample_npz(tmp_path / "s.npz", np.array([0, 1, 2]), np.array([3]))  # 2 images, 3 labels
    with pytest.raises(ValueError, match="^" + re.escape(f"{f}: train_labels must be 2 integers, got int64 (3,)")):
        cf.load_cifar10_sample(f)


def test_sample_labels_must_be_integers(tmp_path):
    f = _sample_npz(tmp_path / "s.npz", np.array([0.0, 1.0]), np.array([3]))
    with pytest.raises(ValueError, match="^" + re.escape(f"{f}: train_labels must be 2 integers, got float64 (2,)")):
        cf.load_cifar10_sample(f)


def test_label_file_labels_must_be_a_vector(tmp_path):
    f = tmp_path / "l.npz"
    np.savez(f, train_labels=np.array([[0], [1]]), test_labels=np.array([2]))
    with pytest.raises(ValueError, match="^" + re.escape(
            f"{f}: train_labels must be a vector of integers, got int64 (2, 1)")):
        cf.load_cifar10_labels(f)


@pytest.mark.parametrize("bad", [10, -1])
def test_label_ten_is_out_of_range(tmp_path, bad):
    f = _sample_npz(tmp_path / "s.npz", np.array([9, 0]), np.array([bad]))
    with pytest.raises(ValueError, match="^" + re.escape(f"{f}: test_labels must lie in 0..9")):
        cf.load_cifar10_sample(f)
    assert cf.load_cifar10_sample(_sample_npz(tmp_path / "ok.npz", np.array([9, 0]), np.array([5]))).test_labels.tolist() == [5]


def test_an_npz_holding_a_pickled_object_array_is_not_unpickled(tmp_path):
    f = tmp_path / "l.npz"
    np.savez(f, train_labels=np.array([0, None], dtype=object), test_labels=np.array([1]))
    with pytest.raises(ValueError, match="^" + re.escape(f"{f}: not a readable .npz file (ValueError: Object arrays")):
        cf.load_cifar10_labels(f)


def test_a_file_that_is_not_an_npz_is_named(tmp_path):
    f = tmp_path / "l.npz"
    f.write_text("not a zip archive")
    with pytest.raises(ValueError, match="^" + re.escape(f"{f}: not a readable .npz file (")):
        cf.load_cifar10_labels(f)


def test_random_images_are_the_documented_draws(tmp_path):
    # pixels: default_rng(seed).integers(0, 256) for the training images, then the test images
    f = tmp_path / "l.npz"
    np.savez(f, train_labels=np.array([3, 1, 4]), test_labels=np.array([1, 5]))
    got = cf.cifar10_random_images(path=f)  # seed 0 by default
    rng = np.random.default_rng(0)
    train = rng.integers(0, 256, size=(3, 32, 32, 3), dtype=np.uint8)
    test = rng.integers(0, 256, size=(2, 32, 32, 3), dtype=np.uint8)
    assert np.array_equal(got.train_images, train) and np.array_equal(got.test_images, test)
    assert got.train_labels.tolist() == [3, 1, 4] and got.test_labels.tolist() == [1, 5]
    for images in (got.train_images, got.test_images):  # 9,216 and 6,144 draws: both ends occur
        assert images.min() == 0 and images.max() == 255


# ------------------------------------------------ the bounded CIFAR-10 download: mutants of d562d43..c3b27eb
class _FakeCifar10:
    """Stands in for torchvision.datasets.CIFAR10: records socket's default timeout when the download
    starts and fails as ``error`` (no network is touched)."""

    url = "https://example.invalid/cifar-10-python.tar.gz"
    seen: list = []
    error: Exception = OSError("unreachable")

    def __init__(self, root, train=True, download=False):
        import socket

        type(self).seen.append(socket.getdefaulttimeout())
        raise type(self).error


def test_load_cifar10_bounds_both_downloads_and_restores_the_timeout(tmp_path, monkeypatch):
    """The timeout is socket's default during the first download (no folder yet) and during the
    download that completes an interrupted extraction (a batch folder lacking files), and afterwards
    the default is what it was, also when the download fails."""
    import socket
    import urllib.error

    import torchvision

    from fedlib.data.cifar10 import BATCH_FOLDER, TRAIN_FILES, load_cifar10

    monkeypatch.setattr(torchvision.datasets, "CIFAR10", _FakeCifar10)
    monkeypatch.setattr(_FakeCifar10, "seen", [])
    before = socket.getdefaulttimeout()
    partial = tmp_path / "partial"
    (partial / BATCH_FOLDER).mkdir(parents=True)
    (partial / BATCH_FOLDER / TRAIN_FILES[0]).write_bytes(b"")  # an interrupted extraction
    for root in (tmp_path / "fresh", partial):
        with pytest.raises(OSError, match=r"CIFAR-10 download into .* failed \(OSError: unreachable\)"):
            load_cifar10(root, download=True, timeout=0.25)
        assert socket.getdefaulttimeout() == before
    assert _FakeCifar10.seen == [0.25, 0.25]

    # a timeout torchvision reports as a URLError whose reason is a TimeoutError names the timeout
    monkeypatch.setattr(_FakeCifar10, "error", urllib.error.URLError(TimeoutError("timed out")))
    with pytest.raises(OSError, match=r"no answer within timeout=0\.25 s"):
        load_cifar10(tmp_path / "fresh", download=True, timeout=0.25)
    # a corrupt archive (torchvision: RuntimeError, md5 mismatch) gets the message on installing it by hand
    monkeypatch.setattr(_FakeCifar10, "error", RuntimeError("File not found or corrupted."))
    with pytest.raises(OSError, match=r"failed \(RuntimeError: File not found or corrupted\.\)\. Without network "
                                      r"access to https://example\.invalid/cifar-10-python\.tar\.gz"):
        load_cifar10(tmp_path / "fresh", download=True, timeout=0.25)
    assert socket.getdefaulttimeout() == before


# ------------------------------------------ mutants of fb91484..97fac41 (data/leaf.py: what the next run reads)
def test_reads_as_data_follows_a_symbolic_link_either_way(tmp_path):
    """An output is read as data when the name written or the file it points to is a .json file directly in
    train/ or test/: a link ds/train/link.json to a .txt file elsewhere (load_leaf reads the link, so the result
    through it; mutant LF5: only the target was looked at), and a link elsewhere to ds/test/x.json (the result
    lands in test/; mutant LF6: only the name given was looked at). A link named .json to a .txt file of test/
    is never read."""
    from fedlib.data.leaf import _reads_as_data

    ds, elsewhere = tmp_path / "ds", tmp_path / "elsewhere"
    for folder in (ds / "train", ds / "test", elsewhere):
        folder.mkdir(parents=True)
    (ds / "train" / "link.json").symlink_to(elsewhere / "r.txt")
    (elsewhere / "link.txt").symlink_to(ds / "test" / "x.json")
    (elsewhere / "other.json").symlink_to(ds / "test" / "x.txt")
    assert _reads_as_data(ds, ds / "train" / "link.json") is True
    assert _reads_as_data(ds, elsewhere / "link.txt") is True
    assert _reads_as_data(ds, elsewhere / "other.json") is False


def test_nothing_is_read_as_data_from_a_folder_that_load_leaf_refuses(tmp_path):
    """A folder with test/ but no train/ is refused by load_leaf, so no output in it is read as data (mutant LF4:
    every output was, and the command line's refusal then failed on _data_folders' ValueError)."""
    from fedlib.data.leaf import _reads_as_data

    (tmp_path / "ds" / "test").mkdir(parents=True)
    assert _reads_as_data(tmp_path / "ds", tmp_path / "ds" / "test" / "r.json") is False
    assert _reads_as_data(tmp_path / "ds", tmp_path / "ds" / "r.json") is False


def test_read_batch_gives_nhwc_images_pixel_by_pixel(tmp_path):
    """One batch file read as ``(images NHWC uint8, labels int64)`` (``_read_split`` of one batch): pixel (y, x) of
    colour plane c of row k (entry c * 1024 + y * 32 + x, CIFAR-10's channel-planar rows) is ``images[k, y, x, c]``.
    Mutant of c5aa211..361d535: RN8 (``_read_batch``, since removed, returning the rows as read, ``(n, 3072)``)."""
    rows = np.random.default_rng(8).integers(0, 256, (3, 3072), dtype=np.uint8)
    path = _batch(tmp_path / "data_batch_1", rows, [4, 0, 9])
    images, labels = cf._read_split(path.parent, [path.name])
    assert images.shape == (3, 32, 32, 3) and images.dtype == np.uint8 and images.flags.c_contiguous
    for k, y, x, c in ((0, 0, 0, 0), (1, 5, 7, 2), (2, 31, 30, 1), (2, 31, 31, 2)):
        assert images[k, y, x, c] == rows[k, c * 1024 + y * 32 + x]
    assert all(images[k, y, x, c] == rows[k, c * 1024 + y * 32 + x]
               for k in range(3) for y in (0, 13, 31) for x in range(32) for c in range(3))
    assert labels.dtype == np.int64 and labels.tolist() == [4, 0, 9]

"""Data audit: the CIFAR-10 loaders' checks of root / download / path (a file as root, download="no",
a renamed batch folder without data_batch_1, a non-path); FederatedDataset's checks of labels that are
not numbers, ragged x and containers that are not lists; a Dirichlet alpha so large that it overflows."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

from fedlib.data.cifar10 import TEST_FILE, TRAIN_FILES, load_cifar10, load_cifar10_labels, load_cifar10_sample
from fedlib.data.clients import FederatedDataset
from fedlib.data.partition import dirichlet_partition, dirichlet_partition_generator


@pytest.mark.parametrize("fn", [dirichlet_partition, dirichlet_partition_generator])
def test_alpha_so_large_that_the_dirichlet_draw_overflows_is_named(fn):
    """alpha = 1e308: every draw was NaN, every attempt failed, and after 10,000 of them the error
    advised to 'raise alpha'."""
    y = np.repeat(np.arange(10), 30)
    with pytest.raises(ValueError, match=r"alpha=1e\+308 is too large"):
        fn(y, 4, 1e308, 0, 1)
    assert sorted(map(len, fn(y, 4, 1e306, 0, 1))) == [70, 70, 80, 80]  # large but finite: near-equal


def _batch(path, n=2):
    with open(path, "wb") as fh:
        pickle.dump({"data": np.zeros((n, 3072), np.uint8), "labels": [0] * n}, fh)


def test_load_cifar10_refuses_a_file_as_root(tmp_path):
    """root = a batch file (or the downloaded archive): 'not found, call download=True', and with
    download=True a bare FileExistsError from mkdir."""
    file = tmp_path / "cifar-10-python.tar.gz"
    file.write_bytes(b"\x1f\x8b")
    for download in (False, True):
        with pytest.raises(ValueError, match=r"root must be a folder .* got the file .*cifar-10-python\.tar\.gz"):
            load_cifar10(file, download=download)


def test_load_cifar10_download_must_be_a_bool(tmp_path, monkeypatch):
    """download="no" is truthy: it started a 170 MB download."""
    import fedlib.data.cifar10 as cifar

    monkeypatch.setattr(cifar, "_download", lambda root: pytest.fail("downloaded"))
    for bad in ("no", 0.0, None):
        with pytest.raises(ValueError, match="download must be True or False"):
            load_cifar10(tmp_path / "nothing", download=bad)
    with pytest.raises(FileNotFoundError):
        load_cifar10(tmp_path / "nothing", download=np.False_)


def test_a_renamed_batch_folder_without_data_batch_1_is_that_folder(tmp_path, monkeypatch):
    """A renamed batch folder that lacks only data_batch_1 was taken for a parent folder: 'not found'
    at renamed/cifar-10-batches-py, and download=True downloaded 170 MB into a subfolder of it."""
    import fedlib.data.cifar10 as cifar

    folder = tmp_path / "my-cifar"
    folder.mkdir()
    for name in TRAIN_FILES[1:] + (TEST_FILE,):
        _batch(folder / name)
    with pytest.raises(FileNotFoundError, match=r"incomplete: looked for data_batch_1 in the CIFAR-10 batch folder "
                                                r".*my-cifar \("):
        load_cifar10(folder)
    monkeypatch.setattr(cifar, "_download", lambda root: pytest.fail("downloaded"))
    with pytest.raises(FileNotFoundError, match="lacks data_batch_1; download=True cannot complete"):
        load_cifar10(folder, download=True)
    _batch(folder / TRAIN_FILES[0])
    assert load_cifar10(folder).train_images.shape == (10, 32, 32, 3)


@pytest.mark.parametrize("call", [
    lambda p: load_cifar10_sample(p),
    lambda p: load_cifar10_labels(p),
    lambda p: __import__("fedlib.data.cifar10", fromlist=["x"]).cifar10_random_images(0, p),
])
def test_cifar_file_loaders_name_a_path_that_is_not_one(call):
    """path=3 raised a bare TypeError from pathlib."""
    with pytest.raises(ValueError, match="path must be a file or folder path"):
        call(3)


def _case(**change):
    parts = dict(train_x=[np.ones((2, 3))], train_y=[np.array([0, 1])], test_x=[np.ones((0, 3))],
                 test_y=[np.zeros(0, np.int64)], num_classes=2)
    parts.update(change)
    return parts


@pytest.mark.parametrize("change, match", [
    (dict(train_y=[np.array(["a", "b"])]), r"client 0 train labels must be integers in \[0, 2\), got dtype <U1"),
    (dict(train_y=[np.array([0, None], dtype=object)]), r"client 0 train labels .* got dtype object"),
    (dict(train_x=[[[0.0, 1.0, 2.0], [0.0]]]), r"client 0 train x and y must be arrays"),
    (dict(train_x=None), "train_x must be a list with one array per client, got NoneType"),
    (dict(test_y={0: np.zeros(0)}), "test_y must be a list with one array per client, got dict"),
    (dict(train_x=(x for x in [np.ones((2, 3))])), "train_x must be a list .* got generator"),
])
def test_federated_dataset_refuses_by_name_what_numpy_refused_without_it(change, match):
    """String / object labels raised numpy's UFuncTypeError / TypeError (from y.min() in the message),
    ragged x numpy's ValueError without the client, None / a generator / a dict TypeError or KeyError."""
    assert FederatedDataset(**_case(), name="mine").weights.tolist() == [1.0]
    with pytest.raises(ValueError, match=f"^mine: {match}"):
        FederatedDataset(**_case(**change), name="mine")

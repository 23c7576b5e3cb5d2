"""fedlib.data.clients.FederatedDataset: what a client's data may be (an empty test set), and what
it refuses by name (rows without features, labels that are not integers, ragged x, containers that are not lists)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from fedlib.data.clients import FederatedDataset


# --------------------------------------------------------------------------- an empty test set
def test_federated_dataset_says_how_to_write_an_empty_test_set():
    """FederatedDataset's docstring: 'A client's test set may be empty'. Written as ``[]`` it was refused
    with 'test x must be 2-d (samples, features), got shape (0,)', without saying what an empty one is;
    the form the message gives is accepted."""
    import numpy as np

    from fedlib.data.clients import FederatedDataset

    rng = np.random.default_rng(0)
    train_x = [rng.normal(size=(n, 4)) for n in (3, 5)]
    train_y = [rng.integers(0, 3, n) for n in (3, 5)]
    with pytest.raises(ValueError, match=r"client 0 test x must be 2-d \(samples, features\), got shape \(0,\); an "
                                         r"empty test set is np\.zeros\(\(0, d\)\) with labels np\.zeros\(0, dtype=int\)$"):
        FederatedDataset(train_x, train_y, [[], []], [[], []], 3)
    ds = FederatedDataset(train_x, train_y, [np.zeros((0, 4))] * 2, [np.zeros(0, dtype=int)] * 2, 3)
    assert ds.num_clients == 2
    with pytest.raises(ValueError, match=r"got shape \(3, 4, 1\)$"):  # a non-empty wrong shape: no such advice
        FederatedDataset([x[:, :, None] for x in train_x], train_y, [np.zeros((0, 4))] * 2,
                         [np.zeros(0, dtype=int)] * 2, 3)


def test_federated_dataset_refuses_rows_without_features():
    from fedlib.data.clients import FederatedDataset
    empty = [np.zeros((0, 0))], [np.zeros(0, dtype=np.int64)]
    with pytest.raises(ValueError, match=r"client 0 train x has 3 rows of 0 features"):
        FederatedDataset([np.zeros((3, 0))], [np.array([0, 1, 0])], *empty, num_classes=2)
    # an empty (0, 0) test set stays fine
    FederatedDataset([np.ones((3, 2))], [np.array([0, 1, 0])], *empty, num_classes=2)


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
    # were "len() of unsized object" / "len() of a 0-d tensor" TypeErrors naming nothing
    (dict(train_x=np.array(0.5)), "train_x must be a list with one array per client, got ndarray"),
    (dict(test_y=torch.tensor(1)), "test_y must be a list with one array per client, got Tensor"),
    # was torch's RuntimeError "Can't call numpy() on Tensor that requires grad", naming no client
    (dict(train_x=[torch.ones(2, 3, requires_grad=True)]),
     r"client 0 train x is a tensor that requires grad \(data, not parameters: pass it detached, x\.detach\(\)\)$"),
])
def test_federated_dataset_refuses_by_name_what_numpy_refused_without_it(change, match):
    """String / object labels raised numpy's UFuncTypeError / TypeError (from y.min() in the message),
    ragged x numpy's ValueError without the client, None / a generator / a dict TypeError or KeyError."""
    assert FederatedDataset(**_case(), name="mine").weights.tolist() == [1.0]
    with pytest.raises(ValueError, match=f"^mine: {match}"):
        FederatedDataset(**_case(**change), name="mine")

"""fedlib.data.clients.FederatedDataset: what a client's data may be (an empty test set)."""
from __future__ import annotations

import pytest


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

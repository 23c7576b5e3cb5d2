"""Review and hand mutation test of the library changes of efe3bcd..52ae29d (Dec 4 input checks).

Placeholder docstring: the mutant counts are filled in below once the mutation run is done.
"""
import numpy as np
import pytest
import torch

from fedlib._validate import round_lr
from fedlib.tree import tree_index


# ---------------------------------------------------------------- review fixes: bool bypasses

@pytest.mark.parametrize("value", [np.True_, np.array(True), torch.tensor(True)])
def test_round_lr_refuses_numpy_and_torch_bools(value):
    # float() of each is 1.0: an lr_at returning a bool trained at lr 1.0
    with pytest.raises(ValueError, match=r"lr_at\(2\) must return the round's client learning rate"):
        round_lr("lr_at", lambda t: value, 2, 0.1)


@pytest.mark.parametrize("value", [np.float32(0.05), np.array(0.05), torch.tensor(0.05, dtype=torch.float64)])
def test_round_lr_takes_numpy_and_torch_numbers(value):
    assert round_lr("lr_at", lambda t: value, 0, 0.1) == pytest.approx(0.05)


@pytest.mark.parametrize("index", [np.array(True), torch.tensor(True)])
def test_tree_index_refuses_a_0d_bool(index):
    # np.array(True) added an axis (shape (1, 3, 2)); torch.tensor(True) picked row 1
    stacked = {"w": np.arange(6.0).reshape(3, 2)}
    with pytest.raises(ValueError, match="i must be a row index"):
        tree_index(stacked, index)


def test_tree_index_keeps_a_bool_mask_and_integer_scalars():
    stacked = {"w": np.arange(6.0).reshape(3, 2)}
    np.testing.assert_array_equal(tree_index(stacked, np.array([True, False, True]))["w"], [[0, 1], [4, 5]])
    np.testing.assert_array_equal(tree_index(stacked, np.int64(2))["w"], [4, 5])
    np.testing.assert_array_equal(tree_index(stacked, np.array(1))["w"], [2, 3])

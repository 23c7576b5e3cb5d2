"""Review of 677635c..166b66c and the global-hook commit: two defects, each test fails on the code before the fix.

- ``tree_index(stacked, [])`` (numpy's and torch's empty index list: no rows) was refused as a non-index, since
  ``np.asarray([])`` is float64.
- ``StackedEngine.evaluate()`` called on its own on the grouped path ran without a global forward hook registered
  after the engine was built (only ``run_round`` checked): a silently different model was evaluated.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn.modules import module as torch_module

from fedlib.algorithms import make_algorithm
from fedlib.engines.grouped import registered_hooks
from fedlib.engines.stacked import RunSpec, StackedEngine
from fedlib.schedules import FixedSteps
from fedlib.solvers import sgd
from fedlib.tree import tree_index


def test_tree_index_takes_an_empty_index_list():
    assert tree_index({"w": np.arange(6.0).reshape(3, 2)}, [])["w"].shape == (0, 2)
    assert tuple(tree_index({"w": torch.ones(3, 2)}, [])["w"].shape) == (0, 2)
    with pytest.raises(ValueError, match="row index"):
        tree_index({"w": np.arange(6.0).reshape(3, 2)}, [0.5])


def _engine(path):
    images = np.random.default_rng(0).integers(0, 256, (12, 4, 4, 3), dtype=np.uint8)
    data = SimpleNamespace(train_images=images, train_labels=np.arange(12) % 2,
                           test_images=images[:4], test_labels=np.arange(4) % 2)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 2, 3), nn.Flatten(), nn.Linear(8, 2)).double()
    run = RunSpec(make_algorithm("fednova", sgd(0.1)), [np.arange(4), np.arange(4, 12)], FixedSteps([1, 2]))
    return StackedEngine(model, data, [run], rounds=1, batch_size=4, augment=False, dropout=False, path=path)


@pytest.mark.parametrize("path, refused", [("grouped", True), ("vmap", False)])
def test_evaluate_refuses_a_global_forward_hook_added_later_where_it_would_not_run(path, refused):
    engine = _engine(path)
    handle = torch_module.register_module_forward_hook(lambda module, inputs, output: output * 2)
    try:
        if refused:
            with pytest.raises(ValueError, match="registered for all modules after the engine was built"):
                engine.evaluate()
        else:
            engine.evaluate()
    finally:
        handle.remove()
    assert registered_hooks(nn.Linear(1, 1)) == []
    engine.evaluate()

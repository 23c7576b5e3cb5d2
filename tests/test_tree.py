"""Pytree helpers on numpy arrays, torch tensors and nested dict/list/tuple/NamedTuple."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest
import torch

from fedlib import tree as T


class Pair(NamedTuple):
    a: object
    b: object


def _np_tree(scale=1.0):
    return {"w": np.arange(6.0).reshape(2, 3) * scale, "rest": [np.array([1.0, -2.0]) * scale, Pair(np.array(3.0) * scale, 0.5 * scale)]}


def _torch_tree(scale=1.0):
    return {"w": torch.arange(6.0, dtype=torch.float64).reshape(2, 3) * scale, "b": (torch.tensor([1.0, -2.0], dtype=torch.float64) * scale,)}


def test_tree_map_preserves_containers():
    t = _np_tree()
    out = T.tree_map(lambda x: x * 2, t)
    assert isinstance(out, dict) and list(out) == ["w", "rest"]
    assert isinstance(out["rest"], list) and isinstance(out["rest"][1], Pair)
    np.testing.assert_array_equal(out["w"], t["w"] * 2)
    assert out["rest"][1].b == 1.0
    # multi-tree map
    s = T.tree_map(lambda x, y: x - y, t, out)
    np.testing.assert_array_equal(s["rest"][0], -t["rest"][0])


def test_tree_map_structure_mismatch():
    with pytest.raises(ValueError, match="tree structures differ"):
        T.tree_map(lambda x, y: x + y, {"a": 1.0}, {"b": 1.0})
    with pytest.raises(ValueError, match="tree structures differ"):
        T.tree_map(lambda x, y: x + y, [1.0, 2.0], [1.0])
    assert T.tree_structure_equal(_np_tree(), _np_tree(2.0))
    assert not T.tree_structure_equal({"a": np.zeros(2)}, {"a": np.zeros(3)})
    assert not T.tree_structure_equal({"a": np.zeros(2)}, {"b": np.zeros(2)})


def test_leaves_order_and_arithmetic():
    t = _np_tree()
    leaves = T.tree_leaves(t)
    assert len(leaves) == 4 and leaves[3] == 0.5
    u = _np_tree(3.0)
    np.testing.assert_array_equal(T.tree_add(t, u)["w"], 4 * t["w"])
    np.testing.assert_array_equal(T.tree_sub(u, t)["rest"][0], 2 * t["rest"][0])
    np.testing.assert_array_equal(T.tree_scale(t, -2.0)["w"], -2 * t["w"])
    np.testing.assert_array_equal(T.tree_axpy(2.0, t, u)["w"], 5 * t["w"])
    assert T.tree_vdot(t, u) == pytest.approx(3 * (55 + 5 + 9 + 0.25))
    assert T.tree_norm(t) == pytest.approx(np.sqrt(55 + 5 + 9 + 0.25))


def test_zeros_like_and_copy_numpy_and_torch():
    for t in (_np_tree(), _torch_tree()):
        z = T.tree_zeros_like(t)
        for a, b in zip(T.tree_leaves(z), T.tree_leaves(t)):
            assert np.shape(a) == np.shape(b)
            assert float(np.sum(np.abs(np.asarray(a)))) == 0.0
            if isinstance(b, torch.Tensor):
                assert isinstance(a, torch.Tensor) and a.dtype == b.dtype
        c = T.tree_copy(t)
        w = c["w"]
        w[0, 0] = 100.0  # modifying the copy leaves the original alone
        assert t["w"][0, 0] == 0.0


def test_all_finite():
    assert T.tree_all_finite(_np_tree()) and T.tree_all_finite(_torch_tree())
    bad = _np_tree()
    bad["rest"][0][1] = np.nan
    assert not T.tree_all_finite(bad)
    tb = _torch_tree()
    tb["b"][0][0] = float("inf")
    assert not T.tree_all_finite(tb)
    assert not T.tree_all_finite([1.0, float("nan")])


@pytest.mark.parametrize("make", [_np_tree, _torch_tree], ids=["numpy", "torch"])
def test_weighted_sum(make):
    trees = [make(1.0), make(-2.0), make(0.5)]
    before = [T.tree_copy(t) for t in trees]
    c = [0.25, 0.0, 2.0]
    out = T.tree_weighted_sum(trees, c)
    expected_scale = 0.25 * 1.0 + 0.0 + 2.0 * 0.5
    for o, ref in zip(T.tree_leaves(out), T.tree_leaves(make(expected_scale))):
        np.testing.assert_allclose(np.asarray(o), np.asarray(ref), rtol=1e-15, atol=1e-15)
    # inputs untouched (the first tree's buffer is not reused as the accumulator)
    for t, b in zip(trees, before):
        for x, y in zip(T.tree_leaves(t), T.tree_leaves(b)):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    with pytest.raises(ValueError, match="coefficients"):
        T.tree_weighted_sum(trees, [1.0, 2.0])
    with pytest.raises(ValueError, match="trees"):
        T.tree_weighted_sum([], [])


def test_weighted_sum_rejects_shape_mismatch():
    """numpy would broadcast a (1,) leaf against (3,) silently."""
    with pytest.raises(ValueError, match="shape"):
        T.tree_weighted_sum([np.zeros(3), np.zeros(1)], [1.0, 1.0])
    with pytest.raises(ValueError, match="shape"):
        T.tree_weighted_sum([torch.zeros(3), torch.zeros(1)], [1.0, 1.0])


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_stack_index_and_stacked_weighted_sum(lib):
    make = _np_tree if lib == "numpy" else _torch_tree
    trees = [make(float(s)) for s in (1.0, 2.0, -1.0)]
    st = T.tree_stack(trees)
    assert np.shape(T.tree_leaves(st)[0])[0] == 3
    row = T.tree_index(st, 1)
    for a, b in zip(T.tree_leaves(row), T.tree_leaves(trees[1])):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    c = [0.5, -1.0, 3.0]
    out = T.tree_stacked_weighted_sum(st, c)
    ref = T.tree_weighted_sum(trees, c)
    for a, b in zip(T.tree_leaves(out), T.tree_leaves(ref)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-14, atol=1e-14)
    with pytest.raises(ValueError, match="leading size"):
        T.tree_stacked_weighted_sum(st, [1.0, 2.0])
    with pytest.raises(ValueError, match="trees"):
        T.tree_stack([])

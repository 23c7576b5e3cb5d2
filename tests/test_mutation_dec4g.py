"""Hand mutation testing of the checks added in 677635c..166b66c, 4b42ff0 (duplicate run names) and c641002
(global hooks), plus bca6c97 (``evaluate``'s global-hook check). One mutant at a time, covering tests:
tests/test_leftovers_dec4g.py, test_regressions_dec4.py, test_global_hooks.py, test_review_dec4g.py, the
module's own test files and ``tests/test_doctests.py -k <module>``.

36 mutants: 29 killed by the suite, 5 killed by a test here, 2 equivalent.

whole_steps (fedlib/schedules.py), all killed by the suite:
  W1 drop the scalar-bool clause; W2 drop the dtype-bool clause; W3 drop the list/tuple clause;
  W4 ``any`` -> ``all`` in the list clause; W5 remove the bool check.
RandomLocalWork, all killed by the suite:
  R1 remove the size check; R2 back to ``check_local_steps("high", high, size=lo.size)``;
  R3 swap the two sizes in the message; R4 ``!=`` -> ``<``.
run_replicas (fedlib/engines/quadratic.py), killed by the suite: Q1 the old name ``"steps"``; Q2 drop ``size=m``.
_as_param_dict (fedlib/engines/stacked.py), killed by the suite:
  N1 remove the NaN/inf check; N2 ``.all()`` -> ``.any()``; N3 ``isfinite`` -> ``~isnan`` (inf passes);
  N4 always name ``runs[r].params`` (never ``model``).
Duplicate run names, killed by the suite: D1 refuse repeated empty names; D2 ``count > 1`` -> ``> 2``;
  D3 remove StackedEngine's check; D4 remove demo_run's; D5 remove reference_differences'.
tree_index (fedlib/tree.py):
  T7 remove the check, T8 slice off the fast path: killed by the suite;
  T2 a torch bool mask refused, T3 any torch tensor accepted (a float one too), T5 a numpy bool mask refused,
  T6 an unsigned index array refused: killed here;
  T1 ``np.integer`` off the fast path (np.asarray gives kind 'i'/'u': accepted), T4 drop ``i is not None``
  (np.asarray(None) has dtype object: refused with the same message): equivalent.
Global hooks (fedlib/engines/grouped.py, stacked.py):
  H1 ``startswith("backward")`` -> ``"forward"``; H2 ``path == "grouped"`` -> ``!=``; H3 drop run_round's call;
  H4 registered_hooks without the global hooks; H5 ``_hook_owner``'s test inverted; H6 wrong ``_global*`` table
  name; H8 drop evaluate's call: killed by the suite;
  H7 ``continue`` -> ``return`` in refuse_global_hooks_added_later (a global forward hook on the vmap path hid a
  global backward hook registered with it): killed here.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn.modules import module as torch_module

from fedlib.engines.grouped import refuse_global_hooks_added_later, registered_hooks
from fedlib.tree import tree_index

LEAVES = [np.arange(6.0).reshape(3, 2), torch.arange(6.0).reshape(3, 2)]


@pytest.mark.parametrize("leaf", LEAVES)
@pytest.mark.parametrize("mask", [np.array([True, False, True]), torch.tensor([True, False, True])])
def test_tree_index_takes_a_boolean_mask(leaf, mask):  # T2 (torch mask), T5 (numpy mask)
    rows = tree_index({"w": leaf}, mask)["w"]
    assert np.asarray(rows).tolist() == [[0.0, 1.0], [4.0, 5.0]]


def test_tree_index_takes_an_unsigned_index_array():  # T6 (numpy leaf: torch reads a uint8 index as a mask)
    leaf = np.arange(6.0).reshape(3, 2)
    assert tree_index({"w": leaf}, np.array([2, 0], dtype=np.uint8))["w"].tolist() == [[4.0, 5.0], [0.0, 1.0]]


@pytest.mark.parametrize("leaf", LEAVES)
def test_tree_index_refuses_a_float_tensor(leaf):  # T3
    with pytest.raises(ValueError, match=r"^i must be a row index \(an int, slice or index array\), got tensor"):
        tree_index({"w": leaf}, torch.tensor([0.0, 2.0]))


def test_a_global_forward_hook_does_not_hide_a_global_backward_hook_on_the_vmap_path():  # H7
    handles = [torch_module.register_module_forward_hook(lambda module, inputs, output: None),
               torch_module.register_module_full_backward_hook(lambda module, grad_in, grad_out: None)]
    try:
        with pytest.raises(ValueError, match=r"^a backward hook .*\(torch\.func refuses them\)"):
            refuse_global_hooks_added_later("vmap")
    finally:
        for handle in handles:
            handle.remove()
    assert registered_hooks(nn.Linear(1, 1)) == []

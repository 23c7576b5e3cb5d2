"""Mutation-testing pass on :mod:`fedlib.tree`: each test pins behaviour of ``tree_vdot`` that a mutant
changed without any other test failing. Expected values are worked by hand in the docstrings.

Mutants of a33e916..37f92d9, tree_vdot (the torch branch's float64 sum of integer / bool tensors, its
complex branch, and the review's fixes: complex numpy leaves in complex128, a tensor paired with a numpy
leaf or a number) (pass described in tests/README.md, Mutation passes): 18 mutants, one at a time,
``pytest -x`` on test_tree.py, test_mutation_algorithms_tree_rng.py and this file: 11 killed by the suite,
4 killed here, 3 equivalent or not observable without a GPU.
  T3 ``x.conj().dot(y)`` -> ``x.dot(y)``, T5 ``.real`` -> ``.imag``, T6 the complex branch in complex64,
  T7 no ``return`` after the complex sum (it fell through to the real sum), T8 the product taken in the
  leaf's dtype before ``.double()`` (int8 wraps), T11 a number made a tensor without ``np.asarray`` (float32),
  T13 the device taken from the non-tensor leaf, T14 only ``xa`` checked for complex (ComplexWarning), T15
  numpy complex64, T17 ``.float()`` for ``.double()``, T18 ``y`` not cast to complex128 (dot of complex128 and
  float): killed by the suite (tests/test_tree.py; T6, T11, T13-T15, T17 by the review's tests there).
  T1 only ``x.is_complex()`` checked, T2 ``or`` -> ``and``: a real tensor paired with a complex one took the
  real branch, whose ``.double()`` of the complex tensor drops its imaginary part with a UserWarning (torch
  gives it once per process unless ``torch.set_warn_always(True)``; the value is the same: Re(conj(x) y) =
  x Re(y) for a real x); killed here.
  T9 no ``reshape(-1)`` (torch.dot takes 1-D tensors only: a matrix or a 0-d complex leaf raised): killed here.
  T10 the torch branch only for a tensor ``x`` (a numpy ``x`` with a tensor ``y`` went through
  ``np.asarray(y)``, which refuses a tensor that requires grad): killed here.
  T4 ``x.conj().dot(y)`` -> ``y.conj().dot(x)``: equivalent (the real part of a conjugate is the same).
  T16 ``elif`` -> ``if`` after the complex cast: equivalent (a complex128 array is not of kind 'fiub').
  T12 ``torch.as_tensor`` without ``device=``: the same on the CPU; a CUDA tensor paired with a numpy
  array then fails (1-D tensors on two devices): test_vdot_pairs_a_cuda_tensor_with_a_numpy_leaf, skipped
  without CUDA (not run in this pass: no GPU).

Mutants of 37f92d9..28127ce (third, the changed hunks of fedlib/tree.py)
(pass described in tests/README.md, Mutation passes):
  TE1 torch tree_weighted_sum casts the first product, not the leaf; TE2 numpy alike; TE3 later leaves not cast
  to the sum's dtype; TE4 tree_vdot's tensor only as the first leaf; TE5 a number as torch's float32; TE6 only x
  tested for complex; TE7 tree_stacked_weighted_sum without the 0-d refusal; TE8 tree_map's key test one-sided.
  all killed by the suite.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from fedlib import tree as T


@pytest.mark.parametrize("order", ["real first", "complex first"])
def test_vdot_of_a_real_tensor_and_a_complex_tensor_warns_nothing(order):
    """[2, 1] and [3 + 4j, 1j]: real first Re(2 (3 + 4j) + 1 (1j)) = 6; complex first
    Re((3 - 4j) 2 + (-1j) 1) = 6. Both go through the complex branch: without the check of both leaves
    (T1, T2) the complex tensor's ``.double()`` dropped its imaginary part with a UserWarning."""
    r, c = torch.tensor([2.0, 1.0]), torch.tensor([3 + 4j, 1j])
    a, b = (r, c) if order == "real first" else (c, r)
    always = torch.is_warn_always_enabled()
    torch.set_warn_always(True)  # torch gives that warning once per process, else
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert T.tree_vdot([a], [b]) == 6.0
    finally:
        torch.set_warn_always(always)


def test_vdot_of_complex_tensors_of_any_shape():
    """A complex matrix [[1 + 1j, 2], [0, 1j]] with itself: 2 + 4 + 0 + 1 = 7; a 0-d complex tensor 3 + 4j
    with itself: 25 (norm 5). Without the ``reshape(-1)`` (T9) torch.dot refused both (1-D tensors only)."""
    m = torch.tensor([[1 + 1j, 2], [0, 1j]])
    assert T.tree_vdot({"m": m}, {"m": m}) == 7.0
    assert T.tree_norm(torch.tensor(3 + 4j)) == 5.0


@pytest.mark.parametrize("order", ["tensor first", "tensor second"])
def test_vdot_pairs_a_numpy_leaf_with_a_tensor_that_requires_grad(order):
    """[1, 2] . [3, 4] = 3 + 8 = 11 with the tensor requiring grad, either way round: a numpy leaf first went
    through ``np.asarray(tensor)`` (T10), which raises for a tensor that requires grad."""
    t, n = torch.tensor([3.0, 4.0], requires_grad=True), np.array([1.0, 2.0])
    a, b = (t, n) if order == "tensor first" else (n, t)
    assert T.tree_vdot([a], [b]) == 11.0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("order", ["tensor first", "tensor second"])
def test_vdot_pairs_a_cuda_tensor_with_a_numpy_leaf(order):
    """[1, 2] . [3, 4] = 11 for a CUDA tensor and a numpy array: the array is put on the tensor's device; on
    the CPU (T12) the product of two 1-D tensors on two devices raised."""
    t, n = torch.tensor([3.0, 4.0], device="cuda"), np.array([1.0, 2.0])
    a, b = (t, n) if order == "tensor first" else (n, t)
    assert T.tree_vdot([a], [b]) == 11.0

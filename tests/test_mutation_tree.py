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
Mutants of 94865bc..906afc1 (fedlib/tree.py: ``_scaled_norm``, np.linalg.norm redone as 2^k ||2^-k x|| where it
overflows for finite entries; and its call sites in run_quadratic, iterate_round_maps and tradeoff) (pass described
in tests/README.md, Mutation passes): 24 mutants, one at a time, ``pytest -x -q`` on test_tree.py, this file,
test_quadratic_engine.py, test_experiments_quadratic.py and test_anatomy_tradeoff.py (SN); the module's test files
for the sites (ST: test_experiments_quadratic.py; test_acceleration.py and test_mutation_bounds_acceleration.py;
test_anatomy_tradeoff.py and test_mutation_tradeoff_anatomy.py).
  SN1 ``n != np.inf`` -> ``==`` (axis None); SN2 axis None without the finite-entries test; SN3 axis None redone
  unless NaN (every finite norm redone); SN4 axis None scaled by ``np.max(x)`` (no abs); SN5 axis None scaled by
  2^-(k+1); SN6 axis None unscaled by 2^(k-1); SN7 ``redo = np.isfinite(n)``; SN8 ``redo = ~np.isnan(n)``; SN9 the
  rows' finite-entries mask dropped (its first draft, an IndentationError, not counted); SN10 the mask along
  ``axis=-1``; SN11 ``rows = x[redo]`` (no moveaxis); SN12 the rows scaled by ``np.max(rows)`` (no abs); SN13 one
  scale over all rows; SN14 the rows unscaled by 2^(k+1); SN15 the rows scaled by 2^-(k-1); SN16 ``redo.all()``
  for ``redo.any()``; SN17 no errstate; SN18 ``redo = ~np.isfinite(n)``; SN19 the mask ``~np.isnan(x).any``. ST1
  run_quadratic's distance, ST2 / ST3 iterate_round_maps' start / later distances, ST4 fedprox_sweep's
  ``_distance``, ST5 closed_form_distances by np.linalg.norm again.
  killed by the suite: SN1, SN6, SN7, SN13 (np.max of the empty rows left when the only inf row is not finite),
  SN14, SN16, SN17 (test_tree.py's two _scaled_norm tests), ST1-ST5 (their modules' overflow tests).
  killed here: SN4, SN12: test_scaled_norm_scales_by_the_largest_magnitude_when_it_is_a_negative_entry; SN10,
  SN11 (the suite redid rows along axis 1 only): test_scaled_norm_along_axis_0_redoes_the_overflowing_columns; SN3,
  SN8 (an exact power-of-two scaling gives the same bits for ordinary values; only where np.linalg.norm's squares
  are subnormal or 0 do they differ from its value, which the docstring says is kept):
  test_scaled_norm_keeps_np_linalg_norms_value_where_it_is_finite_even_for_tiny_entries.
  equivalent: SN2, SN9, SN19 (a norm that is inf with a non-finite entry has an inf entry and no NaN; its redo,
  frexp(inf) giving k = 0, is inf again); SN18 (a NaN norm's row has a non-finite entry: the mask takes it out);
  SN5, SN15 (a scaling by 2^-(k+-1) is as exact: the largest entry scaled into [1/4, 1/2) or [1, 2), no overflow in
  the squares of d entries, and an entry that underflows is 2^-1022 below the largest, its square nothing beside
  it). SN2, SN5, SN9, SN15 checked on 20000 draws of 3 x d arrays (d 1..5, exponents -1070..1023, inf and NaN
  entries), whole and along both axes: the same bits as the code.
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


# ============================================================ 94865bc..906afc1: _scaled_norm
def test_scaled_norm_scales_by_the_largest_magnitude_when_it_is_a_negative_entry():
    """The scale 2^k is the power of two of max_i |x_i|: for (-3e200, 4e-200) that is 3e200's, so 2^-k x is about
    (-0.98, 1.3e-400 -> 0) and the norm 3e200 (the exact norm sqrt(9e400 + 1.6e-399) rounds to 3e200). Scaled by the
    largest signed entry, 4e-200, 2^-k x would overflow to -inf and the norm come out inf. Whole and row by row (the
    second row ordinary). Kills SN4 and SN12 (np.max without np.abs)."""
    x = np.array([-3e200, 4e-200])
    assert T._scaled_norm(x) == 3e200
    rows = np.array([x, [-3.0, 4.0]])
    assert T._scaled_norm(rows, axis=1).tolist() == [3e200, 5.0]


def test_scaled_norm_along_axis_0_redoes_the_overflowing_columns():
    """axis=0 of a (3, 2) array: the columns (3e200, -4e200, 0) and (1, 2, 2): norms 5e200 (np.linalg.norm: inf)
    and 3, the first within 2 ulps of 5e200 (exactly 5e200 up to the rounding of 3e200 and 4e200), the second
    np.linalg.norm's own; a non-square array, so a mask or a pick along the other axis fails or picks wrong. Kills
    SN10 (the finite test along the last axis) and SN11 (the columns picked as rows)."""
    x = np.array([[3e200, 1.0], [-4e200, 2.0], [0.0, 2.0]])
    got = T._scaled_norm(x, axis=0)
    assert got.shape == (2,) and abs(got[0] - 5e200) <= 2 * np.spacing(5e200) and got[1] == 3.0
    assert T._scaled_norm(x.T, axis=1).tolist() == got.tolist()


def test_scaled_norm_keeps_np_linalg_norms_value_where_it_is_finite_even_for_tiny_entries():
    """Where np.linalg.norm is finite its value is returned as it is (the docstring: 'kept wherever it is finite'),
    the scaled redo only where it is inf: also for entries whose squares are subnormal or underflow to 0 (norms
    1e-150 .. 1e-170, where np.linalg.norm's sqrt(x . x) loses digits or is 0 and a redo by 2^k would differ), whole
    and by rows. Kills SN3 and SN8 (every finite norm redone: the same bits for ordinary values, where only the cost
    doubles, not here)."""
    rng = np.random.default_rng(2)
    for size in (1e-150, 1e-158, 1e-162, 1e-170):
        x = rng.standard_normal((3, 4)) * size
        assert T._scaled_norm(x[0]) == np.linalg.norm(x[0])
        np.testing.assert_array_equal(T._scaled_norm(x, axis=1), np.linalg.norm(x, axis=1), strict=True)
    tiny = np.array([3e-170, 4e-170])
    assert np.linalg.norm(tiny) != 5e-170  # what a redo would give: this input tells them apart
    assert T._scaled_norm(tiny) == np.linalg.norm(tiny)
    assert T._scaled_norm(tiny[None], axis=1).tolist() == [np.linalg.norm(tiny)]

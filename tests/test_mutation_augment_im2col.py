"""Tests added by a mutation-testing pass over ``fedlib/engines/augment.py`` and
``fedlib/engines/im2col.py``.

Each test kills mutants that the rest of the suite let survive (the engine-vs-reference
tests cannot see most of them: the engine and the plain per-client reference share the
crop / flip / normalisation / dropout code). Everything is tiny and on the CPU, so the file
runs in about a second.

Mutants of f9b9704..2e0d04d (fedlib/engines/augment.py: dropout_key's names) (pass described in tests/README.md,
Mutation passes):
  R1 round_index and client unchecked; R2 client checked as ``round_index``; R3 both checked, assigned swapped.
  killed by the suite: R1, R2. killed here: R3.

Review and mutants of 2e0d04d..fb2fbe6 (fedlib/engines/augment.py: _dims, crop_flip_params, crop_flip_gather,
seeded_dropout_mask; fedlib/engines/im2col.py: stacked_pool2d's size checks) (pass described in tests/README.md,
Mutation passes):
  review fix (its test in tests/test_stacked_engine.py): stacked_pool2d took Python ints only, so a model with
  nn.MaxPool2d(np.int64(2)) failed on the gemm path (which ran it before, as the cudnn path and torch still do).
  A1 _dims ``d >= minimum`` -> ``>``; A2 its bool exclusion dropped; A3 its length unchecked; A4 the dims returned
  as given (not int()); A5 crop_flip_params' generator unchecked; A6 crop_flip_gather's size minimum 0; A7
  seeded_dropout_mask's p without _is_finite_number; A8 layer by int(); A9 step by int(); A10 shape unchecked. I1
  padding minimum 1; I2 kernel_size minimum 0; I3 the bool exclusion dropped; I4 a pair read as one value; I5 stride
  unchecked. killed by the suite: A1, A3, A5-A10, I1, I5. killed here: A2, I2, I3, I4. equivalent: A4 (torch takes
  numpy integers as sizes, in randint, arange and view alike).

Review and mutants of 0571233~1..165a974 (fedlib/engines/im2col.py: _pair_of_paddings, Python-number checks of numpy
integers, no bools, no tensors) (pass described in tests/README.md, Mutation passes):
  review: no bug found (ints, numpy integers, numpy pairs padded as before; True, (True, 1), np.True_, tensors, 0-d
  arrays, floats, strings, iterators refused by name; the check reads no tensor).
  I1 the bool exclusion dropped; I2 np.bool_ dropped from it; I3 ``p >= 0`` -> ``>= 1``; I4 -> ``>= -1``; I5 Python
  ints only (numpy integers refused); I6 the pair returned as given, not int(); I7 any ``__index__`` taken (a
  tensor's entries, a device read); I8 one int read as (p, 0). killed by the suite: I1, I3-I5, I7, I8. killed here:
  I6. equivalent: I2 (np.True_ is no int nor np.integer, so the isinstance refuses it anyway).

Mutants of 38cf0bd..f929b39 (fedlib/engines/augment.py, d0c8dde: normalize's mean and std as sequences, their
shapes checked) (pass described in tests/README.md, Mutation passes):
  NZ1 mean and std not put on the images' device; NZ2 not in ``dtype``; NZ3 0-d images' ``shape[-1]`` read; NZ4 the
  ``ndim != 1`` test dropped; NZ5 ``shape[0]`` -> ``numel()``; NZ6 ``or`` -> ``and``; NZ7 std unchecked; NZ8
  torch.tensor (a copy, with a warning) for torch.as_tensor; NZ9 divided before subtracted; NZ10 ``ndim != 1`` ->
  ``ndim > 1``. killed by the suite: NZ2, NZ6, NZ7, NZ9. killed here: NZ3, NZ4, NZ8, NZ10. equivalent: NZ5 (with
  ``ndim == 1`` checked first, ``numel()`` is ``shape[0]``). left alive without a test: NZ1 (on the CPU the device
  is the images' anyway, and the meta device takes a CPU operand; only a CUDA run, not available to the pass, tells
  it apart; the same change at 0e9da1f is AN8, below, killed since on fake CUDA images).

Mutants of f929b39..780545c (fedlib/engines/augment.py, d859990: seeded_dropout_mask's _check_integer_tensor)
(pass described in tests/README.md, Mutation passes):
  DR1 the tensor test dropped; DR2 the floating test dropped; DR3 the complex test dropped; DR4 the bool test
  dropped; DR5 a step tensor unchecked; DR6 keys unchecked; DR7 the message's type name for a tensor's dtype; DR8 the
  step named "keys"; DR9 every dtype but int64 refused; DR10 a step tensor checked only for a floating dtype. killed
  by the suite: DR1, DR2, DR4-DR8. killed here: DR3, DR9, DR10.

Mutants of 652fbe7..0e9da1f (fedlib/engines/augment.py, bc400f6: normalize's checks of mean / std values given on
the host) (pass described in tests/README.md, Mutation passes): 10 mutants (ids as drafted: AN10 not run), one at a
time, ``pytest -x -q`` on this file and test_bad_inputs_core.py: 7 killed by the suite, 2 killed here, 1 left alive
without a test by the pass (AN8, killed here since, at 434c08a).
  AN1 every tensor read (``on_host = True``); AN2 only CUDA tensors left unread (``!= "cpu"`` -> ``== "cuda"``); AN3
  std 0 taken (``> 0`` -> ``>= 0``); AN4 mean held to > 0 too; AN5 finiteness unchecked; AN6 the values checked in
  their own dtype, not the result's; AN7 host values moved to the images' device before they are read; AN8 the
  checked values left on the host (not moved to the images' device); AN9 the entry named 1-based; AN11 the check
  inverted (``not on_host``).
  killed by the suite: AN1-AN3, AN5, AN6, AN9, AN11
  (test_bad_inputs_core.py::test_normalize_refuses_a_zero_negative_or_non_finite_std_given_on_the_host). killed
  here: AN4, AN7 (images on the meta device: the host values read after the move failed, 'Cannot copy out of meta').
  left alive by the pass: AN8 (a CPU mean with meta images still gives a meta result: the in-place sub_ / div_ of
  meta images take a CPU (C,) operand, where the out-of-place sub refuses it; only CUDA images refuse a CPU (C,)
  tensor; no GPU in this pass). Killed since (at 434c08a, no GPU either) by
  test_normalize_moves_host_mean_and_std_to_the_images_device: images that are fake CUDA tensors (torch's
  FakeTensorMode, on the CPU) refuse the host mean as CUDA does ('found at least two devices, cuda:0 and cpu'); the
  real code gives a fake CUDA result. The test also runs on real CUDA images where torch sees a GPU.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fedlib.engines.augment import (crop_flip_gather, crop_flip_params, dropout_key, normalize, pad_images,
                                    random_crop_flip, seeded_dropout_mask)
from fedlib.engines.im2col import im2col, stacked_conv2d, stacked_pool2d


def _images(shape, seed=0):
    return torch.randint(0, 256, shape, dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------- augmentation
@pytest.mark.parametrize("padding", [0, 1, 2, 3])
def test_pad_images_is_zero_padding_of_h_and_w(padding):
    """pad_images equals F.pad with zeros on H and W, for every padding (mutants: ``padding == 0`` ->
    ``== 1``, ``2 * padding`` -> ``3 * padding`` in the output size)."""
    imgs = _images((2, 5, 4, 3), seed=padding)
    got = pad_images(imgs, padding)
    want = F.pad(imgs.permute(0, 3, 1, 2), (padding,) * 4).permute(0, 2, 3, 1)
    assert got.shape == want.shape and torch.equal(got, want)
    assert got.is_contiguous()
    assert torch.equal(pad_images(imgs, np.int64(padding)), want)


def test_pad_images_and_crop_flip_params_refuse_bad_paddings_and_shapes():
    """A negative or non-integer padding and a batch that is not (N, H, W, C) are refused by name
    (mutants: the check_int calls and the ndim check dropped)."""
    imgs = _images((2, 4, 4, 3))
    for bad in (-1, 1.5, 2.0, True):
        with pytest.raises(ValueError, match="padding must be an integer"):
            pad_images(imgs, bad)
        with pytest.raises(ValueError, match="padding must be an integer"):
            crop_flip_params(torch.Generator().manual_seed(0), (3,), bad)
    for padding in (0, 2):
        with pytest.raises(ValueError, match=r"images must be \(N, H, W, C\)"):
            pad_images(imgs[0], padding)
    with pytest.raises(ValueError, match=r"batch_last=True needs \(B, M\) index arrays"):
        crop_flip_gather(pad_images(imgs, 1), torch.arange(2), *crop_flip_params(torch.Generator(), (2,), 1),
                         (4, 4), batch_last=True)


def test_crop_flip_params_draw_order_and_default_padding():
    """The documented draw order (one randint of (*shape, 2) in 0..2p for the offsets, then one of
    shape in {0, 1} for the flips) and the default padding 4; shape may be any sequence of ints."""
    for shape in ((7,), [2, 3], (np.int64(5),)):
        dims = tuple(int(s) for s in shape)
        g = torch.Generator().manual_seed(11)
        off = torch.randint(0, 9, dims + (2,), generator=g)
        flip = torch.randint(0, 2, dims, generator=g)
        dy, dx, fl = crop_flip_params(torch.Generator().manual_seed(11), shape)
        assert torch.equal(dy, off[..., 0]) and torch.equal(dx, off[..., 1]) and torch.equal(fl, flip)
        assert dy.dtype == dx.dtype == fl.dtype == torch.int64 and dy.shape == dims
    dy, dx, fl = crop_flip_params(torch.Generator().manual_seed(1), (400,), 2)
    assert set(dy.tolist()) == set(dx.tolist()) == set(range(5)) and set(fl.tolist()) == {0, 1}
    assert not torch.equal(dy, dx)


def test_random_crop_flip_is_params_then_gather_with_default_padding_4():
    """random_crop_flip = crop_flip_params (default padding 4) + pad_images + crop_flip_gather."""
    imgs = _images((5, 6, 7, 3), seed=3)
    for padding in (None, 4, 2):
        kw = {} if padding is None else {"padding": padding}
        p = 4 if padding is None else padding
        got = random_crop_flip(imgs, torch.Generator().manual_seed(8), **kw)
        dy, dx, fl = crop_flip_params(torch.Generator().manual_seed(8), (5,), p)
        padded = F.pad(imgs.permute(0, 3, 1, 2), (p,) * 4)
        for n in range(5):
            crop = padded[n, :, dy[n]:dy[n] + 6, dx[n]:dx[n] + 7]
            crop = crop.flip(-1) if fl[n] else crop
            assert torch.equal(got[n], crop.permute(1, 2, 0)), (padding, n)


@pytest.mark.parametrize("shape", [(2, 4, 4, 3), (2, 3, 3, 1), (2, 1, 5, 4), (2, 4, 5, 3), (3, 8, 8, 2), (2, 5, 5, 7)])
def test_random_crop_flip_accepts_small_channels_last_images(shape):
    """Channels-last batches whose H happens to be 1, 3 or 4 (but whose C is also a channel count)
    are not mistaken for channels-first ones (mutant: ``and`` -> ``or`` in the layout check)."""
    imgs = _images(shape)
    assert random_crop_flip(imgs, torch.Generator().manual_seed(0), padding=1).shape == shape


@pytest.mark.parametrize("shape", [(2, 3, 8, 8), (2, 1, 8, 8), (2, 4, 8, 8), (5, 3, 6, 6)])
def test_random_crop_flip_refuses_channels_first_of_1_3_4_channels_any_batch(shape):
    """Grey, RGB and RGBA channels-first batches are refused whatever their batch size (the suite
    only tried RGB with a batch of 4, which also matches the tuple when shape[0] is checked)."""
    with pytest.raises(ValueError, match="channels-last"):
        random_crop_flip(_images(shape), torch.Generator().manual_seed(0))


def test_normalize_is_to_tensor_then_normalize():
    """(x / 255 - mean) / std per channel (mutants: ``/ 255`` -> ``* 255``, ``255 -> 127.5``)."""
    imgs = torch.tensor([[[[0, 255, 51]], [[102, 204, 1]]]], dtype=torch.uint8)  # (1, 2, 1, 3)
    mean = torch.tensor([0.5, 0.25, 0.125])
    std = torch.tensor([0.5, 0.25, 2.0])
    got = normalize(imgs, mean, std, torch.float64)
    want = torch.tensor([[[[(0 / 255 - 0.5) / 0.5, (1 - 0.25) / 0.25, (0.2 - 0.125) / 2.0]],
                          [[(0.4 - 0.5) / 0.5, (0.8 - 0.25) / 0.25, (1 / 255 - 0.125) / 2.0]]]], dtype=torch.float64)
    assert got.dtype == torch.float64
    assert torch.allclose(got, want, rtol=1e-12, atol=1e-12)
    assert normalize(imgs, mean, std).dtype == torch.float32


# ---------------------------------------------------------------- convolutions as batched matrix products
def _conv_case(kernel, padding, h=4, w=3, a=2, b=2, c=3, out=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(a, b, h, w, c, dtype=torch.float64, generator=g)
    wt = torch.randn(a, out, *kernel, c, dtype=torch.float64, generator=g)
    bs = torch.randn(a, out, dtype=torch.float64, generator=g)
    return x, wt, bs


def _reference_conv(x, wt, bs, padding):
    return torch.stack([F.conv2d(x[j].permute(0, 3, 1, 2), wt[j].permute(0, 3, 1, 2), None if bs is None else bs[j],
                                 padding=padding).permute(0, 2, 3, 1) for j in range(x.shape[0])])


@pytest.mark.parametrize("kernel, padding", [((4, 3), (0, 0)), ((6, 1), (1, 0)), ((2, 5), (0, 1))])
def test_stacked_conv2d_with_a_one_pixel_output_side(kernel, padding):
    """A kernel as large as the (padded) input gives an output of height or width 1, which is a valid
    convolution (mutants: ``ho < 1`` -> ``ho <= 1`` / ``ho < 2`` and the same for ``wo``)."""
    x, wt, bs = _conv_case(kernel, padding)
    y = stacked_conv2d(x, wt, bs, padding)
    ref = _reference_conv(x, wt, bs, padding)
    assert y.shape == ref.shape and 1 in y.shape[2:4]
    assert torch.allclose(y, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kernel, padding", [((5, 3), (0, 0)), ((4, 4), (0, 0)), ((7, 1), (1, 0)), ((2, 6), (0, 1))])
def test_kernels_larger_than_the_padded_input_are_refused(kernel, padding):
    """im2col refuses an output of height or width 0 (or less) by name, where F.conv2d also refuses it
    (mutants: the raise dropped, ``< 1`` -> ``< 0``): as_strided read outside the input or an empty output."""
    x, wt, bs = _conv_case(kernel, padding)
    with pytest.raises(ValueError, match="does not fit a 4x3 input"):
        stacked_conv2d(x, wt, bs, padding)
    with pytest.raises(ValueError, match="does not fit a 4x3 input"):
        im2col(x, kernel, padding)


def test_im2col_patches_are_in_kh_kw_c_order():
    """im2col's documented layout: row (b, i, j) holds the padded input's (kh, kw, C) window at (i, j)."""
    x = torch.arange(2 * 1 * 3 * 4 * 2, dtype=torch.float64).view(2, 1, 3, 4, 2) + 1
    cols = im2col(x, (2, 3), (1, 0))
    xp = F.pad(x, (0, 0, 0, 0, 1, 1))
    ho, wo = 3 + 2 - 2 + 1, 4 - 3 + 1
    assert cols.shape == (2, ho * wo, 2 * 3 * 2)
    for i in range(ho):
        for j in range(wo):
            assert torch.equal(cols[:, i * wo + j], xp[:, 0, i:i + 2, j:j + 3, :].reshape(2, -1))


@pytest.mark.parametrize("wants", [(True, False, False), (False, True, False), (False, False, True),
                                   (True, False, True), (False, True, True)])
def test_stacked_conv2d_gradients_of_a_subset_of_its_inputs(wants):
    """Gradients of any subset of (x, weight, bias) equal F.conv2d's: the backward reads
    ``needs_input_grad`` of the right input (mutants: index 0 -> 1, 2 -> 1), e.g. the gradient of
    the input alone (frozen weights) or of the bias alone."""
    x, wt, bs = _conv_case((3, 2), (1, 1), h=5, w=4)
    ins = [t.clone().requires_grad_(r) for t, r in zip((x, wt, bs), wants)]
    refs = [t.clone().requires_grad_(r) for t, r in zip((x, wt, bs), wants)]
    g = torch.randn(2, 2, 5, 5, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    (stacked_conv2d(*ins, (1, 1)) * g).sum().backward()
    (_reference_conv(*refs, (1, 1)) * g).sum().backward()
    for t, r, want in zip(ins, refs, wants):
        if want:
            assert t.grad is not None and torch.allclose(t.grad, r.grad, rtol=1e-12, atol=1e-12)
        else:
            assert t.grad is None


# ---------------------------------------------------------------- seeded dropout
_M32, _MUL, _STEP_MUL = 0xFFFFFFFF, 0x45D9F3B, 0x9E3779B1 & 0x7FFFFFFF


def _mix(h):
    h = (((h >> 16) ^ h) * _MUL) & _M32
    h = (((h >> 16) ^ h) * _MUL) & _M32
    return (h >> 16) ^ h


def _hash(key, step, layer, q):
    """The mask's 32-bit hash of element q, in Python integers (no int64 tensor arithmetic)."""
    base = _mix(key ^ _mix((step * _STEP_MUL + layer + 1) & _M32))
    return _mix(_mix((base + _mix(q)) & _M32) ^ base)


def test_seeded_dropout_mask_is_the_documented_hash_bit_for_bit():
    """The mask is part of a run's reproducibility contract (a result is re-run from its seed): every
    element equals the integer hash computed in plain Python, for 32-bit keys near 2**32, large steps
    and several layers (mutants: every constant of the hash, the shifts, the 24-bit threshold). The
    docstring's formula lacked the ``+ 1`` on the layer and the final ``mix(h ^ base)``; it now says
    what the code computes."""
    keys = [0, 1, 0xFFFFFFFF, 0x80000000, dropout_key(3, 7, 2)]
    shape = (3, 5)
    cases = ((0, 0, 0.5), (1, 2, 0.3), (123457, 1, 0.9), (2 ** 31 + 5, 4, 0.125), (2 ** 40 + 3, 0, 0.5))
    for step, layer, p in cases:
        m = seeded_dropout_mask(torch.tensor(keys), step, layer, shape, p, torch.float64)
        threshold = round(p * 2 ** 24)
        want = torch.tensor([[(_hash(k, step, layer, q) >> 8) >= threshold for q in range(15)] for k in keys])
        assert torch.equal(m != 0, want.view(len(keys), *shape)), (step, layer, p)
        assert torch.equal(m[m != 0], torch.full_like(m[m != 0], 1 / (1 - p)))


def test_an_element_whose_hash_equals_the_threshold_is_kept():
    """Dropped means "below p * 2**24" (mutant: ``>=`` -> ``>``): choose p so that one element's top
    24 bits are exactly the threshold."""
    key = dropout_key(0, 1, 2)
    top = _hash(key, 3, 0, 4) >> 8
    p = top / 2 ** 24
    assert 0 < p < 1
    m = seeded_dropout_mask(torch.tensor(key), 3, 0, (6,), p, torch.float64)
    assert m[4] == 1 / (1 - p)
    m = seeded_dropout_mask(torch.tensor(key), 3, 0, (6,), (top + 1) / 2 ** 24, torch.float64)
    assert m[4] == 0


def test_seeded_dropout_mask_p_range():
    """p = 0 keeps everything (scale 1); p = 1 and p < 0 are refused (mutants of ``0 <= p < 1``)."""
    keys = torch.tensor([5, 6])
    ones = torch.ones(2, 4, 3, dtype=torch.float64)
    assert torch.equal(seeded_dropout_mask(keys, 0, 0, (4, 3), 0.0, torch.float64), ones)
    for bad in (1.0, 1.5, -0.1):
        with pytest.raises(ValueError, match=r"p must lie in \[0, 1\)"):
            seeded_dropout_mask(keys, 0, 0, (4, 3), bad)


def test_seeded_dropout_mask_with_a_batched_step_tensor():
    """The step may be a tensor batched by torch.func.vmap (as a device tensor in a CUDA graph, it is
    never read on the host; mutant: ``not torch.is_tensor(step)`` -> ``torch.is_tensor(step)`` calls
    ``int(step)``)."""
    keys = torch.tensor([dropout_key(0, 0, c) for c in range(2)])
    steps = torch.tensor([0, 3, 9])
    got = torch.func.vmap(lambda s: seeded_dropout_mask(keys, s, 1, (2, 3), 0.5, torch.float64))(steps)
    want = torch.stack([seeded_dropout_mask(keys, int(s), 1, (2, 3), 0.5, torch.float64) for s in steps])
    assert torch.equal(got, want)


def test_seeded_dropout_mask_shape_may_be_any_sequence_of_ints():
    """shape is converted to a tuple of ints first: a range, a numpy array or a list of numpy ints
    give the tuple's mask (mutant: the conversion dropped; Tensor.view refuses a range or an array)."""
    keys = torch.tensor([dropout_key(1, 0, c) for c in range(2)])
    want = seeded_dropout_mask(keys, 2, 0, (2, 3), 0.5, torch.float64)
    for shape in (range(2, 4), np.array([2, 3]), [np.int64(2), np.int64(3)]):
        assert torch.equal(seeded_dropout_mask(keys, 2, 0, shape, 0.5, torch.float64), want)


# ====================================================================== f9b9704..HEAD: dropout_key's checks
def test_dropout_key_is_the_stream_of_round_then_client():
    """dropout_key(seed, round_index, client) is the first uint32 of SeedSequence(entropy=seed, spawn_key=(crc32
    ('dropout'), round_index, client)) (fedlib.rng's documented layout, computed here with numpy and zlib): the
    round before the client. Kills the mutant that checks the two by name and assigns them swapped (each client's
    dropout masks would be another round's)."""
    import zlib

    for seed, r, c in ((0, 1, 2), (7, 3, 0), (5, 0, 4)):
        want = np.random.SeedSequence(entropy=seed, spawn_key=(zlib.crc32(b"dropout"), r, c)).generate_state(
            1, dtype=np.uint32)[0]
        assert dropout_key(seed, r, c) == int(want)
    assert dropout_key(0, 1, 2) != dropout_key(0, 2, 1)


# ---------------------------------------------------------------- mutants of 2e0d04d..fb2fbe6
def test_the_gpu_helpers_refuse_a_bool_size_as_no_integer():
    """A bool is no size or count (True would be one sample, a kernel of 1): crop_flip_params' and
    seeded_dropout_mask's shape, crop_flip_gather's size and stacked_pool2d's kernel_size, stride and padding refuse
    it by name, Python's and numpy's alike (mutants A2, I3 of 2e0d04d..fb2fbe6: the bool exclusions dropped)."""
    g = torch.Generator().manual_seed(0)
    for bad in (True, np.True_):
        with pytest.raises(ValueError, match=r"^shape must be a tuple of integers >= 0"):
            crop_flip_params(g, (bad, 2))
        with pytest.raises(ValueError, match=r"^shape must be a tuple of integers >= 0"):
            seeded_dropout_mask(torch.zeros(2, dtype=torch.int64), 0, 0, (2, bad), 0.5)
        with pytest.raises(ValueError, match=r"^size must be 2 integers >= 1"):
            crop_flip_gather(pad_images(_images((2, 4, 4, 3)), 1), torch.arange(2), torch.zeros(2, dtype=torch.int64),
                             torch.zeros(2, dtype=torch.int64), torch.zeros(2, dtype=torch.int64), (bad, 4))
        for name in ("kernel_size", "stride"):
            with pytest.raises(ValueError, match=f"^{name} must be an integer >= 1"):
                stacked_pool2d(torch.zeros(1, 1, 4, 4, 1), "max", **{"kernel_size": 2, name: bad})
        with pytest.raises(ValueError, match="^padding must be an integer >= 0"):
            stacked_pool2d(torch.zeros(1, 1, 4, 4, 1), "avg", kernel_size=2, padding=(bad, 0))


def test_stacked_pool2d_refuses_a_zero_kernel_and_takes_pairs():
    """kernel_size and stride are integers >= 1, padding >= 0, each a number or a pair: a 0 kernel is refused by
    name (torch's own "kernel size should be greater than zero" otherwise), (2, 2) pools as 2 and padding 0 is
    taken (mutants I2: kernel_size's lower bound 0; I4: a pair read as one value)."""
    x = torch.arange(2 * 1 * 4 * 4 * 1, dtype=torch.float32).reshape(2, 1, 4, 4, 1)
    with pytest.raises(ValueError, match=r"^kernel_size must be an integer >= 1 \(or a pair of them\), got 0$"):
        stacked_pool2d(x, "max", kernel_size=0)
    got = stacked_pool2d(x, "max", kernel_size=(2, 2), stride=[2, 2], padding=0)
    # model 0's image is 0..15 row by row: the 2x2 maxima are 5, 7, 13, 15; model 1's are 16 more
    assert got.shape == (2, 1, 2, 2, 1)
    assert got[0, 0, :, :, 0].tolist() == [[5.0, 7.0], [13.0, 15.0]]
    assert got[1, 0, :, :, 0].tolist() == [[21.0, 23.0], [29.0, 31.0]]


# ---------------------------------------------------------------- mutants of 0571233~1..165a974
@pytest.mark.parametrize("padding", [np.int8(1), np.uint8(1), (np.int8(1), np.uint8(1))])
def test_stacked_conv2d_takes_small_numpy_integer_paddings_on_a_tall_input(padding):
    """A numpy integer padding of a narrow dtype pads as the Python int: a 130-row input with padding np.int8(1)
    gives the 130 x 4 output of padding 1, bit for bit (mutant I6 of 0571233~1..165a974: the pair returned as given,
    not as ints; the output size ``130 + 2 * np.int8(1)`` then overflowed int8, and uint8 arithmetic wrapped)."""
    x = torch.randn(1, 1, 130, 4, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    w = torch.randn(1, 2, 3, 3, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    y = stacked_conv2d(x, w, None, padding)
    assert y.shape == (1, 1, 130, 4, 2)  # H' = 130 + 2*1 - 3 + 1
    assert torch.equal(y, stacked_conv2d(x, w, None, 1))


# ----------------------------------------------------- normalize's mean and std: mutants of 38cf0bd..f929b39 (d0c8dde)
def test_normalize_names_a_mean_or_std_that_is_not_one_number_per_channel():
    """normalize's mean and std must each be one number per channel, a 1-d sequence or tensor of the images' last
    axis' length, and anything else is a ValueError naming it: a (3, 1) mean (which broadcast the (1, 2, 1, 3) images
    into (1, 2, 3, 3) without a word), a number, a 0-d tensor std (one number for every channel), and 0-d
    images, which have no channel axis. Mutants of 38cf0bd..f929b39: NZ4 (``v.ndim != 1`` dropped), NZ10 (``v.ndim !=
    1`` -> ``v.ndim > 1``: a 0-d mean's ``shape[0]`` an IndexError), NZ3 (0-d images' ``shape[-1]`` an
    IndexError)."""
    from fedlib.data.cifar10 import CIFAR10_MEAN, CIFAR10_STD

    imgs = _images((1, 2, 1, 3))
    with pytest.raises(ValueError, match=r"^mean must hold one number per channel \(3, the images' last axis\), got "
                                         r"shape \(3, 1\)$"):
        normalize(imgs, torch.tensor(CIFAR10_MEAN).reshape(3, 1), CIFAR10_STD)
    with pytest.raises(ValueError, match=r"^mean must hold one number per channel \(3, .*got shape \(\)$"):
        normalize(imgs, 0.5, CIFAR10_STD)
    with pytest.raises(ValueError, match=r"^std must hold one number per channel \(3, .*got shape \(\)$"):
        normalize(imgs, CIFAR10_MEAN, torch.tensor(0.25))
    with pytest.raises(ValueError, match=r"^mean must hold one number per channel "):
        normalize(torch.tensor(7, dtype=torch.uint8), CIFAR10_MEAN, CIFAR10_STD)


def test_normalize_uses_a_tensor_of_its_dtype_as_it_is():
    """A mean and std given as tensors of the result's dtype are used as they are (torch.as_tensor: no copy, no
    warning), with the numbers of (x / 255 - mean) / std: pixel 51 in every channel of a mean (0.1, 0.2, 0.3) and
    std (0.5, 0.25, 0.125), float64: (0.2 - mean) / std = (0.2, 0.0, -0.8). Mutant NZ8 of 38cf0bd..f929b39
    (torch.tensor for torch.as_tensor: a copy, with torch's "To copy construct from a tensor, it is recommended to
    use sourceTensor.clone().detach()" UserWarning on every call)."""
    import warnings

    mean = torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64)
    std = torch.tensor([0.5, 0.25, 0.125], dtype=torch.float64)
    imgs = torch.full((1, 1, 1, 3), 51, dtype=torch.uint8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = normalize(imgs, mean, std, torch.float64)
    assert got.dtype == torch.float64 and got.reshape(-1).tolist() == pytest.approx([0.2, 0.0, -0.8], abs=1e-15)


# ------------------------------- seeded_dropout_mask's key and step dtypes: mutants of f929b39..780545c (d859990)
def test_seeded_dropout_mask_takes_every_integer_dtype_and_refuses_complex_and_bool_tensors():
    """Keys and a step tensor of any integer dtype (int32 keys, an int16 or uint8 step) give the documented hash of
    their values, as int64 ones do; complex keys or step (cast to int64 they lost their imaginary part) and a bool
    step tensor are refused by their dtype, as float and bool keys are. Mutants of f929b39..780545c: DR3 (complex
    dtypes let through), DR9 (every dtype but int64 refused), DR10 (a step tensor checked only for a floating
    dtype)."""
    keys, shape, p = [5, 123457, 2 ** 31 - 1], (2, 3), 0.5
    threshold = round(p * 2 ** 24)
    want = torch.tensor([[(_hash(k, 3, 1, q) >> 8) >= threshold for q in range(6)] for k in keys]).view(3, *shape)
    for k_dtype, step in ((torch.int32, 3), (torch.int64, torch.tensor(3, dtype=torch.int16)),
                          (torch.int32, torch.tensor(3, dtype=torch.uint8))):
        m = seeded_dropout_mask(torch.tensor(keys, dtype=k_dtype), step, 1, shape, p, torch.float64)
        assert torch.equal(m != 0, want), (k_dtype, step)
    for bad_keys, bad_step, said in ((torch.tensor([2 + 1j]), 3, "keys must be an integer tensor .*got a "
                                      r"torch\.complex64 tensor$"),
                                     (torch.tensor([2]), torch.tensor(3 + 0j), r"^step must be an integer tensor .*got "
                                      r"a torch\.complex64 tensor$"),
                                     (torch.tensor([2]), torch.tensor(True), r"^step must be an integer tensor .*got "
                                      r"a torch\.bool tensor$")):
        with pytest.raises(ValueError, match=said):
            seeded_dropout_mask(bad_keys, bad_step, 0, (3,), 0.5)


def test_normalize_takes_a_zero_or_negative_mean():
    """AN4: only std must be > 0; a mean of 0 or below is taken: pixels (0, 255, 51) with mean (0, -0.5, 1.5) and
    std (0.5, 0.5, 0.2): (0 - 0) / 0.5 = 0, (1 + 0.5) / 0.5 = 3, (0.2 - 1.5) / 0.2 = -6.5."""
    imgs = torch.tensor([[[[0, 255, 51]]]], dtype=torch.uint8)
    got = normalize(imgs, (0.0, -0.5, 1.5), (0.5, 0.5, 0.2), torch.float64)
    assert got.flatten().tolist() == pytest.approx([0.0, 3.0, -6.5], rel=1e-12)


def test_normalize_checks_host_values_before_moving_them_to_the_images_device():
    """AN7: mean and std given on the host are read there, then moved to the images' device: images on the meta
    device (another device, holding no values to read) with tuples of mean and std give a meta result of the
    images' shape, and a bad std is still refused by entry. Read after the move, they were read from the device
    (meta: 'Cannot copy out of meta tensor'; CUDA: a synchronisation)."""
    imgs = torch.zeros((2, 4, 4, 3), dtype=torch.uint8, device="meta")
    got = normalize(imgs, (0.5, 0.5, 0.5), (0.25, 0.5, 0.1))
    assert got.device.type == "meta" and got.shape == (2, 4, 4, 3) and got.dtype == torch.float32
    with pytest.raises(ValueError, match=r"^std must hold finite numbers > 0 .*got std\[1\] = 0$"):
        normalize(imgs, (0.5, 0.5, 0.5), np.array([0.25, 0.0, 0.1]))


CUDA = [pytest.param("cuda", marks=pytest.mark.cuda)] if torch.cuda.is_available() else []


@pytest.mark.parametrize("where", ["fake cuda"] + CUDA)
def test_normalize_moves_host_mean_and_std_to_the_images_device(where):
    """AN8: mean and std given on the host are checked there, then moved to the images' device (the docstring: read
    on the host, "before they move to the images' device"). Left on the host, CUDA images refuse them (a (C,) CPU
    operand; only a 0-d one is taken as a scalar), while CPU images are on the host anyway and meta images take a CPU
    operand in the in-place sub_ / div_ (so the meta test above cannot tell). Without a GPU, the images are fake
    CUDA tensors (torch's FakeTensorMode: shape, dtype and device, no values), which refuse a CPU (C,) operand as
    CUDA does ('found at least two devices, cuda:0 and cpu'); one channel, as the mode keeps the values of a
    one-number tensor made in it (what the host check reads), not of longer ones. Where torch sees a GPU, real CUDA
    images too: (x / 255 - mean) / std per channel, pixels (0, 255, 51) with mean (0.5, 0.25, 0.125) and std (0.5,
    0.25, 2): (0 - 0.5) / 0.5 = -1, (1 - 0.25) / 0.25 = 3, (0.2 - 0.125) / 2 = 0.0375."""
    if where == "cuda":
        imgs = torch.tensor([[[[0, 255, 51]]]], dtype=torch.uint8, device="cuda")
        got = normalize(imgs, (0.5, 0.25, 0.125), np.array([0.5, 0.25, 2.0]), torch.float64)
        assert got.device == imgs.device
        assert got.cpu().flatten().tolist() == pytest.approx([-1.0, 3.0, 0.0375], rel=1e-12)
        return
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        imgs = torch.empty((2, 4, 4, 1), dtype=torch.uint8, device="cuda")
        for mean, std in (((0.5,), (0.25,)), ([0.5], np.array([0.25])), (torch.tensor([0.5]), (0.25,))):
            got = normalize(imgs, mean, std, torch.float64)
            assert got.device == imgs.device and got.shape == (2, 4, 4, 1) and got.dtype == torch.float64
        with pytest.raises(ValueError, match=r"^std must hold finite numbers > 0 .*got std\[0\] = 0$"):
            normalize(imgs, (0.5,), (0.0,))    # still checked on the host

"""Tests added by a mutation-testing pass over ``fedlib/engines/grouped.py`` and ``fedlib/checkpoint.py``.

Each test kills mutants that the rest of the suite let survive. The grouped network is compared
with each model's own plain ``nn.Sequential`` (its ordinary torch forward, an independent
implementation) on tiny float64 inputs; the checkpoint tests use values whose answer is known
by hand.

Mutants of c641002 and bca6c97, global hooks (fedlib/engines/grouped.py, stacked.py) (the 677635c..166b66c pass,
described in tests/README.md, Mutation passes):
  H1 ``startswith("backward")`` -> ``"forward"``; H2 ``path == "grouped"`` -> ``!=``; H3 drop run_round's call;
  H4 registered_hooks without the global hooks; H5 ``_hook_owner``'s test inverted; H6 wrong ``_global*`` table
  name; H8 drop evaluate's call: killed by the suite;
  H7 ``continue`` -> ``return`` in refuse_global_hooks_added_later (a global forward hook on the vmap path hid a
  global backward hook registered with it): killed here.

Review and mutants of f37e303..6eb7195, ``fedlib.engines.grouped.registered_hooks`` / ``_refuse_hooks`` (pass
described in tests/README.md, Mutation passes):
  review: test_grouped_path_names_a_backward_hook_before_a_forward_hook;
  killed here: R1, R2, R6.

Mutants of ``load_checkpoint``'s reasons (an empty file, a truncated one, a read error while unpickling), of the
rangeless pass (described in tests/README.md, Mutation passes):
  killed here: OSError re-raise dropped, 'empty (0 bytes)' dropped/inverted.

Mutants of 8bd9827.., ``fedlib.checkpoint`` (the part types, an unreadable path) (pass described in
tests/README.md, Mutation passes).

Mutants of efe3bcd..52ae29d, checkpoint.to_torch_tree and the grouped / stacked hooks (pass described in
tests/README.md, Mutation passes):
  CK1-CK6 checkpoint.to_torch_tree: dtype not the model's; integer arrays cast; dicts not converted; no copy;
        like unchecked; NamedTuples not rebuilt.
  G1-G6, ST1-ST3 grouped / stacked hooks: global hooks not listed; backward not refused later; grouped ->
        vmap; no backward-first sort; owner name; vmap forward refused; no per-round check / checked as vmap;
        lr_at unchecked.
  killed here: CK1-CK4; G1-G6 and ST1-ST3 (fedlib/engines/stacked.py's among them) killed by the suite.

Mutants of 37f92d9..d2bb791 (fedlib/checkpoint.py) (pass described in tests/README.md, Mutation passes):
  killed by the suite: C2 initial given as ``initial or {}``; C3 _where's two forms swapped; C5 load_checkpoint
  takes a kind that is no string; C6 NaT not a NaN kind; C8 Decimal('sNaN') not NaN; C11 without ``x is y``;
  C12 tensors not converted; C13 a date against a number compared; C14 / C15 bools against numbers (the dtype /
  the entries); C16 NaT not equal to NaT in arrays; C17 ``is_bool(x) != is_bool(y)`` dropped; C19 config_diff
  takes a non-mapping; C20 sets compared by ``==``.
  killed here: C1 history's Mapping refusal dropped; C9 _same_set without ``rest.pop``; C10 without its length
  check.
  equivalent: C7 _nan_kind without the bool exclusion (a bool is never unequal to itself: ``v != v`` is False,
  None either way); C18 ``return False`` -> ``return x is y`` in _same's except (``x is y`` returned True at its
  top, so there it is False).
  left alive: C4 _mapping without RuntimeError: ``dict()`` raises it only for an iterable whose iteration raises
  it (a generator raising StopIteration); the tensor truth value the docstring names is no longer taken
  (``initial is None``, not ``initial or {}``). No test.

Mutants of f9b9704..2e0d04d (fedlib/checkpoint.py: to_torch_tree's per-entry dtypes, _collect_like_dtypes) (pass
described in tests/README.md, Mutation passes):
  C1 a mixed like's other arrays take ``first.dtype``; C2 ``len(floats) == 1`` -> ``>= 1``; C3 every array takes
  the one dtype (no entry look-up); C4 ``len(obj) == len(like)`` -> ``>=``; C5 drop the shape test; C6 drop the
  NamedTuple exclusion; C7 integer entries of like give their dtype too; C8 dicts not searched; C9 lists and tuples
  not shaped like like not searched; C10 the floating dtypes of like[0] only. killed by the suite: C1, C2, C5, C10.
  killed here: C3, C4, C6, C7, C8, C9 (C3, C8, C9 pass the suite's mixed float32/float64 model: its saved arrays
  already have their entries' dtypes; a bfloat16 parameter, saved as float32, tells them apart).

Mutants of 2e0d04d..fb2fbe6 (fedlib/engines/grouped.py: GroupedNetwork's num_models and device) (pass described in
tests/README.md, Mutation passes): N1 num_models' bool exclusion dropped; N2 only a TypeError of torch.device
relabelled. killed by the suite: both.

Mutants of 0571233~1..165a974 (fedlib/engines/grouped.py: GroupedNetwork's num_models by check_int) (pass described in
tests/README.md, Mutation passes):
  N1 minimum 0; N2 the checked value not assigned (np.int64 kept); N3 check_count (2.0 taken). killed by the suite:
  N1-N3.
"""
from __future__ import annotations

import errno
import hashlib
import pickle

import numpy as np
import pytest
import torch
from torch import nn

from fedlib import checkpoint as ck
from fedlib.checkpoint import (CheckpointError, check_config, config_diff, load_checkpoint, save_checkpoint,
                              to_numpy_tree)
from fedlib.engines.augment import seeded_dropout_mask
from fedlib.engines.grouped import GroupedNetwork, leaf_layers, refuse_global_hooks_added_later, registered_hooks
from torch_threads import one_torch_thread  # noqa: F401 (autouse fixture)
from torch.nn.modules import module as torch_module


# ---------------------------------------------------------------------------------- checkpoint.py


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
def test_to_numpy_tree_refuses_a_complex_dtype_numpy_lacks():
    """complex32 has no numpy dtype and is not floating: it is refused (TypeError), not cast to
    float32, which would drop the imaginary part."""
    z = torch.zeros(2, dtype=torch.complex64).to(torch.complex32)
    with pytest.raises(TypeError):
        to_numpy_tree({"z": z})


def test_a_checkpoint_of_zero_rounds_is_allowed(tmp_path):
    """round_done >= 0: a checkpoint written before the first round (0 rounds done) is legitimate."""
    path = save_checkpoint(tmp_path / "c.ckpt", config={"a": 1}, round_done=0, state={}, history=[], seed=0)
    doc = load_checkpoint(path)
    assert doc["round"] == 0 and doc["rng"]["next_round"] == 0 and doc["rng"]["seed"] == 0


def test_checkpoint_is_a_protocol_4_pickle(tmp_path):
    """The file is a protocol-4 pickle (PROTO opcode 0x80 0x04): readable by every supported Python
    and able to hold arrays over 4 GiB (protocol 3 cannot)."""
    path = save_checkpoint(tmp_path / "c.ckpt", config={}, round_done=1, state={"w": np.ones(3)}, history=[])
    assert path.read_bytes()[:2] == b"\x80\x04"


def test_save_into_a_missing_folder_is_a_checkpoint_error(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        save_checkpoint(tmp_path / "no" / "c.ckpt", config={}, round_done=1, state={}, history=[])
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("a,b,same", [
    ([1, 2], [1, 3], False),                      # same length, one entry differs
    ([1, 2], [1, 2, 3], False),                   # a prefix is not the same list
    ([1, 2], (1, 2), True),                       # list / tuple (a JSON round trip) are the same
    ([1, 2], 3, False),                           # a list against a scalar: differs, no crash
    (["a", "b"], "ab", False),                    # ... and against a string of the same length
    ([{"k": 1}], [{"k": 2}], False),              # mappings inside a list: values compared
    ([{"k": 1}], [{"k": 1}], True),
    ([{"k": 1}], [{"j": 1}], False),              # ... and keys
    (np.array([1.0, 2.0]), [1.0, 2.0], True),     # an array against the list it was saved as
    ([1.0, 2.0], np.array([1.0, 2.0]), True),
    (np.array([1.0, 2.0]), [1.0, 3.0], False),
    (np.array([1, float("nan")], dtype=object), np.array([1, float("nan")], dtype=object), True),
    (np.array([1, 2], dtype=object), np.array([1, 3], dtype=object), False),
    (np.array([complex(np.nan, 1.0)]), np.array([complex(np.nan, 1.0)]), True),   # complex NaN equals itself
    (np.array([complex(1.0, 2.0)]), np.array([complex(1.0, 3.0)]), False),
    (np.array(["NaT"], dtype="M8[D]"), np.array([np.nan]), False),                 # NaT is not a float NaN
])
def test_config_values_compared_by_kind(a, b, same):
    assert config_diff({"x": a}, {"x": b}) == ([] if same else ["x"])
    assert config_diff({"x": b}, {"x": a}) == ([] if same else ["x"])


class _Ambiguous:
    """An object whose == is an array (no truth value): equal only to itself."""

    def __eq__(self, other):
        return np.array([True, False])

    __hash__ = object.__hash__


def test_a_value_whose_equality_is_not_a_truth_value_is_compared_by_identity():
    v = _Ambiguous()
    assert config_diff({"x": v}, {"x": v}) == []
    assert config_diff({"x": v}, {"x": _Ambiguous()}) == ["x"]


@pytest.mark.parametrize("saved,current", [([("a", 1)], {"a": 1}), ({"a": 1}, [("a", 1)]), (3, {})])
def test_check_config_refuses_a_config_that_is_not_a_mapping(saved, current):
    """A list of pairs would pass dict(): refused by name, not converted."""
    with pytest.raises(CheckpointError, match="a config must be a mapping"):
        check_config("c.ckpt", saved, current)


# ------------------------------------------------------------------------------------ grouped.py
M, B, H, W = 3, 2, 8, 7   # models, images per model, image size (not square: H and W must not be swapped)


def _models(make, seed=0):
    """``M`` float64 copies of ``make()`` with different random parameters."""
    g = torch.Generator().manual_seed(seed)
    models = [make().double() for _ in range(M)]
    for m in models:
        for p in m.parameters():
            with torch.no_grad():
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64))
    return models


def _grouped_logits(models, x, conv, dropout_keys=None, step=None):
    """The grouped network's logits ``(M, B, K)`` for images ``x`` ``(M, B, H, W, C)``."""
    net = GroupedNetwork(models[0], len(models), device="cpu", dtype=torch.float64, conv=conv)
    for j, m in enumerate(models):
        for n, p in m.named_parameters():
            net.params[n][j].copy_(p.detach())
    xg = net.image_input(x.permute(1, 2, 3, 0, 4).contiguous())
    return net.forward(net.params, xg, len(models), dropout_keys=dropout_keys, step=step)


def _close(got, want):
    """float64, same layers: equal up to the summation order (torch.testing.assert_close would
    import torch.distributed, seconds on a busy machine)."""
    assert got.shape == want.shape
    assert torch.allclose(got, want, rtol=1e-12, atol=1e-12), float((got - want).abs().max())


def _images(c=3, seed=1):
    return torch.randn(M, B, H, W, c, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def _head(make_body):
    """body + Flatten + Linear, the Linear sized from the body's output on one image."""
    def make():
        body = make_body()
        n = body(torch.zeros(1, 3, H, W)).numel()
        return nn.Sequential(*body, nn.Flatten(), nn.Linear(n, 4))
    return make


# Every option of a convolution or a pooling layer, each set away from its default, one per case.
LAYER_OPTIONS = {
    "conv stride": lambda: nn.Sequential(nn.Conv2d(3, 4, 3, stride=2)),
    "conv padding": lambda: nn.Sequential(nn.Conv2d(3, 4, 3, padding=2)),
    "conv dilation": lambda: nn.Sequential(nn.Conv2d(3, 4, 3, dilation=2)),
    "conv padding same": lambda: nn.Sequential(nn.Conv2d(3, 4, 3, padding="same")),
    "maxpool stride": lambda: nn.Sequential(nn.Conv2d(3, 4, 1), nn.MaxPool2d(2, stride=1)),
    "maxpool padding": lambda: nn.Sequential(nn.Conv2d(3, 4, 1), nn.MaxPool2d(2, padding=1)),
    "maxpool dilation": lambda: nn.Sequential(nn.Conv2d(3, 4, 1), nn.MaxPool2d(2, stride=1, dilation=2)),
    "maxpool ceil_mode": lambda: nn.Sequential(nn.Conv2d(3, 4, 1), nn.MaxPool2d(2, ceil_mode=True)),
    "avgpool stride": lambda: nn.Sequential(nn.Conv2d(3, 4, 1), nn.AvgPool2d(2, stride=1)),
    "avgpool padding": lambda: nn.Sequential(nn.Conv2d(3, 4, 1), nn.AvgPool2d(2, padding=1)),
    "avgpool ceil_mode": lambda: nn.Sequential(nn.Conv2d(3, 4, 1), nn.AvgPool2d(2, ceil_mode=True)),
    "avgpool count_include_pad": lambda: nn.Sequential(nn.Conv2d(3, 4, 1),
                                                       nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)),
    "avgpool divisor_override": lambda: nn.Sequential(nn.Conv2d(3, 4, 1), nn.AvgPool2d(2, divisor_override=3)),
}
GEMM_CANNOT = {"conv stride", "conv dilation", "conv padding same"}


@pytest.mark.parametrize("conv", ["cudnn", "gemm"])
@pytest.mark.parametrize("case", list(LAYER_OPTIONS))
def test_layer_options_reach_the_grouped_layers(case, conv):
    """Each model's logits equal its own plain network's for every convolution / pooling option
    (conv='gemm' refuses the convolutions it cannot compute, by name)."""
    models = _models(_head(LAYER_OPTIONS[case]))
    x = _images()
    if conv == "gemm" and case in GEMM_CANNOT:
        with pytest.raises(ValueError, match="conv='gemm' supports stride 1, dilation 1 and integer padding"):
            _grouped_logits(models, x, conv)
        return
    out = _grouped_logits(models, x, conv)
    for j, m in enumerate(models):
        _close(out[j], m(x[j].permute(0, 3, 1, 2)))


@pytest.mark.parametrize("conv", ["cudnn", "gemm"])
def test_dropout_ids_count_every_dropout_layer_in_forward_order(conv):
    """Dropout layer k (counting p=0 layers too) uses stream id k: each model's logits equal its
    plain network's with seeded_dropout_mask(key_j, step, k, shape of one model's activation, p)
    applied by hand after layer k."""
    def make():
        return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.Dropout(0.0), nn.ReLU(), nn.Dropout(0.5),
                             nn.Flatten(), nn.Dropout(0.4), nn.Linear(4 * H * W, 5), nn.Dropout(0.5), nn.Linear(5, 3))
    models = _models(make)
    x = _images()
    keys = torch.tensor([11, 22, 33], dtype=torch.int64)
    step = 5
    out = _grouped_logits(models, x, conv, dropout_keys=keys, step=step)
    for j, m in enumerate(models):
        h = x[j].permute(0, 3, 1, 2)
        k = 0
        for layer in m:
            h = layer(h) if not isinstance(layer, nn.Dropout) else h
            if isinstance(layer, nn.Dropout):
                if layer.p > 0:
                    h = h * seeded_dropout_mask(keys[j:j + 1], step, k, tuple(h.shape), layer.p, h.dtype)[0]
                k += 1
        _close(out[j], h)
    net = GroupedNetwork(models[0], M, device="cpu", dtype=torch.float64, conv=conv)
    assert net.num_dropout == 4


def test_in_channels_is_the_first_convolutions():
    model = nn.Sequential(nn.Conv2d(3, 5, 1), nn.Conv2d(5, 2, 1), nn.Flatten(), nn.Linear(2, 2))
    assert GroupedNetwork(model, 2, device="cpu").in_channels == 3


def test_num_models_must_be_an_int():
    model = nn.Sequential(nn.Conv2d(3, 4, 1), nn.Flatten(), nn.Linear(4, 2))
    for bad in (2.0, np.float64(2.0), "2"):
        with pytest.raises(ValueError, match="num_models must be an integer >= 1"):
            GroupedNetwork(model, bad, device="cpu")


def test_flatten_of_part_of_the_dimensions_is_refused():
    model = nn.Sequential(nn.Conv2d(3, 4, 1), nn.Flatten(1, 2), nn.Linear(4, 2))
    with pytest.raises(ValueError, match=r"only one Flatten\(start_dim=1, end_dim=-1\)"):
        GroupedNetwork(model, 2, device="cpu")


def test_leaf_layers_refuses_a_model_that_is_not_a_sequential():
    with pytest.raises(ValueError, match="needs an nn.Sequential of standard layers, got Conv2d"):
        leaf_layers(nn.Conv2d(3, 4, 1))


class _Residual(nn.Module):
    """x + conv(x): its children are all grouped layers, but its forward is not their sequence."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        return x + self.conv(x)


def test_a_container_that_is_not_a_sequential_is_refused_not_flattened():
    """Stacking the residual block's children in order would silently drop the skip connection."""
    model = nn.Sequential(nn.Conv2d(3, 4, 1), _Residual(), nn.Flatten(), nn.Linear(4 * H * W, 2))
    with pytest.raises(ValueError, match="nested nn.Sequential containers only, but '1' is a _Residual"):
        leaf_layers(model)
    with pytest.raises(ValueError, match="nested nn.Sequential containers only"):
        GroupedNetwork(model, 2, device="cpu")


# -------------------------------------------------------------- global hooks: mutants of c641002 and bca6c97
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


# ---------------------------------- registered_hooks / _refuse_hooks: review and mutants of f37e303..6eb7195
def _hooked_sequential():
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    model[0].register_forward_hook(lambda module, inputs, output: output)
    model[2].register_full_backward_hook(lambda module, grad_in, grad_out: None)
    return model


def test_grouped_path_names_a_backward_hook_before_a_forward_hook():
    """With a forward hook on layer 0 and a backward hook on layer 2, the grouped path named the forward
    hook and sent the user to path='vmap', which then refused the backward hook."""
    from fedlib.engines.grouped import GroupedNetwork

    with pytest.raises(ValueError, match=r"^layer '2' \(Linear\) has a backward hook .* run no backward hooks"):
        GroupedNetwork(_hooked_sequential(), 2, device="cpu", dtype=torch.float64)


def test_registered_hooks_lists_every_kind_and_every_name_of_a_shared_module():
    """Kills R1 (``named_modules(remove_duplicate=False)`` -> ``named_modules()``: the second name of a
    shared module and its hooks went missing), R2 (``_backward_pre_hooks`` dropped from the tables:
    ``register_full_backward_pre_hook`` unlisted) and R6 (``__qualname__`` -> ``__name__``: a nested hook
    lost the name of the function that made it)."""
    def make_hook():
        def scale(module, inputs, output):
            return output

        return scale

    shared = nn.Linear(2, 2)
    shared.register_forward_hook(make_hook(), with_kwargs=False, always_call=True)
    shared.register_full_backward_pre_hook(lambda module, grad_output: None)
    model = nn.Sequential(shared, nn.ReLU(), shared)
    assert registered_hooks(model) == [
        ("0", "Linear", "forward hook", "test_registered_hooks_lists_every_kind_and_every_name_of_a_shared_module."
                                        "<locals>.make_hook.<locals>.scale"),
        ("0", "Linear", "backward pre-hook", "test_registered_hooks_lists_every_kind_and_every_name_of_a_shared_module."
                                             "<locals>.<lambda>"),
        ("2", "Linear", "forward hook", "test_registered_hooks_lists_every_kind_and_every_name_of_a_shared_module."
                                        "<locals>.make_hook.<locals>.scale"),
        ("2", "Linear", "backward pre-hook", "test_registered_hooks_lists_every_kind_and_every_name_of_a_shared_module."
                                             "<locals>.<lambda>"),
    ]


# ----------------------------------------------------------------------------------- load_checkpoint's reasons
def _save(path):
    return ck.save_checkpoint(path, config={"a": 1}, round_done=2, state={"w": np.arange(3.0)},
                              history=[{"round": 1}], seed=0, kind="test")


def test_an_empty_checkpoint_file_is_reported_as_empty(tmp_path):
    path = tmp_path / "ck.pkl"
    path.write_bytes(b"")
    with pytest.raises(ck.CheckpointError) as info:
        ck.load_checkpoint(path)
    assert info.value.reason == "empty (0 bytes)"


def test_a_truncated_checkpoint_names_the_unpickling_error_not_empty(tmp_path):
    path = _save(tmp_path / "ck.pkl")
    path.write_bytes(path.read_bytes()[:20])  # no footer left: read unchecked, fails to unpickle
    with pytest.raises(ck.CheckpointError) as info:
        ck.load_checkpoint(path)
    assert info.value.reason.startswith("truncated, corrupt or not a fedlib checkpoint: it does not unpickle (")


def test_a_read_error_while_unpickling_is_unreadable_not_corrupt(tmp_path, monkeypatch):
    path = _save(tmp_path / "ck.pkl")
    assert ck.load_checkpoint(path, kind="test")["round"] == 2

    def failing_load(fh):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(ck.pickle, "load", failing_load)
    with pytest.raises(ck.CheckpointError) as info:
        ck.load_checkpoint(path)
    assert info.value.reason == "unreadable (Input/output error)"


# -------------------------------------------------------- checkpoint, the parts' types: mutants of 8bd9827..
def _rewritten_checkpoint(tmp_path, **change):
    """A checkpoint saved by save_checkpoint, then re-pickled by hand with ``change`` (no footer: read
    unchecked, as a file written before the footer existed)."""
    from fedlib.checkpoint import load_checkpoint, save_checkpoint

    path = save_checkpoint(tmp_path / "c.ckpt", config={"a": 1}, round_done=2, state={"x": np.zeros(2)},
                           history=[{"round": 0}, {"round": 1}], seed=0)
    doc = load_checkpoint(path)
    doc.update(change)
    path.write_bytes(pickle.dumps(doc, protocol=4))
    return path


def test_a_footerless_checkpoint_without_changes_loads(tmp_path):
    from fedlib.checkpoint import load_checkpoint

    doc = load_checkpoint(_rewritten_checkpoint(tmp_path))
    assert doc["round"] == 2 and doc["extra"] == {} and doc["config"] == {"a": 1}


def test_a_checkpoint_with_round_minus_one_is_refused(tmp_path):
    from fedlib.checkpoint import CheckpointError, load_checkpoint

    path = _rewritten_checkpoint(tmp_path, round=-1)
    with pytest.raises(CheckpointError, match=r"is corrupt: round -1 < 0$") as info:
        load_checkpoint(path)
    assert info.value.reason == "corrupt: round -1 < 0"


@pytest.mark.parametrize("part, value, got, want", [
    ("round", True, "bool", "int"),   # a bool is an int to isinstance, not a round count
    ("extra", [], "list", "Mapping"),
    ("config", [("a", 1)], "list", "Mapping"),
    ("history", {}, "dict", "list"),
])
def test_a_checkpoint_part_of_the_wrong_type_is_refused(tmp_path, part, value, got, want):
    from fedlib.checkpoint import CheckpointError, load_checkpoint

    path = _rewritten_checkpoint(tmp_path, **{part: value})
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path)
    assert info.value.reason == f"corrupt: its {part!r} is a {got}, not a {want}"


def test_a_file_that_is_only_a_footer_fails_its_sha256(tmp_path):
    """A footer whose digest is not that of the (empty) pickle before it is a SHA-256 mismatch: the
    check runs whenever the file ends in a footer, the shortest such file included."""
    from fedlib.checkpoint import FOOTER, CheckpointError, load_checkpoint

    path = tmp_path / "f.ckpt"
    path.write_bytes(FOOTER + hashlib.sha256(b"not empty").hexdigest().encode("ascii"))
    with pytest.raises(CheckpointError, match="is corrupt: its SHA-256 does not match") as info:
        load_checkpoint(path)
    assert info.value.reason.startswith("corrupt: its SHA-256 footer does not match")


def test_a_checkpoint_path_that_cannot_be_read_is_a_checkpoint_error(tmp_path):
    """A folder given as the checkpoint (IsADirectoryError, an OSError): a CheckpointError naming the file,
    not a traceback."""
    from fedlib.checkpoint import CheckpointError, load_checkpoint

    folder = tmp_path / "ck"
    folder.mkdir()
    with pytest.raises(CheckpointError, match=rf"^load_checkpoint: checkpoint {folder} cannot be read \(") as info:
        load_checkpoint(folder)
    assert info.value.reason.startswith("unreadable (")


# -------------------------------------------------------------------- review and mutants of efe3bcd..52ae29d
def test_to_torch_tree_dtype_kinds_containers_and_copies():
    # mutants CK1 (float arrays kept float64 for a float32 model), CK2 (integer arrays cast to the model's
    # float dtype), CK3 (dicts left as numpy), CK4 (tensors sharing memory with the loaded arrays)
    from fedlib.checkpoint import to_torch_tree

    like = [torch.zeros(2, dtype=torch.float32)]
    saved = {"w": np.array([1.0, 2.0]), "count": np.array([3, 4]), "nested": [np.array([5.0])], "n": 7}
    out = to_torch_tree(saved, like=like)
    assert isinstance(out, dict) and isinstance(out["w"], torch.Tensor)
    assert out["w"].dtype == torch.float32 and out["nested"][0].dtype == torch.float32
    assert out["count"].dtype == torch.int64 and out["n"] == 7
    same_dtype = to_torch_tree({"w": saved["w"]}, like=torch.zeros(1, dtype=torch.float64))
    same_dtype["w"].add_(10.0)
    np.testing.assert_array_equal(saved["w"], [1.0, 2.0])  # the loaded arrays are not changed through the tensors


# -------------------------------------------------------------------- mutants of 37f92d9..d2bb791 (checkpoint.py)
def test_save_checkpoint_refuses_a_mapping_given_as_history(tmp_path):
    """``history`` is a list of per-round mappings; a mapping given for it is refused by name (mutant C1: without
    the Mapping in the refusal an empty dict was saved as an empty history, whose run would resume from round 0,
    and ``{"loss": ...}`` was iterated for its keys)."""
    args = dict(config={"a": 1}, round_done=1, state={"w": np.zeros(2)}, seed=0)
    for history in ({}, {"loss": [0.5]}):
        with pytest.raises(CheckpointError, match=r"^save_checkpoint: .*h\.ckpt: history must be a list of per-round "
                                                  r"mappings, got dict$"):
            save_checkpoint(tmp_path / "h.ckpt", history=history, **args)
    assert not (tmp_path / "h.ckpt").exists()


def test_config_diff_matches_set_entries_one_to_one():
    """Sets are compared entry by entry, each entry of one matched to its own entry of the other
    (``_same_set``): {nan, nan} (two NaN objects, which a set holds apart) is no {nan, 0.5}, as the second NaN
    finds no partner once the first has taken the other set's NaN (mutant C9: without ``rest.pop`` both NaNs
    matched the one NaN); and {1} is no {1, 2}, as 2 is left over (mutant C10: without the length check only
    the entries of the first set were looked for)."""
    two_nans = {float("nan"), float("nan")}
    assert len(two_nans) == 2
    assert config_diff({"s": two_nans}, {"s": {float("nan"), 0.5}}) == ["s"]
    assert config_diff({"s": {1}}, {"s": {1, 2}}) == ["s"]
    assert config_diff({"s": {1, 2}}, {"s": {1}}) == ["s"]
    assert config_diff({"s": two_nans}, {"s": {float("nan"), float("nan")}}) == []  # NaN equal to NaN, one to one


# ====================================================================== f9b9704..HEAD: to_torch_tree's per-entry dtypes
def _mixed_like():
    """A bfloat16 weight (2,) and a float32 bias (1,): to_numpy_tree saves the bfloat16 one as float32."""
    return [torch.zeros(2, dtype=torch.bfloat16), torch.zeros(1, dtype=torch.float32)]


def test_to_torch_tree_gives_a_list_shaped_like_like_its_entries_dtypes_even_where_saved_in_another():
    """Entry k of a list shaped like ``like`` takes like[k]'s dtype, also where the saved array has another one
    (a bfloat16 parameter is saved as float32: 1.5 and -0.25 are exact in both), in a dict, in a tuple and in a
    NamedTuple's field (a ServerState's params). Kills the mutants that convert every array to the one floating
    dtype (None for a mixed like: the bfloat16 entry stayed float32), that skip dicts and that do not look inside
    a list or tuple not shaped like ``like``."""
    from fedlib.algorithms import make_algorithm
    from fedlib.checkpoint import to_numpy_tree, to_torch_tree
    from fedlib.solvers import sgd

    like = _mixed_like()
    params = [torch.tensor([1.5, -0.25], dtype=torch.bfloat16), torch.tensor([0.75])]
    saved = to_numpy_tree({"p": params})
    assert [a.dtype for a in saved["p"]] == [np.float32, np.float32]
    want = [torch.bfloat16, torch.float32]
    back = to_torch_tree(saved, like=like)
    assert [t.dtype for t in back["p"]] == want and back["p"][0].tolist() == [1.5, -0.25]
    assert [t.dtype for t in to_torch_tree(([saved["p"]], 3), like=like)[0][0]] == want
    state = make_algorithm("fedavg", sgd(0.1)).init(params, num_clients=1)
    assert [t.dtype for t in to_torch_tree(to_numpy_tree(state), like=like).params] == want


def test_to_torch_tree_matches_only_lists_of_like_s_length_and_shapes():
    """A list is shaped like ``like`` only with as many arrays as like has tensors, each of its tensor's shape:
    a list with one array more, or one of another shape, is any other part, whose floating arrays keep their own
    dtype under a mixed like (float64 stays float64, not rounded to like's float32 entry). Kills the mutants that
    match a longer list (``len(obj) >= len(like)``) and that drop the shape test."""
    from fedlib.checkpoint import to_torch_tree

    like = _mixed_like()
    longer = [np.zeros(2), np.array([1 + 1e-12]), np.zeros(3)]
    assert [t.dtype for t in to_torch_tree(longer, like=like)] == [torch.float64] * 3
    assert to_torch_tree(longer, like=like)[1].item() == 1 + 1e-12
    other_shapes = [np.zeros(3), np.array([1 + 1e-12])]
    assert [t.dtype for t in to_torch_tree(other_shapes, like=like)] == [torch.float64] * 2


def test_to_torch_tree_keeps_a_namedtuple_of_like_s_length_out_of_the_entry_match():
    """A NamedTuple is no list shaped like ``like`` even where its fields happen to be arrays of like's shapes
    (a state's fields are named parts, not one entry per parameter): under a mixed like its float64 arrays keep
    their dtype. Kills the mutant that drops the ``_fields`` test."""
    from typing import NamedTuple

    from fedlib.checkpoint import to_torch_tree

    class Pair(NamedTuple):
        a: object
        b: object

    back = to_torch_tree(Pair(np.zeros(2), np.zeros(1)), like=_mixed_like())
    assert type(back) is Pair and (back.a.dtype, back.b.dtype) == (torch.float64, torch.float64)


def test_to_torch_tree_never_makes_a_floating_array_an_integer_one():
    """An entry whose tensor of ``like`` is an integer one (a BatchNorm num_batches_tracked in buffers_of) gives no
    dtype to a floating array at that place: it takes like's one floating dtype (float32 here), never int64 (1.5
    truncated to 1). Kills the mutant that takes every entry's dtype, integer ones too."""
    from fedlib.checkpoint import to_torch_tree

    like = [torch.zeros(2, dtype=torch.float32), torch.zeros((), dtype=torch.int64)]
    back = to_torch_tree([np.zeros(2), np.array(1.5)], like=like)
    assert [t.dtype for t in back] == [torch.float32, torch.float32] and back[1].item() == 1.5


def test_to_torch_tree_takes_the_floating_dtype_of_a_like_led_by_an_integer_tensor():
    """The one floating dtype of ``like`` is looked for among all its tensors, not only the first: with like =
    [int64 counter, float32 weight], a float64 array outside any like-shaped list becomes float32 (before the
    per-entry change, a non-floating first tensor left every array in its own dtype). Kills the mutant that
    collects the floating dtypes of like[0] only."""
    from fedlib.checkpoint import to_torch_tree

    like = [torch.zeros((), dtype=torch.int64), torch.zeros(2, dtype=torch.float32)]
    assert to_torch_tree({"x": np.array([0.5, 2.0])}, like=like)["x"].dtype == torch.float32

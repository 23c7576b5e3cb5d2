"""Tests that kill mutants of the Dec 4 input checks which the rest of the suite let survive.

Hand mutation run over ``models.scaled_width`` / ``count_parameters(trainable_only=)``,
``quadratic.random_quadratic``'s ``eig_range`` check, ``logistic.pack_params`` / ``unpack_params``,
``distributed.owned_clients``, ``results.device_name`` and
``experiments.acceleration.limit_distances_to_draw``: 37 mutants, 30 killed by the existing tests,
6 by the tests below, 1 left alive:

* R2 -- ``device_name``: ``dev.startswith("cpu:")`` -> ``dev.startswith("cpu")``. It differs only for
  a string that begins with ``"cpu"`` but is neither ``"cpu"`` nor ``"cpu:<n>"`` (``"cpufoo"``), which
  is no torch device (``torch.device("cpufoo")`` raises), so no device a run can use tells the two
  apart. Treated as equivalent; the docstring promises nothing about such strings.
"""
import sys
import types

import numpy as np
import pytest
import torch

from fedlib.models import count_parameters
from fedlib.problems.logistic import pack_params
from fedlib.problems.quadratic import random_quadratic
from fedlib.results import device_name


@pytest.mark.parametrize("flag", [1, 0, None, np.True_])
def test_count_parameters_refuses_a_trainable_only_that_is_no_bool(flag):
    """Mutant M5: ``not isinstance(trainable_only, bool)`` -> ``isinstance(trainable_only, str)``
    (only strings refused): 1, 0, None or numpy's bool would be taken by their truth value."""
    with pytest.raises(ValueError, match=r"^trainable_only must be True or False, got "):
        count_parameters(torch.nn.Linear(2, 2), trainable_only=flag)


def test_random_quadratic_refuses_a_bytes_eig_range():
    """Mutants Q2 (the ``isinstance(eig_range, (str, bytes))`` test dropped) and Q7 (``(str, bytes)``
    -> ``str``): ``b"12"`` unpacks to the ints 49 and 50, which pass every later check, so it built a
    problem with eigenvalues in [49, 50] without a word."""
    with pytest.raises(ValueError, match=r"^eig_range must be a pair \(low, high\) of eigenvalues > 0, got b'12'$"):
        random_quadratic(2, 2, eig_range=b"12")


def test_random_quadratic_names_a_str_eig_range_as_not_a_pair():
    """Mutant Q2: without the str test, ``"12"`` fails later as ``eig_range[0]`` not being a number,
    a message about the wrong thing (the argument is no pair at all)."""
    with pytest.raises(ValueError, match=r"^eig_range must be a pair \(low, high\) of eigenvalues > 0, got '12'$"):
        random_quadratic(2, 2, eig_range="12")


def test_pack_params_refuses_extra_keys():
    """Mutant L1: ``set(params) != {"W", "b"}`` -> ``not set(params) >= {"W", "b"}``: a dict with a
    third key (a typo such as ``"B"`` next to ``"b"``) was packed silently, the extra entry dropped."""
    params = {"W": np.zeros((2, 3)), "b": np.zeros(3), "B": np.ones(3)}
    with pytest.raises(ValueError, match=r"^params must be a dict with keys 'W' and 'b', got \['B', 'W', 'b'\]$"):
        pack_params(params)


@pytest.mark.parametrize("w_shape, b_shape", [((3, 4), (2, 4)), ((2, 3, 4), (4,)), ((2, 3, 4), (5, 4))])
def test_pack_params_refuses_a_bias_whose_leading_axes_differ(w_shape, b_shape):
    """Mutant L4: ``b_shape != w_shape[:-2] + w_shape[-1:]`` -> ``b_shape[-1:] != w_shape[-1:]``
    (only C compared): a bias with other leading (client) axes than W reached numpy's concatenate
    and failed there with a message that names neither W nor b."""
    with pytest.raises(ValueError, match=r"^params: W must have shape \(\.\.\., d, C\) and b \(\.\.\., C\)"):
        pack_params({"W": np.zeros(w_shape), "b": np.zeros(b_shape)})


def test_device_name_does_not_ask_torch_about_a_device_that_is_not_cuda(monkeypatch):
    """Mutant R3: ``not dev.startswith("cuda")`` -> ``dev in ("mps", "meta") or
    dev.startswith("xpu")`` (a list of known non-CUDA devices): any other device (``"hpu"``,
    ``"xla:0"``, ``"privateuseone"``) went to ``torch.cuda.get_device_name``. Real torch refuses a
    non-CUDA device there, so the mutant still returned the string; a torch stand-in that names any
    device shows the difference: only a CUDA device is named by torch."""
    asked = []

    def get_device_name(dev):
        asked.append(dev)
        return "Fake GPU"

    fake = types.SimpleNamespace(device=str, cuda=types.SimpleNamespace(get_device_name=get_device_name))
    monkeypatch.setitem(sys.modules, "torch", fake)
    assert [device_name(d) for d in ("hpu", "xla:0", "privateuseone")] == ["hpu", "xla:0", "privateuseone"]
    assert asked == []
    assert device_name("cuda:1") == "Fake GPU" and asked == ["cuda:1"]

"""Review and hand mutation testing (helper B) of the code changed on December 4 (f37e303..6eb7195):
``fedlib.report.plus_minus`` / ``transposed_markdown_table``, ``fedlib.engines.grouped.registered_hooks`` /
``_refuse_hooks``, the backward-hook refusal of the vmap path, ``fedlib.experiments.run_seeds``,
``speedup.sampling_summary``'s ``_summary_population`` and the plain floats of ``theory.theorem1_bound`` /
``theorem1_explicit_bound``.

Part 1 (review): each test fails on the code before its fix. Part 2: each test's docstring names the mutant
it kills, a mutant that survived tests/test_leftovers_dec4d.py, tests/test_report_tables.py,
tests/test_bounds.py and tests/test_api_page_dec4.py.

SURVIVORS_PLACEHOLDER
"""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from torch import nn

from fedlib.engines.grouped import registered_hooks
from fedlib.report import plus_minus, transposed_markdown_table


# --------------------------------------------------------------------------- part 1: review findings
@pytest.mark.parametrize("error", [torch.tensor(-0.1), np.array(-0.1), torch.tensor(float("nan")), True, np.True_])
def test_plus_minus_refuses_negative_errors_of_any_number_type(error):
    """``isinstance(error, numbers.Real)`` let a 0-d torch tensor or numpy array through, which fmt then
    printed as a number: ``plus_minus(0.5, torch.tensor(-0.1))`` gave '0.5 ± -0.1'; a bool gave '1 ± True'."""
    with pytest.raises(ValueError, match="standard error or deviation"):
        plus_minus(0.5, error)


def test_plus_minus_keeps_strings_and_formats_tensors():
    """A guard: a string error is a label, printed as it is (even one that reads as a negative number);
    a 0-d tensor is formatted as the number it holds."""
    assert plus_minus(0.5, "n/a") == "0.5 ± n/a"
    assert plus_minus(0.5, "-1") == "0.5 ± -1"
    assert plus_minus(torch.tensor(0.25), torch.tensor(0.0125)) == "0.25 ± 0.0125"


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


def _srow(m, q, value, eff, scheme="with-replacement", rounds=1024):
    from fedlib.experiments import speedup as S

    return S.SamplingRow("fednova", scheme, m, q, rounds, 6.5, 0.01, value, 0.01, eff)


def test_sampling_summary_names_the_bad_q_eff_among_several_rows():
    """Two rows at q = 16 (two values of T), the second without q_eff: the message printed the first row's
    good value ('has effective_clients 15.1, not a number > 0')."""
    from fedlib.experiments import speedup as S

    big = [_srow(256, 4, 0.2, 3.95), _srow(256, 16, 0.1, 15.1), _srow(256, 16, 0.1, float("nan"), rounds=4096)]
    small = [_srow(4, 4, 0.3, 2.29), _srow(4, 16, 0.25, 3.4)]
    with pytest.raises(ValueError, match=r"^big: the row with q = 16 has effective_clients nan, not a number > 0"):
        S.sampling_summary(big, small, -0.5, [], 2.0, 1.2, 4, 16)


# --------------------------------------------------------------------------- part 2: mutants that survived

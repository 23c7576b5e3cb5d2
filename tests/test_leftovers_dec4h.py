"""Leftovers of the December 4 audits (helper A, round h): permissive inputs that gave a silent or nonsense
result. bound_check dropped a momentum given with solver='sgd'; plus_minus printed 'nan ± 0.1'; the transposed
table formatted its header with the cells' spec; a finite float64 value that overflows float32 was reported as
'NaN or inf' (initial model, train_clients) or taken silently as inf (TensorEngine's features); tree_index read a
tuple as one index per axis. Each test fails on the code before its fix."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from fedlib.algorithms import make_algorithm
from fedlib.engines.stacked import RunSpec
from fedlib.experiments import bounds
from fedlib.experiments.custom import TensorEngine, train_clients
from fedlib.report import plus_minus, transposed_markdown_table
from fedlib.schedules import FixedSteps
from fedlib.solvers import sgd
from fedlib.tree import tree_index


# --------------------------------------------------------------------------- 1. bound_check: momentum with SGD
def test_bound_check_refuses_momentum_with_sgd():
    """Was: bound_check(..., "sgd", 100, momentum=0.7) ran plain SGD, the momentum dropped (as make_solver refuses)."""
    problem, steps = bounds.default_setup(seed=0, dim=3)
    with pytest.raises(ValueError, match=r"^momentum: solver 'sgd' has no momentum buffer, got momentum = 0\.7 "
                                         r"\(use solver='momentum'\)$"):
        bounds.bound_check(problem, steps, "fednova", "sgd", 100, momentum=0.7, replicas=1)
    with pytest.raises(ValueError, match=r"got momentum = 0\.0 "):  # 0 too: it is no momentum of SGD's
        bounds.bound_check(problem, steps, "fednova", "sgd", 100, momentum=0.0, replicas=1)


def test_bound_check_momentum_default_is_still_half():
    """The heavy ball's default rho = 0.5 (chapter 7 passes none): tau_eff of a_i(rho = 0.5), as given explicitly."""
    problem, steps = bounds.default_setup(seed=0, dim=3)
    row = bounds.bound_check(problem, steps, "fednova", "momentum", 100, lr_scale=0.02, replicas=1)
    given = bounds.bound_check(problem, steps, "fednova", "momentum", 100, lr_scale=0.02, momentum=0.5, replicas=1)
    assert row.measured == given.measured and row.tau_eff == given.tau_eff
    rho = 0.5
    norms = [sum((1 - rho ** (k + 1)) / (1 - rho) for k in range(int(t))) for t in steps]
    assert row.tau_eff == pytest.approx(float(np.mean(norms)), rel=1e-12)
    assert bounds.bound_check(problem, steps, "fednova", "sgd", 100, replicas=1).tau_eff == float(np.mean(steps))


# --------------------------------------------------------------------------- 2. plus_minus of NaN / inf
@pytest.mark.parametrize("value, error, name, shown", [(float("nan"), 0.1, "value", "nan"),
                                                       (float("inf"), 0.1, "value", "inf"),
                                                       (np.float64("-inf"), 0.0, "value", "-inf"),
                                                       (torch.tensor(float("nan")), 0.1, "value", "nan"),
                                                       (0.5, float("inf"), "error", "inf"),
                                                       (0.5, np.float32("inf"), "error", "inf")])
def test_plus_minus_refuses_a_non_finite_number(value, error, name, shown):
    """Was: 'nan ± 0.1', 'inf ± 0.1', '-inf ± 0', '0.5 ± inf' (a NaN error was refused already)."""
    with pytest.raises(ValueError, match=rf"^{name}: plus_minus needs a finite number, got {shown}$"):
        plus_minus(value, error)


def test_plus_minus_still_prints_numbers_and_strings():
    assert plus_minus(0.2637, 0.02213, ".4g") == "0.2637 ± 0.02213"
    assert plus_minus(np.float32(0.5), 0, ".2f") == "0.50 ± 0"
    assert plus_minus("n/a", "—") == "n/a ± —"  # pre-formatted strings as they are
    assert plus_minus(3, np.int64(1)) == "3 ± 1"
    with pytest.raises(ValueError, match=r"^error: a standard error or deviation is >= 0, got nan$"):
        plus_minus(0.5, float("nan"))  # as before


# --------------------------------------------------------------------------- 3. transposed table: header as given
def test_transposed_markdown_table_prints_the_header_as_given():
    """Was: a numeric header entry formatted with the cells' spec (0.123456 -> '0.123' with '.3g')."""
    table = transposed_markdown_table(["T", 0.123456, 2, np.float64(0.5)], [[100, 0.5, 1, 1.0], [400, 0.25, 2, 3.0]])
    assert table.splitlines() == ["| T | 100 | 400 |", "|---|---|---|", "| 0.123456 | 0.5 | 0.25 |",
                                  "| 2 | 1 | 2 |", "| 0.5 | 1 | 3 |"]
    # the header of markdown_table itself, printed as str: the same
    assert transposed_markdown_table(["T", "error"], [[100, 0.5]], ".2f").splitlines()[2] == "| error | 0.50 |"


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


# --------------------------------------------------------------------------- 4. float64 -> float32 overflow
def _run(params=None):
    return RunSpec(make_algorithm("fednova", sgd(0.1)), [np.arange(0, 4), np.arange(4, 8)], FixedSteps([1, 2]), seed=0,
                   params=params)


def _features(bad_row=None):
    torch.manual_seed(0)
    x = torch.randn(8, 6, dtype=torch.float64)
    if bad_row is not None:
        x[bad_row, 2] = 1e39  # finite in float64, beyond float32's 3.4e38
    return x


_OVERFLOW = r"overflows torch\.float32: finite as torch\.float64, inf once cast"


def test_initial_model_that_overflows_float32_is_named_so():
    """Was: 'runs[0].params: parameter 'bias' holds NaN or inf (the initial model must be finite)'."""
    model = nn.Linear(6, 3)
    params = {n: p.detach().double().clone() for n, p in model.named_parameters()}
    params["bias"][1] = 1e39
    with pytest.raises(ValueError, match=rf"^runs\[0\]\.params: parameter 'bias' {_OVERFLOW} \(the initial model must "
                                         r"be finite\)$"):
        TensorEngine(model, _features(), torch.arange(8) % 3, [_run(params)], rounds=1, batch_size=2, dropout=False,
                     dtype=torch.float32)
    params["bias"][1] = float("inf")  # a real inf: the old message
    with pytest.raises(ValueError, match=r"^runs\[0\]\.params: parameter 'bias' holds NaN or inf \(the initial model"):
        TensorEngine(model, _features(), torch.arange(8) % 3, [_run(params)], rounds=1, batch_size=2, dropout=False,
                     dtype=torch.float32)


@pytest.mark.parametrize("which", ["features", "test_features"])
def test_tensor_engine_refuses_features_that_overflow_float32(which):
    """Was: accepted, the engine's float32 features holding inf (training on them gives NaN)."""
    good, bad = _features(), _features(bad_row=5)
    kwargs = dict(rounds=1, batch_size=2, dropout=False, dtype=torch.float32)
    feats, tests = (bad, good) if which == "features" else (good, bad)
    with pytest.raises(ValueError, match=rf"^{which}: row 5 {_OVERFLOW}$"):
        TensorEngine(nn.Linear(6, 3), feats, torch.arange(8) % 3, [_run()], test_features=tests,
                     test_labels=torch.arange(8) % 3, **kwargs)
    # float64 engine: 1e39 is a feature like any other
    engine = TensorEngine(nn.Linear(6, 3).double(), feats, torch.arange(8) % 3, [_run()], test_features=tests,
                          test_labels=torch.arange(8) % 3, **{**kwargs, "dtype": torch.float64})
    assert engine._features.dtype == torch.float64 and math.isfinite(float(engine._features.abs().max()))


def test_train_clients_names_the_client_whose_features_overflow_float32():
    """Was: 'features hold NaN or inf (row 5)' — TensorEngine's argument and row, not client_x[1]'s sample 1."""
    x = _features(bad_row=5)
    ys = [torch.arange(4) % 3, torch.arange(4) % 3]
    with pytest.raises(ValueError, match=rf"^client_x\[1\] {_OVERFLOW} \(sample 1\)$"):
        train_clients(nn.Linear(6, 3), [x[:4], x[4:]], ys, rounds=1, lr=0.1, batch_size=2, dtype=torch.float32)
    x[5, 2] = float("nan")
    with pytest.raises(ValueError, match=r"^client_x\[1\] holds NaN or inf \(sample 1\)$"):  # as before
        train_clients(nn.Linear(6, 3), [x[:4], x[4:]], ys, rounds=1, lr=0.1, batch_size=2, dtype=torch.float32)


# --------------------------------------------------------------------------- 5. tree_index of a tuple
@pytest.mark.parametrize("leaf", [np.arange(12).reshape(3, 4), torch.arange(12).reshape(3, 4)])
@pytest.mark.parametrize("index", [(1, 2), (0,), (np.int64(1), 0), (slice(None), 0)])
def test_tree_index_refuses_a_tuple(leaf, index):
    """Was: tree_index({'a': x}, (1, 2)) == {'a': x[1, 2]} (one entry, two axes indexed), not rows 1 and 2."""
    with pytest.raises(ValueError, match=r"^i must be a row index \(an int, slice or index array\), got the tuple "
                                         r".* \(one axis per entry\): give rows as a list or an index array$"):
        tree_index({"a": leaf}, index)
    assert tree_index({"a": leaf}, [1, 2])["a"].shape == (2, 4)  # rows as a list still pass
